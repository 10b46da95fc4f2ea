//! `gkq apply`: plan, confirm, and converge.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use clap::Args;

use super::Exit;
use super::SpecArgs;
use super::gitops::{LockArgs, SubmitArgs};
use super::plan::{PlanFlags, PlanFormat, options, render_plan};
use super::target::TargetArgs;
use crate::ops::apply::{Consent, stale_error};
use crate::ops::converge::{Applied, ApplyChoices, ApplyFront, PlanSource, Ready};
use crate::ops::{ApplyReport, Outcome, Sink};
use crate::plan::{Plan, PlanOptions, Preview};
use crate::render::apply::{JsonLinesSink, TerminalSink};

/// `SPEC` may also be a plan file written by `gkq plan --out FILE`: then exactly that plan is
/// applied, or refused if the spec or live state changed since. The plan names its spec relative
/// to the directory it was made in; elsewhere, `--spec PATH` names it, or `--no-spec-check`
/// applies the plan checking only live state.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    /// With a plan file: the spec it was made from, when it is not at the path the plan names
    /// (relative to where `gkq plan --out` ran). It must still be the spec planned: gkq plans
    /// again from it and refuses any difference.
    #[arg(long = "spec", value_name = "PATH", conflicts_with = "no_spec_check")]
    pub plan_spec: Option<PathBuf>,
    /// With a plan file: apply it without reading its spec, checking only that live state is
    /// what the plan was made against (the output says so). A plan that writes sensitive values
    /// or installs Kueue still needs its spec.
    #[arg(long)]
    pub no_spec_check: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub flags: PlanFlags,
    /// Apply without asking for confirmation.
    #[arg(long)]
    pub auto_approve: bool,
    /// Take over fields that another field manager owns instead of failing on the conflict.
    #[arg(long)]
    pub force_conflicts: bool,
    /// Apply even if the plan deletes or replaces capacity that admitted or running jobs use.
    #[arg(long)]
    pub allow_disruption: bool,
    /// Progress as JSON lines on stdout (the plan first, then one event per line) instead of text
    /// on stderr.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: ApplyFormat,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub submit: SubmitArgs,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    /// The cluster's name, to confirm that it and everything gkq created in it is deleted.
    #[arg(long, value_name = "CLUSTER")]
    pub confirm: String,
    /// Destroy even when jobs are admitted or running in the cluster (they are stopped).
    #[arg(long)]
    pub allow_disruption: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// How apply reports: text for people, or JSON lines for machines (markdown is a plan format).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum ApplyFormat {
    #[default]
    Text,
    Json,
}

/// The plan as the first JSON line of `apply -o json`: `{"event": "plan", "plan": {...}}`.
pub fn print_plan_line(plan: &Plan) -> anyhow::Result<()> {
    let line = serde_json::json!({"event": "plan", "plan": plan});
    super::output::print_stdout(&format!("{line}\n"))
}

fn confirm(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "refusing to apply without confirmation: stdin is not a terminal (pass --auto-approve)"
        );
    }
    eprintln!("\n{question}\n  Only 'yes' will be accepted to approve.\n");
    eprint!("  Enter a value: ");
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

/// The sink has already reported each action and the totals; this only sets the exit code and
/// says what to do after a partial failure.
pub fn summarize(report: &ApplyReport) -> Exit {
    if report.interrupted() {
        let count =
            |f: fn(&Outcome) -> bool| report.results.iter().filter(|r| f(&r.outcome)).count();
        eprintln!(
            "Apply interrupted: {} change(s) made, {} not started. Run `gkq plan` to see what is left (and any GKE operation still running), then `gkq apply` again.",
            count(|o| matches!(o, Outcome::Succeeded)),
            count(|o| matches!(o, Outcome::Interrupted | Outcome::Skipped { .. })),
        );
        return Exit::Interrupted;
    }
    if report.is_success() {
        Exit::Ok
    } else {
        summarize_failure(
            report,
            "fix the cause and run `gkq apply` again, or `gkq plan` to see what is left",
        );
        Exit::Failed
    }
}

