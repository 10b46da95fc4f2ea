//! Kueue objects, written as `kueue.x-k8s.io/v1beta2` (the storage version since Kueue v0.16).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::{k8s_meta, quantity_json};
use crate::spec::types::{AdmissionCheckRef, ClusterQueue, Flavor, Provisioning, Spec};
use crate::vocab::labels::PROVISIONING_CONTROLLER;

pub const KUEUE_API: &str = "kueue.x-k8s.io/v1beta2";
pub const DWS_CLASS: &str = crate::placement::provisioning::DWS_CLASS;
/// Names the `provisioning: dws` short form gives the objects it creates (the seed's names).
pub const DWS_CHECK: &str = "dws-prov";
pub const DWS_CONFIG: &str = "dws-config";
/// What jobs ask for when the spec names no accelerator resource.
pub const DEFAULT_ACCELERATOR_RESOURCE: &str = crate::vocab::labels::TPU_RESOURCE;

/// An admission check backed by a ProvisioningRequestConfig, after expanding short forms.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvisioningCheck {
    pub name: String,
    pub config: String,
    pub class_name: String,
    pub managed_resources: Vec<String>,
    /// `podSetMergePolicy`, Kueue's spelling; `None` merges nothing.
    pub pod_set_merge_policy: Option<&'static str>,
}

/// The accelerator resources the spec's jobs ask for (`google.com/tpu` if none do).
pub fn accelerator_resources(spec: &Spec) -> Vec<String> {
    let set: BTreeSet<String> = spec
        .jobs
        .iter()
        .flat_map(crate::model::jobs::pod_groups)
        .filter_map(|g| g.accelerator_resource())
        .collect();
    if set.is_empty() {
        vec![DEFAULT_ACCELERATOR_RESOURCE.into()]
    } else {
        set.into_iter().collect()
    }
}

/// Every admission check: the spec's own, plus `dws-prov` when a flavor says `provisioning: dws`.
pub fn provisioning_checks(spec: &Spec) -> Vec<ProvisioningCheck> {
    let mut checks: Vec<ProvisioningCheck> = spec
        .kueue
        .admission_checks
        .iter()
        .map(|c| ProvisioningCheck {
            name: c.name.clone(),
            config: c.provisioning_request_config.name.clone(),
            class_name: c
                .provisioning_request_config
                .class_name
                .clone()
                .unwrap_or_else(|| DWS_CLASS.into()),
            managed_resources: if c.provisioning_request_config.managed_resources.is_empty() {
                accelerator_resources(spec)
            } else {
                c.provisioning_request_config.managed_resources.clone()
            },
            pod_set_merge_policy: c
                .provisioning_request_config
                .pod_set_merge_policy
                .map(|p| p.as_str()),
        })
        .collect();
    let wants_dws = spec
        .kueue
        .flavors
        .iter()
        .any(|f| f.provisioning == Some(Provisioning::Dws));
    if wants_dws && !checks.iter().any(|c| c.class_name == DWS_CLASS) {
        checks.push(ProvisioningCheck {
            name: DWS_CHECK.into(),
            config: DWS_CONFIG.into(),
            class_name: DWS_CLASS.into(),
            managed_resources: accelerator_resources(spec),
            pod_set_merge_policy: None,
        });
    }
    checks
}

pub fn dws_flavors(spec: &Spec) -> BTreeSet<&str> {
    spec.kueue
        .flavors
        .iter()
        .filter(|f| f.provisioning == Some(Provisioning::Dws))
        .map(|f| f.name.as_str())
        .collect()
}

/// The flavors a ClusterQueue lists, in order, across its resource groups.
pub fn queue_flavors(cq: &ClusterQueue) -> Vec<&str> {
    let mut seen = Vec::new();
    for g in &cq.resource_groups {
        for f in &g.flavors {
            if !seen.contains(&f.name.as_str()) {
                seen.push(f.name.as_str());
            }
        }
    }
    seen
}

/// The check that `provisioning: dws` flavors use: the spec's own DWS-class check if it defines
/// one, else the `dws-prov` check gkq creates.
pub fn dws_check_name(spec: &Spec) -> String {
    provisioning_checks(spec)
        .into_iter()
        .find(|c| c.class_name == DWS_CLASS)
        .map(|c| c.name)
        .unwrap_or_else(|| DWS_CHECK.to_string())
}

/// A ClusterQueue's admission checks: the spec's, plus the DWS check scoped to its DWS flavors.
pub fn queue_admission_checks(spec: &Spec, cq: &ClusterQueue) -> Vec<AdmissionCheckRef> {
    let mut refs = cq.admission_checks.clone();
    let dws_check = dws_check_name(spec);
    let dws = dws_flavors(spec);
    let on: Vec<String> = queue_flavors(cq)
        .into_iter()
        .filter(|f| dws.contains(f))
        .map(str::to_string)
        .collect();
    if !on.is_empty() {
        match refs.iter_mut().find(|r| r.name == dws_check) {
            Some(existing) if !existing.on_flavors.is_empty() => {
                for f in on {
                    if !existing.on_flavors.contains(&f) {
                        existing.on_flavors.push(f);
                    }
                }
            }
            Some(_) => {}
            None => refs.push(AdmissionCheckRef {
                name: dws_check,
                on_flavors: on,
            }),
        }
    }
    refs
}

