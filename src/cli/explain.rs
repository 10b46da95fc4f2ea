//! `gkq explain NAMESPACE/NAME [SPEC]`: why a job is where it is (`ops::explain`, rendered by
//! `render::explain`).

use clap::{Args, ValueEnum};

use super::output::{print_concerning, print_diagnostics, print_stdout};
use super::plan::{PlanFlags, options};
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};
use crate::model::jobs::{job_entry, job_index_of_path};

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
    let Some((loaded, desired)) = ok else {
        print_diagnostics(&diags, &sources);
        return Ok(Exit::Failed);
    };
    // What the spec says of the job explained concerns the explanation; the rest does not.
    let entry = args
        .what
        .split_once('/')
        .and_then(|(namespace, name)| job_entry(&loaded.spec, namespace, name));
    print_concerning(&diags, &sources, |d| {
        entry.is_some() && d.path.as_deref().and_then(job_index_of_path) == entry
    });
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
