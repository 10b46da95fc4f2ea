//! The Kubernetes API as gkq uses it: discovery, label-selected lists, server-side apply (and its
//! dry run, which is how plans learn what an object would become), and deletes. [`KubeApi`] is
//! implemented over a real API server ([`client::RealKube`]) and by the local target's object
//! store, so the engine has one code path.

pub mod client;
pub mod connect;
pub mod install;
pub mod reads;
pub mod token_request;

use serde_json::Value;

use crate::model::{FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE, STACK_LABEL};
use crate::vocab::object::{At, Field, label_of};

/// Most per-object requests (dry runs, GETs) gkq has in flight at once against one API server:
/// its in-flight limits and the client's connections are finite, and a spec may hold thousands
/// of objects. Planning's observation and apply's verification both read this many at a time.
pub const PER_OBJECT_CONCURRENCY: usize = 32;

/// What discovery says about a kind: its plural and scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceInfo {
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl ResourceInfo {
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }
}

/// A field another manager owns, found when a server-side apply conflicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    pub field: String,
    pub manager: String,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// Another field manager owns fields gkq wants to set.
    #[error("{object}: fields owned by another manager: {}", describe_conflicts(.conflicts))]
    Conflict {
        object: String,
        conflicts: Vec<FieldConflict>,
        message: String,
    },
    /// The kind is not served (its CRD is not installed yet).
    #[error("{api_version} {kind} is not served by the API server (is its CRD installed?)")]
    UnknownKind { api_version: String, kind: String },
    /// The server rejected the object (schema, CEL, webhook).
    #[error("{object}: {message}")]
    Invalid { object: String, message: String },
    /// Any other API error.
    #[error("{object}: API error {code} {reason}: {message}")]
    Api {
        object: String,
        code: u16,
        reason: String,
        message: String,
    },
    /// A write's precondition failed: the object is no longer at the version (or the identity)
    /// the write was conditional on. See docs/kubernetes-api.md 1.
    #[error("{object}: changed since it was read: {message}")]
    Changed { object: String, message: String },
    #[error("Kubernetes API: {0}")]
    Transport(String),
}

fn describe_conflicts(c: &[FieldConflict]) -> String {
    c.iter()
        .map(|c| format!("{} (owned by \"{}\")", c.field, c.manager))
        .collect::<Vec<_>>()
        .join(", ")
}

pub type KubeResult<T> = Result<T, KubeError>;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Ask the server what the object would become, changing nothing (`dryRun=All`).
    pub dry_run: bool,
    /// Take ownership of fields other managers own (`force=true`).
    pub force: bool,
}

/// The version of an object that a write is conditional on (optimistic concurrency): a server-side
/// apply carries the `resourceVersion` in the applied object, and a delete carries both as
/// `preconditions`. The write is refused with [`KubeError::Changed`] when the object moved on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub uid: String,
    pub resource_version: String,
}

impl Version {
    /// The version of a live object (`None` without a uid and a resourceVersion).
    pub fn of(object: &Value) -> Option<Version> {
        let text = |p: &str| object.at(p).and_then(Value::as_str).map(str::to_string);
        Some(Version {
            uid: text("/metadata/uid")?,
            resource_version: text("/metadata/resourceVersion")?,
        })
    }

    /// `object` made conditional on this version: its `metadata.resourceVersion` set, so that a
    /// server-side apply of it fails unless the stored object is still at this version.
    pub fn condition(&self, object: &Value) -> Value {
        let mut object = object.clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".into(),
                Value::String(self.resource_version.clone()),
            );
        }
        object
    }
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// There was nothing to delete.
    Absent,
    /// The object is gone.
    Gone,
    /// The object is marked for deletion and stays until its finalizers are removed.
    Pending,
}

