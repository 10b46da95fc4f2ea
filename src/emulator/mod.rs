//! A local emulator of the GKE REST API (container.googleapis.com v1), faithful to the
//! published API (docs/gke.md): the `local` target's stand-in for Google Cloud, and
//! the test double for the GKE client.
//!
//! What it serves (`/v1/projects/{p}/locations/{l}/...`):
//!
//! | path | methods |
//! |---|---|
//! | `clusters` | GET (list; location `-` = all), POST (create) |
//! | `clusters/{c}` | GET, PUT (update), DELETE; POST `:setResourceLabels`, `:setAddons` |
//! | `clusters/{c}/nodePools` | GET (list), POST (create) |
//! | `clusters/{c}/nodePools/{np}` | GET, PUT (update), DELETE; POST `:setAutoscaling`, `:setSize`, `:setManagement` |
//! | `operations` | GET (list) |
//! | `operations/{op}` | GET; POST `:cancel` |
//!
//! JSON is read and written as the real API does ([`wire`]): enums as names or numbers (numbers
//! in replies when the query has `$alt=json;enum-encoding=int`, as Google's client libraries
//! send), int64 as strings, zero values left out, unknown fields rejected. Operations go PENDING
//! -> RUNNING -> DONE over [`EmulatorConfig::pending_ms`] + [`EmulatorConfig::running_ms`]; one
//! operation per cluster (else 400 FAILED_PRECONDITION with ErrorInfo
//! CLUSTER_ALREADY_HAS_OPERATION); etags and label fingerprints are checked (409 ABORTED);
//! server defaults are filled in (versions, disk, image, scopes, metadata, management, upgrade
//! settings, max pods, locations, `goog-gke-*` resource labels, the `gke-queued` taint, endpoint
//! and CA). Faults are injected per call ([`faults`]). Errors are google.rpc JSON bodies; bad
//! requests never panic.
//!
//! Google's Security Token Service is served too, at `POST /v1/token` ([`sts`]): it exchanges a
//! Kubernetes ServiceAccount token for an access token of the ServiceAccount's IAM principal, and
//! the GKE methods answer such a caller 403 PERMISSION_DENIED where the IAM table
//! ([`EmulatorConfig::iam`], [`iam`]) gives it no role that grants the call's permission.
//!
//! Admin routes (not part of the GKE API): `GET|POST|DELETE /emulator/faults` (list, add a
//! [`FaultRule`] as JSON, clear), `GET|DELETE /emulator/requests` (the request log),
//! `GET /emulator/state` (everything stored), `POST /emulator/reset` (forget everything),
//! `GET|PUT /emulator/iam` (the IAM table; kept in `iam.json` of the state directory), `PUT /emulator/sts/jwks` (the keys STS verifies
//! subject tokens with; `null` for none).
//!
//! Start it in process with [`Emulator::start_in_process`], or as a process with [`serve`]
//! (`gkq emulator serve`, or the `gke-emulator` binary, which prints
//! `gke-emulator listening on http://127.0.0.1:PORT/` on stdout). It binds loopback only.

mod api;
mod defaults;
pub mod faults;
mod iam;
mod rpc;
mod state;
mod sts;
mod util;
pub mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use defaults::GKE_DEFAULT_SCOPES;
pub use faults::{Fault, FaultRule};
pub use iam::IamTable;
pub use rpc::ApiError;
/// The project number the emulator gives a project id (in links, and in the principals of
/// GKE's built-in workload identity pool).
pub use util::project_number;

use state::State;

/// The emulator's cluster CA: a real self-signed certificate (its key was thrown away), served
/// base64-encoded in `masterAuth.clusterCaCertificate` unless
/// [`EmulatorConfig::cluster_ca_pem`] says otherwise.
pub const EMULATOR_CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBtTCCAVugAwIBAgIUL28vZM3SaYFCYwyvVympBU+PYY4wCgYIKoZIzj0EAwIw
LzEtMCsGA1UEAwwkZ2tlLWVtdWxhdG9yLWNhIChub3QgYSByZWFsIGNsdXN0ZXIp
MCAXDTI2MTEzMDAyNTg1OVoYDzIxMjYxMTA2MDI1ODU5WjAvMS0wKwYDVQQDDCRn
a2UtZW11bGF0b3ItY2EgKG5vdCBhIHJlYWwgY2x1c3RlcikwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAAQzf4xZuxb2KiP71YyJTrpqTz5x9grDwPd2IKyT61hihzd0
w2wSObgTQJyrWhi61D0dnMlAgkE9MV5QbXUy61VUo1MwUTAdBgNVHQ4EFgQUZCDm
+dLmm/K5D3MtTBD33sbqI9wwHwYDVR0jBBgwFoAUZCDm+dLmm/K5D3MtTBD33sbq
I9wwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBmTb4Js5pevT4u
O2Q9ZzEf2qiYoyZ5CGaR2c09efL9EgIhAK1lceD5vUD4XqOb6JwmiuGjMVdB9S8R
9XYw0/ClN+LP
-----END CERTIFICATE-----
";

