//! Which GKE cluster the agent runs in, so that it never deletes it: a pod on GKE asks the
//! metadata server for `instance/attributes/cluster-name`, `instance/attributes/cluster-location`
//! and `project/project-id` (served by the GKE metadata server under Workload Identity too).

use std::time::Duration;

use crate::addr::ClusterRef;

/// The metadata server's host name inside Google Cloud.
pub const METADATA_HOST: &str = "metadata.google.internal";

/// The cluster the metadata server at `host` names; `None` when it does not answer (not on
/// GKE) within a few seconds.
pub async fn detect(host: &str) -> Option<ClusterRef> {
    crate::gke::install_tls_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .ok()?;
    let get = |path: &'static str| {
        let request = client
            .get(format!("http://{host}/computeMetadata/v1/{path}"))
            .header("Metadata-Flavor", "Google");
        async move {
            let response = request.send().await.ok()?.error_for_status().ok()?;
            let text = response.text().await.ok()?;
            Some(text.trim().to_string()).filter(|t| !t.is_empty())
        }
    };
    Some(ClusterRef {
        project: get("project/project-id").await?,
        location: get("instance/attributes/cluster-location").await?,
        cluster: get("instance/attributes/cluster-name").await?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::http::HeaderMap;
    use axum::routing::get;

    #[tokio::test]
    async fn the_metadata_server_names_the_cluster() {
        let answer = |value: &'static str| {
            move |headers: HeaderMap| async move {
                // The metadata server refuses requests without this header.
                if headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) == Some("Google") {
                    Ok(value)
                } else {
                    Err(axum::http::StatusCode::FORBIDDEN)
                }
            }
        };
        let app = Router::new()
            .route(
                "/computeMetadata/v1/project/project-id",
                get(answer("acme")),
            )
            .route(
                "/computeMetadata/v1/instance/attributes/cluster-location",
                get(answer("us-east5")),
            )
            .route(
                "/computeMetadata/v1/instance/attributes/cluster-name",
                get(answer("mgmt\n")),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        assert_eq!(
            detect(&addr.to_string()).await,
            Some(ClusterRef {
                project: "acme".into(),
                location: "us-east5".into(),
                cluster: "mgmt".into(),
            })
        );
        // Nothing listens on the discard port: not on GKE.
        assert_eq!(detect("127.0.0.1:9").await, None);
    }
}
