//! Status conditions as the simulated controllers write them.

use serde_json::{Value, json};

use super::ids::timestamp;

/// Sets `status.conditions[type]`, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(
    object: &mut Value,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: u64,
) {
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = object["status"]["conditions"].as_array_mut() else {
        return;
    };
    let time = match conditions.iter().find(|c| c["type"] == kind) {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(timestamp(now)),
    };
    let condition = json!({"type": kind, "status": status, "reason": reason,
        "message": message, "lastTransitionTime": time});
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

/// `value[key]` as a map, created when absent or null; `None` when `value` is not a map or the
/// key holds something else (the simulation never panics on an odd object).
pub fn child_map<'a>(
    value: &'a mut Value,
    key: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let child = value
        .as_object_mut()?
        .entry(key)
        .or_insert_with(|| json!({}));
    if child.is_null() {
        *child = json!({});
    }
    child.as_object_mut()
}

pub fn remove_condition(object: &mut Value, kind: &str) {
    if let Some(conditions) = object
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        conditions.retain(|c| c["type"] != kind);
    }
}
