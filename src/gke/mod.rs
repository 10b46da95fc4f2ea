//! GKE REST API client (container.googleapis.com/v1) and Google credentials.
//!
//! Clusters and node pools travel as `serde_json::Value` in the exact JSON shape of the REST API
//! (lowerCamelCase, int64 as strings): the reconciler compares only the fields the spec owns, so it
//! must keep every field the server returns, and the emulator stores the same JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a cluster lives: `projects/{project}/locations/{location}/clusters/{cluster}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClusterRef {
    pub project: String,
    pub location: String,
    pub cluster: String,
}

impl ClusterRef {
    pub fn parent(&self) -> String {
        format!("projects/{}/locations/{}", self.project, self.location)
    }
    pub fn name(&self) -> String {
        format!("{}/clusters/{}", self.parent(), self.cluster)
    }
    pub fn node_pool(&self, pool: &str) -> String {
        format!("{}/nodePools/{pool}", self.name())
    }
    pub fn operation(&self, operation: &str) -> String {
        format!("{}/operations/{operation}", self.parent())
    }
}

/// A long-running GKE operation (`Operation` in the discovery document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub name: String,
    #[serde(default)]
    pub operation_type: String,
    /// PENDING, RUNNING, DONE or ABORTING.
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_link: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Every other field the server sent (progress, clusterConditions, ...).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `google.rpc.Status`, as found in `Operation.error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RpcStatus {
    #[serde(default)]
    pub code: i32,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Value>,
}

/// Errors from the GKE API, classified so that callers can branch on them.
#[derive(Debug, thiserror::Error)]
pub enum GkeError {
    /// The resource does not exist (HTTP 404).
    #[error("{what} not found")]
    NotFound { what: String },
    /// Another operation is running on the cluster (400 FAILED_PRECONDITION,
    /// CLUSTER_ALREADY_HAS_OPERATION) or the concurrent-operations quota is hit (429).
    #[error("cluster is busy with operation {operation:?}: {message}")]
    ClusterBusy {
        operation: Option<String>,
        message: String,
    },
    /// An etag or label fingerprint did not match (409 ABORTED).
    #[error("conflict: {message}")]
    Conflict { message: String },
    /// Quota or permission (403).
    #[error("permission or quota: {message}")]
    Forbidden { message: String },
    /// Any other error response from the API, with google.rpc fields.
    #[error("GKE API error {http_status} {status}: {message}{}", reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    Api {
        http_status: u16,
        status: String,
        reason: Option<String>,
        message: String,
    },
    /// An operation finished with an error (stockouts arrive this way).
    #[error("operation {operation} ({operation_type}) on {target} failed: {message}")]
    OperationFailed {
        operation: String,
        operation_type: String,
        target: String,
        code: i32,
        message: String,
    },
    /// Transport failure, timeout, or credentials problem.
    #[error("{0}")]
    Transport(String),
    #[error("credentials: {0}")]
    Auth(String),
}

pub type GkeResult<T> = Result<T, GkeError>;

/// The calls gkq makes to GKE. Implemented over HTTP by the REST client (also used against the
/// emulator, whose endpoint differs); bodies are the REST API's JSON.
#[async_trait::async_trait]
pub trait GkeApi: Send + Sync {
    /// `clusters.get`; `None` when the cluster does not exist. Includes `nodePools[]`.
    async fn get_cluster(&self, cluster: &ClusterRef) -> GkeResult<Option<Value>>;
    /// `clusters.create` with `{"cluster": cluster}`.
    async fn create_cluster(&self, cluster: &ClusterRef, body: &Value) -> GkeResult<Operation>;
    /// `clusters.update` with `{"update": update}` (a `ClusterUpdate`).
    async fn update_cluster(&self, cluster: &ClusterRef, update: &Value) -> GkeResult<Operation>;
    /// `clusters.setResourceLabels` with the full label map and the current fingerprint.
    async fn set_resource_labels(
        &self,
        cluster: &ClusterRef,
        labels: &BTreeMap<String, String>,
        label_fingerprint: &str,
    ) -> GkeResult<Operation>;
    /// `clusters.delete`.
    async fn delete_cluster(&self, cluster: &ClusterRef) -> GkeResult<Operation>;
    /// `nodePools.get`; `None` when the pool does not exist.
    async fn get_node_pool(&self, cluster: &ClusterRef, pool: &str) -> GkeResult<Option<Value>>;
    /// `nodePools.list`.
    async fn list_node_pools(&self, cluster: &ClusterRef) -> GkeResult<Vec<Value>>;
    /// `nodePools.create` with `{"nodePool": body}`.
    async fn create_node_pool(&self, cluster: &ClusterRef, body: &Value) -> GkeResult<Operation>;
    /// `nodePools.update` (PUT) with an `UpdateNodePoolRequest` body.
    async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        body: &Value,
    ) -> GkeResult<Operation>;
    /// `nodePools.setAutoscaling` with `{"autoscaling": autoscaling}`.
    async fn set_node_pool_autoscaling(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        autoscaling: &Value,
    ) -> GkeResult<Operation>;
    /// `nodePools.setSize` with `{"nodeCount": n}`.
    async fn set_node_pool_size(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        node_count: u32,
    ) -> GkeResult<Operation>;
    /// `nodePools.setManagement` with `{"management": management}`.
    async fn set_node_pool_management(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        management: &Value,
    ) -> GkeResult<Operation>;
    /// `nodePools.delete`.
    async fn delete_node_pool(&self, cluster: &ClusterRef, pool: &str) -> GkeResult<Operation>;
    /// `operations.get` by the operation's short name.
    async fn get_operation(&self, cluster: &ClusterRef, operation: &str) -> GkeResult<Operation>;
}
