//! The cluster methods: list, get, create, update, setResourceLabels, setAddons, delete.

use serde_json::{Map, Value, json};

use super::cluster_rules::{check_cluster_autoscaling, updated_cluster_autoscaling};
use super::labels::check_labels;
use super::pool_rules::{check_existing_pool, check_pool_rules};
use super::{
    Ctx, PointerBool, Reply, check_etag, check_idle, find_cluster, find_pool, parse, start,
    stockout_failure,
};
use crate::emulator::defaults::{
    PoolContext, check_autoscaling, check_location, check_name, fill_cluster, fill_pool,
    pool_version, resolve_version, version_cmp,
};
use crate::emulator::rpc::ApiError;
use crate::emulator::state::{ClusterRec, Effect, PoolRec, State, cluster_key};
use crate::emulator::util::obj_at;
use crate::emulator::wire::SCHEMA;

pub(super) fn list_clusters(st: &State, p: &str, l: &str) -> Result<Reply, ApiError> {
    if l != "-" {
        check_location(l)?;
    }
    let clusters: Vec<Value> = st
        .clusters
        .values()
        .filter(|c| c.project == p && (l == "-" || c.location == l))
        .map(ClusterRec::view)
        .collect();
    Ok(("ListClustersResponse", json!({ "clusters": clusters })))
}

pub(super) fn get_cluster(st: &State, p: &str, l: &str, c: &str) -> Result<Reply, ApiError> {
    let rec = find_cluster(st, p, l, c)?;
    Ok(("Cluster", rec.view()))
}

pub(super) fn create_cluster(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    check_location(l)?;
    let mut req = parse("CreateClusterRequest", body)?;
    let Some(Value::Object(mut cluster)) = req.remove("cluster") else {
        return Err(ApiError::invalid_field(
            "cluster",
            "Cluster must be specified.",
        ));
    };
    let name = cluster
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    check_name("cluster.name", &name)?;
    if st.cluster(p, l, &name).is_some() {
        return Err(ApiError::already_exists(&cluster_key(p, l, &name)));
    }
    if let Some(autoscaling) = cluster.get("autoscaling") {
        check_cluster_autoscaling(autoscaling, "cluster.autoscaling")?;
    }
    let pools = initial_pools(&mut cluster)?;
    check_unique_pool_names(&pools)?;
    fill_cluster(ctx.cfg, p, l, &mut cluster, ctx.now)?;
    let cluster_json = Value::Object(cluster);
    let recs = initial_pool_recs(ctx, p, &name, &cluster_json, pools)?;
    let zone = cluster_json["locations"][0]
        .as_str()
        .unwrap_or(l)
        .to_string();
    st.clusters.insert(
        cluster_key(p, l, &name),
        ClusterRec {
            project: p.into(),
            location: l.into(),
            name: name.clone(),
            json: cluster_json,
            pools: recs,
            generation: 1,
        },
    );
    let failure = ctx.stockout.as_ref().map(|m| {
        stockout_failure(m.clone().unwrap_or_else(|| {
            format!(
                "Try a different location, or try again later: Google Compute Engine does not \
                 have enough resources available to fulfill request: {zone}."
            )
        }))
    });
    start(
        st,
        ctx,
        p,
        l,
        &name,
        None,
        "CREATE_CLUSTER",
        Effect::ClusterCreated,
        failure,
    )
}

