//! Field-level comparison of a desired value with a live one.
//!
//! [`owned`] compares only what the desired value sets (GKE bodies, and Kubernetes objects when
//! no server dry-run is available); [`full`] compares two whole values (a Kubernetes object as
//! the server's dry-run says it would become, against the live object). Both return the changes
//! and a *live view*: the live value in the desired value's shape, with equal spellings replaced
//! by the desired spelling, so that a text diff of the two shows only real changes.

use serde_json::{Map, Value};

use super::PathSeg;
use super::normalize::{
    Dialect, GKE_AUTHORITATIVE_MAPS, display_enum, is_ignored_gke_label, is_zero, keys_of,
    same_leaf,
};
use crate::vocab::object::Field;

/// One differing leaf (or subtree): `before` is live, `after` is desired; `None` is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct RawChange {
    pub path: Vec<PathSeg>,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub changes: Vec<RawChange>,
    /// The live value, restricted to (for [`owned`]) and spelled like the desired value.
    pub live_view: Value,
}

impl Comparison {
    pub fn is_same(&self) -> bool {
        self.changes.is_empty()
    }
}

/// Compares each leaf `desired` sets with `live` at the same path.
pub fn owned(desired: &Value, live: &Value, dialect: Dialect) -> Comparison {
    let mut walker = Walker {
        dialect,
        changes: Vec::new(),
    };
    let live_view = walker
        .owned(desired, Some(live), &mut Vec::new())
        .unwrap_or(Value::Null);
    Comparison {
        changes: walker.changes,
        live_view,
    }
}

/// Compares two whole values: every field on either side counts.
pub fn full(desired: &Value, live: &Value, dialect: Dialect) -> Comparison {
    let mut walker = Walker {
        dialect,
        changes: Vec::new(),
    };
    let live_view = walker.full(desired, live, &mut Vec::new());
    Comparison {
        changes: walker.changes,
        live_view,
    }
}

struct Walker {
    dialect: Dialect,
    changes: Vec<RawChange>,
}

impl Walker {
    fn change(&mut self, path: &[PathSeg], before: Option<&Value>, after: Option<&Value>) {
        self.changes.push(RawChange {
            path: path.to_vec(),
            before: before.map(|v| display_enum(path, v)),
            after: after.cloned(),
        });
    }

    fn is_authoritative_map(&self, path: &[PathSeg]) -> bool {
        self.dialect == Dialect::Gke
            && GKE_AUTHORITATIVE_MAPS.contains(&keys_of(path).join(".").as_str())
    }

    /// Returns the live view of this node, `None` where live has nothing to show.
    fn owned(
        &mut self,
        desired: &Value,
        live: Option<&Value>,
        path: &mut Vec<PathSeg>,
    ) -> Option<Value> {
        let live = live.filter(|l| !l.is_null());
        match desired {
            Value::Null => None,
            Value::Object(desired_map) => match live {
                Some(Value::Object(live_map)) => {
                    let mut view = Map::new();
                    for (key, desired_child) in desired_map {
                        path.push(PathSeg::Key(key.clone()));
                        if let Some(child) = self.owned(desired_child, live_map.field(key), path) {
                            view.insert(key.clone(), child);
                        }
                        path.pop();
                    }
                    if self.is_authoritative_map(path) {
                        for (key, live_child) in live_map {
                            if !desired_map.contains_key(key) && !is_ignored_gke_label(key) {
                                path.push(PathSeg::Key(key.clone()));
                                self.change(path, Some(live_child), None);
                                path.pop();
                                view.insert(key.clone(), live_child.clone());
                            }
                        }
                    }
                    Some(Value::Object(view))
                }
                None if is_zero(desired) => Some(desired.clone()),
                None => {
                    // Absent subtree: report each leaf the spec sets, so the reasons name fields.
                    let mut view = Map::new();
                    for (key, desired_child) in desired_map {
                        path.push(PathSeg::Key(key.clone()));
                        if let Some(child) = self.owned(desired_child, None, path) {
                            view.insert(key.clone(), child);
                        }
                        path.pop();
                    }
                    (!view.is_empty()).then_some(Value::Object(view))
                }
                Some(other) => {
                    self.change(path, Some(other), Some(desired));
                    Some(other.clone())
                }
            },
            Value::Array(desired_items) => self.owned_array(desired, desired_items, live, path),
            scalar => {
                if same_leaf(path, scalar, live, self.dialect) {
                    Some(scalar.clone())
                } else {
                    self.change(path, live, Some(scalar));
                    live.map(|l| display_enum(path, l))
                }
            }
        }
    }

