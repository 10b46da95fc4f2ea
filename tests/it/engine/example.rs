//! The shipped example (`examples/tpu-dws`), loaded and rendered by the spec pipeline, planned and
//! applied against the GKE fake: request bodies as rendered, then an empty plan.

use std::path::Path;

use gkq::gitops::tree::WorkingTree;
use gkq::model::DesiredState;
use gkq::spec::LoadOptions;

use crate::engine::fake_gke::FakeGke;
use crate::engine::{apply, plan_against};

fn example() -> DesiredState {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tpu-dws");
    let loaded = gkq::spec::load(&WorkingTree, &path, &LoadOptions::default())
        .unwrap_or_else(|failure| panic!("the example loads: {:?}", failure.diagnostics));
    let (desired, diagnostics) = gkq::model::build(&loaded);
    desired.unwrap_or_else(|| panic!("the example is valid: {diagnostics:?}"))
}

#[tokio::test]
async fn the_example_converges_and_then_plans_no_changes() {
    let api = FakeGke::new();
    let desired = example();

    let plan = plan_against(&api, &desired).await;
    assert_eq!(
        plan.summary.to_string(),
        "Plan: 3 to create, 0 to update, 0 to replace, 0 to delete."
    );
    // Kubernetes objects wait for the Kubernetes observer, and the plan says so.
    assert!(
        plan.notices
            .iter()
            .any(|n| n.message.contains("Kubernetes object(s) not compared"))
    );

    let (report, _) = apply(&api, &plan).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    let calls = api.calls();
    assert_eq!(calls[0].body, desired.gke.cluster);
    assert_eq!(calls[1].body["name"], "dws-pool");
    assert_eq!(
        &calls[1].body,
        desired
            .gke
            .node_pools
            .iter()
            .find(|p| p["name"] == "dws-pool")
            .unwrap()
    );

    let again = plan_against(&api, &desired).await;
    assert!(
        !again.has_changes(),
        "{}",
        gkq::render::plan::to_text(&again, false)
    );
}
