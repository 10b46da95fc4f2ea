//! A connection to one target for the length of a command: Google Cloud or the embedded local
//! target, its GKE client, and how Kubernetes is reached. Which Kubernetes client a command uses
//! is decided here, once ([`KubeHandle`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::addr::ClusterRef;
use crate::emulator::{Emulator, EmulatorConfig, EmulatorHandle};
use crate::gke::{
    AdcTokenSource, AnonymousTokenSource, DEFAULT_STS_ENDPOINT, GkeApi, RestGke, TokenSource,
    WorkloadIdentity,
};
use crate::kube::KubeApi;
use crate::kube::client::RealKube;
use crate::kube::connect::{ClusterCredentials, LazyKube};
use crate::spec::Loaded;
use crate::spec::types::Target;

/// Where a command acts, as the command line or a caller chose it.
#[derive(Debug, Clone, Default)]
pub struct TargetOptions {
    /// `None`: the spec's `target`.
    pub target: Option<Target>,
    /// State directory of the local target (default: `.gkq/local` next to the spec).
    pub state_dir: Option<PathBuf>,
    /// A GKE API endpoint that overrides the target's.
    pub gke_endpoint: Option<String>,
    /// Reach Kubernetes through this kubeconfig file instead of credentials derived from GKE.
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (implies a kubeconfig: the file, $KUBECONFIG or ~/.kube/config).
    pub context: Option<String>,
    /// Act in Kubernetes as this user (`Impersonate-User` on every request): the agent's
    /// per-stack ServiceAccount, `system:serviceaccount:NAMESPACE:NAME`. The cluster's RBAC then
    /// decides what the stack may read and write. Needs a real API server.
    pub impersonate: Option<String>,
    /// Make GKE calls with this Google identity (the agent's per-stack ServiceAccount, its token
    /// exchanged at the Security Token Service) instead of Application Default Credentials
    /// (`gcp`) or no credentials (`local`).
    pub workload_identity: Option<Arc<WorkloadIdentity>>,
    /// Where that Security Token Service is: Google's (`gcp`) or the GKE endpoint's, the
    /// emulator's (`local`) unless given.
    pub sts_endpoint: Option<String>,
}

impl TargetOptions {
    /// The credentials of the session's GKE calls: the workload identity's, exchanged at
    /// `sts_endpoint` (else `default_sts`), or `otherwise`.
    fn gke_tokens(
        &self,
        default_sts: &str,
        otherwise: impl FnOnce() -> anyhow::Result<Arc<dyn TokenSource>>,
    ) -> anyhow::Result<Arc<dyn TokenSource>> {
        match &self.workload_identity {
            Some(identity) => {
                Ok(identity.tokens_at(self.sts_endpoint.as_deref().unwrap_or(default_sts)))
            }
            None => otherwise(),
        }
    }
}

/// How a session reaches Kubernetes.
pub enum KubeSource {
    /// A kubeconfig context the user named.
    Kubeconfig(RealKube),
    /// Endpoint, CA and token derived from the GKE cluster, with these credentials.
    FromCluster(ClusterCredentials),
    /// The local target's object store and simulated cluster.
    Local(Box<crate::local::LocalKube>),
    /// Not reachable from this target (yet).
    Unavailable,
}

impl KubeSource {
    /// The local target's Kubernetes, when this is it.
    pub fn local(&self) -> Option<&crate::local::LocalKube> {
        match self {
            KubeSource::Local(k) => Some(k),
            _ => None,
        }
    }
}

/// A connection to one target for the length of a command.
pub struct Session {
    pub target: Target,
    pub gke: Box<dyn GkeApi>,
    pub state_dir: Option<PathBuf>,
    pub kube: KubeSource,
    /// Keeps the in-process emulator alive while the session is.
    _emulator: Option<EmulatorHandle>,
}

impl Session {
    /// Whether what this session shows is simulated (the local target).
    pub fn simulated(&self) -> bool {
        self.target == Target::Local
    }
}

pub fn resolve_target(args: &TargetOptions, loaded: &Loaded) -> Target {
    args.target.unwrap_or(loaded.spec.target)
}

/// The directory next to a spec that holds what gkq keeps for it (`.gkq/local`, the local
/// target's default state directory).
pub const STATE_ROOT: &str = ".gkq";

/// What the `.gitignore` gkq writes in a [`STATE_ROOT`] holds: everything in it, itself
/// included, stays out of git (the local target's state holds Secret values in clear).
pub const STATE_ROOT_GITIGNORE: &str = "*\n";

pub fn state_dir(args: &TargetOptions, loaded: &Loaded) -> PathBuf {
    args.state_dir
        .clone()
        .unwrap_or_else(|| loaded.dir.join(STATE_ROOT).join("local"))
}

/// Creates the local target's state directory `dir` (owner-only, as everything gkq writes in
/// it), and gives the [`STATE_ROOT`] it is in a `.gitignore` of everything, unless it has one.
pub fn ensure_state_dir(dir: &Path) -> anyhow::Result<()> {
    crate::owner_only::create_dir_all(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot create the local state directory {}: {e}",
            dir.display()
        )
    })?;
    let Some(root) = dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == STATE_ROOT))
    else {
        return Ok(());
    };
    let path = root.join(".gitignore");
    // `create_new`: a .gitignore the user wrote (or an earlier run did) is never replaced.
    match crate::owner_only::create_new(&path) {
        Ok(mut file) => file
            .write_all(STATE_ROOT_GITIGNORE.as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot write {}: {e}", path.display())),
    }
}

