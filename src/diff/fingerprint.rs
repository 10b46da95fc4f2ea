//! Fingerprints: what a plan's action was based on, hashed, so that apply can refuse to act on
//! something that changed since the plan was made.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::compare::owned;
use super::gke::{diff_cluster, diff_node_pool};
use super::normalize::{Dialect, is_ignored_gke_label, kube_view};
use super::text::canonical_owned;
use crate::addr::{ResourceAddr, ResourceKind};
use crate::model::{MANAGED_BY_LABEL, STACK_LABEL};

/// A short, stable hash of what gkq's plan for a resource was based on. The executor recomputes
/// it from a fresh read and refuses to act if it changed.
///
/// It covers what the action depends on, and nothing that other controllers or the server write:
/// - GKE, with a desired body: the live values at the paths the spec owns (so server-side
///   changes to fields gkq ignores, such as the autoscaler's node count or an auto-upgrade, do not
///   make a plan stale).
/// - GKE, deletes: the name and the resource labels (is it still the thing gkq owns?).
/// - Kubernetes, with a desired object: the live values at the paths the desired object sets
///   (list elements up to those it sets), so status, Kueue admitting a job (which unsuspends it
///   and adds node selectors and tolerations) or another controller's fields do not make a plan
///   stale, while an edit of a field gkq sets does. Secret values count only as "equal to the
///   spec" or not (see [`crate::diff::sensitive`]).
/// - Kubernetes, deletes: the object's identity (uid) and gkq's ownership labels.
pub fn fingerprint(addr: &ResourceAddr, desired: Option<&Value>, live: &Value) -> String {
    hash(&canonical_owned(basis(addr, desired, live)))
}

/// [`fingerprint`] and [`fingerprint_fields`] from one walk of the live object, for the planner,
/// which records both for every action on something that exists.
pub fn fingerprint_with_fields(
    addr: &ResourceAddr,
    desired: Option<&Value>,
    live: &Value,
) -> (String, BTreeMap<String, String>) {
    with_fields(basis(addr, desired, live))
}

/// [`fingerprint_with_fields`] of a desired Kubernetes object, from the views of it and of the
/// live object ([`kube_view`]) that the caller compares anyway: the same answer, without making
/// them again.
pub fn kube_fingerprint_of_views(
    desired: &Value,
    desired_view: &Value,
    live_view: &Value,
) -> (String, BTreeMap<String, String>) {
    let basis = match crate::diff::sensitive::as_stored_cow(desired) {
        Cow::Borrowed(desired) => kube_basis(desired, desired_view, live_view),
        // A Secret's `stringData` is compared as stored: its view is another one.
        Cow::Owned(stored) => kube_basis(&stored, &kube_view(&stored), live_view),
    };
    with_fields(basis)
}

fn with_fields(basis: Value) -> (String, BTreeMap<String, String>) {
    let basis = canonical_owned(basis);
    (hash(&basis), fields_of(&basis))
}

/// The parts of [`fingerprint`]'s basis, each with its own short hash, keyed by field path
/// (`spec.resourceGroups`, `metadata.labels`): when a plan turns out stale, these name the
/// fields that changed.
pub fn fingerprint_fields(
    addr: &ResourceAddr,
    desired: Option<&Value>,
    live: &Value,
) -> BTreeMap<String, String> {
    fields_of(&canonical_owned(basis(addr, desired, live)))
}

/// Each part of a basis (keys sorted, [`canonical_owned`]) by field path, with its short hash.
fn fields_of(basis: &Value) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    if let Value::Object(top) = basis {
        for (key, value) in top {
            match value {
                Value::Object(inner) if !inner.is_empty() => {
                    for (child, child_value) in inner {
                        fields.insert(format!("{key}.{child}"), short_hash(child_value));
                    }
                }
                other => {
                    fields.insert(key.clone(), short_hash(other));
                }
            }
        }
    }
    fields
}

