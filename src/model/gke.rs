//! GKE request bodies, field for field what the seed's gcloud commands send (`gcloud container
//! clusters create` and `node-pools create`, mapped to the REST fields; see `docs/gke.md`
//! a.1-a.4), plus gkq's ownership labels and `autoRepair: false` on flex-start pools.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

pub use super::gke_facts::{topology_chips, tpu_chips_per_vm};
use super::{GKE_MANAGED_BY_LABEL, GKE_STACK_LABEL, MANAGED_BY_VALUE};
use crate::spec::types::{Cluster, NodeAutoProvisioning, NodePool, Spec, Taint};

/// The six "gke-default" OAuth scopes gcloud sends for every pool, sorted as gcloud sorts them.
pub const GKE_DEFAULT_SCOPES: [&str; 6] = [
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/service.management.readonly",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/trace.append",
];

/// Add-ons that `gcloud --addons=...` disables when it does not name them.
const ADDONS_DISABLED_BY_GCLOUD: [&str; 4] = [
    "httpLoadBalancing",
    "horizontalPodAutoscaling",
    "kubernetesDashboard",
    "networkPolicyConfig",
];

/// Longest cluster or node pool name GKE accepts.
pub const GKE_NAME_MAX: usize = 40;

/// GKE's rule for cluster and node pool names, the regex `(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)`
/// GKE answers for a `Cluster.name` or `NodePool.name` that breaks it (the `name` fields of
/// <https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster>
/// and `...clusters.nodePools#NodePool`): a lowercase letter first, then lowercase letters,
/// digits and `-`, not ending in `-`, at most 40 characters. The validator and the GKE emulator
/// both use this one rule.
pub fn is_gke_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= GKE_NAME_MAX
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A Compute Engine resource name (a reservation's): `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`, the
/// `name` field of <https://cloud.google.com/compute/docs/reference/rest/v1/reservations>.
/// The ladder's validator and the GKE emulator both use this one rule.
pub fn is_compute_engine_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A Google Cloud project ID: 6 to 30 characters of the resource-name alphabet, a letter
/// first (<https://cloud.google.com/resource-manager/docs/creating-managing-projects>).
pub fn is_project_id(id: &str) -> bool {
    (6..=30).contains(&id.len()) && is_compute_engine_name(id)
}

/// Longest RayJob name KubeRay accepts: it derives the RayCluster's name (and from it Service
/// and Pod names) by appending a suffix, so the job's own name is capped below 63 (KubeRay's
/// `ValidateRayJobMetadata` in `ray-operator/controllers/ray/utils/validation.go`: at most
/// `MaxRayJobNameLength` = 53 - 6, and a DNS-1035 label, so starting with a letter).
pub const RAYJOB_NAME_MAX: usize = 47;

/// Longest GKE label value (docs/gke.md e).
const GKE_LABEL_VALUE_MAX: usize = 63;

/// The stack `namespace/name` as a GKE label value (lowercase letters, digits, `_` and `-`, at
/// most 63 characters; docs/gke.md e): `namespace_name` with each `.` of the name written `_`.
/// A Kubernetes namespace has neither `_` nor `.` and an object name has no `_`, so the value
/// reads back as the stack ([`owner_from_label`]). When that has 63 characters or more, the value
/// is its first 54 and `-` and 8 hex digits of the stack's SHA-256 (63 in all), which tells
/// stacks apart but does not read back.
pub fn owner_label_value(owner: &str) -> String {
    let plain = owner.replacen('/', "_", 1).replace('.', "_");
    if plain.len() < GKE_LABEL_VALUE_MAX {
        return plain;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(owner.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let cut: String = plain.chars().take(GKE_LABEL_VALUE_MAX - 9).collect();
    format!("{cut}-{hex}")
}

/// The stack a [`owner_label_value`] names, as `namespace/name`; a cut value is shown as it is.
pub fn owner_from_label(value: &str) -> String {
    match value.split_once('_') {
        Some((namespace, name)) if value.len() < GKE_LABEL_VALUE_MAX => {
            format!("{namespace}/{}", name.replace('_', "."))
        }
        _ => value.to_string(),
    }
}

pub fn ownership_labels(cluster: &str, user: &BTreeMap<String, String>) -> Value {
    let mut labels: BTreeMap<String, String> = user.clone();
    labels.insert(GKE_MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
    labels.insert(GKE_STACK_LABEL.into(), cluster.into());
    json!(labels)
}

/// The `cluster` of `clusters.create`.
pub fn cluster_body(spec: &Spec) -> Value {
    let c: &Cluster = &spec.cluster;
    let mut body = Map::new();
    body.insert("name".into(), json!(c.name));
    if let Some(v) = &c.version {
        body.insert("initialClusterVersion".into(), json!(v));
    }
    body.insert(
        "nodePools".into(),
        json!([{
            "name": c.default_pool.name,
            "initialNodeCount": c.default_pool.nodes,
            "config": {
                "machineType": c.default_pool.machine_type,
                "oauthScopes": GKE_DEFAULT_SCOPES,
            },
            "management": {"autoRepair": true, "autoUpgrade": true},
        }]),
    );
    let mut addons = Map::new();
    if c.addons.ray_operator {
        addons.insert("rayOperatorConfig".into(), json!({"enabled": true}));
    }
    if c.addons.exclusive {
        for name in ADDONS_DISABLED_BY_GCLOUD {
            addons.insert(name.into(), json!({"disabled": true}));
        }
    }
    if !addons.is_empty() {
        body.insert("addonsConfig".into(), Value::Object(addons));
    }
    if c.image_streaming {
        body.insert(
            "nodePoolDefaults".into(),
            json!({"nodeConfigDefaults": {"gcfsConfig": {"enabled": true}}}),
        );
    }
    if let Some(nap) = &c.node_auto_provisioning {
        body.insert("autoscaling".into(), cluster_autoscaling(nap));
    }
    body.insert(
        "resourceLabels".into(),
        ownership_labels(&c.name, &c.labels),
    );
    Value::Object(body)
}

/// The API's `ClusterAutoscaling` for `cluster.nodeAutoProvisioning`: auto-provisioning on, and a
/// maximum per resource (`ResourceLimit`: `resourceType` "cpu", "memory" in GB, or an
/// accelerator type; `maximum` is an int64, which the API's JSON writes as a string). The same
/// object goes to `clusters.update` as `desiredClusterAutoscaling`.
pub fn cluster_autoscaling(nap: &NodeAutoProvisioning) -> Value {
    let limit = |kind: &str, max: u64| json!({"resourceType": kind, "maximum": max.to_string()});
    let mut limits = vec![
        limit("cpu", nap.max_cpu),
        limit("memory", nap.max_memory_gb),
    ];
    limits.extend(
        nap.max_accelerators
            .iter()
            .map(|(kind, max)| limit(kind, *max)),
    );
    json!({"enableNodeAutoprovisioning": true, "resourceLimits": limits})
}

/// The `nodePool` of `nodePools.create`.
pub fn node_pool_body(cluster: &str, pool: &NodePool) -> Value {
    let mut config = Map::new();
    config.insert("machineType".into(), json!(pool.machine_type));
    config.insert("oauthScopes".into(), json!(GKE_DEFAULT_SCOPES));
    if let Some(ra) = &pool.reservation_affinity
        && let Some(v) = reservation_affinity(ra)
    {
        config.insert("reservationAffinity".into(), v);
    }
    if pool.flex_start {
        config.insert("flexStart".into(), json!(true));
    }
    if pool.spot {
        config.insert("spot".into(), json!(true));
    }
    if let Some(d) = &pool.max_run_duration
        && let Ok(secs) = crate::vocab::duration::parse_whole_seconds(d)
    {
        config.insert("maxRunDuration".into(), json!(format!("{secs}s")));
    }
    if !pool.labels.is_empty() {
        config.insert("labels".into(), json!(pool.labels));
    }
    if !pool.taints.is_empty() {
        config.insert(
            "taints".into(),
            Value::Array(pool.taints.iter().map(gke_taint).collect()),
        );
    }
    config.insert(
        "resourceLabels".into(),
        ownership_labels(cluster, &pool.resource_labels),
    );

    let mut body = Map::new();
    body.insert("name".into(), json!(pool.name));
    body.insert("initialNodeCount".into(), json!(initial_nodes(pool)));
    body.insert("config".into(), Value::Object(config));
    if let Some(a) = &pool.autoscaling {
        let mut auto = json!({"enabled": true, "minNodeCount": a.min, "maxNodeCount": a.max});
        if let Some(lp) = &a.location_policy {
            auto["locationPolicy"] = json!(lp.to_uppercase());
        }
        body.insert("autoscaling".into(), auto);
    }
    body.insert(
        "management".into(),
        json!({"autoRepair": auto_repair(pool), "autoUpgrade": pool.auto_upgrade}),
    );
    if let Some(t) = &pool.tpu_topology {
        body.insert("placementPolicy".into(), json!({"tpuTopology": t}));
    }
    if pool.queued_provisioning {
        body.insert("queuedProvisioning".into(), json!({"enabled": true}));
    }
    Value::Object(body)
}

/// Flex-start pools need auto-repair off (GKE requires it; gcloud's default would send true).
pub fn auto_repair(pool: &NodePool) -> bool {
    pool.auto_repair.unwrap_or(!pool.flex_start)
}

pub fn initial_nodes(pool: &NodePool) -> u32 {
    pool.initial_nodes.unwrap_or_else(|| {
        if pool.autoscaling.is_some() {
            0
        } else {
            tpu_hosts(pool).unwrap_or(1)
        }
    })
}

/// `--reservation-affinity` values as the API's `ReservationAffinity`.
pub fn reservation_affinity(value: &str) -> Option<Value> {
    Some(match value {
        "none" => json!({"consumeReservationType": "NO_RESERVATION"}),
        "any" => json!({"consumeReservationType": "ANY_RESERVATION"}),
        "any-then-fail" => json!({"consumeReservationType": "ANY_RESERVATION_THEN_FAIL"}),
        other => {
            let name = other.strip_prefix("specific:")?;
            json!({
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [name],
            })
        }
    })
}

fn gke_taint(t: &Taint) -> Value {
    let effect = match t.effect.as_str() {
        "NoSchedule" => "NO_SCHEDULE",
        "PreferNoSchedule" => "PREFER_NO_SCHEDULE",
        "NoExecute" => "NO_EXECUTE",
        other => other,
    };
    let mut v = json!({"key": t.key, "effect": effect});
    if let Some(value) = &t.value {
        v["value"] = json!(value);
    }
    v
}

/// VMs in one TPU slice of this pool (`4x4` on `-4t` machines = 4), when both are known.
pub fn tpu_hosts(pool: &NodePool) -> Option<u32> {
    let chips = topology_chips(pool.tpu_topology.as_deref()?)?;
    let per_vm = tpu_chips_per_vm(&pool.machine_type)?;
    (chips % per_vm == 0).then_some(chips / per_vm)
}

/// The fewest and most nodes a node pool may have, over all its zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    pub min: i64,
    pub max: i64,
    /// The cluster autoscaler sizes the pool between `min` and `max`; otherwise both are its
    /// fixed size.
    pub autoscaled: bool,
}

/// A GKE `NodePool` body's node limits (as `clusters.get` returns it or gkq renders it): the one
/// rule `gkq status`, `gkq watch` and the local target's simulated autoscaler share.
///
/// `autoscaling.minNodeCount`/`maxNodeCount` and `initialNodeCount` are per zone, so they count
/// once per zone in `locations` (one when it names none); `totalMinNodeCount`/`totalMaxNodeCount`
/// are the whole pool's and exclude the per-zone ones (docs/gke.md a.3, REST
/// `NodePoolAutoscaling`). The pool is autoscaled when `autoscaling.enabled` is true, or when the
/// body leaves `enabled` out but gives a maximum (a client's JSON leaves out false and zero values,
/// docs/gke.md g).
pub fn node_pool_limits(pool: &Value) -> NodeLimits {
    fn count(value: Option<&Value>) -> Option<i64> {
        match value? {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }
    let zones = pool
        .get("locations")
        .and_then(Value::as_array)
        .map_or(1, |l| l.len().max(1) as i64);
    let autoscaling = pool.get("autoscaling");
    let field = |name: &str| count(autoscaling.and_then(|a| a.get(name)));
    let total_max = field("totalMaxNodeCount");
    let zonal_max = field("maxNodeCount");
    let autoscaled = match autoscaling.and_then(|a| a.get("enabled")) {
        Some(enabled) => enabled == &Value::Bool(true),
        None => total_max.or(zonal_max).is_some(),
    };
    if !autoscaled {
        let fixed = count(pool.get("initialNodeCount")).unwrap_or(0) * zones;
        return NodeLimits {
            min: fixed,
            max: fixed,
            autoscaled,
        };
    }
    let per_zone = |n: Option<i64>| n.unwrap_or(0) * zones;
    let (min, max) = if total_max.is_some() || field("totalMinNodeCount").is_some() {
        (
            field("totalMinNodeCount").unwrap_or(0),
            total_max.unwrap_or(0),
        )
    } else {
        (per_zone(field("minNodeCount")), per_zone(zonal_max))
    };
    NodeLimits {
        min,
        max,
        autoscaled,
    }
}

#[cfg(test)]
mod node_limits_tests {
    use super::*;

    fn limits(pool: Value) -> (i64, i64, bool) {
        let l = node_pool_limits(&pool);
        (l.min, l.max, l.autoscaled)
    }

    /// Per-zone counts count once per zone the pool names; total counts are the whole pool's;
    /// a pool without autoscaling is its fixed size in every zone.
    #[test]
    fn limits_count_every_zone_and_honour_the_totals() {
        let zones = json!(["us-east5-a", "us-east5-b"]);
        assert_eq!(
            limits(json!({"autoscaling": {"enabled": true, "minNodeCount": 1, "maxNodeCount": 4}})),
            (1, 4, true)
        );
        assert_eq!(
            limits(json!({"locations": zones, "autoscaling": {"enabled": true,
                "minNodeCount": 1, "maxNodeCount": "4"}})),
            (2, 8, true)
        );
        assert_eq!(
            limits(json!({"locations": zones, "autoscaling": {"enabled": true,
                "totalMinNodeCount": 1, "totalMaxNodeCount": 5}})),
            (1, 5, true)
        );
        assert_eq!(
            limits(json!({"locations": zones, "autoscaling": {"maxNodeCount": 3}})),
            (0, 6, true),
            "a maximum given without `enabled`"
        );
        assert_eq!(
            limits(json!({"locations": zones, "initialNodeCount": 3,
                "autoscaling": {"enabled": false, "maxNodeCount": 9}})),
            (6, 6, false)
        );
        assert_eq!(limits(json!({"initialNodeCount": 2})), (2, 2, false));
        assert_eq!(limits(json!({})), (0, 0, false));
    }
}

#[cfg(test)]
mod owner_label_tests {
    use super::*;

    #[test]
    fn a_stack_is_a_gke_label_value_that_reads_back() {
        for stack in ["team-a/train", "ml/nightly.v2", "a/b"] {
            let value = owner_label_value(stack);
            assert!(value.len() < 63, "{value}");
            assert!(
                value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'),
                "{value}"
            );
            assert_eq!(owner_from_label(&value), stack);
        }
        assert_eq!(owner_label_value("ml/nightly.v2"), "ml_nightly_v2");
        let long = format!("team/{}", "x".repeat(70));
        let other = format!("team/{}y", "x".repeat(70));
        let value = owner_label_value(&long);
        assert_eq!(value.len(), 63, "{value}");
        assert_ne!(value, owner_label_value(&other));
        assert_eq!(owner_from_label(&value), value);
    }
}

#[cfg(test)]
mod cluster_autoscaling_tests {
    use super::*;

    fn spec_with(nap: Option<NodeAutoProvisioning>) -> Spec {
        Spec {
            cluster: Cluster {
                name: "c".into(),
                node_auto_provisioning: nap,
                ..Cluster::default()
            },
            ..Spec::default()
        }
    }

    /// Without `nodeAutoProvisioning` the body has no `autoscaling` at all (the seed renders as
    /// before); with it, auto-provisioning is on with one limit per resource, accelerators by
    /// their GKE type, int64 maxima as strings.
    #[test]
    fn node_auto_provisioning_renders_the_clusters_autoscaling() {
        assert!(cluster_body(&spec_with(None)).get("autoscaling").is_none());
        let nap = NodeAutoProvisioning {
            max_cpu: 720,
            max_memory_gb: 2880,
            max_accelerators: [("tpu-v6e-slice".to_string(), 16)].into(),
        };
        let body = cluster_body(&spec_with(Some(nap)));
        assert_eq!(
            body["autoscaling"],
            json!({
                "enableNodeAutoprovisioning": true,
                "resourceLimits": [
                    {"resourceType": "cpu", "maximum": "720"},
                    {"resourceType": "memory", "maximum": "2880"},
                    {"resourceType": "tpu-v6e-slice", "maximum": "16"},
                ]
            })
        );
    }
}
