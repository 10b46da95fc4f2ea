//! A small in-memory `GkeApi` for executor tests. It answers like GKE where the engine cares:
//! operations that take a few polls, one operation per cluster, server defaults and `goog-gke-*`
//! labels in responses, enums as integers, zero values left out, etags and label fingerprints,
//! and injected faults (stockout on a pool create, quota on cluster create, a foreign operation
//! that keeps the cluster busy). The GKE emulator replaces it in emulator tests: the executor
//! only sees `&dyn GkeApi`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use gkq::addr::ClusterRef;
use gkq::gke::{GkeApi, GkeError, GkeResult, Operation, RpcStatus};
use serde_json::{Value, json};

pub const SERVED_VERSION: &str = "1.34.5-gke.100";

/// One accepted or refused mutating call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: &'static str,
    pub target: String,
    pub body: Value,
    pub refused: bool,
}

type Effect = Box<dyn FnOnce(&mut State) -> Option<String> + Send>;

struct PendingOp {
    operation: Operation,
    polls_left: u32,
    /// Runs when the operation finishes; `Some(message)` fails it.
    effect: Option<Effect>,
}

#[derive(Default)]
struct State {
    cluster: Option<Value>,
    operations: BTreeMap<String, PendingOp>,
    next_id: u64,
    calls: Vec<Call>,
    stockout_pools: BTreeSet<String>,
    quota_on_cluster_create: bool,
}

#[derive(Default)]
pub struct FakeGke {
    state: Mutex<State>,
}

const DEFAULT_SCOPES: [&str; 6] = [
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/service.management.readonly",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/trace.append",
];

impl FakeGke {
    pub fn new() -> Self {
        Self::default()
    }

    /// Mutating calls so far (refused ones included, marked).
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn accepted_calls(&self) -> Vec<(String, String)> {
        self.calls()
            .into_iter()
            .filter(|c| !c.refused)
            .map(|c| (c.method.to_string(), c.target))
            .collect()
    }

    pub fn clear_calls(&self) {
        self.state.lock().unwrap().calls.clear();
    }

    /// The next `nodePools.create` of `pool` ends in a stockout, leaving the pool in ERROR.
    pub fn fail_pool_create_with_stockout(&self, pool: &str) {
        self.state
            .lock()
            .unwrap()
            .stockout_pools
            .insert(pool.to_string());
    }

    pub fn clear_faults(&self) {
        let mut state = self.state.lock().unwrap();
        state.stockout_pools.clear();
        state.quota_on_cluster_create = false;
    }

    /// `clusters.create` is refused with a 403 quota error.
    pub fn refuse_cluster_create_for_quota(&self) {
        self.state.lock().unwrap().quota_on_cluster_create = true;
    }

    /// GKE starts its own operation (an auto-upgrade) that runs for `polls` polls.
    pub fn start_foreign_operation(&self, polls: u32) -> String {
        let mut state = self.state.lock().unwrap();
        let name = next_op_name(&mut state);
        let operation = Operation {
            name: name.clone(),
            operation_type: "UPGRADE_MASTER".into(),
            status: "RUNNING".into(),
            ..Operation::default()
        };
        state.operations.insert(
            name.clone(),
            PendingOp {
                operation,
                polls_left: polls,
                effect: None,
            },
        );
        name
    }

    /// Someone else edits a pool behind gkq's back.
    pub fn edit_pool(&self, pool: &str, edit: impl FnOnce(&mut Value)) {
        let mut state = self.state.lock().unwrap();
        if let Some(pool) = state.cluster.as_mut().and_then(|c| pool_mut(c, pool)) {
            edit(pool);
            bump_etag(pool);
        }
    }

    /// Someone else edits the cluster behind gkq's back.
    pub fn edit_cluster(&self, edit: impl FnOnce(&mut Value)) {
        if let Some(cluster) = self.state.lock().unwrap().cluster.as_mut() {
            edit(cluster);
        }
    }

    pub fn pool(&self, pool: &str) -> Option<Value> {
        let state = self.state.lock().unwrap();
        state
            .cluster
            .as_ref()
            .and_then(|c| find_pool(c, pool))
            .cloned()
    }

