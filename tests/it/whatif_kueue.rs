//! What a plan says happens to the work already in the cluster, checked on the real Kueue.
//!
//! Each scenario applies a "before" world (flavors, queues) and submits jobs one by one, waits
//! until Kueue has decided on each (and, where a scenario stages one, applies a first change and
//! waits for Kueue again), then asks gkq what a change of queues, flavors or priority classes
//! (objects applied or deleted) does to those
//! live Workloads (`gkq::plan::workload_changes`, the function `gkq plan` uses, over the world
//! as read: the scenario's objects and the namespace's Workloads). The answer must be the
//! scenario's expected lines. Then the change is applied, and every Workload must end where gkq
//! said: the changed ones in their "after" state (state and flavor of every podset), the others
//! where they were, for a few seconds in a row.

use crate::placement_kueue::{
    LocalCluster, apply, hold, state_word, wait_for_workload_then_next_second, workloads_by_job,
};
use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gkq::addr::ResourceAddr;
use gkq::placement::unmodelled::Manager;
use gkq::placement::{Placement, PlacementState, observed_placement};
use gkq::plan::workload_changes::{
    WorkloadChange, WorkloadState, Worlds, workload_changes, world_after,
};
use serde_json::{Value, json};
use support::control_plane::{TestEnv, dynamic_api, list, test_env, unique_name};
use support::kueue::{
    KUEUE, PRIORITY_LABEL, batch_job, cluster_queue, group, local_queue, pool_flavor, with_label,
    with_pod, workload_priority_class,
};

const SETTLE_TIMEOUT: Duration = Duration::from_secs(90);
const STABLE_FOR: Duration = Duration::from_secs(3);

struct WhatIf<'e> {
    env: &'e TestEnv,
    before: Vec<Value>,
    jobs: Vec<Value>,
    /// Objects applied once Kueue has decided on the jobs, and settled, before the world is
    /// read (a queue drained before the change resumes it).
    staged: Vec<Value>,
    /// Objects applied as the change, replacing their namesakes.
    change: Vec<Value>,
    /// Objects the change deletes.
    delete: Vec<Value>,
}

/// `state podset=flavor ...` of a state.
fn state_text(state: PlacementState, podsets: &[gkq::placement::PodSetPlacement]) -> String {
    let mut text = state_word(state).to_string();
    for podset in podsets {
        if let Some(flavor) = &podset.flavor {
            text.push_str(&format!(" {}={flavor}", podset.name));
        }
    }
    text
}

fn workload_state_text(state: &WorkloadState) -> String {
    state_text(state.state, &state.podsets)
}

/// `job: before -> after`, with who preempts it, whether the pending reason changed, and
/// whether Kueue keeps it over a lowered quota.
fn change_line(change: &WorkloadChange) -> String {
    let job = change
        .job
        .as_deref()
        .and_then(|j| j.rsplit('/').next())
        .unwrap_or(&change.workload);
    let mut line = format!(
        "{job}: {} -> {}",
        workload_state_text(&change.before),
        workload_state_text(&change.after)
    );
    if let Some(preemptor) = &change.after.preempted_by {
        let preemptor = preemptor.rsplit('/').next().unwrap_or(preemptor);
        line.push_str(&format!(" (preempted by {preemptor})"));
    }
    if change.before.state == PlacementState::Pending
        && change.after.state == PlacementState::Pending
        && change.before.reason != change.after.reason
    {
        line.push_str(" (reason changed)");
    }
    if change
        .note
        .as_deref()
        .is_some_and(|n| n.contains("keeps it admitted"))
    {
        line.push_str(" (kept over quota)");
    }
    line
}

