//! Where `plan` and `apply` act: Google Cloud, or the embedded local target. Both use the same
//! clients and engine; only the endpoints differ.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use crate::emulator::{Emulator, EmulatorConfig, EmulatorHandle};
use crate::gke::{AdcTokenSource, AnonymousTokenSource, GkeApi, RestGke, TokenSource};
use crate::kube::client::RealKube;
use crate::spec::Loaded;
use crate::spec::types::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TargetFlag {
    Gcp,
    Local,
}

#[derive(Debug, Args, Clone, Default)]
pub struct TargetArgs {
    /// Where to act: `gcp` (Google Cloud, Application Default Credentials) or `local` (the
    /// embedded emulator; no credentials, no network). Defaults to the spec's `target`.
    #[arg(long, value_enum)]
    pub target: Option<TargetFlag>,
    /// State directory of the local target (default: .gkq/local next to the spec).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// GKE API endpoint (for example a `gkq emulator serve` URL); overrides the target's.
    #[arg(long, value_name = "URL", env = "GKQ_GKE_ENDPOINT")]
    pub gke_endpoint: Option<String>,
    /// Reach Kubernetes through this kubeconfig file instead of credentials derived from the
    /// GKE cluster.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (implies a kubeconfig: --kubeconfig, $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// How a session reaches Kubernetes.
pub enum KubeSource {
    /// A kubeconfig context the user named.
    Kubeconfig(RealKube),
    /// Endpoint, CA and token derived from the GKE cluster, with these credentials.
    FromCluster(Arc<dyn TokenSource>),
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

pub fn resolve_target(args: &TargetArgs, loaded: &Loaded) -> Target {
    match args.target {
        Some(TargetFlag::Gcp) => Target::Gcp,
        Some(TargetFlag::Local) => Target::Local,
        None => loaded.spec.target,
    }
}

pub fn state_dir(args: &TargetArgs, loaded: &Loaded) -> PathBuf {
    args.state_dir
        .clone()
        .unwrap_or_else(|| loaded.dir.join(".gkq").join("local"))
}

async fn kubeconfig(args: &TargetArgs) -> anyhow::Result<Option<RealKube>> {
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
    Ok(Some(RealKube::new(kube::Client::try_from(config)?)))
}

pub async fn connect(args: &TargetArgs, loaded: &Loaded) -> anyhow::Result<Session> {
    let cluster = crate::addr::ClusterRef {
        project: loaded.spec.project.clone(),
        location: loaded.spec.location.clone(),
        cluster: loaded.spec.cluster.name.clone(),
    };
    connect_to(
        args,
        resolve_target(args, loaded),
        state_dir(args, loaded),
        &cluster,
    )
    .await
}

/// [`connect`] without a spec: for a saved plan, which names its own target, state directory
/// and cluster (`local_state_dir` and `cluster` are used by the local target only: its
/// Kubernetes belongs to that cluster).
pub async fn connect_to(
    args: &TargetArgs,
    target: Target,
    local_state_dir: PathBuf,
    cluster: &crate::addr::ClusterRef,
) -> anyhow::Result<Session> {
    crate::gke::install_tls_provider();
    let explicit_kube = kubeconfig(args).await?;
    match target {
        Target::Local => {
            let dir = local_state_dir;
            std::fs::create_dir_all(&dir).map_err(|e| {
                anyhow::anyhow!(
                    "cannot create the local state directory {}: {e}",
                    dir.display()
                )
            })?;
            let config = EmulatorConfig {
                state_dir: Some(dir.join("gke")),
                pending_ms: 100,
                running_ms: 300,
                ..EmulatorConfig::default()
            };
            let (url, handle) = Emulator::start_in_process(config).await?;
            let in_process = args.gke_endpoint.is_none();
            let endpoint = args.gke_endpoint.clone().unwrap_or(url);
            let tokens: Arc<dyn TokenSource> = Arc::new(AnonymousTokenSource);
            let kube = match explicit_kube {
                Some(k) => KubeSource::Kubeconfig(k),
                None => {
                    let settings =
                        crate::local::Settings::from_env().map_err(|e| anyhow::anyhow!("{e}"))?;
                    let local = crate::local::LocalKube::open(
                        &dir,
                        Box::new(RestGke::with_endpoint(&endpoint, tokens.clone())?),
                        cluster.clone(),
                        in_process.then(|| handle.emulator().clone()),
                        settings,
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
                None => match AdcTokenSource::for_kubernetes() {
                    Ok(t) => KubeSource::FromCluster(Arc::new(t)),
                    Err(_) => KubeSource::Unavailable,
                },
            };
            let gke: Box<dyn GkeApi> = match &args.gke_endpoint {
                Some(endpoint) => Box::new(RestGke::with_endpoint(
                    endpoint,
                    Arc::new(AnonymousTokenSource),
                )?),
                None => {
                    let tokens: Arc<dyn TokenSource> = Arc::new(AdcTokenSource::new().map_err(|e| {
                        anyhow::anyhow!(
                            "{e}\nhint: run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS; use `--target local` to try gkq without Google Cloud"
                        )
                    })?);
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
