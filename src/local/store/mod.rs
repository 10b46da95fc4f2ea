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

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::vocab::object::condition_true;

use super::schema;
use crate::kube::{FieldConflict, KubeError, ResourceInfo};

/// `(apiVersion, kind, plural, namespaced)` of every built-in kind the store serves.
pub const BUILTIN_KINDS: &[(&str, &str, &str, bool)] = &[
    ("v1", "ConfigMap", "configmaps", true),
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

/// The fields in `set` that overlap `field` (one is a prefix of the other), without scanning the
/// whole set: CRDs have tens of thousands of leaves.
fn overlapping<'a>(set: &'a FieldSet, field: &FieldPath) -> Vec<&'a FieldPath> {
    let mut out: Vec<&FieldPath> = (0..field.len())
        .filter_map(|n| set.get(&field[..n].to_vec()))
        .collect();
    out.extend(
        set.range(field.clone()..)
            .take_while(|f| f.starts_with(field)),
    );
    out
}

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
    /// Whether garbage collection has nothing to do: no object went, was marked for deletion
    /// or was written with owners since it last ran (not kept on disk).
    #[serde(skip)]
    collected: bool,
    /// Controller writes attempted ([`Store::update`] calls): the work the controllers do, for
    /// tests and profiles (not kept on disk).
    #[serde(skip)]
    update_calls: u64,
}

/// Which objects changed: each write costs the controllers only what it touched, so that
/// applying N objects is linear, not quadratic.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    /// Everything may have changed (a store just read, a controller that has not run yet).
    pub all: bool,
    pub keys: BTreeSet<Key>,
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            all: true,
            keys: BTreeSet::new(),
        }
    }
}

impl Changes {
    pub fn none() -> Changes {
        Changes {
            all: false,
            keys: BTreeSet::new(),
        }
    }

