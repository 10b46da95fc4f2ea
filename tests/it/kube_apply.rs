//! The Kubernetes half of plan/apply against a real kube-apiserver, etcd and Kueue manager
//! (tools/controlplane.sh), with the GKE half on the in-process emulator.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use gkq::addr::ResourceAddr;
use gkq::apply::kube_adapter::KubeAdapter;
use gkq::apply::{ApplyOptions, Executor, RecordingSink};
use gkq::diff::kube::diff_object;
use gkq::emulator::{Emulator, EmulatorConfig, EmulatorHandle};
use gkq::gke::{AnonymousTokenSource, RestGke};
use gkq::kube::KubeApi;
use gkq::kube::client::RealKube;
use gkq::model::DesiredState;
use gkq::observe::kube::observe_kube;
use gkq::observe::observe_gke;
use gkq::plan::{ActionKind, Judge, Plan, PlanOptions, Preview, Step, plan_judged};
use serde_json::{Value, json};
use support::control_plane::{
    condition_status, eventually, get, kube_spec_desired, kube_spec_vars, list, test_env,
    unique_name,
};

struct Stack {
    vars: BTreeMap<String, String>,
    gke: RestGke,
    _emulator: EmulatorHandle,
    kube: RealKube,
    client: kube::Client,
    namespace: String,
}

fn desired(vars: &BTreeMap<String, String>) -> DesiredState {
    kube_spec_desired(vars)
}

async fn stack(test: &str) -> Stack {
    gkq::gke::install_tls_provider();
    let env = test_env(test).await;
    let vars = kube_spec_vars(test, &env.namespace);
    let (url, handle) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    Stack {
        vars,
        gke: RestGke::with_endpoint(&url, std::sync::Arc::new(AnonymousTokenSource)).unwrap(),
        _emulator: handle,
        kube: RealKube::new(env.client.clone()),
        client: env.client,
        namespace: env.namespace,
    }
}

impl Stack {
    fn stack_name(&self) -> String {
        self.vars["STACK"].clone()
    }

    async fn plan(&self, desired: &DesiredState, options: PlanOptions) -> Plan {
        let mut live = observe_gke(&self.gke, desired).await.unwrap();
        // As `gkq plan` does: each object decided as the server answers for it.
        let judge = (!options.destroy).then(|| Judge::new(desired, &options));
        let observed = observe_kube(
            &self.kube,
            desired,
            &self.stack_name(),
            None,
            judge.as_ref(),
            options.preview,
        )
        .await
        .unwrap();
        live.kubernetes = observed.live;
        plan_judged(desired, &live, observed.judged, &options).unwrap()
    }

    async fn apply(
        &self,
        desired: &DesiredState,
        plan: &Plan,
        force: bool,
    ) -> gkq::apply::ApplyReport {
        let sink = RecordingSink::default();
        let mut adapter = KubeAdapter::new(&self.kube, self.stack_name());
        adapter.force_conflicts = force;
        adapter.kueue = Some(desired.kueue.clone());
        adapter.timeout = Duration::from_secs(60);
        let options = ApplyOptions {
            poll: gkq::apply::PollConfig::immediate(),
            ..ApplyOptions::default()
        };
        Executor::new(&self.gke, &sink)
            .with_kube(&adapter)
            .with_options(options)
            .apply(plan)
            .await
    }
}

const KUEUE_API: &str = "kueue.x-k8s.io/v1beta2";

fn changed(plan: &Plan) -> Vec<String> {
    plan.changes()
        .map(|a| format!("{:?} {}", a.kind, a.addr))
        .collect()
}

