//! Each job's admission timeline, read from what Kueue, the job's controller (KubeRay, JobSet,
//! Kubernetes' Job controller) and the ProvisioningRequest controller write: queued -> quota
//! reserved on a flavor -> ProvisioningRequest state -> admitted -> running -> finished, and the
//! states that are stuck, with the likely fix.
//!
//! Pure: [`job_states`] takes the jobs (RayJobs, JobSets, batch Jobs), Kueue Workloads and
//! ProvisioningRequests as JSON (as the Kubernetes API returns them) and the time; `gkq watch`
//! reads them and prints what changed.
//!
//! Stuck states flagged (thresholds in the constants below):
//! - quota reserved, ProvisioningRequest not provisioned for long: DWS has no capacity yet;
//! - a ProvisioningRequest that failed or whose booking expired: Kueue retries with backoff;
//! - admitted but not running: Kueue's `waitForPodsReady` (on by default, 30 minutes) evicts and
//!   requeues the job when the timeout passes; flagged from two thirds of it;
//! - quota reserved or admitted for more nodes than the flavor's node pool may ever have (its
//!   autoscaling maximum): the autoscaler can never add them; flagged at once, with the numbers;
//! - admitted to a flavor whose node pool is at its maximum size, and not running after
//!   [`FULL_POOL_WARNING`]: other work probably holds the nodes. A pool that just reached its
//!   maximum is usually the autoscaler bringing exactly the nodes the job needs, so it is not
//!   flagged before then.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::model::gke_facts::machine_shape;
use crate::placement::job_workload::JobWorkloads;
pub use crate::placement::pools::flavor_pools;
use crate::placement::provisioning::{ProvisioningRequestState, RequestState, RequestsByOwner};
use crate::vocab::duration::human;
use crate::vocab::object::{condition, condition_true};
use crate::vocab::quantity::Quantity;

/// Kueue's default `waitForPodsReady.timeout` (v1beta2 Configuration).
pub const PODS_READY_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// From when an admitted job that is not running is flagged.
pub const PODS_READY_WARNING: Duration = Duration::from_secs(20 * 60);
/// From when a ProvisioningRequest that is not provisioned is flagged.
pub const PROVISIONING_WARNING: Duration = Duration::from_secs(15 * 60);
/// From when an admitted job that is not running, on a node pool at its maximum size, is flagged.
pub const FULL_POOL_WARNING: Duration = Duration::from_secs(10 * 60);

/// Where a job is in its admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Submitted; Kueue has not made a Workload for it (yet).
    Submitted,
    /// A Workload waits in its queue; `reason` is Kueue's message.
    Queued {
        queue: String,
        reason: String,
    },
    /// Quota is reserved, admission checks are not all ready.
    QuotaReserved {
        flavors: Vec<(String, String)>,
        checks: Vec<String>,
        provisioning: Option<ProvisioningRequestState>,
    },
    Admitted {
        flavors: Vec<(String, String)>,
    },
    Running,
    Finished {
        succeeded: bool,
        message: String,
    },
}

impl Stage {
    pub fn is_finished(&self) -> bool {
        matches!(self, Stage::Finished { .. })
    }
}

