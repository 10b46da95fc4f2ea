//! `plan(desired, live, options) -> Plan`: pair desired and live by address, diff, decide the
//! action for each resource, then order everything by the dependency graph.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::conflicts::Resolved;
use super::graph::{CycleError, DependencyGraph};
use super::ownership::{
    gke_owned, gke_owned_by, gke_owner_conflict, is_gke_owner_only, is_owner_only, kube_owned,
    kube_owner, owner_conflict,
};
use super::sealed::{Sealed, seal};
use super::{
    Action, ActionKind, Notice, Orphan, PLAN_FORMAT_VERSION, Plan, PlanOptions, ReplaceStrategy,
    Step, Summary,
};
use crate::addr::{AddrError, ResourceAddr};
use crate::diff::fingerprint::fingerprint_with_fields;
use crate::diff::gke::{diff_cluster, diff_node_pool, request_body};
use crate::diff::kube::diff_object;
use crate::diff::normalize::{
    GKE_CLUSTER_STATUS, GKE_NODE_POOL_STATUS, gke_cluster_live_view, gke_node_pool_live_view,
    kube_view, status_name,
};
use crate::diff::sensitive::Redactor;
use crate::diff::text::unified_yaml_diff_owned;
use crate::diff::{FieldChange, ResourceDiff, UpdateMethod};
use crate::model::live::{KubeLive, LiveState};
use crate::model::{DesiredState, GKE_STACK_LABEL, STACK_LABEL};

/// Why no plan could be made. Each names what to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("Kubernetes object #{index} of the desired state has no address: {source}")]
    BadObject {
        index: usize,
        #[source]
        source: AddrError,
    },
    #[error("{addr} appears more than once in the desired state")]
    Duplicate { addr: ResourceAddr },
    #[error(transparent)]
    Cycle(#[from] CycleError),
}

/// Plans the changes that converge `live` to `desired`. Pure: no I/O, same inputs give the same
/// plan. See the [module docs](super) for the rules.
pub fn plan(
    desired: &DesiredState,
    live: &LiveState,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    plan_judged(desired, live, BTreeMap::new(), options)
}

/// [`plan`], with the actions of Kubernetes objects an observer already decided with this plan's
/// [`Judge`] as the server's answers arrived (`live` then holds only what else the plan reads of
/// them). An object without one is decided here from `live`, as [`plan`] does.
pub fn plan_judged(
    desired: &DesiredState,
    live: &LiveState,
    judged: BTreeMap<ResourceAddr, Action>,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    let mut planner = Planner::new(desired, live, options);
    planner.judged = judged;
    planner.plan_gke();
    planner.plan_kube()?;
    planner.finish()
}

/// An action before ordering, with the object whose references give its graph edges.
struct Draft<'a> {
    action: Action,
    /// The object whose references make graph edges (borrowed: plans of thousands of objects
    /// should not copy each one again for this).
    graph_object: Option<&'a Value>,
}

struct Planner<'a> {
    desired: &'a DesiredState,
    live: &'a LiveState,
    options: &'a PlanOptions,
    judge: Judge,
    /// Actions an observer decided already (see [`plan_judged`]).
    judged: BTreeMap<ResourceAddr, Action>,
    drafts: BTreeMap<ResourceAddr, Draft<'a>>,
    /// What gkq owns outside the spec and leaves in place (no `prune`).
    orphans: Vec<Orphan>,
    notices: Vec<Notice>,
    sealed: Sealed,
}

const NOT_OWNED: &str = "it lacks gkq's ownership labels, and gkq does not change what it does not own \
     (`gkq apply --adopt` takes it over)";

/// Decides the action for one resource from its desired and live state. [`plan`] decides every
/// resource with one; an observer may decide each Kubernetes object with the same one as the
/// server's answer for it arrives ([`Judge::kube_action`]), so that a plan of thousands of
/// objects holds their actions, not their live and dry-run trees.
pub struct Judge {
    /// The stack whose ownership labels mark what gkq may change.
    stack: Option<String>,
    /// The GkqStack the plan is for (`PlanOptions::owner`).
    owner: Option<String>,
    /// The stack whose objects this plan takes back (`PlanOptions::release_from`).
    release_from: Option<String>,
    adopt: bool,
    /// `PlanOptions::force_conflicts`: fields another manager owns are taken, not left to it.
    force_conflicts: bool,
    redactor: Redactor,
}

impl Judge {
    pub fn new(desired: &DesiredState, options: &PlanOptions) -> Self {
        // The stack name comes from the spec's own labels; without one, any gkq label counts.
        let stack = desired
            .gke
            .cluster
            .pointer("/resourceLabels")
            .and_then(|labels| labels.get(GKE_STACK_LABEL))
            .or_else(|| {
                desired.kubernetes.iter().find_map(|o| {
                    o.pointer("/metadata/labels")
                        .and_then(|l| l.get(STACK_LABEL))
                })
            })
            .and_then(Value::as_str)
            .map(str::to_string);
        Judge {
            stack,
            owner: options.owner.clone(),
            release_from: options.release_from.clone(),
            adopt: options.adopt,
            force_conflicts: options.force_conflicts,
            redactor: Redactor::new(desired.sensitive.values().to_vec()),
        }
    }

    /// Whether fields other managers own are taken by force (`PlanOptions::force_conflicts`):
    /// the observer resolves the server's conflicts with it ([`super::conflicts::resolve`]).
    pub fn forces_conflicts(&self) -> bool {
        self.force_conflicts
    }

    /// The action for desired Kubernetes object `object` at `addr`: `live` as read (`None`: it
    /// does not exist), `predicted` the server's dry-run answer for it, when there is one, and
    /// what was decided about the fields other managers own (`resolved`, when the server
    /// reported any).
    pub fn kube_action(
        &self,
        addr: &ResourceAddr,
        object: &Arc<Value>,
        live: Option<&Value>,
        predicted: Option<&Value>,
        resolved: Option<&Resolved>,
    ) -> Action {
        match live {
            None => self.kube_create(addr, object, predicted),
            Some(live) => {
                let mut action = self.kube_change(addr, object, live, predicted);
                if action.kind == ActionKind::Update
                    && let Some(resolved) = resolved
                {
                    with_conflicts(&mut action, resolved);
                }
                action
            }
        }
    }

