//! Side by side with the real Kueue, for JobSets and batch Jobs as gkq renders them from
//! `jobs[]` (`kind: jobset | job`), beside RayJobs: the same runner as the parent module
//! (`Scenario`), so each prediction must equal Kueue's Workload admissions podset by podset.
//! The control plane serves the JobSet v0.12.0 CRD and runs Kueue with its
//! `jobset.x-k8s.io/jobset` integration (tools/controlplane.sh); no JobSet controller runs, so
//! nothing but Kueue touches the JobSets.

use serde_json::{Value, json};

use super::support::control_plane::{TestEnv, test_env, unique_name};
use super::support::kueue::{
    QUEUE_LABEL, cluster_queue, group, local_queue, pool_flavor, with_label,
    workload_priority_class,
};
use super::{Arrival, Scenario, seed_job_copy, seed_objects};
use gkq::model::jobs::{Run, job_object};
use gkq::spec::types::{Cluster, Job, Spec};

/// A `jobs[]` entry as a user writes it (JSON for YAML), rendered by gkq for one run named after
/// the job, in `namespace`, submitted to LocalQueue `user-queue` unless it names another.
/// `queue_has_dws` is what gkq knows of the queue (it adds the DWS toleration).
fn rendered(namespace: &str, mut job: Value, queue_has_dws: bool) -> Value {
    let fields = job.as_object_mut().expect("a job is an object");
    fields.insert("namespace".into(), json!(namespace));
    fields.entry("queue").or_insert_with(|| json!("user-queue"));
    fields.entry("script").or_insert_with(|| json!("train.py"));
    fields
        .entry("image")
        .or_insert_with(|| json!("rayproject/ray:2.53.0-py311"));
    let job: Job = serde_json::from_value(job).expect("a valid jobs[] entry");
    let spec = Spec {
        cluster: Cluster {
            name: "sbs".into(),
            ..Cluster::default()
        },
        ..Spec::default()
    };
    job_object(&Run {
        spec: &spec,
        job: &job,
        name: &job.name,
        queue_has_dws,
        script: "print('train')",
    })
}

/// One TPU v6e 4x4 slice per replica: 4 hosts of 8 cpu, 16Gi and 4 chips.
fn tpu_slices(name: &str, replicas: u32) -> Value {
    json!({"name": name, "replicas": replicas, "hosts": 4,
           "pods": {"cpu": 8, "memory": "16Gi",
                    "accelerator": {"type": "tpu-v6e-slice", "topology": "4x4", "chips": 4}}})
}

/// A JobSet of the given replicated jobs.
fn job_set(namespace: &str, name: &str, replicated: Vec<Value>) -> Value {
    rendered(
        namespace,
        json!({"name": name, "kind": "jobset", "replicatedJobs": replicated}),
        true,
    )
}

/// The seed's queue objects (three flavors, the DWS check, the ClusterQueue, the LocalQueue)
/// with on-demand quota for `slices` 4x4 slices (the seed's is one: 16 chips, 40 cpu, 75Gi);
/// returns them and the flavor names.
fn seed_queues(env: &TestEnv, test: &str, slices: u32) -> (Vec<Value>, [String; 3]) {
    let (mut objects, v) = seed_objects(env, test);
    objects.retain(|o| o["kind"] != "RayJob");
    for o in objects.iter_mut().filter(|o| o["kind"] == "ClusterQueue") {
        for flavor in o["spec"]["resourceGroups"][0]["flavors"]
            .as_array_mut()
            .expect("flavors")
        {
            if flavor["name"] == v["ONDEMAND"].as_str() {
                for r in flavor["resources"].as_array_mut().expect("resources") {
                    let (per_slice, unit) = match r["name"].as_str() {
                        Some("google.com/tpu") => (16, ""),
                        Some("cpu") => (40, ""),
                        _ => (75, "Gi"),
                    };
                    r["nominalQuota"] = json!(format!("{}{unit}", per_slice * slices));
                }
            }
        }
    }
    let names = [v["CPU"].clone(), v["ONDEMAND"].clone(), v["DWS"].clone()];
    (objects, names)
}

