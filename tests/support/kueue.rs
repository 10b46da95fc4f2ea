//! Kueue objects as JSON, as a user would apply them: the builders every test uses, and the
//! seed's queue setup and RayJob (Google's guide "Optimize AI training on TPUs with DWS and
//! Kueue", <https://cloud.google.com/kubernetes-engine/docs/tutorials/ray-kueue-dws>; copies in
//! `tests/fixtures/seed/`) in `kueue.x-k8s.io/v1beta2`, with `${ONDEMAND_NODEPOOL}=on-demand-pool`
//! and `${DWS_NODEPOOL}=dws-pool`.

use serde_json::{Value, json};

pub const KUEUE: &str = "kueue.x-k8s.io/v1beta2";
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
pub const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";

pub fn flavor(name: &str, node_labels: Value) -> Value {
    json!({
        "apiVersion": KUEUE, "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": node_labels}
    })
}

/// A flavor labelled with its node pool.
pub fn pool_flavor(name: &str, pool: &str) -> Value {
    flavor(name, json!({"cloud.google.com/gke-nodepool": pool}))
}

/// A resource group: `flavors` are `(flavor, [(resource, nominal)])` in the order Kueue tries
/// them.
pub fn group(covered: &[&str], flavors: &[(&str, &[(&str, &str)])]) -> Value {
    json!({
        "coveredResources": covered,
        "flavors": flavors.iter().map(|(name, quotas)| json!({
            "name": name,
            "resources": quotas.iter().map(|(r, q)| json!({"name": r, "nominalQuota": q})).collect::<Vec<_>>()
        })).collect::<Vec<_>>()
    })
}

/// A ClusterQueue open to every namespace; `extra` is merged into its spec.
pub fn cluster_queue(name: &str, groups: Vec<Value>, extra: Value) -> Value {
    let mut cq = json!({
        "apiVersion": KUEUE, "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": groups}
    });
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            cq["spec"][k] = v.clone();
        }
    }
    cq
}

pub fn local_queue(namespace: &str, name: &str, cluster_queue: &str) -> Value {
    json!({
        "apiVersion": KUEUE, "kind": "LocalQueue",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"clusterQueue": cluster_queue}
    })
}

pub fn workload_priority_class(name: &str, value: i32) -> Value {
    json!({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value})
}

/// A batch Job in `queue` with one podset `main` of `count` pods, each requesting (and limited
/// to) `requests`. Kueue's webhook suspends it on creation.
pub fn batch_job(
    namespace: &str,
    name: &str,
    queue: &str,
    count: i64,
    requests: &[(&str, &str)],
) -> Value {
    let requests: serde_json::Map<String, Value> = requests
        .iter()
        .map(|(r, q)| (r.to_string(), json!(q)))
        .collect();
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": namespace, "name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "parallelism": count, "completions": count,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": requests.clone(), "limits": requests}}]
            }}
        }
    })
}

/// Sets `path` in `object` (creating objects on the way).
pub fn with(mut object: Value, path: &[&str], value: Value) -> Value {
    let mut target = &mut object;
    for key in &path[..path.len() - 1] {
        target = target
            .as_object_mut()
            .expect("object")
            .entry(key.to_string())
            .or_insert_with(|| json!({}));
    }
    target[path[path.len() - 1]] = value;
    object
}

/// [`with`] for a batch Job's pod spec.
pub fn with_pod(object: Value, field: &str, value: Value) -> Value {
    with(object, &["spec", "template", "spec", field], value)
}

pub fn with_label(object: Value, key: &str, value: &str) -> Value {
    with(object, &["metadata", "labels", key], json!(value))
}

// ---------------------------------------------------------------- the seed

/// The seed's cluster-scoped objects besides its ClusterQueue, in the order of
/// `dws-tpu-queue.yaml`: the ResourceFlavors `default-cpu`, `on-demand` and `dws`, the
/// AdmissionCheck `dws-prov` and the ProvisioningRequestConfig `dws-config`.
pub fn seed_shared_objects() -> Vec<Value> {
    let mut objects = seed_flavors();
    objects.extend(seed_check());
    objects
}

fn seed_flavors() -> Vec<Value> {
    vec![
        pool_flavor("default-cpu", "default-pool"),
        pool_flavor("on-demand", "on-demand-pool"),
        pool_flavor("dws", "dws-pool"),
    ]
}

