//! A real Kubernetes control plane for integration tests: etcd, kube-apiserver and the Kueue
//! manager on 127.0.0.1, started by `tools/controlplane.sh` (see README, "Test control plane").
//!
//! * One control plane per run: the integration tests are one binary (`tests/it`), and the
//!   first test that asks starts it (a process-wide `OnceLock`); every module's tests share it,
//!   isolated by namespace and by unique names ([`unique_name`], [`kube_spec_vars`]).
//!   The one exception is [`PrivateControlPlane`], for a test that kills its API server.
//! * `GKQ_KUBECONFIG=<file>` or `GKQ_CP_DIR=<dir made by controlplane.sh up>` reuses a running one.
//! * Teardown: the script's watchdog stops the processes and removes the run directory once this
//!   test process has exited, however it exits (success, panic, Ctrl-C, SIGKILL).
//! * Missing binaries are a hard failure with the command that builds them. Tests never skip.
//!
//! Every test gets its own `kube::Client` (clients are bound to the tokio runtime that made them,
//! and every `#[tokio::test]` has its own runtime) and a fresh namespace. There is no
//! kube-controller-manager, so namespaces never finish deleting and ownerReferences are not
//! garbage-collected: always use unique names and never wait for cascading deletes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

/// Field manager used by the tests for server-side apply.
pub const FIELD_MANAGER: &str = "gkq-test";

/// A running control plane: where its kubeconfig is, and whether this process started it.
#[derive(Debug)]
pub struct ControlPlane {
    pub kubeconfig: PathBuf,
    /// The run directory made by `controlplane.sh up` (logs in `<dir>/logs/`), when known.
    pub dir: Option<PathBuf>,
    pub started_here: bool,
}

static CONTROL_PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

/// The control plane of this test process, started on first call.
///
/// Panics (with the build command) if it cannot be started; every test that asks fails the same way.
pub fn control_plane() -> &'static ControlPlane {
    match CONTROL_PLANE.get_or_init(start_or_reuse) {
        Ok(cp) => cp,
        Err(msg) => panic!("{msg}"),
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn start_or_reuse() -> Result<ControlPlane, String> {
    if let Some(path) = std::env::var_os("GKQ_KUBECONFIG").filter(|p| !p.is_empty()) {
        let kubeconfig = PathBuf::from(path);
        if !kubeconfig.is_file() {
            return Err(format!(
                "GKQ_KUBECONFIG={} is not a file",
                kubeconfig.display()
            ));
        }
        return Ok(ControlPlane {
            kubeconfig,
            dir: None,
            started_here: false,
        });
    }
    if let Some(dir) = std::env::var_os("GKQ_CP_DIR").filter(|p| !p.is_empty()) {
        let dir = PathBuf::from(dir);
        let kubeconfig = dir.join("kubeconfig");
        if !kubeconfig.is_file() {
            return Err(format!(
                "GKQ_CP_DIR={} has no kubeconfig; start one with `tools/controlplane.sh up {}`",
                dir.display(),
                dir.display()
            ));
        }
        return Ok(ControlPlane {
            kubeconfig,
            dir: Some(dir),
            started_here: false,
        });
    }
    start().map_err(|e| format!("{e:#}"))
}

fn start() -> Result<ControlPlane> {
    let dir = run_dir("gkq-cp");
    let began = Instant::now();
    up(&dir)?;
    eprintln!(
        "gkq test control plane up in {:.1}s at {} (logs in {}/logs)",
        began.elapsed().as_secs_f64(),
        dir.display(),
        dir.display()
    );
    Ok(ControlPlane {
        kubeconfig: dir.join("kubeconfig"),
        dir: Some(dir),
        started_here: true,
    })
}

/// A fresh run directory name under the temporary directory: `<prefix>-<pid>-<nanos>`.
fn run_dir(prefix: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("{prefix}-{}-{nanos:x}", std::process::id()))
}

fn controlplane_sh(action: &str, dir: &Path) -> Command {
    let mut c = Command::new("bash");
    c.arg(repo_root().join("tools/controlplane.sh"))
        .arg(action)
        .arg(dir)
        .env_remove("GKQ_CP_DIR");
    c
}

/// `controlplane.sh up <dir>`, torn down by the script's watchdog once this process is gone.
fn up(dir: &Path) -> Result<()> {
    up_with(dir, &[])
}

