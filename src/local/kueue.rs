//! Kueue v0.19.2, simulated: its webhooks and the controllers the walk-through exercises.
//!
//! - Webhooks: `resource-in-use` finalizers on ClusterQueues and ResourceFlavors; quota
//!   quantities canonicalised on create (`1000000000` is stored as `1G`); `onFlavors` must name
//!   the queue's flavors; RayJobs with a queue label are created suspended, and the RayJob
//!   rejections Kueue's webhook makes (in-tree autoscaling without the elastic annotation, ...).
//! - The job controller: a Workload per queued RayJob (podsets as Kueue builds them), finished
//!   when the job finishes; the job unsuspended on admission, with the flavors' node labels and
//!   tolerations and the admission checks' pod-set updates injected into its pod templates.
//! - The scheduler: **admission is decided by gkq's placement module** (`placement::predict`,
//!   faithful to Kueue v0.19.2) over the live queues, flavors and Workloads, so the local target
//!   shows the same decision `gkq plan` predicts; reservations are written as Kueue writes them
//!   (`status.admission.podSetAssignments` with flavors, resource usage and counts;
//!   `QuotaReserved`, `Admitted`, `status.admissionChecks`).
//! - The ProvisioningRequest admission check: a ProvisioningRequest (and PodTemplates) for the
//!   podsets that use the config's managed resources, its state mirrored into the check (Ready
//!   sets the pod-set updates, then the Workload is admitted); a failed request is retried with
//!   Kueue's backoff (60 s doubling, `retryStrategy`) and the check rejected after
//!   `backoffLimitCount` retries, which deactivates the Workload.
//! - Status: AdmissionCheck `Active`, ClusterQueue and LocalQueue `Active`, workload counts and
//!   `flavorsReservation` / `flavorsUsage`.
//!
//! Not simulated: preemption, fair sharing, elastic workload slices after admission, pods
//! (`PodsReady`), MultiKueue, TAS.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::sim::{Ctx, Outcome, child_map, remove_condition, set_condition};
use super::store::{Changes, Key, Store, finalizers, timestamp};
use super::workload::{KUEUE_FINALIZER, SIMULATED_ANNOTATION, SIMULATED_VALUE};
use crate::placement::{Cluster, PendingWorkload, PlacementState, Quantity, predict};
use crate::vocab::labels::{PROVISIONING_CONTROLLER, QUEUE_NAME_LABEL};
use crate::vocab::object::{condition_true, name_of, owners, uid_of};

pub const KUEUE: &str = "kueue.x-k8s.io";
const MANAGER: &str = "kueue";
const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
const CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
const PROVREQ_PREFIX: &str = "provreq.kueue.x-k8s.io/";

fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp").is_some()
}

/// Kueue's mutating and validating webhooks (only while Kueue runs).
pub fn webhooks(
    store: &Store,
    group: &str,
    kind: &str,
    object: &mut Value,
    create: bool,
) -> Result<(), String> {
    match (group, kind) {
        (KUEUE, "ClusterQueue") => {
            if create {
                add_finalizer(object);
                canonicalise_quotas(object);
            }
            validate_on_flavors(object)
        }
        (KUEUE, "ResourceFlavor") if create => {
            add_finalizer(object);
            Ok(())
        }
        ("ray.io", "RayJob") => {
            let queued = object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(QUEUE_NAME_LABEL))
                .is_some();
            if !queued {
                return Ok(());
            }
            if let Ok(workload) = PendingWorkload::from_object(object)
                && let Some(reason) = workload.rejected
            {
                return Err(format!(
                    "admission webhook \"vrayjob.kb.io\" denied the request: {reason}"
                ));
            }
            if create && let Some(spec) = child_map(object, "spec") {
                spec.insert("suspend".into(), json!(true));
            }
            let _ = store;
            Ok(())
        }
        _ => Ok(()),
    }
}

fn add_finalizer(object: &mut Value) {
    let mut list = finalizers(object);
    if !list.iter().any(|f| f == KUEUE_FINALIZER) {
        list.push(KUEUE_FINALIZER.to_string());
        object["metadata"]["finalizers"] = json!(list);
    }
}

