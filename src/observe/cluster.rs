//! Reading the cluster's world from Kubernetes: every object of the kinds a report needs (Kueue's
//! world, Workloads, ProvisioningRequests, the jobs, nodes, namespaces), one list per kind, all
//! concurrently, into the pure [`KubeSnapshot`]. `gkq status` reads [`STATUS_KINDS`]; watch's
//! job timeline reads [`JOB_TIMELINE_KINDS`] between plans. Planning's own reader of the spec's
//! objects is [`super::kube`].

use futures::future::join_all;
use serde_json::Value;

use crate::kube::{KubeApi, KubeResult};
use crate::report::status::KubeSnapshot;

/// `(apiVersion, kind)`.
pub type KindRef = (&'static str, &'static str);

const WORKLOAD: KindRef = ("kueue.x-k8s.io/v1beta2", "Workload");
const PROVISIONING_REQUEST: KindRef = ("autoscaling.x-k8s.io/v1", "ProvisioningRequest");
const RAYJOB: KindRef = ("ray.io/v1", "RayJob");
const NODE: KindRef = ("v1", "Node");

/// What `gkq status` reports on.
pub const STATUS_KINDS: [KindRef; 13] = [
    WORKLOAD,
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "Cohort"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"),
    ("kueue.x-k8s.io/v1beta2", "ProvisioningRequestConfig"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
    PROVISIONING_REQUEST,
    RAYJOB,
    ("batch/v1", "Job"),
    NODE,
    ("v1", "Namespace"),
];

/// What a job's admission timeline needs (`report::timeline`).
pub const JOB_TIMELINE_KINDS: [KindRef; 4] = [RAYJOB, WORKLOAD, PROVISIONING_REQUEST, NODE];

/// Lists every object of each of `kinds` that `known` does not hold already, concurrently; a
/// kind the API server does not serve is left out.
pub async fn read_kinds(
    api: &dyn KubeApi,
    kinds: &[KindRef],
    mut known: KubeSnapshot,
) -> KubeResult<KubeSnapshot> {
    let reads = kinds
        .iter()
        .filter(|(_, kind)| !known.by_kind.contains_key(kind))
        .map(|&(api_version, kind)| async move {
            let Some(info) = api.resource(api_version, kind).await? else {
                return Ok(None);
            };
            Ok(Some((kind, api.list(&info, "").await?)))
        });
    for read in join_all(reads).await {
        if let Some((kind, objects)) = read? {
            known.by_kind.insert(kind, objects);
        }
    }
    Ok(known)
}

/// Everything `gkq status` reports on. `workloads`, when planning has just read them
/// (`ops::plan::Planned::workloads`), are used rather than read a second time.
pub async fn read_kubernetes(
    api: &dyn KubeApi,
    workloads: Option<Vec<Value>>,
) -> KubeResult<KubeSnapshot> {
    read_kinds(api, &STATUS_KINDS, with_workloads(workloads)).await
}

/// A snapshot that already holds `workloads` when they are given.
pub fn with_workloads(workloads: Option<Vec<Value>>) -> KubeSnapshot {
    let mut snapshot = KubeSnapshot::default();
    if let Some(workloads) = workloads {
        snapshot.by_kind.insert(WORKLOAD.1, workloads);
    }
    snapshot
}
