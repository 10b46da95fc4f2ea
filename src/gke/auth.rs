//! Google credentials for the GKE API and for the cluster's Kubernetes API.
//!
//! Everything goes through [`TokenSource`], so the REST client and the Kubernetes config builder
//! never see where a token came from:
//!
//! - [`AdcTokenSource`]: Application Default Credentials — the file
//!   `GOOGLE_APPLICATION_CREDENTIALS` names (service-account key, `authorized_user`,
//!   `external_account` for workload identity federation in CI, impersonated service accounts),
//!   then the gcloud ADC file (`gcloud auth application-default login`), then the GCE/GKE
//!   metadata server. gkq finds the file through the environment lookup it is given (the order
//!   google-cloud-auth's own ADC builder follows, docs/gke.md f.1) and builds the credentials of
//!   the file's type with `google-cloud-auth`, which caches tokens and refreshes them before they
//!   expire.
//! - [`StaticTokenSource`]: a fixed token (tests, or a token minted elsewhere).
//! - [`AnonymousTokenSource`]: no credentials at all, for the local emulator.
//!
//! Tokens are [`SecretString`]s: their `Debug` output is redacted, and no error message built in
//! this module or in the REST client contains one.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

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

/// How [`AdcTokenSource`] reads the environment: a variable's value, or `None` when it is unset.
/// [`process_env`] for real use; tests pass a map.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The process environment, as an [`EnvLookup`].
pub fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// Names a credentials file (AIP-4110): read first, and an error when it cannot be read.
const CREDENTIALS_VAR: &str = "GOOGLE_APPLICATION_CREDENTIALS";
/// Overrides the project the credentials bill quota to.
const QUOTA_PROJECT_VAR: &str = "GOOGLE_CLOUD_QUOTA_PROJECT";

/// Application Default Credentials (see the module docs for the resolution order).
#[derive(Clone)]
pub struct AdcTokenSource {
    credentials: google_cloud_auth::credentials::AccessTokenCredentials,
    scopes: Vec<String>,
    /// The credentials file read; `None` when ADC fell back to the metadata server.
    file: Option<PathBuf>,
}

impl AdcTokenSource {
    /// ADC with the `cloud-platform` scope: what the GKE REST API needs.
    pub fn new(env: EnvLookup<'_>) -> Result<Self, GkeError> {
        Self::with_scopes(&[CLOUD_PLATFORM_SCOPE], env)
    }

    /// ADC with `cloud-platform` and `userinfo.email`: tokens for a GKE cluster's Kubernetes API.
    pub fn for_kubernetes(env: EnvLookup<'_>) -> Result<Self, GkeError> {
        Self::with_scopes(&[CLOUD_PLATFORM_SCOPE, USERINFO_EMAIL_SCOPE], env)
    }

    /// ADC with explicit scopes, reading the environment through `env`. Fails when
    /// `GOOGLE_APPLICATION_CREDENTIALS` names a missing or malformed file (there is no
    /// fall-through in that case, per AIP-4110). Finding no credentials at all is not an error
    /// here: ADC then falls back to the metadata server, and the first [`TokenSource::token`]
    /// call reports the failure.
    pub fn with_scopes(scopes: &[&str], env: EnvLookup<'_>) -> Result<Self, GkeError> {
        install_tls_provider();
        let found = read_adc_file(env)?;
        let quota_project = env(QUOTA_PROJECT_VAR).and_then(|q| q.into_string().ok());
        let (file, json) = match found {
            Some((path, contents)) => {
                let json = serde_json::from_str(&contents).map_err(|e| {
                    GkeError::Auth(format!(
                        "application default credentials: {} is not JSON: {e}",
                        path.display()
                    ))
                })?;
                (Some(path), Some(json))
            }
            None => (None, None),
        };
        let credentials = build_credentials(json, scopes, quota_project).map_err(|e| {
            let from = file
                .as_ref()
                .map(|p| format!(" ({})", p.display()))
                .unwrap_or_default();
            GkeError::Auth(format!("application default credentials{from}: {e}"))
        })?;
        Ok(Self {
            credentials,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            file,
        })
    }
}

