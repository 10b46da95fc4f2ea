//! The executor runs independent Kubernetes actions concurrently, bounded, and keeps its
//! guarantees: nothing starts before what it depends on has finished, GKE actions stay one at a
//! time, results come in plan order, and an interrupt stops new actions from starting.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gkq::addr::ResourceAddr;
use gkq::apply::{
    ApplyOptions, ApplyReport, Executor, Interrupt, KubeApplier, KubeApplyError, Outcome,
    PollConfig, RecordingSink,
};
use gkq::kube::Version;
use gkq::model::DesiredState;
use gkq::model::live::{KubeLive, KubeObject};
use gkq::observe::observe_gke;
use gkq::plan::{Plan, PlanOptions, plan};
use serde_json::{Value, json};

use crate::engine::fake_gke::FakeGke;
use crate::engine::seed;

/// Applies take a little while; records when each started and finished, and the most in flight.
#[derive(Default)]
struct SlowKube {
    clock: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// addr -> (start tick, end tick)
    spans: Mutex<BTreeMap<ResourceAddr, (usize, usize)>>,
    /// Triggered once this many applies have finished.
    interrupt_after: Option<(usize, Interrupt)>,
    finished: AtomicUsize,
}

#[async_trait::async_trait]
impl KubeApplier for SlowKube {
    async fn list(&self, _: &str, _: &str) -> Result<Vec<Value>, KubeApplyError> {
        Ok(Vec::new())
    }

    async fn get(&self, _: &ResourceAddr, _: &Value) -> Result<Option<Value>, KubeApplyError> {
        Ok(None)
    }

    async fn apply(&self, object: &Value, _: Option<&Version>) -> Result<(), KubeApplyError> {
        let addr = ResourceAddr::from_object(object).unwrap();
        let start = self.clock.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let end = self.clock.fetch_add(1, Ordering::SeqCst);
        self.spans.lock().unwrap().insert(addr, (start, end));
        let done = self.finished.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some((n, interrupt)) = &self.interrupt_after
            && done >= *n
        {
            interrupt.trigger();
        }
        Ok(())
    }

    async fn delete(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: &str,
        _: Option<&Version>,
    ) -> Result<(), KubeApplyError> {
        Ok(())
    }
}

fn labels() -> Value {
    json!({"app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "tpu-cluster"})
}

/// Two flavors, a ClusterQueue on them, `queues` LocalQueues on it, and `maps` ConfigMaps.
fn desired(queues: usize, maps: usize) -> DesiredState {
    let mut desired = seed::desired();
    let mut objects = vec![
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "on-demand", "labels": labels()}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "dws", "labels": labels()}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq", "labels": labels()},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": 1}]},
                {"name": "dws", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}}),
    ];
    for i in 0..queues {
        objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": format!("lq-{i}"), "namespace": "default", "labels": labels()},
            "spec": {"clusterQueue": "cq"}}),
        );
    }
    for i in 0..maps {
        objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "default", "labels": labels()},
            "data": {"i": i.to_string()}}));
    }
    desired.kubernetes = objects.into_iter().map(Arc::new).collect();
    desired
}

async fn plan_of(gke: &FakeGke, desired: &DesiredState) -> Plan {
    let mut live = observe_gke(gke, desired).await.unwrap();
    live.kubernetes = KubeLive::Observed {
        objects: desired
            .kubernetes
            .iter()
            .map(|o| (ResourceAddr::from_object(o).unwrap(), KubeObject::default()))
            .collect(),
    };
    plan(desired, &live, &PlanOptions::default()).unwrap()
}

/// Applies `plan` with at most `concurrency` Kubernetes actions in flight.
async fn apply(gke: &FakeGke, kube: &SlowKube, plan: &Plan, concurrency: usize) -> ApplyReport {
    let sink = RecordingSink::new();
    Executor::new(gke, &sink)
        .with_kube(kube)
        .with_options(options())
        .with_kube_concurrency(concurrency)
        .apply(plan)
        .await
}

fn options() -> ApplyOptions {
    ApplyOptions {
        poll: PollConfig::immediate(),
        ..ApplyOptions::default()
    }
}

