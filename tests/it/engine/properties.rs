//! Property: whatever the spec changes among the fields gkq manages, one apply converges and the
//! next plan is empty (plan(apply(plan)) is empty).

use proptest::prelude::*;
use serde_json::json;

use crate::engine::fake_gke::FakeGke;
use crate::engine::{apply, converge, plan_against, seed};

#[derive(Debug, Clone)]
struct Edit {
    max_nodes: u32,
    min_nodes: u32,
    auto_repair: bool,
    auto_upgrade: bool,
    pool_team: Option<String>,
    cluster_team: Option<String>,
    topology: &'static str,
    dws_max_nodes: u32,
}

fn edit() -> impl Strategy<Value = Edit> {
    (
        1u32..=16,
        0u32..=4,
        any::<bool>(),
        any::<bool>(),
        proptest::option::of("[a-z]{1,8}"),
        proptest::option::of("[a-z]{1,8}"),
        prop_oneof![Just("4x4"), Just("2x4"), Just("2x2")],
        1u32..=16,
    )
        .prop_map(
            |(
                max_nodes,
                min_nodes,
                auto_repair,
                auto_upgrade,
                pool_team,
                cluster_team,
                topology,
                dws_max_nodes,
            )| Edit {
                max_nodes,
                min_nodes: min_nodes.min(max_nodes),
                auto_repair,
                auto_upgrade,
                pool_team,
                cluster_team,
                topology,
                dws_max_nodes,
            },
        )
}

fn edited(edit: &Edit) -> gkq::model::DesiredState {
    let mut desired = seed::desired();
    for pool in &mut desired.gke.node_pools {
        if pool["name"] == "on-demand-pool" {
            pool["autoscaling"]["maxNodeCount"] = json!(edit.max_nodes);
            pool["autoscaling"]["minNodeCount"] = json!(edit.min_nodes);
            pool["management"] =
                json!({"autoRepair": edit.auto_repair, "autoUpgrade": edit.auto_upgrade});
            pool["placementPolicy"]["tpuTopology"] = json!(edit.topology);
            if let Some(team) = &edit.pool_team {
                pool["config"]["resourceLabels"]["team"] = json!(team);
            }
        } else {
            pool["autoscaling"]["maxNodeCount"] = json!(edit.dws_max_nodes);
        }
    }
    if let Some(team) = &edit.cluster_team {
        desired.gke.cluster["resourceLabels"]["team"] = json!(team);
    }
    desired
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn any_managed_edit_converges_in_one_apply(edit in edit()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let api = FakeGke::new();
            converge(&api, &seed::desired()).await;
            let desired = edited(&edit);
            let plan = plan_against(&api, &desired).await;
            let (report, _) = apply(&api, &plan).await;
            assert!(report.is_success(), "{:?}", report.failures().collect::<Vec<_>>());
            let again = plan_against(&api, &desired).await;
            assert!(!again.has_changes(), "{}", gkq::render::plan::to_text(&again, false));
        });
    }
}
