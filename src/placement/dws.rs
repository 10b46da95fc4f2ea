//! The DWS flex-start time budget: when GKE takes Plan B nodes back.
//!
//! Flex-start capacity lives at most 7 days; a node pool may set a shorter maximum run
//! duration, and a job may declare how long it runs (passed to Kueue with the
//! [`MAX_RUN_DURATION_ANNOTATION`](crate::vocab::labels::MAX_RUN_DURATION_ANNOTATION)
//! annotation, which Kueue copies into the ProvisioningRequest). The spec's duration rules are
//! the validator's (`model::validate`); this module only says which limit ends a run first.

use serde::{Deserialize, Serialize};

/// Flex-start nodes are reclaimed after at most 7 days. Placement sits under `model`, so the
/// fact lives here; `model::gke_facts` re-exports it beside the GKE facts it belongs with.
pub const FLEX_START_MAX_RUN_SECONDS: u64 = 7 * 24 * 3600;

/// When GKE takes Plan B nodes back: a fixed time after they are provisioned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reclaim {
    /// The flex-start or queued-provisioning node pool the job's nodes come from.
    pub node_pool: String,
    /// Seconds after the nodes are provisioned (the ProvisioningRequest is Provisioned).
    pub after_seconds: u64,
    pub limited_by: ReclaimLimit,
}

/// Which of the limits sets [`Reclaim::after_seconds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReclaimLimit {
    /// The job's declared duration, passed to Kueue as the annotation
    /// `provreq.kueue.x-k8s.io/maxRunDurationSeconds`.
    JobDuration,
    /// The node pool's `maxRunDuration`.
    PoolMaxRunDuration,
    /// Flex-start's 7 days.
    FlexStartLimit,
}

impl ReclaimLimit {
    pub fn describe(self) -> &'static str {
        match self {
            ReclaimLimit::JobDuration => "the job's declared duration",
            ReclaimLimit::PoolMaxRunDuration => "the node pool's maxRunDuration",
            ReclaimLimit::FlexStartLimit => "flex-start's 7-day limit",
        }
    }
}

/// How long after provisioning Plan B nodes are reclaimed at the latest, and why: the shortest
/// of the declared duration, the pool's maximum and 7 days.
pub fn reclaimed_after(
    declared: Option<u64>,
    pool_max_run_seconds: Option<u64>,
) -> (u64, ReclaimLimit) {
    [
        (declared, ReclaimLimit::JobDuration),
        (pool_max_run_seconds, ReclaimLimit::PoolMaxRunDuration),
        (
            Some(FLEX_START_MAX_RUN_SECONDS),
            ReclaimLimit::FlexStartLimit,
        ),
    ]
    .into_iter()
    .filter_map(|(seconds, limit)| seconds.filter(|&s| s > 0).map(|s| (s, limit)))
    // Ties go to the most specific limit, which comes first.
    .min_by_key(|(seconds, _)| *seconds)
    .unwrap_or((FLEX_START_MAX_RUN_SECONDS, ReclaimLimit::FlexStartLimit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_limit_ends_the_run_and_ties_go_to_the_most_specific() {
        assert_eq!(
            reclaimed_after(Some(3600), Some(86_400)),
            (3600, ReclaimLimit::JobDuration)
        );
        assert_eq!(
            reclaimed_after(Some(2 * 86_400), Some(86_400)),
            (86_400, ReclaimLimit::PoolMaxRunDuration)
        );
        assert_eq!(
            reclaimed_after(None, None),
            (FLEX_START_MAX_RUN_SECONDS, ReclaimLimit::FlexStartLimit)
        );
        assert_eq!(
            reclaimed_after(Some(FLEX_START_MAX_RUN_SECONDS), None),
            (FLEX_START_MAX_RUN_SECONDS, ReclaimLimit::JobDuration)
        );
        assert_eq!(
            reclaimed_after(Some(0), Some(86_400)),
            (86_400, ReclaimLimit::PoolMaxRunDuration)
        );
    }
}
