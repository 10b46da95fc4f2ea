//! [`KubeApi`] over a real API server with kube-rs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GetParams, ListParams, Patch, PatchParams,
    Preconditions, WatchEvent, WatchParams,
};
use kube::core::GroupVersionKind;
use kube::{Client, Config};
use serde_json::Value;

use crate::diff::applied::{self, is_own_apply, is_own_apply_entry};

use super::{
    ApplyOptions, Changes, Deletion, FieldConflict, KubeApi, KubeError, KubeResult, MANAGER,
    ObjectName, ResourceInfo, Version, describe,
};

/// How long the server keeps one watch open (under kube-rs's limit of 295 s): a wait longer than
/// that reads again on its own.
const WATCH_SECONDS: u32 = 290;

/// Clones share the connection and what discovery found (a plan may read through a clone
/// while its spec is still being loaded).
#[derive(Clone)]
pub struct RealKube {
    client: Client,
    discovered: Arc<Discovered>,
}

/// What discovery found, by `(apiVersion, kind)` (`None`: not served).
type Discovered = Mutex<HashMap<(String, String), Option<ResourceInfo>>>;

impl RealKube {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            discovered: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// From a kubeconfig file (`KUBECONFIG` or `~/.kube/config`) and an optional context.
    pub async fn from_kubeconfig(context: Option<&str>) -> anyhow::Result<Self> {
        let options = kube::config::KubeConfigOptions {
            context: context.map(str::to_string),
            ..Default::default()
        };
        let config = Config::from_kubeconfig(&options).await?;
        require_verified_tls(&config)?;
        Ok(Self::new(Client::try_from(config)?))
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Requests for `info`'s objects, answered as JSON straight into [`Value`]: the typed
    /// `DynamicObject` kube-rs would build is converted to a `Value` anyway, so reading through
    /// it parses every object twice and holds two copies of every list.
    fn request(&self, info: &ResourceInfo, namespace: Option<&str>) -> kube::core::Request {
        kube::core::Request::new(self.api(info, namespace).resource_url())
    }

    /// Sends a list request and hands each item of the answer to `each` as it is read.
    async fn read_list(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
        what: &str,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> KubeResult<()> {
        let mut request = request.map_err(|e| KubeError::Transport(e.to_string()))?;
        request.extensions_mut().insert("list");
        let body = self
            .client
            .request_text(request)
            .await
            .map_err(|e| map_error(what, e))?;
        let mut deserializer = serde_json::Deserializer::from_str(&body);
        serde::de::DeserializeSeed::deserialize(EachItem { each }, &mut deserializer)
            .and_then(|()| deserializer.end())
            .map_err(|e| KubeError::Transport(format!("{what}: {e}")))
    }

    fn api(&self, info: &ResourceInfo, namespace: Option<&str>) -> Api<DynamicObject> {
        let (group, version) = match info.api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", info.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &info.kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, &info.plural);
        match (info.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            _ => Api::all_with(self.client.clone(), &ar),
        }
    }
}

/// An object as the API server sends it, parsed with only gkq's own entry of
/// `metadata.managedFields` ([`crate::diff::applied`]): the other managers' entries are
/// bookkeeping gkq never reads, often as large as the object, and building them first would hold
/// every listed object's twice over.
struct Read(Value);

impl<'de> serde::Deserialize<'de> for Read {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Fields::Object).map(Read)
    }
}

/// Reads a JSON value into maps and lists of exactly their length: a plan holds thousands of
/// objects as read (Kueue's world), and maps grown one insert at a time keep up to half their
/// room unused. Where [`Fields`] reads is the object itself, its `metadata` (only gkq's own
/// `managedFields` entry is kept), or any other value.
#[derive(Clone, Copy, PartialEq)]
enum Fields {
    Object,
    Metadata,
    Plain,
}

