//! One apply at a time per cluster.
//!
//! - Once Kubernetes is reachable: a `coordination.k8s.io/v1` Lease `gkq-lock-<stack>` in
//!   `kube-system`. Taking it is a create (which fails if it exists) or, for a free or expired
//!   lease, a replace conditioned on the resourceVersion that was read, so two appliers can never
//!   both win. The holder renews it every third of its duration while applying and deletes it
//!   when done. An apply that crashes stops renewing, and its lease expires after
//!   [`LockOptions::lease_duration`]; expiry is judged from the lease's `renewTime`, so the
//!   machines' clocks are assumed to agree to within a few seconds (NTP).
//! - Before the cluster exists there is nothing to hold a Lease: gkq relies on GKE, which runs one
//!   operation at a time per cluster and refuses a second `clusters.create` for the same name.
//!   The first apply that can reach Kubernetes takes the Lease from then on.
//! - The local target: an OS file lock (`flock`) on `<state dir>/apply.lock`, which the OS
//!   releases when the process exits, however it exits.
//!
//! With a zero timeout a held lock fails at once, naming its holder and its age; otherwise
//! acquisition retries until the timeout.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};

use super::provenance::who;
use crate::model::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use crate::vocab::duration::human;

pub const LOCK_NAMESPACE: &str = "kube-system";

/// The Lease's name for a stack.
pub fn lease_name(stack: &str) -> String {
    format!("gkq-lock-{stack}")
}

/// This process as a lock holder: `user@host pid N` (or the CI actor instead of `user@host`).
pub fn holder_identity() -> String {
    format!("{} pid {}", who(), std::process::id())
}

#[derive(Debug, Clone, PartialEq)]
pub struct LockOptions {
    /// How long to wait for a lock another apply holds; zero fails at once.
    pub timeout: Duration,
    /// How long a Lease stays valid without renewal: a crashed apply's lock frees itself after it.
    pub lease_duration: Duration,
    /// Pause between attempts while waiting.
    pub retry: Duration,
    /// Holders known to have stopped acting, whose Lease is taken at once instead of after it
    /// expires.
    pub superseded: Option<Superseded>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            timeout: Duration::ZERO,
            lease_duration: Duration::from_secs(60),
            retry: Duration::from_secs(2),
            superseded: None,
        }
    }
}

/// Says whether the holder of this identity is known to have stopped acting (the agent: a
/// replica that led before the replica that leads now, which has fail-stopped), so that its
/// Lease may be taken over before it expires. Asked again at every attempt.
#[derive(Clone)]
pub struct Superseded(pub Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl Superseded {
    fn holds(&self, identity: &str) -> bool {
        (self.0)(identity)
    }
}

impl std::fmt::Debug for Superseded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Superseded(..)")
    }
}

impl PartialEq for Superseded {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Who takes the cluster's Lease for an apply when it is not this process as
/// [`holder_identity`] names it: the agent's replica (per stack), and which earlier holders it
/// supersedes.
#[derive(Debug, Clone, PartialEq)]
pub struct LockHolder {
    pub identity: String,
    pub superseded: Option<Superseded>,
}

/// Who holds a lock, as read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub identity: String,
    pub acquired_at: Option<Timestamp>,
    pub renewed_at: Option<Timestamp>,
    /// For Leases: how long it stays valid after `renewed_at`.
    pub lease_duration: Option<Duration>,
}

impl Holder {
    fn expired(&self, now: Timestamp) -> bool {
        match (self.renewed_at.or(self.acquired_at), self.lease_duration) {
            (Some(renewed), Some(duration)) => since(renewed, now) > duration,
            _ => false,
        }
    }

    /// `alice@laptop pid 42, for 3m12s (renewed 4s ago)`.
    pub fn describe(&self, now: Timestamp) -> String {
        let mut text = self.identity.clone();
        if let Some(acquired) = self.acquired_at {
            text.push_str(&format!(", for {}", human(since(acquired, now))));
        }
        if let Some(renewed) = self.renewed_at {
            text.push_str(&format!(" (renewed {} ago)", human(since(renewed, now))));
        }
        text
    }
}

fn since(earlier: Timestamp, now: Timestamp) -> Duration {
    let millis = now
        .as_millisecond()
        .saturating_sub(earlier.as_millisecond());
    Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another apply holds the lock and the timeout is zero.
    #[error("{lock} is held by {holder}: another apply is running on this cluster")]
    Held {
        lock: String,
        holder: String,
        expires: Option<String>,
    },
    #[error("gave up after {waited} waiting for {lock}, still held by {holder}")]
    TimedOut {
        lock: String,
        holder: String,
        waited: String,
        expires: Option<String>,
    },
    #[error("cannot take {lock}: {message}")]
    Unavailable { lock: String, message: String },
}

