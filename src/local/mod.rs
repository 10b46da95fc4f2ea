//! The local target's Kubernetes: an object store behind the same [`KubeApi`] trait as a real
//! API server ([`LocalKube`]), so `plan` (the Kubernetes observer) and `apply` (the Kubernetes
//! applier) run exactly the code they run against a cluster, plus a **simulated** cluster that
//! makes the walk-through happen: Kueue admits jobs (decided by gkq's placement module), DWS
//! provisions flex-start nodes after a delay, KubeRay runs the jobs, the cluster autoscaler
//! scales node pools. Everything simulated says so in its messages and carries the
//! `gkq.dev/simulated` annotation.
//!
//! Each cluster's state lives in
//! `<state-dir>/clusters/<project>/<location>/<cluster>/kubernetes.json` (written atomically),
//! next to the GKE emulator's `<state-dir>/gke/`, which holds every cluster: environments that
//! share a state directory never share, or overwrite, each other's Kubernetes. The objects
//! belong to their GKE cluster: the store answers only while the emulated cluster is running,
//! starts from nothing when the cluster is (re)created, and is emptied when `apply` or
//! `destroy` finds the cluster deleted (reads never delete anything). Older gkq kept one
//! `<state-dir>/kubernetes.json` for whichever cluster ran last; the first command that finds
//! that cluster running moves the file to its place. A new cluster comes with what GKE gives
//! it: the `default`, `kube-system`, `kube-public` and `kube-node-lease` namespaces, the
//! ProvisioningRequest and ComputeClass CRDs, the KubeRay CRDs when the Ray operator add-on is on, the JobSet
//! v0.12.0 CRD (as if JobSet's release manifests had been applied: GKE does not install JobSet),
//! and its nodes.
//!
//! There is no daemon: each call first brings the simulation to "now" ([`sim::reconcile`]).
//! The clock can run faster than real time, and DWS can be told to provision, fail or never
//! answer ([`Settings::from_env`]). Only changes are written: a call that only moved the clock
//! leaves the file as it is, and the next command brings the world from its last change to its
//! own now, at its own clock speed. The file is parsed by the first call that needs it, so a
//! caller that knows what it read earlier can ask whether that still holds without parsing it
//! ([`LocalKube::quiet`], [`LocalKube::still_quiet`]).
//!
//! The modules: [`store`] (API server semantics: discovery, server-side apply, defaults,
//! finalizers, garbage collection), [`schema`] (CRD defaults and strict field validation),
//! [`sim`] (the clock and the controller loop), [`controller`] (what every controller works
//! with), [`kueue`], [`ray`], [`batch`] (JobSets and batch Jobs), [`pods`] (each job's driver
//! pod and its log, a Ray cluster's head), [`dashboard`] (a head's simulated Ray dashboard), [`nodes`] and [`autoscaler`]
//! (GKE: node pools, the autoscaler and ProvisioningRequests), [`workload`] (Kueue's Workload
//! for a job).

pub mod autoscaler;
pub mod batch;
pub mod computeclass;
pub mod controller;
pub mod dashboard;
pub mod kueue;
pub mod nodes;
pub mod pods;
pub mod ray;
pub mod schema;
pub mod sim;
pub mod store;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::addr::ClusterRef;
use crate::emulator::Emulator;
use crate::gke::GkeApi;
use crate::kube::{ApplyOptions, KubeApi, KubeError, KubeResult, MANAGER, ResourceInfo};
use crate::model::KueueInstall;
use crate::vocab::duration::{format_ms, parse_millis};
use controller::{Provisioning, SimSettings, SimState};
use nodes::PoolInfo;
use store::{Key, Store};

/// The file a cluster's local Kubernetes state is kept in, under its directory
/// ([`cluster_state_dir`]).
pub const STATE_FILE: &str = "kubernetes.json";
/// Where the clusters' directories are, under the state directory.
pub const CLUSTERS_DIR: &str = "clusters";

/// The directory of one cluster's Kubernetes state:
/// `<state-dir>/clusters/<project>/<location>/<cluster>`.
pub fn cluster_state_dir(state_dir: &Path, cluster: &ClusterRef) -> anyhow::Result<PathBuf> {
    let mut dir = state_dir.join(CLUSTERS_DIR);
    for (what, part) in [
        ("project", &cluster.project),
        ("location", &cluster.location),
        ("cluster", &cluster.cluster),
    ] {
        let plain =
            !part.is_empty() && part != "." && part != ".." && !part.contains(['/', '\\', '\0']);
        if !plain {
            anyhow::bail!(
                "the local target cannot keep state for {what} `{part}`: it is not a plain name (use letters, digits and `-`, as GKE does)"
            );
        }
        dir.push(part);
    }
    Ok(dir)
}
const STATE_VERSION: u32 = 1;

/// The KubeRay v1.7.0 RayJob and RayCluster CRDs as GKE's Ray operator add-on installs them,
/// cut down to their schema defaults (see [`schema::crd_defaults_only`]; regenerate with
/// `GKQ_UPDATE_ASSETS=1 cargo test --lib local::tests::kuberay_asset`).
const KUBERAY_CRDS: &str = include_str!("../../assets/crds/kuberay-v1.7.0.defaults.json");
/// The JobSet v0.12.0 CRD (the version Kueue v0.19.2 requires), cut down to its schema defaults
/// (regenerate with `GKQ_UPDATE_ASSETS=1 cargo test --lib local::tests::jobset_asset`).
const JOBSET_CRDS: &str = include_str!("../../assets/crds/jobset-v0.12.0.defaults.json");
/// The ProvisioningRequest CRD GKE serves (cluster-autoscaler 1.36.1).
const PROVREQ_CRD: &str =
    include_str!("../../assets/crds/autoscaling.x-k8s.io_provisioningrequests.yaml");
