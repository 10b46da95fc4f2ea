//! `gkq watch` as a library call: re-plan when the spec changes, when live state drifts, or when
//! a remote branch moves; optionally apply; and follow each job's admission. What happens is told
//! to a [`WatchSink`] as [`WatchEvent`]s; the terminal rendering is `cli::watch`'s.
//!
//! Event driven, so an idle watch costs next to nothing: file events come from the OS (notify,
//! debounced by notify-debouncer-full, which also stitches an editor's write-then-rename into one
//! change), the drift check and `git fetch` run on a timer (`interval`), and jobs are polled only
//! while some job has not finished. A plan is told only when it differs from the last one told
//! ([`Plan::fingerprint`](crate::plan::Plan::fingerprint)). A stop signal ends the watch at once,
//! also in the middle of a plan; an apply in progress is interrupted between API calls, and its
//! locks are freed (the Lease expires).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify_debouncer_full::notify::event::{AccessKind, AccessMode};
use notify_debouncer_full::notify::{EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::apply::Consent;
use super::converge::{self, Applied, ApplyChoices, ApplyFront, ConvergeError, PlanSource, Ready};
use super::load::{SpecSource, load_valid};
use super::plan::{Planned, plan_valid};
use super::session::TargetOptions;
use super::status::recorded_placements;
use crate::apply::Sink;
use crate::gitops::git;
use crate::gitops::watch::{AutoApply, PlanTracker, auto_apply, is_relevant};
use crate::model::gke::node_pool_limits;
use crate::model::live::KubeSnapshot;
use crate::observe::cluster::{JOB_TIMELINE_KINDS, read_kinds, workloads_only};
use crate::plan::digest::FileDigest;
use crate::plan::revision::PlacementRecords;
use crate::plan::{Plan, PlanOptions};
use crate::report::status::{PlacedComparison, placed_comparisons};
use crate::report::timeline::{self, Capacity, JobState, PoolSize};
use crate::spec::{Diagnostics, SourceMap};

/// How long the debouncer waits for a burst of events (an editor's save) to settle.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// How often the debouncer checks whether a burst has settled.
const DEBOUNCE_TICK: Duration = Duration::from_millis(50);

/// What a watch does.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub spec: SpecSource,
    pub target: TargetOptions,
    pub plan: PlanOptions,
    /// Re-observe live state (and fetch the followed branch) this often.
    pub interval: Duration,
    /// Apply the plans [`auto_apply`] allows; `None`: plan only.
    pub apply: Option<AutoApplyOptions>,
    /// Follow a remote branch instead of the working tree.
    pub follow: Option<FollowBranch>,
    /// While jobs are being admitted or run, read their state this often.
    pub job_interval: Duration,
    /// How long to wait for another apply's lock.
    pub lock_timeout: Duration,
    /// With apply: how long each submitted job waits for Kueue's decision (`--submit-wait`).
    pub submit_wait: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct AutoApplyOptions {
    /// Also apply plans that replace or delete resources.
    pub allow_destructive: bool,
    /// Also apply plans that stop admitted or running jobs.
    pub allow_disruption: bool,
    /// Take over fields another field manager owns.
    pub force_conflicts: bool,
}

/// `git fetch REMOTE` every interval and plan each new commit of `BRANCH`.
#[derive(Debug, Clone)]
pub struct FollowBranch {
    pub remote: String,
    pub branch: String,
}

/// Why a plan is being made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    Start,
    Files(Vec<PathBuf>),
    Drift,
    Commit(String),
    Applied,
}

impl Trigger {
    pub fn describe(&self, spec_dir: &Path) -> String {
        match self {
            Trigger::Start => "initial plan".to_string(),
            Trigger::Files(paths) => {
                let mut names: Vec<String> = paths
                    .iter()
                    .map(|p| p.strip_prefix(spec_dir).unwrap_or(p).display().to_string())
                    .collect();
                names.sort();
                names.dedup();
                format!("spec changed ({})", names.join(", "))
            }
            Trigger::Drift => "live state changed".to_string(),
            Trigger::Commit(commit) => {
                format!(
                    "new commit {}",
                    crate::plan::provenance::short_commit(commit)
                )
            }
            Trigger::Applied => "after apply".to_string(),
        }
    }
}

