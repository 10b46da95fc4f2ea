//! Kubernetes actions, through the [`KubeApplier`] extension point.
//!
//! The Kubernetes half implements `KubeApplier` over kube-rs (server-side apply with gkq's field
//! manager, deletes that respect finalizers, waits for readiness) and passes it to
//! [`super::Executor::with_kube`]. The executor does the rest: ordering, dependency skips,
//! staleness checks, events.

use serde_json::Value;

use super::{ActionResultOf, ApplyError, ApplyEvent, Executor, check_fresh};
use crate::addr::ResourceAddr;
use crate::plan::{Action, Step};

/// A Kubernetes call failed. `hint` says what the user can do (for example: another field
/// manager owns the fields; pass `--force-conflicts` to take them).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct KubeApplyError {
    pub message: String,
    pub hint: Option<String>,
}

/// Kubernetes operations the executor needs.
#[async_trait::async_trait]
pub trait KubeApplier: Send + Sync {
    /// The live object at `addr` (`object` is the desired or last-seen object, for its
    /// apiVersion and kind); `None` if it does not exist.
    async fn get(
        &self,
        addr: &ResourceAddr,
        object: &Value,
    ) -> Result<Option<Value>, KubeApplyError>;
    /// Server-side apply of `object`, returning when it is applied (and ready, where the next
    /// step needs that: CRDs established, webhooks serving).
    async fn apply(&self, object: &Value) -> Result<(), KubeApplyError>;
    /// Deletes the object and waits until it is gone.
    async fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), KubeApplyError>;
}

/// An object naming the action's target, for reading it: the desired one, or the one being
/// deleted. `None` when the action has no Kubernetes target.
pub(super) fn probe_of(action: &Action) -> Option<serde_json::Value> {
    action.desired.clone().or_else(|| {
        action.steps.iter().find_map(|step| match step {
            Step::KubeDelete {
                api_version,
                kind,
                namespace,
                name,
            } => Some(serde_json::json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"namespace": namespace, "name": name}})),
            _ => None,
        })
    })
}

pub(super) async fn run_action(executor: &Executor<'_>, action: &Action) -> ActionResultOf {
    let Some(kube) = executor.kube else {
        return Err(Box::new(ApplyError::KubeUnavailable {
            addr: action.addr.clone(),
        }));
    };
    let kube_error = |step: &str, source: KubeApplyError| ApplyError::Kube {
        addr: action.addr.clone(),
        step: step.to_string(),
        source,
    };
    let probe = probe_of(action);
    let live = match &probe {
        Some(probe) => kube
            .get(&action.addr, probe)
            .await
            .map_err(|e| kube_error("get", e))?,
        None => None,
    };
    check_fresh(action, live.as_ref())?;
    for step in &action.steps {
        executor.sink.emit(&ApplyEvent::StepStarted {
            addr: action.addr.clone(),
            step: step.to_string(),
        });
        match step {
            Step::KubeApply { object } => kube
                .apply(object)
                .await
                .map_err(|e| kube_error(step.method(), e))?,
            Step::KubeDelete {
                api_version,
                kind,
                namespace,
                name,
            } => kube
                .delete(api_version, kind, namespace.as_deref(), name)
                .await
                .map_err(|e| kube_error(step.method(), e))?,
            gke_step => {
                return Err(Box::new(kube_error(
                    gke_step.method(),
                    KubeApplyError {
                        message: "a GKE call in a Kubernetes action".to_string(),
                        hint: None,
                    },
                )));
            }
        }
    }
    Ok(())
}
