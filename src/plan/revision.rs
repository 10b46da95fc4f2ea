//! What an apply records about itself in the cluster, as data: the applied revision and the
//! short forms on GKE's labels. Reading and writing them is `gitops::revision`.
//!
//! After every successful apply, gkq records what it applied in the cluster
//! itself, so that anyone (`gkq status`, `kubectl`, the Cloud console) can tell which commit and
//! spec the live state came from.
//!
//! - Kubernetes: a small ConfigMap `gkq-revision-<stack>` in `kube-system`, whose annotations hold
//!   the commit, spec digest, time, gkq version and who applied. `kube-system` exists on every
//!   cluster, is where cluster-level bookkeeping lives (leader-election leases), and is not where
//!   users list their workloads. The stack is part of the name because several stacks can share
//!   one API server (the test control plane does); on GKE the stack is the cluster.
//!   The ConfigMap carries `app.kubernetes.io/managed-by: gkq` but not the stack label, so plans
//!   never see it as an object to prune.
//! - GKE: resource labels on the cluster, `gkq-revision: <12 hex of the spec digest>` and, when the
//!   commit is known, `gkq-commit: <12 hex of the commit>` (label values are lowercase and at most
//!   63 characters, so both are short forms). They are listed with GKE's own labels in
//!   `diff::normalize`, so they never show as drift and label updates keep them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::digest::short_digest;
use super::provenance::{GKQ_VERSION, SpecRevision, short_commit};
use crate::model::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

pub const REVISION_NAMESPACE: &str = "kube-system";
/// Label naming the stack a revision ConfigMap belongs to (deliberately not `gkq.dev/stack`).
pub const REVISION_OF_LABEL: &str = "gkq.dev/revision-of";
/// GKE resource label with the short spec digest.
pub const GKE_REVISION_LABEL: &str = "gkq-revision";
/// GKE resource label with the short commit id.
pub const GKE_COMMIT_LABEL: &str = "gkq-commit";

const ANNOTATION_COMMIT: &str = "gkq.dev/commit";
const ANNOTATION_DIGEST: &str = "gkq.dev/spec-digest";
const ANNOTATION_SPEC: &str = "gkq.dev/spec";
const ANNOTATION_ENV: &str = "gkq.dev/env";
const ANNOTATION_APPLIED_AT: &str = "gkq.dev/applied-at";
const ANNOTATION_APPLIED_BY: &str = "gkq.dev/applied-by";
const ANNOTATION_VERSION: &str = "gkq.dev/gkq-version";

/// The ConfigMap's name for a stack.
pub fn configmap_name(stack: &str) -> String {
    format!("gkq-revision-{stack}")
}

/// What an apply applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedRevision {
    /// The commit the spec was read from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// `sha256:<64 hex>` of the spec's files, environment and variables.
    pub spec_digest: String,
    /// The spec file, as the command line named it.
    pub spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// RFC 3339, UTC.
    pub applied_at: String,
    /// `user@host`, or the CI system and its actor.
    pub applied_by: String,
    pub gkq_version: String,
}

impl AppliedRevision {
    /// Whether `other` records the same spec (same digest and commit); time and person aside.
    pub fn same_spec(&self, other: &AppliedRevision) -> bool {
        self.spec_digest == other.spec_digest && self.commit == other.commit
    }

    /// The ConfigMap that records this revision for `stack`.
    pub fn to_configmap(&self, stack: &str) -> Value {
        let mut annotations = serde_json::Map::new();
        let mut put = |key: &str, value: &str| {
            annotations.insert(key.to_string(), Value::String(value.to_string()));
        };
        if let Some(commit) = &self.commit {
            put(ANNOTATION_COMMIT, commit);
        }
        put(ANNOTATION_DIGEST, &self.spec_digest);
        put(ANNOTATION_SPEC, &self.spec);
        if let Some(env) = &self.env {
            put(ANNOTATION_ENV, env);
        }
        put(ANNOTATION_APPLIED_AT, &self.applied_at);
        put(ANNOTATION_APPLIED_BY, &self.applied_by);
        put(ANNOTATION_VERSION, &self.gkq_version);
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": configmap_name(stack),
                "namespace": REVISION_NAMESPACE,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, REVISION_OF_LABEL: stack},
                "annotations": annotations,
            },
            "data": {
                "README": "Written by gkq after each apply: the annotations say which spec revision the cluster runs. `gkq status` reads them.",
            },
        })
    }

    /// Reads a revision back from its ConfigMap; `None` when the annotations are not there.
    pub fn from_configmap(configmap: &Value) -> Option<Self> {
        let annotations = configmap.pointer("/metadata/annotations")?;
        let get = |key: &str| {
            annotations
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Some(AppliedRevision {
            commit: get(ANNOTATION_COMMIT),
            spec_digest: get(ANNOTATION_DIGEST)?,
            spec: get(ANNOTATION_SPEC).unwrap_or_default(),
            env: get(ANNOTATION_ENV),
            applied_at: get(ANNOTATION_APPLIED_AT).unwrap_or_default(),
            applied_by: get(ANNOTATION_APPLIED_BY).unwrap_or_default(),
            gkq_version: get(ANNOTATION_VERSION).unwrap_or_default(),
        })
    }

    /// The GKE resource labels for this revision (values are lowercase hex, 12 characters).
    pub fn gke_labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        labels.insert(
            GKE_REVISION_LABEL.to_string(),
            short_digest(&self.spec_digest).to_ascii_lowercase(),
        );
        if let Some(commit) = &self.commit {
            labels.insert(
                GKE_COMMIT_LABEL.to_string(),
                short_commit(commit).to_ascii_lowercase(),
            );
        }
        labels
    }
}

