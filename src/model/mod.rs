//! The desired state: validated, rendered GKE requests and Kubernetes objects.
//!
//! `DesiredState` is what `gkq render` prints and what the plan compares with live state. It holds
//! no source spans and does no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::gke::ClusterRef;

/// Label (Kubernetes) and resource label (GKE) that mark what gkq owns.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "gkq";
/// Kubernetes label naming the stack (the spec's cluster) an object belongs to.
pub const STACK_LABEL: &str = "gkq.dev/stack";
/// GKE resource labels (lowercase keys, no dots or slashes allowed).
pub const GKE_MANAGED_BY_LABEL: &str = "managed-by";
pub const GKE_STACK_LABEL: &str = "gkq-stack";
/// The field manager gkq uses for server-side apply.
pub const FIELD_MANAGER: &str = "gkq";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredState {
    pub gke: GkeDesired,
    /// Kubernetes objects with apiVersion, kind and metadata, in dependency order.
    pub kubernetes: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GkeDesired {
    /// Where the cluster lives; not part of any request body.
    #[serde(rename = "ref")]
    pub cluster_ref: ClusterRef,
    /// The `cluster` of a `CreateClusterRequest`, exactly as `clusters.create` takes it. Its
    /// `nodePools` hold only the default pool; the spec's own pools are in `node_pools`.
    pub cluster: Value,
    /// `NodePool` bodies for `nodePools.create`, in spec order.
    pub node_pools: Vec<Value>,
    /// Whether the spec allows `gkq destroy` to delete the cluster.
    #[serde(default)]
    pub deletion_protection: bool,
}
