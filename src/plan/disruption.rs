//! Which running work a plan would stop. Before a plan deletes or replaces a node pool, a
//! ResourceFlavor, a ClusterQueue or a LocalQueue, the jobs whose Kueue Workloads hold quota
//! there are listed; `apply` refuses such a plan unless the user allows the disruption.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ActionKind, Plan};
use crate::addr::{ResourceAddr, ResourceKind};

/// One resource change that stops running work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// The resource being deleted or replaced.
    pub addr: ResourceAddr,
    /// The jobs it would stop, as `Kind namespace/name`, with their state.
    pub jobs: Vec<String>,
}

fn condition_true(w: &Value, kind: &str) -> bool {
    w.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

/// A Workload that holds quota and has not finished: the work a change would stop.
fn holds_quota(w: &Value) -> bool {
    condition_true(w, "QuotaReserved") && !condition_true(w, "Finished")
}

fn job_of(w: &Value) -> String {
    let ns = w
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let owner = w
        .pointer("/metadata/ownerReferences/0")
        .map(|o| {
            format!(
                "{} {ns}/{}",
                o["kind"].as_str().unwrap_or("Workload"),
                o["name"].as_str().unwrap_or("")
            )
        })
        .unwrap_or_else(|| {
            format!(
                "Workload {ns}/{}",
                w.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        });
    let state = if condition_true(w, "Admitted") {
        "admitted"
    } else {
        "quota reserved"
    };
    format!("{owner} ({state})")
}

fn flavors_of(w: &Value) -> BTreeSet<String> {
    w.pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|ps| ps.get("flavors").and_then(Value::as_object))
        .flat_map(|f| f.values().filter_map(Value::as_str).map(str::to_string))
        .collect()
}

/// Node pool each ResourceFlavor stands for (its `cloud.google.com/gke-nodepool` label), from
/// the desired and live flavors.
fn flavor_pools<'a>(flavors: impl Iterator<Item = &'a Value>) -> BTreeMap<String, String> {
    flavors
        .filter(|o| o["kind"] == "ResourceFlavor")
        .filter_map(|o| {
            let name = o.pointer("/metadata/name")?.as_str()?.to_string();
            let pool = o
                .pointer("/spec/nodeLabels/cloud.google.com~1gke-nodepool")?
                .as_str()?
                .to_string();
            Some((name, pool))
        })
        .collect()
}

