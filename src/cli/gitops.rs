//! What `plan`, `apply`, `status` and `watch` share from [`crate::gitops`]: stamping a plan with
//! its provenance, CI exit codes, the apply lock, and recording the applied revision.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::SpecArgs;
use super::target::{KubeSource, Session, TargetArgs};
use crate::addr::ClusterRef;
use crate::gitops::lock::{self, ApplyLock, LockOptions};
use crate::gitops::provenance::{SpecInput, provenance_now, spec_revision_of};
use crate::gitops::revision::{self, AppliedRevision};
use crate::gke::PollConfig;
use crate::kube::KubeApi;
use crate::kube::client::RealKube;
use crate::kube::connect::LazyKube;
use crate::plan::Plan;
use crate::plan::provenance::SpecRevision;
use crate::spec::Loaded;
use crate::vocab::duration;

/// `--lock-timeout`, shared by the commands that apply.
#[derive(Debug, Args, Clone, Default)]
pub struct LockArgs {
    /// How long to wait when another apply holds the cluster's lock (`30s`, `10m`, `1h30m`); 0
    /// fails at once, naming the holder (on the local target after waiting out holds of a moment).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration::parse_flag)]
    pub lock_timeout: Duration,
}

/// `GKQ_PLAN_KEY`: the key that signs and checks plan files (a CI secret shared by the job that
/// plans and the job that applies). Unset or empty: plan files carry a plain sha256.
pub fn plan_key() -> Option<Vec<u8>> {
    std::env::var_os("GKQ_PLAN_KEY")
        .filter(|k| !k.is_empty())
        .map(|k| k.to_string_lossy().into_owned().into_bytes())
}

/// The revision of the spec `args` loaded.
pub fn spec_revision(args: &SpecArgs, loaded: &Loaded) -> SpecRevision {
    spec_revision_of(
        loaded,
        &SpecInput {
            arg: &args.spec,
            git_ref: args.git_ref.as_deref(),
        },
    )
}

/// Records in the plan what it was made from (saved plans check it when applied).
pub fn stamp(plan: &mut Plan, revision: SpecRevision, session: &Session) {
    plan.provenance = Some(provenance_now(
        revision,
        session.target,
        session.state_dir.as_deref(),
    ));
}

/// How an apply reaches Kubernetes: a client the session already has, one connected lazily from
/// the (possibly new) cluster, or none.
pub enum KubeHandle<'a> {
    Real(&'a RealKube),
    Lazy(Box<LazyKube<'a>>),
    /// The local target's object store and simulated cluster.
    Local(&'a crate::local::LocalKube),
    None,
}

impl<'a> KubeHandle<'a> {
    pub fn new(
        session: &'a Session,
        kube_client: Option<&'a RealKube>,
        cluster: &ClusterRef,
    ) -> Self {
        match (&session.kube, kube_client) {
            (KubeSource::Kubeconfig(k), _) => KubeHandle::Real(k),
            (KubeSource::Local(k), _) => KubeHandle::Local(k),
            (_, Some(k)) => KubeHandle::Real(k),
            (KubeSource::FromCluster(tokens), None) => KubeHandle::Lazy(Box::new(LazyKube::new(
                session.gke.as_ref(),
                cluster.clone(),
                tokens.clone(),
            ))),
            (KubeSource::Unavailable, None) => KubeHandle::None,
        }
    }

    pub fn api(&self) -> Option<&dyn KubeApi> {
        match self {
            KubeHandle::Real(k) => Some(*k),
            KubeHandle::Lazy(k) => Some(k.as_ref()),
            KubeHandle::Local(k) => Some(*k),
            KubeHandle::None => None,
        }
    }
}

fn lock_options(args: &LockArgs) -> LockOptions {
    LockOptions {
        timeout: args.lock_timeout,
        ..LockOptions::default()
    }
}

fn announce_wait(timeout: Duration) -> impl FnMut(&str) + Send {
    move |holder: &str| {
        eprintln!(
            "Waiting up to {} for the cluster's lock, held by {holder}...",
            lock::human(timeout)
        );
    }
}

fn lock_error(e: lock::LockError) -> anyhow::Error {
    let hint = e.hint();
    anyhow::anyhow!("{e}\nhint: {hint}")
}

/// Takes the local target's state lock (`<state dir>/apply.lock`) when `spec` resolves to the
/// local target; `None` for Google Cloud.
///
/// It is taken *before* planning: each gkq process loads the local world from the state
/// directory when it connects, so a second apply must not even read it until the first has
/// written everything back. (On Google Cloud, GKE and the API server are the shared truth, and
/// the Lease plus the whole-plan check after it are enough.)
pub async fn lock_local_state(
    spec: &SpecArgs,
    target: &TargetArgs,
    args: &LockArgs,
) -> anyhow::Result<Option<ApplyLock>> {
    // Problems with the spec are reported by the planning that follows; here it only names the
    // target and the state directory.
    let (ok, _, _) = super::load_valid(spec);
    let Some((loaded, _)) = ok else {
        return Ok(None);
    };
    if super::target::resolve_target(target, &loaded) != crate::spec::types::Target::Local {
        return Ok(None);
    }
    lock_state_dir(&super::target::state_dir(target, &loaded), args)
        .await
        .map(Some)
}

/// The local target's state lock for a known state directory (saved plans name theirs).
pub async fn lock_state_dir(dir: &std::path::Path, args: &LockArgs) -> anyhow::Result<ApplyLock> {
    std::fs::create_dir_all(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot create the local state directory {}: {e}",
            dir.display()
        )
    })?;
    let options = lock_options(args);
    let mut on_wait = announce_wait(options.timeout);
    lock::file(dir, &lock::holder_identity(), &options, &mut on_wait)
        .await
        .map_err(lock_error)
}

