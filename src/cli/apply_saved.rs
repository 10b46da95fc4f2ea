//! `gkq apply PLANFILE`: apply exactly a saved plan, or refuse.
//!
//! The plan file says what it was made from ([`crate::gitops::Provenance`]). Before anything is
//! changed: the target must be the plan's; the spec, when it is available at the path the plan
//! names, must still have the plan's digest (read from the working tree, or from the plan's
//! `--git-ref` resolved again, so a branch that moved is noticed); the cluster's lock is taken;
//! and every target of the plan is read again and must still have the fingerprint the plan
//! recorded. Like `terraform apply PLANFILE`, a saved plan is applied without a confirmation
//! prompt: reviewing it was the point of saving it.

use std::path::{Path, PathBuf};

use super::apply::{ApplyArgs, ApplyTarget, execute_on, stale_error};
use super::gitops::{
    KubeHandle, acquire_lock, lock_state_dir, record_revision, spec_args_for, spec_revision,
};
use super::output::print_diagnostics;
use super::plan::{PlanFormat, render_plan};
use super::target::{self, KubeSource, TargetFlag};
use super::{Exit, load_valid};
use crate::apply::Outcome;
use crate::gitops::provenance::{GKQ_VERSION, Provenance};
use crate::gitops::saved::{self, SavedPlanError};
use crate::kube::connect::from_cluster;
use crate::model::DesiredState;
use crate::plan::Plan;
use crate::spec::types::Target;

fn with_hint(e: SavedPlanError) -> anyhow::Error {
    let hint = e.hint();
    anyhow::anyhow!("{e}\nhint: {hint}")
}

pub async fn run(args: &ApplyArgs) -> anyhow::Result<Exit> {
    let path = &args.spec.spec;
    let plan = saved::read(path).map_err(with_hint)?;
    let Some(provenance) = plan.provenance.clone() else {
        return Err(with_hint(SavedPlanError::NoProvenance {
            path: path.display().to_string(),
        }));
    };
    if provenance.gkq_version != GKQ_VERSION {
        eprintln!(
            "warning: {} was made by gkq {}; this is gkq {GKQ_VERSION}.",
            path.display(),
            provenance.gkq_version
        );
    }
    let requested = match args.target.target {
        Some(TargetFlag::Gcp) => Target::Gcp,
        Some(TargetFlag::Local) => Target::Local,
        None => provenance.target,
    };
    if requested != provenance.target {
        return Err(with_hint(SavedPlanError::TargetMismatch {
            planned: provenance.target,
            requested,
        }));
    }
    // The same guard as a fresh plan: the jobs are those running when the plan was made.
    if !plan.disruptions.is_empty() && !args.allow_disruption {
        let jobs: Vec<String> = plan
            .disruptions
            .iter()
            .flat_map(|d| d.jobs.iter().map(move |j| format!("{} -> {j}", d.addr)))
            .collect();
        anyhow::bail!(
            "refusing to apply: this plan stops running work:\n  {}\nWait for the jobs to finish and plan again, or pass --allow-disruption; nothing was changed",
            jobs.join("\n  ")
        );
    }
    let desired = match check_spec(args, &provenance)? {
        SpecCheck::Invalid => return Ok(Exit::Failed),
        SpecCheck::Absent => None,
        SpecCheck::Unchanged(desired) => Some(desired),
    };
    let needs_kueue_settings = plan
        .changes()
        .any(|a| a.addr.kind == crate::addr::ResourceKind::KueueInstall);
    if needs_kueue_settings && desired.is_none() {
        anyhow::bail!(
            "the plan installs Kueue, and the settings for that (where the manifests come from) are in the spec, which is not at {}\nhint: run gkq from the directory the plan was made in, or plan again",
            provenance.spec.path
        );
    }

    let state_dir = args
        .target
        .state_dir
        .clone()
        .or_else(|| provenance.state_dir.as_ref().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(".gkq/local"));
    // The local world is read when the session connects: lock it first (see `lock_local_state`).
    let local_state = match provenance.target {
        Target::Local => Some(lock_state_dir(&state_dir, &args.lock).await?),
        Target::Gcp => None,
    };
    let session =
        target::connect_to(&args.target, provenance.target, state_dir, &plan.cluster).await?;
    describe(path, &plan, &provenance);
    let json = args.output == PlanFormat::Json;

    // Kubernetes credentials from the cluster, as at plan time, when it exists now.
    let mut kube_client = None;
    if let KubeSource::FromCluster(tokens) = &session.kube
        && let Some(cluster) = session
            .gke
            .get_cluster(&plan.cluster)
            .await
            .map_err(|e| anyhow::anyhow!("reading cluster {}: {e}", plan.cluster.name()))?
        && cluster
            .get("endpoint")
            .and_then(|e| e.as_str())
            .is_some_and(|e| !e.is_empty())
    {
        kube_client = Some(
            from_cluster(&cluster, tokens.as_ref())
                .await
                .map_err(|e| anyhow::anyhow!("connecting to Kubernetes: {e}"))?,
        );
    }

    let held = acquire_lock(
        &session,
        kube_client.as_ref(),
        &plan.cluster.cluster,
        &args.lock,
    )
    .await?;
    let target = ApplyTarget {
        session: &session,
        plan: &plan,
        kube_client: kube_client.as_ref(),
        kueue: desired.as_ref().map(|d| &d.kueue),
    };
    // A plan without changes is still checked: "nothing to do" can be stale too.
    let result = execute_on(&target, json, args.force_conflicts).await;
    let report = match result {
        Ok(report) => report,
        Err(stale) => {
            held.release().await;
            if let Some(lock) = local_state {
                lock.release().await;
            }
            return Err(stale_error(stale));
        }
    };
    let succeeded = report.is_success();
    if succeeded {
        if !plan.has_changes() {
            if json {
                render_plan(&plan, PlanFormat::Json)?;
            } else {
                println!("{}", plan.summary);
            }
        }
        let kube = KubeHandle::new(&session, kube_client.as_ref(), &plan.cluster);
        record_revision(&session, kube.api(), &plan.cluster, &provenance.spec).await;
    }
    held.release().await;
    if let Some(lock) = local_state {
        lock.release().await;
    }
    if succeeded {
        Ok(Exit::Ok)
    } else {
        let failed = report
            .results
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Succeeded | Outcome::Unchanged))
            .count();
        eprintln!(
            "{failed} action(s) failed or were skipped; fix the cause, then plan again and apply the new plan."
        );
        Ok(Exit::Failed)
    }
}

