//! `gkq apply` and `gkq destroy` as one library call: lock the local target's state, plan,
//! refuse what needs consent the caller did not give, ask the front end, take the cluster's
//! Lease, execute, record the applied revision, and release everything in order. The front end
//! (terminal, JSON lines, an agent) decides how the plan is shown and whether it is approved.

use std::time::Duration;

use super::apply::{Consent, destroy_refusals, disruption_refusal, execute_on, settle};
use super::load::SpecSource;
use super::lock::{acquire_lock, lock_local_state};
use super::plan::{Planned, plan_valid};
use super::session::TargetOptions;
use super::status::landed_jobs;
use crate::apply::{ApplyReport, Sink, VerifyError};
use crate::model::DesiredState;
use crate::plan::{Plan, PlanOptions};
use crate::report::status::LiveReport;
use crate::spec::Loaded;

/// What the person (or process) applying decided up front.
#[derive(Debug, Clone, Default)]
pub struct ApplyChoices {
    pub consent: Consent,
    /// How long to wait for another apply's locks.
    pub lock_timeout: Duration,
    /// After a successful apply, read where the submitted jobs landed.
    pub follow_jobs: bool,
}

/// How an apply is shown and approved.
pub trait ApplyFront: Send + Sync {
    /// The plan, once made (with or without changes).
    fn planned(&self, plan: &Plan) -> anyhow::Result<()>;
    /// Whether to go ahead with a plan that has changes.
    fn approve(&self, plan: &Plan) -> anyhow::Result<bool>;
    /// Where the executor reports each action.
    fn sink(&self) -> &dyn Sink;
}

/// How an apply ended.
pub enum Applied {
    /// Nothing to change; the revision was recorded (not for a destroy).
    NoChanges,
    /// The front end did not approve; nothing was changed.
    Cancelled,
    /// The plan was executed (`Err`: live state moved under it, nothing was changed).
    Executed {
        report: Result<ApplyReport, VerifyError>,
        /// Where the submitted jobs landed, when asked for and readable.
        landed: Option<Box<LiveReport>>,
    },
}

/// Plans the valid spec `loaded` describes and converges live state to it (`opts.destroy`:
/// deletes what gkq made). Refuses, changing nothing, a destroy of a protected cluster and a plan
/// that stops running work without `consent.allow_disruption`.
pub async fn apply(
    spec: &SpecSource,
    loaded: Loaded,
    desired: DesiredState,
    target: &TargetOptions,
    opts: PlanOptions,
    choices: &ApplyChoices,
    front: &dyn ApplyFront,
) -> anyhow::Result<Applied> {
    let local_state = lock_local_state(&loaded, target, choices.lock_timeout).await?;
    let planned = plan_valid(spec, loaded, desired, target, opts).await?;
    let outcome = converge(&planned, choices, front).await;
    // The local world is written back (when the session goes) before its lock is released.
    drop(planned);
    if let Some(lock) = local_state {
        lock.release().await;
    }
    outcome
}

async fn converge(
    planned: &Planned,
    choices: &ApplyChoices,
    front: &dyn ApplyFront,
) -> anyhow::Result<Applied> {
    let plan = &planned.plan;
    let destroy = plan.options.destroy;
    front.planned(plan)?;
    if !plan.has_changes() {
        // Nothing to change, but the cluster now runs this revision of the spec.
        if !destroy {
            let held = acquire_lock(
                &planned.session,
                planned.kube_client.as_ref(),
                &plan.cluster.cluster,
                choices.lock_timeout,
            )
            .await?;
            planned.record_applied().await;
            held.release().await;
        }
        return Ok(Applied::NoChanges);
    }
    let refused = if destroy {
        destroy_refusals(plan)
    } else {
        Vec::new()
    };
    if !refused.is_empty() {
        anyhow::bail!(
            "refusing to destroy, nothing was changed:\n  {}\nhint: a cluster the spec protects (`cluster.deletionProtection: true`, the default) is destroyed only after the spec turns protection off and that is applied",
            refused.join("\n  ")
        );
    }
    if !plan.disruptions.is_empty() && !choices.consent.allow_disruption {
        anyhow::bail!("{}", disruption_refusal(&plan.disruptions));
    }
    if !front.approve(plan)? {
        return Ok(Applied::Cancelled);
    }
    let held = acquire_lock(
        &planned.session,
        planned.kube_client.as_ref(),
        &plan.cluster.cluster,
        choices.lock_timeout,
    )
    .await?;
    let report = execute_on(&planned.apply_target(), front.sink(), &choices.consent).await;
    let succeeded = matches!(&report, Ok(report) if report.is_success());
    if succeeded && !destroy {
        planned.record_applied().await;
    }
    settle(&planned.session).await;
    let landed = if succeeded && !destroy && choices.follow_jobs {
        landed_jobs(planned).await.map(Box::new)
    } else {
        None
    };
    held.release().await;
    Ok(Applied::Executed { report, landed })
}
