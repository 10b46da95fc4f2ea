//! `gkq explain` as text.

use std::fmt::Write as _;

use crate::placement::{PlacementState, PodSetPlacement};
use crate::report::explain::{Explanation, Fix, GkqSays, KueueSays};

fn state_words(state: PlacementState, podsets: &[PodSetPlacement]) -> String {
    let flavors: Vec<String> = podsets
        .iter()
        .filter_map(|p| {
            p.flavor
                .as_ref()
                .map(|f| format!("{} x{} on {f}", p.name, p.count))
        })
        .collect();
    let state = match state {
        PlacementState::Admitted => "admitted",
        PlacementState::WaitingForAdmissionChecks => "quota reserved, waiting for admission checks",
        PlacementState::Pending => "pending",
        PlacementState::Rejected => "rejected",
        PlacementState::Unmanaged => "not managed by Kueue",
        PlacementState::Finished => "finished",
    };
    if flavors.is_empty() {
        state.to_string()
    } else {
        format!("{state} ({})", flavors.join(", "))
    }
}

/// One fix or note: its text, where the spec holds it, what the job does once it is made.
fn write_fix(out: &mut String, fix: &Fix) {
    let _ = writeln!(out, "  - {}", fix.text);
    if let Some(at) = &fix.at {
        let _ = writeln!(out, "    at {at}");
    }
    if let Some(then) = &fix.then {
        let checks = if then.admission_checks.is_empty() {
            String::new()
        } else {
            format!("; admission checks: {}", then.admission_checks.join(", "))
        };
        let preempts = if then.preempts.is_empty() {
            String::new()
        } else {
            format!("; preempts {}", then.preempts.join(", "))
        };
        let _ = writeln!(
            out,
            "    then: {}{checks}{preempts}",
            state_words(then.state, &then.podsets)
        );
    }
}

pub fn to_text(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}{}",
        e.job,
        e.workload
            .as_ref()
            .map(|w| format!(" (Workload {w})"))
            .unwrap_or_default()
    );
    write_kueue_says(&mut out, e.kueue.as_ref());
    write_gkq_reproduces(&mut out, e.gkq.as_ref());
    match e.agrees {
        Some(true) => {
            let _ = writeln!(out, "\ngkq agrees with Kueue.");
        }
        Some(false) => {
            let _ = writeln!(out, "\ngkq disagrees with Kueue:");
            for d in &e.differences {
                let _ = writeln!(out, "  {d}");
            }
        }
        None => {}
    }
    if let Some(after) = &e.after_apply {
        let _ = writeln!(
            out,
            "\nAfter gkq apply of this spec ({}):",
            after.changes.join(", ")
        );
        match &after.gkq {
            Some(g) => {
                let _ = writeln!(
                    out,
                    "  gkq predicts: {}{}",
                    state_words(g.state, &g.podsets),
                    g.reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                );
            }
            None => {
                let _ = writeln!(out, "  its Workload is not in the world after the plan");
            }
        }
    } else if e.workload.is_some() && e.gkq.is_some() {
        let _ = writeln!(
            out,
            "\nThe plan of this spec changes nothing Kueue decides with: this is the live state."
        );
    }
    for (title, fixes) in [("What to change:", &e.fixes), ("Notes:", &e.notes)] {
        if fixes.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{title}");
        for fix in fixes {
            write_fix(&mut out, fix);
        }
    }
    out
}

/// What Kueue says of the job: its Workload's state, conditions, admission checks and
/// ProvisioningRequest.
fn write_kueue_says(out: &mut String, kueue: Option<&KueueSays>) {
    match kueue {
        Some(k) => {
            let _ = writeln!(
                out,
                "\nKueue says: {}{}",
                state_words(k.state, &k.podsets),
                k.cluster_queue
                    .as_ref()
                    .map(|cq| format!(" in ClusterQueue {cq}"))
                    .unwrap_or_default()
            );
            for c in &k.conditions {
                let _ = writeln!(
                    out,
                    "  {}={}{}{}",
                    c.name,
                    c.status,
                    c.reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default(),
                    c.message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                );
            }
            for c in &k.admission_checks {
                let _ = writeln!(
                    out,
                    "  admission check {}: {}{}",
                    c.name,
                    c.status,
                    c.message
                        .as_ref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                );
            }
            if let Some(pr) = &k.provisioning_request {
                let _ = writeln!(
                    out,
                    "  ProvisioningRequest {}: {}{}",
                    pr.name,
                    pr.state.as_str(),
                    if pr.message.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", pr.message)
                    }
                );
            }
        }
        None => {
            let _ = writeln!(
                out,
                "\nKueue says: nothing yet (no Workload: the job is not submitted)"
            );
        }
    }
}

