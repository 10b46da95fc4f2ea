//! An idle agent on the local target: once a stack's last plan changed nothing and its simulated
//! cluster has nothing due, its intervals neither plan nor write the cluster's state file, and a
//! change another process makes to that state is still found and reverted by the next interval.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{TEST_AGENT_ARGS, condition, endpoint, unchanged_runs};
use crate::support::process::Running;
use crate::support::{Workspace, gkq};

/// The example's ClusterQueue quota this test changes: on-demand TPUs.
const QUOTA: &str = "/spec/resourceGroups/0/flavors/1/resources/2/nominalQuota";

/// Which version of a file: the state is replaced by a rename, so a write makes a new inode.
fn stamp(path: &Path) -> (u64, std::time::SystemTime) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).unwrap();
    (meta.ino(), meta.modified().unwrap())
}

/// The ClusterQueue's on-demand TPU quota in the state file (a quantity: a string, or the
/// number the spec gave).
fn quota(state_file: &Path) -> String {
    let queue = cluster_queue(state_file);
    let value = queue.pointer(QUOTA).unwrap();
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}

fn cluster_queue(state_file: &Path) -> Value {
    let world: Value = serde_json::from_str(&std::fs::read_to_string(state_file).unwrap()).unwrap();
    world["store"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "ClusterQueue")
        .cloned()
        .unwrap()
}

/// Another process's write of the ClusterQueue's quota, as the local API server makes it: under
/// the state directory's lock, the object and the store given the next resourceVersion, the file
/// replaced whole.
async fn write_quota(state_dir: &Path, state_file: &Path, quota: &str) {
    let lock = gkq::ops::lock::lock_state_dir(state_dir, Duration::from_secs(60))
        .await
        .unwrap();
    let mut world: Value =
        serde_json::from_str(&std::fs::read_to_string(state_file).unwrap()).unwrap();
    let version = world["store"]["resourceVersion"].as_u64().unwrap() + 1;
    world["store"]["resourceVersion"] = json!(version);
    let queue = world["store"]["objects"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|o| o["kind"] == "ClusterQueue")
        .unwrap();
    *queue.pointer_mut(QUOTA).unwrap() = json!(quota);
    queue["metadata"]["resourceVersion"] = json!(version.to_string());
    let temporary = state_file.with_extension("test.tmp");
    std::fs::write(&temporary, world.to_string()).unwrap();
    std::fs::rename(&temporary, state_file).unwrap();
    lock.release().await;
}

async fn wait_unchanged_runs(metrics: &str, stack: &str, at_least: u64) {
    let started = Instant::now();
    while unchanged_runs(metrics, stack).await < at_least {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{stack}: fewer than {at_least} idle runs that did not plan"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn idle_intervals_on_the_local_target_write_nothing_and_another_processs_change_is_reverted()
{
    let ws = Workspace::example();
    let commit = ws.commit_all("seed");
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    let stack = json!({
        "apiVersion": "gkq.dev/v1alpha1",
        "kind": "GkqStack",
        "metadata": {"name": "idle", "namespace": "default"},
        "spec": {
            "url": format!("file://{}", ws.path().display()),
            "path": "infra/gkq.yaml",
            "interval": "1s",
        },
    });
    let manifest = dir.path().join("stacks.yaml");
    std::fs::write(&manifest, stack.to_string()).unwrap();
    let mut c = gkq();
    c.args(["agent", "--target", "local"])
        .args(TEST_AGENT_ARGS)
        .arg("--state-dir")
        .arg(&state_dir)
        .arg("--stack")
        .arg(&manifest)
        .env("GKQ_AGENT_CLUSTER", "")
        // The example's jobs run, finish and their nodes scale down within seconds: then the
        // simulation has nothing due.
        .env("GKQ_LOCAL_CLOCK", "3600x");
    let mut agent = Running::spawn(c);
    let urls = endpoint(&mut agent);
    let stacks_file = state_dir.join("agent/stacks.json");
    let started = Instant::now();
    loop {
        let stacks: Value = std::fs::read_to_string(&stacks_file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let status = &stacks["stacks"][0]["status"];
        if status["lastAppliedRevision"] == json!(commit) {
            assert_eq!(
                condition(&stacks["stacks"][0], "Ready")["status"],
                "True",
                "{stacks:#}"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "not applied: {stacks:#}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let key = "default/idle";
    let state_file = state_dir.join("clusters/my-project/us-east5-b/tpu-cluster/kubernetes.json");
    wait_unchanged_runs(&urls.metrics, key, 2).await;

    // Idle intervals: none plans, and none writes the cluster's state (not even its clock).
    let before = (stamp(&state_file), unchanged_runs(&urls.metrics, key).await);
    wait_unchanged_runs(&urls.metrics, key, before.1 + 3).await;
    assert_eq!(
        stamp(&state_file),
        before.0,
        "an idle interval wrote the state"
    );
    assert_eq!(quota(&state_file), "16");

    // Another process changes the quota: the next interval plans and puts it back.
    write_quota(&state_dir, &state_file, "8").await;
    let started = Instant::now();
    while quota(&state_file) != "16" {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the quota was not reverted ({}):\n{}",
            quota(&state_file),
            agent.take_stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let logs = agent.take_stderr();
    assert!(
        logs.contains("kueue.clusterqueue"),
        "the revert was an apply:\n{logs}"
    );
    // And the intervals are idle again.
    let after = unchanged_runs(&urls.metrics, key).await;
    wait_unchanged_runs(&urls.metrics, key, after + 2).await;
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}
