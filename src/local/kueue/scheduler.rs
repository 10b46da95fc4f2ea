//! Kueue's scheduler (`pkg/scheduler`): **admission is decided by gkq's placement module**
//! (`placement::predict`, faithful to Kueue v0.19.2) over the live queues, flavors and
//! Workloads, so the local target shows the same decision `gkq plan` predicts; reservations are
//! written as Kueue writes them (`status.admission.podSetAssignments` with flavors, resource
//! usage and counts; `QuotaReserved`, `Admitted`, `status.admissionChecks`). The Workloads the
//! prediction preempts are evicted as Kueue evicts them (`Evicted` and `Preempted`, the
//! reservation released; the job controller then suspends their jobs), so a preemptor never
//! runs beside its victims; they queue again and the next pass places them.

use serde_json::{Value, json};

use std::collections::BTreeSet;

use super::super::controller::{Ctx, SchedulerMemory};
use super::super::store::{Changes, Key, Store, remove_condition, set_condition, timestamp};
use super::holders::Holders;
use super::workload::evict;
use super::{KUEUE, MANAGER, deleting, finished, parse_time, reserving, sum};
use crate::placement::objects::KUEUE_KINDS;
use crate::placement::objects::ReservingWorkload;
use crate::placement::{Cluster, PendingWorkload, Placement, PlacementState, Prediction, predict};
use crate::vocab::object::{condition, name_of, namespace_of, owners};

/// The scheduler: gkq's placement prediction over the live cluster decides.
pub(super) fn schedule(ctx: &mut Ctx<'_>) -> bool {
    let now = ctx.now;
    let Some(tried) = what_to_try(ctx) else {
        return false;
    };
    let mut memory = ctx.sim.scheduler.take().unwrap_or_default();
    let pending_keys = remember(ctx, &mut memory, &tried);
    memory.at_ms = now;
    let Some(mut cluster) = scheduling_input(ctx, &pending_keys) else {
        memory.tried = 0;
        ctx.sim.scheduler = Some(memory);
        return false;
    };
    memory.tried = cluster.pending_workloads.len();
    let pending: Vec<PendingWorkload> = cluster.pending_workloads.clone();
    let prediction = predict_with_holders(&mut cluster, &mut memory.holders);
    let mut changed = evict_victims(ctx, &prediction.preempted);
    for (workload, placement) in pending.iter().zip(&prediction.queued) {
        let key = Key::new(
            "kueue.x-k8s.io/v1beta2",
            "Workload",
            Some(&workload.namespace),
            &workload.name,
        );
        match placement.state {
            PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks => {
                changed |= reserve(ctx, &key, workload, placement);
                memory.holding.insert(key);
            }
            PlacementState::Pending => {
                let message = placement.reason.clone().unwrap_or_default();
                let decided = ctx
                    .store
                    .get(&key)
                    .and_then(|w| condition(w, "QuotaReserved"));
                if decided.is_some_and(|c| {
                    c["status"] == "False"
                        && c["reason"] == "Pending"
                        && c["message"] == message.as_str()
                }) {
                    continue;
                }
                changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                    set_condition(o, "QuotaReserved", "False", "Pending", &message, now);
                });
            }
            _ => {}
        }
    }
    ctx.sim.scheduler = Some(memory);
    changed
}

/// [`predict`] over `cluster` with the Workloads holding quota, read as possible victims only
/// when one can be: when no ClusterQueue may preempt (placement's `can_preempt`, what its
/// simulation asks before looking for victims), holders that keep their quota (placement's
/// `active::released`) count only for that quota, read as their groups' sums
/// ([`Holders::summed`]). So a run costs the pending Workloads' prediction, not every holder's.
fn predict_with_holders(cluster: &mut Cluster, holders: &mut Holders) -> Prediction {
    let victims_possible = cluster
        .cluster_queues
        .iter()
        .any(|cq| cq.preemption.can_preempt());
    if !victims_possible && let Some(summed) = holders.summed(cluster) {
        cluster.reserving_workloads = summed;
        return predict(cluster, &[]);
    }
    cluster.reserving_workloads = holders.take_all();
    let prediction = if victims_possible {
        predict(cluster, &[])
    } else {
        // A group's quota is taken back: each holder counts on its own, those that keep their
        // quota for their quota alone.
        let keeps: Vec<bool> = cluster
            .reserving_workloads
            .iter()
            .map(|w| crate::placement::active::released(cluster, w).is_none())
            .collect();
        let mut set_aside: Vec<Option<PendingWorkload>> = Vec::with_capacity(keeps.len());
        for (w, keeps) in cluster.reserving_workloads.iter_mut().zip(&keeps) {
            set_aside.push(if *keeps { w.workload.take() } else { None });
        }
        let prediction = predict(cluster, &[]);
        for (w, read) in cluster.reserving_workloads.iter_mut().zip(set_aside) {
            if read.is_some() {
                w.workload = read;
            }
        }
        prediction
    };
    holders.put_back(std::mem::take(&mut cluster.reserving_workloads));
    prediction
}

