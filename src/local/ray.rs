//! KubeRay, simulated: a RayJob that is not suspended gets a RayCluster and goes
//! `Initializing` (waiting for its nodes) -> `Running` -> `Complete` (`jobStatus` `SUCCEEDED`)
//! on the simulated clock; the cluster is deleted when the job finishes
//! (`shutdownAfterJobFinishes`); a suspended job is `Suspended`. KubeRay's finalizer is added
//! and removed as the operator does. The job runs for its declared duration
//! (`provreq.kueue.x-k8s.io/maxRunDurationSeconds`, which gkq sets from `jobs[].duration`) or the
//! configured default (`GKQ_LOCAL_RUN`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::controller::{Ctx, Outcome, Run, jobs_to_visit};
use super::nodes::{Demand, all_pools, node_keys};
use super::store::{Changes, Key, timestamp};
use super::workload::{SIMULATED_ANNOTATION, SIMULATED_VALUE};
use crate::placement::PendingWorkload;
use crate::placement::pools::{FlavorNodes, flavor_nodes};
use crate::vocab::labels::{MAX_RUN_DURATION_ANNOTATION, NODE_POOL_LABEL};
use crate::vocab::object::uid_of;

const MANAGER: &str = "kuberay-operator";
pub const RAYJOB_FINALIZER: &str = "ray.io/rayjob-finalizer";

fn cluster_name(job: &Value) -> String {
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let hash = super::store::uid(uid_of(job));
    format!("{name}-{}", &hash[..5])
}

/// KubeRay's RayJob controller, over the RayJobs that changed (or whose RayCluster did) since
/// its last pass and those with a run: the others' status cannot have moved.
pub fn reconcile(ctx: &mut Ctx<'_>) -> Outcome {
    let mut changed = false;
    let changes = std::mem::replace(&mut ctx.sim.ray_changes, Changes::none());
    let since = ctx.sim.ray_visited_ms.replace(ctx.now);
    let (jobs, removed) = jobs_to_visit(
        ctx,
        &changes,
        &[("ray.io", "RayJob")],
        &[("ray.io", "RayCluster")],
        since,
    );
    let runs = &ctx.sim.runs;
    ctx.sim
        .runs_moved
        .retain(|uid| runs.get(uid).is_some_and(|r| r.kind != "RayJob"));
    if removed {
        let all = ctx.store.keys_of_kind("ray.io", "RayJob");
        changed |= ctx.sim.forget_runs_of_deleted(ctx.store, &["RayJob"], &all);
    }
    for key in jobs {
        changed |= reconcile_job(ctx, &key);
    }
    changed |= ctx.store.collect_garbage(ctx.now);
    Outcome { changed }
}

/// KubeRay's reconciler for one RayJob: its finalizer, its run, its status, its RayCluster and
/// pods.
fn reconcile_job(ctx: &mut Ctx<'_>, key: &Key) -> bool {
    let mut changed = false;
    let now = ctx.now;
    let Some(job) = ctx.store.get(key).cloned() else {
        return false;
    };
    let job_uid = uid_of(&job).to_string();
    let finalizers = super::store::finalizers(&job);
    if job.pointer("/metadata/deletionTimestamp").is_some() {
        ctx.sim.runs.remove(&job_uid);
        if finalizers.iter().any(|f| f == RAYJOB_FINALIZER) {
            changed |= ctx.store.update(key, MANAGER, false, now, |o| {
                let rest: Vec<String> = super::store::finalizers(o)
                    .into_iter()
                    .filter(|f| f != RAYJOB_FINALIZER)
                    .collect();
                o["metadata"]["finalizers"] = json!(rest);
            });
        }
        return changed;
    }
    if !finalizers.iter().any(|f| f == RAYJOB_FINALIZER) {
        changed |= ctx.store.update(key, MANAGER, false, now, |o| {
            let mut list = super::store::finalizers(o);
            list.push(RAYJOB_FINALIZER.to_string());
            o["metadata"]["finalizers"] = json!(list);
        });
    }
    let suspended = job.pointer("/spec/suspend") == Some(&json!(true));
    let complete = job.pointer("/status/jobDeploymentStatus") == Some(&json!("Complete"));
    changed |= track_run(ctx, key, &job, suspended, complete);
    let run = ctx.sim.runs.get(&job_uid).cloned();
    let ray_cluster = cluster_name(&job);
    let status = match (&run, complete) {
        (_, true) => None,
        (None, false) => Some(json!({
            "jobDeploymentStatus": "Suspended",
            "message": "suspended until Kueue admits the job (simulated KubeRay)",
        })),
        (Some(run), false) => Some(run_status(run, key, &job_uid, &ray_cluster, ctx)),
    };
    if let Some(status) = status {
        let done = status["jobDeploymentStatus"] == "Complete";
        changed |= ctx.store.update(key, MANAGER, true, now, |o| {
            o["status"] = status;
        });
        let wants_cluster = run.is_some() && !done && !suspended;
        changed |= sync_cluster(ctx, &job, &ray_cluster, wants_cluster);
    }
    let run = ctx.sim.runs.get(&job_uid).cloned();
    changed |= super::pods::sync(ctx, &job, run.as_ref());
    changed
}

