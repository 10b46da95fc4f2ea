//! The jobs, node pools and queues of `gkq status`: where each job of the spec really is,
//! beside where gkq predicts it goes, as a pure function of what was read ([`live_report`]).
//!
//! For each job: the placement Kueue made, read from its Workload (flavor per podset,
//! `QuotaReserved`/`Admitted`, admission checks, the ProvisioningRequest's state by
//! [`super::provisioning`]), the job's own state (KubeRay), and gkq's prediction for the spec's
//! jobs over the live queues (other tenants' Workloads count; the spec's own do not), with any
//! disagreement spelled out. Then the node pools (GKE's autoscaling limits, nodes counted from
//! Kubernetes `Node` objects) and each ClusterQueue's usage. The reading is
//! `observe::cluster`; the text is `render::status`.

use serde::Serialize;
use serde_json::Value;

use crate::model::DesiredState;
use crate::model::gke::node_pool_limits;
use crate::model::live::KubeSnapshot;
use crate::placement::job_workload::JobWorkloads;
use crate::placement::provisioning::{ProvisioningRequestState, workload_request};
use crate::placement::{
    Cluster, PendingWorkload, Placement, PlacementState, observed_placement, predict,
};
use crate::vocab::object::{condition, condition_true, conditions};

/// The live part of `gkq status -o json` (flattened into it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveReport {
    pub cluster_status: ClusterStatus,
    /// Set on the local target: everything below comes from its simulation.
    pub simulated: Option<Simulated>,
    /// Whether Kubernetes could be read (the cluster exists and is reachable).
    pub kubernetes: bool,
    pub node_pools: Vec<PoolStatus>,
    pub jobs: Vec<JobStatus>,
    pub cluster_queues: Vec<QueueStatus>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Simulated {
    pub state_dir: Option<String>,
    /// This cluster's own Kubernetes state file, under the state directory.
    pub kubernetes_state: String,
    pub settings: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub project: String,
    pub location: String,
    pub name: String,
    /// `RUNNING`, ...; `None` when the cluster does not exist.
    pub status: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    pub name: String,
    pub machine_type: String,
    /// Ready nodes (Kubernetes `Node` objects with the pool's label); `None` when Kubernetes
    /// could not be read.
    pub nodes: Option<i64>,
    pub autoscaling: Option<(i64, i64)>,
    pub flex_start: bool,
    pub queued_provisioning: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckStatus {
    pub name: String,
    pub state: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RayStatus {
    pub deployment_status: Option<String>,
    pub job_status: Option<String>,
    pub message: Option<String>,
}

/// A JobSet's or batch Job's own progress, read from its status: `state` is `Suspended`,
/// `Starting`, `Running`, `Completed` or `Failed`; `detail` counts its pods or replicated jobs;
/// `message` is its latest condition's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobProgress {
    pub state: String,
    pub detail: String,
    pub message: Option<String>,
}

impl JobProgress {
    /// `None` for kinds other than JobSet and Job.
    pub fn of(job: &Value) -> Option<JobProgress> {
        let kind = job["kind"].as_str()?;
        if kind != "JobSet" && kind != "Job" {
            return None;
        }
        let int = |v: &Value| v.as_i64().unwrap_or(0);
        let (ready, total, detail) = if kind == "JobSet" {
            let rjs: Vec<&Value> = job
                .pointer("/status/replicatedJobsStatus")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            let ready: i64 = rjs.iter().map(|rj| int(&rj["ready"])).sum();
            let total: i64 = job
                .pointer("/spec/replicatedJobs")
                .and_then(Value::as_array)
                .map_or(0, |a| {
                    a.iter()
                        .map(|rj| rj["replicas"].as_i64().unwrap_or(1))
                        .sum()
                });
            let parts: Vec<String> = rjs
                .iter()
                .map(|rj| {
                    format!(
                        "{} {} ready, {} succeeded",
                        rj["name"].as_str().unwrap_or_default(),
                        int(&rj["ready"]),
                        int(&rj["succeeded"])
                    )
                })
                .collect();
            (ready, total, parts.join("; "))
        } else {
            let status = &job["status"];
            let ready = int(&status["ready"]);
            let detail = format!(
                "{} active, {ready} ready, {} succeeded",
                int(&status["active"]),
                int(&status["succeeded"])
            );
            (ready, i64::MAX, detail)
        };
        let state = if condition_true(job, "Completed") || condition_true(job, "Complete") {
            "Completed"
        } else if condition_true(job, "Failed") {
            "Failed"
        } else if job.pointer("/spec/suspend") == Some(&Value::Bool(true)) {
            "Suspended"
        } else if ready > 0 && (kind == "Job" || ready >= total) {
            "Running"
        } else {
            "Starting"
        };
        // The newest condition says most about where the job is.
        let message = conditions(job)
            .filter(|c| c["status"] == "True" || c["type"] == "Suspended")
            .max_by_key(|c| c["lastTransitionTime"].as_str().unwrap_or_default())
            .and_then(|c| c["message"].as_str())
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        Some(JobProgress {
            state: state.to_string(),
            detail,
            message,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub job: String,
    pub namespace: String,
    pub kind: String,
    /// Whether the job exists in the cluster.
    pub submitted: bool,
    pub workload: Option<String>,
    /// What Kueue did (from the Workload).
    pub observed: Option<Placement>,
    /// What gkq predicts for the spec's jobs over the live queues.
    pub predicted: Option<Placement>,
    /// `None` until there is a Workload to compare with.
    pub agrees: Option<bool>,
    pub differences: Vec<String>,
    pub admission_checks: Vec<CheckStatus>,
    pub provisioning_request: Option<ProvisioningRequestState>,
    pub ray: Option<RayStatus>,
    /// A JobSet's or batch Job's own progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<JobProgress>,
    /// Kueue's `Evicted` message when the Workload lost (or never kept) its reservation, e.g.
    /// after a failed ProvisioningRequest.
    pub evicted: Option<String>,
    /// The Workload is deactivated (`spec.active: false`): Kueue will not admit it again.
    pub deactivated: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    pub flavor: String,
    pub resource: String,
    pub nominal: Option<String>,
    pub reserved: String,
    pub admitted: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    pub name: String,
    pub active: Option<bool>,
    pub pending_workloads: i64,
    pub reserving_workloads: i64,
    pub admitted_workloads: i64,
    pub usage: Vec<UsageRow>,
}

/// A node pool as GKE's `clusters.get` describes it, as far as the report needs it.
#[derive(Debug, Clone)]
pub struct GkeNodePool {
    pub name: String,
    pub machine_type: String,
    /// `(min, max)` nodes over all zones when autoscaling is on (`model::gke::node_pool_limits`).
    pub autoscaling: Option<(i64, i64)>,
    pub flex_start: bool,
    pub queued_provisioning: bool,
}

impl GkeNodePool {
    /// The node pools of a cluster as `clusters.get` returns it.
    pub fn from_cluster(cluster: &Value) -> Vec<GkeNodePool> {
        cluster["nodePools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let limits = node_pool_limits(p);
                GkeNodePool {
                    name: str_at(p, "/name").unwrap_or_default().to_string(),
                    machine_type: str_at(p, "/config/machineType")
                        .unwrap_or_default()
                        .to_string(),
                    autoscaling: limits.autoscaled.then_some((limits.min, limits.max)),
                    flex_start: p.pointer("/config/flexStart") == Some(&Value::Bool(true)),
                    queued_provisioning: p.pointer("/queuedProvisioning/enabled")
                        == Some(&Value::Bool(true)),
                }
            })
            .collect()
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// Whether an observed state is what the predicted one becomes with time: a job waiting for
/// its checks is later admitted, an admitted one later finishes.
fn compatible(predicted: PlacementState, observed: PlacementState) -> bool {
    use PlacementState::*;
    predicted == observed
        || matches!(
            (predicted, observed),
            (WaitingForAdmissionChecks, Admitted | Finished) | (Admitted, Finished)
        )
}

fn differences(predicted: &Placement, observed: &Placement) -> Vec<String> {
    predicted
        .differences(observed)
        .into_iter()
        .filter(|d| !(d.starts_with("state:") && compatible(predicted.state, observed.state)))
        .collect()
}

/// The spec's jobs (RayJobs, JobSets and batch Jobs), in the spec's order.
pub fn job_objects(desired: &DesiredState) -> Vec<&Value> {
    desired
        .kube_objects()
        .filter(|o| {
            matches!(
                (o["apiVersion"].as_str(), o["kind"].as_str()),
                (Some("ray.io/v1"), Some("RayJob"))
                    | (Some("batch/v1"), Some("Job"))
                    | (Some("jobset.x-k8s.io/v1alpha2"), Some("JobSet"))
            )
        })
        .collect()
}

/// gkq's prediction for the spec's jobs: live queues (or the spec's, before they exist) and
/// the Workloads of everything else.
fn predictions(
    desired: &DesiredState,
    observed: &KubeSnapshot,
    spec_jobs: &[&Value],
) -> Vec<Placement> {
    let queue_kinds = crate::placement::objects::KUEUE_KINDS;
    let live_queues = !observed.kind("ClusterQueue").is_empty();
    let mut cluster = Cluster::default();
    if live_queues {
        for kind in queue_kinds {
            for o in observed.kind(kind) {
                let _ = cluster.add_object(o);
            }
        }
    } else {
        for o in &desired.kubernetes {
            if o["kind"].as_str().is_some_and(|k| queue_kinds.contains(&k)) {
                let _ = cluster.add_object(o);
            }
        }
    }
    for o in observed.kind("Namespace") {
        let _ = cluster.add_object(o);
    }
    // Live usage comes from the Workloads read (not the queues' status, which counts the
    // spec's own jobs too).
    cluster.workloads_observed = observed.by_kind.contains_key("Workload");
    let job_workloads = JobWorkloads::new(observed.kind("Workload"));
    let spec_workloads: Vec<&Value> = spec_jobs
        .iter()
        .flat_map(|job| job_workloads.all_of(job))
        .map(|w| w.workload)
        .collect();
    for w in observed.kind("Workload") {
        if !spec_workloads.iter().any(|s| std::ptr::eq(*s, w)) {
            let _ = cluster.add_object(w);
        }
    }
    let jobs: Vec<PendingWorkload> = job_objects(desired)
        .into_iter()
        .filter_map(|o| PendingWorkload::from_object(o).ok())
        .collect();
    predict(&cluster, &jobs).placements
}

/// The report from the cluster GKE returned (`None`: it does not exist), its node pools, and
/// what was read from Kubernetes (`None`: it could not be read).
pub fn live_report(
    desired: &DesiredState,
    cluster: Option<&Value>,
    pools: &[GkeNodePool],
    observed: Option<&KubeSnapshot>,
    simulated: Option<Simulated>,
) -> LiveReport {
    let cluster_ref = &desired.gke.cluster_ref;
    let mut notes = Vec::new();
    if cluster.is_none() {
        notes.push(format!(
            "the cluster {} does not exist; `gkq apply` creates it",
            cluster_ref.cluster
        ));
    } else if observed.is_none() {
        notes.push("Kubernetes could not be reached: pass --kubeconfig, or use Application Default Credentials on the gcp target".to_string());
    }
    let empty = KubeSnapshot::default();
    let kube = observed.unwrap_or(&empty);
    if observed.is_some()
        && kube.kind("ClusterQueue").is_empty()
        && !kube.by_kind.contains_key("Workload")
    {
        notes.push("Kueue is not installed in the cluster yet".to_string());
    }

    let node_pools = pools
        .iter()
        .map(|p| {
            let nodes = observed.map(|o| {
                o.kind("Node")
                    .iter()
                    .filter(|n| {
                        n.pointer("/metadata/labels")
                            .and_then(|l| l.get(crate::vocab::labels::NODE_POOL_LABEL))
                            .and_then(Value::as_str)
                            == Some(p.name.as_str())
                    })
                    .count() as i64
            });
            PoolStatus {
                name: p.name.clone(),
                machine_type: p.machine_type.clone(),
                nodes,
                autoscaling: p.autoscaling,
                flex_start: p.flex_start,
                queued_provisioning: p.queued_provisioning,
            }
        })
        .collect();

    // The spec's jobs as they live.
    let mut live_jobs: Vec<Option<&Value>> = Vec::new();
    for job in job_objects(desired) {
        let kind = job["kind"].as_str().unwrap_or_default();
        let found = kube.kind(kind).iter().find(|o| {
            str_at(o, "/metadata/name") == str_at(job, "/metadata/name")
                && str_at(o, "/metadata/namespace").unwrap_or("default")
                    == str_at(job, "/metadata/namespace").unwrap_or("default")
        });
        live_jobs.push(found);
    }
    let spec_jobs: Vec<&Value> = live_jobs.iter().flatten().copied().collect();
    let predicted = predictions(desired, kube, &spec_jobs);
    let job_workloads = JobWorkloads::new(kube.kind("Workload"));

    let mut jobs = Vec::new();
    for (i, job) in job_objects(desired).into_iter().enumerate() {
        let live = live_jobs[i];
        let workload = live
            .and_then(|job| job_workloads.of(job))
            .map(|w| w.workload);
        let observed_placement = workload.and_then(|w| observed_placement(w).ok());
        let predicted_placement = predicted.get(i).cloned();
        let evicted = workload
            .and_then(|w| condition(w, "Evicted"))
            .filter(|c| c["status"] == "True")
            .map(|c| c["message"].as_str().unwrap_or_default().to_string());
        let deactivated =
            workload.is_some_and(|w| w.pointer("/spec/active") == Some(&Value::Bool(false)));
        let (agrees, diffs) = match (&predicted_placement, &observed_placement) {
            (Some(p), Some(o)) => {
                let mut d = differences(p, o);
                // The prediction cannot know how an admission check ends: a job evicted by its
                // failed check was placed as predicted.
                let failed_check = evicted.is_some()
                    && p.state == PlacementState::WaitingForAdmissionChecks
                    && o.state == PlacementState::Pending;
                if failed_check {
                    d.retain(|x| !x.starts_with("state:"));
                }
                (Some(d.is_empty()), d)
            }
            _ => (None, Vec::new()),
        };
        let admission_checks = workload
            .and_then(|w| w.pointer("/status/admissionChecks"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| CheckStatus {
                name: c["name"].as_str().unwrap_or_default().to_string(),
                state: c["state"].as_str().unwrap_or_default().to_string(),
                message: c["message"].as_str().unwrap_or_default().to_string(),
            })
            .collect();
        let provisioning_request =
            workload.and_then(|w| workload_request(w, kube.kind("ProvisioningRequest")));
        let ray = live.filter(|j| j["kind"] == "RayJob").map(|j| RayStatus {
            deployment_status: str_at(j, "/status/jobDeploymentStatus").map(str::to_string),
            job_status: str_at(j, "/status/jobStatus").map(str::to_string),
            message: str_at(j, "/status/message").map(str::to_string),
        });
        jobs.push(JobStatus {
            job: str_at(job, "/metadata/name")
                .unwrap_or_default()
                .to_string(),
            namespace: str_at(job, "/metadata/namespace")
                .unwrap_or("default")
                .to_string(),
            kind: job["kind"].as_str().unwrap_or_default().to_string(),
            submitted: live.is_some(),
            workload: workload.and_then(|w| str_at(w, "/metadata/name").map(str::to_string)),
            observed: observed_placement,
            predicted: predicted_placement,
            agrees,
            differences: diffs,
            admission_checks,
            provisioning_request,
            ray,
            progress: live.and_then(JobProgress::of),
            evicted,
            deactivated,
        });
    }

    let mut cluster_queues = Vec::new();
    for cq in desired
        .kubernetes
        .iter()
        .filter(|o| o["kind"] == "ClusterQueue")
    {
        let name = str_at(cq, "/metadata/name").unwrap_or_default();
        let live = kube
            .kind("ClusterQueue")
            .iter()
            .find(|o| str_at(o, "/metadata/name") == Some(name));
        let mut usage = Vec::new();
        for group in cq
            .pointer("/spec/resourceGroups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for flavor in group["flavors"].as_array().into_iter().flatten() {
                let fname = flavor["name"].as_str().unwrap_or_default();
                for resource in flavor["resources"].as_array().into_iter().flatten() {
                    let rname = resource["name"].as_str().unwrap_or_default();
                    let total = |field: &str| {
                        live.and_then(|l| l.pointer(&format!("/status/{field}")))
                            .and_then(Value::as_array)
                            .and_then(|fs| fs.iter().find(|f| f["name"] == fname))
                            .and_then(|f| f["resources"].as_array())
                            .and_then(|rs| rs.iter().find(|r| r["name"] == rname))
                            .and_then(|r| r["total"].as_str())
                            .unwrap_or("0")
                            .to_string()
                    };
                    let nominal = resource.get("nominalQuota").map(|q| match q {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                    usage.push(UsageRow {
                        flavor: fname.to_string(),
                        resource: rname.to_string(),
                        nominal,
                        reserved: total("flavorsReservation"),
                        admitted: total("flavorsUsage"),
                    });
                }
            }
        }
        let count = |field: &str| {
            live.and_then(|l| l.pointer(&format!("/status/{field}")))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        cluster_queues.push(QueueStatus {
            name: name.to_string(),
            active: live
                .and_then(|l| condition(l, "Active"))
                .map(|c| c["status"] == "True"),
            pending_workloads: count("pendingWorkloads"),
            reserving_workloads: count("reservingWorkloads"),
            admitted_workloads: count("admittedWorkloads"),
            usage,
        });
    }

    LiveReport {
        cluster_status: ClusterStatus {
            project: cluster_ref.project.clone(),
            location: cluster_ref.location.clone(),
            name: cluster_ref.cluster.clone(),
            status: cluster.and_then(|c| {
                crate::diff::normalize::status_name(c, crate::diff::normalize::GKE_CLUSTER_STATUS)
            }),
        },
        simulated,
        kubernetes: observed.is_some(),
        node_pools,
        jobs,
        cluster_queues,
        notes,
    }
}

/// The flavor people mean by "where the job landed": its workers' (the first podset that is
/// neither the Ray head nor the submitter), else the first podset's.
pub fn headline_flavor(placement: &Placement) -> Option<String> {
    placement
        .podsets
        .iter()
        .filter(|p| p.name != "head" && p.name != "submitter")
        .find_map(|p| p.flavor.clone())
        .or_else(|| placement.podsets.iter().find_map(|p| p.flavor.clone()))
}

impl JobStatus {
    /// A job without a queue: Kueue makes no Workload for it, so there is nothing to wait for.
    pub fn is_unmanaged(&self) -> bool {
        self.observed.is_none()
            && self
                .predicted
                .as_ref()
                .is_some_and(|p| p.state == PlacementState::Unmanaged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::desired_for_tests as desired;
    use crate::placement::provisioning::RequestState;
    use serde_json::json;

    fn rayjob() -> Value {
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"namespace": "ml", "name": "train",
                "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {}})
    }

    /// A flex-start pool in two zones, autoscaling up to 2 nodes in each.
    fn pool() -> GkeNodePool {
        let cluster = json!({"nodePools": [{"name": "dws-pool",
            "config": {"machineType": "ct6e-standard-4t", "flexStart": true},
            "locations": ["us-east5-a", "us-east5-b"],
            "autoscaling": {"enabled": true, "maxNodeCount": 2},
            "queuedProvisioning": {"enabled": true}}]});
        GkeNodePool::from_cluster(&cluster).remove(0)
    }

    /// The report is a function of the snapshot: the job's Workload (found by the live job's
    /// uid), its ProvisioningRequest by the one rule, nodes counted per pool.
    #[test]
    fn the_report_is_read_from_the_snapshot() {
        let mut live_job = rayjob();
        live_job["metadata"]["uid"] = json!("job-1");
        live_job["status"] = json!({"jobDeploymentStatus": "Initializing"});
        let workload = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"namespace": "ml", "name": "rayjob-train-abc12",
                "ownerReferences": [{"kind": "RayJob", "name": "train", "uid": "job-1"}]},
            "spec": {"queueName": "user-queue"},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                "admissionChecks": [{"name": "dws-prov", "state": "Retry", "message": "Retrying"}]}});
        let request = json!({"metadata": {"namespace": "ml", "name": "rayjob-train-abc12-dws-prov-1",
                "ownerReferences": [{"kind": "Workload", "name": "rayjob-train-abc12"}]},
            "status": {"conditions": [
                {"type": "Provisioned", "status": "True", "message": "provisioned"},
                {"type": "Failed", "status": "True", "message": "no capacity"}]}});
        let node = json!({"kind": "Node", "metadata": {"name": "n1",
            "labels": {"cloud.google.com/gke-nodepool": "dws-pool"}}});
        let snapshot = KubeSnapshot {
            by_kind: [
                ("RayJob", vec![live_job]),
                ("Workload", vec![workload]),
                ("ProvisioningRequest", vec![request]),
                ("Node", vec![node]),
            ]
            .into(),
        };
        let cluster = json!({"name": "c", "status": "RUNNING"});
        let report = live_report(
            &desired(vec![rayjob()]),
            Some(&cluster),
            &[pool()],
            Some(&snapshot),
            None,
        );
        let job = &report.jobs[0];
        assert!(job.submitted);
        assert_eq!(job.workload.as_deref(), Some("rayjob-train-abc12"));
        let request = job.provisioning_request.as_ref().unwrap();
        assert_eq!(
            (request.state, request.message.as_str()),
            (RequestState::Failed, "no capacity")
        );
        assert_eq!(job.admission_checks[0].state, "Retry");
        assert_eq!(
            job.ray.as_ref().unwrap().deployment_status.as_deref(),
            Some("Initializing")
        );
        assert_eq!(report.node_pools[0].nodes, Some(1));
        assert_eq!(report.node_pools[0].autoscaling, Some((0, 4)));
        assert!(report.kubernetes);
    }

    #[test]
    fn what_could_not_be_read_is_noted() {
        let desired = desired(vec![rayjob()]);
        let missing = live_report(&desired, None, &[], None, None);
        assert_eq!(
            missing.notes,
            ["the cluster c does not exist; `gkq apply` creates it"]
        );
        assert!(!missing.jobs[0].submitted);
        let cluster = json!({"name": "c"});
        let unreachable = live_report(&desired, Some(&cluster), &[], None, None);
        assert!(unreachable.notes[0].starts_with("Kubernetes could not be reached"));
        let no_kueue = live_report(
            &desired,
            Some(&cluster),
            &[],
            Some(&KubeSnapshot::default()),
            None,
        );
        assert_eq!(
            no_kueue.notes,
            ["Kueue is not installed in the cluster yet"]
        );
    }

    #[test]
    fn job_set_and_job_progress_come_from_their_own_status() {
        let job_set = |suspend: bool, status: Value| {
            json!({"kind": "JobSet", "spec": {"suspend": suspend,
                "replicatedJobs": [{"name": "slice", "replicas": 2}]}, "status": status})
        };
        let waiting = JobProgress::of(&job_set(
            false,
            json!({"replicatedJobsStatus": [{"name": "slice", "ready": 1, "succeeded": 0}],
                   "conditions": [{"type": "Suspended", "status": "False",
                       "lastTransitionTime": "2026-11-30T10:00:00Z", "message": "waiting for nodes"}]}),
        ))
        .unwrap();
        assert_eq!(
            (
                waiting.state.as_str(),
                waiting.detail.as_str(),
                waiting.message.as_deref()
            ),
            (
                "Starting",
                "slice 1 ready, 0 succeeded",
                Some("waiting for nodes")
            )
        );
        let running = JobProgress::of(&job_set(
            false,
            json!({"replicatedJobsStatus": [{"name": "slice", "ready": 2}]}),
        ))
        .unwrap();
        assert_eq!(running.state, "Running");
        assert_eq!(
            JobProgress::of(&job_set(true, json!({}))).unwrap().state,
            "Suspended"
        );
        let done = JobProgress::of(&json!({"kind": "Job", "spec": {},
            "status": {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True",
                "lastTransitionTime": "2026-11-30T10:00:00Z", "message": "done"}]}}))
        .unwrap();
        assert_eq!(
            (done.state.as_str(), done.detail.as_str()),
            ("Completed", "0 active, 0 ready, 2 succeeded")
        );
        assert_eq!(JobProgress::of(&json!({"kind": "RayJob"})), None);
    }

    /// An earlier run's finished Workload beside the current run's, and a Workload owned through
    /// the job's RayCluster: the report names the Workload the one rule names
    /// (`placement::job_workload`), as watch and explain do.
    #[test]
    fn the_report_names_the_workload_the_one_rule_names() {
        use crate::placement::job_workload::scenario;
        for (job, workloads, expected) in scenario::cases() {
            let snapshot = KubeSnapshot {
                by_kind: [("RayJob", vec![job]), ("Workload", workloads)].into(),
            };
            let cluster = json!({"name": "c", "status": "RUNNING"});
            let report = live_report(
                &desired(vec![rayjob()]),
                Some(&cluster),
                &[],
                Some(&snapshot),
                None,
            );
            assert_eq!(report.jobs[0].workload.as_deref(), Some(expected));
        }
    }
}
