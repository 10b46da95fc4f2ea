//! Kueue's Workload controller (`pkg/controller/core/workload_controller.go`): evicted Workloads
//! queue again once their backoff passes, a Workload whose admission checks are all `Ready` is
//! admitted, Workloads being deleted release their finalizer, Workloads holding quota in
//! queues that stop or go away are drained or lose their reservation, and drained ones queue
//! again when their queue runs again; and the admission-check states the check controllers
//! write.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::super::controller::{Ctx, ParkedWorkloads};
use super::super::store::{
    Changes, Key, Store, finalizers, remove_condition, set_condition, timestamp,
};
use super::super::workload::KUEUE_FINALIZER;
use super::clusterqueue::waiting;
use super::{KUEUE, MANAGER, Visit, condition_true, deleting, parse_time, reserving};
use crate::placement::Cluster;
use crate::placement::active::{self, Release};
use crate::placement::podsets::StoppedQueue;
use crate::vocab::object::{condition, name_of, namespace_of};

/// Evicted Workloads whose backoff has passed queue again.
pub(super) fn requeue(ctx: &mut Ctx<'_>, visit: &Visit) -> bool {
    let mut changed = false;
    let now = ctx.now;
    let mut keys: BTreeSet<Key> = visit.keys(ctx.store).into_iter().collect();
    if let Some(noted) = &ctx.sim.kueue_requeue {
        keys.extend(
            noted
                .iter()
                .filter(|(_, t)| **t <= now)
                .map(|(k, _)| k.clone()),
        );
    }
    for key in keys {
        let due = ctx
            .store
            .get(&key)
            .and_then(|w| w.pointer("/status/requeueState/requeueAt"))
            .and_then(Value::as_str)
            .and_then(parse_time)
            .is_some_and(|t| t <= now);
        if due {
            changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                if let Some(state) = o
                    .pointer_mut("/status/requeueState")
                    .and_then(Value::as_object_mut)
                {
                    state.remove("requeueAt");
                }
                set_condition(
                    o,
                    "Requeued",
                    "True",
                    "BackoffFinished",
                    "The workload backoff was finished",
                    now,
                );
            });
        }
    }
    changed
}

pub(super) fn check_states(w: &Value) -> Vec<Value> {
    w.pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn set_check(
    o: &mut Value,
    check: &str,
    state: &str,
    message: &str,
    updates: Option<Value>,
    now: u64,
) {
    if let Some(list) = o
        .pointer_mut("/status/admissionChecks")
        .and_then(Value::as_array_mut)
    {
        for c in list.iter_mut().filter(|c| c["name"] == check) {
            if c["state"] != state {
                c["lastTransitionTime"] = json!(timestamp(now));
            }
            c["state"] = json!(state);
            c["message"] = json!(message);
            match &updates {
                Some(u) => c["podSetUpdates"] = u.clone(),
                None => {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("podSetUpdates");
                    }
                }
            }
        }
    }
}

/// Releases a Workload's quota reservation.
pub(super) fn evict(o: &mut Value, reason: &str, message: &str, now: u64) {
    if let Some(status) = o["status"].as_object_mut() {
        status.remove("admission");
    }
    set_condition(o, "QuotaReserved", "False", "Pending", message, now);
    remove_condition(o, "Admitted");
    set_condition(o, "Evicted", "True", reason, message, now);
}

/// A Workload whose checks are all Ready is admitted.
pub(super) fn admit_when_ready(ctx: &mut Ctx<'_>, visit: &Visit) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in visit.keys(ctx.store) {
        let Some(w) = ctx.store.get(&key) else {
            continue;
        };
        let states = check_states(w);
        if !reserving(w) || condition_true(w, "Admitted") || states.is_empty() {
            continue;
        }
        if states.iter().all(|c| c["state"] == "Ready") {
            changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                set_condition(
                    o,
                    "Admitted",
                    "True",
                    "Admitted",
                    "The workload is admitted",
                    now,
                );
            });
        }
    }
    changed
}

