//! Validation of what Kueue cannot know: whether the node pool behind a flavor can ever hold
//! what Kueue admits there. Kueue counts quota, not nodes; a job admitted to a flavor whose pool
//! can never grow to the job's size waits forever (on-demand), or its ProvisioningRequest is
//! never satisfied (queued provisioning). These are the traps that strand TPU jobs.

use std::collections::BTreeMap;

use super::Checker;
use crate::model::gke_facts::machine_shape;
use crate::placement::Cluster;
use crate::placement::amount::{Amount, CPU, MEMORY, format_amount};
use crate::spec::Path;
use crate::spec::types::{NodePool, Provisioning, Spec};
use crate::vocab::labels::{GPU_RESOURCE, TPU_RESOURCE};
use crate::vocab::quantity::Quantity;

/// The most nodes a spec's pool can ever have: its autoscaling maximum, else its fixed size.
/// The spec's pools name no `locations`, so the per-zone counts they render are the whole
/// pool's by the one rule for GKE's bodies (`model::gke::node_pool_limits`).
pub(super) fn max_nodes(pool: &NodePool) -> Option<u32> {
    pool.autoscaling
        .as_ref()
        .map(|a| a.max)
        .or(pool.initial_nodes)
}

pub(super) fn check(c: &mut Checker, spec: &Spec) {
    check_flavor_pools(c, spec);
    check_job_reach(c, spec);
}

/// Two flavors over one pool count its capacity twice; a TPU quota on a pool without TPUs can
/// never be used. (Flavors over queued-provisioning pools: [`check_queued_flavors`].)
fn check_flavor_pools(c: &mut Checker, spec: &Spec) {
    let flavors = Path::root().key("kueue").key("flavors");
    let mut by_pool: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for flavor in &spec.kueue.flavors {
        let Some(pool_name) = flavor.node_pool.as_deref() else {
            continue;
        };
        by_pool.entry(pool_name).or_default().push(&flavor.name);
        // The cluster's default pool is a plain CPU pool of its own machine type.
        let (machine_type, has_tpu_topology) =
            match spec.node_pools.iter().find(|p| p.name == pool_name) {
                Some(pool) => (pool.machine_type.as_str(), pool.tpu_topology.is_some()),
                None if pool_name == spec.cluster.default_pool.name => {
                    (spec.cluster.default_pool.machine_type.as_str(), false)
                }
                None => continue,
            };
        if !has_tpu_topology && crate::model::gke::tpu_chips_per_vm(machine_type).is_none() {
            for (path, quota) in super::flavor_quotas(spec) {
                if quota.name != flavor.name {
                    continue;
                }
                let tpu = quota
                    .quota
                    .iter()
                    .find(|(r, q)| r.as_str() == "google.com/tpu" && q.as_text() != "0");
                if let Some((resource, q)) = tpu {
                    c.error(
                        &path.key(resource.clone()),
                        format!(
                            "flavor `{}` has a {resource} quota of {} but its node pool `{pool_name}` ({machine_type}) has no TPUs",
                            flavor.name,
                            q.as_text(),
                        ),
                        "set the TPU quota of a CPU-only flavor to 0: Kueue would admit TPU work there that no node can run, and the job would wait forever",
                    );
                }
            }
        }
    }
    for (pool, names) in by_pool {
        if names.len() > 1 {
            let index = spec
                .kueue
                .flavors
                .iter()
                .rposition(|f| f.node_pool.as_deref() == Some(pool))
                .unwrap_or(0);
            c.warning(
                &flavors.index(index).key("nodePool"),
                format!(
                    "flavors {} {} place jobs on node pool `{pool}`: Kueue counts their quotas separately against the same nodes",
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(" and "),
                    if names.len() == 2 { "both" } else { "all" }
                ),
                "give each node pool one flavor, and the flavor one quota that matches the pool",
            );
        }
    }
}

