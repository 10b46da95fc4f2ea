//! One stack's reconcile: fetch its repository, validate, plan, and apply, hold or refuse the
//! plan ([`super::decide`]), then write what happened to the stack's status, Events and metrics.
//! Everything here goes through the `ops` calls every command uses.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::crd::{APPROVE_ANNOTATION, FINALIZER, GkqStack, GkqStackStatus, REQUESTED_ANNOTATION};
use super::decide::{
    Decision, apply_lock_holder, decide, decide_deletion, due, kstatus, redact, set_condition,
};
use super::metrics::Metrics;
use super::source;
use super::source_check;
use super::store::{Severity, StackStore};
use crate::addr::ClusterRef;
use crate::gke::WorkloadIdentity;
use crate::kube::token_request::ServiceAccountTokens;
use crate::model::workload_identity::{gke_builtin_audience, parse_service_account_user};
use crate::ops::apply::Consent;
use crate::ops::converge::{
    self, Applied, ApplyChoices, ApplyFront, ConvergeError, PlanSource, Ready,
};
use crate::ops::load::{SpecSource, load_valid};
use crate::ops::lock::{LockHolder, Superseded};
use crate::ops::plan::Planned;
use crate::ops::session::TargetOptions;
use crate::ops::{ApplyEvent, Sink};
use crate::plan::{ActionKind, Plan, PlanOptions};

/// Whether this replica may act: it holds the leader Lease (or the local state lock).
pub trait Leadership: Send + Sync {
    fn is_leading(&self) -> bool;
    /// Whether this replica leads and the replica that holds a cluster's apply Lease as
    /// `apply_lock_holder` led before it (so it has stopped acting).
    fn supersedes(&self, _apply_lock_holder: &str) -> bool {
        false
    }
}

/// What every reconcile shares.
pub struct Context {
    pub store: Arc<dyn StackStore>,
    pub target: TargetOptions,
    /// Where each stack's repository is checked out (`<work dir>/<namespace>/<name>`).
    pub work_dir: PathBuf,
    /// The cluster the agent runs in, which it never deletes.
    pub own_cluster: Option<ClusterRef>,
    pub metrics: Arc<Metrics>,
    pub leadership: Arc<dyn Leadership>,
    /// How long an apply waits for the cluster's apply Lease.
    pub lock_timeout: Duration,
    /// Whether stacks may follow `file://` repositories (`--target local`, `--allow-file-urls`).
    pub allow_file_urls: bool,
    /// The ServiceAccount a stack without `serviceAccountName` acts as (`None`: the agent's own
    /// rights, a single-team install).
    pub default_service_account: Option<String>,
    /// The shortest `spec.interval` run (`--min-interval`).
    pub min_interval: Duration,
    /// How long each job an apply submits waits for Kueue's decision (`--submit-wait`).
    pub submit_wait: Duration,
    /// The management cluster's client, which requests the tokens of stacks' ServiceAccounts
    /// (TokenRequest) for their Google identity; `None` where stacks are not kept in one.
    pub token_requests: Option<kube::Client>,
    /// The STS audience those tokens are exchanged for (`--workload-identity-audience`, else
    /// GKE's built-in pool of the agent's own cluster).
    pub workload_identity_audience: Option<String>,
    /// Each ServiceAccount's Google identity, kept between reconciles with its cached token.
    identities: Mutex<BTreeMap<String, Arc<WorkloadIdentity>>>,
    /// This replica's name: it holds clusters' apply Leases as [`apply_lock_holder`] of it.
    pub identity: String,
    /// Set when the agent stops: running applies stop between actions and release their locks.
    pub interrupt: crate::interrupt::Interrupt,
    pub stacks: Mutex<BTreeMap<String, StackState>>,
    started: Instant,
}

/// What the agent remembers of a stack between reconciles.
#[derive(Debug, Default, Clone)]
pub struct StackState {
    /// When it was last fetched and planned (milliseconds since the agent started).
    last_run: Option<u64>,
    /// A webhook asked for a fetch now.
    pub forced: bool,
    /// The approval annotation and generation seen at the last run: a change is worth a run.
    approval: Option<String>,
    requested: Option<String>,
    generation: Option<i64>,
    /// The held digest an Event was recorded for (one Event per held plan).
    held_told: Option<String>,
    /// The last plan, when it changed nothing: what it was of and what it read.
    unchanged: Option<Unchanged>,
    /// The current run found its commit and live state as that plan left them, and did not
    /// plan again: its status is the stack's own.
    skipped: bool,
}

/// A plan without changes: of which commit, and what it read of live state. A later run of the
/// same commit whose live state still reads the same need not plan again (nothing would
/// differ); a webhook, a changed spec, approval or reconcile request plans again regardless.
#[derive(Debug, Clone)]
struct Unchanged {
    commit: String,
    reads: crate::ops::plan::PlanReads,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("writing the status of {stack}: {message}")]
    Status { stack: String, message: String },
    #[error("the reconcile of {stack} stopped: {message}")]
    Stopped { stack: String, message: String },
}

