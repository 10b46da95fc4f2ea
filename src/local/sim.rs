//! The simulated cluster: the controllers a real GKE cluster runs, reduced to what gkq's
//! walk-through shows, driven by a clock instead of a daemon. Every call to the local
//! Kubernetes API first brings the world to "now" ([`reconcile`]): it steps from event to event
//! (a ProvisioningRequest coming due, nodes becoming ready, a job starting or finishing, a
//! scale-down), and at each step runs every controller until nothing changes, so that what
//! happens at 10:00:05 happens before what happens at 10:00:10 even when nobody looked in
//! between.
//!
//! Controllers (each labelled as simulated wherever it writes a message):
//! - the API server's own: CRDs become `Established`; Deployments become `Available`; garbage
//!   collection of dependents; namespace deletion;
//! - Kueue ([`super::kueue`]), when its manager is installed and available: webhooks, Workloads
//!   for queued RayJobs, admission decided by gkq's placement module (the same prediction `plan`
//!   shows), the ProvisioningRequest admission check, job suspension, finalizers, queue status;
//! - KubeRay ([`super::ray`]): RayJob status Suspended -> Initializing -> Running -> Complete,
//!   the RayCluster, the finalizer;
//! - JobSet and the Job controller ([`super::batch`]): JobSets and batch Jobs Suspended ->
//!   starting (pods waiting for nodes) -> running -> Completed / Complete;
//! - GKE ([`super::autoscaler`]): the cluster autoscaler and DWS provisioning, within what each
//!   rung can obtain (`GKQ_LOCAL_CAPACITY`); node-pool auto-creation for ComputeClasses
//!   ([`super::computeclass`]).

use serde_json::{Value, json};

use super::controller::{Ctx, Outcome, SimSettings, SimState};
use super::nodes::{PoolInfo, ProvisioningOutcome};
use super::store::{Key, Store, child_map, set_condition};
use crate::vocab::object::condition_true;

/// Whether Kueue's manager is installed and available (its webhooks and controllers run).
pub fn kueue_running(store: &Store) -> bool {
    store
        .get(&Key::new(
            "apps/v1",
            "Deployment",
            Some(crate::model::kueue_install::KUEUE_NAMESPACE),
            crate::model::kueue_install::MANAGER_DEPLOYMENT,
        ))
        .is_some_and(|d| condition_true(d, "Available"))
}

/// Mutating and validating admission for every write: the API server's own defaults, and
/// Kueue's webhooks once Kueue runs.
pub fn admit(store: &Store, object: &mut Value, create: bool) -> Result<(), String> {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let group =
        super::store::group_of(object["apiVersion"].as_str().unwrap_or_default()).to_string();
    if group.is_empty() && kind == "Namespace" {
        let name = object["metadata"]["name"].clone();
        if let Some(labels) = child_map(object, "metadata").and_then(|m| {
            let l = m.entry("labels").or_insert_with(|| json!({}));
            if l.is_null() {
                *l = json!({});
            }
            l.as_object_mut()
        }) {
            labels.insert("kubernetes.io/metadata.name".into(), name);
        }
        if create {
            if let Some(spec) = child_map(object, "spec") {
                spec.insert("finalizers".into(), json!(["kubernetes"]));
            }
            object["status"] = json!({"phase": "Active"});
        }
    }
    if kueue_running(store) {
        super::kueue::webhooks(store, &group, &kind, object, create)?;
    }
    Ok(())
}

