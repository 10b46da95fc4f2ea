//! `gkq plan`: compare the spec with live state and print the ordered actions.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::output::{print_diagnostics, print_stdout};
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};
use crate::ops::head_start::HeadStart;
use crate::ops::plan::{Planned, plan_started, write_plan_file};
use crate::plan::{Plan, PlanOptions};
use crate::render;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum PlanFormat {
    #[default]
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Args, Clone, Default)]
pub struct PlanFlags {
    /// Also plan deletes of resources gkq owns that the spec no longer has.
    #[arg(long)]
    pub prune: bool,
    /// Take over resources with the spec's names that gkq does not own yet.
    #[arg(long)]
    pub adopt: bool,
    /// Predict placements with Kueue v0.19's rules even when the cluster runs (or the spec
    /// installs) another Kueue minor release; without it those placements say "not predicted".
    #[arg(long)]
    pub predict_anyway: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub flags: PlanFlags,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: PlanFormat,
    /// Also write the plan as JSON to FILE, for `gkq apply FILE`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit 0 with no changes, 2 with changes, 3 with changes that stop running jobs, 1 on errors.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Plan taking the fields other field managers own (as `gkq apply --force-conflicts`
    /// does), including what Kueue wrote into jobs it admitted.
    #[arg(long)]
    pub force_conflicts: bool,
}

/// Loads the spec, connects to its target, observes and plans. `Ok(None)` when the spec is
/// invalid (diagnostics already printed).
pub async fn make_plan(
    spec: &SpecArgs,
    target_args: &TargetArgs,
    options: PlanOptions,
) -> anyhow::Result<Option<Planned>> {
    let target = target_args.options();
    // What the plan reads whatever the spec says starts while the spec is loaded; an invalid
    // spec stops it (dropped) and is all the command says.
    let head = HeadStart::start(&target, || spec.source().stack_hint());
    let (ok, diags, sources) = load_valid(spec);
    print_diagnostics(&diags, &sources);
    let Some((loaded, desired)) = ok else {
        return Ok(None);
    };
    plan_started(&spec.source(), loaded, desired, &target, options, head)
        .await
        .map(Some)
}

pub fn options(flags: &PlanFlags) -> PlanOptions {
    PlanOptions {
        prune: flags.prune,
        adopt: flags.adopt,
        predict_anyway: flags.predict_anyway,
        ..Default::default()
    }
}

pub fn render_plan(plan: &Plan, format: PlanFormat) -> anyhow::Result<()> {
    match format {
        PlanFormat::Text => {
            let mut out = anstream::stdout();
            match render::plan::write_text(plan, &mut out).and_then(|_| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                other => Ok(other?),
            }
        }
        PlanFormat::Json => print_stdout(&format!("{}\n", render::plan::to_json(plan))),
        PlanFormat::Markdown => print_stdout(&render::plan::to_markdown(plan)),
    }
}

/// `--detailed-exitcode`: 0 no changes, 2 changes, 3 changes that stop running work.
pub fn exit_code(plan: &Plan, detailed: bool) -> Exit {
    if !detailed || !plan.has_changes() {
        Exit::Ok
    } else if !plan.disruptions.is_empty() {
        Exit::Disruptive
    } else {
        Exit::Changes
    }
}

pub async fn run(args: &PlanArgs) -> anyhow::Result<Exit> {
    let options = PlanOptions {
        force_conflicts: args.force_conflicts,
        ..options(&args.flags)
    };
    let Some(planned) = make_plan(&args.spec, &args.target, options).await? else {
        return Ok(Exit::Failed);
    };
    if planned.session.simulated() && args.output == PlanFormat::Text {
        let dir = planned
            .session
            .state_dir
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        match planned.session.kube.local() {
            Some(local) => eprintln!(
                "(target local: GKE and Kubernetes are simulated in {dir}; this cluster's Kubernetes state is {})",
                local.state_file().display()
            ),
            None => eprintln!("(target local: GKE is simulated in {dir})"),
        }
    }
    render_plan(&planned.plan, args.output)?;
    if let Some(path) = &args.out {
        write_plan_file(path, &planned.plan)?;
        eprintln!(
            "Saved the plan to {}; apply it with `gkq apply {}`.",
            path.display(),
            path.display()
        );
    }
    let exit = exit_code(&planned.plan, args.detailed_exitcode);
    exit_without_freeing(planned);
    Ok(exit)
}

/// Ends with a plan whose data the process's exit frees at once, not tree by tree (a plan of
/// thousands of objects holds their trees: freeing them one by one was a few percent of an
/// unchanged plan's time). The session and its client close as usual: the local target writes
/// its state back when its session goes.
fn exit_without_freeing(planned: Planned) {
    let Planned {
        loaded,
        desired,
        session,
        plan,
        kube_client,
        live,
        world,
        kueue,
        reads,
    } = planned;
    drop(kube_client);
    drop(session);
    std::mem::forget((loaded, desired, plan, live, world, kueue, reads));
}