/// The job's run: forgotten while it is suspended, started when it is first not suspended
/// (and not complete). Returns whether the runs changed.
fn track_run(ctx: &mut Ctx<'_>, key: &Key, job: &Value, suspended: bool, complete: bool) -> bool {
    let job_uid = uid_of(job);
    if suspended {
        return ctx.sim.runs.remove(job_uid).is_some();
    }
    if complete || ctx.sim.runs.contains_key(job_uid) {
        return false;
    }
    let runtime_ms = declared_runtime_ms(job, ctx.settings.run_ms);
    ctx.sim.runs.insert(
        job_uid.to_string(),
        Run {
            kind: "RayJob".to_string(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            admitted_ms: ctx.now,
            scheduled_ms: None,
            runtime_ms,
            waiting: None,
        },
    );
    true
}

/// The status of a RayJob with a run: `Initializing` until its pods run, `Running`, then
/// `Complete` once its runtime has passed.
fn run_status(run: &Run, key: &Key, job_uid: &str, ray_cluster: &str, ctx: &Ctx<'_>) -> Value {
    let now = ctx.now;
    let startup = ctx.settings.ray_startup_ms;
    let running = run.running_ms(startup).filter(|t| *t <= now);
    let finished = run.finished_ms(startup).filter(|t| *t <= now);
    let job_id = format!("{}-{}", key.name, &job_uid[..5.min(job_uid.len())]);
    match (running, finished) {
        (_, Some(end)) => json!({
            "jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
            "jobId": job_id,
            "rayClusterName": ray_cluster,
            "startTime": timestamp(run.admitted_ms), "endTime": timestamp(end),
            "succeeded": 1, "failed": 0,
            "message": "Job finished successfully (simulated KubeRay)",
        }),
        (Some(_), None) => json!({
            "jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
            "jobId": job_id,
            "rayClusterName": ray_cluster,
            "startTime": timestamp(run.admitted_ms),
            "message": format!("running (simulated: the job runs {})", crate::vocab::duration::format_ms(run.runtime_ms)),
        }),
        (None, None) => json!({
            "jobDeploymentStatus": "Initializing",
            "rayClusterName": ray_cluster,
            "startTime": timestamp(run.admitted_ms),
            "message": run.waiting.clone().unwrap_or_else(|| "starting the Ray cluster (simulated)".to_string()),
        }),
    }
}

/// The job's RayCluster created while it is wanted and deleted when not, its state `ready` once
/// the run is on nodes, and its head pod.
fn sync_cluster(ctx: &mut Ctx<'_>, job: &Value, ray_cluster: &str, wants_cluster: bool) -> bool {
    let mut changed = false;
    let now = ctx.now;
    let namespace = job["metadata"]["namespace"].as_str().unwrap_or_default();
    let job_name = job["metadata"]["name"].as_str().unwrap_or_default();
    let job_uid = uid_of(job);
    let cluster_key = Key::new("ray.io/v1", "RayCluster", Some(namespace), ray_cluster);
    let exists = ctx.store.get(&cluster_key).is_some();
    if wants_cluster && !exists {
        let cluster = json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": ray_cluster, "namespace": namespace,
                "labels": {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": job_name},
                "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": job_name,
                    "uid": job_uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": job.pointer("/spec/rayClusterSpec").cloned().unwrap_or_else(|| json!({})),
        });
        changed |= ctx.store.create(cluster, MANAGER, now);
    } else if !wants_cluster && exists {
        changed |= ctx.store.delete(&cluster_key, false, now);
    }
    if !(exists || wants_cluster) {
        return changed;
    }
    let scheduled = ctx
        .sim
        .runs
        .get(job_uid)
        .and_then(|r| r.scheduled_ms)
        .is_some();
    let state = if scheduled { "ready" } else { "pending" };
    changed |= ctx.store.update(&cluster_key, MANAGER, true, now, |o| {
        o["status"]["state"] = json!(state);
    });
    if let Some(cluster) = ctx
        .store
        .get(&cluster_key)
        .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
        .cloned()
    {
        changed |= super::pods::sync_head(ctx, &cluster, scheduled);
    }
    changed
}

