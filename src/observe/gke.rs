//! The GKE half of observing: one `clusters.get`, which carries every node pool.

use serde_json::Value;

use crate::addr::ClusterRef;
use crate::gke::{GkeApi, GkeError};
use crate::model::DesiredState;
use crate::model::live::{GkeLive, KubeLive, LiveState};

/// Reads the live cluster, with its node pools, in one call.
pub async fn observe_gke(api: &dyn GkeApi, desired: &DesiredState) -> Result<LiveState, GkeError> {
    Ok(LiveState {
        gke: GkeLive {
            cluster: read_cluster(api, &desired.gke.cluster_ref).await?,
        },
        kubernetes: KubeLive::NotObserved,
    })
}

/// The live cluster with its node pools, as a plan reads it; `None` when it does not exist.
pub async fn read_cluster(
    api: &dyn GkeApi,
    cluster_ref: &ClusterRef,
) -> Result<Option<Value>, GkeError> {
    let mut cluster = api.get_cluster(cluster_ref).await?;
    // clusters.get always carries nodePools; a client that trims fields may not.
    if let Some(cluster) = cluster.as_mut()
        && cluster.get("nodePools").is_none()
    {
        let pools = api.list_node_pools(cluster_ref).await?;
        if let Some(map) = cluster.as_object_mut() {
            map.insert("nodePools".to_string(), Value::Array(pools));
        }
    }
    Ok(cluster)
}