/// GKE's ComputeClass CRD, cut down to the fields of its reference page (written by gkq from the
/// documented field list, not copied from a cluster; see the file's header).
const COMPUTECLASS_CRD: &str =
    include_str!("../../assets/crds/cloud.google.com_computeclasses.yaml");

/// How the local target simulates time and capacity, from the environment:
///
/// - `GKQ_LOCAL_CLOCK`: how fast simulated time runs, `1x` (default) to e.g. `60x`.
/// - `GKQ_LOCAL_PROVISIONING`: what DWS does with a ProvisioningRequest: `after:20s`
///   (default: provisioned 20 s after it is requested), `never` (stays pending), `fail` or
///   `fail:30s` (fails; Kueue retries with backoff, then rejects the job).
/// - `GKQ_LOCAL_RUN`: how long a job runs when it declares no `duration` (default `2m`).
/// - `GKQ_LOCAL_CAPACITY`: what each rung of capacity can obtain, e.g.
///   `reservation:0,on-demand:4,flex-start:queued` ([`nodes::LocalCapacity`]; default: every
///   rung unlimited).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub clock: f64,
    pub sim: SimSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            clock: 1.0,
            sim: SimSettings::default(),
        }
    }
}

impl Settings {
    pub fn from_env() -> Result<Settings, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let mut settings = Settings::default();
        if let Some(clock) = get("GKQ_LOCAL_CLOCK").filter(|c| !c.trim().is_empty()) {
            let number = clock.trim().trim_end_matches(['x', 'X']);
            settings.clock = number
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f > 0.0 && *f <= 1_000_000.0)
                .ok_or_else(|| {
                    format!("GKQ_LOCAL_CLOCK={clock:?}: expected a speed-up such as 1x, 10x or 60x")
                })?;
        }
        if let Some(p) = get("GKQ_LOCAL_PROVISIONING").filter(|c| !c.trim().is_empty()) {
            let bad = || {
                format!(
                    "GKQ_LOCAL_PROVISIONING={p:?}: expected after:<duration> (e.g. after:20s), never, fail or fail:<duration>"
                )
            };
            settings.sim.provisioning = match p.trim() {
                "never" => Provisioning::Never,
                "fail" => Provisioning::Fail(20_000),
                other => match other.split_once(':') {
                    Some(("after", d)) => Provisioning::After(parse_millis(d).map_err(|_| bad())?),
                    Some(("fail", d)) => Provisioning::Fail(parse_millis(d).map_err(|_| bad())?),
                    _ => return Err(bad()),
                },
            };
        }
        if let Some(run) = get("GKQ_LOCAL_RUN").filter(|c| !c.trim().is_empty()) {
            settings.sim.run_ms = parse_millis(&run).map_err(|_| {
                format!("GKQ_LOCAL_RUN={run:?}: expected a duration such as 90s, 2m or 1h")
            })?;
        }
        if let Some(capacity) = get(nodes::LocalCapacity::VARIABLE).filter(|c| !c.trim().is_empty())
        {
            settings.sim.capacity = nodes::LocalCapacity::parse(&capacity)?;
        }
        Ok(settings)
    }

    /// One line for people: `clock 1x; DWS provisions after 20s; jobs run 2m`.
    pub fn describe(&self) -> String {
        let provisioning = match self.sim.provisioning {
            Provisioning::After(ms) => format!("DWS provisions {} after a request", format_ms(ms)),
            Provisioning::Never => "DWS never provisions".to_string(),
            Provisioning::Fail(ms) => format!("DWS requests fail after {}", format_ms(ms)),
        };
        let clock = if self.clock.fract() == 0.0 {
            format!("{}x", self.clock as u64)
        } else {
            format!("{}x", self.clock)
        };
        let mut line = format!(
            "clock {clock}; {provisioning}; jobs without a duration run {}",
            format_ms(self.sim.run_ms)
        );
        if !self.sim.capacity.entries.is_empty() {
            line.push_str(&format!("; capacity {}", self.sim.capacity.describe()));
        }
        line
    }
}

/// Where simulated time stands: `sim_ms` at wall-clock `wall_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Clock {
    pub wall_ms: u64,
    pub sim_ms: u64,
}

impl Clock {
    /// Advances to wall-clock `wall`, at `speed` simulated seconds per second.
    pub fn advance(&mut self, wall: u64, speed: f64) -> u64 {
        let elapsed = wall.saturating_sub(self.wall_ms) as f64 * speed;
        self.sim_ms = self.sim_ms.saturating_add(elapsed as u64);
        self.wall_ms = wall.max(self.wall_ms);
        self.sim_ms
    }
}

/// Everything in `kubernetes.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct World {
    pub version: u32,
    /// The GKE cluster these objects belong to (its `selfLink` and `createTime`).
    #[serde(default)]
    pub cluster: Option<String>,
    #[serde(default)]
    pub clock: Clock,
    #[serde(default)]
    pub store: Store,
    #[serde(default)]
    pub sim: SimState,
    /// The cluster's node pools as last read from GKE (not persisted).
    #[serde(skip)]
    pub pools: Vec<PoolInfo>,
}

impl World {
    pub fn load(dir: &Path) -> anyhow::Result<World> {
        Self::load_stamped(dir).map(|(world, _)| world)
    }

