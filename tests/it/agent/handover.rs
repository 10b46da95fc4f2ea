//! Handing over between replicas: a leader stopped with SIGTERM releases its Lease and a
//! standby takes over within 3 seconds (the lease duration is 15s, so this is not expiry); a
//! leader killed with `kill -9` in the middle of an apply leaves the cluster's apply Lease held
//! under its identity, and the new leader takes that over as soon as it leads (not after the
//! apply Lease's 60s expiry).

use std::time::{Duration, Instant};

use gkq::emulator::{Emulator, EmulatorConfig, Fault, FaultRule};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::{Fixture, endpoint};
use crate::support::control_plane::eventually;
use crate::support::process::Running;

async fn holder(leases: &Api<Lease>, name: &str) -> Option<String> {
    leases
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

/// Waits until the leader Lease `gkq-agent` is held by `identity`.
async fn wait_leader(f: &Fixture, identity: &str) {
    let leases: Api<Lease> = Api::namespaced(f.env.client.clone(), &f.env.namespace);
    eventually(
        &format!("{identity} to lead"),
        Duration::from_secs(30),
        || async {
            Ok((holder(&leases, "gkq-agent").await.as_deref() == Some(identity)).then_some(()))
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_standby_takes_over_within_3s_of_the_leaders_sigterm() {
    let f = Fixture::new("agent-sigterm").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    // Fetched once an hour: no reconcile runs when the leader is stopped, and the new leader
    // fetches at once when it starts leading.
    f.create_stack("handed", "1h", None).await;
    // The default lease duration: a standby that waited for expiry would take 15s.
    let mut leader = f.agent("one", "15s");
    endpoint(&mut leader);
    wait_leader(&f, "one").await;
    let mut standby = f.agent("two", "15s");
    endpoint(&mut standby);
    f.wait_applied("handed", &first, Duration::from_secs(120))
        .await;
    let mut standby_logs = String::new();
    super::read_logs_until(
        &standby,
        &mut standby_logs,
        "standing by: one leads",
        Duration::from_secs(30),
    )
    .await;

    let second = f.commit_quota(16, 24);
    let leases: Api<Lease> = Api::namespaced(f.env.client.clone(), &f.env.namespace);
    let sent = Instant::now();
    let (code, logs) = leader.terminate();
    assert_eq!(code, Some(0), "{logs}");
    assert!(logs.contains("released Lease"), "{logs}");
    let took = loop {
        if holder(&leases, "gkq-agent").await.as_deref() == Some("two") {
            break sent.elapsed();
        }
        assert!(
            sent.elapsed() < Duration::from_secs(20),
            "the standby did not take over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("the standby led {took:?} after the leader's SIGTERM (lease 15s)");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // And acts: it fetches the commit the old leader had not seen.
    f.wait_applied("handed", &second, Duration::from_secs(60))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apply_lock_of_a_leader_killed_mid_apply_is_taken_over_as_soon_as_it_is_replaced() {
    let f = Fixture::new("agent-lock").await;
    // GKE is an emulator of this test's, whose node-pool autoscaling call can be made to hang:
    // the leader is then in the middle of an apply, holding the cluster's apply Lease.
    let (gke, emulator) = Emulator::start_in_process(EmulatorConfig::default())
        .await
        .unwrap();
    let agent = |identity: &str| {
        let mut c = f.agent_command(identity, "4s");
        c.args(["--gke-endpoint", &gke]);
        let mut agent = Running::spawn(c);
        endpoint(&mut agent);
        agent
    };
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_stack("locked", "2s", None).await;
    let mut leader = agent("one");
    wait_leader(&f, "one").await;
    let standby = agent("two");
    f.wait_applied("locked", &first, Duration::from_secs(120))
        .await;

    emulator.emulator().add_fault(
        FaultRule::new("POST", "*:setAutoscaling", Fault::Hang { millis: 300_000 }).times(1),
    );
    f.ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 4, locationPolicy: ANY}",
    );
    let second = f.commit_quota(16, 24);
    let locks: Api<Lease> = Api::namespaced(f.env.client.clone(), "kube-system");
    let lock = format!("gkq-lock-{}", f.vars["STACK"]);
    let held_by_leader = format!("one (stack {}/locked)", f.env.namespace);
    eventually(
        "the leader to hang in its apply, holding the apply Lease",
        Duration::from_secs(60),
        || async {
            let hanging = emulator.emulator().faults().is_empty();
            let held = holder(&locks, &lock).await.as_deref() == Some(held_by_leader.as_str());
            Ok((hanging && held).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e:#}\nfaults: {:?}\nleader:\n{}",
            emulator.emulator().faults(),
            leader.take_stderr()
        )
    });

    leader.kill_9();
    let killed = Instant::now();
    assert_eq!(
        holder(&locks, &lock).await.as_deref(),
        Some(held_by_leader.as_str()),
        "the killed leader left its apply Lease"
    );
    let stack = f
        .wait_applied("locked", &second, Duration::from_secs(60))
        .await;
    let took = killed.elapsed();
    eprintln!("the new leader applied {took:?} after kill -9 (leader lease 4s, apply Lease 60s)");
    assert!(took < Duration::from_secs(20), "took {took:?}: {stack:#}");
    let logs = standby.take_stderr();
    assert!(
        logs.contains(&format!("from {held_by_leader}")) && logs.contains("no longer acts"),
        "the apply Lease was taken over from the killed leader:\n{logs}"
    );
}
