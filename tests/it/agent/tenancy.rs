//! A stack acts as its own ServiceAccount (`spec.serviceAccountName`, or the agent's
//! `--default-service-account`): every Kubernetes read and write of its plan and apply, and the
//! read of its `secretRef`, impersonate `system:serviceaccount:<namespace>:<name>`, so the
//! cluster's RBAC decides what a tenant may do. The agent itself runs with the deployed
//! least-privilege role (deploy/rbac.yaml), which grants no Secrets. Its Google calls carry the
//! ServiceAccount's Google identity: a TokenRequest token exchanged at the Security Token
//! Service (the GKE emulator's), whose principal the emulator's IAM table checks.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

use super::{Fixture, TEST_AGENT_ARGS, agent_token_kubeconfig, condition, endpoint, install_rbac};
use crate::support::gkq;
use crate::support::process::Running;

/// The STS audience the agents of these tests exchange ServiceAccount tokens for: GKE's
/// built-in pool of a management cluster `hub` in project `mgmt-project`.
const AUDIENCE: &str = "identitynamespace:mgmt-project.svc.id.goog:https://container.googleapis.com/v1/projects/mgmt-project/locations/us-east5/clusters/hub";

/// What a tenant's ServiceAccount may do: everything the fixture's spec needs, and no more
/// than reading RBAC objects (RBAC also refuses to let it bind a role it does not hold).
const TENANT_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "coordination.k8s.io",
    "kueue.x-k8s.io",
    "ray.io",
    "jobset.x-k8s.io",
    "scheduling.k8s.io",
    "autoscaling.x-k8s.io",
    "events.k8s.io",
];

async fn create<K>(api: &Api<K>, object: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A ServiceAccount `name` in the fixture's namespace; with `spec_rights`, bound to a
/// ClusterRole with [`TENANT_GROUPS`] and read-only RBAC.
async fn tenant(f: &Fixture, name: &str, spec_rights: bool) -> String {
    let ns = &f.env.namespace;
    let client = f.env.client.clone();
    create(
        &Api::<ServiceAccount>::namespaced(client.clone(), ns),
        json!({"metadata": {"name": name, "namespace": ns}}),
    )
    .await;
    let user = format!("system:serviceaccount:{ns}:{name}");
    if spec_rights {
        let role = format!("{ns}-{name}");
        create(
            &Api::<ClusterRole>::all(client.clone()),
            json!({
                "metadata": {"name": role},
                "rules": [
                    {"apiGroups": TENANT_GROUPS, "resources": ["*"], "verbs": ["*"]},
                    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["*"],
                     "verbs": ["get", "list", "watch"]},
                ],
            }),
        )
        .await;
        create(
            &Api::<ClusterRoleBinding>::all(client),
            json!({
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
            }),
        )
        .await;
    }
    user
}

/// The management kubeconfig of the agent's own ServiceAccount with deploy/rbac.yaml's role.
async fn agent_kubeconfig(f: &Fixture) -> std::path::PathBuf {
    install_rbac(&f.env.client, &f.env.namespace).await;
    agent_token_kubeconfig(
        &f.env.client,
        &f.env.namespace,
        &f.kubeconfig(),
        &f.state.path().join("agent-kubeconfig"),
    )
    .await
}

async fn create_stack_as(f: &Fixture, name: &str, account: &str, secret: Option<&str>) {
    create_stack_with(f, name, account, secret, &f.vars).await;
}

