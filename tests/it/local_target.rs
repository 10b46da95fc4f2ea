//! The seed walk-through on the local target, end to end through the `gkq` binary: apply
//! creates the cluster and pools, installs Kueue (embedded manifests, no network), creates the
//! queues and submits both jobs; job 1 lands on on-demand and job 2 on dws, waiting for its
//! ProvisioningRequest; a second plan is empty; `gkq status` agrees with the prediction; once
//! the simulated DWS delay has passed (a fast clock), job 2 is provisioned and runs; destroy
//! removes everything. The JobSet example (`examples/tpu-dws-jobset`) runs the same way, with
//! the simulated JobSet controller.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::{self, repo_root};

/// `gkq` on the example with `--env local` and a state directory, with the simulation settings.
fn gkq(state: &Path, settings: &[(&str, &str)], args: &[&str]) -> Output {
    gkq_env(state, "local", settings, args)
}

/// [`gkq`] with another environment overlay (add `--target local` for one that is not local).
fn gkq_env(state: &Path, env: &str, settings: &[(&str, &str)], args: &[&str]) -> Output {
    gkq_on("examples/tpu-dws", state, env, settings, args)
}

/// `gkq` on `example` with an environment overlay, a state directory and simulation settings.
fn gkq_on(
    example: &str,
    state: &Path,
    env: &str,
    settings: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut c = support::gkq();
    c.current_dir(repo_root());
    for (k, v) in settings {
        c.env(k, v);
    }
    c.args(args)
        .args([example, "--env", env, "--state-dir"])
        .arg(state);
    c.output().unwrap()
}

/// `gkq ARGS STACK --target local --state-dir STATE`, for a stack copied out of an example.
fn gkq_stack(stack: &Path, state: &Path, args: &[&str]) -> Output {
    let mut c = support::gkq();
    c.args(args)
        .arg(stack)
        .args(["--target", "local", "--state-dir"])
        .arg(state);
    c.output().unwrap()
}

/// A command's stdout and stderr as text.
pub(crate) fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn ok(out: Output) -> String {
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code()
    );
    stdout
}

fn status(state: &Path, settings: &[(&str, &str)]) -> Value {
    status_on("examples/tpu-dws", state, settings)
}

/// `gkq status -o json` on `example` with the local overlay.
fn status_on(example: &str, state: &Path, settings: &[(&str, &str)]) -> Value {
    let stdout = ok(gkq_on(
        example,
        state,
        "local",
        settings,
        &["status", "-o", "json"],
    ));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn job<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == name)
        .unwrap_or_else(|| panic!("no job {name} in {report:#}"))
}

fn podset_flavor<'a>(placement: &'a Value, podset: &str) -> &'a Value {
    placement["podsets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == podset)
        .map(|p| &p["flavor"])
        .unwrap_or_else(|| panic!("no podset {podset} in {placement:#}"))
}

