//! The Ray dashboard of a simulated head pod: what a port-forward to the local target reaches
//! (`LocalKube::port_forward`). There is no Ray here, so it is not Ray's dashboard: a small page
//! (`/`) and JSON (`/api/jobs/`, where Ray's dashboard lists its jobs) saying what the simulation
//! knows of the RayJob the head belongs to (its KubeRay status), each labelled simulated. Each
//! forwarded connection gets the status as it is when the connection is opened, answers one
//! request and closes.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::store::{Key, Store};
use crate::kube::{KubeError, KubeResult};
use crate::vocab::object::{name_of, owner_name};
use crate::vocab::ray::{RAY_NODE_TYPE_LABEL, dashboard_port};

/// What one forwarded connection to a simulated dashboard answers.
#[derive(Debug, Clone)]
pub struct SimulatedDashboard {
    namespace: String,
    job: String,
    cluster: String,
    head: String,
    /// The RayJob's `status`, as the simulated KubeRay wrote it.
    status: Value,
}

/// The dashboard of the head pod `namespace/pod` on `port`, or the error a port-forward to it
/// meets: no such pod, not a Ray head, not running, or nothing listening on that port.
pub fn open(
    store: &Store,
    namespace: &str,
    pod: &str,
    port: u16,
) -> KubeResult<SimulatedDashboard> {
    let object = format!("Pod {namespace}/{pod}");
    let refused = |message: String| KubeError::Api {
        object: object.clone(),
        code: 400,
        reason: "BadRequest".into(),
        message,
    };
    let Some(head) = store.get(&Key::new("v1", "Pod", Some(namespace), pod)) else {
        return Err(KubeError::Api {
            object: object.clone(),
            code: 404,
            reason: "NotFound".into(),
            message: format!("pods \"{pod}\" not found"),
        });
    };
    let phase = head
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    if phase != "Running" {
        return Err(refused(format!(
            "pod {pod} is {phase}: a port can be forwarded only to a running pod"
        )));
    }
    let is_head = head.pointer(&format!(
        "/metadata/labels/{}",
        RAY_NODE_TYPE_LABEL.replace('/', "~1")
    )) == Some(&json!("head"));
    let cluster = owner_name(head, "RayCluster")
        .filter(|_| is_head)
        .and_then(|c| store.get(&Key::new("ray.io/v1", "RayCluster", Some(namespace), c)));
    let Some(cluster) = cluster else {
        return Err(refused(format!(
            "nothing listens on port {port} of simulated pod {pod}: the local target simulates only a Ray head's dashboard"
        )));
    };
    let head_group = cluster
        .pointer("/spec/headGroupSpec")
        .unwrap_or(&Value::Null);
    match dashboard_port(head_group) {
        Ok(listening) if listening == port => {}
        _ => {
            return Err(refused(format!(
                "nothing listens on port {port} of simulated pod {pod} (its simulated dashboard is on the port its RayCluster names)"
            )));
        }
    }
    let job = owner_name(cluster, "RayJob")
        .unwrap_or_default()
        .to_string();
    let status = store
        .get(&Key::new("ray.io/v1", "RayJob", Some(namespace), &job))
        .and_then(|j| j.get("status"))
        .cloned()
        .unwrap_or(Value::Null);
    Ok(SimulatedDashboard {
        namespace: namespace.to_string(),
        job,
        cluster: name_of(cluster).to_string(),
        head: pod.to_string(),
        status,
    })
}

/// The client's end of a connection to `dashboard`, whose other end answers one HTTP request.
pub fn serve(dashboard: SimulatedDashboard) -> DuplexStream {
    let (client, mut server) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let Some(path) = read_request_path(&mut server).await else {
            return;
        };
        let (code, content_type, body) = dashboard.answer(&path);
        let head = format!(
            "HTTP/1.1 {code}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nX-Simulated-By: gkq local target\r\nConnection: close\r\n\r\n",
            body.len()
        );
        // The client may have gone; nothing to tell anyone then.
        let _ = server.write_all(head.as_bytes()).await;
        let _ = server.write_all(body.as_bytes()).await;
        let _ = server.shutdown().await;
    });
    client
}

