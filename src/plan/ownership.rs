//! Ownership: gkq changes and deletes only what carries its labels.
//!
//! GKE: resource labels `managed-by: gkq` (and, when the spec names a stack, `gkq-stack: <stack>`)
//! on the cluster's `resourceLabels` or the node pool's `config.resourceLabels`.
//! Kubernetes: `app.kubernetes.io/managed-by: gkq` (and `gkq.dev/stack: <stack>`) in
//! `metadata.labels`. A resource of another stack is not ours even if gkq made it.
//!
//! Within one cluster, objects the agent applies also name their GkqStack
//! (`gkq.dev/owner: namespace/name`), and so do the cluster and node pools (the resource label
//! `gkq-owner`, in GKE's label syntax: `model::gke::owner_label_value`): a plan for another
//! stack, or a command run by hand, does not change or delete them, and says which stack owns
//! them (an ownership conflict).

use serde_json::Value;

use crate::model::gke::{owner_from_label, owner_label_value};
use crate::model::{
    GKE_MANAGED_BY_LABEL, GKE_OWNER_LABEL, GKE_STACK_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE,
    OWNER_ANNOTATION, STACK_LABEL,
};

/// How a blocked action names the stack that owns its object ([`owner_conflict`]); read back
/// by [`conflicting_owner`].
const OWNED_BY: &str = "it is owned by GkqStack ";

/// The GkqStack that owns a live Kubernetes object, if one does.
pub fn kube_owner(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(OWNER_ANNOTATION))
        .and_then(Value::as_str)
}

/// Why a plan for `owner` (a GkqStack, or `None` for a command) may not change or delete `live`:
/// another stack owns it. An object no stack owns is free to take.
pub fn owner_conflict(live: &Value, owner: Option<&str>) -> Option<String> {
    let holder = kube_owner(live)?;
    (Some(holder) != owner).then(|| {
        format!(
            "{OWNED_BY}{holder}: change it in that stack's repository, or remove it from this spec"
        )
    })
}

/// The `gkq-owner` label of a live cluster or node pool, if it has one.
fn gke_owner_label(resource: &Value) -> Option<&str> {
    resource
        .get("resourceLabels")
        .or_else(|| resource.pointer("/config/resourceLabels"))
        .and_then(|labels| labels.get(GKE_OWNER_LABEL))
        .and_then(Value::as_str)
}

/// Whether the live cluster or node pool belongs to the GkqStack `stack` (`namespace/name`).
pub fn gke_owned_by(resource: &Value, stack: &str) -> bool {
    gke_owner_label(resource) == Some(owner_label_value(stack).as_str())
}

/// [`owner_conflict`] for a live cluster or node pool: another stack's `gkq-owner` label.
pub fn gke_owner_conflict(resource: &Value, owner: Option<&str>) -> Option<String> {
    let holder = gke_owner_label(resource)?;
    let ours = owner.map(owner_label_value);
    (Some(holder) != ours.as_deref()).then(|| {
        let holder = owner_from_label(holder);
        format!(
            "{OWNED_BY}{holder}: change it in that stack's repository, or remove it from this spec"
        )
    })
}

/// Whether a field change of a cluster or node pool only concerns its `gkq-owner` label (see
/// [`is_owner_only`]).
pub fn is_gke_owner_only(change: &crate::diff::FieldChange) -> bool {
    let label = format!("resourceLabels.{GKE_OWNER_LABEL}");
    change.path == label || change.path == format!("config.{label}")
}

/// Whether a field change only concerns the owner annotation: a plan made by hand (no owner)
/// of an object a stack owns does not count its missing annotation as a change, so `plan` and
/// `status` show the object unchanged when its fields match the spec.
pub fn is_owner_only(change: &crate::diff::FieldChange) -> bool {
    if change.path == format!("metadata.annotations[\"{OWNER_ANNOTATION}\"]") {
        return true;
    }
    let only_owner = |v: &Option<Value>| {
        v.as_ref()
            .and_then(Value::as_object)
            .is_none_or(|m| m.keys().all(|k| k == OWNER_ANNOTATION))
    };
    change.path == "metadata.annotations" && only_owner(&change.before) && only_owner(&change.after)
}

