//! `gkq logs NAMESPACE/JOB`: on the local target after the Quickstart's apply (the simulated
//! driver pods and their logs), and `logs -f` against a fake Kubernetes API server that answers
//! discovery, the job, Kueue's Workload, the pod list and a streamed `/log?follow=true`.

use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::local_target::text;
use crate::support::{self, repo_root};

/// `gkq ARGS examples/tpu-dws --env local --state-dir STATE` with the simulation settings.
fn gkq_local(state: &Path, settings: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = support::gkq();
    c.current_dir(repo_root());
    for (k, v) in settings {
        c.env(k, v);
    }
    c.args(args)
        .args(["examples/tpu-dws", "--env", "local", "--state-dir"])
        .arg(state);
    c.output().unwrap()
}

const JOB1: &str = "default/rayjob-tpu-v6e-dws-1";
const JOB2: &str = "default/rayjob-tpu-v6e-dws-2";

#[test]
fn the_quickstarts_jobs_have_simulated_driver_logs() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // DWS never answers: job 2 stays held back by its admission check. Jobs run a minute (of
    // the simulated clock, real time until the fast clock below).
    let settings = [("GKQ_LOCAL_PROVISIONING", "never"), ("GKQ_LOCAL_RUN", "1m")];
    let out = gkq_local(state, &settings, &["apply", "--auto-approve"]);
    assert!(out.status.success(), "{:?}", text(&out));

    // Job 1 was admitted at once: its submitter pod has the simulation's log.
    let out = gkq_local(state, &settings, &["logs", JOB1]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("admitted by Kueue: the job's pods are created (simulated)"),
        "{stdout}"
    );
    assert!(!stdout.contains("finished"), "{stdout}");

    // Job 2 waits for DWS: the status line says so on stderr, nothing on stdout, and the wait
    // is bounded.
    let out = gkq_local(state, &settings, &["logs", JOB2, "--wait", "2s"]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("suspended: waiting for dws-prov"),
        "{stderr}"
    );
    assert!(stderr.contains("gave up after waiting 2s"), "{stderr}");

    // Much later (a fast clock), job 1 has run: provisioned, started and finished, and
    // following its log ends with the pod.
    let fast = [
        ("GKQ_LOCAL_PROVISIONING", "never"),
        ("GKQ_LOCAL_RUN", "1m"),
        ("GKQ_LOCAL_CLOCK", "100000x"),
    ];
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let out = gkq_local(state, &fast, &["logs", JOB1, "-f"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let expected = [
        "admitted by Kueue",
        "nodes provisioned",
        "started: the job runs",
        "finished: the job succeeded",
    ];
    assert_eq!(lines.len(), expected.len(), "{stdout}");
    for (line, what) in lines.iter().zip(expected) {
        assert!(line.contains(what), "{what:?} in {stdout}");
    }

    // A pod the job does not have is named with the ones it has.
    let out = gkq_local(state, &fast, &["logs", JOB1, "--pod", "nope"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("has no pod nope; its pods: rayjob-tpu-v6e-dws-1-"),
        "{stderr}"
    );
    let out = gkq_local(state, &fast, &["logs", "default/no-such-job"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("there is no RayJob, JobSet or Job default/no-such-job"),
        "{stderr}"
    );
}

/// What the fake API server has seen and answers.
#[derive(Default)]
struct Fake {
    pod_lists: AtomicUsize,
    log_queries: Mutex<Vec<String>>,
}

/// Pod lists answered with no pods before the job's pod appears (and its Workload is admitted).
const LISTS_BEFORE_PODS: usize = 2;

pub(crate) fn resources(group_version: &str, resources: Value) -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
           "resources": resources})
}

pub(crate) fn resource(name: &str, kind: &str) -> Value {
    json!({"name": name, "singularName": "", "namespaced": true, "kind": kind,
           "verbs": ["get", "list", "watch"]})
}

pub(crate) fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": items})
}

