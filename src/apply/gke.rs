//! GKE actions: fresh read and staleness check, one call at a time, operations polled to the end,
//! a busy cluster waited out.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{Value, json};

use super::{ActionResultOf, ApplyError, ApplyEvent, Executor, VerifyError, check_fresh, millis};
use crate::addr::ClusterRef;
use crate::addr::{ResourceAddr, ResourceKind};
use crate::diff::normalize::{
    GKE_CLUSTER_STATUS, is_server_taint, preserved_gke_labels, status_name,
};
use crate::gke::{
    GkeError, Operation, WaitOptions, retry_while_busy_until, short_operation_name,
    wait_operation_until,
};
use crate::plan::{Action, Plan, Step};

pub(super) async fn run_action(
    executor: &Executor<'_>,
    plan: &Plan,
    action: &Action,
) -> ActionResultOf {
    let cluster_ref = &plan.cluster;
    let gke_error = |step: &str, source: GkeError| ApplyError::Gke {
        addr: action.addr.clone(),
        step: step.to_string(),
        source,
    };
    let cluster = executor
        .gke
        .get_cluster(cluster_ref)
        .await
        .map_err(|e| gke_error("clusters.get", e))?;
    let live = match action.addr.kind {
        ResourceKind::GkeCluster => cluster.clone(),
        _ => cluster
            .as_ref()
            .and_then(|c| node_pool(c, &action.addr.name))
            .cloned(),
    };
    check_fresh(action, live.as_ref())?;
    for step in &action.steps {
        run_step(executor, cluster_ref, &action.addr, step).await?;
    }
    Ok(())
}

fn node_pool<'v>(cluster: &'v Value, name: &str) -> Option<&'v Value> {
    cluster
        .get("nodePools")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
}

/// Makes one call, waiting out a busy cluster, then polls its operation to the end, through
/// the GKE client's one wait ([`retry_while_busy_until`], [`wait_operation_until`]).
async fn run_step(
    executor: &Executor<'_>,
    cluster_ref: &ClusterRef,
    addr: &ResourceAddr,
    step: &Step,
) -> ActionResultOf {
    let options = WaitOptions {
        poll: &executor.options.poll,
        interrupt: executor.interrupt,
    };
    let step_name = step.to_string();
    executor.sink.emit(&ApplyEvent::StepStarted {
        addr: addr.clone(),
        step: step_name.clone(),
    });
    let started = Instant::now();
    let on_busy = |operation: Option<&str>, message: &str, elapsed| {
        executor.sink.emit(&ApplyEvent::Waiting {
            addr: addr.clone(),
            step: step_name.clone(),
            reason: match operation {
                Some(op) => format!(
                    "the cluster is busy with operation {op}; waiting for it, then retrying"
                ),
                None => format!("the cluster is busy ({message}); retrying"),
            },
            elapsed_ms: millis(elapsed),
        });
    };
    let called = retry_while_busy_until(
        executor.gke,
        cluster_ref,
        || call(executor, cluster_ref, step),
        options,
        on_busy,
        |_, _| {},
    )
    .await;
    let operation = match called {
        Ok(operation) => operation,
        Err(GkeError::ClusterBusy { message, .. }) => {
            return Err(Box::new(ApplyError::Timeout {
                addr: addr.clone(),
                what: format!("waiting for the cluster to be free ({message})"),
                waited: started.elapsed(),
            }));
        }
        Err(GkeError::Interrupted { .. }) => {
            return Err(Box::new(ApplyError::Interrupted {
                addr: addr.clone(),
                detail: format!(
                    "{step_name} was not sent: it was waiting for the cluster to be free"
                ),
            }));
        }
        Err(source) => {
            return Err(Box::new(ApplyError::Gke {
                addr: addr.clone(),
                step: step_name,
                source,
            }));
        }
    };
    wait(executor, cluster_ref, addr, &step_name, operation, options).await
}

