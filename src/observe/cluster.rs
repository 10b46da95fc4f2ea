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
use serde_json::Value;
use std::collections::BTreeMap;

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
    let unknown: Vec<KindRef> = kinds
        .iter()
        .filter(|(_, kind)| !known.by_kind.contains_key(kind))
        .copied()
        .collect();
    let read = read_each_kind(
        api,
        &unknown,
        label_selector,
        &|objects: &mut Vec<Value>, object| objects.push(object),
    )
    .await?;
    known.by_kind.extend(read);
    Ok(known)
}

/// Lists every object of each of `kinds` (concurrently; a kind the API server does not serve is
/// left out), each object added by `keep` to its kind's `K` as soon as it is read, without
/// bookkeeping fields: a caller that keeps a compact form never holds a whole list as trees.
async fn read_each_kind<K: Default + Send>(
    api: &dyn KubeApi,
    kinds: &[KindRef],
    label_selector: &str,
    keep: &(dyn Fn(&mut K, Value) + Sync),
) -> KubeResult<Vec<(&'static str, K)>> {
    let reads = kinds.iter().map(|&(api_version, kind)| async move {
        let Some(info) = api.resource(api_version, kind).await? else {
            return Ok(None);
        };
        let mut objects = K::default();
        api.list_each(&info, label_selector, &mut |object| {
            keep(&mut objects, without_bookkeeping(object));
        })
        .await?;
        Ok(Some((kind, objects)))
    });
    join_all(reads)
        .await
        .into_iter()
        .filter_map(Result::transpose)
        .collect()
}

/// Kueue's world ([`KUEUE_WORLD_KINDS`]).
pub async fn read_kueue_world(api: &dyn KubeApi) -> KubeResult<KubeSnapshot> {
    read_kinds(api, &KUEUE_WORLD_KINDS, KubeSnapshot::default()).await
}

/// Kueue's world ([`KUEUE_WORLD_KINDS`]), each object added by `keep` to its kind's `K` as it
/// is read (see [`read_each_kind`]).
pub async fn read_kueue_world_as<K: Default + Send>(
    api: &dyn KubeApi,
    keep: &(dyn Fn(&mut K, Value) + Sync),
) -> KubeResult<BTreeMap<&'static str, K>> {
    let read = read_each_kind(api, &KUEUE_WORLD_KINDS, "", keep).await?;
    Ok(read.into_iter().collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::{ApplyOptions, Deletion, ResourceInfo, Version};
    use serde_json::json;

    /// Serves ClusterQueues and LocalQueues one object at a time; a list read whole is refused,
    /// so a reader that collects a list of trees fails here.
    struct OneAtATime;

    #[async_trait::async_trait]
    impl KubeApi for OneAtATime {
        async fn resource(
            &self,
            api_version: &str,
            kind: &str,
        ) -> KubeResult<Option<ResourceInfo>> {
            Ok(["ClusterQueue", "LocalQueue"]
                .contains(&kind)
                .then(|| ResourceInfo {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    plural: format!("{}s", kind.to_lowercase()),
                    namespaced: kind == "LocalQueue",
                }))
        }
        async fn list(&self, info: &ResourceInfo, _: &str) -> KubeResult<Vec<Value>> {
            panic!("{} was listed whole", info.kind)
        }
        async fn list_each(
            &self,
            info: &ResourceInfo,
            _: &str,
            each: &mut (dyn FnMut(Value) + Send),
        ) -> KubeResult<()> {
            for name in ["a", "b"] {
                each(json!({"kind": info.kind, "metadata": {"name": name,
                    "managedFields": [{"manager": "kueue", "operation": "Update",
                        "fieldsV1": {"f:status": {}}}]}}));
            }
            Ok(())
        }
        async fn get(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            _: &str,
        ) -> KubeResult<Option<Value>> {
            Ok(None)
        }
        async fn apply(&self, _: &ResourceInfo, o: &Value, _: ApplyOptions) -> KubeResult<Value> {
            Ok(o.clone())
        }
        async fn delete(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            _: &str,
            _: Option<&Version>,
        ) -> KubeResult<Deletion> {
            Ok(Deletion::Absent)
        }
    }

    /// Each object of the world is kept as the caller makes it while its list is read, without
    /// the other managers' bookkeeping; kinds the server does not serve are left out.
    #[tokio::test]
    async fn the_world_is_kept_object_by_object_as_it_is_read() {
        let world = read_kueue_world_as(&OneAtATime, &|texts: &mut Vec<String>, object| {
            texts.push(object.to_string())
        })
        .await
        .unwrap();
        assert_eq!(
            world.keys().copied().collect::<Vec<_>>(),
            ["ClusterQueue", "LocalQueue"]
        );
        assert_eq!(
            world["LocalQueue"],
            [
                r#"{"kind":"LocalQueue","metadata":{"name":"a"}}"#,
                r#"{"kind":"LocalQueue","metadata":{"name":"b"}}"#
            ]
        );
        // The snapshot that status and planning read is made the same way.
        let snapshot = read_kueue_world(&OneAtATime).await.unwrap();
        assert_eq!(snapshot.by_kind["ClusterQueue"].len(), 2);
        assert!(
            snapshot.by_kind["ClusterQueue"][0]["metadata"]
                .get("managedFields")
                .is_none()
        );
    }
}