/// What gkq's reproduction of Kueue's decision says, and why.
fn write_gkq_reproduces(out: &mut String, gkq: Option<&GkqSays>) {
    match gkq {
        Some(g) => {
            let _ = writeln!(
                out,
                "\ngkq reproduces: {}{}",
                state_words(g.state, &g.podsets),
                g.cluster_queue
                    .as_ref()
                    .map(|cq| format!(" in ClusterQueue {cq}"))
                    .unwrap_or_default()
            );
            if let Some(why) = &g.not_predicted {
                let _ = writeln!(out, "  {why}");
            }
            if let Some(reason) = g.reason.as_ref().filter(|_| g.attempts.is_empty()) {
                let _ = writeln!(out, "  {reason}");
            }
            for a in &g.attempts {
                let _ = writeln!(out, "  podset {}: {}", a.podset, a.why);
            }
        }
        None => {
            let _ = writeln!(
                out,
                "\ngkq reproduces: nothing (Kueue keeps admitted work; there is nothing to re-predict)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::collections::BTreeMap;

    use super::*;
    use crate::placement::remedy::{NodeResources, Subject, World, remedies};
    use crate::placement::{Cluster, PendingWorkload};
    use crate::report::explain::{ExplainInputs, SpecLocations, explain};

    /// One 4-cpu queue whose running low-priority job holds 3 (policies `Never`), and a job asking
    /// 2, explained (`report::explain`) and shown: each fix (preemption with the priority to set, then the quota raise) points at the spec
    /// line that holds its value and says what the job then does.
    #[test]
    fn each_fix_names_its_spec_line_and_what_the_job_then_does() {
        let objects = [
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                   "metadata": {"name": "f"}, "spec": {"nodeLabels": {"pool": "f"}}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                   "metadata": {"name": "cq"}, "spec": {"namespaceSelector": {},
                   "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                       {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"namespace": "ml", "name": "lq"}, "spec": {"clusterQueue": "cq"}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                   "metadata": {"name": "high"}, "value": 1000}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                   "metadata": {"namespace": "ml", "name": "low", "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"queueName": "lq", "priority": 100, "podSets": [{"name": "main", "count": 1,
                       "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}}]},
                   "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1,
                       "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "3"}}]},
                       "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]}}),
        ];
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"namespace": "ml", "name": "train", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}}});
        let world = World {
            cluster: Cluster::from_objects(&objects).unwrap(),
            jobs: vec![PendingWorkload::from_object(&job).unwrap()],
            released: Vec::new(),
        };
        let predicted = world.placement_of(Subject::Job(0)).unwrap();
        assert_eq!(predicted.state, PlacementState::Pending);
        let found = remedies(&world, Subject::Job(0), &NodeResources::default());
        let spec = SpecLocations {
            quotas: BTreeMap::from([(
                ("cq".to_string(), "f".to_string(), "cpu".to_string()),
                "gkq.yaml:30:24".to_string(),
            )]),
            cluster_queues: BTreeMap::from([("cq".to_string(), "gkq.yaml:25:7".to_string())]),
            jobs: BTreeMap::from([("train".to_string(), "gkq.yaml:40:5".to_string())]),
            ..SpecLocations::default()
        };
        let explanation = explain(ExplainInputs {
            job: "Job ml/train".to_string(),
            workload: None,
            observed: None,
            predicted: Some(predicted),
            provisioning_requests: &[],
            spec: &spec,
            spec_job: Some("gkq.yaml:40:5".to_string()),
            remedies: &found,
            after_apply: None,
        });
        let [preempt, raise] = &explanation.fixes[..] else {
            panic!("two fixes: {:#?}", explanation.fixes);
        };
        assert_eq!(
            preempt.text,
            "set ClusterQueue cq's `preemption.withinClusterQueue` from Never to LowerPriority, so that the job may preempt lower-priority work in the queue (at gkq.yaml:25:7); and raise the job's priority from 0 to 1000: set its `priorityClass` to high (a WorkloadPriorityClass of value 1000) (at gkq.yaml:40:5)"
        );
        assert_eq!(preempt.at.as_deref(), Some("gkq.yaml:25:7"));
        assert_eq!(
            preempt.then.as_ref().map(|t| t.preempts.clone()),
            Some(vec!["ml/low".to_string()])
        );
        assert_eq!(
            raise.text,
            "raise ClusterQueue cq's cpu quota in flavor f from 4 to at least 5"
        );
        assert_eq!(raise.at.as_deref(), Some("gkq.yaml:30:24"));
        let text = to_text(&explanation);
        assert!(
            text.contains("    at gkq.yaml:30:24\n    then: admitted (main x1 on f)\n"),
            "{text}"
        );
        assert!(text.contains("; preempts ml/low"), "{text}");
        assert!(
            explanation.notes[0]
                .text
                .starts_with("1 more cpu is needed in flavor f"),
            "{:#?}",
            explanation.notes
        );
    }
}
