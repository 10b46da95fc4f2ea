//! Spec loading, validation and rendering: the example against the seed, YAML against TOML, the
//! bad-spec corpus, and a property test that no input makes loading panic.

use std::path::{Path, PathBuf};

use gkq::model::{self, DesiredState, MANAGED_BY_LABEL, STACK_LABEL};
use gkq::spec::{self, LoadOptions, WorkingTree};
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

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
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
    // shared/reference/gke.md a.1, plus ownership labels.
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
    assert_eq!(prod.gke.node_pools[0]["autoscaling"]["maxNodeCount"], 8);
    assert_eq!(prod.gke.node_pools[1]["autoscaling"]["maxNodeCount"], 4);
    let cq = find(&prod.kubernetes, "ClusterQueue", "cluster-queue");
    assert_eq!(
        cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]["nominalQuota"],
        32
    );
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
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let diags = match spec::load(&WorkingTree, dir.path(), &opts) {
        Err(f) => f.diagnostics,
        Ok(l) => model::build(&l).1,
    };
    let messages: Vec<String> = diags.errors().map(|d| d.message.clone()).collect();
    // An unknown key is reported and decoding goes on, so semantic problems still show up.
    assert!(
        messages.iter().any(|m| m.contains("imageStreming")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("not a whole number of 4x4 slices")),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m.contains("Gii")), "{messages:?}");
    assert!(
        messages.iter().any(|m| m.contains("user-queu")),
        "{messages:?}"
    );
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
    let file = root().join("tests/fixtures/capacity/two-flavors-one-pool.yaml");
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
