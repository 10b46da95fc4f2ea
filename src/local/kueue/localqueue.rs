//! Kueue's LocalQueue controller (`pkg/controller/core/localqueue_controller.go`): active when its
//! ClusterQueue is, workload counts and flavor usage.

use serde_json::Value;

use super::super::controller::Ctx;
use super::super::store::Key;
use super::MANAGER;
use super::clusterqueue::{QueueInputs, QueueStatus, cq_state};

/// The status of these LocalQueues: active when their ClusterQueue is, workload counts and
/// flavor usage.
pub(super) fn local_queues(ctx: &mut Ctx<'_>, keys: Vec<Key>, inputs: &QueueInputs) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in keys {
        let Some(lq) = ctx.store.get(&key) else {
            continue;
        };
        let cq_name = lq
            .pointer("/spec/clusterQueue")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let cq = ctx
            .store
            .get(&Key::new(
                "kueue.x-k8s.io/v1beta2",
                "ClusterQueue",
                None,
                &cq_name,
            ))
            .cloned();
        let (active, reason, message) = match &cq {
            None => (
                false,
                "ClusterQueueDoesNotExist",
                "Can't submit new workloads to clusterQueue".to_string(),
            ),
            Some(cq) if cq_state(cq, &inputs.kueue).0 => (
                true,
                "Ready",
                "Can submit new workloads to localQueue".to_string(),
            ),
            Some(_) => (
                false,
                "ClusterQueueIsInactive",
                "Can't submit new workloads to clusterQueue".to_string(),
            ),
        };
        let totals = inputs
            .book
            .by_local_queue
            .get(&(key.namespace.clone(), key.name.clone()));
        let pending = totals.map_or(0, |t| t.waiting);
        let status = QueueStatus::new(
            (active, reason, message),
            totals,
            pending,
            cq.as_ref(),
            false,
        );
        changed |= ctx
            .store
            .update(&key, MANAGER, true, now, |o| status.write(o, now));
    }
    changed
}