impl LockError {
    pub fn hint(&self) -> String {
        match self {
            LockError::Held { expires, .. } | LockError::TimedOut { expires, .. } => {
                let mut hint = "Wait for that apply to finish, or pass --lock-timeout (e.g. 10m) to wait for it."
                    .to_string();
                if let Some(expires) = expires {
                    hint.push_str(&format!(" {expires}"));
                }
                hint
            }
            LockError::Unavailable { .. } => {
                "gkq needs permission to create, update and delete Leases in kube-system to lock the cluster while it applies."
                    .to_string()
            }
        }
    }
}

/// A lock held for the length of an apply. Release it with [`ApplyLock::release`]; dropping it
/// stops renewal, and the lock then expires (Lease) or is freed by the OS at exit (file).
pub struct ApplyLock {
    handle: Handle,
}

enum Handle {
    /// Nothing to lock yet (no Kubernetes): GKE serialises operations per cluster.
    Unlocked {
        reason: String,
    },
    Lease(Box<HeldLease>),
    File {
        file: std::fs::File,
        path: PathBuf,
    },
}

struct HeldLease {
    api: Api<Lease>,
    name: String,
    holder: String,
    renewal: tokio::task::JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl Drop for ApplyLock {
    fn drop(&mut self) {
        if let Handle::Lease(held) = &self.handle {
            held.renewal.abort();
        }
    }
}

impl ApplyLock {
    /// No lock, with the reason (shown at `-v`).
    pub fn unlocked(reason: impl Into<String>) -> Self {
        ApplyLock {
            handle: Handle::Unlocked {
                reason: reason.into(),
            },
        }
    }

    /// What is held: `Lease kube-system/gkq-lock-tpu-cluster`, a file, or why nothing is.
    pub fn describe(&self) -> String {
        match &self.handle {
            Handle::Unlocked { reason } => format!("no lock ({reason})"),
            Handle::Lease(held) => format!("Lease {LOCK_NAMESPACE}/{}", held.name),
            Handle::File { path, .. } => format!("lock file {}", path.display()),
        }
    }

    /// Whether this process still holds the lock, read now: a Lease is read again (another
    /// holder may have taken it over since the last renewal); a file lock and no lock hold until
    /// released. A Lease that cannot be read counts as lost: nothing is recorded on a guess.
    pub async fn still_held(&self) -> bool {
        match &self.handle {
            Handle::Lease(held) => {
                if held.lost.load(Ordering::SeqCst) {
                    return false;
                }
                match held.api.get_opt(&held.name).await {
                    Ok(Some(lease)) => holder_of(&lease).identity == held.holder,
                    Ok(None) => false,
                    Err(e) => {
                        tracing::warn!(
                            "could not read Lease {LOCK_NAMESPACE}/{} ({e}); it counts as lost",
                            held.name
                        );
                        false
                    }
                }
            }
            Handle::Unlocked { .. } | Handle::File { .. } => true,
        }
    }