#[tokio::test]
async fn seed_kubernetes_half_applies_then_plans_empty_then_plans_exact_edits() {
    let s = stack("kube-apply").await;
    let d = desired(&s.vars);

    let first = s.plan(&d, PlanOptions::default()).await;
    assert!(first.has_changes());
    // The control plane's Kueue runs as a process, not a Deployment: served, version unknown.
    let found = gkq::kube::install::check_external(&s.kube, &d.kueue)
        .await
        .unwrap();
    assert_eq!(found.version, None);
    assert!(
        found
            .notes
            .iter()
            .any(|n| n.contains("could not be checked")),
        "{found:?}"
    );
    let report = s.apply(&d, &first, false).await;
    assert!(report.is_success(), "{report:#?}");
    // The apply waited for Kueue to activate the DWS check before it applied the ClusterQueue,
    // so both are active the moment it returns (read once, no polling).
    let check = get(&s.client, "", KUEUE_API, "AdmissionCheck", &s.vars["CHECK"])
        .await
        .unwrap();
    assert_eq!(
        condition_status(&check, "Active"),
        Some("True"),
        "{check:#}"
    );

    // No perpetual diff: CRD defaults, Kueue's webhook defaults and finalizers, the quota
    // rewrite (1000000000 -> 1G) and Kueue's changes to the RayJobs are not drift.
    let second = s.plan(&d, PlanOptions::default()).await;
    assert!(
        !second.has_changes(),
        "second plan: {:#?}",
        changed(&second)
    );
    // And no dry run is needed to see it: for each object, what the spec sets matches and
    // nothing gkq's last apply set is left out (a defaulted key such as a port's protocol is
    // not taken for a removed list element).
    for object in d.kube_objects() {
        let Some(info) = s
            .kube
            .resource(
                object["apiVersion"].as_str().unwrap(),
                object["kind"].as_str().unwrap(),
            )
            .await
            .unwrap()
        else {
            continue;
        };
        let addr = ResourceAddr::from_object(object).unwrap();
        let namespace = gkq::kube::namespace_of(object).filter(|_| info.namespaced);
        let live = s
            .kube
            .get(&info, namespace, gkq::kube::name_of(object))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{addr} was applied"));
        let diff = diff_object(&addr, object, &live, None);
        assert!(diff.is_empty(), "{addr}: {:#?}", diff.changes);
    }

    // An edited quota is exactly one in-place update of the ClusterQueue.
    let mut vars = s.vars.clone();
    vars.insert("TPU_QUOTA".into(), "32".into());
    let edited = desired(&vars);
    let third = s.plan(&edited, PlanOptions::default()).await;
    let actions: Vec<_> = third.changes().collect();
    assert_eq!(actions.len(), 1, "{:#?}", changed(&third));
    assert_eq!(actions[0].kind, ActionKind::Update);
    assert_eq!(
        actions[0].addr.to_string(),
        format!("kueue.clusterqueue/{}", s.vars["CQ"])
    );
    assert!(
        actions[0]
            .changes
            .iter()
            .any(|c| c.path.contains("nominalQuota")),
        "{:#?}",
        actions[0].changes
    );
    assert!(s.apply(&edited, &third, false).await.is_success());
    assert!(!s.plan(&edited, PlanOptions::default()).await.has_changes());

    // A LocalQueue (and the jobs on it) removed from the spec: reported, and pruned with --prune.
    let mut without_lq = edited.clone();
    without_lq
        .kubernetes
        .retain(|o| o["kind"] != "LocalQueue" && o["kind"] != "RayJob");
    let notices = s.plan(&without_lq, PlanOptions::default()).await;
    assert!(!notices.has_changes());
    assert!(
        notices.orphans.iter().any(|o| o.kind == "LocalQueue"),
        "{:#?}",
        notices.orphans
    );
    let prune = s
        .plan(
            &without_lq,
            PlanOptions {
                prune: true,
                ..Default::default()
            },
        )
        .await;
    let deletes: Vec<String> = prune
        .changes()
        .filter(|a| a.kind == ActionKind::Delete)
        .map(|a| a.addr.to_string())
        .collect();
    assert!(
        deletes.contains(&format!("kueue.localqueue/{}/user-queue", s.namespace)),
        "{deletes:?}"
    );
    assert!(
        deletes.iter().any(|d| d.starts_with("ray.rayjob/")),
        "{deletes:?}"
    );
}

/// Server-side apply removes a field gkq set before and the spec no longer sets. The plan says so
/// (before, a comparison of only the fields the spec sets called such an object unchanged, and
/// the field stayed for ever).
#[tokio::test]
async fn a_field_the_spec_no_longer_sets_is_planned_and_applied_as_a_removal() {
    let s = stack("kube-dropped-field").await;
    let d = desired(&s.vars);
    assert!(
        s.apply(&d, &s.plan(&d, PlanOptions::default()).await, false)
            .await
            .is_success()
    );

    let mut extra = d.clone();
    for object in &mut extra.kubernetes {
        if object["kind"] == "ClusterQueue" {
            let object = std::sync::Arc::make_mut(object);
            object["metadata"]["labels"]["team"] = json!("ml");
            object["spec"]["preemption"] = json!({"reclaimWithinCohort": "Any"});
        }
    }
    let with_extra = s.plan(&extra, PlanOptions::default()).await;
    assert_eq!(changed(&with_extra).len(), 1, "{:#?}", changed(&with_extra));
    assert!(s.apply(&extra, &with_extra, false).await.is_success());
    assert!(!s.plan(&extra, PlanOptions::default()).await.has_changes());

    // Back to the spec without them: one update that removes both.
    let back = s.plan(&d, PlanOptions::default()).await;
    let actions: Vec<_> = back.changes().collect();
    assert_eq!(actions.len(), 1, "{:#?}", changed(&back));
    assert_eq!(actions[0].kind, ActionKind::Update);
    assert_eq!(
        actions[0].addr.to_string(),
        format!("kueue.clusterqueue/{}", s.vars["CQ"])
    );
    let paths: Vec<&str> = actions[0].changes.iter().map(|c| c.path.as_str()).collect();
    assert!(paths.contains(&"metadata.labels.team"), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.starts_with("spec.preemption")),
        "{paths:?}"
    );
    assert!(actions[0].diff.contains("team: ml"), "{}", actions[0].diff);
    assert!(s.apply(&d, &back, false).await.is_success());

    let cq = get(&s.client, "", KUEUE_API, "ClusterQueue", &s.vars["CQ"])
        .await
        .unwrap();
    assert!(cq["metadata"]["labels"].get("team").is_none(), "{cq:#}");
    // Kueue's default, no longer gkq's value.
    assert_eq!(
        cq["spec"]["preemption"]["reclaimWithinCohort"], "Never",
        "{cq:#}"
    );
    let after = s.plan(&d, PlanOptions::default()).await;
    assert!(!after.has_changes(), "{:#?}", changed(&after));
}

