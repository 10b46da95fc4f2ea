//! The simulated cluster autoscaler of a GKE cluster: node objects for each pool, scale-up for
//! admitted jobs within the pool's autoscaling limits (in whole TPU slices), scale-down after
//! `scale_down_ms` of idleness, and GKE's ProvisioningRequest handling for queued-provisioning
//! (DWS flex-start) pools: the request is accepted at once and resolved after the configured
//! delay, provisioned (its nodes appear at once), failed, or never.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::controller::{Ctx, Outcome};
use super::nodes::{
    Demand, Pods, PoolInfo, ProvisioningOutcome, ProvisioningPlan, StartingNodes, node_keys,
};
use super::store::{Key, Store, set_condition};
use super::workload::{SIMULATED_ANNOTATION, SIMULATED_VALUE};
use crate::model::gke_facts::machine_shape;
use crate::vocab::labels::NODE_POOL_LABEL;
use crate::vocab::quantity::Quantity;

fn node_object(ctx: &Ctx<'_>, pool: &PoolInfo, seq: u64) -> Value {
    let hash = super::store::uid(&format!("{}/{}", ctx.cluster, pool.name));
    let name = format!("gke-{}-{}-{}-{seq:04x}", ctx.cluster, pool.name, &hash[..8]);
    let mut labels = json!({
        NODE_POOL_LABEL: pool.name,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": pool.machine_type,
        "cloud.google.com/gke-os-distribution": "cos",
    });
    let mut taints = Vec::new();
    let mut capacity = json!({"pods": "110"});
    if let Some(machine) = machine_shape(&pool.machine_type) {
        capacity["cpu"] = json!(machine.vcpus.to_string());
        capacity["memory"] = json!(format!("{}Gi", machine.memory_gib));
        if let Some((resource, chips)) = machine.accelerator {
            capacity[resource] = json!(chips.to_string());
            taints.push(json!({"key": resource, "value": "present", "effect": "NoSchedule"}));
        }
        if let Some(accelerator) = machine.tpu_accelerator {
            labels["cloud.google.com/gke-tpu-accelerator"] = json!(accelerator);
        }
    }
    if let Some(topology) = &pool.tpu_topology {
        labels["cloud.google.com/gke-tpu-topology"] = json!(topology);
    }
    if pool.flex_start {
        labels["cloud.google.com/gke-flex-start"] = json!("true");
    }
    if pool.spot {
        labels["cloud.google.com/gke-spot"] = json!("true");
    }
    if pool.queued_provisioning {
        labels["cloud.google.com/gke-queued"] = json!("true");
        taints.push(
            json!({"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}),
        );
    }
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
            "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE}},
        "spec": {"providerID": format!("gce://{}/{}", ctx.cluster, name)},
        "status": {"capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status (simulated)"}]},
    });
    if !taints.is_empty() {
        node["spec"]["taints"] = Value::Array(taints);
    }
    node
}

/// Adds `count` ready nodes to a pool.
pub fn add_nodes(ctx: &mut Ctx<'_>, pool: &PoolInfo, count: i64) -> bool {
    for _ in 0..count.max(0) {
        ctx.sim.node_seq += 1;
        let node = node_object(ctx, pool, ctx.sim.node_seq);
        ctx.store.create(node, "kubelet", ctx.now);
    }
    count > 0
}

fn remove_nodes(ctx: &mut Ctx<'_>, pool: &str, count: i64) -> bool {
    let mut keys = node_keys(ctx.store, pool);
    keys.reverse();
    let mut changed = false;
    for key in keys.into_iter().take(count.max(0) as usize) {
        changed |= ctx.store.delete(&key, false, ctx.now);
    }
    changed
}

