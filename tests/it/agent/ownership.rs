//! Each object has one owning stack: what a GkqStack applies carries `gkq.dev/owner:
//! namespace/name`, a second stack rendering the same object reports `OwnershipConflict` naming
//! the first and applies nothing (no flapping between the two), and `gkq plan` from a laptop
//! shows the same conflict instead of taking the object back.

use std::collections::BTreeMap;
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

/// Creates the GkqStack `second` following the fixture's repository with `vars`, and waits until
/// it reports `OwnershipConflict`.
async fn second_stack_conflicts(f: &Fixture, vars: &BTreeMap<String, String>) -> Value {
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
    f.wait(
        "second",
        "OwnershipConflict",
        Duration::from_secs(60),
        |s| condition(s, "Ready")["reason"] == "OwnershipConflict",
    )
    .await
}

/// `gkq plan` of the fixture's spec with `vars`, run by hand on the agent's local target.
fn laptop_plan(f: &Fixture, vars: &BTreeMap<String, String>) -> std::process::Output {
    let mut c = gkq();
    c.arg("plan")
        .arg(f.ws.spec_dir())
        .args(["--target", "local", "--state-dir"])
        .arg(f.state.path().join("state"))
        .arg("--kubeconfig")
        .arg(f.kubeconfig())
        .env("NO_COLOR", "1");
    for (k, v) in vars {
        c.args(["--var", &format!("{k}={v}")]);
    }
    c.output().unwrap()
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
    let second = second_stack_conflicts(&f, &vars).await;
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
    let out = laptop_plan(&f, &vars);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("it is owned by GkqStack {owner}")),
        "{}",
        explain(&out)
    );
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}

/// A stack's GKE cluster and node pools carry its GkqStack in the resource label `gkq-owner`
/// (GKE's label syntax: `namespace_name`). A second stack naming the same cluster (its
/// Kubernetes objects are its own) reports `OwnershipConflict` naming the first and applies
/// nothing: the cluster keeps the first stack's label over several intervals. A laptop's plan
/// of the second spec says whose the cluster is.
#[tokio::test]
async fn a_second_stack_on_another_stacks_gke_cluster_conflicts_and_changes_nothing() {
    let f = Fixture::new("agent-owner-gke").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_stack("first", "2s", None).await;
    let mut agent = f.agent("a", "4s");
    endpoint(&mut agent);
    f.wait_applied("first", &first, Duration::from_secs(120))
        .await;
    let owner = format!("{}/first", f.env.namespace);
    let label = format!("\"gkq-owner\": \"{}_first\"", f.env.namespace);
    let gke_state = f.state.path().join("state/gke/gke-emulator-state.json");
    let labelled = || {
        std::fs::read_to_string(&gke_state)
            .unwrap()
            .matches(&label)
            .count()
    };
    // The cluster and its two node pools.
    assert!(
        labelled() >= 3,
        "{}",
        std::fs::read_to_string(&gke_state).unwrap()
    );

    // The second stack's Kubernetes objects have names and a namespace of their own; its
    // cluster is the first stack's.
    let other = crate::support::control_plane::test_env("agent-owner-gke-2").await;
    let mut vars =
        crate::support::control_plane::kube_spec_vars("agent-owner-gke-2", &other.namespace);
    vars.insert("STACK".into(), f.vars["STACK"].clone());
    let second = second_stack_conflicts(&f, &vars).await;
    let message = condition(&second, "Ready")["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "gke.cluster/{} is owned by GkqStack {owner}",
            f.vars["STACK"]
        )),
        "{message}"
    );
    // Several intervals of both stacks: nothing of the second stack's was applied.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(750)).await;
        assert!(labelled() >= 3, "the cluster changed hands");
    }
    let queues = f.queues();
    assert!(
        queues.get_opt(&vars["CQ"]).await.unwrap().is_none(),
        "the second stack applied its ClusterQueue"
    );
    let first_stack = f.stack("first").await;
    assert_eq!(
        condition(&first_stack, "Ready")["status"],
        "True",
        "{first_stack:#}"
    );

    let out = laptop_plan(&f, &vars);
    assert!(
        text(&out.stdout).contains(&format!("it is owned by GkqStack {owner}")),
        "{}",
        explain(&out)
    );
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}
