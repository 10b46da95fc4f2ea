//! What a plan does to the work already in the cluster: every live Workload (any kind Kueue
//! manages, whoever submitted it) predicted before and after the plan's queue, flavor, cohort
//! and check changes, and the differences a person should see before merging.
//!
//! Before: Kueue's world as read. After: the same world with the plan's objects in place of the
//! live ones and the objects it deletes gone, plus the jobs it submits. Both are predicted with
//! the same rules ([`crate::placement::predict`]). Kueue does not re-check admitted work when
//! quotas shrink, so an admitted Workload stays admitted unless preemption evicts it; when its
//! ClusterQueue's usage ends up above the quota the plan leaves, the change says so.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::addr::ResourceAddr;
use crate::placement::unmodelled::{self, Manager, Unmodelled};
use crate::placement::{
    Cluster, FlavorUsage, PendingWorkload, Placement, PlacementState, PodSetPlacement, Prediction,
    observed_placement, predict,
};
use crate::vocab::object::{name_of, namespace_of};

/// One live Workload whose prediction the plan changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadChange {
    /// `namespace/name` of the Workload.
    pub workload: String,
    /// The job that owns it, `Kind namespace/name`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    pub before: WorkloadState,
    pub after: WorkloadState,
    /// What the states alone do not say (Kueue keeping admitted work over a lowered quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A Workload's state as predicted (or, for admitted work before the plan, as observed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadState {
    pub state: PlacementState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    /// Flavor per podset; without flavors while pending.
    pub podsets: Vec<PodSetPlacement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who preempts it (`namespace/name`), when the plan makes Kueue evict it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_by: Option<String>,
    /// Set when Kueue behaviour gkq does not model touches it: the state is then not a
    /// prediction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_predicted: Option<String>,
}

impl WorkloadState {
    fn of(placement: &Placement) -> Self {
        WorkloadState {
            state: placement.state,
            cluster_queue: placement.cluster_queue.clone(),
            podsets: placement.podsets.clone(),
            reason: placement.reason.clone(),
            preempted_by: placement.preempted_by.clone(),
            not_predicted: placement.not_predicted.clone(),
        }
    }

    /// Whether a person would see a difference (podset counts aside, which a plan never
    /// changes for live work).
    fn differs(&self, other: &WorkloadState) -> bool {
        let flavors = |s: &WorkloadState| -> Vec<Option<String>> {
            s.podsets.iter().map(|p| p.flavor.clone()).collect()
        };
        self.state != other.state
            || self.cluster_queue != other.cluster_queue
            || flavors(self) != flavors(other)
            || self.reason != other.reason
            || self.preempted_by != other.preempted_by
            || other.not_predicted.is_some()
    }
}

/// Kueue's world before and after a plan, as objects.
pub struct Worlds<'a> {
    /// As read: queues, flavors, checks, priorities, namespaces and every Workload.
    pub before: Vec<&'a Value>,
    /// The plan's result: `before` with the plan's objects in place and its deletes gone.
    pub after: Vec<&'a Value>,
}

/// The world after a plan: `world` with each object the plan converges to (`desired`) in place
/// of the live one at the same address, and the objects it deletes removed. A Workload written
/// in the spec is counted once, as the spec has it.
pub fn world_after<'a>(
    world: impl IntoIterator<Item = &'a Value>,
    desired: impl IntoIterator<Item = &'a Value>,
    deleted: &BTreeSet<&ResourceAddr>,
) -> Vec<&'a Value> {
    let desired: Vec<&Value> = desired.into_iter().collect();
    let replaced: BTreeSet<ResourceAddr> = desired
        .iter()
        .filter_map(|o| ResourceAddr::from_object(o).ok())
        .collect();
    world
        .into_iter()
        .filter(|o| {
            ResourceAddr::from_object(o)
                .is_ok_and(|addr| !replaced.contains(&addr) && !deleted.contains(&addr))
        })
        .chain(desired)
        .collect()
}

/// `(namespace, kind, job)` as a placement names its workload.
fn placement_key(placement: &Placement) -> (String, String, String) {
    (
        placement.namespace.clone(),
        placement.kind.clone(),
        placement.job.clone(),
    )
}

fn workload_placement_key(workload: &PendingWorkload) -> (String, String, String) {
    let (kind, job) = workload
        .owner
        .clone()
        .unwrap_or_else(|| (workload.kind.clone(), workload.name.clone()));
    (workload.namespace.clone(), kind, job)
}

