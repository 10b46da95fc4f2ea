//! Quota against node-pool capacity.
//!
//! Kueue falls back to Plan B only when Plan A's *quota* is used up, not when Google has no
//! machines. A flavor whose quota exceeds what its node pool can ever hold admits jobs to nodes
//! that can never exist (they stay unschedulable); a quota below the pool's capacity leaves
//! accelerators no queued job can use. [`check_quota_against_capacity`] names the numbers.
//!
//! Machine shapes (vCPUs, memory, accelerator chips per node) come from Google Cloud's machine
//! type documentation; memory is in GiB as the Compute Engine API reports it (`memoryMb`). The
//! ct6e-standard-4t/8t and ct5lp rows match the published tables (4t: 180 vCPUs, 720 GB). For
//! ct6e-standard-1t the published memory could not be confirmed from the sources at hand; 176 GiB
//! (4 GiB per vCPU) is an assumption, consistent with a VM observed reporting 172 GB usable RAM.
//! Capacity is raw machine capacity: the allocatable share is lower (kubelet and system
//! reservations), so a quota equal to raw capacity is already slightly optimistic.

use std::collections::BTreeMap;

use serde_json::Value;

use super::amount::{Amount, CPU, MEMORY, format_amount};
use super::objects::{Cluster, ResourceFlavor};
use crate::vocab::labels::{GPU_RESOURCE, NODE_POOL_LABEL, TPU_RESOURCE};
use crate::vocab::quantity::Quantity;

/// Per-node shape of a machine type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineType {
    pub name: &'static str,
    pub vcpus: u32,
    pub memory_gib: u32,
    /// Extended resource and chips per node, for accelerator machines.
    pub accelerator: Option<(&'static str, u32)>,
    /// `cloud.google.com/gke-tpu-accelerator` value, for TPU machines.
    pub tpu_accelerator: Option<&'static str>,
}

const fn tpu(
    name: &'static str,
    vcpus: u32,
    memory_gib: u32,
    chips: u32,
    accelerator: &'static str,
) -> MachineType {
    MachineType {
        name,
        vcpus,
        memory_gib,
        accelerator: Some((TPU_RESOURCE, chips)),
        tpu_accelerator: Some(accelerator),
    }
}

const fn general(name: &'static str, vcpus: u32, memory_gib: u32) -> MachineType {
    MachineType {
        name,
        vcpus,
        memory_gib,
        accelerator: None,
        tpu_accelerator: None,
    }
}

/// The machine types gkq knows.
pub const MACHINE_TYPES: &[MachineType] = &[
    tpu("ct6e-standard-1t", 44, 176, 1, "tpu-v6e-slice"),
    tpu("ct6e-standard-4t", 180, 720, 4, "tpu-v6e-slice"),
    tpu("ct6e-standard-8t", 180, 1440, 8, "tpu-v6e-slice"),
    tpu("ct5lp-hightpu-1t", 24, 48, 1, "tpu-v5-lite-podslice"),
    tpu("ct5lp-hightpu-4t", 112, 192, 4, "tpu-v5-lite-podslice"),
    tpu("ct5lp-hightpu-8t", 224, 384, 8, "tpu-v5-lite-podslice"),
    general("n2-standard-8", 8, 32),
    general("n2-standard-16", 16, 64),
    general("n2-standard-32", 32, 128),
];

/// Looks a machine type up by name.
pub fn machine_type(name: &str) -> Option<&'static MachineType> {
    MACHINE_TYPES.iter().find(|m| m.name == name)
}

/// A node pool's ceiling: `max_nodes` of `machine_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePoolCapacity {
    pub pool: String,
    pub machine_type: String,
    pub max_nodes: u32,
    /// Queued provisioning (DWS): a ProvisioningRequest gates admission, so quota above
    /// capacity is intentional there (the seed's "infinite" DWS quota) and not reported.
    pub queued_provisioning: bool,
}

