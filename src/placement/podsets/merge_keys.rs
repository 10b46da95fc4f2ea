//! The canonical JSON of [`super::MergeKeys`], written straight from the pod template.
//!
//! The keys are what Kueue's semantic equality compares (docs on [`super::MergeKeys`]): object
//! keys sorted, request, limit and overhead quantities in canonical spelling, and the fields
//! those quantities live in always present (`null` when the template has nothing there, so a
//! missing field and a `null` one compare equal). Writing the text directly, rather than
//! copying the template into a sorted tree and printing that, keeps reading a job's podsets
//! cheap: every queued job of a plan goes through it.

use serde_json::{Map, Value};

use crate::vocab::quantity::Quantity;

/// How a position of the template is written.
#[derive(Clone, Copy)]
enum Node {
    /// As it is, keys sorted.
    Plain,
    /// The template: its `spec`, when it has one, is a [`Node::Spec`].
    Template,
    /// `containers`, `initContainers`, `resources` and `overhead` always present.
    Spec,
    /// Each item a [`Node::Container`].
    Containers,
    /// `resources` always present.
    Container,
    /// `requests` and `limits` always present, as quantities.
    Resources,
    /// A resource list: each quantity canonical.
    Quantities,
}

const SPEC_FIELDS: &[(&str, Node)] = &[
    ("containers", Node::Containers),
    ("initContainers", Node::Containers),
    ("overhead", Node::Quantities),
    ("resources", Node::Resources),
];
const CONTAINER_FIELDS: &[(&str, Node)] = &[("resources", Node::Resources)];
const RESOURCES_FIELDS: &[(&str, Node)] =
    &[("limits", Node::Quantities), ("requests", Node::Quantities)];

/// `(template, scheduling)`: the whole template, and its scheduling requirements (each
/// container's and init container's requests, in order; pod-level resources, node selector,
/// tolerations, affinity, resource claims), both canonical.
pub(super) fn merge_keys(template: &Value) -> (String, String) {
    let mut out = Vec::with_capacity(512);
    write(&mut out, Some(template), Node::Template);
    let template_key = into_string(out);

    // The spec's fields are filled in (above) only when the template has a spec that can be.
    let spec = template.get("spec");
    let filled = matches!(spec, Some(Value::Null | Value::Object(_)));
    let field = |name: &str| spec.and_then(|s| s.get(name));
    let mut out = Vec::with_capacity(256);
    out.push(b'[');
    for (i, list) in ["containers", "initContainers"].into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        if let (true, Some(Value::Array(containers))) = (filled, field(list)) {
            for (j, container) in containers.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                let requests = container.get("resources").and_then(|r| r.get("requests"));
                write(&mut out, requests, Node::Quantities);
            }
        }
        out.push(b']');
    }
    out.push(b',');
    let resources = if filled { Node::Resources } else { Node::Plain };
    write(&mut out, field("resources"), resources);
    for name in ["nodeSelector", "tolerations", "affinity", "resourceClaims"] {
        out.push(b',');
        write(&mut out, field(name), Node::Plain);
    }
    out.push(b']');
    (template_key, into_string(out))
}

fn into_string(bytes: Vec<u8>) -> String {
    // Only serde_json's output and JSON punctuation were written: valid UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `value` (`None`: missing, written as `null`) at a position of kind `node`.
fn write(out: &mut Vec<u8>, value: Option<&Value>, node: Node) {
    let fields = match node {
        Node::Plain => &[][..],
        Node::Template => match value {
            Some(Value::Object(map)) if map.contains_key("spec") => {
                return write_object(out, Some(map), &[("spec", Node::Spec)]);
            }
            _ => &[][..],
        },
        Node::Spec => SPEC_FIELDS,
        Node::Container => CONTAINER_FIELDS,
        Node::Resources => RESOURCES_FIELDS,
        Node::Containers => {
            if let Some(Value::Array(items)) = value {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write(out, Some(item), Node::Container);
                }
                out.push(b']');
                return;
            }
            &[][..]
        }
        Node::Quantities => {
            if let Some(Value::Object(map)) = value {
                return write_quantities(out, map);
            }
            &[][..]
        }
    };
    match value {
        None | Some(Value::Null) if !fields.is_empty() => write_object(out, None, fields),
        Some(Value::Object(map)) if !fields.is_empty() => write_object(out, Some(map), fields),
        None => out.extend_from_slice(b"null"),
        Some(value) => write_plain(out, value),
    }
}

/// An object with `map`'s entries and the `fields` it must have, keys sorted; `fields` are
/// written as their node says, everything else as it is.
fn write_object(out: &mut Vec<u8>, map: Option<&Map<String, Value>>, fields: &[(&str, Node)]) {
    let node_of = |key: &str| {
        fields
            .iter()
            .find(|(name, _)| *name == key)
            .map_or(Node::Plain, |(_, node)| *node)
    };
    // The map's entries (iterated, not looked up: no hashing), then the fields it lacks.
    let mut entries: Vec<(&str, Option<&Value>, Node)> = map
        .into_iter()
        .flatten()
        .map(|(key, value)| (key.as_str(), Some(value), node_of(key)))
        .collect();
    for &(name, node) in fields {
        if !map.is_some_and(|m| m.keys().any(|key| key == name)) {
            entries.push((name, None, node));
        }
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value, node)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_key(out, key);
        write(out, value, node);
    }
    out.push(b'}');
}

