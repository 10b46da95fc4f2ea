//! kube-apiserver killed in the middle of a large `gkq apply` and started again: the interrupted
//! apply fails with messages (no panic, no hang), and the next apply converges with every object
//! there exactly once and nothing else. The test runs a control plane of its own
//! (`PrivateControlPlane`), not the run's shared one, since it kills the API server.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use gkq::emulator::{Emulator, EmulatorConfig};
use serde_json::json;

use crate::support::cmd::gkq_async;
use crate::support::control_plane::{PrivateControlPlane, client_for, list};

/// Objects in the spec: ConfigMaps, ClusterQueues and LocalQueues in equal parts.
const OBJECTS: usize = 900;

fn write_spec(dir: &Path, namespace: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut text = String::from(
        "project: faults-project\nlocation: us-east5-b\ncluster: {name: kube-faults}\n\
         kueue: {install: external}\nmanifests:\n",
    );
    for i in 0..OBJECTS {
        let object = match i % 3 {
            0 => json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": namespace}, "data": {"i": i.to_string()}}),
            1 => json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": format!("{namespace}-cq-{i}")},
                "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                    "flavors": [{"name": "faults-flavor", "resources": [{"name": "cpu", "nominalQuota": i}]}]}]}}),
            _ => json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": format!("lq-{i}"), "namespace": namespace},
                "spec": {"clusterQueue": format!("{namespace}-cq-{}", i - 1)}}),
        };
        names.insert(format!(
            "{} {}",
            object["kind"].as_str().unwrap(),
            object["metadata"]["name"].as_str().unwrap()
        ));
        text.push_str(&format!("  - {object}\n"));
    }
    std::fs::write(dir.join("gkq.yaml"), text).unwrap();
    names
}

/// Every object of the stack, as `Kind name`, with how many times each name appears.
async fn stack_objects(client: &kube::Client, namespace: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ] {
        for o in list(client, namespace, api_version, kind).await.unwrap() {
            let owned = o["metadata"]["labels"]["gkq.dev/stack"] == "kube-faults";
            let ours = o["metadata"]["namespace"] == namespace
                || o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(namespace);
            if owned && ours {
                out.push(format!(
                    "{kind} {}",
                    o["metadata"]["name"].as_str().unwrap()
                ));
            }
        }
    }
    out
}

/// `gkq ARGS SPEC --target gcp --gke-endpoint URL --kubeconfig KUBECONFIG`.
fn gkq(spec: &Path, url: &str, kubeconfig: &Path, args: &[&str]) -> tokio::process::Command {
    let mut c = gkq_async();
    c.args(args)
        .arg(spec)
        .args(["--target", "gcp", "--gke-endpoint", url, "--kubeconfig"])
        .arg(kubeconfig);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_killed_mid_apply_then_apply_converges_with_nothing_lost_or_duplicated() {
    gkq::gke::install_tls_provider();
    let cp = PrivateControlPlane::start();
    let kubeconfig = cp.kubeconfig();
    let client = client_for(&kubeconfig).await.unwrap();
    let namespace = "faults";
    let kc = |args: &[&str]| {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap()
    };
    assert!(kc(&["create", "namespace", namespace]).status.success());
    let (url, emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let want = write_spec(dir.path(), namespace);
    let spec = dir.path().to_path_buf();

    // The GKE half first, so that the timed apply is all Kubernetes objects.
    let base = tempfile::tempdir().unwrap();
    std::fs::write(
        base.path().join("gkq.yaml"),
        "project: faults-project\nlocation: us-east5-b\ncluster: {name: kube-faults}\nkueue: {install: external}\n",
    )
    .unwrap();
    let out = gkq(base.path(), &url, &kubeconfig, &["apply", "--auto-approve"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Start the big apply; kill the API server once part of it has landed.
    let mut apply = gkq(&spec, &url, &kubeconfig, &["apply", "--auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain both pipes as the apply runs: the plan alone is more than a pipe holds.
    let drain = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| {
        tokio::spawn(async move {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = tokio::io::AsyncReadExt::read_to_end(&mut pipe, &mut text).await;
            }
            String::from_utf8_lossy(&text).to_string()
        })
    };
    let stdout = drain(apply.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(apply.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let n = stack_objects(&client, namespace).await.len();
        if n >= OBJECTS / 10 {
            break;
        }
        if let Some(status) = apply.try_wait().unwrap() {
            panic!(
                "the apply ended ({status}) before the kill: {}",
                stderr.await.unwrap()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the apply made no progress ({n} objects)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = cp.apiserver_pid();
    assert!(
        std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(300), apply.wait())
        .await
        .expect("apply ends after the API server died (no hang)")
        .unwrap();
    let stderr = stderr.await.unwrap();
    let _ = stdout.await;
    assert_eq!(
        status.code(),
        Some(1),
        "the interrupted apply fails:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("gkq apply") && stderr.contains("again"),
        "{stderr}"
    );

    cp.restart_apiserver();
    let client = client_for(&kubeconfig).await.unwrap();
    let landed = stack_objects(&client, namespace).await.len();
    assert!(
        landed < OBJECTS,
        "the kill came too late to test anything ({landed} objects)"
    );

    // Apply again: the killed apply could not release its Lease while the apiserver was down,
    // so this one waits for the lock to expire, then converges; then nothing is left to do.
    let out = gkq(
        &spec,
        &url,
        &kubeconfig,
        &["apply", "--auto-approve", "--lock-timeout", "3m"],
    )
    .output()
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gkq(&spec, &url, &kubeconfig, &["plan", "--detailed-exitcode"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Every object once, nothing else.
    let got = stack_objects(&client, namespace).await;
    let unique: BTreeSet<String> = got.iter().cloned().collect();
    assert_eq!(got.len(), unique.len(), "duplicates");
    assert_eq!(unique, want);
    emulator.shutdown().await;
}
