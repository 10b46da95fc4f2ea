//! What `gkq status` reads from Kubernetes: every object of the kinds its report needs (Kueue's
//! world, Workloads, ProvisioningRequests, the jobs, nodes, namespaces), into the pure
//! [`KubeSnapshot`] that `report::status::live_report` turns into the report.

use crate::kube::{KubeApi, KubeResult};
use crate::report::status::KubeSnapshot;

/// `(apiVersion, kind)` of each kind read; a kind the API server does not serve is skipped.
const READ_KINDS: [(&str, &str); 13] = [
    ("kueue.x-k8s.io/v1beta2", "Workload"),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "Cohort"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"),
    ("kueue.x-k8s.io/v1beta2", "ProvisioningRequestConfig"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
    ("autoscaling.x-k8s.io/v1", "ProvisioningRequest"),
    ("ray.io/v1", "RayJob"),
    ("batch/v1", "Job"),
    ("v1", "Node"),
    ("v1", "Namespace"),
];

/// Lists every object of each kind `gkq status` reports on.
pub async fn read_kubernetes(api: &dyn KubeApi) -> KubeResult<KubeSnapshot> {
    let mut snapshot = KubeSnapshot::default();
    for (api_version, kind) in READ_KINDS {
        let Some(info) = api.resource(api_version, kind).await? else {
            continue;
        };
        snapshot.by_kind.insert(kind, api.list(&info, "").await?);
    }
    Ok(snapshot)
}
