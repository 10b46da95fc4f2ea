//! The emulator's Security Token Service (`POST /v1/token`, docs/gke.md f.2): it exchanges a
//! Kubernetes ServiceAccount token for an access token bound to the ServiceAccount's IAM
//! principal, which the GKE methods then check against the IAM table (`super::iam`).
//!
//! What it checks of the subject token (a JWT): its `sub` is `system:serviceaccount:NS:NAME`,
//! its `aud` holds the audience the requested STS audience implies, and it has not expired. With
//! a JWKS (the API server's `/openid/v1/jwks`, [`super::EmulatorConfig::sts_jwks`] or
//! `PUT /emulator/sts/jwks`) the RS256 signature is verified against it too; without one the
//! token's issuer is trusted, as nothing else could vouch for it.
//!
//! Access tokens are `ya29.gkq-emulator.PAYLOAD.MAC`: the principal and expiry, authenticated
//! with a key of this process. A bearer token of another form is not the emulator's and is not
//! checked (anonymous callers and every credential the emulator did not issue keep working).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::model::workload_identity::{Audience, parse_service_account_user};

/// How long an access token lasts, as Google's (`expires_in: 3600`).
pub const TOKEN_SECONDS: u64 = 3600;

const TOKEN_PREFIX: &str = "ya29.gkq-emulator.";
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// An RFC 6749 5.2 error, as STS answers a refused exchange (HTTP 400 or 401).
#[derive(Debug, Clone, PartialEq)]
pub struct StsError {
    pub http: u16,
    pub error: &'static str,
    pub description: String,
}

impl StsError {
    fn invalid_request(description: impl Into<String>) -> Self {
        Self {
            http: 400,
            error: "invalid_request",
            description: description.into(),
        }
    }
    fn invalid_grant(description: impl Into<String>) -> Self {
        Self {
            http: 400,
            error: "invalid_grant",
            description: description.into(),
        }
    }
    pub fn body(&self) -> Value {
        json!({"error": self.error, "error_description": self.description})
    }
}

/// The key access tokens are authenticated with.
pub struct TokenKey(ring::hmac::Key);

impl TokenKey {
    pub fn generate() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            .unwrap_or_else(|_| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"gkq-emulator"));
        Self(key)
    }

    fn issue(&self, principal: &str, now_secs: u64) -> String {
        let payload = URL_SAFE_NO_PAD
            .encode(json!({"principal": principal, "exp": now_secs + TOKEN_SECONDS}).to_string());
        let mac = URL_SAFE_NO_PAD.encode(ring::hmac::sign(&self.0, payload.as_bytes()));
        format!("{TOKEN_PREFIX}{payload}.{mac}")
    }

    /// The principal an `Authorization` header's token was issued to: `Ok(None)` for no header
    /// or a token the emulator did not issue, an error for one of its own that was altered or
    /// has expired (401 UNAUTHENTICATED, as Google answers).
    pub fn principal(
        &self,
        authorization: Option<&str>,
        now_secs: u64,
    ) -> Result<Option<String>, super::ApiError> {
        let Some(token) = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .and_then(|t| t.strip_prefix(TOKEN_PREFIX))
        else {
            return Ok(None);
        };
        let unauthenticated = || {
            super::ApiError::new(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
            )
        };
        let (payload, mac) = token.split_once('.').ok_or_else(unauthenticated)?;
        let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| unauthenticated())?;
        ring::hmac::verify(&self.0, payload.as_bytes(), &mac).map_err(|_| unauthenticated())?;
        let claims: Value = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(unauthenticated)?;
        if claims["exp"].as_u64().unwrap_or(0) <= now_secs {
            return Err(unauthenticated());
        }
        Ok(claims["principal"].as_str().map(str::to_string))
    }
}

/// The fields of an exchange request, from a JSON body (the REST reference's lowerCamelCase or
/// the proto's snake_case names) or a form body (what Google's auth libraries send).
fn field(body: &[u8], json: Option<&Value>, camel: &str, snake: &str) -> Option<String> {
    if let Some(json) = json {
        return json[camel]
            .as_str()
            .or_else(|| json[snake].as_str())
            .map(str::to_string);
    }
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        let k = super::util::percent_decode(k, true);
        (k == camel || k == snake).then(|| super::util::percent_decode(v, true))
    })
}

