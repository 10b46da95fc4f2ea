//! The placement section of a plan: where Kueue will put each job the plan submits, and how the
//! quota of each flavor is used, predicted by [`crate::placement`] from the queues and flavors the
//! plan converges to plus the live Workloads.

use serde_json::Value;

use std::collections::BTreeSet;
use std::sync::Arc;

use super::workload_changes::{Worlds, changes_from, world_after};
use super::{ActionKind, Plan};
use crate::addr::{ResourceAddr, ResourceKind};
use crate::model::live::KubeSnapshot;
use crate::placement::dws::{self, Reclaim};
use crate::placement::held::{held_quota, holds_quota};
use crate::placement::job_workload::JobWorkloads;
use crate::placement::remedy::World;
use crate::placement::unmodelled::{
    self, MODELLED_MINOR, MODELLED_VERSION, Manager, NEXT_VERSION_DOCS, VersionFit,
};
use crate::placement::{
    Cluster, FlavorUsage, PendingWorkload, Placement, PlacementState, Prediction, Released,
    predict_in_order,
};
use crate::spec::types::InstallMode;
use crate::vocab::labels::{MAX_RUN_DURATION_ANNOTATION, NODE_POOL_LABEL};
use crate::vocab::object::{name_of, namespace_of};

/// The placements of the jobs (RayJobs, JobSets, batch Jobs) that `plan` creates or replaces,
/// from `prediction` (of Kueue's world after the plan, [`world_after`]), then the running jobs
/// they preempt; and the quota use. `desired` are the objects the plan converges to (for the
/// flavors' node pools); `node_pools` are the desired GKE node pools, for when Plan B nodes are
/// reclaimed.
fn placements_of(
    plan: &Plan,
    prediction: &Prediction,
    desired: &[Arc<Value>],
    node_pools: &[Value],
) -> (Vec<Placement>, Vec<FlavorUsage>) {
    let mut placements = prediction.placements.clone();
    for placement in &mut placements {
        let job = plan
            .actions
            .iter()
            .filter_map(|a| a.desired.as_ref())
            .find(|o| {
                o["kind"] == placement.kind.as_str()
                    && o["metadata"]["name"] == placement.job.as_str()
                    && o["metadata"]["namespace"] == placement.namespace.as_str()
            });
        placement.reclaim = job.and_then(|job| reclaim_of(placement, job, desired, node_pools));
    }
    // Running jobs this plan preempts are part of what it does: list them after its own.
    placements.extend(prediction.preempted.iter().cloned());
    (placements, prediction.usage.clone())
}

/// The jobs the plan submits (creates, or replaces with a new run), as Kueue will see them, in
/// the order `apply` submits them: the spec's order (`jobs:` in order, then job manifests in
/// file order), each after Kueue decided on the one before.
fn submitted_jobs(
    plan: &Plan,
    desired: &crate::model::DesiredState,
) -> Vec<(ResourceAddr, PendingWorkload)> {
    let submitted: BTreeSet<&ResourceAddr> = plan
        .actions
        .iter()
        .filter(|a| {
            a.addr.kind.is_run() && matches!(a.kind, ActionKind::Create | ActionKind::Replace)
        })
        .map(|a| &a.addr)
        .collect();
    desired
        .kube_objects()
        .filter_map(|o| {
            let addr = ResourceAddr::from_object(o).ok()?;
            submitted.contains(&addr).then_some(())?;
            Some((addr, PendingWorkload::from_object(o).ok()?))
        })
        .collect()
}

/// The live Workloads holding quota whose jobs `apply` deletes on the way (see
/// `plan::build`): the runs of jobs the plan deletes go before its first job is submitted, a
/// replaced job's earlier run just before its new run. Kueue finishes a Workload whose job is
/// gone and releases its quota (docs/kueue.md 1c.5), and apply waits for that.
fn released_runs<'a>(
    plan: &Plan,
    jobs: &[(ResourceAddr, PendingWorkload)],
    workloads: &'a [Value],
    live_at: &dyn Fn(&ResourceAddr) -> Option<&'a Value>,
) -> Vec<Released> {
    let job_workloads = JobWorkloads::new(workloads);
    let mut released = Vec::new();
    for action in &plan.actions {
        let before = match action.kind {
            ActionKind::Delete => 0,
            ActionKind::Replace => match jobs.iter().position(|(addr, _)| *addr == action.addr) {
                Some(index) => index,
                None => continue,
            },
            _ => continue,
        };
        if !action.addr.kind.is_run() {
            continue;
        }
        // The live job, or (when the plan did not keep it) what its delete step names.
        let named = action.steps.iter().find_map(|step| match step {
            super::Step::KubeDelete {
                api_version,
                kind,
                namespace,
                name,
            } => Some(serde_json::json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"namespace": namespace, "name": name}})),
            _ => None,
        });
        let job = match (live_at(&action.addr), &named) {
            (Some(live), _) => live,
            (None, Some(named)) => named,
            (None, None) => continue,
        };
        for found in job_workloads.all_of(job) {
            if holds_quota(found.workload) {
                released.push(Released {
                    namespace: namespace_of(found.workload).unwrap_or_default().to_string(),
                    name: name_of(found.workload).to_string(),
                    before,
                });
            }
        }
    }
    released
}

