//! Deletion as the API server and kube-controller-manager do it: finalizers hold a delete,
//! dependents follow their owners (ownerReferences), and a terminating namespace takes its
//! objects with it.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::ids::timestamp;
use super::{Key, Store};
use crate::kube::{KubeError, Version};

impl Store {
    /// [`Store::delete`] if the object is still at `version` (the API server's delete
    /// preconditions); [`KubeError::Changed`] if it is not.
    pub fn delete_at(
        &mut self,
        key: &Key,
        version: Option<&Version>,
        now: u64,
    ) -> Result<bool, KubeError> {
        if let (Some(live), Some(version)) = (self.objects.get(key), version)
            && Version::of(live).as_ref() != Some(version)
        {
            return Err(KubeError::Changed {
                object: key.describe(),
                message: format!(
                    "the uid and resourceVersion in the precondition ({}, {}) do not match the object's",
                    version.uid, version.resource_version
                ),
            });
        }
        Ok(self.delete(key, false, now))
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
    /// It looks only at what may have changed since it last ran: the objects written with other
    /// owners or deletion marks and the dependents of objects that went ([`super::index`]);
    /// everything after a namespace changed or when the store was just read.
    pub fn collect_garbage(&mut self, now: u64) -> bool {
        let mut changed = false;
        loop {
            let (doomed, empty_namespaces) = if self.garbage.all {
                self.garbage_everywhere()
            } else {
                let keys = std::mem::take(&mut self.garbage.keys);
                let doomed = keys
                    .into_iter()
                    .filter(|k| self.objects.get(k).is_some_and(|o| self.orphaned(o)))
                    .collect();
                (doomed, Vec::new())
            };
            self.garbage.all = false;
            self.garbage.keys.clear();
            if doomed.is_empty() && empty_namespaces.is_empty() {
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

    /// Whether `object` (not being deleted) has owners and none of them exists any more.
    fn orphaned(&self, object: &Value) -> bool {
        let index = self.index();
        object.pointer("/metadata/deletionTimestamp").is_none()
            && object
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    !refs.is_empty()
                        && refs
                            .iter()
                            .all(|r| r["uid"].as_str().is_none_or(|u| index.by_uid(u).is_none()))
                })
    }

    /// Every object to delete (orphaned, or in a terminating namespace) and the terminating
    /// namespaces that are empty.
    fn garbage_everywhere(&self) -> (Vec<Key>, Vec<Key>) {
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
                (terminating.contains(&k.namespace)
                    && o.pointer("/metadata/deletionTimestamp").is_none())
                    || self.orphaned(o)
            })
            .map(|(k, _)| k.clone())
            .collect();
        let empty_namespaces: Vec<Key> = terminating
            .iter()
            .filter(|ns| !self.objects.keys().any(|k| &k.namespace == *ns))
            .map(|ns| Key::new("v1", "Namespace", None, ns))
            .collect();
        (doomed, empty_namespaces)
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
