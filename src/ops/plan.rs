//! Planning as every command does it: connect to the target, observe GKE and Kubernetes, plan,
//! predict Kueue's placements, add notices and stamp the plan with what it was made from.

use std::collections::BTreeMap;
use std::io::Write;

use super::head_start::HeadStart;
use super::load::SpecSource;
use super::session::{KubeHandle, KubeSource, Session, TargetOptions, connect_to, connect_with};
use crate::addr::ClusterRef;
use crate::gitops::provenance::{SpecInput, provenance_now, spec_revision_of};
use crate::kube::client::RealKube;
use crate::kube::connect::from_cluster;
use crate::kube::reads::{Reads, Recording};
use crate::model::DesiredState;
use crate::model::live::{KubeLive, KubeSnapshot, LiveState};
use crate::observe::cluster::read_kueue_world;
use crate::observe::kube::{Observed, nothing_yet, observe_kube};
use crate::observe::observe_gke;
use crate::placement::unmodelled::Manager;
use crate::plan::provenance::SpecRevision;
use crate::plan::{Judge, Notice, Plan, PlanOptions, Preview, plan_judged};
use crate::spec::Loaded;
use crate::spec::types::Target;

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
    /// What the plan was made from: the live cluster and Kubernetes objects, read once.
    pub live: LiveState,
    /// Kueue's world (queues, flavors, checks, priorities, namespaces, every Workload) as
    /// planning read it for the predicted placements, so that status and watch need not read it
    /// again; `None` when Kubernetes was not read.
    pub world: Option<KubeSnapshot>,
    /// The Kueue manager whose release and gates the predictions were judged by.
    pub kueue: Manager,
    /// What the plan read of live state, to tell later whether it is still as read
    /// ([`unchanged_since`]).
    pub reads: PlanReads,
}

/// What a plan read of live state: the cluster as GKE gave it and each Kubernetes read, by
/// digest ([`crate::kube::reads`]), and where it read them.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanReads {
    pub target: Target,
    pub state_dir: Option<std::path::PathBuf>,
    pub cluster: ClusterRef,
    gke: String,
    /// `None` when Kubernetes was not read.
    kube: Option<Reads>,
    /// On the local target, its Kubernetes as those reads found it when its simulation had
    /// nothing to do: then whether they still answer the same is known without reading the
    /// cluster's state file again ([`crate::local::LocalKube::still_quiet`]).
    local: Option<crate::local::Quiet>,
}

fn cluster_digest(cluster: Option<&serde_json::Value>) -> String {
    let text = cluster
        .map(serde_json::Value::to_string)
        .unwrap_or_default();
    crate::plan::digest::sha256_hex(text.as_bytes())
}

/// The cluster a plan reads Kubernetes from once it serves (a kubeconfig says it does).
fn serving(cluster: Option<&serde_json::Value>) -> Option<&serde_json::Value> {
    cluster.filter(|cluster| {
        cluster
            .get("endpoint")
            .and_then(|e| e.as_str())
            .is_some_and(|e| !e.is_empty())
    })
}

/// The Kubernetes a plan reads: the kubeconfig's, the client derived from the serving cluster,
/// or the local target's once its cluster serves.
fn kube_api<'a>(
    session: &'a Session,
    kube_client: Option<&'a RealKube>,
    serving: Option<&serde_json::Value>,
) -> Option<&'a dyn crate::kube::KubeApi> {
    match &session.kube {
        KubeSource::Kubeconfig(k) => Some(k),
        KubeSource::FromCluster(_) => kube_client.map(|k| k as _),
        KubeSource::Local(k) => serving.map(|_| k.as_ref() as _),
        KubeSource::Unavailable => None,
    }
}

