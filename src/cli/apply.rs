//! `gkq apply`: plan, confirm, and converge.

use std::io::{BufRead, IsTerminal};

use clap::Args;

use super::Exit;
use super::SpecArgs;
use super::gitops::{KubeHandle, LockArgs};
use super::plan::{PlanFlags, PlanFormat, make_plan, options, render_plan};
use super::target::{Session, TargetArgs};
use crate::apply::kube_adapter::KubeAdapter;
use crate::apply::{ApplyReport, Executor, Interrupt, Outcome, VerifyError};
use crate::kube::client::RealKube;
use crate::model::KueueInstall;
use crate::plan::{Plan, PlanOptions};
use crate::render::apply::{JsonLinesSink, TerminalSink};

/// `SPEC` may also be a plan file written by `gkq plan --out FILE`: then exactly that plan is
/// applied, or refused if the spec or live state changed since.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
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

/// What an apply acts on, whether its plan was just made or read from a file.
pub struct ApplyTarget<'a> {
    pub session: &'a Session,
    pub plan: &'a Plan,
    /// The Kubernetes client made at plan time, when the cluster existed.
    pub kube_client: Option<&'a RealKube>,
    /// Kueue's installation settings, for plans that install Kueue.
    pub kueue: Option<&'a KueueInstall>,
}

async fn execute(
    planned: &super::plan::Planned,
    json: bool,
    choices: &Choices<'_>,
) -> Result<ApplyReport, VerifyError> {
    execute_on(
        &ApplyTarget {
            session: &planned.session,
            plan: &planned.plan,
            kube_client: planned.kube_client.as_ref(),
            kueue: Some(&planned.desired.kueue),
        },
        json,
        &Consent {
            force_conflicts: choices.force_conflicts,
            allow_disruption: choices.allow_disruption,
        },
    )
    .await
}

/// What the person applying consented to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Consent {
    /// Take fields other field managers own.
    pub force_conflicts: bool,
    /// Stop admitted or running jobs.
    pub allow_disruption: bool,
}

/// The refusal of a plan that stops running work, naming each job and what stops it.
pub fn disruption_refusal(disruptions: &[crate::plan::disruption::Disruption]) -> String {
    let jobs: Vec<String> = disruptions
        .iter()
        .flat_map(|d| d.jobs.iter().map(move |j| format!("{} -> {j}", d.addr)))
        .collect();
    format!(
        "refusing to apply: this plan stops running work:\n  {}\nWait for the jobs to finish, or pass --allow-disruption; nothing was changed",
        jobs.join("\n  ")
    )
}

/// Checks the whole plan against live state ([`Executor::verify`]) and the running work it would
/// stop now, then applies it. Nothing is applied when any target moved since the plan was made,
/// or when it would stop a job without `consent.allow_disruption` (a plan without changes is
/// only checked).
pub async fn execute_on(
    target: &ApplyTarget<'_>,
    json: bool,
    consent: &Consent,
) -> Result<ApplyReport, VerifyError> {
    let force_conflicts = consent.force_conflicts;
    let terminal;
    let lines;
    let sink: &dyn crate::apply::Sink = if json {
        lines = JsonLinesSink::new(std::io::stdout());
        &lines
    } else {
        terminal = TerminalSink::stderr();
        &terminal
    };
    let session = target.session;
    let mut options = crate::apply::ApplyOptions::default();
    if session.simulated() {
        // The local emulator finishes operations in well under a second.
        options.poll.initial = std::time::Duration::from_millis(100);
        options.poll.max = std::time::Duration::from_millis(500);
    }
    let kube = KubeHandle::new(session, target.kube_client, &target.plan.cluster);
    let adapter = kube.api().map(|api| {
        let mut a = KubeAdapter::new(api, target.plan.cluster.cluster.clone());
        a.force_conflicts = force_conflicts;
        a.kueue = match session.kube.local() {
            // No network on the local target: the embedded release, unless the spec names one.
            Some(_) => target.kueue.map(crate::local::local_kueue),
            None => target.kueue.cloned(),
        };
        a
    });
    let interrupt = Interrupt::new();
    let mut executor = Executor::new(session.gke.as_ref(), sink)
        .with_options(options)
        .with_interrupt(&interrupt);
    if let Some(adapter) = &adapter {
        executor = executor.with_kube(adapter);
    }
    executor.verify(target.plan).await?;
    if !consent.allow_disruption
        && let Some(api) = kube.api()
        && target.plan.changes().any(|a| {
            matches!(
                a.kind,
                crate::plan::ActionKind::Replace | crate::plan::ActionKind::Delete
            )
        })
    {
        let disruptions = crate::observe::kube::observe_disruptions(api, target.plan)
            .await
            .map_err(|e| VerifyError::Read(format!("reading the jobs the plan would stop: {e}")))?;
        if !disruptions.is_empty() {
            return Err(VerifyError::Disrupts(disruption_refusal(&disruptions)));
        }
    }
    if !target.plan.has_changes() {
        // Verified and nothing to do: no progress output for an empty walk.
        return Ok(ApplyReport::default());
    }
    let on_ctrl_c = tokio::spawn(stop_on_ctrl_c(interrupt.clone()));
    let report = executor.apply(target.plan).await;
    on_ctrl_c.abort();
    Ok(report)
}

/// A stale plan, as the user sees it: every resource that moved, and what to do.
pub fn stale_error(error: VerifyError) -> anyhow::Error {
    let hint = error.hint();
    anyhow::anyhow!("{error}\nhint: {hint}")
}