/// Whether an action on `addr` can change what Kueue decides about work already there.
fn changes_kueue(addr: &ResourceAddr) -> bool {
    addr.kind.is_kueue()
        || addr.kind == ResourceKind::Namespace
        || matches!(&addr.kind, ResourceKind::Other(kind) if kind == "priorityclass" || kind == "workload")
}

/// When the nodes of a job placed on a flex-start or queued-provisioning pool are reclaimed:
/// the pool is found through the flavor's node-pool label.
fn reclaim_of(
    placement: &Placement,
    job: &Value,
    desired: &[Arc<Value>],
    node_pools: &[Value],
) -> Option<Reclaim> {
    if !matches!(
        placement.state,
        PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks
    ) {
        return None;
    }
    let pool = placement
        .podsets
        .iter()
        .flat_map(|podset| podset.flavors.values())
        .filter_map(|flavor| {
            desired
                .iter()
                .find(|o| o["kind"] == "ResourceFlavor" && o["metadata"]["name"] == flavor.as_str())
        })
        .filter_map(|flavor| flavor["spec"]["nodeLabels"][NODE_POOL_LABEL].as_str())
        .filter_map(|name| node_pools.iter().find(|p| p["name"] == name))
        .find(|pool| {
            pool["config"]["flexStart"] == true || pool["queuedProvisioning"]["enabled"] == true
        })?;
    let declared = job["metadata"]["annotations"][MAX_RUN_DURATION_ANNOTATION]
        .as_str()
        .and_then(|s| s.parse().ok());
    let pool_max = pool["config"]["maxRunDuration"]
        .as_str()
        .and_then(|d| crate::vocab::duration::parse_whole_seconds(d).ok());
    let (after_seconds, limited_by) = dws::reclaimed_after(declared, pool_max);
    Some(Reclaim {
        node_pool: pool["name"].as_str().unwrap_or_default().to_string(),
        after_seconds,
        limited_by,
    })
}

/// Kueue's objects after `plan`: the world as planning read it, with the objects the plan
/// converges to in place of the live ones and the ones it deletes removed (jobs aside: the plan's
/// own are submitted, [`submitted_jobs`]).
fn after_objects<'a>(
    plan: &Plan,
    desired: &'a crate::model::DesiredState,
    world: Option<&'a KubeSnapshot>,
) -> Vec<&'a Value> {
    let deleted: BTreeSet<&ResourceAddr> = plan
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::Delete)
        .map(|a| &a.addr)
        .collect();
    world_after(
        world.into_iter().flat_map(|w| w.by_kind.values().flatten()),
        desired
            .kube_objects()
            .filter(|o| ResourceAddr::from_object(o).is_ok_and(|addr| !addr.kind.is_run())),
        &deleted,
    )
}

/// What the plan's placements are predicted from: Kueue's world after the plan, the jobs it
/// submits in submission order, and the live runs its deletes and replaces release on the way
/// ([`released_runs`]). `gkq explain` predicts and checks its fixes in the same world.
pub fn prediction_world(
    plan: &Plan,
    desired: &crate::model::DesiredState,
    live: &crate::model::live::LiveState,
    world: Option<&KubeSnapshot>,
) -> World {
    let after = after_objects(plan, desired, world);
    let submissions = submitted_jobs(plan, desired);
    let workloads = world.map(|w| w.kind("Workload")).unwrap_or_default();
    let observed = match &live.kubernetes {
        crate::model::live::KubeLive::Observed { objects } => Some(objects),
        crate::model::live::KubeLive::NotObserved => None,
    };
    let live_at = |addr: &ResourceAddr| {
        observed
            .and_then(|objects| objects.get(addr))
            .and_then(|o| o.live.as_ref())
    };
    let released = released_runs(plan, &submissions, workloads, &live_at);
    World {
        cluster: Cluster::from_objects_lenient(after.iter().copied()),
        jobs: submissions.into_iter().map(|(_, job)| job).collect(),
        released,
    }
}