impl Context {
    pub fn new(
        store: Arc<dyn StackStore>,
        target: TargetOptions,
        work_dir: PathBuf,
        own_cluster: Option<ClusterRef>,
        metrics: Arc<Metrics>,
        leadership: Arc<dyn Leadership>,
    ) -> Self {
        Context {
            store,
            target,
            work_dir,
            own_cluster,
            metrics,
            leadership,
            lock_timeout: Duration::from_secs(120),
            allow_file_urls: false,
            default_service_account: None,
            min_interval: DEFAULT_MIN_INTERVAL,
            submit_wait: crate::ops::DEFAULT_SUBMIT_WAIT,
            token_requests: None,
            workload_identity_audience: None,
            identities: Mutex::new(BTreeMap::new()),
            identity: crate::ops::lock::holder_identity(),
            interrupt: Default::default(),
            stacks: Mutex::new(BTreeMap::new()),
            started: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Who holds a cluster's apply Lease for the stack `key`: this replica, taking over at once
    /// the Leases of replicas that led before it.
    fn lock_holder(&self, key: &str) -> LockHolder {
        let leadership = self.leadership.clone();
        LockHolder {
            identity: apply_lock_holder(&self.identity, key),
            superseded: Some(Superseded(Arc::new(move |holder: &str| {
                leadership.supersedes(holder)
            }))),
        }
    }

    /// The Google identity of the ServiceAccount `user` (`system:serviceaccount:NS:NAME`): its
    /// TokenRequest tokens exchanged at the Security Token Service. Never the agent's own: when
    /// it cannot be had, the stack makes no Google call.
    fn workload_identity(&self, user: &str) -> Result<Arc<WorkloadIdentity>, String> {
        let mut identities = self.identities.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(identity) = identities.get(user) {
            return Ok(identity.clone());
        }
        let cannot = |why: &str| format!("the stack acts as {user}, whose Google identity {why}");
        let Some(client) = &self.token_requests else {
            return Err(cannot(
                "comes from a TokenRequest in the management cluster, and the agent keeps its stacks elsewhere",
            ));
        };
        let audience = self
            .workload_identity_audience
            .clone()
            .or_else(|| self.own_cluster.as_ref().map(gke_builtin_audience))
            .ok_or_else(|| {
                cannot("needs a workload identity audience: set --workload-identity-audience, or --own-cluster for GKE's built-in pool")
            })?;
        let (namespace, name) = parse_service_account_user(user)
            .ok_or_else(|| cannot("cannot be had: it is not a ServiceAccount"))?;
        let subject = Arc::new(ServiceAccountTokens::new(client.clone(), namespace, name));
        let identity = Arc::new(
            WorkloadIdentity::new(subject, &audience).map_err(|e| cannot(&e.to_string()))?,
        );
        identities.insert(user.to_string(), identity.clone());
        Ok(identity)
    }

    /// What the agent remembers of the stack `key`.
    fn stack_state(&self, key: &str) -> StackState {
        let stacks = self.stacks.lock().unwrap_or_else(|e| e.into_inner());
        stacks.get(key).cloned().unwrap_or_default()
    }

    /// Sets what the last plan of `key` left unchanged (`None`: it changed something, failed,
    /// or was not made).
    fn remember_unchanged(&self, key: &str, unchanged: Option<Unchanged>) {
        let mut stacks = self.stacks.lock().unwrap_or_else(|e| e.into_inner());
        stacks.entry(key.to_string()).or_default().unchanged = unchanged;
    }

    /// Whether a run of `commit` may leave the stack as it is: the last plan was of this commit
    /// and changed nothing, and live state still reads as that plan read it
    /// (`ops::plan::unchanged_since`). Counted in the stack's metrics, and marked for
    /// [`reconcile`], which then writes the status only if it changed.
    async fn still_unchanged(&self, key: &str, commit: &str, target: &TargetOptions) -> bool {
        let Some(mut last) = self.stack_state(key).unchanged else {
            return false;
        };
        if last.commit != commit {
            return false;
        }
        match crate::ops::plan::unchanged_since(&mut last.reads, target, self.lock_timeout).await {
            Ok(true) => {}
            Ok(false) => return false,
            Err(e) => {
                tracing::debug!(stack = %key, "live state not compared, planning: {e:#}");
                return false;
            }
        }
        let mut stacks = self.stacks.lock().unwrap_or_else(|e| e.into_inner());
        let state = stacks.entry(key.to_string()).or_default();
        state.skipped = true;
        state.unchanged = Some(last);
        self.metrics.stack(key, |m| m.unchanged_runs += 1);
        tracing::debug!(stack = %key, "commit and live state unchanged since the last plan");
        true
    }

    /// Marks a stack to be fetched at its next reconcile (a webhook push).
    pub fn force(&self, key: &str) {
        let mut stacks = self.stacks.lock().unwrap_or_else(|e| e.into_inner());
        stacks.entry(key.to_string()).or_default().forced = true;
    }
}

pub fn key(stack: &GkqStack) -> String {
    format!(
        "{}/{}",
        stack.namespace().unwrap_or_default(),
        stack.name_any()
    )
}

fn now_text() -> String {
    crate::vocab::time::format_seconds(k8s_openapi::jiff::Timestamp::now())
}

/// The shortest interval a stack may ask for unless `--min-interval` lowers it.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(10);

/// The controller's reconcile: runs the stack when it is due (its interval has passed, a webhook
/// asked, its spec or approval changed) and asks to be called again at its next interval.
pub async fn reconcile(stack: Arc<GkqStack>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let key = key(&stack);
    if let Some(action) = finalizer_step(&stack, &ctx, &key).await? {
        return Ok(action);
    }
    let interval = match super::decide::interval(&stack.spec.interval, ctx.min_interval) {
        Ok(d) => d,
        Err(refused) => {
            let mut status = stack.status.clone().unwrap_or_default();
            let now = now_text();
            for (type_, state) in [("Stalled", true), ("Ready", false), ("Reconciling", false)] {
                let (reason, message) = (refused.reason, &refused.message);
                set_condition(&mut status.conditions, type_, state, reason, message, &now);
            }
            write_changed_status(&ctx, &stack, status).await?;
            return Ok(Action::await_change());
        }
    };
    if stack.spec.suspend {
        let mut status = stack.status.clone().unwrap_or_default();
        set_condition(
            &mut status.conditions,
            "Reconciling",
            false,
            "Suspended",
            "spec.suspend is true",
            &now_text(),
        );
        write_changed_status(&ctx, &stack, status).await?;
        return Ok(Action::requeue(interval));
    }
    let approval = stack.annotations().get(APPROVE_ANNOTATION).cloned();
    if let Some(left) = claim_run(&ctx, &stack, &key, interval, approval.as_deref()) {
        return Ok(Action::requeue(left));
    }
    if !ctx.leadership.is_leading() {
        tracing::warn!(stack = %key, "not reconciling: this replica no longer leads");
        return Ok(Action::requeue(interval));
    }
    let started = Instant::now();
    let status = run_off_the_runtime(&stack, &ctx, approval).await?;
    ctx.metrics
        .observe_reconcile(started.elapsed().as_secs_f64());
    record_run(&stack, &ctx, status)
        .await
        .map(|action| action.unwrap_or_else(|| Action::requeue(interval)))
}

/// The finalizer's part of a reconcile, before the stack's own: `Some` action when the call ends
/// here (a deleted stack without the finalizer, the finalizer just added, a suspended stack's
/// deletion finished).
async fn finalizer_step(
    stack: &GkqStack,
    ctx: &Context,
    key: &str,
) -> Result<Option<Action>, ReconcileError> {
    let finalized = stack.finalizers().iter().any(|f| f == FINALIZER);
    let deleting = stack.metadata.deletion_timestamp.is_some();
    if deleting && !finalized {
        // Gone as far as the agent is concerned; the API server removes it.
        return Ok(Some(Action::await_change()));
    }
    if !deleting && !finalized && ctx.leadership.is_leading() {
        // Before anything is applied: a stack that owns objects is deleted through the agent.
        if let Err(e) = ctx.store.set_finalizer(stack, true).await {
            tracing::warn!(stack = %key, "adding the finalizer: {e}");
        }
        return Ok(Some(Action::requeue(Duration::from_millis(100))));
    }
    if deleting && stack.spec.suspend {
        // A suspended stack acts on nothing, also when it is deleted.
        return finish_deletion(stack, ctx, "Released", "the stack was suspended: nothing was deleted and its objects keep their owner annotation").await.map(Some);
    }
    Ok(None)
}

/// Whether the stack runs now: `None` (and the run is recorded as started) when its interval has
/// passed or a webhook, its spec, approval or reconcile request asks; otherwise how long until
/// it is due.
fn claim_run(
    ctx: &Context,
    stack: &GkqStack,
    key: &str,
    interval: Duration,
    approval: Option<&str>,
) -> Option<Duration> {
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    let approval = approval.map(str::to_string);
    let requested = stack.annotations().get(REQUESTED_ANNOTATION).cloned();
    let generation = stack.metadata.generation;
    let now = ctx.now_ms();
    let mut stacks = ctx.stacks.lock().unwrap_or_else(|e| e.into_inner());
    let state = stacks.entry(key.to_string()).or_default();
    let asked = state.forced
        || state.approval != approval
        || state.requested != requested
        || state.generation != generation;
    if !asked && !due(state.last_run, interval_ms, now) {
        let left = interval_ms.saturating_sub(now.saturating_sub(state.last_run.unwrap_or(now)));
        return Some(Duration::from_millis(left.max(100)));
    }
    if asked {
        // Asked for, not only due: planned again whatever live state says.
        state.unchanged = None;
    }
    state.skipped = false;
    state.forced = false;
    state.approval = approval;
    state.requested = requested;
    state.generation = generation;
    state.last_run = Some(now);
    None
}

/// [`run_stack`] on a blocking thread of the current runtime. The pipeline's futures are not all
/// provably Send (closures over borrowed data in `buffer_unordered`, rust-lang/rust#102211), and
/// the controller spawns reconciles: that thread drives the run without needing Send.
async fn run_off_the_runtime(
    stack: &Arc<GkqStack>,
    ctx: &Arc<Context>,
    approval: Option<String>,
) -> Result<GkqStackStatus, ReconcileError> {
    let handle = tokio::runtime::Handle::current();
    let (task_stack, task_ctx) = (stack.clone(), ctx.clone());
    tokio::task::spawn_blocking(move || {
        handle.block_on(run_stack(&task_stack, &task_ctx, approval.as_deref()))
    })
    .await
    .map_err(|e| ReconcileError::Stopped {
        stack: key(stack),
        message: e.to_string(),
    })
}

/// Writes what a run found: the status (only if it changed, when the run did not plan), or,
/// for a deleted stack now applied, the end of its deletion. `Some` action when the stack is not
/// requeued at its interval.
async fn record_run(
    stack: &GkqStack,
    ctx: &Context,
    status: GkqStackStatus,
) -> Result<Option<Action>, ReconcileError> {
    let key = key(stack);
    if ctx.stack_state(&key).skipped {
        return write_changed_status(ctx, stack, status)
            .await
            .map(|()| None);
    }
    let deleting = stack.metadata.deletion_timestamp.is_some();
    if deleting
        && status
            .condition("Ready")
            .is_some_and(|c| c.status == "True")
    {
        let (reason, note) = if stack.spec.prune {
            (
                "Pruned",
                "the stack was deleted with spec.prune: the objects it owned were deleted",
            )
        } else {
            (
                "Released",
                "the stack was deleted: its objects stay, and no longer name it as their owner",
            )
        };
        return finish_deletion(stack, ctx, reason, note).await.map(Some);
    }
    if let Err(e) = write_status(ctx, stack, &status).await {
        // The next run plans again and writes what it finds.
        ctx.remember_unchanged(&key, None);
        return Err(e);
    }
    Ok(None)
}

/// The last step of a stack's deletion: its checkout and metrics go, an Event says what became
/// of its objects, and the finalizer is removed so the API server deletes the stack.
async fn finish_deletion(
    stack: &GkqStack,
    ctx: &Context,
    reason: &str,
    note: &str,
) -> Result<Action, ReconcileError> {
    let key = key(stack);
    let dir = ctx
        .work_dir
        .join(stack.namespace().unwrap_or_default())
        .join(stack.name_any());
    if let Err(e) = std::fs::remove_dir_all(&dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(stack = %key, "removing the checkout {}: {e}", dir.display());
    }
    ctx.metrics.forget(&key);
    ctx.stacks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&key);
    ctx.store.event(stack, Severity::Normal, reason, note).await;
    ctx.store
        .set_finalizer(stack, false)
        .await
        .map_err(|e| ReconcileError::Status {
            stack: key,
            message: format!("removing the finalizer: {e}"),
        })?;
    Ok(Action::await_change())
}

/// [`write_status`] when the completed status differs from the stack's (a suspended or refused
/// stack is not written at every call).
async fn write_changed_status(
    ctx: &Context,
    stack: &GkqStack,
    mut status: GkqStackStatus,
) -> Result<(), ReconcileError> {
    kstatus(&mut status, stack.metadata.generation, &now_text());
    if stack.status.as_ref() == Some(&status) {
        return Ok(());
    }
    write_status(ctx, stack, &status).await
}

/// Requeues a stack whose status could not be written.
pub fn error_policy(_stack: Arc<GkqStack>, error: &ReconcileError, _ctx: Arc<Context>) -> Action {
    tracing::warn!("{error}");
    Action::requeue(Duration::from_secs(5))
}

/// Writes the stack's status, completed for kstatus (its generation, every kstatus condition).
async fn write_status(
    ctx: &Context,
    stack: &GkqStack,
    status: &GkqStackStatus,
) -> Result<(), ReconcileError> {
    let mut status = status.clone();
    kstatus(&mut status, stack.metadata.generation, &now_text());
    ctx.store
        .set_status(stack, &status)
        .await
        .map_err(|e| ReconcileError::Status {
            stack: key(stack),
            message: e.to_string(),
        })
}

/// Logs an apply's progress.
struct LogSink {
    stack: String,
}

impl Sink for LogSink {
    fn emit(&self, event: &ApplyEvent) {
        let event = serde_json::to_string(event).unwrap_or_default();
        tracing::info!(stack = %self.stack, %event, "apply");
    }
}

/// What one run decided, for the status, Events and metrics.
struct Run<'a> {
    stack: &'a GkqStack,
    ctx: &'a Context,
    key: String,
    status: GkqStackStatus,
    secrets: Vec<String>,
}

