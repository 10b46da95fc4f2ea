//! Which Workload is a job's: the one rule `gkq status`, `gkq watch`, `gkq explain` and the local
//! target's simulated Kueue share, so they name the same Workload for the same job.
//!
//! Kueue's job reconciler names a job's Workload after the job, makes the job its controller
//! owner, and finds a job's Workloads by that owner's kind and name (Kueue v0.19.2,
//! `pkg/controller/jobframework/reconciler.go`, `ensureOneWorkload`; docs/kueue.md 1c). So:
//!
//! - A job deleted and submitted again under the same name can have two: the earlier run's
//!   (owned by the earlier uid, until the garbage collector removes it) and the new one's.
//!   Kueue also replaces the Workload of a job whose podsets changed.
//! - A RayJob's Workload may be owned by the RayCluster KubeRay made for it (named in the
//!   RayJob's `status.rayClusterName`, docs/kuberay.md) rather than by the RayJob.
//!
//! The rule: the Workloads in the job's namespace owned by the job's kind and name, or by the
//! RayCluster its status names; of those, the ones of the current run first (owned by the job's
//! uid, or by its current RayCluster), then the newest by `creationTimestamp`, then the greatest
//! name (a tie decided the same way everywhere).

use std::collections::HashMap;

use serde_json::Value;

use crate::vocab::object::{name_of, namespace_of, owners, uid_of};

/// A job's Workload, and whether it is the job's current run's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobWorkload<'a> {
    pub workload: &'a Value,
    /// Owned by the job's uid or by the RayCluster its status names: not a Workload left from
    /// an earlier job of the same name.
    pub current_run: bool,
}

/// Workloads indexed by owner, for looking many jobs up at once.
#[derive(Debug, Default)]
pub struct JobWorkloads<'a> {
    /// `(namespace, owner kind, owner name)` -> the Workloads with that owner.
    by_owner: HashMap<(&'a str, &'a str, &'a str), Vec<&'a Value>>,
}

/// The namespace objects are compared in; a missing one compares as empty on both sides.
fn namespace(object: &Value) -> &str {
    namespace_of(object).unwrap_or("")
}

/// The RayCluster KubeRay made for a RayJob, as the RayJob's status names it.
pub fn ray_cluster_of(job: &Value) -> Option<&str> {
    (job["kind"] == "RayJob")
        .then(|| {
            job.pointer("/status/rayClusterName")
                .and_then(Value::as_str)
        })
        .flatten()
        .filter(|name| !name.is_empty())
}

impl<'a> JobWorkloads<'a> {
    pub fn new(workloads: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut by_owner: HashMap<_, Vec<&'a Value>> = HashMap::new();
        for workload in workloads {
            for owner in owners(workload) {
                let (Some(kind), Some(name)) = (owner["kind"].as_str(), owner["name"].as_str())
                else {
                    continue;
                };
                by_owner
                    .entry((namespace(workload), kind, name))
                    .or_default()
                    .push(workload);
            }
        }
        JobWorkloads { by_owner }
    }

    /// Every Workload that belongs to `job` (any run), each with whether it is the current
    /// run's.
    pub fn all_of(&self, job: &Value) -> Vec<JobWorkload<'a>> {
        let (ns, kind, name, uid) = (
            namespace(job),
            job["kind"].as_str().unwrap_or(""),
            name_of(job),
            uid_of(job),
        );
        let mut found: Vec<JobWorkload<'a>> = Vec::new();
        let mut add = |workload: &'a Value, current_run: bool| match found
            .iter_mut()
            .find(|f| std::ptr::eq(f.workload, workload))
        {
            Some(seen) => seen.current_run |= current_run,
            None => found.push(JobWorkload {
                workload,
                current_run,
            }),
        };
        for &workload in self.by_owner.get(&(ns, kind, name)).into_iter().flatten() {
            let current = !uid.is_empty()
                && owners(workload)
                    .any(|o| o["kind"] == kind && o["name"] == name && o["uid"] == uid);
            add(workload, current);
        }
        if let Some(cluster) = ray_cluster_of(job) {
            for &workload in self
                .by_owner
                .get(&(ns, "RayCluster", cluster))
                .into_iter()
                .flatten()
            {
                add(workload, true);
            }
        }
        found
    }

    /// `job`'s Workload by the rule (see the [module docs](self)).
    pub fn of(&self, job: &Value) -> Option<JobWorkload<'a>> {
        self.all_of(job).into_iter().max_by(|a, b| {
            let key = |w: &JobWorkload<'a>| {
                (
                    w.current_run,
                    w.workload
                        .pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    name_of(w.workload),
                )
            };
            key(a).cmp(&key(b))
        })
    }
}

