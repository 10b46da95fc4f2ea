//! Sensitive values: what never appears in a plan, a plan file, a log line or any other output.
//!
//! Two things are sensitive:
//! - the values of a Secret (`data` and `stringData`, key by key; the keys themselves are not);
//! - the value of every variable the spec declares `sensitive: true`, wherever it is used (it is
//!   replaced inside longer strings too, such as an entrypoint or a script).
//!
//! Shown values become markers: `(sensitive value #1a2b3c4d)`. The marker is an HMAC of the value
//! under a key drawn at random for each gkq process and never written anywhere: within one output
//! two equal values get the same marker, so a change is visible (`#1a2b3c4d -> #5e6f7a8b`), yet
//! a marker cannot be checked against guesses of the value, and markers of two runs do not
//! relate.
//!
//! What a plan needs to know about a sensitive value besides its marker is whether the live
//! value still equals the desired one ([`mask_for_fingerprint`]); that is what freshness checks
//! use, so fingerprints never hash a secret either.

use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::{Map, Value};

/// Placeholder for a sensitive value whose marker is not wanted (inside longer strings).
pub const REDACTED: &str = "(sensitive value)";

/// Kinds whose top-level maps hold sensitive values, by `apiVersion` and `kind`.
const SENSITIVE_MAPS: &[(&str, &str, &[&str])] = &[("v1", "Secret", &["data", "stringData"])];

/// The top-level maps of `object` whose values are sensitive (empty for most kinds).
pub fn sensitive_maps(object: &Value) -> &'static [&'static str] {
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    let kind = object.get("kind").and_then(Value::as_str);
    SENSITIVE_MAPS
        .iter()
        .find(|(v, k, _)| Some(*v) == api_version && Some(*k) == kind)
        .map(|(_, _, maps)| *maps)
        .unwrap_or(&[])
}

/// Whether a field of an object of `kind` (lowercase, as in addresses: `secret`) at the dotted
/// `path` holds sensitive values.
pub fn is_sensitive_path(kind: &str, path: &str) -> bool {
    SENSITIVE_MAPS
        .iter()
        .filter(|(_, k, _)| k.eq_ignore_ascii_case(kind))
        .flat_map(|(_, _, maps)| maps.iter())
        .any(|map| {
            path == *map
                || path
                    .strip_prefix(map)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
}

/// A Secret as the API server stores it: `stringData` folded into `data` (base64), so a desired
/// Secret and a live one compare key by key.
pub fn as_stored(object: &Value) -> Value {
    let mut object = object.clone();
    if sensitive_maps(&object).is_empty() {
        return object;
    }
    let Some(map) = object.as_object_mut() else {
        return object;
    };
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(data) = data.as_object_mut() {
            for (key, value) in string_data {
                let text = value.as_str().map(str::to_string).unwrap_or_default();
                data.insert(
                    key,
                    Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
    object
}

/// Replaces each sensitive value of a live fingerprint basis (`live`, in the shape of the
/// desired object) by whether it equals the desired value: all a freshness check needs.
pub fn mask_for_fingerprint(desired: &Value, live: &mut Value) {
    for map in sensitive_maps(desired) {
        let Some(entries) = live.get_mut(*map).and_then(Value::as_object_mut) else {
            continue;
        };
        for (key, value) in entries.iter_mut() {
            let same = desired.get(*map).and_then(|d| d.get(key)) == Some(value);
            *value = Value::String(if same { "equal to the spec" } else { "differs" }.into());
        }
    }
}

/// Hides sensitive values in what gkq shows and saves.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Values of variables declared sensitive, longest first (so that a value containing another
    /// is replaced whole).
    strings: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} sensitive value(s))", self.strings.len())
    }
}

fn marker_key() -> &'static ring::hmac::Key {
    static KEY: OnceLock<ring::hmac::Key> = OnceLock::new();
    KEY.get_or_init(|| {
        let rng = ring::rand::SystemRandom::new();
        ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            // The system's random source failing is not something a plan can work around; a
            // fixed key still hides values, it only makes markers comparable across runs.
            .unwrap_or_else(|_| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"gkq-markers"))
    })
}

/// The marker shown instead of `value`.
pub fn marker(value: &Value) -> Value {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let tag = ring::hmac::sign(marker_key(), text.as_bytes());
    let hex: String = tag.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Value::String(format!("(sensitive value #{hex})"))
}

/// Whether `value` is a marker this module wrote.
pub fn is_marker(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.starts_with("(sensitive value"))
}

impl Redactor {
    pub fn new(mut strings: Vec<String>) -> Self {
        strings.retain(|s| !s.is_empty());
        strings.sort_by_key(|s| std::cmp::Reverse(s.len()));
        strings.dedup();
        Redactor { strings }
    }

