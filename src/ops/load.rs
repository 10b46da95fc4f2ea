//! Loading a spec the way every command does: from the working tree or a commit, with
//! `--var` values and the process environment, validated and built into the desired state.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::gitops::tree::{GitTree, WorkingTree};
use crate::model::DesiredState;
use crate::plan::provenance::SpecRevision;
use crate::spec::{self, Diagnostics, LoadOptions, Loaded, SourceMap};

/// Where a spec comes from, and how it is resolved.
#[derive(Debug, Clone, Default)]
pub struct SpecSource {
    /// A spec file, or a directory holding gkq.yaml or gkq.toml.
    pub spec: PathBuf,
    /// Environment overlay (`--env`).
    pub env: Option<String>,
    /// `--var NAME=VALUE` values.
    pub vars: Vec<(String, String)>,
    /// Read the spec from this git commit, branch or tag instead of the working tree.
    pub git_ref: Option<String>,
}

impl SpecSource {
    /// Load options: these variables, and the process environment for `GKQ_VAR_<NAME>`.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            env: self.env.clone(),
            vars: self.vars.iter().cloned().collect::<BTreeMap<_, _>>(),
            env_lookup: Some(Box::new(|name| std::env::var(name).ok())),
        }
    }

    /// The stack the spec names (its cluster's name), read from the spec's head alone
    /// ([`spec::head`]) so that what a plan lists of the stack can start while the whole spec
    /// loads; the plan uses those lists only when the whole spec names the same stack. `None`
    /// when the head alone does not say (a TOML spec, one read from a commit, a head that
    /// does not load on its own).
    pub fn stack_hint(&self) -> Option<String> {
        if self.git_ref.is_some() {
            return None;
        }
        let loaded = spec::head::load_head(&WorkingTree, &self.spec, &self.load_options())?;
        Some(loaded.spec.cluster.name).filter(|name| !name.is_empty())
    }

    /// The source that reloads the spec a saved plan was made from (what the caller gives wins).
    pub fn for_saved_plan(planned: &SpecRevision, given: &SpecSource) -> SpecSource {
        SpecSource {
            spec: PathBuf::from(&planned.path),
            env: given.env.clone().or_else(|| planned.env.clone()),
            vars: given.vars.clone(),
            git_ref: given.git_ref.clone().or_else(|| planned.git_ref.clone()),
        }
    }
}

/// A loaded spec, what was said about it, and its sources (for rendering the diagnostics).
pub struct Validated {
    /// The spec and its desired state; `None` when it is invalid.
    pub valid: Option<(Loaded, DesiredState)>,
    pub diagnostics: Diagnostics,
    pub sources: SourceMap,
}

/// Loads and validates a spec.
pub fn load_valid(source: &SpecSource) -> Validated {
    let git;
    let fs: &dyn spec::SpecFs = match &source.git_ref {
        None => &WorkingTree,
        Some(r) => match GitTree::open(&source.spec, r) {
            Ok(tree) => {
                git = tree;
                &git
            }
            Err(e) => {
                let mut diagnostics = Diagnostics::default();
                diagnostics
                    .push(spec::Diagnostic::error(e.to_string()).help(
                        "pass a commit, branch or tag of the repository that holds the spec",
                    ));
                return Validated {
                    valid: None,
                    diagnostics,
                    sources: SourceMap::default(),
                };
            }
        },
    };
    match spec::load(fs, &source.spec, &source.load_options()) {
        Err(f) => Validated {
            valid: None,
            diagnostics: f.diagnostics,
            sources: f.sources,
        },
        Ok(mut loaded) => {
            // Everything after loading (validation, rendering, placement, the plan) reads the
            // spec with its capacity ladder expanded.
            crate::model::ladder::expand_loaded(&mut loaded);
            let (desired, diagnostics) = crate::model::build_moving_manifests(&mut loaded);
            // The spec keeps what validation said of it: a plan made from it shows its warnings
            // and notes (`ops::plan::plan_valid`).
            loaded.diagnostics = diagnostics.clone();
            let sources = loaded.sources.clone();
            Validated {
                valid: desired.map(|d| (loaded, d)),
                diagnostics,
                sources,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(dir: &std::path::Path, env: Option<&str>, vars: &[(&str, &str)]) -> SpecSource {
        SpecSource {
            spec: dir.to_path_buf(),
            env: env.map(str::to_string),
            vars: vars
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            git_ref: None,
        }
    }

    /// The head names the stack as the whole spec does: variables (their defaults, `--var`)
    /// and the overlay resolved; a head that cannot say (the cluster after the jobs, a TOML
    /// spec) gives no hint.
    #[test]
    fn the_stack_hint_is_the_cluster_the_whole_spec_names() {
        let dir = tempfile::tempdir().unwrap();
        let spec = "variables:\n  NAME:\n    default: base\nproject: p\nlocation: us-east5-b\n\
                    cluster:\n  name: ${NAME}-c\nmanifests:\n  - {apiVersion: v1, kind: ConfigMap, \
                    metadata: {name: m, namespace: default}}\n";
        std::fs::write(dir.path().join("gkq.yaml"), spec).unwrap();
        std::fs::create_dir(dir.path().join("environments")).unwrap();
        std::fs::write(
            dir.path().join("environments/prod.yaml"),
            "cluster:\n  name: prod-c\n",
        )
        .unwrap();
        for (env, vars, stack) in [
            (None, vec![], "base-c"),
            (None, vec![("NAME", "mine")], "mine-c"),
            (Some("prod"), vec![], "prod-c"),
        ] {
            let source = source(dir.path(), env, &vars);
            assert_eq!(source.stack_hint().as_deref(), Some(stack));
            let whole = load_valid(&source).valid.expect("the spec is valid").1;
            assert_eq!(whole.gke.cluster_ref.cluster, stack);
        }

        let late = "project: p\nlocation: us-east5-b\nmanifests: []\ncluster:\n  name: c\n";
        std::fs::write(dir.path().join("gkq.yaml"), late).unwrap();
        assert_eq!(source(dir.path(), None, &[]).stack_hint(), None);
        std::fs::remove_file(dir.path().join("gkq.yaml")).unwrap();
        std::fs::write(
            dir.path().join("gkq.toml"),
            "project = \"p\"\nlocation = \"us-east5-b\"\n[cluster]\nname = \"c\"\n",
        )
        .unwrap();
        assert_eq!(source(dir.path(), None, &[]).stack_hint(), None);
    }
}