/// The credentials file ADC reads and its contents (AIP-4110, as google-cloud-auth's
/// `credentials::Builder` resolves it): the file `GOOGLE_APPLICATION_CREDENTIALS` names (an error
/// when it cannot be read), else gcloud's well-known file (AIP-4113), else none (the metadata
/// server).
fn read_adc_file(env: EnvLookup<'_>) -> Result<Option<(PathBuf, String)>, GkeError> {
    if let Some(path) = env(CREDENTIALS_VAR).map(PathBuf::from) {
        return match std::fs::read_to_string(&path) {
            Ok(contents) => Ok(Some((path, contents))),
            Err(e) => Err(GkeError::Auth(format!(
                "application default credentials: cannot read {} ({e}), named by the \
                 {CREDENTIALS_VAR} environment variable: point it at a valid credentials file",
                path.display()
            ))),
        };
    }
    let Some(path) = well_known_file(env) else {
        return Ok(None);
    };
    match std::fs::read_to_string(&path) {
        Ok(contents) => Ok(Some((path, contents))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(GkeError::Auth(format!(
            "application default credentials: cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// gcloud's ADC file (`gcloud auth application-default login`), per AIP-4113.
#[cfg(not(target_os = "windows"))]
fn well_known_file(env: EnvLookup<'_>) -> Option<PathBuf> {
    env("HOME")
        .map(|home| PathBuf::from(home).join(".config/gcloud/application_default_credentials.json"))
}

/// gcloud's ADC file (`gcloud auth application-default login`), per AIP-4113.
#[cfg(target_os = "windows")]
fn well_known_file(env: EnvLookup<'_>) -> Option<PathBuf> {
    env("APPDATA")
        .map(|root| PathBuf::from(root).join("gcloud/application_default_credentials.json"))
}

/// Credentials of the file's `type` (the metadata server's without a file), with the scopes and
/// the quota project: the credential types google-cloud-auth's ADC builder accepts.
fn build_credentials(
    json: Option<serde_json::Value>,
    scopes: &[&str],
    quota_project: Option<String>,
) -> Result<google_cloud_auth::credentials::AccessTokenCredentials, String> {
    use google_cloud_auth::credentials::{
        external_account, external_account_authorized_user, impersonated, mds, service_account,
        user_account,
    };
    fn quota<B>(builder: B, quota: Option<String>, set: fn(B, String) -> B) -> B {
        match quota {
            Some(q) => set(builder, q),
            None => builder,
        }
    }
    let scopes = scopes.iter().map(|s| s.to_string());
    let Some(json) = json else {
        let b = mds::Builder::default().with_scopes(scopes);
        return quota(b, quota_project, |b, q| b.with_quota_project_id(q))
            .build_access_token_credentials()
            .map_err(|e| e.to_string());
    };
    let kind = json
        .get("type")
        .and_then(|t| t.as_str())
        .ok_or("the credentials file has no `type` field")?
        .to_string();
    let built = match kind.as_str() {
        "authorized_user" => {
            let b = user_account::Builder::new(json).with_scopes(scopes);
            quota(b, quota_project, |b, q| b.with_quota_project_id(q))
                .build_access_token_credentials()
        }
        "service_account" => {
            let access = service_account::AccessSpecifier::from_scopes(scopes);
            let b = service_account::Builder::new(json).with_access_specifier(access);
            quota(b, quota_project, |b, q| b.with_quota_project_id(q))
                .build_access_token_credentials()
        }
        "impersonated_service_account" => {
            let b = impersonated::Builder::new(json).with_scopes(scopes);
            quota(b, quota_project, |b, q| b.with_quota_project_id(q))
                .build_access_token_credentials()
        }
        "external_account" => {
            let b = external_account::Builder::new(json).with_scopes(scopes);
            quota(b, quota_project, |b, q| b.with_quota_project_id(q))
                .build_access_token_credentials()
        }
        "external_account_authorized_user" => {
            let b = external_account_authorized_user::Builder::new(json);
            quota(b, quota_project, |b, q| b.with_quota_project_id(q))
                .build_access_token_credentials()
        }
        other => {
            return Err(format!(
                "credentials of type `{other}` are not supported (service_account, \
                 authorized_user, impersonated_service_account, external_account and \
                 external_account_authorized_user are)"
            ));
        }
    };
    built.map_err(|e| e.to_string())
}

impl fmt::Debug for AdcTokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdcTokenSource")
            .field("scopes", &self.scopes)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl TokenSource for AdcTokenSource {
    async fn token(&self) -> Result<SecretString, GkeError> {
        let token = self.credentials.access_token().await.map_err(|e| {
            if self.file.is_none() {
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
