//! Plan and apply renderers: the JSON shape and its checked-in schema, text and markdown, and
//! snapshots of each (plan text, JSON and markdown, apply progress lines and JSON lines).

use std::path::PathBuf;

use gkq::apply::{ApplyEvent, Sink};
use gkq::plan::Plan;
use gkq::render;
use gkq::render::apply::{JsonLinesSink, TerminalSink};
use indicatif::ProgressDrawTarget;
use serde_json::{Value, json};

use crate::engine::fake_gke::FakeGke;
use crate::engine::{apply, converge, plan_against, seed};

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas/plan.schema.json")
}

/// A plan with an update and a replace, the interesting case for renderers.
async fn update_and_replace_plan() -> Plan {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let mut desired = seed::with_pool("dws-pool", |pool| {
        pool["autoscaling"]["maxNodeCount"] = json!(8)
    });
    if let Some(pool) = desired
        .gke
        .node_pools
        .iter_mut()
        .find(|p| p["name"] == "on-demand-pool")
    {
        pool["placementPolicy"]["tpuTopology"] = json!("2x4");
    }
    plan_against(&api, &desired).await
}

#[test]
fn checked_in_schema_matches_the_types() {
    let generated = serde_json::to_string_pretty(&Plan::json_schema()).unwrap() + "\n";
    if std::env::var_os("GKQ_UPDATE_SCHEMAS").is_some() {
        std::fs::create_dir_all(schema_path().parent().unwrap()).unwrap();
        std::fs::write(schema_path(), &generated).unwrap();
    }
    let checked_in =
        std::fs::read_to_string(schema_path()).expect("schemas/plan.schema.json exists");
    assert_eq!(
        checked_in, generated,
        "schemas/plan.schema.json is out of date: run GKQ_UPDATE_SCHEMAS=1 cargo test --test it engine::render::"
    );
}

#[tokio::test]
async fn plan_json_validates_against_the_schema_and_round_trips() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    for plan in [
        plan_against(&FakeGke::new(), &seed::desired()).await,
        update_and_replace_plan().await,
    ] {
        let json: Value = serde_json::from_str(&render::plan::to_json(&plan)).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&json)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        assert_eq!(json["formatVersion"], 1);
        assert_eq!(json["actions"][0]["addr"], "gke.cluster/tpu-cluster");
        let back: Plan = serde_json::from_value(json).unwrap();
        assert_eq!(back, plan);
    }
}

#[tokio::test]
async fn text_is_terraform_like() {
    let plan = update_and_replace_plan().await;
    let text = render::plan::to_text(&plan, false);
    assert!(text.contains("  ~ gke.nodepool/dws-pool\n"), "{text}");
    assert!(text.contains("-/+ gke.nodepool/on-demand-pool\n"), "{text}");
    assert!(text.contains("# gke.nodepool/on-demand-pool must be replaced (destroy, then create)"));
    assert!(
        text.contains("~ autoscaling.maxNodeCount: 4 -> 8\n"),
        "{text}"
    );
    // The API method once per object: on its `API calls` line.
    assert_eq!(
        text.matches("nodePools.setAutoscaling").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("API calls: nodePools.setAutoscaling\n"),
        "{text}"
    );
    assert!(
        text.contains("~ placementPolicy.tpuTopology: \"4x4\" -> \"2x4\" # forces replacement\n"),
        "{text}"
    );
    assert!(text.contains("API calls: nodePools.delete, then nodePools.create"));
    assert!(text.contains("Plan: 0 to create, 1 to update, 1 to replace, 0 to delete.\n"));
    assert!(!text.contains('\u{1b}'), "no ANSI escapes without colour");
    assert!(render::plan::to_text(&plan, true).contains('\u{1b}'));

    let empty = plan_against(&FakeGke::new(), &seed::desired()).await;
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let converged = plan_against(&api, &seed::desired()).await;
    assert_eq!(
        render::plan::to_text(&converged, false),
        "No changes. Live state matches the spec.\n"
    );
    assert!(render::plan::to_text(&empty, false).contains("  + gke.cluster/tpu-cluster\n"));
}

