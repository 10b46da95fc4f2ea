//! What `gkq dashboard NAMESPACE/JOB` forwards to (`ops::dashboard` reads it): the Ray head pod
//! of a RayJob's cluster and the port its dashboard listens on (`vocab::ray::dashboard_port`),
//! or why there is none yet (Kueue holds the job back, KubeRay has not created the head, the
//! head is not running) or none any more (the job has finished and its cluster is gone).
//! docs/kuberay.md 1 and 5.

use serde_json::Value;

use super::logs::waiting;
use crate::vocab::object::{label_of, name_of, namespace_of};
use crate::vocab::ray::{RAY_CLUSTER_LABEL, RAY_NODE_TYPE_LABEL, dashboard_port};

/// Where a RayJob's dashboard is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// The head pod runs: forward to its `port`.
    Ready { pod: String, port: u16 },
    /// Not yet: what it waits for, as a status line.
    Waiting(String),
    /// Never, or not any more: why.
    Unreachable(String),
}

/// KubeRay's deployment statuses after which the job's cluster is not brought up again.
const ENDED: &[&str] = &["Complete", "Failed", "ValidationFailed"];

/// The dashboard of `job` (a RayJob): `cluster` is the RayCluster its `status.rayClusterName`
/// names, if it exists; `workload` its Kueue Workload (`kueue`: whether Kueue is installed);
/// `pods` any pods, of which its cluster's head is chosen.
pub fn ray_head(
    job: &Value,
    cluster: Option<&Value>,
    workload: Option<&Value>,
    kueue: bool,
    pods: &[Value],
) -> Head {
    let job_name = format!(
        "{}/{}",
        namespace_of(job).unwrap_or("default"),
        name_of(job)
    );
    let cluster_name = job
        .pointer("/status/rayClusterName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    let head = cluster_name.and_then(|c| head_pod(job, c, pods));
    let running = head.filter(|pod| {
        pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
            && pod.pointer("/metadata/deletionTimestamp").is_none()
    });
    let deployment = job
        .pointer("/status/jobDeploymentStatus")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(pod) = running {
        // While the head still runs the dashboard is there, even after the job ended.
        let head_group = cluster
            .and_then(|c| c.pointer("/spec/headGroupSpec"))
            .or_else(|| job.pointer("/spec/rayClusterSpec/headGroupSpec"))
            .unwrap_or(&Value::Null);
        return match dashboard_port(head_group) {
            Ok(port) => Head::Ready {
                pod: name_of(pod).to_string(),
                port,
            },
            Err(e) => Head::Unreachable(format!("{job_name}: {e}")),
        };
    }
    if ENDED.contains(&deployment) {
        let message = job
            .pointer("/status/message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        return Head::Unreachable(format!(
            "the job {job_name} has ended: KubeRay says {deployment}{message}, and its Ray head is gone, so there is no dashboard to forward to\nhint: `gkq logs {job_name}` reads the driver's log while its pod remains"
        ));
    }
    if kueue && let Some(status) = waiting(workload) {
        return Head::Waiting(status);
    }
    let Some(cluster_name) = cluster_name else {
        return Head::Waiting(
            "admitted: waiting for KubeRay to create the job's Ray cluster".into(),
        );
    };
    Head::Waiting(match head {
        None => format!("admitted: waiting for the head pod of Ray cluster {cluster_name}"),
        Some(pod) => {
            let phase = pod
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("Pending");
            format!(
                "the Ray head pod {} is {phase}: waiting for it to run",
                name_of(pod)
            )
        }
    })
}

/// The head pod of Ray cluster `cluster` in `job`'s namespace: the one KubeRay labels
/// `ray.io/node-type: head` (the newest if a restart left more than one).
fn head_pod<'a>(job: &Value, cluster: &str, pods: &'a [Value]) -> Option<&'a Value> {
    let namespace = namespace_of(job).unwrap_or("default");
    pods.iter()
        .filter(|pod| namespace_of(pod).unwrap_or("default") == namespace)
        .filter(|pod| label_of(pod, RAY_CLUSTER_LABEL) == Some(cluster))
        .filter(|pod| label_of(pod, RAY_NODE_TYPE_LABEL) == Some("head"))
        .max_by_key(|pod| {
            (
                pod.pointer("/metadata/deletionTimestamp").is_none(),
                pod.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        })
}