/// Workloads being deleted (their job is gone) release their quota and finalizer.
pub(super) fn release_deleted(ctx: &mut Ctx<'_>, visit: &Visit) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in visit.keys(ctx.store) {
        let Some(w) = ctx.store.get(&key) else {
            continue;
        };
        if deleting(w) && finalizers(w).iter().any(|f| f == KUEUE_FINALIZER) {
            changed |= ctx.store.update(&key, MANAGER, false, now, drop_finalizer);
        }
    }
    changed
}

/// Removes Kueue's finalizer from a Workload, releasing it.
pub(super) fn drop_finalizer(o: &mut Value) {
    let list: Vec<String> = finalizers(o)
        .into_iter()
        .filter(|f| f != KUEUE_FINALIZER)
        .collect();
    o["metadata"]["finalizers"] = json!(list);
}

/// `namespace/name` of a Workload.
fn workload_id(w: &Value) -> String {
    format!("{}/{}", namespace_of(w).unwrap_or_default(), name_of(w))
}

/// Whether a queue changed for queue stops: created, deleted or changed outside its status
/// (the counts Kueue writes into a queue's status stop nothing).
fn queues_changed(changes: &Changes) -> bool {
    ["ClusterQueue", "LocalQueue"]
        .iter()
        .any(|kind| super::queue_kind_changed(changes, kind))
}

/// Whether Kueue's workload controller has anything to look at for queue stops: a queue
/// changed ([`queues_changed`]) or a Workload was written since the last pass.
fn queues_or_workloads_changed(changes: &Changes) -> bool {
    queues_changed(changes) || changes.touches(KUEUE, "Workload")
}

/// Workloads holding quota whose queues stop or go away (`reconcileOnLocalQueueActiveState`,
/// then `reconcileOnClusterQueueActiveState`; docs/kueue.md 1g). What happens to each is
/// placement's rule, the one the plan's what-if predicts with (`placement::active::released`):
/// an admitted Workload of a queue with `stopPolicy: HoldAndDrain` is evicted and, once its
/// job has stopped, marked `Requeued=False` with the eviction's reason (the job reconciler
/// requeues at once only after a preemption or a node failure); a Workload whose reservation
/// waits for its admission checks loses it when a queue is stopped, deleted or missing
/// (`QuotaReserved=False`, reason `Inadmissible`: the `UnadmittedWorkloadsObservability` gate is
/// off in v0.19.2). When the released Workload's LocalQueue is gone, Kueue retries none of the
/// Workloads waiting then ([`ParkedWorkloads`]).
pub(super) fn release_on_queue_stops(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
    if !queues_or_workloads_changed(changes) {
        return false;
    }
    let workloads = stop_candidates(ctx.store, changes);
    if workloads.is_empty() {
        return false;
    }
    // The rule reads a Workload's own LocalQueue and ClusterQueue only: the cluster holds
    // those, not every queue (thousands of LocalQueues applied one by one made each write
    // read them all).
    let mut cluster = Cluster::default();
    let mut read: BTreeSet<Key> = BTreeSet::new();
    for w in &workloads {
        for key in queues_named(w) {
            if !read.insert(key.clone()) {
                continue;
            }
            // A LocalQueue being deleted is gone for the rule; a ClusterQueue being deleted is
            // terminating (placement reads its deletionTimestamp).
            match ctx.store.get(&key) {
                Some(queue) if key.kind == "LocalQueue" && deleting(queue) => {}
                Some(queue) => {
                    let _ = cluster.add_object(queue);
                }
                None => {}
            }
        }
    }
    for w in workloads {
        let _ = cluster.add_object(w);
    }
    let releases: Vec<(Key, Release)> = cluster
        .reserving_workloads
        .iter()
        .filter_map(|w| {
            let release = active::released(&cluster, w)?;
            let key = Key::new(
                "kueue.x-k8s.io/v1beta2",
                "Workload",
                Some(&w.namespace),
                &w.name,
            );
            Some((key, release))
        })
        .collect();
    if releases.is_empty() {
        return false;
    }
    let now = ctx.now;
    let mut changed = false;
    for (key, release) in &releases {
        changed |= ctx
            .store
            .update(key, MANAGER, true, now, |o| match release {
                Release::Evicted(queue) => {
                    let (reason, message) = match queue {
                        StoppedQueue::ClusterQueue => {
                            ("ClusterQueueStopped", "The ClusterQueue is stopped")
                        }
                        StoppedQueue::LocalQueue => {
                            ("LocalQueueStopped", "The LocalQueue is stopped")
                        }
                    };
                    evict(o, reason, message, now);
                    set_condition(o, "Requeued", "False", reason, message, now);
                }
                Release::Unreserved { message, .. } => {
                    if let Some(status) = o["status"].as_object_mut() {
                        status.remove("admission");
                    }
                    set_condition(o, "QuotaReserved", "False", "Inadmissible", message, now);
                }
            });
    }
    let unretried = releases.iter().any(|(_, release)| {
        matches!(
            release,
            Release::Unreserved {
                retries_waiting: false,
                ..
            }
        )
    });
    if unretried {
        let released: BTreeSet<String> = releases
            .iter()
            .map(|(key, _)| format!("{}/{}", key.namespace, key.name))
            .collect();
        park_waiting(ctx, &released);
    }
    changed
}