/// What a watch tells its sink, in order.
pub enum WatchEvent<'a> {
    /// The spec does not validate; the watch waits for a fix. Told once per distinct problem.
    InvalidSpec {
        diagnostics: &'a Diagnostics,
        sources: &'a SourceMap,
    },
    /// Planning, fetching or locking failed. Told once per distinct problem.
    Problem(String),
    /// A plan that differs from the last one told.
    Planned {
        trigger: String,
        plan: &'a Plan,
    },
    /// `apply` holds this plan back, and why. Told once per plan.
    Held(String),
    /// An apply of the plan with this summary starts; its progress goes to [`WatchSink::apply_sink`].
    Applying(String),
    Applied,
    /// The apply ended with this many failed actions.
    ApplyIncomplete(usize),
    /// Live state changed under the plan; nothing was applied.
    NotApplied(String),
    /// A job reached a new stage of its admission timeline.
    JobStage {
        job: &'a str,
        stage: String,
    },
    /// A job seems stuck, and why. Told once per job and stage.
    JobStuck {
        job: &'a str,
        warning: &'a str,
    },
    /// Kueue placed a job: how that compares with the prediction recorded when gkq submitted
    /// this run. Told once per job and verdict.
    JobPlaced(&'a PlacedComparison),
}

/// Where a watch's events go.
pub trait WatchSink: Send + Sync {
    fn event(&self, event: WatchEvent<'_>);
    /// Where an apply's own progress goes.
    fn apply_sink(&self) -> &dyn Sink;
}

/// Watch's side of `ops::converge::apply`: it applies only what [`auto_apply`] allows (judged
/// again on the plan made under the locks) and never asks anyone.
struct WatchFront<'a> {
    sink: &'a dyn WatchSink,
    apply: &'a AutoApplyOptions,
}

#[async_trait::async_trait(?Send)]
impl ApplyFront for WatchFront<'_> {
    async fn planned(&self, _ready: &Ready<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    fn consent(&self, _plan: &Plan) -> Consent {
        Consent {
            force_conflicts: self.apply.force_conflicts,
            allow_disruption: self.apply.allow_disruption,
        }
    }

    async fn approve(&self, plan: &Plan) -> anyhow::Result<bool> {
        let allowed = auto_apply(
            plan,
            self.apply.allow_destructive,
            self.apply.allow_disruption,
        ) == AutoApply::Apply;
        if allowed {
            self.sink
                .event(WatchEvent::Applying(plan.summary.to_string()));
        }
        Ok(allowed)
    }

    fn sink(&self) -> &dyn Sink {
        self.sink.apply_sink()
    }
}

/// Watches until `stop` turns true.
pub async fn watch(
    options: &WatchOptions,
    sink: &dyn WatchSink,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let spec_dir = spec_dir(&options.spec.spec)?;
    let (files_tx, mut files) = mpsc::channel::<Vec<PathBuf>>(16);
    // Kept alive for the length of the watch; dropping it stops the OS watch.
    let _debouncer = match &options.follow {
        Some(_) => None,
        None => Some(watch_files(&spec_dir, files_tx)?),
    };
    let mut watcher = Watcher {
        options,
        sink,
        spec_dir,
        tracker: PlanTracker::default(),
        last_problem: None,
        last_hold: None,
        commit: None,
        last: None,
        job_lines: BTreeMap::new(),
        warned: BTreeSet::new(),
        records: PlacementRecords::default(),
        placed: BTreeMap::new(),
        jobs_in_flight: false,
        spec_files: None,
    };

    let interval = options.interval;
    let mut drift = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    drift.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut jobs = tokio::time::interval(options.job_interval);
    jobs.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let mut next = Some(match &options.follow {
        Some(_) => watcher.poll_remote().await.unwrap_or(Trigger::Start),
        None => Trigger::Start,
    });
    loop {
        if *stop.borrow() {
            break;
        }
        if let Some(trigger) = next.take() {
            tokio::select! {
                _ = stop.changed() => break,
                again = watcher.cycle(trigger) => next = again,
            }
            continue;
        }
        tokio::select! {
            // A saved file wins over a drift tick that is ready at the same time, so that its
            // plan is attributed to the edit.
            biased;
            _ = stop.changed() => break,
            Some(mut paths) = files.recv() => {
                // A save often arrives as several batches; take them all.
                while let Ok(more) = files.try_recv() {
                    paths.extend(more);
                }
                next = Some(Trigger::Files(paths));
            }
            _ = drift.tick() => {
                next = Some(match &options.follow {
                    Some(_) => watcher.poll_remote().await.unwrap_or(Trigger::Drift),
                    None => Trigger::Drift,
                });
            }
            _ = jobs.tick(), if watcher.jobs_in_flight => {
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = watcher.refresh_jobs(false) => {}
                }
            }
        }
    }
    Ok(())
}

