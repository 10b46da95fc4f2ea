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
use crate::vocab::object::Field;

/// A live object's fingerprint with its fields, by field path ([`fingerprint_with_fields`]).
pub type Fingerprint = (String, BTreeMap<String, String>);

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
) -> Fingerprint {
    with_fields(basis(addr, desired, live))
}

/// [`fingerprint_with_fields`] of a desired Kubernetes object, from the views of it and of the
/// live object ([`kube_view`]) that the caller compares anyway: the same answer, without making
/// them again.
pub fn kube_fingerprint_of_views(
    desired: &Value,
    desired_view: &Value,
    live_view: &Value,
) -> Fingerprint {
    let basis = match crate::diff::sensitive::as_stored_cow(desired) {
        Cow::Borrowed(desired) => kube_basis(desired, desired_view, live_view),
        // A Secret's `stringData` is compared as stored: its view is another one.
        Cow::Owned(stored) => kube_basis(&stored, &kube_view(&stored), live_view),
    };
    with_fields(basis)
}

/// [`fingerprint_with_fields`] of a desired Kubernetes object stored as it is written (no Secret
/// `stringData`), from the live values at the paths it sets (the `live_view` of
/// [`owned`]`(kube_view(desired), kube_view(live))`), which a caller that compared the two has
/// already: the same answer, without walking them again.
pub fn kube_fingerprint_of_basis(desired: &Value, mut basis: Value) -> Fingerprint {
    crate::diff::sensitive::mask_for_fingerprint(desired, &mut basis);
    with_fields(basis)
}

/// The hash of a basis and of each of its parts ([`fields_of`]), each part written as JSON once:
/// the basis's text is its parts' texts put together, as `serde_json` writes an object.
fn with_fields(basis: Value) -> Fingerprint {
    let basis = canonical_owned(basis);
    let Value::Object(top) = &basis else {
        return (hash(&basis), BTreeMap::new());
    };
    let mut fields = BTreeMap::new();
    // Each part is written once, straight into the whole text, and hashed where it lies.
    let mut text = Vec::from(*b"{");
    let mut part = |text: &mut Vec<u8>, path: String, value: &Value| {
        let start = text.len();
        // Writing a `Value` to memory cannot fail.
        let _ = serde_json::to_writer(&mut *text, value);
        fields.insert(path, short_hash_of_text(&text[start..]));
    };
    for (i, (key, value)) in top.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        push_key(&mut text, key);
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                text.push(b'{');
                for (j, (child, child_value)) in inner.iter().enumerate() {
                    if j > 0 {
                        text.push(b',');
                    }
                    push_key(&mut text, child);
                    part(&mut text, format!("{key}.{child}"), child_value);
                }
                text.push(b'}');
            }
            other => part(&mut text, key.clone(), other),
        }
    }
    text.push(b'}');
    (hash_of_text(&text), fields)
}

/// An object's key as `serde_json` writes it, with its colon.
fn push_key(text: &mut Vec<u8>, key: &str) {
    // Writing a string to memory cannot fail.
    let _ = serde_json::to_writer(&mut *text, key);
    text.push(b':');
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
    json!({"name": live.field("name"), "labels": labels})
}

/// The short hash of a part of a basis whose keys are sorted already.
fn short_hash(value: &Value) -> String {
    short_hash_of_text(&serde_json::to_vec(value).unwrap_or_default())
}

/// [`short_hash`] of a part as written.
fn short_hash_of_text(text: &[u8]) -> String {
    hex(&Sha256::digest(text)[..4], String::with_capacity(8))
}

/// The hash of a basis whose keys are sorted already ([`canonical_owned`]).
fn hash(value: &Value) -> String {
    hash_of_text(&serde_json::to_vec(value).unwrap_or_default())
}

/// [`hash`] of a basis as written.
fn hash_of_text(text: &[u8]) -> String {
    let mut out = String::with_capacity(23);
    out.push_str("sha256:");
    hex(&Sha256::digest(text)[..8], out)
}

/// `bytes` in lower-case hex, after `out`.
fn hex(bytes: &[u8], mut out: String) -> String {
    use std::fmt::Write;
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_basis_written_once_hashes_as_it_and_its_parts_written_alone() {
        for basis in [
            json!({"metadata": {"labels": {"a": "1", "b\"q": "2"}, "name": "x"},
                "spec": {"resourceGroups": [{"flavors": [{"name": "f"}]}], "suspend": true},
                "data": {}, "kind": "ConfigMap", "list": [1, "two", null], "z": {"y": {"x": 1.5}}}),
            json!({}),
            json!({"only": {}}),
            json!("not an object"),
            json!(null),
        ] {
            let sorted = canonical_owned(basis.clone());
            assert_eq!(
                with_fields(basis),
                (hash(&sorted), fields_of(&sorted)),
                "{sorted}"
            );
        }
    }

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