/// The plan's actions that change what Kueue decides with, `verb address` each: the jobs it
/// submits, replaces or deletes, and its changes to Kueue's objects, namespaces and priority
/// classes ([`changes_kueue`]).
pub fn kueue_changes(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter(|a| a.kind.is_change() && (a.addr.kind.is_run() || changes_kueue(&a.addr)))
        .map(|a| format!("{} {}", a.kind.verb(), a.addr))
        .collect()
}

/// The jobs of the plan whose DWS ProvisioningRequest GKE would refuse (more than one PodSet),
/// by the DWS lint's rule (`placement::provisioning::request_shapes`) over the world after
/// the plan: `validate` refuses this from the spec's own checks and manifests, so what is found
/// here comes from checks, configs or queues that live in the cluster.
fn dws_split_requests(
    cluster: &Cluster,
    submissions: &[(ResourceAddr, PendingWorkload)],
) -> Vec<super::Notice> {
    let mut notices = Vec::new();
    for (addr, job) in submissions {
        for shape in crate::placement::provisioning::request_shapes(cluster, job) {
            if !shape.refused_by_dws() {
                continue;
            }
            let groups: Vec<String> = shape
                .pod_sets
                .iter()
                .map(|ps| ps.podsets.join("+"))
                .collect();
            let mut notice = super::Notice::new(
                Some(addr.clone()),
                format!(
                    "{} `{}` would send GKE a DWS ProvisioningRequest with {} podsets ({}) through the cluster's admission check `{}` (ProvisioningRequestConfig `{}`): GKE's queued provisioning accepts one podset per request, so the request fails and the job never gets nodes",
                    job.kind,
                    job.name,
                    shape.pod_sets.len(),
                    groups.join(", "),
                    shape.check,
                    shape.config
                ),
            );
            notice.help = Some(match shape.policy_that_merges(&job.pod_sets) {
                Some(policy) => format!(
                    "set `spec.podSetMergePolicy: {}` on ProvisioningRequestConfig `{}` (Kueue then sends one PodSet), or put the accelerator pods in one group",
                    policy.as_str(),
                    shape.config
                ),
                None => "put all the accelerator pods in one group, or submit the groups as separate jobs".to_string(),
            });
            notices.push(notice);
        }
    }
    notices
}

