//! What gkq's last server-side apply set on an object, and what a new apply would remove.
//!
//! Server-side apply makes the applied configuration the whole of a manager's intent: a field the
//! manager set before and leaves out now is removed from the object (unless another manager also
//! owns it). The API server records each manager's fields in `metadata.managedFields` as FieldsV1
//! (docs/kubernetes-api.md section 4). A comparison of only the fields the spec sets would miss
//! such removals and call the object unchanged, so the plan reads gkq's own `Apply` entry and
//! reports each field it owns that the spec no longer sets.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::PathSeg;
use super::compare::RawChange;
use crate::model::FIELD_MANAGER;
use crate::vocab::object::{At, Field};

/// Whether a `metadata.managedFields` entry records gkq's own server-side apply of the object
/// itself (not an update, not a subresource such as `status`).
pub fn is_own_apply(entry: &Value) -> bool {
    entry.as_object().is_some_and(is_own_apply_entry)
}

/// [`is_own_apply`] of an entry's fields.
pub fn is_own_apply_entry(entry: &Map<String, Value>) -> bool {
    entry.field("manager").and_then(Value::as_str) == Some(FIELD_MANAGER)
        && entry.field("operation").and_then(Value::as_str) == Some("Apply")
        && entry
            .field("subresource")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
}

/// `object` with only gkq's own apply entry left in `metadata.managedFields` (or none): the other
/// managers' entries are bookkeeping a plan never reads, often as large as the object.
pub fn keep_own_apply(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let own = meta
            .shift_remove("managedFields")
            .and_then(|entries| match entries {
                Value::Array(entries) => entries.into_iter().find(is_own_apply),
                _ => None,
            });
        if let Some(own) = own {
            meta.insert("managedFields".into(), Value::Array(vec![compact(own)]));
        }
    }
    object
}

/// gkq's own entry as a plan keeps it: its FieldsV1 as JSON text. A plan reads it only for an
/// object whose set fields all match, and a plan of thousands of objects holds every listed
/// one's; as a parsed tree it would cost several times its text.
pub fn compact(mut entry: Value) -> Value {
    if let Some(fields) = entry.get_mut("fieldsV1").filter(|f| f.is_object()) {
        *fields = Value::String(fields.to_string());
    }
    entry
}

/// The fields gkq's last apply set on `live` (its FieldsV1), if gkq applied it: as the server
/// sent them, or as text ([`compact`]).
fn own_fields(live: &Value) -> Option<Cow<'_, Map<String, Value>>> {
    let fields = live
        .at("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|entry| is_own_apply(entry))?
        .field("fieldsV1")?;
    match fields {
        Value::Object(map) => Some(Cow::Borrowed(map)),
        Value::String(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => Some(Cow::Owned(map)),
            _ => None,
        },
        _ => None,
    }
}

/// The fields `owner` says gkq's last apply set that `desired` no longer sets, as changes from
/// `live` to absent: applying `desired` removes them. `desired` and `live` are compared views (the
/// same shape as the objects); `owner` is the live object as read, with its `managedFields`. A
/// field of a list element is reported as the whole list, the element's position being the
/// server's to decide.
pub fn dropped_fields(owner: &Value, desired: &Value, live: &Value) -> Vec<RawChange> {
    let mut out = Vec::new();
    if let Some(fields) = own_fields(owner) {
        report(&fields, desired, live, &mut Vec::new(), &mut out);
    }
    out
}

fn report(
    fields: &Map<String, Value>,
    desired: &Value,
    live: &Value,
    path: &mut Vec<PathSeg>,
    out: &mut Vec<RawChange>,
) {
    if is_list_node(fields) {
        if drops_any(fields, desired, live) {
            out.push(RawChange {
                path: path.clone(),
                before: Some(live.clone()),
                after: present(Some(desired)).cloned(),
            });
        }
        return;
    }
    for (key, child_fields) in fields {
        let Some(name) = key.strip_prefix("f:") else {
            continue;
        };
        let Some(live_child) = present(live.field(name)) else {
            continue;
        };
        path.push(PathSeg::Key(name.to_string()));
        match present(desired.field(name)) {
            Some(desired_child) => {
                if let Some(child_fields) = child_fields.as_object() {
                    report(child_fields, desired_child, live_child, path, out);
                }
            }
            None => out.push(RawChange {
                path: path.clone(),
                before: Some(live_child.clone()),
                after: None,
            }),
        }
        path.pop();
    }
}

