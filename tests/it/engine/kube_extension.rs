//! The Kubernetes extension point: a `KubeApplier` plugs into the executor, and Kubernetes live
//! state plugs into the planner as `KubeLive::Observed`. A fake stands in for the kube-rs
//! implementation of the Kubernetes half; it answers with what the API server and controllers add
//! (uid, resourceVersion, status, Kueue's finalizer, Kueue's `spec.suspend`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use gkq::addr::ResourceAddr;
use gkq::apply::{
    ApplyError, ApplyOptions, Executor, KubeApplier, KubeApplyError, Outcome, PollConfig,
    RecordingSink, VerifyError,
};
use gkq::kube::Version;
use gkq::model::DesiredState;
use gkq::model::live::{KubeLive, KubeObject, LiveState};
use gkq::observe::observe_gke;
use gkq::plan::{ActionKind, Plan, PlanOptions, plan};
use serde_json::{Value, json};

use crate::engine::fake_gke::FakeGke;
use crate::engine::seed;

#[derive(Default)]
struct FakeKube {
    objects: Mutex<BTreeMap<ResourceAddr, Value>>,
    applied: Mutex<Vec<ResourceAddr>>,
    failing: Mutex<BTreeSet<ResourceAddr>>,
    /// The last resourceVersion handed out.
    version: AtomicU64,
    /// Requests by verb: "list", "get", "apply", "delete".
    calls: Mutex<BTreeMap<&'static str, usize>>,
    /// A Kueue that decides on a job at its `n`th question (`None`: no Kueue to ask).
    decides_at: Option<usize>,
    /// The questions asked about Kueue's decisions, job by job, and what was applied by then.
    asked: Mutex<Vec<(ResourceAddr, usize)>>,
    /// Kueue's writes can be followed (`KubeApplier::follow_decisions`): each question answered
    /// "not yet" is followed by a wake this long after (`None`: they cannot, and the wait reads
    /// every poll).
    wake_after: Option<std::time::Duration>,
    /// After this many wakes the following ends (the watch closes).
    wakes_until: Option<usize>,
    /// The wakes sent so far, and how many had been sent at each question.
    woken: Arc<AtomicU64>,
    woken_at_question: Mutex<Vec<u64>>,
    /// Where the current following's wakes go.
    wake: Arc<Mutex<Option<futures::channel::mpsc::UnboundedSender<()>>>>,
    /// How many times following began.
    follows: Mutex<usize>,
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

    fn call(&self, verb: &'static str) {
        *self.calls.lock().unwrap().entry(verb).or_default() += 1;
    }

    fn calls(&self) -> BTreeMap<&'static str, usize> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn next_version(&self) -> String {
        (self.version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    /// Someone else writes the object: `edit` changes it and it gets a new resourceVersion.
    fn write(&self, addr: &str, edit: impl FnOnce(&mut Value)) {
        let version = self.next_version();
        let mut objects = self.objects.lock().unwrap();
        let object = objects.get_mut(&addr.parse().unwrap()).unwrap();
        edit(object);
        object["metadata"]["resourceVersion"] = json!(version);
    }
}

#[async_trait::async_trait]
impl KubeApplier for FakeKube {
    async fn list(&self, api_version: &str, kind: &str) -> Result<Vec<Value>, KubeApplyError> {
        self.call("list");
        Ok(self
            .objects
            .lock()
            .unwrap()
            .values()
            .filter(|o| o["apiVersion"] == api_version && o["kind"] == kind)
            .cloned()
            .collect())
    }

    async fn get(
        &self,
        addr: &ResourceAddr,
        _object: &Value,
    ) -> Result<Option<Value>, KubeApplyError> {
        self.call("get");
        Ok(self.objects.lock().unwrap().get(addr).cloned())
    }