/// A flavor over a queued-provisioning pool (the spec's, or a ResourceFlavor in `manifests:`)
/// needs a ProvisioningRequest admission check in every ClusterQueue that admits jobs to it:
/// the pool's nodes come only through a ProvisioningRequest. Read from the rendered objects
/// (`cluster`), as the DWS single-podset lint reads them, so checks and queues written as raw
/// manifests count as the kueue section's do (`placement::provisioning`,
/// `queues_without_provisioning_check`). A flavor no queue uses needs `provisioning: dws` or a
/// queue that checks it, so that a queue added later is not left without one.
pub(super) fn check_queued_flavors(c: &mut Checker, spec: &Spec, cluster: &Cluster) {
    use crate::placement::pools::node_pool_of;
    use crate::placement::provisioning::queues_without_provisioning_check;
    for flavor in &cluster.resource_flavors {
        let Some(pool) = node_pool_of(flavor).filter(|pool| {
            spec.node_pools
                .iter()
                .any(|p| &p.name == pool && p.queued_provisioning)
        }) else {
            continue;
        };
        let declared = spec
            .kueue
            .flavors
            .iter()
            .position(|f| f.name == flavor.name);
        let at = match declared {
            Some(i) => Path::root()
                .key("kueue")
                .key("flavors")
                .index(i)
                .key("nodePool"),
            None => match manifest_index(c.rendered_manifests, "ResourceFlavor", &flavor.name) {
                Some(i) => Path::root().key("manifests").index(i),
                None => continue,
            },
        };
        let dws =
            declared.is_some_and(|i| spec.kueue.flavors[i].provisioning == Some(Provisioning::Dws));
        let used = cluster.cluster_queues.iter().any(|cq| {
            cq.resource_groups
                .iter()
                .any(|g| g.flavors.iter().any(|f| f.flavor == flavor.name))
        });
        let missing = queues_without_provisioning_check(cluster, &flavor.name);
        if missing.is_empty() && (used || dws) {
            continue;
        }
        let (which, hint) = match missing.as_slice() {
            [] => (
                String::new(),
                "add `provisioning: dws` to the flavor (gkq then adds the ProvisioningRequest admission check), or point it at a pool without queued provisioning".to_string(),
            ),
            queues => (
                format!(
                    ", and ClusterQueue {} admits jobs to it without a ProvisioningRequest admission check",
                    queues.iter().map(|q| format!("`{q}`")).collect::<Vec<_>>().join(", ")
                ),
                missing_check_hint(
                    spec,
                    c.rendered_manifests,
                    &flavor.name,
                    queues,
                    declared.is_some() && !dws,
                ),
            ),
        };
        c.error(
            &at,
            format!(
                "flavor `{}` places jobs on node pool `{pool}`, which uses queued provisioning: its nodes come only through a ProvisioningRequest{which}, so jobs admitted here would wait forever",
                flavor.name
            ),
            hint,
        );
    }
}

/// Where `kind` `name` is written in `manifests:`, if it is.
fn manifest_index(
    manifests: &[std::sync::Arc<serde_json::Value>],
    kind: &str,
    name: &str,
) -> Option<usize> {
    manifests
        .iter()
        .position(|m| m["kind"] == kind && m["metadata"]["name"] == name)
}

/// How to give `queues` a ProvisioningRequest check on `flavor`: `provisioning: dws` covers the
/// kueue section's queues (when the flavor is the spec's and lacks it); a queue written in
/// `manifests:` lists a check itself.
fn missing_check_hint(
    spec: &Spec,
    manifests: &[std::sync::Arc<serde_json::Value>],
    flavor: &str,
    queues: &[&str],
    offer_dws: bool,
) -> String {
    let mut fixes = Vec::new();
    for queue in queues {
        let in_section = spec
            .kueue
            .cluster_queues
            .iter()
            .position(|cq| &cq.name == queue);
        let fix = match (in_section, manifest_index(manifests, "ClusterQueue", queue)) {
            (Some(_), _) if offer_dws => "add `provisioning: dws` to the flavor (gkq then adds the ProvisioningRequest admission check to the kueue section's queues)".to_string(),
            (Some(i), _) => format!(
                "list a ProvisioningRequest admission check for it in kueue.clusterQueues[{i}].admissionChecks (`{{name: <check>, onFlavors: [{flavor}]}}`)"
            ),
            (None, Some(i)) => format!(
                "list a ProvisioningRequest admission check for it in manifests[{i}] (`spec.admissionChecksStrategy.admissionChecks: [{{name: <check>, onFlavors: [{flavor}]}}]`)"
            ),
            (None, None) => continue,
        };
        if !fixes.contains(&fix) {
            fixes.push(fix);
        }
    }
    fixes.push("point the flavor at a pool without queued provisioning".to_string());
    fixes.join("; or ")
}

