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
