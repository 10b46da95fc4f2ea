//! GKE faults: bursts of 5xx and 429 answers, an operation that fails mid-way and polls that keep
//! failing. Whatever the first apply reports, running apply again converges: the plan is empty,
//! and the cluster has exactly the spec's pools, each created once.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gkq::apply::{ApplyOptions, ApplyReport, Executor, PollConfig, RecordingSink};
use gkq::emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fault, FaultRule};
use gkq::gitops::tree::WorkingTree;
use gkq::gke::{AnonymousTokenSource, GkeApi, RestGke};
use gkq::model::DesiredState;
use gkq::observe::observe_gke;
use gkq::plan::{Plan, PlanOptions, plan};
use gkq::spec::LoadOptions;

/// The example's GKE half (its Kubernetes objects need a cluster; other tests cover them).
fn example() -> DesiredState {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tpu-dws");
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = gkq::spec::load(&WorkingTree, &path, &opts)
        .unwrap_or_else(|f| panic!("the example loads: {:?}", f.diagnostics));
    let (desired, diagnostics) = gkq::model::build(&loaded);
    let mut desired = desired.unwrap_or_else(|| panic!("the example is valid: {diagnostics:?}"));
    desired.kubernetes.clear();
    desired
}

async fn start() -> (RestGke, EmulatorHandle) {
    let config = EmulatorConfig {
        pending_ms: 20,
        running_ms: 40,
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
        .expect("reads succeed once the bursts are over");
    plan(desired, &live, &PlanOptions::default()).expect("the example plans")
}

async fn apply(api: &RestGke, plan: &Plan) -> ApplyReport {
    let sink = RecordingSink::new();
    let poll = PollConfig {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(40),
        poll_error_retries: 2,
        ..PollConfig::default()
    };
    Executor::new(api, &sink)
        .with_options(ApplyOptions {
            poll,
            ..ApplyOptions::default()
        })
        .apply(plan)
        .await
}

/// Plans and applies until the plan is empty (at most `rounds` applies); returns each report.
async fn converge(api: &RestGke, desired: &DesiredState, rounds: usize) -> Vec<ApplyReport> {
    let mut reports = Vec::new();
    for _ in 0..rounds {
        // A pool whose operation outlived a failed poll finishes on its own; plan once it has.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let p = plan_of(api, desired).await;
        if !p.has_changes() {
            return reports;
        }
        reports.push(apply(api, &p).await);
    }
    let last = plan_of(api, desired).await;
    assert!(
        !last.has_changes(),
        "not converged after {rounds} applies:\n{}\nreports: {reports:#?}",
        gkq::render::plan::to_text(&last, false)
    );
    reports
}

/// The cluster has exactly the desired pools, and each create reached GKE's state once.
async fn assert_exactly_the_spec(api: &RestGke, handle: &EmulatorHandle, desired: &DesiredState) {
    let cluster = &desired.gke.cluster_ref;
    let pools: Vec<String> = api
        .list_node_pools(cluster)
        .await
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut want: Vec<String> = desired
        .gke
        .node_pools
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    want.push("default-pool".into());
    let mut got = pools.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "node pools");
    let mut accepted: BTreeMap<String, usize> = BTreeMap::new();
    for r in handle.emulator().requests() {
        if r.method == "POST" && r.status == 200 {
            if r.path.ends_with("/clusters") {
                *accepted.entry("cluster".into()).or_default() += 1;
            } else if r.path.ends_with("/nodePools") {
                let name = r.body.as_ref().unwrap()["nodePool"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string();
                *accepted.entry(name).or_default() += 1;
            }
        }
    }
    assert_eq!(
        accepted.get("cluster"),
        Some(&1),
        "creates accepted: {accepted:?}"
    );
    for name in ["on-demand-pool", "dws-pool"] {
        assert!(
            accepted.contains_key(name),
            "creates accepted: {accepted:?}"
        );
    }
}

#[tokio::test]
async fn bursts_of_5xx_and_429_end_converged() {
    let (api, handle) = start().await;
    let emulator = handle.emulator();
    let desired = example();
    // Every call is refused for a while, the operation polls are rate limited, and the cluster
    // create fails with a 500 whose outcome the client cannot know.
    emulator.add_fault(FaultRule::new("*", "*", Fault::Unavailable).times(4));
    emulator.add_fault(
        FaultRule::new(
            "GET",
            "*/operations/*",
            Fault::RateLimited {
                retry_after_secs: Some(1),
            },
        )
        .after(1)
        .times(2),
    );
    emulator.add_fault(
        FaultRule::new(
            "POST",
            "*/clusters",
            Fault::Http {
                status: 500,
                rpc_status: "INTERNAL".into(),
                message: "backend error".into(),
                reason: None,
            },
        )
        .times(1),
    );
    emulator.add_fault(FaultRule::new("*", "*/nodePools*", Fault::TooManyOperations).times(2));
    converge(&api, &desired, 3).await;
    for rule in emulator.faults() {
        assert!(rule.fired > 0, "a fault never fired: {rule:?}");
    }
    assert_exactly_the_spec(&api, &handle, &desired).await;
    handle.shutdown().await;
}

#[tokio::test]
async fn an_operation_that_fails_mid_way_and_polls_that_fail_end_converged_on_rerun() {
    let (api, handle) = start().await;
    let emulator = handle.emulator();
    let desired = example();
    // The first pool's create is accepted and its operation ends in an error (a stockout leaves
    // the pool in ERROR); the second pool's operation cannot be polled: the apply gives up on it
    // while GKE carries on.
    emulator.add_fault(
        FaultRule::new("POST", "*/nodePools", Fault::Stockout { message: None }).times(1),
    );
    emulator.add_fault(
        FaultRule::new(
            "GET",
            "*/operations/*",
            Fault::Http {
                status: 403,
                rpc_status: "PERMISSION_DENIED".into(),
                message: "injected: operations.get denied".into(),
                reason: None,
            },
        )
        .after(4)
        .times(3),
    );
    let reports = converge(&api, &desired, 4).await;
    let first = reports.first().expect("at least one apply ran");
    assert!(
        !first.is_success(),
        "the first apply reports the failures: {first:#?}"
    );
    assert!(reports.len() >= 2, "{reports:#?}");
    assert!(reports.last().unwrap().is_success(), "{reports:#?}");
    assert_exactly_the_spec(&api, &handle, &desired).await;
    handle.shutdown().await;
}
