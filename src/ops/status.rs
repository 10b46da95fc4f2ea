//! `gkq status` as a library call: plan (which reads GKE and Kubernetes once), read the applied
//! revision and the checkout, and build the report (`report::stack`, pure). Also where the jobs
//! of an apply landed, for the lines printed after it.

use std::time::Duration;

use serde_json::Value;

use super::NOTICE;
use super::load::SpecSource;
use super::plan::{Planned, plan_valid};
use super::session::{Session, TargetOptions};
use crate::gitops::git::{self, LocalHead};
use crate::gitops::revision::{Recorded, read_configmap};
use crate::kube::KubeApi;
use crate::model::DesiredState;
use crate::model::live::KubeSnapshot;
use crate::observe::cluster::{
    EVENT, KUEUE_WORLD_KINDS, KindRef, NODE, PROVISIONING_REQUEST, WORKLOAD, read_kinds,
    read_kubernetes, read_stack_jobs,
};
use crate::placement::PlacementState;
use crate::placement::unmodelled::Manager;
use crate::plan::PlanOptions;
use crate::plan::revision::{LabelRevision, PlacementRecords};
use crate::report::stack::{Checkout, StackStatus, StatusInputs, stack_status};
use crate::report::status::{
    GkeNodePool, LiveReport, Simulated, job_objects, job_report_reads, jobs_report, live_report,
};
use crate::spec::Loaded;

/// What `gkq status` found, and the plan it made to find drift.
pub struct StatusReport {
    pub status: StackStatus,
    /// Problems that did not stop the report (an unreadable revision ConfigMap).
    pub warnings: Vec<String>,
}

/// The status of the stack `loaded` describes (a valid spec, see [`super::load::load_valid`]).
pub async fn status(
    spec: &SpecSource,
    loaded: Loaded,
    desired: DesiredState,
    target: &TargetOptions,
    options: PlanOptions,
) -> anyhow::Result<StatusReport> {
    let head = git::local_head(&loaded);
    let planned = plan_valid(spec, loaded, desired, target, options).await?;
    let mut warnings = Vec::new();
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
    let recorded = match (live_cluster, kube.api()) {
        (Some(_), Some(api)) => match read_configmap(api, &planned.plan.cluster.cluster).await {
            Ok(found) => found,
            Err(e) => {
                warnings.push(format!("cannot read the revision ConfigMap: {e}"));
                None
            }
        },
        _ => None,
    };
    let (applied, records) = match recorded {
        Some(Recorded {
            revision,
            placements,
        }) => (Some(revision), placements),
        None => (None, PlacementRecords::default()),
    };
    let checkout = checkout(
        head.as_ref(),
        applied.as_ref().and_then(|a| a.commit.as_deref()),
        &local_spec.path,
    );
    // The Workloads planning read: status reads them once.
    let mut live = live_report_of(
        &planned.session,
        &planned.desired,
        live_cluster,
        kube.api(),
        planned.world.clone().unwrap_or_default(),
        &records,
        &planned.kueue,
    )
    .await?;
    if planned.loaded.spec.capacity.is_some()
        && live.kubernetes
        && let Some(api) = kube.api()
    {
        set_ladder_rungs(api, &planned.loaded.spec, &mut live).await;
    }
    let status = stack_status(StatusInputs {
        target: planned.session.target,
        applied,
        applied_labels,
        local_spec,
        checkout,
        plan: &planned.plan,
        live,
    });
    Ok(StatusReport { status, warnings })
}

/// Each job's rung on the capacity ladder (`report::status::set_rungs`), from the cluster's Events and Nodes,
/// read only for a spec with a ladder. Unreadable Events leave the jobs without a rung line.
async fn set_ladder_rungs(
    api: &dyn KubeApi,
    spec: &crate::spec::types::Spec,
    live: &mut LiveReport,
) {
    match read_kinds(api, &[EVENT, NODE], KubeSnapshot::default()).await {
        Ok(read) => crate::report::status::set_rungs(
            spec,
            &mut live.jobs,
            read.kind(EVENT.1),
            read.kind(NODE.1),
        ),
        Err(e) => tracing::debug!("capacity ladder: cannot read Events: {e}"),
    }
}

fn checkout(head: Option<&LocalHead>, applied_commit: Option<&str>, spec: &str) -> Checkout {
    let Some(head) = head else {
        return Checkout::default();
    };
    let ahead_behind = applied_commit.and_then(|commit| {
        let near = git::spec_dir(std::path::Path::new(spec));
        git::ahead_behind(&near, &head.commit, commit)
    });
    Checkout {
        head: Some(head.commit.clone()),
        branch: head.branch.clone(),
        clean: Some(head.clean),
        ahead_behind,
    }
}

/// The predicted placements the applied revision records for `stack` (none when no apply
/// recorded any, or Kubernetes cannot be reached). A ConfigMap that cannot be read is a
/// warning, not a failure: the jobs Kueue placed are then reported without a record.
pub async fn recorded_placements(api: Option<&dyn KubeApi>, stack: &str) -> PlacementRecords {
    let Some(api) = api else {
        return PlacementRecords::default();
    };
    match read_configmap(api, stack).await {
        Ok(found) => found.map(|r| r.placements).unwrap_or_default(),
        Err(e) => {
            tracing::warn!(target: NOTICE, "cannot read the recorded placements in the revision ConfigMap: {e}");
            PlacementRecords::default()
        }
    }
}

