//! Server-side defaults: what GKE fills in on create (docs/gke.md section d), versions, names.

use serde_json::{Map, Value, json};

use super::EmulatorConfig;
use super::rpc::ApiError;
use super::util::{default_key, obj_at, project_number, rfc3339, sha256_hex};
use crate::vocab::labels::QUEUED_TAINT;

/// The six "gke-default" scopes gcloud sends.
pub const GKE_DEFAULT_SCOPES: [&str; 6] = [
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/service.management.readonly",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/trace.append",
];

/// Location kinds: `us-east5-b` is a zone, `us-east5` a region.
pub fn is_zone(l: &str) -> bool {
    let parts: Vec<&str> = l.split('-').collect();
    parts.len() == 3
        && is_region(&format!("{}-{}", parts[0], parts[1]))
        && parts[2].len() == 1
        && parts[2].chars().all(|c| c.is_ascii_lowercase())
}

pub fn is_region(l: &str) -> bool {
    let parts: Vec<&str> = l.split('-').collect();
    parts.len() == 2
        && !parts[0].is_empty()
        && parts[0].chars().all(|c| c.is_ascii_lowercase())
        && parts[1]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase())
        && parts[1].chars().last().is_some_and(|c| c.is_ascii_digit())
        && parts[1]
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

pub fn region_of(l: &str) -> String {
    if is_zone(l) {
        l.rsplit_once('-')
            .map(|(r, _)| r.to_string())
            .unwrap_or_default()
    } else {
        l.to_string()
    }
}

pub fn check_location(l: &str) -> Result<(), ApiError> {
    if is_zone(l) || is_region(l) {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "Location \"{l}\" is not a valid zone or region."
        )))
    }
}

/// Cluster and node-pool names: `(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)`.
pub fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    if crate::model::gke::is_gke_name(name) {
        Ok(())
    } else {
        Err(ApiError::invalid_field(
            field,
            format!(
                "Invalid value for field '{field}': \"{name}\". Must be a match of regex \
                 '(?:[a-z](?:[-a-z0-9]{{0,38}}[a-z0-9])?)' (only alphanumerics and '-' allowed, \
                 must start with a letter and end with an alphanumeric, and must be no longer than \
                 40 characters)."
            ),
        ))
    }
}

fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(0))
        .collect()
}

pub fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    version_key(a).cmp(&version_key(b))
}

/// Resolves a version alias: `""`/`"-"` = the default, `"latest"` = the newest, `"1.34"` = the
/// newest 1.34 patch, a full version = itself. `None` when unsupported.
pub fn resolve_version(cfg: &EmulatorConfig, requested: &str) -> Option<String> {
    let r = requested.trim();
    if r.is_empty() || r == "-" {
        return Some(cfg.default_version.clone());
    }
    let newest =
        |it: &mut dyn Iterator<Item = &String>| it.max_by(|a, b| version_cmp(a, b)).cloned();
    if r == "latest" {
        return newest(&mut cfg.versions.iter());
    }
    if cfg.versions.iter().any(|v| v == r) {
        return Some(r.to_string());
    }
    newest(
        &mut cfg
            .versions
            .iter()
            .filter(|v| v.starts_with(&format!("{r}.")) || v.starts_with(&format!("{r}-"))),
    )
}

fn short_hash(parts: &[&str]) -> String {
    sha256_hex(parts)[..8].to_string()
}

