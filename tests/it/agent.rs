//! `gkq agent` against the real control plane (kube-apiserver and Kueue; GKE on the local
//! target's emulator), with real git repositories in temporary directories: commits applied by
//! polling and by webhook, leader election with a standby taking over after `kill -9`, invalid
//! commits stalled, destructive plans held until their digest is approved, drift reverted, and
//! the git token kept out of everything the agent writes. Also the local target's agent, and the
//! deploy/ manifests (CRD generated from the Rust types; server-side dry run).

mod audit;
mod bounded;
mod concurrency;
mod deletion;
mod handover;
mod local_idle;
mod ownership;
mod sources;
mod ssh;
mod tenancy;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::control_plane::{TestEnv, control_plane, eventually, kube_spec_vars, test_env};
use crate::support::process::{Running, explain, text};
use crate::support::{Workspace, gkq, repo_root};

const GROUP: &str = "gkq.dev";

fn stack_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(GROUP, "v1alpha1", "GkqStack"),
        "gkqstacks",
    )
}

/// Installs the committed CRD (server-side apply: every test applies the same object) and waits
/// until it is served.
async fn install_crd(client: &kube::Client) {
    let text = std::fs::read_to_string(repo_root().join("deploy/crd.yaml")).unwrap();
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_saphyr::from_str(&text).unwrap();
    let api: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    api.patch(
        "gkqstacks.gkq.dev",
        &PatchParams::apply("gkq-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    eventually(
        "the GkqStack CRD to be established",
        Duration::from_secs(30),
        || async {
            let crd = api.get("gkqstacks.gkq.dev").await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(established.then_some(()))
        },
    )
    .await
    .unwrap();
}

/// One test's stack: the kube-spec fixture in a git repository of its own, a namespace for its
/// GkqStack, Lease and Events, and a local-target state directory for GKE.
struct Fixture {
    env: TestEnv,
    ws: Workspace,
    vars: BTreeMap<String, String>,
    state: tempfile::TempDir,
}

impl Fixture {
    async fn new(test: &str) -> Fixture {
        let env = test_env(test).await;
        install_crd(&env.client).await;
        let vars = kube_spec_vars(test, &env.namespace);
        let ws = Workspace::kube_spec();
        ws.commit_all("first");
        Fixture {
            env,
            ws,
            vars,
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn kubeconfig(&self) -> PathBuf {
        control_plane().kubeconfig.clone()
    }

    fn url(&self) -> String {
        format!("file://{}", self.ws.path().display())
    }

    /// `gkq agent` for this fixture's namespace, running; `work` names its checkout directory
    /// and identity.
    fn agent(&self, work: &str, lease: &str) -> Running {
        Running::spawn(self.agent_command(work, lease))
    }

    fn agent_command(&self, work: &str, lease: &str) -> std::process::Command {
        self.agent_command_as(work, lease, &self.kubeconfig())
    }

    /// [`Fixture::agent_command`] reading the stacks, writing their status and Events and
    /// holding the leader Lease through `management` (the target stays on the admin
    /// kubeconfig).
    fn agent_command_as(
        &self,
        work: &str,
        lease: &str,
        management: &std::path::Path,
    ) -> std::process::Command {
        self.agent_command_in(&self.state.path().join(work), work, lease, management)
    }

    /// [`Fixture::agent_command_as`] checking repositories out in `work_dir`, as `identity`.
    fn agent_command_in(
        &self,
        work_dir: &std::path::Path,
        identity: &str,
        lease: &str,
        management: &std::path::Path,
    ) -> std::process::Command {
        let mut c = gkq();
        c.args(["agent", "--target", "local"])
            .args(TEST_AGENT_ARGS)
            .arg("--state-dir")
            .arg(self.state.path().join("state"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--management-kubeconfig")
            .arg(management)
            .args(["--watch-namespace", &self.env.namespace])
            .args(["--namespace", &self.env.namespace])
            .args(["--lease-duration", lease])
            .arg("--work-dir")
            .arg(work_dir)
            .args(["--identity", identity]);
        c
    }

    /// Creates the GkqStack `name` following `main` of the fixture's repository.
    async fn create_stack(&self, name: &str, interval: &str, secret: Option<&str>) {
        self.create_stack_of(name, &self.url(), interval, secret)
            .await;
    }

    /// [`Fixture::create_stack`] following `main` of the repository at `url`.
    async fn create_stack_of(&self, name: &str, url: &str, interval: &str, secret: Option<&str>) {
        let mut spec = json!({
            "url": url,
            "branch": "main",
            "path": "infra",
            "variables": self.vars,
            "interval": interval,
        });
        if let Some(secret) = secret {
            spec["secretRef"] = json!({"name": secret});
        }
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gkq.dev/v1alpha1",
            "kind": "GkqStack",
            "metadata": {"name": name, "namespace": self.env.namespace},
            "spec": spec,
        }))
        .unwrap();
        self.stacks()
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    fn stacks(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.env.client.clone(),
            &self.env.namespace,
            &stack_resource(),
        )
    }

    async fn stack(&self, name: &str) -> Value {
        serde_json::to_value(self.stacks().get(name).await.unwrap()).unwrap()
    }

    /// Waits until the stack's status satisfies `done`; returns the stack.
    async fn wait(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let stacks = self.stacks();
        let result = eventually(what, timeout, || async {
            let stack = serde_json::to_value(stacks.get(name).await?)?;
            Ok(done(&stack).then_some(stack))
        })
        .await;
        match result {
            Ok(stack) => stack,
            Err(e) => panic!("{e:#}\nstack: {:#}", self.stack(name).await),
        }
    }

    /// Creates the stack `name` (polling every 2s), starts an agent (lease 4s) and waits until
    /// it has applied the first commit; returns the agent and that commit.
    async fn started(&self, name: &str) -> (Running, String) {
        let first = self.ws.git(&["rev-parse", "HEAD"]);
        self.create_stack(name, "2s", None).await;
        let mut agent = self.agent("a", "4s");
        endpoint(&mut agent);
        self.wait_applied(name, &first, Duration::from_secs(120))
            .await;
        (agent, first)
    }

    fn queues(&self) -> Api<DynamicObject> {
        crate::support::control_plane::dynamic_api(
            &self.env.client,
            "kueue.x-k8s.io/v1beta2",
            "ClusterQueue",
            "",
        )
        .unwrap()
    }

    /// Commits a change of the on-demand TPU quota from `from` to `to`; returns the commit.
    fn commit_quota(&self, from: u32, to: u32) -> String {
        self.ws.edit(
            &format!("TPU_QUOTA: {{default: \"{from}\"}}"),
            &format!("TPU_QUOTA: {{default: \"{to}\"}}"),
        );
        self.ws.commit_all(&format!("TPU quota {to}"))
    }

    /// Waits until `commit` was attempted and left condition `type_` True.
    async fn wait_condition(&self, name: &str, commit: &str, type_: &str) -> Value {
        let what = format!("commit {commit} to leave {type_} True");
        self.wait(name, &what, Duration::from_secs(60), |s| {
            s["status"]["lastAttemptedRevision"] == commit
                && condition(s, type_)["status"] == "True"
        })
        .await
    }

    async fn wait_applied(&self, name: &str, commit: &str, timeout: Duration) -> Value {
        self.wait(name, &format!("commit {commit} applied"), timeout, |s| {
            s["status"]["lastAppliedRevision"] == commit
        })
        .await
    }

    /// `gkq status` of the fixture's spec, as JSON.
    fn status(&self) -> Value {
        let mut c = gkq();
        c.arg("status")
            .arg(self.ws.spec_dir())
            .args(["--target", "local", "-o", "json"])
            .arg("--state-dir")
            .arg(self.state.path().join("state"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig());
        for (k, v) in &self.vars {
            c.args(["--var", &format!("{k}={v}")]);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Creates the Secret `name` holding `string_data`.
    async fn create_secret(&self, name: &str, string_data: Value) {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": self.env.namespace},
            "stringData": string_data,
        }))
        .unwrap();
        Api::<Secret>::namespaced(self.env.client.clone(), &self.env.namespace)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    /// Everything a running agent wrote: the status of each of `stacks`, the namespace's
    /// Events, its `/metrics` (at `url`), and its logs (it is stopped to read the last of them).
    async fn everything_written(
        &self,
        stacks: &[&str],
        url: &str,
        agent: Running,
    ) -> Vec<(String, String)> {
        let mut written = Vec::new();
        for name in stacks {
            let status = serde_json::to_string(&self.stack(name).await).unwrap();
            written.push((format!("status of {name}"), status));
        }
        let events = serde_json::to_string(&self.events().await).unwrap();
        written.push(("events".to_string(), events));
        written.push(("metrics".to_string(), metrics_of(url).await));
        let (code, logs) = agent.interrupt();
        assert_eq!(code, Some(0), "{logs}");
        assert!(logs.contains("TRACE"), "the logs are at trace level");
        written.push(("logs".to_string(), logs));
        written
    }

    async fn events(&self) -> Vec<Value> {
        let api: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.env.client.clone(), &self.env.namespace);
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect()
    }
}

fn condition<'a>(stack: &'a Value, type_: &str) -> &'a Value {
    stack["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// What every test agent is given: listeners on free loopback ports, and a minimum interval
/// low enough for the tests' 2s intervals (and the Event test's 100ms).
const TEST_AGENT_ARGS: [&str; 6] = [
    "--webhook-listen",
    "127.0.0.1:0",
    "--metrics-listen",
    "127.0.0.1:0",
    "--min-interval",
    "100ms",
];

/// Where an agent serves: webhooks and probes, and metrics.
struct Urls {
    hooks: String,
    metrics: String,
}

/// The agent's endpoints, from its first line of output (`gkq agent: webhooks and probes on
/// http://A, metrics on http://B`).
fn endpoint(agent: &mut Running) -> Urls {
    let (line, _) = agent.wait_for("the agent's addresses", Duration::from_secs(30), |out| {
        out.contains("metrics on http://")
    });
    let after = |marker: &str| {
        line.lines()
            .find_map(|l| l.split(marker).nth(1))
            .and_then(|rest| rest.split([',', ' ', '\n']).next())
            .unwrap()
            .trim()
            .to_string()
    };
    Urls {
        hooks: after("webhooks and probes on "),
        metrics: after("metrics on "),
    }
}

fn http() -> reqwest::Client {
    gkq::gke::install_tls_provider();
    reqwest::Client::new()
}

async fn metrics_of(url: &str) -> String {
    let response = http().get(format!("{url}/metrics")).send().await.unwrap();
    response.text().await.unwrap()
}

#[test]
fn the_committed_crd_is_the_one_the_rust_types_generate() {
    let committed = std::fs::read_to_string(repo_root().join("deploy/crd.yaml")).unwrap();
    assert_eq!(
        committed,
        gkq::agent::crd::crd_yaml(),
        "deploy/crd.yaml is stale: regenerate it with `gkq agent --print-crd > deploy/crd.yaml`"
    );
}

#[tokio::test]
async fn the_deploy_manifests_pass_a_server_side_dry_run() {
    let env = test_env("agent-deploy").await;
    install_crd(&env.client).await;
    let discovery = kube::discovery::Discovery::new(env.client.clone())
        .run()
        .await
        .unwrap();
    let mut checked = Vec::new();
    for file in [
        "namespace.yaml",
        "rbac.yaml",
        "single-team-rbac.yaml",
        "deployment.yaml",
        "crd.yaml",
    ] {
        let text = std::fs::read_to_string(repo_root().join("deploy").join(file)).unwrap();
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        for doc in documents.into_iter().filter(|d| !d.is_null()) {
            let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
                Some((g, v)) => (g.to_string(), v.to_string()),
                None => (
                    String::new(),
                    doc["apiVersion"].as_str().unwrap().to_string(),
                ),
            };
            let kind = doc["kind"].as_str().unwrap();
            let gvk = kube::api::GroupVersionKind::gvk(&group, &version, kind);
            let (resource, caps) = discovery
                .resolve_gvk(&gvk)
                .unwrap_or_else(|| panic!("{kind} is not served"));
            let api: Api<DynamicObject> = match (caps.scope, doc["metadata"]["namespace"].as_str())
            {
                (kube::discovery::Scope::Namespaced, Some(ns)) => {
                    Api::namespaced_with(env.client.clone(), ns, &resource)
                }
                _ => Api::all_with(env.client.clone(), &resource),
            };
            let name = doc["metadata"]["name"].as_str().unwrap().to_string();
            let object: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
            // The namespace does not exist on the test apiserver; a dry run of the objects in it
            // still needs it, so it is created for real (it is the agent's own, empty).
            let params = if kind == "Namespace" {
                PatchParams::apply("gkq-test")
            } else {
                PatchParams::apply("gkq-test").dry_run()
            };
            api.patch(&name, &params, &Patch::Apply(&object))
                .await
                .unwrap_or_else(|e| panic!("deploy/{file}: {kind} {name}: {e}"));
            checked.push(format!("{kind}/{name}"));
        }
    }
    for expected in [
        "CustomResourceDefinition/gkqstacks.gkq.dev",
        "Deployment/gkq-agent",
        "ClusterRole/gkq-agent",
        "ServiceAccount/gkq-agent",
        "PodDisruptionBudget/gkq-agent",
    ] {
        assert!(
            checked.iter().any(|c| c == expected),
            "{expected} in {checked:?}"
        );
    }
    let deployment = std::fs::read_to_string(repo_root().join("deploy/deployment.yaml")).unwrap();
    assert!(deployment.contains("replicas: 2"));
    // The kubelet probes the pod's address: the probes' port is the webhook listener's, on every
    // address; metrics stay on loopback.
    let documents: Vec<Value> = serde_saphyr::from_multiple(&deployment).unwrap();
    let container = &documents[0]["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let port = container["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(container["ports"][0]["name"], "http");
    assert!(
        args.contains(&format!("--webhook-listen=0.0.0.0:{port}").as_str()),
        "{args:?}"
    );
    assert!(
        args.iter()
            .any(|a| a.starts_with("--metrics-listen=127.0.0.1:")),
        "{args:?}"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "http", "{probe}");
    }
    let dockerfile = std::fs::read_to_string(repo_root().join("deploy/Dockerfile")).unwrap();
    assert!(dockerfile.matches("FROM ").count() >= 2, "multi-stage");
    assert!(dockerfile.contains("USER 65532"), "non-root");
}

#[tokio::test]
async fn commits_are_applied_by_polling_and_by_webhook_and_status_shows_them() {
    let f = Fixture::new("agent-poll").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_secret("git", json!({"webhookSecret": "hook-secret-1"}))
        .await;
    f.create_stack("polled", "2s", None).await;
    let mut agent = f.agent("a", "4s");
    let url = endpoint(&mut agent);
    let stack = f
        .wait_applied("polled", &first, Duration::from_secs(120))
        .await;
    assert_eq!(condition(&stack, "Ready")["status"], "True", "{stack:#}");

    // A new commit is picked up by polling, and `gkq status` says it is applied.
    let second = f.commit_quota(16, 24);
    f.wait_applied("polled", &second, Duration::from_secs(60))
        .await;
    let status = f.status();
    assert_eq!(status["applied"]["commit"], second.as_str(), "{status:#}");
    assert_eq!(status["drift"]["changes"], false, "{status:#}");

    // The health endpoints, on both listeners; metrics on their own.
    let client = http();
    for base in [&url.hooks, &url.metrics] {
        for path in ["/healthz", "/readyz"] {
            let r = client.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(r.status(), 200, "{base}{path}");
        }
    }
    let on_hooks = client.get(format!("{}/metrics", url.hooks)).send().await;
    assert_eq!(
        on_hooks.unwrap().status(),
        404,
        "no metrics on the webhook listener"
    );
    let metrics = metrics_of(&url.metrics).await;
    let key = format!("{}/polled", f.env.namespace);
    assert!(
        metrics.contains(&format!(
            "gkq_stack_last_applied_timestamp_seconds{{stack=\"{key}\"}}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("gkq_reconcile_duration_seconds_count"),
        "{metrics}"
    );

    // A stack that polls once an hour applies a commit when the webhook says it was pushed.
    f.stacks()
        .patch(
            "polled",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"interval": "1h", "secretRef": {"name": "git"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let third = f.commit_quota(24, 32);
    let hook = |url: &str| format!("{url}/hooks/{}/polled", f.env.namespace);
    let body = br#"{"ref":"refs/heads/main"}"#.to_vec();
    let push = |to: String, headers: Vec<(&'static str, String)>| {
        let mut request = client.post(to).body(body.clone());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send().await.unwrap().status() }
    };
    let sign = |secret: &[u8]| gkq::agent::webhook::github_signature(secret, &body);
    let forged = push(
        hook(&url.hooks),
        vec![("X-Hub-Signature-256", sign(b"wrong"))],
    )
    .await;
    assert_eq!(forged, 401, "a wrongly signed push is refused");
    let pushed = push(
        hook(&url.hooks),
        vec![
            ("X-GitHub-Event", "push".into()),
            ("X-Hub-Signature-256", sign(b"hook-secret-1")),
        ],
    )
    .await;
    assert_eq!(pushed, 202);
    f.wait_applied("polled", &third, Duration::from_secs(30))
        .await;

    // GitLab's token header works the same way, also sent to a replica that does not lead: it
    // passes the push to the leader.
    let mut standby = f.agent("b", "4s");
    let standby_url = endpoint(&mut standby).hooks;
    let fourth = f.commit_quota(32, 16);
    let pushed = push(
        hook(&standby_url),
        vec![
            ("X-Gitlab-Event", "Push Hook".into()),
            ("X-Gitlab-Token", "hook-secret-1".into()),
        ],
    )
    .await;
    assert_eq!(pushed, 202);
    f.wait_applied("polled", &fourth, Duration::from_secs(30))
        .await;
    let events = f.events().await;
    assert!(
        events.iter().any(|e| e["reason"] == "Applied"
            && e["note"]
                .as_str()
                .unwrap_or_default()
                .contains(&fourth[..12])),
        "{events:#?}"
    );
}

#[tokio::test]
async fn only_the_leader_applies_and_a_standby_takes_over_after_kill_9() {
    let f = Fixture::new("agent-leader").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_stack("led", "2s", None).await;
    let mut leader = f.agent("one", "4s");
    endpoint(&mut leader);
    // The first agent leads before the second starts.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(f.env.client.clone(), &f.env.namespace);
    eventually(
        "the first agent to lead",
        Duration::from_secs(30),
        || async {
            let lease = leases.get_opt("gkq-agent").await?;
            Ok(lease
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| h == "one"))
        },
    )
    .await
    .unwrap();
    let mut standby = f.agent("two", "4s");
    endpoint(&mut standby);
    f.wait_applied("led", &first, Duration::from_secs(120))
        .await;
    let second = f.commit_quota(16, 24);
    f.wait_applied("led", &second, Duration::from_secs(60))
        .await;
    let standby_so_far = standby.take_stderr();
    assert!(
        standby_so_far.contains("standing by: one leads"),
        "{standby_so_far}"
    );
    assert!(
        !standby_so_far.contains("\"apply\""),
        "the standby applied while the leader led:\n{standby_so_far}"
    );

    leader.kill_9();
    let killed = std::time::Instant::now();
    let third = f.commit_quota(24, 32);
    f.wait_applied("led", &third, Duration::from_secs(60)).await;
    let took = killed.elapsed();
    let lease = leases.get("gkq-agent").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("two"),
        "the standby took the Lease over"
    );
    let logs = standby.take_stderr();
    assert!(logs.contains("taking over Lease"), "{logs}");
    assert!(
        logs.contains("\"apply\""),
        "the new leader applied:\n{logs}"
    );
    eprintln!("hand-over and apply took {took:?} after kill -9 (lease 4s, interval 2s)");
}

#[tokio::test]
async fn an_invalid_commit_stalls_with_diagnostics_and_the_next_good_commit_applies() {
    let f = Fixture::new("agent-invalid").await;
    let (_agent, first) = f.started("checked").await;
    let queues = f.queues();
    let before = queues.get(&f.vars["CQ"]).await.unwrap().metadata.generation;

    f.ws.edit(
        "machineType: ct6e-standard-4t",
        "machineType: ct6e-standard-9t",
    );
    let bad = f.ws.commit_all("a machine type that does not exist");
    let stack = f.wait_condition("checked", &bad, "Stalled").await;
    let diagnostics = stack["status"]["diagnostics"].as_str().unwrap();
    assert!(diagnostics.contains("infra/gkq.yaml:"), "{diagnostics}");
    let located = diagnostics.lines().any(|l| {
        let mut parts = l.splitn(4, ':');
        parts.next() == Some("infra/gkq.yaml")
            && parts.next().is_some_and(|n| n.parse::<u32>().is_ok())
            && parts.next().is_some_and(|n| n.parse::<u32>().is_ok())
    });
    assert!(located, "file:line:col in {diagnostics}");
    assert!(diagnostics.contains("ct6e-standard-9t"), "{diagnostics}");
    assert_eq!(stack["status"]["lastAppliedRevision"], first.as_str());
    assert_eq!(
        queues.get(&f.vars["CQ"]).await.unwrap().metadata.generation,
        before,
        "nothing changed"
    );
    let events = f.events().await;
    assert!(
        events.iter().any(|e| e["reason"] == "InvalidSpec"),
        "{events:#?}"
    );

    f.ws.edit(
        "machineType: ct6e-standard-9t",
        "machineType: ct6e-standard-4t",
    );
    let good = f.commit_quota(16, 24);
    let stack = f
        .wait_applied("checked", &good, Duration::from_secs(60))
        .await;
    assert_eq!(condition(&stack, "Stalled")["status"], "False", "{stack:#}");
    assert!(stack["status"]["diagnostics"].is_null(), "{stack:#}");
}

#[tokio::test]
async fn deleting_a_queue_with_an_admitted_job_is_held_until_its_digest_is_approved() {
    let f = Fixture::new("agent-hold").await;
    let (_agent, first) = f.started("held").await;
    crate::gitops_control_plane::wait_for_admissions(&f.env.namespace, 1).await;

    // The commit removes the ClusterQueue, its LocalQueue and the jobs it admitted.
    let spec = std::fs::read_to_string(f.ws.spec_file()).unwrap();
    let kept = &spec[..spec.find("  clusterQueues:").unwrap()];
    std::fs::write(f.ws.spec_file(), kept).unwrap();
    let deleting = f.ws.commit_all("remove the queue and its jobs");
    let stack = f.wait_condition("held", &deleting, "Held").await;
    let digest = stack["status"]["heldDigest"].as_str().unwrap().to_string();
    let message = condition(&stack, "Held")["message"].as_str().unwrap();
    assert!(message.contains(&digest), "{message}");
    assert!(
        message.contains(&format!("kueue.clusterqueue/{}", f.vars["CQ"]))
            || message.contains("stops running work"),
        "{message}"
    );
    let queues = f.queues();
    assert!(
        queues.get_opt(&f.vars["CQ"]).await.unwrap().is_some(),
        "nothing changed"
    );
    assert_eq!(stack["status"]["lastAppliedRevision"], first.as_str());
    let events = f.events().await;
    assert!(events.iter().any(|e| e["reason"] == "Held"), "{events:#?}");

    let approve = |digest: &str| {
        let mut c = gkq();
        c.args(["approve", &format!("{}/held", f.env.namespace), digest])
            .arg("--management-kubeconfig")
            .arg(f.kubeconfig());
        c.output().unwrap()
    };
    // A digest that is not the held plan's is refused by `gkq approve`...
    let stale = approve("0123456789abcdef");
    assert_eq!(stale.status.code(), Some(1), "{}", explain(&stale));
    assert!(
        text(&stale.stderr).contains("refusing to approve digest 0123456789abcdef"),
        "{}",
        explain(&stale)
    );
    // ...and by the agent, when set by hand (kubectl annotate).
    f.stacks()
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"gkq.dev/approve": "fedcba9876543210"}}}),
            ),
        )
        .await
        .unwrap();
    let stack = f
        .wait(
            "held",
            "the stale approval to be refused",
            Duration::from_secs(30),
            |s| {
                condition(s, "Held")["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("the approval of digest fedcba9876543210 was refused")
            },
        )
        .await;
    assert_eq!(stack["status"]["lastAppliedRevision"], first.as_str());
    assert!(
        queues.get_opt(&f.vars["CQ"]).await.unwrap().is_some(),
        "nothing changed"
    );

    // The held digest applies.
    let out = approve(&digest);
    assert!(out.status.success(), "{}", explain(&out));
    let stack = f
        .wait_applied("held", &deleting, Duration::from_secs(60))
        .await;
    assert_eq!(condition(&stack, "Held")["status"], "False", "{stack:#}");
    eventually(
        "the ClusterQueue to be deleted",
        Duration::from_secs(30),
        || async {
            let found = queues.get_opt(&f.vars["CQ"]).await?;
            // Kueue's finalizer may keep it a moment, marked for deletion.
            Ok(
                (found.is_none() || found.is_some_and(|q| q.metadata.deletion_timestamp.is_some()))
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap();
}

/// How many runs of `stack` found its commit and live state unchanged and did not plan again.
async fn unchanged_runs(metrics: &str, stack: &str) -> u64 {
    let prefix = format!("gkq_stack_unchanged_runs_total{{stack=\"{stack}\"}} ");
    metrics_of(metrics)
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Idle intervals do not plan again while the commit and the live objects the last plan read
/// are unchanged (`gkq_stack_unchanged_runs_total` counts them), yet a hand edit is reverted
/// by the next interval, and the idle runs resume after it.
#[tokio::test]
async fn a_hand_edited_queue_quota_is_reverted_by_the_next_interval() {
    let f = Fixture::new("agent-drift").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_stack("drifting", "2s", None).await;
    let mut agent = f.agent("a", "4s");
    let urls = endpoint(&mut agent);
    f.wait_applied("drifting", &first, Duration::from_secs(120))
        .await;
    let key = format!("{}/drifting", f.env.namespace);
    let idle = |at_least: u64| {
        let (metrics, key) = (urls.metrics.clone(), key.clone());
        async move {
            eventually(
                "idle runs that do not plan again",
                Duration::from_secs(60),
                || async { Ok((unchanged_runs(&metrics, &key).await >= at_least).then_some(())) },
            )
            .await
            .unwrap();
        }
    };
    idle(2).await;
    let queues = f.queues();
    let quota = "/spec/resourceGroups/0/flavors/1/resources/2/nominalQuota";
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": quota, "value": "8"}])).unwrap();
    queues
        .patch(
            &f.vars["CQ"],
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .unwrap();
    let read = || async {
        let q = serde_json::to_value(queues.get(&f.vars["CQ"]).await?)?;
        Ok::<_, anyhow::Error>(q.pointer(quota).cloned().unwrap_or_default())
    };
    assert_eq!(read().await.unwrap(), "8");
    eventually(
        "the quota to be reverted",
        Duration::from_secs(60),
        || async { Ok((read().await? == "16").then_some(())) },
    )
    .await
    .unwrap();
    let logs = agent.take_stderr();
    assert!(
        logs.contains("kueue.clusterqueue"),
        "the revert was an apply:\n{logs}"
    );
    let before = unchanged_runs(&urls.metrics, &key).await;
    idle(before + 2).await;
}

#[tokio::test]
async fn the_git_token_never_appears_in_status_events_metrics_or_trace_logs() {
    let f = Fixture::new("agent-token").await;
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    let token = format!(
        "gkq-token-{}",
        crate::support::control_plane::unique_name("t")
    );
    f.create_secret(
        "git",
        json!({"token": token, "webhookSecret": format!("{token}-hook")}),
    )
    .await;
    f.create_stack("secret", "2s", Some("git")).await;
    // A second stack whose repository does not exist: its fetch fails, and the failure is
    // reported without the token.
    let nowhere = format!("file://{}/nothing-here", f.state.path().display());
    f.create_stack_of("missing", &nowhere, "2s", Some("git"))
        .await;
    let mut c = f.agent_command("work", "4s");
    c.env("RUST_LOG", "trace");
    let mut agent = Running::spawn(c);
    let url = endpoint(&mut agent);
    f.wait_applied("secret", &first, Duration::from_secs(180))
        .await;
    f.wait(
        "missing",
        "the failed fetch",
        Duration::from_secs(60),
        |s| condition(s, "Ready")["reason"] == "FetchFailed",
    )
    .await;
    let written = f
        .everything_written(&["secret", "missing"], &url.metrics, agent)
        .await;
    use base64::Engine;
    let forms = vec![
        token.clone(),
        base64::engine::general_purpose::STANDARD.encode(&token),
        base64::engine::general_purpose::STANDARD.encode(format!("git:{token}")),
    ];
    assert_nowhere(&written, &forms, "the token");
}

/// Asserts that no form of a secret appears in anything written.
fn assert_nowhere(written: &[(String, String)], forms: &[String], secret: &str) {
    for (what, text) in written {
        for form in forms {
            assert!(
                !text.contains(form.as_str()),
                "{secret} ({form}) appears in the {what}"
            );
        }
    }
}

/// `gkq agent` on the local target with the state directory `state`, its one stack following
/// `main` of `ws`'s repository every 2s.
fn local_agent(ws: &Workspace, state: &std::path::Path) -> std::process::Command {
    let manifest = state.join("stack.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: gkq.dev/v1alpha1\nkind: GkqStack\nmetadata: {{name: seed}}\nspec:\n  url: file://{}\n  path: infra\n  interval: 2s\n",
            ws.path().display()
        ),
    )
    .unwrap();
    let mut c = gkq();
    c.args(["agent", "--target", "local"])
        .args(TEST_AGENT_ARGS)
        .arg("--state-dir")
        .arg(state)
        .arg("--stack")
        .arg(&manifest)
        // As deploy/deployment.yaml ships it: empty, so not set.
        .env("GKQ_AGENT_CLUSTER", "");
    c
}

/// Every line of `logs` as JSON; panics at the first line that is not.
fn json_lines(logs: &str) -> Vec<Value> {
    logs.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n--- the logs:\n{logs}"))
        })
        .collect()
}

#[test]
fn the_local_target_agent_applies_a_commit_that_gkq_status_then_shows() {
    let ws = Workspace::example();
    let commit = ws.commit_all("seed");
    let state = tempfile::tempdir().unwrap();
    let agent = Running::spawn(local_agent(&ws, state.path()));
    let status = || {
        let out = gkq()
            .arg("status")
            .arg(ws.spec_dir())
            .args(["--target", "local", "-o", "json", "--state-dir"])
            .arg(state.path())
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or_default()
    };
    let started = std::time::Instant::now();
    loop {
        if status()["applied"]["commit"] == commit.as_str() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the commit was not applied: {:#}",
            status()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
    let stacks: Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("agent/stacks.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        stacks["stacks"][0]["status"]["lastAppliedRevision"],
        commit.as_str(),
        "{stacks:#}"
    );
    assert_eq!(stacks["events"][0]["reason"], "Applied", "{stacks:#}");

    // The stack store (it holds status and Events) and each stack's checkout are the agent's
    // own: a checkout holds the spec, and the SSH key while it fetches.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state.path().join("agent/stacks.json")), 0o600);
        let checkouts = state.path().join("agent/checkouts");
        let subdirs = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        };
        let namespaces = subdirs(&checkouts);
        let stacks: Vec<_> = namespaces.iter().flat_map(|ns| subdirs(ns)).collect();
        assert!(!stacks.is_empty(), "no checkout in {}", checkouts.display());
        for dir in std::iter::once(&checkouts)
            .chain(&namespaces)
            .chain(&stacks)
        {
            assert_eq!(mode(dir), 0o700, "{}", dir.display());
        }
    }
}

/// Reads `agent`'s stderr into `logs` until a line of it contains `needle`.
async fn read_logs_until(agent: &Running, logs: &mut String, needle: &str, timeout: Duration) {
    let started = std::time::Instant::now();
    while !logs.contains(needle) {
        assert!(
            started.elapsed() < timeout,
            "waited {timeout:?} for `{needle}`; the logs:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        for line in agent.take_stderr().lines() {
            logs.push_str(line);
            logs.push('\n');
        }
    }
}

#[tokio::test]
async fn the_agent_logs_only_json_lines_also_what_the_pipeline_tells_people() {
    let ws = Workspace::example();
    ws.commit_all("seed");
    let state = tempfile::tempdir().unwrap();
    // The state directory's lock, held as another apply would hold it: the agent waits, and says
    // so, then applies and records the revision (both told as plain lines by `gkq apply`).
    let lock = gkq::ops::lock::lock_state_dir(state.path(), Duration::from_secs(10))
        .await
        .unwrap();
    let agent = Running::spawn(local_agent(&ws, state.path()));
    let mut logs = String::new();
    let waiting = "Waiting up to 2m00s for the cluster's lock";
    read_logs_until(&agent, &mut logs, waiting, Duration::from_secs(60)).await;
    lock.release().await;
    let recorded = "Recorded the applied revision in ConfigMap kube-system/gkq-revision-";
    read_logs_until(&agent, &mut logs, recorded, Duration::from_secs(120)).await;
    let (code, rest) = agent.interrupt();
    logs.push_str(&rest);
    assert_eq!(code, Some(0), "{logs}");

    let lines = json_lines(&logs);
    let notice = |start: &str| {
        lines
            .iter()
            .find(|l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(start))
            })
            .unwrap_or_else(|| panic!("no `{start}` in\n{logs}"))
    };
    let waited = notice(waiting);
    assert_eq!(waited["target"], gkq::ops::NOTICE, "{waited}");
    assert!(waited["fields"]["holder"].is_string(), "{waited}");
    let record = notice(recorded);
    assert_eq!(record["level"], "INFO", "{record}");
    assert!(
        record["fields"]["revision"]
            .as_str()
            .is_some_and(|r| r.starts_with("commit ")),
        "{record}"
    );
}

