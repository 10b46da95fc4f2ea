//! `gkq dashboard NAMESPACE/JOB` as a library call: find the RayJob, wait, bounded, while Kueue
//! holds it back or its Ray head is not running (telling the sink why), then listen on a local
//! address and forward each connection to the head's dashboard port through the API server
//! (`KubeApi::port_forward`), until interrupted. `report::dashboard::ray_head` decides which pod
//! and port. On the local target the simulated head serves a simulated dashboard
//! (`local::dashboard`) behind the same trait.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};

use super::logs::{WaitLine, cluster_of, find_job, job_ref, job_workload, reachable, resource};
use super::session::{KubeHandle, TargetOptions, connect};
use crate::interrupt::Interrupt;
use crate::kube::KubeApi;
use crate::observe::cluster::{KindRef, POD, WORKLOAD};
use crate::report::dashboard::{Head, head_selector, ray_head};
use crate::spec::Loaded;

/// KubeRay's RayCluster, whose spec the head was built from.
const RAY_CLUSTER: KindRef = (crate::model::jobs::RAY_API, "RayCluster");

/// What `gkq dashboard` forwards, and where it listens.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    /// `NAMESPACE/JOB`.
    pub job: String,
    /// The local address to listen on (loopback unless the user says otherwise).
    pub address: IpAddr,
    /// The local port (0: any free one).
    pub port: u16,
    /// How long to wait for the head pod to run before giving up.
    pub wait: Duration,
    /// How often the job is read again while it waits.
    pub poll: Duration,
}

/// Where `gkq dashboard` tells what it does.
pub trait DashboardSink: Sync {
    /// Why it waits, or what happened to one forwarded connection.
    fn status(&self, line: &str);
    /// The address the dashboard is served on, once listening: `http://ADDRESS:PORT`.
    fn serving(&self, url: &str);
}

/// How a forward that did not fail ended: both by `interrupt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// While waiting for the head, before anything was forwarded.
    Waiting,
    /// While forwarding.
    Forwarding,
}

/// Forwards the dashboard of the RayJob `options.job` until `interrupt`.
pub async fn dashboard(
    loaded: &Loaded,
    target: &TargetOptions,
    options: &DashboardOptions,
    sink: &dyn DashboardSink,
    interrupt: &Interrupt,
) -> anyhow::Result<Stopped> {
    let (namespace, name) = job_ref(&options.job)?;
    let session = connect(target, loaded).await?;
    let handle = KubeHandle::new(&session, None, &cluster_of(loaded));
    let api = reachable(&handle)?;
    let Some((pod, port)) = wait_for_head(api, namespace, name, options, sink, interrupt).await?
    else {
        return Ok(Stopped::Waiting);
    };
    let bind = SocketAddr::new(options.address, options.port);
    let listener = TcpListener::bind(bind).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {bind}: {e}\nhint: choose another local port with --port (0: any free port)"
        )
    })?;
    let local = listener.local_addr()?;
    sink.status(&format!(
        "forwarding {local} to port {port} of the Ray head pod {namespace}/{pod} (Ctrl-C to stop)"
    ));
    sink.serving(&format!("http://{local}"));
    let pod = pod.as_str();
    let connections = futures::stream::unfold(&listener, |listener| async move {
        Some((listener.accept().await, listener))
    });
    let serve = futures::StreamExt::for_each_concurrent(connections, None, |accepted| async move {
        match accepted {
            Ok((client, _)) => forward(api, namespace, pod, port, client, sink).await,
            Err(e) => sink.status(&format!("accepting a connection on {local}: {e}")),
        }
    });
    tokio::select! {
        () = serve => {}
        () = interrupt.wait() => {}
    }
    Ok(Stopped::Forwarding)
}

/// One connection to the dashboard: a port-forward of its own, bytes copied both ways until
/// either side ends or the pod's side reports an error.
async fn forward(
    api: &dyn KubeApi,
    namespace: &str,
    pod: &str,
    port: u16,
    mut client: TcpStream,
    sink: &dyn DashboardSink,
) {
    let mut forwarded = match api.port_forward(namespace, pod, port).await {
        Ok(forwarded) => forwarded,
        Err(e) => {
            sink.status(&format!(
                "forwarding a connection to port {port} of pod {namespace}/{pod}: {e}"
            ));
            return;
        }
    };
    let copy = tokio::io::copy_bidirectional(&mut client, &mut forwarded.stream);
    tokio::select! {
        copied = copy => {
            if let Err(e) = copied {
                tracing::debug!("a forwarded connection ended: {e}");
            }
        }
        Some(message) = &mut forwarded.error => {
            sink.status(&format!("port {port} of pod {namespace}/{pod}: {message}"));
        }
    }
}

/// Reads the job again every `options.poll` until its head runs; `None` if interrupted first.
async fn wait_for_head(
    api: &dyn KubeApi,
    namespace: &str,
    name: &str,
    options: &DashboardOptions,
    sink: &dyn DashboardSink,
    interrupt: &Interrupt,
) -> anyhow::Result<Option<(String, u16)>> {
    let started = Instant::now();
    let mut told = WaitLine::default();
    let pod_info = resource(api, POD)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the cluster does not serve Pods"))?;
    let workload_info = resource(api, WORKLOAD).await?;
    let cluster_info = resource(api, RAY_CLUSTER).await?;
    loop {
        let job = find_job(api, namespace, name).await?;
        if job["kind"] != "RayJob" {
            anyhow::bail!(
                "{namespace}/{name} is a {}, not a RayJob: only a Ray cluster has a Ray dashboard\nhint: `gkq logs {namespace}/{name}` reads its pods' logs",
                job["kind"].as_str().unwrap_or("job")
            );
        }
        let cluster_name = job
            .pointer("/status/rayClusterName")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty());
        let (cluster, pods) = match cluster_name {
            Some(cluster_name) => {
                let cluster = match &cluster_info {
                    Some(info) => {
                        api.get(info, Some(namespace), cluster_name)
                            .await
                            .map_err(|e| {
                                anyhow::anyhow!(
                                    "reading RayCluster {namespace}/{cluster_name}: {e}"
                                )
                            })?
                    }
                    None => None,
                };
                let pods = api
                    .list_in(&pod_info, namespace, &head_selector(cluster_name))
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!("listing the head pod of {namespace}/{cluster_name}: {e}")
                    })?;
                (cluster, pods)
            }
            None => (None, Vec::new()),
        };
        let workload = job_workload(api, workload_info.as_ref(), &job).await?;
        let status = match ray_head(
            &job,
            cluster.as_ref(),
            workload.as_ref(),
            workload_info.is_some(),
            &pods,
        ) {
            Head::Ready { pod, port } => return Ok(Some((pod, port))),
            Head::Unreachable(why) => anyhow::bail!("{why}"),
            Head::Waiting(status) => status,
        };
        let waited = started.elapsed();
        if waited >= options.wait {
            anyhow::bail!(
                "gave up after waiting {} for the Ray head of {namespace}/{name}: {status}\nhint: wait longer with --wait, or see why with `gkq explain {namespace}/{name}`",
                crate::vocab::duration::human(options.wait)
            );
        }
        told.say(status, waited, options.wait, &|line| sink.status(line));
        if Interrupt::sleep(Some(interrupt), options.poll).await {
            return Ok(None);
        }
    }
}
