//! Diffing desired against live state: normalisation, field-level changes, and how each change
//! can be made (in place by which API method, or only by replacing the resource).
//!
//! - [`normalize`]: the one list of ignored and server-defaulted fields, and equal spellings.
//! - [`compare`]: the field walk (compare only what the spec owns, or whole objects).
//! - [`gke`]: node pool and cluster changes classified per GKE's mutability rules.
//! - [`kube`]: Kubernetes object changes (server-side apply, or replace for runs).
//! - [`text`]: canonical YAML and unified diffs.
//!
//! Everything here is pure.

pub mod applied;
pub mod compare;
pub mod fingerprint;
pub mod gke;
pub mod kube;
pub mod normalize;
pub mod sensitive;
pub mod text;

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One step of a path into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

/// A path as people read it: `config.taints[0].effect`, `metadata.labels["app.kubernetes.io/name"]`.
pub fn path_text(path: &[PathSeg]) -> String {
    let mut text = String::new();
    for seg in path {
        match seg {
            PathSeg::Index(i) => text.push_str(&format!("[{i}]")),
            PathSeg::Key(key) => {
                let plain = !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if plain {
                    if !text.is_empty() {
                        text.push('.');
                    }
                    text.push_str(key);
                } else {
                    text.push_str(&format!("[{}]", Value::String(key.clone())));
                }
            }
        }
    }
    text
}

/// The API call that makes a change in place. Several changes with the same method are made by
/// one call; different methods are separate calls (GKE runs one operation at a time).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", rename_all = "camelCase")]
pub enum UpdateMethod {
    /// `clusters.setResourceLabels` (full map plus the current label fingerprint).
    #[serde(rename = "clusters.setResourceLabels")]
    SetClusterResourceLabels,
    /// `clusters.update` with one `ClusterUpdate` field, e.g. `desiredMasterVersion`.
    #[serde(rename = "clusters.update")]
    UpdateCluster { field: String },
    /// `nodePools.setAutoscaling`.
    #[serde(rename = "nodePools.setAutoscaling")]
    SetNodePoolAutoscaling,
    /// `nodePools.setManagement`.
    #[serde(rename = "nodePools.setManagement")]
    SetNodePoolManagement,
    /// `nodePools.update` (PUT) with one field group of `UpdateNodePoolRequest`.
    #[serde(rename = "nodePools.update")]
    UpdateNodePool { field: String },
    /// Kubernetes server-side apply of the whole object.
    #[serde(rename = "kubernetes.apply")]
    ServerSideApply,
}

impl fmt::Display for UpdateMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateMethod::SetClusterResourceLabels => f.write_str("clusters.setResourceLabels"),
            UpdateMethod::UpdateCluster { field } => write!(f, "clusters.update ({field})"),
            UpdateMethod::SetNodePoolAutoscaling => f.write_str("nodePools.setAutoscaling"),
            UpdateMethod::SetNodePoolManagement => f.write_str("nodePools.setManagement"),
            UpdateMethod::UpdateNodePool { field } => write!(f, "nodePools.update ({field})"),
            UpdateMethod::ServerSideApply => f.write_str("kubernetes server-side apply"),
        }
    }
}

/// How a field change can be made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ChangeEffect {
    /// In place, by this method.
    InPlace(UpdateMethod),
    /// Only by recreating the resource, for this reason.
    Replace(String),
}

/// One changed field: `before` is live, `after` is desired; absent means not set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    /// Dotted path with `[i]` indices and `["quoted"]` keys, e.g. `autoscaling.maxNodeCount`.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    pub effect: ChangeEffect,
}

/// The changes between one desired and one live resource, and the live view for text diffs. The
/// default is no change and nothing to show.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceDiff {
    pub changes: Vec<FieldChange>,
    /// Live, in the desired value's shape and spelling (see [`compare`]).
    pub live_view: Value,
    /// Desired, as compared (create-only fields removed, for instance).
    pub desired_view: Value,
}

impl ResourceDiff {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Why the resource must be replaced, one reason per distinct cause; empty if it need not be.
    pub fn replace_reasons(&self) -> Vec<String> {
        let mut reasons: Vec<String> = Vec::new();
        for change in &self.changes {
            if let ChangeEffect::Replace(reason) = &change.effect
                && !reasons.contains(reason)
            {
                reasons.push(reason.clone());
            }
        }
        reasons
    }

    /// The in-place methods needed, in a stable order, each once.
    pub fn methods(&self) -> Vec<UpdateMethod> {
        let mut methods: Vec<UpdateMethod> = self
            .changes
            .iter()
            .filter_map(|c| match &c.effect {
                ChangeEffect::InPlace(method) => Some(method.clone()),
                ChangeEffect::Replace(_) => None,
            })
            .collect();
        methods.sort();
        methods.dedup();
        methods
    }

    /// The unified diff of canonical YAML, live -> desired.
    pub fn text(&self) -> String {
        text::unified_yaml_diff(Some(&self.live_view), Some(&self.desired_view))
    }
}

pub(crate) fn field_changes(
    raw: Vec<compare::RawChange>,
    classify: impl Fn(&[PathSeg]) -> ChangeEffect,
) -> Vec<FieldChange> {
    raw.into_iter()
        .map(|change| FieldChange {
            path: path_text(&change.path),
            effect: classify(&change.path),
            before: change.before,
            after: change.after,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_like_terraform() {
        let path = [
            PathSeg::Key("config".into()),
            PathSeg::Key("taints".into()),
            PathSeg::Index(0),
            PathSeg::Key("effect".into()),
        ];
        assert_eq!(path_text(&path), "config.taints[0].effect");
        let labels = [
            PathSeg::Key("metadata".into()),
            PathSeg::Key("labels".into()),
            PathSeg::Key("app.kubernetes.io/managed-by".into()),
        ];
        assert_eq!(
            path_text(&labels),
            r#"metadata.labels["app.kubernetes.io/managed-by"]"#
        );
    }
}
