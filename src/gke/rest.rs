//! [`RestGke`]: the [`GkeApi`] over HTTP/JSON (container.googleapis.com v1, or the emulator).
//!
//! Retries (backon, exponential with jitter) cover 429 rate limits, 5xx and transport errors, and
//! honour `Retry-After` (delta-seconds). What is retried depends on the call:
//!
//! - reads are retried on any transient failure;
//! - in-place mutations (`update`, `set*`) are retried too: they state a desired value, so a
//!   repeat converges to the same state. A repeat of a mutation that did reach GKE may come back
//!   as [`GkeError::ClusterBusy`] (its own operation is running; [`super::retry_while_busy`] waits
//!   it out) or as [`GkeError::Conflict`] when it carried an etag that the first attempt changed;
//! - creates and deletes are never re-sent blindly. After a failure that leaves the outcome
//!   unknown (timeout, connection lost after sending, 500/502/504) the client re-reads the
//!   resource and the location's operations: if the create (delete) took effect, it returns that
//!   operation; only if nothing happened does it send the request again. 429 and 503 mean the
//!   request was not processed and are retried directly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use reqwest::{Method, StatusCode};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::auth::{TokenSource, install_tls_provider};
use super::errors::error_from_response;
use super::operations::PollConfig;
use super::{ClusterRef, GkeApi, GkeError, GkeResult, Operation};

/// The production endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://container.googleapis.com/";

/// How the client retries transient failures.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Retries after the first attempt.
    pub max_retries: usize,
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Upper bound for a server's `Retry-After`.
    pub max_retry_after: Duration,
    /// Timeout of one HTTP request (connect + response).
    pub request_timeout: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retries: 6,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
            request_timeout: Duration::from_secs(60),
        }
    }
}