/// The client of the kubeconfig (or context) `args` names; `None` when it names none.
pub(super) async fn kubeconfig(args: &TargetOptions) -> anyhow::Result<Option<RealKube>> {
    if args.kubeconfig.is_none() && args.context.is_none() {
        return Ok(None);
    }
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("reading kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options).await?
        }
        None => kube::Config::from_kubeconfig(&options).await?,
    };
    crate::kube::client::require_verified_tls(&config)?;
    let mut config = config;
    config.auth_info.impersonate = args.impersonate.clone();
    Ok(Some(RealKube::new(kube::Client::try_from(config)?)))
}

pub async fn connect(args: &TargetOptions, loaded: &Loaded) -> anyhow::Result<Session> {
    connect_with(args, loaded, None).await
}

/// [`connect`], with the kubeconfig's client as built already (`explicit`; `None`: built
/// here), by a head start (`ops::head_start`).
pub async fn connect_with(
    args: &TargetOptions,
    loaded: &Loaded,
    explicit: Option<anyhow::Result<Option<RealKube>>>,
) -> anyhow::Result<Session> {
    let cluster = ClusterRef {
        project: loaded.spec.project.clone(),
        location: loaded.spec.location.clone(),
        cluster: loaded.spec.cluster.name.clone(),
    };
    connect_built(
        args,
        resolve_target(args, loaded),
        state_dir(args, loaded),
        &cluster,
        explicit,
    )
    .await
}

/// [`connect`] without a spec: for a saved plan, which names its own target, state directory
/// and cluster (`local_state_dir` and `cluster` are used by the local target only: its
/// Kubernetes belongs to that cluster).
pub async fn connect_to(
    args: &TargetOptions,
    target: Target,
    local_state_dir: PathBuf,
    cluster: &ClusterRef,
) -> anyhow::Result<Session> {
    connect_built(args, target, local_state_dir, cluster, None).await
}

async fn connect_built(
    args: &TargetOptions,
    target: Target,
    local_state_dir: PathBuf,
    cluster: &ClusterRef,
    explicit: Option<anyhow::Result<Option<RealKube>>>,
) -> anyhow::Result<Session> {
    crate::gke::install_tls_provider();
    let explicit_kube = match explicit {
        Some(built) => built?,
        None => kubeconfig(args).await?,
    };
    match target {
        Target::Local => {
            let dir = local_state_dir;
            ensure_state_dir(&dir)?;
            let config = EmulatorConfig {
                state_dir: Some(dir.join("gke")),
                pending_ms: 100,
                running_ms: 300,
                ..EmulatorConfig::default()
            };
            let (url, handle) = Emulator::start_in_process(config).await?;
            let in_process = args.gke_endpoint.is_none();
            let endpoint = args.gke_endpoint.clone().unwrap_or(url);
            let anonymous: Arc<dyn TokenSource> = Arc::new(AnonymousTokenSource);
            let tokens = args.gke_tokens(&endpoint, || Ok(anonymous.clone()))?;
            let kube = match explicit_kube {
                Some(k) => KubeSource::Kubeconfig(k),
                None if args.impersonate.is_some() => anyhow::bail!(
                    "the local target's simulated Kubernetes has no RBAC, so it cannot act as {}\nhint: give the agent a real API server (--kubeconfig), or leave the stack without a ServiceAccount",
                    args.impersonate.as_deref().unwrap_or_default()
                ),
                None => {
                    let settings =
                        crate::local::Settings::from_env().map_err(|e| anyhow::anyhow!("{e}"))?;
                    let local = crate::local::LocalKube::open(
                        &dir,
                        // The simulation's own reads, not a stack's calls.
                        Box::new(RestGke::with_endpoint(&endpoint, anonymous)?),
                        cluster.clone(),
                        in_process.then(|| handle.emulator().clone()),
                        settings,
                        crate::gitops::lock::file_held_by_this_process,
                    )?;
                    KubeSource::Local(Box::new(local))
                }
            };
            Ok(Session {
                target,
                gke: Box::new(RestGke::with_endpoint(&endpoint, tokens)?),
                state_dir: Some(dir),
                kube,
                _emulator: Some(handle),
            })
        }
        Target::Gcp => {
            let kube = match explicit_kube {
                Some(k) => KubeSource::Kubeconfig(k),
                None if args.gke_endpoint.is_some() => KubeSource::Unavailable,
                None => match AdcTokenSource::for_kubernetes(&crate::gke::process_env) {
                    Ok(t) => KubeSource::FromCluster(ClusterCredentials {
                        tokens: Arc::new(t),
                        impersonate: args.impersonate.clone(),
                    }),
                    Err(_) => KubeSource::Unavailable,
                },
            };
            let gke: Box<dyn GkeApi> = match &args.gke_endpoint {
                Some(endpoint) => {
                    let tokens = args
                        .gke_tokens(DEFAULT_STS_ENDPOINT, || Ok(Arc::new(AnonymousTokenSource)))?;
                    Box::new(RestGke::with_endpoint(endpoint, tokens)?)
                }
                None => {
                    let tokens = args.gke_tokens(DEFAULT_STS_ENDPOINT, || {
                        Ok(Arc::new(AdcTokenSource::new(&crate::gke::process_env).map_err(|e| {
                            anyhow::anyhow!(
                                "{e}\nhint: run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS; use `--target local` to try gkq without Google Cloud"
                            )
                        })?))
                    })?;
                    Box::new(RestGke::new(tokens)?)
                }
            };
            Ok(Session {
                target,
                gke,
                state_dir: None,
                kube,
                _emulator: None,
            })
        }
    }
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
            (KubeSource::FromCluster(credentials), None) => KubeHandle::Lazy(Box::new(
                LazyKube::new(session.gke.as_ref(), cluster.clone(), credentials.clone()),
            )),
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
