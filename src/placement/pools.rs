//! Which nodes each Kueue ResourceFlavor stands for: a node pool, by the flavor's node label
//! `cloud.google.com/gke-nodepool` (GKE labels every node of a pool), or the pools of a GKE
//! ComputeClass, by `cloud.google.com/compute-class` (GKE labels the nodes it creates for a class
//! with it, docs/gke-facts.md L1). The simulated Kueue and autoscaler, the plan and the status
//! report all read flavors through these functions.

use std::collections::BTreeMap;

use serde_json::Value;

use super::objects::{Cluster, ResourceFlavor};
use crate::vocab::labels::{COMPUTE_CLASS_LABEL, NODE_POOL_LABEL};

/// The nodes a flavor's podsets go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlavorNodes {
    /// The nodes of one node pool.
    Pool(String),
    /// The nodes of the pools of a ComputeClass (GKE's auto-created ones, or hand-made pools
    /// labelled with the class), chosen when GKE scales up.
    ComputeClass(String),
}

/// The node pool a flavor selects through `cloud.google.com/gke-nodepool`, if it does.
pub fn node_pool_of(flavor: &ResourceFlavor) -> Option<&str> {
    flavor.node_labels.get(NODE_POOL_LABEL).map(String::as_str)
}

/// The ComputeClass a flavor selects through `cloud.google.com/compute-class`, if it does.
pub fn compute_class_of(flavor: &ResourceFlavor) -> Option<&str> {
    flavor
        .node_labels
        .get(COMPUTE_CLASS_LABEL)
        .map(String::as_str)
}

/// The nodes of a flavor: its node pool, else its ComputeClass.
pub fn nodes_of(flavor: &ResourceFlavor) -> Option<FlavorNodes> {
    node_pool_of(flavor)
        .map(|p| FlavorNodes::Pool(p.to_string()))
        .or_else(|| compute_class_of(flavor).map(|c| FlavorNodes::ComputeClass(c.to_string())))
}

/// Whether a node pool (its name and the labels GKE puts on its nodes besides the pool's own)
/// serves a flavor's nodes: the pool itself, or a pool of the flavor's ComputeClass.
pub fn serves(nodes: &FlavorNodes, pool: &str, labels: &BTreeMap<String, String>) -> bool {
    match nodes {
        FlavorNodes::Pool(p) => p == pool,
        FlavorNodes::ComputeClass(c) => labels.get(COMPUTE_CLASS_LABEL) == Some(c),
    }
}

fn resource_flavors<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Vec<ResourceFlavor> {
    let mut cluster = Cluster::default();
    for object in objects
        .into_iter()
        .filter(|o| o["kind"] == "ResourceFlavor")
    {
        let _ = cluster.add_object(object);
    }
    cluster.resource_flavors
}

/// Flavor -> node pool ([`node_pool_of`]) for the ResourceFlavor objects among `objects`.
pub fn flavor_pools<'a>(objects: impl IntoIterator<Item = &'a Value>) -> BTreeMap<String, String> {
    resource_flavors(objects)
        .iter()
        .filter_map(|f| Some((f.name.clone(), node_pool_of(f)?.to_string())))
        .collect()
}

/// Flavor -> its nodes ([`nodes_of`]) for the ResourceFlavor objects among `objects`.
pub fn flavor_nodes<'a>(
    objects: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<String, FlavorNodes> {
    resource_flavors(objects)
        .iter()
        .filter_map(|f| Some((f.name.clone(), nodes_of(f)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_flavor_selects_a_pool_or_the_pools_of_a_compute_class() {
        let flavors = [
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": "dws"},
                "spec": {"nodeLabels": {NODE_POOL_LABEL: "dws-pool"}}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": "ladder"},
                "spec": {"nodeLabels": {COMPUTE_CLASS_LABEL: "tpu-ladder"}}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": "any"}, "spec": {}}),
        ];
        let nodes = flavor_nodes(&flavors);
        assert_eq!(nodes["dws"], FlavorNodes::Pool("dws-pool".into()));
        assert_eq!(
            nodes["ladder"],
            FlavorNodes::ComputeClass("tpu-ladder".into())
        );
        assert!(!nodes.contains_key("any"));
        assert_eq!(flavor_pools(&flavors).len(), 1);
        let class = BTreeMap::from([(COMPUTE_CLASS_LABEL.to_string(), "tpu-ladder".to_string())]);
        assert!(serves(&nodes["ladder"], "gk-tpu-ladder-1", &class));
        assert!(!serves(
            &nodes["ladder"],
            "gk-tpu-ladder-1",
            &BTreeMap::new()
        ));
        assert!(serves(&nodes["dws"], "dws-pool", &BTreeMap::new()));
    }
}
