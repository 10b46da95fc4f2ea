//! The `gkq` binary as users run it: exit codes, stdout/stderr split, and the schema file.

use assert_cmd::assert::OutputAssertExt;
use predicates::prelude::*;

use crate::support::{Workspace, gkq, repo_root};

#[test]
fn checked_in_schema_is_current() {
    let out = gkq().arg("schema").output().unwrap();
    assert!(out.status.success());
    let checked_in = std::fs::read_to_string(repo_root().join("schemas/gkq.schema.json")).unwrap();
    assert!(
        String::from_utf8(out.stdout).unwrap() == checked_in,
        "schemas/gkq.schema.json is stale: run `cargo run -- schema > schemas/gkq.schema.json`"
    );
}

#[test]
fn examples_validate_against_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("schemas/gkq.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let text = std::fs::read_to_string(repo_root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let toml_doc: serde_json::Value = toml::from_str(
        &std::fs::read_to_string(repo_root().join("examples/tpu-dws/gkq.toml")).unwrap(),
    )
    .unwrap();
    assert!(validator.is_valid(&toml_doc));
    // and a wrong document is caught
    assert!(!validator.is_valid(&serde_json::json!({"project": "p", "location": "l", "cluster": {"name": "c"}, "nodePool": []})));
}

#[test]
fn validate_ok_exits_zero_and_names_the_file() {
    gkq()
        .args(["validate", "examples/tpu-dws"])
        .current_dir(repo_root())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "examples/tpu-dws/gkq.yaml is valid",
        ));
}

#[test]
fn validate_bad_spec_exits_one_with_location_on_stderr() {
    gkq()
        .args(["validate", "tests/bad-specs/typo-nodepools.yaml"])
        .current_dir(repo_root())
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "tests/bad-specs/typo-nodepools.yaml:36:1",
        ))
        .stderr(predicate::str::contains("did you mean `nodePools`?"))
        .stderr(predicate::str::contains("nothing was changed"));
}

#[test]
fn validate_json_lists_diagnostics() {
    let out = gkq()
        .args([
            "validate",
            "tests/bad-specs/bad-quantity-gii.yaml",
            "-o",
            "json",
        ])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    let d = &v["diagnostics"][0];
    assert_eq!(d["severity"], "error");
    assert!(d["message"].as_str().unwrap().contains("75Gii"));
    assert!(d["line"].as_u64().unwrap() > 0);
}

/// A sensitive variable set with `--var` (so the value is in no file a snippet could show) in an
/// invalid quantity and an invalid label value: neither the text nor the JSON diagnostics say
/// it, or the suffix the quantity parser read from it; both say where the problem is.
#[test]
fn validate_never_prints_a_sensitive_value() {
    for (spec, var, value, part) in [
        (
            "tests/bad-specs/sensitive-variable-in-quantity.yaml",
            "MEMORY_QUOTA",
            "9876Gii",
            "Gii",
        ),
        (
            "tests/bad-specs/sensitive-variable-in-label.yaml",
            "TEAM",
            "Opal-Wombat-42",
            "Opal-Wombat-42",
        ),
    ] {
        for format in ["text", "json"] {
            let out = gkq()
                .args(["validate", spec, "-o", format, "--var"])
                .arg(format!("{var}={value}"))
                .current_dir(repo_root())
                .output()
                .unwrap();
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(1), "{said}");
            assert!(said.contains("(sensitive value)"), "{said}");
            assert!(said.contains(spec), "{said}");
            assert!(
                !said.contains(value) && !said.contains(part),
                "{spec} -o {format} says the value:\n{said}"
            );
        }
    }
}

#[test]
fn var_flag_overrides_and_undeclared_var_fails() {
    let out = gkq()
        .args([
            "render",
            "examples/tpu-dws",
            "-o",
            "json",
            "--var",
            "PROJECT_ID=acme-ml",
        ])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gke"]["project"], "acme-ml");
    assert_eq!(v["kubernetes"].as_array().unwrap().len(), 11);
    assert_eq!(v["kubernetes"][0]["kind"], "KueueInstallation");
    gkq()
        .args(["validate", "examples/tpu-dws", "--var", "PROJECTID=x"])
        .current_dir(repo_root())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("declares no variable `PROJECTID`"));
}