/// The API server's controllers: CRDs `Established`, Deployments `Available`, garbage
/// collection.
fn apiserver(ctx: &mut Ctx<'_>) -> Outcome {
    let mut changed = false;
    let now = ctx.now;
    for key in ctx
        .store
        .keys_of_kind("apiextensions.k8s.io", "CustomResourceDefinition")
    {
        let Some(crd) = ctx.store.get(&key) else {
            continue;
        };
        if condition_true(crd, "Established")
            || crd.pointer("/metadata/deletionTimestamp").is_some()
        {
            continue;
        }
        let names = crd.pointer("/spec/names").cloned().unwrap_or(Value::Null);
        let versions: Vec<Value> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v["storage"] == true)
                    .map(|v| v["name"].clone())
                    .collect()
            })
            .unwrap_or_default();
        changed |= ctx.store.update(&key, "kube-apiserver", true, now, |o| {
            o["status"]["acceptedNames"] = names;
            o["status"]["storedVersions"] = Value::Array(versions);
            set_condition(
                o,
                "NamesAccepted",
                "True",
                "NoConflicts",
                "no conflicts found",
                now,
            );
            set_condition(
                o,
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
                now,
            );
        });
    }
    for key in ctx.store.keys_of_kind("apps", "Deployment") {
        let Some(d) = ctx.store.get(&key) else {
            continue;
        };
        if condition_true(d, "Available") {
            continue;
        }
        let replicas = d
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        changed |= ctx
            .store
            .update(&key, "kube-controller-manager", true, now, |o| {
                o["status"]["replicas"] = json!(replicas);
                o["status"]["readyReplicas"] = json!(replicas);
                o["status"]["availableReplicas"] = json!(replicas);
                o["status"]["updatedReplicas"] = json!(replicas);
                set_condition(
                    o,
                    "Available",
                    "True",
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability (simulated).",
                    now,
                );
                set_condition(
                    o,
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    "ReplicaSet has successfully progressed (simulated).",
                    now,
                );
            });
    }
    changed |= ctx.store.collect_garbage(now);
    Outcome { changed }
}

/// One pass of every controller at `ctx.now`; returns whether anything changed.
fn step(ctx: &mut Ctx<'_>) -> bool {
    let changes = ctx.store.take_changes();
    let only = |keep: &dyn Fn(&Key) -> bool| {
        let mut some = changes.clone();
        some.retain(keep);
        some
    };
    ctx.sim.kueue_changes.merge(only(&super::kueue::watches));
    ctx.sim.scheduler_changes.merge(only(&super::kueue::reads));
    ctx.sim.ray_changes.merge(only(&|k| k.group == "ray.io"));
    ctx.sim
        .provisioning_changes
        .merge(only(&|k| k.kind == "ProvisioningRequest"));
    ctx.sim.batch_changes.merge(only(&|k| {
        matches!(
            (k.group.as_str(), k.kind.as_str()),
            ("jobset.x-k8s.io", "JobSet") | ("batch", "Job")
        )
    }));
    let mut changed = apiserver(ctx).changed;
    if kueue_running(ctx.store) {
        changed |= super::kueue::reconcile(ctx).changed;
    }
    changed |= super::ray::reconcile(ctx).changed;
    changed |= super::batch::reconcile(ctx).changed;
    changed |= super::autoscaler::provision(ctx).changed;
    changed |= super::computeclass::reconcile(ctx).changed;
    let demand = super::ray::demand(ctx);
    changed |= super::autoscaler::autoscale(ctx, &demand).changed;
    changed |= super::ray::schedule(ctx, &demand).changed;
    changed
}

/// Runs every controller until nothing changes (bounded, in case of a ping-pong bug).
fn settle(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    ctx.sim.settled_with = None;
    for _ in 0..32 {
        if !step(ctx) {
            ctx.sim.settled_with = Some(ctx.pools.to_vec());
            break;
        }
        changed = true;
    }
    changed
}

/// The next moment something is due, after `after`.
fn next_event(ctx: &Ctx<'_>, after: u64) -> Option<u64> {
    let settings = ctx.settings;
    let mut times: Vec<u64> = Vec::new();
    times.extend(
        ctx.sim
            .provisioning
            .values()
            .filter(|p| !p.resolved && p.outcome != ProvisioningOutcome::Never)
            .map(|p| p.due_ms),
    );
    times.extend(ctx.sim.starting.iter().map(|s| s.ready_ms));
    for run in ctx.sim.runs.values() {
        times.extend(run.running_ms(settings.ray_startup_ms));
        times.extend(run.finished_ms(settings.ray_startup_ms));
    }
    times.extend(
        ctx.sim
            .low_since
            .values()
            .map(|since| since + settings.scale_down_ms),
    );
    times.extend(super::kueue::requeue_times(ctx.store, ctx.sim));
    times.into_iter().filter(|t| *t > after).min()
}

