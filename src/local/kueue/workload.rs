//! Kueue's Workload controller (`pkg/controller/core/workload_controller.go`): evicted Workloads
//! queue again once their backoff passes, a Workload whose admission checks are all `Ready` is
//! admitted, Workloads being deleted release their finalizer; and the admission-check states
//! the check controllers write.

use serde_json::{Value, json};

use super::super::controller::Ctx;
use super::super::store::{finalizers, remove_condition, set_condition, timestamp};
use super::super::workload::KUEUE_FINALIZER;
use super::{MANAGER, condition_true, deleting, parse_time, reserving, workload_keys};

/// Evicted Workloads whose backoff has passed queue again.
pub(super) fn requeue(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in workload_keys(ctx.store) {
        let due = ctx
            .store
            .get(&key)
            .and_then(|w| w.pointer("/status/requeueState/requeueAt"))
            .and_then(Value::as_str)
            .and_then(parse_time)
            .is_some_and(|t| t <= now);
        if due {
            changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                if let Some(state) = o
                    .pointer_mut("/status/requeueState")
                    .and_then(Value::as_object_mut)
                {
                    state.remove("requeueAt");
                }
                set_condition(
                    o,
                    "Requeued",
                    "True",
                    "BackoffFinished",
                    "The workload backoff was finished",
                    now,
                );
            });
        }
    }
    changed
}

pub(super) fn check_states(w: &Value) -> Vec<Value> {
    w.pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn set_check(
    o: &mut Value,
    check: &str,
    state: &str,
    message: &str,
    updates: Option<Value>,
    now: u64,
) {
    if let Some(list) = o
        .pointer_mut("/status/admissionChecks")
        .and_then(Value::as_array_mut)
    {
        for c in list.iter_mut().filter(|c| c["name"] == check) {
            if c["state"] != state {
                c["lastTransitionTime"] = json!(timestamp(now));
            }
            c["state"] = json!(state);
            c["message"] = json!(message);
            match &updates {
                Some(u) => c["podSetUpdates"] = u.clone(),
                None => {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("podSetUpdates");
                    }
                }
            }
        }
    }
}

/// Releases a Workload's quota reservation.
pub(super) fn evict(o: &mut Value, reason: &str, message: &str, now: u64) {
    if let Some(status) = o["status"].as_object_mut() {
        status.remove("admission");
    }
    set_condition(o, "QuotaReserved", "False", "Pending", message, now);
    remove_condition(o, "Admitted");
    set_condition(o, "Evicted", "True", reason, message, now);
}

/// A Workload whose checks are all Ready is admitted.
pub(super) fn admit_when_ready(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in workload_keys(ctx.store) {
        let Some(w) = ctx.store.get(&key) else {
            continue;
        };
        let states = check_states(w);
        if !reserving(w) || condition_true(w, "Admitted") || states.is_empty() {
            continue;
        }
        if states.iter().all(|c| c["state"] == "Ready") {
            changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                set_condition(
                    o,
                    "Admitted",
                    "True",
                    "Admitted",
                    "The workload is admitted",
                    now,
                );
            });
        }
    }
    changed
}

/// Workloads being deleted (their job is gone) release their quota and finalizer.
pub(super) fn release_deleted(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in workload_keys(ctx.store) {
        let Some(w) = ctx.store.get(&key) else {
            continue;
        };
        if deleting(w) && finalizers(w).iter().any(|f| f == KUEUE_FINALIZER) {
            changed |= ctx.store.update(&key, MANAGER, false, now, drop_finalizer);
        }
    }
    changed
}

/// Removes Kueue's finalizer from a Workload, releasing it.
pub(super) fn drop_finalizer(o: &mut Value) {
    let list: Vec<String> = finalizers(o)
        .into_iter()
        .filter(|f| f != KUEUE_FINALIZER)
        .collect();
    o["metadata"]["finalizers"] = json!(list);
}