    /// [`World::load`], with the stamp of the file read (`None`: there was none).
    fn load_stamped(dir: &Path) -> anyhow::Result<(World, Option<FileStamp>)> {
        use std::io::Read;
        let path = dir.join(STATE_FILE);
        let failed = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("reading the local Kubernetes state {}: {e}", path.display())
        };
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((World::default(), None));
            }
            Err(e) => return Err(failed(&e)),
        };
        // The stamp of the file opened: the state is replaced by renames, never written in
        // place, so these are the bytes the stamp stands for.
        let stamp = file.metadata().ok().map(|m| FileStamp::of(&m));
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| failed(&e))?;
        let world = serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::anyhow!(
                "reading the local Kubernetes state {}: {e} (delete the file to start the local cluster's Kubernetes objects from nothing)",
                path.display()
            )
        })?;
        Ok((world, stamp))
    }

    /// Writes atomically (a temporary file in the same directory, then a rename), owner-only:
    /// the state holds Secret values in clear.
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        // Serialised where it is: a copy of thousands of objects per save was most of its cost.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Saved<'a> {
            version: u32,
            cluster: &'a Option<String>,
            clock: &'a Clock,
            store: &'a Store,
            sim: &'a SimState,
        }
        let bytes = serde_json::to_vec(&Saved {
            version: STATE_VERSION,
            cluster: &self.cluster,
            clock: &self.clock,
            store: &self.store,
            sim: &self.sim,
        })?;
        crate::owner_only::write_atomically(
            &dir.join(STATE_FILE),
            &bytes,
            crate::owner_only::Durability::Rename,
        )?;
        Ok(())
    }

    /// A new cluster's Kubernetes: namespaces and the CRDs GKE installs.
    fn seeded(identity: String, cluster: &Value, wall: u64) -> World {
        let mut world = World {
            version: STATE_VERSION,
            cluster: Some(identity),
            clock: Clock {
                wall_ms: wall,
                sim_ms: wall,
            },
            ..World::default()
        };
        let now = wall;
        world.sim.reconciled_ms = now;
        for ns in store::initial_namespaces() {
            world.store.create(ns, "kube-apiserver", now);
        }
        let mut crds: Vec<Value> = Vec::new();
        for crd in [PROVREQ_CRD, COMPUTECLASS_CRD] {
            if let Ok(crd) = serde_saphyr::from_str::<Value>(crd) {
                crds.push(crd);
            }
        }
        if cluster.pointer("/addonsConfig/rayOperatorConfig/enabled") == Some(&Value::Bool(true))
            && let Ok(Value::Array(list)) = serde_json::from_str::<Value>(KUBERAY_CRDS)
        {
            crds.extend(list);
        }
        // Simulated: the local target's clusters have JobSet installed.
        if let Ok(Value::Array(list)) = serde_json::from_str::<Value>(JOBSET_CRDS) {
            crds.extend(list);
        }
        for mut crd in crds {
            let labels = &mut crd["metadata"]["labels"];
            labels["addonmanager.kubernetes.io/mode"] = Value::String("Reconcile".into());
            world.store.create(crd, "gke-addon-manager", now);
        }
        world
    }
}

/// Which version of a state file: written files are replaced by a rename (a new inode), so
/// another process's write changes the stamp even within the file system's timestamp
/// granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        }
    }

    fn read(path: &Path) -> Option<FileStamp> {
        std::fs::metadata(path).ok().map(|m| FileStamp::of(&m))
    }
}

/// What a session found of a cluster's local Kubernetes when its simulation had nothing to do
/// ([`LocalKube::quiet`]): the state file it was read from, the cluster it belongs to, its clock
/// and when the simulated controllers next have something to do. As long as the file is that
/// file, GKE has the same cluster with the same node pools, and that moment has not come, every
/// read gives the same answer ([`LocalKube::still_quiet`]), and nobody need parse the file to
/// know it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quiet {
    file: FileStamp,
    cluster: String,
    pools: Vec<PoolInfo>,
    clock: Clock,
    settings: Settings,
    /// Simulated milliseconds; `u64::MAX` when nothing is due.
    until_ms: u64,
}

/// Whether a `clusters.get` answer is a cluster whose Kubernetes answers (see
/// [`LocalKube::sync`]).
fn answers(cluster: &Value) -> bool {
    crate::diff::normalize::status_name(cluster, crate::diff::normalize::GKE_CLUSTER_STATUS)
        .is_some_and(|s| matches!(s.as_str(), "RUNNING" | "RECONCILING"))
}

