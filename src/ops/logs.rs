//! `gkq logs NAMESPACE/JOB` as a library call: find the job (a RayJob, JobSet or Job), wait,
//! bounded, while Kueue holds it back or its pods are not created yet (telling the sink why,
//! `report::logs::waiting`), then read the driver's log (`report::logs::job_pods` decides which
//! pods), following it with `follow`. On the local target the simulated driver pod has the log
//! the simulation writes (`local::pods`).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::session::{KubeHandle, TargetOptions, connect};
use crate::addr::ClusterRef;
use crate::kube::{KubeApi, KubeError, ResourceInfo};
use crate::observe::cluster::{JOB_KINDS, KindRef, POD, WORKLOAD};
use crate::placement::job_workload::workload_of;
use crate::report::logs::{PodChoice, job_pods, pod_selectors, waiting};
use crate::spec::Loaded;
use crate::vocab::object::{condition_true, name_of};

/// What `gkq logs` reads.
#[derive(Debug, Clone)]
pub struct LogsOptions {
    /// `NAMESPACE/JOB`.
    pub job: String,
    pub choice: PodChoice,
    /// Keep reading as the pods write (`-f`).
    pub follow: bool,
    /// How long to wait for the job's pods before giving up.
    pub wait: Duration,
    /// How often the job is read again while it has no pods to read.
    pub poll: Duration,
}

/// Where `gkq logs` tells what it reads and why it waits.
pub trait LogsSink: Sync {
    /// Why there is nothing to read yet (said again only when it changes, or as progress).
    fn status(&self, line: &str);
    /// One line of `pod`'s log; `several`: more than one pod is read.
    fn line(&self, pod: &str, several: bool, line: &str);
}

/// How often a wait that has not changed is told again.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// Reads the log of the job `options.job` in the spec's cluster.
pub async fn logs(
    loaded: &Loaded,
    target: &TargetOptions,
    options: &LogsOptions,
    sink: &dyn LogsSink,
) -> anyhow::Result<()> {
    let (namespace, name) = job_ref(&options.job)?;
    let session = connect(target, loaded).await?;
    let cluster = cluster_of(loaded);
    let handle = KubeHandle::new(&session, None, &cluster);
    let api = reachable(&handle)?;
    let pods = wait_for_pods(api, namespace, name, options, sink).await?;
    let several = pods.len() > 1;
    let started = Instant::now();
    let reads = pods.iter().map(|pod| async move {
        let mut told = false;
        loop {
            let read = api
                .pod_log(namespace, pod, options.follow, &mut |line| {
                    sink.line(pod, several, line)
                })
                .await;
            match read {
                // A pod whose container is still being created has no log yet.
                Err(e) if not_started(&e) && started.elapsed() < options.wait => {
                    if !told {
                        sink.status(&format!(
                            "pod {pod} is starting: its container has not started yet"
                        ));
                        told = true;
                    }
                    tokio::time::sleep(options.poll).await;
                }
                other => {
                    return other.map_err(|e| {
                        anyhow::anyhow!("reading the log of pod {namespace}/{pod}: {e}")
                    });
                }
            }
        }
    });
    for read in futures::future::join_all(reads).await {
        read?;
    }
    Ok(())
}

/// `NAMESPACE/JOB` split, or why it is not one.
pub(super) fn job_ref(job: &str) -> anyhow::Result<(&str, &str)> {
    job.split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`{job}` is not NAMESPACE/JOB: name the job with its namespace, e.g. default/rayjob-tpu-v6e-dws-1"
            )
        })
}

/// The spec's cluster.
pub(super) fn cluster_of(loaded: &Loaded) -> ClusterRef {
    ClusterRef {
        project: loaded.spec.project.clone(),
        location: loaded.spec.location.clone(),
        cluster: loaded.spec.cluster.name.clone(),
    }
}

/// The cluster's Kubernetes API, or why this target cannot reach it.
pub(super) fn reachable<'a>(handle: &'a KubeHandle<'_>) -> anyhow::Result<&'a dyn KubeApi> {
    handle.api().ok_or_else(|| {
        anyhow::anyhow!(
            "the cluster's Kubernetes API cannot be reached from this target: give it with --kubeconfig, or use Application Default Credentials"
        )
    })
}

/// Discovery of `kind`, `None` when the cluster does not serve it.
pub(super) async fn resource(
    api: &dyn KubeApi,
    (api_version, kind): KindRef,
) -> anyhow::Result<Option<ResourceInfo>> {
    api.resource(api_version, kind)
        .await
        .map_err(|e| anyhow::anyhow!("discovering {api_version} {kind}: {e}"))
}