/// The webhook re-marshals the typed object on create, which canonicalises quantities.
fn canonicalise_quotas(object: &mut Value) {
    for group in object
        .pointer_mut("/spec/resourceGroups")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for flavor in group
            .get_mut("flavors")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let resources = flavor
                .get_mut("resources")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut);
            for resource in resources {
                for field in ["nominalQuota", "borrowingLimit", "lendingLimit"] {
                    if let Some(v) = resource.get(field)
                        && let Ok(q) = Quantity::from_json(v)
                    {
                        resource.insert(field.into(), json!(q.to_canonical_string()));
                    }
                }
            }
        }
    }
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

fn validate_on_flavors(cq: &Value) -> Result<(), String> {
    let flavors = cq_flavors(cq);
    for (i, check) in cq
        .pointer("/spec/admissionChecksStrategy/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, flavor) in check["onFlavors"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let f = flavor.as_str().unwrap_or_default();
            if !flavors.iter().any(|x| x == f) {
                return Err(format!(
                    "admission webhook \"vclusterqueue.kb.io\" denied the request: spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]: Invalid value: {f:?}: must be one of the ClusterQueue's flavors"
                ));
            }
        }
    }
    Ok(())
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
    changed |= finalizers_and_checks(ctx, &changes);
    changed |= jobs_to_workloads(ctx);
    changed |= finish_workloads(ctx);
    changed |= requeue(ctx);
    changed |= schedule(ctx);
    changed |= provisioning_checks(ctx);
    changed |= admit_when_ready(ctx);
    changed |= suspend_or_resume_jobs(ctx);
    changed |= queue_status(ctx, &changes);
    Outcome { changed }
}

/// Kueue's finalizers on ClusterQueues, ResourceFlavors and AdmissionChecks: kept while the
/// object exists or is in use. Only objects that changed are looked at, and those being
/// deleted when what uses them may have changed: not every queue on every write.
fn finalizers_and_checks(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
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
    // AdmissionCheck status: active when its parameters resolve.
    let configs: BTreeSet<String> = ctx
        .store
        .of_kind(KUEUE, "ProvisioningRequestConfig")
        .filter(|o| !deleting(o))
        .map(|o| name_of(o).to_string())
        .collect();
    for key in ctx.store.keys_of_kind(KUEUE, "AdmissionCheck") {
        let Some(ac) = ctx.store.get(&key) else {
            continue;
        };
        if ac.pointer("/spec/controllerName").and_then(Value::as_str)
            != Some(PROVISIONING_CONTROLLER)
        {
            continue;
        }
        let params = ac.pointer("/spec/parameters");
        let ok = params.is_some_and(|p| {
            p["kind"] == "ProvisioningRequestConfig"
                && p["name"].as_str().is_some_and(|n| configs.contains(n))
        });
        changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
            if ok {
                set_condition(o, "Active", "True", "Active", "The admission check is active", now);
            } else {
                set_condition(o, "Active", "False", "BadParametersRef", "Cannot load the AdmissionChecks parameters: the ProvisioningRequestConfig does not exist", now);
            }
        });
    }
    // Workloads whose job is gone release their quota and finalizer.
    for key in workload_keys(ctx.store) {
        let Some(w) = ctx.store.get(&key) else {
            continue;
        };
        if deleting(w) && finalizers(w).iter().any(|f| f == KUEUE_FINALIZER) {
            changed |= ctx.store.update(&key, MANAGER, false, now, |o| {
                let list: Vec<String> = finalizers(o)
                    .into_iter()
                    .filter(|f| f != KUEUE_FINALIZER)
                    .collect();
                o["metadata"]["finalizers"] = json!(list);
            });
        }
    }
    changed
}

fn priority_of(store: &Store, job: &Value) -> i32 {
    let class = job
        .pointer("/metadata/labels")
        .and_then(|l| l.get(crate::vocab::labels::PRIORITY_CLASS_LABEL))
        .and_then(Value::as_str);
    class
        .and_then(|c| {
            store.get(&Key::new(
                "kueue.x-k8s.io/v1beta2",
                "WorkloadPriorityClass",
                None,
                c,
            ))
        })
        .and_then(|wpc| wpc["value"].as_i64())
        .map_or(0, |v| v as i32)
}

