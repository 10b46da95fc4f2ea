//! The `GkqStack` custom resource (`gkqstacks.gkq.dev`, `gkq.dev/v1alpha1`): which repository, ref
//! and spec one stack follows, and what the agent last did with it. The CRD in `deploy/crd.yaml`
//! is generated from these types ([`crd_yaml`]); a test keeps the two equal.

use std::collections::BTreeMap;

use kube::CustomResource;
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The annotation that approves a held plan: its value is the plan digest the agent showed.
pub const APPROVE_ANNOTATION: &str = "gkq.dev/approve";

/// The finalizer the agent puts on every stack, so that deleting a stack first deletes what it
/// owns (`spec.prune: true`) or gives its ownership up.
pub const FINALIZER: &str = "gkq.dev/finalizer";

/// The annotation a push webhook sets (to the time it arrived) when the replica that received it
/// does not lead: the leader's watch sees the change and fetches at once.
pub const REQUESTED_ANNOTATION: &str = "gkq.dev/reconcile-requested-at";

/// One stack: a spec in a git repository that the agent keeps applied.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "gkq.dev",
    version = "v1alpha1",
    kind = "GkqStack",
    plural = "gkqstacks",
    singular = "gkqstack",
    shortname = "gkqs",
    namespaced,
    status = "GkqStackStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Held","type":"string","jsonPath":".status.heldDigest"}"#,
    printcolumn = r#"{"name":"Applied","type":"string","jsonPath":".status.lastAppliedRevision"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GkqStackSpec {
    /// The git repository: `https://HOST/PATH`, `ssh://[USER@]HOST[:PORT]/PATH` or
    /// `USER@HOST:PATH`; `file:///PATH` only where the agent allows it (`--allow-file-urls`).
    #[schemars(regex(pattern = URL_PATTERN), length(min = 1, max = 2048))]
    pub url: String,
    /// The branch to follow (default `main` when no tag is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = REF_PATTERN), length(min = 1, max = 2048))]
    pub branch: Option<String>,
    /// A tag to apply instead of a branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = REF_PATTERN), length(min = 1, max = 2048))]
    pub tag: Option<String>,
    /// The spec in the repository: a file, or a directory holding gkq.yaml or gkq.toml.
    #[serde(default = "default_path")]
    pub path: String,
    /// Environment overlay (`environments/<env>.yaml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// Values of the spec's declared variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
    /// How often the repository is fetched and live state re-planned (`30s`, `1m`, `1h30m`); at
    /// least the agent's minimum (10s unless its `--min-interval` says otherwise).
    #[serde(default = "default_interval")]
    #[schemars(regex(pattern = INTERVAL_PATTERN), length(min = 1, max = 64))]
    pub interval: String,
    /// After creating each job Kueue queues, how long an apply of this stack waits at most for
    /// Kueue's decision on it before creating the next (`10s`, `2m`; `0s` does not wait), so
    /// that Kueue sees the jobs one after another as the plan predicted; at most 10m. The
    /// agent's `--submit-wait` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = INTERVAL_PATTERN), length(min = 1, max = 64))]
    pub submit_wait: Option<String>,
    /// Stop reconciling this stack (nothing is fetched, planned or applied).
    #[serde(default)]
    pub suspend: bool,
    /// When the stack is deleted, delete the Kubernetes objects it owns first (a plan that
    /// stops running jobs is held for approval, as any other). Without it, deleting the stack
    /// gives its objects up: they stay, and no longer name it as their owner.
    #[serde(default)]
    pub prune: bool,
    /// The ServiceAccount, in the stack's namespace, that every Kubernetes read and write of
    /// this stack acts as (impersonation; the agent's `--default-service-account` when unset).
    /// The cluster's RBAC then decides what the stack may do, and its `secretRef` is read as
    /// this ServiceAccount too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = NAME_PATTERN), length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    /// A Secret in the stack's namespace with the git credentials: `token` (and optionally
    /// `username`) for HTTPS, or `identity` (an SSH private key) and optionally `known_hosts`;
    /// `webhookSecret` verifies push webhooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
}

/// What the API server refuses before a stack is stored: a URL of none of the accepted forms, a
/// leading `-`, control characters and white space. The agent checks every field again, and
/// more strictly (`agent::source_check`), since a stack may predate this schema.
const URL_PATTERN: &str = r"^(https://[^\s\x00-\x1f\x7f/-][^\s\x00-\x1f\x7f]*|ssh://[^\s\x00-\x1f\x7f/-][^\s\x00-\x1f\x7f]*|file:///[^\s\x00-\x1f\x7f]*|[A-Za-z0-9._][A-Za-z0-9._-]*@[A-Za-z0-9.\[][^\s\x00-\x1f\x7f/]*?:[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]*)$";

/// A ServiceAccount's name: a DNS-1123 subdomain.
const NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A duration of gkq's one grammar (`vocab::duration`): `<number><unit>` parts, units `ms`, `s`,
/// `m`, `h`, `d`, optionally separated by spaces. The agent parses it again and enforces its
/// minimum.
const INTERVAL_PATTERN: &str = r"^ *([0-9]+(\.[0-9]+)? *(ms|s|m|h|d) *)+$";

/// A branch or tag: no leading `-`, none of the characters git refuses in a ref name.
const REF_PATTERN: &str = r"^[^-\s\x00-\x1f\x7f~^:?*\[\\][^\s\x00-\x1f\x7f~^:?*\[\\]*$";

fn default_path() -> String {
    ".".to_string()
}

fn default_interval() -> String {
    "1m".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SecretRef {
    pub name: String,
}

/// What the agent last did with a stack.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GkqStackStatus {
    /// Ready, Reconciling, Stalled and Held, in Kubernetes style.
    #[serde(default)]
    pub conditions: Vec<StackCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The commit last fetched and planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// The commit last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// When it was applied (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_time: Option<String>,
    /// The last plan's summary (`Plan: 1 to create, 0 to update, 0 to replace, 0 to delete.`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Where Kueue is predicted to place each job (`ns/job -> admitted`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<String>,
    /// The digest of the plan held for approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_digest: Option<String>,
    /// Why the spec is invalid, as `file:line:col: error: ...` lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<String>,
}

/// A condition as Kubernetes API conventions shape it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StackCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl GkqStackStatus {
    /// The condition of `type_`, if set.
    pub fn condition(&self, type_: &str) -> Option<&StackCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// The CRD as YAML, as kept in `deploy/crd.yaml`.
pub fn crd_yaml() -> String {
    let crd = serde_json::to_value(GkqStack::crd()).unwrap_or_default();
    let body = serde_saphyr::to_string(&crd).unwrap_or_default();
    format!("# Generated by `gkq agent --print-crd` from src/agent/crd.rs; do not edit.\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_names_the_api() {
        let crd = GkqStack::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("gkqstacks.gkq.dev"));
        let text = crd_yaml();
        assert!(text.contains("gkq.dev"), "{text}");
        let spec: GkqStackSpec =
            serde_json::from_value(serde_json::json!({"url": "file:///r"})).expect("defaults");
        assert_eq!(spec.interval, "1m");
        assert_eq!(spec.path, ".");
    }
}
