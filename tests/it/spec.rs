//! Spec loading, validation and rendering: the example against the seed, YAML against TOML, the
//! bad-spec corpus, and a property test that no input makes loading panic.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gkq::gitops::tree::WorkingTree;
use gkq::model::{self, DesiredState, MANAGED_BY_LABEL, STACK_LABEL};
use gkq::spec::{self, LoadOptions};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn desired(path: &Path, env: Option<&str>) -> DesiredState {
    let opts = LoadOptions {
        env: env.map(str::to_string),
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, path, &opts)
        .unwrap_or_else(|f| panic!("{}", f.diagnostics.report(&f.sources)));
    let (d, diags) = model::build(&loaded);
    d.unwrap_or_else(|| panic!("{}", diags.report(&loaded.sources)))
}

fn seed_objects(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join("tests/fixtures/seed").join(file)).unwrap();
    serde_saphyr::from_multiple::<Value>(&text).unwrap()
}

/// Removes what gkq adds on purpose (ownership labels) and moves Kueue objects to v1beta2, so
/// that what remains must equal the seed field for field.
fn without_deliberate_differences(mut v: Value) -> Value {
    if let Some(labels) = v
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(MANAGED_BY_LABEL);
        labels.remove(STACK_LABEL);
        if labels.is_empty() {
            v["metadata"].as_object_mut().unwrap().remove("labels");
        }
    }
    if let Some(a) = v
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(gkq::model::jobs::SCRIPT_DIGEST_ANNOTATION);
    }
    if v["apiVersion"] == "kueue.x-k8s.io/v1beta1" {
        v["apiVersion"] = json!("kueue.x-k8s.io/v1beta2");
    }
    v
}

fn find<'a>(objects: &'a [Arc<Value>], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .map(|o| &**o)
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} rendered"))
}

#[test]
fn example_renders_the_seeds_kueue_objects_field_for_field() {
    let d = desired(&root().join("examples/tpu-dws"), None);
    for seed in seed_objects("dws-tpu-queue.yaml") {
        let kind = seed["kind"].as_str().unwrap();
        let name = seed["metadata"]["name"].as_str().unwrap();
        let ours = without_deliberate_differences(find(&d.kubernetes, kind, name).clone());
        assert_eq!(
            ours,
            without_deliberate_differences(seed.clone()),
            "{kind}/{name}"
        );
    }
}

#[test]
fn example_renders_the_seeds_rayjobs_field_for_field() {
    let d = desired(&root().join("examples/tpu-dws"), None);
    let template = &seed_objects("rayjob-tpu-v6e-dws.yaml")[0];
    for id in ["1", "2"] {
        let mut seed = template.clone();
        seed["metadata"]["name"] = json!(format!("rayjob-tpu-v6e-dws-{id}"));
        // gkq also says which namespace; the seed relies on kubectl's default.
        seed["metadata"]["namespace"] = json!("default");
        let ours = find(&d.kubernetes, "RayJob", &format!("rayjob-tpu-v6e-dws-{id}"));
        assert_eq!(without_deliberate_differences(ours.clone()), seed);
    }
    let cm = find(&d.kubernetes, "ConfigMap", "jax-train-script");
    let script = std::fs::read_to_string(root().join("examples/tpu-dws/train.py")).unwrap();
    assert_eq!(cm["data"]["train.py"], json!(script));
}

#[test]
fn example_renders_the_gcloud_request_bodies() {
    let d = desired(&root().join("examples/tpu-dws"), None);
    let scopes = json!([
        "https://www.googleapis.com/auth/devstorage.read_only",
        "https://www.googleapis.com/auth/logging.write",
        "https://www.googleapis.com/auth/monitoring",
        "https://www.googleapis.com/auth/service.management.readonly",
        "https://www.googleapis.com/auth/servicecontrol",
        "https://www.googleapis.com/auth/trace.append"
    ]);
    let labels = json!({"managed-by": "gkq", "gkq-stack": "tpu-cluster"});
    // docs/gke.md a.1, plus ownership labels.
    assert_eq!(
        d.gke.cluster,
        json!({"name": "tpu-cluster", "initialClusterVersion": "1.34",
          "nodePools": [{"name": "default-pool", "initialNodeCount": 3,
            "config": {"machineType": "n2-standard-16", "oauthScopes": scopes},
            "management": {"autoRepair": true, "autoUpgrade": true}}],
          "addonsConfig": {"rayOperatorConfig": {"enabled": true},
            "httpLoadBalancing": {"disabled": true}, "horizontalPodAutoscaling": {"disabled": true},
            "kubernetesDashboard": {"disabled": true}, "networkPolicyConfig": {"disabled": true}},
          "nodePoolDefaults": {"nodeConfigDefaults": {"gcfsConfig": {"enabled": true}}},
          "resourceLabels": labels})
    );
    // a.3: the on-demand pool.
    assert_eq!(
        d.gke.node_pools[0],
        json!({"name": "on-demand-pool", "initialNodeCount": 0,
          "config": {"machineType": "ct6e-standard-4t", "oauthScopes": scopes,
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "resourceLabels": labels},
          "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
          "management": {"autoRepair": true, "autoUpgrade": true},
          "placementPolicy": {"tpuTopology": "4x4"}})
    );
    // a.4: the DWS pool; autoRepair false is required by GKE for flex-start.
    assert_eq!(
        d.gke.node_pools[1],
        json!({"name": "dws-pool", "initialNodeCount": 0,
          "config": {"machineType": "ct6e-standard-4t", "oauthScopes": scopes,
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "flexStart": true, "resourceLabels": labels},
          "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
          "management": {"autoRepair": false, "autoUpgrade": true},
          "placementPolicy": {"tpuTopology": "4x4"},
          "queuedProvisioning": {"enabled": true}})
    );
    assert_eq!(d.gke.cluster_ref.location, "us-east5-b");
}

#[test]
fn toml_example_renders_byte_identical_json() {
    for env in [None, Some("local"), Some("dev"), Some("prod")] {
        let y = desired(&root().join("examples/tpu-dws/gkq.yaml"), env);
        let t = desired(&root().join("examples/tpu-dws/gkq.toml"), env);
        assert_eq!(
            serde_json::to_string_pretty(&y).unwrap(),
            serde_json::to_string_pretty(&t).unwrap(),
            "env {env:?}"
        );
    }
}

#[test]
fn overlays_merge_by_name() {
    let prod = desired(&root().join("examples/tpu-dws"), Some("prod"));
    assert_eq!(prod.gke.cluster["name"], "tpu-cluster-prod");
    // A pool of a new name is appended; the named pools keep the base's one slice each.
    let pools: Vec<(&Value, &Value)> = prod
        .gke
        .node_pools
        .iter()
        .map(|p| (&p["name"], &p["autoscaling"]["maxNodeCount"]))
        .collect();
    assert_eq!(
        pools,
        [
            (&json!("on-demand-pool"), &json!(4)),
            (&json!("dws-pool"), &json!(4)),
            (&json!("on-demand-pool-2"), &json!(4)),
        ]
    );
    let cq = find(&prod.kubernetes, "ClusterQueue", "cluster-queue");
    let flavors = &cq["spec"]["resourceGroups"][0]["flavors"];
    assert_eq!(flavors[2]["name"], "on-demand-2");
    assert_eq!(flavors[2]["resources"][2]["nominalQuota"], 16);
    let dev = desired(&root().join("examples/tpu-dws"), Some("dev"));
    let runs: Vec<_> = dev
        .kubernetes
        .iter()
        .filter(|o| o["kind"] == "RayJob")
        .collect();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["metadata"]["name"], "rayjob-tpu-v6e-dws-1");
    assert!(!dev.gke.deletion_protection);
}

