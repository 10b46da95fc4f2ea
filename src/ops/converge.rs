//! The one apply sequence, for every front end: `gkq apply` (a fresh plan of the spec),
//! `gkq apply PLANFILE` (a saved plan checked against the spec and live state), `gkq destroy`,
//! `gkq watch --apply` and the agent. Each step is written here once:
//!
//! 1. lock the local target's state (it is read when the session connects);
//! 2. make the plan (or check the saved one), and show it to the front end;
//! 3. refuse what the rules refuse under the front end's consent, and ask it;
//! 4. take the cluster's Lease, execute exactly the plan shown;
//! 5. record the applied revision only if it all succeeded and the Lease is still ours;
//! 6. let the local target's simulated cluster react, read where the jobs landed;
//! 7. release the Lease, write the local target's state back, and only then unlock it.
//!
//! The front end (terminal, JSON lines, watch, the agent) decides how the plan is shown, what
//! is consented to and whether it is approved.

use std::path::PathBuf;
use std::time::Duration;

use super::apply::{
    ApplyTarget, Consent, conflict_refusal, destroy_refusals, disruption_refusal, execute_on,
    settle,
};
use super::load::SpecSource;
use super::lock::{acquire_lock, lock_local_state, lock_state_dir};
use super::plan::{Planned, plan_valid};
use super::saved::{SpecCheck, connect_for_plan};
use super::session::{Session, TargetOptions};
use super::status::landed_jobs;
use crate::apply::{ApplyReport, Sink, VerifyError};
use crate::gitops::lock::{ApplyLock, LockHolder};
use crate::interrupt::Interrupt;
use crate::kube::client::RealKube;
use crate::model::DesiredState;
use crate::plan::provenance::Provenance;
use crate::plan::{Plan, PlanOptions};
use crate::report::status::LiveReport;
use crate::spec::Loaded;
use crate::spec::types::Target;

/// What the person (or process) applying decided up front.
#[derive(Debug, Clone)]
pub struct ApplyChoices {
    /// How long to wait for another apply's locks.
    pub lock_timeout: Duration,
    /// After a successful apply, read where the submitted jobs landed.
    pub follow_jobs: bool,
    /// Record the applied revision also when the plan changes nothing (the commands: always,
    /// the cluster now runs this spec; the agent: once per commit, not at every interval).
    pub record_unchanged: bool,
    /// Stops the walk between actions (Ctrl-C sets it too while an apply runs).
    pub interrupt: Interrupt,
    /// Who holds the cluster's Lease (default: this process, `holder_identity`).
    pub lock_holder: Option<LockHolder>,
    /// After creating each job Kueue queues, how long to wait for Kueue's decision on it
    /// before the next one (`--submit-wait`; `crate::apply::DEFAULT_SUBMIT_WAIT`).
    pub submit_wait: Duration,
}

/// Where the plan an apply executes comes from.
// Made once per apply and moved once: boxing the spec would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum PlanSource<'a> {
    /// Plan this valid spec now, against live state.
    Spec {
        spec: &'a SpecSource,
        loaded: Loaded,
        desired: DesiredState,
        opts: PlanOptions,
    },
    /// Exactly a plan `gkq plan --out` saved (its integrity and target already checked).
    Saved(SavedPlan<'a>),
}

/// A saved plan and what its spec says now.
pub struct SavedPlan<'a> {
    /// The plan file, as the user named it.
    pub file: &'a std::path::Path,
    pub plan: &'a Plan,
    pub provenance: &'a Provenance,
    /// Where the spec the plan names is read (the working tree, or the plan's `--git-ref`).
    pub source: &'a SpecSource,
    /// The spec as it is now: unchanged (plan again and compare), or not read (check live state
    /// against the plan's fingerprints only). An invalid spec is the caller's to report.
    pub spec: SpecCheck,
    /// The local target's state directory the plan was made with.
    pub state_dir: PathBuf,
}

/// A plan ready to be executed, with the session it acts in.
// One per apply: the size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Ready<'a> {
    /// Made now (from the spec, or a saved plan's spec planned again and found equal).
    Planned(Box<Planned>),
    /// A saved plan applied as it is, without its spec (`--no-spec-check`).
    Saved {
        plan: &'a Plan,
        session: Session,
        kube_client: Option<RealKube>,
    },
}

