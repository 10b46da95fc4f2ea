//! Sensitive values: what never appears in a plan, a plan file, a log line or any other output.
//!
//! Two things are sensitive:
//! - the values of a Secret (`data` and `stringData`, key by key; the keys themselves are not);
//! - the value of every variable the spec declares `sensitive: true`, wherever it is used (it is
//!   replaced inside longer strings too, such as an entrypoint or a script). The fields of a
//!   Kubernetes object that hold one are listed in its [`SENSITIVE_FIELDS_ANNOTATION`], which
//!   goes into the cluster with it: when the value changes, the old value in the live object is
//!   known to be sensitive as well and shown as a marker.
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

use crate::spec::SensitiveValues;
use crate::vocab::object::{At, Field, SECRET_MAPS, secret_maps};

pub use crate::model::SENSITIVE_FIELDS_ANNOTATION;
pub use crate::spec::REDACTED;

/// Whether a field of an object of `kind` (lowercase, as in addresses: `secret`) at the dotted
/// `path` holds sensitive values.
pub fn is_sensitive_path(kind: &str, path: &str) -> bool {
    SECRET_MAPS
        .iter()
        .filter(|(_, k, _)| k.eq_ignore_ascii_case(kind))
        .flat_map(|(_, _, maps)| maps.iter())
        .any(|map| within(path, map))
}

