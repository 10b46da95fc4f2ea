//! Google credentials of a Kubernetes ServiceAccount, by Workload Identity Federation
//! (docs/gke.md f.2): a token of the ServiceAccount (from a [`SubjectTokenSource`], such as the
//! TokenRequest API) is exchanged at Google's Security Token Service for an access token of the
//! ServiceAccount's IAM principal. The agent gives each stack that acts as a ServiceAccount one
//! [`WorkloadIdentity`], so that the stack's GKE calls carry that principal's token and never
//! the agent's own.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::GkeError;
use super::auth::{CLOUD_PLATFORM_SCOPE, TokenSource, install_tls_provider};
use crate::model::workload_identity::Audience;

/// Google's Security Token Service; `POST {endpoint}v1/token` exchanges a token.
pub const DEFAULT_STS_ENDPOINT: &str = "https://sts.googleapis.com/";

/// An access token is exchanged again this long before it expires (or halfway through a
/// shorter life), so no call carries one that expires on the way.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Where a ServiceAccount's own tokens come from.
#[async_trait::async_trait]
pub trait SubjectTokenSource: Send + Sync + fmt::Debug {
    /// A token of the ServiceAccount whose `aud` is `audience`.
    async fn subject_token(&self, audience: &str) -> Result<SecretString, GkeError>;
    /// Whom the tokens name (`system:serviceaccount:NAMESPACE:NAME`), for messages.
    fn subject(&self) -> &str;
}

struct Cached {
    sts_url: String,
    token: SecretString,
    refresh_at: Instant,
}

/// One ServiceAccount's Google identity: its tokens exchanged at STS, cached until shortly
/// before they expire.
pub struct WorkloadIdentity {
    subject: Arc<dyn SubjectTokenSource>,
    audience: Audience,
    audience_text: String,
    http: reqwest::Client,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

impl fmt::Debug for WorkloadIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkloadIdentity")
            .field("subject", &self.subject.subject())
            .field("audience", &self.audience_text)
            .finish_non_exhaustive()
    }
}

impl WorkloadIdentity {
    /// `audience` is the STS audience: GKE's built-in pool
    /// (`identitynamespace:PROJECT.svc.id.goog:https://container.googleapis.com/v1/projects/...`)
    /// or a pool provider (`//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER`).
    pub fn new(subject: Arc<dyn SubjectTokenSource>, audience: &str) -> Result<Self, GkeError> {
        install_tls_provider();
        let parsed = Audience::parse(audience).ok_or_else(|| {
            GkeError::Auth(format!(
                "{audience:?} is not a workload identity audience: expected identitynamespace:PROJECT.svc.id.goog:PROVIDER or //iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER"
            ))
        })?;
        let http = super::rest::http_client_builder()?
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| GkeError::Transport(e.to_string()))?;
        Ok(Self {
            subject,
            audience: parsed,
            audience_text: audience.to_string(),
            http,
            cached: tokio::sync::Mutex::new(None),
        })
    }

    /// The access tokens of this identity from the STS at `sts_endpoint` (a base URL such as
    /// [`DEFAULT_STS_ENDPOINT`]).
    pub fn tokens_at(self: &Arc<Self>, sts_endpoint: &str) -> Arc<dyn TokenSource> {
        let mut url = sts_endpoint.to_string();
        if !url.ends_with('/') {
            url.push('/');
        }
        url.push_str("v1/token");
        Arc::new(ExchangedTokens {
            identity: self.clone(),
            sts_url: url,
        })
    }

    async fn token_from(&self, sts_url: &str) -> Result<SecretString, GkeError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && c.sts_url == sts_url
            && Instant::now() < c.refresh_at
        {
            return Ok(c.token.clone());
        }
        let (token, lifetime) = self.exchange(sts_url).await?;
        let margin = REFRESH_MARGIN.min(lifetime / 2);
        *cached = Some(Cached {
            sts_url: sts_url.to_string(),
            token: token.clone(),
            refresh_at: Instant::now() + lifetime - margin,
        });
        Ok(token)
    }

    async fn exchange(&self, sts_url: &str) -> Result<(SecretString, Duration), GkeError> {
        let subject_token = self
            .subject
            .subject_token(&self.audience.subject_token_audience())
            .await?;
        let body = exchange_request(&self.audience_text, subject_token.expose_secret());
        let refused = |what: String| {
            GkeError::Auth(format!(
                "the Security Token Service did not exchange the token of {} for {}: {what}",
                self.subject.subject(),
                self.audience_text
            ))
        };
        // STS takes no Authorization header: the subject token is the credential.
        let response = self
            .http
            .post(sts_url)
            .json(&body)
            .send()
            .await
            .map_err(|e| refused(format!("{sts_url}: {e}")))?;
        let status = response.status();
        let answer: Value = response
            .json()
            .await
            .map_err(|e| refused(format!("HTTP {status}, unreadable answer: {e}")))?;
        if !status.is_success() {
            let description = answer["error_description"]
                .as_str()
                .or_else(|| answer["error"]["message"].as_str())
                .or_else(|| answer["error"].as_str())
                .unwrap_or("no description");
            return Err(refused(format!("HTTP {status}: {description}")));
        }
        let token = answer["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| refused("the answer holds no access_token".into()))?;
        // `expires_in` is absent only for exchanges of Google's own tokens; an hour is Google's
        // usual lifetime.
        let lifetime = Duration::from_secs(answer["expires_in"].as_u64().unwrap_or(3600));
        Ok((SecretString::from(token.to_string()), lifetime))
    }
}

