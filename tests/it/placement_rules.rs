//! Table tests of Kueue's placement rules, one scenario per test, built from the same
//! Kubernetes objects a user would apply. Expected flavors and messages follow Kueue v0.19.2
//! (see `docs/kueue.md` 1a-1c) and the seed walk-through.

use gkq::placement::remedy::{Change, NodeResources, Remedy, Subject, World, remedies};
use gkq::placement::{
    Cluster, PendingWorkload, Placement, PlacementState, Prediction, Released, fits_ever, predict,
    predict_in_order,
};
use serde_json::{Value, json};

use crate::support::kueue::{
    batch_job, cluster_queue, group, local_queue, pool_flavor, seed_queue_objects, seed_ray_job,
    with, with_pod,
};

// ---------------------------------------------------------------- fixtures

fn pod_spec_path<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    let mut path = vec!["spec", "template", "spec"];
    path.extend_from_slice(rest);
    path
}

fn cluster(objects: &[Value]) -> Cluster {
    Cluster::from_objects(objects).expect("fixtures parse")
}

fn jobs(objects: &[Value]) -> Vec<PendingWorkload> {
    objects
        .iter()
        .map(|o| PendingWorkload::from_object(o).expect("job parses"))
        .collect()
}

fn run(cluster_objects: &[Value], job_objects: &[Value]) -> Prediction {
    predict(&cluster(cluster_objects), &jobs(job_objects))
}

/// `(podset, flavor)` pairs of a placement.
fn flavors(placement: &Placement) -> Vec<(&str, Option<&str>)> {
    placement
        .podsets
        .iter()
        .map(|p| (p.name.as_str(), p.flavor.as_deref()))
        .collect()
}

fn reason(placement: &Placement) -> &str {
    placement.reason.as_deref().unwrap_or("")
}

// ---------------------------------------------------------------- the seed walk-through

#[test]
fn seed_job_one_runs_on_demand_and_job_two_falls_back_to_dws() {
    let prediction = run(
        &seed_queue_objects("default", "cluster-queue"),
        &[seed_ray_job(1), seed_ray_job(2)],
    );
    let [one, two] = &prediction.placements[..] else {
        panic!("two placements");
    };
    assert_eq!(one.job, "rayjob-tpu-v6e-dws-1");
    assert_eq!(one.state, PlacementState::Admitted);
    assert_eq!(
        flavors(one),
        [
            ("head", Some("default-cpu")),
            ("tpu-group", Some("on-demand")),
            ("submitter", Some("default-cpu"))
        ]
    );
    assert_eq!(two.state, PlacementState::WaitingForAdmissionChecks);
    assert_eq!(two.admission_checks, ["dws-prov"]);
    assert_eq!(
        flavors(two),
        [
            ("head", Some("default-cpu")),
            ("tpu-group", Some("dws")),
            ("submitter", Some("default-cpu"))
        ]
    );
    assert_eq!(
        reason(two),
        "quota reserved; waiting for admission checks: dws-prov"
    );
    // Worker podset: 1 replica x 4 hosts.
    assert_eq!(one.podsets[1].count, 4);
}

#[test]
fn seed_usage_summary_shows_both_jobs() {
    let prediction = run(
        &seed_queue_objects("default", "cluster-queue"),
        &[seed_ray_job(1), seed_ray_job(2)],
    );
    let row = |flavor: &str, resource: &str| {
        prediction
            .usage
            .iter()
            .find(|u| u.flavor == flavor && u.resource == resource)
            .expect("usage row")
    };
    assert_eq!(
        row("on-demand", "google.com/tpu").used_plan.to_string(),
        "16"
    );
    assert_eq!(row("on-demand", "google.com/tpu").nominal.to_string(), "16");
    assert_eq!(row("dws", "google.com/tpu").used_plan.to_string(), "16");
    // Two heads (2 + 500m autoscaler) and two submitters (500m).
    assert_eq!(row("default-cpu", "cpu").used_plan.to_string(), "6");
    assert_eq!(row("default-cpu", "memory").used_plan.to_string(), "9616Mi");
    assert_eq!(row("on-demand", "cpu").free().to_string(), "8");
}

#[test]
fn seed_third_job_also_waits_for_dws() {
    let prediction = run(
        &seed_queue_objects("default", "cluster-queue"),
        &[seed_ray_job(1), seed_ray_job(2), seed_ray_job(3)],
    );
    let third = &prediction.placements[2];
    assert_eq!(third.state, PlacementState::WaitingForAdmissionChecks);
    assert_eq!(flavors(third)[1], ("tpu-group", Some("dws")));
}

#[test]
fn seed_fourth_job_pends_because_heads_exhaust_default_cpu() {
    let prediction = run(
        &seed_queue_objects("default", "cluster-queue"),
        &[
            seed_ray_job(1),
            seed_ray_job(2),
            seed_ray_job(3),
            seed_ray_job(4),
        ],
    );
    let fourth = &prediction.placements[3];
    assert_eq!(fourth.state, PlacementState::Pending);
    assert_eq!(
        reason(fourth),
        "couldn't assign flavors to pod set head: flavor dws doesn't match node affinity, \
         flavor on-demand doesn't match node affinity, insufficient unused quota for cpu in flavor \
         default-cpu, 1500m more needed"
    );
    assert!(fourth.podsets.iter().all(|p| p.flavor.is_none()));
}

#[test]
fn ray_job_podsets_follow_kueue() {
    let job = PendingWorkload::from_object(&seed_ray_job(1)).unwrap();
    let names: Vec<(&str, i32)> = job
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(names, [("head", 1), ("tpu-group", 4), ("submitter", 1)]);
    let head = &job.pod_sets[0];
    // ray-head 2/4Gi plus the autoscaler sidecar 500m/512Mi.
    assert_eq!(head.requests["cpu"].to_string(), "2500m");
    assert_eq!(head.requests["memory"].to_string(), "4608Mi");
    let submitter = &job.pod_sets[2];
    assert_eq!(submitter.requests["cpu"].to_string(), "500m");
    assert_eq!(submitter.requests["memory"].to_string(), "200Mi");
}

#[test]
fn sidecar_mode_adds_the_submitter_to_the_head() {
    let mut ray_job = seed_ray_job(1);
    ray_job["spec"]["submissionMode"] = json!("SidecarMode");
    ray_job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = json!(false);
    ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = json!(2);
    ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] = json!("TPU-Group");
    let job = PendingWorkload::from_object(&ray_job).unwrap();
    let names: Vec<(&str, i32)> = job
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(names, [("head", 1), ("tpu-group", 8)]);
    assert_eq!(job.pod_sets[0].requests["cpu"].to_string(), "2500m");
    assert_eq!(job.pod_sets[0].requests["memory"].to_string(), "4296Mi");
}

#[test]
fn omitted_worker_replicas_count_as_the_crd_default_zero() {
    let mut ray_job = seed_ray_job(1);
    ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
        .as_object_mut()
        .unwrap()
        .remove("replicas");
    let job = PendingWorkload::from_object(&ray_job).unwrap();
    assert_eq!(job.pod_sets[1].count, 0);
}

#[test]
fn kueue_webhook_rejections_are_reported() {
    let mut ray_job = seed_ray_job(1);
    ray_job["metadata"]["annotations"] = json!({});
    ray_job["spec"]["shutdownAfterJobFinishes"] = json!(false);
    let prediction = run(&seed_queue_objects("default", "cluster-queue"), &[ray_job]);
    let placement = &prediction.placements[0];
    assert_eq!(placement.state, PlacementState::Rejected);
    assert!(
        reason(placement).contains("a kueue managed job should delete the cluster after finishing")
    );
    assert!(reason(placement).contains("workload slicing is enabled"));
}

#[test]
fn jobs_without_a_queue_label_are_unmanaged() {
    let mut ray_job = seed_ray_job(1);
    ray_job["metadata"]["labels"] = json!({});
    let prediction = run(&seed_queue_objects("default", "cluster-queue"), &[ray_job]);
    assert_eq!(prediction.placements[0].state, PlacementState::Unmanaged);
}

// ---------------------------------------------------------------- quota

fn tpu_queue(on_demand_tpu: &str) -> Vec<Value> {
    vec![
        pool_flavor("on-demand", "on-demand-pool"),
        pool_flavor("dws", "dws-pool"),
        cluster_queue(
            "cq",
            vec![group(
                &["google.com/tpu"],
                &[
                    ("on-demand", &[("google.com/tpu", on_demand_tpu)]),
                    ("dws", &[("google.com/tpu", "64")]),
                ],
            )],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
    ]
}

fn reserving_workload(name: &str, cluster_queue: &str, podsets: Value) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": "default", "name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "lq", "podSets": []},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
            "admission": {"clusterQueue": cluster_queue, "podSetAssignments": podsets}
        }
    })
}

/// One flavor `on-demand` with `nominal` TPUs, 16 of them held by the running Workload `running`.
fn on_demand_only(nominal: &str) -> Vec<Value> {
    let mut objects = tpu_queue(nominal);
    objects.remove(1);
    objects[1] = cluster_queue(
        "cq",
        vec![group(
            &["google.com/tpu"],
            &[("on-demand", &[("google.com/tpu", nominal)])],
        )],
        json!({}),
    );
    objects.push(reserving_workload(
        "running",
        "cq",
        json!([{"name": "main", "count": 4, "flavors": {"google.com/tpu": "on-demand"}, "resourceUsage": {"google.com/tpu": "16"}}]),
    ));
    objects
}

