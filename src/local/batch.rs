//! JobSet and batch Job controllers, simulated: a job that is suspended (Kueue's webhook creates
//! queued jobs so) stays `Suspended`; once Kueue unsuspends it, its pods wait for nodes of the
//! pools their podsets' flavors map to (a JobSet's pods per slice, scheduled together by
//! [`super::ray::schedule`] like a Ray cluster's), then run for the job's declared duration (or
//! `GKQ_LOCAL_RUN`) and succeed: a JobSet becomes `Completed`, a Job `Complete`. Suspending a
//! running job stops its pods. No child Jobs are created, and of the pods only the driver
//! ([`super::pods`]); the status counts stand for the rest, and every condition message says it
//! is simulated.

use serde_json::{Value, json};

use super::controller::{Ctx, Outcome, Run, jobs_to_visit};
use super::store::{Changes, Key, set_condition, timestamp};
use crate::placement::PendingWorkload;
use crate::placement::podsets::stored_job_set_replicas;
use crate::vocab::object::uid_of;

const JOBSET_MANAGER: &str = "jobset-controller-manager";
const JOB_MANAGER: &str = "kube-controller-manager";
const SIMULATED: &str = "(simulated)";

/// `(group, kind)` of the jobs these controllers run.
const KINDS: [(&str, &str); 2] = [("jobset.x-k8s.io", "JobSet"), ("batch", "Job")];

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Suspended,
    /// Admitted; pods wait for nodes, or start.
    Starting,
    Running,
    Finished(u64),
}

fn phase(run: Option<&Run>, suspended: bool, startup: u64, now: u64) -> Phase {
    match run {
        None => Phase::Suspended,
        Some(_) if suspended => Phase::Suspended,
        Some(run) => match (
            run.running_ms(startup).filter(|t| *t <= now),
            run.finished_ms(startup).filter(|t| *t <= now),
        ) {
            (_, Some(end)) => Phase::Finished(end),
            (Some(_), None) => Phase::Running,
            (None, None) => Phase::Starting,
        },
    }
}

fn finished(job: &Value) -> bool {
    crate::vocab::object::condition_true(job, "Completed")
        || crate::vocab::object::condition_true(job, "Complete")
}

/// The JobSet and Job controllers, over the jobs that changed since their last pass and those
/// with a run: the others' status cannot have moved.
pub fn reconcile(ctx: &mut Ctx<'_>) -> Outcome {
    let mut changed = false;
    let changes = std::mem::replace(&mut ctx.sim.batch_changes, Changes::none());
    let since = ctx.sim.batch_visited_ms.replace(ctx.now);
    let (keys, removed) = jobs_to_visit(ctx, &changes, &KINDS, &[], since);
    let runs = &ctx.sim.runs;
    ctx.sim
        .runs_moved
        .retain(|uid| runs.get(uid).is_some_and(|r| r.kind == "RayJob"));
    if removed {
        let all: Vec<Key> = KINDS
            .iter()
            .flat_map(|(group, kind)| ctx.store.keys_of_kind(group, kind))
            .collect();
        changed |= ctx
            .sim
            .forget_runs_of_deleted(ctx.store, &["JobSet", "Job"], &all);
    }
    for key in keys {
        let Some(job) = ctx.store.get(&key).cloned() else {
            continue;
        };
        if job.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        changed |= step(ctx, &key, &job);
    }
    changed |= super::pods::forget_deleted(ctx);
    Outcome { changed }
}

/// One job: start or stop its run, and write the status of where it is.
fn step(ctx: &mut Ctx<'_>, key: &Key, job: &Value) -> bool {
    let mut changed = false;
    let now = ctx.now;
    let uid = uid_of(job).to_string();
    let kind = job["kind"].as_str().unwrap_or_default().to_string();
    let suspended = job.pointer("/spec/suspend") == Some(&json!(true));
    if suspended {
        changed |= ctx.sim.runs.remove(&uid).is_some();
    } else if !finished(job) && !ctx.sim.runs.contains_key(&uid) {
        ctx.sim.runs.insert(
            uid.clone(),
            Run {
                kind: kind.clone(),
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                admitted_ms: now,
                scheduled_ms: None,
                runtime_ms: super::ray::declared_runtime_ms(job, ctx.settings.run_ms),
                waiting: None,
            },
        );
        changed = true;
    }
    let run = ctx.sim.runs.get(&uid).cloned();
    changed |= super::pods::sync(ctx, job, run.as_ref());
    if finished(job) {
        return changed;
    }
    let phase = phase(run.as_ref(), suspended, ctx.settings.ray_startup_ms, now);
    let pods: Vec<(String, i64, i64)> = PendingWorkload::from_object(job)
        .map(|w| {
            w.pod_sets
                .iter()
                .map(|ps| {
                    let replicas = replicas_of(job, &ps.name);
                    (ps.name.clone(), replicas, i64::from(ps.count))
                })
                .collect()
        })
        .unwrap_or_default();
    let seen = Seen {
        job,
        phase,
        pods: &pods,
        waiting: run.as_ref().and_then(|r| r.waiting.clone()),
        run: run.as_ref(),
    };
    let status = match kind.as_str() {
        "JobSet" => job_set_status(seen),
        _ => job_status(seen),
    };
    let manager = if kind == "JobSet" {
        JOBSET_MANAGER
    } else {
        JOB_MANAGER
    };
    changed |= ctx.store.update(key, manager, true, now, |o| {
        o["status"] = status;
    });
    changed
}

