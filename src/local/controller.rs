//! What every simulated controller works with: the simulation's settings and remembered state,
//! and the context one controller step reads and changes ([`Ctx`]). Below the controllers
//! ([`super::kueue`], [`super::ray`], [`super::batch`], [`super::autoscaler`]) and the loop that runs them
//! ([`super::sim`]), so none of them imports another to share these.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::nodes::{
    AutoPools, LocalCapacity, PoolInfo, ProvisioningOutcome, ProvisioningPlan, StartingNodes,
};
use super::store::Store;

/// How the simulation behaves (from `GKQ_LOCAL_*`; see [`super::Settings::from_env`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SimSettings {
    pub provisioning: Provisioning,
    /// How long a job runs when it declares no duration.
    pub run_ms: u64,
    /// How long new nodes take to become ready.
    pub node_startup_ms: u64,
    /// From nodes ready to the Ray job running (image pull, Ray start).
    pub ray_startup_ms: u64,
    /// How long the autoscaler waits before removing unneeded nodes.
    pub scale_down_ms: u64,
    /// What each rung can obtain (`GKQ_LOCAL_CAPACITY`).
    pub capacity: LocalCapacity,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            provisioning: Provisioning::After(20_000),
            run_ms: 120_000,
            node_startup_ms: 60_000,
            ray_startup_ms: 20_000,
            scale_down_ms: 600_000,
            capacity: LocalCapacity::default(),
        }
    }
}

/// What the simulated GKE does with a ProvisioningRequest (`GKQ_LOCAL_PROVISIONING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provisioning {
    /// Provisioned this long after it is requested (`after:20s`).
    After(u64),
    /// Stays pending (`never`).
    Never,
    /// Fails this long after it is requested (`fail`, `fail:30s`).
    Fail(u64),
}

impl Provisioning {
    pub fn plan(self) -> (ProvisioningOutcome, u64) {
        match self {
            Provisioning::After(ms) => (ProvisioningOutcome::Provisioned, ms),
            Provisioning::Never => (ProvisioningOutcome::Never, 0),
            Provisioning::Fail(ms) => (ProvisioningOutcome::Failed, ms),
        }
    }
}

/// One job run (a RayJob, JobSet or batch Job): when it was admitted, scheduled on nodes,
/// running and finished (simulated milliseconds). Pods start `ray_startup_ms` after their nodes
/// are ready, whatever the kind (image pull, and Ray's start for a RayJob).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The job's kind: `RayJob` (the default, for state written before JobSets), `JobSet`, `Job`.
    #[serde(default = "ray_job_kind")]
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub admitted_ms: u64,
    #[serde(default)]
    pub scheduled_ms: Option<u64>,
    pub runtime_ms: u64,
    /// Why the pods are not running yet, when they are not.
    #[serde(default)]
    pub waiting: Option<String>,
}

fn ray_job_kind() -> String {
    "RayJob".to_string()
}

impl Run {
    /// The store key of the job this run is of.
    pub fn job_key(&self) -> super::store::Key {
        let api_version = match self.kind.as_str() {
            "JobSet" => "jobset.x-k8s.io/v1alpha2",
            "Job" => "batch/v1",
            _ => "ray.io/v1",
        };
        super::store::Key::new(api_version, &self.kind, Some(&self.namespace), &self.name)
    }

    pub fn running_ms(&self, ray_startup_ms: u64) -> Option<u64> {
        self.scheduled_ms.map(|s| s + ray_startup_ms)
    }

    pub fn finished_ms(&self, ray_startup_ms: u64) -> Option<u64> {
        self.running_ms(ray_startup_ms).map(|r| r + self.runtime_ms)
    }
}

