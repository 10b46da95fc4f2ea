//! The Kubernetes extension point: a `KubeApplier` plugs into the executor, and Kubernetes live
//! state plugs into the planner as `KubeLive::Observed`. A fake stands in for the kube-rs
//! implementation of the Kubernetes half; it answers with what the API server and controllers add
//! (uid, resourceVersion, status, Kueue's finalizer, Kueue's `spec.suspend`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use gkq::addr::ResourceAddr;
use gkq::apply::{
    ApplyOptions, Executor, KubeApplier, KubeApplyError, Outcome, PollConfig, RecordingSink,
};
use gkq::model::DesiredState;
use gkq::model::live::{KubeLive, KubeObject, LiveState};
use gkq::observe::observe_gke;
use gkq::plan::{ActionKind, PlanOptions, plan};
use serde_json::{Value, json};

use crate::engine::fake_gke::FakeGke;
use crate::engine::seed;

#[derive(Default)]
struct FakeKube {
    objects: Mutex<BTreeMap<ResourceAddr, Value>>,
    applied: Mutex<Vec<ResourceAddr>>,
    failing: Mutex<BTreeSet<ResourceAddr>>,
}

impl FakeKube {
    /// What the Kubernetes observer would report: every desired object, and everything stored.
    fn observe(&self, desired: &DesiredState) -> KubeLive {
        let stored = self.objects.lock().unwrap().clone();
        let mut objects: BTreeMap<ResourceAddr, KubeObject> = stored
            .iter()
            .map(|(addr, live)| {
                (
                    addr.clone(),
                    KubeObject {
                        live: Some(live.clone()),
                        predicted: None,
                    },
                )
            })
            .collect();
        for object in &desired.kubernetes {
            objects
                .entry(ResourceAddr::from_object(object).unwrap())
                .or_default();
        }
        KubeLive::Observed { objects }
    }
}

#[async_trait::async_trait]
impl KubeApplier for FakeKube {
    async fn get(
        &self,
        addr: &ResourceAddr,
        _object: &Value,
    ) -> Result<Option<Value>, KubeApplyError> {
        Ok(self.objects.lock().unwrap().get(addr).cloned())
    }

    async fn apply(&self, object: &Value) -> Result<(), KubeApplyError> {
        let addr = ResourceAddr::from_object(object).unwrap();
        if self.failing.lock().unwrap().contains(&addr) {
            return Err(KubeApplyError {
                message: format!("admission webhook denied the request for {addr}"),
                hint: Some("check the Kueue webhook logs".into()),
            });
        }
        let mut live = object.clone();
        live["metadata"]["uid"] = json!("0000-1111");
        live["metadata"]["resourceVersion"] = json!("42");
        live["status"] = json!({"conditions": []});
        match object["kind"].as_str() {
            Some("ClusterQueue" | "ResourceFlavor") => {
                live["metadata"]["finalizers"] = json!(["kueue.x-k8s.io/resource-in-use"]);
            }
            Some("RayJob") => live["spec"]["suspend"] = json!(true),
            _ => {}
        }
        self.objects.lock().unwrap().insert(addr.clone(), live);
        self.applied.lock().unwrap().push(addr);
        Ok(())
    }

    async fn delete(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: &str,
    ) -> Result<(), KubeApplyError> {
        Ok(())
    }
}

fn labels() -> Value {
    json!({"app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "tpu-cluster"})
}

fn desired() -> DesiredState {
    let mut desired = seed::desired();
    desired.kubernetes = vec![
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "on-demand", "labels": labels()},
            "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "on-demand-pool"}}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "dws", "labels": labels()},
            "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "dws-pool"}}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cluster-queue", "labels": labels()},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", "google.com/tpu"],
                "flavors": [{"name": "on-demand", "resources": [{"name": "google.com/tpu", "nominalQuota": 16}]},
                            {"name": "dws", "resources": [{"name": "google.com/tpu", "nominalQuota": 1000}]}]}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": "default", "labels": labels()},
            "spec": {"clusterQueue": "cluster-queue"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "jax-train-script", "namespace": "default", "labels": labels()},
            "data": {"train.py": "import jax\n"}}),
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rayjob-tpu-v6e-dws-1", "namespace": "default",
                "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "tpu-cluster"}},
            "spec": {"entrypoint": "python /app/train.py",
                "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {
                    "volumes": [{"name": "app", "configMap": {"name": "jax-train-script"}}]}}}}}}),
    ];
    desired
}

