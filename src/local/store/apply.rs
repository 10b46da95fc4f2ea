//! Writes: server-side apply, which records each manager's fields in `managedFields` and
//! refuses to take another manager's fields without `force`, and the controllers' updates and
//! creates, which take the fields they change without conflicts.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::gc::finalizers;
use super::ids::{timestamp, uid};
use super::managed_fields::{ManagedEntry, Operation, managed_entries, set_managed_entries};
use super::{Admit, FieldPath, FieldSet, Key, Store, same_outside, version_of};
use crate::kube::{FieldConflict, KubeError, ResourceInfo};
use crate::local::schema;

impl Store {
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
        let key = self.apply_target(info, object, &describe)?;
        self.validate_applied(info, object).map_err(invalid)?;

        let live = self.objects.get(&key).cloned();
        check_resource_version(live.as_ref(), object, &describe)?;
        let mut applied = object.clone();
        if let Some(map) = applied.as_object_mut() {
            map.remove("status");
        }
        let applied_fields = apply_fieldset(&applied);
        let mut entries = live.as_ref().map(managed_entries).unwrap_or_default();
        let conflicts = take_conflicting_fields(
            &mut entries,
            manager,
            &applied_fields,
            live.as_ref(),
            &applied,
            force,
        );
        if !conflicts.is_empty() && !force {
            return Err(conflict_error(describe, conflicts, &info.api_version));
        }

        let create = live.is_none();
        let new = merged_object(
            info,
            &key,
            live.as_ref(),
            &applied,
            &entries,
            manager,
            &applied_fields,
        );
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