/// The API call of a step. Steps that need an etag, a label fingerprint or GKE's own labels read
/// them fresh here, right before the call (and again on every retry).
async fn call(
    executor: &Executor<'_>,
    cluster_ref: &ClusterRef,
    step: &Step,
) -> Result<Operation, GkeError> {
    let api = executor.gke;
    match step {
        Step::CreateCluster { body } => api.create_cluster(cluster_ref, body).await,
        Step::DeleteCluster => api.delete_cluster(cluster_ref).await,
        Step::UpdateCluster { update } => api.update_cluster(cluster_ref, update).await,
        Step::SetClusterResourceLabels { labels } => {
            let live = api
                .get_cluster(cluster_ref)
                .await?
                .ok_or_else(|| GkeError::NotFound {
                    what: format!("cluster {}", cluster_ref.name()),
                })?;
            let mut merged: BTreeMap<String, String> =
                preserved_gke_labels(live.get("resourceLabels"))
                    .into_iter()
                    .map(|(k, v)| (k, label_text(&v)))
                    .collect();
            merged.extend(labels.iter().map(|(k, v)| (k.clone(), label_text(v))));
            let fingerprint = live
                .get("labelFingerprint")
                .and_then(Value::as_str)
                .unwrap_or_default();
            api.set_resource_labels(cluster_ref, &merged, fingerprint)
                .await
        }
        Step::CreateNodePool { body } => api.create_node_pool(cluster_ref, body).await,
        Step::DeleteNodePool { pool } => api.delete_node_pool(cluster_ref, pool).await,
        Step::UpdateNodePool { pool, field, body } => {
            let live =
                api.get_node_pool(cluster_ref, pool)
                    .await?
                    .ok_or_else(|| GkeError::NotFound {
                        what: format!("node pool {}", cluster_ref.node_pool(pool)),
                    })?;
            let body = with_live_parts(body, field, &live);
            api.update_node_pool(cluster_ref, pool, &body).await
        }
        Step::SetNodePoolAutoscaling { pool, autoscaling } => {
            api.set_node_pool_autoscaling(cluster_ref, pool, autoscaling)
                .await
        }
        Step::SetNodePoolManagement { pool, management } => {
            api.set_node_pool_management(cluster_ref, pool, management)
                .await
        }
        Step::KubeApply { .. } | Step::KubeDelete { .. } => Err(GkeError::Transport(format!(
            "{} is a Kubernetes step, not a GKE call",
            step.method()
        ))),
    }
}

fn label_text(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string())
}

/// An `UpdateNodePoolRequest` with the live etag, and with GKE's own labels and taints kept
/// (the request replaces the whole map or list).
fn with_live_parts(body: &Value, field: &str, live: &Value) -> Value {
    let mut body = body.clone();
    let Some(map) = body.as_object_mut() else {
        return body;
    };
    if let Some(etag) = live.get("etag") {
        map.insert("etag".to_string(), etag.clone());
    }
    match field {
        "resourceLabels" => {
            let mut labels = preserved_gke_labels(live.pointer("/config/resourceLabels"));
            if let Some(desired) = map
                .get("resourceLabels")
                .and_then(|r| r.get("labels"))
                .and_then(Value::as_object)
            {
                labels.extend(desired.clone());
            }
            map.insert("resourceLabels".to_string(), json!({"labels": labels}));
        }
        "taints" => {
            let mut taints: Vec<Value> = live
                .pointer("/config/taints")
                .and_then(Value::as_array)
                .map(|t| t.iter().filter(|t| is_server_taint(t)).cloned().collect())
                .unwrap_or_default();
            if let Some(desired) = map
                .get("taints")
                .and_then(|t| t.get("taints"))
                .and_then(Value::as_array)
            {
                taints.extend(desired.iter().cloned());
            }
            map.insert("taints".to_string(), json!({"taints": taints}));
        }
        _ => {}
    }
    body
}

/// Polls an operation until it is done, reporting each poll; a failed operation is an error.
async fn wait(
    executor: &Executor<'_>,
    cluster_ref: &ClusterRef,
    addr: &ResourceAddr,
    step: &str,
    operation: Operation,
    options: WaitOptions<'_>,
) -> ActionResultOf {
    let progress = |operation: &Operation, elapsed| {
        executor.sink.emit(&ApplyEvent::Progress {
            addr: addr.clone(),
            step: step.to_string(),
            operation: short_operation_name(&operation.name).to_string(),
            operation_type: operation.operation_type.clone(),
            status: operation.status.clone(),
            elapsed_ms: millis(elapsed),
        });
    };
    let started = Instant::now();
    let waited = wait_operation_until(executor.gke, cluster_ref, &operation, options, progress);
    let error = match waited.await {
        Ok(_) => return Ok(()),
        Err(GkeError::OperationFailed {
            operation,
            operation_type,
            message,
            ..
        }) => ApplyError::OperationFailed {
            addr: addr.clone(),
            step: step.to_string(),
            operation: short_operation_name(&operation).to_string(),
            operation_type,
            message,
        },
        Err(GkeError::WaitTimedOut {
            operation,
            operation_type,
            ..
        }) => ApplyError::Timeout {
            addr: addr.clone(),
            what: format!(
                "operation {} ({operation_type})",
                short_operation_name(&operation)
            ),
            waited: started.elapsed(),
        },
        // The operation goes on in GKE without us.
        Err(GkeError::Interrupted { last }) => {
            let last = last.map_or(operation, |op| *op);
            ApplyError::Interrupted {
                addr: addr.clone(),
                detail: format!(
                    "{step}: operation {} ({}) is still running in GKE (last status {})",
                    short_operation_name(&last.name),
                    last.operation_type,
                    last.status
                ),
            }
        }
        Err(source) => ApplyError::Gke {
            addr: addr.clone(),
            step: format!("operations.get {}", short_operation_name(&operation.name)),
            source,
        },
    };
    Err(Box::new(error))
}