#[tokio::test]
async fn markdown_calls_out_replacements_and_folds_diffs() {
    let plan = update_and_replace_plan().await;
    let md = render::plan::to_markdown(&plan);
    assert!(md.contains("**Plan: 0 to create, 1 to update, 1 to replace, 0 to delete.**"));
    assert!(md.contains("> [!WARNING]"));
    assert!(md.contains("`gke.nodepool/on-demand-pool` is **replaced**"));
    assert!(md.contains(
        "<details><summary><code>gke.nodepool/dws-pool</code>: update in-place</summary>"
    ));
    assert!(md.contains("```diff\n--- live\n+++ desired\n"));
    assert_eq!(md.matches("<details>").count(), 2);
    assert_eq!(md.matches("</details>").count(), 2);
}

// ---------------------------------------------------------------- snapshots
//
// What users read, whole: the text and JSON of a representative plan (a create of everything,
// and an update beside a replace) and the progress lines of its apply. Review changes with
// `INSTA_UPDATE=always cargo test --test it engine::render::` and `git diff tests/it/engine/snapshots`.

#[tokio::test]
async fn plan_text_snapshots() {
    let create = plan_against(&FakeGke::new(), &seed::desired()).await;
    insta::assert_snapshot!("plan_text_create", render::plan::to_text(&create, false));
    let change = update_and_replace_plan().await;
    insta::assert_snapshot!(
        "plan_text_update_and_replace",
        render::plan::to_text(&change, false)
    );
}

#[tokio::test]
async fn plan_json_snapshot() {
    let plan = update_and_replace_plan().await;
    let json: Value = serde_json::from_str(&render::plan::to_json(&plan)).unwrap();
    insta::assert_json_snapshot!("plan_json_update_and_replace", json);
}

#[tokio::test]
async fn markdown_snapshot() {
    let plan = update_and_replace_plan().await;
    insta::assert_snapshot!(
        "plan_markdown_update_and_replace",
        render::plan::to_markdown(&plan)
    );
}

/// A writer the test reads back.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The events of applying `plan` to `api`, with every elapsed time set to 0 so that the
/// rendering does not depend on the machine's speed.
async fn apply_events(api: &FakeGke, plan: &Plan) -> Vec<ApplyEvent> {
    let (report, sink) = apply(api, plan).await;
    assert!(report.is_success());
    let mut events = sink.events();
    for event in &mut events {
        match event {
            ApplyEvent::Progress { elapsed_ms, .. }
            | ApplyEvent::Waiting { elapsed_ms, .. }
            | ApplyEvent::ActionFinished { elapsed_ms, .. }
            | ApplyEvent::ApplyFinished { elapsed_ms, .. } => *elapsed_ms = 0,
            _ => {}
        }
    }
    events
}

#[tokio::test]
async fn apply_progress_snapshots() {
    let api = FakeGke::new();
    converge(&api, &seed::desired()).await;
    let desired = seed::with_pool("dws-pool", |pool| {
        pool["autoscaling"]["maxNodeCount"] = json!(8)
    });
    let plan = plan_against(&api, &desired).await;
    let events = apply_events(&api, &plan).await;

    let out = Shared::default();
    let terminal = TerminalSink::new(Box::new(out.clone()), ProgressDrawTarget::hidden);
    for event in &events {
        terminal.emit(event);
    }
    // The sink writes styles; the terminal's writer (anstream) drops them under NO_COLOR.
    let text = render::strip(&String::from_utf8(out.0.lock().unwrap().clone()).unwrap());
    insta::assert_snapshot!("apply_progress_text_update", text);

    let lines = JsonLinesSink::new(Vec::new());
    for event in &events {
        lines.emit(event);
    }
    insta::assert_snapshot!(
        "apply_progress_json_lines_update",
        String::from_utf8(lines.into_inner()).unwrap()
    );
}
