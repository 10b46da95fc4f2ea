//! Kueue v0.19.2, simulated: its webhooks and the controllers the walk-through exercises, one
//! file each as Kueue's `pkg/controller` has them:
//!
//! - [`webhooks`]: `resource-in-use` finalizers on ClusterQueues and ResourceFlavors; quota
//!   quantities canonicalised on create (`1000000000` is stored as `1G`); `onFlavors` must name
//!   the queue's flavors; RayJobs, JobSets and batch Jobs with a queue label are created
//!   suspended, and the rejections Kueue's webhooks make (in-tree autoscaling without the
//!   elastic annotation, too many podsets, ...).
//! - [`jobs`] (the job reconciler): a Workload per queued RayJob, JobSet or batch Job (podsets
//!   as Kueue builds them), finished when the job finishes; the job unsuspended on admission,
//!   with [`podset`]'s flavor node labels, tolerations and pod-set updates injected into its pod
//!   templates.
//! - [`scheduler`]: **admission is decided by gkq's placement module** (`placement::predict`),
//!   and the Workloads it preempts are evicted.
//! - [`provisioning`]: the ProvisioningRequest admission check.
//! - [`workload`]: requeueing after backoff, admission once every check is ready; Workloads of
//!   queues that stop or go away drained or their reservation taken back, by placement's rule
//!   (`placement::active::released`, as the plan predicts), and queued again when the queue
//!   runs again.
//! - [`workloadpriorityclass`]: a WorkloadPriorityClass's value written into the Workloads that
//!   name it.
//! - [`finalizers`], [`clusterqueue`], [`localqueue`]: finalizers and queue status (AdmissionCheck
//!   `Active`, ClusterQueue and LocalQueue `Active`, workload counts and `flavorsReservation` /
//!   `flavorsUsage`).
//!
//! Not simulated: fair sharing, elastic workload slices after admission, pods
//! (`PodsReady`), MultiKueue, TAS.

mod clusterqueue;
mod finalizers;
pub mod holders;
mod jobs;
mod localqueue;
mod podset;
mod provisioning;
mod scheduler;
mod webhooks;
mod workload;
mod workloadpriorityclass;

use std::collections::BTreeSet;

use serde_json::Value;

use super::controller::{Ctx, Outcome, QueueBook};
use super::store::{Changes, Key, Store};
use crate::vocab::object::condition_true;
use crate::vocab::quantity::Quantity;
use clusterqueue::QueueInputs;
pub use webhooks::webhooks;

pub const KUEUE: &str = "kueue.x-k8s.io";
const MANAGER: &str = "kueue";
pub const PROVISIONING_CONTROLLER: &str = "kueue.x-k8s.io/provisioning-request";
const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
const CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
const PROVREQ_PREFIX: &str = "provreq.kueue.x-k8s.io/";

fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp").is_some()
}