pub fn resource_flavor(spec: &Spec, f: &Flavor) -> Value {
    let mut node_labels = f.node_labels.clone();
    let mut taints = f.node_taints.clone();
    if let Some(pool) = &f.node_pool {
        node_labels.insert(crate::vocab::labels::NODE_POOL_LABEL.into(), pool.clone());
        if let Some(p) = spec.node_pools.iter().find(|p| &p.name == pool) {
            for t in &p.taints {
                if !taints.contains(t) {
                    taints.push(t.clone());
                }
            }
        }
    }
    let mut s = Map::new();
    if !node_labels.is_empty() {
        s.insert("nodeLabels".into(), json!(node_labels));
    }
    if !taints.is_empty() {
        s.insert(
            "nodeTaints".into(),
            Value::Array(
                taints
                    .iter()
                    .map(|t| {
                        let mut v = json!({"key": t.key, "effect": t.effect});
                        if let Some(value) = &t.value {
                            v["value"] = json!(value);
                        }
                        v
                    })
                    .collect(),
            ),
        );
    }
    if !f.tolerations.is_empty() {
        s.insert(
            "tolerations".into(),
            Value::Array(f.tolerations.iter().map(super::toleration_json).collect()),
        );
    }
    json!({
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": k8s_meta(spec, &f.name, None),
        "spec": s,
    })
}

pub fn cluster_queue(spec: &Spec, cq: &ClusterQueue) -> Value {
    let mut s = Map::new();
    if let Some(c) = &cq.cohort {
        s.insert("cohortName".into(), json!(c));
    }
    s.insert(
        "namespaceSelector".into(),
        cq.namespace_selector.clone().unwrap_or_else(|| json!({})),
    );
    if let Some(q) = &cq.queueing_strategy {
        s.insert("queueingStrategy".into(), json!(q));
    }
    let groups: Vec<Value> = cq
        .resource_groups
        .iter()
        .map(|g| {
            let flavors: Vec<Value> = g
                .flavors
                .iter()
                .map(|f| {
                    let resources: Vec<Value> = g
                        .resources
                        .iter()
                        .map(|r| {
                            let mut res = json!({"name": r});
                            if let Some(q) = f.quota.get(r) {
                                res["nominalQuota"] = quantity_json(q);
                            }
                            if let Some(q) = f.borrowing_limit.get(r) {
                                res["borrowingLimit"] = quantity_json(q);
                            }
                            if let Some(q) = f.lending_limit.get(r) {
                                res["lendingLimit"] = quantity_json(q);
                            }
                            res
                        })
                        .collect();
                    json!({"name": f.name, "resources": resources})
                })
                .collect();
            json!({"coveredResources": g.resources, "flavors": flavors})
        })
        .collect();
    s.insert("resourceGroups".into(), Value::Array(groups));
    if let Some(p) = &cq.preemption {
        let mut pre = Map::new();
        if let Some(v) = &p.within_cluster_queue {
            pre.insert("withinClusterQueue".into(), json!(v));
        }
        if let Some(v) = &p.reclaim_within_cohort {
            pre.insert("reclaimWithinCohort".into(), json!(v));
        }
        if let Some(v) = &p.borrow_within_cohort {
            pre.insert("borrowWithinCohort".into(), json!({"policy": v}));
        }
        s.insert("preemption".into(), Value::Object(pre));
    }
    if let Some(ff) = &cq.flavor_fungibility {
        let mut f = Map::new();
        if let Some(v) = &ff.when_can_borrow {
            f.insert("whenCanBorrow".into(), json!(v));
        }
        if let Some(v) = &ff.when_can_preempt {
            f.insert("whenCanPreempt".into(), json!(v));
        }
        s.insert("flavorFungibility".into(), Value::Object(f));
    }
    if let Some(stop) = cq.stop_policy {
        s.insert("stopPolicy".into(), json!(stop.as_str()));
    }
    let checks = queue_admission_checks(spec, cq);
    if !checks.is_empty() {
        let list: Vec<Value> = checks
            .iter()
            .map(|c| {
                let mut v = json!({"name": c.name});
                if !c.on_flavors.is_empty() {
                    v["onFlavors"] = json!(c.on_flavors);
                }
                v
            })
            .collect();
        s.insert(
            "admissionChecksStrategy".into(),
            json!({"admissionChecks": list}),
        );
    }
    json!({
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": k8s_meta(spec, &cq.name, None),
        "spec": s,
    })
}

pub fn local_queue(spec: &Spec, lq: &crate::spec::types::LocalQueue) -> Value {
    let mut s = json!({"clusterQueue": lq.cluster_queue});
    if let Some(stop) = lq.stop_policy {
        s["stopPolicy"] = json!(stop.as_str());
    }
    json!({
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": k8s_meta(spec, &lq.name, Some(&lq.namespace)),
        "spec": s,
    })
}

pub fn admission_check(spec: &Spec, c: &ProvisioningCheck) -> Value {
    json!({
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": k8s_meta(spec, &c.name, None),
        "spec": {
            "controllerName": PROVISIONING_CONTROLLER,
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": c.config,
            },
        },
    })
}

pub fn provisioning_request_config(spec: &Spec, c: &ProvisioningCheck) -> Value {
    let mut config = json!({
        "apiVersion": KUEUE_API,
        "kind": "ProvisioningRequestConfig",
        "metadata": k8s_meta(spec, &c.config, None),
        "spec": {
            "provisioningClassName": c.class_name,
            "managedResources": c.managed_resources,
        },
    });
    if let Some(policy) = c.pod_set_merge_policy {
        config["spec"]["podSetMergePolicy"] = json!(policy);
    }
    config
}
