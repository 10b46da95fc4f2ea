//! Kueue's job reconciler (`pkg/controller/jobframework`) for the job kinds gkq submits:
//! RayJobs, JobSets and batch Jobs (`pkg/controller/jobs/{rayjob,jobset,job}`): a Workload per
//! queued job, finished when the job finishes; the job unsuspended on admission, with the
//! flavors' node labels and tolerations and the admission checks' pod-set updates injected into
//! its pod templates, and suspended again when it loses its admission.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::super::controller::Ctx;
use super::super::store::{Changes, Key, Store, child_map, set_condition};
use super::podset::{flavor, inject_flavor, merge_into};
use super::workload::{check_states, drop_finalizer};
use super::{KUEUE, MANAGER, PROVREQ_PREFIX, Visit, condition_true, deleting, finished};
use crate::vocab::labels::QUEUE_NAME_LABEL;
use crate::vocab::object::uid_of;

/// `(group, kind)` of the jobs whose Workloads Kueue manages here.
pub(super) const JOB_KINDS: [(&str, &str); 3] = [
    ("ray.io", "RayJob"),
    ("jobset.x-k8s.io", "JobSet"),
    ("batch", "Job"),
];

/// Whether a job has finished, by its own status: `Some((reason, message))` for Kueue's
/// `Finished` condition (`jobframework`'s `Finished` of each integration).
fn job_outcome(job: &Value) -> Option<(&'static str, &'static str)> {
    match job["kind"].as_str()? {
        "RayJob" => match job.pointer("/status/jobStatus").and_then(Value::as_str) {
            Some("SUCCEEDED") => Some(("Succeeded", "Job finished successfully")),
            Some("FAILED") => Some(("Failed", "Job failed")),
            _ => None,
        },
        "JobSet" if condition_true(job, "Completed") => {
            Some(("Succeeded", "jobset completed successfully"))
        }
        "JobSet" if condition_true(job, "Failed") => Some(("Failed", "jobset failed")),
        "Job" if condition_true(job, "Complete") => {
            Some(("Succeeded", "Job finished successfully"))
        }
        "Job" if condition_true(job, "Failed") => Some(("Failed", "Job failed")),
        _ => None,
    }
}

fn priority_of(store: &Store, job: &Value) -> i32 {
    // Placement's rule, over the cluster's priority classes.
    let mut classes = crate::placement::Cluster::default();
    for (group, kind) in [
        (KUEUE, "WorkloadPriorityClass"),
        ("scheduling.k8s.io", "PriorityClass"),
    ] {
        for class in store.of_kind(group, kind) {
            let _ = classes.add_object(class);
        }
    }
    crate::placement::PendingWorkload::from_object(job)
        .ok()
        .and_then(|workload| crate::placement::priority_of(&classes, &workload).ok())
        .unwrap_or(0)
}

/// The WorkloadPriorityClass a job names (its `kueue.x-k8s.io/priority-class` label).
fn workload_priority_class(job: &Value) -> Option<String> {
    match crate::placement::PendingWorkload::from_object(job)
        .ok()?
        .priority
    {
        crate::placement::podsets::PrioritySource::WorkloadPriorityClass(class) => Some(class),
        _ => None,
    }
}

/// The queued jobs that may lack a Workload: every one when a Workload went (or after a
/// restart), else those written since the last pass. Only those not being deleted, with a
/// queue, and not finished.
fn jobs_that_may_need_workloads(store: &Store, changes: &Changes) -> Vec<Key> {
    let workload_gone = changes
        .of_kind(KUEUE, "Workload")
        .any(|k| store.get(k).is_none());
    let keys: Vec<Key> = if changes.all || workload_gone {
        JOB_KINDS
            .iter()
            .flat_map(|(group, kind)| store.keys_of_kind(group, kind))
            .collect()
    } else {
        JOB_KINDS
            .iter()
            .flat_map(|(group, kind)| changes.of_kind(group, kind).cloned())
            .collect()
    };
    keys.into_iter()
        .filter(|key| {
            store.get(key).is_some_and(|job| {
                !deleting(job)
                    && job
                        .pointer("/metadata/labels")
                        .and_then(|l| l.get(QUEUE_NAME_LABEL))
                        .is_some()
                    && job.pointer("/status/jobDeploymentStatus") != Some(&json!("Complete"))
                    && job_outcome(job).is_none()
            })
        })
        .collect()
}

