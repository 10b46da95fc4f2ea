//! Least privilege, checked against what the agent actually does: an agent whose management
//! credentials are a token of the deployed ServiceAccount (deploy/rbac.yaml only) runs the
//! paths its role exists for (leading, reconciling a stack that acts as its own ServiceAccount
//! and reads its Secret, a push webhook, a refused stack whose Event repeats, a deletion, a
//! SIGTERM; the stack's Google identity from a TokenRequest), on a control plane of its own with an audit log. Every request the agent made as
//! itself is read back from that log: each must be granted by the role, and each grant of the
//! role must have been used.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::{
    TEST_AGENT_ARGS, agent_token_kubeconfig, endpoint, install_crd, install_rbac, stack_resource,
};
use crate::support::control_plane::{PrivateControlPlane, client_for, eventually};
use crate::support::process::Running;
use crate::support::workspace::git;
use crate::support::{gkq, repo_root};

/// `(apiGroup, resource[/subresource], verb)`.
type Grant = (String, String, String);

/// What deploy/rbac.yaml grants the agent (rules of its ClusterRole and Roles).
fn granted() -> BTreeSet<Grant> {
    let text = std::fs::read_to_string(repo_root().join("deploy/rbac.yaml")).unwrap();
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut grants = BTreeSet::new();
    for doc in documents
        .iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("ClusterRole" | "Role")))
    {
        for rule in doc["rules"].as_array().unwrap() {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        grants.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    grants
}

/// What `user` did as itself in the audit log (an impersonated request counts as the
/// `impersonate` grant on serviceaccounts), and any request the server refused it.
fn used(log: &str, user: &str) -> (BTreeSet<Grant>, Vec<String>) {
    let mut used = BTreeSet::new();
    let mut refused = Vec::new();
    for line in log.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] != user || event["stage"] != "ResponseComplete" {
            continue;
        }
        if event["impersonatedUser"].is_object() {
            used.insert(("".into(), "serviceaccounts".into(), "impersonate".into()));
            continue;
        }
        let object = &event["objectRef"];
        let Some(resource) = object["resource"].as_str() else {
            continue; // discovery and other non-resource URLs
        };
        let resource = match object["subresource"].as_str() {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        };
        let group = object["apiGroup"].as_str().unwrap_or_default().to_string();
        let verb = event["verb"].as_str().unwrap().to_string();
        if event["responseStatus"]["code"] == 403 {
            refused.push(format!("{verb} {group}/{resource}"));
        }
        used.insert((group, resource, verb));
    }
    (used, refused)
}

#[tokio::test]
async fn the_agents_role_is_exactly_what_it_uses() {
    gkq::gke::install_tls_provider();
    let cp = PrivateControlPlane::start_audited();
    let admin = client_for(&cp.kubeconfig()).await.unwrap();
    let ns = "rbac-audit";
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    install_crd(&admin).await;
    install_rbac(&admin, ns).await;

    // The agent's own ServiceAccount, as a kubeconfig.
    let work = tempfile::tempdir().unwrap();
    let agent_kubeconfig = agent_token_kubeconfig(
        &admin,
        ns,
        &cp.kubeconfig(),
        &work.path().join("agent-kubeconfig"),
    )
    .await;

    // The stacks' ServiceAccount may do what their spec needs (not under test here).
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "stack", "namespace": ns}}))
                .unwrap(),
        )
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "rbac-audit-stack"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "stack", "namespace": ns}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<Secret>::namespaced(admin.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "git", "namespace": ns},
                "stringData": {"webhookSecret": "audit-hook"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // A repository with a small spec: a cluster (in the emulator) and one ConfigMap.
    let repo = work.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(
        repo.join("gkq.yaml"),
        format!(
            "project: audit-project\nlocation: us-east5-b\ncluster: {{name: audited}}\nkueue: {{install: external}}\nmanifests:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {{name: audited, namespace: {ns}}}\n    data: {{a: b}}\n"
        ),
    )
    .unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "spec"]);
    let stacks: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &stack_resource());
    for (name, url) in [
        ("good", format!("file://{}", repo.display())),
        // Refused at every interval: its Event is recorded once, then counted.
        ("refused", "ssh://git@-oProxyCommand=x/repo".to_string()),
    ] {
        stacks
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "apiVersion": "gkq.dev/v1alpha1",
                    "kind": "GkqStack",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"url": url, "interval": "1s", "serviceAccountName": "stack",
                             "secretRef": {"name": "git"}},
                }))
                .unwrap(),
            )
            .await
            .unwrap();
    }

    let mut c = gkq();
    c.args(["agent", "--target", "local"])
        .args(TEST_AGENT_ARGS)
        .arg("--state-dir")
        .arg(work.path().join("state"))
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .arg("--management-kubeconfig")
        .arg(&agent_kubeconfig)
        .args(["--watch-namespace", ns, "--namespace", ns])
        .args(["--lease-duration", "4s", "--identity", "audited"])
        // The stack's Google calls use its ServiceAccount's principal (a TokenRequest the agent
        // makes, exchanged at the local target's STS).
        .args([
            "--workload-identity-audience",
            "identitynamespace:audit-project.svc.id.goog:https://container.googleapis.com/v1/projects/audit-project/locations/us-east5/clusters/hub",
        ])
        .arg("--work-dir")
        .arg(work.path().join("checkouts"))
        .env("GKQ_AGENT_CLUSTER", "");
    let mut agent = Running::spawn(c);
    let urls = endpoint(&mut agent);
    let applied = |stack: Value| stack["status"]["lastAppliedRevision"].is_string();
    eventually(
        "the good stack applied",
        Duration::from_secs(120),
        || async {
            let stack = serde_json::to_value(stacks.get("good").await?)?;
            Ok(applied(stack).then_some(()))
        },
    )
    .await
    .unwrap();
    // A push webhook: the stack is read by name and its Secret as the stack's ServiceAccount.
    let body = br#"{"ref":"refs/heads/main"}"#.to_vec();
    let status = reqwest::Client::new()
        .post(format!("{}/hooks/{ns}/good", urls.hooks))
        .header("X-GitHub-Event", "push")
        .header(
            "X-Hub-Signature-256",
            gkq::agent::webhook::github_signature(b"audit-hook", &body),
        )
        .body(body.clone())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
    // The refused stack's Event repeats (a patch of its count).
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), ns);
    eventually(
        "the refused stack's Event counted",
        Duration::from_secs(60),
        || async {
            let counted = events
                .list(&Default::default())
                .await?
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("InvalidSource")
                        && e.series.as_ref().is_some_and(|s| s.count >= 2)
                });
            Ok(counted.then_some(()))
        },
    )
    .await
    .unwrap();
    // A deletion: the finalizer is removed once the objects are given up.
    stacks
        .delete("good", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the good stack deleted",
        Duration::from_secs(120),
        || async { Ok(stacks.get_opt("good").await?.is_none().then_some(())) },
    )
    .await
    .unwrap();
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");

    let log = std::fs::read_to_string(cp.dir.join("logs/audit.log")).unwrap();
    let (used, refused) = used(&log, &format!("system:serviceaccount:{ns}:gkq-agent"));
    assert!(
        refused.is_empty(),
        "the role refused the agent: {refused:?}"
    );
    let granted = granted();
    let beyond: Vec<_> = used.difference(&granted).collect();
    assert!(beyond.is_empty(), "used but not granted: {beyond:?}");
    let unused: Vec<_> = granted.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "granted but never used (remove them from deploy/rbac.yaml, or exercise them here): {unused:?}\nused: {used:?}"
    );
}