/// The stack a blocked action's object belongs to, when it was blocked by [`owner_conflict`].
pub fn conflicting_owner(blocked: &str) -> Option<&str> {
    blocked
        .strip_prefix(OWNED_BY)
        .and_then(|rest| rest.split(':').next())
}

fn labels_say_ours(
    labels: Option<&Value>,
    managed_by: &str,
    stack_label: &str,
    stack: Option<&str>,
) -> bool {
    let Some(labels) = labels else { return false };
    let value = |key: &str| labels.get(key).and_then(Value::as_str);
    value(managed_by) == Some(MANAGED_BY_VALUE)
        && stack.is_none_or(|stack| value(stack_label) == Some(stack))
}

/// Whether a live cluster or node pool is gkq's (of `stack`, when given).
pub fn gke_owned(resource: &Value, stack: Option<&str>) -> bool {
    let labels = resource
        .get("resourceLabels")
        .or_else(|| resource.pointer("/config/resourceLabels"));
    labels_say_ours(labels, GKE_MANAGED_BY_LABEL, GKE_STACK_LABEL, stack)
}

/// Whether a live Kubernetes object is gkq's (of `stack`, when given).
pub fn kube_owned(object: &Value, stack: Option<&str>) -> bool {
    labels_say_ours(
        object.pointer("/metadata/labels"),
        MANAGED_BY_LABEL,
        STACK_LABEL,
        stack,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn another_stacks_object_is_a_conflict_and_names_the_stack() {
        let of = |owner: Option<&str>| match owner {
            Some(o) => json!({"metadata": {"annotations": {"gkq.dev/owner": o}}}),
            None => json!({"metadata": {}}),
        };
        assert_eq!(owner_conflict(&of(None), Some("a/s")), None);
        assert_eq!(owner_conflict(&of(Some("a/s")), Some("a/s")), None);
        let why = owner_conflict(&of(Some("b/t")), Some("a/s")).unwrap();
        assert_eq!(conflicting_owner(&why), Some("b/t"));
        let by_hand = owner_conflict(&of(Some("b/t")), None).unwrap();
        assert_eq!(conflicting_owner(&by_hand), Some("b/t"));
        assert_eq!(conflicting_owner("deletion protection"), None);
    }

    #[test]
    fn only_the_owner_annotation_is_not_a_change_by_hand() {
        use crate::diff::{ChangeEffect, FieldChange, UpdateMethod};
        let change = |path: &str, before: Value, after: Option<Value>| FieldChange {
            path: path.to_string(),
            before: Some(before),
            after,
            effect: ChangeEffect::InPlace(UpdateMethod::ServerSideApply),
        };
        assert!(is_owner_only(&change(
            "metadata.annotations[\"gkq.dev/owner\"]",
            json!("a/s"),
            None
        )));
        assert!(is_owner_only(&change(
            "metadata.annotations",
            json!({"gkq.dev/owner": "a/s"}),
            None
        )));
        assert!(!is_owner_only(&change(
            "metadata.annotations",
            json!({"gkq.dev/owner": "a/s", "team": "x"}),
            None
        )));
        assert!(!is_owner_only(&change("spec.cohort", json!("a"), None)));
    }

    #[test]
    fn ownership_needs_the_label_and_the_stack() {
        let pool = json!({"config": {"resourceLabels": {"managed-by": "gkq", "gkq-stack": "a"}}});
        assert!(gke_owned(&pool, Some("a")));
        assert!(gke_owned(&pool, None));
        assert!(!gke_owned(&pool, Some("b")));
        assert!(!gke_owned(&json!({"config": {}}), None));
        let cluster = json!({"resourceLabels": {"managed-by": "terraform"}});
        assert!(!gke_owned(&cluster, None));
        let object = json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "a"}}});
        assert!(kube_owned(&object, Some("a")));
        assert!(!kube_owned(&object, Some("b")));
    }
}
