//! Placement benchmark: predicts 1k, 10k and 100k pending RayJobs spread over 4 ClusterQueues
//! that share 8 flavors in one cohort, and prints timings; then what a quota change does to 1k
//! and 10k live Workloads (`plan::workload_changes`, both worlds predicted); then 200 and 1k jobs
//! predicted in submission order (`predict_in_order`, how a plan predicts the jobs `gkq apply`
//! submits one after another). Run with
//! `cargo run --release -p gkq-bench --bin placement`. It prints figures and asserts nothing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gkq::placement::{Cluster, PendingWorkload, PlacementState, predict, predict_in_order};
use gkq::plan::workload_changes::{Worlds, workload_changes, world_after};
use serde_json::{Value, json};

/// gkq's allocator (src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const QUEUES: usize = 4;
const FLAVORS: usize = 8;

/// 8 flavors on 8 node pools; the last two are tainted like DWS pools.
fn cluster_objects() -> Vec<Value> {
    let mut objects = Vec::new();
    for f in 0..FLAVORS {
        let mut spec =
            json!({"nodeLabels": {"cloud.google.com/gke-nodepool": format!("pool-{f}")}});
        if f >= 6 {
            spec["nodeTaints"] = json!([{"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}]);
        }
        objects.push(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": format!("flavor-{f}")}, "spec": spec
        }));
    }
    for q in 0..QUEUES {
        // Each queue tries the flavors in a different order and owns different quotas.
        let flavors: Vec<Value> = (0..FLAVORS)
            .map(|i| {
                let f = (i + q * 2) % FLAVORS;
                json!({"name": format!("flavor-{f}"), "resources": [
                    {"name": "cpu", "nominalQuota": format!("{}", 200 + 50 * f), "borrowingLimit": "100"},
                    {"name": "memory", "nominalQuota": format!("{}Gi", 800 + 100 * f)},
                    {"name": "google.com/tpu", "nominalQuota": format!("{}", 16 * (f + 1)), "lendingLimit": "8"}
                ]})
            })
            .collect();
        objects.push(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": format!("team-{q}")},
            "spec": {
                "cohortName": "research",
                "namespaceSelector": {},
                "queueingStrategy": if q == 3 { "StrictFIFO" } else { "BestEffortFIFO" },
                "resourceGroups": [{"coveredResources": ["cpu", "memory", "google.com/tpu"], "flavors": flavors}],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov", "onFlavors": ["flavor-6", "flavor-7"]}]}
            }
        }));
        objects.push(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"namespace": "default", "name": format!("lq-{q}")},
            "spec": {"clusterQueue": format!("team-{q}")}
        }));
    }
    objects.push(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "dws-prov"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                 "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws-config"}}
    }));
    objects.push(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "dws-config"}, "spec": {"provisioningClassName": "queued-provisioning.gke.io"}
    }));
    objects.push(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"}, "value": 100
    }));
    objects
}

/// A seed-shaped RayJob (head, TPU workers, submitter) with a few variations.
fn ray_job(i: usize) -> Value {
    let hosts = [1, 2, 4][i % 3];
    let worker_pool = i.is_multiple_of(5).then(|| format!("pool-{}", i % FLAVORS));
    let mut worker_spec = json!({
        "tolerations": [{"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "ray-worker", "resources": {
            "requests": {"cpu": format!("{}", 2 + i % 7), "memory": format!("{}Gi", 4 + i % 9), "google.com/tpu": "4"},
            "limits": {"google.com/tpu": "4"}
        }}],
        "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}
    });
    if let Some(pool) = worker_pool {
        worker_spec["nodeSelector"]["cloud.google.com/gke-nodepool"] = json!(pool);
    }
    let mut labels = json!({"kueue.x-k8s.io/queue-name": format!("lq-{}", i % QUEUES)});
    if i.is_multiple_of(11) {
        labels["kueue.x-k8s.io/priority-class"] = json!("high");
    }
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {
            "name": format!("job-{i}"), "namespace": "default", "labels": labels,
            "creationTimestamp": format!("2026-03-{:02}T{:02}:{:02}:{:02}Z", 1 + (i / 86_400) % 28, (i / 3600) % 24, (i / 60) % 60, i % 60)
        },
        "spec": {
            "shutdownAfterJobFinishes": true,
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "resources": {
                    "requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}}]}}},
                "workerGroupSpecs": [{"groupName": "tpu-group", "replicas": 1, "numOfHosts": hosts, "template": {"spec": worker_spec}}]
            }
        }
    })
}

