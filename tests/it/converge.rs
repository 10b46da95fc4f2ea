//! `ops::converge::apply`, the one apply sequence, called as a library with front ends of the
//! tests' own: on the local target (in-process GKE emulator and simulated Kubernetes) and, for
//! the cluster's Lease, on the test control plane. A lease lost before the record records
//! nothing; a plan that stops running work is refused without consent; an interrupted apply
//! records nothing; a saved plan that is not the plan made now is refused; the local target's
//! state is written back while its lock is still held.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use gkq::apply::{ApplyEvent, Interrupt, Sink};
use gkq::ops::apply::Consent;
use gkq::ops::converge::{Applied, ApplyChoices, ApplyFront, PlanSource, Ready, SavedPlan, apply};
use gkq::ops::load::{SpecSource, load_valid};
use gkq::ops::saved::{SpecCheck, check_spec};
use gkq::ops::session::TargetOptions;
use gkq::plan::{Plan, PlanOptions};
use gkq::spec::types::Target;

use crate::support::Workspace;
use crate::support::control_plane::{kube_spec_vars, test_env};

/// A front that approves everything and runs `on_first_event` at the executor's first event.
struct TestFront {
    consent: Consent,
    on_first_event: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    shown: Mutex<Vec<String>>,
}

impl TestFront {
    fn new(consent: Consent) -> Self {
        TestFront {
            consent,
            on_first_event: Mutex::new(None),
            shown: Mutex::new(Vec::new()),
        }
    }

    fn on_first_event(self, f: impl FnOnce() + Send + 'static) -> Self {
        *self.on_first_event.lock().unwrap() = Some(Box::new(f));
        self
    }
}

impl Sink for TestFront {
    fn emit(&self, _event: &ApplyEvent) {
        if let Some(f) = self.on_first_event.lock().unwrap().take() {
            f();
        }
    }
}

#[async_trait::async_trait(?Send)]
impl ApplyFront for TestFront {
    async fn planned(&self, ready: &Ready<'_>) -> anyhow::Result<()> {
        self.shown
            .lock()
            .unwrap()
            .push(ready.plan().summary.to_string());
        Ok(())
    }
    fn consent(&self, _plan: &Plan) -> Consent {
        self.consent
    }
    async fn approve(&self, _plan: &Plan) -> anyhow::Result<bool> {
        Ok(true)
    }
    fn sink(&self) -> &dyn Sink {
        self
    }
}

fn choices() -> ApplyChoices {
    ApplyChoices {
        lock_timeout: Duration::from_secs(30),
        follow_jobs: false,
        record_unchanged: true,
        interrupt: Interrupt::new(),
        lock_holder: None,
        submit_wait: gkq::ops::DEFAULT_SUBMIT_WAIT,
    }
}

fn local_target(state: &Path) -> TargetOptions {
    TargetOptions {
        target: Some(Target::Local),
        state_dir: Some(state.to_path_buf()),
        ..TargetOptions::default()
    }
}

fn source_of(ws: &Workspace) -> SpecSource {
    SpecSource {
        spec: ws.spec_dir(),
        ..SpecSource::default()
    }
}

/// Converges the spec `source` names with `front`.
async fn converge_spec(
    source: &SpecSource,
    target: &TargetOptions,
    opts: PlanOptions,
    choices: &ApplyChoices,
    front: &TestFront,
) -> Applied {
    let (loaded, desired) = load_valid(source).valid.expect("a valid spec");
    let plan_source = PlanSource::Spec {
        spec: source,
        loaded,
        desired,
        opts,
    };
    match apply(plan_source, target, choices, front).await {
        Ok(applied) => applied,
        Err(e) => panic!("converge failed: {e:#}"),
    }
}

fn executed(applied: Applied) -> (gkq::apply::ApplyReport, bool, bool) {
    match applied {
        Applied::Executed {
            report,
            lock_lost,
            recorded,
            ..
        } => (report.expect("verified"), lock_lost, recorded),
        Applied::NoChanges => panic!("no changes"),
        Applied::Refused(why) => panic!("refused: {why}"),
        Applied::Cancelled => panic!("cancelled"),
    }
}