    /// Whether there is anything to hide besides Secrets.
    pub fn has_strings(&self) -> bool {
        !self.strings.is_empty()
    }

    /// `text` with every sensitive variable value replaced.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.strings {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    /// Replaces sensitive variable values in every string (and map key) of `value`.
    pub fn strings_in(&self, value: &mut Value) {
        if self.strings.is_empty() {
            return;
        }
        match value {
            Value::String(s)
                if self
                    .strings
                    .iter()
                    .any(|secret| s.contains(secret.as_str())) =>
            {
                *s = self.text(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.strings_in(v)),
            Value::Object(map) => {
                let needs_key_change = map
                    .keys()
                    .any(|k| self.strings.iter().any(|s| k.contains(s.as_str())));
                if needs_key_change {
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        map.insert(self.text(&k), v);
                    }
                }
                map.values_mut().for_each(|v| self.strings_in(v));
            }
            _ => {}
        }
    }

    /// An object (or a view of one) as it may be shown: Secret values as markers, sensitive
    /// variable values replaced.
    pub fn object(&self, object: &Value) -> Value {
        let mut shown = object.clone();
        for map in sensitive_maps(object) {
            if let Some(entries) = shown.get_mut(*map).and_then(Value::as_object_mut) {
                for value in entries.values_mut() {
                    *value = marker(value);
                }
            }
        }
        self.strings_in(&mut shown);
        shown
    }

    /// Whether showing `object` would reveal something: it has sensitive maps with values, or
    /// holds a sensitive variable value.
    pub fn hides_something_in(&self, object: &Value) -> bool {
        sensitive_maps(object).iter().any(|map| {
            object
                .get(*map)
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        }) || (self.has_strings() && self.object(object) != *object)
    }

    /// A changed field's value as it may be shown, for an object of `kind` (address kind).
    pub fn field(&self, kind: &str, path: &str, value: &Value) -> Value {
        if is_sensitive_path(kind, path) {
            match value {
                Value::Object(map) => {
                    Value::Object(map.iter().map(|(k, v)| (self.text(k), marker(v))).collect())
                }
                other => marker(other),
            }
        } else {
            let mut shown = value.clone();
            self.strings_in(&mut shown);
            shown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ml"},
            "stringData": {"token": "hunter2-token"}, "type": "Opaque"})
    }

    #[test]
    fn secret_values_become_markers_and_keys_stay() {
        let shown = Redactor::default().object(&secret());
        let text = shown.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            shown["stringData"]["token"]
                .as_str()
                .unwrap()
                .starts_with("(sensitive value #")
        );
        assert_eq!(shown["metadata"]["name"], "s");
        // Same value, same marker within one process; different value, different marker.
        assert_eq!(marker(&json!("a")), marker(&json!("a")));
        assert_ne!(marker(&json!("a")), marker(&json!("b")));
    }

    #[test]
    fn sensitive_variable_values_are_replaced_inside_longer_strings_and_keys() {
        let redactor = Redactor::new(vec!["s3cr3t".into(), String::new()]);
        let mut value = json!({"cmd": "train --token=s3cr3t --x", "s3cr3t-key": [1, "s3cr3t"]});
        redactor.strings_in(&mut value);
        let text = value.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert_eq!(value["cmd"], "train --token=(sensitive value) --x");
        assert_eq!(redactor.text("a s3cr3t b"), "a (sensitive value) b");
    }

    #[test]
    fn paths_of_secret_values_are_sensitive() {
        assert!(is_sensitive_path("secret", "data.password"));
        assert!(is_sensitive_path("secret", "stringData"));
        assert!(is_sensitive_path("secret", r#"data["a.b"]"#));
        assert!(!is_sensitive_path("secret", "metadata.name"));
        assert!(!is_sensitive_path("secret", "dataset"));
        assert!(!is_sensitive_path("configmap", "data.x"));
    }

    #[test]
    fn fingerprints_see_only_whether_a_secret_value_still_equals_the_spec() {
        let desired = as_stored(&secret());
        assert_eq!(desired["data"]["token"], "aHVudGVyMi10b2tlbg==");
        let mut same = json!({"data": {"token": "aHVudGVyMi10b2tlbg=="}});
        mask_for_fingerprint(&desired, &mut same);
        assert_eq!(same["data"]["token"], "equal to the spec");
        let mut other = json!({"data": {"token": "b3RoZXI="}});
        mask_for_fingerprint(&desired, &mut other);
        assert_eq!(other["data"]["token"], "differs");
    }
}