fn cq_flavors(cq: &Value) -> Vec<String> {
    cq.pointer("/spec/resourceGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|g| g["flavors"].as_array().into_iter().flatten())
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect()
}

fn cq_checks(cq: &Value) -> Vec<String> {
    let mut checks: Vec<String> = cq
        .pointer("/spec/admissionChecksStrategy/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    checks.extend(
        cq.pointer("/spec/admissionChecks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(str::to_string)),
    );
    checks
}

fn requeue_at(w: &Value) -> Option<u64> {
    w.pointer("/status/requeueState/requeueAt")
        .and_then(Value::as_str)
        .and_then(parse_time)
}

/// Times at which evicted Workloads may be admitted again: from what Kueue's last pass noted
/// ([`note_requeue_times`]) when no Workload changed since, else read from every Workload.
pub fn requeue_times(store: &Store, sim: &super::controller::SimState) -> Vec<u64> {
    let unchanged = !sim.kueue_changes.touches(KUEUE, "Workload")
        && !store.pending_changes().touches(KUEUE, "Workload");
    match &sim.kueue_requeue {
        Some(noted) if unchanged => noted.values().copied().collect(),
        _ => store
            .of_kind(KUEUE, "Workload")
            .filter_map(requeue_at)
            .collect(),
    }
}

/// Notes when each Workload this pass looks at may be requeued (all of them after a restart),
/// so that neither the requeue controller nor the clock's next event reads every Workload.
fn note_requeue_times(ctx: &mut Ctx<'_>, visit: &Visit) {
    let store = &*ctx.store;
    if let (Visit::These(keys), Some(noted)) = (visit, ctx.sim.kueue_requeue.as_mut()) {
        for key in keys {
            match store.get(key).and_then(requeue_at) {
                Some(t) => noted.insert(key.clone(), t),
                None => noted.remove(key),
            };
        }
        return;
    }
    let noted = store
        .of_kind(KUEUE, "Workload")
        .filter_map(|w| Some((Key::of(w), requeue_at(w)?)))
        .collect();
    ctx.sim.kueue_requeue = Some(noted);
}

pub fn parse_time(text: &str) -> Option<u64> {
    crate::placement::time::Timestamp::parse(text)
        .map(|t| (t.seconds.max(0) as u64) * 1000 + u64::from(t.nanos / 1_000_000))
}

/// Whether Kueue's controllers read objects at `key`: its own kinds, the jobs it queues,
/// priority classes and namespaces.
pub fn reads(key: &Key) -> bool {
    key.group == KUEUE
        || jobs::JOB_KINDS
            .iter()
            .any(|(group, kind)| key.group == *group && key.kind == *kind)
        || (key.group == "scheduling.k8s.io" && key.kind == "PriorityClass")
        || (key.group.is_empty() && key.kind == "Namespace")
}

/// Kueue kinds whose status no decision of the scheduler or of the per-Workload controllers
/// reads: the queues' counts and usage (which Kueue itself writes after every admission) and
/// kinds without a status. AdmissionCheck is not among them: placement reads its `Active`
/// condition.
const STATUS_UNREAD_KINDS: &[&str] = &[
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "ResourceFlavor",
    "WorkloadPriorityClass",
];

/// Whether the write at `key` recorded in `changes` is a change Kueue retries every waiting
/// Workload for: anything but a status-only write of a kind whose status it does not read.
/// Kueue requeues parked Workloads on queue, cohort and flavor *spec* events, not on the status
/// it writes itself (docs/kueue.md 1b).
pub(super) fn queue_change(changes: &Changes, key: &Key) -> bool {
    !(key.group == KUEUE && STATUS_UNREAD_KINDS.contains(&key.kind.as_str()))
        || changes.changed_beyond_status(key)
}

/// [`queue_change`] for a whole Kueue kind: whether any write of `kind` in `changes` is one.
pub(super) fn queue_kind_changed(changes: &Changes, kind: &str) -> bool {
    if STATUS_UNREAD_KINDS.contains(&kind) {
        changes.touches_spec(KUEUE, kind)
    } else {
        changes.touches(KUEUE, kind)
    }
}

fn workload_keys(store: &Store) -> Vec<Key> {
    store.keys_of_kind(KUEUE, "Workload")
}

/// Whether Kueue's per-Workload controllers look at objects at `key`: what Kueue reads
/// ([`reads`]), the ProvisioningRequests its check creates and the RayClusters a RayJob's
/// Workload may be owned through.
pub fn watches(key: &Key) -> bool {
    reads(key)
        || (key.group == "autoscaling.x-k8s.io" && key.kind == "ProvisioningRequest")
        || (key.group == "ray.io" && key.kind == "RayCluster")
}

/// The Workloads Kueue's per-Workload controllers look at in a pass: each reads a Workload,
/// its job and its ProvisioningRequests, and besides those only queues, flavors, checks and
/// their configs. So a pass looks at the Workloads written since the last one, those of the
/// jobs and requests written, and those a controller before it wrote in this pass; all of them
/// after a restart or when anything else Kueue reads changed.
pub(super) enum Visit {
    All,
    These(BTreeSet<Key>),
}

impl Visit {
    fn of(store: &Store, changes: &Changes) -> Visit {
        let related = changes.keys.iter().all(|k| {
            (k.group == KUEUE && k.kind == "Workload")
                || jobs::JOB_KINDS
                    .iter()
                    .any(|(group, kind)| k.group == *group && k.kind == *kind)
                || !reads(k)
                || !queue_change(changes, k)
        });
        if changes.all || !related {
            return Visit::All;
        }
        Visit::These(related_workloads(store, &changes.keys))
    }

    /// The Workloads to look at now: those of the pass and those written since it began.
    fn keys(&self, store: &Store) -> Vec<Key> {
        match self {
            Visit::All => workload_keys(store),
            Visit::These(keys) => {
                let written = store.pending_changes();
                if written.all {
                    return workload_keys(store);
                }
                let mut keys = keys.clone();
                keys.extend(related_workloads(store, &written.keys));
                keys.into_iter().collect()
            }
        }
    }
}

/// The Workloads `keys` name or belong to: Workloads themselves, the Workloads of jobs and
/// RayClusters (by owner, as [`super::workload::current_runs`] finds them), the owners of
/// ProvisioningRequests.
fn related_workloads(store: &Store, keys: &BTreeSet<Key>) -> BTreeSet<Key> {
    let is_workload = |k: &Key| k.group == KUEUE && k.kind == "Workload";
    let index = store.index();
    let mut out = BTreeSet::new();
    for key in keys {
        if is_workload(key) {
            out.insert(key.clone());
        } else if key.kind == "ProvisioningRequest" {
            let owners = store
                .get(key)
                .into_iter()
                .flat_map(crate::vocab::object::owners);
            for owner in owners {
                if let Some(found) = owner["uid"].as_str().and_then(|u| index.by_uid(u))
                    && is_workload(found)
                {
                    out.insert(found.clone());
                }
            }
        } else if let Some(dependents) = index.dependents(&key.namespace, &key.kind, &key.name) {
            out.extend(dependents.iter().filter(|k| is_workload(k)).cloned());
        }
    }
    out
}

fn finished(w: &Value) -> bool {
    condition_true(w, "Finished")
}

fn reserving(w: &Value) -> bool {
    condition_true(w, "QuotaReserved") && !finished(w)
}

/// One pass of Kueue's controllers.
pub fn reconcile(ctx: &mut Ctx<'_>) -> Outcome {
    let mut changed = false;
    // The Kueue objects written since the last pass; the writes of this pass are the next's.
    let changes = std::mem::replace(&mut ctx.sim.kueue_changes, Changes::none());
    let visit = Visit::of(ctx.store, &changes);
    note_requeue_times(ctx, &visit);
    changed |= finalizers::resource_in_use(ctx, &changes);
    changed |= provisioning::admission_check_status(ctx);
    changed |= workload::release_deleted(ctx, &visit);
    changed |= workloadpriorityclass::workload_priorities(ctx, &changes);
    changed |= workload::release_on_queue_stops(ctx, &changes);
    changed |= jobs::jobs_to_workloads(ctx, &changes);
    changed |= jobs::finish_workloads(ctx, &visit);
    changed |= workload::requeue(ctx, &visit);
    changed |= scheduler::schedule(ctx);
    changed |= workload::requeue_restarted(ctx, &changes, &visit);
    changed |= provisioning::provisioning_checks(ctx, &visit);
    changed |= workload::admit_when_ready(ctx, &visit);
    changed |= jobs::suspend_or_resume_jobs(ctx, &visit);
    changed |= queue_status(ctx, &changes);
    Outcome { changed }
}

/// The sum, in the first quantity's format (`0` for none).
fn sum(quantities: &[Quantity]) -> Quantity {
    match quantities.split_first() {
        Some((first, rest)) => rest.iter().fold(*first, |a, b| a.saturating_add(*b)),
        None => Quantity::ZERO,
    }
}

/// Queue status, as Kueue keeps it. Only the queues whose inputs changed since the last pass
/// are recomputed: a LocalQueue's status depends on itself, its ClusterQueue and the Workloads
/// in it; a ClusterQueue's on itself, flavors, checks and Workloads. So applying thousands of
/// queues costs each write its own queue, not all of them; and a written Workload costs its
/// queues, which read what they need of each Workload from [`QueueBook`], not the Workloads.
fn queue_status(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
    // What every queue's status reads: a change to any of it means every queue again.
    let everything = changes.all
        || [
            "ResourceFlavor",
            "AdmissionCheck",
            "ProvisioningRequestConfig",
        ]
        .iter()
        .any(|kind| changes.touches(KUEUE, kind));
    let book_queues = note_queued_workloads(ctx, changes);
    let everything = everything || book_queues.is_none();
    let (written_lqs, written_cqs) = book_queues.unwrap_or_default();
    let cq_keys: Vec<Key> = if everything {
        ctx.store.keys_of_kind(KUEUE, "ClusterQueue")
    } else {
        let mut keys: BTreeSet<Key> = changes.of_kind(KUEUE, "ClusterQueue").cloned().collect();
        keys.extend(
            written_cqs
                .iter()
                .map(|cq| Key::new("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, cq))
                .filter(|k| ctx.store.get(k).is_some()),
        );
        keys.into_iter().collect()
    };
    let lq_keys: Vec<Key> = if everything {
        ctx.store.keys_of_kind(KUEUE, "LocalQueue")
    } else {
        let cqs: BTreeSet<&str> = changes
            .of_kind(KUEUE, "ClusterQueue")
            .map(|k| k.name.as_str())
            .collect();
        let mut keys: BTreeSet<Key> = changes.of_kind(KUEUE, "LocalQueue").cloned().collect();
        keys.extend(
            written_lqs
                .iter()
                .map(|(ns, lq)| Key::new("kueue.x-k8s.io/v1beta2", "LocalQueue", Some(ns), lq))
                .filter(|k| ctx.store.get(k).is_some()),
        );
        if !cqs.is_empty() {
            keys.extend(
                ctx.store
                    .of_kind(KUEUE, "LocalQueue")
                    .filter(|q| {
                        q.pointer("/spec/clusterQueue")
                            .and_then(Value::as_str)
                            .is_some_and(|c| cqs.contains(c))
                    })
                    .map(Key::of),
            );
        }
        keys.into_iter().collect()
    };
    if cq_keys.is_empty() && lq_keys.is_empty() {
        return false;
    }
    let book = ctx.sim.kueue_queues.take().unwrap_or_default();
    let inputs = QueueInputs::read(ctx.store, &book);
    let mut changed = clusterqueue::cluster_queues(ctx, cq_keys, &inputs);
    changed |= localqueue::local_queues(ctx, lq_keys, &inputs);
    drop(inputs);
    ctx.sim.kueue_queues = Some(book);
    changed
}

/// The LocalQueues (`namespace`, `name`) and ClusterQueues a queue's status reads Workloads of.
type WrittenQueues = (BTreeSet<(String, String)>, BTreeSet<String>);

/// Brings the [`QueueBook`] up to the Workloads written since the last pass and in this one;
/// returns the queues those Workloads were or are in (each LocalQueue's ClusterQueue too).
/// `None` when the book was read whole (after a restart): then every queue is recomputed.
fn note_queued_workloads(ctx: &mut Ctx<'_>, changes: &Changes) -> Option<WrittenQueues> {
    let store = &*ctx.store;
    let written = store.pending_changes();
    if changes.all || written.all || ctx.sim.kueue_queues.is_none() {
        let mut book = QueueBook::default();
        for w in store.of_kind(KUEUE, "Workload") {
            book.set(&Key::of(w), Some(clusterqueue::queued(w)));
        }
        ctx.sim.kueue_queues = Some(book);
        return None;
    }
    let book = ctx.sim.kueue_queues.as_mut()?;
    let mut lqs: BTreeSet<(String, String)> = BTreeSet::new();
    let mut cqs: BTreeSet<String> = BTreeSet::new();
    let keys: BTreeSet<&Key> = changes
        .of_kind(KUEUE, "Workload")
        .chain(written.of_kind(KUEUE, "Workload"))
        .collect();
    for key in keys {
        let now = store.get(key).map(clusterqueue::queued);
        if book.workloads.get(key) == now.as_ref() {
            continue;
        }
        let before = book.set(key, now.clone());
        for w in before.iter().chain(&now) {
            lqs.insert(w.local_queue.clone());
            cqs.extend(w.cluster_queue.clone());
        }
    }
    for (ns, lq) in &lqs {
        let cq = store
            .get(&Key::new(
                "kueue.x-k8s.io/v1beta2",
                "LocalQueue",
                Some(ns),
                lq,
            ))
            .and_then(|q| q.pointer("/spec/clusterQueue").and_then(Value::as_str));
        cqs.extend(cq.map(str::to_string));
    }
    Some((lqs, cqs))
}
