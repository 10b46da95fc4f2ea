//! The local target's Kubernetes object store: an API server's storage and request semantics,
//! close enough to a real one for everything gkq does, as plain data that serialises to
//! `<state-dir>/kubernetes.json`.
//!
//! What it models:
//!
//! - **Discovery**: a fixed table of built-in kinds ([`BUILTIN_KINDS`]) plus every kind a stored
//!   CustomResourceDefinition serves once it is `Established`.
//! - **Server-side apply**, with ownership recorded in `metadata.managedFields` (FieldsV1) as the
//!   API server does. The model: a manager's *applied* fields are the leaves of the object it
//!   applied (maps are walked key by key; lists and scalars are leaves, i.e. every list is
//!   atomic). Applying again sets the new leaves, and removes the leaves the manager applied last
//!   time and no longer does, unless another manager also owns them. A leaf another manager owns
//!   with a different value is a conflict (409, listing field and manager) unless `force`, which
//!   takes the field over. Controllers write with *updates*, which take ownership of the leaves
//!   they change without conflicts. Fields set by defaults and webhooks belong to no one and
//!   survive re-applies. `status` is a subresource: applies never change it.
//! - **Defaults**: CRD structural-schema defaults ([`super::schema`]) on every write, strict field
//!   validation for CRD kinds, and the mutating webhooks of the simulated controllers
//!   ([`super::sim::admit`]).
//! - **Metadata**: `uid` and `creationTimestamp` on create, one global `resourceVersion` counter
//!   bumped by every change (an apply that changes nothing writes nothing), `generation` bumped by
//!   changes outside `metadata` and `status`.
//! - **Deletes**: an object with finalizers gets a `deletionTimestamp` and stays until its
//!   finalizers are removed; dependents (`ownerReferences`) are garbage-collected in the
//!   background; a namespace takes its objects with it.
//! - **Lists** by equality-based label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`, comma-separated).
//!
//! Not modelled: watches, list-type `map`/`set` merging (every list is atomic), version
//! conversion (objects are returned in the version they are asked for, unchanged), validation
//! beyond unknown fields, RBAC.
//!
//! The files follow those parts: `apply` (server-side apply, controller updates and creates),
//! `managed_fields` (ownership as FieldsV1), `selector` (label selectors for lists), `gc`
//! (deletes, finalizers, ownerReferences and namespace cleanup), `conditions` (the status
//! conditions the simulated controllers write) and `ids` (uids and timestamps). This file keeps
//! the store itself: keys, discovery, reads and lists.

mod apply;
mod conditions;
mod gc;
mod ids;
pub mod index;
mod managed_fields;
mod selector;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::kube::{KubeError, ResourceInfo};
use crate::vocab::object::condition_true;
pub use conditions::{child_map, remove_condition, set_condition};
pub use gc::finalizers;
pub use ids::{timestamp, uid};
use selector::Selector;

/// `(apiVersion, kind, plural, namespaced)` of every built-in kind the store serves.
pub const BUILTIN_KINDS: &[(&str, &str, &str, bool)] = &[
    ("v1", "ConfigMap", "configmaps", true),
    ("v1", "Event", "events", true),
    ("v1", "Namespace", "namespaces", false),
    ("v1", "Node", "nodes", false),
    ("v1", "Pod", "pods", true),
    ("v1", "PodTemplate", "podtemplates", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "Service", "services", true),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("apps/v1", "Deployment", "deployments", true),
    ("batch/v1", "Job", "jobs", true),
    ("coordination.k8s.io/v1", "Lease", "leases", true),
    (
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    (
        "policy/v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    (
        "apiregistration.k8s.io/v1",
        "APIService",
        "apiservices",
        false,
    ),
];

/// Where an object lives: group, kind, namespace (empty for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Key {
        Key {
            group: group_of(api_version).to_string(),
            kind: kind.to_string(),
            namespace: namespace.unwrap_or_default().to_string(),
            name: name.to_string(),
        }
    }

    pub fn of(object: &Value) -> Key {
        Key::new(
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str),
            object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )
    }

    /// The smallest key of a kind: where its objects start in key order.
    fn first_of(group: &str, kind: &str) -> Key {
        Key {
            group: group.to_string(),
            kind: kind.to_string(),
            namespace: String::new(),
            name: String::new(),
        }
    }

    fn describe(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

fn version_of(api_version: &str) -> &str {
    api_version
        .rsplit_once('/')
        .map(|(_, v)| v)
        .unwrap_or(api_version)
}

/// A field path: map keys from the root (lists are leaves).
pub type FieldPath = Vec<String>;

/// A manager's fields.
pub type FieldSet = BTreeSet<FieldPath>;

/// The stored objects and the resource-version counter.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Store {
    pub resource_version: u64,
    #[serde(with = "object_list")]
    pub objects: BTreeMap<Key, Value>,
    /// The objects written or removed since the controllers last took them (not kept on disk:
    /// a store read from a file counts as all changed).
    #[serde(skip)]
    changes: Changes,
    /// What garbage collection has to look at since it last ran (not kept on disk: a store
    /// read from a file is looked at whole).
    #[serde(skip)]
    garbage: Garbage,
    /// Objects by uid and by the owners they name, built on first use ([`index::Index`]).
    #[serde(skip)]
    index: std::sync::OnceLock<index::Index>,
    /// Controller writes attempted ([`Store::update`] calls): the work the controllers do, for
    /// tests and profiles (not kept on disk).
    #[serde(skip)]
    update_calls: u64,
}

