//! Deleting a GkqStack: the agent's finalizer holds the stack until what it owns is dealt
//! with. With `spec.prune: true` its objects are deleted (a plan that stops admitted jobs is
//! held for approval first, as any other); without it they stay and stop naming the stack as
//! their owner. Either way the stack then goes, and an Event says which.

use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::{Fixture, condition, endpoint};
use crate::support::control_plane::eventually;
use crate::support::gkq;
use crate::support::process::explain;

async fn create_stack(f: &Fixture, name: &str, prune: bool) {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gkq.dev/v1alpha1",
        "kind": "GkqStack",
        "metadata": {"name": name, "namespace": f.env.namespace},
        "spec": {"url": f.url(), "branch": "main", "path": "infra", "variables": f.vars,
                 "interval": "2s", "prune": prune},
    }))
    .unwrap();
    f.stacks()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

async fn wait_gone(f: &Fixture, name: &str) {
    let stacks = f.stacks();
    eventually(
        "the stack to be deleted",
        Duration::from_secs(120),
        || async { Ok(stacks.get_opt(name).await?.is_none().then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
}

async fn queue(f: &Fixture) -> Option<Value> {
    f.queues()
        .get_opt(&f.vars["CQ"])
        .await
        .unwrap()
        .map(|q| serde_json::to_value(q).unwrap())
}

fn event_reasons(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn deleting_a_stack_without_prune_gives_its_objects_up() {
    let f = Fixture::new("agent-release").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    create_stack(&f, "kept", false).await;
    let mut agent = f.agent("a", "4s");
    endpoint(&mut agent);
    let stack = f
        .wait_applied("kept", &first, Duration::from_secs(120))
        .await;
    assert!(
        stack["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "gkq.dev/finalizer")),
        "{stack:#}"
    );
    let owner = format!("{}/kept", f.env.namespace);
    assert_eq!(
        queue(&f).await.unwrap()["metadata"]["annotations"]["gkq.dev/owner"],
        owner
    );

    f.stacks()
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&f, "kept").await;
    let left = queue(&f).await.expect("the queue stays");
    assert!(
        left["metadata"]["annotations"]
            .get("gkq.dev/owner")
            .is_none(),
        "the queue still names the deleted stack: {left:#}"
    );
    let reasons = event_reasons(&f.events().await);
    assert!(reasons.iter().any(|r| r == "Released"), "{reasons:?}");
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}

#[tokio::test]
async fn deleting_a_pruning_stack_holds_admitted_jobs_then_deletes_what_it_owns() {
    let f = Fixture::new("agent-prune-del").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    create_stack(&f, "pruned", true).await;
    let mut agent = f.agent("a", "4s");
    endpoint(&mut agent);
    f.wait_applied("pruned", &first, Duration::from_secs(120))
        .await;
    crate::gitops_control_plane::wait_for_admissions(&f.env.namespace, 1).await;

    f.stacks()
        .delete("pruned", &DeleteParams::default())
        .await
        .unwrap();
    // The admitted job would stop: held, and nothing is deleted meanwhile.
    let stack = f
        .wait(
            "pruned",
            "the deletion to be held",
            Duration::from_secs(60),
            |s| condition(s, "Held")["status"] == "True",
        )
        .await;
    let digest = stack["status"]["heldDigest"].as_str().unwrap().to_string();
    assert!(queue(&f).await.is_some(), "deleted before approval");

    let out = gkq()
        .args(["approve", &format!("{}/pruned", f.env.namespace), &digest])
        .arg("--management-kubeconfig")
        .arg(f.kubeconfig())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", explain(&out));
    wait_gone(&f, "pruned").await;
    assert!(
        queue(&f).await.is_none(),
        "the stack's queue was not deleted"
    );
    let reasons = event_reasons(&f.events().await);
    assert!(reasons.iter().any(|r| r == "Pruned"), "{reasons:?}");
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}
