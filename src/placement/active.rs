//! Which ClusterQueues and AdmissionChecks Kueue holds active: one rule for the prediction (the
//! model compiles it into each queue) and for the local target's simulated Kueue (which writes
//! it as status). Sources (Kueue v0.19.2): `pkg/cache/scheduler/clusterqueue.go`
//! (`inactiveReason`) and `pkg/controller/admissionchecks/provisioning/admissioncheck_reconciler.go`;
//! docs/kueue.md 1a.

use super::objects::{AdmissionCheck, Cluster, ClusterQueue, PROVISIONING_REQUEST_CONTROLLER};

/// One reason a ClusterQueue is inactive: the reason of Kueue's `Active` condition and the
/// message part that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inactive {
    pub reason: &'static str,
    pub message: String,
}

/// The ProvisioningRequestConfig (its managed resources) a check's parameters name, when they
/// resolve to one.
pub fn provisioning_config<'c>(
    cluster: &'c Cluster,
    ac: &AdmissionCheck,
) -> Option<&'c Vec<String>> {
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

/// Why Kueue keeps a ClusterQueue inactive, in Kueue's order (none: active): stopped, missing
/// ResourceFlavors, missing AdmissionChecks, inactive AdmissionChecks. A cohort cycle, which
/// only the whole cohort tree shows, is the model's to add.
pub fn cluster_queue_inactive(cluster: &Cluster, cq: &ClusterQueue) -> Vec<Inactive> {
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
    if cq.stop_policy != "None" && !cq.stop_policy.is_empty() {
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