    /// The no-op for desired object `object` whose live state `live` already matches it, as
    /// `diff` (empty, from comparing the two without a dry run) showed: the observer that
    /// found it unchanged hands over its comparison rather than have it made twice.
    pub fn kube_unchanged(
        &self,
        addr: &ResourceAddr,
        object: &Arc<Value>,
        live: &Value,
        diff: ResourceDiff,
    ) -> Action {
        debug_assert!(diff.is_empty());
        let fingerprint = live_basis(addr, Some(object), live);
        self.update_or_noop(addr, diff, object.clone(), live, true, fingerprint)
    }

    /// A diff as it may be shown, both sides with sensitive values replaced by markers, made
    /// from views not needed after (so not copied); and the diff's changes.
    fn shown_parts(&self, diff: ResourceDiff) -> (Vec<FieldChange>, String) {
        let ResourceDiff {
            changes,
            live_view,
            desired_view,
        } = diff;
        (
            changes,
            self.shown_text_diff(Some(live_view), Some(desired_view)),
        )
    }

    fn shown_text_diff(&self, before: Option<Value>, after: Option<Value>) -> String {
        let (before, after) = self.redactor.pair(before, after);
        unified_yaml_diff_owned(before, after)
    }

    fn kube_create(
        &self,
        addr: &ResourceAddr,
        object: &Arc<Value>,
        predicted: Option<&Value>,
    ) -> Action {
        let reason = if predicted.is_some() {
            "does not exist yet".to_string()
        } else {
            "does not exist yet (server defaults known after apply)".to_string()
        };
        let shown = predicted
            .map(kube_view)
            .unwrap_or_else(|| kube_view(object));
        let object = object.clone();
        let mut action = create_action(
            addr,
            reason,
            Step::KubeApply {
                object: object.clone(),
            },
            object,
        );
        action.diff = self.shown_text_diff(None, Some(shown));
        action
    }

    fn kube_change(
        &self,
        addr: &ResourceAddr,
        object: &Arc<Value>,
        live: &Value,
        predicted: Option<&Value>,
    ) -> Action {
        let owned = kube_owned(live, self.stack.as_deref()) || self.adopt;
        let released =
            self.release_from.is_some() && kube_owner(live) == self.release_from.as_deref();
        let conflict = owner_conflict(live, self.owner.as_deref()).filter(|_| !released);
        let mut diff = diff_object(addr, object, live, predicted);
        if self.owner.is_none() && conflict.is_some() {
            // The stack's annotation is the stack's, not a difference from this spec.
            diff.changes.retain(|change| !is_owner_only(change));
        }
        let fingerprint = live_basis(addr, Some(object), live);
        let reasons = diff.replace_reasons();
        if reasons.is_empty() {
            let mut action =
                self.update_or_noop(addr, diff, object.clone(), live, owned, fingerprint);
            if action.kind != ActionKind::NoOp && conflict.is_some() {
                action.blocked = conflict;
            }
            action
        } else {
            let object = object.clone();
            let (changes, diff) = self.shown_parts(diff);
            Action {
                addr: addr.clone(),
                kind: ActionKind::Replace,
                reason: format!(
                    "{}. The name stays, so the old object is deleted before the new one is created",
                    reasons.join("; ")
                ),
                replace_strategy: Some(ReplaceStrategy::DeleteThenCreate),
                blocked: conflict.or_else(|| {
                    (!owned).then(|| format!("it would be recreated, but {NOT_OWNED}"))
                }),
                diff,
                changes,
                steps: vec![
                    kube_delete_step(addr, live),
                    Step::KubeApply {
                        object: object.clone(),
                    },
                ],
                desired: Some(object),
                live_fingerprint: fingerprint.0,
                live_fields: fingerprint.1,
                sensitive: false,
                depends_on: Vec::new(),
                conflicts: Vec::new(),
            }
        }
    }

    /// An in-place update (one step per method) or a no-op.
    /// Why this plan may not change or delete a live cluster or node pool: another stack owns
    /// it (not the stack this plan releases). A plan made by hand (no owner) does not count the
    /// stack's `gkq-owner` label as a change.
    fn gke_conflict(&self, live: &Value, diff: Option<&mut ResourceDiff>) -> Option<String> {
        let released = self
            .release_from
            .as_deref()
            .is_some_and(|stack| gke_owned_by(live, stack));
        let conflict = gke_owner_conflict(live, self.owner.as_deref()).filter(|_| !released);
        if let Some(diff) = diff.filter(|_| self.owner.is_none() && conflict.is_some()) {
            diff.changes.retain(|change| !is_gke_owner_only(change));
        }
        conflict
    }

    fn update_or_noop(
        &self,
        addr: &ResourceAddr,
        diff: ResourceDiff,
        desired: Arc<Value>,
        live: &Value,
        owned: bool,
        (live_fingerprint, live_fields): LiveBasis,
    ) -> Action {
        if diff.is_empty() {
            return Action {
                addr: addr.clone(),
                kind: ActionKind::NoOp,
                reason: "matches the spec".to_string(),
                replace_strategy: None,
                blocked: None,
                changes: Vec::new(),
                diff: String::new(),
                steps: Vec::new(),
                desired: Some(desired),
                live_fingerprint,
                live_fields,
                sensitive: false,
                depends_on: Vec::new(),
                conflicts: Vec::new(),
            };
        }
        let steps: Vec<Step> = diff
            .methods()
            .iter()
            .map(|method| step_for(addr, method, &desired, live))
            .collect();
        let reason = update_reason(&diff.changes);
        let (changes, diff) = self.shown_parts(diff);
        Action {
            addr: addr.clone(),
            kind: ActionKind::Update,
            reason,
            replace_strategy: None,
            blocked: (!owned).then(|| format!("it would be updated, but {NOT_OWNED}")),
            diff,
            changes,
            steps,
            desired: Some(desired),
            live_fingerprint,
            live_fields,
            sensitive: false,
            depends_on: Vec::new(),
            conflicts: Vec::new(),
        }
    }
}

