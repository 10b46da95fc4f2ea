//! Reading live Kubernetes state for a plan: one label-selected list per kind (concurrently), a
//! GET only for desired objects gkq does not own yet, and a server-side dry-run apply for each
//! object whose owned fields differ from live, so the plan compares what the server would store
//! (CRD defaults, webhook mutations, finalizers) rather than what the spec says.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;
use serde_json::Value;

use super::{ApplyOptions, KubeApi, KubeResult, ResourceInfo, install, owned_selector};
use crate::addr::ResourceAddr;
use crate::diff::kube::diff_object;
use crate::model::DesiredState;
use crate::observe::{KubeLive, KubeObject};

/// Kinds gkq may have created, listed even when the spec no longer has any (for prune).
pub const MANAGED_KINDS: [(&str, &str); 9] = [
    ("v1", "ConfigMap"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "ProvisioningRequestConfig"),
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta2", "Cohort"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
    ("ray.io/v1", "RayJob"),
];

fn kind_key(object: &Value) -> Option<(String, String)> {
    Some((
        object.get("apiVersion")?.as_str()?.to_string(),
        object.get("kind")?.as_str()?.to_string(),
    ))
}

/// Observes every desired object and every object gkq owns in `stack`.
pub async fn observe_kube(
    api: &dyn KubeApi,
    desired: &DesiredState,
    stack: &str,
) -> KubeResult<KubeLive> {
    let mut kinds: BTreeSet<(String, String)> = MANAGED_KINDS
        .iter()
        .map(|(a, k)| (a.to_string(), k.to_string()))
        .collect();
    for o in &desired.kubernetes {
        if let Some(k) = kind_key(o)
            && k.1 != install::INSTALLATION_KIND
        {
            kinds.insert(k);
        }
    }

    // Discovery and lists, one per kind, concurrently.
    let selector = owned_selector(stack);
    let lookups = kinds.iter().map(|(api_version, kind)| {
        let selector = selector.clone();
        async move {
            let info = api.resource(api_version, kind).await?;
            let objects = match &info {
                Some(info) => api.list(info, &selector).await?,
                None => Vec::new(),
            };
            KubeResult::Ok(((api_version.clone(), kind.clone()), info, objects))
        }
    });
    let mut served: BTreeMap<(String, String), ResourceInfo> = BTreeMap::new();
    let mut objects: BTreeMap<ResourceAddr, KubeObject> = BTreeMap::new();
    for result in join_all(lookups).await {
        let (key, info, listed) = result?;
        if let Some(info) = info {
            served.insert(key, info);
        }
        for live in listed {
            let part_of_installation = live
                .pointer("/metadata/labels")
                .and_then(|l| l.get(install::INSTALLATION_LABEL))
                .is_some();
            if part_of_installation {
                continue;
            }
            if let Ok(addr) = ResourceAddr::from_object(&live) {
                objects.insert(
                    addr,
                    KubeObject {
                        live: Some(live),
                        predicted: None,
                    },
                );
            }
        }
    }

    // Desired objects: GET the ones not found among gkq's (they may exist unowned), then ask the
    // server what each changed or new object would become.
    let probes = desired.kubernetes.iter().map(|object| {
        let served = &served;
        let objects = &objects;
        async move {
            let Ok(addr) = ResourceAddr::from_object(object) else {
                return KubeResult::Ok(None);
            };
            if kind_key(object).is_some_and(|k| k.1 == install::INSTALLATION_KIND) {
                let live = install::observe(api).await?;
                return Ok(Some((
                    addr,
                    KubeObject {
                        live,
                        predicted: None,
                    },
                )));
            }
            let Some(info) = kind_key(object).and_then(|k| served.get(&k)) else {
                // Not served yet (CRD arrives with Kueue): planned from the rendered object.
                return Ok(Some((addr, KubeObject::default())));
            };
            let mut live = objects.get(&addr).and_then(|o| o.live.clone());
            if live.is_none() {
                live = api
                    .get(
                        info,
                        super::namespace_of(object)
                            .or(Some("default"))
                            .filter(|_| info.namespaced),
                        super::name_of(object),
                    )
                    .await?;
            }
            let unchanged = live
                .as_ref()
                .is_some_and(|l| diff_object(&addr, object, l, None).changes.is_empty());
            let predicted = if unchanged {
                None
            } else {
                match api
                    .apply(
                        info,
                        object,
                        ApplyOptions {
                            dry_run: true,
                            force: true,
                        },
                    )
                    .await
                {
                    Ok(p) => Some(p),
                    // A namespace that does not exist yet, or a rejected object: the plan shows
                    // the rendered object; apply reports the server's answer.
                    Err(e) => {
                        tracing::debug!("dry-run of {}: {e}", super::describe(object));
                        None
                    }
                }
            };
            Ok(Some((addr, KubeObject { live, predicted })))
        }
    });
    for result in join_all(probes).await {
        if let Some((addr, observed)) = result? {
            objects.insert(addr, observed);
        }
    }
    Ok(KubeLive::Observed { objects })
}

/// What planning sees before the cluster exists: nothing, so every object is a create.
pub fn nothing_yet() -> KubeLive {
    KubeLive::Observed {
        objects: BTreeMap::new(),
    }
}

/// Kueue's Workloads in every namespace (for the disruption guard and placement): one list.
/// Empty when Kueue is not installed.
pub async fn observe_workloads(api: &dyn KubeApi) -> KubeResult<Vec<Value>> {
    match api.resource("kueue.x-k8s.io/v1beta2", "Workload").await? {
        Some(info) => api.list(&info, "").await,
        None => Ok(Vec::new()),
    }
}