/// The `goog-gke-accelerator-type` for a pool, if it has accelerators.
fn accelerator_type(config: &Map<String, Value>) -> Option<String> {
    let machine = config
        .get("machineType")
        .and_then(Value::as_str)
        .unwrap_or("");
    let tpu = [
        ("ct4p-", "tpu-v4-podslice"),
        ("ct5lp-", "tpu-v5-lite-podslice"),
        ("ct5l-", "tpu-v5-lite-device"),
        ("ct5p-", "tpu-v5p-slice"),
        ("ct6e-", "tpu-v6e-slice"),
        ("tpu7x-", "tpu7x"),
    ];
    if let Some((_, t)) = tpu.iter().find(|(p, _)| machine.starts_with(p)) {
        return Some(t.to_string());
    }
    config
        .get("accelerators")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|a| a.get("acceleratorType"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

pub fn is_tpu_machine(machine: &str) -> bool {
    machine.starts_with("ct") || machine.starts_with("tpu")
}

fn flag(m: &Map<String, Value>, pointer: &str) -> bool {
    Value::Object(m.clone())
        .pointer(pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Context a node pool inherits from its cluster.
pub struct PoolContext<'a> {
    pub project: &'a str,
    pub cluster: &'a str,
    pub cluster_json: &'a Value,
    pub master_version: &'a str,
}

/// Fills a new node pool's server defaults (in place). Returns the initial node count.
pub fn fill_pool(
    cfg: &EmulatorConfig,
    ctx: &PoolContext<'_>,
    pool: &mut Map<String, Value>,
    path: &str,
) -> Result<i64, ApiError> {
    let name = pool
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    check_name(&format!("{path}.name"), &name)?;
    let initial = pool
        .get("initialNodeCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if initial < 0 {
        return Err(ApiError::invalid(format!(
            "Node pool \"{name}\": initial_node_count must be non-negative."
        )));
    }
    let version = pool_version(cfg, ctx.master_version, pool)?;
    pool.insert("version".into(), json!(version));

    let cluster_locations: Vec<Value> = ctx
        .cluster_json
        .get("locations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    default_key(pool, "locations", Value::Array(cluster_locations));
    let locations: Vec<String> = pool
        .get("locations")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|z| z.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();

    let queued = flag(pool, "/queuedProvisioning/enabled");
    let flex_start = fill_node_config(ctx, obj_at(pool, "config"), queued);
    match pool.get_mut("management") {
        None => {
            // Flex-start nodes are not repaired: they are replaced by new requests.
            pool.insert(
                "management".into(),
                json!({"autoUpgrade": true, "autoRepair": !flex_start}),
            );
        }
        Some(_) => check_auto_upgrade(ctx.cluster_json, pool.get("management"))?,
    }
    if let Some(a) = pool.get_mut("autoscaling") {
        check_autoscaling(&name, a)?;
    }
    default_key(pool, "maxPodsConstraint", json!({"maxPodsPerNode": "110"}));
    default_key(pool, "podIpv4CidrSize", json!(24));
    let short_lived = flex_start || queued;
    default_key(
        pool,
        "upgradeSettings",
        if short_lived {
            json!({"strategy": "SHORT_LIVED"})
        } else {
            json!({"maxSurge": 1, "strategy": "SURGE"})
        },
    );
    fill_pool_links(ctx, pool, &name, &locations);
    pool.insert("status".into(), json!("PROVISIONING"));
    pool.remove("statusMessage");
    pool.remove("conditions");
    pool.remove("etag");
    Ok(initial)
}

/// A new node pool's version: the master's (`master_version`), or a resolved alias that is not
/// newer than it.
pub fn pool_version(
    cfg: &EmulatorConfig,
    master_version: &str,
    pool: &Map<String, Value>,
) -> Result<String, ApiError> {
    Ok(match pool.get("version").and_then(Value::as_str) {
        None | Some("") | Some("-") => master_version.to_string(),
        Some(v) => {
            let r = resolve_version(cfg, v).ok_or_else(|| {
                ApiError::invalid(format!("Node version \"{v}\" is unsupported."))
            })?;
            if version_cmp(&r, master_version).is_gt() {
                return Err(ApiError::invalid(format!(
                    "Node version \"{r}\" must not be newer than the master version \"{master_version}\"."
                )));
            }
            r
        }
    })
}

/// Fills a new node pool's node config defaults, and the labels GKE adds (provisioning model,
/// accelerator) and the queued-provisioning taint (`queued`). Returns whether the pool is
/// flex-start.
fn fill_node_config(ctx: &PoolContext<'_>, config: &mut Map<String, Value>, queued: bool) -> bool {
    default_key(config, "machineType", json!("e2-medium"));
    default_key(config, "diskSizeGb", json!(100));
    default_key(config, "diskType", json!("pd-balanced"));
    default_key(config, "imageType", json!("COS_CONTAINERD"));
    if config
        .get("oauthScopes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        // "If unspecified, no scopes are added, unless Cloud Logging or Cloud Monitoring are
        // enabled, in which case their required scopes will be added." (NodeConfig proto)
        config.insert(
            "oauthScopes".into(),
            json!([
                "https://www.googleapis.com/auth/logging.write",
                "https://www.googleapis.com/auth/monitoring"
            ]),
        );
    }
    default_key(config, "serviceAccount", json!("default"));
    obj_at(config, "metadata")
        .entry("disable-legacy-endpoints")
        .or_insert(json!("true"));
    default_key(
        config,
        "shieldedInstanceConfig",
        json!({"enableIntegrityMonitoring": true}),
    );
    if !config.contains_key("gcfsConfig")
        && let Some(g) = ctx
            .cluster_json
            .pointer("/nodePoolDefaults/nodeConfigDefaults/gcfsConfig")
    {
        config.insert("gcfsConfig".into(), g.clone());
    }
    config.insert(
        "effectiveCgroupMode".into(),
        json!("EFFECTIVE_CGROUP_MODE_V2"),
    );
    let flex_start = config.get("flexStart").and_then(Value::as_bool) == Some(true);
    let spot = config.get("spot").and_then(Value::as_bool) == Some(true);
    let preemptible = config.get("preemptible").and_then(Value::as_bool) == Some(true);
    let accel = accelerator_type(config);
    let labels = obj_at(config, "resourceLabels");
    let model = if spot {
        "spot"
    } else if preemptible {
        "preemptible"
    } else if flex_start {
        "flex-start"
    } else {
        "on-demand"
    };
    labels.insert("goog-gke-node-pool-provisioning-model".into(), json!(model));
    if let Some(a) = accel {
        labels.insert("goog-gke-accelerator-type".into(), json!(a));
    }
    if queued {
        ensure_queued_taint(config);
    }
    flex_start
}

/// A new node pool's pod range, instance groups (one per zone of `locations`) and self link.
fn fill_pool_links(
    ctx: &PoolContext<'_>,
    pool: &mut Map<String, Value>,
    name: &str,
    locations: &[String],
) {
    {
        let net = obj_at(pool, "networkConfig");
        default_key(
            net,
            "podRange",
            json!(format!(
                "gke-{}-pods-{}",
                ctx.cluster,
                short_hash(&["pods", ctx.project, ctx.cluster])
            )),
        );
        default_key(net, "podIpv4CidrBlock", json!("10.96.0.0/14"));
    }
    let hash = short_hash(&["ig", ctx.project, ctx.cluster, name]);
    let igs: Vec<Value> = locations
        .iter()
        .map(|z| {
            json!(format!(
                "https://www.googleapis.com/compute/v1/projects/{}/zones/{z}/instanceGroupManagers/gke-{}-{}-{hash}-grp",
                ctx.project,
                truncate(ctx.cluster, 20),
                truncate(name, 20),
            ))
        })
        .collect();
    pool.insert("instanceGroupUrls".into(), Value::Array(igs));
    pool.insert(
        "selfLink".into(),
        json!(format!(
            "https://container.googleapis.com/v1/projects/{}/locations/{}/clusters/{}/nodePools/{name}",
            ctx.project,
            ctx.cluster_json
                .get("location")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            ctx.cluster
        )),
    );
}

fn truncate(s: &str, n: usize) -> &str {
    &s[..s.len().min(n)]
}

/// Adds the `cloud.google.com/gke-queued=true:NoSchedule` taint GKE puts on queued-provisioning
/// nodes, unless present.
pub fn ensure_queued_taint(config: &mut Map<String, Value>) {
    let taints = config
        .entry("taints")
        .or_insert_with(|| Value::Array(vec![]));
    if !taints.is_array() {
        *taints = Value::Array(vec![]);
    }
    let list = taints.as_array_mut().expect("array");
    if !list
        .iter()
        .any(|t| t.get("key").and_then(Value::as_str) == Some(QUEUED_TAINT))
    {
        list.push(json!({"key": QUEUED_TAINT, "value": "true", "effect": "NO_SCHEDULE"}));
    }
}

/// Node auto-upgrade cannot be turned off in a cluster enrolled in a release channel.
pub fn check_auto_upgrade(cluster: &Value, management: Option<&Value>) -> Result<(), ApiError> {
    let channel = cluster
        .pointer("/releaseChannel/channel")
        .and_then(Value::as_str)
        .unwrap_or("UNSPECIFIED");
    let auto_upgrade = management
        .and_then(|m| m.get("autoUpgrade"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if channel != "UNSPECIFIED" && !auto_upgrade {
        return Err(ApiError::invalid(format!(
            "Auto_upgrade cannot be false when release_channel {channel} is set."
        )));
    }
    Ok(())
}

/// Validates `NodePoolAutoscaling` and fills `locationPolicy`.
pub fn check_autoscaling(pool: &str, a: &mut Value) -> Result<(), ApiError> {
    let get = |k: &str| a.get(k).and_then(Value::as_i64).unwrap_or(0);
    let enabled = a.get("enabled").and_then(Value::as_bool) == Some(true);
    if !enabled {
        return Ok(());
    }
    let (min, max, tmin, tmax) = (
        get("minNodeCount"),
        get("maxNodeCount"),
        get("totalMinNodeCount"),
        get("totalMaxNodeCount"),
    );
    if (min > 0 || max > 0) && (tmin > 0 || tmax > 0) {
        return Err(ApiError::invalid(format!(
            "Node pool \"{pool}\": autoscaling limits must be either per zone \
             (min_node_count/max_node_count) or total (total_min_node_count/total_max_node_count), not both."
        )));
    }
    if min < 0 || max < 0 || tmin < 0 || tmax < 0 {
        return Err(ApiError::invalid(format!(
            "Node pool \"{pool}\": autoscaling node counts must be non-negative."
        )));
    }
    if min > max || tmin > tmax {
        return Err(ApiError::invalid(format!(
            "Node pool \"{pool}\": the maximum node count must be greater than or equal to the minimum node count."
        )));
    }
    if max == 0 && tmax == 0 {
        return Err(ApiError::invalid(format!(
            "Node pool \"{pool}\": max_node_count must be greater than zero when autoscaling is enabled."
        )));
    }
    if let Some(o) = a.as_object_mut() {
        default_key(o, "locationPolicy", json!("BALANCED"));
    }
    Ok(())
}

/// Fills a new cluster's server defaults (in place; node pools are handled separately).
pub fn fill_cluster(
    cfg: &EmulatorConfig,
    project: &str,
    location: &str,
    cluster: &mut Map<String, Value>,
    now: u64,
) -> Result<(), ApiError> {
    let name = fill_cluster_identity(cfg, project, location, cluster, now)?;
    let region = region_of(location);
    fill_cluster_settings(cfg, project, &name, &region, cluster);
    fill_cluster_endpoints(cfg, project, location, &name, &region, cluster);
    cluster.remove("nodeConfig");
    cluster.remove("initialNodeCount");
    cluster.remove("labelFingerprint");
    cluster.remove("etag");
    cluster.remove("currentNodeCount");
    Ok(())
}

/// A new cluster's name (checked), version, zones, links, id and creation time; returns the name.
fn fill_cluster_identity(
    cfg: &EmulatorConfig,
    project: &str,
    location: &str,
    cluster: &mut Map<String, Value>,
    now: u64,
) -> Result<String, ApiError> {
    let name = cluster
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    check_name("cluster.name", &name)?;
    let requested = cluster
        .get("initialClusterVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let master = resolve_version(cfg, &requested).ok_or_else(|| {
        ApiError::invalid(format!("Master version \"{requested}\" is unsupported."))
    })?;
    if requested.is_empty() {
        cluster.insert("initialClusterVersion".into(), json!(master));
    }
    cluster.insert("currentMasterVersion".into(), json!(master));
    let zones: Vec<Value> = if is_zone(location) {
        vec![json!(location)]
    } else {
        ["a", "b", "c"]
            .iter()
            .map(|z| json!(format!("{location}-{z}")))
            .collect()
    };
    default_key(cluster, "locations", Value::Array(zones));
    cluster.insert("location".into(), json!(location));
    cluster.insert("zone".into(), json!(location));
    cluster.insert(
        "selfLink".into(),
        json!(format!(
            "https://container.googleapis.com/v1/projects/{project}/locations/{location}/clusters/{name}"
        )),
    );
    cluster.insert(
        "id".into(),
        json!(sha256_hex(&["cluster-id", project, location, &name, &now.to_string()])[..32]),
    );
    cluster.insert("createTime".into(), json!(rfc3339(now)));
    cluster.insert("status".into(), json!("PROVISIONING"));
    cluster.remove("statusMessage");
    cluster.remove("endpoint");
    Ok(name)
}

/// A new cluster's network, services, add-ons, release channel and security defaults.
fn fill_cluster_settings(
    cfg: &EmulatorConfig,
    project: &str,
    name: &str,
    region: &str,
    cluster: &mut Map<String, Value>,
) {
    default_key(cluster, "network", json!("default"));
    default_key(cluster, "subnetwork", json!("default"));
    default_key(cluster, "clusterIpv4Cidr", json!("10.96.0.0/14"));
    cluster.insert("servicesIpv4Cidr".into(), json!("34.118.224.0/20"));
    cluster.insert("nodeIpv4CidrSize".into(), json!(24));
    default_key(
        cluster,
        "loggingService",
        json!("logging.googleapis.com/kubernetes"),
    );
    default_key(
        cluster,
        "monitoringService",
        json!("monitoring.googleapis.com/kubernetes"),
    );
    {
        let addons = obj_at(cluster, "addonsConfig");
        default_key(addons, "httpLoadBalancing", json!({}));
        default_key(addons, "horizontalPodAutoscaling", json!({}));
        default_key(addons, "kubernetesDashboard", json!({"disabled": true}));
        default_key(addons, "networkPolicyConfig", json!({"disabled": true}));
        default_key(
            addons,
            "gcePersistentDiskCsiDriverConfig",
            json!({"enabled": true}),
        );
    }
    default_key(cluster, "legacyAbac", json!({}));
    default_key(
        cluster,
        "releaseChannel",
        json!({"channel": cfg.default_channel}),
    );
    default_key(cluster, "shieldedNodes", json!({"enabled": true}));
    default_key(
        cluster,
        "databaseEncryption",
        json!({"state": "DECRYPTED", "currentState": "CURRENT_STATE_DECRYPTED"}),
    );
    {
        let ip = obj_at(cluster, "ipAllocationPolicy");
        default_key(ip, "useIpAliases", json!(true));
        default_key(
            ip,
            "clusterSecondaryRangeName",
            json!(format!(
                "gke-{name}-pods-{}",
                short_hash(&["pods", project, name])
            )),
        );
        default_key(ip, "clusterIpv4Cidr", json!("10.96.0.0/14"));
        default_key(ip, "clusterIpv4CidrBlock", json!("10.96.0.0/14"));
        default_key(ip, "servicesIpv4Cidr", json!("34.118.224.0/20"));
        default_key(ip, "servicesIpv4CidrBlock", json!("34.118.224.0/20"));
        default_key(ip, "stackType", json!("IPV4"));
    }
    {
        let net = obj_at(cluster, "networkConfig");
        default_key(
            net,
            "network",
            json!(format!("projects/{project}/global/networks/default")),
        );
        default_key(
            net,
            "subnetwork",
            json!(format!(
                "projects/{project}/regions/{region}/subnetworks/default"
            )),
        );
        default_key(net, "defaultSnatStatus", json!({}));
    }
    default_key(
        cluster,
        "loggingConfig",
        json!({"componentConfig": {"enableComponents": ["SYSTEM_COMPONENTS", "WORKLOADS"]}}),
    );
    default_key(
        cluster,
        "monitoringConfig",
        json!({"componentConfig": {"enableComponents": ["SYSTEM_COMPONENTS"]},
               "managedPrometheusConfig": {"enabled": true}}),
    );
}

/// A new cluster's CA certificate and control plane endpoints.
fn fill_cluster_endpoints(
    cfg: &EmulatorConfig,
    project: &str,
    location: &str,
    name: &str,
    region: &str,
    cluster: &mut Map<String, Value>,
) {
    {
        let ca = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            cfg.cluster_ca_pem.as_bytes(),
        );
        let auth = obj_at(cluster, "masterAuth");
        auth.insert("clusterCaCertificate".into(), json!(ca));
    }
    {
        let cp = obj_at(cluster, "controlPlaneEndpointsConfig");
        let dns = obj_at(cp, "dnsEndpointConfig");
        dns.insert(
            "endpoint".into(),
            json!(format!(
                "gke-{}-{}.{region}.gke.goog",
                short_hash(&["dns", project, location, name]),
                project_number(project)
            )),
        );
        default_key(dns, "allowExternalTraffic", json!(false));
        let ip = obj_at(cp, "ipEndpointsConfig");
        default_key(ip, "enabled", json!(true));
        default_key(ip, "enablePublicEndpoint", json!(true));
        default_key(ip, "globalAccess", json!(false));
        ip.insert("privateEndpoint".into(), json!("10.128.0.2"));
    }
}

/// Once the cluster is up: its endpoint.
pub fn cluster_ready(cfg: &EmulatorConfig, cluster: &mut Value) {
    let ip_enabled = cluster
        .pointer("/controlPlaneEndpointsConfig/ipEndpointsConfig/enabled")
        .and_then(Value::as_bool)
        != Some(false);
    let Some(o) = cluster.as_object_mut() else {
        return;
    };
    if ip_enabled {
        o.insert("endpoint".into(), json!(cfg.cluster_endpoint));
        let cp = obj_at(o, "controlPlaneEndpointsConfig");
        let ip = obj_at(cp, "ipEndpointsConfig");
        ip.insert("publicEndpoint".into(), json!(cfg.cluster_endpoint));
    }
}