impl Run<'_> {
    fn condition(&mut self, type_: &str, status: bool, reason: &str, message: &str) {
        let message = redact(message, &self.secrets);
        set_condition(
            &mut self.status.conditions,
            type_,
            status,
            reason,
            &message,
            &now_text(),
        );
    }

    async fn event(&self, severity: Severity, reason: &str, note: &str) {
        let note = redact(note, &self.secrets);
        match severity {
            Severity::Normal => tracing::info!(stack = %self.key, reason, "{note}"),
            Severity::Warning => tracing::warn!(stack = %self.key, reason, "{note}"),
        }
        self.ctx
            .store
            .event(self.stack, severity, reason, &note)
            .await;
    }

    /// A failure that leaves the stack as it was: Ready False with `reason`, and an Event.
    async fn failed(&mut self, reason: &str, message: &str) {
        self.condition("Ready", false, reason, message);
        self.condition("Reconciling", false, reason, message);
        self.event(Severity::Warning, reason, message).await;
    }
}

async fn run_stack(stack: &GkqStack, ctx: &Context, approval: Option<&str>) -> GkqStackStatus {
    let key = key(stack);
    let mut run = Run {
        stack,
        ctx,
        key: key.clone(),
        status: stack.status.clone().unwrap_or_default(),
        secrets: Vec::new(),
    };
    run.status.observed_generation = stack.metadata.generation;
    let Some(fetched) = fetch_stack(&mut run).await else {
        return run.status;
    };
    let deleting = stack.metadata.deletion_timestamp.is_some();
    if !deleting
        && ctx
            .still_unchanged(&key, &fetched.commit, &fetched.target)
            .await
    {
        return run.status;
    }
    ctx.remember_unchanged(&key, None);
    run.status.last_attempted_revision = Some(fetched.commit.clone());
    let source = SpecSource {
        spec: fetched.dir.join(&stack.spec.path),
        env: stack.spec.env.clone(),
        vars: stack
            .spec
            .variables
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        git_ref: Some(fetched.commit.clone()),
    };
    let Some((loaded, desired)) = load_or_report(&mut run, &source, &fetched).await else {
        return run.status;
    };
    let (opts, desired) = plan_options(&key, deleting, stack.spec.prune, desired);
    let plan_source = PlanSource::Spec {
        spec: &source,
        loaded,
        desired,
        opts,
    };
    converge_stack(run, plan_source, &fetched, approval).await
}

