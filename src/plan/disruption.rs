//! Which running work a plan would stop. Before a plan deletes or replaces a node pool, a
//! ResourceFlavor, a ClusterQueue, a LocalQueue or a job itself, or stops a queue
//! (`stopPolicy: Hold` or `HoldAndDrain`), the jobs whose Kueue Workloads hold quota there (or
//! that run outside Kueue) are listed; `apply` refuses such a plan unless the user allows the
//! disruption. For a queue, each job says what Kueue does to it: an admitted job keeps running
//! when its queue is deleted (and cannot be re-admitted) and is evicted by `HoldAndDrain`; a job
//! holding quota while its admission checks are pending loses the reservation.
//!
//! A job is a run: a changed RayJob, Job or JobSet is submitted again as a new run, which stops
//! the old one. Replacing a job that has finished stops nothing; replacing one that holds quota,
//! is admitted or is running does. An update that forces fields Kueue wrote into a job it
//! admitted (`plan::conflicts`, planned only with `--force-conflicts`) is listed too.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Action, ActionKind, Plan};
use crate::addr::{ResourceAddr, ResourceKind};
use crate::placement::active::{QueueState, release};
use crate::placement::held::holds_quota;
use crate::vocab::object::{Field, condition_true, owners};

/// One resource change that stops running work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// The resource being deleted or replaced.
    pub addr: ResourceAddr,
    /// The jobs it would stop, as `Kind namespace/name`, with their state.
    pub jobs: Vec<String>,
}

/// Whether a live job object is running by its own status, for jobs Kueue does not manage (no
/// Workload): started and neither finished nor suspended.
fn runs_by_its_status(job: &Value) -> bool {
    if job.pointer("/spec/suspend") == Some(&Value::Bool(true)) {
        return false;
    }
    let status = |p: &str| job.pointer(p).and_then(Value::as_str).unwrap_or("");
    match job.field("kind").and_then(Value::as_str) {
        // KubeRay's JobDeploymentStatus: Initializing, Running, Retrying, Waiting and Suspending
        // have a Ray cluster up (or coming up) for this job.
        Some("RayJob") => matches!(
            status("/status/jobDeploymentStatus"),
            "Initializing" | "Running" | "Retrying" | "Waiting" | "Suspending"
        ),
        Some("RayCluster") => !status("/status/state").is_empty(),
        Some("Job") => {
            !(condition_true(job, "Complete") || condition_true(job, "Failed"))
                && (job.pointer("/status/active").and_then(Value::as_u64) > Some(0)
                    || job.pointer("/status/startTime").is_some())
        }
        Some("JobSet") => {
            !(condition_true(job, "Completed") || condition_true(job, "Failed"))
                && job.pointer("/status/replicatedJobsStatus").is_some()
        }
        _ => false,
    }
}

/// Whether Workload `w` is the one Kueue made for the job at `addr`.
fn belongs_to(w: &Value, addr: &ResourceAddr) -> bool {
    w.pointer("/metadata/namespace").and_then(Value::as_str) == addr.namespace.as_deref()
        && owners(w).any(|o| {
            o["name"].as_str() == Some(addr.name.as_str())
                && o["kind"]
                    .as_str()
                    .is_some_and(|k| k.eq_ignore_ascii_case(&kind_of(addr)))
        })
}

fn kind_of(addr: &ResourceAddr) -> String {
    match &addr.kind {
        ResourceKind::RayJob => "RayJob".into(),
        ResourceKind::RayCluster => "RayCluster".into(),
        ResourceKind::Other(kind) => kind.clone(),
        other => other.prefix().into_owned(),
    }
}

/// `Kind namespace/name` of the job a Workload stands for (the Workload itself without an owner).
fn owner_of(w: &Value) -> String {
    let ns = w
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    owners(w)
        .next()
        .map(|o| {
            format!(
                "{} {ns}/{}",
                o["kind"].as_str().unwrap_or("Workload"),
                o["name"].as_str().unwrap_or("")
            )
        })
        .unwrap_or_else(|| {
            format!(
                "Workload {ns}/{}",
                w.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        })
}

fn state_of(w: &Value) -> &'static str {
    if condition_true(w, "Admitted") {
        "admitted"
    } else {
        "quota reserved"
    }
}

fn job_of(w: &Value) -> String {
    format!("{} ({})", owner_of(w), state_of(w))
}