#[test]
fn variables_come_from_cli_then_environment_then_default() {
    let path = root().join("examples/tpu-dws");
    let opts = LoadOptions {
        vars: [("PROJECT_ID".to_string(), "from-cli".to_string())].into(),
        // The process environment has both spellings; only `GKQ_VAR_` ones are read.
        env_lookup: Some(Box::new(|n| {
            matches!(
                n,
                "ZONE" | "PROJECT_ID" | "CLUSTER_NAME" | "GKQ_VAR_ZONE" | "GKQ_VAR_PROJECT_ID"
            )
            .then(|| format!("env-{n}"))
        })),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, &path, &opts).unwrap();
    assert_eq!(loaded.spec.project, "from-cli");
    assert_eq!(loaded.spec.location, "env-GKQ_VAR_ZONE");
    assert_eq!(loaded.spec.cluster.name, "tpu-cluster");
}

#[test]
fn unknown_environment_lists_the_available_ones() {
    let f = spec::load(
        &WorkingTree,
        &root().join("examples/tpu-dws"),
        &LoadOptions {
            env: Some("staging".into()),
            ..Default::default()
        },
    )
    .unwrap_err();
    let d = f.diagnostics.errors().next().unwrap();
    assert!(
        d.message.contains("environment `staging` not found"),
        "{}",
        d.message
    );
    assert!(
        d.help.as_deref().unwrap().contains("dev, local, prod"),
        "{:?}",
        d.help
    );
}

/// Every example validates with every environment `--env` can find for it (its own
/// `environments/`, then each parent's up to the repository root): an overlay written for one
/// example must not break another that it reaches by the same walk.
#[test]
fn every_example_validates_with_every_environment_it_can_see() {
    let mut checked = Vec::new();
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| {
            ["gkq.yaml", "gkq.toml"]
                .iter()
                .any(|f| dir.join(f).is_file())
        })
        .collect();
    examples.sort();
    assert!(examples.len() >= 2, "examples found: {examples:?}");
    for example in &examples {
        let mut envs = std::collections::BTreeSet::new();
        for dir in example.ancestors().take_while(|d| d.starts_with(root())) {
            for entry in std::fs::read_dir(dir.join("environments"))
                .into_iter()
                .flatten()
            {
                let path = entry.unwrap().path();
                if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                    envs.insert(stem.to_string());
                }
            }
        }
        assert!(envs.contains("local"), "{}: {envs:?}", example.display());
        for env in &envs {
            let out = crate::support::cmd::gkq()
                .args(["validate", example.to_str().unwrap(), "--env", env])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "gkq validate {} --env {env} failed:\n{}",
                example.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            checked.push(format!("{}:{env}", example.display()));
        }
    }
    assert!(checked.len() >= 6, "{checked:?}");
}

struct Expectation {
    line: usize,
    column: usize,
    text: String,
}

fn expectations(text: &str) -> Vec<Expectation> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# expect: "))
        .map(|e| {
            let mut parts = e.splitn(3, ':');
            let line = parts.next().unwrap().trim().parse().unwrap();
            let column = parts.next().unwrap().trim().parse().unwrap();
            Expectation {
                line,
                column,
                text: parts.next().unwrap().trim().to_string(),
            }
        })
        .collect()
}

