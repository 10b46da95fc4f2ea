//! `gkq agent`: the pull-based GitOps agent. A kube-runtime Controller over `GkqStack` objects
//! ([`crd`]) reconciles each stack ([`reconcile`]): fetch its repository at its interval or on a
//! push webhook, validate, plan, and apply plans that only create and update; hold the others
//! until their digest is approved ([`decide`]). One replica leads ([`leader`]); the others wait.
//!
//! ```text
//! crd        the GkqStack custom resource and its generated CRD
//! decide     apply, hold or refuse; conditions; redaction of secrets           [pure]
//! source     fetching a stack's repository with its credentials (git)
//! store      GkqStacks, Secrets and Events: the API server, or a file for the local target
//! events     Events aggregated into series, as client-go's recorder does
//! reconcile  one stack's reconcile, through the ops calls
//! leader     leader election with a coordination.k8s.io Lease, fail-stop
//! webhook    GitHub and GitLab push signatures                                 [pure]
//! metrics    Prometheus text
//! own        which cluster the agent runs in (the GKE metadata server)
//! http       /hooks/{namespace}/{name} and /metrics on listeners of their own; probes on both
//! ```

pub mod crd;
pub mod decide;
pub mod events;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod own;
pub mod reconcile;
pub mod source;
pub mod source_check;
pub mod store;
pub mod webhook;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::mpsc;

use crate::addr::ClusterRef;
use crate::ops::session::TargetOptions;
use crate::spec::types::Target;
use crd::GkqStack;
use http::Endpoints;
use metrics::Metrics;
use reconcile::{Context, Leadership};
use store::{KubeStore, LocalStore, StackStore};

/// Where the GkqStack objects live.
#[derive(Debug, Clone)]
pub enum Management {
    /// A Kubernetes API server: in-cluster configuration, or this kubeconfig.
    Kube {
        kubeconfig: Option<PathBuf>,
        /// Watch stacks in this namespace only (`None`: every namespace).
        watch_namespace: Option<String>,
        /// The namespace of the leader Lease.
        lease_namespace: String,
        lease_name: String,
    },
    /// The local target's state directory, with the stacks of these manifest files created at
    /// start.
    Local {
        state_dir: PathBuf,
        stacks: Vec<PathBuf>,
    },
}

#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub management: Management,
    /// Where the stacks' plans act (their spec's target unless given).
    pub target: TargetOptions,
    /// Where push webhooks and the probes are served.
    pub webhook_listen: SocketAddr,
    /// Where /metrics (and the probes) are served: loopback unless told otherwise.
    pub metrics_listen: SocketAddr,
    /// Where repositories are checked out.
    pub work_dir: PathBuf,
    pub lease_duration: Duration,
    /// The cluster the agent runs in: never deleted.
    pub own_cluster: Option<ClusterRef>,
    /// This replica's name in the Lease and in Events.
    pub identity: String,
    /// Whether stacks may follow `file://` repositories (the agent's own disk).
    pub allow_file_urls: bool,
    /// The ServiceAccount (in each stack's namespace) a stack acts as when it names none;
    /// `None`: such a stack acts with the agent's own rights (a single-team install).
    pub default_service_account: Option<String>,
    /// The shortest `spec.interval` the agent runs; a stack asking for less is refused.
    pub min_interval: Duration,
    /// After creating each job Kueue queues, how long an apply waits for Kueue's decision on
    /// it before the next (`--submit-wait`).
    pub submit_wait: Duration,
    /// The STS audience stacks' ServiceAccount tokens are exchanged for (default: GKE's built-in
    /// pool of `own_cluster`).
    pub workload_identity_audience: Option<String>,
    /// How many stacks are reconciled at once (on a real cluster; one at a time where stacks
    /// share the local target's state directory).
    pub concurrency: u16,
}

/// The addresses the agent serves on.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    pub webhook: SocketAddr,
    pub metrics: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("connecting to the management cluster: {0}")]
    Connect(String),
    #[error("{0}")]
    Store(#[from] store::StoreError),
    #[error("serving {addr}: {message}")]
    Serve { addr: String, message: String },
    #[error("leader election: {0}")]
    Leader(kube::Error),
    #[error("locking the local state directory: {0}")]
    Lock(String),
}

/// The management cluster's client: this kubeconfig, or in-cluster configuration (then
/// `$KUBECONFIG` or `~/.kube/config`).
pub async fn management_client(
    kubeconfig: Option<&std::path::Path>,
) -> Result<kube::Client, AgentError> {
    let config = management_config(kubeconfig).await?;
    kube::Client::try_from(config).map_err(|e| AgentError::Connect(e.to_string()))
}

/// The management cluster's configuration (see [`management_client`]); the agent derives the
/// clients that act as a stack's ServiceAccount from it.
pub async fn management_config(
    kubeconfig: Option<&std::path::Path>,
) -> Result<kube::Config, AgentError> {
    crate::gke::install_tls_provider();
    let connect = |e: &dyn std::fmt::Display| AgentError::Connect(e.to_string());
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| connect(&e))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(|e| connect(&e))?
        }
        None => kube::Config::infer().await.map_err(|e| connect(&e))?,
    };
    Ok(config)
}

