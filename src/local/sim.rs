//! The simulated cluster: the controllers a real GKE cluster runs, reduced to what gkq's
//! walk-through shows, driven by a clock instead of a daemon. Every call to the local
//! Kubernetes API first brings the world to "now" ([`reconcile`]): it steps from event to event
//! (a ProvisioningRequest coming due, nodes becoming ready, a job starting or finishing, a
//! scale-down), and at each step runs every controller until nothing changes, so that what
//! happens at 10:00:05 happens before what happens at 10:00:10 even when nobody looked in
//! between.
//!
//! Controllers (each labelled as simulated wherever it writes a message):
//! - the API server's own: CRDs become `Established`; Deployments become `Available`; garbage
//!   collection of dependents; namespace deletion;
//! - Kueue ([`super::kueue`]), when its manager is installed and available: webhooks, Workloads
//!   for queued RayJobs, admission decided by gkq's placement module (the same prediction `plan`
//!   shows), the ProvisioningRequest admission check, job suspension, finalizers, queue status;
//! - KubeRay ([`super::ray`]): RayJob status Suspended -> Initializing -> Running -> Complete,
//!   the RayCluster, the finalizer;
//! - GKE ([`super::nodes`]): the cluster autoscaler and DWS provisioning.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::nodes::{PoolInfo, ProvisioningOutcome, ProvisioningPlan, StartingNodes};
use super::store::{Key, Store, timestamp};
use crate::vocab::object::condition_true;

/// How the simulation behaves (from `GKQ_LOCAL_*`; see [`super::Settings::from_env`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SimSettings {
    pub provisioning: Provisioning,
    /// How long a job runs when it declares no duration.
    pub run_ms: u64,
    /// How long new nodes take to become ready.
    pub node_startup_ms: u64,
    /// From nodes ready to the Ray job running (image pull, Ray start).
    pub ray_startup_ms: u64,
    /// How long the autoscaler waits before removing unneeded nodes.
    pub scale_down_ms: u64,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            provisioning: Provisioning::After(20_000),
            run_ms: 120_000,
            node_startup_ms: 60_000,
            ray_startup_ms: 20_000,
            scale_down_ms: 600_000,
        }
    }
}

/// What the simulated GKE does with a ProvisioningRequest (`GKQ_LOCAL_PROVISIONING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provisioning {
    /// Provisioned this long after it is requested (`after:20s`).
    After(u64),
    /// Stays pending (`never`).
    Never,
    /// Fails this long after it is requested (`fail`, `fail:30s`).
    Fail(u64),
}

impl Provisioning {
    pub fn plan(self) -> (ProvisioningOutcome, u64) {
        match self {
            Provisioning::After(ms) => (ProvisioningOutcome::Provisioned, ms),
            Provisioning::Never => (ProvisioningOutcome::Never, 0),
            Provisioning::Fail(ms) => (ProvisioningOutcome::Failed, ms),
        }
    }
}

/// One RayJob run: when it was admitted, scheduled on nodes, running and finished (simulated
/// milliseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub namespace: String,
    pub name: String,
    pub admitted_ms: u64,
    #[serde(default)]
    pub scheduled_ms: Option<u64>,
    pub runtime_ms: u64,
    /// Why the pods are not running yet, when they are not.
    #[serde(default)]
    pub waiting: Option<String>,
}

impl Run {
    pub fn running_ms(&self, ray_startup_ms: u64) -> Option<u64> {
        self.scheduled_ms.map(|s| s + ray_startup_ms)
    }

    pub fn finished_ms(&self, ray_startup_ms: u64) -> Option<u64> {
        self.running_ms(ray_startup_ms).map(|r| r + self.runtime_ms)
    }
}

