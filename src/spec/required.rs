//! Every missing required key at once. Decoding stops at the first missing key (serde reports
//! one); this walks the document beside the spec's JSON Schema, so that an empty file names
//! `project`, `location` and `cluster` in one run.

use std::sync::LazyLock;

use serde_json::Value;

use super::diag::{Diagnostic, Diagnostics};
use super::node::{Node, NodeKind, Path};

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    serde_json::to_value(schemars::schema_for!(super::types::Spec)).unwrap_or(Value::Null)
});

/// The diagnostic for a missing key, as decoding words it (so that the two never both appear).
pub fn missing_key(key: &str, path: &Path) -> Diagnostic {
    let at = if path.0.is_empty() {
        "the spec".to_string()
    } else {
        format!("`{path}`")
    };
    Diagnostic::error(format!("missing required key `{key}` in {at}")).help(format!("add `{key}:`"))
}

/// Pushes a diagnostic for each required key missing anywhere in `root`.
pub fn check(root: &Node, diags: &mut Diagnostics) {
    walk(root, &SCHEMA, &Path::root(), diags);
}

/// The object schema `schema` stands for: `$ref` followed, `Option<T>`'s `anyOf` unwrapped.
fn resolve(schema: &Value) -> &Value {
    let mut at = schema;
    for _ in 0..8 {
        if let Some(reference) = at.get("$ref").and_then(Value::as_str) {
            let name = reference.trim_start_matches("#/$defs/");
            match SCHEMA.pointer(&format!("/$defs/{name}")) {
                Some(def) => at = def,
                None => return at,
            }
        } else if let Some(options) = at.get("anyOf").and_then(Value::as_array) {
            match options
                .iter()
                .find(|o| o.get("type") != Some(&Value::from("null")))
            {
                Some(option) => at = option,
                None => return at,
            }
        } else {
            return at;
        }
    }
    at
}

fn walk(node: &Node, schema: &Value, path: &Path, diags: &mut Diagnostics) {
    let schema = resolve(schema);
    match &node.kind {
        NodeKind::Map(entries) => {
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for key in required.iter().filter_map(Value::as_str) {
                    if !entries.iter().any(|(k, _)| k.name == key) {
                        diags.push(missing_key(key, path).at(Some(node.span)));
                    }
                }
            }
            let Some(properties) = schema.get("properties") else {
                return;
            };
            for (key, child) in entries {
                if let Some(child_schema) = properties.get(&key.name) {
                    walk(child, child_schema, &path.key(key.name.clone()), diags);
                }
            }
        }
        NodeKind::Seq(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item, item_schema, &path.index(i), diags);
                }
            }
        }
        _ => {}
    }
}
