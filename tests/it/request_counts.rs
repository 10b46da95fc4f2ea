//! API requests per `gkq plan` and `gkq apply`, counted from the API server's audit log, for 200
//! objects (a quarter each of ConfigMaps, ClusterQueues, LocalQueues and RayJobs, as
//! `bench/plan-apply` makes them). The counts are deterministic and asserted exactly, so that a
//! change that adds a request per object fails here: a plan is one list per kind and one dry run
//! per new or changed object; an apply without review (`--auto-approve`) sends no dry runs, but
//! one list of names per kind of new objects, one list per kind of the plan (its freshness
//! check) and one write per change. The only requests that depend on timing are the ones a write
//! refused with 409 (its target moved on after the check) costs: one re-read and one retry, each
//! counted and taken out before comparing. A plan re-reads an object that moves between its list
//! and its dry run (Kueue writing a status); each run starts once Kueue has settled, so none does.
//!
//! The control plane is the test's own, started with an audit log (`GKQ_CP_AUDIT=1`), so that no
//! other test's requests are counted.

use std::collections::BTreeMap;
use std::path::Path;

use gkq::emulator::{Emulator, EmulatorConfig};
use serde_json::{Value, json};

use crate::support::cmd::gkq_async;
use crate::support::control_plane::{PrivateControlPlane, client_for};

const OBJECTS: usize = 200;
const NAMESPACE: &str = "counted";

/// The spec of `bench/gen-objects`: revision `rev` edits every object (a label on all, the
/// ConfigMaps' data, the ClusterQueues' quota).
fn write_spec(dir: &Path, rev: u32) {
    let mut text = String::from(
        "project: count-project\nlocation: us-east5-b\ncluster: {name: counted}\n\
         kueue: {install: external}\nmanifests:\n",
    );
    for i in 0..OBJECTS {
        let mut object = match i % 4 {
            0 => json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": NAMESPACE},
                "data": {"train.py": format!("print({rev})\n")}}),
            1 => json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": format!("counted-cq-{i}")},
                "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                    "flavors": [{"name": "counted-flavor", "resources": [{"name": "cpu", "nominalQuota": 10 + rev}]}]}]}}),
            2 => json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": format!("lq-{i}"), "namespace": NAMESPACE},
                "spec": {"clusterQueue": format!("counted-cq-{}", i - 1)}}),
            _ => json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": format!("rj-{i}"), "namespace": NAMESPACE},
                "spec": {"entrypoint": "python /app/train.py", "rayClusterSpec": {
                    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                        {"name": "ray-head", "image": "rayproject/ray:2.53.0-py311"}]}}}}}}),
        };
        if rev > 0 {
            object["metadata"]["labels"] = json!({"count.gkq.dev/rev": rev.to_string()});
        }
        text.push_str(&format!("  - {object}\n"));
    }
    std::fs::write(dir.join("gkq.yaml"), text).unwrap();
}

/// Requests by `verb resource` (`patch dry-run`, `patch 409`, `list selected` for a list by label
/// selector, `discovery` for GETs of /api and /apis) of every client but the control plane's
/// own (Kueue, the API server), between two marks in the audit log.
struct Audit {
    log: std::path::PathBuf,
    client: kube::Client,
    marks: usize,
    read: u64,
}

