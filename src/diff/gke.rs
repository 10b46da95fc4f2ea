//! GKE changes, classified by what the API can change in place (docs/gke.md section b).
//!
//! Node pools: autoscaling by `nodePools.setAutoscaling`, management by
//! `nodePools.setManagement`, and one `nodePools.update` call per field group (labels, taints,
//! gcfsConfig, version, ...). TPU topology and placement policy, reservation affinity, flex-start,
//! queued provisioning, the machine type of a TPU slice pool, OAuth scopes, service account,
//! metadata, spot and max pods are fixed at creation: changing them replaces the pool.
//! `initialNodeCount` is never compared after creation (the autoscaler owns the size).
//!
//! Clusters: version, addons, image streaming default, release channel, node auto-provisioning
//! (`autoscaling`), logging and monitoring by
//! `clusters.update`, resource labels by `clusters.setResourceLabels`. Everything else (name,
//! location, network settings) would mean recreating the cluster, which gkq plans only as a
//! blocked action that needs explicit consent.

use serde_json::{Map, Value, json};

use super::compare::owned;
use super::normalize::{
    Dialect, gke_cluster_desired_view, gke_cluster_live_view, gke_node_pool_desired_view,
    gke_node_pool_live_view, keys_of,
};
use super::{ChangeEffect, PathSeg, ResourceDiff, UpdateMethod, field_changes};

/// Compares a desired node pool body with the live pool.
pub fn diff_node_pool(desired: &Value, live: &Value) -> ResourceDiff {
    let desired_view = gke_node_pool_desired_view(desired);
    let comparison = owned(&desired_view, &gke_node_pool_live_view(live), Dialect::Gke);
    let tpu = is_tpu_pool(desired) || is_tpu_pool(live);
    ResourceDiff {
        changes: field_changes(comparison.changes, |path| classify_node_pool(path, tpu)),
        live_view: comparison.live_view,
        desired_view,
    }
}

/// Compares a desired cluster body (its `nodePools` are compared as pools) with the live cluster.
pub fn diff_cluster(desired: &Value, live: &Value) -> ResourceDiff {
    let desired_view = gke_cluster_desired_view(desired);
    let comparison = owned(&desired_view, &gke_cluster_live_view(live), Dialect::Gke);
    ResourceDiff {
        changes: field_changes(comparison.changes, classify_cluster),
        live_view: comparison.live_view,
        desired_view,
    }
}

/// TPU slice pools: a `ct*` machine type, or a TPU topology.
pub fn is_tpu_pool(pool: &Value) -> bool {
    let machine = pool
        .pointer("/config/machineType")
        .and_then(Value::as_str)
        .unwrap_or("");
    machine.starts_with("ct") || pool.pointer("/placementPolicy/tpuTopology").is_some()
}

fn replace(reason: impl Into<String>) -> ChangeEffect {
    ChangeEffect::Replace(reason.into())
}

fn node_pool_update(field: &str) -> ChangeEffect {
    ChangeEffect::InPlace(UpdateMethod::UpdateNodePool {
        field: field.to_string(),
    })
}