/// [`up`] with extra environment for the script (say `GKQ_CP_AUDIT`).
fn up_with(dir: &Path, env: &[(&str, &str)]) -> Result<()> {
    let out = controlplane_sh("up", dir)
        .env("GKQ_CP_WATCH_PID", std::process::id().to_string())
        .envs(env.iter().copied())
        .output()
        .context("running tools/controlplane.sh")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "could not start the test control plane (tools/controlplane.sh up {} exited with {}).\n\
             If the binaries are missing, build them once with:\n\n    tools/controlplane.sh build\n\n\
             (first build 10-20 min; cached in ~/.cache/gkq/k8s-bins). Script output:\n{stderr}",
            dir.display(),
            out.status
        );
    }
    Ok(())
}

/// A control plane of one test's own, for a test that stops or restarts its API server (which
/// would break every other test on the shared one). Always started here, never reused from
/// `GKQ_KUBECONFIG`/`GKQ_CP_DIR`; stopped when dropped.
pub struct PrivateControlPlane {
    pub dir: PathBuf,
}

impl PrivateControlPlane {
    pub fn start() -> Self {
        let dir = run_dir("gkq-cp-private");
        up(&dir).unwrap_or_else(|e| panic!("{e:#}"));
        Self { dir }
    }

    /// [`PrivateControlPlane::start`], with an audit log of every request in
    /// `<dir>/logs/audit.log` (one JSON event per line).
    pub fn start_audited() -> Self {
        let dir = run_dir("gkq-cp-audited");
        up_with(&dir, &[("GKQ_CP_AUDIT", "1")]).unwrap_or_else(|e| panic!("{e:#}"));
        Self { dir }
    }

    /// [`PrivateControlPlane::start_audited`] on a cluster JobSet was never installed in: no
    /// JobSet CRD (`GKQ_CP_NO_JOBSET`) and no JobSet controller; Kueue lists JobSet in its
    /// frameworks and waits for the CRD to be served.
    pub fn start_audited_without_jobset() -> Self {
        let dir = run_dir("gkq-cp-nojobset");
        up_with(&dir, &[("GKQ_CP_AUDIT", "1"), ("GKQ_CP_NO_JOBSET", "1")])
            .unwrap_or_else(|e| panic!("{e:#}"));
        Self { dir }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The PID of the running kube-apiserver, from the run directory's pids file.
    pub fn apiserver_pid(&self) -> u32 {
        let pids = std::fs::read_to_string(self.dir.join("pids")).unwrap();
        pids.lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                (f.next() == Some("kube-apiserver")).then(|| f.next()?.parse().ok())?
            })
            .next_back()
            .expect("kube-apiserver in the pids file")
    }

    pub fn restart_apiserver(&self) {
        let out = controlplane_sh("restart-apiserver", &self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PrivateControlPlane {
    fn drop(&mut self) {
        let _ = controlplane_sh("down", &self.dir)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A client and a namespace of its own, for one test.
pub struct TestEnv {
    pub client: Client,
    pub namespace: String,
    pub control_plane: &'static ControlPlane,
}

static NAME_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A DNS-label-safe name that is unique across tests, test binaries and runs: `<prefix>-<suffix>`.
pub fn unique_name(prefix: &str) -> String {
    let n = NAME_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let suffix = format!("{:x}{:x}{n:x}", std::process::id(), nanos & 0xffff_ffff);
    let mut prefix: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    prefix.truncate(62 - suffix.len());
    format!("{}-{suffix}", prefix.trim_end_matches('-'))
}

/// Variables for `tests/fixtures/kube-spec` that give one test's stack names of its own:
/// `STACK`, `CPU`, `ONDEMAND`, `DWS` (the flavors), `CHECK`, `PRC`, `CQ` as
/// `<unique base>-<suffix>` (at most 40 characters), and `NS` = `namespace`.
pub fn kube_spec_vars(test: &str, namespace: &str) -> BTreeMap<String, String> {
    // A short prefix keeps unique_name's suffix, which makes the names unique, whole.
    let base = unique_name(&test[..test.len().min(20)]);
    let mut vars = BTreeMap::new();
    for (k, suffix) in [
        ("STACK", "st"),
        ("CPU", "cpu"),
        ("ONDEMAND", "od"),
        ("DWS", "dws"),
        ("CHECK", "chk"),
        ("PRC", "prc"),
        ("CQ", "cq"),
    ] {
        vars.insert(k.to_string(), format!("{base}-{suffix}"));
    }
    vars.insert("NS".to_string(), namespace.to_string());
    vars
}

/// `tests/fixtures/kube-spec` loaded and built with `vars` (no environment lookups).
pub fn kube_spec_desired(vars: &BTreeMap<String, String>) -> gkq::model::DesiredState {
    use gkq::gitops::tree::WorkingTree;
    use gkq::spec::{self, LoadOptions};
    let path = repo_root().join("tests/fixtures/kube-spec");
    let opts = LoadOptions {
        vars: vars.clone(),
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, &path, &opts)
        .unwrap_or_else(|f| panic!("{}", f.diagnostics.report(&f.sources)));
    let (desired, diags) = gkq::model::build(&loaded);
    desired.unwrap_or_else(|| panic!("{}", diags.report(&loaded.sources)))
}

/// Starts (or reuses) the control plane, builds a client for the current runtime and creates a
/// fresh namespace named after `test`.
pub async fn test_env(test: &str) -> TestEnv {
    let control_plane = control_plane();
    let client = client_for(&control_plane.kubeconfig)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "kube client for {}: {e:#}",
                control_plane.kubeconfig.display()
            )
        });
    let namespace = unique_name(test);
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": namespace, "labels": {"gkq.dev/test": "true"}}
    }))
    .expect("namespace json");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {namespace}: {e}"));
    TestEnv {
        client,
        namespace,
        control_plane,
    }
}

