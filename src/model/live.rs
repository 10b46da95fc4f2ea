//! What the observers saw, as plain data: the live GKE cluster (with its node pools) and the
//! Kubernetes objects gkq compares with the spec. `observe/` fills it; the planner reads it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::addr::ResourceAddr;

/// Everything observed, ready for [`crate::plan::plan`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveState {
    pub gke: GkeLive,
    pub kubernetes: KubeLive,
}

/// The live GKE cluster as `clusters.get` returned it, `nodePools[]` included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GkeLive {
    /// `None` when the cluster does not exist.
    pub cluster: Option<Value>,
}

impl GkeLive {
    pub fn node_pools(&self) -> BTreeMap<String, &Value> {
        self.cluster
            .as_ref()
            .and_then(|c| c.get("nodePools"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|pool| Some((pool.get("name")?.as_str()?.to_string(), pool)))
            .collect()
    }

    pub fn node_pool(&self, name: &str) -> Option<&Value> {
        self.cluster
            .as_ref()?
            .get("nodePools")?
            .as_array()?
            .iter()
            .find(|pool| pool.get("name").and_then(Value::as_str) == Some(name))
    }
}

/// What the Kubernetes observer saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum KubeLive {
    /// No Kubernetes observer ran: Kubernetes objects are left out of the plan, with a notice.
    #[default]
    NotObserved,
    /// Every desired object, and every object gkq owns, by address. Before the cluster exists the
    /// map is empty, which plans every object as a create.
    Observed {
        objects: BTreeMap<ResourceAddr, KubeObject>,
    },
}

/// One Kubernetes object as observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeObject {
    /// The live object, `None` if it does not exist.
    #[serde(default)]
    pub live: Option<Value>,
    /// What the desired object would become, from a server-side apply dry-run; `None` when the
    /// server could not say (CRD not installed yet): such values are "known after apply".
    #[serde(default)]
    pub predicted: Option<Value>,
}

/// The cluster's world as read from Kubernetes (`observe::cluster`): every object of each kind
/// read, by kind, unfiltered. A kind the API server does not serve (Kueue not installed yet) is
/// absent.
#[derive(Debug, Clone, Default)]
pub struct KubeSnapshot {
    pub by_kind: BTreeMap<&'static str, Vec<Value>>,
}

impl KubeSnapshot {
    /// The objects of `kind`; none when the kind was not read.
    pub fn kind(&self, kind: &str) -> &[Value] {
        self.by_kind
            .get(kind)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_pools_are_read_from_the_cluster() {
        let gke = GkeLive {
            cluster: Some(json!({"name": "c", "nodePools": [{"name": "a"}, {"name": "b"}]})),
        };
        assert_eq!(gke.node_pools().keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(gke.node_pool("b"), Some(&json!({"name": "b"})));
        assert_eq!(gke.node_pool("z"), None);
    }
}