/// How a changed node pool field can be made.
pub fn classify_node_pool(path: &[PathSeg], tpu: bool) -> ChangeEffect {
    let keys = keys_of(path);
    match keys.as_slice() {
        ["name", ..] => replace("a node pool's name is its identity"),
        ["placementPolicy", ..] => replace(
            "the TPU topology and placement policy cannot change in place (UpdateNodePoolRequest has no such field)",
        ),
        ["config", "reservationAffinity", ..] => {
            replace("reservation affinity cannot change in place")
        }
        ["config", "flexStart", ..] => replace(
            "flex-start is fixed at creation: the API's nodePools.update accepts it, but its effect on a pool \
             with nodes is undocumented, so gkq recreates the pool (as terraform does)",
        ),
        ["queuedProvisioning", ..] => replace(
            "queued provisioning is fixed at creation: the API's nodePools.update accepts it, but its effect \
             on a pool with nodes is undocumented, so gkq recreates the pool (as terraform does)",
        ),
        ["config", "machineType", ..] if tpu => {
            replace("the machine type of a TPU slice pool is tied to its topology (chips per VM)")
        }
        [
            "config",
            field @ ("machineType" | "diskType" | "diskSizeGb" | "imageType"),
            ..,
        ] => node_pool_update(field),
        [
            "config",
            field @ ("oauthScopes"
            | "serviceAccount"
            | "metadata"
            | "spot"
            | "preemptible"
            | "accelerators"
            | "maxRunDuration"
            | "localSsdCount"
            | "bootDiskKmsKey"
            | "shieldedInstanceConfig"
            | "sandboxConfig"
            | "minCpuPlatform"
            | "nodeGroup"
            | "localNvmeSsdBlockConfig"
            | "ephemeralStorageLocalSsdConfig"),
            ..,
        ] => replace(format!("config.{field} cannot change in place")),
        ["maxPodsConstraint", ..] => replace("maxPodsConstraint cannot change in place"),
        ["autoscaling", ..] => ChangeEffect::InPlace(UpdateMethod::SetNodePoolAutoscaling),
        ["management", ..] => ChangeEffect::InPlace(UpdateMethod::SetNodePoolManagement),
        [
            "config",
            field @ ("gcfsConfig"
            | "resourceLabels"
            | "labels"
            | "taints"
            | "tags"
            | "kubeletConfig"
            | "linuxNodeConfig"
            | "workloadMetadataConfig"
            | "loggingConfig"
            | "gvnic"
            | "fastSocket"
            | "windowsNodeConfig"
            | "resourceManagerTags"
            | "containerdConfig"
            | "confidentialNodes"),
            ..,
        ] => node_pool_update(field),
        ["version"] => node_pool_update("nodeVersion"),
        ["locations", ..] => node_pool_update("locations"),
        ["upgradeSettings", ..] => node_pool_update("upgradeSettings"),
        _ => replace(format!(
            "gkq knows no in-place update for {}",
            super::path_text(path)
        )),
    }
}

/// How a changed cluster field can be made.
pub fn classify_cluster(path: &[PathSeg]) -> ChangeEffect {
    let keys = keys_of(path);
    let update = |field: &str| {
        ChangeEffect::InPlace(UpdateMethod::UpdateCluster {
            field: field.to_string(),
        })
    };
    match keys.as_slice() {
        ["initialClusterVersion"] => update("desiredMasterVersion"),
        ["addonsConfig", ..] => update("desiredAddonsConfig"),
        ["nodePoolDefaults", "nodeConfigDefaults", "gcfsConfig", ..] => update("desiredGcfsConfig"),
        ["releaseChannel", ..] => update("desiredReleaseChannel"),
        ["loggingService"] => update("desiredLoggingService"),
        ["monitoringService"] => update("desiredMonitoringService"),
        ["workloadIdentityConfig", ..] => update("desiredWorkloadIdentityConfig"),
        ["verticalPodAutoscaling", ..] => update("desiredVerticalPodAutoscaling"),
        ["autoscaling", ..] => update("desiredClusterAutoscaling"),
        ["resourceLabels", ..] => ChangeEffect::InPlace(UpdateMethod::SetClusterResourceLabels),
        ["name"] => replace("a cluster's name is its identity"),
        _ => replace(format!(
            "{} cannot change without recreating the cluster",
            super::path_text(path)
        )),
    }
}

