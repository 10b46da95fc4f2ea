//! Google credentials for the GKE API and for the cluster's Kubernetes API.
//!
//! Everything goes through [`TokenSource`], so the REST client and the Kubernetes config builder
//! never see where a token came from:
//!
//! - [`AdcTokenSource`]: Application Default Credentials through `google-cloud-auth` —
//!   `GOOGLE_APPLICATION_CREDENTIALS` (service-account key, `authorized_user`, `external_account`
//!   for workload identity federation in CI, impersonated service accounts), then the gcloud ADC
//!   file (`gcloud auth application-default login`), then the GCE/GKE metadata server. Tokens are
//!   cached and refreshed by `google-cloud-auth` before they expire.
//! - [`StaticTokenSource`]: a fixed token (tests, or a token minted elsewhere).
//! - [`AnonymousTokenSource`]: no credentials at all, for the local emulator.
//!
//! Tokens are [`SecretString`]s: their `Debug` output is redacted, and no error message built in
//! this module or in the REST client contains one.

use std::fmt;

use secrecy::SecretString;

use super::GkeError;

/// `https://www.googleapis.com/auth/cloud-platform`: the scope for the GKE API.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// `https://www.googleapis.com/auth/userinfo.email`: added for Kubernetes API tokens so that RBAC
/// sees the account's email rather than a numeric id (what gke-gcloud-auth-plugin asks for).
pub const USERINFO_EMAIL_SCOPE: &str = "https://www.googleapis.com/auth/userinfo.email";

/// Where OAuth2 access tokens come from.
#[async_trait::async_trait]
pub trait TokenSource: Send + Sync + fmt::Debug {
    /// A current access token. An empty token means "anonymous": the REST client then sends no
    /// `Authorization` header at all.
    async fn token(&self) -> Result<SecretString, GkeError>;

    /// The project to bill quota to (`x-goog-user-project`), when the credentials name one:
    /// user credentials from `gcloud auth application-default login` carry the
    /// `quota_project_id` gcloud set, and Google bills API quota to it only when it is sent.
    async fn quota_project(&self) -> Option<String> {
        None
    }
}

/// Installs ring as the process-wide rustls crypto provider, once. reqwest (built with
/// `rustls-no-provider`) and google-cloud-auth (without default features) panic without one, even
/// for plain-http URLs. Idempotent; a provider installed earlier by someone else is kept.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Application Default Credentials (see the module docs for the resolution order).
#[derive(Clone)]
pub struct AdcTokenSource {
    credentials: google_cloud_auth::credentials::AccessTokenCredentials,
    scopes: Vec<String>,
}

impl AdcTokenSource {
    /// ADC with the `cloud-platform` scope: what the GKE REST API needs.
    pub fn new() -> Result<Self, GkeError> {
        Self::with_scopes(&[CLOUD_PLATFORM_SCOPE])
    }

    /// ADC with `cloud-platform` and `userinfo.email`: tokens for a GKE cluster's Kubernetes API.
    pub fn for_kubernetes() -> Result<Self, GkeError> {
        Self::with_scopes(&[CLOUD_PLATFORM_SCOPE, USERINFO_EMAIL_SCOPE])
    }

    /// ADC with explicit scopes. Fails when `GOOGLE_APPLICATION_CREDENTIALS` names a missing or
    /// malformed file (there is no fall-through in that case, per AIP-4110). Finding no
    /// credentials at all is not an error here: ADC then falls back to the metadata server, and
    /// the first [`TokenSource::token`] call reports the failure.
    pub fn with_scopes(scopes: &[&str]) -> Result<Self, GkeError> {
        install_tls_provider();
        let credentials = google_cloud_auth::credentials::Builder::default()
            .with_scopes(scopes.iter().copied())
            .build_access_token_credentials()
            .map_err(|e| GkeError::Auth(format!("application default credentials: {e}")))?;
        Ok(Self {
            credentials,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
        })
    }
}

impl fmt::Debug for AdcTokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdcTokenSource")
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl TokenSource for AdcTokenSource {
    async fn token(&self) -> Result<SecretString, GkeError> {
        let token = self.credentials.access_token().await.map_err(|e| {
            if adc_file().is_none() {
                // Nothing configured: ADC's last resort, the metadata server, did not answer
                // either. Its error ("transient") would send people looking in the wrong place.
                return GkeError::Auth(NO_CREDENTIALS.to_string());
            }
            GkeError::Auth(format!(
                "could not get an access token from application default credentials: {e} \
                 (run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS)"
            ))
        })?;
        Ok(SecretString::from(token.token))
    }

    async fn quota_project(&self) -> Option<String> {
        use google_cloud_auth::credentials::{CacheableResource, CredentialsProvider};
        match self.credentials.headers(Default::default()).await {
            Ok(CacheableResource::New { data, .. }) => data
                .get("x-goog-user-project")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            _ => None,
        }
    }
}

/// What to say when no Google credentials are configured at all.
pub const NO_CREDENTIALS: &str = "no Google Cloud credentials found: run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account or workload identity federation file (or run on Google Cloud, where the metadata server provides them); `--target local` tries gkq without Google Cloud";

/// The credentials file Application Default Credentials would read, when there is one:
/// `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's `application_default_credentials.json`
/// (in `$CLOUDSDK_CONFIG`, or `~/.config/gcloud`). Without one, ADC asks the metadata server.
fn adc_file() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS").filter(|p| !p.is_empty())
    {
        return Some(path.into());
    }
    let config = std::env::var_os("CLOUDSDK_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".config/gcloud"))
        })?;
    let file = config.join("application_default_credentials.json");
    file.is_file().then_some(file)
}

/// A fixed token.
#[derive(Clone)]
pub struct StaticTokenSource(SecretString);

impl StaticTokenSource {
    pub fn new(token: impl Into<String>) -> Self {
        Self(SecretString::from(token.into()))
    }
}

impl fmt::Debug for StaticTokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticTokenSource([redacted])")
    }
}

#[async_trait::async_trait]
impl TokenSource for StaticTokenSource {
    async fn token(&self) -> Result<SecretString, GkeError> {
        Ok(self.0.clone())
    }
}

/// No credentials: requests carry no `Authorization` header (the local emulator).
#[derive(Clone, Copy, Debug, Default)]
pub struct AnonymousTokenSource;

#[async_trait::async_trait]
impl TokenSource for AnonymousTokenSource {
    async fn token(&self) -> Result<SecretString, GkeError> {
        Ok(SecretString::from(String::new()))
    }
}