/// The body of `POST https://sts.googleapis.com/v1/token` (REST reference, `v1/TopLevel/token`).
pub fn exchange_request(audience: &str, subject_token: &str) -> Value {
    json!({
        "grantType": "urn:ietf:params:oauth:grant-type:token-exchange",
        "audience": audience,
        "scope": CLOUD_PLATFORM_SCOPE,
        "requestedTokenType": "urn:ietf:params:oauth:token-type:access_token",
        "subjectToken": subject_token,
        "subjectTokenType": "urn:ietf:params:oauth:token-type:jwt",
    })
}

/// A [`WorkloadIdentity`]'s tokens from one STS.
#[derive(Debug)]
struct ExchangedTokens {
    identity: Arc<WorkloadIdentity>,
    sts_url: String,
}

#[async_trait::async_trait]
impl TokenSource for ExchangedTokens {
    async fn token(&self) -> Result<SecretString, GkeError> {
        self.identity.token_from(&self.sts_url).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, Default)]
    struct Counted(AtomicUsize);

    #[async_trait::async_trait]
    impl SubjectTokenSource for Counted {
        async fn subject_token(&self, audience: &str) -> Result<SecretString, GkeError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(SecretString::from(format!("jwt-for-{audience}")))
        }
        fn subject(&self) -> &str {
            "system:serviceaccount:team:sa"
        }
    }

    const AUDIENCE: &str = "identitynamespace:mgmt.svc.id.goog:https://container.googleapis.com/v1/projects/mgmt/locations/l/clusters/c";

    /// A one-route STS that answers with `answer` and records the bodies it was sent.
    async fn sts(answer: (u16, Value)) -> (String, Arc<std::sync::Mutex<Vec<Value>>>) {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let app = axum::Router::new().route(
            "/v1/token",
            axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                let answer = answer.clone();
                record.lock().unwrap().push(body);
                async move {
                    (
                        axum::http::StatusCode::from_u16(answer.0).unwrap(),
                        axum::Json(answer.1),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    #[tokio::test]
    async fn the_token_is_exchanged_once_and_reused_until_shortly_before_it_expires() {
        let (url, seen) = sts((200, json!({"access_token": "ya29.x", "expires_in": 3600}))).await;
        let subject = Arc::new(Counted::default());
        let identity = Arc::new(WorkloadIdentity::new(subject.clone(), AUDIENCE).unwrap());
        let tokens = identity.tokens_at(&url);
        for _ in 0..3 {
            assert_eq!(tokens.token().await.unwrap().expose_secret(), "ya29.x");
        }
        assert_eq!(subject.0.load(Ordering::SeqCst), 1);
        let body = seen.lock().unwrap()[0].clone();
        assert_eq!(body, exchange_request(AUDIENCE, "jwt-for-mgmt.svc.id.goog"));
        // Another STS (the local target's next emulator) is asked afresh.
        let (other, _) = sts((200, json!({"access_token": "ya29.y", "expires_in": 3600}))).await;
        assert_eq!(
            identity
                .tokens_at(&other)
                .token()
                .await
                .unwrap()
                .expose_secret(),
            "ya29.y"
        );
        assert_eq!(subject.0.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_short_lived_token_is_exchanged_again_and_a_refusal_names_the_subject() {
        let (url, _) = sts((200, json!({"access_token": "ya29.x", "expires_in": 0}))).await;
        let subject = Arc::new(Counted::default());
        let identity = Arc::new(WorkloadIdentity::new(subject.clone(), AUDIENCE).unwrap());
        let tokens = identity.tokens_at(&url);
        tokens.token().await.unwrap();
        tokens.token().await.unwrap();
        assert_eq!(subject.0.load(Ordering::SeqCst), 2);

        let (url, _) = sts((
            400,
            json!({"error": "invalid_grant", "error_description": "bad aud"}),
        ))
        .await;
        let identity = Arc::new(WorkloadIdentity::new(subject, AUDIENCE).unwrap());
        let e = identity
            .tokens_at(&url)
            .token()
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("system:serviceaccount:team:sa") && e.contains("bad aud"),
            "{e}"
        );
        assert!(!e.contains("jwt-for"), "{e}");
    }

    #[test]
    fn an_unknown_audience_is_refused_at_once() {
        let e = WorkloadIdentity::new(Arc::new(Counted::default()), "my-pool").unwrap_err();
        assert!(
            e.to_string().contains("not a workload identity audience"),
            "{e}"
        );
    }
}