/// A flavor's nominal quotas in one ClusterQueue.
#[derive(Debug, Clone, PartialEq)]
pub struct FlavorQuota {
    pub cluster_queue: String,
    pub flavor: String,
    pub quotas: Vec<(String, Quantity)>,
}

/// Every flavor's nominal quotas, per ClusterQueue, in spec order.
pub fn flavor_quotas(cluster: &Cluster) -> Vec<FlavorQuota> {
    cluster
        .cluster_queues
        .iter()
        .flat_map(|cq| {
            cq.resource_groups.iter().flat_map(move |group| {
                group.flavors.iter().map(move |flavor| FlavorQuota {
                    cluster_queue: cq.name.clone(),
                    flavor: flavor.flavor.clone(),
                    quotas: flavor
                        .resources
                        .iter()
                        .map(|r| (r.resource.clone(), r.nominal))
                        .collect(),
                })
            })
        })
        .collect()
}

/// The node pool a flavor selects through `cloud.google.com/gke-nodepool`, if it does.
pub fn node_pool_of(flavor: &ResourceFlavor) -> Option<&str> {
    flavor.node_labels.get(NODE_POOL_LABEL).map(String::as_str)
}

/// Flavor -> node pool ([`node_pool_of`]) for the ResourceFlavor objects among `objects`.
pub fn flavor_pools<'a>(objects: impl IntoIterator<Item = &'a Value>) -> BTreeMap<String, String> {
    let mut cluster = Cluster::default();
    for object in objects
        .into_iter()
        .filter(|o| o["kind"] == "ResourceFlavor")
    {
        let _ = cluster.add_object(object);
    }
    cluster
        .resource_flavors
        .iter()
        .filter_map(|f| Some((f.name.clone(), node_pool_of(f)?.to_string())))
        .collect()
}

/// What a comparison found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapacityWarningKind {
    /// Quota above what the pool can ever hold.
    QuotaExceedsCapacity,
    /// Accelerator capacity no queued job can use.
    CapacityUnused,
    /// The machine type is not in [`MACHINE_TYPES`]; nothing was compared.
    UnknownMachineType,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityWarning {
    pub kind: CapacityWarningKind,
    pub cluster_queue: String,
    pub flavor: String,
    pub pool: String,
    pub resource: Option<String>,
    pub message: String,
}

