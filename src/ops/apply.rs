//! Applying a plan: check it against live state and against the running work it would stop,
//! then walk it with the executor; record the applied revision; let the local target's
//! simulated cluster react.

use std::time::Duration;

use super::NOTICE;
use super::plan::Planned;
use super::session::{KubeHandle, Session};
use crate::addr::ClusterRef;
use crate::apply::kube_adapter::KubeAdapter;
use crate::apply::{ApplyReport, Executor, Interrupt, Sink, VerifyError};
use crate::gitops::revision;
use crate::gke::PollConfig;
use crate::kube::KubeApi;
use crate::kube::client::RealKube;
use crate::model::KueueInstall;
use crate::model::live::KubeSnapshot;
use crate::observe::cluster::{JOB_KINDS, read_stack_jobs};
use crate::placement::Placement;
use crate::plan::Plan;
use crate::plan::provenance::SpecRevision;
use crate::plan::revision::{
    AppliedRevision, PLACEMENTS_MAX_BYTES, PlacementRecords, REVISION_NAMESPACE, configmap_name,
};

/// What an apply acts on, whether its plan was just made or read from a file.
pub struct ApplyTarget<'a> {
    pub session: &'a Session,
    pub plan: &'a Plan,
    /// The Kubernetes client made at plan time, when the cluster existed.
    pub kube_client: Option<&'a RealKube>,
    /// Kueue's installation settings, for plans that install Kueue.
    pub kueue: Option<&'a KueueInstall>,
}

impl ApplyTarget<'_> {
    /// How this apply reaches Kubernetes (see [`KubeHandle`]).
    pub fn kube(&self) -> KubeHandle<'_> {
        KubeHandle::new(self.session, self.kube_client, &self.plan.cluster)
    }
}

impl Planned {
    /// What applying this plan acts on.
    pub fn apply_target(&self) -> ApplyTarget<'_> {
        ApplyTarget {
            session: &self.session,
            plan: &self.plan,
            kube_client: self.kube_client.as_ref(),
            kueue: Some(&self.desired.kueue),
        }
    }

    /// Records this plan's spec revision as applied (see [`record_revision`]).
    pub async fn record_applied(&self) {
        self.apply_target().record_applied().await;
    }
}

impl ApplyTarget<'_> {
    /// Records the plan's spec revision as applied (see [`record_revision`]); a plan without
    /// provenance records nothing.
    pub async fn record_applied(&self) {
        if let Some(provenance) = &self.plan.provenance {
            let kube = self.kube();
            record_revision(
                self.session,
                kube.api(),
                &self.plan.cluster,
                &provenance.spec,
                &self.plan.placements,
            )
            .await;
        }
    }
}

/// What the person applying consented to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Consent {
    /// Take fields other field managers own.
    pub force_conflicts: bool,
    /// Stop admitted or running jobs.
    pub allow_disruption: bool,
}

/// The refusal of a plan that stops running work, naming each job and what stops it; a
/// destroy's says so.
pub fn disruption_refusal(
    plan: &Plan,
    disruptions: &[crate::plan::disruption::Disruption],
) -> String {
    let jobs: Vec<String> = disruptions
        .iter()
        .flat_map(|d| d.jobs.iter().map(move |j| format!("{} -> {j}", d.addr)))
        .collect();
    let verb = if plan.options.destroy {
        "destroy"
    } else {
        "apply"
    };
    format!(
        "refusing to {verb}: this plan stops running work:\n  {}\nWait for the jobs to finish, or pass --allow-disruption; nothing was changed",
        jobs.join("\n  ")
    )
}

/// The refusal of a plan that takes fields other field managers own, without
/// `--force-conflicts`: each field, its manager and what forcing would do. `None` when the plan
/// forces nothing.
pub fn conflict_refusal(plan: &Plan) -> Option<String> {
    let forced: Vec<String> = plan
        .forced_conflicts()
        .map(|(action, c)| format!("{}: {}", action.addr, c.text()))
        .collect();
    (!forced.is_empty()).then(|| {
        format!(
            "refusing to apply: this plan takes fields another field manager owns:\n  {}\nChange the spec to match, or pass --force-conflicts to take them; nothing was changed",
            forced.join("\n  ")
        )
    })
}