#[tokio::test]
async fn another_field_manager_is_a_conflict_naming_fields_and_manager() {
    let s = stack("kube-conflict").await;
    let d = desired(&s.vars);
    let first = s.plan(&d, PlanOptions::default()).await;
    assert!(s.apply(&d, &first, false).await.is_success());

    // Someone edits the quota with their own field manager.
    let cq = s.vars["CQ"].clone();
    let info = gkq::kube::KubeApi::resource(&s.kube, "kueue.x-k8s.io/v1beta2", "ClusterQueue")
        .await
        .unwrap()
        .unwrap();
    let theirs = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": cq},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory", "google.com/tpu"], "flavors": [
            {"name": s.vars["CPU"], "resources": [{"name": "cpu", "nominalQuota": 99}, {"name": "memory", "nominalQuota": "20Gi"}, {"name": "google.com/tpu", "nominalQuota": 0}]},
            {"name": s.vars["ONDEMAND"], "resources": [{"name": "cpu", "nominalQuota": 40}, {"name": "memory", "nominalQuota": "75Gi"}, {"name": "google.com/tpu", "nominalQuota": 16}]},
            {"name": s.vars["DWS"], "resources": [{"name": "cpu", "nominalQuota": 1000000000}, {"name": "memory", "nominalQuota": "1000000000Gi"}, {"name": "google.com/tpu", "nominalQuota": 1000000000}]}]}]}
    });
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        s.kube.client().clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "ClusterQueue"),
            &info.plural,
        ),
    );
    api.patch(
        &cq,
        &kube::api::PatchParams::apply("kubectl-edit").force(),
        &kube::api::Patch::Apply(&theirs),
    )
    .await
    .unwrap();

    let drift = s.plan(&d, PlanOptions::default()).await;
    let actions: Vec<_> = drift.changes().collect();
    assert_eq!(actions.len(), 1, "{:#?}", changed(&drift));
    // The plan's dry run does not force: the conflict is in the plan, with the field, its
    // manager and what forcing would do, and apply refuses the plan before writing anything.
    let [conflict] = actions[0].conflicts.as_slice() else {
        panic!("{:#?}", actions[0])
    };
    assert_eq!(conflict.manager, "kubectl-edit");
    assert!(conflict.field.contains("resourceGroups"), "{conflict:?}");
    assert_eq!(conflict.resolution, gkq::plan::conflicts::Resolution::Force);
    assert!(
        conflict.forcing.contains("nominalQuota: 99 -> "),
        "{conflict:?}"
    );
    let refusal = gkq::ops::apply::conflict_refusal(&drift).expect("refused without force");
    assert!(refusal.contains("--force-conflicts"), "{refusal}");
    // Applied anyway (the executor alone, as a write that meets a conflict after the plan): the
    // write fails and names the fields and manager.
    let report = s.apply(&d, &drift, false).await;
    assert!(!report.is_success());
    let (_, error) = report.failures().next().unwrap();
    let text = format!("{error} {}", error.hint().unwrap_or_default());
    assert!(text.contains("kubectl-edit"), "{text}");
    assert!(text.contains("resourceGroups"), "{text}");
    assert!(text.contains("--force-conflicts"), "{text}");

    // With --force-conflicts gkq takes the fields back.
    let again = s.plan(&d, PlanOptions::default()).await;
    assert!(s.apply(&d, &again, true).await.is_success());
    assert!(!s.plan(&d, PlanOptions::default()).await.has_changes());
}

