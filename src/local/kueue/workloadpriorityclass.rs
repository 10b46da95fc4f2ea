//! Kueue's WorkloadPriorityClass controller
//! (`pkg/controller/core/workloadpriorityclass_controller.go`): when a class's `value` changes,
//! every Workload whose `spec.priorityClassRef` names it (kind `WorkloadPriorityClass`), admitted
//! or not, gets the new value as its `spec.priority`; a deleted class changes nothing
//! (docs/kueue.md 1g). The scheduler then reads the new priority, so a Workload that became
//! more important can preempt one that became less so, as the plan predicts.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::controller::Ctx;
use super::super::store::{Changes, Key};
use super::{KUEUE, MANAGER, deleting, workload_keys};
use crate::vocab::object::name_of;

/// Writes each WorkloadPriorityClass's value into the Workloads that name it, when a class was
/// written since the last pass.
pub(super) fn workload_priorities(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
    if !changes.all && !changes.touches(KUEUE, "WorkloadPriorityClass") {
        return false;
    }
    let values: BTreeMap<String, i64> = ctx
        .store
        .of_kind(KUEUE, "WorkloadPriorityClass")
        .filter(|class| !deleting(class))
        .filter_map(|class| Some((name_of(class).to_string(), class["value"].as_i64()?)))
        .collect();
    let mut stale: Vec<(Key, i64)> = Vec::new();
    for key in workload_keys(ctx.store) {
        let Some(w) = ctx.store.get(&key) else {
            continue;
        };
        let Some(reference) = w.pointer("/spec/priorityClassRef") else {
            continue;
        };
        if reference["kind"] != "WorkloadPriorityClass" {
            continue;
        }
        let Some(&value) = reference["name"].as_str().and_then(|n| values.get(n)) else {
            continue;
        };
        if w.pointer("/spec/priority").and_then(Value::as_i64) != Some(value) {
            stale.push((key, value));
        }
    }
    let now = ctx.now;
    let mut changed = false;
    for (key, value) in stale {
        changed |= ctx.store.update(&key, MANAGER, false, now, |o| {
            o["spec"]["priority"] = json!(value);
        });
    }
    changed
}