impl<'a> Planner<'a> {
    fn new(desired: &'a DesiredState, live: &'a LiveState, options: &'a PlanOptions) -> Self {
        Planner {
            desired,
            live,
            options,
            judge: Judge::new(desired, options),
            judged: BTreeMap::new(),
            drafts: BTreeMap::new(),
            orphans: Vec::new(),
            notices: Vec::new(),
            sealed: Sealed::default(),
        }
    }

    fn notice(&mut self, addr: Option<&ResourceAddr>, message: impl Into<String>) {
        self.notices.push(Notice::new(addr.cloned(), message));
    }

    /// Records a resource gkq owns that the spec no longer names and that this plan leaves in
    /// place; what it holds is added once Kueue's Workloads are read
    /// ([`super::placements::annotate`]).
    fn orphan(&mut self, addr: &ResourceAddr, kind: &str) {
        self.orphans.push(Orphan {
            address: addr.clone(),
            kind: kind.to_string(),
            namespace: addr.namespace.clone(),
            name: addr.name.clone(),
            holds: Vec::new(),
        });
    }

    /// A cluster or pool in the middle of a GKE operation (after an interrupted apply, or GKE's
    /// own upgrade or repair) is said so: apply waits for the operation before changing it.
    fn notice_in_progress(&mut self, addr: &ResourceAddr, live: &Value, statuses: &[&str]) {
        let status = status_name(live, statuses);
        if let Some(status @ ("PROVISIONING" | "RECONCILING" | "STOPPING")) = status.as_deref() {
            self.notice(
                Some(addr),
                format!(
                    "{status}: a GKE operation on it is still running (an interrupted apply leaves \
                     it to GKE, and GKE repairs and upgrades on its own); apply waits for it before \
                     changing the cluster"
                ),
            );
        }
    }

    /// Adds an action: its diff of a new resource, and its sensitive values sealed away from
    /// what is shown and saved.
    fn add(&mut self, mut action: Action, graph_object: Option<&'a Value>) {
        if action.kind == ActionKind::Create && action.diff.is_empty() {
            action.diff = self
                .judge
                .shown_text_diff(None, action.desired.as_deref().cloned());
        }
        if let Some(real) = seal(&mut action, &self.judge.redactor) {
            self.sealed.insert(action.addr.clone(), real);
        }
        self.drafts.insert(
            action.addr.clone(),
            Draft {
                action,
                graph_object,
            },
        );
    }

    /// `None` if the cluster may be deleted; otherwise what is missing.
    fn cluster_delete_blocked(&self) -> Option<String> {
        if self.desired.gke.deletion_protection {
            Some("the spec keeps deletion protection on (`cluster.deletionProtection`): set it to false and \
                  apply that first; then `gkq destroy --confirm CLUSTER` deletes the cluster, and a following \
                  `gkq apply` creates it anew"
                .to_string())
        } else if !self.options.allow_cluster_delete {
            Some(
                "gkq deletes a cluster only with `gkq destroy --confirm CLUSTER`; to recreate it, destroy it \
                 and apply again"
                    .to_string(),
            )
        } else {
            None
        }
    }

