//! The GKE half end to end against the fake: create, converge, in-place update, replace,
//! stockout, busy cluster, stale plans, ownership and consent.

use gkq::addr::ResourceAddr;
use gkq::apply::{ApplyError, ApplyEvent, Outcome};
use gkq::plan::{ActionKind, PlanOptions, ReplaceStrategy, Step};
use serde_json::json;

use crate::engine::fake_gke::FakeGke;
use crate::engine::seed;
use crate::engine::{apply, converge, plan_against, plan_with};

fn kinds(plan: &gkq::plan::Plan) -> Vec<(String, ActionKind)> {
    plan.changes()
        .map(|a| (a.addr.to_string(), a.kind))
        .collect()
}

#[tokio::test]
async fn creates_the_cluster_then_the_pools_and_a_second_plan_is_empty() {
    let api = FakeGke::new();
    let desired = seed::desired();

    let plan = plan_against(&api, &desired).await;
    assert_eq!(
        kinds(&plan),
        [
            ("gke.cluster/tpu-cluster".to_string(), ActionKind::Create),
            ("gke.nodepool/dws-pool".to_string(), ActionKind::Create),
            (
                "gke.nodepool/on-demand-pool".to_string(),
                ActionKind::Create
            ),
        ]
    );
    assert_eq!(
        plan.summary.to_string(),
        "Plan: 3 to create, 0 to update, 0 to replace, 0 to delete."
    );
    let pool = plan
        .action(&ResourceAddr::gke_node_pool("dws-pool"))
        .unwrap();
    assert_eq!(pool.depends_on, [ResourceAddr::gke_cluster("tpu-cluster")]);

    let (report, events) = apply(&api, &plan).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    // One call at a time, cluster first, bodies exactly as the spec rendered them.
    let calls = api.calls();
    let methods: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c.method, c.target.as_str()))
        .collect();
    assert_eq!(
        methods,
        [
            (
                "clusters.create",
                "projects/my-project/locations/us-east5-b/clusters/tpu-cluster"
            ),
            (
                "nodePools.create",
                "projects/my-project/locations/us-east5-b/clusters/tpu-cluster/nodePools/dws-pool"
            ),
            (
                "nodePools.create",
                "projects/my-project/locations/us-east5-b/clusters/tpu-cluster/nodePools/on-demand-pool"
            ),
        ]
    );
    assert_eq!(calls[0].body, desired.gke.cluster);
    assert_eq!(calls[1].body, seed::dws_pool());
    assert_eq!(calls[2].body, seed::on_demand_pool());
    let progress = events
        .events()
        .into_iter()
        .filter(|e| matches!(e, ApplyEvent::Progress { operation_type, .. } if operation_type == "CREATE_CLUSTER"))
        .count();
    assert!(progress >= 2, "operations are polled until DONE");

    // The fake answers with defaults, goog-gke labels, enum integers, dropped zero values and a
    // resolved version: none of that is a change.
    let again = plan_against(&api, &desired).await;
    assert!(
        !again.has_changes(),
        "{:#?}",
        again.changes().collect::<Vec<_>>()
    );
    assert_eq!(
        again.summary.to_string(),
        "No changes. Live state matches the spec."
    );
    assert_eq!(
        again.summary.no_op, 4,
        "cluster, default-pool, dws-pool, on-demand-pool"
    );
}

#[tokio::test]
async fn changing_max_nodes_is_an_in_place_set_autoscaling() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let desired = seed::with_pool("dws-pool", |pool| {
        pool["autoscaling"]["maxNodeCount"] = json!(8)
    });

    let plan = plan_against(&api, &desired).await;
    assert_eq!(
        kinds(&plan),
        [("gke.nodepool/dws-pool".to_string(), ActionKind::Update)]
    );
    assert_eq!(
        plan.summary.to_string(),
        "Plan: 0 to create, 1 to update, 0 to replace, 0 to delete."
    );
    let action = plan.changes().next().unwrap();
    assert_eq!(action.changes.len(), 1);
    assert_eq!(action.changes[0].path, "autoscaling.maxNodeCount");
    assert!(
        matches!(&action.steps[..], [Step::SetNodePoolAutoscaling { pool, .. }] if pool == "dws-pool")
    );
    assert!(
        action.diff.contains("+  maxNodeCount: 8"),
        "{}",
        action.diff
    );

    api.clear_calls();
    let (report, _) = apply(&api, &plan).await;
    assert!(report.is_success());
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].method, "nodePools.setAutoscaling");
    assert_eq!(calls[0].body["maxNodeCount"], 8);
    assert_eq!(calls[0].body["minNodeCount"], 0);
    assert!(!plan_against(&api, &desired).await.has_changes());
}

