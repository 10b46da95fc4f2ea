//! Canonical YAML (sorted keys, block style) and unified diffs of it. Colour is the renderer's job.

use serde_json::Value;
use similar::TextDiff;

/// The value with every object's keys sorted, so that text output does not depend on the order a
/// server or a spec happened to use.
/// A value on one line for messages: `(absent)` for none, JSON cut to `max` characters.
pub fn one_line(value: Option<&Value>, max: usize) -> String {
    match value {
        None => "(absent)".to_string(),
        Some(value) => {
            let text = value.to_string();
            if text.chars().count() > max {
                format!(
                    "{}…",
                    text.chars().take(max.saturating_sub(1)).collect::<String>()
                )
            } else {
                text
            }
        }
    }
}

pub fn canonical(value: &Value) -> Value {
    let mut sorted = value.clone();
    sort_keys(&mut sorted);
    sorted
}

/// [`canonical`] in place.
fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// Canonical YAML of a value. Should YAML serialisation ever fail, pretty JSON (also valid YAML)
/// stands in, so a plan is never lost to a rendering problem.
pub fn to_yaml(value: &Value) -> String {
    to_yaml_owned(value.clone())
}

/// [`to_yaml`] of a value the caller is done with.
pub fn to_yaml_owned(mut value: Value) -> String {
    sort_keys(&mut value);
    match serde_saphyr::to_string(&value) {
        Ok(text) => text,
        Err(_) => serde_json::to_string_pretty(&value).unwrap_or_default() + "\n",
    }
}

/// A unified diff (`--- live`, `+++ desired`, three lines of context) of the canonical YAML of two
/// values; absent means empty text. Empty when the texts are equal.
pub fn unified_yaml_diff(live: Option<&Value>, desired: Option<&Value>) -> String {
    unified_yaml_diff_owned(live.cloned(), desired.cloned())
}

/// [`unified_yaml_diff`] of values the caller is done with.
pub fn unified_yaml_diff_owned(live: Option<Value>, desired: Option<Value>) -> String {
    let text = |value: Option<Value>| match value {
        None | Some(Value::Null) => String::new(),
        Some(value) => to_yaml_owned(value),
    };
    unified_diff(&text(live), &text(desired))
}

pub fn unified_diff(before: &str, after: &str) -> String {
    if before == after {
        return String::new();
    }
    TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header("live", "desired")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_is_sorted_and_block_style() {
        let value = json!({"b": 1, "a": {"d": [1, 2], "c": "yes"}});
        assert_eq!(
            to_yaml(&value),
            "a:\n  c: \"yes\"\n  d:\n  - 1\n  - 2\nb: 1\n"
        );
    }

    #[test]
    fn diff_has_headers_and_only_changed_lines_marked() {
        let diff = unified_yaml_diff(
            Some(&json!({"a": 1, "b": 2})),
            Some(&json!({"a": 1, "b": 3})),
        );
        assert_eq!(
            diff,
            "--- live\n+++ desired\n@@ -1,2 +1,2 @@\n a: 1\n-b: 2\n+b: 3\n"
        );
        assert_eq!(
            unified_yaml_diff(Some(&json!({"a": 1})), Some(&json!({"a": 1}))),
            ""
        );
        assert!(unified_yaml_diff(None, Some(&json!({"a": 1}))).contains("+a: 1"));
    }
}
