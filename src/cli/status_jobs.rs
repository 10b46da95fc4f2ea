//! The jobs, node pools and queues of `gkq status`: where each job of the spec really is,
//! beside where gkq predicts it goes.
//!
//! For each job: the placement Kueue made, read from its Workload (flavor per podset,
//! `QuotaReserved`/`Admitted`, admission checks, the ProvisioningRequest's state), the job's own
//! state (KubeRay), and gkq's prediction for the spec's jobs over the live queues (other
//! tenants' Workloads count; the spec's own do not), with any disagreement spelled out. Then the
//! node pools (GKE's autoscaling limits, nodes counted from Kubernetes `Node` objects) and each
//! ClusterQueue's usage. It reads the same way from a real cluster and from the local target,
//! whose answers are labelled simulated.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::output::print_stdout;
use crate::kube::{KubeApi, KubeResult, ResourceInfo};
use crate::model::DesiredState;
use crate::ops::session::Session;
use crate::placement::{
    Cluster, PendingWorkload, Placement, PlacementState, observed_placement, predict,
};
use crate::report::provisioning::{ProvisioningRequestState, workload_request};
use crate::vocab::object::{condition, owned_by_uid};

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

/// Everything `status` reads from Kubernetes.
#[derive(Debug, Default)]
struct Observed {
    by_kind: BTreeMap<&'static str, Vec<Value>>,
}

const READ_KINDS: [(&str, &str, &str); 13] = [
    ("kueue.x-k8s.io/v1beta2", "Workload", "Workload"),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "Cohort", "Cohort"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck", "AdmissionCheck"),
    (
        "kueue.x-k8s.io/v1beta2",
        "ProvisioningRequestConfig",
        "ProvisioningRequestConfig",
    ),
    (
        "kueue.x-k8s.io/v1beta2",
        "WorkloadPriorityClass",
        "WorkloadPriorityClass",
    ),
    (
        "autoscaling.x-k8s.io/v1",
        "ProvisioningRequest",
        "ProvisioningRequest",
    ),
    ("ray.io/v1", "RayJob", "RayJob"),
    ("batch/v1", "Job", "Job"),
    ("v1", "Node", "Node"),
    ("v1", "Namespace", "Namespace"),
];

impl Observed {
    async fn read(api: &dyn KubeApi) -> KubeResult<Observed> {
        let mut observed = Observed::default();
        for (api_version, kind, key) in READ_KINDS {
            let Some(info): Option<ResourceInfo> = api.resource(api_version, kind).await? else {
                continue;
            };
            observed.by_kind.insert(key, api.list(&info, "").await?);
        }
        Ok(observed)
    }