#[test]
fn live_usage_exhausts_on_demand_with_kueues_message() {
    let objects = on_demand_only("16");
    let prediction = run(
        &objects,
        &[batch_job(
            "default",
            "train",
            "lq",
            4,
            &[("google.com/tpu", "4")],
        )],
    );
    let placement = &prediction.placements[0];
    assert_eq!(placement.state, PlacementState::Pending);
    assert_eq!(
        reason(placement),
        "couldn't assign flavors to pod set main: insufficient unused quota for google.com/tpu in flavor on-demand, 16 more needed"
    );
    assert_eq!(prediction.usage[0].used_live.to_string(), "16");
}

/// Two running batch Jobs replaced by new runs, the old run of `a` on `a_on`, of `b` on the other
/// flavor (16 TPU each of 16).
fn replaced_runs(a_on: &str) -> Vec<Value> {
    let b_on = if a_on == "on-demand" {
        "dws"
    } else {
        "on-demand"
    };
    let mut objects = tpu_queue("16");
    objects[2] = cluster_queue(
        "cq",
        vec![group(
            &["google.com/tpu"],
            &[
                ("on-demand", &[("google.com/tpu", "16")]),
                ("dws", &[("google.com/tpu", "16")]),
            ],
        )],
        json!({}),
    );
    for (job, flavor) in [("a", a_on), ("b", b_on)] {
        let mut old = reserving_workload(
            &format!("job-{job}-old"),
            "cq",
            json!([{"name": "main", "count": 4, "flavors": {"google.com/tpu": flavor}, "resourceUsage": {"google.com/tpu": "16"}}]),
        );
        old["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": format!("old-{job}"), "controller": true}]);
        objects.push(old);
    }
    objects
}

fn tpu_flavors(prediction: &Prediction) -> Vec<(PlacementState, Option<&str>)> {
    prediction
        .placements
        .iter()
        .map(|p| (p.state, p.podsets[0].flavor.as_deref()))
        .collect()
}

/// A replaced job's old run releases its quota just before its new run arrives, each in turn:
/// new `a` finds its own old flavor free but `b`'s old run still holding the other; then `b`'s
/// old run goes and new `b` takes that flavor. Without the releases both would pend.
#[test]
fn replaced_runs_release_their_quota_just_before_their_new_runs() {
    let new_runs = jobs(&[
        batch_job("default", "a", "lq", 4, &[("google.com/tpu", "4")]),
        batch_job("default", "b", "lq", 4, &[("google.com/tpu", "4")]),
    ]);
    let released = |before_b: usize| {
        vec![
            Released {
                namespace: "default".into(),
                name: "job-a-old".into(),
                before: 0,
            },
            Released {
                namespace: "default".into(),
                name: "job-b-old".into(),
                before: before_b,
            },
        ]
    };
    for (a_on, b_on) in [("on-demand", "dws"), ("dws", "on-demand")] {
        let world = cluster(&replaced_runs(a_on));
        let prediction = predict_in_order(&world, &new_runs, &released(1));
        assert_eq!(
            tpu_flavors(&prediction),
            [
                (PlacementState::Admitted, Some(a_on)),
                (PlacementState::Admitted, Some(b_on))
            ],
            "{prediction:#?}"
        );
        // The old runs no longer count; the new ones do.
        let live: Vec<String> = prediction
            .usage
            .iter()
            .map(|u| u.used_live.to_string())
            .collect();
        let plan: Vec<String> = prediction
            .usage
            .iter()
            .map(|u| u.used_plan.to_string())
            .collect();
        assert_eq!(
            (live, plan),
            (vec!["0".to_string(); 2], vec!["16".to_string(); 2])
        );
        assert!(prediction.preempted.is_empty(), "{prediction:#?}");

        // Both old runs gone before the first: new `a` takes on-demand, whatever it ran on.
        let early = predict_in_order(&world, &new_runs, &released(0));
        assert_eq!(
            tpu_flavors(&early),
            [
                (PlacementState::Admitted, Some("on-demand")),
                (PlacementState::Admitted, Some("dws"))
            ]
        );

        let kept = predict_in_order(&world, &new_runs, &[]);
        assert_eq!(
            tpu_flavors(&kept),
            [
                (PlacementState::Pending, None),
                (PlacementState::Pending, None)
            ]
        );
    }
}

#[test]
fn a_request_above_maximum_capacity_skips_the_flavor() {
    let prediction = run(
        &tpu_queue("16"),
        &[batch_job(
            "default",
            "big",
            "lq",
            8,
            &[("google.com/tpu", "4")],
        )],
    );
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("dws"))]);
    let message = fits_ever(
        &cluster(&tpu_queue("16")),
        &jobs(&[batch_job(
            "default",
            "huge",
            "lq",
            32,
            &[("google.com/tpu", "4")],
        )])[0],
    )
    .unwrap_err();
    assert_eq!(
        message,
        "couldn't assign flavors to pod set main: insufficient quota for google.com/tpu in flavor dws, \
         previously considered podsets requests (0) + current podset request (128) > maximum capacity (64), \
         insufficient quota for google.com/tpu in flavor on-demand, previously considered podsets requests (0) \
         + current podset request (128) > maximum capacity (16)"
    );
}

#[test]
fn fits_ever_names_the_flavors_that_would_be_used() {
    let placements = fits_ever(
        &cluster(&tpu_queue("16")),
        &jobs(&[batch_job(
            "default",
            "ok",
            "lq",
            4,
            &[("google.com/tpu", "4")],
        )])[0],
    )
    .unwrap();
    assert_eq!(placements[0].flavor.as_deref(), Some("on-demand"));
}

#[test]
fn exhausted_quota_makes_later_jobs_fall_back_in_order() {
    let prediction = run(
        &tpu_queue("16"),
        &[
            batch_job("default", "a", "lq", 2, &[("google.com/tpu", "4")]),
            batch_job("default", "b", "lq", 2, &[("google.com/tpu", "4")]),
            batch_job("default", "c", "lq", 2, &[("google.com/tpu", "4")]),
        ],
    );
    let chosen: Vec<_> = prediction
        .placements
        .iter()
        .map(|p| p.podsets[0].flavor.as_deref())
        .collect();
    assert_eq!(chosen, [Some("on-demand"), Some("on-demand"), Some("dws")]);
}

#[test]
fn previously_considered_podsets_count_against_later_ones() {
    // Two podsets of 10 cpu each and a flavor with 15: the second cannot join the first.
    let objects = vec![
        pool_flavor("small", "a"),
        pool_flavor("large", "b"),
        cluster_queue(
            "cq",
            vec![group(
                &["cpu"],
                &[("small", &[("cpu", "15")]), ("large", &[("cpu", "100")])],
            )],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
    ];
    let mut ray_job = seed_ray_job(1);
    ray_job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("lq");
    ray_job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = json!(false);
    ray_job["spec"]["submissionMode"] = json!("HTTPMode");
    ray_job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"] = json!({
        "containers": [{"name": "h", "resources": {"requests": {"cpu": "10"}}}]
    });
    ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"] = json!({
        "containers": [{"name": "w", "resources": {"requests": {"cpu": "10"}}}]
    });
    ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(1);
    let prediction = run(&objects, &[ray_job]);
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("head", Some("small")), ("tpu-group", Some("large"))]
    );
}

// ---------------------------------------------------------------- flavor eligibility

fn two_pools() -> Vec<Value> {
    vec![
        pool_flavor("pool-a", "a"),
        pool_flavor("pool-b", "b"),
        cluster_queue(
            "cq",
            vec![group(
                &["cpu"],
                &[("pool-a", &[("cpu", "100")]), ("pool-b", &[("cpu", "100")])],
            )],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
    ]
}

#[test]
fn node_selector_skips_flavors_with_other_labels() {
    let selected = with(
        batch_job("default", "j", "lq", 1, &[("cpu", "1")]),
        &pod_spec_path(&["nodeSelector"]),
        json!({"cloud.google.com/gke-nodepool": "b"}),
    );
    let prediction = run(&two_pools(), &[selected]);
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("main", Some("pool-b"))]
    );
}

#[test]
fn selector_keys_no_flavor_carries_never_exclude() {
    let selected = with(
        batch_job("default", "j", "lq", 1, &[("cpu", "1")]),
        &pod_spec_path(&["nodeSelector"]),
        json!({"cloud.google.com/gke-tpu-topology": "4x4"}),
    );
    let prediction = run(&two_pools(), &[selected]);
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("main", Some("pool-a"))]
    );
}

#[test]
fn required_node_affinity_is_matched_on_flavor_labels() {
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "cloud.google.com/gke-nodepool", "operator": "NotIn", "values": ["a"]}
        ]}]
    }}});
    let selected = with(
        batch_job("default", "j", "lq", 1, &[("cpu", "1")]),
        &pod_spec_path(&["affinity"]),
        affinity,
    );
    let prediction = run(&two_pools(), &[selected]);
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("main", Some("pool-b"))]
    );
}

