//! `gkq plan`: compare the spec with live state and print the ordered actions.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::output::{print_diagnostics, print_stdout};
use super::target::{self, KubeSource, Session, TargetArgs};
use super::{Exit, SpecArgs, load_valid};
use crate::kube::client::RealKube;
use crate::kube::connect::from_cluster;
use crate::model::DesiredState;
use crate::model::live::KubeLive;
use crate::observe::kube::{nothing_yet, observe_kube, observe_workloads};
use crate::observe::observe_gke;
use crate::plan::{Plan, PlanOptions, plan};
use crate::render;
use crate::spec::Loaded;

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
}

/// Everything a command needs after planning.
pub struct Planned {
    /// The spec, without its document tree and raw manifests ([`Loaded::release_documents`]):
    /// `desired` has everything they were for.
    pub loaded: Loaded,
    pub desired: DesiredState,
    pub session: Session,
    pub plan: Plan,
    /// The Kubernetes client derived from the cluster at plan time, when it existed.
    pub kube_client: Option<RealKube>,
}

/// Loads the spec, connects to its target, observes and plans. `Ok(None)` when the spec is
/// invalid (diagnostics already printed).
pub async fn make_plan(
    spec: &SpecArgs,
    target_args: &TargetArgs,
    options: PlanOptions,
) -> anyhow::Result<Option<Planned>> {
    let (ok, diags, sources) = load_valid(spec);
    print_diagnostics(&diags, &sources);
    let Some((loaded, desired)) = ok else {
        return Ok(None);
    };
    plan_loaded(spec, loaded, desired, target_args, options)
        .await
        .map(Some)
}

/// [`make_plan`] for a spec already loaded and valid (diagnostics are the caller's business).
pub async fn plan_loaded(
    spec: &SpecArgs,
    mut loaded: Loaded,
    desired: DesiredState,
    target_args: &TargetArgs,
    options: PlanOptions,
) -> anyhow::Result<Planned> {
    // The revision reads the variables the document tree declares: take it before the tree goes.
    let revision = super::gitops::spec_revision(spec, &loaded);
    loaded.release_documents();
    let session = target::connect(target_args, &loaded).await?;
    if session.simulated() {
        tracing::info!("target local: simulated GKE in {:?}", session.state_dir);
    }
    let mut live = observe_gke(session.gke.as_ref(), &desired)
        .await
        .map_err(|e| anyhow::anyhow!("reading live GKE state: {e}"))?;
    let stack = desired.gke.cluster_ref.cluster.clone();
    let read = |e: crate::kube::KubeError| anyhow::anyhow!("reading live Kubernetes state: {e}");
    let mut kube_client = None;
    let mut workloads = Vec::new();
    live.kubernetes = match &session.kube {
        KubeSource::Kubeconfig(k) => {
            workloads = observe_workloads(k).await.map_err(read)?;
            observe_kube(k, &desired, &stack).await.map_err(read)?
        }
        KubeSource::FromCluster(tokens) => match &live.gke.cluster {
            Some(cluster)
                if cluster
                    .get("endpoint")
                    .and_then(|e| e.as_str())
                    .is_some_and(|e| !e.is_empty()) =>
            {
                let k = from_cluster(cluster, tokens.as_ref()).await.map_err(read)?;
                workloads = observe_workloads(&k).await.map_err(read)?;
                let observed = observe_kube(&k, &desired, &stack).await.map_err(read)?;
                kube_client = Some(k);
                observed
            }
            _ => nothing_yet(),
        },
        KubeSource::Local(k) => match &live.gke.cluster {
            Some(cluster)
                if cluster
                    .get("endpoint")
                    .and_then(|e| e.as_str())
                    .is_some_and(|e| !e.is_empty()) =>
            {
                workloads = observe_workloads(k.as_ref()).await.map_err(read)?;
                observe_kube(k.as_ref(), &desired, &stack)
                    .await
                    .map_err(read)?
            }
            _ => nothing_yet(),
        },
        KubeSource::Unavailable => KubeLive::NotObserved,
    };
    let mut plan = plan(&desired, &live, &options)?;
    crate::plan::placements::annotate(&mut plan, &desired, &live, &workloads);
    if desired.kueue.mode == crate::spec::types::InstallMode::External {
        let api: Option<&dyn crate::kube::KubeApi> = match (&session.kube, &kube_client) {
            (KubeSource::Kubeconfig(k), _) => Some(k),
            (_, Some(k)) => Some(k),
            _ => None,
        };
        if let Some(api) = api {
            let notes = crate::kube::install::check_external(api, &desired.kueue)
                .await
                .map_err(|e| anyhow::anyhow!(e))?;
            plan.notices
                .extend(notes.into_iter().map(|message| crate::plan::Notice {
                    addr: None,
                    message,
                }));
        }
    }
    super::gitops::stamp(&mut plan, revision, &session);
    Ok(Planned {
        loaded,
        desired,
        session,
        plan,
        kube_client,
    })
}

pub fn options(flags: &PlanFlags) -> PlanOptions {
    PlanOptions {
        prune: flags.prune,
        adopt: flags.adopt,
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

/// Writes a plan file readable only by its owner (plans describe infrastructure), with its
/// integrity digest (keyed with `GKQ_PLAN_KEY` when set). Sensitive values are never in it.
pub fn write_plan_file(path: &std::path::Path, plan: &Plan) -> anyhow::Result<()> {
    let key = super::gitops::plan_key();
    let text = crate::gitops::saved::file_text(plan, key.as_deref());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot write the plan to {}: {e}", path.display()))?;
    // `mode` applies only to a new file; an existing one is narrowed before anything is written.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(text.as_bytes())?;
    Ok(())
}

pub async fn run(args: &PlanArgs) -> anyhow::Result<Exit> {
    let Some(planned) = make_plan(&args.spec, &args.target, options(&args.flags)).await? else {
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
    Ok(exit_code(&planned.plan, args.detailed_exitcode))
}