/// The short forms GKE labels hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelRevision {
    /// 12 hex digits of the spec digest.
    pub spec_digest: String,
    /// 12 hex digits of the commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl LabelRevision {
    /// From a live cluster's `resourceLabels`; `None` when gkq never recorded a revision there.
    pub fn from_cluster(cluster: &Value) -> Option<Self> {
        let labels = cluster.get("resourceLabels")?;
        let get = |key: &str| labels.get(key).and_then(Value::as_str).map(str::to_string);
        Some(LabelRevision {
            spec_digest: get(GKE_REVISION_LABEL)?,
            commit: get(GKE_COMMIT_LABEL),
        })
    }

    /// Whether a full revision matches these short forms.
    pub fn matches(&self, spec_digest: &str, commit: Option<&str>) -> bool {
        short_digest(spec_digest) == self.spec_digest
            && match (&self.commit, commit) {
                (Some(short), Some(full)) => full.starts_with(short.as_str()),
                (None, None) => true,
                _ => false,
            }
    }
}

impl AppliedRevision {
    /// The revision an apply of `spec` records, made at `applied_at` by `applied_by`.
    pub fn of(spec: &SpecRevision, applied_at: String, applied_by: String) -> Self {
        AppliedRevision {
            commit: spec.commit.clone(),
            spec_digest: spec.digest.clone(),
            spec: spec.path.clone(),
            env: spec.env.clone(),
            applied_at,
            applied_by,
            gkq_version: GKQ_VERSION.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(commit: Option<&str>) -> AppliedRevision {
        AppliedRevision {
            commit: commit.map(str::to_string),
            spec_digest: format!("sha256:{}", "0123456789abcdef".repeat(4)),
            spec: "infra/gkq.yaml".into(),
            env: Some("prod".into()),
            applied_at: "2026-11-30T12:00:00Z".into(),
            applied_by: "github-actions:alice (acme/infra run 7)".into(),
            gkq_version: "0.1.0".into(),
        }
    }

    #[test]
    fn configmap_round_trips_and_is_not_prunable() {
        let rev = revision(Some("89abcdef0123456789abcdef0123456789abcdef"));
        let cm = rev.to_configmap("tpu-cluster");
        assert_eq!(AppliedRevision::from_configmap(&cm), Some(rev.clone()));
        assert_eq!(cm["metadata"]["name"], "gkq-revision-tpu-cluster");
        assert_eq!(cm["metadata"]["namespace"], "kube-system");
        // The stack label would make the planner list it as an owned object to prune.
        assert!(cm.pointer("/metadata/labels/gkq.dev~1stack").is_none());
        assert_eq!(cm["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY_VALUE);
        let without_commit = revision(None);
        assert_eq!(
            AppliedRevision::from_configmap(&without_commit.to_configmap("s")),
            Some(without_commit)
        );
    }

    #[test]
    fn gke_labels_are_valid_label_values_and_match_back() {
        let rev = revision(Some("89ABCDEF0123456789abcdef0123456789abcdef"));
        let labels = rev.gke_labels();
        for value in labels.values() {
            assert!(value.len() <= 63);
            assert!(
                value
                    .chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
            );
        }
        assert_eq!(labels[GKE_REVISION_LABEL], "0123456789ab");
        let cluster = json!({"resourceLabels": labels});
        let read = LabelRevision::from_cluster(&cluster).unwrap();
        assert!(read.matches(
            &rev.spec_digest,
            Some("89abcdef0123456789abcdef0123456789abcdef")
        ));
        assert!(!read.matches(&rev.spec_digest, None));
        assert!(!read.matches("sha256:ffff", Some("89abcdef0123")));
        assert_eq!(
            LabelRevision::from_cluster(&json!({"resourceLabels": {}})),
            None
        );
    }
}