/// Waiting Workloads Kueue does not retry after quota was freed: a Workload of a deleted
/// LocalQueue lost its reservation, and Kueue retries the parked Workloads only through the
/// released Workload's LocalQueue (docs/kueue.md 1g). They stay parked until an event that
/// retries them: a ClusterQueue, Cohort or ResourceFlavor changes its spec, or a Workload that
/// held quota then no longer does (it finished, was deleted or evicted).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedWorkloads {
    /// The parked Workloads, `namespace/name`.
    pub workloads: BTreeSet<String>,
    /// The Workloads that held quota when they were parked, `namespace/name`.
    pub holders: BTreeSet<String>,
    /// The generation of each ClusterQueue, Cohort and ResourceFlavor then, by `kind/name`.
    pub queues: BTreeMap<String, i64>,
}

/// What Kueue's scheduler knew after its last run: the Workloads holding quota then, and when
/// it ran. A Workload it found no room for stays parked (as Kueue parks an inadmissible
/// Workload) until a Workload it counted as holding lets its quota go or a queue, flavor,
/// check or priority class changes; a new or changed Workload is tried at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulerMemory {
    pub holding: BTreeSet<super::store::Key>,
    pub at_ms: u64,
    /// How many pending Workloads its last run tried.
    pub tried: usize,
    /// The Workloads holding quota as placement reads them, read again only when written, and
    /// their quota summed.
    pub holders: super::kueue::holders::Holders,
    /// The pending Workloads every run tries, written or not (`tried_anyway`).
    pub retried: BTreeSet<super::store::Key>,
}

/// What Kueue's queue status reads of one Workload: its LocalQueue, the ClusterQueue it holds
/// quota in, whether it holds quota, is admitted or waits, and the quota it uses by flavor and
/// resource (`status.admission.podSetAssignments`, in order).
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedWorkload {
    pub local_queue: (String, String),
    pub cluster_queue: Option<String>,
    pub reserving: bool,
    pub admitted: bool,
    pub waiting: bool,
    pub usage: Vec<(String, String, crate::vocab::quantity::Quantity)>,
}

/// The Workloads as Kueue's queue status reads them, by key, and what each queue's status sums
/// over its Workloads, kept as they are written: a queue's status costs its flavors, not its
/// Workloads (thousands of JobSets holding quota in one ClusterQueue made every pass read them
/// all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueBook {
    pub workloads: BTreeMap<super::store::Key, QueuedWorkload>,
    /// `(namespace, LocalQueue)` -> the sums over the Workloads naming it.
    pub by_local_queue: BTreeMap<(String, String), QueueTotals>,
    /// ClusterQueue -> the sums over the Workloads whose admission names it.
    pub by_cluster_queue: BTreeMap<String, QueueTotals>,
}

/// What a queue's status sums over its Workloads: how many are in it, hold quota, are admitted
/// or wait, and the quota held (`flavorsReservation`) and used by admitted ones (`flavorsUsage`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueTotals {
    /// The Workloads in the queue, whatever their state (the entry goes with the last).
    pub workloads: usize,
    pub reserving: usize,
    pub admitted: usize,
    pub waiting: usize,
    /// By `(flavor, resource)`: the quota reserving Workloads hold.
    pub reserved: BTreeMap<(String, String), UsageSum>,
    /// The same for admitted Workloads.
    pub used: BTreeMap<(String, String), UsageSum>,
}

/// A running sum of one flavor's resource over a queue's Workloads. Printed, as Kueue's status
/// sums it in Workload order, in the format of the first Workload's first quantity: so each
/// Workload's first format is kept by key.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageSum {
    total: crate::vocab::quantity::Quantity,
    first_format: BTreeMap<super::store::Key, crate::vocab::quantity::Format>,
}

impl Default for UsageSum {
    fn default() -> Self {
        UsageSum {
            total: crate::vocab::quantity::Quantity::ZERO,
            first_format: BTreeMap::new(),
        }
    }
}

impl UsageSum {
    /// The sum, in the format of the first Workload in key order (`0` for none).
    pub fn total(&self) -> crate::vocab::quantity::Quantity {
        match self.first_format.values().next() {
            Some(format) => self.total.in_format(*format),
            None => crate::vocab::quantity::Quantity::ZERO,
        }
    }
}

