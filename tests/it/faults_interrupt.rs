//! Ctrl-C during `gkq apply`: gkq stops starting new actions, reports the GKE operation it was
//! waiting for as still running, and exits 130 with a message (no panic). The next `gkq plan`
//! explains the state (the cluster is still PROVISIONING, the pools are still to create), and
//! the next apply converges.

use std::process::Stdio;
use std::time::{Duration, Instant};

use gkq::emulator::{Emulator, EmulatorConfig, EmulatorHandle};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::support::Workspace;
use crate::support::cmd::gkq_async;

const SPEC: &str = "\
project: faults-project
location: us-east5-b
cluster: {name: interrupted}
nodePools:
  - {name: on-demand-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, autoscaling: {min: 0, max: 4}}
  - {name: dws-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, autoscaling: {min: 0, max: 4},
     flexStart: true, queuedProvisioning: true}
kueue: {install: external}
";

/// `gkq ARGS DIR --target gcp --gke-endpoint URL`.
fn gkq(dir: &std::path::Path, url: &str, args: &[&str]) -> Command {
    let mut c = gkq_async();
    c.args(args)
        .arg(dir)
        .args(["--target", "gcp", "--gke-endpoint", url]);
    c
}

/// A GKE emulator with slow operations: a cluster takes a few seconds to create.
async fn slow_emulator() -> (String, EmulatorHandle) {
    let config = EmulatorConfig {
        pending_ms: 1500,
        running_ms: 2500,
        ..EmulatorConfig::default()
    };
    Emulator::start_in_process(config).await.unwrap()
}

/// Runs `plan --detailed-exitcode` and asserts that it has nothing to do.
async fn assert_converged(mut plan: Command) {
    let out = plan.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `apply` and sends it SIGINT (Ctrl-C) `after` its stderr says the create of `cluster`
/// started; returns its exit code and stderr.
async fn interrupt_cluster_create(
    mut apply: Command,
    cluster: &str,
    after: Duration,
) -> (Option<i32>, String) {
    let mut apply = apply
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = apply.id().unwrap();
    let mut lines = BufReader::new(apply.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Interrupt once the cluster create is under way.
    while let Some(line) = tokio::time::timeout_at(deadline.into(), lines.next_line())
        .await
        .expect("apply starts the cluster create within a minute")
        .unwrap()
    {
        stderr.push_str(&line);
        stderr.push('\n');
        if line.contains(cluster) && line.contains("Creating") {
            break;
        }
    }
    tokio::time::sleep(after).await;
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    while let Some(line) = lines.next_line().await.unwrap() {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let status = tokio::time::timeout(Duration::from_secs(30), apply.wait())
        .await
        .expect("apply exits promptly after Ctrl-C")
        .unwrap();
    (status.code(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_apply_exits_130_and_the_next_plan_explains_the_state() {
    let (url, handle) = slow_emulator().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gkq.yaml"), SPEC).unwrap();

    let (code, stderr) = interrupt_cluster_create(
        gkq(dir.path(), &url, &["apply", "--auto-approve"]),
        "gke.cluster/interrupted",
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(code, Some(130), "stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("Interrupted"), "{stderr}");
    assert!(stderr.contains("still running in GKE"), "{stderr}");
    assert!(stderr.contains("gkq plan"), "{stderr}");
    // Nothing was started after the interrupt: no node pool create reached GKE.
    let pool_creates = handle
        .emulator()
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/nodePools"))
        .count();
    assert_eq!(pool_creates, 0);

    // The next plan explains it: the cluster is still being created, the pools are to come.
    let out = gkq(dir.path(), &url, &["plan"]).output().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("PROVISIONING"), "{text}");
    assert!(text.contains("still running"), "{text}");
    assert!(text.contains("gke.nodepool/on-demand-pool"), "{text}");
    assert!(text.contains("2 to create"), "{text}");

    // And the next apply converges (it waits for the cluster first).
    let out = gkq(dir.path(), &url, &["apply", "--auto-approve"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_converged(gkq(dir.path(), &url, &["plan", "--detailed-exitcode"])).await;
    handle.shutdown().await;
}

/// The same interruption on the local target, whose simulated Kubernetes answers only once the
/// cluster runs: plan says apply waits for the operation still creating the cluster, and the
/// next apply does wait for it, then converges (it used to refuse: "cannot check the plan
/// against live state: ... is PROVISIONING").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_right_after_an_interrupted_cluster_create_waits_for_it_on_the_local_target() {
    let (url, handle) = slow_emulator().await;
    let ws = Workspace::example();
    let state = tempfile::tempdir().unwrap();
    let local = |args: &[&str]| {
        let mut c = gkq_async();
        c.args(args)
            .arg(ws.spec_dir())
            .args(["--env", "local", "--gke-endpoint", &url, "--state-dir"])
            .arg(state.path());
        c
    };

    let (code, stderr) = interrupt_cluster_create(
        local(&["apply", "--auto-approve"]),
        "gke.cluster/tpu-cluster",
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(code, Some(130), "stderr:\n{stderr}");

    // Right away, while GKE still creates the cluster: apply waits for it, then converges.
    let out = local(&["apply", "--auto-approve"]).output().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("the cluster is PROVISIONING: a GKE operation on it is still running; waiting for it to finish before checking the plan"),
        "{text}"
    );
    assert!(text.contains("Apply complete!"), "{text}");
    assert_converged(local(&["plan", "--detailed-exitcode"])).await;
    handle.shutdown().await;
}
