//! The GKE emulator over raw HTTP: wire format, bad requests (always a google.rpc body, never a
//! panic), the admin routes, persistence, and loopback-only binding.

use gkq::emulator::{Emulator, EmulatorConfig, EmulatorHandle};
use serde_json::{Value, json};

const PARENT: &str = "v1/projects/p/locations/us-east5-b";

async fn start(config: EmulatorConfig) -> (String, EmulatorHandle, reqwest::Client) {
    gkq::gke::install_tls_provider();
    let (url, handle) = Emulator::start_in_process(config).await.unwrap();
    (url, handle, reqwest::Client::new())
}

async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<&str>,
) -> (u16, Value) {
    let mut req = http.request(method, url);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, v)
}

fn cluster(name: &str) -> Value {
    json!({"cluster": {"name": name, "initialClusterVersion": "1.34",
        "nodePools": [{"name": "default-pool", "initialNodeCount": 1}]}})
}

#[tokio::test]
async fn bad_requests_get_google_rpc_errors() {
    let (url, _emu, http) = start(EmulatorConfig::instant()).await;
    use reqwest::Method as M;
    let created = call(
        &http,
        M::POST,
        format!("{url}{PARENT}/clusters"),
        Some(&cluster("c").to_string()),
    )
    .await;
    assert_eq!(created.0, 200, "{}", created.1);
    let (body_c, body_d) = (cluster("c").to_string(), cluster("d").to_string());
    let cases: Vec<(M, String, Option<&str>, u16, &str)> = vec![
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some("{not json"),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some("[1,2]"),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(r#"{"cluster": 5}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(r#"{"cluster": {"name": "Bad_Name"}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(r#"{"cluster": {"name": "ünï", "initialNodeCount": 1}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(r#"{"cluster": {"name": "x"}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(r#"{"cluster": {"name": "x", "initialNodeCount": 99999999999}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(
                r#"{"cluster": {"name": "x", "initialClusterVersion": "1.99", "initialNodeCount": 1}}"#,
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters"),
            Some(&body_c),
            409,
            "ALREADY_EXISTS",
        ),
        (
            M::POST,
            format!("{url}v1/projects/p/locations/nowhere/clusters"),
            Some(&body_d),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools"),
            Some(
                r#"{"nodePool": {"name": "np", "config": {"reservationAffinity": {"consumeReservationType": "SOMETIMES"}}}}"#,
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools"),
            Some(
                r#"{"nodePool": {"name": "np", "autoscaling": {"enabled": true, "minNodeCount": 5, "maxNodeCount": 1}}}"#,
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools"),
            Some(
                r#"{"nodePool": {"name": "np", "autoscaling": {"enabled": true, "maxNodeCount": 3, "totalMaxNodeCount": 3}}}"#,
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools"),
            Some(r#"{}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools"),
            Some(r#"{"nodePool": {"name": "default-pool"}}"#),
            409,
            "ALREADY_EXISTS",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c:setResourceLabels"),
            Some(r#"{"resourceLabels": {"a": "b"}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c:setResourceLabels"),
            Some(r#"{"resourceLabels": {"Bad": "b"}, "labelFingerprint": "x"}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c:setResourceLabels"),
            Some(r#"{"resourceLabels": {"a": "b"}, "labelFingerprint": "00000000"}"#),
            409,
            "ABORTED",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c:frobnicate"),
            Some("{}"),
            501,
            "UNIMPLEMENTED",
        ),
        (
            M::PUT,
            format!("{url}{PARENT}/clusters/c"),
            Some(r#"{"update": {}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::PUT,
            format!("{url}{PARENT}/clusters/c"),
            Some(r#"{"update": {"desiredNodePoolAutoConfigNetworkTags": {"tags": ["a"]}}}"#),
            501,
            "UNIMPLEMENTED",
        ),
        (
            M::PUT,
            format!("{url}{PARENT}/clusters/c/nodePools/default-pool"),
            Some(r#"{"etag": "x"}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::PUT,
            format!("{url}{PARENT}/clusters/c/nodePools/default-pool"),
            Some(r#"{"nodeVersion": "1.99"}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::PUT,
            format!("{url}{PARENT}/clusters/c/nodePools/default-pool"),
            Some(r#"{"labels": {"labels": {"a": "b"}}, "etag": "stale"}"#),
            409,
            "ABORTED",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools/default-pool:setSize"),
            Some(r#"{"nodeCount": -1}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools/default-pool:setSize"),
            Some(r#"{"nodeCount": "many"}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            M::POST,
            format!("{url}{PARENT}/clusters/c/nodePools/missing:setSize"),
            Some(r#"{"nodeCount": 1}"#),
            404,
            "NOT_FOUND",
        ),
        (
            M::GET,
            format!("{url}{PARENT}/clusters/missing"),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            M::GET,
            format!("{url}{PARENT}/clusters/c/nodePools/missing"),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            M::GET,
            format!("{url}{PARENT}/operations/operation-1-x"),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            M::PATCH,
            format!("{url}{PARENT}/clusters/c"),
            Some("{}"),
            404,
            "NOT_FOUND",
        ),
        (
            M::GET,
            format!("{url}v1/projects/p/zones/z/clusters"),
            None,
            404,
            "NOT_FOUND",
        ),
        (M::GET, format!("{url}v1//projects"), None, 404, "NOT_FOUND"),
        (
            M::GET,
            format!("{url}v2/anything%zz"),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            M::POST,
            format!("{url}emulator/faults"),
            Some(r#"{"path": "*", "fault": {"type": "nope"}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
    ];
    for (method, u, body, status, rpc) in cases {
        let (got, v) = call(&http, method.clone(), u.clone(), body).await;
        assert_eq!(got, status, "{method} {u} {body:?}: {v}");
        assert_eq!(v["error"]["code"], status, "{v}");
        assert_eq!(v["error"]["status"], rpc, "{method} {u}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert!(v["error"]["errors"][0]["reason"].is_string(), "{v}");
    }
    // After all that, the emulator still serves.
    let (s, v) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "RUNNING");
}

#[tokio::test]
async fn wire_format_both_ways() {
    let (url, _emu, http) = start(EmulatorConfig::instant()).await;
    use reqwest::Method as M;
    // The Python client's shape: enums as integers, int64 as a number, snake_case accepted too.
    let body = json!({"cluster": {"name": "c", "initial_cluster_version": "1.33",
        "nodePools": [{"name": "np", "initialNodeCount": 2,
            "config": {"reservationAffinity": {"consumeReservationType": 1}},
            "maxPodsConstraint": {"maxPodsPerNode": 64},
            "upgradeSettings": {"strategy": 3, "maxSurge": 2}}],
        "releaseChannel": {"channel": 3}}});
    let (s, op) = call(
        &http,
        M::POST,
        format!("{url}{PARENT}/clusters?%24alt=json%3Benum-encoding%3Dint"),
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(s, 200, "{op}");
    assert_eq!(op["operationType"], 1, "CREATE_CLUSTER as an integer");
    assert_eq!(op["status"], 3, "DONE (instant config)");
    let (_, cl) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert_eq!(cl["releaseChannel"]["channel"], "STABLE");
    let np = &cl["nodePools"][0];
    assert_eq!(
        np["config"]["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    assert_eq!(np["maxPodsConstraint"]["maxPodsPerNode"], "64");
    assert_eq!(
        np["upgradeSettings"],
        json!({"maxSurge": 2, "strategy": "SURGE"})
    );
    assert_eq!(np["initialNodeCount"], 2);
    assert!(
        cl["currentMasterVersion"]
            .as_str()
            .unwrap()
            .starts_with("1.33.")
    );
    let (_, ints) = call(
        &http,
        M::GET,
        format!("{url}{PARENT}/clusters/c?$alt=json;enum-encoding=int"),
        None,
    )
    .await;
    assert_eq!(ints["status"], 2);
    assert_eq!(ints["releaseChannel"]["channel"], 3);
    assert_eq!(
        ints["loggingConfig"]["componentConfig"]["enableComponents"],
        json!([1, 2])
    );
    assert_eq!(
        ints["nodePools"][0]["maxPodsConstraint"]["maxPodsPerNode"],
        "64"
    );
    // Listing across locations.
    let (_, all) = call(
        &http,
        M::GET,
        format!("{url}v1/projects/p/locations/-/clusters"),
        None,
    )
    .await;
    assert_eq!(all["clusters"].as_array().unwrap().len(), 1);
    let (_, other) = call(
        &http,
        M::GET,
        format!("{url}v1/projects/q/locations/-/clusters"),
        None,
    )
    .await;
    assert_eq!(
        other,
        json!({}),
        "an empty list is omitted, as proto3 JSON does"
    );
    let (_, ops) = call(
        &http,
        M::GET,
        format!("{url}v1/projects/p/locations/-/operations"),
        None,
    )
    .await;
    assert_eq!(ops["operations"].as_array().unwrap().len(), 1);
    // Regional cluster: three zones.
    let (s, _) = call(
        &http,
        M::POST,
        format!("{url}v1/projects/p/locations/us-east5/clusters"),
        Some(&cluster("regional").to_string()),
    )
    .await;
    assert_eq!(s, 200);
    let (_, r) = call(
        &http,
        M::GET,
        format!("{url}v1/projects/p/locations/us-east5/clusters/regional"),
        None,
    )
    .await;
    assert_eq!(
        r["locations"],
        json!(["us-east5-a", "us-east5-b", "us-east5-c"])
    );
    assert_eq!(
        r["nodePools"][0]["instanceGroupUrls"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(r["currentNodeCount"], 3);
}

/// Fields of the discovery document newer than the proto descriptors in Google's clients:
/// `NodePool.autopilotConfig` is stored and read back, `UpdateNodePoolRequest.nodeConfigUpdateMode`
/// is accepted by name and by number, and alone it is no update.
#[tokio::test]
async fn fields_newer_than_the_published_protos() {
    let (url, _emu, http) = start(EmulatorConfig::instant()).await;
    use reqwest::Method as M;
    let (s, v) = call(
        &http,
        M::POST,
        format!("{url}{PARENT}/clusters"),
        Some(&cluster("c").to_string()),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let pools = format!("{url}{PARENT}/clusters/c/nodePools");
    let pool = json!({"nodePool": {"name": "auto", "initialNodeCount": 1,
        "autopilotConfig": {"enabled": true}}});
    let (s, v) = call(&http, M::POST, pools.clone(), Some(&pool.to_string())).await;
    assert_eq!(s, 200, "{v}");
    let (_, got) = call(&http, M::GET, format!("{pools}/auto"), None).await;
    assert_eq!(got["autopilotConfig"], json!({"enabled": true}));

    let updates = [
        json!({"nodeConfigUpdateMode": "LIVE_UPDATE_WITHOUT_DRAIN",
            "labels": {"labels": {"team": "ml"}}}),
        json!({"node_config_update_mode": 1, "labels": {"labels": {"team": "ai"}}}),
    ];
    for update in updates {
        let (s, v) = call(
            &http,
            M::PUT,
            format!("{pools}/auto"),
            Some(&update.to_string()),
        )
        .await;
        assert_eq!(s, 200, "{update}: {v}");
    }
    let (_, got) = call(&http, M::GET, format!("{pools}/auto"), None).await;
    assert_eq!(got["config"]["labels"], json!({"team": "ai"}));

    let mode_only = json!({"nodeConfigUpdateMode": "LIVE_UPDATE_WITHOUT_DRAIN"}).to_string();
    let (s, v) = call(&http, M::PUT, format!("{pools}/auto"), Some(&mode_only)).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["error"]["message"], "Must specify a field to update.");
    let bad_mode = json!({"nodeConfigUpdateMode": "LIVE", "labels": {"labels": {}}}).to_string();
    let (s, v) = call(&http, M::PUT, format!("{pools}/auto"), Some(&bad_mode)).await;
    assert_eq!(s, 400, "{v}");
}

#[tokio::test]
async fn admin_routes_and_cancel() {
    let (url, emu, http) = start(EmulatorConfig {
        pending_ms: 0,
        running_ms: 60_000,
        ..EmulatorConfig::default()
    })
    .await;
    use reqwest::Method as M;
    let (s, rule) = call(
        &http,
        M::POST,
        format!("{url}emulator/faults"),
        Some(r#"{"method": "GET", "path": "*/clusters/c", "fault": {"type": "unavailable"}, "times": 1}"#),
    )
    .await;
    assert_eq!(s, 200, "{rule}");
    assert_eq!(emu.faults().len(), 1);
    let (_, listed) = call(&http, M::GET, format!("{url}emulator/faults"), None).await;
    assert_eq!(listed["faults"][0]["fault"]["type"], "unavailable");
    let (s, v) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert_eq!(
        (s, v["error"]["status"].clone()),
        (503, json!("UNAVAILABLE"))
    );
    assert!(
        emu.faults().is_empty(),
        "a rule that fired its times is gone"
    );

    // A long operation can be cancelled when its type allows it.
    let (_, create) = call(
        &http,
        M::POST,
        format!("{url}{PARENT}/clusters"),
        Some(&cluster("c").to_string()),
    )
    .await;
    let (s, v) = call(
        &http,
        M::POST,
        format!(
            "{url}{PARENT}/operations/{}:cancel",
            create["name"].as_str().unwrap()
        ),
        Some("{}"),
    )
    .await;
    assert_eq!(
        (s, v["error"]["status"].clone()),
        (400, json!("FAILED_PRECONDITION"))
    );
    let (_, log) = call(&http, M::GET, format!("{url}emulator/requests"), None).await;
    let log = log["requests"].as_array().unwrap().clone();
    assert_eq!(log.len(), 3);
    assert_eq!(log[1]["method"], "POST");
    assert_eq!(log[1]["body"], cluster("c"));
    let (s, _) = call(&http, M::DELETE, format!("{url}emulator/requests"), None).await;
    assert_eq!(s, 200);
    assert!(emu.requests().is_empty());
    let (_, state) = call(&http, M::GET, format!("{url}emulator/state"), None).await;
    assert_eq!(state["clusters"].as_object().unwrap().len(), 1);
    let (s, _) = call(&http, M::POST, format!("{url}emulator/reset"), Some("")).await;
    assert_eq!(s, 200);
    let (s, _) = call(&http, M::GET, format!("{url}{PARENT}/clusters/c"), None).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn persisted_state_is_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let config = EmulatorConfig {
        state_dir: Some(dir.path().to_path_buf()),
        ..EmulatorConfig::instant()
    };
    let (url, emu, http) = start(config.clone()).await;
    let (s, _) = call(
        &http,
        reqwest::Method::POST,
        format!("{url}{PARENT}/clusters"),
        Some(&cluster("c").to_string()),
    )
    .await;
    assert_eq!(s, 200);
    let files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, vec!["gke-emulator-state.json".to_string()]);
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(&files[0])).unwrap()).unwrap();
    assert_eq!(on_disk, emu.state_json());
    emu.shutdown().await;
    let (url, _emu, http) = start(config).await;
    let (s, v) = call(
        &http,
        reqwest::Method::GET,
        format!("{url}{PARENT}/clusters/c"),
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "RUNNING");
    // A corrupt state file is an error at start, not a silent reset.
    std::fs::write(dir.path().join(&files[0]), "{oops").unwrap();
    assert!(
        Emulator::new(EmulatorConfig {
            state_dir: Some(dir.path().to_path_buf()),
            ..EmulatorConfig::instant()
        })
        .is_err()
    );
}

#[tokio::test]
async fn serve_binds_loopback_only() {
    let err = gkq::emulator::serve("0.0.0.0:0".parse().unwrap(), EmulatorConfig::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
}
