//! The GKE emulator and the capacity ladder's settings (docs/gke-facts.md, "L8. What the GKE API
//! refuses"): node auto-provisioning on the cluster, reservation affinities, Spot, flex-start,
//! queued provisioning, `maxRunDuration` and TPU topologies are accepted and read back as sent;
//! the combinations GKE refuses get its status and a message naming the rule, on create and on
//! every mutation, and leave nothing behind. The ladder example gkq renders, in both modes, is
//! accepted as is.

use gkq::emulator::{Emulator, EmulatorConfig, EmulatorHandle};
use reqwest::Method as M;
use serde_json::{Value, json};

const PARENT: &str = "v1/projects/p/locations/us-east5-b";

async fn start() -> (String, EmulatorHandle, reqwest::Client) {
    gkq::gke::install_tls_provider();
    let (url, handle) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    (url, handle, reqwest::Client::new())
}

async fn call(http: &reqwest::Client, method: M, url: String, body: Option<Value>) -> (u16, Value) {
    let mut req = http.request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, v)
}

/// A cluster of GKE `version` with a default pool, plus `extra` fields.
fn cluster(name: &str, version: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "initialClusterVersion": version,
        "nodePools": [{"name": "default-pool", "initialNodeCount": 1}]});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    json!({ "cluster": c })
}

/// The four rungs' pools, as GKE's API shapes them (docs/gke.md a.3, a.4).
fn tpu_pool(name: &str) -> Value {
    json!({"name": name, "config": {"machineType": "ct6e-standard-4t",
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}},
        "placementPolicy": {"tpuTopology": "4x4"},
        "autoscaling": {"enabled": true, "maxNodeCount": 4}})
}

fn reservation_pool(name: &str, value: &str) -> Value {
    let mut p = tpu_pool(name);
    p["config"]["reservationAffinity"] = json!({"consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name", "values": [value]});
    p
}

fn spot_pool(name: &str) -> Value {
    let mut p = tpu_pool(name);
    p["config"]["spot"] = json!(true);
    p
}

fn flex_pool(name: &str) -> Value {
    let mut p = tpu_pool(name);
    p["config"]["flexStart"] = json!(true);
    p["config"]["maxRunDuration"] = json!("259200s");
    p["management"] = json!({"autoRepair": false, "autoUpgrade": true});
    p
}

fn queued_pool(name: &str) -> Value {
    let mut p = flex_pool(name);
    p["queuedProvisioning"] = json!({"enabled": true});
    p
}

fn nap(limits: Value) -> Value {
    json!({"enableNodeAutoprovisioning": true, "resourceLimits": limits})
}