async fn create_stack_with(
    f: &Fixture,
    name: &str,
    account: &str,
    secret: Option<&str>,
    variables: &std::collections::BTreeMap<String, String>,
) {
    let mut spec = json!({
        "url": f.url(),
        "branch": "main",
        "path": "infra",
        "variables": variables,
        "interval": "2s",
        "serviceAccountName": account,
    });
    if let Some(secret) = secret {
        spec["secretRef"] = json!({"name": secret});
    }
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gkq.dev/v1alpha1",
        "kind": "GkqStack",
        "metadata": {"name": name, "namespace": f.env.namespace},
        "spec": spec,
    }))
    .unwrap();
    f.stacks()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_tenant_stack_acts_only_as_its_service_account() {
    let f = Fixture::new("agent-tenant").await;
    let ns = f.env.namespace.clone();
    // The stack's repository also asks for cluster-admin for its namespace's default account.
    let binding = format!("{ns}-default-cluster-admin");
    let spec = f.ws.spec_file();
    let mut text = std::fs::read_to_string(&spec).unwrap();
    text.push_str(&format!(
        "\nmanifests:\n  - apiVersion: rbac.authorization.k8s.io/v1\n    kind: ClusterRoleBinding\n    metadata: {{name: {binding}}}\n    roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n    subjects: [{{kind: ServiceAccount, name: default, namespace: {ns}}}]\n"
    ));
    std::fs::write(&spec, text).unwrap();
    f.ws.commit_all("escalate");

    let kubeconfig = agent_kubeconfig(&f).await;
    // The agent's own ServiceAccount reads no Secret, not even by name.
    let restricted = crate::support::control_plane::client_for(&kubeconfig)
        .await
        .unwrap();
    f.create_secret("git", json!({"token": "t0ken"})).await;
    let as_agent: Api<Secret> = Api::namespaced(restricted, &ns);
    assert!(
        as_agent.get("git").await.is_err(),
        "the agent reads Secrets"
    );

    let escalating = tenant(&f, "tenant", true).await;
    // Its role includes Secrets: the read goes through impersonation, with the agent's
    // least-privilege role.
    let unprivileged = tenant(&f, "nobody", false).await;
    create_stack_as(&f, "escalating", "tenant", Some("git")).await;
    create_stack_as(&f, "secretless", "nobody", Some("git")).await;

    let mut c = f.agent_command_as("a", "4s", &kubeconfig);
    c.args(["--workload-identity-audience", AUDIENCE]);
    let mut agent = Running::spawn(c);
    endpoint(&mut agent);

    let stack = f
        .wait(
            "escalating",
            "the binding refused",
            Duration::from_secs(120),
            |s| {
                condition(s, "Ready")["status"] == "False"
                    && condition(s, "Ready")["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("forbidden"))
            },
        )
        .await;
    let message = condition(&stack, "Ready")["message"].as_str().unwrap();
    assert!(message.contains("forbidden"), "{message}");
    assert!(
        message.contains("cannot patch resource \"clusterrolebindings\""),
        "{message}"
    );
    assert!(message.contains(&escalating), "{message}");
    let stack = f
        .wait(
            "secretless",
            "the Secret refused",
            Duration::from_secs(60),
            |s| condition(s, "Ready")["reason"] == "CredentialsUnavailable",
        )
        .await;
    let message = condition(&stack, "Ready")["message"].as_str().unwrap();
    assert!(message.contains("forbidden"), "{message}");
    assert!(message.contains(&unprivileged), "{message}");

    // Several intervals later: nothing was created with more than the tenant's rights.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
    let bindings: Api<ClusterRoleBinding> = Api::all(f.env.client.clone());
    assert!(
        bindings.get_opt(&binding).await.unwrap().is_none(),
        "the tenant's stack bound cluster-admin"
    );
    assert!(!logs.contains("t0ken"), "the token was logged");
}

/// A tenant whose ServiceAccount's principal manages clusters in `project-a` and may only view
/// `project-b`: its stack in `project-b` is refused the cluster's creation by GKE, for that
/// principal; moved to `project-a`, the same stack applies. The agent runs on `--target gcp`
/// against the GKE emulator served on loopback: its STS verifies the ServiceAccount tokens with
/// the test API server's own keys, so only a real TokenRequest token is exchanged. Multi-threaded:
/// the emulator serves from this test's runtime while the test waits for the agent to stop.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_stack_makes_google_calls_as_its_service_accounts_principal() {
    let f = Fixture::new("agent-tenant-gcp").await;
    let ns = f.env.namespace.clone();
    f.ws.edit("project: test-project", "project: ${PROJECT}");
    f.ws.edit(
        "  TPU_QUOTA: {default: \"16\"}",
        "  TPU_QUOTA: {default: \"16\"}\n  PROJECT: {default: test-project}",
    );
    let commit = f.ws.commit_all("the project is a variable");
    let kubeconfig = agent_kubeconfig(&f).await;
    tenant(&f, "cloud-tenant", true).await;

    let (gke, emulator) =
        gkq::emulator::Emulator::start_in_process(gkq::emulator::EmulatorConfig {
            pending_ms: 50,
            running_ms: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    let jwks = f
        .env
        .client
        .request_text(
            http::Request::get("/openid/v1/jwks")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    emulator.set_sts_jwks(Some(serde_json::from_str(&jwks).unwrap()));
    let principal = gkq::model::workload_identity::Audience::parse(AUDIENCE)
        .unwrap()
        .principal(&ns, "cloud-tenant", gkq::emulator::project_number);
    assert!(
        principal.ends_with(&format!(
            "mgmt-project.svc.id.goog/subject/ns/{ns}/sa/cloud-tenant"
        )),
        "{principal}"
    );
    emulator
        .set_iam(
            serde_json::from_value(json!({principal.clone(): {
                "project-a": ["roles/container.clusterAdmin"],
                "project-b": ["roles/container.viewer"],
            }}))
            .unwrap(),
        )
        .unwrap();

    let mut variables = f.vars.clone();
    variables.insert("PROJECT".into(), "project-b".into());
    create_stack_with(&f, "cloud", "cloud-tenant", None, &variables).await;
    let mut c = gkq();
    c.args(["agent", "--target", "gcp", "--gke-endpoint", &gke])
        .args(TEST_AGENT_ARGS)
        .arg("--kubeconfig")
        .arg(f.kubeconfig())
        .arg("--management-kubeconfig")
        .arg(&kubeconfig)
        .args(["--watch-namespace", &ns, "--namespace", &ns])
        .args([
            "--lease-duration",
            "4s",
            "--identity",
            "a",
            "--allow-file-urls",
        ])
        .arg("--work-dir")
        .arg(f.state.path().join("a"))
        .args([
            "--sts-endpoint",
            &gke,
            "--workload-identity-audience",
            AUDIENCE,
        ]);
    let mut agent = Running::spawn(c);
    endpoint(&mut agent);

    let refused = f
        .wait(
            "cloud",
            "the cluster's creation refused",
            Duration::from_secs(120),
            |s| {
                condition(s, "Ready")["status"] == "False"
                    && condition(s, "Ready")["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("container.clusters.create"))
            },
        )
        .await;
    let message = condition(&refused, "Ready")["message"].as_str().unwrap();
    assert!(
        message.contains(
            "Required \"container.clusters.create\" permission(s) for \"projects/project-b\"."
        ),
        "{message}"
    );

    // The same stack in the project its principal manages applies.
    let patch = json!({"spec": {"variables": {"PROJECT": "project-a"}}});
    f.stacks()
        .patch(
            "cloud",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let applied = f
        .wait_applied("cloud", &commit, Duration::from_secs(120))
        .await;
    assert_eq!(
        condition(&applied, "Ready")["status"],
        "True",
        "{applied:#}"
    );
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");

    let requests = emulator.requests();
    let exchanges = requests
        .iter()
        .filter(|r| r.path == "/v1/token" && r.status == 200);
    assert!(
        exchanges.count() >= 1,
        "no token was exchanged: {requests:#?}"
    );
    let gke_calls: Vec<_> = requests.iter().filter(|r| r.path != "/v1/token").collect();
    assert!(
        gke_calls.iter().all(|r| r.authorized),
        "a GKE call went without the exchanged token: {gke_calls:#?}"
    );
    let created = |project: &str, status: u16| {
        gke_calls.iter().any(|r| {
            r.method == "POST"
                && r.path == format!("/v1/projects/{project}/locations/us-east5-b/clusters")
                && r.status == status
        })
    };
    assert!(created("project-b", 403), "{gke_calls:#?}");
    assert!(!created("project-b", 200), "{gke_calls:#?}");
    assert!(created("project-a", 200), "{gke_calls:#?}");
}

/// On `--target local` the in-process emulator checks a tenant's principal against the IAM
/// table kept in the state directory (`<state dir>/gke/iam.json`, the body `PUT /emulator/iam`
/// takes): a principal that may only view the spec's project is refused the cluster's creation;
/// once the file grants it `roles/container.clusterAdmin`, the next reconcile applies.
#[tokio::test]
async fn a_tenant_stack_on_the_local_target_is_held_to_the_state_directorys_iam_table() {
    let f = Fixture::new("agent-tenant-iam").await;
    let ns = f.env.namespace.clone();
    let commit = f.ws.git(&["rev-parse", "HEAD"]);
    let kubeconfig = agent_kubeconfig(&f).await;
    tenant(&f, "local-tenant", true).await;
    let principal = gkq::model::workload_identity::Audience::parse(AUDIENCE)
        .unwrap()
        .principal(&ns, "local-tenant", gkq::emulator::project_number);
    let gke_state = f.state.path().join("state").join("gke");
    std::fs::create_dir_all(&gke_state).unwrap();
    let grant = |role: &str| {
        let table = json!({principal.clone(): {"test-project": [role]}});
        std::fs::write(gke_state.join("iam.json"), table.to_string()).unwrap();
    };
    grant("roles/container.viewer");

    create_stack_as(&f, "local", "local-tenant", None).await;
    let mut c = f.agent_command_as("a", "4s", &kubeconfig);
    c.args(["--workload-identity-audience", AUDIENCE]);
    let mut agent = Running::spawn(c);
    endpoint(&mut agent);
    let refused = f
        .wait(
            "local",
            "the cluster's creation refused",
            Duration::from_secs(120),
            |s| {
                condition(s, "Ready")["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("container.clusters.create"))
            },
        )
        .await;
    let ready = condition(&refused, "Ready");
    assert_eq!(ready["status"], "False", "{refused:#}");
    assert!(
        ready["message"].as_str().unwrap().contains(
            "Required \"container.clusters.create\" permission(s) for \"projects/test-project\"."
        ),
        "{refused:#}"
    );
    assert!(
        refused["status"]["lastAppliedRevision"].is_null(),
        "{refused:#}"
    );

    grant("roles/container.clusterAdmin");
    let applied = f
        .wait_applied("local", &commit, Duration::from_secs(120))
        .await;
    assert_eq!(
        condition(&applied, "Ready")["status"],
        "True",
        "{applied:#}"
    );
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
}
