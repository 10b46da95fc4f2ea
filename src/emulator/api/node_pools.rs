//! The node-pool methods: list, get, create, update, setAutoscaling, setSize, setManagement,
//! delete.

use serde_json::{Map, Value, json};

use super::labels::check_labels;
use super::pool_rules::{check_existing_pool, check_pool_rules};
use super::{
    Ctx, PointerBool, Reply, check_etag, check_idle, find_cluster, find_pool, parse, start,
    stockout_failure,
};
use crate::emulator::defaults::{
    PoolContext, check_auto_upgrade, check_autoscaling, check_name, ensure_queued_taint, fill_pool,
    pool_version, resolve_version, version_cmp,
};
use crate::emulator::faults::stockout_message;
use crate::emulator::rpc::ApiError;
use crate::emulator::state::{ClusterRec, Effect, PoolRec, State};
use crate::emulator::util::{obj_at, sha256_hex};
use crate::emulator::wire::SCHEMA;

pub(super) fn list_pools(st: &State, p: &str, l: &str, c: &str) -> Result<Reply, ApiError> {
    let rec = find_cluster(st, p, l, c)?;
    let key = rec.key();
    let pools: Vec<Value> = rec.pools.iter().map(|x| x.view(&key)).collect();
    Ok(("ListNodePoolsResponse", json!({ "nodePools": pools })))
}

pub(super) fn get_pool(st: &State, p: &str, l: &str, c: &str, np: &str) -> Result<Reply, ApiError> {
    let rec = find_cluster(st, p, l, c)?;
    let pool = find_pool(rec, np)?;
    Ok(("NodePool", pool.view(&rec.key())))
}

pub(super) fn create_pool(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    find_cluster(st, p, l, c)?;
    let mut req = parse("CreateNodePoolRequest", body)?;
    let Some(Value::Object(mut pool)) = req.remove("nodePool") else {
        return Err(ApiError::invalid_field(
            "node_pool",
            "Node pool must be specified.",
        ));
    };
    let name = pool
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    check_name("node_pool.name", &name)?;
    let rec = find_cluster(st, p, l, c)?;
    if rec.pool(&name).is_some() {
        return Err(ApiError::already_exists(&format!(
            "{}/nodePools/{name}",
            rec.key()
        )));
    }
    let master = rec.json["currentMasterVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let version = pool_version(ctx.cfg, &master, &pool)?;
    check_pool_rules(ctx.cfg, &Value::Object(pool.clone()), &version)?;
    check_idle(st, p, l, c)?;
    let rec = st.cluster(p, l, c).expect("checked");
    let pctx = PoolContext {
        project: p,
        cluster: c,
        cluster_json: &rec.json,
        master_version: &master,
    };
    let count = fill_pool(ctx.cfg, &pctx, &mut pool, "node_pool")?;
    let zone = pool
        .get("locations")
        .and_then(|z| z.get(0))
        .and_then(Value::as_str)
        .unwrap_or(l)
        .to_string();
    let instance = format!(
        "gke-{}-{}-{}",
        &c[..c.len().min(20)],
        &name[..name.len().min(20)],
        &sha256_hex(&[c, &name])[..8]
    );
    let rec = st.cluster_mut(p, l, c).expect("checked");
    rec.pools.push(PoolRec {
        json: Value::Object(pool),
        node_count: count,
        generation: 1,
    });
    rec.touch();
    let failure = ctx.stockout.as_ref().map(|m| {
        stockout_failure(
            m.clone()
                .unwrap_or_else(|| stockout_message(&zone, &instance)),
        )
    });
    start(
        st,
        ctx,
        p,
        l,
        c,
        Some(&name),
        "CREATE_NODE_POOL",
        Effect::PoolCreated,
        failure,
    )
}

/// Common start of the node-pool mutations: the pool must exist and the cluster be idle.
fn pool_mutation<'a>(
    st: &'a mut State,
    p: &str,
    l: &str,
    c: &str,
    np: &str,
) -> Result<&'a mut ClusterRec, ApiError> {
    let rec = find_cluster(st, p, l, c)?;
    find_pool(rec, np)?;
    check_idle(st, p, l, c)?;
    Ok(st.cluster_mut(p, l, c).expect("checked"))
}

const POOL_PATH_FIELDS: [&str; 6] = [
    "projectId",
    "zone",
    "clusterId",
    "nodePoolId",
    "name",
    "etag",
];

/// UpdateNodePoolRequest's rollout strategy: it says how to update, not what.
const POOL_UPDATE_MODE: &str = "nodeConfigUpdateMode";