/// Whether applying `desired` would remove any of `fields` from `live`.
fn drops_any(fields: &Map<String, Value>, desired: &Value, live: &Value) -> bool {
    fields.iter().any(|(key, child_fields)| {
        let Some((live_child, desired_child)) = children(key, desired, live) else {
            return false;
        };
        match desired_child {
            None => true,
            Some(desired_child) => child_fields
                .as_object()
                .is_some_and(|f| drops_any(f, desired_child, live_child)),
        }
    })
}

/// The live child a FieldsV1 key names (`None` when live has none: nothing to remove), and the
/// desired child (`None` when desired no longer sets it). Keys: `f:<field>`, `k:<key fields of a
/// list element>`, `v:<a set's value>`, `i:<index>`; `.` (the node itself) names nothing.
fn children<'a>(
    key: &str,
    desired: &'a Value,
    live: &'a Value,
) -> Option<(&'a Value, Option<&'a Value>)> {
    let (kind, rest) = key.split_once(':')?;
    match kind {
        "f" => Some((present(live.field(rest))?, present(desired.field(rest)))),
        "k" | "v" | "i" => {
            let pattern: Value = serde_json::from_str(rest).ok()?;
            let live_element = element(kind, &pattern, live)?;
            Some((live_element, element(kind, &pattern, desired)))
        }
        _ => None,
    }
}

fn element<'a>(kind: &str, pattern: &Value, list: &'a Value) -> Option<&'a Value> {
    let items = list.as_array()?;
    match kind {
        "i" => items.get(usize::try_from(pattern.as_u64()?).ok()?),
        "v" => items.iter().find(|item| *item == pattern),
        _ => {
            let keys = pattern.as_object()?;
            items.iter().find(|item| {
                keys.iter()
                    .all(|(field, value)| match item.field(field.as_str()) {
                        Some(set) => set == value,
                        None => {
                            KEY_DEFAULTS.contains(&(field.as_str(), value.as_str().unwrap_or("")))
                        }
                    })
            })
        }
    }
}

/// Key fields of list elements that the spec may leave out and the API server defaults, so the
/// key it records names them: a container's or a Service's port `protocol` defaults to `TCP`
/// (docs/kubernetes-api.md section 4). A key field left out with no default here makes the
/// element look removed, which costs a dry run that then tells the truth.
const KEY_DEFAULTS: &[(&str, &str)] = &[("protocol", "TCP")];

fn is_list_node(fields: &Map<String, Value>) -> bool {
    fields
        .keys()
        .any(|k| k.starts_with("k:") || k.starts_with("v:") || k.starts_with("i:"))
}

fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

