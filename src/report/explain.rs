//! `gkq explain NAMESPACE/NAME`: why a job is where it is, as a pure function of what was read.
//! Kueue's own word (the Workload's conditions, admission checks and ProvisioningRequest), gkq's
//! reproduction (the placement predicted over the same live world, with every flavor tried and
//! why it did not do), whether the two agree, and what to change, pointing at the spec line
//! when the spec holds the object to change.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::placement::provisioning::{ProvisioningRequestState, workload_request};
use crate::placement::remedy::{Change, Remedy};
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
    /// `(ClusterQueue, flavor)` -> the flavor's entry in the queue's resource groups.
    pub queue_flavors: BTreeMap<(String, String), String>,
    /// ClusterQueue -> its `preemption` entry, when it has one.
    pub preemption: BTreeMap<String, String>,
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
    /// For a live Workload, when the plan of this spec changes what Kueue decides with (jobs it
    /// submits, replaces or deletes; queue changes): where gkq predicts the job after that
    /// apply. `null`: the plan changes nothing for it, and the explanation is of the live state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_apply: Option<AfterApply>,
    /// What to change, cheapest first: for a pending job, each fix admits it in gkq's
    /// simulation when made alone; for a job waiting on admission checks, what they wait for.
    pub fixes: Vec<Fix>,
    /// What else the reasons say: work that holds the quota, what gkq cannot fix.
    pub notes: Vec<Fix>,
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

/// A live Workload in the world the plan predicts (`plan::placements::prediction_world`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AfterApply {
    /// The plan's actions that change what Kueue decides with, `verb address` each.
    pub changes: Vec<String>,
    /// gkq's prediction for the job once the plan is applied; `null` when its Workload is not
    /// in that world.
    pub gkq: Option<GkqSays>,
}

/// A live Workload after the plan, as read: what the plan changes, and the prediction there.
pub struct PlanEffect {
    pub changes: Vec<String>,
    pub placement: Option<Placement>,
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
    /// What gkq's simulation predicts for the job once this fix alone is made (a fix is only
    /// offered when that admits the job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub then: Option<FixOutcome>,
    /// Each change the fix makes, as data, with where the spec holds it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FixChange>,
}

impl Fix {
    fn note(text: String) -> Fix {
        Fix {
            text,
            at: None,
            then: None,
            changes: Vec::new(),
        }
    }
}

