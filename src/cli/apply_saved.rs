//! `gkq apply PLANFILE`: apply exactly a saved plan, or refuse.
//!
//! The plan file says what it was made from ([`crate::gitops::Provenance`]) and carries an
//! integrity digest over everything else in it. Before anything is changed: the digest must
//! match (a file edited after gkq wrote it is refused); the target must be the plan's; the spec,
//! when it is available at the path the plan names, must still have the plan's digest (read from
//! the working tree, or from the plan's `--git-ref` resolved again, so a branch that moved is
//! noticed), and gkq plans again from it and from live state with the plan's options: any
//! difference from the file is refused, naming it, and otherwise the plan made now is applied
//! (it holds the sensitive values a file never does). Without the spec, every target of the plan
//! is read again and must still have the fingerprint the plan recorded. Either way, the jobs the
//! plan would stop are read again right before it acts. Like `terraform apply PLANFILE`, a saved
//! plan is applied without a confirmation prompt: reviewing it was the point of saving it.

use std::path::{Path, PathBuf};

use super::apply::{
    ApplyArgs, ApplyFormat, ApplyTarget, Consent, disruption_refusal, execute_on, print_plan_line,
    stale_error,
};
use super::gitops::{
    KubeHandle, acquire_lock, lock_state_dir, plan_key, record_revision, spec_args_for,
    spec_revision,
};
use super::output::print_diagnostics;
use super::plan::plan_loaded;
use super::target::{self, KubeSource, TargetFlag};
use super::{Exit, load_valid};
use crate::apply::Outcome;
use crate::gitops::saved::{self, SavedPlanError};
use crate::kube::connect::from_cluster;
use crate::model::DesiredState;
use crate::plan::Plan;
use crate::plan::provenance::{GKQ_VERSION, Provenance};
use crate::spec::Loaded;
use crate::spec::types::Target;

fn with_hint(e: SavedPlanError) -> anyhow::Error {
    let hint = e.hint();
    anyhow::anyhow!("{e}\nhint: {hint}")
}