/// A TPU worker group needs one node per host: a slice of `hosts` nodes on an on-demand pool,
/// and every replica's nodes at once through one ProvisioningRequest on a queued-provisioning
/// pool. A pool whose maximum is below that can never run the job.
fn check_job_reach(c: &mut Checker, spec: &Spec) {
    for (i, job) in spec.jobs.iter().enumerate() {
        let Some(queue) = crate::model::queue_of(spec, &job.namespace, &job.queue) else {
            continue;
        };
        let job_path = Path::root().key("jobs").index(i);
        for group in crate::model::jobs::pod_groups(job) {
            let Some(accelerator) = group.accelerator else {
                continue;
            };
            let flavors = queue
                .resource_groups
                .iter()
                .flat_map(|g| g.flavors.iter())
                .filter_map(|q| spec.kueue.flavors.iter().find(|f| f.name == q.name));
            for flavor in flavors {
                let Some(pool) = flavor
                    .node_pool
                    .as_ref()
                    .and_then(|p| spec.node_pools.iter().find(|n| &n.name == p))
                else {
                    continue;
                };
                // Only pools of the job's slice shape can take it.
                let Some(pool_topology) = &pool.tpu_topology else {
                    continue;
                };
                if accelerator
                    .topology
                    .as_ref()
                    .is_some_and(|t| t != pool_topology)
                {
                    continue;
                }
                let Some(max) = max_nodes(pool) else {
                    continue;
                };
                let path = super::jobs_section::group_path(&job_path, &group);
                let (hosts_at, _) = super::jobs_section::hosts_path(&job_path, &group);
                // A batch Job has no replicas: its pods are its parallelism.
                let replicas_at = if group.section == "pods" {
                    hosts_at.clone()
                } else {
                    path.key("replicas")
                };
                if pool.queued_provisioning {
                    let needed = group.replicas.saturating_mul(group.hosts);
                    if needed > max {
                        c.error(
                            &replicas_at,
                            format!(
                                "job `{}` group `{}` needs {needed} nodes of node pool `{}` at once ({} replicas x {} hosts, one TPU VM per host), but the pool can have at most {max}: its ProvisioningRequest can never be satisfied",
                                job.name, group.name, pool.name, group.replicas, group.hosts
                            ),
                            format!(
                                "raise nodePools[{}].autoscaling.max to {needed} or more, or run fewer replicas",
                                pool.name
                            ),
                        );
                    }
                } else if group.hosts > max {
                    c.error(
                        &hosts_at,
                        format!(
                            "job `{}` group `{}` needs a slice of {} nodes, but node pool `{}` can have at most {max}: the slice never fits, and a job admitted to flavor `{}` waits forever",
                            job.name, group.name, group.hosts, pool.name, flavor.name
                        ),
                        format!(
                            "raise nodePools[{}].autoscaling.max to {} or more",
                            pool.name, group.hosts
                        ),
                    );
                }
            }
        }
    }
}

// Quota against node-pool capacity, node shapes from GKE's machine types (`model::gke_facts`).
//
// Kueue falls back to Plan B only when Plan A's *quota* is used up, not when Google has no
// machines. A flavor whose quota exceeds what its node pool can ever hold admits jobs to nodes
// that can never exist (they stay unschedulable); a quota below the pool's capacity leaves
// accelerators no queued job can use. `check_quota_against_capacity` names the numbers.
// Capacity is raw machine capacity: the allocatable share is lower (kubelet and system
// reservations), so a quota equal to raw capacity is already slightly optimistic.

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

/// What a comparison found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapacityWarningKind {
    /// Quota above what the pool can ever hold.
    QuotaExceedsCapacity,
    /// Accelerator capacity no queued job can use.
    CapacityUnused,
    /// The machine type's shape is not in gkq's table (`model::gke_facts`); nothing was
    /// compared.
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
    let Some(machine) = machine_shape(&pool.machine_type) else {
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
mod quota_tests {
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
        assert_eq!(
            machine_shape("ct6e-standard-4t").map(|m| m.vcpus),
            Some(180)
        );
        assert!(machine_shape("ct9-imaginary").is_none());
    }
}