#[test]
fn every_bad_spec_fails_with_its_message_at_its_location() {
    let dir = root().join("tests/bad-specs");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "toml")
            )
        })
        .collect();
    files.sort();
    assert!(files.len() >= 40, "the corpus has {} specs", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let expected = expectations(&text);
        assert!(
            !expected.is_empty(),
            "{} has no `# expect:` line",
            file.display()
        );
        let opts = LoadOptions {
            env_lookup: Some(Box::new(|_| None)),
            ..Default::default()
        };
        let diags = match spec::load(&WorkingTree, file, &opts) {
            Err(f) => f.diagnostics,
            Ok(loaded) => model::build(&loaded).1,
        };
        assert!(diags.has_errors(), "{} was accepted", file.display());
        // `# never: TEXT`: no diagnostic says TEXT (a sensitive value, or a part of one).
        for never in text.lines().filter_map(|l| l.strip_prefix("# never: ")) {
            let saying: Vec<String> = diags
                .iter()
                .map(|d| format!("{} / {:?} / {:?}", d.message, d.help, d.path))
                .filter(|said| said.contains(never))
                .collect();
            if !saying.is_empty() {
                failures.push(format!(
                    "{}: says `{never}`: {saying:#?}",
                    file.file_name().unwrap().to_string_lossy()
                ));
            }
        }
        for e in expected {
            let found = diags.errors().any(|d| {
                let span = d.span.unwrap_or_default();
                let words = format!("{} {}", d.message, d.help.clone().unwrap_or_default());
                span.line == e.line && span.column == e.column && words.contains(&e.text)
            });
            if !found {
                let got: Vec<String> = diags
                    .errors()
                    .map(|d| {
                        let s = d.span.unwrap_or_default();
                        format!("{}:{}: {} / {:?}", s.line, s.column, d.message, d.help)
                    })
                    .collect();
                failures.push(format!(
                    "{}: expected {}:{} `{}`, got {got:#?}",
                    file.file_name().unwrap().to_string_lossy(),
                    e.line,
                    e.column,
                    e.text
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Everything loading and validation say of the spec in `dir`, with no outside variables.
fn every_problem(dir: &Path) -> spec::Diagnostics {
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    match spec::load(&WorkingTree, dir, &opts) {
        Err(f) => f.diagnostics,
        Ok(l) => model::build(&l).1,
    }
}

#[test]
fn several_problems_are_reported_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
    let base = std::fs::read_to_string(root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    let bad = base
        .replace("imageStreaming: true", "imageStreming: true")
        .replace("max: 4}\n    flexStart", "max: 6}\n    flexStart")
        .replace("memory: 75Gi", "memory: 75Gii")
        .replace("queue: user-queue", "queue: user-queu");
    std::fs::write(dir.path().join("gkq.yaml"), bad).unwrap();
    let diags = every_problem(dir.path());
    let messages: Vec<String> = diags.errors().map(|d| d.message.clone()).collect();
    // An unknown key is reported and decoding goes on, so semantic problems still show up.
    assert!(
        messages.iter().any(|m| m.contains("imageStreming")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("max 6 nodes is more than one 4x4 slice")),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m.contains("Gii")), "{messages:?}");
    assert!(
        messages.iter().any(|m| m.contains("user-queu")),
        "{messages:?}"
    );
}

/// A value of the wrong type does not hide the problems after it: decoding goes on with a
/// stand-in, validation runs on the rest, and nothing is said about the stand-in itself.
#[test]
fn a_wrong_type_does_not_hide_later_problems() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
    let base = std::fs::read_to_string(root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    let bad = base
        .replacen("count: 2", "count: [2]", 1)
        .replacen("replicas: 1", "replicas: 1.50000000000000001", 1)
        .replace("provisioning: dws", "provisioning: dwss")
        .replace("max: 4}\n    flexStart", "max: 6}\n    flexStart")
        .replace("queue: user-queue", "queue: user-queu");
    assert_ne!(bad, base);
    std::fs::write(dir.path().join("gkq.yaml"), bad).unwrap();
    let diags = every_problem(dir.path());
    let messages: Vec<String> = diags.errors().map(|d| d.message.clone()).collect();
    for expected in [
        "`jobs[0].count`: expected a whole number from 0 to 4294967295, found a list",
        // The number as typed, not the float it rounds to.
        "found the number `1.50000000000000001`",
        "unknown value `dwss`",
        "max 6 nodes is more than one 4x4 slice",
        "`user-queu` is not defined",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(expected)),
            "missing {expected:?} in {messages:#?}"
        );
    }
    // The stand-in for `count` (0) is not reported as a count of zero.
    let count_problems = diags
        .errors()
        .filter(|d| d.path.as_deref() == Some("jobs[0].count"))
        .count();
    assert_eq!(count_problems, 1, "{messages:#?}");
}

#[test]
fn numbers_are_quoted_as_typed() {
    for (typed, parsed) in [
        ("1e400", "inf"),
        ("12345678901234567890123", "12345678901234568000000"),
        ("-0003", "-3"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gkq.yaml"),
            format!("project: p\nlocation: us-east5-b\ncluster: {{name: c}}\nnodePools:\n  - {{name: a, machineType: e2-standard-4, autoscaling: {{min: {typed}, max: 2}}}}\n"),
        )
        .unwrap();
        let diags = every_problem(dir.path());
        let messages: Vec<String> = diags.errors().map(|d| d.message.clone()).collect();
        assert!(
            messages.iter().any(|m| m.contains(&format!("`{typed}`"))),
            "{messages:#?}"
        );
        assert!(
            !messages.iter().any(|m| m.contains(&format!("`{parsed}`"))),
            "{messages:#?}"
        );
    }
}

mod never_panics {
    use super::*;
    use gkq::spec::{SourceMap, node};
    use proptest::prelude::*;

    fn check(text: &str, toml: bool) {
        let mut sources = SourceMap::default();
        let id = sources.add(if toml { "f.toml" } else { "f.yaml" }, text.to_string());
        let parsed = if toml {
            node::parse_toml(&sources, id)
        } else {
            node::parse_yaml(&sources, id)
        };
        if let Ok(n) = parsed
            && let Ok(spec) = gkq::spec::de::from_node::<gkq::spec::Spec>(&n, &sources)
        {
            let loaded = gkq::spec::Loaded {
                spec,
                root: n,
                sources,
                spec_file: "f.yaml".into(),
                dir: ".".into(),
                env: None,
                files: Default::default(),
                sensitive: Default::default(),
                variables: Default::default(),
                diagnostics: Default::default(),
                undecoded: Vec::new(),
                origins: Default::default(),
            };
            let _ = model::build(&loaded);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn arbitrary_text(text in ".{0,400}") {
            check(&text, false);
            check(&text, true);
        }

        #[test]
        fn mutated_example(cut in 0usize..3000, insert in "[ -~\n]{0,12}") {
            let base = std::fs::read_to_string(root().join("examples/tpu-dws/gkq.yaml")).unwrap();
            let mut at = cut.min(base.len());
            while !base.is_char_boundary(at) { at -= 1; }
            let text = format!("{}{}{}", &base[..at], insert, &base[at..]);
            check(&text, false);
            let tbase = std::fs::read_to_string(root().join("examples/tpu-dws/gkq.toml")).unwrap();
            let mut at = cut.min(tbase.len());
            while !tbase.is_char_boundary(at) { at -= 1; }
            check(&format!("{}{}{}", &tbase[..at], insert, &tbase[at..]), true);
        }
    }
}

#[test]
fn quota_is_compared_with_node_pool_capacity() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
    let base = std::fs::read_to_string(root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    // 32 chips of on-demand quota, but the pool holds 4 nodes x 4 chips = 16.
    let over = base.replace(
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 16}",
        "quota: {cpu: 40, memory: 75Gi, google.com/tpu: 32}",
    );
    std::fs::write(dir.path().join("gkq.yaml"), over).unwrap();
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, dir.path(), &opts).unwrap();
    let (desired, diags) = model::build(&loaded);
    assert!(
        desired.is_some(),
        "capacity findings are warnings, not errors"
    );
    let w: Vec<_> = diags.warnings().map(|d| d.message.clone()).collect();
    assert!(
        w.iter()
            .any(|m| m.contains("google.com/tpu 32") && m.contains("16")),
        "{w:#?}"
    );
    // The example itself matches its pools: no capacity warning.
    let loaded = spec::load(&WorkingTree, &root().join("examples/tpu-dws"), &opts).unwrap();
    assert_eq!(model::build(&loaded).1.warnings().count(), 0);
}

#[test]
fn two_flavors_over_one_node_pool_are_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gkq.yaml");
    std::fs::copy(
        root().join("tests/fixtures/capacity/two-flavors-one-pool.yaml"),
        &file,
    )
    .unwrap();
    std::fs::copy(
        root().join("examples/tpu-dws/train.py"),
        dir.path().join("train.py"),
    )
    .unwrap();
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, &file, &opts).unwrap();
    let (desired, diags) = model::build(&loaded);
    assert!(desired.is_some(), "valid: {diags:#?}");
    let warning = diags
        .iter()
        .find(|d| {
            d.message
                .contains("both place jobs on node pool `on-demand-pool`")
        })
        .unwrap_or_else(|| panic!("{diags:#?}"));
    let span = warning.span.unwrap_or_default();
    assert_eq!((span.line, span.column), (66, 17));
}

