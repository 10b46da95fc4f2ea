//! A spec copied into a fresh temporary directory, to edit, run gkq on and commit.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::control_plane::repo_root;
use super::process::{explain, text};

/// `<tmp>/infra` holds a copy of a spec directory; `<tmp>` may become a git repository
/// ([`Workspace::commit_all`]). Removed when dropped.
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    /// The example `examples/tpu-dws`: `gkq.yaml`, `train.py` and every overlay in
    /// `environments/` (not `gkq.toml`, which would make the spec ambiguous).
    pub fn example() -> Self {
        let ws = Self::copy_of("examples/tpu-dws", &["gkq.yaml", "train.py"]);
        let overlays = repo_root().join("environments");
        std::fs::create_dir_all(ws.spec_dir().join("environments")).unwrap();
        for entry in std::fs::read_dir(&overlays).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(
                entry.path(),
                ws.spec_dir().join("environments").join(entry.file_name()),
            )
            .unwrap();
        }
        ws
    }

    /// The Kubernetes-half fixture `tests/fixtures/kube-spec` (every name a variable; see
    /// `control_plane::kube_spec_vars`).
    pub fn kube_spec() -> Self {
        Self::copy_of("tests/fixtures/kube-spec", &["gkq.yaml", "train.py"])
    }

    /// `files` of the repository directory `from` (relative to the repository root).
    pub fn copy_of(from: &str, files: &[&str]) -> Self {
        let ws = Workspace {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(ws.spec_dir()).unwrap();
        for f in files {
            std::fs::copy(repo_root().join(from).join(f), ws.spec_dir().join(f)).unwrap();
        }
        ws
    }

    /// The temporary directory (the git repository's root).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<tmp>/infra`, the spec's directory.
    pub fn spec_dir(&self) -> PathBuf {
        self.path().join("infra")
    }

    pub fn spec_file(&self) -> PathBuf {
        self.spec_dir().join("gkq.yaml")
    }

    /// Replaces the first `from` in `gkq.yaml` with `to`; panics if the spec has no `from`.
    pub fn edit(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(self.spec_file()).unwrap();
        assert!(text.contains(from), "the spec no longer has `{from}`");
        std::fs::write(self.spec_file(), text.replacen(from, to, 1)).unwrap();
    }

    /// Runs `git` in the workspace (see [`git`]).
    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    /// Commits everything (making the repository, branch `main`, on first use; state
    /// directories and JSON files such as saved plans are ignored); returns the commit id.
    pub fn commit_all(&self, message: &str) -> String {
        if !self.path().join(".git").exists() {
            self.git(&["init", "-q", "-b", "main"]);
            std::fs::write(self.path().join(".gitignore"), "state/\n*.json\n").unwrap();
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }
}

/// Runs `git` in `dir` (as author and committer `t`, without the user's git configuration),
/// asserting success; returns its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", explain(&out));
    text(&out.stdout).trim().to_string()
}

/// A `jobs:` entry of the spec (two-space indented, one line per field): a JobSet `name` of
/// `count` one-slice runs (4 hosts of a 4x4 TPU v6e slice, 16 chips) on `user-queue`, mounting
/// `train.py` from ConfigMap `jax-train-script`; in `namespace` when given.
pub fn jobset_entry(name: &str, namespace: Option<&str>, count: u32) -> String {
    let namespace = namespace
        .map(|ns| format!("    namespace: {ns}\n"))
        .unwrap_or_default();
    format!(
        "  - name: {name}
    kind: jobset
{namespace}    count: {count}
    queue: user-queue
    script: train.py
    configMap: jax-train-script
    image: rayproject/ray:2.53.0-py311
    entrypoint: python /app/train.py
    replicatedJobs:
      - name: slice
        replicas: 1
        hosts: 4
        pods:
          cpu: 8
          memory: 16Gi
          accelerator: {{type: tpu-v6e-slice, topology: 4x4, chips: 4}}
"
    )
}
