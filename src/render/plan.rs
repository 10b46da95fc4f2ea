//! Plan renderers: text (Terraform-style), JSON, markdown.

use std::io::{self, Write};

use serde_json::Value;

use super::{BOLD, CYAN, DIM, GREEN, RED, YELLOW, kind_style};
use crate::diff::{ChangeEffect, FieldChange};
use crate::placement::held::HeldQuota;
use crate::plan::conflicts::Resolution;
use crate::plan::ladder::{FallbackKind, JobRung, NextFlavor, RungRef};
use crate::plan::workload_changes::{WorkloadChange, WorkloadState};
use crate::plan::{Action, ActionKind, Notice, NoticeSeverity, Orphan, Plan, ReplaceStrategy};
use crate::spec::ladder::RungKind;

/// Writes the plan for people: one block per change with its glyph, reason, field changes,
/// API calls and unified diff; notices; the summary line. A plan without changes is the one
/// summary line (plus notices, if any). ANSI styles are always written; see the module docs.
pub fn write_text(plan: &Plan, out: &mut dyn Write) -> io::Result<()> {
    if let Some(line) = variables_line(plan, &|text| text.to_string()) {
        writeln!(out, "{line}\n")?;
    }
    if plan.has_changes() {
        writeln!(
            out,
            "gkq will perform the following actions on cluster {}:\n",
            plan.cluster.name()
        )?;
        for action in plan.changes() {
            write_action(action, out)?;
        }
    }
    writeln!(out, "{BOLD}{}{BOLD:#}", plan.summary)?;
    if plan.summary.blocked > 0 {
        writeln!(
            out,
            "{RED}{} action(s) are blocked and will be refused by apply (see \"blocked\" above).{RED:#}",
            plan.summary.blocked
        )?;
    }
    let forced = plan.forced_conflicts().count();
    if forced > 0 {
        writeln!(
            out,
            "{RED}{forced} field(s) another field manager owns would be taken: apply refuses without --force-conflicts (see \"conflict\" above).{RED:#}"
        )?;
    }
    write_orphans(plan, out)?;
    write_placements(plan, out)?;
    if !plan.workload_changes.is_empty() {
        writeln!(
            out,
            "\n{BOLD}Live workloads{BOLD:#} (predicted before and after this plan with Kueue's rules):"
        )?;
        for change in &plan.workload_changes {
            writeln!(out, "  {}", workload_change_text(change))?;
        }
    }
    if !plan.disruptions.is_empty() {
        writeln!(
            out,
            "\n{RED}This plan stops running work; apply refuses it without --allow-disruption:{RED:#}"
        )?;
        for d in &plan.disruptions {
            writeln!(out, "  {RED}{}{RED:#} {}:", d.addr, disruption_verb(d))?;
            for job in &d.jobs {
                writeln!(out, "    - {job}")?;
            }
        }
    }
    // The spec's warnings and notes were printed on stderr, with their source, when it was
    // loaded: the text shows the plan's own notices.
    for notice in plan.notices.iter().filter(|n| n.severity.is_none()) {
        match &notice.addr {
            Some(addr) => writeln!(out, "{DIM}Note: {addr}: {}{DIM:#}", notice.message)?,
            None => writeln!(out, "{DIM}Note: {}{DIM:#}", notice.message)?,
        }
        if let Some(help) = &notice.help {
            writeln!(out, "{DIM}  help: {help}{DIM:#}")?;
        }
    }
    Ok(())
}

