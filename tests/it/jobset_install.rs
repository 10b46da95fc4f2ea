//! JobSet installed by the spec (`jobset.install: builtin`, docs/jobset.md): from a cluster with
//! no JobSet installation, one `gkq apply` creates JobSet's CRD, its controller's objects and its
//! webhook configurations, in that order, and the JobSet only after them; the real Kueue admits
//! the JobSet.
//!
//! The test runs a control plane of its own, with an audit log and without JobSet's CRD
//! (`PrivateControlPlane::start_audited_without_jobset`): the CRD does not exist until gkq
//! creates it, the real Kueue starts with its JobSet controller deferred until the CRD is served
//! (docs/test-control-plane.md 5.2), the webhook configurations gkq installs would intercept
//! every other test's JobSets on the shared one, and the audit log is where the order of gkq's
//! writes, and its wait for the CRD to be Established, are read. There is no kubelet, so
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
const CRD: (&str, &str, &str, &str) = (
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
);
const JOBSET_CRD: &str = "jobsets.jobset.x-k8s.io";

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

/// Every event of the audit log, in order.
fn audit_events(audit_log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(audit_log).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// `resource/name` of an audit event.
fn target_of(event: &Value) -> String {
    format!(
        "{}/{}",
        event["objectRef"]["resource"].as_str().unwrap_or_default(),
        event["objectRef"]["name"].as_str().unwrap_or_default()
    )
}

/// Whether an audit event is one of gkq's writes: a server-side apply with gkq's field manager,
/// not a dry run, that succeeded.
fn is_gkq_write(event: &Value) -> bool {
    let uri = event["requestURI"].as_str().unwrap_or_default();
    let query = uri.split_once('?').map_or("", |(_, query)| query);
    event["verb"] == "patch"
        && query.split('&').any(|param| param == "fieldManager=gkq")
        && !query.contains("dryRun")
        && event["responseStatus"]["code"]
            .as_u64()
            .is_some_and(|c| (200..300).contains(&c))
}

/// gkq's writes, as `resource/name`, in the order the audit log has them.
fn gkq_writes(audit_log: &Path) -> Vec<String> {
    audit_events(audit_log)
        .iter()
        .filter(|e| is_gkq_write(e))
        .map(target_of)
        .collect()
}

/// Whether, between its write of `crd` and its write of `after`, gkq read `crd` (by the user
/// agent its write was made with): the wait for the CRD to be Established.
fn read_between(audit_log: &Path, crd: &str, after: &str) -> bool {
    let events = audit_events(audit_log);
    let Some(written) = events
        .iter()
        .position(|e| is_gkq_write(e) && target_of(e) == crd)
    else {
        return false;
    };
    let agent = &events[written]["userAgent"];
    events[written + 1..]
        .iter()
        .take_while(|e| !(is_gkq_write(e) && target_of(e) == after))
        .any(|e| e["verb"] == "get" && target_of(e) == crd && &e["userAgent"] == agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_jobset_is_installed_before_the_first_jobset_and_kueue_admits_it() {
    gkq::gke::install_tls_provider();
    let cp = PrivateControlPlane::start_audited_without_jobset();
    let kubeconfig = cp.kubeconfig();
    let client = client_for(&kubeconfig).await.unwrap();
    let (url, _emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gkq.yaml"), SPEC).unwrap();
    std::fs::write(dir.path().join("train.py"), "print('train')\n").unwrap();
    let spec = dir.path().to_path_buf();
    // No JobSet installation yet: no CRD, no controller, no webhooks.
    assert!(read(&client, CRD, None, JOBSET_CRD).await.is_none());
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
    let audit_log = cp.dir.join("logs/audit.log");
    let writes = gkq_writes(&audit_log);
    let at = |write: &str| {
        writes
            .iter()
            .position(|w| w == write)
            .unwrap_or_else(|| panic!("gkq never wrote {write}: {writes:#?}"))
    };
    let crd = at(&format!("customresourcedefinitions/{JOBSET_CRD}"));
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

    // gkq created the CRD and read it until it was Established before anything used it.
    assert!(
        read_between(
            &audit_log,
            &format!("customresourcedefinitions/{JOBSET_CRD}"),
            "jobsets/train"
        ),
        "gkq did not wait for the JobSet CRD: {writes:#?}"
    );
    let installed = read(&client, CRD, None, JOBSET_CRD)
        .await
        .expect("gkq created JobSet's CRD");
    assert_eq!(
        crate::support::control_plane::condition_status(&installed, "Established"),
        Some("True")
    );

    // The JobSet is there, and the real Kueue admitted it: Kueue set up its JobSet controller
    // once gkq's install made the CRD served (it polls with a backoff of up to 2 minutes).
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
            started.elapsed() < Duration::from_secs(200),
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

/// JobSet installed earlier by another tool (`helm` here, at an older release): the plan that
/// installs the builtin release over it, whose objects apply with force (docs/jobset.md 3.1),
/// names what that takes over: the object, the other manager and its fields. The plan's dry
/// runs change nothing: the controller still runs the other tool's release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_names_what_installing_jobset_takes_over_from_another_manager() {
    use kube::api::{Patch, PatchParams};
    gkq::gke::install_tls_provider();
    let cp = PrivateControlPlane::start_audited_without_jobset();
    let kubeconfig = cp.kubeconfig();
    let client = client_for(&kubeconfig).await.unwrap();
    let (url, _emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gkq.yaml"), SPEC).unwrap();
    std::fs::write(dir.path().join("train.py"), "print('train')\n").unwrap();
    let spec = dir.path().to_path_buf();

    // JobSet's namespace and controller as helm installed v0.11.0: without gkq's labels, and
    // owned by the field manager "helm".
    const OLDER: &str = "registry.k8s.io/jobset/jobset:v0.11.0";
    let release = gkq::model::jobset_install::prepare("v0.12.0", "theirs").unwrap();
    for object in release
        .iter()
        .filter(|o| o["kind"] == "Namespace" || o["kind"] == "Deployment")
    {
        let mut theirs = object.clone();
        theirs["metadata"].as_object_mut().unwrap().remove("labels");
        if theirs["kind"] == "Deployment" {
            theirs["spec"]["template"]["spec"]["containers"][0]["image"] = OLDER.into();
        }
        let api = crate::support::control_plane::dynamic_api(
            &client,
            theirs["apiVersion"].as_str().unwrap(),
            theirs["kind"].as_str().unwrap(),
            NAMESPACE,
        )
        .unwrap();
        api.patch(
            theirs["metadata"]["name"].as_str().unwrap(),
            &PatchParams::apply("helm"),
            &Patch::Apply(&theirs),
        )
        .await
        .unwrap();
    }

    let plan = gkq(&spec, &url, &kubeconfig, &["plan", "-o", "json"])
        .output()
        .await
        .unwrap();
    assert!(plan.status.success(), "{}", explain(&plan));
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let takeover = plan["notices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["message"].as_str())
        .find(|m| m.starts_with("installing JobSet v0.12.0 takes fields over"))
        .unwrap_or_else(|| panic!("no takeover notice: {:#}", plan["notices"]));
    assert!(
        takeover.contains(&format!(
            "Deployment {NAMESPACE}/{CONTROLLER} from \"helm\" (.spec.template.spec.containers[name=\"manager\"].image"
        )),
        "{takeover}"
    );
    // Only what differs is taken: the namespace, which gkq only labels, is not named.
    assert!(!takeover.contains("Namespace"), "{takeover}");

    let text = gkq(&spec, &url, &kubeconfig, &["plan"])
        .output()
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(
        shown.contains("takes fields over from other field managers"),
        "{shown}"
    );

    let controller = read(&client, DEPLOYMENT, Some(NAMESPACE), CONTROLLER)
        .await
        .unwrap();
    assert_eq!(
        controller["spec"]["template"]["spec"]["containers"][0]["image"],
        OLDER
    );
}