/// The jobs whose admitted Workloads hold quota in ClusterQueue `cluster_queue`, sorted: what
/// Kueue's finalizer waits for before a deleted ClusterQueue goes. Kueue takes back the quota of
/// the Workloads that are only reserved at once (docs/kueue.md 1g).
pub fn admitted_in(cluster_queue: &str, workloads: &[Value]) -> Vec<String> {
    let mut jobs: Vec<String> = workloads
        .iter()
        .filter(|w| holds_quota(w) && condition_true(w, "Admitted"))
        .filter(|w| {
            w.pointer("/status/admission/clusterQueue")
                .and_then(Value::as_str)
                == Some(cluster_queue)
        })
        .map(owner_of)
        .collect();
    jobs.sort();
    jobs.dedup();
    jobs
}

/// The `stopPolicy` an update gives a ClusterQueue or LocalQueue (`None` when it sets none).
fn stop_policy_set(action: &Action) -> Option<&str> {
    if !matches!(
        action.addr.kind,
        ResourceKind::ClusterQueue | ResourceKind::LocalQueue
    ) {
        return None;
    }
    action
        .desired
        .as_deref()?
        .pointer("/spec/stopPolicy")?
        .as_str()
}

/// Whether `action` may stop or hold running work: a delete or a replace, an update that
/// stops a ClusterQueue or LocalQueue (`stopPolicy: Hold` or `HoldAndDrain`), or an update
/// that forces fields Kueue wrote into an admitted job ([`forces_admission`]).
pub fn may_disrupt(action: &Action) -> bool {
    stops_or_holds(action) || forces_admission(action)
}

/// A delete, a replace, or an update that stops a queue.
fn stops_or_holds(action: &Action) -> bool {
    match action.kind {
        ActionKind::Delete | ActionKind::Replace => true,
        ActionKind::Update => stop_policy_set(action).is_some_and(|p| p != "None"),
        _ => false,
    }
}

/// What a queue's delete, replace or stop does to Workload `w` holding quota, in Kueue's terms
/// ([`release`], docs/kueue.md 1g): `None` when it does nothing to it.
fn queue_effect(action: &Action, w: &Value) -> Option<String> {
    let addr = &action.addr;
    let text = |p: &str| w.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (namespace, queue, cluster_queue) = (
        text("/metadata/namespace"),
        text("/spec/queueName"),
        text("/status/admission/clusterQueue"),
    );
    let is_cluster_queue = addr.kind == ResourceKind::ClusterQueue;
    let its_queue = if is_cluster_queue {
        cluster_queue == addr.name
    } else {
        Some(namespace) == addr.namespace.as_deref() && queue == addr.name
    };
    if !its_queue {
        return None;
    }
    let removed = matches!(action.kind, ActionKind::Delete | ActionKind::Replace);
    let changed = QueueState {
        name: &addr.name,
        stop_policy: if removed {
            None
        } else {
            Some(stop_policy_set(action).unwrap_or("None"))
        },
    };
    let (local_queue, cluster_queue) = if is_cluster_queue {
        let local = QueueState {
            name: queue,
            stop_policy: Some("None"),
        };
        (local, changed)
    } else {
        let cluster = QueueState {
            name: cluster_queue,
            stop_policy: Some("None"),
        };
        (changed, cluster)
    };
    let effect = match release(condition_true(w, "Admitted"), local_queue, cluster_queue) {
        Some(release) => release.text(),
        None if action.kind == ActionKind::Delete && is_cluster_queue => {
            "keeps running, cannot be re-admitted; Kueue holds the ClusterQueue's deletion until it finishes".to_string()
        }
        None if action.kind == ActionKind::Delete => {
            "keeps running, cannot be re-admitted".to_string()
        }
        None => return None,
    };
    Some(format!("{} ({}: {effect})", owner_of(w), state_of(w)))
}

fn flavors_of(w: &Value) -> BTreeSet<String> {
    w.pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|ps| ps.field("flavors").and_then(Value::as_object))
        .flat_map(|f| f.values().filter_map(Value::as_str).map(str::to_string))
        .collect()
}

