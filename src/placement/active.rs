//! Which ClusterQueues and AdmissionChecks Kueue holds active: one rule for the prediction (the
//! model compiles it into each queue) and for the local target's simulated Kueue (which writes
//! it as status). Sources (Kueue v0.19.2): `pkg/cache/scheduler/clusterqueue.go`
//! (`inactiveReason`) and `pkg/controller/admissionchecks/provisioning/admissioncheck_reconciler.go`;
//! docs/kueue.md 1a.

use super::objects::{
    AdmissionCheck, Cluster, ClusterQueue, PROVISIONING_REQUEST_CONTROLLER,
    ProvisioningRequestConfig, ReservingWorkload,
};
use super::podsets::StoppedQueue;

/// One reason a ClusterQueue is inactive: the reason of Kueue's `Active` condition and the
/// message part that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inactive {
    pub reason: &'static str,
    pub message: String,
}

/// The ProvisioningRequestConfig a check's parameters name, when they resolve to one.
pub fn provisioning_config<'c>(
    cluster: &'c Cluster,
    ac: &AdmissionCheck,
) -> Option<&'c ProvisioningRequestConfig> {
    ac.parameters
        .as_ref()
        .filter(|(kind, _)| kind == "ProvisioningRequestConfig")
        .and_then(|(_, name)| cluster.provisioning_request_configs.get(name))
}

/// What the check's controller decides: a ProvisioningRequest check is active only when its
/// parameters resolve to a ProvisioningRequestConfig; a check of another controller is assumed
/// active (its controller is not gkq's to judge).
pub fn parameters_resolve(cluster: &Cluster, ac: &AdmissionCheck) -> bool {
    ac.controller_name != PROVISIONING_REQUEST_CONTROLLER
        || provisioning_config(cluster, ac).is_some()
}

/// Whether an AdmissionCheck is active: its live `Active` condition when it has one, else what
/// its controller would decide ([`parameters_resolve`]).
pub fn admission_check_active(cluster: &Cluster, ac: &AdmissionCheck) -> bool {
    ac.active_condition
        .unwrap_or_else(|| parameters_resolve(cluster, ac))
}

/// Why Kueue keeps a ClusterQueue inactive, in Kueue's order (none: active): terminating
/// (alone), else stopped, missing ResourceFlavors, missing AdmissionChecks, inactive
/// AdmissionChecks. A cohort cycle, which
/// only the whole cohort tree shows, is the model's to add.
pub fn cluster_queue_inactive(cluster: &Cluster, cq: &ClusterQueue) -> Vec<Inactive> {
    if cq.terminating {
        return vec![Inactive {
            reason: "Terminating",
            message: "is terminating".to_string(),
        }];
    }
    let mut missing_flavors: Vec<String> = Vec::new();
    for flavor in cq.resource_groups.iter().flat_map(|g| &g.flavors) {
        let known = cluster
            .resource_flavors
            .iter()
            .any(|f| f.name == flavor.flavor);
        if !known && !missing_flavors.contains(&flavor.flavor) {
            missing_flavors.push(flavor.flavor.clone());
        }
    }
    let mut missing_checks = Vec::new();
    let mut inactive_checks = Vec::new();
    for rule in &cq.admission_checks {
        match cluster
            .admission_checks
            .iter()
            .find(|ac| ac.name == rule.name)
        {
            None => missing_checks.push(rule.name.clone()),
            Some(ac) if !admission_check_active(cluster, ac) => {
                inactive_checks.push(rule.name.clone())
            }
            Some(_) => {}
        }
    }
    let mut reasons = Vec::new();
    if stopped(&cq.stop_policy) {
        reasons.push(Inactive {
            reason: "Stopped",
            message: "is stopped".to_string(),
        });
    }
    for (names, reason, what) in [
        (
            missing_flavors,
            "FlavorNotFound",
            "missing ResourceFlavor(s)",
        ),
        (
            missing_checks,
            "AdmissionCheckNotFound",
            "missing AdmissionCheck(s)",
        ),
        (
            inactive_checks,
            "AdmissionCheckInactive",
            "inactive AdmissionCheck(s)",
        ),
    ] {
        if !names.is_empty() {
            reasons.push(Inactive {
                reason,
                message: format!("references {what}: {}", names.join(",")),
            });
        }
    }
    reasons
}