/// A stack's repository fetched at a commit, and how its plans act.
struct Fetched {
    /// The checkout.
    dir: PathBuf,
    commit: String,
    /// The target as the stack acts on it: its ServiceAccount, its Google identity.
    target: TargetOptions,
    /// How long each job waits for Kueue's decision: the stack's own `submitWait`, else the
    /// agent's `--submit-wait`.
    submit_wait: Duration,
}

/// Checks the stack's source, finds whom it acts as and its credentials, and fetches its
/// repository; `None` (the failure in the run's status) when one of them fails.
async fn fetch_stack(run: &mut Run<'_>) -> Option<Fetched> {
    let (stack, ctx) = (run.stack, run.ctx);
    // Before anything else runs with the stack's values (its Secret is not even read).
    let checked = match source_check::check(
        stack,
        ctx.allow_file_urls,
        ctx.default_service_account.as_deref(),
    ) {
        Ok(checked) => checked,
        Err(e) => {
            let message = e.to_string();
            run.condition("Stalled", true, "InvalidSource", &message);
            run.failed("InvalidSource", &message).await;
            return None;
        }
    };
    // Whom the stack acts as: its ServiceAccount, so that the cluster's RBAC (and not the
    // agent's own rights) decides what it may read and write. Checked with the source.
    let acting_as = checked.acting_as.clone();
    // Its Google calls too: the ServiceAccount's Google identity, never the agent's.
    let workload_identity = match acting_as.as_deref().map(|user| ctx.workload_identity(user)) {
        None => None,
        Some(Ok(identity)) => Some(identity),
        Some(Err(message)) => {
            run.failed("CredentialsUnavailable", &message).await;
            return None;
        }
    };
    let credentials = match ctx.store.credentials(stack).await {
        Ok(c) => c,
        Err(e) => {
            let message = format!("reading spec.secretRef: {e}");
            run.failed("CredentialsUnavailable", &message).await;
            return None;
        }
    };
    run.secrets = credentials.secrets();
    let dir = ctx
        .work_dir
        .join(stack.namespace().unwrap_or_default())
        .join(stack.name_any());
    let commit = match source::fetch(&dir, &checked, &credentials).await {
        Ok(commit) => commit,
        Err(e) => {
            run.failed("FetchFailed", &e.to_string()).await;
            return None;
        }
    };
    let target = TargetOptions {
        impersonate: acting_as,
        workload_identity,
        ..ctx.target.clone()
    };
    Some(Fetched {
        dir,
        commit,
        target,
        submit_wait: checked.submit_wait.unwrap_or(ctx.submit_wait),
    })
}

