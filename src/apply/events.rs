//! What the executor reports while it works, and where it reports it.
//!
//! The executor never prints: it emits [`ApplyEvent`]s to a [`Sink`]. The terminal renderer and
//! the JSON-lines renderer in [`crate::render`] are sinks; tests use [`RecordingSink`].

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::addr::ResourceAddr;
use crate::plan::ActionKind;

/// One thing that happened during apply. JSON form: `{"event": "<kebab-case name>", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum ApplyEvent {
    /// The walk begins; `changes` actions will change something.
    #[serde(rename_all = "camelCase")]
    ApplyStarted { changes: usize },
    #[serde(rename_all = "camelCase")]
    ActionStarted {
        addr: ResourceAddr,
        kind: ActionKind,
        reason: String,
    },
    /// An API call of the action begins (`nodePools.setAutoscaling`, `kubernetes.apply`, ...).
    #[serde(rename_all = "camelCase")]
    StepStarted { addr: ResourceAddr, step: String },
    /// A long-running GKE operation was polled.
    #[serde(rename_all = "camelCase")]
    Progress {
        addr: ResourceAddr,
        step: String,
        operation: String,
        operation_type: String,
        status: String,
        elapsed_ms: u64,
    },
    /// The action waits for something else (another operation on the cluster).
    #[serde(rename_all = "camelCase")]
    Waiting {
        addr: ResourceAddr,
        step: String,
        reason: String,
        elapsed_ms: u64,
    },
    /// Job `job` of the `jobs` this apply submits to Kueue was created: what follows waits until
    /// Kueue has decided on it (quota reserved, or a scheduling attempt's reason recorded), at
    /// most `limit_ms`. Sent when the wait begins and about once a second while it lasts.
    #[serde(rename_all = "camelCase")]
    AwaitingKueue {
        addr: ResourceAddr,
        job: usize,
        jobs: usize,
        elapsed_ms: u64,
        limit_ms: u64,
    },
    /// The wait for Kueue's decision on job `job` ended: `decided` is false when the time ran
    /// out (the jobs after it are submitted anyway; the plan's prediction for them may not hold).
    #[serde(rename_all = "camelCase")]
    KueueDecided {
        addr: ResourceAddr,
        job: usize,
        jobs: usize,
        decided: bool,
        elapsed_ms: u64,
    },
    #[serde(rename_all = "camelCase")]
    ActionFinished {
        addr: ResourceAddr,
        kind: ActionKind,
        elapsed_ms: u64,
    },
    /// The action failed or was refused (stale, blocked); `hint` says what the user can do.
    #[serde(rename_all = "camelCase")]
    ActionFailed {
        addr: ResourceAddr,
        kind: ActionKind,
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hint: Option<String>,
    },
    /// Not attempted, because an action it depends on did not succeed.
    #[serde(rename_all = "camelCase")]
    ActionSkipped {
        addr: ResourceAddr,
        kind: ActionKind,
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    ApplyFinished {
        succeeded: usize,
        failed: usize,
        skipped: usize,
        elapsed_ms: u64,
    },
}

/// Where events go. Implementations must not block for long: the executor calls `emit` inline.
pub trait Sink: Send + Sync {
    fn emit(&self, event: &ApplyEvent);
}

/// Discards events.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl Sink for NullSink {
    fn emit(&self, _event: &ApplyEvent) {}
}

/// Keeps events in memory, for tests and for callers that render a report afterwards.
#[derive(Debug, Default)]
pub struct RecordingSink {
    events: Mutex<Vec<ApplyEvent>>,
}

impl RecordingSink {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn events(&self) -> Vec<ApplyEvent> {
        self.events
            .lock()
            .map(|events| events.clone())
            .unwrap_or_default()
    }
}

impl Sink for RecordingSink {
    fn emit(&self, event: &ApplyEvent) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event.clone());
        }
    }
}

/// Sends each event to several sinks (say, the terminal and a JSON log file).
pub struct FanOut<'a>(pub Vec<&'a dyn Sink>);

impl Sink for FanOut<'_> {
    fn emit(&self, event: &ApplyEvent) {
        for sink in &self.0 {
            sink.emit(event);
        }
    }
}