/// The disruptions of `plan`, given the live Kueue Workloads and the ResourceFlavors known
/// (desired and live).
pub fn find<'a>(
    plan: &Plan,
    workloads: &[Value],
    flavors: impl Iterator<Item = &'a Value>,
) -> Vec<Disruption> {
    let pools = flavor_pools(flavors);
    let active: Vec<&Value> = workloads.iter().filter(|w| holds_quota(w)).collect();
    let mut out = Vec::new();
    for action in plan
        .actions
        .iter()
        .filter(|a| matches!(a.kind, ActionKind::Delete | ActionKind::Replace))
    {
        let addr = &action.addr;
        let hit = |w: &Value| -> bool {
            match &addr.kind {
                ResourceKind::GkeNodePool => flavors_of(w)
                    .iter()
                    .any(|f| pools.get(f).is_some_and(|p| *p == addr.name)),
                ResourceKind::GkeCluster => true,
                ResourceKind::ResourceFlavor => flavors_of(w).contains(&addr.name),
                ResourceKind::ClusterQueue => {
                    w.pointer("/status/admission/clusterQueue")
                        .and_then(Value::as_str)
                        == Some(addr.name.as_str())
                }
                ResourceKind::LocalQueue => {
                    w.pointer("/metadata/namespace").and_then(Value::as_str)
                        == addr.namespace.as_deref()
                        && w.pointer("/spec/queueName").and_then(Value::as_str)
                            == Some(addr.name.as_str())
                }
                _ => false,
            }
        };
        let mut jobs: Vec<String> = active
            .iter()
            .filter(|w| hit(w))
            .map(|w| job_of(w))
            .collect();
        jobs.sort();
        jobs.dedup();
        if !jobs.is_empty() {
            out.push(Disruption {
                addr: addr.clone(),
                jobs,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(
        ns: &str,
        job: &str,
        cq: &str,
        queue: &str,
        flavor: &str,
        admitted: bool,
        finished: bool,
    ) -> Value {
        json!({
            "metadata": {"namespace": ns, "name": format!("rayjob-{job}"),
                "ownerReferences": [{"kind": "RayJob", "name": job}]},
            "spec": {"queueName": queue},
            "status": {
                "admission": {"clusterQueue": cq, "podSetAssignments": [
                    {"name": "head", "flavors": {"cpu": "default-cpu"}},
                    {"name": "workers", "flavors": {"cpu": flavor, "google.com/tpu": flavor}}]},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True"},
                    {"type": "Admitted", "status": if admitted {"True"} else {"False"}},
                    {"type": "Finished", "status": if finished {"True"} else {"False"}}]
            }
        })
    }

    fn plan_with(kind: ActionKind, addr: &str) -> Plan {
        let action: super::super::Action = serde_json::from_value(json!({
            "addr": addr, "kind": serde_json::to_value(kind).unwrap(), "reason": "test",
            "changes": [], "diff": "", "steps": [], "dependsOn": []
        }))
        .unwrap();
        Plan {
            format_version: 1,
            cluster: crate::gke::ClusterRef {
                project: "p".into(),
                location: "l".into(),
                cluster: "c".into(),
            },
            summary: super::super::Summary::of(std::slice::from_ref(&action)),
            actions: vec![action],
            notices: vec![],
            disruptions: vec![],
            placements: vec![],
            quota: vec![],
            provenance: None,
        }
    }

    fn flavors() -> Vec<Value> {
        vec![
            json!({"kind": "ResourceFlavor", "metadata": {"name": "on-demand"}, "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "on-demand-pool"}}}),
            json!({"kind": "ResourceFlavor", "metadata": {"name": "dws"}, "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "dws-pool"}}}),
        ]
    }

    #[test]
    fn deleting_a_cluster_queue_names_its_admitted_and_reserved_jobs() {
        let w = vec![
            workload(
                "default",
                "job-1",
                "cq",
                "user-queue",
                "on-demand",
                true,
                false,
            ),
            workload("default", "job-2", "cq", "user-queue", "dws", false, false),
            workload(
                "default",
                "job-0",
                "cq",
                "user-queue",
                "on-demand",
                true,
                true,
            ),
            workload("default", "other", "cq2", "q2", "on-demand", true, false),
        ];
        let d = find(
            &plan_with(ActionKind::Delete, "kueue.clusterqueue/cq"),
            &w,
            flavors().iter(),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].jobs,
            [
                "RayJob default/job-1 (admitted)",
                "RayJob default/job-2 (quota reserved)"
            ]
        );
    }

    #[test]
    fn replacing_a_node_pool_names_the_jobs_on_its_flavor() {
        let w = vec![
            workload(
                "default",
                "job-1",
                "cq",
                "user-queue",
                "on-demand",
                true,
                false,
            ),
            workload("default", "job-2", "cq", "user-queue", "dws", false, false),
        ];
        let d = find(
            &plan_with(ActionKind::Replace, "gke.nodepool/dws-pool"),
            &w,
            flavors().iter(),
        );
        assert_eq!(d[0].jobs, ["RayJob default/job-2 (quota reserved)"]);
        let none = find(
            &plan_with(ActionKind::Update, "gke.nodepool/dws-pool"),
            &w,
            flavors().iter(),
        );
        assert!(none.is_empty());
    }

    #[test]
    fn local_queue_and_flavor_deletes() {
        let w = vec![workload(
            "ml",
            "job-1",
            "cq",
            "team",
            "on-demand",
            true,
            false,
        )];
        assert_eq!(
            find(
                &plan_with(ActionKind::Delete, "kueue.localqueue/ml/team"),
                &w,
                flavors().iter()
            )
            .len(),
            1
        );
        assert!(
            find(
                &plan_with(ActionKind::Delete, "kueue.localqueue/other/team"),
                &w,
                flavors().iter()
            )
            .is_empty()
        );
        assert_eq!(
            find(
                &plan_with(ActionKind::Delete, "kueue.resourceflavor/on-demand"),
                &w,
                flavors().iter()
            )
            .len(),
            1
        );
        assert!(
            find(
                &plan_with(ActionKind::Delete, "kueue.resourceflavor/dws"),
                &w,
                flavors().iter()
            )
            .is_empty()
        );
    }
}
