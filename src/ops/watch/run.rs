//! The event loop of a watch: the OS file watch, the drift and job timers, following a remote
//! branch, and the stop signal.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify_debouncer_full::notify::event::{AccessKind, AccessMode};
use notify_debouncer_full::notify::{EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::{mpsc, watch};

use super::{Trigger, WatchOptions, WatchSink, Watcher};
use crate::gitops::git;
use crate::gitops::watch::{PlanTracker, is_relevant};
use crate::plan::revision::PlacementRecords;

/// How long the debouncer waits for a burst of events (an editor's save) to settle.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// How often the debouncer checks whether a burst has settled.
const DEBOUNCE_TICK: Duration = Duration::from_millis(50);

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

impl Watcher<'_> {
    /// `git fetch`; a trigger when the branch moved to a new commit.
    pub(super) async fn poll_remote(&mut self) -> Option<Trigger> {
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
}