/// Which pending Workloads a scheduler run tries.
enum ToTry {
    /// All of them: after a restart, or when quota may have been freed or a queue, flavor,
    /// check, priority class or namespace changed (a queue's status alone does not count:
    /// [`super::queue_change`]).
    Every,
    /// The Workloads written since the last run (new ones among them) and those Kueue keeps
    /// retrying (see [`tried_anyway`]).
    These(BTreeSet<Key>),
}

/// Which pending Workloads a run tries: `None` when nothing the scheduler reads changed since
/// its last run (then it would decide as it did). A Workload Kueue found no room for is
/// parked as inadmissible and tried again only after such an event, as Kueue does
/// (`pkg/cache/queue/cluster_queue.go`, `requeueIfNotPresent`; docs/kueue.md 1b).
fn what_to_try(ctx: &mut Ctx<'_>) -> Option<ToTry> {
    let mut changes = std::mem::replace(&mut ctx.sim.scheduler_changes, Changes::none());
    let mut written = ctx.store.pending_changes().clone();
    written.retain(super::reads);
    changes.merge(written);
    let Some(memory) = &ctx.sim.scheduler else {
        return Some(ToTry::Every);
    };
    let is_workload = |k: &Key| k.group == KUEUE && k.kind == "Workload";
    let is_job = |k: &Key| {
        super::jobs::JOB_KINDS
            .iter()
            .any(|(group, kind)| k.group == *group && k.kind == *kind)
    };
    let others = changes
        .keys
        .iter()
        .any(|k| !is_workload(k) && !is_job(k) && super::queue_change(&changes, k));
    let released = changes.keys.iter().filter(|k| is_workload(k)).any(|k| {
        memory.holding.contains(k)
            && ctx
                .store
                .get(k)
                .is_none_or(|w| !reserving(w) || deleting(w))
    });
    if changes.all || others || released {
        return Some(ToTry::Every);
    }
    let workloads: BTreeSet<Key> = changes.keys.into_iter().filter(is_workload).collect();
    (!workloads.is_empty() || memory.at_ms != ctx.now).then_some(ToTry::These(workloads))
}

/// Pending Workloads tried whether or not they changed: those Kueue requeues by itself (after a
/// backoff or an eviction), and those of a StrictFIFO queue, whose head blocks the rest.
fn tried_anyway(store: &Store, w: &Value) -> bool {
    condition(w, "QuotaReserved").is_none()
        || w.pointer("/status/requeueState").is_some()
        || condition(w, "Evicted").is_some()
        || in_strict_fifo_queue(store, w)
}

/// Whether Workload `w`'s LocalQueue exists and its ClusterQueue is StrictFIFO, or missing. Looked
/// up per Workload: reading every LocalQueue on each run made applying thousands of them
/// quadratic.
fn in_strict_fifo_queue(store: &Store, w: &Value) -> bool {
    let queue = w
        .pointer("/spec/queueName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(lq) = store.get(&Key::new(
        "kueue.x-k8s.io/v1beta2",
        "LocalQueue",
        Some(namespace_of(w).unwrap_or_default()),
        queue,
    )) else {
        return false;
    };
    let cq = lq
        .pointer("/spec/clusterQueue")
        .and_then(Value::as_str)
        .unwrap_or_default();
    store
        .get(&Key::new(
            "kueue.x-k8s.io/v1beta2",
            "ClusterQueue",
            None,
            cq,
        ))
        .is_none_or(|cq| {
            cq.pointer("/spec/queueingStrategy").and_then(Value::as_str) == Some("StrictFIFO")
        })
}

