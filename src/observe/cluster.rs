//! What `gkq status` reads from Kubernetes: every object of the kinds its report needs (Kueue's
//! world, Workloads, ProvisioningRequests, the jobs, nodes, namespaces), into the pure
//! [`KubeSnapshot`] that `report::status::live_report` turns into the report.

use serde_json::Value;

use crate::kube::{KubeApi, KubeResult};
use crate::report::status::KubeSnapshot;

/// `(apiVersion, kind)` of each kind read; a kind the API server does not serve is skipped.
const READ_KINDS: [(&str, &str); 14] = [
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
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("v1", "Node"),
    ("v1", "Namespace"),
];

/// Lists every object of each kind `gkq status` reports on. `workloads`, when planning has just
/// read them (`ops::plan::Planned::workloads`), are used rather than read a second time.
pub async fn read_kubernetes(
    api: &dyn KubeApi,
    workloads: Option<Vec<Value>>,
) -> KubeResult<KubeSnapshot> {
    let mut snapshot = KubeSnapshot::default();
    if let Some(workloads) = workloads {
        snapshot.by_kind.insert("Workload", workloads);
    }
    for (api_version, kind) in READ_KINDS {
        if snapshot.by_kind.contains_key(kind) {
            continue;
        }
        let Some(info) = api.resource(api_version, kind).await? else {
            continue;
        };
        snapshot.by_kind.insert(kind, api.list(&info, "").await?);
    }
    Ok(snapshot)
}
