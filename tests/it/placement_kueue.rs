//! Side by side with the real Kueue: for each scenario, gkq predicts where Kueue puts every job
//! (`gkq::placement::predict`, the same function `gkq plan` uses), the same objects are applied
//! to a real kube-apiserver + Kueue v0.19.2 (tools/controlplane.sh), and the prediction must
//! equal Kueue's Workload admissions podset by podset: flavor of every resource and state
//! (admitted / quota reserved waiting for an admission check / pending).
//!
//! How a scenario runs (see `Scenario::expect`):
//! * Every cluster-scoped object (ResourceFlavor, ClusterQueue, Cohort, AdmissionCheck,
//!   ProvisioningRequestConfig, priority classes) has a name unique to the test, because the
//!   tests of this binary share one control plane. Jobs and LocalQueues live in the test's own
//!   namespace. There are no nodes: Kueue admits on quota alone and matches flavor labels and
//!   taints against pod templates.
//! * gkq predicts first, from the scenario's objects (plus, for jobs submitted after others,
//!   the live Workloads, as `gkq plan` does), and the prediction must be the scenario's
//!   expected one-line-per-job summary, so that each scenario states what it exercises.
//! * Jobs are created one at a time; each waits until Kueue has made its Workload and the clock
//!   has moved to the next second, so creation timestamps (second resolution, Kueue's FIFO key)
//!   order them as the prediction does (jobs not created yet queue in the order given).
//! * `Arrival` says what Kueue sees: jobs arriving one by one at an active queue, or a batch held
//!   back (ClusterQueue `stopPolicy: Hold`, or a ResourceFlavor created last so that several
//!   ClusterQueues of a cohort become active in the same instant) and released together.
//! * Kueue's result is read from the Workloads with `observed_placement` and compared with
//!   `Placement::differences` (state; flavor of every podset and resource), together with the
//!   Workloads' podsets (names, order, pod counts) and the quota each ClusterQueue reserves
//!   (`status.flavorsReservation` against the predicted usage), until they agree and keep
//!   agreeing for a few seconds; a job predicted to pend must also have been tried by Kueue's
//!   scheduler (see `not_yet_tried`). Pending messages are not compared (docs/kueue.md §3.1).
//!   Afterwards every ClusterQueue is put on hold, so that a StrictFIFO head does not keep
//!   Kueue busy for the other tests.
//! * Preemption: running jobs (submitted first, see `Scenario::after`) that gkq predicts to be
//!   preempted are compared too, and must end up evicted and pending as predicted. Objects
//!   given to `Scenario::released` replace their namesakes once the first jobs settled (say a
//!   held LocalQueue let go), so that an older job can queue after a newer one runs.

use crate::support;
use std::sync::Arc;

mod jobsets;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use gkq::placement::time::Timestamp;
use gkq::placement::{
    Cluster, FlavorUsage, PendingWorkload, Placement, PlacementState, Prediction,
    observed_placement, predict,
};
use gkq::vocab::quantity::Quantity;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use support::control_plane::{
    FIELD_MANAGER, TestEnv, condition, get, kube_spec_desired, kube_spec_vars, list, test_env,
    unique_name,
};
use support::kueue::{
    KUEUE, PRIORITY_LABEL, QUEUE_LABEL, batch_job, cluster_queue, flavor, group, local_queue,
    pool_flavor, with, with_label, with_pod, workload_priority_class,
};

/// How long Kueue may take to reach the predicted result.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the agreement must hold before it counts.
const STABLE_FOR: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------- the seed

/// The seed's objects as gkq renders them from `tests/fixtures/kube-spec` (the walk-through's
/// three flavors, the DWS ProvisioningRequest check, the ClusterQueue, the LocalQueue, the
/// ConfigMap and two RayJobs), with cluster-scoped names unique to the test. Returns the
/// objects and the variables (CPU, ONDEMAND, DWS, ... name the flavors).
fn seed_objects(env: &TestEnv, test: &str) -> (Vec<Value>, BTreeMap<String, String>) {
    let vars = kube_spec_vars(test, &env.namespace);
    let objects = kube_spec_desired(&vars)
        .kubernetes
        .into_iter()
        .map(Arc::unwrap_or_clone)
        .collect();
    (objects, vars)
}

/// Another run of the seed's RayJob, named `rayjob-tpu-v6e-dws-<id>`.
fn seed_job_copy(objects: &[Value], id: u32) -> Value {
    let mut job = objects
        .iter()
        .find(|o| o["kind"] == "RayJob")
        .expect("the seed has RayJobs")
        .clone();
    job["metadata"]["name"] = json!(format!("rayjob-tpu-v6e-dws-{id}"));
    job
}

// ---------------------------------------------------------------- the side-by-side runner

/// What Kueue sees of the jobs.
enum Arrival {
    /// The queues are active; each job arrives on its own.
    OneByOne,
    /// Every ClusterQueue is created with `stopPolicy: Hold`, the jobs are created, then the
    /// queues are released. For queues that share no cohort (each is released on its own).
    Held,
    /// This ResourceFlavor, which every ClusterQueue uses, is created after the jobs: all of
    /// them become active in the same instant, and Kueue's first cycle sees every head.
    FlavorLast(String),
}

/// One side-by-side scenario: queue objects, jobs and how they arrive.
struct Scenario<'e> {
    env: &'e TestEnv,
    queues: Vec<Value>,
    /// Jobs submitted (one by one, to the active queues) and settled before `jobs`; Kueue's
    /// Workloads for them are then live state for the prediction, as in `gkq plan`.
    before: Vec<Value>,
    /// Applied after `before` settled, replacing the queue objects of the same kind and name.
    released: Vec<Value>,
    jobs: Vec<Value>,
    arrival: Arrival,
}

impl<'e> Scenario<'e> {
    fn new(env: &'e TestEnv, queues: Vec<Value>, jobs: Vec<Value>, arrival: Arrival) -> Self {
        Scenario {
            env,
            queues,
            before: Vec::new(),
            released: Vec::new(),
            jobs,
            arrival,
        }
    }

    fn after(mut self, before: Vec<Value>) -> Self {
        self.before = before;
        self
    }

    fn released(mut self, released: Vec<Value>) -> Self {
        self.released = released;
        self
    }

    /// The queue objects once `released` replaced their namesakes.
    fn queues_after_release(&self) -> Vec<Value> {
        let same = |a: &Value, b: &Value| a["kind"] == b["kind"] && a["metadata"] == b["metadata"];
        self.queues
            .iter()
            .map(|q| {
                self.released
                    .iter()
                    .find(|r| same(r, q))
                    .unwrap_or(q)
                    .clone()
            })
            .collect()
    }

    /// Predicts, checks the prediction against `expected` (see [`summary`]), runs the
    /// scenario on the real Kueue and asserts that Kueue did what gkq predicted.
    async fn expect(self, expected: &[String]) {
        // The local target's simulated Kueue first (in process, no control plane): it must do
        // what the plan predicts too.
        if let Err(e) = self.run_local(expected) {
            panic!("on the local target: {e:#}");
        }
        let outcome = self.run(expected).await;
        // Stop every queue of the scenario, whatever happened: a StrictFIFO head that cannot
        // be admitted is retried in a hot loop (docs/kueue.md §3.5) that would slow the other
        // tests.
        for cq in self.queues.iter().filter(|o| o["kind"] == "ClusterQueue") {
            let _ = apply(&self.env.client, &self.env.namespace, &hold(cq, "Hold")).await;
        }
        if let Err(e) = outcome {
            panic!("{e:#}");
        }
    }

    async fn run(&self, expected: &[String]) -> Result<()> {
        let client = &self.env.client;
        let ns = self.env.namespace.as_str();
        let mut cluster_objects = self.queues.clone();
        if !self.before.is_empty() {
            ensure!(
                matches!(self.arrival, Arrival::OneByOne),
                "jobs submitted after others arrive one by one"
            );
            let before = predict_jobs(&self.queues, &self.before);
            for object in &self.queues {
                apply(client, ns, object).await?;
            }
            self.submit(&self.before).await?;
            self.settle(&before).await?;
            for object in &self.released {
                apply(client, ns, object).await?;
            }
            cluster_objects = self.queues_after_release();
            cluster_objects.extend(list(client, ns, KUEUE, "Workload").await?);
        }

        let prediction = predict_jobs(&cluster_objects, &self.jobs);
        prediction_is(&prediction, expected)?;

        if self.before.is_empty() {
            for object in &self.queues {
                match &self.arrival {
                    Arrival::Held if object["kind"] == "ClusterQueue" => {
                        apply(client, ns, &hold(object, "Hold")).await?
                    }
                    Arrival::FlavorLast(name) if is_flavor(object, name) => {}
                    _ => apply(client, ns, object).await?,
                }
            }
        }
        self.submit(&self.jobs).await?;
        match &self.arrival {
            Arrival::OneByOne => {}
            Arrival::Held => {
                for cq in self.queues.iter().filter(|o| o["kind"] == "ClusterQueue") {
                    apply(client, ns, &hold(cq, "None")).await?;
                }
            }
            Arrival::FlavorLast(name) => {
                let flavor = self
                    .queues
                    .iter()
                    .find(|o| is_flavor(o, name))
                    .with_context(|| format!("no ResourceFlavor {name} in the scenario"))?;
                apply(client, ns, flavor).await?;
            }
        }
        self.settle(&prediction).await
    }

