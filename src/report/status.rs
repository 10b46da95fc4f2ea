//! The jobs, node pools and queues of `gkq status`: where each job of the spec really is,
//! beside where gkq predicts it goes, as a pure function of what was read ([`live_report`]).
//!
//! For each job: the placement Kueue made, read from its Workload (flavor per podset,
//! `QuotaReserved`/`Admitted`, admission checks, the ProvisioningRequest's state by
//! [`super::provisioning`]), the job's own state (KubeRay), and gkq's prediction, with any
//! disagreement spelled out ([`ComparedWith`]). A job Kueue has placed is compared with the
//! prediction the apply that submitted this run recorded (`plan::revision::PlacementRecords`):
//! predicting it again over today's queues would compare Kueue's decision with a question it was
//! never asked (after a quota raise, say). A job not placed yet is predicted now, over the live
//! queues (every Workload that holds quota counts, the spec's own included). Then the node pools (GKE's autoscaling limits, nodes counted from
//! Kubernetes `Node` objects) and each ClusterQueue's usage. The reading is
//! `observe::cluster`; the text is `render::status`.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::rung::{LadderJob, pods_run, rung_status};
use crate::model::DesiredState;
use crate::model::gke::node_pool_limits;
use crate::model::live::KubeSnapshot;
use crate::placement::job_workload::JobWorkloads;
use crate::placement::provisioning::{ProvisioningRequestState, RequestsByOwner};
use crate::placement::unmodelled::{self, Manager};
use crate::placement::{
    Cluster, PendingWorkload, Placement, PlacementState, observed_placement, predict,
};
use crate::plan::revision::{PlacementRecords, RecordOrigin};
use crate::spec::types::Spec;
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
    /// What gkq predicted: as recorded when this run was submitted, for a job Kueue has placed;
    /// predicted now over the live queues otherwise (see `comparedWith`).
    pub predicted: Option<Placement>,
    /// Where `predicted` comes from.
    pub compared_with: ComparedWith,
    /// `None` until there are a Workload and a prediction to compare.
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
    /// Where the job stands on the capacity ladder (only with a `capacity:` section:
    /// [`set_rungs`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rung: Option<super::rung::RungStatus>,
}

/// What a job's placement is compared with (`comparedWith.source` in JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum ComparedWith {
    /// Kueue has placed the job: the prediction recorded by the apply that submitted this run
    /// (the run's uid, and that apply's time and revision).
    Record {
        uid: String,
        #[serde(flatten)]
        origin: RecordOrigin,
    },
    /// Kueue has placed the job, and no apply recorded a prediction for this run: gkq did not
    /// submit it (or the record was left out for size), so there is nothing to compare with.
    NoRecord,
    /// Not placed yet (or not submitted): predicted now, over the live queues.
    Prediction,
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
/// its checks is later admitted, an admitted one later finishes, and a job predicted to wait for
/// quota is placed once quota frees up (compared with a record made when it was submitted).
fn compatible(predicted: PlacementState, observed: PlacementState) -> bool {
    use PlacementState::*;
    predicted == observed
        || matches!(
            (predicted, observed),
            (WaitingForAdmissionChecks, Admitted | Finished)
                | (Admitted, Finished)
                | (Pending, WaitingForAdmissionChecks | Admitted | Finished)
        )
}

fn differences(predicted: &Placement, observed: &Placement) -> Vec<String> {
    // A prediction that the job waits names no flavor: there is none to compare.
    let flavors_predicted = predicted.state != PlacementState::Pending;
    predicted
        .differences(observed)
        .into_iter()
        .filter(|d| !(d.starts_with("state:") && compatible(predicted.state, observed.state)))
        .filter(|d| flavors_predicted || !d.starts_with("podset "))
        .collect()
}

/// What a job Kueue has placed is compared with: the prediction recorded for its run, if any.
fn recorded_for(
    live: Option<&Value>,
    records: &PlacementRecords,
) -> (ComparedWith, Option<Placement>) {
    match live.and_then(|job| records.of_run(job)) {
        Some(record) => (
            ComparedWith::Record {
                uid: record.uid.clone(),
                origin: record.origin.clone(),
            },
            Some(record.placement()),
        ),
        None => (ComparedWith::NoRecord, None),
    }
}

