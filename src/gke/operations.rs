//! Long-running operations: waiting for them, and waiting out another operation on the cluster.
//! This is the one implementation: `gkq apply`, the revision labels and library users all wait
//! through it.
//!
//! GKE runs one operation per cluster at a time. A mutating call made while another runs fails
//! with [`GkeError::ClusterBusy`] (400 `CLUSTER_ALREADY_HAS_OPERATION` / "incompatible
//! operation", or 429 "too many operations"); [`retry_while_busy`] waits for the named operation
//! (or backs off when none is named) and calls again, so that this is never reported as a
//! failure. [`run_operation`] combines it with [`wait_operation`]. The `*_until` forms take an
//! [`Interrupt`] (Ctrl-C) that ends a wait early with [`GkeError::Interrupted`].

use std::future::Future;
use std::time::{Duration, Instant};

use super::{ClusterRef, GkeApi, GkeError, GkeResult, Operation};
use crate::interrupt::Interrupt;

/// How operations are polled. The GKE client picks [`PollConfig::fast`] when its endpoint is on
/// loopback (the emulator) and [`PollConfig::default`] otherwise; see [`GkeApi::poll_config`].
#[derive(Debug, Clone, PartialEq)]
pub struct PollConfig {
    /// First delay between polls.
    pub initial: Duration,
    /// Largest delay between polls.
    pub max: Duration,
    /// Growth of the delay after each poll.
    pub multiplier: f64,
    /// Give up waiting for one operation after this long (it may still finish on GKE's side).
    pub timeout: Duration,
    /// Give up waiting for a busy cluster to be free after this long.
    pub busy_timeout: Duration,
    /// Consecutive transport errors tolerated while polling an operation.
    pub poll_error_retries: u32,
}

impl Default for PollConfig {
    /// Against GKE: 2 s growing to 15 s (gcloud polls every 5 s), for up to 2 hours (TPU pools
    /// and cluster creation take minutes; a stocked-out zone can keep a create retrying longer).
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(15),
            multiplier: 1.5,
            timeout: Duration::from_secs(2 * 3600),
            busy_timeout: Duration::from_secs(2 * 3600),
            poll_error_retries: 5,
        }
    }
}

impl PollConfig {
    /// For the emulator: 10 ms growing to 100 ms, for up to 10 minutes.
    pub fn fast() -> Self {
        Self {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
            timeout: Duration::from_secs(600),
            busy_timeout: Duration::from_secs(600),
            ..Self::default()
        }
    }

    /// No waiting between polls: for fakes and emulators whose operations advance per poll.
    pub fn immediate() -> Self {
        Self {
            initial: Duration::ZERO,
            max: Duration::ZERO,
            ..Self::default()
        }
    }

    pub(crate) fn next(&self, delay: Duration) -> Duration {
        // try_from: a multiplier that is negative, NaN or huge must not panic mid-wait.
        Duration::try_from_secs_f64(delay.as_secs_f64() * self.multiplier)
            .unwrap_or(self.max)
            .min(self.max)
            .max(self.initial)
    }
}

/// How one wait runs: its polling, and what may interrupt it.
#[derive(Debug, Clone, Copy)]
pub struct WaitOptions<'a> {
    pub poll: &'a PollConfig,
    pub interrupt: Option<&'a Interrupt>,
}

/// `projects/P/locations/L/clusters/C[/nodePools/NP]` for an operation's target, rebuilt from
/// the cluster reference and the `targetLink` (which GKE writes with the project number and a
/// `/zones/` path).
pub fn operation_target(cluster: &ClusterRef, op: &Operation) -> String {
    let link = op.target_link.as_deref().unwrap_or_default();
    if let Some(i) = link.find("/nodePools/") {
        let pool = link[i + "/nodePools/".len()..]
            .split('/')
            .next()
            .unwrap_or_default();
        return cluster.node_pool(pool);
    }
    if link.contains("/clusters/") || link.is_empty() {
        return cluster.name();
    }
    link.to_string()
}

/// Whether an operation is DONE: by name, or by number for clients that ask for
/// `enum-encoding=int` (DONE = 3).
pub fn is_done(op: &Operation) -> bool {
    matches!(op.status.as_str(), "DONE" | "3")
}

/// `projects/p/locations/l/operations/operation-1` -> `operation-1`.
pub fn short_operation_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Whether a DONE operation failed, and how: `error` (a `google.rpc.Status`) or, on older
/// servers, `statusMessage` (gcloud and terraform check both); a bare error code when neither
/// has words.
pub fn operation_failure(cluster: &ClusterRef, op: &Operation) -> Option<GkeError> {
    let status_message = op.status_message.clone().filter(|m| !m.is_empty());
    let (code, message) = match (&op.error, status_message) {
        (Some(e), status_message) if e.code != 0 || !e.message.is_empty() => {
            let message = if !e.message.is_empty() {
                e.message.clone()
            } else {
                status_message.unwrap_or_else(|| format!("error code {}", e.code))
            };
            (e.code, message)
        }
        (_, Some(m)) => (2, m),
        _ => return None,
    };
    Some(GkeError::OperationFailed {
        operation: op.name.clone(),
        operation_type: op.operation_type.clone(),
        target: operation_target(cluster, op),
        code,
        message,
    })
}

