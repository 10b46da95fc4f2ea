//! Where each job stands on the capacity ladder (`capacity:`), from live state, for `gkq status`
//! (design docs/design/capacity-ladder.md, section 7): the rung its pods run on, or the rung it
//! waits for and why.
//!
//! The rung follows from the node pool of the job's nodes (`plan::ladder::rung_of_pool`): the
//! pool named by the scheduler's `Scheduled` event (its node, looked up among the nodes read, or
//! GKE's node name `gke-<cluster>-<pool>-...`), else by the autoscaler's `TriggeredScaleUp`
//! event while nodes come. In `mode: kueue` a rung is also its flavor, so a job Kueue admitted
//! has a rung before any event (`plan::ladder::job_rungs` over Kueue's placement). While its
//! pods wait, the reason is the autoscaler's `FailedScaleUp` (else `NotTriggerScaleUp`) message,
//! else the ProvisioningRequest's state, else the scale-up under way (the events GKE's cluster
//! autoscaler writes: docs/gke-facts.md L9). A job Kueue has not admitted has
//! no rung line: the plan's prediction says where it would go.

use serde::Serialize;
use serde_json::Value;

use crate::placement::{Placement, PlacementState};
use crate::plan::ladder::{RungRef, job_rungs, rung_of_pool};
use crate::spec::types::Spec;
use crate::vocab::labels::NODE_POOL_LABEL;

/// The Event reasons read: the scheduler's and the cluster autoscaler's.
pub const SCHEDULED: &str = "Scheduled";
pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
pub const FAILED_SCALE_UP: &str = "FailedScaleUp";
/// The cluster autoscaler found no node group whose scale-up would make the pod fit.
pub const NOT_TRIGGER_SCALE_UP: &str = "NotTriggerScaleUp";

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

/// A job as the rung report needs it: what Kueue made of it, whether its pods run, and its
/// ProvisioningRequest's state, from `gkq status`'s report (`super::status::set_rungs`) or
/// watch's job timeline.
#[derive(Debug, Clone, Copy)]
pub struct LadderJob<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    /// Kueue's placement, read from the job's Workload.
    pub observed: Option<&'a Placement>,
    /// The job's controller says its pods run or have run.
    pub runs: bool,
    /// The job's ProvisioningRequest, `name: message`, when it has one with a message.
    pub provisioning: Option<&'a str>,
}