impl WhatIf<'_> {
    async fn expect(self, expected: &[String]) {
        // The local target's simulated Kueue first (in process): gkq's workload changes over
        // its world must be the scenario's, and it must then do what they say, as the real
        // Kueue must.
        if let Err(e) = self.run_local(expected) {
            panic!("on the local target: {e:#}");
        }
        let outcome = self.run(expected).await;
        for cq in self
            .before
            .iter()
            .chain(&self.change)
            .filter(|o| o["kind"] == "ClusterQueue")
        {
            let _ = apply(&self.env.client, &self.env.namespace, &hold(cq, "Hold")).await;
        }
        if let Err(e) = outcome {
            panic!("{e:#}");
        }
    }

    async fn run(&self, expected: &[String]) -> Result<()> {
        let (client, ns) = (&self.env.client, self.env.namespace.as_str());
        for object in &self.before {
            apply(client, ns, object).await?;
        }
        for job in &self.jobs {
            apply(client, ns, job).await?;
            let name = job["metadata"]["name"].as_str().context("job name")?;
            wait_for_workload_then_next_second(client, ns, name).await?;
        }
        let mut before = self.decided().await?;
        if !self.staged.is_empty() {
            for object in &self.staged {
                apply(client, ns, object).await?;
            }
            before = self.decided().await?;
        }

        let workloads = list(client, ns, KUEUE, "Workload").await?;
        let want = self.predicted(workloads, before, expected)?;
        for object in &self.change {
            apply(client, ns, object).await?;
        }
        for object in &self.delete {
            delete(client, ns, object).await?;
        }
        self.settle(&want).await
    }

    /// gkq's workload changes for the scenario's change over the world of the scenario's
    /// objects and `workloads`, which must be the `expected` lines; returns what every job's
    /// Workload must show once Kueue has acted on the change (`before`, the jobs' states
    /// now, with the changes applied).
    fn predicted(
        &self,
        workloads: Vec<Value>,
        before: BTreeMap<String, String>,
        expected: &[String],
    ) -> Result<BTreeMap<String, String>> {
        let mut world: Vec<Value> = self.before.clone();
        world.extend(workloads);
        let staged = world_after(&world, &self.staged, &BTreeSet::new());
        let world: Vec<Value> = staged.into_iter().cloned().collect();
        let deleted: Vec<ResourceAddr> = self
            .delete
            .iter()
            .map(ResourceAddr::from_object)
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let after = world_after(&world, &self.change, &deleted.iter().collect());
        let worlds = Worlds {
            before: world.iter().collect(),
            after,
        };
        let changes = workload_changes(&worlds, &[], &Manager::default());
        let lines: Vec<String> = changes.iter().map(change_line).collect();
        if lines != expected {
            bail!(
                "gkq's workload changes are not the scenario's:\n  {}\nexpected:\n  {}",
                lines.join("\n  "),
                expected.join("\n  ")
            );
        }
        let mut want = before;
        for change in &changes {
            let job = change
                .job
                .as_deref()
                .and_then(|j| j.rsplit('/').next())
                .context("every scenario job owns its Workload")?;
            want.insert(job.to_string(), workload_state_text(&change.after));
        }
        Ok(want)
    }

    /// [`WhatIf::run`] on the local target's simulated cluster: the same objects, jobs one by
    /// one, the staged objects, gkq's workload changes over the simulated Workloads, then the
    /// change; every Workload must then be where gkq said.
    fn run_local(&self, expected: &[String]) -> Result<()> {
        let ns = self.env.namespace.as_str();
        let mut local = LocalCluster::new(ns, &self.before);
        for object in &self.before {
            local.apply(object)?;
        }
        for job in &self.jobs {
            local.submit(job)?;
        }
        for object in &self.staged {
            local.apply(object)?;
        }
        local.reconcile(5000);
        let workloads = local.workloads();
        let before = observed(&workloads)?;
        let want = self.predicted(workloads.into_values().collect(), before, expected)?;
        for object in &self.change {
            local.apply(object)?;
        }
        for object in &self.delete {
            local.delete(ns, object)?;
        }
        local.reconcile(5000);
        let states = observed(&local.workloads())?;
        if states != want {
            bail!(
                "the simulated Kueue disagrees with gkq's workload changes:\n  gkq: {want:?}\n  simulated: {states:?}"
            );
        }
        Ok(())
    }

    /// Each job's Workload as Kueue decided it: `job -> state text`, once every Workload has a
    /// `QuotaReserved` condition and nothing changed for [`STABLE_FOR`].
    async fn decided(&self) -> Result<BTreeMap<String, String>> {
        let began = Instant::now();
        let mut last: Option<(BTreeMap<String, String>, Instant)> = None;
        loop {
            let workloads = workloads_by_job(&self.env.client, &self.env.namespace).await?;
            let tried = workloads.len() == self.jobs.len()
                && workloads.values().all(|w| {
                    w.pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|c| c.iter().any(|c| c["type"] == "QuotaReserved"))
                });
            let states = observed(&workloads)?;
            let now = Instant::now();
            match &last {
                Some((seen, since)) if tried && *seen == states => {
                    if now.duration_since(*since) >= STABLE_FOR {
                        return Ok(states);
                    }
                }
                _ => last = Some((states, now)),
            }
            if now.duration_since(began) > SETTLE_TIMEOUT {
                bail!("Kueue did not decide on every job within {SETTLE_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until every Workload is in the state `want` names, for [`STABLE_FOR`].
    async fn settle(&self, want: &BTreeMap<String, String>) -> Result<()> {
        let began = Instant::now();
        let mut agreed_since: Option<Instant> = None;
        loop {
            let workloads = workloads_by_job(&self.env.client, &self.env.namespace).await?;
            let states = observed(&workloads)?;
            let now = Instant::now();
            if states == *want {
                let since = *agreed_since.get_or_insert(now);
                if now.duration_since(since) >= STABLE_FOR {
                    return Ok(());
                }
            } else {
                agreed_since = None;
            }
            if now.duration_since(began) > SETTLE_TIMEOUT {
                bail!(
                    "after {SETTLE_TIMEOUT:?} Kueue still disagrees with gkq's workload changes:\n  gkq: {want:?}\n  Kueue: {states:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Deletes `object` (in `namespace` unless it names one), as the change does.
async fn delete(client: &kube::Client, namespace: &str, object: &Value) -> Result<()> {
    let api_version = object["apiVersion"].as_str().context("apiVersion")?;
    let kind = object["kind"].as_str().context("kind")?;
    let name = object["metadata"]["name"].as_str().context("name")?;
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or(namespace);
    dynamic_api(client, api_version, kind, ns)?
        .delete(name, &Default::default())
        .await
        .with_context(|| format!("delete {kind} {name}"))?;
    Ok(())
}

fn observed(workloads: &BTreeMap<String, Value>) -> Result<BTreeMap<String, String>> {
    workloads
        .iter()
        .map(|(job, w)| {
            let placement: Placement =
                observed_placement(w).map_err(|e| anyhow::anyhow!("Workload of {job}: {e}"))?;
            Ok((job.clone(), state_text(placement.state, &placement.podsets)))
        })
        .collect()
}

fn cpu_queue(name: &str, flavors: &[(&str, &str)], extra: Value) -> Value {
    let quotas: Vec<(&str, Vec<(&str, &str)>)> = flavors
        .iter()
        .map(|(flavor, quota)| (*flavor, vec![("cpu", *quota)]))
        .collect();
    let flavors: Vec<(&str, &[(&str, &str)])> =
        quotas.iter().map(|(f, q)| (*f, q.as_slice())).collect();
    cluster_queue(name, vec![group(&["cpu"], &flavors)], extra)
}

/// A quota raise admits the job waiting for it.
#[tokio::test]
async fn a_quota_raise_admits_a_pending_job() {
    let env = test_env("wif-raise").await;
    let ns = env.namespace.as_str();
    let (f, cq) = (unique_name("wif-raise-f"), unique_name("wif-raise-cq"));
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before: vec![
            pool_flavor(&f, "pool"),
            cpu_queue(&cq, &[(&f, "4")], json!({})),
            local_queue(ns, "lq", &cq),
        ],
        jobs: vec![job("a"), job("b")],
        change: vec![cpu_queue(&cq, &[(&f, "8")], json!({}))],
        staged: vec![],
        delete: vec![],
    }
    .expect(&[format!("b: pending -> admitted main={f}")])
    .await;
}

/// A flavor added to a ClusterQueue takes the job the first flavor has no room for.
#[tokio::test]
async fn a_new_flavor_in_a_cluster_queue_admits_a_pending_job() {
    let env = test_env("wif-flavor").await;
    let ns = env.namespace.as_str();
    let (f1, f2, cq) = (
        unique_name("wif-flavor-one"),
        unique_name("wif-flavor-two"),
        unique_name("wif-flavor-cq"),
    );
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before: vec![
            pool_flavor(&f1, "pool-1"),
            pool_flavor(&f2, "pool-2"),
            cpu_queue(&cq, &[(&f1, "4")], json!({})),
            local_queue(ns, "lq", &cq),
        ],
        jobs: vec![job("a"), job("b")],
        change: vec![cpu_queue(&cq, &[(&f1, "4"), (&f2, "4")], json!({}))],
        staged: vec![],
        delete: vec![],
    }
    .expect(&[format!("b: pending -> admitted main={f2}")])
    .await;
}

/// Putting two ClusterQueues in one cohort lets the busy one borrow the idle one's quota.
#[tokio::test]
async fn a_cohort_lets_a_queue_borrow_for_a_pending_job() {
    let env = test_env("wif-cohort").await;
    let ns = env.namespace.as_str();
    let (f, busy, idle, cohort) = (
        unique_name("wif-cohort-f"),
        unique_name("wif-cohort-busy"),
        unique_name("wif-cohort-idle"),
        unique_name("wif-cohort-c"),
    );
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before: vec![
            pool_flavor(&f, "pool"),
            cpu_queue(&busy, &[(&f, "4")], json!({})),
            cpu_queue(&idle, &[(&f, "4")], json!({})),
            local_queue(ns, "lq", &busy),
        ],
        jobs: vec![job("a"), job("b")],
        change: vec![
            cpu_queue(&busy, &[(&f, "4")], json!({"cohortName": cohort})),
            cpu_queue(&idle, &[(&f, "4")], json!({"cohortName": cohort})),
        ],
        staged: vec![],
        delete: vec![],
    }
    .expect(&[format!("b: pending -> admitted main={f}")])
    .await;
}

/// A lower quota does not evict admitted work: Kueue keeps it, and the plan says that the new
/// quota would not admit it again; the waiting job stays pending, now because its request
/// exceeds what the queue can ever hold.
#[tokio::test]
async fn a_lower_quota_leaves_admitted_work_in_place() {
    let env = test_env("wif-lower").await;
    let ns = env.namespace.as_str();
    let (f, cq) = (unique_name("wif-lower-f"), unique_name("wif-lower-cq"));
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before: vec![
            pool_flavor(&f, "pool"),
            cpu_queue(&cq, &[(&f, "8")], json!({})),
            local_queue(ns, "lq", &cq),
        ],
        jobs: vec![job("a"), job("b"), job("c")],
        change: vec![cpu_queue(&cq, &[(&f, "4")], json!({}))],
        staged: vec![],
        delete: vec![],
    }
    .expect(&[
        "c: pending -> pending (reason changed)".to_string(),
        format!("a: admitted main={f} -> admitted main={f} (kept over quota)"),
        format!("b: admitted main={f} -> admitted main={f} (kept over quota)"),
    ])
    .await;
}

/// Turning preemption on lets a waiting high-priority job evict a running low-priority one.
#[tokio::test]
async fn enabling_preemption_lets_a_higher_priority_job_preempt() {
    let env = test_env("wif-preempt").await;
    let ns = env.namespace.as_str();
    let (f, cq, low, high) = (
        unique_name("wif-preempt-f"),
        unique_name("wif-preempt-cq"),
        unique_name("wif-preempt-low"),
        unique_name("wif-preempt-high"),
    );
    let job = |name: &str, class: &str| {
        with_label(
            batch_job(ns, name, "lq", 1, &[("cpu", "4")]),
            PRIORITY_LABEL,
            class,
        )
    };
    let never = json!({"preemption": {"withinClusterQueue": "Never"}});
    let lower = json!({"preemption": {"withinClusterQueue": "LowerPriority"}});
    WhatIf {
        env: &env,
        before: vec![
            workload_priority_class(&low, 100),
            workload_priority_class(&high, 1000),
            pool_flavor(&f, "pool"),
            cpu_queue(&cq, &[(&f, "4")], never),
            local_queue(ns, "lq", &cq),
        ],
        jobs: vec![job("running", &low), job("urgent", &high)],
        change: vec![cpu_queue(&cq, &[(&f, "4")], lower)],
        staged: vec![],
        delete: vec![],
    }
    .expect(&[
        format!("urgent: pending -> admitted main={f}"),
        format!("running: admitted main={f} -> pending (preempted by urgent)"),
    ])
    .await;
}

/// A node pool moved from one flavor to another: the job that selects that pool can now go to
/// the flavor that has room.
#[tokio::test]
async fn a_node_pool_moved_between_flavors_admits_the_job_that_selects_it() {
    let env = test_env("wif-pool").await;
    let ns = env.namespace.as_str();
    let (f1, f2, cq) = (
        unique_name("wif-pool-one"),
        unique_name("wif-pool-two"),
        unique_name("wif-pool-cq"),
    );
    let job = |name: &str| {
        with_pod(
            batch_job(ns, name, "lq", 1, &[("cpu", "3")]),
            "nodeSelector",
            json!({"cloud.google.com/gke-nodepool": "pool-1"}),
        )
    };
    WhatIf {
        env: &env,
        before: vec![
            pool_flavor(&f1, "pool-1"),
            pool_flavor(&f2, "pool-2"),
            cpu_queue(&cq, &[(&f1, "4"), (&f2, "4")], json!({})),
            local_queue(ns, "lq", &cq),
        ],
        jobs: vec![job("a"), job("b")],
        change: vec![pool_flavor(&f2, "pool-1")],
        staged: vec![],
        delete: vec![],
    }
    .expect(&[format!("b: pending -> admitted main={f2}")])
    .await;
}

/// A ClusterQueue `cq` with flavors `f1` and `f2` (4 cpu each) where a ProvisioningRequest
/// check holds every job on `f2` (nothing provisions it here, so such a job keeps its quota
/// reserved and waits), the check and its config, and `lq` in `ns`.
fn checked_queue(ns: &str, tag: &str) -> (Vec<Value>, [String; 3]) {
    let (f1, f2, cq, check, config) = (
        unique_name(&format!("{tag}-one")),
        unique_name(&format!("{tag}-two")),
        unique_name(&format!("{tag}-cq")),
        unique_name(&format!("{tag}-chk")),
        unique_name(&format!("{tag}-prc")),
    );
    let checks = json!({"admissionChecksStrategy":
        {"admissionChecks": [{"name": check, "onFlavors": [f2]}]}});
    let objects = vec![
        pool_flavor(&f1, "pool-1"),
        pool_flavor(&f2, "pool-2"),
        json!({"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": config},
               "spec": {"provisioningClassName": "queued-provisioning.gke.io"}}),
        json!({"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": check},
               "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": config}}}),
        cpu_queue(&cq, &[(&f1, "4"), (&f2, "4")], checks),
        local_queue(ns, "lq", &cq),
    ];
    (objects, [f1, f2, cq])
}

