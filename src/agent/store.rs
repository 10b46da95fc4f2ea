//! Where stacks live: GkqStack objects, their Secrets and their Events, in the management
//! cluster's API server ([`KubeStore`]) or, for the local target, in a file of the state
//! directory ([`LocalStore`]). The controller and `gkq approve` work through [`StackStore`].

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::{Deserialize, Serialize};

use super::crd::{APPROVE_ANNOTATION, FINALIZER, GkqStack, GkqStackStatus, REQUESTED_ANNOTATION};
pub use super::events::Severity;
use super::events::{Recorder, continues_series};
use super::source::Credentials;
use super::source_check::identity;

/// The field manager the agent writes status and annotations with.
pub const AGENT_MANAGER: &str = "gkq-agent";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("stack {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Kube(#[from] kube::Error),
    #[error("the local stack store {path}: {message}")]
    Local { path: String, message: String },
    #[error("{0}")]
    Other(String),
    #[error("refusing to approve digest {given} for stack {stack}: {why}")]
    Stale {
        stack: String,
        given: String,
        why: String,
    },
}

#[async_trait::async_trait]
pub trait StackStore: Send + Sync {
    /// Every stack the agent manages.
    async fn list(&self) -> Result<Vec<GkqStack>, StoreError>;
    /// The stack `namespace/name`, if the agent manages it (one keyed read, not a list).
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<GkqStack>, StoreError>;
    /// Replaces the stack's status.
    async fn set_status(&self, stack: &GkqStack, status: &GkqStackStatus)
    -> Result<(), StoreError>;
    /// The credentials of the stack's `secretRef` (empty without one), read as the stack's
    /// identity ([`source_check::identity`]): a stack reads only Secrets its own
    /// ServiceAccount may read.
    async fn credentials(&self, stack: &GkqStack) -> Result<Credentials, StoreError>;
    /// Adds (`present`) or removes the agent's finalizer ([`crate::agent::crd::FINALIZER`]).
    async fn set_finalizer(&self, stack: &GkqStack, present: bool) -> Result<(), StoreError>;
    /// Records an Event about the stack, or one more of the same Event recorded lately
    /// ([`super::events`]); failures are logged, not returned.
    async fn event(&self, stack: &GkqStack, severity: Severity, reason: &str, note: &str);
    /// Approves the held plan with `digest`: refused unless the stack holds exactly that plan.
    async fn approve(&self, namespace: &str, name: &str, digest: &str) -> Result<(), StoreError>;
    /// Asks the leader to fetch the stack now (a webhook received by a replica that does not
    /// lead): sets [`REQUESTED_ANNOTATION`] to `at`.
    async fn request(&self, namespace: &str, name: &str, at: &str) -> Result<(), StoreError>;
}

/// Checks an approval against what the stack holds.
fn check_approval(stack: &GkqStack, digest: &str) -> Result<(), StoreError> {
    let key = format!(
        "{}/{}",
        stack.namespace().unwrap_or_default(),
        stack.name_any()
    );
    let held = stack.status.as_ref().and_then(|s| s.held_digest.clone());
    match held {
        Some(held) if held == digest => Ok(()),
        Some(held) => Err(StoreError::Stale {
            stack: key,
            given: digest.to_string(),
            why: format!(
                "the plan held now has digest {held} (the plan changed since it was shown)"
            ),
        }),
        None => Err(StoreError::Stale {
            stack: key,
            given: digest.to_string(),
            why: "no plan is held".to_string(),
        }),
    }
}

/// Credentials from a Secret's string data.
fn credentials_of(data: &BTreeMap<String, Vec<u8>>) -> Credentials {
    let text = |k: &str| {
        data.get(k)
            .map(|v| {
                String::from_utf8_lossy(v)
                    .trim_end_matches('\n')
                    .to_string()
            })
            .filter(|v| !v.is_empty())
    };
    Credentials {
        token: text("token"),
        username: text("username"),
        identity: text("identity"),
        known_hosts: text("known_hosts"),
        webhook_secret: text("webhookSecret").map(String::into_bytes),
    }
}

/// The status as a JSON merge patch: fields the status no longer has are set to null, so that
/// the patch removes them (a held digest once approved, diagnostics once fixed).
fn merge_patch_of(status: &GkqStackStatus) -> serde_json::Value {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        for key in [
            "observedGeneration",
            "lastAttemptedRevision",
            "lastAppliedRevision",
            "lastAppliedTime",
            "plan",
            "placements",
            "heldDigest",
            "diagnostics",
        ] {
            fields.entry(key).or_insert(serde_json::Value::Null);
        }
    }
    value
}