pub async fn client_for(kubeconfig: &Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

// --- dynamic-object helpers -----------------------------------------------------------------

/// API resource for the few kinds the tests use (no discovery round trip needed).
pub fn api_resource(api_version: &str, kind: &str) -> Result<(ApiResource, bool)> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let (plural, namespaced) = match kind {
        "ResourceFlavor" => ("resourceflavors", false),
        "ClusterQueue" => ("clusterqueues", false),
        "Cohort" => ("cohorts", false),
        "WorkloadPriorityClass" => ("workloadpriorityclasses", false),
        "AdmissionCheck" => ("admissionchecks", false),
        "ProvisioningRequestConfig" => ("provisioningrequestconfigs", false),
        "LocalQueue" => ("localqueues", true),
        "Workload" => ("workloads", true),
        "RayJob" => ("rayjobs", true),
        "RayCluster" => ("rayclusters", true),
        "JobSet" => ("jobsets", true),
        "Job" => ("jobs", true),
        "ProvisioningRequest" => ("provisioningrequests", true),
        "ConfigMap" => ("configmaps", true),
        "Deployment" => ("deployments", true),
        "Namespace" => ("namespaces", false),
        other => bail!("api_resource: unknown kind {other}"),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Ok((ApiResource::from_gvk_with_plural(&gvk, plural), namespaced))
}

pub fn dynamic_api(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: &str,
) -> Result<Api<DynamicObject>> {
    let (ar, namespaced) = api_resource(api_version, kind)?;
    Ok(if namespaced {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    })
}

/// Server-side apply of one object (`apiVersion`, `kind`, `metadata.name` required) as
/// [`FIELD_MANAGER`]; namespaced kinds go to `namespace` unless the object names one.
/// Returns the object as the server stored it.
pub async fn apply(client: &Client, namespace: &str, obj: &Value) -> Result<Value> {
    let api_version = obj["apiVersion"].as_str().context("apiVersion")?;
    let kind = obj["kind"].as_str().context("kind")?;
    let name = obj["metadata"]["name"].as_str().context("metadata.name")?;
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or(namespace);
    let api = dynamic_api(client, api_version, kind, ns)?;
    let stored = api
        .patch(name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(obj))
        .await
        .with_context(|| format!("server-side apply of {kind} {name}"))?;
    Ok(serde_json::to_value(stored)?)
}

pub async fn get(
    client: &Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
    name: &str,
) -> Result<Value> {
    let api = dynamic_api(client, api_version, kind, namespace)?;
    Ok(serde_json::to_value(
        api.get(name)
            .await
            .with_context(|| format!("get {kind} {name}"))?,
    )?)
}

pub async fn list(
    client: &Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
) -> Result<Vec<Value>> {
    let api = dynamic_api(client, api_version, kind, namespace)?;
    let items = api
        .list(&Default::default())
        .await
        .with_context(|| format!("list {kind}"))?;
    items
        .items
        .into_iter()
        .map(|o| Ok(serde_json::to_value(o)?))
        .collect()
}

/// The `status.conditions[]` entry of `type`, if any.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// `"True"`, `"False"`, `"Unknown"`, or `None` when the condition is absent.
pub fn condition_status<'a>(obj: &'a Value, type_: &str) -> Option<&'a str> {
    condition(obj, type_)?["status"].as_str()
}

/// Polls `probe` every 200 ms until it returns `Ok(Some(_))` or `timeout` passes. The error names
/// `what` and carries the last probe result for the failure message.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match probe().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => "condition not met yet".to_owned(),
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() >= deadline {
            return Err(anyhow!(
                "timed out after {timeout:?} waiting for {what}; last: {last}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
