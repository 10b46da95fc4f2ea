//! `gkq watch`: the terminal front of `ops::watch`. Parses the flags, stops on Ctrl-C, and
//! prints each event with the time: plans to stdout (flushed, so a pipe sees each as it
//! happens), problems and an apply's progress to stderr.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use tokio::sync::watch;

use super::gitops::{LockArgs, SubmitArgs};
use super::output::stderr_color;
use super::plan::{PlanFlags, options};
use super::target::TargetArgs;
use super::{Exit, SpecArgs};
use crate::ops::Sink;
use crate::ops::watch::{AutoApplyOptions, FollowBranch, WatchEvent, WatchOptions, WatchSink};
use crate::plan::PlanOptions;
use crate::render::apply::TerminalSink;
use crate::vocab::duration;

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub flags: PlanFlags,
    /// Re-observe live state this often to catch drift (and fetch --git-remote): 30s, 5m, 1h.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration::parse_flag)]
    pub interval: Duration,
    /// Apply plans that only create or update resources, as they appear.
    #[arg(long)]
    pub apply: bool,
    /// With --apply, also apply plans that replace or delete resources.
    #[arg(long, requires = "apply")]
    pub allow_destructive: bool,
    /// With --apply, also apply plans that stop admitted or running jobs (a replaced job, a
    /// deleted queue or pool with admitted work).
    #[arg(long, requires = "apply")]
    pub allow_disruption: bool,
    /// Follow a remote branch instead of the working tree: run `git fetch NAME` every --interval
    /// and plan (or apply) each new commit of --branch.
    #[arg(
        long,
        value_name = "NAME",
        requires = "branch",
        conflicts_with = "git_ref"
    )]
    pub git_remote: Option<String>,
    /// The branch of --git-remote to follow.
    #[arg(long, value_name = "BRANCH", requires = "git_remote")]
    pub branch: Option<String>,
    /// While jobs are being admitted or run, read their state this often.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse_flag)]
    pub job_interval: Duration,
    /// With --apply: take over fields that another field manager owns.
    #[arg(long)]
    pub force_conflicts: bool,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub submit: SubmitArgs,
}

pub async fn run(args: &WatchArgs) -> anyhow::Result<Exit> {
    let options = watch_options(args);
    let spec_dir = crate::ops::watch::spec_dir(&args.spec.spec)?;
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    eprintln!("{}", banner(args, &spec_dir));
    let sink = Terminal {
        apply: TerminalSink::stderr(),
        spec_notes: Default::default(),
    };
    crate::ops::watch::watch(&options, &sink, stop).await?;
    eprintln!("Stopped watching.");
    Ok(Exit::Ok)
}

fn watch_options(args: &WatchArgs) -> WatchOptions {
    WatchOptions {
        spec: args.spec.source(),
        target: args.target.options(),
        plan: PlanOptions {
            // The plan of an apply that forces shows what forcing takes.
            force_conflicts: args.apply && args.force_conflicts,
            ..options(&args.flags)
        },
        interval: args.interval,
        apply: args.apply.then_some(AutoApplyOptions {
            allow_destructive: args.allow_destructive,
            allow_disruption: args.allow_disruption,
            force_conflicts: args.force_conflicts,
        }),
        follow: match (&args.git_remote, &args.branch) {
            (Some(remote), Some(branch)) => Some(FollowBranch {
                remote: remote.clone(),
                branch: branch.clone(),
            }),
            _ => None,
        },
        job_interval: args.job_interval,
        lock_timeout: args.lock.lock_timeout,
        submit_wait: args.submit.submit_wait,
    }
}

fn banner(args: &WatchArgs, spec_dir: &std::path::Path) -> String {
    let source = match (&args.git_remote, &args.branch) {
        (Some(remote), Some(branch)) => format!(
            "following {remote}/{branch} (git fetch every {})",
            duration::human(args.interval)
        ),
        _ => format!("re-planning when files in {} change", spec_dir.display()),
    };
    let apply = match (args.apply, args.allow_destructive) {
        (false, _) => "plans only",
        (true, false) => "applies plans that only create or update",
        (true, true) => "applies every plan, replaces and deletes included",
    };
    format!(
        "Watching {}: {source}; drift check every {}; {apply}. Ctrl-C stops.",
        args.spec.spec.display(),
        duration::human(args.interval)
    )
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%H:%M:%S")
        .to_string()
}

/// Prints to stdout and flushes, so that a pipe sees each event as it happens. A closed pipe is
/// not an error worth stopping for.
fn emit(text: &str) {
    let mut out = anstream::stdout();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

struct Terminal {
    apply: TerminalSink,
    /// The spec's warnings and notes printed so far, so each is printed once, not with every plan.
    spec_notes: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl Terminal {
    /// The spec's warnings and notes (notes left out with `-q`), each once: with the first plan
    /// that writes something and carries it.
    fn spec_notes(&self, plan: &crate::plan::Plan) {
        if !plan.writes() {
            return;
        }
        let quiet = super::output::quiet();
        let mut printed = self.spec_notes.lock().unwrap_or_else(|e| e.into_inner());
        for line in plan
            .notices
            .iter()
            .filter(|n| !(quiet && n.severity == Some(crate::plan::NoticeSeverity::Note)))
            .filter_map(crate::render::plan::spec_notice_line)
        {
            if !printed.contains(&line) {
                eprintln!("{line}");
                printed.insert(line);
            }
        }
    }
}

impl WatchSink for Terminal {
    fn event(&self, event: WatchEvent<'_>) {
        match event {
            WatchEvent::InvalidSpec {
                diagnostics,
                sources,
            } => {
                let report = diagnostics.report(sources).render(stderr_color());
                eprintln!(
                    "[{}] the spec is not valid; waiting for a fix:\n{report}",
                    now()
                );
            }
            WatchEvent::Problem(text) => eprintln!("[{}] {text}", now()),
            WatchEvent::Planned { trigger, plan } => {
                self.spec_notes(plan);
                let mut text = format!("── {} · {trigger} · {}\n", now(), plan.summary);
                if plan.has_changes() {
                    // anstream drops the colours when stdout is not a terminal or NO_COLOR is set.
                    text.push_str(&crate::render::plan::to_text(plan, true));
                }
                emit(&text);
            }
            WatchEvent::Held(reason) => emit(&format!("[{}] {reason}\n", now())),
            WatchEvent::Applying(summary) => emit(&format!("[{}] applying: {summary}\n", now())),
            WatchEvent::Applied => emit(&format!("[{}] applied\n", now())),
            WatchEvent::ApplyIncomplete(failed) => emit(&format!(
                "[{}] apply incomplete: {failed} action(s) failed; watch retries when the spec or live state changes\n",
                now()
            )),
            WatchEvent::NotApplied(why) => emit(&format!("[{}] not applied: {why}\n", now())),
            WatchEvent::JobStage { job, stage } => {
                emit(&format!("[{}] job {job}: {stage}\n", now()))
            }
            WatchEvent::JobStuck { job, warning } => {
                emit(&format!("[{}] job {job}: stuck? {warning}\n", now()))
            }
            WatchEvent::JobPlaced(comparison) => emit(&format!(
                "[{}] job {}: {}\n",
                now(),
                comparison.job,
                crate::render::status::comparison_text(comparison)
            )),
        }
    }

    fn apply_sink(&self) -> &dyn Sink {
        &self.apply
    }
}
