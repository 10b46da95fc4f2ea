//! GitOps against a real kube-apiserver and Kueue (tools/controlplane.sh), with GKE on the local
//! target's emulator: the apply Lease, the revision ConfigMap, saved plans without credentials,
//! and watch mode's drift detection and admission timeline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use gkq::gitops::lock::{self, LockError, LockOptions};
use gkq::vocab::object::condition_true;
use serde_json::Value;

use crate::support;
use crate::support::control_plane::{control_plane, kube_spec_vars, test_env, unique_name};
use crate::support::process::{Running, explain, text};
use crate::support::{Workspace, gkq};

/// One stack of the kube-spec fixture with its own names, namespace and emulator state, copied
/// into a git repository of its own.
struct Stack {
    ws: Workspace,
    vars: BTreeMap<String, String>,
    stack: String,
    namespace: String,
}

impl Stack {
    async fn new(test: &str) -> Stack {
        let env = test_env(test).await;
        let vars = kube_spec_vars(test, &env.namespace);
        Stack {
            ws: Workspace::kube_spec(),
            stack: vars["STACK"].clone(),
            vars,
            namespace: env.namespace,
        }
    }

    fn path(&self) -> &Path {
        self.ws.path()
    }

    fn kubeconfig() -> PathBuf {
        control_plane().kubeconfig.clone()
    }

    /// `gkq <args> infra --target local --kubeconfig ... --state-dir ... --var ...`.
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = gkq();
        c.args(args).current_dir(self.path());
        let saved_plan = args.len() > 1 && args[0] == "apply" && args[1].ends_with(".json");
        if !saved_plan {
            c.args(["infra", "--target", "local"]);
            c.arg("--state-dir").arg(self.path().join("state"));
        }
        c.arg("--kubeconfig").arg(Self::kubeconfig());
        for (k, v) in &self.vars {
            c.args(["--var", &format!("{k}={v}")]);
        }
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn commit_all(&self) -> String {
        self.ws.commit_all("spec")
    }
}