/// When the controllers next have something to do, seen from the moment the world was last
/// brought to (`sim.reconciled_ms`): `None` unless they settled there with `pools` and no object
/// changed since; else the first event due after it (`u64::MAX`: none). Until that moment,
/// bringing the world forward changes nothing ([`reconcile`]).
pub fn quiet_until(
    store: &mut Store,
    sim: &mut SimState,
    settings: &SimSettings,
    pools: &[PoolInfo],
    cluster: &str,
) -> Option<u64> {
    let start = sim.reconciled_ms;
    let ctx = Ctx {
        store,
        sim,
        settings,
        pools,
        cluster,
        now: start,
    };
    quiet_from(&ctx, start)
}

/// [`quiet_until`] from `start`.
fn quiet_from(ctx: &Ctx<'_>, start: u64) -> Option<u64> {
    let settled = ctx.sim.settled_with.as_deref() == Some(ctx.pools) && !ctx.store.has_changes();
    settled.then(|| next_event(ctx, start).unwrap_or(u64::MAX))
}

/// Brings the world from its last reconciled moment to `now`, event by event. Returns whether
/// anything changed.
pub fn reconcile(
    store: &mut Store,
    sim: &mut SimState,
    settings: &SimSettings,
    pools: &[PoolInfo],
    cluster: &str,
    now: u64,
) -> bool {
    let start = sim.reconciled_ms.min(now);
    let mut ctx = Ctx {
        store,
        sim,
        settings,
        pools,
        cluster,
        now: start,
    };
    // The controllers react to changes and to due events only: when they last reached a state
    // where nothing more changes, with the same node pools, and no object changed since and no
    // event falls due before `now`, they would change nothing. A read between writes then
    // costs nothing, not a pass over every object.
    let quiet = quiet_from(&ctx, start).is_some_and(|t| t > now);
    if quiet {
        ctx.sim.reconciled_ms = now;
        return false;
    }
    let mut changed = settle(&mut ctx);
    while let Some(t) = next_event(&ctx, ctx.now).filter(|t| *t <= now) {
        ctx.now = t;
        changed |= settle(&mut ctx);
    }
    if ctx.now < now {
        ctx.now = now;
        changed |= settle(&mut ctx);
    }
    // Only the clock moved: the caller persists that lazily.
    ctx.sim.reconciled_ms = now;
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::ResourceInfo;
    use crate::vocab::object::{condition, name_of};

    fn info(kind: &str, plural: &str, namespaced: bool) -> ResourceInfo {
        ResourceInfo {
            api_version: "kueue.x-k8s.io/v1beta2".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// A store where Kueue's manager runs, with one ClusterQueue, settled.
    fn kueue_world() -> (Store, SimState) {
        let mut store = Store::default();
        for ns in super::super::store::initial_namespaces() {
            store.create(ns, "kube-apiserver", 0);
        }
        store.create(
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": crate::model::kueue_install::MANAGER_DEPLOYMENT,
                    "namespace": crate::model::kueue_install::KUEUE_NAMESPACE},
                "spec": {"replicas": 1}}),
            "test",
            0,
        );
        let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"}, "spec": {"resourceGroups": []}});
        store
            .apply(
                &info("ClusterQueue", "clusterqueues", false),
                &cq,
                "gkq",
                false,
                false,
                1,
                &admit,
            )
            .unwrap();
        let mut sim = SimState::default();
        reconcile(&mut store, &mut sim, &SimSettings::default(), &[], "c", 1);
        assert!(kueue_running(&store));
        (store, sim)
    }

    /// A Workload of `cpu` CPUs in LocalQueue `lq`.
    fn workload(name: &str, cpu: &str) -> Value {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"queueName": "lq", "active": true, "priority": 0, "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}})
    }

    /// Flavor `f`, ClusterQueue `small` with 2 CPUs of it, and LocalQueue `default/lq` on it.
    fn small_queue(store: &mut Store) {
        queue_with_cpu(store, "small", "2");
    }

    /// Flavor `f`, ClusterQueue `cluster_queue` with `cpu` of it, and LocalQueue `default/lq`
    /// on it.
    fn queue_with_cpu(store: &mut Store, cluster_queue: &str, cpu: &str) {
        store.create(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": "f"}, "spec": {}}),
            "test",
            2,
        );
        store.create(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": cluster_queue}, "spec": {"namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f",
                    "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}}),
            "test",
            2,
        );
        store.create(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": cluster_queue}}),
            "test",
            2,
        );
    }

    /// Kueue's scheduler tries a new Workload without trying again the ones it parked as
    /// inadmissible (so a write costs the scheduler what it wrote, not every Workload waiting),
    /// and tries them all once quota is freed.
    #[test]
    fn the_scheduler_retries_parked_workloads_only_when_quota_is_freed() {
        let (mut store, mut sim) = kueue_world();
        small_queue(&mut store);
        let settings = SimSettings::default();
        let mut at = 3;
        let mut add = |store: &mut Store, sim: &mut SimState, name: &str, cpu: &str| {
            store.create(workload(name, cpu), "test", at);
            reconcile(store, sim, &settings, &[], "c", at);
            at += 1;
        };
        let reserved = |store: &Store, name: &str| {
            let key = Key::new("kueue.x-k8s.io/v1beta2", "Workload", Some("default"), name);
            condition_true(store.get(&key).unwrap(), "QuotaReserved")
        };
        add(&mut store, &mut sim, "holder", "2");
        assert!(reserved(&store, "holder"));
        for i in 0..200 {
            add(&mut store, &mut sim, &format!("big-{i:03}"), "2");
        }
        assert!(!reserved(&store, "big-000"));
        add(&mut store, &mut sim, "late", "2");
        assert!(!reserved(&store, "late"));
        let tried = sim.scheduler.as_ref().map(|m| m.tried);
        assert!(
            tried <= Some(2),
            "the last write's run tried {tried:?} Workloads"
        );

        // The holder finishes: its quota goes to the first Workload that waited.
        let key = Key::new(
            "kueue.x-k8s.io/v1beta2",
            "Workload",
            Some("default"),
            "holder",
        );
        store.update(&key, "test", true, at, |o| {
            set_condition(o, "Finished", "True", "Succeeded", "done", at);
        });
        reconcile(&mut store, &mut sim, &settings, &[], "c", at);
        // All were created in the same second: Kueue breaks the tie by uid, so which one gets
        // the quota is not asserted, only that one of those waiting does.
        let holding: Vec<&Value> = store
            .of_kind("kueue.x-k8s.io", "Workload")
            .filter(|w| condition_true(w, "QuotaReserved") && !condition_true(w, "Finished"))
            .collect();
        assert_eq!(holding.len(), 1);
    }

    /// A queue's status write (the counts Kueue keeps after each admission) is no queue change:
    /// the scheduler does not retry every Workload it parked; a change to the queue's spec
    /// still retries them.
    #[test]
    fn a_queue_status_write_does_not_retry_the_parked_workloads() {
        let (mut store, mut sim) = kueue_world();
        small_queue(&mut store);
        let settings = SimSettings::default();
        store.create(workload("holder", "2"), "test", 3);
        for i in 0..150 {
            store.create(workload(&format!("big-{i:03}"), "2"), "test", 3);
        }
        reconcile(&mut store, &mut sim, &settings, &[], "c", 3);
        let holding = |store: &Store| {
            store
                .of_kind("kueue.x-k8s.io", "Workload")
                .filter(|w| condition_true(w, "QuotaReserved"))
                .count()
        };
        assert_eq!(holding(&store), 1);

        // Someone writes both queues' status, and a new Workload arrives.
        let cq = Key::new("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "small");
        let lq = Key::new(
            "kueue.x-k8s.io/v1beta2",
            "LocalQueue",
            Some("default"),
            "lq",
        );
        for key in [&cq, &lq] {
            assert!(store.update(key, "test", true, 3, |o| {
                o["status"]["pendingWorkloads"] = json!(0);
            }));
        }
        store.create(workload("late", "2"), "test", 3);
        // At the same time, so that no run is due to the clock alone.
        reconcile(&mut store, &mut sim, &settings, &[], "c", 3);
        let tried = sim.scheduler.as_ref().map(|m| m.tried);
        assert!(tried <= Some(2), "the scheduler tried {tried:?} Workloads");
        // Kueue's queue status controller still puts its counts back.
        for key in [&cq, &lq] {
            assert_eq!(
                store.get(key).unwrap().pointer("/status/pendingWorkloads"),
                Some(&json!(151))
            );
        }
        assert_eq!(holding(&store), 1);

        // More quota is a queue change: the parked Workloads are tried again.
        assert!(store.update(&cq, "test", false, 5, |o| {
            o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
                json!("4");
        }));
        reconcile(&mut store, &mut sim, &settings, &[], "c", 5);
        assert_eq!(holding(&store), 2);
    }

    /// Submitting Workloads one at a time, each followed by the controllers (as `gkq apply`
    /// submits queued jobs), costs each write what it wrote: the controllers' writes per
    /// Workload do not grow with the Workloads already holding quota, the scheduler keeps what
    /// it read of those holders instead of reading them again, and the queues' status still
    /// counts every one of them.
    #[test]
    fn controller_work_per_queued_workload_does_not_grow_with_the_workloads() {
        let (mut store, mut sim) = kueue_world();
        // Quota for exactly the 300 Workloads: the scheduler, reading its holders as their
        // sums, finds the queue full after them.
        queue_with_cpu(&mut store, "big", "300");
        let settings = SimSettings::default();
        reconcile(&mut store, &mut sim, &settings, &[], "c", 2);
        let mut work = Vec::new();
        for i in 0..300u64 {
            let before = store.update_calls();
            store.create(workload(&format!("w-{i:03}"), "1"), "test", 3 + i);
            for _ in 0..2 {
                reconcile(&mut store, &mut sim, &settings, &[], "c", 3 + i);
            }
            work.push(store.update_calls() - before);
        }
        let first: u64 = work[..50].iter().sum::<u64>() / 50;
        let last: u64 = work[250..].iter().sum::<u64>() / 50;
        assert!(
            last <= first + 2,
            "controller writes per Workload: {first} for the first 50, {last} for the last 50"
        );
        let memory = sim.scheduler.as_ref().expect("the scheduler ran");
        assert_eq!(memory.holders.len(), 300, "the holders the scheduler kept");
        assert!(memory.tried <= 1, "the last run tried {}", memory.tried);
        store.create(workload("w-300", "1"), "test", 303);
        reconcile(&mut store, &mut sim, &settings, &[], "c", 303);
        let late = Key::new(
            "kueue.x-k8s.io/v1beta2",
            "Workload",
            Some("default"),
            "w-300",
        );
        let late = store.get(&late).expect("the Workload exists");
        assert!(!condition_true(late, "QuotaReserved"));
        assert!(
            condition(late, "QuotaReserved").is_some_and(|c| c["message"].as_str().is_some_and(
                |m| m.contains("insufficient unused quota for cpu in flavor f, 1 more needed")
            )),
            "{late}"
        );
        for (kind, name, namespace) in [
            ("ClusterQueue", "big", None),
            ("LocalQueue", "lq", Some("default")),
        ] {
            let key = Key::new("kueue.x-k8s.io/v1beta2", kind, namespace, name);
            let queue = store.get(&key).expect("the queue exists");
            assert_eq!(
                queue.pointer("/status/reservingWorkloads"),
                Some(&json!(300))
            );
            assert_eq!(
                queue.pointer("/status/admittedWorkloads"),
                Some(&json!(300))
            );
            assert_eq!(
                queue.pointer("/status/flavorsReservation/0/resources/0/total"),
                Some(&json!("300"))
            );
        }
        // A restart reads everything again and decides the same.
        let mut restarted = SimState {
            reconciled_ms: sim.reconciled_ms,
            ..SimState::default()
        };
        let mut reread: Store = serde_json::from_value(serde_json::to_value(&store).unwrap())
            .expect("the store reads back");
        assert!(!reconcile(
            &mut reread,
            &mut restarted,
            &settings,
            &[],
            "c",
            303
        ));
    }

    /// A queue's stop drains the Workloads holding quota in it and no others, whichever queue
    /// is written: a LocalQueue no Workload names changes nothing, a stopped LocalQueue drains
    /// its own Workloads, a stopped ClusterQueue every one admitted in it. After each step a
    /// restart, which reads every Workload and queue again, finds nothing left to do.
    #[test]
    fn queue_stops_drain_the_workloads_of_the_queue_written_and_no_others() {
        let (mut store, mut sim) = kueue_world();
        queue_with_cpu(&mut store, "big", "100");
        let settings = SimSettings::default();
        let lq_info = info("LocalQueue", "localqueues", true);
        let local_queue = |name: &str, stop: Option<&str>| {
            let mut lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"clusterQueue": "big"}});
            if let Some(policy) = stop {
                lq["spec"]["stopPolicy"] = json!(policy);
            }
            lq
        };
        let put_local_queue = |store: &mut Store, name: &str, stop: Option<&str>, at: u64| {
            store
                .apply(
                    &lq_info,
                    &local_queue(name, stop),
                    "gkq",
                    false,
                    false,
                    at,
                    &admit,
                )
                .unwrap();
        };
        let mut at = 3;
        for name in ["lq2", "idle"] {
            put_local_queue(&mut store, name, None, at);
        }
        for (name, queue) in [("a-1", "lq"), ("a-2", "lq"), ("b-1", "lq2")] {
            let mut w = workload(name, "1");
            w["spec"]["queueName"] = json!(queue);
            store.create(w, "test", at);
        }
        reconcile(&mut store, &mut sim, &settings, &[], "c", at);
        let drained = |store: &Store| -> Vec<String> {
            store
                .of_kind("kueue.x-k8s.io", "Workload")
                .filter(|w| !condition_true(w, "QuotaReserved"))
                .map(|w| name_of(w).to_string())
                .collect()
        };
        let restart_agrees = |store: &Store, sim: &SimState, at: u64| {
            let mut restarted = SimState {
                reconciled_ms: sim.reconciled_ms,
                ..SimState::default()
            };
            let mut reread: Store = serde_json::from_value(serde_json::to_value(store).unwrap())
                .expect("the store reads back");
            !reconcile(&mut reread, &mut restarted, &settings, &[], "c", at)
        };
        assert!(drained(&store).is_empty(), "all three hold quota");
        assert!(restart_agrees(&store, &sim, at));

        // Stops a LocalQueue, then runs the controllers, one step later.
        let stop_local_queue = |store: &mut Store, sim: &mut SimState, name: &str, at: u64| {
            put_local_queue(store, name, Some("HoldAndDrain"), at);
            reconcile(store, sim, &settings, &[], "c", at);
        };

        // A LocalQueue no Workload names stops: nothing is drained.
        at += 1;
        stop_local_queue(&mut store, &mut sim, "idle", at);
        assert!(drained(&store).is_empty());
        assert!(restart_agrees(&store, &sim, at));

        // `lq` stops: its two Workloads are drained, `lq2`'s keeps its quota.
        at += 1;
        stop_local_queue(&mut store, &mut sim, "lq", at);
        assert_eq!(drained(&store), ["a-1", "a-2"]);
        assert!(restart_agrees(&store, &sim, at));

        // The ClusterQueue stops: the last one goes too.
        at += 1;
        let cq = Key::new("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "big");
        assert!(store.update(&cq, "test", false, at, |o| {
            o["spec"]["stopPolicy"] = json!("HoldAndDrain");
        }));
        reconcile(&mut store, &mut sim, &settings, &[], "c", at);
        assert_eq!(drained(&store), ["a-1", "a-2", "b-1"]);
        assert!(restart_agrees(&store, &sim, at));
    }

    /// Applying queues one at a time, each followed by the controllers (as every request to the
    /// local target is), costs each write the queues it touched: the controllers' work grows
    /// linearly with the number of queues, not quadratically.
    #[test]
    fn controller_work_per_write_does_not_grow_with_the_objects() {
        let (mut store, mut sim) = kueue_world();
        let lq_info = info("LocalQueue", "localqueues", true);
        let mut work = Vec::new();
        for i in 0..300u64 {
            let before = store.update_calls();
            let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": format!("lq-{i}"), "namespace": "default"},
                "spec": {"clusterQueue": "cq"}});
            store
                .apply(&lq_info, &lq, "gkq", false, false, 2 + i, &admit)
                .unwrap();
            // The write's own pass, then a read's: nothing changed since, nothing to do.
            for _ in 0..2 {
                reconcile(
                    &mut store,
                    &mut sim,
                    &SimSettings::default(),
                    &[],
                    "c",
                    2 + i,
                );
            }
            work.push(store.update_calls() - before);
        }
        let last: u64 = work[250..].iter().sum::<u64>() / 50;
        let first: u64 = work[..50].iter().sum::<u64>() / 50;
        assert!(
            last <= first + 2 && last <= 16,
            "controller writes per applied queue: {first} for the first 50, {last} for the last 50"
        );
        // Every queue still got its status.
        let ready = store
            .of_kind("kueue.x-k8s.io", "LocalQueue")
            .filter(|q| condition_true(q, "Active"))
            .count();
        assert_eq!(ready, 300);
    }
}