#[test]
fn variable_defaults_may_use_other_variables() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("examples/tpu-dws/train.py"),
        dir.path().join("train.py"),
    )
    .unwrap();
    let text = std::fs::read_to_string(root().join("examples/tpu-dws/gkq.yaml"))
        .unwrap()
        .replacen(
            "variables:\n",
            "variables:\n  REGISTRY:\n    default: us-docker.pkg.dev/p/r\n  IMAGE:\n    default: \"${REGISTRY}/ray:2.53.0\"\n",
            1,
        )
        .replacen("image: rayproject/ray:2.53.0-py311", "image: ${IMAGE}", 1);
    std::fs::write(dir.path().join("gkq.yaml"), text).unwrap();
    let images = |vars: &[(&str, &str)]| -> Vec<String> {
        let opts = LoadOptions {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            env_lookup: Some(Box::new(|_| None)),
            ..Default::default()
        };
        let loaded = spec::load(&WorkingTree, dir.path(), &opts).unwrap();
        let (desired, diags) = model::build(&loaded);
        let desired = desired.unwrap_or_else(|| panic!("{diags:#?}"));
        desired
            .kubernetes
            .iter()
            .filter(|o| o["kind"] == "RayJob")
            .map(|o| {
                o["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
                    ["image"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(images(&[])[0], "us-docker.pkg.dev/p/r/ray:2.53.0");
    // A value given for the referenced variable flows into the default that uses it.
    assert_eq!(
        images(&[("REGISTRY", "europe-docker.pkg.dev/q/s")])[0],
        "europe-docker.pkg.dev/q/s/ray:2.53.0"
    );
}

/// `--env` looks next to the spec, then up to the repository root, nearest first; outside a
/// repository, next to the spec only. The plan's provenance names the file read.
#[test]
fn overlays_are_found_up_to_the_repository_root_nearest_first() {
    let repo = tempfile::tempdir().unwrap();
    let stack = repo.path().join("stacks/a");
    std::fs::create_dir_all(&stack).unwrap();
    for f in ["gkq.yaml", "train.py"] {
        std::fs::copy(root().join("examples/tpu-dws").join(f), stack.join(f)).unwrap();
    }
    let overlay = |dir: &Path, max: u32| {
        std::fs::create_dir_all(dir.join("environments")).unwrap();
        std::fs::write(
            dir.join("environments/small.yaml"),
            format!(
                "nodePools:\n  - name: on-demand-pool\n    autoscaling: {{min: 0, max: {max}}}\n"
            ),
        )
        .unwrap();
    };
    let load = || {
        let opts = LoadOptions {
            env: Some("small".into()),
            env_lookup: Some(Box::new(|_| None)),
            ..Default::default()
        };
        spec::load(&WorkingTree, &stack, &opts).map_err(|f| {
            f.diagnostics
                .iter()
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
        })
    };
    let on_demand_max = |loaded: &spec::Loaded| {
        loaded
            .spec
            .node_pools
            .iter()
            .find(|p| p.name == "on-demand-pool")
            .and_then(|p| p.autoscaling.as_ref())
            .map(|a| a.max)
    };
    overlay(repo.path(), 8);
    // Not a repository yet: the overlay at its root is not looked for.
    let Err(messages) = load() else {
        panic!("an overlay outside the spec's directory was used without a repository");
    };
    assert!(
        messages
            .iter()
            .any(|m| m.contains("environment `small` not found")),
        "{messages:?}"
    );
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let loaded = load().unwrap();
    assert_eq!(on_demand_max(&loaded), Some(8));
    let files: Vec<String> = gkq::plan::digest::spec_digest(&loaded)
        .files
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert!(
        files.contains(&"../../environments/small.yaml".to_string()),
        "{files:?}"
    );
    // A nearer overlay wins.
    overlay(&repo.path().join("stacks"), 4);
    assert_eq!(on_demand_max(&load().unwrap()), Some(4));
}

#[test]
fn overlay_list_items_match_after_variables_are_substituted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("environments")).unwrap();
    for f in ["gkq.yaml", "train.py"] {
        std::fs::copy(root().join("examples/tpu-dws").join(f), dir.path().join(f)).unwrap();
    }
    // The base names the pool `${ONDEMAND_NODEPOOL}`; the overlay names it as it is.
    std::fs::write(
        dir.path().join("environments/small.yaml"),
        "nodePools:\n  - name: on-demand-pool\n    autoscaling: {min: 0, max: 2}\n",
    )
    .unwrap();
    let opts = LoadOptions {
        env: Some("small".into()),
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, dir.path(), &opts).unwrap();
    let pools: Vec<(&str, u32)> = loaded
        .spec
        .node_pools
        .iter()
        .map(|p| (p.name.as_str(), p.autoscaling.as_ref().unwrap().max))
        .collect();
    assert_eq!(pools, [("on-demand-pool", 2), ("dws-pool", 4)]);
}

/// Loading is bounded: hostile inputs (alias bombs, deep nesting, huge counts, long scalars,
/// multiplying variables) are refused with the limit named, at a location, within memory and
/// time bounds. The limits themselves live in `gkq::spec::limits`.
mod bounded {
    use super::*;
    use gkq::spec::limits;
    use proptest::prelude::*;
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    /// The memory a `gkq validate` of any input may use (its address space, so that an
    /// allocation past it fails and aborts the process instead of swapping).
    const MEMORY: u64 = 256 * 1024 * 1024;
    /// Not a speed target (that is `bench/`): only a guard against a hang.
    const HANG: Duration = Duration::from_secs(20);

    fn opts(env: Option<&str>) -> LoadOptions {
        LoadOptions {
            env: env.map(str::to_string),
            env_lookup: Some(Box::new(|_| None)),
            ..Default::default()
        }
    }

    /// Runs `gkq validate ARGS` with its address space limited to [`MEMORY`]; returns the exit
    /// code (or the signal as 128 + n) and stderr.
    fn validate(args: &[&std::ffi::OsStr]) -> (i32, String) {
        let mut child =
            crate::support::cmd::gkq_under(&["prlimit", &format!("--as={MEMORY}"), "--"])
                .arg("validate")
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("prlimit (util-linux) runs gkq with a memory limit");
        let mut stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > HANG {
                let _ = child.kill();
                let _ = child.wait();
                panic!("gkq validate {args:?} still ran after {HANG:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        use std::os::unix::process::ExitStatusExt;
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        (code, reader.join().unwrap())
    }

    fn spec_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
        dir
    }

    fn example() -> String {
        std::fs::read_to_string(root().join("examples/tpu-dws/gkq.yaml")).unwrap()
    }

    /// `levels` anchored lists, each of `fan` aliases of the one before.
    fn laughs(fan: usize, levels: usize) -> String {
        let mut out = format!("a0: &a0 [{}]\n", vec!["\"lol\""; fan].join(","));
        for i in 1..levels {
            out.push_str(&format!(
                "a{i}: &a{i} [{}]\n",
                vec![format!("*a{}", i - 1); fan].join(",")
            ));
        }
        out
    }

    /// Values aliases repeat in [`laughs`].
    fn repeated(fan: usize, levels: usize) -> u64 {
        // Level i holds fan aliases of level i-1, which has size(i-1) values.
        let mut size = fan as u64 + 1;
        let mut total = 0u64;
        for _ in 1..levels {
            total = total.saturating_add(size.saturating_mul(fan as u64));
            size = size.saturating_mul(fan as u64).saturating_add(1);
        }
        total
    }

    /// A hostile input and the words its refusal must contain.
    #[derive(Debug, Clone)]
    enum Bomb {
        Aliases { fan: usize, levels: usize },
        AliasedText { len: usize },
        FlowDepth(usize),
        BlockDepth(usize),
        TomlDepth(usize),
        Count(u32),
        Values(usize),
        LongScalar(usize),
        Variables { len: usize },
        OverlayAliases { fan: usize },
    }

    impl Bomb {
        /// The spec directory, the arguments to validate it and the expected words.
        fn build(&self) -> (tempfile::TempDir, Vec<String>, String) {
            let one = |name: &str, text: String| spec_dir(&[(name, &text)]);
            let yaml = "gkq.yaml".to_string();
            match self {
                Bomb::Aliases { fan, levels } => (
                    one("gkq.yaml", laughs(*fan, *levels)),
                    vec![yaml],
                    "alias expansion limit of 100,000 values".into(),
                ),
                Bomb::AliasedText { len } => {
                    let copies = limits::MAX_TEXT_BYTES / len + 2;
                    let text = format!(
                        "a: &a \"{}\"\nb: [{}]\n",
                        "x".repeat(*len),
                        vec!["*a"; copies].join(",")
                    );
                    (one("gkq.yaml", text), vec![yaml], "16 MiB of text".into())
                }
                Bomb::FlowDepth(n) => (
                    one(
                        "gkq.yaml",
                        format!("project: {}{}\n", "[".repeat(*n), "]".repeat(*n)),
                    ),
                    vec![yaml],
                    "nesting limit of 64 levels".into(),
                ),
                Bomb::BlockDepth(n) => {
                    let text: String = (0..*n).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
                    (
                        one("gkq.yaml", text),
                        vec![yaml],
                        "nesting limit of 64 levels".into(),
                    )
                }
                Bomb::TomlDepth(n) => (
                    one(
                        "gkq.toml",
                        format!("project = {}{}\n", "[".repeat(*n), "]".repeat(*n)),
                    ),
                    vec!["gkq.toml".into()],
                    "nesting limit of 64 levels".into(),
                ),
                Bomb::Count(n) => (
                    one(
                        "gkq.yaml",
                        example().replace("count: 2 ", &format!("count: {n} ")),
                    ),
                    vec![yaml],
                    "limit of 1,000 runs per job".into(),
                ),
                Bomb::Values(n) => (
                    one(
                        "gkq.yaml",
                        format!("manifests: [{}]\n", vec!["0"; *n].join(",")),
                    ),
                    vec![yaml],
                    "limit of 500,000 values".into(),
                ),
                Bomb::LongScalar(len) => (
                    one("gkq.yaml", format!("project: \"{}\"\n", "x".repeat(*len))),
                    vec![yaml],
                    "file size limit".into(),
                ),
                Bomb::Variables { len } => {
                    let uses = limits::MAX_TEXT_BYTES / len + 2;
                    let text = format!(
                        "variables:\n  B: {{default: \"{}\"}}\nproject: \"{}\"\n",
                        "x".repeat(*len),
                        "${B}".repeat(uses)
                    );
                    (
                        one("gkq.yaml", text),
                        vec![yaml],
                        "limit of 16 MiB of text".into(),
                    )
                }
                Bomb::OverlayAliases { fan } => {
                    let dir = spec_dir(&[
                        ("gkq.yaml", &example()),
                        ("environments/x.yaml", &laughs(*fan, 12)),
                    ]);
                    (
                        dir,
                        vec![yaml, "--env".into(), "x".into()],
                        "alias expansion limit".into(),
                    )
                }
            }
        }
    }

    fn bombs() -> impl Strategy<Value = Bomb> {
        prop_oneof![
            (2usize..=12, 2usize..=12)
                .prop_filter("expands past the limit", |(f, l)| repeated(*f, *l)
                    > limits::MAX_ALIAS_VALUES as u64)
                .prop_map(|(fan, levels)| Bomb::Aliases { fan, levels }),
            (64 * 1024usize..=1024 * 1024).prop_map(|len| Bomb::AliasedText { len }),
            (limits::MAX_DEPTH..20_000).prop_map(Bomb::FlowDepth),
            (limits::MAX_DEPTH..400).prop_map(Bomb::BlockDepth),
            (limits::MAX_DEPTH..20_000).prop_map(Bomb::TomlDepth),
            (limits::MAX_JOB_RUNS + 1..=u32::MAX).prop_map(Bomb::Count),
            (limits::MAX_VALUES..limits::MAX_VALUES * 2).prop_map(Bomb::Values),
            (limits::MAX_FILE_BYTES..limits::MAX_FILE_BYTES * 2).prop_map(Bomb::LongScalar),
            (16 * 1024usize..=1024 * 1024).prop_map(|len| Bomb::Variables { len }),
            (3usize..=10).prop_map(|fan| Bomb::OverlayAliases { fan }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Every bomb is refused: exit 1 (not an abort from running out of memory, not a hang),
        /// with the limit named and a `file:line:column` location.
        #[test]
        fn generated_bombs_are_refused_with_the_limit_named(bomb in bombs()) {
            let (dir, args, expected) = bomb.build();
            let mut argv: Vec<std::ffi::OsString> = Vec::new();
            for (i, a) in args.iter().enumerate() {
                argv.push(if i == 0 { dir.path().join(a).into_os_string() } else { a.into() });
            }
            let argv: Vec<&std::ffi::OsStr> = argv.iter().map(|a| a.as_os_str()).collect();
            let (code, stderr) = validate(&argv);
            prop_assert_eq!(code, 1, "{:?}: {}", bomb, stderr);
            prop_assert!(stderr.contains(&expected), "{:?}: expected `{}` in {}", bomb, expected, stderr);
            let located = stderr.lines().any(|l| {
                l.split(": ").next().is_some_and(|loc| {
                    let mut parts = loc.rsplitn(3, ':');
                    let col = parts.next().and_then(|c| c.parse::<usize>().ok());
                    let line = parts.next().and_then(|c| c.parse::<usize>().ok());
                    col.is_some() && line.is_some() && parts.next().is_some()
                })
            });
            prop_assert!(located, "{:?}: no file:line:column in {}", bomb, stderr);
        }
    }

    /// The bound the property test runs under does not get in the way of a valid spec.
    #[test]
    fn the_example_validates_within_the_same_bounds() {
        let (code, stderr) = validate(&[root().join("examples/tpu-dws").as_os_str()]);
        assert_eq!(code, 0, "{stderr}");
    }

    /// The largest spec we benchmark, 5,000 raw manifests (`bench/gen-objects 5000`'s shapes),
    /// loads and builds within the limits.
    #[test]
    fn five_thousand_manifests_still_load() {
        let mut text = String::from(
            "project: p\nlocation: us-east5-b\ncluster: {name: c}\nkueue: {install: external}\nmanifests:\n",
        );
        let container = |n: &str| {
            json!({"name": n, "image": "rayproject/ray:2.53.0-py311",
                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
                "volumeMounts": [{"name": "script", "mountPath": "/app"}]})
        };
        for i in 0..5000 {
            let o = match i % 4 {
                0 => json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "namespace": "bench"},
                    "data": {"train.py": "import jax\n".repeat(30)}}),
                1 => json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                    "metadata": {"name": format!("cq-{i}")},
                    "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 10},
                            {"name": "memory", "nominalQuota": "20Gi"}]}]}]}}),
                2 => json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                    "metadata": {"name": format!("lq-{i}"), "namespace": "bench"},
                    "spec": {"clusterQueue": format!("cq-{}", i - 1)}}),
                _ => json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                    "metadata": {"name": format!("rj-{i}"), "namespace": "bench"},
                    "spec": {"entrypoint": "python /app/train.py", "shutdownAfterJobFinishes": true,
                        "rayClusterSpec": {"rayVersion": "2.53.0",
                            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                                "containers": [container("ray-head")],
                                "volumes": [{"name": "script", "configMap": {"name": "cm"}}]}}},
                            "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 1,
                                "maxReplicas": 2, "rayStartParams": {}, "template": {"spec": {
                                    "containers": [container("ray-worker")],
                                    "volumes": [{"name": "script", "configMap": {"name": "cm"}}]}}}]}}}),
            };
            text.push_str(&format!("  - {o}\n"));
        }
        let dir = spec_dir(&[("gkq.yaml", &text)]);
        let loaded = spec::load(&WorkingTree, dir.path(), &opts(None))
            .unwrap_or_else(|f| panic!("{}", f.diagnostics.report(&f.sources)));
        let (desired, diags) = model::build(&loaded);
        assert!(desired.is_some(), "{}", diags.report(&loaded.sources));
    }

    fn load_errors(dir: &Path, env: Option<&str>) -> Vec<String> {
        let (diagnostics, sources) = match spec::load(&WorkingTree, dir, &opts(env)) {
            Err(f) => (f.diagnostics, f.sources),
            // Errors may travel with a spec that decoded; `model::build` refuses it.
            Ok(l) => (l.diagnostics, l.sources),
        };
        diagnostics
            .errors()
            .map(|d| {
                let at = d
                    .span
                    .map(|s| {
                        format!(
                            "{}:{}:{}: ",
                            sources.path(s.file).display(),
                            s.line,
                            s.column
                        )
                    })
                    .unwrap_or_default();
                format!("{at}{}", d.message)
            })
            .collect()
    }

    /// Some error holds every one of `words`.
    fn assert_any(errors: &[String], words: &[&str]) {
        assert!(
            errors.iter().any(|e| words.iter().all(|w| e.contains(w))),
            "no error with {words:?} in {errors:#?}"
        );
    }

    /// `count: 5000000` would render five million RayJobs (about 16 KB each): refused at the
    /// count, before anything is generated.
    #[test]
    fn a_huge_count_is_refused_at_the_count() {
        let dir = spec_dir(&[(
            "gkq.yaml",
            &example().replace("count: 2 ", "count: 5000000 "),
        )]);
        let errors = load_errors(dir.path(), None);
        assert_any(
            &errors,
            &[
                "gkq.yaml:82:12: ",
                "exceeds the limit of 1,000 runs per job: `count: 5000000`",
            ],
        );
    }

    /// Many jobs, each within its own limit, together generate too many objects.
    #[test]
    fn objects_past_the_limit_are_refused_where_they_cross_it() {
        let base = example();
        let job_at = base.find("  - name: rayjob-tpu-v6e-dws\n").unwrap();
        let job = base[job_at..].replace("count: 2 ", "count: 1000 ");
        let mut text = base[..job_at].to_string();
        for i in 0..11 {
            text.push_str(&job.replace("name: rayjob-tpu-v6e-dws\n", &format!("name: job-{i}\n")));
        }
        let dir = spec_dir(&[("gkq.yaml", &text)]);
        let errors = load_errors(dir.path(), None);
        assert_any(
            &errors,
            &["exceeds the limit of 10,000 Kubernetes objects: with `jobs[9]`"],
        );
    }

    /// More nodes than GKE allows in a pool would also make the local target create them all.
    #[test]
    fn pool_sizes_past_gkes_limit_are_refused() {
        let dir = spec_dir(&[(
            "gkq.yaml",
            &example().replace("max: 4}\n    flexStart", "max: 5000000}\n    flexStart"),
        )]);
        let errors = load_errors(dir.path(), None);
        assert_any(
            &errors,
            &["`autoscaling.max` 5,000,000 exceeds GKE's limit of 1,000 nodes per zone"],
        );
    }

    /// An overlay is bounded like the spec, and the error points into the overlay.
    #[test]
    fn an_overlay_bomb_is_refused_in_the_overlay() {
        let dir = spec_dir(&[
            ("gkq.yaml", &example()),
            ("environments/x.yaml", &laughs(10, 9)),
        ]);
        let errors = load_errors(dir.path(), Some("x"));
        assert_any(
            &errors,
            &[
                "environments/x.yaml:5:",
                "alias expansion limit of 100,000 values",
            ],
        );
    }

    /// A file past the size limit is not read whole: the spec, an overlay, a script, a plan.
    #[test]
    fn files_past_the_size_limit_are_refused() {
        let big = format!("# {}\n", "x".repeat(limits::MAX_FILE_BYTES));
        let dir = spec_dir(&[("gkq.yaml", &format!("{}{big}", example()))]);
        let errors = load_errors(dir.path(), None);
        assert_any(
            &errors,
            &[
                "gkq.yaml:1:1: ",
                "exceeds the file size limit: it is 8.0 MiB, over the limit of 8 MiB",
            ],
        );
        let dir = spec_dir(&[("gkq.yaml", &example()), ("environments/x.yaml", &big)]);
        let errors = load_errors(dir.path(), Some("x"));
        assert_any(&errors, &["x.yaml:1:1: ", "file size limit"]);
        let dir = spec_dir(&[("gkq.yaml", &example())]);
        std::fs::write(dir.path().join("train.py"), &big).unwrap();
        let loaded = spec::load(&WorkingTree, dir.path(), &opts(None)).unwrap();
        assert!(
            loaded
                .diagnostics
                .errors()
                .any(|d| d.message.contains("over the limit of 8 MiB")),
            "{:?}",
            loaded.diagnostics
        );
        let plan = dir.path().join("plan.json");
        std::fs::write(
            &plan,
            format!(
                "{{\"formatVersion\": 1, \"actions\": [], \"pad\": \"{}\"}}",
                "x".repeat(limits::MAX_PLAN_BYTES)
            ),
        )
        .unwrap();
        let e = gkq::gitops::saved::read(&plan, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot read the plan file") && e.contains("over the limit of 32 MiB"),
            "{e}"
        );
    }

    /// A FIFO (which would block the read until a writer comes) or a device given as a spec,
    /// an overlay or a script is refused at once, naming it.
    #[cfg(unix)]
    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let mkfifo = |path: &Path| {
            let _ = std::fs::remove_file(path);
            let made = std::process::Command::new("mkfifo")
                .arg(path)
                .status()
                .expect("mkfifo runs");
            assert!(made.success());
        };
        let dir = spec_dir(&[("gkq.yaml", &example())]);
        mkfifo(&dir.path().join("train.py"));
        let started = std::time::Instant::now();
        let loaded = spec::load(&WorkingTree, dir.path(), &opts(None)).unwrap();
        assert!(
            loaded
                .diagnostics
                .errors()
                .any(|d| d.message.contains("not a regular file")),
            "{:?}",
            loaded.diagnostics
        );
        let spec = dir.path().join("fifo.yaml");
        mkfifo(&spec);
        // A FIFO named as the spec is not a spec file: refused before anything is read.
        assert!(spec::load(&WorkingTree, &spec, &opts(None)).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// A long variable used many times would multiply the spec's size.
    #[test]
    fn variables_that_multiply_text_are_refused() {
        let dir = spec_dir(&[(
            "gkq.yaml",
            &example()
                .replacen(
                    "variables:\n",
                    &format!(
                        "variables:\n  B:\n    default: \"{}\"\n",
                        "x".repeat(1024 * 1024)
                    ),
                    1,
                )
                .replace(
                    "project: ${PROJECT_ID}",
                    &format!("project: \"{}\"", "${B}".repeat(40)),
                ),
        )]);
        let errors = load_errors(dir.path(), None);
        assert_any(
            &errors,
            &["variables make the spec exceed the limit of 16 MiB of text"],
        );
    }

    /// A million problems are counted, not listed: the listing stops at the limit and says how
    /// many more there are.
    #[test]
    fn problems_past_the_limit_are_counted_not_listed() {
        let refs: String = (0..2000)
            .map(|i| format!("  - \"${{MISSING_{i}}}\"\n"))
            .collect();
        let dir = spec_dir(&[("gkq.yaml", &format!("{}\nextra:\n{refs}", example()))]);
        let failure = match spec::load(&WorkingTree, dir.path(), &opts(None)) {
            Err(f) => f.diagnostics,
            Ok(l) => l.diagnostics,
        };
        assert_eq!(failure.len(), limits::MAX_DIAGNOSTICS + 1);
        assert!(failure.omitted() > 1000, "{}", failure.omitted());
        let last = failure.iter().last().unwrap();
        assert!(
            last.is_error() && last.message.contains("more problems not listed"),
            "{last:?}"
        );
    }
}

