//! Ownership: gkq changes and deletes only what carries its labels.
//!
//! GKE: resource labels `managed-by: gkq` (and, when the spec names a stack, `gkq-stack: <stack>`)
//! on the cluster's `resourceLabels` or the node pool's `config.resourceLabels`.
//! Kubernetes: `app.kubernetes.io/managed-by: gkq` (and `gkq.dev/stack: <stack>`) in
//! `metadata.labels`. A resource of another stack is not ours even if gkq made it.

use serde_json::Value;

use crate::model::{
    GKE_MANAGED_BY_LABEL, GKE_STACK_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, STACK_LABEL,
};

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