async fn observe(gke: &FakeGke, kube: &FakeKube, desired: &DesiredState) -> LiveState {
    let mut live = observe_gke(gke, desired).await.unwrap();
    live.kubernetes = kube.observe(desired);
    live
}

#[tokio::test]
async fn kubernetes_objects_are_applied_after_the_cluster_and_then_stay_quiet() {
    let (gke, kube) = (FakeGke::new(), FakeKube::default());
    let desired = desired();
    let first = plan(
        &desired,
        &observe(&gke, &kube, &desired).await,
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(first.summary.create, 9);

    let sink = RecordingSink::new();
    let report = Executor::new(&gke, &sink)
        .with_kube(&kube)
        .with_options(ApplyOptions {
            poll: PollConfig::immediate(),
        })
        .apply(&first)
        .await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    let applied: Vec<String> = kube
        .applied
        .lock()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        applied,
        [
            "kueue.resourceflavor/dws",
            "kueue.resourceflavor/on-demand",
            "kueue.clusterqueue/cluster-queue",
            "kueue.localqueue/default/user-queue",
            "k8s.configmap/default/jax-train-script",
            "ray.rayjob/default/rayjob-tpu-v6e-dws-1",
        ]
    );

    // Server metadata, status, Kueue's finalizer and Kueue's suspend are not changes.
    let again = plan(
        &desired,
        &observe(&gke, &kube, &desired).await,
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(
        !again.has_changes(),
        "{}",
        gkq::render::plan::to_text(&again, false)
    );

    // A quota edit is one server-side apply of the ClusterQueue.
    let mut more = desired.clone();
    more.kubernetes[2]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
        json!(32);
    let edit = plan(
        &more,
        &observe(&gke, &kube, &more).await,
        &PlanOptions::default(),
    )
    .unwrap();
    let kinds: Vec<(String, ActionKind)> = edit
        .changes()
        .map(|a| (a.addr.to_string(), a.kind))
        .collect();
    assert_eq!(
        kinds,
        [(
            "kueue.clusterqueue/cluster-queue".to_string(),
            ActionKind::Update
        )]
    );
}

#[tokio::test]
async fn a_failed_kubernetes_apply_skips_only_its_dependents() {
    let (gke, kube) = (FakeGke::new(), FakeKube::default());
    let desired = desired();
    let cluster_queue: ResourceAddr = "kueue.clusterqueue/cluster-queue".parse().unwrap();
    kube.failing.lock().unwrap().insert(cluster_queue.clone());
    let plan = plan(
        &desired,
        &observe(&gke, &kube, &desired).await,
        &PlanOptions::default(),
    )
    .unwrap();
    let sink = RecordingSink::new();
    let report = Executor::new(&gke, &sink)
        .with_kube(&kube)
        .with_options(ApplyOptions {
            poll: PollConfig::immediate(),
        })
        .apply(&plan)
        .await;
    let outcome = |addr: &str| report.outcome(&addr.parse().unwrap());
    assert!(matches!(
        outcome("kueue.clusterqueue/cluster-queue"),
        Some(Outcome::Failed(_))
    ));
    assert!(matches!(
        outcome("kueue.localqueue/default/user-queue"),
        Some(Outcome::Skipped { .. })
    ));
    // The job waits on the local queue, which was skipped: skipped too.
    assert!(matches!(
        outcome("ray.rayjob/default/rayjob-tpu-v6e-dws-1"),
        Some(Outcome::Skipped { .. })
    ));
    assert!(matches!(
        outcome("k8s.configmap/default/jax-train-script"),
        Some(Outcome::Succeeded)
    ));
    assert!(matches!(
        outcome("gke.nodepool/dws-pool"),
        Some(Outcome::Succeeded)
    ));
}

#[tokio::test]
async fn without_a_kubernetes_applier_kubernetes_actions_fail_clearly() {
    let (gke, kube) = (FakeGke::new(), FakeKube::default());
    let desired = desired();
    let plan = plan(
        &desired,
        &observe(&gke, &kube, &desired).await,
        &PlanOptions::default(),
    )
    .unwrap();
    let sink = RecordingSink::new();
    let report = Executor::new(&gke, &sink)
        .with_options(ApplyOptions {
            poll: PollConfig::immediate(),
        })
        .apply(&plan)
        .await;
    let failure = report
        .failures()
        .next()
        .map(|(_, e)| e.to_string())
        .unwrap();
    assert!(
        failure.contains("no Kubernetes client is configured"),
        "{failure}"
    );
    assert!(matches!(
        report.outcome(&"gke.nodepool/on-demand-pool".parse().unwrap()),
        Some(Outcome::Succeeded)
    ));
}
