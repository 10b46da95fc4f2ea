//! The simulated cluster autoscaler of a GKE cluster: node objects for each pool, scale-up for
//! admitted jobs within the pool's autoscaling limits (in whole TPU slices), scale-down after
//! `scale_down_ms` of idleness, and GKE's ProvisioningRequest handling for queued-provisioning
//! (DWS flex-start) pools: the request is accepted at once and resolved after the configured
//! delay, provisioned (its nodes appear at once), failed, or never.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::controller::Provisioning;
use super::controller::{Ctx, Outcome};
use super::nodes::{
    Availability, Demand, LocalCapacity, Pods, PoolInfo, PoolRoom, ProvisioningOutcome,
    ProvisioningPlan, RoomWait, StartingNodes, all_pools, node_keys,
};
use super::store::{Key, Store, set_condition};
use super::workload::{SIMULATED_ANNOTATION, SIMULATED_VALUE};
use crate::model::gke_facts::machine_shape;
use crate::vocab::labels::{COMPUTE_CLASS_LABEL, NODE_POOL_LABEL};
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
    for (key, value) in &pool.labels {
        labels[key.as_str()] = json!(value);
    }
    // GKE taints the nodes it creates for a ComputeClass with the class (docs/gke-facts.md, L1).
    if let Some(class) = pool.labels.get(COMPUTE_CLASS_LABEL) {
        taints.push(json!({"key": COMPUTE_CLASS_LABEL, "value": class, "effect": "NoSchedule"}));
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
/// admitted jobs (queued-provisioning pools only grow through ProvisioningRequests) within what
/// each rung can obtain (`GKQ_LOCAL_CAPACITY`), scale-down after `scale_down_ms` below demand.
/// Returns what changed.
pub fn autoscale(ctx: &mut Ctx<'_>, demand: &Demand) -> Outcome {
    let mut changed = false;
    let pools = all_pools(ctx.pools, &ctx.sim.auto_pools);
    for pool in &pools {
        changed |= autoscale_pool(ctx, &pools, pool, demand);
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

/// Nodes being started for a pool.
fn starting_nodes(ctx: &Ctx<'_>, pool: &str) -> i64 {
    ctx.sim
        .starting
        .iter()
        .filter(|s| s.pool == pool)
        .map(|s| s.count)
        .sum()
}

/// One pool: its fixed size, or its scale-up (within what it can obtain) and scale-down.
fn autoscale_pool(ctx: &mut Ctx<'_>, pools: &[PoolInfo], pool: &PoolInfo, demand: &Demand) -> bool {
    let mut changed = false;
    let ready = node_keys(ctx.store, &pool.name).len() as i64;
    let starting = starting_nodes(ctx, &pool.name);
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
        return changed;
    }
    if target > ready + starting && !pool.queued_provisioning {
        changed |= scale_up(ctx, pools, pool, target - ready - starting, demand);
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
    changed
}

/// Starts `want` more nodes for a pool, as many as it can obtain (whole slices for a multi-host
/// pool: a slice needs all its VMs); the jobs waiting on it are told (`TriggeredScaleUp`, or
/// `FailedScaleUp` for what cannot be obtained).
fn scale_up(
    ctx: &mut Ctx<'_>,
    pools: &[PoolInfo],
    pool: &PoolInfo,
    want: i64,
    demand: &Demand,
) -> bool {
    let mut changed = false;
    let obtainable = obtainable(ctx, pools, pool);
    let slice = pool.slice_nodes().max(1);
    let grant = match obtainable.room {
        None => want,
        Some(room) => want.min(room.max(0)) / slice * slice,
    };
    let waiting: Vec<String> = demand
        .iter()
        .filter(|(u, p, _)| *p == pool.name && !is_scheduled(ctx, u))
        .map(|(u, _, _)| u.clone())
        .collect();
    if grant > 0 {
        let ready = node_keys(ctx.store, &pool.name).len() as i64;
        let from = ready + starting_nodes(ctx, &pool.name);
        ctx.sim.starting.push(StartingNodes {
            pool: pool.name.clone(),
            count: grant,
            ready_ms: ctx.now + ctx.settings.node_startup_ms + obtainable.delay_ms,
        });
        changed = true;
        let message = format!(
            "pod triggered scale-up: [{{{} {from}->{} (max: {})}}] (simulated)",
            pool.name,
            from + grant,
            pool.max_nodes()
        );
        for job in &waiting {
            changed |= record_event(ctx, job, TRIGGERED_SCALE_UP, &message);
        }
    }
    if grant < want {
        let message = stockout(pool, want, grant, obtainable.entry.as_deref());
        for job in &waiting {
            changed |= record_event(ctx, job, FAILED_SCALE_UP, &message);
        }
    } else {
        for job in &waiting {
            changed |= clear_event(ctx, job, FAILED_SCALE_UP);
        }
    }
    changed
}

fn is_scheduled(ctx: &Ctx<'_>, job_uid: &str) -> bool {
    ctx.sim
        .runs
        .get(job_uid)
        .is_some_and(|r| r.scheduled_ms.is_some())
}

/// Why a pool got fewer nodes than it wanted.
pub fn stockout(pool: &PoolInfo, want: i64, got: i64, entry: Option<&str>) -> String {
    format!(
        "simulated stockout in node pool {} ({}): {want} node(s) needed, {got} obtained ({} {})",
        pool.name,
        pool.kind().as_str(),
        LocalCapacity::VARIABLE,
        entry.unwrap_or("unlimited"),
    )
}

/// What a pool can still obtain under `GKQ_LOCAL_CAPACITY`.
pub struct Obtainable {
    /// More nodes it can get (`None`: unlimited).
    pub room: Option<i64>,
    /// After this delay (a `queued` rung: the provisioning delay).
    pub delay_ms: u64,
    /// The entry deciding it, as written (`on-demand:4`).
    pub entry: Option<String>,
}

/// What `pool` can still obtain: the count of its capacity entry (by its name, else its kind)
/// less the nodes every autoscaled pool under that same entry holds or is starting.
pub fn obtainable(ctx: &Ctx<'_>, pools: &[PoolInfo], pool: &PoolInfo) -> Obtainable {
    let capacity = &ctx.settings.capacity;
    let Some(entry) = capacity.entry(&pool.name, pool.kind()) else {
        return Obtainable {
            room: None,
            delay_ms: 0,
            entry: None,
        };
    };
    let text = Some(entry.text());
    let (limit, delay_ms) = match entry.value {
        Availability::Unlimited => (None, 0),
        Availability::Never => (Some(0), 0),
        Availability::Queued => match ctx.settings.provisioning {
            Provisioning::After(ms) => (None, ms),
            Provisioning::Never | Provisioning::Fail(_) => (Some(0), 0),
        },
        Availability::Nodes(n) => (Some(n), 0),
    };
    let room = limit.map(|limit| {
        let used: i64 = pools
            .iter()
            // A fixed-size pool has its nodes whatever the rung's capacity: it governs nothing
            // and uses none of it.
            .filter(|p| p.limits.autoscaled && capacity.entry(&p.name, p.kind()) == Some(entry))
            .map(|p| node_keys(ctx.store, &p.name).len() as i64 + starting_nodes(ctx, &p.name))
            .sum();
        (limit - used).max(0)
    });
    Obtainable {
        room,
        delay_ms,
        entry: text,
    }
}

pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
pub const FAILED_SCALE_UP: &str = "FailedScaleUp";
/// The scheduler's event when a job's pods are placed on nodes.
pub const SCHEDULED: &str = "Scheduled";

/// The Event `reason` about the job of run `job_uid`. The cluster autoscaler's and scheduler's
/// events are about pods; the simulation has no worker pods, so they are about the job (one
/// Event per job and reason, owned by the job so that it goes with it).
fn event_key(ctx: &Ctx<'_>, job_uid: &str, reason: &str) -> Option<(Key, Value)> {
    let run = ctx.sim.runs.get(job_uid)?;
    let job = ctx.store.get(&run.job_key())?;
    let name = format!("{}.{}", run.name, reason.to_ascii_lowercase());
    let key = Key::new("v1", "Event", Some(&run.namespace), &name);
    let involved = json!({"apiVersion": job["apiVersion"], "kind": job["kind"],
        "name": run.name, "namespace": run.namespace, "uid": job_uid});
    Some((key, involved))
}

/// Records (or updates) the Event `reason` about a job's pods.
pub fn record_event(ctx: &mut Ctx<'_>, job_uid: &str, reason: &str, message: &str) -> bool {
    let Some((key, involved)) = event_key(ctx, job_uid, reason) else {
        return false;
    };
    let now = super::store::timestamp(ctx.now);
    let (component, kind) = match reason {
        SCHEDULED => ("default-scheduler", "Normal"),
        FAILED_SCALE_UP => ("cluster-autoscaler", "Warning"),
        _ => ("cluster-autoscaler", "Normal"),
    };
    if let Some(live) = ctx.store.get(&key) {
        if live["message"] == message {
            return false;
        }
        return ctx.store.update(&key, component, false, ctx.now, |o| {
            o["message"] = json!(message);
            o["lastTimestamp"] = json!(now);
            o["count"] = json!(o["count"].as_i64().unwrap_or(1) + 1);
        });
    }
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": key.name, "namespace": key.namespace,
            "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
            "ownerReferences": [{"apiVersion": involved["apiVersion"], "kind": involved["kind"],
                "name": involved["name"], "uid": involved["uid"]}]},
        "involvedObject": involved,
        "reason": reason, "message": message, "type": kind,
        "source": {"component": component},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    ctx.store.create(event, component, ctx.now)
}

/// Removes the Event `reason` about a job (what it said no longer holds).
pub fn clear_event(ctx: &mut Ctx<'_>, job_uid: &str, reason: &str) -> bool {
    match event_key(ctx, job_uid, reason) {
        Some((key, _)) if ctx.store.get(&key).is_some() => ctx.store.delete(&key, false, ctx.now),
        _ => false,
    }
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
    let mut keys: BTreeSet<Key> = BTreeSet::new();
    if changes.all {
        keys.extend(
            ctx.store
                .keys_of_kind("autoscaling.x-k8s.io", "ProvisioningRequest"),
        );
        let live: BTreeSet<String> = keys
            .iter()
            .map(|k| format!("{}/{}", k.namespace, k.name))
            .collect();
        let before = ctx.sim.provisioning.len();
        ctx.sim.provisioning.retain(|k, _| live.contains(k));
        changed |= before != ctx.sim.provisioning.len();
        let queue = &mut ctx.sim.provisioning_queue;
        for id in queue.waiting_ids() {
            if !live.contains(&id) {
                queue.unwait(&id);
            }
        }
        queue.build(&ctx.sim.provisioning, true);
    } else {
        ctx.sim
            .provisioning_queue
            .build(&ctx.sim.provisioning, false);
        for key in changes.of_kind("autoscaling.x-k8s.io", "ProvisioningRequest") {
            if ctx.store.get(key).is_some() {
                keys.insert(key.clone());
            } else {
                let id = format!("{}/{}", key.namespace, key.name);
                changed |= ctx.sim.provisioning.remove(&id).is_some();
                ctx.sim.provisioning_queue.note(&id, None);
            }
        }
        // The open requests due, and those waiting for room whose pool's room changed; the
        // others waiting would find no room again.
        let due: Vec<Key> = ctx
            .sim
            .provisioning_queue
            .due(ctx.now)
            .filter_map(|id| request_key(id))
            .collect();
        keys.extend(due);
        keys.extend(waiting_for_other_room(ctx));
    }
    // In key order; after a request changed something, the requests after it waiting for room
    // in a pool whose room changed are looked at too.
    let mut next = keys.first().cloned();
    while let Some(key) = next {
        if provision_request(ctx, &key) {
            changed = true;
            keys.extend(waiting_for_other_room(ctx).filter(|k| *k > key));
        }
        next = keys
            .range((std::ops::Bound::Excluded(&key), std::ops::Bound::Unbounded))
            .next()
            .cloned();
    }
    Outcome { changed }
}

/// The key of the ProvisioningRequest `namespace/name`.
fn request_key(id: &str) -> Option<Key> {
    let (namespace, name) = id.split_once('/')?;
    Some(Key::new(
        "autoscaling.x-k8s.io/v1",
        "ProvisioningRequest",
        Some(namespace),
        name,
    ))
}

/// How `pool` stands now for a request waiting for room in it (`None`: no such pool).
fn pool_room(ctx: &mut Ctx<'_>, pool: &str) -> Option<PoolRoom> {
    let max = ctx
        .pools
        .iter()
        .find(|p| p.name == pool)
        .map(PoolInfo::max_nodes)?;
    Some(PoolRoom {
        nodes: node_keys(ctx.store, pool).len() as i64,
        in_use: provisioned_nodes(ctx, pool),
        max,
    })
}

/// The requests waiting for room in a pool whose room changed since they looked.
fn waiting_for_other_room(ctx: &mut Ctx<'_>) -> impl Iterator<Item = Key> + use<> {
    let mut keys = Vec::new();
    for pool in ctx.sim.provisioning_queue.waiting_pools() {
        let room = pool_room(ctx, &pool);
        keys.extend(
            ctx.sim
                .provisioning_queue
                .waiting_for_other_room(&pool, room)
                .filter_map(|id| request_key(id)),
        );
    }
    keys.into_iter()
}

/// One ProvisioningRequest: accepted (or refused) when first seen, resolved as planned once due.
fn provision_request(ctx: &mut Ctx<'_>, key: &Key) -> bool {
    let id = format!("{}/{}", key.namespace, key.name);
    let changed = look_at_request(ctx, key, &id);
    let plan = ctx.sim.provisioning.get(&id);
    ctx.sim.provisioning_queue.note(&id, plan);
    changed
}

/// [`provision_request`], its plan not yet noted in the queue.
fn look_at_request(ctx: &mut Ctx<'_>, key: &Key, id: &str) -> bool {
    let id = id.to_string();
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
    if let Some(wait) = ctx.sim.provisioning_queue.waiting(&id).cloned()
        && wait.version == version
        && pool_room(ctx, &wait.pool) == Some(wait.room)
    {
        return (false, false);
    }
    ctx.sim.provisioning_queue.unwait(&id);
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
            let wait = RoomWait {
                pool: pool.name.clone(),
                room: PoolRoom {
                    nodes: held,
                    in_use,
                    max: pool.max_nodes(),
                },
                version: version.to_string(),
            };
            ctx.sim.provisioning_queue.wait(&id, wait);
        }
        return (changed, false);
    }
    // The rung's capacity (`GKQ_LOCAL_CAPACITY`): a request gets all its nodes or none.
    let obtainable = obtainable(ctx, &all_pools(&pools, &ctx.sim.auto_pools), &pool);
    if obtainable.room.is_some_and(|room| room < to_add) {
        // All or nothing: a request's nodes come at once.
        let message = format!(
            "Waiting for flex-start capacity ({})",
            stockout(&pool, to_add, 0, obtainable.entry.as_deref())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::controller::{SimSettings, SimState};
    use crate::model::gke::NodeLimits;

    fn dws_pool() -> PoolInfo {
        PoolInfo {
            name: "dws".into(),
            machine_type: "ct6e-standard-4t".into(),
            limits: NodeLimits {
                min: 0,
                max: 4,
                autoscaled: true,
            },
            queued_provisioning: true,
            flex_start: true,
            tpu_topology: Some("4x4".into()),
            zones: 1,
            spot: false,
            reservation: false,
            labels: BTreeMap::new(),
        }
    }

    fn request(name: &str) -> Value {
        json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"provisioningClassName": CLASS_QUEUED,
                "podSets": [{"count": 4, "podTemplateRef": {"name": "slice"}}]}})
    }

    fn provisioned(store: &Store, name: &str) -> bool {
        let key = request_key(&format!("default/{name}")).unwrap();
        store
            .get(&key)
            .is_some_and(|pr| crate::vocab::object::condition_true(pr, "Provisioned"))
    }

    /// One pass of the simulated GKE's provisioning at `now`, over the requests written since
    /// the last.
    fn pass(store: &mut Store, sim: &mut SimState, now: u64) -> bool {
        sim.provisioning_changes.merge(store.take_changes());
        let (settings, pools) = (SimSettings::default(), [dws_pool()]);
        let mut ctx = Ctx {
            store,
            sim,
            settings: &settings,
            pools: &pools,
            cluster: "c",
            now,
        };
        provision(&mut ctx).changed
    }

    #[test]
    fn a_request_waiting_for_room_is_looked_at_again_only_when_its_pool_changes() {
        let mut store = Store::default();
        let mut sim = SimState::default();
        store.create(
            json!({"apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": "slice", "namespace": "default"},
                "template": {"spec": {"nodeSelector": {NODE_POOL_LABEL: "dws"},
                    "containers": [{"name": "c", "resources": {"requests":
                        {"cpu": "8", "google.com/tpu": "4"}}}]}}}),
            "kueue",
            0,
        );
        store.create(request("a"), "kueue", 0);
        store.create(request("b"), "kueue", 0);
        assert!(pass(&mut store, &mut sim, 0), "both accepted");
        let due = SimSettings::default().provisioning.plan().1;
        // Due: the first gets the pool's four nodes, the second waits for room.
        assert!(pass(&mut store, &mut sim, due));
        assert!(provisioned(&store, "a") && !provisioned(&store, "b"));
        assert_eq!(node_keys(&store, "dws").len(), 4);
        assert!(sim.provisioning_queue.waiting("default/b").is_some());
        // Nothing changed: the waiting request is not read again.
        let writes = store.update_calls();
        assert!(!pass(&mut store, &mut sim, due + 1_000));
        assert_eq!(store.update_calls(), writes);
        // The first request goes: its nodes are free, and the second takes them.
        let a = request_key("default/a").unwrap();
        assert!(store.delete(&a, false, due + 2_000));
        assert!(pass(&mut store, &mut sim, due + 2_000));
        assert!(provisioned(&store, "b"));
        assert_eq!(node_keys(&store, "dws").len(), 4);
        assert!(sim.provisioning_queue.waiting_ids().is_empty());
        assert!(!sim.provisioning.contains_key("default/a"));
        assert_eq!(sim.provisioning_queue.due(u64::MAX).count(), 0);
    }
}
