//! `gkq logs NAMESPACE/JOB [SPEC] [-f]`: the log of a job's driver (`ops::logs`): its lines to
//! stdout, why it waits (Kueue holding the job back, pods not created yet) to stderr.

use std::io::Write;
use std::time::Duration;

use clap::Args;

use super::output::print_diagnostics;
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};
use crate::ops::logs::{LogsOptions, LogsSink};
use crate::report::logs::PodChoice;

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The job (a RayJob, JobSet or batch Job), as NAMESPACE/NAME.
    #[arg(value_name = "NAMESPACE/JOB")]
    pub job: String,
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Keep reading as the pods write, until they end.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Read this pod of the job instead of its driver.
    #[arg(long, value_name = "NAME", conflicts_with = "all")]
    pub pod: Option<String>,
    /// Read every pod of the job, each line prefixed with its pod.
    #[arg(long)]
    pub all: bool,
    /// How long to wait for the job's pods (while Kueue has not admitted it, or its pods are
    /// not created yet) before giving up.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = crate::vocab::duration::parse_flag)]
    pub wait: Duration,
}

/// Log lines to stdout, status lines to stderr.
struct Terminal;

impl LogsSink for Terminal {
    fn status(&self, line: &str) {
        eprintln!("{line}");
    }

    fn line(&self, pod: &str, several: bool, line: &str) {
        let mut out = std::io::stdout().lock();
        // A closed pipe (`gkq logs ... | head`) ends nothing the job does.
        let _ = if several {
            writeln!(out, "[{pod}] {line}")
        } else {
            writeln!(out, "{line}")
        };
        let _ = out.flush();
    }
}

pub async fn run(args: &LogsArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    let Some((loaded, _)) = ok else {
        print_diagnostics(&diags, &sources);
        return Ok(Exit::Failed);
    };
    let choice = match (&args.pod, args.all) {
        (Some(pod), _) => PodChoice::Named(pod.clone()),
        (None, true) => PodChoice::All,
        (None, false) => PodChoice::Driver,
    };
    let options = LogsOptions {
        job: args.job.clone(),
        choice,
        follow: args.follow,
        wait: args.wait,
        poll: Duration::from_secs(1),
    };
    crate::ops::logs::logs(&loaded, &args.target.options(), &options, &Terminal).await?;
    Ok(Exit::Ok)
}
