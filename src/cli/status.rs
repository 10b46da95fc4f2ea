//! `gkq status`: what the cluster runs, against what the local checkout says it should run
//! (`ops::status`, rendered by `render::status`).

use clap::{Args, ValueEnum};

use super::output::{print_concerning, print_diagnostics, print_stdout};
use super::plan::{PlanFlags, options};
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};
use crate::render::status::stack_to_text;
use crate::spec::Severity;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum StatusFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub flags: PlanFlags,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: StatusFormat,
}

pub async fn run(args: &StatusArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    let Some((loaded, desired)) = ok else {
        print_diagnostics(&diags, &sources);
        return Ok(Exit::Failed);
    };
    // Status reads; the spec's notes say what gkq writes, so only its warnings (setups that
    // strand jobs or capacity, which the report may show) concern it.
    print_concerning(&diags, &sources, |d| d.severity == Severity::Warning);
    let report = crate::ops::status::status(
        &args.spec.source(),
        loaded,
        desired,
        &args.target.options(),
        options(&args.flags),
    )
    .await?;
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    match args.output {
        StatusFormat::Json => print_stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&report.status)?
        ))?,
        StatusFormat::Text => print_stdout(&stack_to_text(&report.status))?,
    }
    Ok(Exit::Ok)
}