impl Audit {
    /// A request of the test's own that ends a counted stretch: a GET of a ConfigMap named
    /// `mark-N`, found in the log once everything before it is there.
    async fn mark(&mut self) -> Counts {
        self.marks += 1;
        let name = format!("gkq-count-mark-{}", self.marks);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(self.client.clone(), NAMESPACE);
        api.get_opt(&name).await.unwrap();
        loop {
            let text = std::fs::read(&self.log).unwrap();
            let text = String::from_utf8_lossy(&text[self.read as usize..]);
            let Some(end) = text.find(&format!("\"name\":\"{name}\"")) else {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let stretch = &text[..text[..end].rfind('\n').map_or(0, |i| i + 1)];
            self.read += stretch.len() as u64;
            return count(stretch);
        }
    }
}

fn count(stretch: &str) -> Counts {
    let mut counts = BTreeMap::new();
    for line in stretch.lines().filter(|l| !l.trim().is_empty()) {
        let event: Value = serde_json::from_str(line).unwrap();
        let agent = event["userAgent"].as_str().unwrap_or("");
        if agent.starts_with("kueue") || agent.starts_with("kube-apiserver") {
            continue;
        }
        let uri = event["requestURI"].as_str().unwrap_or("");
        let resource = event["objectRef"]["resource"].as_str();
        let verb = event["verb"].as_str().unwrap();
        let key = match resource {
            None => "discovery".to_string(),
            Some(resource) => {
                let mut verb = verb.to_string();
                if uri.contains("dryRun=All") {
                    verb.push_str(" dry-run");
                }
                if verb == "list" && selects(uri) {
                    verb.push_str(" selected");
                }
                if event["responseStatus"]["code"] == 409 {
                    verb.push_str(" 409");
                }
                format!("{verb} {resource}")
            }
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}

/// Whether a list's URI carries a label selector (gkq's own objects, not every object of a kind).
fn selects(uri: &str) -> bool {
    uri.split(['?', '&']).any(|param| {
        param
            .strip_prefix("labelSelector=")
            .is_some_and(|v| !v.is_empty())
    })
}

/// `gkq ARGS SPEC --target gcp --gke-endpoint URL --kubeconfig KUBECONFIG`, which must succeed.
async fn gkq(spec: &Path, url: &str, kubeconfig: &Path, args: &[&str]) {
    let out = gkq_async()
        .args(args)
        .arg(spec)
        .args(["--target", "gcp", "--gke-endpoint", url, "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "gkq {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_and_apply_request_counts_do_not_grow_per_object_beyond_one_write() {
    gkq::gke::install_tls_provider();
    let cp = PrivateControlPlane::start_audited();
    let kubeconfig = cp.kubeconfig();
    let client = client_for(&kubeconfig).await.unwrap();
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    namespaces
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    let (url, _emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let base = tempfile::tempdir().unwrap();
    std::fs::write(
        base.path().join("gkq.yaml"),
        "project: count-project\nlocation: us-east5-b\ncluster: {name: counted}\nkueue: {install: external}\n",
    )
    .unwrap();
    gkq(base.path(), &url, &kubeconfig, &["apply", "--auto-approve"]).await;
    let (rev0, rev1) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_spec(rev0.path(), 0);
    write_spec(rev1.path(), 1);

    let mut audit = Audit {
        log: cp.dir.join("logs/audit.log"),
        client,
        marks: 0,
        read: 0,
    };
    audit.mark().await;
    let mut counted = Vec::new();
    for (label, spec, args) in [
        ("plan, new", rev0.path(), &["plan"][..]),
        ("apply, new", rev0.path(), &["apply", "--auto-approve"][..]),
        ("plan, unchanged", rev0.path(), &["plan"][..]),
        ("plan, changed", rev1.path(), &["plan"][..]),
        (
            "apply, changed",
            rev1.path(),
            &["apply", "--auto-approve"][..],
        ),
    ] {
        gkq(spec, &url, &kubeconfig, args).await;
        counted.push((label, audit.mark().await));
        if args[0] == "apply" {
            settled(&audit.client).await;
            // The waiting's own lists are not the next run's.
            audit.mark().await;
        }
    }
    let each = OBJECTS / 4;
    let per_kind = |verb: &str, n: usize| -> Counts {
        KINDS.iter().map(|k| (format!("{verb} {k}"), n)).collect()
    };
    // Every plan: API discovery, one list per kind gkq may own or reads for the placement
    // prediction (Kueue's world unselected: its kinds are listed once, for both), the revision
    // ConfigMap and Kueue's Deployment (`kueue.install: external`).
    // A plan lists Kueue's world whole (what the prediction weighs) and, by gkq's labels, the
    // spec's other kinds and the ones gkq may have made (for prune).
    let plan_reads = counts(&[
        ("discovery", 15),
        ("get configmaps", 1),
        ("get deployments", 1),
        ("list admissionchecks", 1),
        ("list clusterqueues", 1),
        ("list cohorts", 1),
        ("list selected configmaps", 1),
        ("list selected jobs", 1),
        ("list selected jobsets", 1),
        ("list localqueues", 1),
        ("list namespaces", 1),
        ("list priorityclasses", 1),
        ("list provisioningrequestconfigs", 1),
        ("list selected rayjobs", 1),
        ("list resourceflavors", 1),
        ("list workloadpriorityclasses", 1),
        ("list workloads", 1),
    ]);
    // What an apply adds to its plan: the cluster's Lease (taken, read once more right before
    // the revision is recorded, so a takeover is noticed, and released),
    // the freshness check (one list of gkq's objects per kind of the plan, none per object), the
    // revision ConfigMap written, and the report of where the spec's jobs landed: it reports on
    // the spec's own jobs only, so it lists those and Kueue's Workloads; these RayJobs have no
    // queue, so neither Kueue's queues (read only when a queued job waits) nor provisioning
    // requests (only when a Workload has admission checks) nor nodes, and no API group is
    // discovered beyond the plan's (the report used to discover the nodes' and provisioning
    // requests' groups).
    let apply_adds = counts(&[
        ("create leases", 1),
        ("get leases", 3),
        ("delete leases", 1),
        // The predicted placements recorded with the revision: the stack's jobs listed once
        // more (the uids of the runs the apply made) and the revision ConfigMap read for the
        // records of earlier runs.
        ("get configmaps", 2),
        ("list selected jobs", 1),
        ("list selected jobsets", 1),
        ("list selected rayjobs", 1),
        ("list selected clusterqueues", 1),
        ("list selected configmaps", 1),
        ("list selected localqueues", 1),
        ("list selected rayjobs", 1),
        ("patch configmaps", 1),
        ("list selected jobs", 1),
        ("list selected jobsets", 1),
        ("list selected rayjobs", 1),
        ("list workloads", 1),
    ]);
    // An apply nobody reviews first (`--auto-approve`) sends no dry runs: whether a new object's
    // name is taken comes from one list of names per kind outside Kueue's world.
    let names_of_new = counts(&[("list configmaps", 1), ("list rayjobs", 1)]);
    let plan_changing_all = sum(&[&plan_reads, &per_kind("patch dry-run", each)]);
    let apply_changing_all = sum(&[&plan_reads, &apply_adds, &per_kind("patch", each)]);
    let expected = [
        ("plan, new", plan_changing_all.clone()),
        ("apply, new", sum(&[&apply_changing_all, &names_of_new])),
        ("plan, unchanged", plan_reads.clone()),
        ("plan, changed", plan_changing_all),
        // A job changed in place is dry-run even without review: only the server knows which of
        // its fields Kueue now owns (docs/kubernetes-api.md 6).
        (
            "apply, changed",
            sum(&[
                &apply_changing_all,
                &counts(&[("patch dry-run rayjobs", each)]),
            ]),
        ),
    ];
    for ((label, counted), (_, want)) in counted.iter().zip(expected) {
        assert_eq!(
            &without_retries(counted),
            &want,
            "{label}: {} requests, {counted:?}",
            counted.values().sum::<usize>()
        );
    }
}

/// Waits until Kueue has finished writing the statuses an apply set off (a new ClusterQueue's
/// conditions, a LocalQueue's flavors, a RayJob's Workload): until no object of the spec's kinds
/// changes for a second. Otherwise the next plan may list an object before Kueue's write and
/// dry-run it after, and rightly re-read it (it moved), which is a request that depends on
/// timing, not on gkq.
async fn settled(client: &kube::Client) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let kinds = [
        ("", "v1", "ConfigMap", "configmaps"),
        ("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues"),
        ("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
        ("ray.io", "v1", "RayJob", "rayjobs"),
    ];
    let versions = || async {
        let mut all = BTreeMap::new();
        for (group, version, kind, plural) in kinds {
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let api: kube::Api<DynamicObject> = if kind == "ClusterQueue" {
                kube::Api::all_with(client.clone(), &resource)
            } else {
                kube::Api::namespaced_with(client.clone(), NAMESPACE, &resource)
            };
            for object in api.list(&ListParams::default()).await.unwrap() {
                all.insert(
                    (kind, object.metadata.name.clone()),
                    object.metadata.resource_version.clone(),
                );
            }
        }
        all
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut before = versions().await;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let now = versions().await;
        if now == before {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Kueue still writing statuses two minutes after an apply"
        );
        before = now;
    }
}

/// Requests by `verb resource`.
type Counts = BTreeMap<String, usize>;

/// The kinds of the spec's objects, as the API names their resources.
const KINDS: [&str; 4] = ["clusterqueues", "configmaps", "localqueues", "rayjobs"];

fn counts(pairs: &[(&str, usize)]) -> Counts {
    let mut out = Counts::new();
    for (k, n) in pairs {
        *out.entry(k.to_string()).or_default() += n;
    }
    out
}

fn sum(all: &[&Counts]) -> Counts {
    let mut out = Counts::new();
    for counts in all {
        for (k, n) in *counts {
            *out.entry(k.clone()).or_default() += n;
        }
    }
    out
}

/// `counted` without what writes refused with 409 cost (the refused write and the re-read of
/// its target; the retry is the counted write), which depends on when Kueue writes a status.
fn without_retries(counted: &Counts) -> Counts {
    let mut out = counted.clone();
    for (key, refused) in counted {
        let Some(resource) = key
            .strip_prefix("patch 409 ")
            .or_else(|| key.strip_prefix("delete 409 "))
        else {
            continue;
        };
        out.remove(key);
        let reads = out.entry(format!("get {resource}")).or_default();
        assert!(
            *reads >= *refused,
            "each refused write is followed by a read: {counted:?}"
        );
        *reads -= refused;
    }
    out.retain(|_, n| *n > 0);
    out
}