/// Whether live state is still what `reads` says a plan read: the same cluster from GKE, and
/// every Kubernetes object it listed or got at the same uid and resourceVersion (so the plan
/// made now would read the same objects). Connects as `target` says (the local target's state
/// locked meanwhile); an error is the caller's to treat as a change. When the local target's
/// lists had to be read again and were unchanged, `reads` takes what they found of the
/// simulation, so that the next comparison need not read them again.
pub async fn unchanged_since(
    reads: &mut PlanReads,
    target: &TargetOptions,
    lock_timeout: std::time::Duration,
) -> anyhow::Result<bool> {
    let state_dir = reads.state_dir.clone().unwrap_or_default();
    let lock = match reads.target {
        Target::Local => Some(super::lock::lock_state_dir(&state_dir, lock_timeout).await?),
        Target::Gcp => None,
    };
    let unchanged = async {
        let session = connect_to(target, reads.target, state_dir.clone(), &reads.cluster).await?;
        let cluster = crate::observe::read_cluster(session.gke.as_ref(), &reads.cluster).await?;
        if cluster_digest(cluster.as_ref()) != reads.gke {
            return Ok((false, None));
        }
        let Some(kube_reads) = &reads.kube else {
            return Ok((true, None));
        };
        if let (Some(quiet), Some(local)) = (&reads.local, session.kube.local())
            && local.still_quiet(quiet).await?
        {
            return Ok((true, None));
        }
        let serving = serving(cluster.as_ref());
        let mut kube_client = None;
        if let (KubeSource::FromCluster(credentials), Some(cluster)) = (&session.kube, serving) {
            kube_client = Some(from_cluster(cluster, credentials).await?);
        }
        let unchanged = match kube_api(&session, kube_client.as_ref(), serving) {
            Some(api) => crate::kube::reads::unchanged(api, kube_reads).await?,
            None => false,
        };
        // Read again and unchanged: the simulation as found now stands for the same reads (a
        // write after the plan's reads, such as the recorded revision, replaced the file).
        let quiet = session
            .kube
            .local()
            .filter(|_| unchanged)
            .and_then(crate::local::LocalKube::quiet);
        // The local world is written back when its session goes: before the lock does.
        drop(session);
        anyhow::Ok((unchanged, quiet))
    }
    .await;
    if let Some(lock) = lock {
        lock.release().await;
    }
    let (unchanged, quiet) = unchanged?;
    if quiet.is_some() {
        reads.local = quiet;
    }
    Ok(unchanged)
}

impl Planned {
    /// Kueue's Workloads as planning read them; `None` when Kubernetes was not read or serves no
    /// Workloads (Kueue is not installed).
    pub fn workloads(&self) -> Option<&[serde_json::Value]> {
        self.world
            .as_ref()
            .and_then(|world| world.by_kind.get("Workload"))
            .map(Vec::as_slice)
    }

    /// How this plan's commands reach Kubernetes (see [`KubeHandle`]).
    pub fn kube(&self) -> KubeHandle<'_> {
        KubeHandle::new(&self.session, self.kube_client.as_ref(), &self.plan.cluster)
    }
}

/// Connects to the spec's target, observes and plans: the complete plan, with Kueue's predicted
/// placements, notices and provenance. `loaded` and `desired` are a valid spec
/// ([`super::load::load_valid`]).
pub async fn plan_valid(
    spec: &SpecSource,
    loaded: Loaded,
    desired: DesiredState,
    target: &TargetOptions,
    options: PlanOptions,
) -> anyhow::Result<Planned> {
    plan_started(spec, loaded, desired, target, options, HeadStart::default()).await
}