/// What garbage collection looks at when it next runs: everything (a store just read, a
/// namespace changed), or the objects written with other owners or deletion marks and the
/// dependents of objects that went.
#[derive(Debug, Clone, PartialEq)]
struct Garbage {
    all: bool,
    keys: BTreeSet<Key>,
}

impl Default for Garbage {
    fn default() -> Self {
        Garbage {
            all: true,
            keys: BTreeSet::new(),
        }
    }
}

/// Which objects changed: each write costs the controllers only what it touched, so that
/// applying N objects is linear, not quadratic.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    /// Everything may have changed (a store just read, a controller that has not run yet).
    pub all: bool,
    pub keys: BTreeSet<Key>,
    /// The keys among `keys` whose writes changed more than `status`: creates, deletes, and
    /// writes that changed the spec or metadata (generation, labels, finalizers, deletion
    /// mark). A key written only in its status is in `keys` alone.
    spec_keys: BTreeSet<Key>,
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            all: true,
            keys: BTreeSet::new(),
            spec_keys: BTreeSet::new(),
        }
    }
}

impl Changes {
    pub fn none() -> Changes {
        Changes {
            all: false,
            keys: BTreeSet::new(),
            spec_keys: BTreeSet::new(),
        }
    }

    pub fn merge(&mut self, other: Changes) {
        self.all |= other.all;
        if !self.all {
            self.keys.extend(other.keys);
            self.spec_keys.extend(other.spec_keys);
        } else {
            self.keys.clear();
            self.spec_keys.clear();
        }
    }

    /// Notes a write at `key`; `beyond_status`: it changed more than the object's status.
    fn record(&mut self, key: &Key, beyond_status: bool) {
        if self.all {
            return;
        }
        self.keys.insert(key.clone());
        if beyond_status {
            self.spec_keys.insert(key.clone());
        }
    }

    /// Keeps only the changes at keys `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(&Key) -> bool) {
        self.keys.retain(&keep);
        self.spec_keys.retain(&keep);
    }

    /// Whether a write at `key` since the last take changed more than its status (everything
    /// counts when [`Changes::all`] is set).
    pub fn changed_beyond_status(&self, key: &Key) -> bool {
        self.all || self.spec_keys.contains(key)
    }

    /// The changed objects of one kind (nothing when [`Changes::all`] is set: then everything).
    pub fn of_kind<'a>(&'a self, group: &'a str, kind: &'a str) -> impl Iterator<Item = &'a Key> {
        self.keys
            .range(Key::first_of(group, kind)..)
            .take_while(move |k| k.group == group && k.kind == kind)
    }

    /// Whether anything of this kind changed.
    pub fn touches(&self, group: &str, kind: &str) -> bool {
        self.all || self.of_kind(group, kind).next().is_some()
    }

    /// Whether an object of this kind was created, deleted, or changed outside its status: a
    /// status-only write (a queue's counts, say) does not count.
    pub fn touches_spec(&self, group: &str, kind: &str) -> bool {
        self.all
            || self
                .spec_keys
                .range(Key::first_of(group, kind)..)
                .next()
                .is_some_and(|k| k.group == group && k.kind == kind)
    }
}