/// Polls `op` until it is DONE, with growing delays ([`GkeApi::poll_config`]). `progress` is
/// called with each observed state and the time elapsed since the wait began. Returns the DONE
/// operation, or [`GkeError::OperationFailed`] with GKE's message and the target resource when
/// the operation ended with an error (stockouts arrive this way). An operation with an empty
/// name that is already DONE (the client synthesises one when the record is gone) returns at
/// once.
pub async fn wait_operation(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    op: &Operation,
    progress: impl FnMut(&Operation, Duration),
) -> GkeResult<Operation> {
    wait_operation_with(api, cluster, op, &api.poll_config(), progress).await
}

/// [`wait_operation`] with explicit polling intervals.
pub async fn wait_operation_with(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    op: &Operation,
    poll: &PollConfig,
    progress: impl FnMut(&Operation, Duration),
) -> GkeResult<Operation> {
    let options = WaitOptions {
        poll,
        interrupt: None,
    };
    wait_operation_until(api, cluster, op, options, progress).await
}

/// [`wait_operation`] with explicit options: an interrupt ends it with
/// [`GkeError::Interrupted`] (the operation goes on in GKE), [`PollConfig::timeout`] with
/// [`GkeError::WaitTimedOut`]; up to [`PollConfig::poll_error_retries`] transport errors in a
/// row are polled through.
pub async fn wait_operation_until(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    op: &Operation,
    options: WaitOptions<'_>,
    mut progress: impl FnMut(&Operation, Duration),
) -> GkeResult<Operation> {
    let poll = options.poll;
    let start = Instant::now();
    let mut delay = poll.initial;
    let mut poll_errors = 0;
    let mut current = op.clone();
    loop {
        progress(&current, start.elapsed());
        if is_done(&current) {
            return match operation_failure(cluster, &current) {
                Some(e) => Err(e),
                None => Ok(current),
            };
        }
        if current.name.is_empty() {
            return Err(GkeError::Transport(format!(
                "cannot wait for an operation without a name ({} on {})",
                current.operation_type,
                operation_target(cluster, &current)
            )));
        }
        let interrupted = || GkeError::Interrupted {
            last: Some(Box::new(current.clone())),
        };
        if options.interrupt.is_some_and(Interrupt::is_set) {
            return Err(interrupted());
        }
        if start.elapsed() >= poll.timeout {
            return Err(GkeError::WaitTimedOut {
                timeout: poll.timeout,
                operation: current.name.clone(),
                operation_type: current.operation_type.clone(),
                target: operation_target(cluster, &current),
            });
        }
        if Interrupt::sleep(options.interrupt, delay).await {
            return Err(interrupted());
        }
        delay = poll.next(delay);
        match api
            .get_operation(cluster, short_operation_name(&current.name))
            .await
        {
            Ok(next) => {
                poll_errors = 0;
                current = next;
            }
            Err(GkeError::Transport(e)) if poll_errors < poll.poll_error_retries => {
                tracing::debug!("polling {}: {e}", current.name);
                poll_errors += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Runs a mutating call; while GKE answers [`GkeError::ClusterBusy`], waits for the operation it
/// names (reporting it through `progress`; its own outcome does not matter here) or, when none is
/// named, backs off, and then calls again. Gives up after [`PollConfig::busy_timeout`] with the
/// last `ClusterBusy` error. Every other result is returned as is.
pub async fn retry_while_busy<T, F, Fut>(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    call: F,
    progress: impl FnMut(&Operation, Duration),
) -> GkeResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = GkeResult<T>>,
{
    let poll = api.poll_config();
    let options = WaitOptions {
        poll: &poll,
        interrupt: None,
    };
    retry_while_busy_until(api, cluster, call, options, |_, _, _| {}, progress).await
}

/// [`retry_while_busy`] with explicit options. `on_busy` hears each refusal (the blocking
/// operation, if named, GKE's message, the time since the first call) before the wait; an
/// interrupt ends the wait with [`GkeError::Interrupted`] and no call is made after it.
pub async fn retry_while_busy_until<T, F, Fut>(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    mut call: F,
    options: WaitOptions<'_>,
    mut on_busy: impl FnMut(Option<&str>, &str, Duration),
    mut progress: impl FnMut(&Operation, Duration),
) -> GkeResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = GkeResult<T>>,
{
    let poll = options.poll;
    let start = Instant::now();
    let mut delay = poll.initial;
    loop {
        // A refused call was not accepted, so making it again is safe (no duplicate create).
        let err = match call().await {
            Err(e @ GkeError::ClusterBusy { .. }) => e,
            other => return other,
        };
        if start.elapsed() >= poll.busy_timeout {
            return Err(err);
        }
        let GkeError::ClusterBusy { operation, message } = &err else {
            unreachable!()
        };
        tracing::info!(cluster = %cluster.name(), "cluster busy, waiting: {message}");
        on_busy(operation.as_deref(), message, start.elapsed());
        let waited = match operation {
            Some(id) => wait_for_blocking(api, cluster, id, options, start, &mut progress).await,
            None => false,
        };
        if options.interrupt.is_some_and(Interrupt::is_set) {
            return Err(GkeError::Interrupted { last: None });
        }
        if waited {
            delay = poll.initial;
        } else {
            if Interrupt::sleep(options.interrupt, delay).await {
                return Err(GkeError::Interrupted { last: None });
            }
            delay = poll.next(delay);
        }
    }
}

/// Waits for the operation that made the cluster busy, within what is left of the busy timeout
/// since `start`. Whether it was waited to its end (its failure is not ours); when it is gone
/// or unreadable, the caller backs off and calls again, which tells whether the cluster is free.
async fn wait_for_blocking(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    id: &str,
    options: WaitOptions<'_>,
    start: Instant,
    progress: &mut impl FnMut(&Operation, Duration),
) -> bool {
    let other = match api.get_operation(cluster, short_operation_name(id)).await {
        Ok(other) => other,
        Err(e) => {
            tracing::debug!("reading blocking operation {id}: {e}");
            return false;
        }
    };
    let poll = PollConfig {
        timeout: options.poll.busy_timeout.saturating_sub(start.elapsed()),
        ..options.poll.clone()
    };
    let options = WaitOptions {
        poll: &poll,
        ..options
    };
    match wait_operation_until(api, cluster, &other, options, &mut *progress).await {
        Ok(_) | Err(GkeError::OperationFailed { .. }) => true,
        Err(e) => {
            tracing::debug!("waiting for {id}: {e}");
            false
        }
    }
}

/// A mutating call that returns an operation, waited out when the cluster is busy, then the
/// operation waited for: the one-stop way to apply a change.
pub async fn run_operation<F, Fut>(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    call: F,
    mut progress: impl FnMut(&Operation, Duration),
) -> GkeResult<Operation>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = GkeResult<Operation>>,
{
    let op = retry_while_busy(api, cluster, call, &mut progress).await?;
    wait_operation(api, cluster, &op, &mut progress).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gke::RpcStatus;

    fn cluster() -> ClusterRef {
        ClusterRef {
            project: "p".into(),
            location: "us-east5-b".into(),
            cluster: "c".into(),
        }
    }

    fn op(target: &str) -> Operation {
        Operation {
            name: "operation-1".into(),
            operation_type: "CREATE_NODE_POOL".into(),
            status: "DONE".into(),
            target_link: Some(target.into()),
            ..Default::default()
        }
    }

    #[test]
    fn done_by_name_or_number_and_short_names() {
        let mut o = op("x");
        assert!(is_done(&o));
        o.status = "3".into();
        assert!(is_done(&o));
        o.status = "RUNNING".into();
        assert!(!is_done(&o));
        assert_eq!(
            short_operation_name("projects/p/locations/z/operations/operation-1"),
            "operation-1"
        );
    }

    #[test]
    fn targets() {
        let c = cluster();
        let o = op(
            "https://container.googleapis.com/v1/projects/123/zones/us-east5-b/clusters/c/nodePools/dws-pool",
        );
        assert_eq!(
            operation_target(&c, &o),
            "projects/p/locations/us-east5-b/clusters/c/nodePools/dws-pool"
        );
        let o = op("https://container.googleapis.com/v1/projects/123/zones/us-east5-b/clusters/c");
        assert_eq!(
            operation_target(&c, &o),
            "projects/p/locations/us-east5-b/clusters/c"
        );
    }

    #[test]
    fn failures_from_error_or_status_message() {
        let c = cluster();
        let ok = op("x/clusters/c");
        assert!(operation_failure(&c, &ok).is_none());
        let mut e = op("x/clusters/c/nodePools/np");
        e.error = Some(RpcStatus {
            code: 8,
            message: "Google Compute Engine: ... [GCE_STOCKOUT] ...".into(),
            details: vec![],
        });
        let err = operation_failure(&c, &e).unwrap();
        assert!(err.is_stockout());
        assert!(err.to_string().contains("nodePools/np"));
        // Older servers: only statusMessage.
        let mut s = op("x/clusters/c");
        s.status_message = Some(
            "Try a different location, or try again later: Google Compute \
            Engine does not have enough resources available to fulfill request: us-east5-b."
                .into(),
        );
        let err = operation_failure(&c, &s).unwrap();
        assert!(matches!(err, GkeError::OperationFailed { code: 2, .. }));
        assert!(err.is_stockout());
        // An error with a code and no words.
        let mut bare = op("x/clusters/c");
        bare.error = Some(RpcStatus {
            code: 13,
            message: String::new(),
            details: vec![],
        });
        let err = operation_failure(&c, &bare).unwrap();
        assert!(
            matches!(&err, GkeError::OperationFailed { message, .. } if message == "error code 13")
        );
        // A quota failure is not a stockout.
        let mut q = op("x/clusters/c");
        q.error = Some(RpcStatus {
            code: 8,
            message: "Insufficient regional quota to satisfy request: resource \"TPUS\"".into(),
            details: vec![],
        });
        assert!(!operation_failure(&c, &q).unwrap().is_stockout());
    }
}
