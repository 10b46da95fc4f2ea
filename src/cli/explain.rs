//! `gkq explain NAMESPACE/NAME [SPEC]`: why a job is where it is (`ops::explain`, rendered by
//! `render::explain`).

use clap::{Args, ValueEnum};

use super::output::{print_diagnostics, print_stdout};
use super::plan::{PlanFlags, options};
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ExplainFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The job or Workload, as NAMESPACE/NAME.
    #[arg(value_name = "NAMESPACE/NAME")]
    pub what: String,
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub flags: PlanFlags,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: ExplainFormat,
}

pub async fn run(args: &ExplainArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    print_diagnostics(&diags, &sources);
    let Some((loaded, desired)) = ok else {
        return Ok(Exit::Failed);
    };
    let explanation = crate::ops::explain::explain(
        &args.spec.source(),
        loaded,
        desired,
        &args.target.options(),
        options(&args.flags),
        &args.what,
    )
    .await?;
    match args.output {
        ExplainFormat::Json => print_stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&explanation)?
        ))?,
        ExplainFormat::Text => print_stdout(&crate::render::explain::to_text(&explanation))?,
    }
    Ok(Exit::Ok)
}
