//! Pod templates with what an admission adds (Kueue's `pkg/podset`): the assigned flavors' node
//! labels and tolerations, and the admission checks' pod-set updates.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::super::store::{Key, Store, child_map};

pub(super) fn flavor(store: &Store, name: &str) -> Option<Value> {
    store
        .get(&Key::new(
            "kueue.x-k8s.io/v1beta2",
            "ResourceFlavor",
            None,
            name,
        ))
        .cloned()
}

/// The pod template of a Workload podset with its flavors' node labels and tolerations.
pub(super) fn template_with_flavors(store: &Store, w: &Value, podset: &str) -> Value {
    let mut template = w
        .pointer("/spec/podSets")
        .and_then(Value::as_array)
        .and_then(|ps| ps.iter().find(|p| p["name"] == podset))
        .and_then(|p| p.get("template").cloned())
        .unwrap_or_else(|| json!({}));
    let flavors: BTreeSet<String> = w
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|p| p["name"] == podset))
        .and_then(|p| p["flavors"].as_object())
        .map(|f| {
            f.values()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for f in flavors.iter().filter_map(|f| flavor(store, f)) {
        inject_flavor(&mut template, &f);
    }
    template
}

pub(super) fn inject_flavor(template: &mut Value, flavor: &Value) {
    let Some(spec) = child_map(template, "spec") else {
        return;
    };
    let labels = flavor
        .pointer("/spec/nodeLabels")
        .and_then(Value::as_object);
    if let Some(labels) = labels.filter(|l| !l.is_empty()) {
        let selector = spec.entry("nodeSelector").or_insert_with(|| json!({}));
        if let Some(selector) = selector.as_object_mut() {
            for (k, v) in labels {
                selector.insert(k.clone(), v.clone());
            }
        }
    }
    let tolerations = flavor
        .pointer("/spec/tolerations")
        .and_then(Value::as_array);
    if let Some(tolerations) = tolerations.filter(|t| !t.is_empty()) {
        let list = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            for t in tolerations {
                if !list.contains(t) {
                    list.push(t.clone());
                }
            }
        }
    }
}

/// Merges `entries` into the string map at `template.<section>.<field>`, when that is a map.
pub(super) fn merge_into(template: &mut Value, section: &str, field: &str, entries: &Value) {
    let Some(entries) = entries.as_object().filter(|e| !e.is_empty()) else {
        return;
    };
    let Some(parent) = child_map(template, section) else {
        return;
    };
    let target = parent.entry(field).or_insert_with(|| json!({}));
    if target.is_null() {
        *target = json!({});
    }
    if let Some(map) = target.as_object_mut() {
        for (k, v) in entries {
            map.insert(k.clone(), v.clone());
        }
    }
}