/// The live report for a connected session from an observed cluster (`None`: it does not exist)
/// and the session's Kubernetes (read only when the cluster exists and has an endpoint).
/// `known`: what planning has just read (Kueue's world), so it is not read again. `records`:
/// the placements the applied revision records, which jobs Kueue has placed are compared with.
/// `kueue`: the manager whose release and gates decide whether a waiting job is predicted (the
/// plan's, `Planned::kueue`).
pub async fn live_report_of(
    session: &Session,
    desired: &DesiredState,
    cluster: Option<&Value>,
    api: Option<&dyn KubeApi>,
    known: KubeSnapshot,
    records: &PlacementRecords,
    kueue: &Manager,
) -> anyhow::Result<LiveReport> {
    let observed = match api.filter(|_| has_endpoint(cluster)) {
        Some(api) => Some(
            read_kubernetes(api, known)
                .await
                .map_err(|e| anyhow::anyhow!("reading Kubernetes: {e}"))?,
        ),
        None => None,
    };
    let pools: Vec<GkeNodePool> = cluster.map(GkeNodePool::from_cluster).unwrap_or_default();
    Ok(live_report(
        desired,
        cluster,
        &pools,
        observed.as_ref(),
        records,
        kueue,
        simulated(session),
    ))
}

/// What the report of where an apply's jobs landed reads: it reports on the spec's jobs only,
/// so it lists those (after a successful apply gkq's labels select each of them) and Kueue's
/// Workloads (where Kueue placed each), then only what [`job_report_reads`] asks for: Kueue's
/// queues and namespaces when a queued job still waits (its prediction now weighs them), the
/// ProvisioningRequests when a Workload has admission checks. Not the nodes, nor every other
/// tenant's jobs.
async fn read_for_jobs_report(
    api: &dyn KubeApi,
    stack: &str,
    desired: &DesiredState,
) -> crate::kube::KubeResult<KubeSnapshot> {
    let (jobs, workloads) = futures::try_join!(
        read_stack_jobs(api, stack, KubeSnapshot::default()),
        read_kinds(api, &[WORKLOAD], KubeSnapshot::default()),
    )?;
    let mut observed = jobs;
    observed.by_kind.extend(workloads.by_kind);
    let needs = job_report_reads(desired, &observed);
    let mut more: Vec<KindRef> = Vec::new();
    if needs.queues {
        more.extend(KUEUE_WORLD_KINDS);
    }
    if needs.provisioning_requests {
        more.push(PROVISIONING_REQUEST);
    }
    read_kinds(api, &more, observed).await
}

/// Whether GKE's cluster has an endpoint to reach its Kubernetes at.
fn has_endpoint(cluster: Option<&Value>) -> bool {
    cluster
        .and_then(|c| c.get("endpoint"))
        .and_then(Value::as_str)
        .is_some_and(|e| !e.is_empty())
}

/// On the local target: what the report's figures are simulated from.
fn simulated(session: &Session) -> Option<Simulated> {
    session.kube.local().map(|k| Simulated {
        state_dir: session.state_dir.as_ref().map(|d| d.display().to_string()),
        kubernetes_state: k.state_file().display().to_string(),
        settings: k.settings().describe(),
    })
}

/// Where the jobs an apply of `planned` submitted landed: read now, waiting a little on a real
/// cluster for Kueue to decide. `None` when the spec has no jobs, the report cannot be read, or
/// Kubernetes is not reachable.
pub async fn landed_jobs(planned: &Planned) -> Option<LiveReport> {
    let (session, desired) = (&planned.session, &planned.desired);
    if job_objects(desired).is_empty() {
        return None;
    }
    let kube = planned.kube();
    let attempts = if session.kube.local().is_some() {
        1
    } else {
        10
    };
    // What this apply has just recorded: the jobs Kueue placed are compared with it.
    let records = recorded_placements(kube.api(), &planned.plan.cluster.cluster).await;
    let mut last = None;
    for attempt in 0..attempts {
        let read = async {
            let cluster = session
                .gke
                .get_cluster(&desired.gke.cluster_ref)
                .await
                .map_err(|e| anyhow::anyhow!("reading the cluster from GKE: {e}"))?;
            let observed = match kube.api() {
                Some(api) if has_endpoint(cluster.as_ref()) => Some(
                    read_for_jobs_report(api, &planned.plan.cluster.cluster, desired)
                        .await
                        .map_err(|e| anyhow::anyhow!("reading the spec's jobs: {e}"))?,
                ),
                _ => None,
            };
            anyhow::Ok(jobs_report(
                desired,
                cluster.as_ref(),
                observed.as_ref(),
                &records,
                &planned.kueue,
                simulated(session),
            ))
        };
        match read.await {
            Ok(r) => {
                let decided = r.jobs.iter().all(|j| {
                    j.is_unmanaged()
                        || j.observed.as_ref().is_some_and(|o| {
                            o.state != PlacementState::Pending || o.reason.is_some()
                        })
                });
                last = Some(r);
                if decided {
                    break;
                }
            }
            Err(e) => {
                tracing::debug!("placement after apply: {e:#}");
                break;
            }
        }
        if attempt + 1 < attempts {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    last.filter(|report| report.kubernetes)
}