    pub fn merge(&mut self, other: Changes) {
        self.all |= other.all;
        if !self.all {
            self.keys.extend(other.keys);
        } else {
            self.keys.clear();
        }
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

/// RFC 3339 with second precision, as Kubernetes writes `metadata.creationTimestamp`.
pub fn timestamp(ms: u64) -> String {
    crate::vocab::time::format_seconds(crate::vocab::time::from_unix_ms(ms))
}

/// A UUID-shaped id derived from `seed`.
pub fn uid(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// How a write is recorded in `managedFields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
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
        if owners(before) != owners(Some(&object))
            || marked(before) != marked(Some(&object))
            || (key.group.is_empty() && key.kind == "Namespace")
        {
            self.collected = false;
        }
        if !self.changes.all {
            self.changes.keys.insert(key.clone());
        }
        self.objects.insert(key, object);
    }

    /// Removes the object at `key`, noting the change.
    fn remove(&mut self, key: &Key) {
        if self.objects.remove(key).is_some() {
            self.collected = false;
            if !self.changes.all {
                self.changes.keys.insert(key.clone());
            }
        }
        self.resource_version += 1;
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
        Ok(self
            .of_kind(group_of(&info.api_version), &info.kind)
            .filter(|o| selector.matches(o))
            .map(|o| in_version(o, &info.api_version))
            .collect())
    }

    /// Server-side apply of `object` by `manager`. Returns what is (or, with `dry_run`, would
    /// be) stored.
    #[allow(clippy::too_many_arguments)]
    pub fn apply(
        &mut self,
        info: &ResourceInfo,
        object: &Value,
        manager: &str,
        force: bool,
        dry_run: bool,
        now: u64,
        admit: Admit<'_>,
    ) -> Result<Value, KubeError> {
        let describe = crate::kube::describe(object);
        let invalid = |message: String| KubeError::Invalid {
            object: describe.clone(),
            message,
        };
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| invalid("metadata.name: Required value: name is required".into()))?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let namespace = match (info.namespaced, namespace) {
            (true, Some(ns)) if !ns.is_empty() => Some(ns),
            (true, _) => {
                return Err(invalid(
                    "metadata.namespace: Required value: the kind is namespaced".into(),
                ));
            }
            (false, _) => None,
        };
        if let Some(ns) = namespace
            && !self.namespace_exists(ns)
        {
            return Err(KubeError::Api {
                object: describe,
                code: 404,
                reason: "NotFound".into(),
                message: format!("namespaces \"{ns}\" not found"),
            });
        }
        if object["apiVersion"] != info.api_version.as_str() || object["kind"] != info.kind.as_str()
        {
            return Err(invalid(format!(
                "the object is {} {}, not {} {}",
                object["apiVersion"], object["kind"], info.api_version, info.kind
            )));
        }
        let key = Key::new(&info.api_version, &info.kind, namespace, name);

        // Strict field validation against the CRD schema, as gkq's applies request.
        let schema = self
            .crd_for(&info.api_version, &info.kind)
            .and_then(|crd| schema::version_schema(crd, version_of(&info.api_version)))
            .cloned();
        if let Some(schema) = &schema {
            let problems = schema::problems(schema, object);
            if !problems.is_empty() {
                return Err(invalid(format!(
                    "failed to create typed patch object ({}, Kind={}): {}",
                    info.api_version,
                    info.kind,
                    problems.join(", ")
                )));
            }
        }
        validate_metadata(object).map_err(invalid)?;

        let live = self.objects.get(&key).cloned();
        let mut applied = object.clone();
        if let Some(map) = applied.as_object_mut() {
            map.remove("status");
        }
        let applied_fields = apply_fieldset(&applied);
        let mut entries = live.as_ref().map(managed_entries).unwrap_or_default();

        // Conflicts with every other manager's fields.
        let mut conflicts = Vec::new();
        for entry in entries.iter_mut() {
            if entry.is(manager, Operation::Apply) || entry.subresource.is_some() {
                continue;
            }
            let mut taken = Vec::new();
            for field in &applied_fields {
                for owned in overlapping(&entry.fields, field) {
                    let shorter = if field.len() <= owned.len() {
                        field
                    } else {
                        owned
                    };
                    let live_value = live.as_ref().and_then(|l| value_at(l, shorter));
                    let applied_value = value_at(&applied, shorter);
                    // An empty map owns no keys inside it: no conflict with deeper fields.
                    if field != owned
                        && (applied_value.is_some_and(Value::is_object)
                            || live_value.is_some_and(Value::is_object))
                    {
                        continue;
                    }
                    if live_value != applied_value {
                        conflicts.push(FieldConflict {
                            field: format!(".{}", owned.join(".")),
                            manager: entry.manager.clone(),
                        });
                        taken.push(owned.clone());
                    }
                }
            }
            if force {
                for f in &taken {
                    entry.fields.remove(f);
                }
            }
        }
        if !conflicts.is_empty() && !force {
            conflicts.dedup();
            let message = format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                conflicts
                    .iter()
                    .map(|c| format!(
                        "conflict with \"{}\" using {}: {}",
                        c.manager, info.api_version, c.field
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            return Err(KubeError::Conflict {
                object: describe,
                conflicts,
                message,
            });
        }

        let create = live.is_none();
        let mut new = live.clone().unwrap_or_else(|| {
            json!({"apiVersion": info.api_version, "kind": info.kind, "metadata": {"name": name}})
        });
        if let Some(ns) = namespace {
            new["metadata"]["namespace"] = json!(ns);
        }
        // Leaves this manager applied before and no longer does go, unless someone else owns them.
        let previous: FieldSet = entries
            .iter()
            .find(|e| e.is(manager, Operation::Apply))
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        for field in previous.difference(&applied_fields) {
            let shared = entries
                .iter()
                .filter(|e| !e.is(manager, Operation::Apply))
                .any(|e| !overlapping(&e.fields, field).is_empty());
            if !shared {
                remove_at(&mut new, field);
            }
        }
        merge(&mut new, &applied);
        new["apiVersion"] = json!(info.api_version);

        entries.retain(|e| !e.is(manager, Operation::Apply));
        entries.push(ManagedEntry {
            manager: manager.to_string(),
            operation: Operation::Apply,
            api_version: info.api_version.clone(),
            time: timestamp(now),
            subresource: None,
            fields: applied_fields,
        });
        self.finish_write(
            &key,
            live.as_ref(),
            new,
            entries,
            now,
            create,
            dry_run,
            admit,
        )
        .map_err(|e| match e {
            KubeError::Invalid { message, .. } => KubeError::Invalid {
                object: key.describe(),
                message,
            },
            other => other,
        })
    }

    /// Defaults, admission, metadata, and the write itself (unless `dry_run`).
    #[allow(clippy::too_many_arguments)]
    fn finish_write(
        &mut self,
        key: &Key,
        live: Option<&Value>,
        mut new: Value,
        mut entries: Vec<ManagedEntry>,
        now: u64,
        create: bool,
        dry_run: bool,
        admit: Admit<'_>,
    ) -> Result<Value, KubeError> {
        let api_version = new["apiVersion"].as_str().unwrap_or_default().to_string();
        if let Some(schema) = self
            .crd_for(&api_version, &key.kind)
            .and_then(|crd| schema::version_schema(crd, version_of(&api_version)))
            .cloned()
        {
            schema::apply_defaults(&schema, &mut new);
        }
        admit(self, &mut new, create).map_err(|message| KubeError::Invalid {
            object: key.describe(),
            message,
        })?;
        entries.retain(|e| !e.fields.is_empty());
        if create {
            let seed = format!("{key:?}/{now}/{}", self.resource_version);
            new["metadata"]["uid"] = json!(uid(&seed));
            new["metadata"]["creationTimestamp"] = json!(timestamp(now));
            if has_spec(&new) {
                new["metadata"]["generation"] = json!(1);
            }
        }
        set_managed_entries(&mut new, &entries);
        if let Some(live) = live {
            if same_ignoring_times(live, &new) {
                return Ok(live.clone());
            }
            if without(live, &["metadata", "status"]) != without(&new, &["metadata", "status"]) {
                let generation = live
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                new["metadata"]["generation"] = json!(generation + 1);
            }
        }
        if dry_run {
            // As the API server: a dry-run create has no resourceVersion yet.
            return Ok(new);
        }
        new["metadata"]["resourceVersion"] = json!(self.next_version());
        self.put(key.clone(), new.clone());
        Ok(new)
    }

    /// A controller's write: `change` edits the object (`status` only when `status` is set);
    /// the manager takes ownership of the leaves it changed. Returns whether anything changed.
    /// An object being deleted goes when its last finalizer does.
    pub fn update(
        &mut self,
        key: &Key,
        manager: &str,
        status: bool,
        now: u64,
        change: impl FnOnce(&mut Value),
    ) -> bool {
        self.update_calls += 1;
        let Some(live) = self.objects.get(key).cloned() else {
            return false;
        };
        let mut new = live.clone();
        change(&mut new);
        if new == live {
            return false;
        }
        let scope = |o: &Value| -> Value {
            if status {
                json!({"status": o.get("status").cloned().unwrap_or(Value::Null)})
            } else {
                without(o, &["apiVersion", "kind", "status"])
            }
        };
        let before: BTreeMap<FieldPath, Value> =
            leaves(&scope(&live), &mut Vec::new()).into_iter().collect();
        let changed: FieldSet = leaves(&scope(&new), &mut Vec::new())
            .into_iter()
            .filter(|(p, v)| !is_server_metadata(p) && before.get(p) != Some(v))
            .map(|(p, _)| p)
            .collect();
        let mut entries = managed_entries(&live);
        for entry in entries.iter_mut() {
            for c in &changed {
                let owned: Vec<FieldPath> =
                    overlapping(&entry.fields, c).into_iter().cloned().collect();
                for o in owned {
                    entry.fields.remove(&o);
                }
            }
        }
        let subresource = status.then(|| "status".to_string());
        match entries.iter_mut().find(|e| {
            e.manager == manager && e.operation == Operation::Update && e.subresource == subresource
        }) {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = timestamp(now);
            }
            None if !changed.is_empty() => entries.push(ManagedEntry {
                manager: manager.to_string(),
                operation: Operation::Update,
                api_version: live["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: timestamp(now),
                subresource,
                fields: changed,
            }),
            None => {}
        }
        entries.retain(|e| !e.fields.is_empty());
        set_managed_entries(&mut new, &entries);
        if !status
            && without(&live, &["metadata", "status"]) != without(&new, &["metadata", "status"])
        {
            let generation = live
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        if new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty() {
            self.remove(key);
            return true;
        }
        new["metadata"]["resourceVersion"] = json!(self.next_version());
        self.put(key.clone(), new);
        true
    }

    /// A controller's create (an update of the whole object); `false` if it exists already.
    pub fn create(&mut self, mut object: Value, manager: &str, now: u64) -> bool {
        let key = Key::of(&object);
        if self.objects.contains_key(&key) {
            return false;
        }
        let fields = leaves(
            &without(&object, &["apiVersion", "kind", "status"]),
            &mut Vec::new(),
        )
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !is_server_metadata(p))
        .collect::<FieldSet>();
        let seed = format!("{key:?}/{now}/{}", self.resource_version);
        object["metadata"]["uid"] = json!(uid(&seed));
        object["metadata"]["creationTimestamp"] = json!(timestamp(now));
        if has_spec(&object) {
            object["metadata"]["generation"] = json!(1);
        }
        let entries = vec![ManagedEntry {
            manager: manager.to_string(),
            operation: Operation::Update,
            api_version: object["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            time: timestamp(now),
            subresource: None,
            fields,
        }];
        set_managed_entries(&mut object, &entries);
        object["metadata"]["resourceVersion"] = json!(self.next_version());
        self.put(key, object);
        true
    }

    /// Deletes an object: at once without finalizers, else it is marked and waits for them.
    /// `Ok(false)` when it does not exist.
    pub fn delete(&mut self, key: &Key, dry_run: bool, now: u64) -> bool {
        let Some(live) = self.objects.get(key) else {
            return false;
        };
        if dry_run || live.pointer("/metadata/deletionTimestamp").is_some() {
            return true;
        }
        let is_namespace = key.group.is_empty() && key.kind == "Namespace";
        if finalizers(live).is_empty() && !is_namespace {
            self.remove(key);
            return true;
        }
        let mut marked = live.clone();
        marked["metadata"]["deletionTimestamp"] = json!(timestamp(now));
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if is_namespace {
            marked["status"] = json!({"phase": "Terminating"});
        }
        marked["metadata"]["resourceVersion"] = json!(self.next_version());
        self.put(key.clone(), marked);
        true
    }

    /// Background garbage collection and namespace cleanup, as kube-controller-manager does
    /// them: dependents of deleted owners are deleted; a terminating namespace's objects are
    /// deleted and the namespace goes once it is empty. Returns whether anything changed.
    ///
    /// It runs only when something it depends on changed since it last ran: an object went or
    /// was marked for deletion, or was written with owners, or a namespace changed.
    pub fn collect_garbage(&mut self, now: u64) -> bool {
        let mut changed = false;
        if self.collected {
            return false;
        }
        loop {
            let uids: BTreeSet<String> = self
                .objects
                .values()
                .filter_map(|o| o.pointer("/metadata/uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect();
            let terminating: BTreeSet<String> = self
                .of_kind("", "Namespace")
                .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
                .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
                .map(str::to_string)
                .collect();
            let doomed: Vec<Key> = self
                .objects
                .iter()
                .filter(|(k, o)| {
                    o.pointer("/metadata/deletionTimestamp").is_none()
                        && (terminating.contains(&k.namespace)
                            || o.pointer("/metadata/ownerReferences")
                                .and_then(Value::as_array)
                                .is_some_and(|refs| {
                                    !refs.is_empty()
                                        && refs.iter().all(|r| {
                                            !r["uid"].as_str().is_some_and(|u| uids.contains(u))
                                        })
                                }))
                })
                .map(|(k, _)| k.clone())
                .collect();
            let empty_namespaces: Vec<Key> = terminating
                .iter()
                .filter(|ns| !self.objects.keys().any(|k| &k.namespace == *ns))
                .map(|ns| Key::new("v1", "Namespace", None, ns))
                .collect();
            if doomed.is_empty() && empty_namespaces.is_empty() {
                // Until something it depends on changes again (objects waiting for finalizers
                // in a terminating namespace go through `update`, which says so).
                self.collected = true;
                return changed;
            }
            for key in doomed {
                self.delete(&key, false, now);
            }
            for key in empty_namespaces {
                self.remove(&key);
            }
            changed = true;
        }
    }
}

/// ObjectMeta as the API server checks it for every kind: a map, with string maps for labels
/// and annotations and a list of strings for finalizers.
fn validate_metadata(object: &Value) -> Result<(), String> {
    let Some(meta) = object.get("metadata").and_then(Value::as_object) else {
        return Err("metadata: Required value: metadata must be a map".into());
    };
    for field in ["labels", "annotations"] {
        match meta.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                if let Some((k, _)) = map.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}.{k}: Invalid value: the value must be a string"
                    ));
                }
            }
            Some(_) => return Err(format!("metadata.{field}: Invalid value: must be a map")),
        }
    }
    match meta.get("finalizers") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => Ok(()),
        Some(_) => Err("metadata.finalizers: Invalid value: must be a list of strings".into()),
    }
}