    fn plan_gke(&mut self) {
        // Copies of the shared references, so that borrows of them do not hold `self`.
        let (desired, live): (&'a DesiredState, &'a LiveState) = (self.desired, self.live);
        let gke = &desired.gke;
        let cluster_addr = ResourceAddr::gke_cluster(gke.cluster_ref.cluster.clone());
        let live_cluster = live.gke.cluster.as_ref();
        let with_cluster: Vec<&Value> = gke
            .cluster
            .get("nodePools")
            .and_then(Value::as_array)
            .map(|pools| pools.iter().collect())
            .unwrap_or_default();
        let pool_name = |pool: &Value| {
            pool.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        // Pools the cluster body creates (the default pool) come first; a later duplicate name wins.
        let mut desired_pools: BTreeMap<String, (&Value, bool)> = BTreeMap::new();
        for pool in &with_cluster {
            desired_pools.insert(pool_name(pool), (pool, true));
        }
        for pool in &gke.node_pools {
            desired_pools.insert(pool_name(pool), (pool, false));
        }

        if self.options.destroy {
            if let Some(live_cluster) = live_cluster {
                self.plan_cluster_destroy(&cluster_addr, live_cluster);
            }
            return;
        }

        let Some(live_cluster) = live_cluster else {
            let names: Vec<String> = with_cluster.iter().map(|p| pool_name(p)).collect();
            let reason = if names.is_empty() {
                "the cluster does not exist yet".to_string()
            } else {
                format!(
                    "the cluster does not exist yet; it is created with its node pool{} {}",
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                )
            };
            self.add(
                create_action(
                    &cluster_addr,
                    reason,
                    Step::CreateCluster {
                        body: gke.cluster.clone(),
                    },
                    Arc::new(gke.cluster.clone()),
                ),
                None,
            );
            for (name, (body, in_cluster_body)) in &desired_pools {
                if !in_cluster_body {
                    self.plan_pool_create(name, body, "the node pool does not exist yet");
                }
            }
            return;
        };

        let recreated = self.plan_cluster(&cluster_addr, live_cluster);
        let live_pools = if recreated {
            BTreeMap::new()
        } else {
            live.gke.node_pools()
        };
        for (name, (body, in_cluster_body)) in &desired_pools {
            match live_pools.get(name) {
                Some(live_pool) => self.plan_pool(name, body, live_pool),
                None if recreated && *in_cluster_body => {}
                None if recreated => self.plan_pool_create(
                    name,
                    body,
                    "the cluster is recreated, and this pool with it",
                ),
                None => self.plan_pool_create(name, body, "the node pool does not exist yet"),
            }
        }
        for (name, live_pool) in &live_pools {
            if !desired_pools.contains_key(name) {
                self.plan_removed_pool(name, live_pool);
            }
        }
    }

    /// Plans the cluster action; returns whether the cluster is replaced.
    fn plan_cluster(&mut self, addr: &ResourceAddr, live: &Value) -> bool {
        let state: &'a DesiredState = self.desired;
        let desired = &state.gke.cluster;
        let cluster_ref = &state.gke.cluster_ref;
        let owned = gke_owned(live, self.judge.stack.as_deref()) || self.options.adopt;
        let mut diff = diff_cluster(desired, live);
        let conflict = self.judge.gke_conflict(live, Some(&mut diff));
        if let Some(conflict) = conflict.as_deref().filter(|_| self.judge.owner.is_none()) {
            // A plan made by hand says whose the cluster is, even when it changes nothing.
            self.notice(
                Some(addr),
                format!("the cluster is not this command's: {conflict}"),
            );
        }
        let mut replace_reasons = diff.replace_reasons();
        // A live cluster at another location or under another name is a different cluster: the
        // observer only hands one over when asked to compare across a move.
        let live_location = live.get("location").and_then(Value::as_str);
        if live_location.is_some_and(|l| l != cluster_ref.location) {
            replace_reasons.push(format!(
                "the cluster moves from {} to {}: a cluster's location cannot change",
                live_location.unwrap_or_default(),
                cluster_ref.location
            ));
        }
        if live
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| n != cluster_ref.cluster)
        {
            replace_reasons.push("a cluster's name is its identity".to_string());
        }
        if status_name(live, GKE_CLUSTER_STATUS).as_deref() == Some("ERROR") {
            replace_reasons.push("the live cluster is in ERROR".to_string());
        }
        self.notice_in_progress(addr, live, GKE_CLUSTER_STATUS);
        let fingerprint = live_basis(addr, Some(desired), live);
        if !replace_reasons.is_empty() {
            let blocked = if owned {
                self.cluster_delete_blocked()
            } else {
                Some(format!("the cluster would be recreated, but {NOT_OWNED}"))
            };
            let blocked = conflict.or(blocked);
            let (changes, diff) = self.judge.shown_parts(diff);
            let action = Action {
                addr: addr.clone(),
                kind: ActionKind::Replace,
                reason: format!(
                    "{}; recreating the cluster deletes every node pool and workload in it",
                    replace_reasons.join("; ")
                ),
                replace_strategy: Some(ReplaceStrategy::DeleteThenCreate),
                blocked,
                diff,
                changes,
                steps: vec![
                    Step::DeleteCluster,
                    Step::CreateCluster {
                        body: desired.clone(),
                    },
                ],
                desired: Some(Arc::new(desired.clone())),
                live_fingerprint: fingerprint.0,
                live_fields: fingerprint.1,
                sensitive: false,
                depends_on: Vec::new(),
                conflicts: Vec::new(),
            };
            self.add(action, None);
            return true;
        }
        let mut action = self.judge.update_or_noop(
            addr,
            diff,
            Arc::new(desired.clone()),
            live,
            owned,
            fingerprint,
        );
        if action.kind != ActionKind::NoOp && conflict.is_some() {
            action.blocked = conflict;
        }
        self.add(action, None);
        false
    }

    fn plan_cluster_destroy(&mut self, addr: &ResourceAddr, live: &Value) {
        let pools: Vec<String> = self.live.gke.node_pools().into_keys().collect();
        let conflict = self.judge.gke_conflict(live, None);
        let blocked = if let Some(conflict) = conflict {
            Some(conflict)
        } else if gke_owned(live, self.judge.stack.as_deref()) {
            self.cluster_delete_blocked()
        } else {
            Some(format!("the cluster would be deleted, but {NOT_OWNED}"))
        };
        let (live_fingerprint, live_fields) = live_basis(addr, None, live);
        let action = Action {
            addr: addr.clone(),
            kind: ActionKind::Delete,
            reason: format!(
                "destroy: the cluster goes, with its node pools ({}) and every Kubernetes object in it",
                pools.join(", ")
            ),
            replace_strategy: None,
            blocked,
            changes: Vec::new(),
            diff: self
                .judge
                .shown_text_diff(Some(gke_cluster_live_view(live)), None),
            steps: vec![Step::DeleteCluster],
            desired: None,
            live_fingerprint,
            live_fields,
            sensitive: false,
            depends_on: Vec::new(),
            conflicts: Vec::new(),
        };
        self.add(action, None);
    }

    fn plan_pool_create(&mut self, name: &str, body: &Value, reason: &str) {
        let addr = ResourceAddr::gke_node_pool(name);
        let action = create_action(
            &addr,
            reason.to_string(),
            Step::CreateNodePool { body: body.clone() },
            Arc::new(body.clone()),
        );
        self.add(action, None);
    }

    fn plan_pool(&mut self, name: &str, desired: &Value, live: &Value) {
        let addr = ResourceAddr::gke_node_pool(name);
        let owned = gke_owned(live, self.judge.stack.as_deref()) || self.options.adopt;
        let mut diff = diff_node_pool(desired, live);
        let conflict = self.judge.gke_conflict(live, Some(&mut diff));
        let fingerprint = live_basis(&addr, Some(desired), live);
        let mut reasons = diff.replace_reasons();
        self.notice_in_progress(&addr, live, GKE_NODE_POOL_STATUS);
        if status_name(live, GKE_NODE_POOL_STATUS).as_deref() == Some("ERROR") {
            reasons.insert(
                0,
                "the live node pool is in ERROR (a failed create, such as a stockout, leaves it behind)".to_string(),
            );
        }
        if reasons.is_empty() {
            let mut action = self.judge.update_or_noop(
                &addr,
                diff,
                Arc::new(desired.clone()),
                live,
                owned,
                fingerprint,
            );
            if action.kind != ActionKind::NoOp && conflict.is_some() {
                action.blocked = conflict;
            }
            self.add(action, None);
            return;
        }
        let (changes, diff) = self.judge.shown_parts(diff);
        let action = Action {
            addr: addr.clone(),
            kind: ActionKind::Replace,
            reason: format!(
                "{}. Node pool names are unique in a cluster, so the old pool is deleted before the new one \
                 is created: the pool has no nodes in between",
                reasons.join("; ")
            ),
            replace_strategy: Some(ReplaceStrategy::DeleteThenCreate),
            blocked: conflict.or_else(|| {
                (!owned).then(|| format!("the pool would be recreated, but {NOT_OWNED}"))
            }),
            diff,
            changes,
            steps: vec![
                Step::DeleteNodePool {
                    pool: name.to_string(),
                },
                Step::CreateNodePool {
                    body: desired.clone(),
                },
            ],
            desired: Some(Arc::new(desired.clone())),
            live_fingerprint: fingerprint.0,
            live_fields: fingerprint.1,
            sensitive: false,
            depends_on: Vec::new(),
            conflicts: Vec::new(),
        };
        self.add(action, None);
    }