/// How many actions failed or were skipped, and what to do next.
pub fn summarize_failure(report: &ApplyReport, next: &str) {
    let failed = report
        .results
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Succeeded | Outcome::Unchanged))
        .count();
    eprintln!("{failed} action(s) failed or were skipped; {next}.");
}

pub async fn run(args: &ApplyArgs) -> anyhow::Result<Exit> {
    if args.plan_spec.is_some() || args.no_spec_check {
        anyhow::bail!(
            "--spec and --no-spec-check are for applying a plan file (`gkq apply PLANFILE`), and {} is a spec",
            args.spec.spec.display()
        );
    }
    run_with(
        &args.spec,
        &args.target,
        options(&args.flags),
        &Choices {
            auto_approve: args.auto_approve,
            force_conflicts: args.force_conflicts,
            allow_disruption: args.allow_disruption,
            output: args.output,
            lock: &args.lock,
            submit_wait: args.submit.submit_wait,
        },
    )
    .await
}

/// What the person applying chose, besides the spec and the target.
struct Choices<'a> {
    auto_approve: bool,
    force_conflicts: bool,
    allow_disruption: bool,
    output: ApplyFormat,
    lock: &'a LockArgs,
    submit_wait: std::time::Duration,
}

async fn run_with(
    spec: &SpecArgs,
    target: &TargetArgs,
    opts: PlanOptions,
    choices: &Choices<'_>,
) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = super::load_valid(spec);
    let Some((loaded, desired)) = ok else {
        super::output::print_diagnostics(&diags, &sources);
        return Ok(Exit::Failed);
    };
    let notes = super::output::concerning(&diags, &sources, |_| true);
    apply_valid(spec, target, (loaded, desired), opts, choices, notes).await
}

/// Plans a valid spec, shows the plan, asks, and applies it under the locks
/// (`ops::converge::apply`).
async fn apply_valid(
    spec: &SpecArgs,
    target: &TargetArgs,
    (loaded, desired): (crate::spec::Loaded, crate::model::DesiredState),
    mut opts: PlanOptions,
    choices: &Choices<'_>,
    spec_notes: String,
) -> anyhow::Result<Exit> {
    let json = choices.output == ApplyFormat::Json;
    // Nobody reviews the plan before it is applied: each object is written once, not dry-run
    // first (the plan shows the fields gkq sets; the server's defaults are known after apply).
    if choices.auto_approve {
        opts.preview = Preview::Lists;
    }
    // Forcing is planned, so that the plan shows what it takes (and whom it stops).
    opts.force_conflicts = choices.force_conflicts;
    let front = Front {
        json,
        shown: if json { Shown::JsonLine } else { Shown::Text },
        auto_approve: choices.auto_approve,
        consent: Consent {
            force_conflicts: choices.force_conflicts,
            allow_disruption: choices.allow_disruption,
        },
        spec_notes,
        sink: if opts.destroy && !json {
            Box::new(TerminalSink::stderr().destroying())
        } else {
            sink(json)
        },
    };
    let source = spec.source();
    let plan_source = PlanSource::Spec {
        spec: &source,
        loaded,
        desired,
        opts,
    };
    converge_with(
        plan_source,
        &target.options(),
        (choices.lock, choices.submit_wait),
        &front,
    )
    .await
}

/// Where apply progress goes: JSON lines on stdout, or text on stderr.
pub fn sink(json: bool) -> Box<dyn Sink> {
    if json {
        Box::new(JsonLinesSink::new(std::io::stdout()))
    } else {
        Box::new(TerminalSink::stderr())
    }
}