/// The example with some text replaced, validated: its warnings as `(line, column, message)`.
/// The replaced values are unknown to gkq's table of GKE facts but plausible, so the spec stays
/// valid.
fn example_warnings_with(replacements: &[(&str, &str)]) -> Vec<(usize, usize, String)> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("examples/tpu-dws/train.py"),
        dir.path().join("train.py"),
    )
    .unwrap();
    let mut text = std::fs::read_to_string(root().join("examples/tpu-dws/gkq.yaml")).unwrap();
    for (from, to) in replacements {
        assert!(text.contains(from), "the example has no `{from}`");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(dir.path().join("gkq.yaml"), text).unwrap();
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, dir.path(), &opts).unwrap();
    let (desired, diags) = model::build(&loaded);
    assert!(desired.is_some(), "unknown facts are warnings: {diags:#?}");
    diags
        .warnings()
        .map(|d| {
            let span = d.span.unwrap_or_default();
            (span.line, span.column, d.message.clone())
        })
        .collect()
}

fn has_warning(warnings: &[(usize, usize, String)], line: usize, column: usize, text: &str) {
    assert!(
        warnings
            .iter()
            .any(|(l, c, m)| (*l, *c) == (line, column) && m.contains(text)),
        "no warning at {line}:{column} containing `{text}` in {warnings:#?}"
    );
}