/// Runs the agent until `stop` resolves. `on_listen` is told the addresses the endpoints serve
/// on. Once `stop` resolves, running applies are interrupted (they stop between actions and
/// release their locks), the controller waits for its reconciles to end, and only then is the
/// leader Lease released.
pub async fn run(
    options: AgentOptions,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    on_listen: impl FnOnce(Listening),
) -> Result<(), AgentError> {
    let metrics = Arc::new(Metrics::default());
    let endpoints = Arc::new(Endpoints {
        metrics: metrics.clone(),
        ready: Default::default(),
        store: Default::default(),
        controller: Default::default(),
    });
    on_listen(serve_endpoints(&options, &endpoints).await?);
    let interrupt = crate::interrupt::Interrupt::new();
    let stop = interrupting_on(stop, interrupt.clone());
    let (trigger, triggers) = mpsc::unbounded_channel();
    let started = Started {
        endpoints,
        metrics,
        interrupt,
        trigger,
    };
    let webhook = tokio_stream_of(triggers);
    match &options.management {
        Management::Kube {
            kubeconfig,
            watch_namespace,
            lease_namespace,
            lease_name,
        } => {
            let lease = leader::LeaderOptions {
                namespace: lease_namespace.clone(),
                name: lease_name.clone(),
                identity: options.identity.clone(),
                lease_duration: options.lease_duration,
            };
            let management = (kubeconfig.as_deref(), watch_namespace.clone());
            run_on_kube(&options, management, lease, started, webhook, stop).await
        }
        Management::Local { state_dir, stacks } => {
            run_on_local(&options, state_dir, stacks, started, webhook, stop).await
        }
    }
}

/// What the agent has once its endpoints serve, whichever way it keeps its stacks.
struct Started {
    endpoints: Arc<Endpoints>,
    metrics: Arc<Metrics>,
    interrupt: crate::interrupt::Interrupt,
    /// Where the webhook endpoint sends the stacks a push asks to be fetched now.
    trigger: mpsc::UnboundedSender<kube::runtime::reflector::ObjectRef<GkqStack>>,
}

impl Started {
    /// Hands the controller's context and the webhook's trigger to the endpoints, which are then
    /// ready.
    fn ready(&self, ctx: &Arc<Context>) {
        let _ = self
            .endpoints
            .controller
            .set((ctx.clone(), self.trigger.clone()));
        self.endpoints.ready.store(true, Ordering::SeqCst);
    }
}

/// Serves the webhook and metrics endpoints; returns where.
async fn serve_endpoints(
    options: &AgentOptions,
    endpoints: &Arc<Endpoints>,
) -> Result<Listening, AgentError> {
    Ok(Listening {
        webhook: serve(
            options.webhook_listen,
            http::webhook_router(endpoints.clone()),
        )
        .await?,
        metrics: serve(
            options.metrics_listen,
            http::metrics_router(endpoints.clone()),
        )
        .await?,
    })
}

/// `stop`, which when it resolves also interrupts the running applies (they stop between
/// actions).
async fn interrupting_on(
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    interrupt: crate::interrupt::Interrupt,
) {
    stop.await;
    tracing::info!("stopping: running applies stop between actions");
    interrupt.trigger();
}

/// The agent over the GkqStacks of a Kubernetes API server (`kubeconfig`, the namespace watched):
/// once this replica leads (`lease`), until `stop`; then the Lease is released.
async fn run_on_kube(
    options: &AgentOptions,
    (kubeconfig, watch_namespace): (Option<&std::path::Path>, Option<String>),
    lease: leader::LeaderOptions,
    started: Started,
    webhook: impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<GkqStack>> + Send + 'static,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), AgentError> {
    let config = management_config(kubeconfig).await?;
    let client =
        kube::Client::try_from(config.clone()).map_err(|e| AgentError::Connect(e.to_string()))?;
    let store = Arc::new(
        KubeStore::new(client.clone(), watch_namespace, &options.identity)
            .acting_as_stacks(config, options.default_service_account.clone()),
    );
    let _ = started.endpoints.store.set(store.clone());
    started.endpoints.ready.store(true, Ordering::SeqCst);
    // The agent's own client requests the stacks' ServiceAccount tokens.
    let token_requests = client.clone();
    let leadership = leader::lead(client, lease, |holder| {
        tracing::info!("standing by: {holder} leads")
    })
    .await
    .map_err(AgentError::Leader)?;
    let api = store.api();
    let leadership = Arc::new(leadership);
    let ctx = context(
        options,
        store,
        started.metrics.clone(),
        leadership.clone(),
        &started.interrupt,
        Some(token_requests),
    );
    started.ready(&ctx);
    let concurrency = if options.target.target == Some(Target::Local) {
        1
    } else {
        options.concurrency
    };
    let controller = Controller::new(api, watcher::Config::default());
    drive(controller, concurrency, webhook, stop, ctx).await;
    leadership.release().await;
    Ok(())
}

