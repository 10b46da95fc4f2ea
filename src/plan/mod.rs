//! The plan: an ordered list of actions that would converge live state to the spec.
//!
//! A [`Plan`] is a value. [`plan`] computes it from desired and live state without I/O; it can
//! be rendered (see [`crate::render`]), saved as JSON (`schemas/plan.schema.json` documents the
//! shape) and applied later by [`crate::apply`], which executes exactly its actions, in its order,
//! and refuses any action whose target changed since the plan was made (`live_fingerprint`).
//!
//! Ordering comes from one dependency graph ([`graph`]): creates, updates and replaces in
//! dependency order, then deletes in reverse dependency order. Each action lists the actions it
//! depends on, so that a failure skips only what truly depends on it.
//!
//! Safety rules encoded here: gkq changes and deletes only what carries its ownership labels;
//! removals from the spec are deleted only with `prune`; a cluster is deleted or recreated only
//! when the spec disables deletion protection *and* the caller passes `allow_cluster_delete`.
//! Otherwise such an action is still shown, marked `blocked`, and the executor refuses it.

mod build;
pub mod conflicts;
pub mod digest;
pub mod disruption;
pub mod graph;
pub mod ladder;
mod ownership;
pub mod placements;
pub mod provenance;
pub mod revision;
pub mod sealed;
pub mod workload_changes;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::addr::ClusterRef;
use crate::addr::ResourceAddr;
use crate::diff::FieldChange;

pub use build::{Fingerprint, Judge, PlanError, plan, plan_judged};
pub use ownership::{conflicting_owner, gke_owned, kube_owned, kube_owner, owner_conflict};

/// Bumped when the JSON shape changes incompatibly.
pub const PLAN_FORMAT_VERSION: u32 = 1;

/// Choices the caller makes when planning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanOptions {
    /// Plan deletes of resources gkq owns that the spec no longer has (`--prune`). Without it they
    /// are listed as the plan's `orphans`.
    pub prune: bool,
    /// Consent to delete or recreate the cluster; also needs `deletion_protection: false` in the
    /// spec.
    pub allow_cluster_delete: bool,
    /// Plan the removal of everything gkq owns (`gkq destroy`).
    pub destroy: bool,
    /// Take over resources that match the spec's names but lack gkq's ownership labels (they get
    /// the labels on the next apply). Without it gkq does not change what it does not own.
    pub adopt: bool,
    /// The GkqStack (`namespace/name`) this plan is made for (the agent's plans): its objects
    /// carry it, and objects another stack owns are neither changed nor deleted. `None` (a
    /// command): objects any stack owns are left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// A plan that gives up stack `release_from`'s ownership (the stack was deleted without
    /// prune): its objects are this plan's, and are applied without the owner annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_from: Option<String>,
    /// Take every field another field manager owns (`--force-conflicts`), including those
    /// Kueue wrote into a job it admitted, which stops that job (a disruption). Without it such
    /// fields are left to Kueue and any other conflict needs `--force-conflicts` at apply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_conflicts: bool,
    /// Predict placements with the rules of the Kueue release gkq models even when the cluster
    /// runs (or the spec installs) another minor release (`--predict-anyway`); the plan says so
    /// in a notice. Without it such placements say "not predicted".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub predict_anyway: bool,
    /// How the plan learns what each new or changed Kubernetes object would become. Not part of
    /// the plan: the actions say what they know ("server defaults known after apply").
    #[serde(skip)]
    #[schemars(skip)]
    pub preview: Preview,
}

/// How a plan learns what each new or changed Kubernetes object would become.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Preview {
    /// A server-side dry run per new or changed object, so that the plan shows the server's
    /// defaults and webhooks' changes: `gkq plan`, and an apply that asks before it acts.
    #[default]
    DryRun,
    /// The lists alone, for an apply nobody reviews first (`--auto-approve`): each object is
    /// written once, not dry-run first, and its diff shows the fields gkq sets. Whether a new
    /// object's name is taken by one gkq does not own is read from one list of names per kind.
    Lists,
}

