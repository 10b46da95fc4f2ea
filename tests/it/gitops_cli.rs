//! GitOps and CI on the local target, through the `gkq` binary: saved plans and their refusals,
//! exit codes, the JSON schema, the markdown comment, plans from commits, the applied revision,
//! the local lock, and watch mode.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::process::{self, explain, text};
use crate::support::workspace::git;
use crate::support::{Workspace, gkq, repo_root};

/// Runs gkq in `ws` with the local target and its state in `<tmp>/state`.
fn run(ws: &Workspace, args: &[&str]) -> Output {
    let state = ws.path().join("state");
    let mut all: Vec<&str> = args.to_vec();
    // A saved plan names its own state directory.
    let saved_plan = args.len() > 1 && args[0] == "apply" && args[1].ends_with(".json");
    if !args.contains(&"--state-dir") && !saved_plan {
        all.extend(["--state-dir", state.to_str().unwrap()]);
    }
    gkq().args(&all).current_dir(ws.path()).output().unwrap()
}

/// `gkq apply plan.json --no-spec-check` with the plan file alone, in a directory without the
/// spec.
fn apply_alone(ws: &Workspace) -> Output {
    apply_elsewhere(ws, &["--no-spec-check"])
}

/// `gkq apply plan.json` and `extra`, run in `<workspace>/elsewhere` with a copy of the plan
/// file: the spec it names (`infra/gkq.yaml`) is not there, it is at `../infra`.
fn apply_elsewhere(ws: &Workspace, extra: &[&str]) -> Output {
    let elsewhere = ws.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::copy(ws.path().join("plan.json"), elsewhere.join("plan.json")).unwrap();
    gkq()
        .args(["apply", "plan.json"])
        .args(extra)
        .current_dir(&elsewhere)
        .output()
        .unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn summary(ws: &Workspace) -> Value {
    let out = run(ws, &["plan", "infra", "--env", "local", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    plan["summary"].clone()
}

#[test]
fn saved_plan_applies_once_then_is_refused_as_stale() {
    let ws = Workspace::example();
    let out = run(
        &ws,
        &["plan", "infra", "--env", "local", "--out", "plan.json"],
    );
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

    let out = run(&ws, &["apply", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
    assert!(text(&out.stderr).contains("Applying the saved plan plan.json"));
    assert!(text(&out.stderr).contains("Creation complete"));
    assert_eq!(summary(&ws)["create"], 0);

    // The same plan again: everything it would create exists now. With the spec at hand, gkq
    // plans again and names each difference.
    let out = run(&ws, &["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "plan.json is not the plan gkq makes now from the same spec, so nothing was applied"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("gke.nodepool/dws-pool: the plan file would create it; planning now changes nothing there"),
        "{stderr}"
    );
}

#[test]
fn saved_plan_is_refused_when_the_spec_changed_and_nothing_is_applied() {
    let ws = Workspace::example();
    let out = run(
        &ws,
        &["plan", "infra", "--env", "local", "--out", "plan.json"],
    );
    assert!(out.status.success(), "{}", explain(&out));
    std::fs::write(
        ws.path().join("infra/train.py"),
        "print('a different script')\n",
    )
    .unwrap();
    let out = run(&ws, &["apply", "plan.json"]);
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
        repo_root().join("examples/tpu-dws/train.py"),
        ws.path().join("infra/train.py"),
    )
    .unwrap();
    let out = run(&ws, &["apply", "plan.json", "--var", "GKE_VERSION=1.35"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("variables or environment differ"),
        "{}",
        explain(&out)
    );
    // With the spec as planned it applies.
    let out = run(&ws, &["apply", "plan.json"]);
    assert!(out.status.success(), "{}", explain(&out));
}

#[test]
fn saved_plan_is_refused_when_live_state_moved() {
    let ws = Workspace::example();
    assert!(
        run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"])
            .status
            .success()
    );
    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: large}",
    );
    let out = run(
        &ws,
        &["plan", "infra", "--env", "local", "--out", "plan.json"],
    );
    assert!(out.status.success(), "{}", explain(&out));
    assert_eq!(
        read_json(&ws.path().join("plan.json"))["summary"]["update"],
        1
    );

    // Someone else changes the same pool in between (another copy of the spec, same live state).
    let other = Workspace::example();
    other.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: huge}",
    );
    let state = ws.path().join("state");
    let out = run(
        &other,
        &[
            "apply",
            "infra",
            "--env",
            "local",
            "--auto-approve",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", explain(&out));

    let out = run(&ws, &["apply", "plan.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "plan.json is not the plan gkq makes now from the same spec, so nothing was applied"
        ),
        "{stderr}"
    );
    // The refusal names the resource, the field and both values.
    assert!(
        stderr.contains("gke.nodepool/on-demand-pool: config.resourceLabels.size was (absent) when the plan was made and is \"huge\" now"),
        "{stderr}"
    );
    // Without the spec (the plan file alone, elsewhere), every target is read again instead,
    // and the refusal names the field that moved.
    let out = apply_alone(&ws);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("only live state is checked against the plan"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the plan is stale: 1 resource(s) changed"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "gke.nodepool/on-demand-pool: config.resourceLabels changed since the plan was made"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("Nothing was applied"), "{stderr}");
    // The other apply's value is still there: the stale plan changed nothing.
    let out = run(&ws, &["plan", "infra", "--env", "local", "-o", "json"]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let change = &plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["addr"] == "gke.nodepool/on-demand-pool")
        .unwrap()["changes"][0];
    assert_eq!(change["before"], "huge", "{plan:#}");
}

/// A saved plan applied away from the directory it was made in does not silently skip the spec
/// check: it is refused, unless `--spec` names the spec (checked as from the repository root) or
/// `--no-spec-check` says to check live state only, which the output then says.
#[test]
fn a_saved_plan_applied_elsewhere_needs_its_spec_named_or_no_spec_check() {
    let ws = Workspace::example();
    let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    // An in-place update of the first pool: its resource labels (a multi-host slice pool's
    // max is the slice, so it is no knob).
    let plan_max = |ws: &Workspace, from: &str, to: &str| {
        ws.edit(
            &format!("autoscaling: {{min: 0, max: 4}}{from}"),
            &format!("autoscaling: {{min: 0, max: 4}}\n    resourceLabels: {{size: {to}}}"),
        );
        let out = run(
            ws,
            &["plan", "infra", "--env", "local", "--out", "plan.json"],
        );
        assert!(out.status.success(), "{}", explain(&out));
    };
    plan_max(&ws, "", "large");

    // Neither: refused, naming where the spec was looked for and the ways out.
    let out = apply_elsewhere(&ws, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the spec the plan was made from is not at infra/gkq.yaml"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was applied"), "{stderr}");
    assert!(
        stderr.contains("--spec PATH") && stderr.contains("--no-spec-check"),
        "{stderr}"
    );
    assert_eq!(summary(&ws)["update"], 1, "nothing was applied");
    // A --spec that names nothing is refused the same way.
    let out = apply_elsewhere(&ws, &["--spec", "../nowhere"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("is not at ../nowhere"),
        "{}",
        explain(&out)
    );
    // The flags are for plan files only.
    let out = run(
        &ws,
        &["apply", "infra", "--env", "local", "--no-spec-check"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("are for applying a plan file"),
        "{}",
        explain(&out)
    );

    // --spec names it: checked (a changed spec is refused), then applied.
    std::fs::write(
        ws.path().join("infra/train.py"),
        "print('changed')
",
    )
    .unwrap();
    let out = apply_elsewhere(&ws, &["--spec", "../infra"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(
        text(&out.stderr).contains("the spec changed since the plan was made (train.py changed)"),
        "{}",
        explain(&out)
    );
    std::fs::copy(
        repo_root().join("examples/tpu-dws/train.py"),
        ws.path().join("infra/train.py"),
    )
    .unwrap();
    let out = apply_elsewhere(&ws, &["--spec", "../infra"]);
    assert!(out.status.success(), "{}", explain(&out));
    assert!(
        !text(&out.stderr).contains("only live state"),
        "{}",
        explain(&out)
    );
    assert_eq!(summary(&ws)["update"], 0);

    // --no-spec-check: applied, and the output says the spec was not checked.
    plan_max(&ws, "\n    resourceLabels: {size: large}", "huge");
    let out = apply_elsewhere(&ws, &["--no-spec-check"]);
    assert!(out.status.success(), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "--no-spec-check: the spec the plan was made from (infra/gkq.yaml) is not read, so only live state is checked against the plan"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("Modifications complete"), "{stderr}");
    assert_eq!(summary(&ws)["update"], 0);
}

#[test]
fn plan_files_hold_no_variable_values_or_environment_secrets() {
    let ws = Workspace::example();
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
    let ws = Workspace::example();
    let schema: Value = read_json(&repo_root().join("schemas/plan.schema.json"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let plan_json = |ws: &Workspace| {
        let out = run(
            ws,
            &[
                "plan",
                "infra",
                "--env",
                "local",
                "-o",
                "json",
                "--detailed-exitcode",
            ],
        );
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
        run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"])
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
        run(
            &ws,
            &["plan", "infra", "--env", "local", "--detailed-exitcode"]
        )
        .status
        .code(),
        Some(1)
    );
}

#[test]
fn markdown_for_pull_requests_matches_its_snapshot() {
    let ws = Workspace::example();
    let commit = ws.commit_all("the example");
    let out = run(&ws, &["plan", "infra", "--env", "local", "-o", "markdown"]);
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
        run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"])
            .status
            .success()
    );
    ws.edit("tpuTopology: 4x4", "tpuTopology: 2x4");
    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 2}",
    );
    let out = run(&ws, &["plan", "infra", "--env", "local", "-o", "markdown"]);
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

/// What validation says of the spec reaches the reviewer: a warning (a quota above what the pool
/// can ever hold) and the spec's note are in `-o json`'s notices and in the markdown comment,
/// not only on stderr.
#[test]
fn spec_warnings_and_notes_are_in_the_plans_json_and_markdown() {
    let ws = Workspace::example();
    // The on-demand pool holds at most 4 nodes x 4 chips.
    ws.edit(
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 16}",
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 32}",
    );
    let warning =
        "nominal quota google.com/tpu 32 exceeds what node pool on-demand-pool can ever hold";
    let out = run(&ws, &["plan", "infra", "--env", "local", "-o", "json"]);
    assert!(out.status.success(), "{}", explain(&out));
    // Validation still prints it on stderr, with its source.
    assert!(text(&out.stderr).contains(warning), "{}", explain(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let notices = plan["notices"].as_array().unwrap();
    let found = notices
        .iter()
        .find(|n| n["message"].as_str().unwrap().contains(warning))
        .unwrap_or_else(|| panic!("no quota warning in {notices:#?}"));
    assert_eq!(found["severity"], "warning");
    assert!(
        found["at"].as_str().unwrap().starts_with("infra/gkq.yaml:"),
        "{found:#}"
    );
    assert_eq!(
        found["path"],
        "kueue.clusterQueues[0].resourceGroups[0].flavors[1].quota.\"google.com/tpu\""
    );
    assert!(
        found["help"].as_str().unwrap().contains("max nodes"),
        "{found:#}"
    );
    assert!(
        notices
            .iter()
            .any(|n| n["severity"] == "note"
                && n["message"].as_str().unwrap().contains("gke-queued")),
        "{notices:#?}"
    );

    let out = run(&ws, &["plan", "infra", "--env", "local", "-o", "markdown"]);
    assert!(out.status.success(), "{}", explain(&out));
    let markdown = text(&out.stdout);
    assert!(
        markdown
            .contains("> [!WARNING]\n> The spec has warnings:\n> - **warning**: `infra/gkq.yaml:"),
        "{markdown}"
    );
    assert!(markdown.contains(warning), "{markdown}");
    assert!(
        markdown.contains("- **note**: `infra/gkq.yaml:") && markdown.contains("gke-queued"),
        "{markdown}"
    );
}

/// `validate` and `plan` say all the spec's warnings and notes; `apply` says them once, when it
/// writes something; `status` only the warnings (it writes nothing the notes speak of);
/// `explain` only what concerns the job explained; `-q` hides the notes everywhere.
#[test]
fn each_command_shows_the_spec_notes_that_concern_its_result() {
    let ws = Workspace::example();
    ws.edit(
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 16}",
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 32}",
    );
    let warning = "nominal quota google.com/tpu 32 exceeds";
    let note = "note: queue `user-queue` can place this job on a DWS flavor";
    let stderr = |args: &[&str]| {
        let out = match args[0] {
            // `validate` reads no state.
            "validate" => gkq().args(args).current_dir(ws.path()).output().unwrap(),
            _ => run(&ws, args),
        };
        assert!(out.status.success(), "{args:?}: {}", explain(&out));
        text(&out.stderr)
    };
    let count = |text: &str, what: &str| text.matches(what).count();
    for command in ["validate", "plan"] {
        for quiet in [false, true] {
            let mut args = vec![command, "infra", "--env", "local"];
            if quiet {
                args.push("-q");
            }
            let said = stderr(&args);
            let shown = (count(&said, warning), count(&said, note));
            assert_eq!(shown, (1, usize::from(!quiet)), "{args:?}: {said}");
        }
    }
    let apply = ["apply", "infra", "--env", "local", "--auto-approve"];
    let said = stderr(&apply);
    assert_eq!(
        (count(&said, warning), count(&said, note)),
        (1, 1),
        "{said}"
    );
    // Nothing to change: nothing they concern.
    let said = stderr(&apply);
    assert_eq!(
        (count(&said, warning), count(&said, note)),
        (0, 0),
        "{said}"
    );
    for quiet in [false, true] {
        let mut args = vec!["status", "infra", "--env", "local"];
        if quiet {
            args.push("-q");
        }
        let said = stderr(&args);
        assert_eq!(
            (count(&said, warning), count(&said, note)),
            (1, 0),
            "{said}"
        );
        let mut args = vec![
            "explain",
            "default/rayjob-tpu-v6e-dws-2",
            "infra",
            "--env",
            "local",
        ];
        if quiet {
            args.push("-q");
        }
        let said = stderr(&args);
        assert_eq!(
            (count(&said, warning), count(&said, note)),
            (0, usize::from(!quiet)),
            "{said}"
        );
    }
}

fn read_digest(markdown: &str) -> String {
    let start = markdown.find("digest `").expect("a provenance line") + "digest `".len();
    markdown[start..start + 12].to_string()
}

#[test]
fn plans_record_the_commit_they_were_made_from() {
    let ws = Workspace::example();
    let first = ws.commit_all("max 4");
    let plan_at = |extra: &[&str]| {
        let mut args = vec!["plan", "infra", "--env", "local", "-o", "json"];
        args.extend_from_slice(extra);
        let out = run(&ws, &args);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // A clean checkout: HEAD is the commit.
    assert_eq!(plan_at(&[])["provenance"]["spec"]["commit"], first.as_str());

    ws.edit(
        "autoscaling: {min: 0, max: 4}",
        "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: large}",
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
    let size_label_of = |plan: &Value| {
        plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["addr"] == "gke.nodepool/on-demand-pool")
            .unwrap()["desired"]["config"]["resourceLabels"]["size"]
            .clone()
    };
    assert_eq!(size_label_of(&dirty), "large");
    assert_eq!(size_label_of(&committed), Value::Null);

    let second = ws.commit_all("size label");
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
    let ws = Workspace::example();
    let first = ws.commit_all("first");
    let status = |ws: &Workspace| {
        let out = run(ws, &["status", "infra", "--env", "local", "-o", "json"]);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let before = status(&ws);
    assert_eq!(before["appliedLabels"], Value::Null);
    assert_eq!(before["specMatchesApplied"], Value::Null);
    assert_eq!(before["drift"]["changes"], true);
    assert_eq!(before["local"]["head"], first.as_str());
    assert_eq!(before["local"]["clean"], true);

    let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
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
        "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: large}",
    );
    let second = ws.commit_all("second");
    let moved = status(&ws);
    assert_eq!(moved["specMatchesApplied"], false);
    assert_eq!(moved["drift"]["changes"], true);
    assert_eq!(moved["local"]["head"], second.as_str());
    let out = run(&ws, &["status", "infra", "--env", "local"]);
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

/// Issue 28: after a quota raise that moves nothing, status compares each job Kueue placed with
/// the prediction recorded when it was submitted (job 2 went to dws because on-demand was full;
/// predicted again now it would go to on-demand, and status cried wolf). A job is re-predicted
/// only while it waits; a run no apply recorded has no record to compare with.
#[test]
fn status_compares_placed_jobs_with_the_prediction_recorded_at_apply() {
    let ws = Workspace::example();
    let first = ws.commit_all("first");
    let apply = |ws: &Workspace| {
        let out = run(ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
        assert!(out.status.success(), "{}", explain(&out));
    };
    let status = |ws: &Workspace| {
        let out = run(ws, &["status", "infra", "--env", "local", "-o", "json"]);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let job = |status: &Value, n: usize| -> Value {
        status["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == format!("rayjob-tpu-v6e-dws-{n}"))
            .cloned()
            .unwrap_or_else(|| panic!("no job {n}: {status:#}"))
    };
    let tpu_flavor = |placement: &Value| -> Value {
        placement["podsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "tpu-group")
            .map(|p| p["flavor"].clone())
            .unwrap_or_else(|| panic!("no tpu-group in {placement:#}"))
    };
    apply(&ws);
    let applied = status(&ws);
    for (n, flavor) in [(1, "on-demand"), (2, "dws")] {
        let job = job(&applied, n);
        assert_eq!(tpu_flavor(&job["observed"]), flavor, "{job:#}");
        assert_eq!(job["comparedWith"]["source"], "record", "{job:#}");
        assert_eq!(job["comparedWith"]["commit"], first.as_str(), "{job:#}");
        assert_eq!(
            job["comparedWith"]["appliedAt"], applied["applied"]["appliedAt"],
            "{job:#}"
        );
        assert_eq!(tpu_flavor(&job["predicted"]), flavor, "{job:#}");
        assert_eq!(job["agrees"], true, "{job:#}");
    }

    // On-demand now holds both jobs; the raise moves neither.
    ws.edit(
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 16}",
        "quota: {cpu: 80, memory: 150Gi, google.com/tpu: 32}",
    );
    let second = ws.commit_all("raise the on-demand TPU quota");
    apply(&ws);
    let raised = status(&ws);
    assert_eq!(raised["applied"]["commit"], second.as_str(), "{raised:#}");
    assert_eq!(raised["drift"]["changes"], false, "{raised:#}");
    let job2 = job(&raised, 2);
    assert_eq!(tpu_flavor(&job2["observed"]), "dws", "{job2:#}");
    assert_eq!(tpu_flavor(&job2["predicted"]), "dws", "{job2:#}");
    assert_eq!(job2["agrees"], true, "{job2:#}");
    // The record is the first apply's, kept for the run it predicted.
    assert_eq!(job2["comparedWith"]["commit"], first.as_str(), "{job2:#}");
    let out = run(&ws, &["status", "infra", "--env", "local"]);
    let shown = text(&out.stdout);
    assert!(!shown.contains("DIFFERS"), "{shown}");
    assert!(
        shown.contains(&format!(
            "— agrees (recorded by the apply of commit {}",
            &first[..12]
        )),
        "{shown}"
    );

    // The revision ConfigMap as an earlier gkq wrote it, without placements: the placed jobs
    // have no record, and are not predicted again as if they were new.
    forget_recorded_placements(&ws);
    let forgotten = status(&ws);
    for n in [1, 2] {
        let job = job(&forgotten, n);
        assert_eq!(job["comparedWith"]["source"], "no-record", "{job:#}");
        assert_eq!(job["agrees"], Value::Null, "{job:#}");
        assert_eq!(job["predicted"], Value::Null, "{job:#}");
    }
    let out = run(&ws, &["status", "infra", "--env", "local"]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("predicted:  no record: gkq did not submit this run of the job"),
        "{shown}"
    );
    assert!(!shown.contains("DIFFERS"), "{shown}");

    // A third run, not yet submitted: predicted now, over the live queues (on-demand has room
    // for it beside job 1).
    ws.edit("count: 2 ", "count: 3 ");
    let planned = status(&ws);
    let job3 = job(&planned, 3);
    assert_eq!(job3["comparedWith"]["source"], "prediction", "{job3:#}");
    assert_eq!(job3["submitted"], false, "{job3:#}");
    assert_eq!(tpu_flavor(&job3["predicted"]), "on-demand", "{job3:#}");
}

/// Removes `placements.json` from the revision ConfigMap in the local target's Kubernetes, as a
/// gkq from before placements were recorded would have left it.
fn forget_recorded_placements(ws: &Workspace) {
    let path = ws
        .path()
        .join("state/clusters/local-project/us-east5-b/tpu-cluster/kubernetes.json");
    let mut world = read_json(&path);
    let configmap = world["store"]["objects"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .map(|entry| {
            if entry.get("object").is_some() {
                &mut entry["object"]
            } else {
                entry
            }
        })
        .find(|o| o["metadata"]["name"] == "gkq-revision-tpu-cluster")
        .expect("the revision ConfigMap");
    let data = configmap["data"].as_object_mut().unwrap();
    assert!(data.remove("placements.json").is_some(), "{data:#?}");
    std::fs::write(&path, serde_json::to_string(&world).unwrap()).unwrap();
}

#[test]
fn a_second_apply_on_the_local_target_is_refused_while_the_lock_is_held() {
    let ws = Workspace::example();
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
    let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("is held by alice@laptop pid 4242, for"),
        "{stderr}"
    );
    assert!(stderr.contains("--lock-timeout"), "{stderr}");
    assert_eq!(summary(&ws)["create"], 14, "nothing was applied");

    // With a timeout it waits, and goes ahead once the lock is released.
    let mut waiting = gkq()
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
        let mut command = gkq();
        command
            .args(["watch", "infra", "--env", "local", "--state-dir"])
            .arg(ws.path().join("state"))
            .args(extra)
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
        let ws = Workspace::example();
        assert!(
            run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"])
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
            "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: large}",
        );
        let (shown, took) = w.wait_for("the edit's plan", WAIT, |out| {
            // The plan's own summary line ends its text.
            out.contains("\nPlan: 0 to create, 1 to update")
        });
        assert!(shown.contains("spec changed (gkq.yaml)"), "{shown}");
        assert!(shown.contains("gke.nodepool/on-demand-pool"), "{shown}");
        assert!(
            shown.contains("config.resourceLabels.size: (absent) -> \"large\""),
            "{shown}"
        );
        eprintln!("save -> plan printed: {took:?}");

        // Unchanged plans are not printed again: the drift check runs every second, and the next
        // thing printed is the drift below, not a repeat of the plan above.
        std::thread::sleep(Duration::from_millis(2500));
        // Someone changes the pool behind the spec's back.
        let other = Workspace::example();
        other.edit(
            "autoscaling: {min: 0, max: 4}",
            "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: huge}",
        );
        let state = ws.path().join("state");
        // The watcher's drift checks save the simulation under the state directory's lock;
        // an apply must wait out those moments rather than fail.
        let applied = run(
            &other,
            &[
                "apply",
                "infra",
                "--env",
                "local",
                "--auto-approve",
                "--state-dir",
                state.to_str().unwrap(),
            ],
        );
        assert!(
            applied.status.success(),
            "{}",
            String::from_utf8_lossy(&applied.stderr)
        );
        let (shown, _) = w.wait_for("the drift", WAIT, |out| {
            out.contains("\nPlan: 0 to create, 1 to update")
        });
        assert!(
            shown.contains("config.resourceLabels.size: \"huge\" -> \"large\""),
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
        let ws = Workspace::example();
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
        // The local target's simulated Kueue admitted job 1 on the pool being replaced: stopping
        // it needs its own consent.
        assert!(
            shown.contains(
                "not applying: this plan stops running work: RayJob default/rayjob-tpu-v6e-dws-1 (admitted) (by gke.nodepool/on-demand-pool)"
            ),
            "{shown}"
        );
        assert!(shown.contains("pass --allow-disruption"), "{shown}");
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            super::summary(&ws)["replace"],
            1,
            "the replace was not applied"
        );
        let (code, stderr) = w.interrupt();
        assert_eq!(code, Some(0));
        // The spec's note, with the first plan that writes; not again with each later plan. The
        // warning the edit brings (a quota above the smaller pool), once, with the edit's plan.
        let once = |what: &str| stderr.matches(what).count();
        assert_eq!(
            once("note: queue `user-queue` can place this job on a DWS flavor"),
            1,
            "{stderr}"
        );
        assert_eq!(
            once("nominal quota google.com/tpu 16 exceeds"),
            1,
            "{stderr}"
        );
    }

    #[test]
    fn watch_follows_a_remote_branch() {
        // origin: a bare repository; ws: a clone that watch runs in; author: another clone that
        // pushes to origin.
        let ws = Workspace::example();
        ws.commit_all("first");
        let origin = tempfile::tempdir().unwrap();
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
            "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: huge}",
        );

        let author = tempfile::tempdir().unwrap();
        git(author.path(), &["clone", "-q", origin_url, "."]);
        let spec = author.path().join("infra/gkq.yaml");
        let text_before = std::fs::read_to_string(&spec).unwrap();
        std::fs::write(
            &spec,
            text_before.replacen(
                "autoscaling: {min: 0, max: 4}",
                "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: large}",
                1,
            ),
        )
        .unwrap();
        git(
            author.path(),
            &["commit", "-q", "-am", "label the on-demand pool"],
        );
        git(author.path(), &["push", "-q", "origin", "main"]);
        let pushed = git(author.path(), &["rev-parse", "HEAD"]);

        let (shown, _) = w.wait_for("the new commit's plan", WAIT, |out| {
            out.contains("\nPlan: 14 to create")
        });
        assert!(shown.contains("size: large"), "{shown}");
        assert!(
            shown.contains(&format!("new commit {}", &pushed[..12])),
            "{shown}"
        );
        assert!(!shown.contains("size: huge"), "{shown}");
        let (code, _) = w.interrupt();
        assert_eq!(code, Some(0));
    }
}

/// The promises of "What gkq guarantees" in the README, on the local target.
mod guarantees {
    use super::*;

    impl Workspace {
        /// [`Workspace::run`] with extra environment variables.
        fn run_env(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
            let state = self.path().join("state");
            let mut all: Vec<&str> = args.to_vec();
            let saved_plan = args.len() > 1 && args[0] == "apply" && args[1].ends_with(".json");
            if !args.contains(&"--state-dir") && !saved_plan {
                all.extend(["--state-dir", state.to_str().unwrap()]);
            }
            let mut command = gkq();
            command.args(&all).current_dir(self.path());
            for (k, v) in env {
                command.env(k, v);
            }
            command.output().unwrap()
        }
    }

    fn plan_json(ws: &Workspace) -> Value {
        let out = run(ws, &["plan", "infra", "--env", "local", "-o", "json"]);
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    #[test]
    fn replacing_a_running_job_is_a_disruption_refused_without_consent() {
        let ws = Workspace::example();
        let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
        assert!(out.status.success(), "{}", explain(&out));
        // A new training script makes both jobs new runs; job 1 is admitted on on-demand and
        // job 2 holds quota on dws while its ProvisioningRequest waits.
        std::fs::write(ws.path().join("infra/train.py"), "print('v2')\n").unwrap();

        let out = run(
            &ws,
            &["plan", "infra", "--env", "local", "--detailed-exitcode"],
        );
        assert_eq!(out.status.code(), Some(3), "{}", explain(&out));
        let stdout = text(&out.stdout);
        assert!(stdout.contains("This plan stops running work"), "{stdout}");
        assert!(
            stdout.contains("ray.rayjob/default/rayjob-tpu-v6e-dws-1 would stop:\n    - RayJob default/rayjob-tpu-v6e-dws-1 (admitted)"),
            "{stdout}"
        );
        assert!(
            stdout.contains("- RayJob default/rayjob-tpu-v6e-dws-2 (quota reserved)"),
            "{stdout}"
        );
        let plan = plan_json(&ws);
        let disrupted: Vec<&str> = plan["disruptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["addr"].as_str().unwrap())
            .collect();
        assert_eq!(
            disrupted,
            [
                "ray.rayjob/default/rayjob-tpu-v6e-dws-1",
                "ray.rayjob/default/rayjob-tpu-v6e-dws-2"
            ]
        );

        // apply refuses, interactively approved or from a saved plan, and changes nothing.
        let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
        assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
        assert!(
            text(&out.stderr).contains("refusing to apply: this plan stops running work"),
            "{}",
            explain(&out)
        );
        let out = run(
            &ws,
            &["plan", "infra", "--env", "local", "--out", "plan.json"],
        );
        assert!(out.status.success(), "{}", explain(&out));
        let out = run(&ws, &["apply", "plan.json"]);
        assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
        assert!(text(&out.stderr).contains("stops running work"));
        assert_eq!(summary(&ws)["replace"], 2, "nothing was replaced");

        // With consent the new runs replace the old ones.
        let out = run(
            &ws,
            &[
                "apply",
                "infra",
                "--env",
                "local",
                "--auto-approve",
                "--allow-disruption",
            ],
        );
        assert!(out.status.success(), "{}", explain(&out));
        assert_eq!(summary(&ws)["replace"], 0);
    }

    #[test]
    fn a_new_run_of_a_finished_job_stops_nothing() {
        let ws = Workspace::example();
        // A fast clock: the jobs are admitted, provisioned, run their 2 minutes and finish.
        let fast = [("GKQ_LOCAL_CLOCK", "600x"), ("GKQ_LOCAL_RUN", "30s")];
        let out = ws.run_env(
            &fast,
            &["apply", "infra", "--env", "local", "--auto-approve"],
        );
        assert!(out.status.success(), "{}", explain(&out));
        let mut finished = false;
        for _ in 0..40 {
            std::thread::sleep(std::time::Duration::from_millis(500));
            let out = ws.run_env(&fast, &["status", "infra", "--env", "local"]);
            let shown = text(&out.stdout);
            if shown.matches("Succeeded").count() + shown.matches("Complete").count() >= 2 {
                finished = true;
                break;
            }
        }
        assert!(finished, "the jobs did not finish");
        std::fs::write(ws.path().join("infra/train.py"), "print('v2')\n").unwrap();
        let out = ws.run_env(
            &fast,
            &["plan", "infra", "--env", "local", "--detailed-exitcode"],
        );
        assert_eq!(out.status.code(), Some(2), "{}", explain(&out));
        assert!(!text(&out.stdout).contains("stops running work"));
        let out = ws.run_env(
            &fast,
            &["apply", "infra", "--env", "local", "--auto-approve"],
        );
        assert!(out.status.success(), "{}", explain(&out));
    }

    /// Plan a ClusterQueue change, let the cluster get busy, apply the saved plan; `alone`
    /// applies it away from the spec (only fingerprints are checked then).
    fn saved_plan_in_a_busy_cluster(alone: bool) {
        let ws = Workspace::example();
        let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
        assert!(out.status.success(), "{}", explain(&out));
        // A plan that only changes a ClusterQueue quota, saved on the pull request...
        ws.edit(
            "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 16}",
            "quota: {cpu: 48, memory: 75Gi, google.com/tpu: 16}",
        );
        let out = run(
            &ws,
            &["plan", "infra", "--env", "local", "--out", "plan.json"],
        );
        assert!(out.status.success(), "{}", explain(&out));
        assert_eq!(
            read_json(&ws.path().join("plan.json"))["summary"]["update"],
            1
        );
        // ...while the cluster is busy: flex-start capacity arrives, Kueue admits job 2 (it
        // unsuspends the RayJob), Ray starts the jobs, nodes scale.
        let busy = [("GKQ_LOCAL_CLOCK", "60x")];
        std::thread::sleep(std::time::Duration::from_secs(1));
        let out = ws.run_env(&busy, &["status", "infra", "--env", "local"]);
        assert!(out.status.success(), "{}", explain(&out));
        let shown = text(&out.stdout);
        assert!(
            shown.contains("rayjob-tpu-v6e-dws-2 -> dws: admitted")
                || shown.contains("rayjob-tpu-v6e-dws-2 -> dws: finished"),
            "job 2 was admitted in between: {}",
            explain(&out)
        );
        // ...and applied on merge: admissions are not what the plan depends on.
        let out = if alone {
            apply_alone(&ws)
        } else {
            run(&ws, &["apply", "plan.json"])
        };
        assert!(out.status.success(), "{}", explain(&out));
        assert!(
            text(&out.stderr).contains("Modifications complete"),
            "{}",
            explain(&out)
        );
        assert_eq!(summary(&ws)["update"], 0);
    }

    #[test]
    fn a_saved_plan_survives_a_busy_cluster() {
        saved_plan_in_a_busy_cluster(false);
    }

    #[test]
    fn a_saved_plan_applied_without_its_spec_survives_a_busy_cluster() {
        saved_plan_in_a_busy_cluster(true);
    }

    /// `plan.json` rewritten by `edit`, with a correct plain digest: someone who edits the file
    /// and recomputes the sha256.
    fn forge(ws: &Workspace, edit: impl FnOnce(&mut Value)) {
        let path = ws.path().join("plan.json");
        let mut plan = read_json(&path);
        edit(&mut plan);
        let plan: gkq::plan::Plan = serde_json::from_value(plan).unwrap();
        std::fs::write(&path, gkq::gitops::saved::file_text(&plan, None)).unwrap();
    }

    #[test]
    fn hand_edited_saved_plans_are_refused() {
        let ws = Workspace::example();
        let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
        assert!(out.status.success(), "{}", explain(&out));
        ws.edit(
            "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 16}",
            "quota: {cpu: 48, memory: 75Gi, google.com/tpu: 16}",
        );
        let plan_once = |ws: &Workspace| {
            let out = run(
                ws,
                &["plan", "infra", "--env", "local", "--out", "plan.json"],
            );
            assert!(out.status.success(), "{}", explain(&out));
        };
        let cq = |plan: &mut Value| -> usize {
            plan["actions"]
                .as_array()
                .unwrap()
                .iter()
                .position(|a| a["addr"] == "kueue.clusterqueue/cluster-queue")
                .unwrap()
        };
        let refused = |ws: &Workspace, expected: &str| {
            let out = run(ws, &["apply", "plan.json"]);
            assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
            let stderr = text(&out.stderr);
            assert!(stderr.contains(expected), "{stderr}");
            assert_eq!(summary(ws)["update"], 1, "nothing was applied");
        };

        // 1. A changed quota, the digest left as it was.
        plan_once(&ws);
        let path = ws.path().join("plan.json");
        let text_before = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            text_before
                .replace(
                    "\"cpu\", \"nominalQuota\": 48",
                    "\"cpu\", \"nominalQuota\": 480",
                )
                // A field change shows the quantity as the server stores it: a string.
                .replace("\"after\": \"48\"", "\"after\": \"480\""),
        )
        .unwrap();
        assert_ne!(std::fs::read_to_string(&path).unwrap(), text_before);
        refused(&ws, "plan.json was changed after gkq wrote it");

        // 2. The same with the digest recomputed: planned again from the spec, it differs.
        plan_once(&ws);
        forge(&ws, |plan| {
            let i = cq(plan);
            let action = &mut plan["actions"][i];
            // Spelled as gkq writes a quantity's change: the server's string.
            action["changes"][0]["after"] = serde_json::json!("480");
            let object = &mut action["steps"][0]["object"];
            object["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"] =
                serde_json::json!(480);
            action["desired"] = object.clone();
        });
        refused(
            &ws,
            "kueue.clusterqueue/cluster-queue: the plan file sets spec.resourceGroups[0].flavors[1].resources[0].nominalQuota to \"480\"; the spec says \"48\"",
        );

        // 3. An update turned into a delete.
        plan_once(&ws);
        forge(&ws, |plan| {
            let i = cq(plan);
            let action = &mut plan["actions"][i];
            action["kind"] = serde_json::json!("delete");
            action["steps"] = serde_json::json!([{"call": "kubernetes.delete",
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "cluster-queue"}]);
            plan["summary"]["update"] = serde_json::json!(0);
            plan["summary"]["delete"] = serde_json::json!(1);
        });
        refused(
            &ws,
            "kueue.clusterqueue/cluster-queue: the plan file would destroy it; planning now would update in-place it",
        );

        // 4. An action added that makes someone cluster-admin.
        plan_once(&ws);
        forge(&ws, |plan| {
            let binding = serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding", "metadata": {"name": "pwned"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.k8s.io"}]});
            plan["actions"].as_array_mut().unwrap().push(serde_json::json!({
                "addr": "k8s.clusterrolebinding/pwned", "kind": "create", "reason": "",
                "changes": [], "diff": "", "steps": [{"call": "kubernetes.apply", "object": binding}],
                "desired": binding, "dependsOn": []}));
            plan["summary"]["create"] = serde_json::json!(1);
        });
        refused(
            &ws,
            "k8s.clusterrolebinding/pwned: the plan file would create it; planning now changes nothing there",
        );

        // The plan as gkq wrote it applies.
        plan_once(&ws);
        let out = run(&ws, &["apply", "plan.json"]);
        assert!(out.status.success(), "{}", explain(&out));
    }

    #[test]
    fn secret_values_never_appear_in_plans_files_logs_or_status() {
        let ws = Workspace::example();
        // A Secret in `manifests:` and a sensitive variable used in it and in a ConfigMap.
        let spec = std::fs::read_to_string(ws.spec_file()).unwrap();
        let spec = spec.replacen(
            "variables:\n",
            "variables:\n  HF_TOKEN:\n    sensitive: true\n",
            1,
        ) + r#"
manifests:
  - apiVersion: v1
    kind: Secret
    metadata: {name: training-secrets, namespace: default}
    stringData:
      hf-token: ${HF_TOKEN}
      db-password: "literal-Pa55word"
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: login, namespace: default}
    data:
      login.sh: "huggingface-cli login --token ${HF_TOKEN}"
"#;
        std::fs::write(ws.spec_file(), spec).unwrap();
        let secrets = [
            "hf_FIRSTtoken123",
            "aGZfRklSU1R0b2tlbjEyMw", // base64 of the token, as the server stores it
            "literal-Pa55word",
            "bGl0ZXJhbC1QYTU1d29yZA", // base64 of the password
            "hf_SECONDtoken456",
            "aGZfU0VDT05EdG9rZW40NT",
        ];
        let check = |what: &str, out: &Output| {
            let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
            for secret in secrets {
                assert!(!all.contains(secret), "{what} shows {secret}:\n{all}");
            }
        };
        let var = "HF_TOKEN=hf_FIRSTtoken123";
        let trace = [("RUST_LOG", "trace")];
        for format in ["text", "json", "markdown"] {
            let out = ws.run_env(
                &trace,
                &[
                    "plan", "infra", "--env", "local", "--var", var, "-o", format,
                ],
            );
            assert!(out.status.success(), "{}", explain(&out));
            check(&format!("plan -o {format}"), &out);
        }
        let out = run(&ws, &["render", "infra", "--env", "local", "--var", var]);
        check("render", &out);
        let out = ws.run_env(
            &trace,
            &[
                "apply",
                "infra",
                "--env",
                "local",
                "--var",
                var,
                "--auto-approve",
                "-o",
                "json",
            ],
        );
        assert!(out.status.success(), "{}", explain(&out));
        check("apply -o json at RUST_LOG=trace", &out);
        let out = ws.run_env(&trace, &["status", "infra", "--env", "local", "--var", var]);
        check("status", &out);

        // A new token: the plan says which values change, not what they are, and the saved plan
        // applies with the values read from the spec.
        let var = "HF_TOKEN=hf_SECONDtoken456";
        let out = run(
            &ws,
            &[
                "plan",
                "infra",
                "--env",
                "local",
                "--var",
                var,
                "--out",
                "plan.json",
            ],
        );
        assert!(out.status.success(), "{}", explain(&out));
        check("plan of a changed secret", &out);
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("k8s.secret/default/training-secrets"),
            "{stdout}"
        );
        assert!(
            stdout.contains("stringData.hf-token: (sensitive value changed)"),
            "{stdout}"
        );
        assert!(
            stdout.contains(r#"data["login.sh"]: (sensitive value changed)"#),
            "{stdout}"
        );
        let saved = std::fs::read_to_string(ws.path().join("plan.json")).unwrap();
        for secret in secrets {
            assert!(!saved.contains(secret), "plan.json holds {secret}");
        }
        let out = ws.run_env(&trace, &["apply", "plan.json", "--var", var]);
        assert!(out.status.success(), "{}", explain(&out));
        check("apply plan.json at RUST_LOG=trace", &out);
        // The cluster got the new value (its own storage is where secrets belong).
        let world = std::fs::read_to_string(
            ws.path()
                .join("state/clusters/local-project/us-east5-b/tpu-cluster/kubernetes.json"),
        )
        .unwrap();
        assert!(
            world.contains("hf_SECONDtoken456") || world.contains("aGZfU0VDT05EdG9rZW40NTY="),
            "the new token was applied"
        );
        let out = run(
            &ws,
            &[
                "plan",
                "infra",
                "--env",
                "local",
                "--var",
                var,
                "--detailed-exitcode",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", explain(&out));

        // watch shows the plan back to the first token: markers only, also at trace level.
        let mut command = gkq();
        command
            .args([
                "watch",
                "infra",
                "--env",
                "local",
                "--interval",
                "1h",
                "--state-dir",
            ])
            .arg(ws.path().join("state"))
            .args(["--var", "HF_TOKEN=hf_FIRSTtoken123"])
            .env("RUST_LOG", "trace")
            .current_dir(ws.path());
        let mut watching = process::Running::spawn(command);
        let (shown, _) = watching.wait_for(
            "the watch plan",
            std::time::Duration::from_secs(30),
            |out| out.contains("\nPlan: 0 to create, 2 to update"),
        );
        let (_, stderr) = watching.interrupt();
        for secret in secrets {
            assert!(!shown.contains(secret), "watch shows {secret}:\n{shown}");
            assert!(!stderr.contains(secret), "watch logs {secret}:\n{stderr}");
        }
        assert!(shown.contains("(sensitive value changed)"), "{shown}");

        // Away from the spec, the plan file cannot supply the values: refused up front.
        let var = "HF_TOKEN=hf_FIRSTtoken123";
        let out = run(
            &ws,
            &[
                "plan",
                "infra",
                "--env",
                "local",
                "--var",
                var,
                "--out",
                "plan.json",
            ],
        );
        assert!(out.status.success(), "{}", explain(&out));
        let out = apply_alone(&ws);
        assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
        assert!(
            text(&out.stderr).contains("writes sensitive values, which a plan file never holds"),
            "{}",
            explain(&out)
        );
    }
}

/// `gkq status` reads the GKE cluster once: planning reads it (with its node pools) and the
/// status report uses that snapshot, not reads of its own.
#[tokio::test(flavor = "multi_thread")]
async fn status_reads_the_gke_cluster_once() {
    use gkq::emulator::{Emulator, EmulatorConfig};
    let (url, handle) = Emulator::start_in_process(EmulatorConfig {
        pending_ms: 10,
        running_ms: 10,
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gkq.yaml"),
        "project: p\nlocation: us-east5-b\ncluster: {name: once}\nnodePools:\n  - {name: cpu, machineType: e2-standard-4, autoscaling: {min: 0, max: 2}}\nkueue: {install: external}\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let mut c = gkq();
        c.args(args)
            .arg(dir.path())
            .args(["--target", "gcp", "--gke-endpoint", &url]);
        c.output().unwrap()
    };
    let out = tokio::task::block_in_place(|| run(&["apply", "--auto-approve"]));
    assert!(out.status.success(), "{}", explain(&out));
    handle.emulator().clear_requests();
    let out = tokio::task::block_in_place(|| run(&["status"]));
    assert!(out.status.success(), "{}", explain(&out));
    let cluster_reads: Vec<String> = handle
        .emulator()
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/clusters/once"))
        .map(|r| r.path)
        .collect();
    assert_eq!(cluster_reads.len(), 1, "{cluster_reads:?}");
}

/// What a reviewer reads (issue 31), on the applied example: a quota change shows both values in
/// one spelling, a script change shows the script's text diff once with the digest it makes the
/// jobs carry in one line, a label change names the API method once per object.
#[test]
fn plan_text_of_a_quota_a_script_and_a_label_change() {
    let ws = Workspace::example();
    let applied = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
    assert!(applied.status.success(), "{}", explain(&applied));
    let plan = |ws: &Workspace| {
        let out = run(ws, &["plan", "infra", "--env", "local"]);
        assert!(out.status.success(), "{}", explain(&out));
        text(&out.stdout)
    };
    let original = std::fs::read_to_string(ws.spec_file()).unwrap();

    ws.edit(
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 16}",
        "quota: {cpu: 80, memory: 100Gi, google.com/tpu: 16}",
    );
    let quota = plan(&ws);
    assert!(quota.contains("nominalQuota: 40 -> 80"), "{quota}");
    assert!(quota.contains("nominalQuota: 75Gi -> 100Gi"), "{quota}");
    assert!(!quota.contains("server-side apply)"), "{quota}");
    insta::assert_snapshot!("plan_text_quota_change", quota);
    std::fs::write(ws.spec_file(), &original).unwrap();

    let script = ws.spec_dir().join("train.py");
    let text_before = std::fs::read_to_string(&script).unwrap();
    std::fs::write(
        &script,
        text_before.replacen("import time\n", "import time\nimport os\n", 1),
    )
    .unwrap();
    let changed = plan(&ws);
    assert_eq!(
        changed.matches("+    import os\n").count(),
        1,
        "the script's diff, once:\n{changed}"
    );
    assert!(!changed.contains("\"import time"), "{changed}");
    assert!(
        changed.contains(r#"data["train.py"]: text changed, +1 -0 lines"#),
        "{changed}"
    );
    assert!(
        !changed.contains("gkq.dev/script-sha256: "),
        "the digest is said in the field line only:\n{changed}"
    );
    insta::assert_snapshot!("plan_text_script_change", changed);
    std::fs::write(&script, &text_before).unwrap();

    ws.edit(
        "    queue: user-queue\n",
        "    queue: user-queue\n    labels: {team: ml, cost-center: \"42\"}\n",
    );
    let labels = plan(&ws);
    assert!(
        labels.contains("+ metadata.labels.team: (absent) -> \"ml\""),
        "{labels}"
    );
    assert!(!labels.contains("server-side apply"), "{labels}");
    assert_eq!(
        labels.matches("kubernetes.apply").count(),
        labels.matches("will be updated in-place").count(),
        "the API method once per object:\n{labels}"
    );
    insta::assert_snapshot!("plan_text_label_change", labels);
}

/// `gkq explain` of a live job that waits explains it in the world the spec's plan would make:
/// with the DWS quota at 0 applied, run 2 waits; the spec raises it again (not applied), so
/// explain says Kueue's word and gkq's reproduction of the live state, then what the plan
/// changes and that after that apply the job gets its quota, and offers no fix the spec already
/// makes. With nothing to apply, it says it explains the live state.
#[test]
fn explain_of_a_waiting_live_job_accounts_for_the_plan_of_the_spec() {
    let ws = Workspace::example();
    let (infinite, zero) = (
        "1000000000Gi, google.com/tpu: 1000000000}",
        "1000000000Gi, google.com/tpu: 0}",
    );
    ws.edit(infinite, zero);
    let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let explain_json = |ws: &Workspace| {
        let out = run(
            ws,
            &[
                "explain",
                "default/rayjob-tpu-v6e-dws-2",
                "infra",
                "--env",
                "local",
                "-o",
                "json",
            ],
        );
        assert!(out.status.success(), "{}", explain(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let explain_text = |ws: &Workspace| {
        let out = run(
            ws,
            &[
                "explain",
                "default/rayjob-tpu-v6e-dws-2",
                "infra",
                "--env",
                "local",
            ],
        );
        assert!(out.status.success(), "{}", explain(&out));
        text(&out.stdout)
    };

    // Nothing to apply: the live state, said so; the fix is the DWS quota.
    let live = explain_json(&ws);
    assert_eq!(live["kueue"]["state"], "pending", "{live:#}");
    assert_eq!(live["gkq"]["state"], "pending", "{live:#}");
    assert!(live.get("afterApply").is_none(), "{live:#}");
    assert!(!live["fixes"].as_array().unwrap().is_empty(), "{live:#}");
    assert!(
        explain_text(&ws).contains("changes nothing Kueue decides with: this is the live state"),
        "{}",
        explain_text(&ws)
    );

    // The spec gives dws its quota again, not applied yet.
    ws.edit(zero, infinite);
    let planned = explain_json(&ws);
    assert_eq!(planned["kueue"]["state"], "pending", "{planned:#}");
    assert_eq!(
        planned["gkq"]["state"], "pending",
        "gkq reproduces the live state"
    );
    assert_eq!(planned["agrees"], true, "{planned:#}");
    let after = &planned["afterApply"];
    assert_eq!(
        after["changes"],
        serde_json::json!(["update in-place kueue.clusterqueue/cluster-queue"]),
        "{planned:#}"
    );
    assert_eq!(
        after["gkq"]["state"], "waiting-for-admission-checks",
        "{planned:#}"
    );
    assert_eq!(after["gkq"]["podsets"][1]["flavor"], "dws", "{planned:#}");
    assert_eq!(
        planned["fixes"],
        serde_json::json!([]),
        "the spec already makes the fix"
    );
    let said = explain_text(&ws);
    assert!(
        said.contains(
            "After gkq apply of this spec (update in-place kueue.clusterqueue/cluster-queue):"
        ),
        "{said}"
    );
    assert!(
        said.contains("gkq apply of this spec gets the job its quota"),
        "{said}"
    );

    // Applied: Kueue does what explain said.
    let out = run(&ws, &["apply", "infra", "--env", "local", "--auto-approve"]);
    assert!(out.status.success(), "{}", explain(&out));
    let applied = explain_json(&ws);
    assert_ne!(applied["kueue"]["state"], "pending", "{applied:#}");
    assert_eq!(
        applied["kueue"]["podsets"][1]["flavor"], "dws",
        "{applied:#}"
    );
}