/// Whether `after` differs from `before` outside `status` and the server's bookkeeping
/// (`resourceVersion`, `managedFields`): true for a create.
fn changed_beyond_status(before: Option<&Value>, after: &Value) -> bool {
    let Some(before) = before else {
        return true;
    };
    !same_outside(before, after, &["status", "metadata"])
        || !same_outside(
            &before["metadata"],
            &after["metadata"],
            &["resourceVersion", "managedFields"],
        )
}

/// Whether two objects are equal outside their top-level fields `skip`: what comparing copies
/// without those fields would say, without the copies.
fn same_outside(a: &Value, b: &Value, skip: &[&str]) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            let kept = |map: &serde_json::Map<String, Value>| {
                map.keys().filter(|k| !skip.contains(&k.as_str())).count()
            };
            kept(a) == kept(b)
                && a.iter()
                    .filter(|(k, _)| !skip.contains(&k.as_str()))
                    .all(|(k, v)| b.get(k) == Some(v))
        }
        _ => a == b,
    }
}

mod object_list {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        objects: &BTreeMap<Key, Value>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(objects.values())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<Key, Value>, D::Error> {
        let list: Vec<Value> = Vec::deserialize(d)?;
        Ok(list.into_iter().map(|o| (Key::of(&o), o)).collect())
    }
}

/// Mutating admission for writes (webhooks): `create` tells a create from an update. An error
/// rejects the write.
pub type Admit<'a> = &'a dyn Fn(&Store, &mut Value, bool) -> Result<(), String>;