/// The API facts apply's conditional writes rest on (docs/kubernetes-api.md 1 and 2), on the
/// real kube-apiserver.
#[tokio::test]
async fn writes_are_conditional_as_the_api_server_documents() {
    use gkq::kube::{ApplyOptions as Opts, Deletion, KubeApi, KubeError, Version};
    let s = stack("kube-conditional").await;
    let info = s.kube.resource("v1", "ConfigMap").await.unwrap().unwrap();
    let cm = |name: &str, value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": s.namespace}, "data": {"k": value}})
    };
    let write = Opts::default();
    // A create ignores the resourceVersion it carries.
    let mut made_up = cm("c", "1");
    made_up["metadata"]["resourceVersion"] = json!("1");
    let created = s.kube.apply(&info, &made_up, write).await.unwrap();
    let at = Version::of(&created).unwrap();
    // An update at another version is refused (a dry run too); at the stored one it goes.
    for dry_run in [true, false] {
        let refused = s
            .kube
            .apply(
                &info,
                &made_up,
                Opts {
                    dry_run,
                    force: false,
                },
            )
            .await
            .unwrap_err();
        assert!(matches!(refused, KubeError::Changed { .. }), "{refused}");
    }
    let updated = s
        .kube
        .apply(&info, &at.condition(&cm("c", "2")), write)
        .await
        .unwrap();
    assert_eq!(updated["data"]["k"], "2");
    // Deletes: refused at the old version and for another uid, done at the current one.
    let ns = Some(s.namespace.as_str());
    let refused = s.kube.delete(&info, ns, "c", Some(&at)).await.unwrap_err();
    assert!(matches!(refused, KubeError::Changed { .. }), "{refused}");
    let now = Version::of(&updated).unwrap();
    let other = Version {
        uid: "00000000-0000-0000-0000-000000000000".into(),
        ..now.clone()
    };
    let refused = s
        .kube
        .delete(&info, ns, "c", Some(&other))
        .await
        .unwrap_err();
    assert!(matches!(refused, KubeError::Changed { .. }), "{refused}");
    assert_eq!(
        s.kube.delete(&info, ns, "c", Some(&now)).await.unwrap(),
        Deletion::Gone
    );
    assert_eq!(
        s.kube.delete(&info, ns, "c", Some(&now)).await.unwrap(),
        Deletion::Absent
    );
    // A finalizer holds the object: the delete answers with it, and it stays until released.
    let mut held = cm("held", "1");
    held["metadata"]["finalizers"] = json!(["gkq.dev/test-hold"]);
    s.kube.apply(&info, &held, write).await.unwrap();
    assert_eq!(
        s.kube.delete(&info, ns, "held", None).await.unwrap(),
        Deletion::Pending
    );
    let mut released = cm("held", "1");
    released["metadata"]["finalizers"] = json!([]);
    s.kube.apply(&info, &released, write).await.unwrap();
    assert!(s.kube.get(&info, ns, "held").await.unwrap().is_none());
}

#[tokio::test]
async fn seed_jobs_are_admitted_by_kueue_on_demand_then_dws() {
    let s = stack("kube-admit").await;
    let d = desired(&s.vars);
    let first = s.plan(&d, PlanOptions::default()).await;
    assert!(s.apply(&d, &first, false).await.is_success());

    let client = s.kube.client().clone();
    let ns = s.namespace.clone();
    let workloads = eventually(
        "two Workloads with quota reserved",
        Duration::from_secs(90),
        || {
            let client = client.clone();
            let ns = ns.clone();
            async move {
                let wls = list(&client, &ns, "kueue.x-k8s.io/v1beta2", "Workload").await?;
                let reserved: Vec<Value> = wls
                    .into_iter()
                    .filter(|w| condition_status(w, "QuotaReserved") == Some("True"))
                    .collect();
                Ok((reserved.len() == 2).then_some(reserved))
            }
        },
    )
    .await
    .unwrap();
    let flavor_of = |job: &str, podset: &str| -> String {
        let w = workloads
            .iter()
            .find(|w| {
                w.pointer("/metadata/ownerReferences/0/name")
                    .and_then(Value::as_str)
                    == Some(job)
            })
            .unwrap_or_else(|| panic!("no workload for {job}"));
        let a = w
            .pointer("/status/admission/podSetAssignments")
            .unwrap()
            .as_array()
            .unwrap();
        let ps = a.iter().find(|p| p["name"] == podset).unwrap();
        ps["flavors"]["cpu"].as_str().unwrap().to_string()
    };
    assert_eq!(
        flavor_of("rayjob-tpu-v6e-dws-1", "tpu-group"),
        s.vars["ONDEMAND"]
    );
    assert_eq!(
        flavor_of("rayjob-tpu-v6e-dws-2", "tpu-group"),
        s.vars["DWS"]
    );
    assert_eq!(flavor_of("rayjob-tpu-v6e-dws-1", "head"), s.vars["CPU"]);
    assert_eq!(
        flavor_of("rayjob-tpu-v6e-dws-2", "submitter"),
        s.vars["CPU"]
    );
    let job2 = get(&client, &ns, "ray.io/v1", "RayJob", "rayjob-tpu-v6e-dws-2")
        .await
        .unwrap();
    assert_eq!(
        job2.pointer("/spec/suspend"),
        Some(&json!(true)),
        "job 2 waits for its ProvisioningRequest"
    );

    // Kueue's changes to the jobs (suspend, admission) are not drift: the plan stays empty.
    let after = s.plan(&d, PlanOptions::default()).await;
    assert!(!after.has_changes(), "{:#?}", changed(&after));
}