/// The path of the request line, once the request's head has arrived (at most 16 KiB).
async fn read_request_path(stream: &mut DuplexStream) -> Option<String> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    while !received.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buffer).await.ok()?;
        if n == 0 || received.len() > 16 * 1024 {
            return None;
        }
        received.extend_from_slice(&buffer[..n]);
    }
    let text = String::from_utf8_lossy(&received);
    let target = text.lines().next()?.split_whitespace().nth(1)?;
    Some(target.split('?').next().unwrap_or(target).to_string())
}

impl SimulatedDashboard {
    fn field(&self, name: &str) -> &str {
        self.status[name].as_str().unwrap_or("")
    }

    /// The status line, content type and body for `path`.
    fn answer(&self, path: &str) -> (&'static str, &'static str, String) {
        match path {
            "/" | "/index.html" => ("200 OK", "text/html; charset=utf-8", self.page()),
            "/api/jobs" | "/api/jobs/" => {
                let jobs = json!([{
                    "simulated": true,
                    "job_id": self.field("jobId"),
                    "status": self.field("jobStatus"),
                    "message": self.field("message"),
                    "rayjob": format!("{}/{}", self.namespace, self.job),
                    "kuberay_status": self.status,
                }]);
                ("200 OK", "application/json", format!("{jobs:#}\n"))
            }
            _ => (
                "404 Not Found",
                "text/plain; charset=utf-8",
                "Simulated Ray dashboard (gkq local target): only / and /api/jobs/ are served.\n"
                    .to_string(),
            ),
        }
    }

    fn page(&self) -> String {
        let row = |label: &str, value: &str| {
            format!("<tr><th>{label}</th><td>{}</td></tr>\n", escape(value))
        };
        let rows = [
            row("RayJob", &format!("{}/{}", self.namespace, self.job)),
            row("Ray cluster", &self.cluster),
            row("Head pod", &self.head),
            row(
                "Deployment status (KubeRay)",
                self.field("jobDeploymentStatus"),
            ),
            row("Job status (Ray)", self.field("jobStatus")),
            row("Message", self.field("message")),
            row("Started", self.field("startTime")),
            row("Ended", self.field("endTime")),
        ]
        .concat();
        format!(
            "<!doctype html>\n<html><head><title>Simulated Ray dashboard: {job}</title></head>\n<body>\n<h1>Simulated Ray dashboard</h1>\n<p><strong>Simulated by gkq's local target: no Ray runs here.</strong> This page shows what the simulation knows of the job; on a real cluster <code>gkq dashboard</code> reaches Ray's own dashboard.</p>\n<table>\n{rows}</table>\n<p>JSON: <a href=\"/api/jobs/\">/api/jobs/</a></p>\n</body></html>\n",
            job = escape(&self.job)
        )
    }
}

/// `text` safe inside HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dashboard() -> SimulatedDashboard {
        SimulatedDashboard {
            namespace: "default".into(),
            job: "train".into(),
            cluster: "train-x7k2p".into(),
            head: "train-x7k2p-head-abcde".into(),
            status: json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                           "jobId": "train-1a2b3", "message": "running <simulated>"}),
        }
    }

    #[tokio::test]
    async fn one_request_gets_the_simulated_status_labelled_so() {
        let mut client = serve(dashboard());
        client
            .write_all(b"GET /api/jobs/ HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let jobs: Value = serde_json::from_str(body).unwrap();
        assert_eq!(jobs[0]["simulated"], true);
        assert_eq!(jobs[0]["status"], "RUNNING");
        assert_eq!(jobs[0]["rayjob"], "default/train");

        let (code, _, page) = dashboard().answer("/");
        assert_eq!(code, "200 OK");
        assert!(page.contains("Simulated by gkq's local target"), "{page}");
        assert!(page.contains("running &lt;simulated&gt;"), "{page}");
        assert_eq!(dashboard().answer("/api/nodes").0, "404 Not Found");
    }
}