fn jobs_to_workloads(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let jobs: Vec<Value> = ctx.store.of_kind("ray.io", "RayJob").cloned().collect();
    let owned = super::workload::by_owner(ctx.store.of_kind(KUEUE, "Workload"));
    for job in jobs {
        if deleting(&job)
            || job
                .pointer("/metadata/labels")
                .and_then(|l| l.get(QUEUE_NAME_LABEL))
                .is_none()
        {
            continue;
        }
        if owned.contains_key(uid_of(&job)) {
            continue;
        }
        if job.pointer("/status/jobDeploymentStatus") == Some(&json!("Complete")) {
            continue;
        }
        let mut workload = super::workload::for_ray_job(&job, priority_of(ctx.store, &job));
        for (k, v) in job
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if k.starts_with(PROVREQ_PREFIX) {
                workload["metadata"]["annotations"][k] = v.clone();
            }
        }
        changed |= ctx.store.create(workload, MANAGER, ctx.now);
    }
    changed
}

fn owner_job<'a>(store: &'a Store, w: &Value) -> Option<&'a Value> {
    let owner = owners(w).next()?;
    let namespace = w.pointer("/metadata/namespace").and_then(Value::as_str);
    let job = store.get(&Key::new(
        owner["apiVersion"].as_str().unwrap_or_default(),
        owner["kind"].as_str().unwrap_or_default(),
        namespace,
        owner["name"].as_str().unwrap_or_default(),
    ))?;
    (job.pointer("/metadata/uid") == owner.get("uid")).then_some(job)
}

fn finish_workloads(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in workload_keys(ctx.store) {
        let Some(w) = ctx.store.get(&key) else {
            continue;
        };
        if finished(w) {
            continue;
        }
        let Some(job) = owner_job(ctx.store, w) else {
            continue;
        };
        let outcome = match job.pointer("/status/jobStatus").and_then(Value::as_str) {
            Some("SUCCEEDED") => ("Succeeded", "Job finished successfully"),
            Some("FAILED") => ("Failed", "Job failed"),
            _ => continue,
        };
        changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
            set_condition(o, "Finished", "True", outcome.0, outcome.1, now);
        });
        changed |= ctx.store.update(&key, MANAGER, false, now, |o| {
            let list: Vec<String> = finalizers(o)
                .into_iter()
                .filter(|f| f != KUEUE_FINALIZER)
                .collect();
            o["metadata"]["finalizers"] = json!(list);
        });
    }
    // ProvisioningRequests of finished or evicted Workloads are deleted.
    let done: BTreeSet<String> = ctx
        .store
        .of_kind(KUEUE, "Workload")
        .filter(|w| finished(w) || !condition_true(w, "QuotaReserved"))
        .map(|w| uid_of(w).to_string())
        .collect();
    let stale: Vec<Key> = ctx
        .store
        .of_kind("autoscaling.x-k8s.io", "ProvisioningRequest")
        .filter(|pr| !deleting(pr))
        .filter(|pr| {
            pr.pointer("/metadata/ownerReferences/0/uid")
                .and_then(Value::as_str)
                .is_some_and(|u| done.contains(u))
        })
        .map(Key::of)
        .collect();
    for key in stale {
        changed |= ctx.store.delete(&key, false, now);
    }
    changed
}