/// The agent over the local target's stacks in `state_dir` (those of the manifest files `stacks`
/// created first), holding the directory's agent lock until `stop`.
async fn run_on_local(
    options: &AgentOptions,
    state_dir: &std::path::Path,
    stacks: &[PathBuf],
    started: Started,
    webhook: impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<GkqStack>> + Send + 'static,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), AgentError> {
    let lock = crate::ops::lock::lock_state_dir(
        &state_dir.join("agent"),
        Duration::from_secs(u64::MAX / 4),
    )
    .await
    .map_err(|e| AgentError::Lock(format!("{e:#}")))?;
    let store = Arc::new(LocalStore::new(state_dir));
    for file in stacks {
        let text = std::fs::read_to_string(file).map_err(|e| store::StoreError::Local {
            path: file.display().to_string(),
            message: e.to_string(),
        })?;
        let n = store.load_manifests(&text, &file.display().to_string())?;
        tracing::info!("{}: {n} stack(s)", file.display());
    }
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, poll_local(store.clone())).applied_objects();
    let _ = started.endpoints.store.set(store.clone());
    let ctx = context(
        options,
        store,
        started.metrics.clone(),
        Arc::new(leader::Alone),
        &started.interrupt,
        None,
    );
    started.ready(&ctx);
    // Stacks on one local target share its state directory: one at a time.
    let controller = Controller::for_stream(stream, reader);
    drive(controller, 1, webhook, stop, ctx).await;
    lock.release().await;
    Ok(())
}

/// Binds `addr` and serves `app` on it in the background; returns the address bound.
async fn serve(addr: SocketAddr, app: axum::Router) -> Result<SocketAddr, AgentError> {
    let failed = |e: std::io::Error| AgentError::Serve {
        addr: addr.to_string(),
        message: e.to_string(),
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the HTTP endpoints on {bound} stopped: {e}");
        }
    });
    Ok(bound)
}

/// Runs the controller, `concurrency` reconciles at a time (one where plans of stacks on one
/// local target share its state directory), until `stop`; then waits for the running ones.
async fn drive(
    controller: Controller<GkqStack>,
    concurrency: u16,
    webhook: impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<GkqStack>> + Send + 'static,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ctx: Arc<Context>,
) {
    controller
        .with_config(Config::default().concurrency(concurrency.max(1)))
        .reconcile_on(webhook)
        .graceful_shutdown_on(stop)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(report)
        .await;
}

fn context(
    options: &AgentOptions,
    store: Arc<dyn StackStore>,
    metrics: Arc<Metrics>,
    leadership: Arc<dyn Leadership>,
    interrupt: &crate::interrupt::Interrupt,
    token_requests: Option<kube::Client>,
) -> Arc<Context> {
    let mut ctx = Context::new(
        store,
        options.target.clone(),
        options.work_dir.clone(),
        options.own_cluster.clone(),
        metrics,
        leadership,
    );
    ctx.allow_file_urls = options.allow_file_urls;
    ctx.default_service_account = options.default_service_account.clone();
    ctx.min_interval = options.min_interval;
    ctx.submit_wait = options.submit_wait;
    ctx.workload_identity_audience = options.workload_identity_audience.clone();
    ctx.token_requests = token_requests;
    ctx.identity = options.identity.clone();
    ctx.interrupt = interrupt.clone();
    Arc::new(ctx)
}

async fn report<T, E: std::fmt::Display>(result: Result<T, E>) {
    if let Err(e) = result {
        tracing::warn!("reconcile: {e}");
    }
}

fn tokio_stream_of<T: Send + 'static>(
    mut rx: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// How often the local target's stack file is read.
const LOCAL_POLL: Duration = Duration::from_secs(1);

/// The local store's stacks as a watch would give them: a fresh list whenever the store file
/// changed, looked at every [`LOCAL_POLL`]. Like a watch, an unchanged store says nothing: each
/// stack's next run is the one its reconcile asked for, and 20 stacks are not parsed and
/// reconciled every second for nothing.
fn poll_local(
    store: Arc<LocalStore>,
) -> impl futures::Stream<Item = Result<watcher::Event<GkqStack>, watcher::Error>> + Send + 'static
{
    futures::stream::unfold((store, None), |(store, listed)| async move {
        let mut contents = store.contents();
        if listed.is_some() {
            while listed.as_ref() == Some(&contents) {
                tokio::time::sleep(LOCAL_POLL).await;
                contents = store.contents();
            }
        }
        // Read before the list: a change made meanwhile is listed again at the next look.
        let listed: Option<Vec<u8>> = Some(contents);
        let events = match store.list().await {
            Ok(stacks) => {
                let mut events = vec![watcher::Event::Init];
                events.extend(stacks.into_iter().map(watcher::Event::InitApply));
                events.push(watcher::Event::InitDone);
                events
            }
            Err(e) => {
                tracing::warn!("reading the local stacks: {e}");
                Vec::new()
            }
        };
        Some((
            futures::stream::iter(events.into_iter().map(Ok)),
            (store, listed),
        ))
    })
    .flatten()
}