#[tokio::test]
async fn changing_the_tpu_topology_replaces_the_pool_with_the_reason() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let desired = seed::with_pool("on-demand-pool", |pool| {
        pool["placementPolicy"]["tpuTopology"] = json!("2x4")
    });

    let plan = plan_against(&api, &desired).await;
    assert_eq!(
        kinds(&plan),
        [(
            "gke.nodepool/on-demand-pool".to_string(),
            ActionKind::Replace
        )]
    );
    let action = plan.changes().next().unwrap();
    assert!(action.reason.contains("TPU topology"), "{}", action.reason);
    assert!(
        action.reason.contains("deleted before the new one"),
        "{}",
        action.reason
    );
    assert_eq!(
        action.replace_strategy,
        Some(ReplaceStrategy::DeleteThenCreate)
    );
    assert_eq!(action.changes[0].path, "placementPolicy.tpuTopology");

    api.clear_calls();
    let (report, _) = apply(&api, &plan).await;
    assert!(report.is_success());
    assert_eq!(
        api.accepted_calls()
            .into_iter()
            .map(|(m, _)| m)
            .collect::<Vec<_>>(),
        ["nodePools.delete", "nodePools.create"]
    );
    assert!(!plan_against(&api, &desired).await.has_changes());
}

#[tokio::test]
async fn a_stockout_names_the_pool_other_actions_go_on_and_the_next_apply_converges() {
    let api = FakeGke::new();
    let desired = seed::desired();
    api.fail_pool_create_with_stockout("dws-pool");

    let plan = plan_against(&api, &desired).await;
    let (report, events) = apply(&api, &plan).await;
    assert!(!report.is_success());
    let dws = ResourceAddr::gke_node_pool("dws-pool");
    match report.outcome(&dws) {
        Some(Outcome::Failed(error @ ApplyError::OperationFailed { message, .. })) => {
            assert!(message.contains("GCE_STOCKOUT"));
            assert!(
                error
                    .to_string()
                    .starts_with("gke.nodepool/dws-pool: nodePools.create failed"),
                "{error}"
            );
            assert!(error.hint().unwrap().contains("stockout"));
        }
        other => panic!("expected a failed operation, got {other:?}"),
    }
    // on-demand-pool comes after dws-pool in the plan and does not depend on it.
    assert!(matches!(
        report.outcome(&ResourceAddr::gke_node_pool("on-demand-pool")),
        Some(Outcome::Succeeded)
    ));
    let failed = events.events().into_iter().find_map(|e| match e {
        ApplyEvent::ActionFailed {
            addr, error, hint, ..
        } => Some((addr, error, hint)),
        _ => None,
    });
    let (addr, error, hint) = failed.expect("an ActionFailed event");
    assert_eq!(addr, dws);
    assert!(error.contains("GCE_STOCKOUT"));
    assert!(hint.is_some());

    // The failed create left the pool in ERROR: the next plan recreates it.
    api.clear_faults();
    let retry = plan_against(&api, &desired).await;
    assert_eq!(
        kinds(&retry),
        [("gke.nodepool/dws-pool".to_string(), ActionKind::Replace)]
    );
    assert!(retry.changes().next().unwrap().reason.contains("ERROR"));
    let (report, _) = apply(&api, &retry).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    assert!(!plan_against(&api, &desired).await.has_changes());
}

#[tokio::test]
async fn a_failed_cluster_create_skips_its_dependents() {
    let api = FakeGke::new();
    api.refuse_cluster_create_for_quota();
    let plan = plan_against(&api, &seed::desired()).await;
    let (report, events) = apply(&api, &plan).await;
    let cluster = ResourceAddr::gke_cluster("tpu-cluster");
    let Some(Outcome::Failed(error)) = report.outcome(&cluster) else {
        panic!("the cluster create fails")
    };
    assert!(error.to_string().contains("quota"), "{error}");
    assert!(error.hint().unwrap().contains("Quotas"));
    for pool in ["dws-pool", "on-demand-pool"] {
        assert!(matches!(
            report.outcome(&ResourceAddr::gke_node_pool(pool)),
            Some(Outcome::Skipped { because }) if *because == cluster
        ));
    }
    let skipped = events
        .events()
        .into_iter()
        .filter(|e| matches!(e, ApplyEvent::ActionSkipped { .. }))
        .count();
    assert_eq!(skipped, 2);
    assert_eq!(api.accepted_calls(), Vec::<(String, String)>::new());
}

