//! The placement section of a plan: where Kueue will put each job the plan submits, and how the
//! quota of each flavor is used, predicted by [`crate::placement`] from the queues and flavors the
//! plan converges to plus the live Workloads.

use serde_json::Value;

use super::{ActionKind, Plan};
use crate::addr::ResourceKind;
use crate::placement::{Cluster, FlavorUsage, PendingWorkload, Placement, predict};

/// Predicts placements for the RayJobs that `plan` creates or replaces. `desired` are the
/// objects the plan converges to (queues, flavors, jobs); `live` are live objects that matter for
/// usage (Kueue Workloads, namespaces). Objects placement cannot read are left out: the spec was
/// validated, and live objects gkq does not own are not its to judge.
pub fn predict_for(
    plan: &Plan,
    desired: &[Value],
    live: &[Value],
) -> (Vec<Placement>, Vec<FlavorUsage>) {
    let mut cluster = Cluster::default();
    for object in desired
        .iter()
        .filter(|o| o["kind"] != "RayJob")
        .chain(live.iter())
    {
        if let Err(e) = cluster.add_object(object) {
            tracing::debug!("placement skips an object: {e}");
        }
    }
    let submitted: Vec<&Value> = plan
        .actions
        .iter()
        .filter(|a| {
            a.addr.kind == ResourceKind::RayJob
                && matches!(a.kind, ActionKind::Create | ActionKind::Replace)
        })
        .filter_map(|a| a.desired.as_ref())
        .collect();
    let jobs: Vec<PendingWorkload> = submitted
        .iter()
        .filter_map(|o| PendingWorkload::from_object(o).ok())
        .collect();
    if jobs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let prediction = predict(&cluster, &jobs);
    (prediction.placements, prediction.usage)
}

/// Adds what a plan means for running and queued work: the predicted placements of the jobs it
/// submits, the quota they use, and the admitted jobs its deletes or replaces would stop.
pub fn annotate(
    plan: &mut Plan,
    desired: &crate::model::DesiredState,
    live: &crate::observe::LiveState,
    workloads: &[Value],
) {
    let (placements, quota) = predict_for(plan, &desired.kubernetes, workloads);
    plan.placements = placements;
    plan.quota = quota;
    // Borrowed, not collected: a large stack has thousands of live objects.
    let live_objects = match &live.kubernetes {
        crate::observe::KubeLive::Observed { objects } => Some(objects),
        crate::observe::KubeLive::NotObserved => None,
    }
    .into_iter()
    .flat_map(|objects| objects.values().filter_map(|o| o.live.as_ref()));
    plan.disruptions = super::disruption::find(
        plan,
        workloads,
        desired.kubernetes.iter().chain(live_objects),
    );
}