#[allow(clippy::too_many_arguments)]
pub(super) fn update_pool(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    np: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    {
        let rec = find_cluster(st, p, l, c)?;
        find_pool(rec, np)?;
    }
    let req = parse("UpdateNodePoolRequest", body)?;
    if req
        .keys()
        .all(|k| POOL_PATH_FIELDS.contains(&k.as_str()) || k == POOL_UPDATE_MODE)
    {
        return Err(ApiError::invalid("Must specify a field to update."));
    }
    let rec = pool_mutation(st, p, l, c, np)?;
    let key = rec.key();
    let master = rec.json["currentMasterVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let pool = rec.pool_mut(np).expect("checked");
    check_etag(
        req.get("etag"),
        &pool.etag(&key),
        &format!("node pool {np}"),
    )?;
    let mut work = pool.json.clone();
    let mut op_type = "UPDATE_CLUSTER";
    for (k, v) in &req {
        let w = work.as_object_mut().expect("object");
        if let Some(upgrade) = update_pool_field(ctx, &master, w, k, v)? {
            op_type = upgrade;
        }
    }
    check_existing_pool(ctx.cfg, &work)?;
    work["status"] = json!("RECONCILING");
    pool.json = work;
    pool.touch();
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        Some(np),
        op_type,
        Effect::PoolSettled,
        None,
    )
}

/// The operation type of a node pool update that upgrades the nodes.
const UPGRADE_NODES: &str = "UPGRADE_NODES";

/// Applies one field `k` of an UpdateNodePoolRequest to the pool's JSON `w`; returns
/// [`UPGRADE_NODES`] when the field upgrades the nodes.
fn update_pool_field(
    ctx: &Ctx<'_>,
    master: &str,
    w: &mut Map<String, Value>,
    k: &str,
    v: &Value,
) -> Result<Option<&'static str>, ApiError> {
    match k {
        k if POOL_PATH_FIELDS.contains(&k) => {}
        // How GKE rolls the change out (VMs recreated, or updated live without a drain):
        // the emulator has no VMs, so every mode ends in the same pool.
        POOL_UPDATE_MODE => {}
        "nodeVersion" => {
            w.insert("version".into(), json!(node_version(ctx, master, v)?));
            return Ok(Some(UPGRADE_NODES));
        }
        "imageType" | "machineType" | "diskType" => {
            obj_at(w, "config").insert(k.to_string(), v.clone());
            return Ok(Some(UPGRADE_NODES));
        }
        "diskSizeGb" => {
            let n: i64 = v.as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
            obj_at(w, "config").insert("diskSizeGb".into(), json!(n));
            return Ok(Some(UPGRADE_NODES));
        }
        "image" | "imageProject" => {
            return Err(ApiError::unimplemented(format!(
                "The emulator does not implement UpdateNodePoolRequest.{k}."
            )));
        }
        "locations" => {
            if v.as_array().is_none_or(Vec::is_empty) {
                return Err(ApiError::invalid("Locations must not be empty."));
            }
            w.insert("locations".into(), v.clone());
        }
        "upgradeSettings" => {
            let cur = obj_at(w, "upgradeSettings");
            for (a, b) in v.as_object().into_iter().flatten() {
                cur.insert(a.clone(), b.clone());
            }
        }
        "tags" => set_or_remove(obj_at(w, "config"), "tags", v.get("tags")),
        "labels" => set_or_remove(obj_at(w, "config"), "labels", v.get("labels")),
        "taints" => {
            let queued = w.pointer_bool("/queuedProvisioning/enabled");
            let cfg = obj_at(w, "config");
            set_or_remove(cfg, "taints", v.get("taints"));
            if queued {
                ensure_queued_taint(cfg);
            }
        }
        "resourceLabels" => merge_resource_labels(obj_at(w, "config"), v)?,
        "nodeNetworkConfig" => {
            let cur = obj_at(w, "networkConfig");
            for (a, b) in v.as_object().into_iter().flatten() {
                cur.insert(a.clone(), b.clone());
            }
        }
        "queuedProvisioning" => {
            w.insert("queuedProvisioning".into(), v.clone());
            if v.get("enabled").and_then(Value::as_bool) == Some(true) {
                ensure_queued_taint(obj_at(w, "config"));
            }
        }
        "nodeDrainConfig" | "maintenancePolicy" => {
            w.insert(k.to_string(), v.clone());
        }
        other => match SCHEMA.message("NodeConfig").field(other) {
            Some(f) if !f.read_only => {
                obj_at(w, "config").insert(f.json.clone(), v.clone());
            }
            _ => {
                return Err(ApiError::unimplemented(format!(
                    "The emulator does not implement UpdateNodePoolRequest.{other}."
                )));
            }
        },
    }
    Ok(None)
}