/// Loads and validates the spec at the fetched commit; when it is invalid, `None`, with its
/// diagnostics (redacted, paths relative to the checkout) in the status and an Event.
async fn load_or_report(
    run: &mut Run<'_>,
    source: &SpecSource,
    fetched: &Fetched,
) -> Option<(crate::spec::Loaded, crate::model::DesiredState)> {
    let short = crate::plan::provenance::short_commit(&fetched.commit).to_string();
    let validated = load_valid(source);
    let Some(valid) = validated.valid else {
        let text = validated.diagnostics.report(&validated.sources).to_string();
        let prefix = format!("{}/", fetched.dir.display());
        let text = text.replace(&prefix, "");
        run.status.diagnostics = Some(redact(&text, &run.secrets));
        run.condition(
            "Stalled",
            true,
            "InvalidSpec",
            &format!(
                "commit {short}: the spec is invalid; nothing was changed (see status.diagnostics)"
            ),
        );
        run.condition(
            "Ready",
            false,
            "InvalidSpec",
            &format!("commit {short} is invalid"),
        );
        run.condition(
            "Reconciling",
            false,
            "InvalidSpec",
            "waiting for a commit that fixes the spec",
        );
        let first = text.lines().next().unwrap_or_default();
        run.event(
            Severity::Warning,
            "InvalidSpec",
            &format!("commit {short}: {first}"),
        )
        .await;
        return None;
    };
    run.status.diagnostics = None;
    run.condition(
        "Stalled",
        false,
        "Valid",
        &format!("commit {short} validates"),
    );
    Some(valid)
}