/// Every live Workload whose prediction differs between the two worlds, in the order Kueue
/// queues them (pending first, then admitted), with `jobs` (the plan's own submissions)
/// competing in the world after. A Workload holding quota changes when it is preempted, when a
/// stopped or deleted queue releases its quota ([`crate::placement::active::release`]), or
/// when what it runs in is not modelled; else it keeps its quota (noted when over a lowered
/// quota).
pub fn workload_changes(
    worlds: &Worlds<'_>,
    jobs: &[PendingWorkload],
    manager: &Manager,
) -> Vec<WorkloadChange> {
    let after = predict(
        &Cluster::from_objects_lenient(worlds.after.iter().copied()),
        jobs,
    );
    let unmodelled = unmodelled::find(&worlds.after, manager);
    changes_from(worlds, &after, &unmodelled)
}

/// [`workload_changes`] given the prediction of the world after (which a plan has made already
/// for its own jobs) and what in that world gkq does not model.
pub fn changes_from(
    worlds: &Worlds<'_>,
    after: &Prediction,
    unmodelled: &[Unmodelled],
) -> Vec<WorkloadChange> {
    let before_cluster = Cluster::from_objects_lenient(worlds.before.iter().copied());
    let before = predict(&before_cluster, &[]);
    let mut after_queued = after.queued.clone();
    let mut after_preempted = after.preempted.clone();
    unmodelled::mark(&mut after_queued, unmodelled, &worlds.after);
    unmodelled::mark(&mut after_preempted, unmodelled, &worlds.after);
    let after_queued: BTreeMap<_, &Placement> =
        after_queued.iter().map(|p| (placement_key(p), p)).collect();
    let after_preempted: BTreeMap<_, &Placement> = after_preempted
        .iter()
        .map(|p| (placement_key(p), p))
        .collect();
    // The plan's own jobs: a live Workload of a job it replaces is in its placements instead.
    let submitted: BTreeSet<(String, String, String)> =
        after.placements.iter().map(placement_key).collect();

    let mut changes = Vec::new();
    // Waiting Workloads: predicted in both worlds.
    for (workload, placement) in before_cluster.pending_workloads.iter().zip(&before.queued) {
        let key = workload_placement_key(workload);
        if submitted.contains(&key) {
            // The plan replaces this job: its new run is in the plan's placements.
            continue;
        }
        let before_state = WorkloadState::of(placement);
        let after_state = match after_queued.get(&key) {
            Some(p) => WorkloadState::of(p),
            None => continue,
        };
        if before_state.differs(&after_state) {
            changes.push(change(workload, before_state, after_state, None));
        }
    }
    // Admitted Workloads: as observed before; after, they keep their quota unless preempted.
    let admitted = admitted_workloads(&worlds.before);
    for (reserving, observed) in before_cluster
        .reserving_workloads
        .iter()
        .filter_map(|r| Some((r, admitted.get(&(r.namespace.clone(), r.name.clone()))?)))
    {
        let Some(workload) = &reserving.workload else {
            continue;
        };
        let key = workload_placement_key(workload);
        if submitted.contains(&key) {
            continue;
        }
        let before_state = WorkloadState::of(observed);
        // Preempted, or released by a stopped or deleted queue (then it queues again).
        if let Some(after) = after_preempted.get(&key).or_else(|| after_queued.get(&key)) {
            let after_state = WorkloadState::of(after);
            changes.push(change(workload, before_state, after_state, None));
            continue;
        }
        let not_predicted = unmodelled
            .iter()
            .find(|u| {
                u.cluster_queues
                    .as_ref()
                    .is_none_or(|queues| queues.contains(&reserving.cluster_queue))
            })
            .map(unmodelled::Unmodelled::message);
        if let Some(not_predicted) = not_predicted {
            let mut after_state = before_state.clone();
            after_state.not_predicted = Some(not_predicted);
            changes.push(change(workload, before_state, after_state, None));
            continue;
        }
        if let Some(note) = plan_keeps_over_quota(
            &reserving.cluster_queue,
            observed,
            &before.usage,
            &after.usage,
        ) {
            let after_state = before_state.clone();
            changes.push(change(workload, before_state, after_state, Some(note)));
        }
    }
    changes
}

fn change(
    workload: &PendingWorkload,
    before: WorkloadState,
    after: WorkloadState,
    note: Option<String>,
) -> WorkloadChange {
    WorkloadChange {
        workload: format!("{}/{}", workload.namespace, workload.name),
        job: workload
            .owner
            .as_ref()
            .map(|(kind, name)| format!("{kind} {}/{name}", workload.namespace)),
        before,
        after,
        note,
    }
}

