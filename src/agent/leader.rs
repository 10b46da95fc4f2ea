//! One active replica: leader election with a `coordination.k8s.io/v1` Lease, as client-go's
//! leaderelection package does it (docs/agent.md explains the semantics relied on).
//!
//! - A candidate takes the Lease when it does not exist, or when its record (holder, renew time)
//!   has not changed for a whole `leaseDurationSeconds` *as observed by the candidate's own
//!   clock*, so clocks of different machines need not agree. Every write is a create or a
//!   replace conditioned on the resourceVersion read, so two candidates never both win.
//! - The leader renews every third of the duration. When it has not renewed for two thirds of
//!   the duration (its renew deadline), or finds another holder, it stops: the process exits
//!   (fail-stop), so a leader that lost its Lease never acts again. A replica acts only while its
//!   last renewal is younger than the renew deadline, which is shorter than the time any other
//!   candidate must wait: two replicas never act at once.
//! - On SIGTERM the leader stops acting, then releases the Lease (an empty holder, as client-go's
//!   `ReleaseOnCancel` does), so a standby takes over at its next attempt instead of a lease
//!   duration later.
//! - A replica that leads supersedes every holder it saw lead before it: those have stopped
//!   acting, so the cluster apply Leases they hold (named by `decide::apply_lock_holder`) are
//!   taken over at once, not after they expire.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

use super::decide::replica_of;
use super::reconcile::Leadership;

#[derive(Debug, Clone)]
pub struct LeaderOptions {
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica (`<host> pid <pid>`, or the pod name).
    pub identity: String,
    pub lease_duration: Duration,
}

impl LeaderOptions {
    fn renew_every(&self) -> Duration {
        (self.lease_duration / 3).max(Duration::from_millis(200))
    }

    fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }

    /// How often a standby reads the Lease: often enough that a released Lease is taken within
    /// two seconds whatever the duration.
    fn retry(&self) -> Duration {
        (self.lease_duration / 8).clamp(Duration::from_millis(200), Duration::from_secs(2))
    }
}

/// The held Lease: leading while the last renewal is younger than the renew deadline, and until
/// released.
pub struct LeaseLeadership {
    api: Api<Lease>,
    options: LeaderOptions,
    renewed: Arc<Mutex<Instant>>,
    renewal: tokio::task::JoinHandle<()>,
    released: AtomicBool,
    /// The other identities this replica saw hold the Lease before it led.
    earlier: BTreeSet<String>,
}

impl Leadership for LeaseLeadership {
    fn is_leading(&self) -> bool {
        let renewed = *self.renewed.lock().unwrap_or_else(|e| e.into_inner());
        !self.released.load(Ordering::SeqCst) && renewed.elapsed() < self.options.renew_deadline()
    }

    fn supersedes(&self, apply_lock_holder: &str) -> bool {
        self.is_leading()
            && replica_of(apply_lock_holder).is_some_and(|replica| self.earlier.contains(replica))
    }
}

impl LeaseLeadership {
    /// Stops renewing and gives the Lease up if this replica still holds it: its holder is
    /// emptied (conditioned on the version read), so a standby takes it at its next read.
    /// Called once this replica has stopped acting.
    pub async fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
        self.renewal.abort();
        let (namespace, name) = (&self.options.namespace, &self.options.name);
        // A renewal that was being written when the task was aborted makes the first replace
        // conflict: read again.
        for _ in 0..3 {
            let lease = match self.api.get_opt(name).await {
                Ok(Some(lease)) => lease,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("could not release Lease {namespace}/{name}: {e}");
                    return;
                }
            };
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.options.identity.as_str()) {
                return;
            }
            let mut released = lease.clone();
            released.spec = Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                renew_time: Some(MicroTime(Timestamp::now())),
                ..spec
            });
            match self
                .api
                .replace(name, &PostParams::default(), &released)
                .await
            {
                Ok(_) => {
                    tracing::info!("released Lease {namespace}/{name}");
                    return;
                }
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => {
                    tracing::warn!(
                        "could not release Lease {namespace}/{name}: {e}; it expires by itself"
                    );
                    return;
                }
            }
        }
    }
}

/// Always leading: the local target, whose state directory lock already admits one agent.
pub struct Alone;

impl Leadership for Alone {
    fn is_leading(&self) -> bool {
        true
    }
}

