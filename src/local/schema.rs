//! What the API server does with a CustomResourceDefinition's structural schema, for the local
//! object store: fill in `default:` values (wherever the parent exists, as the apiserver does on
//! every write) and report fields the schema does not declare (strict field validation, which
//! gkq's server-side applies ask for). The rules follow the apiserver's structural defaulting:
//! a property's default is set when the property is absent and its parent object exists; objects
//! created by a default get their own children's defaults too; `additionalProperties` and
//! `items` schemas apply to every value and element; `x-kubernetes-preserve-unknown-fields`
//! allows undeclared fields below it. The root's `apiVersion`, `kind` and `metadata` are the
//! server's own and are never checked here.

use serde_json::{Map, Value};

/// The `openAPIV3Schema` of `version` in a CRD, if it has one.
pub fn version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .pointer("/schema/openAPIV3Schema")
}

/// Fills in schema defaults in `object` (a whole object; `metadata` at the root is skipped).
pub fn apply_defaults(schema: &Value, object: &mut Value) {
    walk_defaults(schema, object, true);
}

fn walk_defaults(schema: &Value, value: &mut Value, root: bool) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, child) in properties {
                    if root && key == "metadata" {
                        continue;
                    }
                    if !map.contains_key(key)
                        && let Some(default) = child.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                    if let Some(v) = map.get_mut(key) {
                        walk_defaults(child, v, false);
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let declared = schema.get("properties").and_then(Value::as_object);
                for (key, v) in map.iter_mut() {
                    if !declared.is_some_and(|d| d.contains_key(key)) {
                        walk_defaults(additional, v, false);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    walk_defaults(item_schema, item, false);
                }
            }
        }
        _ => {}
    }
}

/// Paths (`.spec.foo`) of fields in `object` that the schema does not declare.
pub fn unknown_fields(schema: &Value, object: &Value) -> Vec<String> {
    problems(schema, object)
        .into_iter()
        .filter_map(|p| {
            p.strip_suffix(": field not declared in schema")
                .map(str::to_string)
        })
        .collect()
}

/// What the API server would refuse in `object`: fields the schema does not declare, and
/// values of the wrong type (`.spec: expected object, got string`).
pub fn problems(schema: &Value, object: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_unknown(schema, object, "", true, &mut found);
    found
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value whose JSON type the schema does not allow (null is pruned by the server, so allowed).
fn type_error(schema: &Value, value: &Value, path: &str) -> Option<String> {
    let expected = schema.get("type")?.as_str()?;
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true);
    let ok = match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string() || (int_or_string && value.is_number()),
        "integer" => value.is_i64() || value.is_u64() || (int_or_string && value.is_string()),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    (!ok && !value.is_null())
        .then(|| format!("{path}: expected {expected}, got {}", type_name(value)))
}

fn walk_unknown(schema: &Value, value: &Value, path: &str, root: bool, found: &mut Vec<String>) {
    if let Some(error) = type_error(schema, value, path) {
        found.push(error);
        return;
    }
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let embedded = schema
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                == Some(true);
            for (key, v) in map {
                let child_path = format!("{path}.{key}");
                if (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
                {
                    continue;
                }
                match properties.and_then(|p| p.get(key)) {
                    Some(child) => walk_unknown(child, v, &child_path, false, found),
                    None => match additional {
                        Some(a) if a.is_object() => walk_unknown(a, v, &child_path, false, found),
                        Some(Value::Bool(true)) => {}
                        _ if preserves_unknown(schema) => {}
                        // A schema without properties (`type: object` alone) says nothing.
                        _ if properties.is_none() && additional.is_none() => {}
                        _ => found.push(format!("{child_path}: field not declared in schema")),
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk_unknown(item_schema, item, &format!("{path}[{i}]"), false, found);
                }
            }
        }
        _ => {}
    }
}