/// A live Workload of a batch Job in queue `lq-(i % 4)`: the first `admitted` of them hold quota
/// on a flavor of their ClusterQueue, the rest wait.
fn live_workload(i: usize, admitted: usize) -> Value {
    let q = i % QUEUES;
    let hosts = [1, 2, 4][i % 3];
    let (cpu, memory) = (2 + i % 7, 4 + i % 9);
    let mut workload = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {
            "name": format!("job-live-{i}-abcde"), "namespace": "default", "uid": format!("uid-{i}"),
            "creationTimestamp": format!("2026-02-{:02}T{:02}:{:02}:{:02}Z", 1 + (i / 86_400) % 28, (i / 3600) % 24, (i / 60) % 60, i % 60),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("live-{i}"), "uid": format!("job-uid-{i}"), "controller": true}]
        },
        "spec": {"queueName": format!("lq-{q}"), "podSets": [{"name": "main", "count": hosts, "template": {"spec": {
            "tolerations": [{"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "resources": {"requests": {
                "cpu": format!("{cpu}"), "memory": format!("{memory}Gi"), "google.com/tpu": "4"}}}]}}}]}
    });
    if i < admitted {
        let flavor = format!("flavor-{}", (q * 2) % FLAVORS);
        workload["status"] = json!({
            "admission": {"clusterQueue": format!("team-{q}"), "podSetAssignments": [{
                "name": "main", "count": hosts,
                "flavors": {"cpu": flavor, "memory": flavor, "google.com/tpu": flavor},
                "resourceUsage": {"cpu": format!("{}", cpu * hosts), "memory": format!("{}Gi", memory * hosts), "google.com/tpu": format!("{}", 4 * hosts)}}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-02-01T00:00:00Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2026-02-01T00:00:00Z"}
            ]
        });
    }
    workload
}

/// What doubling one ClusterQueue's quotas does to `count` live Workloads.
fn bench_workload_changes(count: usize, runs: usize) {
    const ADMITTED: usize = 100;
    let mut world = cluster_objects();
    world.extend((0..count).map(|i| live_workload(i, ADMITTED)));
    let mut raised = world
        .iter()
        .find(|o| o["kind"] == "ClusterQueue" && o["metadata"]["name"] == "team-0")
        .expect("team-0")
        .clone();
    for flavor in raised["spec"]["resourceGroups"][0]["flavors"]
        .as_array_mut()
        .expect("flavors")
    {
        for resource in flavor["resources"].as_array_mut().expect("resources") {
            let quota = resource["nominalQuota"].as_str().unwrap_or("0").to_string();
            resource["nominalQuota"] = match quota.strip_suffix("Gi") {
                Some(n) => json!(format!("{}Gi", n.parse::<u64>().unwrap_or(0) * 2)),
                None => json!(format!("{}", quota.parse::<u64>().unwrap_or(0) * 2)),
            };
        }
    }
    let change = [raised];
    let gates = Default::default();
    let mut samples = Vec::with_capacity(runs);
    let mut changes = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let worlds = Worlds {
            before: world.iter().collect(),
            after: world_after(&world, &change, &Default::default()),
        };
        changes = black_box(workload_changes(&worlds, &[], &gates)).len();
        samples.push(started.elapsed());
    }
    let (fastest, median) = summary(samples);
    println!(
        "{count:>8}  {ADMITTED:>8}  {:>10.1}ms  {:>12.1}ms  {:>10.2}µs  {changes:>9}",
        fastest.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3,
        fastest.as_secs_f64() * 1e6 / count as f64,
    );
}

