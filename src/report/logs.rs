//! What `gkq logs NAMESPACE/JOB` reads (`ops::logs` reads it):
//! which pods are the job's driver, and what to say while the job has no pods to read because
//! Kueue has not admitted it.
//!
//! The driver, by kind (docs/kuberay.md 1): a RayJob's submitter, the `batch/v1` Job KubeRay
//! names like the RayJob (`K8sJobMode`, the default), whose pods carry
//! `batch.kubernetes.io/job-name`; in the other submission modes, the head pod of its
//! RayCluster (`ray.io/cluster`, `ray.io/node-type: head`). A batch Job's pods carry its name in
//! `batch.kubernetes.io/job-name`, a JobSet's in `jobset.sigs.k8s.io/jobset-name`; their driver
//! is the first pod by name (completion index 0 comes first in the names Kubernetes gives
//! Indexed Jobs).

use serde_json::Value;

use crate::vocab::object::{condition, condition_true, label_of, name_of, namespace_of};

/// The label Kubernetes puts on a Job's pods, with the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The label the JobSet controller puts on its pods, with the JobSet's name.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// KubeRay's labels on a Ray cluster's pods.
pub use crate::vocab::ray::{RAY_CLUSTER_LABEL, RAY_NODE_TYPE_LABEL};

/// Which of a job's pods to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodChoice {
    /// The driver (see the [module docs](self)).
    Driver,
    /// One pod of the job, by name (`--pod`).
    Named(String),
    /// Every pod of the job (`--all`).
    All,
}

/// The label selectors that together select every pod [`job_pods`] may choose for `job`: one
/// list per selector (a RayJob's submitter and, once KubeRay names it, its Ray cluster's pods).
pub fn pod_selectors(job: &Value) -> Vec<String> {
    let name = name_of(job);
    match job["kind"].as_str() {
        Some("RayJob") => {
            let mut selectors = vec![format!("{JOB_NAME_LABEL}={name}")];
            if let Some(cluster) = job
                .pointer("/status/rayClusterName")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
            {
                selectors.push(format!("{RAY_CLUSTER_LABEL}={cluster}"));
            }
            selectors
        }
        Some("JobSet") => vec![format!("{JOBSET_NAME_LABEL}={name}")],
        _ => vec![format!("{JOB_NAME_LABEL}={name}")],
    }
}

/// The pods of `job` to read among `pods` (any namespace), by name; empty when there are none
/// yet (or no pod of the job has the name asked for).
pub fn job_pods<'a>(job: &Value, pods: &'a [Value], choice: &PodChoice) -> Vec<&'a Value> {
    let name = name_of(job);
    let namespace = namespace_of(job).unwrap_or("default");
    let in_namespace = |pod: &&Value| namespace_of(pod).unwrap_or("default") == namespace;
    let labelled = |key: &str, value: &str| -> Vec<&'a Value> {
        let mut found: Vec<&Value> = pods
            .iter()
            .filter(in_namespace)
            .filter(|pod| label_of(pod, key) == Some(value))
            .collect();
        found.sort_by_key(|pod| name_of(pod));
        found
    };
    let mut own = match job["kind"].as_str() {
        Some("RayJob") => {
            let mut own = labelled(JOB_NAME_LABEL, name);
            if let Some(cluster) = job
                .pointer("/status/rayClusterName")
                .and_then(Value::as_str)
            {
                let cluster_pods = labelled(RAY_CLUSTER_LABEL, cluster);
                // The head first: it is the driver when there is no submitter pod.
                let (heads, workers): (Vec<&Value>, Vec<&Value>) = cluster_pods
                    .into_iter()
                    .partition(|pod| label_of(pod, RAY_NODE_TYPE_LABEL) == Some("head"));
                own.extend(heads);
                own.extend(workers);
            }
            own
        }
        Some("JobSet") => labelled(JOBSET_NAME_LABEL, name),
        _ => labelled(JOB_NAME_LABEL, name),
    };
    match choice {
        PodChoice::All => own,
        PodChoice::Named(pod) => {
            own.retain(|p| name_of(p) == pod);
            own
        }
        PodChoice::Driver => {
            own.truncate(1);
            own
        }
    }
}