/// Whether dotted `path` is `field` or inside it.
fn within(path: &str, field: &str) -> bool {
    path == field
        || path
            .strip_prefix(field)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// JSON pointers of the sensitive values in `object`: each entry of its Secret maps, and the
/// fields its [`SENSITIVE_FIELDS_ANNOTATION`] lists.
pub fn sensitive_pointers(object: &Value) -> Vec<String> {
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    let mut out = Vec::new();
    for map in secret_maps(object) {
        if let Some(entries) = object.field(map).and_then(Value::as_object) {
            out.extend(entries.keys().map(|k| format!("/{map}/{}", escape(k))));
        }
    }
    let listed = object
        .at("/metadata/annotations")
        .and_then(|a| a.field(SENSITIVE_FIELDS_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|list| serde_json::from_str::<Vec<String>>(list).ok())
        .unwrap_or_default();
    out.extend(listed);
    out
}

/// The dotted paths (as field changes name them) of `object`'s sensitive values.
fn sensitive_path_texts(object: &Value) -> Vec<String> {
    sensitive_pointers(object)
        .iter()
        .filter_map(|pointer| {
            let mut at = object;
            let mut path = Vec::new();
            for token in pointer.split('/').skip(1) {
                let key = token.replace("~1", "/").replace("~0", "~");
                match at {
                    Value::Array(items) => {
                        let index: usize = key.parse().ok()?;
                        at = items.get(index)?;
                        path.push(super::PathSeg::Index(index));
                    }
                    Value::Object(map) => {
                        at = map.get(&key)?;
                        path.push(super::PathSeg::Key(key));
                    }
                    _ => return None,
                }
            }
            Some(super::path_text(&path))
        })
        .collect()
}

/// A Secret as the API server stores it: `stringData` folded into `data` (base64), so a desired
/// Secret and a live one compare key by key.
pub fn as_stored(object: &Value) -> Value {
    as_stored_cow(object).into_owned()
}

/// [`as_stored`], borrowing `object` when it is already as stored (it has no `stringData`).
pub fn as_stored_cow(object: &Value) -> std::borrow::Cow<'_, Value> {
    if object.get("stringData").is_none() || secret_maps(object).is_empty() {
        return std::borrow::Cow::Borrowed(object);
    }
    let mut object = object.clone();
    let Some(map) = object.as_object_mut() else {
        return std::borrow::Cow::Owned(object);
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
    std::borrow::Cow::Owned(object)
}

/// Replaces each sensitive value of a live fingerprint basis (`live`, in the shape of the
/// desired object) by whether it equals the desired value: all a freshness check needs.
pub fn mask_for_fingerprint(desired: &Value, live: &mut Value) {
    for pointer in sensitive_pointers(desired) {
        if let Some(value) = live.pointer_mut(&pointer) {
            let same = desired.pointer(&pointer) == Some(value);
            *value = Value::String(if same { "equal to the spec" } else { "differs" }.into());
        }
    }
}

/// Hides sensitive values in what gkq shows and saves.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Values of variables declared sensitive.
    strings: SensitiveValues,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Redactor({} sensitive value(s))",
            self.strings.values().len()
        )
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
    pub fn new(strings: Vec<String>) -> Self {
        Redactor {
            strings: SensitiveValues::new(strings),
        }
    }

    /// Whether there is anything to hide besides Secrets.
    pub fn has_strings(&self) -> bool {
        !self.strings.is_empty()
    }

    /// `text` with every sensitive variable value replaced.
    pub fn text(&self, text: &str) -> String {
        self.strings.redact(text)
    }

    /// Replaces sensitive variable values in every string (and map key) of `value`.
    pub fn strings_in(&self, value: &mut Value) {
        let strings = self.strings.values();
        if strings.is_empty() {
            return;
        }
        match value {
            Value::String(s) if strings.iter().any(|secret| s.contains(secret.as_str())) => {
                *s = self.text(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.strings_in(v)),
            Value::Object(map) => {
                let needs_key_change = map
                    .keys()
                    .any(|k| strings.iter().any(|s| k.contains(s.as_str())));
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

    /// An object (or a view of one) as it may be shown: its sensitive fields as markers,
    /// sensitive variable values replaced anywhere else.
    pub fn object(&self, object: &Value) -> Value {
        self.shown_with(object.clone(), &sensitive_pointers(object))
    }

    /// Two sides of a diff as they may be shown: a field sensitive on either side is a marker on
    /// both (the old value of a changed secret is hidden too).
    /// The values are changed in place, not copied: a plan shows the diff of every changed
    /// object.
    pub fn pair(
        &self,
        before: Option<Value>,
        after: Option<Value>,
    ) -> (Option<Value>, Option<Value>) {
        let mut pointers: Vec<String> = before.as_ref().map(sensitive_pointers).unwrap_or_default();
        pointers.extend(after.as_ref().map(sensitive_pointers).unwrap_or_default());
        pointers.sort();
        pointers.dedup();
        (
            before.map(|v| self.shown_with(v, &pointers)),
            after.map(|v| self.shown_with(v, &pointers)),
        )
    }

    fn shown_with(&self, mut shown: Value, pointers: &[String]) -> Value {
        for pointer in pointers {
            if let Some(value) = shown.pointer_mut(pointer)
                && !is_marker(value)
            {
                *value = marker(value);
            }
        }
        self.strings_in(&mut shown);
        shown
    }

    /// Whether showing `object` would reveal something: it has sensitive maps with values, or
    /// holds a sensitive variable value.
    pub fn hides_something_in(&self, object: &Value) -> bool {
        secret_maps(object).iter().any(|map| {
            object
                .get(*map)
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        }) || (self.has_strings() && self.object(object) != *object)
    }

    /// A changed field's value as it may be shown, for an object of `kind` (address kind) whose
    /// desired form is `desired`.
    pub fn field(&self, kind: &str, desired: Option<&Value>, path: &str, value: &Value) -> Value {
        let listed = desired
            .map(sensitive_path_texts)
            .unwrap_or_default()
            .iter()
            .any(|field| within(path, field) || within(field, path));
        if listed || is_sensitive_path(kind, path) {
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

    #[test]
    fn fields_listed_sensitive_are_markers_on_both_sides_of_a_change() {
        let annotated = |script: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "annotations": {SENSITIVE_FIELDS_ANNOTATION: "[\"/data/login.sh\"]"}},
                "data": {"login.sh": script, "other": "visible"}})
        };
        let redactor = Redactor::new(vec!["NEW-token".into()]);
        let old = annotated("login --token OLD-token");
        let new = annotated("login --token NEW-token");
        let (before, after) = redactor.pair(Some(old.clone()), Some(new.clone()));
        // The same value gets the same marker in a change line and in a diff.
        assert_eq!(
            after.as_ref().unwrap()["data"]["login.sh"],
            redactor.field(
                "configmap",
                Some(&new),
                r#"data["login.sh"]"#,
                &new["data"]["login.sh"]
            )
        );
        let text = format!("{before:?}{after:?}");
        assert!(
            !text.contains("OLD-token") && !text.contains("NEW-token"),
            "{text}"
        );
        assert_eq!(before.unwrap()["data"]["other"], "visible");
        assert!(is_marker(&after.unwrap()["data"]["login.sh"]));
        let shown = redactor.field(
            "configmap",
            Some(&new),
            r#"data["login.sh"]"#,
            &json!("login --token OLD-token"),
        );
        assert!(is_marker(&shown), "{shown}");
        assert_eq!(
            redactor.field("configmap", Some(&new), "data.other", &json!("x")),
            json!("x")
        );
    }
}