/// The job's placement in gkq's simulation once a fix is made.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixOutcome {
    /// `admitted`, or `waiting-for-admission-checks` (quota reserved).
    pub state: PlacementState,
    pub podsets: Vec<PodSetPlacement>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<String>,
    /// Running jobs (`namespace/name`) Kueue then preempts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preempts: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixChange {
    pub text: String,
    pub at: Option<String>,
    #[serde(flatten)]
    pub change: Change,
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
    /// What would admit the job, each checked by gkq's simulation (`placement::remedy`), in
    /// the world after the plan when `after_apply` is given.
    pub remedies: &'a [Remedy],
    /// For a live Workload whose world the plan changes: the job after the plan.
    pub after_apply: Option<PlanEffect>,
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
    let gkq = inputs.predicted.as_ref().map(gkq_says);
    let (agrees, differences) = match (&inputs.predicted, &inputs.observed) {
        (Some(predicted), Some(observed)) if predicted.not_predicted.is_none() => {
            let differences = predicted.differences(observed);
            (Some(differences.is_empty()), differences)
        }
        _ => (None, Vec::new()),
    };
    // Fixes are changes to this spec: when its plan changes the job's world, they are for the
    // job as it will be after that apply.
    let for_fixes = match &inputs.after_apply {
        Some(effect) => effect.placement.as_ref(),
        None => inputs.predicted.as_ref(),
    };
    let (mut fixes, mut notes) = match for_fixes {
        Some(predicted) => placement_fixes(
            predicted,
            inputs.remedies,
            inputs.spec,
            inputs.spec_job.as_deref(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    let after_apply = inputs.after_apply.map(|effect| {
        let now_waiting = inputs
            .predicted
            .as_ref()
            .is_some_and(|p| p.state == PlacementState::Pending);
        if now_waiting
            && effect.placement.as_ref().is_some_and(|p| {
                matches!(
                    p.state,
                    PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks
                )
            })
        {
            notes.push(Fix::note(
                "gkq apply of this spec gets the job its quota (see after apply): nothing else needs to change".to_string(),
            ));
        }
        AfterApply {
            changes: effect.changes,
            gkq: effect.placement.as_ref().map(gkq_says),
        }
    });
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
        after_apply,
        fixes,
        notes,
    }
}

fn gkq_says(p: &Placement) -> GkqSays {
    GkqSays {
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

/// What would let a pending job in: each remedy gkq's simulation checked (`placement::remedy`),
/// cheapest first, with where the spec holds what it changes; and what else the reasons say
/// (work that holds the quota, a queue gkq cannot fix), as notes.
fn placement_fixes(
    predicted: &Placement,
    remedies: &[Remedy],
    spec: &SpecLocations,
    job_at: Option<&str>,
) -> (Vec<Fix>, Vec<Fix>) {
    if predicted.state != PlacementState::Pending {
        return (Vec::new(), Vec::new());
    }
    let fixes: Vec<Fix> = remedies
        .iter()
        .map(|remedy| fix_of(remedy, spec, job_at))
        .collect();
    let cq = predicted.cluster_queue.clone().unwrap_or_default();
    let mut notes: Vec<Fix> = Vec::new();
    for attempt in &predicted.attempts {
        let note = match &attempt.problem {
            AttemptProblem::InUse {
                flavor,
                resource,
                more,
            } => Fix::note(format!(
                "{more} more {resource} is needed in flavor {flavor}, which work holding quota in ClusterQueue {cq} (or its cohort) uses: the job is admitted when that work finishes"
            )),
            AttemptProblem::Ineligible { flavor } if fixes.is_empty() => Fix {
                at: job_at.map(str::to_string),
                ..Fix::note(ineligible_fix(&attempt.text, flavor))
            },
            _ => continue,
        };
        if !notes.iter().any(|n| n.text == note.text) {
            notes.push(note);
        }
    }
    if fixes.is_empty() {
        if predicted.attempts.is_empty()
            && let Some(reason) = &predicted.reason
        {
            notes.push(reason_fix(reason, &cq, spec));
        } else {
            notes.push(Fix::note(
                "no single change gkq checks (quotas, preemption and priority, tolerations, node selectors that pick no flavor, cohorts) admits the job in its simulation"
                    .to_string(),
            ));
        }
    }
    (fixes, notes)
}

/// One remedy in words, each change with where the spec holds it.
fn fix_of(remedy: &Remedy, spec: &SpecLocations, job_at: Option<&str>) -> Fix {
    let changes: Vec<FixChange> = remedy
        .changes
        .iter()
        .map(|change| {
            let at = change_at(change, spec, job_at);
            FixChange {
                text: change_text(change, at.is_some()),
                at,
                change: change.clone(),
            }
        })
        .collect();
    let text = match &changes[..] {
        [one] => one.text.clone(),
        many => many
            .iter()
            .map(|c| match &c.at {
                Some(at) => format!("{} (at {at})", c.text),
                None => c.text.clone(),
            })
            .collect::<Vec<_>>()
            .join("; and "),
    };
    Fix {
        text,
        at: changes.iter().find_map(|c| c.at.clone()),
        then: Some(FixOutcome {
            state: remedy.placement.state,
            podsets: remedy.placement.podsets.clone(),
            admission_checks: remedy.placement.admission_checks.clone(),
            preempts: remedy.placement.preempts.clone(),
        }),
        changes,
    }
}

/// Where the spec writes what a change changes.
fn change_at(change: &Change, spec: &SpecLocations, job_at: Option<&str>) -> Option<String> {
    let queue = |cq: &str| spec.cluster_queues.get(cq).cloned();
    match change {
        Change::Quota {
            cluster_queue,
            flavor,
            resource,
            ..
        } => spec
            .quotas
            .get(&(cluster_queue.clone(), flavor.clone(), resource.clone()))
            .or_else(|| {
                spec.queue_flavors
                    .get(&(cluster_queue.clone(), flavor.clone()))
            })
            .cloned()
            .or_else(|| queue(cluster_queue)),
        Change::WithinClusterQueue { cluster_queue, .. }
        | Change::ReclaimWithinCohort { cluster_queue, .. } => spec
            .preemption
            .get(cluster_queue)
            .cloned()
            .or_else(|| queue(cluster_queue)),
        Change::Cohort { cluster_queue, .. }
        | Change::ResumeClusterQueue { cluster_queue, .. }
        | Change::BestEffortFifo { cluster_queue } => queue(cluster_queue),
        Change::LocalQueue { .. } | Change::ResumeLocalQueue { .. } => spec.local_queues.clone(),
        Change::Priority { .. } | Change::Toleration { .. } | Change::NodeSelector { .. } => {
            job_at.map(str::to_string)
        }
    }
}

/// A change in words; `in_spec`: the spec holds it (else the text says to change it where the
/// object is managed).
fn change_text(change: &Change, in_spec: bool) -> String {
    let outside = |what: &str| {
        if in_spec {
            String::new()
        } else {
            format!(" ({what} is not in this spec: change it where it is managed)")
        }
    };
    match change {
        Change::Quota {
            cluster_queue,
            flavor,
            resource,
            from,
            to,
        } => format!(
            "raise ClusterQueue {cluster_queue}'s {resource} quota in flavor {flavor} from {from} to at least {to}{}",
            outside(&format!("ClusterQueue {cluster_queue}"))
        ),
        Change::Priority {
            class,
            value,
            exists: true,
            from,
        } => format!(
            "raise the job's priority from {from} to {value}: set its `priorityClass` to {class} (a WorkloadPriorityClass of value {value})"
        ),
        Change::Priority {
            class,
            value,
            exists: false,
            from,
        } => format!(
            "raise the job's priority from {from} to {value}: create a WorkloadPriorityClass of value {value} (say `{class}`) and set the job's `priorityClass` to it"
        ),
        Change::WithinClusterQueue {
            cluster_queue,
            from,
            to,
        } => format!(
            "set ClusterQueue {cluster_queue}'s `preemption.withinClusterQueue` from {from} to {to}, so that the job may preempt lower-priority work in the queue{}",
            outside(&format!("ClusterQueue {cluster_queue}"))
        ),
        Change::ReclaimWithinCohort {
            cluster_queue,
            from,
            to,
        } => format!(
            "set ClusterQueue {cluster_queue}'s `preemption.reclaimWithinCohort` from {from} to {to}, so that it takes back the nominal quota queues of its cohort borrow{}",
            outside(&format!("ClusterQueue {cluster_queue}"))
        ),
        Change::Toleration {
            podset,
            flavor,
            key,
            value,
            effect,
        } => format!(
            "untolerated taint {key}={value}:{effect} in flavor {flavor}. Add a toleration for that taint to podset {podset} of the job (spec `tolerations`), if it may run there"
        ),
        Change::NodeSelector {
            podset,
            flavor,
            key,
            from,
            to,
        } => format!(
            "podset {podset}: the job's node selector or affinity excludes the flavor's node labels ({key}={from} matches no flavor of its ClusterQueue): set {key}={to} to run on flavor {flavor}"
        ),
        Change::Cohort {
            cluster_queue,
            cohort,
        } => format!(
            "put ClusterQueue {cluster_queue} in cohort {cohort} (`cohort: {cohort}`): it may then borrow the quota the cohort's other queues leave unused{}",
            outside(&format!("ClusterQueue {cluster_queue}"))
        ),
        Change::LocalQueue {
            namespace,
            name,
            cluster_queue,
        } => format!(
            "LocalQueue {name} doesn't exist: add the LocalQueue to `kueue.localQueues` ({{name: {name}, namespace: {namespace}, clusterQueue: {cluster_queue}}})"
        ),
        Change::ResumeClusterQueue {
            cluster_queue,
            from,
        } => format!(
            "ClusterQueue {cluster_queue} is inactive: it is held (`stopPolicy: {from}`); set its stopPolicy to None to let it admit again{}",
            outside(&format!("ClusterQueue {cluster_queue}"))
        ),
        Change::ResumeLocalQueue {
            namespace,
            name,
            from,
        } => format!(
            "LocalQueue {namespace}/{name} is inactive: it is held (`stopPolicy: {from}`); set its stopPolicy to None"
        ),
        Change::BestEffortFifo { cluster_queue } => format!(
            "ClusterQueue {cluster_queue} is StrictFIFO and its head cannot be admitted: set `queueingStrategy: BestEffortFIFO` so that the job may pass it{}",
            outside(&format!("ClusterQueue {cluster_queue}"))
        ),
    }
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

/// What the reason says when no flavor was even tried and no change gkq checks admits the job:
/// the queue itself is the problem.
fn reason_fix(reason: &str, cq: &str, spec: &SpecLocations) -> Fix {
    let (text, at) = if reason.contains("LocalQueue") && reason.contains("doesn't exist") {
        (
            format!(
                "{reason}: add the LocalQueue to `kueue.localQueues`, pointing at a ClusterQueue"
            ),
            spec.local_queues.clone(),
        )
    } else if reason.contains("inactive") || reason.contains("doesn't exist") {
        (
            format!(
                "{reason}: a ClusterQueue is inactive while a flavor or admission check it names is missing or inactive, or while it is held (`stopPolicy`)"
            ),
            spec.cluster_queues.get(cq).cloned(),
        )
    } else if reason.starts_with("queued behind") {
        (
            format!(
                "{reason}: the job waits its turn; StrictFIFO queues let nothing pass the head, BestEffortFIFO would"
            ),
            spec.cluster_queues.get(cq).cloned(),
        )
    } else {
        (reason.to_string(), None)
    };
    Fix {
        at,
        ..Fix::note(text)
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
        fixes.push(Fix::note(text));
    }
    fixes
}