/// The job `namespace/name` of the first of [`JOB_KINDS`] that has one.
pub(super) async fn find_job(
    api: &dyn KubeApi,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Value> {
    for kind in JOB_KINDS {
        let Some(info) = resource(api, kind).await? else {
            continue;
        };
        if let Some(job) = api
            .get(&info, Some(namespace), name)
            .await
            .map_err(|e| anyhow::anyhow!("reading {} {namespace}/{name}: {e}", kind.1))?
        {
            return Ok(job);
        }
    }
    anyhow::bail!(
        "there is no RayJob, JobSet or Job {namespace}/{name} in the cluster\nhint: `gkq status` lists the jobs and where each is"
    )
}

/// Reads the job again every `options.poll` until it has the pods to read, telling the sink
/// why it waits; gives up after `options.wait`.
async fn wait_for_pods(
    api: &dyn KubeApi,
    namespace: &str,
    name: &str,
    options: &LogsOptions,
    sink: &dyn LogsSink,
) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    let mut told = WaitLine::default();
    let pod_info = resource(api, POD)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the cluster does not serve Pods"))?;
    let workload_info = resource(api, WORKLOAD).await?;
    loop {
        let job = find_job(api, namespace, name).await?;
        let mut pods: Vec<Value> = Vec::new();
        for selector in pod_selectors(&job) {
            let found = api
                .list_in(&pod_info, namespace, &selector)
                .await
                .map_err(|e| anyhow::anyhow!("listing the pods of {namespace}/{name}: {e}"))?;
            pods.extend(found);
        }
        let chosen = job_pods(&job, &pods, &options.choice);
        if !chosen.is_empty() {
            return Ok(chosen.into_iter().map(|p| name_of(p).to_string()).collect());
        }
        let all = job_pods(&job, &pods, &PodChoice::All);
        if let (PodChoice::Named(pod), false) = (&options.choice, all.is_empty()) {
            let names: Vec<&str> = all.iter().map(|p| name_of(p)).collect();
            anyhow::bail!(
                "the job {namespace}/{name} has no pod {pod}; its pods: {}",
                names.join(", ")
            );
        }
        let workload = job_workload(api, workload_info.as_ref(), &job).await?;
        if workload
            .as_ref()
            .is_some_and(|w| condition_true(w, "Finished"))
        {
            anyhow::bail!(
                "the job {namespace}/{name} has finished and its pods are gone: there is no log to read"
            );
        }
        let status = match (&workload_info, waiting(workload.as_ref())) {
            (None, _) => "waiting for the job's pods (Kueue is not installed)".to_string(),
            (Some(_), Some(status)) => status,
            (Some(_), None) => "admitted: waiting for the job's pods to be created".to_string(),
        };
        let waited = started.elapsed();
        if waited >= options.wait {
            anyhow::bail!(
                "gave up after waiting {} for the pods of {namespace}/{name}: {status}\nhint: wait longer with --wait, or see why with `gkq explain {namespace}/{name}`",
                crate::vocab::duration::human(options.wait)
            );
        }
        told.say(status, waited, options.wait, &|line| sink.status(line));
        tokio::time::sleep(options.poll).await;
    }
}

/// The Workload Kueue made for `job` (`placement::job_workload`), if Kueue is installed
/// (`workload_info`) and has made one.
pub(super) async fn job_workload(
    api: &dyn KubeApi,
    workload_info: Option<&ResourceInfo>,
    job: &Value,
) -> anyhow::Result<Option<Value>> {
    let Some(info) = workload_info else {
        return Ok(None);
    };
    // A Workload is in its job's namespace: only that namespace is read.
    let namespace = crate::vocab::object::namespace_of(job).unwrap_or_default();
    let workloads = api
        .list_in(info, namespace, "")
        .await
        .map_err(|e| anyhow::anyhow!("listing Kueue's Workloads in namespace {namespace}: {e}"))?;
    Ok(workload_of(job, workloads.iter()).cloned())
}

/// A wait's status line, told when it changes and again every [`PROGRESS_EVERY`] with how long
/// it has waited.
#[derive(Default)]
pub(super) struct WaitLine {
    told: Option<(String, Instant)>,
}

impl WaitLine {
    pub(super) fn say(
        &mut self,
        status: String,
        waited: Duration,
        wait: Duration,
        out: &dyn Fn(&str),
    ) {
        match &self.told {
            Some((said, at)) if *said == status && at.elapsed() < PROGRESS_EVERY => {}
            Some((said, _)) if *said == status => {
                out(&format!(
                    "{status} (waited {} of {})",
                    crate::vocab::duration::human(waited),
                    crate::vocab::duration::human(wait)
                ));
                self.told = Some((status, Instant::now()));
            }
            _ => {
                out(&status);
                self.told = Some((status, Instant::now()));
            }
        }
    }
}

/// Whether an error says the pod's container has not started yet: the API server answers a
/// log read of a pending pod with 400 and "container ... is waiting to start".
fn not_started(e: &KubeError) -> bool {
    matches!(e, KubeError::Api { code: 400, message, .. } if message.contains("waiting to start"))
}
