//! `gkq explain NAMESPACE/NAME`: why a job is where it is, as a pure function of what was read.
//! Kueue's own word (the Workload's conditions, admission checks and ProvisioningRequest), gkq's
//! reproduction (the placement predicted over the same live world, with every flavor tried and
//! why it did not do), whether the two agree, and what to change, pointing at the spec line
//! when the spec holds the object to change.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::placement::provisioning::{ProvisioningRequestState, workload_request};
use crate::placement::{AttemptProblem, Placement, PlacementState, PodSetPlacement};
use crate::vocab::object::conditions;

/// Where things are written in the spec: `file:line:column` by what they are.
#[derive(Debug, Clone, Default)]
pub struct SpecLocations {
    /// `(ClusterQueue, flavor, resource)` -> the quota's value.
    pub quotas: BTreeMap<(String, String, String), String>,
    /// ClusterQueue -> its entry.
    pub cluster_queues: BTreeMap<String, String>,
    /// `kueue.localQueues` entries, and where new ones go.
    pub local_queues: Option<String>,
    /// Job name (as in `jobs:`) -> its entry.
    pub jobs: BTreeMap<String, String>,
}

/// `gkq explain -o json` (format version 1).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub format_version: u32,
    /// `namespace/name` of the Workload, when Kueue made one.
    pub workload: Option<String>,
    /// `Kind namespace/name` of the job.
    pub job: String,
    /// What Kueue says, from the Workload; `null` when there is none yet.
    pub kueue: Option<KueueSays>,
    /// What gkq reproduces over the same live world; `null` when it cannot (no queue).
    pub gkq: Option<GkqSays>,
    /// Whether gkq's reproduction matches Kueue's decision (state and flavors); `null` when one
    /// of them is missing or the prediction is not made.
    pub agrees: Option<bool>,
    /// How they differ, one line each.
    pub differences: Vec<String>,
    /// What to change, most direct first.
    pub fixes: Vec<Fix>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KueueSays {
    pub state: PlacementState,
    pub cluster_queue: Option<String>,
    pub podsets: Vec<PodSetPlacement>,
    pub conditions: Vec<ConditionText>,
    pub admission_checks: Vec<ConditionText>,
    pub provisioning_request: Option<ProvisioningRequestState>,
}