#[tokio::test]
async fn a_busy_cluster_is_waited_out_and_the_call_retried() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let desired = seed::with_pool("dws-pool", |pool| {
        pool["autoscaling"]["maxNodeCount"] = json!(8)
    });
    let plan = plan_against(&api, &desired).await;

    let upgrade = api.start_foreign_operation(3);
    api.clear_calls();
    let (report, events) = apply(&api, &plan).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    let calls = api.calls();
    assert_eq!(calls.len(), 2, "refused once, then accepted");
    assert!(calls[0].refused && !calls[1].refused);
    let waited = events
        .events()
        .into_iter()
        .any(|e| matches!(e, ApplyEvent::Waiting { ref reason, .. } if reason.contains(&upgrade)));
    assert!(waited, "a Waiting event names the operation");
    assert!(!plan_against(&api, &desired).await.has_changes());
}

#[tokio::test]
async fn a_plan_made_stale_by_someone_else_is_refused() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let desired = seed::with_pool("dws-pool", |pool| {
        pool["autoscaling"]["maxNodeCount"] = json!(8)
    });
    let plan = plan_against(&api, &desired).await;

    api.edit_pool("dws-pool", |pool| {
        pool["autoscaling"]["maxNodeCount"] = json!(6)
    });
    api.clear_calls();
    let (report, _) = apply(&api, &plan).await;
    let Some(Outcome::Failed(error)) = report.outcome(&ResourceAddr::gke_node_pool("dws-pool"))
    else {
        panic!("the stale action is refused")
    };
    assert!(matches!(error, ApplyError::Stale { .. }));
    assert!(
        error
            .to_string()
            .contains("changed since the plan was made"),
        "{error}"
    );
    assert!(api.calls().is_empty(), "nothing was sent");

    // A change only in what the spec does not own (the autoscaler's size) is not staleness.
    let fresh = plan_against(&api, &desired).await;
    api.edit_pool("dws-pool", |pool| pool["initialNodeCount"] = json!(4));
    let (report, _) = apply(&api, &fresh).await;
    assert!(report.is_success());
}

#[tokio::test]
async fn removed_pools_are_deleted_only_if_owned_and_with_prune() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let mut without_dws = seed::desired();
    without_dws
        .gke
        .node_pools
        .retain(|p| p["name"] != "dws-pool");

    let plan = plan_against(&api, &without_dws).await;
    assert!(!plan.has_changes());
    assert!(
        plan.orphans.iter().any(|o| o.name == "dws-pool"),
        "{:#?}",
        plan.orphans
    );

    let pruning = plan_with(
        &api,
        &without_dws,
        &PlanOptions {
            prune: true,
            ..PlanOptions::default()
        },
    )
    .await;
    assert_eq!(
        kinds(&pruning),
        [("gke.nodepool/dws-pool".to_string(), ActionKind::Delete)]
    );
    let (report, _) = apply(&api, &pruning).await;
    assert!(report.is_success());
    assert!(api.pool("dws-pool").is_none());

    // A pool someone else made (no gkq labels) is never deleted.
    api.edit_pool("on-demand-pool", |pool| {
        pool["config"]["resourceLabels"] = json!({"team": "ml"})
    });
    let mut only_default = seed::desired();
    only_default.gke.node_pools.clear();
    let plan = plan_with(
        &api,
        &only_default,
        &PlanOptions {
            prune: true,
            ..PlanOptions::default()
        },
    )
    .await;
    assert!(!plan.has_changes());
    assert!(
        plan.notices
            .iter()
            .any(|n| n.message.contains("not managed by gkq"))
    );
}

#[tokio::test]
async fn an_unowned_pool_is_not_changed_without_adoption() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    api.edit_pool(
        "dws-pool",
        |pool| {
            pool["config"]["resourceLabels"] =
                json!({"team": "ml", "goog-gke-node-pool-provisioning-model": "flex-start"})
        },
    );
    let plan = plan_against(&api, &seed::desired()).await;
    let action = plan.changes().next().unwrap();
    assert_eq!(action.kind, ActionKind::Update);
    assert!(action.blocked.as_deref().unwrap().contains("ownership"));
    let (report, _) = apply(&api, &plan).await;
    assert!(matches!(
        report.outcome(&action.addr),
        Some(Outcome::Failed(ApplyError::Blocked { .. }))
    ));

    // With adoption the labels are written, keeping GKE's own.
    let adopt = plan_with(
        &api,
        &seed::desired(),
        &PlanOptions {
            adopt: true,
            ..PlanOptions::default()
        },
    )
    .await;
    let (report, _) = apply(&api, &adopt).await;
    assert!(report.is_success());
    let labels = api.pool("dws-pool").unwrap()["config"]["resourceLabels"].clone();
    assert_eq!(labels["managed-by"], "gkq");
    assert_eq!(
        labels["goog-gke-node-pool-provisioning-model"],
        "flex-start"
    );
    assert!(
        labels.get("team").is_none(),
        "the spec owns the whole label map"
    );
}