async fn answer(State(fake): State<Arc<Fake>>, OriginalUri(uri): OriginalUri) -> Response {
    let json = |v: Value| axum::Json(v).into_response();
    let admitted = fake.pod_lists.load(Ordering::SeqCst) > LISTS_BEFORE_PODS;
    match uri.path() {
        "/api/v1" => json(resources("v1", json!([resource("pods", "Pod")]))),
        "/apis/batch/v1" => json(resources("batch/v1", json!([resource("jobs", "Job")]))),
        "/apis/kueue.x-k8s.io/v1beta2" => json(resources(
            "kueue.x-k8s.io/v1beta2",
            json!([resource("workloads", "Workload")]),
        )),
        "/apis/batch/v1/namespaces/team/jobs/train" => json(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team", "uid": "job-uid"},
            "spec": {"suspend": !admitted}})),
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads" => {
            let mut conditions = vec![json!({"type": "QuotaReserved", "status": "True"})];
            if admitted {
                conditions.push(json!({"type": "Admitted", "status": "True"}));
            }
            let state = if admitted { "Ready" } else { "Pending" };
            json(list(
                "WorkloadList",
                vec![json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "job-train-1a2b3", "namespace": "team",
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                        "uid": "job-uid", "controller": true}]},
                "status": {"conditions": conditions,
                    "admissionChecks": [{"name": "dws-prov", "state": state}]}})],
            ))
        }
        // Pods and Workloads are listed in the job's namespace only: a cluster-wide list
        // (`/api/v1/pods`, `/apis/kueue.x-k8s.io/v1beta2/workloads`) is answered 404 and fails.
        "/api/v1/namespaces/team/pods" => {
            let selector = uri.query().unwrap_or_default().to_string();
            assert!(
                selector.contains("batch.kubernetes.io%2Fjob-name%3Dtrain"),
                "{selector}"
            );
            let seen = fake.pod_lists.fetch_add(1, Ordering::SeqCst) + 1;
            let items = if seen > LISTS_BEFORE_PODS {
                vec![json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "train-q7k2p", "namespace": "team",
                        "labels": {"batch.kubernetes.io/job-name": "train"}},
                    "status": {"phase": "Running"}})]
            } else {
                vec![]
            };
            json(list("PodList", items))
        }
        "/api/v1/namespaces/team/pods/train-q7k2p/log" => {
            fake.log_queries
                .lock()
                .unwrap()
                .push(uri.query().unwrap_or_default().to_string());
            // Written in pieces that do not end at line ends, as a stream arrives.
            let pieces = ["epoch 1 loss 0.9\nepo", "ch 2 loss 0.5\n", "done\n"];
            let stream = futures::stream::iter(pieces).then(|piece| async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                Ok::<_, std::io::Error>(piece)
            });
            Body::from_stream(stream).into_response()
        }
        _ => not_found(),
    }
}

/// The API server's answer for what it does not have.
pub(crate) fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
               "reason": "NotFound", "code": 404, "message": "not found"})
        .to_string(),
    )
        .into_response()
}

/// Serves `app` on a free loopback port from a runtime of its own (kept alive by the caller).
pub(crate) fn serve(app: Router) -> (tokio::runtime::Runtime, std::net::SocketAddr) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    (runtime, addr)
}

/// A kubeconfig in `dir` naming the fake API server at `addr`.
pub(crate) fn kubeconfig(dir: &Path, addr: std::net::SocketAddr) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{addr}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: me\ncurrent-context: fake\nusers:\n- name: me\n  user:\n    token: fake-token\n"
        ),
    )
    .unwrap();
    path
}

use futures::StreamExt;

#[test]
fn logs_follow_waits_for_admission_then_streams_the_drivers_log() {
    let fake = Arc::new(Fake::default());
    let app = Router::new().fallback(answer).with_state(fake.clone());
    let (_runtime, addr) = serve(app);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(dir.path(), addr);
    let out = support::gkq()
        .current_dir(repo_root())
        .args([
            "logs",
            "team/train",
            "examples/tpu-dws",
            "--env",
            "local",
            "-f",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout, "epoch 1 loss 0.9\nepoch 2 loss 0.5\ndone\n",
        "{stderr}"
    );
    // While the Workload waited for its admission check, the status line said so, once.
    assert_eq!(
        stderr.matches("suspended: waiting for dws-prov").count(),
        1,
        "{stderr}"
    );
    assert!(fake.pod_lists.load(Ordering::SeqCst) > LISTS_BEFORE_PODS);
    let queries = fake.log_queries.lock().unwrap().clone();
    assert_eq!(queries.len(), 1, "{queries:?}");
    assert!(queries[0].contains("follow=true"), "{queries:?}");
}
