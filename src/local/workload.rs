//! The Workload object Kueue's RayJob integration creates for a job (simulated): its name,
//! owner, queue, priority and podsets with their pod templates, as Kueue v0.19.2 builds them
//! (`pkg/controller/jobs/rayjob`, docs/kueue.md 1c): `head` (plus the autoscaler container with
//! in-tree autoscaling, the submitter container in SidecarMode, the Redis cleanup requests with
//! GCS fault tolerance), one podset per worker group with `replicas × numOfHosts` pods, and the
//! `submitter` podset in K8sJobMode.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::store::Key;
use crate::placement::Quantity;
use crate::vocab::labels::{ELASTIC_JOB_ANNOTATION, QUEUE_NAME_LABEL, RAY_FT_ENABLED_ANNOTATION};
use crate::vocab::object::{owned_by_uid, owners};

pub const KUEUE_FINALIZER: &str = "kueue.x-k8s.io/resource-in-use";
pub const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";
/// Marks what the local target's simulation made (Workloads, ProvisioningRequests, Nodes, ...).
pub const SIMULATED_ANNOTATION: &str = "gkq.dev/simulated";
pub const SIMULATED_VALUE: &str =
    "local target: made by gkq's simulation, not by a real controller";

/// `rayjob-<name>-<5 hex>`, Kueue's naming scheme for a job's Workload.
pub fn workload_name(kind: &str, job: &str, uid: &str) -> String {
    let digest = Sha256::digest(format!("{kind}\n{job}\n{uid}").as_bytes());
    let hash: String = digest.iter().take(3).map(|b| format!("{b:02x}")).collect();
    let mut prefix = format!("{}-{job}", kind.to_lowercase());
    prefix.truncate(252 - 6);
    format!("{prefix}-{}", &hash[..5])
}

fn quantity_max(a: &Value, b: &str) -> Value {
    match (Quantity::from_json(a), Quantity::parse(b)) {
        (Ok(x), Ok(y)) if y > x => json!(b),
        _ => a.clone(),
    }
}

fn submitter_container(image: &Value) -> Value {
    json!({"name": "ray-job-submitter", "image": image,
        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}})
}

/// The podsets of a stored RayJob (defaults applied), as Kueue builds them.
pub fn ray_job_pod_sets(job: &Value) -> Vec<Value> {
    let spec = &job["spec"];
    let cluster = &spec["rayClusterSpec"];
    let annotations = &job["metadata"]["annotations"];
    let mut head = cluster
        .pointer("/headGroupSpec/template")
        .cloned()
        .unwrap_or_else(|| json!({"spec": {"containers": []}}));
    let image = head
        .pointer("/spec/containers/0/image")
        .cloned()
        .unwrap_or(Value::Null);
    let ft = annotations[RAY_FT_ENABLED_ANNOTATION]
        .as_str()
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || cluster.get("gcsFaultToleranceOptions").is_some();
    if ft
        && let Some(requests) = head
            .pointer_mut("/spec/containers/0/resources/requests")
            .and_then(Value::as_object_mut)
    {
        for (name, minimum) in [("cpu", "200m"), ("memory", "256Mi")] {
            let merged = match requests.get(name) {
                Some(v) => quantity_max(v, minimum),
                None => json!(minimum),
            };
            requests.insert(name.to_string(), merged);
        }
    }
    let containers = head
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut);
    if let Some(containers) = containers {
        if cluster["enableInTreeAutoscaling"] == true {
            let resources = cluster
                .pointer("/autoscalerOptions/resources")
                .cloned()
                .unwrap_or_else(|| {
                    json!({"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}})
                });
            containers.push(json!({"name": "autoscaler", "image": image, "resources": resources}));
        }
        if spec["submissionMode"] == "SidecarMode" {
            containers.push(submitter_container(&image));
        }
    }
    let mut pod_sets = vec![json!({"name": "head", "count": 1, "template": head})];
    for group in cluster["workerGroupSpecs"].as_array().into_iter().flatten() {
        let replicas = group["replicas"].as_i64().unwrap_or(0);
        let hosts = group["numOfHosts"].as_i64().unwrap_or(1);
        let count = if hosts > 1 {
            replicas * hosts
        } else {
            replicas
        };
        pod_sets.push(json!({
            "name": group["groupName"].as_str().unwrap_or_default().to_lowercase(),
            "count": count,
            "template": group.get("template").cloned().unwrap_or_else(|| json!({})),
        }));
    }
    if spec["submissionMode"].as_str().unwrap_or("K8sJobMode") == "K8sJobMode" {
        let template = spec.get("submitterPodTemplate").cloned().unwrap_or_else(|| {
            json!({"spec": {"restartPolicy": "Never", "containers": [submitter_container(&image)]}})
        });
        pod_sets.push(json!({"name": "submitter", "count": 1, "template": template}));
    }
    pod_sets
}

/// The Workload Kueue creates for a RayJob (status empty: the scheduler fills it in).
pub fn for_ray_job(job: &Value, priority: i32) -> Value {
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = job["metadata"]["namespace"].as_str().unwrap_or("default");
    let uid = job["metadata"]["uid"].as_str().unwrap_or_default();
    let queue = job["metadata"]["labels"][QUEUE_NAME_LABEL]
        .as_str()
        .unwrap_or_default();
    let mut annotations = json!({SIMULATED_ANNOTATION: SIMULATED_VALUE});
    if job["metadata"]["annotations"][ELASTIC_JOB_ANNOTATION] == "true" {
        annotations["kueue.x-k8s.io/elastic-job"] = json!("true");
    }
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name("RayJob", name, uid),
            "namespace": namespace,
            "labels": {JOB_UID_LABEL: uid},
            "annotations": annotations,
            "finalizers": [KUEUE_FINALIZER],
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": name,
                "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "active": true,
            "queueName": queue,
            "priority": priority,
            "podSets": ray_job_pod_sets(job),
        },
    })
}