    /// [`Scenario::run`] on the local target's simulated cluster (`gkq::local`): the same
    /// objects, arrivals and prediction, and the simulated Kueue's Workloads and ClusterQueue
    /// reservations must equal the prediction, as the real Kueue's must.
    fn run_local(&self, expected: &[String]) -> Result<()> {
        let ns = self.env.namespace.as_str();
        let mut local = LocalCluster::new(ns, &self.queues);
        let mut cluster_objects = self.queues.clone();
        if !self.before.is_empty() {
            let before = predict_jobs(&self.queues, &self.before);
            for object in &self.queues {
                local.apply(object)?;
            }
            for job in &self.before {
                local.submit(job)?;
            }
            local.agrees(&before, "the jobs submitted first")?;
            // Predicted from the Workloads as they were when the objects were released, as
            // `run` does (the simulated Kueue acts on the release at once).
            cluster_objects = self.queues_after_release();
            cluster_objects.extend(local.workloads().into_values());
            for object in &self.released {
                local.apply(object)?;
            }
        }
        let prediction = predict_jobs(&cluster_objects, &self.jobs);
        prediction_is(&prediction, expected)?;
        if self.before.is_empty() {
            for object in &self.queues {
                match &self.arrival {
                    Arrival::Held if object["kind"] == "ClusterQueue" => {
                        local.apply(&hold(object, "Hold"))?
                    }
                    Arrival::FlavorLast(name) if is_flavor(object, name) => {}
                    _ => local.apply(object)?,
                }
            }
        }
        for job in &self.jobs {
            local.submit(job)?;
        }
        match &self.arrival {
            Arrival::OneByOne => {}
            Arrival::Held => {
                for cq in self.queues.iter().filter(|o| o["kind"] == "ClusterQueue") {
                    local.apply(&hold(cq, "None"))?;
                }
            }
            Arrival::FlavorLast(name) => {
                let flavor = self
                    .queues
                    .iter()
                    .find(|o| is_flavor(o, name))
                    .with_context(|| format!("no ResourceFlavor {name} in the scenario"))?;
                local.apply(flavor)?;
            }
        }
        local.agrees(&prediction, "the scenario's jobs")
    }

    /// Creates `jobs` in order, each once the Workload of the one before exists and the clock
    /// has moved on to the next second.
    async fn submit(&self, jobs: &[Value]) -> Result<()> {
        for job in jobs {
            apply(&self.env.client, &self.env.namespace, job).await?;
            let name = job["metadata"]["name"].as_str().context("job name")?;
            wait_for_workload_then_next_second(&self.env.client, &self.env.namespace, name).await?;
        }
        Ok(())
    }

    /// Waits until Kueue's Workloads and ClusterQueue usage agree with `prediction`, and keep
    /// agreeing for [`STABLE_FOR`].
    async fn settle(&self, prediction: &Prediction) -> Result<()> {
        let client = &self.env.client;
        let ns = self.env.namespace.as_str();
        let all: Vec<Placement> = prediction
            .queued
            .iter()
            .chain(&prediction.placements)
            .chain(&prediction.preempted)
            .cloned()
            .collect();
        let began = Instant::now();
        let mut agreed_since: Option<Instant> = None;
        loop {
            let workloads = workloads_by_job(client, ns).await?;
            let mut differences = compare(&all, &workloads);
            differences.extend(not_yet_tried(&all, &workloads));
            differences.extend(usage_differences(client, &prediction.usage).await?);
            let now = Instant::now();
            if differences.is_empty() {
                let since = *agreed_since.get_or_insert(now);
                if now.duration_since(since) >= STABLE_FOR {
                    eprintln!(
                        "[{}] Kueue agrees with gkq after {:.1}s:\n  {}",
                        self.env.namespace,
                        since.duration_since(began).as_secs_f64(),
                        summaries(&all).join("\n  ")
                    );
                    return Ok(());
                }
            } else {
                agreed_since = None;
            }
            if now.duration_since(began) > SETTLE_TIMEOUT {
                bail!(
                    "after {SETTLE_TIMEOUT:?} Kueue still disagrees with gkq's prediction:\n  {}\n\
                     gkq predicted:\n  {}\nKueue did:\n  {}",
                    differences.join("\n  "),
                    summaries(&all).join("\n  "),
                    observed_summaries(&all, &workloads).join("\n  ")
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Kueue's API group, as the local store files objects.
const KUEUE_GROUP: &str = "kueue.x-k8s.io";

/// The local target's simulated cluster (`gkq::local`'s store and controllers, Kueue's among
/// them), driven by a clock of its own: each write at its own millisecond, each job in a second
/// of its own (Kueue's FIFO key), the controllers run after every write.
pub(crate) struct LocalCluster {
    store: gkq::local::store::Store,
    sim: gkq::local::controller::SimState,
    now: u64,
}

impl LocalCluster {
    /// A cluster where Kueue's manager runs, with `namespace` and the scenario's namespaces.
    pub(crate) fn new(namespace: &str, objects: &[Value]) -> LocalCluster {
        let mut store = gkq::local::store::Store::default();
        let start = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        for ns in gkq::local::store::initial_namespaces() {
            store.create(ns, "kube-apiserver", start);
        }
        let mut namespaces: Vec<Value> = objects
            .iter()
            .filter(|o| o["kind"] == "Namespace")
            .cloned()
            .collect();
        if !namespaces
            .iter()
            .any(|o| o["metadata"]["name"] == namespace)
        {
            namespaces.push(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace, "labels": {"kubernetes.io/metadata.name": namespace}}}));
        }
        for ns in namespaces {
            store.create(ns, "test", start);
        }
        store.create(
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": gkq::model::kueue_install::MANAGER_DEPLOYMENT,
                    "namespace": gkq::model::kueue_install::KUEUE_NAMESPACE},
                "spec": {"replicas": 1}}),
            "test",
            start,
        );
        let mut local = LocalCluster {
            store,
            sim: gkq::local::controller::SimState::default(),
            now: start,
        };
        local.reconcile(1);
        local
    }

    /// Moves the clock on by `ms` and runs the controllers to now.
    pub(crate) fn reconcile(&mut self, ms: u64) {
        self.now += ms;
        gkq::local::sim::reconcile(
            &mut self.store,
            &mut self.sim,
            &gkq::local::controller::SimSettings::default(),
            &[],
            "local",
            self.now,
        );
    }

    /// Server-side apply as the tests' field manager, then the controllers.
    pub(crate) fn apply(&mut self, object: &Value) -> Result<()> {
        if object["kind"] == "Namespace" {
            return Ok(());
        }
        let api_version = object["apiVersion"].as_str().context("apiVersion")?;
        let kind = object["kind"].as_str().context("kind")?;
        let info =
            self.store
                .discover(api_version, kind)
                .unwrap_or_else(|| gkq::kube::ResourceInfo {
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                    plural: format!("{}s", kind.to_lowercase()),
                    namespaced: object["metadata"]["namespace"].is_string(),
                });
        self.store
            .apply(
                &info,
                object,
                FIELD_MANAGER,
                false,
                false,
                self.now,
                &gkq::local::sim::admit,
            )
            .map_err(|e| anyhow::anyhow!("applying {kind} {}: {e}", object["metadata"]["name"]))?;
        self.reconcile(1);
        Ok(())
    }

    /// Deletes `object` (in `namespace` unless it names one), then the controllers.
    pub(crate) fn delete(&mut self, namespace: &str, object: &Value) -> Result<()> {
        let api_version = object["apiVersion"].as_str().context("apiVersion")?;
        let kind = object["kind"].as_str().context("kind")?;
        let name = object["metadata"]["name"].as_str().context("name")?;
        let namespaced = self
            .store
            .discover(api_version, kind)
            .map_or(object["metadata"]["namespace"].is_string(), |i| {
                i.namespaced
            });
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(namespace);
        let key = gkq::local::store::Key::new(api_version, kind, namespaced.then_some(ns), name);
        ensure!(
            self.store.delete(&key, false, self.now),
            "{kind} {name} is not in the simulated cluster"
        );
        self.reconcile(1);
        Ok(())
    }

    /// Submits a job; the next one comes a second later.
    pub(crate) fn submit(&mut self, job: &Value) -> Result<()> {
        self.apply(job)?;
        self.reconcile(1000);
        Ok(())
    }

    /// The Workloads by owning job name.
    pub(crate) fn workloads(&self) -> BTreeMap<String, Value> {
        self.store
            .of_kind(KUEUE_GROUP, "Workload")
            .filter_map(|w| {
                let owner = w.pointer("/metadata/ownerReferences/0/name")?.as_str()?;
                Some((owner.to_string(), w.clone()))
            })
            .collect()
    }

    /// The simulated Kueue's Workloads and reservations against `prediction`.
    fn agrees(&mut self, prediction: &Prediction, what: &str) -> Result<()> {
        self.reconcile(5000);
        let all: Vec<Placement> = prediction
            .queued
            .iter()
            .chain(&prediction.placements)
            .chain(&prediction.preempted)
            .cloned()
            .collect();
        let workloads = self.workloads();
        let mut differences = compare(&all, &workloads);
        let queues: BTreeMap<String, Value> = self
            .store
            .of_kind(KUEUE_GROUP, "ClusterQueue")
            .map(|q| (gkq::vocab::object::name_of(q).to_string(), q.clone()))
            .collect();
        differences.extend(reservation_differences(
            &prediction.usage,
            &queues,
            "the simulated Kueue",
        ));
        ensure!(
            differences.is_empty(),
            "for {what}, the simulated Kueue disagrees with gkq's prediction:\n  {}\n\
             gkq predicted:\n  {}\nthe simulated Kueue did:\n  {}",
            differences.join("\n  "),
            summaries(&all).join("\n  "),
            observed_summaries(&all, &workloads).join("\n  ")
        );
        Ok(())
    }
}

/// Checks that `prediction` is the scenario's `expected` one (see [`summary`]): the plan's jobs,
/// then live queued jobs that preempt, then the running jobs preempted.
fn prediction_is(prediction: &Prediction, expected: &[String]) -> Result<()> {
    let predicted: Vec<String> = summaries(&prediction.placements)
        .into_iter()
        .chain(summaries(
            &prediction
                .queued
                .iter()
                .filter(|p| !p.preempts.is_empty())
                .cloned()
                .collect::<Vec<_>>(),
        ))
        .chain(summaries(&prediction.preempted))
        .collect();
    ensure!(
        predicted == expected,
        "gkq's prediction is not the scenario's:\n  {}\nexpected:\n  {}",
        predicted.join("\n  "),
        expected.join("\n  ")
    );
    Ok(())
}

