//! The seed walk-through's GKE half as a hand-built `DesiredState` (the spec loader builds the
//! same from `examples/`): cluster tpu-cluster in us-east5-b with its default pool, the on-demand
//! TPU v6e 4x4 pool (Plan A) and the DWS flex-start pool with queued provisioning (Plan B).

use std::collections::BTreeMap;

use gkq::addr::ClusterRef;
use gkq::model::{DesiredState, GkeDesired, KueueInstall};
use gkq::spec::types::InstallMode;
use serde_json::{Value, json};

pub const SCOPES: [&str; 6] = [
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/service.management.readonly",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/trace.append",
];

fn labels() -> Value {
    json!({"managed-by": "gkq", "gkq-stack": "tpu-cluster"})
}

pub fn on_demand_pool() -> Value {
    json!({
        "name": "on-demand-pool",
        "initialNodeCount": 0,
        "config": {
            "machineType": "ct6e-standard-4t",
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "resourceLabels": labels()
        },
        "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
        "placementPolicy": {"tpuTopology": "4x4"}
    })
}

pub fn dws_pool() -> Value {
    json!({
        "name": "dws-pool",
        "initialNodeCount": 0,
        "config": {
            "machineType": "ct6e-standard-4t",
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "flexStart": true,
            "resourceLabels": labels()
        },
        "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
        "management": {"autoRepair": false, "autoUpgrade": true},
        "placementPolicy": {"tpuTopology": "4x4"},
        "queuedProvisioning": {"enabled": true}
    })
}

pub fn cluster_ref() -> ClusterRef {
    ClusterRef {
        project: "my-project".into(),
        location: "us-east5-b".into(),
        cluster: "tpu-cluster".into(),
    }
}

pub fn desired() -> DesiredState {
    DesiredState {
        gke: GkeDesired {
            cluster_ref: cluster_ref(),
            cluster: json!({
                "name": "tpu-cluster",
                "initialClusterVersion": "1.34",
                "nodePools": [{
                    "name": "default-pool",
                    "initialNodeCount": 3,
                    "config": {"machineType": "n2-standard-16", "oauthScopes": SCOPES, "resourceLabels": labels()},
                    "management": {"autoRepair": true, "autoUpgrade": true}
                }],
                "addonsConfig": {"rayOperatorConfig": {"enabled": true}},
                "nodePoolDefaults": {"nodeConfigDefaults": {"gcfsConfig": {"enabled": true}}},
                "resourceLabels": labels()
            }),
            node_pools: vec![on_demand_pool(), dws_pool()],
            deletion_protection: true,
        },
        kueue: KueueInstall {
            version: "v0.19.2".into(),
            mode: InstallMode::Managed,
            manifests: KueueInstall::default_manifests("v0.19.2"),
            feature_gates: BTreeMap::from([("ElasticJobsViaWorkloadSlices".to_string(), true)]),
            manages_jobsets: true,
        },
        kubernetes: Vec::new(),
        sensitive: Default::default(),
    }
}

/// The desired state with one node pool edited.
pub fn with_pool(edit_pool: &str, edit: impl FnOnce(&mut Value)) -> DesiredState {
    let mut desired = desired();
    if let Some(pool) = desired
        .gke
        .node_pools
        .iter_mut()
        .find(|p| p["name"] == edit_pool)
    {
        edit(pool);
    }
    desired
}