/// Compares one flavor's quota with the node pool behind it.
///
/// Quota above capacity is reported for every resource (except on queued-provisioning pools).
/// Quota below capacity is reported for accelerators only: CPU and memory quotas on
/// accelerator flavors are sized to the pods, not to the hosts, and leaving host CPU unused is
/// normal.
pub fn check_quota_against_capacity(
    quota: &FlavorQuota,
    pool: &NodePoolCapacity,
) -> Vec<CapacityWarning> {
    let warning = |kind, resource: Option<&str>, message: String| CapacityWarning {
        kind,
        cluster_queue: quota.cluster_queue.clone(),
        flavor: quota.flavor.clone(),
        pool: pool.pool.clone(),
        resource: resource.map(str::to_string),
        message,
    };
    let subject = format!(
        "ClusterQueue {}, flavor {}",
        quota.cluster_queue, quota.flavor
    );
    let Some(machine) = machine_type(&pool.machine_type) else {
        return vec![warning(
            CapacityWarningKind::UnknownMachineType,
            None,
            format!(
                "{subject}: machine type {} of node pool {} is not in gkq's table; quota was not compared with capacity",
                pool.machine_type, pool.pool
            ),
        )];
    };
    let nodes = i64::from(pool.max_nodes);
    let mut warnings = Vec::new();
    for (resource, nominal) in &quota.quotas {
        let (per_node, unit): (i64, &str) = match resource.as_str() {
            CPU => (i64::from(machine.vcpus) * 1000, "vCPUs"),
            MEMORY => (i64::from(machine.memory_gib) << 30, "memory"),
            other => match machine.accelerator {
                Some((accelerator, chips)) if accelerator == other => (i64::from(chips), "chips"),
                _ if other == TPU_RESOURCE || other == GPU_RESOURCE => (0, "chips"),
                _ => continue,
            },
        };
        let nominal_amount = Amount::from_quota(resource, *nominal);
        let capacity = Amount::new(per_node.saturating_mul(nodes));
        let show = |amount| format_amount(resource, amount);
        let per_node_text = show(Amount::new(per_node));
        let accelerator = resource == TPU_RESOURCE || resource == GPU_RESOURCE;
        let arithmetic = format!(
            "{nodes} nodes × {per_node_text} {unit} of {} = {}",
            machine.name,
            show(capacity)
        );
        if nominal_amount > capacity && !pool.queued_provisioning {
            warnings.push(warning(
                CapacityWarningKind::QuotaExceedsCapacity,
                Some(resource),
                format!(
                    "{subject}: nominal quota {resource} {} exceeds what node pool {} can ever hold ({arithmetic}); Kueue would admit jobs to nodes that can never exist",
                    show(nominal_amount),
                    pool.pool
                ),
            ));
        } else if accelerator && nominal_amount < capacity {
            warnings.push(warning(
                CapacityWarningKind::CapacityUnused,
                Some(resource),
                format!(
                    "{subject}: nominal quota {resource} {} is below node pool {}'s capacity ({arithmetic}); {} {unit} can never be used by queued jobs",
                    show(nominal_amount),
                    pool.pool,
                    show(capacity.minus(nominal_amount))
                ),
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn seed_pool(max_nodes: u32) -> NodePoolCapacity {
        NodePoolCapacity {
            pool: "on-demand-pool".into(),
            machine_type: "ct6e-standard-4t".into(),
            max_nodes,
            queued_provisioning: false,
        }
    }

    fn on_demand(tpu: &str) -> FlavorQuota {
        FlavorQuota {
            cluster_queue: "cluster-queue".into(),
            flavor: "on-demand".into(),
            quotas: vec![
                ("cpu".into(), q("40")),
                ("memory".into(), q("75Gi")),
                ("google.com/tpu".into(), q(tpu)),
            ],
        }
    }

    #[test]
    fn the_seed_quota_matches_its_pool() {
        assert!(check_quota_against_capacity(&on_demand("16"), &seed_pool(4)).is_empty());
    }

    #[test]
    fn names_the_numbers_when_quota_exceeds_capacity() {
        let warnings = check_quota_against_capacity(&on_demand("32"), &seed_pool(4));
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            warnings[0].message,
            "ClusterQueue cluster-queue, flavor on-demand: nominal quota google.com/tpu 32 exceeds what node pool on-demand-pool can ever hold (4 nodes × 4 chips of ct6e-standard-4t = 16); Kueue would admit jobs to nodes that can never exist"
        );
    }

    #[test]
    fn reports_unused_accelerators() {
        let warnings = check_quota_against_capacity(&on_demand("16"), &seed_pool(8));
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].kind, CapacityWarningKind::CapacityUnused);
        assert!(
            warnings[0]
                .message
                .contains("(8 nodes × 4 chips of ct6e-standard-4t = 32)")
        );
        assert!(warnings[0].message.contains("16 chips can never be used"));
    }

    #[test]
    fn queued_provisioning_pools_accept_unbounded_quota() {
        let dws = FlavorQuota {
            cluster_queue: "cluster-queue".into(),
            flavor: "dws".into(),
            quotas: vec![
                ("cpu".into(), q("1000000000")),
                ("memory".into(), q("1000000000Gi")),
                ("google.com/tpu".into(), q("1000000000")),
            ],
        };
        let pool = NodePoolCapacity {
            pool: "dws-pool".into(),
            queued_provisioning: true,
            ..seed_pool(4)
        };
        assert!(check_quota_against_capacity(&dws, &pool).is_empty());
        assert_eq!(machine_type("ct6e-standard-4t").map(|m| m.vcpus), Some(180));
        assert!(machine_type("ct9-imaginary").is_none());
    }
}
