//! The agent's HTTP endpoints: `/healthz` (the process serves), `/readyz` (it leads and its
//! controller runs), `/metrics` (Prometheus text) and `/hooks/{namespace}/{name}` (a push
//! webhook that reconciles that stack now, once its signature checks out).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use kube::ResourceExt;
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

pub fn router(endpoints: Arc<Endpoints>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/hooks/{namespace}/{name}", post(hook))
        .with_state(endpoints)
}

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
    let stacks = match store.list().await {
        Ok(s) => s,
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("listing stacks: {e}"),
            );
        }
    };
    let Some(stack) = stacks
        .into_iter()
        .find(|s| s.namespace().as_deref() == Some(namespace.as_str()) && s.name_any() == name)
    else {
        return (
            StatusCode::NOT_FOUND,
            format!("no stack {namespace}/{name}"),
        );
    };
    let secret = match store.credentials(&stack).await {
        Ok(c) => c.webhook_secret,
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("reading the stack's secret: {e}"),
            );
        }
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Err(why) = verify(
        secret.as_deref(),
        &body,
        header(GITHUB_SIGNATURE),
        header(GITLAB_TOKEN),
    ) {
        tracing::warn!(stack = %format!("{namespace}/{name}"), "webhook refused: {why}");
        return (StatusCode::UNAUTHORIZED, why.to_string());
    }
    let key = format!("{namespace}/{name}");
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
