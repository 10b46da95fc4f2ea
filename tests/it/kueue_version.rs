//! The installed Kueue's release decides whether gkq predicts (docs/kueue.md, "What gkq
//! models"): on a control plane whose `kueue-controller-manager` Deployment runs another minor
//! release, every placement and every live workload of a plan says "not predicted", unless
//! `--predict-anyway`; a patch release of the modelled one is predicted, unless the manager runs
//! with a feature gate that changes scheduling.
//!
//! The test runs a control plane of its own (`PrivateControlPlane`): the Deployment it writes
//! into `kueue-system` would change every other test's predictions on the shared one. There is
//! no kube-controller-manager, so the Deployment is only data: the real Kueue manager of the
//! control plane keeps running (and makes the Workload of the test's Job).

use std::path::Path;
use std::time::{Duration, Instant};

use gkq::emulator::{Emulator, EmulatorConfig};
use serde_json::{Value, json};

use crate::support::cmd::gkq;
use crate::support::control_plane::{PrivateControlPlane, client_for, list, repo_root};
use crate::support::process::{explain, text};

const NOT_PREDICTED: &str = "not predicted: Kueue v0.20 is installed; gkq models v0.19";

/// The manager Deployment as an installation would have it, running `image` with `gates`
/// (`A=true,B=false`, or empty).
fn manager(image: &str, gates: &str) -> Value {
    let mut args = vec!["--config=/controller_manager_config.yaml".to_string()];
    if !gates.is_empty() {
        args.push(format!("--feature-gates={gates}"));
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"control-plane": "controller-manager"}},
            "template": {
                "metadata": {"labels": {"control-plane": "controller-manager"}},
                "spec": {"containers": [{"name": "manager", "image": image, "args": args}]},
            },
        },
    })
}