/// A gkq plan: the ordered actions that converge live state to the spec (`gkq plan -o json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Version of this JSON shape, bumped on incompatible changes (currently 1).
    pub format_version: u32,
    /// The GKE cluster the plan is for.
    #[schemars(with = "ClusterRefSchema")]
    pub cluster: ClusterRef,
    /// Every resource gkq considered, no-ops included, in execution order.
    pub actions: Vec<Action>,
    pub summary: Summary,
    /// Resources gkq owns that the spec no longer names, left in place because the plan does not
    /// prune: with what they hold, which still counts against quotas.
    #[serde(default)]
    pub orphans: Vec<Orphan>,
    /// Things reported but not acted on: the spec's warnings and notes (`severity` set), then
    /// the plan's own (unowned resources, parts not observed, GKE operations in progress).
    #[serde(default)]
    pub notices: Vec<Notice>,
    /// Admitted or running jobs that a delete or replace in this plan would stop. `apply`
    /// refuses such a plan without `--allow-disruption`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disruptions: Vec<disruption::Disruption>,
    /// Where Kueue will place the jobs this plan submits, predicted with Kueue's own rules
    /// from the queues, quotas and live usage; then the running jobs they preempt
    /// (`preemptedBy` set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<crate::placement::Placement>,
    /// Quota per ClusterQueue, flavor and resource: nominal, used live, and used by this plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quota: Vec<crate::placement::FlavorUsage>,
    /// Live Workloads (any job kind, whoever submitted it) whose predicted state this plan's
    /// queue, flavor, cohort, check or priority changes alter, before and after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workload_changes: Vec<workload_changes::WorkloadChange>,
    /// For the jobs placed on flavors of the spec's capacity ladder: the rung that serves each
    /// and what happens when it is out of capacity (empty without `capacity:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rungs: Vec<ladder::JobRung>,
    /// What the plan was computed from (spec digest, commit, target, gkq version). `gkq apply
    /// PLANFILE` checks it before acting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<provenance::Provenance>,
    /// The real `desired` and `steps` of sensitive actions, for applying this plan in this
    /// process. Never serialised: a plan file has only the markers.
    #[serde(skip)]
    #[schemars(skip)]
    pub sealed: sealed::Sealed,
    /// The choices the plan was made with (`prune`, `adopt`, `destroy`, ...): applying a saved
    /// plan plans again with them and refuses any difference.
    #[serde(default)]
    pub options: PlanOptions,
    /// In a plan file only: `sha256:` (or, with `GKQ_PLAN_KEY` set, `hmac-sha256:`) over the rest
    /// of the file. `gkq apply PLANFILE` refuses a file whose digest does not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<String>,
}

/// Where the cluster lives: `projects/{project}/locations/{location}/clusters/{cluster}`.
#[derive(JsonSchema)]
#[schemars(rename = "ClusterRef")]
#[allow(dead_code)] // only its schema is used
struct ClusterRefSchema {
    project: String,
    location: String,
    cluster: String,
}

/// What happens to one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub addr: ResourceAddr,
    pub kind: ActionKind,
    /// Why: what is missing, which fields changed and how, why a replace is needed.
    pub reason: String,
    /// For replaces: whether the old resource goes before the new one is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_strategy: Option<ReplaceStrategy>,
    /// Set when the action needs consent or ownership gkq does not have; the executor refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
    /// Field-level changes, live (`before`) to desired (`after`).
    #[serde(default)]
    pub changes: Vec<FieldChange>,
    /// Unified diff of canonical YAML, live to desired; empty for no-ops.
    #[serde(default)]
    pub diff: String,
    /// The API calls, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The desired body or object (absent for deletes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<Arc<Value>>,
    /// Fingerprint of the live resource the action was planned against (`sha256:<16 hex>`);
    /// absent when it did not exist. It covers what the action depends on: the fields gkq sets,
    /// not status or fields other controllers own. Apply refuses the action if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_fingerprint: Option<String>,
    /// The parts of the fingerprint by field path (`spec.resourceGroups` -> short hash), so that
    /// a refusal names the fields that changed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub live_fields: BTreeMap<String, String>,
    /// Set when the action writes sensitive values (a Secret's data, a variable declared
    /// `sensitive`): `desired`, `steps`, `changes` and `diff` show markers instead, and the
    /// values themselves are never in the plan's JSON. Apply takes them from the spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// Actions that must succeed before this one runs.
    #[serde(default)]
    pub depends_on: Vec<ResourceAddr>,
    /// Fields of the object another field manager owns with another value, as the server's
    /// dry run (which does not force) named them, and what the plan does about each: left to
    /// the manager (the applied object leaves them out) or forced (`--force-conflicts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<conflicts::Conflict>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    Create,
    Update,
    Replace,
    Delete,
    NoOp,
}

impl ActionKind {
    pub fn is_change(self) -> bool {
        self != ActionKind::NoOp
    }

