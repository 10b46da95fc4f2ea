//! The container v1 methods: routing, and the helpers every resource's handlers share. The
//! handlers live with their resource: clusters, node pools, operations.

mod cluster_rules;
mod clusters;
mod dws_rules;
mod labels;
mod node_pools;
mod operations;
mod pool_rules;

use serde_json::{Map, Value};

use super::EmulatorConfig;
use super::rpc::ApiError;
use super::state::{ClusterRec, Effect, OpFailure, PoolRec, State, cluster_key};
use super::util::percent_decode;
use super::wire::{WireError, normalize};
use clusters::{
    create_cluster, delete_cluster, get_cluster, list_clusters, set_addons, set_resource_labels,
    update_cluster,
};
use node_pools::{
    create_pool, delete_pool, get_pool, list_pools, set_autoscaling, set_management, set_size,
    update_pool,
};
use operations::{cancel_operation, get_operation, list_operations};

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
    /// The project the call is made in.
    pub fn project(&self) -> &str {
        match self {
            Route::Clusters { p, .. }
            | Route::Cluster { p, .. }
            | Route::NodePools { p, .. }
            | Route::NodePool { p, .. }
            | Route::Operations { p, .. }
            | Route::Operation { p, .. } => p,
        }
    }

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

pub(super) fn wire_err(e: WireError) -> ApiError {
    ApiError::invalid_field(e.path, e.message)
}

pub(super) fn parse(ty: &str, body: &Value) -> Result<Map<String, Value>, ApiError> {
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
        ) => get_cluster(st, p, l, c),
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
        (Route::NodePools { p, l, c }, "GET") => list_pools(st, p, l, c),
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
            "GET" => get_pool(st, p, l, c, np),
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
        (Route::Operations { p, l }, "GET") => list_operations(st, ctx, p, l),
        (
            Route::Operation {
                p,
                l,
                op,
                verb: None,
            },
            "GET",
        ) => get_operation(st, ctx, p, l, op),
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

pub(super) fn find_cluster<'a>(
    st: &'a State,
    p: &str,
    l: &str,
    c: &str,
) -> Result<&'a ClusterRec, ApiError> {
    st.cluster(p, l, c)
        .ok_or_else(|| ApiError::not_found(&cluster_key(p, l, c)))
}

pub(super) fn find_pool<'a>(rec: &'a ClusterRec, np: &str) -> Result<&'a PoolRec, ApiError> {
    rec.pool(np)
        .ok_or_else(|| ApiError::not_found(&format!("{}/nodePools/{np}", rec.key())))
}

/// 404 when the cluster is missing, 400 CLUSTER_ALREADY_HAS_OPERATION when it is busy.
pub(super) fn check_idle(st: &State, p: &str, l: &str, c: &str) -> Result<(), ApiError> {
    find_cluster(st, p, l, c)?;
    if let Some(op) = st.busy_op(p, l, c) {
        return Err(ApiError::cluster_busy(&op.name));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn start(
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

pub(super) fn stockout_failure(message: String) -> OpFailure {
    OpFailure {
        code: 8,
        message,
        condition: Some("GCE_STOCKOUT".into()),
        canonical: "RESOURCE_EXHAUSTED".into(),
    }
}

pub(super) fn check_etag(given: Option<&Value>, current: &str, what: &str) -> Result<(), ApiError> {
    match given.and_then(Value::as_str) {
        Some(e) if !e.is_empty() && e != current => Err(ApiError::aborted(format!(
            "The etag \"{e}\" of {what} does not match its current etag; it was modified \
             concurrently. Read it again and retry."
        ))),
        _ => Ok(()),
    }
}

pub(super) trait PointerBool {
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
