//! Tests for the plan/apply engine: observe, plan and apply the seed's GKE half against an
//! in-memory GKE fake, and render the plans.

mod concurrency;
mod emulator;
mod example;
mod fake_gke;
mod gke_scenarios;
mod kube_extension;
mod properties;
mod render;
mod seed;

use gkq::apply::{ApplyOptions, ApplyReport, Executor, PollConfig, RecordingSink};
use gkq::model::DesiredState;
use gkq::observe::observe_gke;
use gkq::plan::{Plan, PlanOptions, plan};

use fake_gke::FakeGke;

/// Observes the fake and plans with default options.
pub async fn plan_against(api: &FakeGke, desired: &DesiredState) -> Plan {
    plan_with(api, desired, &PlanOptions::default()).await
}

pub async fn plan_with(api: &FakeGke, desired: &DesiredState, options: &PlanOptions) -> Plan {
    let live = observe_gke(api, desired)
        .await
        .expect("the fake answers reads");
    plan(desired, &live, options).expect("the seed plans")
}

/// Applies a plan with no waiting between polls; returns the report and the events.
pub async fn apply(api: &FakeGke, plan: &Plan) -> (ApplyReport, RecordingSink) {
    let sink = RecordingSink::new();
    let report = Executor::new(api, &sink)
        .with_options(ApplyOptions {
            poll: PollConfig::immediate(),
            ..ApplyOptions::default()
        })
        .apply(plan)
        .await;
    (report, sink)
}

/// Plans and applies until converged, asserting success.
pub async fn converge(api: &FakeGke, desired: &DesiredState) {
    let plan = plan_against(api, desired).await;
    let (report, _) = apply(api, &plan).await;
    assert!(
        report.is_success(),
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
}
