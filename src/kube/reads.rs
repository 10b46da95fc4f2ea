//! What a plan read from Kubernetes, in a form that can be read again and compared: each
//! discovery, list and get it made, with a digest of the answer built from what changes whenever
//! an object does (its uid and `resourceVersion`, which the API server changes with every write,
//! status included: docs/kubernetes-api.md). The agent reads these again before it re-plans an
//! unchanged commit: the same digests mean the plan would read the same live objects.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::Value;

use super::{ApplyOptions, Deletion, KubeApi, KubeResult, ObjectName, ResourceInfo, Version};
use crate::vocab::object::Field;

/// One read a plan made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Read {
    Resource {
        api_version: String,
        kind: String,
    },
    List {
        info: ResourceInfo,
        /// `None`: across namespaces.
        namespace: Option<String>,
        selector: String,
    },
    Names {
        info: ResourceInfo,
    },
    Get {
        info: ResourceInfo,
        namespace: Option<String>,
        name: String,
    },
}

/// Each read and the digest of its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads(pub BTreeMap<Read, String>);

/// Where an object stands: its place, uid and version (not its contents: a write changes the
/// version).
fn version_of(object: &Value) -> String {
    let metadata = object.field("metadata");
    let meta = |key: &str| {
        metadata
            .and_then(|m| m.field(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    format!(
        "{}/{} {} {}",
        meta("namespace"),
        meta("name"),
        meta("uid"),
        meta("resourceVersion")
    )
}

fn digest_of(mut versions: Vec<String>) -> String {
    versions.sort_unstable();
    crate::plan::digest::sha256_hex(versions.join("\n").as_bytes())
}

fn resource_digest(info: &Option<ResourceInfo>) -> String {
    format!("{info:?}")
}

fn names_digest(names: &[ObjectName]) -> String {
    digest_of(names.iter().map(|n| format!("{n:?}")).collect())
}

/// A [`KubeApi`] that remembers what was read through it ([`Recording::reads`]); writes (the
/// plan's server-side dry runs) pass through.
pub struct Recording<'a> {
    inner: &'a dyn KubeApi,
    reads: Mutex<Reads>,
    /// Lists made earlier for this plan, through a client of its own: each answers the first
    /// [`KubeApi::list_each`] of its kind and selector instead of the server.
    prefetched: Mutex<Vec<PrefetchedList>>,
}

/// A list made early: the kind, the selector and the objects.
type PrefetchedList = (ResourceInfo, String, Vec<Value>);

/// Lists of what gkq owns in a stack, made for a plan before its spec was loaded, and the
/// reads that made them (`ops::head_start`).
#[derive(Debug, Default)]
pub struct Prefetched {
    pub stack: String,
    pub lists: Vec<PrefetchedList>,
    pub reads: Reads,
}

impl<'a> Recording<'a> {
    pub fn new(inner: &'a dyn KubeApi) -> Self {
        Recording {
            inner,
            reads: Mutex::new(Reads::default()),
            prefetched: Mutex::new(Vec::new()),
        }
    }

    /// Takes lists made earlier for this plan, and what reading them read: each list answers the
    /// plan's list of the same kind and selector.
    pub fn take_prefetched(&self, prefetched: Prefetched) {
        self.absorb(prefetched.reads);
        let mut lists = self.prefetched.lock().unwrap_or_else(|e| e.into_inner());
        lists.extend(prefetched.lists);
    }

    /// The list of `info` with `selector` made earlier, if any (taken: it answers once).
    fn prefetched_list(&self, info: &ResourceInfo, selector: &str) -> Option<Vec<Value>> {
        let mut lists = self.prefetched.lock().unwrap_or_else(|e| e.into_inner());
        let at = lists
            .iter()
            .position(|(i, s, _)| i == info && s == selector)?;
        Some(lists.swap_remove(at).2)
    }

    fn note(&self, read: Read, digest: String) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        reads.0.insert(read, digest);
    }

    /// Adds what another recording read (for the same plan, through a client of its own).
    pub fn absorb(&self, other: Reads) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        reads.0.extend(other.0);
    }

    /// Everything read so far.
    pub fn reads(&self) -> Reads {
        self.reads.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[async_trait::async_trait]
impl KubeApi for Recording<'_> {
    async fn resource(&self, api_version: &str, kind: &str) -> KubeResult<Option<ResourceInfo>> {
        let info = self.inner.resource(api_version, kind).await?;
        let read = Read::Resource {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        };
        self.note(read, resource_digest(&info));
        Ok(info)
    }

    async fn list(&self, info: &ResourceInfo, label_selector: &str) -> KubeResult<Vec<Value>> {
        let objects = self.inner.list(info, label_selector).await?;
        let read = Read::List {
            info: info.clone(),
            namespace: None,
            selector: label_selector.to_string(),
        };
        self.note(read, digest_of(objects.iter().map(version_of).collect()));
        Ok(objects)
    }

    async fn list_in(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        label_selector: &str,
    ) -> KubeResult<Vec<Value>> {
        let objects = self.inner.list_in(info, namespace, label_selector).await?;
        let read = Read::List {
            info: info.clone(),
            namespace: Some(namespace.to_string()),
            selector: label_selector.to_string(),
        };
        self.note(read, digest_of(objects.iter().map(version_of).collect()));
        Ok(objects)
    }

    async fn list_each(
        &self,
        info: &ResourceInfo,
        label_selector: &str,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> KubeResult<()> {
        if let Some(objects) = self.prefetched_list(info, label_selector) {
            // Recorded when it was read.
            objects.into_iter().for_each(each);
            return Ok(());
        }
        let mut versions = Vec::new();
        self.inner
            .list_each(info, label_selector, &mut |object| {
                versions.push(version_of(&object));
                each(object);
            })
            .await?;
        let read = Read::List {
            info: info.clone(),
            namespace: None,
            selector: label_selector.to_string(),
        };
        self.note(read, digest_of(versions));
        Ok(())
    }

    async fn list_names(&self, info: &ResourceInfo) -> KubeResult<Vec<ObjectName>> {
        let names = self.inner.list_names(info).await?;
        self.note(Read::Names { info: info.clone() }, names_digest(&names));
        Ok(names)
    }

    async fn get(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> KubeResult<Option<Value>> {
        let object = self.inner.get(info, namespace, name).await?;
        let read = Read::Get {
            info: info.clone(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        self.note(read, digest_of(object.iter().map(version_of).collect()));
        Ok(object)
    }

    async fn apply(
        &self,
        info: &ResourceInfo,
        object: &Value,
        opts: ApplyOptions,
    ) -> KubeResult<Value> {
        self.inner.apply(info, object, opts).await
    }

    async fn delete(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        version: Option<&Version>,
    ) -> KubeResult<Deletion> {
        self.inner.delete(info, namespace, name, version).await
    }

    fn refresh_discovery(&self) {
        self.inner.refresh_discovery()
    }
}

/// Whether reading `reads` again through `api` gives the same answers; stops at the first that
/// differs.
pub async fn unchanged(api: &dyn KubeApi, reads: &Reads) -> KubeResult<bool> {
    for (read, digest) in &reads.0 {
        let now = match read {
            Read::Resource { api_version, kind } => {
                resource_digest(&api.resource(api_version, kind).await?)
            }
            Read::List {
                info,
                namespace: None,
                selector,
            } => {
                let mut versions = Vec::new();
                api.list_each(info, selector, &mut |o| versions.push(version_of(&o)))
                    .await?;
                digest_of(versions)
            }
            Read::List {
                info,
                namespace: Some(namespace),
                selector,
            } => {
                let objects = api.list_in(info, namespace, selector).await?;
                digest_of(objects.iter().map(version_of).collect())
            }
            Read::Names { info } => names_digest(&api.list_names(info).await?),
            Read::Get {
                info,
                namespace,
                name,
            } => {
                let object = api.get(info, namespace.as_deref(), name).await?;
                digest_of(object.iter().map(version_of).collect())
            }
        };
        if &now != digest {
            tracing::debug!("changed since the last plan: {read:?}");
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Pods in two namespaces, served only as a whole (so the trait's own `list_in` answers).
    struct Pods(Vec<Value>);

    #[async_trait::async_trait]
    impl KubeApi for Pods {
        async fn resource(&self, _: &str, _: &str) -> KubeResult<Option<ResourceInfo>> {
            Ok(None)
        }
        async fn list(&self, _: &ResourceInfo, _: &str) -> KubeResult<Vec<Value>> {
            Ok(self.0.clone())
        }
        async fn get(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            _: &str,
        ) -> KubeResult<Option<Value>> {
            Ok(None)
        }
        async fn apply(&self, _: &ResourceInfo, o: &Value, _: ApplyOptions) -> KubeResult<Value> {
            Ok(o.clone())
        }
        async fn delete(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            _: &str,
            _: Option<&Version>,
        ) -> KubeResult<Deletion> {
            Ok(Deletion::Absent)
        }
    }

    fn pod(namespace: &str, version: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": "p", "namespace": namespace, "uid": namespace,
            "resourceVersion": version}})
    }

    /// A namespaced list keeps only that namespace's objects, is recorded with its namespace,
    /// and is read again the same way: a change in another namespace is not a change of it.
    #[tokio::test]
    async fn a_namespaced_list_is_recorded_and_compared_within_its_namespace() {
        let info = ResourceInfo {
            api_version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
            namespaced: true,
        };
        let before = Pods(vec![pod("team", "1"), pod("other", "1")]);
        let recording = Recording::new(&before);
        let found = recording.list_in(&info, "team", "app=x").await.unwrap();
        assert_eq!(found, vec![pod("team", "1")]);
        let reads = recording.reads();
        let read = Read::List {
            info: info.clone(),
            namespace: Some("team".into()),
            selector: "app=x".into(),
        };
        assert!(reads.0.contains_key(&read), "{reads:?}");
        let elsewhere = Pods(vec![pod("team", "1"), pod("other", "2")]);
        assert!(unchanged(&elsewhere, &reads).await.unwrap());
        let here = Pods(vec![pod("team", "2"), pod("other", "1")]);
        assert!(!unchanged(&here, &reads).await.unwrap());
    }

    /// A list made early answers the plan's first list of its kind and selector, with the read
    /// that made it recorded as the plan's; any other list, and the same one again, asks the
    /// server.
    #[tokio::test]
    async fn a_prefetched_list_answers_its_kind_and_selector_once() {
        let info = ResourceInfo {
            api_version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
            namespaced: true,
        };
        let early = Pods(vec![pod("team", "1")]);
        let early_recording = Recording::new(&early);
        let objects = early_recording.list(&info, "app=x").await.unwrap();
        let prefetched = Prefetched {
            stack: "s".into(),
            lists: vec![(info.clone(), "app=x".into(), objects)],
            reads: early_recording.reads(),
        };
        let now = Pods(vec![pod("team", "2")]);
        let recording = Recording::new(&now);
        recording.take_prefetched(prefetched);
        let mut seen = Vec::new();
        for selector in ["app=y", "app=x", "app=x"] {
            recording
                .list_each(&info, selector, &mut |o| seen.push((selector, o)))
                .await
                .unwrap();
        }
        assert_eq!(
            seen,
            [
                ("app=y", pod("team", "2")),
                ("app=x", pod("team", "1")),
                ("app=x", pod("team", "2"))
            ]
        );
        assert_eq!(recording.reads().0.len(), 2);
        let read = Read::List {
            info: info.clone(),
            namespace: None,
            selector: "app=x".into(),
        };
        assert!(recording.reads().0.contains_key(&read));
    }
}
