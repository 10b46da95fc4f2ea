//! Kueue's `resource-in-use` finalizers, as its core ClusterQueue, ResourceFlavor and
//! AdmissionCheck controllers keep them (`pkg/controller/core`): on while the object exists, and
//! while it is deleted but still used (a flavor or check a ClusterQueue names, a ClusterQueue
//! holding reservations).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::super::controller::Ctx;
use super::super::store::{Changes, Key, finalizers};
use super::super::workload::KUEUE_FINALIZER;
use super::{KUEUE, MANAGER, cq_checks, cq_flavors, deleting, reserving};

/// Kueue's `resource-in-use` finalizers on ClusterQueues, ResourceFlavors and AdmissionChecks:
/// kept while the object exists or is in use. Only objects that changed are looked at, and those being
/// deleted when what uses them may have changed: not every queue on every write.
pub(super) fn resource_in_use(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
    let mut changed = false;
    let now = ctx.now;
    let uses_changed = changes.touches(KUEUE, "ClusterQueue") || changes.touches(KUEUE, "Workload");
    let mut todo: Vec<(&str, Key)> = Vec::new();
    for kind in ["ClusterQueue", "ResourceFlavor", "AdmissionCheck"] {
        let mut keys: BTreeSet<Key> = if changes.all {
            ctx.store.keys_of_kind(KUEUE, kind).into_iter().collect()
        } else {
            changes.of_kind(KUEUE, kind).cloned().collect()
        };
        if uses_changed {
            keys.extend(
                ctx.store
                    .of_kind(KUEUE, kind)
                    .filter(|o| deleting(o))
                    .map(Key::of),
            );
        }
        todo.extend(keys.into_iter().map(|k| (kind, k)));
    }
    // What is in use matters only to objects being deleted.
    let any_deleting = todo
        .iter()
        .any(|(_, k)| ctx.store.get(k).is_some_and(deleting));
    let (used_flavors, used_checks, reserving_cqs) = if any_deleting {
        let used_flavors: BTreeSet<String> = ctx
            .store
            .of_kind(KUEUE, "ClusterQueue")
            .flat_map(cq_flavors)
            .collect();
        let used_checks: BTreeSet<String> = ctx
            .store
            .of_kind(KUEUE, "ClusterQueue")
            .flat_map(cq_checks)
            .collect();
        let reserving_cqs: BTreeSet<String> = ctx
            .store
            .of_kind(KUEUE, "Workload")
            .filter(|w| reserving(w))
            .filter_map(|w| {
                w.pointer("/status/admission/clusterQueue")
                    .and_then(Value::as_str)
            })
            .map(str::to_string)
            .collect();
        (used_flavors, used_checks, reserving_cqs)
    } else {
        Default::default()
    };
    for (kind, key) in todo {
        let in_use = match kind {
            "ClusterQueue" => &reserving_cqs,
            "ResourceFlavor" => &used_flavors,
            _ => &used_checks,
        };
        {
            let Some(o) = ctx.store.get(&key) else {
                continue;
            };
            let has = finalizers(o).iter().any(|f| f == KUEUE_FINALIZER);
            let wanted = !deleting(o) || in_use.contains(&key.name);
            if has != wanted {
                changed |= ctx.store.update(&key, MANAGER, false, now, |o| {
                    let mut list = finalizers(o);
                    if wanted {
                        list.push(KUEUE_FINALIZER.to_string());
                    } else {
                        list.retain(|f| f != KUEUE_FINALIZER);
                    }
                    o["metadata"]["finalizers"] = json!(list);
                });
            }
        }
    }
    changed
}