impl QueueTotals {
    /// Counts `w` (`key`) in (`add`) or out of the sums.
    fn count(&mut self, key: &super::store::Key, w: &QueuedWorkload, add: bool) {
        let step = |n: &mut usize, on: bool| {
            if on {
                *n = if add { *n + 1 } else { n.saturating_sub(1) };
            }
        };
        step(&mut self.workloads, true);
        step(&mut self.reserving, w.reserving);
        step(&mut self.admitted, w.reserving && w.admitted);
        step(&mut self.waiting, w.waiting);
        if w.reserving {
            Self::sum_usage(&mut self.reserved, key, w, add);
        }
        if w.reserving && w.admitted {
            Self::sum_usage(&mut self.used, key, w, add);
        }
    }

    fn sum_usage(
        sums: &mut BTreeMap<(String, String), UsageSum>,
        key: &super::store::Key,
        w: &QueuedWorkload,
        add: bool,
    ) {
        for (flavor, resource, q) in &w.usage {
            let slot = (flavor.clone(), resource.clone());
            if add {
                let sum = sums.entry(slot).or_default();
                sum.total = sum.total.saturating_add(*q);
                sum.first_format
                    .entry(key.clone())
                    .or_insert_with(|| q.format());
            } else if let Some(sum) = sums.get_mut(&slot) {
                sum.total = sum.total.saturating_sub(*q);
                sum.first_format.remove(key);
                if sum.first_format.is_empty() {
                    sums.remove(&slot);
                }
            }
        }
    }
}

impl QueueBook {
    /// Records what `key` is now (`None`: gone); returns what it was.
    pub fn set(
        &mut self,
        key: &super::store::Key,
        now: Option<QueuedWorkload>,
    ) -> Option<QueuedWorkload> {
        let before = self.workloads.remove(key);
        if let Some(old) = &before {
            Self::count_in(&mut self.by_local_queue, &old.local_queue, key, old, false);
            if let Some(cq) = &old.cluster_queue {
                Self::count_in(&mut self.by_cluster_queue, cq, key, old, false);
            }
        }
        if let Some(new) = now {
            Self::count_in(&mut self.by_local_queue, &new.local_queue, key, &new, true);
            if let Some(cq) = &new.cluster_queue {
                Self::count_in(&mut self.by_cluster_queue, cq, key, &new, true);
            }
            self.workloads.insert(key.clone(), new);
        }
        before
    }

    fn count_in<Q: Ord + Clone>(
        queues: &mut BTreeMap<Q, QueueTotals>,
        queue: &Q,
        key: &super::store::Key,
        w: &QueuedWorkload,
        add: bool,
    ) {
        if add {
            queues.entry(queue.clone()).or_default().count(key, w, true);
        } else if let Some(totals) = queues.get_mut(queue) {
            totals.count(key, w, false);
            if totals.workloads == 0 {
                queues.remove(queue);
            }
        }
    }
}

/// What the node scheduler last read of each run's needs ([`super::ray::demand`]): the pools
/// and flavors' pools it read them with, and per job uid the resourceVersions of the job and
/// its Workload then and the nodes needed of each pool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DemandRead {
    pub inputs: Option<(
        Vec<PoolInfo>,
        BTreeMap<String, crate::placement::pools::FlavorNodes>,
    )>,
    #[allow(clippy::type_complexity)]
    pub runs: BTreeMap<
        String,
        (
            (String, Option<(super::store::Key, String)>, Option<String>),
            Vec<(String, i64)>,
        ),
    >,
}