#[tokio::test]
async fn the_cluster_is_never_deleted_without_consent() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let destroy = PlanOptions {
        destroy: true,
        ..PlanOptions::default()
    };

    // Deletion protection is on in the spec: blocked even with the flag.
    let plan = plan_with(
        &api,
        &seed::desired(),
        &PlanOptions {
            allow_cluster_delete: true,
            ..destroy.clone()
        },
    )
    .await;
    assert_eq!(
        kinds(&plan),
        [("gke.cluster/tpu-cluster".to_string(), ActionKind::Delete)]
    );
    assert!(plan.actions[0].blocked.is_some());
    api.clear_calls();
    let (report, _) = apply(&api, &plan).await;
    assert!(!report.is_success());
    assert!(api.calls().is_empty());

    // Protection off but no consent (only `gkq destroy --confirm` gives it): still blocked,
    // and the refusal names the command, not an internal option.
    let mut unprotected = seed::desired();
    unprotected.gke.deletion_protection = false;
    let plan = plan_with(&api, &unprotected, &destroy).await;
    assert!(
        plan.actions[0]
            .blocked
            .as_deref()
            .unwrap()
            .contains("only with `gkq destroy --confirm CLUSTER`")
    );

    // Both: the cluster goes.
    let plan = plan_with(
        &api,
        &unprotected,
        &PlanOptions {
            allow_cluster_delete: true,
            ..destroy
        },
    )
    .await;
    assert!(plan.actions[0].blocked.is_none());
    let (report, _) = apply(&api, &plan).await;
    assert!(report.is_success());
    assert_eq!(api.accepted_calls()[0].0, "clusters.delete");
}

#[tokio::test]
async fn a_cluster_change_is_an_in_place_update_by_the_right_method() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let mut desired = seed::desired();
    desired.gke.cluster["initialClusterVersion"] = json!("1.35");
    desired.gke.cluster["resourceLabels"]["team"] = json!("ml");

    let plan = plan_against(&api, &desired).await;
    let action = plan.changes().next().unwrap();
    assert_eq!(action.kind, ActionKind::Update);
    let methods: Vec<String> = action.steps.iter().map(ToString::to_string).collect();
    assert_eq!(
        methods,
        [
            "clusters.setResourceLabels",
            "clusters.update (desiredMasterVersion)"
        ]
    );
    api.clear_calls();
    let (report, _) = apply(&api, &plan).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    let calls = api.calls();
    // GKE's own label is kept and the fingerprint from a fresh read is sent.
    assert_eq!(
        calls[0].body["resourceLabels"]["goog-gke-cluster-id-base32"],
        "abcdef"
    );
    assert_eq!(calls[0].body["labelFingerprint"], "fp-1");
    assert_eq!(calls[1].body, json!({"desiredMasterVersion": "1.35"}));
    assert!(!plan_against(&api, &desired).await.has_changes());
}

#[tokio::test]
async fn a_refused_cluster_update_does_not_stop_its_pools() {
    let api = FakeGke::new();
    let mut only_cluster = seed::desired();
    only_cluster.gke.node_pools.clear();
    converge(&api, &only_cluster).await;
    // The cluster was made by hand: no gkq labels. gkq will not relabel it without adoption, but
    // the pools it owns still go in.
    api.edit_cluster(|cluster| {
        cluster["resourceLabels"] = json!({"goog-gke-cluster-id-base32": "abcdef"})
    });
    let plan = plan_against(&api, &seed::desired()).await;
    assert_eq!(
        kinds(&plan),
        [
            ("gke.cluster/tpu-cluster".to_string(), ActionKind::Update),
            ("gke.nodepool/dws-pool".to_string(), ActionKind::Create),
            (
                "gke.nodepool/on-demand-pool".to_string(),
                ActionKind::Create
            ),
        ]
    );
    let (report, _) = apply(&api, &plan).await;
    assert!(matches!(
        report.outcome(&ResourceAddr::gke_cluster("tpu-cluster")),
        Some(Outcome::Failed(ApplyError::Blocked { .. }))
    ));
    for pool in ["dws-pool", "on-demand-pool"] {
        assert!(matches!(
            report.outcome(&ResourceAddr::gke_node_pool(pool)),
            Some(Outcome::Succeeded)
        ));
    }
}
