//! What GKE refuses in a cluster's `autoscaling` (`ClusterAutoscaling`), on create and on
//! `ClusterUpdate.desiredClusterAutoscaling`; sources in docs/gke-facts.md, "L8".

use serde_json::{Value, json};

use crate::emulator::rpc::ApiError;

/// Node auto-provisioning creates node pools within cluster-wide resource limits, and needs a
/// maximum for both `cpu` and `memory` (GB) to be turned on.
pub(super) fn check_cluster_autoscaling(autoscaling: &Value, field: &str) -> Result<(), ApiError> {
    if autoscaling
        .get("enableNodeAutoprovisioning")
        .and_then(Value::as_bool)
        != Some(true)
    {
        return Ok(());
    }
    let has_maximum = |resource: &str| {
        resource_limits(autoscaling).iter().any(|limit| {
            limit.get("resourceType").and_then(Value::as_str) == Some(resource)
                && count(limit.get("maximum")) > 0
        })
    };
    let missing: Vec<&str> = ["cpu", "memory"]
        .into_iter()
        .filter(|r| !has_maximum(r))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_field(
        format!("{field}.resource_limits"),
        format!(
            "Node auto-provisioning needs resource limits with a maximum for both cpu and memory; \
             missing: {}. Add resourceLimits entries {{resourceType: \"cpu\", maximum: N}} and \
             {{resourceType: \"memory\", maximum: GB}}.",
            missing.join(", ")
        ),
    ))
}

/// The cluster's autoscaling after `desiredClusterAutoscaling`: the desired settings replace the
/// current ones, except that a desired setting which turns auto-provisioning on without naming
/// limits keeps the current limits (gcloud's update sends limits only when flags give them).
pub(super) fn updated_cluster_autoscaling(current: Option<&Value>, desired: &Value) -> Value {
    let mut next = desired.clone();
    let turns_on = desired
        .get("enableNodeAutoprovisioning")
        .and_then(Value::as_bool)
        == Some(true);
    if turns_on
        && resource_limits(desired).is_empty()
        && let Some(limits) = current.map(resource_limits).filter(|l| !l.is_empty())
        && next.is_object()
    {
        next["resourceLimits"] = json!(limits);
    }
    next
}

fn resource_limits(autoscaling: &Value) -> Vec<Value> {
    autoscaling
        .get("resourceLimits")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// An int64 as the wire layer keeps it (a string) or as a number.
fn count(value: Option<&Value>) -> i64 {
    match value {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(v) => v.as_i64().unwrap_or(0),
        None => 0,
    }
}
