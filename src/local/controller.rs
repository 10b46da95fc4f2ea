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
    /// The Workloads holding quota as placement reads them, in key order, and beside them
    /// (same order) their keys and the resourceVersion each was read at: a Workload is read
    /// again only when it was written.
    pub reserving: Vec<crate::placement::objects::ReservingWorkload>,
    pub reserving_read: Vec<(super::store::Key, String)>,
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

/// The Workloads as Kueue's queue status reads them, by key and by queue, kept as they are
/// written so that a queue's status is recomputed from its own Workloads without reading them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueBook {
    pub workloads: BTreeMap<super::store::Key, QueuedWorkload>,
    /// `(namespace, LocalQueue)` -> the Workloads naming it (a copy: a queue's status reads its
    /// Workloads in one pass, without looking each up).
    pub by_local_queue: BTreeMap<(String, String), BTreeMap<super::store::Key, QueuedWorkload>>,
    /// ClusterQueue -> the Workloads whose admission names it.
    pub by_cluster_queue: BTreeMap<String, BTreeMap<super::store::Key, QueuedWorkload>>,
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
            if let Some(set) = self.by_local_queue.get_mut(&old.local_queue) {
                set.remove(key);
                if set.is_empty() {
                    self.by_local_queue.remove(&old.local_queue);
                }
            }
            if let Some(cq) = &old.cluster_queue
                && let Some(set) = self.by_cluster_queue.get_mut(cq)
            {
                set.remove(key);
                if set.is_empty() {
                    self.by_cluster_queue.remove(cq);
                }
            }
        }
        if let Some(new) = now {
            self.by_local_queue
                .entry(new.local_queue.clone())
                .or_default()
                .insert(key.clone(), new.clone());
            if let Some(cq) = &new.cluster_queue {
                self.by_cluster_queue
                    .entry(cq.clone())
                    .or_default()
                    .insert(key.clone(), new.clone());
            }
            self.workloads.insert(key.clone(), new);
        }
        before
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
