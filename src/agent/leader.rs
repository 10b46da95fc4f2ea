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

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

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

    fn retry(&self) -> Duration {
        (self.lease_duration / 5).max(Duration::from_millis(200))
    }
}

/// The held Lease: leading while the last renewal is younger than the renew deadline.
pub struct LeaseLeadership {
    renewed: Arc<Mutex<Instant>>,
    deadline: Duration,
}

impl Leadership for LeaseLeadership {
    fn is_leading(&self) -> bool {
        let renewed = *self.renewed.lock().unwrap_or_else(|e| e.into_inner());
        renewed.elapsed() < self.deadline
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
    tokio::spawn(renew(api, options.clone(), renewed.clone()));
    Ok(LeaseLeadership {
        renewed,
        deadline: options.renew_deadline(),
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