/// The local target's Kubernetes state file of the example's cluster.
fn kubernetes_state(state: &Path) -> PathBuf {
    state.join("clusters/my-project/us-east5-b/tpu-cluster/kubernetes.json")
}

fn recorded_revision_in_local_state(state: &Path) -> bool {
    std::fs::read_to_string(kubernetes_state(state))
        .is_ok_and(|text| text.contains("gkq-revision-tpu-cluster"))
}

#[tokio::test]
async fn the_local_state_is_written_back_while_its_lock_is_held() {
    let ws = Workspace::example();
    let state = tempfile::tempdir().unwrap();
    let front = TestFront::new(Consent::default());
    // Reading where the jobs landed, after the apply, runs the simulation on: more to write.
    let following = ApplyChoices {
        follow_jobs: true,
        ..choices()
    };
    let (report, lock_lost, recorded) = executed(
        converge_spec(
            &source_of(&ws),
            &local_target(state.path()),
            PlanOptions::default(),
            &following,
            &front,
        )
        .await,
    );
    assert!(report.is_success());
    assert!(!lock_lost && recorded);
    assert!(recorded_revision_in_local_state(state.path()));
    // Releasing the lock truncates the lock file: the state was written before that.
    let written = std::fs::metadata(kubernetes_state(state.path()))
        .unwrap()
        .modified()
        .unwrap();
    let released = std::fs::metadata(state.path().join("apply.lock"))
        .unwrap()
        .modified()
        .unwrap();
    assert!(
        written <= released,
        "the local state was written {:?} after its lock was released",
        written.duration_since(released).unwrap_or_default()
    );
    // And the next plan, made from what was written, has nothing to do.
    let again = converge_spec(
        &source_of(&ws),
        &local_target(state.path()),
        PlanOptions::default(),
        &choices(),
        &TestFront::new(Consent::default()),
    )
    .await;
    assert!(matches!(again, Applied::NoChanges));
}

#[tokio::test]
async fn an_interrupted_apply_records_no_revision() {
    let ws = Workspace::example();
    let state = tempfile::tempdir().unwrap();
    let choices = choices();
    let interrupt = choices.interrupt.clone();
    let front = TestFront::new(Consent::default()).on_first_event(move || interrupt.trigger());
    let (report, _, recorded) = executed(
        converge_spec(
            &source_of(&ws),
            &local_target(state.path()),
            PlanOptions::default(),
            &choices,
            &front,
        )
        .await,
    );
    assert!(report.interrupted(), "{report:?}");
    assert!(!recorded);
    assert!(!recorded_revision_in_local_state(state.path()));
}

#[tokio::test]
async fn a_plan_that_stops_running_work_is_refused_without_consent() {
    let ws = Workspace::example();
    let state = tempfile::tempdir().unwrap();
    let target = local_target(state.path());
    let (report, ..) = executed(
        converge_spec(
            &source_of(&ws),
            &target,
            PlanOptions::default(),
            &choices(),
            &TestFront::new(Consent::default()),
        )
        .await,
    );
    assert!(report.is_success());
    // A new script replaces the admitted RayJobs: their runs stop.
    let script = ws.spec_dir().join("train.py");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, format!("{text}\n# changed\n")).unwrap();
    let refused = converge_spec(
        &source_of(&ws),
        &target,
        PlanOptions::default(),
        &choices(),
        &TestFront::new(Consent::default()),
    )
    .await;
    let Applied::Refused(why) = refused else {
        panic!("not refused")
    };
    assert!(why.contains("stops running work"), "{why}");
    assert!(why.contains("rayjob-tpu-v6e-dws-1"), "{why}");
    let after = std::fs::read_to_string(kubernetes_state(state.path())).unwrap();
    assert!(!after.contains("# changed"), "the new script was applied");
}