    fn owned_array(
        &mut self,
        desired: &Value,
        desired_items: &[Value],
        live: Option<&Value>,
        path: &mut Vec<PathSeg>,
    ) -> Option<Value> {
        let live_items = match live {
            None => {
                if desired_items.is_empty() {
                    return Some(desired.clone());
                }
                self.change(path, None, Some(desired));
                return None;
            }
            Some(Value::Array(items)) => items,
            Some(other) => {
                self.change(path, Some(other), Some(desired));
                return Some(other.clone());
            }
        };
        let all_scalars = desired_items
            .iter()
            .all(|v| !v.is_object() && !v.is_array());
        if all_scalars {
            let same =
                match self.dialect {
                    // GKE scalar lists (oauthScopes, locations, tags) are sets; the server may sort them.
                    Dialect::Gke => sorted_texts(desired_items) == sorted_texts(live_items),
                    Dialect::Kube => {
                        desired_items.len() == live_items.len()
                            && desired_items.iter().zip(live_items).enumerate().all(
                                |(i, (d, l))| {
                                    path.push(PathSeg::Index(i));
                                    let same = same_leaf(path, d, Some(l), self.dialect);
                                    path.pop();
                                    same
                                },
                            )
                    }
                };
            if same {
                return Some(desired.clone());
            }
            self.change(path, live, Some(desired));
            return live.cloned();
        }
        // Lists of objects. GKE lists (taints, accelerators) are sets keyed by `key` or `name`
        // and written whole, so a live element the spec lacks is a change. Kubernetes lists keep
        // their order (a ClusterQueue's flavor order is its fallback order) and are owned only up
        // to the elements the spec sets.
        let identity = match self.dialect {
            Dialect::Gke => identity_key(desired_items),
            Dialect::Kube => None,
        };
        let mut matched = vec![false; live_items.len()];
        let mut view = Vec::new();
        for (i, desired_item) in desired_items.iter().enumerate() {
            let live_index = match identity {
                Some(key) => live_items.iter().position(|l| {
                    l.field(key).is_some() && l.field(key) == desired_item.field(key)
                }),
                None => (i < live_items.len()).then_some(i),
            };
            if let Some(j) = live_index {
                matched[j] = true;
            }
            path.push(PathSeg::Index(i));
            if let Some(child) = self.owned(desired_item, live_index.map(|j| &live_items[j]), path)
            {
                view.push(child);
            }
            path.pop();
        }
        if self.dialect == Dialect::Gke {
            for (j, live_item) in live_items.iter().enumerate() {
                if !matched[j] {
                    path.push(PathSeg::Index(j));
                    self.change(path, Some(live_item), None);
                    path.pop();
                    view.push(live_item.clone());
                }
            }
        }
        Some(Value::Array(view))
    }

    /// Returns the live view: `live`, with leaves equal to the desired ones spelled like them.
    fn full(&mut self, desired: &Value, live: &Value, path: &mut Vec<PathSeg>) -> Value {
        match (desired, live) {
            (Value::Object(d), Value::Object(l)) => {
                let mut respelled = Map::new();
                for (key, desired_child) in d {
                    path.push(PathSeg::Key(key.clone()));
                    match l.field(key) {
                        Some(live_child) => {
                            let child = self.full(desired_child, live_child, path);
                            respelled.insert(key.clone(), child);
                        }
                        None if is_zero(desired_child) => {}
                        None => self.change(path, None, Some(desired_child)),
                    }
                    path.pop();
                }
                for (key, live_child) in l {
                    if !d.contains_key(key) && !is_zero(live_child) {
                        path.push(PathSeg::Key(key.clone()));
                        self.change(path, Some(live_child), None);
                        path.pop();
                    }
                }
                // In live's key order, so that the view is the live object, respelled.
                let view: Map<String, Value> = l
                    .iter()
                    .map(|(key, live_child)| {
                        let child = respelled.remove(key).unwrap_or_else(|| live_child.clone());
                        (key.clone(), child)
                    })
                    .collect();
                Value::Object(view)
            }
            (Value::Array(d), Value::Array(l)) if d.len() == l.len() => Value::Array(
                d.iter()
                    .zip(l)
                    .enumerate()
                    .map(|(i, (desired_item, live_item))| {
                        path.push(PathSeg::Index(i));
                        let view = self.full(desired_item, live_item, path);
                        path.pop();
                        view
                    })
                    .collect(),
            ),
            (Value::Array(_), _)
            | (Value::Object(_), _)
            | (_, Value::Array(_))
            | (_, Value::Object(_)) => {
                if desired != live {
                    self.change(path, Some(live), Some(desired));
                }
                live.clone()
            }
            (scalar, live_scalar) => {
                if same_leaf(path, scalar, Some(live_scalar), self.dialect) {
                    scalar.clone()
                } else {
                    self.change(path, Some(live_scalar), Some(scalar));
                    live_scalar.clone()
                }
            }
        }
    }
}