/// Brings the scheduler's memory up to the store: the Workloads holding quota (read again
/// when written), and those every run tries. Returns the pending Workloads this run may try:
/// every Workload, or those written since the last run and those tried anyway.
fn remember(ctx: &Ctx<'_>, memory: &mut SchedulerMemory, tried: &ToTry) -> BTreeSet<Key> {
    let store = &*ctx.store;
    let holds = |w: &Value| !deleting(w) && !finished(w) && reserving(w);
    let retried =
        |w: &Value| !deleting(w) && !finished(w) && !reserving(w) && tried_anyway(store, w);
    let version = |w: &Value| {
        w.pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match tried {
        ToTry::Every => {
            // Read again only what was written since.
            let mut known: std::collections::HashMap<Key, (String, ReservingWorkload)> =
                memory.holders.drain().collect();
            memory.holding.clear();
            memory.retried.clear();
            let mut all = BTreeSet::new();
            for w in store.of_kind(KUEUE, "Workload") {
                let key = Key::of(w);
                if holds(w) {
                    memory.holding.insert(key.clone());
                    let read = match known.remove(&key) {
                        Some((v, read)) if v == version(w) => Some(read),
                        _ => read_reserving(w),
                    };
                    if let Some(read) = read {
                        memory.holders.push(key.clone(), version(w), read);
                    }
                } else if retried(w) {
                    memory.retried.insert(key.clone());
                }
                all.insert(key);
            }
            all
        }
        ToTry::These(written) => {
            for key in written {
                let w = store.get(key);
                let at = memory.holders.position(key);
                match (w.filter(|w| holds(w)), at) {
                    (Some(w), Ok(i)) if memory.holders.version_at(i) == version(w) => {}
                    (Some(w), at) => match (read_reserving(w), at) {
                        (Some(read), Ok(i)) => memory.holders.replace(i, version(w), read),
                        (Some(read), Err(i)) => {
                            memory.holders.insert(i, key.clone(), version(w), read)
                        }
                        (None, Ok(i)) => memory.holders.remove(i),
                        (None, Err(_)) => {}
                    },
                    (None, Ok(i)) => memory.holders.remove(i),
                    (None, Err(_)) => {}
                }
                if w.is_some_and(&holds) {
                    memory.holding.insert(key.clone());
                } else {
                    memory.holding.remove(key);
                }
                if w.is_some_and(&retried) {
                    memory.retried.insert(key.clone());
                } else {
                    memory.retried.remove(key);
                }
            }
            written.union(&memory.retried).cloned().collect()
        }
    }
}

/// A Workload holding quota as placement reads it (`None` when placement does not count it:
/// inactive).
fn read_reserving(w: &Value) -> Option<ReservingWorkload> {
    let mut one = Cluster::default();
    let _ = one.add_object(w);
    one.reserving_workloads.pop()
}

/// The cluster the prediction reads, but for the Workloads holding quota
/// ([`predict_with_holders`] adds them): Kueue's objects, priority classes, namespaces and the
/// pending Workloads among `keys`, less those waiting for a requeue or parked. `None` when none
/// is pending.
fn scheduling_input(ctx: &mut Ctx<'_>, keys: &BTreeSet<Key>) -> Option<Cluster> {
    let now = ctx.now;
    // Workloads Kueue parked without retrying them stay where they are.
    let parked = super::workload::parked(ctx);
    let pending: Vec<&Value> = keys
        .iter()
        .filter_map(|k| ctx.store.get(k))
        .filter(|w| !deleting(w) && !finished(w) && !reserving(w))
        .filter(|w| {
            let waiting = w
                .pointer("/status/requeueState/requeueAt")
                .and_then(Value::as_str)
                .and_then(parse_time)
                .is_some_and(|t| t > now);
            let is_parked = !parked.is_empty()
                && parked.contains(&format!(
                    "{}/{}",
                    namespace_of(w).unwrap_or_default(),
                    name_of(w)
                ));
            !waiting && !is_parked
        })
        .collect();
    if pending.is_empty() {
        return None;
    }
    let mut cluster = Cluster::default();
    // The queues and flavors first: the Workloads are read against them.
    let kueue_kinds = KUEUE_KINDS.iter().map(|kind| (KUEUE, *kind));
    let others = [("scheduling.k8s.io", "PriorityClass"), ("", "Namespace")];
    for (group, kind) in kueue_kinds.chain(others) {
        for o in ctx.store.of_kind(group, kind) {
            let queue_like = matches!(kind, "ClusterQueue" | "LocalQueue" | "Cohort");
            if queue_like && deleting(o) {
                continue;
            }
            let _ = cluster.add_object(o);
        }
    }
    // Workloads were read (the prediction counts their usage, not the queues' status).
    cluster.workloads_observed = true;
    for w in pending {
        let _ = cluster.add_object(w);
    }
    Some(cluster)
}

/// Writes the reservation the prediction made for `workload` as Kueue writes it.
fn reserve(
    ctx: &mut Ctx<'_>,
    key: &Key,
    workload: &PendingWorkload,
    placement: &Placement,
) -> bool {
    let now = ctx.now;
    let cq = placement.cluster_queue.clone().unwrap_or_default();
    let assignments: Vec<Value> = placement
        .podsets
        .iter()
        .map(|ps| {
            let requests = workload
                .pod_sets
                .iter()
                .find(|p| p.name == ps.name)
                .map(|p| p.requests.clone())
                .unwrap_or_default();
            let mut usage = serde_json::Map::new();
            for resource in ps.flavors.keys() {
                if resource == "pods" {
                    // Kueue's `pods` resource counts one per pod.
                    usage.insert(resource.clone(), json!(ps.count.max(0).to_string()));
                    continue;
                }
                if let Some(q) = requests.get(resource) {
                    let copies = vec![*q; ps.count.max(0) as usize];
                    usage.insert(resource.clone(), json!(sum(&copies).to_canonical_string()));
                }
            }
            json!({"name": ps.name, "flavors": ps.flavors, "resourceUsage": usage, "count": ps.count})
        })
        .collect();
    let checks = placement.admission_checks.clone();
    ctx.store.update(key, MANAGER, true, now, |o| {
        o["status"]["admission"] = json!({"clusterQueue": cq, "podSetAssignments": assignments});
        set_condition(o, "QuotaReserved", "True", "QuotaReserved", &format!("Quota reserved in ClusterQueue {cq}"), now);
        remove_condition(o, "Evicted");
        if checks.is_empty() {
            set_condition(o, "Admitted", "True", "Admitted", "The workload is admitted", now);
        } else {
            let states: Vec<Value> = checks
                .iter()
                .map(|c| json!({"name": c, "state": "Pending", "message": "", "lastTransitionTime": timestamp(now)}))
                .collect();
            o["status"]["admissionChecks"] = Value::Array(states);
        }
    })
}

/// Evicts the Workloads holding quota that the prediction preempts (`preempted` names each by
/// its job, or by its own name when it has no owner), with Kueue's `Evicted` and `Preempted`
/// conditions (Kueue v0.19.2 `pkg/scheduler/preemption/preemption.go`, `IssuePreemptions`).
fn evict_victims(ctx: &mut Ctx<'_>, preempted: &[Placement]) -> bool {
    let now = ctx.now;
    let mut victims: Vec<(Key, &str, String)> = Vec::new();
    for victim in preempted {
        let found = ctx.store.of_kind(KUEUE, "Workload").find(|w| {
            reserving(w)
                && !deleting(w)
                && namespace_of(w) == Some(victim.namespace.as_str())
                && if victim.kind == "Workload" {
                    name_of(w) == victim.job
                } else {
                    owners(w).any(|o| {
                        o["kind"] == victim.kind.as_str() && o["name"] == victim.job.as_str()
                    })
                }
        });
        if let Some(w) = found {
            let by = victim.preempted_by.as_deref().unwrap_or("another workload");
            let said = victim.reason.as_deref().unwrap_or_default();
            // The prediction's reason names Kueue's human-readable one; the longest first.
            let (reason, why) = [
                (
                    "InCohortReclaimWhileBorrowing",
                    "reclamation within the cohort while borrowing",
                ),
                ("InCohortReclamation", "reclamation within the cohort"),
                ("InClusterQueue", "prioritization in the ClusterQueue"),
            ]
            .into_iter()
            .find(|(_, text)| said.contains(text))
            .unwrap_or(("InClusterQueue", "prioritization in the ClusterQueue"));
            victims.push((
                Key::of(w),
                reason,
                format!("Preempted to accommodate a workload ({by}) due to {why} (simulated)"),
            ));
        }
    }
    let mut changed = false;
    for (key, reason, message) in victims {
        changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
            evict(o, "Preempted", &message, now);
            set_condition(o, "Preempted", "True", reason, &message, now);
        });
    }
    changed
}
