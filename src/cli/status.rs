//! `gkq status`: what the cluster runs, against what the local checkout says it should run.
//!
//! Sections, in order: the applied revision (from the revision ConfigMap, or the cluster's
//! revision labels when Kubernetes is not reachable), the local checkout (HEAD, whether the spec's
//! files are committed, the spec digest), and drift (whether a plan has changes); then the jobs
//! (observed placement beside the prediction), node pools and queues (read by [`super::status_jobs`], built by `report::status`).

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::output::{print_diagnostics, print_stdout};
use super::plan::{PlanFlags, options};
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};
use crate::gitops::git::{self, LocalHead};
use crate::gitops::revision::{self, AppliedRevision, LabelRevision};
use crate::ops::plan::plan_valid;
use crate::plan::digest::short_digest;
use crate::plan::provenance::SpecRevision;
use crate::plan::provenance::short_commit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum StatusFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub flags: PlanFlags,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: StatusFormat,
}

/// `gkq status -o json` (format version 1).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub format_version: u32,
    /// `projects/{project}/locations/{location}/clusters/{cluster}`.
    pub cluster: String,
    pub target: crate::spec::types::Target,
    /// What the last apply recorded in the revision ConfigMap; `null` when none is readable.
    pub applied: Option<AppliedRevision>,
    /// The short forms on the cluster's GKE labels; `null` without a cluster or labels.
    pub applied_labels: Option<LabelRevision>,
    pub local: Local,
    /// Whether the local spec (files, environment, variables) is the one last applied; `null`
    /// when no applied revision is known.
    pub spec_matches_applied: Option<bool>,
    pub drift: Drift,
    /// Jobs, node pools and queues as they live (see `report::status`).
    #[serde(flatten)]
    pub live: crate::report::status::LiveReport,
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
    /// Whether a plan would change anything.
    pub changes: bool,
    /// The plan's summary line.
    pub summary: String,
}

pub async fn run(args: &StatusArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    print_diagnostics(&diags, &sources);
    let Some((loaded, desired)) = ok else {
        return Ok(Exit::Failed);
    };
    let head = git::local_head(&loaded);
    let planned = plan_valid(
        &args.spec.source(),
        loaded,
        desired,
        &args.target.options(),
        options(&args.flags),
    )
    .await?;
    let cluster_ref = &planned.plan.cluster;
    // The revision planning stamped on the plan: the spec's digest is computed once.
    let local_spec = planned
        .plan
        .provenance
        .as_ref()
        .map(|p| &p.spec)
        .ok_or_else(|| anyhow::anyhow!("the plan records no spec revision"))?;
    // The cluster as planning read it: status reads GKE once.
    let live_cluster = planned.live.gke.cluster.as_ref();
    let applied_labels = live_cluster.and_then(LabelRevision::from_cluster);
    let kube = planned.kube();
    let applied = match (live_cluster, kube.api()) {
        (Some(_), Some(api)) => match revision::read_configmap(api, &cluster_ref.cluster).await {
            Ok(found) => found,
            Err(e) => {
                eprintln!("warning: cannot read the revision ConfigMap: {e}");
                None
            }
        },
        _ => None,
    };
    // The Workloads planning read: status reads them once.
    let live = super::status_jobs::report(
        &planned.session,
        &planned.desired,
        live_cluster,
        kube.api(),
        planned.workloads.clone(),
    )
    .await?;
    let status = build_status(
        cluster_ref.name(),
        planned.session.target,
        applied,
        applied_labels,
        local_spec,
        head.as_ref(),
        &planned.plan,
        live,
    );
    match args.output {
        StatusFormat::Json => {
            print_stdout(&format!("{}\n", serde_json::to_string_pretty(&status)?))?;
        }
        StatusFormat::Text => print_stdout(&to_text(&status, planned.session.simulated()))?,
    }
    Ok(Exit::Ok)
}