/// The key of the Workload owned by the object with `uid`, among `workloads`.
/// The Workload of each owner uid (the first, in key order), for looking many up at once.
pub fn by_owner<'a>(
    workloads: impl Iterator<Item = &'a Value>,
) -> std::collections::HashMap<String, Key> {
    let mut out = std::collections::HashMap::new();
    for w in workloads {
        for r in owners(w) {
            if let Some(uid) = r["uid"].as_str() {
                out.entry(uid.to_string()).or_insert_with(|| Key::of(w));
            }
        }
    }
    out
}

pub fn owned_by<'a>(mut workloads: impl Iterator<Item = &'a Value>, uid: &str) -> Option<Key> {
    workloads.find(|w| owned_by_uid(w, uid)).map(Key::of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PendingWorkload;

    fn job() -> Value {
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j", "namespace": "default", "uid": "u-1",
                "labels": {QUEUE_NAME_LABEL: "user-queue"}, "annotations": {ELASTIC_JOB_ANNOTATION: "true"}},
            "spec": {"submissionMode": "K8sJobMode", "shutdownAfterJobFinishes": true,
                "rayClusterSpec": {"enableInTreeAutoscaling": true,
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "image": "ray:1",
                    "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}}]}}},
                "workerGroupSpecs": [{"groupName": "TPU-group", "replicas": 1, "numOfHosts": 4,
                    "template": {"spec": {"containers": [{"name": "w", "resources": {
                        "requests": {"cpu": "8", "google.com/tpu": "4"}, "limits": {"cpu": "8", "google.com/tpu": "4"}}}]}}}]}}})
    }

    #[test]
    fn workload_podsets_have_the_requests_placement_computes_for_the_job() {
        let job = job();
        let mut workload = for_ray_job(&job, 0);
        workload["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        let from_job = PendingWorkload::from_object(&job).unwrap();
        let from_workload = PendingWorkload::from_object(&workload).unwrap();
        assert_eq!(from_job.pod_sets.len(), 3);
        for (a, b) in from_job.pod_sets.iter().zip(&from_workload.pod_sets) {
            assert_eq!(
                (&a.name, a.count, &a.requests),
                (&b.name, b.count, &b.requests)
            );
        }
        assert_eq!(from_workload.pod_sets[1].name, "tpu-group");
        assert_eq!(from_workload.pod_sets[1].count, 4);
        assert_eq!(from_workload.queue_name.as_deref(), Some("user-queue"));
        assert_eq!(
            from_workload.owner,
            Some(("RayJob".to_string(), "j".to_string()))
        );
        assert!(
            workload["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("rayjob-j-")
        );
    }
}
