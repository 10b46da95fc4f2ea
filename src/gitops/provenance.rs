//! What a plan's provenance needs from the world: the commit the spec was read from, the clock,
//! and who is applying. The provenance itself is plain data in `plan::provenance`.

use crate::plan::provenance::{GKQ_VERSION, Provenance, SpecRevision, VariableSource};
use crate::spec::types::Target;

/// How a spec was loaded: what [`spec_revision_of`] needs besides the loaded spec.
pub struct SpecInput<'a> {
    /// The SPEC argument as given (a file or a directory).
    pub arg: &'a std::path::Path,
    /// `--git-ref`, when the spec was read from a commit.
    pub git_ref: Option<&'a str>,
}

/// The revision of a spec loaded from `input`: digest (of the variable values `spec::load`
/// resolved), where variables came from, and commit (the `--git-ref` commit, or HEAD when
/// the working tree is clean for the files the spec read).
pub fn spec_revision_of(loaded: &crate::spec::Loaded, input: &SpecInput<'_>) -> SpecRevision {
    let digest = crate::plan::digest::spec_digest(loaded);
    let commit = match input.git_ref {
        Some(reference) => {
            super::git::resolve_commit(&super::git::spec_dir(input.arg), reference).ok()
        }
        None => super::git::clean_head(loaded),
    };
    let mut revision = SpecRevision::new(
        loaded.spec_file.display().to_string(),
        loaded.env.clone(),
        digest,
        commit,
        input.git_ref.map(str::to_string),
    );
    revision.variable_sources = crate::spec::vars::external_sources(&loaded.variables)
        .into_iter()
        .map(|(name, source)| VariableSource { name, source })
        .collect();
    revision
}

/// A plan's provenance, made now: this gkq, the clock, and the state directory made absolute so
/// that `gkq apply plan.json` from another directory finds the same world.
pub fn provenance_now(
    spec: SpecRevision,
    target: Target,
    state_dir: Option<&std::path::Path>,
) -> Provenance {
    Provenance {
        gkq_version: GKQ_VERSION.to_string(),
        created_at: now_rfc3339(),
        target,
        state_dir: state_dir.map(|dir| {
            std::path::absolute(dir)
                .unwrap_or_else(|_| dir.to_path_buf())
                .display()
                .to_string()
        }),
        spec,
    }
}

/// Now, as RFC 3339 UTC to the second.
pub fn now_rfc3339() -> String {
    crate::vocab::time::format_seconds(k8s_openapi::jiff::Timestamp::now())
}

/// Who is applying: the CI system's actor when running in CI, else `user@host`.
pub fn who() -> String {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if var("GITHUB_ACTIONS").is_some() {
        let actor = var("GITHUB_ACTOR").unwrap_or_else(|| "unknown".into());
        return match (var("GITHUB_REPOSITORY"), var("GITHUB_RUN_ID")) {
            (Some(repo), Some(run)) => format!("github-actions:{actor} ({repo} run {run})"),
            _ => format!("github-actions:{actor}"),
        };
    }
    if var("GITLAB_CI").is_some() {
        let actor = var("GITLAB_USER_LOGIN").unwrap_or_else(|| "unknown".into());
        return match var("CI_PIPELINE_ID") {
            Some(pipeline) => format!("gitlab-ci:{actor} (pipeline {pipeline})"),
            None => format!("gitlab-ci:{actor}"),
        };
    }
    let user = var("USER")
        .or_else(|| var("USERNAME"))
        .unwrap_or_else(|| "unknown".into());
    format!("{user}@{}", hostname())
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_to_the_second() {
        let now = now_rfc3339();
        assert!(now.ends_with('Z'), "{now}");
        assert!(!now.contains('.'), "{now}");
        assert_eq!(now.len(), "2026-11-30T12:00:00Z".len(), "{now}");
    }
}