/// Which cluster incarnation a `clusters.get` answer is.
fn identity(cluster: &Value) -> String {
    format!(
        "{}@{}",
        cluster["selfLink"].as_str().unwrap_or_default(),
        cluster["createTime"].as_str().unwrap_or_default()
    )
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The Kueue installation the local target performs: the embedded release manifests when the
/// spec keeps the default download URL (the local target has no network).
pub fn local_kueue(install: &KueueInstall) -> KueueInstall {
    let mut install = install.clone();
    if install.manifests == KueueInstall::default_manifests(&install.version)
        && crate::model::kueue_install::builtin_manifests(&install.version).is_some()
    {
        install.manifests = crate::model::kueue_install::BUILTIN.to_string();
    }
    install
}

/// The local target's Kubernetes API (see the [module docs](self)).
pub struct LocalKube {
    /// The state directory: its `apply.lock`, and the single-file state of older gkq versions.
    dir: PathBuf,
    /// This cluster's own directory under it ([`cluster_state_dir`]).
    cluster_dir: PathBuf,
    /// The world was adopted from an older gkq's `<state-dir>/kubernetes.json`, which goes once
    /// the world is written to its own place.
    migrating: AtomicBool,
    gke: Box<dyn GkeApi>,
    cluster: ClusterRef,
    emulator: Option<Emulator>,
    settings: Settings,
    /// The cluster's objects, read from its state file by the first call that needs them (a
    /// session that only asks [`LocalKube::still_quiet`] never parses the file).
    world: Mutex<World>,
    loaded: AtomicBool,
    /// The state file as `world` was read from or last written to (`None`: not read yet, absent,
    /// or `world` holds what the file does not).
    file: Mutex<Option<FileStamp>>,
    /// The store's resourceVersion after this session's first sync: a later one means something
    /// changed between this session's reads.
    first_version: Mutex<Option<u64>>,
    /// Something changed that is not written yet.
    dirty: AtomicBool,
    /// When the state was last written and how long that took (writes are at least
    /// [`SAVE_INTERVAL`], and [`SAVE_SHARE`] times the last write, apart; the rest is written
    /// when the command ends).
    last_save: Mutex<Option<(std::time::Instant, std::time::Duration)>>,
    /// The running cluster last read from GKE, and when (see [`LocalKube::cluster`]).
    last_cluster: Mutex<Option<(std::time::Instant, Arc<Value>)>>,
    /// Whether the text of a held `apply.lock` names this process as its holder. The lock and
    /// its record are the caller's (`ops::lock` takes it), so the caller says how to read them.
    is_own_lock: OwnLockCheck,
}

/// Tells whether a state lock file's text names this process as the lock's holder.
pub type OwnLockCheck = fn(&str) -> bool;

/// How long a running cluster read from GKE is used again: short enough that a change made
/// through GKE (a node pool created, the cluster deleted) is seen at once by people and tests,
/// long enough that a burst of requests reads it once.
const CLUSTER_FRESH: std::time::Duration = std::time::Duration::from_millis(50);

/// Minimum time between two writes of `kubernetes.json` within one command.
const SAVE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// Writes wait at least this many times as long as the last write took, so that writing the
/// whole state (which grows with the objects) takes at most a fiftieth of a command's time.
const SAVE_SHARE: u32 = 50;

impl LocalKube {
    /// Opens the state in `dir` for `cluster`, reached through `gke` (the in-process emulator's
    /// endpoint). `emulator`, when given, is told node-pool sizes as the simulated autoscaler
    /// changes them. `is_own_lock` reads the state directory's `apply.lock` when another
    /// holder's lock blocks this process: the state is written only if the holder is this process.
    pub fn open(
        dir: &Path,
        gke: Box<dyn GkeApi>,
        cluster: ClusterRef,
        emulator: Option<Emulator>,
        settings: Settings,
        is_own_lock: OwnLockCheck,
    ) -> anyhow::Result<LocalKube> {
        let cluster_dir = cluster_state_dir(dir, &cluster)?;
        Ok(LocalKube {
            dir: dir.to_path_buf(),
            cluster_dir,
            migrating: AtomicBool::new(false),
            gke,
            cluster,
            emulator,
            settings,
            world: Mutex::new(World::default()),
            loaded: AtomicBool::new(false),
            file: Mutex::new(None),
            first_version: Mutex::new(None),
            dirty: AtomicBool::new(false),
            last_save: Mutex::new(None),
            last_cluster: Mutex::new(None),
            is_own_lock,
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// This cluster's state file.
    pub fn state_file(&self) -> PathBuf {
        self.cluster_dir.join(STATE_FILE)
    }

    /// The single file older gkq versions kept every cluster's state in.
    fn legacy_state_file(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The world an older gkq left in `<state-dir>/kubernetes.json`, when it belongs to this
    /// cluster incarnation (`identity`). Anything else there is left alone: it may be another
    /// cluster's, moved when a command finds that cluster.
    fn legacy_world(&self, identity: &str) -> Option<World> {
        let path = self.legacy_state_file();
        if !path.is_file() {
            return None;
        }
        match World::load(&self.dir) {
            Ok(world) if world.cluster.as_deref() == Some(identity) => Some(world),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(
                    "{e:#}; it is not used, and this cluster's Kubernetes starts from what GKE gives a new cluster in {}",
                    self.state_file().display()
                );
                None
            }
        }
    }

    /// The world, read from the state file the first time.
    fn lock(&self) -> KubeResult<MutexGuard<'_, World>> {
        let mut world = self.world.lock().unwrap_or_else(|e| e.into_inner());
        if !self.loaded.load(Ordering::Acquire) {
            let (read, stamp) = World::load_stamped(&self.cluster_dir)
                .map_err(|e| KubeError::Transport(format!("{e:#}")))?;
            *world = read;
            *lock_of(&self.file) = stamp;
            self.loaded.store(true, Ordering::Release);
        }
        Ok(world)
    }

    /// What this session read when the simulation had nothing to do: `None` when something
    /// changed since its first read (a write, the simulation), when the world is not written as
    /// read, or when the controllers have not settled. See [`Quiet`].
    pub fn quiet(&self) -> Option<Quiet> {
        if !self.loaded.load(Ordering::Acquire) || self.dirty.load(Ordering::Relaxed) {
            return None;
        }
        let mut world = self.world.lock().unwrap_or_else(|e| e.into_inner());
        let file = (*lock_of(&self.file))?;
        if *lock_of(&self.first_version) != Some(world.store.resource_version) {
            return None;
        }
        let World {
            store,
            sim,
            pools,
            clock,
            cluster,
            ..
        } = &mut *world;
        let until_ms =
            sim::quiet_until(store, sim, &self.settings.sim, pools, &self.cluster.cluster)?;
        Some(Quiet {
            file,
            cluster: cluster.clone()?,
            pools: pools.clone(),
            clock: *clock,
            settings: self.settings.clone(),
            until_ms,
        })
    }

    /// Whether every read would still answer as when `quiet` was taken: the state file is the
    /// same file, GKE has the same cluster with the same node pools, and simulated time has not
    /// reached the controllers' next event. Reads the cluster from GKE and the file's metadata,
    /// not the file.
    pub async fn still_quiet(&self, quiet: &Quiet) -> KubeResult<bool> {
        if self.settings != quiet.settings
            || FileStamp::read(&self.state_file()) != Some(quiet.file)
        {
            return Ok(false);
        }
        let Some(cluster) = self.cluster(true).await? else {
            return Ok(false);
        };
        if !answers(&cluster)
            || identity(&cluster) != quiet.cluster
            || PoolInfo::from_cluster(&cluster) != quiet.pools
        {
            return Ok(false);
        }
        let mut clock = quiet.clock;
        Ok(clock.advance(wall_ms(), self.settings.clock) < quiet.until_ms)
    }

    /// Writes now unless the last write was less than [`SAVE_INTERVAL`] ago (then the change
    /// is written by a later call or when the command ends).
    fn save_soon(&self, world: &World) -> KubeResult<()> {
        let recent = self
            .last_save
            .lock()
            .ok()
            .and_then(|t| *t)
            .is_some_and(|(at, took)| at.elapsed() < SAVE_INTERVAL.max(took * SAVE_SHARE));
        if recent {
            self.dirty.store(true, Ordering::Relaxed);
            Ok(())
        } else {
            self.save(world)
        }
    }

    fn save(&self, world: &World) -> KubeResult<()> {
        self.dirty.store(false, Ordering::Relaxed);
        let started = std::time::Instant::now();
        // Until written, the file is not what `world` holds.
        *lock_of(&self.file) = None;
        let Some(_guard) = self.write_guard() else {
            // Another gkq process is applying: its writes win. What this command simulated is
            // recomputed from the same timestamps by the next command.
            tracing::debug!(
                "not writing {}: another gkq process holds the state directory's lock",
                self.state_file().display()
            );
            if let Ok(mut t) = self.last_save.lock() {
                *t = Some((started, std::time::Duration::ZERO));
            }
            return Ok(());
        };
        let saved = world.save(&self.cluster_dir).map_err(|e| {
            KubeError::Transport(format!(
                "cannot write the local Kubernetes state {}: {e:#}",
                self.state_file().display()
            ))
        });
        if let Ok(mut t) = self.last_save.lock() {
            *t = Some((std::time::Instant::now(), started.elapsed()));
        }
        saved?;
        // Stamped while the write guard keeps other processes from replacing it.
        *lock_of(&self.file) = FileStamp::read(&self.state_file());
        if self.migrating.swap(false, Ordering::Relaxed) {
            let legacy = self.legacy_state_file();
            match std::fs::remove_file(&legacy) {
                Ok(()) => tracing::info!(
                    "moved the local Kubernetes state of cluster {} from {} to {}",
                    self.cluster.cluster,
                    legacy.display(),
                    self.state_file().display()
                ),
                Err(e) => tracing::warn!(
                    "copied the local Kubernetes state of cluster {} to {}, but cannot remove {}: {e}",
                    self.cluster.cluster,
                    self.state_file().display(),
                    legacy.display()
                ),
            }
        }
        Ok(())
    }

    /// Reads the cluster from GKE, follows it (a new cluster starts from nothing) and brings the
    /// simulation to now. Returns the simulated time and the lock, for the call that follows.
    /// Only this cluster's state is ever read or written; a deleted cluster's state is emptied
    /// by [`LocalKube::settle`], after `apply` or `destroy`, never by a read.
    async fn sync(&self) -> KubeResult<(MutexGuard<'_, World>, u64)> {
        self.sync_with(false).await
    }

    /// The cluster as GKE has it: read again unless a running cluster was read less than
    /// [`CLUSTER_FRESH`] ago (`fresh` always reads). Applying thousands of objects makes
    /// several requests each; a `clusters.get` for every one was a third of their cost.
    /// Shared, not copied: every request reads it, and a copy each was a few percent of a
    /// large apply.
    async fn cluster(&self, fresh: bool) -> KubeResult<Option<Arc<Value>>> {
        if !fresh
            && let Ok(last) = self.last_cluster.lock()
            && let Some((at, cluster)) = last.as_ref()
            && at.elapsed() < CLUSTER_FRESH
        {
            return Ok(Some(Arc::clone(cluster)));
        }
        let cluster = self.gke.get_cluster(&self.cluster).await.map_err(|e| {
            KubeError::Transport(format!(
                "reading the local cluster {} from the emulated GKE: {e}",
                self.cluster.cluster
            ))
        })?;
        let cluster = cluster.map(Arc::new);
        let running = cluster.as_ref().is_some_and(|c| {
            crate::diff::normalize::status_name(c, crate::diff::normalize::GKE_CLUSTER_STATUS)
                .is_some_and(|s| s == "RUNNING")
        });
        if let Ok(mut last) = self.last_cluster.lock() {
            *last = cluster
                .as_ref()
                .filter(|_| running)
                .map(|c| (std::time::Instant::now(), Arc::clone(c)));
        }
        Ok(cluster)
    }

    async fn sync_with(&self, fresh: bool) -> KubeResult<(MutexGuard<'_, World>, u64)> {
        let cluster = self.cluster(fresh).await?;
        let wall = wall_ms();
        let mut world = self.lock()?;
        let Some(cluster) = cluster else {
            return Err(KubeError::Transport(format!(
                "the local cluster {} does not exist (run `gkq apply` to create it)",
                self.cluster.cluster
            )));
        };
        let status = crate::diff::normalize::status_name(
            &cluster,
            crate::diff::normalize::GKE_CLUSTER_STATUS,
        )
        .unwrap_or_default();
        if !matches!(status.as_str(), "RUNNING" | "RECONCILING") {
            return Err(KubeError::Transport(format!(
                "the local cluster {} is {status}; its Kubernetes API answers once it is RUNNING",
                self.cluster.cluster
            )));
        }
        let id = identity(&cluster);
        let mut changed = false;
        if world.cluster.as_deref() != Some(id.as_str()) {
            *world = match self.legacy_world(&id) {
                Some(old) => {
                    self.migrating.store(true, Ordering::Relaxed);
                    old
                }
                None => World::seeded(id, &cluster, wall),
            };
            changed = true;
        }
        let now = world.clock.advance(wall, self.settings.clock);
        world.pools = PoolInfo::from_cluster(&cluster);
        warn_of_unknown_capacity_keys(&self.settings, &world);
        let pools = world.pools.clone();
        changed |= self.reconcile(&mut world, &pools, now);
        // Only a change is written. When only the clock moved, the next command brings the
        // world from its last change to its own now; at the same clock speed that is the same
        // moment (an idle read writes nothing).
        if changed {
            self.save_soon(&world)?;
        }
        lock_of(&self.first_version).get_or_insert(world.store.resource_version);
        Ok((world, now))
    }

    fn reconcile(&self, world: &mut World, pools: &[PoolInfo], now: u64) -> bool {
        let World { store, sim, .. } = world;
        let changed = sim::reconcile(
            store,
            sim,
            &self.settings.sim,
            pools,
            &self.cluster.cluster,
            now,
        );
        if changed && let Some(emulator) = &self.emulator {
            for pool in pools {
                let nodes = nodes::node_keys(store, &pool.name).len() as i64;
                let per_zone = nodes / pool.zones.max(1);
                if let Err(e) = emulator.set_autoscaled_size(
                    &self.cluster.project,
                    &self.cluster.location,
                    &self.cluster.cluster,
                    &pool.name,
                    per_zone,
                ) {
                    tracing::warn!(
                        "local target: cannot record the size of node pool {}: {e:#}",
                        pool.name
                    );
                }
            }
        }
        changed
    }

    /// Whether this process may write the state: the state directory's apply lock
    /// (`apply.lock`, taken by `gkq apply` before it reads anything) is free, and is then held
    /// for the write, or this process is the one holding it. `None` while another process
    /// applies.
    fn write_guard(&self) -> Option<Option<std::fs::File>> {
        let path = self.dir.join("apply.lock");
        let Ok(mut file) = crate::owner_only::open_read_write(&path) else {
            return Some(None);
        };
        match file.try_lock() {
            Ok(()) => Some(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => {
                use std::io::Read;
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                (self.is_own_lock)(&holder).then_some(None)
            }
            Err(std::fs::TryLockError::Error(_)) => Some(None),
        }
    }

    /// Brings the simulation to now and writes it (after `apply` or `destroy`). A cluster that
    /// does not exist is not an error here: its Kubernetes state is emptied (its objects went
    /// with it).
    pub async fn settle(&self) -> KubeResult<()> {
        if self.cluster(true).await?.is_none() {
            let mut world = self.lock()?;
            if world.cluster.is_some() {
                *world = World::default();
                self.save(&world)?;
            }
            return Ok(());
        }
        match self.sync_with(true).await {
            Ok((world, _)) => self.save(&world),
            Err(KubeError::Transport(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// After a write: let the controllers react at once, then persist.
    fn after_write(&self, world: &mut World, now: u64) -> KubeResult<()> {
        let pools = world.pools.clone();
        self.reconcile(world, &pools, now);
        self.save_soon(world)
    }
}

impl Drop for LocalKube {
    fn drop(&mut self) {
        if self.dirty.load(Ordering::Relaxed)
            && let Ok(world) = self.lock()
            && let Err(e) = self.save(&world)
        {
            tracing::warn!("{e}");
        }
    }
}

/// A `GKQ_LOCAL_CAPACITY` key naming no node pool of the cluster (nor one the simulated GKE
/// created for a ComputeClass, nor the `gk-` name of one it may create) is said once per
/// process, with the kinds and the pools that exist: it governs nothing.
fn warn_of_unknown_capacity_keys(settings: &Settings, world: &World) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let mut names: Vec<&str> = world.pools.iter().map(|p| p.name.as_str()).collect();
    names.extend(world.sim.auto_pools.pools.keys().map(String::as_str));
    let unknown: Vec<&str> = settings
        .sim
        .capacity
        .unknown_pools(&names)
        .into_iter()
        .filter(|p| !p.starts_with("gk-"))
        .collect();
    if unknown.is_empty() || WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    tracing::warn!(
        "{} names node pools the cluster does not have: {}; a key is a node pool ({}) or a kind (reservation, on-demand, flex-start, flex-start-queued or queued, spot)",
        nodes::LocalCapacity::VARIABLE,
        unknown.join(", "),
        names.join(", ")
    );
}

fn lock_of<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn key_for(info: &ResourceInfo, namespace: Option<&str>, name: &str) -> Key {
    Key::new(
        &info.api_version,
        &info.kind,
        namespace.filter(|_| info.namespaced),
        name,
    )
}

#[async_trait::async_trait]
impl KubeApi for LocalKube {
    async fn resource(&self, api_version: &str, kind: &str) -> KubeResult<Option<ResourceInfo>> {
        let (world, _) = self.sync().await?;
        Ok(world.store.discover(api_version, kind))
    }

    async fn list(&self, info: &ResourceInfo, label_selector: &str) -> KubeResult<Vec<Value>> {
        let (world, _) = self.sync().await?;
        world.store.list(info, label_selector)
    }

    async fn get(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> KubeResult<Option<Value>> {
        let (world, _) = self.sync().await?;
        Ok(world
            .store
            .get(&key_for(info, namespace, name))
            .map(|o| store::in_version(o, &info.api_version)))
    }

    async fn apply(
        &self,
        info: &ResourceInfo,
        object: &Value,
        opts: ApplyOptions,
    ) -> KubeResult<Value> {
        let (mut world, now) = self.sync().await?;
        if world
            .store
            .discover(&info.api_version, &info.kind)
            .is_none()
        {
            return Err(KubeError::UnknownKind {
                api_version: info.api_version.clone(),
                kind: info.kind.clone(),
            });
        }
        let out = world.store.apply(
            info,
            object,
            MANAGER,
            opts.force,
            opts.dry_run,
            now,
            &sim::admit,
        )?;
        if !opts.dry_run {
            self.after_write(&mut world, now)?;
        }
        Ok(out)
    }

    async fn delete(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        version: Option<&crate::kube::Version>,
    ) -> KubeResult<crate::kube::Deletion> {
        use crate::kube::Deletion;
        let (mut world, now) = self.sync().await?;
        let key = key_for(info, namespace, name);
        if !world.store.delete_at(&key, version, now)? {
            return Ok(Deletion::Absent);
        }
        self.after_write(&mut world, now)?;
        Ok(match world.store.get(&key) {
            Some(_) => Deletion::Pending,
            None => Deletion::Gone,
        })
    }
    /// The simulated driver pod's log ([`pods`]); following it brings the simulation to now
    /// every [`FOLLOW_POLL`] until the pod has ended or is gone.
    async fn pod_log(
        &self,
        namespace: &str,
        name: &str,
        follow: bool,
        each: &mut (dyn for<'l> FnMut(&'l str) + Send),
    ) -> KubeResult<()> {
        let mut shown = 0;
        loop {
            let (lines, ended) = {
                let (world, _) = self.sync().await?;
                let key = Key::new("v1", "Pod", Some(namespace), name);
                let Some(pod) = world.store.get(&key) else {
                    if shown > 0 {
                        // Deleted while followed (the job was suspended again).
                        return Ok(());
                    }
                    return Err(KubeError::Api {
                        object: format!("Pod {namespace}/{name}"),
                        code: 404,
                        reason: "NotFound".into(),
                        message: format!("pods \"{name}\" not found"),
                    });
                };
                let ended = matches!(
                    pod.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                );
                let log = pods::log(&world.sim, namespace, name).unwrap_or_default();
                (log.get(shown..).unwrap_or_default().to_vec(), ended)
            };
            for line in &lines {
                each(line);
            }
            shown += lines.len();
            if !follow || ended {
                return Ok(());
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    }
    async fn port_forward(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> KubeResult<crate::kube::PortForward> {
        local_port_forward(self, namespace, name, port).await
    }
}

/// Forwarding a port of a simulated pod reaches the simulated Ray dashboard of a head pod
/// ([`dashboard`]), the only thing the simulation serves.
async fn local_port_forward(
    kube: &LocalKube,
    namespace: &str,
    name: &str,
    port: u16,
) -> KubeResult<crate::kube::PortForward> {
    let simulated = {
        let (world, _) = kube.sync().await?;
        dashboard::open(&world.store, namespace, name, port)?
    };
    Ok(crate::kube::PortForward {
        stream: Box::new(dashboard::serve(simulated)),
        error: Box::pin(std::future::ready(None)),
    })
}

/// How often a followed simulated log is read again.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_reject_nonsense() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let s = Settings::from_lookup(env(&[
            ("GKQ_LOCAL_CLOCK", "60x"),
            ("GKQ_LOCAL_PROVISIONING", "after:5s"),
            ("GKQ_LOCAL_RUN", "90s"),
        ]))
        .unwrap();
        assert_eq!(s.clock, 60.0);
        assert_eq!(s.sim.provisioning, Provisioning::After(5_000));
        assert_eq!(s.sim.run_ms, 90_000);
        assert_eq!(
            s.describe(),
            "clock 60x; DWS provisions 5s after a request; jobs without a duration run 1m 30s"
        );
        let s = Settings::from_lookup(env(&[("GKQ_LOCAL_PROVISIONING", "never")])).unwrap();
        assert_eq!(s.sim.provisioning, Provisioning::Never);
        let s = Settings::from_lookup(env(&[("GKQ_LOCAL_PROVISIONING", "fail:1m")])).unwrap();
        assert_eq!(s.sim.provisioning, Provisioning::Fail(60_000));
        assert!(Settings::from_lookup(env(&[("GKQ_LOCAL_CLOCK", "fast")])).is_err());
        assert!(Settings::from_lookup(env(&[("GKQ_LOCAL_PROVISIONING", "soon")])).is_err());
        assert!(Settings::from_lookup(env(&[("GKQ_LOCAL_CLOCK", "-1x")])).is_err());
    }

    #[test]
    fn capacity_parses_kinds_pools_and_values() {
        use crate::spec::types::RungKind;
        use nodes::{Availability, CapacityKey, LocalCapacity};
        let lookup =
            |v: &'static str| move |k: &str| (k == "GKQ_LOCAL_CAPACITY").then(|| v.to_string());
        let s = Settings::from_lookup(lookup(
            "reservation:0, on-demand:4,flex-start:queued,queued:never,my-pool:unlimited",
        ))
        .unwrap();
        let c = &s.sim.capacity;
        assert_eq!(c.entries.len(), 5);
        assert_eq!(
            c.entries[3].key,
            CapacityKey::Kind(RungKind::FlexStartQueued)
        );
        assert_eq!(c.entries[3].value, Availability::Never);
        // A pool's name wins over its kind.
        assert_eq!(
            c.entry("my-pool", RungKind::Reservation).unwrap().value,
            Availability::Unlimited
        );
        assert_eq!(
            c.entry("other", RungKind::Reservation).unwrap().value,
            Availability::Nodes(0)
        );
        assert_eq!(c.entry("other", RungKind::Spot), None);
        assert!(s.describe().ends_with("; capacity reservation:0,on-demand:4,flex-start:queued,flex-start-queued:never,my-pool:unlimited"), "{}", s.describe());
        for bad in [
            "on-demand",
            "on-demand:-1",
            "on-demand:lots",
            "Bad_Pool:1",
            "spot:1,spot:2",
            "spot:1,",
        ] {
            let e = Settings::from_lookup(lookup(bad)).unwrap_err();
            assert!(e.starts_with(&format!("GKQ_LOCAL_CAPACITY={bad:?}")), "{e}");
            assert!(e.contains("unlimited, queued or never"), "{e}");
        }
        assert_eq!(
            LocalCapacity::parse("x:1").unwrap().unknown_pools(&["y"]),
            ["x"]
        );
    }

    #[test]
    fn clock_runs_at_its_speed() {
        let mut clock = Clock {
            wall_ms: 1_000,
            sim_ms: 1_000,
        };
        assert_eq!(clock.advance(2_000, 10.0), 11_000);
        assert_eq!(clock.advance(2_500, 1.0), 11_500);
        assert_eq!(clock.advance(2_000, 1.0), 11_500, "never backwards");
    }

    fn local_kube(dir: &Path) -> LocalKube {
        let gke = crate::gke::RestGke::with_endpoint(
            "http://127.0.0.1:9/",
            Arc::new(crate::gke::AnonymousTokenSource),
        )
        .unwrap();
        LocalKube::open(
            dir,
            Box::new(gke),
            ClusterRef {
                project: "p".into(),
                location: "l".into(),
                cluster: "c".into(),
            },
            None,
            Settings::default(),
            held_by_test_holder,
        )
        .unwrap()
    }

    /// The test's own lock check: the record names [`TEST_HOLDER`] exactly. (The holder rule
    /// itself, one pid never another's prefix, is `gitops::lock`'s, tested there.)
    fn held_by_test_holder(text: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .is_some_and(|record| record["holder"] == TEST_HOLDER)
    }

    const TEST_HOLDER: &str = "test@host pid 1089";

    /// The state lock held by another holder, even one whose identity merely starts like the
    /// opener's (pid 1089 against pid 10898), is not the opener's: the state is not written.
    #[test]
    fn a_lock_held_by_another_pid_with_the_same_prefix_is_not_ours() {
        let dir = tempfile::tempdir().unwrap();
        let kube = local_kube(dir.path());
        let me = TEST_HOLDER.to_string();
        let held = |holder: &str| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(dir.path().join("apply.lock"))
                .unwrap();
            file.try_lock().unwrap();
            let record =
                serde_json::json!({"holder": holder, "acquiredAt": "2026-11-30T12:00:00Z"});
            std::fs::write(dir.path().join("apply.lock"), record.to_string()).unwrap();
            file
        };
        for other in [format!("{me}8"), format!("{me}0 (ci)"), format!("x{me}")] {
            let lock = held(&other);
            assert!(
                kube.write_guard().is_none(),
                "{other:?} holds the lock, not {me:?}"
            );
            drop(lock);
        }
        let lock = held(&me);
        assert!(kube.write_guard().is_some(), "this process holds the lock");
        drop(lock);
    }

    /// An embedded CRD asset: upstream fixtures cut down to their defaults, rewritten with
    /// `GKQ_UPDATE_ASSETS=1`.
    fn check_crd_asset(fixtures: &str, files: &[&str], asset: &str, embedded: &str, test: &str) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = root.join("tests/fixtures/upstream/crds").join(fixtures);
        let mut crds = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let crd: Value = serde_saphyr::from_str(&text).unwrap();
            crds.push(schema::crd_defaults_only(&crd));
        }
        let generated = format!("{}\n", serde_json::to_string(&Value::Array(crds)).unwrap());
        let path = root.join("assets/crds").join(asset);
        if std::env::var_os("GKQ_UPDATE_ASSETS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        assert!(
            generated == embedded,
            "{} is stale: run GKQ_UPDATE_ASSETS=1 cargo test --lib local::tests::{test}",
            path.display()
        );
    }

    /// The KubeRay CRDs gkq embeds are the v1.7.0 fixtures cut down to their defaults.
    #[test]
    fn kuberay_asset_matches_the_fixture() {
        check_crd_asset(
            "kuberay",
            &["ray.io_rayjobs.yaml", "ray.io_rayclusters.yaml"],
            "kuberay-v1.7.0.defaults.json",
            KUBERAY_CRDS,
            "kuberay_asset",
        );
    }

    /// The JobSet CRD gkq embeds is the v0.12.0 fixture cut down to its defaults.
    #[test]
    fn jobset_asset_matches_the_fixture() {
        check_crd_asset(
            "jobset",
            &["jobset.x-k8s.io_jobsets.yaml"],
            "jobset-v0.12.0.defaults.json",
            JOBSET_CRDS,
            "jobset_asset",
        );
    }
}
