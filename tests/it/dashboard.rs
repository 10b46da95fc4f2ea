//! `gkq dashboard NAMESPACE/JOB`: against the fake Kubernetes API server of `logs` (discovery,
//! the RayJob, its RayCluster, Kueue's Workload, the head pod), which also answers the
//! port-forward request as the API server does (a websocket upgrade with the
//! `v4.channel.k8s.io` subprotocol: a data and an error channel for the port, each opened with a
//! frame carrying the port number) and relays the bytes to a stand-in Ray dashboard; and on the
//! local target, whose simulated head serves a simulated dashboard.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::local_target::text;
use crate::logs::{kubeconfig, list, not_found, resource, resources, serve};
use crate::support::process::Running;
use crate::support::{self, repo_root};

/// What the fake API server has seen, and where the stand-in dashboard listens.
struct Fake {
    /// Reads of the RayJob: the job is held back by its admission check for the first two, its
    /// head pod is Pending on the third and Running from the fourth on.
    job_reads: AtomicUsize,
    /// The path and query of each port-forward request.
    forwards: Mutex<Vec<String>>,
    dashboard: SocketAddr,
}

const HEAD: &str = "train-x7k2p-head-abcde";
/// The port the RayCluster's `rayStartParams` name (not the default 8265, which the RayJob's
/// own copy of the spec would give).
const DASHBOARD_PORT: u16 = 8266;
const PORT_FORWARD_PROTOCOL: &str = "v4.channel.k8s.io";
/// What the fake API server says on the error channel of a refused connection.
const REFUSED: &str =
    "error forwarding port 8266 to pod train-x7k2p-head-abcde: connect: connection refused";

fn rayjob(name: &str, status: Value) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "namespace": "team", "uid": format!("{name}-uid")},
        "spec": {"rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}}}},
        "status": status})
}

fn api_object(fake: &Fake, path: &str) -> Option<Value> {
    let reads = fake.job_reads.load(Ordering::SeqCst);
    let admitted = reads > 2;
    Some(match path {
        "/api/v1" => resources("v1", json!([resource("pods", "Pod")])),
        "/apis/batch/v1" => resources("batch/v1", json!([resource("jobs", "Job")])),
        "/apis/ray.io/v1" => resources(
            "ray.io/v1",
            json!([
                resource("rayjobs", "RayJob"),
                resource("rayclusters", "RayCluster")
            ]),
        ),
        "/apis/jobset.x-k8s.io/v1alpha2" => resources(
            "jobset.x-k8s.io/v1alpha2",
            json!([resource("jobsets", "JobSet")]),
        ),
        "/apis/kueue.x-k8s.io/v1beta2" => resources(
            "kueue.x-k8s.io/v1beta2",
            json!([resource("workloads", "Workload")]),
        ),
        "/apis/ray.io/v1/namespaces/team/rayjobs/train" => {
            let reads = fake.job_reads.fetch_add(1, Ordering::SeqCst) + 1;
            if reads > 2 {
                rayjob(
                    "train",
                    json!({"jobDeploymentStatus": "Initializing",
                                       "rayClusterName": "train-x7k2p"}),
                )
            } else {
                rayjob("train", json!({"jobDeploymentStatus": "Suspended"}))
            }
        }
        "/apis/ray.io/v1/namespaces/team/rayjobs/done" => rayjob(
            "done",
            json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                   "rayClusterName": "done-q1w2e", "message": "Job finished successfully"}),
        ),
        "/apis/ray.io/v1/namespaces/team/rayclusters/train-x7k2p" => json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "train-x7k2p", "namespace": "team"},
            "spec": {"headGroupSpec": {"rayStartParams":
                {"dashboard-port": DASHBOARD_PORT.to_string()}}}}),
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team/jobsets/slices" => json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "slices", "namespace": "team"}}),
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads" => {
            let mut conditions = vec![json!({"type": "QuotaReserved", "status": "True"})];
            if admitted {
                conditions.push(json!({"type": "Admitted", "status": "True"}));
            }
            let state = if admitted { "Ready" } else { "Pending" };
            list(
                "WorkloadList",
                vec![json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "rayjob-train-1a2b3", "namespace": "team",
                    "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                        "name": "train", "uid": "train-uid", "controller": true}]},
                "status": {"conditions": conditions,
                    "admissionChecks": [{"name": "dws-prov", "state": state}]}})],
            )
        }
        _ => return None,
    })
}