/// The disruptions of `plan`, given the live Kueue Workloads, the live object at an address
/// (for jobs that run outside Kueue) and the ResourceFlavors known (desired and live).
pub fn find<'a>(
    plan: &Plan,
    workloads: &[Value],
    live: &dyn Fn(&ResourceAddr) -> Option<&'a Value>,
    flavors: impl Iterator<Item = &'a Value>,
) -> Vec<Disruption> {
    let pools = crate::placement::pools::flavor_pools(flavors);
    // A Workload that holds quota is the work a change would stop.
    let active: Vec<&Value> = workloads.iter().filter(|w| holds_quota(w)).collect();
    let mut out = Vec::new();
    for action in plan.actions.iter().filter(|a| stops_or_holds(a)) {
        let addr = &action.addr;
        if matches!(
            addr.kind,
            ResourceKind::ClusterQueue | ResourceKind::LocalQueue
        ) {
            let mut jobs: Vec<String> = active
                .iter()
                .filter_map(|w| queue_effect(action, w))
                .collect();
            jobs.sort();
            jobs.dedup();
            if !jobs.is_empty() {
                out.push(Disruption {
                    addr: addr.clone(),
                    jobs,
                });
            }
            continue;
        }
        let hit = |w: &Value| -> bool {
            match &addr.kind {
                ResourceKind::GkeNodePool => flavors_of(w)
                    .iter()
                    .any(|f| pools.get(f).is_some_and(|p| *p == addr.name)),
                ResourceKind::GkeCluster => true,
                ResourceKind::ResourceFlavor => flavors_of(w).contains(&addr.name),
                _ if addr.kind.is_run() => belongs_to(w, addr),
                _ => false,
            }
        };
        let mut jobs: Vec<String> = active
            .iter()
            .filter(|w| hit(w))
            .map(|w| job_of(w))
            .collect();
        if jobs.is_empty()
            && addr.kind.is_run()
            && !workloads.iter().any(|w| belongs_to(w, addr))
            && live(addr).is_some_and(runs_by_its_status)
        {
            jobs.push(format!(
                "{} {}/{} (running, outside Kueue)",
                live(addr)
                    .and_then(|j| j.field("kind"))
                    .and_then(Value::as_str)
                    .unwrap_or("job"),
                addr.namespace.as_deref().unwrap_or(""),
                addr.name
            ));
        }
        jobs.sort();
        jobs.dedup();
        if !jobs.is_empty() {
            out.push(Disruption {
                addr: addr.clone(),
                jobs,
            });
        }
    }
    // An update that forces fields Kueue wrote into a job it admitted takes the job's
    // admission away (docs/kueue.md, "What admission writes into a job").
    for action in plan
        .changes()
        .filter(|a| a.kind == ActionKind::Update && forces_admission(a))
    {
        let mut jobs: Vec<String> = active
            .iter()
            .filter(|w| belongs_to(w, &action.addr))
            .map(|w| {
                format!(
                    "{}: forcing takes out of its pod templates what Kueue wrote when it admitted the job, so pods made from them from then on are no longer held to the admitted flavor's nodes",
                    job_of(w)
                )
            })
            .collect();
        jobs.sort();
        jobs.dedup();
        if !jobs.is_empty() {
            out.push(Disruption {
                addr: action.addr.clone(),
                jobs,
            });
        }
    }
    out
}

