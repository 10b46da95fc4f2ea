//! The freshness check: before the first action runs, every target of the plan is read again and
//! its fingerprint compared with the one the plan recorded. Kubernetes targets are read with one
//! label-selected list per kind, not one request per object; the version each target was found
//! at is kept ([`Checked`]), and every write the walk makes is conditional on it (a server-side
//! apply carries the `resourceVersion`, a delete the uid and `resourceVersion` as
//! preconditions), so nothing is read again per object unless a write is refused because its
//! target moved on (see `super::kube`).
//!
//! [`Executor::verify`] refuses a stale plan as a whole, so that nothing at all is applied from
//! it, and names every resource that moved (saved plans are applied this way).

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::future::join_all;
use serde_json::Value;

use super::{ApplyError, Executor, KubeApplyError, stale_detail};
use crate::addr::{ResourceAddr, ResourceKind};
use crate::kube::Version;
use crate::plan::{Action, ActionKind, Plan, Step};

/// Reads in flight for the targets the lists cannot answer (objects gkq's labels no longer
/// select): as many as observing live state for the plan used.
const READ_CONCURRENCY: usize = crate::kube::PER_OBJECT_CONCURRENCY;

/// Why a plan cannot be applied as it is.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Targets changed since the plan was made.
    #[error("the plan is stale: {} resource(s) changed since it was made:\n{}", .stale.len(), describe(.stale))]
    Stale { stale: Vec<ApplyError> },
    /// Live state could not be read, so freshness could not be established.
    #[error("cannot check the plan against live state: {0}")]
    Read(String),
    /// The plan would stop running work now and the user did not allow it (the text names the
    /// jobs).
    #[error("{0}")]
    Disrupts(String),
    /// The plan writes sensitive values it does not hold (a plan file).
    #[error(transparent)]
    Sealed(#[from] crate::plan::sealed::MissingValues),
}

