//! The one way the tests run the `gkq` binary, with one environment policy.
//!
//! Tests run in threads of one process and inherit whoever started `cargo test`: their shell's
//! `GKQ_ENV`, `GKQ_VAR_*`, Google credentials, kubeconfig, CI variables or `RUST_LOG` must not
//! reach the binary under test, and the process environment is never changed (other tests read
//! it at the same time). So [`gkq`] starts from the parent's environment minus everything gkq or
//! its libraries read, and sets a fixed base; a test adds what it needs on the returned command
//! (`.env("GKQ_LOCAL_CLOCK", "60x")`, `.env("RUST_LOG", "trace")`, `.env("HOME", dir)`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_gkq");

/// Variables removed besides every `GKQ_*` one: credentials and where gcloud and kubectl keep
/// theirs, CI detection (provenance and plan comments), logging and colour overrides.
const CLEARED: &[&str] = &[
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "CLOUDSDK_CONFIG",
    "KUBECONFIG",
    "GITHUB_ACTIONS",
    "GITHUB_ACTOR",
    "GITHUB_REPOSITORY",
    "GITHUB_RUN_ID",
    "GITLAB_CI",
    "GITLAB_USER_LOGIN",
    "CI_PIPELINE_ID",
    "RUST_LOG",
    "CLICOLOR_FORCE",
];

/// `gkq` with the tests' environment: no `GKQ_*` variable and nothing of [`CLEARED`] from the
/// parent; `NO_COLOR=1`; `HOME` an empty directory (no gcloud credentials, no
/// `~/.kube/config`); the GCE metadata server (ADC's last resort) on a closed loopback port; stdin
/// empty. Anything else is for the test to add, explicitly.
pub fn gkq() -> Command {
    let mut c = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if let Some(name) = name.to_str()
            && (name.starts_with("GKQ_") || CLEARED.contains(&name))
        {
            c.env_remove(name);
        }
    }
    c.env("NO_COLOR", "1")
        .env("HOME", empty_home())
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .env("GCE_METADATA_ROOT", "127.0.0.1:9")
        .stdin(Stdio::null());
    c
}

/// [`gkq`] run by another program with the same environment: `wrapper` is that program and its
/// arguments up to the binary (say `["prlimit", "--as=…", "--"]`).
pub fn gkq_under(wrapper: &[&str]) -> Command {
    let base = gkq();
    let mut c = Command::new(wrapper[0]);
    c.args(&wrapper[1..]).arg(BIN);
    for (name, value) in base.get_envs() {
        match value {
            Some(value) => c.env(name, value),
            None => c.env_remove(name),
        };
    }
    c.stdin(Stdio::null());
    c
}

/// [`gkq`] as a `tokio::process::Command`, for tests that run it from async code.
pub fn gkq_async() -> tokio::process::Command {
    tokio::process::Command::from(gkq())
}

/// An empty directory under the target directory, the same for every test of a run.
fn empty_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gkq-test-home");
        std::fs::create_dir_all(&home).expect("creating the tests' HOME");
        home
    })
}