impl Store {
    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Objects of a kind (any version), in key order. Keys sort by group and kind first, so
    /// this reads only that kind's objects, not the whole store.
    pub fn of_kind<'a>(&'a self, group: &'a str, kind: &'a str) -> impl Iterator<Item = &'a Value> {
        self.objects
            .range(Key::first_of(group, kind)..)
            .take_while(move |(k, _)| k.group == group && k.kind == kind)
            .map(|(_, v)| v)
    }

    pub fn keys_of_kind(&self, group: &str, kind: &str) -> Vec<Key> {
        self.objects
            .range(Key::first_of(group, kind)..)
            .take_while(|(k, _)| k.group == group && k.kind == kind)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// How many controller writes were attempted (see [`Store::update`]).
    pub fn update_calls(&self) -> u64 {
        self.update_calls
    }

    /// Whether anything changed since [`Store::take_changes`] was last called.
    pub fn has_changes(&self) -> bool {
        self.changes.all || !self.changes.keys.is_empty()
    }

    /// What changed since the last [`Store::take_changes`], without taking it.
    pub fn pending_changes(&self) -> &Changes {
        &self.changes
    }

    /// What changed since the last call (see [`Changes`]).
    pub fn take_changes(&mut self) -> Changes {
        std::mem::replace(&mut self.changes, Changes::none())
    }

    /// Stores `object` at `key`, noting the change.
    fn put(&mut self, key: Key, object: Value) {
        // Garbage collection looks again when owners or deletion marks change, or namespaces.
        fn owners(o: Option<&Value>) -> Option<&Value> {
            o.and_then(|o| o.pointer("/metadata/ownerReferences"))
        }
        fn marked(o: Option<&Value>) -> bool {
            o.is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some())
        }
        let before = self.objects.get(&key);
        if key.group.is_empty() && key.kind == "Namespace" {
            self.garbage.all = true;
        } else if owners(before) != owners(Some(&object)) || marked(before) != marked(Some(&object))
        {
            self.garbage.keys.insert(key.clone());
        }
        if let Some(index) = self.index.get_mut() {
            if let Some(before) = before {
                index.remove(&key, before);
            }
            index.add(&key, &object);
        }
        let beyond_status = changed_beyond_status(before, &object);
        self.changes.record(&key, beyond_status);
        self.objects.insert(key, object);
    }

    /// Removes the object at `key`, noting the change.
    fn remove(&mut self, key: &Key) {
        if let Some(gone) = self.objects.remove(key) {
            // Its dependents may have lost their last owner.
            let dependents = self
                .index()
                .dependents(&key.namespace, &key.kind, &key.name)
                .cloned()
                .unwrap_or_default();
            self.garbage.keys.extend(dependents);
            if !key.namespace.is_empty() && self.terminating(&key.namespace) {
                // The namespace goes once it is empty.
                self.garbage.all = true;
            }
            if let Some(index) = self.index.get_mut() {
                index.remove(key, &gone);
            }
            self.changes.record(key, true);
        }
        self.resource_version += 1;
    }

    /// The lookups by uid and owner ([`index::Index`]).
    pub fn index(&self) -> &index::Index {
        self.index
            .get_or_init(|| index::Index::build(&self.objects))
    }

    /// Whether namespace `name` is being deleted.
    fn terminating(&self, name: &str) -> bool {
        self.get(&Key::new("v1", "Namespace", None, name))
            .is_some_and(|n| n.pointer("/metadata/deletionTimestamp").is_some())
    }

    /// Discovery: what serves `apiVersion` `kind`, if anything.
    pub fn discover(&self, api_version: &str, kind: &str) -> Option<ResourceInfo> {
        if let Some((_, _, plural, namespaced)) = BUILTIN_KINDS
            .iter()
            .find(|(a, k, _, _)| *a == api_version && *k == kind)
        {
            return Some(ResourceInfo {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
                namespaced: *namespaced,
            });
        }
        let crd = self.crd_for(api_version, kind)?;
        Some(ResourceInfo {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            plural: crd
                .pointer("/spec/names/plural")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            namespaced: crd.pointer("/spec/scope").and_then(Value::as_str) == Some("Namespaced"),
        })
    }

    /// The established CRD serving `apiVersion` `kind`.
    pub fn crd_for(&self, api_version: &str, kind: &str) -> Option<&Value> {
        let (group, version) = (group_of(api_version), version_of(api_version));
        self.of_kind("apiextensions.k8s.io", "CustomResourceDefinition")
            .find(|crd| {
                crd.pointer("/spec/group").and_then(Value::as_str) == Some(group)
                    && crd.pointer("/spec/names/kind").and_then(Value::as_str) == Some(kind)
                    && crd.pointer("/metadata/deletionTimestamp").is_none()
                    && condition_true(crd, "Established")
                    && crd
                        .pointer("/spec/versions")
                        .and_then(Value::as_array)
                        .is_some_and(|vs| {
                            vs.iter().any(|v| {
                                v["name"] == version && v["served"].as_bool() != Some(false)
                            })
                        })
            })
    }

    fn namespace_exists(&self, namespace: &str) -> bool {
        self.objects
            .get(&Key::new("v1", "Namespace", None, namespace))
            .is_some_and(|ns| ns.pointer("/metadata/deletionTimestamp").is_none())
    }

    fn next_version(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    /// Every object of `info`'s kind matching `selector`, across namespaces, in the requested
    /// version.
    pub fn list(&self, info: &ResourceInfo, selector: &str) -> Result<Vec<Value>, KubeError> {
        let selector = Selector::parse(selector).map_err(|message| KubeError::Invalid {
            object: format!("list {}", info.kind),
            message,
        })?;
        let (group, kind) = (group_of(&info.api_version), info.kind.as_str());
        // With a `label=value` requirement, only the objects carrying it are read (the label
        // index), else every object of the kind; both in key order.
        let matching: Vec<&Value> = match selector.equality() {
            Some((label, value)) => self
                .index()
                .labelled(label, value)
                .into_iter()
                .flatten()
                .filter(|k| k.group == group && k.kind == kind)
                .filter_map(|k| self.objects.get(k))
                .collect(),
            None => self.of_kind(group, kind).collect(),
        };
        Ok(matching
            .into_iter()
            .filter(|o| selector.matches(o))
            .map(|o| in_version(o, &info.api_version))
            .collect())
    }
}

/// The object as read in `api_version` (the store does not convert between versions).
pub fn in_version(object: &Value, api_version: &str) -> Value {
    let mut o = object.clone();
    o["apiVersion"] = json!(api_version);
    o
}