#[test]
fn untolerated_taints_skip_a_flavor_with_kueues_message() {
    let mut objects = two_pools();
    objects[0]["spec"]["nodeTaints"] =
        json!([{"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}]);
    let prediction = run(
        &objects,
        &[batch_job("default", "j", "lq", 1, &[("cpu", "1")])],
    );
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("main", Some("pool-b"))]
    );

    objects.remove(1);
    objects[1] = cluster_queue(
        "cq",
        vec![group(&["cpu"], &[("pool-a", &[("cpu", "100")])])],
        json!({}),
    );
    let message = fits_ever(
        &cluster(&objects),
        &jobs(&[batch_job("default", "j", "lq", 1, &[("cpu", "1")])])[0],
    )
    .unwrap_err();
    assert_eq!(
        message,
        "couldn't assign flavors to pod set main: untolerated taint {cloud.google.com/gke-queued true NoSchedule <nil>} in flavor pool-a"
    );
    let tolerating = with(
        batch_job("default", "j", "lq", 1, &[("cpu", "1")]),
        &pod_spec_path(&["tolerations"]),
        json!([{"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}]),
    );
    assert!(fits_ever(&cluster(&objects), &jobs(&[tolerating])[0]).is_ok());
}

#[test]
fn a_flavors_own_tolerations_count() {
    let mut objects = two_pools();
    objects[0]["spec"]["nodeTaints"] =
        json!([{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]);
    objects[0]["spec"]["tolerations"] =
        json!([{"key": "dedicated", "operator": "Equal", "value": "ml"}]);
    let prediction = run(
        &objects,
        &[batch_job("default", "j", "lq", 1, &[("cpu", "1")])],
    );
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("main", Some("pool-a"))]
    );
}

// ---------------------------------------------------------------- requests

#[test]
fn limits_stand_in_for_missing_requests() {
    let limits_only = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"google.com/tpu": "8"}}}
        ]}}}
    });
    let prediction = run(&tpu_queue("4"), &[limits_only]);
    // 8 chips do not fit on-demand's 4.
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("dws"))]);
}

#[test]
fn init_containers_count_when_larger() {
    let objects = vec![
        pool_flavor("small", "a"),
        pool_flavor("large", "b"),
        cluster_queue(
            "cq",
            vec![group(
                &["cpu"],
                &[("small", &[("cpu", "4")]), ("large", &[("cpu", "100")])],
            )],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
    ];
    let with_init = with(
        batch_job("default", "j", "lq", 1, &[("cpu", "2")]),
        &pod_spec_path(&["initContainers"]),
        json!([{"name": "warmup", "resources": {"requests": {"cpu": "6"}}}]),
    );
    let prediction = run(&objects, &[with_init]);
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("main", Some("large"))]
    );
}

#[test]
fn a_resource_no_group_covers_blocks_the_workload() {
    let prediction = run(
        &two_pools(),
        &[batch_job(
            "default",
            "gpu",
            "lq",
            1,
            &[("cpu", "1"), ("nvidia.com/gpu", "1")],
        )],
    );
    let placement = &prediction.placements[0];
    assert_eq!(placement.state, PlacementState::Pending);
    assert_eq!(
        reason(placement),
        "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"
    );
}

#[test]
fn requests_above_limits_make_the_workload_inadmissible() {
    let invalid = with(
        batch_job("default", "j", "lq", 1, &[("cpu", "1")]),
        &pod_spec_path(&["containers"]),
        json!([{"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]),
    );
    let prediction = run(&two_pools(), &[invalid]);
    assert_eq!(
        reason(&prediction.placements[0]),
        "resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: [\"cpu\"]: requests must not exceed its limits"
    );
}

#[test]
fn split_resource_groups_take_flavors_independently() {
    let objects = vec![
        pool_flavor("cpu-flavor", "default-pool"),
        pool_flavor("tpu-flavor", "tpu-pool"),
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [
                group(&["cpu", "memory"], &[("cpu-flavor", &[("cpu", "100"), ("memory", "100Gi")])]),
                group(&["google.com/tpu"], &[("tpu-flavor", &[("google.com/tpu", "16")])]),
            ]}
        }),
        local_queue("default", "lq", "cq"),
    ];
    let prediction = run(
        &objects,
        &[batch_job(
            "default",
            "j",
            "lq",
            4,
            &[("cpu", "8"), ("memory", "16Gi"), ("google.com/tpu", "4")],
        )],
    );
    let podset = &prediction.placements[0].podsets[0];
    assert_eq!(podset.flavor.as_deref(), Some("cpu-flavor+tpu-flavor"));
    assert_eq!(podset.flavors["google.com/tpu"], "tpu-flavor");
    assert_eq!(podset.flavors["memory"], "cpu-flavor");
}

#[test]
fn covering_pods_charges_one_per_pod() {
    let objects = vec![
        pool_flavor("f1", "a"),
        pool_flavor("f2", "b"),
        cluster_queue(
            "cq",
            vec![group(
                &["cpu", "pods"],
                &[
                    ("f1", &[("cpu", "100"), ("pods", "3")]),
                    ("f2", &[("cpu", "100"), ("pods", "10")]),
                ],
            )],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
    ];
    let prediction = run(
        &objects,
        &[batch_job("default", "j", "lq", 4, &[("cpu", "1")])],
    );
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("f2"))]);
}

// ---------------------------------------------------------------- cohorts and fungibility

/// ClusterQueue `team-a` (flavor x: 4 cpu, then y: 100 cpu) and `team-b` (x: 10 cpu) share a
/// cohort; `a_quota` customises team-a's x quota entry.
fn cohort_objects(a_quota: Value, b_quota: Value, a_extra: Value) -> Vec<Value> {
    let mut team_a = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {
            "cohortName": "research",
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "x", "resources": [a_quota]},
                {"name": "y", "resources": [{"name": "cpu", "nominalQuota": "100"}]}
            ]}]
        }
    });
    if let (Some(spec), Some(extra)) = (team_a["spec"].as_object_mut(), a_extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    vec![
        pool_flavor("x", "pool-x"),
        pool_flavor("y", "pool-y"),
        team_a,
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "team-b"},
            "spec": {
                "cohortName": "research",
                "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "x", "resources": [b_quota]}]}]
            }
        }),
        local_queue("default", "lq-a", "team-a"),
        local_queue("default", "lq-b", "team-b"),
    ]
}

fn cpu(nominal: &str) -> Value {
    json!({"name": "cpu", "nominalQuota": nominal})
}

#[test]
fn borrowing_from_the_cohort_stops_the_search_by_default() {
    let objects = cohort_objects(cpu("4"), cpu("10"), json!({}));
    let prediction = run(
        &objects,
        &[batch_job("default", "j", "lq-a", 1, &[("cpu", "8")])],
    );
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("x"))]);
    let x = prediction
        .usage
        .iter()
        .find(|u| u.cluster_queue == "team-a" && u.flavor == "x")
        .unwrap();
    assert_eq!(x.free().to_string(), "-4");
}

#[test]
fn when_can_borrow_try_next_flavor_prefers_a_flavor_without_borrowing() {
    let objects = cohort_objects(
        cpu("4"),
        cpu("10"),
        json!({"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}}),
    );
    let prediction = run(
        &objects,
        &[batch_job("default", "j", "lq-a", 1, &[("cpu", "8")])],
    );
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("y"))]);
}

#[test]
fn borrowing_limit_caps_what_a_queue_may_take() {
    let objects = cohort_objects(
        json!({"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}),
        cpu("10"),
        json!({}),
    );
    let prediction = run(
        &objects,
        &[batch_job("default", "j", "lq-a", 1, &[("cpu", "8")])],
    );
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("y"))]);
    let only_x: Vec<Value> = objects
        .iter()
        .map(|o| {
            if o["metadata"]["name"] == "team-a" {
                let mut cq = o.clone();
                cq["spec"]["resourceGroups"][0]["flavors"]
                    .as_array_mut()
                    .unwrap()
                    .truncate(1);
                cq
            } else {
                o.clone()
            }
        })
        .collect();
    let message = fits_ever(
        &cluster(&only_x),
        &jobs(&[batch_job("default", "j", "lq-a", 1, &[("cpu", "8")])])[0],
    )
    .unwrap_err();
    assert_eq!(
        message,
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor x, previously \
         considered podsets requests (0) + current podset request (8) > maximum capacity (6)"
    );
}

#[test]
fn lending_limit_keeps_capacity_out_of_the_cohort() {
    let objects = cohort_objects(
        cpu("4"),
        json!({"name": "cpu", "nominalQuota": "10", "lendingLimit": "3"}),
        json!({}),
    );
    // team-a can reach 4 + 3 = 7 on x: 8 falls through to y, 7 borrows on x.
    let prediction = run(
        &objects,
        &[
            batch_job("default", "eight", "lq-a", 1, &[("cpu", "8")]),
            batch_job("default", "seven", "lq-a", 1, &[("cpu", "7")]),
        ],
    );
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("y"))]);
    assert_eq!(flavors(&prediction.placements[1]), [("main", Some("x"))]);
    // team-b still has the 7 it did not lend.
    let b = run(
        &objects,
        &[batch_job("default", "b", "lq-b", 1, &[("cpu", "7")])],
    );
    assert_eq!(b.placements[0].state, PlacementState::Admitted);
}

#[test]
fn a_borrower_admitted_first_makes_the_next_queue_skip_then_pend() {
    // Both queues borrow from the cohort in the same cycle; team-a (name order) goes first.
    let objects = cohort_objects(cpu("5"), cpu("5"), json!({}))
        .into_iter()
        .map(|mut o| {
            if o["metadata"]["name"] == "team-a" {
                o["spec"]["resourceGroups"][0]["flavors"]
                    .as_array_mut()
                    .unwrap()
                    .truncate(1);
            }
            o
        })
        .collect::<Vec<_>>();
    let prediction = run(
        &objects,
        &[
            batch_job("default", "a", "lq-a", 1, &[("cpu", "8")]),
            batch_job("default", "b", "lq-b", 1, &[("cpu", "8")]),
        ],
    );
    assert_eq!(prediction.placements[0].state, PlacementState::Admitted);
    let b = &prediction.placements[1];
    assert_eq!(b.state, PlacementState::Pending);
    assert_eq!(
        reason(b),
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor x, 6 more needed"
    );
}