/// The simulated cluster autoscaler: node objects for fixed pools, scale-up for the demand of
/// admitted jobs (queued-provisioning pools only grow through ProvisioningRequests), scale-down
/// after `scale_down_ms` below demand. Returns what changed.
pub fn autoscale(ctx: &mut Ctx<'_>, demand: &Demand) -> Outcome {
    let mut changed = false;
    let pools = ctx.pools.to_vec();
    for pool in &pools {
        let ready = node_keys(ctx.store, &pool.name).len() as i64;
        let starting: i64 = ctx
            .sim
            .starting
            .iter()
            .filter(|s| s.pool == pool.name)
            .map(|s| s.count)
            .sum();
        let wanted: i64 = demand
            .iter()
            .filter(|(_, p, _)| *p == pool.name)
            .map(|(_, _, n)| n)
            .sum();
        let target = if !pool.limits.autoscaled {
            pool.limits.max
        } else if pool.queued_provisioning {
            // Grows only through ProvisioningRequests.
            0
        } else {
            let slice = pool.slice_nodes().max(1);
            let wanted = wanted.max(pool.min_nodes());
            let rounded = (wanted + slice - 1) / slice * slice;
            rounded.min(pool.max_nodes())
        };
        if !pool.limits.autoscaled {
            if ready < target {
                changed |= add_nodes(ctx, pool, target - ready);
            } else if ready > target {
                changed |= remove_nodes(ctx, &pool.name, ready - target);
            }
            continue;
        }
        if target > ready + starting && !pool.queued_provisioning {
            ctx.sim.starting.push(StartingNodes {
                pool: pool.name.clone(),
                count: target - ready - starting,
                ready_ms: ctx.now + ctx.settings.node_startup_ms,
            });
            changed = true;
        }
        let floor = if pool.queued_provisioning {
            provisioned_nodes(ctx, &pool.name).max(pool.min_nodes())
        } else {
            target
        };
        if ready > floor && starting == 0 {
            let since = *ctx
                .sim
                .low_since
                .entry(pool.name.clone())
                .or_insert(ctx.now);
            if ctx.now >= since + ctx.settings.scale_down_ms {
                changed |= remove_nodes(ctx, &pool.name, ready - floor);
                ctx.sim.low_since.remove(&pool.name);
            }
        } else {
            ctx.sim.low_since.remove(&pool.name);
        }
    }
    // Nodes whose start-up time has come.
    let due: Vec<StartingNodes> = ctx
        .sim
        .starting
        .iter()
        .filter(|s| s.ready_ms <= ctx.now)
        .cloned()
        .collect();
    if !due.is_empty() {
        ctx.sim.starting.retain(|s| s.ready_ms > ctx.now);
        for s in due {
            if let Some(pool) = pools.iter().find(|p| p.name == s.pool) {
                let room = pool.max_nodes() - node_keys(ctx.store, &pool.name).len() as i64;
                changed |= add_nodes(ctx, pool, s.count.min(room));
            }
        }
    }
    // Pools that no longer exist lose their nodes.
    let names: Vec<String> = pools.iter().map(|p| p.name.clone()).collect();
    let orphans: Vec<Key> = ctx
        .store
        .of_kind("", "Node")
        .filter(|n| {
            n.pointer("/metadata/labels")
                .and_then(|l| l.get(NODE_POOL_LABEL))
                .and_then(Value::as_str)
                .is_some_and(|p| !names.iter().any(|n| n == p))
        })
        .map(Key::of)
        .collect();
    for key in orphans {
        changed |= ctx.store.delete(&key, false, ctx.now);
    }
    ctx.sim.starting.retain(|s| names.contains(&s.pool));
    Outcome { changed }
}

/// The nodes a ProvisioningRequest holds: when it is provisioned (and not being deleted), its
/// pool and node count.
fn held_by(pr: &Value) -> Option<(String, i64)> {
    if pr.pointer("/metadata/deletionTimestamp").is_some()
        || !crate::vocab::object::condition_true(pr, "Provisioned")
    {
        return None;
    }
    let pool = pr
        .pointer("/metadata/annotations/gkq.dev~1node-pool")
        .and_then(Value::as_str)?;
    let nodes = pr
        .pointer("/metadata/annotations/gkq.dev~1nodes")
        .and_then(Value::as_str)
        .and_then(|n| n.parse::<i64>().ok())?;
    Some((pool.to_string(), nodes))
}

