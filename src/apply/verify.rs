//! The whole-plan freshness check: before the first action runs, every target of the plan is read
//! again and its fingerprint compared with the one the plan recorded. The executor re-checks each
//! action as it goes; this check makes a stale plan (a saved plan applied later, or live state
//! that moved while a person read the plan) refuse as a whole, so that nothing at all is applied
//! from it, and names every resource that moved.

use futures::StreamExt;
use serde_json::Value;

use super::{ApplyError, Executor, check_fresh};
use crate::addr::ResourceKind;
use crate::plan::{Action, Plan};

/// Reads in flight while checking a plan: as many as observing live state for the plan used.
const VERIFY_CONCURRENCY: usize = crate::observe::kube::OBSERVE_CONCURRENCY;

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

impl Executor<'_> {
    /// Reads every target of `plan` (no-ops included) and refuses the plan if any differs from
    /// what the plan was computed against. Reads only; changes nothing.
    pub async fn verify(&self, plan: &Plan) -> Result<(), VerifyError> {
        // A cluster still being created (after an interrupted apply) is waited for, as plan says.
        let cluster = super::gke::settled_cluster(self, plan).await?;
        let cluster_exists = cluster.is_some();
        // Kubernetes targets are read concurrently (bounded, like the apply itself); the report
        // keeps plan order.
        let outcomes: Vec<Result<super::ActionResultOf, VerifyError>> =
            futures::stream::iter(plan.actions.iter().map(|action| {
                let cluster = cluster.as_ref();
                async move {
                    match action.addr.kind {
                        ResourceKind::GkeCluster => Ok(check_fresh(action, cluster)),
                        ResourceKind::GkeNodePool => {
                            let pool = cluster.and_then(|c| {
                                c.get("nodePools")?.as_array()?.iter().find(|p| {
                                    p.get("name").and_then(Value::as_str) == Some(&action.addr.name)
                                })
                            });
                            Ok(check_fresh(action, pool))
                        }
                        _ => {
                            let opened = plan.sealed.open(action)?;
                            self.verify_kube(&opened, cluster_exists).await
                        }
                    }
                }
            }))
            .buffered(VERIFY_CONCURRENCY)
            .collect()
            .await;
        let mut stale = Vec::new();
        for outcome in outcomes {
            if let Err(error) = outcome? {
                stale.push(*error);
            }
        }
        if stale.is_empty() {
            Ok(())
        } else {
            Err(VerifyError::Stale { stale })
        }
    }

    async fn verify_kube(
        &self,
        action: &Action,
        cluster_exists: bool,
    ) -> Result<super::ActionResultOf, VerifyError> {
        // Nothing can exist inside a cluster that does not: a plan that found nothing is fresh,
        // and one that found something is stale, without asking an API server that is not there.
        if !cluster_exists {
            return Ok(check_fresh(action, None));
        }
        let Some(kube) = self.kube else {
            // Without a Kubernetes client the executor fails these actions itself; a plan made
            // without one has none.
            return Ok(Ok(()));
        };
        let Some(probe) = super::kube::probe_of(action) else {
            return Ok(Ok(()));
        };
        let live = kube
            .get(&action.addr, &probe)
            .await
            .map_err(|e| VerifyError::Read(format!("{}: {e}", action.addr)))?;
        Ok(check_fresh(action, live.as_ref()))
    }
}
