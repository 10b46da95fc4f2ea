//! The ordering step of a plan: every drafted action placed in apply order, each with the
//! actions it waits for.

use std::collections::{BTreeMap, BTreeSet};

use super::{Draft, PlanError, Planner};
use crate::addr::ResourceAddr;
use crate::model::DesiredState;
use crate::plan::graph::DependencyGraph;
use crate::plan::{Action, ActionKind, PLAN_FORMAT_VERSION, Plan, Summary};

impl Planner<'_> {
    /// Orders the drafts: creates, updates and replaces by dependency, then deletes in reverse.
    pub(super) fn finish(self) -> Result<Plan, PlanError> {
        let Planner {
            desired,
            options,
            drafts,
            orphans,
            notices,
            sealed,
            ..
        } = self;
        let actions = ordered_actions(desired, drafts)?;
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
            rungs: Vec::new(),
            provenance: None,
            sealed,
            options: options.clone(),
            integrity: None,
        })
    }
}

/// The drafts' actions in apply order, each with the actions it depends on.
fn ordered_actions(
    desired: &DesiredState,
    mut drafts: BTreeMap<ResourceAddr, Draft<'_>>,
) -> Result<Vec<Action>, PlanError> {
    let mut graph = DependencyGraph::for_resources(drafts.iter().map(|(a, d)| (a, d.graph_object)));
    let submitted = submitted_jobs(desired, &drafts);
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
    let placed = placed_in_order(&drafts, &graph, &order, submitted.first());
    drop(graph);
    // Each action's place and dependencies were found first; now the actions are moved, not
    // copied.
    let mut actions = Vec::with_capacity(placed.len());
    for (addr, depends_on) in placed {
        if let Some(draft) = drafts.remove(&addr) {
            let mut action = draft.action;
            action.depends_on = depends_on;
            actions.push(action);
        }
    }
    Ok(actions)
}

/// The jobs a plan submits, in the order they reach Kueue: one after another in the spec's order
/// (`jobs:`, then job manifests in file order), each after Kueue decided on the one before, the
/// order `plan::placements` predicts.
fn submitted_jobs(
    desired: &DesiredState,
    drafts: &BTreeMap<ResourceAddr, Draft<'_>>,
) -> Vec<ResourceAddr> {
    desired
        .kube_objects()
        .filter(|o| crate::model::jobs::queued_by_kueue(o))
        .filter_map(|o| ResourceAddr::from_object(o).ok())
        .filter(|addr| {
            drafts
                .get(addr)
                .is_some_and(|d| matches!(d.action.kind, ActionKind::Create | ActionKind::Replace))
        })
        .collect()
}

/// Each action's address in apply order with the actions it waits for: creates, updates and
/// replaces by dependency (the deletes of job runs just before the first submitted job), then
/// the other deletes in reverse dependency order.
fn placed_in_order(
    drafts: &BTreeMap<ResourceAddr, Draft<'_>>,
    graph: &DependencyGraph,
    order: &[ResourceAddr],
    first_submitted: Option<&ResourceAddr>,
) -> Vec<(ResourceAddr, Vec<ResourceAddr>)> {
    let is_action = |addr: &ResourceAddr| drafts.contains_key(addr);
    // Who depends on what, read only by deletes: made once, and only for a plan that has one.
    let dependents = std::cell::OnceCell::new();
    let dependents = || {
        dependents.get_or_init(|| {
            let mut dependents: BTreeMap<&ResourceAddr, BTreeSet<&ResourceAddr>> = BTreeMap::new();
            for (dependent, dependency) in graph.edges() {
                dependents.entry(dependency).or_default().insert(dependent);
            }
            dependents
        })
    };
    // A delete waits for the deletes of what depends on it.
    let delete_dependencies = |addr: &ResourceAddr| -> Vec<ResourceAddr> {
        nearest_actions(addr, &is_action, |a| {
            dependents()
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
    let mut placed: Vec<(&ResourceAddr, Vec<ResourceAddr>)> = Vec::with_capacity(drafts.len());
    let mut early: BTreeSet<&ResourceAddr> = BTreeSet::new();
    for addr in order {
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
    placed
        .into_iter()
        .map(|(addr, deps)| (addr.clone(), deps))
        .collect()
}

/// The actions `addr` reaches through `next`, looking through nodes that are not actions (the
/// `k8s.credentials` node stands between the cluster and Kubernetes objects).
fn nearest_actions<'g>(
    addr: &ResourceAddr,
    is_action: &dyn Fn(&ResourceAddr) -> bool,
    next: impl Fn(&ResourceAddr) -> Vec<&'g ResourceAddr>,
) -> Vec<ResourceAddr> {
    let mut found: BTreeSet<&ResourceAddr> = BTreeSet::new();
    let mut visited: BTreeSet<&ResourceAddr> = BTreeSet::new();
    let mut stack: Vec<&ResourceAddr> = next(addr);
    while let Some(node) = stack.pop() {
        if !visited.insert(node) {
            continue;
        }
        if is_action(node) {
            found.insert(node);
        } else {
            stack.extend(next(node));
        }
    }
    found.into_iter().cloned().collect()
}