#[test]
fn gkq_approve_refuses_a_digest_the_local_stack_does_not_hold() {
    let state = tempfile::tempdir().unwrap();
    let store = gkq::agent::store::LocalStore::new(state.path());
    store
        .load_manifests(
            "apiVersion: gkq.dev/v1alpha1\nkind: GkqStack\nmetadata: {name: s, namespace: default}\nspec: {url: file:///nowhere}\n",
            "test",
        )
        .unwrap();
    let out = gkq()
        .args(["approve", "default/s", "0123456789abcdef", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("no plan is held"),
        "{}",
        explain(&out)
    );
}

/// deploy/rbac.yaml's objects, moved into `namespace` (its ClusterRoleBinding renamed after it),
/// applied for real: the permissions a deployed agent has.
async fn install_rbac(client: &kube::Client, namespace: &str) {
    let text = std::fs::read_to_string(repo_root().join("deploy/rbac.yaml")).unwrap();
    let text = text.replace("namespace: gkq-system", &format!("namespace: {namespace}"));
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    for mut doc in documents.into_iter().filter(|d| !d.is_null()) {
        let kind = doc["kind"].as_str().unwrap().to_string();
        if kind == "ClusterRoleBinding" {
            doc["metadata"]["name"] = json!(format!("gkq-agent-{namespace}"));
        }
        let (group, version) = doc["apiVersion"]
            .as_str()
            .unwrap()
            .split_once('/')
            .map_or(("", doc["apiVersion"].as_str().unwrap()), |(g, v)| (g, v));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &kind);
        let (resource, caps) = discovery.resolve_gvk(&gvk).unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = doc["metadata"]["name"].as_str().unwrap().to_string();
        let object: DynamicObject = serde_json::from_value(doc).unwrap();
        api.patch(
            &name,
            &PatchParams::apply("gkq-test").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
    }
}

/// Writes to `out` the kubeconfig `admin` with the token replaced by one of the `gkq-agent`
/// ServiceAccount in `namespace` (from the TokenRequest API), and returns `out`.
async fn agent_token_kubeconfig(
    client: &kube::Client,
    namespace: &str,
    admin: &std::path::Path,
    out: &std::path::Path,
) -> PathBuf {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), namespace);
    let request: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let token = accounts
        .create_token_request("gkq-agent", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let as_agent: String = std::fs::read_to_string(admin)
        .unwrap()
        .lines()
        .map(|l| match l.split_once("token:") {
            Some((indent, _)) => format!("{indent}token: {token}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::write(out, as_agent).unwrap();
    out.to_path_buf()
}

#[tokio::test]
async fn the_agent_needs_no_more_than_the_deployed_rbac() {
    let f = Fixture::new("agent-rbac").await;
    install_rbac(&f.env.client, &f.env.namespace).await;
    // A token of the agent's ServiceAccount, in a kubeconfig of its own.
    let kubeconfig = agent_token_kubeconfig(
        &f.env.client,
        &f.env.namespace,
        &f.kubeconfig(),
        &f.state.path().join("agent-kubeconfig"),
    )
    .await;
    // The ServiceAccount cannot do more than the ClusterRole says (it may not list Secrets).
    let restricted = crate::support::control_plane::client_for(&kubeconfig)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(restricted, &f.env.namespace);
    assert!(secrets.list(&Default::default()).await.is_err());

    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_stack("least", "2s", None).await;
    // The stacks, their status, Events and the leader Lease as the ServiceAccount; the target
    // cluster (Kueue's objects) stays on the admin kubeconfig, as GKE credentials would be.
    let c = f.agent_command_as("a", "4s", &kubeconfig);
    let mut agent = Running::spawn(c);
    endpoint(&mut agent);
    let stack = f
        .wait_applied("least", &first, Duration::from_secs(120))
        .await;
    assert_eq!(condition(&stack, "Ready")["status"], "True", "{stack:#}");
    let events = f.events().await;
    assert!(
        events.iter().any(|e| e["reason"] == "Applied"),
        "{events:#?}"
    );
    let logs = agent.take_stderr();
    assert!(!logs.contains("forbidden"), "{logs}");
}

/// `spec.submitWait` on the API server: the CRD's schema admits durations of gkq's grammar and
/// refuses anything else before the stack is stored (the agent bounds it to 10m, see
/// `agent::source_check`).
#[tokio::test]
async fn the_crd_admits_a_stacks_submit_wait_only_as_a_duration() {
    let env = test_env("agent-submit-wait").await;
    install_crd(&env.client).await;
    let stacks: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &stack_resource());
    let stack = |name: &str, wait: &str| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "GkqStack",
            "metadata": {"name": name},
            "spec": {"url": "https://github.com/acme/infra.git", "submitWait": wait}
        }))
        .unwrap()
    };
    let created = stacks
        .create(&PostParams::default(), &stack("patient", "2m"))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&created).unwrap()["spec"]["submitWait"],
        "2m"
    );
    for (name, wait) in [("soon", "soon"), ("minus", "-1s"), ("empty", "")] {
        let refused = stacks
            .create(&PostParams::default(), &stack(name, wait))
            .await
            .expect_err(wait);
        let text = refused.to_string();
        assert!(text.contains("spec.submitWait"), "{wait}: {text}");
    }
}
