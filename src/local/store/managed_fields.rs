//! `metadata.managedFields`: which manager owns which fields, encoded as the API server does
//! (FieldsV1).

use serde_json::{Map, Value, json};

use super::{FieldPath, FieldSet};

/// How a write is recorded in `managedFields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ManagedEntry {
    pub(super) manager: String,
    pub(super) operation: Operation,
    pub(super) api_version: String,
    pub(super) time: String,
    pub(super) subresource: Option<String>,
    pub(super) fields: FieldSet,
}

impl ManagedEntry {
    pub(super) fn is(&self, manager: &str, operation: Operation) -> bool {
        self.manager == manager && self.operation == operation && self.subresource.is_none()
    }
}

pub(super) fn managed_entries(object: &Value) -> Vec<ManagedEntry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| ManagedEntry {
                    manager: e["manager"].as_str().unwrap_or_default().to_string(),
                    operation: if e["operation"] == "Apply" {
                        Operation::Apply
                    } else {
                        Operation::Update
                    },
                    api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                    time: e["time"].as_str().unwrap_or_default().to_string(),
                    subresource: e["subresource"].as_str().map(str::to_string),
                    fields: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn set_managed_entries(object: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation.name(),
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if let Some(s) = &e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Field paths as FieldsV1 (`{"f:spec": {"f:suspend": {}}}`).
pub(super) fn to_fields_v1(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    // Longer paths first, so that a leaf that is also a parent gets its `.` marker.
    for path in fields.iter().rev() {
        let mut node = &mut root;
        for key in path {
            node = node
                .entry(format!("f:{key}"))
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("built as objects");
        }
        if path.is_empty() {
            continue;
        }
        if !node.is_empty() {
            node.insert(".".into(), json!({}));
        }
    }
    Value::Object(root)
}

pub(super) fn from_fields_v1(value: &Value) -> FieldSet {
    fn walk(node: &Map<String, Value>, path: &mut FieldPath, out: &mut FieldSet) {
        let children: Vec<(&String, &Value)> =
            node.iter().filter(|(k, _)| k.starts_with("f:")).collect();
        if (children.is_empty() || node.contains_key(".")) && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, v) in children {
            path.push(k[2..].to_string());
            if let Some(child) = v.as_object() {
                walk(child, path, out);
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Some(map) = value.as_object() {
        walk(map, &mut Vec::new(), &mut out);
    }
    out
}
