//! Push webhooks: which requests may trigger a stack's reconcile. GitHub signs the body with
//! HMAC-SHA256 under the webhook's secret (`X-Hub-Signature-256: sha256=<hex>`); GitLab sends the
//! secret itself (`X-Gitlab-Token`). Both are checked in constant time. docs/agent.md cites the
//! upstream pages.

use ring::hmac;

pub const GITHUB_SIGNATURE: &str = "x-hub-signature-256";
pub const GITLAB_TOKEN: &str = "x-gitlab-token";

/// Why a webhook request was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("the request carries neither X-Hub-Signature-256 nor X-Gitlab-Token")]
    Unsigned,
    #[error("the stack has no webhook secret (key `webhookSecret` of its secretRef)")]
    NoSecret,
    #[error("the signature does not match")]
    BadSignature,
}

/// Checks a request against the stack's webhook secret: `github_signature` is the value of
/// X-Hub-Signature-256, `gitlab_token` of X-Gitlab-Token.
pub fn verify(
    secret: Option<&[u8]>,
    body: &[u8],
    github_signature: Option<&str>,
    gitlab_token: Option<&str>,
) -> Result<(), WebhookError> {
    if github_signature.is_none() && gitlab_token.is_none() {
        return Err(WebhookError::Unsigned);
    }
    let secret = secret
        .filter(|s| !s.is_empty())
        .ok_or(WebhookError::NoSecret)?;
    if let Some(signature) = github_signature {
        let tag = signature
            .strip_prefix("sha256=")
            .and_then(decode_hex)
            .ok_or(WebhookError::BadSignature)?;
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        return hmac::verify(&key, body, &tag).map_err(|_| WebhookError::BadSignature);
    }
    let token = gitlab_token.unwrap_or_default().as_bytes();
    if equal_in_constant_time(token, secret) {
        Ok(())
    } else {
        Err(WebhookError::BadSignature)
    }
}

/// Compares two secrets without a timing difference that depends on where they differ: both are
/// hashed under a key of this process, and the tags compared by ring.
fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, b"gkq webhook token comparison");
    let tag = hmac::sign(&key, b);
    hmac::verify(&key, a, tag.as_ref()).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `sha256=<hex>` of `body` under `secret`, as GitHub sends it (for tests and tools).
pub fn github_signature(secret: &[u8], body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let tag = hmac::sign(&key, body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from GitHub's "Validating webhook deliveries" page: secret "It's a Secret to
    /// Everybody", payload "Hello, World!".
    #[test]
    fn githubs_documented_example_verifies() {
        let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let secret = b"It's a Secret to Everybody";
        assert_eq!(github_signature(secret, b"Hello, World!"), signature);
        assert_eq!(
            verify(Some(secret), b"Hello, World!", Some(signature), None),
            Ok(())
        );
        assert_eq!(
            verify(Some(secret), b"Hello, World?", Some(signature), None),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify(Some(secret), b"Hello, World!", Some("sha256=zz"), None),
            Err(WebhookError::BadSignature)
        );
    }

    #[test]
    fn gitlab_tokens_and_unsigned_requests() {
        assert_eq!(verify(Some(b"s3cret"), b"{}", None, Some("s3cret")), Ok(()));
        assert_eq!(
            verify(Some(b"s3cret"), b"{}", None, Some("s3cre")),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify(Some(b"s3cret"), b"{}", None, None),
            Err(WebhookError::Unsigned)
        );
        assert_eq!(
            verify(None, b"{}", None, Some("x")),
            Err(WebhookError::NoSecret)
        );
    }
}