fn head_pods(fake: &Fake, selector: &str) -> Value {
    let reads = fake.job_reads.load(Ordering::SeqCst);
    let items = if selector.contains("train-x7k2p") && selector.contains("node-type%3Dhead") {
        let phase = if reads > 3 { "Running" } else { "Pending" };
        vec![json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": HEAD, "namespace": "team",
                "labels": {"ray.io/cluster": "train-x7k2p", "ray.io/node-type": "head"}},
            "status": {"phase": phase}})]
    } else {
        vec![]
    };
    list("PodList", items)
}

async fn answer(State(fake): State<Arc<Fake>>, mut request: Request) -> Response {
    let path = request.uri().path().to_string();
    if path.ends_with("/portforward") {
        let seen = request
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default();
        fake.forwards.lock().unwrap().push(seen);
        return upgrade(&fake, &mut request);
    }
    // The head pod is listed in the job's namespace only: a cluster-wide list is answered 404.
    if path == "/api/v1/namespaces/team/pods" {
        let selector = request.uri().query().unwrap_or_default().to_string();
        return axum::Json(head_pods(&fake, &selector)).into_response();
    }
    match api_object(&fake, &path) {
        Some(object) => axum::Json(object).into_response(),
        None => not_found(),
    }
}

/// The API server's side of a websocket port-forward: switch protocols, then relay.
fn upgrade(fake: &Fake, request: &mut Request) -> Response {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let offered = header("sec-websocket-protocol");
    assert!(
        offered
            .split(',')
            .any(|p| p.trim() == PORT_FORWARD_PROTOCOL),
        "{offered}"
    );
    let accept = derive_accept_key(header("sec-websocket-key").as_bytes());
    let port: u16 = request
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("ports="))
        .and_then(|p| p.parse().ok())
        .expect("one port");
    let upgrading = hyper::upgrade::on(request);
    let dashboard = fake.dashboard;
    tokio::spawn(async move {
        let upgraded = upgrading.await.expect("the upgrade");
        let socket = WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await;
        relay(socket, dashboard, port).await;
    });
    Response::builder()
        .status(101)
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .header("sec-websocket-accept", accept)
        .header("sec-websocket-protocol", PORT_FORWARD_PROTOCOL)
        .body(Body::empty())
        .unwrap()
}

