//! `gkq explain NAMESPACE/NAME` as a library call: plan (which reads Kueue's world once), find
//! the job's Workload, reproduce Kueue's decision over the same world, and build the
//! explanation (`report::explain`, pure) with fixes pointing at the spec.

use super::load::SpecSource;
use super::plan::plan_valid;
use super::session::TargetOptions;
use crate::model::DesiredState;
use crate::model::gke_facts::machine_shape;
use crate::observe::cluster::{EVENT, JOB_KINDS, KindRef, NODE, PROVISIONING_REQUEST, read_kinds};
use crate::placement::job_workload::JobWorkloads;
use crate::placement::pools::flavor_pools;
use crate::placement::provisioning::RequestsByOwner;
use crate::placement::remedy::{self, NodeResources, Subject, World};
use crate::placement::unmodelled;
use crate::placement::{Cluster, PendingWorkload, Placement, observed_placement};
use crate::plan::PlanOptions;
use crate::plan::placements::{kueue_changes, prediction_world};
use crate::report::explain::{
    ExplainInputs, Explanation, Fix, PlanEffect, SpecLocations, explain as explain_job,
};
use crate::spec::{Loaded, Path};
use crate::vocab::object::{name_of, namespace_of};

/// Why the job or Workload `what` (`namespace/name`) is where it is.
pub async fn explain(
    spec: &SpecSource,
    loaded: Loaded,
    desired: DesiredState,
    target: &TargetOptions,
    options: PlanOptions,
    what: &str,
) -> anyhow::Result<Explanation> {
    let (namespace, name) = what.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.is_empty()).ok_or_else(|| {
        anyhow::anyhow!("`{what}` is not NAMESPACE/NAME: name a job or a Workload with its namespace, e.g. default/rayjob-tpu-v6e-dws-1")
    })?;
    // The spec's document tree (its line numbers) is released by planning: read it first.
    let locations = spec_locations(&loaded);
    let planned = plan_valid(spec, loaded, desired, target, options).await?;
    let kube = planned.kube();
    let (Some(world), Some(api)) = (planned.world.as_ref(), kube.api()) else {
        anyhow::bail!(
            "the cluster's Kubernetes API could not be read (the cluster does not exist yet, or has no endpoint): there is no Workload to explain"
        );
    };
    // The jobs (to find a job's Workload by the one rule) and the ProvisioningRequests, in one
    // concurrent read.
    let kinds = kinds_read(&planned.loaded.spec);
    let read = read_kinds(api, &kinds, Default::default())
        .await
        .map_err(|e| anyhow::anyhow!("reading jobs and ProvisioningRequests: {e}"))?;
    let jobs: Vec<&serde_json::Value> = JOB_KINDS
        .iter()
        .flat_map(|(_, kind)| read.kind(kind))
        .collect();
    let workload = named_workload(world.kind("Workload"), &jobs, namespace, name);
    let spec_job = locations
        .jobs
        .iter()
        .filter(|(job, _)| name == job.as_str() || name.starts_with(&format!("{job}-")))
        .max_by_key(|(job, _)| job.len())
        .map(|(_, at)| at.clone());
    let objects: Vec<&serde_json::Value> = world.by_kind.values().flatten().collect();
    let found = unmodelled::find(&objects, &planned.kueue);
    let mark = |mut placement: Placement| {
        unmodelled::mark(std::slice::from_mut(&mut placement), &found, &objects);
        placement
    };
    let nodes = node_resources(&objects, &planned.desired.gke.node_pools);
    let (job, observed, predicted, after_apply, remedies) = match workload {
        Some(w) => {
            let observed = observed_placement(w).map_err(|e| anyhow::anyhow!("{e}"))?;
            let job = format!("{} {namespace}/{}", observed.kind, observed.job);
            let (predicted, after_apply, remedies) = explain_waiting(&planned, &objects, w, &nodes);
            let after_apply = after_apply.map(|mut effect: PlanEffect| {
                effect.placement = effect.placement.map(mark);
                effect
            });
            (
                job,
                Some(observed),
                predicted.map(mark),
                after_apply,
                remedies,
            )
        }
        None => {
            // A job the plan submits: its predicted placement, no Workload yet.
            let placement = planned
                .plan
                .placements
                .iter()
                .find(|p| p.namespace == namespace && p.job == name)
                .cloned()
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "no Workload in namespace {namespace} is named {name} or belongs to a job named {name}, and the spec submits no job {what}"
                    )
                })?;
            let world = prediction_world(
                &planned.plan,
                &planned.desired,
                &planned.live,
                planned.world.as_ref(),
            );
            let index = world.jobs.iter().position(|j| {
                j.namespace == namespace && j.name == name && j.kind == placement.kind
            });
            let remedies = index
                .map(|i| remedy::remedies(&world, Subject::Job(i), &nodes))
                .unwrap_or_default();
            (
                format!("{} {namespace}/{name}", placement.kind),
                None,
                Some(placement),
                None,
                remedies,
            )
        }
    };
    let ladder_spec = &planned.loaded.spec;
    let rung = live_rung_note(ladder_spec, observed.as_ref(), workload, &jobs, &read)
        .into_iter()
        .chain(rung_note(
            ladder_spec,
            [observed.as_ref(), predicted.as_ref()],
        ));
    let mut explanation = explain_job(ExplainInputs {
        job,
        workload,
        observed,
        predicted,
        provisioning_requests: read.kind(PROVISIONING_REQUEST.1),
        spec: &locations,
        spec_job,
        remedies: &remedies,
        after_apply,
    });
    explanation.notes.extend(rung);
    Ok(explanation)
}