/// The jobs of `kinds` a job controller looks at in a pass, and whether any job of those kinds
/// went (then the runs of deleted jobs are forgotten): all of them after a restart, else those
/// `changes` names, the owners of the changed objects `owned` names, and the jobs whose run
/// moved: written by the node scheduler since (`sim.runs_moved`), or running or finished
/// after `since` (the controller's last pass; `None`: it has not run) and by now.
pub fn jobs_to_visit(
    ctx: &Ctx<'_>,
    changes: &super::store::Changes,
    kinds: &[(&str, &str)],
    owned: &[(&str, &str)],
    since: Option<u64>,
) -> (Vec<super::store::Key>, bool) {
    use super::store::Key;
    let (store, sim) = (&*ctx.store, &*ctx.sim);
    if changes.all {
        let keys = kinds
            .iter()
            .flat_map(|(group, kind)| store.keys_of_kind(group, kind))
            .collect();
        return (keys, true);
    }
    let mut keys: BTreeSet<Key> = BTreeSet::new();
    let mut removed = false;
    for (group, kind) in kinds {
        for key in changes.of_kind(group, kind) {
            if store.get(key).is_some() {
                keys.insert(key.clone());
            } else {
                removed = true;
            }
        }
    }
    for (group, kind) in owned {
        for object in changes.of_kind(group, kind).filter_map(|k| store.get(k)) {
            for owner in crate::vocab::object::owners(object) {
                let (Some(api_version), Some(owner_kind), Some(name)) = (
                    owner["apiVersion"].as_str(),
                    owner["kind"].as_str(),
                    owner["name"].as_str(),
                ) else {
                    continue;
                };
                let key = Key::new(
                    api_version,
                    owner_kind,
                    crate::vocab::object::namespace_of(object),
                    name,
                );
                if kinds.iter().any(|(g, k)| key.group == *g && key.kind == *k)
                    && store.get(&key).is_some()
                {
                    keys.insert(key);
                }
            }
        }
    }
    let startup = ctx.settings.ray_startup_ms;
    let moved_by_clock = |run: &Run| {
        let Some(since) = since else {
            return true;
        };
        [run.running_ms(startup), run.finished_ms(startup)]
            .into_iter()
            .flatten()
            .any(|t| t > since && t <= ctx.now)
    };
    for (uid, run) in &sim.runs {
        if !kinds.iter().any(|(_, k)| run.kind == *k)
            || !(sim.runs_moved.contains(uid) || moved_by_clock(run))
        {
            continue;
        }
        let key = run.job_key();
        if kinds.iter().any(|(g, k)| key.group == *g && key.kind == *k) && store.get(&key).is_some()
        {
            keys.insert(key);
        }
    }
    (keys.into_iter().collect(), removed)
}