/// Checks the whole plan against live state ([`Executor::verify`]: one list per kind) and the
/// running work it would stop now, then applies it, each write conditional on what was checked,
/// each job Kueue queues created once Kueue decided on the one before (at most `submit_wait`). Nothing is applied when any target moved since the plan was made,
/// or when it would stop a job without `consent.allow_disruption` (a plan without changes is
/// only checked).
pub async fn execute_on(
    target: &ApplyTarget<'_>,
    sink: &dyn Sink,
    consent: &Consent,
    interrupt: &Interrupt,
    submit_wait: Duration,
) -> Result<ApplyReport, VerifyError> {
    let force_conflicts = consent.force_conflicts;
    let session = target.session;
    let mut options = crate::apply::ApplyOptions {
        submit_wait,
        ..Default::default()
    };
    if session.simulated() {
        // The local emulator finishes operations in well under a second.
        options.poll.initial = std::time::Duration::from_millis(100);
        options.poll.max = std::time::Duration::from_millis(500);
    }
    let kube = target.kube();
    let adapter = kube.api().map(|api| {
        let mut a = KubeAdapter::new(api, target.plan.cluster.cluster.clone());
        a.force_conflicts = force_conflicts;
        a.submit_wait = submit_wait;
        a.kueue = match session.kube.local() {
            // No network on the local target: the embedded release, unless the spec names one.
            Some(_) => target.kueue.map(crate::local::local_kueue),
            None => target.kueue.cloned(),
        };
        a
    });
    let mut executor = Executor::new(session.gke.as_ref(), sink)
        .with_options(options)
        .with_interrupt(interrupt);
    if let Some(adapter) = &adapter {
        executor = executor.with_kube(adapter);
    }
    let checked = executor.verify(target.plan).await?;
    if !consent.allow_disruption
        && let Some(api) = kube.api()
        && target
            .plan
            .changes()
            .any(crate::plan::disruption::may_disrupt)
    {
        let disruptions =
            crate::observe::kube::observe_disruptions(api, target.plan, &|addr| checked.live(addr))
                .await
                .map_err(|e| {
                    VerifyError::Read(format!("reading the jobs the plan would stop: {e}"))
                })?;
        if !disruptions.is_empty() {
            return Err(VerifyError::Disrupts(disruption_refusal(
                target.plan,
                &disruptions,
            )));
        }
    }
    if !target.plan.has_changes() {
        // Verified and nothing to do: no progress output for an empty walk.
        return Ok(ApplyReport::default());
    }
    let on_ctrl_c = tokio::spawn(stop_on_ctrl_c(interrupt.clone()));
    let report = executor.apply_checked(target.plan, &checked).await;
    on_ctrl_c.abort();
    Ok(report)
}

/// A destroy that cannot delete the cluster would only strip it of its Kubernetes objects: the
/// actions it may not take, with why.
pub fn destroy_refusals(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| a.blocked.as_ref().map(|why| format!("{}: {why}", a.addr)))
        .collect()
}

/// The simulated cluster reacts to what was applied; written before the state lock goes.
pub async fn settle(session: &Session) {
    if let Some(local) = session.kube.local()
        && let Err(e) = local.settle().await
    {
        tracing::warn!(target: NOTICE, "{e}");
    }
}

/// A stale plan, as the user sees it: every resource that moved, and what to do.
pub fn stale_error(error: VerifyError) -> anyhow::Error {
    let hint = error.hint();
    anyhow::anyhow!("{error}\nhint: {hint}")
}

/// Ctrl-C during an apply: start nothing new and let what runs finish (the executor reports a
/// GKE operation it was waiting for as still running). A second Ctrl-C exits at once.
async fn stop_on_ctrl_c(interrupt: Interrupt) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    // On a line of its own after the terminal's `^C`.
    tracing::info!(
        target: NOTICE,
        "\nInterrupted: no new changes will start; waiting for the ones in flight (Ctrl-C again to quit now)."
    );
    interrupt.trigger();
    if tokio::signal::ctrl_c().await.is_ok() {
        tracing::info!(
            target: NOTICE,
            "Interrupted again: exiting now. Run `gkq plan` to see what was done."
        );
        // 128 + SIGINT, as shells report it.
        std::process::exit(130);
    }
}

