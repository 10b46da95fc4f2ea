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

use super::Exit;
use super::apply::{ApplyArgs, ApplyFormat, execute_reporting, print_plan_line, summarize_failure};
use super::output::print_diagnostics;
use crate::gitops::saved::{self, SavedPlanError};
use crate::model::DesiredState;
use crate::ops::apply::{
    ApplyTarget, Consent, disruption_refusal, record_revision, settle, stale_error,
};
use crate::ops::load::SpecSource;
use crate::ops::lock::{acquire_lock, lock_state_dir};
use crate::ops::plan::{plan_key, plan_valid};
use crate::ops::saved::{SpecCheck, check_spec, connect_for_plan};
use crate::ops::session::TargetOptions;
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
    let target = args.target.options();
    let requested = target.target.unwrap_or(provenance.target);
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
    let source = SpecSource::for_saved_plan(&provenance.spec, &args.spec.source());
    let spec = check_spec(&source, &provenance).map_err(with_hint)?;
    match &spec {
        SpecCheck::Invalid(validated) => {
            print_diagnostics(&validated.diagnostics, &validated.sources);
            eprintln!(
                "The spec {} no longer validates; nothing was applied.",
                source.spec.display()
            );
            return Ok(Exit::Failed);
        }
        SpecCheck::Absent => eprintln!(
            "note: the spec {} is not here, so only live state is checked against the plan.",
            source.spec.display()
        ),
        SpecCheck::Unchanged(_) => {}
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

    let state_dir = target
        .state_dir
        .clone()
        .or_else(|| provenance.state_dir.as_ref().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(".gkq/local"));
    // The local world is read when the session connects: lock it first (see `lock_local_state`).
    let local_state = match provenance.target {
        Target::Local => Some(lock_state_dir(&state_dir, args.lock.lock_timeout).await?),
        Target::Gcp => None,
    };
    describe(path, &plan, &provenance);
    let outcome = match spec {
        SpecCheck::Unchanged(loaded) => {
            let (loaded, desired) = *loaded;
            let derived = Derived {
                source: &source,
                target: &target,
                state_dir,
                loaded,
                desired,
            };
            apply_derived(args, &plan, &provenance, derived).await
        }
        _ => apply_as_saved(args, &target, &plan, &provenance, state_dir).await,
    };
    if let Some(lock) = local_state {
        lock.release().await;
    }
    outcome
}

/// The spec of a saved plan, loaded again and unchanged, and where to plan it.
struct Derived<'a> {
    source: &'a SpecSource,
    target: &'a TargetOptions,
    state_dir: PathBuf,
    loaded: Loaded,
    desired: DesiredState,
}

/// With the spec at hand: plans again from it and the live state of now with the plan's own
/// options, refuses any difference from the plan file, and applies the plan made now (it holds
/// the sensitive values the file does not).
async fn apply_derived(
    args: &ApplyArgs,
    saved_plan: &Plan,
    provenance: &Provenance,
    derived: Derived<'_>,
) -> anyhow::Result<Exit> {
    let mut target = derived.target.clone();
    target.state_dir = Some(derived.state_dir);
    target.target = Some(provenance.target);
    let planned = plan_valid(
        derived.source,
        derived.loaded,
        derived.desired,
        &target,
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
        args.lock.lock_timeout,
    )
    .await?;
    let result = finish(args, &planned.apply_target(), provenance).await;
    settle(&planned.session).await;
    held.release().await;
    result
}

/// Without the spec: checks the plan file against live state and applies it as it is.
async fn apply_as_saved(
    args: &ApplyArgs,
    target: &TargetOptions,
    plan: &Plan,
    provenance: &Provenance,
    state_dir: PathBuf,
) -> anyhow::Result<Exit> {
    let (session, kube_client) = connect_for_plan(target, plan, provenance, state_dir).await?;
    let held = acquire_lock(
        &session,
        kube_client.as_ref(),
        &plan.cluster.cluster,
        args.lock.lock_timeout,
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
    let report = execute_reporting(target, json, &consent)
        .await
        .map_err(stale_error)?;
    let plan = target.plan;
    if !report.is_success() {
        summarize_failure(
            &report,
            "fix the cause, then plan again and apply the new plan",
        );
        return Ok(Exit::Failed);
    }
    if !plan.has_changes() && !json {
        println!("{}", plan.summary);
    }
    let kube = target.kube();
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
