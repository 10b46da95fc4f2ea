//! `gkq explain` as text.

use std::fmt::Write as _;

use crate::placement::{PlacementState, PodSetPlacement};
use crate::report::explain::Explanation;

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
    match &e.kueue {
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
    match &e.gkq {
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
    if !e.fixes.is_empty() {
        let _ = writeln!(out, "\nWhat to change:");
        for fix in &e.fixes {
            let _ = writeln!(
                out,
                "  - {}{}",
                fix.text,
                fix.at
                    .as_ref()
                    .map(|at| format!("\n    at {at}"))
                    .unwrap_or_default()
            );
        }
    }
    out
}
