//! Kueue's scheduler (`pkg/scheduler`): **admission is decided by gkq's placement module**
//! (`placement::predict`, faithful to Kueue v0.19.2) over the live queues, flavors and
//! Workloads, so the local target shows the same decision `gkq plan` predicts; reservations are
//! written as Kueue writes them (`status.admission.podSetAssignments` with flavors, resource
//! usage and counts; `QuotaReserved`, `Admitted`, `status.admissionChecks`). The Workloads the
//! prediction preempts are evicted as Kueue evicts them (`Evicted` and `Preempted`, the
//! reservation released; the job controller then suspends their jobs), so a preemptor never
//! runs beside its victims; they queue again and the next pass places them.

use serde_json::{Value, json};

use super::super::controller::Ctx;
use super::super::store::{Key, remove_condition, set_condition, timestamp};
use super::workload::evict;
use super::{KUEUE, MANAGER, deleting, finished, parse_time, reserving, sum};
use crate::placement::objects::KUEUE_KINDS;
use crate::placement::{Cluster, PendingWorkload, Placement, PlacementState, predict};
use crate::vocab::object::{name_of, namespace_of, owners};

/// The scheduler: gkq's placement prediction over the live cluster decides.
pub(super) fn schedule(ctx: &mut Ctx<'_>) -> bool {
    let now = ctx.now;
    // Nothing to admit without a Workload waiting for quota: then the queues are not read.
    if !ctx
        .store
        .of_kind(KUEUE, "Workload")
        .any(|w| !deleting(w) && !reserving(w) && !finished(w))
    {
        return false;
    }
    // Workloads Kueue parked without retrying them stay where they are.
    let parked = super::workload::parked(ctx);
    let mut cluster = Cluster::default();
    let kueue_kinds = KUEUE_KINDS.iter().map(|kind| (KUEUE, *kind));
    let others = [("scheduling.k8s.io", "PriorityClass"), ("", "Namespace")];
    for (group, kind) in kueue_kinds.chain(others) {
        for o in ctx.store.of_kind(group, kind) {
            let queue_like = matches!(kind, "ClusterQueue" | "LocalQueue" | "Cohort");
            if queue_like && deleting(o) {
                continue;
            }
            let _ = cluster.add_object(o);
        }
    }
    for w in ctx.store.of_kind(KUEUE, "Workload") {
        let waiting = w
            .pointer("/status/requeueState/requeueAt")
            .and_then(Value::as_str)
            .and_then(parse_time)
            .is_some_and(|t| t > now);
        let is_parked = !parked.is_empty()
            && !reserving(w)
            && parked.contains(&format!(
                "{}/{}",
                namespace_of(w).unwrap_or_default(),
                name_of(w)
            ));
        if deleting(w) || waiting || is_parked {
            continue;
        }
        let _ = cluster.add_object(w);
    }
    if cluster.pending_workloads.is_empty() {
        return false;
    }
    let pending: Vec<PendingWorkload> = cluster.pending_workloads.clone();
    let prediction = predict(&cluster, &[]);
    let mut changed = evict_victims(ctx, &prediction.preempted);
    for (workload, placement) in pending.iter().zip(&prediction.queued) {
        let key = Key::new(
            "kueue.x-k8s.io/v1beta2",
            "Workload",
            Some(&workload.namespace),
            &workload.name,
        );
        match placement.state {
            PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks => {
                let cq = placement.cluster_queue.clone().unwrap_or_default();
                let assignments: Vec<Value> = placement
                    .podsets
                    .iter()
                    .map(|ps| {
                        let requests = workload
                            .pod_sets
                            .iter()
                            .find(|p| p.name == ps.name)
                            .map(|p| p.requests.clone())
                            .unwrap_or_default();
                        let mut usage = serde_json::Map::new();
                        for resource in ps.flavors.keys() {
                            if resource == "pods" {
                                // Kueue's `pods` resource counts one per pod.
                                usage.insert(resource.clone(), json!(ps.count.max(0).to_string()));
                                continue;
                            }
                            if let Some(q) = requests.get(resource) {
                                let copies = vec![*q; ps.count.max(0) as usize];
                                usage.insert(resource.clone(), json!(sum(&copies).to_canonical_string()));
                            }
                        }
                        json!({"name": ps.name, "flavors": ps.flavors, "resourceUsage": usage, "count": ps.count})
                    })
                    .collect();
                let checks = placement.admission_checks.clone();
                changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                    o["status"]["admission"] =
                        json!({"clusterQueue": cq, "podSetAssignments": assignments});
                    set_condition(o, "QuotaReserved", "True", "QuotaReserved", &format!("Quota reserved in ClusterQueue {cq}"), now);
                    remove_condition(o, "Evicted");
                    if checks.is_empty() {
                        set_condition(o, "Admitted", "True", "Admitted", "The workload is admitted", now);
                    } else {
                        let states: Vec<Value> = checks
                            .iter()
                            .map(|c| json!({"name": c, "state": "Pending", "message": "", "lastTransitionTime": timestamp(now)}))
                            .collect();
                        o["status"]["admissionChecks"] = Value::Array(states);
                    }
                });
            }
            PlacementState::Pending => {
                let message = placement.reason.clone().unwrap_or_default();
                changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                    set_condition(o, "QuotaReserved", "False", "Pending", &message, now);
                });
            }
            _ => {}
        }
    }
    changed
}

/// Evicts the Workloads holding quota that the prediction preempts (`preempted` names each by
/// its job, or by its own name when it has no owner), with Kueue's `Evicted` and `Preempted`
/// conditions (Kueue v0.19.2 `pkg/scheduler/preemption/preemption.go`, `IssuePreemptions`).
fn evict_victims(ctx: &mut Ctx<'_>, preempted: &[Placement]) -> bool {
    let now = ctx.now;
    let mut victims: Vec<(Key, &str, String)> = Vec::new();
    for victim in preempted {
        let found = ctx.store.of_kind(KUEUE, "Workload").find(|w| {
            reserving(w)
                && !deleting(w)
                && namespace_of(w) == Some(victim.namespace.as_str())
                && if victim.kind == "Workload" {
                    name_of(w) == victim.job
                } else {
                    owners(w).any(|o| {
                        o["kind"] == victim.kind.as_str() && o["name"] == victim.job.as_str()
                    })
                }
        });
        if let Some(w) = found {
            let by = victim.preempted_by.as_deref().unwrap_or("another workload");
            let said = victim.reason.as_deref().unwrap_or_default();
            // The prediction's reason names Kueue's human-readable one; the longest first.
            let (reason, why) = [
                (
                    "InCohortReclaimWhileBorrowing",
                    "reclamation within the cohort while borrowing",
                ),
                ("InCohortReclamation", "reclamation within the cohort"),
                ("InClusterQueue", "prioritization in the ClusterQueue"),
            ]
            .into_iter()
            .find(|(_, text)| said.contains(text))
            .unwrap_or(("InClusterQueue", "prioritization in the ClusterQueue"));
            victims.push((
                Key::of(w),
                reason,
                format!("Preempted to accommodate a workload ({by}) due to {why} (simulated)"),
            ));
        }
    }
    let mut changed = false;
    for (key, reason, message) in victims {
        changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
            evict(o, "Preempted", &message, now);
            set_condition(o, "Preempted", "True", reason, &message, now);
        });
    }
    changed
}