/// The Workloads holding quota whose release may have changed since the last pass: those
/// written, and those whose LocalQueue or ClusterQueue was written (every one after a restart).
/// Whether a Workload is released reads only it and those two queues (`active::released`).
fn stop_candidates<'s>(store: &'s Store, changes: &Changes) -> Vec<&'s Value> {
    let holds = |w: &Value| reserving(w) && !deleting(w);
    if changes.all {
        return store
            .of_kind(KUEUE, "Workload")
            .filter(|w| holds(w))
            .collect();
    }
    let written: BTreeSet<&Key> = changes.of_kind(KUEUE, "Workload").collect();
    if !queues_changed(changes) {
        return written
            .into_iter()
            .filter_map(|k| store.get(k))
            .filter(|w| holds(w))
            .collect();
    }
    let queues: BTreeSet<&Key> = ["ClusterQueue", "LocalQueue"]
        .iter()
        .flat_map(|kind| changes.of_kind(KUEUE, kind))
        .collect();
    store
        .of_kind(KUEUE, "Workload")
        .filter(|w| holds(w))
        .filter(|w| {
            written.contains(&Key::of(w)) || queues_named(w).iter().any(|q| queues.contains(q))
        })
        .collect()
}

/// The keys of the LocalQueue a Workload names and of the ClusterQueue its admission names.
fn queues_named(w: &Value) -> Vec<Key> {
    let mut keys = Vec::with_capacity(2);
    if let Some(queue) = w.pointer("/spec/queueName").and_then(Value::as_str) {
        keys.push(Key::new(
            "kueue.x-k8s.io/v1beta2",
            "LocalQueue",
            namespace_of(w),
            queue,
        ));
    }
    if let Some(cq) = w
        .pointer("/status/admission/clusterQueue")
        .and_then(Value::as_str)
    {
        keys.push(Key::new("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, cq));
    }
    keys
}

/// Parks the Workloads waiting now, but `released` (their LocalQueue is gone: they wait for it,
/// not for quota).
fn park_waiting(ctx: &mut Ctx<'_>, released: &BTreeSet<String>) {
    let store = &*ctx.store;
    let workloads: BTreeSet<String> = store
        .of_kind(KUEUE, "Workload")
        .filter(|w| waiting(w) && !deleting(w))
        .map(workload_id)
        .filter(|id| !released.contains(id))
        .collect();
    if workloads.is_empty() {
        return;
    }
    // A holder whose LocalQueue is gone retries nothing when it lets its quota go either.
    let holders: BTreeSet<String> = store
        .of_kind(KUEUE, "Workload")
        .filter(|w| reserving(w) && local_queue_of(store, w).is_some())
        .map(workload_id)
        .collect();
    ctx.sim.kueue_parked.push(ParkedWorkloads {
        workloads,
        holders,
        queues: queue_generations(store),
    });
}

/// The generation of each ClusterQueue, Cohort and ResourceFlavor, by `kind/name`: a change to
/// any retries the parked Workloads.
fn queue_generations(store: &Store) -> BTreeMap<String, i64> {
    ["ClusterQueue", "Cohort", "ResourceFlavor"]
        .iter()
        .flat_map(|kind| {
            store.of_kind(KUEUE, kind).map(move |o| {
                let generation = o
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                (format!("{kind}/{}", name_of(o)), generation)
            })
        })
        .collect()
}

/// The Workloads Kueue keeps parked, `namespace/name`, once the events since they were parked
/// are accounted for (a queue's spec changed, a holder let its quota go: all retried).
pub(super) fn parked(ctx: &mut Ctx<'_>) -> BTreeSet<String> {
    if ctx.sim.kueue_parked.is_empty() {
        return BTreeSet::new();
    }
    let store = &*ctx.store;
    let holding: BTreeSet<String> = store
        .of_kind(KUEUE, "Workload")
        .filter(|w| reserving(w) && !deleting(w))
        .map(workload_id)
        .collect();
    let still_waiting: BTreeSet<String> = store
        .of_kind(KUEUE, "Workload")
        .filter(|w| waiting(w) && !deleting(w))
        .map(workload_id)
        .collect();
    let generations = queue_generations(store);
    ctx.sim.kueue_parked.retain_mut(|parked| {
        parked.workloads.retain(|w| still_waiting.contains(w));
        !parked.workloads.is_empty()
            && parked.queues == generations
            && parked.holders.iter().all(|h| holding.contains(h))
    });
    ctx.sim
        .kueue_parked
        .iter()
        .flat_map(|p| p.workloads.iter().cloned())
        .collect()
}

/// The LocalQueue a Workload names, when it exists and is not being deleted.
fn local_queue_of<'s>(store: &'s Store, w: &Value) -> Option<&'s Value> {
    let queue = w.pointer("/spec/queueName").and_then(Value::as_str)?;
    store
        .get(&Key::new(
            "kueue.x-k8s.io/v1beta2",
            "LocalQueue",
            namespace_of(w),
            queue,
        ))
        .filter(|lq| !deleting(lq))
}