/// The request body of one in-place call. `live` is the live resource at plan time: fields of
/// `setManagement` and `setAutoscaling` that the spec leaves out are taken from it, because those
/// calls replace the whole message and an absent field would reset to its proto3 zero.
/// Etags, label fingerprints and GKE's own labels are added by the executor from a fresh read.
pub fn request_body(method: &UpdateMethod, desired: &Value, live: &Value) -> Value {
    let at = |pointer: &str| desired.pointer(pointer).cloned().unwrap_or(Value::Null);
    match method {
        UpdateMethod::SetNodePoolAutoscaling => {
            overlay(live.get("autoscaling"), desired.get("autoscaling"))
        }
        UpdateMethod::SetNodePoolManagement => {
            overlay(live.get("management"), desired.get("management"))
        }
        UpdateMethod::UpdateNodePool { field } => match field.as_str() {
            "nodeVersion" => json!({"nodeVersion": at("/version")}),
            "locations" => json!({"locations": at("/locations")}),
            "upgradeSettings" => json!({"upgradeSettings": at("/upgradeSettings")}),
            // UpdateNodePoolRequest wraps these maps and lists in a message of the same name.
            "resourceLabels" => json!({"resourceLabels": {"labels": at("/config/resourceLabels")}}),
            "labels" => json!({"labels": {"labels": at("/config/labels")}}),
            "taints" => json!({"taints": {"taints": at("/config/taints")}}),
            "tags" => json!({"tags": {"tags": at("/config/tags")}}),
            // UpdateNodePoolRequest.diskSizeGb is int64, so a JSON string.
            "diskSizeGb" => {
                json!({"diskSizeGb": at("/config/diskSizeGb").to_string().trim_matches('"')})
            }
            other => {
                let mut body = Map::new();
                body.insert(other.to_string(), at(&format!("/config/{other}")));
                Value::Object(body)
            }
        },
        UpdateMethod::UpdateCluster { field } => {
            let value = match field.as_str() {
                "desiredMasterVersion" => at("/initialClusterVersion"),
                "desiredAddonsConfig" => at("/addonsConfig"),
                "desiredGcfsConfig" => at("/nodePoolDefaults/nodeConfigDefaults/gcfsConfig"),
                "desiredReleaseChannel" => at("/releaseChannel"),
                "desiredLoggingService" => at("/loggingService"),
                "desiredMonitoringService" => at("/monitoringService"),
                "desiredWorkloadIdentityConfig" => at("/workloadIdentityConfig"),
                "desiredVerticalPodAutoscaling" => at("/verticalPodAutoscaling"),
                "desiredClusterAutoscaling" => at("/autoscaling"),
                _ => Value::Null,
            };
            let mut update = Map::new();
            update.insert(field.clone(), value);
            Value::Object(update)
        }
        UpdateMethod::SetClusterResourceLabels => at("/resourceLabels"),
        UpdateMethod::ServerSideApply => desired.clone(),
    }
}