/// Ctrl-C during an apply: start nothing new and let what runs finish (the executor reports a
/// GKE operation it was waiting for as still running). A second Ctrl-C exits at once.
async fn stop_on_ctrl_c(interrupt: Interrupt) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    eprintln!(
        "\nInterrupted: no new changes will start; waiting for the ones in flight (Ctrl-C again to quit now)."
    );
    interrupt.trigger();
    if tokio::signal::ctrl_c().await.is_ok() {
        eprintln!("Interrupted again: exiting now. Run `gkq plan` to see what was done.");
        std::process::exit(Exit::Interrupted.code());
    }
}

/// The sink has already reported each action and the totals; this only sets the exit code and
/// says what to do after a partial failure.
fn summarize(report: &ApplyReport) -> Exit {
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
        let failed = report
            .results
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Succeeded | Outcome::Unchanged))
            .count();
        eprintln!(
            "{failed} action(s) failed or were skipped; fix the cause and run `gkq apply` again, or `gkq plan` to see what is left."
        );
        Exit::Failed
    }
}

pub async fn run(args: &ApplyArgs) -> anyhow::Result<Exit> {
    if crate::gitops::saved::is_plan_file(&args.spec.spec) {
        return super::apply_saved::run(args).await;
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
}

async fn run_with(
    spec: &SpecArgs,
    target: &TargetArgs,
    opts: PlanOptions,
    choices: &Choices<'_>,
) -> anyhow::Result<Exit> {
    let Choices {
        auto_approve,
        allow_disruption,
        output,
        lock,
        ..
    } = *choices;
    let destroy = opts.destroy;
    let local_state = super::gitops::lock_local_state(spec, target, lock).await?;
    let Some(planned) = make_plan(spec, target, opts).await? else {
        return Ok(Exit::Failed);
    };
    let json = output == ApplyFormat::Json;
    if json {
        print_plan_line(&planned.plan)?;
    }
    if !planned.plan.has_changes() {
        if !json {
            println!("{}", planned.plan.summary);
        }
        // Nothing to change, but the cluster now runs this revision of the spec.
        if !destroy {
            let held = super::gitops::acquire_lock(
                &planned.session,
                planned.kube_client.as_ref(),
                &planned.plan.cluster.cluster,
                lock,
            )
            .await?;
            record_revision(&planned).await;
            held.release().await;
        }
        // The local world is written back (when the session goes) before its lock is released.
        drop(planned);
        release(local_state).await;
        return Ok(Exit::Ok);
    }
    if !json {
        render_plan(&planned.plan, PlanFormat::Text)?;
    }
    // A destroy that cannot delete the cluster would only strip it of its Kubernetes objects.
    let refused: Vec<String> = if destroy {
        planned
            .plan
            .actions
            .iter()
            .filter_map(|a| a.blocked.as_ref().map(|why| format!("{}: {why}", a.addr)))
            .collect()
    } else {
        Vec::new()
    };
    if !refused.is_empty() {
        anyhow::bail!(
            "refusing to destroy, nothing was changed:\n  {}\nhint: a cluster the spec protects (`cluster.deletionProtection: true`, the default) is destroyed only after the spec turns protection off and that is applied",
            refused.join("\n  ")
        );
    }
    if !planned.plan.disruptions.is_empty() && !allow_disruption {
        anyhow::bail!("{}", disruption_refusal(&planned.plan.disruptions));
    }
    if !auto_approve && !confirm("Do you want to perform these actions?")? {
        eprintln!("Apply cancelled; nothing was changed.");
        drop(planned);
        release(local_state).await;
        return Ok(Exit::Failed);
    }
    let held = super::gitops::acquire_lock(
        &planned.session,
        planned.kube_client.as_ref(),
        &planned.plan.cluster.cluster,
        lock,
    )
    .await?;
    let report = execute(&planned, json, choices).await;
    if matches!(&report, Ok(report) if report.is_success()) && !destroy {
        record_revision(&planned).await;
    }
    // The simulated cluster reacts to what was applied; written before the state lock goes.
    if let Some(local) = planned.session.kube.local()
        && let Err(e) = local.settle().await
    {
        eprintln!("warning: {e}");
    }
    if matches!(&report, Ok(report) if report.is_success()) && !destroy && !json {
        let kube = KubeHandle::new(
            &planned.session,
            planned.kube_client.as_ref(),
            &planned.plan.cluster,
        );
        super::status_jobs::print_after_apply(&planned.session, &planned.desired, kube.api()).await;
    }
    held.release().await;
    drop(planned);
    release(local_state).await;
    Ok(summarize(&report.map_err(stale_error)?))
}

async fn release(lock: Option<crate::gitops::lock::ApplyLock>) {
    if let Some(lock) = lock {
        lock.release().await;
    }
}

async fn record_revision(planned: &super::plan::Planned) {
    let Some(provenance) = &planned.plan.provenance else {
        return;
    };
    let kube = KubeHandle::new(
        &planned.session,
        planned.kube_client.as_ref(),
        &planned.plan.cluster,
    );
    super::gitops::record_revision(
        &planned.session,
        kube.api(),
        &planned.plan.cluster,
        &provenance.spec,
    )
    .await;
}

pub async fn destroy(args: &DestroyArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = super::load_valid(&args.spec);
    super::output::print_diagnostics(&diags, &sources);
    let Some((loaded, _)) = ok else {
        return Ok(Exit::Failed);
    };
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
    run_with(
        &args.spec,
        &args.target,
        opts,
        &Choices {
            auto_approve: true,
            force_conflicts: false,
            // `--confirm CLUSTER` consents to deleting what gkq made, not to stopping jobs.
            allow_disruption: args.allow_disruption,
            output: ApplyFormat::Text,
            lock: &args.lock,
        },
    )
    .await
}