/// How long a job runs: its declared duration (`provreq.kueue.x-k8s.io/maxRunDurationSeconds`,
/// which gkq sets from `jobs[].duration`), else `default_ms`.
pub fn declared_runtime_ms(job: &Value, default_ms: u64) -> u64 {
    job.pointer(&format!(
        "/metadata/annotations/{}",
        MAX_RUN_DURATION_ANNOTATION.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .and_then(|s| s.parse::<u64>().ok())
    .map_or(default_ms, |s| s * 1000)
}

/// The pool a podset's pods go to: its flavor's node pool, or the pool its job was given in the
/// flavor's ComputeClass ([`super::computeclass::job_pool`]), else the pod template's own node
/// selector.
fn pool_of(
    ctx: &Ctx<'_>,
    job_uid: &str,
    flavor_nodes: &BTreeMap<String, FlavorNodes>,
    flavors: Option<&Value>,
    template_selector: Option<&str>,
) -> Option<String> {
    let from_flavor = flavors
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(_, f)| f.as_str())
        .find_map(|f| match flavor_nodes.get(f)? {
            FlavorNodes::Pool(pool) => Some(pool.clone()),
            FlavorNodes::ComputeClass(class) => {
                Some(super::computeclass::job_pool(ctx, job_uid, class))
            }
        });
    from_flavor.or_else(|| template_selector.map(str::to_string))
}

/// What each running (or starting) job, of any kind, needs from each pool, in admission order.
/// A run's needs are read from its job and Workload again only when either was written or the
/// pools or flavors changed (`sim.demand_read`).
pub fn demand(ctx: &mut Ctx<'_>) -> Demand {
    let startup = ctx.settings.ray_startup_ms;
    let mut runs: Vec<(&String, &Run)> = ctx
        .sim
        .runs
        .iter()
        .filter(|(_, r)| r.finished_ms(startup).is_none_or(|t| t > ctx.now))
        .collect();
    runs.sort_by(|(ua, a), (ub, b)| {
        (a.scheduled_ms.is_none(), a.admitted_ms, ua).cmp(&(
            b.scheduled_ms.is_none(),
            b.admitted_ms,
            ub,
        ))
    });
    let flavor_nodes = flavor_nodes(ctx.store.of_kind("kueue.x-k8s.io", "ResourceFlavor"));
    let inputs = (all_pools(ctx.pools, &ctx.sim.auto_pools), flavor_nodes);
    let mut read = std::mem::take(&mut ctx.sim.demand_read);
    if read.inputs.as_ref() != Some(&inputs) {
        read.runs.clear();
        read.inputs = Some(inputs.clone());
    }
    let mut out = Demand::new();
    let mut seen: std::collections::HashSet<&String> = Default::default();
    for (job_uid, run) in runs {
        let Some(job) = ctx.store.get(&run.job_key()) else {
            continue;
        };
        seen.insert(job_uid);
        let workloads = super::workload::owned_workloads(ctx.store, job);
        let owned = super::workload::current_runs(workloads, [job]);
        let workload = owned.get(job_uid.as_str()).and_then(|k| ctx.store.get(k));
        let version = |o: &Value| {
            o.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        // A ComputeClass's job goes to the pool it was given: a new one is a new read.
        let given = ctx.sim.auto_pools.jobs.get(job_uid.as_str()).cloned();
        let versions = (
            version(job),
            workload.map(|w| (Key::of(w), version(w))),
            given,
        );
        let needs = match read.runs.get(job_uid) {
            Some((v, needs)) if *v == versions => needs.clone(),
            _ => {
                let needs = run_needs(ctx, job_uid, &inputs, job, workload);
                read.runs.insert(job_uid.clone(), (versions, needs.clone()));
                needs
            }
        };
        out.extend(
            needs
                .into_iter()
                .map(|(pool, nodes)| (job_uid.clone(), pool, nodes)),
        );
    }
    read.runs.retain(|uid, _| seen.contains(uid));
    ctx.sim.demand_read = read;
    out
}

/// The nodes of each pool a job's pods need: its Workload's podsets (the job's when it has
/// none) on the pools their flavors map to.
fn run_needs(
    ctx: &Ctx<'_>,
    job_uid: &str,
    (pools, flavor_nodes): &(Vec<super::nodes::PoolInfo>, BTreeMap<String, FlavorNodes>),
    job: &Value,
    workload: Option<&Value>,
) -> Vec<(String, i64)> {
    let source = workload.unwrap_or(job);
    let Ok(pending) = PendingWorkload::from_object(source) else {
        return Vec::new();
    };
    let mut per_pool: BTreeMap<String, super::nodes::Pods> = BTreeMap::new();
    for pod_set in &pending.pod_sets {
        let flavors = workload.and_then(|w| {
            w.pointer("/status/admission/podSetAssignments")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|p| p["name"] == pod_set.name.as_str()))
                .and_then(|p| p.get("flavors"))
        });
        let selector = pod_set
            .node_selector
            .get(NODE_POOL_LABEL)
            .map(String::as_str);
        let Some(pool) = pool_of(ctx, job_uid, flavor_nodes, flavors, selector) else {
            continue;
        };
        per_pool
            .entry(pool)
            .or_default()
            .push((i64::from(pod_set.count), pod_set.requests.clone()));
    }
    per_pool
        .into_iter()
        .map(|(pool, pods)| {
            let nodes = pools
                .iter()
                .find(|p| p.name == pool)
                // A pool not created yet (a ComputeClass's): one node, which does not come.
                .map_or(1, |p| p.nodes_for(&pods));
            (pool, nodes)
        })
        .collect()
}