#[test]
fn a_strict_fifo_head_needing_preemption_holds_capacity_every_cycle() {
    // team-a has 6 of its 10 in use and its head needs 8: no preemption candidates, so Kueue
    // reserves the head's quota in each cycle's snapshot and team-b's borrower never fits.
    let mut objects = cohort_objects(
        cpu("10"),
        cpu("0"),
        json!({"queueingStrategy": "StrictFIFO"}),
    );
    objects[2]["spec"]["resourceGroups"][0]["flavors"]
        .as_array_mut()
        .unwrap()
        .truncate(1);
    objects.push(reserving_workload(
        "running",
        "team-a",
        json!([{"name": "main", "count": 1, "flavors": {"cpu": "x"}, "resourceUsage": {"cpu": "6"}}]),
    ));
    let prediction = run(
        &objects,
        &[
            batch_job("default", "a", "lq-a", 1, &[("cpu", "8")]),
            batch_job("default", "b", "lq-b", 1, &[("cpu", "3")]),
        ],
    );
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
    assert_eq!(
        reason(&prediction.placements[1]),
        "Workload no longer fits after processing another workload"
    );
    // With BestEffortFIFO the head is parked after one cycle and team-b's job gets in.
    objects[2]["spec"]["queueingStrategy"] = json!("BestEffortFIFO");
    let prediction = run(
        &objects,
        &[
            batch_job("default", "a", "lq-a", 1, &[("cpu", "8")]),
            batch_job("default", "b", "lq-b", 1, &[("cpu", "3")]),
        ],
    );
    assert_eq!(prediction.placements[1].state, PlacementState::Admitted);
}

// ---------------------------------------------------------------- ordering

fn single_slot() -> Vec<Value> {
    vec![
        pool_flavor("only", "pool"),
        cluster_queue(
            "cq",
            vec![group(&["cpu"], &[("only", &[("cpu", "4")])])],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
               "metadata": {"name": "urgent"}, "value": 1000}),
    ]
}

#[test]
fn higher_priority_is_admitted_first() {
    let urgent = with(
        batch_job("default", "urgent", "lq", 1, &[("cpu", "4")]),
        &["metadata", "labels", "kueue.x-k8s.io/priority-class"],
        json!("urgent"),
    );
    let prediction = run(
        &single_slot(),
        &[
            batch_job("default", "normal", "lq", 1, &[("cpu", "4")]),
            urgent,
        ],
    );
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
    assert_eq!(prediction.placements[1].state, PlacementState::Admitted);
}

#[test]
fn older_workloads_go_first_at_equal_priority() {
    let created = |name: &str, time: &str| {
        with(
            batch_job("default", name, "lq", 1, &[("cpu", "4")]),
            &["metadata", "creationTimestamp"],
            json!(time),
        )
    };
    let prediction = run(
        &single_slot(),
        &[
            created("newer", "2026-03-20T04:00:00Z"),
            created("older", "2026-03-20T03:59:51Z"),
        ],
    );
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
    assert_eq!(prediction.placements[1].state, PlacementState::Admitted);
}

#[test]
fn a_missing_priority_class_keeps_the_job_from_queueing() {
    let unknown = with(
        batch_job("default", "j", "lq", 1, &[("cpu", "1")]),
        &["metadata", "labels", "kueue.x-k8s.io/priority-class"],
        json!("nope"),
    );
    let prediction = run(&single_slot(), &[unknown]);
    assert_eq!(
        reason(&prediction.placements[0]),
        "workloadpriorityclasses.kueue.x-k8s.io \"nope\" not found"
    );
}

#[test]
fn strict_fifo_blocks_behind_a_head_that_cannot_fit() {
    let mut objects = single_slot();
    objects[1]["spec"]["queueingStrategy"] = json!("StrictFIFO");
    let prediction = run(
        &objects,
        &[
            batch_job("default", "big", "lq", 1, &[("cpu", "3")]),
            batch_job("default", "huge", "lq", 1, &[("cpu", "2")]),
            batch_job("default", "small", "lq", 1, &[("cpu", "1")]),
        ],
    );
    let states: Vec<_> = prediction.placements.iter().map(|p| p.state).collect();
    assert_eq!(
        states,
        [
            PlacementState::Admitted,
            PlacementState::Pending,
            PlacementState::Pending
        ]
    );
    assert_eq!(
        reason(&prediction.placements[2]),
        "queued behind default/huge in StrictFIFO ClusterQueue cq, which Kueue retries every cycle but cannot admit"
    );
    // BestEffortFIFO lets the small job past.
    objects[1]["spec"]["queueingStrategy"] = json!("BestEffortFIFO");
    let prediction = run(
        &objects,
        &[
            batch_job("default", "big", "lq", 1, &[("cpu", "3")]),
            batch_job("default", "huge", "lq", 1, &[("cpu", "2")]),
            batch_job("default", "small", "lq", 1, &[("cpu", "1")]),
        ],
    );
    assert_eq!(prediction.placements[2].state, PlacementState::Admitted);
}

#[test]
fn live_queued_workloads_compete_ahead_of_new_jobs() {
    let mut objects = single_slot();
    objects.push(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": "default", "name": "job-old-abc12", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"kind": "Job", "name": "old", "apiVersion": "batch/v1", "uid": "u"}]},
        "spec": {"queueName": "lq", "priority": 0, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]}
    }));
    let prediction = run(
        &objects,
        &[batch_job("default", "new", "lq", 1, &[("cpu", "2")])],
    );
    assert_eq!(prediction.queued.len(), 1);
    assert_eq!(prediction.queued[0].job, "old");
    assert_eq!(prediction.queued[0].state, PlacementState::Admitted);
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
    // Passing the owning job itself replaces its live Workload.
    let again = run(
        &objects,
        &[batch_job("default", "old", "lq", 1, &[("cpu", "3")])],
    );
    assert!(again.queued.is_empty());
}

// ---------------------------------------------------------------- queues and admission checks

#[test]
fn a_null_namespace_selector_admits_nothing() {
    let mut objects = two_pools();
    objects[2]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("namespaceSelector");
    let prediction = run(
        &objects,
        &[batch_job("default", "j", "lq", 1, &[("cpu", "1")])],
    );
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
    assert_eq!(
        reason(&prediction.placements[0]),
        "workload namespace doesn't match ClusterQueue selector"
    );
}

#[test]
fn a_namespace_selector_matches_namespace_labels() {
    let mut objects = two_pools();
    objects[2]["spec"]["namespaceSelector"] = json!({"matchLabels": {"team": "ml"}});
    let without_label = run(
        &objects,
        &[batch_job("default", "j", "lq", 1, &[("cpu", "1")])],
    );
    assert_eq!(without_label.placements[0].state, PlacementState::Pending);
    objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "ml"}}}));
    let with_label = run(
        &objects,
        &[batch_job("default", "j", "lq", 1, &[("cpu", "1")])],
    );
    assert_eq!(with_label.placements[0].state, PlacementState::Admitted);
}

#[test]
fn a_missing_flavor_or_check_makes_the_queue_inactive() {
    let mut objects = seed_queue_objects("default", "cluster-queue");
    objects.remove(2); // the dws ResourceFlavor
    let prediction = run(&objects, &[seed_ray_job(1)]);
    assert_eq!(
        reason(&prediction.placements[0]),
        "ClusterQueue cluster-queue is inactive (references missing ResourceFlavor(s): dws)"
    );

    let mut objects = seed_queue_objects("default", "cluster-queue");
    objects.retain(|o| o["kind"] != "ProvisioningRequestConfig");
    let prediction = run(&objects, &[seed_ray_job(1)]);
    assert_eq!(
        reason(&prediction.placements[0]),
        "ClusterQueue cluster-queue is inactive (references inactive AdmissionCheck(s): dws-prov)"
    );
    assert!(fits_ever(&cluster(&objects), &jobs(&[seed_ray_job(1)])[0]).is_err());
}

#[test]
fn a_missing_local_queue_is_reported() {
    let prediction = run(
        &two_pools(),
        &[batch_job("default", "j", "nope", 1, &[("cpu", "1")])],
    );
    assert_eq!(
        reason(&prediction.placements[0]),
        "LocalQueue nope doesn't exist"
    );
}

#[test]
fn checks_without_on_flavors_apply_to_every_flavor() {
    let mut objects = seed_queue_objects("default", "cluster-queue");
    objects[3]["spec"]["admissionChecksStrategy"]["admissionChecks"][0]
        .as_object_mut()
        .unwrap()
        .remove("onFlavors");
    let prediction = run(&objects, &[seed_ray_job(1)]);
    assert_eq!(
        prediction.placements[0].state,
        PlacementState::WaitingForAdmissionChecks
    );
}

#[test]
fn a_provisioning_check_passes_at_once_when_no_podset_uses_its_managed_resources() {
    // Kueue's ProvisioningRequest controller provisions only the podsets (with pods) that use
    // the config's managedResources. When none does, it marks the check Ready at once ("the
    // provisioning request is not needed") and the job is admitted without waiting. Found side
    // by side with the real Kueue (tests/it/placement_kueue.rs): a CPU-only job that spills over
    // into the seed's DWS flavor.
    let cpu_only = batch_job("default", "preprocess", "user-queue", 1, &[("cpu", "50")]);
    let prediction = run(
        &seed_queue_objects("default", "cluster-queue"),
        std::slice::from_ref(&cpu_only),
    );
    let placement = &prediction.placements[0];
    assert_eq!(flavors(placement), [("main", Some("dws"))]);
    assert_eq!(placement.state, PlacementState::Admitted);
    assert!(placement.admission_checks.is_empty());
    assert_eq!(placement.reason, None);

    // A resource listed with a zero quantity still counts as used (Kueue's `podUses` looks at
    // the names in requests and limits).
    let zero_tpu = batch_job(
        "default",
        "zero-tpu",
        "user-queue",
        1,
        &[("cpu", "50"), ("google.com/tpu", "0")],
    );
    let prediction = run(&seed_queue_objects("default", "cluster-queue"), &[zero_tpu]);
    assert_eq!(
        prediction.placements[0].state,
        PlacementState::WaitingForAdmissionChecks
    );

    // A config without managedResources provisions every podset with pods.
    let mut objects = seed_queue_objects("default", "cluster-queue");
    let config = objects
        .iter_mut()
        .find(|o| o["kind"] == "ProvisioningRequestConfig")
        .unwrap();
    config["spec"]
        .as_object_mut()
        .unwrap()
        .remove("managedResources");
    let prediction = run(&objects, &[cpu_only]);
    assert_eq!(
        prediction.placements[0].state,
        PlacementState::WaitingForAdmissionChecks
    );
    assert_eq!(prediction.placements[0].admission_checks, ["dws-prov"]);
}