/// The object as read in `api_version` (the store does not convert between versions).
pub fn in_version(object: &Value, api_version: &str) -> Value {
    let mut o = object.clone();
    o["apiVersion"] = json!(api_version);
    o
}

/// Sets `status.conditions[type]`, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(
    object: &mut Value,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: u64,
) {
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = object["status"]["conditions"].as_array_mut() else {
        return;
    };
    let time = match conditions.iter().find(|c| c["type"] == kind) {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(timestamp(now)),
    };
    let condition = json!({"type": kind, "status": status, "reason": reason,
        "message": message, "lastTransitionTime": time});
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

/// `value[key]` as a map, created when absent or null; `None` when `value` is not a map or the
/// key holds something else (the simulation never panics on an odd object).
pub fn child_map<'a>(
    value: &'a mut Value,
    key: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let child = value
        .as_object_mut()?
        .entry(key)
        .or_insert_with(|| json!({}));
    if child.is_null() {
        *child = json!({});
    }
    child.as_object_mut()
}

pub fn remove_condition(object: &mut Value, kind: &str) {
    if let Some(conditions) = object
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        conditions.retain(|c| c["type"] != kind);
    }
}

pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn has_spec(object: &Value) -> bool {
    object.get("spec").is_some()
}

fn without(object: &Value, keys: &[&str]) -> Value {
    let mut o = object.clone();
    if let Some(map) = o.as_object_mut() {
        for k in keys {
            map.remove(*k);
        }
    }
    o
}