/// The paths of the spec's files that differ between two plans' inputs: changed, added or gone.
fn changed_files(before: &[FileDigest], now: &[FileDigest]) -> BTreeSet<String> {
    let index = |files: &[FileDigest]| -> BTreeMap<String, String> {
        files
            .iter()
            .map(|f| (f.path.clone(), f.sha256.clone()))
            .collect()
    };
    let (before, now) = (index(before), index(now));
    before
        .keys()
        .chain(now.keys())
        .filter(|path| before.get(*path) != now.get(*path))
        .cloned()
        .collect()
}

/// The directory a watch of `spec` watches (and runs git in), canonical.
pub fn spec_dir(spec: &Path) -> anyhow::Result<PathBuf> {
    let dir = git::spec_dir(spec);
    dir.canonicalize()
        .map_err(|e| anyhow::anyhow!("cannot watch {}: {e}", dir.display()))
}

/// Starts the OS file watch on the spec's directory; relevant changed paths go to `tx`.
fn watch_files(
    dir: &Path,
    tx: mpsc::Sender<Vec<PathBuf>>,
) -> anyhow::Result<Debouncer<RecommendedWatcher, RecommendedCache>> {
    let root = dir.to_path_buf();
    let mut debouncer = new_debouncer(
        DEBOUNCE,
        Some(DEBOUNCE_TICK),
        move |result: DebounceEventResult| {
            let Ok(events) = result else {
                return;
            };
            let paths: Vec<PathBuf> = events
                .into_iter()
                // Reads (including gkq's own) are not changes; a write that closes is.
                .filter(|e| match e.event.kind {
                    EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
                    EventKind::Access(_) => false,
                    _ => true,
                })
                .flat_map(|e| e.event.paths)
                .filter(|p| is_relevant(p, &root))
                .collect();
            if !paths.is_empty() {
                // The receiver is gone only when watch is stopping.
                let _ = tx.blocking_send(paths);
            }
        },
    )
    .map_err(|e| anyhow::anyhow!("cannot watch {}: {e}", dir.display()))?;
    debouncer
        .watch(dir, RecursiveMode::Recursive)
        .map_err(|e| anyhow::anyhow!("cannot watch {}: {e}", dir.display()))?;
    Ok(debouncer)
}

struct Watcher<'a> {
    options: &'a WatchOptions,
    sink: &'a dyn WatchSink,
    spec_dir: PathBuf,
    tracker: PlanTracker,
    /// The last problem told (invalid spec, failed plan or fetch), to tell each one once.
    last_problem: Option<String>,
    /// The plan `apply` held back last, by fingerprint, to say why once.
    last_hold: Option<String>,
    /// When following a branch: the commit being followed.
    commit: Option<String>,
    /// The last plan, whose session and clients the job timeline reads through.
    last: Option<Planned>,
    job_lines: BTreeMap<String, String>,
    warned: BTreeSet<(String, String)>,
    /// The predicted placements the applied revision records, read after each plan.
    records: PlacementRecords,
    /// Each placed job's comparison with its record, as last told.
    placed: BTreeMap<String, PlacedComparison>,
    jobs_in_flight: bool,
    /// The spec's files (path and hash) the last plan was made from.
    spec_files: Option<Vec<FileDigest>>,
}