/// What explain reads besides the Kueue world: the jobs (to find a job's Workload by the one
/// rule) and the ProvisioningRequests; with a capacity ladder, also the Events and Nodes that
/// say which rung a job waits for.
fn kinds_read(spec: &crate::spec::types::Spec) -> Vec<KindRef> {
    let ladder = spec.capacity.is_some();
    JOB_KINDS
        .into_iter()
        .chain([PROVISIONING_REQUEST])
        .chain(ladder.then_some([EVENT, NODE]).into_iter().flatten())
        .collect()
}

/// For a job Kueue admitted on the capacity ladder whose pods wait: the rung it waits for and
/// why, from what the cluster says (`report::rung`: the autoscaler's `FailedScaleUp` /
/// `NotTriggerScaleUp` message, the ProvisioningRequest's condition, in `mode: computeclass`
/// the priorities tried when the message names them). Nothing for a job whose pods run.
fn live_rung_note(
    spec: &crate::spec::types::Spec,
    observed: Option<&Placement>,
    workload: Option<&serde_json::Value>,
    jobs: &[&serde_json::Value],
    read: &crate::model::live::KubeSnapshot,
) -> Option<Fix> {
    let observed = observed?;
    let job = jobs.iter().find(|j| {
        j["kind"] == observed.kind.as_str()
            && name_of(j) == observed.job
            && namespace_of(j).unwrap_or("default") == observed.namespace
    })?;
    let status = crate::report::status::live_rung(
        spec,
        job,
        workload,
        &RequestsByOwner::new(read.kind(PROVISIONING_REQUEST.1)),
        read.kind(EVENT.1),
        read.kind(NODE.1),
    )
    .filter(|s| !s.landed)?;
    Some(Fix {
        text: format!(
            "capacity ladder, as the cluster says: {}",
            crate::report::rung::rung_text(&status)
        ),
        at: None,
        then: None,
        changes: Vec::new(),
    })
}

/// For a job not running yet on a flavor of the spec's capacity ladder: the rung it waits for,
/// what happens if that rung is out of capacity, and where later jobs go (the plan's words,
/// `render::plan::rung_lines`). Kueue's own flavor first, else gkq's reproduction of it.
fn rung_note(spec: &crate::spec::types::Spec, placements: [Option<&Placement>; 2]) -> Option<Fix> {
    use crate::placement::PlacementState as S;
    let (placement, rung) = placements.into_iter().flatten().find_map(|p| {
        let rung = crate::plan::ladder::job_rungs(spec, std::slice::from_ref(p));
        rung.into_iter().next().map(|r| (p, r))
    })?;
    let verb = match placement.state {
        S::Pending | S::WaitingForAdmissionChecks => "waits for",
        S::Admitted => "admitted on",
        S::Rejected | S::Unmanaged | S::Finished => return None,
    };
    let lines = crate::render::plan::rung_lines(&rung);
    Some(Fix {
        text: format!("capacity ladder: {verb} {}", lines.join("; ")),
        at: None,
        then: None,
        changes: Vec::new(),
    })
}

/// A live Workload still waiting: gkq's reproduction of Kueue's decision over the world as
/// read (with every other live Workload; admitted work is not re-predicted, Kueue keeps what it
/// admitted), and, when the plan changes what Kueue decides with, the job in the world the plan
/// predicts (`plan::placements::prediction_world`: its jobs submitted in order, the runs it
/// deletes or replaces released, its queue changes made). The fixes are changes to this spec,
/// so they are searched in that world: each admits the job when made on top of the spec.
fn explain_waiting(
    planned: &super::plan::Planned,
    objects: &[&serde_json::Value],
    workload: &serde_json::Value,
    nodes: &NodeResources,
) -> (Option<Placement>, Option<PlanEffect>, Vec<remedy::Remedy>) {
    let Ok(pending) = PendingWorkload::from_object(workload) else {
        return (None, None, Vec::new());
    };
    let queued_in = |world: &World| {
        world
            .cluster
            .pending_workloads
            .iter()
            .position(|q| q.namespace == pending.namespace && q.name == pending.name)
            .map(Subject::Queued)
    };
    let live = World {
        cluster: Cluster::from_objects_lenient(objects.iter().copied()),
        jobs: Vec::new(),
        released: Vec::new(),
    };
    let Some(subject) = queued_in(&live) else {
        return (None, None, Vec::new());
    };
    let predicted = live.placement_of(subject);
    let changes = kueue_changes(&planned.plan);
    if changes.is_empty() {
        let remedies = remedy::remedies(&live, subject, nodes);
        return (predicted, None, remedies);
    }
    let after = prediction_world(
        &planned.plan,
        &planned.desired,
        &planned.live,
        planned.world.as_ref(),
    );
    let subject = queued_in(&after);
    let placement = subject.and_then(|s| after.placement_of(s));
    let remedies = subject
        .map(|s| remedy::remedies(&after, s, nodes))
        .unwrap_or_default();
    (predicted, Some(PlanEffect { changes, placement }), remedies)
}