fn same_ignoring_times(a: &Value, b: &Value) -> bool {
    let strip = |o: &Value| {
        let mut o = o.clone();
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            if let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
                for e in entries {
                    if let Some(e) = e.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        o
    };
    strip(a) == strip(b)
}

/// Metadata the server owns (never part of a manager's fields).
fn is_server_metadata(path: &[String]) -> bool {
    matches!(
        path,
        [m, f, ..] if m == "metadata" && matches!(f.as_str(),
            "name" | "namespace" | "uid" | "resourceVersion" | "generation" | "creationTimestamp"
            | "managedFields" | "deletionTimestamp" | "deletionGracePeriodSeconds" | "selfLink")
    )
}

/// The leaves an applied object sets (what its manager owns).
pub fn apply_fieldset(object: &Value) -> FieldSet {
    leaves(
        &without(object, &["apiVersion", "kind", "status"]),
        &mut Vec::new(),
    )
    .into_iter()
    .map(|(p, _)| p)
    .filter(|p| !is_server_metadata(p))
    .collect()
}

/// Every leaf of `value` with its path: scalars, lists and empty maps.
fn leaves(value: &Value, path: &mut FieldPath) -> Vec<(FieldPath, Value)> {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let mut out = Vec::new();
            for (k, v) in map {
                path.push(k.clone());
                out.extend(leaves(v, path));
                path.pop();
            }
            out
        }
        other => {
            if path.is_empty() {
                Vec::new()
            } else {
                vec![(path.clone(), other.clone())]
            }
        }
    }
}

