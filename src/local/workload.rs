//! The Workload object Kueue's job integrations (RayJob, JobSet, batch Job) create for a job
//! (simulated): its name, owner, queue, priority and podsets with their pod templates, as Kueue
//! v0.19.2 builds them (`pkg/controller/jobs/{rayjob,jobset,job}`, docs/kueue.md 1c). The podsets
//! (and KubeRay's defaults in a RayJob's) are placement's ([`pod_set_templates`]), the same ones
//! `plan` predicts with.

use std::collections::HashMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::store::{Key, Store};
use crate::placement::job_workload::JobWorkloads;
use crate::placement::podsets::pod_set_templates;
use crate::vocab::labels::{ELASTIC_JOB_ANNOTATION, QUEUE_NAME_LABEL};
use crate::vocab::object::uid_of;

pub const KUEUE_FINALIZER: &str = "kueue.x-k8s.io/resource-in-use";
pub use crate::vocab::labels::JOB_UID_LABEL;
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

/// The Workloads that may be `job`'s by the one rule (`placement::job_workload`): those whose
/// owners name the job, or the RayCluster its status names; found through the store's owner
/// index rather than by reading every Workload.
pub fn owned_workloads<'s>(store: &'s Store, job: &Value) -> Vec<&'s Value> {
    let index = store.index();
    let namespace = crate::vocab::object::namespace_of(job).unwrap_or_default();
    let kind = job["kind"].as_str().unwrap_or_default();
    let name = crate::vocab::object::name_of(job);
    let by_job = index.dependents(namespace, kind, name);
    let by_cluster = crate::placement::job_workload::ray_cluster_of(job)
        .and_then(|cluster| index.dependents(namespace, "RayCluster", cluster));
    by_job
        .into_iter()
        .chain(by_cluster)
        .flatten()
        .filter(|k| k.group == "kueue.x-k8s.io" && k.kind == "Workload")
        .filter_map(|k| store.get(k))
        .collect()
}

/// The Workload of the current run of each of `jobs` that has one, by job uid: the job's
/// Workload by the one rule (`placement::job_workload`, as status, watch and explain find it),
/// when it is the current run's. A job submitted again under the name of an earlier one gets a
/// Workload of its own, as Kueue makes one for a job with none that matches.
pub fn current_runs<'a>(
    workloads: impl IntoIterator<Item = &'a Value>,
    jobs: impl IntoIterator<Item = &'a Value>,
) -> HashMap<String, Key> {
    let job_workloads = JobWorkloads::new(workloads);
    jobs.into_iter()
        .filter_map(|job| {
            let found = job_workloads.of(job).filter(|w| w.current_run)?;
            Some((uid_of(job).to_string(), Key::of(found.workload)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PendingWorkload;
    use crate::vocab::object::name_of;

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

    /// The simulated Kueue asks the one rule for a job's Workload and keeps it only when it is
    /// the current run's: an earlier run's finished Workload does not stop the job from getting
    /// its own; a RayJob's Workload owned through its RayCluster counts.
    #[test]
    fn current_runs_follow_the_one_rule() {
        let mut earlier = job();
        earlier["metadata"]["uid"] = json!("u-0");
        let mut old = for_job(&earlier, 0);
        old["metadata"]["creationTimestamp"] = json!("2026-01-02T00:00:00Z");
        old["status"] = json!({"conditions": [{"type": "Finished", "status": "True"}]});
        let mut new = for_job(&job(), 0);
        new["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        let key_name = |k: &Key| k.name.clone();

        let runs = current_runs([&old, &new], [&job()]);
        assert_eq!(
            runs.get("u-1").map(key_name),
            Some(name_of(&new).to_string())
        );
        assert!(current_runs([&old], [&job()]).is_empty());

        let mut through_cluster = new.clone();
        through_cluster["metadata"]["name"] = json!("raycluster-j-x7k2p-1a2b3");
        through_cluster["metadata"]["ownerReferences"] =
            json!([{"kind": "RayCluster", "name": "j-x7k2p", "uid": "c-1"}]);
        let mut running = job();
        running["status"] = json!({"rayClusterName": "j-x7k2p"});
        let runs = current_runs([&old, &through_cluster], [&running]);
        assert_eq!(
            runs.get("u-1").map(key_name).as_deref(),
            Some("raycluster-j-x7k2p-1a2b3")
        );
    }

    /// The same cases status, watch and explain are tested with: the simulated Kueue finds the
    /// Workload the one rule names.
    #[test]
    fn current_runs_name_the_workload_status_watch_and_explain_name() {
        use crate::placement::job_workload::scenario;
        for (job, workloads, expected) in scenario::cases() {
            let runs = current_runs(&workloads, [&job]);
            assert_eq!(runs.get("u-2").map(|k| k.name.as_str()), Some(expected));
        }
    }
}