/// One paragraph on stderr: which plan, made when and from what.
fn describe(path: &Path, plan: &Plan, provenance: &Provenance) {
    eprintln!(
        "Applying the saved plan {} for cluster {}: {}\n  made {} by gkq {} from {} ({}{})",
        path.display(),
        plan.cluster.name(),
        plan.summary,
        provenance.created_at,
        provenance.gkq_version,
        provenance.spec.describe(),
        provenance.spec.path,
        provenance
            .spec
            .env
            .as_ref()
            .map(|e| format!(", env {e}"))
            .unwrap_or_default(),
    );
}

/// What the spec a saved plan names says now.
enum SpecCheck {
    /// It is there and has the plan's digest; its desired state (for Kueue's install settings).
    Unchanged(Box<DesiredState>),
    /// It is not at the path the plan names: only live state can be checked.
    Absent,
    /// It no longer validates (diagnostics printed).
    Invalid,
}

/// Loads the spec the plan names, when it is there; a changed digest is an error.
fn check_spec(args: &ApplyArgs, provenance: &Provenance) -> anyhow::Result<SpecCheck> {
    let spec_args = spec_args_for(&provenance.spec, &args.spec);
    if spec_args.git_ref.is_none() && !spec_args.spec.exists() {
        eprintln!(
            "note: the spec {} is not here, so only live state is checked against the plan.",
            spec_args.spec.display()
        );
        return Ok(SpecCheck::Absent);
    }
    let (ok, diags, sources) = load_valid(&spec_args);
    print_diagnostics(&diags, &sources);
    let Some((loaded, desired)) = ok else {
        eprintln!(
            "The spec {} no longer validates; nothing was applied.",
            spec_args.spec.display()
        );
        return Ok(SpecCheck::Invalid);
    };
    let now = spec_revision(&spec_args, &loaded);
    saved::check_spec(&provenance.spec, &now).map_err(with_hint)?;
    Ok(SpecCheck::Unchanged(Box::new(desired)))
}
