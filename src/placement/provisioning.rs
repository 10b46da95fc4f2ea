//! The one rule for a Workload's ProvisioningRequest and the state it is in, as Kueue v0.19.2's
//! ProvisioningRequest admission check reads them (`pkg/controller/admissionchecks/provisioning/`:
//! `controller.go` `activeOrLastPRForChecks` and `syncCheckStates`, `provisioning.go`
//! `matchesWorkloadAndCheck`, `getAttempt`, `isFailed`...; docs/kueue.md 1a.8). `gkq status` and
//! `gkq watch` and the local target's simulated Kueue use it, so they say the same thing about the
//! same request.
//!
//! - Which request: Kueue lists the requests in the Workload's namespace whose owner reference
//!   names the Workload (`indexRequestsOwner`), keeps those named `<workload>-<check>-<attempt>`
//!   for one of the Workload's admission checks, and acts on the highest attempt number (a
//!   number: attempt 10 comes after attempt 9, whatever the creation times say).
//! - Which condition wins: `Failed`, then `CapacityRevoked`, then `BookingExpired`, then
//!   `Provisioned`, then `Accepted` (the order of Kueue's `switch`). A booking that expires
//!   after the Workload was admitted is the normal end of a consumed booking: Kueue ignores it
//!   and the check stays `Ready`, so the request reads as `Provisioned` then.
//! - Which message: the winning condition's own; while `Accepted`, the `Provisioned` condition's
//!   (the autoscaler's ETA); none while nothing is set yet.
//!
//! - Which PodSets a request carries: [`request_shapes`] (`mergePodSets`, with the config's
//!   `podSetMergePolicy`), for the DWS single-PodSet lint, the plan and the local target.
//!
//! Kueue shortens names over 252 characters with a hash (`limitObjectName`); such requests are
//! not matched here (Kueue's own attempt pattern does not match them either).

use serde::Serialize;
use serde_json::Value;

use super::active;
use super::objects::{Cluster, PROVISIONING_REQUEST_CONTROLLER};
use super::podsets::{PendingWorkload, PodSet, PodSetMergePolicy, RequestPodSet, request_pod_sets};
use crate::vocab::object::{condition, condition_true, owners};

/// A ProvisioningRequest's state as Kueue acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RequestState {
    /// The autoscaler gave up; Kueue retries with backoff, then rejects the check.
    Failed,
    /// The nodes were taken back; Kueue rejects the check and deactivates the Workload.
    CapacityRevoked,
    /// The booking ran out before the Workload was admitted; Kueue retries like `Failed`.
    BookingExpired,
    /// The capacity is there; the check is `Ready`.
    Provisioned,
    /// The autoscaler accepted the request and waits for capacity.
    Accepted,
    /// No condition set yet.
    Pending,
}

impl RequestState {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Failed => "Failed",
            RequestState::CapacityRevoked => "CapacityRevoked",
            RequestState::BookingExpired => "BookingExpired",
            RequestState::Provisioned => "Provisioned",
            RequestState::Accepted => "Accepted",
            RequestState::Pending => "Pending",
        }
    }

    /// The request will not bring the capacity: Kueue retries with a new one or rejects.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            RequestState::Failed | RequestState::CapacityRevoked | RequestState::BookingExpired
        )
    }
}

impl std::fmt::Display for RequestState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Workload's current ProvisioningRequest: its name, state and the message that explains it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestState {
    pub name: String,
    pub state: RequestState,
    pub message: String,
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The attempt number of `request` for `check` of `workload`, when its name is
/// `<workload>-<check>-<attempt>`.
fn attempt(request: &Value, workload: &str, check: &str) -> Option<u64> {
    let digits = str_at(request, "/metadata/name")
        .strip_prefix(workload)?
        .strip_prefix('-')?
        .strip_prefix(check)?
        .strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The request Kueue acts on for `workload`: owned by it, named for one of its admission checks,
/// the highest attempt; with several ProvisioningRequest checks, the first check (in the
/// Workload's order) that has one.
pub fn current_request<'a>(workload: &Value, requests: &'a [Value]) -> Option<&'a Value> {
    let name = str_at(workload, "/metadata/name");
    let namespace = str_at(workload, "/metadata/namespace");
    if name.is_empty() {
        return None;
    }
    let owned: Vec<&Value> = requests
        .iter()
        .filter(|r| {
            str_at(r, "/metadata/namespace") == namespace && owners(r).any(|o| o["name"] == name)
        })
        .collect();
    current_among(workload, name, &owned)
}

/// [`current_request`] among `owned`, the requests in the Workload's namespace that it owns
/// (in the order they were listed).
fn current_among<'a>(workload: &Value, name: &str, owned: &[&'a Value]) -> Option<&'a Value> {
    workload
        .pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|check| check.get("name").and_then(Value::as_str))
        .find_map(|check| {
            owned
                .iter()
                .filter_map(|r| Some((attempt(r, name, check)?, *r)))
                .max_by_key(|(attempt, _)| *attempt)
                .map(|(_, r)| r)
        })
}

