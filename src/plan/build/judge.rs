//! The judge: the action for one resource, from its desired and live state (create, update in
//! place, replace or no-op), with the diff as it may be shown and the API steps that make it.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{LiveBasis, NOT_OWNED, create_action, live_basis};
use crate::addr::ResourceAddr;
use crate::diff::gke::request_body;
use crate::diff::kube::diff_object;
use crate::diff::normalize::kube_view;
use crate::diff::sensitive::Redactor;
use crate::diff::text::unified_yaml_diff_owned;
use crate::diff::{FieldChange, ResourceDiff, UpdateMethod};
use crate::model::{DesiredState, GKE_STACK_LABEL, STACK_LABEL};
use crate::plan::conflicts::Resolved;
use crate::plan::ownership::{
    gke_owned_by, gke_owner_conflict, is_gke_owner_only, is_owner_only, kube_owned, kube_owner,
    owner_conflict,
};
use crate::plan::{Action, ActionKind, PlanOptions, ReplaceStrategy, Step};

pub use crate::diff::fingerprint::Fingerprint;

/// Decides the action for one resource from its desired and live state. [`plan`](super::plan) decides every
/// resource with one; an observer may decide each Kubernetes object with the same one as the
/// server's answer for it arrives ([`Judge::kube_action`]), so that a plan of thousands of
/// objects holds their actions, not their live and dry-run trees.
pub struct Judge {
    /// The stack whose ownership labels mark what gkq may change.
    pub(super) stack: Option<String>,
    /// The GkqStack the plan is for (`PlanOptions::owner`).
    pub(super) owner: Option<String>,
    /// The stack whose objects this plan takes back (`PlanOptions::release_from`).
    release_from: Option<String>,
    adopt: bool,
    /// `PlanOptions::force_conflicts`: fields another manager owns are taken, not left to it.
    force_conflicts: bool,
    pub(super) redactor: Redactor,
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
        self.kube_action_on(addr, object, live, predicted, resolved, None)
    }

    /// [`Judge::kube_action`], given the live object's fingerprint with its fields when the
    /// caller made it already (of this `object` and this `live`:
    /// [`crate::diff::kube::diff_listed_with_fingerprint`]).
    pub fn kube_action_on(
        &self,
        addr: &ResourceAddr,
        object: &Arc<Value>,
        live: Option<&Value>,
        predicted: Option<&Value>,
        resolved: Option<&Resolved>,
        fingerprint: Option<Fingerprint>,
    ) -> Action {
        match live {
            None => self.kube_create(addr, object, predicted),
            Some(live) => {
                let mut action = self.kube_change(addr, object, live, predicted, fingerprint);
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
    /// comparing the two without a dry run showed, with the live object's fingerprint made
    /// beside that comparison ([`crate::diff::kube::diff_listed_with_fingerprint`]): the
    /// observer that found it unchanged hands over its fingerprint rather than have it made
    /// twice.
    pub fn kube_unchanged(
        &self,
        addr: &ResourceAddr,
        object: &Arc<Value>,
        live: &Value,
        (fingerprint, fields): Fingerprint,
    ) -> Action {
        let basis = (Some(fingerprint), fields);
        self.update_or_noop(
            addr,
            ResourceDiff::default(),
            object.clone(),
            live,
            true,
            basis,
        )
    }

    /// A diff as it may be shown, both sides with sensitive values replaced by markers, made
    /// from views not needed after (so not copied); and the diff's changes.
    pub(super) fn shown_parts(&self, diff: ResourceDiff) -> (Vec<FieldChange>, String) {
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

    pub(super) fn shown_text_diff(&self, before: Option<Value>, after: Option<Value>) -> String {
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
        fingerprint: Option<Fingerprint>,
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
        let fingerprint = match fingerprint {
            Some((fingerprint, fields)) => (Some(fingerprint), fields),
            None => live_basis(addr, Some(object), live),
        };
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
    pub(super) fn gke_conflict(
        &self,
        live: &Value,
        diff: Option<&mut ResourceDiff>,
    ) -> Option<String> {
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

    pub(super) fn update_or_noop(
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

pub(super) fn kube_delete_step(addr: &ResourceAddr, live: &Value) -> Step {
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
