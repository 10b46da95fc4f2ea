//! The capacity ladder (`capacity:`, issue 30): the seed written as a two-rung ladder renders
//! exactly as the seed, the expansion's diagnostics point at rungs, the ladder's rules warn at
//! their lines, and `mode: computeclass` renders its ComputeClass.

use std::path::{Path, PathBuf};

use gkq::gitops::tree::WorkingTree;
use gkq::model;
use gkq::spec::{self, LoadOptions};
use serde_json::Value;

use crate::support::{gkq, repo_root};

fn seed_as_ladder() -> PathBuf {
    repo_root().join("tests/fixtures/ladder/seed-as-ladder")
}

fn render_json(dir: &Path) -> Vec<u8> {
    let out = gkq()
        .args(["render", "-o", "json"])
        .arg(dir)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `gkq render -o json` of the seed and of the seed written as a ladder: byte for byte.
#[test]
fn the_seed_written_as_a_two_rung_ladder_renders_byte_identically() {
    let seed = render_json(&repo_root().join("examples/tpu-dws"));
    let ladder = render_json(&seed_as_ladder());
    assert!(!seed.is_empty());
    if seed != ladder {
        let (a, b) = (
            String::from_utf8_lossy(&seed),
            String::from_utf8_lossy(&ladder),
        );
        let first = a
            .lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        panic!(
            "renderings differ from line {}:\nseed:   {:?}\nladder: {:?}",
            first + 1,
            a.lines().nth(first),
            b.lines().nth(first)
        );
    }
}

fn load(dir: &Path) -> spec::Loaded {
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    spec::load(&WorkingTree, dir, &opts)
        .unwrap_or_else(|f| panic!("{}", f.diagnostics.report(&f.sources)))
}

/// `model::build` of a spec loaded without expansion expands it itself: same objects.
#[test]
fn model_build_expands_a_ladder_its_caller_did_not() {
    let seed = load(&repo_root().join("examples/tpu-dws"));
    let ladder = load(&seed_as_ladder());
    let (a, da) = model::build(&seed);
    let (b, db) = model::build(&ladder);
    let (a, b) = (
        a.unwrap_or_else(|| panic!("{}", da.report(&seed.sources))),
        b.unwrap_or_else(|| panic!("{}", db.report(&ladder.sources))),
    );
    assert_eq!(a.gke.node_pools, b.gke.node_pools);
    let objects = |d: &model::DesiredState| -> Vec<Value> {
        d.kubernetes.iter().map(|o| (**o).clone()).collect()
    };
    assert_eq!(objects(&a), objects(&b));
    assert_eq!(da.len(), db.len(), "the ladder adds no diagnostics");
}

/// Each spec in tests/bad-specs/warnings is accepted, with a warning at its `# warn:
/// LINE:COL: TEXT` line(s): the ladder rules that warn rather than refuse.
#[test]
fn every_ladder_warning_spec_warns_at_its_location() {
    let dir = repo_root().join("tests/bad-specs/warnings");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{} warning specs", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let loaded = load(file);
        let (desired, diags) = model::build(&loaded);
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if desired.is_none() {
            failures.push(format!(
                "{name} was refused: {}",
                diags.report(&loaded.sources)
            ));
            continue;
        }
        let expected: Vec<(usize, usize, String)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# warn: "))
            .map(|w| {
                let mut parts = w.splitn(3, ':');
                let line = parts.next().unwrap().trim().parse().unwrap();
                let column = parts.next().unwrap().trim().parse().unwrap();
                (line, column, parts.next().unwrap().trim().to_string())
            })
            .collect();
        assert!(!expected.is_empty(), "{name} has no `# warn:` line");
        for (line, column, want) in expected {
            let found = diags.warnings().any(|d| {
                let span = d.span.unwrap_or_default();
                let words = format!("{} {}", d.message, d.help.clone().unwrap_or_default());
                span.line == line && span.column == column && words.contains(&want)
            });
            if !found {
                let got: Vec<String> = diags
                    .warnings()
                    .map(|d| {
                        let s = d.span.unwrap_or_default();
                        format!("{}:{}: {}", s.line, s.column, d.message)
                    })
                    .collect();
                failures.push(format!(
                    "{name}: expected {line}:{column} `{want}`, got {got:#?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn render_env(dir: &Path, env: &str) -> Value {
    let out = gkq()
        .args(["render", "-o", "json", "--env", env])
        .arg(dir)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn of_kind<'a>(rendered: &'a Value, kind: &str) -> Vec<&'a Value> {
    rendered["kubernetes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == kind)
        .collect()
}

/// `mode: computeclass`: the example's ladder (reserved, on-demand, dws queued, spot) renders
/// two ComputeClasses around the queued rung, priorities in ladder order, one flavor selecting
/// each class, and node pools only for the queued rung.
#[test]
fn computeclass_mode_renders_priorities_in_ladder_order_and_one_flavor_per_class() {
    let rendered = render_env(
        &repo_root().join("examples/tpu-capacity-ladder"),
        "computeclass",
    );
    let pools: Vec<&str> = rendered["gke"]["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pools, ["dws-pool"], "GKE creates the class rungs' pools");
    let classes = of_kind(&rendered, "ComputeClass");
    let names: Vec<&str> = classes
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tpu-cluster-ladder-1", "tpu-cluster-ladder-2"]);
    assert!(
        classes
            .iter()
            .all(|c| c["apiVersion"] == "cloud.google.com/v1")
    );
    let first = &classes[0]["spec"];
    assert_eq!(first["nodePoolAutoCreation"]["enabled"], true);
    assert_eq!(first["whenUnsatisfiable"], "DoNotScaleUp");
    assert_eq!(first["activeMigration"]["optimizeRulePriority"], false);
    let priorities = first["priorities"].as_array().unwrap();
    assert_eq!(priorities.len(), 2);
    assert_eq!(
        priorities[0]["tpu"],
        serde_json::json!({"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"})
    );
    assert_eq!(
        priorities[0]["reservations"],
        serde_json::json!({"affinity": "Specific", "specific": [
            {"name": "tpu-v6e-res", "project": "capacity-project", "zones": ["us-east5-b"]}
        ]})
    );
    assert!(
        priorities[0].get("location").is_none(),
        "a Specific reservation names its zone in specific[].zones only"
    );
    assert_eq!(priorities[1]["spot"], false);
    assert_eq!(priorities[1]["location"]["zones"][0], "us-east5-b");
    assert_eq!(classes[1]["spec"]["priorities"][0]["spot"], true);
    let flavor = of_kind(&rendered, "ResourceFlavor")
        .into_iter()
        .find(|f| f["metadata"]["name"] == "ladder-1")
        .expect("flavor ladder-1");
    assert_eq!(
        flavor["spec"]["nodeLabels"]["cloud.google.com/compute-class"],
        "tpu-cluster-ladder-1"
    );
    assert_eq!(
        flavor["spec"]["tolerations"][0]["key"],
        "cloud.google.com/compute-class"
    );
    let queue = of_kind(&rendered, "ClusterQueue")[0];
    let order: Vec<&str> = queue["spec"]["resourceGroups"][0]["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["default-cpu", "ladder-1", "dws", "ladder-2"]);
    assert_eq!(
        queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"],
        serde_json::json!(["dws"])
    );
}

/// `mode: kueue` with several slices per multi-host rung: one pool and one flavor per slice,
/// in ladder order, each pool holding exactly one slice.
#[test]
fn a_multi_host_rung_of_n_slices_is_n_pools_and_n_flavors_in_ladder_order() {
    let rendered = render_env(&repo_root().join("examples/tpu-capacity-ladder"), "prod");
    let pools = rendered["gke"]["nodePools"].as_array().unwrap();
    let names: Vec<&str> = pools.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "reserved-pool-1",
            "reserved-pool-2",
            "on-demand-pool",
            "dws-pool",
            "spot-pool-1",
            "spot-pool-2",
            "spot-pool-3",
            "spot-pool-4"
        ]
    );
    assert!(pools.iter().all(|p| p["autoscaling"]["maxNodeCount"] == 4));
    assert_eq!(
        pools[0]["config"]["reservationAffinity"]["values"][0],
        "projects/capacity-project/reservations/tpu-v6e-res"
    );
    assert_eq!(pools[3]["queuedProvisioning"]["enabled"], true);
    assert_eq!(pools[3]["config"]["maxRunDuration"], "259200s");
    assert_eq!(pools[4]["config"]["spot"], true);
    let queue = of_kind(&rendered, "ClusterQueue")[0];
    let order: Vec<&str> = queue["spec"]["resourceGroups"][0]["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "default-cpu",
            "reserved-1",
            "reserved-2",
            "on-demand",
            "dws",
            "spot-1",
            "spot-2",
            "spot-3",
            "spot-4"
        ]
    );
}

/// The example with four runs of its job, on the local target plus `overlay` (`--env test`).
fn example_workspace(overlay: &str) -> crate::support::workspace::Workspace {
    let ws = crate::support::workspace::Workspace::copy_of(
        "examples/tpu-capacity-ladder",
        &["gkq.yaml", "train.py"],
    );
    ws.edit("    count: 2", "    count: 4");
    let envs = ws.spec_dir().join("environments");
    std::fs::create_dir_all(&envs).unwrap();
    let local = std::fs::read_to_string(repo_root().join("environments/local.yaml")).unwrap();
    std::fs::write(envs.join("test.yaml"), format!("{local}\n{overlay}")).unwrap();
    ws
}

/// `gkq plan` of [`example_workspace`] as text and JSON.
fn plan_example(overlay: &str) -> (String, Value) {
    let ws = example_workspace(overlay);
    let state = tempfile::tempdir().unwrap();
    let run = |output: &str| {
        let out = gkq()
            .args(["plan", ".", "--env", "test", "-o", output, "--state-dir"])
            .arg(state.path())
            .env("NO_COLOR", "1")
            .current_dir(ws.spec_dir())
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
}

fn rung_of<'a>(plan: &'a Value, job: &str) -> &'a Value {
    plan["rungs"]
        .as_array()
        .unwrap_or_else(|| panic!("no rungs: {plan:#}"))
        .iter()
        .find(|r| r["job"] == job)
        .unwrap_or_else(|| panic!("no rung for {job}: {plan:#}"))
}

/// `mode: kueue`: each run lands on the next rung as quota is used, and the plan names the rung,
/// what happens when it is out of capacity, and where later jobs go.
#[test]
fn plan_names_each_jobs_rung_and_fallback_in_kueue_mode() {
    let (text, json) = plan_example("");
    let expected = [
        ("train-v6e-1", "reserved", 1, "reservation", "wait-on-rung"),
        ("train-v6e-2", "on-demand", 2, "on-demand", "wait-on-rung"),
        ("train-v6e-3", "dws", 3, "flex-start-queued", "queue"),
        ("train-v6e-4", "spot", 4, "spot", "wait-on-rung"),
    ];
    for (job, rung, index, kind, fallback) in expected {
        let r = rung_of(&json, job);
        assert_eq!(r["rung"]["name"], rung, "{r:#}");
        assert_eq!(r["rung"]["index"], index, "{r:#}");
        assert_eq!(r["rung"]["kind"], kind, "{r:#}");
        assert_eq!(r["fallback"]["kind"], fallback, "{r:#}");
        assert_eq!(r["rungs"], 4);
    }
    assert_eq!(
        rung_of(&json, "train-v6e-3")["rung"]["budgetSeconds"],
        3 * 86_400
    );
    assert_eq!(rung_of(&json, "train-v6e-4")["rung"]["pool"], "spot-pool-1");
    assert_eq!(
        rung_of(&json, "train-v6e-4")["fallback"]["next"]["flavor"],
        "spot-2"
    );
    for line in [
        "rung 2 of 4: on-demand (on-demand, pool on-demand-pool)",
        "if on-demand is out of capacity: the job stays admitted on on-demand and its pods wait (Kueue falls through on quota, not capacity)",
        "later jobs: rung 3 dws once on-demand's quota is used",
        "rung 3 of 4: dws (flex-start-queued, pool dws-pool, budget 3d)",
        "if dws is out of capacity: its ProvisioningRequest waits until DWS obtains every VM of the slice at once",
        "Spot nodes can be reclaimed at any time (30-second notice)",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

/// `mode: computeclass`: GKE picks the rung among the class's priorities, so the plan says the
/// order and "not predicted" instead of one rung; the queued rung keeps its own pool and rung.
#[test]
fn plan_says_the_order_gke_tries_in_computeclass_mode() {
    let overlay = std::fs::read_to_string(
        repo_root().join("examples/tpu-capacity-ladder/environments/computeclass.yaml"),
    )
    .unwrap();
    let (text, json) = plan_example(&overlay);
    let first = rung_of(&json, "train-v6e-1");
    assert!(first.get("rung").is_none(), "{first:#}");
    assert_eq!(first["computeClass"], "tpu-cluster-ladder-1");
    let tries: Vec<&str> = first["tries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(tries, ["reserved", "on-demand"]);
    assert_eq!(first["fallback"]["kind"], "gke-priorities");
    assert_eq!(rung_of(&json, "train-v6e-2")["rung"]["name"], "dws");
    assert!(
        text.contains("rung: not predicted (GKE decides at scale-up; gkq cannot see capacity): ComputeClass tpu-cluster-ladder-1 tries reserved (reservation), then on-demand (on-demand)"),
        "{text}"
    );
    assert!(
        text.contains("if none of them can be obtained: the pods stay pending (whenUnsatisfiable: DoNotScaleUp)"),
        "{text}"
    );
}

/// `gkq explain` of an applied job on the local target names the rung of its flavor (while
/// its DWS request waits, or once admitted), in the plan's words.
#[test]
fn explain_names_the_rung_a_job_waits_for() {
    let ws = example_workspace("");
    let state = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = gkq()
            .args(args)
            .args([".", "--env", "test", "--state-dir"])
            .arg(state.path())
            .env("NO_COLOR", "1")
            .current_dir(ws.spec_dir())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    run(&["apply", "--auto-approve"]);
    let text = run(&["explain", "default/train-v6e-3"]);
    let note = text
        .lines()
        .find(|l| l.contains("capacity ladder: "))
        .unwrap_or_else(|| panic!("no rung note in:\n{text}"));
    assert!(
        note.contains("rung 3 of 4: dws (flex-start-queued, pool dws-pool, budget 3d); if dws is out of capacity: its ProvisioningRequest waits"),
        "{note}"
    );
    assert!(
        note.contains("capacity ladder: waits for")
            || note.contains("capacity ladder: admitted on"),
        "{note}"
    );
}

/// Every problem (severity, message) of a spec text, loaded from a fresh directory.
fn problems_of(text: &str) -> Vec<(String, String)> {
    located_problems_of(text)
        .into_iter()
        .map(|(severity, message, _)| (severity, message))
        .collect()
}

/// Every problem (severity, message, `LINE:COL`) of a spec text, loaded from a fresh directory.
fn located_problems_of(text: &str) -> Vec<(String, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
    std::fs::write(dir.path().join("gkq.yaml"), text).unwrap();
    let opts = LoadOptions {
        env_lookup: Some(Box::new(|_| None)),
        ..Default::default()
    };
    let diags = match spec::load(&WorkingTree, dir.path(), &opts) {
        Err(f) => f.diagnostics,
        Ok(loaded) => model::build(&loaded).1,
    };
    diags
        .iter()
        .map(|d| {
            let span = d.span.unwrap_or_default();
            (
                format!("{:?}", d.severity).to_lowercase(),
                d.message.clone(),
                format!("{}:{}", span.line, span.column),
            )
        })
        .collect()
}

/// One bad spec with some text replaced; `want` is `Some((severity, text))` for a problem that
/// must be reported, `None` for `text` that must not appear in any problem.
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    Option<&'static str>,
    &'static str,
);

fn check_cases(cases: &[Case]) {
    let mut failures = Vec::new();
    for (file, replacements, severity, text) in cases {
        let mut spec =
            std::fs::read_to_string(repo_root().join("tests/bad-specs").join(file)).unwrap();
        for (from, to) in *replacements {
            assert!(spec.contains(from), "{file}: no `{from}`");
            spec = spec.replacen(from, to, 1);
        }
        let got = problems_of(&spec);
        let found = got
            .iter()
            .any(|(s, m)| m.contains(text) && severity.is_none_or(|w| s == w));
        if found != severity.is_some() {
            failures.push(format!(
                "{file} {replacements:?}: {severity:?} `{text}`, got {got:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The ladder's rules against the cluster judge each case of their kind, not only their bad
/// spec: version aliases mean their newest patch, a missing version (the channel's default) is
/// not judged, floors stated per minor release are met by later minors, regional and zonal
/// clusters, pools that cannot consume a reservation, and classes cut by a queued rung.
#[test]
fn ladder_cluster_rules_judge_every_case_of_their_kind() {
    const NAP_WARNING: &str = "may need the cluster's node auto-provisioning";
    const NEEDS_NAP: &str = "warnings/cc-auto-creation-needs-nap.yaml";
    const V5P: &str = "nap-v5p-below-floor.yaml";
    const SHADOWED: &str = "warnings/ladder-reservation-shadowed.yaml";
    const ZONE: &str = "ladder-reservation-zone-unknown.yaml";
    const NAP: &str = "  nodeAutoProvisioning: {maxCpu: 1000, maxMemoryGb: 4000, maxAccelerators: {tpu-v6e-slice: 64}}\n\ncapacity:";
    check_cases(&[
        (NEEDS_NAP, &[], Some("warning"), NAP_WARNING),
        (NEEDS_NAP, &[("\"1.33.2\"", "\"1.33\"")], None, NAP_WARNING),
        (
            NEEDS_NAP,
            &[("  version: \"1.33.2\"\n", "")],
            None,
            NAP_WARNING,
        ),
        (
            NEEDS_NAP,
            &[("\"1.33.2\"", "\"1.33.3-gke.1136000\"")],
            None,
            NAP_WARNING,
        ),
        (
            NEEDS_NAP,
            &[(
                "  rungs:",
                "  computeClass: {autoCreation: false}\n  rungs:",
            )],
            None,
            NAP_WARNING,
        ),
        (NEEDS_NAP, &[("\ncapacity:", NAP)], None, NAP_WARNING),
        (
            NEEDS_NAP,
            &[("\"1.33.2\"", "\"1.31.0\"")],
            Some("error"),
            "older than 1.31.1-gke.1146000",
        ),
        (
            NEEDS_NAP,
            &[("\"1.33.2\"", "\"1.31\"")],
            None,
            "1.31.1-gke.1146000",
        ),
        (
            NEEDS_NAP,
            &[("location: us-east5-b", "location: us-east5")],
            Some("error"),
            "the cluster is regional",
        ),
        (
            NEEDS_NAP,
            &[
                ("location: us-east5-b", "location: us-east5"),
                ("tpu-v6e-res,", "tpu-v6e-res, zone: us-east5-a,"),
            ],
            None,
            "tpu-v6e-res",
        ),
        (
            NEEDS_NAP,
            &[("tpu-v6e-res,", "tpu-v6e-res, zone: us-west1-c,")],
            Some("error"),
            "could never consume it",
        ),
        (V5P, &[], Some("error"), "older than 1.29.2-gke.1035000"),
        (V5P, &[("\"1.29.1\"", "\"1.29\"")], None, "TPU v5p"),
        (
            V5P,
            &[("\"1.29.1\"", "\"1.28.7-gke.1020000\"")],
            None,
            "TPU v5p",
        ),
        (
            V5P,
            &[("\"1.29.1\"", "\"1.28.6\"")],
            Some("error"),
            "older than 1.28.7-gke.1020000",
        ),
        (
            V5P,
            &[
                ("tpu-v5p-slice", "tpu-v5-lite-podslice"),
                ("\"1.29.1\"", "\"1.27.5\""),
            ],
            Some("error"),
            "TPU v5e",
        ),
        (V5P, &[("tpu-v5p-slice", "tpu7x")], None, "TPU7x"),
        (SHADOWED, &[], Some("warning"), "may consume reservation"),
        (
            SHADOWED,
            &[("reservationAffinity: any", "reservationAffinity: none")],
            None,
            "may consume reservation",
        ),
        (
            SHADOWED,
            &[("    reservationAffinity: any\n", "")],
            Some("warning"),
            "Compute Engine's default: any",
        ),
        (
            SHADOWED,
            &[("reservationAffinity: any", "spot: true")],
            None,
            "may consume reservation",
        ),
        (
            ZONE,
            &[("slices: 1}", "zone: us-east5-b, slices: 1}")],
            Some("warning"),
            "gkq cannot pin a node pool",
        ),
    ]);
}

/// A spec on the local target with `capacity` (the ladder's YAML, indented under
/// `capacity:`) and jobs `train-<n>` of `workers` (the worker group's YAML), `count` runs
/// each; the queue's hand-written flavor `default-cpu` holds the Ray heads.
fn ladder_spec(capacity: &str, jobs: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs_yaml = String::new();
    for (name, workers) in jobs {
        jobs_yaml.push_str(&format!(
            "  - name: {name}\n    queue: user-queue\n    duration: 6h\n    script: train.py\n    image: rayproject/ray:2.53.0-py311\n    head: {{cpu: 2, memory: 4Gi, nodePool: default-pool}}\n    workers:\n      - {workers}\n"
        ));
    }
    let spec = format!(
        r#"target: local
project: local-project
location: us-east5-b
cluster:
  name: ladder
  version: "1.34"
  deletionProtection: false
  defaultPool: {{machineType: n2-standard-16, nodes: 8}}
  addons: {{rayOperator: true}}
capacity:
{capacity}
kueue:
  manifests: builtin
  flavors:
    - {{name: default-cpu, nodePool: default-pool}}
  clusterQueues:
    - name: cluster-queue
      resourceGroups:
        - resources: [cpu, memory, google.com/tpu]
          flavors:
            - name: default-cpu
              quota: {{cpu: 40, memory: 80Gi, google.com/tpu: 0}}
  localQueues:
    - {{name: user-queue, namespace: default, clusterQueue: cluster-queue}}
jobs:
{jobs_yaml}"#
    );
    std::fs::write(dir.path().join("gkq.yaml"), spec).unwrap();
    std::fs::write(dir.path().join("train.py"), "print('train')\n").unwrap();
    dir
}

/// `gkq ARGS <spec> --state-dir <state>` with `env` set; stdout, or a panic with stderr.
fn run_ok(spec: &Path, state: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let mut c = gkq();
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .args(args)
        .arg(spec)
        .arg("--state-dir")
        .arg(state)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} with {env:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What `gkq plan -o json` predicts per job (its `rungs` entry), on a fresh local target.
fn planned_rungs(spec: &Path) -> Vec<Value> {
    let state = tempfile::tempdir().unwrap();
    let plan: Value =
        serde_json::from_str(&run_ok(spec, state.path(), &[], &["plan", "-o", "json"])).unwrap();
    plan["rungs"].as_array().cloned().unwrap_or_default()
}

/// The environment of a local target with `GKQ_LOCAL_CAPACITY=capacity`, an hour a second.
fn local_env(capacity: &str) -> [(&'static str, &str); 2] {
    [
        ("GKQ_LOCAL_CAPACITY", capacity),
        ("GKQ_LOCAL_CLOCK", "3600x"),
    ]
}

/// Applies the spec on a fresh local target with `GKQ_LOCAL_CAPACITY=capacity` and lets an hour
/// and more of simulated time pass; returns the state directory and the environment.
fn applied_under<'a>(
    spec: &Path,
    capacity: &'a str,
) -> (tempfile::TempDir, [(&'static str, &'a str); 2]) {
    let state = tempfile::tempdir().unwrap();
    let env = local_env(capacity);
    run_ok(spec, state.path(), &env, &["apply", "--auto-approve"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    (state, env)
}

/// Applies the spec on a fresh local target with `GKQ_LOCAL_CAPACITY=capacity`, lets an hour
/// and more of simulated time pass (the jobs declare `duration: 6h`, which the local target
/// runs them for on every queue, DWS or not), and returns `gkq status -o json`'s jobs.
fn jobs_under(spec: &Path, capacity: &str) -> Vec<Value> {
    let (state, env) = applied_under(spec, capacity);
    let status: Value =
        serde_json::from_str(&run_ok(spec, state.path(), &env, &["status", "-o", "json"])).unwrap();
    let text = run_ok(spec, state.path(), &env, &["status"]);
    let jobs = status["jobs"].as_array().cloned().unwrap();
    for job in &jobs {
        if let Some(rung) = job.get("rung") {
            let name = job["job"].as_str().unwrap();
            let line = text
                .lines()
                .skip_while(|l| !l.trim_start().starts_with(&format!("{name} ->")))
                .find(|l| l.trim_start().starts_with("ladder:"))
                .unwrap_or_else(|| panic!("no ladder line for {name} in:\n{text}"));
            let words = if rung["landed"] == true {
                format!("rung: {}", rung["rung"]["name"].as_str().unwrap())
            } else {
                "waiting for ".to_string()
            };
            assert!(line.contains(&words), "{line:?} for {rung:#}");
        }
    }
    jobs
}

fn job_named<'a>(jobs: &'a [Value], name: &str) -> &'a Value {
    jobs.iter()
        .find(|j| j["job"] == name)
        .unwrap_or_else(|| panic!("no job {name} in {jobs:#?}"))
}

/// The example's `capacity:` (kueue mode: reservation, on-demand, flex-start queued, Spot of
/// two 4x4 slices) with four multi-host jobs `train-<n>`, one per rung as the plan predicts.
fn example_ladder_spec() -> tempfile::TempDir {
    let base =
        std::fs::read_to_string(repo_root().join("examples/tpu-capacity-ladder/gkq.yaml")).unwrap();
    let capacity = base
        .lines()
        .skip_while(|l| !l.starts_with("capacity:"))
        .skip(1)
        .take_while(|l| l.starts_with(' ') || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("${RESERVATION_PROJECT}", "capacity-project");
    let jobs: Vec<(String, &str)> = (1..=4)
        .map(|i| (format!("train-{i}"), MULTI_HOST))
        .collect();
    let jobs: Vec<(&str, &str)> = jobs.iter().map(|(n, w)| (n.as_str(), *w)).collect();
    ladder_spec(&capacity, &jobs)
}

/// A worker group of one 4x4 v6e slice (four VMs).
const MULTI_HOST: &str = "{group: tpu-group, replicas: 1, hosts: 4, cpu: 8, memory: 16Gi, accelerator: {type: tpu-v6e-slice, topology: 4x4, chips: 4}}";
/// A worker group of one 2x2 v6e slice (one VM).
const SINGLE_HOST: &str = "{group: tpu-group, replicas: 1, hosts: 1, cpu: 8, memory: 16Gi, accelerator: {type: tpu-v6e-slice, topology: 2x2, chips: 4}}";

/// `mode: kueue`, the example's four rungs (reservation, on-demand, flex-start queued, Spot of
/// two 4x4 slices), one job per rung as the plan predicts: with each rung's pool out of
/// capacity in turn, the job the plan put there stays admitted on that rung and waits, saying
/// why (Kueue falls through on quota, not capacity), and every other job runs on its predicted
/// rung.
#[test]
fn kueue_mode_a_stocked_out_rung_keeps_its_job_waiting_as_the_plan_says() {
    let spec = example_ladder_spec();
    let planned = planned_rungs(spec.path());
    assert_eq!(planned.len(), 4, "{planned:#?}");
    for stocked_out in &planned {
        let pool = stocked_out["rung"]["pool"].as_str().unwrap();
        let jobs = jobs_under(spec.path(), &format!("{pool}:0"));
        for plan in &planned {
            let job = job_named(&jobs, plan["job"].as_str().unwrap());
            let rung = &job["rung"];
            assert_eq!(rung["rung"]["name"], plan["rung"]["name"], "{job:#}");
            assert_eq!(rung["rung"]["index"], plan["rung"]["index"], "{job:#}");
            if plan["job"] == stocked_out["job"] {
                assert_eq!(rung["landed"], false, "{pool}:0 {job:#}");
                let why = rung["waiting"].as_str().unwrap();
                assert!(why.contains("simulated stockout"), "{why}");
                assert!(
                    why.contains(&format!("GKQ_LOCAL_CAPACITY {pool}:0")),
                    "{why}"
                );
            } else {
                assert_eq!(rung["landed"], true, "{pool}:0 {job:#}");
            }
        }
    }
}

/// A `mode: computeclass` ladder: one class of three single-host rungs of different kinds, in an
/// order that is not Google's (reservation, Spot, on-demand).
const COMPUTECLASS_LADDER: &str = "  mode: computeclass
  clusterQueue: cluster-queue
  quota: {cpu: 100, memory: 400Gi, google.com/tpu: 16}
  accelerator: {machineType: ct6e-standard-4t, topology: 2x2}
  rungs:
    - {name: reserved, kind: reservation, reservation: {name: res, slices: 1}}
    - {name: spot, kind: spot, slices: 1}
    - {name: on-demand, kind: on-demand, slices: 2}
";

/// The spec's ComputeClass ladder (one class of three single-host rungs of different kinds):
/// with the first `n` rungs out of capacity, the job lands on rung `n + 1` of the order the
/// plan says GKE tries, and with every rung out it waits, saying no priority could be obtained.
#[test]
fn computeclass_mode_a_job_lands_on_the_next_rung_with_capacity() {
    let capacity = COMPUTECLASS_LADDER;
    let single = "{group: tpu-group, replicas: 1, hosts: 1, cpu: 8, memory: 16Gi, accelerator: {type: tpu-v6e-slice, topology: 2x2, chips: 4}}";
    let spec = ladder_spec(capacity, &[("train", single)]);
    let planned = planned_rungs(spec.path());
    let plan = &planned[0];
    let class = plan["computeClass"].as_str().unwrap();
    let tries = plan["tries"].as_array().unwrap();
    assert_eq!(tries.len(), 3, "{plan:#}");
    let pool = |i: usize| format!("gk-{class}-{}", i + 1);
    // Each rung alone out of capacity, then it and every rung before it.
    for out in 0..tries.len() {
        let alone = format!("{}:0", pool(out));
        let landed_on = if out == 0 { 1 } else { 0 };
        let jobs = jobs_under(spec.path(), &alone);
        let rung = &job_named(&jobs, "train")["rung"];
        assert_eq!(rung["landed"], true, "{alone}: {rung:#}");
        assert_eq!(
            rung["rung"]["name"], tries[landed_on]["name"],
            "{alone}: {rung:#}"
        );
        assert_eq!(rung["rung"]["index"], tries[landed_on]["index"]);

        if out == 0 {
            continue;
        }
        let cumulative: Vec<String> = (0..=out).map(|i| format!("{}:0", pool(i))).collect();
        let cumulative = cumulative.join(",");
        let jobs = jobs_under(spec.path(), &cumulative);
        let rung = &job_named(&jobs, "train")["rung"];
        if let Some(next) = tries.get(out + 1) {
            assert_eq!(rung["landed"], true, "{cumulative}: {rung:#}");
            assert_eq!(rung["rung"]["name"], next["name"], "{cumulative}: {rung:#}");
        } else {
            assert_eq!(rung["landed"], false, "{cumulative}: {rung:#}");
            assert_eq!(rung["computeClass"], class);
            let why = rung["waiting"].as_str().unwrap();
            assert!(
                why.contains(&format!(
                    "no priority of ComputeClass {class} could be obtained"
                )),
                "{why}"
            );
        }
    }
    // Kinds work as keys too: the class's reservation and Spot rungs out by kind.
    let jobs = jobs_under(spec.path(), "reservation:0,spot:0");
    let rung = &job_named(&jobs, "train")["rung"];
    assert_eq!(rung["rung"]["name"], "on-demand", "{rung:#}");
}

/// A multi-host job (a 4x4 slice of four VMs) never lands on a single-host rung (2x2), in
/// either mode, even when the single-host rungs come first and have capacity: Kueue skips a
/// flavor whose topology label the job's selector does not match (kueue mode), and GKE a
/// priority that cannot hold the slice (computeclass mode). A single-host job takes the first.
#[test]
fn a_multi_host_job_never_lands_on_a_single_host_rung() {
    let multi = "{group: tpu-group, replicas: 1, hosts: 4, cpu: 8, memory: 16Gi, accelerator: {type: tpu-v6e-slice, topology: 4x4, chips: 4}}";
    let single = "{group: tpu-group, replicas: 1, hosts: 1, cpu: 8, memory: 16Gi, accelerator: {type: tpu-v6e-slice, topology: 2x2, chips: 4}}";
    let rungs = "  rungs:
    - {name: small-od, kind: on-demand, slices: 2, accelerator: {machineType: ct6e-standard-4t, topology: 2x2}}
    - {name: small-spot, kind: spot, slices: 2, accelerator: {machineType: ct6e-standard-4t, topology: 2x2}}
    - {name: big-spot, kind: spot, slices: 1, accelerator: {machineType: ct6e-standard-4t, topology: 4x4}}
";
    for mode in [
        "  mode: kueue\n  clusterQueue: cluster-queue\n",
        "  mode: computeclass\n  clusterQueue: cluster-queue\n  quota: {cpu: 100, memory: 400Gi, google.com/tpu: 32}\n",
    ] {
        let spec = ladder_spec(
            &format!("{mode}{rungs}"),
            &[("big", multi), ("small", single)],
        );
        let planned = planned_rungs(spec.path());
        // Every rung unlimited; then no on-demand capacity and Spot for both jobs' nodes.
        for capacity in ["", "on-demand:0,spot:5"] {
            let jobs = jobs_under(spec.path(), capacity);
            let big = &job_named(&jobs, "big")["rung"];
            assert_eq!(big["landed"], true, "{mode}{capacity}: {big:#}");
            assert_eq!(big["rung"]["name"], "big-spot", "{mode}{capacity}: {big:#}");
            let small = &job_named(&jobs, "small")["rung"];
            assert_ne!(
                small["rung"]["name"], "big-spot",
                "{mode}{capacity}: {small:#}"
            );
            // What the plan said: the rung itself (kueue mode), or the order GKE tries.
            for (job, rung) in [("big", big), ("small", small)] {
                let plan = planned.iter().find(|p| p["job"] == job).unwrap();
                match plan.get("rung") {
                    Some(predicted) => assert_eq!(predicted["name"], rung["rung"]["name"]),
                    None => assert!(
                        plan["tries"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|t| t["name"] == rung["rung"]["name"]),
                        "{plan:#} {rung:#}"
                    ),
                }
            }
        }
    }
}

/// A bad `GKQ_LOCAL_CAPACITY` stops the command with an error naming the variable, the value
/// and the forms it accepts.
#[test]
fn a_bad_local_capacity_is_an_error_naming_the_variable() {
    let spec = ladder_spec(
        "  mode: kueue\n  clusterQueue: cluster-queue\n  accelerator: {machineType: ct6e-standard-4t, topology: 2x2}\n  rungs:\n    - {name: od, kind: on-demand, slices: 1}\n",
        &[(
            "train",
            "{group: tpu-group, replicas: 1, hosts: 1, cpu: 8, memory: 16Gi, accelerator: {type: tpu-v6e-slice, topology: 2x2, chips: 4}}",
        )],
    );
    for bad in [
        "on-demand",
        "spot:-2",
        "spot:plenty",
        "Spot_Pool:1",
        "spot:1,spot:2",
    ] {
        let state = tempfile::tempdir().unwrap();
        let out = gkq()
            .args(["plan"])
            .arg(spec.path())
            .arg("--state-dir")
            .arg(state.path())
            .env("GKQ_LOCAL_CAPACITY", bad)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad}: {stderr}");
        assert!(
            stderr.contains(&format!("GKQ_LOCAL_CAPACITY={bad:?}")),
            "{bad}: {stderr}"
        );
        assert!(
            stderr.contains("on-demand, flex-start, flex-start-queued or queued, spot"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A bad spec with some text replaced, and the problem it must report: severity, `LINE:COL`
/// and a part of the message.
type Located = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static str,
    &'static str,
);

fn check_located(cases: &[Located]) {
    let mut failures = Vec::new();
    for (file, replacements, severity, at, text) in cases {
        let mut spec =
            std::fs::read_to_string(repo_root().join("tests/bad-specs").join(file)).unwrap();
        for (from, to) in *replacements {
            assert!(spec.contains(from), "{file}: no `{from}`");
            spec = spec.replacen(from, to, 1);
        }
        let got = located_problems_of(&spec);
        let found = got
            .iter()
            .any(|(s, m, l)| s == severity && l == at && m.contains(text));
        if !found {
            failures.push(format!(
                "{file} {replacements:?}: {severity} at {at} `{text}`, got {got:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `mode: kueue` -> `mode: computeclass` with the class's quota: one line more after the mode.
const TO_CLASS: (&str, &str) = (
    "mode: kueue",
    "mode: computeclass\n  quota: {cpu: 720, memory: 2880Gi, google.com/tpu: 16}",
);
/// `mode: computeclass` -> `mode: kueue`: one line less after the mode.
const TO_KUEUE: (&str, &str) = (
    "  mode: computeclass\n  quota: {cpu: 720, memory: 2880Gi, google.com/tpu: 16}\n",
    "  mode: kueue\n",
);

/// The GPU ladder's Spot rung made a flex-start rung with a 3-hour budget: one line more.
const GPU_SPOT_TO_FLEX: (&str, &str) = ("kind: spot", "kind: flex-start\n      maxRunDuration: 3h");

/// Every rule of the ladder fires for a rung whatever the mode renders it as: a node pool of
/// gkq's (`mode: kueue`, and queued rungs in both modes) or a ComputeClass priority (no pool),
/// each at the rung's own field. The bad specs are written in one mode; these are the other.
#[test]
fn ladder_rules_judge_a_rung_in_either_mode() {
    check_located(&[
        // Rules of the ladder itself, in computeclass mode (the bad specs are kueue mode).
        (
            "ladder-queue-undefined.yaml",
            &[TO_CLASS],
            "error",
            "18:17",
            "ClusterQueue `cluster-queu` is not defined",
        ),
        (
            "ladder-queue-undefined.yaml",
            &[
                TO_CLASS,
                ("cluster-queu\n", "cluster-queue\n"),
                ("[cpu, memory, google.com/tpu]", "[cpu, memory]"),
            ],
            "error",
            "18:17",
            "has no resource group for the ladder's accelerator",
        ),
        (
            "ladder-queue-undefined.yaml",
            &[
                ("cluster-queu\n", "cluster-queue\n"),
                ("[cpu, memory, google.com/tpu]", "[cpu, memory]"),
            ],
            "error",
            "17:17",
            "has no resource group for the ladder's accelerator",
        ),
        (
            "ladder-empty.yaml",
            &[TO_CLASS],
            "error",
            "20:10",
            "has no rungs",
        ),
        (
            "ladder-duplicate-rung.yaml",
            &[TO_CLASS],
            "error",
            "31:13",
            "duplicate rung `dws`",
        ),
        (
            "ladder-field-for-other-kind.yaml",
            &[TO_CLASS],
            "error",
            "33:7",
            "has no time budget",
        ),
        (
            "ladder-reservation-on-spot.yaml",
            &[TO_CLASS],
            "error",
            "33:7",
            "consumes no reservation",
        ),
        (
            "ladder-reservation-bad-name.yaml",
            &[TO_CLASS],
            "error",
            "23:27",
            "not a Compute Engine resource name",
        ),
        (
            "ladder-reservation-zone-other.yaml",
            &[TO_CLASS],
            "error",
            "23:46",
            "could never consume it",
        ),
    ]);
}

/// The ladder's rules of budgets, jobs and reachability, in computeclass mode (their bad specs
/// are kueue mode).
#[test]
fn ladder_job_rules_judge_a_rung_in_either_mode() {
    check_located(&[
        (
            "ladder-flex-budget-over-7d.yaml",
            &[TO_CLASS],
            "error",
            "29:23",
            "at most 7 days",
        ),
        (
            "ladder-too-many-slices.yaml",
            &[
                TO_CLASS,
                (
                    "kind: spot\n      slices: 100",
                    "kind: flex-start-queued\n      slices: 100",
                ),
            ],
            "error",
            "33:15",
            "stops at 64",
        ),
        (
            "ladder-job-no-rung.yaml",
            &[TO_CLASS],
            "error",
            "69:22",
            "no rung of the capacity ladder provides",
        ),
        (
            "ladder-job-longer-than-only-rung.yaml",
            &[TO_CLASS],
            "error",
            "59:15",
            "longer than the time budget of flex-start rung `dws` (maxRunDuration 3h)",
        ),
        (
            "warnings/ladder-job-longer-than-flex-rung.yaml",
            &[TO_CLASS],
            "warning",
            "68:15",
            "longer than the time budget of flex-start rung `dws`",
        ),
        (
            "warnings/ladder-multi-host-on-flex-vms.yaml",
            &[TO_CLASS],
            "warning",
            "28:13",
            "documents for single-host slices",
        ),
        (
            "warnings/ladder-rung-unused.yaml",
            &[TO_CLASS],
            "warning",
            "31:13",
            "no job asks for the slice rung `spot` provides",
        ),
        (
            "warnings/ladder-rung-after-unbounded.yaml",
            &[TO_CLASS],
            "warning",
            "30:13",
            "is never reached",
        ),
    ]);
}

/// The node-pool rules that judge a rung through its pool (a queued rung is a pool in both modes;
/// a hand-written pool stays hand-written whatever the mode).
#[test]
fn pool_rules_judge_a_rung_rendered_as_a_pool_in_either_mode() {
    const SHADOWED: &str = "warnings/ladder-reservation-shadowed.yaml";
    check_located(&[
        // A queued rung is a node pool in both modes: the node-pool rules judge it.
        (
            "ladder-pool-collides.yaml",
            &[TO_CLASS, ("name: on-demand-pool", "name: dws-pool")],
            "error",
            "32:13",
            "duplicate node pool",
        ),
        (
            "ladder-job-no-rung.yaml",
            &[("\"1.34\"", "\"1.33\"")],
            "warning",
            "27:13",
            "may reject TPU flex-start with queued provisioning",
        ),
        (
            "ladder-job-no-rung.yaml",
            &[TO_CLASS, ("\"1.34\"", "\"1.33\"")],
            "warning",
            "28:13",
            "may reject TPU flex-start with queued provisioning",
        ),
        // A hand-written pool named as a ComputeClass rung's pool would be in kueue mode is
        // still hand-written in computeclass mode.
        (
            SHADOWED,
            &[TO_CLASS, ("other-v6e", "on-demand-pool")],
            "warning",
            "18:26",
            "may consume reservation `tpu-v6e-res` before rung `reserved` does",
        ),
    ]);
}

/// The facts of machines, topologies, TPU zones and GKE versions judge a ComputeClass priority as
/// they judge the pool the rung expands to in `mode: kueue`, at the same fields.
#[test]
fn machine_facts_judge_a_rung_in_either_mode() {
    check_located(&[
        // Facts of machines, topologies, zones and versions: a rung is judged as its pool would be.
        (
            "ladder-flex-start-on-v4-computeclass.yaml",
            &[],
            "error",
            "25:13",
            "flex-start does not offer TPU v4",
        ),
        (
            "ladder-flex-start-on-v4-computeclass.yaml",
            &[TO_KUEUE],
            "error",
            "24:13",
            "flex-start does not offer TPU v4",
        ),
        (
            "cc-machine-type-not-in-family.yaml",
            &[TO_KUEUE],
            "error",
            "18:30",
            "`ct6e-standard-8` is not a TPU v6e machine type",
        ),
        (
            "cc-topology-not-2d.yaml",
            &[TO_KUEUE],
            "error",
            "18:58",
            "TPU v6e slices are 2D",
        ),
        (
            "cc-topology-not-2d.yaml",
            &[("topology: 2x2x2}", "topology: 4x4}")],
            "error",
            "19:58",
            "`ct6e-standard-8t` cannot form a 4x4 slice",
        ),
        (
            "warnings/cc-flex-start-zone-not-listed.yaml",
            &[TO_KUEUE],
            "warning",
            "24:13",
            "is not listed as offering flex-start TPU v6e",
        ),
        (
            "warnings/cc-flex-start-zone-not-listed.yaml",
            &[],
            "warning",
            "19:30",
            "is not listed as offering TPU v6e",
        ),
        (
            "cc-tpu7x-below-floor.yaml",
            &[TO_KUEUE],
            "error",
            "9:12",
            "the first version that runs TPU7x (Ironwood) nodes (node pool `on-demand-pool`)",
        ),
        (
            "cc-tpu7x-below-floor.yaml",
            &[(
                "machineType: tpu7x-standard-4t",
                "machineType: tpu7x-standard-4",
            )],
            "error",
            "19:30",
            "`tpu7x-standard-4` is not a TPU7x (Ironwood) machine type",
        ),
        (
            "ladder-flex-below-floor.yaml",
            &[
                (
                    "machineType: ct6e-standard-8t, topology: 2x4}",
                    "machineType: g2-standard-24, gpu: {type: nvidia-l4, count: 2}}",
                ),
                ("\"1.32\"", "\"1.32.1\""),
            ],
            "error",
            "9:12",
            "the first version that runs flex-start nodes (flex-start rung `flex` of the ComputeClass ladder)",
        ),
        (
            "ladder-flex-below-floor.yaml",
            &[
                (
                    "machineType: ct6e-standard-8t, topology: 2x4}",
                    "machineType: g2-standard-24, gpu: {type: nvidia-l4, count: 2}}",
                ),
                ("\"1.32\"", "\"1.32.1\""),
                TO_KUEUE,
            ],
            "error",
            "9:12",
            "the first version that runs flex-start nodes (node pool `flex-pool`)",
        ),
        (
            "cc-gpu-rung-topology.yaml",
            &[(
                "\n    - name: on-demand",
                "\n    - name: on-demand\n      accelerator: {machineType: g2-standard-24, topology: 1x1, gpu: {type: nvidia-l4, count: 2}}",
            )],
            "error",
            "22:60",
            "`topology` is set but `g2-standard-24` is not a TPU machine type",
        ),
    ]);
}

/// Budgets, the kinds' exclusions and GPU rungs, for ComputeClass priorities and pools alike.
#[test]
fn budgets_exclusions_and_gpu_rungs_in_either_mode() {
    check_located(&[
        // Budgets and the kinds' exclusions, for ComputeClass priorities and pools alike.
        (
            "ladder-flex-below-floor.yaml",
            &[("maxRunDuration: 1d", "maxRunDuration: 8d")],
            "error",
            "27:23",
            "at most 7 days",
        ),
        (
            "ladder-flex-below-floor.yaml",
            &[("maxRunDuration: 1d", "maxRunDuration: 8d"), TO_KUEUE],
            "error",
            "26:23",
            "at most 7 days",
        ),
        (
            "ladder-reservation-on-spot.yaml",
            &[("kind: spot", "kind: flex-start-queued")],
            "error",
            "32:7",
            "a `flex-start-queued` rung consumes no reservation",
        ),
        (
            "ladder-reservation-on-spot.yaml",
            &[TO_CLASS, ("kind: spot", "kind: flex-start")],
            "error",
            "33:7",
            "a `flex-start` rung consumes no reservation",
        ),
        // Flex-start VMs without `maxRunDuration` still end after 7 days, in both modes.
        (
            "ladder-flex-below-floor.yaml",
            &[
                ("      maxRunDuration: 1d\n", ""),
                ("duration: 6h", "duration: 8d"),
            ],
            "warning",
            "51:15",
            "longer than the time budget of flex-start rung `flex` (flex-start's limit of 7 days)",
        ),
        (
            "ladder-flex-below-floor.yaml",
            &[
                ("      maxRunDuration: 1d\n", ""),
                ("duration: 6h", "duration: 8d"),
                ("kind: on-demand", "kind: flex-start"),
                TO_KUEUE,
            ],
            "error",
            "50:15",
            "longer than the time budget of flex-start rung `on-demand` (flex-start's limit of 7 days), `flex` (flex-start's limit of 7 days)",
        ),
        // GPU rungs: compared with jobs by GPU type, in both modes.
        (
            "cc-gpu-job-no-rung.yaml",
            &[],
            "warning",
            "21:13",
            "no job asks for the slice rung `on-demand` provides",
        ),
        (
            "ladder-gpu-job-no-rung.yaml",
            &[],
            "warning",
            "20:13",
            "no job asks for the slice rung `on-demand` provides",
        ),
        (
            "cc-gpu-job-no-rung.yaml",
            &[
                GPU_SPOT_TO_FLEX,
                ("type: nvidia-h100-80gb", "type: nvidia-l4"),
            ],
            "warning",
            "52:15",
            "longer than the time budget of flex-start rung `spot` (maxRunDuration 3h)",
        ),
        (
            "ladder-gpu-job-no-rung.yaml",
            &[
                GPU_SPOT_TO_FLEX,
                ("type: nvidia-h100-80gb", "type: nvidia-l4"),
            ],
            "warning",
            "51:15",
            "longer than the time budget of flex-start rung `spot` (maxRunDuration 3h)",
        ),
        (
            "cc-gpu-job-no-rung.yaml",
            &[
                GPU_SPOT_TO_FLEX,
                (
                    "kind: on-demand",
                    "kind: flex-start\n      maxRunDuration: 3h",
                ),
                ("type: nvidia-h100-80gb", "type: nvidia-l4"),
            ],
            "error",
            "53:15",
            "longer than the time budget of flex-start rung `on-demand` (maxRunDuration 3h)",
        ),
        (
            "warnings/cc-rung-after-unbounded.yaml",
            &[TO_KUEUE],
            "warning",
            "26:13",
            "rung `spot` is never reached: rung `dws` before it has unbounded quota",
        ),
    ]);
}

/// gkq makes a node pool per slice only for a rung rendered as pools (every rung in kueue mode,
/// a queued rung in both): a ComputeClass priority of many slices is GKE's to create, so the
/// pool-count limit does not apply to it.
#[test]
fn a_computeclass_priority_is_not_cut_into_slice_pools() {
    check_cases(&[
        (
            "ladder-too-many-slices.yaml",
            &[],
            Some("error"),
            "stops at 64",
        ),
        (
            "ladder-too-many-slices.yaml",
            &[TO_CLASS],
            None,
            "stops at 64",
        ),
    ]);
}

/// The note `gkq explain` gives from what the cluster says (`None`: it gave none).
fn live_note(spec: &Path, state: &Path, env: &[(&str, &str)], job: &str) -> Option<String> {
    let text = run_ok(spec, state, env, &["explain", &format!("default/{job}")]);
    text.lines()
        .find(|l| l.contains("capacity ladder, as the cluster says: "))
        .map(str::to_string)
}

/// `mode: kueue`: with each rung of the example's ladder out of capacity in turn, `gkq explain`
/// of the job the plan put there names that rung and why it waits, from the cluster (the
/// autoscaler's stockout event, or the ProvisioningRequest of the queued rung that never gets
/// capacity), and says nothing of the kind for the jobs whose pods run.
#[test]
fn explain_names_the_rung_a_stocked_out_job_waits_for_and_why() {
    let spec = example_ladder_spec();
    let planned = planned_rungs(spec.path());
    assert_eq!(planned.len(), 4, "{planned:#?}");
    for stocked_out in &planned {
        let rung = &stocked_out["rung"];
        let (name, pool) = (
            rung["name"].as_str().unwrap(),
            rung["pool"].as_str().unwrap(),
        );
        let queued = rung["kind"] == "flex-start-queued";
        let capacity = format!("{pool}:{}", if queued { "never" } else { "0" });
        let (state, env) = applied_under(spec.path(), &capacity);
        let job = stocked_out["job"].as_str().unwrap();
        let note = live_note(spec.path(), state.path(), &env, job)
            .unwrap_or_else(|| panic!("{capacity}: no note from the cluster for {job}"));
        assert!(
            note.contains(&format!("waiting for rung {name}: ")),
            "{capacity}: {note}"
        );
        if queued {
            assert!(note.contains("ProvisioningRequest"), "{capacity}: {note}");
        } else {
            assert!(note.contains("simulated stockout"), "{capacity}: {note}");
            assert!(
                note.contains(&format!("GKQ_LOCAL_CAPACITY {capacity}")),
                "{note}"
            );
        }
        let running = planned.iter().find(|p| p["job"] != job).unwrap();
        let running = running["job"].as_str().unwrap();
        assert_eq!(
            live_note(spec.path(), state.path(), &env, running),
            None,
            "{capacity}: {running} runs"
        );
    }
}

/// `mode: computeclass` with every priority out of capacity: `gkq explain` says the job waits
/// for a rung of the class and which priorities were tried, and why each could not be had.
#[test]
fn explain_in_computeclass_mode_names_the_priorities_tried() {
    let spec = ladder_spec(COMPUTECLASS_LADDER, &[("train", SINGLE_HOST)]);
    let planned = planned_rungs(spec.path());
    let class = planned[0]["computeClass"].as_str().unwrap();
    let tries = planned[0]["tries"].as_array().unwrap();
    let capacity: Vec<String> = (1..=tries.len())
        .map(|i| format!("gk-{class}-{i}:0"))
        .collect();
    let capacity = capacity.join(",");
    let (state, env) = applied_under(spec.path(), &capacity);
    let note = live_note(spec.path(), state.path(), &env, "train")
        .unwrap_or_else(|| panic!("no note from the cluster"));
    assert!(
        note.contains(&format!(
            "waiting for a rung of ComputeClass {class}: no priority of ComputeClass {class} could be obtained"
        )),
        "{note}"
    );
    for (i, tried) in tries.iter().enumerate() {
        let kind = tried["kind"].as_str().unwrap();
        assert!(
            note.contains(&format!("priority {} ({kind}): ", i + 1)),
            "{note}"
        );
    }
}

/// `gkq watch` on the local target, in both modes: with the job's rungs out of capacity, its
/// job line shows the rung it waits for (kueue mode: its flavor's rung; computeclass mode: a
/// rung of the class); watched again after capacity changed, the rung it landed on.
#[test]
fn watch_shows_the_waiting_rung_then_the_landed_one() {
    use crate::support::process::Running;
    use std::time::Duration;
    let kueue = "  mode: kueue\n  clusterQueue: cluster-queue\n  accelerator: {machineType: ct6e-standard-4t, topology: 2x2}\n  rungs:\n    - {name: first, kind: on-demand, slices: 1}\n    - {name: last, kind: spot, slices: 1}\n";
    for ladder in [kueue, COMPUTECLASS_LADDER] {
        let spec = ladder_spec(ladder, &[("train", SINGLE_HOST)]);
        let plan = &planned_rungs(spec.path())[0];
        // kueue mode: the predicted rung's pool out; computeclass: every priority but the last.
        let (stockout, waiting, freed, landed) = match plan.get("rung") {
            Some(rung) => {
                let name = rung["name"].as_str().unwrap().to_string();
                let pool = rung["pool"].as_str().unwrap();
                (
                    format!("{pool}:0"),
                    format!("ladder: waiting for rung {name}: simulated stockout"),
                    String::new(),
                    format!("ladder: rung: {name} ("),
                )
            }
            None => {
                let class = plan["computeClass"].as_str().unwrap();
                let tries = plan["tries"].as_array().unwrap();
                let out: Vec<String> = (1..=tries.len())
                    .map(|i| format!("gk-{class}-{i}:0"))
                    .collect();
                let last = tries.last().unwrap()["name"].as_str().unwrap();
                (
                    out.join(","),
                    format!("ladder: waiting for a rung of ComputeClass {class}: no priority"),
                    out[..out.len() - 1].join(","),
                    format!("ladder: rung: {last} ("),
                )
            }
        };
        let (state, _) = applied_under(spec.path(), &stockout);
        let watch = |capacity: &str| {
            let mut command = gkq();
            command
                .args(["watch"])
                .arg(spec.path())
                .arg("--state-dir")
                .arg(state.path())
                .args(["--interval", "1s", "--job-interval", "1s"])
                .env("NO_COLOR", "1");
            for (k, v) in local_env(capacity) {
                command.env(k, v);
            }
            Running::spawn(command)
        };
        let wait = Duration::from_secs(60);
        let job_line = |out: &str, words: &str| {
            out.lines()
                .any(|l| l.contains("job default/train: ") && l.contains(words))
        };
        let mut stocked_out = watch(&stockout);
        stocked_out.wait_for(&waiting, wait, |out| job_line(out, &waiting));
        drop(stocked_out);
        let mut freed = watch(&freed);
        freed.wait_for(&landed, wait, |out| job_line(out, &landed));
    }
}