#[tokio::test]
async fn a_saved_plan_that_is_not_the_plan_made_now_is_refused() {
    let ws = Workspace::example();
    let state = tempfile::tempdir().unwrap();
    let target = local_target(state.path());
    let source = source_of(&ws);
    // The plan of an empty world, saved as `gkq plan --out` saves it.
    let plan_file = state.path().join("plan.json");
    let out = crate::support::gkq()
        .arg("plan")
        .arg(ws.spec_dir())
        .args(["--target", "local", "--state-dir"])
        .arg(state.path())
        .arg("--out")
        .arg(&plan_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        crate::support::process::explain(&out)
    );
    // Live state moves: the same spec is applied meanwhile.
    let (report, ..) = executed(
        converge_spec(
            &source,
            &target,
            PlanOptions::default(),
            &choices(),
            &TestFront::new(Consent::default()),
        )
        .await,
    );
    assert!(report.is_success());
    let key = gkq::ops::plan::plan_key();
    let plan = gkq::ops::saved::read(&plan_file, key.as_deref()).unwrap();
    let provenance = plan.provenance.clone().unwrap();
    let spec_source = SpecSource::for_saved_plan(&provenance.spec, &source);
    let spec = check_spec(&spec_source, &provenance).unwrap();
    assert!(matches!(spec, SpecCheck::Unchanged(_)));
    let front = TestFront::new(Consent::default());
    let saved = SavedPlan {
        file: &plan_file,
        plan: &plan,
        provenance: &provenance,
        source: &spec_source,
        spec,
        state_dir: state.path().to_path_buf(),
    };
    let applied = apply(PlanSource::Saved(saved), &target, &choices(), &front)
        .await
        .unwrap();
    let Applied::Refused(why) = applied else {
        panic!("not refused")
    };
    assert!(
        why.starts_with(&format!(
            "{} is not the plan gkq makes now",
            plan_file.display()
        )),
        "{why}"
    );
    assert_eq!(
        front.shown.lock().unwrap().len(),
        0,
        "a refused saved plan is not shown"
    );
}

/// Takes the cluster's Lease over as another applier would, from a thread of its own (the sink
/// that calls this is synchronous).
fn take_over_lease(kubeconfig: PathBuf, name: String) {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            use k8s_openapi::api::coordination::v1::Lease;
            let client = crate::support::control_plane::client_for(&kubeconfig)
                .await
                .unwrap();
            let leases: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
            let mut lease = leases.get(&name).await.unwrap();
            lease.spec.as_mut().unwrap().holder_identity = Some("another-applier".into());
            leases
                .replace(&name, &Default::default(), &lease)
                .await
                .unwrap();
        });
    })
    .join()
    .unwrap();
}

#[tokio::test]
async fn a_lease_taken_over_during_the_apply_records_no_revision() {
    let env = test_env("converge-lease").await;
    let vars = kube_spec_vars("converge-lease", &env.namespace);
    let ws = Workspace::kube_spec();
    let state = tempfile::tempdir().unwrap();
    let kubeconfig = env.control_plane.kubeconfig.clone();
    let target = TargetOptions {
        kubeconfig: Some(kubeconfig.clone()),
        ..local_target(state.path())
    };
    let source = SpecSource {
        vars: vars.clone().into_iter().collect(),
        ..source_of(&ws)
    };
    let stack = vars["STACK"].clone();
    let lease = gkq::gitops::lock::lease_name(&stack);
    let front = TestFront::new(Consent::default())
        .on_first_event(move || take_over_lease(kubeconfig, lease));
    let (report, lock_lost, recorded) =
        executed(converge_spec(&source, &target, PlanOptions::default(), &choices(), &front).await);
    assert!(report.is_success(), "{report:?}");
    assert!(lock_lost, "the takeover was not noticed");
    assert!(!recorded);
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.client.clone(), "kube-system");
    let name = format!("gkq-revision-{stack}");
    assert!(
        configmaps.get_opt(&name).await.unwrap().is_none(),
        "the revision was recorded after the lease was lost"
    );
}