#[test]
fn v1beta1_spellings_are_understood() {
    let mut objects = seed_queue_objects("default", "cluster-queue");
    let cq = &mut objects[3];
    cq["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
    let strategy = cq["spec"]
        .as_object_mut()
        .unwrap()
        .remove("admissionChecksStrategy");
    assert!(strategy.is_some());
    cq["spec"]["admissionChecks"] = json!(["dws-prov"]);
    cq["spec"]["flavorFungibility"] =
        json!({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"});
    // Quotas written as YAML numbers arrive as JSON numbers.
    cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]["nominalQuota"] = json!(16);
    let prediction = run(&objects, &[seed_ray_job(1)]);
    assert_eq!(
        flavors(&prediction.placements[0])[1],
        ("tpu-group", Some("on-demand"))
    );
}

#[test]
fn invalid_quantities_are_reported_with_their_field() {
    let mut objects = seed_queue_objects("default", "cluster-queue");
    objects[3]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] =
        json!("20Gii");
    let errors = Cluster::from_objects(&objects).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "ClusterQueue cluster-queue: spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: \
         invalid quantity \"20Gii\": unknown suffix \"Gii\"; expected one of n, u, m, k, M, G, T, P, E, \
         Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3"
    );
}

#[test]
fn observed_placements_read_workload_status() {
    let workload = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": "default", "name": "rayjob-rayjob-tpu-v6e-dws-2-1a2b3",
                     "ownerReferences": [{"kind": "RayJob", "name": "rayjob-tpu-v6e-dws-2"}]},
        "spec": {"queueName": "user-queue", "podSets": [
            {"name": "head", "count": 1}, {"name": "tpu-group", "count": 4}, {"name": "submitter", "count": 1}]},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": [
                {"name": "head", "count": 1, "flavors": {"cpu": "default-cpu", "memory": "default-cpu"}},
                {"name": "tpu-group", "count": 4, "flavors": {"cpu": "dws", "memory": "dws", "google.com/tpu": "dws"}},
                {"name": "submitter", "count": 1, "flavors": {"cpu": "default-cpu", "memory": "default-cpu"}}
            ]},
            "admissionChecks": [{"name": "dws-prov", "state": "Pending"}]
        }
    });
    let observed = gkq::placement::observed_placement(&workload).unwrap();
    assert_eq!(observed.job, "rayjob-tpu-v6e-dws-2");
    assert_eq!(observed.state, PlacementState::WaitingForAdmissionChecks);
    assert_eq!(observed.admission_checks, ["dws-prov"]);
    let predicted = run(
        &seed_queue_objects("default", "cluster-queue"),
        &[seed_ray_job(1), seed_ray_job(2)],
    );
    assert!(predicted.placements[1].differences(&observed).is_empty());
    let disagreements = predicted.placements[0].differences(&observed);
    assert_eq!(
        disagreements,
        [
            "state: predicted admitted, observed waiting-for-admission-checks",
            "podset tpu-group: predicted on-demand, observed dws"
        ]
    );
}

#[test]
fn placements_serialise_in_the_documented_shape() {
    let prediction = run(
        &seed_queue_objects("default", "cluster-queue"),
        &[seed_ray_job(1)],
    );
    let json = serde_json::to_value(&prediction.placements[0]).unwrap();
    assert_eq!(json["job"], "rayjob-tpu-v6e-dws-1");
    assert_eq!(json["state"], "admitted");
    assert_eq!(
        json["podsets"][1],
        json!({
            "name": "tpu-group", "count": 4, "flavor": "on-demand",
            "flavors": {"cpu": "on-demand", "google.com/tpu": "on-demand", "memory": "on-demand"}
        })
    );
    assert_eq!(json["reason"], Value::Null);
    let usage = serde_json::to_value(&prediction.usage[0]).unwrap();
    assert_eq!(usage["nominal"], "10");
    assert_eq!(usage["usedPlan"], "3");
}

#[test]
fn a_failed_scan_resumes_after_the_flavors_it_tried() {
    // The head fits flavor `a` and stops there; the workers then find `a` too small with the
    // head in it and `b` too small anyway. Kueue retries at once and resumes the head's scan
    // after `a`: the head moves to `b` and the workers fit `a`.
    let objects = vec![
        pool_flavor("a", "pool-a"),
        pool_flavor("b", "pool-b"),
        cluster_queue(
            "cq",
            vec![group(
                &["memory"],
                &[("a", &[("memory", "6Gi")]), ("b", &[("memory", "3Gi")])],
            )],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
    ];
    let mut ray_job = seed_ray_job(1);
    ray_job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("lq");
    ray_job["spec"]["submissionMode"] = json!("HTTPMode");
    ray_job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = json!(false);
    ray_job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"] =
        json!({"containers": [{"name": "h", "resources": {"requests": {"memory": "1Gi"}}}]});
    let worker = &mut ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0];
    worker["replicas"] = json!(3);
    worker["numOfHosts"] = json!(1);
    worker["template"]["spec"] =
        json!({"containers": [{"name": "w", "resources": {"requests": {"memory": "2Gi"}}}]});
    let prediction = run(&objects, std::slice::from_ref(&ray_job));
    assert_eq!(prediction.placements[0].state, PlacementState::Admitted);
    assert_eq!(
        flavors(&prediction.placements[0]),
        [("head", Some("b")), ("tpu-group", Some("a"))]
    );
    assert!(fits_ever(&cluster(&objects), &jobs(&[ray_job])[0]).is_ok());
}

// ---------------------------------------------------------------- classic preemption

const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";

fn workload_priority_class(name: &str, value: i32) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
           "metadata": {"name": name}, "value": value})
}

/// A ClusterQueue with `cpu` quotas per flavor, `spec.preemption` and optionally a cohort.
fn preempting_queue(
    name: &str,
    cohort: Option<&str>,
    flavors: &[(&str, &[(&str, &str)])],
    preemption: Value,
) -> Value {
    let mut cq = with(
        cluster_queue(name, vec![group(&["cpu"], flavors)], json!({})),
        &["spec", "preemption"],
        preemption,
    );
    if let Some(cohort) = cohort {
        cq["spec"]["cohortName"] = json!(cohort);
    }
    cq
}

/// The Workload Kueue made for Job `job` (one pod requesting `cpu`) in LocalQueue `queue`;
/// `admitted` is `(ClusterQueue, flavor, time)` when it holds quota since that time.
fn workload(
    job: &str,
    queue: &str,
    cpu: &str,
    priority: i32,
    created: &str,
    admitted: Option<(&str, &str, &str)>,
) -> Value {
    let mut workload = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": "default", "name": format!("job-{job}-1a2b3"),
                     "creationTimestamp": created,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job}]},
        "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main", "count": 1,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}
    });
    if let Some((cq, flavor, at)) = admitted {
        workload["status"] = json!({
            "admission": {"clusterQueue": cq, "podSetAssignments": [{"name": "main", "count": 1,
                "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": cpu}}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": at},
                {"type": "Admitted", "status": "True", "lastTransitionTime": at}
            ]
        });
    }
    workload
}

fn prioritized(job: Value, class: &str) -> Value {
    with(job, &["metadata", "labels", PRIORITY_LABEL], json!(class))
}

const T1: &str = "2026-01-01T10:00:00Z";
const T2: &str = "2026-01-01T10:00:05Z";
const T3: &str = "2026-01-01T10:00:09Z";

/// One queue of 4 cpu with `preemption`, a live job `low` at priority `low_priority` holding 3.
fn one_queue_with_a_running_job(preemption: Value, low_priority: i32) -> Vec<Value> {
    vec![
        pool_flavor("f", "pool-f"),
        preempting_queue("cq", None, &[("f", &[("cpu", "4")])], preemption),
        local_queue("default", "lq", "cq"),
        workload_priority_class("high", 1000),
        workload("low", "lq", "3", low_priority, T1, Some(("cq", "f", T1))),
    ]
}

#[test]
fn within_cluster_queue_lower_priority_preempts_a_lower_priority_running_job() {
    let objects = one_queue_with_a_running_job(json!({"withinClusterQueue": "LowerPriority"}), 100);
    let high = prioritized(
        batch_job("default", "high", "lq", 1, &[("cpu", "2")]),
        "high",
    );
    let prediction = run(&objects, &[high]);
    let placement = &prediction.placements[0];
    assert_eq!(placement.state, PlacementState::Admitted);
    assert_eq!(flavors(placement), [("main", Some("f"))]);
    assert_eq!(placement.preempts, ["default/low"]);
    let [victim] = &prediction.preempted[..] else {
        panic!("one victim: {:?}", prediction.preempted);
    };
    assert_eq!(victim.job, "low");
    assert_eq!(victim.state, PlacementState::Pending);
    assert_eq!(victim.preempted_by.as_deref(), Some("default/high"));
    assert!(
        reason(victim)
            .starts_with("preempted by default/high (prioritization in the ClusterQueue)"),
        "{}",
        reason(victim)
    );
    let usage = &prediction.usage[0];
    assert_eq!(usage.used_live.to_string(), "0");
    assert_eq!(usage.used_plan.to_string(), "2");
}