/// Nodes held by provisioned ProvisioningRequests on a pool, from `sim.provisioned` ([`provision`]
/// brings it up to each step's start), brought up to the requests written in this step (every
/// request read once per process).
fn provisioned_nodes(ctx: &mut Ctx<'_>, pool: &str) -> i64 {
    let store = &*ctx.store;
    let written = store.pending_changes();
    if written.all {
        ctx.sim.provisioned = None;
    }
    let held = ctx.sim.provisioned.get_or_insert_with(|| {
        store
            .of_kind("autoscaling.x-k8s.io", "ProvisioningRequest")
            .filter_map(|pr| Some((Key::of(pr), held_by(pr)?)))
            .collect()
    });
    for key in written.of_kind("autoscaling.x-k8s.io", "ProvisioningRequest") {
        match store.get(key).and_then(held_by) {
            Some(h) => held.insert(key.clone(), h),
            None => held.remove(key),
        };
    }
    held.values()
        .filter(|(p, _)| p == pool)
        .map(|(_, n)| n)
        .sum()
}

const CLASS_QUEUED: &str = "queued-provisioning.gke.io";

/// The pool a ProvisioningRequest's pods select, and the nodes they need there.
fn request_target(
    store: &Store,
    pr: &Value,
    pools: &[PoolInfo],
) -> Result<(PoolInfo, i64), String> {
    let namespace = pr["metadata"]["namespace"].as_str().unwrap_or("default");
    let mut target: Option<(PoolInfo, Pods)> = None;
    for pod_set in pr["spec"]["podSets"].as_array().into_iter().flatten() {
        let count = pod_set["count"].as_i64().unwrap_or(0);
        let template_name = pod_set
            .pointer("/podTemplateRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(template) = store.get(&Key::new(
            "v1",
            "PodTemplate",
            Some(namespace),
            template_name,
        )) else {
            return Err(format!("PodTemplate {namespace}/{template_name} not found"));
        };
        let selected = template
            .pointer("/template/spec/nodeSelector")
            .and_then(|s| s.get(NODE_POOL_LABEL))
            .and_then(Value::as_str);
        let pool = match selected {
            Some(name) => pools.iter().find(|p| p.name == name),
            None => pools.iter().find(|p| p.queued_provisioning),
        }
        .ok_or_else(|| {
            format!(
                "no node pool {} in the cluster",
                selected.unwrap_or("with queued provisioning")
            )
        })?;
        if !pool.queued_provisioning {
            return Err(format!(
                "node pool {} does not have queued provisioning enabled",
                pool.name
            ));
        }
        let mut requests = BTreeMap::new();
        for container in template
            .pointer("/template/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for (resource, value) in container
                .pointer("/resources/requests")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                if let Ok(q) = Quantity::from_json(value) {
                    let sum = requests
                        .get(resource)
                        .copied()
                        .unwrap_or(Quantity::ZERO)
                        .saturating_add(q);
                    requests.insert(resource.clone(), sum);
                }
            }
        }
        match &mut target {
            Some((p, pods)) if p.name == pool.name => pods.push((count, requests)),
            Some((p, _)) => {
                return Err(format!(
                    "its podsets select two node pools ({} and {})",
                    p.name, pool.name
                ));
            }
            None => target = Some((pool.clone(), vec![(count, requests)])),
        }
    }
    let (pool, pods) = target.ok_or_else(|| "it has no podsets".to_string())?;
    let nodes = pool.nodes_for(&pods);
    Ok((pool, nodes))
}