fn describe(stale: &[ApplyError]) -> String {
    stale
        .iter()
        .map(|e| format!("  - {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl VerifyError {
    pub fn hint(&self) -> &'static str {
        match self {
            VerifyError::Stale { .. } => {
                "Nothing was applied. Run `gkq plan` again (with --out to save a fresh plan) and review it."
            }
            VerifyError::Read(_) => {
                "Nothing was applied. Check that the cluster and GKE are reachable with your credentials."
            }
            VerifyError::Disrupts(_) => {
                "Jobs were admitted or started after the plan was made. Wait for them to finish and plan again, or pass --allow-disruption to stop them."
            }
            VerifyError::Sealed(_) => {
                "Nothing was applied. Run `gkq apply PLANFILE` from the directory the plan was made in, with the same --var values and environment, so that gkq reads the values from the spec."
            }
        }
    }
}

/// What the check found for one Kubernetes target that is as the plan found it.
#[derive(Debug, Default)]
struct Seen {
    /// The version it was read at: what the action's writes are conditional on (`None`: it did
    /// not exist).
    version: Option<Version>,
    /// The live object, kept for the actions that delete or replace it (the disruption check
    /// reads the jobs from here).
    live: Option<Value>,
}

/// Why the check refused an action.
#[derive(Debug, Clone)]
enum Refusal {
    /// The target moved since the plan was made (what moved).
    Stale(String),
    /// The target could not be read.
    Unread {
        step: &'static str,
        source: KubeApplyError,
    },
}

impl Refusal {
    fn error(&self, addr: &ResourceAddr) -> ApplyError {
        match self {
            Refusal::Stale(detail) => ApplyError::Stale {
                addr: addr.clone(),
                detail: detail.clone(),
            },
            Refusal::Unread { step, source } => ApplyError::Kube {
                addr: addr.clone(),
                step: step.to_string(),
                source: source.clone(),
            },
        }
    }
}

/// The outcome of checking a plan's Kubernetes targets: for each, the version its writes are
/// conditional on, or why the action must not run.
#[derive(Debug, Default)]
pub struct Checked {
    targets: BTreeMap<ResourceAddr, Result<Seen, Refusal>>,
}

impl Checked {
    /// The version the action's first write is conditional on; `Err` when the check refused it
    /// (stale, or its target could not be read). Targets the check did not read (GKE's, or a
    /// plan applied without a Kubernetes client) have no version.
    pub(super) fn version(&self, addr: &ResourceAddr) -> Result<Option<&Version>, Box<ApplyError>> {
        match self.targets.get(addr) {
            None => Ok(None),
            Some(Ok(seen)) => Ok(seen.version.as_ref()),
            Some(Err(refusal)) => Err(Box::new(refusal.error(addr))),
        }
    }

    /// The live object a delete or replace acts on, as the check read it.
    pub fn live(&self, addr: &ResourceAddr) -> Option<&Value> {
        self.targets.get(addr)?.as_ref().ok()?.live.as_ref()
    }
}

/// The apiVersion and kind of an action's Kubernetes target, borrowed from the plan.
fn target_type(action: &Action) -> Option<(&str, &str)> {
    if let Some(desired) = &action.desired {
        return Some((
            desired.get("apiVersion")?.as_str()?,
            desired.get("kind")?.as_str()?,
        ));
    }
    action.steps.iter().find_map(|step| match step {
        Step::KubeDelete {
            api_version, kind, ..
        } => Some((api_version.as_str(), kind.as_str())),
        _ => None,
    })
}

impl Executor<'_> {
    /// Reads every target of `plan` (no-ops included) and refuses the plan if any differs from
    /// what the plan was computed against. Reads only; changes nothing. The answer holds the
    /// versions [`Executor::apply_checked`] makes its writes conditional on.
    pub async fn verify(&self, plan: &Plan) -> Result<Checked, VerifyError> {
        // A cluster still being created (after an interrupted apply) is waited for, as plan says.
        let cluster = super::gke::settled_cluster(self, plan).await?;
        let mut stale = Vec::new();
        for action in plan.actions.iter().filter(|a| a.addr.kind.is_gke()) {
            let live = match action.addr.kind {
                ResourceKind::GkeCluster => cluster.as_ref(),
                _ => cluster.as_ref().and_then(|c| {
                    c.get("nodePools")?
                        .as_array()?
                        .iter()
                        .find(|p| p.get("name").and_then(Value::as_str) == Some(&action.addr.name))
                }),
            };
            if let Some(detail) = stale_detail(action, live) {
                stale.push((action.addr.clone(), Refusal::Stale(detail)));
            }
        }
        for action in plan.actions.iter().filter(|a| !a.addr.kind.is_gke()) {
            plan.sealed.open(action)?;
        }
        let checked = self.check_kube(plan, cluster.is_some()).await;
        for (addr, outcome) in &checked.targets {
            match outcome {
                Ok(_) => {}
                Err(Refusal::Unread { source, .. }) => {
                    return Err(VerifyError::Read(format!("{addr}: {source}")));
                }
                Err(refusal) => stale.push((addr.clone(), refusal.clone())),
            }
        }
        if stale.is_empty() {
            return Ok(checked);
        }
        // Plan order, as the plan lists them.
        let position: BTreeMap<&ResourceAddr, usize> = plan
            .actions
            .iter()
            .enumerate()
            .map(|(i, a)| (&a.addr, i))
            .collect();
        stale.sort_by_key(|(addr, _)| position.get(addr).copied());
        Err(VerifyError::Stale {
            stale: stale.iter().map(|(addr, r)| r.error(addr)).collect(),
        })
    }

    /// Checks the plan's Kubernetes targets: one list per kind of what gkq owns in the stack, and
    /// a read of each target the lists do not have although the plan found it (its labels were
    /// removed, or it is gone), and of Kueue's installation.
    pub(super) async fn check_kube(&self, plan: &Plan, cluster_exists: bool) -> Checked {
        let mut checked = Checked::default();
        // Sensitive actions are checked with their real values, as the plan fingerprinted them;
        // one whose values this process does not hold is refused by the walk (`Blocked`).
        let opened: Vec<std::borrow::Cow<'_, Action>> = plan
            .actions
            .iter()
            .filter(|a| !a.addr.kind.is_gke())
            .filter_map(|a| plan.sealed.open(a).ok())
            .collect();
        let actions = opened.iter().map(|a| a.as_ref());
        let Some(kube) = self.kube else {
            // Without a Kubernetes client the executor fails these actions itself; a plan made
            // without one has none.
            return checked;
        };
        if !cluster_exists {
            // Nothing can exist inside a cluster that does not: a plan that found nothing is
            // fresh, and one that found something is stale, without asking an API server that
            // is not there.
            for action in actions {
                checked
                    .targets
                    .insert(action.addr.clone(), seen(action, None));
            }
            return checked;
        }
        let mut by_kind: BTreeMap<(&str, &str), Vec<&Action>> = BTreeMap::new();
        let mut alone: Vec<&Action> = Vec::new();
        for action in actions {
            match target_type(action) {
                Some((_, kind)) if crate::model::is_installation_kind(kind) => alone.push(action),
                Some(kind) => by_kind.entry(kind).or_default().push(action),
                None => {}
            }
        }
        let lists = join_all(
            by_kind
                .into_iter()
                .map(|(kind, targets)| check_listed(kube, kind, targets)),
        )
        .await;
        for (targets, listed) in lists {
            let mut found = match listed {
                Ok(found) => found,
                Err(error) => {
                    for action in targets {
                        let refusal = Refusal::Unread {
                            step: "list",
                            source: error.clone(),
                        };
                        checked.targets.insert(action.addr.clone(), Err(refusal));
                    }
                    continue;
                }
            };
            for action in targets {
                match found.remove(&action.addr) {
                    Some(outcome) => {
                        checked.targets.insert(action.addr.clone(), outcome);
                    }
                    // Not among gkq's objects: as the plan found it if the plan found nothing;
                    // otherwise read on its own below.
                    None if action.live_fingerprint.is_none() => {
                        checked
                            .targets
                            .insert(action.addr.clone(), Ok(Seen::default()));
                    }
                    None => alone.push(action),
                }
            }
        }
        let read: Vec<_> = futures::stream::iter(alone.into_iter().map(|action| async move {
            let outcome = match super::kube::probe_of(action) {
                None => Ok(Seen::default()),
                Some(probe) => match kube.get(&action.addr, &probe).await {
                    Ok(live) => seen(action, live),
                    Err(source) => Err(Refusal::Unread {
                        step: "get",
                        source,
                    }),
                },
            };
            (action.addr.clone(), outcome)
        }))
        .buffer_unordered(READ_CONCURRENCY)
        .collect()
        .await;
        checked.targets.extend(read);
        checked
    }
}