/// What Kueue does at once to a Workload holding quota whose queues stop or go away, when it
/// does something: the rule of Kueue v0.19.2's workload controller
/// (`pkg/controller/core/workload_controller.go`, `reconcileOnLocalQueueActiveState` then
/// `reconcileOnClusterQueueActiveState`; docs/kueue.md 1g).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Admitted, and its LocalQueue or ClusterQueue has `stopPolicy: HoldAndDrain`: evicted
    /// (its job is stopped), and queued again once that queue runs again.
    Evicted(StoppedQueue),
    /// Holding quota while its admission checks are pending, and its LocalQueue or ClusterQueue
    /// is stopped (`Hold` or `HoldAndDrain`), deleted or missing: the reservation is taken
    /// back, with Kueue's message. Kueue retries the Workloads parked in the ClusterQueue
    /// through the released Workload's LocalQueue; when that is gone (`retries_waiting`
    /// false), the freed quota goes only to Workloads that arrive later.
    Unreserved {
        message: String,
        retries_waiting: bool,
    },
}

impl Release {
    /// What happens to the Workload, in the words of a plan.
    pub fn text(&self) -> String {
        match self {
            Release::Evicted(StoppedQueue::ClusterQueue) => {
                "would be evicted: its ClusterQueue's stopPolicy is HoldAndDrain".to_string()
            }
            Release::Evicted(StoppedQueue::LocalQueue) => {
                "would be evicted: its LocalQueue's stopPolicy is HoldAndDrain".to_string()
            }
            Release::Unreserved { message, .. } => {
                format!("loses its quota reservation: {message}")
            }
        }
    }
}

fn stopped(policy: &str) -> bool {
    !policy.is_empty() && policy != "None"
}

/// A queue as the release rule reads it: its name, and its `stopPolicy` (`None`: the queue is
/// gone or being deleted).
#[derive(Debug, Clone, Copy)]
pub struct QueueState<'a> {
    pub name: &'a str,
    pub stop_policy: Option<&'a str>,
}

/// Whether (and how) Kueue releases the quota of a Workload holding it (`admitted`, or only
/// reserved while its admission checks are pending) given its LocalQueue and ClusterQueue. An
/// admitted Workload keeps its quota unless a queue drains it: a deleted queue does not stop it.
pub fn release(
    admitted: bool,
    local_queue: QueueState<'_>,
    cluster_queue: QueueState<'_>,
) -> Option<Release> {
    if admitted {
        if local_queue.stop_policy == Some("HoldAndDrain") {
            return Some(Release::Evicted(StoppedQueue::LocalQueue));
        }
        if cluster_queue.stop_policy == Some("HoldAndDrain") {
            return Some(Release::Evicted(StoppedQueue::ClusterQueue));
        }
        return None;
    }
    let why = |queue: &str, name: &str, policy: Option<&str>| match policy {
        None => Some(format!("{queue} {name} is terminating or missing")),
        Some(policy) if stopped(policy) => Some(format!("{queue} {name} is stopped")),
        Some(_) => None,
    };
    why("LocalQueue", local_queue.name, local_queue.stop_policy)
        .or_else(|| {
            why(
                "ClusterQueue",
                cluster_queue.name,
                cluster_queue.stop_policy,
            )
        })
        .map(|message| Release::Unreserved {
            message,
            // `pkg/cache/queue/manager.go`, `QueueAssociatedInadmissibleWorkloadsAfter`: the
            // retry goes through the Workload's LocalQueue.
            retries_waiting: local_queue.stop_policy.is_some(),
        })
}

/// [`release`] for a Workload of `cluster`, with its queues as they are there.
pub fn released(cluster: &Cluster, workload: &ReservingWorkload) -> Option<Release> {
    let queue = workload.queue_name.as_deref().unwrap_or_default();
    let local_queue = cluster
        .local_queues
        .iter()
        .find(|lq| lq.namespace == workload.namespace && lq.name == queue);
    let cluster_queue = cluster
        .cluster_queues
        .iter()
        .find(|cq| cq.name == workload.cluster_queue);
    release(
        workload.admitted,
        QueueState {
            name: queue,
            stop_policy: local_queue.map(|lq| lq.stop_policy.as_str()),
        },
        QueueState {
            name: &workload.cluster_queue,
            stop_policy: cluster_queue
                .filter(|cq| !cq.terminating)
                .map(|cq| cq.stop_policy.as_str()),
        },
    )
}