fn plan(dir: &Path, url: &str, kubeconfig: &Path, extra: &[&str]) -> std::process::Output {
    gkq()
        .arg("plan")
        .arg(dir)
        .args(["--target", "gcp", "--gke-endpoint", url, "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .output()
        .unwrap()
}

fn plan_json(dir: &Path, url: &str, kubeconfig: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["-o", "json"];
    args.extend_from_slice(extra);
    let out = plan(dir, url, kubeconfig, &args);
    assert!(out.status.success(), "{}", explain(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", explain(&out)))
}

fn notices(plan: &Value) -> Vec<String> {
    plan["notices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["message"].as_str().map(str::to_string))
        .collect()
}

/// The workload change of the Job `job`, which waits for a LocalQueue the plan creates.
fn change_of<'a>(plan: &'a Value, job: &str) -> &'a Value {
    plan["workloadChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["job"] == format!("Job default/{job}").as_str())
        .unwrap_or_else(|| panic!("no workload change for {job}: {plan:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_minor_release_of_the_running_kueue_is_not_predicted_unless_asked() {
    gkq::gke::install_tls_provider();
    let cp = PrivateControlPlane::start();
    let kubeconfig = cp.kubeconfig();
    let client = client_for(&kubeconfig).await.unwrap();
    let (url, _emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for file in ["gkq.yaml", "train.py"] {
        std::fs::copy(
            repo_root().join("tests/fixtures/kube-spec").join(file),
            dir.path().join(file),
        )
        .unwrap();
    }
    let deploy = |image: &'static str, gates: &'static str| {
        let client = client.clone();
        async move {
            crate::support::control_plane::apply(&client, "kueue-system", &manager(image, gates))
                .await
                .unwrap();
        }
    };
    deploy("registry.k8s.io/kueue/kueue:v0.20.0", "").await;
    // Live work the plan's queues change: a Job someone queued in the spec's LocalQueue before
    // it exists. The real Kueue makes its Workload, which waits.
    let theirs =
        crate::support::kueue::batch_job("default", "their-job", "user-queue", 1, &[("cpu", "1")]);
    crate::placement_kueue::apply(&client, "default", &theirs)
        .await
        .unwrap();
    let started = Instant::now();
    while !list(&client, "default", "kueue.x-k8s.io/v1beta2", "Workload")
        .await
        .unwrap()
        .iter()
        .any(|w| w["metadata"]["ownerReferences"][0]["name"] == "their-job")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Kueue made no Workload for their-job"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // v0.20 runs: nothing is predicted, and the plan says how to get predictions.
    let other = plan_json(dir.path(), &url, &kubeconfig, &[]);
    let placements = other["placements"]
        .as_array()
        .unwrap_or_else(|| panic!("{other:#}"));
    assert!(!placements.is_empty(), "{other:#}");
    for placement in placements {
        let why = placement["notPredicted"].as_str().unwrap_or_default();
        assert!(why.starts_with(NOT_PREDICTED), "{placement:#}");
    }
    let change = change_of(&other, "their-job");
    assert!(
        change["after"]["notPredicted"]
            .as_str()
            .is_some_and(|why| why.starts_with(NOT_PREDICTED)),
        "{change:#}"
    );
    let said = notices(&other);
    assert!(
        said.iter()
            .any(|n| n.contains("Kueue v0.20.0 is installed, the spec says v0.19.2")),
        "{said:#?}"
    );
    assert!(
        said.iter().any(|n| n
            .starts_with("placements are not predicted: Kueue's manager runs v0.20.0")
            && n.contains("install a v0.19 release")
            && n.contains("--predict-anyway")),
        "{said:#?}"
    );
    let out = plan(dir.path(), &url, &kubeconfig, &[]);
    assert!(out.status.success(), "{}", explain(&out));
    let shown = text(&out.stdout);
    assert!(shown.contains(NOT_PREDICTED), "{shown}");
    assert!(shown.contains("--predict-anyway"), "{shown}");

    // --predict-anyway: predicted with v0.19's rules, and said so.
    let anyway = plan_json(dir.path(), &url, &kubeconfig, &["--predict-anyway"]);
    let placements = anyway["placements"].as_array().unwrap();
    assert!(!placements.is_empty(), "{anyway:#}");
    for placement in placements {
        assert!(placement.get("notPredicted").is_none(), "{placement:#}");
        assert!(placement["clusterQueue"].is_string(), "{placement:#}");
    }
    let change = change_of(&anyway, "their-job");
    assert!(change["after"].get("notPredicted").is_none(), "{change:#}");
    assert_eq!(change["after"]["state"], "admitted", "{change:#}");
    assert!(
        notices(&anyway).iter().any(|n| n.starts_with(
            "placements are predicted with Kueue v0.19's rules although Kueue's manager runs v0.20.0 (--predict-anyway)"
        )),
        "{:#?}",
        notices(&anyway)
    );

    // A patch release of v0.19 is predicted, with no word about the version but the mismatch.
    deploy(
        "registry.k8s.io/kueue/kueue:v0.19.7@sha256:0123456789abcdef",
        "",
    )
    .await;
    let patch = plan_json(dir.path(), &url, &kubeconfig, &[]);
    assert_eq!(
        patch["placements"], anyway["placements"],
        "a v0.19 patch release predicts as v0.19.2 does"
    );
    assert_eq!(change_of(&patch, "their-job")["after"]["state"], "admitted");
    let said = notices(&patch);
    assert!(
        said.iter()
            .any(|n| n == "Kueue v0.19.7 is installed, the spec says v0.19.2"),
        "{said:#?}"
    );
    assert!(
        !said.iter().any(|n| n.starts_with("placements are")),
        "{said:#?}"
    );

    // The running manager's gates count too: one that changes scheduling stops predictions.
    deploy("registry.k8s.io/kueue/kueue:v0.19.7", "LendingLimit=false").await;
    let gated = plan_json(dir.path(), &url, &kubeconfig, &[]);
    for placement in gated["placements"].as_array().unwrap() {
        assert!(
            placement["notPredicted"]
                .as_str()
                .is_some_and(|why| why.contains("Kueue's manager runs with LendingLimit=false")),
            "{placement:#}"
        );
    }
}