/// A 2-slice JobSet (32 chips) on an on-demand flavor with quota for two slices: one podset of
/// 2 x 4 pods, admitted there.
#[tokio::test]
async fn two_slice_job_set_on_demand() {
    let env = test_env("sbs-js-2slice").await;
    let ns = env.namespace.as_str();
    let (queues, [_, od, _]) = seed_queues(&env, "sbs-js-2slice", 2);
    let jobs = vec![job_set(ns, "train", vec![tpu_slices("slice", 2)])];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[format!("train: admitted slice×8={od}")])
        .await;
}

/// Slices beyond the on-demand quota (16 chips): a 1-slice JobSet takes on-demand, the next
/// 2-slice one falls back to dws and waits for its ProvisioningRequest.
#[tokio::test]
async fn slices_beyond_on_demand_quota_fall_back_to_dws() {
    let env = test_env("sbs-js-dws").await;
    let ns = env.namespace.as_str();
    let (queues, [_, od, dws]) = seed_queues(&env, "sbs-js-dws", 1);
    let jobs = vec![
        job_set(ns, "one", vec![tpu_slices("slice", 1)]),
        job_set(ns, "two", vec![tpu_slices("slice", 2)]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("one: admitted slice×4={od}"),
            format!("two: waiting slice×8={dws}"),
        ])
        .await;
}

/// Batch Jobs of CPU work (`kind: job`): the first fits default-cpu (10 cpu) as 4 pods of
/// min(parallelism 4, completions 8); the second, 3 pods of 2 cpu, no longer does and falls
/// through to on-demand; the third is pinned to the default pool by `nodePool` and pends.
#[tokio::test]
async fn batch_jobs_of_cpu_work_on_default_cpu() {
    let env = test_env("sbs-js-batch").await;
    let ns = env.namespace.as_str();
    let (queues, [cpu, od, _]) = seed_queues(&env, "sbs-js-batch", 1);
    let batch = |name: &str, parallelism: u32, completions: u32, pool: Option<&str>| {
        let mut pods = json!({"cpu": 2, "memory": "2Gi"});
        if let Some(pool) = pool {
            pods["nodePool"] = json!(pool);
        }
        rendered(
            ns,
            json!({"name": name, "kind": "job", "parallelism": parallelism,
                   "completions": completions, "pods": pods}),
            true,
        )
    };
    let jobs = vec![
        batch("prep", 4, 8, None),
        batch("eval", 3, 3, None),
        batch("pinned", 2, 2, Some("default-pool")),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("prep: admitted main×4={cpu}"),
            format!("eval: admitted main×3={od}"),
            "pinned: pending".to_string(),
        ])
        .await;
}

/// A RayJob and JobSets in one queue: the seed's RayJob takes the on-demand TPUs, a JobSet
/// after it falls back to dws, and a CPU-only JobSet beside them takes default-cpu.
#[tokio::test]
async fn ray_job_and_job_sets_in_one_queue() {
    let env = test_env("sbs-js-mixed").await;
    let ns = env.namespace.as_str();
    let (objects, v) = seed_objects(&env, "sbs-js-mixed");
    let ray = seed_job_copy(&objects, 1);
    let queues: Vec<Value> = objects
        .into_iter()
        .filter(|o| o["kind"] != "RayJob")
        .collect();
    let (cpu, od, dws) = (&v["CPU"], &v["ONDEMAND"], &v["DWS"]);
    let cpu_only = json!({"name": "prep", "replicas": 2,
                          "pods": {"cpu": 1, "memory": "1Gi", "nodePool": "default-pool"}});
    let jobs = vec![
        ray,
        job_set(ns, "jax", vec![tpu_slices("slice", 1)]),
        job_set(ns, "cpu-only", vec![cpu_only]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("rayjob-tpu-v6e-dws-1: admitted head={cpu} tpu-group×4={od} submitter={cpu}"),
            format!("jax: waiting slice×4={dws}"),
            format!("cpu-only: admitted prep×2={cpu}"),
        ])
        .await;
}