/// The live Workloads holding quota, with their placement as Kueue made it.
fn admitted_workloads(world: &[&Value]) -> BTreeMap<(String, String), Placement> {
    world
        .iter()
        .filter(|o| o["kind"] == "Workload")
        .filter_map(|o| {
            let placement = observed_placement(o).ok()?;
            matches!(
                placement.state,
                PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks
            )
            .then(|| {
                (
                    (
                        namespace_of(o).unwrap_or_default().to_string(),
                        name_of(o).to_string(),
                    ),
                    placement,
                )
            })
        })
        .collect()
}

/// [`kept_over_quota`] after the plan, when the plan is what makes it so: a queue that already
/// ran over its nominal quota before the plan (work borrowed from its cohort, in a queue the plan
/// does not touch) is not a change the plan makes to that work.
fn plan_keeps_over_quota(
    cluster_queue: &str,
    observed: &Placement,
    usage_before: &[FlavorUsage],
    usage_after: &[FlavorUsage],
) -> Option<String> {
    let after = kept_over_quota(cluster_queue, observed, usage_after)?;
    let before = kept_over_quota(cluster_queue, observed, usage_before);
    (before.as_ref() != Some(&after)).then_some(after)
}

/// When an admitted Workload's ClusterQueue ends up using more of one of the workload's flavors
/// than the quota the plan leaves (or the flavor or queue is gone): Kueue keeps the workload,
/// and says nothing; the plan does.
fn kept_over_quota(
    cluster_queue: &str,
    observed: &Placement,
    usage_after: &[FlavorUsage],
) -> Option<String> {
    let used: BTreeSet<(&str, &str)> = observed
        .podsets
        .iter()
        .flat_map(|p| p.flavors.iter())
        .map(|(resource, flavor)| (flavor.as_str(), resource.as_str()))
        .collect();
    let rows: Vec<&FlavorUsage> = usage_after
        .iter()
        .filter(|row| row.cluster_queue == cluster_queue)
        .collect();
    if rows.is_empty() {
        return Some(format!(
            "Kueue keeps it admitted: ClusterQueue {cluster_queue} is gone after this plan (Kueue holds its deletion until admitted work finishes) and would not admit it again"
        ));
    }
    for (flavor, resource) in &used {
        let Some(row) = rows
            .iter()
            .find(|row| row.flavor == *flavor && row.resource == *resource)
        else {
            return Some(format!(
                "Kueue keeps it admitted, although ClusterQueue {cluster_queue} has no {resource} quota in flavor {flavor} after this plan and would not admit it again"
            ));
        };
        if row.used_live > row.nominal && row.borrowing_limit.is_none() && row.cohort.is_none() {
            return Some(format!(
                "Kueue keeps it admitted, although ClusterQueue {cluster_queue} then uses {} {resource} of flavor {flavor} against a quota of {}: it would not admit it again",
                row.used_live, row.nominal
            ));
        }
        if row.used_live > row.nominal {
            return Some(format!(
                "Kueue keeps it admitted; ClusterQueue {cluster_queue} then uses {} {resource} of flavor {flavor}, above its nominal quota of {}, and admits it again only by borrowing from cohort {}",
                row.used_live,
                row.nominal,
                row.cohort.as_deref().unwrap_or("(none)")
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(kind: &str, namespace: Option<&str>, name: &str, spec: Value) -> Value {
        let api_version = match kind {
            "Namespace" => "v1",
            _ => "kueue.x-k8s.io/v1beta2",
        };
        let mut metadata = json!({"name": name});
        if let Some(ns) = namespace {
            metadata["namespace"] = json!(ns);
        }
        json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec})
    }

    /// A Workload written in the spec replaces the live one instead of counting twice; what the
    /// plan deletes is gone; everything else stays as read.
    #[test]
    fn the_world_after_has_each_object_once() {
        let world = vec![
            object("ClusterQueue", None, "cq", json!({"v": "live"})),
            object("ClusterQueue", None, "pruned", json!({})),
            object("Workload", Some("team"), "w", json!({"v": "live"})),
            object("LocalQueue", Some("other"), "theirs", json!({})),
        ];
        let desired = vec![
            object("ClusterQueue", None, "cq", json!({"v": "spec"})),
            object("Workload", Some("team"), "w", json!({"v": "spec"})),
            object("ResourceFlavor", None, "new", json!({})),
        ];
        let pruned = ResourceAddr::from_object(&world[1]).unwrap();
        let deleted = BTreeSet::from([&pruned]);
        let after = world_after(&world, &desired, &deleted);
        let names: Vec<(String, String)> = after
            .iter()
            .map(|o| {
                (
                    format!("{}/{}", o["kind"].as_str().unwrap(), name_of(o)),
                    o["spec"]["v"].as_str().unwrap_or("-").to_string(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("LocalQueue/theirs".to_string(), "-".to_string()),
                ("ClusterQueue/cq".to_string(), "spec".to_string()),
                ("Workload/w".to_string(), "spec".to_string()),
                ("ResourceFlavor/new".to_string(), "-".to_string()),
            ]
        );
    }

    fn state(state: PlacementState, flavor: Option<&str>, reason: Option<&str>) -> WorkloadState {
        let flavors = flavor
            .map(|f| BTreeMap::from([("cpu".to_string(), f.to_string())]))
            .unwrap_or_default();
        WorkloadState {
            state,
            cluster_queue: Some("cq".into()),
            podsets: vec![PodSetPlacement::new("main".into(), 1, flavors)],
            reason: reason.map(str::to_string),
            preempted_by: None,
            not_predicted: None,
        }
    }

    #[test]
    fn a_person_sees_state_flavor_reason_and_preemptor_changes() {
        let pending = state(PlacementState::Pending, None, Some("no quota"));
        let admitted = state(PlacementState::Admitted, Some("on-demand"), None);
        assert!(pending.differs(&admitted));
        assert!(!pending.differs(&pending.clone()));
        let other_reason = state(PlacementState::Pending, None, Some("inactive"));
        assert!(pending.differs(&other_reason));
        let elsewhere = state(PlacementState::Admitted, Some("dws"), None);
        assert!(admitted.differs(&elsewhere));
        let mut preempted = admitted.clone();
        preempted.preempted_by = Some("ns/high".into());
        assert!(admitted.differs(&preempted));
    }

    fn usage(nominal: &str, used: &str, cohort: Option<&str>) -> FlavorUsage {
        let q = |s: &str| s.parse().unwrap();
        FlavorUsage {
            cluster_queue: "cq".into(),
            cohort: cohort.map(str::to_string),
            flavor: "on-demand".into(),
            resource: "cpu".into(),
            nominal: q(nominal),
            borrowing_limit: None,
            lending_limit: None,
            used_live: q(used),
            used_queued: q("0"),
            used_plan: q("0"),
        }
    }

    #[test]
    fn admitted_work_over_a_lowered_quota_is_kept_and_said() {
        let placement = Placement {
            job: "a".into(),
            namespace: "ns".into(),
            kind: "Job".into(),
            cluster_queue: Some("cq".into()),
            podsets: state(PlacementState::Admitted, Some("on-demand"), None).podsets,
            state: PlacementState::Admitted,
            reason: None,
            admission_checks: vec![],
            reclaim: None,
            preempts: vec![],
            preempted_by: None,
            not_predicted: None,
            attempts: Vec::new(),
        };
        assert_eq!(
            kept_over_quota("cq", &placement, &[usage("8", "6", None)]),
            None
        );
        let over = kept_over_quota("cq", &placement, &[usage("4", "6", None)]).unwrap();
        assert!(
            over.contains("uses 6 cpu of flavor on-demand against a quota of 4"),
            "{over}"
        );
        let borrowing = kept_over_quota("cq", &placement, &[usage("4", "6", Some("c"))]).unwrap();
        assert!(
            borrowing.contains("only by borrowing from cohort c"),
            "{borrowing}"
        );
        // Borrowing that the plan leaves as it was is not the plan's change; more of it is.
        let before = [usage("4", "6", Some("c"))];
        assert_eq!(
            plan_keeps_over_quota("cq", &placement, &before, &before),
            None
        );
        let more = plan_keeps_over_quota("cq", &placement, &before, &[usage("2", "6", Some("c"))]);
        assert!(more.is_some_and(|m| m.contains("nominal quota of 2")));
        let lowered = plan_keeps_over_quota(
            "cq",
            &placement,
            &[usage("8", "6", None)],
            &[usage("4", "6", None)],
        );
        assert!(lowered.is_some());
        let gone = kept_over_quota("cq", &placement, &[]).unwrap();
        assert!(gone.contains("is gone after this plan"), "{gone}");
        let mut other = usage("4", "0", None);
        other.flavor = "dws".into();
        let no_flavor = kept_over_quota("cq", &placement, &[other]).unwrap();
        assert!(
            no_flavor.contains("has no cpu quota in flavor on-demand"),
            "{no_flavor}"
        );
    }
}