/// gkq's prediction for `jobs` (in submission order) on the cluster made of `objects`.
fn predict_jobs(objects: &[Value], jobs: &[Value]) -> Prediction {
    let cluster = Cluster::from_objects(objects).expect("cluster objects parse");
    let pending: Vec<PendingWorkload> = jobs
        .iter()
        .map(|j| PendingWorkload::from_object(j).expect("job parses"))
        .collect();
    predict(&cluster, &pending)
}

fn is_flavor(object: &Value, name: &str) -> bool {
    object["kind"] == "ResourceFlavor" && object["metadata"]["name"] == name
}

pub(crate) fn state_word(state: PlacementState) -> &'static str {
    match state {
        PlacementState::Admitted => "admitted",
        PlacementState::WaitingForAdmissionChecks => "waiting",
        PlacementState::Pending => "pending",
        PlacementState::Rejected => "rejected",
        PlacementState::Unmanaged => "unmanaged",
        PlacementState::Finished => "finished",
    }
}

/// `job: state podset=flavor ...`; flavors only when quota is reserved, and the pod count as
/// `podset×count` when it is not 1; then whom it preempts or who preempts it.
fn summary(placement: &Placement) -> String {
    let mut line = format!("{}: {}", placement.job, state_word(placement.state));
    for podset in &placement.podsets {
        if let Some(flavor) = &podset.flavor {
            line.push_str(&format!(" {}", podset.name));
            if podset.count != 1 {
                line.push_str(&format!("×{}", podset.count));
            }
            line.push_str(&format!("={flavor}"));
        }
    }
    if !placement.preempts.is_empty() {
        line.push_str(&format!(" (preempts {})", placement.preempts.join(", ")));
    }
    if let Some(preemptor) = &placement.preempted_by {
        line.push_str(&format!(" (preempted by {preemptor})"));
    }
    line
}

fn summaries(placements: &[Placement]) -> Vec<String> {
    placements.iter().map(summary).collect()
}

/// `apiVersion`/`kind` to the API resource, for the kinds the scenarios apply.
fn api_for(client: &Client, namespace: &str, object: &Value) -> Result<Api<DynamicObject>> {
    let api_version = object["apiVersion"].as_str().context("apiVersion")?;
    let kind = object["kind"].as_str().context("kind")?;
    let (plural, namespaced) = match kind {
        "Job" => ("jobs", true),
        "WorkloadPriorityClass" => ("workloadpriorityclasses", false),
        "PriorityClass" => ("priorityclasses", false),
        _ => {
            return support::control_plane::dynamic_api(client, api_version, kind, namespace);
        }
    };
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Ok(if namespaced {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    })
}

/// Server-side apply as the tests' field manager. Namespaces are only there for the
/// prediction (test_env made the test's own) and are not applied.
pub(crate) async fn apply(client: &Client, namespace: &str, object: &Value) -> Result<()> {
    if object["kind"] == "Namespace" {
        return Ok(());
    }
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or(namespace);
    let api = api_for(client, ns, object)?;
    let name = object["metadata"]["name"].as_str().context("name")?;
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("server-side apply of {} {name}", object["kind"]))?;
    Ok(())
}

/// A ClusterQueue with `stopPolicy` set.
pub(crate) fn hold(cq: &Value, policy: &str) -> Value {
    let mut cq = cq.clone();
    cq["spec"]["stopPolicy"] = json!(policy);
    cq
}

/// The Workloads of `namespace` by owning job name.
pub(crate) async fn workloads_by_job(
    client: &Client,
    namespace: &str,
) -> Result<BTreeMap<String, Value>> {
    let workloads = list(client, namespace, KUEUE, "Workload").await?;
    Ok(workloads
        .into_iter()
        .filter_map(|w| {
            let owner = w
                .pointer("/metadata/ownerReferences/0/name")?
                .as_str()?
                .to_string();
            Some((owner, w))
        })
        .collect())
}

/// Waits for the Workload of `job`, then until the wall clock is past the second it was
/// created in, so that the next job's Workload is strictly younger.
pub(crate) async fn wait_for_workload_then_next_second(
    client: &Client,
    namespace: &str,
    job: &str,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let created = loop {
        let workloads = workloads_by_job(client, namespace).await?;
        if let Some(w) = workloads.get(job) {
            let text = w["metadata"]["creationTimestamp"].as_str().unwrap_or("");
            break Timestamp::parse(text)
                .with_context(|| format!("Workload of {job}: creationTimestamp {text:?}"))?;
        }
        ensure!(
            Instant::now() < deadline,
            "Kueue made no Workload for job {job} within 60s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let next_second = Duration::from_secs(created.seconds as u64 + 1) + Duration::from_millis(20);
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    if let Some(wait) = next_second.checked_sub(now) {
        tokio::time::sleep(wait).await;
    }
    Ok(())
}

/// Differences between the prediction and Kueue's Workloads, one line each; empty when they
/// agree on every job: `Placement::differences` (state, flavor of every podset and resource),
/// plus the podsets themselves (names, order and pod counts of the Workload's spec).
fn compare(predicted: &[Placement], workloads: &BTreeMap<String, Value>) -> Vec<String> {
    let mut differences = Vec::new();
    for placement in predicted {
        let Some(workload) = workloads.get(&placement.job) else {
            differences.push(format!("{}: no Workload", placement.job));
            continue;
        };
        match observed_placement(workload) {
            Ok(observed) => {
                for difference in placement.differences(&observed) {
                    differences.push(format!("{}: {difference}", placement.job));
                }
            }
            Err(e) => differences.push(format!("{}: unreadable Workload: {e}", placement.job)),
        }
        let predicted_podsets: Vec<(String, i64)> = placement
            .podsets
            .iter()
            .map(|p| (p.name.clone(), i64::from(p.count)))
            .collect();
        let workload_podsets: Vec<(String, i64)> = workload["spec"]["podSets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or_default().to_string(),
                    p["count"].as_i64().unwrap_or(-1),
                )
            })
            .collect();
        if predicted_podsets != workload_podsets {
            differences.push(format!(
                "{}: podsets predicted {predicted_podsets:?}, the Workload has {workload_podsets:?}",
                placement.job
            ));
        }
    }
    differences
}

/// Jobs predicted to pend that Kueue has not tried to admit yet. A pending Workload counts as
/// tried once the scheduler has written `QuotaReserved=False` with reason `Pending`; a
/// condition left from a held or inactive queue says `Inadmissible` instead. Exempt:
/// * jobs gkq predicts to wait behind a StrictFIFO head, which Kueue never pops (§3.5);
/// * jobs of a queue gkq predicts blocked (a missing or inactive LocalQueue or ClusterQueue),
///   which Kueue marks `Inadmissible`;
/// * a Workload identical to one that was tried and failed (same queue, priority and
///   podsets), which Kueue parks with it without a condition (SchedulingEquivalenceHashing,
///   docs/kueue.md §3.6).
fn not_yet_tried(predicted: &[Placement], workloads: &BTreeMap<String, Value>) -> Vec<String> {
    let tried_with = |workload: &Value, reason: &str| {
        condition(workload, "QuotaReserved")
            .is_some_and(|c| c["status"] == "False" && c["reason"] == reason)
    };
    // What SchedulingEquivalenceHashing compares (pod template metadata aside: the Job's
    // labels differ from job to job).
    let equivalence = |w: &Value| {
        let podsets: Vec<(Value, Value, Value)> = w["spec"]["podSets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p["name"].clone(),
                    p["count"].clone(),
                    p["template"]["spec"].clone(),
                )
            })
            .collect();
        (
            w["spec"]["queueName"].clone(),
            w["spec"]["priority"].clone(),
            podsets,
        )
    };
    predicted
        .iter()
        .filter(|p| p.state == PlacementState::Pending)
        .filter(|p| {
            let reason = p.reason.as_deref().unwrap_or("");
            if reason.starts_with("queued behind") {
                return false;
            }
            let Some(workload) = workloads.get(&p.job) else {
                return true;
            };
            if reason.starts_with("LocalQueue ") || reason.starts_with("ClusterQueue ") {
                return !tried_with(workload, "Inadmissible");
            }
            if tried_with(workload, "Pending") {
                return false;
            }
            let parked_with_a_twin = condition(workload, "QuotaReserved").is_none()
                && workloads.iter().any(|(job, other)| {
                    *job != p.job
                        && tried_with(other, "Pending")
                        && equivalence(other) == equivalence(workload)
                });
            !parked_with_a_twin
        })
        .map(|p| format!("{}: Kueue has not tried it yet", p.job))
        .collect()
}

/// Quota in use per ClusterQueue, flavor and resource: gkq's prediction (live usage included)
/// against the ClusterQueue's `status.flavorsReservation`. This checks the podsets' requests
/// and counts as Kueue computed them.
async fn usage_differences(client: &Client, usage: &[FlavorUsage]) -> Result<Vec<String>> {
    let mut queues: BTreeMap<String, Value> = BTreeMap::new();
    for row in usage {
        if !queues.contains_key(&row.cluster_queue) {
            let cq = get(client, "", KUEUE, "ClusterQueue", &row.cluster_queue).await?;
            queues.insert(row.cluster_queue.clone(), cq);
        }
    }
    Ok(reservation_differences(usage, &queues, "Kueue"))
}