/// Stacks in a Kubernetes API server.
pub struct KubeStore {
    client: kube::Client,
    /// The configuration clients acting as a stack's ServiceAccount are made from.
    base: Option<kube::Config>,
    /// The agent's `--default-service-account`.
    default_service_account: Option<String>,
    /// `None`: every namespace.
    namespace: Option<String>,
    events: Recorder,
}

impl KubeStore {
    pub fn new(client: kube::Client, namespace: Option<String>, instance: &str) -> Self {
        let events = Recorder::new(client.clone(), AGENT_MANAGER, instance);
        KubeStore {
            client,
            base: None,
            default_service_account: None,
            namespace,
            events,
        }
    }

    /// Lets this store read a stack's Secret as the stack's ServiceAccount (or
    /// `default_service_account`), with clients made from `config` (the management cluster's)
    /// that impersonate it.
    pub fn acting_as_stacks(
        mut self,
        config: kube::Config,
        default_service_account: Option<String>,
    ) -> Self {
        self.base = Some(config);
        self.default_service_account = default_service_account;
        self
    }

    /// A client acting as `user`, or the agent's own.
    fn client_as(&self, user: Option<&str>) -> Result<kube::Client, StoreError> {
        let Some(user) = user else {
            return Ok(self.client.clone());
        };
        let Some(base) = &self.base else {
            return Err(StoreError::Other(format!(
                "this store cannot act as {user}: it was made without a configuration to impersonate from"
            )));
        };
        let mut config = base.clone();
        config.auth_info.impersonate = Some(user.to_string());
        kube::Client::try_from(config).map_err(|e| StoreError::Other(e.to_string()))
    }