fn seed_check() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": KUEUE, "kind": "AdmissionCheck",
            "metadata": {"name": "dws-prov"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "dws-config"
                }
            }
        }),
        json!({
            "apiVersion": KUEUE, "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "dws-config"},
            "spec": {
                "provisioningClassName": "queued-provisioning.gke.io",
                "managedResources": ["google.com/tpu"]
            }
        }),
    ]
}

/// The seed's ClusterQueue (`cluster-queue` in the seed) named `name`: one resource group over
/// cpu, memory and TPUs with `default-cpu`, `on-demand` and `dws`, and the `dws-prov` check on
/// `dws`.
pub fn seed_cluster_queue(name: &str) -> Value {
    cluster_queue(
        name,
        vec![group(
            &["cpu", "memory", "google.com/tpu"],
            &[
                (
                    "default-cpu",
                    &[("cpu", "10"), ("memory", "20Gi"), ("google.com/tpu", "0")],
                ),
                (
                    "on-demand",
                    &[("cpu", "40"), ("memory", "75Gi"), ("google.com/tpu", "16")],
                ),
                (
                    "dws",
                    &[
                        ("cpu", "1000000000"),
                        ("memory", "1000000000Gi"),
                        ("google.com/tpu", "1000000000"),
                    ],
                ),
            ],
        )],
        json!({"admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov", "onFlavors": ["dws"]}]}}),
    )
}

/// The seed's `dws-tpu-queue.yaml` in its order: three flavors, [`seed_cluster_queue`] named
/// `cluster_queue`, the LocalQueue `user-queue` in `namespace`, the AdmissionCheck and the
/// ProvisioningRequestConfig.
pub fn seed_queue_objects(namespace: &str, cluster_queue: &str) -> Vec<Value> {
    let mut objects = seed_flavors();
    objects.push(seed_cluster_queue(cluster_queue));
    objects.push(local_queue(namespace, "user-queue", cluster_queue));
    objects.extend(seed_check());
    objects
}

/// The seed's RayJob `rayjob-tpu-v6e-dws-${JOB_ID}`: head 2 CPU/4Gi on default-pool; one TPU
/// worker group of 4 hosts x (8 CPU, 16Gi, 4 google.com/tpu), limits = requests; tolerations for
/// the TPU and DWS (`cloud.google.com/gke-queued`) taints. Created suspended, as gkq does.
pub fn seed_ray_job(job_id: u32) -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {
            "name": format!("rayjob-tpu-v6e-dws-{job_id}"),
            "labels": {QUEUE_LABEL: "user-queue"},
            "annotations": {"kueue.x-k8s.io/elastic-job": "true"}
        },
        "spec": {
            "suspend": true,
            "shutdownAfterJobFinishes": true,
            "entrypoint": "python /app/train.py",
            "runtimeEnvYAML": "pip:\n  - jax[tpu]==0.8.2\n  - pandas==2.3.3\n",
            "rayClusterSpec": {
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {
                        "nodeSelector": {"cloud.google.com/gke-nodepool": "default-pool"},
                        "containers": [{
                            "name": "ray-head",
                            "image": "rayproject/ray:2.53.0-py311",
                            "ports": [
                                {"containerPort": 6379, "name": "gcs-server"},
                                {"containerPort": 8265, "name": "dashboard"},
                                {"containerPort": 10001, "name": "client"}
                            ],
                            "resources": {
                                "limits": {"cpu": "2", "memory": "4Gi"},
                                "requests": {"cpu": "2", "memory": "4Gi"}
                            },
                            "volumeMounts": [{"mountPath": "/app", "name": "train-script-volume"}]
                        }],
                        "volumes": [{"name": "train-script-volume", "configMap": {"name": "jax-train-script"}}]
                    }}
                },
                "workerGroupSpecs": [{
                    "replicas": 1, "minReplicas": 1, "maxReplicas": 2, "numOfHosts": 4,
                    "groupName": "tpu-group",
                    "rayStartParams": {},
                    "template": {"spec": {
                        "tolerations": [
                            {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}
                        ],
                        "containers": [{
                            "name": "ray-worker",
                            "image": "rayproject/ray:2.53.0-py311",
                            "resources": {
                                "limits": {"cpu": "8", "google.com/tpu": "4", "memory": "16Gi"},
                                "requests": {"cpu": "8", "google.com/tpu": "4", "memory": "16Gi"}
                            },
                            "volumeMounts": [{"mountPath": "/app", "name": "train-script-volume"}]
                        }],
                        "volumes": [{"name": "train-script-volume", "configMap": {"name": "jax-train-script"}}],
                        "nodeSelector": {
                            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                            "cloud.google.com/gke-tpu-topology": "4x4"
                        }
                    }}
                }]
            }
        }
    })
}