/// How operations are polled when recording the revision: quickly on the local target, whose
/// operations finish in well under a second.
fn label_poll(session: &Session) -> PollConfig {
    let mut poll = session.gke.poll_config();
    if session.simulated() {
        poll.initial = Duration::from_millis(100);
        poll.max = Duration::from_millis(500);
    }
    poll
}

/// What the revision ConfigMap records of the stack's jobs after this apply: the plan's
/// predictions for the runs it submitted, and the earlier records of runs still alive
/// ([`PlacementRecords::after_apply`]). When the jobs cannot be read, the earlier records are
/// kept as they are: without a run's uid a prediction cannot be tied to it.
async fn placement_records(
    kube: &dyn KubeApi,
    stack: &str,
    revision: &AppliedRevision,
    predicted: &[Placement],
) -> PlacementRecords {
    let earlier = match revision::read_configmap(kube, stack).await {
        Ok(found) => found.map(|r| r.placements),
        Err(e) => {
            tracing::warn!(target: NOTICE, "cannot read the earlier predicted placements: {e}");
            None
        }
    };
    match read_stack_jobs(kube, stack, KubeSnapshot::default()).await {
        Ok(jobs) => {
            let live: Vec<&serde_json::Value> = JOB_KINDS
                .iter()
                .flat_map(|(_, kind)| jobs.kind(kind))
                .collect();
            PlacementRecords::after_apply(
                &revision.origin(),
                predicted,
                earlier.as_ref(),
                &live,
                PLACEMENTS_MAX_BYTES,
            )
        }
        Err(e) => {
            tracing::warn!(
                target: NOTICE,
                "the predicted placements of this apply's jobs were not recorded: reading the stack's jobs: {e}"
            );
            earlier.unwrap_or_default()
        }
    }
}

/// Records what was applied: the revision ConfigMap (when Kubernetes is reachable), with where
/// the plan predicted its jobs would land (`predicted`, see [`placement_records`]), and the
/// cluster's revision labels. Failures are warnings: the apply itself has succeeded.
pub async fn record_revision(
    session: &Session,
    kube: Option<&dyn KubeApi>,
    cluster: &ClusterRef,
    spec: &SpecRevision,
    predicted: &[Placement],
) {
    let revision = revision::applied_now(spec);
    let mut recorded = Vec::new();
    if let Some(kube) = kube {
        let placements = placement_records(kube, &cluster.cluster, &revision, predicted).await;
        if placements.omitted > 0 {
            tracing::warn!(
                target: NOTICE,
                "the predicted placements of {} job run(s) were not recorded: the revision ConfigMap holds at most {} KiB of them; `gkq status` says \"no record\" for those runs",
                placements.omitted,
                PLACEMENTS_MAX_BYTES / 1024
            );
        }
        match revision::write_configmap(kube, &cluster.cluster, &revision, &placements).await {
            Ok(()) => recorded.push(format!(
                "ConfigMap {}/{}",
                REVISION_NAMESPACE,
                configmap_name(&cluster.cluster)
            )),
            Err(e) => tracing::warn!(target: NOTICE, hint = %e.hint(), "{e}"),
        }
    }
    match revision::write_gke_labels(
        session.gke.as_ref(),
        cluster,
        &revision,
        &label_poll(session),
    )
    .await
    {
        Ok(_) => recorded.push("the cluster's labels".to_string()),
        Err(e) => tracing::warn!(target: NOTICE, hint = %e.hint(), "{e}"),
    }
    if !recorded.is_empty() {
        let places = recorded.join(" and ");
        let revision = spec.describe();
        tracing::info!(
            target: NOTICE,
            %places,
            %revision,
            "Recorded the applied revision in {places}: {revision}."
        );
    }
}