/// [`usage_differences`] against the ClusterQueues `queues` (by name) as `by` reserves them.
fn reservation_differences(
    usage: &[FlavorUsage],
    queues: &BTreeMap<String, Value>,
    by: &str,
) -> Vec<String> {
    let mut differences = Vec::new();
    for row in usage {
        let observed = queues
            .get(&row.cluster_queue)
            .into_iter()
            .flat_map(|q| {
                q["status"]["flavorsReservation"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .filter(|f| f["name"] == row.flavor.as_str())
            .flat_map(|f| f["resources"].as_array().into_iter().flatten())
            .find(|r| r["name"] == row.resource.as_str())
            .and_then(|r| Quantity::from_json(&r["total"]).ok())
            .unwrap_or(Quantity::parse("0").expect("zero"));
        if observed != row.total() {
            differences.push(format!(
                "ClusterQueue {} flavor {} {}: predicted {} in use, {by} reserves {observed}",
                row.cluster_queue,
                row.flavor,
                row.resource,
                row.total()
            ));
        }
    }
    differences
}

/// Kueue's side, one line per job, for failure messages.
fn observed_summaries(predicted: &[Placement], workloads: &BTreeMap<String, Value>) -> Vec<String> {
    predicted
        .iter()
        .map(|p| match workloads.get(&p.job).map(observed_placement) {
            None => format!("{}: no Workload", p.job),
            Some(Err(e)) => format!("{}: {e}", p.job),
            Some(Ok(observed)) => {
                let reason = observed.reason.clone().unwrap_or_default();
                format!("{} ({reason})", summary(&observed))
            }
        })
        .collect()
}

// ---------------------------------------------------------------- scenarios

/// The walk-through: job 1's TPU workers on on-demand (admitted), job 2's on dws (quota
/// reserved, waiting for the ProvisioningRequest), heads and submitters on default-cpu.
#[tokio::test]
async fn seed() {
    let env = test_env("sbs-seed").await;
    let (objects, v) = seed_objects(&env, "sbs-seed");
    let (jobs, queues): (Vec<Value>, Vec<Value>) =
        objects.into_iter().partition(|o| o["kind"] == "RayJob");
    let (cpu, od, dws) = (&v["CPU"], &v["ONDEMAND"], &v["DWS"]);
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("rayjob-tpu-v6e-dws-1: admitted head={cpu} tpu-group×4={od} submitter={cpu}"),
            format!("rayjob-tpu-v6e-dws-2: waiting head={cpu} tpu-group×4={dws} submitter={cpu}"),
        ])
        .await;
}

/// Two more runs of the seed job: the third also waits for DWS; the fourth pends because four
/// heads (2.5 cpu with the autoscaler) and submitters exhaust default-cpu, the only flavor the
/// head's node selector allows.
#[tokio::test]
async fn third_and_fourth_seed_jobs() {
    let env = test_env("sbs-third").await;
    let (objects, v) = seed_objects(&env, "sbs-third");
    let (mut jobs, queues): (Vec<Value>, Vec<Value>) =
        objects.into_iter().partition(|o| o["kind"] == "RayJob");
    jobs.push(seed_job_copy(&jobs, 3));
    jobs.push(seed_job_copy(&jobs, 4));
    let (cpu, od, dws) = (&v["CPU"], &v["ONDEMAND"], &v["DWS"]);
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("rayjob-tpu-v6e-dws-1: admitted head={cpu} tpu-group×4={od} submitter={cpu}"),
            format!("rayjob-tpu-v6e-dws-2: waiting head={cpu} tpu-group×4={dws} submitter={cpu}"),
            format!("rayjob-tpu-v6e-dws-3: waiting head={cpu} tpu-group×4={dws} submitter={cpu}"),
            "rayjob-tpu-v6e-dws-4: pending".to_string(),
        ])
        .await;
}

/// Quota exhaustion with batch Jobs: the first flavor fills up, later jobs fall back to the
/// second, a job that fits neither pends, and (BestEffortFIFO) a smaller one behind it still
/// gets in.
#[tokio::test]
async fn quota_exhaustion_falls_back_then_pends() {
    let env = test_env("sbs-exhaust").await;
    let ns = env.namespace.as_str();
    let (a, b, cq) = (
        unique_name("sbs-exhaust-a"),
        unique_name("sbs-exhaust-b"),
        unique_name("sbs-exhaust-cq"),
    );
    let queues = vec![
        pool_flavor(&a, "pool-a"),
        pool_flavor(&b, "pool-b"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu", "memory"],
                &[
                    (&a, &[("cpu", "4"), ("memory", "8Gi")]),
                    (&b, &[("cpu", "6"), ("memory", "12Gi")]),
                ],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let jobs = vec![
        batch_job(ns, "j1", "lq", 2, &[("cpu", "1"), ("memory", "1Gi")]),
        batch_job(ns, "j2", "lq", 1, &[("cpu", "3"), ("memory", "1Gi")]),
        batch_job(ns, "j3", "lq", 2, &[("cpu", "1"), ("memory", "1Gi")]),
        batch_job(ns, "j4", "lq", 1, &[("cpu", "4"), ("memory", "1Gi")]),
        batch_job(ns, "j5", "lq", 3, &[("cpu", "1"), ("memory", "1Gi")]),
        // j4's twin: Kueue parks it with j4 without trying it (docs/kueue.md §3.6).
        batch_job(ns, "j6", "lq", 1, &[("cpu", "4"), ("memory", "1Gi")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("j1: admitted main×2={a}"),
            format!("j2: admitted main={b}"),
            format!("j3: admitted main×2={a}"),
            "j4: pending".to_string(),
            format!("j5: admitted main×3={b}"),
            "j6: pending".to_string(),
        ])
        .await;
}

/// Node selectors and required node affinity are matched against each flavor's own labels:
/// a selector for pool b skips flavor a, `NotIn` does too, a selector key no flavor carries
/// never excludes, and a selector no flavor satisfies leaves the job pending.
#[tokio::test]
async fn node_selectors_skip_flavors() {
    let env = test_env("sbs-selector").await;
    let ns = env.namespace.as_str();
    let (a, b, cq) = (
        unique_name("sbs-sel-a"),
        unique_name("sbs-sel-b"),
        unique_name("sbs-sel-cq"),
    );
    let queues = vec![
        flavor(
            &a,
            json!({"cloud.google.com/gke-nodepool": "pool-a", "tier": "spot"}),
        ),
        pool_flavor(&b, "pool-b"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu"],
                &[(&a, &[("cpu", "10")]), (&b, &[("cpu", "10")])],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "1")]);
    let affinity = |expressions: Value| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]
        }}})
    };
    let jobs = vec![
        with_pod(
            job("to-b"),
            "nodeSelector",
            json!({"cloud.google.com/gke-nodepool": "pool-b"}),
        ),
        with_pod(
            job("not-in-a"),
            "affinity",
            affinity(json!([
                {"key": "cloud.google.com/gke-nodepool", "operator": "NotIn", "values": ["pool-a"]}
            ])),
        ),
        with_pod(
            job("unknown-key"),
            "nodeSelector",
            json!({"cloud.google.com/gke-tpu-topology": "4x4"}),
        ),
        // `tier` is a key of a only: b ignores it, a does not match.
        with_pod(job("not-spot"), "nodeSelector", json!({"tier": "standard"})),
        with_pod(
            job("nowhere"),
            "nodeSelector",
            json!({"cloud.google.com/gke-nodepool": "pool-c"}),
        ),
        with_pod(
            job("spot-exists"),
            "affinity",
            affinity(json!([{"key": "tier", "operator": "Exists"}])),
        ),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("to-b: admitted main={b}"),
            format!("not-in-a: admitted main={b}"),
            format!("unknown-key: admitted main={a}"),
            format!("not-spot: admitted main={b}"),
            "nowhere: pending".to_string(),
            format!("spot-exists: admitted main={a}"),
        ])
        .await;
}