    fn plan_removed_pool(&mut self, name: &str, live: &Value) {
        let addr = ResourceAddr::gke_node_pool(name);
        if !gke_owned(live, self.judge.stack.as_deref()) {
            self.notice(
                Some(&addr),
                "not in the spec and not managed by gkq: left alone",
            );
            return;
        }
        if let Some(conflict) = self.judge.gke_conflict(live, None) {
            self.notice(
                Some(&addr),
                format!("not in the spec: left alone, {conflict}"),
            );
            return;
        }
        if !self.options.prune {
            self.orphan(&addr, "NodePool");
            return;
        }
        let (live_fingerprint, live_fields) = live_basis(&addr, None, live);
        let action = Action {
            addr: addr.clone(),
            kind: ActionKind::Delete,
            reason: "managed by gkq and no longer in the spec".to_string(),
            replace_strategy: None,
            blocked: None,
            changes: Vec::new(),
            diff: self
                .judge
                .shown_text_diff(Some(gke_node_pool_live_view(live)), None),
            steps: vec![Step::DeleteNodePool {
                pool: name.to_string(),
            }],
            desired: None,
            live_fingerprint,
            live_fields,
            sensitive: false,
            depends_on: Vec::new(),
            conflicts: Vec::new(),
        };
        self.add(action, None);
    }

    fn plan_kube(&mut self) -> Result<(), PlanError> {
        let (desired, live): (&'a DesiredState, &'a LiveState) = (self.desired, self.live);
        let mut addrs = Vec::with_capacity(desired.kubernetes.len());
        let mut seen = BTreeSet::new();
        for (index, object) in desired.kubernetes.iter().enumerate() {
            let addr = ResourceAddr::from_object(object)
                .map_err(|source| PlanError::BadObject { index, source })?;
            if !seen.insert(addr.clone()) {
                return Err(PlanError::Duplicate { addr });
            }
            addrs.push((addr, object));
        }
        let objects = match &live.kubernetes {
            KubeLive::Observed { objects } => objects,
            KubeLive::NotObserved => {
                if !addrs.is_empty() && !self.options.destroy {
                    self.notice(
                        None,
                        format!(
                            "{} Kubernetes object(s) not compared: Kubernetes state was not observed",
                            addrs.len()
                        ),
                    );
                }
                return Ok(());
            }
        };
        // Destroying the cluster takes every object with it.
        let cluster_goes = self.drafts.values().any(|d| {
            d.action.addr.kind.is_gke()
                && d.action.kind == ActionKind::Delete
                && d.action.blocked.is_none()
        });
        if !self.options.destroy {
            for (addr, object) in &addrs {
                let action = match self.judged.remove(addr) {
                    Some(action) => action,
                    None => {
                        let observed = objects.get(addr);
                        let live = observed.and_then(|o| o.live.as_ref());
                        let predicted = observed.and_then(|o| o.predicted.as_ref());
                        // Observed without a judge (a destroy, whose objects all go): the
                        // observer resolved no field-manager conflicts.
                        self.judge.kube_action(addr, object, live, predicted, None)
                    }
                };
                self.add(action, Some(object));
            }
        }
        for (addr, observed) in objects {
            let Some(live) = observed.live.as_ref() else {
                continue;
            };
            if (seen.contains(addr) && !self.options.destroy) || cluster_goes {
                continue;
            }
            // Only this plan's own: not what another stack (or, for a stack, no stack) owns.
            if !kube_owned(live, self.judge.stack.as_deref())
                || kube_owner(live) != self.judge.owner.as_deref()
            {
                continue;
            }
            if !(self.options.prune || self.options.destroy) {
                let kind = live.get("kind").and_then(Value::as_str).unwrap_or_default();
                self.orphan(addr, kind);
                continue;
            }
            let (live_fingerprint, live_fields) = live_basis(addr, None, live);
            let action = Action {
                addr: addr.clone(),
                kind: ActionKind::Delete,
                reason: if self.options.destroy {
                    "destroy".to_string()
                } else {
                    "managed by gkq and no longer in the spec".to_string()
                },
                replace_strategy: None,
                blocked: None,
                changes: Vec::new(),
                diff: self.judge.shown_text_diff(Some(kube_view(live)), None),
                steps: vec![kube_delete_step(addr, live)],
                desired: None,
                live_fingerprint,
                live_fields,
                sensitive: false,
                depends_on: Vec::new(),
                conflicts: Vec::new(),
            };
            self.add(action, Some(live));
        }
        Ok(())
    }

