//! `gkq status` as a whole, as a pure function of what was read: the applied revision (from the
//! revision ConfigMap, or the cluster's revision labels when Kubernetes is not reachable), the
//! local checkout (HEAD, whether the spec's files are committed, the spec digest), drift (whether
//! a plan has changes), and the live report of [`super::status`].

use serde::Serialize;

use super::status::LiveReport;
use crate::plan::digest::short_digest;
use crate::plan::provenance::SpecRevision;
use crate::plan::revision::{AppliedRevision, LabelRevision};
use crate::plan::{Orphan, Plan};
use crate::spec::types::Target;

/// `gkq status -o json` (format version 1).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackStatus {
    pub format_version: u32,
    /// `projects/{project}/locations/{location}/clusters/{cluster}`.
    pub cluster: String,
    pub target: Target,
    /// What the last apply recorded in the revision ConfigMap; `null` when none is readable.
    pub applied: Option<AppliedRevision>,
    /// The short forms on the cluster's GKE labels; `null` without a cluster or labels.
    pub applied_labels: Option<LabelRevision>,
    pub local: Local,
    /// Whether the local spec (files, environment, variables) is the one last applied; `null`
    /// when no applied revision is known.
    pub spec_matches_applied: Option<bool>,
    pub drift: Drift,
    /// What gkq owns that the spec no longer names and a plan without `--prune` leaves in place,
    /// with what each holds (a job's quota): work that status's jobs, which are the spec's, do
    /// not list.
    pub orphans: Vec<Orphan>,
    /// The command that deletes the orphans; absent when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prune_command: Option<String>,
    /// Jobs, node pools and queues as they live (see [`super::status`]).
    #[serde(flatten)]
    pub live: LiveReport,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Local {
    pub spec: String,
    pub spec_digest: String,
    /// HEAD of the checkout holding the spec, when it is in git.
    pub head: Option<String>,
    pub branch: Option<String>,
    /// Whether every file the spec read is committed and unmodified.
    pub clean: Option<bool>,
    /// Commits HEAD is ahead of and behind the applied commit, when both are in the checkout.
    pub ahead_of_applied: Option<usize>,
    pub behind_applied: Option<usize>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    /// Whether a plan would change anything (orphans are left in place, not changed).
    pub changes: bool,
    /// The plan's summary line (which counts the orphans).
    pub summary: String,
}

/// The checkout the spec was read from, as git reported it.
#[derive(Debug, Clone, Default)]
pub struct Checkout {
    pub head: Option<String>,
    pub branch: Option<String>,
    pub clean: Option<bool>,
    /// `(ahead, behind)` of HEAD against the applied commit, when both are known to git.
    pub ahead_behind: Option<(usize, usize)>,
}

/// What the applied revision, the checkout and a fresh plan say together.
pub struct StatusInputs<'a> {
    pub target: Target,
    pub applied: Option<AppliedRevision>,
    pub applied_labels: Option<LabelRevision>,
    pub local_spec: &'a SpecRevision,
    pub checkout: Checkout,
    pub plan: &'a Plan,
    pub live: LiveReport,
}

pub fn stack_status(inputs: StatusInputs<'_>) -> StackStatus {
    let StatusInputs {
        target,
        applied,
        applied_labels,
        local_spec,
        checkout,
        plan,
        live,
    } = inputs;
    let spec_matches_applied = match (&applied, &applied_labels) {
        (Some(applied), _) => Some(applied.spec_digest == local_spec.digest),
        (None, Some(labels)) => Some(labels.spec_digest == short_digest(&local_spec.digest)),
        (None, None) => None,
    };
    StackStatus {
        format_version: 1,
        cluster: plan.cluster.name(),
        target,
        applied,
        applied_labels,
        local: Local {
            spec: local_spec.path.clone(),
            spec_digest: local_spec.digest.clone(),
            head: checkout.head,
            branch: checkout.branch,
            clean: checkout.clean,
            ahead_of_applied: checkout.ahead_behind.map(|(a, _)| a),
            behind_applied: checkout.ahead_behind.map(|(_, b)| b),
        },
        spec_matches_applied,
        drift: Drift {
            changes: plan.has_changes(),
            summary: plan.summary.to_string(),
        },
        orphans: plan.orphans.clone(),
        prune_command: plan.prune_command(),
        live,
    }
}