/// How the emulator behaves. All fields have defaults (`#[serde(default)]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmulatorConfig {
    /// Persist state here as JSON (loaded on start, written atomically after every change).
    pub state_dir: Option<PathBuf>,
    /// How long a new operation stays PENDING (ms). 0 is allowed.
    pub pending_ms: u64,
    /// How long it then stays RUNNING before DONE (ms). 0 is allowed.
    pub running_ms: u64,
    /// `Cluster.endpoint` once a cluster is RUNNING (a loopback placeholder by default; point it
    /// at a local kube-apiserver to make the cluster's Kubernetes API real).
    pub cluster_endpoint: String,
    /// PEM served (base64) as `masterAuth.clusterCaCertificate`.
    pub cluster_ca_pem: String,
    /// GKE versions on offer (full versions, e.g. `1.34.1-gke.1829001`); aliases such as
    /// `"1.34"` resolve to the newest matching patch.
    pub versions: Vec<String>,
    /// The version used when a create names none (or `"-"`).
    pub default_version: String,
    /// Release channel clusters are enrolled in when the create names none.
    pub default_channel: String,
    /// Answer 400 "Flex start node pools don't support TPUs with queued provisioning." for every
    /// TPU pool with both flex-start and queued provisioning (GKE did so until early 2026).
    pub reject_tpu_flex_start_queued: bool,
    /// Fault rules active from the start.
    pub faults: Vec<FaultRule>,
    /// The roles of principals from the emulator's STS, per project: a principal listed here
    /// may make only the calls its roles grant; one not listed is not checked. With a
    /// `state_dir`, the principals of its `iam.json` are added (and replace these).
    pub iam: IamTable,
    /// The JWKS (`{"keys": [...]}`) STS verifies subject tokens' signatures with, such as a
    /// Kubernetes API server's `/openid/v1/jwks`; `None`: the signature is not checked.
    pub sts_jwks: Option<Value>,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            state_dir: None,
            pending_ms: 200,
            running_ms: 200,
            cluster_endpoint: "127.0.0.1".into(),
            cluster_ca_pem: EMULATOR_CA_PEM.into(),
            versions: vec![
                "1.34.1-gke.1829001".into(),
                "1.34.0-gke.2201000".into(),
                "1.33.5-gke.1308000".into(),
                "1.33.4-gke.1245000".into(),
                "1.32.9-gke.1130000".into(),
            ],
            default_version: "1.33.5-gke.1308000".into(),
            default_channel: "REGULAR".into(),
            reject_tpu_flex_start_queued: false,
            faults: vec![],
            iam: IamTable::new(),
            sts_jwks: None,
        }
    }
}

impl EmulatorConfig {
    /// Operations that finish immediately (DONE in the response that starts them).
    pub fn instant() -> Self {
        Self {
            pending_ms: 0,
            running_ms: 0,
            ..Self::default()
        }
    }
}

/// One call as the emulator received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    /// Path without the query, as sent (not percent-decoded).
    pub path: String,
    pub query: String,
    /// The body as JSON; a non-JSON body is kept as a JSON string; `None` when empty.
    pub body: Option<Value>,
    /// Whether it carried an `Authorization` header (its value is never recorded).
    pub authorized: bool,
    /// The `x-goog-user-project` header: the project quota is billed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_project: Option<String>,
    /// The HTTP status of the answer.
    pub status: u16,
}

struct Inner {
    config: EmulatorConfig,
    state: Mutex<State>,
    faults: Mutex<Vec<FaultRule>>,
    requests: Mutex<Vec<RecordedRequest>>,
    iam: Mutex<IamTable>,
    sts_jwks: Mutex<Option<Value>>,
    token_key: sts::TokenKey,
}