/// What the simulation remembers besides the objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimState {
    /// The simulated time the world was last brought to.
    #[serde(default)]
    pub reconciled_ms: u64,
    /// ProvisioningRequests GKE has seen (`namespace/name`): when and how each resolves.
    #[serde(default)]
    pub provisioning: BTreeMap<String, ProvisioningPlan>,
    /// Job runs by RayJob uid.
    #[serde(default)]
    pub runs: BTreeMap<String, Run>,
    #[serde(default)]
    pub starting: Vec<StartingNodes>,
    /// Since when each pool has had more nodes than it needs.
    #[serde(default)]
    pub low_since: BTreeMap<String, u64>,
    /// ProvisioningRequest attempts per Workload uid.
    #[serde(default)]
    pub attempts: BTreeMap<String, u32>,
    #[serde(default)]
    pub node_seq: u64,
    /// Kueue objects changed since Kueue's controllers last ran (not kept on disk: after a
    /// restart every object is looked at once).
    #[serde(skip)]
    pub kueue_changes: super::store::Changes,
    /// The node pools the controllers last settled with, when they reached a state where
    /// nothing more changes (not kept on disk: a new process settles once).
    #[serde(skip)]
    pub settled_with: Option<Vec<PoolInfo>>,
}

/// Everything a controller step may read and change.
pub struct Ctx<'a> {
    pub store: &'a mut Store,
    pub sim: &'a mut SimState,
    pub settings: &'a SimSettings,
    pub pools: &'a [PoolInfo],
    pub cluster: &'a str,
    pub now: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub changed: bool,
}

/// Sets `status.conditions[type]`, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(
    object: &mut Value,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: u64,
) {
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = object["status"]["conditions"].as_array_mut() else {
        return;
    };
    let time = match conditions.iter().find(|c| c["type"] == kind) {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(timestamp(now)),
    };
    let condition = json!({"type": kind, "status": status, "reason": reason,
        "message": message, "lastTransitionTime": time});
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

/// `value[key]` as a map, created when absent or null; `None` when `value` is not a map or the
/// key holds something else (the simulation never panics on an odd object).
pub fn child_map<'a>(
    value: &'a mut Value,
    key: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let child = value
        .as_object_mut()?
        .entry(key)
        .or_insert_with(|| json!({}));
    if child.is_null() {
        *child = json!({});
    }
    child.as_object_mut()
}

pub fn remove_condition(object: &mut Value, kind: &str) {
    if let Some(conditions) = object
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        conditions.retain(|c| c["type"] != kind);
    }
}

/// Whether Kueue's manager is installed and available (its webhooks and controllers run).
pub fn kueue_running(store: &Store) -> bool {
    store
        .get(&Key::new(
            "apps/v1",
            "Deployment",
            Some(crate::model::kueue_install::KUEUE_NAMESPACE),
            crate::model::kueue_install::MANAGER_DEPLOYMENT,
        ))
        .is_some_and(|d| condition_true(d, "Available"))
}

/// Mutating and validating admission for every write: the API server's own defaults, and
/// Kueue's webhooks once Kueue runs.
pub fn admit(store: &Store, object: &mut Value, create: bool) -> Result<(), String> {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let group =
        super::store::group_of(object["apiVersion"].as_str().unwrap_or_default()).to_string();
    if group.is_empty() && kind == "Namespace" {
        let name = object["metadata"]["name"].clone();
        if let Some(labels) = child_map(object, "metadata").and_then(|m| {
            let l = m.entry("labels").or_insert_with(|| json!({}));
            if l.is_null() {
                *l = json!({});
            }
            l.as_object_mut()
        }) {
            labels.insert("kubernetes.io/metadata.name".into(), name);
        }
        if create {
            if let Some(spec) = child_map(object, "spec") {
                spec.insert("finalizers".into(), json!(["kubernetes"]));
            }
            object["status"] = json!({"phase": "Active"});
        }
    }
    if kueue_running(store) {
        super::kueue::webhooks(store, &group, &kind, object, create)?;
    }
    Ok(())
}