/// Untolerated NoSchedule/NoExecute taints skip a flavor; a flavor's own tolerations count; a
/// toleration with the wrong value does not help; PreferNoSchedule is ignored.
#[tokio::test]
async fn taints_skip_flavors() {
    let env = test_env("sbs-taint").await;
    let ns = env.namespace.as_str();
    let (reserved, dedicated, soft, plain, cq) = (
        unique_name("sbs-taint-reserved"),
        unique_name("sbs-taint-dedicated"),
        unique_name("sbs-taint-soft"),
        unique_name("sbs-taint-plain"),
        unique_name("sbs-taint-cq"),
    );
    let mut reserved_flavor = pool_flavor(&reserved, "reserved");
    reserved_flavor["spec"]["nodeTaints"] =
        json!([{"key": "reserved", "value": "true", "effect": "NoSchedule"}]);
    let mut dedicated_flavor = pool_flavor(&dedicated, "dedicated");
    dedicated_flavor["spec"]["nodeTaints"] =
        json!([{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]);
    dedicated_flavor["spec"]["tolerations"] =
        json!([{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}]);
    let mut soft_flavor = pool_flavor(&soft, "soft");
    soft_flavor["spec"]["nodeTaints"] =
        json!([{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]);
    let queues = vec![
        reserved_flavor,
        dedicated_flavor,
        soft_flavor,
        pool_flavor(&plain, "plain"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu"],
                &[
                    (&reserved, &[("cpu", "10")]),
                    (&dedicated, &[("cpu", "2")]),
                    (&soft, &[("cpu", "1")]),
                    (&plain, &[("cpu", "10")]),
                ],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let job = |name: &str, cpu: &str| batch_job(ns, name, "lq", 1, &[("cpu", cpu)]);
    let jobs = vec![
        job("plain", "2"),
        with_pod(
            job("tolerates", "2"),
            "tolerations",
            json!([{"key": "reserved", "operator": "Exists", "effect": "NoSchedule"}]),
        ),
        with_pod(
            job("wrong-value", "1"),
            "tolerations",
            json!([{"key": "reserved", "operator": "Equal", "value": "false", "effect": "NoSchedule"}]),
        ),
        job("last", "1"),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("plain: admitted main={dedicated}"),
            format!("tolerates: admitted main={reserved}"),
            format!("wrong-value: admitted main={soft}"),
            format!("last: admitted main={plain}"),
        ])
        .await;
}

/// Two ClusterQueues in a cohort, activated together. team-a (x: 4 cpu, borrowingLimit 2; then
/// y) borrows from team-b's unused x: a job that fits x only by borrowing stops the search
/// there (whenCanBorrow MayStopSearch); the next one would exceed nominal + borrowingLimit and
/// goes to y; team-b's second job fits its own nominal quota but not what the cohort has left,
/// and with preemption off it pends.
#[tokio::test]
async fn cohort_borrowing_with_borrowing_limit() {
    let env = test_env("sbs-borrow").await;
    let ns = env.namespace.as_str();
    let (x, y, cohort, team_a, team_b) = (
        unique_name("sbs-borrow-x"),
        unique_name("sbs-borrow-y"),
        unique_name("sbs-borrow-cohort"),
        unique_name("sbs-borrow-a"),
        unique_name("sbs-borrow-b"),
    );
    let queues = vec![
        pool_flavor(&y, "pool-y"),
        cluster_queue(
            &team_a,
            vec![json!({"coveredResources": ["cpu"], "flavors": [
                {"name": x, "resources": [{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}]},
                {"name": y, "resources": [{"name": "cpu", "nominalQuota": "10"}]}
            ]})],
            json!({"cohortName": cohort}),
        ),
        cluster_queue(
            &team_b,
            vec![group(&["cpu"], &[(&x, &[("cpu", "6")])])],
            json!({"cohortName": cohort}),
        ),
        local_queue(ns, "lq-a", &team_a),
        local_queue(ns, "lq-b", &team_b),
        pool_flavor(&x, "pool-x"),
    ];
    let jobs = vec![
        batch_job(ns, "a1", "lq-a", 1, &[("cpu", "5")]),
        batch_job(ns, "a2", "lq-a", 1, &[("cpu", "2")]),
        batch_job(ns, "b1", "lq-b", 1, &[("cpu", "2")]),
        batch_job(ns, "b2", "lq-b", 1, &[("cpu", "4")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::FlavorLast(x.clone()))
        .expect(&[
            format!("a1: admitted main={x}"),
            format!("a2: admitted main={y}"),
            format!("b1: admitted main={x}"),
            "b2: pending".to_string(),
        ])
        .await;
}

/// lendingLimit keeps part of a queue's quota out of the cohort: team-b (x: 2 cpu) can borrow
/// only the 2 cpu team-a (x: 6 cpu, lendingLimit 2) lends; once it has, team-a's own second
/// job no longer fits and (no preemption) pends.
#[tokio::test]
async fn cohort_lending_limit() {
    let env = test_env("sbs-lend").await;
    let ns = env.namespace.as_str();
    let (x, cohort, team_a, team_b) = (
        unique_name("sbs-lend-x"),
        unique_name("sbs-lend-cohort"),
        unique_name("sbs-lend-a"),
        unique_name("sbs-lend-b"),
    );
    let queues = vec![
        cluster_queue(
            &team_a,
            vec![json!({"coveredResources": ["cpu"], "flavors": [
                {"name": x, "resources": [{"name": "cpu", "nominalQuota": "6", "lendingLimit": "2"}]}
            ]})],
            json!({"cohortName": cohort}),
        ),
        cluster_queue(
            &team_b,
            vec![group(&["cpu"], &[(&x, &[("cpu", "2")])])],
            json!({"cohortName": cohort}),
        ),
        local_queue(ns, "lq-a", &team_a),
        local_queue(ns, "lq-b", &team_b),
        pool_flavor(&x, "pool-x"),
    ];
    let jobs = vec![
        batch_job(ns, "a1", "lq-a", 1, &[("cpu", "4")]),
        batch_job(ns, "a2", "lq-a", 1, &[("cpu", "2")]),
        batch_job(ns, "b1", "lq-b", 1, &[("cpu", "3")]),
        batch_job(ns, "b2", "lq-b", 1, &[("cpu", "2")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::FlavorLast(x.clone()))
        .expect(&[
            format!("a1: admitted main={x}"),
            "a2: pending".to_string(),
            format!("b1: admitted main={x}"),
            "b2: pending".to_string(),
        ])
        .await;
}

/// Priorities, jobs submitted while the queue is held: the high-priority job (a
/// WorkloadPriorityClass), submitted last, is admitted first and takes flavor a; a job whose
/// pod template names a PriorityClass comes next; the two low ones follow in creation order;
/// the job without priority (0) is left pending.
#[tokio::test]
async fn priorities_order_the_queue() {
    let env = test_env("sbs-prio").await;
    let ns = env.namespace.as_str();
    let (a, b, cq, low, high, pc) = (
        unique_name("sbs-prio-a"),
        unique_name("sbs-prio-b"),
        unique_name("sbs-prio-cq"),
        unique_name("sbs-prio-low"),
        unique_name("sbs-prio-high"),
        unique_name("sbs-prio-pc"),
    );
    let queues = vec![
        workload_priority_class(&low, 100),
        workload_priority_class(&high, 1000),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": pc}, "value": 500}),
        pool_flavor(&a, "pool-a"),
        pool_flavor(&b, "pool-b"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu"],
                &[(&a, &[("cpu", "4")]), (&b, &[("cpu", "4")])],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let job = |name: &str, cpu: &str| batch_job(ns, name, "lq", 1, &[("cpu", cpu)]);
    let jobs = vec![
        with_label(job("low-1", "2"), PRIORITY_LABEL, &low),
        job("none", "2"),
        with_label(job("low-2", "1"), PRIORITY_LABEL, &low),
        with_pod(job("pod-class", "1"), "priorityClassName", json!(pc)),
        with_label(job("high", "3"), PRIORITY_LABEL, &high),
    ];
    Scenario::new(&env, queues, jobs, Arrival::Held)
        .expect(&[
            format!("low-1: admitted main={b}"),
            "none: pending".to_string(),
            format!("low-2: admitted main={b}"),
            format!("pod-class: admitted main={a}"),
            format!("high: admitted main={a}"),
        ])
        .await;
}

/// StrictFIFO head-of-line blocking beside BestEffortFIFO, same jobs: in the StrictFIFO queue
/// the head that does not fit blocks a smaller job behind it that would; in the
/// BestEffortFIFO queue the smaller job gets in.
#[tokio::test]
async fn strict_fifo_blocks_best_effort_does_not() {
    let env = test_env("sbs-strict").await;
    let ns = env.namespace.as_str();
    let (strict_flavor, best_flavor, strict, best) = (
        unique_name("sbs-strict-f"),
        unique_name("sbs-best-f"),
        unique_name("sbs-strict-cq"),
        unique_name("sbs-best-cq"),
    );
    let queues = vec![
        pool_flavor(&strict_flavor, "pool"),
        pool_flavor(&best_flavor, "pool"),
        cluster_queue(
            &strict,
            vec![group(&["cpu"], &[(&strict_flavor, &[("cpu", "4")])])],
            json!({"queueingStrategy": "StrictFIFO"}),
        ),
        cluster_queue(
            &best,
            vec![group(&["cpu"], &[(&best_flavor, &[("cpu", "4")])])],
            json!({"queueingStrategy": "BestEffortFIFO"}),
        ),
        local_queue(ns, "strict", &strict),
        local_queue(ns, "best", &best),
    ];
    let mut jobs = Vec::new();
    for queue in ["strict", "best"] {
        for (name, cpu) in [("first", "3"), ("blocked", "2"), ("small", "1")] {
            jobs.push(batch_job(
                ns,
                &format!("{queue}-{name}"),
                queue,
                1,
                &[("cpu", cpu)],
            ));
        }
    }
    Scenario::new(&env, queues, jobs, Arrival::Held)
        .expect(&[
            format!("strict-first: admitted main={strict_flavor}"),
            "strict-blocked: pending".to_string(),
            "strict-small: pending".to_string(),
            format!("best-first: admitted main={best_flavor}"),
            "best-blocked: pending".to_string(),
            format!("best-small: admitted main={best_flavor}"),
        ])
        .await;
}

/// Jobs that fit nowhere pend: one above every flavor's quota, one asking for a resource no
/// resource group covers, one whose node selector no flavor matches; a job behind them still
/// gets in.
#[tokio::test]
async fn jobs_that_fit_nowhere_pend() {
    let env = test_env("sbs-nowhere").await;
    let ns = env.namespace.as_str();
    let (a, b, cq) = (
        unique_name("sbs-nowhere-a"),
        unique_name("sbs-nowhere-b"),
        unique_name("sbs-nowhere-cq"),
    );
    let queues = vec![
        pool_flavor(&a, "pool-a"),
        pool_flavor(&b, "pool-b"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu"],
                &[(&a, &[("cpu", "4")]), (&b, &[("cpu", "8")])],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let jobs = vec![
        batch_job(ns, "too-big", "lq", 3, &[("cpu", "3")]),
        batch_job(ns, "gpu", "lq", 1, &[("cpu", "1"), ("nvidia.com/gpu", "1")]),
        with_pod(
            batch_job(ns, "no-pool", "lq", 1, &[("cpu", "1")]),
            "nodeSelector",
            json!({"cloud.google.com/gke-nodepool": "pool-c"}),
        ),
        batch_job(ns, "fits", "lq", 2, &[("cpu", "3")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            "too-big: pending".to_string(),
            "gpu: pending".to_string(),
            "no-pool: pending".to_string(),
            format!("fits: admitted main×2={b}"),
        ])
        .await;
}

/// Split resource groups: cpu/memory from one group (one flavor), TPUs from another (on-demand,
/// then dws with the ProvisioningRequest check on it). The seed's RayJobs get their workers'
/// cpu/memory from the cpu flavor and chips from on-demand, then dws; the check applies to
/// job 2 only, because only its admission touches dws.
#[tokio::test]
async fn split_resource_groups() {
    let env = test_env("sbs-split").await;
    let (objects, v) = seed_objects(&env, "sbs-split");
    let (cpu, od, dws) = (&v["CPU"], &v["ONDEMAND"], &v["DWS"]);
    let (jobs, mut queues): (Vec<Value>, Vec<Value>) =
        objects.into_iter().partition(|o| o["kind"] == "RayJob");
    let cq = queues
        .iter_mut()
        .find(|o| o["kind"] == "ClusterQueue")
        .unwrap();
    cq["spec"]["resourceGroups"] = json!([
        group(
            &["cpu", "memory"],
            &[(cpu, &[("cpu", "100"), ("memory", "200Gi")])]
        ),
        group(
            &["google.com/tpu"],
            &[
                (od, &[("google.com/tpu", "16")]),
                (dws, &[("google.com/tpu", "64")])
            ]
        ),
    ]);
    // A podset's flavors are listed in resource-name order: cpu, google.com/tpu, memory.
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!(
                "rayjob-tpu-v6e-dws-1: admitted head={cpu} tpu-group×4={cpu}+{od} submitter={cpu}"
            ),
            format!(
                "rayjob-tpu-v6e-dws-2: waiting head={cpu} tpu-group×4={cpu}+{dws} submitter={cpu}"
            ),
        ])
        .await;
}

/// A RayJob whose head fits flavor a and stops there, while the workers then find a too small
/// with the head in it and b too small anyway. Kueue retries at once and resumes the head's
/// scan after a (FlavorFungibilityPreserveScanProgress): the head moves to b and the workers
/// fit a, which a single fresh scan would never find.
#[tokio::test]
async fn resumed_flavor_scan_admits_what_a_fresh_scan_cannot() {
    let env = test_env("sbs-resume").await;
    let ns = env.namespace.as_str();
    let (a, b, cq) = (
        unique_name("sbs-resume-a"),
        unique_name("sbs-resume-b"),
        unique_name("sbs-resume-cq"),
    );
    let queues = vec![
        pool_flavor(&a, "pool-a"),
        pool_flavor(&b, "pool-b"),
        cluster_queue(
            &cq,
            vec![group(
                &["memory"],
                &[(&a, &[("memory", "6Gi")]), (&b, &[("memory", "3Gi")])],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let ray_job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"namespace": ns, "name": "resume", "labels": {QUEUE_LABEL: "lq"}},
        "spec": {
            "shutdownAfterJobFinishes": true,
            "submissionMode": "HTTPMode",
            "entrypoint": "python -c pass",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "h", "image": "rayproject/ray:2.53.0-py311",
                     "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}}
                ]}}},
                "workerGroupSpecs": [{
                    "groupName": "workers", "replicas": 3, "minReplicas": 3, "maxReplicas": 3,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [
                        {"name": "w", "image": "rayproject/ray:2.53.0-py311",
                         "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}}}
                    ]}}
                }]
            }
        }
    });
    let jobs = vec![ray_job];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[format!("resume: admitted head={b} workers×3={a}")])
        .await;
}

/// How Kueue counts a pod's requests, checked through the flavors chosen at a quota boundary
/// and the quota it reserves: an init container larger than the app containers, a sidecar
/// (restartable init container) running beside a later init container, limits standing in for
/// missing requests, pod-level resources, and requests below limits.
#[tokio::test]
async fn pod_requests_as_kueue_counts_them() {
    let env = test_env("sbs-requests").await;
    let ns = env.namespace.as_str();
    let (small, big, cq) = (
        unique_name("sbs-req-small"),
        unique_name("sbs-req-big"),
        unique_name("sbs-req-cq"),
    );
    let queues = vec![
        pool_flavor(&small, "small"),
        pool_flavor(&big, "big"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu", "memory"],
                &[
                    (&small, &[("cpu", "3500m"), ("memory", "4Gi")]),
                    (&big, &[("cpu", "100"), ("memory", "100Gi")]),
                ],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "1"), ("memory", "1Gi")]);
    let init = |name: &str, cpu: &str, memory: &str| {
        json!({"name": name, "image": "busybox",
               "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}})
    };
    let mut sidecar = init("proxy", "1", "1Gi");
    sidecar["restartPolicy"] = json!("Always");
    let jobs = vec![
        // max(1, 3) cpu: 3 of small's 3.5.
        with_pod(
            job("init-bigger"),
            "initContainers",
            json!([init("warmup", "3", "512Mi")]),
        ),
        // The sidecar runs beside `setup` (1 + 2.5) and beside the app (1 + 1): 3.5 cpu, which
        // no longer fits small.
        with_pod(
            job("sidecar"),
            "initContainers",
            json!([sidecar, init("setup", "2500m", "256Mi")]),
        ),
        // Limits only: 500m, exactly what small has left.
        with_pod(
            job("limits-only"),
            "containers",
            json!([{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}]),
        ),
        // Pod-level requests win over the containers' sum.
        with_pod(
            job("pod-level"),
            "resources",
            json!({"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}),
        ),
        // Requests count, not limits: 250m (but small is full).
        with_pod(
            job("below-limits"),
            "containers",
            json!([{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}}}]),
        ),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("init-bigger: admitted main={small}"),
            format!("sidecar: admitted main={big}"),
            format!("limits-only: admitted main={small}"),
            format!("pod-level: admitted main={big}"),
            format!("below-limits: admitted main={big}"),
        ])
        .await;
}

/// RayJob podsets as Kueue builds them, checked through the Workload's podsets (names, order,
/// counts) and the quota reserved: GCS fault tolerance (annotation, or options) raising the
/// head to KubeRay's Redis-cleanup requests, the SidecarMode submitter and a configured
/// autoscaler inside the head, worker groups of `replicas × numOfHosts` pods (lower-cased
/// names; omitted replicas are the CRD's 0), and a custom K8sJobMode submitter template.
#[tokio::test]
async fn ray_job_podsets_as_kueue_builds_them() {
    let env = test_env("sbs-ray").await;
    let ns = env.namespace.as_str();
    let (f, cq) = (unique_name("sbs-ray-f"), unique_name("sbs-ray-cq"));
    let queues = vec![
        pool_flavor(&f, "pool"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu", "memory"],
                &[(&f, &[("cpu", "100"), ("memory", "200Gi")])],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let container = |name: &str, cpu: &str, memory: &str| {
        json!({"name": name, "image": "rayproject/ray:2.53.0-py311",
               "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": "2", "memory": "2Gi"}}})
    };
    let group_spec = |name: &str, replicas: Option<i64>, hosts: i64, cpu: &str| {
        let mut spec = json!({
            "groupName": name, "numOfHosts": hosts, "minReplicas": 0, "maxReplicas": 8,
            "rayStartParams": {},
            "template": {"spec": {"containers": [container("ray-worker", cpu, "1Gi")]}}
        });
        if let Some(replicas) = replicas {
            spec["replicas"] = json!(replicas);
        }
        spec
    };
    let sidecar_ft = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"namespace": ns, "name": "sidecar-ft", "labels": {QUEUE_LABEL: "lq"},
                     "annotations": {"ray.io/ft-enabled": "true", "kueue.x-k8s.io/elastic-job": "true"}},
        "spec": {
            "shutdownAfterJobFinishes": true,
            "submissionMode": "SidecarMode",
            "entrypoint": "python -c pass",
            "rayClusterSpec": {
                "enableInTreeAutoscaling": true,
                "autoscalerOptions": {"resources": {"requests": {"cpu": "300m", "memory": "300Mi"},
                                                    "limits": {"cpu": "300m", "memory": "300Mi"}}},
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                    "containers": [container("ray-head", "100m", "128Mi")]
                }}},
                "workerGroupSpecs": [
                    group_spec("Small", Some(2), 2, "1"),
                    group_spec("idle", None, 1, "1"),
                    group_spec("single", Some(3), 1, "500m"),
                ]
            }
        }
    });
    let custom_submitter = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"namespace": ns, "name": "custom-submitter", "labels": {QUEUE_LABEL: "lq"}},
        "spec": {
            "shutdownAfterJobFinishes": true,
            "entrypoint": "python -c pass",
            "submitterPodTemplate": {"spec": {"restartPolicy": "Never", "containers": [
                container("ray-job-submitter", "300m", "100Mi")
            ]}},
            "rayClusterSpec": {
                "gcsFaultToleranceOptions": {"redisAddress": "redis:6379"},
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                    "containers": [container("ray-head", "1", "128Mi")]
                }}},
                "workerGroupSpecs": [group_spec("workers", Some(1), 4, "1500m")]
            }
        }
    });
    Scenario::new(
        &env,
        queues,
        vec![sidecar_ft, custom_submitter],
        Arrival::OneByOne,
    )
    .expect(&[
        format!("sidecar-ft: admitted head={f} small×4={f} idle×0={f} single×3={f}"),
        format!("custom-submitter: admitted head={f} workers×4={f} submitter={f}"),
    ])
    .await;
}

