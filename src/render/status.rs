//! `gkq status` as text ([`stack_to_text`]): the revision, checkout and drift lines, then the
//! jobs, node pools and queues ([`to_text`]); and the one line per job printed after an apply
//! ([`summary_lines`]), from the pure [`LiveReport`].

use std::fmt::Write as _;

use super::plan::{orphan_text, orphans_heading};
use crate::placement::{Placement, PlacementState};
use crate::plan::digest::short_digest;
use crate::plan::provenance::short_commit;
use crate::plan::revision::RecordOrigin;
use crate::report::stack::StackStatus;
use crate::report::status::{
    ComparedWith, JobStatus, LiveReport, PlacedComparison, PoolStatus, QueueStatus, headline_flavor,
};
use crate::spec::types::Target;

/// `tpu-group -> on-demand; head, submitter -> default-cpu`.
fn podsets_text(placement: &Placement) -> String {
    let mut by_flavor: Vec<(String, Vec<String>)> = Vec::new();
    for p in &placement.podsets {
        let flavor = p.flavor.clone().unwrap_or_else(|| "(none)".into());
        match by_flavor.iter_mut().find(|(f, _)| *f == flavor) {
            Some((_, names)) => names.push(p.name.clone()),
            None => by_flavor.push((flavor, vec![p.name.clone()])),
        }
    }
    by_flavor
        .into_iter()
        .map(|(f, names)| format!("{} -> {f}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `recorded by the apply of commit 0123456789ab at 2026-11-30T12:00:00Z`.
fn recorded_by(origin: &RecordOrigin) -> String {
    let revision = match &origin.commit {
        Some(commit) => format!("commit {}", short_commit(commit)),
        None => format!("spec {}", short_digest(&origin.spec_digest)),
    };
    format!(
        "recorded by the apply of {revision} at {}",
        origin.applied_at
    )
}

/// What `gkq watch` says of a job Kueue has placed: `placed as predicted (recorded by ...)`.
pub fn comparison_text(comparison: &PlacedComparison) -> String {
    match &comparison.compared_with {
        ComparedWith::Record { origin, .. } if comparison.differences.is_empty() => {
            format!("placed as predicted ({})", recorded_by(origin))
        }
        ComparedWith::Record { origin, .. } => format!(
            "placed differently from the prediction {}: {}",
            recorded_by(origin),
            comparison.differences.join("; ")
        ),
        _ => "placed; no record: gkq did not submit this run of the job, so there is no prediction to compare with".to_string(),
    }
}

fn state_text(job: &JobStatus) -> String {
    if job.is_unmanaged() && job.submitted {
        return "runs outside Kueue: no kueue.x-k8s.io/queue-name label".into();
    }
    let Some(observed) = &job.observed else {
        return if job.submitted {
            "submitted, no Workload yet".into()
        } else {
            "not submitted".into()
        };
    };
    match observed.state {
        PlacementState::Admitted => "admitted".into(),
        PlacementState::Finished => "finished".into(),
        PlacementState::WaitingForAdmissionChecks => format!(
            "quota reserved, waiting for {}",
            if observed.admission_checks.is_empty() {
                "admission checks".to_string()
            } else {
                observed.admission_checks.join(", ")
            }
        ),
        PlacementState::Pending if job.deactivated => "deactivated by Kueue".into(),
        PlacementState::Pending if job.evicted.is_some() => "evicted, queued again".into(),
        PlacementState::Pending => "pending".into(),
        PlacementState::Rejected => "rejected".into(),
        PlacementState::Unmanaged => "not managed by Kueue".into(),
    }
}

/// Per job: `rayjob-1 -> on-demand: admitted; Ray: Running` (`; JobSet: Running` for a
/// JobSet), and a second line for a
/// ProvisioningRequest or a disagreement with the prediction.
pub fn summary_lines(report: &LiveReport) -> Vec<String> {
    let mut lines = Vec::new();
    for job in &report.jobs {
        let mut line = if job.is_unmanaged() {
            format!("{}: {}", job.job, state_text(job))
        } else {
            let flavor = job
                .observed
                .as_ref()
                .and_then(headline_flavor)
                .unwrap_or_else(|| "no flavor yet".into());
            format!("{} -> {flavor}: {}", job.job, state_text(job))
        };
        if let Some(ray) = &job.ray
            && let Some(d) = &ray.deployment_status
        {
            let _ = write!(line, "; Ray: {d}");
        }
        if let Some(progress) = &job.progress {
            let _ = write!(line, "; {}: {}", job.kind, progress.state);
        }
        lines.push(line);
        if let Some(pr) = &job.provisioning_request {
            let mut line = format!("    ProvisioningRequest {}: {}", pr.name, pr.state);
            if !pr.message.is_empty() {
                let _ = write!(line, ": {}", pr.message);
            }
            lines.push(line);
        }
        if job.agrees == Some(false) {
            let prediction = match &job.compared_with {
                ComparedWith::Record { origin, .. } => {
                    format!("the prediction {}", recorded_by(origin))
                }
                _ => "gkq's prediction".to_string(),
            };
            lines.push(format!(
                "    differs from {prediction}: {}",
                job.differences.join("; ")
            ));
        }
    }
    lines
}

pub fn to_text(report: &LiveReport) -> String {
    let mut out = String::new();
    write_cluster(&mut out, report);
    if !report.node_pools.is_empty() {
        write_node_pools(&mut out, &report.node_pools);
    }
    if !report.jobs.is_empty() {
        let _ = writeln!(
            out,
            "\nJobs (observed from Kueue's Workloads; predicted by gkq when applied for the jobs Kueue placed, now for the others)"
        );
        for job in &report.jobs {
            write_job(&mut out, job);
            write_job_prediction(&mut out, job);
        }
    }
    for q in &report.cluster_queues {
        write_cluster_queue(&mut out, q);
    }
    for note in &report.notes {
        let _ = writeln!(out, "\nNote: {note}");
    }
    out
}

/// The cluster's line, and what the local target simulates.
fn write_cluster(out: &mut String, report: &LiveReport) {
    let c = &report.cluster_status;
    let _ = writeln!(
        out,
        "\nCluster {} ({}, {}): {}",
        c.name,
        c.project,
        c.location,
        c.status.as_deref().unwrap_or("does not exist")
    );
    if let Some(sim) = &report.simulated {
        let _ = writeln!(
            out,
            "Simulated: the local target{} ({})\n           this cluster's Kubernetes state: {}",
            sim.state_dir
                .as_deref()
                .map(|d| format!(" in {d}"))
                .unwrap_or_default(),
            sim.settings,
            sim.kubernetes_state
        );
    }
}

/// The node pools' table.
fn write_node_pools(out: &mut String, node_pools: &[PoolStatus]) {
    let _ = writeln!(out, "\nNode pools");
    let width = node_pools.iter().map(|p| p.name.len()).max().unwrap_or(4);
    for p in node_pools {
        let nodes = p.nodes.map_or("?".to_string(), |n| {
            format!("{n} node{}", if n == 1 { "" } else { "s" })
        });
        let mut extra = match p.autoscaling {
            Some((min, max)) => format!("autoscaling {min}-{max}"),
            None => "fixed size".to_string(),
        };
        if p.flex_start {
            extra.push_str(", flex-start");
        }
        if p.queued_provisioning {
            extra.push_str(", queued provisioning");
        }
        let _ = writeln!(
            out,
            "  {:width$}  {:18}  {:>8}  {extra}",
            p.name, p.machine_type, nodes
        );
    }
}

/// A job's line: where Kueue placed it and its state, then what Kueue, its admission checks and
/// its controller say of it.
fn write_job(out: &mut String, job: &JobStatus) {
    let flavor = job
        .observed
        .as_ref()
        .and_then(headline_flavor)
        .unwrap_or_else(|| "-".into());
    let _ = writeln!(out, "  {} -> {flavor}: {}", job.job, state_text(job));
    if let Some(o) = &job.observed
        && o.podsets.iter().any(|p| p.flavor.is_some())
    {
        let _ = writeln!(out, "      podsets:    {}", podsets_text(o));
    }
    if let Some(rung) = &job.rung {
        let _ = writeln!(
            out,
            "      ladder:     {}",
            crate::report::rung::rung_text(rung)
        );
    }
    if let Some(evicted) = &job.evicted {
        let _ = writeln!(out, "      evicted:    {evicted}");
    } else if let Some(o) = &job.observed
        && o.state == PlacementState::Pending
        && let Some(reason) = &o.reason
    {
        let _ = writeln!(out, "      reason:     {reason}");
    }
    for check in &job.admission_checks {
        let _ = writeln!(
            out,
            "      check:      {} {}{}",
            check.name,
            check.state,
            if check.message.is_empty() {
                String::new()
            } else {
                format!(": {}", check.message)
            }
        );
    }
    if let Some(pr) = &job.provisioning_request {
        let _ = writeln!(
            out,
            "      provreq:    {} {}{}",
            pr.name,
            pr.state,
            if pr.message.is_empty() {
                String::new()
            } else {
                format!(": {}", pr.message)
            }
        );
    }
    if let Some(ray) = &job.ray
        && let Some(d) = &ray.deployment_status
    {
        let _ = writeln!(
            out,
            "      ray:        {d}{}{}",
            ray.job_status
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default(),
            ray.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        );
    }
    if let Some(progress) = &job.progress {
        let label = format!("{}:", job.kind.to_lowercase());
        let _ = writeln!(
            out,
            "      {label:<11} {}{}{}",
            progress.state,
            if progress.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", progress.detail)
            },
            progress
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        );
    }
}

/// The prediction a job is compared with, and the verdict.
fn write_job_prediction(out: &mut String, job: &JobStatus) {
    if job.compared_with == ComparedWith::NoRecord {
        let _ = writeln!(
            out,
            "      predicted:  no record: gkq did not submit this run of the job, so there is no prediction to compare with"
        );
    } else if let Some(why) = job
        .predicted
        .as_ref()
        .and_then(|p| p.not_predicted.as_ref())
    {
        let _ = writeln!(out, "      predicted:  {why}");
    } else if let Some(p) = &job.predicted {
        let mut verdict = match job.agrees {
            Some(true) => "agrees".to_string(),
            Some(false) => format!("DIFFERS: {}", job.differences.join("; ")),
            None => "nothing observed yet".to_string(),
        };
        if let ComparedWith::Record { origin, .. } = &job.compared_with {
            let _ = write!(verdict, " ({})", recorded_by(origin));
        }
        let _ = writeln!(
            out,
            "      predicted:  {} ({}) — {verdict}",
            podsets_text(p),
            match p.state {
                PlacementState::Admitted => "admitted".to_string(),
                PlacementState::WaitingForAdmissionChecks =>
                    format!("waits for {}", p.admission_checks.join(", ")),
                PlacementState::Pending =>
                    format!("pending: {}", p.reason.as_deref().unwrap_or("no reason")),
                other => format!("{other:?}").to_lowercase(),
            }
        );
    }
}

/// A ClusterQueue's line and its usage table.
fn write_cluster_queue(out: &mut String, q: &QueueStatus) {
    let _ = writeln!(
        out,
        "\nClusterQueue {}{}: {} reserving, {} admitted, {} pending",
        q.name,
        match q.active {
            Some(true) => " (active)",
            Some(false) => " (INACTIVE)",
            None => "",
        },
        q.reserving_workloads,
        q.admitted_workloads,
        q.pending_workloads
    );
    let fw = q
        .usage
        .iter()
        .map(|u| u.flavor.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let rw = q
        .usage
        .iter()
        .map(|u| u.resource.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let _ = writeln!(
        out,
        "  {:fw$}  {:rw$}  {:>12}  {:>12}  {:>14}",
        "FLAVOR", "RESOURCE", "RESERVED", "ADMITTED", "QUOTA"
    );
    for u in &q.usage {
        let _ = writeln!(
            out,
            "  {:fw$}  {:rw$}  {:>12}  {:>12}  {:>14}",
            u.flavor,
            u.resource,
            u.reserved,
            u.admitted,
            u.nominal.as_deref().unwrap_or("-")
        );
    }
}

/// The whole of `gkq status` as text: revision, checkout and drift, then the live report.
pub fn stack_to_text(status: &StackStatus) -> String {
    let simulated = status.target == Target::Local;
    let mut out = String::new();
    out.push_str(&format!(
        "Cluster  {}{}\n",
        status.cluster,
        if simulated {
            " (target local: simulated)"
        } else {
            ""
        }
    ));
    let applied = match (&status.applied, &status.applied_labels) {
        (Some(a), _) => {
            let what = match &a.commit {
                Some(c) => format!(
                    "commit {}, spec {}",
                    short_commit(c),
                    short_digest(&a.spec_digest)
                ),
                None => format!("spec {} (not from a commit)", short_digest(&a.spec_digest)),
            };
            format!(
                "{what}{}, applied {} by {} with gkq {}",
                a.env
                    .as_ref()
                    .map(|e| format!(" (env {e})"))
                    .unwrap_or_default(),
                a.applied_at,
                a.applied_by,
                a.gkq_version
            )
        }
        (None, Some(labels)) => format!(
            "spec {}{} (from the cluster's labels; Kubernetes not reachable for the details)",
            labels.spec_digest,
            labels
                .commit
                .as_ref()
                .map(|c| format!(", commit {c}"))
                .unwrap_or_default()
        ),
        (None, None) => "none recorded (no gkq apply has finished on this cluster)".to_string(),
    };
    out.push_str(&format!("Applied  {applied}\n"));
    let local = &status.local;
    let checkout = match (&local.head, local.clean) {
        (Some(head), Some(clean)) => format!(
            "HEAD {}{}{}",
            short_commit(head),
            local
                .branch
                .as_ref()
                .map(|b| format!(" on {b}"))
                .unwrap_or_default(),
            if clean {
                ""
            } else {
                ", with uncommitted changes to the spec"
            }
        ),
        _ => "not in git".to_string(),
    };
    out.push_str(&format!(
        "Local    {} (spec {}), {checkout}\n",
        local.spec,
        short_digest(&local.spec_digest)
    ));
    let relation = match status.spec_matches_applied {
        Some(true) => "the local spec is the one applied".to_string(),
        Some(false) => {
            let mut text = "the local spec differs from the one applied".to_string();
            match (local.ahead_of_applied, local.behind_applied) {
                (Some(a), Some(b)) if a > 0 || b > 0 => text.push_str(&format!(
                    " (HEAD is {a} commit(s) ahead of and {b} behind the applied commit)"
                )),
                _ => {}
            }
            text
        }
        None => "nothing applied to compare with".to_string(),
    };
    out.push_str(&format!("         {relation}\n"));
    let drift = if status.drift.changes {
        format!("{} Run `gkq plan` to see them.", status.drift.summary)
    } else if !status.orphans.is_empty() {
        status.drift.summary.clone()
    } else {
        "none: live state matches the spec".to_string()
    };
    out.push_str(&format!("Drift    {drift}\n"));
    if let Some(command) = &status.prune_command {
        out.push_str(&format!(
            "\n{}:\n",
            orphans_heading(command, &|c| format!("`{c}`"))
        ));
        for orphan in &status.orphans {
            out.push_str(&format!("  - {}\n", orphan_text(orphan)));
        }
    }
    out.push_str(&to_text(&status.live));
    out
}

/// The lines printed after an apply that submitted jobs: where each job landed.
pub fn landed_text(report: &LiveReport) -> String {
    let mut text = String::new();
    match &report.simulated {
        Some(sim) => {
            let _ = writeln!(
                text,
                "\nWhere the jobs landed (simulated by the local target: {}):",
                sim.settings
            );
        }
        None => {
            let _ = writeln!(
                text,
                "\nWhere the jobs landed (read from Kueue's Workloads):"
            );
        }
    }
    for line in summary_lines(report) {
        let _ = writeln!(text, "  {line}");
    }
    let _ = writeln!(text, "Follow them with `gkq status`.");
    text
}
