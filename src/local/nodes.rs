//! The GKE half of the simulated cluster, as data: node pools ([`PoolInfo`], read from
//! `clusters.get`), the nodes they hold, the nodes being started and the ProvisioningRequests
//! GKE has seen. The controllers that change them are in [`super::autoscaler`].
//!
//! Node counts are approximate bin packing: per pool, the larger of total requests over node
//! capacity per resource, and for accelerator pods whole nodes by chips. Pods of one job are
//! scheduled together (Ray needs every host of a slice) once enough nodes are ready.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::store::{Key, Store};
use crate::model::gke::{NodeLimits, node_pool_limits};
use crate::model::gke_facts::machine_shape;
use crate::spec::types::RungKind;
use crate::vocab::labels::{COMPUTE_CLASS_LABEL, NODE_POOL_LABEL};
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
    /// The pool consumes a specific reservation (`SPECIFIC_RESERVATION` affinity).
    pub reservation: bool,
    /// Node labels GKE adds to the pool's nodes besides its own (an auto-created pool's
    /// ComputeClass label).
    pub labels: BTreeMap<String, String>,
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
                reservation: p
                    .pointer("/config/reservationAffinity/consumeReservationType")
                    .and_then(Value::as_str)
                    == Some("SPECIFIC_RESERVATION"),
                labels: BTreeMap::new(),
            })
            .collect()
    }

    /// The kind of capacity the pool draws on, read from its own fields (so hand-written pools
    /// have one too): a specific reservation, queued provisioning, flex-start, Spot, else
    /// on-demand.
    pub fn kind(&self) -> RungKind {
        if self.reservation {
            RungKind::Reservation
        } else if self.queued_provisioning {
            RungKind::FlexStartQueued
        } else if self.flex_start {
            RungKind::FlexStart
        } else if self.spot {
            RungKind::Spot
        } else {
            RungKind::OnDemand
        }
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

/// How a node pool stood when a ProvisioningRequest found no room in it: its nodes, the nodes
/// provisioned requests hold there, and the most nodes it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PoolRoom {
    pub nodes: i64,
    pub in_use: i64,
    pub max: i64,
}

/// A request waiting for room: its pool, the room it saw there, its resourceVersion then.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomWait {
    pub pool: String,
    pub room: PoolRoom,
    pub version: String,
}

/// Unresolved requests not waiting for room: the due time of each request, and the same ordered
/// by due time.
type OpenRequests = (BTreeMap<String, u64>, BTreeSet<(u64, String)>);

/// Which unresolved ProvisioningRequests GKE looks at on a pass, so that a pass does not read
/// every request: the open ones (not waiting for room) by when they are due, and those waiting
/// for room by pool and the room they saw, looked at again only when they are written or their
/// pool's room changes. Kept beside [`ProvisioningPlan`]s by `namespace/name`: every change of a
/// plan, or of whether its request waits, is noted here ([`ProvisioningQueue::note`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProvisioningQueue {
    /// `None` until built from the plans.
    open: Option<OpenRequests>,
    waiting: BTreeMap<String, RoomWait>,
    waiting_by_pool: BTreeMap<String, BTreeMap<PoolRoom, BTreeSet<String>>>,
}

impl ProvisioningQueue {
    /// Builds the open requests from `plans` unless built; `again`: rebuild them.
    pub fn build(&mut self, plans: &BTreeMap<String, ProvisioningPlan>, again: bool) {
        if self.open.is_some() && !again {
            return;
        }
        let mut by_id = BTreeMap::new();
        let mut by_due = BTreeSet::new();
        for (id, plan) in plans {
            if !plan.resolved && !self.waiting.contains_key(id) {
                by_id.insert(id.clone(), plan.due_ms);
                by_due.insert((plan.due_ms, id.clone()));
            }
        }
        self.open = Some((by_id, by_due));
    }

    /// Brings request `id` up to its plan now (`None`: it is gone).
    pub fn note(&mut self, id: &str, plan: Option<&ProvisioningPlan>) {
        if plan.is_none() {
            self.unwait(id);
        }
        self.close(id);
        let waiting = self.waiting.contains_key(id);
        if let Some((by_id, by_due)) = self.open.as_mut()
            && let Some(plan) = plan.filter(|p| !p.resolved && !waiting)
        {
            by_id.insert(id.to_string(), plan.due_ms);
            by_due.insert((plan.due_ms, id.to_string()));
        }
    }

