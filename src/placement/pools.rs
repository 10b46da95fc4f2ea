//! Which node pool each Kueue ResourceFlavor stands for: the flavor's node label
//! `cloud.google.com/gke-nodepool`, as GKE labels every node of a pool.

use std::collections::BTreeMap;

use serde_json::Value;

use super::objects::{Cluster, ResourceFlavor};
use crate::vocab::labels::NODE_POOL_LABEL;

/// The node pool a flavor selects through `cloud.google.com/gke-nodepool`, if it does.
pub fn node_pool_of(flavor: &ResourceFlavor) -> Option<&str> {
    flavor.node_labels.get(NODE_POOL_LABEL).map(String::as_str)
}

/// Flavor -> node pool ([`node_pool_of`]) for the ResourceFlavor objects among `objects`.
pub fn flavor_pools<'a>(objects: impl IntoIterator<Item = &'a Value>) -> BTreeMap<String, String> {
    let mut cluster = Cluster::default();
    for object in objects
        .into_iter()
        .filter(|o| o["kind"] == "ResourceFlavor")
    {
        let _ = cluster.add_object(object);
    }
    cluster
        .resource_flavors
        .iter()
        .filter_map(|f| Some((f.name.clone(), node_pool_of(f)?.to_string())))
        .collect()
}
