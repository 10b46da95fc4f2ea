//! A stack acts as its own ServiceAccount (`spec.serviceAccountName`, or the agent's
//! `--default-service-account`): every Kubernetes read and write of its plan and apply, and the
//! read of its `secretRef`, impersonate `system:serviceaccount:<namespace>:<name>`, so the
//! cluster's RBAC decides what a tenant may do. The agent itself runs with the deployed
//! least-privilege role (deploy/rbac.yaml), which grants no Secrets.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

use super::{Fixture, condition, endpoint, install_rbac};
use crate::support::process::Running;

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
    let accounts: Api<ServiceAccount> = Api::namespaced(f.env.client.clone(), &f.env.namespace);
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
    let admin = std::fs::read_to_string(f.kubeconfig()).unwrap();
    let as_agent: String = admin
        .lines()
        .map(|l| match l.split_once("token:") {
            Some((indent, _)) => format!("{indent}token: {token}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    let kubeconfig = f.state.path().join("agent-kubeconfig");
    std::fs::write(&kubeconfig, as_agent).unwrap();
    kubeconfig
}

async fn create_stack_as(f: &Fixture, name: &str, account: &str, secret: Option<&str>) {
    let mut spec = json!({
        "url": f.url(),
        "branch": "main",
        "path": "infra",
        "variables": f.vars,
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

    let c = f.agent_command_as("a", "4s", &kubeconfig);
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
