//! Saved plans: `gkq plan --out plan.json` writes one, `gkq apply plan.json` applies exactly it or
//! refuses. This module reads a plan file and decides, from its provenance, whether it may be
//! applied: the format must be one this gkq reads, the target must be the one asked for, and the
//! spec, when it is available, must still have the digest the plan was made from. Live state is
//! checked separately, by [`crate::apply::Executor::verify`].

use std::path::Path;

use super::digest::{describe_changes, short_digest};
use super::provenance::SpecRevision;
use crate::plan::{PLAN_FORMAT_VERSION, Plan};
use crate::spec::limits::MAX_PLAN_BYTES;
use crate::spec::types::Target;

#[derive(Debug, thiserror::Error)]
pub enum SavedPlanError {
    #[error("cannot read the plan file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a gkq plan file: {message}")]
    NotAPlan { path: String, message: String },
    #[error(
        "{path} is plan format {found}, and this gkq ({version}) reads format {PLAN_FORMAT_VERSION}"
    )]
    Format {
        path: String,
        found: u32,
        version: &'static str,
    },
    #[error("{path} does not say what it was planned from (no `provenance`)")]
    NoProvenance { path: String },
    #[error("the plan was made for the {planned:?} target, and this apply is for {requested:?}")]
    TargetMismatch { planned: Target, requested: Target },
    #[error(
        "the spec changed since the plan was made ({}): {planned} when planned, {now} now",
        if .changes.is_empty() { "variables or environment differ".to_string() } else { .changes.join(", ") }
    )]
    SpecChanged {
        planned: String,
        now: String,
        changes: Vec<String>,
    },
}

impl SavedPlanError {
    pub fn hint(&self) -> &'static str {
        match self {
            SavedPlanError::Read { .. } | SavedPlanError::NotAPlan { .. } => {
                "Pass a file written by `gkq plan --out FILE`, or a spec file or directory."
            }
            SavedPlanError::Format { .. } | SavedPlanError::NoProvenance { .. } => {
                "Make the plan again with this gkq: `gkq plan --out FILE`."
            }
            SavedPlanError::TargetMismatch { .. } => {
                "Apply the plan to the target it was made for, or make a plan for this target."
            }
            SavedPlanError::SpecChanged { .. } => {
                "Nothing was applied. Plan again from the current spec (`gkq plan --out FILE`), review it, and apply that plan. If only variables differ, pass the same --var values and environment as when planning."
            }
        }
    }
}

/// Whether `path` is a saved plan rather than a spec: a file holding a JSON object with the
/// plan's `formatVersion` and `actions`. Specs are YAML or TOML files or directories.
pub fn is_plan_file(path: &Path) -> bool {
    if !path.is_file() {
        return false;
    }
    let Ok(text) = crate::spec::fs::read_at_most(path, MAX_PLAN_BYTES) else {
        return false;
    };
    if !text.trim_start().starts_with('{') {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| {
        v.get("formatVersion").is_some() && v.get("actions").is_some_and(|a| a.is_array())
    })
}

/// Reads and checks a plan file: a plan this gkq can apply, with provenance.
pub fn read(path: &Path) -> Result<Plan, SavedPlanError> {
    let shown = path.display().to_string();
    let text = crate::spec::fs::read_at_most(path, MAX_PLAN_BYTES).map_err(|source| {
        SavedPlanError::Read {
            path: shown.clone(),
            source,
        }
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| SavedPlanError::NotAPlan {
            path: shown.clone(),
            message: e.to_string(),
        })?;
    let found = value
        .get("formatVersion")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| SavedPlanError::NotAPlan {
            path: shown.clone(),
            message: "no formatVersion".into(),
        })?;
    if found != u64::from(PLAN_FORMAT_VERSION) {
        return Err(SavedPlanError::Format {
            path: shown,
            found: u32::try_from(found).unwrap_or(u32::MAX),
            version: super::provenance::GKQ_VERSION,
        });
    }
    let plan: Plan = serde_json::from_value(value).map_err(|e| SavedPlanError::NotAPlan {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    if plan.provenance.is_none() {
        return Err(SavedPlanError::NoProvenance { path: shown });
    }
    Ok(plan)
}

/// Refuses when the spec read now differs from the one the plan was made from.
pub fn check_spec(planned: &SpecRevision, now: &SpecRevision) -> Result<(), SavedPlanError> {
    if planned.digest == now.digest {
        return Ok(());
    }
    Err(SavedPlanError::SpecChanged {
        planned: planned_label(planned),
        now: planned_label(now),
        changes: describe_changes(&planned.files, &now.files),
    })
}

fn planned_label(spec: &SpecRevision) -> String {
    match &spec.commit {
        Some(commit) => format!(
            "spec {} at commit {}",
            short_digest(&spec.digest),
            super::provenance::short_commit(commit)
        ),
        None => format!("spec {}", short_digest(&spec.digest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gitops::digest::FileDigest;

    fn spec(digest: &str, files: &[(&str, &str)]) -> SpecRevision {
        SpecRevision {
            path: "infra/gkq.yaml".into(),
            env: None,
            digest: format!("sha256:{digest}"),
            files: files
                .iter()
                .map(|(p, h)| FileDigest {
                    path: p.to_string(),
                    sha256: h.to_string(),
                })
                .collect(),
            variables: vec![],
            commit: None,
            git_ref: None,
        }
    }

    #[test]
    fn a_changed_spec_names_the_changed_files() {
        let planned = spec("aaaaaaaaaaaaaaaa", &[("gkq.yaml", "1"), ("train.py", "2")]);
        assert!(check_spec(&planned, &planned.clone()).is_ok());
        let now = spec("bbbbbbbbbbbbbbbb", &[("gkq.yaml", "1"), ("train.py", "3")]);
        let err = check_spec(&planned, &now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the spec changed since the plan was made (train.py changed): spec aaaaaaaaaaaa when planned, spec bbbbbbbbbbbb now"
        );
        let vars_only = spec("cccccccccccccccc", &[("gkq.yaml", "1"), ("train.py", "2")]);
        assert!(
            check_spec(&planned, &vars_only)
                .unwrap_err()
                .to_string()
                .contains("variables or environment differ")
        );
    }

    #[test]
    fn plan_files_are_told_from_specs() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("plan.json");
        std::fs::write(&plan, r#"{"formatVersion": 1, "actions": []}"#).unwrap();
        assert!(is_plan_file(&plan));
        let spec = dir.path().join("gkq.yaml");
        std::fs::write(&spec, "project: p\n").unwrap();
        assert!(!is_plan_file(&spec));
        assert!(!is_plan_file(dir.path()));
        let future = dir.path().join("future.json");
        std::fs::write(&future, r#"{"formatVersion": 9, "actions": []}"#).unwrap();
        assert!(matches!(
            read(&future),
            Err(SavedPlanError::Format { found: 9, .. })
        ));
    }
}
