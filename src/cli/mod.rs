//! The command line: clap types and one thin function per command.

pub mod agent;
pub mod apply;
pub mod apply_saved;
pub mod dashboard;
pub mod emulator;
pub mod explain;
pub mod gitops;
pub mod help;
pub mod logs;
pub mod output;
pub mod plan;
pub mod render;
pub mod schema;
pub mod status;
pub mod target;
pub mod validate;
pub mod watch;

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::ops::{self, load::SpecSource};
use crate::spec::{Diagnostics, Loaded, SourceMap};

#[derive(Debug, Parser)]
#[command(
    name = "gkq",
    version,
    about = "Declarative reconciler for AI training capacity on GKE: TPU pools, DWS flex-start, Kueue and KubeRay jobs from one spec",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Hide the spec's notes (what gkq does on your behalf) in every command; its errors and
    /// warnings still show.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

impl Cli {
    /// The command line as clap defines it, with each command's argument forms and examples
    /// ([`help`]).
    pub fn command_with_help() -> clap::Command {
        help::with_examples(Cli::command())
    }

    /// Parses the process's arguments against [`Cli::command_with_help`] (exits with clap's
    /// message on bad arguments, and after printing help or the version).
    pub fn parse_with_help() -> Cli {
        let matches = Cli::command_with_help().get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a spec: every problem at once, with file, line and column. Exit 0 valid, 1 invalid.
    Validate(ValidateArgs),
    /// Print the desired state: GKE request bodies and Kubernetes objects.
    Render(RenderArgs),
    /// Compare the spec with live state and print the ordered actions.
    Plan(plan::PlanArgs),
    /// Plan, confirm and converge live state to the spec.
    Apply(apply::ApplyArgs),
    /// Delete everything gkq created for the spec, the cluster included.
    Destroy(apply::DestroyArgs),
    /// The revision the cluster runs, against the local checkout, and any drift; where each job
    /// is (from Kueue's Workloads) beside where gkq predicts it; node pools and queue usage.
    Status(status::StatusArgs),
    /// Re-plan on every save, on drift and on new commits; optionally apply; follow job admission.
    Watch(watch::WatchArgs),
    /// Why a job is where it is: Kueue's conditions, gkq's reproduction flavor by flavor, whether
    /// they agree, and what to change in the spec.
    Explain(explain::ExplainArgs),
    /// The log of a job's driver (a RayJob's submitter, a JobSet's or Job's first pod), waiting
    /// while Kueue holds the job back; `-f` follows it.
    Logs(logs::LogsArgs),
    /// Forward a local port to a RayJob's Ray dashboard through the Kubernetes API and print its
    /// URL, waiting while Kueue holds the job back; serves until Ctrl-C.
    Dashboard(dashboard::DashboardArgs),
    /// The GitOps agent: reconcile GkqStack objects (fetch, plan, apply or hold) continuously.
    Agent(agent::AgentArgs),
    /// Approve a plan the agent holds, by the digest its status shows.
    Approve(agent::ApproveArgs),
    /// Print the JSON Schema of the spec.
    Schema,
    /// The local GKE emulator.
    #[command(subcommand)]
    Emulator(emulator::EmulatorCommand),
}

/// Where the spec comes from, and how it is resolved.
#[derive(Debug, Args, Clone)]
pub struct SpecArgs {
    /// A spec file, or a directory holding gkq.yaml or gkq.toml.
    #[arg(default_value = ".")]
    pub spec: PathBuf,
    /// Environment overlay: merges environments/<ENV>.yaml (or .toml) over the spec.
    #[arg(long = "env", short = 'e', env = "GKQ_ENV")]
    pub env: Option<String>,
    /// Set a declared variable (repeatable): --var PROJECT_ID=my-project.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Read the spec, its overlays and its scripts from this git commit, branch or tag instead of
    /// the working tree.
    #[arg(long = "git-ref", value_name = "REF")]
    pub git_ref: Option<String>,
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not NAME=VALUE"))?;
    if k.is_empty() {
        return Err(format!("`{s}` has an empty name"));
    }
    Ok((k.to_string(), v.to_string()))
}

impl SpecArgs {
    /// The spec as the pipeline takes it.
    pub fn source(&self) -> SpecSource {
        SpecSource {
            spec: self.spec.clone(),
            env: self.env.clone(),
            vars: self.vars.clone(),
            git_ref: self.git_ref.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum DiagFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: DiagFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum RenderFormat {
    #[default]
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: RenderFormat,
}

/// A command's outcome, mapped to the process exit code by `main`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    /// Errors in the input or during the run.
    Failed,
    /// `--detailed-exitcode`: changes present.
    Changes,
    /// `--detailed-exitcode`: changes that disrupt running jobs.
    Disruptive,
    /// Stopped by Ctrl-C (128 + SIGINT, as shells report it).
    Interrupted,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Changes => 2,
            Exit::Disruptive => 3,
            Exit::Interrupted => 130,
        }
    }
}

/// Loads and validates a spec ([`ops::load::load_valid`]).
pub fn load_valid(
    args: &SpecArgs,
) -> (
    Option<(Loaded, crate::model::DesiredState)>,
    Diagnostics,
    SourceMap,
) {
    let v = ops::load::load_valid(&args.source());
    (v.valid, v.diagnostics, v.sources)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    output::set_quiet(cli.quiet);
    match cli.command {
        Command::Validate(a) => validate::run(&a),
        Command::Render(a) => render::run(&a),
        Command::Plan(a) => runtime()?.block_on(plan::run(&a)),
        // `gkq apply FILE` applies a plan saved by `gkq plan --out FILE`.
        Command::Apply(a) if crate::ops::saved::is_plan_file(&a.spec.spec) => {
            runtime()?.block_on(apply_saved::run(&a))
        }
        Command::Apply(a) => runtime()?.block_on(apply::run(&a)),
        Command::Destroy(a) => runtime()?.block_on(apply::destroy(&a)),
        Command::Status(a) => runtime()?.block_on(status::run(&a)),
        Command::Explain(a) => runtime()?.block_on(explain::run(&a)),
        Command::Logs(a) => runtime()?.block_on(logs::run(&a)),
        Command::Dashboard(a) => runtime()?.block_on(dashboard::run(&a)),
        Command::Watch(a) => runtime()?.block_on(watch::run(&a)),
        Command::Agent(a) => runtime()?.block_on(agent::run(&a)),
        Command::Approve(a) => runtime()?.block_on(agent::approve(&a)),
        Command::Schema => schema::run(),
        Command::Emulator(emulator::EmulatorCommand::Serve(a)) => {
            runtime()?.block_on(emulator::serve(&a))
        }
    }
}
