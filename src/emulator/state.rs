//! The emulator's data: clusters, node pools and operations, as plain data that serialises to
//! the state file. Resource JSON is stored in canonical form (see [`super::wire`]); derived
//! fields (etag, labelFingerprint, nodePools, currentNodeCount, ...) are computed in the views.
//!
//! Operations are driven by the clock: an operation is PENDING for `pending_ms`, RUNNING for
//! `running_ms`, then DONE. [`State::advance`] (called on every request) applies the effects of
//! operations that have come due, in order: a created cluster or pool becomes RUNNING (or ERROR
//! when the operation fails, e.g. a stockout), a deleted one disappears, an updated one returns to
//! RUNNING.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::EmulatorConfig;
use super::defaults::cluster_ready;
use super::util::{project_number, rfc3339, sha256_hex, uuid_like};

pub const STATE_FILE: &str = "gke-emulator-state.json";
const STATE_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    #[serde(default)]
    pub version: u32,
    /// By `projects/P/locations/L/clusters/C`.
    pub clusters: BTreeMap<String, ClusterRec>,
    /// In creation order.
    pub operations: Vec<OpRec>,
    pub seq: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterRec {
    pub project: String,
    pub location: String,
    pub name: String,
    /// Canonical `Cluster` JSON without `nodePools` and derived fields.
    pub json: Value,
    pub pools: Vec<PoolRec>,
    /// Bumped on every write; the etag derives from it.
    pub generation: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolRec {
    /// Canonical `NodePool` JSON without derived fields.
    pub json: Value,
    /// Current nodes per zone (`initialNodeCount`, then `setSize`).
    pub node_count: i64,
    pub generation: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    ClusterCreated,
    ClusterDeleted,
    ClusterSettled,
    PoolCreated,
    PoolDeleted,
    PoolSettled,
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpFailure {
    /// google.rpc.Code number.
    pub code: i32,
    pub message: String,
    /// `StatusCondition.code`, e.g. `GCE_STOCKOUT`.
    pub condition: Option<String>,
    /// google.rpc.Code name for `StatusCondition.canonicalCode`.
    pub canonical: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpRec {
    pub name: String,
    pub project: String,
    pub location: String,
    pub cluster: String,
    pub pool: Option<String>,
    pub op_type: String,
    pub start_ms: u64,
    pub pending_ms: u64,
    pub running_ms: u64,
    pub done: bool,
    pub end_ms: Option<u64>,
    /// Set when the operation is to fail (stockout) or was cancelled; applied at DONE.
    pub failure: Option<OpFailure>,
    pub effect: Effect,
}

pub fn cluster_key(project: &str, location: &str, cluster: &str) -> String {
    format!("projects/{project}/locations/{location}/clusters/{cluster}")
}

/// `https://container.googleapis.com/v1/projects/<number>/zones/<L>/...`: the form GKE uses in
/// `selfLink` and `targetLink` of operations (docs/gke.md c.1).
pub fn zones_link(project: &str, location: &str, rest: &str) -> String {
    format!(
        "https://container.googleapis.com/v1/projects/{}/zones/{location}/{rest}",
        project_number(project)
    )
}

/// `labelFingerprint`: a hash of the labels (8 hex digits, as GKE shows it).
pub fn label_fingerprint(labels: Option<&Value>) -> String {
    let mut pairs: Vec<String> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    sha256_hex(&["labels", &pairs.join(",")])[..8].to_string()
}

fn set_status(json: &mut Value, status: &str, message: Option<&str>) {
    if let Some(o) = json.as_object_mut() {
        o.insert("status".into(), json!(status));
        match message {
            Some(m) => o.insert("statusMessage".into(), json!(m)),
            None => o.remove("statusMessage"),
        };
    }
}

pub fn status_of(json: &Value) -> &str {
    json.get("status").and_then(Value::as_str).unwrap_or("")
}

impl PoolRec {
    pub fn name(&self) -> &str {
        self.json.get("name").and_then(Value::as_str).unwrap_or("")
    }

    pub fn etag(&self, cluster_key: &str) -> String {
        uuid_like(&[
            "pool",
            cluster_key,
            self.name(),
            &self.generation.to_string(),
        ])
    }

    pub fn view(&self, cluster_key: &str) -> Value {
        let mut v = self.json.clone();
        if let Some(o) = v.as_object_mut() {
            o.insert("etag".into(), json!(self.etag(cluster_key)));
        }
        v
    }

    pub fn touch(&mut self) {
        self.generation += 1;
    }
}

impl ClusterRec {
    pub fn key(&self) -> String {
        cluster_key(&self.project, &self.location, &self.name)
    }

    pub fn etag(&self) -> String {
        uuid_like(&["cluster", &self.key(), &self.generation.to_string()])
    }

    pub fn label_fingerprint(&self) -> String {
        label_fingerprint(self.json.get("resourceLabels"))
    }

    pub fn pool(&self, name: &str) -> Option<&PoolRec> {
        self.pools.iter().find(|p| p.name() == name)
    }

    pub fn pool_mut(&mut self, name: &str) -> Option<&mut PoolRec> {
        self.pools.iter_mut().find(|p| p.name() == name)
    }

    pub fn touch(&mut self) {
        self.generation += 1;
    }

    /// The `Cluster` as `clusters.get` returns it.
    pub fn view(&self) -> Value {
        let key = self.key();
        let mut v = self.json.clone();
        let Some(o) = v.as_object_mut() else { return v };
        let pools: Vec<Value> = self.pools.iter().map(|p| p.view(&key)).collect();
        // Deprecated mirrors of the first pool, still returned by the API.
        if let Some(first) = self.pools.first() {
            if let Some(cfg) = first.json.get("config") {
                o.insert("nodeConfig".into(), cfg.clone());
            }
            if let Some(ver) = first.json.get("version") {
                o.insert("currentNodeVersion".into(), ver.clone());
            }
        }
        let nodes: i64 = self
            .pools
            .iter()
            .filter(|p| status_of(&p.json) != "ERROR")
            .map(|p| {
                let zones = p
                    .json
                    .get("locations")
                    .and_then(Value::as_array)
                    .map_or(1, Vec::len) as i64;
                p.node_count * zones
            })
            .sum();
        o.insert("currentNodeCount".into(), json!(nodes));
        let igs: Vec<Value> = self
            .pools
            .iter()
            .flat_map(|p| {
                p.json
                    .get("instanceGroupUrls")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        o.insert("instanceGroupUrls".into(), Value::Array(igs));
        o.insert("nodePools".into(), Value::Array(pools));
        o.insert("labelFingerprint".into(), json!(self.label_fingerprint()));
        o.insert("etag".into(), json!(self.etag()));
        v
    }
}

impl OpRec {
    pub fn due_ms(&self) -> u64 {
        self.start_ms + self.pending_ms + self.running_ms
    }

    pub fn status(&self, now: u64) -> &'static str {
        if self.done {
            "DONE"
        } else if now < self.start_ms + self.pending_ms {
            "PENDING"
        } else {
            "RUNNING"
        }
    }

    pub fn target_path(&self) -> String {
        match &self.pool {
            Some(p) => format!("clusters/{}/nodePools/{p}", self.cluster),
            None => format!("clusters/{}", self.cluster),
        }
    }

    /// The `Operation` as `operations.get` returns it.
    pub fn view(&self, now: u64) -> Value {
        let mut v = json!({
            "name": self.name,
            "zone": self.location,
            "operationType": self.op_type,
            "status": self.status(now),
            "selfLink": zones_link(&self.project, &self.location, &format!("operations/{}", self.name)),
            "targetLink": zones_link(&self.project, &self.location, &self.target_path()),
            "location": self.location,
            "startTime": rfc3339(self.start_ms),
        });
        let o = v.as_object_mut().expect("object");
        if let Some(end) = self.end_ms.filter(|_| self.done) {
            o.insert("endTime".into(), json!(rfc3339(end)));
        }
        if let (true, Some(f)) = (self.done, &self.failure) {
            o.insert(
                "error".into(),
                json!({"code": f.code, "message": f.message}),
            );
            o.insert("statusMessage".into(), json!(f.message));
            o.insert("detail".into(), json!(f.message));
            let mut cond = Map::new();
            if let Some(c) = &f.condition {
                cond.insert("code".into(), json!(c));
            }
            cond.insert("message".into(), json!(f.message));
            cond.insert("canonicalCode".into(), json!(f.canonical));
            let key = if self.pool.is_some() {
                "nodepoolConditions"
            } else {
                "clusterConditions"
            };
            o.insert(key.into(), json!([Value::Object(cond)]));
        }
        v
    }
}

impl State {
    pub fn cluster(&self, p: &str, l: &str, c: &str) -> Option<&ClusterRec> {
        self.clusters.get(&cluster_key(p, l, c))
    }

    pub fn cluster_mut(&mut self, p: &str, l: &str, c: &str) -> Option<&mut ClusterRec> {
        self.clusters.get_mut(&cluster_key(p, l, c))
    }

    /// The unfinished operation on a cluster, if any (one at a time per cluster).
    pub fn busy_op(&self, p: &str, l: &str, c: &str) -> Option<&OpRec> {
        self.operations
            .iter()
            .find(|o| !o.done && o.project == p && o.location == l && o.cluster == c)
    }

    /// Applies the effects of every operation that has come due. Returns whether anything
    /// changed.
    pub fn advance(&mut self, now: u64, cfg: &EmulatorConfig) -> bool {
        let mut due: Vec<usize> = (0..self.operations.len())
            .filter(|&i| !self.operations[i].done && self.operations[i].due_ms() <= now)
            .collect();
        due.sort_by_key(|&i| (self.operations[i].due_ms(), i));
        for &i in &due {
            let op = self.operations[i].clone();
            self.finish(&op, cfg);
            let rec = &mut self.operations[i];
            rec.done = true;
            rec.end_ms = Some(rec.due_ms().max(rec.start_ms));
        }
        !due.is_empty()
    }

    fn finish(&mut self, op: &OpRec, cfg: &EmulatorConfig) {
        let key = cluster_key(&op.project, &op.location, &op.cluster);
        let failure = op.failure.as_ref();
        match op.effect {
            Effect::ClusterDeleted => {
                self.clusters.remove(&key);
            }
            Effect::None => {}
            _ => {
                let Some(c) = self.clusters.get_mut(&key) else {
                    return;
                };
                match (op.effect, &op.pool) {
                    (Effect::ClusterCreated, _) => {
                        match failure {
                            Some(f) => {
                                set_status(&mut c.json, "ERROR", Some(&f.message));
                                for p in &mut c.pools {
                                    set_status(&mut p.json, "ERROR", Some(&f.message));
                                    p.touch();
                                }
                            }
                            None => {
                                set_status(&mut c.json, "RUNNING", None);
                                cluster_ready(cfg, &mut c.json);
                                for p in &mut c.pools {
                                    set_status(&mut p.json, "RUNNING", None);
                                    p.touch();
                                }
                            }
                        }
                        c.touch();
                    }
                    (Effect::ClusterSettled, _) => {
                        if status_of(&c.json) == "RECONCILING" {
                            set_status(&mut c.json, "RUNNING", None);
                        }
                        c.touch();
                    }
                    (Effect::PoolCreated, Some(name)) => {
                        if let Some(p) = c.pool_mut(name) {
                            match failure {
                                Some(f) => {
                                    set_status(&mut p.json, "ERROR", Some(&f.message));
                                    if let Some(o) = p.json.as_object_mut() {
                                        let mut cond = json!({"message": f.message,
                                            "canonicalCode": f.canonical});
                                        if let Some(code) = &f.condition {
                                            cond["code"] = json!(code);
                                        }
                                        o.insert("conditions".into(), json!([cond]));
                                    }
                                }
                                None => set_status(&mut p.json, "RUNNING", None),
                            }
                            p.touch();
                        }
                        c.touch();
                    }
                    (Effect::PoolDeleted, Some(name)) => {
                        c.pools.retain(|p| p.name() != name);
                        c.touch();
                    }
                    (Effect::PoolSettled, Some(name)) => {
                        if let Some(p) = c.pool_mut(name) {
                            if status_of(&p.json) == "RECONCILING" {
                                set_status(&mut p.json, "RUNNING", None);
                            }
                            p.touch();
                        }
                        c.touch();
                    }
                    _ => {}
                }
            }
        }
    }

    /// Starts an operation; with zero durations it is DONE at the next [`State::advance`].
    #[allow(clippy::too_many_arguments)]
    pub fn start_op(
        &mut self,
        now: u64,
        pending_ms: u64,
        running_ms: u64,
        p: &str,
        l: &str,
        c: &str,
        pool: Option<&str>,
        op_type: &str,
        effect: Effect,
        failure: Option<OpFailure>,
    ) -> String {
        self.seq += 1;
        let name = format!(
            "operation-{now}-{}",
            uuid_like(&["op", &self.seq.to_string(), &now.to_string(), c])
        );
        self.operations.push(OpRec {
            name: name.clone(),
            project: p.into(),
            location: l.into(),
            cluster: c.into(),
            pool: pool.map(str::to_string),
            op_type: op_type.into(),
            start_ms: now,
            pending_ms,
            running_ms,
            done: false,
            end_ms: None,
            failure,
            effect,
        });
        name
    }

    pub fn op(&self, p: &str, l: &str, name: &str) -> Option<&OpRec> {
        self.operations
            .iter()
            .find(|o| o.name == name && o.project == p && (o.location == l || l == "-"))
    }

    pub fn load(dir: &Path) -> anyhow::Result<State> {
        let path = dir.join(STATE_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let s: State = serde_json::from_slice(&bytes).map_err(|e| {
                    anyhow::anyhow!("reading emulator state {}: {e}", path.display())
                })?;
                Ok(s)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State {
                version: STATE_VERSION,
                ..State::default()
            }),
            Err(e) => Err(anyhow::anyhow!(
                "reading emulator state {}: {e}",
                path.display()
            )),
        }
    }

    /// Writes the state atomically (temporary file in the same directory, then rename),
    /// owner-only like the rest of a local target's state.
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let mut s = self.clone();
        s.version = STATE_VERSION;
        let bytes = serde_json::to_vec_pretty(&s)?;
        crate::owner_only::write_atomically(
            &dir.join(STATE_FILE),
            &bytes,
            crate::owner_only::Durability::Sync,
        )?;
        Ok(())
    }
}