/// The node pools a new cluster is created with: the request's, or (neither any nor Autopilot)
/// a `default-pool` of the cluster's `initialNodeCount` nodes and `nodeConfig`.
fn initial_pools(cluster: &mut Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    let initial = cluster
        .get("initialNodeCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let node_config = cluster.get("nodeConfig").cloned();
    let mut pools: Vec<Value> = match cluster.remove("nodePools") {
        Some(Value::Array(a)) => a,
        _ => vec![],
    };
    let autopilot = cluster.pointer_bool("/autopilot/enabled");
    if pools.is_empty() && !autopilot {
        if initial <= 0 {
            return Err(ApiError::invalid_field(
                "cluster.initial_node_count",
                "Cluster.initial_node_count must be greater than zero.",
            ));
        }
        let mut pool = json!({"name": "default-pool", "initialNodeCount": initial});
        if let Some(cfg) = node_config {
            pool["config"] = cfg;
        }
        pools.push(pool);
    }
    Ok(pools)
}

/// A new cluster's node pools have unique names.
fn check_unique_pool_names(pools: &[Value]) -> Result<(), ApiError> {
    let mut names = std::collections::BTreeSet::new();
    for pool in pools {
        let n = pool.get("name").and_then(Value::as_str).unwrap_or("");
        if !names.insert(n.to_string()) {
            return Err(ApiError::invalid(format!(
                "Node pool names must be unique; \"{n}\" is used more than once."
            )));
        }
    }
    Ok(())
}

/// A new cluster's node pools, each checked against the pool rules and its server defaults
/// filled.
fn initial_pool_recs(
    ctx: &Ctx<'_>,
    p: &str,
    name: &str,
    cluster_json: &Value,
    pools: Vec<Value>,
) -> Result<Vec<PoolRec>, ApiError> {
    let master = cluster_json["currentMasterVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut recs = vec![];
    for (i, pool) in pools.into_iter().enumerate() {
        let Value::Object(mut pool) = pool else {
            continue;
        };
        let version = pool_version(ctx.cfg, &master, &pool)?;
        check_pool_rules(ctx.cfg, &Value::Object(pool.clone()), &version)?;
        let pctx = PoolContext {
            project: p,
            cluster: name,
            cluster_json,
            master_version: &master,
        };
        let count = fill_pool(
            ctx.cfg,
            &pctx,
            &mut pool,
            &format!("cluster.node_pools[{i}]"),
        )?;
        recs.push(PoolRec {
            json: Value::Object(pool),
            node_count: count,
            generation: 1,
        });
    }
    Ok(recs)
}

fn merge_addons(target: &mut Map<String, Value>, addons: &Map<String, Value>) {
    let cur = obj_at(target, "addonsConfig");
    for (k, v) in addons {
        cur.insert(k.clone(), v.clone());
    }
}

fn pool_for_update(rec: &ClusterRec, update: &Map<String, Value>) -> Result<String, ApiError> {
    match update.get("desiredNodePoolId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => {
            find_pool(rec, id)?;
            Ok(id.to_string())
        }
        _ if rec.pools.len() == 1 => Ok(rec.pools[0].name().to_string()),
        _ => Err(ApiError::invalid(
            "Node pool id must be specified if cluster has more than one node pool.",
        )),
    }
}

pub(super) fn update_cluster(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    find_cluster(st, p, l, c)?;
    let req = parse("UpdateClusterRequest", body)?;
    let update = match req.get("update") {
        Some(Value::Object(u)) => u.clone(),
        _ => Map::new(),
    };
    let fields: Vec<&String> = update.keys().filter(|k| *k != "etag").collect();
    if fields.is_empty() {
        return Err(ApiError::invalid("Must specify a field to update."));
    }
    check_idle(st, p, l, c)?;
    let rec = st.cluster_mut(p, l, c).expect("checked");
    check_etag(update.get("etag"), &rec.etag(), &format!("cluster {c}"))?;
    let mut work = rec.clone();
    let mut op_type = "UPDATE_CLUSTER";
    let master = work.json["currentMasterVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for (k, v) in &update {
        op_type = update_cluster_field(ctx, &master, &mut work, &update, k, v, op_type)?;
    }
    // Whatever the update touched (a pool's autoscaling or node version, the zones), every pool
    // must still be one a create would accept.
    for pool in &work.pools {
        check_existing_pool(ctx.cfg, &pool.json)?;
    }
    work.json["status"] = json!("RECONCILING");
    work.touch();
    *st.cluster_mut(p, l, c).expect("checked") = work;
    start(
        st,
        ctx,
        p,
        l,
        c,
        None,
        op_type,
        Effect::ClusterSettled,
        None,
    )
}

/// Applies one field `k` of a ClusterUpdate to the cluster `work`; returns the update's
/// operation type so far (`op_type`), raised to an upgrade of the nodes or the master.
fn update_cluster_field(
    ctx: &Ctx<'_>,
    master: &str,
    work: &mut ClusterRec,
    update: &Map<String, Value>,
    k: &str,
    v: &Value,
    op_type: &'static str,
) -> Result<&'static str, ApiError> {
    match k {
        "etag" | "desiredNodePoolId" => {}
        "desiredNodePoolAutoscaling" => {
            let np = pool_for_update(work, update)?;
            let mut a = v.clone();
            check_autoscaling(&np, &mut a)?;
            let pool = work.pool_mut(&np).expect("checked");
            pool.json["autoscaling"] = a;
            pool.touch();
        }
        "desiredClusterAutoscaling" => {
            let next = updated_cluster_autoscaling(work.json.get("autoscaling"), v);
            check_cluster_autoscaling(&next, "update.desired_cluster_autoscaling")?;
            work.json["autoscaling"] = next;
        }
        "desiredNodeVersion" | "desiredImageType" => {
            update_pool_node(ctx, master, work, update, k, v)?;
            if op_type != "UPGRADE_MASTER" {
                return Ok("UPGRADE_NODES");
            }
        }
        "desiredMasterVersion" => {
            let want = v.as_str().unwrap_or("-");
            let r = resolve_version(ctx.cfg, want).ok_or_else(|| {
                ApiError::invalid(format!("Master version \"{want}\" is unsupported."))
            })?;
            if version_cmp(&r, master).is_lt() {
                return Err(ApiError::invalid(format!(
                    "Master cannot be downgraded from \"{master}\" to \"{r}\"."
                )));
            }
            work.json["currentMasterVersion"] = json!(r);
            return Ok("UPGRADE_MASTER");
        }
        "desiredAddonsConfig" => {
            if let (Some(obj), Some(addons)) = (work.json.as_object_mut(), v.as_object()) {
                merge_addons(obj, addons);
            }
        }
        "desiredGcfsConfig" => {
            if let Some(obj) = work.json.as_object_mut() {
                let d = obj_at(obj_at(obj, "nodePoolDefaults"), "nodeConfigDefaults");
                d.insert("gcfsConfig".into(), v.clone());
            }
        }
        "desiredLocations" => {
            let zones = v.as_array().cloned().unwrap_or_default();
            if zones.is_empty() {
                return Err(ApiError::invalid("Locations must not be empty."));
            }
            work.json["locations"] = Value::Array(zones.clone());
            for pool in &mut work.pools {
                pool.json["locations"] = Value::Array(zones.clone());
                pool.touch();
            }
        }
        other => set_cluster_field(work, other, v)?,
    }
    Ok(op_type)
}

