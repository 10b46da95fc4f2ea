//! The container v1 methods: routing and behaviour.

use serde_json::{Map, Value, json};

use super::EmulatorConfig;
use super::defaults::{
    PoolContext, check_auto_upgrade, check_autoscaling, check_location, check_name,
    ensure_queued_taint, fill_cluster, fill_pool, is_tpu_machine, resolve_version, version_cmp,
};
use super::faults::{TPU_FLEX_START_QUEUED, stockout_message};
use super::rpc::ApiError;
use super::state::{ClusterRec, Effect, OpFailure, PoolRec, State, cluster_key};
use super::util::{obj_at, percent_decode};
use super::wire::{SCHEMA, WireError, normalize};

/// A parsed `/v1/...` path.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    Clusters {
        p: String,
        l: String,
    },
    Cluster {
        p: String,
        l: String,
        c: String,
        verb: Option<String>,
    },
    NodePools {
        p: String,
        l: String,
        c: String,
    },
    NodePool {
        p: String,
        l: String,
        c: String,
        np: String,
        verb: Option<String>,
    },
    Operations {
        p: String,
        l: String,
    },
    Operation {
        p: String,
        l: String,
        op: String,
        verb: Option<String>,
    },
}

impl Route {
    pub fn cluster_name(&self) -> Option<&str> {
        match self {
            Route::Cluster { c, .. } | Route::NodePools { c, .. } | Route::NodePool { c, .. } => {
                Some(c)
            }
            _ => None,
        }
    }
}

fn split_verb(seg: &str) -> (String, Option<String>) {
    match seg.split_once(':') {
        Some((n, v)) => (n.to_string(), Some(v.to_string())),
        None => (seg.to_string(), None),
    }
}

/// Parses `/v1/projects/{p}/locations/{l}/...`. axum cannot route `{np}:setSize`, so the last
/// segment is split on `:` here.
pub fn parse_route(path: &str) -> Option<Route> {
    let rest = path.strip_prefix("/v1/")?;
    let segs: Vec<String> = rest.split('/').map(|s| percent_decode(s, false)).collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    if s.iter().any(|x| x.is_empty()) {
        return None;
    }
    let (p, l) = match s.as_slice() {
        ["projects", p, "locations", l, ..] => (p.to_string(), l.to_string()),
        _ => return None,
    };
    Some(match &s[4..] {
        ["clusters"] => Route::Clusters { p, l },
        ["clusters", c] => {
            let (c, verb) = split_verb(c);
            Route::Cluster { p, l, c, verb }
        }
        ["clusters", c, "nodePools"] => Route::NodePools {
            p,
            l,
            c: c.to_string(),
        },
        ["clusters", c, "nodePools", np] => {
            let (np, verb) = split_verb(np);
            Route::NodePool {
                p,
                l,
                c: c.to_string(),
                np,
                verb,
            }
        }
        ["operations"] => Route::Operations { p, l },
        ["operations", op] => {
            let (op, verb) = split_verb(op);
            Route::Operation { p, l, op, verb }
        }
        _ => return None,
    })
}

/// What a handler answers: the message type (for rendering) and its canonical JSON.
pub type Reply = (&'static str, Value);

pub struct Ctx<'a> {
    pub cfg: &'a EmulatorConfig,
    pub now: u64,
    /// `Some(message)` when a stockout fault matched this call.
    pub stockout: Option<Option<String>>,
}

fn wire_err(e: WireError) -> ApiError {
    ApiError::invalid_field(e.path, e.message)
}

fn parse(ty: &str, body: &Value) -> Result<Map<String, Value>, ApiError> {
    match normalize(ty, body).map_err(wire_err)? {
        Value::Object(m) => Ok(m),
        _ => Ok(Map::new()),
    }
}

fn not_allowed(method: &str, path: &str) -> ApiError {
    ApiError::new(
        404,
        "NOT_FOUND",
        format!("Method {method} is not supported on {path}."),
    )
}

