//! JobSet installed by the spec (`jobset.install: builtin`, docs/jobset.md): from a cluster with
//! no JobSet installation, one `gkq apply` creates JobSet's CRD, its controller's objects and its
//! webhook configurations, in that order, and the JobSet only after them; the real Kueue admits
//! the JobSet.
//!
//! The test runs a control plane of its own, with an audit log (`PrivateControlPlane`): the
//! webhook configurations it installs would intercept every other test's JobSets on the shared
//! one, and the audit log is where the order of gkq's writes is read. There is no kubelet, so
//! JobSet's controller never runs: the test plays it (docs/jobset.md 4), marking its Deployment
//! `Available` and, since nothing can serve JobSet's webhooks, pointing them at a closed loopback
//! port with `failurePolicy: Ignore`. Until then gkq waits, as it would for the real controller.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use gkq::emulator::{Emulator, EmulatorConfig};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use crate::support::cmd::gkq_async;
use crate::support::control_plane::{PrivateControlPlane, client_for, list};
use crate::support::process::explain;

const SPEC: &str = "\
project: jobset-project
location: us-east5-b
cluster: {name: jobset-stack}
jobset: {install: builtin}
kueue:
  install: external
  flavors:
    - {name: jobset-cpu, nodePool: default-pool}
  clusterQueues:
    - name: jobset-queue
      resourceGroups:
        - resources: [cpu, memory]
          flavors:
            - {name: jobset-cpu, quota: {cpu: 10, memory: 20Gi}}
  localQueues:
    - {name: user-queue, namespace: default, clusterQueue: jobset-queue}
jobs:
  - name: train
    kind: jobset
    queue: user-queue
    script: train.py
    image: python:3.12
    replicatedJobs:
      - name: workers
        replicas: 1
        hosts: 2
        pods: {cpu: 1, memory: 1Gi}
";

const NAMESPACE: &str = "jobset-system";
const CONTROLLER: &str = "jobset-controller-manager";
const WEBHOOK_CONFIGS: [(&str, &str); 2] = [
    (
        "mutatingwebhookconfigurations",
        "jobset-mutating-webhook-configuration",
    ),
    (
        "validatingwebhookconfigurations",
        "jobset-validating-webhook-configuration",
    ),
];

/// `gkq ARGS SPEC --target gcp --gke-endpoint URL --kubeconfig KUBECONFIG`.
fn gkq(spec: &Path, url: &str, kubeconfig: &Path, args: &[&str]) -> tokio::process::Command {
    let mut c = gkq_async();
    c.args(args)
        .arg(spec)
        .args(["--target", "gcp", "--gke-endpoint", url, "--kubeconfig"])
        .arg(kubeconfig);
    c
}

/// The object `name` of `group/version` `kind` (`plural`), in `namespace` or cluster-scoped, if
/// it exists.
async fn read(
    client: &kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
    namespace: Option<&str>,
    name: &str,
) -> Option<Value> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object = api.get_opt(name).await.unwrap()?;
    Some(serde_json::to_value(object).unwrap())
}

const DEPLOYMENT: (&str, &str, &str, &str) = ("apps", "v1", "Deployment", "deployments");

fn kubectl(kubeconfig: &Path, args: &[&str]) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", explain(&out));
}

