//! One apply at a time: the local target's state directory lock, taken before planning, and the
//! cluster's Lease, taken before acting.

use std::time::Duration;

use super::session::{KubeSource, Session, TargetOptions, resolve_target, state_dir};
use crate::gitops::lock::{self, ApplyLock, LockOptions};
use crate::kube::client::RealKube;
use crate::spec::Loaded;

/// This process as a lock holder, for callers that name themselves (the agent's identity), and
/// a holder other than this process (an agent's replica).
pub use crate::gitops::lock::{LockHolder, Superseded, holder_identity};

fn lock_options(timeout: Duration) -> LockOptions {
    LockOptions {
        timeout,
        ..LockOptions::default()
    }
}

fn announce_wait(timeout: Duration) -> impl FnMut(&str) + Send {
    move |holder: &str| {
        let timeout = crate::vocab::duration::human(timeout);
        tracing::info!(
            target: super::NOTICE,
            holder,
            %timeout,
            "Waiting up to {timeout} for the cluster's lock, held by {holder}..."
        );
    }
}

fn lock_error(e: lock::LockError) -> anyhow::Error {
    let hint = e.hint();
    anyhow::anyhow!("{e}\nhint: {hint}")
}

/// Takes the local target's state lock (`<state dir>/apply.lock`) when `spec` resolves to the
/// local target; `None` for Google Cloud.
///
/// It is taken *before* planning: each gkq process loads the local world from the state
/// directory when it connects, so a second apply must not even read it until the first has
/// written everything back. (On Google Cloud, GKE and the API server are the shared truth, and
/// the Lease plus the whole-plan check after it are enough.)
pub async fn lock_local_state(
    loaded: &Loaded,
    target: &TargetOptions,
    timeout: Duration,
) -> anyhow::Result<Option<ApplyLock>> {
    if resolve_target(target, loaded) != crate::spec::types::Target::Local {
        return Ok(None);
    }
    lock_state_dir(&state_dir(target, loaded), timeout)
        .await
        .map(Some)
}

/// The local target's state lock for a known state directory (saved plans name theirs).
pub async fn lock_state_dir(dir: &std::path::Path, timeout: Duration) -> anyhow::Result<ApplyLock> {
    super::session::ensure_state_dir(dir)?;
    let options = lock_options(timeout);
    let mut on_wait = announce_wait(options.timeout);
    lock::file(dir, &lock::holder_identity(), &options, &mut on_wait)
        .await
        .map_err(lock_error)
}

/// Takes the cluster's Lease when Kubernetes is reachable now, as `holder` (default: this
/// process). Before the cluster exists there is
/// nothing to hold it in: GKE runs one operation per cluster at a time and refuses a second
/// create. (The local target's own state is locked by [`lock_local_state`].)
pub async fn acquire_lock(
    session: &Session,
    kube_client: Option<&RealKube>,
    stack: &str,
    timeout: Duration,
    holder: Option<&LockHolder>,
) -> anyhow::Result<ApplyLock> {
    let real = match (&session.kube, kube_client) {
        (KubeSource::Kubeconfig(k), _) => Some(k),
        (_, Some(k)) => Some(k),
        _ => None,
    };
    let Some(kube) = real else {
        return Ok(ApplyLock::unlocked(if session.simulated() {
            "the local target's state directory is locked instead"
        } else {
            "Kubernetes is not reachable yet; GKE runs one operation per cluster at a time"
        }));
    };
    let options = LockOptions {
        superseded: holder.and_then(|h| h.superseded.clone()),
        ..lock_options(timeout)
    };
    let identity = holder.map_or_else(lock::holder_identity, |h| h.identity.clone());
    let mut on_wait = announce_wait(options.timeout);
    let held = lock::lease(
        kube.client().clone(),
        stack,
        &identity,
        &options,
        &mut on_wait,
    )
    .await
    .map_err(lock_error)?;
    tracing::info!("holding {}", held.describe());
    Ok(held)
}
