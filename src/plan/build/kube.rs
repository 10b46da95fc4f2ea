//! The Kubernetes step of a plan: the desired objects, and the owned ones the spec dropped.

use std::collections::BTreeSet;

use serde_json::Value;

use super::judge::kube_delete_step;
use super::{PlanError, Planner, live_basis};
use crate::addr::ResourceAddr;
use crate::diff::normalize::kube_view;
use crate::model::DesiredState;
use crate::model::live::{KubeLive, LiveState};
use crate::plan::ownership::{kube_owned, kube_owner};
use crate::plan::{Action, ActionKind};

impl<'a> Planner<'a> {
    /// Plans the Kubernetes objects: each desired object's action (decided here, or already by
    /// an observer), then what gkq owns that the spec no longer names.
    pub(super) fn plan_kube(&mut self) -> Result<(), PlanError> {
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
}