/// [`plan_valid`], taking over the reads `head` started while the spec was loaded
/// ([`super::head_start`]).
pub async fn plan_started(
    spec: &SpecSource,
    mut loaded: Loaded,
    desired: DesiredState,
    target: &TargetOptions,
    options: PlanOptions,
    mut head: HeadStart,
) -> anyhow::Result<Planned> {
    // A stack's objects say so (see `plan::ownership`).
    let desired = match &options.owner {
        Some(owner) => desired.owned_by(owner),
        None => desired,
    };
    // The revision reads the variables the document tree declares: take it before the tree goes.
    let revision = spec_revision(spec, &loaded);
    // What validation said of the spec is part of what a reviewer reads with the plan.
    let spec_notices = Notice::of_spec(&loaded.diagnostics, &loaded.sources);
    loaded.release_documents();
    head.spec_released();
    let session = connect_with(target, &loaded, head.kube().await).await?;
    if session.simulated() {
        tracing::info!("target local: simulated GKE in {:?}", session.state_dir);
    }
    let mut live = observe_gke(session.gke.as_ref(), &desired)
        .await
        .map_err(|e| anyhow::anyhow!("reading live GKE state: {e}"))?;
    let stack = desired.gke.cluster_ref.cluster.clone();
    let read = |e: crate::kube::KubeError| anyhow::anyhow!("reading live Kubernetes state: {e}");
    let mut kube_client = None;
    let mut world = None;
    let mut judged = BTreeMap::new();
    // Each desired object's action is decided as the server answers for it (a destroy decides
    // from the live objects, which it deletes).
    let judge = (!options.destroy).then(|| Judge::new(&desired, &options));
    let judge = judge.as_ref();
    // Kubernetes is read once the cluster serves it (a kubeconfig says it does).
    let serving = serving(live.gke.cluster.as_ref());
    if let (KubeSource::FromCluster(credentials), Some(cluster)) = (&session.kube, serving) {
        kube_client = Some(from_cluster(cluster, credentials).await.map_err(read)?);
    }
    // Everything the plan reads of Kubernetes is recorded (`PlanReads`).
    let recording = kube_api(&session, kube_client.as_ref(), serving).map(Recording::new);
    live.kubernetes = match &recording {
        Some(api) => {
            let (observed, read_world) =
                observe(api, &desired, &stack, judge, options.preview, &mut head)
                    .await
                    .map_err(read)?;
            world = Some(read_world);
            judged = observed.judged;
            observed.live
        }
        None if matches!(session.kube, KubeSource::Unavailable) => KubeLive::NotObserved,
        None => nothing_yet(),
    };
    let mut plan = plan_judged(&desired, &live, judged, &options)?;
    plan.notices.splice(0..0, spec_notices);
    // The Kueue release and gates whose rules decide: the spec's when gkq installs Kueue, the
    // manager's own when someone else did (the spec's when no manager is found).
    let mut kueue = Manager {
        version: Some(desired.kueue.version.clone()),
        feature_gates: desired.kueue.feature_gates.clone(),
        predict_anyway: options.predict_anyway,
    };
    if desired.kueue.mode == crate::spec::types::InstallMode::External {
        let api: Option<&dyn crate::kube::KubeApi> = match (&session.kube, &recording) {
            (KubeSource::Local(_), _) => None,
            (_, Some(recording)) => Some(recording),
            _ => None,
        };
        if let Some(api) = api {
            let found = crate::kube::install::check_external(api, &desired.kueue)
                .await
                .map_err(|e| anyhow::anyhow!(e))?;
            if let Some(version) = found.version {
                kueue.version = Some(version);
            }
            // What the running manager's arguments set wins over what the spec says of it.
            kueue.feature_gates.extend(found.feature_gates);
            plan.notices.extend(
                found
                    .notes
                    .into_iter()
                    .map(|message| crate::plan::Notice::new(None, message)),
            );
        }
    }
    check_external_jobset(&loaded, &desired, &session, recording.as_ref()).await?;
    jobset_takeovers(&mut plan, &stack, recording.as_ref()).await?;
    crate::plan::placements::annotate(&mut plan, &desired, &live, world.as_ref(), &kueue);
    plan.rungs = crate::plan::ladder::job_rungs(&loaded.spec, &plan.placements);
    stamp(&mut plan, revision, &session);
    let reads = PlanReads {
        target: session.target,
        state_dir: session.state_dir.clone(),
        cluster: desired.gke.cluster_ref.clone(),
        gke: cluster_digest(live.gke.cluster.as_ref()),
        // Taken once every read is made: the simulation is quiet only if nothing changed
        // between them.
        local: recording
            .as_ref()
            .and(session.kube.local())
            .and_then(crate::local::LocalKube::quiet),
        kube: recording.map(|r| r.reads()),
    };
    Ok(Planned {
        reads,
        loaded,
        desired,
        session,
        plan,
        kube_client,
        live,
        world,
        kueue,
    })
}