/// Plays JobSet's controller once gkq has created its Deployment and webhook configurations:
/// the Deployment reports `Available`, and the webhooks, which nothing serves here, call a closed
/// loopback port and are ignored when that fails.
async fn play_the_controller(client: &kube::Client, kubeconfig: &Path) {
    let started = Instant::now();
    loop {
        let deployment = read(client, DEPLOYMENT, Some(NAMESPACE), CONTROLLER).await;
        let mut webhooks = Vec::new();
        for (kind, (plural, name)) in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ]
        .into_iter()
        .zip(WEBHOOK_CONFIGS)
        {
            let resource = ("admissionregistration.k8s.io", "v1", kind, plural);
            webhooks.push(read(client, resource, None, name).await);
        }
        if deployment.is_some() && webhooks.iter().all(Option::is_some) {
            for ((resource, name), config) in WEBHOOK_CONFIGS.iter().zip(&webhooks) {
                let count = config.as_ref().unwrap()["webhooks"]
                    .as_array()
                    .unwrap()
                    .len();
                let patch: Vec<Value> = (0..count)
                    .flat_map(|i| {
                        [
                            serde_json::json!({"op": "replace", "path": format!("/webhooks/{i}/clientConfig"),
                                "value": {"url": "https://127.0.0.1:1/unserved"}}),
                            serde_json::json!({"op": "replace", "path": format!("/webhooks/{i}/failurePolicy"), "value": "Ignore"}),
                            serde_json::json!({"op": "replace", "path": format!("/webhooks/{i}/timeoutSeconds"), "value": 2}),
                        ]
                    })
                    .collect();
                let patch = serde_json::to_string(&patch).unwrap();
                kubectl(
                    kubeconfig,
                    &["patch", resource, name, "--type=json", "-p", &patch],
                );
            }
            kubectl(
                kubeconfig,
                &[
                    "-n",
                    NAMESPACE,
                    "patch",
                    "deployment",
                    CONTROLLER,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    r#"{"status":{"replicas":1,"readyReplicas":1,"availableReplicas":1,"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"played by the test"}]}}"#,
                ],
            );
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "gkq did not create JobSet's controller and webhook configurations"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// gkq's writes (server-side applies, not dry runs), as `resource/name`, in the order the audit
/// log has them.
fn gkq_writes(audit_log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(audit_log).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            let uri = e["requestURI"].as_str().unwrap_or_default();
            let query = uri.split_once('?').map_or("", |(_, query)| query);
            e["verb"] == "patch"
                && query.split('&').any(|param| param == "fieldManager=gkq")
                && !query.contains("dryRun")
                && e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| (200..300).contains(&c))
        })
        .map(|e| {
            format!(
                "{}/{}",
                e["objectRef"]["resource"].as_str().unwrap_or_default(),
                e["objectRef"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_jobset_is_installed_before_the_first_jobset_and_kueue_admits_it() {
    gkq::gke::install_tls_provider();
    let cp = PrivateControlPlane::start_audited();
    let kubeconfig = cp.kubeconfig();
    let client = client_for(&kubeconfig).await.unwrap();
    let (url, _emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gkq.yaml"), SPEC).unwrap();
    std::fs::write(dir.path().join("train.py"), "print('train')\n").unwrap();
    let spec = dir.path().to_path_buf();
    // No JobSet installation yet: no controller, no webhooks.
    assert!(
        read(&client, DEPLOYMENT, Some(NAMESPACE), CONTROLLER)
            .await
            .is_none()
    );

    let plan = gkq(&spec, &url, &kubeconfig, &["plan"])
        .output()
        .await
        .unwrap();
    assert!(plan.status.success(), "{}", explain(&plan));
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(text.contains("jobset.install/jobset"), "{text}");

    let apply = gkq(&spec, &url, &kubeconfig, &["apply", "--auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    play_the_controller(&client, &kubeconfig).await;
    let out = apply.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", explain(&out));

    // The order of gkq's writes: the CRD, the controller's objects, the webhook configurations,
    // and the JobSet after all of them.
    let writes = gkq_writes(&cp.dir.join("logs/audit.log"));
    let at = |write: &str| {
        writes
            .iter()
            .position(|w| w == write)
            .unwrap_or_else(|| panic!("gkq never wrote {write}: {writes:#?}"))
    };
    let crd = at("customresourcedefinitions/jobsets.jobset.x-k8s.io");
    let account = at(&format!("serviceaccounts/{CONTROLLER}"));
    let role = at("clusterroles/jobset-manager-role");
    let deployment = at(&format!("deployments/{CONTROLLER}"));
    let jobset = at("jobsets/train");
    assert!(at("namespaces/jobset-system") < crd, "{writes:#?}");
    assert!(crd < account && account < deployment, "{writes:#?}");
    assert!(role < deployment, "{writes:#?}");
    for (resource, name) in WEBHOOK_CONFIGS {
        let webhook = at(&format!("{resource}/{name}"));
        assert!(deployment < webhook && webhook < jobset, "{writes:#?}");
    }

    // The JobSet is there, and the real Kueue admitted it.
    let started = Instant::now();
    loop {
        let workloads = list(&client, "default", "kueue.x-k8s.io/v1beta2", "Workload")
            .await
            .unwrap();
        let admitted = workloads.iter().any(|w| {
            w["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
                && w["metadata"]["ownerReferences"][0]["name"] == "train"
                && crate::support::control_plane::condition_status(w, "Admitted") == Some("True")
        });
        if admitted {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Kueue did not admit JobSet train: {workloads:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Applied once, the installation is what the spec says: nothing more to do.
    let again = gkq(&spec, &url, &kubeconfig, &["plan", "--detailed-exitcode"])
        .output()
        .await
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", explain(&again));
}
