//! Reading the live state: what GKE and Kubernetes say exists now, into
//! [`LiveState`](crate::model::live::LiveState). Reading is I/O behind traits (`GkeApi`,
//! `KubeApi`).
//!
//! GKE is read in one call: `clusters.get` returns the cluster with every node pool
//! (docs/gke.md section d). Kubernetes is read by the Kubernetes observer (the Kubernetes half of
//! the engine): it fills `KubeLive::Observed` with each desired object's live state and the
//! server's dry-run prediction, and with every object gkq owns, keyed by address.

pub mod cluster;
pub mod gke;
pub mod kube;

pub use gke::observe_gke;

use serde_json::Value;

/// Drops `metadata.managedFields`: the plan never reads it (conflicts come from the server at
/// apply time), and it is often as large as the object itself.
pub(crate) fn without_bookkeeping(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.shift_remove("managedFields");
    }
    object
}