#[allow(clippy::too_many_arguments)]
fn build_status(
    cluster: String,
    target: crate::spec::types::Target,
    applied: Option<AppliedRevision>,
    applied_labels: Option<LabelRevision>,
    local_spec: &SpecRevision,
    head: Option<&LocalHead>,
    plan: &crate::plan::Plan,
    live: crate::report::status::LiveReport,
) -> Status {
    let spec_matches_applied = match (&applied, &applied_labels) {
        (Some(applied), _) => Some(applied.spec_digest == local_spec.digest),
        (None, Some(labels)) => Some(labels.spec_digest == short_digest(&local_spec.digest)),
        (None, None) => None,
    };
    let applied_commit = applied.as_ref().and_then(|a| a.commit.clone());
    let (ahead, behind) = match (head, &applied_commit) {
        (Some(head), Some(commit)) => {
            let near = git::spec_dir(std::path::Path::new(&local_spec.path));
            match git::ahead_behind(&near, &head.commit, commit) {
                Some((a, b)) => (Some(a), Some(b)),
                None => (None, None),
            }
        }
        _ => (None, None),
    };
    Status {
        format_version: 1,
        cluster,
        target,
        applied,
        applied_labels,
        local: Local {
            spec: local_spec.path.clone(),
            spec_digest: local_spec.digest.clone(),
            head: head.map(|h| h.commit.clone()),
            branch: head.and_then(|h| h.branch.clone()),
            clean: head.map(|h| h.clean),
            ahead_of_applied: ahead,
            behind_applied: behind,
        },
        spec_matches_applied,
        drift: Drift {
            changes: plan.has_changes(),
            summary: plan.summary.to_string(),
        },
        live,
    }
}

fn to_text(status: &Status, simulated: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Cluster  {}{}\n",
        status.cluster,
        if simulated {
            " (target local: simulated)"
        } else {
            ""
        }
    ));
    let applied = match (&status.applied, &status.applied_labels) {
        (Some(a), _) => {
            let what = match &a.commit {
                Some(c) => format!(
                    "commit {}, spec {}",
                    short_commit(c),
                    short_digest(&a.spec_digest)
                ),
                None => format!("spec {} (not from a commit)", short_digest(&a.spec_digest)),
            };
            format!(
                "{what}{}, applied {} by {} with gkq {}",
                a.env
                    .as_ref()
                    .map(|e| format!(" (env {e})"))
                    .unwrap_or_default(),
                a.applied_at,
                a.applied_by,
                a.gkq_version
            )
        }
        (None, Some(labels)) => format!(
            "spec {}{} (from the cluster's labels; Kubernetes not reachable for the details)",
            labels.spec_digest,
            labels
                .commit
                .as_ref()
                .map(|c| format!(", commit {c}"))
                .unwrap_or_default()
        ),
        (None, None) => "none recorded (no gkq apply has finished on this cluster)".to_string(),
    };
    out.push_str(&format!("Applied  {applied}\n"));
    let local = &status.local;
    let checkout = match (&local.head, local.clean) {
        (Some(head), Some(clean)) => format!(
            "HEAD {}{}{}",
            short_commit(head),
            local
                .branch
                .as_ref()
                .map(|b| format!(" on {b}"))
                .unwrap_or_default(),
            if clean {
                ""
            } else {
                ", with uncommitted changes to the spec"
            }
        ),
        _ => "not in git".to_string(),
    };
    out.push_str(&format!(
        "Local    {} (spec {}), {checkout}\n",
        local.spec,
        short_digest(&local.spec_digest)
    ));
    let relation = match status.spec_matches_applied {
        Some(true) => "the local spec is the one applied".to_string(),
        Some(false) => {
            let mut text = "the local spec differs from the one applied".to_string();
            match (local.ahead_of_applied, local.behind_applied) {
                (Some(a), Some(b)) if a > 0 || b > 0 => text.push_str(&format!(
                    " (HEAD is {a} commit(s) ahead of and {b} behind the applied commit)"
                )),
                _ => {}
            }
            text
        }
        None => "nothing applied to compare with".to_string(),
    };
    out.push_str(&format!("         {relation}\n"));
    let drift = if status.drift.changes {
        format!("{} Run `gkq plan` to see them.", status.drift.summary)
    } else {
        "none: live state matches the spec".to_string()
    };
    out.push_str(&format!("Drift    {drift}\n"));
    out.push_str(&crate::render::status::to_text(&status.live));
    out
}