/// Dispatches one call. `body` is the parsed JSON body (`{}` when empty).
pub fn handle(
    st: &mut State,
    ctx: &Ctx<'_>,
    method: &str,
    route: &Route,
    path: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    match (route, method) {
        (Route::Clusters { p, l }, "GET") => list_clusters(st, p, l),
        (Route::Clusters { p, l }, "POST") => create_cluster(st, ctx, p, l, body),
        (
            Route::Cluster {
                p,
                l,
                c,
                verb: None,
            },
            "GET",
        ) => {
            let rec = find_cluster(st, p, l, c)?;
            Ok(("Cluster", rec.view()))
        }
        (
            Route::Cluster {
                p,
                l,
                c,
                verb: None,
            },
            "PUT",
        ) => update_cluster(st, ctx, p, l, c, body),
        (
            Route::Cluster {
                p,
                l,
                c,
                verb: None,
            },
            "DELETE",
        ) => delete_cluster(st, ctx, p, l, c),
        (
            Route::Cluster {
                p,
                l,
                c,
                verb: Some(v),
            },
            "POST",
        ) => match v.as_str() {
            "setResourceLabels" => set_resource_labels(st, ctx, p, l, c, body),
            "setAddons" => set_addons(st, ctx, p, l, c, body),
            _ => Err(ApiError::unimplemented(format!(
                "The emulator does not implement clusters:{v}."
            ))),
        },
        (Route::NodePools { p, l, c }, "GET") => {
            let rec = find_cluster(st, p, l, c)?;
            let key = rec.key();
            let pools: Vec<Value> = rec.pools.iter().map(|x| x.view(&key)).collect();
            Ok(("ListNodePoolsResponse", json!({ "nodePools": pools })))
        }
        (Route::NodePools { p, l, c }, "POST") => create_pool(st, ctx, p, l, c, body),
        (
            Route::NodePool {
                p,
                l,
                c,
                np,
                verb: None,
            },
            m,
        ) => match m {
            "GET" => {
                let rec = find_cluster(st, p, l, c)?;
                let pool = find_pool(rec, np)?;
                Ok(("NodePool", pool.view(&rec.key())))
            }
            "PUT" => update_pool(st, ctx, p, l, c, np, body),
            "DELETE" => delete_pool(st, ctx, p, l, c, np),
            _ => Err(not_allowed(method, path)),
        },
        (
            Route::NodePool {
                p,
                l,
                c,
                np,
                verb: Some(v),
            },
            "POST",
        ) => match v.as_str() {
            "setAutoscaling" => set_autoscaling(st, ctx, p, l, c, np, body),
            "setSize" => set_size(st, ctx, p, l, c, np, body),
            "setManagement" => set_management(st, ctx, p, l, c, np, body),
            _ => Err(ApiError::unimplemented(format!(
                "The emulator does not implement nodePools:{v}."
            ))),
        },
        (Route::Operations { p, l }, "GET") => {
            let ops: Vec<Value> = st
                .operations
                .iter()
                .filter(|o| &o.project == p && (l == "-" || &o.location == l))
                .map(|o| o.view(ctx.now))
                .collect();
            Ok(("ListOperationsResponse", json!({ "operations": ops })))
        }
        (
            Route::Operation {
                p,
                l,
                op,
                verb: None,
            },
            "GET",
        ) => {
            let o = st.op(p, l, op).ok_or_else(|| {
                ApiError::not_found(&format!("projects/{p}/locations/{l}/operations/{op}"))
            })?;
            Ok(("Operation", o.view(ctx.now)))
        }
        (
            Route::Operation {
                p,
                l,
                op,
                verb: Some(v),
            },
            "POST",
        ) if v == "cancel" => cancel_operation(st, ctx, p, l, op, body),
        _ => Err(not_allowed(method, path)),
    }
}

fn find_cluster<'a>(st: &'a State, p: &str, l: &str, c: &str) -> Result<&'a ClusterRec, ApiError> {
    st.cluster(p, l, c)
        .ok_or_else(|| ApiError::not_found(&cluster_key(p, l, c)))
}

fn find_pool<'a>(rec: &'a ClusterRec, np: &str) -> Result<&'a PoolRec, ApiError> {
    rec.pool(np)
        .ok_or_else(|| ApiError::not_found(&format!("{}/nodePools/{np}", rec.key())))
}