impl Ready<'_> {
    pub fn plan(&self) -> &Plan {
        match self {
            Ready::Planned(planned) => &planned.plan,
            Ready::Saved { plan, .. } => plan,
        }
    }

    /// The whole planning result, when the plan was made now.
    pub fn planned(&self) -> Option<&Planned> {
        match self {
            Ready::Planned(planned) => Some(planned),
            Ready::Saved { .. } => None,
        }
    }

    pub fn session(&self) -> &Session {
        match self {
            Ready::Planned(planned) => &planned.session,
            Ready::Saved { session, .. } => session,
        }
    }

    fn apply_target(&self) -> ApplyTarget<'_> {
        match self {
            Ready::Planned(planned) => planned.apply_target(),
            Ready::Saved {
                plan,
                session,
                kube_client,
            } => ApplyTarget {
                session,
                plan,
                kube_client: kube_client.as_ref(),
                // The Kueue settings are the spec's; a plan that installs Kueue is not applied
                // without it (see `cli::apply_saved`).
                kueue: None,
            },
        }
    }

    /// Lets go of what only showing the plan needed: Kueue's world as planning read it (every
    /// queue, flavor and Workload, for the predictions and the front end's report). Executing
    /// the plan and reading where its jobs landed read what they need afresh, and an apply of
    /// thousands of objects would otherwise hold the world beside its checks and writes.
    fn release_shown(&mut self) {
        if let Ready::Planned(planned) = self {
            planned.world = None;
        }
    }

    /// A saved plan's "nothing to do" may be stale: it is verified like any other.
    fn verifies_when_unchanged(&self) -> bool {
        matches!(self, Ready::Saved { .. })
    }
}

/// How an apply is shown, consented to and approved. The futures need not be `Send`: an apply
/// runs on the task (or the blocking thread) that called it.
#[async_trait::async_trait(?Send)]
pub trait ApplyFront {
    /// The plan, once made (with or without changes): shown, or recorded.
    async fn planned(&self, ready: &Ready<'_>) -> anyhow::Result<()>;
    /// What is consented to for this plan with changes. The refusal rules are checked against it
    /// before [`ApplyFront::approve`] is asked, and the executor acts within it.
    fn consent(&self, plan: &Plan) -> Consent;
    /// Whether to go ahead with a plan that has changes and that the rules do not refuse.
    async fn approve(&self, plan: &Plan) -> anyhow::Result<bool>;
    /// Where the executor reports each action.
    fn sink(&self) -> &dyn Sink;
}

/// How an apply ended.
pub enum Applied {
    /// Nothing to change; the revision was recorded if asked for (never for a destroy).
    NoChanges,
    /// The rules refused the plan (why, for the user); nothing was changed.
    Refused(String),
    /// The front end did not approve; nothing was changed.
    Cancelled,
    /// The plan was executed (`Err`: live state moved under it, nothing was changed).
    Executed {
        report: Result<ApplyReport, VerifyError>,
        /// Where the submitted jobs landed, when asked for and readable.
        landed: Option<Box<LiveReport>>,
        /// The cluster's Lease was no longer this apply's when it ended (another holder took
        /// it over): the revision was not recorded.
        lock_lost: bool,
        /// The applied revision was recorded.
        recorded: bool,
    },
}

/// Which step of an apply failed; each carries the step's own error, shown as it is.
#[derive(Debug, thiserror::Error)]
pub enum ConvergeError {
    /// The local target's state directory could not be locked.
    #[error(transparent)]
    StateLock(anyhow::Error),
    /// Live state could not be read, or the plan not made.
    #[error(transparent)]
    Plan(anyhow::Error),
    /// The cluster's Lease could not be taken.
    #[error(transparent)]
    ClusterLock(anyhow::Error),
    /// The front end failed to show the plan or to ask.
    #[error(transparent)]
    Front(anyhow::Error),
}

/// Converges live state to the plan `source` gives (`opts.destroy`: deletes what gkq made).
/// Refuses, changing nothing, a destroy of a protected cluster, a plan that stops running work
/// without the front end's consent to disruption, and a saved plan that differs from the plan
/// its unchanged spec gives now.
pub async fn apply(
    source: PlanSource<'_>,
    target: &TargetOptions,
    choices: &ApplyChoices,
    front: &dyn ApplyFront,
) -> Result<Applied, ConvergeError> {
    let local_state = lock_local(&source, target, choices.lock_timeout)
        .await
        .map_err(ConvergeError::StateLock)?;
    let outcome = match prepare(source, target).await {
        Ok(Ok(mut ready)) => {
            let outcome = converge(&mut ready, choices, front).await;
            // The local world is written back when its session goes: before the lock does.
            drop(ready);
            outcome
        }
        Ok(Err(refused)) => Ok(Applied::Refused(refused)),
        Err(e) => Err(ConvergeError::Plan(e)),
    };
    if let Some(lock) = local_state {
        lock.release().await;
    }
    outcome
}

/// The local target's state lock, when the plan acts on the local target.
async fn lock_local(
    source: &PlanSource<'_>,
    target: &TargetOptions,
    timeout: Duration,
) -> anyhow::Result<Option<ApplyLock>> {
    match source {
        PlanSource::Spec { loaded, .. } => lock_local_state(loaded, target, timeout).await,
        PlanSource::Saved(saved) => match saved.provenance.target {
            Target::Local => lock_state_dir(&saved.state_dir, timeout).await.map(Some),
            Target::Gcp => Ok(None),
        },
    }
}

/// The plan to execute and its session; `Ok(Err(why))` when a saved plan is not the plan its
/// spec gives now.
async fn prepare<'a>(
    source: PlanSource<'a>,
    target: &TargetOptions,
) -> anyhow::Result<Result<Ready<'a>, String>> {
    match source {
        PlanSource::Spec {
            spec,
            loaded,
            desired,
            opts,
        } => {
            let planned = plan_valid(spec, loaded, desired, target, opts).await?;
            Ok(Ok(Ready::Planned(Box::new(planned))))
        }
        PlanSource::Saved(saved) => {
            let mut target = target.clone();
            target.state_dir = Some(saved.state_dir.clone());
            target.target = Some(saved.provenance.target);
            match saved.spec {
                SpecCheck::Unchanged(spec) => {
                    let (loaded, desired) = *spec;
                    let planned = plan_valid(
                        saved.source,
                        loaded,
                        desired,
                        &target,
                        saved.plan.options.clone(),
                    )
                    .await?;
                    let differences = crate::gitops::saved::differences(saved.plan, &planned.plan);
                    if !differences.is_empty() {
                        return Ok(Err(format!(
                            "{} is not the plan gkq makes now from the same spec, so nothing was applied:\n  - {}\nhint: if live state changed, run `gkq plan --out FILE` again and review the new plan; a plan file is applied only as `gkq plan --out` wrote it",
                            saved.file.display(),
                            differences.join("\n  - ")
                        )));
                    }
                    // The plan made now: equal to the file, and it holds the sensitive values a
                    // file never does.
                    Ok(Ok(Ready::Planned(Box::new(planned))))
                }
                SpecCheck::Invalid(_) => Ok(Err(format!(
                    "the spec {} no longer validates; nothing was applied",
                    saved.source.spec.display()
                ))),
                SpecCheck::Unread => {
                    let (session, kube_client) = connect_for_plan(
                        &target,
                        saved.plan,
                        saved.provenance,
                        saved.state_dir.clone(),
                    )
                    .await?;
                    Ok(Ok(Ready::Saved {
                        plan: saved.plan,
                        session,
                        kube_client,
                    }))
                }
            }
        }
    }
}