fn write_quantities(out: &mut Vec<u8>, map: &Map<String, Value>) {
    write_sorted_object(out, map, |out, value| match Quantity::from_json(value) {
        Ok(quantity) => write_str(out, &quantity.to_canonical_string()),
        Err(_) => write_plain(out, value),
    });
}

/// `map` with its keys sorted, each value written by `write_value`.
fn write_sorted_object(
    out: &mut Vec<u8>,
    map: &Map<String, Value>,
    write_value: impl Fn(&mut Vec<u8>, &Value),
) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_key(out, key);
        write_value(out, value);
    }
    out.push(b'}');
}

/// `value` with every object's keys sorted.
fn write_plain(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Object(map) => write_sorted_object(out, map, write_plain),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_plain(out, item);
            }
            out.push(b']');
        }
        Value::String(text) => write_str(out, text),
        scalar => write_scalar(out, scalar),
    }
}

fn write_key(out: &mut Vec<u8>, key: &str) {
    write_str(out, key);
    out.push(b':');
}

/// A JSON string as serde_json prints it: with nothing to escape (no control character, quote
/// or backslash; serde_json escapes nothing else), the bytes between quotes.
fn write_str(out: &mut Vec<u8>, text: &str) {
    if text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        write_scalar(out, text);
    } else {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// A string, number, boolean or null exactly as serde_json prints it.
fn write_scalar<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing into a Vec cannot fail, and scalars always serialize.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::merge_keys;
    use crate::vocab::quantity::Quantity;

    /// The keys built the slow, obvious way: the template copied, its quantities rewritten in
    /// place (indexing adds the `null`s), every object sorted, printed.
    fn by_copying(template: &Value) -> (String, String) {
        fn canonical_quantities(resources: &mut Value) {
            if let Some(map) = resources.as_object_mut() {
                for q in map.values_mut() {
                    if let Ok(quantity) = Quantity::from_json(q) {
                        *q = Value::String(quantity.to_canonical_string());
                    }
                }
            }
        }
        fn sorted(value: &Value) -> Value {
            match value {
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    Value::Object(
                        keys.into_iter()
                            .map(|k| (k.clone(), sorted(&map[k])))
                            .collect(),
                    )
                }
                Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
                other => other.clone(),
            }
        }
        let mut template = template.clone();
        if let Some(spec) = template.get_mut("spec") {
            for containers in ["containers", "initContainers"] {
                for c in spec[containers].as_array_mut().into_iter().flatten() {
                    canonical_quantities(&mut c["resources"]["requests"]);
                    canonical_quantities(&mut c["resources"]["limits"]);
                }
            }
            canonical_quantities(&mut spec["resources"]["requests"]);
            canonical_quantities(&mut spec["resources"]["limits"]);
            canonical_quantities(&mut spec["overhead"]);
        }
        let spec = &template["spec"];
        let requests = |containers: &str| -> Value {
            let each = spec[containers]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| sorted(&c["resources"]["requests"]));
            Value::Array(each.collect())
        };
        let scheduling = Value::Array(vec![
            requests("containers"),
            requests("initContainers"),
            sorted(&spec["resources"]),
            sorted(&spec["nodeSelector"]),
            sorted(&spec["tolerations"]),
            sorted(&spec["affinity"]),
            sorted(&spec["resourceClaims"]),
        ]);
        (sorted(&template).to_string(), scheduling.to_string())
    }

    #[test]
    fn written_keys_are_the_copied_and_sorted_templates() {
        let templates = [
            json!({}),
            json!({"spec": null}),
            json!({"metadata": {"labels": {"b": "1", "a": "2"}}}),
            json!({"spec": {}}),
            json!({"spec": {"containers": null, "initContainers": []}}),
            json!({"spec": {"containers": [null, {}, {"resources": null}, {"resources": {}}]}}),
            json!({"metadata": {"annotations": {"z": "\"quoted\" \\ \u{e9}\n", "a": ""}},
                "spec": {
                "containers": [{"name": "ray-worker", "image": "img", "resources": {
                    "requests": {"memory": "4Gi", "cpu": "1000m", "google.com/tpu": 4},
                    "limits": {"google.com/tpu": "4", "cpu": 1.5, "x": {"b": 1, "a": [2, 1]}}}}],
                "initContainers": [{"name": "init", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "bogus", "memory": null}}}],
                "resources": {"requests": {"cpu": "2"}},
                "overhead": {"memory": "1Mi"},
                "nodeSelector": {"cloud.google.com/gke-tpu-topology": "2x2", "a": "b"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"values": ["v"], "operator": "In", "key": "k"}]}]}}},
                "resourceClaims": [{"name": "gpu"}],
                "priorityClassName": "high", "count": 1e3
            }}),
            json!({"spec": {"resources": null, "overhead": {"cpu": "100m"}, "containers": [{"resources": {"limits": {"cpu": "1"}}}]}}),
            json!("not an object"),
        ];
        for template in &templates {
            assert_eq!(merge_keys(template), by_copying(template), "{template}");
        }
    }

    #[test]
    fn equal_quantities_give_equal_keys() {
        let a = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}});
        let b = json!({"spec": {"containers": [{"resources": {"requests": {"memory": "1024Mi", "cpu": "1000m"}}}]}});
        let c = json!({"spec": {"containers": [{"resources": {"requests": {"memory": "1024Mi", "cpu": "2"}}}]}});
        assert_eq!(merge_keys(&a), merge_keys(&b));
        assert_ne!(merge_keys(&a).1, merge_keys(&c).1);
    }
}