    /// Request `id` is no longer open.
    fn close(&mut self, id: &str) {
        if let Some((by_id, by_due)) = self.open.as_mut()
            && let Some(due) = by_id.remove(id)
        {
            by_due.remove(&(due, id.to_string()));
        }
    }

    /// Request `id` waits for room (no longer open).
    pub fn wait(&mut self, id: &str, wait: RoomWait) {
        self.unwait(id);
        self.close(id);
        self.waiting_by_pool
            .entry(wait.pool.clone())
            .or_default()
            .entry(wait.room)
            .or_default()
            .insert(id.to_string());
        self.waiting.insert(id.to_string(), wait);
    }

    /// Request `id` no longer waits for room; returns what it waited on. Note its plan after.
    pub fn unwait(&mut self, id: &str) -> Option<RoomWait> {
        let wait = self.waiting.remove(id)?;
        if let Some(rooms) = self.waiting_by_pool.get_mut(&wait.pool) {
            if let Some(ids) = rooms.get_mut(&wait.room) {
                ids.remove(id);
                if ids.is_empty() {
                    rooms.remove(&wait.room);
                }
            }
            if rooms.is_empty() {
                self.waiting_by_pool.remove(&wait.pool);
            }
        }
        Some(wait)
    }

    /// The requests waiting for room.
    pub fn waiting_ids(&self) -> Vec<String> {
        self.waiting.keys().cloned().collect()
    }

    /// What request `id` waits on, if it waits for room.
    pub fn waiting(&self, id: &str) -> Option<&RoomWait> {
        self.waiting.get(id)
    }

    /// The open requests due by `now`.
    pub fn due(&self, now: u64) -> impl Iterator<Item = &String> {
        self.open
            .iter()
            .flat_map(|(_, by_due)| by_due.iter())
            .take_while(move |(due, _)| *due <= now)
            .map(|(_, id)| id)
    }

    /// The pools requests wait for room in.
    pub fn waiting_pools(&self) -> Vec<String> {
        self.waiting_by_pool.keys().cloned().collect()
    }

    /// The requests waiting for room in `pool` that saw another room than `room` (`None`: the
    /// pool is gone; all of them).
    pub fn waiting_for_other_room(
        &self,
        pool: &str,
        room: Option<PoolRoom>,
    ) -> impl Iterator<Item = &String> {
        self.waiting_by_pool
            .get(pool)
            .into_iter()
            .flatten()
            .filter(move |(seen, _)| Some(**seen) != room)
            .flat_map(|(_, ids)| ids)
    }
}

/// How much capacity each rung can obtain now (`GKQ_LOCAL_CAPACITY`, design section 7): entries
/// `key:value`, the key a node pool's name or a kind of capacity, the value a node count (0: out
/// of capacity), `unlimited` (every rung's default), `queued` (the capacity comes after
/// `GKQ_LOCAL_PROVISIONING`'s delay) or `never`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalCapacity {
    pub entries: Vec<CapacityEntry>,
}