/// `value` with `insert` placed at `path` (keys only), making the maps on the way.
pub fn with_field(value: &mut Value, path: &[PathSeg], insert: Value) {
    let Some((last, parents)) = path.split_last() else {
        *value = insert;
        return;
    };
    let mut node = value;
    for seg in parents {
        let PathSeg::Key(key) = seg else { return };
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        node = node
            .as_object_mut()
            .expect("made an object above")
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let (PathSeg::Key(key), Some(map)) = (last, node.as_object_mut()) {
        map.insert(key.clone(), insert);
    } else if let PathSeg::Key(key) = last {
        *node = Value::Object(Map::from_iter([(key.clone(), insert)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn applied(fields: Value) -> Value {
        json!([
            {"manager": "kueue", "operation": "Update", "subresource": "status",
             "fieldsV1": {"f:status": {}}},
            {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {"f:other": {}}}},
            {"manager": "gkq", "operation": "Apply", "fieldsV1": fields},
        ])
    }

    #[test]
    fn only_gkqs_own_apply_entry_is_kept() {
        let object =
            json!({"metadata": {"name": "a", "managedFields": applied(json!({"f:spec": {}}))}});
        let kept = keep_own_apply(object);
        assert_eq!(
            kept["metadata"]["managedFields"],
            json!([{"manager": "gkq", "operation": "Apply", "fieldsV1": "{\"f:spec\":{}}"}])
        );
        // Kept as text, read as the tree it is.
        assert_eq!(
            own_fields(&kept).as_deref(),
            json!({"f:spec": {}}).as_object()
        );
        let none = keep_own_apply(json!({"metadata": {"name": "a", "managedFields": [
            {"manager": "gkq", "operation": "Update", "fieldsV1": {}},
            {"manager": "gkq", "operation": "Apply", "subresource": "status", "fieldsV1": {}}]}}));
        assert_eq!(none, json!({"metadata": {"name": "a"}}));
    }

    #[test]
    fn a_field_gkq_set_and_the_spec_no_longer_sets_is_removed() {
        let owner = json!({"metadata": {"managedFields": applied(json!({
            "f:metadata": {"f:labels": {".": {}, "f:team": {}, "f:rev": {}}},
            "f:spec": {"f:stopPolicy": {}, "f:cohort": {}}}))}});
        let live = json!({"metadata": {"labels": {"team": "a", "rev": "1", "theirs": "x"}},
            "spec": {"stopPolicy": "Hold", "cohort": "c", "other": 1}});
        let desired = json!({"metadata": {"labels": {"team": "a"}}, "spec": {"cohort": "c"}});
        let dropped = dropped_fields(&owner, &desired, &live);
        let paths: Vec<String> = dropped
            .iter()
            .map(|c| super::super::path_text(&c.path))
            .collect();
        assert_eq!(paths, ["metadata.labels.rev", "spec.stopPolicy"]);
        assert_eq!(dropped[1].before, Some(json!("Hold")));
        assert_eq!(dropped[1].after, None);
        // What the spec still sets, or what another manager set, is not a removal.
        assert!(dropped_fields(&owner, &live, &live).is_empty());
        // Without gkq's entry (another tool applied it), nothing is known to be gkq's.
        let theirs = json!({"metadata": {"managedFields": [applied(json!({}))[1].clone()]}});
        assert!(dropped_fields(&theirs, &desired, &live).is_empty());
    }

    #[test]
    fn a_dropped_list_element_or_element_field_reports_the_whole_list() {
        let owner = json!({"metadata": {"managedFields": applied(json!({
            "f:spec": {"f:flavors": {
                "k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:quota": {}},
                "k:{\"name\":\"b\"}": {".": {}, "f:name": {}, "f:quota": {}}},
              "f:tags": {"v:\"x\"": {}, "v:\"y\"": {}}}}))}});
        let live = json!({"spec": {
            "flavors": [{"name": "a", "quota": 1}, {"name": "b", "quota": 2}],
            "tags": ["x", "y"]}});
        assert!(dropped_fields(&owner, &live, &live).is_empty());

        let no_b = json!({"spec": {"flavors": [{"name": "a", "quota": 1}], "tags": ["x", "y"]}});
        let dropped = dropped_fields(&owner, &no_b, &live);
        assert_eq!(dropped.len(), 1);
        assert_eq!(super::super::path_text(&dropped[0].path), "spec.flavors");
        assert_eq!(dropped[0].after, Some(no_b["spec"]["flavors"].clone()));

        // A key field the server defaulted matches an element that leaves it out.
        let ports_owner = json!({"metadata": {"managedFields": applied(json!({"f:ports": {
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}))}});
        let ports = json!({"ports": [{"containerPort": 80, "protocol": "TCP"}]});
        let spec_ports = json!({"ports": [{"containerPort": 80}]});
        assert!(dropped_fields(&ports_owner, &spec_ports, &ports).is_empty());
        let udp = json!({"ports": [{"containerPort": 80, "protocol": "UDP"}]});
        assert_eq!(dropped_fields(&ports_owner, &udp, &ports).len(), 1);

        let no_quota = json!({"spec": {"flavors": [{"name": "a", "quota": 1}, {"name": "b"}],
            "tags": ["y"]}});
        let paths: Vec<String> = dropped_fields(&owner, &no_quota, &live)
            .iter()
            .map(|c| super::super::path_text(&c.path))
            .collect();
        assert_eq!(paths, ["spec.flavors", "spec.tags"]);
    }

    #[test]
    fn fields_put_in_place_make_their_parents() {
        let mut view = json!({"spec": {"a": 1}});
        with_field(
            &mut view,
            &[
                PathSeg::Key("metadata".into()),
                PathSeg::Key("labels".into()),
                PathSeg::Key("x".into()),
            ],
            json!("1"),
        );
        assert_eq!(
            view,
            json!({"spec": {"a": 1}, "metadata": {"labels": {"x": "1"}}})
        );
    }
}