/// `stopPolicy: Hold` on a ClusterQueue: the admitted job keeps running, the job whose quota
/// is reserved while it waits for its admission check loses the reservation, and the pending
/// job now waits for the stopped queue.
#[tokio::test]
async fn holding_a_cluster_queue_takes_back_reserved_quota_and_keeps_admitted_work() {
    let env = test_env("wif-hold").await;
    let ns = env.namespace.as_str();
    let (before, [_, f2, _]) = checked_queue(ns, "wif-hold");
    let queue = before[4].clone();
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before,
        jobs: vec![job("a"), job("b"), job("c")],
        staged: vec![],
        change: vec![hold(&queue, "Hold")],
        delete: vec![],
    }
    .expect(&[
        "c: pending -> pending (reason changed)".to_string(),
        format!("b: waiting main={f2} -> pending"),
    ])
    .await;
}

/// `stopPolicy: HoldAndDrain` evicts the admitted job as well.
#[tokio::test]
async fn draining_a_cluster_queue_evicts_admitted_work() {
    let env = test_env("wif-drain").await;
    let ns = env.namespace.as_str();
    let (before, [f1, f2, _]) = checked_queue(ns, "wif-drain");
    let queue = before[4].clone();
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before,
        jobs: vec![job("a"), job("b"), job("c")],
        staged: vec![],
        change: vec![hold(&queue, "HoldAndDrain")],
        delete: vec![],
    }
    .expect(&[
        "c: pending -> pending (reason changed)".to_string(),
        format!("a: admitted main={f1} -> pending"),
        format!("b: waiting main={f2} -> pending"),
    ])
    .await;
}

