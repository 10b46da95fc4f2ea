//! Each object has one owning stack: what a GkqStack applies carries `gkq.dev/owner:
//! namespace/name`, a second stack rendering the same object reports `OwnershipConflict` naming
//! the first and applies nothing (no flapping between the two), and `gkq plan` from a laptop
//! shows the same conflict instead of taking the object back.

use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use super::{Fixture, condition, endpoint};
use crate::support::gkq;
use crate::support::process::{explain, text};

fn quota_of(queue: &Value) -> Value {
    queue["spec"]["resourceGroups"][0]["flavors"][1]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "google.com/tpu")
        .unwrap()["nominalQuota"]
        .clone()
}

#[tokio::test]
async fn two_stacks_on_one_object_conflict_without_flapping() {
    let f = Fixture::new("agent-owner").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_stack("first", "2s", None).await;
    let mut agent = f.agent("a", "4s");
    endpoint(&mut agent);
    f.wait_applied("first", &first, Duration::from_secs(120))
        .await;
    let queue_name = f.vars["CQ"].clone();
    let queue = serde_json::to_value(f.queues().get(&queue_name).await.unwrap()).unwrap();
    let owner = format!("{}/first", f.env.namespace);
    assert_eq!(
        queue["metadata"]["annotations"]["gkq.dev/owner"], owner,
        "{queue:#}"
    );
    assert_eq!(quota_of(&queue), json!("16"));

    // A second stack renders the same ClusterQueue with another quota.
    let mut vars = f.vars.clone();
    vars.insert("TPU_QUOTA".into(), "0".into());
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gkq.dev/v1alpha1",
        "kind": "GkqStack",
        "metadata": {"name": "second", "namespace": f.env.namespace},
        "spec": {"url": f.url(), "branch": "main", "path": "infra", "variables": vars, "interval": "2s"},
    }))
    .unwrap();
    f.stacks()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let second = f
        .wait(
            "second",
            "OwnershipConflict",
            Duration::from_secs(60),
            |s| condition(s, "Ready")["reason"] == "OwnershipConflict",
        )
        .await;
    let message = condition(&second, "Ready")["message"].as_str().unwrap();
    assert_eq!(condition(&second, "Ready")["status"], "False");
    assert!(
        message.contains(&format!(
            "kueue.clusterqueue/{queue_name} is owned by GkqStack {owner}"
        )),
        "{message}"
    );
    // Several intervals of both stacks: the queue keeps the first stack's quota throughout.
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(750)).await;
        let queue = serde_json::to_value(f.queues().get(&queue_name).await.unwrap()).unwrap();
        assert_eq!(quota_of(&queue), json!("16"), "the queue flapped");
    }
    let first_stack = f.stack("first").await;
    assert_eq!(
        condition(&first_stack, "Ready")["status"],
        "True",
        "{first_stack:#}"
    );
    let stopped = agent.take_stderr();
    assert!(!stopped.contains("panicked"), "{stopped}");

    // A laptop's plan of the same spec does not take the queue back either.
    let mut c = gkq();
    c.arg("plan")
        .arg(f.ws.spec_dir())
        .args(["--target", "local", "--state-dir"])
        .arg(f.state.path().join("state"))
        .arg("--kubeconfig")
        .arg(f.kubeconfig())
        .env("NO_COLOR", "1");
    for (k, v) in &vars {
        c.args(["--var", &format!("{k}={v}")]);
    }
    let out = c.output().unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("it is owned by GkqStack {owner}")),
        "{}",
        explain(&out)
    );
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}