/// Waits (at most 90 s) until Kueue has admitted a Workload in `namespace`.
async fn until_a_workload_is_admitted(client: &kube::Client, namespace: &str) {
    eventually("a Workload admitted", Duration::from_secs(90), || {
        let client = client.clone();
        let namespace = namespace.to_string();
        async move {
            let wls = list(&client, &namespace, KUEUE_API, "Workload").await?;
            Ok(wls
                .iter()
                .any(|w| condition_status(w, "Admitted") == Some("True"))
                .then_some(()))
        }
    })
    .await
    .unwrap();
}

/// By hand, as README shows: `gkq plan/apply --kubeconfig ... --gke-endpoint ...`. Removing the
/// ClusterQueue while job 1 runs on it is refused, naming the job; `--detailed-exitcode` says 3.
// Multi-threaded: the in-process emulator must keep serving while the test waits for `gkq`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_refuses_to_delete_a_queue_with_admitted_jobs() {
    let s = stack("kube-guard").await;
    let (url, _emulator) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let kubeconfig = support::control_plane::control_plane().kubeconfig.clone();
    let ws = support::Workspace::kube_spec();
    let gkq = |args: &[&str]| {
        let mut cmd = support::gkq();
        cmd.args(args)
            .arg(ws.spec_dir())
            .args(["--target", "gcp", "--gke-endpoint", &url])
            .arg("--kubeconfig")
            .arg(&kubeconfig);
        for (k, v) in &s.vars {
            cmd.arg("--var").arg(format!("{k}={v}"));
        }
        cmd.output().unwrap()
    };
    let out = gkq(&["apply", "--auto-approve"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gkq(&["plan", "--detailed-exitcode"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let client = s.kube.client().clone();
    let ns = s.namespace.clone();
    until_a_workload_is_admitted(&client, &ns).await;

    // `gkq status` reads where the real Kueue put each job, beside gkq's prediction.
    let mut last = String::new();
    let mut reported = None;
    for _ in 0..60 {
        let out = gkq(&["status", "-o", "json"]);
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Ok(status) = serde_json::from_slice::<Value>(&out.stdout)
            && status["jobs"].as_array().is_some_and(|jobs| {
                jobs.len() == 2
                    && jobs
                        .iter()
                        .all(|j| j["observed"]["clusterQueue"].is_string())
            })
        {
            reported = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let status = reported.unwrap_or_else(|| panic!("status never showed both jobs placed: {last}"));
    assert!(status["simulated"].is_null(), "{status:#}");
    let tpu_flavor = |job: usize| {
        status["jobs"][job]["observed"]["podsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "tpu-group")
            .unwrap()["flavor"]
            .clone()
    };
    assert_eq!(tpu_flavor(0), json!(s.vars["ONDEMAND"]), "{status:#}");
    assert_eq!(tpu_flavor(1), json!(s.vars["DWS"]), "{status:#}");
    assert_eq!(status["jobs"][0]["agrees"], true, "{status:#}");
    assert_eq!(status["jobs"][1]["agrees"], true, "{status:#}");
    assert_eq!(
        status["jobs"][1]["observed"]["state"], "waiting-for-admission-checks",
        "{status:#}"
    );

    // The spec without its queues and jobs.
    let text = std::fs::read_to_string(ws.spec_file()).unwrap();
    let cut = text.find("  clusterQueues:").unwrap();
    std::fs::write(ws.spec_file(), &text[..cut]).unwrap();

    let out = gkq(&["plan", "--prune", "--detailed-exitcode"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("stops running work"), "{stdout}");
    assert!(
        stdout.contains("rayjob-tpu-v6e-dws-1 (admitted)"),
        "{stdout}"
    );

    let out = gkq(&["apply", "--prune", "--auto-approve"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("refusing to apply"), "{stderr}");
    assert!(
        stderr.contains(&format!("kueue.clusterqueue/{}", s.vars["CQ"])),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-disruption"), "{stderr}");
    // nothing was changed
    let cq = get(
        &client,
        "",
        "kueue.x-k8s.io/v1beta2",
        "ClusterQueue",
        &s.vars["CQ"],
    )
    .await;
    assert!(cq.is_ok(), "the ClusterQueue must still exist");
}

/// An AdmissionCheck of Kueue's ProvisioningRequest controller: apply waits until Kueue marks it
/// Active, and one that never becomes Active fails the apply with Kueue's own reason.
#[tokio::test]
async fn apply_waits_for_admission_checks_to_become_active() {
    use gkq::apply::KubeApplier;
    let s = stack("check-active").await;
    let check = unique_name("chk");
    let config = unique_name("prc");
    let admission_check = json!({
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": check},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": config,
            },
        },
    });

    // Its ProvisioningRequestConfig does not exist: Kueue keeps it inactive.
    let mut impatient = KubeAdapter::new(&s.kube, s.stack_name());
    impatient.timeout = Duration::from_secs(3);
    impatient.poll = Duration::from_millis(200);
    let error = impatient.apply(&admission_check, None).await.unwrap_err();
    assert!(
        error.message.contains(&format!(
            "waiting for AdmissionCheck {check} to become Active"
        )),
        "{error:?}"
    );
    let hint = error.hint.unwrap_or_default();
    assert!(hint.contains("BadParametersRef"), "{hint}");
    assert!(hint.contains("ProvisioningRequestConfig"), "{hint}");

    // The config appears while a patient apply waits: the apply returns once Kueue activates it.
    let mut patient = KubeAdapter::new(&s.kube, s.stack_name());
    patient.timeout = Duration::from_secs(60);
    patient.poll = Duration::from_millis(200);
    let waiting = patient.apply(&admission_check, None);
    let late_config = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        patient
            .apply(
                &json!({
                "apiVersion": KUEUE_API,
                "kind": "ProvisioningRequestConfig",
                "metadata": {"name": config},
                "spec": {"provisioningClassName": "queued-provisioning.gke.io"},
                }),
                None,
            )
            .await
    };
    let started = std::time::Instant::now();
    let (waited, created) = tokio::join!(waiting, late_config);
    created.unwrap();
    waited.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "returned before the config existed: {:?}",
        started.elapsed()
    );
    let live = get(&s.client, "", KUEUE_API, "AdmissionCheck", &check)
        .await
        .unwrap();
    assert_eq!(condition_status(&live, "Active"), Some("True"), "{live:#}");
}

/// An apply nobody reviews first plans from the lists alone ([`Preview::Lists`]): no dry run,
/// new objects created from the spec, changed ones compared as listed. It converges to exactly
/// what a plan with dry runs calls unchanged, and a new object's name taken by an object gkq
/// does not own is still found (from the list of names) and refused, not taken over.
#[tokio::test]
async fn a_plan_from_the_lists_alone_converges_and_never_takes_over_an_unowned_object() {
    let s = stack("kube-lists").await;
    let d = desired(&s.vars);
    let lists = || PlanOptions {
        preview: Preview::Lists,
        ..Default::default()
    };

    // Someone else's ConfigMap already has the name of the spec's script ConfigMap.
    let script = d
        .kube_objects()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("the seed spec ships its script in a ConfigMap")
        .clone();
    let script_addr = ResourceAddr::from_object(&script).unwrap();
    let theirs = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": script["metadata"]["name"], "namespace": script["metadata"]["namespace"]},
        "data": {"theirs": "yes"}
    });
    let config_maps: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        s.client.clone(),
        script["metadata"]["namespace"].as_str().unwrap(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let name = script["metadata"]["name"].as_str().unwrap();
    config_maps
        .patch(
            name,
            &kube::api::PatchParams::apply("someone-else"),
            &kube::api::Patch::Apply(&theirs),
        )
        .await
        .unwrap();

    let first = s.plan(&d, lists()).await;
    let script_action = first
        .actions
        .iter()
        .find(|a| a.addr == script_addr)
        .unwrap();
    assert!(
        script_action.blocked.is_some(),
        "an unowned object is not taken over: {script_action:#?}"
    );
    let creates: Vec<_> = first
        .changes()
        .filter(|a| a.kind == ActionKind::Create)
        .filter(|a| matches!(a.steps.first(), Some(Step::KubeApply { .. })))
        .collect();
    assert!(!creates.is_empty(), "{:#?}", changed(&first));
    for create in &creates {
        assert!(
            create.reason.contains("server defaults known after apply"),
            "a plan without dry runs says what it does not know: {create:#?}"
        );
    }

    // Without the other object, the lists-only plan applies and converges: a plan with dry
    // runs finds nothing left to change.
    config_maps.delete(name, &Default::default()).await.unwrap();
    let second = s.plan(&d, lists()).await;
    assert_eq!(second.summary.blocked, 0, "{:#?}", changed(&second));
    let report = s.apply(&d, &second, false).await;
    assert!(report.is_success(), "{report:#?}");
    let checked = s.plan(&d, PlanOptions::default()).await;
    assert!(!checked.has_changes(), "{:#?}", changed(&checked));
    assert!(!s.plan(&d, lists()).await.has_changes());

    // An edited quota, planned from the lists: the one update, applied as planned.
    let mut vars = s.vars.clone();
    vars.insert("TPU_QUOTA".into(), "32".into());
    let edited = desired(&vars);
    let third = s.plan(&edited, lists()).await;
    assert_eq!(
        changed(&third),
        vec![format!("Update kueue.clusterqueue/{}", s.vars["CQ"])]
    );
    assert!(s.apply(&edited, &third, false).await.is_success());
    let after = s.plan(&edited, PlanOptions::default()).await;
    assert!(!after.has_changes(), "{:#?}", changed(&after));
}

/// A ClusterQueue whose admitted jobs still run is held by Kueue's finalizer until they
/// finish: the delete says at once which jobs it waits for, instead of waiting for them.
#[tokio::test]
async fn a_cluster_queue_delete_held_by_admitted_jobs_names_them_at_once() {
    use gkq::apply::KubeApplier;
    use support::kueue::{batch_job, cluster_queue, group, local_queue, pool_flavor};
    let s = stack("cq-held").await;
    let ns = s.namespace.as_str();
    let (flavor, cq, job) = (
        unique_name("held-f"),
        unique_name("held-cq"),
        unique_name("held-job"),
    );
    let mut adapter = KubeAdapter::new(&s.kube, s.stack_name());
    adapter.timeout = Duration::from_secs(120);
    adapter.poll = Duration::from_millis(200);
    for object in [
        pool_flavor(&flavor, "pool"),
        cluster_queue(
            &cq,
            vec![group(&["cpu"], &[(&flavor, &[("cpu", "4")])])],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
        batch_job(ns, &job, "lq", 1, &[("cpu", "1")]),
    ] {
        adapter.apply(&object, None).await.unwrap();
    }
    until_a_workload_is_admitted(&s.client, ns).await;

    // A delete that waited for the finalizer would time out with another message.
    adapter.timeout = Duration::from_secs(3);
    let error = adapter
        .delete(KUEUE_API, "ClusterQueue", None, &cq, None)
        .await
        .unwrap_err();
    assert!(
        error
            .message
            .contains(&format!("ClusterQueue {cq} is being deleted")),
        "{error:?}"
    );
    assert!(
        error.message.contains(&format!("Job {ns}/{job}")),
        "{error:?}"
    );
    assert!(
        error
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("once those jobs finish"),
        "{error:?}"
    );
    // The deletion stands: Kueue's finalizer keeps the queue while the job runs.
    let held = get(&s.client, "", KUEUE_API, "ClusterQueue", &cq)
        .await
        .unwrap();
    assert!(
        held["metadata"]["deletionTimestamp"].is_string(),
        "{held:#}"
    );
}

/// A RayJob whose Workload is owned by the RayCluster its status names (the one rule,
/// `placement::job_workload`, by which the plan counts that quota as released): Kueue's decision
/// on the RayJob is read from that Workload, and deleting the RayJob waits until the RayCluster's
/// Workload no longer holds quota, not only for Workloads the RayJob owns itself (it owns none).
/// No KubeRay controller or garbage collector runs here, so the test removes the RayCluster, as
/// KubeRay does after the RayJob is gone, two seconds into the wait.
#[tokio::test]
async fn a_rayjob_delete_waits_for_its_ray_clusters_workload_to_release_its_quota() {
    use gkq::apply::KubeApplier;
    use support::kueue::{QUEUE_LABEL, cluster_queue, group, local_queue, pool_flavor};
    let s = stack("ray-release").await;
    let ns = s.namespace.as_str();
    let (flavor, cq, job, cluster) = (
        unique_name("rr-f"),
        unique_name("rr-cq"),
        unique_name("rr-job"),
        unique_name("rr-cluster"),
    );
    let mut adapter = KubeAdapter::new(&s.kube, s.stack_name());
    adapter.timeout = Duration::from_secs(60);
    adapter.poll = Duration::from_millis(200);
    adapter.submit_wait = Duration::from_secs(60);
    let pod = |name: &str| {
        json!({"spec": {"containers": [{"name": name, "image": "rayproject/ray:2.53.0",
            "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}})
    };
    for object in [
        pool_flavor(&flavor, "pool"),
        cluster_queue(
            &cq,
            vec![group(&["cpu"], &[(&flavor, &[("cpu", "4")])])],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
        // The RayCluster Kueue manages (its own queue label): its Workload is owned by it.
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"namespace": ns, "name": cluster, "labels": {QUEUE_LABEL: "lq"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head")},
                "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 1,
                    "maxReplicas": 1, "rayStartParams": {}, "template": pod("ray-worker")}]}}),
        // The RayJob running on it: no Workload of its own.
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"namespace": ns, "name": job},
            "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": true,
                "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head")}}}}),
    ] {
        adapter.apply(&object, None).await.unwrap();
    }
    let rayjobs =
        support::control_plane::dynamic_api(&s.client, "ray.io/v1", "RayJob", ns).unwrap();
    rayjobs
        .patch_status(
            &job,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"rayClusterName": cluster}})),
        )
        .await
        .unwrap();
    until_a_workload_is_admitted(&s.client, ns).await;
    let workloads = list(&s.client, ns, KUEUE_API, "Workload").await.unwrap();
    assert_eq!(workloads.len(), 1, "{workloads:#?}");
    assert_eq!(
        workloads[0]["metadata"]["ownerReferences"][0]["kind"], "RayCluster",
        "{workloads:#?}"
    );

    let live = get(&s.client, ns, "ray.io/v1", "RayJob", &job)
        .await
        .unwrap();
    assert_eq!(
        adapter.kueue_decided(&live).await.unwrap(),
        Some(true),
        "Kueue's decision on the RayJob is its RayCluster's Workload's"
    );

    let version = gkq::kube::Version::of(&live).unwrap();
    let clusters =
        support::control_plane::dynamic_api(&s.client, "ray.io/v1", "RayCluster", ns).unwrap();
    let kuberay_removes_the_cluster = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        clusters
            .delete(&cluster, &Default::default())
            .await
            .unwrap();
    };
    let started = std::time::Instant::now();
    let (deleted, ()) = tokio::join!(
        adapter.delete("ray.io/v1", "RayJob", Some(ns), &job, Some(&version)),
        kuberay_removes_the_cluster
    );
    deleted.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2),
        "the delete returned while the RayCluster's Workload still held quota: {waited:?}"
    );
    assert!(waited < Duration::from_secs(60), "{waited:?}");
    let workloads = list(&s.client, ns, KUEUE_API, "Workload").await.unwrap();
    assert!(
        !workloads.iter().any(gkq::placement::held::holds_quota),
        "{workloads:#?}"
    );
}