#[test]
fn plausible_facts_missing_from_the_table_are_warnings_at_their_values() {
    // A TPU family newer than the table.
    let w = example_warnings_with(&[(
        "machineType: ct6e-standard-4t\n    tpuTopology: 4x4\n    reservationAffinity: none\n    initialNodes: 0\n    autoscaling: {min: 0, max: 4}\n  - name: ${DWS",
        "machineType: ct9z-standard-4t\n    tpuTopology: 4x4\n    reservationAffinity: none\n    initialNodes: 0\n    autoscaling: {min: 0, max: 4}\n  - name: ${DWS",
    )]);
    has_warning(
        &w,
        38,
        18,
        "`ct9z-standard-4t` looks like a TPU machine type, but its family is not in gkq's table of GKE facts (as of 2026-11-30)",
    );
    // A machine series newer than the table.
    let w =
        example_warnings_with(&[("machineType: n2-standard-16", "machineType: x9-standard-16")]);
    has_warning(
        &w,
        30,
        18,
        "machine series `x9` (of `x9-standard-16`) is not in gkq's table",
    );
    // A well-formed region the table does not list.
    let w = example_warnings_with(&[("default: us-east5-b", "default: us-east9-b")]);
    has_warning(
        &w,
        24,
        11,
        "region `us-east9` is not in gkq's table of GKE facts (as of 2026-11-30)",
    );
    // A known zone where the TPU pages do not list v6e, nor flex-start v6e.
    let w = example_warnings_with(&[("default: us-east5-b", "default: us-west4-a")]);
    has_warning(
        &w,
        38,
        18,
        "`us-west4-a` is not listed as offering TPU v6e (as of 2026-11-30)",
    );
    has_warning(&w, 44, 18, "`us-west4-a` is not listed as offering TPU v6e");
    has_warning(
        &w,
        49,
        16,
        "`us-west4-a` is not listed as offering flex-start TPU v6e (as of 2026-11-30)",
    );
    // Outside the regions whose TPU zones the table lists in full, only flex-start (listed in
    // full) is checked.
    let w = example_warnings_with(&[("default: us-east5-b", "default: europe-west4-a")]);
    assert!(
        !w.iter().any(|(_, _, m)| m.contains("offering TPU v6e")),
        "{w:#?}"
    );
    has_warning(&w, 49, 16, "not listed as offering flex-start TPU v6e");
}