/// Nested cohorts made of Cohort objects: a root with quota of its own, a child cohort
/// holding team-a and team-b, and team-c directly under the root, all activated together.
/// Kueue's first cycle takes the heads that do not borrow first (team-b's, then team-c's);
/// team-a's head then no longer fits what the tree has left and pends, and team-a's second,
/// smaller job borrows what remains.
#[tokio::test]
async fn nested_cohorts() {
    let env = test_env("sbs-nested").await;
    let ns = env.namespace.as_str();
    let (x, root, child, team_a, team_b, team_c) = (
        unique_name("sbs-nest-x"),
        unique_name("sbs-nest-root"),
        unique_name("sbs-nest-child"),
        unique_name("sbs-nest-a"),
        unique_name("sbs-nest-b"),
        unique_name("sbs-nest-c"),
    );
    let cpu = |nominal: &str| vec![group(&["cpu"], &[(&x, &[("cpu", nominal)])])];
    let queues = vec![
        json!({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": root},
               "spec": {"resourceGroups": cpu("2")}}),
        json!({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": child},
               "spec": {"parentName": root}}),
        cluster_queue(&team_a, cpu("2"), json!({"cohortName": child})),
        cluster_queue(&team_b, cpu("2"), json!({"cohortName": child})),
        cluster_queue(&team_c, cpu("2"), json!({"cohortName": root})),
        local_queue(ns, "lq-a", &team_a),
        local_queue(ns, "lq-b", &team_b),
        local_queue(ns, "lq-c", &team_c),
        pool_flavor(&x, "pool-x"),
    ];
    let jobs = vec![
        batch_job(ns, "a1", "lq-a", 1, &[("cpu", "5")]),
        batch_job(ns, "b1", "lq-b", 1, &[("cpu", "2")]),
        batch_job(ns, "c1", "lq-c", 1, &[("cpu", "2")]),
        batch_job(ns, "a2", "lq-a", 1, &[("cpu", "3")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::FlavorLast(x.clone()))
        .expect(&[
            "a1: pending".to_string(),
            format!("b1: admitted main={x}"),
            format!("c1: admitted main={x}"),
            format!("a2: admitted main={x}"),
        ])
        .await;
}

/// whenCanBorrow: TryNextFlavor: a job that fits flavor x only by borrowing from the cohort
/// takes flavor y, where it fits without borrowing; when y is too small it comes back to x
/// and borrows.
#[tokio::test]
async fn when_can_borrow_try_next_flavor() {
    let env = test_env("sbs-trynext").await;
    let ns = env.namespace.as_str();
    let (x, y, cohort, team_a, team_b) = (
        unique_name("sbs-trynext-x"),
        unique_name("sbs-trynext-y"),
        unique_name("sbs-trynext-cohort"),
        unique_name("sbs-trynext-a"),
        unique_name("sbs-trynext-b"),
    );
    let queues = vec![
        pool_flavor(&x, "pool-x"),
        pool_flavor(&y, "pool-y"),
        cluster_queue(
            &team_a,
            vec![group(
                &["cpu"],
                &[(&x, &[("cpu", "4")]), (&y, &[("cpu", "6")])],
            )],
            json!({"cohortName": cohort,
                   "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}}),
        ),
        cluster_queue(
            &team_b,
            vec![group(&["cpu"], &[(&x, &[("cpu", "10")])])],
            json!({"cohortName": cohort}),
        ),
        local_queue(ns, "lq-a", &team_a),
    ];
    let jobs = vec![
        batch_job(ns, "borrow-or-y", "lq-a", 1, &[("cpu", "5")]),
        batch_job(ns, "must-borrow", "lq-a", 1, &[("cpu", "6")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("borrow-or-y: admitted main={y}"),
            format!("must-borrow: admitted main={x}"),
        ])
        .await;
}

/// A StrictFIFO head that would need preemption (its own queue's quota is taken by a job
/// already running, no preemption configured) is retried every cycle, and each time Kueue
/// holds its request back in the cycle's snapshot: a job of another queue in the cohort that
/// would borrow that capacity never fits. The same with a BestEffortFIFO head: it is parked
/// after one try and the borrower gets in. The running jobs are live state for the prediction.
#[tokio::test]
async fn strict_fifo_head_holds_capacity_for_its_cohort() {
    let env = test_env("sbs-hold").await;
    let ns = env.namespace.as_str();
    let names: Vec<String> = [
        "strict-f",
        "strict-cohort",
        "strict-a",
        "strict-b",
        "best-f",
        "best-cohort",
        "best-a",
        "best-b",
    ]
    .iter()
    .map(|n| unique_name(&format!("sbs-hold-{n}")))
    .collect();
    let mut queues = Vec::new();
    for (prefix, chunk) in ["strict", "best"].into_iter().zip(names.chunks(4)) {
        let [flavor, cohort, a, b] = chunk else {
            unreachable!()
        };
        let strategy = if prefix == "strict" {
            "StrictFIFO"
        } else {
            "BestEffortFIFO"
        };
        queues.extend([
            pool_flavor(flavor, "pool"),
            cluster_queue(
                a,
                vec![group(&["cpu"], &[(flavor, &[("cpu", "10")])])],
                json!({"cohortName": cohort, "queueingStrategy": strategy}),
            ),
            cluster_queue(
                b,
                vec![group(&["cpu"], &[(flavor, &[("cpu", "0")])])],
                json!({"cohortName": cohort}),
            ),
            local_queue(ns, &format!("{prefix}-a"), a),
            local_queue(ns, &format!("{prefix}-b"), b),
        ]);
    }
    let running = vec![
        batch_job(ns, "strict-running", "strict-a", 1, &[("cpu", "6")]),
        batch_job(ns, "best-running", "best-a", 1, &[("cpu", "6")]),
    ];
    let jobs = vec![
        batch_job(ns, "strict-head", "strict-a", 1, &[("cpu", "8")]),
        batch_job(ns, "strict-borrower", "strict-b", 1, &[("cpu", "3")]),
        batch_job(ns, "best-head", "best-a", 1, &[("cpu", "8")]),
        batch_job(ns, "best-borrower", "best-b", 1, &[("cpu", "3")]),
    ];
    let best_flavor = &names[4];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .after(running)
        .expect(&[
            "strict-head: pending".to_string(),
            "strict-borrower: pending".to_string(),
            "best-head: pending".to_string(),
            format!("best-borrower: admitted main={best_flavor}"),
        ])
        .await;
}

/// Admission checks: a check without `onFlavors` holds every job of its queue (quota
/// reserved, waiting); a ClusterQueue naming an AdmissionCheck that does not exist is
/// inactive and admits nothing.
#[tokio::test]
async fn admission_checks_and_inactive_queues() {
    let env = test_env("sbs-checks").await;
    let ns = env.namespace.as_str();
    let (f1, f2, check, prc, missing, checked, inactive) = (
        unique_name("sbs-checks-f1"),
        unique_name("sbs-checks-f2"),
        unique_name("sbs-checks-chk"),
        unique_name("sbs-checks-prc"),
        unique_name("sbs-checks-missing"),
        unique_name("sbs-checks-cq"),
        unique_name("sbs-checks-inactive"),
    );
    let quota = || {
        vec![group(
            &["cpu"],
            &[(&f1, &[("cpu", "2")]), (&f2, &[("cpu", "10")])],
        )]
    };
    let queues = vec![
        pool_flavor(&f1, "pool-1"),
        pool_flavor(&f2, "pool-2"),
        json!({"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": prc},
               "spec": {"provisioningClassName": "queued-provisioning.gke.io"}}),
        json!({"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": check},
               "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": prc}}}),
        cluster_queue(
            &checked,
            quota(),
            json!({"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}),
        ),
        cluster_queue(
            &inactive,
            quota(),
            json!({"admissionChecksStrategy": {"admissionChecks": [{"name": missing}]}}),
        ),
        local_queue(ns, "checked", &checked),
        local_queue(ns, "inactive", &inactive),
    ];
    let jobs = vec![
        batch_job(ns, "first", "checked", 1, &[("cpu", "2")]),
        batch_job(ns, "second", "checked", 1, &[("cpu", "2")]),
        batch_job(ns, "held", "inactive", 1, &[("cpu", "1")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("first: waiting main={f1}"),
            format!("second: waiting main={f2}"),
            "held: pending".to_string(),
        ])
        .await;
}

/// The ProvisioningRequest check only provisions podsets that use the config's
/// `managedResources`: a CPU-only job that spills over into the seed's DWS flavor needs no
/// ProvisioningRequest, so Kueue marks the check Ready at once and admits it.
#[tokio::test]
async fn a_job_without_managed_resources_passes_the_dws_check() {
    let env = test_env("sbs-nocheck").await;
    let ns = env.namespace.clone();
    let (objects, v) = seed_objects(&env, "sbs-nocheck");
    let (cpu, od, dws) = (&v["CPU"], &v["ONDEMAND"], &v["DWS"]);
    let (mut jobs, queues): (Vec<Value>, Vec<Value>) =
        objects.into_iter().partition(|o| o["kind"] == "RayJob");
    jobs.truncate(1);
    // 50 cpu: more than default-cpu (10) and on-demand (40) hold.
    jobs.push(batch_job(
        &ns,
        "preprocess",
        "user-queue",
        1,
        &[("cpu", "50")],
    ));
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("rayjob-tpu-v6e-dws-1: admitted head={cpu} tpu-group×4={od} submitter={cpu}"),
            format!("preprocess: admitted main={dws}"),
        ])
        .await;
}

/// A ClusterQueue covering `pods` charges one per pod: a job of 4 pods skips the flavor with
/// room for 3. A Job's pod count is its parallelism, or its completions when fewer.
#[tokio::test]
async fn covering_pods_counts_one_per_pod() {
    let env = test_env("sbs-pods").await;
    let ns = env.namespace.as_str();
    let (f1, f2, cq) = (
        unique_name("sbs-pods-f1"),
        unique_name("sbs-pods-f2"),
        unique_name("sbs-pods-cq"),
    );
    let queues = vec![
        pool_flavor(&f1, "pool-1"),
        pool_flavor(&f2, "pool-2"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu", "pods"],
                &[
                    (&f1, &[("cpu", "100"), ("pods", "3")]),
                    (&f2, &[("cpu", "100"), ("pods", "10")]),
                ],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let jobs = vec![
        batch_job(ns, "four", "lq", 4, &[("cpu", "1")]),
        batch_job(ns, "three", "lq", 3, &[("cpu", "1")]),
        // Parallelism 5, but a single completion: one pod.
        with(
            batch_job(ns, "one-more", "lq", 5, &[("cpu", "1")]),
            &["spec", "completions"],
            json!(1),
        ),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("four: admitted main×4={f2}"),
            format!("three: admitted main×3={f1}"),
            format!("one-more: admitted main={f2}"),
        ])
        .await;
}

/// Which jobs a queue accepts at all: a ClusterQueue's namespaceSelector is matched against
/// the namespace's labels, and one without a selector accepts no namespace; a stopped
/// LocalQueue and a LocalQueue that does not exist hold their jobs.
#[tokio::test]
async fn namespaces_and_local_queues() {
    let env = test_env("sbs-ns").await;
    let ns = env.namespace.as_str();
    let (f, matching, other, null) = (
        unique_name("sbs-ns-f"),
        unique_name("sbs-ns-match"),
        unique_name("sbs-ns-other"),
        unique_name("sbs-ns-null"),
    );
    let quota = || vec![group(&["cpu"], &[(&f, &[("cpu", "10")])])];
    let mut null_selector = cluster_queue(&null, quota(), json!({}));
    null_selector["spec"]
        .as_object_mut()
        .unwrap()
        .remove("namespaceSelector");
    let mut stopped = local_queue(ns, "stopped", &matching);
    stopped["spec"]["stopPolicy"] = json!("Hold");
    let queues = vec![
        // As test_env made it (not applied again).
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": ns, "labels": {"gkq.dev/test": "true"}}}),
        pool_flavor(&f, "pool"),
        cluster_queue(
            &matching,
            quota(),
            json!({"namespaceSelector": {"matchLabels": {"gkq.dev/test": "true"}}}),
        ),
        cluster_queue(
            &other,
            quota(),
            json!({"namespaceSelector": {"matchExpressions": [
                {"key": "team", "operator": "In", "values": ["ml"]}
            ]}}),
        ),
        null_selector,
        local_queue(ns, "matching", &matching),
        local_queue(ns, "other", &other),
        local_queue(ns, "null", &null),
        stopped,
    ];
    let jobs = vec![
        batch_job(ns, "in-matching", "matching", 1, &[("cpu", "1")]),
        batch_job(ns, "in-other", "other", 1, &[("cpu", "1")]),
        batch_job(ns, "in-null", "null", 1, &[("cpu", "1")]),
        batch_job(ns, "in-stopped", "stopped", 1, &[("cpu", "1")]),
        batch_job(ns, "in-missing", "missing", 1, &[("cpu", "1")]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("in-matching: admitted main={f}"),
            "in-other: pending".to_string(),
            "in-null: pending".to_string(),
            "in-stopped: pending".to_string(),
            "in-missing: pending".to_string(),
        ])
        .await;
}

/// withinClusterQueue LowerPriority: a high-priority job evicts the running low-priority one
/// that holds the quota it needs, and is admitted once the victim released it.
#[tokio::test]
async fn preemption_within_the_cluster_queue() {
    let env = test_env("sbs-pre-cq").await;
    let ns = env.namespace.as_str();
    let (f, cq, low, high) = (
        unique_name("sbs-pre-cq-f"),
        unique_name("sbs-pre-cq-cq"),
        unique_name("sbs-pre-cq-low"),
        unique_name("sbs-pre-cq-high"),
    );
    let queues = vec![
        workload_priority_class(&low, 100),
        workload_priority_class(&high, 1000),
        pool_flavor(&f, "pool"),
        cluster_queue(
            &cq,
            vec![group(&["cpu"], &[(&f, &[("cpu", "4")])])],
            json!({"preemption": {"withinClusterQueue": "LowerPriority"}}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let job = |name: &str, cpu: &str| batch_job(ns, name, "lq", 1, &[("cpu", cpu)]);
    let running = vec![with_label(job("low", "3"), PRIORITY_LABEL, &low)];
    let jobs = vec![with_label(job("high", "2"), PRIORITY_LABEL, &high)];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .after(running)
        .expect(&[
            format!("high: admitted main={f} (preempts {ns}/low)"),
            format!("low: pending (preempted by {ns}/high)"),
        ])
        .await;
}

/// reclaimWithinCohort Any: team-a takes back the nominal quota team-b borrowed while team-a
/// was idle; the borrowing job is evicted.
#[tokio::test]
async fn preemption_reclaims_lent_quota_within_the_cohort() {
    let env = test_env("sbs-pre-co").await;
    let ns = env.namespace.as_str();
    let (f, a, b, cohort) = (
        unique_name("sbs-pre-co-f"),
        unique_name("sbs-pre-co-a"),
        unique_name("sbs-pre-co-b"),
        unique_name("sbs-pre-co-cohort"),
    );
    let queues = vec![
        pool_flavor(&f, "pool"),
        cluster_queue(
            &a,
            vec![group(&["cpu"], &[(&f, &[("cpu", "4")])])],
            json!({"cohortName": cohort, "preemption": {"reclaimWithinCohort": "Any"}}),
        ),
        cluster_queue(
            &b,
            vec![group(&["cpu"], &[(&f, &[("cpu", "2")])])],
            json!({"cohortName": cohort}),
        ),
        local_queue(ns, "lq-a", &a),
        local_queue(ns, "lq-b", &b),
    ];
    let running = vec![batch_job(ns, "borrower", "lq-b", 1, &[("cpu", "5")])];
    let jobs = vec![batch_job(ns, "reclaimer", "lq-a", 1, &[("cpu", "3")])];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .after(running)
        .expect(&[
            format!("reclaimer: admitted main={f} (preempts {ns}/borrower)"),
            format!("borrower: pending (preempted by {ns}/reclaimer)"),
        ])
        .await;
}

/// withinClusterQueue LowerOrNewerEqualPriority: a job created before the running one, with
/// the same priority, queues only once its held LocalQueue is let go, and evicts the newer job.
#[tokio::test]
async fn preemption_of_a_newer_job_of_equal_priority() {
    let env = test_env("sbs-pre-new").await;
    let ns = env.namespace.as_str();
    let (f, cq) = (unique_name("sbs-pre-new-f"), unique_name("sbs-pre-new-cq"));
    let held = {
        let mut lq = local_queue(ns, "held", &cq);
        lq["spec"]["stopPolicy"] = json!("Hold");
        lq
    };
    let queues = vec![
        pool_flavor(&f, "pool"),
        cluster_queue(
            &cq,
            vec![group(&["cpu"], &[(&f, &[("cpu", "4")])])],
            json!({"preemption": {"withinClusterQueue": "LowerOrNewerEqualPriority"}}),
        ),
        local_queue(ns, "lq", &cq),
        held,
    ];
    let first = vec![
        batch_job(ns, "older", "held", 1, &[("cpu", "2")]),
        batch_job(ns, "newer", "lq", 1, &[("cpu", "3")]),
    ];
    Scenario::new(&env, queues, Vec::new(), Arrival::OneByOne)
        .after(first)
        .released(vec![local_queue(ns, "held", &cq)])
        .expect(&[
            format!("older: admitted main={f} (preempts {ns}/newer)"),
            format!("newer: pending (preempted by {ns}/older)"),
        ])
        .await;
}

/// `podSetMergePolicy` on the local target: a RayJob with two TPU worker groups of the same pod
/// template, under a DWS ProvisioningRequest check. The simulated Kueue's ProvisioningRequest
/// carries the PodSets the plan's rule says (`placement::provisioning::request_shapes`, what the
/// DWS lint and `gkq plan` read): two without a policy (GKE would fail it), one of both groups'
/// pods with either policy, templated on the first group.
#[test]
fn the_local_targets_provisioning_request_merges_podsets_as_the_plan_says() {
    use gkq::placement::provisioning::request_shapes;
    let ns = "merge";
    let worker = |group: &str| {
        json!({"groupName": group, "replicas": 2, "numOfHosts": 1, "template": {"spec": {
            "containers": [{"name": "w", "resources": {
                "requests": {"cpu": "1", "google.com/tpu": "4"},
                "limits": {"google.com/tpu": "4"}}}]}}})
    };
    let job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "two-groups", "namespace": ns, "labels": {QUEUE_LABEL: "lq"}},
        "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": true, "rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h",
                "resources": {"requests": {"cpu": "1"}}}]}}},
            "workerGroupSpecs": [worker("a"), worker("b")]}}
    });
    for (policy, expected) in [
        (None, vec![("a", 2), ("b", 2)]),
        (Some("IdenticalPodTemplates"), vec![("a", 4)]),
        (
            Some("IdenticalWorkloadSchedulingRequirements"),
            vec![("a", 4)],
        ),
    ] {
        let mut config = json!({"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "dws-config"},
            "spec": {"provisioningClassName": "queued-provisioning.gke.io",
                     "managedResources": ["google.com/tpu"]}});
        if let Some(policy) = policy {
            config["spec"]["podSetMergePolicy"] = json!(policy);
        }
        let objects = vec![
            pool_flavor("dws", "dws-pool"),
            config,
            json!({"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": "dws-prov"},
                   "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                            "parameters": {"apiGroup": "kueue.x-k8s.io",
                                "kind": "ProvisioningRequestConfig", "name": "dws-config"}}}),
            cluster_queue(
                "cq",
                vec![group(
                    &["cpu", "memory", "google.com/tpu"],
                    &[(
                        "dws",
                        &[
                            ("cpu", "100"),
                            ("memory", "1000Gi"),
                            ("google.com/tpu", "100"),
                        ],
                    )],
                )],
                json!({"admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov"}]}}),
            ),
            local_queue(ns, "lq", "cq"),
        ];
        // The plan's rule, over the same objects.
        let cluster = Cluster::from_objects(&objects).expect("objects parse");
        let workload = PendingWorkload::from_object(&job).expect("job parses");
        let shapes = request_shapes(&cluster, &workload);
        assert_eq!(shapes.len(), 1, "{policy:?}");
        let predicted: Vec<(String, i32)> = shapes[0]
            .pod_sets
            .iter()
            .map(|p| (p.podsets[0].clone(), p.count))
            .collect();
        let expected: Vec<(String, i32)> =
            expected.iter().map(|(p, c)| (p.to_string(), *c)).collect();
        assert_eq!(predicted, expected, "the plan's rule, {policy:?}");
        assert_eq!(shapes[0].refused_by_dws(), expected.len() > 1);

        let mut local = LocalCluster::new(ns, &objects);
        for object in &objects {
            local.apply(object).unwrap();
        }
        local.submit(&job).unwrap();
        local.reconcile(5000);
        let requests: Vec<&Value> = local
            .store
            .of_kind("autoscaling.x-k8s.io", "ProvisioningRequest")
            .collect();
        assert_eq!(
            requests.len(),
            1,
            "{policy:?}: one ProvisioningRequest; Workloads: {:#?}",
            local.workloads()
        );
        let request = requests[0];
        let name = request["metadata"]["name"].as_str().unwrap();
        let sent: Vec<(String, i32)> = request["spec"]["podSets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ps| {
                let template = ps["podTemplateRef"]["name"].as_str().unwrap();
                let podset = template
                    .strip_prefix(&format!("ppt-{name}-"))
                    .unwrap()
                    .to_string();
                (podset, ps["count"].as_i64().unwrap() as i32)
            })
            .collect();
        assert_eq!(sent, expected, "the simulated Kueue, {policy:?}");
    }
}