    /// Starts an operation; mutating calls are refused while another one runs.
    fn start(
        &self,
        method: &'static str,
        target: String,
        body: Value,
        operation_type: &str,
        effect: Effect,
    ) -> GkeResult<Operation> {
        let mut state = self.state.lock().unwrap();
        let running = state
            .operations
            .values()
            .find(|op| op.operation.status != "DONE")
            .map(|op| op.operation.name.clone());
        state.calls.push(Call {
            method,
            target: target.clone(),
            body,
            refused: running.is_some(),
        });
        if let Some(running) = running {
            return Err(GkeError::ClusterBusy {
                message: format!("Cluster is running incompatible operation {running}."),
                operation: Some(running),
            });
        }
        let name = next_op_name(&mut state);
        let operation = Operation {
            name: name.clone(),
            operation_type: operation_type.into(),
            status: "PENDING".into(),
            target_link: Some(target),
            ..Operation::default()
        };
        state.operations.insert(
            name,
            PendingOp {
                operation: operation.clone(),
                polls_left: 2,
                effect: Some(effect),
            },
        );
        Ok(operation)
    }
}

fn next_op_name(state: &mut State) -> String {
    state.next_id += 1;
    format!("operation-{}", state.next_id)
}

fn bump_etag(resource: &mut Value) {
    let n = resource
        .get("etag")
        .and_then(Value::as_str)
        .and_then(|e| e.strip_prefix("etag-"))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    resource["etag"] = json!(format!("etag-{}", n + 1));
}

fn find_pool<'v>(cluster: &'v Value, name: &str) -> Option<&'v Value> {
    cluster["nodePools"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
}

fn pool_mut<'v>(cluster: &'v mut Value, name: &str) -> Option<&'v mut Value> {
    cluster["nodePools"]
        .as_array_mut()?
        .iter_mut()
        .find(|p| p["name"] == name)
}

/// Drops what a proto3 JSON encoder leaves out: zero numbers, false, empty strings.
fn drop_zero_values(value: &mut Value) {
    if let Some(map) = value.as_object_mut() {
        map.retain(|_, v| !matches!(v, Value::Bool(false)) && v != &json!(0) && v != &json!(""));
        for child in map.values_mut() {
            drop_zero_values(child);
        }
    }
}

/// A node pool as GKE would return it after creating it from `body`.
fn served_pool(body: &Value, zone: &str) -> Value {
    let mut pool = body.clone();
    let tpu = pool["config"]["machineType"]
        .as_str()
        .unwrap_or("")
        .starts_with("ct");
    let queued = pool["queuedProvisioning"]["enabled"] == true;
    let flex = pool["config"]["flexStart"] == true;
    let config = pool["config"].as_object_mut().unwrap();
    config.entry("diskSizeGb").or_insert(json!(100));
    config.entry("diskType").or_insert(json!("pd-balanced"));
    config.entry("imageType").or_insert(json!("COS_CONTAINERD"));
    config.entry("serviceAccount").or_insert(json!("default"));
    config
        .entry("metadata")
        .or_insert(json!({"disable-legacy-endpoints": "true"}));
    config.entry("oauthScopes").or_insert(json!(DEFAULT_SCOPES));
    // Enums as integers, as with `$alt=json;enum-encoding=int`.
    if let Some(kind) = config
        .get_mut("reservationAffinity")
        .and_then(|r| r.get_mut("consumeReservationType"))
    {
        let names = [
            "UNSPECIFIED",
            "NO_RESERVATION",
            "ANY_RESERVATION",
            "SPECIFIC_RESERVATION",
        ];
        if let Some(i) = names.iter().position(|n| kind == n) {
            *kind = json!(i);
        }
    }
    let labels = config.entry("resourceLabels").or_insert(json!({}));
    let model = if flex { "flex-start" } else { "on-demand" };
    labels["goog-gke-node-pool-provisioning-model"] = json!(model);
    if tpu {
        labels["goog-gke-accelerator-type"] = json!("tpu-v6e-slice");
    }
    if queued {
        config.insert(
            "taints".into(),
            json!([{"key": "cloud.google.com/gke-queued", "value": "true", "effect": 1}]),
        );
    }
    let autoscaling_policy = if flex { 2 } else { 1 };
    if let Some(autoscaling) = pool.get_mut("autoscaling").and_then(Value::as_object_mut) {
        autoscaling.insert("locationPolicy".into(), json!(autoscaling_policy));
    }
    let map = pool.as_object_mut().unwrap();
    map.entry("management")
        .or_insert(json!({"autoRepair": true, "autoUpgrade": true}));
    map.insert("status".into(), json!(2));
    map.insert("version".into(), json!(SERVED_VERSION));
    map.insert("locations".into(), json!([zone]));
    map.insert("maxPodsConstraint".into(), json!({"maxPodsPerNode": "110"}));
    map.insert(
        "upgradeSettings".into(),
        json!({"maxSurge": 1, "strategy": if queued || flex { 3 } else { 2 }}),
    );
    map.insert(
        "selfLink".into(),
        json!(format!(
            "https://container.googleapis.com/v1/pools/{}",
            body["name"]
        )),
    );
    map.insert("instanceGroupUrls".into(), json!([]));
    drop_zero_values(&mut pool);
    bump_etag(&mut pool);
    pool
}