/// A JobSet's replicas of the replicated job behind podset `name` (1 for a batch Job).
fn replicas_of(job: &Value, name: &str) -> i64 {
    job.pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .and_then(|rjs| {
            rjs.iter()
                .find(|rj| rj["name"].as_str().map(str::to_lowercase).as_deref() == Some(name))
        })
        .map_or(1, |rj| stored_job_set_replicas(rj["replicas"].as_i64()))
}

/// Sets a condition in a `status` being built (the store's helper works on whole objects).
fn condition(status: &mut Value, kind: &str, value: &str, reason: &str, message: &str, at: u64) {
    let mut object = json!({"status": status.take()});
    set_condition(&mut object, kind, value, reason, message, at);
    *status = object["status"].take();
}

/// What a job's status is written from: the job, where its run is, its podsets as
/// `(name, replicas, pods)`, why its pods wait, and the run.
struct Seen<'a> {
    job: &'a Value,
    phase: Phase,
    pods: &'a [(String, i64, i64)],
    waiting: Option<String>,
    run: Option<&'a Run>,
}

impl Seen<'_> {
    /// The status to build on: the job's conditions so far.
    fn status(&self) -> Value {
        json!({"conditions": self.job.pointer("/status/conditions").cloned().unwrap_or(json!([]))})
    }
}

fn job_set_status(seen: Seen<'_>) -> Value {
    let mut status = seen.status();
    let Seen {
        phase,
        pods,
        waiting,
        run,
        ..
    } = seen;
    let at = run.map_or(0, |r| r.admitted_ms);
    let replicated: Vec<Value> = pods
        .iter()
        .map(|(name, replicas, _)| {
            let (active, ready, succeeded, suspended) = match phase {
                Phase::Suspended => (0, 0, 0, *replicas),
                Phase::Starting => (*replicas, 0, 0, 0),
                Phase::Running => (*replicas, *replicas, 0, 0),
                Phase::Finished(_) => (0, 0, *replicas, 0),
            };
            json!({"name": name, "ready": ready, "succeeded": succeeded, "failed": 0,
                   "active": active, "suspended": suspended})
        })
        .collect();
    status["replicatedJobsStatus"] = json!(replicated);
    match phase {
        Phase::Suspended => condition(
            &mut status,
            "Suspended",
            "True",
            "SuspendedJobs",
            &format!("jobset is suspended until Kueue admits it {SIMULATED}"),
            at,
        ),
        Phase::Starting => condition(
            &mut status,
            "Suspended",
            "False",
            "ResumeJobs",
            &waiting.unwrap_or_else(|| format!("pods are starting {SIMULATED}")),
            at,
        ),
        Phase::Running => condition(
            &mut status,
            "Suspended",
            "False",
            "ResumeJobs",
            &format!(
                "running {SIMULATED}: the job runs {}",
                crate::vocab::duration::format_ms(run.map_or(0, |r| r.runtime_ms))
            ),
            at,
        ),
        Phase::Finished(end) => {
            condition(
                &mut status,
                "Completed",
                "True",
                "AllJobsCompleted",
                &format!("jobset completed successfully {SIMULATED}"),
                end,
            );
            status["terminalState"] = json!("Completed");
        }
    }
    status
}

fn job_status(seen: Seen<'_>) -> Value {
    let mut status = seen.status();
    let Seen {
        job,
        phase,
        pods,
        waiting,
        run,
    } = seen;
    let count = pods.first().map_or(0, |(_, _, count)| *count);
    let at = run.map_or(0, |r| r.admitted_ms);
    match phase {
        Phase::Suspended => {
            condition(
                &mut status,
                "Suspended",
                "True",
                "JobSuspended",
                &format!("Job suspended until Kueue admits it {SIMULATED}"),
                at,
            );
        }
        Phase::Starting | Phase::Running => {
            condition(
                &mut status,
                "Suspended",
                "False",
                "JobResumed",
                &match (phase, waiting) {
                    (Phase::Starting, Some(w)) => w,
                    (Phase::Starting, None) => format!("pods are starting {SIMULATED}"),
                    _ => format!("running {SIMULATED}"),
                },
                at,
            );
            status["startTime"] = json!(timestamp(at));
            status["active"] = json!(count);
            status["ready"] = json!(if phase == Phase::Running { count } else { 0 });
        }
        Phase::Finished(end) => {
            let completions = job
                .pointer("/spec/completions")
                .and_then(Value::as_i64)
                .unwrap_or(count);
            let message = format!("Reached expected number of succeeded pods {SIMULATED}");
            condition(
                &mut status,
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                &message,
                end,
            );
            condition(
                &mut status,
                "Complete",
                "True",
                "CompletionsReached",
                &message,
                end,
            );
            status["startTime"] = json!(timestamp(at));
            status["completionTime"] = json!(timestamp(end));
            status["succeeded"] = json!(completions);
            status["active"] = json!(0);
            status["ready"] = json!(0);
        }
    }
    status
}
