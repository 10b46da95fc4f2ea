//! Reading untyped Kubernetes objects (`serde_json::Value`): metadata, `status.conditions` and
//! `metadata.ownerReferences`, with Kubernetes' own rules written once.

use serde_json::{Map, Value};

/// A field of a JSON object by its key, found in a small object by comparing the key with each
/// of its keys in order: serde_json's maps hash every key looked up with SipHash, which costs more
/// than a few comparisons, and most maps of a Kubernetes object hold a handful of keys. Looking
/// fields up by hash was a tenth of an unchanged plan of 5,000 objects. A larger map is looked up
/// by its hash.
pub trait Field {
    /// The value of `key`, as [`Map::get`] finds it.
    fn field(&self, key: &str) -> Option<&Value>;
}

/// Up to how many keys [`Field::field`] compares a key with each instead of hashing it.
const SCANNED_UP_TO: usize = 12;

impl Field for Map<String, Value> {
    fn field(&self, key: &str) -> Option<&Value> {
        if self.len() > SCANNED_UP_TO {
            return self.get(key);
        }
        self.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    }
}

impl Field for Value {
    /// The value of `key` when this is an object ([`Value::get`] with a key).
    fn field(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(map) => map.field(key),
            _ => None,
        }
    }
}

/// [`Value::pointer`] without its allocations, for the reads a plan makes of every object:
/// serde_json unescapes each segment of the path into a new `String` (`~1`, `~0`), which was 5% of
/// an unchanged plan of 5,000 objects. A path with an escape is read by serde_json itself.
pub trait At {
    /// The value at the JSON pointer `pointer` (RFC 6901), as [`Value::pointer`] finds it.
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.contains('~') {
            return self.pointer(pointer);
        }
        if pointer.is_empty() {
            return Some(self);
        }
        pointer
            .strip_prefix('/')?
            .split('/')
            .try_fold(self, |value, segment| match value {
                Value::Object(map) => map.field(segment),
                Value::Array(items) => items.get(array_index(segment)?),
                _ => None,
            })
    }
}

/// An array index as RFC 6901 spells it: digits, without a leading zero or sign.
fn array_index(segment: &str) -> Option<usize> {
    let canonical = segment.bytes().all(|b| b.is_ascii_digit())
        && !(segment.len() > 1 && segment.starts_with('0'));
    canonical.then(|| segment.parse().ok()).flatten()
}

/// Kinds whose top-level maps hold secret values, by `apiVersion` and `kind`: a Secret's `data`
/// and `stringData`, key by key (the keys themselves are not secret).
pub const SECRET_MAPS: &[(&str, &str, &[&str])] = &[("v1", "Secret", &["data", "stringData"])];

/// The top-level maps of `object` whose values are secret (empty for most kinds).
pub fn secret_maps(object: &Value) -> &'static [&'static str] {
    let api_version = object.field("apiVersion").and_then(Value::as_str);
    let kind = object.field("kind").and_then(Value::as_str);
    SECRET_MAPS
        .iter()
        .find(|(v, k, _)| Some(*v) == api_version && Some(*k) == kind)
        .map(|(_, _, maps)| *maps)
        .unwrap_or(&[])
}