/// ProvisioningRequests by namespace and owner name, in the order listed: a report on many
/// Workloads finds each one's requests here instead of reading every request for each
/// ([`current_request`]'s rule, the same answer).
pub struct RequestsByOwner<'a> {
    owned: std::collections::HashMap<(&'a str, &'a str), Vec<&'a Value>>,
}

impl<'a> RequestsByOwner<'a> {
    pub fn new(requests: &'a [Value]) -> RequestsByOwner<'a> {
        let mut owned: std::collections::HashMap<(&str, &str), Vec<&Value>> =
            std::collections::HashMap::new();
        for request in requests {
            let namespace = str_at(request, "/metadata/namespace");
            let mut names: Vec<&str> = owners(request).filter_map(|o| o["name"].as_str()).collect();
            names.sort_unstable();
            names.dedup();
            for name in names {
                owned.entry((namespace, name)).or_default().push(request);
            }
        }
        RequestsByOwner { owned }
    }

    /// [`workload_request`], from the index.
    pub fn workload_request(&self, workload: &Value) -> Option<ProvisioningRequestState> {
        let name = str_at(workload, "/metadata/name");
        if name.is_empty() {
            return None;
        }
        let namespace = str_at(workload, "/metadata/namespace");
        let owned = self.owned.get(&(namespace, name))?;
        let request = current_among(workload, name, owned)?;
        Some(request_state(request, condition_true(workload, "Admitted")))
    }
}

/// The state of `request`, for a Workload that is (`admitted`) or is not yet admitted.
pub fn request_state(request: &Value, admitted: bool) -> ProvisioningRequestState {
    let state = if condition_true(request, "Failed") {
        RequestState::Failed
    } else if condition_true(request, "CapacityRevoked") {
        RequestState::CapacityRevoked
    } else if condition_true(request, "BookingExpired") && !admitted {
        RequestState::BookingExpired
    } else if condition_true(request, "Provisioned") {
        RequestState::Provisioned
    } else if condition_true(request, "Accepted") {
        RequestState::Accepted
    } else {
        RequestState::Pending
    };
    let explaining = match state {
        RequestState::Pending => None,
        RequestState::Accepted => condition(request, "Provisioned"),
        other => condition(request, other.as_str()),
    };
    ProvisioningRequestState {
        name: str_at(request, "/metadata/name").to_string(),
        state,
        message: explaining
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    }
}

/// [`current_request`] of `workload` and its [`request_state`].
pub fn workload_request(workload: &Value, requests: &[Value]) -> Option<ProvisioningRequestState> {
    let request = current_request(workload, requests)?;
    Some(request_state(request, condition_true(workload, "Admitted")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(conditions: Value) -> Value {
        json!({"metadata": {"namespace": "ml", "name": "rayjob-train-abc12", "uid": "w-1"},
            "status": {"conditions": conditions,
                "admissionChecks": [{"name": "dws-prov", "state": "Pending"}]}})
    }

    fn request(name: &str, owner: &str, conditions: Value) -> Value {
        json!({"metadata": {"namespace": "ml", "name": name,
                "ownerReferences": [{"kind": "Workload", "name": owner, "uid": "w-1"}]},
            "status": {"conditions": conditions}})
    }

    fn cond(kind: &str, status: &str, message: &str) -> Value {
        json!({"type": kind, "status": status, "message": message})
    }

    fn state_of(conditions: Value, admitted: bool) -> ProvisioningRequestState {
        request_state(
            &request(
                "rayjob-train-abc12-dws-prov-1",
                "rayjob-train-abc12",
                conditions,
            ),
            admitted,
        )
    }

    #[test]
    fn failure_conditions_win_over_provisioned_as_in_kueues_switch() {
        let provisioned = cond("Provisioned", "True", "provisioned");
        for (kind, state) in [
            ("Failed", RequestState::Failed),
            ("CapacityRevoked", RequestState::CapacityRevoked),
            ("BookingExpired", RequestState::BookingExpired),
        ] {
            let got = state_of(json!([provisioned, cond(kind, "True", "why")]), false);
            assert_eq!((got.state, got.message.as_str()), (state, "why"), "{kind}");
        }
        let failed_and_revoked = json!([
            cond("CapacityRevoked", "True", "revoked"),
            cond("Failed", "True", "failed")
        ]);
        assert_eq!(
            state_of(failed_and_revoked, false).state,
            RequestState::Failed
        );
        let revoked_and_expired = json!([
            cond("BookingExpired", "True", "expired"),
            cond("CapacityRevoked", "True", "revoked")
        ]);
        assert_eq!(
            state_of(revoked_and_expired, true).state,
            RequestState::CapacityRevoked
        );
    }

    #[test]
    fn a_booking_that_expires_after_admission_still_reads_provisioned() {
        let expired = json!([
            cond("Provisioned", "True", "provisioned"),
            cond("BookingExpired", "True", "expired")
        ]);
        let got = state_of(expired, true);
        assert_eq!(
            (got.state, got.message.as_str()),
            (RequestState::Provisioned, "provisioned")
        );
    }

    #[test]
    fn accepted_explains_itself_with_the_provisioned_condition_and_pending_says_nothing() {
        let waiting = json!([
            cond("Accepted", "True", "accepted"),
            cond("Provisioned", "False", "waiting for capacity, ETA 5m")
        ]);
        let got = state_of(waiting, false);
        assert_eq!(
            (got.state, got.message.as_str()),
            (RequestState::Accepted, "waiting for capacity, ETA 5m")
        );
        let got = state_of(json!([cond("Provisioned", "False", "not yet")]), false);
        assert_eq!(
            (got.state, got.message.as_str()),
            (RequestState::Pending, "")
        );
        assert_eq!(state_of(json!([]), false).state, RequestState::Pending);
    }

    #[test]
    fn the_highest_attempt_of_an_owned_request_named_for_a_check_counts() {
        let w = workload(json!([]));
        let owner = "rayjob-train-abc12";
        let requests = [
            request("rayjob-train-abc12-dws-prov-9", owner, json!([])),
            // Attempt 10 after attempt 9: numbers, not text.
            request("rayjob-train-abc12-dws-prov-10", owner, json!([])),
            // Not owned by the Workload.
            request("rayjob-train-abc12-dws-prov-11", "someone-else", json!([])),
            // Another Workload whose name extends this one's.
            request("rayjob-train-abc12-x-dws-prov-12", owner, json!([])),
            // Not for one of the Workload's checks.
            request("rayjob-train-abc12-other-13", owner, json!([])),
            // Another namespace.
            json!({"metadata": {"namespace": "other", "name": "rayjob-train-abc12-dws-prov-14",
                "ownerReferences": [{"kind": "Workload", "name": owner}]}}),
        ];
        let found = current_request(&w, &requests).unwrap();
        assert_eq!(found["metadata"]["name"], "rayjob-train-abc12-dws-prov-10");
        assert_eq!(current_request(&w, &requests[2..]), None);
    }

    /// The index by owner answers what reading every request answers, for each Workload of a
    /// list holding several Workloads' requests, other namespaces and requests of no one.
    #[test]
    fn requests_found_by_owner_are_the_ones_every_request_read_finds() {
        let with_name = |name: &str| {
            let mut w = workload(json!([cond("Admitted", "True", "")]));
            w["metadata"]["name"] = json!(name);
            w
        };
        let owner = "rayjob-train-abc12";
        let requests = [
            request("rayjob-train-abc12-dws-prov-9", owner, json!([])),
            request(
                "rayjob-train-abc12-dws-prov-10",
                owner,
                json!([cond("Provisioned", "True", "ready")]),
            ),
            request("rayjob-train-abc12-dws-prov-11", "someone-else", json!([])),
            request(
                "someone-else-dws-prov-1",
                "someone-else",
                json!([cond("Failed", "True", "no")]),
            ),
            request("rayjob-train-abc12-x-dws-prov-12", owner, json!([])),
            json!({"metadata": {"namespace": "other", "name": "rayjob-train-abc12-dws-prov-14",
                "ownerReferences": [{"kind": "Workload", "name": owner}]}}),
            json!({"metadata": {"namespace": "ml", "name": "orphan-dws-prov-1"}}),
        ];
        let index = RequestsByOwner::new(&requests);
        for name in [owner, "someone-else", "nobody", ""] {
            let w = with_name(name);
            assert_eq!(
                index.workload_request(&w),
                workload_request(&w, &requests),
                "{name}"
            );
        }
        assert_eq!(
            index.workload_request(&with_name(owner)).unwrap().state,
            RequestState::Provisioned
        );
    }

    #[test]
    fn a_workload_request_is_read_with_its_admission() {
        let requests = [request(
            "rayjob-train-abc12-dws-prov-1",
            "rayjob-train-abc12",
            json!([
                cond("Provisioned", "True", "provisioned"),
                cond("BookingExpired", "True", "expired")
            ]),
        )];
        let reserved = workload(json!([cond("QuotaReserved", "True", "")]));
        assert_eq!(
            workload_request(&reserved, &requests).unwrap().state,
            RequestState::BookingExpired
        );
        let admitted = workload(json!([cond("Admitted", "True", "")]));
        assert_eq!(
            workload_request(&admitted, &requests).unwrap().state,
            RequestState::Provisioned
        );
    }
}

/// GKE's queued provisioning class (DWS): it accepts one PodSet per ProvisioningRequest
/// (docs/kueue.md 1c.4).
pub const DWS_CLASS: &str = "queued-provisioning.gke.io";

/// A ProvisioningRequest Kueue would create for a job under one ProvisioningRequest check of
/// its ClusterQueue whose parameters resolve: the config and the PodSets the request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestShape {
    pub check: String,
    pub config: String,
    pub class_name: String,
    pub managed_resources: Vec<String>,
    pub merge_policy: Option<PodSetMergePolicy>,
    pub pod_sets: Vec<RequestPodSet>,
}

impl RequestShape {
    /// A DWS request with more than one PodSet: GKE fails it and the job never gets nodes.
    pub fn refused_by_dws(&self) -> bool {
        self.class_name == DWS_CLASS && self.pod_sets.len() > 1
    }

    /// The merge policy that would make this request one PodSet, when one would and the config
    /// has none that does: the stricter (identical templates) first.
    pub fn policy_that_merges(&self, pod_sets: &[PodSet]) -> Option<PodSetMergePolicy> {
        PodSetMergePolicy::ALL.into_iter().find(|&policy| {
            request_pod_sets(pod_sets, &self.managed_resources, Some(policy)).len() == 1
        })
    }
}

/// The ClusterQueues of `cluster` that admit jobs to `flavor` (list it in a resource group)
/// without a ProvisioningRequest admission check on it: none of their checks that apply to the
/// flavor (`onFlavors` empty or naming it; `pkg/util/admissioncheck/admissioncheck.go`,
/// `NewAdmissionChecks`, docs/kueue.md 1a.8) is an AdmissionCheck of Kueue's ProvisioningRequest
/// controller. Kueue admits a job there without asking for nodes, so on a queued-provisioning pool (whose
/// nodes come only through a ProvisioningRequest) it waits forever. The checks and queues are
/// read wherever `cluster` found them: the spec's kueue section, raw manifests, live objects.
pub fn queues_without_provisioning_check<'a>(cluster: &'a Cluster, flavor: &str) -> Vec<&'a str> {
    let provisioning = |name: &str| {
        cluster
            .admission_checks
            .iter()
            .any(|ac| ac.name == name && ac.controller_name == PROVISIONING_REQUEST_CONTROLLER)
    };
    cluster
        .cluster_queues
        .iter()
        .filter(|cq| {
            cq.resource_groups
                .iter()
                .any(|group| group.flavors.iter().any(|f| f.flavor == flavor))
        })
        .filter(|cq| {
            !cq.admission_checks.iter().any(|rule| {
                (rule.on_flavors.is_empty() || rule.on_flavors.iter().any(|f| f == flavor))
                    && provisioning(&rule.name)
            })
        })
        .map(|cq| cq.name.as_str())
        .collect()
}