/// Takes the cluster's Lease when Kubernetes is reachable now. Before the cluster exists there is
/// nothing to hold it in: GKE runs one operation per cluster at a time and refuses a second
/// create. (The local target's own state is locked by [`lock_local_state`].)
pub async fn acquire_lock(
    session: &Session,
    kube_client: Option<&RealKube>,
    stack: &str,
    args: &LockArgs,
) -> anyhow::Result<ApplyLock> {
    let real = match (&session.kube, kube_client) {
        (KubeSource::Kubeconfig(k), _) => Some(k),
        (_, Some(k)) => Some(k),
        _ => None,
    };
    let Some(kube) = real else {
        return Ok(ApplyLock::unlocked(if session.simulated() {
            "the local target's state directory is locked instead"
        } else {
            "Kubernetes is not reachable yet; GKE runs one operation per cluster at a time"
        }));
    };
    let options = lock_options(args);
    let mut on_wait = announce_wait(options.timeout);
    let held = lock::lease(
        kube.client().clone(),
        stack,
        &lock::holder_identity(),
        &options,
        &mut on_wait,
    )
    .await
    .map_err(lock_error)?;
    tracing::info!("holding {}", held.describe());
    Ok(held)
}

/// How operations are polled when recording the revision: quickly on the local target, whose
/// operations finish in well under a second.
fn label_poll(session: &Session) -> PollConfig {
    let mut poll = session.gke.poll_config();
    if session.simulated() {
        poll.initial = Duration::from_millis(100);
        poll.max = Duration::from_millis(500);
    }
    poll
}

/// Records what was applied: the revision ConfigMap (when Kubernetes is reachable) and the
/// cluster's revision labels. Failures are warnings: the apply itself has succeeded.
pub async fn record_revision(
    session: &Session,
    kube: Option<&dyn KubeApi>,
    cluster: &ClusterRef,
    spec: &SpecRevision,
) {
    let revision = AppliedRevision::now(spec);
    let mut recorded = Vec::new();
    if let Some(kube) = kube {
        match revision::write_configmap(kube, &cluster.cluster, &revision).await {
            Ok(()) => recorded.push(format!(
                "ConfigMap {}/{}",
                revision::REVISION_NAMESPACE,
                revision::configmap_name(&cluster.cluster)
            )),
            Err(e) => eprintln!("warning: {e}\n  {}", e.hint()),
        }
    }
    match revision::write_gke_labels(
        session.gke.as_ref(),
        cluster,
        &revision,
        &label_poll(session),
    )
    .await
    {
        Ok(_) => recorded.push("the cluster's labels".to_string()),
        Err(e) => eprintln!("warning: {e}\n  {}", e.hint()),
    }
    if !recorded.is_empty() {
        eprintln!(
            "Recorded the applied revision in {}: {}.",
            recorded.join(" and "),
            spec.describe()
        );
    }
}

/// The spec arguments that reload the spec a saved plan was made from.
pub fn spec_args_for(planned: &SpecRevision, given: &SpecArgs) -> SpecArgs {
    SpecArgs {
        spec: PathBuf::from(&planned.path),
        env: given.env.clone().or_else(|| planned.env.clone()),
        vars: given.vars.clone(),
        git_ref: given.git_ref.clone().or_else(|| planned.git_ref.clone()),
    }
}