    /// Orders the drafts: creates, updates and replaces by dependency, then deletes in reverse.
    fn finish(self) -> Result<Plan, PlanError> {
        let Planner {
            desired,
            options,
            drafts,
            orphans,
            notices,
            sealed,
            ..
        } = self;
        let mut graph =
            DependencyGraph::for_resources(drafts.iter().map(|(a, d)| (a, d.graph_object)));
        // The jobs a plan submits reach Kueue one after another in the spec's order (`jobs:`,
        // then job manifests in file order), each after Kueue decided on the one before: the
        // order `plan::placements` predicts.
        let submitted: Vec<ResourceAddr> = desired
            .kube_objects()
            .filter(|o| crate::model::jobs::queued_by_kueue(o))
            .filter_map(|o| ResourceAddr::from_object(o).ok())
            .filter(|addr| {
                drafts.get(addr).is_some_and(|d| {
                    matches!(d.action.kind, ActionKind::Create | ActionKind::Replace)
                })
            })
            .collect();
        for pair in submitted.windows(2) {
            graph.add_edge(&pair[1], &pair[0]);
        }
        // Jobs the plan deletes release their quota before its jobs are submitted (their deletes
        // come before the first submission, and a job of another kind under the same name waits
        // for its delete), as a replaced job's old run is deleted before its new run is created:
        // `plan::placements` predicts the submissions with that quota free.
        let deleted_runs: Vec<&ResourceAddr> = drafts
            .iter()
            .filter(|(addr, d)| addr.kind.is_run() && d.action.kind == ActionKind::Delete)
            .map(|(addr, _)| addr)
            .collect();
        graph.add_kind_switches(&submitted, &deleted_runs);
        let order = graph.topo_order()?;
        let is_action = |addr: &ResourceAddr| drafts.contains_key(addr);
        let mut dependents: BTreeMap<&ResourceAddr, BTreeSet<&ResourceAddr>> = BTreeMap::new();
        for (dependent, dependency) in graph.edges() {
            dependents.entry(dependency).or_default().insert(dependent);
        }
        // A delete waits for the deletes of what depends on it.
        let delete_dependencies = |addr: &ResourceAddr| -> Vec<ResourceAddr> {
            nearest_actions(addr, &is_action, |a| {
                dependents
                    .get(a)
                    .map(|s| s.iter().copied().collect())
                    .unwrap_or_default()
            })
            .into_iter()
            .filter(|d| {
                drafts
                    .get(d)
                    .is_some_and(|d| d.action.kind == ActionKind::Delete)
            })
            .collect()
        };
        let is_delete = |addr: &ResourceAddr| {
            drafts
                .get(addr)
                .is_some_and(|d| d.action.kind == ActionKind::Delete)
        };
        let first_submitted = submitted.first();
        // Each action's place and dependencies first; then the actions are moved, not copied.
        let mut placed: Vec<(&ResourceAddr, Vec<ResourceAddr>)> = Vec::with_capacity(drafts.len());
        let mut early: BTreeSet<&ResourceAddr> = BTreeSet::new();
        for addr in &order {
            if Some(addr) == first_submitted {
                for run in order
                    .iter()
                    .rev()
                    .filter(|a| a.kind.is_run() && is_delete(a))
                {
                    placed.push((run, delete_dependencies(run)));
                    early.insert(run);
                }
            }
            if drafts.contains_key(addr) && !is_delete(addr) {
                let depends_on =
                    nearest_actions(addr, &is_action, |a| graph.dependencies_of(a).collect());
                placed.push((addr, depends_on));
            }
        }
        for addr in order.iter().rev() {
            if is_delete(addr) && !early.contains(addr) {
                placed.push((addr, delete_dependencies(addr)));
            }
        }
        let placed: Vec<(ResourceAddr, Vec<ResourceAddr>)> = placed
            .into_iter()
            .map(|(addr, deps)| (addr.clone(), deps))
            .collect();
        drop(dependents);
        drop(graph);
        let mut drafts = drafts;
        let mut actions = Vec::with_capacity(placed.len());
        for (addr, depends_on) in placed {
            if let Some(draft) = drafts.remove(&addr) {
                let mut action = draft.action;
                action.depends_on = depends_on;
                actions.push(action);
            }
        }
        let summary = Summary {
            orphans: orphans.len(),
            ..Summary::of(&actions)
        };
        Ok(Plan {
            format_version: PLAN_FORMAT_VERSION,
            cluster: desired.gke.cluster_ref.clone(),
            actions,
            summary,
            orphans,
            notices,
            disruptions: Vec::new(),
            placements: Vec::new(),
            quota: Vec::new(),
            workload_changes: Vec::new(),
            provenance: None,
            sealed,
            options: options.clone(),
            integrity: None,
        })
    }
}

/// What an action on an existing resource was planned against: its live fingerprint and the
/// fingerprint's parts by field (see [`fingerprint_with_fields`]).
type LiveBasis = (Option<String>, BTreeMap<String, String>);

fn live_basis(addr: &ResourceAddr, desired: Option<&Value>, live: &Value) -> LiveBasis {
    let (fingerprint, fields) = fingerprint_with_fields(addr, desired, live);
    (Some(fingerprint), fields)
}

/// The actions `addr` reaches through `next`, looking through nodes that are not actions (the
/// `k8s.credentials` node stands between the cluster and Kubernetes objects).
fn nearest_actions<'g>(
    addr: &ResourceAddr,
    is_action: &dyn Fn(&ResourceAddr) -> bool,
    next: impl Fn(&ResourceAddr) -> Vec<&'g ResourceAddr>,
) -> Vec<ResourceAddr> {
    let mut found = BTreeSet::new();
    let mut visited = BTreeSet::new();
    let mut stack: Vec<&ResourceAddr> = next(addr);
    while let Some(node) = stack.pop() {
        if !visited.insert(node.clone()) {
            continue;
        }
        if is_action(node) {
            found.insert(node.clone());
        } else {
            stack.extend(next(node));
        }
    }
    found.into_iter().collect()
}

fn create_action(addr: &ResourceAddr, reason: String, step: Step, desired: Arc<Value>) -> Action {
    Action {
        addr: addr.clone(),
        kind: ActionKind::Create,
        reason,
        replace_strategy: None,
        blocked: None,
        changes: Vec::new(),
        diff: String::new(),
        steps: vec![step],
        desired: Some(desired),
        live_fingerprint: None,
        live_fields: BTreeMap::new(),
        sensitive: false,
        depends_on: Vec::new(),
        conflicts: Vec::new(),
    }
}