/// What the orphans hold, per ClusterQueue and flavor: `16 google.com/tpu, 32 cpu on
/// cluster-queue/dws`; `None` when they hold nothing.
pub fn holds_text(holds: &[HeldQuota]) -> Option<String> {
    let mut by_place: Vec<(String, Vec<String>)> = Vec::new();
    for held in holds {
        let place = format!("{}/{}", held.cluster_queue, held.flavor);
        let amount = format!("{} {}", held.amount, held.resource);
        match by_place.iter_mut().find(|(p, _)| *p == place) {
            Some((_, amounts)) => amounts.push(amount),
            None => by_place.push((place, vec![amount])),
        }
    }
    (!by_place.is_empty()).then(|| {
        by_place
            .into_iter()
            .map(|(place, amounts)| format!("{} on {place}", amounts.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// One orphan for people: `ray.rayjob/default/train-2 (RayJob): holds 16 google.com/tpu on
/// cluster-queue/dws`.
pub fn orphan_text(orphan: &Orphan) -> String {
    match holds_text(&orphan.holds) {
        Some(holds) => format!("{} ({}): holds {holds}", orphan.address, orphan.kind),
        None => format!("{} ({})", orphan.address, orphan.kind),
    }
}

/// The heading of the orphans, with the command that deletes them.
pub fn orphans_heading(command: &str, code: &dyn Fn(&str) -> String) -> String {
    format!(
        "Left in place: gkq manages these, but the spec no longer names them; {} deletes them",
        code(command)
    )
}

/// The resources gkq owns outside the spec that the plan leaves in place, with what they hold.
fn write_orphans(plan: &Plan, out: &mut dyn Write) -> io::Result<()> {
    let Some(command) = plan.prune_command() else {
        return Ok(());
    };
    let heading = orphans_heading(&command, &|c| format!("`{c}`"));
    writeln!(out, "\n{YELLOW}{heading}:{YELLOW:#}")?;
    for orphan in &plan.orphans {
        writeln!(out, "  {YELLOW}-{YELLOW:#} {}", orphan_text(orphan))?;
    }
    Ok(())
}

fn state_text(p: &crate::placement::Placement) -> String {
    use crate::placement::PlacementState as S;
    if p.not_predicted.is_some() {
        return "not predicted".into();
    }
    let mut text: String = match p.state {
        S::Admitted => "admitted".into(),
        S::WaitingForAdmissionChecks => format!(
            "quota reserved, waits for {}",
            p.admission_checks.join(", ")
        ),
        S::Pending => "pending".into(),
        S::Rejected => "rejected by Kueue".into(),
        S::Unmanaged => "not managed by Kueue (no queue)".into(),
        S::Finished => "finished".into(),
    };
    if !p.preempts.is_empty() {
        text.push_str(&format!(" after preempting {}", p.preempts.join(", ")));
    }
    if let Some(preemptor) = &p.preempted_by {
        text.push_str(&format!(" (preempted by {preemptor})"));
    }
    text
}

/// A Workload's state in a few words: `pending`, `admitted on on-demand`, ...
fn workload_state_text(state: &WorkloadState) -> String {
    use crate::placement::PlacementState as S;
    let mut flavors: Vec<&str> = state
        .podsets
        .iter()
        .filter_map(|p| p.flavor.as_deref())
        .collect();
    flavors.dedup();
    let on = if flavors.is_empty() {
        String::new()
    } else {
        format!(" on {}", flavors.join(", "))
    };
    match state.state {
        S::Admitted => format!("admitted{on}"),
        S::WaitingForAdmissionChecks => format!("quota reserved{on}, waiting for admission checks"),
        S::Pending => "pending".into(),
        S::Rejected => "rejected".into(),
        S::Unmanaged => "not managed by Kueue".into(),
        S::Finished => "finished".into(),
    }
}

/// One line per live Workload the plan affects: `ns/x: pending -> admitted on on-demand`.
pub fn workload_change_text(change: &WorkloadChange) -> String {
    let before = workload_state_text(&change.before);
    let after = workload_state_text(&change.after);
    let mut text = format!("{}: ", change.workload);
    if let Some(why) = &change.after.not_predicted {
        text.push_str(&format!("{before}; {why}"));
    } else if let Some(preemptor) = &change.after.preempted_by {
        text.push_str(&format!("{before}, would be preempted by {preemptor}"));
        if change.after.state != crate::placement::PlacementState::Pending {
            text.push_str(&format!(", then {after}"));
        }
    } else if let Some(note) = &change.note {
        text.push_str(&format!("{before}; {note}"));
    } else if before != after {
        text.push_str(&format!("{before} -> {after}"));
    } else {
        text.push_str(&before);
    }
    let reason = |state: &WorkloadState| {
        state
            .reason
            .clone()
            .filter(|_| state.state == crate::placement::PlacementState::Pending)
    };
    match (reason(&change.before), reason(&change.after)) {
        (Some(from), Some(to)) if from != to => {
            text.push_str(&format!(", reason changes from \"{from}\" to \"{to}\""))
        }
        (None, Some(to)) => text.push_str(&format!(" ({to})")),
        _ => {}
    }
    if let Some(job) = &change.job {
        text.push_str(&format!(" [{job}]"));
    }
    text
}

/// Flex-start nodes are lent, not kept: say when GKE takes them back.
fn reclaim_text(reclaim: &crate::placement::dws::Reclaim) -> String {
    format!(
        "{} nodes are reclaimed {} after they are provisioned ({})",
        reclaim.node_pool,
        crate::vocab::duration::format_seconds(reclaim.after_seconds),
        reclaim.limited_by.describe()
    )
}

/// The capacity-ladder rung the plan predicts for a placed job, if it is on a ladder flavor.
fn job_rung_of<'a>(plan: &'a Plan, p: &crate::placement::Placement) -> Option<&'a JobRung> {
    if p.preempted_by.is_some() {
        return None;
    }
    plan.rungs
        .iter()
        .find(|r| r.namespace == p.namespace && r.job == p.job)
}

/// `reserved (reservation)`, `dws (flex-start-queued, pool dws-pool, budget 3d)`.
fn rung_words(rung: &RungRef) -> String {
    let mut details = vec![rung.kind.as_str().to_string()];
    if let Some(pool) = &rung.pool {
        details.push(format!("pool {pool}"));
    }
    if let Some(budget) = rung.budget_seconds {
        details.push(format!(
            "budget {}",
            crate::vocab::duration::format_seconds(budget)
        ));
    }
    format!("{} ({})", rung.name, details.join(", "))
}

/// The flavor Kueue gives later jobs: `rung 3 dws`, `rung 4 spot (flavor spot-2)`, `flavor
/// ladder-2 (ComputeClass tpu-ladder-2, from rung 4 spot)`.
fn next_words(next: &NextFlavor) -> String {
    let rung = format!("rung {} {}", next.rung.index, next.rung.name);
    match &next.compute_class {
        Some(class) => format!("flavor {} (ComputeClass {class}, from {rung})", next.flavor),
        None if next.flavor == next.rung.name => rung,
        None => format!("{rung} (flavor {})", next.flavor),
    }
}

/// Which rung of the capacity ladder serves a job, what happens when it is out of capacity, and
/// where later jobs go (docs/design/capacity-ladder.md, section 6).
pub fn rung_lines(r: &JobRung) -> Vec<String> {
    let mut lines = Vec::new();
    let out_of_capacity = match &r.rung {
        Some(rung) => {
            lines.push(format!(
                "rung {} of {}: {}",
                rung.index,
                r.rungs,
                rung_words(rung)
            ));
            format!("if {} is out of capacity", rung.name)
        }
        None => {
            let tries: Vec<String> = r.tries.iter().map(rung_words).collect();
            lines.push(format!(
                "rung: not predicted (GKE decides at scale-up; gkq cannot see capacity): ComputeClass {} tries {}",
                r.compute_class.as_deref().unwrap_or("-"),
                tries.join(", then ")
            ));
            "if none of them can be obtained".to_string()
        }
    };
    let rung_name = r.rung.as_ref().map(|x| x.name.as_str()).unwrap_or("-");
    let then = match r.fallback.kind {
        FallbackKind::WaitOnRung => {
            let mut text = format!(
                "the job stays admitted on {rung_name} and its pods wait (Kueue falls through on quota, not capacity)"
            );
            if r.rung.as_ref().is_some_and(|x| x.kind == RungKind::Spot) {
                text.push_str("; Spot nodes can be reclaimed at any time (30-second notice)");
            }
            text
        }
        FallbackKind::NodeByNode => {
            "nodes come one by one as flex-start capacity appears (gkq does not predict when)".to_string()
        }
        FallbackKind::Queue => "its ProvisioningRequest waits until DWS obtains every VM of the slice at once (gkq does not predict when)".to_string(),
        FallbackKind::GkePriorities => {
            "the pods stay pending (whenUnsatisfiable: DoNotScaleUp)".to_string()
        }
    };
    lines.push(format!("{out_of_capacity}: {then}"));
    lines.push(match (&r.fallback.next, r.fallback.unbounded_quota) {
        (_, true) => format!(
            "later jobs: no later rung is reached, {}'s quota is unbounded",
            r.flavor
        ),
        (Some(next), false) => format!(
            "later jobs: {} once {}'s quota is used",
            next_words(next),
            r.flavor
        ),
        (None, false) => "later jobs: no rung follows".to_string(),
    });
    lines
}

/// Quota as a bar: live use, this plan's use, free.
fn quota_bar(u: &crate::placement::FlavorUsage) -> String {
    const WIDTH: usize = 20;
    let nominal = u.nominal.nanos().max(0);
    let cells = |q: i128| -> usize {
        if nominal == 0 {
            return 0;
        }
        ((q.max(0) * WIDTH as i128 + nominal - 1) / nominal).min(WIDTH as i128) as usize
    };
    let live = cells(u.used_live.saturating_add(u.used_queued).nanos());
    let planned = cells(u.total().nanos()).saturating_sub(live);
    let free = WIDTH.saturating_sub(live + planned);
    format!(
        "[{}{}{}]",
        "#".repeat(live),
        "+".repeat(planned),
        ".".repeat(free)
    )
}

/// The placement section: where Kueue will put each job this plan submits, and the quota bars
/// that explain why a job fell back to a later flavor.
fn write_placements(plan: &Plan, out: &mut dyn Write) -> io::Result<()> {
    if plan.placements.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\n{BOLD}Placement{BOLD:#} (predicted with Kueue's rules; `gkq status` shows what Kueue did):"
    )?;
    for p in &plan.placements {
        writeln!(out, "  {}/{} -> {}", p.namespace, p.job, state_text(p))?;
        for ps in &p.podsets {
            writeln!(
                out,
                "      {:<12} x{:<3} {}",
                ps.name,
                ps.count,
                ps.flavor.as_deref().unwrap_or("-")
            )?;
        }
        if let Some(why) = &p.not_predicted {
            writeln!(out, "      {YELLOW}{why}{YELLOW:#}")?;
        } else if let Some(reason) = p
            .reason
            .as_ref()
            .filter(|_| p.state == crate::placement::PlacementState::Pending)
        {
            writeln!(out, "      {DIM}{reason}{DIM:#}")?;
        }
        if let Some(reclaim) = &p.reclaim {
            writeln!(out, "      {}", reclaim_text(reclaim))?;
        }
        for line in job_rung_of(plan, p).map(rung_lines).unwrap_or_default() {
            writeln!(out, "      {line}")?;
        }
    }
    let interesting: Vec<_> = plan
        .quota
        .iter()
        .filter(|u| !u.used_plan.is_zero() || !u.used_live.is_zero())
        .collect();
    if !interesting.is_empty() {
        writeln!(out, "  Quota ({DIM}# live  + this plan  . free{DIM:#}):")?;
        for u in interesting {
            writeln!(
                out,
                "    {:<40} {} live {} + plan {} of {}",
                format!("{}/{} {}", u.cluster_queue, u.flavor, u.resource),
                quota_bar(u),
                u.used_live.saturating_add(u.used_queued),
                u.used_plan,
                u.nominal
            )?;
        }
    }
    Ok(())
}

/// [`write_text`] into a string, with or without colour.
pub fn to_text(plan: &Plan, color: bool) -> String {
    let mut buffer = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_text(plan, &mut buffer);
    let text = String::from_utf8_lossy(&buffer).into_owned();
    if color { text } else { super::strip(&text) }
}

fn headline(action: &Action) -> String {
    let what = match action.kind {
        ActionKind::Create => "will be created",
        ActionKind::Update => "will be updated in-place",
        ActionKind::Replace => match action.replace_strategy {
            Some(ReplaceStrategy::CreateThenDelete) => "must be replaced (create before destroy)",
            _ => "must be replaced (destroy, then create)",
        },
        ActionKind::Delete => "will be destroyed",
        ActionKind::NoOp => "is up to date",
    };
    format!("# {} {what}", action.addr)
}

fn write_action(action: &Action, out: &mut dyn Write) -> io::Result<()> {
    let style = kind_style(action.kind);
    writeln!(out, "  {BOLD}{}{BOLD:#}", headline(action))?;
    writeln!(
        out,
        "{style}{:>5}{style:#} {BOLD}{}{BOLD:#}",
        action.kind.glyph(),
        action.addr
    )?;
    writeln!(out, "        {DIM}{}{DIM:#}", action.reason)?;
    if let Some(blocked) = &action.blocked {
        writeln!(out, "        {RED}! blocked: {blocked}{RED:#}")?;
    }
    for conflict in &action.conflicts {
        let style = match conflict.resolution {
            Resolution::Left => YELLOW,
            Resolution::Force => RED,
        };
        writeln!(
            out,
            "        {style}! conflict: {}{style:#}",
            conflict.text()
        )?;
    }
    for change in &action.changes {
        write_change(change, out)?;
    }
    if !action.steps.is_empty() {
        let steps: Vec<String> = action.steps.iter().map(ToString::to_string).collect();
        writeln!(
            out,
            "        {DIM}API calls: {}{DIM:#}",
            steps.join(", then ")
        )?;
    }
    if !action.diff.is_empty() {
        writeln!(out)?;
        write_diff(&action.diff, "        ", out)?;
    }
    writeln!(out)
}

const SHORT: usize = 60;

fn short(value: &Option<Value>) -> String {
    crate::diff::text::one_line(value.as_ref(), SHORT)
}

/// One changed field. The API method is not repeated here: the action's `API calls` line names
/// each call once.
fn write_change(change: &FieldChange, out: &mut dyn Write) -> io::Result<()> {
    let (glyph, style) = match (&change.before, &change.after) {
        (None, Some(_)) => ("+", GREEN),
        (Some(_), None) => ("-", RED),
        _ => ("~", YELLOW),
    };
    let how = match &change.effect {
        ChangeEffect::InPlace(_) => String::new(),
        // The reason is in the action's own reason line; repeating it per field is noise.
        ChangeEffect::Replace(_) => format!(" {RED}# forces replacement{RED:#}"),
    };
    let mut line = |text: &str| {
        writeln!(
            out,
            "      {style}{glyph}{style:#} {}: {text}{how}",
            change.path
        )
    };
    let marked = |v: &Option<Value>| v.as_ref().is_some_and(crate::diff::sensitive::is_marker);
    if marked(&change.before) && marked(&change.after) {
        return line("(sensitive value changed)");
    }
    let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).map(str::to_string);
    if crate::diff::kube::is_script_digest(&change.path) {
        let digest = |v: &Option<Value>| {
            text(v)
                .map(|d| d.chars().take(12).collect::<String>())
                .unwrap_or_else(|| "(absent)".into())
        };
        return line(&format!(
            "the training script changed (sha256 {} -> {})",
            digest(&change.before),
            digest(&change.after)
        ));
    }
    // The diff spells quantities alike on both sides (`diff::normalize::spell_quantities_alike`):
    // shown as plain text, as the spec writes them.
    let quantity = |v: &Option<Value>| match v {
        Some(Value::String(s)) => crate::diff::normalize::parse_quantity(s).map(|_| s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    if let (Some(before), Some(after)) = (quantity(&change.before), quantity(&change.after)) {
        return line(&format!("{before} -> {after}"));
    }
    // A long text (a training script): its size here, its lines once in the diff below.
    let long =
        |v: &Option<Value>| text(v).is_some_and(|t| crate::diff::text::is_long_text(&t, SHORT));
    let textual = |v: &Option<Value>| v.is_none() || text(v).is_some();
    if (long(&change.before) || long(&change.after))
        && textual(&change.before)
        && textual(&change.after)
    {
        let size = crate::diff::text::text_change_size(
            &text(&change.before).unwrap_or_default(),
            &text(&change.after).unwrap_or_default(),
        );
        return line(&format!("text changed, {size} (diff below)"));
    }
    line(&format!(
        "{} -> {}",
        short(&change.before),
        short(&change.after)
    ))
}

/// Colours a unified diff line by line, with an indent.
fn write_diff(diff: &str, indent: &str, out: &mut dyn Write) -> io::Result<()> {
    for line in diff.lines() {
        let style = if line.starts_with("+++") || line.starts_with("---") {
            BOLD
        } else if line.starts_with('+') {
            GREEN
        } else if line.starts_with('-') {
            RED
        } else if line.starts_with("@@") {
            CYAN
        } else {
            anstyle::Style::new()
        };
        writeln!(out, "{indent}{style}{line}{style:#}")?;
    }
    Ok(())
}

/// The plan as pretty JSON, the shape `schemas/plan.schema.json` documents.
pub fn to_json(plan: &Plan) -> String {
    // A Plan holds only strings, numbers and JSON values: serialisation cannot fail.
    serde_json::to_string_pretty(plan).unwrap_or_default()
}

/// Markdown for a pull-request comment: the summary, replaced and destroyed resources called out,
/// a table of changes, and each diff in a collapsible `<details>` block.
pub fn to_markdown(plan: &Plan) -> String {
    let mut md = String::new();
    md.push_str(&format!("### gkq plan for `{}`\n\n", plan.cluster.name()));
    if let Some(line) = variables_line(plan, &|text| format!("`{text}`")) {
        md.push_str(&format!("{line}\n\n"));
    }
    md.push_str(&format!("**{}**\n\n", plan.summary));
    append_spec_warnings(plan, &mut md);
    if !plan.has_changes() {
        append_orphans(plan, &mut md);
        append_notices(plan, &mut md);
        append_provenance(plan, &mut md);
        return md;
    }
    let destructive: Vec<&Action> = plan
        .changes()
        .filter(|a| matches!(a.kind, ActionKind::Replace | ActionKind::Delete))
        .collect();
    if !destructive.is_empty() {
        md.push_str("> [!WARNING]\n> This plan destroys or recreates resources:\n");
        for action in &destructive {
            let verb = if action.kind == ActionKind::Replace {
                "replaced"
            } else {
                "destroyed"
            };
            md.push_str(&format!(
                "> - `{}` is **{verb}**: {}\n",
                action.addr,
                one_line(&action.reason)
            ));
        }
        md.push('\n');
    }
    if !plan.disruptions.is_empty() {
        md.push_str(
            "> [!CAUTION]\n> This plan stops running work (apply needs `--allow-disruption`):\n",
        );
        for d in &plan.disruptions {
            md.push_str(&format!(
                "> - `{}` {}: {}\n",
                d.addr,
                disruption_verb(d),
                d.jobs.join(", ")
            ));
        }
        md.push('\n');
    }
    append_conflicts(plan, &mut md);
    let blocked: Vec<&Action> = plan.changes().filter(|a| a.blocked.is_some()).collect();
    if !blocked.is_empty() {
        md.push_str("> [!CAUTION]\n> Blocked: apply will refuse these actions:\n");
        for action in blocked {
            md.push_str(&format!(
                "> - `{}`: {}\n",
                action.addr,
                one_line(action.blocked.as_deref().unwrap_or(""))
            ));
        }
        md.push('\n');
    }
    md.push_str("| | Resource | Action | Why |\n|---|---|---|---|\n");
    for action in plan.changes() {
        md.push_str(&format!(
            "| `{}` | `{}` | {} | {} |\n",
            action.kind.glyph(),
            action.addr,
            action.kind.verb(),
            table_cell(&action.reason)
        ));
    }
    md.push('\n');
    append_orphans(plan, &mut md);
    append_placements(plan, &mut md);
    if !plan.workload_changes.is_empty() {
        md.push_str("#### Live workloads (predicted before and after this plan)\n\n");
        for change in &plan.workload_changes {
            md.push_str(&format!("- {}\n", one_line(&workload_change_text(change))));
        }
        md.push('\n');
    }
    for action in plan.changes() {
        md.push_str(&format!(
            "<details><summary><code>{}</code>: {}</summary>\n\n",
            action.addr,
            action.kind.verb()
        ));
        if !action.steps.is_empty() {
            let steps: Vec<String> = action.steps.iter().map(|s| format!("`{s}`")).collect();
            md.push_str(&format!("API calls: {}\n\n", steps.join(", then ")));
        }
        if !action.diff.is_empty() {
            md.push_str(&format!("```diff\n{}```\n\n", fence_safe(&action.diff)));
        }
        md.push_str("</details>\n\n");
    }
    append_notices(plan, &mut md);
    append_provenance(plan, &mut md);
    md
}

/// Fields other field managers own: those apply takes (it needs `--force-conflicts`) called
/// out, those left to their managers listed.
fn append_conflicts(plan: &Plan, md: &mut String) {
    for (resolution, heading) in [
        (
            Resolution::Force,
            "> [!CAUTION]\n> Field-manager conflicts this plan takes by force (apply needs `--force-conflicts`):\n",
        ),
        (
            Resolution::Left,
            "> [!NOTE]\n> Field-manager conflicts this plan leaves to their managers (apply does not set these fields):\n",
        ),
    ] {
        let lines: Vec<String> = plan
            .changes()
            .flat_map(|a| a.conflicts.iter().map(move |c| (a, c)))
            .filter(|(_, c)| c.resolution == resolution)
            .map(|(a, c)| format!("> - `{}`: {}\n", a.addr, one_line(&c.text())))
            .collect();
        if !lines.is_empty() {
            md.push_str(heading);
            md.extend(lines);
            md.push('\n');
        }
    }
}

/// Where Kueue will put each job the plan submits: one row per podset, then the quota each
/// flavor has left, so a reviewer sees why a job falls back to a later flavor.
fn append_placements(plan: &Plan, md: &mut String) {
    if plan.placements.is_empty() {
        return;
    }
    md.push_str("#### Placement (predicted with Kueue's rules)\n\n");
    md.push_str("| Job | Podset | Count | Flavor | State |\n|---|---|---|---|---|\n");
    for p in &plan.placements {
        let mut state = match (&p.reason, p.state) {
            _ if p.not_predicted.is_some() => table_cell(p.not_predicted.as_deref().unwrap_or("")),
            (Some(reason), crate::placement::PlacementState::Pending) => {
                format!("{}: {}", state_text(p), table_cell(reason))
            }
            _ => state_text(p),
        };
        if let Some(reclaim) = &p.reclaim {
            state.push_str(&format!("; {}", table_cell(&reclaim_text(reclaim))));
        }
        for line in job_rung_of(plan, p).map(rung_lines).unwrap_or_default() {
            state.push_str(&format!("; {}", table_cell(&line)));
        }
        for (i, ps) in p.podsets.iter().enumerate() {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                if i == 0 {
                    format!("`{}/{}`", p.namespace, p.job)
                } else {
                    String::new()
                },
                ps.name,
                ps.count,
                ps.flavor
                    .as_deref()
                    .map(|f| format!("`{f}`"))
                    .unwrap_or_else(|| "-".into()),
                if i == 0 { state.as_str() } else { "" },
            ));
        }
    }
    md.push('\n');
    let used: Vec<_> = plan
        .quota
        .iter()
        .filter(|u| !u.used_plan.is_zero() || !u.used_live.is_zero())
        .collect();
    if !used.is_empty() {
        md.push_str("| ClusterQueue / flavor | Resource | Live | This plan | Quota |\n|---|---|---|---|---|\n");
        for u in used {
            md.push_str(&format!(
                "| `{}/{}` | {} | {} | {} | {} |\n",
                u.cluster_queue,
                u.flavor,
                u.resource,
                u.used_live.saturating_add(u.used_queued),
                u.used_plan,
                u.nominal
            ));
        }
        md.push('\n');
    }
}

/// `Variables set outside the spec: CLUSTER_NAME from the environment (GKQ_VAR_CLUSTER_NAME), ZONE
/// from --var`, when any was: a value that does not come from the reviewed spec changes what
/// the plan targets, so the header says so. Names only, never values. `code` formats a name.
fn variables_line(plan: &Plan, code: &dyn Fn(&str) -> String) -> Option<String> {
    use crate::spec::vars::{ValueSource, env_name};
    let sources = &plan.provenance.as_ref()?.spec.variable_sources;
    if sources.is_empty() {
        return None;
    }
    let items: Vec<String> = sources
        .iter()
        .map(|v| match v.source {
            ValueSource::Cli => format!("{} from {}", code(&v.name), code("--var")),
            ValueSource::Environment => format!(
                "{} from the environment ({})",
                code(&v.name),
                code(&env_name(&v.name))
            ),
        })
        .collect();
    Some(format!(
        "Variables set outside the spec: {}",
        items.join(", ")
    ))
}

/// One line saying what the plan was made from, so a reviewer can tell which commit and spec a
/// comment describes.
fn append_provenance(plan: &Plan, md: &mut String) {
    let Some(provenance) = &plan.provenance else {
        return;
    };
    let spec = &provenance.spec;
    let mut parts = vec![
        format!("gkq {}", provenance.gkq_version),
        format!("target `{}`", target_name(provenance.target)),
        match &spec.env {
            Some(env) => format!("spec `{}` (env `{env}`)", spec.path),
            None => format!("spec `{}`", spec.path),
        },
        format!(
            "digest `{}`",
            crate::plan::digest::short_digest(&spec.digest)
        ),
    ];
    match &spec.commit {
        Some(commit) => parts.push(format!(
            "commit `{}`",
            crate::plan::provenance::short_commit(commit)
        )),
        None => parts.push("not from a commit".to_string()),
    }
    if !md.ends_with("\n\n") {
        md.push('\n');
    }
    md.push_str(&format!("<sub>{}</sub>\n", parts.join(" · ")));
}

fn target_name(target: crate::spec::types::Target) -> &'static str {
    match target {
        crate::spec::types::Target::Gcp => "gcp",
        crate::spec::types::Target::Local => "local",
    }
}

/// The spec's warnings, where a reviewer looks first: the validation a local run prints on
/// stderr, which a pull request's comment would otherwise leave out.
fn append_spec_warnings(plan: &Plan, md: &mut String) {
    let warnings: Vec<&Notice> = plan
        .notices
        .iter()
        .filter(|n| n.severity == Some(NoticeSeverity::Warning))
        .collect();
    if warnings.is_empty() {
        return;
    }
    md.push_str("> [!WARNING]\n> The spec has warnings:\n");
    for warning in warnings {
        md.push_str(&format!("> - {}\n", notice_markdown(warning)));
    }
    md.push('\n');
}

/// The orphans: what each holds, and the command that deletes them.
fn append_orphans(plan: &Plan, md: &mut String) {
    let Some(command) = plan.prune_command() else {
        return;
    };
    md.push_str(&format!(
        "#### {}\n\n",
        orphans_heading(&command, &|c| format!("`{c}`"))
    ));
    md.push_str("| Resource | Kind | Holds |\n|---|---|---|\n");
    for orphan in &plan.orphans {
        md.push_str(&format!(
            "| `{}` | {} | {} |\n",
            orphan.address,
            orphan.kind,
            holds_text(&orphan.holds)
                .map(|h| table_cell(&h))
                .unwrap_or_else(|| "-".to_string())
        ));
    }
    md.push('\n');
}

/// One notice as a markdown list item's text: the spec's with its severity, place and help.
fn notice_markdown(notice: &Notice) -> String {
    let mut text = String::new();
    match notice.severity {
        Some(NoticeSeverity::Warning) => text.push_str("**warning**: "),
        Some(NoticeSeverity::Note) => text.push_str("**note**: "),
        None => {}
    }
    if let Some(at) = &notice.at {
        text.push_str(&format!("`{at}`: "));
    }
    if let Some(addr) = &notice.addr {
        text.push_str(&format!("`{addr}`: "));
    }
    text.push_str(&one_line(&notice.message));
    if let Some(path) = &notice.path {
        text.push_str(&format!(" (at `{path}`)"));
    }
    if let Some(help) = &notice.help {
        text.push_str(&format!(" Help: {}", one_line(help)));
    }
    text
}

/// One of the spec's warnings or notes that a plan carries, on one line as diagnostics print
/// them without their snippet: `gkq.yaml:83:12: note: ... (at jobs[0].queue)`, then its help.
/// `None` for the plan's own notices.
pub fn spec_notice_line(notice: &Notice) -> Option<String> {
    let severity = match notice.severity? {
        NoticeSeverity::Warning => "warning",
        NoticeSeverity::Note => "note",
    };
    let mut text = String::new();
    if let Some(at) = &notice.at {
        text.push_str(&format!("{at}: "));
    }
    text.push_str(&format!("{severity}: {}", notice.message));
    if let Some(path) = &notice.path {
        text.push_str(&format!(" (at {path})"));
    }
    if let Some(help) = &notice.help {
        text.push_str(&format!("\n  help: {help}"));
    }
    Some(text)
}

/// The notes: the spec's notes and the plan's own notices (the spec's warnings are above).
fn append_notices(plan: &Plan, md: &mut String) {
    let notes: Vec<&Notice> = plan
        .notices
        .iter()
        .filter(|n| n.severity != Some(NoticeSeverity::Warning))
        .collect();
    if notes.is_empty() {
        return;
    }
    md.push_str("Notes:\n");
    for notice in notes {
        md.push_str(&format!("- {}\n", notice_markdown(notice)));
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn table_cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

/// A diff never closes the code fence it sits in.
fn fence_safe(diff: &str) -> String {
    let mut text = diff.replace("```", "`\u{200b}``");
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// What a disruption does to its jobs: a queue's delete or stop says per job what Kueue does
/// (an admitted job may keep running); anything else stops them.
fn disruption_verb(d: &crate::plan::disruption::Disruption) -> &'static str {
    use crate::addr::ResourceKind;
    match d.addr.kind {
        ResourceKind::ClusterQueue | ResourceKind::LocalQueue => "affects",
        _ => "would stop",
    }
}

#[cfg(test)]
mod tests {
    use super::state_text;
    use crate::placement::{Placement, PlacementState};

    fn placement(job: &str, state: PlacementState) -> Placement {
        Placement {
            job: job.to_string(),
            namespace: "default".to_string(),
            kind: "Job".to_string(),
            cluster_queue: Some("cq".to_string()),
            podsets: Vec::new(),
            state,
            reason: None,
            admission_checks: Vec::new(),
            reclaim: None,
            preempts: Vec::new(),
            preempted_by: None,
            not_predicted: None,
            attempts: Vec::new(),
        }
    }

    fn rung(
        name: &str,
        index: usize,
        kind: crate::spec::ladder::RungKind,
    ) -> crate::plan::ladder::RungRef {
        crate::plan::ladder::RungRef {
            name: name.into(),
            index,
            kind,
            pool: Some(format!("{name}-pool")),
            budget_seconds: kind.is_flex().then_some(3 * 86_400),
        }
    }

    #[test]
    fn rung_lines_name_the_rung_its_fallback_and_where_later_jobs_go() {
        use crate::plan::ladder::{Fallback, FallbackKind, JobRung, NextFlavor};
        use crate::spec::ladder::RungKind;
        let on_demand = JobRung {
            namespace: "default".into(),
            job: "a".into(),
            flavor: "on-demand".into(),
            rungs: 4,
            rung: Some(rung("on-demand", 2, RungKind::OnDemand)),
            compute_class: None,
            tries: Vec::new(),
            fallback: Fallback {
                kind: FallbackKind::WaitOnRung,
                next: Some(NextFlavor {
                    flavor: "dws".into(),
                    rung: rung("dws", 3, RungKind::FlexStartQueued),
                    compute_class: None,
                }),
                unbounded_quota: false,
            },
        };
        assert_eq!(
            super::rung_lines(&on_demand),
            [
                "rung 2 of 4: on-demand (on-demand, pool on-demand-pool)",
                "if on-demand is out of capacity: the job stays admitted on on-demand and its pods wait (Kueue falls through on quota, not capacity)",
                "later jobs: rung 3 dws once on-demand's quota is used",
            ]
        );
        let class = JobRung {
            rung: None,
            compute_class: Some("c-ladder".into()),
            tries: vec![
                rung("reserved", 1, RungKind::Reservation),
                rung("flex", 2, RungKind::FlexStart),
            ],
            fallback: Fallback {
                kind: FallbackKind::GkePriorities,
                next: None,
                unbounded_quota: false,
            },
            ..on_demand.clone()
        };
        let lines = super::rung_lines(&class);
        assert!(lines[0].starts_with("rung: not predicted"), "{lines:?}");
        assert!(
            lines[0].ends_with(
                "ComputeClass c-ladder tries reserved (reservation, pool reserved-pool), then flex (flex-start, pool flex-pool, budget 3d)"
            ),
            "{lines:?}"
        );
        assert_eq!(
            lines[1],
            "if none of them can be obtained: the pods stay pending (whenUnsatisfiable: DoNotScaleUp)"
        );
        assert_eq!(lines[2], "later jobs: no rung follows");
    }

    #[test]
    fn state_names_preemptor_and_victims() {
        let mut high = placement("high", PlacementState::Admitted);
        high.preempts = vec!["default/low".to_string()];
        assert_eq!(state_text(&high), "admitted after preempting default/low");
        let mut low = placement("low", PlacementState::Pending);
        low.preempted_by = Some("default/high".to_string());
        assert_eq!(state_text(&low), "pending (preempted by default/high)");
        assert_eq!(
            state_text(&placement("plain", PlacementState::Admitted)),
            "admitted"
        );
    }

    fn change_line(change: &crate::diff::FieldChange) -> String {
        let mut out = Vec::new();
        super::write_change(change, &mut out).unwrap();
        crate::render::strip(&String::from_utf8(out).unwrap())
    }

    fn in_place(
        path: &str,
        before: serde_json::Value,
        after: serde_json::Value,
    ) -> crate::diff::FieldChange {
        use crate::diff::{ChangeEffect, FieldChange, UpdateMethod};
        FieldChange {
            path: path.into(),
            before: Some(before),
            after: Some(after),
            effect: ChangeEffect::InPlace(UpdateMethod::ServerSideApply),
        }
    }

    #[test]
    fn a_quantity_change_shows_values_in_one_spelling() {
        let text = change_line(&in_place(
            "spec.resourceGroups[0].flavors[1].resources[0].nominalQuota",
            serde_json::json!("40"),
            serde_json::json!(48),
        ));
        assert!(text.contains("nominalQuota: 40 -> 48"), "{text}");
    }

    #[test]
    fn field_lines_leave_the_api_method_to_the_api_calls_line() {
        let text = change_line(&in_place(
            "metadata.labels.team",
            serde_json::json!("ml"),
            serde_json::json!("research"),
        ));
        assert_eq!(text.trim(), r#"~ metadata.labels.team: "ml" -> "research""#);
    }

    #[test]
    fn a_long_text_is_named_with_its_size_not_cut_twice() {
        let before = "import time\nimport ray\nfrom ray import train\nfrom ray.train import ScalingConfig\nprint(1)\n";
        let after = "import time\nimport ray\nfrom ray import train\nfrom ray.train import ScalingConfig\nprint(2)\nprint(3)\n";
        let text = change_line(&in_place(
            r#"data["train.py"]"#,
            serde_json::json!(before),
            serde_json::json!(after),
        ));
        assert_eq!(
            text.trim(),
            r#"~ data["train.py"]: text changed, +2 -1 lines (5 -> 6 lines) (diff below)"#
        );
        assert!(!text.contains("import"), "{text}");
    }

    #[test]
    fn the_script_digest_is_one_line() {
        use crate::diff::{ChangeEffect, FieldChange};
        let text = change_line(&FieldChange {
            path: r#"metadata.annotations["gkq.dev/script-sha256"]"#.into(),
            before: Some(serde_json::json!("a".repeat(64))),
            after: Some(serde_json::json!("b".repeat(64))),
            effect: ChangeEffect::Replace("the training script changed".into()),
        });
        assert_eq!(
            text.trim(),
            format!(
                r#"~ metadata.annotations["gkq.dev/script-sha256"]: the training script changed (sha256 {} -> {}) # forces replacement"#,
                "a".repeat(12),
                "b".repeat(12)
            )
        );
    }
}
