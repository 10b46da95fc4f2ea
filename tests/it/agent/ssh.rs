//! `gkq agent` fetching over SSH with the key of a stack's Secret, from a real OpenSSH server
//! (`support::sshd`) serving a bare repository: the authorized key fetches and applies, a key
//! sshd does not know and a host key that is not the known one are refused with git's and ssh's
//! words and nothing applied, and the key appears nowhere the agent writes, nor on disk after a
//! fetch. The work directory has spaces, quotes, `%` and `\` in its name, as GIT_SSH_COMMAND
//! must survive them.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::{Fixture, assert_nowhere, condition, endpoint};
use crate::support::process::Running;
use crate::support::sshd::{Sshd, keygen};
use crate::support::workspace::git;

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if String::from_utf8_lossy(&std::fs::read(&path).unwrap()).contains(needle) {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Waits until the stack's fetch failed saying `says`; asserts that no commit was attempted.
async fn refused(f: &Fixture, name: &str, says: &str) {
    let stack = f
        .wait(name, says, Duration::from_secs(60), |s| {
            condition(s, "Ready")["reason"] == "FetchFailed"
        })
        .await;
    let message = condition(&stack, "Ready")["message"].as_str().unwrap();
    assert!(message.contains("`git fetch` of ssh://"), "{message}");
    assert!(message.contains(says), "{message}");
    for field in ["lastAttemptedRevision", "lastAppliedRevision"] {
        assert!(stack["status"][field].is_null(), "{field}: {stack:#}");
    }
}

#[tokio::test]
async fn an_ssh_key_fetches_from_a_real_sshd_a_wrong_key_is_refused_and_the_key_is_never_shown() {
    let f = Fixture::new("agent-ssh").await;
    let sshd = Sshd::start();
    // The fixture's repository, served bare by sshd; new commits are pushed to it.
    let bare = sshd.dir().join("infra.git");
    git(
        &sshd.dir(),
        &[
            "clone",
            "-q",
            "--bare",
            &f.ws.path().display().to_string(),
            "infra.git",
        ],
    );
    let url = sshd.url(&bare);
    let key = sshd.client_key();
    keygen(&sshd.dir().join("stranger"));
    let stranger = std::fs::read_to_string(sshd.dir().join("stranger")).unwrap();
    let stranger_public = std::fs::read_to_string(sshd.dir().join("stranger.pub")).unwrap();
    let public: Vec<&str> = stranger_public.split_whitespace().take(2).collect();
    f.create_secret(
        "ssh",
        json!({"identity": key, "known_hosts": sshd.known_hosts()}),
    )
    .await;
    f.create_secret(
        "stranger",
        json!({"identity": stranger, "known_hosts": sshd.known_hosts()}),
    )
    .await;
    // The right key, but a known host key that is not the server's (a server in the middle).
    f.create_secret(
        "impostor",
        json!({"identity": key, "known_hosts": format!("[127.0.0.1]:{} {}\n", sshd.port, public.join(" "))}),
    )
    .await;
    f.create_stack_of("denied", &url, "2s", Some("stranger"))
        .await;
    f.create_stack_of("impostor", &url, "2s", Some("impostor"))
        .await;

    let work = f.state.path().join("ssh work 'dir' \"q\" 100%d \\b");
    let mut c = f.agent_command_in(&work, "ssh", "4s", &f.kubeconfig());
    c.env("RUST_LOG", "trace");
    let mut agent = Running::spawn(c);
    let endpoint_url = endpoint(&mut agent);

    // A key sshd does not authorize, and a server whose host key is not the known one: the
    // fetch fails with ssh's words, and nothing is applied.
    refused(&f, "denied", "Permission denied (publickey)").await;
    refused(&f, "impostor", "Host key verification failed").await;
    assert!(
        f.queues().get_opt(&f.vars["CQ"]).await.unwrap().is_none(),
        "nothing was applied"
    );
    let events = f.events().await;
    assert!(
        events.iter().any(|e| e["reason"] == "FetchFailed"),
        "{events:#?}"
    );

    // The authorized key fetches, and the commit is applied; so is the next one pushed.
    let first = f.ws.git(&["rev-parse", "HEAD"]);
    f.create_stack_of("ssh", &url, "2s", Some("ssh")).await;
    let stack = f
        .wait_applied("ssh", &first, Duration::from_secs(120))
        .await;
    assert_eq!(condition(&stack, "Ready")["status"], "True", "{stack:#}");
    assert!(f.queues().get_opt(&f.vars["CQ"]).await.unwrap().is_some());
    let second = f.commit_quota(16, 24);
    f.ws.git(&["push", "-q", &bare.display().to_string(), "main"]);
    f.wait_applied("ssh", &second, Duration::from_secs(60))
        .await;
    let log = sshd.log();
    assert!(
        log.contains(&format!("Accepted publickey for {}", sshd.user)),
        "{log}"
    );

    let written = f
        .everything_written(&["ssh", "denied", "impostor"], &endpoint_url.metrics, agent)
        .await;
    // The lines of the key's body that are its own (the first is the same in every ed25519 key).
    let body: Vec<&str> = key
        .lines()
        .filter(|l| !l.starts_with("-----") && !stranger.contains(l))
        .collect();
    assert!(!body.is_empty());
    // The key was on disk only while git fetched (the agent has stopped: no fetch runs now).
    for line in &body {
        let left = files_containing(&work, line);
        assert!(left.is_empty(), "the key is left in {left:?}");
    }
    use base64::Engine;
    let mut forms = vec![
        key.clone(),
        base64::engine::general_purpose::STANDARD.encode(&key),
        stranger.clone(),
    ];
    forms.extend(body.iter().map(|l| l.to_string()));
    assert_nowhere(&written, &forms, "the SSH key");
}