impl RetryConfig {
    /// Short delays, for the local emulator and tests.
    pub fn fast() -> Self {
        Self {
            max_retries: 6,
            min_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(2),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// The GKE REST client. Cheap to clone.
#[derive(Clone)]
pub struct RestGke {
    http: reqwest::Client,
    endpoint: String,
    tokens: Arc<dyn TokenSource>,
    retry: RetryConfig,
    poll: PollConfig,
}

impl std::fmt::Debug for RestGke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestGke")
            .field("endpoint", &self.endpoint)
            .field("tokens", &self.tokens)
            .field("retry", &self.retry)
            .field("poll", &self.poll)
            .finish()
    }
}

/// Whether a URL points at this machine (the emulator): polling and retries are then fast.
fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host_str() {
        Some("localhost") => true,
        Some(h) => h
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

impl RestGke {
    /// A client for the production endpoint.
    pub fn new(tokens: Arc<dyn TokenSource>) -> GkeResult<Self> {
        Self::with_endpoint(DEFAULT_ENDPOINT, tokens)
    }

    /// A client for another endpoint, e.g. the emulator's `http://127.0.0.1:PORT/`. For a loopback
    /// endpoint the retry and polling intervals default to the fast ones.
    pub fn with_endpoint(endpoint: &str, tokens: Arc<dyn TokenSource>) -> GkeResult<Self> {
        let mut endpoint = endpoint.to_string();
        if !endpoint.ends_with('/') {
            endpoint.push('/');
        }
        let url = reqwest::Url::parse(&endpoint)
            .map_err(|e| GkeError::Transport(format!("invalid GKE endpoint {endpoint:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(GkeError::Transport(format!(
                "invalid GKE endpoint {endpoint:?}: scheme must be http or https"
            )));
        }
        let local = is_loopback(&url);
        let retry = if local {
            RetryConfig::fast()
        } else {
            RetryConfig::default()
        };
        let poll = if local {
            PollConfig::fast()
        } else {
            PollConfig::default()
        };
        Ok(Self {
            http: build_http(&retry)?,
            endpoint,
            tokens,
            retry,
            poll,
        })
    }

    pub fn with_retry(mut self, retry: RetryConfig) -> GkeResult<Self> {
        self.http = build_http(&retry)?;
        self.retry = retry;
        Ok(self)
    }

    pub fn with_poll_config(mut self, poll: PollConfig) -> Self {
        self.poll = poll;
        self
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn retry_config(&self) -> &RetryConfig {
        &self.retry
    }

    /// `operations.list` for the cluster's location (all clusters there).
    pub async fn list_operations(&self, cluster: &ClusterRef) -> GkeResult<Vec<Operation>> {
        let v = self
            .call(
                Method::GET,
                &format!("{}/operations", cluster.parent()),
                None,
                Mode::Read,
                "operations",
            )
            .await?;
        ops_of(&v)
    }

    async fn send_once(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, Failure> {
        let token = self.tokens.token().await.map_err(Failure::fatal)?;
        let url = format!("{}v1/{}", self.endpoint, path);
        tracing::debug!(%method, path, "GKE request");
        let mut req = self.http.request(method.clone(), &url).header(
            "x-goog-api-client",
            concat!("gkq/", env!("CARGO_PKG_VERSION")),
        );
        if !token.expose_secret().is_empty() {
            req = req.bearer_auth(token.expose_secret());
        }
        if let Some(project) = self.tokens.quota_project().await {
            req = req.header("x-goog-user-project", project);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                // A connection that was never made carried no request: safe to repeat.
                let class = if e.is_connect() {
                    Class::Safe
                } else {
                    Class::Ambiguous
                };
                return Err(Failure {
                    err: GkeError::Transport(format!(
                        "{method} {path}: {}",
                        error_chain(&e.without_url())
                    )),
                    class,
                    retry_after: None,
                });
            }
        };
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = resp.bytes().await.map_err(|e| Failure {
            err: GkeError::Transport(format!(
                "{method} {path}: reading the response: {}",
                error_chain(&e.without_url())
            )),
            class: Class::Ambiguous,
            retry_after: None,
        })?;
        if status.is_success() {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(json!({}));
            }
            return serde_json::from_slice(&bytes).map_err(|e| {
                Failure::fatal(GkeError::Transport(format!(
                    "{method} {path}: the response is not JSON: {e}"
                )))
            });
        }
        let err = error_from_response(status.as_u16(), &bytes, what);
        let class = match (status, &err) {
            (_, GkeError::ClusterBusy { .. }) => Class::Final,
            (StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE, _) => Class::Safe,
            (
                StatusCode::INTERNAL_SERVER_ERROR
                | StatusCode::BAD_GATEWAY
                | StatusCode::GATEWAY_TIMEOUT,
                _,
            ) => Class::Ambiguous,
            _ => Class::Final,
        };
        tracing::debug!(%method, path, status = status.as_u16(), "GKE error response");
        Err(Failure {
            err,
            class,
            retry_after,
        })
    }

    /// One logical call with retries (see the module docs).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        mode: Mode<'_>,
        what: &str,
    ) -> GkeResult<Value> {
        let unresolved = &AtomicBool::new(false);
        let non_idempotent = matches!(mode, Mode::Create(..) | Mode::Delete(..));
        let (method, mode) = (&method, &mode);
        let attempt = || async move {
            if unresolved.load(Ordering::SeqCst) {
                match self.reread(mode).await {
                    Ok(Some(op)) => {
                        unresolved.store(false, Ordering::SeqCst);
                        return Ok(op);
                    }
                    Ok(None) => unresolved.store(false, Ordering::SeqCst),
                    Err(f) => return Err(f),
                }
            }
            match self.send_once(method.clone(), path, body, what).await {
                Err(f) if f.class == Class::Ambiguous && non_idempotent => {
                    unresolved.store(true, Ordering::SeqCst);
                    Err(f)
                }
                r => r,
            }
        };
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.retry.min_delay)
            .with_max_delay(self.retry.max_delay)
            .with_max_times(self.retry.max_retries)
            .with_jitter();
        let cap = self.retry.max_retry_after;
        let result = attempt
            .retry(backoff)
            .when(|f: &Failure| f.class != Class::Final)
            .adjust(|f: &Failure, d| d.map(|d| f.retry_after.map(|r| r.min(cap)).unwrap_or(d)))
            .notify(|f: &Failure, d| {
                tracing::debug!(%method, path, error = %f.err, "GKE call failed, retrying in {d:?}")
            })
            .await;
        result.map_err(|f| {
            if unresolved.load(Ordering::SeqCst) {
                GkeError::Transport(format!(
                    "{}; the outcome of {method} {path} is unknown (gave up re-reading): check \
                     the resource and its operations before trying again",
                    f.err
                ))
            } else {
                f.err
            }
        })
    }

    /// After an ambiguous failure of a create or delete: did it take effect? `Some(operation)`
    /// if it did, `None` if nothing happened (safe to send again).
    async fn reread(&self, mode: &Mode<'_>) -> Result<Option<Value>, Failure> {
        let (cluster, pool, creating) = match mode {
            Mode::Create(c, p) => (*c, *p, true),
            Mode::Delete(c, p) => (*c, *p, false),
            _ => return Ok(None),
        };
        let (path, op_type, suffix) = match pool {
            Some(p) => (
                cluster.node_pool(p),
                if creating {
                    "CREATE_NODE_POOL"
                } else {
                    "DELETE_NODE_POOL"
                },
                format!("/clusters/{}/nodePools/{p}", cluster.cluster),
            ),
            None => (
                cluster.name(),
                if creating {
                    "CREATE_CLUSTER"
                } else {
                    "DELETE_CLUSTER"
                },
                format!("/clusters/{}", cluster.cluster),
            ),
        };
        let resource = match self.send_once(Method::GET, &path, None, &path).await {
            Ok(v) => Some(v),
            Err(Failure {
                err: GkeError::NotFound { .. },
                ..
            }) => None,
            Err(mut f) => {
                // A failed re-read must lead to another re-read, never to a re-send.
                if f.class == Class::Ambiguous {
                    f.class = Class::Safe;
                }
                return Err(f);
            }
        };
        let status = resource
            .as_ref()
            .and_then(|r| r.get("status"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let took_effect = match (creating, &resource) {
            (true, None) => return Ok(None),
            (true, Some(_)) => true,
            (false, None) => true,
            (false, Some(_)) if status == "STOPPING" => true,
            (false, Some(_)) => return Ok(None),
        };
        debug_assert!(took_effect);
        let ops_path = format!("{}/operations", cluster.parent());
        let ops = match self
            .send_once(Method::GET, &ops_path, None, "operations")
            .await
        {
            Ok(v) => ops_of(&v).map_err(Failure::fatal)?,
            Err(mut f) => {
                if f.class == Class::Ambiguous {
                    f.class = Class::Safe;
                }
                return Err(f);
            }
        };
        let found = ops
            .into_iter()
            .filter(|o| {
                o.operation_type == op_type
                    && o.target_link
                        .as_deref()
                        .is_some_and(|t| t.ends_with(&suffix))
            })
            .max_by(|a, b| a.start_time.cmp(&b.start_time));
        let op = match found {
            Some(op) => op,
            // The resource shows the effect but the operation record is gone: report it done.
            None if creating || resource.is_none() => Operation {
                name: String::new(),
                operation_type: op_type.to_string(),
                status: "DONE".to_string(),
                target_link: Some(path),
                ..Default::default()
            },
            // Still stopping but no operation to follow: try the delete again.
            None => return Ok(None),
        };
        serde_json::to_value(op)
            .map(Some)
            .map_err(|e| Failure::fatal(GkeError::Transport(e.to_string())))
    }

    async fn operation(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        mode: Mode<'_>,
        what: &str,
    ) -> GkeResult<Operation> {
        let v = self.call(method, path, body, mode, what).await?;
        parse_operation(v)
    }
}

fn build_http(retry: &RetryConfig) -> GkeResult<reqwest::Client> {
    http_client_builder()?
        .user_agent(concat!("gkq/", env!("CARGO_PKG_VERSION")))
        .timeout(retry.request_timeout)
        .connect_timeout(retry.request_timeout.min(Duration::from_secs(10)))
        .build()
        .map_err(|e| GkeError::Transport(format!("building the HTTP client: {e}")))
}

/// A client builder for Google's APIs (and the emulator) with the TLS configuration every such
/// client shares: the platform's trust roots, as reqwest would load them, but loaded once per
/// process. reqwest reads and parses the whole system certificate store (hundreds of files) for
/// each client it builds, and the agent connects a session, so builds its clients, at every
/// stack's interval: that was most of an idle round's CPU.
pub(crate) fn http_client_builder() -> GkeResult<reqwest::ClientBuilder> {
    Ok(reqwest::Client::builder().tls_backend_preconfigured(shared_tls()?))
}

/// The TLS configuration reqwest builds by default (platform verifier, the crypto provider of
/// [`install_tls_provider`], TLS 1.2 and 1.3, HTTP/2 or 1.1 by ALPN), made once.
fn shared_tls() -> GkeResult<rustls::ClientConfig> {
    use rustls_platform_verifier::BuilderVerifierExt;
    static SHARED: std::sync::Mutex<Option<rustls::ClientConfig>> = std::sync::Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(config) = shared.as_ref() {
        return Ok(config.clone());
    }
    install_tls_provider();
    let failed = |e: &dyn std::fmt::Display| {
        GkeError::Transport(format!("building the HTTP client's TLS configuration: {e}"))
    };
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .ok_or_else(|| failed(&"no TLS crypto provider is installed"))?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(&e))?
        .with_platform_verifier()
        .map_err(|e| failed(&e))?
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    *shared = Some(config.clone());
    Ok(config)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

fn parse_operation(v: Value) -> GkeResult<Operation> {
    serde_json::from_value(v)
        .map_err(|e| GkeError::Transport(format!("unexpected Operation JSON from GKE: {e}")))
}

fn ops_of(v: &Value) -> GkeResult<Vec<Operation>> {
    match v.get("operations") {
        None => Ok(vec![]),
        Some(ops) => serde_json::from_value(ops.clone())
            .map_err(|e| GkeError::Transport(format!("unexpected operations list from GKE: {e}"))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// The request was not processed (429, 503, no connection): send it again.
    Safe,
    /// It may or may not have been processed (timeout, connection lost, 500/502/504).
    Ambiguous,
    Final,
}

struct Failure {
    err: GkeError,
    class: Class,
    retry_after: Option<Duration>,
}

impl Failure {
    fn fatal(err: GkeError) -> Self {
        Self {
            err,
            class: Class::Final,
            retry_after: None,
        }
    }
}

enum Mode<'a> {
    Read,
    Update,
    /// Creates (cluster, or node pool by name).
    Create(&'a ClusterRef, Option<&'a str>),
    Delete(&'a ClusterRef, Option<&'a str>),
}

fn invalid(message: String) -> GkeError {
    GkeError::Api {
        http_status: 400,
        status: "INVALID_ARGUMENT".to_string(),
        reason: Some("gkq: request not sent".to_string()),
        message,
    }
}

#[async_trait::async_trait]
impl GkeApi for RestGke {
    async fn get_cluster(&self, cluster: &ClusterRef) -> GkeResult<Option<Value>> {
        let name = cluster.name();
        match self.call(Method::GET, &name, None, Mode::Read, &name).await {
            Ok(v) => Ok(Some(v)),
            Err(GkeError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn create_cluster(&self, cluster: &ClusterRef, body: &Value) -> GkeResult<Operation> {
        let mut body = body.clone();
        let Some(obj) = body.as_object_mut() else {
            return Err(invalid("the cluster body must be a JSON object".into()));
        };
        match obj.get("name").and_then(Value::as_str) {
            None => {
                obj.insert("name".into(), json!(cluster.cluster));
            }
            Some(n) if n != cluster.cluster => {
                return Err(invalid(format!(
                    "cluster body names {n:?} but the target is {:?}",
                    cluster.cluster
                )));
            }
            Some(_) => {}
        }
        let path = format!("{}/clusters", cluster.parent());
        self.operation(
            Method::POST,
            &path,
            Some(&json!({ "cluster": body })),
            Mode::Create(cluster, None),
            &cluster.name(),
        )
        .await
    }

    async fn update_cluster(&self, cluster: &ClusterRef, update: &Value) -> GkeResult<Operation> {
        let name = cluster.name();
        self.operation(
            Method::PUT,
            &name,
            Some(&json!({ "update": update })),
            Mode::Update,
            &name,
        )
        .await
    }

    async fn set_resource_labels(
        &self,
        cluster: &ClusterRef,
        labels: &std::collections::BTreeMap<String, String>,
        label_fingerprint: &str,
    ) -> GkeResult<Operation> {
        let name = cluster.name();
        self.operation(
            Method::POST,
            &format!("{name}:setResourceLabels"),
            Some(&json!({"resourceLabels": labels, "labelFingerprint": label_fingerprint})),
            Mode::Update,
            &name,
        )
        .await
    }

    async fn delete_cluster(&self, cluster: &ClusterRef) -> GkeResult<Operation> {
        let name = cluster.name();
        self.operation(
            Method::DELETE,
            &name,
            None,
            Mode::Delete(cluster, None),
            &name,
        )
        .await
    }

    async fn get_node_pool(&self, cluster: &ClusterRef, pool: &str) -> GkeResult<Option<Value>> {
        let name = cluster.node_pool(pool);
        match self.call(Method::GET, &name, None, Mode::Read, &name).await {
            Ok(v) => Ok(Some(v)),
            Err(GkeError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn list_node_pools(&self, cluster: &ClusterRef) -> GkeResult<Vec<Value>> {
        let path = format!("{}/nodePools", cluster.name());
        let v = self
            .call(Method::GET, &path, None, Mode::Read, &cluster.name())
            .await?;
        Ok(v.get("nodePools")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    async fn create_node_pool(&self, cluster: &ClusterRef, body: &Value) -> GkeResult<Operation> {
        let Some(pool) = body.get("name").and_then(Value::as_str) else {
            return Err(invalid("the node pool body has no name".into()));
        };
        let path = format!("{}/nodePools", cluster.name());
        self.operation(
            Method::POST,
            &path,
            Some(&json!({ "nodePool": body })),
            Mode::Create(cluster, Some(pool)),
            &cluster.name(),
        )
        .await
    }

    async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        body: &Value,
    ) -> GkeResult<Operation> {
        let name = cluster.node_pool(pool);
        self.operation(Method::PUT, &name, Some(body), Mode::Update, &name)
            .await
    }

    async fn set_node_pool_autoscaling(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        autoscaling: &Value,
    ) -> GkeResult<Operation> {
        let name = cluster.node_pool(pool);
        self.operation(
            Method::POST,
            &format!("{name}:setAutoscaling"),
            Some(&json!({ "autoscaling": autoscaling })),
            Mode::Update,
            &name,
        )
        .await
    }

    async fn set_node_pool_size(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        node_count: u32,
    ) -> GkeResult<Operation> {
        let name = cluster.node_pool(pool);
        self.operation(
            Method::POST,
            &format!("{name}:setSize"),
            Some(&json!({ "nodeCount": node_count })),
            Mode::Update,
            &name,
        )
        .await
    }

    async fn set_node_pool_management(
        &self,
        cluster: &ClusterRef,
        pool: &str,
        management: &Value,
    ) -> GkeResult<Operation> {
        let name = cluster.node_pool(pool);
        self.operation(
            Method::POST,
            &format!("{name}:setManagement"),
            Some(&json!({ "management": management })),
            Mode::Update,
            &name,
        )
        .await
    }

    async fn delete_node_pool(&self, cluster: &ClusterRef, pool: &str) -> GkeResult<Operation> {
        let name = cluster.node_pool(pool);
        self.operation(
            Method::DELETE,
            &name,
            None,
            Mode::Delete(cluster, Some(pool)),
            &name,
        )
        .await
    }

    async fn get_operation(&self, cluster: &ClusterRef, operation: &str) -> GkeResult<Operation> {
        let name = cluster.operation(operation);
        self.operation(Method::GET, &name, None, Mode::Read, &name)
            .await
    }

    fn poll_config(&self) -> PollConfig {
        self.poll.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_detection() {
        for (u, l) in [
            ("http://127.0.0.1:8080/", true),
            ("http://localhost:1/", true),
            ("http://[::1]:1/", true),
            ("https://container.googleapis.com/", false),
        ] {
            assert_eq!(is_loopback(&reqwest::Url::parse(u).unwrap()), l, "{u}");
        }
    }
}