pub fn value_at<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut current = value;
    for key in path {
        current = current.get(key)?;
    }
    Some(current)
}

/// Removes the field at `path`, and parent maps it leaves empty (below the top level).
fn remove_at(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let Some(parent) = parents
        .iter()
        .try_fold(&mut *value, |v, k| v.get_mut(k))
        .and_then(Value::as_object_mut)
    {
        parent.remove(last);
        if parent.is_empty() && parents.len() > 1 {
            remove_at(value, parents);
        }
    }
}

/// Merges `patch` into `target`: maps key by key, everything else replaced.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                match t.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
struct ManagedEntry {
    manager: String,
    operation: Operation,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

impl ManagedEntry {
    fn is(&self, manager: &str, operation: Operation) -> bool {
        self.manager == manager && self.operation == operation && self.subresource.is_none()
    }
}

fn managed_entries(object: &Value) -> Vec<ManagedEntry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| ManagedEntry {
                    manager: e["manager"].as_str().unwrap_or_default().to_string(),
                    operation: if e["operation"] == "Apply" {
                        Operation::Apply
                    } else {
                        Operation::Update
                    },
                    api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                    time: e["time"].as_str().unwrap_or_default().to_string(),
                    subresource: e["subresource"].as_str().map(str::to_string),
                    fields: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn set_managed_entries(object: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation.name(),
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if let Some(s) = &e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Field paths as FieldsV1 (`{"f:spec": {"f:suspend": {}}}`).
fn to_fields_v1(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    // Longer paths first, so that a leaf that is also a parent gets its `.` marker.
    for path in fields.iter().rev() {
        let mut node = &mut root;
        for key in path {
            node = node
                .entry(format!("f:{key}"))
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("built as objects");
        }
        if path.is_empty() {
            continue;
        }
        if !node.is_empty() {
            node.insert(".".into(), json!({}));
        }
    }
    Value::Object(root)
}

fn from_fields_v1(value: &Value) -> FieldSet {
    fn walk(node: &Map<String, Value>, path: &mut FieldPath, out: &mut FieldSet) {
        let children: Vec<(&String, &Value)> =
            node.iter().filter(|(k, _)| k.starts_with("f:")).collect();
        if (children.is_empty() || node.contains_key(".")) && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, v) in children {
            path.push(k[2..].to_string());
            if let Some(child) = v.as_object() {
                walk(child, path, out);
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Some(map) = value.as_object() {
        walk(map, &mut Vec::new(), &mut out);
    }
    out
}

/// An equality-based label selector.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    requirements: Vec<(String, Requirement)>,
}

#[derive(Debug, Clone)]
enum Requirement {
    Equals(String),
    NotEquals(String),
    Exists,
    NotExists,
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let requirement = if let Some((k, v)) = part.split_once("!=") {
                (
                    k.trim().to_string(),
                    Requirement::NotEquals(v.trim().into()),
                )
            } else if let Some((k, v)) = part.split_once("==") {
                (k.trim().to_string(), Requirement::Equals(v.trim().into()))
            } else if let Some((k, v)) = part.split_once('=') {
                (k.trim().to_string(), Requirement::Equals(v.trim().into()))
            } else if let Some(k) = part.strip_prefix('!') {
                (k.trim().to_string(), Requirement::NotExists)
            } else if part.contains(' ') || part.contains('(') {
                return Err(format!(
                    "unable to parse requirement {part:?}: the local target supports equality-based selectors only"
                ));
            } else {
                (part.to_string(), Requirement::Exists)
            };
            if requirement.0.is_empty() {
                return Err(format!("unable to parse requirement {part:?}: empty key"));
            }
            requirements.push(requirement);
        }
        Ok(Selector { requirements })
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|(k, r)| match r {
            Requirement::Equals(v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(v) => get(k) != Some(v.as_str()),
            Requirement::Exists => get(k).is_some(),
            Requirement::NotExists => get(k).is_none(),
        })
    }
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
    fn selectors_are_equality_based() {
        let o = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        assert!(Selector::parse("a=1,b==2").unwrap().matches(&o));
        assert!(Selector::parse("a,!c,b!=3").unwrap().matches(&o));
        assert!(!Selector::parse("a=2").unwrap().matches(&o));
        assert!(Selector::parse("").unwrap().matches(&o));
        assert!(Selector::parse("a in (1)").is_err());
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
}