/// Whether `action` takes by force a field Kueue wrote into the job when it admitted it.
pub fn forces_admission(action: &super::Action) -> bool {
    action
        .conflicts
        .iter()
        .any(|c| c.admission && c.resolution == super::conflicts::Resolution::Force)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(
        ns: &str,
        job: &str,
        cq: &str,
        queue: &str,
        flavor: &str,
        admitted: bool,
        finished: bool,
    ) -> Value {
        json!({
            "metadata": {"namespace": ns, "name": format!("rayjob-{job}"),
                "ownerReferences": [{"kind": "RayJob", "name": job}]},
            "spec": {"queueName": queue},
            "status": {
                "admission": {"clusterQueue": cq, "podSetAssignments": [
                    {"name": "head", "flavors": {"cpu": "default-cpu"}},
                    {"name": "workers", "flavors": {"cpu": flavor, "google.com/tpu": flavor}}]},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True"},
                    {"type": "Admitted", "status": if admitted {"True"} else {"False"}},
                    {"type": "Finished", "status": if finished {"True"} else {"False"}}]
            }
        })
    }

    fn plan_with(kind: ActionKind, addr: &str) -> Plan {
        let addr = serde_json::from_value(json!(addr)).unwrap();
        crate::plan::plan_for_tests([(addr, kind)])
    }

    fn find_in<'a>(
        plan: &Plan,
        workloads: &[Value],
        flavors: impl Iterator<Item = &'a Value>,
    ) -> Vec<Disruption> {
        find(plan, workloads, &|_| None, flavors)
    }

    fn flavors() -> Vec<Value> {
        vec![
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "on-demand"}, "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "on-demand-pool"}}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "dws"}, "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "dws-pool"}}}),
        ]
    }

    #[test]
    fn deleting_a_cluster_queue_names_its_admitted_and_reserved_jobs() {
        let w = vec![
            workload(
                "default",
                "job-1",
                "cq",
                "user-queue",
                "on-demand",
                true,
                false,
            ),
            workload("default", "job-2", "cq", "user-queue", "dws", false, false),
            workload(
                "default",
                "job-0",
                "cq",
                "user-queue",
                "on-demand",
                true,
                true,
            ),
            workload("default", "other", "cq2", "q2", "on-demand", true, false),
        ];
        let d = find_in(
            &plan_with(ActionKind::Delete, "kueue.clusterqueue/cq"),
            &w,
            flavors().iter(),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].jobs,
            [
                "RayJob default/job-1 (admitted: keeps running, cannot be re-admitted; Kueue holds the ClusterQueue's deletion until it finishes)",
                "RayJob default/job-2 (quota reserved: loses its quota reservation: ClusterQueue cq is terminating or missing)"
            ]
        );
    }

    fn stop(plan: &mut Plan, policy: &str) {
        let addr = plan.actions[0].addr.clone();
        let spec = match addr.namespace {
            Some(_) => json!({"clusterQueue": "cq", "stopPolicy": policy}),
            None => json!({"stopPolicy": policy}),
        };
        plan.actions[0].desired = Some(std::sync::Arc::new(json!({"spec": spec})));
    }

    /// Kueue v0.19.2: `Hold` leaves admitted work running and takes back quota reserved for
    /// work still waiting for its admission checks; `HoldAndDrain` evicts admitted work too.
    #[test]
    fn stopping_a_queue_evicts_with_hold_and_drain_and_unreserves_with_hold() {
        let w = vec![
            workload("ml", "job-1", "cq", "team", "on-demand", true, false),
            workload("ml", "job-2", "cq", "team", "dws", false, false),
            workload("ml", "job-3", "cq2", "other", "dws", true, false),
        ];
        for (addr, queue) in [
            ("kueue.clusterqueue/cq", "ClusterQueue cq"),
            ("kueue.localqueue/ml/team", "LocalQueue team"),
        ] {
            let mut hold = plan_with(ActionKind::Update, addr);
            stop(&mut hold, "Hold");
            assert!(may_disrupt(&hold.actions[0]));
            let d = find_in(&hold, &w, flavors().iter());
            assert_eq!(
                d[0].jobs,
                [format!(
                    "RayJob ml/job-2 (quota reserved: loses its quota reservation: {queue} is stopped)"
                )],
                "{addr}"
            );
            let mut drain = plan_with(ActionKind::Update, addr);
            stop(&mut drain, "HoldAndDrain");
            let d = find_in(&drain, &w, flavors().iter());
            let kind = queue.split(' ').next().unwrap();
            assert_eq!(
                d[0].jobs,
                [
                    format!(
                        "RayJob ml/job-1 (admitted: would be evicted: its {kind}'s stopPolicy is HoldAndDrain)"
                    ),
                    format!(
                        "RayJob ml/job-2 (quota reserved: loses its quota reservation: {queue} is stopped)"
                    ),
                ],
                "{addr}"
            );
            let mut run = plan_with(ActionKind::Update, addr);
            stop(&mut run, "None");
            assert!(!may_disrupt(&run.actions[0]));
            assert!(find_in(&run, &w, flavors().iter()).is_empty());
        }
    }

    /// What Kueue's finalizer waits for: the admitted jobs of the queue, not the ones whose
    /// reservation it takes back, nor finished ones or other queues'.
    #[test]
    fn a_deleted_cluster_queue_waits_for_its_admitted_jobs() {
        let w = vec![
            workload("ml", "b", "cq", "team", "on-demand", true, false),
            workload("ml", "a", "cq", "team", "on-demand", true, false),
            workload("ml", "waiting", "cq", "team", "dws", false, false),
            workload("ml", "done", "cq", "team", "on-demand", true, true),
            workload("ml", "elsewhere", "cq2", "other", "on-demand", true, false),
        ];
        assert_eq!(admitted_in("cq", &w), ["RayJob ml/a", "RayJob ml/b"]);
        assert!(admitted_in("cq3", &w).is_empty());
    }

    #[test]
    fn replacing_a_node_pool_names_the_jobs_on_its_flavor() {
        let w = vec![
            workload(
                "default",
                "job-1",
                "cq",
                "user-queue",
                "on-demand",
                true,
                false,
            ),
            workload("default", "job-2", "cq", "user-queue", "dws", false, false),
        ];
        let d = find_in(
            &plan_with(ActionKind::Replace, "gke.nodepool/dws-pool"),
            &w,
            flavors().iter(),
        );
        assert_eq!(d[0].jobs, ["RayJob default/job-2 (quota reserved)"]);
        let none = find_in(
            &plan_with(ActionKind::Update, "gke.nodepool/dws-pool"),
            &w,
            flavors().iter(),
        );
        assert!(none.is_empty());
    }

    #[test]
    fn local_queue_and_flavor_deletes() {
        let w = vec![workload(
            "ml",
            "job-1",
            "cq",
            "team",
            "on-demand",
            true,
            false,
        )];
        assert_eq!(
            find_in(
                &plan_with(ActionKind::Delete, "kueue.localqueue/ml/team"),
                &w,
                flavors().iter()
            )[0]
            .jobs,
            ["RayJob ml/job-1 (admitted: keeps running, cannot be re-admitted)"]
        );
        assert!(
            find_in(
                &plan_with(ActionKind::Delete, "kueue.localqueue/other/team"),
                &w,
                flavors().iter()
            )
            .is_empty()
        );
        assert_eq!(
            find_in(
                &plan_with(ActionKind::Delete, "kueue.resourceflavor/on-demand"),
                &w,
                flavors().iter()
            )
            .len(),
            1
        );
        assert!(
            find_in(
                &plan_with(ActionKind::Delete, "kueue.resourceflavor/dws"),
                &w,
                flavors().iter()
            )
            .is_empty()
        );
    }

    #[test]
    fn replacing_or_deleting_a_job_that_holds_quota_stops_it_and_a_finished_one_does_not() {
        let w = vec![
            workload(
                "default",
                "job-1",
                "cq",
                "user-queue",
                "on-demand",
                true,
                false,
            ),
            workload(
                "default",
                "job-0",
                "cq",
                "user-queue",
                "on-demand",
                true,
                true,
            ),
            workload("default", "job-2", "cq", "user-queue", "dws", false, false),
        ];
        for kind in [ActionKind::Replace, ActionKind::Delete] {
            let d = find_in(
                &plan_with(kind, "ray.rayjob/default/job-1"),
                &w,
                flavors().iter(),
            );
            assert_eq!(d.len(), 1, "{kind:?}");
            assert_eq!(d[0].jobs, ["RayJob default/job-1 (admitted)"]);
        }
        // Quota reserved while waiting for the DWS check is held quota too.
        let reserved = find_in(
            &plan_with(ActionKind::Replace, "ray.rayjob/default/job-2"),
            &w,
            flavors().iter(),
        );
        assert_eq!(reserved[0].jobs, ["RayJob default/job-2 (quota reserved)"]);
        let finished = find_in(
            &plan_with(ActionKind::Replace, "ray.rayjob/default/job-0"),
            &w,
            flavors().iter(),
        );
        assert!(finished.is_empty(), "{finished:?}");
        // An update of a job's labels is not a new run.
        assert!(
            find_in(
                &plan_with(ActionKind::Update, "ray.rayjob/default/job-1"),
                &w,
                flavors().iter()
            )
            .is_empty()
        );
    }

    #[test]
    fn a_pending_job_is_not_running_work_but_a_job_running_outside_kueue_is() {
        let mut pending = workload("default", "job-3", "cq", "user-queue", "dws", false, false);
        pending["status"]["conditions"] = json!([{"type": "QuotaReserved", "status": "False"}]);
        let plan = plan_with(ActionKind::Replace, "ray.rayjob/default/job-3");
        assert!(find_in(&plan, &[pending], flavors().iter()).is_empty());

        let running = json!({"kind": "RayJob", "metadata": {"namespace": "default", "name": "job-3"},
            "status": {"jobDeploymentStatus": "Running"}});
        let done = json!({"kind": "RayJob", "metadata": {"namespace": "default", "name": "job-3"},
            "status": {"jobDeploymentStatus": "Complete"}});
        let batch = json!({"kind": "Job", "metadata": {"namespace": "default", "name": "job-3"},
            "status": {"active": 2, "startTime": "2026-01-01T00:00:00Z"}});
        let with = |job: &Value| find(&plan, &[], &|_| Some(job), flavors().iter());
        assert_eq!(
            with(&running)[0].jobs,
            ["RayJob default/job-3 (running, outside Kueue)"]
        );
        assert!(with(&done).is_empty());
        let batch_plan = plan_with(ActionKind::Delete, "k8s.job/default/job-3");
        let d = find(&batch_plan, &[], &|_| Some(&batch), flavors().iter());
        assert_eq!(d[0].jobs, ["Job default/job-3 (running, outside Kueue)"]);
    }
}
