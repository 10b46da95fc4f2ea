//! `gkq dashboard NAMESPACE/JOB [SPEC] [--port N] [--address ADDR]`: forward a local port to a
//! RayJob's Ray dashboard (`ops::dashboard`): the URL to stdout, why it waits and what happens
//! to connections to stderr; serves until Ctrl-C.

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use clap::Args;

use super::output::print_diagnostics;
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};
use crate::interrupt::Interrupt;
use crate::ops::dashboard::{DashboardOptions, DashboardSink, Stopped};
use crate::vocab::ray::DEFAULT_DASHBOARD_PORT;

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// The RayJob, as NAMESPACE/NAME.
    #[arg(value_name = "NAMESPACE/JOB")]
    pub job: String,
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    /// The local port to serve the dashboard on (0: any free port; the URL printed says which).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_DASHBOARD_PORT)]
    pub port: u16,
    /// The local address to listen on. Anyone who can reach it sees the dashboard, which can
    /// submit and stop Ray jobs: keep it on loopback unless you mean otherwise.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub address: IpAddr,
    /// How long to wait for the job's Ray head to run (while Kueue has not admitted it, or its
    /// pod is not running yet) before giving up.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = crate::vocab::duration::parse_flag)]
    pub wait: Duration,
}

/// The URL to stdout, everything else to stderr.
struct Terminal;

impl DashboardSink for Terminal {
    fn status(&self, line: &str) {
        eprintln!("{line}");
    }

    fn serving(&self, url: &str) {
        let mut out = std::io::stdout().lock();
        // A closed stdout ends nothing: the forward goes on.
        let _ = writeln!(out, "{url}");
        let _ = out.flush();
    }
}

pub async fn run(args: &DashboardArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    let Some((loaded, _)) = ok else {
        print_diagnostics(&diags, &sources);
        return Ok(Exit::Failed);
    };
    let options = DashboardOptions {
        job: args.job.clone(),
        address: args.address,
        port: args.port,
        wait: args.wait,
        poll: Duration::from_secs(1),
    };
    let interrupt = Interrupt::new();
    let on_ctrl_c = {
        let interrupt = interrupt.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupt.trigger();
            }
        })
    };
    let served = crate::ops::dashboard::dashboard(
        &loaded,
        &args.target.options(),
        &options,
        &Terminal,
        &interrupt,
    )
    .await;
    on_ctrl_c.abort();
    // Ctrl-C is how forwarding ends, as for `kubectl port-forward`: not a failure.
    match served? {
        Stopped::Forwarding => eprintln!("Stopped forwarding the dashboard."),
        Stopped::Waiting => eprintln!("Stopped waiting: nothing was forwarded."),
    }
    Ok(Exit::Ok)
}