/// A shell that happens to export `PROJECT_ID` or `CLUSTER_NAME` must not retarget a plan:
/// declared variables are read from the process environment only as `GKQ_VAR_<NAME>`.
#[test]
fn process_variables_need_the_gkq_var_prefix() {
    let project = |envs: &[(&str, &str)], args: &[&str]| {
        let mut c = gkq();
        c.args(["render", "examples/tpu-dws", "-o", "json"])
            .args(args)
            .env_remove("GKQ_VAR_PROJECT_ID")
            .env_remove("PROJECT_ID")
            .current_dir(repo_root());
        for (k, v) in envs {
            c.env(k, v);
        }
        let out = c.assert().success().get_output().clone();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["gke"]["project"].as_str().unwrap().to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The bare name is not read, and gkq says how it would be.
    let (value, stderr) = project(&[("PROJECT_ID", "someone-elses")], &[]);
    assert_eq!(value, "my-project", "{stderr}");
    assert!(stderr.contains("`PROJECT_ID` is not read"), "{stderr}");
    assert!(stderr.contains("GKQ_VAR_PROJECT_ID=VALUE"), "{stderr}");
    // The prefixed one is, and --var still wins over it.
    let (value, stderr) = project(&[("GKQ_VAR_PROJECT_ID", "acme-ml")], &[]);
    assert_eq!(value, "acme-ml");
    assert!(!stderr.contains("is not read"), "{stderr}");
    let (value, _) = project(
        &[("GKQ_VAR_PROJECT_ID", "acme-ml")],
        &["--var", "PROJECT_ID=from-cli"],
    );
    assert_eq!(value, "from-cli");
}

/// Every plan says which variables were set outside the reviewed spec, and how, in the text
/// header, the markdown comment and `-o json`; never with their values.
#[test]
fn plans_name_the_variables_set_outside_the_spec_never_their_values() {
    let ws = Workspace::example();
    let spec = ws.spec_dir();
    let file = spec.as_path().join("gkq.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let declared = "variables:\n  DEPLOY_TOKEN:\n    default: none\n";
    std::fs::write(&file, text.replacen("variables:\n", declared, 1)).unwrap();
    let state = tempfile::tempdir().unwrap();
    let secret = "tok-5ecret-0f-the-environment";
    let plan = |format: &str| {
        let out = gkq()
            .arg("plan")
            .arg(spec.as_path())
            .args(["--env", "local", "--var", "ZONE=us-east5-a", "-o", format])
            .arg("--state-dir")
            .arg(state.path())
            .env("GKQ_VAR_DEPLOY_TOKEN", secret)
            .env_remove("GKQ_VAR_ZONE")
            .env_remove("GKQ_VAR_PROJECT_ID")
            .env_remove("GKQ_VAR_CLUSTER_NAME")
            .assert()
            .success()
            .get_output()
            .clone();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(!stdout.contains(secret), "{stdout}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains(secret));
        stdout
    };
    let text = plan("text");
    assert!(
        text.starts_with("Variables set outside the spec: DEPLOY_TOKEN from the environment (GKQ_VAR_DEPLOY_TOKEN), ZONE from --var\n"),
        "{text}"
    );
    let markdown = plan("markdown");
    assert!(
        markdown.contains("Variables set outside the spec: `DEPLOY_TOKEN` from the environment (`GKQ_VAR_DEPLOY_TOKEN`), `ZONE` from `--var`"),
        "{markdown}"
    );
    let json: serde_json::Value = serde_json::from_str(&plan("json")).unwrap();
    assert_eq!(
        json["provenance"]["spec"]["variableSources"],
        serde_json::json!([
            {"name": "DEPLOY_TOKEN", "source": "environment"},
            {"name": "ZONE", "source": "cli"}
        ]),
        "{json:#}"
    );
}

#[test]
fn render_yaml_is_a_multi_document_stream() {
    let out = gkq()
        .args(["render", "examples/tpu-dws"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    assert_eq!(docs.len(), 12);
    assert_eq!(docs[0]["gke"]["cluster"]["name"], "tpu-cluster");
    assert_eq!(docs[11]["kind"], "RayJob");
}

#[test]
fn missing_spec_is_a_clear_error() {
    gkq()
        .args(["validate", "no/such/dir"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("spec not found: no/such/dir"));
}

/// Flags read durations with the spec's grammar (`1h30m`), and a bad one is refused by name.
#[test]
fn duration_flags_take_the_spec_grammar() {
    for timeout in ["1h30m", "1m 30s", "250ms", "90"] {
        gkq()
            .args(["apply", "no/such/dir", "--lock-timeout", timeout])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("spec not found: no/such/dir"));
    }
    gkq()
        .args(["apply", "no/such/dir", "--lock-timeout", "10 parsecs"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "invalid value '10 parsecs' for '--lock-timeout <DURATION>': unknown unit `parsecs` in `10 parsecs` (units ms, s, m, h or d)",
        ));
    gkq()
        .args(["watch", "no/such/dir", "--interval", "soon"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("`soon` is not a duration"));
}

#[test]
fn git_ref_reads_the_spec_from_a_commit() {
    let dir = Workspace::example();
    let spec_dir = dir.spec_dir();
    let first = dir.commit_all("first");
    // The working tree moves on: the on-demand pool's autoscaler may use any zone.
    let text = std::fs::read_to_string(spec_dir.join("gkq.yaml")).unwrap();
    std::fs::write(
        spec_dir.join("gkq.yaml"),
        text.replacen("max: 4}", "max: 4, locationPolicy: ANY}", 1),
    )
    .unwrap();

    let location_policies = |extra: &[&str]| {
        let mut args = vec!["render", "infra", "-o", "json", "--env", "prod"];
        args.extend_from_slice(extra);
        let out = gkq().args(&args).current_dir(dir.path()).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["gke"]["nodePools"][0]["autoscaling"]["locationPolicy"].clone(),
            v["gke"]["nodePools"][1]["autoscaling"]["locationPolicy"].clone(),
        )
    };
    let any = || serde_json::json!("ANY");
    let unset = || serde_json::Value::Null;
    // The commit leaves both pools to GKE's default; the working tree sets pool 0's.
    assert_eq!(
        location_policies(&["--git-ref", &first]),
        (unset(), unset())
    );
    assert_eq!(location_policies(&[]), (any(), unset()));
    let text = std::fs::read_to_string(spec_dir.join("gkq.yaml")).unwrap();
    std::fs::write(
        spec_dir.join("gkq.yaml"),
        text.replace(
            "max: 4}\n    flexStart",
            "max: 4, locationPolicy: ANY}\n    flexStart",
        ),
    )
    .unwrap();
    assert_eq!(location_policies(&[]), (any(), any()));
    assert_eq!(
        location_policies(&["--git-ref", "HEAD"]),
        (unset(), unset())
    );
    gkq()
        .args(["validate", "infra", "--git-ref", "no-such-branch"])
        .current_dir(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "git reference `no-such-branch` not found",
        ));
}

#[test]
fn local_target_apply_converges_and_second_plan_is_empty() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let out = gkq()
        .args([
            "plan",
            "examples/tpu-dws",
            "--env",
            "local",
            "--state-dir",
            state_dir,
            "--detailed-exitcode",
        ])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // The cluster, two pools, Kueue, its eight objects, the ConfigMap and two RayJobs.
    assert!(text.contains("Plan: 14 to create"), "{text}");
    assert!(text.contains("gke.nodepool/dws-pool"), "{text}");
    assert!(
        text.contains("ray.rayjob/default/rayjob-tpu-v6e-dws-2"),
        "{text}"
    );

    gkq()
        .args([
            "apply",
            "examples/tpu-dws",
            "--env",
            "local",
            "--state-dir",
            state_dir,
            "--auto-approve",
        ])
        .current_dir(repo_root())
        .assert()
        .success()
        .stderr(predicate::str::contains("Creation complete"));

    gkq()
        .args([
            "plan",
            "examples/tpu-dws",
            "--env",
            "local",
            "--state-dir",
            state_dir,
            "--detailed-exitcode",
            "-o",
            "json",
        ])
        .current_dir(repo_root())
        .assert()
        .code(0);

    // an edit plans exactly that edit
    let ws = Workspace::example();
    let spec = ws.spec_dir();
    let text = std::fs::read_to_string(spec.as_path().join("gkq.yaml")).unwrap();
    std::fs::write(
        spec.as_path().join("gkq.yaml"),
        text.replacen(
            "autoscaling: {min: 0, max: 4}",
            "autoscaling: {min: 0, max: 4}\n    resourceLabels: {size: large}",
            1,
        ),
    )
    .unwrap();
    let out = gkq()
        .args([
            "plan",
            spec.as_path().to_str().unwrap(),
            "--env",
            "local",
            "--state-dir",
            state_dir,
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["summary"]["update"], 1, "{plan:#}");
    assert_eq!(plan["summary"]["create"], 0);

    gkq()
        .args([
            "destroy",
            "examples/tpu-dws",
            "--env",
            "local",
            "--state-dir",
            state_dir,
            "--confirm",
            "wrong",
        ])
        .current_dir(repo_root())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "does not match the cluster `tpu-cluster`",
        ));
}

#[test]
fn apply_without_terminal_needs_auto_approve() {
    let state = tempfile::tempdir().unwrap();
    // assert_cmd's Command, for a stdin with an answer on it.
    assert_cmd::Command::from_std(gkq())
        .args([
            "apply",
            "examples/tpu-dws",
            "--env",
            "local",
            "--state-dir",
            state.path().to_str().unwrap(),
        ])
        .current_dir(repo_root())
        .write_stdin("yes\n")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--auto-approve"));
}

/// Plan B capacity is lent for a bounded time: the plan says when GKE takes a DWS job's nodes
/// back, and which limit decides (flex-start's 7 days, the pool's maxRunDuration, or the job's
/// declared duration, whichever is shortest).
#[test]
fn plan_shows_when_plan_b_nodes_are_reclaimed() {
    let ws = Workspace::example();
    let spec = ws.spec_dir();
    let original = std::fs::read_to_string(spec.as_path().join("gkq.yaml")).unwrap();
    let plan = |text: &str| -> (String, serde_json::Value) {
        std::fs::write(spec.as_path().join("gkq.yaml"), text).unwrap();
        let state = tempfile::tempdir().unwrap();
        let run = |output: &str| {
            let out = gkq()
                .args(["plan", ".", "--env", "local", "-o", output, "--state-dir"])
                .arg(state.path())
                .env("NO_COLOR", "1")
                .current_dir(spec.as_path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        (run("text"), serde_json::from_str(&run("json")).unwrap())
    };
    let reclaim_of = |json: &serde_json::Value, job: &str| {
        json["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["job"] == job)
            .unwrap_or_else(|| panic!("no placement for {job}: {json:#}"))["reclaim"]
            .clone()
    };

    let (text, json) = plan(&original);
    assert!(
        text.contains(
            "dws-pool nodes are reclaimed 7d after they are provisioned (flex-start's 7-day limit)"
        ),
        "{text}"
    );
    assert_eq!(text.matches("are reclaimed").count(), 1, "{text}");
    assert_eq!(
        reclaim_of(&json, "rayjob-tpu-v6e-dws-2"),
        serde_json::json!({"nodePool": "dws-pool", "afterSeconds": 604800, "limitedBy": "flex-start-limit"})
    );
    // Job 1 runs on the on-demand pool, which keeps its nodes.
    assert!(reclaim_of(&json, "rayjob-tpu-v6e-dws-1").is_null());

    let pool_limited = original.replacen(
        "    queuedProvisioning: true\n",
        "    queuedProvisioning: true\n    maxRunDuration: 2d\n",
        1,
    );
    assert_ne!(pool_limited, original);
    let (text, json) = plan(&pool_limited);
    assert!(
        text.contains("reclaimed 2d after they are provisioned (the node pool's maxRunDuration)"),
        "{text}"
    );
    assert_eq!(
        reclaim_of(&json, "rayjob-tpu-v6e-dws-2")["afterSeconds"],
        172800
    );

    let job_limited = pool_limited.replacen(
        "    elastic: true\n",
        "    elastic: true\n    duration: 36h\n",
        1,
    );
    let (text, json) = plan(&job_limited);
    assert!(
        text.contains("reclaimed 1d12h after they are provisioned (the job's declared duration)"),
        "{text}"
    );
    assert_eq!(
        reclaim_of(&json, "rayjob-tpu-v6e-dws-2")["limitedBy"],
        "job-duration"
    );
}

/// `gkq destroy` of a cluster the spec protects changes nothing: it does not strip the cluster
/// of its Kubernetes objects and then fail on the cluster.
#[test]
fn destroy_of_a_protected_cluster_is_refused_before_anything_changes() {
    let ws = Workspace::example();
    let spec = ws.spec_dir();
    let overlay = spec.as_path().join("environments/local.yaml");
    let text = std::fs::read_to_string(&overlay).unwrap();
    let protected = text.replace("deletionProtection: false", "deletionProtection: true");
    assert_ne!(protected, text);
    std::fs::write(&overlay, protected).unwrap();
    let run = |args: &[&str]| {
        gkq()
            .args(args)
            .args([".", "--env", "local"])
            .env("NO_COLOR", "1")
            .current_dir(spec.as_path())
            .output()
            .unwrap()
    };
    let applied = run(&["apply", "--auto-approve"]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    let destroyed = run(&["destroy", "--confirm", "tpu-cluster"]);
    let stderr = String::from_utf8_lossy(&destroyed.stderr);
    assert_eq!(destroyed.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("refusing to destroy, nothing was changed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("gke.cluster/tpu-cluster: the spec keeps deletion protection on"),
        "{stderr}"
    );
    assert!(!stderr.contains("Destroying..."), "{stderr}");

    let after = run(&["plan", "--detailed-exitcode"]);
    assert_eq!(
        after.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&after.stdout)
    );
}

/// A RayJob without a queue label runs outside Kueue: apply says so instead of waiting for a
/// Workload that never comes.
#[test]
fn apply_reports_jobs_outside_kueue_without_waiting_for_them() {
    let ws = Workspace::example();
    let spec = ws.spec_dir();
    let mut text = std::fs::read_to_string(spec.as_path().join("gkq.yaml")).unwrap();
    text.push_str(
        r#"
manifests:
  - apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: unqueued, namespace: default}
    spec:
      entrypoint: python -c 'print(1)'
      rayClusterSpec:
        headGroupSpec:
          rayStartParams: {}
          template:
            spec:
              containers:
                - name: ray-head
                  image: rayproject/ray:2.53.0-py311
                  resources: {requests: {cpu: "1", memory: 2Gi}, limits: {cpu: "1", memory: 2Gi}}
"#,
    );
    std::fs::write(spec.as_path().join("gkq.yaml"), text).unwrap();
    let out = gkq()
        .args(["apply", ".", "--env", "local", "--auto-approve"])
        .env("NO_COLOR", "1")
        .current_dir(spec.as_path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("  unqueued: runs outside Kueue: no kueue.x-k8s.io/queue-name label;"),
        "{stdout}"
    );
    assert!(
        stdout.contains("rayjob-tpu-v6e-dws-1 -> on-demand: admitted"),
        "{stdout}"
    );
}

#[test]
fn apply_output_is_json_lines_and_markdown_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let apply = |extra: &[&str]| {
        let mut args = vec![
            "apply",
            "examples/tpu-dws",
            "--env",
            "local",
            "--state-dir",
            state_dir,
            "--auto-approve",
        ];
        args.extend_from_slice(extra);
        gkq().args(&args).current_dir(repo_root()).output().unwrap()
    };
    let out = apply(&["-o", "markdown"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid value 'markdown'"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // With changes, and again with none: every line of stdout is one JSON object.
    for expected_events in [
        &["plan", "apply-started", "apply-finished"][..],
        &["plan"][..],
    ] {
        let out = apply(&["-o", "json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let events: Vec<String> = stdout
            .lines()
            .map(|line| {
                let value: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
                value["event"].as_str().unwrap().to_string()
            })
            .collect();
        for event in expected_events {
            assert!(events.iter().any(|e| e == event), "{events:?}");
        }
    }
}

#[test]
fn a_damaged_plan_file_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        "{\"formatVersion\": 1, \"actions\": [{\"addr\": \"gke.clu",
    )
    .unwrap();
    let out = gkq()
        .args(["apply", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a gkq plan file: it is damaged or incomplete JSON"),
        "{stderr}"
    );
    assert!(stderr.len() < 1000, "a short message, not a dump: {stderr}");
}

#[test]
fn missing_google_credentials_are_one_sentence_with_the_fix() {
    let home = tempfile::tempdir().unwrap();
    let out = gkq()
        .args(["plan", "examples/tpu-dws"])
        .current_dir(repo_root())
        .env("HOME", home.path())
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env_remove("CLOUDSDK_CONFIG")
        // Nothing listens there: the metadata server, ADC's last resort, does not answer.
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .env("GCE_METADATA_ROOT", "127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or("");
    assert!(
        error.contains("no Google Cloud credentials found: run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS"),
        "{stderr}"
    );
    assert!(!stderr.contains("transient"), "{stderr}");
}

#[test]
fn environment_overlays_are_one_file_each_inside_the_spec() {
    let ws = Workspace::example();
    let spec = ws.spec_dir();
    let validate = |env: &str| {
        gkq()
            .args(["validate", spec.as_path().to_str().unwrap(), "--env", env])
            .output()
            .unwrap()
    };
    // Both staging.yaml and staging.toml: which one wins would be a guess.
    std::fs::write(
        spec.as_path().join("environments/staging.yaml"),
        "target: local\n",
    )
    .unwrap();
    std::fs::write(
        spec.as_path().join("environments/staging.toml"),
        "target = \"local\"\n",
    )
    .unwrap();
    let out = validate("staging");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("environment `staging` is defined twice")
            && stderr.contains("staging.yaml")
            && stderr.contains("staging.toml"),
        "{stderr}"
    );
    // A path is not an environment name.
    let out = validate("../../etc/x");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not an environment name"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An overlay that links out of the spec's directory.
    #[cfg(unix)]
    {
        let elsewhere = tempfile::tempdir().unwrap();
        let outside = elsewhere.path().join("prod.yaml");
        std::fs::write(&outside, "target: local\n").unwrap();
        std::os::unix::fs::symlink(&outside, spec.as_path().join("environments/linked.yaml"))
            .unwrap();
        let out = validate("linked");
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("lies outside the spec's directory"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The one overlay that is there is read.
    let out = validate("local");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn unreadable_specs_say_where_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("gkq.yaml");
    let validate = || {
        gkq()
            .args(["validate", spec.to_str().unwrap()])
            .output()
            .unwrap()
    };
    // Latin-1 bytes: the first bad byte's line and column.
    std::fs::write(
        &spec,
        b"project: p\nlocation: us-east5-b\ncluster: {name: caf\xe9}\n",
    )
    .unwrap();
    let out = validate();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("it is not UTF-8 text: byte 0xe9 at line 3, column 20"),
        "{stderr}"
    );
    // TOML in a .yaml file.
    std::fs::write(
        &spec,
        "project = \"p\"\nlocation = \"us-east5-b\"\n[cluster]\nname = \"c\"\n",
    )
    .unwrap();
    let out = validate();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("looks like TOML, but its name says YAML")
            && stderr.contains("rename it to .toml"),
        "{stderr}"
    );
}

#[test]
fn every_missing_required_key_is_named_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gkq.yaml"),
        "nodePools:\n  - name: a\n  - machineType: n2-standard-4\n",
    )
    .unwrap();
    let out = gkq()
        .args(["validate", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for missing in [
        "missing required key `project` in the spec",
        "missing required key `location` in the spec",
        "missing required key `cluster` in the spec",
        "missing required key `machineType` in `nodePools[0]`",
        "missing required key `name` in `nodePools[1]`",
    ] {
        assert_eq!(stderr.matches(missing).count(), 1, "{missing}: {stderr}");
    }
}

/// Every command's `--help` lists each form of its arguments on its `Usage:` lines and one
/// example of each, and `gkq help COMMAND` prints the same; every example parses.
#[test]
fn every_commands_help_lists_its_argument_forms_with_an_example_each() {
    use gkq::cli::help::COMMANDS;
    let cli = gkq::cli::Cli::command_with_help();
    let names: Vec<&str> = cli
        .get_subcommands()
        .map(|c| c.get_name())
        .filter(|name| *name != "help")
        .collect();
    for name in &names {
        assert!(
            COMMANDS.iter().any(|h| h.command == *name),
            "`gkq {name}` has no entry in cli::help::COMMANDS"
        );
    }
    for help in COMMANDS {
        let words: Vec<&str> = help.command.split(' ').collect();
        let long = gkq().args(&words).arg("--help").output().unwrap();
        assert!(long.status.success(), "gkq {} --help", help.command);
        let long = String::from_utf8(long.stdout).unwrap();
        let by_help = gkq().arg("help").args(&words).output().unwrap();
        assert!(by_help.status.success(), "gkq help {}", help.command);
        assert_eq!(
            long,
            String::from_utf8(by_help.stdout).unwrap(),
            "`gkq {0} --help` and `gkq help {0}` differ",
            help.command
        );
        assert!(
            long.contains(&format!("Usage: gkq {}", help.forms[0])),
            "{long}"
        );
        for form in help.forms {
            assert!(long.contains(&format!("gkq {form}")), "{form}:\n{long}");
        }
        assert_eq!(
            help.examples.len(),
            help.forms.len(),
            "one example per form of `gkq {}`",
            help.command
        );
        assert!(long.contains("Examples:"), "{long}");
        for (line, _) in help.examples {
            assert!(long.contains(line), "{line}:\n{long}");
            // The example as the shell would pass it (without a redirection).
            let argv: Vec<&str> = line
                .split(" > ")
                .next()
                .unwrap()
                .split_whitespace()
                .collect();
            if let Err(e) = gkq::cli::Cli::command_with_help().try_get_matches_from(&argv) {
                panic!("the example `{line}` does not parse: {e}");
            }
        }
    }
    // `apply`'s positional argument says both forms.
    let apply = gkq().args(["apply", "--help"]).output().unwrap();
    let apply = String::from_utf8(apply.stdout).unwrap();
    assert!(apply.contains("[SPEC | PLANFILE]"), "{apply}");
    assert!(apply.contains("gkq apply plan.json"), "{apply}");
}

/// A plan with a kubeconfig starts reading Kubernetes while the spec loads; an invalid spec's
/// diagnostics are still all it says (whatever the kubeconfig), and a kubeconfig that cannot be
/// read is told only once the spec is valid, as before.
#[test]
fn an_invalid_spec_is_all_a_plan_says_whatever_its_kubeconfig() {
    let plan = |spec: &str, kubeconfig: Option<&str>| {
        let mut command = gkq();
        command
            .args(["plan", spec, "--target", "gcp"])
            .args(["--gke-endpoint", "http://127.0.0.1:1/"])
            .current_dir(repo_root());
        if let Some(kubeconfig) = kubeconfig {
            command.args(["--kubeconfig", kubeconfig]);
        }
        let out = command.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let bad = "tests/bad-specs/typo-nodepools.yaml";
    let without = plan(bad, None);
    assert_eq!(without.0, Some(1));
    assert!(
        without.1.contains("did you mean `nodePools`?"),
        "{}",
        without.1
    );
    // An unreadable kubeconfig, and one whose server nobody serves: the same words.
    let dir = tempfile::tempdir().unwrap();
    let unserved = dir.path().join("kubeconfig");
    std::fs::write(
        &unserved,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n",
    )
    .unwrap();
    for kubeconfig in ["no/such/kubeconfig", unserved.to_str().unwrap()] {
        assert_eq!(plan(bad, Some(kubeconfig)), without, "with {kubeconfig}");
    }
    // A valid spec: the kubeconfig's own error, once connecting.
    let (code, stderr) = plan("examples/tpu-dws", Some("no/such/kubeconfig"));
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("reading kubeconfig no/such/kubeconfig"),
        "{stderr}"
    );
}
