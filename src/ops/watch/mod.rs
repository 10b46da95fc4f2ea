//! `gkq watch` as a library call: re-plan when the spec changes, when live state drifts, or when
//! a remote branch moves; optionally apply; and follow each job's admission. What happens is told
//! to a [`WatchSink`] as [`WatchEvent`]s; the terminal rendering is `cli::watch`'s.
//!
//! Event driven, so an idle watch costs next to nothing: file events come from the OS (notify,
//! debounced by notify-debouncer-full, which also stitches an editor's write-then-rename into one
//! change), the drift check and `git fetch` run on a timer (`interval`), and jobs are polled only
//! while some job has not finished. A plan is told only when it differs from the last one told
//! ([`Plan::fingerprint`](crate::plan::Plan::fingerprint)). A stop signal ends the watch at once,
//! also in the middle of a plan; an apply in progress is interrupted between API calls, and its
//! locks are freed (the Lease expires).
//!
//! The steps, each in its own file: [`run`] is the event loop (file events, timers, stop),
//! [`cycle`] is one re-plan and what follows it, [`apply`] is what `--apply` does with a plan,
//! [`jobs`] follows the jobs' admission, and [`pools`] reads the node pools' sizes for it.

mod apply;
mod cycle;
mod jobs;
mod pools;
mod run;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::load::SpecSource;
use super::plan::Planned;
use super::session::TargetOptions;
use crate::apply::Sink;
use crate::gitops::watch::PlanTracker;
use crate::plan::digest::FileDigest;
use crate::plan::revision::PlacementRecords;
use crate::plan::{Plan, PlanOptions};
use crate::report::status::PlacedComparison;
use crate::spec::{Diagnostics, SourceMap};

pub use run::{spec_dir, watch};

/// What a watch does.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub spec: SpecSource,
    pub target: TargetOptions,
    pub plan: PlanOptions,
    /// Re-observe live state (and fetch the followed branch) this often.
    pub interval: Duration,
    /// Apply the plans [`auto_apply`](crate::gitops::watch::auto_apply) allows; `None`: plan only.
    pub apply: Option<AutoApplyOptions>,
    /// Follow a remote branch instead of the working tree.
    pub follow: Option<FollowBranch>,
    /// While jobs are being admitted or run, read their state this often.
    pub job_interval: Duration,
    /// How long to wait for another apply's lock.
    pub lock_timeout: Duration,
    /// With apply: how long each submitted job waits for Kueue's decision (`--submit-wait`).
    pub submit_wait: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct AutoApplyOptions {
    /// Also apply plans that replace or delete resources.
    pub allow_destructive: bool,
    /// Also apply plans that stop admitted or running jobs.
    pub allow_disruption: bool,
    /// Take over fields another field manager owns.
    pub force_conflicts: bool,
}

/// `git fetch REMOTE` every interval and plan each new commit of `BRANCH`.
#[derive(Debug, Clone)]
pub struct FollowBranch {
    pub remote: String,
    pub branch: String,
}

/// Why a plan is being made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    Start,
    Files(Vec<PathBuf>),
    Drift,
    Commit(String),
    Applied,
}

impl Trigger {
    pub fn describe(&self, spec_dir: &Path) -> String {
        match self {
            Trigger::Start => "initial plan".to_string(),
            Trigger::Files(paths) => {
                let mut names: Vec<String> = paths
                    .iter()
                    .map(|p| p.strip_prefix(spec_dir).unwrap_or(p).display().to_string())
                    .collect();
                names.sort();
                names.dedup();
                format!("spec changed ({})", names.join(", "))
            }
            Trigger::Drift => "live state changed".to_string(),
            Trigger::Commit(commit) => {
                format!(
                    "new commit {}",
                    crate::plan::provenance::short_commit(commit)
                )
            }
            Trigger::Applied => "after apply".to_string(),
        }
    }
}

/// What a watch tells its sink, in order.
pub enum WatchEvent<'a> {
    /// The spec does not validate; the watch waits for a fix. Told once per distinct problem.
    InvalidSpec {
        diagnostics: &'a Diagnostics,
        sources: &'a SourceMap,
    },
    /// Planning, fetching or locking failed. Told once per distinct problem.
    Problem(String),
    /// A plan that differs from the last one told.
    Planned {
        trigger: String,
        plan: &'a Plan,
    },
    /// `apply` holds this plan back, and why. Told once per plan.
    Held(String),
    /// An apply of the plan with this summary starts; its progress goes to [`WatchSink::apply_sink`].
    Applying(String),
    Applied,
    /// The apply ended with this many failed actions.
    ApplyIncomplete(usize),
    /// Live state changed under the plan; nothing was applied.
    NotApplied(String),
    /// A job reached a new stage of its admission timeline.
    JobStage {
        job: &'a str,
        stage: String,
    },
    /// A job seems stuck, and why. Told once per job and stage.
    JobStuck {
        job: &'a str,
        warning: &'a str,
    },
    /// Kueue placed a job: how that compares with the prediction recorded when gkq submitted
    /// this run. Told once per job and verdict.
    JobPlaced(&'a PlacedComparison),
}

/// Where a watch's events go.
pub trait WatchSink: Send + Sync {
    fn event(&self, event: WatchEvent<'_>);
    /// Where an apply's own progress goes.
    fn apply_sink(&self) -> &dyn Sink;
}

/// A running watch: what it was asked, and what it told last (so each thing is told once).
struct Watcher<'a> {
    options: &'a WatchOptions,
    sink: &'a dyn WatchSink,
    spec_dir: PathBuf,
    tracker: PlanTracker,
    /// The last problem told (invalid spec, failed plan or fetch), to tell each one once.
    last_problem: Option<String>,
    /// The plan `apply` held back last, by fingerprint, to say why once.
    last_hold: Option<String>,
    /// When following a branch: the commit being followed.
    commit: Option<String>,
    /// The last plan, whose session and clients the job timeline reads through.
    last: Option<Planned>,
    /// Each job's stage as last told.
    job_lines: BTreeMap<String, String>,
    /// The (job, stage) pairs whose stuck warning was told.
    warned: BTreeSet<(String, String)>,
    /// The predicted placements the applied revision records, read after each plan.
    records: PlacementRecords,
    /// Each placed job's comparison with its record, as last told.
    placed: BTreeMap<String, PlacedComparison>,
    /// Some job has not finished: the job timer polls.
    jobs_in_flight: bool,
    /// The spec's files (path and hash) the last plan was made from.
    spec_files: Option<Vec<FileDigest>>,
}

impl Watcher<'_> {
    fn spec_source(&self) -> SpecSource {
        let mut spec = self.options.spec.clone();
        if let Some(commit) = &self.commit {
            spec.git_ref = Some(commit.clone());
        }
        spec
    }

    /// Tells a problem unless it is the one told last.
    fn problem(&mut self, key: String, event: WatchEvent<'_>) {
        if self.last_problem.as_deref() != Some(key.as_str()) {
            self.sink.event(event);
            self.last_problem = Some(key);
        }
    }

    fn failure(&mut self, text: String) {
        self.problem(text.clone(), WatchEvent::Problem(text));
    }
}
