//! The executor: walks a [`Plan`] and makes it so.
//!
//! - It executes exactly the plan's actions, in the plan's order, and never starts an action
//!   before the actions it depends on have finished. Before the walk it reads the Kubernetes
//!   targets again, one list per kind ([`Checked`]), and compares each fingerprint with the one
//!   the plan recorded; a changed target is refused as stale ("plan again"), never acted on
//!   blindly. Each Kubernetes write is conditional on the version the check read (the
//!   `resourceVersion` of a server-side apply, the uid and `resourceVersion` preconditions of a
//!   delete); a write refused because its target moved on since re-reads that one object and
//!   decides by the same fingerprint: still as planned, it is sent again at the new version;
//!   otherwise the action is stale. GKE actions read the cluster before each action.
//! - Independent Kubernetes actions run concurrently, bounded: a run of consecutive Kubernetes
//!   actions in the plan, none depending on another in the run and all of them deletes or none,
//!   is started in plan order with at most [`KUBE_CONCURRENCY`] in flight (see
//!   [`Executor::with_kube_concurrency`]). Thousands of objects then take seconds, not minutes.
//!   Results are reported in plan order.
//! - GKE calls run one at a time, and each long-running operation is polled to the end (with
//!   backoff) before the next call: GKE allows one operation per cluster. A call refused because
//!   the cluster is busy (`GkeError::ClusterBusy`: another operation runs, often GKE's own
//!   auto-upgrade) waits for that operation and is retried; it is not a failure.
//! - A failed action (a stockout, a quota, a refused request) is reported with GKE's message,
//!   the resource address and a hint; the walk goes on with actions that do not depend on it, and
//!   skips (and reports) those that do. A failed *update* does not skip dependents: the resource
//!   is still there, as it was.
//! - Blocked actions (missing consent or ownership) are refused.
//! - Kubernetes steps go to a [`KubeApplier`], the Kubernetes half's extension point. Without one,
//!   Kubernetes actions fail with a clear message.
//! - An [`Interrupt`] (Ctrl-C in `gkq apply`) stops the walk: no new action starts, Kubernetes
//!   calls in flight finish, and a GKE operation being waited for is reported as still running
//!   (GKE goes on with it; the next plan shows where it got to). Actions not started are
//!   [`Outcome::Interrupted`].
//!
//! - [`Executor::verify`] checks the whole plan before anything runs: a plan whose targets moved
//!   is refused as a whole, naming each one (saved plans are applied this way), and
//!   [`Executor::apply_checked`] then walks it with the versions the check read.
//!
//! Progress goes to a [`Sink`] as [`ApplyEvent`]s; the executor never prints.

pub mod events;
mod gke;
mod kube;
pub mod kube_adapter;
mod verify;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::addr::ResourceAddr;
use crate::gke::{GkeApi, GkeError};
use crate::plan::{Action, ActionKind, Plan};

pub use crate::gke::PollConfig;
pub use crate::interrupt::Interrupt;
pub use events::{ApplyEvent, FanOut, NullSink, RecordingSink, Sink};
pub use kube::{KubeApplier, KubeApplyError, Wakes};
pub use verify::{Checked, VerifyError};

/// Most Kubernetes actions in flight at once, unless [`Executor::with_kube_concurrency`] says
/// otherwise. Far below the API server's in-flight limits (200 mutating requests by default).
pub const KUBE_CONCURRENCY: usize = 16;

/// Why an action did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The target changed between plan and apply.
    #[error("{addr}: {detail}")]
    Stale { addr: ResourceAddr, detail: String },
    /// The plan marked the action as needing consent or ownership gkq does not have.
    #[error("{addr} was not changed: {reason}")]
    Blocked { addr: ResourceAddr, reason: String },
    /// A GKE operation finished with an error (stockouts and most capacity problems arrive so).
    #[error(
        "{addr}: {step} failed: operation {operation} ({operation_type}) ended with: {message}"
    )]
    OperationFailed {
        addr: ResourceAddr,
        step: String,
        operation: String,
        operation_type: String,
        message: String,
    },
    /// A GKE call was refused (quota, permission, bad request, transport).
    #[error("{addr}: {step} failed: {source}")]
    Gke {
        addr: ResourceAddr,
        step: String,
        #[source]
        source: GkeError,
    },
    #[error("{addr}: {what} did not finish within {waited:?}")]
    Timeout {
        addr: ResourceAddr,
        what: String,
        waited: Duration,
    },
    /// The apply was interrupted while this action ran (a GKE operation goes on without us).
    #[error("{addr}: interrupted: {detail}")]
    Interrupted { addr: ResourceAddr, detail: String },
    #[error("{addr}: Kubernetes changes cannot be applied: no Kubernetes client is configured")]
    KubeUnavailable { addr: ResourceAddr },
    #[error("{addr}: {step} failed: {source}")]
    Kube {
        addr: ResourceAddr,
        step: String,
        #[source]
        source: KubeApplyError,
    },
}