/// Handles `POST /v1/token`: the STS response body, or why the exchange is refused.
pub fn exchange(
    key: &TokenKey,
    jwks: Option<&Value>,
    body: &[u8],
    now_secs: u64,
) -> Result<Value, StsError> {
    let json: Option<Value> = serde_json::from_slice(body).ok().filter(Value::is_object);
    let get = |camel: &str, snake: &str| field(body, json.as_ref(), camel, snake);
    let require = |camel: &str, snake: &str, want: &str| match get(camel, snake) {
        Some(v) if v == want => Ok(()),
        Some(v) => Err(StsError::invalid_request(format!(
            "Invalid value for \"{snake}\": {v:?} (expected {want:?})."
        ))),
        None => Err(StsError::invalid_request(format!(
            "Missing required parameter: \"{snake}\"."
        ))),
    };
    require("grantType", "grant_type", GRANT_TYPE)?;
    require(
        "requestedTokenType",
        "requested_token_type",
        ACCESS_TOKEN_TYPE,
    )?;
    require("subjectTokenType", "subject_token_type", JWT_TYPE)?;
    let audience_text = get("audience", "audience").unwrap_or_default();
    let audience = Audience::parse(&audience_text).ok_or_else(|| {
        StsError::invalid_request(format!(
            "Invalid value for \"audience\": {audience_text:?}."
        ))
    })?;
    let subject = get("subjectToken", "subject_token").ok_or_else(|| {
        StsError::invalid_request("Missing required parameter: \"subject_token\".")
    })?;
    let claims = verified_claims(&subject, jwks)?;
    let user = claims["sub"].as_str().unwrap_or_default();
    let (namespace, name) = parse_service_account_user(user).ok_or_else(|| {
        StsError::invalid_grant(format!(
            "The subject token's \"sub\" {user:?} is not a Kubernetes ServiceAccount."
        ))
    })?;
    let want = audience.subject_token_audience();
    let audiences: Vec<&str> = match &claims["aud"] {
        Value::String(a) => vec![a.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if !audiences.contains(&want.as_str()) {
        return Err(StsError::invalid_grant(format!(
            "The audience in ID Token {audiences:?} does not match the expected audience {want:?}."
        )));
    }
    if claims["exp"].as_u64().unwrap_or(0) <= now_secs {
        return Err(StsError::invalid_grant("The subject token has expired."));
    }
    let principal = audience.principal(namespace, name, super::util::project_number);
    Ok(json!({
        "access_token": key.issue(&principal, now_secs),
        "issued_token_type": ACCESS_TOKEN_TYPE,
        "token_type": "Bearer",
        "expires_in": TOKEN_SECONDS,
    }))
}

/// The JWT's claims, its signature checked against `jwks` when there is one.
fn verified_claims(token: &str, jwks: Option<&Value>) -> Result<Value, StsError> {
    let not_jwt = || StsError::invalid_grant("The subject token is not a JWT.");
    let parts: Vec<&str> = token.split('.').collect();
    let [header, payload, signature] = parts.as_slice() else {
        return Err(not_jwt());
    };
    let decode = |part: &str| -> Result<Value, StsError> {
        URL_SAFE_NO_PAD
            .decode(part)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(not_jwt)
    };
    let header = decode(header)?;
    let claims = decode(payload)?;
    if let Some(jwks) = jwks {
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| not_jwt())?;
        let message = format!("{}.{}", parts[0], parts[1]);
        let kid = header["kid"].as_str();
        let verified = header["alg"] == "RS256"
            && jwks["keys"].as_array().into_iter().flatten().any(|key| {
                let matches = kid.is_none_or(|k| key["kid"].as_str() == Some(k));
                let component = |name: &str| {
                    key[name]
                        .as_str()
                        .and_then(|v| URL_SAFE_NO_PAD.decode(v).ok())
                };
                matches
                    && key["kty"] == "RSA"
                    && match (component("n"), component("e")) {
                        (Some(n), Some(e)) => ring::signature::RsaPublicKeyComponents { n, e }
                            .verify(
                                &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                                message.as_bytes(),
                                &signature,
                            )
                            .is_ok(),
                        _ => false,
                    }
            });
        if !verified {
            return Err(StsError::invalid_grant(
                "The subject token's signature does not verify with the issuer's keys.",
            ));
        }
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "kid": "k"}).to_string());
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        format!("{header}.{payload}.c2ln")
    }

    const AUDIENCE: &str = "identitynamespace:mgmt.svc.id.goog:https://container.googleapis.com/v1/projects/mgmt/locations/l/clusters/c";

    fn request(subject: &str) -> Vec<u8> {
        json!({
            "grantType": GRANT_TYPE, "requestedTokenType": ACCESS_TOKEN_TYPE,
            "subjectTokenType": JWT_TYPE, "audience": AUDIENCE, "subjectToken": subject,
            "scope": "https://www.googleapis.com/auth/cloud-platform",
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_service_account_token_is_exchanged_for_a_token_of_its_principal() {
        let key = TokenKey::generate();
        let subject = jwt(
            json!({"sub": "system:serviceaccount:team:sa", "aud": ["mgmt.svc.id.goog"], "exp": 2000}),
        );
        let answer = exchange(&key, None, &request(&subject), 1000).unwrap();
        assert_eq!(answer["expires_in"], TOKEN_SECONDS);
        let header = format!("Bearer {}", answer["access_token"].as_str().unwrap());
        let principal = key.principal(Some(&header), 1000).unwrap().unwrap();
        assert!(
            principal.ends_with("/workloadIdentityPools/mgmt.svc.id.goog/subject/ns/team/sa/sa"),
            "{principal}"
        );
        // Altered, expired, or another process's: refused. Not the emulator's: not checked.
        let altered = header.replace(".gkq-emulator.e", ".gkq-emulator.f");
        assert!(key.principal(Some(&altered), 1000).is_err());
        assert!(key.principal(Some(&header), 1000 + TOKEN_SECONDS).is_err());
        assert!(TokenKey::generate().principal(Some(&header), 1000).is_err());
        assert_eq!(key.principal(Some("Bearer ya29.real"), 1000), Ok(None));
        assert_eq!(key.principal(None, 1000), Ok(None));
    }

    #[test]
    fn the_subject_must_be_a_service_account_of_the_right_audience_and_unexpired() {
        let key = TokenKey::generate();
        for (claims, says) in [
            (
                json!({"sub": "alice", "aud": "mgmt.svc.id.goog", "exp": 2000}),
                "not a Kubernetes ServiceAccount",
            ),
            (
                json!({"sub": "system:serviceaccount:a:b", "aud": "other", "exp": 2000}),
                "does not match",
            ),
            (
                json!({"sub": "system:serviceaccount:a:b", "aud": "mgmt.svc.id.goog", "exp": 10}),
                "expired",
            ),
        ] {
            let e = exchange(&key, None, &request(&jwt(claims)), 1000).unwrap_err();
            assert!(e.description.contains(says), "{e:?}");
        }
        let e = exchange(&key, None, &request("not-a-jwt"), 1000).unwrap_err();
        assert_eq!(e.error, "invalid_grant");
        // With the issuer's keys, a token they did not sign is refused.
        let jwks = json!({"keys": [{"kty": "RSA", "kid": "k", "n": "AQAB", "e": "AQAB"}]});
        let good = jwt(
            json!({"sub": "system:serviceaccount:a:b", "aud": "mgmt.svc.id.goog", "exp": 2000}),
        );
        let e = exchange(&key, Some(&jwks), &request(&good), 1000).unwrap_err();
        assert!(e.description.contains("signature"), "{e:?}");
    }

    #[test]
    fn form_bodies_with_snake_case_names_are_read() {
        let key = TokenKey::generate();
        let subject = jwt(
            json!({"sub": "system:serviceaccount:a:b", "aud": "mgmt.svc.id.goog", "exp": 2000}),
        );
        let form = format!(
            "grant_type={}&requested_token_type={}&subject_token_type={}&audience={}&subject_token={subject}",
            "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange",
            "urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token",
            "urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Ajwt",
            AUDIENCE.replace(':', "%3A").replace('/', "%2F"),
        );
        assert!(exchange(&key, None, form.as_bytes(), 1000).is_ok());
        let e = exchange(&key, None, b"grant_type=password", 1000).unwrap_err();
        assert_eq!(e.error, "invalid_request");
    }
}
