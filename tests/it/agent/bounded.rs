//! The agent is bounded and quiet: an interval below its minimum is refused with a condition
//! (and a malformed one by the CRD's schema), a failing stack leaves one Event whose count grows
//! instead of an Event per reconcile, and the webhook answers the same whether a stack exists
//! or not, and whatever is wrong with the request.

use std::time::Duration;

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{Fixture, condition, endpoint, http};

#[tokio::test]
async fn an_interval_below_the_minimum_is_refused_and_kstatus_reads_every_generation() {
    let f = Fixture::new("agent-interval").await;
    // A malformed interval is refused by the API server (the CRD's pattern).
    let malformed: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gkq.dev/v1alpha1",
        "kind": "GkqStack",
        "metadata": {"name": "malformed", "namespace": f.env.namespace},
        "spec": {"url": f.url(), "interval": "soon"},
    }))
    .unwrap();
    let refused = f.stacks().create(&PostParams::default(), &malformed).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 422),
        "{refused:?}"
    );

    // The test agents' minimum is 100ms (TEST_AGENT_ARGS); 50ms is below it.
    f.create_stack("hasty", "50ms", None).await;
    let mut agent = f.agent("a", "4s");
    endpoint(&mut agent);
    let stack = f
        .wait(
            "hasty",
            "the short interval to be refused",
            Duration::from_secs(60),
            |s| condition(s, "Stalled")["reason"] == "IntervalTooShort",
        )
        .await;
    assert_eq!(condition(&stack, "Stalled")["status"], "True", "{stack:#}");
    assert_eq!(condition(&stack, "Ready")["status"], "False", "{stack:#}");
    assert_eq!(
        condition(&stack, "Reconciling")["status"],
        "False",
        "{stack:#}"
    );
    let message = condition(&stack, "Stalled")["message"].as_str().unwrap();
    assert!(message.contains("minimum of 100ms"), "{message}");
    assert_eq!(
        stack["status"]["observedGeneration"], stack["metadata"]["generation"],
        "{stack:#}"
    );
    assert!(
        stack["status"]["lastAttemptedRevision"].is_null(),
        "nothing was fetched: {stack:#}"
    );

    // A long enough interval is run, and the status says which generation it is of.
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    patch_spec(&f, "hasty", json!({"interval": "2s"})).await;
    let stack = f
        .wait_applied("hasty", &first, Duration::from_secs(120))
        .await;
    assert_eq!(stack["metadata"]["generation"], 2, "{stack:#}");
    assert_eq!(stack["status"]["observedGeneration"], 2, "{stack:#}");
    assert_eq!(condition(&stack, "Stalled")["status"], "False", "{stack:#}");

    // Suspended: the status still follows the generation.
    patch_spec(&f, "hasty", json!({"suspend": true})).await;
    let stack = f
        .wait(
            "hasty",
            "the suspension to be observed",
            Duration::from_secs(30),
            |s| s["status"]["observedGeneration"] == 3,
        )
        .await;
    assert_eq!(
        condition(&stack, "Reconciling")["reason"],
        "Suspended",
        "{stack:#}"
    );
    for type_ in ["Ready", "Reconciling", "Stalled"] {
        assert!(condition(&stack, type_).is_object(), "{type_} in {stack:#}");
    }
}

async fn patch_spec(f: &Fixture, name: &str, spec: Value) {
    f.stacks()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn fifty_failing_reconciles_leave_one_event_with_their_count() {
    let f = Fixture::new("agent-events").await;
    // Its Secret does not exist: every reconcile fails the same way, without fetching.
    f.create_stack("failing", "100ms", Some("absent")).await;
    let mut agent = f.agent("a", "4s");
    endpoint(&mut agent);
    let failing = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| {
                e["regarding"]["name"] == "failing" && e["reason"] == "CredentialsUnavailable"
            })
            .cloned()
            .collect()
    };
    let started = std::time::Instant::now();
    let failed = loop {
        let failed = failing(&f.events().await);
        if failed
            .iter()
            .any(|e| e["series"]["count"].as_i64().unwrap_or(1) >= 50)
        {
            break failed;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no Event counts 50 failures: {failed:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(failed.len(), 1, "one Event object: {failed:#?}");
    assert!(
        failed[0]["series"]["lastObservedTime"].is_string(),
        "{failed:#?}"
    );
    let logs = agent.take_stderr();
    let reconciles = logs.matches("reading spec.secretRef").count();
    assert!(reconciles >= 50, "{reconciles} failures logged:\n{logs}");
}

#[tokio::test]
async fn the_webhook_answers_alike_for_an_unknown_stack_and_a_wrong_signature() {
    let f = Fixture::new("agent-hook").await;
    f.create_secret("git", json!({"webhookSecret": "hook-secret-2"}))
        .await;
    f.create_stack("hooked", "1h", Some("git")).await;
    // A stack without a webhook secret cannot be triggered at all.
    f.create_stack("secretless", "1h", None).await;
    let mut agent = f.agent("a", "4s");
    let url = endpoint(&mut agent).hooks;
    let client = http();
    let body = br#"{"ref":"refs/heads/main"}"#.to_vec();
    let sign = |secret: &[u8]| gkq::agent::webhook::github_signature(secret, &body);
    let ns = &f.env.namespace;
    let push = |stack: String, headers: Vec<(&'static str, String)>| {
        let mut request = client
            .post(format!("{url}/hooks/{stack}"))
            .body(body.clone());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        }
    };
    let github = |signature: String| vec![("X-Hub-Signature-256", signature)];
    let answers = [
        (
            "an unknown stack, signed with the secret",
            push(format!("{ns}/nowhere"), github(sign(b"hook-secret-2"))).await,
        ),
        (
            "an unknown namespace",
            push("elsewhere/hooked".into(), github(sign(b"hook-secret-2"))).await,
        ),
        (
            "a wrong signature",
            push(format!("{ns}/hooked"), github(sign(b"wrong"))).await,
        ),
        (
            "no signature",
            push(format!("{ns}/hooked"), Vec::new()).await,
        ),
        (
            "a wrong GitLab token",
            push(
                format!("{ns}/hooked"),
                vec![("X-Gitlab-Token", "hook-secret-3".into())],
            )
            .await,
        ),
        (
            "a stack without a webhook secret",
            push(format!("{ns}/secretless"), github(sign(b""))).await,
        ),
    ];
    let (_, first) = &answers[0];
    assert_eq!(first.0, 401, "{answers:#?}");
    for (what, answer) in &answers {
        assert_eq!(
            answer, first,
            "{what} is answered differently: {answers:#?}"
        );
    }
    let accepted = push(format!("{ns}/hooked"), github(sign(b"hook-secret-2"))).await;
    assert_eq!(accepted.0, 202, "{accepted:?}");
    let logs = agent.take_stderr();
    assert!(
        logs.contains("no such stack"),
        "the reason is logged:\n{logs}"
    );
}