impl<'de> serde::de::Visitor<'de> for Fields {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields: Vec<(String, Value)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if self == Fields::Metadata && key == "managedFields" {
                let own: OwnApply = map.next_value()?;
                if let Some(entry) = own.0 {
                    fields.push((key, Value::Array(vec![entry])));
                }
            } else {
                let seed = if self == Fields::Object && key == "metadata" {
                    Fields::Metadata
                } else {
                    Fields::Plain
                };
                let value = map.next_value_seed(seed)?;
                fields.push((key, value));
            }
        }
        let mut out = serde_json::Map::with_capacity(fields.len());
        out.extend(fields);
        Ok(Value::Object(out))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Fields::Plain)? {
            items.push(item);
        }
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Fields {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A list answer whose `items` are each read ([`Read`]) and handed on one at a time; the list's
/// other fields are passed over. The same seed reads the list (a map) and its items (a sequence,
/// or `null` for none).
struct EachItem<'f> {
    each: &'f mut dyn FnMut(Value),
}

impl<'de> serde::de::DeserializeSeed<'de> for EachItem<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for EachItem<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes list")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                map.next_value_seed(EachItem {
                    each: &mut *self.each,
                })?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(Read(item)) = seq.next_element()? {
            (self.each)(item);
        }
        Ok(())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Of a `managedFields` list, gkq's own apply entry, if any; the others are read one at a time and
/// dropped.
struct OwnApply(Option<Value>);

impl<'de> serde::Deserialize<'de> for OwnApply {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = OwnApply;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of managedFields entries")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OwnApply, A::Error> {
                let mut own = None;
                while let Some(Entry(entry)) = seq.next_element()? {
                    if own.is_none() {
                        own = entry.map(applied::compact);
                    }
                }
                Ok(OwnApply(own))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<OwnApply, E> {
                Ok(OwnApply(None))
            }
        }
        deserializer.deserialize_any(Entries)
    }
}

/// One `managedFields` entry: its fields other than `fieldsV1` are short, and `fieldsV1` (as
/// large as the fields it names) is read only when the entry already says it is gkq's own apply,
/// or when it comes before the entry says whose it is. `None` for another manager's entry.
struct Entry(Option<Value>);

impl<'de> serde::Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Entry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a managedFields entry")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entry, A::Error> {
                let mut entry = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    let told = entry.contains_key("manager") && entry.contains_key("operation");
                    if key == "fieldsV1" && told && !is_own_apply_entry(&entry) {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    } else if key == "fieldsV1" {
                        // Kept as its text (`applied::compact`), taken as the server wrote it
                        // rather than parsed and written again.
                        let text = map.next_value::<Box<serde_json::value::RawValue>>()?;
                        entry.insert(key, Value::String(text.get().to_string()));
                    } else {
                        let value = map.next_value::<Value>()?;
                        entry.insert(key, value);
                    }
                }
                let entry = Value::Object(entry);
                Ok(Entry(is_own_apply(&entry).then_some(entry)))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// An object as read ([`Read`]), in the shape the rest of gkq reads: `apiVersion` and `kind`
/// first (a list's items carry neither).
fn as_read(object: Value, info: &ResourceInfo) -> Value {
    let Value::Object(fields) = object else {
        return object;
    };
    let mut out = serde_json::Map::with_capacity(fields.len() + 2);
    out.insert("apiVersion".into(), Value::from(info.api_version.as_str()));
    out.insert("kind".into(), Value::from(info.kind.as_str()));
    out.extend(
        fields
            .into_iter()
            .filter(|(key, _)| key != "apiVersion" && key != "kind"),
    );
    Value::Object(out)
}