pub async fn run(args: &ApplyArgs) -> anyhow::Result<Exit> {
    let path = &args.spec.spec;
    let key = plan_key();
    let plan = saved::read(path, key.as_deref()).map_err(with_hint)?;
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
    // The same guard as a fresh plan: the jobs are those running when the plan was made (apply
    // checks again with the jobs running now).
    if !plan.disruptions.is_empty() && !args.allow_disruption {
        anyhow::bail!("{}", disruption_refusal(&plan.disruptions));
    }
    let spec = check_spec(args, &provenance)?;
    if matches!(spec, SpecCheck::Invalid) {
        return Ok(Exit::Failed);
    }
    if matches!(spec, SpecCheck::Absent) {
        if let Some(sensitive) = plan.changes().find(|a| a.sensitive) {
            anyhow::bail!(
                "{} writes sensitive values, which a plan file never holds, and the spec they come from is not at {}; nothing was applied\nhint: run `gkq apply {}` from the directory the plan was made in, with the same --var values and GKQ_VAR_ environment",
                sensitive.addr,
                provenance.spec.path,
                path.display()
            );
        }
        if plan
            .changes()
            .any(|a| a.addr.kind == crate::addr::ResourceKind::KueueInstall)
        {
            anyhow::bail!(
                "the plan installs Kueue, and the settings for that (where the manifests come from) are in the spec, which is not at {}\nhint: run gkq from the directory the plan was made in, or plan again",
                provenance.spec.path
            );
        }
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
    describe(path, &plan, &provenance);
    let outcome = match spec {
        SpecCheck::Unchanged(loaded) => {
            let (loaded, desired) = *loaded;
            apply_derived(args, &plan, &provenance, state_dir, loaded, desired).await
        }
        _ => apply_as_saved(args, &plan, &provenance, state_dir).await,
    };
    if let Some(lock) = local_state {
        lock.release().await;
    }
    outcome
}

/// With the spec at hand: plans again from it and the live state of now with the plan's own
/// options, refuses any difference from the plan file, and applies the plan made now (it holds
/// the sensitive values the file does not).
async fn apply_derived(
    args: &ApplyArgs,
    saved_plan: &Plan,
    provenance: &Provenance,
    state_dir: PathBuf,
    loaded: Loaded,
    desired: DesiredState,
) -> anyhow::Result<Exit> {
    let spec_args = spec_args_for(&provenance.spec, &args.spec);
    let mut target_args = args.target.clone();
    target_args.state_dir = Some(state_dir);
    target_args.target = Some(match provenance.target {
        Target::Gcp => TargetFlag::Gcp,
        Target::Local => TargetFlag::Local,
    });
    let planned = plan_loaded(
        &spec_args,
        loaded,
        desired,
        &target_args,
        saved_plan.options.clone(),
    )
    .await?;
    let differences = saved::differences(saved_plan, &planned.plan);
    if !differences.is_empty() {
        anyhow::bail!(
            "{} is not the plan gkq makes now from the same spec, so nothing was applied:\n  - {}\nhint: if live state changed, run `gkq plan --out FILE` again and review the new plan; a plan file is applied only as `gkq plan --out` wrote it",
            args.spec.spec.display(),
            differences.join("\n  - ")
        );
    }
    if !planned.plan.disruptions.is_empty() && !args.allow_disruption {
        anyhow::bail!("{}", disruption_refusal(&planned.plan.disruptions));
    }
    let held = acquire_lock(
        &planned.session,
        planned.kube_client.as_ref(),
        &planned.plan.cluster.cluster,
        &args.lock,
    )
    .await?;
    let target = ApplyTarget {
        session: &planned.session,
        plan: &planned.plan,
        kube_client: planned.kube_client.as_ref(),
        kueue: Some(&planned.desired.kueue),
    };
    let result = finish(args, &target, provenance).await;
    settle(&planned.session).await;
    held.release().await;
    result
}

/// Without the spec: checks the plan file against live state and applies it as it is.
async fn apply_as_saved(
    args: &ApplyArgs,
    plan: &Plan,
    provenance: &Provenance,
    state_dir: PathBuf,
) -> anyhow::Result<Exit> {
    let session =
        target::connect_to(&args.target, provenance.target, state_dir, &plan.cluster).await?;
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
        plan,
        kube_client: kube_client.as_ref(),
        kueue: None,
    };
    let result = finish(args, &target, provenance).await;
    settle(&session).await;
    held.release().await;
    result
}

/// The simulated cluster reacts to what was applied; written before the state lock goes.
async fn settle(session: &target::Session) {
    if let Some(local) = session.kube.local()
        && let Err(e) = local.settle().await
    {
        eprintln!("warning: {e}");
    }
}

/// Checks and applies, then records the applied revision; the exit code.
async fn finish(
    args: &ApplyArgs,
    target: &ApplyTarget<'_>,
    provenance: &Provenance,
) -> anyhow::Result<Exit> {
    let json = args.output == ApplyFormat::Json;
    if json {
        print_plan_line(target.plan)?;
    }
    let consent = Consent {
        force_conflicts: args.force_conflicts,
        allow_disruption: args.allow_disruption,
    };
    // A plan without changes is still checked: "nothing to do" can be stale too.
    let report = execute_on(target, json, &consent)
        .await
        .map_err(stale_error)?;
    let plan = target.plan;
    if !report.is_success() {
        let failed = report
            .results
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Succeeded | Outcome::Unchanged))
            .count();
        eprintln!(
            "{failed} action(s) failed or were skipped; fix the cause, then plan again and apply the new plan."
        );
        return Ok(Exit::Failed);
    }
    if !plan.has_changes() && !json {
        println!("{}", plan.summary);
    }
    let kube = KubeHandle::new(target.session, target.kube_client, &plan.cluster);
    record_revision(target.session, kube.api(), &plan.cluster, &provenance.spec).await;
    Ok(Exit::Ok)
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
    /// It is there and has the plan's digest.
    Unchanged(Box<(Loaded, DesiredState)>),
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
    Ok(SpecCheck::Unchanged(Box::new((loaded, desired))))
}