/// How the stack `key` is planned, and what it plans to: as it is, or, when it is being deleted,
/// every object it owns deleted (`prune`) or released from it.
fn plan_options(
    key: &str,
    deleting: bool,
    prune: bool,
    desired: crate::model::DesiredState,
) -> (PlanOptions, crate::model::DesiredState) {
    match (deleting, prune) {
        // Deleted with prune: a plan of no objects deletes every object the stack owns (a
        // plan that stops running jobs is held, as any other).
        (true, true) => (
            PlanOptions {
                prune: true,
                owner: Some(key.to_string()),
                ..PlanOptions::default()
            },
            desired.without_objects(),
        ),
        // Deleted without prune: the objects are applied without the owner annotation.
        (true, false) => (
            PlanOptions {
                release_from: Some(key.to_string()),
                ..PlanOptions::default()
            },
            desired,
        ),
        (false, _) => (
            PlanOptions {
                // Deleting a resource from the repository deletes it (deletes are held for
                // approval).
                prune: true,
                // What this stack applies is this stack's: no other stack changes or deletes it.
                owner: Some(key.to_string()),
                ..PlanOptions::default()
            },
            desired,
        ),
    }
}

/// Plans and applies through `ops::converge::apply` with the agent's front end, remembers a plan
/// without changes, and concludes the run's status from what happened.
async fn converge_stack(
    run: Run<'_>,
    plan_source: PlanSource<'_>,
    fetched: &Fetched,
    approval: Option<&str>,
) -> GkqStackStatus {
    let (stack, ctx, key) = (run.stack, run.ctx, run.key.clone());
    let deleting = stack.metadata.deletion_timestamp.is_some();
    let commit = fetched.commit.as_str();
    let choices = ApplyChoices {
        lock_timeout: ctx.lock_timeout,
        follow_jobs: false,
        // Once per commit, not at every interval; never for a deletion.
        record_unchanged: !deleting && run.status.last_applied_revision.as_deref() != Some(commit),
        interrupt: ctx.interrupt.clone(),
        lock_holder: Some(ctx.lock_holder(&key)),
        submit_wait: fetched.submit_wait,
    };
    let front = AgentFront {
        run: tokio::sync::Mutex::new(run),
        commit,
        approval,
        decision: RefCell::new(None),
        not_leading: Cell::new(false),
        pruning_deletion: deleting && stack.spec.prune,
        sink: LogSink { stack: key },
        reads: RefCell::new(None),
    };
    let outcome = converge::apply(plan_source, &fetched.target, &choices, &front).await;
    let AgentFront {
        run,
        decision,
        not_leading,
        reads,
        ..
    } = front;
    let mut run = run.into_inner();
    match outcome {
        Ok(applied) => {
            if matches!(applied, Applied::NoChanges) && !deleting {
                let unchanged = reads.into_inner().map(|reads| Unchanged {
                    commit: commit.to_string(),
                    reads,
                });
                ctx.remember_unchanged(&run.key, unchanged);
            }
            let ended = Ended {
                decision: decision.into_inner(),
                not_leading: not_leading.get(),
                recorded: choices.record_unchanged,
            };
            conclude(&mut run, commit, ended, applied).await;
        }
        Err(ConvergeError::StateLock(e) | ConvergeError::ClusterLock(e)) => {
            run.failed("LockFailed", &format!("{e:#}")).await;
        }
        Err(ConvergeError::Plan(e)) => run.failed("PlanFailed", &format!("{e:#}")).await,
        Err(ConvergeError::Front(e)) => run.failed("ReconcileFailed", &format!("{e:#}")).await,
    }
    run.status
}

/// The agent's side of `ops::converge::apply`: it records the plan in the stack's status and
/// metrics, decides on it ([`decide`]), consents to stopping running work only for an approved
/// digest, and never asks anyone: a plan it holds or refuses is not approved.
struct AgentFront<'a> {
    run: tokio::sync::Mutex<Run<'a>>,
    commit: &'a str,
    /// The approval annotation: the digest of the plan it approves.
    approval: Option<&'a str>,
    /// What [`decide`] said of the plan converge made (and executes, if approved).
    decision: RefCell<Option<Decision>>,
    /// This replica lost its leadership before applying.
    not_leading: Cell<bool>,
    /// The stack was deleted with `spec.prune: true`: its deletes are consented to.
    pruning_deletion: bool,
    sink: LogSink,
    /// What the plan read of live state.
    reads: RefCell<Option<crate::ops::plan::PlanReads>>,
}

#[async_trait::async_trait(?Send)]
impl ApplyFront for AgentFront<'_> {
    async fn planned(&self, ready: &Ready<'_>) -> anyhow::Result<()> {
        let Some(planned) = ready.planned() else {
            anyhow::bail!("the agent applies only plans it made itself");
        };
        *self.reads.borrow_mut() = Some(planned.reads.clone());
        let mut run = self.run.lock().await;
        record_plan(&mut run, planned, self.commit).await;
        let own = run.ctx.own_cluster.as_ref();
        let decision = if self.pruning_deletion {
            decide_deletion(&planned.plan, self.approval, own)
        } else {
            decide(&planned.plan, self.approval, own)
        };
        let held = matches!(decision, Decision::Hold { .. });
        run.ctx.metrics.stack(&run.key, |m| m.held = held);
        if !held {
            run.status.held_digest = None;
            run.condition("Held", false, "NotHeld", "no plan waits for approval");
        }
        *self.decision.borrow_mut() = Some(decision);
        Ok(())
    }

    fn consent(&self, _plan: &Plan) -> Consent {
        Consent {
            // The repository is the truth: fields someone changed by hand (`kubectl edit`) are
            // taken back, as Flux and Argo CD do.
            force_conflicts: true,
            allow_disruption: matches!(
                *self.decision.borrow(),
                Some(Decision::Apply { approved: true })
            ),
        }
    }

    async fn approve(&self, plan: &Plan) -> anyhow::Result<bool> {
        if !matches!(*self.decision.borrow(), Some(Decision::Apply { .. })) {
            return Ok(false);
        }
        let mut run = self.run.lock().await;
        if !run.ctx.leadership.is_leading() {
            self.not_leading.set(true);
            return Ok(false);
        }
        let short = crate::plan::provenance::short_commit(self.commit).to_string();
        let summary = plan.summary.to_string();
        run.condition(
            "Reconciling",
            true,
            "Applying",
            &format!("commit {short}: {summary}"),
        );
        // Shown while the apply runs (GKE operations take minutes); the final status follows.
        if let Err(e) = run.ctx.store.set_status(run.stack, &run.status).await {
            tracing::warn!(stack = %run.key, "{e}");
        }
        Ok(true)
    }

    fn sink(&self) -> &dyn Sink {
        &self.sink
    }
}