/// Why the rules refuse `plan` under `consent`, if they do.
fn refusal(plan: &Plan, consent: &Consent) -> Option<String> {
    let blocked = if plan.options.destroy {
        destroy_refusals(plan)
    } else {
        Vec::new()
    };
    if !blocked.is_empty() {
        return Some(format!(
            "refusing to destroy, nothing was changed:\n  {}\nhint: a cluster the spec protects (`cluster.deletionProtection: true`, the default) is destroyed only after the spec turns protection off and that is applied",
            blocked.join("\n  ")
        ));
    }
    if !plan.disruptions.is_empty() && !consent.allow_disruption {
        return Some(disruption_refusal(plan, &plan.disruptions));
    }
    if !consent.force_conflicts {
        return conflict_refusal(plan);
    }
    None
}

async fn lock(ready: &Ready<'_>, choices: &ApplyChoices) -> Result<ApplyLock, ConvergeError> {
    let target = ready.apply_target();
    acquire_lock(
        target.session,
        target.kube_client,
        &target.plan.cluster.cluster,
        choices.lock_timeout,
        choices.lock_holder.as_ref(),
    )
    .await
    .map_err(ConvergeError::ClusterLock)
}

async fn converge(
    ready: &mut Ready<'_>,
    choices: &ApplyChoices,
    front: &dyn ApplyFront,
) -> Result<Applied, ConvergeError> {
    front.planned(ready).await.map_err(ConvergeError::Front)?;
    ready.release_shown();
    let ready = &*ready;
    let plan = ready.plan();
    let destroy = plan.options.destroy;
    if !plan.has_changes() && !ready.verifies_when_unchanged() {
        // Nothing to change, but the cluster now runs this revision of the spec.
        if !destroy && choices.record_unchanged {
            let held = lock(ready, choices).await?;
            if held.still_held().await {
                ready.apply_target().record_applied().await;
            }
            held.release().await;
        }
        return Ok(Applied::NoChanges);
    }
    let consent = front.consent(plan);
    if let Some(why) = refusal(plan, &consent) {
        return Ok(Applied::Refused(why));
    }
    if plan.has_changes() && !front.approve(plan).await.map_err(ConvergeError::Front)? {
        return Ok(Applied::Cancelled);
    }
    let held = lock(ready, choices).await?;
    // Exactly the plan the front end was shown and approved.
    let report = execute_on(
        &ready.apply_target(),
        front.sink(),
        &consent,
        &choices.interrupt,
        choices.submit_wait,
    )
    .await;
    let succeeded = matches!(&report, Ok(report) if report.is_success());
    // Read again now, not only the renewal's last word: a takeover since then counts too.
    let lock_lost = !held.still_held().await;
    let recorded = succeeded && !destroy && !lock_lost;
    if recorded {
        ready.apply_target().record_applied().await;
    }
    settle(ready.session()).await;
    let landed = match ready.planned() {
        Some(planned) if succeeded && !destroy && choices.follow_jobs => {
            landed_jobs(planned).await.map(Box::new)
        }
        _ => None,
    };
    held.release().await;
    Ok(Applied::Executed {
        report,
        landed,
        lock_lost,
        recorded,
    })
}
