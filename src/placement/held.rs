//! What a Workload holds: the quota its admission reserves. One reading for the plan's
//! disruptions and orphans, and for the job timeline.
//!
//! Kueue records an admission in `status.admission`: the ClusterQueue, and per podset the flavor
//! of each resource (`podSetAssignments[].flavors`) and what the podset uses
//! (`podSetAssignments[].resourceUsage`, the podset's total); a Workload counts against its
//! ClusterQueue's quota while it holds the reservation (`QuotaReserved=True`) and has not
//! finished (docs/kueue.md 1a.4 and 1a.6; Kueue v0.19.2 `apis/kueue/v1beta2/workload_types.go`,
//! `Admission`, `PodSetAssignment`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vocab::object::condition_true;
use crate::vocab::quantity::Quantity;

/// Quota of one resource on one flavor of a ClusterQueue, as a Workload's admission holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldQuota {
    pub cluster_queue: String,
    pub flavor: String,
    pub resource: String,
    #[schemars(with = "String")]
    pub amount: Quantity,
}

/// Whether Workload `workload` holds quota now: reserved and not finished.
pub fn holds_quota(workload: &Value) -> bool {
    condition_true(workload, "QuotaReserved") && !condition_true(workload, "Finished")
}

/// What `workload`'s admission uses, added up per flavor and resource (each resource of a
/// podset names its flavor; Kueue records usage only for resources that got one), in flavor
/// and resource order. Empty without an admission.
pub fn admission_usage(workload: &Value) -> Vec<HeldQuota> {
    let cluster_queue = workload
        .pointer("/status/admission/clusterQueue")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut usage: BTreeMap<(&str, &str), Quantity> = BTreeMap::new();
    let assignments = workload
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for assignment in assignments {
        let Some(used) = assignment.get("resourceUsage").and_then(Value::as_object) else {
            continue;
        };
        let flavors = assignment.get("flavors");
        for (resource, amount) in used {
            let (Some(flavor), Ok(amount)) = (
                flavors
                    .and_then(|f| f.get(resource))
                    .and_then(Value::as_str),
                Quantity::from_json(amount),
            ) else {
                continue;
            };
            usage
                .entry((flavor, resource.as_str()))
                .and_modify(|total| *total = total.saturating_add(amount))
                .or_insert(amount);
        }
    }
    usage
        .into_iter()
        .map(|((flavor, resource), amount)| HeldQuota {
            cluster_queue: cluster_queue.to_string(),
            flavor: flavor.to_string(),
            resource: resource.to_string(),
            amount,
        })
        .collect()
}

/// The quota `workload` holds now: its admission's usage while it holds quota, else none.
pub fn held_quota(workload: &Value) -> Vec<HeldQuota> {
    if holds_quota(workload) {
        admission_usage(workload)
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(conditions: Value) -> Value {
        json!({"kind": "Workload", "status": {"conditions": conditions,
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "head", "flavors": {"cpu": "default-cpu", "memory": "default-cpu"},
                 "resourceUsage": {"cpu": "2", "memory": "4Gi"}},
                {"name": "workers", "flavors": {"cpu": "dws", "google.com/tpu": "dws"},
                 "resourceUsage": {"cpu": "32", "google.com/tpu": "16", "memory": "64Gi"}},
                {"name": "submitter", "flavors": {"cpu": "default-cpu"},
                 "resourceUsage": {"cpu": "500m"}}]}}})
    }

    fn reserved() -> Value {
        json!([{"type": "QuotaReserved", "status": "True"}])
    }

    #[test]
    fn usage_is_added_up_per_flavor_and_resource() {
        let held: Vec<String> = held_quota(&workload(reserved()))
            .iter()
            .map(|h| {
                format!(
                    "{}/{} {}={}",
                    h.cluster_queue, h.flavor, h.resource, h.amount
                )
            })
            .collect();
        // Memory of the workers has no flavor: Kueue holds none of it.
        assert_eq!(
            held,
            [
                "cq/default-cpu cpu=2500m",
                "cq/default-cpu memory=4Gi",
                "cq/dws cpu=32",
                "cq/dws google.com/tpu=16"
            ]
        );
    }

    #[test]
    fn a_finished_or_queued_workload_holds_nothing() {
        let finished = json!([{"type": "QuotaReserved", "status": "True"},
            {"type": "Finished", "status": "True"}]);
        assert!(held_quota(&workload(finished.clone())).is_empty());
        assert!(!admission_usage(&workload(finished)).is_empty());
        let queued = json!([{"type": "QuotaReserved", "status": "False"}]);
        assert!(held_quota(&workload(queued)).is_empty());
        assert!(held_quota(&json!({"kind": "Workload"})).is_empty());
    }
}
