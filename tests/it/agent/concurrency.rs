//! Stacks are reconciled concurrently (`--concurrency`, 4 by default): a stack whose GKE apply
//! is slow does not hold back another stack's. The agent runs on `--target gcp` against the GKE
//! emulator served on loopback (the local target runs one stack at a time: its stacks share one
//! state directory), and the emulator holds every node-pool create of one stack's cluster.

use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use serde_json::json;

use super::{Fixture, TEST_AGENT_ARGS, condition, endpoint};
use crate::support::control_plane::{kube_spec_vars, test_env};
use crate::support::gkq;
use crate::support::process::Running;

/// How long the emulator holds each node-pool create of the slow stack's cluster before it
/// answers (the GKE client's own request timeout is 30s): the slow stack's apply lasts at least
/// twice this (its spec has two node pools).
const HELD: Duration = Duration::from_secs(25);

/// Multi-threaded: the emulator serves from this test's runtime while the test waits on the
/// agent.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_gke_apply_of_one_stack_does_not_delay_another_stacks_apply() {
    let f = Fixture::new("agent-concurrency").await;
    let commit = f.ws.git(&["rev-parse", "HEAD"]);
    // The second stack's namespaced objects go to a namespace of their own: the two specs'
    // LocalQueues have one name.
    let other = test_env("agent-concurrency-fast").await;
    let fast_vars = kube_spec_vars("agent-concurrency-fast", &other.namespace);
    let slow_cluster = f.vars["STACK"].clone();

    let (gke, emulator) =
        gkq::emulator::Emulator::start_in_process(gkq::emulator::EmulatorConfig {
            pending_ms: 50,
            running_ms: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    emulator.add_fault(gkq::emulator::FaultRule::new(
        "POST",
        &format!("*/clusters/{slow_cluster}/nodePools"),
        gkq::emulator::Fault::Hang {
            millis: u64::try_from(HELD.as_millis()).unwrap(),
        },
    ));

    let create = |name: &str, vars: &std::collections::BTreeMap<String, String>| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "gkq.dev/v1alpha1",
            "kind": "GkqStack",
            "metadata": {"name": name, "namespace": f.env.namespace},
            "spec": {"url": f.url(), "branch": "main", "path": "infra", "variables": vars,
                     "interval": "1m"},
        }))
        .unwrap()
    };
    f.stacks()
        .create(&PostParams::default(), &create("slow", &f.vars))
        .await
        .unwrap();

    let mut c = gkq();
    c.args(["agent", "--target", "gcp", "--gke-endpoint", &gke])
        .args(TEST_AGENT_ARGS)
        .arg("--kubeconfig")
        .arg(f.kubeconfig())
        .arg("--management-kubeconfig")
        .arg(f.kubeconfig())
        .args(["--watch-namespace", &f.env.namespace])
        .args(["--namespace", &f.env.namespace])
        .args(["--lease-duration", "4s", "--identity", "a"])
        .args(["--allow-file-urls", "--concurrency", "2"])
        .arg("--work-dir")
        .arg(f.state.path().join("a"));
    let mut agent = Running::spawn(c);
    endpoint(&mut agent);

    // The slow stack is in its apply, its first node-pool create held by the emulator.
    f.wait(
        "slow",
        "the slow stack to be applying",
        Duration::from_secs(120),
        |s| condition(s, "Reconciling")["reason"] == "Applying",
    )
    .await;
    let held = || emulator.faults().iter().map(|rule| rule.fired).sum::<u32>();
    crate::support::control_plane::eventually(
        "a node-pool create of the slow stack to be held",
        Duration::from_secs(60),
        || async { Ok((held() >= 1).then_some(())) },
    )
    .await
    .unwrap();

    // Created now, the other stack is applied while the slow one still applies.
    f.stacks()
        .create(&PostParams::default(), &create("fast", &fast_vars))
        .await
        .unwrap();
    let fast = f
        .wait_applied("fast", &commit, Duration::from_secs(120))
        .await;
    assert_eq!(condition(&fast, "Ready")["status"], "True", "{fast:#}");
    let slow = f.stack("slow").await;
    assert_eq!(
        condition(&slow, "Reconciling")["reason"],
        "Applying",
        "the slow stack's apply ended before the other stack was applied: {slow:#}"
    );
    assert!(slow["status"]["lastAppliedRevision"].is_null(), "{slow:#}");

    // The slow stack's apply ends too, once the emulator answers.
    emulator.clear_faults();
    let slow = f
        .wait_applied("slow", &commit, Duration::from_secs(180))
        .await;
    assert_eq!(condition(&slow, "Ready")["status"], "True", "{slow:#}");
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}
