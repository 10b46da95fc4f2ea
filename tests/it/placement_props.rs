//! Properties of placement over generated clusters and jobs: prediction never panics, admitted
//! usage never exceeds quota when nothing can be borrowed, whatever fits a busy queue also fits
//! an empty one, every fix `gkq explain` offers admits its job, and no input (however malformed)
//! makes the readers panic.

use gkq::placement::{Cluster, PendingWorkload, PlacementState, fits_ever, predict};
use gkq::vocab::quantity::Quantity;
use proptest::prelude::*;
use serde_json::{Value, json};

const RESOURCES: [&str; 3] = ["cpu", "memory", "google.com/tpu"];

#[derive(Debug, Clone)]
struct FlavorSpec {
    pool: u8,
    tainted: bool,
    quotas: [u32; 3],
}

#[derive(Debug, Clone)]
struct PodSetSpec {
    count: u8,
    requests: [u8; 3],
    /// Also asks for a resource no queue covers.
    gpu: bool,
    pool_selector: Option<u8>,
    tolerates: bool,
    limits_only: bool,
}

fn flavor_spec() -> impl Strategy<Value = FlavorSpec> {
    (0u8..3, any::<bool>(), [0u32..40, 0u32..40, 0u32..20]).prop_map(|(pool, tainted, quotas)| {
        FlavorSpec {
            pool,
            tainted,
            quotas,
        }
    })
}

fn pod_set_spec() -> impl Strategy<Value = PodSetSpec> {
    (
        0u8..5,
        [0u8..12, 0u8..12, 0u8..6],
        prop::bool::weighted(0.1),
        prop::option::of(0u8..3),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(count, requests, gpu, pool_selector, tolerates, limits_only)| PodSetSpec {
                count,
                requests,
                gpu,
                pool_selector,
                tolerates,
                limits_only,
            },
        )
}

fn cluster_objects(flavors: &[FlavorSpec], strict: bool, try_next: bool) -> Vec<Value> {
    let mut objects = Vec::new();
    for (i, f) in flavors.iter().enumerate() {
        let mut spec = json!({"nodeLabels": {"pool": format!("p{}", f.pool)}});
        if f.tainted {
            spec["nodeTaints"] =
                json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]);
        }
        objects.push(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": format!("f{i}")}, "spec": spec
        }));
    }
    let flavor_quotas: Vec<Value> = flavors
        .iter()
        .enumerate()
        .map(|(i, f)| {
            json!({"name": format!("f{i}"), "resources": [
                {"name": "cpu", "nominalQuota": f.quotas[0].to_string()},
                {"name": "memory", "nominalQuota": format!("{}Gi", f.quotas[1])},
                {"name": "google.com/tpu", "nominalQuota": f.quotas[2].to_string()},
            ]})
        })
        .collect();
    let mut cq_spec = json!({
        "namespaceSelector": {},
        "queueingStrategy": if strict { "StrictFIFO" } else { "BestEffortFIFO" },
        "resourceGroups": [{"coveredResources": RESOURCES, "flavors": flavor_quotas}]
    });
    if try_next {
        cq_spec["flavorFungibility"] =
            json!({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"});
    }
    objects.push(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"}, "spec": cq_spec
    }));
    objects.push(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"namespace": "default", "name": "lq"}, "spec": {"clusterQueue": "cq"}
    }));
    objects
}

