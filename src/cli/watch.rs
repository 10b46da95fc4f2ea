//! `gkq watch`: re-plan when the spec changes, when live state drifts, or when a remote branch
//! moves; optionally apply; and follow each job's admission.
//!
//! Event driven, so an idle watch costs next to nothing: file events come from the OS (notify,
//! debounced by notify-debouncer-full, which also stitches an editor's write-then-rename into one
//! change), the drift check and `git fetch` run on a timer (`--interval`), and jobs are polled
//! only while some job has not finished. A plan is printed only when it differs from the last one
//! printed ([`Plan::fingerprint`](crate::plan::Plan::fingerprint)). Ctrl-C stops at once, also in
//! the middle of a plan; an apply in progress is interrupted between API calls, and its locks
//! are freed (the Lease expires).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use notify_debouncer_full::notify::event::{AccessKind, AccessMode};
use notify_debouncer_full::notify::{EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::gitops::LockArgs;
use super::output::stderr_color;
use super::plan::{PlanFlags, options};
use super::target::TargetArgs;
use super::{Exit, SpecArgs, load_valid};
use crate::gitops::git;
use crate::gitops::watch::{AutoApply, PlanTracker, auto_apply, is_relevant};
use crate::kube::{KubeApi, owned_selector};
use crate::ops::apply::{Consent, execute_on};
use crate::ops::lock::{acquire_lock, lock_local_state};
use crate::ops::plan::{Planned, plan_valid};
use crate::render::apply::TerminalSink;
use crate::report::timeline::{self, Capacity, PoolSize};
use crate::vocab::duration;

/// How long the debouncer waits for a burst of events (an editor's save) to settle.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// How often the debouncer checks whether a burst has settled.
const DEBOUNCE_TICK: Duration = Duration::from_millis(50);

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub flags: PlanFlags,
    /// Re-observe live state this often to catch drift (and fetch --git-remote): 30s, 5m, 1h.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration::parse_flag)]
    pub interval: Duration,
    /// Apply plans that only create or update resources, as they appear.
    #[arg(long)]
    pub apply: bool,
    /// With --apply, also apply plans that replace or delete resources.
    #[arg(long, requires = "apply")]
    pub allow_destructive: bool,
    /// With --apply, also apply plans that stop admitted or running jobs (a replaced job, a
    /// deleted queue or pool with admitted work).
    #[arg(long, requires = "apply")]
    pub allow_disruption: bool,
    /// Follow a remote branch instead of the working tree: run `git fetch NAME` every --interval
    /// and plan (or apply) each new commit of --branch.
    #[arg(
        long,
        value_name = "NAME",
        requires = "branch",
        conflicts_with = "git_ref"
    )]
    pub git_remote: Option<String>,
    /// The branch of --git-remote to follow.
    #[arg(long, value_name = "BRANCH", requires = "git_remote")]
    pub branch: Option<String>,
    /// While jobs are being admitted or run, read their state this often.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse_flag)]
    pub job_interval: Duration,
    /// With --apply: take over fields that another field manager owns.
    #[arg(long)]
    pub force_conflicts: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// Why a plan is being made.
enum Trigger {
    Start,
    Files(Vec<PathBuf>),
    Drift,
    Commit(String),
    Applied,
}

