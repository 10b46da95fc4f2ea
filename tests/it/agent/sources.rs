//! Hostile GkqStack sources: a `url`, `branch`, `tag`, `path` or `env` written to make the
//! agent's `git` run a command (an option such as `--upload-pack`, a remote helper such as
//! `ext::`, an ssh host that ssh would read as `-oProxyCommand`, control characters) or read
//! outside its checkout. Each form would create a marker file if anything ran it; none may
//! appear, each stack ends `Ready=False` with reason `InvalidSource` and nothing is fetched.
//! Where the CRD's schema can refuse a form, the API server refuses it before the agent sees it.

use std::path::Path;
use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use super::{Fixture, condition, endpoint};
use crate::support::gkq;
use crate::support::process::Running;

/// One hostile stack: the fields it sets beside a valid `url`, and the marker it would create.
struct Form {
    name: &'static str,
    spec: Value,
}

/// The forms, each creating `<markers>/<name>` if git or ssh ran what it carries. `repo` is a
/// `file://` URL of a real repository, for forms whose attack is in another field.
fn forms(markers: &Path, repo: &str) -> Vec<Form> {
    let m = |name: &str| markers.join(name).display().to_string();
    let mut forms = vec![
        (
            "upload-pack",
            json!({"url": format!("--upload-pack=touch {}; false", m("upload-pack"))}),
        ),
        (
            "upload-pack-nospace",
            json!({"url": format!("--upload-pack=touch${{IFS}}{}", m("upload-pack-nospace"))}),
        ),
        (
            "config-option",
            json!({"url": format!("-ccore.sshCommand=touch${{IFS}}{}", m("config-option"))}),
        ),
        (
            "ext-helper",
            json!({"url": format!("ext::sh -c touch% {}", m("ext-helper"))}),
        ),
        (
            "ext-helper-nospace",
            json!({"url": format!("ext::touch% {}", m("ext-helper-nospace"))}),
        ),
        ("fd-helper", json!({"url": "fd::0,1"})),
        (
            "ssh-host-option",
            json!({"url": format!("ssh://-oProxyCommand=touch%20{}/repo", m("ssh-host-option"))}),
        ),
        (
            "ssh-user-host-option",
            json!({"url": format!("ssh://git@-oProxyCommand=touch${{IFS}}{}/repo", m("ssh-user-host-option"))}),
        ),
        (
            "scp-host-option",
            json!({"url": format!("git@-oProxyCommand=touch${{IFS}}{}:repo", m("scp-host-option"))}),
        ),
        (
            "newline",
            json!({"url": format!("{repo}\n--upload-pack=touch {}", m("newline"))}),
        ),
        (
            "space",
            json!({"url": format!("{repo} --upload-pack=touch${{IFS}}{}", m("space"))}),
        ),
        ("git-protocol", json!({"url": "git://127.0.0.1:1/repo"})),
        ("http", json!({"url": "http://127.0.0.1:1/repo"})),
        ("plain-path", json!({"url": markers.display().to_string()})),
        (
            "branch-option",
            json!({"url": repo, "branch": format!("--upload-pack=touch${{IFS}}{}", m("branch-option"))}),
        ),
        (
            "tag-option",
            json!({"url": repo, "tag": format!("-ccore.fsmonitor=touch${{IFS}}{}", m("tag-option"))}),
        ),
        (
            "branch-refspec",
            json!({"url": repo, "branch": "main:refs/heads/x"}),
        ),
        ("path-escape", json!({"url": repo, "path": "../../../.."})),
        ("path-absolute", json!({"url": repo, "path": "/etc"})),
        (
            "env-escape",
            json!({"url": repo, "env": "../../../etc/passwd"}),
        ),
        // Not hostile, but refused the same way: a submit wait above the agent's 10m bound,
        // which the schema (a duration's grammar) cannot tell from a valid one.
        (
            "submit-wait-too-long",
            json!({"url": repo, "submitWait": "11m"}),
        ),
    ];
    forms.sort_by_key(|(name, _)| *name);
    forms
        .into_iter()
        .map(|(name, spec)| Form { name, spec })
        .collect()
}

fn assert_no_markers(markers: &Path) {
    let left: Vec<_> = std::fs::read_dir(markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "a hostile source ran a command: {left:?}");
}