/// `base` with every field of `top` written over it (one level deep).
fn overlay(base: Option<&Value>, top: Option<&Value>) -> Value {
    let mut merged = base.and_then(Value::as_object).cloned().unwrap_or_default();
    if let Some(top) = top.and_then(Value::as_object) {
        for (key, value) in top {
            merged.insert(key.clone(), value.clone());
        }
    }
    Value::Object(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::ChangeEffect;

    fn dws_pool() -> Value {
        json!({"name": "dws-pool", "initialNodeCount": 0,
            "config": {"machineType": "ct6e-standard-4t", "flexStart": true,
                       "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
                       "resourceLabels": {"managed-by": "gkq", "gkq-stack": "tpu-cluster"}},
            "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
            "management": {"autoRepair": false, "autoUpgrade": true},
            "placementPolicy": {"tpuTopology": "4x4"},
            "queuedProvisioning": {"enabled": true}})
    }

    /// What GKE returns for the pool: integers for enums, defaults, its own labels and taint,
    /// and a current size the autoscaler chose.
    fn dws_pool_live() -> Value {
        json!({"name": "dws-pool", "initialNodeCount": 2, "status": "RUNNING", "etag": "abc",
            "version": "1.34.5-gke.100", "locations": ["us-east5-b"],
            "config": {"machineType": "ct6e-standard-4t", "flexStart": true, "diskSizeGb": 100,
                       "diskType": "pd-balanced", "imageType": "COS_CONTAINERD",
                       "reservationAffinity": {"consumeReservationType": 1},
                       "resourceLabels": {"managed-by": "gkq", "gkq-stack": "tpu-cluster",
                                          "goog-gke-node-pool-provisioning-model": "flex-start"},
                       "taints": [{"key": "cloud.google.com/gke-queued", "value": "true", "effect": 1}]},
            "autoscaling": {"enabled": true, "maxNodeCount": 4, "locationPolicy": 2},
            "management": {"autoUpgrade": true},
            "upgradeSettings": {"strategy": 3, "maxSurge": 1},
            "maxPodsConstraint": {"maxPodsPerNode": "110"},
            "placementPolicy": {"tpuTopology": "4x4"},
            "queuedProvisioning": {"enabled": true}})
    }

    #[test]
    fn live_pool_with_server_defaults_has_no_diff() {
        let diff = diff_node_pool(&dws_pool(), &dws_pool_live());
        assert!(diff.is_empty(), "{:#?}", diff.changes);
        assert_eq!(diff.text(), "");
    }

    #[test]
    fn max_nodes_is_an_in_place_autoscaling_update() {
        let mut desired = dws_pool();
        desired["autoscaling"]["maxNodeCount"] = json!(8);
        let diff = diff_node_pool(&desired, &dws_pool_live());
        assert_eq!(diff.changes.len(), 1);
        assert_eq!(diff.changes[0].path, "autoscaling.maxNodeCount");
        assert_eq!(diff.methods(), [UpdateMethod::SetNodePoolAutoscaling]);
        assert!(diff.replace_reasons().is_empty());
        assert!(
            diff.text()
                .contains("-  maxNodeCount: 4\n+  maxNodeCount: 8"),
            "{}",
            diff.text()
        );
        let body = request_body(
            &UpdateMethod::SetNodePoolAutoscaling,
            &desired,
            &dws_pool_live(),
        );
        assert_eq!(
            body,
            json!({"enabled": true, "maxNodeCount": 8, "locationPolicy": 2, "minNodeCount": 0})
        );
    }

    #[test]
    fn tpu_topology_forces_replacement_with_a_reason() {
        let mut desired = dws_pool();
        desired["placementPolicy"]["tpuTopology"] = json!("2x4");
        let diff = diff_node_pool(&desired, &dws_pool_live());
        assert_eq!(diff.changes[0].path, "placementPolicy.tpuTopology");
        assert!(diff.replace_reasons()[0].contains("TPU topology"));
    }

    #[test]
    fn initial_node_count_never_diffs_after_creation() {
        let mut desired = dws_pool();
        desired["initialNodeCount"] = json!(4);
        assert!(diff_node_pool(&desired, &dws_pool_live()).is_empty());
    }

    #[test]
    fn management_update_keeps_fields_the_spec_omits() {
        let mut desired = dws_pool();
        desired["management"] = json!({"autoRepair": false});
        let mut live = dws_pool_live();
        live["management"] = json!({"autoRepair": true, "autoUpgrade": true});
        let diff = diff_node_pool(&desired, &live);
        assert_eq!(diff.methods(), [UpdateMethod::SetNodePoolManagement]);
        let body = request_body(&UpdateMethod::SetNodePoolManagement, &desired, &live);
        assert_eq!(body, json!({"autoRepair": false, "autoUpgrade": true}));
    }

    #[test]
    fn classification_table() {
        let path = |text: &str| -> Vec<PathSeg> {
            text.split('.').map(|k| PathSeg::Key(k.into())).collect()
        };
        let effect = |text: &str, tpu| classify_node_pool(&path(text), tpu);
        assert!(matches!(
            effect("config.reservationAffinity.consumeReservationType", true),
            ChangeEffect::Replace(_)
        ));
        assert!(matches!(
            effect("config.flexStart", true),
            ChangeEffect::Replace(_)
        ));
        assert!(matches!(
            effect("queuedProvisioning.enabled", true),
            ChangeEffect::Replace(_)
        ));
        assert!(matches!(
            effect("config.oauthScopes", false),
            ChangeEffect::Replace(_)
        ));
        assert!(matches!(
            effect("config.spot", false),
            ChangeEffect::Replace(_)
        ));
        assert!(matches!(
            effect("config.machineType", true),
            ChangeEffect::Replace(_)
        ));
        assert_eq!(
            effect("config.machineType", false),
            node_pool_update("machineType")
        );
        assert_eq!(
            effect("config.gcfsConfig.enabled", false),
            node_pool_update("gcfsConfig")
        );
        assert_eq!(
            effect("config.resourceLabels.team", false),
            node_pool_update("resourceLabels")
        );
        assert_eq!(effect("version", false), node_pool_update("nodeVersion"));
        let cluster = |text: &str| classify_cluster(&path(text));
        assert_eq!(
            cluster("addonsConfig.rayOperatorConfig.enabled"),
            ChangeEffect::InPlace(UpdateMethod::UpdateCluster {
                field: "desiredAddonsConfig".into()
            })
        );
        assert_eq!(
            cluster("resourceLabels.team"),
            ChangeEffect::InPlace(UpdateMethod::SetClusterResourceLabels)
        );
        assert!(matches!(cluster("network"), ChangeEffect::Replace(_)));
    }

    #[test]
    fn cluster_version_compares_with_the_running_control_plane() {
        let desired = json!({"name": "tpu-cluster", "initialClusterVersion": "1.34",
            "nodePools": [{"name": "default-pool"}],
            "addonsConfig": {"rayOperatorConfig": {"enabled": true}},
            "nodePoolDefaults": {"nodeConfigDefaults": {"gcfsConfig": {"enabled": true}}},
            "resourceLabels": {"managed-by": "gkq"}});
        let live = json!({"name": "tpu-cluster", "initialClusterVersion": "1.34", "currentMasterVersion": "1.34.5-gke.100",
            "status": 2, "labelFingerprint": "fp", "nodePools": [{"name": "default-pool"}, {"name": "x"}],
            "addonsConfig": {"rayOperatorConfig": {"enabled": true}, "httpLoadBalancing": {}},
            "nodePoolDefaults": {"nodeConfigDefaults": {"gcfsConfig": {"enabled": true}}},
            "resourceLabels": {"managed-by": "gkq", "goog-gke-cluster-id-base32": "x"}});
        assert!(diff_cluster(&desired, &live).is_empty());
        let mut newer = desired.clone();
        newer["initialClusterVersion"] = json!("1.35");
        let diff = diff_cluster(&newer, &live);
        assert_eq!(
            diff.methods(),
            [UpdateMethod::UpdateCluster {
                field: "desiredMasterVersion".into()
            }]
        );
        assert_eq!(
            request_body(&diff.methods()[0], &newer, &live),
            json!({"desiredMasterVersion": "1.35"})
        );
    }

    /// Turning on node auto-provisioning (or changing its limits) is one `clusters.update` with
    /// `desiredClusterAutoscaling`, the whole object, not a recreation of the cluster.
    #[test]
    fn node_auto_provisioning_is_a_cluster_update() {
        let live = json!({"name": "tpu-cluster", "initialClusterVersion": "1.34",
            "autoscaling": {"autoscalingProfile": "BALANCED"}});
        let autoscaling = json!({"enableNodeAutoprovisioning": true, "resourceLimits": [
            {"resourceType": "cpu", "maximum": "720"}, {"resourceType": "memory", "maximum": "2880"}]});
        let desired = json!({"name": "tpu-cluster", "initialClusterVersion": "1.34",
            "autoscaling": autoscaling.clone()});
        let diff = diff_cluster(&desired, &live);
        let method = UpdateMethod::UpdateCluster {
            field: "desiredClusterAutoscaling".into(),
        };
        assert_eq!(diff.methods(), std::slice::from_ref(&method));
        assert_eq!(
            request_body(&method, &desired, &live),
            json!({"desiredClusterAutoscaling": autoscaling})
        );
    }
}