#[test]
fn lower_priority_spares_equal_priority_and_never_preempts_nothing() {
    // Equal priority is not lower: no candidates, the job pends with Kueue's quota message.
    let equal = one_queue_with_a_running_job(json!({"withinClusterQueue": "LowerPriority"}), 1000);
    // The default policies never preempt, whatever the priorities.
    let never = one_queue_with_a_running_job(json!({}), 100);
    for objects in [equal, never] {
        let high = prioritized(
            batch_job("default", "high", "lq", 1, &[("cpu", "2")]),
            "high",
        );
        let prediction = run(&objects, &[high]);
        let placement = &prediction.placements[0];
        assert_eq!(placement.state, PlacementState::Pending);
        assert!(placement.preempts.is_empty());
        assert!(prediction.preempted.is_empty());
        assert_eq!(
            reason(placement),
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor f, 1 more needed"
        );
    }
}

#[test]
fn lower_or_newer_equal_priority_preempts_only_a_newer_job_of_equal_priority() {
    // `older` was created before `newer` but queues only now (say its LocalQueue was held);
    // both have priority 0.
    let objects = |policy: &str| {
        vec![
            pool_flavor("f", "pool-f"),
            preempting_queue(
                "cq",
                None,
                &[("f", &[("cpu", "4")])],
                json!({"withinClusterQueue": policy}),
            ),
            local_queue("default", "lq", "cq"),
            workload("newer", "lq", "3", 0, T2, Some(("cq", "f", T3))),
            workload("older", "lq", "2", 0, T1, None),
        ]
    };
    let prediction = run(&objects("LowerOrNewerEqualPriority"), &[]);
    let older = &prediction.queued[0];
    assert_eq!(older.job, "older");
    assert_eq!(older.state, PlacementState::Admitted);
    assert_eq!(older.preempts, ["default/newer"]);
    assert_eq!(prediction.preempted[0].job, "newer");
    assert_eq!(prediction.preempted[0].state, PlacementState::Pending);

    let prediction = run(&objects("LowerPriority"), &[]);
    assert_eq!(prediction.queued[0].state, PlacementState::Pending);
    assert!(prediction.preempted.is_empty());

    // A job of the plan is newer than the running one: it does not preempt it.
    let objects = objects("LowerOrNewerEqualPriority")
        .into_iter()
        .filter(|o| o["metadata"]["name"] != "job-older-1a2b3")
        .collect::<Vec<_>>();
    let prediction = run(
        &objects,
        &[batch_job("default", "plan", "lq", 1, &[("cpu", "2")])],
    );
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
    assert!(prediction.preempted.is_empty());
}

#[test]
fn reclaim_within_cohort_takes_back_nominal_quota_lent_to_a_borrowing_queue() {
    // team-a lends its idle 4 cpu; team-b (nominal 2) runs a 5-cpu job by borrowing 3.
    let objects = |reclaim: &str| {
        vec![
            pool_flavor("f", "pool-f"),
            preempting_queue(
                "team-a",
                Some("co"),
                &[("f", &[("cpu", "4")])],
                json!({"reclaimWithinCohort": reclaim}),
            ),
            preempting_queue("team-b", Some("co"), &[("f", &[("cpu", "2")])], json!({})),
            local_queue("default", "lq-a", "team-a"),
            local_queue("default", "lq-b", "team-b"),
            workload("borrower", "lq-b", "5", 0, T1, Some(("team-b", "f", T1))),
        ]
    };
    let reclaimer = batch_job("default", "reclaimer", "lq-a", 1, &[("cpu", "3")]);
    let prediction = run(&objects("Any"), std::slice::from_ref(&reclaimer));
    let placement = &prediction.placements[0];
    assert_eq!(placement.state, PlacementState::Admitted);
    assert_eq!(placement.preempts, ["default/borrower"]);
    let victim = &prediction.preempted[0];
    assert_eq!(victim.state, PlacementState::Pending);
    assert!(
        reason(victim).contains("(reclamation within the cohort)"),
        "{}",
        reason(victim)
    );

    // Equal priority is not lower, and Never never reclaims.
    for policy in ["LowerPriority", "Never"] {
        let prediction = run(&objects(policy), std::slice::from_ref(&reclaimer));
        assert_eq!(prediction.placements[0].state, PlacementState::Pending);
        assert!(prediction.preempted.is_empty());
    }
}

#[test]
fn preemption_evicts_a_minimal_set_of_victims() {
    // Candidates are removed lowest priority first until the job fits, then added back when
    // the job still fits without them: `tiny` goes first but is not needed in the end.
    let objects = vec![
        pool_flavor("f", "pool-f"),
        preempting_queue(
            "cq",
            None,
            &[("f", &[("cpu", "6")])],
            json!({"withinClusterQueue": "LowerPriority"}),
        ),
        local_queue("default", "lq", "cq"),
        workload_priority_class("high", 1000),
        workload("tiny", "lq", "1", 1, T1, Some(("cq", "f", T1))),
        workload("big", "lq", "4", 2, T1, Some(("cq", "f", T2))),
        workload("spare", "lq", "1", 3, T1, Some(("cq", "f", T3))),
    ];
    let high = prioritized(
        batch_job("default", "high", "lq", 1, &[("cpu", "4")]),
        "high",
    );
    let prediction = run(&objects, &[high]);
    assert_eq!(prediction.placements[0].state, PlacementState::Admitted);
    assert_eq!(prediction.placements[0].preempts, ["default/big"]);
    let victims: Vec<&str> = prediction
        .preempted
        .iter()
        .map(|p| p.job.as_str())
        .collect();
    assert_eq!(victims, ["big"]);
}

#[test]
fn when_can_preempt_try_next_flavor_takes_a_free_flavor_instead_of_preempting() {
    let objects = |fungibility: Value| {
        let mut cq = preempting_queue(
            "cq",
            None,
            &[("f1", &[("cpu", "2")]), ("f2", &[("cpu", "2")])],
            json!({"withinClusterQueue": "LowerPriority"}),
        );
        cq["spec"]["flavorFungibility"] = fungibility;
        vec![
            pool_flavor("f1", "pool-1"),
            pool_flavor("f2", "pool-2"),
            cq,
            local_queue("default", "lq", "cq"),
            workload_priority_class("high", 1000),
            workload("low", "lq", "2", 0, T1, Some(("cq", "f1", T1))),
        ]
    };
    let high = prioritized(
        batch_job("default", "high", "lq", 1, &[("cpu", "2")]),
        "high",
    );
    // The default (TryNextFlavor): f1 could preempt `low`, f2 fits as it is.
    let prediction = run(&objects(json!({})), std::slice::from_ref(&high));
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("f2"))]);
    assert!(prediction.placements[0].preempts.is_empty());
    assert!(prediction.preempted.is_empty());
    // MayStopSearch stops at the first flavor where preemption helps.
    let prediction = run(
        &objects(json!({"whenCanPreempt": "MayStopSearch"})),
        std::slice::from_ref(&high),
    );
    assert_eq!(flavors(&prediction.placements[0]), [("main", Some("f1"))]);
    assert_eq!(prediction.placements[0].preempts, ["default/low"]);
}

#[test]
fn borrow_within_cohort_preempts_only_below_its_threshold_while_borrowing() {
    // Three queues of 2 cpu share a cohort; team-b borrows 2 to run `small` (priority 10) and
    // `mid` (priority 50). `wide` needs 4 in team-a, so team-a borrows even after preempting:
    // only candidates at or below maxPriorityThreshold may go then.
    let objects = |threshold: i32| {
        vec![
            pool_flavor("f", "pool-f"),
            preempting_queue(
                "team-a",
                Some("co"),
                &[("f", &[("cpu", "2")])],
                json!({"reclaimWithinCohort": "LowerPriority",
                       "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": threshold}}),
            ),
            preempting_queue("team-b", Some("co"), &[("f", &[("cpu", "2")])], json!({})),
            preempting_queue("team-c", Some("co"), &[("f", &[("cpu", "2")])], json!({})),
            local_queue("default", "lq-a", "team-a"),
            local_queue("default", "lq-b", "team-b"),
            workload_priority_class("high", 1000),
            workload("small", "lq-b", "2", 10, T1, Some(("team-b", "f", T1))),
            workload("mid", "lq-b", "2", 50, T1, Some(("team-b", "f", T2))),
        ]
    };
    let wide = prioritized(
        batch_job("default", "wide", "lq-a", 1, &[("cpu", "4")]),
        "high",
    );
    let prediction = run(&objects(20), std::slice::from_ref(&wide));
    assert_eq!(prediction.placements[0].state, PlacementState::Admitted);
    assert_eq!(prediction.placements[0].preempts, ["default/small"]);
    assert!(
        reason(&prediction.preempted[0])
            .contains("(reclamation within the cohort while borrowing)"),
        "{}",
        reason(&prediction.preempted[0])
    );
    let prediction = run(&objects(5), std::slice::from_ref(&wide));
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
    assert!(prediction.preempted.is_empty());
}

// ---------------------------------------------------------------- stopped and deleted queues (1g)

