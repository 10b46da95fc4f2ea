//! What placement reports: where each job lands (predicted, or observed on a Workload), and
//! how much quota each flavor has, uses and would use.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::reader::{Context, ParseErrors, describe};
use crate::vocab::quantity::Quantity;

/// A job's state in Kueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementState {
    /// Quota reserved and admitted: the job runs (its nodes may still be scaling up).
    Admitted,
    /// Quota reserved, but admission checks (e.g. the DWS ProvisioningRequest) have not passed;
    /// the job stays suspended.
    WaitingForAdmissionChecks,
    /// No quota reserved.
    Pending,
    /// Kueue's admission webhook refuses to create the job.
    Rejected,
    /// No `kueue.x-k8s.io/queue-name` label: Kueue ignores the job, which runs without quota.
    Unmanaged,
    /// Observed only: the Workload has finished.
    Finished,
}

/// Where one podset goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetPlacement {
    pub name: String,
    pub count: i32,
    /// The flavor; when resource groups are split across flavors, the distinct flavors joined
    /// with `+` in resource-name order. `None` while pending.
    pub flavor: Option<String>,
    /// Flavor per resource, as in `status.admission.podSetAssignments[].flavors`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
}

impl PodSetPlacement {
    pub(crate) fn new(name: String, count: i32, flavors: BTreeMap<String, String>) -> Self {
        let mut distinct: Vec<&String> = Vec::new();
        for flavor in flavors.values() {
            if !distinct.contains(&flavor) {
                distinct.push(flavor);
            }
        }
        let flavor = (!distinct.is_empty()).then(|| {
            distinct
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("+")
        });
        PodSetPlacement {
            name,
            count,
            flavor,
            flavors,
        }
    }
}

/// One job's placement. Serialises as `{job, podsets: [{name, count, flavor}], state, reason}`
/// plus `namespace`, `kind`, `clusterQueue` and `admissionChecks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// The job's name (for a Workload, the name of the job that owns it).
    pub job: String,
    pub namespace: String,
    /// `RayJob`, `Job` or `Workload`.
    pub kind: String,
    pub cluster_queue: Option<String>,
    pub podsets: Vec<PodSetPlacement>,
    pub state: PlacementState,
    /// Kueue's message when pending; which checks are awaited when waiting.
    pub reason: Option<String>,
    /// Admission checks that must pass before the job starts (e.g. `dws-prov`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<String>,
    /// For a job placed on flex-start (Plan B) nodes: when GKE reclaims them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<super::dws::Reclaim>,
    /// Jobs (`namespace/name`) Kueue evicts so that this one gets in (classic preemption).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempts: Vec<String>,
    /// The job (`namespace/name`) whose admission evicts this one; `reason` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_by: Option<String>,
    /// Set when Kueue behaviour gkq does not model touches this job (`not predicted: <feature>
    /// is in use ...`): the state above is then only what Kueue would do without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_predicted: Option<String>,
    /// While pending for want of a flavor: each flavor tried and why it did not do, as
    /// `reason` says it in words (for `gkq explain`; not part of a plan file).
    #[serde(skip)]
    #[schemars(skip)]
    pub attempts: Vec<FlavorAttempt>,
}

/// One flavor a podset could not use, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlavorAttempt {
    pub podset: String,
    pub problem: AttemptProblem,
    /// Kueue's words for it.
    pub text: String,
}

/// Why a podset could not use a flavor (Kueue's flavor assigner, docs/kueue.md 1a.3-1a.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptProblem {
    /// The podset's node selector, affinity or tolerations do not suit the flavor, or the flavor
    /// does not exist.
    Ineligible { flavor: String },
    /// The queue (with what it may borrow) can never hold the request next to the podsets
    /// placed before it.
    OverCapacity {
        flavor: String,
        resource: String,
        /// What the workload's earlier podsets take in this flavor, plus this request.
        needed: Quantity,
        maximum: Quantity,
    },
    /// The quota is there but in use: `more` is missing now.
    InUse {
        flavor: String,
        resource: String,
        more: Quantity,
    },
    /// No resource group of the ClusterQueue covers the resource.
    NotCovered { resource: String },
}

impl Placement {
    /// Differences a person should see between a prediction (`self`) and what Kueue did.
    /// Reasons are not compared: Kueue's pending messages change between retries.
    pub fn differences(&self, observed: &Placement) -> Vec<String> {
        let mut differences = Vec::new();
        if self.state != observed.state {
            differences.push(format!(
                "state: predicted {}, observed {}",
                state_name(self.state),
                state_name(observed.state)
            ));
        }
        for predicted in &self.podsets {
            let Some(actual) = observed.podsets.iter().find(|p| p.name == predicted.name) else {
                if observed.state != PlacementState::Pending {
                    differences.push(format!("podset {}: not in the Workload", predicted.name));
                }
                continue;
            };
            if predicted.flavors != actual.flavors && !actual.flavors.is_empty() {
                differences.push(format!(
                    "podset {}: predicted {}, observed {}",
                    predicted.name,
                    predicted.flavor.as_deref().unwrap_or("no flavor"),
                    actual.flavor.as_deref().unwrap_or("no flavor"),
                ));
            }
        }
        differences
    }
}

fn state_name(state: PlacementState) -> &'static str {
    match state {
        PlacementState::Admitted => "admitted",
        PlacementState::WaitingForAdmissionChecks => "waiting-for-admission-checks",
        PlacementState::Pending => "pending",
        PlacementState::Rejected => "rejected",
        PlacementState::Unmanaged => "unmanaged",
        PlacementState::Finished => "finished",
    }
}