/// What the simulation remembers besides the objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimState {
    /// The simulated time the world was last brought to.
    #[serde(default)]
    pub reconciled_ms: u64,
    /// ProvisioningRequests GKE has seen (`namespace/name`): when and how each resolves.
    #[serde(default)]
    pub provisioning: BTreeMap<String, ProvisioningPlan>,
    /// Job runs by the job's uid.
    #[serde(default)]
    pub runs: BTreeMap<String, Run>,
    #[serde(default)]
    pub starting: Vec<StartingNodes>,
    /// Since when each pool has had more nodes than it needs.
    #[serde(default)]
    pub low_since: BTreeMap<String, u64>,
    /// ProvisioningRequest attempts per Workload uid.
    #[serde(default)]
    pub attempts: BTreeMap<String, u32>,
    #[serde(default)]
    pub node_seq: u64,
    /// The simulated pods' logs by `namespace/pod` ([`super::pods`]), kept beside the objects
    /// as a kubelet keeps them beside the API server.
    #[serde(default)]
    pub pod_logs: BTreeMap<String, Vec<String>>,
    /// Workloads Kueue parked as inadmissible when quota was freed without retrying them
    /// ([`ParkedWorkloads`]).
    #[serde(default)]
    pub kueue_parked: Vec<ParkedWorkloads>,
    /// Node pools GKE created for ComputeClasses ([`super::computeclass`]).
    #[serde(default)]
    pub auto_pools: AutoPools,
    /// Kueue objects (and the jobs, priority classes and namespaces Kueue reads) changed since
    /// Kueue's controllers last ran (not kept on disk: after a restart every object is looked
    /// at once).
    #[serde(skip)]
    pub kueue_changes: super::store::Changes,
    /// When each Workload with a `requeueAt` may queue again, as Kueue's controllers last saw
    /// it (`None` before they ran in this process).
    #[serde(skip)]
    pub kueue_requeue: Option<BTreeMap<super::store::Key, u64>>,
    /// The Workloads as Kueue's queue status last read them (`None` before it ran).
    #[serde(skip)]
    pub kueue_queues: Option<QueueBook>,
    /// The same for the scheduler, which runs only when what it reads changed.
    #[serde(skip)]
    pub scheduler_changes: super::store::Changes,
    /// What Kueue's scheduler knew after its last run in this process (`None` before it ran).
    #[serde(skip)]
    pub scheduler: Option<SchedulerMemory>,
    /// Runs the node scheduler changed (put on nodes, or waiting for other nodes) since the
    /// job controllers last looked at them, by job uid.
    #[serde(skip)]
    pub runs_moved: BTreeSet<String>,
    /// When KubeRay's controller and the JobSet and Job controllers last ran (simulated ms).
    #[serde(skip)]
    pub ray_visited_ms: Option<u64>,
    #[serde(skip)]
    pub batch_visited_ms: Option<u64>,
    /// ProvisioningRequests changed since the simulated GKE last looked at them.
    #[serde(skip)]
    pub provisioning_changes: super::store::Changes,
    /// The nodes each provisioned ProvisioningRequest holds, by request: pool and count (`None`
    /// until read).
    #[serde(skip)]
    pub provisioned: Option<BTreeMap<super::store::Key, (String, i64)>>,
    /// The unresolved ProvisioningRequests GKE looks at on a pass, and those waiting for room
    /// in their pool (looked at again when written or when the pool's room changes).
    #[serde(skip)]
    pub provisioning_queue: super::nodes::ProvisioningQueue,
    /// What the node scheduler last read of each run's needs.
    #[serde(skip)]
    pub demand_read: DemandRead,
    /// RayJobs and RayClusters changed since KubeRay's controller last ran.
    #[serde(skip)]
    pub ray_changes: super::store::Changes,
    /// JobSets and Jobs changed since their controllers last ran.
    #[serde(skip)]
    pub batch_changes: super::store::Changes,
    /// The node pools the controllers last settled with, when they reached a state where
    /// nothing more changes (not kept on disk: a new process settles once).
    #[serde(skip)]
    pub settled_with: Option<Vec<PoolInfo>>,
}

impl SimState {
    /// Forgets the runs of `kinds` whose job is no longer among `jobs`; returns whether any was.
    pub fn forget_runs_of_deleted(
        &mut self,
        store: &Store,
        kinds: &[&str],
        jobs: &[super::store::Key],
    ) -> bool {
        let uids: std::collections::HashSet<&str> = jobs
            .iter()
            .filter_map(|k| store.get(k))
            .map(crate::vocab::object::uid_of)
            .collect();
        let before = self.runs.len();
        self.runs
            .retain(|u, r| !kinds.contains(&r.kind.as_str()) || uids.contains(u.as_str()));
        before != self.runs.len()
    }
}