/// The part of a schema that carries defaults: every node on a path to a `default`, with its
/// `type`, and `x-kubernetes-preserve-unknown-fields: true` on every object node kept (so that
/// strict field validation is off for what was cut). `None` when nothing below has a default.
pub fn defaults_only(schema: &Value) -> Option<Value> {
    let mut out = Map::new();
    let mut keep = false;
    if let Some(default) = schema.get("default") {
        out.insert("default".into(), default.clone());
        keep = true;
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let kept: Map<String, Value> = properties
            .iter()
            .filter_map(|(k, v)| defaults_only(v).map(|v| (k.clone(), v)))
            .collect();
        if !kept.is_empty() {
            out.insert("properties".into(), Value::Object(kept));
            keep = true;
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = schema.get(key).filter(|c| c.is_object())
            && let Some(kept) = defaults_only(child)
        {
            out.insert(key.into(), kept);
            keep = true;
        }
    }
    if !keep {
        return None;
    }
    if let Some(t) = schema.get("type") {
        out.insert("type".into(), t.clone());
    }
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        out.insert(
            "x-kubernetes-preserve-unknown-fields".into(),
            Value::Bool(true),
        );
    }
    Some(Value::Object(out))
}

/// A CRD reduced to what the local store needs: names, scope, versions with their flags and
/// subresources, and schemas cut down to their defaults ([`defaults_only`]).
pub fn crd_defaults_only(crd: &Value) -> Value {
    let mut out = crd.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("annotations");
    }
    if let Some(versions) = out
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            let Some(v) = version.as_object_mut() else {
                continue;
            };
            v.remove("additionalPrinterColumns");
            let schema = v
                .get("schema")
                .and_then(|s| s.get("openAPIV3Schema"))
                .and_then(defaults_only)
                .unwrap_or_else(|| {
                    serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
                });
            v.insert(
                "schema".into(),
                serde_json::json!({"openAPIV3Schema": schema}),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cq_schema() -> Value {
        json!({"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "queueingStrategy": {"type": "string", "default": "BestEffortFIFO"},
            "flavorFungibility": {"type": "object", "default": {}, "properties": {
                "whenCanBorrow": {"type": "string", "default": "MayStopSearch"}}},
            "resourceGroups": {"type": "array", "items": {"type": "object", "properties": {
                "flavors": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}}}}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "v": {"type": "string", "default": "x"}}}}
        }}}})
    }

    #[test]
    fn defaults_fill_absent_fields_and_children_of_defaulted_objects() {
        let mut o = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n"},
            "spec": {"labels": {"a": {}}}});
        apply_defaults(&cq_schema(), &mut o);
        assert_eq!(o["spec"]["queueingStrategy"], "BestEffortFIFO");
        assert_eq!(
            o["spec"]["flavorFungibility"],
            json!({"whenCanBorrow": "MayStopSearch"})
        );
        assert_eq!(o["spec"]["labels"]["a"]["v"], "x");
        // a set value stays
        let mut o = json!({"spec": {"queueingStrategy": "StrictFIFO"}});
        apply_defaults(&cq_schema(), &mut o);
        assert_eq!(o["spec"]["queueingStrategy"], "StrictFIFO");
    }

    #[test]
    fn unknown_fields_are_reported_with_their_path() {
        let o = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n", "whatever": 1},
            "spec": {"queueingStrategy": "x", "resourceGroup": [], "resourceGroups": [{"flavors": [{"name": "a", "nam": "b"}]}]}});
        assert_eq!(
            unknown_fields(&cq_schema(), &o),
            vec![
                ".spec.resourceGroup".to_string(),
                ".spec.resourceGroups[0].flavors[0].nam".to_string()
            ]
        );
    }

    #[test]
    fn defaults_only_keeps_paths_to_defaults_and_relaxes_validation() {
        let cut = defaults_only(&cq_schema()).unwrap();
        assert!(
            cut.pointer("/properties/spec/properties/resourceGroups")
                .is_none()
        );
        assert_eq!(
            cut.pointer("/properties/spec/properties/queueingStrategy/default"),
            Some(&json!("BestEffortFIFO"))
        );
        let mut a = json!({"spec": {"labels": {"a": {}}, "other": 1}});
        let mut b = a.clone();
        apply_defaults(&cq_schema(), &mut a);
        apply_defaults(&cut, &mut b);
        assert_eq!(a, b);
        assert!(unknown_fields(&cut, &b).is_empty());
    }

    #[test]
    fn values_of_the_wrong_type_are_refused() {
        let o = json!({"spec": {"queueingStrategy": 1, "resourceGroups": {"a": 1}}});
        assert_eq!(
            problems(&cq_schema(), &o),
            vec![
                ".spec.queueingStrategy: expected string, got integer".to_string(),
                ".spec.resourceGroups: expected array, got object".to_string()
            ]
        );
        assert_eq!(
            problems(&cq_schema(), &json!({"spec": "x"})),
            vec![".spec: expected object, got string".to_string()]
        );
    }
}
