//! GitOps and CI: what a plan was made from, saved plans, the revision applied to a cluster,
//! one apply at a time, and watch mode.
//!
//! ```text
//! provenance  the commit a spec was read from, the clock and who applies (the data is in plan)
//! git         HEAD and clean-checkout detection (git2); `git fetch` with the user's own git
//! tree        the spec's files: the working tree (bounded reads) or one commit (`--git-ref`)
//! saved       reading a plan file and deciding whether it may be applied
//! revision    the applied revision: a ConfigMap's annotations and GKE resource labels
//! lock        one apply at a time: a Kubernetes Lease, or a file lock on the local target
//! watch       watch-mode decisions: which file events matter, when to print, when to apply (pure)
//! ```

pub mod git;
pub mod lock;
pub mod provenance;
pub mod revision;
pub mod saved;
pub mod tree;
pub mod watch;