/// Everything a controller step may read and change.
pub struct Ctx<'a> {
    pub store: &'a mut Store,
    pub sim: &'a mut SimState,
    pub settings: &'a SimSettings,
    pub pools: &'a [PoolInfo],
    pub cluster: &'a str,
    pub now: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub changed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::store::Key;
    use crate::vocab::quantity::Quantity;

    fn workload(name: &str) -> Key {
        Key::new("kueue.x-k8s.io/v1beta2", "Workload", Some("team"), name)
    }

    /// A Workload of LocalQueue `team/lq`, holding `usage` in ClusterQueue `cq` when reserving.
    fn queued(reserving: bool, admitted: bool, usage: &[(&str, &str, &str)]) -> QueuedWorkload {
        QueuedWorkload {
            local_queue: ("team".to_string(), "lq".to_string()),
            cluster_queue: reserving.then(|| "cq".to_string()),
            reserving,
            admitted: reserving && admitted,
            waiting: !reserving,
            usage: usage
                .iter()
                .map(|(f, r, q)| (f.to_string(), r.to_string(), Quantity::parse(q).unwrap()))
                .collect(),
        }
    }

    /// What the queue status summed before the running sums: every reserving (or admitted)
    /// Workload of the ClusterQueue in key order, in the first quantity's format.
    fn summed_from_scratch(book: &QueueBook, admitted: bool) -> BTreeMap<(String, String), String> {
        let mut all: BTreeMap<(String, String), Vec<Quantity>> = BTreeMap::new();
        for w in book.workloads.values() {
            if w.cluster_queue.as_deref() == Some("cq") && w.reserving && (!admitted || w.admitted)
            {
                for (f, r, q) in &w.usage {
                    all.entry((f.clone(), r.clone())).or_default().push(*q);
                }
            }
        }
        all.into_iter()
            .map(|(slot, qs)| {
                let total = qs[1..].iter().fold(qs[0], |a, b| a.saturating_add(*b));
                (slot, total.to_canonical_string())
            })
            .collect()
    }

    fn assert_sums_match_a_recomputation(book: &QueueBook) {
        let mut fresh = QueueBook::default();
        for (key, w) in &book.workloads {
            fresh.set(key, Some(w.clone()));
        }
        assert_eq!(
            book, &fresh,
            "the running sums drifted from a recomputation"
        );
        let printed = |sums: Option<&BTreeMap<(String, String), UsageSum>>| {
            sums.into_iter()
                .flatten()
                .map(|(slot, sum)| (slot.clone(), sum.total().to_canonical_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let cq = book.by_cluster_queue.get("cq");
        assert_eq!(
            printed(cq.map(|t| &t.reserved)),
            summed_from_scratch(book, false)
        );
        assert_eq!(
            printed(cq.map(|t| &t.used)),
            summed_from_scratch(book, true)
        );
    }

    #[test]
    fn queue_sums_equal_a_recomputation_after_deletes_evictions_requeues_and_flavor_changes() {
        let mut book = QueueBook::default();
        let (a, b, c) = (workload("a"), workload("b"), workload("c"));
        book.set(
            &b,
            Some(queued(
                true,
                true,
                &[("dws", "memory", "16G"), ("dws", "memory", "1Gi")],
            )),
        );
        book.set(
            &c,
            Some(queued(
                true,
                false,
                &[("dws", "memory", "2Gi"), ("dws", "cpu", "500m")],
            )),
        );
        assert_sums_match_a_recomputation(&book);
        // A Workload before the others in key order prints the sum in its format (16G + 4Gi).
        book.set(&a, Some(queued(true, true, &[("dws", "memory", "1Gi")])));
        assert_sums_match_a_recomputation(&book);
        let totals = &book.by_cluster_queue["cq"];
        assert_eq!((totals.reserving, totals.admitted), (3, 2));
        assert_eq!(
            totals.reserved[&("dws".to_string(), "memory".to_string())]
                .total()
                .to_canonical_string(),
            "19819304Ki"
        );
        // Evicted: it no longer holds quota, and waits again (requeued).
        book.set(&b, Some(queued(false, false, &[])));
        assert_sums_match_a_recomputation(&book);
        assert_eq!(
            book.by_local_queue[&("team".to_string(), "lq".to_string())].waiting,
            1
        );
        // Admitted again, in another flavor.
        book.set(&b, Some(queued(true, true, &[("spot", "memory", "4Gi")])));
        // Changed flavor.
        book.set(&c, Some(queued(true, true, &[("spot", "cpu", "1")])));
        assert_sums_match_a_recomputation(&book);
        assert!(
            !book.by_cluster_queue["cq"]
                .reserved
                .contains_key(&("dws".to_string(), "cpu".to_string()))
        );
        // Deleted, first in key order: the sum is printed in the next one's format.
        book.set(&a, None);
        assert_sums_match_a_recomputation(&book);
        book.set(&b, None);
        book.set(&c, None);
        assert_sums_match_a_recomputation(&book);
        assert!(book.by_cluster_queue.is_empty() && book.by_local_queue.is_empty());
    }
}
