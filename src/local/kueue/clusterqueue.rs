//! Kueue's ClusterQueue controller (`pkg/controller/core/clusterqueue_controller.go`): the
//! `Active` condition, workload counts and `flavorsReservation` / `flavorsUsage`; and the status
//! fields a LocalQueue shares with it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::super::controller::Ctx;
use super::super::store::{Key, Store, set_condition};
use super::{
    KUEUE, MANAGER, condition_true, cq_checks, cq_flavors, deleting, finished, name, reserving, sum,
};
use crate::placement::Quantity;

/// What every queue's status reads besides the queue: the Workloads, the flavors that exist
/// and whether each AdmissionCheck is active.
pub(super) struct QueueInputs {
    pub workloads: Vec<Value>,
    pub flavors: BTreeSet<String>,
    pub checks: BTreeMap<String, bool>,
}

impl QueueInputs {
    pub fn read(store: &Store) -> QueueInputs {
        let workloads: Vec<Value> = store.of_kind(KUEUE, "Workload").cloned().collect();
        let flavors: BTreeSet<String> = store
            .of_kind(KUEUE, "ResourceFlavor")
            .map(|f| name(f).to_string())
            .collect();
        let checks: BTreeMap<String, bool> = store
            .of_kind(KUEUE, "AdmissionCheck")
            .map(|c| (name(c).to_string(), condition_true(c, "Active")))
            .collect();
        QueueInputs {
            workloads,
            flavors,
            checks,
        }
    }
}

/// The status of these ClusterQueues: active or not, workload counts, flavor usage.
pub(super) fn cluster_queues(ctx: &mut Ctx<'_>, keys: Vec<Key>, inputs: &QueueInputs) -> bool {
    let mut changed = false;
    let now = ctx.now;
    let QueueInputs {
        workloads,
        flavors,
        checks,
    } = inputs;
    // The ClusterQueue of each LocalQueue that holds a Workload.
    let mut cq_of_lq: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    for w in workloads {
        let (ns, lq) = queue_of(w);
        cq_of_lq
            .entry((ns.to_string(), lq.to_string()))
            .or_insert_with(|| {
                ctx.store
                    .get(&Key::new(
                        "kueue.x-k8s.io/v1beta2",
                        "LocalQueue",
                        Some(ns),
                        lq,
                    ))
                    .and_then(|q| q.pointer("/spec/clusterQueue").and_then(Value::as_str))
                    .map(str::to_string)
            });
    }
    for key in keys {
        let Some(cq) = ctx.store.get(&key).cloned() else {
            continue;
        };
        let (active, reason, message) = cq_state(&cq, flavors, checks);
        let in_cq: Vec<&Value> = workloads
            .iter()
            .filter(|w| reserving(w))
            .filter(|w| {
                w.pointer("/status/admission/clusterQueue")
                    .and_then(Value::as_str)
                    == Some(key.name.as_str())
            })
            .collect();
        let admitted: Vec<&Value> = in_cq
            .iter()
            .copied()
            .filter(|w| condition_true(w, "Admitted"))
            .collect();
        let pending = workloads
            .iter()
            .filter(|w| {
                !reserving(w) && !finished(w) && w.pointer("/spec/active") != Some(&json!(false))
            })
            .filter(|w| {
                let (ns, lq) = queue_of(w);
                cq_of_lq
                    .get(&(ns.to_string(), lq.to_string()))
                    .and_then(Option::as_deref)
                    == Some(key.name.as_str())
            })
            .count();
        let reservation = flavor_table(&cq, &in_cq, true);
        let usage = flavor_table(&cq, &admitted, true);
        let status = QueueStatus {
            active,
            reason,
            message,
            pending,
            reserving: in_cq.len(),
            admitted: admitted.len(),
            reservation,
            usage,
        };
        changed |= ctx
            .store
            .update(&key, MANAGER, true, now, |o| status.write(o, now));
    }
    changed
}

fn sum_usage(workloads: &[&Value], flavor: &str, resource: &str) -> Quantity {
    let mut all = Vec::new();
    for w in workloads {
        for a in w
            .pointer("/status/admission/podSetAssignments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if a["flavors"][resource] == flavor
                && let Some(q) = a["resourceUsage"]
                    .get(resource)
                    .and_then(|v| Quantity::from_json(v).ok())
            {
                all.push(q);
            }
        }
    }
    sum(&all)
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

pub(super) fn flavor_table(cq: &Value, workloads: &[&Value], borrowed: bool) -> Value {
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
                    let total = sum_usage(workloads, fname, rname).to_canonical_string();
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

/// Whether a ClusterQueue can admit: `(active, reason, message)` as Kueue words them.
pub(super) fn cq_state(
    cq: &Value,
    flavors: &BTreeSet<String>,
    checks: &BTreeMap<String, bool>,
) -> (bool, &'static str, String) {
    let missing_flavors: Vec<String> = cq_flavors(cq)
        .into_iter()
        .filter(|f| !flavors.contains(f))
        .collect();
    let bad_checks: Vec<String> = cq_checks(cq)
        .into_iter()
        .filter(|c| checks.get(c) != Some(&true))
        .collect();
    let stopped = cq
        .pointer("/spec/stopPolicy")
        .and_then(Value::as_str)
        .is_some_and(|p| p != "None");
    if deleting(cq) {
        (
            false,
            "Terminating",
            "Can't admit new workloads; clusterQueue is terminating".to_string(),
        )
    } else if stopped {
        (
            false,
            "Stopped",
            "Can't admit new workloads: the ClusterQueue is stopped".to_string(),
        )
    } else if !missing_flavors.is_empty() {
        (
            false,
            "FlavorNotFound",
            format!(
                "Can't admit new workloads: references missing ResourceFlavor(s): {}.",
                missing_flavors.join(", ")
            ),
        )
    } else if !bad_checks.is_empty() {
        (
            false,
            "AdmissionCheckInactive",
            format!(
                "Can't admit new workloads: references missing or inactive AdmissionCheck(s): {}.",
                bad_checks.join(", ")
            ),
        )
    } else {
        (true, "Ready", "Can admit new workloads".to_string())
    }
}