    /// The key an applied object is stored under: its name, its namespace (required for a
    /// namespaced kind, and existing), and the kind `info` names.
    fn apply_target(
        &self,
        info: &ResourceInfo,
        object: &Value,
        describe: &str,
    ) -> Result<Key, KubeError> {
        let invalid = |message: String| KubeError::Invalid {
            object: describe.to_string(),
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
                object: describe.to_string(),
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
        Ok(Key::new(&info.api_version, &info.kind, namespace, name))
    }

    /// Strict field validation against the CRD schema, as gkq's applies request, and the
    /// metadata every kind has.
    fn validate_applied(&self, info: &ResourceInfo, object: &Value) -> Result<(), String> {
        let schema = self
            .crd_for(&info.api_version, &info.kind)
            .and_then(|crd| schema::version_schema(crd, version_of(&info.api_version)));
        if let Some(schema) = schema {
            let problems = schema::problems(schema, object);
            if !problems.is_empty() {
                return Err(format!(
                    "failed to create typed patch object ({}, Kind={}): {}",
                    info.api_version,
                    info.kind,
                    problems.join(", ")
                ));
            }
        }
        validate_metadata(object)
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
        // The schema is read in place: a CRD such as JobSet's embeds whole pod templates, and
        // a copy of it for every write was about a quarter of a local apply's time.
        if let Some(schema) = self
            .crd_for(&api_version, &key.kind)
            .and_then(|crd| schema::version_schema(crd, version_of(&api_version)))
        {
            schema::apply_defaults(schema, &mut new);
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
            if !same_outside(live, &new, &["metadata", "status"]) {
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
        // The live object is read in place: only the edited copy is cloned.
        let Some(live) = self.objects.get(key) else {
            return false;
        };
        let mut new = live.clone();
        change(&mut new);
        if &new == live {
            return false;
        }
        let before: BTreeMap<FieldPath, &Value> =
            written_leaves(live, status).into_iter().collect();
        let changed: FieldSet = written_leaves(&new, status)
            .into_iter()
            .filter(|(p, v)| !is_server_metadata(p) && before.get(p).copied() != Some(*v))
            .map(|(p, _)| p)
            .collect();
        let mut entries = managed_entries(live);
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
        if !status && !same_outside(live, &new, &["metadata", "status"]) {
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
        let fields = leaves_outside(&object, &["apiVersion", "kind", "status"])
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
}

/// As the API server: a resourceVersion in the applied object is a precondition on an update,
/// and ignored on a create (docs/kubernetes-api.md 1).
fn check_resource_version(
    live: Option<&Value>,
    object: &Value,
    describe: &str,
) -> Result<(), KubeError> {
    if let (Some(live), Some(wanted)) = (live, resource_version(object))
        && resource_version(live) != Some(wanted)
    {
        return Err(KubeError::Changed {
            object: describe.to_string(),
            message: format!(
                "the object has been modified (resourceVersion {wanted} is now {})",
                resource_version(live).unwrap_or("")
            ),
        });
    }
    Ok(())
}

/// The fields of every other manager that `applied` sets to a different value (conflicts);
/// with `force`, they are taken from that manager's entry.
fn take_conflicting_fields(
    entries: &mut [ManagedEntry],
    manager: &str,
    applied_fields: &FieldSet,
    live: Option<&Value>,
    applied: &Value,
    force: bool,
) -> Vec<FieldConflict> {
    let mut conflicts = Vec::new();
    for entry in entries.iter_mut() {
        if entry.is(manager, Operation::Apply) || entry.subresource.is_some() {
            continue;
        }
        let mut taken = Vec::new();
        for field in applied_fields {
            for owned in overlapping(&entry.fields, field) {
                let shorter = if field.len() <= owned.len() {
                    field
                } else {
                    owned
                };
                let live_value = live.and_then(|l| value_at(l, shorter));
                let applied_value = value_at(applied, shorter);
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
    conflicts
}

/// The API server's answer to an apply that conflicts without `force`.
fn conflict_error(
    describe: String,
    mut conflicts: Vec<FieldConflict>,
    api_version: &str,
) -> KubeError {
    conflicts.dedup();
    let message = format!(
        "Apply failed with {} conflict{}: {}",
        conflicts.len(),
        if conflicts.len() == 1 { "" } else { "s" },
        conflicts
            .iter()
            .map(|c| format!(
                "conflict with \"{}\" using {}: {}",
                c.manager, api_version, c.field
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    KubeError::Conflict {
        object: describe,
        conflicts,
        message,
    }
}

/// The live object (or a new one) with `applied` merged in, less the leaves `manager` applied
/// before and no longer does (unless another manager owns them too).
fn merged_object(
    info: &ResourceInfo,
    key: &Key,
    live: Option<&Value>,
    applied: &Value,
    entries: &[ManagedEntry],
    manager: &str,
    applied_fields: &FieldSet,
) -> Value {
    let mut new = live.cloned().unwrap_or_else(
        || json!({"apiVersion": info.api_version, "kind": info.kind, "metadata": {"name": key.name}}),
    );
    if !key.namespace.is_empty() {
        new["metadata"]["namespace"] = json!(key.namespace);
    }
    let previous: FieldSet = entries
        .iter()
        .find(|e| e.is(manager, Operation::Apply))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    for field in previous.difference(applied_fields) {
        let shared = entries
            .iter()
            .filter(|e| !e.is(manager, Operation::Apply))
            .any(|e| !overlapping(&e.fields, field).is_empty());
        if !shared {
            remove_at(&mut new, field);
        }
    }
    merge(&mut new, applied);
    new["apiVersion"] = json!(info.api_version);
    new
}

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

fn resource_version(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
}

fn has_spec(object: &Value) -> bool {
    object.get("spec").is_some()
}

/// The leaves a controller's update may change: the status's (`status`), or everything but the
/// status, `apiVersion` and `kind`.
fn written_leaves(object: &Value, status: bool) -> Vec<(FieldPath, &Value)> {
    if status {
        let mut path = vec!["status".to_string()];
        leaves(object.get("status").unwrap_or(&Value::Null), &mut path)
    } else {
        leaves_outside(object, &["apiVersion", "kind", "status"])
    }
}

/// [`leaves`] of `object` less its top-level fields `skip`.
fn leaves_outside<'v>(object: &'v Value, skip: &[&str]) -> Vec<(FieldPath, &'v Value)> {
    let mut out = Vec::new();
    for (k, v) in object.as_object().into_iter().flatten() {
        if skip.contains(&k.as_str()) {
            continue;
        }
        let mut path = vec![k.clone()];
        out.extend(leaves(v, &mut path));
    }
    out
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
fn apply_fieldset(object: &Value) -> FieldSet {
    leaves_outside(object, &["apiVersion", "kind", "status"])
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !is_server_metadata(p))
        .collect()
}

/// Every leaf of `value` with its path: scalars, lists and empty maps.
fn leaves<'v>(value: &'v Value, path: &mut FieldPath) -> Vec<(FieldPath, &'v Value)> {
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
                vec![(path.clone(), other)]
            }
        }
    }
}

fn value_at<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
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
