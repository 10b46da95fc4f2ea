//! Applying a spec as one library call, for `gkq apply`, `gkq destroy` and the agent: lock the
//! local target's state, plan, refuse what needs consent that was not given, ask the front end,
//! take the cluster's Lease, execute exactly the plan the front end saw, record the applied
//! revision, let the local target's simulated cluster react, and release everything in order.
//! The front end (terminal, JSON lines, the agent) decides how the plan is shown, what is
//! consented to and whether it is approved.

use std::time::Duration;

use super::apply::{Consent, destroy_refusals, disruption_refusal, execute_on, settle};
use super::load::SpecSource;
use super::lock::{acquire_lock, lock_local_state};
use super::plan::{Planned, plan_valid};
use super::session::TargetOptions;
use super::status::landed_jobs;
use crate::apply::{ApplyReport, Sink, VerifyError};
use crate::gitops::lock::ApplyLock;
use crate::model::DesiredState;
use crate::plan::{Plan, PlanOptions};
use crate::report::status::LiveReport;
use crate::spec::Loaded;

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
}

/// How an apply is shown, consented to and approved. The futures need not be `Send`: an apply
/// runs on the task (or the blocking thread) that called it.
#[async_trait::async_trait(?Send)]
pub trait ApplyFront {
    /// The plan, once made (with or without changes): shown, or recorded.
    async fn planned(&self, planned: &Planned) -> anyhow::Result<()>;
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
        /// Another holder took the cluster's Lease over during the apply (it was not renewed
        /// in time): the revision was not recorded.
        lock_lost: bool,
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

/// Plans the valid spec `loaded` describes and converges live state to it (`opts.destroy`:
/// deletes what gkq made). Refuses, changing nothing, a destroy of a protected cluster and a plan
/// that stops running work without the front end's consent to disruption.
pub async fn apply(
    spec: &SpecSource,
    loaded: Loaded,
    desired: DesiredState,
    target: &TargetOptions,
    opts: PlanOptions,
    choices: &ApplyChoices,
    front: &dyn ApplyFront,
) -> Result<Applied, ConvergeError> {
    let local_state = lock_local_state(&loaded, target, choices.lock_timeout)
        .await
        .map_err(ConvergeError::StateLock)?;
    let outcome = match plan_valid(spec, loaded, desired, target, opts).await {
        Ok(planned) => {
            let outcome = converge(&planned, choices, front).await;
            // The local world is written back (when the session goes) before its lock is
            // released.
            drop(planned);
            outcome
        }
        Err(e) => Err(ConvergeError::Plan(e)),
    };
    if let Some(lock) = local_state {
        lock.release().await;
    }
    outcome
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
        return Some(disruption_refusal(&plan.disruptions));
    }
    None
}

async fn lock(planned: &Planned, choices: &ApplyChoices) -> Result<ApplyLock, ConvergeError> {
    acquire_lock(
        &planned.session,
        planned.kube_client.as_ref(),
        &planned.plan.cluster.cluster,
        choices.lock_timeout,
    )
    .await
    .map_err(ConvergeError::ClusterLock)
}

async fn converge(
    planned: &Planned,
    choices: &ApplyChoices,
    front: &dyn ApplyFront,
) -> Result<Applied, ConvergeError> {
    let plan = &planned.plan;
    let destroy = plan.options.destroy;
    front.planned(planned).await.map_err(ConvergeError::Front)?;
    if !plan.has_changes() {
        // Nothing to change, but the cluster now runs this revision of the spec.
        if !destroy && choices.record_unchanged {
            let held = lock(planned, choices).await?;
            planned.record_applied().await;
            held.release().await;
        }
        return Ok(Applied::NoChanges);
    }
    let consent = front.consent(plan);
    if let Some(why) = refusal(plan, &consent) {
        return Ok(Applied::Refused(why));
    }
    if !front.approve(plan).await.map_err(ConvergeError::Front)? {
        return Ok(Applied::Cancelled);
    }
    let held = lock(planned, choices).await?;
    // Exactly the plan the front end was shown and approved.
    let report = execute_on(&planned.apply_target(), front.sink(), &consent).await;
    let lock_lost = held.lost();
    let succeeded = matches!(&report, Ok(report) if report.is_success());
    if succeeded && !destroy && !lock_lost {
        planned.record_applied().await;
    }
    settle(&planned.session).await;
    let landed = if succeeded && !destroy && choices.follow_jobs {
        landed_jobs(planned).await.map(Box::new)
    } else {
        None
    };
    held.release().await;
    Ok(Applied::Executed {
        report,
        landed,
        lock_lost,
    })
}