/// What the front end knew when converge returned.
struct Ended {
    decision: Option<Decision>,
    not_leading: bool,
    /// The revision of a plan without changes was recorded.
    recorded: bool,
}

/// The plan's summary and predicted placements in the status; its actions, drift and the
/// placements Kueue disagrees with in the metrics.
async fn record_plan(run: &mut Run<'_>, planned: &Planned, commit: &str) {
    let plan = &planned.plan;
    run.status.plan = Some(plan.summary.to_string());
    run.status.placements = plan
        .placements
        .iter()
        .map(|p| {
            let state = serde_json::to_value(p.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let flavors: Vec<String> = p
                .podsets
                .iter()
                .map(|s| format!("{}={}", s.name, s.flavor.as_deref().unwrap_or("-")))
                .collect();
            format!(
                "{}/{} -> {state} ({})",
                p.namespace,
                p.job,
                flavors.join(", ")
            )
        })
        .collect();
    let mut actions = BTreeMap::new();
    for action in plan.changes() {
        let kind = match action.kind {
            ActionKind::Create => "create",
            ActionKind::Update => "update",
            ActionKind::Replace => "replace",
            ActionKind::Delete => "delete",
            ActionKind::NoOp => continue,
        };
        *actions.entry(kind).or_insert(0) += 1;
    }
    let applied = run.status.last_applied_revision.as_deref() == Some(commit);
    let drifted = if applied { plan.changes().count() } else { 0 };
    let kube = planned.kube();
    // Jobs Kueue placed are compared with the prediction recorded when they were submitted.
    let records =
        crate::ops::status::recorded_placements(kube.api(), &planned.plan.cluster.cluster).await;
    let disagreements = match crate::ops::status::live_report_of(
        &planned.session,
        &planned.desired,
        planned.live.gke.cluster.as_ref(),
        kube.api(),
        planned.world.clone().unwrap_or_default(),
        &records,
        &planned.kueue,
    )
    .await
    {
        Ok(report) => report
            .jobs
            .iter()
            .filter(|j| j.agrees == Some(false))
            .count(),
        Err(e) => {
            tracing::debug!(stack = %run.key, "placements not compared: {e:#}");
            0
        }
    };
    run.ctx.metrics.stack(&run.key, |m| {
        m.actions = actions;
        m.drifted = drifted;
        m.disagreements = disagreements;
    });
}

/// The stack's status, Events and metrics after converge: applied, up to date, held, refused or
/// failed.
async fn conclude(run: &mut Run<'_>, commit: &str, ended: Ended, outcome: Applied) {
    let short = crate::plan::provenance::short_commit(commit).to_string();
    let summary = run.status.plan.clone().unwrap_or_default();
    match (outcome, ended.decision) {
        (Applied::NoChanges, _) => {
            if ended.recorded {
                applied(run, commit);
                run.event(
                    Severity::Normal,
                    "Applied",
                    &format!("commit {short} applied: no changes were needed"),
                )
                .await;
            }
            run.condition(
                "Ready",
                true,
                "UpToDate",
                &format!("commit {short} is applied; live state matches it"),
            );
            run.condition("Reconciling", false, "UpToDate", "nothing to do");
        }
        (
            Applied::Executed {
                report, lock_lost, ..
            },
            decision,
        ) => {
            let approved = matches!(decision, Some(Decision::Apply { approved: true }));
            match report {
                Ok(report) if report.is_success() && !lock_lost => {
                    applied(run, commit);
                    let how = if approved { " (approved)" } else { "" };
                    run.condition(
                        "Ready",
                        true,
                        "Applied",
                        &format!("commit {short} applied{how}: {summary}"),
                    );
                    run.condition("Reconciling", false, "Applied", "nothing to do");
                    run.event(
                        Severity::Normal,
                        "Applied",
                        &format!("commit {short} applied{how}: {summary}"),
                    )
                    .await;
                }
                Ok(report) => {
                    let mut failures: Vec<String> = report
                        .failures()
                        .map(|(addr, e)| format!("{addr}: {e}"))
                        .collect();
                    if lock_lost {
                        failures.push(
                            "the cluster's apply Lease was taken over during the apply; the revision was not recorded"
                                .to_string(),
                        );
                    }
                    run.failed(
                        "ApplyFailed",
                        &format!("commit {short}: {}", failures.join("; ")),
                    )
                    .await;
                }
                Err(stale) => {
                    run.failed("NotApplied", &format!("commit {short}: {stale}"))
                        .await;
                }
            }
        }
        (
            Applied::Refused(_) | Applied::Cancelled,
            Some(Decision::Hold {
                digest,
                reason,
                stale,
            }),
        ) => held(run, &short, digest, &reason, stale).await,
        (Applied::Refused(_) | Applied::Cancelled, Some(Decision::Conflict(why))) => {
            run.failed("OwnershipConflict", &format!("commit {short}: {why}"))
                .await;
        }
        (Applied::Refused(_) | Applied::Cancelled, Some(Decision::Refuse(why))) => {
            run.condition(
                "Stalled",
                true,
                "Refused",
                &format!("commit {short}: {why}"),
            );
            run.failed("Refused", &format!("commit {short}: {why}"))
                .await;
        }
        (Applied::Cancelled, _) if ended.not_leading => {
            run.failed(
                "NotLeader",
                "this replica lost its leadership before applying; nothing was changed",
            )
            .await;
        }
        (Applied::Refused(why), _) => {
            run.failed("Refused", &format!("commit {short}: {why}"))
                .await;
        }
        (Applied::Cancelled, decision) => {
            run.failed(
                "NotApplied",
                &format!("commit {short}: not applied ({decision:?}); nothing was changed"),
            )
            .await;
        }
    }
}

/// A plan held until its digest is approved: condition Held and one Event per held digest, and
/// an Event for an approval of another digest.
async fn held(run: &mut Run<'_>, short: &str, digest: String, reason: &str, stale: Option<String>) {
    run.status.held_digest = Some(digest.clone());
    let mut message = format!(
        "commit {short}: {reason}; approve with `gkq approve {} {digest}` (or annotate the stack {APPROVE_ANNOTATION}={digest})",
        run.key
    );
    if let Some(stale) = &stale {
        message.push_str(&format!(
            "; the approval of digest {stale} was refused: it is not the plan held now"
        ));
    }
    run.condition("Held", true, "AwaitingApproval", &message);
    run.condition(
        "Ready",
        false,
        "Held",
        &format!("commit {short} waits for approval"),
    );
    run.condition("Reconciling", false, "Held", "waiting for approval");
    let told = {
        let mut stacks = run.ctx.stacks.lock().unwrap_or_else(|e| e.into_inner());
        let state = stacks.entry(run.key.clone()).or_default();
        let told = state.held_told.as_deref() == Some(digest.as_str());
        state.held_told = Some(digest.clone());
        told
    };
    if !told {
        run.event(Severity::Warning, "Held", &message).await;
    }
    if let Some(stale) = stale {
        run.event(
            Severity::Warning,
            "ApprovalRefused",
            &format!("digest {stale} is not the held plan's ({digest})"),
        )
        .await;
    }
}

fn applied(run: &mut Run<'_>, commit: &str) {
    run.status.last_applied_revision = Some(commit.to_string());
    run.status.last_applied_time = Some(now_text());
    let seconds = k8s_openapi::jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
    run.ctx.metrics.stack(&run.key, |m| {
        m.last_applied = Some(seconds);
        m.drifted = 0;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::store::LocalStore;

    struct Never;
    impl Leadership for Never {
        fn is_leading(&self) -> bool {
            false
        }
    }

    fn context(
        dir: &std::path::Path,
        leadership: Arc<dyn Leadership>,
    ) -> (Arc<LocalStore>, Arc<Context>) {
        let store = Arc::new(LocalStore::new(dir));
        let ctx = Arc::new(Context::new(
            store.clone(),
            TargetOptions::default(),
            dir.join("work"),
            None,
            Arc::new(Metrics::default()),
            leadership,
        ));
        (store, ctx)
    }

    const STACK: &str = "apiVersion: gkq.dev/v1alpha1\nkind: GkqStack\nmetadata: {name: s}\nspec: {url: file:///nowhere, interval: 5m, suspend: SUSPEND}\n";

    #[tokio::test(flavor = "multi_thread")]
    async fn a_suspended_stack_is_not_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let (store, ctx) = context(dir.path(), Arc::new(super::super::leader::Alone));
        store
            .load_manifests(&STACK.replace("SUSPEND", "true"), "m")
            .unwrap();
        let stack = store.list().await.unwrap().remove(0);
        // The first call puts the finalizer on; the next is the stack's reconcile.
        reconcile(Arc::new(stack), ctx.clone()).await.unwrap();
        let stack = store.list().await.unwrap().remove(0);
        assert_eq!(stack.finalizers(), [FINALIZER.to_string()]);
        let action = reconcile(Arc::new(stack), ctx).await.unwrap();
        assert_eq!(action, Action::requeue(Duration::from_secs(300)));
        let status = store.list().await.unwrap().remove(0).status.unwrap();
        assert_eq!(status.condition("Reconciling").unwrap().reason, "Suspended");
        assert!(status.last_attempted_revision.is_none());
        assert!(!dir.path().join("work").exists(), "nothing was fetched");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_replica_that_does_not_lead_does_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, ctx) = context(dir.path(), Arc::new(Never));
        store
            .load_manifests(&STACK.replace("SUSPEND", "false"), "m")
            .unwrap();
        let stack = store.list().await.unwrap().remove(0);
        reconcile(Arc::new(stack), ctx).await.unwrap();
        assert!(store.list().await.unwrap()[0].status.is_none());
        assert!(!dir.path().join("work").exists(), "nothing was fetched");
    }
}
