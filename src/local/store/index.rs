//! Lookups the controllers make for one object, kept up to date as objects are written, so
//! that none of them costs a pass over the store: which object has a uid, which objects
//! name an owner, and which objects carry a label with a value (as an informer's indexers do;
//! a list by label, such as `gkq apply`'s of a job's Workloads, reads only those). Built from the objects on first use (a store
//! read from disk has none) and changed by every write after that.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::Key;

/// `(namespace, kind, name)` of an owner as its dependents' `ownerReferences` name it (owner
/// references carry no namespace: a dependent's owner lives in its own namespace).
pub type OwnerName = (String, String, String);

#[derive(Debug, Clone, Default)]
pub struct Index {
    uids: HashMap<String, Key>,
    dependents: HashMap<OwnerName, BTreeSet<Key>>,
    labels: HashMap<(String, String), BTreeSet<Key>>,
}

fn labels_of(object: &Value) -> impl Iterator<Item = (String, String)> + '_ {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
}

fn owner_names<'a>(key: &'a Key, object: &'a Value) -> impl Iterator<Item = OwnerName> + 'a {
    crate::vocab::object::owners(object).filter_map(move |owner| {
        let kind = owner["kind"].as_str()?;
        let name = owner["name"].as_str()?;
        Some((key.namespace.clone(), kind.to_string(), name.to_string()))
    })
}

impl Index {
    pub fn build<'a>(objects: impl IntoIterator<Item = (&'a Key, &'a Value)>) -> Index {
        let mut index = Index::default();
        for (key, object) in objects {
            index.add(key, object);
        }
        index
    }

    pub fn add(&mut self, key: &Key, object: &Value) {
        if let Some(uid) = object.pointer("/metadata/uid").and_then(Value::as_str) {
            self.uids.insert(uid.to_string(), key.clone());
        }
        for owner in owner_names(key, object) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert(key.clone());
        }
        for label in labels_of(object) {
            self.labels.entry(label).or_default().insert(key.clone());
        }
    }

    pub fn remove(&mut self, key: &Key, object: &Value) {
        if let Some(uid) = object.pointer("/metadata/uid").and_then(Value::as_str)
            && self.uids.get(uid) == Some(key)
        {
            self.uids.remove(uid);
        }
        for owner in owner_names(key, object) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
        for label in labels_of(object) {
            if let Some(set) = self.labels.get_mut(&label) {
                set.remove(key);
                if set.is_empty() {
                    self.labels.remove(&label);
                }
            }
        }
    }

    /// The key of the object with this uid.
    pub fn by_uid(&self, uid: &str) -> Option<&Key> {
        self.uids.get(uid)
    }

    /// The objects whose `ownerReferences` name `kind` `name` in `namespace` (any uid).
    pub fn dependents(&self, namespace: &str, kind: &str, name: &str) -> Option<&BTreeSet<Key>> {
        self.dependents
            .get(&(namespace.to_string(), kind.to_string(), name.to_string()))
    }

    /// The objects labelled `label` = `value`, in key order.
    pub fn labelled(&self, label: &str, value: &str) -> Option<&BTreeSet<Key>> {
        self.labels.get(&(label.to_string(), value.to_string()))
    }
}