/// GKE's ProvisioningRequest processing for queued provisioning (simulated).
/// Looks at the requests written since its last pass and those due and not yet resolved
/// (every request after a restart).
pub fn provision(ctx: &mut Ctx<'_>) -> Outcome {
    let mut changed = false;
    let changes = std::mem::replace(
        &mut ctx.sim.provisioning_changes,
        super::store::Changes::none(),
    );
    // What provisioned requests hold, as of the requests written before this step.
    if changes.all {
        ctx.sim.provisioned = None;
    } else if let Some(held) = ctx.sim.provisioned.as_mut() {
        for key in changes.of_kind("autoscaling.x-k8s.io", "ProvisioningRequest") {
            match ctx.store.get(key).and_then(held_by) {
                Some(h) => held.insert(key.clone(), h),
                None => held.remove(key),
            };
        }
    }
    let keys = if changes.all {
        let keys = ctx
            .store
            .keys_of_kind("autoscaling.x-k8s.io", "ProvisioningRequest");
        let live: BTreeSet<String> = keys
            .iter()
            .map(|k| format!("{}/{}", k.namespace, k.name))
            .collect();
        let before = ctx.sim.provisioning.len();
        ctx.sim.provisioning.retain(|k, _| live.contains(k));
        changed |= before != ctx.sim.provisioning.len();
        keys
    } else {
        let mut keys: BTreeSet<Key> = BTreeSet::new();
        for key in changes.of_kind("autoscaling.x-k8s.io", "ProvisioningRequest") {
            if ctx.store.get(key).is_some() {
                keys.insert(key.clone());
            } else {
                let id = format!("{}/{}", key.namespace, key.name);
                changed |= ctx.sim.provisioning.remove(&id).is_some();
            }
        }
        let now = ctx.now;
        keys.extend(
            ctx.sim
                .provisioning
                .iter()
                .filter(|(_, plan)| !plan.resolved && plan.due_ms <= now)
                .filter_map(|(id, _)| id.split_once('/'))
                .map(|(ns, name)| {
                    Key::new(
                        "autoscaling.x-k8s.io/v1",
                        "ProvisioningRequest",
                        Some(ns),
                        name,
                    )
                }),
        );
        keys.into_iter().collect()
    };
    for key in keys {
        changed |= provision_request(ctx, &key);
    }
    Outcome { changed }
}

/// One ProvisioningRequest: accepted (or refused) when first seen, resolved as planned once due.
fn provision_request(ctx: &mut Ctx<'_>, key: &Key) -> bool {
    let id = format!("{}/{}", key.namespace, key.name);
    let plan = ctx.sim.provisioning.get(&id).cloned();
    // A request resolved or not yet due has nothing to do: it is not copied.
    if plan
        .as_ref()
        .is_some_and(|p| p.resolved || p.due_ms > ctx.now)
    {
        return false;
    }
    let Some(pr) = ctx.store.get(key).cloned() else {
        return false;
    };
    if pr.pointer("/metadata/deletionTimestamp").is_some() {
        return false;
    }
    let Some(plan) = plan else {
        return accept_request(ctx, key, &pr, id);
    };
    let now = ctx.now;
    let mut changed = false;
    match plan.outcome {
        ProvisioningOutcome::Never => {}
        ProvisioningOutcome::Failed => {
            changed |= ctx.store.update(key, "cluster-autoscaler", true, now, |o| {
                set_condition(
                    o,
                    "Provisioned",
                    "False",
                    "ProvisioningFailed",
                    "simulated: no flex-start capacity was found (GKQ_LOCAL_PROVISIONING=fail)",
                    now,
                );
                set_condition(
                    o,
                    "Failed",
                    "True",
                    "ProvisioningFailed",
                    "simulated: no flex-start capacity was found (GKQ_LOCAL_PROVISIONING=fail)",
                    now,
                );
            });
        }
        ProvisioningOutcome::Provisioned => {
            let (provided, resolved) = provide_nodes(ctx, key, &pr);
            if !resolved {
                return provided;
            }
            changed |= provided;
        }
    }
    if let Some(plan) = ctx.sim.provisioning.get_mut(&id) {
        plan.resolved = true;
        changed = true;
    }
    changed
}

/// A request seen for the first time: when and how it resolves is planned
/// (`GKQ_LOCAL_PROVISIONING`), and it is accepted (queued provisioning's class) or failed.
fn accept_request(ctx: &mut Ctx<'_>, key: &Key, pr: &Value, id: String) -> bool {
    let class = pr["spec"]["provisioningClassName"]
        .as_str()
        .unwrap_or_default();
    let (outcome, delay) = ctx.settings.provisioning.plan();
    ctx.sim.provisioning.insert(
        id.clone(),
        ProvisioningPlan {
            due_ms: ctx.now + delay,
            outcome,
            resolved: false,
        },
    );
    let waiting = match outcome {
        ProvisioningOutcome::Never => {
            "Waiting for flex-start capacity (simulated: it never becomes available, GKQ_LOCAL_PROVISIONING=never)".to_string()
        }
        ProvisioningOutcome::Provisioned => format!(
            "Waiting for flex-start capacity (simulated: it arrives {} after the request)",
            crate::vocab::duration::format_ms(delay)
        ),
        ProvisioningOutcome::Failed => format!(
            "Waiting for flex-start capacity (simulated: the request fails {} after it was made, GKQ_LOCAL_PROVISIONING=fail)",
            crate::vocab::duration::format_ms(delay)
        ),
    };
    let accepted = class == CLASS_QUEUED;
    let now = ctx.now;
    let changed = ctx.store.update(key, "cluster-autoscaler", true, now, |o| {
        if accepted {
            set_condition(o, "Accepted", "True", "Accepted", "The ProvisioningRequest was accepted (simulated).", now);
            set_condition(o, "Provisioned", "False", "CapacityIsNotFound", &waiting, now);
        } else {
            set_condition(o, "Failed", "True", "UnsupportedProvisioningClass", &format!("provisioning class {class:?} is not supported by the simulated GKE (only {CLASS_QUEUED})"), now);
        }
    });
    if !accepted && let Some(plan) = ctx.sim.provisioning.get_mut(&id) {
        plan.resolved = true;
    }
    changed
}