/// A Workload of job `job` in LocalQueue `queue` asking for 3 cpu, with `conditions` and, when
/// it holds quota, an admission to `cq` on flavor `only`.
fn live_workload(job: &str, queue: &str, created: &str, conditions: Value) -> Value {
    let holds = conditions
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True");
    let mut w = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": "default", "name": format!("job-{job}-abc12"), "creationTimestamp": created,
                     "ownerReferences": [{"kind": "Job", "name": job, "apiVersion": "batch/v1", "uid": job}]},
        "spec": {"queueName": queue, "priority": 0, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}}]},
        "status": {"conditions": conditions}
    });
    if holds {
        w["status"]["admission"] = json!({"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {"cpu": "only"}, "resourceUsage": {"cpu": "3"}}]});
    }
    w
}

/// `(job, state)` of each live Workload predicted alongside.
fn queued_states(prediction: &Prediction) -> Vec<(&str, PlacementState)> {
    prediction
        .queued
        .iter()
        .map(|p| (p.job.as_str(), p.state))
        .collect()
}

fn admitted() -> Value {
    json!([{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}])
}

fn reserved() -> Value {
    json!([{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "False"}])
}

fn stopped_local_queue(policy: &str) -> Value {
    let mut lq = local_queue("default", "lq", "cq");
    lq["spec"]["stopPolicy"] = json!(policy);
    lq
}

#[test]
fn a_stopped_local_queue_takes_back_reserved_quota_and_keeps_admitted_work() {
    let mut objects = single_slot();
    objects[2] = stopped_local_queue("Hold");
    objects.push(local_queue("default", "other", "cq"));
    let waiting = live_workload("waiting", "lq", "2026-01-01T00:00:00Z", reserved());
    objects.push(waiting);
    let prediction = run(
        &objects,
        &[batch_job("default", "next", "other", 1, &[("cpu", "3")])],
    );
    // The reservation is taken back: the next job of another LocalQueue gets the quota.
    assert_eq!(prediction.placements[0].state, PlacementState::Admitted);
    assert_eq!(prediction.queued[0].job, "waiting");
    assert_eq!(prediction.queued[0].state, PlacementState::Pending);
    assert_eq!(
        reason(&prediction.queued[0]),
        "loses its quota reservation: LocalQueue lq is stopped; then: LocalQueue lq is inactive"
    );

    // Admitted work keeps its quota under Hold...
    let last = objects.len() - 1;
    objects[last] = live_workload("running", "lq", "2026-01-01T00:00:00Z", admitted());
    let held = run(
        &objects,
        &[batch_job("default", "next", "other", 1, &[("cpu", "3")])],
    );
    assert!(held.queued.is_empty());
    assert_eq!(held.placements[0].state, PlacementState::Pending);
    // ...and is evicted by HoldAndDrain.
    objects[2] = stopped_local_queue("HoldAndDrain");
    let drained = run(
        &objects,
        &[batch_job("default", "next", "other", 1, &[("cpu", "3")])],
    );
    assert_eq!(drained.placements[0].state, PlacementState::Admitted);
    assert_eq!(
        reason(&drained.queued[0]),
        "would be evicted: its LocalQueue's stopPolicy is HoldAndDrain; then: LocalQueue lq is inactive"
    );
}

#[test]
fn a_missing_local_queue_or_a_deleted_cluster_queue_leaves_admitted_work_alone() {
    let mut objects = single_slot();
    objects.remove(2);
    objects.push(local_queue("default", "other", "cq"));
    objects.push(live_workload(
        "running",
        "lq",
        "2026-01-01T00:00:00Z",
        admitted(),
    ));
    let prediction = run(
        &objects,
        &[batch_job("default", "next", "other", 1, &[("cpu", "3")])],
    );
    assert!(prediction.queued.is_empty());
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);

    // A reservation of a Workload whose LocalQueue is gone is taken back; Kueue retries the
    // Workloads parked in the ClusterQueue through that LocalQueue, so only a job submitted
    // later gets the quota.
    let last = objects.len() - 1;
    objects[last] = live_workload("waiting", "lq", "2026-01-01T00:00:00Z", reserved());
    let parked = json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]);
    objects.push(live_workload(
        "parked",
        "other",
        "2026-01-01T00:00:00Z",
        parked,
    ));
    let next = jobs(&[batch_job("default", "next", "other", 1, &[("cpu", "3")])]);
    let prediction = gkq::placement::predict_in_order(&cluster(&objects), &next, &[]);
    assert_eq!(
        queued_states(&prediction),
        [
            ("parked", PlacementState::Pending),
            ("waiting", PlacementState::Pending)
        ]
    );
    assert_eq!(
        reason(&prediction.queued[1]),
        "loses its quota reservation: LocalQueue lq is terminating or missing; then: LocalQueue lq doesn't exist"
    );
    assert_eq!(prediction.placements[0].state, PlacementState::Admitted);

    // A ClusterQueue being deleted admits nothing, and takes back reserved quota.
    let mut terminating = single_slot();
    terminating[1]["metadata"]["deletionTimestamp"] = json!("2026-01-02T00:00:00Z");
    terminating.push(live_workload(
        "waiting",
        "lq",
        "2026-01-01T00:00:00Z",
        reserved(),
    ));
    let prediction = run(
        &terminating,
        &[batch_job("default", "next", "lq", 1, &[("cpu", "1")])],
    );
    assert_eq!(
        reason(&prediction.placements[0]),
        "ClusterQueue cq is inactive (is terminating)"
    );
    assert_eq!(
        reason(&prediction.queued[0]),
        "loses its quota reservation: ClusterQueue cq is terminating or missing; then: ClusterQueue cq is inactive (is terminating)"
    );
}

#[test]
fn a_drained_workload_queues_again_behind_the_ones_that_waited() {
    let mut objects = single_slot();
    let drained = json!([
        {"type": "QuotaReserved", "status": "False", "reason": "Pending"},
        {"type": "Evicted", "status": "True", "reason": "ClusterQueueStopped"},
        {"type": "Requeued", "status": "False", "reason": "ClusterQueueStopped"}]);
    let waiting = json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]);
    objects.push(live_workload(
        "drained",
        "lq",
        "2026-01-01T00:00:00Z",
        drained,
    ));
    objects.push(live_workload(
        "waited",
        "lq",
        "2026-01-01T00:05:00Z",
        waiting,
    ));
    let prediction = predict(&cluster(&objects), &[]);
    assert_eq!(
        queued_states(&prediction),
        [
            ("drained", PlacementState::Pending),
            ("waited", PlacementState::Admitted)
        ]
    );
    // A job submitted after the resume comes after both.
    let prediction = gkq::placement::predict_in_order(
        &cluster(&objects[..objects.len() - 1]),
        &jobs(&[batch_job("default", "later", "lq", 1, &[("cpu", "3")])]),
        &[],
    );
    assert_eq!(prediction.queued[0].state, PlacementState::Admitted);
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
}

#[test]
fn a_workload_takes_its_priority_from_the_class_it_names() {
    let mut objects = single_slot();
    let waiting = || json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]);
    let mut old = live_workload("old", "lq", "2026-01-01T00:00:00Z", waiting());
    old["spec"]["priority"] = json!(500);
    let mut classed = live_workload("classed", "lq", "2026-01-01T00:05:00Z", waiting());
    classed["spec"]["priority"] = json!(10);
    classed["spec"]["priorityClassRef"] =
        json!({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "urgent"});
    objects.push(old);
    objects.push(classed);
    // `urgent` is worth 1000 now: the classed Workload goes first, whatever its spec says.
    let prediction = predict(&cluster(&objects), &[]);
    assert_eq!(prediction.queued[1].job, "classed");
    assert_eq!(prediction.queued[1].state, PlacementState::Admitted);
    assert_eq!(prediction.queued[0].state, PlacementState::Pending);
    // Without the class its recorded priority counts.
    objects.retain(|o| o["kind"] != "WorkloadPriorityClass");
    let prediction = predict(&cluster(&objects), &[]);
    assert_eq!(prediction.queued[0].state, PlacementState::Admitted);
}

// ---------------------------------------------------------------- what `gkq explain` offers

/// The remedies for job `index` of `job_objects` over `cluster_objects`.
fn fixes_for(cluster_objects: &[Value], job_objects: &[Value], index: usize) -> Vec<Remedy> {
    let world = World {
        cluster: cluster(cluster_objects),
        jobs: jobs(job_objects),
        released: Vec::new(),
    };
    remedies(&world, Subject::Job(index), &NodeResources::default())
}

fn quota_changes(remedy: &Remedy) -> Vec<(&str, &str, String, String)> {
    remedy
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::Quota {
                flavor,
                resource,
                from,
                to,
                ..
            } => Some((
                flavor.as_str(),
                resource.as_str(),
                from.to_string(),
                to.to_string(),
            )),
            _ => None,
        })
        .collect()
}

/// The scenarios of this file, each checked for the property every explain fix keeps (made
/// alone, it admits the job), with the fixes counted so that the sweep cannot pass empty.
#[test]
fn every_fix_offered_in_these_scenarios_admits_its_job() {
    let seed = seed_queue_objects("default", "cluster-queue");
    let seed_jobs: Vec<Value> = (1..=5).map(seed_ray_job).collect();
    let mut lowered = tpu_queue("12");
    lowered.push(reserving_workload(
        "running",
        "cq",
        json!([{"name": "main", "count": 4, "flavors": {"google.com/tpu": "on-demand"}, "resourceUsage": {"google.com/tpu": "16"}}]),
    ));
    let tpu_jobs = vec![
        batch_job("default", "a", "lq", 4, &[("google.com/tpu", "4")]),
        batch_job("default", "huge", "lq", 40, &[("google.com/tpu", "4")]),
    ];
    let one_queue = one_queue_with_a_running_job(json!({}), 100);
    let preempting =
        one_queue_with_a_running_job(json!({"withinClusterQueue": "LowerPriority"}), 100);
    let small_jobs = vec![
        batch_job("default", "two", "lq", 1, &[("cpu", "2")]),
        batch_job("default", "five", "lq", 1, &[("cpu", "5")]),
    ];
    let cohort = cohort_objects(cpu("4"), cpu("10"), json!({}));
    let cohort_jobs = vec![
        batch_job("default", "b", "lq-b", 1, &[("cpu", "12")]),
        batch_job("default", "a", "lq-a", 1, &[("cpu", "120")]),
    ];
    let pools = two_pools();
    let scenarios: Vec<(&[Value], Vec<Value>)> = vec![
        (&seed, seed_jobs),
        (&lowered, tpu_jobs),
        (&one_queue, small_jobs.clone()),
        (&preempting, small_jobs),
        (&cohort, cohort_jobs),
        (
            &pools,
            vec![with_pod(
                batch_job("default", "elsewhere", "lq", 1, &[("cpu", "1")]),
                "nodeSelector",
                json!({"cloud.google.com/gke-nodepool": "c"}),
            )],
        ),
    ];
    let mut checked = 0;
    for (objects, job_objects) in &scenarios {
        checked +=
            crate::support::kueue::check_every_fix_admits(&cluster(objects), &jobs(job_objects));
    }
    assert!(checked >= 8, "only {checked} fixes were offered");
}

