//! The node pools' sizes a watch's stuck checks read.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::model::gke::node_pool_limits;
use crate::report::timeline::PoolSize;

/// Each node pool's autoscaling maximum and machine type (from the spec) and current node count
/// (from the Kubernetes Nodes labelled with it). The maximum is the whole pool's autoscaling
/// maximum, by the one rule (`model::gke::node_pool_limits`).
pub(super) fn pool_sizes(pools: &[Value], nodes: &[Value]) -> BTreeMap<String, PoolSize> {
    let mut sizes: BTreeMap<String, PoolSize> = pools
        .iter()
        .filter_map(|pool| {
            let name = pool.get("name")?.as_str()?.to_string();
            let limits = node_pool_limits(pool);
            let max = limits
                .autoscaled
                .then(|| usize::try_from(limits.max).ok())
                .flatten();
            let machine_type = pool
                .pointer("/config/machineType")
                .and_then(Value::as_str)
                .map(str::to_string);
            Some((
                name,
                PoolSize {
                    nodes: 0,
                    max,
                    machine_type,
                },
            ))
        })
        .collect();
    for node in nodes {
        if let Some(pool) = node
            .pointer("/metadata/labels/cloud.google.com~1gke-nodepool")
            .and_then(Value::as_str)
        {
            sizes.entry(pool.to_string()).or_default().nodes += 1;
        }
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The stuck checks learn how much a pool can ever hold: its machine type, and its maximum
    /// over every zone it runs in.
    #[test]
    fn pool_sizes_carry_machine_type_and_the_whole_pools_maximum() {
        let pools = [
            json!({"name": "tpu", "config": {"machineType": "ct6e-standard-4t"},
                "autoscaling": {"enabled": true, "maxNodeCount": 4}}),
            json!({"name": "wide", "config": {"machineType": "n2-standard-8"},
                "locations": ["us-east5-a", "us-east5-b"], "autoscaling": {"maxNodeCount": 3}}),
        ];
        let nodes = [json!({"metadata": {"labels": {"cloud.google.com/gke-nodepool": "tpu"}}})];
        let sizes = pool_sizes(&pools, &nodes);
        assert_eq!(
            sizes["tpu"],
            PoolSize {
                nodes: 1,
                max: Some(4),
                machine_type: Some("ct6e-standard-4t".into())
            }
        );
        assert_eq!(sizes["wide"].max, Some(6));
    }
}