/// Evicted Workloads whose backoff has passed queue again.
fn requeue(ctx: &mut Ctx<'_>) -> bool {
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

/// The scheduler: gkq's placement prediction over the live cluster decides.
fn schedule(ctx: &mut Ctx<'_>) -> bool {
    let now = ctx.now;
    // Nothing to admit without a Workload waiting for quota: then the queues are not read.
    if !ctx
        .store
        .of_kind(KUEUE, "Workload")
        .any(|w| !deleting(w) && !reserving(w) && !finished(w))
    {
        return false;
    }
    let mut cluster = Cluster::default();
    for (group, kind) in [
        (KUEUE, "ClusterQueue"),
        (KUEUE, "Cohort"),
        (KUEUE, "ResourceFlavor"),
        (KUEUE, "LocalQueue"),
        (KUEUE, "AdmissionCheck"),
        (KUEUE, "ProvisioningRequestConfig"),
        (KUEUE, "WorkloadPriorityClass"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("", "Namespace"),
    ] {
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
        if deleting(w) || waiting {
            continue;
        }
        let _ = cluster.add_object(w);
    }
    if cluster.pending_workloads.is_empty() {
        return false;
    }
    let pending: Vec<PendingWorkload> = cluster.pending_workloads.clone();
    let prediction = predict(&cluster, &[]);
    let mut changed = false;
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

fn flavor(store: &Store, name: &str) -> Option<Value> {
    store
        .get(&Key::new(
            "kueue.x-k8s.io/v1beta2",
            "ResourceFlavor",
            None,
            name,
        ))
        .cloned()
}

/// The pod template of a Workload podset with its flavors' node labels and tolerations.
fn template_with_flavors(store: &Store, w: &Value, podset: &str) -> Value {
    let mut template = w
        .pointer("/spec/podSets")
        .and_then(Value::as_array)
        .and_then(|ps| ps.iter().find(|p| p["name"] == podset))
        .and_then(|p| p.get("template").cloned())
        .unwrap_or_else(|| json!({}));
    let flavors: BTreeSet<String> = w
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|p| p["name"] == podset))
        .and_then(|p| p["flavors"].as_object())
        .map(|f| {
            f.values()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for f in flavors.iter().filter_map(|f| flavor(store, f)) {
        inject_flavor(&mut template, &f);
    }
    template
}

fn inject_flavor(template: &mut Value, flavor: &Value) {
    let Some(spec) = child_map(template, "spec") else {
        return;
    };
    let labels = flavor
        .pointer("/spec/nodeLabels")
        .and_then(Value::as_object);
    if let Some(labels) = labels.filter(|l| !l.is_empty()) {
        let selector = spec.entry("nodeSelector").or_insert_with(|| json!({}));
        if let Some(selector) = selector.as_object_mut() {
            for (k, v) in labels {
                selector.insert(k.clone(), v.clone());
            }
        }
    }
    let tolerations = flavor
        .pointer("/spec/tolerations")
        .and_then(Value::as_array);
    if let Some(tolerations) = tolerations.filter(|t| !t.is_empty()) {
        let list = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            for t in tolerations {
                if !list.contains(t) {
                    list.push(t.clone());
                }
            }
        }
    }
}

/// Merges `entries` into the string map at `template.<section>.<field>`, when that is a map.
fn merge_into(template: &mut Value, section: &str, field: &str, entries: &Value) {
    let Some(entries) = entries.as_object().filter(|e| !e.is_empty()) else {
        return;
    };
    let Some(parent) = child_map(template, section) else {
        return;
    };
    let target = parent.entry(field).or_insert_with(|| json!({}));
    if target.is_null() {
        *target = json!({});
    }
    if let Some(map) = target.as_object_mut() {
        for (k, v) in entries {
            map.insert(k.clone(), v.clone());
        }
    }
}

fn check_states(w: &Value) -> Vec<Value> {
    w.pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn set_check(
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

/// The ProvisioningRequest admission check controller.
fn provisioning_checks(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in workload_keys(ctx.store) {
        let Some(w) = ctx.store.get(&key).cloned() else {
            continue;
        };
        if !reserving(&w) || deleting(&w) {
            continue;
        }
        for state in check_states(&w) {
            let check = state["name"].as_str().unwrap_or_default().to_string();
            if state["state"] != "Pending" {
                continue;
            }
            let Some(ac) = ctx
                .store
                .get(&Key::new(
                    "kueue.x-k8s.io/v1beta2",
                    "AdmissionCheck",
                    None,
                    &check,
                ))
                .cloned()
            else {
                continue;
            };
            if ac.pointer("/spec/controllerName").and_then(Value::as_str)
                != Some(PROVISIONING_CONTROLLER)
                || !condition_true(&ac, "Active")
            {
                continue;
            }
            let config_name = ac
                .pointer("/spec/parameters/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Some(config) = ctx
                .store
                .get(&Key::new(
                    "kueue.x-k8s.io/v1beta2",
                    "ProvisioningRequestConfig",
                    None,
                    config_name,
                ))
                .cloned()
            else {
                continue;
            };
            let attempt = *ctx.sim.attempts.entry(uid_of(&w).to_string()).or_insert(1);
            let pr_name = format!("{}-{check}-{attempt}", name_of(&w));
            let namespace = key.namespace.clone();
            let pr_key = Key::new(
                "autoscaling.x-k8s.io/v1",
                "ProvisioningRequest",
                Some(&namespace),
                &pr_name,
            );
            let Some(pr) = ctx.store.get(&pr_key).cloned() else {
                changed |= create_request(ctx, &w, &config, &pr_name);
                continue;
            };
            let class = config
                .pointer("/spec/provisioningClassName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let message_of = |kind: &str| {
                pr.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
                    .and_then(|c| c["message"].as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            if condition_true(&pr, "Provisioned") {
                let updates: Vec<Value> = pr["spec"]["podSets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|ps| ps.pointer("/podTemplateRef/name").and_then(Value::as_str))
                    .filter_map(|t| t.strip_prefix(&format!("ppt-{pr_name}-")))
                    .map(|podset| {
                        json!({"name": podset, "annotations": {
                            CONSUME_ANNOTATION: pr_name, CLASS_ANNOTATION: class}})
                    })
                    .collect();
                changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                    set_check(o, &check, "Ready", "", Some(Value::Array(updates)), now);
                });
            } else if condition_true(&pr, "Failed") {
                let limit = config
                    .pointer("/spec/retryStrategy/backoffLimitCount")
                    .and_then(Value::as_u64)
                    .unwrap_or(3) as u32;
                let base = config
                    .pointer("/spec/retryStrategy/backoffBaseSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(60);
                let max = config
                    .pointer("/spec/retryStrategy/backoffMaxSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(1800);
                let failure = message_of("Failed");
                if attempt <= limit {
                    let backoff = (base.saturating_mul(1 << (attempt - 1).min(20))).min(max);
                    let at = timestamp(now + backoff * 1000);
                    ctx.sim.attempts.insert(uid_of(&w).to_string(), attempt + 1);
                    changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                        set_check(
                            o,
                            &check,
                            "Pending",
                            &format!("Retrying after failure: {failure}"),
                            None,
                            now,
                        );
                        evict(
                            o,
                            "AdmissionCheck",
                            &format!("At least one admission check is false: {check}: {failure}"),
                            now,
                        );
                        o["status"]["requeueState"] = json!({"count": attempt, "requeueAt": at});
                    });
                } else {
                    changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                        set_check(o, &check, "Rejected", &failure, None, now);
                        evict(o, "Deactivated", &format!("The workload is deactivated due to Rejected admission check {check} after {limit} retries"), now);
                    });
                    changed |= ctx.store.update(&key, MANAGER, false, now, |o| {
                        o["spec"]["active"] = json!(false);
                    });
                }
                changed |= ctx.store.delete(&pr_key, false, now);
            } else {
                let message = message_of("Provisioned");
                if state["message"] != message.as_str() {
                    changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
                        set_check(o, &check, "Pending", &message, None, now);
                    });
                }
            }
        }
    }
    changed
}

/// Releases a Workload's quota reservation.
fn evict(o: &mut Value, reason: &str, message: &str, now: u64) {
    if let Some(status) = o["status"].as_object_mut() {
        status.remove("admission");
    }
    set_condition(o, "QuotaReserved", "False", "Pending", message, now);
    remove_condition(o, "Admitted");
    set_condition(o, "Evicted", "True", reason, message, now);
}

fn create_request(ctx: &mut Ctx<'_>, w: &Value, config: &Value, pr_name: &str) -> bool {
    let namespace = w["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let managed: Vec<String> = config
        .pointer("/spec/managedResources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    let Ok(pending) = PendingWorkload::from_object(w) else {
        return false;
    };
    let podsets: Vec<(String, i32)> = pending
        .pod_sets
        .iter()
        .filter(|p| p.count > 0)
        .filter(|p| managed.is_empty() || p.requests.keys().any(|r| managed.contains(r)))
        .map(|p| (p.name.clone(), p.count))
        .collect();
    let mut parameters = config
        .pointer("/spec/parameters")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (k, v) in w
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(param) = k.strip_prefix(PROVREQ_PREFIX) {
            parameters[param] = v.clone();
        }
    }
    let mut spec = json!({
        "provisioningClassName": config.pointer("/spec/provisioningClassName").cloned().unwrap_or(Value::Null),
        "podSets": podsets.iter().map(|(ps, count)| json!({"podTemplateRef": {"name": format!("ppt-{pr_name}-{ps}")}, "count": count})).collect::<Vec<_>>(),
    });
    if parameters.as_object().is_some_and(|p| !p.is_empty()) {
        spec["parameters"] = parameters;
    }
    let pr = json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": pr_name, "namespace": namespace,
            "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
            "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "name": name_of(w), "uid": uid_of(w), "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
    });
    let now = ctx.now;
    if !ctx.store.create(pr, MANAGER, now) {
        return false;
    }
    let pr_uid = ctx
        .store
        .get(&Key::new(
            "autoscaling.x-k8s.io/v1",
            "ProvisioningRequest",
            Some(&namespace),
            pr_name,
        ))
        .map(|p| uid_of(p).to_string())
        .unwrap_or_default();
    for (podset, _) in &podsets {
        let template = template_with_flavors(ctx.store, w, podset);
        let object = json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": format!("ppt-{pr_name}-{podset}"), "namespace": namespace,
                "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
                "ownerReferences": [{"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                    "name": pr_name, "uid": pr_uid, "controller": true, "blockOwnerDeletion": true}]},
            "template": template,
        });
        ctx.store.create(object, MANAGER, now);
    }
    true
}

