//! The engine with gkq's real GKE client against the in-process GKE emulator (operations that
//! take time, enum integers on the wire, server defaults, faults): the shipped example is
//! created, converges, takes an in-place autoscaling change while the cluster is busy, and gets
//! its pool recreated after a stockout.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gkq::addr::ResourceAddr;
use gkq::apply::{
    ApplyError, ApplyEvent, ApplyOptions, ApplyReport, Executor, Outcome, PollConfig, RecordingSink,
};
use gkq::emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fault, FaultRule};
use gkq::gitops::tree::WorkingTree;
use gkq::gke::{AnonymousTokenSource, GkeApi, RestGke};
use gkq::model::DesiredState;
use gkq::observe::observe_gke;
use gkq::plan::{ActionKind, Plan, PlanOptions, plan};
use gkq::spec::LoadOptions;
use serde_json::json;

fn example() -> DesiredState {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tpu-dws");
    let loaded = gkq::spec::load(&WorkingTree, &path, &LoadOptions::default())
        .unwrap_or_else(|failure| panic!("the example loads: {:?}", failure.diagnostics));
    let (desired, diagnostics) = gkq::model::build(&loaded);
    desired.unwrap_or_else(|| panic!("the example is valid: {diagnostics:?}"))
}

async fn start() -> (RestGke, EmulatorHandle) {
    let config = EmulatorConfig {
        pending_ms: 20,
        running_ms: 30,
        ..EmulatorConfig::default()
    };
    let (url, handle) = Emulator::start_in_process(config)
        .await
        .expect("the emulator starts");
    let api = RestGke::with_endpoint(&url, Arc::new(AnonymousTokenSource)).expect("a client");
    (api, handle)
}

async fn plan_of(api: &RestGke, desired: &DesiredState) -> Plan {
    let live = observe_gke(api, desired)
        .await
        .expect("the emulator answers reads");
    plan(desired, &live, &PlanOptions::default()).expect("the example plans")
}

async fn run(api: &RestGke, plan: &Plan) -> (ApplyReport, RecordingSink) {
    let sink = RecordingSink::new();
    let poll = PollConfig {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(50),
        ..PollConfig::default()
    };
    let report = Executor::new(api, &sink)
        .with_options(ApplyOptions {
            poll,
            ..ApplyOptions::default()
        })
        .apply(plan)
        .await;
    (report, sink)
}

fn pool_mut<'d>(desired: &'d mut DesiredState, name: &str) -> &'d mut serde_json::Value {
    desired
        .gke
        .node_pools
        .iter_mut()
        .find(|p| p["name"] == name)
        .expect("the example has this pool")
}

#[tokio::test]
async fn the_example_against_the_emulator() {
    let (api, handle) = start().await;
    let emulator = handle.emulator();
    let desired = example();

    // Create: the cluster, then both pools, with the bodies the spec rendered.
    let first = plan_of(&api, &desired).await;
    assert_eq!(
        first.summary.to_string(),
        "Plan: 3 to create, 0 to update, 0 to replace, 0 to delete."
    );
    let (report, _) = run(&api, &first).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    let creates: Vec<_> = emulator
        .requests()
        .into_iter()
        .filter(|r| {
            r.method == "POST" && (r.path.ends_with("/clusters") || r.path.ends_with("/nodePools"))
        })
        .collect();
    assert_eq!(creates.len(), 3);
    assert_eq!(
        creates[0].body.as_ref().unwrap()["cluster"],
        desired.gke.cluster
    );
    assert_eq!(
        creates[1].body.as_ref().unwrap()["nodePool"]["name"],
        "dws-pool"
    );

    // What the emulator answers (defaults, goog-gke labels, resolved versions) is no change.
    let second = plan_of(&api, &desired).await;
    assert!(
        !second.has_changes(),
        "{}",
        gkq::render::plan::to_text(&second, false)
    );

    // Max nodes, while someone else's operation keeps the cluster busy.
    let mut wider = desired.clone();
    pool_mut(&mut wider, "dws-pool")["autoscaling"]["maxNodeCount"] = json!(8);
    let update = plan_of(&api, &wider).await;
    assert_eq!(
        update.summary.to_string(),
        "Plan: 0 to create, 1 to update, 0 to replace, 0 to delete."
    );
    api.set_node_pool_size(&desired.gke.cluster_ref, "on-demand-pool", 0)
        .await
        .expect("a resize starts");
    let (report, events) = run(&api, &update).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    assert!(
        events
            .events()
            .iter()
            .any(|e| matches!(e, ApplyEvent::Waiting { .. })),
        "the busy cluster was waited out"
    );
    assert!(!plan_of(&api, &wider).await.has_changes());

    // A topology change replaces the pool; a stockout fails it with a clear error, and the next
    // apply recreates the pool the failed create left in ERROR.
    let mut reshaped = wider.clone();
    pool_mut(&mut reshaped, "on-demand-pool")["placementPolicy"]["tpuTopology"] = json!("2x4");
    let replace = plan_of(&api, &reshaped).await;
    let action = replace.changes().next().expect("one change");
    assert_eq!(action.kind, ActionKind::Replace);
    assert!(action.reason.contains("TPU topology"));
    emulator.add_fault(
        FaultRule::new("POST", "*/nodePools", Fault::Stockout { message: None }).times(1),
    );
    let (report, _) = run(&api, &replace).await;
    let pool = ResourceAddr::gke_node_pool("on-demand-pool");
    match report.outcome(&pool) {
        Some(Outcome::Failed(error @ ApplyError::OperationFailed { .. })) => {
            assert!(
                error.to_string().contains("gke.nodepool/on-demand-pool"),
                "{error}"
            );
            assert!(error.to_string().contains("GCE_STOCKOUT"), "{error}");
            assert!(error.hint().is_some_and(|h| h.contains("stockout")));
        }
        other => panic!("expected a stockout, got {other:?}"),
    }
    let retry = plan_of(&api, &reshaped).await;
    assert!(
        retry
            .changes()
            .next()
            .is_some_and(|a| a.reason.contains("ERROR"))
    );
    let (report, _) = run(&api, &retry).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    assert!(!plan_of(&api, &reshaped).await.has_changes());

    handle.shutdown().await;
}