impl Trigger {
    fn describe(&self, spec_dir: &Path) -> String {
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

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%H:%M:%S")
        .to_string()
}

/// Prints to stdout and flushes, so that a pipe sees each event as it happens. A closed pipe is
/// not an error worth stopping for.
fn emit(text: &str) {
    let mut out = anstream::stdout();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

struct Watcher<'a> {
    args: &'a WatchArgs,
    spec_dir: PathBuf,
    tracker: PlanTracker,
    /// The last problem printed (invalid spec, failed plan or fetch), to print each one once.
    last_problem: Option<String>,
    /// The plan `--apply` held back last, by fingerprint, to say why once.
    last_hold: Option<String>,
    /// In `--git-remote` mode: the commit being followed.
    commit: Option<String>,
    /// The last plan, whose session and clients the job timeline reads through.
    last: Option<Planned>,
    job_lines: BTreeMap<String, String>,
    warned: BTreeSet<(String, String)>,
    jobs_in_flight: bool,
}

pub async fn run(args: &WatchArgs) -> anyhow::Result<Exit> {
    let spec_dir = git::spec_dir(&args.spec.spec);
    let spec_dir = spec_dir
        .canonicalize()
        .map_err(|e| anyhow::anyhow!("cannot watch {}: {e}", spec_dir.display()))?;
    let (stop_tx, mut stop) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    let (files_tx, mut files) = mpsc::channel::<Vec<PathBuf>>(16);
    // Kept alive for the length of the watch; dropping it stops the OS watch.
    let _debouncer = match &args.git_remote {
        Some(_) => None,
        None => Some(watch_files(&spec_dir, files_tx)?),
    };
    let mut watcher = Watcher {
        args,
        spec_dir,
        tracker: PlanTracker::default(),
        last_problem: None,
        last_hold: None,
        commit: None,
        last: None,
        job_lines: BTreeMap::new(),
        warned: BTreeSet::new(),
        jobs_in_flight: false,
    };
    eprintln!("{}", watcher.banner());

    let mut drift =
        tokio::time::interval_at(tokio::time::Instant::now() + args.interval, args.interval);
    drift.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut jobs = tokio::time::interval(args.job_interval);
    jobs.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let mut next = Some(match &args.git_remote {
        Some(_) => watcher.poll_remote().await.unwrap_or(Trigger::Start),
        None => Trigger::Start,
    });
    loop {
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
                next = Some(match &args.git_remote {
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
    eprintln!("Stopped watching.");
    Ok(Exit::Ok)
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

impl Watcher<'_> {
    fn banner(&self) -> String {
        let args = self.args;
        let source = match (&args.git_remote, &args.branch) {
            (Some(remote), Some(branch)) => format!(
                "following {remote}/{branch} (git fetch every {})",
                duration::human(args.interval)
            ),
            _ => format!(
                "re-planning when files in {} change",
                self.spec_dir.display()
            ),
        };
        let apply = match (args.apply, args.allow_destructive) {
            (false, _) => "plans only",
            (true, false) => "applies plans that only create or update",
            (true, true) => "applies every plan, replaces and deletes included",
        };
        format!(
            "Watching {}: {source}; drift check every {}; {apply}. Ctrl-C stops.",
            args.spec.spec.display(),
            duration::human(args.interval)
        )
    }

    fn spec_args(&self) -> SpecArgs {
        let mut spec = self.args.spec.clone();
        if let Some(commit) = &self.commit {
            spec.git_ref = Some(commit.clone());
        }
        spec
    }

    fn problem(&mut self, text: String) {
        if self.last_problem.as_deref() != Some(text.as_str()) {
            eprintln!("[{}] {text}", now());
            self.last_problem = Some(text);
        }
    }

    /// `git fetch`; a trigger when the branch moved to a new commit.
    async fn poll_remote(&mut self) -> Option<Trigger> {
        let (remote, branch) = (self.args.git_remote.as_ref()?, self.args.branch.as_ref()?);
        match git::fetch(&self.spec_dir, remote, branch).await {
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
                self.problem(format!("{e}"));
                None
            }
        }
    }

    /// Plans, prints the plan if it is new, applies it when allowed. Returns the next trigger
    /// (a re-plan after an apply).
    async fn cycle(&mut self, trigger: Trigger) -> Option<Trigger> {
        let spec = self.spec_args();
        let (ok, diags, sources) = load_valid(&spec);
        let Some((loaded, desired)) = ok else {
            let report = diags.report(&sources).render(stderr_color());
            self.problem(format!(
                "the spec is not valid; waiting for a fix:\n{report}"
            ));
            self.tracker.forget();
            return None;
        };
        let planned = match plan_valid(
            &spec.source(),
            loaded,
            desired,
            &self.args.target.options(),
            options(&self.args.flags),
        )
        .await
        {
            Ok(planned) => planned,
            Err(e) => {
                self.problem(format!("planning failed: {e:#}"));
                self.tracker.forget();
                return None;
            }
        };
        self.last_problem = None;
        if self.tracker.is_new(&planned.plan) {
            let mut text = format!(
                "── {} · {} · {}\n",
                now(),
                trigger.describe(&self.spec_dir),
                planned.plan.summary
            );
            if planned.plan.has_changes() {
                // anstream drops the colours when stdout is not a terminal or NO_COLOR is set.
                text.push_str(&crate::render::plan::to_text(&planned.plan, true));
            }
            emit(&text);
        } else {
            tracing::debug!("{}: plan unchanged", trigger.describe(&self.spec_dir));
        }
        let mut next = None;
        if self.args.apply {
            match auto_apply(
                &planned.plan,
                self.args.allow_destructive,
                self.args.allow_disruption,
            ) {
                AutoApply::UpToDate => {}
                AutoApply::Hold(reason) => {
                    let fingerprint = planned.plan.fingerprint();
                    if self.last_hold.as_deref() != Some(fingerprint.as_str()) {
                        emit(&format!("[{}] {reason}\n", now()));
                        self.last_hold = Some(fingerprint);
                    }
                }
                AutoApply::Apply => {
                    // Release the clients (and the local target's emulator) before locking.
                    self.last = None;
                    drop(planned);
                    self.apply_now().await;
                    next = Some(Trigger::Applied);
                    self.job_lines.clear();
                    return next;
                }
            }
        }
        self.last = Some(planned);
        self.refresh_jobs(true).await;
        next
    }

    /// Locks, plans again from fresh state (the local target reads its world when it connects),
    /// and applies if the plan is still one watch may apply.
    async fn apply_now(&mut self) {
        let spec = self.spec_args();
        let args = self.args;
        let (ok, _, _) = load_valid(&spec);
        let Some((loaded, desired)) = ok else {
            return;
        };
        let target = args.target.options();
        let local = match lock_local_state(&loaded, &target, args.lock.lock_timeout).await {
            Ok(lock) => lock,
            Err(e) => return self.problem(format!("not applying: {e:#}")),
        };
        let planned = match plan_valid(
            &spec.source(),
            loaded,
            desired,
            &target,
            options(&args.flags),
        )
        .await
        {
            Ok(planned) => planned,
            Err(e) => return self.problem(format!("planning failed: {e:#}")),
        };
        if auto_apply(&planned.plan, args.allow_destructive, args.allow_disruption)
            != AutoApply::Apply
        {
            return;
        }
        let held = match acquire_lock(
            &planned.session,
            planned.kube_client.as_ref(),
            &planned.plan.cluster.cluster,
            args.lock.lock_timeout,
        )
        .await
        {
            Ok(held) => held,
            Err(e) => return self.problem(format!("not applying: {e:#}")),
        };
        emit(&format!("[{}] applying: {}\n", now(), planned.plan.summary));
        let target = planned.apply_target();
        let consent = Consent {
            force_conflicts: args.force_conflicts,
            allow_disruption: args.allow_disruption,
        };
        match execute_on(&target, &TerminalSink::stderr(), &consent).await {
            Ok(report) if report.is_success() => {
                planned.record_applied().await;
                emit(&format!("[{}] applied\n", now()));
            }
            Ok(report) => {
                let failed = report.failures().count();
                emit(&format!(
                    "[{}] apply incomplete: {failed} action(s) failed; watch retries when the spec or live state changes\n",
                    now()
                ));
            }
            Err(stale) => emit(&format!("[{}] not applied: {stale}\n", now())),
        }
        held.release().await;
        if let Some(local) = local {
            local.release().await;
        }
    }

    /// Reads the jobs' Kueue and KubeRay state and prints each job whose stage changed, and each
    /// stuck state once. `just_planned`: the last plan was made just now, so the Workloads it read
    /// are current and are not read again; between plans they are read afresh.
    async fn refresh_jobs(&mut self, just_planned: bool) {
        let Some(planned) = &self.last else {
            self.jobs_in_flight = false;
            return;
        };
        let kube = planned.kube();
        let Some(api) = kube.api() else {
            self.jobs_in_flight = false;
            return;
        };
        let stack = planned.plan.cluster.cluster.clone();
        let planned_workloads = planned.workloads.as_deref().filter(|_| just_planned);
        let snapshot = match read_jobs(api, &stack, planned_workloads).await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::debug!("job timeline unavailable: {e}");
                self.jobs_in_flight = false;
                return;
            }
        };
        let capacity = Capacity {
            flavor_pools: timeline::flavor_pools(&planned.desired.kubernetes),
            pools: pool_sizes(&planned.desired.gke.node_pools, &snapshot.nodes),
        };
        let states = timeline::job_states(
            &snapshot.rayjobs,
            &snapshot.workloads,
            &snapshot.requests,
            &capacity,
            k8s_openapi::jiff::Timestamp::now(),
        );
        let mut text = String::new();
        for state in &states {
            let line = state.stage.to_string();
            if self.job_lines.get(&state.job) != Some(&line) {
                text.push_str(&format!("[{}] job {}: {line}\n", now(), state.job));
                self.job_lines.insert(state.job.clone(), line.clone());
            }
            if let Some(warning) = &state.warning
                && self.warned.insert((state.job.clone(), line))
            {
                text.push_str(&format!(
                    "[{}] job {}: stuck? {warning}\n",
                    now(),
                    state.job
                ));
            }
        }
        if !text.is_empty() {
            emit(&text);
        }
        self.jobs_in_flight = states.iter().any(|s| !s.stage.is_finished());
    }
}

struct JobSnapshot {
    rayjobs: Vec<Value>,
    workloads: Vec<Value>,
    requests: Vec<Value>,
    nodes: Vec<Value>,
}

async fn list_kind(
    api: &dyn KubeApi,
    api_version: &str,
    kind: &str,
    selector: &str,
) -> crate::kube::KubeResult<Vec<Value>> {
    match api.resource(api_version, kind).await? {
        Some(info) => api.list(&info, selector).await,
        None => Ok(Vec::new()),
    }
}

/// The stack's jobs (RayJobs, JobSets, batch Jobs) and what their timelines need; `workloads`,
/// when given, are used rather than listed again.
async fn read_jobs(
    api: &dyn KubeApi,
    stack: &str,
    workloads: Option<&[Value]>,
) -> crate::kube::KubeResult<JobSnapshot> {
    let mut rayjobs = Vec::new();
    for (api_version, kind) in [
        ("ray.io/v1", "RayJob"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("batch/v1", "Job"),
    ] {
        rayjobs.extend(list_kind(api, api_version, kind, &owned_selector(stack)).await?);
    }
    if rayjobs.is_empty() {
        return Ok(JobSnapshot {
            rayjobs,
            workloads: Vec::new(),
            requests: Vec::new(),
            nodes: Vec::new(),
        });
    }
    Ok(JobSnapshot {
        workloads: match workloads {
            Some(workloads) => workloads.to_vec(),
            None => list_kind(api, "kueue.x-k8s.io/v1beta2", "Workload", "").await?,
        },
        requests: list_kind(api, "autoscaling.x-k8s.io/v1", "ProvisioningRequest", "").await?,
        nodes: list_kind(api, "v1", "Node", crate::vocab::labels::NODE_POOL_LABEL).await?,
        rayjobs,
    })
}

/// Each node pool's autoscaling maximum and machine type (from the spec) and current node count
/// (from the Kubernetes Nodes labelled with it). The maximum is for the whole pool: GKE's
/// `maxNodeCount` is per zone, so it counts once per zone the pool names.
fn pool_sizes(pools: &[Value], nodes: &[Value]) -> BTreeMap<String, PoolSize> {
    let mut sizes: BTreeMap<String, PoolSize> = pools
        .iter()
        .filter_map(|pool| {
            let name = pool.get("name")?.as_str()?.to_string();
            let zones = pool
                .get("locations")
                .and_then(Value::as_array)
                .map_or(1, |l| l.len().max(1));
            let max = pool
                .pointer("/autoscaling/totalMaxNodeCount")
                .and_then(Value::as_u64)
                .or_else(|| {
                    pool.pointer("/autoscaling/maxNodeCount")
                        .and_then(Value::as_u64)
                        .map(|m| m.saturating_mul(zones as u64))
                })
                .and_then(|m| usize::try_from(m).ok());
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