    /// Gives the lock up: deletes the Lease if this process still holds it, unlocks the file.
    pub async fn release(mut self) {
        let handle = std::mem::replace(
            &mut self.handle,
            Handle::Unlocked {
                reason: "released".into(),
            },
        );
        match handle {
            Handle::Unlocked { .. } => {}
            Handle::Lease(held) => {
                held.renewal.abort();
                if let Err(e) = delete_if_held(&held.api, &held.name, &held.holder).await {
                    tracing::warn!(
                        "could not release Lease {LOCK_NAMESPACE}/{} ({e}); it expires by itself",
                        held.name
                    );
                }
            }
            Handle::File { file, path } => {
                // Truncate first so a stale holder never shows; then unlock (also done by close).
                let _ = file.set_len(0);
                if let Err(e) = file.unlock() {
                    tracing::warn!("could not unlock {}: {e}", path.display());
                }
            }
        }
    }
}

async fn delete_if_held(api: &Api<Lease>, name: &str, holder: &str) -> Result<(), kube::Error> {
    let Some(lease) = api.get_opt(name).await? else {
        return Ok(());
    };
    if holder_of(&lease).identity != holder {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: lease.metadata.resource_version.clone(),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Someone took it over in between, or it is already gone: either way it is not ours.
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

fn holder_of(lease: &Lease) -> Holder {
    let spec = lease.spec.clone().unwrap_or_default();
    Holder {
        identity: spec.holder_identity.unwrap_or_default(),
        acquired_at: spec.acquire_time.map(|t| t.0),
        renewed_at: spec.renew_time.map(|t| t.0),
        lease_duration: spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs),
    }
}

fn expiry_note(holder: &Holder, now: Timestamp) -> Option<String> {
    let renewed = holder.renewed_at.or(holder.acquired_at)?;
    let duration = holder.lease_duration?;
    let left = duration.saturating_sub(since(renewed, now));
    Some(format!(
        "If that apply crashed, its lock expires {} after its last renewal (in {}).",
        human(duration),
        human(left)
    ))
}

fn lease_object(name: &str, holder: &str, duration: Duration, transitions: i32) -> Lease {
    let now = MicroTime(Timestamp::now());
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(LOCK_NAMESPACE.to_string()),
            labels: Some(
                [(MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string())]
                    .into_iter()
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_string()),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_duration_seconds: Some(
                i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}

/// Takes the Lease for `stack`, waiting up to `options.timeout`. `on_wait` is called once, with
/// the holder, when the lock is taken and the caller will wait for it.
pub async fn lease(
    client: kube::Client,
    stack: &str,
    holder: &str,
    options: &LockOptions,
    on_wait: &mut (dyn FnMut(&str) + Send),
) -> Result<ApplyLock, LockError> {
    let name = lease_name(stack);
    let lock = format!("Lease {LOCK_NAMESPACE}/{name}");
    let api: Api<Lease> = Api::namespaced(client, LOCK_NAMESPACE);
    let unavailable = |e: kube::Error| LockError::Unavailable {
        lock: lock.clone(),
        message: e.to_string(),
    };
    let started = Instant::now();
    let mut announced = false;
    loop {
        let now = Timestamp::now();
        let current = api.get_opt(&name).await.map_err(unavailable)?;
        let attempt = match &current {
            None => api
                .create(
                    &PostParams::default(),
                    &lease_object(&name, holder, options.lease_duration, 0),
                )
                .await
                .map(|_| ()),
            Some(lease) => {
                let current_holder = holder_of(lease);
                let superseded = !current_holder.identity.is_empty()
                    && current_holder.identity != holder
                    && options
                        .superseded
                        .as_ref()
                        .is_some_and(|s| s.holds(&current_holder.identity));
                let free = current_holder.identity.is_empty()
                    || current_holder.identity == holder
                    || current_holder.expired(now)
                    || superseded;
                if free {
                    let transitions = lease
                        .spec
                        .as_ref()
                        .and_then(|s| s.lease_transitions)
                        .unwrap_or(0);
                    let mut taken =
                        lease_object(&name, holder, options.lease_duration, transitions + 1);
                    // The replace succeeds only if nobody wrote the Lease since it was read.
                    taken.metadata.resource_version = lease.metadata.resource_version.clone();
                    if superseded {
                        tracing::warn!(
                            "taking over {lock} from {}: that holder no longer acts",
                            current_holder.describe(now)
                        );
                    } else if current_holder.expired(now) {
                        tracing::warn!(
                            "taking over expired {lock} from {}",
                            current_holder.describe(now)
                        );
                    }
                    api.replace(&name, &PostParams::default(), &taken)
                        .await
                        .map(|_| ())
                } else {
                    let expires = expiry_note(&current_holder, now);
                    let described = current_holder.describe(now);
                    if options.timeout.is_zero() {
                        return Err(LockError::Held {
                            lock,
                            holder: described,
                            expires,
                        });
                    }
                    if started.elapsed() >= options.timeout {
                        return Err(LockError::TimedOut {
                            lock,
                            holder: described,
                            waited: human(started.elapsed()),
                            expires,
                        });
                    }
                    if !announced {
                        on_wait(&described);
                        announced = true;
                    }
                    let left = options.timeout.saturating_sub(started.elapsed());
                    tokio::time::sleep(options.retry.min(left)).await;
                    continue;
                }
            }
        };
        match attempt {
            Ok(()) => break,
            // Another applier won the race between our read and our write: read again.
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(unavailable(e)),
        }
    }
    let lost = Arc::new(AtomicBool::new(false));
    let renewal = tokio::spawn(renew(
        api.clone(),
        name.clone(),
        holder.to_string(),
        options.lease_duration,
        lost.clone(),
    ));
    Ok(ApplyLock {
        handle: Handle::Lease(Box::new(HeldLease {
            api,
            name,
            holder: holder.to_string(),
            renewal,
            lost,
        })),
    })
}

/// Renews the Lease every third of its duration until aborted or lost.
async fn renew(
    api: Api<Lease>,
    name: String,
    holder: String,
    duration: Duration,
    lost: Arc<AtomicBool>,
) {
    let period = (duration / 3).max(Duration::from_millis(200));
    loop {
        tokio::time::sleep(period).await;
        let lease = match api.get_opt(&name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                lost.store(true, Ordering::SeqCst);
                tracing::error!(
                    "Lease {LOCK_NAMESPACE}/{name} was deleted while this apply held it"
                );
                return;
            }
            Err(e) => {
                tracing::warn!("could not renew Lease {LOCK_NAMESPACE}/{name}: {e}; retrying");
                continue;
            }
        };
        if holder_of(&lease).identity != holder {
            lost.store(true, Ordering::SeqCst);
            tracing::error!(
                "Lease {LOCK_NAMESPACE}/{name} was taken over by {} while this apply held it",
                holder_of(&lease).identity
            );
            return;
        }
        let mut renewed = lease.clone();
        if let Some(spec) = renewed.spec.as_mut() {
            spec.renew_time = Some(MicroTime(Timestamp::now()));
        }
        if let Err(e) = api.replace(&name, &PostParams::default(), &renewed).await {
            tracing::warn!("could not renew Lease {LOCK_NAMESPACE}/{name}: {e}; retrying");
        }
    }
}

/// How long the local target's lock is retried quietly before it counts as held.
const MOMENTARY_HOLD: Duration = Duration::from_secs(2);

/// Takes the local target's lock file `<state_dir>/apply.lock`, waiting up to `options.timeout`.
pub async fn file(
    state_dir: &Path,
    holder: &str,
    options: &LockOptions,
    on_wait: &mut (dyn FnMut(&str) + Send),
) -> Result<ApplyLock, LockError> {
    let path = state_dir.join("apply.lock");
    let lock = format!("lock file {}", path.display());
    let unavailable = |e: std::io::Error| LockError::Unavailable {
        lock: lock.clone(),
        message: e.to_string(),
    };
    let mut file = crate::owner_only::open_read_write(&path).map_err(unavailable)?;
    let started = Instant::now();
    let mut announced = false;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                // A plan, status or watch on the same state directory takes the lock for the
                // milliseconds it needs to save the simulation; that is not an apply to wait for.
                if started.elapsed() < MOMENTARY_HOLD {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                    continue;
                }
                let mut text = String::new();
                let _ = file.rewind();
                let _ = file.read_to_string(&mut text);
                let described = describe_file_holder(&text, Timestamp::now());
                if options.timeout.is_zero() {
                    return Err(LockError::Held {
                        lock,
                        holder: described,
                        expires: None,
                    });
                }
                if started.elapsed() >= options.timeout {
                    return Err(LockError::TimedOut {
                        lock,
                        holder: described,
                        waited: human(started.elapsed()),
                        expires: None,
                    });
                }
                if !announced {
                    on_wait(&described);
                    announced = true;
                }
                let left = options.timeout.saturating_sub(started.elapsed());
                tokio::time::sleep(options.retry.min(left)).await;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(unavailable(e)),
        }
    }
    let record =
        serde_json::json!({"holder": holder, "acquiredAt": format!("{:.0}", Timestamp::now())});
    file.set_len(0)
        .and_then(|_| file.rewind())
        .and_then(|_| file.write_all(record.to_string().as_bytes()))
        .and_then(|_| file.flush())
        .map_err(unavailable)?;
    Ok(ApplyLock {
        handle: Handle::File { file, path },
    })
}