/// A feature gate that changes how Kueue schedules everything is a warning at the gate: plans
/// will not predict placements under it. A gate for what objects opt into (the example's
/// elastic jobs) is not.
#[test]
fn a_scheduling_feature_gate_is_a_warning_that_placements_are_not_predicted() {
    let w = example_warnings_with(&[(
        "ElasticJobsViaWorkloadSlices: true",
        "ElasticJobsViaWorkloadSlices: true\n    LendingLimit: false",
    )]);
    has_warning(
        &w,
        56,
        19,
        "placements are not predicted with LendingLimit=false",
    );
    assert!(
        !w.iter()
            .any(|(_, _, m)| m.contains("ElasticJobsViaWorkloadSlices")),
        "{w:#?}"
    );
}

/// A `kueue.version` of another minor release is a warning at the version that placements will
/// not be predicted (the cluster's release decides when Kueue is external); a patch release of
/// the modelled one is not.
#[test]
fn another_kueue_minor_release_is_a_warning_at_the_version() {
    let w = example_warnings_with(&[("  version: v0.19.2", "  version: v0.20.0")]);
    has_warning(
        &w,
        53,
        12,
        "placements will not be predicted: kueue.version installs Kueue v0.20.0 (v0.20), and gkq models Kueue v0.19",
    );
    let w = example_warnings_with(&[(
        "kueue:\n  version: v0.19.2",
        "kueue:\n  install: external\n  version: v0.21.3",
    )]);
    has_warning(
        &w,
        54,
        12,
        "placements will not be predicted if the cluster runs Kueue v0.21.3, as kueue.version says",
    );
    let w = example_warnings_with(&[("  version: v0.19.2", "  version: v0.19.7")]);
    assert!(
        !w.iter().any(|(_, _, m)| m.contains("not be predicted")),
        "{w:#?}"
    );
}

/// A RayJob in a spec that neither enables GKE's Ray operator add-on nor installs KubeRay is a
/// warning at the job, with the fix; a KubeRay CRD in `manifests:` silences it.
#[test]
fn a_rayjob_without_kuberay_is_a_warning_at_the_job() {
    let w = example_warnings_with(&[("    rayOperator: true", "    rayOperator: false")]);
    has_warning(
        &w,
        81,
        5,
        "job `rayjob-tpu-v6e-dws` is a KubeRay RayJob, but the spec neither enables the Ray operator add-on nor installs KubeRay",
    );
    let w = example_warnings_with(&[
        ("    rayOperator: true", "    rayOperator: false"),
        (
            "\njobs:\n",
            "\nmanifests:\n  - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: rayjobs.ray.io}, spec: {group: ray.io}}\n\njobs:\n",
        ),
    ]);
    assert!(!w.iter().any(|(_, _, m)| m.contains("KubeRay")), "{w:#?}");
}

/// The add-on is one fix for every RayJob, so a spec with many RayJobs gets one warning, at the
/// first, counting the rest: not one copy per job (a 5,000-object spec printed hundreds).
#[test]
fn many_rayjobs_without_kuberay_are_one_warning_that_counts_them() {
    let rayjob = |name: &str| {
        format!(
            "  - {{apiVersion: ray.io/v1, kind: RayJob, metadata: {{name: {name}, namespace: default}}}}\n"
        )
    };
    let manifests = format!("\nmanifests:\n{}{}\njobs:\n", rayjob("a"), rayjob("b"));
    let w = example_warnings_with(&[
        ("    rayOperator: true", "    rayOperator: false"),
        ("\njobs:\n", &manifests),
    ]);
    let ray: Vec<_> = w.iter().filter(|(_, _, m)| m.contains("KubeRay")).collect();
    assert_eq!(ray.len(), 1, "{w:#?}");
    has_warning(
        &w,
        85,
        5,
        "job `rayjob-tpu-v6e-dws` is a KubeRay RayJob (and so are 2 more jobs or manifests), but",
    );
}

/// The JobSet example edited by `replacements`, everything from its `jobs:` on replaced by
/// `tail` when one is given.
fn jobset_example_text(replacements: &[(&str, &str)], tail: Option<&str>) -> String {
    let mut text =
        std::fs::read_to_string(root().join("examples/tpu-dws-jobset/gkq.yaml")).unwrap();
    for (from, to) in replacements {
        assert!(text.contains(from), "the example has no `{from}`");
        text = text.replacen(from, to, 1);
    }
    if let Some(tail) = tail {
        text.truncate(text.find("\njobs:\n").unwrap() + 1);
        text.push_str(tail);
    }
    text
}

/// [`jobset_example_text`] built: its desired state (when valid) and its errors as `(line,
/// column, message / help)`.
fn jobset_example_with(
    replacements: &[(&str, &str)],
    tail: Option<&str>,
) -> (Option<DesiredState>, Vec<(usize, usize, String)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("examples/tpu-dws-jobset/train.py"),
        dir.path().join("train.py"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("gkq.yaml"),
        jobset_example_text(replacements, tail),
    )
    .unwrap();
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let loaded = spec::load(&WorkingTree, dir.path(), &opts).unwrap();
    let (desired, diags) = model::build(&loaded);
    let errors = diags
        .errors()
        .map(|d| {
            let span = d.span.unwrap_or_default();
            let words = format!("{} / {}", d.message, d.help.clone().unwrap_or_default());
            (span.line, span.column, words)
        })
        .collect();
    (desired, errors)
}

/// The line (1-based) of the first line of `text` that starts (indentation aside) with `start`.
fn line_starting(text: &str, start: &str) -> usize {
    text.lines()
        .position(|l| l.trim_start().starts_with(start))
        .unwrap_or_else(|| panic!("no line starts with `{start}`"))
        + 1
}

const JOBSET_BUILTIN: &str = "jobset:\n  install: builtin";
const JOBSET_NONE: (&str, &str) = (JOBSET_BUILTIN, "jobset:\n  install: none");