async fn client() -> kube::Client {
    support::control_plane::client_for(&control_plane().kubeconfig)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_lease_admits_one_holder_and_a_crashed_holder_expires() {
    let client = client().await;
    let stack = unique_name("lease");
    let options = LockOptions::default();
    // Four appliers at once: exactly one wins, the others are told who holds the lock.
    let attempts = (0..4).map(|i| {
        let client = client.clone();
        let stack = stack.clone();
        let options = options.clone();
        tokio::spawn(async move {
            let holder = format!("applier-{i}@host pid {i}");
            let result = lock::lease(client, &stack, &holder, &options, &mut |_| {}).await;
            (holder, result)
        })
    });
    let mut winners = Vec::new();
    let mut refusals = Vec::new();
    for attempt in attempts {
        let (holder, result) = attempt.await.unwrap();
        match result {
            Ok(held) => winners.push((holder, held)),
            Err(e @ LockError::Held { .. }) => refusals.push(e.to_string()),
            Err(e) => panic!("{holder}: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "refusals: {refusals:#?}");
    let (winner, held) = winners.pop().unwrap();
    assert_eq!(refusals.len(), 3);
    for refusal in &refusals {
        assert!(
            refusal.contains(&format!(
                "Lease kube-system/gkq-lock-{stack} is held by {winner}, for"
            )),
            "{refusal}"
        );
    }
    held.release().await;
    let next = lock::lease(
        client.clone(),
        &stack,
        "next@host pid 9",
        &options,
        &mut |_| {},
    )
    .await
    .expect("free after release");

    next.release().await;

    // A holder that stops renewing (it crashed) loses the lock after the lease duration.
    let short = LockOptions {
        lease_duration: Duration::from_secs(2),
        ..LockOptions::default()
    };
    let crashed = lock::lease(
        client.clone(),
        &stack,
        "crashed@host pid 1",
        &short,
        &mut |_| {},
    )
    .await
    .expect("free after release");
    drop(crashed);
    match lock::lease(
        client.clone(),
        &stack,
        "late@host pid 2",
        &options,
        &mut |_| {},
    )
    .await
    {
        Err(LockError::Held {
            holder, expires, ..
        }) => {
            assert!(holder.starts_with("crashed@host pid 1"), "{holder}");
            assert!(
                expires
                    .unwrap()
                    .contains("expires 2s after its last renewal")
            );
        }
        other => panic!(
            "expected the crashed holder's lease to still hold: {:?}",
            other.map(|_| ())
        ),
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late = lock::lease(
        client.clone(),
        &stack,
        "late@host pid 2",
        &options,
        &mut |_| {},
    )
    .await
    .expect("an expired lease is taken over");
    late.release().await;
}

#[tokio::test]
async fn a_cli_apply_fails_naming_the_holder_and_concurrent_applies_do_not_both_apply() {
    let s = Stack::new("gitops-lock").await;
    let client = client().await;
    let held = lock::lease(
        client.clone(),
        &s.stack,
        "ci-runner@build-7 pid 77",
        &LockOptions::default(),
        &mut |_| {},
    )
    .await
    .unwrap();
    let out = s.run(&["apply", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "Lease kube-system/gkq-lock-{} is held by ci-runner@build-7 pid 77, for",
            s.stack
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("If that apply crashed, its lock expires 1m00s"),
        "{stderr}"
    );
    held.release().await;

    // Two applies started together: both plan, one takes the lock and applies; the other waits
    // for it (named in its output), then finds its plan stale and applies nothing, or planned
    // after the first finished and finds nothing to do.
    let spawn = || {
        s.command(&["apply", "--auto-approve", "--lock-timeout", "5m"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (spawn(), spawn());
    let pids = [first.id(), second.id()];
    let outputs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    let created: Vec<&Output> = outputs
        .iter()
        .filter(|o| {
            text(&o.stderr).contains("gke.cluster/")
                && text(&o.stderr).contains("Creation complete")
        })
        .collect();
    assert_eq!(
        created.len(),
        1,
        "exactly one apply creates the cluster:\n{}\n{}",
        explain(&outputs[0]),
        explain(&outputs[1])
    );
    let (winner, other) = if std::ptr::eq(created[0], &outputs[0]) {
        (0, 1)
    } else {
        (1, 0)
    };
    assert!(
        outputs[winner].status.success(),
        "{}",
        explain(&outputs[winner])
    );
    let loser = text(&outputs[other].stderr);
    let waited_then_stale = loser.contains(&format!("pid {}", pids[winner]))
        && loser.contains("Waiting up to 5m00s for the cluster's lock")
        && loser.contains("the plan is stale");
    let nothing_to_do =
        outputs[other].status.success() && text(&outputs[other].stdout).contains("No changes");
    assert!(
        waited_then_stale || nothing_to_do,
        "the second apply neither waited for the first nor found nothing to do:\n{}",
        explain(&outputs[other])
    );
}

#[tokio::test]
async fn the_applied_revision_round_trips_through_the_cluster() {
    let s = Stack::new("gitops-rev").await;
    let commit = s.commit_all();
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "Recorded the applied revision in ConfigMap kube-system/gkq-revision-{} and the cluster's labels: commit {}",
            s.stack,
            &commit[..12]
        )),
        "{stderr}"
    );
    // Read back by gkq status...
    let out = s.run(&["status", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["applied"]["commit"], commit.as_str(), "{status:#}");
    assert_eq!(
        status["applied"]["specDigest"],
        status["local"]["specDigest"]
    );
    assert_eq!(status["applied"]["spec"], "infra/gkq.yaml");
    assert_eq!(status["applied"]["gkqVersion"], env!("CARGO_PKG_VERSION"));
    assert!(
        status["applied"]["appliedBy"]
            .as_str()
            .unwrap()
            .contains('@')
    );
    assert_eq!(status["specMatchesApplied"], true);
    assert_eq!(status["drift"]["changes"], false, "{status:#}");
    // ...and as kubectl would see it.
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client().await, "kube-system");
    let cm = configmaps
        .get(&format!("gkq-revision-{}", s.stack))
        .await
        .unwrap();
    let annotations = cm.metadata.annotations.unwrap();
    assert_eq!(annotations["gkq.dev/commit"], commit);
    assert!(annotations["gkq.dev/spec-digest"].starts_with("sha256:"));
    // The ConfigMap is gkq's bookkeeping, not part of the stack: pruning leaves it alone.
    let out = s.run(&["plan", "--prune", "-o", "json", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));

    // A spec change that is committed but not applied shows in status.
    let spec = s.path().join("infra/gkq.yaml");
    let text_before = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text_before.replace(
            "TPU_QUOTA: {default: \"16\"}",
            "TPU_QUOTA: {default: \"32\"}",
        ),
    )
    .unwrap();
    let second = s.commit_all();
    let out = s.run(&["status"]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains(&format!("commit {}", &commit[..12])),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("HEAD {} on main", &second[..12])),
        "{shown}"
    );
    assert!(
        shown.contains("the local spec differs from the one applied (HEAD is 1 commit(s) ahead of and 0 behind the applied commit)"),
        "{shown}"
    );
    assert!(shown.contains("to update"), "{shown}");
}

#[tokio::test]
async fn saved_plans_hold_no_kubernetes_credentials_and_apply_against_kubernetes() {
    let s = Stack::new("gitops-creds").await;
    let out = s.run(&["plan", "--out", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let saved = std::fs::read_to_string(s.path().join("plan.json")).unwrap();
    let kubeconfig = std::fs::read_to_string(Stack::kubeconfig()).unwrap();
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .expect("the test kubeconfig has a bearer token")
        .trim();
    assert!(token.len() > 8);
    assert!(!saved.contains(token), "the plan holds the bearer token");
    let ca_path = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority:"))
        .unwrap()
        .trim();
    let ca = std::fs::read_to_string(ca_path).unwrap();
    let ca_body: String = ca.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(!saved.contains(&ca_body[..40]), "the plan holds the CA");
    assert!(!saved.contains(ca_path));
    // The plan covers the Kubernetes half too, and applies.
    let plan: Value = serde_json::from_str(&saved).unwrap();
    assert!(plan["actions"].as_array().unwrap().iter().any(|a| {
        a["addr"]
            .as_str()
            .unwrap()
            .starts_with("kueue.clusterqueue/")
    }));
    // The pull-request comment shows where Kueue will put each job.
    let out = s.run(&["plan", "-o", "markdown"]);
    assert!(out.status.success(), "{}", explain(&out));
    let markdown = text(&out.stdout);
    let od = &s.vars["ONDEMAND"];
    let dws = &s.vars["DWS"];
    assert!(
        markdown.contains("#### Placement (predicted with Kueue's rules)"),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!(
            "| `{}/rayjob-tpu-v6e-dws-1` | head |",
            s.namespace
        )),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!("|  | tpu-group | 4 | `{od}` |  |")),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!("|  | tpu-group | 4 | `{dws}` |  |")),
        "{markdown}"
    );

    let out = s.run(&["apply", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let out = s.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
}

#[tokio::test]
async fn watch_follows_job_admission_and_replans_on_kubernetes_drift() {
    let s = Stack::new("gitops-watch").await;
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let var = |name: &str| s.vars[name].clone();
    let ns = s.namespace.clone();

    let mut w = Running::spawn(s.command(&["watch", "--interval", "1s", "--job-interval", "1s"]));
    // Job 1 fits the on-demand quota and is admitted; job 2 falls back to DWS and waits for its
    // ProvisioningRequest (nothing provisions in this cluster).
    let first_job = format!(
        "job {ns}/rayjob-tpu-v6e-dws-1: admitted on flavor {}",
        var("ONDEMAND")
    );
    let second_job = format!(
        "job {ns}/rayjob-tpu-v6e-dws-2: quota reserved on flavor {}",
        var("DWS")
    );
    let (shown, _) = w.wait_for("both jobs' admission", Duration::from_secs(90), |out| {
        out.contains(&first_job)
            && out
                .lines()
                .any(|l| l.contains(&second_job) && l.contains("ProvisioningRequest"))
            && out.matches("placed as predicted").count() >= 2
    });
    assert!(
        shown.contains("initial plan · No changes. Live state matches the spec."),
        "{shown}"
    );
    // Each placed job is compared with the prediction recorded by the apply.
    for n in 1..=2 {
        let placed = format!(
            "job {ns}/rayjob-tpu-v6e-dws-{n}: placed as predicted (recorded by the apply of"
        );
        assert!(shown.contains(&placed), "{shown}");
    }
    let line = shown.lines().rfind(|l| l.contains(&second_job)).unwrap();
    assert!(
        line.contains(&format!("admission checks: {} Pending", var("CHECK"))),
        "{line}"
    );

    // Someone edits the ClusterQueue's TPU quota by hand: the next drift check shows the fix.
    let queues = support::control_plane::dynamic_api(
        &client().await,
        "kueue.x-k8s.io/v1beta2",
        "ClusterQueue",
        "",
    )
    .unwrap();
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "replace", "path": "/spec/resourceGroups/0/flavors/1/resources/2/nominalQuota", "value": "8"}
    ]))
    .unwrap();
    queues
        .patch(
            &var("CQ"),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::<()>::Json(patch),
        )
        .await
        .unwrap();
    let (shown, _) = w.wait_for("the drift", Duration::from_secs(30), |out| {
        out.contains("\nPlan: 0 to create, 1 to update")
    });
    assert!(shown.contains("live state changed"), "{shown}");
    assert!(
        shown.contains(&format!("kueue.clusterqueue/{}", var("CQ"))),
        "{shown}"
    );
    let (code, stderr) = w.interrupt();
    assert_eq!(code, Some(0), "{stderr}");
}

#[tokio::test]
async fn disruptive_plans_exit_3_and_their_saved_plans_are_refused_without_consent() {
    let s = Stack::new("gitops-disrupt").await;
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    // Replacing the on-demand pool (its TPU topology cannot change in place) stops job 1, which
    // Kueue admitted there.
    let spec = s.path().join("infra/gkq.yaml");
    let text_before = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text_before.replacen(
            "tpuTopology: 4x4\n    reservationAffinity: none\n    initialNodes: 0\n    autoscaling: {min: 0, max: 4}",
            "tpuTopology: 2x4\n    reservationAffinity: none\n    initialNodes: 0\n    autoscaling: {min: 0, max: 2}",
            1,
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let plan = loop {
        let out = s.run(&[
            "plan",
            "--detailed-exitcode",
            "-o",
            "json",
            "--out",
            "plan.json",
        ]);
        let plan: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", explain(&out)));
        if out.status.code() == Some(3) {
            break plan;
        }
        assert_eq!(out.status.code(), Some(2), "{}", explain(&out));
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "Kueue never admitted job 1: {plan:#}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let disruption = &plan["disruptions"][0];
    assert_eq!(
        disruption["addr"], "gke.nodepool/on-demand-pool",
        "{plan:#}"
    );
    // The pool is shared by every test's stack on this control plane: this stack's job 1 is one
    // of the jobs it would stop.
    let own_job = format!("RayJob {}/rayjob-tpu-v6e-dws-1 (admitted)", s.namespace);
    assert!(
        disruption["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j.as_str() == Some(own_job.as_str())),
        "{plan:#}"
    );
    let out = s.run(&["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("refusing to apply: this plan stops running work"),
        "{}",
        explain(&out)
    );
    let out = s.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "nothing was applied: {}",
        explain(&out)
    );
}

/// Waits until Kueue has reserved quota for `count` Workloads in `namespace` (also used by the
/// agent's tests).
pub(crate) async fn wait_for_admissions(namespace: &str, count: usize) {
    wait_for_workloads(namespace, |workloads| {
        let reserved = workloads
            .iter()
            .filter(|w| {
                w["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True")
                })
            })
            .count();
        (reserved >= count)
            .then_some(())
            .ok_or_else(|| format!("Kueue reserved quota for {reserved} of {count} workloads"))
    })
    .await;
}

/// Reads the Workloads of `namespace` until `done` is `Ok`; after 90 s its last `Err` fails the
/// test.
async fn wait_for_workloads(namespace: &str, done: impl Fn(&[Value]) -> Result<(), String>) {
    let workloads = support::control_plane::dynamic_api(
        &client().await,
        "kueue.x-k8s.io/v1beta2",
        "Workload",
        namespace,
    )
    .unwrap();
    let started = std::time::Instant::now();
    loop {
        let list: Vec<Value> = workloads
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|w| serde_json::to_value(w).unwrap())
            .collect();
        match done(&list) {
            Ok(()) => return,
            Err(why) => assert!(started.elapsed() < Duration::from_secs(90), "{why}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_changed_running_job_is_refused_without_consent_on_the_real_kueue() {
    let s = Stack::new("trust-rerun").await;
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_admissions(&s.namespace, 2).await;
    // What Kueue wrote on admission (unsuspending the jobs, the flavor's node selectors in their
    // pod templates) is Kueue's, not a change to the spec: the plan stays empty.
    let out = s.run(&["plan", "--detailed-exitcode", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    // A new training script: both jobs would be submitted again as new runs.
    std::fs::write(s.path().join("infra/train.py"), "print('v2')\n").unwrap();
    let out = s.run(&["plan", "--detailed-exitcode", "-o", "json"]);
    assert_eq!(out.status.code(), Some(3), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ns = &s.namespace;
    let first = format!("ray.rayjob/{ns}/rayjob-tpu-v6e-dws-1");
    // The replacement is for the script alone; Kueue's injected fields are not listed with it.
    let job = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["addr"] == first.as_str())
        .unwrap_or_else(|| panic!("{plan:#}"));
    let paths: Vec<&str> = job["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert!(
        paths.iter().all(|p| p.starts_with("metadata.annotations")),
        "{paths:?}\n{plan:#}"
    );
    let d = plan["disruptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["addr"] == first.as_str())
        .unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(
        d["jobs"][0],
        format!("RayJob {ns}/rayjob-tpu-v6e-dws-1 (admitted)"),
        "{plan:#}"
    );
    let out = s.run(&["apply", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("refusing to apply: this plan stops running work"),
        "{}",
        explain(&out)
    );
    let out = s.run(&["plan", "--out", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let out = s.run(&["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(text(&out.stderr).contains("stops running work"));
    let out = s.run(&["apply", "--auto-approve", "--allow-disruption"]);
    assert!(out.status.success(), "{}", explain(&out));
}

/// Issue 28 on the real Kueue: after a quota raise that moves nothing, `gkq status` compares
/// each job Kueue placed with the prediction recorded when gkq submitted it (job 2 went to DWS
/// while on-demand was full; predicted again now it would go to on-demand). The same job
/// deleted and submitted again by someone else is another run: predicted now while it waits,
/// and without a record once Kueue places it.
#[tokio::test]
async fn status_compares_placed_jobs_with_the_recorded_prediction_on_the_real_kueue() {
    let s = Stack::new("status-record").await;
    let ns = s.namespace.clone();
    let job2 = "rayjob-tpu-v6e-dws-2";
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_admissions(&ns, 2).await;

    // On-demand now has room for both jobs.
    let spec = s.path().join("infra/gkq.yaml");
    let before = std::fs::read_to_string(&spec).unwrap();
    let quota = r#"quota: {cpu: 40, memory: 75Gi, google.com/tpu: "${TPU_QUOTA}"}"#;
    assert!(before.contains(quota), "{before}");
    std::fs::write(
        &spec,
        before.replace(quota, "quota: {cpu: 80, memory: 150Gi, google.com/tpu: 32}"),
    )
    .unwrap();
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let status = || -> Value {
        let out = s.run(&["status", "-o", "json"]);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let job_of = |status: &Value, name: &str| -> Value {
        status["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {status:#}"))
    };
    let raised = status();
    let second = job_of(&raised, job2);
    assert_eq!(second["comparedWith"]["source"], "record", "{second:#}");
    assert_eq!(second["agrees"], true, "{second:#}");
    let observed_uid = second["comparedWith"]["uid"].clone();
    let shown = text(&s.run(&["status"]).stdout);
    assert!(!shown.contains("DIFFERS"), "{shown}");
    assert!(
        shown.contains("— agrees (recorded by the apply of"),
        "{shown}"
    );

    // Someone deletes job 2 and submits it again while the queue is held.
    hold_queue(&s.vars["CQ"], true).await;
    let client = client().await;
    let rayjobs = support::control_plane::dynamic_api(&client, "ray.io/v1", "RayJob", &ns).unwrap();
    let live = rayjobs.get(job2).await.unwrap();
    assert_eq!(live.metadata.uid.as_deref(), observed_uid.as_str());
    let mut again = serde_json::to_value(&live).unwrap();
    again.as_object_mut().unwrap().remove("status");
    let metadata = again["metadata"].as_object_mut().unwrap();
    metadata.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "labels" | "annotations"));
    rayjobs
        .delete(job2, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    crate::placement_kueue::apply(&client, &ns, &again)
        .await
        .unwrap();
    let until = |what: &str, done: &dyn Fn(&Value) -> bool| -> Value {
        let started = std::time::Instant::now();
        loop {
            let job = job_of(&status(), job2);
            if done(&job) {
                return job;
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "{what} never came: {job:#}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    // Waiting: predicted now, over the live queues.
    let waiting = until("the new run waiting", &|job| {
        job["comparedWith"]["source"] == "prediction" && job["observed"]["state"] == "pending"
    });
    assert!(waiting["predicted"].is_object(), "{waiting:#}");
    // Placed: the run gkq did not submit has no record.
    hold_queue(&s.vars["CQ"], false).await;
    let placed = until("the new run placed", &|job| {
        job["comparedWith"]["source"] == "no-record"
    });
    assert_eq!(placed["agrees"], Value::Null, "{placed:#}");
    let shown = text(&s.run(&["status"]).stdout);
    assert!(!shown.contains("DIFFERS"), "{shown}");
    assert!(shown.contains("predicted:  no record"), "{shown}");
}

/// Holds or releases the stack's ClusterQueue (Kueue's `stopPolicy`), as an operator would.
async fn hold_queue(name: &str, hold: bool) {
    let queues = support::control_plane::dynamic_api(
        &client().await,
        "kueue.x-k8s.io/v1beta2",
        "ClusterQueue",
        "",
    )
    .unwrap();
    let patch = serde_json::json!({"spec": {"stopPolicy": if hold { "Hold" } else { "None" }}});
    queues
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
}

async fn saved_plan_while_kueue_admits(test: &str, alone: bool) {
    let s = Stack::new(test).await;
    let cq = s.vars["CQ"].clone();
    // The queue is held while the jobs are submitted, so that they are admitted only after the
    // plan is made.
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    hold_queue(&cq, true).await;
    std::fs::write(s.path().join("infra/train.py"), "print('v2')\n").unwrap();
    let out = s.run(&["apply", "--auto-approve", "--allow-disruption"]);
    assert!(out.status.success(), "{}", explain(&out));
    let spec = s.path().join("infra/gkq.yaml");
    let text_before = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text_before.replacen("quota: {cpu: 40,", "quota: {cpu: 48,", 1),
    )
    .unwrap();
    let out = s.run(&["plan", "--out", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let planned: Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join("plan.json")).unwrap())
            .unwrap();
    assert_eq!(planned["summary"]["update"], 1, "{planned:#}");
    // Kueue admits both jobs (it unsuspends the RayJobs and writes node selectors into them).
    hold_queue(&cq, false).await;
    wait_for_admissions(&s.namespace, 2).await;
    let out = if alone {
        let elsewhere = s.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::copy(s.path().join("plan.json"), elsewhere.join("plan.json")).unwrap();
        let mut c = gkq();
        c.args(["apply", "plan.json", "--no-spec-check", "--kubeconfig"])
            .arg(Stack::kubeconfig())
            .current_dir(&elsewhere);
        c.output().unwrap()
    } else {
        s.run(&["apply", "plan.json"])
    };
    assert!(out.status.success(), "{}", explain(&out));
    let out = s.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
}

#[tokio::test]
async fn a_saved_plan_applies_while_the_real_kueue_admits_jobs() {
    saved_plan_while_kueue_admits("trust-busy", false).await;
}

#[tokio::test]
async fn a_saved_plan_without_its_spec_applies_while_the_real_kueue_admits_jobs() {
    saved_plan_while_kueue_admits("trust-busy-alone", true).await;
}

#[tokio::test]
async fn hand_edited_saved_plans_are_refused_on_the_real_control_plane() {
    let s = Stack::new("trust-forged").await;
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let spec = s.path().join("infra/gkq.yaml");
    let text_before = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text_before.replacen("quota: {cpu: 40,", "quota: {cpu: 48,", 1),
    )
    .unwrap();
    let plan_file = s.path().join("plan.json");
    let forge = |edit: &dyn Fn(&mut Value)| {
        let out = s.run(&["plan", "--out", "plan.json"]);
        assert!(out.status.success(), "{}", explain(&out));
        let mut plan: Value =
            serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
        edit(&mut plan);
        let plan: gkq::plan::Plan = serde_json::from_value(plan).unwrap();
        std::fs::write(&plan_file, gkq::gitops::saved::file_text(&plan, None)).unwrap();
    };
    let cq_action = |plan: &mut Value| -> usize {
        plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .position(|a| {
                a["addr"]
                    .as_str()
                    .unwrap()
                    .starts_with("kueue.clusterqueue/")
                    && a["kind"] == "update"
            })
            .unwrap()
    };
    // A quota raised by hand, digest recomputed.
    forge(&|plan| {
        let i = cq_action(plan);
        plan["actions"][i]["steps"][0]["object"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"]
            [0]["nominalQuota"] = serde_json::json!(4800);
    });
    let out = s.run(&["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("is not the plan gkq makes now from the same spec"),
        "{}",
        explain(&out)
    );
    // An update turned into a delete.
    forge(&|plan| {
        let i = cq_action(plan);
        plan["actions"][i]["kind"] = serde_json::json!("delete");
    });
    let out = s.run(&["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("the plan file would destroy it"),
        "{}",
        explain(&out)
    );
    // Nothing of it reached the cluster; the plan as gkq wrote it applies.
    let out = s.run(&["plan", "--out", "plan.json", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", explain(&out));
    let out = s.run(&["apply", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
}

#[tokio::test]
async fn secret_values_stay_out_of_plans_and_trace_logs_with_a_real_apiserver() {
    let s = Stack::new("trust-secret").await;
    let spec = s.path().join("infra/gkq.yaml");
    let original = std::fs::read_to_string(&spec).unwrap();
    let edited = original.replacen(
        "variables:\n",
        "variables:\n  TOKEN: {sensitive: true}\n",
        1,
    ) + &format!(
        "\nmanifests:\n  - apiVersion: v1\n    kind: Secret\n    metadata: {{name: trainer-token, namespace: \"{}\"}}\n    stringData: {{token: \"${{TOKEN}}\"}}\n",
        s.namespace
    );
    std::fs::write(&spec, edited).unwrap();
    let token = "tok-REAL-apiserver-4242";
    let encoded = "dG9rLVJFQUwtYXBpc2VydmVyLTQyNDI="; // base64 of the token
    let run = |args: &[&str]| {
        let mut c = s.command(args);
        c.args(["--var", &format!("TOKEN={token}")])
            .env("RUST_LOG", "trace");
        c.output().unwrap()
    };
    for args in [
        &["plan", "-o", "json"][..],
        &["plan", "-o", "markdown"][..],
        &["apply", "--auto-approve", "-o", "json"][..],
        &["plan"][..],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", explain(&out));
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!all.contains(token), "{args:?} shows the token");
        assert!(!all.contains(encoded), "{args:?} shows the token in base64");
    }
    // The apiserver got the value.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client().await, &s.namespace);
    let secret = secrets.get("trainer-token").await.unwrap();
    assert_eq!(
        secret.data.unwrap()["token"].0,
        token.as_bytes(),
        "the apiserver holds the value"
    );
}

/// `gkq plan` says what a queue change does to work it did not submit: a Job someone else put in
/// a LocalQueue that does not exist yet waits; the spec adds that LocalQueue, the plan lists the
/// Job as going from pending to admitted, and after apply the real Kueue admits it there.
#[tokio::test]
async fn a_plan_lists_what_its_queue_change_does_to_work_it_did_not_submit() {
    let s = Stack::new("whatif-plan").await;
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_admissions(&s.namespace, 2).await;
    let ns = s.namespace.clone();
    let other = support::kueue::batch_job(&ns, "their-job", "team-queue", 1, &[("cpu", "1")]);
    crate::placement_kueue::apply(&client().await, &ns, &other)
        .await
        .unwrap();
    // Kueue makes its Workload, which waits: the LocalQueue does not exist.
    let workload = wait_for_workload_of(&ns, "their-job").await;
    let name = workload["metadata"]["name"].as_str().unwrap().to_string();

    let spec = s.path().join("infra/gkq.yaml");
    let text_before = std::fs::read_to_string(&spec).unwrap();
    let added = text_before.replace(
        "    - {name: user-queue, namespace: \"${NS}\", clusterQueue: \"${CQ}\"}\n",
        "    - {name: user-queue, namespace: \"${NS}\", clusterQueue: \"${CQ}\"}\n    - {name: team-queue, namespace: \"${NS}\", clusterQueue: \"${CQ}\"}\n",
    );
    assert_ne!(added, text_before, "the fixture's LocalQueue line moved");
    std::fs::write(&spec, added).unwrap();
    let out = s.run(&["plan", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes = plan["workloadChanges"]
        .as_array()
        .unwrap_or_else(|| panic!("{plan:#}"));
    let change = changes
        .iter()
        .find(|c| c["workload"] == format!("{ns}/{name}").as_str())
        .unwrap_or_else(|| panic!("their Job is not in the plan's workload changes: {plan:#}"));
    assert_eq!(change["job"], format!("Job {ns}/their-job").as_str());
    assert_eq!(change["before"]["state"], "pending", "{change:#}");
    assert_eq!(change["after"]["state"], "admitted", "{change:#}");
    let flavor = change["after"]["podsets"][0]["flavor"]
        .as_str()
        .unwrap_or_else(|| panic!("{change:#}"))
        .to_string();
    let text_plan = s.run(&["plan"]);
    assert!(
        text(&text_plan.stdout).contains(&format!("{ns}/{name}: pending -> admitted on {flavor}")),
        "{}",
        explain(&text_plan)
    );

    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let started = std::time::Instant::now();
    loop {
        let workload = wait_for_workload_of(&ns, "their-job").await;
        let placement = gkq::placement::observed_placement(&workload).unwrap();
        if placement.state == gkq::placement::PlacementState::Admitted {
            assert_eq!(
                placement.podsets[0].flavor.as_deref(),
                Some(flavor.as_str())
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "Kueue did not admit their Job as the plan said: {workload:#}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The Workload Kueue made for the Job `job`, waiting up to 60 s for it.
async fn wait_for_workload_of(namespace: &str, job: &str) -> Value {
    let workloads = support::control_plane::dynamic_api(
        &client().await,
        "kueue.x-k8s.io/v1beta2",
        "Workload",
        namespace,
    )
    .unwrap();
    let started = std::time::Instant::now();
    loop {
        let list = workloads
            .list(&kube::api::ListParams::default())
            .await
            .unwrap();
        if let Some(w) = list.items.iter().find(|w| {
            w.metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.iter().any(|o| o.name == job))
        }) {
            return serde_json::to_value(w).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Kueue made no Workload for {job}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `gkq explain` on the real Kueue, one job per class of pending reason: Kueue's word, gkq's
/// reproduction (which must agree), and the fix, pointing at the spec line when the spec holds
/// what to change.
#[tokio::test]
async fn explain_says_why_each_job_waits_and_what_to_change() {
    let s = Stack::new("explain").await;
    let spec = s.path().join("infra/gkq.yaml");
    let fixture = std::fs::read_to_string(&spec).unwrap();
    let head = &fixture[..fixture
        .find("\nkueue:\n")
        .expect("the fixture's kueue section")];
    std::fs::write(
        &spec,
        format!(
            "{head}
kueue:
  install: external
  flavors:
    - {{name: \"${{CPU}}\", nodePool: default-pool}}
    - {{name: \"${{ONDEMAND}}\", nodePool: on-demand-pool, nodeTaints: [{{key: dedicated, value: tpu, effect: NoSchedule}}]}}
    - {{name: \"${{DWS}}\", nodePool: dws-pool, provisioning: dws}}
  admissionChecks:
    - name: ${{CHECK}}
      provisioningRequestConfig: {{name: \"${{PRC}}\"}}
  clusterQueues:
    - name: ${{CQ}}
      resourceGroups:
        - resources: [cpu, memory, google.com/tpu]
          flavors:
            - {{name: \"${{CPU}}\", quota: {{cpu: 4, memory: 8Gi, google.com/tpu: 0}}}}
            - {{name: \"${{ONDEMAND}}\", quota: {{cpu: 4, memory: 8Gi, google.com/tpu: 16}}}}
            - {{name: \"${{DWS}}\", quota: {{cpu: 4, memory: 8Gi, google.com/tpu: 16}}}}
  localQueues:
    - {{name: user-queue, namespace: \"${{NS}}\", clusterQueue: \"${{CQ}}\"}}
"
        ),
    )
    .unwrap();
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let ns = s.namespace.clone();
    let client = client().await;
    let pool = |name: &str| serde_json::json!({"cloud.google.com/gke-nodepool": name});
    let job = |name: &str, queue: &str, cpu: &str| {
        support::kueue::batch_job(&ns, name, queue, 1, &[("cpu", cpu)])
    };
    let jobs = [
        job("too-big", "user-queue", "6"),
        support::kueue::with_pod(
            job("nowhere", "user-queue", "1"),
            "nodeSelector",
            pool("no-such-pool"),
        ),
        support::kueue::with_pod(
            job("tainted", "user-queue", "1"),
            "nodeSelector",
            pool("on-demand-pool"),
        ),
        support::kueue::with_pod(
            support::kueue::batch_job(
                &ns,
                "needs-dws",
                "user-queue",
                1,
                &[("cpu", "1"), ("google.com/tpu", "4")],
            ),
            "nodeSelector",
            pool("dws-pool"),
        ),
        job("no-queue", "missing-queue", "1"),
    ];
    for j in &jobs {
        crate::placement_kueue::apply(&client, &ns, j)
            .await
            .unwrap();
    }
    for j in &jobs {
        let name = j["metadata"]["name"].as_str().unwrap();
        wait_for_quota_reserved_condition(&ns, name).await;
    }
    let explained = |name: &str| -> Value {
        let out = s.run(&["explain", &format!("{ns}/{name}"), "-o", "json"]);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let fixes = |e: &Value| -> Vec<(String, String)> {
        e["fixes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["text"].as_str().unwrap().to_string(),
                    f["at"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let has_fix = |e: &Value, text: &str, at: &str| {
        assert!(
            fixes(e)
                .iter()
                .any(|(t, a)| t.contains(text) && a.contains(at)),
            "no fix containing `{text}` at `{at}`: {e:#}"
        );
    };

    // Quota: no flavor can ever hold 6 cpu; the fix is the quota line of the first flavor.
    let e = explained("too-big");
    assert_eq!(e["kueue"]["state"], "pending", "{e:#}");
    assert_eq!(e["agrees"], true, "{e:#}");
    let cpu = &s.vars["CPU"];
    has_fix(
        &e,
        &format!("cpu quota in flavor {cpu} from 4 to at least 6"),
        "gkq.yaml:",
    );
    // Selector: no flavor carries the pool the job asks for.
    let e = explained("nowhere");
    assert_eq!(e["agrees"], true, "{e:#}");
    has_fix(&e, "node selector or affinity excludes", "");
    // Taint: the only flavor with the right labels is tainted.
    let e = explained("tainted");
    assert_eq!(e["agrees"], true, "{e:#}");
    has_fix(&e, "Add a toleration", "");
    // Admission check: quota reserved on the DWS flavor for the TPU job, the ProvisioningRequest
    // not yet provisioned (nothing provisions here).
    let e = explained("needs-dws");
    assert_eq!(e["kueue"]["state"], "waiting-for-admission-checks", "{e:#}");
    has_fix(&e, &format!("admission check {}", s.vars["CHECK"]), "");
    // A LocalQueue that does not exist.
    let e = explained("no-queue");
    assert_eq!(e["agrees"], true, "{e:#}");
    has_fix(&e, "add the LocalQueue to `kueue.localQueues`", "gkq.yaml:");
    // An inactive (held) ClusterQueue: its jobs wait; explain says why.
    hold_queue(&s.vars["CQ"], true).await;
    let late = job("late", "user-queue", "1");
    crate::placement_kueue::apply(&client, &ns, &late)
        .await
        .unwrap();
    wait_for_quota_reserved_condition(&ns, "late").await;
    let e = explained("late");
    assert_eq!(e["kueue"]["state"], "pending", "{e:#}");
    assert_eq!(e["agrees"], true, "{e:#}");
    has_fix(&e, "inactive", "gkq.yaml:");
    let text = s.run(&["explain", &format!("{ns}/too-big")]);
    let text = text_of(&text.stdout);
    assert!(text.contains("Kueue says: pending"), "{text}");
    assert!(text.contains("gkq agrees with Kueue."), "{text}");
    assert!(text.contains("What to change:"), "{text}");

    // Fixes that fix, on the real Kueue: resumed, the queue admits `late` (1 cpu of the CPU
    // flavor's 4); the cheapest fix for `too-big` then counts that usage (raise to 7, not 6),
    // and made on the live ClusterQueue, Kueue admits the job where gkq's simulation said.
    hold_queue(&s.vars["CQ"], false).await;
    wait_for_quota_reserved(&ns, "late").await;
    let e = explained("too-big");
    let fix = &e["fixes"][0];
    let change = &fix["changes"][0];
    assert_eq!(change["change"], "quota", "{e:#}");
    assert_eq!(change["flavor"], cpu.as_str(), "{e:#}");
    assert_eq!(change["resource"], "cpu", "{e:#}");
    assert_eq!(change["to"], "7", "{e:#}");
    assert_eq!(fix["then"]["state"], "admitted", "{e:#}");
    let queues =
        support::control_plane::dynamic_api(&client, "kueue.x-k8s.io/v1beta2", "ClusterQueue", "")
            .unwrap();
    let live = queues.get(&s.vars["CQ"]).await.unwrap();
    let mut groups = serde_json::to_value(&live).unwrap()["spec"]["resourceGroups"].clone();
    for flavor in groups[0]["flavors"].as_array_mut().unwrap() {
        if flavor["name"] == cpu.as_str() {
            for quota in flavor["resources"].as_array_mut().unwrap() {
                if quota["name"] == "cpu" {
                    quota["nominalQuota"] = change["to"].clone();
                }
            }
        }
    }
    queues
        .patch(
            &s.vars["CQ"],
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&serde_json::json!({"spec": {"resourceGroups": groups}})),
        )
        .await
        .unwrap();
    let admitted = wait_for_quota_reserved(&ns, "too-big").await;
    assert_eq!(
        admitted["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"],
        cpu.as_str(),
        "{admitted:#}"
    );
}

/// Waits until Kueue has reserved quota for the Job's Workload, and returns the Workload.
async fn wait_for_quota_reserved(namespace: &str, job: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let workload = wait_for_workload_of(namespace, job).await;
        let reserved = workload["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True")
            });
        if reserved {
            return workload;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Kueue reserved no quota for {job}: {workload:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until Kueue has tried the Job's Workload: it has a `QuotaReserved` condition.
async fn wait_for_quota_reserved_condition(namespace: &str, job: &str) {
    let started = std::time::Instant::now();
    loop {
        let workload = wait_for_workload_of(namespace, job).await;
        let tried = workload["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "QuotaReserved"));
        if tried {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Kueue did not try the Workload of {job}: {workload:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A spec's `jobs:` entry for a JobSet of one 4x4 v6e slice (4 hosts), one run.
fn one_slice_jobset(name: &str) -> String {
    job_entry(
        name,
        "jobset",
        r#"    replicatedJobs:
      - name: slice
        replicas: 1
        hosts: 4
        pods:
          cpu: 8
          memory: 16Gi
          accelerator: {type: tpu-v6e-slice, topology: 4x4, chips: 4}
"#,
    )
}

/// A spec's `jobs:` entry of `kind`, one run of the fixture's script in its queue, then `shape`
/// (the kind's own lines).
fn job_entry(name: &str, kind: &str, shape: &str) -> String {
    let entry = r#"  - name: NAME
    kind: KIND
    namespace: ${NS}
    count: 1
    queue: user-queue
    script: train.py
    configMap: jax-train-script
    image: rayproject/ray:2.53.0-py311
    entrypoint: python /app/train.py
"#;
    format!(
        "{}{shape}",
        entry.replace("NAME", name).replace("KIND", kind)
    )
}

/// One plan's jobs on the real Kueue: a RayJob listed before a JobSet whose kind and name sort
/// first. The plan predicts them in the spec's order (the RayJob on on-demand, the JobSet on
/// dws), apply submits them so (each after Kueue decided on the one before), and Kueue's
/// Workloads say exactly that.
#[tokio::test]
async fn jobs_of_one_plan_land_as_predicted_in_spec_order_on_the_real_kueue() {
    let s = Stack::new("spec-order").await;
    let ns = s.namespace.clone();
    let spec = s.path().join("infra/gkq.yaml");
    let text_before = std::fs::read_to_string(&spec).unwrap();
    assert!(text_before.contains("    count: 2\n"), "{text_before}");
    let jobset = support::workspace::jobset_entry("aa-jobset", Some("${NS}"), 1);
    std::fs::write(
        &spec,
        format!(
            "{}{jobset}",
            text_before.replace("    count: 2\n", "    count: 1\n")
        ),
    )
    .unwrap();
    let out = s.run(&["plan", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let predicted = |job: &str| -> Value {
        plan["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["job"] == job)
            .cloned()
            .unwrap_or_else(|| panic!("no {job}: {plan:#}"))
    };
    let flavor_of = |placement: &Value, podset: &str| -> Value {
        placement["podsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == podset)
            .map(|p| p["flavor"].clone())
            .unwrap_or_else(|| panic!("no podset {podset}: {placement:#}"))
    };
    let ray = "rayjob-tpu-v6e-dws-1";
    let set = "aa-jobset-1";
    let on_demand = s.vars["ONDEMAND"].clone();
    let dws = s.vars["DWS"].clone();
    assert_eq!(flavor_of(&predicted(ray), "tpu-group"), on_demand.as_str());
    assert_eq!(flavor_of(&predicted(set), "slice"), dws.as_str());

    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_admissions(&ns, 2).await;
    let out = s.run(&["status", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let observed = |job: &str| -> Value {
        status["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == job)
            .map(|j| j["observed"].clone())
            .unwrap_or_else(|| panic!("no {job}: {status:#}"))
    };
    assert_eq!(
        flavor_of(&observed(ray), "tpu-group"),
        on_demand.as_str(),
        "{status:#}"
    );
    assert_eq!(
        flavor_of(&observed(set), "slice"),
        dws.as_str(),
        "{status:#}"
    );
}

/// Issue 28 point 3 on the real Kueue: a label change on admitted jobs (a RayJob and a JobSet).
/// Kueue wrote each job's placement into its pod templates with its own field manager when it
/// admitted it, so gkq's apply of the unchanged templates would conflict there. The plan's dry
/// runs do not force: the plan names each conflict, leaves Kueue's fields to Kueue and changes
/// the label; apply does exactly that, and Kueue's Workloads keep their admission. Taking the
/// fields by force is planned as a disruption and refused without `--allow-disruption`.
#[tokio::test]
async fn a_label_change_on_admitted_jobs_leaves_kueues_fields_to_kueue() {
    let s = Stack::new("label-admitted").await;
    let ns = s.namespace.clone();
    let spec = s.path().join("infra/gkq.yaml");
    let before_spec = std::fs::read_to_string(&spec).unwrap();
    assert!(before_spec.contains("    count: 2\n"), "{before_spec}");
    let jobset = one_slice_jobset("trainer");
    // A batch Job of CPU work with a node selector of its own, which Kueue's adds to.
    let batch = job_entry(
        "batch",
        "job",
        "    parallelism: 2\n    completions: 2\n    pods: {cpu: 1, memory: 1Gi, nodeSelector: {example.com/tier: batch}}\n",
    );
    // Room on on-demand for both slices: each is admitted there (no admission check) and
    // started; the batch Job on default-cpu.
    let quota = r#"quota: {cpu: 40, memory: 75Gi, google.com/tpu: "${TPU_QUOTA}"}"#;
    assert!(before_spec.contains(quota), "{before_spec}");
    let two_jobs = format!(
        "{}{jobset}",
        before_spec
            .replace("    count: 2\n", "    count: 1\n")
            .replace(quota, "quota: {cpu: 80, memory: 150Gi, google.com/tpu: 32}")
    );
    let two_jobs = format!("{two_jobs}{batch}");
    std::fs::write(&spec, &two_jobs).unwrap();
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_admissions(&ns, 3).await;
    let client = client().await;
    let ray = "rayjob-tpu-v6e-dws-1";
    let set = "trainer-1";
    let job = "batch-1";
    let rayjobs = support::control_plane::dynamic_api(&client, "ray.io/v1", "RayJob", &ns).unwrap();
    let jobsets =
        support::control_plane::dynamic_api(&client, "jobset.x-k8s.io/v1alpha2", "JobSet", &ns)
            .unwrap();
    let jobs = support::control_plane::dynamic_api(&client, "batch/v1", "Job", &ns).unwrap();
    let workloads =
        support::control_plane::dynamic_api(&client, "kueue.x-k8s.io/v1beta2", "Workload", &ns)
            .unwrap();
    // Kueue started both jobs with the on-demand flavor's node pool in their pod templates.
    let pool = |job: &Value| -> Vec<Value> {
        let templates = match job["kind"].as_str() {
            Some("RayJob") => job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["template"].clone())
                .collect::<Vec<_>>(),
            Some("Job") => vec![job["spec"]["template"].clone()],
            _ => job["spec"]["replicatedJobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["template"]["spec"]["template"].clone())
                .collect(),
        };
        templates
            .iter()
            .map(|t| t["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"].clone())
            .collect()
    };
    let started = std::time::Instant::now();
    let (ray_before, set_before, job_before) = loop {
        let r = serde_json::to_value(rayjobs.get(ray).await.unwrap()).unwrap();
        let j = serde_json::to_value(jobsets.get(set).await.unwrap()).unwrap();
        let b = serde_json::to_value(jobs.get(job).await.unwrap()).unwrap();
        let on = |o: &Value, p: &str| pool(o) == [Value::from(p)];
        if on(&r, "on-demand-pool") && on(&j, "on-demand-pool") && on(&b, "default-pool") {
            break (r, j, b);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Kueue never started the jobs where they fit:\n{r:#}\n{j:#}\n{b:#}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let admitted = || async {
        let list = workloads
            .list(&kube::api::ListParams::default())
            .await
            .unwrap();
        let mut held: Vec<(String, String)> = list
            .items
            .iter()
            .filter(|w| {
                w.data["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Admitted" && c["status"] == "True")
                })
            })
            .map(|w| {
                (
                    w.metadata.name.clone().unwrap_or_default(),
                    w.metadata.uid.clone().unwrap_or_default(),
                )
            })
            .collect();
        held.sort();
        held
    };
    let before = admitted().await;
    assert_eq!(before.len(), 3, "{before:?}");

    // A label on both jobs.
    let labelled = two_jobs.replace(
        "    queue: user-queue\n",
        "    queue: user-queue\n    labels: {team: research}\n",
    );
    assert_eq!(labelled.matches("team: research").count(), 3, "{labelled}");
    std::fs::write(&spec, &labelled).unwrap();
    let out = s.run(&["plan", "--detailed-exitcode", "-o", "json"]);
    assert_eq!(out.status.code(), Some(2), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changed: Vec<&Value> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] != "no-op")
        .collect();
    assert_eq!(changed.len(), 3, "{plan:#}");
    for action in &changed {
        assert_eq!(action["kind"], "update", "{action:#}");
        let paths: Vec<&str> = action["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["path"].as_str())
            .collect();
        assert_eq!(paths, ["metadata.labels.team"], "{action:#}");
        let conflicts = action["conflicts"].as_array().unwrap();
        // What Kueue's patch took (docs/kueue.md, "Who owns what admission wrote"): a RayJob's
        // whole worker group list (atomic in KubeRay's CRD), a JobSet's pod template node
        // selector (an atomic map in a list keyed by name).
        let fields: Vec<&str> = conflicts
            .iter()
            .filter_map(|c| c["field"].as_str())
            .collect();
        let addr = action["addr"].as_str().unwrap();
        let expected = if addr.starts_with("ray.rayjob/") {
            vec![".spec.rayClusterSpec.workerGroupSpecs"]
        } else if addr.starts_with("k8s.jobset/") {
            vec![r#".spec.replicatedJobs[name="slice"].template.spec.template.spec.nodeSelector"#]
        } else {
            vec![".spec.template.spec.nodeSelector"]
        };
        assert_eq!(fields, expected, "{action:#}");
        for c in conflicts {
            assert_eq!(c["manager"], "kueue", "{action:#}");
            assert_eq!(c["resolution"], "left", "{action:#}");
            assert_eq!(c["admission"], true, "{action:#}");
            assert!(
                c["forcing"]
                    .as_str()
                    .unwrap()
                    .contains(r#"-pool" -> (unset)"#),
                "{action:#}"
            );
        }
    }
    assert!(plan.get("disruptions").is_none(), "{plan:#}");
    let shown = text_of(&s.run(&["plan"]).stdout);
    assert!(shown.contains("! conflict: "), "{shown}");
    assert!(
        shown.contains("is owned by \"kueue\": left to it (gkq's apply does not set it)"),
        "{shown}"
    );
    let md = text_of(&s.run(&["plan", "-o", "markdown"]).stdout);
    assert!(
        md.contains("Field-manager conflicts this plan leaves to their managers"),
        "{md}"
    );

    // Apply does what the plan said: the labels, nothing of Kueue's, no failure halfway.
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let ray_after = serde_json::to_value(rayjobs.get(ray).await.unwrap()).unwrap();
    let set_after = serde_json::to_value(jobsets.get(set).await.unwrap()).unwrap();
    let job_after = serde_json::to_value(jobs.get(job).await.unwrap()).unwrap();
    for (before, after) in [
        (&ray_before, &ray_after),
        (&set_before, &set_after),
        (&job_before, &job_after),
    ] {
        assert_eq!(after["metadata"]["labels"]["team"], "research", "{after:#}");
        assert_eq!(
            after["spec"], before["spec"],
            "the spec is as Kueue left it"
        );
    }
    assert_eq!(
        admitted().await,
        before,
        "the Workloads keep their admission"
    );
    let out = s.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));

    // Another label, planned with force: Kueue's fields are taken, which is a disruption of
    // both admitted jobs, refused without --allow-disruption.
    std::fs::write(&spec, labelled.replace("team: research", "team: infra")).unwrap();
    let out = s.run(&[
        "plan",
        "--force-conflicts",
        "--detailed-exitcode",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stopped: Vec<&str> = plan["disruptions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["addr"].as_str())
        .collect();
    assert_eq!(
        stopped,
        [
            format!("k8s.job/{ns}/{job}"),
            format!("k8s.jobset/{ns}/{set}"),
            format!("ray.rayjob/{ns}/{ray}")
        ],
        "{plan:#}"
    );
    let out = s.run(&["apply", "--auto-approve", "--force-conflicts"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let err = text(&out.stderr);
    assert!(err.contains("stops running work"), "{err}");
    assert!(
        err.contains("no longer held to the admitted flavor's nodes"),
        "{err}"
    );
    assert_eq!(admitted().await, before, "nothing was changed");
    let r = serde_json::to_value(rayjobs.get(ray).await.unwrap()).unwrap();
    assert_eq!(r["metadata"]["labels"]["team"], "research");
}

/// Waits until exactly `count` Workloads in `namespace` hold quota (reserved, not finished) and
/// none of `gone` (uids of deleted jobs) does.
async fn wait_for_holders(namespace: &str, count: usize, gone: &[String]) {
    wait_for_workloads(namespace, |workloads| {
        let holding: Vec<&Value> = workloads
            .iter()
            .filter(|w| gkq::placement::held::holds_quota(w))
            .collect();
        let old = holding.iter().any(|w| {
            w["metadata"]["labels"]["kueue.x-k8s.io/job-uid"]
                .as_str()
                .is_some_and(|uid| gone.iter().any(|g| g == uid))
        });
        (holding.len() == count && !old)
            .then_some(())
            .ok_or_else(|| {
                format!(
                    "{} Workloads hold quota, old runs among them: {old}",
                    holding.len()
                )
            })
    })
    .await;
}

/// The uids of the stack's jobs of `kind` in `namespace`.
async fn job_uids(namespace: &str, api_version: &str, kind: &str) -> Vec<String> {
    let api =
        support::control_plane::dynamic_api(&client().await, api_version, kind, namespace).unwrap();
    api.list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|j| j.metadata.uid.clone())
        .collect()
}

/// Row for row: each placement the plan predicted (state, and flavor of every podset) is what
/// `gkq status` observes Kueue did with the job.
fn landed_as_planned(plan: &Value, status: &Value) {
    let rows = |placement: &Value| -> Vec<(String, String)> {
        placement["podsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["flavor"].as_str().unwrap_or("-").to_string(),
                )
            })
            .collect()
    };
    let placements = plan["placements"].as_array().unwrap();
    assert!(!placements.is_empty(), "{plan:#}");
    for predicted in placements {
        let job = predicted["job"].as_str().unwrap();
        let observed = status["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == job)
            .map(|j| j["observed"].clone())
            .unwrap_or_else(|| panic!("no {job} in {status:#}"));
        assert_eq!(
            (predicted["state"].clone(), rows(predicted)),
            (observed["state"].clone(), rows(&observed)),
            "{job}: planned {predicted:#}\nobserved {observed:#}"
        );
    }
}

/// Replaced runs release first, on the real Kueue. A script change replaces both running
/// RayJobs: apply deletes each old run, waits until Kueue has finished its Workload
/// (`OwnerNotFound`: its quota released), then submits the new run; the plan predicted exactly
/// that (job 1 on on-demand, job 2 on dws, no change to other work) and Kueue's Workloads say
/// so, row for row. Then a kind switch: the RayJobs become JobSets of the same names; both
/// RayJobs are deleted (and released) before the first JobSet is submitted, and the JobSets land
/// as planned, on-demand to the first.
#[tokio::test]
async fn replaced_runs_and_a_kind_switch_land_as_planned_on_the_real_kueue() {
    let s = Stack::new("replace-runs").await;
    let ns = s.namespace.clone();
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_holders(&ns, 2, &[]).await;

    // A script change: both jobs get new runs.
    let script = s.path().join("infra/train.py");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, format!("{text}\nprint('second run')\n")).unwrap();
    let out = s.run(&["plan", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let replaced = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| {
            a["kind"] == "replace" && a["addr"].as_str().unwrap().starts_with("ray.rayjob/")
        })
        .count();
    assert_eq!(replaced, 2, "{plan:#}");
    assert!(
        plan["workloadChanges"].as_array().is_none_or(Vec::is_empty),
        "{plan:#}"
    );
    let old_runs = job_uids(&ns, "ray.io/v1", "RayJob").await;
    let out = s.run(&["apply", "--auto-approve", "--allow-disruption"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_holders(&ns, 2, &old_runs).await;
    let out = s.run(&["status", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    landed_as_planned(&plan, &status);
    let on_demand = s.vars["ONDEMAND"].clone();
    let first = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["job"] == "rayjob-tpu-v6e-dws-1")
        .unwrap();
    assert!(first.to_string().contains(&on_demand), "{first:#}");

    // A kind switch under the same names.
    let spec = s.path().join("infra/gkq.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    let at = text.find("jobs:\n").unwrap();
    let jobsets = support::workspace::jobset_entry("rayjob-tpu-v6e-dws", Some("${NS}"), 2);
    std::fs::write(&spec, format!("{}jobs:\n{jobsets}", &text[..at])).unwrap();
    let out = s.run(&["plan", "--prune", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let order: Vec<(String, String)> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["addr"].as_str().unwrap().to_string(),
                a["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let at = |addr: &str, kind: &str| {
        order
            .iter()
            .position(|(a, k)| a == addr && k == kind)
            .unwrap_or_else(|| panic!("no {kind} of {addr}: {order:?}"))
    };
    let first_jobset = order
        .iter()
        .position(|(a, k)| a.starts_with("k8s.jobset/") && k == "create")
        .unwrap_or_else(|| panic!("no JobSet created: {order:?}"));
    for job in ["rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2"] {
        assert!(
            at(&format!("ray.rayjob/{ns}/{job}"), "delete") < first_jobset,
            "{order:?}"
        );
    }
    assert!(
        plan["workloadChanges"].as_array().is_none_or(Vec::is_empty),
        "{plan:#}"
    );
    let old_runs = job_uids(&ns, "ray.io/v1", "RayJob").await;
    let out = s.run(&["apply", "--prune", "--auto-approve", "--allow-disruption"]);
    assert!(out.status.success(), "{}", explain(&out));
    wait_for_holders(&ns, 2, &old_runs).await;
    let out = s.run(&["status", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    landed_as_planned(&plan, &status);
    let first = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["job"] == "rayjob-tpu-v6e-dws-1")
        .unwrap();
    assert!(first.to_string().contains(&on_demand), "{first:#}");
}

/// The fixture's spec up to its `jobs:` (the queues and pools), for tests that list their own.
fn spec_without_jobs(s: &Stack) -> String {
    let text = std::fs::read_to_string(s.path().join("infra/gkq.yaml")).unwrap();
    let at = text.find("\njobs:\n").expect("the fixture lists jobs");
    text[..=at].to_string()
}

/// Each podset's flavor (`-` for none) and the state of one placement, as `plan -o json` and
/// `status -o json` write it: what "the same row" means.
fn row(placement: &Value) -> (String, Vec<(String, String)>) {
    let podsets = placement["podsets"]
        .as_array()
        .unwrap_or_else(|| panic!("{placement:#}"))
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["flavor"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    (placement["state"].to_string(), podsets)
}

/// Plans `spec`, applies it, waits for Kueue to reserve quota for `reserved` Workloads, and
/// asserts that every job's placement in `status` is the plan's, row for row (state and each
/// podset's flavor); returns the plan's rows by job.
async fn plan_apply_and_compare(
    s: &Stack,
    spec: &str,
    reserved: usize,
) -> BTreeMap<String, (String, Vec<(String, String)>)> {
    std::fs::write(s.path().join("infra/gkq.yaml"), spec).unwrap();
    let out = s.run(&["plan", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let predicted: BTreeMap<String, _> = plan["placements"]
        .as_array()
        .unwrap_or_else(|| panic!("{plan:#}"))
        .iter()
        .map(|p| (p["job"].as_str().unwrap().to_string(), row(p)))
        .collect();
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    // Kueue decided on each job before the next was created.
    assert!(
        !text(&out.stderr).contains("decided nothing"),
        "{}",
        explain(&out)
    );
    wait_for_admissions(&s.namespace, reserved).await;
    let out = s.run(&["status", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let observed: BTreeMap<String, _> = status["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("{status:#}"))
        .iter()
        .map(|j| (j["job"].as_str().unwrap().to_string(), row(&j["observed"])))
        .collect();
    assert_eq!(predicted, observed, "plan: {plan:#}\nstatus: {status:#}");
    predicted
}

/// A JobSet entry of one v6e slice in `queue`, at `priority_class` when given.
fn slice_in(name: &str, queue: &str, priority_class: Option<&str>) -> String {
    let mut entry = one_slice_jobset(name).replace("queue: user-queue", &format!("queue: {queue}"));
    if let Some(class) = priority_class {
        entry = entry.replace(
            "    count: 1\n",
            &format!("    count: 1\n    priorityClass: {class}\n"),
        );
    }
    entry
}

/// A low-priority job listed before a high-priority one, on the real Kueue: apply submits the
/// low one first and Kueue gives it on-demand before the high one exists, so the high one goes
/// to dws (no preemption is configured). Predicting the two as waiting together would put the
/// high one on on-demand; the plan predicts the spec's sequence and Kueue agrees row for row.
#[tokio::test]
async fn a_low_priority_job_listed_before_a_high_one_lands_as_predicted_on_the_real_kueue() {
    let s = Stack::new("low-before-high").await;
    let (low, high) = (unique_name("low"), unique_name("high"));
    let class = |name: &str, value: i32| {
        format!(
            "  - {{apiVersion: kueue.x-k8s.io/v1beta2, kind: WorkloadPriorityClass, metadata: {{name: {name}}}, value: {value}}}\n"
        )
    };
    let spec = format!(
        "{}jobs:\n{}{}manifests:\n{}{}",
        spec_without_jobs(&s),
        slice_in("low-first", "user-queue", Some(&low)),
        slice_in("high-second", "user-queue", Some(&high)),
        class(&low, 100),
        class(&high, 1000),
    );
    let rows = plan_apply_and_compare(&s, &spec, 2).await;
    let flavor = |job: &str| rows[job].1[0].1.clone();
    assert_eq!(flavor("low-first-1"), s.vars["ONDEMAND"], "{rows:?}");
    assert_eq!(flavor("high-second-1"), s.vars["DWS"], "{rows:?}");
}

/// A job that borrows, listed before the lender's own job, on the real Kueue: the borrower's
/// ClusterQueue has no on-demand quota of its own and borrows the lender's through their cohort;
/// submitted first, it gets on-demand, and the lender's own job, arriving after, goes to dws
/// (reclaimWithinCohort is Never by default). Waiting together, Kueue would have preferred the
/// job that does not borrow.
#[tokio::test]
async fn a_borrowing_job_listed_before_the_lenders_own_lands_as_predicted_on_the_real_kueue() {
    let s = Stack::new("borrow-first").await;
    let base = spec_without_jobs(&s);
    let cohort = base.replace(
        "    - name: ${CQ}\n",
        "    - name: ${CQ}\n      cohort: ${CQ}-co\n",
    );
    assert_ne!(cohort, base, "the fixture's ClusterQueue line moved");
    let borrower = "    - name: ${CQ}-b\n      cohort: ${CQ}-co\n      resourceGroups:\n        - resources: [cpu, memory, google.com/tpu]\n          flavors:\n            - {name: \"${ONDEMAND}\", quota: {cpu: 0, memory: 0, google.com/tpu: 0}}\n  localQueues:\n    - {name: team-queue, namespace: \"${NS}\", clusterQueue: \"${CQ}-b\"}\n";
    let queues = cohort.replace("  localQueues:\n", borrower);
    assert_ne!(queues, cohort, "the fixture's localQueues line moved");
    let spec = format!(
        "{queues}jobs:\n{}{}",
        slice_in("borrower", "team-queue", None),
        slice_in("lender", "user-queue", None),
    );
    let rows = plan_apply_and_compare(&s, &spec, 2).await;
    let flavor = |job: &str| rows[job].1[0].1.clone();
    assert_eq!(flavor("borrower-1"), s.vars["ONDEMAND"], "{rows:?}");
    assert_eq!(flavor("lender-1"), s.vars["DWS"], "{rows:?}");
}

/// 200 batch Jobs someone else creates in a burst (many in one creation second, so Kueue orders
/// them by Workload uid) while the ClusterQueue is held; the spec then lets the queue run. The
/// plan's `workloadChanges` say which of them Kueue admits, and where; after apply the real
/// Kueue's Workloads say the same, Workload for Workload, and the rest still wait.
#[tokio::test]
async fn a_burst_of_200_jobs_is_admitted_as_the_plan_lists_on_the_real_kueue() {
    let s = Stack::new("burst-200").await;
    let ns = s.namespace.clone();
    // Room for part of the burst: 100m each, 10 cpu on the CPU flavor, 5 on on-demand, none on
    // dws; the queue held.
    let base = spec_without_jobs(&s)
        .replace("cpu: 40, memory: 75Gi", "cpu: 5, memory: 75Gi")
        .replace("cpu: 1000000000,", "cpu: 0,");
    let held = base.replace(
        "    - name: ${CQ}\n",
        "    - name: ${CQ}\n      stopPolicy: Hold\n",
    );
    assert_ne!(held, base, "the fixture's ClusterQueue line moved");
    std::fs::write(s.path().join("infra/gkq.yaml"), &held).unwrap();
    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));

    let client = client().await;
    let jobs: Vec<Value> = (0..200)
        .map(|i| {
            support::kueue::batch_job(
                &ns,
                &format!("burst-{i:03}"),
                "user-queue",
                1,
                &[("cpu", "100m")],
            )
        })
        .collect();
    use futures::StreamExt;
    let created: Vec<_> = futures::stream::iter(jobs.iter().map(|job| {
        let client = client.clone();
        let ns = ns.clone();
        async move { crate::placement_kueue::apply(&client, &ns, job).await }
    }))
    .buffer_unordered(50)
    .collect()
    .await;
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let workloads_api =
        support::control_plane::dynamic_api(&client, "kueue.x-k8s.io/v1beta2", "Workload", &ns)
            .unwrap();
    let list = || async {
        workloads_api
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|w| serde_json::to_value(w).unwrap())
            .collect::<Vec<Value>>()
    };
    let started = std::time::Instant::now();
    let workloads = loop {
        let workloads = list().await;
        if workloads.len() >= 200 {
            break workloads;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "Kueue made {} Workloads of 200",
            workloads.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Within one creation second only the uid orders them: the burst has such ties.
    let mut per_second: BTreeMap<String, usize> = BTreeMap::new();
    for w in &workloads {
        *per_second
            .entry(
                w["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
            .or_default() += 1;
    }
    assert!(per_second.values().any(|&n| n > 1), "{per_second:?}");

    std::fs::write(s.path().join("infra/gkq.yaml"), &base).unwrap();
    let out = s.run(&["plan", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let admitted: BTreeMap<String, String> = plan["workloadChanges"]
        .as_array()
        .unwrap_or_else(|| panic!("{plan:#}"))
        .iter()
        // Other tests' Workloads share the control plane (and may appear in the what-if).
        .filter(|c| {
            c["workload"]
                .as_str()
                .is_some_and(|w| w.starts_with(&format!("{ns}/")))
                && c["after"]["state"] == "admitted"
        })
        .map(|c| {
            (
                c["workload"].as_str().unwrap().to_string(),
                c["after"]["podsets"][0]["flavor"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert!(
        !admitted.is_empty() && admitted.len() < 200,
        "the quota admits part of the burst: {plan:#}"
    );

    let out = s.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    // Kueue is done with the burst once nothing more is reserved for a few seconds.
    let mut settled = (0, std::time::Instant::now());
    loop {
        let reserved = list()
            .await
            .iter()
            .filter(|w| condition_true(w, "QuotaReserved"))
            .count();
        if reserved != settled.0 {
            settled = (reserved, std::time::Instant::now());
        } else if settled.1.elapsed() > Duration::from_secs(5) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let observed: BTreeMap<String, String> = list()
        .await
        .iter()
        .filter_map(|w| {
            let placement = gkq::placement::observed_placement(w).unwrap();
            (placement.state == gkq::placement::PlacementState::Admitted).then(|| {
                (
                    format!("{ns}/{}", w["metadata"]["name"].as_str().unwrap()),
                    placement.podsets[0].flavor.clone().unwrap_or_default(),
                )
            })
        })
        .collect();
    let differing: Vec<String> = admitted
        .iter()
        .filter(|(w, f)| observed.get(*w) != Some(*f))
        .map(|(w, f)| format!("{w}: planned {f}, observed {:?}", observed.get(w)))
        .chain(
            observed
                .iter()
                .filter(|(w, _)| !admitted.contains_key(*w))
                .map(|(w, f)| format!("{w}: not planned, observed {f}")),
        )
        .collect();
    let rows = |w: &str| {
        plan["workloadChanges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["workload"] == w)
            .cloned()
    };
    assert!(
        differing.is_empty(),
        "{differing:#?}\n{:#?}",
        differing
            .iter()
            .filter_map(|d| rows(d.split(':').next().unwrap()))
            .collect::<Vec<_>>()
    );
}

/// A raw RayJob of `manifests:` with two identical TPU worker groups `a` and `b`, in the
/// LocalQueue `queue` (which the spec does not declare).
fn two_tpu_groups_rayjob(queue: &str) -> String {
    let worker = |group: &str| {
        format!(
            r#"          - groupName: {group}
            replicas: 1
            numOfHosts: 4
            rayStartParams: {{}}
            template:
              spec:
                tolerations:
                  - {{key: google.com/tpu, operator: Exists, effect: NoSchedule}}
                  - {{key: cloud.google.com/gke-queued, operator: Exists, effect: NoSchedule}}
                nodeSelector:
                  cloud.google.com/gke-tpu-accelerator: tpu-v6e-slice
                  cloud.google.com/gke-tpu-topology: 4x4
                containers:
                  - name: ray-worker
                    image: rayproject/ray:2.53.0-py311
                    resources:
                      requests: {{cpu: "8", memory: 16Gi, google.com/tpu: "4"}}
                      limits: {{cpu: "8", memory: 16Gi, google.com/tpu: "4"}}
"#
        )
    };
    format!(
        r#"
manifests:
  - apiVersion: ray.io/v1
    kind: RayJob
    metadata:
      name: two-groups
      namespace: ${{NS}}
      labels: {{kueue.x-k8s.io/queue-name: {queue}}}
    spec:
      suspend: true
      shutdownAfterJobFinishes: true
      entrypoint: python /app/train.py
      rayClusterSpec:
        headGroupSpec:
          rayStartParams: {{}}
          template:
            spec:
              nodeSelector: {{cloud.google.com/gke-nodepool: default-pool}}
              containers:
                - name: ray-head
                  image: rayproject/ray:2.53.0-py311
                  resources:
                    requests: {{cpu: "2", memory: 4Gi}}
                    limits: {{cpu: "2", memory: 4Gi}}
        workerGroupSpecs:
{}{}"#,
        worker("a"),
        worker("b")
    )
}

/// The DWS single-podset notice of a plan, from what lives in the cluster: someone else's
/// ClusterQueue and LocalQueue put a ProvisioningRequest check, whose config has no
/// `podSetMergePolicy`, on the DWS flavor. `validate` cannot see them (the spec declares none of
/// them), so the plan says it: a RayJob with two TPU worker groups would send GKE a request of two
/// PodSets, which GKE refuses. The notice is in `-o json` `notices`, the text and the markdown,
/// with the merge policy as its fix; once the live config merges the podsets, it is gone.
#[tokio::test]
async fn a_plan_notes_a_live_dws_check_that_would_send_several_podsets() {
    use support::kueue::{KUEUE, cluster_queue, group, local_queue};
    let s = Stack::new("dws-live-split").await;
    let ns = s.namespace.clone();
    let (check, config, cq) = (
        unique_name("live-dws"),
        unique_name("live-prc"),
        unique_name("team-cq"),
    );
    let dws = s.vars["DWS"].clone();
    let live_config = |merge: Option<&str>| {
        let mut config = serde_json::json!({"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig",
            "metadata": {"name": config},
            "spec": {"provisioningClassName": "queued-provisioning.gke.io",
                "managedResources": ["google.com/tpu"]}});
        if let Some(policy) = merge {
            config["spec"]["podSetMergePolicy"] = serde_json::json!(policy);
        }
        config
    };
    let client = client().await;
    for object in [
        live_config(None),
        serde_json::json!({"apiVersion": KUEUE, "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {"apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig", "name": config}}}),
        cluster_queue(
            &cq,
            vec![group(
                &["cpu", "memory", "google.com/tpu"],
                &[(
                    &dws,
                    &[
                        ("cpu", "1000"),
                        ("memory", "1000Gi"),
                        ("google.com/tpu", "64"),
                    ],
                )],
            )],
            serde_json::json!({"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}),
        ),
        local_queue(&ns, "team-queue", &cq),
    ] {
        crate::placement_kueue::apply(&client, &ns, &object)
            .await
            .unwrap();
    }
    let spec = s.path().join("infra/gkq.yaml");
    std::fs::write(
        &spec,
        spec_without_jobs(&s) + &two_tpu_groups_rayjob("team-queue"),
    )
    .unwrap();
    let out = s.run(&["plan", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = format!("ray.rayjob/{ns}/two-groups");
    let notices: Vec<&Value> = plan["notices"]
        .as_array()
        .unwrap_or_else(|| panic!("{plan:#}"))
        .iter()
        .filter(|n| n["addr"] == job.as_str())
        .collect();
    assert_eq!(notices.len(), 1, "{plan:#}");
    let message = notices[0]["message"].as_str().unwrap();
    let expected = format!(
        "RayJob `two-groups` would send GKE a DWS ProvisioningRequest with 2 podsets (a, b) through the cluster's admission check `{check}` (ProvisioningRequestConfig `{config}`)"
    );
    assert!(message.contains(&expected), "{message}");
    let help = notices[0]["help"].as_str().unwrap_or_default();
    assert!(
        help.contains(&format!(
            "set `spec.podSetMergePolicy: IdenticalPodTemplates` on ProvisioningRequestConfig `{config}`"
        )),
        "{help}"
    );

    let out = s.run(&["plan"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    let said = text(&out.stdout);
    assert!(said.contains(&format!("Note: {job}: {expected}")), "{said}");
    assert!(said.contains(help), "{said}");
    let out = s.run(&["plan", "-o", "markdown"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    assert!(text(&out.stdout).contains(&expected), "{}", explain(&out));

    // The live config merges identical podsets: one PodSet, nothing to say.
    crate::placement_kueue::apply(&client, &ns, &live_config(Some("IdenticalPodTemplates")))
        .await
        .unwrap();
    let out = s.run(&["plan", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !plan["notices"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["message"]
                .as_str()
                .unwrap_or_default()
                .contains("DWS ProvisioningRequest")),
        "{plan:#}"
    );
}