/// 404 when the cluster is missing, 400 CLUSTER_ALREADY_HAS_OPERATION when it is busy.
fn check_idle(st: &State, p: &str, l: &str, c: &str) -> Result<(), ApiError> {
    find_cluster(st, p, l, c)?;
    if let Some(op) = st.busy_op(p, l, c) {
        return Err(ApiError::cluster_busy(&op.name));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn start(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    c: &str,
    pool: Option<&str>,
    op_type: &str,
    effect: Effect,
    failure: Option<OpFailure>,
) -> Result<Reply, ApiError> {
    let name = st.start_op(
        ctx.now,
        ctx.cfg.pending_ms,
        ctx.cfg.running_ms,
        p,
        l,
        c,
        pool,
        op_type,
        effect,
        failure,
    );
    // Zero durations finish at once.
    st.advance(ctx.now, ctx.cfg);
    let op = st.op(p, l, &name).expect("just started");
    Ok(("Operation", op.view(ctx.now)))
}

fn list_clusters(st: &State, p: &str, l: &str) -> Result<Reply, ApiError> {
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

fn tpu_flex_start_queued(pool: &Value) -> bool {
    let machine = pool
        .pointer("/config/machineType")
        .and_then(Value::as_str)
        .unwrap_or("");
    is_tpu_machine(machine)
        && pool.pointer("/config/flexStart").and_then(Value::as_bool) == Some(true)
        && pool
            .pointer("/queuedProvisioning/enabled")
            .and_then(Value::as_bool)
            == Some(true)
}

fn check_pool_rules(cfg: &EmulatorConfig, pool: &Value) -> Result<(), ApiError> {
    if cfg.reject_tpu_flex_start_queued && tpu_flex_start_queued(pool) {
        return Err(ApiError::invalid(TPU_FLEX_START_QUEUED));
    }
    check_dws_rules(pool)
}

/// What flex-start and queued provisioning demand of a pool (DWS): nodes come and go with
/// demand, so the pool autoscales and starts from zero, takes no reservation, is not Spot, and
/// (flex-start) is not auto-repaired. The texts are the emulator's own where GKE's exact wording
/// is not published; the status (400 INVALID_ARGUMENT) and the rules are GKE's.
fn check_dws_rules(pool: &Value) -> Result<(), ApiError> {
    let flag = |p: &str| pool.pointer(p).and_then(Value::as_bool) == Some(true);
    let flex_start = flag("/config/flexStart");
    let queued = flag("/queuedProvisioning/enabled");
    if !flex_start && !queued {
        return Ok(());
    }
    let what = if flex_start {
        "Flex-start node pools"
    } else {
        "Node pools with queued provisioning"
    };
    if !flag("/autoscaling/enabled") {
        return Err(ApiError::invalid_field(
            "node_pool.autoscaling",
            format!("{what} require autoscaling to be enabled: they cannot have a static size."),
        ));
    }
    let min = pool
        .pointer("/autoscaling/minNodeCount")
        .or_else(|| pool.pointer("/autoscaling/totalMinNodeCount"))
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
        .unwrap_or(0);
    if queued && min != 0 {
        return Err(ApiError::invalid_field(
            "node_pool.autoscaling.min_node_count",
            format!("{what} require a minimum node count of 0."),
        ));
    }
    if flag("/config/spot") || flag("/config/preemptible") {
        return Err(ApiError::invalid_field(
            "node_pool.config.spot",
            format!("{what} cannot use Spot or preemptible VMs."),
        ));
    }
    let reservation = pool
        .pointer("/config/reservationAffinity/consumeReservationType")
        .and_then(Value::as_str)
        .unwrap_or("UNSPECIFIED");
    if !matches!(reservation, "NO_RESERVATION" | "UNSPECIFIED") {
        return Err(ApiError::invalid_field(
            "node_pool.config.reservation_affinity.consume_reservation_type",
            format!("{what} require reservation affinity NO_RESERVATION, not {reservation}."),
        ));
    }
    if flex_start && flag("/management/autoRepair") {
        return Err(ApiError::invalid_field(
            "node_pool.management.auto_repair",
            "Flex-start node pools require node auto-repair to be disabled.",
        ));
    }
    Ok(())
}

fn stockout_failure(message: String) -> OpFailure {
    OpFailure {
        code: 8,
        message,
        condition: Some("GCE_STOCKOUT".into()),
        canonical: "RESOURCE_EXHAUSTED".into(),
    }
}

fn create_cluster(
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
    let mut names = std::collections::BTreeSet::new();
    for pool in &pools {
        let n = pool.get("name").and_then(Value::as_str).unwrap_or("");
        if !names.insert(n.to_string()) {
            return Err(ApiError::invalid(format!(
                "Node pool names must be unique; \"{n}\" is used more than once."
            )));
        }
        check_pool_rules(ctx.cfg, pool)?;
    }
    fill_cluster(ctx.cfg, p, l, &mut cluster, ctx.now)?;
    let cluster_json = Value::Object(cluster);
    let master = cluster_json["currentMasterVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut recs = vec![];
    for (i, pool) in pools.into_iter().enumerate() {
        let Value::Object(mut pool) = pool else {
            continue;
        };
        let pctx = PoolContext {
            project: p,
            cluster: &name,
            cluster_json: &cluster_json,
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

fn check_etag(given: Option<&Value>, current: &str, what: &str) -> Result<(), ApiError> {
    match given.and_then(Value::as_str) {
        Some(e) if !e.is_empty() && e != current => Err(ApiError::aborted(format!(
            "The etag \"{e}\" of {what} does not match its current etag; it was modified \
             concurrently. Read it again and retry."
        ))),
        _ => Ok(()),
    }
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

fn update_cluster(
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
        match k.as_str() {
            "etag" | "desiredNodePoolId" => {}
            "desiredNodePoolAutoscaling" => {
                let np = pool_for_update(&work, &update)?;
                let mut a = v.clone();
                check_autoscaling(&np, &mut a)?;
                let pool = work.pool_mut(&np).expect("checked");
                pool.json["autoscaling"] = a;
                pool.touch();
            }
            "desiredNodeVersion" | "desiredImageType" => {
                let np = pool_for_update(&work, &update)?;
                let pool = work.pool_mut(&np).expect("checked");
                if k == "desiredNodeVersion" {
                    let want = v.as_str().unwrap_or("-");
                    let r = if want == "-" {
                        master.clone()
                    } else {
                        resolve_version(ctx.cfg, want).ok_or_else(|| {
                            ApiError::invalid(format!("Node version \"{want}\" is unsupported."))
                        })?
                    };
                    if version_cmp(&r, &master).is_gt() {
                        return Err(ApiError::invalid(format!(
                            "Node version \"{r}\" must not be newer than the master version \"{master}\"."
                        )));
                    }
                    pool.json["version"] = json!(r);
                } else {
                    pool.json["config"]["imageType"] = v.clone();
                }
                pool.touch();
                op_type = if op_type == "UPGRADE_MASTER" {
                    op_type
                } else {
                    "UPGRADE_NODES"
                };
            }
            "desiredMasterVersion" => {
                let want = v.as_str().unwrap_or("-");
                let r = resolve_version(ctx.cfg, want).ok_or_else(|| {
                    ApiError::invalid(format!("Master version \"{want}\" is unsupported."))
                })?;
                if version_cmp(&r, &master).is_lt() {
                    return Err(ApiError::invalid(format!(
                        "Master cannot be downgraded from \"{master}\" to \"{r}\"."
                    )));
                }
                work.json["currentMasterVersion"] = json!(r);
                op_type = "UPGRADE_MASTER";
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
            other => {
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
            }
        }
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

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase()
        || c.is_ascii_digit()
        || c == '_'
        || c == '-'
        || (!c.is_ascii() && !c.is_uppercase())
}

/// Resource Manager label rules: at most 64; keys 1-63 characters starting with a lowercase
/// letter; keys and values of lowercase letters, digits, `_` and `-`; values up to 63.
fn check_labels(labels: &Map<String, Value>) -> Result<(), ApiError> {
    if labels.len() > 64 {
        return Err(ApiError::invalid(format!(
            "Too many labels: {} (at most 64 are allowed).",
            labels.len()
        )));
    }
    for (k, v) in labels {
        let v = v.as_str().unwrap_or_default();
        let key_ok = !k.is_empty()
            && k.chars().count() <= 63
            && k.chars().next().is_some_and(|c| c.is_lowercase())
            && k.chars().all(is_label_char);
        if !key_ok {
            return Err(ApiError::invalid(format!(
                "Invalid label key \"{k}\": keys must be 1-63 characters, start with a lowercase \
                 letter, and contain only lowercase letters, digits, '_' and '-'."
            )));
        }
        if v.chars().count() > 63 || !v.chars().all(is_label_char) {
            return Err(ApiError::invalid(format!(
                "Invalid value \"{v}\" for label \"{k}\": values must be at most 63 characters of \
                 lowercase letters, digits, '_' and '-'."
            )));
        }
    }
    Ok(())
}

fn set_resource_labels(
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

fn set_addons(
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

fn delete_cluster(
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

fn create_pool(
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
    check_pool_rules(ctx.cfg, &Value::Object(pool.clone()))?;
    check_idle(st, p, l, c)?;
    let rec = st.cluster(p, l, c).expect("checked");
    let master = rec.json["currentMasterVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
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
        &super::util::sha256_hex(&[c, &name])[..8]
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
fn update_pool(
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
    let node_config = SCHEMA.message("NodeConfig");
    for (k, v) in &req {
        let w = work.as_object_mut().expect("object");
        match k.as_str() {
            k if POOL_PATH_FIELDS.contains(&k) => {}
            // How GKE rolls the change out (VMs recreated, or updated live without a drain):
            // the emulator has no VMs, so every mode ends in the same pool.
            POOL_UPDATE_MODE => {}
            "nodeVersion" => {
                let want = v.as_str().unwrap_or("-");
                let r = if want == "-" || want.is_empty() {
                    master.clone()
                } else {
                    resolve_version(ctx.cfg, want).ok_or_else(|| {
                        ApiError::invalid(format!("Node version \"{want}\" is unsupported."))
                    })?
                };
                if version_cmp(&r, &master).is_gt() {
                    return Err(ApiError::invalid(format!(
                        "Node version \"{r}\" must not be newer than the master version \"{master}\"."
                    )));
                }
                w.insert("version".into(), json!(r));
                op_type = "UPGRADE_NODES";
            }
            "imageType" | "machineType" | "diskType" => {
                obj_at(w, "config").insert(k.to_string(), v.clone());
                op_type = "UPGRADE_NODES";
            }
            "diskSizeGb" => {
                let n: i64 = v.as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
                obj_at(w, "config").insert("diskSizeGb".into(), json!(n));
                op_type = "UPGRADE_NODES";
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
            "resourceLabels" => {
                let new = v
                    .get("labels")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                check_labels(&new)?;
                let cfg = obj_at(w, "config");
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
            }
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
            other => match node_config.field(other) {
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
    }
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

trait PointerBool {
    fn pointer_bool(&self, p: &str) -> bool;
}

impl PointerBool for Map<String, Value> {
    fn pointer_bool(&self, p: &str) -> bool {
        let mut parts = p.trim_start_matches('/').splitn(2, '/');
        let first = parts.next().unwrap_or_default();
        let rest = parts.next().map(|r| format!("/{r}")).unwrap_or_default();
        self.get(first)
            .and_then(|v| {
                if rest.is_empty() {
                    Some(v)
                } else {
                    v.pointer(&rest)
                }
            })
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

#[allow(clippy::too_many_arguments)]
fn set_autoscaling(
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
        check_dws_rules(&after)?;
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
fn set_size(
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
fn set_management(
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
        check_dws_rules(&after)?;
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

fn delete_pool(
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

fn cancel_operation(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    op: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    parse("CancelOperationRequest", body)?;
    let idx = st
        .operations
        .iter()
        .position(|o| o.name == op && o.project == p && (l == "-" || o.location == l))
        .ok_or_else(|| {
            ApiError::not_found(&format!("projects/{p}/locations/{l}/operations/{op}"))
        })?;
    let o = &st.operations[idx];
    if o.done {
        return Err(ApiError::failed_precondition(format!(
            "Operation {op} is already done."
        )));
    }
    if matches!(
        o.effect,
        Effect::ClusterCreated | Effect::ClusterDeleted | Effect::PoolCreated | Effect::PoolDeleted
    ) {
        return Err(ApiError::failed_precondition(format!(
            "Operation {op} of type {} cannot be cancelled.",
            o.op_type
        )));
    }
    let o = &mut st.operations[idx];
    o.failure = Some(OpFailure {
        code: 1,
        message: "Operation was cancelled.".into(),
        condition: None,
        canonical: "CANCELLED".into(),
    });
    // Finish it now.
    o.pending_ms = 0;
    o.running_ms = ctx.now.saturating_sub(o.start_ms);
    st.advance(ctx.now, ctx.cfg);
    Ok(("", json!({})))
}