/// `jobset.install: none` refuses the spec's JobSets at the first one (a job's kind, or a
/// JobSet manifest), with the fix; JobSet's CRD in `manifests:` lifts the rule; `builtin` needs
/// a release gkq embeds and renders JobSet's installation; Kueue manages JobSets unless `none`.
#[test]
fn jobset_install_decides_whether_a_spec_may_have_jobsets() {
    let (desired, errors) = jobset_example_with(&[JOBSET_NONE], None);
    assert!(desired.is_none());
    let line = line_starting(&jobset_example_text(&[JOBSET_NONE], None), "kind: jobset");
    assert!(
        errors.iter().any(|(l, c, m)| (*l, *c) == (line, 11)
            && m.contains("job `jobset-tpu-v6e-dws` is a JobSet, but `jobset.install: none`")
            && m.contains("set `jobset.install: builtin`")),
        "{errors:#?}"
    );

    // A JobSet written as a manifest: refused at the manifest.
    let manifest = "manifests:\n  - {apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, metadata: {name: raw, namespace: default}, spec: {replicatedJobs: []}}\n";
    let (_, errors) = jobset_example_with(&[JOBSET_NONE], Some(manifest));
    let line = line_starting(
        &jobset_example_text(&[JOBSET_NONE], Some(manifest)),
        "- {apiVersion: jobset.x-k8s.io",
    );
    assert!(
        errors
            .iter()
            .any(|(l, _, m)| *l == line && m.contains("manifest 0 is a JobSet")),
        "{errors:#?}"
    );

    // The spec installs JobSet's CRD itself: its JobSets are its own business.
    let crd = "manifests:\n  - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: jobsets.jobset.x-k8s.io}, spec: {group: jobset.x-k8s.io}}\n";
    let (_, errors) = jobset_example_with(
        &[JOBSET_NONE],
        Some(&format!("{crd}{}", &manifest["manifests:\n".len()..])),
    );
    assert!(
        !errors.iter().any(|(_, _, m)| m.contains("is a JobSet")),
        "{errors:#?}"
    );

    let unembedded = [(
        JOBSET_BUILTIN,
        "jobset:\n  install: builtin\n  version: v0.11.1",
    )];
    let (_, errors) = jobset_example_with(&unembedded, None);
    let line = line_starting(&jobset_example_text(&unembedded, None), "version: v0.11.1");
    assert!(
        errors.iter().any(|(l, c, m)| (*l, *c) == (line, 12)
            && m.contains("gkq embeds no JobSet release v0.11.1 (it embeds v0.12.0)")),
        "{errors:#?}"
    );

    // builtin: JobSet's installation is a planned component, and Kueue manages JobSets.
    let (desired, errors) = jobset_example_with(&[], None);
    assert!(errors.is_empty(), "{errors:#?}");
    let desired = desired.unwrap();
    let install: Vec<&Value> = desired
        .kube_objects()
        .filter(|o| o["kind"] == "JobSetInstallation")
        .collect();
    assert_eq!(install.len(), 1);
    assert_eq!(install[0]["spec"]["version"], "v0.12.0");
    assert!(desired.kueue.manages_jobsets);
    // external: nothing installed, Kueue still manages JobSets.
    let external = [(JOBSET_BUILTIN, "jobset:\n  install: external")];
    let (desired, errors) = jobset_example_with(&external, None);
    assert!(errors.is_empty(), "{errors:#?}");
    let desired = desired.unwrap();
    assert!(
        !desired
            .kube_objects()
            .any(|o| o["kind"] == "JobSetInstallation")
    );
    assert!(desired.kueue.manages_jobsets);
    // none, without JobSets: valid, and Kueue is not told to manage JobSets.
    let (desired, errors) = jobset_example_with(&[JOBSET_NONE], Some(""));
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(!desired.unwrap().kueue.manages_jobsets);
}

/// The DWS single-podset lint's hint fixes what it finds: the two-group RayJob and JobSet specs,
/// with the merge policy the hint names set on the check it names, are valid, and the
/// ProvisioningRequestConfig gkq renders carries the policy.
#[test]
fn the_merge_policy_the_dws_lint_suggests_makes_the_spec_valid() {
    for name in [
        "ray-two-tpu-groups-on-dws.yaml",
        "jobset-two-tpu-podsets-on-dws.yaml",
    ] {
        let text = std::fs::read_to_string(root().join("tests/bad-specs").join(name)).unwrap();
        let fixed = text.replacen(
            "  localQueues:",
            "  admissionChecks:\n    - name: dws-prov\n      provisioningRequestConfig:\n        name: dws-config\n        podSetMergePolicy: IdenticalPodTemplates\n  localQueues:",
            1,
        );
        assert_ne!(fixed, text, "{name} has a localQueues section");
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            root().join("tests/bad-specs/train.py"),
            dir.path().join("train.py"),
        )
        .unwrap();
        let file = dir.path().join(name);
        std::fs::write(&file, fixed).unwrap();
        let opts = LoadOptions {
            env_lookup: Some(Box::new(|_| None)),
            ..Default::default()
        };
        let loaded = spec::load(&WorkingTree, &file, &opts).unwrap_or_else(|f| {
            panic!(
                "{name}: {:?}",
                f.diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
            )
        });
        let (desired, diags) = model::build(&loaded);
        let errors: Vec<&String> = diags.errors().map(|d| &d.message).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        let config = desired
            .expect("a valid spec renders")
            .kubernetes
            .iter()
            .find(|o| o["kind"] == "ProvisioningRequestConfig")
            .map(|o| o["spec"]["podSetMergePolicy"].clone());
        assert_eq!(config, Some(json!("IdenticalPodTemplates")), "{name}");
    }
}

/// A flavor on a queued-provisioning pool needs a ProvisioningRequest check in every queue that
/// admits to it, wherever the check and the queue are written: the two bad specs, given the
/// check in raw manifests (Kueue's ProvisioningRequest controller, its config, a queue's
/// `admissionChecksStrategy`), are valid without any `provisioning: dws` being added.
#[test]
fn a_queued_flavors_check_written_as_raw_manifests_satisfies_the_rule() {
    let raw_check = "  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: AdmissionCheck
    metadata:
      name: approval
    spec:
      controllerName: kueue.x-k8s.io/provisioning-request
      parameters:
        apiGroup: kueue.x-k8s.io
        kind: ProvisioningRequestConfig
        name: raw-dws-config
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ProvisioningRequestConfig
    metadata:
      name: raw-dws-config
    spec:
      provisioningClassName: queued-provisioning.gke.io
      managedResources: [google.com/tpu]
";
    type Fix<'a> = &'a dyn Fn(&str) -> String;
    let cases: [(&str, Fix); 2] = [
        // The kueue section's queue names a raw check, now Kueue's ProvisioningRequest check.
        (
            "queued-flavor-with-another-controllers-check.yaml",
            &|text| {
                let start = text
                    .find("  - apiVersion: kueue.x-k8s.io/v1beta2\n    kind: AdmissionCheck")
                    .unwrap();
                format!("{}{raw_check}", &text[..start])
            },
        ),
        // The raw queue lists the DWS check gkq renders for `provisioning: dws` flavors.
        ("raw-queue-on-dws-flavor-without-check.yaml", &|text| {
            text.replace(
                    "      namespaceSelector: {}\n",
                    "      namespaceSelector: {}\n      admissionChecksStrategy:\n        admissionChecks:\n          - name: dws-prov\n            onFlavors: [dws]\n",
                )
        }),
    ];
    for (name, fix) in cases {
        let text = std::fs::read_to_string(root().join("tests/bad-specs").join(name)).unwrap();
        let fixed = fix(&text);
        assert_ne!(fixed, text, "{name}");
        assert_eq!(
            fixed.matches("provisioning: dws").count(),
            text.matches("provisioning: dws").count(),
            "{name}: no `provisioning: dws` is added"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            root().join("tests/bad-specs/train.py"),
            dir.path().join("train.py"),
        )
        .unwrap();
        let file = dir.path().join(name);
        std::fs::write(&file, fixed).unwrap();
        let opts = LoadOptions {
            env_lookup: Some(Box::new(|_| None)),
            ..Default::default()
        };
        let loaded = spec::load(&WorkingTree, &file, &opts).unwrap_or_else(|f| {
            panic!(
                "{name}: {:?}",
                f.diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
            )
        });
        let (desired, diags) = model::build(&loaded);
        let errors: Vec<&String> = diags.errors().map(|d| &d.message).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        assert!(desired.is_some(), "{name}");
    }
}
