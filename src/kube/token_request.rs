//! A ServiceAccount's own tokens, from the TokenRequest API
//! (`POST /api/v1/namespaces/NAMESPACE/serviceaccounts/NAME/token`): what the agent exchanges at
//! Google's Security Token Service for the Google identity of a stack's ServiceAccount
//! (`gke::federation`). The request is the agent's own (it needs `create` on
//! `serviceaccounts/token`, deploy/rbac.yaml); the token names the ServiceAccount.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use secrecy::SecretString;

use crate::gke::{GkeError, SubjectTokenSource};
use crate::model::workload_identity::service_account_user;

/// How long a requested token lives: the API server's minimum is 10 minutes; it is exchanged at
/// once, so a short life is enough.
const TOKEN_SECONDS: i64 = 600;

/// Tokens of the ServiceAccount `namespace/name`, requested through `client`.
pub struct ServiceAccountTokens {
    client: kube::Client,
    namespace: String,
    name: String,
    user: String,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountTokens {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            user: service_account_user(namespace, name),
        }
    }
}

#[async_trait::async_trait]
impl SubjectTokenSource for ServiceAccountTokens {
    async fn subject_token(&self, audience: &str) -> Result<SecretString, GkeError> {
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![audience.to_string()],
                expiration_seconds: Some(TOKEN_SECONDS),
                bound_object_ref: None,
            },
            ..Default::default()
        };
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &self.namespace);
        let answer = accounts
            .create_token_request(&self.name, &PostParams::default(), &request)
            .await
            .map_err(|e| {
                GkeError::Auth(format!(
                    "requesting a token of {} (audience {audience}): {e}",
                    self.user
                ))
            })?;
        let token = answer.status.map(|s| s.token).unwrap_or_default();
        if token.is_empty() {
            return Err(GkeError::Auth(format!(
                "the API server answered the TokenRequest for {} without a token",
                self.user
            )));
        }
        Ok(SecretString::from(token))
    }

    fn subject(&self) -> &str {
        &self.user
    }
}