/// A request due to be provisioned: its nodes added to the pool its pods select and the request
/// `Provisioned`, or, without room in the pool, left waiting (not resolved), or failed when it
/// selects no queued-provisioning pool. Returns whether anything changed and whether it is
/// resolved.
fn provide_nodes(ctx: &mut Ctx<'_>, key: &Key, pr: &Value) -> (bool, bool) {
    let now = ctx.now;
    let id = format!("{}/{}", key.namespace, key.name);
    // Still no room when neither the request nor its pool's nodes changed since it last waited.
    let version = pr["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some((pool, held, in_use, seen, max)) = ctx.sim.room_waits.get(&id).cloned()
        && seen == version
        && ctx
            .pools
            .iter()
            .find(|p| p.name == pool)
            .map(PoolInfo::max_nodes)
            == Some(max)
        && node_keys(ctx.store, &pool).len() as i64 == held
        && provisioned_nodes(ctx, &pool) == in_use
    {
        return (false, false);
    }
    ctx.sim.room_waits.remove(&id);
    let pools = ctx.pools.to_vec();
    let (pool, nodes) = match request_target(ctx.store, pr, &pools) {
        Ok(target) => target,
        Err(why) => {
            let message = format!("simulated: cannot provision: {why}");
            let changed = ctx.store.update(key, "cluster-autoscaler", true, now, |o| {
                set_condition(o, "Failed", "True", "ProvisioningFailed", &message, now);
            });
            return (changed, true);
        }
    };
    let held = node_keys(ctx.store, &pool.name).len() as i64;
    let in_use = provisioned_nodes(ctx, &pool.name);
    let free_ready = (held - in_use).max(0);
    let to_add = (nodes - free_ready).max(0);
    if held + to_add > pool.max_nodes() {
        let message = format!(
            "Waiting for room in node pool {} (simulated: {nodes} nodes needed, the pool may have {} and {in_use} are in use)",
            pool.name,
            pool.max_nodes()
        );
        let changed = ctx.store.update(key, "cluster-autoscaler", true, now, |o| {
            set_condition(
                o,
                "Provisioned",
                "False",
                "CapacityIsNotFound",
                &message,
                now,
            );
        });
        if let Some(version) = ctx
            .store
            .get(key)
            .and_then(|pr| pr["metadata"]["resourceVersion"].as_str())
        {
            let wait = (
                pool.name.clone(),
                held,
                in_use,
                version.to_string(),
                pool.max_nodes(),
            );
            ctx.sim.room_waits.insert(id, wait);
        }
        return (changed, false);
    }
    let mut changed = add_nodes(ctx, &pool, to_add);
    let pool_name = pool.name.clone();
    changed |= ctx
        .store
        .update(key, "cluster-autoscaler", false, now, |o| {
            o["metadata"]["annotations"]["gkq.dev/node-pool"] = json!(pool_name);
            o["metadata"]["annotations"]["gkq.dev/nodes"] = json!(nodes.to_string());
        });
    changed |= ctx.store.update(key, "cluster-autoscaler", true, now, |o| {
        set_condition(o, "Provisioned", "True", "Provisioned", &format!("Provisioning Request was successfully provisioned: {nodes} node(s) in {pool_name} (simulated)."), now);
    });
    (changed, true)
}