/// The API server's controllers: CRDs `Established`, Deployments `Available`, garbage
/// collection.
fn apiserver(ctx: &mut Ctx<'_>) -> Outcome {
    let mut changed = false;
    let now = ctx.now;
    for key in ctx
        .store
        .keys_of_kind("apiextensions.k8s.io", "CustomResourceDefinition")
    {
        let Some(crd) = ctx.store.get(&key) else {
            continue;
        };
        if condition_true(crd, "Established")
            || crd.pointer("/metadata/deletionTimestamp").is_some()
        {
            continue;
        }
        let names = crd.pointer("/spec/names").cloned().unwrap_or(Value::Null);
        let versions: Vec<Value> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v["storage"] == true)
                    .map(|v| v["name"].clone())
                    .collect()
            })
            .unwrap_or_default();
        changed |= ctx.store.update(&key, "kube-apiserver", true, now, |o| {
            o["status"]["acceptedNames"] = names;
            o["status"]["storedVersions"] = Value::Array(versions);
            set_condition(
                o,
                "NamesAccepted",
                "True",
                "NoConflicts",
                "no conflicts found",
                now,
            );
            set_condition(
                o,
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
                now,
            );
        });
    }
    for key in ctx.store.keys_of_kind("apps", "Deployment") {
        let Some(d) = ctx.store.get(&key) else {
            continue;
        };
        if condition_true(d, "Available") {
            continue;
        }
        let replicas = d
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        changed |= ctx
            .store
            .update(&key, "kube-controller-manager", true, now, |o| {
                o["status"]["replicas"] = json!(replicas);
                o["status"]["readyReplicas"] = json!(replicas);
                o["status"]["availableReplicas"] = json!(replicas);
                o["status"]["updatedReplicas"] = json!(replicas);
                set_condition(
                    o,
                    "Available",
                    "True",
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability (simulated).",
                    now,
                );
                set_condition(
                    o,
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    "ReplicaSet has successfully progressed (simulated).",
                    now,
                );
            });
    }
    changed |= ctx.store.collect_garbage(now);
    Outcome { changed }
}

/// One pass of every controller at `ctx.now`; returns whether anything changed.
fn step(ctx: &mut Ctx<'_>) -> bool {
    let mut changes = ctx.store.take_changes();
    changes.keys.retain(|k| k.group == super::kueue::KUEUE);
    ctx.sim.kueue_changes.merge(changes);
    let mut changed = apiserver(ctx).changed;
    if kueue_running(ctx.store) {
        changed |= super::kueue::reconcile(ctx).changed;
    }
    changed |= super::ray::reconcile(ctx).changed;
    changed |= super::nodes::provision(ctx).changed;
    let demand = super::ray::demand(ctx);
    changed |= super::nodes::autoscale(ctx, &demand).changed;
    changed |= super::ray::schedule(ctx, &demand).changed;
    changed
}

/// Runs every controller until nothing changes (bounded, in case of a ping-pong bug).
fn settle(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    ctx.sim.settled_with = None;
    for _ in 0..32 {
        if !step(ctx) {
            ctx.sim.settled_with = Some(ctx.pools.to_vec());
            break;
        }
        changed = true;
    }
    changed
}

/// The next moment something is due, after `after`.
fn next_event(ctx: &Ctx<'_>, after: u64) -> Option<u64> {
    let settings = ctx.settings;
    let mut times: Vec<u64> = Vec::new();
    times.extend(
        ctx.sim
            .provisioning
            .values()
            .filter(|p| !p.resolved && p.outcome != ProvisioningOutcome::Never)
            .map(|p| p.due_ms),
    );
    times.extend(ctx.sim.starting.iter().map(|s| s.ready_ms));
    for run in ctx.sim.runs.values() {
        times.extend(run.running_ms(settings.ray_startup_ms));
        times.extend(run.finished_ms(settings.ray_startup_ms));
    }
    times.extend(
        ctx.sim
            .low_since
            .values()
            .map(|since| since + settings.scale_down_ms),
    );
    times.extend(super::kueue::requeue_times(ctx.store));
    times.into_iter().filter(|t| *t > after).min()
}