    /// The Terraform-style glyph: `+`, `~`, `-/+`, `-`, or a space.
    pub fn glyph(self) -> &'static str {
        match self {
            ActionKind::Create => "+",
            ActionKind::Update => "~",
            ActionKind::Replace => "-/+",
            ActionKind::Delete => "-",
            ActionKind::NoOp => " ",
        }
    }

    pub fn verb(self) -> &'static str {
        match self {
            ActionKind::Create => "create",
            ActionKind::Update => "update in-place",
            ActionKind::Replace => "replace",
            ActionKind::Delete => "destroy",
            ActionKind::NoOp => "no change",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReplaceStrategy {
    /// The name stays, and names are unique (GKE node pools, Kubernetes objects): the old resource
    /// is deleted first, so there is a gap.
    DeleteThenCreate,
    /// The new resource has a different name and is ready before the old one goes.
    CreateThenDelete,
}

/// One API call of an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "call")]
pub enum Step {
    /// `clusters.create` with this `cluster` body.
    #[serde(rename = "clusters.create")]
    CreateCluster { body: Value },
    #[serde(rename = "clusters.delete")]
    DeleteCluster,
    /// `clusters.update` with this `ClusterUpdate`.
    #[serde(rename = "clusters.update")]
    UpdateCluster { update: Value },
    /// `clusters.setResourceLabels`: these labels, plus GKE's own `goog-*` labels and the label
    /// fingerprint from a fresh read at apply time.
    #[serde(rename = "clusters.setResourceLabels")]
    SetClusterResourceLabels { labels: Map<String, Value> },
    /// `nodePools.create` with this `nodePool` body.
    #[serde(rename = "nodePools.create")]
    CreateNodePool { body: Value },
    #[serde(rename = "nodePools.delete")]
    DeleteNodePool { pool: String },
    /// `nodePools.update` with one field group; the etag (and GKE's own labels and taints) are
    /// added from a fresh read at apply time.
    #[serde(rename = "nodePools.update")]
    UpdateNodePool {
        pool: String,
        field: String,
        body: Value,
    },
    #[serde(rename = "nodePools.setAutoscaling")]
    SetNodePoolAutoscaling { pool: String, autoscaling: Value },
    #[serde(rename = "nodePools.setManagement")]
    SetNodePoolManagement { pool: String, management: Value },
    /// Kubernetes server-side apply of this object with gkq's field manager.
    // Shared with the action's `desired`: one copy of each object however many hold it.
    #[serde(rename = "kubernetes.apply")]
    KubeApply { object: Arc<Value> },
    #[serde(rename = "kubernetes.delete")]
    #[serde(rename_all = "camelCase")]
    KubeDelete {
        api_version: String,
        kind: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        name: String,
    },
}

impl Step {
    /// The API method, as GKE and Kubernetes name it.
    pub fn method(&self) -> &'static str {
        match self {
            Step::CreateCluster { .. } => "clusters.create",
            Step::DeleteCluster => "clusters.delete",
            Step::UpdateCluster { .. } => "clusters.update",
            Step::SetClusterResourceLabels { .. } => "clusters.setResourceLabels",
            Step::CreateNodePool { .. } => "nodePools.create",
            Step::DeleteNodePool { .. } => "nodePools.delete",
            Step::UpdateNodePool { .. } => "nodePools.update",
            Step::SetNodePoolAutoscaling { .. } => "nodePools.setAutoscaling",
            Step::SetNodePoolManagement { .. } => "nodePools.setManagement",
            Step::KubeApply { .. } => "kubernetes.apply",
            Step::KubeDelete { .. } => "kubernetes.delete",
        }
    }

    pub fn is_gke(&self) -> bool {
        !matches!(self, Step::KubeApply { .. } | Step::KubeDelete { .. })
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::UpdateCluster { update } => {
                let fields: Vec<&String> = update
                    .as_object()
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                write!(
                    f,
                    "clusters.update ({})",
                    fields
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            Step::UpdateNodePool { field, .. } => write!(f, "nodePools.update ({field})"),
            other => f.write_str(other.method()),
        }
    }
}

/// How many actions of each kind (its `Display` is the summary line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub replace: usize,
    pub delete: usize,
    pub no_op: usize,
    /// Actions apply will refuse (their `blocked` is set).
    pub blocked: usize,
    /// Resources gkq owns that the spec no longer names, left in place (the plan's `orphans`).
    #[serde(default)]
    pub orphans: usize,
}