fn job_object(index: usize, pod_sets: &[PodSetSpec]) -> Value {
    let pod_sets: Vec<Value> = pod_sets
        .iter()
        .enumerate()
        .map(|(i, ps)| {
            let mut resources = serde_json::Map::new();
            resources.insert("cpu".into(), json!(ps.requests[0].to_string()));
            resources.insert("memory".into(), json!(format!("{}Gi", ps.requests[1])));
            resources.insert("google.com/tpu".into(), json!(ps.requests[2].to_string()));
            if ps.gpu {
                resources.insert("nvidia.com/gpu".into(), json!("1"));
            }
            let key = if ps.limits_only { "limits" } else { "requests" };
            let mut spec = json!({"containers": [{"name": "c", "resources": {key: resources}}]});
            if let Some(pool) = ps.pool_selector {
                spec["nodeSelector"] = json!({"pool": format!("p{pool}")});
            }
            if ps.tolerates {
                spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
            }
            json!({"name": format!("ps{i}"), "count": ps.count, "template": {"spec": spec}})
        })
        .collect();
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": "default", "name": format!("job-{index}")},
        "spec": {"queueName": "lq", "podSets": pod_sets}
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-zA-Z0-9./\\-]{0,8}".prop_map(Value::String),
        prop_oneof![
            Just("ClusterQueue"),
            Just("RayJob"),
            Just("Workload"),
            Just("kueue.x-k8s.io/v1beta2"),
            Just("ray.io/v1"),
            Just("20Gii"),
            Just("1e99"),
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion".to_string()),
                    Just("kind".to_string()),
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("status".to_string()),
                    Just("resourceGroups".to_string()),
                    Just("rayClusterSpec".to_string()),
                    Just("podSets".to_string()),
                    Just("template".to_string()),
                    Just("containers".to_string()),
                    Just("resources".to_string()),
                    Just("requests".to_string()),
                    Just("name".to_string()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Two ClusterQueues sharing the generated flavors in one cohort, with optional limits.
fn cohort_objects(flavors: &[FlavorSpec], limits: &[(Option<u32>, Option<u32>); 2]) -> Vec<Value> {
    let mut objects = cluster_objects(flavors, false, false);
    objects.retain(|o| o["kind"] == "ResourceFlavor");
    for (q, (borrowing, lending)) in limits.iter().enumerate() {
        let flavor_quotas: Vec<Value> = flavors
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut cpu = json!({"name": "cpu", "nominalQuota": f.quotas[0].to_string()});
                if let Some(b) = borrowing {
                    cpu["borrowingLimit"] = json!(b.to_string());
                }
                if let Some(l) = lending {
                    cpu["lendingLimit"] = json!((*l).min(f.quotas[0]).to_string());
                }
                json!({"name": format!("f{i}"), "resources": [
                    cpu,
                    {"name": "memory", "nominalQuota": format!("{}Gi", f.quotas[1])},
                    {"name": "google.com/tpu", "nominalQuota": f.quotas[2].to_string()},
                ]})
            })
            .collect();
        objects.push(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": format!("cq{q}")},
            "spec": {"cohortName": "shared", "namespaceSelector": {},
                     "resourceGroups": [{"coveredResources": RESOURCES, "flavors": flavor_quotas}]}
        }));
        objects.push(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"namespace": "default", "name": format!("lq{q}")}, "spec": {"clusterQueue": format!("cq{q}")}
        }));
    }
    objects
}

