//! Kueue's ClusterQueue controller (`pkg/controller/core/clusterqueue_controller.go`): the
//! `Active` condition, workload counts and `flavorsReservation` / `flavorsUsage`; and the status
//! fields a LocalQueue shares with it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::controller::{Ctx, QueueBook, QueuedWorkload};
use super::super::store::{Key, Store, set_condition};
use super::{KUEUE, MANAGER, condition_true, deleting, finished, reserving, sum};
use crate::placement::{Cluster, active};
use crate::vocab::quantity::Quantity;

/// What every queue's status reads besides the queue: the Workloads (as the queue status
/// last read them), and the flavors, checks and configs the queues name, read as placement
/// reads them.
pub(super) struct QueueInputs<'b> {
    pub book: &'b QueueBook,
    pub kueue: Cluster,
}

impl QueueInputs<'_> {
    pub fn read<'a>(store: &Store, book: &'a QueueBook) -> QueueInputs<'a> {
        let mut kueue = Cluster::default();
        for kind in [
            "ResourceFlavor",
            "AdmissionCheck",
            "ProvisioningRequestConfig",
        ] {
            for o in store.of_kind(KUEUE, kind) {
                let _ = kueue.add_object(o);
            }
        }
        QueueInputs { book, kueue }
    }

    /// The Workloads of one queue, in key order.
    pub fn workloads<'a>(
        &'a self,
        queue: Option<&'a BTreeMap<Key, QueuedWorkload>>,
    ) -> impl Iterator<Item = &'a QueuedWorkload> + 'a {
        queue.into_iter().flat_map(BTreeMap::values)
    }
}

/// What a queue's status reads of Workload `w` (its queue, whether it is active, its status):
/// not its podsets, which are most of it.
pub(super) fn queued(w: &Value) -> QueuedWorkload {
    let (ns, lq) = queue_of(w);
    let mut usage = Vec::new();
    for a in w
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (resource, quantity) in a["resourceUsage"].as_object().into_iter().flatten() {
            if let (Some(flavor), Ok(q)) = (
                a["flavors"][resource].as_str(),
                Quantity::from_json(quantity),
            ) {
                usage.push((flavor.to_string(), resource.clone(), q));
            }
        }
    }
    QueuedWorkload {
        local_queue: (ns.to_string(), lq.to_string()),
        cluster_queue: w
            .pointer("/status/admission/clusterQueue")
            .and_then(Value::as_str)
            .map(str::to_string),
        reserving: reserving(w),
        admitted: condition_true(w, "Admitted"),
        waiting: waiting(w),
        usage,
    }
}

/// A Workload waiting for quota (and allowed to get it).
pub(super) fn waiting(w: &Value) -> bool {
    !reserving(w) && !finished(w) && w.pointer("/spec/active") != Some(&json!(false))
}

/// The status of these ClusterQueues: active or not, workload counts, flavor usage.
pub(super) fn cluster_queues(ctx: &mut Ctx<'_>, keys: Vec<Key>, inputs: &QueueInputs) -> bool {
    let mut changed = false;
    let now = ctx.now;
    // The ClusterQueue of each LocalQueue that holds a Workload.
    let mut cq_of_lq: BTreeMap<&(String, String), Option<String>> = BTreeMap::new();
    for queue in inputs.book.by_local_queue.keys() {
        let (ns, lq) = queue;
        let cq = ctx
            .store
            .get(&Key::new(
                "kueue.x-k8s.io/v1beta2",
                "LocalQueue",
                Some(ns),
                lq,
            ))
            .and_then(|q| q.pointer("/spec/clusterQueue").and_then(Value::as_str))
            .map(str::to_string);
        cq_of_lq.insert(queue, cq);
    }
    for key in keys {
        let Some(cq) = ctx.store.get(&key).cloned() else {
            continue;
        };
        let (active, reason, message) = cq_state(&cq, &inputs.kueue);
        let in_cq: Vec<&QueuedWorkload> = inputs
            .workloads(inputs.book.by_cluster_queue.get(&key.name))
            .filter(|w| w.reserving)
            .collect();
        let pending = cq_of_lq
            .iter()
            .filter(|(_, cq)| cq.as_deref() == Some(key.name.as_str()))
            .flat_map(|(queue, _)| inputs.workloads(inputs.book.by_local_queue.get(*queue)))
            .filter(|w| w.waiting)
            .count();
        let status = QueueStatus::new((active, reason, message), &in_cq, pending, Some(&cq), true);
        changed |= ctx
            .store
            .update(&key, MANAGER, true, now, |o| status.write(o, now));
    }
    changed
}

