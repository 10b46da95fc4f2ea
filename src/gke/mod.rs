//! GKE REST API client (container.googleapis.com/v1) and Google credentials.
//!
//! Clusters and node pools travel as `serde_json::Value` in the exact JSON shape of the REST API
//! (lowerCamelCase, int64 as strings): the reconciler compares only the fields the spec owns, so it
//! must keep every field the server returns, and the emulator stores the same JSON.

//!
//! - [`RestGke`] implements [`GkeApi`] over reqwest, with retries ([`rest`] documents which calls
//!   are retried and how creates avoid blind re-POSTs); credentials come from a [`TokenSource`]
//!   ([`AdcTokenSource`], [`StaticTokenSource`], [`AnonymousTokenSource`]).
//! - [`wait_operation`], [`retry_while_busy`] and [`run_operation`] handle long-running operations
//!   and the one-operation-per-cluster rule.
//! - [`kube_config_from_cluster`] builds a Kubernetes client config from `clusters.get`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), gkq::gke::GkeError> {
//! use std::sync::Arc;
//! use gkq::addr::ClusterRef;
//! use gkq::gke::*;
//! let api = RestGke::new(Arc::new(AdcTokenSource::new(&process_env)?))?;
//! let cluster = ClusterRef { project: "p".into(), location: "us-east5-b".into(), cluster: "c".into() };
//! let autoscaling = serde_json::json!({"enabled": true, "maxNodeCount": 8});
//! let op = run_operation(&api, &cluster,
//!     || api.set_node_pool_autoscaling(&cluster, "dws-pool", &autoscaling),
//!     |op, elapsed| eprintln!("{} {} {:?}", op.operation_type, op.status, elapsed)).await?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod auth;
pub mod errors;
pub mod federation;
pub mod kubeconfig;
pub mod operations;
pub mod rest;

pub use auth::{
    AdcTokenSource, AnonymousTokenSource, CLOUD_PLATFORM_SCOPE, EnvLookup, StaticTokenSource,
    TokenSource, USERINFO_EMAIL_SCOPE, install_tls_provider, process_env,
};
pub use federation::{DEFAULT_STS_ENDPOINT, SubjectTokenSource, WorkloadIdentity};
pub use kubeconfig::{
    EndpointChoice, KubeConfigError, TOKEN_REBUILD_INTERVAL, kube_config_from_cluster,
    kube_config_from_cluster_with,
};
pub use operations::{
    PollConfig, WaitOptions, is_done, operation_failure, operation_target, retry_while_busy,
    retry_while_busy_until, run_operation, short_operation_name, wait_operation,
    wait_operation_until, wait_operation_with,
};
pub use rest::{DEFAULT_ENDPOINT, RestGke, RetryConfig};

use crate::addr::ClusterRef;

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
    /// A wait for an operation gave up; the operation may still finish on GKE's side.
    #[error(
        "gave up after {timeout:?} waiting for operation {operation} ({operation_type}) on {target}; it may still be running"
    )]
    WaitTimedOut {
        timeout: std::time::Duration,
        operation: String,
        operation_type: String,
        target: String,
    },
    /// A wait was interrupted (Ctrl-C): `last` is the operation as last seen, which goes on in
    /// GKE; none when the wait was for a busy cluster and the call was never sent.
    #[error("interrupted: {}", match last {
        Some(op) => format!("operation {} ({}) is still running in GKE (last status {})", op.name, op.operation_type, op.status),
        None => "the call was not sent: it was waiting for the cluster to be free".to_string(),
    })]
    Interrupted { last: Option<Box<Operation>> },
    /// Transport failure, timeout, or credentials problem.
    #[error("{0}")]
    Transport(String),
    #[error("credentials: {0}")]
    Auth(String),
}

pub type GkeResult<T> = Result<T, GkeError>;

impl GkeError {
    /// A failed operation caused by a lack of capacity (GCE stockout, exhausted resource pool).
    pub fn is_stockout(&self) -> bool {
        match self {
            GkeError::OperationFailed { message, .. } => {
                let m = message.to_ascii_uppercase();
                m.contains("STOCKOUT")
                    || m.contains("ZONE_RESOURCE_POOL_EXHAUSTED")
                    || m.contains("DOES NOT HAVE ENOUGH RESOURCES")
                    || m.contains("LACK OF CAPACITY")
                    || m.contains("REQUESTED RESOURCE IS EXHAUSTED")
            }
            _ => false,
        }
    }

    /// What the user can do about this error, when there is something specific to say.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            e if e.is_stockout() => Some(
                "Google Compute Engine has no capacity for this machine type in the zone right \
                 now. Try again later, use another zone, use a reservation, or rely on the DWS \
                 flex-start pool (Plan B), which queues for capacity. A pool left in ERROR status \
                 is replaced on the next apply.",
            ),
            GkeError::Forbidden { message } if message.to_ascii_lowercase().contains("quota") => {
                Some(
                    "The project lacks quota for this request: request a quota increase in the \
                     Cloud console (IAM & Admin > Quotas) or reduce the node count.",
                )
            }
            GkeError::Forbidden { .. } => Some(
                "The credentials lack permission: the account needs roles/container.admin (or \
                 container.clusterAdmin) on the project.",
            ),
            GkeError::Auth(_) => Some(
                "Run `gcloud auth application-default login`, or point \
                 GOOGLE_APPLICATION_CREDENTIALS at a credentials file.",
            ),
            GkeError::Conflict { .. } => {
                Some("The resource changed since it was read: plan again and re-apply.")
            }
            GkeError::OperationFailed { message, .. }
                if message.contains("Flex start node pools don't support TPUs") =>
            {
                Some(
                    "This GKE version rejects TPU flex-start pools with queued provisioning: \
                     drop queued provisioning (flex-start only) or use a newer GKE version.",
                )
            }
            GkeError::Api { message, .. }
                if message.contains("Flex start node pools don't support TPUs") =>
            {
                Some(
                    "This GKE version rejects TPU flex-start pools with queued provisioning: \
                     drop queued provisioning (flex-start only) or use a newer GKE version.",
                )
            }
            _ => None,
        }
    }
}

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
    /// How [`wait_operation`] polls this API's operations.
    fn poll_config(&self) -> PollConfig {
        PollConfig::default()
    }
}