/// A condition or admission check state in Kueue's words.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionText {
    /// The condition type, or the admission check's name.
    pub name: String,
    /// `True`/`False`, or the check's state (`Pending`, `Ready`, `Retry`, `Rejected`).
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GkqSays {
    pub state: PlacementState,
    pub cluster_queue: Option<String>,
    pub podsets: Vec<PodSetPlacement>,
    pub reason: Option<String>,
    /// Each flavor a podset could not use, in the order Kueue tries them.
    pub attempts: Vec<AttemptText>,
    pub not_predicted: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptText {
    pub podset: String,
    pub flavor: Option<String>,
    pub resource: Option<String>,
    pub why: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fix {
    pub text: String,
    /// `file:line:column` in the spec, when the spec holds what to change.
    pub at: Option<String>,
}

/// What was read about one job.
pub struct ExplainInputs<'a> {
    pub job: String,
    /// The job's Workload, when Kueue made one.
    pub workload: Option<&'a Value>,
    /// Kueue's placement read from the Workload (`placement::observed_placement`).
    pub observed: Option<Placement>,
    /// gkq's prediction for the job over the live world.
    pub predicted: Option<Placement>,
    pub provisioning_requests: &'a [Value],
    pub spec: &'a SpecLocations,
    /// The job's entry in `jobs:` when the spec submits it.
    pub spec_job: Option<String>,
}

pub fn explain(inputs: ExplainInputs<'_>) -> Explanation {
    let kueue = inputs
        .workload
        .zip(inputs.observed.as_ref())
        .map(|(w, observed)| KueueSays {
            state: observed.state,
            cluster_queue: observed.cluster_queue.clone(),
            podsets: observed.podsets.clone(),
            conditions: conditions(w).map(condition_text).collect(),
            admission_checks: w
                .pointer("/status/admissionChecks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(check_text)
                .collect(),
            provisioning_request: workload_request(w, inputs.provisioning_requests),
        });
    let gkq = inputs.predicted.as_ref().map(|p| GkqSays {
        state: p.state,
        cluster_queue: p.cluster_queue.clone(),
        podsets: p.podsets.clone(),
        reason: p.reason.clone(),
        attempts: p
            .attempts
            .iter()
            .map(|a| {
                let (flavor, resource) = match &a.problem {
                    AttemptProblem::Ineligible { flavor } => (Some(flavor.clone()), None),
                    AttemptProblem::OverCapacity {
                        flavor, resource, ..
                    }
                    | AttemptProblem::InUse {
                        flavor, resource, ..
                    } => (Some(flavor.clone()), Some(resource.clone())),
                    AttemptProblem::NotCovered { resource } => (None, Some(resource.clone())),
                };
                AttemptText {
                    podset: a.podset.clone(),
                    flavor,
                    resource,
                    why: a.text.clone(),
                }
            })
            .collect(),
        not_predicted: p.not_predicted.clone(),
    });
    let (agrees, differences) = match (&inputs.predicted, &inputs.observed) {
        (Some(predicted), Some(observed)) if predicted.not_predicted.is_none() => {
            let differences = predicted.differences(observed);
            (Some(differences.is_empty()), differences)
        }
        _ => (None, Vec::new()),
    };
    let mut fixes = Vec::new();
    if let Some(predicted) = &inputs.predicted {
        fixes.extend(placement_fixes(
            predicted,
            inputs.spec,
            inputs.spec_job.as_deref(),
        ));
    }
    if let Some(kueue) = &kueue {
        fixes.extend(check_fixes(kueue));
    }
    Explanation {
        format_version: 1,
        workload: inputs.workload.map(|w| {
            format!(
                "{}/{}",
                w.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                w.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            )
        }),
        job: inputs.job,
        kueue,
        gkq,
        agrees,
        differences,
        fixes,
    }
}

fn text_at(value: &Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn condition_text(condition: &Value) -> ConditionText {
    ConditionText {
        name: text_at(condition, "type").unwrap_or_default(),
        status: text_at(condition, "status").unwrap_or_default(),
        reason: text_at(condition, "reason"),
        message: text_at(condition, "message"),
    }
}

fn check_text(check: &Value) -> ConditionText {
    ConditionText {
        name: text_at(check, "name").unwrap_or_default(),
        status: text_at(check, "state").unwrap_or_default(),
        reason: None,
        message: text_at(check, "message"),
    }
}

/// What would let a pending job in, from why each flavor did not do.
fn placement_fixes(predicted: &Placement, spec: &SpecLocations, job_at: Option<&str>) -> Vec<Fix> {
    if predicted.state != PlacementState::Pending {
        return Vec::new();
    }
    let cq = predicted.cluster_queue.clone().unwrap_or_default();
    let quota_at = |flavor: &str, resource: &str| {
        spec.quotas
            .get(&(cq.clone(), flavor.to_string(), resource.to_string()))
            .cloned()
    };
    let outside = |at: &Option<String>| {
        if at.is_none() {
            format!(" (ClusterQueue {cq} is not in this spec: change it where it is managed)")
        } else {
            String::new()
        }
    };
    let mut fixes: Vec<Fix> = Vec::new();
    for attempt in &predicted.attempts {
        let fix = match &attempt.problem {
            AttemptProblem::OverCapacity {
                flavor,
                resource,
                needed,
                maximum,
            } => {
                let at = quota_at(flavor, resource);
                Fix {
                    text: format!(
                        "raise ClusterQueue {cq}'s {resource} quota in flavor {flavor} from {maximum} to at least {needed} (podset {} can never fit otherwise){}",
                        attempt.podset,
                        outside(&at)
                    ),
                    at,
                }
            }
            AttemptProblem::InUse {
                flavor,
                resource,
                more,
            } => {
                let at = quota_at(flavor, resource);
                Fix {
                    text: format!(
                        "{more} more {resource} is needed in flavor {flavor}, which running work holds: the job is admitted when that work finishes; to admit it now, raise ClusterQueue {cq}'s {resource} quota in {flavor} by {more}, or put {cq} in a cohort that can lend it{}",
                        outside(&at)
                    ),
                    at,
                }
            }
            AttemptProblem::Ineligible { flavor } => Fix {
                text: ineligible_fix(&attempt.text, flavor),
                at: job_at.map(str::to_string),
            },
            AttemptProblem::NotCovered { resource } => Fix {
                text: format!(
                    "add {resource} to a resource group of ClusterQueue {cq}, with a quota in the flavors the job may use, or stop requesting it"
                ),
                at: spec.cluster_queues.get(&cq).cloned(),
            },
        };
        if !fixes.iter().any(|f| f.text == fix.text) {
            fixes.push(fix);
        }
    }
    if fixes.is_empty()
        && let Some(reason) = &predicted.reason
    {
        fixes.push(reason_fix(reason, &cq, spec));
    }
    fixes
}

/// The fix for a flavor the pod template does not suit, from Kueue's words for it.
fn ineligible_fix(why: &str, flavor: &str) -> String {
    if why.contains("untolerated taint") {
        format!(
            "flavor {flavor}: {why}. Add a toleration for that taint to the job (spec `tolerations`), if it may run there"
        )
    } else if why.contains("doesn't match") || why.contains("affinity") || why.contains("selector")
    {
        format!(
            "flavor {flavor}: {why}. The job's node selector or affinity excludes the flavor's node labels: change the selector, or the flavor's `nodePool`"
        )
    } else {
        format!("flavor {flavor}: {why}")
    }
}

/// The fix when no flavor was even tried: the queue itself is the problem.
fn reason_fix(reason: &str, cq: &str, spec: &SpecLocations) -> Fix {
    if reason.contains("LocalQueue") && reason.contains("doesn't exist") {
        Fix {
            text: format!(
                "{reason}: add the LocalQueue to `kueue.localQueues`, pointing at a ClusterQueue"
            ),
            at: spec.local_queues.clone(),
        }
    } else if reason.contains("inactive") || reason.contains("doesn't exist") {
        Fix {
            text: format!(
                "{reason}: a ClusterQueue is inactive while a flavor or admission check it names is missing or inactive, or while it is held (`stopPolicy`)"
            ),
            at: spec.cluster_queues.get(cq).cloned(),
        }
    } else if reason.starts_with("queued behind") {
        Fix {
            text: format!(
                "{reason}: the job waits its turn; StrictFIFO queues let nothing pass the head, BestEffortFIFO would"
            ),
            at: spec.cluster_queues.get(cq).cloned(),
        }
    } else {
        Fix {
            text: reason.to_string(),
            at: None,
        }
    }
}

/// What an admission check that holds the job back waits for.
fn check_fixes(kueue: &KueueSays) -> Vec<Fix> {
    if kueue.state != PlacementState::WaitingForAdmissionChecks {
        return Vec::new();
    }
    let waiting: Vec<&ConditionText> = kueue
        .admission_checks
        .iter()
        .filter(|c| c.status != "Ready")
        .collect();
    let mut fixes = Vec::new();
    for check in waiting {
        let text = match &kueue.provisioning_request {
            Some(request) => format!(
                "admission check {} waits for ProvisioningRequest {} ({}{}): quota is reserved; the job starts when GKE provisions the nodes (DWS capacity is granted as it becomes available, or the request fails and Kueue retries)",
                check.name,
                request.name,
                request.state.as_str(),
                if request.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", request.message)
                }
            ),
            None => format!(
                "admission check {} is {}{}: the job starts once it is Ready",
                check.name,
                check.status,
                check
                    .message
                    .as_ref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ),
        };
        fixes.push(Fix { text, at: None });
    }
    fixes
}