/// The outcome of checking one kind's targets against its list: each target the list has, by
/// address (the others are not in it).
type Listed = Result<BTreeMap<ResourceAddr, Result<Seen, Refusal>>, KubeApplyError>;

/// Lists what gkq owns of `kind` and checks each of `targets` the list has. Each listed object is
/// checked as it is read, and only what the walk needs of it is kept (its version; for a delete
/// or replace, the object): the list is never held whole as trees.
async fn check_listed<'p>(
    kube: &dyn super::KubeApplier,
    (api_version, kind): (&str, &str),
    targets: Vec<&'p Action>,
) -> (Vec<&'p Action>, Listed) {
    let wanted: BTreeMap<&ResourceAddr, &Action> = targets
        .iter()
        .map(|&action| (&action.addr, action))
        .collect();
    let mut found = BTreeMap::new();
    let listed = kube
        .list_each(api_version, kind, &mut |object| {
            let Ok(addr) = ResourceAddr::from_object(&object) else {
                return;
            };
            if let Some(action) = wanted.get(&addr) {
                found.insert(addr, seen(action, Some(object)));
            }
        })
        .await;
    (targets, listed.map(|()| found))
}

/// What checking `action` against `live` gives.
fn seen(action: &Action, live: Option<Value>) -> Result<Seen, Refusal> {
    if let Some(detail) = stale_detail(action, live.as_ref()) {
        return Err(Refusal::Stale(detail));
    }
    let keep = matches!(action.kind, ActionKind::Delete | ActionKind::Replace);
    Ok(Seen {
        version: live.as_ref().and_then(Version::of),
        live: live.filter(|_| keep),
    })
}
