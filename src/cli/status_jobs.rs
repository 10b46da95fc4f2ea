//! The live part of `gkq status` and the lines printed after an apply: reads the cluster
//! (`observe::cluster`), builds the report (`report::status`, pure) and renders it
//! (`render::status`).

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use super::output::print_stdout;
use crate::kube::KubeApi;
use crate::local::nodes::PoolInfo;
use crate::model::DesiredState;
use crate::observe::cluster::read_kubernetes;
use crate::ops::session::Session;
use crate::placement::PlacementState;
use crate::render::status::summary_lines;
use crate::report::status::{GkeNodePool, LiveReport, Simulated, job_objects, live_report};

/// The live report for a connected session from an observed cluster (`None`: it does not exist)
/// and the session's Kubernetes (read only when the cluster exists and has an endpoint).
/// `workloads`: Kueue's Workloads when planning has just read them, so they are not read again.
pub async fn report(
    session: &Session,
    desired: &DesiredState,
    cluster: Option<&Value>,
    api: Option<&dyn KubeApi>,
    workloads: Option<Vec<Value>>,
) -> anyhow::Result<LiveReport> {
    let has_endpoint = cluster
        .and_then(|c| c.get("endpoint"))
        .and_then(Value::as_str)
        .is_some_and(|e| !e.is_empty());
    let simulated = session.kube.local().map(|k| Simulated {
        state_dir: session.state_dir.as_ref().map(|d| d.display().to_string()),
        kubernetes_state: k.state_file().display().to_string(),
        settings: k.settings().describe(),
    });
    let observed = match api.filter(|_| has_endpoint) {
        Some(api) => Some(
            read_kubernetes(api, workloads)
                .await
                .map_err(|e| anyhow::anyhow!("reading Kubernetes: {e}"))?,
        ),
        None => None,
    };
    let pools: Vec<GkeNodePool> = cluster
        .map(PoolInfo::from_cluster)
        .unwrap_or_default()
        .into_iter()
        .map(|p| GkeNodePool {
            name: p.name,
            machine_type: p.machine_type,
            autoscaling: p.autoscaling,
            zones: p.zones,
            flex_start: p.flex_start,
            queued_provisioning: p.queued_provisioning,
        })
        .collect();
    Ok(live_report(
        desired,
        cluster,
        &pools,
        observed.as_ref(),
        simulated,
    ))
}

/// [`report`] with the cluster read from GKE now.
async fn report_now(
    session: &Session,
    desired: &DesiredState,
    api: Option<&dyn KubeApi>,
) -> anyhow::Result<LiveReport> {
    let cluster = session
        .gke
        .get_cluster(&desired.gke.cluster_ref)
        .await
        .map_err(|e| anyhow::anyhow!("reading the cluster from GKE: {e}"))?;
    report(session, desired, cluster.as_ref(), api, None).await
}

/// After an apply that submitted jobs: reads where they landed (waiting a little on a real
/// cluster for Kueue to decide) and prints one line per job.
pub async fn print_after_apply(
    session: &Session,
    desired: &DesiredState,
    api: Option<&dyn KubeApi>,
) {
    if job_objects(desired).is_empty() {
        return;
    }
    let attempts = if session.kube.local().is_some() {
        1
    } else {
        10
    };
    let mut last = None;
    for attempt in 0..attempts {
        match report_now(session, desired, api).await {
            Ok(r) => {
                let decided = r.jobs.iter().all(|j| {
                    j.is_unmanaged()
                        || j.observed.as_ref().is_some_and(|o| {
                            o.state != PlacementState::Pending || o.reason.is_some()
                        })
                });
                last = Some(r);
                if decided {
                    break;
                }
            }
            Err(e) => {
                tracing::debug!("placement after apply: {e:#}");
                break;
            }
        }
        if attempt + 1 < attempts {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let Some(report) = last else {
        return;
    };
    if !report.kubernetes {
        return;
    }
    let mut text = String::new();
    match &report.simulated {
        Some(sim) => {
            let _ = writeln!(
                text,
                "\nWhere the jobs landed (simulated by the local target: {}):",
                sim.settings
            );
        }
        None => {
            let _ = writeln!(
                text,
                "\nWhere the jobs landed (read from Kueue's Workloads):"
            );
        }
    }
    for line in summary_lines(&report) {
        let _ = writeln!(text, "  {line}");
    }
    let _ = writeln!(text, "Follow them with `gkq status`.");
    let _ = print_stdout(&text);
}