fn served_cluster(body: &Value, zone: &str) -> Value {
    let mut cluster = body.clone();
    let pools: Vec<Value> = body["nodePools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| served_pool(p, zone))
        .collect();
    let map = cluster.as_object_mut().unwrap();
    map.insert("nodePools".into(), json!(pools));
    map.insert("status".into(), json!(2));
    map.insert("currentMasterVersion".into(), json!(SERVED_VERSION));
    map.insert("currentNodeVersion".into(), json!(SERVED_VERSION));
    map.insert("endpoint".into(), json!("34.1.2.3"));
    map.insert("location".into(), json!(zone));
    map.insert("zone".into(), json!(zone));
    map.insert("id".into(), json!("f00d"));
    map.insert("labelFingerprint".into(), json!("fp-1"));
    map.insert("releaseChannel".into(), json!({"channel": 3}));
    map.insert(
        "masterAuth".into(),
        json!({"clusterCaCertificate": "LS0tLS1CRUdJTg=="}),
    );
    map.insert("network".into(), json!("default"));
    let labels = map.entry("resourceLabels").or_insert(json!({}));
    labels["goog-gke-cluster-id-base32"] = json!("abcdef");
    // Addons the request does not mention get the server's defaults (enabled: an empty message).
    let addons = map.entry("addonsConfig").or_insert(json!({}));
    if let Some(addons) = addons.as_object_mut() {
        addons.entry("httpLoadBalancing").or_insert(json!({}));
        addons
            .entry("horizontalPodAutoscaling")
            .or_insert(json!({}));
        addons
            .entry("gcePersistentDiskCsiDriverConfig")
            .or_insert(json!({"enabled": true}));
    }
    bump_etag(&mut cluster);
    cluster
}

fn not_found(what: String) -> GkeError {
    GkeError::NotFound { what }
}

#[async_trait::async_trait]
impl GkeApi for FakeGke {
    async fn get_cluster(&self, cluster: &ClusterRef) -> GkeResult<Option<Value>> {
        let state = self.state.lock().unwrap();
        Ok(state
            .cluster
            .clone()
            .filter(|c| c["name"] == cluster.cluster.as_str()))
    }

    async fn create_cluster(&self, cluster: &ClusterRef, body: &Value) -> GkeResult<Operation> {
        {
            let mut state = self.state.lock().unwrap();
            if state.quota_on_cluster_create {
                state.calls.push(Call {
                    method: "clusters.create",
                    target: cluster.name(),
                    body: body.clone(),
                    refused: true,
                });
                return Err(GkeError::Forbidden {
                    message: "Insufficient regional quota to satisfy request: resource \"CPUS\": request requires '48.0' and is short '24.0'".into(),
                });
            }
        }
        let served = served_cluster(body, &cluster.location);
        self.start(
            "clusters.create",
            cluster.name(),
            body.clone(),
            "CREATE_CLUSTER",
            Box::new(move |state: &mut State| {
                state.cluster = Some(served);
                None
            }),
        )
    }

    async fn update_cluster(&self, cluster: &ClusterRef, update: &Value) -> GkeResult<Operation> {
        let update = update.clone();
        self.start(
            "clusters.update",
            cluster.name(),
            update.clone(),
            "UPDATE_CLUSTER",
            Box::new(move |state: &mut State| {
                let cluster = state.cluster.as_mut()?;
                if let Some(version) = update["desiredMasterVersion"].as_str() {
                    cluster["currentMasterVersion"] = json!(format!("{version}.1-gke.1"));
                }
                if let Some(addons) = update["desiredAddonsConfig"].as_object() {
                    for (k, v) in addons {
                        cluster["addonsConfig"][k] = v.clone();
                    }
                }
                None
            }),
        )
    }

    async fn set_resource_labels(
        &self,
        cluster: &ClusterRef,
        labels: &BTreeMap<String, String>,
        label_fingerprint: &str,
    ) -> GkeResult<Operation> {
        let current = self
            .state
            .lock()
            .unwrap()
            .cluster
            .as_ref()
            .map(|c| c["labelFingerprint"].clone());
        if current != Some(json!(label_fingerprint)) {
            return Err(GkeError::Conflict {
                message: "labelFingerprint does not match".into(),
            });
        }
        let labels = json!(labels);
        self.start(
            "clusters.setResourceLabels",
            cluster.name(),
            json!({"resourceLabels": labels, "labelFingerprint": label_fingerprint}),
            "UPDATE_CLUSTER",
            Box::new(move |state: &mut State| {
                let cluster = state.cluster.as_mut()?;
                cluster["resourceLabels"] = labels;
                cluster["labelFingerprint"] = json!("fp-2");
                None
            }),
        )
    }

    async fn delete_cluster(&self, cluster: &ClusterRef) -> GkeResult<Operation> {
        self.start(
            "clusters.delete",
            cluster.name(),
            Value::Null,
            "DELETE_CLUSTER",
            Box::new(|state: &mut State| {
                state.cluster = None;
                None
            }),
        )
    }

    async fn get_node_pool(&self, _cluster: &ClusterRef, pool: &str) -> GkeResult<Option<Value>> {
        Ok(self.pool(pool))
    }

    async fn list_node_pools(&self, _cluster: &ClusterRef) -> GkeResult<Vec<Value>> {
        let state = self.state.lock().unwrap();
        Ok(state
            .cluster
            .as_ref()
            .and_then(|c| c["nodePools"].as_array().cloned())
            .unwrap_or_default())
    }

    async fn create_node_pool(&self, cluster: &ClusterRef, body: &Value) -> GkeResult<Operation> {
        let name = body["name"].as_str().unwrap_or_default().to_string();
        if self.pool(&name).is_some() {
            return Err(GkeError::Api {
                http_status: 409,
                status: "ALREADY_EXISTS".into(),
                reason: None,
                message: format!("Node pool {name} already exists."),
            });
        }
        let stockout = self.state.lock().unwrap().stockout_pools.contains(&name);
        let mut served = served_pool(body, &cluster.location);
        let target = cluster.node_pool(&name);
        self.start("nodePools.create", target, body.clone(), "CREATE_NODE_POOL", Box::new(move |state: &mut State| {
            let cluster = state.cluster.as_mut()?;
            let message = stockout.then(|| {
                served["status"] = json!(6);
                "Google Compute Engine: Not all instances running in IGM after 14.69s. Expected 1, running 0, \
                 transitioning 1. Current errors: [GCE_STOCKOUT]: Instance 'gke-tpu-cluster-pool-1' creation \
                 failed: The zone 'projects/my-project/zones/us-east5-b' does not have enough resources \
                 available to fulfill the request. Try a different zone, or try again later."
                    .to_string()
            });
            cluster["nodePools"].as_array_mut()?.push(served);
            message
        }))
    }

    async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        body: &Value,
    ) -> GkeResult<Operation> {
        let current = self.pool(pool).ok_or_else(|| not_found(pool.to_string()))?;
        if body
            .get("etag")
            .is_some_and(|etag| etag != &current["etag"])
        {
            return Err(GkeError::Conflict {
                message: "etag does not match".into(),
            });
        }
        let (name, update) = (pool.to_string(), body.clone());
        self.start(
            "nodePools.update",
            cluster.node_pool(pool),
            body.clone(),
            "UPDATE_NODE_POOL",
            Box::new(move |state: &mut State| {
                let pool = pool_mut(state.cluster.as_mut()?, &name)?;
                for (field, value) in update.as_object()? {
                    match field.as_str() {
                        "etag" => {}
                        // UpdateNodePoolRequest wraps these in a message: {"resourceLabels": {"labels": {...}}}.
                        "resourceLabels" | "labels" => {
                            pool["config"][field] = value["labels"].clone()
                        }
                        "taints" | "tags" => pool["config"][field] = value[field].clone(),
                        "nodeVersion" => pool["version"] = value.clone(),
                        other => pool["config"][other] = value.clone(),
                    }
                }
                bump_etag(pool);
                None
            }),
        )
    }

    async fn set_node_pool_autoscaling(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        autoscaling: &Value,
    ) -> GkeResult<Operation> {
        let (name, mut served) = (pool.to_string(), autoscaling.clone());
        drop_zero_values(&mut served);
        self.start(
            "nodePools.setAutoscaling",
            cluster.node_pool(pool),
            autoscaling.clone(),
            "UPDATE_CLUSTER",
            Box::new(move |state: &mut State| {
                let pool = pool_mut(state.cluster.as_mut()?, &name)?;
                pool["autoscaling"] = served;
                bump_etag(pool);
                None
            }),
        )
    }

    async fn set_node_pool_size(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        node_count: u32,
    ) -> GkeResult<Operation> {
        self.start(
            "nodePools.setSize",
            cluster.node_pool(pool),
            json!({"nodeCount": node_count}),
            "SET_NODE_POOL_SIZE",
            Box::new(|_: &mut State| None),
        )
    }

    async fn set_node_pool_management(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        management: &Value,
    ) -> GkeResult<Operation> {
        let (name, mut served) = (pool.to_string(), management.clone());
        drop_zero_values(&mut served);
        self.start(
            "nodePools.setManagement",
            cluster.node_pool(pool),
            management.clone(),
            "SET_NODE_POOL_MANAGEMENT",
            Box::new(move |state: &mut State| {
                let pool = pool_mut(state.cluster.as_mut()?, &name)?;
                pool["management"] = served;
                bump_etag(pool);
                None
            }),
        )
    }

    async fn delete_node_pool(&self, cluster: &ClusterRef, pool: &str) -> GkeResult<Operation> {
        if self.pool(pool).is_none() {
            return Err(not_found(pool.to_string()));
        }
        let name = pool.to_string();
        self.start(
            "nodePools.delete",
            cluster.node_pool(pool),
            Value::Null,
            "DELETE_NODE_POOL",
            Box::new(move |state: &mut State| {
                state.cluster.as_mut()?["nodePools"]
                    .as_array_mut()?
                    .retain(|p| p["name"] != name.as_str());
                None
            }),
        )
    }

    async fn get_operation(&self, _cluster: &ClusterRef, operation: &str) -> GkeResult<Operation> {
        let mut state = self.state.lock().unwrap();
        let pending = state
            .operations
            .get_mut(operation)
            .ok_or_else(|| not_found(operation.to_string()))?;
        if pending.operation.status == "DONE" {
            return Ok(pending.operation.clone());
        }
        pending.polls_left = pending.polls_left.saturating_sub(1);
        if pending.polls_left > 0 {
            pending.operation.status = "RUNNING".into();
            return Ok(pending.operation.clone());
        }
        let effect = pending.effect.take();
        let failure = effect.and_then(|effect| effect(&mut state));
        let pending = state
            .operations
            .get_mut(operation)
            .expect("operation still recorded");
        pending.operation.status = "DONE".into();
        if let Some(message) = failure {
            pending.operation.status_message = Some(message.clone());
            pending.operation.error = Some(RpcStatus {
                code: 8,
                message,
                details: vec![],
            });
        }
        Ok(pending.operation.clone())
    }
}
