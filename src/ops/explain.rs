//! `gkq explain NAMESPACE/NAME` as a library call: plan (which reads Kueue's world once), find
//! the job's Workload, reproduce Kueue's decision over the same world, and build the
//! explanation (`report::explain`, pure) with fixes pointing at the spec.

use super::load::SpecSource;
use super::plan::plan_valid;
use super::session::TargetOptions;
use crate::model::DesiredState;
use crate::observe::cluster::{PROVISIONING_REQUEST, read_kinds};
use crate::placement::unmodelled;
use crate::placement::{Cluster, PendingWorkload, Placement, observed_placement, predict};
use crate::plan::PlanOptions;
use crate::report::explain::{ExplainInputs, Explanation, SpecLocations, explain as explain_job};
use crate::spec::{Loaded, Path};
use crate::vocab::object::{name_of, namespace_of, owners};

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
    let gates = desired.kueue.feature_gates.clone();
    let planned = plan_valid(spec, loaded, desired, target, options).await?;
    let kube = planned.kube();
    let (Some(world), Some(api)) = (planned.world.as_ref(), kube.api()) else {
        anyhow::bail!(
            "the cluster's Kubernetes API could not be read (the cluster does not exist yet, or has no endpoint): there is no Workload to explain"
        );
    };
    let workload = world.kind("Workload").iter().find(|w| {
        namespace_of(w) == Some(namespace)
            && (name_of(w) == name || owners(w).any(|o| o["name"] == name))
    });
    let spec_job = locations
        .jobs
        .iter()
        .filter(|(job, _)| name == job.as_str() || name.starts_with(&format!("{job}-")))
        .max_by_key(|(job, _)| job.len())
        .map(|(_, at)| at.clone());
    let objects: Vec<&serde_json::Value> = world.by_kind.values().flatten().collect();
    let found = unmodelled::find(&objects, &gates);
    let mark = |mut placement: Placement| {
        unmodelled::mark(std::slice::from_mut(&mut placement), &found, &objects);
        placement
    };
    let (job, observed, predicted) = match workload {
        Some(w) => {
            let observed = observed_placement(w).map_err(|e| anyhow::anyhow!("{e}"))?;
            let job = format!("{} {namespace}/{}", observed.kind, observed.job);
            let predicted = PendingWorkload::from_object(w)
                .ok()
                .and_then(|pending| predicted_for(&objects, &pending))
                .map(mark);
            (job, Some(observed), predicted)
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
                        "no Workload in namespace {namespace} is named {name} or owned by a job named {name}, and the spec submits no job {what}"
                    )
                })?;
            (
                format!("{} {namespace}/{name}", placement.kind),
                None,
                Some(placement),
            )
        }
    };
    let requests = match workload {
        Some(_) => read_kinds(api, &[PROVISIONING_REQUEST], Default::default())
            .await
            .map_err(|e| anyhow::anyhow!("reading ProvisioningRequests: {e}"))?,
        None => Default::default(),
    };
    Ok(explain_job(ExplainInputs {
        job,
        workload,
        observed,
        predicted,
        provisioning_requests: requests.kind(PROVISIONING_REQUEST.1),
        spec: &locations,
        spec_job,
    }))
}

/// gkq's reproduction for a live Workload still waiting: predicted with every other live
/// Workload over the world as read. `None` for admitted work (Kueue keeps what it admitted;
/// there is nothing to re-predict) and Workloads placement cannot read.
fn predicted_for(objects: &[&serde_json::Value], pending: &PendingWorkload) -> Option<Placement> {
    let cluster = Cluster::from_objects_lenient(objects.iter().copied());
    let key = |w: &PendingWorkload| (w.namespace.clone(), w.name.clone());
    let index = cluster
        .pending_workloads
        .iter()
        .position(|w| key(w) == key(pending))?;
    predict(&cluster, &[]).queued.into_iter().nth(index)
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
        for (j, group) in cq.resource_groups.iter().enumerate() {
            for (k, flavor) in group.flavors.iter().enumerate() {
                for resource in flavor.quota.keys() {
                    let path = cq_path
                        .key("resourceGroups")
                        .index(j)
                        .key("flavors")
                        .index(k)
                        .key("quota")
                        .key(resource);
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