/// `desiredNodeVersion` or `desiredImageType`: set on the node pool the update names.
fn update_pool_node(
    ctx: &Ctx<'_>,
    master: &str,
    work: &mut ClusterRec,
    update: &Map<String, Value>,
    k: &str,
    v: &Value,
) -> Result<(), ApiError> {
    let np = pool_for_update(work, update)?;
    let pool = work.pool_mut(&np).expect("checked");
    if k == "desiredNodeVersion" {
        let want = v.as_str().unwrap_or("-");
        let r = if want == "-" {
            master.to_string()
        } else {
            resolve_version(ctx.cfg, want).ok_or_else(|| {
                ApiError::invalid(format!("Node version \"{want}\" is unsupported."))
            })?
        };
        if version_cmp(&r, master).is_gt() {
            return Err(ApiError::invalid(format!(
                "Node version \"{r}\" must not be newer than the master version \"{master}\"."
            )));
        }
        pool.json["version"] = json!(r);
    } else {
        pool.json["config"]["imageType"] = v.clone();
    }
    pool.touch();
    Ok(())
}

/// Any other `desiredX` field of a ClusterUpdate: the Cluster's field `x`, when it may be set.
fn set_cluster_field(work: &mut ClusterRec, other: &str, v: &Value) -> Result<(), ApiError> {
    let field = other
        .strip_prefix("desired")
        .map(|f| {
            let mut cs = f.chars();
            cs.next()
                .map(|c0| c0.to_ascii_lowercase().to_string() + cs.as_str())
                .unwrap_or_default()
        })
        .unwrap_or_else(|| other.to_string());
    match SCHEMA.message("Cluster").field(&field) {
        Some(f) if !f.read_only => {
            work.json[f.json.as_str()] = v.clone();
        }
        _ => {
            return Err(ApiError::unimplemented(format!(
                "The emulator does not implement ClusterUpdate.{other}."
            )));
        }
    }
    Ok(())
}

pub(super) fn set_resource_labels(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    find_cluster(st, p, l, c)?;
    let req = parse("SetLabelsRequest", body)?;
    let labels = match req.get("resourceLabels") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    check_labels(&labels)?;
    let fp = req
        .get("labelFingerprint")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if fp.is_empty() {
        return Err(ApiError::invalid_field(
            "label_fingerprint",
            "Label fingerprint must be specified: read the cluster and send its labelFingerprint.",
        ));
    }
    check_idle(st, p, l, c)?;
    let rec = st.cluster_mut(p, l, c).expect("checked");
    let current = rec.label_fingerprint();
    if fp != current {
        return Err(ApiError::aborted(format!(
            "Labels could not be set due to fingerprint mismatch: \"{fp}\" is not the current \
             fingerprint of cluster {c}. Read the cluster again and retry."
        )));
    }
    rec.json["resourceLabels"] = Value::Object(labels);
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        None,
        "UPDATE_CLUSTER",
        Effect::ClusterSettled,
        None,
    )
}

pub(super) fn set_addons(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    find_cluster(st, p, l, c)?;
    let req = parse("SetAddonsConfigRequest", body)?;
    let Some(Value::Object(addons)) = req.get("addonsConfig") else {
        return Err(ApiError::invalid_field(
            "addons_config",
            "Addons config must be specified.",
        ));
    };
    check_idle(st, p, l, c)?;
    let rec = st.cluster_mut(p, l, c).expect("checked");
    if let Some(obj) = rec.json.as_object_mut() {
        merge_addons(obj, addons);
    }
    rec.json["status"] = json!("RECONCILING");
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        None,
        "UPDATE_CLUSTER",
        Effect::ClusterSettled,
        None,
    )
}

pub(super) fn delete_cluster(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
) -> Result<Reply, ApiError> {
    check_idle(st, p, l, c)?;
    let rec = st.cluster_mut(p, l, c).expect("checked");
    rec.json["status"] = json!("STOPPING");
    rec.json.as_object_mut().map(|o| o.remove("statusMessage"));
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        None,
        "DELETE_CLUSTER",
        Effect::ClusterDeleted,
        None,
    )
}