impl Watcher<'_> {
    fn spec_source(&self) -> SpecSource {
        let mut spec = self.options.spec.clone();
        if let Some(commit) = &self.commit {
            spec.git_ref = Some(commit.clone());
        }
        spec
    }

    /// Tells a problem unless it is the one told last.
    fn problem(&mut self, key: String, event: WatchEvent<'_>) {
        if self.last_problem.as_deref() != Some(key.as_str()) {
            self.sink.event(event);
            self.last_problem = Some(key);
        }
    }

    fn failure(&mut self, text: String) {
        self.problem(text.clone(), WatchEvent::Problem(text));
    }

    /// Plans `spec`; a failure is told and gives `None`.
    async fn plan(
        &mut self,
        spec: &SpecSource,
        loaded: crate::spec::Loaded,
        desired: crate::model::DesiredState,
    ) -> Option<Planned> {
        let options = self.options;
        match plan_valid(spec, loaded, desired, &options.target, options.plan.clone()).await {
            Ok(planned) => Some(planned),
            Err(e) => {
                self.failure(format!("planning failed: {e:#}"));
                None
            }
        }
    }

    /// `git fetch`; a trigger when the branch moved to a new commit.
    async fn poll_remote(&mut self) -> Option<Trigger> {
        let follow = self.options.follow.as_ref()?;
        match git::fetch(&self.spec_dir, &follow.remote, &follow.branch).await {
            Ok(commit) if self.commit.as_deref() != Some(commit.as_str()) => {
                let first = self.commit.is_none();
                self.commit = Some(commit.clone());
                Some(if first {
                    Trigger::Start
                } else {
                    Trigger::Commit(commit)
                })
            }
            Ok(_) => None,
            Err(e) => {
                self.failure(format!("{e}"));
                None
            }
        }
    }

    /// Plans, tells the plan if it is new, applies it when allowed. Returns the next trigger
    /// (a re-plan after an apply).
    async fn cycle(&mut self, trigger: Trigger) -> Option<Trigger> {
        let spec = self.spec_source();
        let validated = load_valid(&spec);
        let Some((loaded, desired)) = validated.valid else {
            let key = validated
                .diagnostics
                .report(&validated.sources)
                .render(false);
            self.problem(
                key,
                WatchEvent::InvalidSpec {
                    diagnostics: &validated.diagnostics,
                    sources: &validated.sources,
                },
            );
            self.tracker.forget();
            return None;
        };
        let options = self.options;
        let Some(planned) = self.plan(&spec, loaded, desired).await else {
            self.tracker.forget();
            return None;
        };
        self.last_problem = None;
        // A drift tick can come before the file event of a save it already read: a plan of a
        // changed spec is the spec's change, whatever woke the watcher.
        let files = planned
            .plan
            .provenance
            .as_ref()
            .map(|p| p.spec.files.clone());
        let trigger = match (trigger, &self.spec_files, &files) {
            (Trigger::Drift, Some(before), Some(now)) if before != now => Trigger::Files(
                changed_files(before, now)
                    .into_iter()
                    .map(|path| self.spec_dir.join(path))
                    .collect(),
            ),
            (trigger, ..) => trigger,
        };
        self.spec_files = files;
        let why = trigger.describe(&self.spec_dir);
        if self.tracker.is_new(&planned.plan) {
            self.sink.event(WatchEvent::Planned {
                trigger: why,
                plan: &planned.plan,
            });
        } else {
            tracing::debug!("{why}: plan unchanged");
        }
        if let Some(apply) = &options.apply {
            match auto_apply(
                &planned.plan,
                apply.allow_destructive,
                apply.allow_disruption,
            ) {
                AutoApply::UpToDate => {}
                AutoApply::Hold(reason) => {
                    let fingerprint = planned.plan.fingerprint();
                    if self.last_hold.as_deref() != Some(fingerprint.as_str()) {
                        self.sink.event(WatchEvent::Held(reason));
                        self.last_hold = Some(fingerprint);
                    }
                }
                AutoApply::Apply => {
                    // Release the clients (and the local target's emulator) before locking.
                    self.last = None;
                    drop(planned);
                    self.apply_now(apply).await;
                    self.job_lines.clear();
                    self.placed.clear();
                    return Some(Trigger::Applied);
                }
            }
        }
        self.last = Some(planned);
        self.refresh_jobs(true).await;
        None
    }

    /// Plans again from fresh state under the locks and applies if the plan is still one watch
    /// may apply: `ops::converge::apply`, with [`WatchFront`].
    async fn apply_now(&mut self, apply: &AutoApplyOptions) {
        let spec = self.spec_source();
        let options = self.options;
        let Some((loaded, desired)) = load_valid(&spec).valid else {
            return;
        };
        let choices = ApplyChoices {
            lock_timeout: options.lock_timeout,
            submit_wait: options.submit_wait,
            // Watch follows the jobs itself, after the apply.
            follow_jobs: false,
            // Only plans with changes come here; a fresh plan without any records nothing.
            record_unchanged: false,
            interrupt: Default::default(),
            lock_holder: None,
        };
        let front = WatchFront {
            sink: self.sink,
            apply,
        };
        let source = PlanSource::Spec {
            spec: &spec,
            loaded,
            desired,
            opts: options.plan.clone(),
        };
        match converge::apply(source, &options.target, &choices, &front).await {
            Ok(Applied::Executed {
                report,
                lock_lost,
                ..
            }) => match report {
                Ok(report) if report.is_success() && lock_lost => self.failure(
                    "applied, but the cluster's lock was taken over before the end; the applied revision was not recorded".to_string(),
                ),
                Ok(report) if report.is_success() => self.sink.event(WatchEvent::Applied),
                Ok(report) => self
                    .sink
                    .event(WatchEvent::ApplyIncomplete(report.failures().count())),
                Err(stale) => self.sink.event(WatchEvent::NotApplied(stale.to_string())),
            },
            // The plan made under the locks is not one watch applies (any more): the next plan
            // tells why.
            Ok(Applied::NoChanges | Applied::Cancelled) => {}
            Ok(Applied::Refused(why)) => self.sink.event(WatchEvent::Held(why)),
            Err(ConvergeError::Plan(e)) => self.failure(format!("planning failed: {e:#}")),
            Err(e) => self.failure(format!("not applying: {e:#}")),
        }
    }

    /// Reads the jobs' Kueue and KubeRay state and tells each job whose stage changed, and each
    /// stuck state once. `just_planned`: the last plan was made just now, so the Workloads it read
    /// are current and are not read again; between plans they are read afresh.
    async fn refresh_jobs(&mut self, just_planned: bool) {
        if just_planned && let Some(planned) = &self.last {
            // Records change only when an apply ends, and every apply is followed by a plan.
            self.records =
                recorded_placements(planned.kube().api(), &planned.plan.cluster.cluster).await;
        }
        let (states, comparisons) = match self.job_states(just_planned).await {
            Some(read) => read,
            None => {
                self.jobs_in_flight = false;
                return;
            }
        };
        for comparison in &comparisons {
            if self.placed.get(&comparison.job) != Some(comparison) {
                self.placed
                    .insert(comparison.job.clone(), comparison.clone());
                self.sink.event(WatchEvent::JobPlaced(comparison));
            }
        }
        for state in &states {
            let stage = state.stage.to_string();
            if self.job_lines.get(&state.job) != Some(&stage) {
                self.job_lines.insert(state.job.clone(), stage.clone());
                self.sink.event(WatchEvent::JobStage {
                    job: &state.job,
                    stage: stage.clone(),
                });
            }
            if let Some(warning) = &state.warning
                && self.warned.insert((state.job.clone(), stage))
            {
                self.sink.event(WatchEvent::JobStuck {
                    job: &state.job,
                    warning,
                });
            }
        }
        self.jobs_in_flight = states.iter().any(|s| !s.stage.is_finished());
    }

    /// Each of the stack's jobs' admission timeline, and how each job Kueue placed compares
    /// with its record; `None` when Kubernetes cannot be read.
    async fn job_states(
        &self,
        just_planned: bool,
    ) -> Option<(Vec<JobState>, Vec<PlacedComparison>)> {
        let planned = self.last.as_ref()?;
        let kube = planned.kube();
        let api = kube.api()?;
        let known = match (&planned.world, just_planned) {
            (Some(world), true) => workloads_only(world),
            _ => KubeSnapshot::default(),
        };
        let snapshot = match read_kinds(api, &JOB_TIMELINE_KINDS, known).await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::debug!("job timeline unavailable: {e}");
                return None;
            }
        };
        let stack = &planned.plan.cluster.cluster;
        // The stack's jobs of every kind (RayJobs, JobSets, batch Jobs).
        let jobs: Vec<Value> = ["RayJob", "JobSet", "Job"]
            .iter()
            .flat_map(|kind| snapshot.kind(kind))
            .filter(|job| crate::kube::is_owned_by_stack(job, stack))
            .cloned()
            .collect();
        let capacity = Capacity {
            flavor_pools: timeline::flavor_pools(planned.desired.kube_objects()),
            pools: pool_sizes(&planned.desired.gke.node_pools, snapshot.kind("Node")),
        };
        let states = timeline::job_states(
            &jobs,
            snapshot.kind("Workload"),
            snapshot.kind("ProvisioningRequest"),
            &capacity,
            k8s_openapi::jiff::Timestamp::now(),
        );
        let comparisons = placed_comparisons(&jobs, snapshot.kind("Workload"), &self.records);
        Some((states, comparisons))
    }
}

