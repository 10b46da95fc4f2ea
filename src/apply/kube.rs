//! Kubernetes actions, through the [`KubeApplier`] extension point.
//!
//! The Kubernetes half implements `KubeApplier` over kube-rs (server-side apply with gkq's field
//! manager, deletes that respect finalizers, waits for readiness) and passes it to
//! [`super::Executor::with_kube`]. The executor does the rest: ordering, dependency skips,
//! staleness checks, events.
//!
//! Writes are conditional on the version of the target the check read ([`super::Checked`]). When
//! the API server refuses one because the target moved on (Kueue wrote its status, say), the
//! target is read again, alone, and checked by the same fingerprint: if what the action depends
//! on is as planned, the write is sent again at the new version, else the action is stale.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use serde_json::Value;

use super::{
    ActionResultOf, ApplyError, ApplyEvent, Checked, Executor, Submission, check_fresh, millis,
};
use crate::addr::ResourceAddr;
use crate::kube::Version;
use crate::plan::{Action, Step};

/// How many times one write is sent again after its target moved on but still matches the plan,
/// before the action fails: a target that keeps moving is written by someone else all the time.
const REREADS: usize = 5;

/// A Kubernetes call failed. `hint` says what the user can do (for example: another field
/// manager owns the fields; pass `--force-conflicts` to take them).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct KubeApplyError {
    pub message: String,
    pub hint: Option<String>,
    /// The write was conditional on a version and the target is no longer at it (the API
    /// server's 409 Conflict for a failed precondition).
    pub changed: bool,
}

impl KubeApplyError {
    pub fn new(message: impl Into<String>, hint: Option<String>) -> Self {
        Self {
            message: message.into(),
            hint,
            changed: false,
        }
    }
}

/// Kubernetes operations the executor needs.
#[async_trait::async_trait]
pub trait KubeApplier: Send + Sync {
    /// Every object of a kind that gkq owns in the stack being applied, in one request; empty
    /// when the server does not serve the kind. This is how the executor checks a plan.
    async fn list(&self, api_version: &str, kind: &str) -> Result<Vec<Value>, KubeApplyError>;
    /// [`KubeApplier::list`], handing each object to `each` as it is read instead of collecting
    /// them: the check keeps only what it needs of each (its version, whether it is as planned),
    /// never a whole list of trees.
    async fn list_each(
        &self,
        api_version: &str,
        kind: &str,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> Result<(), KubeApplyError> {
        for object in self.list(api_version, kind).await? {
            each(object);
        }
        Ok(())
    }
    /// The live object at `addr` (`object` is the desired or last-seen object, for its
    /// apiVersion and kind); `None` if it does not exist. Read for targets the lists do not
    /// have, and again when a conditional write finds its target moved on.
    async fn get(
        &self,
        addr: &ResourceAddr,
        object: &Value,
    ) -> Result<Option<Value>, KubeApplyError>;
    /// Server-side apply of `object`, only if the stored object is still at `version` when one
    /// is given (a create has none), returning when it is applied (and ready, where the next
    /// step needs that: CRDs established, webhooks serving).
    async fn apply(&self, object: &Value, version: Option<&Version>) -> Result<(), KubeApplyError>;
    /// Deletes the object, only if it is still at `version` when one is given, and waits until
    /// it is gone.
    async fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        version: Option<&Version>,
    ) -> Result<(), KubeApplyError>;
    /// After `object`, a job Kueue queues, was created: whether Kueue has decided on its
    /// Workload yet (quota reserved, or a scheduling attempt's reason recorded). `None` when
    /// there is nothing to wait for (no Kueue to ask, or the job is gone).
    async fn kueue_decided(&self, object: &Value) -> Result<Option<bool>, KubeApplyError> {
        let _ = object;
        Ok(None)
    }
    /// Before `object`, a job Kueue queues, is created: starts following what Kueue writes from
    /// now on, so that the wait for its decision wakes as soon as Kueue has written one instead of
    /// reading [`KubeApplier::kueue_decided`] every [`DECISION_POLL`]. Each wake says that
    /// Kueue may have decided (it is read again to know). `None` when Kueue's writes cannot be
    /// followed: the wait reads the decision every [`DECISION_POLL`] then.
    async fn follow_decisions(&self, object: &Value) -> Option<Wakes> {
        let _ = object;
        None
    }
}

/// What [`KubeApplier::follow_decisions`] gives: an item each time Kueue may have decided; the
/// stream ends when it can no longer tell (the watch ended).
pub type Wakes = futures::stream::BoxStream<'static, ()>;

/// An object naming the action's target, for reading it: the desired one, or the one being
/// deleted. `None` when the action has no Kubernetes target.
pub(super) fn probe_of(action: &Action) -> Option<Arc<serde_json::Value>> {
    action.desired.clone().or_else(|| {
        action.steps.iter().find_map(|step| match step {
            Step::KubeDelete {
                api_version,
                kind,
                namespace,
                name,
            } => Some(Arc::new(
                serde_json::json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"namespace": namespace, "name": name}}),
            )),
            _ => None,
        })
    })
}