fn flavors_text(flavors: &[(String, String)]) -> String {
    flavors
        .iter()
        .map(|(podset, flavor)| format!("{podset}={flavor}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The flavor a job's accelerator (or largest) podset got: the first podset that is not the head
/// or the submitter, else the first.
fn main_flavor(flavors: &[(String, String)]) -> &str {
    flavors
        .iter()
        .find(|(podset, _)| podset != "head" && podset != "submitter")
        .or_else(|| flavors.first())
        .map(|(_, flavor)| flavor.as_str())
        .unwrap_or("?")
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stage::Submitted => f.write_str("submitted, no Kueue Workload yet"),
            Stage::Queued { queue, reason } if reason.is_empty() => {
                write!(f, "queued in {queue}")
            }
            Stage::Queued { queue, reason } => write!(f, "queued in {queue}: {reason}"),
            Stage::QuotaReserved {
                flavors,
                checks,
                provisioning,
            } => {
                write!(
                    f,
                    "quota reserved on flavor {} ({})",
                    main_flavor(flavors),
                    flavors_text(flavors)
                )?;
                if !checks.is_empty() {
                    write!(f, "; admission checks: {}", checks.join(", "))?;
                }
                match provisioning {
                    Some(p) if p.message.is_empty() => {
                        write!(f, "; ProvisioningRequest {}: {}", p.name, p.state)
                    }
                    Some(p) => write!(
                        f,
                        "; ProvisioningRequest {}: {} ({})",
                        p.name, p.state, p.message
                    ),
                    None => Ok(()),
                }
            }
            Stage::Admitted { flavors } => write!(
                f,
                "admitted on flavor {} ({}), waiting for its pods",
                main_flavor(flavors),
                flavors_text(flavors)
            ),
            Stage::Running => f.write_str("running"),
            Stage::Finished { succeeded, message } => {
                let outcome = if *succeeded { "succeeded" } else { "failed" };
                if message.is_empty() {
                    write!(f, "finished: {outcome}")
                } else {
                    write!(f, "finished: {outcome} ({message})")
                }
            }
        }
    }
}

/// One job's state and what, if anything, looks stuck.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    /// `namespace/name` of the RayJob.
    pub job: String,
    pub stage: Stage,
    /// When the current stage began, when the objects say.
    pub since: Option<Timestamp>,
    /// A stuck state and the likely fix.
    pub warning: Option<String>,
}

/// Node pools as far as stuck-state checks need them: current nodes and the autoscaling maximum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolSize {
    pub nodes: usize,
    /// The autoscaling maximum.
    pub max: Option<usize>,
    /// The machine type (`ct6e-standard-4t`), for how much one node holds.
    pub machine_type: Option<String>,
}

/// What the checks know about the cluster besides the jobs.
#[derive(Debug, Clone, Default)]
pub struct Capacity {
    /// ResourceFlavor name -> node pool (`cloud.google.com/gke-nodepool`).
    pub flavor_pools: BTreeMap<String, String>,
    /// Node pool -> size.
    pub pools: BTreeMap<String, PoolSize>,
}

fn since_of(object: &Value, kind: &str) -> Option<Timestamp> {
    condition(object, kind)?
        .get("lastTransitionTime")?
        .as_str()?
        .parse()
        .ok()
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}",
        str_at(object, "/metadata/namespace"),
        str_at(object, "/metadata/name")
    )
}

/// `(podset, flavor)` for each podset of an admission, in podset order.
fn podset_flavors(workload: &Value) -> Vec<(String, String)> {
    workload
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|assignment| {
            let name = assignment.get("name")?.as_str()?.to_string();
            // One resource group per podset: every resource has the same flavor. Take any.
            let flavor = assignment
                .get("flavors")?
                .as_object()?
                .values()
                .next()?
                .as_str()?
                .to_string();
            Some((name, flavor))
        })
        .collect()
}

/// Whether a job has finished by its own status: `Some(succeeded)`. A RayJob by KubeRay's
/// deployment or job status; a JobSet by its `Completed` or `Failed` condition; a batch Job by
/// `Complete` or `Failed`.
fn finished_by_its_status(job: &Value) -> Option<bool> {
    match str_at(job, "/kind") {
        "JobSet" | "Job" => {
            if condition_true(job, "Completed") || condition_true(job, "Complete") {
                Some(true)
            } else if condition_true(job, "Failed") {
                Some(false)
            } else {
                None
            }
        }
        _ => {
            let deployment = str_at(job, "/status/jobDeploymentStatus");
            let job_status = str_at(job, "/status/jobStatus");
            let finished = matches!(deployment, "Complete" | "Failed")
                || matches!(job_status, "SUCCEEDED" | "FAILED" | "STOPPED");
            finished.then_some(job_status == "SUCCEEDED" || deployment == "Complete")
        }
    }
}