/// The wait for Kueue's decision on a job follows Kueue's Workloads with a watch opened before
/// the job is created (`KubeApplier::follow_decisions`): Kueue's decision on another job does
/// not wake it, Kueue's decision on this one does (nothing Kueue writes after the watch opened
/// is missed), and the decision read then is Kueue's.
#[tokio::test]
async fn a_watch_opened_before_a_jobs_create_wakes_on_kueues_decision_on_it() {
    use futures::{FutureExt, StreamExt};
    use gkq::apply::KubeApplier;
    use support::kueue::{batch_job, cluster_queue, group, local_queue, pool_flavor};
    let s = stack("decision-watch").await;
    let ns = s.namespace.as_str();
    let (flavor, cq) = (unique_name("dw-f"), unique_name("dw-cq"));
    let mut adapter = KubeAdapter::new(&s.kube, s.stack_name());
    adapter.timeout = Duration::from_secs(60);
    for object in [
        pool_flavor(&flavor, "pool"),
        cluster_queue(
            &cq,
            vec![group(&["cpu"], &[(&flavor, &[("cpu", "4")])])],
            json!({}),
        ),
        local_queue(ns, "lq", &cq),
    ] {
        adapter.apply(&object, None).await.unwrap();
    }
    let other = batch_job(ns, &unique_name("dw-other"), "lq", 1, &[("cpu", "1")]);
    let job = batch_job(ns, &unique_name("dw-job"), "lq", 1, &[("cpu", "1")]);

    let mut wakes = adapter
        .follow_decisions(&job)
        .await
        .expect("the API server offers watches");
    adapter.apply(&other, None).await.unwrap();
    until_a_workload_is_admitted(&s.client, ns).await;
    assert!(
        wakes.next().now_or_never().is_none(),
        "Kueue's decision on another job woke the wait"
    );

    adapter.apply(&job, None).await.unwrap();
    tokio::time::timeout(Duration::from_secs(90), wakes.next())
        .await
        .expect("Kueue's decision on the job woke the wait")
        .expect("the watch is still open");
    assert_eq!(adapter.kueue_decided(&job).await.unwrap(), Some(true));
}