/// How a job Kueue has placed compares with the prediction recorded for its run (what
/// `gkq watch` tells once per job and verdict).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedComparison {
    /// `namespace/name`.
    pub job: String,
    pub compared_with: ComparedWith,
    /// Where Kueue's placement differs from the record; empty when it agrees or there is none.
    pub differences: Vec<String>,
}

/// How each of `jobs` (live jobs) that Kueue has placed compares with its record, by the rule
/// `gkq status` follows.
pub fn placed_comparisons(
    jobs: &[Value],
    workloads: &[Value],
    records: &PlacementRecords,
) -> Vec<PlacedComparison> {
    let job_workloads = JobWorkloads::new(workloads);
    jobs.iter()
        .filter_map(|job| {
            let workload = job_workloads.of(job)?.workload;
            let observed = observed_placement(workload).ok().filter(placed)?;
            let (compared_with, predicted) = recorded_for(Some(job), records);
            Some(PlacedComparison {
                job: format!(
                    "{}/{}",
                    str_at(job, "/metadata/namespace").unwrap_or("default"),
                    str_at(job, "/metadata/name").unwrap_or_default()
                ),
                compared_with,
                differences: predicted
                    .map(|p| differences(&p, &observed))
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// Whether Kueue has placed the job (reserved quota for it, now or before it finished): its
/// placement is then compared with the prediction recorded for it, not predicted again.
fn placed(observed: &Placement) -> bool {
    matches!(
        observed.state,
        PlacementState::Admitted
            | PlacementState::WaitingForAdmissionChecks
            | PlacementState::Finished
    )
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

/// gkq's prediction now for `waiting`, the spec's jobs Kueue has not placed (each with its live
/// job, if submitted): over the live queues (or the spec's, before they exist) and every other
/// Workload, the spec's placed jobs' included. One per job, in order (`None`: the job cannot be
/// read as a workload).
fn predictions(
    desired: &DesiredState,
    observed: &KubeSnapshot,
    waiting: &[(&Value, Option<&Value>)],
    kueue: &Manager,
) -> Vec<Option<Placement>> {
    if waiting.is_empty() {
        return Vec::new();
    }
    let queue_kinds = crate::placement::objects::KUEUE_KINDS;
    let live_queues = !observed.kind("ClusterQueue").is_empty();
    // Every object the prediction reads, for what of Kueue gkq does not model.
    let mut read: Vec<&Value> = Vec::new();
    if live_queues {
        for kind in queue_kinds {
            read.extend(observed.kind(kind));
        }
    } else {
        read.extend(
            desired
                .kubernetes
                .iter()
                .filter(|o| o["kind"].as_str().is_some_and(|k| queue_kinds.contains(&k)))
                .map(|o| &**o),
        );
    }
    read.extend(observed.kind("Namespace"));
    let mut cluster = Cluster::default();
    for o in &read {
        let _ = cluster.add_object(o);
    }
    // Live usage comes from the Workloads read (not the queues' status, which counts the
    // waiting jobs too).
    cluster.workloads_observed = observed.by_kind.contains_key("Workload");
    let job_workloads = JobWorkloads::new(observed.kind("Workload"));
    let predicted_workloads: Vec<&Value> = waiting
        .iter()
        .filter_map(|(_, live)| *live)
        .flat_map(|job| job_workloads.all_of(job))
        .map(|w| w.workload)
        .collect();
    for w in observed.kind("Workload") {
        if !predicted_workloads.iter().any(|s| std::ptr::eq(*s, w)) {
            let _ = cluster.add_object(w);
            read.push(w);
        }
    }
    let jobs: Vec<Option<PendingWorkload>> = waiting
        .iter()
        .map(|(job, _)| PendingWorkload::from_object(job).ok())
        .collect();
    let readable: Vec<PendingWorkload> = jobs.iter().flatten().cloned().collect();
    let mut placements = predict(&cluster, &readable).placements;
    // The plan's rule (`placement::unmodelled`): under a Kueue release or feature gkq does not
    // model, a waiting job's placement is "not predicted", with the reason.
    read.extend(waiting.iter().map(|(job, _)| *job));
    let found = unmodelled::find(&read, kueue);
    unmodelled::mark(&mut placements, &found, &read);
    let mut placements = placements.into_iter();
    jobs.iter()
        .map(|job| job.as_ref().and_then(|_| placements.next()))
        .collect()
}

/// The report from the cluster GKE returned (`None`: it does not exist), its node pools, what
/// was read from Kubernetes (`None`: it could not be read) and the predicted placements the
/// applied revision records.
pub fn live_report(
    desired: &DesiredState,
    cluster: Option<&Value>,
    pools: &[GkeNodePool],
    observed: Option<&KubeSnapshot>,
    records: &PlacementRecords,
    kueue: &Manager,
    simulated: Option<Simulated>,
) -> LiveReport {
    let empty = KubeSnapshot::default();
    let kube = observed.unwrap_or(&empty);
    LiveReport {
        node_pools: pool_statuses(pools, observed),
        cluster_queues: queue_statuses(desired, kube),
        ..jobs_report(desired, cluster, observed, records, kueue, simulated)
    }
}

/// The report on the spec's jobs alone, for the lines after an apply: [`live_report`] without
/// the node pools and queues, from `observed` holding the spec's jobs, Kueue's Workloads and
/// what [`job_report_reads`] asked for.
pub fn jobs_report(
    desired: &DesiredState,
    cluster: Option<&Value>,
    observed: Option<&KubeSnapshot>,
    records: &PlacementRecords,
    kueue: &Manager,
    simulated: Option<Simulated>,
) -> LiveReport {
    let cluster_ref = &desired.gke.cluster_ref;
    let empty = KubeSnapshot::default();
    let kube = observed.unwrap_or(&empty);
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
        node_pools: Vec::new(),
        jobs: job_statuses(desired, kube, records, kueue),
        cluster_queues: Vec::new(),
        notes: live_notes(desired, cluster, observed),
    }
}

/// What the report says before anything else: a missing cluster, an unreachable Kubernetes, a
/// Kueue not installed yet.
fn live_notes(
    desired: &DesiredState,
    cluster: Option<&Value>,
    observed: Option<&KubeSnapshot>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if cluster.is_none() {
        notes.push(format!(
            "the cluster {} does not exist; `gkq apply` creates it",
            desired.gke.cluster_ref.cluster
        ));
    } else if observed.is_none() {
        notes.push("Kubernetes could not be reached: pass --kubeconfig, or use Application Default Credentials on the gcp target".to_string());
    }
    if let Some(kube) = observed
        && kube.kind("ClusterQueue").is_empty()
        && !kube.by_kind.contains_key("Workload")
    {
        notes.push("Kueue is not installed in the cluster yet".to_string());
    }
    notes
}

/// Each node pool, with its node count when Kubernetes was read.
fn pool_statuses(pools: &[GkeNodePool], observed: Option<&KubeSnapshot>) -> Vec<PoolStatus> {
    pools
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
        .collect()
}

/// The spec's jobs as observed: each job of the spec (in order), as it lives, its Workload and
/// the placement Kueue made, read from that Workload.
struct ObservedJobs<'a> {
    spec_jobs: Vec<&'a Value>,
    live_jobs: Vec<Option<&'a Value>>,
    workloads: Vec<Option<&'a Value>>,
    placements: Vec<Option<Placement>>,
}

impl<'a> ObservedJobs<'a> {
    fn of(desired: &'a DesiredState, kube: &'a KubeSnapshot) -> Self {
        let spec_jobs = job_objects(desired);
        // Each live job by kind, namespace and name (the first listed wins), so that finding
        // every spec job's live one is not a scan of the kind per job.
        let mut live_by_name: HashMap<(&str, &str, &str), &Value> = HashMap::new();
        for kind in spec_jobs
            .iter()
            .map(|job| job["kind"].as_str().unwrap_or_default())
            .collect::<BTreeSet<_>>()
        {
            for o in kube.kind(kind) {
                let namespace = str_at(o, "/metadata/namespace").unwrap_or("default");
                if let Some(name) = str_at(o, "/metadata/name") {
                    live_by_name.entry((kind, namespace, name)).or_insert(o);
                }
            }
        }
        let live_jobs: Vec<Option<&Value>> = spec_jobs
            .iter()
            .map(|job| {
                let kind = job["kind"].as_str().unwrap_or_default();
                let namespace = str_at(job, "/metadata/namespace").unwrap_or("default");
                let name = str_at(job, "/metadata/name")?;
                live_by_name.get(&(kind, namespace, name)).copied()
            })
            .collect();
        let job_workloads = JobWorkloads::new(kube.kind("Workload"));
        let workloads: Vec<Option<&Value>> = live_jobs
            .iter()
            .map(|live| {
                live.and_then(|job| job_workloads.of(job))
                    .map(|w| w.workload)
            })
            .collect();
        let placements = workloads
            .iter()
            .map(|w| w.and_then(|w| observed_placement(w).ok()))
            .collect();
        ObservedJobs {
            spec_jobs,
            live_jobs,
            workloads,
            placements,
        }
    }

    /// The jobs Kueue has not placed (each with its live job, if submitted): they are
    /// predicted now.
    fn waiting(&self) -> Vec<(&'a Value, Option<&'a Value>)> {
        self.spec_jobs
            .iter()
            .zip(&self.live_jobs)
            .zip(&self.placements)
            .filter(|(_, observed)| !observed.as_ref().is_some_and(placed))
            .map(|((job, live), _)| (*job, *live))
            .collect()
    }
}

/// What a report on the spec's jobs alone ([`jobs_report`]) needs read beyond the spec's jobs
/// and Kueue's Workloads, which `observed` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobReportReads {
    /// Kueue's queues, flavors, checks, priorities and the namespaces: a job Kueue queues that
    /// it has not placed yet is predicted now, over the live queues. A job without a queue is
    /// predicted unmanaged over any queues, and a placed one is compared with its record.
    pub queues: bool,
    /// ProvisioningRequests: a job's Workload has admission checks.
    pub provisioning_requests: bool,
}

/// What [`jobs_report`] needs read beyond `observed` (the spec's jobs and the Workloads).
pub fn job_report_reads(desired: &DesiredState, observed: &KubeSnapshot) -> JobReportReads {
    let jobs = ObservedJobs::of(desired, observed);
    JobReportReads {
        queues: jobs
            .waiting()
            .iter()
            .any(|(job, _)| crate::model::jobs::queued_by_kueue(job)),
        provisioning_requests: jobs.workloads.iter().flatten().any(|w| {
            w.pointer("/status/admissionChecks")
                .and_then(Value::as_array)
                .is_some_and(|checks| !checks.is_empty())
        }),
    }
}

/// Each of the spec's jobs: as it lives, its Workload, where Kueue placed it and how that
/// compares with the recorded (placed jobs) or the current (waiting jobs) prediction.
fn job_statuses(
    desired: &DesiredState,
    kube: &KubeSnapshot,
    records: &PlacementRecords,
    kueue: &Manager,
) -> Vec<JobStatus> {
    let observed = ObservedJobs::of(desired, kube);
    let waiting = observed.waiting();
    let ObservedJobs {
        spec_jobs,
        live_jobs,
        workloads,
        placements: observed_placements,
    } = observed;
    let mut predicted_now = predictions(desired, kube, &waiting, kueue).into_iter();
    // Each job's request found by its Workload, not by reading every request per job.
    let requests = RequestsByOwner::new(kube.kind("ProvisioningRequest"));

    let mut jobs = Vec::new();
    for (i, job) in spec_jobs.into_iter().enumerate() {
        let live = live_jobs[i];
        let observed_placement = observed_placements[i].clone();
        let (compared_with, predicted_placement) = match &observed_placement {
            Some(observed) if placed(observed) => recorded_for(live, records),
            _ => (ComparedWith::Prediction, predicted_now.next().flatten()),
        };
        jobs.push(job_status(
            job,
            live,
            workloads[i],
            &requests,
            Compared {
                observed: observed_placement,
                predicted: predicted_placement,
                with: compared_with,
            },
        ));
    }
    jobs
}

/// A job's observed placement, the placement it is compared with, and where that one comes
/// from.
struct Compared {
    observed: Option<Placement>,
    predicted: Option<Placement>,
    with: ComparedWith,
}

/// One job's status: spec object `job`, as it lives (`live`), its Workload and its placements.
fn job_status(
    job: &Value,
    live: Option<&Value>,
    workload: Option<&Value>,
    requests: &RequestsByOwner<'_>,
    compared: Compared,
) -> JobStatus {
    let evicted = workload
        .and_then(|w| condition(w, "Evicted"))
        .filter(|c| c["status"] == "True")
        .map(|c| c["message"].as_str().unwrap_or_default().to_string());
    let deactivated =
        workload.is_some_and(|w| w.pointer("/spec/active") == Some(&Value::Bool(false)));
    let (agrees, diffs) = match (&compared.predicted, &compared.observed) {
        // Nothing was predicted to compare with.
        (Some(p), Some(o)) if p.not_predicted.is_none() => {
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
    let provisioning_request = workload.and_then(|w| requests.workload_request(w));
    let ray = live.filter(|j| j["kind"] == "RayJob").map(|j| RayStatus {
        deployment_status: str_at(j, "/status/jobDeploymentStatus").map(str::to_string),
        job_status: str_at(j, "/status/jobStatus").map(str::to_string),
        message: str_at(j, "/status/message").map(str::to_string),
    });
    JobStatus {
        job: str_at(job, "/metadata/name")
            .unwrap_or_default()
            .to_string(),
        namespace: str_at(job, "/metadata/namespace")
            .unwrap_or("default")
            .to_string(),
        kind: job["kind"].as_str().unwrap_or_default().to_string(),
        submitted: live.is_some(),
        workload: workload.and_then(|w| str_at(w, "/metadata/name").map(str::to_string)),
        observed: compared.observed,
        predicted: compared.predicted,
        compared_with: compared.with,
        agrees,
        differences: diffs,
        admission_checks,
        provisioning_request,
        ray,
        progress: live.and_then(JobProgress::of),
        evicted,
        deactivated,
        rung: None,
    }
}

/// Each job's place on the capacity ladder ([`super::rung::rung_status`]; left `None` for a job
/// Kueue has not put on a ladder flavor, and for every job without a `capacity:` section).
/// `events` and `nodes`: the cluster's Events and Nodes as read.
pub fn set_rungs(spec: &Spec, jobs: &mut [JobStatus], events: &[Value], nodes: &[Value]) {
    if spec.capacity.is_none() {
        return;
    }
    for job in jobs.iter_mut() {
        let provisioning = job
            .provisioning_request
            .as_ref()
            .and_then(provisioning_words);
        let ray = job
            .ray
            .as_ref()
            .and_then(|r| r.deployment_status.as_deref());
        let progress = job.progress.as_ref().map(|p| p.state.as_str());
        let ladder_job = LadderJob {
            kind: &job.kind,
            name: &job.job,
            namespace: &job.namespace,
            observed: job.observed.as_ref(),
            runs: pods_run(ray, progress),
            provisioning: provisioning.as_deref(),
        };
        job.rung = rung_status(spec, &ladder_job, events, nodes);
    }
}

/// One job's place on the capacity ladder from its live object (`job`), its Workload and the
/// cluster's ProvisioningRequests, Events and Nodes: what `gkq watch` appends to the job's
/// stage and `gkq explain` says of it, in the words [`set_rungs`] gives `gkq status`.
pub fn live_rung(
    spec: &Spec,
    job: &Value,
    workload: Option<&Value>,
    requests: &RequestsByOwner<'_>,
    events: &[Value],
    nodes: &[Value],
) -> Option<super::rung::RungStatus> {
    let observed = workload.and_then(|w| observed_placement(w).ok());
    let provisioning = workload
        .and_then(|w| requests.workload_request(w))
        .as_ref()
        .and_then(provisioning_words);
    let progress = JobProgress::of(job);
    let ladder_job = LadderJob {
        kind: job["kind"].as_str().unwrap_or_default(),
        name: str_at(job, "/metadata/name").unwrap_or_default(),
        namespace: str_at(job, "/metadata/namespace").unwrap_or("default"),
        observed: observed.as_ref(),
        runs: pods_run(
            str_at(job, "/status/jobDeploymentStatus"),
            progress.as_ref().map(|p| p.state.as_str()),
        ),
        provisioning: provisioning.as_deref(),
    };
    rung_status(spec, &ladder_job, events, nodes)
}

/// A ProvisioningRequest's state as a waiting reason (`None` while it says nothing).
fn provisioning_words(request: &ProvisioningRequestState) -> Option<String> {
    (!request.message.is_empty())
        .then(|| format!("ProvisioningRequest {}: {}", request.name, request.message))
}

/// Each ClusterQueue of the spec: whether it is active, its Workload counts and its usage.
fn queue_statuses(desired: &DesiredState, kube: &KubeSnapshot) -> Vec<QueueStatus> {
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
            usage: queue_usage(cq, live),
        });
    }
    cluster_queues
}

/// A ClusterQueue's quota by flavor and resource: nominal (from the spec `cq`), reserved and
/// admitted (from its live status, `0` when not read).
fn queue_usage(cq: &Value, live: Option<&Value>) -> Vec<UsageRow> {
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
    usage
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
            &PlacementRecords::default(),
            &Manager::default(),
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

    /// The report on the jobs alone asks for Kueue's queues only while a queued job waits (its
    /// prediction weighs them), and for ProvisioningRequests only when a Workload has checks.
    #[test]
    fn a_report_on_the_jobs_reads_the_queues_only_for_a_waiting_queued_job() {
        let mut unqueued = rayjob();
        unqueued["metadata"]["labels"] = json!({});
        unqueued["metadata"]["name"] = json!("free");
        let mut live_job = rayjob();
        live_job["metadata"]["uid"] = json!("job-1");
        let workload = |conditions: Value, checks: Value| {
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"namespace": "ml", "name": "rayjob-train-abc12",
                    "ownerReferences": [{"kind": "RayJob", "name": "train", "uid": "job-1"}]},
                "spec": {"queueName": "user-queue"},
                "status": {"conditions": conditions, "admissionChecks": checks,
                    "admission": {"clusterQueue": "cq", "podSetAssignments": []}}})
        };
        let reserved = json!([{"type": "QuotaReserved", "status": "True"},
            {"type": "Admitted", "status": "True"}]);
        let snapshot = |workloads: Vec<Value>| KubeSnapshot {
            by_kind: [("RayJob", vec![live_job.clone()]), ("Workload", workloads)].into(),
        };
        let queued_and_free = desired(vec![rayjob(), unqueued.clone()]);
        let reads = |desired: &DesiredState, observed: &KubeSnapshot| {
            let r = job_report_reads(desired, observed);
            (r.queues, r.provisioning_requests)
        };
        // Submitted, no Workload yet: the queued job waits.
        assert_eq!(reads(&queued_and_free, &snapshot(vec![])), (true, false));
        // Placed: compared with its record; the job without a queue is unmanaged anyway.
        assert_eq!(
            reads(
                &queued_and_free,
                &snapshot(vec![workload(reserved.clone(), json!([]))])
            ),
            (false, false)
        );
        let checked = workload(reserved, json!([{"name": "dws-prov", "state": "Pending"}]));
        assert_eq!(
            reads(&queued_and_free, &snapshot(vec![checked.clone()])),
            (false, true)
        );
        // Only jobs without a queue: nothing beyond the jobs and Workloads.
        assert_eq!(
            reads(&desired(vec![unqueued]), &snapshot(vec![])),
            (false, false)
        );
        // The report itself: the jobs, no node pools or queues.
        let cluster = json!({"name": "c", "status": "RUNNING"});
        let report = jobs_report(
            &queued_and_free,
            Some(&cluster),
            Some(&snapshot(vec![checked])),
            &PlacementRecords::default(),
            &Manager::default(),
            None,
        );
        assert_eq!(report.jobs.len(), 2);
        assert_eq!(report.jobs[0].admission_checks[0].name, "dws-prov");
        assert!(report.jobs[1].is_unmanaged());
        assert!(report.node_pools.is_empty() && report.cluster_queues.is_empty());
    }

    #[test]
    fn what_could_not_be_read_is_noted() {
        let desired = desired(vec![rayjob()]);
        let none = PlacementRecords::default();
        let missing = live_report(&desired, None, &[], None, &none, &Manager::default(), None);
        assert_eq!(
            missing.notes,
            ["the cluster c does not exist; `gkq apply` creates it"]
        );
        assert!(!missing.jobs[0].submitted);
        let cluster = json!({"name": "c"});
        let unreachable = live_report(
            &desired,
            Some(&cluster),
            &[],
            None,
            &none,
            &Manager::default(),
            None,
        );
        assert!(unreachable.notes[0].starts_with("Kubernetes could not be reached"));
        let no_kueue = live_report(
            &desired,
            Some(&cluster),
            &[],
            Some(&KubeSnapshot::default()),
            &none,
            &Manager::default(),
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
                &PlacementRecords::default(),
                &Manager::default(),
                None,
            );
            assert_eq!(report.jobs[0].workload.as_deref(), Some(expected));
        }
    }

    mod against_the_record {
        use super::*;
        use crate::plan::revision::{RecordOrigin, RecordedPlacement, RecordedPodSet};

        fn job(name: &str) -> Value {
            json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"namespace": "ml", "name": name,
                    "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
                "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}}})
        }

        fn run(name: &str, uid: &str) -> Value {
            let mut live = job(name);
            live["metadata"]["uid"] = json!(uid);
            live
        }

        /// The Workload of run `uid` of job `name`: holding 4 cpu of `flavor`, or waiting.
        fn workload(name: &str, uid: &str, flavor: Option<&str>) -> Value {
            let mut w = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"namespace": "ml", "name": format!("job-{name}-{uid}"),
                    "ownerReferences": [{"kind": "Job", "name": name, "uid": uid}]},
                "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1,
                    "template": {"spec": {"containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "4"}}}]}}}]}});
            w["status"] = match flavor {
                Some(flavor) => json!({"conditions": [
                        {"type": "QuotaReserved", "status": "True"},
                        {"type": "Admitted", "status": "True"}],
                    "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
                        "count": 1, "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": "4"}}]}}),
                None => json!({"conditions": [{"type": "QuotaReserved", "status": "False",
                    "message": "waiting"}]}),
            };
            w
        }

        fn record(name: &str, uid: &str, flavor: &str) -> RecordedPlacement {
            RecordedPlacement {
                kind: "Job".into(),
                namespace: "ml".into(),
                job: name.into(),
                uid: uid.into(),
                origin: RecordOrigin {
                    applied_at: "2026-11-30T12:00:00Z".into(),
                    spec_digest: "sha256:0123".into(),
                    commit: Some("89abcdef0123456789abcdef0123456789abcdef".into()),
                },
                state: PlacementState::Admitted,
                cluster_queue: Some("cq".into()),
                podsets: vec![RecordedPodSet {
                    name: "main".into(),
                    count: 1,
                    flavors: [("cpu".to_string(), flavor.to_string())].into(),
                }],
                admission_checks: vec![],
            }
        }

        /// After a quota raise: on-demand now holds 4 cpu (it held none when `a` and `b` were
        /// submitted, so both went to dws); `b` has been deleted and submitted again since; `c`
        /// waits.
        fn snapshot() -> KubeSnapshot {
            let flavor = |name: &str| {
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                    "metadata": {"name": name}, "spec": {}})
            };
            let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "cq"}, "spec": {"namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": "4"}]},
                    {"name": "dws", "resources": [{"name": "cpu", "nominalQuota": "100"}]}]}]}});
            let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"namespace": "ml", "name": "user-queue"},
                "spec": {"clusterQueue": "cq"}});
            KubeSnapshot {
                by_kind: [
                    ("ResourceFlavor", vec![flavor("on-demand"), flavor("dws")]),
                    ("ClusterQueue", vec![cq]),
                    ("LocalQueue", vec![lq]),
                    (
                        "Job",
                        vec![run("a", "a-1"), run("b", "b-2"), run("c", "c-1")],
                    ),
                    (
                        "Workload",
                        vec![
                            workload("a", "a-1", Some("dws")),
                            workload("b", "b-2", Some("dws")),
                            workload("c", "c-1", None),
                        ],
                    ),
                ]
                .into(),
            }
        }

        fn report(records: &PlacementRecords) -> LiveReport {
            report_under(records, &Manager::default())
        }

        /// The report when `kueue` is the Kueue manager that runs.
        fn report_under(records: &PlacementRecords, kueue: &Manager) -> LiveReport {
            let cluster = json!({"name": "c", "status": "RUNNING"});
            live_report(
                &desired(vec![job("a"), job("b"), job("c")]),
                Some(&cluster),
                &[],
                Some(&snapshot()),
                records,
                kueue,
                None,
            )
        }

        /// Under a Kueue release gkq does not model, a waiting job is "not predicted" with the
        /// plan's reason (`placement::unmodelled`), and nothing is compared; a job Kueue placed
        /// is still compared with its record. A patch release of the modelled one, or
        /// `--predict-anyway`, predicts it as before.
        #[test]
        fn a_waiting_job_is_not_predicted_under_a_kueue_release_gkq_does_not_model() {
            let records = PlacementRecords {
                jobs: vec![record("a", "a-1", "dws")],
                omitted: 0,
            };
            let running = |version: &str, predict_anyway: bool| Manager {
                version: Some(version.to_string()),
                predict_anyway,
                ..Manager::default()
            };
            let other = report_under(&records, &running("v0.20.0", false));
            let c = &other.jobs[2];
            assert_eq!(c.compared_with, ComparedWith::Prediction);
            let why = c
                .predicted
                .as_ref()
                .and_then(|p| p.not_predicted.as_deref());
            assert!(
                why.is_some_and(
                    |w| w.starts_with("not predicted: Kueue v0.20 is installed; gkq models v0.19")
                ),
                "{c:#?}"
            );
            assert_eq!((c.agrees, c.differences.is_empty()), (None, true));
            let json = serde_json::to_value(c).unwrap();
            assert!(json["predicted"]["notPredicted"].is_string(), "{json:#}");
            assert_eq!(
                other.jobs[0].agrees,
                Some(true),
                "the placed job keeps its record"
            );

            for (version, anyway) in [("v0.19.7", false), ("v0.20.0", true)] {
                let predicted = report_under(&records, &running(version, anyway));
                let c = predicted.jobs[2].predicted.as_ref().unwrap();
                assert_eq!(c.not_predicted, None, "{version} {anyway}");
                assert_eq!(headline_flavor(c).as_deref(), Some("on-demand"));
            }
        }

        /// A job Kueue placed is compared with the prediction recorded for its run, which
        /// agrees though the quota raised since would now put it elsewhere; a run gkq did not
        /// submit (a record of an earlier run is not its) has no record; a waiting job is
        /// predicted now, with the placed jobs' quota counted.
        #[test]
        fn placed_jobs_are_compared_with_their_record_and_waiting_ones_predicted_now() {
            let records = PlacementRecords {
                jobs: vec![record("a", "a-1", "dws"), record("b", "b-1", "dws")],
                omitted: 0,
            };
            let report = report(&records);
            let [a, b, c] = &report.jobs[..] else {
                panic!("{:#?}", report.jobs)
            };
            assert_eq!(
                a.compared_with,
                ComparedWith::Record {
                    uid: "a-1".into(),
                    origin: records.jobs[0].origin.clone()
                }
            );
            assert_eq!(a.agrees, Some(true), "{:?}", a.differences);
            assert_eq!(
                a.predicted.as_ref().and_then(headline_flavor).as_deref(),
                Some("dws")
            );

            assert_eq!(b.compared_with, ComparedWith::NoRecord);
            assert_eq!((b.agrees, b.predicted.is_none()), (None, true));

            assert_eq!(c.compared_with, ComparedWith::Prediction);
            let predicted = c.predicted.as_ref().unwrap();
            // Predicted now: on-demand, which the placed jobs (on dws) leave free.
            assert_eq!(predicted.state, PlacementState::Admitted);
            assert_eq!(headline_flavor(predicted).as_deref(), Some("on-demand"));

            let json = serde_json::to_value(a).unwrap();
            assert_eq!(json["comparedWith"]["source"], "record");
            assert_eq!(json["comparedWith"]["uid"], "a-1");
            assert_eq!(json["comparedWith"]["appliedAt"], "2026-11-30T12:00:00Z");
            assert_eq!(
                serde_json::to_value(b).unwrap()["comparedWith"],
                json!({"source": "no-record"})
            );
        }

        /// Without the record a placed job is not predicted again as if it were new (which
        /// would now say on-demand, where Kueue did not put it): there is nothing to compare.
        #[test]
        fn without_a_record_a_placed_job_is_not_predicted_again() {
            let report = report(&PlacementRecords::default());
            assert_eq!(report.jobs[0].compared_with, ComparedWith::NoRecord);
            assert_eq!(report.jobs[0].agrees, None);
            assert!(
                report
                    .jobs
                    .iter()
                    .all(|j| j.agrees != Some(false) || j.job == "c")
            );
        }

        /// A record that says where Kueue did not put the run: the difference is named.
        #[test]
        fn a_record_that_kueue_did_not_follow_differs() {
            let records = PlacementRecords {
                jobs: vec![record("a", "a-1", "on-demand")],
                omitted: 0,
            };
            let a = &report(&records).jobs[0];
            assert_eq!(a.agrees, Some(false));
            assert_eq!(
                a.differences,
                ["podset main: predicted on-demand, observed dws"]
            );
        }

        /// A job predicted to wait for quota and placed once quota freed up is what the
        /// prediction becomes with time; the prediction named no flavor to compare.
        #[test]
        fn a_job_recorded_as_waiting_and_placed_later_agrees() {
            let mut waiting = record("a", "a-1", "dws");
            waiting.state = PlacementState::Pending;
            waiting.podsets[0].flavors.clear();
            let records = PlacementRecords {
                jobs: vec![waiting],
                omitted: 0,
            };
            let a = &report(&records).jobs[0];
            assert_eq!(a.agrees, Some(true), "{:?}", a.differences);
        }
    }
}