/// Priorities (`priorityClass`, Kueue's WorkloadPriorityClass label) order JobSets held in the
/// queue: released together, the high-priority JobSet, created last, gets the on-demand slice
/// and the low-priority one falls back to dws; a third without a class waits behind them on
/// dws as well (dws has room for all).
#[tokio::test]
async fn priorities_order_job_sets() {
    let env = test_env("sbs-js-prio").await;
    let ns = env.namespace.as_str();
    let (mut queues, [_, od, dws]) = seed_queues(&env, "sbs-js-prio", 1);
    let (low, high) = (unique_name("sbs-js-low"), unique_name("sbs-js-high"));
    queues.push(workload_priority_class(&low, 100));
    queues.push(workload_priority_class(&high, 1000));
    let with_class = |name: &str, class: &str| {
        rendered(
            ns,
            json!({"name": name, "kind": "jobset", "priorityClass": class,
                   "replicatedJobs": [tpu_slices("slice", 1)]}),
            true,
        )
    };
    let jobs = vec![
        with_class("low", &low),
        job_set(ns, "none", vec![tpu_slices("slice", 1)]),
        with_class("high", &high),
    ];
    Scenario::new(&env, queues, jobs, Arrival::Held)
        .expect(&[
            format!("low: waiting slice×4={dws}"),
            format!("none: waiting slice×4={dws}"),
            format!("high: admitted slice×4={od}"),
        ])
        .await;
}

/// Node selection and tolerations as gkq renders them skip flavors, per replicated job: a
/// tainted flavor first, a pool flavor second, a third flavor last. A replicated job that
/// tolerates the taint takes the first; one that does not skips it; one whose required node
/// affinity excludes the second pool (`NotIn`) lands on the third; one that selects a pool no
/// flavor has leaves the whole JobSet pending.
#[tokio::test]
async fn node_selectors_and_tolerations_skip_flavors() {
    let env = test_env("sbs-js-select").await;
    let ns = env.namespace.as_str();
    let (tainted, b, c, cq) = (
        unique_name("sbs-js-tainted"),
        unique_name("sbs-js-b"),
        unique_name("sbs-js-c"),
        unique_name("sbs-js-cq"),
    );
    let mut tainted_flavor = pool_flavor(&tainted, "pool-a");
    tainted_flavor["spec"]["nodeTaints"] =
        json!([{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]);
    let queues = vec![
        tainted_flavor,
        pool_flavor(&b, "pool-b"),
        pool_flavor(&c, "pool-c"),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu", "memory"],
                &[
                    (&tainted, &[("cpu", "10"), ("memory", "10Gi")]),
                    (&b, &[("cpu", "10"), ("memory", "10Gi")]),
                    (&c, &[("cpu", "10"), ("memory", "10Gi")]),
                ],
            )],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let pods = |extra: Value| {
        let mut p = json!({"cpu": 1, "memory": "1Gi"});
        for (k, v) in extra.as_object().into_iter().flatten() {
            p[k] = v.clone();
        }
        p
    };
    let tolerant = json!({"name": "tolerant", "pods": pods(json!({"tolerations":
        [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]}))});
    let plain = json!({"name": "plain", "pods": pods(json!({}))});
    let not_b = json!({"name": "not-b", "pods": pods(json!({"requiredNodeAffinity":
        [{"key": "cloud.google.com/gke-nodepool", "operator": "NotIn", "values": ["pool-b"]}]}))});
    let nowhere = json!({"name": "nowhere", "pods": pods(json!({"nodeSelector":
        {"cloud.google.com/gke-nodepool": "pool-z"}}))});
    let js = |name: &str, replicated: Vec<Value>| {
        rendered(
            ns,
            json!({"name": name, "kind": "jobset", "queue": "lq", "replicatedJobs": replicated}),
            false,
        )
    };
    let jobs = vec![
        js("placed", vec![tolerant, plain, not_b]),
        js("unplaceable", vec![nowhere]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("placed: admitted tolerant={tainted} plain={b} not-b={c}"),
            "unplaceable: pending".to_string(),
        ])
        .await;
}

