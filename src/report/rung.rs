//! Where each job stands on the capacity ladder (`capacity:`), from live state, for `gkq status`
//! (design docs/design/capacity-ladder.md, section 7): the rung its pods run on, or the rung it
//! waits for and why.
//!
//! The rung follows from the node pool of the job's nodes (`plan::ladder::rung_of_pool`): the
//! pool named by the scheduler's `Scheduled` event (its node, looked up among the nodes read, or
//! GKE's node name `gke-<cluster>-<pool>-...`), else by the autoscaler's `TriggeredScaleUp`
//! event while nodes come. In `mode: kueue` a rung is also its flavor, so a job Kueue admitted
//! has a rung before any event (`plan::ladder::job_rungs` over Kueue's placement). While its
//! pods wait, the reason is the autoscaler's `FailedScaleUp` message, else the
//! ProvisioningRequest's state, else the scale-up under way. A job Kueue has not admitted has
//! no rung line: the plan's prediction says where it would go.

use serde::Serialize;
use serde_json::Value;

use super::status::JobStatus;
use crate::placement::{Placement, PlacementState};
use crate::plan::ladder::{RungRef, job_rungs, rung_of_pool};
use crate::spec::types::Spec;
use crate::vocab::labels::NODE_POOL_LABEL;

/// The Event reasons read: the scheduler's and the cluster autoscaler's.
pub const SCHEDULED: &str = "Scheduled";
pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
pub const FAILED_SCALE_UP: &str = "FailedScaleUp";

/// A job on the ladder, as it lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RungStatus {
    /// The rung the job's pods run on (`landed`), or wait for; `None` in `mode: computeclass`
    /// until GKE picks one of the class's priorities.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rung: Option<RungRef>,
    /// How many rungs the ladder has.
    pub rungs: usize,
    /// The job's pods run (or ran) on `rung`.
    pub landed: bool,
    /// `mode: computeclass`: the class whose priorities GKE walks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_class: Option<String>,
    /// Why the pods wait, while they do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// Each job's [`RungStatus`] (left `None` for a job Kueue has not put on a ladder flavor).
/// `events` and `nodes`: the cluster's Events and Nodes as read.
pub fn set_rungs(spec: &Spec, jobs: &mut [JobStatus], events: &[Value], nodes: &[Value]) {
    if spec.capacity.is_none() {
        return;
    }
    for job in jobs.iter_mut() {
        job.rung = job_rung(spec, job, events, nodes);
    }
}

/// One job's place on the ladder.
fn job_rung(spec: &Spec, job: &JobStatus, events: &[Value], nodes: &[Value]) -> Option<RungStatus> {
    let observed = job.observed.as_ref().filter(|o| admitted(o))?;
    let on_ladder = job_rungs(spec, std::slice::from_ref(observed))
        .into_iter()
        .next()?;
    let event = |reason: &str| {
        events.iter().find(|e| {
            e["reason"] == reason
                && e.pointer("/involvedObject/kind").and_then(Value::as_str) == Some(&job.kind)
                && e.pointer("/involvedObject/name").and_then(Value::as_str) == Some(&job.job)
                && e.pointer("/involvedObject/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default")
                    == job.namespace
        })
    };
    let message = |e: &Value| e["message"].as_str().unwrap_or_default().to_string();
    let rung_in = |text: &str| pool_rung(spec, text, nodes);
    let known = on_ladder.rung.clone();
    let mut status = RungStatus {
        rung: known.clone(),
        rungs: on_ladder.rungs,
        landed: false,
        compute_class: on_ladder.compute_class.clone(),
        waiting: None,
    };
    if runs(job) {
        status.landed = true;
        status.rung = event(SCHEDULED)
            .and_then(|e| rung_in(&message(e)))
            .or(known);
        return Some(status);
    }
    let scale_up = event(TRIGGERED_SCALE_UP).map(message);
    if status.rung.is_none() {
        status.rung = scale_up.as_deref().and_then(rung_in);
    }
    let provisioning = job
        .provisioning_request
        .as_ref()
        .filter(|pr| !pr.message.is_empty())
        .map(|pr| format!("ProvisioningRequest {}: {}", pr.name, pr.message));
    status.waiting = Some(
        event(FAILED_SCALE_UP)
            .map(message)
            .or(provisioning)
            .or(scale_up.map(|m| format!("nodes are being added ({m})")))
            .unwrap_or_else(|| "its nodes are not ready yet".to_string()),
    );
    Some(status)
}

/// Kueue has put the job on a flavor (its quota is reserved).
fn admitted(placement: &Placement) -> bool {
    matches!(
        placement.state,
        PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks
    ) && placement.podsets.iter().any(|p| p.flavor.is_some())
}

/// The job's pods run or have run (its controller says so).
fn runs(job: &JobStatus) -> bool {
    let ray = job
        .ray
        .as_ref()
        .and_then(|r| r.deployment_status.as_deref());
    let progress = job.progress.as_ref().map(|p| p.state.as_str());
    matches!(ray, Some("Running" | "Complete")) || matches!(progress, Some("Running" | "Completed"))
}

/// The ladder rung of the first pool an event's text names: a node of it (the scheduler names
/// nodes), or the pool itself (`{pool 0->4 (max: 4)}`, `gke-<cluster>-<pool>-<hash>-<n>`).
fn pool_rung(spec: &Spec, text: &str, nodes: &[Value]) -> Option<crate::plan::ladder::RungRef> {
    let by_node = nodes.iter().find_map(|n| {
        let name = n.pointer("/metadata/name").and_then(Value::as_str)?;
        if !text.contains(name) {
            return None;
        }
        let pool = n
            .pointer("/metadata/labels")?
            .get(NODE_POOL_LABEL)?
            .as_str()?;
        rung_of_pool(spec, pool)
    });
    by_node.or_else(|| {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .find_map(|word| {
                rung_of_pool(spec, word).or_else(|| {
                    // A GKE node name: `gke-<cluster>-<pool>-<hash>-<n>`.
                    let rest = word
                        .strip_prefix("gke-")?
                        .strip_prefix(spec.cluster.name.as_str())?;
                    let rest = rest.strip_prefix('-')?;
                    let mut parts: Vec<&str> = rest.rsplitn(3, '-').collect();
                    parts.reverse();
                    rung_of_pool(spec, parts.first()?)
                })
            })
    })
}

/// The status line of a job's rung: `rung: on-demand (2 of 4, on-demand, pool p)` or
/// `waiting for rung reserved: <why>`.
pub fn rung_text(status: &RungStatus) -> String {
    let named = status.rung.as_ref().map(|r| {
        let pool = r
            .pool
            .as_deref()
            .map(|p| format!(", pool {p}"))
            .unwrap_or_default();
        (
            r.name.clone(),
            format!("{} of {}, {}{pool}", r.index, status.rungs, r.kind.as_str()),
        )
    });
    match (&status.waiting, named) {
        (None, Some((name, detail))) => format!("rung: {name} ({detail})"),
        (None, None) => "rung: not reported".to_string(),
        (Some(why), Some((name, _))) => format!("waiting for rung {name}: {why}"),
        (Some(why), None) => format!(
            "waiting for a rung of ComputeClass {}: {why}",
            status.compute_class.as_deref().unwrap_or("?")
        ),
    }
}