/// One `key:value` of [`LocalCapacity`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityEntry {
    pub key: CapacityKey,
    pub value: Availability,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapacityKey {
    /// A node pool by name (GKE's or one created for a ComputeClass).
    Pool(String),
    /// Every pool (and ComputeClass priority) of this kind.
    Kind(RungKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// At most this many nodes at a time (0: a stockout).
    Nodes(i64),
    Unlimited,
    /// Obtained after the provisioning delay (`GKQ_LOCAL_PROVISIONING`).
    Queued,
    /// Never obtained.
    Never,
}

/// The kinds a `GKQ_LOCAL_CAPACITY` key may name, as the spec spells them, and `queued`.
const KIND_KEYS: [(&str, RungKind); 6] = [
    ("reservation", RungKind::Reservation),
    ("on-demand", RungKind::OnDemand),
    ("flex-start", RungKind::FlexStart),
    ("flex-start-queued", RungKind::FlexStartQueued),
    ("queued", RungKind::FlexStartQueued),
    ("spot", RungKind::Spot),
];

impl LocalCapacity {
    pub const VARIABLE: &'static str = "GKQ_LOCAL_CAPACITY";

    /// Parses `GKQ_LOCAL_CAPACITY`; an error names the variable, the entry and the accepted
    /// forms.
    pub fn parse(text: &str) -> Result<LocalCapacity, String> {
        let bad = |entry: &str, why: &str| {
            format!(
                "{}={text:?}: {why} in `{entry}`; expected comma-separated key:value entries, the key a node pool name or a kind (reservation, on-demand, flex-start, flex-start-queued or queued, spot), the value a node count (0 = out of capacity), unlimited, queued or never, e.g. reservation:0,on-demand:4,flex-start:queued",
                Self::VARIABLE
            )
        };
        let mut entries: Vec<CapacityEntry> = Vec::new();
        for entry in text.split(',').map(str::trim) {
            let Some((key, value)) = entry.split_once(':') else {
                return Err(bad(entry, "no `:`"));
            };
            let (key, value) = (key.trim(), value.trim());
            let key = match KIND_KEYS.iter().find(|(k, _)| *k == key) {
                Some((_, kind)) => CapacityKey::Kind(*kind),
                None if crate::vocab::label_syntax::is_dns_label(key) => {
                    CapacityKey::Pool(key.to_string())
                }
                None => return Err(bad(entry, "the key is neither a kind nor a node pool name")),
            };
            let value = match value {
                "unlimited" => Availability::Unlimited,
                "queued" => Availability::Queued,
                "never" => Availability::Never,
                n => match n.parse::<i64>() {
                    Ok(n) if n >= 0 => Availability::Nodes(n),
                    _ => return Err(bad(entry, "the value is not a node count")),
                },
            };
            if entries.iter().any(|e| e.key == key) {
                return Err(bad(entry, "the key is given twice"));
            }
            entries.push(CapacityEntry { key, value });
        }
        Ok(LocalCapacity { entries })
    }

    /// The entry that governs a pool: its name's, else its kind's (`None`: unlimited).
    pub fn entry(&self, pool: &str, kind: RungKind) -> Option<&CapacityEntry> {
        let named = self
            .entries
            .iter()
            .find(|e| e.key == CapacityKey::Pool(pool.to_string()));
        named.or_else(|| {
            self.entries
                .iter()
                .find(|e| e.key == CapacityKey::Kind(kind))
        })
    }

    /// The node pool names among the keys that name none of `pools`.
    pub fn unknown_pools<'a>(&'a self, pools: &[&str]) -> Vec<&'a str> {
        self.entries
            .iter()
            .filter_map(|e| match &e.key {
                CapacityKey::Pool(p) if !pools.contains(&p.as_str()) => Some(p.as_str()),
                _ => None,
            })
            .collect()
    }

    /// `reservation:0,on-demand:4`, as it would be written.
    pub fn describe(&self) -> String {
        self.entries
            .iter()
            .map(CapacityEntry::text)
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl CapacityEntry {
    /// The entry as written: `on-demand:0`.
    pub fn text(&self) -> String {
        let key = match &self.key {
            CapacityKey::Pool(p) => p.as_str(),
            CapacityKey::Kind(k) => k.as_str(),
        };
        let value = match self.value {
            Availability::Nodes(n) => n.to_string(),
            Availability::Unlimited => "unlimited".to_string(),
            Availability::Queued => "queued".to_string(),
            Availability::Never => "never".to_string(),
        };
        format!("{key}:{value}")
    }
}

/// The most nodes a pool created for a ComputeClass may have: GKE sizes auto-created pools by
/// demand (and the cluster's resource limits, which the simulation does not have).
pub const AUTO_POOL_MAX_NODES: i64 = 1000;

/// Node pools the simulated GKE created for ComputeClasses (node-pool auto-creation), and the
/// pool each job's class podsets were given. GKE's own `clusters.get` does not list them in the
/// simulation: gkq neither owns nor diffs them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoPools {
    #[serde(default)]
    pub pools: BTreeMap<String, AutoPool>,
    /// Job uid -> the auto-created pool its ComputeClass podsets run on.
    #[serde(default)]
    pub jobs: BTreeMap<String, String>,
}

