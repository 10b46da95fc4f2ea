//! The pipeline every command runs, as library calls (as cargo's commands call `cargo::ops`):
//! plain option structs in, results out. `cli/` parses arguments, calls these, renders the
//! results and picks the exit code; an in-cluster agent calls the same functions.
//!
//! ```text
//! load     SpecSource -> a valid spec and its desired state, or diagnostics
//! session  TargetOptions -> Session: the target, its GKE client, how Kubernetes is reached
//! head_start reads a plan makes whatever its spec says, started while the spec is loaded
//! plan     observe GKE and Kubernetes, plan, predict placements, notices, provenance -> Planned
//! lock     the local target's state lock and the cluster's Lease
//! apply    verify against live state and running work, execute, record the revision
//! converge the only apply (apply, apply PLANFILE, destroy, watch --apply, the agent): lock,
//!          plan or check the saved plan, refuse, approve, execute, record, settle, unlock
//! saved    a saved plan: read, what its spec says now, the session it is applied in
//! status   plan, the applied revision and the checkout -> the status report; where jobs landed
//! explain  why one job or Workload is where it is: Kueue's word, gkq's reproduction, fixes
//! logs     a job's driver log: wait while Kueue holds the job back, then read (or follow) it
//! dashboard a RayJob's Ray dashboard: wait for its head to run, then forward a local port to it
//! watch    re-plan on file changes, drift and new commits, apply when allowed, follow the jobs
//! ```
//!
//! Nothing here prints. What the person running a command is told along the way (the applied
//! revision recorded, a lock waited for, a warning that does not stop the command) is a
//! `tracing` event with the target [`NOTICE`]: the commands print those as plain lines
//! (`cli::output::NoticeLines`), the agent logs them as JSON like every other event.

pub mod apply;
pub mod converge;
pub mod dashboard;
pub mod explain;
pub mod head_start;
pub mod load;
pub mod lock;
pub mod logs;
pub mod plan;
pub mod saved;
pub mod session;
pub mod status;
pub mod watch;

/// What the pipeline's callers see of the executor: the events an apply tells as it goes, and
/// the sink a caller passes to hear them.
pub use crate::apply::{ApplyEvent, ApplyReport, DEFAULT_SUBMIT_WAIT, Outcome, Sink};

/// The `tracing` target of the pipeline's notices to the person running it (see above). Events
/// at INFO are told as they are, WARN ones as warnings; a `hint` field says what to do.
pub const NOTICE: &str = "gkq::notice";
