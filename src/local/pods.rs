//! The driver pod of each simulated job, and its log: the smallest faithful stand-in for the
//! pods the real controllers create, so that `gkq logs` reads the local target as it reads a
//! cluster. A job gets one pod once Kueue admits it (a RayJob's submitter, labelled with
//! `batch.kubernetes.io/job-name` as KubeRay's submitter Job's pods are; a Job's first pod; a
//! JobSet's first pod, labelled with `jobset.sigs.k8s.io/jobset-name`), owned by the job so that
//! garbage collection removes it with the job. Its phase follows the run (`Pending` until the
//! job starts, `Running`, `Succeeded`) and its log, kept beside the objects as a kubelet keeps
//! logs beside the API server, holds what the simulation did: admitted, nodes provisioned,
//! started, finished. Suspending a job deletes its pod, as the Job controller does. A RayJob's
//! Ray cluster also gets its head pod ([`sync_head`]), which `gkq dashboard` forwards to.

use serde_json::{Value, json};

use super::controller::{Ctx, Run};
use super::store::{Key, timestamp};
use super::workload::{SIMULATED_ANNOTATION, SIMULATED_VALUE};
use crate::vocab::object::{name_of, uid_of};
use crate::vocab::ray::{RAY_CLUSTER_LABEL, RAY_NODE_TYPE_LABEL};

const KUBELET: &str = "kubelet";

/// The name and labels of the driver pod of `job` (a RayJob, JobSet or Job).
fn driver(job: &Value) -> (String, Value) {
    let name = name_of(job);
    let hash = super::store::uid(&format!("{}-driver", uid_of(job)));
    let suffix = &hash[..5];
    match job["kind"].as_str() {
        Some("JobSet") => {
            let replicated = job
                .pointer("/spec/replicatedJobs/0/name")
                .and_then(Value::as_str)
                .unwrap_or("job");
            (
                format!("{name}-{replicated}-0-0-{suffix}"),
                json!({"jobset.sigs.k8s.io/jobset-name": name,
                       "jobset.sigs.k8s.io/replicatedjob-name": replicated,
                       "batch.kubernetes.io/job-name": format!("{name}-{replicated}-0")}),
            )
        }
        // A RayJob's submitter Job is named like the RayJob, and so is a Job.
        _ => (
            format!("{name}-{suffix}"),
            json!({"batch.kubernetes.io/job-name": name}),
        ),
    }
}

/// The log lines of a run at simulated time `now`.
fn log_lines(run: &Run, startup_ms: u64, now: u64) -> Vec<String> {
    let mut lines = vec![format!(
        "{} admitted by Kueue: the job's pods are created (simulated)",
        timestamp(run.admitted_ms)
    )];
    if let Some(at) = run.scheduled_ms {
        lines.push(format!(
            "{} nodes provisioned: the pods are scheduled (simulated)",
            timestamp(at)
        ));
    }
    if let Some(at) = run.running_ms(startup_ms).filter(|t| *t <= now) {
        lines.push(format!(
            "{} started: the job runs {} (simulated)",
            timestamp(at),
            crate::vocab::duration::format_ms(run.runtime_ms)
        ));
    }
    if let Some(at) = run.finished_ms(startup_ms).filter(|t| *t <= now) {
        lines.push(format!(
            "{} finished: the job succeeded (simulated)",
            timestamp(at)
        ));
    }
    lines
}