impl ApplyError {
    /// What the user can do about it, when gkq can tell.
    pub fn hint(&self) -> Option<String> {
        match self {
            ApplyError::Stale { .. } => {
                Some("Someone or something changed it after the plan was made. Run `gkq plan` again to see the change and plan from what is there now.".to_string())
            }
            ApplyError::OperationFailed { addr, message, .. } => hint_for(addr, message),
            // The GKE client classifies its own errors; gkq's reading of the message is the fallback.
            ApplyError::Gke { addr, source, .. } => source
                .hint()
                .map(str::to_string)
                .or_else(|| hint_for(addr, &source.to_string())),
            ApplyError::Kube { source, .. } => source.hint.clone(),
            ApplyError::KubeUnavailable { .. } => {
                Some("Kubernetes objects need the Kubernetes half of gkq; apply the GKE part alone for now.".into())
            }
            ApplyError::Interrupted { .. } => Some(
                "GKE finishes the operation on its own. Run `gkq plan` to see where it got to, then `gkq apply` for the rest."
                    .to_string(),
            ),
            ApplyError::Blocked { .. } | ApplyError::Timeout { .. } => None,
        }
    }
}

/// Recognises GKE's capacity, quota and known-rejection messages and says what to do.
pub fn hint_for(addr: &ResourceAddr, message: &str) -> Option<String> {
    let lower = message.to_ascii_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if any(&[
        "stockout",
        "zone_resource_pool_exhausted",
        "does not have enough resources",
        "lack of capacity",
        "requested resource is exhausted",
        "resource pool exhausted",
    ]) {
        return Some(format!(
            "The zone has no capacity for {addr} right now (a stockout). Try again later (the next apply \
             recreates a pool a failed create left behind), choose another zone, or let jobs fall back to \
             the DWS flex-start pool, whose queued provisioning waits for capacity."
        ));
    }
    if any(&["quota"]) {
        return Some(format!(
            "A quota is too small for {addr}. Request more in the Cloud console (IAM & Admin > Quotas) for \
             this region, or make the pool smaller."
        ));
    }
    if any(&["flex start node pools don't support tpus with queued provisioning"]) {
        return Some(
            "This GKE version rejects TPU flex-start together with queued provisioning. Use a GKE version \
             that supports it (v6e and later, early 2026), or drop one of the two from the pool."
                .to_string(),
        );
    }
    if any(&["auto_repair cannot be false"]) {
        return Some(
            "Flex-start pools need auto-repair off, which this cluster's release channel forbids. Move the \
             cluster to a channel that allows it, or drop flex-start."
                .to_string(),
        );
    }
    None
}

/// Options for one apply.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyOptions {
    pub poll: PollConfig,
    /// After creating a job Kueue queues, how long to wait for Kueue's decision on it before
    /// the next job is submitted (`--submit-wait`).
    pub submit_wait: Duration,
}

/// How long an apply waits, by default, for Kueue's decision on each job it submits.
pub const DEFAULT_SUBMIT_WAIT: Duration = Duration::from_secs(30);

impl Default for ApplyOptions {
    /// An apply gives up on one operation, or on a busy cluster, after an hour: a person is
    /// usually watching, and the next plan shows where GKE got to.
    fn default() -> Self {
        let hour = Duration::from_secs(60 * 60);
        ApplyOptions {
            poll: PollConfig {
                timeout: hour,
                busy_timeout: hour,
                ..PollConfig::default()
            },
            submit_wait: DEFAULT_SUBMIT_WAIT,
        }
    }
}

/// How one action ended.
#[derive(Debug)]
pub enum Outcome {
    Succeeded,
    /// A no-op: nothing to do.
    Unchanged,
    Failed(ApplyError),
    /// Not attempted because `because` did not succeed.
    Skipped {
        because: ResourceAddr,
    },
    /// Not attempted because the apply was interrupted first.
    Interrupted,
}

#[derive(Debug)]
pub struct ActionResult {
    pub addr: ResourceAddr,
    pub kind: ActionKind,
    pub outcome: Outcome,
}

/// Every action's outcome, in plan order.
#[derive(Debug, Default)]
pub struct ApplyReport {
    pub results: Vec<ActionResult>,
}