/// The seed's fourth RayJob waits because the heads exhausted `default-cpu`: the fix raises that
/// quota by the head's 2500m (its submitter, which selects no pool, then goes to `on-demand`),
/// never moves the head's pinned node selector and never gives TPUs to the CPU flavor.
#[test]
fn the_seeds_fourth_job_gets_cpu_for_its_head_not_a_new_selector() {
    let fixes = fixes_for(
        &seed_queue_objects("default", "cluster-queue"),
        &(1..=4).map(seed_ray_job).collect::<Vec<_>>(),
        3,
    );
    assert!(!fixes.is_empty());
    for fix in &fixes {
        for change in &fix.changes {
            assert!(
                !matches!(change, Change::NodeSelector { .. }),
                "moves a pinned selector: {change:?}"
            );
            if let Change::Quota {
                flavor, resource, ..
            } = change
            {
                assert!(
                    !(flavor == "default-cpu" && resource == "google.com/tpu"),
                    "{change:?}"
                );
            }
        }
    }
    let raise = fixes
        .iter()
        .find(|f| f.changes.iter().all(|c| matches!(c, Change::Quota { .. })))
        .expect("a quota fix");
    assert_eq!(
        quota_changes(raise),
        [("default-cpu", "cpu", "10".to_string(), "11500m".to_string())]
    );
}

/// A quota lowered below what running work holds: the fix counts that usage (16 held, 12
/// nominal, 16 more asked: at least 32), and one less does not do.
#[test]
fn a_lowered_quota_is_raised_above_the_usage_it_is_under() {
    let mut objects = on_demand_only("12");
    let job = batch_job("default", "train", "lq", 4, &[("google.com/tpu", "4")]);
    let fixes = fixes_for(&objects, std::slice::from_ref(&job), 0);
    let [fix] = &fixes[..] else {
        panic!("one fix: {fixes:#?}");
    };
    assert_eq!(
        quota_changes(fix),
        [(
            "on-demand",
            "google.com/tpu",
            "12".to_string(),
            "32".to_string()
        )]
    );
    let short = with(
        objects[1].clone(),
        &["spec", "resourceGroups"],
        json!([group(
            &["google.com/tpu"],
            &[("on-demand", &[("google.com/tpu", "31")])]
        )]),
    );
    objects[1] = short;
    let prediction = run(&objects, &[job]);
    assert_eq!(prediction.placements[0].state, PlacementState::Pending);
}

/// A TPU job with no node selector in a group whose CPU flavor has no TPU quota: quota is raised
/// in the TPU flavor only.
#[test]
fn no_fix_gives_tpus_to_a_flavor_whose_nodes_have_none() {
    let objects = vec![
        pool_flavor("default-cpu", "default-pool"),
        pool_flavor("on-demand", "tpu-pool"),
        cluster_queue(
            "cq",
            vec![group(
                &["cpu", "google.com/tpu"],
                &[
                    ("default-cpu", &[("cpu", "64"), ("google.com/tpu", "0")]),
                    ("on-demand", &[("cpu", "64"), ("google.com/tpu", "16")]),
                ],
            )],
            json!({}),
        ),
        local_queue("default", "lq", "cq"),
    ];
    let job = batch_job(
        "default",
        "big",
        "lq",
        8,
        &[("cpu", "1"), ("google.com/tpu", "4")],
    );
    let fixes = fixes_for(&objects, &[job], 0);
    let raises: Vec<_> = fixes.iter().flat_map(quota_changes).collect();
    assert_eq!(
        raises,
        [(
            "on-demand",
            "google.com/tpu",
            "16".to_string(),
            "32".to_string()
        )]
    );
}

/// Preemption where it admits the job: the policy turned on and a priority above the running
/// job's (the cluster's WorkloadPriorityClass `high`), naming the victim; ranked before raising
/// the quota.
#[test]
fn preemption_is_offered_with_the_priority_to_set_and_the_victim() {
    let objects = one_queue_with_a_running_job(json!({}), 100);
    let job = batch_job("default", "two", "lq", 1, &[("cpu", "2")]);
    let fixes = fixes_for(&objects, &[job], 0);
    let preempt = fixes
        .iter()
        .position(|f| !f.placement.preempts.is_empty())
        .expect("a preemption fix");
    let fix = &fixes[preempt];
    assert_eq!(fix.placement.preempts, ["default/low"]);
    assert!(fix.changes.contains(&Change::WithinClusterQueue {
        cluster_queue: "cq".into(),
        from: "Never".into(),
        to: "LowerPriority".into(),
    }));
    assert!(fix.changes.contains(&Change::Priority {
        class: "high".into(),
        value: 1000,
        exists: true,
        from: 0,
    }));
    let raise = fixes
        .iter()
        .position(|f| !quota_changes(f).is_empty())
        .expect("a quota fix");
    assert_eq!(
        quota_changes(&fixes[raise]),
        [("f", "cpu", "4".to_string(), "5".to_string())]
    );
    assert!(preempt < raise, "preemption costs no capacity: {fixes:#?}");
}

/// In a cohort whose other queue borrows the quota this one lends: `reclaimWithinCohort` (equal
/// priority: `Any`), never "put the queue in a cohort"; a queue in no cohort is offered the one
/// whose unused quota admits the job.
#[test]
fn reclaim_is_offered_in_a_cohort_and_a_cohort_only_to_a_queue_in_none() {
    let objects = vec![
        pool_flavor("f", "pool-f"),
        preempting_queue("team-a", Some("co"), &[("f", &[("cpu", "4")])], json!({})),
        preempting_queue("team-b", Some("co"), &[("f", &[("cpu", "2")])], json!({})),
        preempting_queue("solo", None, &[("f", &[("cpu", "1")])], json!({})),
        local_queue("default", "lq-a", "team-a"),
        local_queue("default", "lq-b", "team-b"),
        local_queue("default", "lq-solo", "solo"),
        workload("borrower", "lq-b", "5", 0, T1, Some(("team-b", "f", T1))),
    ];
    let reclaimer = batch_job("default", "reclaimer", "lq-a", 1, &[("cpu", "3")]);
    let fixes = fixes_for(&objects, std::slice::from_ref(&reclaimer), 0);
    assert!(
        fixes
            .iter()
            .all(|f| !f.changes.iter().any(|c| matches!(c, Change::Cohort { .. }))),
        "{fixes:#?}"
    );
    let reclaim = fixes
        .iter()
        .find(|f| {
            f.changes
                .iter()
                .any(|c| matches!(c, Change::ReclaimWithinCohort { to, .. } if to == "Any"))
        })
        .expect("reclaimWithinCohort: Any");
    assert_eq!(reclaim.placement.preempts, ["default/borrower"]);

    // `solo` has 1 cpu and no cohort; `co` has 1 unused (6 nominal, 5 used): joining admits 2.
    let lonely = batch_job("default", "lonely", "lq-solo", 1, &[("cpu", "2")]);
    let fixes = fixes_for(&objects, &[lonely], 0);
    assert!(
        fixes.iter().any(|f| f.changes
            == [Change::Cohort {
                cluster_queue: "solo".into(),
                cohort: "co".into()
            }]),
        "{fixes:#?}"
    );
}

/// A taint keeps the job off the only flavor with room: a toleration for it; a node selector no
/// flavor carries: the selector set to a flavor's label.
#[test]
fn tolerations_and_selectors_that_pick_no_flavor_are_fixed_on_the_job() {
    let mut objects = two_pools();
    objects[1]["spec"]["nodeTaints"] =
        json!([{"key": "dedicated", "value": "b", "effect": "NoSchedule"}]);
    objects[2] = cluster_queue(
        "cq",
        vec![group(
            &["cpu"],
            &[("pool-a", &[("cpu", "1")]), ("pool-b", &[("cpu", "100")])],
        )],
        json!({}),
    );
    let big = batch_job("default", "big", "lq", 1, &[("cpu", "8")]);
    let fixes = fixes_for(&objects, &[big], 0);
    assert!(
        matches!(&fixes[0].changes[..], [Change::Toleration { flavor, key, .. }] if flavor == "pool-b" && key == "dedicated"),
        "{fixes:#?}"
    );
    let lost = with_pod(
        batch_job("default", "lost", "lq", 1, &[("cpu", "1")]),
        "nodeSelector",
        json!({"cloud.google.com/gke-nodepool": "c"}),
    );
    let fixes = fixes_for(&two_pools(), &[lost], 0);
    assert!(
        fixes.iter().any(|f| matches!(&f.changes[..], [Change::NodeSelector { key, to, .. }] if key == "cloud.google.com/gke-nodepool" && to == "a")),
        "{fixes:#?}"
    );
}