fn pool_nodes(report: &Value, pool: &str) -> i64 {
    report["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pool)
        .and_then(|p| p["nodes"].as_i64())
        .unwrap_or_else(|| panic!("no node count for {pool} in {report:#}"))
}

const JOB1: &str = "rayjob-tpu-v6e-dws-1";
const JOB2: &str = "rayjob-tpu-v6e-dws-2";
/// Where the seed cluster's simulated Kubernetes is kept, under the state directory.
const SEED_STATE: &str = "clusters/local-project/us-east5-b/tpu-cluster/kubernetes.json";

#[test]
fn seed_walkthrough_on_the_local_target() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // Real time during apply; DWS answers 30 (simulated) minutes after a request; jobs run
    // long enough to be seen running.
    let slow = [
        ("GKQ_LOCAL_PROVISIONING", "after:30m"),
        ("GKQ_LOCAL_RUN", "100h"),
    ];

    let stdout = ok(gkq(state, &slow, &["apply", "--auto-approve"]));
    assert!(stdout.contains("Plan: 14 to create"), "{stdout}");
    assert!(
        stdout.contains("Where the jobs landed (simulated by the local target"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{JOB1} -> on-demand: admitted")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{JOB2} -> dws: quota reserved, waiting for dws-prov"
        )),
        "{stdout}"
    );
    assert!(state.join(SEED_STATE).is_file());

    // A second plan has nothing to do.
    let out = gkq(state, &slow, &["plan", "--detailed-exitcode"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("No changes."), "{stdout}");
    assert!(stderr.contains("simulated"), "{stderr}");

    // Status: observed from the Workloads, and the prediction agrees.
    let report = status(state, &slow);
    assert!(report["simulated"].is_object(), "{report:#}");
    assert_eq!(report["clusterStatus"]["status"], "RUNNING");
    let first = job(&report, JOB1);
    assert_eq!(first["observed"]["state"], "admitted", "{first:#}");
    assert_eq!(podset_flavor(&first["observed"], "tpu-group"), "on-demand");
    assert_eq!(podset_flavor(&first["observed"], "head"), "default-cpu");
    assert_eq!(
        podset_flavor(&first["observed"], "submitter"),
        "default-cpu"
    );
    assert_eq!(first["agrees"], true, "{first:#}");
    let second = job(&report, JOB2);
    assert_eq!(
        second["observed"]["state"], "waiting-for-admission-checks",
        "{second:#}"
    );
    assert_eq!(podset_flavor(&second["observed"], "tpu-group"), "dws");
    assert_eq!(second["agrees"], true, "{second:#}");
    assert_eq!(second["admissionChecks"][0]["name"], "dws-prov");
    assert_eq!(second["admissionChecks"][0]["state"], "Pending");
    assert_eq!(
        second["provisioningRequest"]["state"], "Accepted",
        "{second:#}"
    );
    assert_eq!(second["ray"]["deploymentStatus"], "Suspended");
    assert_eq!(pool_nodes(&report, "default-pool"), 3);
    assert_eq!(pool_nodes(&report, "dws-pool"), 0);
    let queue = &report["clusterQueues"][0];
    assert_eq!(queue["name"], "cluster-queue");
    assert_eq!(queue["reservingWorkloads"], 2);
    assert_eq!(queue["admittedWorkloads"], 1);
    let tpu_on_demand = queue["usage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["flavor"] == "on-demand" && u["resource"] == "google.com/tpu")
        .unwrap();
    assert_eq!(tpu_on_demand["reserved"], "16");

    // The same in text, labelled simulated.
    let text_status = ok(gkq(state, &slow, &["status"]));
    assert!(
        text_status.contains("Simulated: the local target"),
        "{text_status}"
    );
    assert!(
        text_status.contains(&format!(
            "{JOB2} -> dws: quota reserved, waiting for dws-prov"
        )),
        "{text_status}"
    );

    // Time flies (an hour per second): the DWS delay passes, job 2 is provisioned and runs,
    // the on-demand pool has scaled up for job 1, and nothing in the spec drifted.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let fast = [
        ("GKQ_LOCAL_PROVISIONING", "after:30m"),
        ("GKQ_LOCAL_RUN", "100h"),
        ("GKQ_LOCAL_CLOCK", "3600x"),
    ];
    let report = status(state, &fast);
    let second = job(&report, JOB2);
    assert_eq!(second["observed"]["state"], "admitted", "{second:#}");
    assert_eq!(podset_flavor(&second["observed"], "tpu-group"), "dws");
    assert_eq!(second["admissionChecks"][0]["state"], "Ready");
    assert_eq!(
        second["provisioningRequest"]["state"], "Provisioned",
        "{second:#}"
    );
    assert_eq!(second["ray"]["deploymentStatus"], "Running", "{second:#}");
    assert_eq!(second["agrees"], true, "{second:#}");
    let first = job(&report, JOB1);
    assert_eq!(first["ray"]["deploymentStatus"], "Running", "{first:#}");
    assert_eq!(pool_nodes(&report, "on-demand-pool"), 4, "{report:#}");
    assert_eq!(pool_nodes(&report, "dws-pool"), 4, "{report:#}");
    // The emulated GKE knows the autoscaled sizes too.
    let gke: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("gke/gke-emulator-state.json")).unwrap(),
    )
    .unwrap();
    let sizes: Vec<(String, i64)> = gke["clusters"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|c| c["pools"].as_array().unwrap().clone())
        .map(|p| {
            (
                p["json"]["name"].as_str().unwrap().to_string(),
                p["node_count"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(
        sizes.contains(&("on-demand-pool".to_string(), 4)),
        "{sizes:?}"
    );
    assert!(sizes.contains(&("dws-pool".to_string(), 4)), "{sizes:?}");
    let out = gkq(state, &fast, &["plan", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    // Destroy: `--confirm` consents to deleting what gkq made, not to stopping the jobs that
    // run there: that takes --allow-disruption, and without it nothing is changed.
    let out = gkq(state, &fast, &["destroy", "--confirm", "tpu-cluster"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("refusing to destroy: this plan stops running work")
            && stderr.contains("gke.cluster/tpu-cluster -> RayJob default/rayjob-tpu-v6e-dws-")
            && stderr.contains("--allow-disruption; nothing was changed"),
        "{stderr}"
    );
    let out = gkq(state, &fast, &["plan", "--detailed-exitcode"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "destroy refused: {:?}",
        text(&out)
    );
    let out = gkq(
        state,
        &fast,
        &["destroy", "--confirm", "tpu-cluster", "--allow-disruption"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // A destroy speaks of destroying.
    assert!(stderr.contains("Destroy complete! "), "{stderr}");
    assert!(!stderr.contains("Apply complete!"), "{stderr}");
    let world: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join(SEED_STATE)).unwrap()).unwrap();
    assert_eq!(
        world["store"]["objects"],
        serde_json::json!([]),
        "{world:#}"
    );
    let report = status(state, &fast);
    assert!(report["clusterStatus"]["status"].is_null(), "{report:#}");
    assert_eq!(report["kubernetes"], false);
}

/// The JobSet example in one command: the plan shows each replicated job's podset, count and
/// flavor (run 1 on on-demand, run 2 on dws waiting for the DWS check); Kueue's simulated
/// JobSet integration agrees; the simulated JobSet controller keeps run 2 suspended until DWS
/// provisions, then both run and complete; a changed JobSet is a new run, refused while the old
/// one runs unless disruption is allowed.
#[test]
fn jobset_walkthrough_on_the_local_target() {
    // A copy of the example with the local overlay, so that the test can change the spec.
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("stack");
    std::fs::create_dir_all(stack.join("environments")).unwrap();
    for file in ["gkq.yaml", "train.py"] {
        std::fs::copy(
            repo_root().join("examples/tpu-dws-jobset").join(file),
            stack.join(file),
        )
        .unwrap();
    }
    std::fs::copy(
        repo_root().join("environments/local.yaml"),
        stack.join("environments/local.yaml"),
    )
    .unwrap();
    let state = &dir.path().join("state");
    let example = stack.to_str().unwrap();
    let run =
        |settings: &[(&str, &str)], args: &[&str]| gkq_on(example, state, "local", settings, args);
    let slow = [("GKQ_LOCAL_PROVISIONING", "after:30m")];
    let stdout = ok(run(&slow, &["apply", "--auto-approve"]));
    assert!(stdout.contains("Plan: 15 to create"), "{stdout}");
    let placement = stdout
        .split("Placement (predicted")
        .nth(1)
        .unwrap_or_else(|| panic!("no placement section: {stdout}"));
    let lines: Vec<&str> = placement.lines().map(str::trim).collect();
    assert!(
        lines.windows(2).any(|w| w
            == [
                "default/jobset-tpu-v6e-dws-1 -> admitted",
                "slice        x4   on-demand"
            ]),
        "{placement}"
    );
    assert!(
        lines.windows(2).any(|w| w
            == [
                "default/jobset-tpu-v6e-dws-2 -> quota reserved, waits for dws-prov",
                "slice        x4   dws"
            ]),
        "{placement}"
    );
    assert!(
        stdout.contains("jobset-tpu-v6e-dws-2 -> dws: quota reserved, waiting for dws-prov"),
        "{stdout}"
    );

    let report = status_on(example, state, &slow);
    let first = job(&report, "jobset-tpu-v6e-dws-1");
    assert_eq!(first["kind"], "JobSet", "{first:#}");
    assert_eq!(first["observed"]["state"], "admitted", "{first:#}");
    assert_eq!(podset_flavor(&first["observed"], "slice"), "on-demand");
    assert_eq!(first["agrees"], true, "{first:#}");
    let second = job(&report, "jobset-tpu-v6e-dws-2");
    assert_eq!(
        second["observed"]["state"], "waiting-for-admission-checks",
        "{second:#}"
    );
    assert_eq!(podset_flavor(&second["observed"], "slice"), "dws");
    assert_eq!(second["agrees"], true, "{second:#}");
    let world = || -> Value {
        serde_json::from_str(&std::fs::read_to_string(state.join(SEED_STATE)).unwrap()).unwrap()
    };
    let job_set = |world: &Value, name: &str| -> Value {
        world["store"]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == "JobSet" && o["metadata"]["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no JobSet {name}"))
    };
    let text_status = ok(run(&slow, &["status"]));
    assert!(
        text_status.contains(
            "jobset:     Suspended (slice 0 ready, 0 succeeded): jobset is suspended until Kueue admits it (simulated)"
        ),
        "{text_status}"
    );
    let suspended = job_set(&world(), "jobset-tpu-v6e-dws-2");
    assert_eq!(suspended["spec"]["suspend"], true, "{suspended:#}");
    assert_eq!(
        suspended["status"]["conditions"][0]["message"],
        "jobset is suspended until Kueue admits it (simulated)"
    );

    // A changed JobSet is a new run (replace), and the old runs hold quota: apply refuses
    // without --allow-disruption and changes nothing.
    let spec = std::fs::read_to_string(stack.join("gkq.yaml")).unwrap();
    std::fs::write(stack.join("gkq.yaml"), spec.replace("cpu: 8", "cpu: 7")).unwrap();
    let plan = ok(run(&slow, &["plan"]));
    assert!(
        plan.contains(
            "a JobSet's pod template changed: Kueue admitted the job with its pod templates"
        ),
        "{plan}"
    );
    assert!(
        plan.contains("0 to create, 0 to update, 2 to replace"),
        "{plan}"
    );
    let out = run(&slow, &["apply", "--auto-approve"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("this plan stops running work")
            && stderr.contains("JobSet default/jobset-tpu-v6e-dws-1"),
        "{stderr}"
    );
    std::fs::write(stack.join("gkq.yaml"), spec).unwrap();
    let out = run(&slow, &["plan", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    // Fast clock: DWS provisions, the pools scale up, both runs complete.
    let fast = [
        ("GKQ_LOCAL_PROVISIONING", "after:30m"),
        ("GKQ_LOCAL_CLOCK", "36000x"),
    ];
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let report = status_on(example, state, &fast);
    for name in ["jobset-tpu-v6e-dws-1", "jobset-tpu-v6e-dws-2"] {
        let j = job(&report, name);
        assert_eq!(j["observed"]["state"], "finished", "{j:#}");
        let done = job_set(&world(), name);
        assert_eq!(done["status"]["terminalState"], "Completed", "{done:#}");
        assert_eq!(
            done["status"]["replicatedJobsStatus"][0]["succeeded"], 1,
            "{done:#}"
        );
    }
}

/// JobSets and batch Jobs written as raw `manifests:` are predicted like the spec's own jobs
/// (one podset per replicated job of replicas x min(parallelism, completions), a Job's `main`),
/// and the simulated Job controller runs an admitted batch Job to completion.
#[test]
fn raw_job_set_and_job_manifests_are_predicted_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("stack");
    std::fs::create_dir_all(stack.join("environments")).unwrap();
    std::fs::copy(
        repo_root().join("environments/local.yaml"),
        stack.join("environments/local.yaml"),
    )
    .unwrap();
    let spec =
        std::fs::read_to_string(repo_root().join("examples/tpu-dws-jobset/gkq.yaml")).unwrap();
    let head = &spec[..spec.find("jobs:").unwrap()];
    let manifests = r#"
manifests:
  - apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: raw-jobset, namespace: default, labels: {kueue.x-k8s.io/queue-name: user-queue}}
    spec:
      replicatedJobs:
        - name: Slices
          replicas: 2
          template:
            spec:
              parallelism: 4
              completions: 4
              template:
                spec:
                  restartPolicy: Never
                  containers:
                    - name: main
                      image: python:3.12
                      resources:
                        requests: {cpu: "8", memory: 16Gi, google.com/tpu: "4"}
                        limits: {cpu: "8", memory: 16Gi, google.com/tpu: "4"}
  - apiVersion: batch/v1
    kind: Job
    metadata: {name: raw-job, namespace: default, labels: {kueue.x-k8s.io/queue-name: user-queue}}
    spec:
      parallelism: 3
      completions: 2
      template:
        spec:
          restartPolicy: Never
          nodeSelector: {cloud.google.com/gke-nodepool: default-pool}
          containers:
            - {name: main, image: python:3.12, resources: {requests: {cpu: "1", memory: 1Gi}}}
"#;
    std::fs::write(stack.join("gkq.yaml"), format!("{head}{manifests}")).unwrap();
    let state = dir.path().join("state");
    let stdout = ok(gkq_on(
        stack.to_str().unwrap(),
        &state,
        "local",
        &[],
        &["plan", "-o", "json"],
    ));
    let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let placements = plan["placements"].as_array().expect("placements");
    let shape = |job: &str| -> (String, Vec<(String, i64, String)>) {
        let p = placements
            .iter()
            .find(|p| p["job"] == job)
            .unwrap_or_else(|| panic!("no placement for {job}: {plan:#}"));
        let podsets = p["podsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ps| {
                (
                    ps["name"].as_str().unwrap().to_string(),
                    ps["count"].as_i64().unwrap(),
                    ps["flavor"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        (p["state"].as_str().unwrap().to_string(), podsets)
    };
    // 2 slices = 32 chips: more than on-demand's 16, so dws (waiting for its check).
    assert_eq!(
        shape("raw-jobset"),
        (
            "waiting-for-admission-checks".to_string(),
            vec![("slices".to_string(), 8, "dws".to_string())]
        )
    );
    assert_eq!(
        shape("raw-job"),
        (
            "admitted".to_string(),
            vec![("main".to_string(), 2, "default-cpu".to_string())]
        )
    );

    // Applied, the simulated Job controller runs the batch Job on the default pool's nodes
    // once Kueue admits it, and it completes; Kueue's Workload finishes with it.
    let run = |settings: &[(&str, &str)], args: &[&str]| {
        gkq_on(stack.to_str().unwrap(), &state, "local", settings, args)
    };
    ok(run(&[], &["apply", "--auto-approve"]));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let report = status_on(
        stack.to_str().unwrap(),
        &state,
        &[("GKQ_LOCAL_CLOCK", "3600x")],
    );
    let raw_job = job(&report, "raw-job");
    assert_eq!(raw_job["kind"], "Job", "{raw_job:#}");
    assert_eq!(raw_job["observed"]["state"], "finished", "{raw_job:#}");
    let world: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join(SEED_STATE)).unwrap()).unwrap();
    let stored = world["store"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "Job" && o["metadata"]["name"] == "raw-job")
        .expect("the Job is stored");
    let complete = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Complete")
        .unwrap_or_else(|| panic!("not complete: {stored:#}"));
    assert_eq!(complete["status"], "True");
    assert!(
        complete["message"]
            .as_str()
            .unwrap()
            .contains("(simulated)"),
        "{complete:#}"
    );
    assert_eq!(stored["status"]["succeeded"], 2, "{stored:#}");
}

#[test]
fn failed_provisioning_is_retried_then_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // Job 1 keeps the on-demand quota (it runs for 100 simulated hours), so each retry of job 2
    // goes to dws again.
    let slow = [
        ("GKQ_LOCAL_PROVISIONING", "fail:30m"),
        ("GKQ_LOCAL_RUN", "100h"),
    ];
    ok(gkq(state, &slow, &["apply", "--auto-approve"]));
    let report = status(state, &slow);
    assert_eq!(
        job(&report, JOB2)["provisioningRequest"]["state"],
        "Accepted"
    );

    // Four failures 30 minutes apart with Kueue's backoff (60 s, 120 s, 240 s) in between:
    // about two simulated hours; ten pass here.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let report = status(
        state,
        &[
            ("GKQ_LOCAL_PROVISIONING", "fail:30m"),
            ("GKQ_LOCAL_RUN", "100h"),
            ("GKQ_LOCAL_CLOCK", "36000x"),
        ],
    );
    let second = job(&report, JOB2);
    assert_eq!(second["deactivated"], true, "{second:#}");
    assert_eq!(
        second["admissionChecks"][0]["state"], "Rejected",
        "{second:#}"
    );
    assert!(
        second["evicted"]
            .as_str()
            .unwrap()
            .contains("Rejected admission check dws-prov"),
        "{second:#}"
    );
    // The prediction could not know the request would fail; job 1 is unaffected.
    assert_eq!(second["agrees"], true, "{second:#}");
    assert_eq!(job(&report, JOB1)["observed"]["state"], "admitted");
    assert_eq!(job(&report, JOB1)["ray"]["deploymentStatus"], "Running");
}

#[test]
fn bad_simulation_settings_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = gkq(dir.path(), &[("GKQ_LOCAL_CLOCK", "fast")], &["plan"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("GKQ_LOCAL_CLOCK=\"fast\""), "{stderr}");
    assert!(stderr.contains("10x"), "{stderr}");
}

/// Two environments on the local target share a state directory: each cluster keeps its own
/// simulated Kubernetes, and a read-only command on one never empties or reseeds the other's.
#[test]
fn each_local_cluster_keeps_its_own_state_and_reads_never_wipe_another() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let on = |env: &str, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--target", "local"]);
        gkq_env(state, env, &[], &all)
    };
    let converged = |env: &str| {
        let out = on(env, &["plan", "--detailed-exitcode"]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{env}: {stdout}\n{stderr}");
        assert!(stdout.contains("No changes."), "{stdout}");
        stderr
    };
    ok(on("prod", &["apply", "--auto-approve"]));
    ok(on("local", &["apply", "--auto-approve"]));

    // Read-only commands on one cluster, and on one that does not exist, leave the others be.
    let report = status(state, &[]);
    assert_eq!(report["clusterStatus"]["status"], "RUNNING", "{report:#}");
    ok(on("dev", &["plan"]));
    ok(on("dev", &["status"]));
    let stderr = converged("prod");
    // The plan names the state it used: this cluster's own file.
    let prod_state = state.join("clusters/my-project/us-east5-b/tpu-cluster-prod/kubernetes.json");
    assert!(
        stderr.contains(&prod_state.display().to_string()),
        "{stderr}"
    );
    assert!(prod_state.is_file());
    converged("local");
    ok(on("prod", &["status"]));
    converged("local");
    converged("prod");
    let report = status(state, &[]);
    assert_eq!(
        job(&report, JOB1)["observed"]["state"],
        "admitted",
        "{report:#}"
    );
}

/// gkq used to keep one `<state-dir>/kubernetes.json` for whichever cluster ran last: such a
/// state is moved to its cluster's place, and nothing it held is lost.
#[test]
fn a_single_file_local_state_is_migrated_to_its_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    ok(gkq(state, &[], &["apply", "--auto-approve"]));
    let clusters = state.join("clusters");
    let own = state.join(SEED_STATE);
    let legacy = state.join("kubernetes.json");
    std::fs::rename(&own, &legacy).unwrap();
    std::fs::remove_dir_all(&clusters).unwrap();

    let out = gkq(state, &[], &["plan", "--detailed-exitcode"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(own.is_file(), "{stderr}");
    assert!(!legacy.exists(), "{stderr}");
}

/// Every directory and file under `root` (itself included) with its permission bits.
#[cfg(unix)]
fn modes_under(root: &Path) -> Vec<(std::path::PathBuf, bool, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        out.push((path, meta.is_dir(), meta.permissions().mode() & 0o777));
    }
    out.sort();
    out
}

/// Paths under `root` that anyone but their owner may read, write or enter.
#[cfg(unix)]
fn not_owner_only(root: &Path) -> Vec<String> {
    modes_under(root)
        .into_iter()
        .filter(|(_, is_dir, mode)| *mode != if *is_dir { 0o700 } else { 0o600 })
        .map(|(path, _, mode)| format!("{} {mode:o}", path.display()))
        .collect()
}

/// The local target's state holds Secret values in clear: what an apply writes in the default
/// state directory (`.gkq/local` next to the spec) is owner-only, and `.gkq` keeps itself out of
/// git.
#[cfg(unix)]
#[test]
fn the_local_state_is_owner_only_and_kept_out_of_git() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("stack");
    std::fs::create_dir(&spec).unwrap();
    for file in ["gkq.yaml", "train.py"] {
        std::fs::copy(
            repo_root().join("examples/tpu-dws").join(file),
            spec.join(file),
        )
        .unwrap();
    }
    let out = support::gkq()
        .args(["apply", "--target", "local", "--auto-approve"])
        .arg(&spec)
        .output()
        .unwrap();
    ok(out);

    let root = spec.join(".gkq");
    let state = root.join("local");
    let kubernetes = "clusters/my-project/us-east5-b/tpu-cluster/kubernetes.json";
    for written in [kubernetes, "gke/gke-emulator-state.json", "apply.lock"] {
        assert!(state.join(written).is_file(), "{written} was not written");
    }
    assert_eq!(not_owner_only(&root), Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(root.join(".gitignore")).unwrap(),
        "*\n"
    );
    let repo = git2::Repository::init(&spec).unwrap();
    for path in [
        format!(".gkq/local/{kubernetes}"),
        ".gkq/.gitignore".to_string(),
    ] {
        assert!(
            repo.is_path_ignored(Path::new(&path)).unwrap(),
            "{path} is not ignored"
        );
    }
    assert!(!repo.is_path_ignored(Path::new("gkq.yaml")).unwrap());
}

/// A state written by an older gkq (world-readable files) is narrowed as gkq writes it again;
/// a `.gitignore` the user wrote in `.gkq` is theirs.
#[cfg(unix)]
#[test]
fn loose_state_files_are_narrowed_and_a_users_gitignore_is_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".gkq");
    let state = root.join("local");
    std::fs::create_dir(&root).unwrap();
    let users = "local/\n!notes.md\n";
    std::fs::write(root.join(".gitignore"), users).unwrap();
    ok(gkq(&state, &[], &["apply", "--auto-approve"]));
    let loosened: Vec<_> = modes_under(&state)
        .into_iter()
        .filter(|(_, is_dir, _)| !is_dir)
        .map(|(path, _, _)| path)
        .collect();
    assert!(loosened.len() >= 3, "{loosened:?}");
    for path in &loosened {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    // Destroy writes every file again: the cluster goes from GKE and its objects with it.
    ok(gkq(
        &state,
        &[],
        &["destroy", "--confirm", "tpu-cluster", "--allow-disruption"],
    ));
    for path in &loosened {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    assert_eq!(
        std::fs::read_to_string(root.join(".gitignore")).unwrap(),
        users
    );
}

/// A plan's jobs are submitted in the spec's order, each after Kueue's decision on the one
/// before, and the plan predicts exactly that sequence: a RayJob listed before a JobSet takes
/// on-demand first although the JobSet's kind and name sort first (the order the plan used to
/// assume), and the local target's Kueue places both as the plan said.
#[test]
fn jobs_are_submitted_and_predicted_in_spec_order() {
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("stack");
    std::fs::create_dir_all(&stack).unwrap();
    for file in ["gkq.yaml", "train.py"] {
        std::fs::copy(
            repo_root().join("examples/tpu-dws").join(file),
            stack.join(file),
        )
        .unwrap();
    }
    let spec = std::fs::read_to_string(stack.join("gkq.yaml"))
        .unwrap()
        .replace(
            "    count: 2                      # submits rayjob-tpu-v6e-dws-1 and rayjob-tpu-v6e-dws-2",
            "    count: 1",
        );
    let jobset = support::workspace::jobset_entry("aa-jobset", None, 1);
    std::fs::write(stack.join("gkq.yaml"), format!("{spec}{jobset}")).unwrap();
    let state = dir.path().join("state");
    let run = |args: &[&str]| ok(gkq_stack(&stack, &state, args));
    let plan: Value = serde_json::from_str(&run(&["plan", "-o", "json"])).unwrap();
    let placed = |job: &str, podset: &str| -> String {
        let p = plan["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["job"] == job)
            .unwrap_or_else(|| panic!("no placement for {job}: {plan:#}"));
        podset_flavor(p, podset).as_str().unwrap().to_string()
    };
    assert_eq!(placed("rayjob-tpu-v6e-dws-1", "tpu-group"), "on-demand");
    assert_eq!(placed("aa-jobset-1", "slice"), "dws");
    // The JobSet is submitted after the RayJob, as the plan orders it.
    let jobset_action = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["addr"]
                .as_str()
                .is_some_and(|a| a.ends_with("/aa-jobset-1"))
        })
        .unwrap_or_else(|| panic!("no JobSet action: {plan:#}"));
    assert!(
        jobset_action["dependsOn"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d
                .as_str()
                .is_some_and(|d| d.ends_with("/rayjob-tpu-v6e-dws-1"))),
        "{jobset_action:#}"
    );

    run(&["apply", "--auto-approve"]);
    let report: Value = serde_json::from_str(&run(&["status", "-o", "json"])).unwrap();
    let ray = job(&report, "rayjob-tpu-v6e-dws-1");
    assert_eq!(
        podset_flavor(&ray["observed"], "tpu-group"),
        "on-demand",
        "{ray:#}"
    );
    let set = job(&report, "aa-jobset-1");
    assert_eq!(podset_flavor(&set["observed"], "slice"), "dws", "{set:#}");
    assert_eq!(ray["agrees"], true, "{ray:#}");
    assert_eq!(set["agrees"], true, "{set:#}");
}

/// `count: 2 -> 1` without `--prune`: the second job is no longer in the spec, but it still runs
/// and holds its quota. Plan and status list it (never "Live state matches the spec"), with the
/// quota its Workload's admission holds and the command that deletes it; `--prune` does.
#[test]
fn a_job_dropped_from_the_spec_is_listed_with_the_quota_it_holds() {
    let ws = support::Workspace::example();
    let state = ws.path().join("state");
    // Job 2 waits for DWS capacity with its quota reserved; jobs run long.
    let run = |args: &[&str]| gkq_in(&ws, &state, args);
    ok(run(&["apply", "--auto-approve"]));
    ws.edit("count: 2 ", "count: 1 ");

    let out = run(&["plan", "--detailed-exitcode"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "nothing to apply: {stdout}\n{stderr}"
    );
    assert!(!stdout.contains("Live state matches the spec"), "{stdout}");
    assert!(
        stdout.contains(
            "No changes to apply. 1 resource gkq manages is no longer in the spec and is left in place."
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("`gkq apply infra/gkq.yaml --env local --prune` deletes them"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "ray.rayjob/default/{JOB2} (RayJob): holds 3 cpu, 4808Mi memory on cluster-queue/default-cpu; 32 cpu, 16 google.com/tpu, 64Gi memory on cluster-queue/dws"
        )),
        "{stdout}"
    );

    let plan: Value = serde_json::from_str(&ok(run(&["plan", "-o", "json"]))).unwrap();
    assert_eq!(plan["summary"]["orphans"], 1, "{:#}", plan["summary"]);
    let orphans = plan["orphans"].as_array().unwrap();
    assert_eq!(orphans.len(), 1, "{orphans:#?}");
    let orphan = &orphans[0];
    assert_eq!(orphan["address"], format!("ray.rayjob/default/{JOB2}"));
    assert_eq!(orphan["kind"], "RayJob");
    assert_eq!(orphan["namespace"], "default");
    assert_eq!(orphan["name"], JOB2);
    let tpu = serde_json::json!({"clusterQueue": "cluster-queue", "flavor": "dws",
        "resource": "google.com/tpu", "amount": "16"});
    assert!(
        orphan["holds"].as_array().unwrap().contains(&tpu),
        "{orphan:#}"
    );
    // Listed once: as an orphan, not also as a notice.
    assert!(
        !plan["notices"].to_string().contains(JOB2),
        "{:#}",
        plan["notices"]
    );

    // Status: the spec's jobs are job 1 alone, and the orphan is listed beside them with its
    // quota, which the ClusterQueue's two reserving Workloads account for.
    let report = status_in(&ws, &state);
    assert_eq!(report["jobs"].as_array().unwrap().len(), 1, "{report:#}");
    assert_eq!(report["orphans"][0]["address"], orphan["address"]);
    assert!(
        report["orphans"][0]["holds"]
            .as_array()
            .unwrap()
            .contains(&tpu),
        "{report:#}"
    );
    assert_eq!(
        report["pruneCommand"],
        "gkq apply infra/gkq.yaml --env local --prune"
    );
    assert_eq!(report["drift"]["changes"], false);
    assert_eq!(report["clusterQueues"][0]["reservingWorkloads"], 2);
    let shown = ok(run(&["status"]));
    assert!(
        shown.contains(
            "Drift    No changes to apply. 1 resource gkq manages is no longer in the spec"
        ),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "  - ray.rayjob/default/{JOB2} (RayJob): holds 3 cpu, 4808Mi memory on cluster-queue/default-cpu; 32 cpu, 16 google.com/tpu, 64Gi memory on cluster-queue/dws"
        )),
        "{shown}"
    );

    // The command shown deletes it: a job that holds quota is running work, so only with
    // consent to stop it. Then live state matches the spec.
    let out = run(&["apply", "--prune", "--auto-approve"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("refusing to apply: this plan stops running work"),
        "{stderr}"
    );
    ok(run(&[
        "apply",
        "--prune",
        "--auto-approve",
        "--allow-disruption",
    ]));
    let stdout = ok(run(&["plan"]));
    assert!(
        stdout.contains("No changes. Live state matches the spec."),
        "{stdout}"
    );
    assert!(
        status_in(&ws, &state)["orphans"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// `gkq <args> infra --env local --state-dir <state>` in a workspace, with DWS provisioning
/// after 30 minutes and jobs that run 100 hours.
fn gkq_in(ws: &support::Workspace, state: &Path, args: &[&str]) -> Output {
    run_in(
        ws,
        state,
        &[
            ("GKQ_LOCAL_PROVISIONING", "after:30m"),
            ("GKQ_LOCAL_RUN", "100h"),
        ],
        args,
    )
}

/// `gkq status -o json` on a workspace's spec (`infra`) with the local overlay.
fn status_in(ws: &support::Workspace, state: &Path) -> Value {
    let stdout = ok(gkq_in(ws, state, &["status", "-o", "json"]));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// With `kueue.install: managed` the spec's pinned release decides: pinned to v0.20.0, `validate`
/// warns at the line and says how to get predictions, every placement of the plan says "not
/// predicted" and its note says the same, and `--predict-anyway` predicts with v0.19's rules
/// and says so; a v0.19 patch release is predicted as v0.19.2 is.
#[test]
fn the_pinned_kueue_release_decides_whether_the_local_plan_predicts() {
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("stack");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::copy(
        repo_root().join("examples/tpu-dws/train.py"),
        stack.join("train.py"),
    )
    .unwrap();
    let example = std::fs::read_to_string(repo_root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    let pin = |version: &str| {
        let spec = example.replace(
            "kueue:\n  version: v0.19.2\n",
            &format!("kueue:\n  version: {version}\n"),
        );
        assert_ne!(spec, example, "the example's kueue.version line moved");
        std::fs::write(stack.join("gkq.yaml"), spec).unwrap();
    };
    let state = dir.path().join("state");
    let run = |args: &[&str]| gkq_stack(&stack, &state, args);
    let plan_json = |extra: &[&str]| -> Value {
        let mut args = vec!["plan", "-o", "json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(run(&args))).unwrap()
    };
    let own_notes = |plan: &Value| -> Vec<String> {
        plan["notices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n.get("severity").is_none())
            .map(|n| n["message"].as_str().unwrap().to_string())
            .collect()
    };

    pin("v0.20.0");
    let line = example
        .lines()
        .position(|l| l == "  version: v0.19.2")
        .unwrap()
        + 1;
    let mut validate = support::gkq();
    let out = validate.arg("validate").arg(&stack).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("gkq.yaml:{line}:"))
            && stderr.contains("placements will not be predicted: kueue.version installs Kueue v0.20.0 (v0.20), and gkq models Kueue v0.19")
            && stderr.contains("pin kueue.version to a v0.19 release"),
        "{stderr}"
    );
    let other = plan_json(&[]);
    let placements = other["placements"].as_array().unwrap();
    assert!(!placements.is_empty(), "{other:#}");
    for placement in placements {
        assert!(
            placement["notPredicted"]
                .as_str()
                .is_some_and(|why| why
                    .starts_with("not predicted: Kueue v0.20 is installed; gkq models v0.19")),
            "{placement:#}"
        );
    }
    let notes = own_notes(&other);
    assert!(
        notes.iter().any(|n| n.starts_with(
            "placements are not predicted: Kueue v0.20.0 is what kueue.version installs"
        ) && n.contains("pin kueue.version to a v0.19 release")),
        "{notes:#?}"
    );
    let (shown, _) = text(&run(&["plan"]));
    assert!(shown.contains("not predicted"), "{shown}");

    let anyway = plan_json(&["--predict-anyway"]);
    assert!(
        own_notes(&anyway)
            .iter()
            .any(|n| n.contains("(--predict-anyway)")),
        "{anyway:#}"
    );
    pin("v0.19.7");
    let patch = plan_json(&[]);
    assert!(
        own_notes(&patch)
            .iter()
            .all(|n| !n.starts_with("placements are"))
    );
    assert_eq!(anyway["placements"], patch["placements"]);
    assert!(
        patch["placements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.get("notPredicted").is_none() && p["podsets"][0]["flavor"].is_string()),
        "{patch:#}"
    );
}

/// `gkq status` re-predicts the jobs Kueue has not placed with the plan's rule: under a Kueue
/// release gkq does not model (the spec pins v0.20.0, which the install would run), each
/// waiting job says "not predicted" with the reason, in JSON and in text, and is compared with
/// nothing; `--predict-anyway` predicts them with v0.19's rules.
#[test]
fn status_does_not_predict_waiting_jobs_under_a_kueue_release_gkq_does_not_model() {
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("stack");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::copy(
        repo_root().join("examples/tpu-dws/train.py"),
        stack.join("train.py"),
    )
    .unwrap();
    let example = std::fs::read_to_string(repo_root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    let spec = example.replace(
        "kueue:\n  version: v0.19.2\n",
        "kueue:\n  version: v0.20.0\n",
    );
    assert_ne!(spec, example, "the example's kueue.version line moved");
    std::fs::write(stack.join("gkq.yaml"), spec).unwrap();
    let state = dir.path().join("state");
    let status = |extra: &[&str]| -> Value {
        let mut args = vec!["status", "-o", "json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(gkq_stack(&stack, &state, &args))).unwrap()
    };

    let report = status(&[]);
    let jobs = report["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{report:#}");
    for job in jobs {
        assert_eq!(job["comparedWith"]["source"], "prediction", "{job:#}");
        assert!(
            job["predicted"]["notPredicted"]
                .as_str()
                .is_some_and(|why| why
                    .starts_with("not predicted: Kueue v0.20 is installed; gkq models v0.19")),
            "{job:#}"
        );
        assert!(job.get("agrees").is_none_or(Value::is_null), "{job:#}");
    }
    let shown = ok(gkq_stack(&stack, &state, &["status"]));
    assert!(
        shown.contains("predicted:  not predicted: Kueue v0.20 is installed; gkq models v0.19"),
        "{shown}"
    );

    let anyway = status(&["--predict-anyway"]);
    for job in anyway["jobs"].as_array().unwrap() {
        assert!(job["predicted"].get("notPredicted").is_none(), "{job:#}");
        assert!(job["predicted"]["clusterQueue"].is_string(), "{job:#}");
    }
}

/// The objects of `kind` named `name` anywhere in a local cluster's state file.
fn stored<'a>(state: &'a Value, kind: &str, name: &str, found: &mut Vec<&'a Value>) {
    match state {
        Value::Object(map) => {
            if map.get("kind").and_then(Value::as_str) == Some(kind)
                && state.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
            {
                found.push(state);
            }
            map.values().for_each(|v| stored(v, kind, name, found));
        }
        Value::Array(items) => items.iter().for_each(|v| stored(v, kind, name, found)),
        _ => {}
    }
}

/// Kueue's configuration and the manager's pod-template annotations in a local state file.
fn kueue_config_and_restart_mark(kubernetes: &Path) -> (String, Value) {
    let state: Value = serde_json::from_str(&std::fs::read_to_string(kubernetes).unwrap()).unwrap();
    let mut maps = Vec::new();
    stored(&state, "ConfigMap", "kueue-manager-config", &mut maps);
    let mut managers = Vec::new();
    stored(
        &state,
        "Deployment",
        "kueue-controller-manager",
        &mut managers,
    );
    let (Some(map), Some(manager)) = (maps.first(), managers.first()) else {
        panic!(
            "no Kueue configuration or manager in {}",
            kubernetes.display()
        );
    };
    (
        map["data"]["controller_manager_config.yaml"]
            .as_str()
            .unwrap()
            .to_string(),
        manager["spec"]["template"]["metadata"]["annotations"]["gkq.dev/kueue-config-digest"]
            .clone(),
    )
}

/// Kueue installed from manifests whose configuration leaves JobSets out while `jobset.install`
/// is `none`; the spec then installs JobSet (`external`): the plan updates Kueue's installation,
/// saying its configuration comes to list JobSets and its manager restarts; apply rewrites the
/// configuration and changes the manager's pod template (the restart), and the next plan has
/// nothing to do.
#[test]
fn kueue_is_installed_again_when_jobset_goes_from_none_to_installed() {
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("stack");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::copy(
        repo_root().join("examples/tpu-dws/train.py"),
        stack.join("train.py"),
    )
    .unwrap();
    let release =
        std::fs::read_to_string(repo_root().join("assets/kueue/manifests-v0.19.2.yaml")).unwrap();
    let without_jobsets = release.replace("      - \"jobset.x-k8s.io/jobset\"\n", "");
    assert_ne!(
        without_jobsets, release,
        "the release's framework line moved"
    );
    let manifests = dir.path().join("kueue-without-jobsets.yaml");
    std::fs::write(&manifests, without_jobsets).unwrap();
    let example = std::fs::read_to_string(repo_root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    let with = |jobset: &str| {
        let spec = example.replace(
            "kueue:\n  version: v0.19.2\n",
            &format!(
                "jobset:\n  install: {jobset}\nkueue:\n  version: v0.19.2\n  manifests: {}\n",
                manifests.display()
            ),
        );
        assert_ne!(spec, example, "the example's kueue.version line moved");
        std::fs::write(stack.join("gkq.yaml"), spec).unwrap();
    };
    let state = dir.path().join("state");
    let run = |args: &[&str]| gkq_stack(&stack, &state, args);
    let kubernetes = state.join("clusters/my-project/us-east5-b/tpu-cluster/kubernetes.json");

    with("none");
    ok(run(&["apply", "--auto-approve"]));
    let (config, mark) = kueue_config_and_restart_mark(&kubernetes);
    assert!(!config.contains("jobset.x-k8s.io/jobset"), "{config}");
    assert!(mark.is_string(), "{mark}");

    with("external");
    let plan: Value = serde_json::from_str(&ok(run(&["plan", "-o", "json"]))).unwrap();
    let install = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["addr"] == "kueue.install/kueue")
        .unwrap_or_else(|| panic!("Kueue's installation is not redone: {plan:#}"));
    assert_eq!(install["kind"], "update", "{install:#}");
    let reason = install["reason"].as_str().unwrap();
    assert!(
        reason.contains("comes to list jobset.x-k8s.io/jobset")
            && reason.contains("manager restarts"),
        "{reason}"
    );
    let shown = ok(run(&["plan"]));
    assert!(shown.contains("jobset.x-k8s.io/jobset"), "{shown}");

    ok(run(&["apply", "--auto-approve"]));
    let (config, restarted) = kueue_config_and_restart_mark(&kubernetes);
    assert!(config.contains("jobset.x-k8s.io/jobset"), "{config}");
    assert!(config.contains("ray.io/rayjob"), "{config}");
    assert_ne!(restarted, mark, "the manager's pod template did not change");
    let again = run(&["plan", "--detailed-exitcode"]);
    assert_eq!(again.status.code(), Some(0), "{:?}", text(&again));
}

/// The flavor of `podset` in the placement `plan` predicts for `job`.
fn planned_flavor(plan: &Value, job: &str, podset: &str) -> String {
    let placement = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["job"] == job)
        .unwrap_or_else(|| panic!("no placement for {job}: {plan:#}"));
    podset_flavor(placement, podset)
        .as_str()
        .unwrap_or_else(|| panic!("{job} {podset} not placed: {placement:#}"))
        .to_string()
}

/// The kinds of the plan's actions by address, in the plan's order.
fn action_kinds(plan: &Value) -> Vec<(String, String)> {
    plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] != "no-op" && a["kind"] != "noop")
        .map(|a| {
            (
                a["addr"].as_str().unwrap().to_string(),
                a["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Replaced runs release their quota first. A script change replaces both running jobs: each
/// old run is deleted and its quota released before its new run is submitted, so the plan
/// predicts the new runs where the old ones were (job 1 on on-demand, job 2 on dws) and the
/// local target's Kueue puts them there. Then a kind switch (the RayJobs become JobSets of the
/// same names): the RayJobs are deleted before the first JobSet is created, which waits for its
/// namesake's delete, and the JobSets land as predicted, on-demand left to the first.
#[test]
fn replaced_runs_and_a_kind_switch_release_their_quota_first() {
    let ws = support::Workspace::example();
    let state = ws.path().join("state");
    let run = |args: &[&str]| ok(gkq_in(&ws, &state, args));
    run(&["apply", "--auto-approve"]);
    let observed = |job: &str, podset: &str| -> String {
        let report = status_in(&ws, &state);
        let found = crate::local_target::job(&report, job).clone();
        assert_eq!(found["agrees"], true, "{found:#}");
        podset_flavor(&found["observed"], podset)
            .as_str()
            .unwrap_or_else(|| panic!("{job} not placed: {found:#}"))
            .to_string()
    };
    assert_eq!(observed(JOB1, "tpu-group"), "on-demand");
    assert_eq!(observed(JOB2, "tpu-group"), "dws");

    // A script change: both running jobs get new runs.
    let script = ws.spec_dir().join("train.py");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, format!("{text}\nprint('second run')\n")).unwrap();
    let plan: Value = serde_json::from_str(&run(&["plan", "-o", "json"])).unwrap();
    let kinds = action_kinds(&plan);
    for job in [JOB1, JOB2] {
        assert!(
            kinds.contains(&(format!("ray.rayjob/default/{job}"), "replace".to_string())),
            "{kinds:?}"
        );
    }
    assert_eq!(planned_flavor(&plan, JOB1, "tpu-group"), "on-demand");
    assert_eq!(planned_flavor(&plan, JOB2, "tpu-group"), "dws");
    run(&["apply", "--auto-approve", "--allow-disruption"]);
    assert_eq!(observed(JOB1, "tpu-group"), "on-demand");
    assert_eq!(observed(JOB2, "tpu-group"), "dws");

    // A kind switch under the same names.
    let spec = std::fs::read_to_string(ws.spec_file()).unwrap();
    let at = spec.find("jobs:\n").expect("the example has jobs");
    let jobsets = support::workspace::jobset_entry("rayjob-tpu-v6e-dws", None, 2);
    std::fs::write(ws.spec_file(), format!("{}jobs:\n{jobsets}", &spec[..at])).unwrap();
    let plan: Value = serde_json::from_str(&run(&["plan", "--prune", "-o", "json"])).unwrap();
    let kinds = action_kinds(&plan);
    let position = |addr: &str, kind: &str| {
        kinds
            .iter()
            .position(|(a, k)| a == addr && k == kind)
            .unwrap_or_else(|| panic!("no {kind} of {addr}: {kinds:?}"))
    };
    let first_jobset = position(&format!("k8s.jobset/default/{JOB1}"), "create");
    for job in [JOB1, JOB2] {
        assert!(
            position(&format!("ray.rayjob/default/{job}"), "delete") < first_jobset,
            "{kinds:?}"
        );
    }
    let jobset_action = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["addr"] == format!("k8s.jobset/default/{JOB1}"))
        .unwrap();
    assert!(
        jobset_action["dependsOn"]
            .as_array()
            .unwrap()
            .contains(&Value::from(format!("ray.rayjob/default/{JOB1}"))),
        "{jobset_action:#}"
    );
    assert_eq!(planned_flavor(&plan, JOB1, "slice"), "on-demand");
    assert_eq!(planned_flavor(&plan, JOB2, "slice"), "dws");
    // The old runs are this plan's deletes, not changes to other work.
    assert!(
        !plan["workloadChanges"].to_string().contains("RayJob"),
        "{:#}",
        plan["workloadChanges"]
    );
    run(&["apply", "--prune", "--auto-approve", "--allow-disruption"]);
    assert_eq!(observed(JOB1, "slice"), "on-demand");
    assert_eq!(observed(JOB2, "slice"), "dws");
}

/// Preemption on the local target evicts the victim: a high-priority job submitted to a queue
/// whose on-demand quota a running job holds (and no other TPU flavor) preempts it, as the plan
/// predicts; Kueue's simulation then admits the preemptor and the victim waits, so on-demand
/// holds 16 TPU chips, never 32.
#[test]
fn a_predicted_preemption_evicts_the_victim_on_the_local_target() {
    let ws = support::Workspace::example();
    let state = ws.path().join("state");
    let run = |args: &[&str]| ok(gkq_in(&ws, &state, args));
    ws.edit("count: 2 ", "count: 1 ");
    ws.edit(
        "            - name: dws           # fallback: \"infinite\" quota\n              quota: {cpu: 1000000000, memory: 1000000000Gi, google.com/tpu: 1000000000}\n",
        "",
    );
    ws.edit(
        "    - name: cluster-queue\n",
        "    - name: cluster-queue\n      preemption: {withinClusterQueue: LowerPriority}\n",
    );
    run(&["apply", "--auto-approve"]);
    let report = status_in(&ws, &state);
    assert_eq!(
        podset_flavor(&job(&report, JOB1)["observed"], "tpu-group"),
        "on-demand",
        "{report:#}"
    );

    // A second job of a higher priority, the same shape.
    let spec = std::fs::read_to_string(ws.spec_file()).unwrap();
    let at = spec.find("  - name: rayjob-tpu-v6e-dws\n").unwrap();
    let urgent = spec[at..]
        .replacen(
            "  - name: rayjob-tpu-v6e-dws\n",
            "  - name: urgent\n    priorityClass: high\n",
            1,
        )
        .replacen(
            "configMap: jax-train-script",
            "configMap: urgent-train-script",
            1,
        );
    let high = "manifests:
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: WorkloadPriorityClass
    metadata: {name: high}
    value: 1000
";
    std::fs::write(ws.spec_file(), format!("{high}{spec}{urgent}")).unwrap();
    let plan: Value = serde_json::from_str(&run(&["plan", "-o", "json"])).unwrap();
    let placement = |job: &str| -> Value {
        plan["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["job"] == job)
            .cloned()
            .unwrap_or_else(|| panic!("no placement for {job}: {plan:#}"))
    };
    let preemptor = placement("urgent-1");
    assert_eq!(
        podset_flavor(&preemptor, "tpu-group"),
        "on-demand",
        "{preemptor:#}"
    );
    assert_eq!(
        preemptor["preempts"],
        serde_json::json!([format!("default/{JOB1}")]),
        "{preemptor:#}"
    );
    let victim = placement(JOB1);
    assert_eq!(victim["state"], "pending", "{victim:#}");

    run(&["apply", "--auto-approve", "--allow-disruption"]);
    let report = status_in(&ws, &state);
    let urgent = job(&report, "urgent-1");
    assert_eq!(
        podset_flavor(&urgent["observed"], "tpu-group"),
        "on-demand",
        "{urgent:#}"
    );
    let evicted = job(&report, JOB1);
    assert_eq!(evicted["observed"]["state"], "pending", "{evicted:#}");
    // One Workload holds the queue's quota: the preemptor's.
    assert_eq!(
        report["clusterQueues"][0]["reservingWorkloads"], 1,
        "{report:#}"
    );
}

/// A plan that only deletes a running job (nothing of Kueue's changes) still says what Kueue
/// then does with the quota it frees: the job that waited for that quota is admitted, in the
/// plan's `workloadChanges`, and the local target's Kueue then admits it there.
#[test]
fn deleting_a_running_job_shows_the_waiting_job_it_lets_in() {
    let ws = support::Workspace::example();
    let state = ws.path().join("state");
    let run = |args: &[&str]| ok(gkq_in(&ws, &state, args));
    ws.edit("count: 2 ", "count: 1 ");
    ws.edit(
        "            - name: dws           # fallback: \"infinite\" quota\n              quota: {cpu: 1000000000, memory: 1000000000Gi, google.com/tpu: 1000000000}\n",
        "",
    );
    let spec = std::fs::read_to_string(ws.spec_file()).unwrap();
    let at = spec.find("  - name: rayjob-tpu-v6e-dws\n").unwrap();
    let waiting = spec[at..]
        .replacen("  - name: rayjob-tpu-v6e-dws\n", "  - name: waiting\n", 1)
        .replacen(
            "configMap: jax-train-script",
            "configMap: waiting-train-script",
            1,
        );
    std::fs::write(ws.spec_file(), format!("{spec}{waiting}")).unwrap();
    run(&["apply", "--auto-approve"]);
    let report = status_in(&ws, &state);
    assert_eq!(
        podset_flavor(&job(&report, JOB1)["observed"], "tpu-group"),
        "on-demand",
        "{report:#}"
    );
    assert_eq!(
        job(&report, "waiting-1")["observed"]["state"],
        "pending",
        "{report:#}"
    );

    // The first job leaves the spec: the plan deletes its run and nothing else.
    std::fs::write(ws.spec_file(), format!("{}{waiting}", &spec[..at])).unwrap();
    let plan: Value = serde_json::from_str(&run(&["plan", "--prune", "-o", "json"])).unwrap();
    assert!(
        action_kinds(&plan).contains(&(format!("ray.rayjob/default/{JOB1}"), "delete".to_string())),
        "{:?}",
        action_kinds(&plan)
    );
    let changes = plan["workloadChanges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let let_in = changes
        .iter()
        .find(|c| c["job"].as_str().is_some_and(|j| j.ends_with("/waiting-1")))
        .unwrap_or_else(|| panic!("the waiting job is not in workloadChanges: {plan:#}"));
    assert_eq!(let_in["before"]["state"], "pending", "{let_in:#}");
    assert_eq!(let_in["after"]["state"], "admitted", "{let_in:#}");
    assert_eq!(podset_flavor(&let_in["after"], "tpu-group"), "on-demand");
    // The deleted run is the plan's own action, not a change to other work.
    assert!(
        !changes
            .iter()
            .any(|c| c["job"].as_str().is_some_and(|j| j.ends_with(JOB1))),
        "{changes:#?}"
    );
    let text = run(&["plan", "--prune"]);
    assert!(text.contains("waiting-1"), "{text}");

    run(&["apply", "--prune", "--auto-approve", "--allow-disruption"]);
    let report = status_in(&ws, &state);
    assert_eq!(
        podset_flavor(&job(&report, "waiting-1")["observed"], "tpu-group"),
        "on-demand",
        "{report:#}"
    );
}

/// `gkq <args> infra --env local --state-dir <state>` in a workspace, with `env` set.
fn run_in(ws: &support::Workspace, state: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = support::gkq();
    c.current_dir(ws.path());
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args)
        .args(["infra", "--env", "local", "--state-dir"])
        .arg(state);
    c.output().unwrap()
}

/// Issue 28 point 3 on the local target: the simulated Kueue writes an admitted job's placement
/// into its pod templates as manager `kueue`, as the real one does. A label change on the
/// running job plans as an update that leaves those fields to Kueue and applies without
/// `--force-conflicts`; the job still waiting for its admission check has nothing of Kueue's
/// to conflict with. Planned with force, the admitted job's update is a disruption.
#[test]
fn a_label_change_on_an_admitted_job_leaves_kueues_fields_to_kueue() {
    let ws = support::Workspace::example();
    let state = ws.path().join("state");
    let run = |args: &[&str]| run_in(&ws, &state, &[("GKQ_LOCAL_RUN", "100h")], args);
    ok(run(&["apply", "--auto-approve"]));
    let states = |report: &Value| -> Vec<String> {
        report["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| format!("{} {}", j["job"], j["observed"]["state"]))
            .collect()
    };
    let before = states(&status_in(&ws, &state));
    assert_eq!(
        before,
        [
            format!("\"{JOB1}\" \"admitted\""),
            format!("\"{JOB2}\" \"waiting-for-admission-checks\"")
        ]
    );
    ws.edit(
        "    queue: user-queue\n",
        "    queue: user-queue\n    labels: {team: research}\n",
    );
    let plan: Value = serde_json::from_str(&ok(run(&["plan", "-o", "json"]))).unwrap();
    let action = |job: &str| -> Value {
        plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["addr"] == format!("ray.rayjob/default/{job}"))
            .cloned()
            .unwrap_or_else(|| panic!("{plan:#}"))
    };
    let (running, waiting) = (action(JOB1), action(JOB2));
    for a in [&running, &waiting] {
        assert_eq!(a["kind"], "update", "{a:#}");
    }
    assert_eq!(
        running["conflicts"][0]["field"], ".spec.rayClusterSpec.workerGroupSpecs",
        "{running:#}"
    );
    assert_eq!(running["conflicts"][0]["manager"], "kueue");
    assert_eq!(running["conflicts"][0]["resolution"], "left");
    assert!(waiting.get("conflicts").is_none(), "{waiting:#}");
    let out = run(&["plan", "--force-conflicts", "-o", "json"]);
    let forced: Value = serde_json::from_str(&text(&out).0).unwrap();
    let stopped: Vec<&str> = forced["disruptions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["addr"].as_str())
        .collect();
    assert_eq!(
        stopped,
        [format!("ray.rayjob/default/{JOB1}")],
        "{forced:#}"
    );

    ok(run(&["apply", "--auto-approve"]));
    assert_eq!(states(&status_in(&ws, &state)), before);
    let stdout = ok(run(&["plan"]));
    assert!(
        stdout.contains("No changes. Live state matches the spec."),
        "{stdout}"
    );
}