/// A CPU coordinator replicated job beside TPU workers: the coordinator (on the default pool)
/// takes default-cpu, the workers on-demand; a second such JobSet has its workers on dws and
/// waits for the ProvisioningRequest, which carries the workers' podset alone (the coordinator
/// uses no google.com/tpu, the check's managed resource).
#[tokio::test]
async fn coordinator_beside_tpu_workers() {
    let env = test_env("sbs-js-coord").await;
    let ns = env.namespace.as_str();
    let (queues, [cpu, od, dws]) = seed_queues(&env, "sbs-js-coord", 1);
    let coordinator = json!({"name": "coordinator",
        "pods": {"cpu": 2, "memory": "4Gi", "nodePool": "default-pool"}});
    let jobs = vec![
        job_set(
            ns,
            "first",
            vec![coordinator.clone(), tpu_slices("workers", 1)],
        ),
        job_set(ns, "second", vec![coordinator, tpu_slices("workers", 1)]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("first: admitted coordinator={cpu} workers×4={od}"),
            format!("second: waiting coordinator={cpu} workers×4={dws}"),
        ])
        .await;
}

/// JobSets written by hand (a raw `manifests:` entry, not rendered by gkq), as Kueue counts
/// them: `replicas` x min(parallelism, completions) per replicated job, `replicas` and
/// `parallelism` defaulting to 1, and a container limit standing in for a missing request.
#[tokio::test]
async fn hand_written_job_set_podsets_as_kueue_counts_them() {
    let env = test_env("sbs-js-raw").await;
    let ns = env.namespace.as_str();
    let (f, cq) = (unique_name("sbs-js-raw-f"), unique_name("sbs-js-raw-cq"));
    let queues = vec![
        pool_flavor(&f, "pool"),
        cluster_queue(
            &cq,
            vec![group(&["cpu"], &[(&f, &[("cpu", "11")])])],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let container = |cpu: &str| json!([{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": cpu}}}]);
    let replicated = |name: &str,
                      replicas: Option<i64>,
                      parallelism: Option<i64>,
                      completions: Option<i64>| {
        let mut spec =
            json!({"template": {"spec": {"restartPolicy": "Never", "containers": container("1")}}});
        if let Some(p) = parallelism {
            spec["parallelism"] = json!(p);
        }
        if let Some(c) = completions {
            spec["completions"] = json!(c);
        }
        let mut rj = json!({"name": name, "template": {"spec": spec}});
        if let Some(r) = replicas {
            rj["replicas"] = json!(r);
        }
        rj
    };
    let raw = |name: &str, replicated: Vec<Value>| {
        with_label(
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                   "metadata": {"namespace": ns, "name": name},
                   "spec": {"replicatedJobs": replicated}}),
            QUEUE_LABEL,
            "lq",
        )
    };
    let jobs = vec![
        raw(
            "shapes",
            vec![
                replicated("fewer-completions", Some(3), Some(4), Some(2)),
                replicated("defaults", None, None, None),
                replicated("wide", Some(2), Some(2), None),
            ],
        ),
        // 6 + 1 + 4 = 11 cpu used: one more pod does not fit.
        raw("one-more", vec![replicated("w", None, None, None)]),
    ];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[
            format!("shapes: admitted fewer-completions×6={f} defaults={f} wide×4={f}"),
            "one-more: pending".to_string(),
        ])
        .await;
}

/// A hand-written JobSet with `replicas: 0`: the field is `omitempty` with the CRD default 1, so
/// Kueue's webhook round trip stores 1 replica, and Kueue counts (and admits) one Job's pods, as
/// gkq predicts.
#[tokio::test]
async fn a_job_set_written_with_zero_replicas_is_counted_as_one() {
    let env = test_env("sbs-js-zero").await;
    let ns = env.namespace.as_str();
    let (f, cq) = (unique_name("sbs-js-zero-f"), unique_name("sbs-js-zero-cq"));
    let queues = vec![
        pool_flavor(&f, "pool"),
        cluster_queue(
            &cq,
            vec![group(&["cpu"], &[(&f, &[("cpu", "4")])])],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ];
    let zero = with_label(
        json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
               "metadata": {"namespace": ns, "name": "zero"},
               "spec": {"replicatedJobs": [{"name": "w", "replicas": 0, "template": {"spec": {
                   "parallelism": 3, "completions": 3,
                   "template": {"spec": {"restartPolicy": "Never", "containers": [
                       {"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}]}}}}}]}}),
        QUEUE_LABEL,
        "lq",
    );
    let jobs = vec![zero];
    Scenario::new(&env, queues, jobs, Arrival::OneByOne)
        .expect(&[format!("zero: admitted w×3={f}")])
        .await;
}