impl Summary {
    /// The counts of `actions` (no orphans: the planner counts those).
    pub fn of(actions: &[Action]) -> Self {
        let mut summary = Summary::default();
        for action in actions {
            match action.kind {
                ActionKind::Create => summary.create += 1,
                ActionKind::Update => summary.update += 1,
                ActionKind::Replace => summary.replace += 1,
                ActionKind::Delete => summary.delete += 1,
                ActionKind::NoOp => summary.no_op += 1,
            }
            if action.blocked.is_some() {
                summary.blocked += 1;
            }
        }
        summary
    }

    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.replace + self.delete > 0
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Live state matches the spec only when nothing gkq owns is left outside it either.
        match (self.has_changes(), self.orphans) {
            (false, 0) => return f.write_str("No changes. Live state matches the spec."),
            (false, _) => f.write_str("No changes to apply.")?,
            (true, _) => write!(
                f,
                "Plan: {} to create, {} to update, {} to replace, {} to delete.",
                self.create, self.update, self.replace, self.delete
            )?,
        }
        match self.orphans {
            0 => Ok(()),
            1 => f.write_str(
                " 1 resource gkq manages is no longer in the spec and is left in place.",
            ),
            n => write!(
                f,
                " {n} resources gkq manages are no longer in the spec and are left in place."
            ),
        }
    }
}

/// A resource gkq owns that the spec no longer names, left in place because the plan does not
/// prune it: it keeps running and keeps what it holds until `gkq apply --prune` deletes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Orphan {
    pub address: ResourceAddr,
    /// The kind as its API names it (`RayJob`, `ClusterQueue`), `NodePool` for a GKE node pool.
    pub kind: String,
    /// `null` for cluster-scoped objects and node pools.
    pub namespace: Option<String>,
    pub name: String,
    /// The quota it holds: a job's, from its Kueue Workload's admission while the Workload holds
    /// a reservation (`placement::job_workload` names the Workload); empty otherwise.
    #[serde(default)]
    pub holds: Vec<crate::placement::held::HeldQuota>,
}

/// Something the plan reports without acting on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<ResourceAddr>,
    pub message: String,
    /// Set for what validating the spec said (as `gkq validate` says it); absent for the plan's
    /// own notices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<NoticeSeverity>,
    /// Where in the spec, `file:line:column`, when the spec's notice has a place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The spec path of the value it is about, e.g. `kueue.clusterQueues[0]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// How to act on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

/// How much a notice from the spec's validation matters (errors make a spec invalid, so a plan
/// never has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NoticeSeverity {
    Warning,
    Note,
}

impl Notice {
    /// A notice of the plan's own.
    pub fn new(addr: Option<ResourceAddr>, message: impl Into<String>) -> Self {
        Notice {
            addr,
            message: message.into(),
            severity: None,
            at: None,
            path: None,
            help: None,
        }
    }

    /// The notices of a valid spec's warnings and notes, in their order (its errors, which a
    /// valid spec has none of, are left out).
    pub fn of_spec(
        diagnostics: &crate::spec::Diagnostics,
        sources: &crate::spec::SourceMap,
    ) -> Vec<Notice> {
        use crate::spec::Severity;
        diagnostics
            .iter()
            .filter_map(|d| {
                let severity = match d.severity {
                    Severity::Error => return None,
                    Severity::Warning => NoticeSeverity::Warning,
                    Severity::Note => NoticeSeverity::Note,
                };
                Some(Notice {
                    addr: None,
                    message: d.message.clone(),
                    severity: Some(severity),
                    at: d.span.map(|span| sources.location(span)),
                    path: d.path.clone(),
                    help: d.help.clone(),
                })
            })
            .collect()
    }
}

impl Plan {
    pub fn has_changes(&self) -> bool {
        self.summary.has_changes()
    }

    /// The actions that change something (no-ops left out).
    pub fn changes(&self) -> impl Iterator<Item = &Action> {
        self.actions.iter().filter(|a| a.kind.is_change())
    }

    pub fn action(&self, addr: &ResourceAddr) -> Option<&Action> {
        self.actions.iter().find(|a| &a.addr == addr)
    }

    /// The conflicts apply takes by force (it needs `--force-conflicts` for them), with their
    /// actions.
    pub fn forced_conflicts(&self) -> impl Iterator<Item = (&Action, &conflicts::Conflict)> {
        self.changes().flat_map(|a| {
            a.conflicts
                .iter()
                .filter(|c| c.resolution == conflicts::Resolution::Force)
                .map(move |c| (a, c))
        })
    }