    async fn apply(&self, object: &Value, version: Option<&Version>) -> Result<(), KubeApplyError> {
        self.call("apply");
        let addr = ResourceAddr::from_object(object).unwrap();
        if self.failing.lock().unwrap().contains(&addr) {
            return Err(KubeApplyError::new(
                format!("admission webhook denied the request for {addr}"),
                Some("check the Kueue webhook logs".into()),
            ));
        }
        let stored = self.objects.lock().unwrap().get(&addr).cloned();
        if let (Some(stored), Some(version)) = (&stored, version)
            && stored["metadata"]["resourceVersion"] != version.resource_version.as_str()
        {
            return Err(KubeApplyError {
                changed: true,
                ..KubeApplyError::new("the object has been modified", None)
            });
        }
        let mut live = object.clone();
        live["metadata"]["uid"] = json!("0000-1111");
        live["metadata"]["resourceVersion"] = json!(self.next_version());
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

    async fn kueue_decided(&self, object: &Value) -> Result<Option<bool>, KubeApplyError> {
        let Some(at) = self.decides_at else {
            return Ok(None);
        };
        let addr = ResourceAddr::from_object(object).unwrap();
        let applied = self.applied.lock().unwrap().len();
        let mut asked = self.asked.lock().unwrap();
        asked.push((addr.clone(), applied));
        self.woken_at_question
            .lock()
            .unwrap()
            .push(self.woken.load(Ordering::SeqCst));
        let decided = asked.iter().filter(|(a, _)| *a == addr).count() >= at;
        if let (false, Some(after)) = (decided, self.wake_after) {
            // Kueue writes something about the job a little later: the following wakes the wait.
            let (wake, woken, until) = (self.wake.clone(), self.woken.clone(), self.wakes_until);
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let mut wake = wake.lock().unwrap();
                if let Some(sender) = wake.as_ref() {
                    let _ = sender.unbounded_send(());
                    let sent = woken.fetch_add(1, Ordering::SeqCst) + 1;
                    if until.is_some_and(|until| sent >= until as u64) {
                        // The watch ends: its stream closes.
                        *wake = None;
                    }
                }
            });
        }
        Ok(Some(decided))
    }

    async fn follow_decisions(&self, _object: &Value) -> Option<gkq::apply::Wakes> {
        use futures::StreamExt;
        self.wake_after?;
        *self.follows.lock().unwrap() += 1;
        let (sender, wakes) = futures::channel::mpsc::unbounded();
        *self.wake.lock().unwrap() = Some(sender);
        Some(wakes.boxed())
    }