fn lease_object(options: &LeaderOptions, transitions: i32, acquired: MicroTime) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            namespace: Some(options.namespace.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(options.identity.clone()),
            acquire_time: Some(acquired),
            renew_time: Some(MicroTime(Timestamp::now())),
            lease_duration_seconds: Some(
                i32::try_from(options.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

/// What identifies one write of the Lease record (holder, renew time), to see whether it changed.
type Record = (Option<String>, Option<String>);

fn record(lease: &Lease) -> Record {
    let spec = lease.spec.clone().unwrap_or_default();
    (
        spec.holder_identity,
        spec.renew_time.map(|t| t.0.to_string()),
    )
}

/// Waits until this replica holds the Lease, then keeps renewing it in the background; exits the
/// process when it cannot (fail-stop). `on_wait` is told the holder once when another one leads.
pub async fn lead(
    client: kube::Client,
    options: LeaderOptions,
    mut on_wait: impl FnMut(&str),
) -> Result<LeaseLeadership, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client, &options.namespace);
    let mut observed: Option<(Record, Instant)> = None;
    let mut earlier = BTreeSet::new();
    let mut told = false;
    loop {
        let current = api.get_opt(&options.name).await?;
        let attempt = match &current {
            None => api
                .create(
                    &PostParams::default(),
                    &lease_object(&options, 0, MicroTime(Timestamp::now())),
                )
                .await
                .map(|_| ()),
            Some(lease) => {
                let seen = record(lease);
                let mine = seen.0.as_deref() == Some(options.identity.as_str());
                if let Some(holder) = seen.0.as_deref().filter(|h| !h.is_empty() && !mine) {
                    earlier.insert(holder.to_string());
                }
                let since = match &observed {
                    Some((r, at)) if *r == seen => *at,
                    _ => {
                        observed = Some((seen.clone(), Instant::now()));
                        Instant::now()
                    }
                };
                let duration = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.lease_duration_seconds)
                    .and_then(|s| u64::try_from(s).ok())
                    .map_or(options.lease_duration, Duration::from_secs);
                let free = seen.0.as_deref().is_none_or(str::is_empty);
                if mine || free || since.elapsed() >= duration {
                    let transitions = lease
                        .spec
                        .as_ref()
                        .and_then(|s| s.lease_transitions)
                        .unwrap_or(0);
                    let mut taken = lease_object(
                        &options,
                        transitions + i32::from(!mine),
                        MicroTime(Timestamp::now()),
                    );
                    taken.metadata.resource_version = lease.metadata.resource_version.clone();
                    if !mine && !free {
                        tracing::warn!(
                            "taking over Lease {}/{} from {}: not renewed for {}",
                            options.namespace,
                            options.name,
                            seen.0.clone().unwrap_or_default(),
                            crate::vocab::duration::human(since.elapsed())
                        );
                    }
                    api.replace(&options.name, &PostParams::default(), &taken)
                        .await
                        .map(|_| ())
                } else {
                    if !told {
                        on_wait(seen.0.as_deref().unwrap_or_default());
                        told = true;
                    }
                    tokio::time::sleep(options.retry()).await;
                    continue;
                }
            }
        };
        match attempt {
            Ok(()) => break,
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => {
                tracing::warn!(
                    "could not take Lease {}/{}: {e}; retrying",
                    options.namespace,
                    options.name
                );
                tokio::time::sleep(options.retry()).await;
            }
        }
    }
    tracing::info!(
        "leading: holding Lease {}/{} as {}",
        options.namespace,
        options.name,
        options.identity
    );
    let renewed = Arc::new(Mutex::new(Instant::now()));
    let renewal = tokio::spawn(renew(api.clone(), options.clone(), renewed.clone()));
    Ok(LeaseLeadership {
        api,
        options,
        renewed,
        renewal,
        released: AtomicBool::new(false),
        earlier,
    })
}

/// Renews the Lease until renewal fails for longer than the renew deadline or another holder
/// appears; then exits the process.
async fn renew(api: Api<Lease>, options: LeaderOptions, renewed: Arc<Mutex<Instant>>) {
    loop {
        tokio::time::sleep(options.renew_every()).await;
        let outcome = async {
            let lease = api
                .get(&options.name)
                .await
                .map_err(|e| (false, e.to_string()))?;
            let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
            if holder.as_deref() != Some(options.identity.as_str()) {
                return Err((
                    true,
                    format!("taken over by {}", holder.unwrap_or_default()),
                ));
            }
            let mut next = lease.clone();
            if let Some(spec) = next.spec.as_mut() {
                spec.renew_time = Some(MicroTime(Timestamp::now()));
            }
            api.replace(&options.name, &PostParams::default(), &next)
                .await
                .map_err(|e| (false, e.to_string()))
        }
        .await;
        match outcome {
            Ok(_) => *renewed.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now(),
            Err((lost, why)) => {
                let last = *renewed.lock().unwrap_or_else(|e| e.into_inner());
                if lost || last.elapsed() >= options.renew_deadline() {
                    tracing::error!(
                        "lost leadership of Lease {}/{} ({why}); stopping so that only the leader acts",
                        options.namespace,
                        options.name
                    );
                    std::process::exit(1);
                }
                tracing::warn!(
                    "could not renew Lease {}/{}: {why}; retrying",
                    options.namespace,
                    options.name
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standby_reads_the_lease_within_two_seconds_whatever_its_duration() {
        let options = |secs| LeaderOptions {
            namespace: "ns".into(),
            name: "gkq-agent".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(secs),
        };
        assert_eq!(options(4).retry(), Duration::from_millis(500));
        assert_eq!(options(15).retry(), Duration::from_millis(1875));
        assert_eq!(options(60).retry(), Duration::from_secs(2));
        assert!(options(60).renew_deadline() < options(60).lease_duration);
    }
}