    /// Whether the plan writes an object: creates, updates or replaces one (deletes only remove).
    pub fn writes(&self) -> bool {
        self.changes().any(|a| {
            matches!(
                a.kind,
                ActionKind::Create | ActionKind::Update | ActionKind::Replace
            )
        })
    }

    /// Whether the plan deletes or recreates something (CI may want a human for these).
    pub fn is_destructive(&self) -> bool {
        self.changes()
            .any(|a| matches!(a.kind, ActionKind::Replace | ActionKind::Delete))
    }

    /// `gkq apply SPEC --prune` as the spec this plan was made from is named (path, `--env`,
    /// `--git-ref`, the names of `--var`s given): the command that deletes the plan's orphans.
    /// `None` when the plan has none.
    pub fn prune_command(&self) -> Option<String> {
        if self.orphans.is_empty() {
            return None;
        }
        let mut words = vec!["gkq".to_string(), "apply".to_string()];
        if let Some(provenance) = &self.provenance {
            let spec = &provenance.spec;
            words.push(shell_word(&spec.path));
            if let Some(env) = &spec.env {
                words.extend(["--env".to_string(), shell_word(env)]);
            }
            if let Some(git_ref) = &spec.git_ref {
                words.extend(["--git-ref".to_string(), shell_word(git_ref)]);
            }
            for variable in &spec.variable_sources {
                if variable.source == crate::spec::vars::ValueSource::Cli {
                    // Names only: a plan never holds a value.
                    words.extend(["--var".to_string(), format!("{}=...", variable.name)]);
                }
            }
        }
        words.push("--prune".to_string());
        Some(words.join(" "))
    }

    /// A short hash of the actions, to tell whether two plans would do the same thing
    /// (`gkq watch` prints only when it changes).
    pub fn fingerprint(&self) -> String {
        let changes: Vec<&Action> = self.changes().collect();
        let value = serde_json::to_value(changes).unwrap_or(Value::Null);
        let text = serde_json::to_string(&crate::diff::text::canonical(&value)).unwrap_or_default();
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }

    /// The JSON Schema of the plan's JSON form (checked in as `schemas/plan.schema.json`).
    pub fn json_schema() -> Value {
        serde_json::to_value(schemars::schema_for!(Plan)).unwrap_or(Value::Null)
    }
}

/// `word` as one shell word: as it is when it has nothing a shell reads specially, else in
/// single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A plan for unit tests of what reads plans: cluster `c` in project `p`, location `l`, one
/// bare action of each `(address, kind)`, nothing else.
#[cfg(test)]
pub(crate) fn plan_for_tests(
    actions: impl IntoIterator<Item = (ResourceAddr, ActionKind)>,
) -> Plan {
    let actions: Vec<Action> = actions
        .into_iter()
        .map(|(addr, kind)| Action {
            addr,
            kind,
            reason: String::new(),
            replace_strategy: None,
            blocked: None,
            changes: vec![],
            diff: String::new(),
            steps: vec![],
            desired: None,
            live_fingerprint: None,
            live_fields: BTreeMap::new(),
            sensitive: false,
            depends_on: vec![],
            conflicts: Vec::new(),
        })
        .collect();
    Plan {
        format_version: 1,
        cluster: ClusterRef {
            project: "p".into(),
            location: "l".into(),
            cluster: "c".into(),
        },
        summary: Summary::of(&actions),
        actions,
        orphans: vec![],
        notices: vec![],
        disruptions: vec![],
        placements: vec![],
        quota: vec![],
        workload_changes: vec![],
        rungs: vec![],
        provenance: None,
        sealed: Default::default(),
        options: Default::default(),
        integrity: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines() {
        let summary = Summary {
            create: 3,
            update: 1,
            ..Summary::default()
        };
        assert_eq!(
            summary.to_string(),
            "Plan: 3 to create, 1 to update, 0 to replace, 0 to delete."
        );
        let nothing = Summary {
            no_op: 4,
            ..Summary::default()
        };
        assert_eq!(
            nothing.to_string(),
            "No changes. Live state matches the spec."
        );
    }

    #[test]
    fn steps_serialise_with_their_api_method() {
        let step = Step::SetNodePoolAutoscaling {
            pool: "dws-pool".into(),
            autoscaling: serde_json::json!({"enabled": true}),
        };
        let json = serde_json::to_value(&step).unwrap();
        assert_eq!(json["call"], "nodePools.setAutoscaling");
        assert_eq!(serde_json::from_value::<Step>(json).unwrap(), step);
        assert_eq!(ActionKind::NoOp, serde_json::from_str("\"no-op\"").unwrap());
    }
}