/// Quota of one `(ClusterQueue, flavor, resource)` and who uses it, for quota bars.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    pub cluster_queue: String,
    pub cohort: Option<String>,
    pub flavor: String,
    pub resource: String,
    #[schemars(with = "String")]
    pub nominal: Quantity,
    #[schemars(with = "Option<String>")]
    pub borrowing_limit: Option<Quantity>,
    #[schemars(with = "Option<String>")]
    pub lending_limit: Option<Quantity>,
    /// Reserved by workloads already holding quota in the cluster.
    #[schemars(with = "String")]
    pub used_live: Quantity,
    /// Predicted for live Workloads that are still queued.
    #[schemars(with = "String")]
    pub used_queued: Quantity,
    /// Predicted for the jobs passed to `predict` (this plan).
    #[schemars(with = "String")]
    pub used_plan: Quantity,
}

impl FlavorUsage {
    /// Everything used or predicted; above `nominal` means borrowing from the cohort.
    pub fn total(&self) -> Quantity {
        self.used_live
            .saturating_add(self.used_queued)
            .saturating_add(self.used_plan)
    }

    /// `nominal - total`, negative when borrowing.
    pub fn free(&self) -> Quantity {
        self.nominal.saturating_sub(self.total())
    }
}

/// The result of [`super::predict`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Prediction {
    /// One per job passed in, in the same order.
    pub placements: Vec<Placement>,
    /// Live Workloads that were waiting for quota, predicted alongside.
    pub queued: Vec<Placement>,
    /// Per ClusterQueue, flavor and resource, in spec order.
    pub usage: Vec<FlavorUsage>,
    /// Live Workloads holding quota that Kueue preempts for the jobs above, with where they
    /// end up (pending, or admitted again elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempted: Vec<Placement>,
}

/// The placement Kueue actually made, read from a `Workload` object (for `gkq status`).
pub fn observed_placement(workload: &Value) -> Result<Placement, ParseErrors> {
    let ctx = Context::new(describe(workload));
    let root = ctx.root(workload);
    let metadata = root.get("metadata");
    let status = root.get("status");
    let condition = |kind: &str| {
        status
            .get("conditions")
            .items()
            .into_iter()
            .find(|c| c.get("type").str() == Some(kind))
            .map(|c| {
                (
                    c.get("status").str() == Some("True"),
                    c.get("message").string().unwrap_or_default(),
                )
            })
    };
    let owner = metadata
        .get("ownerReferences")
        .items()
        .first()
        .and_then(|o| Some((o.get("kind").string()?, o.get("name").string()?)));
    let (kind, job) = owner.unwrap_or_else(|| {
        (
            "Workload".to_string(),
            metadata.get("name").string().unwrap_or_default(),
        )
    });
    let admission = status.get("admission");
    let spec_pod_sets = root.get("spec").get("podSets").items();
    let mut podsets = Vec::new();
    let quota_reserved = condition("QuotaReserved");
    let reserved = quota_reserved.as_ref().is_some_and(|(ok, _)| *ok);
    if reserved {
        for assignment in admission.get("podSetAssignments").items() {
            let name = assignment.get("name").string().unwrap_or_default();
            let count = assignment.get("count").i32().or_else(|| {
                spec_pod_sets
                    .iter()
                    .find(|p| p.get("name").str() == Some(name.as_str()))
                    .and_then(|p| p.get("count").i32())
            });
            podsets.push(PodSetPlacement::new(
                name,
                count.unwrap_or(0),
                assignment.get("flavors").string_map(),
            ));
        }
    } else {
        for pod_set in &spec_pod_sets {
            podsets.push(PodSetPlacement::new(
                pod_set.get("name").string().unwrap_or_default(),
                pod_set.get("count").i32().unwrap_or(0),
                BTreeMap::new(),
            ));
        }
    }
    let pending_checks: Vec<String> = status
        .get("admissionChecks")
        .items()
        .iter()
        .filter(|c| c.get("state").str() != Some("Ready"))
        .filter_map(|c| c.get("name").string())
        .collect();
    let (state, reason) = if condition("Finished").is_some_and(|(ok, _)| ok) {
        (
            PlacementState::Finished,
            condition("Finished").map(|(_, m)| m),
        )
    } else if condition("Admitted").is_some_and(|(ok, _)| ok) {
        (PlacementState::Admitted, None)
    } else if reserved {
        let reason = format!(
            "waiting for admission checks: {}",
            pending_checks.join(", ")
        );
        (PlacementState::WaitingForAdmissionChecks, Some(reason))
    } else {
        let reason = quota_reserved
            .map(|(_, message)| message)
            .filter(|m| !m.is_empty());
        (PlacementState::Pending, reason)
    };
    let placement = Placement {
        job,
        namespace: metadata
            .get("namespace")
            .string()
            .unwrap_or_else(|| "default".to_string()),
        kind,
        cluster_queue: admission.get("clusterQueue").string(),
        podsets,
        state,
        reason,
        admission_checks: if state == PlacementState::WaitingForAdmissionChecks {
            pending_checks
        } else {
            Vec::new()
        },
        reclaim: None,
        preempts: Vec::new(),
        preempted_by: None,
        not_predicted: None,
        attempts: Vec::new(),
    };
    let errors = ctx.into_errors();
    if errors.is_empty() {
        Ok(placement)
    } else {
        Err(ParseErrors(errors))
    }
}