/// An in-place update with the server's conflicts: listed with what the plan does about each,
/// and the object apply sends without the fields left to their managers.
fn with_conflicts(action: &mut Action, resolved: &Resolved) {
    action.conflicts = resolved.conflicts.clone();
    if let Some(applied) = &resolved.applied {
        let applied = Arc::new(applied.clone());
        for step in &mut action.steps {
            if let Step::KubeApply { object } = step {
                *object = applied.clone();
            }
        }
    }
}

fn step_for(
    addr: &ResourceAddr,
    method: &UpdateMethod,
    desired: &Arc<Value>,
    live: &Value,
) -> Step {
    if *method == UpdateMethod::ServerSideApply {
        // The whole object: shared with the action's `desired`, not copied.
        return Step::KubeApply {
            object: desired.clone(),
        };
    }
    let pool = addr.name.clone();
    let body = request_body(method, desired, live);
    match method {
        UpdateMethod::SetClusterResourceLabels => Step::SetClusterResourceLabels {
            labels: body.as_object().cloned().unwrap_or_else(Map::new),
        },
        UpdateMethod::UpdateCluster { .. } => Step::UpdateCluster { update: body },
        UpdateMethod::SetNodePoolAutoscaling => Step::SetNodePoolAutoscaling {
            pool,
            autoscaling: body,
        },
        UpdateMethod::SetNodePoolManagement => Step::SetNodePoolManagement {
            pool,
            management: body,
        },
        UpdateMethod::UpdateNodePool { field } => Step::UpdateNodePool {
            pool,
            field: field.clone(),
            body,
        },
        UpdateMethod::ServerSideApply => Step::KubeApply {
            object: Arc::new(body),
        },
    }
}

