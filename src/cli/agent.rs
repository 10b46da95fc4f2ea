//! `gkq agent` (the in-cluster GitOps agent, `agent::run`) and `gkq approve` (approve a held
//! plan by its digest).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::Exit;
use super::target::TargetArgs;
use crate::addr::ClusterRef;
use crate::agent::store::{KubeStore, LocalStore, StackStore};
use crate::agent::{AgentOptions, Management, management_client};

#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Run on the local target: create the GkqStack (and Secret) objects of this manifest file in
    /// the state directory's stack store at start (repeatable). Without it, stacks are read from
    /// the management cluster.
    #[arg(long = "stack", value_name = "FILE")]
    pub stacks: Vec<PathBuf>,
    /// The management cluster's kubeconfig (default: in-cluster configuration, then $KUBECONFIG
    /// or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub management_kubeconfig: Option<PathBuf>,
    /// Reconcile the stacks of this namespace only (default: every namespace).
    #[arg(long, value_name = "NS")]
    pub watch_namespace: Option<String>,
    /// The namespace of the leader Lease (the agent's own).
    #[arg(
        long,
        value_name = "NS",
        env = "POD_NAMESPACE",
        default_value = "gkq-system"
    )]
    pub namespace: String,
    /// The leader Lease's name.
    #[arg(long, value_name = "NAME", default_value = "gkq-agent")]
    pub lease_name: String,
    /// How long the leader's Lease stays valid without renewal: a standby takes over this long
    /// after the leader stops renewing.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = crate::vocab::duration::parse_flag)]
    pub lease_duration: Duration,
    /// Where push webhooks (POST /hooks/{namespace}/{name}) and the probes (/healthz, /readyz)
    /// are served.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8081")]
    pub webhook_listen: SocketAddr,
    /// Where /metrics (and the probes) are served; loopback by default.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub metrics_listen: SocketAddr,
    /// The shortest `spec.interval` a stack may ask for; a stack asking for less is refused
    /// (condition Stalled, reason IntervalTooShort).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::vocab::duration::parse_flag)]
    pub min_interval: Duration,
    #[command(flatten)]
    pub submit: super::gitops::SubmitArgs,
    /// How many stacks are reconciled at once (one at a time with `--target local`, whose
    /// stacks share the state directory).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Where repositories are checked out (default: <state dir>/agent/checkouts on the local
    /// target, a directory of this process under the temporary directory otherwise).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// The cluster the agent runs in (projects/P/locations/L/clusters/C): never deleted or
    /// replaced. Unset or empty: asked of the GKE metadata server when running in a pod.
    #[arg(long, value_name = "CLUSTER", env = "GKQ_AGENT_CLUSTER")]
    pub own_cluster: Option<String>,
    /// This replica's name in the Lease and in Events (default: `user@host pid N`).
    #[arg(long, value_name = "NAME", env = "POD_NAME")]
    pub identity: Option<String>,
    /// The ServiceAccount (in the stack's own namespace) a stack without
    /// `spec.serviceAccountName` acts as. Without it such a stack acts with the agent's own
    /// rights: fine for one team, not for several (see README "The agent").
    #[arg(long, value_name = "NAME")]
    pub default_service_account: Option<String>,
    /// The Security Token Service where a stack's ServiceAccount token is exchanged for its
    /// Google identity (default: Google's, https://sts.googleapis.com/; with `--target local`,
    /// the GKE emulator's).
    #[arg(long, value_name = "URL")]
    pub sts_endpoint: Option<String>,
    /// The audience stacks' ServiceAccount tokens are exchanged for at the Security Token
    /// Service: `//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER`,
    /// or `identitynamespace:PROJECT.svc.id.goog:https://container.googleapis.com/v1/projects/PROJECT/locations/LOCATION/clusters/CLUSTER`
    /// for GKE's built-in pool (the default, for the agent's own cluster).
    #[arg(long, value_name = "AUDIENCE")]
    pub workload_identity_audience: Option<String>,
    /// Let stacks follow `file://` repositories on the agent's own disk (implied by `--target
    /// local`). Otherwise a stack's `url` must be https://, ssh:// or USER@HOST:PATH.
    #[arg(long)]
    pub allow_file_urls: bool,
    /// Print the GkqStack CustomResourceDefinition (as kept in deploy/crd.yaml) and exit.
    #[arg(long)]
    pub print_crd: bool,
}

fn parse_cluster(text: &str) -> Result<ClusterRef, String> {
    let parts: Vec<&str> = text.split('/').collect();
    match parts.as_slice() {
        [
            "projects",
            project,
            "locations",
            location,
            "clusters",
            cluster,
        ] if [project, location, cluster].iter().all(|p| !p.is_empty()) => Ok(ClusterRef {
            project: project.to_string(),
            location: location.to_string(),
            cluster: cluster.to_string(),
        }),
        _ => Err(format!(
            "`{text}` is not projects/PROJECT/locations/LOCATION/clusters/CLUSTER"
        )),
    }
}