/// A drained ClusterQueue resumed: the job that waited all along is admitted, the drained one
/// (older, `Requeued=False` until the queue runs again) queues behind it.
#[tokio::test]
async fn a_drained_job_resumes_behind_the_job_that_waited() {
    let env = test_env("wif-resume").await;
    let ns = env.namespace.as_str();
    let (f, cq) = (unique_name("wif-resume-f"), unique_name("wif-resume-cq"));
    let queue = cpu_queue(&cq, &[(&f, "4")], json!({}));
    let job = |name: &str| batch_job(ns, name, "lq", 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before: vec![
            pool_flavor(&f, "pool"),
            queue.clone(),
            local_queue(ns, "lq", &cq),
        ],
        jobs: vec![job("drained"), job("waited")],
        staged: vec![hold(&queue, "HoldAndDrain")],
        change: vec![hold(&queue, "None")],
        delete: vec![],
    }
    .expect(&[
        "drained: pending -> pending (reason changed)".to_string(),
        format!("waited: pending -> admitted main={f}"),
    ])
    .await;
}

/// A deleted LocalQueue: the job that waits for its admission check with quota reserved loses
/// the reservation; the admitted job of the deleted queue keeps running. Kueue retries the
/// waiting jobs of the ClusterQueue through the released Workload's LocalQueue, which is gone:
/// the job of another LocalQueue that waits for quota stays pending, although quota is free.
#[tokio::test]
async fn a_deleted_local_queue_takes_back_the_quota_its_waiting_job_reserved() {
    let env = test_env("wif-dellq").await;
    let ns = env.namespace.as_str();
    let (mut before, [_, f2, cq]) = checked_queue(ns, "wif-dellq");
    before.push(local_queue(ns, "other", &cq));
    let doomed = before[5].clone();
    let job = |name: &str, queue: &str| batch_job(ns, name, queue, 1, &[("cpu", "3")]);
    WhatIf {
        env: &env,
        before,
        jobs: vec![job("a", "lq"), job("b", "lq"), job("c", "other")],
        staged: vec![],
        change: vec![],
        delete: vec![doomed],
    }
    .expect(&[format!("b: waiting main={f2} -> pending")])
    .await;
}