/// Each node pool's autoscaling maximum and machine type (from the spec) and current node count
/// (from the Kubernetes Nodes labelled with it). The maximum is the whole pool's autoscaling
/// maximum, by the one rule (`model::gke::node_pool_limits`).
fn pool_sizes(pools: &[Value], nodes: &[Value]) -> BTreeMap<String, PoolSize> {
    let mut sizes: BTreeMap<String, PoolSize> = pools
        .iter()
        .filter_map(|pool| {
            let name = pool.get("name")?.as_str()?.to_string();
            let limits = node_pool_limits(pool);
            let max = limits
                .autoscaled
                .then(|| usize::try_from(limits.max).ok())
                .flatten();
            let machine_type = pool
                .pointer("/config/machineType")
                .and_then(Value::as_str)
                .map(str::to_string);
            Some((
                name,
                PoolSize {
                    nodes: 0,
                    max,
                    machine_type,
                },
            ))
        })
        .collect();
    for node in nodes {
        if let Some(pool) = node
            .pointer("/metadata/labels/cloud.google.com~1gke-nodepool")
            .and_then(Value::as_str)
        {
            sizes.entry(pool.to_string()).or_default().nodes += 1;
        }
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(path: &str, sha256: &str) -> FileDigest {
        FileDigest {
            path: path.into(),
            sha256: sha256.into(),
        }
    }

    /// What a drift tick that read a saved spec names as the change: the files whose hash
    /// differs, and files added or gone; nothing when the inputs are the same.
    #[test]
    fn changed_files_are_the_edited_added_and_removed_ones() {
        let before = [
            file("gkq.yaml", "a"),
            file("train.py", "b"),
            file("old.yaml", "c"),
        ];
        let now = [
            file("gkq.yaml", "a2"),
            file("train.py", "b"),
            file("new.yaml", "d"),
        ];
        assert_eq!(
            changed_files(&before, &now).into_iter().collect::<Vec<_>>(),
            ["gkq.yaml", "new.yaml", "old.yaml"]
        );
        assert!(changed_files(&before, &before).is_empty());
        let why =
            Trigger::Files(vec![Path::new("/w/gkq.yaml").to_path_buf()]).describe(Path::new("/w"));
        assert_eq!(why, "spec changed (gkq.yaml)");
    }

    /// The stuck checks learn how much a pool can ever hold: its machine type, and its maximum
    /// over every zone it runs in.
    #[test]
    fn pool_sizes_carry_machine_type_and_the_whole_pools_maximum() {
        let pools = [
            json!({"name": "tpu", "config": {"machineType": "ct6e-standard-4t"},
                "autoscaling": {"enabled": true, "maxNodeCount": 4}}),
            json!({"name": "wide", "config": {"machineType": "n2-standard-8"},
                "locations": ["us-east5-a", "us-east5-b"], "autoscaling": {"maxNodeCount": 3}}),
        ];
        let nodes = [json!({"metadata": {"labels": {"cloud.google.com/gke-nodepool": "tpu"}}})];
        let sizes = pool_sizes(&pools, &nodes);
        assert_eq!(
            sizes["tpu"],
            PoolSize {
                nodes: 1,
                max: Some(4),
                machine_type: Some("ct6e-standard-4t".into())
            }
        );
        assert_eq!(sizes["wide"].max, Some(6));
    }
}