/// The emulator: state, faults and request log. Cheap to clone (shared).
#[derive(Clone)]
pub struct Emulator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Emulator {
    /// An emulator with the state loaded from `config.state_dir` when set.
    pub fn new(config: EmulatorConfig) -> anyhow::Result<Self> {
        let state = match &config.state_dir {
            Some(dir) => State::load(dir)?,
            None => State::default(),
        };
        // The table kept in the state directory, over the configured one principal by principal.
        let mut iam = config.iam.clone();
        if let Some(dir) = &config.state_dir
            && let Some(kept) = iam::load(dir)?
        {
            iam.extend(kept);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                faults: Mutex::new(config.faults.clone()),
                iam: Mutex::new(iam),
                sts_jwks: Mutex::new(config.sts_jwks.clone()),
                token_key: sts::TokenKey::generate(),
                config,
                state: Mutex::new(state),
                requests: Mutex::new(vec![]),
            }),
        })
    }

    pub fn config(&self) -> &EmulatorConfig {
        &self.inner.config
    }

    /// Adds a fault rule (after the existing ones; the first live matching rule fires).
    pub fn add_fault(&self, rule: FaultRule) {
        lock(&self.inner.faults).push(rule);
    }

    /// Replaces the IAM table ([`EmulatorConfig::iam`]); with a state directory, also its
    /// `iam.json` there, so that the table outlives this process.
    pub fn set_iam(&self, table: IamTable) -> anyhow::Result<()> {
        let mut current = lock(&self.inner.iam);
        if let Some(dir) = &self.inner.config.state_dir {
            iam::save(dir, &table)?;
        }
        *current = table;
        Ok(())
    }

    pub fn iam(&self) -> IamTable {
        lock(&self.inner.iam).clone()
    }

    /// Sets the keys STS verifies subject tokens with ([`EmulatorConfig::sts_jwks`]).
    pub fn set_sts_jwks(&self, jwks: Option<Value>) {
        *lock(&self.inner.sts_jwks) = jwks;
    }

    pub fn clear_faults(&self) {
        lock(&self.inner.faults).clear();
    }

    /// The live fault rules, with their counters.
    pub fn faults(&self) -> Vec<FaultRule> {
        lock(&self.inner.faults).clone()
    }

    /// Every GKE API call received so far (admin routes excluded), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.inner.requests).clear();
    }

    /// Everything stored (clusters, pools, operations), as persisted.
    pub fn state_json(&self) -> Value {
        serde_json::to_value(&*lock(&self.inner.state)).unwrap_or(Value::Null)
    }

    /// Forgets all clusters and operations (and persists that).
    pub fn reset(&self) -> anyhow::Result<()> {
        let mut st = lock(&self.inner.state);
        *st = State::default();
        if let Some(dir) = &self.inner.config.state_dir {
            st.save(dir)?;
        }
        Ok(())
    }

    /// Sets a node pool's current size (nodes per zone) the way the cluster autoscaler does:
    /// directly, with no GKE operation and no change to the pool's etag. Only the local target's
    /// simulation calls this; the size shows in the cluster's `currentNodeCount`. Returns
    /// `false` when the cluster or pool does not exist.
    pub fn set_autoscaled_size(
        &self,
        project: &str,
        location: &str,
        cluster: &str,
        pool: &str,
        nodes_per_zone: i64,
    ) -> anyhow::Result<bool> {
        let mut st = lock(&self.inner.state);
        let key = state::cluster_key(project, location, cluster);
        let Some(pool) = st.clusters.get_mut(&key).and_then(|c| c.pool_mut(pool)) else {
            return Ok(false);
        };
        if pool.node_count == nodes_per_zone.max(0) {
            return Ok(true);
        }
        pool.node_count = nodes_per_zone.max(0);
        if let Some(dir) = &self.inner.config.state_dir {
            st.save(dir)?;
        }
        Ok(true)
    }

    /// The axum router: the GKE API plus the admin routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/emulator/faults",
                get(admin_list_faults)
                    .post(admin_add_fault)
                    .delete(admin_clear_faults),
            )
            .route(
                "/emulator/requests",
                get(admin_requests).delete(admin_clear_requests),
            )
            .route("/emulator/state", get(admin_state))
            .route("/emulator/iam", get(admin_iam).put(admin_set_iam))
            .route("/emulator/sts/jwks", axum::routing::put(admin_set_jwks))
            .route("/v1/token", post(sts_token))
            .route("/emulator/reset", post(admin_reset))
            .fallback(dispatch)
            .with_state(self.clone())
    }

    /// Binds 127.0.0.1 on a free port and serves in the background. Returns the base URL
    /// (`http://127.0.0.1:PORT/`, for `RestGke::with_endpoint`) and a handle that stops the
    /// server when dropped or on [`EmulatorHandle::shutdown`].
    pub async fn start_in_process(
        config: EmulatorConfig,
    ) -> anyhow::Result<(String, EmulatorHandle)> {
        let emulator = Emulator::new(config)?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = emulator.router();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
        });
        let base_url = format!("http://{addr}/");
        Ok((
            base_url.clone(),
            EmulatorHandle {
                emulator,
                base_url,
                addr,
                shutdown: Some(tx),
                task: Some(task),
            },
        ))
    }

    /// Handles one GKE API call; returns the response and an optional delay (hang fault).
    fn process(
        &self,
        method: &str,
        path: &str,
        query: &str,
        authorization: Option<&str>,
        body: &Bytes,
    ) -> (Response, u16, Option<u64>) {
        let enum_ints = wants_enum_ints(query);
        let reply = |e: ApiError| {
            let status = e.http;
            (e.into_response(), status, None)
        };
        let Some(route) = api::parse_route(path) else {
            return reply(ApiError::new(
                404,
                "NOT_FOUND",
                format!("The requested URL {path} was not found on this server."),
            ));
        };
        // Authentication and IAM come before anything else, as at Google's front end.
        let now_secs = util::now_ms() / 1000;
        let allowed = self
            .inner
            .token_key
            .principal(authorization, now_secs)
            .and_then(|principal| {
                iam::check(&lock(&self.inner.iam), principal.as_deref(), method, &route)
            });
        if let Err(e) = allowed {
            return reply(e);
        }
        let fault = faults::take(&mut lock(&self.inner.faults), method, path);
        let mut hang = None;
        let mut stockout = None;
        match &fault {
            Some(Fault::Hang { millis }) => hang = Some(*millis),
            Some(Fault::Stockout { message }) => stockout = Some(message.clone()),
            Some(f) => {
                if let Some(e) = faults::immediate_error(f, route.cluster_name()) {
                    return reply(e);
                }
            }
            None => {}
        }
        let parsed: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => {
                    return reply(ApiError::invalid(format!(
                        "Invalid JSON payload received. {e}"
                    )));
                }
            }
        };
        let cfg = &self.inner.config;
        let now = util::now_ms();
        let ctx = api::Ctx { cfg, now, stockout };
        let mut st = lock(&self.inner.state);
        let advanced = st.advance(now, cfg);
        let result = api::handle(&mut st, &ctx, method, &route, path, &parsed);
        let changed = advanced || (result.is_ok() && method != "GET");
        if changed
            && let Some(dir) = &cfg.state_dir
            && let Err(e) = st.save(dir)
        {
            tracing::error!("gke emulator: cannot persist state: {e:#}");
            return reply(ApiError::new(
                500,
                "INTERNAL",
                format!("The emulator could not persist its state: {e}"),
            ));
        }
        drop(st);
        match result {
            Ok((ty, v)) => {
                let out = if ty.is_empty() {
                    v
                } else {
                    wire::render(ty, &v, enum_ints)
                };
                (rpc::json_body(&out).into_response(), 200, hang)
            }
            Err(e) => {
                let status = e.http;
                (e.into_response(), status, hang)
            }
        }
    }
}