/// The label selector of `cluster`'s head pod.
pub fn head_selector(cluster: &str) -> String {
    format!("{RAY_CLUSTER_LABEL}={cluster},{RAY_NODE_TYPE_LABEL}=head")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(status: Value) -> Value {
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
               "metadata": {"name": "train", "namespace": "team"},
               "spec": {"rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}}}},
               "status": status})
    }

    fn head(phase: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": "train-x7k2p-head-abcde", "namespace": "team",
            "labels": {RAY_CLUSTER_LABEL: "train-x7k2p", RAY_NODE_TYPE_LABEL: "head"}},
            "status": {"phase": phase}})
    }

    fn admitted() -> Value {
        json!({"status": {"conditions": [{"type": "QuotaReserved", "status": "True"},
                                          {"type": "Admitted", "status": "True"}]}})
    }

    #[test]
    fn a_running_head_is_forwarded_to_on_its_clusters_dashboard_port() {
        let running =
            job(json!({"rayClusterName": "train-x7k2p", "jobDeploymentStatus": "Running"}));
        let worker = json!({"kind": "Pod", "metadata": {"name": "w", "namespace": "team",
            "labels": {RAY_CLUSTER_LABEL: "train-x7k2p", RAY_NODE_TYPE_LABEL: "worker"}},
            "status": {"phase": "Running"}});
        let pods = [worker, head("Running")];
        let ready =
            |cluster: Option<&Value>| ray_head(&running, cluster, Some(&admitted()), true, &pods);
        assert_eq!(
            ready(None),
            Head::Ready {
                pod: "train-x7k2p-head-abcde".into(),
                port: 8265
            }
        );
        // The RayCluster's spec is what KubeRay built the head from.
        let cluster =
            json!({"spec": {"headGroupSpec": {"rayStartParams": {"dashboard-port": "9999"}}}});
        assert_eq!(
            ready(Some(&cluster)),
            Head::Ready {
                pod: "train-x7k2p-head-abcde".into(),
                port: 9999
            }
        );
        // Another namespace's pod of a cluster of the same name is not this job's.
        let mut elsewhere = head("Running");
        elsewhere["metadata"]["namespace"] = json!("other");
        assert!(matches!(
            ray_head(&running, None, Some(&admitted()), true, &[elsewhere]),
            Head::Waiting(w) if w.contains("waiting for the head pod of Ray cluster train-x7k2p")
        ));
    }

    #[test]
    fn a_job_not_admitted_or_not_started_waits_and_an_ended_one_is_unreachable() {
        let suspended = job(json!({"jobDeploymentStatus": "Suspended"}));
        let pending = json!({"status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admissionChecks": [{"name": "dws-prov", "state": "Pending"}]}});
        assert_eq!(
            ray_head(&suspended, None, Some(&pending), true, &[]),
            Head::Waiting("suspended: waiting for dws-prov".into())
        );
        let initializing =
            job(json!({"rayClusterName": "train-x7k2p", "jobDeploymentStatus": "Initializing"}));
        assert_eq!(
            ray_head(
                &initializing,
                None,
                Some(&admitted()),
                true,
                &[head("Pending")]
            ),
            Head::Waiting(
                "the Ray head pod train-x7k2p-head-abcde is Pending: waiting for it to run".into()
            )
        );
        // Without Kueue there is no admission to wait for.
        assert_eq!(
            ray_head(&job(json!({})), None, None, false, &[]),
            Head::Waiting("admitted: waiting for KubeRay to create the job's Ray cluster".into())
        );
        let complete = job(
            json!({"rayClusterName": "train-x7k2p", "jobDeploymentStatus": "Complete",
            "message": "Job finished successfully"}),
        );
        let Head::Unreachable(why) = ray_head(&complete, None, Some(&admitted()), true, &[]) else {
            panic!("a finished job's head is gone");
        };
        assert!(
            why.contains("has ended: KubeRay says Complete (Job finished successfully)"),
            "{why}"
        );
        // Its head kept (ttlSecondsAfterFinished): still there to look at.
        assert!(matches!(
            ray_head(&complete, None, Some(&admitted()), true, &[head("Running")]),
            Head::Ready { .. }
        ));
    }

    #[test]
    fn a_head_without_a_dashboard_is_unreachable() {
        let mut running = job(json!({"rayClusterName": "train-x7k2p"}));
        running["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] =
            json!({"include-dashboard": "false"});
        assert!(matches!(
            ray_head(&running, None, Some(&admitted()), true, &[head("Running")]),
            Head::Unreachable(why) if why.contains("without its dashboard")
        ));
    }
}