/// What `workloads` use, by flavor and resource, summed in their order (one pass over them).
fn usage_by_flavor<'w>(workloads: &[&'w QueuedWorkload]) -> BTreeMap<(&'w str, &'w str), Quantity> {
    let mut used: BTreeMap<(&str, &str), Vec<Quantity>> = BTreeMap::new();
    for (flavor, resource, q) in workloads.iter().flat_map(|w| &w.usage) {
        used.entry((flavor.as_str(), resource.as_str()))
            .or_default()
            .push(*q);
    }
    used.into_iter().map(|(k, all)| (k, sum(&all))).collect()
}

/// The status Kueue writes on a ClusterQueue or a LocalQueue: the same fields on both.
pub(super) struct QueueStatus {
    pub active: bool,
    pub reason: &'static str,
    pub message: String,
    pub pending: usize,
    pub reserving: usize,
    pub admitted: usize,
    pub reservation: Value,
    pub usage: Value,
}

impl QueueStatus {
    /// The status of a queue holding `reserving` Workloads, with `pending` waiting, its usage
    /// over the flavors of `cq` (none without a ClusterQueue).
    pub fn new(
        (active, reason, message): (bool, &'static str, String),
        reserving: &[&QueuedWorkload],
        pending: usize,
        cq: Option<&Value>,
        borrowed: bool,
    ) -> QueueStatus {
        let admitted: Vec<&QueuedWorkload> =
            reserving.iter().copied().filter(|w| w.admitted).collect();
        let (reservation, usage) = match cq {
            Some(cq) => (
                flavor_table(cq, reserving, borrowed),
                flavor_table(cq, &admitted, borrowed),
            ),
            None => (json!([]), json!([])),
        };
        QueueStatus {
            active,
            reason,
            message,
            pending,
            reserving: reserving.len(),
            admitted: admitted.len(),
            reservation,
            usage,
        }
    }

    pub fn write(&self, queue: &mut Value, now: u64) {
        let active = if self.active { "True" } else { "False" };
        set_condition(queue, "Active", active, self.reason, &self.message, now);
        queue["status"]["pendingWorkloads"] = json!(self.pending);
        queue["status"]["reservingWorkloads"] = json!(self.reserving);
        queue["status"]["admittedWorkloads"] = json!(self.admitted);
        queue["status"]["flavorsReservation"] = self.reservation.clone();
        queue["status"]["flavorsUsage"] = self.usage.clone();
    }
}

pub(super) fn flavor_table(cq: &Value, workloads: &[&QueuedWorkload], borrowed: bool) -> Value {
    let used = usage_by_flavor(workloads);
    let mut rows = Vec::new();
    for group in cq
        .pointer("/spec/resourceGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for f in group["flavors"].as_array().into_iter().flatten() {
            let fname = f["name"].as_str().unwrap_or_default();
            let resources: Vec<Value> = f["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    let rname = r["name"].as_str().unwrap_or_default();
                    let total = used
                        .get(&(fname, rname))
                        .copied()
                        .unwrap_or(Quantity::ZERO)
                        .to_canonical_string();
                    if borrowed {
                        json!({"name": rname, "total": total, "borrowed": "0"})
                    } else {
                        json!({"name": rname, "total": total})
                    }
                })
                .collect();
            rows.push(json!({"name": fname, "resources": resources}));
        }
    }
    Value::Array(rows)
}

/// A Workload's namespace and LocalQueue.
fn queue_of(w: &Value) -> (&str, &str) {
    let ns = w["metadata"]["namespace"].as_str().unwrap_or_default();
    let lq = w
        .pointer("/spec/queueName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    (ns, lq)
}

/// Whether a ClusterQueue can admit: `(active, reason, message)` as Kueue words them. Terminating
/// first; else placement's rule ([`active::cluster_queue_inactive`]): stopped, missing flavors,
/// missing checks, inactive checks, the condition's reason being the first that applies.
pub(super) fn cq_state(cq: &Value, kueue: &Cluster) -> (bool, &'static str, String) {
    if deleting(cq) {
        return (
            false,
            "Terminating",
            "Can't admit new workloads; clusterQueue is terminating".to_string(),
        );
    }
    let mut one = Cluster::default();
    let _ = one.add_object(cq);
    let reasons = one
        .cluster_queues
        .first()
        .map(|parsed| active::cluster_queue_inactive(kueue, parsed))
        .unwrap_or_default();
    match reasons.first() {
        None => (true, "Ready", "Can admit new workloads".to_string()),
        Some(first) => {
            let messages: Vec<&str> = reasons.iter().map(|r| r.message.as_str()).collect();
            (
                false,
                first.reason,
                format!("Can't admit new workloads: {}.", messages.join(", ")),
            )
        }
    }
}
