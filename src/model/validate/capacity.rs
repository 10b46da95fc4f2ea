//! Validation of what Kueue cannot know: whether the node pool behind a flavor can ever hold
//! what Kueue admits there. Kueue counts quota, not nodes; a job admitted to a flavor whose pool
//! can never grow to the job's size waits forever (on-demand), or its ProvisioningRequest is
//! never satisfied (queued provisioning). These are the traps that strand TPU jobs.

use std::collections::BTreeMap;

use super::Checker;
use crate::spec::Path;
use crate::spec::types::{NodePool, Provisioning, Spec};

/// The most nodes a pool can ever have: its autoscaling maximum, else its fixed size.
fn max_nodes(pool: &NodePool) -> Option<u32> {
    pool.autoscaling
        .as_ref()
        .map(|a| a.max)
        .or(pool.initial_nodes)
}

pub(super) fn check(c: &mut Checker, spec: &Spec) {
    check_flavor_pools(c, spec);
    check_job_reach(c, spec);
}

/// Flavors over queued-provisioning pools need the DWS admission check; two flavors over one
/// pool count its capacity twice; a TPU quota on a pool without TPUs can never be used.
fn check_flavor_pools(c: &mut Checker, spec: &Spec) {
    let flavors = Path::root().key("kueue").key("flavors");
    let mut by_pool: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (i, flavor) in spec.kueue.flavors.iter().enumerate() {
        let Some(pool_name) = flavor.node_pool.as_deref() else {
            continue;
        };
        by_pool.entry(pool_name).or_default().push(&flavor.name);
        // The cluster's default pool is a plain CPU pool of its own machine type.
        let (machine_type, has_tpu_topology, queued) =
            match spec.node_pools.iter().find(|p| p.name == pool_name) {
                Some(pool) => (
                    pool.machine_type.as_str(),
                    pool.tpu_topology.is_some(),
                    pool.queued_provisioning,
                ),
                None if pool_name == spec.cluster.default_pool.name => (
                    spec.cluster.default_pool.machine_type.as_str(),
                    false,
                    false,
                ),
                None => continue,
            };
        if queued && flavor.provisioning != Some(Provisioning::Dws) {
            c.error(
                &flavors.index(i).key("nodePool"),
                format!(
                    "flavor `{}` places jobs on node pool `{pool_name}`, which uses queued provisioning: its nodes come only through a ProvisioningRequest, so jobs admitted here would wait forever",
                    flavor.name
                ),
                "add `provisioning: dws` to the flavor (gkq then adds the ProvisioningRequest admission check), or point it at a pool without queued provisioning",
            );
        }
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