/// Namespaces every cluster starts with.
pub fn initial_namespaces() -> Vec<Value> {
    ["default", "kube-system", "kube-public", "kube-node-lease"]
        .iter()
        .map(|ns| {
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::managed_fields::{from_fields_v1, managed_entries, to_fields_v1};
    use super::*;

    fn no_admission(_: &Store, _: &mut Value, _: bool) -> Result<(), String> {
        Ok(())
    }

    fn store() -> Store {
        let mut s = Store::default();
        for ns in initial_namespaces() {
            s.create(ns, "system", 0);
        }
        s
    }

    fn cm_info() -> ResourceInfo {
        Store::default().discover("v1", "ConfigMap").unwrap()
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default", "labels": {"a": "1"}}, "data": data})
    }

    #[test]
    fn apply_creates_with_server_metadata_and_reapply_changes_nothing() {
        let mut s = store();
        let info = cm_info();
        let out = s
            .apply(
                &info,
                &cm(json!({"x": "1"})),
                "gkq",
                false,
                false,
                1_000,
                &no_admission,
            )
            .unwrap();
        assert!(out["metadata"]["uid"].is_string());
        assert_eq!(out["metadata"]["creationTimestamp"], "1970-01-01T00:00:01Z");
        assert_eq!(out["metadata"]["managedFields"][0]["manager"], "gkq");
        assert_eq!(
            out["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
        let rv = s.resource_version;
        let again = s
            .apply(
                &info,
                &cm(json!({"x": "1"})),
                "gkq",
                false,
                false,
                9_000,
                &no_admission,
            )
            .unwrap();
        assert_eq!(s.resource_version, rv);
        assert_eq!(again, out);
    }

    #[test]
    fn writes_honour_resource_version_and_uid_preconditions_as_the_api_server() {
        let mut s = store();
        let info = cm_info();
        let apply = |s: &mut Store, object: &Value| {
            s.apply(&info, object, "gkq", false, false, 0, &no_admission)
        };
        // A create ignores a resourceVersion, as the API server does.
        let mut stale = cm(json!({"x": "1"}));
        stale["metadata"]["resourceVersion"] = json!("999");
        let created = apply(&mut s, &stale).unwrap();
        let at = crate::kube::Version::of(&created).unwrap();
        // An update at another version is refused and changes nothing; at the stored one it goes.
        let mut edit = cm(json!({"x": "2"}));
        edit["metadata"]["resourceVersion"] = json!("999");
        assert!(matches!(
            apply(&mut s, &edit),
            Err(KubeError::Changed { .. })
        ));
        let updated = apply(&mut s, &at.condition(&cm(json!({"x": "2"})))).unwrap();
        assert_eq!(updated["data"]["x"], "2");
        // A delete at the old version (or of another uid) is refused; at the current one it goes.
        let key = Key::new("v1", "ConfigMap", Some("default"), "c");
        assert!(matches!(
            s.delete_at(&key, Some(&at), 0),
            Err(KubeError::Changed { .. })
        ));
        let now = crate::kube::Version::of(&updated).unwrap();
        let other = crate::kube::Version {
            uid: "someone-else".into(),
            ..now.clone()
        };
        assert!(s.delete_at(&key, Some(&other), 0).is_err());
        assert!(s.delete_at(&key, Some(&now), 0).unwrap());
        assert!(s.get(&key).is_none());
    }

    #[test]
    fn dropped_fields_go_unless_another_manager_owns_them_and_conflicts_need_force() {
        let mut s = store();
        let info = cm_info();
        s.apply(
            &info,
            &cm(json!({"x": "1", "y": "2"})),
            "gkq",
            false,
            false,
            0,
            &no_admission,
        )
        .unwrap();
        // another manager shares y with the same value: no conflict
        let mut other = cm(json!({"y": "2", "z": "3"}));
        other["metadata"]["labels"] = json!({});
        s.apply(&info, &other, "kubectl", false, false, 0, &no_admission)
            .unwrap();
        let out = s
            .apply(
                &info,
                &cm(json!({"x": "1"})),
                "gkq",
                false,
                false,
                0,
                &no_admission,
            )
            .unwrap();
        assert_eq!(out["data"], json!({"x": "1", "y": "2", "z": "3"}));
        // a different value for a field kubectl owns conflicts
        let err = s
            .apply(
                &info,
                &cm(json!({"x": "1", "z": "4"})),
                "gkq",
                false,
                false,
                0,
                &no_admission,
            )
            .unwrap_err();
        match &err {
            KubeError::Conflict { conflicts, .. } => {
                assert_eq!(conflicts[0].field, ".data.z");
                assert_eq!(conflicts[0].manager, "kubectl");
            }
            other => panic!("{other:?}"),
        }
        let out = s
            .apply(
                &info,
                &cm(json!({"x": "1", "z": "4"})),
                "gkq",
                true,
                false,
                0,
                &no_admission,
            )
            .unwrap();
        assert_eq!(out["data"]["z"], "4");
    }

    #[test]
    fn dry_run_changes_nothing_and_missing_namespace_is_not_found() {
        let mut s = store();
        let info = cm_info();
        let out = s
            .apply(
                &info,
                &cm(json!({"x": "1"})),
                "gkq",
                false,
                true,
                0,
                &no_admission,
            )
            .unwrap();
        assert_eq!(out["data"]["x"], "1");
        assert!(s.get(&Key::of(&out)).is_none());
        let mut elsewhere = cm(json!({}));
        elsewhere["metadata"]["namespace"] = json!("nowhere");
        match s.apply(&info, &elsewhere, "gkq", false, false, 0, &no_admission) {
            Err(KubeError::Api {
                code: 404, message, ..
            }) => {
                assert!(message.contains("nowhere"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn finalizers_hold_deletes_and_owners_take_dependents() {
        let mut s = store();
        let info = cm_info();
        let owner = s
            .apply(&info, &cm(json!({})), "gkq", false, false, 0, &no_admission)
            .unwrap();
        let dependent = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "d", "namespace": "default", "finalizers": ["x/y"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": owner["metadata"]["uid"]}]}});
        s.create(dependent.clone(), "controller", 0);
        let owner_key = Key::of(&owner);
        let dep_key = Key::of(&dependent);
        assert!(s.delete(&owner_key, false, 5_000));
        assert!(s.get(&owner_key).is_none());
        assert!(s.collect_garbage(5_000));
        assert!(s.get(&dep_key).unwrap()["metadata"]["deletionTimestamp"].is_string());
        s.update(&dep_key, "controller", false, 6_000, |o| {
            o["metadata"]["finalizers"] = json!([]);
        });
        assert!(s.get(&dep_key).is_none());
        assert!(!s.delete(&dep_key, false, 0));
    }

    #[test]
    fn controller_updates_take_ownership_without_conflicts() {
        let mut s = store();
        let info = cm_info();
        s.apply(
            &info,
            &cm(json!({"x": "1"})),
            "gkq",
            false,
            false,
            0,
            &no_admission,
        )
        .unwrap();
        let key = Key::new("v1", "ConfigMap", Some("default"), "c");
        s.update(&key, "kueue", false, 0, |o| o["data"]["x"] = json!("2"));
        let err = s
            .apply(
                &info,
                &cm(json!({"x": "1"})),
                "gkq",
                false,
                false,
                0,
                &no_admission,
            )
            .unwrap_err();
        assert!(matches!(err, KubeError::Conflict { .. }), "{err:?}");
        s.update(&key, "kueue", true, 0, |o| o["status"]["n"] = json!(1));
        s.update(&key, "kueue", true, 0, |o| o["status"]["n"] = json!(2));
        let entries = managed_entries(s.get(&key).unwrap());
        assert_eq!(
            entries
                .iter()
                .filter(|e| e.subresource.as_deref() == Some("status"))
                .count(),
            1,
            "{entries:?}"
        );
        let set: FieldSet = [
            vec!["a".to_string()],
            vec!["a".to_string(), "b".to_string()],
        ]
        .into_iter()
        .collect();
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn a_list_by_label_follows_relabels_and_deletes() {
        let mut s = store();
        let info = cm_info();
        let labelled = |name: &str, value: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "labels": {"job": value}}})
        };
        let names = |s: &Store, selector: &str| -> Vec<String> {
            s.list(&info, selector)
                .unwrap()
                .iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        // The index is built on first use, then kept by every write.
        s.create(labelled("b", "1"), "kueue", 0);
        assert_eq!(names(&s, "job=1"), ["b"]);
        s.create(labelled("a", "1"), "kueue", 0);
        s.create(labelled("c", "2"), "kueue", 0);
        s.create(
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "namespace": "default", "labels": {"job": "1"}}}),
            "kueue",
            0,
        );
        assert_eq!(names(&s, "job=1"), ["a", "b"], "key order, this kind only");
        assert_eq!(names(&s, "job=1,job!=1"), Vec::<String>::new());
        let b = Key::new("v1", "ConfigMap", Some("default"), "b");
        s.update(&b, "kueue", false, 0, |o| {
            o["metadata"]["labels"]["job"] = json!("2");
        });
        assert_eq!(names(&s, "job=1"), ["a"]);
        assert_eq!(names(&s, "job==2"), ["b", "c"]);
        assert!(s.delete(&Key::new("v1", "ConfigMap", Some("default"), "c"), false, 0));
        assert_eq!(names(&s, "job=2"), ["b"]);
        assert_eq!(names(&s, "job"), ["a", "b"]);
    }
}