/// `job`'s Workload among `workloads`, by the rule (see the [module docs](self)).
pub fn workload_of<'a>(
    job: &Value,
    workloads: impl IntoIterator<Item = &'a Value>,
) -> Option<&'a Value> {
    JobWorkloads::new(workloads).of(job).map(|w| w.workload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rayjob(uid: &str, cluster: Option<&str>) -> Value {
        let mut job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "train", "namespace": "ml", "uid": uid}, "status": {}});
        if let Some(c) = cluster {
            job["status"]["rayClusterName"] = json!(c);
        }
        job
    }

    fn workload(name: &str, created: &str, owner: (&str, &str, &str)) -> Value {
        json!({"kind": "Workload", "metadata": {"name": name, "namespace": "ml",
            "creationTimestamp": created,
            "ownerReferences": [{"kind": owner.0, "name": owner.1, "uid": owner.2}]}})
    }

    fn name(w: Option<&Value>) -> Option<&str> {
        w.map(name_of)
    }

    /// An earlier run's finished Workload and the current run's: the current run's wins, even
    /// when the earlier one is newer.
    #[test]
    fn the_current_runs_workload_wins_over_an_earlier_runs() {
        let old = workload(
            "rayjob-train-old",
            "2026-01-02T00:00:00Z",
            ("RayJob", "train", "u-1"),
        );
        let new = workload(
            "rayjob-train-new",
            "2026-01-01T00:00:00Z",
            ("RayJob", "train", "u-2"),
        );
        let workloads = [old.clone(), new];
        assert_eq!(
            name(workload_of(&rayjob("u-2", None), &workloads)),
            Some("rayjob-train-new")
        );
        // The job seen before it was submitted again: its own run is the old one.
        assert_eq!(
            name(workload_of(&rayjob("u-1", None), &workloads)),
            Some("rayjob-train-old")
        );
        // A run with no Workload yet: the earlier run's, marked as not the current run's.
        let only_old = JobWorkloads::new([&old]);
        let found = only_old.of(&rayjob("u-3", None)).unwrap();
        assert_eq!(
            (name_of(found.workload), found.current_run),
            ("rayjob-train-old", false)
        );
    }

    /// Two Workloads of the current run (Kueue replaced one after the podsets changed): the
    /// newest.
    #[test]
    fn of_one_runs_workloads_the_newest_wins() {
        let first = workload(
            "rayjob-train-a",
            "2026-01-01T00:00:00Z",
            ("RayJob", "train", "u-1"),
        );
        let second = workload(
            "rayjob-train-b",
            "2026-01-03T00:00:00Z",
            ("RayJob", "train", "u-1"),
        );
        assert_eq!(
            name(workload_of(&rayjob("u-1", None), &[second, first])),
            Some("rayjob-train-b")
        );
    }

    /// A Workload owned by the RayCluster the RayJob's status names is the RayJob's current run;
    /// one owned by another RayCluster, a job of another kind or one in another namespace is
    /// not the job's at all.
    #[test]
    fn a_workload_owned_through_the_jobs_ray_cluster_is_the_jobs() {
        let through_cluster = workload(
            "raycluster-train-x7k2p-1",
            "2026-01-01T00:00:00Z",
            ("RayCluster", "train-x7k2p", "c-1"),
        );
        let old_run = workload(
            "rayjob-train-old",
            "2026-01-02T00:00:00Z",
            ("RayJob", "train", "u-0"),
        );
        let other_cluster = workload(
            "raycluster-b",
            "2026-01-05T00:00:00Z",
            ("RayCluster", "train-zzzzz", "c-2"),
        );
        let other_kind = workload(
            "job-train-1",
            "2026-01-05T00:00:00Z",
            ("Job", "train", "u-1"),
        );
        let mut elsewhere = workload(
            "rayjob-train-ns",
            "2026-01-05T00:00:00Z",
            ("RayJob", "train", "u-1"),
        );
        elsewhere["metadata"]["namespace"] = json!("other");
        let workloads = [
            through_cluster,
            old_run,
            other_cluster,
            other_kind,
            elsewhere,
        ];
        let job = rayjob("u-1", Some("train-x7k2p"));
        let found = JobWorkloads::new(&workloads).of(&job).unwrap();
        assert_eq!(
            (name_of(found.workload), found.current_run),
            ("raycluster-train-x7k2p-1", true)
        );
        let all: Vec<&str> = JobWorkloads::new(&workloads)
            .all_of(&job)
            .iter()
            .map(|w| name_of(w.workload))
            .collect();
        assert_eq!(all, ["rayjob-train-old", "raycluster-train-x7k2p-1"]);
        // Without the status naming the cluster, only the earlier run's remains.
        assert_eq!(
            name(workload_of(&rayjob("u-1", None), &workloads)),
            Some("rayjob-train-old")
        );
        assert_eq!(workload_of(&rayjob("u-1", None), &[] as &[Value]), None);
    }
}