pub(super) async fn run_action(
    executor: &Executor<'_>,
    action: &Action,
    checked: &Checked,
    submission: Option<Submission>,
) -> ActionResultOf {
    let Some(kube) = executor.kube else {
        return Err(Box::new(ApplyError::KubeUnavailable {
            addr: action.addr.clone(),
        }));
    };
    let mut version = checked.version(&action.addr)?.cloned();
    // A job submitted to Kueue: what Kueue writes is followed from before its creation, so that
    // no decision on it is missed (not when the apply does not wait for decisions).
    let follow = submission
        .is_some()
        .then_some(action.desired.as_deref())
        .flatten()
        .filter(|_| !executor.options.submit_wait.is_zero());
    let mut wakes = None;
    for step in &action.steps {
        executor.sink.emit(&ApplyEvent::StepStarted {
            addr: action.addr.clone(),
            step: step.to_string(),
        });
        if let (Some(job), Step::KubeApply { .. }) = (follow, step) {
            wakes = kube.follow_decisions(job).await;
        }
        conditionally(kube, action, step, &mut version).await?;
        if matches!(step, Step::KubeDelete { .. }) {
            // What follows (a replace's create) makes a new object.
            version = None;
        }
    }
    if let (Some(submission), Some(job)) = (submission, action.desired.as_deref()) {
        await_decision(executor, kube, &action.addr, job, submission, wakes).await;
    }
    Ok(())
}

/// After job `submission.job` of the jobs an apply submits to Kueue was created: waits until
/// Kueue has decided on it, so that the next one reaches Kueue after it (as the plan
/// predicted), at most the apply's `submit_wait`, telling the sink about once a second. The
/// decision is read right after the create and again each time `wakes` says Kueue may have
/// decided (at the latest after [`DECISION_FALLBACK`]), or every [`DECISION_POLL`] without
/// them. When the time runs out, or Kueue cannot be asked, the sink is told so and the apply
/// goes on: the job was created.
async fn await_decision(
    executor: &Executor<'_>,
    kube: &dyn KubeApplier,
    addr: &ResourceAddr,
    job: &Value,
    submission: Submission,
    mut wakes: Option<Wakes>,
) {
    let limit = executor.options.submit_wait;
    let started = Instant::now();
    let mut told: Option<Duration> = None;
    let decided = |decided: bool, elapsed: Duration| ApplyEvent::KueueDecided {
        addr: addr.clone(),
        job: submission.job,
        jobs: submission.jobs,
        decided,
        elapsed_ms: millis(elapsed),
    };
    loop {
        match kube.kueue_decided(job).await {
            Ok(None) => return,
            Ok(Some(true)) => {
                executor.sink.emit(&decided(true, started.elapsed()));
                return;
            }
            Ok(Some(false)) => {}
            Err(e) => {
                tracing::warn!("{addr}: reading Kueue's decision on the job: {e}");
                executor.sink.emit(&decided(false, started.elapsed()));
                return;
            }
        }
        let elapsed = started.elapsed();
        if elapsed >= limit {
            executor.sink.emit(&decided(false, elapsed));
            return;
        }
        if told.is_none_or(|at| elapsed >= at + Duration::from_secs(1)) {
            executor.sink.emit(&ApplyEvent::AwaitingKueue {
                addr: addr.clone(),
                job: submission.job,
                jobs: submission.jobs,
                elapsed_ms: millis(elapsed),
                limit_ms: millis(limit),
            });
            told = Some(elapsed);
        }
        if woken(executor, &mut wakes, limit - elapsed).await {
            return;
        }
    }
}

/// Waits until `wakes` says Kueue may have decided, or for [`DECISION_FALLBACK`] (without
/// wakes, or once they ended: [`DECISION_POLL`]), at most `left`; `true` if the apply was
/// interrupted meanwhile. Wakes already waiting are taken together: one read answers them all.
async fn woken(executor: &Executor<'_>, wakes: &mut Option<Wakes>, left: Duration) -> bool {
    let Some(stream) = wakes.as_mut() else {
        return executor.pause(DECISION_POLL.min(left)).await;
    };
    let mut ended = tokio::select! {
        interrupted = executor.pause(DECISION_FALLBACK.min(left)) => return interrupted,
        woke = stream.next() => woke.is_none(),
    };
    while !ended {
        match stream.next().now_or_never() {
            Some(Some(())) => {}
            Some(None) => ended = true,
            None => break,
        }
    }
    if ended {
        *wakes = None;
    }
    false
}

/// How often Kueue's decision on a submitted job is read when what Kueue writes is not
/// followed ([`KubeApplier::follow_decisions`]).
const DECISION_POLL: Duration = Duration::from_millis(100);

/// How long a wait that follows what Kueue writes goes without reading the decision, should no
/// wake come (a watch that stalls without ending).
const DECISION_FALLBACK: Duration = Duration::from_secs(1);

/// Sends `step` at `version`; when the target moved on, reads it again and, if it is still as
/// the plan found it, sends the step again at its new version (see the module docs).
async fn conditionally(
    kube: &dyn KubeApplier,
    action: &Action,
    step: &Step,
    version: &mut Option<Version>,
) -> ActionResultOf {
    let kube_error = |step: &str, source: KubeApplyError| {
        Box::new(ApplyError::Kube {
            addr: action.addr.clone(),
            step: step.to_string(),
            source,
        })
    };
    let mut rereads = 0;
    loop {
        let sent = match step {
            Step::KubeApply { object } => kube.apply(object, version.as_ref()).await,
            Step::KubeDelete {
                api_version,
                kind,
                namespace,
                name,
            } => {
                kube.delete(
                    api_version,
                    kind,
                    namespace.as_deref(),
                    name,
                    version.as_ref(),
                )
                .await
            }
            _ => Err(KubeApplyError::new(
                "a GKE call in a Kubernetes action",
                None,
            )),
        };
        match sent {
            Ok(()) => return Ok(()),
            Err(e) if e.changed && rereads < REREADS => {
                rereads += 1;
                let live = match probe_of(action) {
                    Some(probe) => kube
                        .get(&action.addr, &probe)
                        .await
                        .map_err(|e| kube_error("get", e))?,
                    None => None,
                };
                check_fresh(action, live.as_ref())?;
                *version = live.as_ref().and_then(Version::of);
            }
            Err(e) => return Err(kube_error(step.method(), e)),
        }
    }
}