/// One auto-created pool: the class and priority (from 0) it was created for, and the
/// priority's machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoPool {
    pub class: String,
    pub priority: usize,
    pub machine_type: String,
    #[serde(default)]
    pub tpu_topology: Option<String>,
    pub kind: RungKind,
}

impl AutoPool {
    pub fn info(&self, name: &str) -> PoolInfo {
        PoolInfo {
            name: name.to_string(),
            machine_type: self.machine_type.clone(),
            limits: NodeLimits {
                min: 0,
                max: AUTO_POOL_MAX_NODES,
                autoscaled: true,
            },
            queued_provisioning: false,
            flex_start: self.kind == RungKind::FlexStart,
            tpu_topology: self.tpu_topology.clone(),
            zones: 1,
            spot: self.kind == RungKind::Spot,
            reservation: self.kind == RungKind::Reservation,
            labels: BTreeMap::from([(COMPUTE_CLASS_LABEL.to_string(), self.class.clone())]),
        }
    }
}

/// GKE's pools and those created for ComputeClasses.
pub fn all_pools(gke: &[PoolInfo], auto: &AutoPools) -> Vec<PoolInfo> {
    let mut pools = gke.to_vec();
    pools.extend(auto.pools.iter().map(|(name, p)| p.info(name)));
    pools
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(due_ms: u64, resolved: bool) -> ProvisioningPlan {
        ProvisioningPlan {
            due_ms,
            outcome: ProvisioningOutcome::Provisioned,
            resolved,
        }
    }

    fn wait(pool: &str, nodes: i64) -> RoomWait {
        RoomWait {
            pool: pool.into(),
            room: PoolRoom {
                nodes,
                in_use: nodes,
                max: 4,
            },
            version: "7".into(),
        }
    }

    fn due(queue: &ProvisioningQueue, now: u64) -> Vec<&str> {
        queue.due(now).map(String::as_str).collect()
    }

    #[test]
    fn the_provisioning_queue_follows_plans_waits_and_deleted_requests() {
        let mut plans = BTreeMap::from([
            ("ns/a".to_string(), plan(30, false)),
            ("ns/b".to_string(), plan(10, false)),
            ("ns/done".to_string(), plan(5, true)),
        ]);
        let mut queue = ProvisioningQueue::default();
        queue.build(&plans, false);
        assert_eq!(
            due(&queue, 20),
            ["ns/b"],
            "by due time, resolved ones left out"
        );
        assert_eq!(due(&queue, 30), ["ns/b", "ns/a"]);

        // Waiting for room: no longer due, found by its pool when the room changed.
        queue.wait("ns/b", wait("dws", 4));
        assert_eq!(due(&queue, 30), ["ns/a"]);
        let same = Some(wait("dws", 4).room);
        assert_eq!(queue.waiting_for_other_room("dws", same).count(), 0);
        let other = Some(wait("dws", 0).room);
        let stale: Vec<&String> = queue.waiting_for_other_room("dws", other).collect();
        assert_eq!(stale, ["ns/b"]);
        assert_eq!(queue.waiting_for_other_room("dws", None).count(), 1);

        // Looked at again and still unresolved: open again.
        queue.unwait("ns/b");
        queue.note("ns/b", plans.get("ns/b"));
        assert_eq!(due(&queue, 30), ["ns/b", "ns/a"]);
        assert!(queue.waiting_pools().is_empty());

        // Resolved, and deleted while waiting: gone from every lookup.
        plans.get_mut("ns/a").unwrap().resolved = true;
        queue.note("ns/a", plans.get("ns/a"));
        queue.wait("ns/b", wait("dws", 4));
        plans.remove("ns/b");
        queue.note("ns/b", None);
        assert!(due(&queue, u64::MAX).is_empty());
        assert!(queue.waiting("ns/b").is_none());
        assert!(queue.waiting_pools().is_empty());
        assert!(queue.waiting_ids().is_empty());

        // A new plan, and a rebuild from the plans, agree.
        plans.insert("ns/c".into(), plan(40, false));
        queue.note("ns/c", plans.get("ns/c"));
        let mut rebuilt = ProvisioningQueue::default();
        rebuilt.build(&plans, false);
        assert_eq!(queue, rebuilt);
    }
}