/// Whether each flavor's nodes have TPUs, where the spec's node pools say which machine type
/// the flavor's pool runs (`placement::pools`, `model::gke_facts::machine_shape`).
fn node_resources(
    objects: &[&serde_json::Value],
    node_pools: &[serde_json::Value],
) -> NodeResources {
    let mut nodes = NodeResources::default();
    for (flavor, pool) in flavor_pools(objects.iter().copied()) {
        let shape = node_pools
            .iter()
            .find(|p| p["name"] == pool.as_str())
            .and_then(|p| p["config"]["machineType"].as_str())
            .and_then(machine_shape);
        if let Some(shape) = shape {
            let tpu = shape
                .accelerator
                .is_some_and(|(resource, _)| resource == crate::vocab::labels::TPU_RESOURCE);
            nodes.tpu.insert(flavor, tpu);
        }
    }
    nodes
}

/// The Workload `namespace/name` names: the Workload of that name, else the Workload of the job
/// of that name among `jobs` (of any kind; the first kind that has one), by the one rule
/// (`placement::job_workload`) status and watch use too.
pub fn named_workload<'a>(
    workloads: &'a [serde_json::Value],
    jobs: &[&serde_json::Value],
    namespace: &str,
    name: &str,
) -> Option<&'a serde_json::Value> {
    let by_name = workloads
        .iter()
        .find(|w| namespace_of(w) == Some(namespace) && name_of(w) == name);
    by_name.or_else(|| {
        let job_workloads = JobWorkloads::new(workloads);
        jobs.iter()
            .filter(|job| namespace_of(job) == Some(namespace) && name_of(job) == name)
            .find_map(|job| job_workloads.of(job))
            .map(|w| w.workload)
    })
}

/// Where the spec writes the quotas, ClusterQueues, LocalQueues and jobs, as
/// `file:line:column`.
fn spec_locations(loaded: &Loaded) -> SpecLocations {
    let at = |path: &Path| loaded.sources.location(loaded.span(path));
    let mut locations = SpecLocations::default();
    let kueue = Path::root().key("kueue");
    for (i, cq) in loaded.spec.kueue.cluster_queues.iter().enumerate() {
        let cq_path = kueue.key("clusterQueues").index(i);
        locations
            .cluster_queues
            .insert(cq.name.clone(), at(&cq_path));
        if cq.preemption.is_some() {
            locations
                .preemption
                .insert(cq.name.clone(), at(&cq_path.key("preemption")));
        }
        for (j, group) in cq.resource_groups.iter().enumerate() {
            for (k, flavor) in group.flavors.iter().enumerate() {
                let flavor_path = cq_path
                    .key("resourceGroups")
                    .index(j)
                    .key("flavors")
                    .index(k);
                locations
                    .queue_flavors
                    .entry((cq.name.clone(), flavor.name.clone()))
                    .or_insert_with(|| at(&flavor_path));
                for resource in flavor.quota.keys() {
                    let path = flavor_path.key("quota").key(resource);
                    locations.quotas.insert(
                        (cq.name.clone(), flavor.name.clone(), resource.clone()),
                        at(&path),
                    );
                }
            }
        }
    }
    locations.local_queues = Some(at(&if loaded.spec.kueue.local_queues.is_empty() {
        kueue
    } else {
        kueue.key("localQueues")
    }));
    for (i, job) in loaded.spec.jobs.iter().enumerate() {
        locations
            .jobs
            .insert(job.name.clone(), at(&Path::root().key("jobs").index(i)));
    }
    locations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::job_workload::scenario;

    /// `gkq explain ml/train` names the Workload the one rule names (`placement::job_workload`),
    /// as status and watch do; a Workload named directly is that Workload.
    #[test]
    fn a_jobs_workload_is_the_one_the_rule_names() {
        for (job, workloads, expected) in scenario::cases() {
            let jobs = [&job];
            let named = |namespace, name| named_workload(&workloads, &jobs, namespace, name);
            assert_eq!(named("ml", "train").map(name_of), Some(expected));
            assert_eq!(
                named("ml", "rayjob-train-0a1b2").map(name_of),
                Some("rayjob-train-0a1b2")
            );
            assert_eq!(named("other", "train"), None);
        }
    }
}