fn map_error(object: &str, e: kube::Error) -> KubeError {
    match e {
        kube::Error::Api(status) => {
            let causes = status
                .details
                .as_ref()
                .map(|d| d.causes.clone())
                .unwrap_or_default();
            let field_conflicts = causes.iter().any(|c| c.reason == "FieldManagerConflict");
            if status.code == 409 && status.reason == "Conflict" && !field_conflicts {
                // A precondition (resourceVersion or uid) failed: docs/kubernetes-api.md 1.
                return KubeError::Changed {
                    object: object.to_string(),
                    message: status.message.clone(),
                };
            }
            if status.code == 409 && status.reason == "Conflict" {
                let conflicts = causes
                    .iter()
                    .map(|c| FieldConflict {
                        field: c.field.clone(),
                        manager: c
                            .message
                            .strip_prefix("conflict with \"")
                            .and_then(|m| m.split('"').next())
                            .unwrap_or(&c.message)
                            .to_string(),
                    })
                    .collect();
                return KubeError::Conflict {
                    object: object.to_string(),
                    conflicts,
                    message: status.message.clone(),
                };
            }
            if status.code == 422 || status.code == 400 || status.reason == "Invalid" {
                return KubeError::Invalid {
                    object: object.to_string(),
                    message: status.message.clone(),
                };
            }
            KubeError::Api {
                object: object.to_string(),
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            }
        }
        other => KubeError::Transport(other.to_string()),
    }
}