/// A Workload whose checks are all Ready is admitted.
fn admit_when_ready(ctx: &mut Ctx<'_>) -> bool {
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

/// The pointer of a RayJob pod template for a podset.
fn template_pointer(job: &Value, podset: &str) -> Option<String> {
    if podset == "head" {
        return Some("/spec/rayClusterSpec/headGroupSpec/template".into());
    }
    if podset == "submitter" {
        return job
            .pointer("/spec/submitterPodTemplate")
            .map(|_| "/spec/submitterPodTemplate".to_string());
    }
    job.pointer("/spec/rayClusterSpec/workerGroupSpecs")
        .and_then(Value::as_array)?
        .iter()
        .position(|g| g["groupName"].as_str().map(str::to_lowercase).as_deref() == Some(podset))
        .map(|i| format!("/spec/rayClusterSpec/workerGroupSpecs/{i}/template"))
}

/// Admitted jobs run (suspend off, flavors injected); jobs that lost their admission stop.
fn suspend_or_resume_jobs(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let now = ctx.now;
    for key in workload_keys(ctx.store) {
        let Some(w) = ctx.store.get(&key).cloned() else {
            continue;
        };
        let Some(job) = owner_job(ctx.store, &w).cloned() else {
            continue;
        };
        let job_key = Key::of(&job);
        let suspended = job.pointer("/spec/suspend") == Some(&json!(true));
        let admitted = condition_true(&w, "Admitted") && !finished(&w);
        if admitted && suspended {
            let mut injections: Vec<(String, Value)> = Vec::new();
            for assignment in w
                .pointer("/status/admission/podSetAssignments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let podset = assignment["name"].as_str().unwrap_or_default();
                let Some(pointer) = template_pointer(&job, podset) else {
                    continue;
                };
                let flavors: Vec<Value> = assignment["flavors"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(_, v)| v.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .filter_map(|f| flavor(ctx.store, f))
                    .collect();
                let updates: Vec<Value> = check_states(&w)
                    .iter()
                    .flat_map(|state| {
                        state["podSetUpdates"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter(|update| update["name"] == podset)
                    .collect();
                let mut patch = json!({"flavors": flavors, "updates": updates});
                patch["podset"] = json!(podset);
                injections.push((pointer, patch));
            }
            changed |= ctx.store.update(&job_key, MANAGER, false, now, |o| {
                if let Some(spec) = child_map(o, "spec") {
                    spec.insert("suspend".into(), json!(false));
                }
                for (pointer, patch) in &injections {
                    let Some(template) = o.pointer_mut(pointer) else {
                        continue;
                    };
                    for f in patch["flavors"].as_array().into_iter().flatten() {
                        inject_flavor(template, f);
                    }
                    merge_into(
                        template,
                        "metadata",
                        "labels",
                        &json!({"kueue.x-k8s.io/podset": patch["podset"]}),
                    );
                    for update in patch["updates"].as_array().into_iter().flatten() {
                        merge_into(template, "metadata", "annotations", &update["annotations"]);
                        merge_into(template, "metadata", "labels", &update["labels"]);
                        merge_into(template, "spec", "nodeSelector", &update["nodeSelector"]);
                    }
                }
            });
        } else if !admitted && !suspended && !finished(&w) {
            changed |= ctx.store.update(&job_key, MANAGER, false, now, |o| {
                if let Some(spec) = child_map(o, "spec") {
                    spec.insert("suspend".into(), json!(true));
                }
            });
        }
    }
    changed
}

/// The sum, in the first quantity's format (`0` for none).
fn sum(quantities: &[Quantity]) -> Quantity {
    match quantities.split_first() {
        Some((first, rest)) => rest.iter().fold(*first, |a, b| a.saturating_add(*b)),
        None => Quantity::ZERO,
    }
}

fn sum_usage(workloads: &[&Value], flavor: &str, resource: &str) -> Quantity {
    let mut all = Vec::new();
    for w in workloads {
        for a in w
            .pointer("/status/admission/podSetAssignments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if a["flavors"][resource] == flavor
                && let Some(q) = a["resourceUsage"]
                    .get(resource)
                    .and_then(|v| Quantity::from_json(v).ok())
            {
                all.push(q);
            }
        }
    }
    sum(&all)
}

/// The status Kueue writes on a ClusterQueue or a LocalQueue: the same fields on both.
struct QueueStatus {
    active: bool,
    reason: &'static str,
    message: String,
    pending: usize,
    reserving: usize,
    admitted: usize,
    reservation: Value,
    usage: Value,
}

impl QueueStatus {
    fn write(&self, queue: &mut Value, now: u64) {
        let active = if self.active { "True" } else { "False" };
        set_condition(queue, "Active", active, self.reason, &self.message, now);
        queue["status"]["pendingWorkloads"] = json!(self.pending);
        queue["status"]["reservingWorkloads"] = json!(self.reserving);
        queue["status"]["admittedWorkloads"] = json!(self.admitted);
        queue["status"]["flavorsReservation"] = self.reservation.clone();
        queue["status"]["flavorsUsage"] = self.usage.clone();
    }
}

fn flavor_table(cq: &Value, workloads: &[&Value], borrowed: bool) -> Value {
    let mut rows = Vec::new();
    for group in cq
        .pointer("/spec/resourceGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for f in group["flavors"].as_array().into_iter().flatten() {
            let fname = f["name"].as_str().unwrap_or_default();
            let resources: Vec<Value> = f["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    let rname = r["name"].as_str().unwrap_or_default();
                    let total = sum_usage(workloads, fname, rname).to_canonical_string();
                    if borrowed {
                        json!({"name": rname, "total": total, "borrowed": "0"})
                    } else {
                        json!({"name": rname, "total": total})
                    }
                })
                .collect();
            rows.push(json!({"name": fname, "resources": resources}));
        }
    }
    Value::Array(rows)
}

/// A Workload's namespace and LocalQueue.
fn queue_of(w: &Value) -> (&str, &str) {
    let ns = w["metadata"]["namespace"].as_str().unwrap_or_default();
    let lq = w
        .pointer("/spec/queueName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    (ns, lq)
}

/// Whether a ClusterQueue can admit: `(active, reason, message)` as Kueue words them.
fn cq_state(
    cq: &Value,
    flavors: &BTreeSet<String>,
    checks: &BTreeMap<String, bool>,
) -> (bool, &'static str, String) {
    let missing_flavors: Vec<String> = cq_flavors(cq)
        .into_iter()
        .filter(|f| !flavors.contains(f))
        .collect();
    let bad_checks: Vec<String> = cq_checks(cq)
        .into_iter()
        .filter(|c| checks.get(c) != Some(&true))
        .collect();
    let stopped = cq
        .pointer("/spec/stopPolicy")
        .and_then(Value::as_str)
        .is_some_and(|p| p != "None");
    if deleting(cq) {
        (
            false,
            "Terminating",
            "Can't admit new workloads; clusterQueue is terminating".to_string(),
        )
    } else if stopped {
        (
            false,
            "Stopped",
            "Can't admit new workloads: the ClusterQueue is stopped".to_string(),
        )
    } else if !missing_flavors.is_empty() {
        (
            false,
            "FlavorNotFound",
            format!(
                "Can't admit new workloads: references missing ResourceFlavor(s): {}.",
                missing_flavors.join(", ")
            ),
        )
    } else if !bad_checks.is_empty() {
        (
            false,
            "AdmissionCheckInactive",
            format!(
                "Can't admit new workloads: references missing or inactive AdmissionCheck(s): {}.",
                bad_checks.join(", ")
            ),
        )
    } else {
        (true, "Ready", "Can admit new workloads".to_string())
    }
}

/// Queue status, as Kueue keeps it. Only the queues whose inputs changed since the last pass
/// are recomputed: a LocalQueue's status depends on itself, its ClusterQueue and the Workloads
/// in it; a ClusterQueue's on itself, flavors, checks and Workloads. So applying thousands of
/// queues costs each write its own queue, not all of them.
fn queue_status(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
    let mut changed = false;
    let now = ctx.now;
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
    let workloads: Vec<Value> = ctx.store.of_kind(KUEUE, "Workload").cloned().collect();
    let flavors: BTreeSet<String> = ctx
        .store
        .of_kind(KUEUE, "ResourceFlavor")
        .map(|f| name_of(f).to_string())
        .collect();
    let checks: BTreeMap<String, bool> = ctx
        .store
        .of_kind(KUEUE, "AdmissionCheck")
        .map(|c| (name_of(c).to_string(), condition_true(c, "Active")))
        .collect();
    // The ClusterQueue of each LocalQueue that holds a Workload.
    let mut cq_of_lq: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    for w in &workloads {
        let (ns, lq) = queue_of(w);
        cq_of_lq
            .entry((ns.to_string(), lq.to_string()))
            .or_insert_with(|| {
                ctx.store
                    .get(&Key::new(
                        "kueue.x-k8s.io/v1beta2",
                        "LocalQueue",
                        Some(ns),
                        lq,
                    ))
                    .and_then(|q| q.pointer("/spec/clusterQueue").and_then(Value::as_str))
                    .map(str::to_string)
            });
    }
    for key in cq_keys {
        let Some(cq) = ctx.store.get(&key).cloned() else {
            continue;
        };
        let (active, reason, message) = cq_state(&cq, &flavors, &checks);
        let in_cq: Vec<&Value> = workloads
            .iter()
            .filter(|w| reserving(w))
            .filter(|w| {
                w.pointer("/status/admission/clusterQueue")
                    .and_then(Value::as_str)
                    == Some(key.name.as_str())
            })
            .collect();
        let admitted: Vec<&Value> = in_cq
            .iter()
            .copied()
            .filter(|w| condition_true(w, "Admitted"))
            .collect();
        let pending = workloads
            .iter()
            .filter(|w| {
                !reserving(w) && !finished(w) && w.pointer("/spec/active") != Some(&json!(false))
            })
            .filter(|w| {
                let (ns, lq) = queue_of(w);
                cq_of_lq
                    .get(&(ns.to_string(), lq.to_string()))
                    .and_then(Option::as_deref)
                    == Some(key.name.as_str())
            })
            .count();
        let reservation = flavor_table(&cq, &in_cq, true);
        let usage = flavor_table(&cq, &admitted, true);
        let status = QueueStatus {
            active,
            reason,
            message,
            pending,
            reserving: in_cq.len(),
            admitted: admitted.len(),
            reservation,
            usage,
        };
        changed |= ctx
            .store
            .update(&key, MANAGER, true, now, |o| status.write(o, now));
    }
    for key in lq_keys {
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
            Some(cq) if cq_state(cq, &flavors, &checks).0 => (
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
        let mine: Vec<&Value> = workloads
            .iter()
            .filter(|w| w["metadata"]["namespace"] == key.namespace.as_str())
            .filter(|w| {
                w.pointer("/spec/queueName").and_then(Value::as_str) == Some(key.name.as_str())
            })
            .collect();
        let in_lq: Vec<&Value> = mine.iter().copied().filter(|w| reserving(w)).collect();
        let admitted: Vec<&Value> = in_lq
            .iter()
            .copied()
            .filter(|w| condition_true(w, "Admitted"))
            .collect();
        let pending = mine
            .iter()
            .filter(|w| {
                !reserving(w) && !finished(w) && w.pointer("/spec/active") != Some(&json!(false))
            })
            .count();
        let (reservation, usage) = match &cq {
            Some(cq) => (
                flavor_table(cq, &in_lq, false),
                flavor_table(cq, &admitted, false),
            ),
            None => (json!([]), json!([])),
        };
        let status = QueueStatus {
            active,
            reason,
            message,
            pending,
            reserving: in_lq.len(),
            admitted: admitted.len(),
            reservation,
            usage,
        };
        changed |= ctx
            .store
            .update(&key, MANAGER, true, now, |o| status.write(o, now));
    }
    changed
}
