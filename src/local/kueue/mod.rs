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

use super::controller::{Ctx, Outcome};
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

/// Times at which evicted Workloads may be admitted again.
pub fn requeue_times(store: &Store) -> Vec<u64> {
    store
        .of_kind(KUEUE, "Workload")
        .filter_map(|w| {
            w.pointer("/status/requeueState/requeueAt")
                .and_then(Value::as_str)
        })
        .filter_map(parse_time)
        .collect()
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

fn workload_keys(store: &Store) -> Vec<Key> {
    store.keys_of_kind(KUEUE, "Workload")
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
    changed |= finalizers::resource_in_use(ctx, &changes);
    changed |= provisioning::admission_check_status(ctx);
    changed |= workload::release_deleted(ctx);
    changed |= workloadpriorityclass::workload_priorities(ctx, &changes);
    changed |= workload::release_on_queue_stops(ctx, &changes);
    changed |= jobs::jobs_to_workloads(ctx, &changes);
    changed |= jobs::finish_workloads(ctx);
    changed |= workload::requeue(ctx);
    changed |= scheduler::schedule(ctx);
    changed |= workload::requeue_restarted(ctx, &changes);
    changed |= provisioning::provisioning_checks(ctx);
    changed |= workload::admit_when_ready(ctx);
    changed |= jobs::suspend_or_resume_jobs(ctx);
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
/// queues costs each write its own queue, not all of them.
fn queue_status(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
    // What every queue's status reads: a change to any of it means every queue again.
    let everything = changes.all
        || [
            "ResourceFlavor",
            "AdmissionCheck",
            "Workload",
            "ProvisioningRequestConfig",
        ]
        .iter()
        .any(|kind| changes.touches(KUEUE, kind));
    let cq_keys: Vec<Key> = if everything {
        ctx.store.keys_of_kind(KUEUE, "ClusterQueue")
    } else {
        changes.of_kind(KUEUE, "ClusterQueue").cloned().collect()
    };
    let lq_keys: Vec<Key> = if everything {
        ctx.store.keys_of_kind(KUEUE, "LocalQueue")
    } else {
        let cqs: BTreeSet<&str> = cq_keys.iter().map(|k| k.name.as_str()).collect();
        let mut keys: BTreeSet<Key> = changes.of_kind(KUEUE, "LocalQueue").cloned().collect();
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
    let inputs = QueueInputs::read(ctx.store);
    let mut changed = clusterqueue::cluster_queues(ctx, cq_keys, &inputs);
    changed |= localqueue::local_queues(ctx, lq_keys, &inputs);
    changed
}