/// The cluster the agent runs in: as given, or (in a pod on GKE) from the metadata server.
async fn own_cluster(given: Option<&str>) -> anyhow::Result<Option<ClusterRef>> {
    match given.filter(|g| !g.is_empty()) {
        Some(text) => Ok(Some(parse_cluster(text).map_err(|e| anyhow::anyhow!(e))?)),
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            let host = std::env::var("GCE_METADATA_HOST")
                .unwrap_or_else(|_| crate::agent::own::METADATA_HOST.to_string());
            let found = crate::agent::own::detect(&host).await;
            match &found {
                Some(c) => tracing::info!("running in cluster {}: it is never deleted", c.name()),
                None => tracing::warn!(
                    "cannot tell which cluster the agent runs in (no GKE metadata server); set GKQ_AGENT_CLUSTER so that it is never deleted"
                ),
            }
            Ok(found)
        }
        None => Ok(None),
    }
}

pub async fn run(args: &AgentArgs) -> anyhow::Result<Exit> {
    if args.print_crd {
        super::output::print_stdout(&crate::agent::crd::crd_yaml())?;
        return Ok(Exit::Ok);
    }
    let mut target = args.target.options();
    target.sts_endpoint = args.sts_endpoint.clone();
    let management = if args.stacks.is_empty() {
        Management::Kube {
            kubeconfig: args.management_kubeconfig.clone(),
            watch_namespace: args.watch_namespace.clone(),
            lease_namespace: args.namespace.clone(),
            lease_name: args.lease_name.clone(),
        }
    } else {
        let Some(state_dir) = target.state_dir.clone() else {
            anyhow::bail!(
                "--stack keeps the stacks in the local target's state directory: pass --state-dir"
            );
        };
        Management::Local {
            state_dir,
            stacks: args.stacks.clone(),
        }
    };
    let work_dir = match (&args.work_dir, &management) {
        (Some(dir), _) => dir.clone(),
        (None, Management::Local { state_dir, .. }) => state_dir.join("agent").join("checkouts"),
        (None, Management::Kube { .. }) => {
            std::env::temp_dir().join(format!("gkq-agent-{}", std::process::id()))
        }
    };
    let options = AgentOptions {
        management,
        target,
        webhook_listen: args.webhook_listen,
        metrics_listen: args.metrics_listen,
        min_interval: args.min_interval,
        submit_wait: args.submit.submit_wait,
        concurrency: args.concurrency,
        work_dir,
        lease_duration: args.lease_duration,
        own_cluster: own_cluster(args.own_cluster.as_deref()).await?,
        identity: args
            .identity
            .clone()
            .unwrap_or_else(crate::ops::lock::holder_identity),
        allow_file_urls: args.allow_file_urls
            || args.target.target == Some(super::target::TargetFlag::Local),
        default_service_account: args.default_service_account.clone(),
        workload_identity_audience: args.workload_identity_audience.clone(),
    };
    crate::agent::run(options, shutdown(), |at| {
        println!(
            "gkq agent: webhooks and probes on http://{}, metrics on http://{}",
            at.webhook, at.metrics
        );
    })
    .await?;
    Ok(Exit::Ok)
}

/// SIGTERM (what Kubernetes sends a pod) or Ctrl-C.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The stack: NAMESPACE/NAME, or NAME in --namespace.
    pub stack: String,
    /// The held plan's digest, as the stack's status (`heldDigest`) shows it.
    pub digest: String,
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// The management cluster's kubeconfig (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub management_kubeconfig: Option<PathBuf>,
    /// Approve in the local target's stack store of this state directory.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

pub async fn approve(args: &ApproveArgs) -> anyhow::Result<Exit> {
    let (namespace, name) = match args.stack.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (args.namespace.clone(), args.stack.clone()),
    };
    let store: Box<dyn StackStore> = match &args.state_dir {
        Some(dir) => Box::new(LocalStore::new(dir)),
        None => {
            let client = management_client(args.management_kubeconfig.as_deref()).await?;
            Box::new(KubeStore::new(
                client,
                Some(namespace.clone()),
                "gkq approve",
            ))
        }
    };
    match store.approve(&namespace, &name, &args.digest).await {
        Ok(()) => {
            println!(
                "Approved plan {} of stack {namespace}/{name}: the agent applies it at its next reconcile.",
                args.digest
            );
            Ok(Exit::Ok)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(Exit::Failed)
        }
    }
}
