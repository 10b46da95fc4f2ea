//! Reading and writing the applied revision (`plan::revision`): a ConfigMap in Kubernetes and
//! resource labels on the GKE cluster.

use std::collections::BTreeMap;

use serde_json::Value;

use super::provenance::{now_rfc3339, who};
use crate::addr::ClusterRef;
use crate::gke::{GkeApi, GkeError, PollConfig, wait_operation_with};
use crate::kube::{ApplyOptions, KubeApi, KubeError};
use crate::plan::provenance::SpecRevision;
use crate::plan::revision::{
    AppliedRevision, GKE_COMMIT_LABEL, PlacementRecords, REVISION_NAMESPACE, configmap_name,
};

/// The revision an apply of `spec` records now, by whoever runs gkq.
pub fn applied_now(spec: &SpecRevision) -> AppliedRevision {
    AppliedRevision::of(spec, now_rfc3339(), who())
}

#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    #[error("recording the applied revision in ConfigMap {REVISION_NAMESPACE}/{name}: {source}")]
    Kube {
        name: String,
        #[source]
        source: KubeError,
    },
    #[error("recording the applied revision as labels on cluster {cluster}: {source}")]
    Gke {
        cluster: String,
        #[source]
        source: GkeError,
    },
}

impl RevisionError {
    pub fn hint(&self) -> &'static str {
        match self {
            RevisionError::Kube { .. } => {
                "The apply itself succeeded. gkq needs permission to apply ConfigMaps in kube-system to record what it applied."
            }
            RevisionError::Gke { .. } => {
                "The apply itself succeeded. The labels are written again by the next apply."
            }
        }
    }
}

/// What the revision ConfigMap holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub revision: AppliedRevision,
    /// Empty when the apply that wrote it recorded no placements (a gkq from before they were).
    pub placements: PlacementRecords,
}

/// Writes the revision ConfigMap with server-side apply (gkq owns every field of it).
pub async fn write_configmap(
    kube: &dyn KubeApi,
    stack: &str,
    revision: &AppliedRevision,
    placements: &PlacementRecords,
) -> Result<(), RevisionError> {
    let name = configmap_name(stack);
    let error = |source| RevisionError::Kube {
        name: name.clone(),
        source,
    };
    let info = kube
        .resource("v1", "ConfigMap")
        .await
        .map_err(error)?
        .ok_or_else(|| {
            error(KubeError::UnknownKind {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            })
        })?;
    let options = ApplyOptions {
        dry_run: false,
        force: true,
    };
    kube.apply(&info, &revision.to_configmap(stack, placements), options)
        .await
        .map_err(error)?;
    Ok(())
}

/// Reads the revision ConfigMap; `None` when no apply recorded one.
pub async fn read_configmap(
    kube: &dyn KubeApi,
    stack: &str,
) -> Result<Option<Recorded>, KubeError> {
    let Some(info) = kube.resource("v1", "ConfigMap").await? else {
        return Ok(None);
    };
    let Some(configmap) = kube
        .get(&info, Some(REVISION_NAMESPACE), &configmap_name(stack))
        .await?
    else {
        return Ok(None);
    };
    Ok(
        AppliedRevision::from_configmap(&configmap).map(|revision| Recorded {
            revision,
            placements: PlacementRecords::from_configmap(&configmap).unwrap_or_default(),
        }),
    )
}

/// Sets the revision labels on the cluster when they differ, keeping every other label. Returns
/// whether anything was written. A missing cluster (an apply that only deleted) writes nothing.
pub async fn write_gke_labels(
    gke: &dyn GkeApi,
    cluster_ref: &ClusterRef,
    revision: &AppliedRevision,
    poll: &PollConfig,
) -> Result<bool, RevisionError> {
    let error = |source| RevisionError::Gke {
        cluster: cluster_ref.name(),
        source,
    };
    let Some(cluster) = gke.get_cluster(cluster_ref).await.map_err(error)? else {
        return Ok(false);
    };
    let mut labels: BTreeMap<String, String> = cluster
        .get("resourceLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let before = labels.clone();
    labels.remove(GKE_COMMIT_LABEL);
    labels.extend(revision.gke_labels());
    if labels == before {
        return Ok(false);
    }
    let fingerprint = cluster
        .get("labelFingerprint")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let operation = gke
        .set_resource_labels(cluster_ref, &labels, fingerprint)
        .await
        .map_err(error)?;
    wait_operation_with(gke, cluster_ref, &operation, poll, |_, _| {})
        .await
        .map_err(error)?;
    Ok(true)
}