/// Channel 0 carries the port's data, channel 1 its errors; each starts with a frame holding
/// the port number (little-endian), then data frames are prefixed with their channel.
async fn relay<S>(socket: WebSocketStream<S>, dashboard: SocketAddr, port: u16)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut to_client, mut from_client) = socket.split();
    let [low, high] = port.to_le_bytes();
    for channel in [0u8, 1] {
        to_client
            .send(Message::binary(vec![channel, low, high]))
            .await
            .unwrap();
    }
    // The request's first bytes decide: a request for `/refused` meets what the API server
    // sends when nothing listens in the pod, a message on the port's error channel.
    let first = loop {
        match from_client.next().await {
            Some(Ok(Message::Binary(bytes))) if bytes.len() > 1 && bytes[0] == 0 => break bytes,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
            Some(Ok(_)) => {}
        }
    };
    if first.windows(13).any(|w| w == b"GET /refused ") {
        let mut error = vec![1u8];
        error.extend_from_slice(REFUSED.as_bytes());
        let _ = to_client.send(Message::binary(error)).await;
        let _ = to_client.send(Message::Close(None)).await;
        return;
    }
    let (mut from_dashboard, mut to_dashboard) = tokio::net::TcpStream::connect(dashboard)
        .await
        .unwrap()
        .into_split();
    to_dashboard.write_all(&first[1..]).await.unwrap();
    let inbound = async move {
        while let Some(Ok(message)) = from_client.next().await {
            match message {
                Message::Binary(bytes) if bytes.len() > 1 && bytes[0] == 0 => {
                    let written = to_dashboard.write_all(&bytes[1..]).await;
                    if written.is_err() {
                        break;
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = to_dashboard.shutdown().await;
    };
    let outbound = async move {
        let mut buffer = vec![0u8; 8192];
        loop {
            let n = from_dashboard.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut frame = vec![0u8];
            frame.extend_from_slice(&buffer[..n]);
            if to_client.send(Message::binary(frame)).await.is_err() {
                return;
            }
        }
        let _ = to_client.send(Message::Close(None)).await;
    };
    tokio::join!(inbound, outbound);
}

/// `GET path` on `url` (`http://HOST:PORT`) over a connection of its own; the whole answer.
fn get(url: &str, path: &str) -> String {
    let address = url.trim().strip_prefix("http://").expect("an http:// URL");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// `gkq dashboard ARGS examples/tpu-dws --env local` with `extra` after it.
fn dashboard_command(args: &[&str], extra: &[&str]) -> Command {
    let mut c = support::gkq();
    c.current_dir(repo_root())
        .arg("dashboard")
        .args(args)
        .args(["examples/tpu-dws", "--env", "local"])
        .args(extra);
    c
}

#[test]
fn dashboard_waits_for_the_head_then_forwards_through_the_api_servers_port_forward() {
    // The stand-in Ray dashboard.
    let stand_in = Router::new().route(
        "/api/version",
        axum::routing::get(|| async { axum::Json(json!({"ray_version": "stand-in"})) }),
    );
    let (_dashboard_runtime, dashboard) = serve(stand_in);
    let fake = Arc::new(Fake {
        job_reads: AtomicUsize::new(0),
        forwards: Mutex::new(Vec::new()),
        dashboard,
    });
    let (_runtime, addr) = serve(Router::new().fallback(answer).with_state(fake.clone()));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(dir.path(), addr);
    let state = dir.path().join("state");
    let target = |c: &mut Command| {
        c.arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--state-dir")
            .arg(&state);
    };

    let mut command = dashboard_command(&["team/train"], &["--port", "0"]);
    target(&mut command);
    let mut running = Running::spawn(command);
    let (url, _) = running.wait_for("the URL", Duration::from_secs(60), |s| s.ends_with('\n'));
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let answer = get(&url, "/api/version");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#"{"ray_version":"stand-in"}"#), "{answer}");
    let forwards = fake.forwards.lock().unwrap().clone();
    assert_eq!(forwards.len(), 1, "{forwards:?}");
    let (path, query) = forwards[0].split_once('?').unwrap();
    assert_eq!(
        path,
        format!("/api/v1/namespaces/team/pods/{HEAD}/portforward")
    );
    assert!(
        query
            .split('&')
            .any(|kv| kv == format!("ports={DASHBOARD_PORT}")),
        "{query}"
    );
    // A second connection is forwarded anew.
    assert!(get(&url, "/api/version").contains("stand-in"));
    assert_eq!(fake.forwards.lock().unwrap().len(), 2);
    // What the pod's side says on the error channel is told, and the connection ends.
    let refused = get(&url, "/refused");
    assert!(!refused.contains("HTTP/1.1 200"), "{refused}");
    assert_eq!(fake.forwards.lock().unwrap().len(), 3);

    let (code, stderr) = running.interrupt();
    assert_eq!(code, Some(0), "{stderr}");
    // While Kueue held the job back, and while its head was Pending, the status line said so,
    // once each.
    assert_eq!(
        stderr.matches("suspended: waiting for dws-prov").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches(&format!("the Ray head pod {HEAD} is Pending"))
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("Stopped forwarding the dashboard."),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "port {DASHBOARD_PORT} of pod team/{HEAD}: {REFUSED}"
        )),
        "{stderr}"
    );

    // What has no dashboard is said, without waiting.
    let refused = |job: &str| {
        let mut command = dashboard_command(&[job], &["--port", "0", "--wait", "5s"]);
        target(&mut command);
        let out = command.output().unwrap();
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        stderr
    };
    let stderr = refused("team/slices");
    assert!(
        stderr.contains(
            "team/slices is a JobSet, not a RayJob: only a Ray cluster has a Ray dashboard"
        ),
        "{stderr}"
    );
    let stderr = refused("team/done");
    assert!(
        stderr.contains("the job team/done has ended: KubeRay says Complete (Job finished successfully), and its Ray head is gone"),
        "{stderr}"
    );
    let stderr = refused("team/nope");
    assert!(
        stderr.contains("there is no RayJob, JobSet or Job team/nope"),
        "{stderr}"
    );
    let stderr = refused("nope");
    assert!(stderr.contains("`nope` is not NAMESPACE/JOB"), "{stderr}");
    assert_eq!(fake.forwards.lock().unwrap().len(), 3);
}

/// `gkq ARGS examples/tpu-dws --env local --state-dir STATE` with the simulation settings.
fn local(state: &Path, settings: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = support::gkq();
    c.current_dir(repo_root());
    for (k, v) in settings {
        c.env(k, v);
    }
    c.args(args)
        .args(["examples/tpu-dws", "--env", "local", "--state-dir"])
        .arg(state);
    c
}

#[test]
fn the_local_targets_simulated_head_serves_a_simulated_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // DWS never answers: job 2 stays held back. Job 1 runs for hours, so it is still running
    // when its head is reached on the fast clock.
    let settings = [
        ("GKQ_LOCAL_PROVISIONING", "never"),
        ("GKQ_LOCAL_RUN", "10h"),
        ("GKQ_LOCAL_CLOCK", "100x"),
    ];
    let out = local(state, &settings, &["apply", "--auto-approve"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));

    let job1 = local(
        state,
        &settings,
        &["dashboard", "default/rayjob-tpu-v6e-dws-1", "--port", "0"],
    );
    let mut running = Running::spawn(job1);
    let (url, _) = running.wait_for("the URL", Duration::from_secs(60), |s| s.ends_with('\n'));
    let page = get(&url, "/");
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    assert!(page.contains("Simulated by gkq's local target"), "{page}");
    assert!(
        page.contains("<th>RayJob</th><td>default/rayjob-tpu-v6e-dws-1</td>"),
        "{page}"
    );
    let jobs = get(&url, "/api/jobs/");
    let body = jobs.split("\r\n\r\n").nth(1).unwrap_or_default();
    let jobs: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(jobs[0]["simulated"], true, "{jobs}");
    assert_eq!(jobs[0]["rayjob"], "default/rayjob-tpu-v6e-dws-1", "{jobs}");
    assert!(
        ["Initializing", "Running"].contains(
            &jobs[0]["kuberay_status"]["jobDeploymentStatus"]
                .as_str()
                .unwrap_or("")
        ),
        "{jobs}"
    );
    let (code, stderr) = running.interrupt();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("forwarding 127.0.0.1:")
            && stderr.contains("to port 8265 of the Ray head pod default/"),
        "{stderr}"
    );

    // Job 2 waits for DWS: said on stderr, bounded.
    let out = local(
        state,
        &settings,
        &[
            "dashboard",
            "default/rayjob-tpu-v6e-dws-2",
            "--port",
            "0",
            "--wait",
            "2s",
        ],
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("suspended: waiting for dws-prov"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("gave up after waiting 2s for the Ray head of default/rayjob-tpu-v6e-dws-2"),
        "{stderr}"
    );
    // Ctrl-C while it waits stops the wait at once, and nothing listens.
    let waiting = Running::spawn(local(
        state,
        &settings,
        &["dashboard", "default/rayjob-tpu-v6e-dws-2", "--port", "0"],
    ));
    // Interrupted once it says why it waits (its Ctrl-C handler is in place by then).
    let mut said = String::new();
    let start = std::time::Instant::now();
    while !said.contains("suspended: waiting for dws-prov") {
        assert!(start.elapsed() < Duration::from_secs(60), "{said}");
        std::thread::sleep(Duration::from_millis(100));
        said.push_str(&waiting.take_stderr());
    }
    let (code, stderr) = waiting.interrupt();
    assert_eq!(code, Some(0), "{said}\n{stderr}");
    assert!(
        stderr.contains("Stopped waiting: nothing was forwarded."),
        "{stderr}"
    );
}