/// A Workload for each queued job without one (of its current run).
pub(super) fn jobs_to_workloads(ctx: &mut Ctx<'_>, changes: &Changes) -> bool {
    let mut changed = false;
    let keys = jobs_that_may_need_workloads(ctx.store, changes);
    if keys.is_empty() {
        return false;
    }
    let jobs: Vec<Value> = keys
        .iter()
        .filter_map(|k| ctx.store.get(k))
        .filter(|job| {
            let owned = super::super::workload::current_runs(
                super::super::workload::owned_workloads(ctx.store, job),
                [*job],
            );
            !owned.contains_key(uid_of(job))
        })
        .cloned()
        .collect();
    for job in jobs {
        let mut workload = super::super::workload::for_job(&job, priority_of(ctx.store, &job));
        if let Some(class) = workload_priority_class(&job) {
            // v1beta2 names the class, whose value the WorkloadPriorityClass controller keeps
            // in `spec.priority`.
            workload["spec"]["priorityClassRef"] =
                json!({"group": KUEUE, "kind": "WorkloadPriorityClass", "name": class});
        }
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
    let owner = w
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .first()?;
    let namespace = w.pointer("/metadata/namespace").and_then(Value::as_str);
    let job = store.get(&Key::new(
        owner["apiVersion"].as_str().unwrap_or_default(),
        owner["kind"].as_str().unwrap_or_default(),
        namespace,
        owner["name"].as_str().unwrap_or_default(),
    ))?;
    (job.pointer("/metadata/uid") == owner.get("uid")).then_some(job)
}

pub(super) fn finish_workloads(ctx: &mut Ctx<'_>, visit: &Visit) -> bool {
    let mut changed = false;
    let now = ctx.now;
    let keys = visit.keys(ctx.store);
    for key in &keys {
        let Some(w) = ctx.store.get(key) else {
            continue;
        };
        if finished(w) {
            continue;
        }
        let Some(job) = owner_job(ctx.store, w) else {
            continue;
        };
        let Some(outcome) = job_outcome(job) else {
            continue;
        };
        changed |= ctx.store.update(key, MANAGER, true, now, |o| {
            set_condition(o, "Finished", "True", outcome.0, outcome.1, now);
        });
        changed |= ctx.store.update(key, MANAGER, false, now, drop_finalizer);
    }
    // ProvisioningRequests of finished or evicted Workloads are deleted: those of the Workloads
    // looked at (a request names its Workload as its first owner).
    let index = ctx.store.index();
    let mut stale: BTreeSet<Key> = BTreeSet::new();
    for key in &keys {
        let Some(w) = ctx
            .store
            .get(key)
            .filter(|w| finished(w) || !condition_true(w, "QuotaReserved"))
        else {
            continue;
        };
        let uid = uid_of(w);
        let requests = index
            .dependents(&key.namespace, "Workload", &key.name)
            .into_iter()
            .flatten()
            .filter(|k| k.group == "autoscaling.x-k8s.io" && k.kind == "ProvisioningRequest");
        stale.extend(
            requests
                .filter(|k| {
                    ctx.store.get(k).is_some_and(|pr| {
                        !deleting(pr)
                            && pr.pointer("/metadata/ownerReferences/0/uid") == Some(&json!(uid))
                    })
                })
                .cloned(),
        );
    }
    for key in stale {
        changed |= ctx.store.delete(&key, false, now);
    }
    changed
}

/// The pointer of the pod template of a job's podset.
fn template_pointer(job: &Value, podset: &str) -> Option<String> {
    match job["kind"].as_str()? {
        "JobSet" => {
            return job
                .pointer("/spec/replicatedJobs")
                .and_then(Value::as_array)?
                .iter()
                .position(|rj| {
                    rj["name"].as_str().map(str::to_lowercase).as_deref() == Some(podset)
                })
                .map(|i| format!("/spec/replicatedJobs/{i}/template/spec/template"));
        }
        "Job" => return Some("/spec/template".into()),
        _ => {}
    }
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
pub(super) fn suspend_or_resume_jobs(ctx: &mut Ctx<'_>, visit: &Visit) -> bool {
    let mut changed = false;
    let now = ctx.now;
    // Only the Workloads whose job is to be resumed or suspended are copied.
    let keys = visit.keys(ctx.store);
    let acting: Vec<(Value, Value)> = keys
        .iter()
        .filter_map(|k| ctx.store.get(k))
        .filter_map(|w| {
            let job = owner_job(ctx.store, w)?;
            let suspended = job.pointer("/spec/suspend") == Some(&json!(true));
            let admitted = condition_true(w, "Admitted") && !finished(w);
            let acts = (admitted && suspended) || (!admitted && !suspended && !finished(w));
            acts.then(|| (w.clone(), job.clone()))
        })
        .collect();
    for (w, job) in acting {
        let job_key = Key::of(&job);
        // As written by the Workloads before this one.
        let Some(job) = ctx.store.get(&job_key).cloned() else {
            continue;
        };
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