fn sorted_texts(items: &[Value]) -> Vec<String> {
    let mut texts: Vec<String> = items.iter().map(Value::to_string).collect();
    texts.sort();
    texts
}

/// The field that identifies elements of a GKE list, when every desired element has it.
fn identity_key(items: &[Value]) -> Option<&'static str> {
    ["name", "key", "acceleratorType"]
        .into_iter()
        .find(|key| items.iter().all(|item| item.field(key).is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(comparison: &Comparison) -> Vec<String> {
        comparison
            .changes
            .iter()
            .map(|c| super::super::path_text(&c.path))
            .collect()
    }

    #[test]
    fn owned_compare_ignores_what_the_spec_does_not_set() {
        let desired = json!({"name": "on-demand-pool",
            "config": {"machineType": "ct6e-standard-4t", "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}},
            "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
            "placementPolicy": {"tpuTopology": "4x4"}});
        let live = json!({"name": "on-demand-pool",
            "config": {"machineType": "ct6e-standard-4t", "diskSizeGb": 100, "imageType": "COS_CONTAINERD",
                       "reservationAffinity": {"consumeReservationType": 1}},
            "autoscaling": {"enabled": true, "maxNodeCount": 4, "locationPolicy": 1},
            "placementPolicy": {"tpuTopology": "4x4"}, "locations": ["us-east5-b"]});
        let comparison = owned(&desired, &live, Dialect::Gke);
        assert!(comparison.is_same(), "{:?}", comparison.changes);
        assert_eq!(comparison.live_view, desired);
    }

    #[test]
    fn owned_compare_reports_each_changed_leaf() {
        let desired = json!({"autoscaling": {"enabled": true, "maxNodeCount": 8}, "queuedProvisioning": {"enabled": true}});
        let live = json!({"autoscaling": {"enabled": true, "maxNodeCount": 4}});
        let comparison = owned(&desired, &live, Dialect::Gke);
        assert_eq!(
            paths(&comparison),
            ["autoscaling.maxNodeCount", "queuedProvisioning.enabled"]
        );
        assert_eq!(comparison.changes[0].before, Some(json!(4)));
        assert_eq!(comparison.changes[0].after, Some(json!(8)));
        assert_eq!(comparison.changes[1].before, None);
        assert_eq!(
            comparison.live_view,
            json!({"autoscaling": {"enabled": true, "maxNodeCount": 4}})
        );
    }

    #[test]
    fn label_maps_are_authoritative_except_for_gke_labels() {
        let desired = json!({"resourceLabels": {"managed-by": "gkq"}});
        let live = json!({"resourceLabels": {"managed-by": "gkq", "team": "ml", "goog-gke-node-pool-provisioning-model": "on-demand"}});
        let comparison = owned(&desired, &live, Dialect::Gke);
        assert_eq!(paths(&comparison), ["resourceLabels.team"]);
        assert_eq!(comparison.changes[0].after, None);
    }

    #[test]
    fn scalar_lists_are_sets_in_gke_and_ordered_in_kubernetes() {
        let desired = json!({"scopes": ["b", "a"]});
        let live = json!({"scopes": ["a", "b"]});
        assert!(owned(&desired, &live, Dialect::Gke).is_same());
        assert!(!owned(&desired, &live, Dialect::Kube).is_same());
    }

    #[test]
    fn gke_object_lists_match_by_key() {
        let desired = json!({"taints": [{"key": "b", "value": "1", "effect": "NO_SCHEDULE"}, {"key": "a", "value": "2", "effect": "NO_EXECUTE"}]});
        let live = json!({"taints": [{"key": "a", "value": "2", "effect": 3}, {"key": "b", "value": "1", "effect": 1}]});
        assert!(owned(&desired, &live, Dialect::Gke).is_same());
        let fewer = json!({"taints": [{"key": "b", "value": "1", "effect": "NO_SCHEDULE"}]});
        assert_eq!(paths(&owned(&fewer, &live, Dialect::Gke)), ["taints[0]"]);
    }

    #[test]
    fn full_compare_sees_both_sides() {
        let desired = json!({"spec": {"a": 1, "b": [1, 2]}});
        let live = json!({"spec": {"a": 1, "b": [1, 2, 3], "c": "x"}});
        assert_eq!(
            paths(&full(&desired, &live, Dialect::Kube)),
            ["spec.b", "spec.c"]
        );
        assert!(full(&desired, &desired, Dialect::Kube).is_same());
    }

    /// A server's dry run may spell a quantity differently from the live object (`10` against
    /// `"10"`, `1000000000` against `1G`): only the real change may show in the text diff.
    #[test]
    fn full_comparison_shows_equal_quantities_in_the_desired_spelling() {
        let predicted = json!({"spec": {"resources": [
            {"name": "cpu", "nominalQuota": 10},
            {"name": "tpu", "nominalQuota": 32},
            {"name": "big", "nominalQuota": 1000000000},
        ], "stopPolicy": "None"}});
        let live = json!({"spec": {"resources": [
            {"name": "cpu", "nominalQuota": "10"},
            {"name": "tpu", "nominalQuota": "16"},
            {"name": "big", "nominalQuota": "1G"},
        ], "stopPolicy": "None", "extra": "kept"}});
        let comparison = full(&predicted, &live, Dialect::Kube);
        assert_eq!(comparison.changes.len(), 2, "{:?}", comparison.changes);
        assert_eq!(
            comparison.live_view,
            json!({"spec": {"resources": [
                {"name": "cpu", "nominalQuota": 10},
                {"name": "tpu", "nominalQuota": "16"},
                {"name": "big", "nominalQuota": 1000000000},
            ], "stopPolicy": "None", "extra": "kept"}})
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Small JSON values shaped like API bodies: objects of objects, scalar lists, scalars.
    fn body() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            (0u32..1000).prop_map(|n| json!(n)),
            "[a-z]{1,6}".prop_map(Value::String),
            proptest::collection::vec("[a-z]{1,4}".prop_map(Value::String), 0..4)
                .prop_map(Value::Array),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            proptest::collection::btree_map("[a-z]{1,5}", inner, 1..4)
                .prop_map(|map| Value::Object(map.into_iter().collect()))
        })
    }

    /// `value` with an extra, server-written field added to every object.
    fn with_server_fields(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut map: Map<String, Value> = map
                    .iter()
                    .map(|(k, v)| (k.clone(), with_server_fields(v)))
                    .collect();
                map.insert("serverDefault".to_string(), json!("set-by-gke"));
                Value::Object(map)
            }
            other => other.clone(),
        }
    }

    proptest! {
        #[test]
        fn a_value_equals_itself(desired in body()) {
            prop_assert!(owned(&desired, &desired, Dialect::Gke).is_same());
            prop_assert!(owned(&desired, &desired, Dialect::Kube).is_same());
            prop_assert!(full(&desired, &desired, Dialect::Kube).is_same());
        }

        /// Fields the spec does not set never show as changes, and the live view then equals
        /// the desired value (so the text diff is empty).
        #[test]
        fn server_fields_are_not_changes(desired in body()) {
            let live = with_server_fields(&desired);
            let comparison = owned(&desired, &live, Dialect::Gke);
            prop_assert!(comparison.is_same(), "{:?}", comparison.changes);
            prop_assert_eq!(&comparison.live_view, &desired);
        }

        /// Changing one leaf the spec sets is exactly one change, at that leaf.
        #[test]
        fn one_changed_leaf_is_one_change(desired in body(), pick in any::<prop::sample::Index>()) {
            let mut leaves = Vec::new();
            collect_scalar_leaves(&desired, &mut Vec::new(), &mut leaves);
            prop_assume!(!leaves.is_empty());
            let pointer = leaves[pick.index(leaves.len())].clone();
            let mut live = desired.clone();
            *live.pointer_mut(&pointer).unwrap() = json!("changed-value");
            let comparison = owned(&desired, &live, Dialect::Gke);
            prop_assert_eq!(comparison.changes.len(), 1);
        }
    }

    fn collect_scalar_leaves(value: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    path.push(key.clone());
                    collect_scalar_leaves(child, path, out);
                    path.pop();
                }
            }
            Value::Array(_) => {}
            _ if path.is_empty() => {}
            _ => out.push(format!("/{}", path.join("/"))),
        }
    }
}
