//! Long-running operations: waiting for them, and waiting out another operation on the cluster.
//!
//! GKE runs one operation per cluster at a time. A mutating call made while another runs fails
//! with [`GkeError::ClusterBusy`] (400 `CLUSTER_ALREADY_HAS_OPERATION` / "incompatible
//! operation", or 429 "too many operations"); [`retry_while_busy`] waits for the named operation
//! (or backs off when none is named) and calls again, so that this is never reported as a
//! failure. [`run_operation`] combines it with [`wait_operation`].

use std::future::Future;
use std::time::{Duration, Instant};

use super::{ClusterRef, GkeApi, GkeError, GkeResult, Operation};

/// How operations are polled. The GKE client picks [`PollConfig::fast`] when its endpoint is on
/// loopback (the emulator) and [`PollConfig::default`] otherwise; see [`GkeApi::poll_config`].
#[derive(Debug, Clone, PartialEq)]
pub struct PollConfig {
    /// First delay between polls.
    pub initial: Duration,
    /// Largest delay between polls.
    pub max: Duration,
    /// Growth of the delay after each poll.
    pub factor: f64,
    /// Give up waiting after this long (the operation may still finish on GKE's side).
    pub timeout: Duration,
}

impl Default for PollConfig {
    /// Against GKE: 2 s growing to 15 s (gcloud polls every 5 s), for up to 2 hours (TPU pools
    /// and cluster creation take minutes; a stocked-out zone can keep a create retrying longer).
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(15),
            factor: 1.5,
            timeout: Duration::from_secs(2 * 3600),
        }
    }
}

impl PollConfig {
    /// For the emulator: 10 ms growing to 100 ms, for up to 10 minutes.
    pub fn fast() -> Self {
        Self {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
            factor: 1.5,
            timeout: Duration::from_secs(600),
        }
    }

    fn next(&self, d: Duration) -> Duration {
        d.mul_f64(self.factor.max(1.0)).min(self.max)
    }
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

/// Whether a DONE operation failed, and how: `error` (a `google.rpc.Status`) or, on older
/// servers, `statusMessage` (gcloud and terraform check both).
pub fn operation_failure(cluster: &ClusterRef, op: &Operation) -> Option<GkeError> {
    let (code, message) = match (&op.error, &op.status_message) {
        (Some(e), _) if e.code != 0 || !e.message.is_empty() => {
            let message = if e.message.is_empty() {
                op.status_message.clone().unwrap_or_default()
            } else {
                e.message.clone()
            };
            (e.code, message)
        }
        (_, Some(m)) if !m.is_empty() => (2, m.clone()),
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
    mut progress: impl FnMut(&Operation, Duration),
) -> GkeResult<Operation> {
    let start = Instant::now();
    let mut delay = poll.initial;
    let mut current = op.clone();
    loop {
        progress(&current, start.elapsed());
        if current.status == "DONE" {
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
        if start.elapsed() >= poll.timeout {
            return Err(GkeError::Transport(format!(
                "gave up after {:?} waiting for operation {} ({}) on {}; it may still be running",
                poll.timeout,
                current.name,
                current.operation_type,
                operation_target(cluster, &current)
            )));
        }
        tokio::time::sleep(delay).await;
        delay = poll.next(delay);
        current = api.get_operation(cluster, &current.name).await?;
    }
}

/// Runs a mutating call; while GKE answers [`GkeError::ClusterBusy`], waits for the operation it
/// names (reporting it through `progress`; its own outcome does not matter here) or, when none is
/// named, backs off, and then calls again. Gives up after [`PollConfig::timeout`] with the last
/// `ClusterBusy` error. Every other result is returned as is.
pub async fn retry_while_busy<T, F, Fut>(
    api: &dyn GkeApi,
    cluster: &ClusterRef,
    mut call: F,
    mut progress: impl FnMut(&Operation, Duration),
) -> GkeResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = GkeResult<T>>,
{
    let poll = api.poll_config();
    let start = Instant::now();
    let mut delay = poll.initial;
    loop {
        let err = match call().await {
            Err(e @ GkeError::ClusterBusy { .. }) => e,
            other => return other,
        };
        if start.elapsed() >= poll.timeout {
            return Err(err);
        }
        let GkeError::ClusterBusy { operation, message } = &err else {
            unreachable!()
        };
        tracing::info!(cluster = %cluster.name(), "cluster busy, waiting: {message}");
        let waited = match operation {
            Some(id) => match api.get_operation(cluster, id).await {
                Ok(other) => {
                    let r = wait_operation_with(api, cluster, &other, &poll, &mut progress).await;
                    match r {
                        // The other operation's failure is not ours.
                        Ok(_) | Err(GkeError::OperationFailed { .. }) => true,
                        Err(e) => {
                            tracing::debug!("waiting for {id}: {e}");
                            false
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!("reading blocking operation {id}: {e}");
                    false
                }
            },
            None => false,
        };
        if waited {
            delay = poll.initial;
        } else {
            tokio::time::sleep(delay).await;
            delay = poll.next(delay).max(poll.initial);
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
