//! `gkq apply`: plan, confirm, and converge.

use std::io::{BufRead, IsTerminal};

use clap::Args;

use super::Exit;
use super::SpecArgs;
use super::plan::{PlanFlags, PlanFormat, make_plan, options, render_plan};
use super::target::{KubeSource, TargetArgs};
use crate::apply::{ApplyReport, Executor, Interrupt, Outcome};
use crate::kube::KubeApi;
use crate::kube::applier::KubeAdapter;
use crate::kube::connect::LazyKube;
use crate::plan::PlanOptions;
use crate::render::apply::{JsonLinesSink, TerminalSink};

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
    /// Progress as JSON lines on stdout instead of text on stderr.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: PlanFormat,
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

async fn execute(planned: &super::plan::Planned, json: bool, force_conflicts: bool) -> ApplyReport {
    let terminal;
    let lines;
    let sink: &dyn crate::apply::Sink = if json {
        lines = JsonLinesSink::new(std::io::stdout());
        &lines
    } else {
        terminal = TerminalSink::stderr();
        &terminal
    };
    let mut options = crate::apply::ApplyOptions::default();
    if planned.session.simulated() {
        // The local emulator finishes operations in well under a second.
        options.poll.initial = std::time::Duration::from_millis(100);
        options.poll.max = std::time::Duration::from_millis(500);
    }
    let lazy;
    let kube: Option<&dyn KubeApi> = match (&planned.session.kube, &planned.kube_client) {
        (KubeSource::Kubeconfig(k), _) => Some(k),
        (_, Some(k)) => Some(k),
        (KubeSource::FromCluster(tokens), None) => {
            lazy = LazyKube::new(
                planned.session.gke.as_ref(),
                planned.desired.gke.cluster_ref.clone(),
                tokens.clone(),
            );
            Some(&lazy)
        }
        (KubeSource::Unavailable, None) => None,
    };
    let adapter = kube.map(|api| {
        let mut a = KubeAdapter::new(api, planned.desired.gke.cluster_ref.cluster.clone());
        a.force_conflicts = force_conflicts;
        a.kueue = Some(planned.desired.kueue.clone());
        a
    });
    let interrupt = Interrupt::new();
    let mut executor = Executor::new(planned.session.gke.as_ref(), sink)
        .with_options(options)
        .with_interrupt(&interrupt);
    if let Some(adapter) = &adapter {
        executor = executor.with_kube(adapter);
    }
    let on_ctrl_c = tokio::spawn(stop_on_ctrl_c(interrupt.clone()));
    let report = executor.apply(&planned.plan).await;
    on_ctrl_c.abort();
    report
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
    run_with(
        &args.spec,
        &args.target,
        options(&args.flags),
        args.auto_approve,
        args.force_conflicts,
        args.allow_disruption,
        args.output,
    )
    .await
}

async fn run_with(
    spec: &SpecArgs,
    target: &TargetArgs,
    opts: PlanOptions,
    auto_approve: bool,
    force_conflicts: bool,
    allow_disruption: bool,
    output: PlanFormat,
) -> anyhow::Result<Exit> {
    let Some(planned) = make_plan(spec, target, opts).await? else {
        return Ok(Exit::Failed);
    };
    let json = output == PlanFormat::Json;
    if !planned.plan.has_changes() {
        if json {
            render_plan(&planned.plan, PlanFormat::Json)?;
        } else {
            println!("{}", planned.plan.summary);
        }
        return Ok(Exit::Ok);
    }
    if !json {
        render_plan(&planned.plan, PlanFormat::Text)?;
    }
    if !planned.plan.disruptions.is_empty() && !allow_disruption {
        let jobs: Vec<String> = planned
            .plan
            .disruptions
            .iter()
            .flat_map(|d| d.jobs.iter().map(move |j| format!("{} -> {j}", d.addr)))
            .collect();
        anyhow::bail!(
            "refusing to apply: this plan stops running work:\n  {}\nWait for the jobs to finish, or pass --allow-disruption; nothing was changed",
            jobs.join("\n  ")
        );
    }
    if !auto_approve && !confirm("Do you want to perform these actions?")? {
        eprintln!("Apply cancelled; nothing was changed.");
        return Ok(Exit::Failed);
    }
    let report = execute(&planned, json, force_conflicts).await;
    Ok(summarize(&report))
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
        true,
        false,
        true,
        PlanFormat::Text,
    )
    .await
}