/// Brings the world from its last reconciled moment to `now`, event by event. Returns whether
/// anything changed.
pub fn reconcile(
    store: &mut Store,
    sim: &mut SimState,
    settings: &SimSettings,
    pools: &[PoolInfo],
    cluster: &str,
    now: u64,
) -> bool {
    let start = sim.reconciled_ms.min(now);
    let mut ctx = Ctx {
        store,
        sim,
        settings,
        pools,
        cluster,
        now: start,
    };
    // The controllers react to changes and to due events only: when they last reached a state
    // where nothing more changes, with the same node pools, and no object changed since and no
    // event falls due before `now`, they would change nothing. A read between writes then
    // costs nothing, not a pass over every object.
    let quiet = ctx.sim.settled_with.as_deref() == Some(pools)
        && !ctx.store.has_changes()
        && next_event(&ctx, start).is_none_or(|t| t > now);
    if quiet {
        ctx.sim.reconciled_ms = now;
        return false;
    }
    let mut changed = settle(&mut ctx);
    while let Some(t) = next_event(&ctx, ctx.now).filter(|t| *t <= now) {
        ctx.now = t;
        changed |= settle(&mut ctx);
    }
    if ctx.now < now {
        ctx.now = now;
        changed |= settle(&mut ctx);
    }
    // Only the clock moved: the caller persists that lazily.
    ctx.sim.reconciled_ms = now;
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::ResourceInfo;

    fn info(kind: &str, plural: &str, namespaced: bool) -> ResourceInfo {
        ResourceInfo {
            api_version: "kueue.x-k8s.io/v1beta2".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// A store where Kueue's manager runs, with one ClusterQueue, settled.
    fn kueue_world() -> (Store, SimState) {
        let mut store = Store::default();
        for ns in super::super::store::initial_namespaces() {
            store.create(ns, "kube-apiserver", 0);
        }
        store.create(
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": crate::model::kueue_install::MANAGER_DEPLOYMENT,
                    "namespace": crate::model::kueue_install::KUEUE_NAMESPACE},
                "spec": {"replicas": 1}}),
            "test",
            0,
        );
        let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"}, "spec": {"resourceGroups": []}});
        store
            .apply(
                &info("ClusterQueue", "clusterqueues", false),
                &cq,
                "gkq",
                false,
                false,
                1,
                &admit,
            )
            .unwrap();
        let mut sim = SimState::default();
        reconcile(&mut store, &mut sim, &SimSettings::default(), &[], "c", 1);
        assert!(kueue_running(&store));
        (store, sim)
    }

    /// Applying queues one at a time, each followed by the controllers (as every request to the
    /// local target is), costs each write the queues it touched: the controllers' work grows
    /// linearly with the number of queues, not quadratically.
    #[test]
    fn controller_work_per_write_does_not_grow_with_the_objects() {
        let (mut store, mut sim) = kueue_world();
        let lq_info = info("LocalQueue", "localqueues", true);
        let mut work = Vec::new();
        for i in 0..300u64 {
            let before = store.update_calls();
            let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": format!("lq-{i}"), "namespace": "default"},
                "spec": {"clusterQueue": "cq"}});
            store
                .apply(&lq_info, &lq, "gkq", false, false, 2 + i, &admit)
                .unwrap();
            // The write's own pass, then a read's: nothing changed since, nothing to do.
            for _ in 0..2 {
                reconcile(
                    &mut store,
                    &mut sim,
                    &SimSettings::default(),
                    &[],
                    "c",
                    2 + i,
                );
            }
            work.push(store.update_calls() - before);
        }
        let last: u64 = work[250..].iter().sum::<u64>() / 50;
        let first: u64 = work[..50].iter().sum::<u64>() / 50;
        assert!(
            last <= first + 2 && last <= 16,
            "controller writes per applied queue: {first} for the first 50, {last} for the last 50"
        );
        // Every queue still got its status.
        let ready = store
            .of_kind("kueue.x-k8s.io", "LocalQueue")
            .filter(|q| condition_true(q, "Active"))
            .count();
        assert_eq!(ready, 300);
    }
}