impl ApplyReport {
    pub fn is_success(&self) -> bool {
        self.results
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Succeeded | Outcome::Unchanged))
    }

    /// Whether the apply was interrupted (Ctrl-C) before it could finish.
    pub fn interrupted(&self) -> bool {
        self.results.iter().any(|r| {
            matches!(
                r.outcome,
                Outcome::Interrupted | Outcome::Failed(ApplyError::Interrupted { .. })
            )
        })
    }

    pub fn failures(&self) -> impl Iterator<Item = (&ResourceAddr, &ApplyError)> {
        self.results.iter().filter_map(|r| match &r.outcome {
            Outcome::Failed(error) => Some((&r.addr, error)),
            _ => None,
        })
    }

    pub fn outcome(&self, addr: &ResourceAddr) -> Option<&Outcome> {
        self.results
            .iter()
            .find(|r| &r.addr == addr)
            .map(|r| &r.outcome)
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.results.iter().filter(|r| f(&r.outcome)).count()
    }
}

/// Applies plans against a GKE API (the real one, the emulator, or a test fake) and, when given,
/// a Kubernetes applier.
pub struct Executor<'a> {
    gke: &'a dyn GkeApi,
    kube: Option<&'a dyn KubeApplier>,
    sink: &'a dyn Sink,
    options: ApplyOptions,
    kube_concurrency: usize,
    interrupt: Option<&'a Interrupt>,
}

impl<'a> Executor<'a> {
    pub fn new(gke: &'a dyn GkeApi, sink: &'a dyn Sink) -> Self {
        Executor {
            gke,
            kube: None,
            sink,
            options: ApplyOptions::default(),
            kube_concurrency: KUBE_CONCURRENCY,
            interrupt: None,
        }
    }

    /// At most `limit` independent Kubernetes actions in flight at once (1: one at a time).
    pub fn with_kube_concurrency(mut self, limit: usize) -> Self {
        self.kube_concurrency = limit.max(1);
        self
    }

    /// Stop when `interrupt` is triggered; see the module docs.
    pub fn with_interrupt(mut self, interrupt: &'a Interrupt) -> Self {
        self.interrupt = Some(interrupt);
        self
    }

    fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(Interrupt::is_set)
    }

    /// Sleeps for `delay`; `true` if the apply was interrupted meanwhile (it returns at once then).
    async fn pause(&self, delay: Duration) -> bool {
        Interrupt::sleep(self.interrupt, delay).await
    }

    /// Whether `action` may run concurrently with its neighbours: a Kubernetes change. Jobs
    /// queued in Kueue are submitted one after another, in spec order: Kueue admits in creation
    /// order, so job 1 must exist before job 2 for it to get Plan A (the guide submits them two
    /// seconds apart). Edits of existing jobs, deletes and jobs outside Kueue have no such order.
    fn concurrent(&self, action: &Action) -> bool {
        self.kube.is_some()
            && self.kube_concurrency > 1
            && !submits_to_kueue(action)
            && action.kind.is_change()
            && !action.steps.is_empty()
            && !action.steps.iter().all(|s| s.is_gke())
    }

    /// The actions that run together from `start`: positions in the plan, and where the next
    /// batch starts. A batch is one action, or a run of consecutive Kubernetes actions none of
    /// which depends on another in the run, all deletes or none (deletes come after everything
    /// else and in reverse order; that order is kept between the two phases). No-ops ride along.
    fn batch(&self, plan: &Plan, start: usize) -> (Vec<usize>, usize) {
        let actions = &plan.actions;
        let first = &actions[start];
        if !self.concurrent(first) {
            return (vec![start], start + 1);
        }
        let deleting = first.kind == ActionKind::Delete;
        let mut members: BTreeSet<&ResourceAddr> = BTreeSet::from([&first.addr]);
        let mut batch = vec![start];
        let mut end = start + 1;
        while let Some(action) = actions.get(end) {
            if action.kind.is_change() {
                if !self.concurrent(action)
                    || (action.kind == ActionKind::Delete) != deleting
                    || action.depends_on.iter().any(|d| members.contains(d))
                {
                    break;
                }
                members.insert(&action.addr);
            }
            batch.push(end);
            end += 1;
        }
        (batch, end)
    }

    pub fn with_kube(mut self, kube: &'a dyn KubeApplier) -> Self {
        self.kube = Some(kube);
        self
    }

    pub fn with_options(mut self, options: ApplyOptions) -> Self {
        self.options = options;
        self
    }

    /// Checks the plan's Kubernetes targets (an action whose target moved fails as stale, the
    /// others go on) and walks it; see the module docs. Never panics on API answers; every
    /// failure is in the report and in a `ActionFailed` event.
    pub async fn apply(&self, plan: &Plan) -> ApplyReport {
        let checked = self.check(plan).await;
        self.apply_checked(plan, &checked).await
    }

    /// The Kubernetes half of [`Executor::verify`], refusing nothing as a whole: when the cluster
    /// cannot be read, it is taken to exist, and the Kubernetes API's answers decide.
    async fn check(&self, plan: &Plan) -> Checked {
        if self.kube.is_none() || plan.actions.iter().all(|a| a.addr.kind.is_gke()) {
            return Checked::default();
        }
        let exists = gke::settled_cluster(self, plan)
            .await
            .map_or(true, |cluster| cluster.is_some());
        self.check_kube(plan, exists).await
    }

    /// Walks a plan [`Executor::verify`] checked, each Kubernetes write conditional on the
    /// version `checked` read; see the module docs.
    pub async fn apply_checked(&self, plan: &Plan, checked: &Checked) -> ApplyReport {
        let started = Instant::now();
        self.sink.emit(&ApplyEvent::ApplyStarted {
            changes: plan.changes().count(),
        });
        let mut report = ApplyReport::default();
        // Whether each resource is there for its dependents. A failed or refused *update* leaves
        // the resource as it was, still there, so what depends on it goes on; a failed create,
        // replace or delete may leave it missing (or still referenced), so dependents are skipped.
        let mut usable: BTreeMap<ResourceAddr, bool> = BTreeMap::new();
        // The jobs submitted to Kueue one after another: their positions in the plan.
        let submissions: Vec<usize> = (0..plan.actions.len())
            .filter(|&i| submits_to_kueue(&plan.actions[i]))
            .collect();
        let submission = |i: usize| {
            submissions.binary_search(&i).ok().map(|n| Submission {
                job: n + 1,
                jobs: submissions.len(),
            })
        };
        let mut next = 0;
        while next < plan.actions.len() {
            let (batch, end) = self.batch(plan, next);
            // A no-op is always there for its dependents, which may share its batch.
            for &i in &batch {
                let action = &plan.actions[i];
                if !action.kind.is_change() {
                    usable.insert(action.addr.clone(), true);
                }
            }
            let outcomes: Vec<(usize, Outcome)> = if batch.len() == 1 {
                vec![(
                    next,
                    self.run(
                        plan,
                        &plan.actions[next],
                        &usable,
                        checked,
                        submission(next),
                    )
                    .await,
                )]
            } else {
                let usable = &usable;
                let mut done: Vec<(usize, Outcome)> =
                    futures::stream::iter(batch.iter().map(|&i| async move {
                        let run = self.run(plan, &plan.actions[i], usable, checked, None);
                        (i, run.await)
                    }))
                    .buffer_unordered(self.kube_concurrency)
                    .collect()
                    .await;
                done.sort_by_key(|(i, _)| *i);
                done
            };
            for (i, outcome) in outcomes {
                let action = &plan.actions[i];
                let ok = matches!(outcome, Outcome::Succeeded | Outcome::Unchanged);
                usable.insert(action.addr.clone(), ok || action.kind == ActionKind::Update);
                report.results.push(ActionResult {
                    addr: action.addr.clone(),
                    kind: action.kind,
                    outcome,
                });
            }
            next = end;
        }
        self.sink.emit(&ApplyEvent::ApplyFinished {
            succeeded: report.count(|o| matches!(o, Outcome::Succeeded)),
            failed: report.count(|o| matches!(o, Outcome::Failed(_))),
            skipped: report.count(|o| matches!(o, Outcome::Skipped { .. } | Outcome::Interrupted)),
            elapsed_ms: millis(started.elapsed()),
        });
        report
    }

    async fn run(
        &self,
        plan: &Plan,
        action: &Action,
        usable: &BTreeMap<ResourceAddr, bool>,
        checked: &Checked,
        submission: Option<Submission>,
    ) -> Outcome {
        if !action.kind.is_change() {
            return Outcome::Unchanged;
        }
        if self.interrupted() {
            self.sink.emit(&ApplyEvent::ActionSkipped {
                addr: action.addr.clone(),
                kind: action.kind,
                reason: "the apply was interrupted before it started".to_string(),
            });
            return Outcome::Interrupted;
        }
        // A dependency that has not run means the plan is out of order, which `plan()` never
        // produces; treat it like a failed dependency rather than guess.
        if let Some(dependency) = action
            .depends_on
            .iter()
            .find(|d| usable.get(*d) != Some(&true))
        {
            self.sink.emit(&ApplyEvent::ActionSkipped {
                addr: action.addr.clone(),
                kind: action.kind,
                reason: format!("{dependency} did not succeed"),
            });
            return Outcome::Skipped {
                because: dependency.clone(),
            };
        }
        let started = Instant::now();
        // A sensitive action's real values: in memory when the plan was made in this process.
        let opened = match plan.sealed.open(action) {
            Ok(opened) => opened,
            Err(missing) => {
                let error = ApplyError::Blocked {
                    addr: action.addr.clone(),
                    reason: missing.to_string(),
                };
                self.sink.emit(&ApplyEvent::ActionFailed {
                    addr: action.addr.clone(),
                    kind: action.kind,
                    error: error.to_string(),
                    hint: error.hint(),
                });
                return Outcome::Failed(error);
            }
        };
        let action = opened.as_ref();
        let result = match &action.blocked {
            Some(reason) => Err(Box::new(ApplyError::Blocked {
                addr: action.addr.clone(),
                reason: reason.clone(),
            })),
            None => {
                self.sink.emit(&ApplyEvent::ActionStarted {
                    addr: action.addr.clone(),
                    kind: action.kind,
                    reason: action.reason.clone(),
                });
                if action.steps.iter().all(|s| s.is_gke()) {
                    gke::run_action(self, plan, action).await
                } else {
                    kube::run_action(self, action, checked, submission).await
                }
            }
        };
        match result {
            Ok(()) => {
                self.sink.emit(&ApplyEvent::ActionFinished {
                    addr: action.addr.clone(),
                    kind: action.kind,
                    elapsed_ms: millis(started.elapsed()),
                });
                Outcome::Succeeded
            }
            Err(error) => {
                self.sink.emit(&ApplyEvent::ActionFailed {
                    addr: action.addr.clone(),
                    kind: action.kind,
                    error: error.to_string(),
                    hint: error.hint(),
                });
                Outcome::Failed(*error)
            }
        }
    }
}