/// The node version an update asks for (`-` or empty: the master's), not newer than the
/// master's.
fn node_version(ctx: &Ctx<'_>, master: &str, v: &Value) -> Result<String, ApiError> {
    let want = v.as_str().unwrap_or("-");
    let r = if want == "-" || want.is_empty() {
        master.to_string()
    } else {
        resolve_version(ctx.cfg, want)
            .ok_or_else(|| ApiError::invalid(format!("Node version \"{want}\" is unsupported.")))?
    };
    if version_cmp(&r, master).is_gt() {
        return Err(ApiError::invalid(format!(
            "Node version \"{r}\" must not be newer than the master version \"{master}\"."
        )));
    }
    Ok(r)
}

/// Sets the node config's resource labels to the update's, keeping GKE's own (`goog-gke-`).
fn merge_resource_labels(cfg: &mut Map<String, Value>, v: &Value) -> Result<(), ApiError> {
    let new = v
        .get("labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    check_labels(&new)?;
    let mut merged: Map<String, Value> = cfg
        .get("resourceLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.starts_with("goog-gke-"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    for (a, b) in new {
        if !a.starts_with("goog-gke-") {
            merged.insert(a, b);
        }
    }
    cfg.insert("resourceLabels".into(), Value::Object(merged));
    Ok(())
}

fn set_or_remove(obj: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    match v {
        Some(v) if !v.is_null() => {
            obj.insert(key.to_string(), v.clone());
        }
        _ => {
            obj.remove(key);
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn set_autoscaling(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    np: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    let req = parse("SetNodePoolAutoscalingRequest", body)?;
    let mut a = req.get("autoscaling").cloned().unwrap_or_else(|| json!({}));
    check_autoscaling(np, &mut a)?;
    {
        let rec = find_cluster(st, p, l, c)?;
        let mut after = find_pool(rec, np)?.json.clone();
        after["autoscaling"] = a.clone();
        check_existing_pool(ctx.cfg, &after)?;
    }
    let rec = pool_mutation(st, p, l, c, np)?;
    let pool = rec.pool_mut(np).expect("checked");
    pool.json["autoscaling"] = a;
    pool.json["status"] = json!("RECONCILING");
    pool.touch();
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        Some(np),
        "UPDATE_CLUSTER",
        Effect::PoolSettled,
        None,
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn set_size(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    np: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    let req = parse("SetNodePoolSizeRequest", body)?;
    let n = req.get("nodeCount").and_then(Value::as_i64).unwrap_or(0);
    if n < 0 {
        return Err(ApiError::invalid_field(
            "node_count",
            "node_count must be non-negative.",
        ));
    }
    let rec = pool_mutation(st, p, l, c, np)?;
    let pool = rec.pool_mut(np).expect("checked");
    pool.node_count = n;
    pool.json["status"] = json!("RECONCILING");
    pool.touch();
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        Some(np),
        "SET_NODE_POOL_SIZE",
        Effect::PoolSettled,
        None,
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn set_management(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    np: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    let req = parse("SetNodePoolManagementRequest", body)?;
    let m = req.get("management").cloned().unwrap_or_else(|| json!({}));
    {
        let rec = find_cluster(st, p, l, c)?;
        let mut after = find_pool(rec, np)?.json.clone();
        check_auto_upgrade(&rec.json, Some(&m))?;
        after["management"] = m.clone();
        check_existing_pool(ctx.cfg, &after)?;
    }
    let rec = pool_mutation(st, p, l, c, np)?;
    let pool = rec.pool_mut(np).expect("checked");
    pool.json["management"] = m;
    pool.json["status"] = json!("RECONCILING");
    pool.touch();
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        Some(np),
        "SET_NODE_POOL_MANAGEMENT",
        Effect::PoolSettled,
        None,
    )
}

pub(super) fn delete_pool(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    np: &str,
) -> Result<Reply, ApiError> {
    let rec = pool_mutation(st, p, l, c, np)?;
    let pool = rec.pool_mut(np).expect("checked");
    pool.json["status"] = json!("STOPPING");
    pool.json.as_object_mut().map(|o| o.remove("statusMessage"));
    pool.touch();
    rec.touch();
    start(
        st,
        ctx,
        p,
        l,
        c,
        Some(np),
        "DELETE_NODE_POOL",
        Effect::PoolDeleted,
        None,
    )
}
