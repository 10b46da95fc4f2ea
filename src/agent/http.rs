//! The agent's HTTP endpoints, on two listeners: the webhook listener (`--webhook-listen`) serves
//! `/hooks/{namespace}/{name}` (a push webhook that reconciles that stack now, once its
//! signature checks out) and the probes `/healthz` (the process serves) and `/readyz` (it
//! reaches its stacks); the metrics listener (`--metrics-listen`, loopback by default) serves
//! `/metrics` (Prometheus text) and the probes too.
//!
//! A webhook request is refused with one and the same answer whatever the reason (no such stack,
//! no webhook secret, a wrong or missing signature), so the endpoint does not tell which stacks
//! exist; the reason goes to the log. It reads the stack named in the path by a keyed GET, never
//! a list.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use super::crd::GkqStack;
use super::metrics::Metrics;
use super::reconcile::Context;
use super::store::StackStore;
use super::webhook::{GITHUB_SIGNATURE, GITLAB_TOKEN, verify};

/// What the endpoints read.
pub struct Endpoints {
    pub metrics: Arc<Metrics>,
    /// Set once the replica reaches its stacks (leading or standing by): a rolling update must
    /// see the new replicas ready while the old leader still leads.
    pub ready: AtomicBool,
    /// Where stacks are, once connected.
    pub store: std::sync::OnceLock<Arc<dyn StackStore>>,
    /// Set when this replica leads and its controller runs: the webhook's way in.
    pub controller: std::sync::OnceLock<(Arc<Context>, mpsc::UnboundedSender<ObjectRef<GkqStack>>)>,
}

/// The webhook listener's routes: push webhooks and the probes.
pub fn webhook_router(endpoints: Arc<Endpoints>) -> Router {
    probes()
        .route("/hooks/{namespace}/{name}", post(hook))
        .with_state(endpoints)
}

/// The metrics listener's routes: `/metrics` and the probes.
pub fn metrics_router(endpoints: Arc<Endpoints>) -> Router {
    probes()
        .route("/metrics", get(metrics))
        .with_state(endpoints)
}

fn probes() -> Router<Arc<Endpoints>> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
}

/// The one answer to a webhook request that is not accepted.
pub const REFUSED: &str = "refused: unknown stack or bad signature\n";

async fn readyz(State(e): State<Arc<Endpoints>>) -> impl IntoResponse {
    if e.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not connected")
    }
}

async fn metrics(State(e): State<Arc<Endpoints>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        e.metrics.render(),
    )
}

async fn hook(
    State(e): State<Arc<Endpoints>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let Some(store) = e.store.get() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "not connected yet".into());
    };
    let key = format!("{namespace}/{name}");
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signed = Signed {
        body: &body,
        github_signature: header(GITHUB_SIGNATURE),
        gitlab_token: header(GITLAB_TOKEN),
    };
    let stack = match authenticate(store.as_ref(), &namespace, &name, &signed).await {
        Ok(stack) => stack,
        Err(why) => {
            tracing::warn!(stack = %key, "webhook refused: {why}");
            return (StatusCode::UNAUTHORIZED, REFUSED.to_string());
        }
    };
    match e.controller.get() {
        Some((ctx, trigger)) => {
            tracing::info!(stack = %key, "webhook: fetching now");
            ctx.force(&key);
            let _ = trigger.send(ObjectRef::from_obj(&stack));
        }
        None => {
            // The leader watches the stacks: an annotation reaches it at once.
            let now = crate::vocab::time::format_nanos(k8s_openapi::jiff::Timestamp::now());
            if let Err(e) = store.request(&namespace, &name, &now).await {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("passing the push to the leader: {e}"),
                );
            }
            tracing::info!(stack = %key, "webhook: passed to the leader");
        }
    }
    (StatusCode::ACCEPTED, format!("reconciling {key}\n"))
}

/// What a webhook request carries to be checked.
struct Signed<'a> {
    body: &'a [u8],
    github_signature: Option<&'a str>,
    gitlab_token: Option<&'a str>,
}

/// The stack named in the path, if the request verifies against its webhook secret; otherwise
/// why not (for the log only). A stack that does not exist is checked against a secret nobody
/// knows, so that it costs the same work as a wrong signature.
async fn authenticate(
    store: &dyn StackStore,
    namespace: &str,
    name: &str,
    signed: &Signed<'_>,
) -> Result<GkqStack, String> {
    let check = |secret: Option<&[u8]>| {
        verify(
            secret,
            signed.body,
            signed.github_signature,
            signed.gitlab_token,
        )
    };
    let stack = match store.get(namespace, name).await {
        Ok(Some(stack)) => stack,
        Ok(None) => {
            let _ = check(Some(UNKNOWABLE_SECRET.as_slice()));
            return Err("no such stack".to_string());
        }
        Err(e) => return Err(format!("reading the stack: {e}")),
    };
    let secret = store
        .credentials(&stack)
        .await
        .map_err(|e| format!("reading the stack's secret: {e}"))?
        .webhook_secret;
    check(secret.as_deref()).map_err(|e| e.to_string())?;
    Ok(stack)
}

/// The secret a request for a stack that does not exist is checked against: random per process.
static UNKNOWABLE_SECRET: std::sync::LazyLock<[u8; 32]> = std::sync::LazyLock::new(|| {
    let mut secret = [0u8; 32];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret);
    secret
});