/// The fields whose hashes differ between two [`fingerprint_fields`] answers (present in either).
pub fn changed_fields(
    before: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Vec<String> {
    before
        .keys()
        .chain(now.keys())
        .filter(|k| before.get(*k) != now.get(*k))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn basis(addr: &ResourceAddr, desired: Option<&Value>, live: &Value) -> Value {
    match (&addr.kind, desired) {
        (ResourceKind::GkeCluster, Some(desired)) => diff_cluster(desired, live).live_view,
        (ResourceKind::GkeNodePool, Some(desired)) => diff_node_pool(desired, live).live_view,
        (ResourceKind::GkeCluster, None) => identity(live, "/resourceLabels"),
        (ResourceKind::GkeNodePool, None) => identity(live, "/config/resourceLabels"),
        (_, Some(desired)) => {
            let desired = crate::diff::sensitive::as_stored_cow(desired);
            kube_basis(&desired, &kube_view(&desired), &kube_view(live))
        }
        (_, None) => {
            let labels: serde_json::Map<String, Value> = live
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|labels| {
                    labels
                        .iter()
                        .filter(|(k, _)| {
                            k.as_str() == MANAGED_BY_LABEL || k.as_str() == STACK_LABEL
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            json!({"metadata": {"uid": live.pointer("/metadata/uid"), "labels": labels}})
        }
    }
}

/// The basis of a desired Kubernetes object (`desired`, as stored) from its view and the live
/// object's: the live values at the paths the desired object sets, sensitive ones masked.
fn kube_basis(desired: &Value, desired_view: &Value, live_view: &Value) -> Value {
    let mut view = owned(desired_view, live_view, Dialect::Kube).live_view;
    crate::diff::sensitive::mask_for_fingerprint(desired, &mut view);
    view
}

fn identity(live: &Value, labels_pointer: &str) -> Value {
    let labels: serde_json::Map<String, Value> = live
        .pointer(labels_pointer)
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter(|(key, _)| !is_ignored_gke_label(key))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    json!({"name": live.get("name"), "labels": labels})
}

/// The short hash of a part of a basis whose keys are sorted already.
fn short_hash(value: &Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The hash of a basis whose keys are sorted already ([`canonical_owned`]).
fn hash(value: &Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_fingerprint_ignores_fields_the_spec_does_not_own() {
        let addr = ResourceAddr::gke_node_pool("p");
        let desired = json!({"name": "p", "autoscaling": {"enabled": true, "maxNodeCount": 4}});
        let live = json!({"name": "p", "autoscaling": {"enabled": true, "maxNodeCount": 4}, "initialNodeCount": 0, "status": "RUNNING"});
        let mut resized = live.clone();
        resized["initialNodeCount"] = json!(3);
        resized["status"] = json!("RECONCILING");
        assert_eq!(
            fingerprint(&addr, Some(&desired), &live),
            fingerprint(&addr, Some(&desired), &resized)
        );
        let mut changed = live.clone();
        changed["autoscaling"]["maxNodeCount"] = json!(2);
        assert_ne!(
            fingerprint(&addr, Some(&desired), &live),
            fingerprint(&addr, Some(&desired), &changed)
        );
        assert!(fingerprint(&addr, None, &live).starts_with("sha256:"));
    }

    #[test]
    fn kubernetes_fingerprints_ignore_what_kueue_and_the_server_write_and_name_what_changed() {
        let addr = ResourceAddr::ray_job("default", "train");
        let desired = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"suspend": true, "entrypoint": "python train.py",
                "rayClusterSpec": {"workerGroupSpecs": [{"replicas": 1, "template": {"spec": {
                    "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"},
                    "tolerations": [{"key": "google.com/tpu", "operator": "Exists"}]}}}]}}});
        let live = {
            let mut l = desired.clone();
            l["metadata"]["uid"] = json!("u1");
            l["metadata"]["resourceVersion"] = json!("10");
            l
        };
        // Kueue admits it: unsuspends, injects the flavor's node selector and toleration, and
        // the status moves on.
        let mut admitted = live.clone();
        admitted["metadata"]["resourceVersion"] = json!("14");
        admitted["spec"]["suspend"] = json!(false);
        let template =
            &mut admitted["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"];
        template["nodeSelector"]["cloud.google.com/gke-nodepool"] = json!("dws-pool");
        template["tolerations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": "cloud.google.com/gke-queued", "operator": "Exists"}));
        admitted["status"] = json!({"jobDeploymentStatus": "Running"});
        assert_eq!(
            fingerprint(&addr, Some(&desired), &live),
            fingerprint(&addr, Some(&desired), &admitted)
        );
        // Someone edits a field gkq sets.
        let mut edited = admitted.clone();
        edited["spec"]["entrypoint"] = json!("python other.py");
        assert_ne!(
            fingerprint(&addr, Some(&desired), &live),
            fingerprint(&addr, Some(&desired), &edited)
        );
        assert_eq!(
            changed_fields(
                &fingerprint_fields(&addr, Some(&desired), &live),
                &fingerprint_fields(&addr, Some(&desired), &edited)
            ),
            ["spec.entrypoint"]
        );
        // A delete depends on the object's identity only.
        assert_eq!(
            fingerprint(&addr, None, &live),
            fingerprint(&addr, None, &edited)
        );
        let mut recreated = live.clone();
        recreated["metadata"]["uid"] = json!("u2");
        assert_ne!(
            fingerprint(&addr, None, &live),
            fingerprint(&addr, None, &recreated)
        );
    }
}