/// `metadata.name`, empty when missing.
pub fn name_of(object: &Value) -> &str {
    object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.namespace`; `None` for cluster-scoped objects.
pub fn namespace_of(object: &Value) -> Option<&str> {
    object.at("/metadata/namespace").and_then(Value::as_str)
}

/// `metadata.uid`, empty when missing (objects not yet created have none).
pub fn uid_of(object: &Value) -> &str {
    object
        .at("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The value of the label `key`, when the object has it.
pub fn label_of<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .at("/metadata/labels")
        .and_then(|labels| labels.field(key))
        .and_then(Value::as_str)
}

/// The entries of `status.conditions`, none when missing.
pub fn conditions(object: &Value) -> impl Iterator<Item = &Value> {
    object
        .at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The condition of type `kind`. Types are unique in a conditions list; like Kubernetes'
/// `meta.FindStatusCondition`, the first one wins should a writer repeat one.
pub fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions(object).find(|c| c["type"] == kind)
}

/// Whether condition `kind` has status `True`; missing, `False` and `Unknown` are all false.
pub fn condition_true(object: &Value, kind: &str) -> bool {
    condition(object, kind).is_some_and(|c| c["status"] == "True")
}

/// The entries of `metadata.ownerReferences`, in order; none when missing.
pub fn owners(object: &Value) -> impl Iterator<Item = &Value> {
    object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Whether one of `object`'s owners is the object with this uid.
pub fn owned_by_uid(object: &Value, uid: &str) -> bool {
    owners(object).any(|o| o["uid"] == uid)
}

/// The name of `object`'s first owner of kind `kind`.
pub fn owner_name<'a>(object: &'a Value, kind: &str) -> Option<&'a str> {
    owners(object).find(|o| o["kind"] == kind)?["name"].as_str()
}

/// `value` with every map and list rebuilt to exactly its length. Objects built one insert at a
/// time keep up to half their room unused, and a plan holds thousands of them for its whole run.
pub fn tight(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            out.extend(map.into_iter().map(|(k, v)| (k, tight(v))));
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut items: Vec<Value> = items.into_iter().map(tight).collect();
            items.shrink_to_fit();
            Value::Array(items)
        }
        Value::String(mut text) => {
            text.shrink_to_fit();
            Value::String(text)
        }
        other => other,
    }
}

/// A `Value` read with each map and list at exactly its length when the deserializer tells the
/// length (the spec's does), as [`tight`] would leave it without a second pass: a large spec's
/// manifests are thousands of objects, read once and held for the whole plan.
pub struct Tight(pub Value);

impl<'de> serde::Deserialize<'de> for Tight {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TightVisitor).map(Tight)
    }
}

/// Reads any value as serde_json's own `Value` does, sized by the lengths the deserializer gives.
struct TightVisitor;

impl<'de> serde::de::Visitor<'de> for TightVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Tight(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((key, Tight(value))) = map.next_entry::<String, Tight>()? {
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Reads a list of [`Tight`] values (`#[serde(deserialize_with)]`).
pub fn tight_values<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Value>, D::Error> {
    let values: Vec<Tight> = serde::Deserialize::deserialize(deserializer)?;
    Ok(values.into_iter().map(|Tight(value)| value).collect())
}

/// A copy of `value` built at exactly its length, as [`tight`] would leave a clone of it: one
/// allocation per map, list and string instead of a clone's and then tight's.
pub fn tight_copy(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            out.extend(map.iter().map(|(k, v)| (k.clone(), tight_copy(v))));
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(tight_copy).collect()),
        Value::String(text) => Value::String(text.as_str().into()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tight_read_is_the_value_serde_json_reads() {
        let text = r#"{"z": [1, -2, 18446744073709551615, 2.5, "s", null, true, {}, []],
            "a": {"nested": {"deep": [{"k": "v"}]}}, "e": "", "n": null}"#;
        let Tight(tight) = serde_json::from_str(text).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(tight, value);
        let keys: Vec<&String> = tight.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a", "e", "n"], "the order is kept");
    }

    /// Small maps are scanned and large ones hashed: either way a field is what `get` finds,
    /// including a key that is a prefix of another and the empty key.
    #[test]
    fn a_field_is_what_get_finds_in_small_and_large_maps() {
        for size in [0, 1, 2, SCANNED_UP_TO, SCANNED_UP_TO + 1, 40] {
            let mut map = Map::new();
            for i in 0..size {
                map.insert(format!("key{i}"), json!(i));
            }
            if size > 0 {
                map.insert(String::new(), json!("empty"));
            }
            let value = Value::Object(map.clone());
            for key in [
                "", "key", "key0", "key1", "key10", "key12", "key13", "key39", "nope",
            ] {
                assert_eq!(map.field(key), map.get(key), "{size} keys, {key:?}");
                assert_eq!(value.field(key), value.get(key), "{size} keys, {key:?}");
            }
        }
        assert_eq!(json!([1, 2]).field("0"), None);
        assert_eq!(json!("text").field("text"), None);
    }

    #[test]
    fn at_finds_what_a_json_pointer_finds() {
        let value = json!({
            "metadata": {"name": "a", "labels": {"x/y": "1", "m~n": "2", "": "empty"}},
            "list": [{"k": 0}, 1, [2, 3]],
            "": {"": "twice empty"},
            "10": "ten"
        });
        for pointer in [
            "",
            "/",
            "//",
            "/metadata",
            "/metadata/name",
            "/metadata/name/x",
            "/metadata/labels/",
            "/metadata/labels/x~1y",
            "/metadata/labels/m~0n",
            "/metadata/labels/x/y",
            "/list/0/k",
            "/list/1",
            "/list/2/1",
            "/list/01",
            "/list/+1",
            "/list/-1",
            "/list/3",
            "/list/",
            "/list/1a",
            "/10",
            "metadata",
            "/missing/deep",
            "/list/99999999999999999999999",
        ] {
            assert_eq!(value.at(pointer), value.pointer(pointer), "{pointer:?}");
        }
    }

    #[test]
    fn a_tight_value_is_the_same_value_in_the_same_order() {
        let mut grown = serde_json::Map::new();
        for key in ["z", "a", "m", "b", "y"] {
            grown.insert(
                key.into(),
                serde_json::json!({"list": [1, "two", {"three": 3.5}], "s": "x"}),
            );
        }
        let grown = Value::Object(grown);
        let tight = tight(grown.clone());
        assert_eq!(tight, grown);
        let keys: Vec<&String> = tight.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a", "m", "b", "y"]);
    }

    fn workload() -> Value {
        json!({
            "metadata": {"name": "w", "namespace": "ns", "uid": "u-1",
                "ownerReferences": [{"kind": "RayJob", "name": "train", "uid": "job-uid"}]},
            "status": {"conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "Unknown"},
                {"type": "Finished"},
            ]},
        })
    }

    #[test]
    fn metadata() {
        let w = workload();
        assert_eq!(
            (name_of(&w), namespace_of(&w), uid_of(&w)),
            ("w", Some("ns"), "u-1")
        );
        assert_eq!(
            (
                name_of(&json!({})),
                namespace_of(&json!({})),
                uid_of(&json!({}))
            ),
            ("", None, "")
        );
    }

    #[test]
    fn only_status_true_is_true() {
        let w = workload();
        assert!(condition_true(&w, "QuotaReserved"));
        assert!(!condition_true(&w, "Admitted"));
        assert!(
            !condition_true(&w, "Finished"),
            "a missing status is not True"
        );
        assert!(!condition_true(&w, "Evicted"));
        assert!(!condition_true(&json!({"status": {}}), "Evicted"));
    }

    #[test]
    fn the_first_condition_of_a_type_wins() {
        let repeated = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert!(!condition_true(&repeated, "Ready"));
    }

    #[test]
    fn owner_references() {
        let w = workload();
        assert!(owned_by_uid(&w, "job-uid"));
        assert!(!owned_by_uid(&w, "other"));
        assert_eq!(owner_name(&w, "RayJob"), Some("train"));
        assert_eq!(owner_name(&w, "Job"), None);
        assert_eq!(owners(&json!({})).count(), 0);
    }
}