fn kube_delete_step(addr: &ResourceAddr, live: &Value) -> Step {
    let text = |pointer: &str| {
        live.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Step::KubeDelete {
        api_version: text("/apiVersion"),
        kind: text("/kind"),
        namespace: addr.namespace.clone(),
        name: addr.name.clone(),
    }
}

/// `changes in place: autoscaling.maxNodeCount, ...`: the fields; the action's steps name the
/// API calls that make them, each once.
fn update_reason(changes: &[FieldChange]) -> String {
    let parts: Vec<String> = changes
        .iter()
        .map(|change| match &change.effect {
            crate::diff::ChangeEffect::InPlace(_) => change.path.clone(),
            crate::diff::ChangeEffect::Replace(reason) => format!("{} ({reason})", change.path),
        })
        .collect();
    format!("changes in place: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KueueInstall;
    use crate::model::live::{GkeLive, KubeObject};
    use crate::spec::types::InstallMode;
    use serde_json::json;

    fn owned_labels() -> Value {
        json!({"app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "c"})
    }

    fn kube_objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": "on-demand", "labels": owned_labels()}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "cq", "labels": owned_labels()},
                "spec": {"resourceGroups": [{"flavors": [{"name": "on-demand"}]}]}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "default", "labels": owned_labels()},
                "spec": {"clusterQueue": "cq"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "script", "namespace": "default", "labels": owned_labels()},
                "data": {"train.py": "print(1)"}}),
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "job", "namespace": "default",
                             "labels": {"kueue.x-k8s.io/queue-name": "lq", "app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "c"}},
                "spec": {"entrypoint": "python /s/train.py",
                         "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"volumes": [{"name": "s", "configMap": {"name": "script"}}]}}}}}}),
        ]
    }

    fn desired() -> DesiredState {
        let mut desired = crate::model::desired_for_tests(kube_objects());
        desired.gke.cluster =
            json!({"name": "c", "resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"}});
        desired.gke.node_pools = vec![
            json!({"name": "pool", "config": {"resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"}}}),
        ];
        desired.kueue.mode = InstallMode::Managed;
        desired.kueue.manifests = KueueInstall::default_manifests("v0.19.2");
        desired
    }

    fn live_cluster() -> Value {
        json!({"name": "c", "resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"},
            "nodePools": [{"name": "pool", "config": {"resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"}}}]})
    }

    fn observed(objects: impl IntoIterator<Item = Value>) -> KubeLive {
        KubeLive::Observed {
            objects: objects
                .into_iter()
                .map(|o| {
                    (
                        ResourceAddr::from_object(&o).unwrap(),
                        KubeObject {
                            live: Some(o),
                            predicted: None,
                        },
                    )
                })
                .collect(),
        }
    }

    fn order(plan: &Plan) -> Vec<String> {
        plan.changes()
            .map(|a| format!("{} {}", a.kind.glyph(), a.addr))
            .collect()
    }

    #[test]
    fn kubernetes_objects_wait_for_an_observer() {
        let live = LiveState {
            gke: GkeLive { cluster: None },
            kubernetes: KubeLive::NotObserved,
        };
        let plan = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert_eq!(order(&plan), ["+ gke.cluster/c", "+ gke.nodepool/pool"]);
        assert!(
            plan.notices[0]
                .message
                .contains("5 Kubernetes object(s) not compared")
        );
    }

    #[test]
    fn kubernetes_objects_follow_the_cluster_in_dependency_order() {
        let live = LiveState {
            gke: GkeLive { cluster: None },
            kubernetes: observed([]),
        };
        let plan = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert_eq!(
            order(&plan),
            [
                "+ gke.cluster/c",
                "+ gke.nodepool/pool",
                "+ kueue.resourceflavor/on-demand",
                "+ kueue.clusterqueue/cq",
                "+ kueue.localqueue/default/lq",
                "+ k8s.configmap/default/script",
                "+ ray.rayjob/default/job",
            ]
        );
        let job = plan
            .action(&ResourceAddr::ray_job("default", "job"))
            .unwrap();
        let deps: Vec<String> = job.depends_on.iter().map(ToString::to_string).collect();
        // The cluster comes in through the k8s.credentials node, which is not an action.
        assert_eq!(
            deps,
            [
                "gke.cluster/c",
                "kueue.localqueue/default/lq",
                "k8s.configmap/default/script"
            ]
        );
        assert!(job.reason.contains("known after apply"));
    }

    #[test]
    fn matching_objects_are_no_ops_and_a_changed_job_is_a_new_run() {
        let mut live_objects = kube_objects();
        live_objects[4]["spec"]["entrypoint"] = json!("python /s/old.py");
        live_objects[4]["spec"]["suspend"] = json!(true);
        live_objects[1]["status"] = json!({"pendingWorkloads": 1});
        let live = LiveState {
            gke: GkeLive {
                cluster: Some(live_cluster()),
            },
            kubernetes: observed(live_objects),
        };
        let plan = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert_eq!(order(&plan), ["-/+ ray.rayjob/default/job"]);
        let job = plan.changes().next().unwrap();
        assert!(matches!(
            &job.steps[..],
            [Step::KubeDelete { .. }, Step::KubeApply { .. }]
        ));
        assert_eq!(
            job.changes.len(),
            1,
            "spec.suspend belongs to Kueue: {:?}",
            job.changes
        );
    }

    #[test]
    fn owned_leftovers_are_pruned_last_in_reverse_dependency_order() {
        let mut live_objects = kube_objects();
        live_objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "old-cq", "labels": owned_labels()}, "spec": {}}),
        );
        live_objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "old-lq", "namespace": "default", "labels": owned_labels()},
            "spec": {"clusterQueue": "old-cq"}}),
        );
        live_objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "someone-elses", "namespace": "default"}}));
        // gkq's, but another GkqStack's: not this plan's to list or prune.
        live_objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "another-stacks", "namespace": "default", "labels": owned_labels(),
                         "annotations": {"gkq.dev/owner": "team/other"}}}));
        let live = LiveState {
            gke: GkeLive {
                cluster: Some(live_cluster()),
            },
            kubernetes: observed(live_objects),
        };
        let without_prune = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert!(!without_prune.has_changes());
        // Listed as orphans (not someone else's ConfigMap), and the summary does not claim that
        // live state matches the spec.
        let orphans: Vec<(String, &str, Option<&str>, &str)> = without_prune
            .orphans
            .iter()
            .map(|o| {
                (
                    o.address.to_string(),
                    o.kind.as_str(),
                    o.namespace.as_deref(),
                    o.name.as_str(),
                )
            })
            .collect();
        assert_eq!(
            orphans,
            [
                (
                    "kueue.clusterqueue/old-cq".to_string(),
                    "ClusterQueue",
                    None,
                    "old-cq"
                ),
                (
                    "kueue.localqueue/default/old-lq".to_string(),
                    "LocalQueue",
                    Some("default"),
                    "old-lq"
                ),
            ]
        );
        assert!(
            without_prune.notices.is_empty(),
            "{:?}",
            without_prune.notices
        );
        assert_eq!(
            without_prune.summary.to_string(),
            "No changes to apply. 2 resources gkq manages are no longer in the spec and are left in place."
        );
        assert_eq!(
            without_prune.prune_command().as_deref(),
            Some("gkq apply --prune")
        );

        let pruning = PlanOptions {
            prune: true,
            ..PlanOptions::default()
        };
        let plan = plan(&desired(), &live, &pruning).unwrap();
        assert_eq!(
            order(&plan),
            [
                "- kueue.localqueue/default/old-lq",
                "- kueue.clusterqueue/old-cq"
            ]
        );
        assert!(plan.orphans.is_empty());
        let cq = plan
            .action(&"kueue.clusterqueue/old-cq".parse().unwrap())
            .unwrap();
        assert_eq!(
            cq.depends_on,
            ["kueue.localqueue/default/old-lq"
                .parse::<ResourceAddr>()
                .unwrap()]
        );
    }

    /// A kind switch with `--prune`: the RayJob `job` becomes a JobSet `job`. The pruned
    /// RayJob is deleted before the JobSet (and every other job) is submitted, the JobSet
    /// depends on that delete, and the other deletes keep their place at the end.
    #[test]
    fn a_kind_switch_deletes_the_old_kind_before_the_new_run() {
        let mut live_objects = kube_objects();
        live_objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "old-cq", "labels": owned_labels()}, "spec": {}}),
        );
        let live = LiveState {
            gke: GkeLive {
                cluster: Some(live_cluster()),
            },
            kubernetes: observed(live_objects),
        };
        let mut objects = kube_objects();
        let ray = objects.pop().unwrap();
        let jobset = |name: &str| {
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": name, "namespace": "default", "labels": ray["metadata"]["labels"]},
                "spec": {"replicatedJobs": []}})
        };
        objects.push(jobset("another"));
        objects.push(jobset("job"));
        let mut desired = desired();
        desired.kubernetes = objects.into_iter().map(Arc::new).collect();
        let pruning = PlanOptions {
            prune: true,
            ..PlanOptions::default()
        };
        let plan = plan(&desired, &live, &pruning).unwrap();
        assert_eq!(
            order(&plan),
            [
                "- ray.rayjob/default/job",
                "+ k8s.jobset/default/another",
                "+ k8s.jobset/default/job",
                "- kueue.clusterqueue/old-cq"
            ]
        );
        let new_run = plan
            .action(&"k8s.jobset/default/job".parse().unwrap())
            .unwrap();
        assert!(
            new_run
                .depends_on
                .contains(&"ray.rayjob/default/job".parse().unwrap()),
            "{:?}",
            new_run.depends_on
        );
        let other = plan
            .action(&"k8s.jobset/default/another".parse().unwrap())
            .unwrap();
        assert!(
            !other
                .depends_on
                .contains(&"ray.rayjob/default/job".parse().unwrap()),
            "{:?}",
            other.depends_on
        );
    }

    #[test]
    fn duplicates_and_nameless_objects_are_errors() {
        let mut twice = desired();
        twice.kubernetes.push(Arc::new(kube_objects()[0].clone()));
        let live = LiveState::default();
        assert!(matches!(
            plan(&twice, &live, &PlanOptions::default()),
            Err(PlanError::Duplicate { .. })
        ));
        let mut nameless = desired();
        nameless.kubernetes.push(Arc::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        ));
        assert!(matches!(
            plan(&nameless, &live, &PlanOptions::default()),
            Err(PlanError::BadObject { index: 5, .. })
        ));
    }
}
