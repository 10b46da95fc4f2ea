//! `gkq apply PLANFILE`: apply exactly a saved plan, or refuse.
//!
//! The plan file says what it was made from ([`crate::gitops::Provenance`]) and carries an
//! integrity digest over everything else in it. Before anything is changed: the digest must
//! match (a file edited after gkq wrote it is refused); the target must be the plan's; the spec,
//! when it is available at the path the plan names, must still have the plan's digest (read from
//! the working tree, or from the plan's `--git-ref` resolved again, so a branch that moved is
//! noticed), and gkq plans again from it and from live state with the plan's options: any
//! difference from the file is refused, naming it, and otherwise the plan made now is applied
//! (it holds the sensitive values a file never does). The plan names its spec relative to the
//! directory it was made in: run elsewhere, the spec is named with `--spec PATH`, or the apply is
//! refused, unless `--no-spec-check` says to apply without it: then every target of the plan is
//! read again and must still have the fingerprint the plan recorded, and the output says that
//! only live state was checked. Either way, the jobs the plan would stop are read again right
//! before it acts. Like `terraform apply PLANFILE`, a saved
//! plan is applied without a confirmation prompt: reviewing it was the point of saving it.

use std::path::{Path, PathBuf};

use super::Exit;
use super::apply::{ApplyArgs, ApplyFormat, Front, Shown, converge_with, sink};
use super::output::print_diagnostics;
use crate::ops::apply::Consent;
use crate::ops::converge::{PlanSource, SavedPlan};
use crate::ops::load::SpecSource;
use crate::ops::plan::plan_key;
use crate::ops::saved::{self, SavedPlanError, SpecCheck, check_spec};
use crate::plan::Plan;
use crate::plan::provenance::{GKQ_VERSION, Provenance};

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
    let mut source = SpecSource::for_saved_plan(&provenance.spec, &args.spec.source());
    if let Some(spec) = &args.plan_spec {
        source.spec = spec.clone();
    }
    let spec = if args.no_spec_check {
        SpecCheck::Unread
    } else {
        check_spec(&source, &provenance).map_err(with_hint)?
    };
    match &spec {
        SpecCheck::Invalid(validated) => {
            print_diagnostics(&validated.diagnostics, &validated.sources);
            eprintln!(
                "The spec {} no longer validates; nothing was applied.",
                source.spec.display()
            );
            return Ok(Exit::Failed);
        }
        SpecCheck::Unread => {
            eprintln!(
                "note: --no-spec-check: the spec the plan was made from ({}) is not read, so only live state is checked against the plan.",
                provenance.spec.path
            );
            if let Some(refusal) = needs_spec(&plan, &provenance, path) {
                anyhow::bail!("{refusal}");
            }
        }
        SpecCheck::Unchanged(_) => {}
    }
    let state_dir = target
        .state_dir
        .clone()
        .or_else(|| provenance.state_dir.as_ref().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(crate::ops::session::STATE_ROOT).join("local"));
    describe(path, &plan, &provenance);
    let json = args.output == ApplyFormat::Json;
    // Like `terraform apply PLANFILE`: no prompt, reviewing the saved plan was the point.
    let front = Front {
        json,
        shown: if json {
            Shown::JsonLine
        } else {
            Shown::SummaryIfUnchanged
        },
        auto_approve: true,
        consent: Consent {
            force_conflicts: args.force_conflicts,
            allow_disruption: args.allow_disruption,
        },
        // The spec's warnings and notes were shown with the plan when it was made and reviewed.
        spec_notes: String::new(),
        sink: sink(json),
    };
    let saved = SavedPlan {
        file: path,
        plan: &plan,
        provenance: &provenance,
        source: &source,
        spec,
        state_dir,
    };
    converge_with(
        PlanSource::Saved(saved),
        &target,
        (&args.lock, args.submit.submit_wait),
        &front,
    )
    .await
}

/// Why a plan cannot be applied without reading its spec (`--no-spec-check`), if it cannot.
fn needs_spec(plan: &Plan, provenance: &Provenance, path: &Path) -> Option<String> {
    if let Some(sensitive) = plan.changes().find(|a| a.sensitive) {
        return Some(format!(
            "{} writes sensitive values, which a plan file never holds, and they come from the spec ({}), which --no-spec-check leaves unread; nothing was applied\nhint: run `gkq apply {}` from the directory the plan was made in, or name the spec with --spec PATH, with the same --var values and GKQ_VAR_ environment",
            sensitive.addr,
            provenance.spec.path,
            path.display()
        ));
    }
    if plan
        .changes()
        .any(|a| a.addr.kind == crate::addr::ResourceKind::KueueInstall)
    {
        return Some(format!(
            "the plan installs Kueue, and the settings for that (where the manifests come from) are in the spec ({}), which --no-spec-check leaves unread; nothing was applied\nhint: run gkq from the directory the plan was made in, name the spec with --spec PATH, or plan again",
            provenance.spec.path
        ));
    }
    None
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
