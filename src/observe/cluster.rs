//! Reading the cluster's world from Kubernetes: every object of the kinds a report needs (Kueue's
//! world, Workloads, ProvisioningRequests, the jobs, nodes, namespaces), one list per kind, all
//! concurrently, into the pure [`KubeSnapshot`]. Planning reads [`KUEUE_WORLD_KINDS`]; `gkq status`
//! adds the rest of [`STATUS_KINDS`]; watch's job timeline reads [`JOB_TIMELINE_KINDS`] between
//! plans. Planning's own reader of the spec's
//! objects is [`super::kube`].

use super::without_bookkeeping;
use crate::kube::{KubeApi, KubeResult, owned_selector};
use crate::model::live::KubeSnapshot;
use futures::future::join_all;

/// `(apiVersion, kind)`.
pub type KindRef = (&'static str, &'static str);

pub const WORKLOAD: KindRef = ("kueue.x-k8s.io/v1beta2", "Workload");
/// A job's pods, which `gkq logs` reads.
pub const POD: KindRef = ("v1", "Pod");
pub const PROVISIONING_REQUEST: KindRef = ("autoscaling.x-k8s.io/v1", "ProvisioningRequest");
const RAYJOB: KindRef = ("ray.io/v1", "RayJob");
const JOBSET: KindRef = ("jobset.x-k8s.io/v1alpha2", "JobSet");
const JOB: KindRef = ("batch/v1", "Job");
pub const NODE: KindRef = ("v1", "Node");
/// Events: `gkq status` reads them for a spec with a capacity ladder (the scheduler's and the
/// cluster autoscaler's say which rung a job's nodes came from, or why they did not).
pub const EVENT: KindRef = ("v1", "Event");

/// Kueue's world as `placement::Cluster` reads it: the queues, flavors, checks and priorities,
/// every Workload, and the namespaces (for `namespaceSelector`). Planning reads these, so that
/// predictions count other tenants' queues and work, and status reuses them.
pub const KUEUE_WORLD_KINDS: [KindRef; 10] = [
    WORKLOAD,
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "Cohort"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"),
    ("kueue.x-k8s.io/v1beta2", "ProvisioningRequestConfig"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("v1", "Namespace"),
];

/// Whether the world read holds the objects of `(api_version, kind)`.
pub fn read_in_world(api_version: &str, kind: &str) -> bool {
    KUEUE_WORLD_KINDS.contains(&(api_version, kind))
}

/// What `gkq status` reports on: Kueue's world, the provisioning requests, jobs and nodes.
pub const STATUS_KINDS: [KindRef; 15] = [
    KUEUE_WORLD_KINDS[0],
    KUEUE_WORLD_KINDS[1],
    KUEUE_WORLD_KINDS[2],
    KUEUE_WORLD_KINDS[3],
    KUEUE_WORLD_KINDS[4],
    KUEUE_WORLD_KINDS[5],
    KUEUE_WORLD_KINDS[6],
    KUEUE_WORLD_KINDS[7],
    KUEUE_WORLD_KINDS[8],
    KUEUE_WORLD_KINDS[9],
    PROVISIONING_REQUEST,
    RAYJOB,
    JOB,
    JOBSET,
    NODE,
];

/// The kinds of jobs gkq submits.
pub const JOB_KINDS: [KindRef; 3] = [RAYJOB, JOBSET, JOB];

/// What a job's admission timeline needs (`report::timeline`).
pub const JOB_TIMELINE_KINDS: [KindRef; 6] =
    [RAYJOB, JOBSET, JOB, WORKLOAD, PROVISIONING_REQUEST, NODE];

/// Lists every object of each of `kinds` that `known` does not hold already, concurrently; a
/// kind the API server does not serve is left out.
pub async fn read_kinds(
    api: &dyn KubeApi,
    kinds: &[KindRef],
    known: KubeSnapshot,
) -> KubeResult<KubeSnapshot> {
    read_selected(api, kinds, "", known).await
}

/// The jobs gkq applied for `stack` (its labels select them), added to `known`: a report on the
/// spec's own jobs does not read every other tenant's.
pub async fn read_stack_jobs(
    api: &dyn KubeApi,
    stack: &str,
    known: KubeSnapshot,
) -> KubeResult<KubeSnapshot> {
    read_selected(api, &JOB_KINDS, &owned_selector(stack), known).await
}

async fn read_selected(
    api: &dyn KubeApi,
    kinds: &[KindRef],
    label_selector: &str,
    mut known: KubeSnapshot,
) -> KubeResult<KubeSnapshot> {
    let reads = kinds
        .iter()
        .filter(|(_, kind)| !known.by_kind.contains_key(kind))
        .map(|&(api_version, kind)| async move {
            let Some(info) = api.resource(api_version, kind).await? else {
                return Ok(None);
            };
            let objects = api.list(&info, label_selector).await?;
            Ok(Some((
                kind,
                objects.into_iter().map(without_bookkeeping).collect(),
            )))
        });
    for read in join_all(reads).await {
        if let Some((kind, objects)) = read? {
            known.by_kind.insert(kind, objects);
        }
    }
    Ok(known)
}

/// Kueue's world ([`KUEUE_WORLD_KINDS`]).
pub async fn read_kueue_world(api: &dyn KubeApi) -> KubeResult<KubeSnapshot> {
    read_kinds(api, &KUEUE_WORLD_KINDS, KubeSnapshot::default()).await
}

/// Everything `gkq status` reports on; what `known` holds (planning's snapshot) is not read
/// again.
pub async fn read_kubernetes(api: &dyn KubeApi, known: KubeSnapshot) -> KubeResult<KubeSnapshot> {
    read_kinds(api, &STATUS_KINDS, known).await
}

/// A snapshot holding only the Workloads of `snapshot`, when it has them.
pub fn workloads_only(snapshot: &KubeSnapshot) -> KubeSnapshot {
    let mut only = KubeSnapshot::default();
    if let Some(workloads) = snapshot.by_kind.get(WORKLOAD.1) {
        only.by_kind.insert(WORKLOAD.1, workloads.clone());
    }
    only
}
