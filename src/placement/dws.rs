//! The DWS flex-start time budget.
//!
//! Flex-start capacity lives at most 7 days; a node pool may set a shorter maximum run
//! duration. A job placed on the DWS flavor can declare how long it runs; gkq checks the
//! declaration against both limits and passes it to Kueue with the
//! [`MAX_RUN_DURATION_ANNOTATION`](crate::vocab::labels::MAX_RUN_DURATION_ANNOTATION) annotation, which Kueue copies into the ProvisioningRequest.

use serde::{Deserialize, Serialize};

use crate::vocab::duration::format_seconds;

/// Flex-start nodes are reclaimed after at most 7 days.
pub const FLEX_START_MAX_RUN_SECONDS: u64 = 7 * 24 * 3600;

/// Above this share of the limit a declared duration gets a warning: a slow run would be cut.
const HEADROOM_PERCENT: u64 = 90;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationFinding {
    pub severity: Severity,
    pub message: String,
}

/// Checks a job's declared run duration against flex-start's 7 days and the pool's own
/// maximum (`maxRunDuration`), if any.
pub fn check_run_duration(
    job: &str,
    declared_seconds: u64,
    pool_max_run_seconds: Option<u64>,
) -> Vec<DurationFinding> {
    let mut findings = Vec::new();
    let error = |message| DurationFinding {
        severity: Severity::Error,
        message,
    };
    if declared_seconds == 0 {
        findings.push(error(format!(
            "job {job}: the declared run duration must be positive"
        )));
        return findings;
    }
    if let Some(pool_max) = pool_max_run_seconds
        && pool_max > FLEX_START_MAX_RUN_SECONDS
    {
        findings.push(error(format!(
            "node pool max run duration {} exceeds flex-start's limit of {}",
            format_seconds(pool_max),
            format_seconds(FLEX_START_MAX_RUN_SECONDS)
        )));
    }
    let (limit, source) = match pool_max_run_seconds {
        Some(pool_max) if pool_max < FLEX_START_MAX_RUN_SECONDS => {
            (pool_max, "the node pool's max run duration")
        }
        _ => (FLEX_START_MAX_RUN_SECONDS, "flex-start (DWS) capacity"),
    };
    if declared_seconds > limit {
        findings.push(error(format!(
            "job {job} declares {} ({declared_seconds}s) but {source} is reclaimed after {} ({limit}s); the run would be cut short",
            format_seconds(declared_seconds),
            format_seconds(limit)
        )));
    } else if declared_seconds.saturating_mul(100) > limit.saturating_mul(HEADROOM_PERCENT) {
        findings.push(DurationFinding {
            severity: Severity::Warning,
            message: format!(
                "job {job} declares {} of the {} {source} allows; a slower run than expected would be cut short",
                format_seconds(declared_seconds),
                format_seconds(limit)
            ),
        });
    }
    findings
}

/// The annotation value for a duration: whole seconds.
pub fn annotation_value(seconds: u64) -> String {
    seconds.to_string()
}

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
    fn eight_days_is_an_error() {
        let findings = check_run_duration("train-2", 8 * 86_400, None);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].severity, Severity::Error);
        assert_eq!(
            findings[0].message,
            "job train-2 declares 8d (691200s) but flex-start (DWS) capacity is reclaimed after 7d (604800s); the run would be cut short"
        );
    }

    #[test]
    fn the_pool_limit_wins_when_shorter() {
        let findings = check_run_duration("train-2", 2 * 86_400, Some(86_400));
        assert_eq!(findings[0].severity, Severity::Error);
        assert!(
            findings[0]
                .message
                .contains("the node pool's max run duration")
        );
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
    }

    #[test]
    fn little_headroom_is_a_warning() {
        let findings = check_run_duration("train-2", 6 * 86_400 + 23 * 3600, None);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].severity, Severity::Warning);
        assert!(check_run_duration("train-2", 86_400, None).is_empty());
        assert_eq!(annotation_value(86_400), "86400");
        assert_eq!(format_seconds(129_600), "1d12h");
    }
}
