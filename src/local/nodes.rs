//! The GKE half of the simulated cluster, as data: node pools ([`PoolInfo`], read from
//! `clusters.get`), the nodes they hold, the nodes being started and the ProvisioningRequests
//! GKE has seen. The controllers that change them are in [`super::autoscaler`].
//!
//! Node counts are approximate bin packing: per pool, the larger of total requests over node
//! capacity per resource, and for accelerator pods whole nodes by chips. Pods of one job are
//! scheduled together (Ray needs every host of a slice) once enough nodes are ready.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::store::{Key, Store};
use crate::model::gke::{NodeLimits, node_pool_limits};
use crate::model::gke_facts::machine_shape;
use crate::vocab::labels::NODE_POOL_LABEL;
use crate::vocab::quantity::Quantity;

/// A node pool as the simulation needs it, read from `clusters.get`.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolInfo {
    pub name: String,
    pub machine_type: String,
    /// The fewest and most nodes over all zones, by the one rule (`model::gke::node_pool_limits`).
    pub limits: NodeLimits,
    pub queued_provisioning: bool,
    pub flex_start: bool,
    pub tpu_topology: Option<String>,
    pub zones: i64,
    pub spot: bool,
}

impl PoolInfo {
    pub fn from_cluster(cluster: &Value) -> Vec<PoolInfo> {
        cluster["nodePools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| PoolInfo {
                name: p["name"].as_str().unwrap_or_default().to_string(),
                machine_type: p
                    .pointer("/config/machineType")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                limits: node_pool_limits(p),
                queued_provisioning: p.pointer("/queuedProvisioning/enabled") == Some(&json!(true)),
                flex_start: p.pointer("/config/flexStart") == Some(&json!(true)),
                tpu_topology: p
                    .pointer("/placementPolicy/tpuTopology")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                zones: p["locations"]
                    .as_array()
                    .map_or(1, |l| l.len().max(1) as i64),
                spot: p.pointer("/config/spot") == Some(&json!(true)),
            })
            .collect()
    }

    /// Nodes per TPU slice (`4x4` of 4-chip VMs is 4 nodes); 1 for other pools.
    pub fn slice_nodes(&self) -> i64 {
        let chips_per_vm = machine_shape(&self.machine_type)
            .and_then(|m| m.accelerator)
            .map_or(1, |(_, c)| i64::from(c));
        let chips: i64 = self
            .tpu_topology
            .as_deref()
            .map(|t| {
                t.split('x')
                    .map(|d| d.parse::<i64>().unwrap_or(1))
                    .product()
            })
            .unwrap_or(1);
        (chips / chips_per_vm.max(1)).max(1)
    }

    /// The most nodes the pool may have (all zones).
    pub fn max_nodes(&self) -> i64 {
        self.limits.max
    }

    /// The fewest nodes the pool keeps (all zones).
    pub fn min_nodes(&self) -> i64 {
        self.limits.min
    }

    /// Nodes needed for pods with these per-pod requests (approximate bin packing).
    pub fn nodes_for(&self, pods: &[(i64, BTreeMap<String, Quantity>)]) -> i64 {
        let Some(machine) = machine_shape(&self.machine_type) else {
            // Unknown shape: one pod per node.
            return pods.iter().map(|(n, _)| *n).sum();
        };
        let giga = 1_000_000_000i128;
        let mut capacity: BTreeMap<&str, i128> = BTreeMap::from([
            ("cpu", i128::from(machine.vcpus) * giga),
            ("memory", (i128::from(machine.memory_gib) << 30) * giga),
        ]);
        if let Some((resource, chips)) = machine.accelerator {
            capacity.insert(resource, i128::from(chips) * giga);
        }
        let mut needed: i64 = 0;
        let mut totals: BTreeMap<&str, i128> = BTreeMap::new();
        for (count, requests) in pods {
            for (resource, cap) in &capacity {
                let per_pod = requests.get(*resource).map_or(0, Quantity::nanos);
                *totals.entry(resource).or_default() += per_pod * i128::from(*count);
                // Accelerator pods: whole nodes by chips.
                if Some(*resource) == machine.accelerator.map(|a| a.0) && per_pod > 0 {
                    let per_node = (cap / per_pod).max(1);
                    needed = needed.max(((i128::from(*count) + per_node - 1) / per_node) as i64);
                }
            }
        }
        for (resource, total) in totals {
            let cap = capacity[resource].max(1);
            needed = needed.max(((total + cap - 1) / cap) as i64);
        }
        needed
    }
}

/// Pods of one shape: how many, and the requests of each.
pub type Pods = Vec<(i64, BTreeMap<String, Quantity>)>;

/// Nodes the simulated cluster autoscaler is starting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartingNodes {
    pub pool: String,
    pub count: i64,
    pub ready_ms: u64,
}

pub fn node_keys(store: &Store, pool: &str) -> Vec<Key> {
    store
        .of_kind("", "Node")
        .filter(|n| {
            n.pointer("/metadata/labels")
                .and_then(|l| l.get(NODE_POOL_LABEL))
                == Some(&json!(pool))
        })
        .filter(|n| n.pointer("/metadata/deletionTimestamp").is_none())
        .map(Key::of)
        .collect()
}

/// How much of each pool the jobs that run (or wait for nodes) need: `(job uid, pool, nodes)`,
/// in admission order.
pub type Demand = Vec<(String, String, i64)>;

/// How the simulated GKE answers ProvisioningRequests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ProvisioningOutcome {
    Provisioned,
    Failed,
    Never,
}

/// When and how one ProvisioningRequest resolves (decided when GKE first sees it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningPlan {
    pub due_ms: u64,
    pub outcome: ProvisioningOutcome,
    #[serde(default)]
    pub resolved: bool,
}
