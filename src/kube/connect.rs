//! Getting a Kubernetes connection: from a kubeconfig context, or from the GKE cluster itself
//! (endpoint, CA and an OAuth token: no `get-credentials` step). When the cluster does not exist
//! yet at plan time, [`LazyKube`] connects on first use, after apply has created it.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::OnceCell;

use super::client::RealKube;
use super::{ApplyOptions, KubeApi, KubeError, KubeResult, ResourceInfo, Version};
use crate::addr::ClusterRef;
use crate::gke::{GkeApi, TokenSource, kube_config_from_cluster};

/// How gkq authenticates to a cluster GKE describes: a Google access token, and whom it acts as.
#[derive(Clone)]
pub struct ClusterCredentials {
    pub tokens: Arc<dyn TokenSource>,
    /// `Impersonate-User` on every request (the agent's per-stack ServiceAccount), so that the
    /// cluster's RBAC decides what the request may do, not the caller's own rights.
    pub impersonate: Option<String>,
}

/// A client for a cluster as `clusters.get` returned it.
pub async fn from_cluster(
    cluster: &Value,
    credentials: &ClusterCredentials,
) -> KubeResult<RealKube> {
    let token = credentials
        .tokens
        .token()
        .await
        .map_err(|e| KubeError::Transport(format!("Kubernetes credentials: {e}")))?;
    let mut config = kube_config_from_cluster(cluster, token).map_err(|e| {
        KubeError::Transport(format!("Kubernetes credentials from the cluster: {e}"))
    })?;
    config.auth_info.impersonate = credentials.impersonate.clone();
    super::client::require_verified_tls(&config)?;
    let client = kube::Client::try_from(config).map_err(|e| KubeError::Transport(e.to_string()))?;
    Ok(RealKube::new(client))
}

/// Connects to the cluster's API server the first time it is needed.
pub struct LazyKube<'a> {
    gke: &'a dyn GkeApi,
    cluster: ClusterRef,
    credentials: ClusterCredentials,
    client: OnceCell<RealKube>,
}

impl<'a> LazyKube<'a> {
    pub fn new(gke: &'a dyn GkeApi, cluster: ClusterRef, credentials: ClusterCredentials) -> Self {
        Self {
            gke,
            cluster,
            credentials,
            client: OnceCell::new(),
        }
    }

    async fn client(&self) -> KubeResult<&RealKube> {
        self.client
            .get_or_try_init(|| async {
                let cluster = self
                    .gke
                    .get_cluster(&self.cluster)
                    .await
                    .map_err(|e| {
                        KubeError::Transport(format!(
                            "reading the cluster for Kubernetes credentials: {e}"
                        ))
                    })?
                    .ok_or_else(|| {
                        KubeError::Transport(format!(
                            "cluster {} does not exist",
                            self.cluster.name()
                        ))
                    })?;
                from_cluster(&cluster, &self.credentials).await
            })
            .await
    }
}

#[async_trait::async_trait]
impl KubeApi for LazyKube<'_> {
    async fn resource(&self, api_version: &str, kind: &str) -> KubeResult<Option<ResourceInfo>> {
        self.client().await?.resource(api_version, kind).await
    }
    async fn list(&self, info: &ResourceInfo, label_selector: &str) -> KubeResult<Vec<Value>> {
        self.client().await?.list(info, label_selector).await
    }
    async fn list_in(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        label_selector: &str,
    ) -> KubeResult<Vec<Value>> {
        self.client()
            .await?
            .list_in(info, namespace, label_selector)
            .await
    }
    async fn list_each(
        &self,
        info: &ResourceInfo,
        label_selector: &str,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> KubeResult<()> {
        self.client()
            .await?
            .list_each(info, label_selector, each)
            .await
    }
    async fn get(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> KubeResult<Option<Value>> {
        self.client().await?.get(info, namespace, name).await
    }
    async fn watch_from_now(
        &self,
        info: &ResourceInfo,
        namespace: &str,
    ) -> KubeResult<Option<super::Changes>> {
        self.client().await?.watch_from_now(info, namespace).await
    }
    async fn apply(
        &self,
        info: &ResourceInfo,
        object: &Value,
        opts: ApplyOptions,
    ) -> KubeResult<Value> {
        self.client().await?.apply(info, object, opts).await
    }
    async fn delete(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        version: Option<&Version>,
    ) -> KubeResult<super::Deletion> {
        self.client()
            .await?
            .delete(info, namespace, name, version)
            .await
    }
    async fn pod_log(
        &self,
        namespace: &str,
        name: &str,
        follow: bool,
        each: &mut (dyn for<'l> FnMut(&'l str) + Send),
    ) -> KubeResult<()> {
        self.client()
            .await?
            .pod_log(namespace, name, follow, each)
            .await
    }
    async fn port_forward(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> KubeResult<super::PortForward> {
        self.client()
            .await?
            .port_forward(namespace, name, port)
            .await
    }
    fn refresh_discovery(&self) {
        if let Some(c) = self.client.get() {
            c.refresh_discovery();
        }
    }
}