/// Puts jobs on nodes: a job's pods start together once every pool it needs has room.
pub fn schedule(ctx: &mut Ctx<'_>, demand: &Demand) -> Outcome {
    let mut changed = false;
    let pools = all_pools(ctx.pools, &ctx.sim.auto_pools);
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    // Each job's needs, jobs in the demand's order.
    let mut order: Vec<(&String, Vec<(&String, i64)>)> = Vec::new();
    let mut position: std::collections::HashMap<&String, usize> = Default::default();
    for (u, pool, n) in demand {
        let at = *position.entry(u).or_insert_with(|| {
            order.push((u, Vec::new()));
            order.len() - 1
        });
        order[at].1.push((pool, *n));
    }
    let mut ready_nodes: BTreeMap<&String, i64> = BTreeMap::new();
    for (job_uid, needs) in order {
        let scheduled = ctx
            .sim
            .runs
            .get(job_uid)
            .and_then(|r| r.scheduled_ms)
            .is_some();
        let mut short = Vec::new();
        for (pool, n) in &needs {
            let ready = *ready_nodes
                .entry(pool)
                .or_insert_with(|| node_keys(ctx.store, pool).len() as i64);
            let taken = used.get(*pool).copied().unwrap_or(0);
            if !scheduled && taken + n > ready {
                let Some(max) = pools
                    .iter()
                    .find(|p| &p.name == *pool)
                    .map(|p| p.max_nodes())
                else {
                    short.push(format!(
                        "nodes of {pool}, which has no node pool for them yet (simulated)"
                    ));
                    continue;
                };
                short.push(if taken + n > max {
                    format!("{n} node(s) of node pool {pool}, which may have at most {max} ({taken} in use): pods stay pending (simulated)")
                } else {
                    format!("{n} node(s) of node pool {pool} ({ready} ready, {taken} in use; the simulated cluster autoscaler is adding nodes)")
                });
            }
        }
        for (pool, n) in &needs {
            *used.entry((*pool).clone()).or_default() += n;
        }
        let Some(run) = ctx.sim.runs.get_mut(job_uid) else {
            continue;
        };
        if scheduled {
            continue;
        }
        let moved = if short.is_empty() {
            run.scheduled_ms = Some(ctx.now);
            run.waiting = None;
            true
        } else {
            let waiting = Some(format!("waiting for {}", short.join("; ")));
            let moved = run.waiting != waiting;
            run.waiting = waiting;
            moved
        };
        let now_scheduled = short.is_empty();
        if moved {
            ctx.sim.runs_moved.insert(job_uid.clone());
            changed = true;
        }
        if now_scheduled {
            changed |= record_scheduled(ctx, job_uid, &needs_pools(&needs));
        }
    }
    Outcome { changed }
}

fn needs_pools(needs: &[(&String, i64)]) -> Vec<String> {
    needs.iter().map(|(p, _)| (*p).clone()).collect()
}

/// The scheduler's `Scheduled` event for a job placed on nodes, naming one node of each pool
/// its pods run on (as the scheduler names a pod's node); what failed before no longer holds.
fn record_scheduled(ctx: &mut Ctx<'_>, job_uid: &str, pools: &[String]) -> bool {
    let Some(run) = ctx.sim.runs.get(job_uid) else {
        return false;
    };
    let nodes: Vec<String> = pools
        .iter()
        .filter_map(|p| node_keys(ctx.store, p).into_iter().next())
        .map(|k| k.name)
        .collect();
    let message = format!(
        "Successfully assigned {}/{} to {} (simulated: one node of each node pool its pods run on)",
        run.namespace,
        run.name,
        nodes.join(", ")
    );
    let mut changed =
        super::autoscaler::record_event(ctx, job_uid, super::autoscaler::SCHEDULED, &message);
    changed |= super::autoscaler::clear_event(ctx, job_uid, super::autoscaler::FAILED_SCALE_UP);
    changed
}