    fn kind(&self, kind: &str) -> &[Value] {
        self.by_kind
            .get(kind)
            .map(Vec::as_slice)
            .unwrap_or_default()
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

fn job_objects(desired: &DesiredState) -> Vec<&Value> {
    desired
        .kubernetes
        .iter()
        .filter(|o| {
            matches!(
                (o["apiVersion"].as_str(), o["kind"].as_str()),
                (Some("ray.io/v1"), Some("RayJob")) | (Some("batch/v1"), Some("Job"))
            )
        })
        .collect()
}

/// gkq's prediction for the spec's jobs: live queues (or the spec's, before they exist) and
/// the Workloads of everything else.
fn predictions(
    desired: &DesiredState,
    observed: &Observed,
    spec_uids: &[String],
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
    for w in observed.kind("Workload") {
        if !spec_uids.iter().any(|u| owned_by_uid(w, u)) {
            let _ = cluster.add_object(w);
        }
    }
    let jobs: Vec<PendingWorkload> = job_objects(desired)
        .into_iter()
        .filter_map(|o| PendingWorkload::from_object(o).ok())
        .collect();
    predict(&cluster, &jobs).placements
}

/// Builds the report. `api` is `None` when Kubernetes cannot be read (no cluster yet).
async fn collect(
    desired: &DesiredState,
    cluster: Option<&Value>,
    api: Option<&dyn KubeApi>,
    simulated: Option<Simulated>,
) -> anyhow::Result<LiveReport> {
    let cluster_ref = &desired.gke.cluster_ref;
    let mut notes = Vec::new();
    let observed = match api {
        Some(api) => Some(
            Observed::read(api)
                .await
                .map_err(|e| anyhow::anyhow!("reading Kubernetes: {e}"))?,
        ),
        None => None,
    };
    if cluster.is_none() {
        notes.push(format!(
            "the cluster {} does not exist; `gkq apply` creates it",
            cluster_ref.cluster
        ));
    } else if observed.is_none() {
        notes.push("Kubernetes could not be reached: pass --kubeconfig, or use Application Default Credentials on the gcp target".to_string());
    }
    let empty = Observed::default();
    let kube = observed.as_ref().unwrap_or(&empty);
    if observed.is_some()
        && kube.kind("ClusterQueue").is_empty()
        && !kube.by_kind.contains_key("Workload")
    {
        notes.push("Kueue is not installed in the cluster yet".to_string());
    }

    let node_pools = cluster
        .map(crate::local::nodes::PoolInfo::from_cluster)
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let nodes = observed.as_ref().map(|o| {
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
                autoscaling: p
                    .autoscaling
                    .map(|(min, max)| (min * p.zones, max * p.zones)),
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
    let spec_uids: Vec<String> = live_jobs
        .iter()
        .flatten()
        .filter_map(|j| str_at(j, "/metadata/uid").map(str::to_string))
        .collect();
    let predicted = predictions(desired, kube, &spec_uids);

    let mut jobs = Vec::new();
    for (i, job) in job_objects(desired).into_iter().enumerate() {
        let live = live_jobs[i];
        let uid = live.and_then(|j| str_at(j, "/metadata/uid")).unwrap_or("");
        let workload =
            live.and_then(|_| kube.kind("Workload").iter().find(|w| owned_by_uid(w, uid)));
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

    Ok(LiveReport {
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
    })
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

/// `tpu-group -> on-demand; head, submitter -> default-cpu`.
fn podsets_text(placement: &Placement) -> String {
    let mut by_flavor: Vec<(String, Vec<String>)> = Vec::new();
    for p in &placement.podsets {
        let flavor = p.flavor.clone().unwrap_or_else(|| "(none)".into());
        match by_flavor.iter_mut().find(|(f, _)| *f == flavor) {
            Some((_, names)) => names.push(p.name.clone()),
            None => by_flavor.push((flavor, vec![p.name.clone()])),
        }
    }
    by_flavor
        .into_iter()
        .map(|(f, names)| format!("{} -> {f}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A job without a queue: Kueue makes no Workload for it, so there is nothing to wait for.
fn unmanaged(job: &JobStatus) -> bool {
    job.observed.is_none()
        && job
            .predicted
            .as_ref()
            .is_some_and(|p| p.state == PlacementState::Unmanaged)
}

fn state_text(job: &JobStatus) -> String {
    if unmanaged(job) && job.submitted {
        return "runs outside Kueue: no kueue.x-k8s.io/queue-name label".into();
    }
    let Some(observed) = &job.observed else {
        return if job.submitted {
            "submitted, no Workload yet".into()
        } else {
            "not submitted".into()
        };
    };
    match observed.state {
        PlacementState::Admitted => "admitted".into(),
        PlacementState::Finished => "finished".into(),
        PlacementState::WaitingForAdmissionChecks => format!(
            "quota reserved, waiting for {}",
            if observed.admission_checks.is_empty() {
                "admission checks".to_string()
            } else {
                observed.admission_checks.join(", ")
            }
        ),
        PlacementState::Pending if job.deactivated => "deactivated by Kueue".into(),
        PlacementState::Pending if job.evicted.is_some() => "evicted, queued again".into(),
        PlacementState::Pending => "pending".into(),
        PlacementState::Rejected => "rejected".into(),
        PlacementState::Unmanaged => "not managed by Kueue".into(),
    }
}

/// Per job: `rayjob-1 -> on-demand: admitted; Ray: Running`, and a second line for a
/// ProvisioningRequest or a disagreement with the prediction.
pub fn summary_lines(report: &LiveReport) -> Vec<String> {
    let mut lines = Vec::new();
    for job in &report.jobs {
        let mut line = if unmanaged(job) {
            format!("{}: {}", job.job, state_text(job))
        } else {
            let flavor = job
                .observed
                .as_ref()
                .and_then(headline_flavor)
                .unwrap_or_else(|| "no flavor yet".into());
            format!("{} -> {flavor}: {}", job.job, state_text(job))
        };
        if let Some(ray) = &job.ray
            && let Some(d) = &ray.deployment_status
        {
            let _ = write!(line, "; Ray: {d}");
        }
        lines.push(line);
        if let Some(pr) = &job.provisioning_request {
            let mut line = format!("    ProvisioningRequest {}: {}", pr.name, pr.state);
            if !pr.message.is_empty() {
                let _ = write!(line, ": {}", pr.message);
            }
            lines.push(line);
        }
        if job.agrees == Some(false) {
            lines.push(format!(
                "    differs from gkq's prediction: {}",
                job.differences.join("; ")
            ));
        }
    }
    lines
}

pub fn to_text(report: &LiveReport) -> String {
    let mut out = String::new();
    let c = &report.cluster_status;
    let _ = writeln!(
        out,
        "\nCluster {} ({}, {}): {}",
        c.name,
        c.project,
        c.location,
        c.status.as_deref().unwrap_or("does not exist")
    );
    if let Some(sim) = &report.simulated {
        let _ = writeln!(
            out,
            "Simulated: the local target{} ({})\n           this cluster's Kubernetes state: {}",
            sim.state_dir
                .as_deref()
                .map(|d| format!(" in {d}"))
                .unwrap_or_default(),
            sim.settings,
            sim.kubernetes_state
        );
    }
    if !report.node_pools.is_empty() {
        let _ = writeln!(out, "\nNode pools");
        let width = report
            .node_pools
            .iter()
            .map(|p| p.name.len())
            .max()
            .unwrap_or(4);
        for p in &report.node_pools {
            let nodes = p.nodes.map_or("?".to_string(), |n| {
                format!("{n} node{}", if n == 1 { "" } else { "s" })
            });
            let mut extra = match p.autoscaling {
                Some((min, max)) => format!("autoscaling {min}-{max}"),
                None => "fixed size".to_string(),
            };
            if p.flex_start {
                extra.push_str(", flex-start");
            }
            if p.queued_provisioning {
                extra.push_str(", queued provisioning");
            }
            let _ = writeln!(
                out,
                "  {:width$}  {:18}  {:>8}  {extra}",
                p.name, p.machine_type, nodes
            );
        }
    }
    if !report.jobs.is_empty() {
        let _ = writeln!(
            out,
            "\nJobs (observed from Kueue's Workloads; predicted by gkq)"
        );
        for job in &report.jobs {
            let flavor = job
                .observed
                .as_ref()
                .and_then(headline_flavor)
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(out, "  {} -> {flavor}: {}", job.job, state_text(job));
            if let Some(o) = &job.observed
                && o.podsets.iter().any(|p| p.flavor.is_some())
            {
                let _ = writeln!(out, "      podsets:    {}", podsets_text(o));
            }
            if let Some(evicted) = &job.evicted {
                let _ = writeln!(out, "      evicted:    {evicted}");
            } else if let Some(o) = &job.observed
                && o.state == PlacementState::Pending
                && let Some(reason) = &o.reason
            {
                let _ = writeln!(out, "      reason:     {reason}");
            }
            for check in &job.admission_checks {
                let _ = writeln!(
                    out,
                    "      check:      {} {}{}",
                    check.name,
                    check.state,
                    if check.message.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", check.message)
                    }
                );
            }
            if let Some(pr) = &job.provisioning_request {
                let _ = writeln!(
                    out,
                    "      provreq:    {} {}{}",
                    pr.name,
                    pr.state,
                    if pr.message.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", pr.message)
                    }
                );
            }
            if let Some(ray) = &job.ray
                && let Some(d) = &ray.deployment_status
            {
                let _ = writeln!(
                    out,
                    "      ray:        {d}{}{}",
                    ray.job_status
                        .as_deref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default(),
                    ray.message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                );
            }
            if let Some(p) = &job.predicted {
                let verdict = match job.agrees {
                    Some(true) => "agrees".to_string(),
                    Some(false) => format!("DIFFERS: {}", job.differences.join("; ")),
                    None => "nothing observed yet".to_string(),
                };
                let _ = writeln!(
                    out,
                    "      predicted:  {} ({}) — {verdict}",
                    podsets_text(p),
                    match p.state {
                        PlacementState::Admitted => "admitted".to_string(),
                        PlacementState::WaitingForAdmissionChecks =>
                            format!("waits for {}", p.admission_checks.join(", ")),
                        PlacementState::Pending =>
                            format!("pending: {}", p.reason.as_deref().unwrap_or("no reason")),
                        other => format!("{other:?}").to_lowercase(),
                    }
                );
            }
        }
    }
    for q in &report.cluster_queues {
        let _ = writeln!(
            out,
            "\nClusterQueue {}{}: {} reserving, {} admitted, {} pending",
            q.name,
            match q.active {
                Some(true) => " (active)",
                Some(false) => " (INACTIVE)",
                None => "",
            },
            q.reserving_workloads,
            q.admitted_workloads,
            q.pending_workloads
        );
        let fw = q
            .usage
            .iter()
            .map(|u| u.flavor.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let rw = q
            .usage
            .iter()
            .map(|u| u.resource.len())
            .max()
            .unwrap_or(8)
            .max(8);
        let _ = writeln!(
            out,
            "  {:fw$}  {:rw$}  {:>12}  {:>12}  {:>14}",
            "FLAVOR", "RESOURCE", "RESERVED", "ADMITTED", "QUOTA"
        );
        for u in &q.usage {
            let _ = writeln!(
                out,
                "  {:fw$}  {:rw$}  {:>12}  {:>12}  {:>14}",
                u.flavor,
                u.resource,
                u.reserved,
                u.admitted,
                u.nominal.as_deref().unwrap_or("-")
            );
        }
    }
    for note in &report.notes {
        let _ = writeln!(out, "\nNote: {note}");
    }
    out
}

/// Reads the live report for a connected session; `api` is the session's Kubernetes (used only
/// when the cluster exists and has an endpoint).
/// The live report from an observed cluster (`None`: it does not exist) and Kubernetes.
pub async fn report(
    session: &Session,
    desired: &DesiredState,
    cluster: Option<&Value>,
    api: Option<&dyn KubeApi>,
) -> anyhow::Result<LiveReport> {
    let has_endpoint = cluster
        .and_then(|c| c.get("endpoint"))
        .and_then(Value::as_str)
        .is_some_and(|e| !e.is_empty());
    let simulated = session.kube.local().map(|k| Simulated {
        state_dir: session.state_dir.as_ref().map(|d| d.display().to_string()),
        kubernetes_state: k.state_file().display().to_string(),
        settings: k.settings().describe(),
    });
    collect(desired, cluster, api.filter(|_| has_endpoint), simulated).await
}

/// [`report`] with the cluster read from GKE now.
async fn report_now(
    session: &Session,
    desired: &DesiredState,
    api: Option<&dyn KubeApi>,
) -> anyhow::Result<LiveReport> {
    let cluster = session
        .gke
        .get_cluster(&desired.gke.cluster_ref)
        .await
        .map_err(|e| anyhow::anyhow!("reading the cluster from GKE: {e}"))?;
    report(session, desired, cluster.as_ref(), api).await
}

/// After an apply that submitted jobs: reads where they landed (waiting a little on a real
/// cluster for Kueue to decide) and prints one line per job.
pub async fn print_after_apply(
    session: &Session,
    desired: &DesiredState,
    api: Option<&dyn KubeApi>,
) {
    if job_objects(desired).is_empty() {
        return;
    }
    let attempts = if session.kube.local().is_some() {
        1
    } else {
        10
    };
    let mut last = None;
    for attempt in 0..attempts {
        match report_now(session, desired, api).await {
            Ok(r) => {
                let decided = r.jobs.iter().all(|j| {
                    unmanaged(j)
                        || j.observed.as_ref().is_some_and(|o| {
                            o.state != PlacementState::Pending || o.reason.is_some()
                        })
                });
                last = Some(r);
                if decided {
                    break;
                }
            }
            Err(e) => {
                tracing::debug!("placement after apply: {e:#}");
                break;
            }
        }
        if attempt + 1 < attempts {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let Some(report) = last else {
        return;
    };
    if !report.kubernetes {
        return;
    }
    let mut text = String::new();
    match &report.simulated {
        Some(sim) => {
            let _ = writeln!(
                text,
                "\nWhere the jobs landed (simulated by the local target: {}):",
                sim.settings
            );
        }
        None => {
            let _ = writeln!(
                text,
                "\nWhere the jobs landed (read from Kueue's Workloads):"
            );
        }
    }
    for line in summary_lines(&report) {
        let _ = writeln!(text, "  {line}");
    }
    let _ = writeln!(text, "Follow them with `gkq status`.");
    let _ = print_stdout(&text);
}