/// What to say while a job has nothing to read because Kueue has not let it start: `None` once
/// its Workload is admitted (or finished). `workload` is the job's Workload
/// (`placement::job_workload`), if Kueue has made one.
pub fn waiting(workload: Option<&Value>) -> Option<String> {
    let Some(workload) = workload else {
        return Some("suspended: Kueue has not made the job's Workload yet".to_string());
    };
    if condition_true(workload, "Finished") {
        return None;
    }
    if condition_true(workload, "Admitted") {
        return None;
    }
    if condition_true(workload, "QuotaReserved") {
        let waiting_for: Vec<&str> = workload
            .pointer("/status/admissionChecks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|check| check["state"] != "Ready")
            .filter_map(|check| check["name"].as_str())
            .collect();
        return Some(if waiting_for.is_empty() {
            "suspended: quota reserved, waiting for admission".to_string()
        } else {
            format!("suspended: waiting for {}", waiting_for.join(", "))
        });
    }
    let why = condition(workload, "QuotaReserved")
        .and_then(|c| c["message"].as_str())
        .filter(|m| !m.is_empty())
        .unwrap_or("waiting for quota");
    Some(format!("suspended: pending: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, labels: Value) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "team", "labels": labels}})
    }

    fn pods() -> Vec<Value> {
        vec![
            pod(
                "train-abcde-worker-x",
                json!({RAY_CLUSTER_LABEL: "train-abcde", RAY_NODE_TYPE_LABEL: "worker"}),
            ),
            pod(
                "train-abcde-head-y",
                json!({RAY_CLUSTER_LABEL: "train-abcde", RAY_NODE_TYPE_LABEL: "head"}),
            ),
            pod("train-q7k2p", json!({JOB_NAME_LABEL: "train"})),
            pod("slices-slice-0-1-b", json!({JOBSET_NAME_LABEL: "slices"})),
            pod("slices-slice-0-0-a", json!({JOBSET_NAME_LABEL: "slices"})),
            json!({"kind": "Pod", "metadata": {"name": "train-other-ns", "namespace": "elsewhere",
                "labels": {JOB_NAME_LABEL: "train"}}}),
        ]
    }

    fn names(found: Vec<&Value>) -> Vec<&str> {
        found.into_iter().map(name_of).collect()
    }

    fn rayjob(cluster: Option<&str>) -> Value {
        let mut job = json!({"kind": "RayJob", "metadata": {"name": "train", "namespace": "team"}});
        if let Some(cluster) = cluster {
            job["status"] = json!({"rayClusterName": cluster});
        }
        job
    }

    #[test]
    fn a_rayjobs_driver_is_its_submitter_then_its_head() {
        let pods = pods();
        let job = rayjob(Some("train-abcde"));
        assert_eq!(
            names(job_pods(&job, &pods, &PodChoice::Driver)),
            ["train-q7k2p"]
        );
        assert_eq!(
            names(job_pods(&job, &pods, &PodChoice::All)),
            ["train-q7k2p", "train-abcde-head-y", "train-abcde-worker-x"]
        );
        // No submitter pod (HTTPMode, or not created yet): the head.
        let without_submitter: Vec<Value> = pods
            .iter()
            .filter(|p| label_of(p, JOB_NAME_LABEL).is_none())
            .cloned()
            .collect();
        assert_eq!(
            names(job_pods(&job, &without_submitter, &PodChoice::Driver)),
            ["train-abcde-head-y"]
        );
        assert!(job_pods(&rayjob(None), &without_submitter, &PodChoice::Driver).is_empty());
    }

    #[test]
    fn jobsets_and_jobs_read_their_first_pod_or_the_one_named() {
        let pods = pods();
        let jobset = json!({"kind": "JobSet", "metadata": {"name": "slices", "namespace": "team"}});
        assert_eq!(
            names(job_pods(&jobset, &pods, &PodChoice::Driver)),
            ["slices-slice-0-0-a"]
        );
        assert_eq!(
            names(job_pods(
                &jobset,
                &pods,
                &PodChoice::Named("slices-slice-0-1-b".into())
            )),
            ["slices-slice-0-1-b"]
        );
        assert!(job_pods(&jobset, &pods, &PodChoice::Named("train-q7k2p".into())).is_empty());
        let job = json!({"kind": "Job", "metadata": {"name": "train", "namespace": "team"}});
        assert_eq!(
            names(job_pods(&job, &pods, &PodChoice::All)),
            ["train-q7k2p"]
        );
    }

    #[test]
    fn the_selectors_select_what_job_pods_chooses_from() {
        assert_eq!(
            pod_selectors(&rayjob(Some("train-abcde"))),
            [
                "batch.kubernetes.io/job-name=train",
                "ray.io/cluster=train-abcde"
            ]
        );
        assert_eq!(
            pod_selectors(&rayjob(None)),
            ["batch.kubernetes.io/job-name=train"]
        );
        let jobset = json!({"kind": "JobSet", "metadata": {"name": "slices"}});
        assert_eq!(
            pod_selectors(&jobset),
            ["jobset.sigs.k8s.io/jobset-name=slices"]
        );
    }

    #[test]
    fn a_job_kueue_holds_back_says_what_it_waits_for() {
        assert_eq!(
            waiting(None).as_deref(),
            Some("suspended: Kueue has not made the job's Workload yet")
        );
        let pending = json!({"status": {"conditions": [{"type": "QuotaReserved", "status": "False",
            "message": "couldn't assign flavors to pod set tpu-group: insufficient quota"}]}});
        assert_eq!(
            waiting(Some(&pending)).as_deref(),
            Some(
                "suspended: pending: couldn't assign flavors to pod set tpu-group: insufficient quota"
            )
        );
        let reserved = json!({"status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admissionChecks": [{"name": "dws-prov", "state": "Pending"},
                                {"name": "ready-one", "state": "Ready"}]}});
        assert_eq!(
            waiting(Some(&reserved)).as_deref(),
            Some("suspended: waiting for dws-prov")
        );
        let admitted = json!({"status": {"conditions": [
            {"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]}});
        assert_eq!(waiting(Some(&admitted)), None);
    }
}