/// The local target's agent reads its stacks from a file, with no API server in front to check
/// the CRD's schema: every form reaches the agent itself, which refuses each before running git.
#[test]
fn the_agent_refuses_every_hostile_source_and_runs_nothing() {
    let ws = crate::support::Workspace::example();
    ws.commit_all("seed");
    let state = tempfile::tempdir().unwrap();
    let markers = state.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let repo = format!("file://{}", ws.path().display());
    let forms = forms(&markers, &repo);
    let mut manifest = String::new();
    for form in &forms {
        let mut spec = form.spec.clone();
        spec["interval"] = json!("1s");
        let stack = json!({
            "apiVersion": "gkq.dev/v1alpha1",
            "kind": "GkqStack",
            "metadata": {"name": form.name},
            "spec": spec,
        });
        manifest.push_str("---\n");
        manifest.push_str(&serde_json::to_string(&stack).unwrap());
        manifest.push('\n');
    }
    let file = state.path().join("stacks.yaml");
    std::fs::write(&file, manifest).unwrap();
    let mut c = gkq();
    c.args(["agent", "--target", "local"])
        .args(super::TEST_AGENT_ARGS)
        .arg("--state-dir")
        .arg(state.path().join("state"))
        .arg("--stack")
        .arg(&file)
        .env("GKQ_AGENT_CLUSTER", "");
    let agent = Running::spawn(c);
    let stacks_file = state.path().join("state/agent/stacks.json");
    let started = std::time::Instant::now();
    let stacks = loop {
        let stacks: Value = std::fs::read_to_string(&stacks_file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let reasons: Vec<_> = stacks["stacks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| condition(s, "Ready")["reason"].as_str())
            .collect();
        if reasons.len() == forms.len() && reasons.iter().all(|r| *r == "InvalidSource") {
            break stacks;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not every stack was refused: {stacks:#}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    // Several intervals: a refused stack stays refused and still runs nothing.
    std::thread::sleep(Duration::from_secs(3));
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
    assert_no_markers(&markers);
    for stack in stacks["stacks"].as_array().unwrap() {
        let name = stack["metadata"]["name"].as_str().unwrap();
        let ready = condition(stack, "Ready");
        assert_eq!(ready["status"], "False", "{name}: {stack:#}");
        let message = ready["message"].as_str().unwrap();
        assert!(
            message.starts_with("spec.") && message.contains("nothing was fetched"),
            "{name}: {message}"
        );
        assert!(!message.contains('\n'), "{name}: {message:?}");
        assert_eq!(condition(stack, "Stalled")["status"], "True", "{name}");
        assert_eq!(
            stack["status"]["observedGeneration"], stack["metadata"]["generation"],
            "{name}"
        );
    }
    let checkouts = state.path().join("state/agent/checkouts");
    assert!(
        !checkouts.exists() || std::fs::read_dir(&checkouts).unwrap().next().is_none(),
        "a hostile stack was checked out"
    );
}

/// On a real API server: the CRD's schema refuses what it can express (a leading `-`, a helper,
/// control characters), the agent refuses the rest (`InvalidSource`), and an agent that may
/// not read its own disk (no `--target local`, no `--allow-file-urls`) refuses `file://` too.
/// No marker appears either way.
#[tokio::test]
async fn hostile_sources_are_refused_by_the_schema_or_the_agent_on_a_real_api_server() {
    let f = Fixture::new("agent-hostile").await;
    let markers = f.state.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let repo = f.url();
    let mut created = Vec::new();
    let mut refused_by_schema = Vec::new();
    for form in forms(&markers, &repo) {
        let mut spec = form.spec.clone();
        spec["interval"] = json!("2s");
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gkq.dev/v1alpha1",
            "kind": "GkqStack",
            "metadata": {"name": form.name, "namespace": f.env.namespace},
            "spec": spec,
        }))
        .unwrap();
        match f.stacks().create(&PostParams::default(), &object).await {
            Ok(_) => created.push(form.name),
            Err(kube::Error::Api(e)) if e.code == 422 => {
                assert!(e.message.contains("spec."), "{}: {}", form.name, e.message);
                refused_by_schema.push(form.name);
            }
            Err(e) => panic!("{}: {e}", form.name),
        }
    }
    for must in [
        "upload-pack",
        "ext-helper",
        "newline",
        "branch-option",
        "tag-option",
    ] {
        assert!(
            refused_by_schema.contains(&must),
            "the schema let {must} through: {refused_by_schema:?}"
        );
    }
    // Forms the schema cannot tell apart reach the agent, and a valid file:// stack that only an
    // agent with --allow-file-urls may fetch.
    for must in [
        "ssh-user-host-option",
        "path-escape",
        "env-escape",
        "submit-wait-too-long",
    ] {
        assert!(created.contains(&must), "{must} in {created:?}");
    }
    f.create_stack_of("file-url", &repo, "2s", None).await;
    created.push("file-url");

    let work = f.state.path().join("work");
    let mut c = gkq();
    c.args(["agent", "--target", "gcp"])
        .args(super::TEST_AGENT_ARGS)
        .args(["--gke-endpoint", "http://127.0.0.1:9"])
        .arg("--kubeconfig")
        .arg(f.kubeconfig())
        .arg("--management-kubeconfig")
        .arg(f.kubeconfig())
        .args(["--watch-namespace", &f.env.namespace])
        .args(["--namespace", &f.env.namespace])
        .args(["--lease-duration", "4s", "--identity", "hostile"])
        .arg("--work-dir")
        .arg(&work)
        .env("GKQ_AGENT_CLUSTER", "");
    let mut agent = Running::spawn(c);
    endpoint(&mut agent);
    for name in &created {
        let stack = f
            .wait(name, "InvalidSource", Duration::from_secs(60), |s| {
                condition(s, "Ready")["reason"] == "InvalidSource"
            })
            .await;
        assert_eq!(condition(&stack, "Ready")["status"], "False", "{name}");
        assert!(
            condition(&stack, "Ready")["message"]
                .as_str()
                .unwrap()
                .starts_with("spec."),
            "{name}: {stack:#}"
        );
    }
    let file_url = f.stack("file-url").await;
    let message = condition(&file_url, "Ready")["message"].as_str().unwrap();
    assert!(message.contains("file:// URL"), "{message}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (code, logs) = agent.interrupt();
    assert_eq!(code, Some(0), "{logs}");
    assert_no_markers(&markers);
    assert!(
        !work.exists() || std::fs::read_dir(&work).unwrap().next().is_none(),
        "nothing is checked out"
    );
    let reasons: Vec<_> = f
        .events()
        .await
        .into_iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect();
    assert!(reasons.iter().any(|r| r == "InvalidSource"), "{reasons:?}");
}