/// Cluster statuses in which a GKE operation is creating or deleting the cluster: its Kubernetes
/// API does not answer (yet, or any more).
const KUBE_UNREACHABLE: [&str; 2] = ["PROVISIONING", "STOPPING"];

/// The cluster, read for checking `plan`, once no GKE operation is creating or deleting it.
///
/// After an interrupted apply the cluster create goes on in GKE, and plan says apply waits for
/// it. A plan with Kubernetes targets cannot be checked before the cluster's API answers, so
/// this polls `clusters.get` until the status moves on, as the executor waits out a busy
/// cluster: up to the busy timeout, and an interrupt stops it. Plans of GKE resources alone
/// are checked at once (their actions wait for the cluster themselves).
pub(super) async fn settled_cluster(
    executor: &Executor<'_>,
    plan: &Plan,
) -> Result<Option<Value>, VerifyError> {
    let policy = &executor.options.poll;
    let needs_kube = plan.actions.iter().any(|a| !a.addr.kind.is_gke());
    let addr = ResourceAddr::gke_cluster(plan.cluster.cluster.clone());
    let started = Instant::now();
    let mut delay = policy.initial;
    let mut announced: Option<String> = None;
    loop {
        let cluster = executor
            .gke
            .get_cluster(&plan.cluster)
            .await
            .map_err(|e| VerifyError::Read(format!("clusters.get: {e}")))?;
        let status = cluster
            .as_ref()
            .and_then(|c| status_name(c, GKE_CLUSTER_STATUS))
            .filter(|s| needs_kube && KUBE_UNREACHABLE.contains(&s.as_str()));
        let Some(status) = status else {
            return Ok(cluster);
        };
        if started.elapsed() >= policy.busy_timeout {
            return Err(VerifyError::Read(format!(
                "cluster {} is still {status} after {}s of waiting for the GKE operation on it; run `gkq plan` to see its state, and apply again once it is RUNNING",
                plan.cluster.cluster,
                started.elapsed().as_secs()
            )));
        }
        if announced.as_deref() != Some(status.as_str()) {
            executor.sink.emit(&ApplyEvent::Waiting {
                addr: addr.clone(),
                step: "clusters.get".to_string(),
                reason: format!(
                    "the cluster is {status}: a GKE operation on it is still running; waiting for it to finish before checking the plan"
                ),
                elapsed_ms: millis(started.elapsed()),
            });
            announced = Some(status);
        }
        if executor.pause(delay).await {
            return Err(VerifyError::Read(format!(
                "interrupted while waiting for the GKE operation on cluster {} to finish; nothing was applied",
                plan.cluster.cluster
            )));
        }
        delay = policy.next(delay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_keep_gke_labels_and_taints_and_carry_the_etag() {
        let live = json!({"etag": "e1", "config": {
            "resourceLabels": {"managed-by": "gkq", "goog-gke-node-pool-provisioning-model": "flex-start"},
            "taints": [{"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NO_SCHEDULE"},
                       {"key": "old", "value": "x", "effect": "NO_SCHEDULE"}]}});
        let labels = with_live_parts(
            &json!({"resourceLabels": {"labels": {"managed-by": "gkq", "team": "ml"}}}),
            "resourceLabels",
            &live,
        );
        assert_eq!(
            labels,
            json!({"etag": "e1", "resourceLabels": {"labels": {
            "goog-gke-node-pool-provisioning-model": "flex-start", "managed-by": "gkq", "team": "ml"}}})
        );
        let taints = with_live_parts(
            &json!({"taints": {"taints": [{"key": "new", "value": "y", "effect": "NO_SCHEDULE"}]}}),
            "taints",
            &live,
        );
        assert_eq!(taints["taints"]["taints"].as_array().unwrap().len(), 2);
        assert_eq!(
            taints["taints"]["taints"][0]["key"],
            "cloud.google.com/gke-queued"
        );
    }
}