/// Runs `ops::converge::apply` with this front and says how it ended; the exit code.
pub async fn converge_with(
    source: PlanSource<'_>,
    target: &crate::ops::session::TargetOptions,
    (lock, submit_wait): (&LockArgs, std::time::Duration),
    front: &Front,
) -> anyhow::Result<Exit> {
    let apply_choices = ApplyChoices {
        submit_wait,
        lock_timeout: lock.lock_timeout,
        follow_jobs: !front.json,
        record_unchanged: true,
        interrupt: Default::default(),
        lock_holder: None,
    };
    let applied = crate::ops::converge::apply(source, target, &apply_choices, front).await?;
    match applied {
        Applied::NoChanges => Ok(Exit::Ok),
        Applied::Refused(why) => anyhow::bail!("{why}"),
        Applied::Cancelled => {
            eprintln!("Apply cancelled; nothing was changed.");
            Ok(Exit::Failed)
        }
        Applied::Executed {
            report,
            landed,
            lock_lost,
            ..
        } => {
            if lock_lost {
                eprintln!(
                    "warning: the cluster's lock was no longer this apply's when it ended (another holder took it over); the applied revision was not recorded. Run `gkq plan` to see the state."
                );
            }
            if let Some(landed) = landed {
                let _ = super::output::print_stdout(&crate::render::status::landed_text(&landed));
            }
            Ok(summarize(&report.map_err(stale_error)?))
        }
    }
}

/// How the front shows the plan once it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// The plan's text (or its summary when it changes nothing) on stdout.
    Text,
    /// The plan as the first JSON line (`-o json`).
    JsonLine,
    /// Only the summary of a plan without changes (a saved plan, already reviewed).
    SummaryIfUnchanged,
}

/// The terminal (or JSON lines) front of an apply.
pub struct Front {
    pub json: bool,
    pub shown: Shown,
    pub auto_approve: bool,
    /// What the flags consent to.
    pub consent: Consent,
    /// The spec's warnings and notes, one line each ([`super::output::concerning`]): printed
    /// once the plan is made, if it writes something (they say what the writes do and risk); an
    /// apply that changes nothing, or only deletes, has no result they concern.
    pub spec_notes: String,
    pub sink: Box<dyn Sink>,
}

#[async_trait::async_trait(?Send)]
impl ApplyFront for Front {
    async fn planned(&self, ready: &Ready<'_>) -> anyhow::Result<()> {
        let plan = ready.plan();
        if plan.writes() {
            eprint!("{}", self.spec_notes);
        }
        match self.shown {
            Shown::JsonLine => print_plan_line(plan),
            // Orphans are shown with what they hold even when nothing changes.
            Shown::Text if plan.has_changes() || !plan.orphans.is_empty() => {
                render_plan(plan, PlanFormat::Text)
            }
            Shown::Text | Shown::SummaryIfUnchanged if !plan.has_changes() => {
                super::output::print_stdout(&format!("{}\n", plan.summary))
            }
            _ => Ok(()),
        }
    }

    fn consent(&self, _plan: &Plan) -> Consent {
        self.consent
    }

    async fn approve(&self, _plan: &Plan) -> anyhow::Result<bool> {
        Ok(self.auto_approve || confirm("Do you want to perform these actions?")?)
    }

    fn sink(&self) -> &dyn Sink {
        self.sink.as_ref()
    }
}

pub async fn destroy(args: &DestroyArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = super::load_valid(&args.spec);
    let Some((loaded, desired)) = ok else {
        super::output::print_diagnostics(&diags, &sources);
        return Ok(Exit::Failed);
    };
    let notes = super::output::concerning(&diags, &sources, |_| true);
    if args.confirm != loaded.spec.cluster.name {
        anyhow::bail!(
            "--confirm `{}` does not match the cluster `{}`; nothing was changed",
            args.confirm,
            loaded.spec.cluster.name
        );
    }
    let opts = PlanOptions {
        destroy: true,
        allow_cluster_delete: true,
        prune: true,
        ..Default::default()
    };
    apply_valid(
        &args.spec,
        &args.target,
        (loaded, desired),
        opts,
        &Choices {
            auto_approve: true,
            force_conflicts: false,
            // `--confirm CLUSTER` consents to deleting what gkq made, not to stopping jobs.
            allow_disruption: args.allow_disruption,
            output: ApplyFormat::Text,
            lock: &args.lock,
            // A destroy creates no jobs.
            submit_wait: crate::ops::DEFAULT_SUBMIT_WAIT,
        },
        notes,
    )
    .await
}