/// Whether a job's pods run, by its own status: a RayJob `Running`; a JobSet with a ready
/// replicated job; a batch Job with ready pods.
fn runs_by_its_status(job: &Value) -> bool {
    let positive = |v: &Value| v.as_i64().is_some_and(|n| n > 0);
    match str_at(job, "/kind") {
        "JobSet" => job
            .pointer("/status/replicatedJobsStatus")
            .and_then(Value::as_array)
            .is_some_and(|rjs| rjs.iter().any(|rj| positive(&rj["ready"]))),
        "Job" => job.pointer("/status/ready").is_some_and(positive),
        _ => str_at(job, "/status/jobDeploymentStatus") == "Running",
    }
}

fn stage_of(
    job: &Value,
    workload: Option<&Value>,
    requests: &RequestsByOwner<'_>,
) -> (Stage, Option<Timestamp>) {
    let finished_by_job = finished_by_its_status(job);
    if finished_by_job.is_some() || workload.is_some_and(|w| condition_true(w, "Finished")) {
        // A RayJob's outcome is KubeRay's; a JobSet's or Job's, when its own status does not
        // say yet, Kueue's `Finished` reason.
        let succeeded = finished_by_job.unwrap_or_else(|| {
            str_at(job, "/kind") != "RayJob"
                && workload
                    .and_then(|w| condition(w, "Finished"))
                    .is_some_and(|c| c["reason"] == "Succeeded")
        });
        let message = workload
            .and_then(|w| condition(w, "Finished"))
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            .unwrap_or_else(|| str_at(job, "/status/message"))
            .to_string();
        let since = workload.and_then(|w| since_of(w, "Finished"));
        return (Stage::Finished { succeeded, message }, since);
    }
    if runs_by_its_status(job) && job.pointer("/spec/suspend") != Some(&Value::Bool(true)) {
        return (Stage::Running, None);
    }
    let Some(workload) = workload else {
        return (Stage::Submitted, None);
    };
    let flavors = podset_flavors(workload);
    if condition_true(workload, "Admitted") {
        return (Stage::Admitted { flavors }, since_of(workload, "Admitted"));
    }
    if condition_true(workload, "QuotaReserved") {
        let checks = workload
            .pointer("/status/admissionChecks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| format!("{} {}", str_at(c, "/name"), str_at(c, "/state")))
            .collect();
        return (
            Stage::QuotaReserved {
                flavors,
                checks,
                provisioning: requests.workload_request(workload),
            },
            since_of(workload, "QuotaReserved"),
        );
    }
    let reason = condition(workload, "QuotaReserved")
        .and_then(|c| c.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let since = str_at(workload, "/metadata/creationTimestamp").parse().ok();
    (
        Stage::Queued {
            queue: str_at(workload, "/spec/queueName").to_string(),
            reason,
        },
        since,
    )
}

/// What a Workload's admission uses on each flavor, by resource
/// ([`crate::placement::held::admission_usage`]).
fn flavor_usage(workload: &Value) -> BTreeMap<String, BTreeMap<String, Quantity>> {
    let mut usage: BTreeMap<String, BTreeMap<String, Quantity>> = BTreeMap::new();
    for held in crate::placement::held::admission_usage(workload) {
        usage
            .entry(held.flavor)
            .or_default()
            .insert(held.resource, held.amount);
    }
    usage
}

/// How many nodes of a pool a job needs at least, and the resource that decides it.
struct NodeDemand {
    nodes: u64,
    resource: String,
    amount: Quantity,
    per_node: u64,
}

/// The fewest nodes of `pool` (of `machine`) that can hold `usage`: for each resource, the
/// usage over one node's capacity, rounded up; the largest wins. A lower bound (it ignores how
/// pods pack, and a node's allocatable share is below its capacity), so a job needing more than
/// the pool's maximum surely cannot run there.
fn node_demand(usage: &BTreeMap<String, Quantity>, machine: &str) -> Option<NodeDemand> {
    let shape = machine_shape(machine)?;
    usage
        .iter()
        .filter_map(|(resource, amount)| {
            // Per node, in thousandths of the resource's unit, as Quantity::milli_value counts.
            let (per_node, milli_per_node) = match resource.as_str() {
                "cpu" => (u64::from(shape.vcpus), i128::from(shape.vcpus) * 1000),
                "memory" => (
                    u64::from(shape.memory_gib),
                    i128::from(shape.memory_gib) * (1 << 30) * 1000,
                ),
                other => {
                    let (_, chips) = shape.accelerator.filter(|(name, _)| *name == other)?;
                    (u64::from(chips), i128::from(chips) * 1000)
                }
            };
            if milli_per_node <= 0 {
                return None;
            }
            let needed = (amount.milli_value().max(0) + milli_per_node - 1) / milli_per_node;
            Some(NodeDemand {
                nodes: u64::try_from(needed).unwrap_or(u64::MAX),
                resource: resource.clone(),
                amount: *amount,
                per_node,
            })
        })
        .max_by_key(|d| d.nodes)
}

/// The first node pool the job's usage cannot fit in even at the pool's maximum size.
fn demand_above_max(
    usage: &BTreeMap<String, BTreeMap<String, Quantity>>,
    capacity: &Capacity,
) -> Option<String> {
    for (flavor, used) in usage {
        let Some(pool) = capacity.flavor_pools.get(flavor) else {
            continue;
        };
        let Some(size) = capacity.pools.get(pool) else {
            continue;
        };
        let (Some(max), Some(machine)) = (size.max, size.machine_type.as_deref()) else {
            continue;
        };
        let Some(demand) = node_demand(used, machine) else {
            continue;
        };
        if demand.nodes > max as u64 {
            let unit = if demand.resource == "memory" {
                " GiB"
            } else {
                ""
            };
            return Some(format!(
                "the job needs at least {} nodes of node pool {pool} ({} {} on flavor {flavor}, {}{unit} per {machine} node) but the pool's autoscaling maximum is {max}: the autoscaler can never add them, although flavor {flavor} has quota for the job. Raise nodePools[{pool}].autoscaling.max to {}, or lower flavor {flavor}'s quota to what the pool can hold.",
                demand.nodes, demand.amount, demand.resource, demand.per_node, demand.nodes
            ));
        }
    }
    None
}

fn warning_for(
    stage: &Stage,
    age: Option<Duration>,
    usage: &BTreeMap<String, BTreeMap<String, Quantity>>,
    capacity: &Capacity,
) -> Option<String> {
    if matches!(stage, Stage::QuotaReserved { .. } | Stage::Admitted { .. })
        && let Some(warning) = demand_above_max(usage, capacity)
    {
        return Some(warning);
    }
    match stage {
        Stage::QuotaReserved {
            provisioning: Some(p),
            ..
        } if p.state.is_failure() => Some(format!(
            "ProvisioningRequest {} is {}{}. Kueue releases the quota and retries with backoff (60s doubling to 30m) until the check's retry limit; if it keeps failing, check the node pool's queued-provisioning settings and the project's TPU quota for flex-start in this region.",
            p.name,
            p.state,
            if p.message.is_empty() {
                String::new()
            } else {
                format!(": {}", p.message)
            }
        )),
        Stage::QuotaReserved {
            provisioning: Some(p),
            flavors,
            ..
        } if p.state != RequestState::Provisioned
            && age.is_some_and(|a| a >= PROVISIONING_WARNING) =>
        {
            let waited = human(age.unwrap_or_default());
            Some(format!(
                "ProvisioningRequest {} has waited {waited} for capacity on flavor {} (flagged after {}). DWS keeps it queued until the whole slice can be provisioned at once, which is normal for a while; if it never comes, check the project's TPU quota for flex-start (preemptible) in this region, or move the pool to a zone with capacity.",
                p.name,
                main_flavor(flavors),
                crate::vocab::duration::format_ms(PROVISIONING_WARNING.as_secs() * 1000)
            ))
        }
        Stage::Admitted { flavors } => {
            let flavor = main_flavor(flavors);
            let age = age?;
            let full_pool = capacity
                .flavor_pools
                .get(flavor)
                .and_then(|pool| Some((pool, capacity.pools.get(pool)?)))
                .filter(|(_, size)| size.max.is_some_and(|max| size.nodes >= max));
            if let Some((pool, size)) = full_pool
                && age >= FULL_POOL_WARNING
            {
                return Some(format!(
                    "node pool {pool} is at its maximum size ({} nodes) and the job has made no progress for {} (flagged after {}): it is admitted but not running, so other work probably holds the nodes flavor {flavor} has quota for. Raise nodePools[{pool}].autoscaling.max, or lower flavor {flavor}'s quota to what the pool can hold.",
                    size.nodes,
                    human(age),
                    crate::vocab::duration::format_ms(FULL_POOL_WARNING.as_secs() * 1000)
                ));
            }
            if age < PODS_READY_WARNING {
                return None;
            }
            let left = PODS_READY_TIMEOUT.saturating_sub(age);
            Some(if left.is_zero() {
                format!(
                    "admitted {} ago and still not running: past Kueue's 30-minute pods-ready timeout, so Kueue evicts and requeues it. Its pods cannot start: check `kubectl get pods` in its namespace for scheduling errors, and the node pool of flavor {flavor} for a stockout.",
                    human(age)
                )
            } else {
                format!(
                    "admitted {} ago and not running yet: Kueue evicts and requeues it in {} (its 30-minute pods-ready timeout). Its pods are probably waiting for nodes: check `kubectl get pods` in its namespace, and the node pool of flavor {flavor} for a stockout.",
                    human(age),
                    human(left)
                )
            })
        }
        _ => None,
    }
}

/// Each job's stage, with warnings for stuck states.
pub fn job_states(
    jobs: &[Value],
    workloads: &[Value],
    provisioning_requests: &[Value],
    capacity: &Capacity,
    now: Timestamp,
) -> Vec<JobState> {
    let job_workloads = JobWorkloads::new(workloads);
    let requests = RequestsByOwner::new(provisioning_requests);
    let mut states: Vec<JobState> = jobs
        .iter()
        .map(|job| {
            let workload = job_workloads.of(job).map(|w| w.workload);
            let (stage, since) = stage_of(job, workload, &requests);
            let age = since.map(|s| {
                Duration::from_millis(
                    u64::try_from(now.as_millisecond().saturating_sub(s.as_millisecond()))
                        .unwrap_or(0),
                )
            });
            let usage = workload.map(flavor_usage).unwrap_or_default();
            let warning = warning_for(&stage, age, &usage, capacity);
            JobState {
                job: key(job),
                stage,
                since,
                warning,
            }
        })
        .collect();
    states.sort_by(|a, b| a.job.cmp(&b.job));
    states
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn rayjob(name: &str, status: Value) -> Value {
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"namespace": "ml", "name": name}, "spec": {"suspend": true}, "status": status})
    }

    fn workload(job: &str, conditions: Value, flavor: &str) -> Value {
        json!({
            "metadata": {"namespace": "ml", "name": format!("rayjob-{job}-abc12"),
                "creationTimestamp": "2026-11-30T11:00:00Z",
                "ownerReferences": [{"kind": "RayJob", "name": job}]},
            "spec": {"queueName": "user-queue"},
            "status": {
                "conditions": conditions,
                "admission": {"clusterQueue": "cq", "podSetAssignments": [
                    {"name": "head", "flavors": {"cpu": "default-cpu", "memory": "default-cpu"}},
                    {"name": "tpu-group", "flavors": {"cpu": flavor, "google.com/tpu": flavor}},
                    {"name": "submitter", "flavors": {"cpu": "default-cpu"}}]},
                "admissionChecks": [{"name": "dws-prov", "state": "Pending"}]
            }
        })
    }

    fn cond(kind: &str, status: &str, at: &str, message: &str) -> Value {
        json!({"type": kind, "status": status, "lastTransitionTime": at, "message": message})
    }

    fn one(
        job: Value,
        workloads: Vec<Value>,
        requests: Vec<Value>,
        capacity: &Capacity,
    ) -> JobState {
        job_states(&[job], &workloads, &requests, capacity, now()).remove(0)
    }

    #[test]
    fn stages_follow_kueue_and_kuberay() {
        let job = rayjob("train-1", json!({}));
        let none = Capacity::default();
        assert_eq!(
            one(job.clone(), vec![], vec![], &none).stage.to_string(),
            "submitted, no Kueue Workload yet"
        );

        let queued = workload(
            "train-1",
            json!([cond(
                "QuotaReserved",
                "False",
                "2026-11-30T11:00:00Z",
                "couldn't assign flavors to pod set tpu-group: insufficient unused quota for google.com/tpu in flavor on-demand, 16 more needed"
            )]),
            "on-demand",
        );
        assert_eq!(
            one(job.clone(), vec![queued], vec![], &none)
                .stage
                .to_string(),
            "queued in user-queue: couldn't assign flavors to pod set tpu-group: insufficient unused quota for google.com/tpu in flavor on-demand, 16 more needed"
        );

        let reserved = workload(
            "train-1",
            json!([cond("QuotaReserved", "True", "2026-11-30T11:58:00Z", "")]),
            "dws",
        );
        let request = json!({"metadata": {"namespace": "ml", "name": "rayjob-train-1-abc12-dws-prov-1",
            "creationTimestamp": "2026-11-30T11:58:01Z",
            "ownerReferences": [{"kind": "Workload", "name": "rayjob-train-1-abc12"}]},
            "status": {"conditions": [cond("Accepted", "True", "2026-11-30T11:58:02Z", ""),
                cond("Provisioned", "False", "2026-11-30T11:58:02Z", "waiting for capacity")]}});
        let state = one(job.clone(), vec![reserved.clone()], vec![request], &none);
        assert_eq!(
            state.stage.to_string(),
            "quota reserved on flavor dws (head=default-cpu, tpu-group=dws, submitter=default-cpu); admission checks: dws-prov Pending; ProvisioningRequest rayjob-train-1-abc12-dws-prov-1: Accepted (waiting for capacity)"
        );
        assert_eq!(state.warning, None, "two minutes is not stuck");

        let admitted = workload(
            "train-1",
            json!([
                cond("QuotaReserved", "True", "2026-11-30T11:50:00Z", ""),
                cond("Admitted", "True", "2026-11-30T11:55:00Z", "")
            ]),
            "on-demand",
        );
        assert_eq!(
            one(job.clone(), vec![admitted.clone()], vec![], &none)
                .stage
                .to_string(),
            "admitted on flavor on-demand (head=default-cpu, tpu-group=on-demand, submitter=default-cpu), waiting for its pods"
        );
        let mut running = rayjob(
            "train-1",
            json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}),
        );
        running["spec"]["suspend"] = json!(false);
        assert_eq!(
            one(running, vec![admitted.clone()], vec![], &none).stage,
            Stage::Running
        );
        let done = rayjob(
            "train-1",
            json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}),
        );
        assert_eq!(
            one(done, vec![admitted], vec![], &none).stage.to_string(),
            "finished: succeeded"
        );
    }

    #[test]
    fn job_sets_and_batch_jobs_follow_their_own_status() {
        let none = Capacity::default();
        for kind in ["JobSet", "Job"] {
            let job = |status: Value, suspend: bool| {
                json!({"kind": kind, "metadata": {"namespace": "ml", "name": "train"},
                    "spec": {"suspend": suspend}, "status": status})
            };
            let mut admitted = workload(
                "train",
                json!([
                    cond("QuotaReserved", "True", "2026-11-30T11:50:00Z", ""),
                    cond("Admitted", "True", "2026-11-30T11:55:00Z", "")
                ]),
                "on-demand",
            );
            admitted["metadata"]["ownerReferences"][0]["kind"] = json!(kind);
            // A Workload owned by a job of another kind and the same name is not this job's.
            let mut other = admitted.clone();
            other["metadata"]["ownerReferences"][0]["kind"] = json!("RayJob");
            assert_eq!(
                one(job(json!({}), true), vec![other], vec![], &none).stage,
                Stage::Submitted,
                "{kind}"
            );
            let starting = one(job(json!({}), false), vec![admitted.clone()], vec![], &none);
            assert!(
                starting
                    .stage
                    .to_string()
                    .starts_with("admitted on flavor on-demand"),
                "{kind}: {}",
                starting.stage
            );
            let ready = match kind {
                "JobSet" => json!({"replicatedJobsStatus": [{"name": "slice", "ready": 1}]}),
                _ => json!({"ready": 4}),
            };
            assert_eq!(
                one(job(ready, false), vec![admitted.clone()], vec![], &none).stage,
                Stage::Running,
                "{kind}"
            );
            let complete = if kind == "JobSet" {
                "Completed"
            } else {
                "Complete"
            };
            let done = job(
                json!({"conditions": [cond(complete, "True", "2026-11-30T11:59:00Z", "")]}),
                false,
            );
            assert_eq!(
                one(done, vec![admitted.clone()], vec![], &none)
                    .stage
                    .to_string(),
                "finished: succeeded",
                "{kind}"
            );
            let failed = job(
                json!({"conditions": [cond("Failed", "True", "2026-11-30T11:59:00Z", "")]}),
                false,
            );
            assert!(
                one(failed, vec![admitted], vec![], &none)
                    .stage
                    .to_string()
                    .starts_with("finished: failed"),
                "{kind}"
            );
        }
    }

    #[test]
    fn stuck_states_are_flagged_with_the_likely_fix() {
        let job = rayjob("train-2", json!({}));
        let none = Capacity::default();
        // Waiting for DWS capacity for 40 minutes.
        let reserved = workload(
            "train-2",
            json!([cond("QuotaReserved", "True", "2026-11-30T11:20:00Z", "")]),
            "dws",
        );
        let request = json!({"metadata": {"namespace": "ml", "name": "rayjob-train-2-abc12-dws-prov-1",
            "creationTimestamp": "2026-11-30T11:20:01Z",
            "ownerReferences": [{"kind": "Workload", "name": "rayjob-train-2-abc12"}]}, "status": {}});
        let state = one(job.clone(), vec![reserved], vec![request.clone()], &none);
        let warning = state.warning.unwrap();
        assert!(warning.starts_with("ProvisioningRequest rayjob-train-2-abc12-dws-prov-1 has waited 40m00s for capacity on flavor dws (flagged after 15m)."), "{warning}");

        // A failed request.
        let reserved = workload(
            "train-2",
            json!([cond("QuotaReserved", "True", "2026-11-30T11:59:00Z", "")]),
            "dws",
        );
        let mut failed = request;
        failed["status"] = json!({"conditions": [cond("Failed", "True", "2026-11-30T11:59:30Z", "no capacity in us-east5-b")]});
        let warning = one(job.clone(), vec![reserved], vec![failed], &none)
            .warning
            .unwrap();
        assert!(
            warning.contains("is Failed: no capacity in us-east5-b"),
            "{warning}"
        );

        // Admitted 25 minutes ago: the pods-ready timeout is 5 minutes away.
        let admitted = workload(
            "train-2",
            json!([cond("Admitted", "True", "2026-11-30T11:35:00Z", "")]),
            "on-demand",
        );
        let warning = one(job.clone(), vec![admitted.clone()], vec![], &none)
            .warning
            .unwrap();
        assert!(
            warning.contains(
                "admitted 25m00s ago and not running yet: Kueue evicts and requeues it in 5m00s"
            ),
            "{warning}"
        );

        // The same job, admitted a minute ago: not stuck, even on a full pool (see the tests
        // below for when a full pool is flagged).
        let recent = workload(
            "train-2",
            json!([cond("Admitted", "True", "2026-11-30T11:59:00Z", "")]),
            "on-demand",
        );
        assert_eq!(
            one(job.clone(), vec![recent.clone()], vec![], &none).warning,
            None
        );
        assert_eq!(
            one(job, vec![recent], vec![], &on_demand_pool(4, 4)).warning,
            None
        );
    }

    /// An admitted job on the seed's on-demand flavor: 4 TPU workers of 4 chips each.
    fn admitted_on_demand(job: &str, at: &str, chips: u32) -> Value {
        let mut w = workload(job, json!([cond("Admitted", "True", at, "")]), "on-demand");
        w["status"]["admission"]["podSetAssignments"][1]["resourceUsage"] =
            json!({"cpu": "32", "memory": "64Gi", "google.com/tpu": chips.to_string()});
        w["status"]["admission"]["podSetAssignments"][1]["count"] = json!(chips / 4);
        w
    }

    fn on_demand_pool(nodes: usize, max: usize) -> Capacity {
        Capacity {
            flavor_pools: [("on-demand".to_string(), "on-demand-pool".to_string())].into(),
            pools: [(
                "on-demand-pool".to_string(),
                PoolSize {
                    nodes,
                    max: Some(max),
                    machine_type: Some("ct6e-standard-4t".into()),
                },
            )]
            .into(),
        }
    }

    /// The autoscaler has just brought the pool to exactly the 4 nodes the job needs: that is
    /// the job about to run, not a stuck one.
    #[test]
    fn a_pool_scaled_to_exactly_what_the_job_needs_is_not_stuck() {
        let job = rayjob("train-2", json!({}));
        let recent = admitted_on_demand("train-2", "2026-11-30T11:59:40Z", 16);
        let state = one(job, vec![recent], vec![], &on_demand_pool(4, 4));
        assert_eq!(state.warning, None);
    }

    /// A full pool is flagged once the job made no progress for the threshold, which the
    /// message names.
    #[test]
    fn a_full_pool_is_flagged_after_no_progress_for_the_threshold() {
        let job = rayjob("train-2", json!({}));
        let nine = admitted_on_demand("train-2", "2026-11-30T11:51:00Z", 16);
        assert_eq!(
            one(job.clone(), vec![nine], vec![], &on_demand_pool(4, 4)).warning,
            None
        );
        let eleven = admitted_on_demand("train-2", "2026-11-30T11:49:00Z", 16);
        let warning = one(job, vec![eleven], vec![], &on_demand_pool(4, 4))
            .warning
            .unwrap();
        assert!(
            warning.starts_with("node pool on-demand-pool is at its maximum size (4 nodes) and the job has made no progress for 11m00s (flagged after 10m)"),
            "{warning}"
        );
    }

    /// A job that needs more nodes than its pool may ever have is flagged at once, with the
    /// numbers, whether it is admitted or waits for a ProvisioningRequest.
    #[test]
    fn demand_above_the_pools_maximum_is_flagged_at_once() {
        let job = rayjob("train-2", json!({}));
        let now_admitted = admitted_on_demand("train-2", "2026-11-30T11:59:50Z", 20);
        let warning = one(
            job.clone(),
            vec![now_admitted],
            vec![],
            &on_demand_pool(0, 4),
        )
        .warning
        .unwrap();
        assert!(
            warning.starts_with("the job needs at least 5 nodes of node pool on-demand-pool (20 google.com/tpu on flavor on-demand, 4 per ct6e-standard-4t node) but the pool's autoscaling maximum is 4"),
            "{warning}"
        );
        assert!(
            warning.contains("Raise nodePools[on-demand-pool].autoscaling.max to 5"),
            "{warning}"
        );

        let mut reserved = admitted_on_demand("train-2", "2026-11-30T11:59:50Z", 20);
        reserved["status"]["conditions"] =
            json!([cond("QuotaReserved", "True", "2026-11-30T11:59:50Z", "")]);
        let warning = one(job, vec![reserved], vec![], &on_demand_pool(0, 4))
            .warning
            .unwrap();
        assert!(warning.contains("needs at least 5 nodes"), "{warning}");
    }

    #[test]
    fn flavors_map_to_their_node_pools() {
        let flavors = [
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "dws"},
            "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "dws-pool"}}}),
        ];
        assert_eq!(flavor_pools(&flavors)["dws"], "dws-pool");
    }

    /// An earlier run's finished Workload beside the current run's, and a Workload owned through
    /// the job's RayCluster: the job's stage is read from the Workload the one rule names
    /// (`placement::job_workload`), as status and explain name it.
    #[test]
    fn a_jobs_stage_is_read_from_the_workload_the_one_rule_names() {
        use crate::placement::job_workload::scenario;
        for (job, workloads, expected) in scenario::cases() {
            let chosen = workloads
                .iter()
                .find(|w| crate::vocab::object::name_of(w) == expected)
                .unwrap();
            let flavors = podset_flavors(chosen);
            let state = one(job, workloads.clone(), vec![], &Capacity::default());
            assert_eq!(state.stage, Stage::Admitted { flavors }, "{expected}");
        }
    }
}