#[async_trait::async_trait]
impl KubeApi for RealKube {
    async fn resource(&self, api_version: &str, kind: &str) -> KubeResult<Option<ResourceInfo>> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(hit) = self
            .discovered
            .lock()
            .ok()
            .and_then(|d| d.get(&key).cloned())
        {
            return Ok(hit);
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((ar, caps)) => Some(ResourceInfo {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                plural: ar.plural,
                namespaced: matches!(caps.scope, kube::discovery::Scope::Namespaced),
            }),
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(kube::Error::Discovery(_)) => None,
            Err(e) => return Err(map_error(&format!("{api_version} {kind}"), e)),
        };
        if let Ok(mut d) = self.discovered.lock() {
            d.insert(key, found.clone());
        }
        Ok(found)
    }

    async fn list(&self, info: &ResourceInfo, label_selector: &str) -> KubeResult<Vec<Value>> {
        let mut items = Vec::new();
        self.list_each(info, label_selector, &mut |item| items.push(item))
            .await?;
        Ok(items)
    }

    async fn list_each(
        &self,
        info: &ResourceInfo,
        label_selector: &str,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> KubeResult<()> {
        let request = self
            .request(info, None)
            .list(&ListParams::default().labels(label_selector));
        let what = format!("list {}", info.kind);
        self.read_list(request, &what, &mut |item| each(as_read(item, info)))
            .await
    }

    async fn list_in(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        label_selector: &str,
    ) -> KubeResult<Vec<Value>> {
        let request = self
            .request(info, Some(namespace))
            .list(&ListParams::default().labels(label_selector));
        let what = format!("list {} in namespace {namespace}", info.kind);
        let mut items = Vec::new();
        self.read_list(request, &what, &mut |item| items.push(as_read(item, info)))
            .await?;
        Ok(items)
    }

    async fn list_names(&self, info: &ResourceInfo) -> KubeResult<Vec<ObjectName>> {
        // Metadata alone: the server sends names, not every object of the kind in full.
        let request = self
            .request(info, None)
            .list_metadata(&ListParams::default());
        let what = format!("list {} names", info.kind);
        let mut names = Vec::new();
        self.read_list(request, &what, &mut |item| {
            names.push(ObjectName::of(&item))
        })
        .await?;
        Ok(names)
    }

    async fn get(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> KubeResult<Option<Value>> {
        let mut request = self
            .request(info, namespace)
            .get(name, &GetParams::default())
            .map_err(|e| KubeError::Transport(e.to_string()))?;
        request.extensions_mut().insert("get");
        match self.client.request::<Read>(request).await {
            Ok(Read(object)) => Ok(Some(as_read(object, info))),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
            Err(e) => Err(map_error(&format!("{} {name}", info.kind), e)),
        }
    }

    async fn watch_from_now(
        &self,
        info: &ResourceInfo,
        namespace: &str,
    ) -> KubeResult<Option<Changes>> {
        let api = self.api(info, Some(namespace));
        let what = format!("watch {} in namespace {namespace}", info.kind);
        // The collection's resourceVersion now, from a list of one object's metadata at most:
        // the watch starts there, so a change made after this returns is in it
        // (docs/kubernetes-api.md, section 9).
        let now = api
            .list_metadata(&ListParams::default().limit(1))
            .await
            .map_err(|e| map_error(&what, e))?;
        let version = now.metadata.resource_version.unwrap_or_default();
        let events = api
            .watch(&WatchParams::default().timeout(WATCH_SECONDS), &version)
            .await
            .map_err(|e| map_error(&what, e))?;
        let info = info.clone();
        let changes = events.filter_map(move |event| {
            let change = match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                    Some(
                        serde_json::to_value(o)
                            .map(|object| as_read(object, &info))
                            .map_err(|e| KubeError::Transport(format!("{what}: {e}"))),
                    )
                }
                Ok(WatchEvent::Bookmark(_)) => None,
                Ok(WatchEvent::Error(status)) => Some(Err(KubeError::Api {
                    object: what.clone(),
                    code: status.code,
                    reason: status.reason,
                    message: status.message,
                })),
                Err(e) => Some(Err(map_error(&what, e))),
            };
            std::future::ready(change)
        });
        Ok(Some(changes.boxed()))
    }

    async fn apply(
        &self,
        info: &ResourceInfo,
        object: &Value,
        opts: ApplyOptions,
    ) -> KubeResult<Value> {
        let name = super::name_of(object);
        let mut params = PatchParams::apply(MANAGER).validation_strict();
        if opts.force {
            params = params.force();
        }
        if opts.dry_run {
            params = params.dry_run();
        }
        let mut request = self
            .request(info, super::namespace_of(object))
            .patch(name, &params, &Patch::Apply(object))
            .map_err(|e| KubeError::Transport(e.to_string()))?;
        request.extensions_mut().insert("patch");
        let Read(out) = self
            .client
            .request(request)
            .await
            .map_err(|e| map_error(&describe(object), e))?;
        Ok(as_read(out, info))
    }

    async fn delete(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        version: Option<&Version>,
    ) -> KubeResult<Deletion> {
        let api = self.api(info, namespace);
        let params = DeleteParams {
            preconditions: version.map(|v| Preconditions {
                uid: Some(v.uid.clone()),
                resource_version: Some(v.resource_version.clone()),
            }),
            ..Default::default()
        };
        // The server answers with the object while finalizers hold it, with a Status once it is
        // gone (docs/kubernetes-api.md 2).
        match api.delete(name, &params).await {
            Ok(answer) if answer.is_left() => Ok(Deletion::Pending),
            Ok(_) => Ok(Deletion::Gone),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Deletion::Absent),
            Err(e) => Err(map_error(&format!("{} {name}", info.kind), e)),
        }
    }

    async fn pod_log(
        &self,
        namespace: &str,
        name: &str,
        follow: bool,
        each: &mut (dyn for<'l> FnMut(&'l str) + Send),
    ) -> KubeResult<()> {
        use futures::{AsyncBufReadExt, TryStreamExt};
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        let params = kube::api::LogParams {
            follow,
            ..Default::default()
        };
        let what = format!("Pod {namespace}/{name}");
        let stream = pods
            .log_stream(name, &params)
            .await
            .map_err(|e| map_error(&what, e))?;
        let mut lines = stream.lines();
        while let Some(line) = lines
            .try_next()
            .await
            .map_err(|e| KubeError::Transport(format!("reading the log of {what}: {e}")))?
        {
            each(&line);
        }
        Ok(())
    }

    /// Through kube's websocket port-forward (`v4.channel.k8s.io`: a data and an error channel
    /// per port).
    async fn port_forward(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> KubeResult<super::PortForward> {
        use futures::FutureExt;
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        let what = format!("Pod {namespace}/{name}");
        let mut forwarder = pods
            .portforward(name, &[port])
            .await
            .map_err(|e| map_error(&what, e))?;
        let (Some(stream), Some(error)) = (forwarder.take_stream(port), forwarder.take_error(port))
        else {
            return Err(KubeError::Transport(format!(
                "forwarding port {port} of {what}: the connection has no stream for the port"
            )));
        };
        // The forwarder's task runs on after the forwarder is dropped, until the stream ends.
        Ok(super::PortForward {
            stream: Box::new(stream),
            error: error.boxed(),
        })
    }

    fn refresh_discovery(&self) {
        if let Ok(mut d) = self.discovered.lock() {
            d.clear();
        }
    }
}