    async fn delete(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: &str,
        _: Option<&Version>,
    ) -> Result<(), KubeApplyError> {
        self.call("delete");
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
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
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
            ..ApplyOptions::default()
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
    Arc::make_mut(&mut more.kubernetes[2])["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        [0]["nominalQuota"] = json!(32);
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
            ..ApplyOptions::default()
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
            ..ApplyOptions::default()
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

/// An applied cluster and a plan that raises the ClusterQueue's quota.
async fn quota_edit(gke: &FakeGke, kube: &FakeKube) -> Plan {
    let desired = desired();
    let first = plan(
        &desired,
        &observe(gke, kube, &desired).await,
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(executor(gke, kube).apply(&first).await.is_success());
    let mut more = desired.clone();
    Arc::make_mut(&mut more.kubernetes[2])["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        [0]["nominalQuota"] = json!(32);
    let edit = plan(
        &more,
        &observe(gke, kube, &more).await,
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(edit.changes().count(), 1);
    kube.calls();
    edit
}

fn executor<'a>(gke: &'a FakeGke, kube: &'a FakeKube) -> Executor<'a> {
    static SINK: std::sync::LazyLock<RecordingSink> = std::sync::LazyLock::new(RecordingSink::new);
    Executor::new(gke, &*SINK)
        .with_kube(kube)
        .with_options(ApplyOptions {
            poll: PollConfig::immediate(),
            ..ApplyOptions::default()
        })
}

const CLUSTER_QUEUE: &str = "kueue.clusterqueue/cluster-queue";

#[tokio::test]
async fn a_plan_is_checked_with_one_list_per_kind_and_writes_on_the_version_it_checked() {
    let (gke, kube) = (FakeGke::new(), FakeKube::default());
    let edit = quota_edit(&gke, &kube).await;
    // Kueue writes the queue's status after the plan: not what the plan depends on.
    kube.write(CLUSTER_QUEUE, |q| {
        q["status"]["pendingWorkloads"] = json!(3)
    });
    let checked = executor(&gke, &kube).verify(&edit).await.unwrap();
    // Five kinds in the plan (flavors, the queue, the local queue, the ConfigMap, the job).
    assert_eq!(kube.calls(), BTreeMap::from([("list", 5)]));
    let report = executor(&gke, &kube).apply_checked(&edit, &checked).await;
    assert!(report.is_success());
    assert_eq!(
        kube.calls(),
        BTreeMap::from([("apply", 1)]),
        "one write, no read"
    );

    // Kueue writes the status again between the check and the write: the write is refused,
    // the queue read again and, as its quota is as planned, written at its new version.
    let (gke, kube) = (FakeGke::new(), FakeKube::default());
    let edit = quota_edit(&gke, &kube).await;
    let checked = executor(&gke, &kube).verify(&edit).await.unwrap();
    kube.write(CLUSTER_QUEUE, |q| {
        q["status"]["pendingWorkloads"] = json!(4)
    });
    kube.calls();
    let report = executor(&gke, &kube).apply_checked(&edit, &checked).await;
    assert!(report.is_success());
    assert_eq!(kube.calls(), BTreeMap::from([("apply", 2), ("get", 1)]));
}

#[tokio::test]
async fn a_target_edited_after_the_check_is_refused_as_stale_at_the_write() {
    let (gke, kube) = (FakeGke::new(), FakeKube::default());
    let edit = quota_edit(&gke, &kube).await;
    let quota = |value: u64| {
        move |q: &mut Value| {
            q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
                json!(value)
        }
    };
    // Edited before the check: the whole plan is refused, naming the field.
    kube.write(CLUSTER_QUEUE, quota(20));
    let Err(VerifyError::Stale { stale }) = executor(&gke, &kube).verify(&edit).await else {
        panic!("the plan is stale")
    };
    assert_eq!(
        stale[0].to_string(),
        format!("{CLUSTER_QUEUE}: spec.resourceGroups changed since the plan was made")
    );

    // Edited between the check and the write: the conditional write is refused, the queue read
    // again, and the action fails as stale without writing.
    kube.write(CLUSTER_QUEUE, quota(16));
    let checked = executor(&gke, &kube).verify(&edit).await.unwrap();
    kube.write(CLUSTER_QUEUE, quota(20));
    kube.calls();
    let report = executor(&gke, &kube).apply_checked(&edit, &checked).await;
    let Some(Outcome::Failed(error)) = report.outcome(&CLUSTER_QUEUE.parse().unwrap()) else {
        panic!("the stale write is refused")
    };
    assert!(matches!(error, ApplyError::Stale { .. }), "{error}");
    assert_eq!(kube.calls(), BTreeMap::from([("apply", 1), ("get", 1)]));
    let live =
        kube.objects.lock().unwrap()[&CLUSTER_QUEUE.parse::<ResourceAddr>().unwrap()].clone();
    assert_eq!(
        live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"], 20,
        "the other writer's value stays"
    );
}

#[tokio::test]
async fn an_unchanged_secret_is_checked_with_its_real_values() {
    let (gke, kube) = (FakeGke::new(), FakeKube::default());
    let mut desired = desired();
    desired
        .kubernetes
        .push(Arc::new(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "token", "namespace": "default", "labels": labels()},
        "data": {"token": "czNjcmV0"}})));
    let first = plan(
        &desired,
        &observe(&gke, &kube, &desired).await,
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(executor(&gke, &kube).apply(&first).await.is_success());
    // The next plan changes a quota; the Secret is a no-op whose values the plan seals.
    Arc::make_mut(&mut desired.kubernetes[2])["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        [0]["nominalQuota"] = json!(32);
    let edit = plan(
        &desired,
        &observe(&gke, &kube, &desired).await,
        &PlanOptions::default(),
    )
    .unwrap();
    let secret: ResourceAddr = "k8s.secret/default/token".parse().unwrap();
    let action = edit.actions.iter().find(|a| a.addr == secret).unwrap();
    assert!(action.sensitive, "the plan holds markers, not the value");
    assert!(
        executor(&gke, &kube).verify(&edit).await.is_ok(),
        "the unchanged Secret is not stale"
    );
}

/// Two jobs Kueue queues: the second is created only once Kueue decided on the first, the wait
/// is shown as "job N of M" (about once a second), and a Kueue that decides nothing within
/// `submit_wait` is said to have decided nothing, after which the next job is created anyway.
#[tokio::test]
async fn each_job_waits_for_kueues_decision_on_the_one_before_within_the_submit_wait() {
    let mut desired = desired();
    let mut second = (*desired.kubernetes[5]).clone();
    second["metadata"]["name"] = json!("rayjob-tpu-v6e-dws-2");
    desired.kubernetes.push(Arc::new(second));
    let gke = FakeGke::new();
    let decisions = |decides_at: usize, submit_wait: std::time::Duration| {
        let (gke, desired) = (&gke, &desired);
        async move {
            let kube = FakeKube {
                decides_at: Some(decides_at),
                ..FakeKube::default()
            };
            let planned = plan(
                desired,
                &observe(gke, &kube, desired).await,
                &PlanOptions::default(),
            )
            .unwrap();
            let sink = RecordingSink::new();
            let report = Executor::new(gke, &sink)
                .with_kube(&kube)
                .with_options(ApplyOptions {
                    poll: PollConfig::immediate(),
                    submit_wait,
                })
                .apply(&planned)
                .await;
            assert!(
                report.is_success(),
                "{:?}",
                report.failures().collect::<Vec<_>>()
            );
            let asked = kube.asked.lock().unwrap().clone();
            (sink.events(), asked)
        }
    };
    let first: ResourceAddr = "ray.rayjob/default/rayjob-tpu-v6e-dws-1".parse().unwrap();
    let second: ResourceAddr = "ray.rayjob/default/rayjob-tpu-v6e-dws-2".parse().unwrap();

    // Kueue decides at the third question: job 2 is not created while job 1 is asked about.
    let (events, asked) = decisions(3, std::time::Duration::from_secs(30)).await;
    let about_first: Vec<usize> = asked
        .iter()
        .filter(|(a, _)| *a == first)
        .map(|(_, applied)| *applied)
        .collect();
    assert_eq!(about_first.len(), 3, "{asked:?}");
    assert!(about_first.windows(2).all(|w| w[0] == w[1]), "{asked:?}");
    let kueue_events: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            gkq::apply::ApplyEvent::AwaitingKueue {
                addr, job, jobs, ..
            } => Some(format!("awaiting {addr} {job}/{jobs}")),
            gkq::apply::ApplyEvent::KueueDecided {
                addr,
                job,
                jobs,
                decided,
                ..
            } => Some(format!("decided {addr} {job}/{jobs} {decided}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        kueue_events,
        [
            format!("awaiting {first} 1/2"),
            format!("decided {first} 1/2 true"),
            format!("awaiting {second} 2/2"),
            format!("decided {second} 2/2 true"),
        ]
    );

    // A Kueue that never decides in time: each wait ends at the limit, said so, and job 2 is
    // still created.
    let (events, asked) = decisions(usize::MAX, std::time::Duration::from_millis(300)).await;
    let undecided: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            gkq::apply::ApplyEvent::KueueDecided {
                addr,
                decided: false,
                elapsed_ms,
                ..
            } => {
                assert!(*elapsed_ms >= 300, "{e:?}");
                Some(addr.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(undecided, [first.to_string(), second.to_string()]);
    assert!(asked.iter().any(|(a, _)| *a == second), "{asked:?}");
}

/// With Kueue's writes followed (a watch opened before each create), the wait for a decision
/// reads it once after the create and then only when woken: no read happens before the wake
/// that prompts it, although the wakes come long after the 100 ms poll would have read again.
/// A following that ends falls back to reading every poll, and an apply that does not wait
/// (`--submit-wait 0`) follows nothing.
#[tokio::test]
async fn the_wait_for_kueues_decision_reads_it_when_woken_not_every_poll() {
    let desired = desired();
    let gke = FakeGke::new();
    let wait = |wakes_until: Option<usize>, submit_wait: std::time::Duration| {
        let (gke, desired) = (&gke, &desired);
        async move {
            let kube = FakeKube {
                decides_at: Some(3),
                wake_after: Some(std::time::Duration::from_millis(600)),
                wakes_until,
                ..FakeKube::default()
            };
            let planned = plan(
                desired,
                &observe(gke, &kube, desired).await,
                &PlanOptions::default(),
            )
            .unwrap();
            let sink = RecordingSink::new();
            let report = Executor::new(gke, &sink)
                .with_kube(&kube)
                .with_options(ApplyOptions {
                    poll: PollConfig::immediate(),
                    submit_wait,
                })
                .apply(&planned)
                .await;
            assert!(
                report.is_success(),
                "{:?}",
                report.failures().collect::<Vec<_>>()
            );
            let decided = sink.events().iter().any(|e| {
                matches!(
                    e,
                    gkq::apply::ApplyEvent::KueueDecided { decided: true, .. }
                )
            });
            let woken = kube.woken_at_question.lock().unwrap().clone();
            let follows = *kube.follows.lock().unwrap();
            (decided, woken, follows)
        }
    };

    // Decided at the third read: the first right after the create, each later one after a wake.
    let (decided, woken, follows) = wait(None, std::time::Duration::from_secs(30)).await;
    assert!(decided);
    assert_eq!(follows, 1, "one job, followed from before its create");
    assert_eq!(woken, [0, 1, 2], "each read after the first follows a wake");

    // The following ends after one wake: the wait reads every poll from then on, without wakes.
    let (decided, woken, _) = wait(Some(1), std::time::Duration::from_secs(30)).await;
    assert!(decided);
    assert_eq!(woken, [0, 1, 1], "the third read came from the poll");

    // Not waiting for decisions: nothing is followed.
    let (_, _, follows) = wait(None, std::time::Duration::ZERO).await;
    assert_eq!(follows, 0);
}
