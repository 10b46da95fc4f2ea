//! GitOps and CI on the local target, through the `gkq` binary: saved plans and their refusals,
//! exit codes, the JSON schema, the markdown comment, plans from commits, the applied revision,
//! the local lock, and watch mode.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use process::{explain, text};
use serde_json::Value;

#[path = "support/process.rs"]
mod process;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn gkq() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gkq"));
    // The example's variables would otherwise pick up values from the test's environment.
    c.env("NO_COLOR", "1").env_remove("GKQ_ENV");
    for var in [
        "GKQ_VAR_PROJECT_ID",
        "GKQ_VAR_ZONE",
        "GKQ_VAR_CLUSTER_NAME",
        "GKQ_VAR_GKE_VERSION",
        "GKQ_VAR_ONDEMAND_NODEPOOL",
        "GKQ_VAR_DWS_NODEPOOL",
        "GITHUB_ACTIONS",
        "GITLAB_CI",
    ] {
        c.env_remove(var);
    }
    c
}

/// A copy of the example spec in a fresh directory (`<tmp>/infra`), optionally a git repository.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("infra");
        std::fs::create_dir_all(spec.join("environments")).unwrap();
        for f in ["gkq.yaml", "train.py", "environments/local.yaml"] {
            std::fs::copy(root().join("examples/tpu-dws").join(f), spec.join(f)).unwrap();
        }
        Workspace { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn spec_file(&self) -> PathBuf {
        self.path().join("infra/gkq.yaml")
    }

    fn edit(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(self.spec_file()).unwrap();
        assert!(text.contains(from), "the example no longer has `{from}`");
        std::fs::write(self.spec_file(), text.replacen(from, to, 1)).unwrap();
    }

    /// Runs gkq in the workspace with the local target and its state in `<tmp>/state`.
    fn run(&self, args: &[&str]) -> Output {
        let state = self.path().join("state");
        let mut all: Vec<&str> = args.to_vec();
        // A saved plan names its own state directory.
        let saved_plan = args.len() > 1 && args[0] == "apply" && args[1].ends_with(".json");
        if !args.contains(&"--state-dir") && !saved_plan {
            all.extend(["--state-dir", state.to_str().unwrap()]);
        }
        gkq().args(&all).current_dir(self.path()).output().unwrap()
    }

    fn git(&self, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", explain(&out));
    }

    fn commit_all(&self, message: &str) -> String {
        if !self.path().join(".git").exists() {
            self.git(&["init", "-q", "-b", "main"]);
            std::fs::write(self.path().join(".gitignore"), "state/\n*.json\n").unwrap();
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        let out = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(self.path())
            .output()
            .unwrap();
        text(&out.stdout).trim().to_string()
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn summary(ws: &Workspace) -> Value {
    let out = ws.run(&["plan", "infra", "--env", "local", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    plan["summary"].clone()
}

#[test]
fn saved_plan_applies_once_then_is_refused_as_stale() {
    let ws = Workspace::new();
    let out = ws.run(&["plan", "infra", "--env", "local", "--out", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let plan_file = ws.path().join("plan.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&plan_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "plan files are private");
    }
    let plan = read_json(&plan_file);
    let provenance = &plan["provenance"];
    assert_eq!(provenance["target"], "local");
    assert_eq!(provenance["gkqVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(provenance["spec"]["path"], "infra/gkq.yaml");
    assert_eq!(provenance["spec"]["env"], "local");
    assert!(
        provenance["spec"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // Not in git: no commit is claimed.
    assert!(provenance["spec"].get("commit").is_none(), "{provenance:#}");

    let out = ws.run(&["apply", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    assert!(text(&out.stderr).contains("Applying the saved plan plan.json"));
    assert!(text(&out.stderr).contains("Creation complete"));
    assert_eq!(summary(&ws)["create"], 0);

    // The same plan again: everything it would create exists now.
    let out = ws.run(&["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the plan is stale: 14 resource(s) changed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("gke.nodepool/dws-pool changed since the plan was made (it exists now"),
        "{stderr}"
    );
    assert!(stderr.contains("Nothing was applied"), "{stderr}");
}

#[test]
fn saved_plan_is_refused_when_the_spec_changed_and_nothing_is_applied() {
    let ws = Workspace::new();
    let out = ws.run(&["plan", "infra", "--env", "local", "--out", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    std::fs::write(
        ws.path().join("infra/train.py"),
        "print('a different script')\n",
    )
    .unwrap();
    let out = ws.run(&["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the spec changed since the plan was made (train.py changed)"),
        "{stderr}"
    );
    // Nothing was created.
    assert_eq!(summary(&ws)["create"], 14);

    // The same files with a different variable value: refused too, without a file to blame.
    std::fs::copy(
        root().join("examples/tpu-dws/train.py"),
        ws.path().join("infra/train.py"),
    )
    .unwrap();
    let out = ws.run(&["apply", "plan.json", "--var", "GKE_VERSION=1.35"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("variables or environment differ"),
        "{}",
        explain(&out)
    );
    // With the spec as planned it applies.
    let out = ws.run(&["apply", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
}

#[test]
fn saved_plan_is_refused_when_live_state_moved() {
    let ws = Workspace::new();
    assert!(
        ws.run(&["apply", "infra", "--env", "local", "--auto-approve"])
            .status
            .success()
    );
    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 8}",
    );
    let out = ws.run(&["plan", "infra", "--env", "local", "--out", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    assert_eq!(
        read_json(&ws.path().join("plan.json"))["summary"]["update"],
        1
    );

    // Someone else changes the same pool in between (another copy of the spec, same live state).
    let other = Workspace::new();
    other.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 12}",
    );
    let state = ws.path().join("state");
    let out = other.run(&[
        "apply",
        "infra",
        "--env",
        "local",
        "--auto-approve",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", explain(&out));

    let out = ws.run(&["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the plan is stale: 1 resource(s) changed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("gke.nodepool/on-demand-pool changed"),
        "{stderr}"
    );
    // The other apply's value is still there: the stale plan changed nothing.
    let out = ws.run(&["plan", "infra", "--env", "local", "-o", "json"]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let change = &plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["addr"] == "gke.nodepool/on-demand-pool")
        .unwrap()["changes"][0];
    assert_eq!(change["before"], 12, "{plan:#}");
}

#[test]
fn plan_files_hold_no_variable_values_or_environment_secrets() {
    let ws = Workspace::new();
    let secret = "s3cr3t-7c0ffee-do-not-store";
    // A declared variable whose value comes from the environment, as credentials would.
    let text_before = std::fs::read_to_string(ws.spec_file()).unwrap();
    std::fs::write(
        ws.spec_file(),
        text_before.replacen(
            "variables:\n",
            "variables:\n  DEPLOY_TOKEN:\n    description: never used in a resource\n    default: none\n",
            1,
        ),
    )
    .unwrap();
    let out = gkq()
        .args([
            "plan",
            "infra",
            "--env",
            "local",
            "--out",
            "plan.json",
            "--state-dir",
            "state",
        ])
        .env("GKQ_VAR_DEPLOY_TOKEN", secret)
        .env("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", explain(&out));
    let saved = std::fs::read_to_string(ws.path().join("plan.json")).unwrap();
    assert!(!saved.contains(secret));
    assert!(!saved.contains("adc.json"));
    // The variable's name is recorded (to explain a refusal), never its value.
    assert!(saved.contains("\"DEPLOY_TOKEN\""));
    // Applying with a different value is refused: the value is part of the digest.
    let out = gkq()
        .args(["apply", "plan.json"])
        .env("GKQ_VAR_DEPLOY_TOKEN", "another")
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(text(&out.stderr).contains("variables or environment differ"));
}

#[test]
fn detailed_exit_codes_and_json_schema() {
    let ws = Workspace::new();
    let schema: Value = read_json(&root().join("schemas/plan.schema.json"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let plan_json = |ws: &Workspace| {
        let out = ws.run(&[
            "plan",
            "infra",
            "--env",
            "local",
            "-o",
            "json",
            "--detailed-exitcode",
        ]);
        let plan: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", explain(&out)));
        let errors: Vec<String> = validator
            .iter_errors(&plan)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        assert!(plan["provenance"]["spec"]["digest"].is_string());
        (out.status.code(), plan)
    };
    assert_eq!(plan_json(&ws).0, Some(2), "changes");
    assert!(
        ws.run(&["apply", "infra", "--env", "local", "--auto-approve"])
            .status
            .success()
    );
    assert_eq!(plan_json(&ws).0, Some(0), "no changes");
    // TPU topology cannot change in place: the pool is replaced. The local target's simulated
    // Kueue admitted job 1 on the on-demand flavor, which selects this pool, so the replace
    // stops a running job: exit code 3 (also tested against the real Kueue in
    // gitops_control_plane.rs).
    ws.edit("tpuTopology: 4x4", "tpuTopology: 2x4");
    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 2}",
    );
    let (code, plan) = plan_json(&ws);
    assert_eq!(plan["summary"]["replace"], 1, "{plan:#}");
    assert_eq!(code, Some(3), "a replace that stops job 1: {plan:#}");
    // Errors are 1, also with --detailed-exitcode.
    ws.edit("tpuTopology: 2x4", "tpuTopology: 5x5");
    assert_eq!(
        ws.run(&["plan", "infra", "--env", "local", "--detailed-exitcode"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn markdown_for_pull_requests_matches_its_snapshot() {
    let ws = Workspace::new();
    let commit = ws.commit_all("the example");
    let out = ws.run(&["plan", "infra", "--env", "local", "-o", "markdown"]);
    assert!(out.status.success(), "{}", explain(&out));
    let markdown = text(&out.stdout);
    // What varies between runs: the digest (the example evolves) and the commit.
    let digest = read_digest(&markdown);
    let markdown = markdown
        .replace(&commit[..12], "<commit>")
        .replace(&digest, "<digest>")
        .replace(env!("CARGO_PKG_VERSION"), "<version>");
    assert!(markdown.contains("**Plan: 14 to create, 0 to update, 0 to replace, 0 to delete.**"));
    assert!(markdown.contains("<details><summary><code>gke.nodepool/dws-pool</code>"));
    insta::assert_snapshot!("plan_markdown_example_local", markdown);

    // Replaced resources are called out above the table.
    assert!(
        ws.run(&["apply", "infra", "--env", "local", "--auto-approve"])
            .status
            .success()
    );
    ws.edit("tpuTopology: 4x4", "tpuTopology: 2x4");
    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 2}",
    );
    let out = ws.run(&["plan", "infra", "--env", "local", "-o", "markdown"]);
    let markdown = text(&out.stdout);
    assert!(markdown.contains("> [!WARNING]"), "{markdown}");
    assert!(
        markdown.contains("> - `gke.nodepool/on-demand-pool` is **replaced**"),
        "{markdown}"
    );
    assert!(
        markdown.contains("not from a commit"),
        "an edited tree is not a commit"
    );
}

fn read_digest(markdown: &str) -> String {
    let start = markdown.find("digest `").expect("a provenance line") + "digest `".len();
    markdown[start..start + 12].to_string()
}

#[test]
fn plans_record_the_commit_they_were_made_from() {
    let ws = Workspace::new();
    let first = ws.commit_all("max 4");
    let plan_at = |extra: &[&str]| {
        let mut args = vec!["plan", "infra", "--env", "local", "-o", "json"];
        args.extend_from_slice(extra);
        let out = ws.run(&args);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // A clean checkout: HEAD is the commit.
    assert_eq!(plan_at(&[])["provenance"]["spec"]["commit"], first.as_str());

    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 8}",
    );
    let dirty = plan_at(&[]);
    assert!(dirty["provenance"]["spec"].get("commit").is_none());
    let committed = plan_at(&["--git-ref", "HEAD"]);
    assert_eq!(committed["provenance"]["spec"]["commit"], first.as_str());
    assert_eq!(committed["provenance"]["spec"]["gitRef"], "HEAD");
    assert_ne!(
        dirty["provenance"]["spec"]["digest"],
        committed["provenance"]["spec"]["digest"]
    );
    // The working tree's plan has the edit; the commit's does not.
    let max_of = |plan: &Value| {
        plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["addr"] == "gke.nodepool/on-demand-pool")
            .unwrap()["desired"]["autoscaling"]["maxNodeCount"]
            .clone()
    };
    assert_eq!(max_of(&dirty), 8);
    assert_eq!(max_of(&committed), 4);

    let second = ws.commit_all("max 8");
    assert_eq!(
        plan_at(&[])["provenance"]["spec"]["commit"],
        second.as_str()
    );
    assert_eq!(
        plan_at(&["--git-ref", &first])["provenance"]["spec"]["commit"],
        first.as_str()
    );
}

#[test]
fn apply_records_the_revision_and_status_compares_it_with_head() {
    let ws = Workspace::new();
    let first = ws.commit_all("first");
    let status = |ws: &Workspace| {
        let out = ws.run(&["status", "infra", "--env", "local", "-o", "json"]);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let before = status(&ws);
    assert_eq!(before["appliedLabels"], Value::Null);
    assert_eq!(before["specMatchesApplied"], Value::Null);
    assert_eq!(before["drift"]["changes"], true);
    assert_eq!(before["local"]["head"], first.as_str());
    assert_eq!(before["local"]["clean"], true);

    let out = ws.run(&["apply", "infra", "--env", "local", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains(&format!(
            "Recorded the applied revision in ConfigMap kube-system/gkq-revision-tpu-cluster and the cluster's labels: commit {}",
            &first[..12]
        )),
        "{}",
        explain(&out)
    );
    let after = status(&ws);
    assert_eq!(after["appliedLabels"]["commit"], &first[..12], "{after:#}");
    // The local target's Kubernetes holds the revision ConfigMap.
    assert_eq!(after["applied"]["commit"], first.as_str(), "{after:#}");
    let digest = after["local"]["specDigest"].as_str().unwrap();
    assert_eq!(
        after["appliedLabels"]["specDigest"],
        &digest["sha256:".len().."sha256:".len() + 12]
    );
    assert_eq!(after["specMatchesApplied"], true);
    assert_eq!(after["drift"]["changes"], false);
    // The revision labels are not drift: a plan after the apply is empty.
    assert_eq!(summary(&ws)["update"], 0);

    // A new commit that changes the spec: status says so before it is applied.
    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 8}",
    );
    let second = ws.commit_all("second");
    let moved = status(&ws);
    assert_eq!(moved["specMatchesApplied"], false);
    assert_eq!(moved["drift"]["changes"], true);
    assert_eq!(moved["local"]["head"], second.as_str());
    let out = ws.run(&["status", "infra", "--env", "local"]);
    let text_status = text(&out.stdout);
    assert!(
        text_status.contains("the local spec differs from the one applied"),
        "{text_status}"
    );
    assert!(
        text_status.contains("Plan: 0 to create, 1 to update"),
        "{text_status}"
    );
}

#[test]
fn a_second_apply_on_the_local_target_is_refused_while_the_lock_is_held() {
    let ws = Workspace::new();
    let state = ws.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let held = runtime
        .block_on(gkq::gitops::lock::file(
            &state,
            "alice@laptop pid 4242",
            &gkq::gitops::lock::LockOptions::default(),
            &mut |_| {},
        ))
        .unwrap();
    let out = ws.run(&["apply", "infra", "--env", "local", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("is held by alice@laptop pid 4242, for"),
        "{stderr}"
    );
    assert!(stderr.contains("--lock-timeout"), "{stderr}");
    assert_eq!(summary(&ws)["create"], 14, "nothing was applied");

    // With a timeout it waits, and goes ahead once the lock is released.
    let mut waiting = std::process::Command::new(env!("CARGO_BIN_EXE_gkq"))
        .args([
            "apply",
            "infra",
            "--env",
            "local",
            "--auto-approve",
            "--lock-timeout",
            "60s",
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .env("NO_COLOR", "1")
        .current_dir(ws.path())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Longer than the quiet retry for momentary holders (a plan saving the simulation), so
    // that the wait is announced.
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "it waits for the lock"
    );
    runtime.block_on(held.release());
    let out = waiting.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("Waiting up to 1m00s for the cluster's lock, held by alice@laptop pid 4242"),
        "{stderr}"
    );
    assert_eq!(summary(&ws)["create"], 0);
}

mod watch {
    //! `gkq watch` on the local target.

    use std::time::Duration;

    use super::process::Running;
    use super::*;

    const WAIT: Duration = Duration::from_secs(30);

    fn watch(ws: &Workspace, extra: &[&str]) -> Running {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gkq"));
        command
            .args(["watch", "infra", "--env", "local", "--state-dir"])
            .arg(ws.path().join("state"))
            .args(extra)
            .env("NO_COLOR", "1")
            .env_remove("GKQ_ENV")
            .current_dir(ws.path());
        Running::spawn(command)
    }

    /// Saves the spec the way many editors do: write a temporary file, rename it over the spec.
    fn save_by_rename(ws: &Workspace, from: &str, to: &str) {
        let text = std::fs::read_to_string(ws.spec_file()).unwrap();
        assert!(text.contains(from));
        let temporary = ws.path().join("infra/.gkq.yaml.swp");
        std::fs::write(&temporary, text.replacen(from, to, 1)).unwrap();
        std::fs::rename(&temporary, ws.spec_file()).unwrap();
    }

    #[test]
    fn watch_replans_on_save_and_on_drift_and_stops_on_ctrl_c() {
        let ws = Workspace::new();
        assert!(
            ws.run(&["apply", "infra", "--env", "local", "--auto-approve"])
                .status
                .success()
        );
        let mut w = watch(&ws, &["--interval", "1s"]);
        w.wait_for("the initial plan", WAIT, |out| {
            out.contains("initial plan · No changes. Live state matches the spec.")
        });

        save_by_rename(
            &ws,
            "autoscaling: {min: 0, max: 4}",
            "autoscaling: {min: 0, max: 8}",
        );
        let (shown, took) = w.wait_for("the edit's plan", WAIT, |out| {
            // The plan's own summary line ends its text.
            out.contains("\nPlan: 0 to create, 1 to update")
        });
        assert!(shown.contains("spec changed (gkq.yaml)"), "{shown}");
        assert!(shown.contains("gke.nodepool/on-demand-pool"), "{shown}");
        assert!(
            shown.contains("autoscaling.maxNodeCount: 4 -> 8"),
            "{shown}"
        );
        eprintln!("save -> plan printed: {took:?}");

        // Unchanged plans are not printed again: the drift check runs every second, and the next
        // thing printed is the drift below, not a repeat of the plan above.
        std::thread::sleep(Duration::from_millis(2500));
        // Someone changes the pool behind the spec's back.
        let other = Workspace::new();
        other.edit(
            "autoscaling: {min: 0, max: 4}",
            "autoscaling: {min: 0, max: 12}",
        );
        let state = ws.path().join("state");
        // The watcher's drift checks save the simulation under the state directory's lock;
        // an apply must wait out those moments rather than fail.
        let applied = other.run(&[
            "apply",
            "infra",
            "--env",
            "local",
            "--auto-approve",
            "--state-dir",
            state.to_str().unwrap(),
        ]);
        assert!(
            applied.status.success(),
            "{}",
            String::from_utf8_lossy(&applied.stderr)
        );
        let (shown, _) = w.wait_for("the drift", WAIT, |out| {
            out.contains("\nPlan: 0 to create, 1 to update")
        });
        assert!(
            shown.contains("autoscaling.maxNodeCount: 12 -> 8"),
            "{shown}"
        );
        assert_eq!(
            shown.matches("── ").count(),
            1,
            "one plan since the edit's: {shown}"
        );
        assert!(shown.contains("live state changed"), "{shown}");

        let (code, stderr) = w.interrupt();
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.contains("Stopped watching."), "{stderr}");
    }

    #[test]
    fn watch_apply_applies_creates_and_holds_back_replaces() {
        let ws = Workspace::new();
        let mut w = watch(&ws, &["--apply", "--interval", "1h"]);
        let (shown, _) = w.wait_for("the apply", WAIT, |out| {
            out.contains("after apply · No changes. Live state matches the spec.")
        });
        assert!(
            shown.contains("initial plan · Plan: 14 to create"),
            "{shown}"
        );
        assert!(shown.contains("applying: Plan: 14 to create"), "{shown}");
        assert!(shown.contains("] applied\n"), "{shown}");
        assert_eq!(super::summary(&ws)["create"], 0);

        // A TPU topology change replaces the pool: shown, not applied.
        let text = std::fs::read_to_string(ws.spec_file()).unwrap();
        std::fs::write(
            ws.spec_file(),
            text.replacen("tpuTopology: 4x4", "tpuTopology: 2x4", 1)
                .replacen(
                    "autoscaling: {min: 0, max: 4}",
                    "autoscaling: {min: 0, max: 2}",
                    1,
                ),
        )
        .unwrap();
        let (shown, _) = w.wait_for("the refusal", WAIT, |out| out.contains("not applying"));
        assert!(shown.contains("1 to replace"), "{shown}");
        assert!(
            shown.contains(
                "not applying: this plan would change gke.nodepool/on-demand-pool (replace)"
            ),
            "{shown}"
        );
        assert!(shown.contains("pass --allow-destructive"), "{shown}");
        // The local target's simulated Kueue admitted job 1 on the pool being replaced.
        assert!(
            shown.contains("which stops RayJob default/rayjob-tpu-v6e-dws-1 (admitted)"),
            "{shown}"
        );
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            super::summary(&ws)["replace"],
            1,
            "the replace was not applied"
        );
        let (code, _) = w.interrupt();
        assert_eq!(code, Some(0));
    }

    #[test]
    fn watch_follows_a_remote_branch() {
        // origin: a bare repository; ws: a clone that watch runs in; author: another clone that
        // pushes to origin.
        let ws = Workspace::new();
        ws.commit_all("first");
        let origin = tempfile::tempdir().unwrap();
        let git = |dir: &Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {}", explain(&out));
            text(&out.stdout).trim().to_string()
        };
        git(origin.path(), &["init", "-q", "--bare", "-b", "main"]);
        let origin_url = origin.path().to_str().unwrap();
        git(ws.path(), &["remote", "add", "origin", origin_url]);
        git(ws.path(), &["push", "-q", "origin", "main"]);

        let mut w = watch(
            &ws,
            &[
                "--git-remote",
                "origin",
                "--branch",
                "main",
                "--interval",
                "1s",
            ],
        );
        let (shown, _) = w.wait_for("the initial plan", WAIT, |out| {
            out.contains("\nPlan: 14 to create")
        });
        assert!(shown.contains("initial plan"), "{shown}");

        // Edits in the working tree do not count: watch follows origin/main.
        ws.edit(
            "autoscaling: {min: 0, max: 4}",
            "autoscaling: {min: 0, max: 12}",
        );

        let author = tempfile::tempdir().unwrap();
        git(author.path(), &["clone", "-q", origin_url, "."]);
        let spec = author.path().join("infra/gkq.yaml");
        let text_before = std::fs::read_to_string(&spec).unwrap();
        std::fs::write(
            &spec,
            text_before.replacen(
                "autoscaling: {min: 0, max: 4}",
                "autoscaling: {min: 0, max: 8}",
                1,
            ),
        )
        .unwrap();
        git(
            author.path(),
            &["commit", "-q", "-am", "bigger on-demand pool"],
        );
        git(author.path(), &["push", "-q", "origin", "main"]);
        let pushed = git(author.path(), &["rev-parse", "HEAD"]);

        let (shown, _) = w.wait_for("the new commit's plan", WAIT, |out| {
            out.contains("\nPlan: 14 to create")
        });
        assert!(shown.contains("maxNodeCount: 8"), "{shown}");
        assert!(
            shown.contains(&format!("new commit {}", &pushed[..12])),
            "{shown}"
        );
        assert!(!shown.contains("maxNodeCount: 12"), "{shown}");
        let (code, _) = w.interrupt();
        assert_eq!(code, Some(0));
    }
}