/// What running one action gives: boxed, because `ApplyError` carries addresses and messages and
/// is large, and the happy path should not pay for it.
type ActionResultOf = Result<(), Box<ApplyError>>;

/// The staleness check shared by GKE and Kubernetes actions: does the target still look as it did
/// in what the action depends on (see [`crate::diff::fingerprint::fingerprint`])? A refusal names the
/// fields that changed.
fn check_fresh(action: &Action, live: Option<&serde_json::Value>) -> ActionResultOf {
    match stale_detail(action, live) {
        None => Ok(()),
        Some(detail) => Err(Box::new(ApplyError::Stale {
            addr: action.addr.clone(),
            detail,
        })),
    }
}

/// What moved, when `live` is not what `action` was planned against (see [`check_fresh`]).
fn stale_detail(action: &Action, live: Option<&serde_json::Value>) -> Option<String> {
    match (&action.live_fingerprint, live) {
        (None, None) => None,
        (None, Some(_)) => Some("created by someone else since the plan was made".into()),
        (Some(_), None) => Some("deleted since the plan was made".into()),
        (Some(planned), Some(live)) => {
            let desired = match action.kind {
                ActionKind::Delete => None,
                _ => action.desired.as_deref(),
            };
            let now = crate::diff::fingerprint::fingerprint(&action.addr, desired, live);
            if &now == planned {
                return None;
            }
            let fields = crate::diff::fingerprint::changed_fields(
                &action.live_fields,
                &crate::diff::fingerprint::fingerprint_fields(&action.addr, desired, live),
            );
            Some(if fields.is_empty() {
                format!("changed since the plan was made (fingerprint {planned} is now {now})")
            } else if action.kind == ActionKind::Delete {
                format!(
                    "deleted and recreated, or its ownership labels edited, since the plan was made ({} changed)",
                    fields.join(", ")
                )
            } else {
                format!("{} changed since the plan was made", fields.join(", "))
            })
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Which of the jobs an apply submits to Kueue, one after another, an action creates.
#[derive(Debug, Clone, Copy)]
struct Submission {
    /// 1 for the first.
    job: usize,
    jobs: usize,
}

/// A job creation Kueue will queue: its order among the others decides who gets Plan A.
fn submits_to_kueue(action: &Action) -> bool {
    matches!(action.kind, ActionKind::Create | ActionKind::Replace)
        && action
            .desired
            .as_deref()
            .is_some_and(crate::model::jobs::queued_by_kueue)
}
