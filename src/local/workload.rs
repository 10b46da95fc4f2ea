//! The Workload object Kueue's job integrations (RayJob, JobSet, batch Job) create for a job
//! (simulated): its name, owner, queue, priority and podsets with their pod templates, as Kueue
//! v0.19.2 builds them (`pkg/controller/jobs/{rayjob,jobset,job}`, docs/kueue.md 1c). The podsets
//! (and KubeRay's defaults in a RayJob's) are placement's ([`pod_set_templates`]), the same ones
//! `plan` predicts with.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::store::Key;
use crate::placement::podsets::pod_set_templates;
use crate::vocab::labels::{ELASTIC_JOB_ANNOTATION, QUEUE_NAME_LABEL};

pub const KUEUE_FINALIZER: &str = "kueue.x-k8s.io/resource-in-use";
pub const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";
/// Marks what the local target's simulation made (Workloads, ProvisioningRequests, Nodes, ...).
pub const SIMULATED_ANNOTATION: &str = "gkq.dev/simulated";
pub const SIMULATED_VALUE: &str =
    "local target: made by gkq's simulation, not by a real controller";

/// `<kind>-<name>-<5 hex>` (`rayjob-train-1a2b3`), Kueue's naming scheme for a job's Workload.
pub fn workload_name(kind: &str, job: &str, uid: &str) -> String {
    let digest = Sha256::digest(format!("{kind}\n{job}\n{uid}").as_bytes());
    let hash: String = digest.iter().take(3).map(|b| format!("{b:02x}")).collect();
    let mut prefix = format!("{}-{job}", kind.to_lowercase());
    prefix.truncate(252 - 6);
    format!("{prefix}-{}", &hash[..5])
}

/// The Workload Kueue creates for a RayJob, JobSet or batch Job (status empty: the scheduler
/// fills it in).
pub fn for_job(job: &Value, priority: i32) -> Value {
    let kind = job["kind"].as_str().unwrap_or_default();
    let api_version = job["apiVersion"].as_str().unwrap_or_default();
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
            "name": workload_name(kind, name, uid),
            "namespace": namespace,
            "labels": {JOB_UID_LABEL: uid},
            "annotations": annotations,
            "finalizers": [KUEUE_FINALIZER],
            "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name,
                "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "active": true,
            "queueName": queue,
            "priority": priority,
            "podSets": pod_set_templates(job).unwrap_or_default(),
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
        for r in w
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(uid) = r["uid"].as_str() {
                out.entry(uid.to_string()).or_insert_with(|| Key::of(w));
            }
        }
    }
    out
}

pub fn owned_by<'a>(workloads: impl Iterator<Item = &'a Value>, uid: &str) -> Option<Key> {
    workloads
        .filter(|w| {
            w.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
        })
        .map(Key::of)
        .next()
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
        let mut workload = for_job(&job, 0);
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