/// The calls gkq makes to a Kubernetes API server.
#[async_trait::async_trait]
pub trait KubeApi: Send + Sync {
    /// Discovery for one kind; `None` when the server does not serve it.
    async fn resource(&self, api_version: &str, kind: &str) -> KubeResult<Option<ResourceInfo>>;
    /// Every object of a kind matching a label selector, across namespaces.
    async fn list(&self, info: &ResourceInfo, label_selector: &str) -> KubeResult<Vec<Value>>;
    /// Every object of a namespaced kind in `namespace` matching a label selector. A server
    /// is asked for that namespace alone (`RealKube`): a caller that knows the namespace needs
    /// no cluster-wide list permission and reads no other namespace's objects. This default
    /// keeps `namespace`'s objects of [`KubeApi::list`], for stores that hold everything in
    /// process (the local target, fakes); a wrapper of another API must forward it.
    async fn list_in(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        label_selector: &str,
    ) -> KubeResult<Vec<Value>> {
        let mut objects = self.list(info, label_selector).await?;
        objects.retain(|object| namespace_of(object) == Some(namespace));
        Ok(objects)
    }
    /// [`KubeApi::list`], handing each object to `each` as it is read instead of collecting
    /// them: a caller that keeps a compact form of each never holds the whole list as trees.
    async fn list_each(
        &self,
        info: &ResourceInfo,
        label_selector: &str,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> KubeResult<()> {
        for object in self.list(info, label_selector).await? {
            each(object);
        }
        Ok(())
    }
    /// The namespace (for a namespaced kind) and name of every object of a kind, whoever owns
    /// it: where the server offers it, a list of metadata alone.
    async fn list_names(&self, info: &ResourceInfo) -> KubeResult<Vec<ObjectName>> {
        let mut names = Vec::new();
        self.list_each(info, "", &mut |object| names.push(ObjectName::of(&object)))
            .await?;
        Ok(names)
    }
    async fn get(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> KubeResult<Option<Value>>;
    /// Every change to the objects of a namespaced kind in `namespace` from now on: the
    /// collection's current `resourceVersion` is read first and the watch starts there, so that
    /// nothing written after this call returns is missed. `Ok(None)` when this API offers no
    /// watches (the local target, fakes): the caller reads again from time to time instead.
    async fn watch_from_now(
        &self,
        info: &ResourceInfo,
        namespace: &str,
    ) -> KubeResult<Option<Changes>> {
        let _ = (info, namespace);
        Ok(None)
    }
    /// Server-side apply of `object` with gkq's field manager; returns the object as the server
    /// (would) store it.
    async fn apply(
        &self,
        info: &ResourceInfo,
        object: &Value,
        opts: ApplyOptions,
    ) -> KubeResult<Value>;
    /// Deletes an object, when given only if it is still at `version` (same uid and
    /// resourceVersion).
    async fn delete(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        version: Option<&Version>,
    ) -> KubeResult<Deletion>;
    /// The log of pod `namespace/name` (its first container's), each line handed to `each` as
    /// it is read; with `follow`, until the container ends or the server closes the stream.
    async fn pod_log(
        &self,
        namespace: &str,
        name: &str,
        follow: bool,
        each: &mut (dyn for<'l> FnMut(&'l str) + Send),
    ) -> KubeResult<()> {
        let _ = (follow, each);
        Err(KubeError::Transport(format!(
            "this Kubernetes API does not serve pod logs (pod {namespace}/{name})"
        )))
    }
    /// A connection to `port` of pod `namespace/name` through the API server's `portforward`
    /// subresource (what `kubectl port-forward` opens): one per connection forwarded.
    async fn port_forward(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> KubeResult<PortForward> {
        Err(KubeError::Transport(format!(
            "this Kubernetes API does not forward ports (pod {namespace}/{name}, port {port})"
        )))
    }
    /// Forgets cached discovery (after CRDs were installed).
    fn refresh_discovery(&self) {}
}

/// What [`KubeApi::watch_from_now`] sees: each object as it was added, modified or deleted, in
/// the order the server wrote them. The stream ends when the watch does (the server's timeout, a
/// dropped connection, or an error it yields last); a caller that needs more watches again.
pub type Changes = futures::stream::BoxStream<'static, KubeResult<Value>>;

/// The bytes to and from a pod's port, as [`KubeApi::port_forward`] opens them.
pub trait PortStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> PortStream for T {}

/// One forwarded connection: its stream, and what the pod's side says if the port cannot be
/// used (nothing listens on it, the pod went away): the future ends with the message then, or
/// with `None` when the connection ends without one.
pub struct PortForward {
    pub stream: Box<dyn PortStream>,
    pub error: futures::future::BoxFuture<'static, Option<String>>,
}

/// Where an object is within its kind: its namespace (`None` for a cluster-scoped kind) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectName {
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectName {
    /// As the object's metadata has it.
    pub fn of(object: &Value) -> Self {
        ObjectName {
            namespace: namespace_of(object).map(str::to_string),
            name: name_of(object).to_string(),
        }
    }
}

/// The label selector for everything gkq owns in one stack.
pub fn owned_selector(stack: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{STACK_LABEL}={stack}")
}

/// Whether an object carries gkq's ownership label (gkq never deletes anything else).
pub fn is_owned(object: &Value) -> bool {
    label_of(object, MANAGED_BY_LABEL) == Some(MANAGED_BY_VALUE)
}

/// Whether [`owned_selector`] of `stack` selects the object.
pub fn is_owned_by_stack(object: &Value, stack: &str) -> bool {
    is_owned(object) && label_of(object, STACK_LABEL) == Some(stack)
}

/// An object's `apiVersion` and `kind` (empty when missing).
pub fn type_of(object: &Value) -> (&str, &str) {
    let field = |k: &str| object.field(k).and_then(Value::as_str).unwrap_or_default();
    (field("apiVersion"), field("kind"))
}

pub use crate::vocab::object::{name_of, namespace_of};

/// `Kind namespace/name` for messages.
pub fn describe(object: &Value) -> String {
    let kind = object
        .field("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    match namespace_of(object) {
        Some(ns) => format!("{kind} {ns}/{}", name_of(object)),
        None => format!("{kind} {}", name_of(object)),
    }
}

pub const MANAGER: &str = FIELD_MANAGER;
