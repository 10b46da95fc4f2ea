//! Security properties: credentials never reach logs, plan files, errors or output; plan files are
//! owner-only; TLS verification is always on; files a spec references stay in the spec's
//! directory (symlinks included); no shell ever runs.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use gkq::apply::{ApplyOptions, Executor, PollConfig, RecordingSink};
use gkq::emulator::{Emulator, EmulatorConfig, Fault, FaultRule};
use gkq::gitops::tree::WorkingTree;
use gkq::gke::{RestGke, StaticTokenSource};
use gkq::observe::observe_gke;
use gkq::plan::{PlanOptions, plan};
use gkq::spec::LoadOptions;
use support::control_plane::{control_plane, kube_spec_vars, repo_root, test_env, unique_name};
use support::gkq;

fn all_output(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The bearer token of a kubeconfig written by tools/controlplane.sh.
fn token_of(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("a token in the kubeconfig")
        .trim()
        .to_string()
}

fn spec_vars(namespace: &str) -> Vec<String> {
    kube_spec_vars("sec", namespace)
        .into_iter()
        .flat_map(|(k, v)| ["--var".to_string(), format!("{k}={v}")])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubeconfig_token_never_reaches_output_logs_errors_or_plan_files() {
    let env = test_env("security").await;
    let kubeconfig = env.control_plane.kubeconfig.clone();
    let token = token_of(&kubeconfig);
    assert!(token.len() >= 16, "a recognisable token");
    let (url, emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    let spec = repo_root().join("tests/fixtures/kube-spec");
    let vars = spec_vars(&env.namespace);
    let target = |c: &mut Command| {
        c.arg(&spec)
            .args(["--target", "gcp", "--gke-endpoint", &url, "--kubeconfig"])
            .arg(&kubeconfig)
            .args(&vars)
            .env("RUST_LOG", "trace");
    };

    let mut runs = Vec::new();
    let mut c = gkq();
    c.args(["-vvv", "plan", "-o", "json", "--out"])
        .arg(&plan_file);
    target(&mut c);
    runs.push(("plan", c.output().unwrap()));
    let mut c = gkq();
    c.args(["-vvv", "apply", "--auto-approve"]);
    target(&mut c);
    runs.push(("apply", c.output().unwrap()));
    let mut c = gkq();
    c.args(["-vvv", "apply", "--auto-approve", "-o", "json"]);
    target(&mut c);
    runs.push(("apply -o json", c.output().unwrap()));

    // A kubeconfig whose token the server refuses: the error path.
    let canary = format!("gkq-canary-{}", unique_name("token"));
    let bad = dir.path().join("bad-kubeconfig");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&kubeconfig)
            .unwrap()
            .replace(&token, &canary),
    )
    .unwrap();
    let mut c = gkq();
    c.args(["-vvv", "plan"])
        .arg(&spec)
        .args(["--target", "gcp", "--gke-endpoint", &url, "--kubeconfig"])
        .arg(&bad)
        .args(&vars)
        .env("RUST_LOG", "trace");
    let refused = c.output().unwrap();
    assert!(!refused.status.success(), "{}", all_output(&refused));

    for (what, out) in &runs {
        let text = all_output(out);
        assert!(out.status.success(), "{what}: {text}");
        assert!(
            text.len() > 1000,
            "{what}: trace logging was on, so there is output to search"
        );
        assert!(!text.contains(&token), "{what} printed the token");
    }
    assert!(
        !all_output(&refused).contains(&canary),
        "an error printed the token"
    );
    let saved = std::fs::read_to_string(&plan_file).unwrap();
    assert!(saved.contains("\"actions\""), "{saved}");
    assert!(!saved.contains(&token), "the plan file holds the token");
    emulator.shutdown().await;
}

/// Collects everything `tracing` writes, at every level.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_gke_token_never_reaches_logs_errors_or_the_plan() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let token = format!("ya29.gkq-canary-{}", unique_name("gke"));
    let config = EmulatorConfig {
        pending_ms: 10,
        running_ms: 10,
        ..EmulatorConfig::default()
    };
    let (url, handle) = Emulator::start_in_process(config).await.unwrap();
    // Failures too: a refused create, a failed operation and a retried 503.
    handle
        .emulator()
        .add_fault(FaultRule::new("*", "*", Fault::Unavailable).times(1));
    handle.emulator().add_fault(
        FaultRule::new(
            "POST",
            "*/nodePools",
            Fault::QuotaExceeded { message: None },
        )
        .times(1),
    );
    handle.emulator().add_fault(
        FaultRule::new("POST", "*/nodePools", Fault::Stockout { message: None }).times(1),
    );
    let api =
        RestGke::with_endpoint(&url, Arc::new(StaticTokenSource::new(token.clone()))).unwrap();
    let loaded = gkq::spec::load(
        &WorkingTree,
        &repo_root().join("examples/tpu-dws"),
        &LoadOptions {
            env_lookup: Some(Box::new(|_| None)),
            ..Default::default()
        },
    )
    .unwrap();
    let mut desired = gkq::model::build(&loaded).0.unwrap();
    desired.kubernetes.clear();
    let live = observe_gke(&api, &desired).await.unwrap();
    let planned = plan(&desired, &live, &PlanOptions::default()).unwrap();
    let sink = RecordingSink::new();
    let report = Executor::new(&api, &sink)
        .with_options(ApplyOptions {
            poll: PollConfig::immediate(),
            ..ApplyOptions::default()
        })
        .apply(&planned)
        .await;
    assert!(!report.is_success(), "the faults made actions fail");
    assert!(
        handle.emulator().requests().iter().all(|r| r.authorized),
        "every request carried the token"
    );

    let mut seen = String::from_utf8_lossy(&captured.0.lock().unwrap()).to_string();
    seen.push_str(&gkq::render::plan::to_json(&planned).to_string());
    seen.push_str(&gkq::render::plan::to_text(&planned, false));
    seen.push_str(&format!("{report:?} {:?} {api:?}", sink.events()));
    for (_, error) in report.failures() {
        seen.push_str(&format!("{error} {error:?} {:?}", error.hint()));
    }
    assert!(
        seen.contains("TRACE") || seen.contains("DEBUG"),
        "logging was captured"
    );
    assert!(!seen.contains(&token), "the GKE token leaked");
    assert!(!seen.contains("gkq-canary"), "part of the GKE token leaked");
    handle.shutdown().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_files_are_written_owner_only_even_over_an_existing_file() {
    use std::os::unix::fs::PermissionsExt;
    let (url, handle) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.json");
    let existing = dir.path().join("existing.json");
    std::fs::write(&existing, "old").unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).unwrap();
    for file in [&fresh, &existing] {
        let out = gkq()
            .args(["plan"])
            .arg(repo_root().join("examples/tpu-dws"))
            .args(["--target", "gcp", "--gke-endpoint", &url, "--out"])
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", all_output(&out));
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", file.display());
        assert!(
            std::fs::read_to_string(file)
                .unwrap()
                .contains("\"actions\"")
        );
    }
    handle.shutdown().await;
}