    pub fn api(&self) -> Api<GkqStack> {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    fn api_in(&self, namespace: &str) -> Api<GkqStack> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

#[async_trait::async_trait]
impl StackStore for KubeStore {
    async fn list(&self) -> Result<Vec<GkqStack>, StoreError> {
        Ok(self.api().list(&Default::default()).await?.items)
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<Option<GkqStack>, StoreError> {
        if self.namespace.as_deref().is_some_and(|ns| ns != namespace) {
            return Ok(None);
        }
        Ok(self.api_in(namespace).get_opt(name).await?)
    }

    async fn set_status(
        &self,
        stack: &GkqStack,
        status: &GkqStackStatus,
    ) -> Result<(), StoreError> {
        let body = serde_json::json!({"status": merge_patch_of(status)});
        self.api_in(&stack.namespace().unwrap_or_default())
            .patch_status(
                &stack.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await?;
        Ok(())
    }

    async fn credentials(&self, stack: &GkqStack) -> Result<Credentials, StoreError> {
        let Some(secret) = &stack.spec.secret_ref else {
            return Ok(Credentials::default());
        };
        let acting_as = identity(stack, self.default_service_account.as_deref())
            .map_err(|e| StoreError::Other(e.to_string()))?;
        let secrets: Api<Secret> = Api::namespaced(
            self.client_as(acting_as.as_deref())?,
            &stack.namespace().unwrap_or_default(),
        );
        let found = secrets.get(&secret.name).await?;
        let data = found
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        Ok(credentials_of(&data))
    }

    async fn set_finalizer(&self, stack: &GkqStack, present: bool) -> Result<(), StoreError> {
        let mut finalizers: Vec<String> = stack.finalizers().to_vec();
        finalizers.retain(|f| f != FINALIZER);
        if present {
            finalizers.push(FINALIZER.to_string());
        }
        // Conditional on the version read: another writer's finalizer is never dropped.
        let body = serde_json::json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": stack.resource_version(),
        }});
        self.api_in(&stack.namespace().unwrap_or_default())
            .patch(
                &stack.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await?;
        Ok(())
    }

    async fn event(&self, stack: &GkqStack, severity: Severity, reason: &str, note: &str) {
        let note: String = note.chars().take(1000).collect();
        let regarding = stack.object_ref(&());
        if let Err(e) = self
            .events
            .publish(&regarding, severity, reason, &note)
            .await
        {
            tracing::warn!("could not record event {reason}: {e}");
        }
    }

    async fn approve(&self, namespace: &str, name: &str, digest: &str) -> Result<(), StoreError> {
        let api = self.api_in(namespace);
        let stack = api
            .get_opt(name)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("{namespace}/{name}")))?;
        check_approval(&stack, digest)?;
        let body = serde_json::json!({"metadata": {"annotations": {APPROVE_ANNOTATION: digest}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        Ok(())
    }

    async fn request(&self, namespace: &str, name: &str, at: &str) -> Result<(), StoreError> {
        let body = serde_json::json!({"metadata": {"annotations": {REQUESTED_ANNOTATION: at}}});
        self.api_in(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        Ok(())
    }
}

/// The local target's stacks: `<state dir>/agent/stacks.json`, read and written under an OS file
/// lock, with their Secrets and Events.
pub struct LocalStore {
    path: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct LocalState {
    #[serde(default)]
    stacks: Vec<GkqStack>,
    #[serde(default)]
    secrets: Vec<Secret>,
    #[serde(default)]
    events: Vec<LocalEvent>,
}

/// An Event as the local store keeps it (the newest 1000), aggregated as in the API server:
/// `count` times, the last at `time`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalEvent {
    pub stack: String,
    pub severity: Severity,
    pub reason: String,
    pub note: String,
    pub time: String,
    #[serde(default = "one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

const LOCAL_EVENTS_KEPT: usize = 1000;

impl LocalStore {
    pub fn new(state_dir: &Path) -> Self {
        LocalStore {
            path: state_dir.join("agent").join("stacks.json"),
        }
    }

    /// The store file's bytes as they are now (empty when it cannot be read): what the agent
    /// compares to tell whether anything changed since it last listed the stacks.
    pub fn contents(&self) -> Vec<u8> {
        std::fs::read(&self.path).unwrap_or_default()
    }

    fn error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Local {
            path: self.path.display().to_string(),
            message: message.to_string(),
        }
    }

    /// Reads the state, lets `change` edit it, and writes it back if `change` says so, all
    /// under the file's lock.
    fn with_state<T>(
        &self,
        change: impl FnOnce(&mut LocalState) -> Result<(T, bool), StoreError>,
    ) -> Result<T, StoreError> {
        if let Some(dir) = self.path.parent() {
            crate::owner_only::create_dir_all(dir).map_err(|e| self.error(e))?;
        }
        let mut file = crate::owner_only::open_read_write(&self.path).map_err(|e| self.error(e))?;
        file.lock().map_err(|e| self.error(e))?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| self.error(e))?;
        let mut state: LocalState = if text.trim().is_empty() {
            LocalState::default()
        } else {
            serde_json::from_str(&text).map_err(|e| self.error(e))?
        };
        let (out, write) = change(&mut state)?;
        if write {
            let text = serde_json::to_string_pretty(&state).map_err(|e| self.error(e))?;
            file.set_len(0)
                .and_then(|_| file.rewind())
                .and_then(|_| file.write_all(text.as_bytes()))
                .and_then(|_| file.flush())
                .map_err(|e| self.error(e))?;
        }
        Ok(out)
    }

    /// Creates or replaces the objects of a `--stack` file (GkqStacks and Secrets; a stack keeps
    /// its status). Returns how many stacks it held.
    /// Changes the stored copy of `stack` and writes the store.
    fn update_stack(
        &self,
        stack: &GkqStack,
        change: impl FnOnce(&mut GkqStack),
    ) -> Result<(), StoreError> {
        let key = key_of(stack);
        self.with_state(|state| {
            let found = state
                .stacks
                .iter_mut()
                .find(|s| key_of(s) == key)
                .ok_or_else(|| StoreError::NotFound(key.clone()))?;
            change(found);
            Ok(((), true))
        })
    }

    pub fn load_manifests(&self, text: &str, origin: &str) -> Result<usize, StoreError> {
        let documents: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(text).map_err(|e| self.error(format!("{origin}: {e}")))?;
        self.with_state(|state| {
            let mut stacks = 0;
            for doc in documents.into_iter().filter(|d| !d.is_null()) {
                match doc["kind"].as_str() {
                    Some("GkqStack") => {
                        let mut stack: GkqStack = serde_json::from_value(doc)
                            .map_err(|e| self.error(format!("{origin}: {e}")))?;
                        if stack.metadata.namespace.is_none() {
                            stack.metadata.namespace = Some("default".into());
                        }
                        let key = key_of(&stack);
                        if let Some(old) = state.stacks.iter().position(|s| key_of(s) == key) {
                            stack.status = state.stacks[old].status.take();
                            state.stacks[old] = stack;
                        } else {
                            state.stacks.push(stack);
                        }
                        stacks += 1;
                    }
                    Some("Secret") => {
                        let mut secret: Secret = serde_json::from_value(doc)
                            .map_err(|e| self.error(format!("{origin}: {e}")))?;
                        if secret.metadata.namespace.is_none() {
                            secret.metadata.namespace = Some("default".into());
                        }
                        state.secrets.retain(|s| {
                            (&s.metadata.namespace, &s.metadata.name)
                                != (&secret.metadata.namespace, &secret.metadata.name)
                        });
                        state.secrets.push(secret);
                    }
                    other => {
                        return Err(self.error(format!(
                            "{origin}: only GkqStack and Secret objects can be given, not {}",
                            other.unwrap_or("an object without kind")
                        )));
                    }
                }
            }
            Ok((stacks, true))
        })
    }

    /// Sets annotation `key` of the stack to `value` if `check` allows it.
    fn annotate(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
        value: &str,
        check: impl FnOnce(&GkqStack) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let wanted = format!("{namespace}/{name}");
        self.with_state(|state| {
            let stack = state
                .stacks
                .iter_mut()
                .find(|s| key_of(s) == wanted)
                .ok_or_else(|| StoreError::NotFound(wanted.clone()))?;
            check(stack)?;
            stack
                .annotations_mut()
                .insert(key.to_string(), value.to_string());
            Ok(((), true))
        })
    }

    /// The Events recorded so far, oldest first.
    pub fn events(&self) -> Result<Vec<LocalEvent>, StoreError> {
        self.with_state(|state| Ok((state.events.clone(), false)))
    }
}

fn key_of(stack: &GkqStack) -> String {
    format!(
        "{}/{}",
        stack.namespace().unwrap_or_default(),
        stack.name_any()
    )
}

#[async_trait::async_trait]
impl StackStore for LocalStore {
    async fn list(&self) -> Result<Vec<GkqStack>, StoreError> {
        self.with_state(|state| Ok((state.stacks.clone(), false)))
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<Option<GkqStack>, StoreError> {
        let wanted = format!("{namespace}/{name}");
        self.with_state(|state| {
            let found = state.stacks.iter().find(|s| key_of(s) == wanted).cloned();
            Ok((found, false))
        })
    }

    async fn set_status(
        &self,
        stack: &GkqStack,
        status: &GkqStackStatus,
    ) -> Result<(), StoreError> {
        self.update_stack(stack, |found| found.status = Some(status.clone()))
    }

    async fn credentials(&self, stack: &GkqStack) -> Result<Credentials, StoreError> {
        let Some(secret) = &stack.spec.secret_ref else {
            return Ok(Credentials::default());
        };
        // The local store knows no default ServiceAccount: only the stack's own can be named.
        if let Some(user) = identity(stack, None).map_err(|e| StoreError::Other(e.to_string()))? {
            return Err(StoreError::Other(format!(
                "the local target's stack store has no RBAC, so it cannot read Secrets as {user}"
            )));
        }
        let namespace = stack.namespace();
        self.with_state(|state| {
            let found = state
                .secrets
                .iter()
                .find(|s| {
                    s.metadata.namespace == namespace
                        && s.metadata.name.as_deref() == Some(&secret.name)
                })
                .ok_or_else(|| StoreError::NotFound(format!("Secret {}", secret.name)))?;
            let mut data: BTreeMap<String, Vec<u8>> = found
                .data
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            for (k, v) in found.string_data.clone().unwrap_or_default() {
                data.insert(k, v.into_bytes());
            }
            Ok((credentials_of(&data), false))
        })
    }

    /// Kept on the stored stack, as the API server keeps it. (The local store's stacks come
    /// from manifest files: removing one from them deletes it with nothing to hold it.)
    async fn set_finalizer(&self, stack: &GkqStack, present: bool) -> Result<(), StoreError> {
        self.update_stack(stack, |found| {
            let finalizers = found.metadata.finalizers.get_or_insert_with(Vec::new);
            finalizers.retain(|f| f != FINALIZER);
            if present {
                finalizers.push(FINALIZER.to_string());
            }
        })
    }

    async fn event(&self, stack: &GkqStack, severity: Severity, reason: &str, note: &str) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = LocalEvent {
            stack: key_of(stack),
            severity,
            reason: reason.to_string(),
            note: note.to_string(),
            time: crate::vocab::time::format_seconds(now),
            count: 1,
        };
        let recorded = self.with_state(|state| {
            let earlier = state.events.iter_mut().rev().find(|e| {
                (&e.stack, e.severity, &e.reason, &e.note)
                    == (&event.stack, event.severity, &event.reason, &event.note)
                    && e.time.parse().is_ok_and(|last| continues_series(last, now))
            });
            if let Some(earlier) = earlier {
                earlier.count += 1;
                earlier.time = event.time;
                return Ok(((), true));
            }
            state.events.push(event);
            let excess = state.events.len().saturating_sub(LOCAL_EVENTS_KEPT);
            state.events.drain(..excess);
            Ok(((), true))
        });
        if let Err(e) = recorded {
            tracing::warn!("could not record event {reason}: {e}");
        }
    }

    async fn approve(&self, namespace: &str, name: &str, digest: &str) -> Result<(), StoreError> {
        self.annotate(namespace, name, APPROVE_ANNOTATION, digest, |stack| {
            check_approval(stack, digest)
        })
    }

    async fn request(&self, namespace: &str, name: &str, at: &str) -> Result<(), StoreError> {
        self.annotate(namespace, name, REQUESTED_ANNOTATION, at, |_| Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_patch_clears_what_the_status_no_longer_has() {
        let status = GkqStackStatus {
            last_applied_revision: Some("abc".into()),
            ..GkqStackStatus::default()
        };
        let patch = merge_patch_of(&status);
        assert_eq!(patch["lastAppliedRevision"], "abc");
        assert!(patch["heldDigest"].is_null() && patch.get("heldDigest").is_some());
        assert!(patch.get("diagnostics").is_some());
    }

    #[tokio::test]
    async fn the_local_store_counts_a_repeated_event_instead_of_adding_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let manifest = "apiVersion: gkq.dev/v1alpha1\nkind: GkqStack\nmetadata: {name: s}\nspec: {url: file:///r}\n";
        store.load_manifests(manifest, "m").unwrap();
        let stack = store.get("default", "s").await.unwrap().unwrap();
        assert!(store.get("default", "t").await.unwrap().is_none());
        for _ in 0..3 {
            store
                .event(&stack, Severity::Warning, "FetchFailed", "no repository")
                .await;
        }
        store
            .event(&stack, Severity::Warning, "FetchFailed", "another reason")
            .await;
        let events = store.events().unwrap();
        let counts: Vec<(&str, u32)> = events.iter().map(|e| (e.note.as_str(), e.count)).collect();
        assert_eq!(counts, [("no repository", 3), ("another reason", 1)]);
    }

    #[tokio::test]
    async fn the_local_store_keeps_stacks_secrets_status_and_approvals() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let manifests = "apiVersion: gkq.dev/v1alpha1\nkind: GkqStack\nmetadata: {name: s}\nspec: {url: file:///r, secretRef: {name: git}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: git}\nstringData: {token: t0ken-value}\n";
        assert_eq!(store.load_manifests(manifests, "m").unwrap(), 1);
        let stack = store.list().await.unwrap().remove(0);
        assert_eq!(stack.metadata.namespace.as_deref(), Some("default"));
        let credentials = store.credentials(&stack).await.unwrap();
        assert_eq!(credentials.token.as_deref(), Some("t0ken-value"));
        let held = GkqStackStatus {
            held_digest: Some("00aa".into()),
            ..GkqStackStatus::default()
        };
        store.set_status(&stack, &held).await.unwrap();
        assert!(matches!(
            store.approve("default", "s", "11bb").await,
            Err(StoreError::Stale { .. })
        ));
        store.approve("default", "s", "00aa").await.unwrap();
        let stack = store.list().await.unwrap().remove(0);
        assert_eq!(stack.annotations()[APPROVE_ANNOTATION], "00aa");
        // Loading the manifests again keeps the status.
        store.load_manifests(manifests, "m").unwrap();
        let stack = store.list().await.unwrap().remove(0);
        assert_eq!(stack.status.unwrap().held_digest.as_deref(), Some("00aa"));
    }
}
