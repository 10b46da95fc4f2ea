//! Where a plan came from: the spec digest, the commit, the target and the gkq version. Saved
//! plans carry it (`gkq plan --out`), `gkq apply PLANFILE` checks it, and every apply records the
//! same facts in the cluster (`gitops::revision`). Reading the commit, the clock and the
//! identity of who applies is `gitops::provenance`'s.
//!
//! It never holds credentials or variable values: only file paths, hashes, names and ids.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::digest::{FileDigest, SpecDigest};
use crate::spec::types::Target;
use crate::spec::vars::ValueSource;

/// The version of gkq that is running.
pub const GKQ_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a plan was computed from, and for which target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The gkq version that made the plan.
    pub gkq_version: String,
    /// When the plan was made (RFC 3339, UTC).
    pub created_at: String,
    /// `gcp` or `local`.
    pub target: Target,
    /// The local target's state directory, so that applying the saved plan acts on the same
    /// simulated world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
    pub spec: SpecRevision,
}

/// The spec a plan was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecRevision {
    /// The spec file, as the command line named it (relative to the directory gkq ran in).
    pub path: String,
    /// The environment overlay (`--env`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// `sha256:<64 hex>` over the spec's files, the environment and the variable values.
    pub digest: String,
    /// Each file the spec was read from, with its own hash.
    pub files: Vec<FileDigest>,
    /// Names of the declared variables. Their values are part of the digest, never of the plan.
    #[serde(default)]
    pub variables: Vec<String>,
    /// The variables whose values came from outside the spec (`--var`, or the environment
    /// variable `GKQ_VAR_<NAME>`), by name: the values are never recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variable_sources: Vec<VariableSource>,
    /// The commit the spec was read from: the `--git-ref` commit, or HEAD when every file the spec
    /// read is committed and unmodified. Absent when the working tree has uncommitted changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The `--git-ref` argument, when one was given (`origin/main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
}

/// A variable set from outside the spec, and how: names and sources only, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VariableSource {
    pub name: String,
    /// `cli` (`--var`) or `environment` (`GKQ_VAR_<NAME>`).
    pub source: ValueSource,
}

impl SpecRevision {
    pub fn new(
        path: String,
        env: Option<String>,
        digest: SpecDigest,
        commit: Option<String>,
        git_ref: Option<String>,
    ) -> Self {
        SpecRevision {
            path,
            env,
            digest: digest.digest,
            files: digest.files,
            variables: digest.variables,
            variable_sources: Vec::new(),
            commit,
            git_ref,
        }
    }

    /// `commit 0123456789ab (spec 1fc17a1d9fd6)` or `spec 1fc17a1d9fd6, not from a commit` (no git,
    /// or uncommitted changes), for messages.
    pub fn describe(&self) -> String {
        let digest = super::digest::short_digest(&self.digest);
        match &self.commit {
            Some(commit) => format!("commit {} (spec {digest})", short_commit(commit)),
            None => format!("spec {digest}, not from a commit"),
        }
    }
}

/// The first 12 characters of a commit id.
pub fn short_commit(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_commit_or_dirty_tree() {
        let digest = SpecDigest {
            digest: format!("sha256:{}", "ab".repeat(32)),
            files: vec![],
            variables: vec![],
        };
        let mut revision = SpecRevision::new(
            "gkq.yaml".into(),
            None,
            digest,
            Some("0123456789abcdef".into()),
            None,
        );
        assert_eq!(
            revision.describe(),
            "commit 0123456789ab (spec abababababab)"
        );
        revision.commit = None;
        assert_eq!(revision.describe(), "spec abababababab, not from a commit");
    }
}
