//! The GKE step of a plan: the cluster and its node pools.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{NOT_OWNED, Planner, create_action, live_basis};
use crate::addr::ResourceAddr;
use crate::diff::gke::{diff_cluster, diff_node_pool};
use crate::diff::normalize::{
    GKE_CLUSTER_STATUS, GKE_NODE_POOL_STATUS, gke_cluster_live_view, gke_node_pool_live_view,
    status_name,
};
use crate::model::DesiredState;
use crate::model::live::LiveState;
use crate::plan::ownership::gke_owned;
use crate::plan::{Action, ActionKind, ReplaceStrategy, Step};

impl<'a> Planner<'a> {
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

    /// Plans the cluster and its node pools: create what is missing, change or replace what
    /// differs, and delete (with `prune`) or keep what the spec no longer names.
    pub(super) fn plan_gke(&mut self) {
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
}
