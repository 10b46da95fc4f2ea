//! A Kubernetes client configuration straight from `clusters.get`, with no `get-credentials` step
//! (docs/gke.md f.3, following gcloud's own kubeconfig logic).
//!
//! - server: `https://` + `cluster.endpoint`; or, when the IP endpoints are disabled
//!   (`controlPlaneEndpointsConfig.ipEndpointsConfig.enabled: false`) or the DNS endpoint is
//!   asked for, `https://` + `controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint` **without**
//!   CA data (it has a publicly trusted certificate).
//! - CA: `masterAuth.clusterCaCertificate` is base64 of a PEM bundle; its certificates become
//!   DER root certificates.
//! - auth: a bearer OAuth2 access token. Use [`super::AdcTokenSource::for_kubernetes`] (scopes
//!   cloud-platform and userinfo.email), like gke-gcloud-auth-plugin.
//!
//! **Token refresh.** `kube::Config` holds the token as a static bearer value, and access tokens
//! live about an hour. Callers rebuild: fetch a token from the token source (it caches and
//! refreshes) and call [`kube_config_from_cluster`] again for each reconcile cycle, or at the
//! latest every [`TOKEN_REBUILD_INTERVAL`]; building a `kube::Client` from a config is cheap.
//! (`AuthInfo.token_file` is the alternative for long-lived clients: kube re-reads such a file at
//! least once a minute, but it puts the token on disk.)

use base64::Engine;
use rustls::pki_types::{CertificateDer, pem::PemObject};
use secrecy::SecretString;
use serde_json::Value;

/// Rebuild the Kubernetes config at least this often: GKE access tokens live about an hour, and
/// google-cloud-auth refreshes them a few minutes before expiry.
pub const TOKEN_REBUILD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// Which control-plane endpoint to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndpointChoice {
    /// The IP endpoint with the cluster CA, unless the cluster disables IP endpoints (then DNS).
    #[default]
    Auto,
    /// The DNS endpoint, without CA data.
    Dns,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeConfigError {
    #[error(
        "cluster {cluster} has no control-plane endpoint yet (status {status}); wait until it is RUNNING"
    )]
    MissingEndpoint { cluster: String, status: String },
    #[error("cluster {cluster}: masterAuth.clusterCaCertificate is missing")]
    MissingCa { cluster: String },
    #[error(
        "cluster {cluster}: masterAuth.clusterCaCertificate is not base64 of a PEM certificate: {reason}"
    )]
    BadCa { cluster: String, reason: String },
    #[error("cluster {cluster}: endpoint {endpoint:?} is not a valid URL host: {reason}")]
    BadEndpoint {
        cluster: String,
        endpoint: String,
        reason: String,
    },
}

/// `kube::Config` for a cluster as returned by `clusters.get` (see the module docs).
pub fn kube_config_from_cluster(
    cluster: &Value,
    token: SecretString,
) -> Result<kube::Config, KubeConfigError> {
    kube_config_from_cluster_with(cluster, token, EndpointChoice::Auto)
}

/// [`kube_config_from_cluster`] with an explicit endpoint choice.
pub fn kube_config_from_cluster_with(
    cluster: &Value,
    token: SecretString,
    choice: EndpointChoice,
) -> Result<kube::Config, KubeConfigError> {
    let s = |p: &str| {
        cluster
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = s("/name").to_string();
    let ip_disabled = cluster
        .pointer("/controlPlaneEndpointsConfig/ipEndpointsConfig/enabled")
        .and_then(Value::as_bool)
        == Some(false);
    let dns = s("/controlPlaneEndpointsConfig/dnsEndpointConfig/endpoint");
    let use_dns = choice == EndpointChoice::Dns || ip_disabled;
    let endpoint = if use_dns { dns } else { s("/endpoint") };
    if endpoint.is_empty() {
        return Err(KubeConfigError::MissingEndpoint {
            cluster: name,
            status: s("/status").to_string(),
        });
    }
    let host = if endpoint.contains(':')
        && !endpoint.starts_with('[')
        && endpoint.parse::<std::net::Ipv6Addr>().is_ok()
    {
        format!("[{endpoint}]")
    } else {
        endpoint.to_string()
    };
    let url: axum::http::Uri =
        format!("https://{host}")
            .parse()
            .map_err(
                |e: axum::http::uri::InvalidUri| KubeConfigError::BadEndpoint {
                    cluster: name.clone(),
                    endpoint: endpoint.to_string(),
                    reason: e.to_string(),
                },
            )?;
    let mut cfg = kube::Config::new(url);
    if !use_dns {
        let ca_b64 = s("/masterAuth/clusterCaCertificate");
        if ca_b64.is_empty() {
            return Err(KubeConfigError::MissingCa { cluster: name });
        }
        cfg.root_cert = Some(ca_der(ca_b64).map_err(|reason| KubeConfigError::BadCa {
            cluster: name.clone(),
            reason,
        })?);
    }
    cfg.auth_info.token = Some(token);
    cfg.read_timeout = Some(std::time::Duration::from_secs(60));
    Ok(cfg)
}

/// base64(PEM bundle) -> DER certificates.
pub fn ca_der(ca_b64: &str) -> Result<Vec<Vec<u8>>, String> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca_b64.trim())
        .map_err(|e| format!("base64: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .map(|c| c.map(|c| c.as_ref().to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("PEM: {e:?}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block".into());
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use serde_json::json;

    const PEM: &str = crate::emulator::EMULATOR_CA_PEM;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn ip_endpoint_with_ca() {
        let c = json!({"name": "c", "status": "RUNNING", "endpoint": "34.1.2.3",
            "masterAuth": {"clusterCaCertificate": b64(PEM)}});
        let cfg = kube_config_from_cluster(&c, SecretString::from("tok".to_string())).unwrap();
        assert_eq!(cfg.cluster_url.to_string(), "https://34.1.2.3/");
        let der = cfg.root_cert.unwrap();
        assert_eq!(der.len(), 1);
        assert_eq!(der[0][0], 0x30, "DER starts with a SEQUENCE");
        assert_eq!(cfg.auth_info.token.unwrap().expose_secret(), "tok");
    }

    #[test]
    fn dns_endpoint_when_ip_disabled() {
        let c = json!({"name": "c", "endpoint": "",
            "masterAuth": {"clusterCaCertificate": b64(PEM)},
            "controlPlaneEndpointsConfig": {
                "dnsEndpointConfig": {"endpoint": "gke-abc.us-east5.gke.goog"},
                "ipEndpointsConfig": {"enabled": false}}});
        let cfg = kube_config_from_cluster(&c, SecretString::from("t".to_string())).unwrap();
        assert_eq!(
            cfg.cluster_url.to_string(),
            "https://gke-abc.us-east5.gke.goog/"
        );
        assert!(cfg.root_cert.is_none());
    }

    #[test]
    fn errors() {
        let c = json!({"name": "c", "status": "PROVISIONING"});
        let e = kube_config_from_cluster(&c, SecretString::from("secret-tok".to_string()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("PROVISIONING"), "{e}");
        assert!(!e.contains("secret-tok"));
        let c = json!({"name": "c", "endpoint": "1.2.3.4", "masterAuth": {"clusterCaCertificate": b64("nope")}});
        assert!(matches!(
            kube_config_from_cluster(&c, SecretString::from("t".to_string())),
            Err(KubeConfigError::BadCa { .. })
        ));
    }
}