/// One job's place on the ladder (`None`: not on a ladder flavor, or not admitted yet).
pub fn rung_status(
    spec: &Spec,
    job: &LadderJob<'_>,
    events: &[Value],
    nodes: &[Value],
) -> Option<RungStatus> {
    let observed = job.observed.filter(|o| admitted(o))?;
    let on_ladder = job_rungs(spec, std::slice::from_ref(observed))
        .into_iter()
        .next()?;
    let event = |reason: &str| {
        events.iter().find(|e| {
            e["reason"] == reason
                && e.pointer("/involvedObject/kind").and_then(Value::as_str) == Some(job.kind)
                && e.pointer("/involvedObject/name").and_then(Value::as_str) == Some(job.name)
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
    if job.runs || observed.state == PlacementState::Finished {
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
    status.waiting = Some(
        event(FAILED_SCALE_UP)
            .or_else(|| event(NOT_TRIGGER_SCALE_UP))
            .map(message)
            .or(job.provisioning.map(str::to_string))
            .or(scale_up.map(|m| format!("nodes are being added ({m})")))
            .unwrap_or_else(|| "its nodes are not ready yet".to_string()),
    );
    Some(status)
}

/// Kueue has put the job on a flavor (its quota is reserved), or had until the job finished.
fn admitted(placement: &Placement) -> bool {
    matches!(
        placement.state,
        PlacementState::Admitted
            | PlacementState::WaitingForAdmissionChecks
            | PlacementState::Finished
    ) && placement.podsets.iter().any(|p| p.flavor.is_some())
}

/// Whether a RayJob's `jobDeploymentStatus`, or a JobSet's or Job's progress state
/// (`super::status::JobProgress`), says its pods run or have run.
pub fn pods_run(ray_deployment: Option<&str>, progress: Option<&str>) -> bool {
    matches!(ray_deployment, Some("Running" | "Complete"))
        || matches!(progress, Some("Running" | "Completed"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PodSetPlacement;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn spec(mode: &str) -> Spec {
        let capacity = json!({
            "mode": mode, "clusterQueue": "cq", "quota": {"google.com/tpu": 4},
            "accelerator": {"machineType": "ct6e-standard-4t", "topology": "2x2"},
            "rungs": [
                {"name": "res", "kind": "reservation", "reservation": {"name": "r", "slices": 1}},
                {"name": "od", "kind": "on-demand", "slices": 1},
            ],
        });
        let mut spec = Spec {
            capacity: Some(serde_json::from_value(capacity).unwrap()),
            ..Default::default()
        };
        spec.cluster.name = "c".into();
        spec
    }

    fn admitted_on(flavor: &str) -> Placement {
        Placement {
            job: "j".into(),
            namespace: "default".into(),
            kind: "RayJob".into(),
            cluster_queue: Some("cq".into()),
            podsets: vec![PodSetPlacement {
                name: "w".into(),
                count: 1,
                flavor: Some(flavor.into()),
                flavors: BTreeMap::from([("google.com/tpu".into(), flavor.into())]),
            }],
            state: PlacementState::Admitted,
            reason: None,
            admission_checks: Vec::new(),
            reclaim: None,
            preempts: Vec::new(),
            preempted_by: None,
            not_predicted: None,
            attempts: Vec::new(),
        }
    }

    fn event(reason: &str, message: &str) -> Value {
        json!({"reason": reason, "message": message,
            "involvedObject": {"kind": "RayJob", "name": "j", "namespace": "default"}})
    }

    fn job<'a>(observed: &'a Placement, runs: bool) -> LadderJob<'a> {
        LadderJob {
            kind: "RayJob",
            name: "j",
            namespace: "default",
            observed: Some(observed),
            runs,
            provisioning: None,
        }
    }

    #[test]
    fn kueue_mode_a_job_waits_on_its_flavors_rung_with_the_autoscalers_reason() {
        let placed = admitted_on("res");
        let failed = [event(FAILED_SCALE_UP, "simulated stockout")];
        let status = rung_status(&spec("kueue"), &job(&placed, false), &failed, &[]).unwrap();
        assert_eq!(status.rung.as_ref().unwrap().name, "res");
        assert_eq!(
            rung_text(&status),
            "waiting for rung res: simulated stockout"
        );
        let other = admitted_on("default-cpu");
        assert_eq!(
            rung_status(&spec("kueue"), &job(&other, true), &[], &[]),
            None
        );
    }

    #[test]
    fn computeclass_mode_the_rung_is_the_pool_of_the_jobs_nodes() {
        let placed = admitted_on("ladder");
        let cc = spec("computeclass");
        let waiting = rung_status(&cc, &job(&placed, false), &[], &[]).unwrap();
        assert_eq!(waiting.rung, None);
        assert!(rung_text(&waiting).starts_with("waiting for a rung of ComputeClass c-ladder: "));
        // The scheduler names a node; GKE's node names hold the pool's.
        let scheduled = [event(
            SCHEDULED,
            "Successfully assigned default/j to gke-c-default-pool-1a2b3c4d-0001, gke-c-gk-c-ladder-2-5e6f7a8b-0002",
        )];
        let landed = rung_status(&cc, &job(&placed, true), &scheduled, &[]).unwrap();
        assert_eq!(
            rung_text(&landed),
            "rung: od (2 of 2, on-demand, pool gk-c-ladder-2)"
        );
        // A node read from the cluster names its pool by label.
        let node =
            json!({"metadata": {"name": "n1", "labels": {NODE_POOL_LABEL: "gk-c-ladder-1"}}});
        let scheduled = [event(SCHEDULED, "Successfully assigned default/j to n1")];
        let landed = rung_status(&cc, &job(&placed, true), &scheduled, &[node]).unwrap();
        assert_eq!(landed.rung.unwrap().name, "res");
    }
}