/// `$alt=json;enum-encoding=int` (what Google's REST clients send) asks for enum numbers.
fn wants_enum_ints(query: &str) -> bool {
    util::percent_decode(query, true).split('&').any(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == "$alt" || k == "alt") && v.split(';').any(|p| p.trim() == "enum-encoding=int")
    })
}

async fn dispatch(
    AxState(emu): AxState<Emulator>,
    method: Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let (resp, status, hang) = emu.process(method.as_str(), &path, &query, authorization, &body);
    let recorded_body = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(
            serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        )
    };
    lock(&emu.inner.requests).push(RecordedRequest {
        method: method.to_string(),
        path,
        query,
        body: recorded_body,
        authorized: headers.contains_key(axum::http::header::AUTHORIZATION),
        user_project: headers
            .get("x-goog-user-project")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        status,
    });
    if let Some(ms) = hang {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    resp
}

/// `POST /v1/token`: Google's Security Token Service ([`sts`]). Recorded without its body, which
/// holds the subject token.
async fn sts_token(AxState(emu): AxState<Emulator>, uri: Uri, body: Bytes) -> Response {
    let jwks = lock(&emu.inner.sts_jwks).clone();
    let now_secs = util::now_ms() / 1000;
    let (status, answer) = match sts::exchange(&emu.inner.token_key, jwks.as_ref(), &body, now_secs)
    {
        Ok(answer) => (200, answer),
        Err(e) => (e.http, e.body()),
    };
    lock(&emu.inner.requests).push(RecordedRequest {
        method: "POST".into(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or("").to_string(),
        body: None,
        authorized: false,
        user_project: None,
        status,
    });
    let code = axum::http::StatusCode::from_u16(status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    (code, rpc::json_body(&answer)).into_response()
}

async fn admin_iam(AxState(emu): AxState<Emulator>) -> Response {
    rpc::json_body(&serde_json::to_value(emu.iam()).unwrap_or_default()).into_response()
}

async fn admin_set_iam(AxState(emu): AxState<Emulator>, body: Bytes) -> Response {
    match serde_json::from_slice::<IamTable>(&body) {
        Ok(table) => match emu.set_iam(table) {
            Ok(()) => admin_iam(AxState(emu)).await,
            Err(e) => ApiError::new(500, "INTERNAL", format!("{e:#}")).into_response(),
        },
        Err(e) => ApiError::invalid(format!("Invalid IAM table: {e}")).into_response(),
    }
}

async fn admin_set_jwks(AxState(emu): AxState<Emulator>, body: Bytes) -> Response {
    match serde_json::from_slice::<Option<Value>>(&body) {
        Ok(jwks) => {
            emu.set_sts_jwks(jwks);
            rpc::json_body(&json!({})).into_response()
        }
        Err(e) => ApiError::invalid(format!("Invalid JWKS: {e}")).into_response(),
    }
}

async fn admin_list_faults(AxState(emu): AxState<Emulator>) -> Response {
    rpc::json_body(&json!({ "faults": emu.faults() })).into_response()
}

async fn admin_add_fault(AxState(emu): AxState<Emulator>, body: Bytes) -> Response {
    match serde_json::from_slice::<FaultRule>(&body) {
        Ok(rule) => {
            emu.add_fault(rule.clone());
            rpc::json_body(&serde_json::to_value(rule).unwrap_or_default()).into_response()
        }
        Err(e) => ApiError::invalid(format!("Invalid fault rule: {e}")).into_response(),
    }
}

async fn admin_clear_faults(AxState(emu): AxState<Emulator>) -> Response {
    emu.clear_faults();
    rpc::json_body(&json!({})).into_response()
}

async fn admin_requests(AxState(emu): AxState<Emulator>) -> Response {
    rpc::json_body(&json!({ "requests": emu.requests() })).into_response()
}

async fn admin_clear_requests(AxState(emu): AxState<Emulator>) -> Response {
    emu.clear_requests();
    rpc::json_body(&json!({})).into_response()
}

async fn admin_state(AxState(emu): AxState<Emulator>) -> Response {
    rpc::json_body(&emu.state_json()).into_response()
}

async fn admin_reset(AxState(emu): AxState<Emulator>) -> Response {
    match emu.reset() {
        Ok(()) => rpc::json_body(&json!({})).into_response(),
        Err(e) => ApiError::new(500, "INTERNAL", e.to_string()).into_response(),
    }
}

/// A running in-process emulator. Dereferences to [`Emulator`] (faults, request log, state).
pub struct EmulatorHandle {
    emulator: Emulator,
    base_url: String,
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl EmulatorHandle {
    /// `http://127.0.0.1:PORT/`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn emulator(&self) -> &Emulator {
        &self.emulator
    }

    /// Stops the server and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl std::ops::Deref for EmulatorHandle {
    type Target = Emulator;
    fn deref(&self) -> &Emulator {
        &self.emulator
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Serves the emulator on `addr` (loopback only; port 0 picks a free one) until Ctrl-C. Prints
/// `gke-emulator listening on http://ADDR/` on stdout once bound. For
/// `gkq emulator serve --port N --state-dir D`.
pub async fn serve(addr: SocketAddr, config: EmulatorConfig) -> anyhow::Result<()> {
    use std::io::Write;
    if !addr.ip().is_loopback() {
        anyhow::bail!("the GKE emulator binds loopback addresses only, not {addr}");
    }
    let emulator = Emulator::new(config)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}"))?;
    let local = listener.local_addr()?;
    println!("gke-emulator listening on http://{local}/");
    std::io::stdout().flush()?;
    axum::serve(listener, emulator.router())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_encoding_query() {
        assert!(wants_enum_ints("%24alt=json%3Benum-encoding%3Dint"));
        assert!(wants_enum_ints(
            "$alt=json;enum-encoding=int&prettyPrint=false"
        ));
        assert!(!wants_enum_ints("$alt=json"));
        assert!(!wants_enum_ints(""));
    }
}