/// `jobset.install: external` with JobSets to apply (and no JobSet CRD among the spec's
/// objects): someone else's JobSet must be served.
async fn check_external_jobset(
    loaded: &Loaded,
    desired: &DesiredState,
    session: &Session,
    recording: Option<&Recording<'_>>,
) -> anyhow::Result<()> {
    use crate::model::jobset_install::{installs_jobset, is_jobset};
    if loaded.spec.jobset.install == crate::spec::types::JobSetInstall::External
        && desired.kube_objects().any(is_jobset)
        && !desired.kube_objects().any(installs_jobset)
        && let (false, Some(api)) = (matches!(session.kube, KubeSource::Local(_)), recording)
    {
        crate::kube::install::check_external_jobset(api)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(())
}

/// When the plan installs or upgrades JobSet (`jobset.install: builtin`), whose objects apply
/// with force: a notice of the fields that takes over from other field managers (an earlier
/// install by kubectl or helm, say), found by dry runs without force.
async fn jobset_takeovers(
    plan: &mut Plan,
    stack: &str,
    recording: Option<&Recording<'_>>,
) -> anyhow::Result<()> {
    let addr = crate::addr::ResourceAddr::jobset_install();
    let Some(version) = plan
        .actions
        .iter()
        .find(|a| a.addr == addr && a.kind.is_change())
        .and_then(|a| a.desired.as_deref())
        .and_then(|d| d.pointer("/spec/version"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
    else {
        return Ok(());
    };
    let Some(api) = recording else {
        return Ok(());
    };
    let takeovers = crate::kube::install::jobset_takeovers(api, &version, stack)
        .await
        .map_err(|e| {
            anyhow::anyhow!("checking what installing JobSet {version} takes over: {e}")
        })?;
    plan.notices.extend(crate::plan::conflicts::takeover_notice(
        &addr,
        &format!("JobSet {version}"),
        &takeovers,
    ));
    Ok(())
}

/// Kueue's world and the spec's objects, each kind listed once.
async fn observe(
    api: &Recording<'_>,
    desired: &DesiredState,
    stack: &str,
    judge: Option<&Judge>,
    preview: Preview,
    head: &mut HeadStart,
) -> crate::kube::KubeResult<(Observed, KubeSnapshot)> {
    // What gkq owns in the stack may have been listed early (for the stack the spec's head
    // named, taken only when it is this one).
    if let Some(prefetched) = head.owned(stack).await {
        api.take_prefetched(prefetched);
    }
    // The world is read beside the lists of the other kinds (or was, from the head start); the
    // spec's Kueue objects are taken from it.
    let world = Box::pin(async move {
        match head.world().await {
            Some((world, reads)) => {
                api.absorb(reads);
                world
            }
            None => read_kueue_world(api).await,
        }
    });
    let mut objects = observe_kube(api, desired, stack, Some(world), judge, preview).await?;
    let world = objects.world.take().unwrap_or_default();
    Ok((objects, world))
}

/// `GKQ_PLAN_KEY`: the key that signs and checks plan files (a CI secret shared by the job that
/// plans and the job that applies). Unset or empty: plan files carry a plain sha256.
pub fn plan_key() -> Option<Vec<u8>> {
    std::env::var_os("GKQ_PLAN_KEY")
        .filter(|k| !k.is_empty())
        .map(|k| k.to_string_lossy().into_owned().into_bytes())
}

/// The revision of the spec `args` loaded.
pub fn spec_revision(args: &SpecSource, loaded: &Loaded) -> SpecRevision {
    spec_revision_of(
        loaded,
        &SpecInput {
            arg: &args.spec,
            git_ref: args.git_ref.as_deref(),
        },
    )
}

/// Records in the plan what it was made from (saved plans check it when applied).
fn stamp(plan: &mut Plan, revision: SpecRevision, session: &Session) {
    plan.provenance = Some(provenance_now(
        revision,
        session.target,
        session.state_dir.as_deref(),
    ));
}

/// Writes a plan file readable only by its owner (plans describe infrastructure), with its
/// integrity digest (keyed with `GKQ_PLAN_KEY` when set), streamed to the file
/// ([`crate::gitops::saved::write_file`]). Sensitive values are never in it.
pub fn write_plan_file(path: &std::path::Path, plan: &Plan) -> anyhow::Result<()> {
    let key = plan_key();
    let file = crate::owner_only::create_truncated(path)
        .map_err(|e| anyhow::anyhow!("cannot write the plan to {}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    crate::gitops::saved::write_file(plan, key.as_deref(), &mut out)?;
    out.flush()?;
    Ok(())
}