#[tokio::test]
async fn ladder_settings_are_accepted_and_read_back() {
    let (url, _emu, http) = start().await;
    let limits = json!([
        {"resourceType": "cpu", "minimum": "0", "maximum": "720"},
        {"resourceType": "memory", "maximum": "2880"},
        {"resourceType": "tpu-v6e-slice", "maximum": "48"}]);
    let body = cluster("c", "1.34", json!({"autoscaling": nap(limits.clone())}));
    let (s, op) = call(
        &http,
        M::POST,
        format!("{url}{PARENT}/clusters"),
        Some(body),
    )
    .await;
    assert_eq!(s, 200, "{op}");
    let (_, got) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert_eq!(got["autoscaling"]["enableNodeAutoprovisioning"], true);
    assert_eq!(got["autoscaling"]["resourceLimits"][0]["maximum"], "720");
    assert_eq!(
        got["autoscaling"]["resourceLimits"][2]["resourceType"],
        "tpu-v6e-slice"
    );

    // desiredClusterAutoscaling replaces the settings; turning it on again without limits keeps
    // the current ones; turning it off is accepted without limits.
    let update = |a: Value| json!({"update": {"desiredClusterAutoscaling": a}});
    let raised = json!([{"resourceType": "cpu", "maximum": "1000"},
        {"resourceType": "memory", "maximum": "4000"}]);
    let (s, v) = call(
        &http,
        M::PUT,
        format!("{url}{PARENT}/clusters/c"),
        Some(update(nap(raised))),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (_, got) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert_eq!(got["autoscaling"]["resourceLimits"][0]["maximum"], "1000");
    assert_eq!(
        got["autoscaling"]["resourceLimits"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let on =
        json!({"enableNodeAutoprovisioning": true, "autoscalingProfile": "OPTIMIZE_UTILIZATION"});
    let (s, v) = call(
        &http,
        M::PUT,
        format!("{url}{PARENT}/clusters/c"),
        Some(update(on)),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (_, got) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert_eq!(
        got["autoscaling"]["autoscalingProfile"],
        "OPTIMIZE_UTILIZATION"
    );
    assert_eq!(got["autoscaling"]["resourceLimits"][1]["maximum"], "4000");
    let (s, v) = call(
        &http,
        M::PUT,
        format!("{url}{PARENT}/clusters/c"),
        Some(update(json!({"enableNodeAutoprovisioning": false}))),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (_, got) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert!(
        got["autoscaling"]
            .get("enableNodeAutoprovisioning")
            .is_none(),
        "{}",
        got["autoscaling"]
    );

    let pools = [
        reservation_pool(
            "reserved",
            "projects/capacity-project/reservations/tpu-v6e-res",
        ),
        reservation_pool("reserved-local", "tpu-v6e-res"),
        tpu_pool("on-demand"),
        flex_pool("flex-vms"),
        queued_pool("dws"),
        spot_pool("spot"),
    ];
    for pool in &pools {
        let (s, v) = call(
            &http,
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools"),
            Some(json!({"nodePool": pool})),
        )
        .await;
        assert_eq!(s, 200, "{}: {v}", pool["name"]);
    }
    let get = |name: &str| {
        let http = http.clone();
        let u = format!("{url}{PARENT}/clusters/c/nodePools/{name}");
        async move { call(&http, M::GET, u, None).await.1 }
    };
    let reserved = get("reserved").await;
    assert_eq!(
        reserved["config"]["reservationAffinity"],
        pools[0]["config"]["reservationAffinity"]
    );
    assert_eq!(
        get("reserved-local").await["config"]["reservationAffinity"]["values"],
        json!(["tpu-v6e-res"])
    );
    let dws = get("dws").await;
    assert_eq!(dws["config"]["flexStart"], true);
    assert_eq!(dws["config"]["maxRunDuration"], "259200s");
    assert_eq!(dws["queuedProvisioning"]["enabled"], true);
    assert_eq!(dws["placementPolicy"]["tpuTopology"], "4x4");
    let flex = get("flex-vms").await;
    assert_eq!(
        flex["config"]["resourceLabels"]["goog-gke-node-pool-provisioning-model"],
        "flex-start"
    );
    assert!(flex.get("queuedProvisioning").is_none());
    let spot = get("spot").await;
    assert_eq!(spot["config"]["spot"], true);
    assert_eq!(
        spot["config"]["resourceLabels"]["goog-gke-node-pool-provisioning-model"],
        "spot"
    );
    // maxRunDuration is no flex-start field: any pool may bound its nodes' life.
    let mut bounded = tpu_pool("bounded");
    bounded["config"]["maxRunDuration"] = json!("86400s");
    let (s, v) = call(
        &http,
        M::POST,
        format!("{url}{PARENT}/clusters/c/nodePools"),
        Some(json!({"nodePool": bounded})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
}

/// One refused request: what it does, the request, GKE's status, and words of the message.
struct Refusal {
    what: &'static str,
    method: M,
    path: String,
    body: Value,
    status: &'static str,
    message: &'static str,
}

fn create_pool(
    what: &'static str,
    cluster: &str,
    pool: Value,
    status: &'static str,
    message: &'static str,
) -> Refusal {
    Refusal {
        what,
        method: M::POST,
        path: format!("{PARENT}/clusters/{cluster}/nodePools"),
        body: json!({ "nodePool": pool }),
        status,
        message,
    }
}

fn with(mut pool: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = if parent.is_empty() {
        &mut pool
    } else {
        pool.pointer_mut(parent).unwrap()
    };
    target[key] = value;
    pool
}

fn pool_refusals() -> Vec<Refusal> {
    const BAD: &str = "INVALID_ARGUMENT";
    vec![
        create_pool(
            "spot and flex-start",
            "c",
            with(flex_pool("x"), "/config/spot", json!(true)),
            BAD,
            "cannot use Spot",
        ),
        create_pool(
            "preemptible and queued",
            "c",
            with(queued_pool("x"), "/config/preemptible", json!(true)),
            BAD,
            "cannot use Spot or preemptible",
        ),
        create_pool(
            "queued with a specific reservation",
            "c",
            with(
                queued_pool("x"),
                "/config/reservationAffinity",
                reservation_pool("x", "res")["config"]["reservationAffinity"].clone(),
            ),
            BAD,
            "require reservation affinity NO_RESERVATION, not SPECIFIC_RESERVATION",
        ),
        create_pool(
            "flex-start consuming any reservation",
            "c",
            with(
                flex_pool("x"),
                "/config/reservationAffinity/consumeReservationType",
                json!("ANY_RESERVATION_THEN_FAIL"),
            ),
            BAD,
            "NO_RESERVATION, not ANY_RESERVATION_THEN_FAIL",
        ),
        create_pool(
            "queued without autoscaling",
            "c",
            with(queued_pool("x"), "/autoscaling", json!({"enabled": false})),
            BAD,
            "require autoscaling to be enabled",
        ),
        create_pool(
            "queued with initial nodes",
            "c",
            with(queued_pool("x"), "/initialNodeCount", json!(4)),
            BAD,
            "initial_node_count must be 0",
        ),
        create_pool(
            "queued with a total minimum",
            "c",
            with(
                queued_pool("x"),
                "/autoscaling",
                json!({"enabled": true, "totalMinNodeCount": 4, "totalMaxNodeCount": 4}),
            ),
            BAD,
            "minimum node count of 0",
        ),
        create_pool(
            "specific reservation without values",
            "c",
            with(
                reservation_pool("x", "res"),
                "/config/reservationAffinity/values",
                json!([]),
            ),
            BAD,
            "must name the reservation",
        ),
        create_pool(
            "specific reservation without a key",
            "c",
            with(
                reservation_pool("x", "res"),
                "/config/reservationAffinity/key",
                json!(""),
            ),
            BAD,
            "must name the reservation",
        ),
        create_pool(
            "a reservation path missing its name",
            "c",
            reservation_pool("x", "projects/capacity-project/reservations/"),
            BAD,
            "Invalid reservation",
        ),
        create_pool(
            "a reservation in a zone path",
            "c",
            reservation_pool(
                "x",
                "projects/capacity-project/zones/us-east5-b/reservations/r",
            ),
            BAD,
            "Invalid reservation",
        ),
        create_pool(
            "a reservation name with capitals",
            "c",
            reservation_pool("x", "TPU_res"),
            BAD,
            "Invalid reservation",
        ),
        create_pool(
            "flex-start longer than 7 days",
            "c",
            with(flex_pool("x"), "/config/maxRunDuration", json!("691200s")),
            BAD,
            "at most 604800s",
        ),
        create_pool(
            "flex-start on TPU v4",
            "c",
            with(
                with(
                    flex_pool("x"),
                    "/config/machineType",
                    json!("ct4p-hightpu-4t"),
                ),
                "/placementPolicy/tpuTopology",
                json!("2x2x2"),
            ),
            BAD,
            "Flex-start does not support TPU v4",
        ),
        create_pool(
            "a topology the machine cannot form",
            "c",
            with(
                tpu_pool("x"),
                "/config/machineType",
                json!("ct6e-standard-8t"),
            ),
            BAD,
            "Invalid TPU topology \"4x4\"",
        ),
        create_pool(
            "a 3D topology on a 2D generation",
            "c",
            with(
                tpu_pool("x"),
                "/placementPolicy/tpuTopology",
                json!("2x2x2"),
            ),
            BAD,
            "Invalid TPU topology",
        ),
        create_pool(
            "a TPU topology on a CPU machine",
            "c",
            with(tpu_pool("x"), "/config/machineType", json!("n2-standard-8")),
            BAD,
            "only be set on a TPU machine type",
        ),
        create_pool(
            "TPU flex-start below 1.33.0-gke.1712000",
            "old",
            flex_pool("x"),
            "FAILED_PRECONDITION",
            "1.33.0-gke.1712000 or later",
        ),
        create_pool(
            "TPU queued below 1.33.0-gke.1712000",
            "old",
            queued_pool("x"),
            "FAILED_PRECONDITION",
            "require GKE version",
        ),
    ]
}

fn mutation_refusals() -> Vec<Refusal> {
    let pool = |verb: &str| format!("{PARENT}/clusters/c/nodePools/dws{verb}");
    vec![
        Refusal {
            what: "update: flex-start on a Spot pool",
            method: M::PUT,
            path: format!("{PARENT}/clusters/c/nodePools/spot"),
            body: json!({"flexStart": true}),
            status: "INVALID_ARGUMENT",
            message: "cannot use Spot",
        },
        Refusal {
            what: "update: queued provisioning on a reservation pool",
            method: M::PUT,
            path: format!("{PARENT}/clusters/c/nodePools/reserved"),
            body: json!({"queuedProvisioning": {"enabled": true}}),
            status: "INVALID_ARGUMENT",
            message: "NO_RESERVATION, not SPECIFIC_RESERVATION",
        },
        Refusal {
            what: "update: flex-start budget beyond 7 days",
            method: M::PUT,
            path: pool(""),
            body: json!({"maxRunDuration": "700000s"}),
            status: "INVALID_ARGUMENT",
            message: "at most 604800s",
        },
        Refusal {
            what: "update: node version below the TPU flex-start floor",
            method: M::PUT,
            path: pool(""),
            body: json!({"nodeVersion": "1.32.9-gke.1130000"}),
            status: "FAILED_PRECONDITION",
            message: "1.33.0-gke.1712000",
        },
        Refusal {
            what: "setAutoscaling: a queued pool with a minimum",
            method: M::POST,
            path: pool(":setAutoscaling"),
            body: json!({"autoscaling": {"enabled": true, "minNodeCount": 1, "maxNodeCount": 4}}),
            status: "INVALID_ARGUMENT",
            message: "minimum node count of 0",
        },
        Refusal {
            what: "cluster update: autoscaling off on a queued pool",
            method: M::PUT,
            path: format!("{PARENT}/clusters/c"),
            body: json!({"update": {"desiredNodePoolId": "dws", "desiredNodePoolAutoscaling": {"enabled": false}}}),
            status: "INVALID_ARGUMENT",
            message: "require autoscaling to be enabled",
        },
        Refusal {
            what: "cluster update: a node version below the TPU flex-start floor",
            method: M::PUT,
            path: format!("{PARENT}/clusters/c"),
            body: json!({"update": {"desiredNodePoolId": "dws", "desiredNodeVersion": "1.32"}}),
            status: "FAILED_PRECONDITION",
            message: "1.33.0-gke.1712000",
        },
        Refusal {
            what: "cluster update: auto-provisioning without a memory limit",
            method: M::PUT,
            path: format!("{PARENT}/clusters/c"),
            body: json!({"update": {"desiredClusterAutoscaling": nap(json!([{"resourceType": "cpu", "maximum": "8"}]))}}),
            status: "INVALID_ARGUMENT",
            message: "missing: memory",
        },
        Refusal {
            what: "cluster create: auto-provisioning without limits",
            method: M::POST,
            path: format!("{PARENT}/clusters"),
            body: cluster(
                "nap",
                "1.34",
                json!({"autoscaling": {"enableNodeAutoprovisioning": true}}),
            ),
            status: "INVALID_ARGUMENT",
            message: "missing: cpu, memory",
        },
        Refusal {
            what: "cluster create: a cpu limit of zero",
            method: M::POST,
            path: format!("{PARENT}/clusters"),
            body: cluster(
                "nap",
                "1.34",
                json!({"autoscaling": nap(json!([{"resourceType": "cpu", "minimum": "1"}, {"resourceType": "memory", "maximum": "64"}]))}),
            ),
            status: "INVALID_ARGUMENT",
            message: "missing: cpu",
        },
        Refusal {
            what: "cluster create: an initial queued pool with nodes",
            method: M::POST,
            path: format!("{PARENT}/clusters"),
            body: json!({"cluster": {"name": "initial", "initialClusterVersion": "1.34",
                "nodePools": [with(queued_pool("dws"), "/initialNodeCount", json!(4))]}}),
            status: "INVALID_ARGUMENT",
            message: "initial_node_count must be 0",
        },
    ]
}

#[tokio::test]
async fn refused_combinations_get_googles_status_and_change_nothing() {
    let (url, _emu, http) = start().await;
    for (name, version) in [("c", "1.34"), ("old", "1.32")] {
        let (s, v) = call(
            &http,
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(cluster(name, version, json!({}))),
        )
        .await;
        assert_eq!(s, 200, "{v}");
    }
    for pool in [
        queued_pool("dws"),
        spot_pool("spot"),
        reservation_pool("reserved", "res"),
    ] {
        let (s, v) = call(
            &http,
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools"),
            Some(json!({ "nodePool": pool })),
        )
        .await;
        assert_eq!(s, 200, "{v}");
    }
    let before = |http: reqwest::Client, url: String| async move {
        let (_, c) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
        let (_, all) = call(&http, M::GET, format!("{url}{PARENT}/clusters"), None).await;
        (c, all["clusters"].as_array().unwrap().len())
    };
    let (cluster_before, count_before) = before(http.clone(), url.clone()).await;
    for r in pool_refusals().into_iter().chain(mutation_refusals()) {
        let (s, v) = call(
            &http,
            r.method.clone(),
            format!("{url}{}", r.path),
            Some(r.body.clone()),
        )
        .await;
        assert_eq!(s, 400, "{}: {v}", r.what);
        assert_eq!(v["error"]["status"], r.status, "{}: {v}", r.what);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(r.message), "{}: {message}", r.what);
        // A refused create leaves no pool `x` in the cluster it named.
        let probe = match r.path.strip_suffix("/nodePools") {
            Some(cluster) => format!("{cluster}/nodePools/x"),
            None => format!("{PARENT}/clusters/c/nodePools/x"),
        };
        let (_, x) = call(&http, M::GET, format!("{url}{probe}"), None).await;
        assert_eq!(x["error"]["code"], 404, "{}: nothing created", r.what);
    }
    let (cluster_after, count_after) = before(http.clone(), url.clone()).await;
    assert_eq!(count_after, count_before, "no cluster was created");
    assert_eq!(
        cluster_after["etag"], cluster_before["etag"],
        "the cluster did not change"
    );
    assert_eq!(cluster_after["nodePools"], cluster_before["nodePools"]);
    assert_eq!(
        cluster_after.get("autoscaling"),
        cluster_before.get("autoscaling")
    );
}

/// `gkq render` of the ladder example, in both modes, creates on the emulator as is.
#[tokio::test]
async fn rendered_ladder_example_is_accepted_in_both_modes() {
    for env in [None, Some("prod"), Some("computeclass")] {
        let mut cmd = crate::support::gkq();
        cmd.args(["render", "examples/tpu-capacity-ladder", "-o", "json"]);
        if let Some(env) = env {
            cmd.args(["--env", env]);
        }
        let out = cmd
            .current_dir(crate::support::repo_root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let desired: Value = serde_json::from_slice(&out.stdout).unwrap();
        let gke = &desired["gke"];
        let parent = format!(
            "v1/projects/{}/locations/{}",
            gke["project"].as_str().unwrap_or("my-project"),
            gke["location"].as_str().unwrap_or("us-east5-b")
        );
        let name = gke["cluster"]["name"].as_str().unwrap();
        let (url, emu, http) = start().await;
        let (s, v) = call(
            &http,
            M::POST,
            format!("{url}{parent}/clusters"),
            Some(json!({"cluster": gke["cluster"]})),
        )
        .await;
        assert_eq!(s, 200, "{env:?} cluster: {v}");
        let pools = gke["nodePools"].as_array().unwrap();
        for p in pools {
            let (s, v) = call(
                &http,
                M::POST,
                format!("{url}{parent}/clusters/{name}/nodePools"),
                Some(json!({"nodePool": p})),
            )
            .await;
            assert_eq!(s, 200, "{env:?} pool {}: {v}", p["name"]);
        }
        let (_, live) = call(
            &http,
            M::GET,
            format!("{url}{parent}/clusters/{name}"),
            None,
        )
        .await;
        let live_pools = live["nodePools"].as_array().unwrap();
        assert_eq!(
            live_pools.len(),
            pools.len() + 1,
            "{env:?}: the default pool and the spec's"
        );
        let reserved = live_pools.iter().find(|p| {
            p["config"]["reservationAffinity"]["consumeReservationType"] == "SPECIFIC_RESERVATION"
        });
        match env {
            None | Some("prod") => assert_eq!(
                reserved.expect("kueue mode has a reservation pool")["config"]["reservationAffinity"]
                    ["values"],
                json!(["projects/capacity-project/reservations/tpu-v6e-res"])
            ),
            _ => assert!(
                reserved.is_none(),
                "computeclass mode: the class holds the reservation"
            ),
        }
        assert!(
            live_pools
                .iter()
                .any(|p| p["queuedProvisioning"]["enabled"] == true),
            "{env:?}: the dws pool"
        );
        drop(emu);
    }
}