#[test]
fn a_kubeconfig_that_turns_tls_verification_off_is_refused() {
    let cp = control_plane();
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&cp.kubeconfig).unwrap();
    let mut insecure = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("certificate-authority:") {
            insecure.push_str("    insecure-skip-tls-verify: true\n");
        } else {
            insecure.push_str(line);
            insecure.push('\n');
        }
    }
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, insecure).unwrap();
    let out = gkq()
        .args(["plan"])
        .arg(repo_root().join("tests/fixtures/kube-spec"))
        .args([
            "--target",
            "gcp",
            "--gke-endpoint",
            "http://127.0.0.1:9/",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let text = all_output(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("TLS verification"), "{text}");
    assert!(text.contains("certificate-authority"), "{text}");
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_sources(&repo_root().join("src"), &mut files);
    assert!(files.len() > 50, "found the sources");
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect()
}

#[test]
fn tls_verification_is_never_turned_off_in_the_code() {
    // Ways to turn certificate checks off in reqwest, rustls, hyper-rustls and kube-rs.
    let forbidden = [
        "danger_accept_invalid_certs",
        "danger_accept_invalid_hostnames",
        "accept_invalid_certs = true",
        "accept_invalid_certs: true",
        ".dangerous()",
        "ServerCertVerifier",
        "NoCertificateVerification",
        "with_custom_certificate_verifier",
        "tls_built_in_root_certs(false)",
    ];
    let mut found = Vec::new();
    for (file, text) in sources() {
        for (n, line) in text.lines().enumerate() {
            if forbidden.iter().any(|f| line.contains(f)) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "TLS verification turned off:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_shell_is_ever_run() {
    // Programs gkq may start, by name: never a shell, and never a name taken from input.
    let allowed = ["git"];
    let mut found = Vec::new();
    for (file, text) in sources() {
        let rel = file
            .strip_prefix(repo_root())
            .unwrap()
            .display()
            .to_string();
        for (at, _) in text.match_indices("Command::new(") {
            let rest = &text[at + "Command::new(".len()..];
            let arg = rest.split(')').next().unwrap_or("").trim();
            let line = text[..at].lines().count();
            let program = arg.strip_prefix('"').and_then(|a| a.strip_suffix('"'));
            match program {
                Some(p) if allowed.contains(&p) => {}
                _ => found.push(format!("{rel}:{line}: Command::new({arg})")),
            }
        }
        for shell_flag in [".arg(\"-c\")", "[\"-c\""] {
            if text.contains(shell_flag) {
                found.push(format!("{rel}: passes a shell's -c: {shell_flag}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "processes gkq may start:\n{}",
        found.join("\n")
    );
}

#[cfg(unix)]
#[test]
fn a_script_symlinked_from_outside_the_spec_directory_is_refused_and_not_read() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.py");
    std::fs::write(&secret, "print('gkq-canary-outside-secret')\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(repo_root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    std::fs::write(dir.path().join("gkq.yaml"), &example).unwrap();
    std::os::unix::fs::symlink(&secret, dir.path().join("train.py")).unwrap();

    let opts = || LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = gkq::spec::load(&WorkingTree, dir.path(), &opts()).unwrap();
    assert!(loaded.files.is_empty(), "the linked file was not read");
    let diags = gkq::model::build(&loaded).1;
    let messages: Vec<String> = diags.errors().map(|d| d.message.clone()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("outside the spec's directory")),
        "{messages:?}"
    );
    let out = gkq().arg("validate").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!all_output(&out).contains("gkq-canary-outside-secret"));

    // A link that stays inside the directory is fine.
    std::fs::remove_file(dir.path().join("train.py")).unwrap();
    std::fs::create_dir(dir.path().join("scripts")).unwrap();
    std::fs::write(dir.path().join("scripts/train.py"), "print(1)\n").unwrap();
    std::os::unix::fs::symlink("scripts/train.py", dir.path().join("train.py")).unwrap();
    let loaded = gkq::spec::load(&WorkingTree, dir.path(), &opts()).unwrap();
    assert_eq!(
        loaded.files.get("train.py").map(String::as_str),
        Some("print(1)\n")
    );
    assert!(!gkq::model::build(&loaded).1.has_errors());

    // So is a linked spec directory: the check compares real paths on both sides.
    let link = outside.path().join("linked-spec");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    let loaded = gkq::spec::load(&WorkingTree, &link, &opts()).unwrap();
    assert!(!gkq::model::build(&loaded).1.has_errors());
}