/// The holder identity a lock file records (`{"holder": "alice@laptop pid 42", ...}`), when it
/// can be read.
pub fn file_holder(text: &str) -> Option<String> {
    let record: serde_json::Value = serde_json::from_str(text).ok()?;
    record["holder"].as_str().map(str::to_string)
}

/// Whether the lock file's record names exactly `holder`: pid 1089 is not pid 10898, however
/// the text compares.
pub fn file_held_by(text: &str, holder: &str) -> bool {
    file_holder(text).is_some_and(|recorded| recorded == holder)
}

/// Whether the lock file's record names this process ([`holder_identity`]) as its holder: the
/// local target writes its state while another lock blocks it only then
/// (`local::LocalKube::open`).
pub fn file_held_by_this_process(text: &str) -> bool {
    file_held_by(text, &holder_identity())
}

fn describe_file_holder(text: &str, now: Timestamp) -> String {
    let record: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    let holder = Holder {
        identity: file_holder(text).unwrap_or_else(|| "another gkq process".to_string()),
        acquired_at: record["acquiredAt"].as_str().and_then(|t| t.parse().ok()),
        renewed_at: None,
        lease_duration: None,
    };
    holder.describe(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_describe_themselves_with_age_and_expire_after_their_duration() {
        let now: Timestamp = "2026-11-30T12:10:00Z".parse().unwrap();
        let holder = Holder {
            identity: "alice@laptop pid 42".into(),
            acquired_at: Some("2026-11-30T12:06:48Z".parse().unwrap()),
            renewed_at: Some("2026-11-30T12:09:56Z".parse().unwrap()),
            lease_duration: Some(Duration::from_secs(60)),
        };
        assert_eq!(
            holder.describe(now),
            "alice@laptop pid 42, for 3m12s (renewed 4s ago)"
        );
        assert!(!holder.expired(now));
        let later: Timestamp = "2026-11-30T12:11:00Z".parse().unwrap();
        assert!(holder.expired(later));
        assert_eq!(
            expiry_note(&holder, now).unwrap(),
            "If that apply crashed, its lock expires 1m00s after its last renewal (in 56s)."
        );
    }

    #[test]
    fn a_lock_file_is_held_by_exactly_the_identity_it_records() {
        let record = |holder: &str| {
            serde_json::json!({"holder": holder, "acquiredAt": "2026-11-30T12:00:00Z"}).to_string()
        };
        let text = record("alice@laptop pid 10898");
        assert!(file_held_by(&text, "alice@laptop pid 10898"));
        assert!(!file_held_by(&text, "alice@laptop pid 1089"));
        assert!(!file_held_by(&text, "alice@laptop pid 108"));
        assert!(!file_held_by(
            &record("alice@laptop pid 1089"),
            "alice@laptop pid 10898"
        ));
        assert!(
            !file_held_by("alice@laptop pid 1089", "alice@laptop pid 1089"),
            "not a record"
        );
        assert!(!file_held_by("", "alice@laptop pid 1089"));
    }

    #[tokio::test]
    async fn file_lock_names_its_holder_and_frees_on_release() {
        let dir = tempfile::tempdir().unwrap();
        let options = LockOptions::default();
        let first = file(dir.path(), "alice@laptop pid 1", &options, &mut |_| {})
            .await
            .unwrap();
        let err = match file(dir.path(), "bob@desk pid 2", &options, &mut |_| {}).await {
            Err(e) => e,
            Ok(_) => panic!("a second holder got the lock"),
        };
        assert!(matches!(err, LockError::Held { .. }), "{err}");
        assert!(
            // Refused after the quiet retry for momentary holders, so the age is a few seconds.
            err.to_string().contains("alice@laptop pid 1, for "),
            "{err}"
        );
        // A waiter is told who holds it once the quiet retry is over, and gets it once the
        // first lets go.
        let waiting = LockOptions {
            timeout: Duration::from_secs(10),
            retry: Duration::from_millis(20),
            ..LockOptions::default()
        };
        let released = tokio::spawn(async move {
            tokio::time::sleep(MOMENTARY_HOLD + Duration::from_millis(300)).await;
            first.release().await;
        });
        let mut waited_for = String::new();
        let second = file(dir.path(), "bob@desk pid 2", &waiting, &mut |h| {
            waited_for = h.to_string()
        })
        .await
        .unwrap();
        released.await.unwrap();
        assert!(waited_for.starts_with("alice@laptop pid 1"), "{waited_for}");
        second.release().await;
    }

    /// A plan or status saving the local simulation holds the lock for milliseconds: an apply
    /// with no --lock-timeout waits that out instead of failing as if another apply held it.
    #[tokio::test]
    async fn a_momentary_hold_is_waited_out_even_without_a_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let options = LockOptions::default();
        let brief = file(dir.path(), "gkq status pid 3", &options, &mut |_| {})
            .await
            .unwrap();
        let released = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            brief.release().await;
        });
        let mut announced = false;
        let apply = file(dir.path(), "apply pid 4", &options, &mut |_| {
            announced = true
        })
        .await
        .expect("a momentary hold is not a held lock");
        released.await.unwrap();
        assert!(!announced, "a momentary hold is not announced as a wait");
        apply.release().await;
    }
}
