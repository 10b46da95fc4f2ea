//! Kueue's ClusterQueue controller (`pkg/controller/core/clusterqueue_controller.go`): the
//! `Active` condition, workload counts and `flavorsReservation` / `flavorsUsage`; and the status
//! fields a LocalQueue shares with it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::controller::{Ctx, QueueBook, QueueTotals, QueuedWorkload, UsageSum};
use super::super::store::{Key, Store, set_condition};
use super::{KUEUE, MANAGER, condition_true, deleting, finished, reserving};
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
        let pending = cq_of_lq
            .iter()
            .filter(|(_, cq)| cq.as_deref() == Some(key.name.as_str()))
            .filter_map(|(queue, _)| inputs.book.by_local_queue.get(*queue))
            .map(|totals| totals.waiting)
            .sum();
        let totals = inputs.book.by_cluster_queue.get(&key.name);
        let status = QueueStatus::new((active, reason, message), totals, pending, Some(&cq), true);
        changed |= ctx
            .store
            .update(&key, MANAGER, true, now, |o| status.write(o, now));
    }
    changed
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
    /// The status of a queue whose Workloads sum to `totals` (`None`: it has none), with
    /// `pending` waiting, its usage over the flavors of `cq` (none without a ClusterQueue).
    pub fn new(
        (active, reason, message): (bool, &'static str, String),
        totals: Option<&QueueTotals>,
        pending: usize,
        cq: Option<&Value>,
        borrowed: bool,
    ) -> QueueStatus {
        let none = BTreeMap::new();
        let (reserved, used) = totals.map_or((&none, &none), |t| (&t.reserved, &t.used));
        let (reservation, usage) = match cq {
            Some(cq) => (
                flavor_table(cq, reserved, borrowed),
                flavor_table(cq, used, borrowed),
            ),
            None => (json!([]), json!([])),
        };
        QueueStatus {
            active,
            reason,
            message,
            pending,
            reserving: totals.map_or(0, |t| t.reserving),
            admitted: totals.map_or(0, |t| t.admitted),
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

/// The rows of `flavorsReservation` / `flavorsUsage`: each flavor and resource of `cq`, with
/// what its Workloads hold of it (`used`).
pub(super) fn flavor_table(
    cq: &Value,
    used: &BTreeMap<(String, String), UsageSum>,
    borrowed: bool,
) -> Value {
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
                        .get(&(fname.to_string(), rname.to_string()))
                        .map_or(Quantity::ZERO, UsageSum::total)
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