/// The ProvisioningRequests of `workload` in `cluster` (`syncOwnedProvisionRequest` and
/// `mergePodSets` of Kueue v0.19.2's `pkg/controller/admissionchecks/provisioning/controller.go`):
/// one per ProvisioningRequest check of the ClusterQueue its LocalQueue names, whose
/// parameters resolve, with the PodSets Kueue merges its podsets into
/// ([`request_pod_sets`]). A check limited to some flavors is included whatever flavor the job
/// gets: it applies when the job lands there.
pub fn request_shapes(cluster: &Cluster, workload: &PendingWorkload) -> Vec<RequestShape> {
    let Some(queue) = &workload.queue_name else {
        return Vec::new();
    };
    let Some(local_queue) = cluster
        .local_queues
        .iter()
        .find(|lq| lq.namespace == workload.namespace && &lq.name == queue)
    else {
        return Vec::new();
    };
    let Some(cluster_queue) = cluster
        .cluster_queues
        .iter()
        .find(|cq| cq.name == local_queue.cluster_queue)
    else {
        return Vec::new();
    };
    cluster_queue
        .admission_checks
        .iter()
        .filter_map(|rule| {
            let check = cluster.admission_checks.iter().find(|ac| {
                ac.name == rule.name && ac.controller_name == PROVISIONING_REQUEST_CONTROLLER
            })?;
            let config = active::provisioning_config(cluster, check)?;
            Some(RequestShape {
                check: check.name.clone(),
                config: check
                    .parameters
                    .as_ref()
                    .map(|(_, name)| name.clone())
                    .unwrap_or_default(),
                class_name: config.class_name.clone(),
                managed_resources: config.managed_resources.clone(),
                merge_policy: config.pod_set_merge_policy,
                pod_sets: request_pod_sets(
                    &workload.pod_sets,
                    &config.managed_resources,
                    config.pod_set_merge_policy,
                ),
            })
        })
        .collect()
}