/// Jobs predicted in submission order, each arriving once the simulated scheduler settled the
/// ones before (`predict_in_order`), beside the same jobs arriving together (`predict`).
fn bench_in_order(cluster: &Cluster, runs_override: Option<usize>) {
    println!(
        "\nin order: jobs submitted one after another (predict_in_order) beside together (predict)"
    );
    println!(
        "{:>8}  {:>12}  {:>14}  {:>12}  {:>14}",
        "jobs", "in order min", "in order median", "together min", "min per job"
    );
    let sizes: Vec<usize> = std::env::var("PLACEMENT_BENCH_IN_ORDER_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![200, 1_000]);
    for count in sizes {
        let jobs: Vec<PendingWorkload> = (0..count)
            .map(|i| PendingWorkload::from_object(&ray_job(i)).expect("benchmark job parses"))
            .collect();
        let runs = runs_override.unwrap_or(11);
        let time = |in_order: bool| {
            let samples = (0..runs)
                .map(|_| {
                    let started = Instant::now();
                    if in_order {
                        black_box(predict_in_order(black_box(cluster), black_box(&jobs), &[]));
                    } else {
                        black_box(predict(black_box(cluster), black_box(&jobs)));
                    }
                    started.elapsed()
                })
                .collect();
            summary(samples)
        };
        let (in_order, in_order_median) = time(true);
        let (together, _) = time(false);
        println!(
            "{count:>8}  {:>10.1}ms  {:>12.1}ms  {:>10.1}ms  {:>12.2}µs",
            in_order.as_secs_f64() * 1e3,
            in_order_median.as_secs_f64() * 1e3,
            together.as_secs_f64() * 1e3,
            in_order.as_secs_f64() * 1e6 / count as f64,
        );
    }
}

/// `(fastest, median)`: on a shared machine the fastest run is the best estimate of the
/// uncontended time, the median shows the spread.
fn summary(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[0], samples[samples.len() / 2])
}

fn main() {
    let cluster = Cluster::from_objects(&cluster_objects()).expect("benchmark cluster parses");
    println!(
        "placement benchmark: {QUEUES} ClusterQueues in one cohort, {FLAVORS} flavors, RayJobs with 3 podsets"
    );
    println!(
        "{:>8}  {:>13}  {:>12}  {:>14}  {:>12}  {:>9}  {:>9}",
        "jobs",
        "build podsets",
        "predict min",
        "predict median",
        "min per job",
        "placed",
        "pending"
    );
    // `PLACEMENT_BENCH_SIZES=10000 PLACEMENT_BENCH_RUNS=30` narrows a run, e.g. for a profiler.
    let sizes: Vec<usize> = std::env::var("PLACEMENT_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
    let runs_override: Option<usize> = std::env::var("PLACEMENT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok());
    for &count in &sizes {
        let objects: Vec<Value> = (0..count).map(ray_job).collect();
        let started = Instant::now();
        let jobs: Vec<PendingWorkload> = objects
            .iter()
            .map(|o| PendingWorkload::from_object(o).expect("benchmark job parses"))
            .collect();
        let build = started.elapsed();
        let runs = runs_override.unwrap_or(if count >= 100_000 { 5 } else { 11 });
        let mut samples = Vec::with_capacity(runs);
        let mut last = None;
        for _ in 0..runs {
            let started = Instant::now();
            let prediction = predict(black_box(&cluster), black_box(&jobs));
            samples.push(started.elapsed());
            last = Some(prediction);
        }
        let prediction = last.expect("at least one run");
        let placed = prediction
            .placements
            .iter()
            .filter(|p| {
                matches!(
                    p.state,
                    PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks
                )
            })
            .count();
        let (fastest, median) = summary(samples);
        println!(
            "{count:>8}  {:>11.1}ms  {:>10.1}ms  {:>12.1}ms  {:>10.2}µs  {placed:>9}  {:>9}",
            build.as_secs_f64() * 1e3,
            fastest.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e3,
            fastest.as_secs_f64() * 1e6 / count as f64,
            count - placed,
        );
    }
    bench_in_order(&cluster, runs_override);
    println!(
        "\nworkload changes: doubling team-0's quotas, live Workloads predicted before and after"
    );
    println!(
        "{:>8}  {:>8}  {:>12}  {:>14}  {:>12}  {:>9}",
        "live", "admitted", "changes min", "changes median", "min per live", "changed"
    );
    let live_sizes: Vec<usize> = std::env::var("PLACEMENT_BENCH_LIVE_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000]);
    for &count in &live_sizes {
        bench_workload_changes(count, runs_override.unwrap_or(5));
    }
}