fn runs(queue: &Value) -> bool {
    queue
        .pointer("/spec/stopPolicy")
        .and_then(Value::as_str)
        .is_none_or(|policy| policy == "None")
}

/// A Workload drained by a stopped queue (`Requeued=False`, reason `LocalQueueStopped` or
/// `ClusterQueueStopped`) queues again once that queue runs again: `Requeued=True`, reason
/// `LocalQueueRestarted` or `ClusterQueueRestarted` (`workload_controller.go`, `Reconcile`; the
/// ClusterQueue is the one its LocalQueue names). Run after the scheduler: the Workloads that
/// waited in the queue all along are scheduled first (docs/kueue.md 1g).
pub(super) fn requeue_restarted(ctx: &mut Ctx<'_>, changes: &Changes, visit: &Visit) -> bool {
    if !queues_or_workloads_changed(changes) {
        return false;
    }
    let now = ctx.now;
    let mut restarted: Vec<(Key, &'static str, &'static str)> = Vec::new();
    let keys = visit.keys(ctx.store);
    for w in keys.iter().filter_map(|k| ctx.store.get(k)) {
        let reason = condition(w, "Requeued")
            .filter(|c| c["status"] == "False")
            .and_then(|c| c["reason"].as_str());
        let Some(stopped) =
            reason.filter(|r| matches!(*r, "LocalQueueStopped" | "ClusterQueueStopped"))
        else {
            continue;
        };
        let Some(lq) = local_queue_of(ctx.store, w) else {
            continue;
        };
        let requeue = if stopped == "LocalQueueStopped" {
            runs(lq).then_some((
                "LocalQueueRestarted",
                "The LocalQueue was restarted after being stopped",
            ))
        } else {
            let cq = lq.pointer("/spec/clusterQueue").and_then(Value::as_str);
            cq.and_then(|cq| {
                ctx.store.get(&Key::new(
                    "kueue.x-k8s.io/v1beta2",
                    "ClusterQueue",
                    None,
                    cq,
                ))
            })
            .filter(|cq| runs(cq))
            .map(|_| {
                (
                    "ClusterQueueRestarted",
                    "The ClusterQueue was restarted after being stopped",
                )
            })
        };
        if let Some((reason, message)) = requeue {
            restarted.push((Key::of(w), reason, message));
        }
    }
    let mut changed = false;
    for (key, reason, message) in restarted {
        changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
            set_condition(o, "Requeued", "True", reason, message, now);
        });
    }
    changed
}