/// Keeps `job`'s driver pod and its log where `run` is (`None`: the job is suspended, and has
/// no pod). Returns whether anything changed.
pub fn sync(ctx: &mut Ctx<'_>, job: &Value, run: Option<&Run>) -> bool {
    let (pod, labels) = driver(job);
    let namespace = job["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let key = Key::new("v1", "Pod", Some(&namespace), &pod);
    let log_key = format!("{namespace}/{pod}");
    let Some(run) = run else {
        let had_log = ctx.sim.pod_logs.remove(&log_key).is_some();
        let deleted = ctx.store.get(&key).is_some() && ctx.store.delete(&key, false, ctx.now);
        return had_log || deleted;
    };
    let startup = ctx.settings.ray_startup_ms;
    let now = ctx.now;
    let phase = match (
        run.finished_ms(startup).filter(|t| *t <= now),
        run.running_ms(startup).filter(|t| *t <= now),
    ) {
        (Some(_), _) => "Succeeded",
        (None, Some(_)) => "Running",
        (None, None) => "Pending",
    };
    let mut changed = false;
    if ctx.store.get(&key).is_none() {
        let (api_version, kind) = (
            job["apiVersion"].as_str().unwrap_or_default(),
            job["kind"].as_str().unwrap_or_default(),
        );
        let object = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace, "labels": labels,
                "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
                "ownerReferences": [{"apiVersion": api_version, "kind": kind,
                    "name": name_of(job), "uid": uid_of(job),
                    "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"containers": [{"name": "driver"}], "restartPolicy": "Never"},
        });
        changed |= ctx.store.create(object, "kube-controller-manager", now);
    }
    changed |= ctx.store.update(&key, KUBELET, true, now, |o| {
        o["status"] = json!({"phase": phase});
    });
    let lines = log_lines(run, startup, now);
    if ctx.sim.pod_logs.get(&log_key) != Some(&lines) {
        ctx.sim.pod_logs.insert(log_key, lines);
        changed = true;
    }
    changed
}

/// Keeps the head pod of the simulated RayCluster `cluster`, as KubeRay does: named
/// `<cluster>-head-<5 characters>`, labelled `ray.io/cluster` and `ray.io/node-type: head`,
/// owned by the cluster (garbage collection removes it with the cluster), its Ray container
/// carrying the head template's ports; `Running` once the cluster's nodes are provisioned
/// (`ready`), `Pending` before. It has no log; `gkq dashboard` reaches its simulated dashboard
/// (`super::dashboard`). Returns whether anything changed.
pub fn sync_head(ctx: &mut Ctx<'_>, cluster: &Value, ready: bool) -> bool {
    let name = name_of(cluster);
    let namespace = cluster["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let hash = super::store::uid(&format!("{}-head", uid_of(cluster)));
    let pod = format!("{name}-head-{}", &hash[..5]);
    let key = Key::new("v1", "Pod", Some(&namespace), &pod);
    let now = ctx.now;
    let mut changed = false;
    if ctx.store.get(&key).is_none() {
        let template = cluster
            .pointer("/spec/headGroupSpec/template/spec/containers/0")
            .unwrap_or(&Value::Null);
        let mut container = json!({"name": template["name"].as_str().unwrap_or("ray-head")});
        if let Some(ports) = template.get("ports") {
            container["ports"] = ports.clone();
        }
        let object = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace,
                "labels": {RAY_CLUSTER_LABEL: name, RAY_NODE_TYPE_LABEL: "head"},
                "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                    "name": name, "uid": uid_of(cluster),
                    "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"containers": [container]},
        });
        changed |= ctx.store.create(object, "kuberay-operator", now);
    }
    let phase = if ready { "Running" } else { "Pending" };
    changed |= ctx.store.update(&key, KUBELET, true, now, |o| {
        o["status"] = json!({"phase": phase});
    });
    changed
}

/// Forgets the logs of pods that are gone (garbage-collected with their job); returns whether
/// any was.
pub fn forget_deleted(ctx: &mut Ctx<'_>) -> bool {
    let before = ctx.sim.pod_logs.len();
    let store = &*ctx.store;
    ctx.sim.pod_logs.retain(|key, _| {
        key.split_once('/')
            .is_some_and(|(ns, name)| store.get(&Key::new("v1", "Pod", Some(ns), name)).is_some())
    });
    before != ctx.sim.pod_logs.len()
}

/// The log of pod `namespace/name`, if the simulation keeps one.
pub fn log<'a>(
    sim: &'a super::controller::SimState,
    namespace: &str,
    name: &str,
) -> Option<&'a [String]> {
    sim.pod_logs
        .get(&format!("{namespace}/{name}"))
        .map(Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_says_what_the_run_did_so_far() {
        let run = Run {
            kind: "Job".into(),
            namespace: "team".into(),
            name: "train".into(),
            admitted_ms: 1_000,
            scheduled_ms: Some(5_000),
            runtime_ms: 60_000,
            waiting: None,
        };
        let at = |now| log_lines(&run, 2_000, now);
        assert_eq!(at(6_000).len(), 2, "{:?}", at(6_000));
        assert!(at(6_000)[1].contains("nodes provisioned"));
        assert_eq!(at(7_000).len(), 3);
        assert!(
            at(7_000)[2].contains("started: the job runs 1m"),
            "{:?}",
            at(7_000)
        );
        let done = at(67_000);
        assert_eq!(done.len(), 4);
        assert!(done[3].contains("finished"), "{done:?}");
        let unscheduled = Run {
            scheduled_ms: None,
            ..run.clone()
        };
        assert_eq!(log_lines(&unscheduled, 2_000, 1_000_000).len(), 1);
    }
}