/// Lowering a WorkloadPriorityClass's value re-prioritises the admitted job that uses it: the
/// waiting job of a now higher priority preempts it.
#[tokio::test]
async fn a_lower_priority_class_value_lets_the_waiting_job_preempt() {
    let env = test_env("wif-wpc").await;
    let ns = env.namespace.as_str();
    let (f, cq, important, normal) = (
        unique_name("wif-wpc-f"),
        unique_name("wif-wpc-cq"),
        unique_name("wif-wpc-important"),
        unique_name("wif-wpc-normal"),
    );
    let job = |name: &str, class: &str| {
        with_label(
            batch_job(ns, name, "lq", 1, &[("cpu", "4")]),
            PRIORITY_LABEL,
            class,
        )
    };
    let lower = json!({"preemption": {"withinClusterQueue": "LowerPriority"}});
    WhatIf {
        env: &env,
        before: vec![
            workload_priority_class(&important, 1000),
            workload_priority_class(&normal, 100),
            pool_flavor(&f, "pool"),
            cpu_queue(&cq, &[(&f, "4")], lower),
            local_queue(ns, "lq", &cq),
        ],
        jobs: vec![job("running", &important), job("waiting", &normal)],
        staged: vec![],
        change: vec![workload_priority_class(&important, 10)],
        delete: vec![],
    }
    .expect(&[
        format!("waiting: pending -> admitted main={f}"),
        format!("running: admitted main={f} -> pending (preempted by waiting)"),
    ])
    .await;
}