/// The property every `gkq explain` fix keeps, checked for each pending job of `jobs` (a plan's,
/// in submission order) and each pending live Workload of `cluster`: every remedy, made alone in a
/// fresh copy of the world and predicted again here, admits the job (or reserves its quota for
/// its admission checks); remedies come cheapest first; no quota goes to a flavor whose nodes
/// lack the resource (an extended resource no queue gives the flavor); a node selector is moved
/// only for a podset that no flavor suits (never one that picks a flavor); a cohort is offered
/// only to a queue in none; raised quotas and priorities go up. Returns how many fixes it
/// checked.
pub fn check_every_fix_admits(
    cluster: &gkq::placement::Cluster,
    jobs: &[gkq::placement::PendingWorkload],
) -> usize {
    use gkq::placement::remedy::{Change, NodeResources, Subject, World, remedies};
    use gkq::placement::{AttemptProblem, Placement, PlacementState};

    let world = World {
        cluster: cluster.clone(),
        jobs: jobs.to_vec(),
        released: Vec::new(),
    };
    let placement_in = |world: &World, subject: Subject| -> Placement {
        world.placement_of(subject).expect("the job is predicted")
    };
    let subjects: Vec<Subject> = (0..jobs.len())
        .map(Subject::Job)
        .chain((0..cluster.pending_workloads.len()).map(Subject::Queued))
        .collect();
    let offered = |flavor: &str, resource: &str| {
        !resource.contains('/')
            || cluster
                .cluster_queues
                .iter()
                .flat_map(|q| &q.resource_groups)
                .chain(cluster.cohorts.iter().flat_map(|c| &c.resource_groups))
                .flat_map(|g| &g.flavors)
                .filter(|f| f.flavor == flavor)
                .flat_map(|f| &f.resources)
                .any(|q| q.resource == resource && !q.nominal.is_zero())
    };
    let mut checked = 0;
    for subject in subjects {
        let base = placement_in(&world, subject);
        if base.state != PlacementState::Pending {
            continue;
        }
        let found = remedies(&world, subject, &NodeResources::default());
        for pair in found.windows(2) {
            assert!(
                pair[0].cost <= pair[1].cost,
                "not cheapest first: {found:#?}"
            );
        }
        for remedy in &found {
            let mut changed = world.clone();
            remedy.apply(&mut changed, subject);
            let after = placement_in(&changed, subject);
            assert!(
                matches!(
                    after.state,
                    PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks
                ),
                "{} is still {:?} ({:?}) after the fix {:#?}",
                base.job,
                after.state,
                after.reason,
                remedy.changes
            );
            for change in &remedy.changes {
                match change {
                    Change::Quota {
                        flavor,
                        resource,
                        from,
                        to,
                        ..
                    } => {
                        assert!(to > from, "{change:?} does not raise");
                        assert!(
                            offered(flavor, resource),
                            "{change:?}: flavor {flavor}'s nodes have no {resource}"
                        );
                    }
                    Change::NodeSelector { podset, .. } => {
                        let pinned = base.attempts.iter().any(|a| {
                            a.podset == *podset
                                && !matches!(a.problem, AttemptProblem::Ineligible { .. })
                        });
                        assert!(!pinned, "{change:?} moves a selector that picks a flavor");
                    }
                    Change::Cohort { cluster_queue, .. } => {
                        let queue = cluster
                            .cluster_queues
                            .iter()
                            .find(|q| &q.name == cluster_queue)
                            .expect("the queue exists");
                        assert_eq!(queue.cohort, None, "{change:?}: already in a cohort");
                    }
                    Change::Priority { value, from, .. } => {
                        assert!(value > from, "{change:?} does not raise the priority");
                    }
                    _ => {}
                }
            }
            checked += 1;
        }
    }
    checked
}