/// Two ClusterQueues over the generated flavors, `cq1` in cohort `shared` and `cq0` in it when
/// `cohort` (else in none), both with `preemption`; `running` are Workloads holding cpu
/// `(queue, flavor, cpu, priority)`.
fn queues_with_running_work(
    flavors: &[FlavorSpec],
    cohort: bool,
    preemption: &Value,
    running: &[(usize, usize, u32, i32)],
) -> Vec<Value> {
    let mut objects = cohort_objects(flavors, &[(None, None), (None, None)]);
    for object in &mut objects {
        if object["kind"] == "ClusterQueue" {
            object["spec"]["preemption"] = preemption.clone();
            if !cohort && object["metadata"]["name"] == "cq0" {
                object["spec"].as_object_mut().unwrap().remove("cohortName");
            }
        }
    }
    for (i, &(queue, flavor, cpu, priority)) in running.iter().enumerate() {
        let flavor = format!("f{}", flavor % flavors.len());
        objects.push(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"namespace": "default", "name": format!("running-{i}"),
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": format!("lq{queue}"), "priority": priority, "podSets": [{"name": "main", "count": 1,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}}}]},
            "status": {
                "admission": {"clusterQueue": format!("cq{queue}"), "podSetAssignments": [{"name": "main", "count": 1,
                    "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": cpu.to_string()}}]},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "lastTransitionTime": format!("2026-01-01T00:00:{:02}Z", i % 60)},
                    {"type": "Admitted", "status": "True", "lastTransitionTime": format!("2026-01-01T00:00:{:02}Z", i % 60)}
                ]
            }
        }));
    }
    objects.push(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                        "metadata": {"name": "high"}, "value": 5}),
    );
    objects
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every fix `gkq explain` offers for a pending job, made alone, admits it when predicted
    /// again (`support::kueue::check_every_fix_admits`), over generated queues, cohorts,
    /// preemption policies, running work and jobs.
    #[test]
    fn every_fix_explain_offers_admits_the_job(
        flavors in prop::collection::vec(flavor_spec(), 1..4),
        jobs in prop::collection::vec((0usize..2, 0i32..4, prop::collection::vec(pod_set_spec(), 1..3)), 1..5),
        running in prop::collection::vec((0usize..2, 0usize..3, 1u32..12, 0i32..4), 0..4),
        cohort in any::<bool>(),
        within in prop::sample::select(vec!["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
        reclaim in prop::sample::select(vec!["Never", "LowerPriority", "Any"]),
    ) {
        let preemption = json!({"withinClusterQueue": within, "reclaimWithinCohort": reclaim});
        let objects = queues_with_running_work(&flavors, cohort, &preemption, &running);
        let cluster = Cluster::from_objects(&objects).unwrap();
        let workloads: Vec<PendingWorkload> = jobs
            .iter()
            .enumerate()
            .map(|(i, (queue, priority, pod_sets))| {
                let mut object = job_object(i, pod_sets);
                object["spec"]["queueName"] = json!(format!("lq{queue}"));
                object["spec"]["priority"] = json!(priority);
                PendingWorkload::from_object(&object).unwrap()
            })
            .collect();
        crate::support::kueue::check_every_fix_admits(&cluster, &workloads);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_cohort_never_hands_out_more_than_it_has(
        flavors in prop::collection::vec(flavor_spec(), 1..4),
        jobs in prop::collection::vec((0usize..2, prop::collection::vec(pod_set_spec(), 1..3)), 0..12),
        limits in [(prop::option::of(0u32..10), prop::option::of(0u32..10)), (prop::option::of(0u32..10), prop::option::of(0u32..10))],
    ) {
        let cluster = Cluster::from_objects(&cohort_objects(&flavors, &limits)).unwrap();
        let workloads: Vec<PendingWorkload> = jobs
            .iter()
            .enumerate()
            .map(|(i, (queue, pod_sets))| {
                let mut object = job_object(i, pod_sets);
                object["spec"]["queueName"] = json!(format!("lq{queue}"));
                PendingWorkload::from_object(&object).unwrap()
            })
            .collect();
        let prediction = predict(&cluster, &workloads);
        for row in &prediction.usage {
            if let Some(limit) = row.borrowing_limit {
                prop_assert!(row.used_plan <= row.nominal.saturating_add(limit));
            }
            let (used, nominal) = prediction
                .usage
                .iter()
                .filter(|r| r.flavor == row.flavor && r.resource == row.resource)
                .fold((Quantity::ZERO, Quantity::ZERO), |(u, n), r| {
                    (u.saturating_add(r.used_plan), n.saturating_add(r.nominal))
                });
            prop_assert!(used <= nominal, "{} {}: {} of {}", row.flavor, row.resource, used, nominal);
        }
    }

    #[test]
    fn admitted_usage_never_exceeds_quota_without_a_cohort(
        flavors in prop::collection::vec(flavor_spec(), 1..4),
        jobs in prop::collection::vec(prop::collection::vec(pod_set_spec(), 1..4), 0..10),
        strict in any::<bool>(),
        try_next in any::<bool>(),
    ) {
        let cluster = Cluster::from_objects(&cluster_objects(&flavors, strict, try_next)).unwrap();
        let workloads: Vec<PendingWorkload> = jobs
            .iter()
            .enumerate()
            .map(|(i, pod_sets)| PendingWorkload::from_object(&job_object(i, pod_sets)).unwrap())
            .collect();
        let prediction = predict(&cluster, &workloads);
        prop_assert_eq!(prediction.placements.len(), workloads.len());
        for row in &prediction.usage {
            prop_assert!(
                row.used_plan <= row.nominal,
                "{} {} uses {} of {}", row.flavor, row.resource, row.used_plan, row.nominal
            );
        }
        for (placement, workload) in prediction.placements.iter().zip(&workloads) {
            let admitted = placement.state == PlacementState::Admitted;
            // Whatever a busy queue admits, an empty queue admits too.
            if admitted {
                prop_assert!(fits_ever(&cluster, workload).is_ok());
                prop_assert!(placement.podsets.iter().all(|p| p.flavor.is_some()
                    || workload.pod_sets.iter().any(|w| w.name == p.name && w.requests.values().all(Quantity::is_zero))));
            } else {
                prop_assert!(placement.reason.as_deref().is_some_and(|r| !r.is_empty()));
            }
        }
    }

    #[test]
    fn readers_never_panic_on_arbitrary_json(objects in prop::collection::vec(json_value(), 0..6)) {
        let cluster = Cluster::from_objects(&objects).unwrap_or_default();
        let workloads: Vec<PendingWorkload> = objects
            .iter()
            .filter_map(|o| PendingWorkload::from_object(o).ok())
            .collect();
        let _ = predict(&cluster, &workloads);
        for object in &objects {
            let _ = gkq::placement::observed_placement(object);
        }
    }

    #[test]
    fn quantities_round_trip_through_their_canonical_form(text in "[+-]?[0-9]{0,6}(\\.[0-9]{0,4})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,2})?") {
        if let Ok(quantity) = Quantity::parse(&text) {
            let canonical = quantity.to_canonical_string();
            let again = Quantity::parse(&canonical).unwrap();
            prop_assert_eq!(again, quantity);
        }
    }

    #[test]
    fn quantity_parsing_never_panics(text in ".{0,24}") {
        let _ = Quantity::parse(&text);
    }
}
