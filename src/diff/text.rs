//! Canonical YAML (sorted keys, block style) and unified diffs of it. Colour is the renderer's job.

use serde_json::Value;
use similar::TextDiff;

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

/// Whether a string is too long to show on one line of [`one_line`]'s width `max`: it spans lines
/// or is longer than `max` characters once quoted.
pub fn is_long_text(text: &str, max: usize) -> bool {
    text.contains('\n') || Value::String(text.to_string()).to_string().chars().count() > max
}

/// The size of a change of text, for the line that names the field: `+3 -1 lines (40 -> 42
/// lines)`, or for one line of text `250 -> 262 characters`.
pub fn text_change_size(before: &str, after: &str) -> String {
    let lines = |text: &str| text.lines().count();
    if !before.contains('\n') && !after.contains('\n') {
        return format!(
            "{} -> {} characters",
            before.chars().count(),
            after.chars().count()
        );
    }
    let diff = TextDiff::from_lines(before, after);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    format!(
        "+{added} -{removed} lines ({} -> {} lines)",
        lines(before),
        lines(after)
    )
}

/// The value with every object's keys sorted, so that text output does not depend on the order a
/// server or a spec happened to use.
pub fn canonical(value: &Value) -> Value {
    canonical_owned(value.clone())
}

/// [`canonical`] of a value the caller is done with (sorted in place, not copied).
pub fn canonical_owned(mut value: Value) -> Value {
    sort_keys(&mut value);
    value
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
    fn a_text_change_is_sized_in_lines_or_characters() {
        assert_eq!(
            text_change_size("a\nb\nc\n", "a\nB\nc\nd\n"),
            "+2 -1 lines (3 -> 4 lines)"
        );
        assert_eq!(text_change_size("abc", "abcd"), "3 -> 4 characters");
        assert!(is_long_text("one\ntwo", 60));
        assert!(!is_long_text("short", 60));
        assert!(is_long_text(&"x".repeat(60), 60));
    }

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