/// One job with several Workloads, for the tests of every caller of the rule: each must name
/// the same Workload.
#[cfg(test)]
pub(crate) mod scenario {
    use serde_json::{Value, json};

    /// The RayJob `ml/train`, submitted again: its uid is `u-2` now (`u-1` before). With
    /// `ray_cluster`, its status names the RayCluster KubeRay made for it.
    pub fn rayjob(ray_cluster: Option<&str>) -> Value {
        let mut job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"namespace": "ml", "name": "train", "uid": "u-2",
                "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"suspend": false}, "status": {}});
        if let Some(cluster) = ray_cluster {
            job["status"]["rayClusterName"] = json!(cluster);
        }
        job
    }

    fn workload(name: &str, created: &str, owner: Value, conditions: Value, flavor: &str) -> Value {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"namespace": "ml", "name": name, "creationTimestamp": created,
                "ownerReferences": [owner]},
            "spec": {"queueName": "user-queue", "podSets": []},
            "status": {"conditions": conditions,
                "admission": {"clusterQueue": "cq", "podSetAssignments": [
                    {"name": "workers", "flavors": {"google.com/tpu": flavor}}]}}})
    }

    fn admitted() -> Value {
        json!([{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-11-30T11:40:00Z"},
            {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-11-30T11:40:00Z"}])
    }

    /// The earlier run's Workload: finished, and the newest of all.
    pub fn earlier_run() -> Value {
        let finished = json!([{"type": "Finished", "status": "True",
            "lastTransitionTime": "2026-11-30T11:50:00Z", "message": "Job finished successfully"}]);
        workload(
            "rayjob-train-0a1b2",
            "2026-11-30T11:45:00Z",
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train", "uid": "u-1"}),
            finished,
            "spot",
        )
    }

    /// The current run's Workload, owned by the RayJob: admitted on flavor `on-demand`.
    pub fn current_run() -> Value {
        workload(
            "rayjob-train-3c4d5",
            "2026-11-30T11:30:00Z",
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train", "uid": "u-2"}),
            admitted(),
            "on-demand",
        )
    }

    /// The current run's Workload owned by the RayCluster `train-x7k2p` instead: admitted on
    /// flavor `dws`.
    pub fn through_ray_cluster() -> Value {
        workload(
            "raycluster-train-x7k2p-6e7f8",
            "2026-11-30T11:00:00Z",
            json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "train-x7k2p",
                "uid": "c-1"}),
            admitted(),
            "dws",
        )
    }

    /// The cases every caller is tested with: the job, its Workloads, and the one the rule
    /// names.
    pub fn cases() -> Vec<(Value, Vec<Value>, &'static str)> {
        vec![
            (
                rayjob(None),
                vec![earlier_run(), current_run()],
                "rayjob-train-3c4d5",
            ),
            (
                rayjob(Some("train-x7k2p")),
                vec![earlier_run(), through_ray_cluster()],
                "raycluster-train-x7k2p-6e7f8",
            ),
        ]
    }

    #[test]
    fn the_rule_names_the_expected_workload_in_each_case() {
        for (job, workloads, expected) in cases() {
            let found = super::workload_of(&job, &workloads).unwrap();
            assert_eq!(crate::vocab::object::name_of(found), expected);
        }
    }
}