/// TLS verification is always on. A kubeconfig that turns it off (`insecure-skip-tls-verify:
/// true`) is refused, and so is a plain-HTTP server anywhere but on this machine: a bearer token
/// must never travel to a server gkq cannot authenticate.
pub fn require_verified_tls(config: &kube::Config) -> KubeResult<()> {
    if config.accept_invalid_certs {
        return Err(KubeError::Transport(format!(
            "refusing to connect to {}: the kubeconfig turns TLS verification off \
             (insecure-skip-tls-verify: true). gkq always verifies the API server's certificate; \
             give the cluster's CA as certificate-authority or certificate-authority-data instead",
            config.cluster_url
        )));
    }
    let url = &config.cluster_url;
    let loopback = matches!(
        url.host(),
        Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
    );
    if url.scheme_str() != Some("https") && !loopback {
        return Err(KubeError::Transport(format!(
            "refusing to connect to {url}: credentials would travel unencrypted; use the server's https:// address"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn info() -> ResourceInfo {
        ResourceInfo {
            api_version: "kueue.x-k8s.io/v1beta2".into(),
            kind: "ClusterQueue".into(),
            plural: "clusterqueues".into(),
            namespaced: false,
        }
    }

    /// A list's items are read in the shape gkq reads everywhere: `apiVersion` and `kind` first,
    /// Of `metadata.managedFields` only gkq's own apply entry is built; everything else as sent,
    /// in order, including a field of the same name elsewhere.
    #[test]
    fn listed_objects_are_read_with_only_gkqs_managed_fields_and_with_their_type_first() {
        let own = json!({"manager": "gkq", "operation": "Apply", "fieldsV1": {"f:spec": {}}});
        let kept = json!({"manager": "gkq", "operation": "Apply", "fieldsV1": "{\"f:spec\":{}}"});
        let answer = json!({"kind": "ClusterQueueList", "metadata": {"resourceVersion": "9"},
            "items": [{
                "metadata": {"name": "a", "managedFields": [
                    {"manager": "kueue", "operation": "Update", "subresource": "status",
                     "fieldsV1": {"f:status": {}}},
                    own,
                    {"manager": "gkq", "operation": "Update", "fieldsV1": {"f:metadata": {}}}],
                    "labels": {"x": "1"}},
                "spec": {"managedFields": "kept", "quota": [1, 2.5, true, null]},
                "status": {"conditions": []}}]});
        let mut read: Vec<Value> = Vec::new();
        let text = answer.to_string();
        serde::de::DeserializeSeed::deserialize(
            EachItem {
                each: &mut |item| read.push(as_read(item, &info())),
            },
            &mut serde_json::Deserializer::from_str(&text),
        )
        .unwrap();
        let expected = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "a", "managedFields": [kept], "labels": {"x": "1"}},
            "spec": {"managedFields": "kept", "quota": [1, 2.5, true, null]},
            "status": {"conditions": []}});
        assert_eq!(read, std::slice::from_ref(&expected));
        let keys: Vec<&String> = read[0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec", "status"]);
        // A single object (a GET or an apply's answer) is read the same way.
        let Read(one) = serde_json::from_value(answer["items"][0].clone()).unwrap();
        assert_eq!(as_read(one, &info()), expected);
        // Without gkq's entry there is no managedFields at all.
        let mut theirs = answer["items"][0].clone();
        theirs["metadata"]["managedFields"][1]["manager"] = json!("kubectl");
        let Read(theirs) = serde_json::from_value(theirs).unwrap();
        assert!(theirs["metadata"].get("managedFields").is_none());
        // An empty list may say `items: null`.
        let mut none = 0;
        serde::de::DeserializeSeed::deserialize(
            EachItem {
                each: &mut |_| none += 1,
            },
            &mut serde_json::Deserializer::from_str(r#"{"kind": "List", "items": null}"#),
        )
        .unwrap();
        assert_eq!(none, 0);
    }
}