#[tokio::test]
async fn independent_kubernetes_actions_overlap_within_the_bound_and_dependencies_are_kept() {
    let gke = FakeGke::new();
    let kube = SlowKube::default();
    let desired = desired(40, 40);
    let plan = plan_of(&gke, &desired).await;
    let report = apply(&gke, &kube, &plan, 8).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );

    let max = kube.max_in_flight.load(Ordering::SeqCst);
    assert!(max > 1, "independent actions ran one at a time");
    assert!(max <= 8, "{max} actions in flight, the bound is 8");

    // Nothing started before what it depends on had finished.
    let spans = kube.spans.lock().unwrap();
    for action in plan.changes() {
        let Some((start, _)) = spans.get(&action.addr) else {
            continue;
        };
        for dependency in &action.depends_on {
            if let Some((_, end)) = spans.get(dependency) {
                assert!(
                    end < start,
                    "{} started before {dependency} finished",
                    action.addr
                );
            }
        }
    }
    // Results are in plan order.
    let reported: Vec<&ResourceAddr> = report.results.iter().map(|r| &r.addr).collect();
    let planned: Vec<&ResourceAddr> = plan.actions.iter().map(|a| &a.addr).collect();
    assert_eq!(reported, planned);
}

#[tokio::test]
async fn a_concurrency_of_one_is_one_at_a_time_in_plan_order() {
    let gke = FakeGke::new();
    let kube = SlowKube::default();
    let desired = desired(5, 5);
    let plan = plan_of(&gke, &desired).await;
    let report = apply(&gke, &kube, &plan, 1).await;
    assert!(report.is_success());
    assert_eq!(kube.max_in_flight.load(Ordering::SeqCst), 1);
    let spans = kube.spans.lock().unwrap();
    let mut started: Vec<(usize, String)> = spans
        .iter()
        .map(|(addr, (start, _))| (*start, addr.to_string()))
        .collect();
    started.sort();
    let order: Vec<String> = started.into_iter().map(|(_, a)| a).collect();
    let planned: Vec<String> = plan
        .changes()
        .filter(|a| !a.addr.kind.is_gke())
        .map(|a| a.addr.to_string())
        .collect();
    assert_eq!(order, planned);
}

#[tokio::test]
async fn an_interrupt_stops_new_actions_and_lets_running_ones_finish() {
    let gke = FakeGke::new();
    let interrupt = Interrupt::new();
    let kube = SlowKube {
        interrupt_after: Some((3, interrupt.clone())),
        ..Default::default()
    };
    let desired = desired(30, 30);
    let plan = plan_of(&gke, &desired).await;
    let sink = RecordingSink::new();
    let report = Executor::new(&gke, &sink)
        .with_kube(&kube)
        .with_options(options())
        .with_kube_concurrency(4)
        .with_interrupt(&interrupt)
        .apply(&plan)
        .await;
    assert!(report.interrupted());
    assert!(!report.is_success());
    let applied = kube.spans.lock().unwrap().len();
    let not_started = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Interrupted))
        .count();
    // The ones in flight when it came finished; nothing else started.
    assert!((3..=3 + 4).contains(&applied), "{applied} applied");
    assert_eq!(
        applied + not_started,
        plan.changes().count() - 3,
        "GKE actions ran before"
    );
    for result in &report.results {
        if matches!(result.outcome, Outcome::Succeeded) && !result.addr.kind.is_gke() {
            assert!(kube.spans.lock().unwrap().contains_key(&result.addr));
        }
    }
}

/// Jobs Kueue queues are created one at a time in spec order (Kueue admits in creation order, so
/// the first job gets Plan A); jobs outside Kueue have no such order and go concurrently.
#[tokio::test]
async fn queued_jobs_are_submitted_in_order_and_unqueued_ones_concurrently() {
    let gke = FakeGke::new();
    let mut desired = desired(1, 0);
    let job = |name: &str, queued: bool| {
        let mut labels = labels();
        if queued {
            labels["kueue.x-k8s.io/queue-name"] = json!("lq-0");
        }
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"entrypoint": "python train.py"}})
    };
    for i in 0..4 {
        desired
            .kubernetes
            .push(Arc::new(job(&format!("queued-{i}"), true)));
    }
    for i in 0..4 {
        desired
            .kubernetes
            .push(Arc::new(job(&format!("free-{i}"), false)));
    }
    let plan = plan_of(&gke, &desired).await;
    let kube = SlowKube::default();
    let report = apply(&gke, &kube, &plan, 8).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );

    let spans = kube.spans.lock().unwrap().clone();
    let span = |name: &str| spans[&ResourceAddr::from_object(&job(name, false)).unwrap()];
    for i in 0..3 {
        let (this, next) = (
            span(&format!("queued-{i}")),
            span(&format!("queued-{}", i + 1)),
        );
        assert!(
            this.1 < next.0,
            "queued-{i} {this:?} must finish before queued-{} {next:?} starts",
            i + 1
        );
    }
    let free: Vec<(usize, usize)> = (0..4).map(|i| span(&format!("free-{i}"))).collect();
    let overlapping = free
        .iter()
        .enumerate()
        .any(|(i, a)| free[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(
        overlapping,
        "jobs outside Kueue ran one at a time: {free:?}"
    );
}