/// Adds what a plan means for running and queued work: the predicted placements of the jobs it
/// submits, the quota they use, what its queue changes do to the live Workloads, the
/// admitted jobs its deletes or replaces would stop, and the quota its orphans hold. `world` is Kueue's world as planning read
/// it (`None`: Kubernetes was not read, so there is no live work); `kueue` is the manager whose
/// rules decide (its release and gates: the spec's when gkq installs Kueue, the cluster's when
/// someone else did).
pub fn annotate(
    plan: &mut Plan,
    desired: &crate::model::DesiredState,
    live: &crate::model::live::LiveState,
    world: Option<&KubeSnapshot>,
    kueue: &Manager,
) {
    let world_objects = || world.into_iter().flat_map(|w| w.by_kind.values().flatten());
    let after = after_objects(plan, desired, world);
    let workloads = world.map(|w| w.kind("Workload")).unwrap_or_default();
    // Borrowed, not collected: a large stack has thousands of live objects.
    let observed = match &live.kubernetes {
        crate::model::live::KubeLive::Observed { objects } => Some(objects),
        crate::model::live::KubeLive::NotObserved => None,
    };
    let live_at = |addr: &crate::addr::ResourceAddr| {
        observed
            .and_then(|objects| objects.get(addr))
            .and_then(|o| o.live.as_ref())
    };
    let submissions = submitted_jobs(plan, desired);
    let released = released_runs(plan, &submissions, workloads, &live_at);
    // Kueue's world after the plan, read once and only when something asks for it.
    let cluster_after = std::cell::OnceCell::new();
    let cluster_after =
        || cluster_after.get_or_init(|| Cluster::from_objects_lenient(after.iter().copied()));
    if !submissions.is_empty() {
        plan.notices
            .extend(dws_split_requests(cluster_after(), &submissions));
    }
    let jobs: Vec<PendingWorkload> = submissions.into_iter().map(|(_, job)| job).collect();
    let touches_kueue = plan
        .actions
        .iter()
        .any(|a| a.kind.is_change() && changes_kueue(&a.addr));
    // Live work moves when Kueue's objects change, and when the plan deletes or replaces a run
    // that holds quota: what it frees goes to the Workloads that waited for it.
    let live_work_affected = (touches_kueue || !released.is_empty()) && world.is_some();
    if jobs.is_empty() && !live_work_affected {
        plan.placements = Vec::new();
        plan.quota = Vec::new();
        plan.workload_changes = Vec::new();
    } else {
        // One prediction of the world after the plan: for the plan's own jobs and for the work
        // already there.
        let prediction = predict_in_order(cluster_after(), &jobs, &released);
        let submitted: Vec<&Value> = plan
            .actions
            .iter()
            .filter(|a| a.addr.kind.is_run())
            .filter_map(|a| a.desired.as_deref())
            .collect();
        let read: Vec<&Value> = after.iter().copied().chain(submitted).collect();
        let unmodelled = unmodelled::find(&read, kueue);
        let workload_changes = if live_work_affected {
            let worlds = Worlds {
                before: world_objects().collect(),
                after,
            };
            let mut changes = changes_from(&worlds, &prediction, &unmodelled);
            // A run the plan deletes is in its actions, not a change to live work.
            changes.retain(|change| {
                !released
                    .iter()
                    .any(|r| change.workload == format!("{}/{}", r.namespace, r.name))
            });
            changes
        } else {
            Vec::new()
        };
        let (mut placements, quota) = if jobs.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            placements_of(
                plan,
                &prediction,
                &desired.kubernetes,
                &desired.gke.node_pools,
            )
        };
        unmodelled::mark(&mut placements, &unmodelled, &read);
        if !placements.is_empty() || !workload_changes.is_empty() {
            plan.notices
                .extend(version_notice(kueue, desired.kueue.mode));
        }
        plan.placements = placements;
        plan.quota = quota;
        plan.workload_changes = workload_changes;
    }
    let live_objects = observed
        .into_iter()
        .flat_map(|objects| objects.values().filter_map(|o| o.live.as_ref()));
    // The flavors: desired, then live. The observer keeps few live objects of the spec's own
    // (see `plan_judged`), so the live flavors come from Kueue's world too.
    let world_flavors = world.map(|w| w.kind("ResourceFlavor")).unwrap_or_default();
    plan.disruptions = super::disruption::find(
        plan,
        workloads,
        &live_at,
        desired
            .kube_objects()
            .chain(live_objects)
            .chain(world_flavors),
    );
    // What each orphan holds: a job's quota, through the Workload Kueue made for it.
    let job_workloads = JobWorkloads::new(workloads);
    for orphan in &mut plan.orphans {
        if let Some(found) = live_at(&orphan.address).and_then(|job| job_workloads.of(job)) {
            orphan.holds = held_quota(found.workload);
        }
    }
}

/// What the plan says when the Kueue release that decides is not the one gkq models: how to get
/// predictions, or, with `--predict-anyway`, that its predictions follow the modelled rules.
fn version_notice(kueue: &Manager, mode: InstallMode) -> Option<super::Notice> {
    let version = kueue.version.as_deref()?;
    let release = match unmodelled::version_fit(version) {
        VersionFit::Modelled => return None,
        VersionFit::Other(minor) => minor,
        VersionFit::Unreadable(_) => "that release".to_string(),
    };
    let running = match mode {
        InstallMode::Managed => format!("Kueue {version} is what kueue.version installs"),
        InstallMode::External => format!("Kueue's manager runs {version}"),
    };
    let message = if kueue.predict_anyway {
        format!(
            "placements are predicted with Kueue {MODELLED_MINOR}'s rules although {running} (--predict-anyway): where {release} changed how Kueue places work they may be wrong (see {NEXT_VERSION_DOCS})"
        )
    } else {
        let fix = match mode {
            InstallMode::Managed => format!(
                "pin kueue.version to a {MODELLED_MINOR} release ({MODELLED_VERSION} is built into gkq)"
            ),
            InstallMode::External => format!(
                "install a {MODELLED_MINOR} release of Kueue (or let gkq install it: kueue.install: managed with kueue.version: {MODELLED_VERSION})"
            ),
        };
        format!(
            "placements are not predicted: {running}, and gkq models Kueue {MODELLED_MINOR}; to get predictions {fix}, or plan with --predict-anyway to predict with {MODELLED_MINOR}'s rules (see {NEXT_VERSION_DOCS})"
        )
    };
    Some(super::Notice::new(None, message))
}
