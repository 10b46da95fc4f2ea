//! gkq's GKE client against the in-process GKE emulator: the seed walk-through (docs/gke.md a.1,
//! a.3, a.4), every mutating method, operations, the one-operation-per-cluster rule, and faults.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gkq::addr::ClusterRef;
use gkq::emulator::{
    Emulator, EmulatorConfig, EmulatorHandle, Fault, FaultRule, GKE_DEFAULT_SCOPES,
};
use gkq::gke::{
    AnonymousTokenSource, GkeApi, GkeError, Operation, RestGke, RetryConfig, StaticTokenSource,
    kube_config_from_cluster, retry_while_busy, run_operation, wait_operation,
};
use secrecy::SecretString;
use serde_json::{Value, json};

fn cluster_ref() -> ClusterRef {
    ClusterRef {
        project: "my-project".into(),
        location: "us-east5-b".into(),
        cluster: "tpu-cluster".into(),
    }
}

/// a.1: `gcloud container clusters create $CLUSTER --cluster-version=1.34
/// --machine-type=n2-standard-16 --location=$ZONE --enable-image-streaming --addons=RayOperator`.
fn cluster_body() -> Value {
    json!({
        "name": "tpu-cluster", "initialClusterVersion": "1.34",
        "nodePools": [{"name": "default-pool", "initialNodeCount": 3,
            "config": {"machineType": "n2-standard-16", "oauthScopes": GKE_DEFAULT_SCOPES},
            "management": {"autoRepair": true, "autoUpgrade": true}}],
        "addonsConfig": {"rayOperatorConfig": {"enabled": true},
            "httpLoadBalancing": {"disabled": true}, "horizontalPodAutoscaling": {"disabled": true},
            "kubernetesDashboard": {"disabled": true}, "networkPolicyConfig": {"disabled": true}},
        "nodePoolDefaults": {"nodeConfigDefaults": {"gcfsConfig": {"enabled": true}}},
        "resourceLabels": {"managed-by": "gkq"}
    })
}

/// a.3: the on-demand TPU v6e 4x4 pool (Plan A).
fn on_demand_pool() -> Value {
    json!({"name": "on-demand-pool", "initialNodeCount": 0,
        "config": {"machineType": "ct6e-standard-4t", "oauthScopes": GKE_DEFAULT_SCOPES,
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}},
        "placementPolicy": {"tpuTopology": "4x4"},
        "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
        "management": {"autoRepair": true, "autoUpgrade": true}})
}

/// a.4: the DWS flex-start pool with queued provisioning (Plan B), with autoRepair off.
fn dws_pool() -> Value {
    json!({"name": "dws-pool", "initialNodeCount": 0,
        "config": {"machineType": "ct6e-standard-4t", "oauthScopes": GKE_DEFAULT_SCOPES,
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "flexStart": true},
        "placementPolicy": {"tpuTopology": "4x4"},
        "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4,
            "locationPolicy": "ANY"},
        "management": {"autoRepair": false, "autoUpgrade": true},
        "queuedProvisioning": {"enabled": true}})
}

fn fast_config() -> EmulatorConfig {
    EmulatorConfig {
        pending_ms: 20,
        running_ms: 30,
        ..EmulatorConfig::default()
    }
}

async fn start(config: EmulatorConfig) -> (RestGke, EmulatorHandle) {
    let (url, handle) = Emulator::start_in_process(config).await.unwrap();
    let api = RestGke::with_endpoint(&url, Arc::new(AnonymousTokenSource)).unwrap();
    (api, handle)
}

async fn done(api: &RestGke, op: Operation) -> Operation {
    wait_operation(api, &cluster_ref(), &op, |_, _| {})
        .await
        .unwrap()
}

/// Creates the seed cluster and both pools, waiting for each operation.
async fn seed(api: &RestGke) {
    let c = cluster_ref();
    let op = api.create_cluster(&c, &cluster_body()).await.unwrap();
    done(api, op).await;
    for pool in [on_demand_pool(), dws_pool()] {
        let op = api.create_node_pool(&c, &pool).await.unwrap();
        done(api, op).await;
    }
}

fn pool<'a>(cluster: &'a Value, name: &str) -> &'a Value {
    cluster["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no pool {name}"))
}

#[tokio::test]
async fn seed_walkthrough_bodies_defaults_and_operations() {
    let (api, emu) = start(fast_config()).await;
    let c = cluster_ref();
    assert_eq!(api.get_cluster(&c).await.unwrap(), None);

    // Create: the operation goes PENDING -> RUNNING -> DONE.
    let op = api.create_cluster(&c, &cluster_body()).await.unwrap();
    assert_eq!(op.operation_type, "CREATE_CLUSTER");
    assert_eq!(op.status, "PENDING");
    assert!(op.name.starts_with("operation-"), "{}", op.name);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s2 = seen.clone();
    let fin = wait_operation(&api, &c, &op, move |o, _| {
        s2.lock().unwrap().push(o.status.clone())
    })
    .await
    .unwrap();
    assert_eq!(fin.status, "DONE");
    assert!(fin.end_time.is_some() && fin.error.is_none());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.first().map(String::as_str), Some("PENDING"));
    assert_eq!(seen.last().map(String::as_str), Some("DONE"));
    assert!(
        fin.target_link
            .as_deref()
            .unwrap()
            .ends_with("/zones/us-east5-b/clusters/tpu-cluster")
    );

    for p in [on_demand_pool(), dws_pool()] {
        let op = api.create_node_pool(&c, &p).await.unwrap();
        assert_eq!(op.operation_type, "CREATE_NODE_POOL");
        done(&api, op).await;
    }

    // The request bodies are exactly what gcloud sends (docs/gke.md a.1, a.3, a.4).
    let posts: Vec<_> = emu
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 3);
    assert_eq!(
        posts[0].path,
        "/v1/projects/my-project/locations/us-east5-b/clusters"
    );
    assert_eq!(posts[0].body, Some(json!({ "cluster": cluster_body() })));
    assert_eq!(
        posts[1].path,
        "/v1/projects/my-project/locations/us-east5-b/clusters/tpu-cluster/nodePools"
    );
    assert_eq!(posts[1].body, Some(json!({ "nodePool": on_demand_pool() })));
    assert_eq!(posts[2].body, Some(json!({ "nodePool": dws_pool() })));
    assert!(
        posts.iter().all(|r| !r.authorized),
        "anonymous: no Authorization header"
    );

    // One GET returns the cluster with all pools and the server defaults.
    let cl = api.get_cluster(&c).await.unwrap().unwrap();
    assert_eq!(cl["status"], "RUNNING");
    assert_eq!(cl["initialClusterVersion"], "1.34");
    let v = cl["currentMasterVersion"].as_str().unwrap();
    assert!(v.starts_with("1.34.") && v.contains("-gke."), "{v}");
    assert_eq!(cl["endpoint"], "127.0.0.1");
    assert_eq!(cl["location"], "us-east5-b");
    assert_eq!(cl["locations"], json!(["us-east5-b"]));
    assert_eq!(cl["releaseChannel"]["channel"], "REGULAR");
    assert_eq!(
        cl["addonsConfig"]["rayOperatorConfig"],
        json!({"enabled": true})
    );
    assert!(
        cl["masterAuth"]["clusterCaCertificate"]
            .as_str()
            .unwrap()
            .len()
            > 100
    );
    assert_eq!(cl["resourceLabels"], json!({"managed-by": "gkq"}));
    assert_eq!(cl["labelFingerprint"].as_str().unwrap().len(), 8);
    assert!(cl["etag"].as_str().is_some());
    assert_eq!(cl["nodePools"].as_array().unwrap().len(), 3);
    assert_eq!(cl["currentNodeCount"], 3);

    let dp = pool(&cl, "default-pool");
    assert_eq!(dp["config"]["diskSizeGb"], 100);
    assert_eq!(dp["config"]["diskType"], "pd-balanced");
    assert_eq!(dp["config"]["imageType"], "COS_CONTAINERD");
    assert_eq!(dp["config"]["metadata"]["disable-legacy-endpoints"], "true");
    assert_eq!(
        dp["config"]["gcfsConfig"],
        json!({"enabled": true}),
        "inherited default"
    );
    assert_eq!(
        dp["maxPodsConstraint"]["maxPodsPerNode"], "110",
        "int64 as a string"
    );
    assert_eq!(
        dp["upgradeSettings"],
        json!({"maxSurge": 1, "strategy": "SURGE"})
    );
    assert_eq!(dp["version"], cl["currentMasterVersion"]);
    assert_eq!(dp["status"], "RUNNING");

    let od = pool(&cl, "on-demand-pool");
    assert!(
        od.get("initialNodeCount").is_none(),
        "zero values are omitted"
    );
    assert!(od["autoscaling"].get("minNodeCount").is_none());
    assert_eq!(od["autoscaling"]["locationPolicy"], "BALANCED");
    assert_eq!(
        od["config"]["resourceLabels"]["goog-gke-node-pool-provisioning-model"],
        "on-demand"
    );
    assert_eq!(
        od["config"]["resourceLabels"]["goog-gke-accelerator-type"],
        "tpu-v6e-slice"
    );
    assert!(od["config"].get("taints").is_none());

    let dws = pool(&cl, "dws-pool");
    assert_eq!(dws["config"]["flexStart"], true);
    assert_eq!(dws["queuedProvisioning"]["enabled"], true);
    assert_eq!(dws["upgradeSettings"], json!({"strategy": "SHORT_LIVED"}));
    assert_eq!(
        dws["management"],
        json!({"autoUpgrade": true}),
        "autoRepair false is omitted"
    );
    assert_eq!(
        dws["config"]["taints"],
        json!([{"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NO_SCHEDULE"}])
    );
    assert_eq!(
        dws["config"]["resourceLabels"]["goog-gke-node-pool-provisioning-model"],
        "flex-start"
    );

    // nodePools.get and list agree with clusters.get.
    let got = api.get_node_pool(&c, "dws-pool").await.unwrap().unwrap();
    assert_eq!(&got, dws);
    assert_eq!(api.list_node_pools(&c).await.unwrap().len(), 3);
    assert_eq!(api.get_node_pool(&c, "nope").await.unwrap(), None);

    // The operation is listed.
    let ops = api.list_operations(&c).await.unwrap();
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().all(|o| o.status == "DONE"));
}

#[tokio::test]
async fn in_place_updates_labels_and_deletes() {
    let (api, emu) = start(EmulatorConfig::instant()).await;
    let c = cluster_ref();
    seed(&api).await;
    let before = api.get_cluster(&c).await.unwrap().unwrap();

    // clusters.update (PUT) with the cluster etag.
    let update = json!({"desiredAddonsConfig": {"gcsFuseCsiDriverConfig": {"enabled": true}},
        "etag": before["etag"]});
    let op = api.update_cluster(&c, &update).await.unwrap();
    assert_eq!(op.operation_type, "UPDATE_CLUSTER");
    done(&api, op).await;
    let after = api.get_cluster(&c).await.unwrap().unwrap();
    assert_eq!(
        after["addonsConfig"]["gcsFuseCsiDriverConfig"],
        json!({"enabled": true})
    );
    assert_eq!(
        after["addonsConfig"]["rayOperatorConfig"],
        json!({"enabled": true})
    );
    assert_ne!(after["etag"], before["etag"], "etag changes on every write");
    // A stale etag is refused with 409 ABORTED.
    let stale = json!({"desiredGcfsConfig": {"enabled": false}, "etag": before["etag"]});
    assert!(matches!(
        api.update_cluster(&c, &stale).await,
        Err(GkeError::Conflict { .. })
    ));
    // An empty ClusterUpdate is a 400.
    match api.update_cluster(&c, &json!({})).await {
        Err(GkeError::Api {
            http_status: 400,
            message,
            ..
        }) => assert_eq!(message, "Must specify a field to update."),
        r => panic!("{r:?}"),
    }
    // desiredNodePoolAutoscaling without desiredNodePoolId, with three pools.
    match api
        .update_cluster(
            &c,
            &json!({"desiredNodePoolAutoscaling": {"enabled": true, "maxNodeCount": 8}}),
        )
        .await
    {
        Err(GkeError::Api { message, .. }) => assert_eq!(
            message,
            "Node pool id must be specified if cluster has more than one node pool."
        ),
        r => panic!("{r:?}"),
    }
    let op = api
        .update_cluster(
            &c,
            &json!({"desiredNodePoolId": "dws-pool",
                "desiredNodePoolAutoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 8}}),
        )
        .await
        .unwrap();
    done(&api, op).await;
    let dws = api.get_node_pool(&c, "dws-pool").await.unwrap().unwrap();
    assert_eq!(dws["autoscaling"]["maxNodeCount"], 8);

    // nodePools.setAutoscaling
    let op = api
        .set_node_pool_autoscaling(
            &c,
            "on-demand-pool",
            &json!({"enabled": true, "minNodeCount": 0, "maxNodeCount": 8}),
        )
        .await
        .unwrap();
    done(&api, op).await;
    let od = api
        .get_node_pool(&c, "on-demand-pool")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        od["autoscaling"],
        json!({"enabled": true, "maxNodeCount": 8, "locationPolicy": "BALANCED"})
    );

    // nodePools.setSize
    let op = api.set_node_pool_size(&c, "default-pool", 1).await.unwrap();
    assert_eq!(op.operation_type, "SET_NODE_POOL_SIZE");
    done(&api, op).await;
    assert_eq!(
        api.get_cluster(&c).await.unwrap().unwrap()["currentNodeCount"],
        1
    );

    // nodePools.setManagement
    let op = api
        .set_node_pool_management(
            &c,
            "dws-pool",
            &json!({"autoRepair": false, "autoUpgrade": true}),
        )
        .await
        .unwrap();
    assert_eq!(op.operation_type, "SET_NODE_POOL_MANAGEMENT");
    done(&api, op).await;
    // Auto-upgrade cannot be turned off in a release channel.
    match api
        .set_node_pool_management(&c, "dws-pool", &json!({"autoRepair": false}))
        .await
    {
        Err(GkeError::Api { message, .. }) => assert_eq!(
            message,
            "Auto_upgrade cannot be false when release_channel REGULAR is set."
        ),
        r => panic!("{r:?}"),
    }

    // nodePools.update (PUT) with the pool etag, keeping goog-gke-* labels.
    let np = api
        .get_node_pool(&c, "on-demand-pool")
        .await
        .unwrap()
        .unwrap();
    let body = json!({"resourceLabels": {"labels": {"team": "ml"}}, "etag": np["etag"]});
    let op = api
        .update_node_pool(&c, "on-demand-pool", &body)
        .await
        .unwrap();
    done(&api, op).await;
    let np2 = api
        .get_node_pool(&c, "on-demand-pool")
        .await
        .unwrap()
        .unwrap();
    let labels = &np2["config"]["resourceLabels"];
    assert_eq!(labels["team"], "ml");
    assert_eq!(labels["goog-gke-accelerator-type"], "tpu-v6e-slice");
    assert_ne!(np2["etag"], np["etag"]);
    assert!(matches!(
        api.update_node_pool(&c, "on-demand-pool", &body).await,
        Err(GkeError::Conflict { .. })
    ));
    let put = emu
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT" && r.path.ends_with("/nodePools/on-demand-pool"))
        .unwrap();
    assert_eq!(put.body, Some(body.clone()));

    // clusters.setResourceLabels with the fingerprint; a stale fingerprint is refused.
    let cl = api.get_cluster(&c).await.unwrap().unwrap();
    let fp = cl["labelFingerprint"].as_str().unwrap().to_string();
    let mut labels = BTreeMap::new();
    labels.insert("managed-by".to_string(), "gkq".to_string());
    labels.insert("gkq-stack".to_string(), "tpu-dws".to_string());
    let op = api.set_resource_labels(&c, &labels, &fp).await.unwrap();
    assert_eq!(op.operation_type, "UPDATE_CLUSTER");
    done(&api, op).await;
    let cl2 = api.get_cluster(&c).await.unwrap().unwrap();
    assert_eq!(cl2["resourceLabels"]["gkq-stack"], "tpu-dws");
    assert_ne!(cl2["labelFingerprint"], cl["labelFingerprint"]);
    assert!(matches!(
        api.set_resource_labels(&c, &labels, &fp).await,
        Err(GkeError::Conflict { .. })
    ));

    // Deletes.
    let op = api.delete_node_pool(&c, "on-demand-pool").await.unwrap();
    assert_eq!(op.operation_type, "DELETE_NODE_POOL");
    done(&api, op).await;
    assert_eq!(api.get_node_pool(&c, "on-demand-pool").await.unwrap(), None);
    let op = api.delete_cluster(&c).await.unwrap();
    assert_eq!(op.operation_type, "DELETE_CLUSTER");
    done(&api, op).await;
    assert_eq!(api.get_cluster(&c).await.unwrap(), None);
    assert!(matches!(
        api.delete_cluster(&c).await,
        Err(GkeError::NotFound { .. })
    ));
}

#[tokio::test]
async fn concurrent_operation_is_waited_out_and_retried() {
    let c = cluster_ref();
    // Operations that take a while, so that the next call finds the cluster busy.
    let (api, emu) = start(EmulatorConfig {
        pending_ms: 50,
        running_ms: 250,
        ..EmulatorConfig::default()
    })
    .await;
    let op = api.create_cluster(&c, &cluster_body()).await.unwrap();
    // The cluster is busy creating: a direct call fails with ClusterBusy naming the operation.
    match api
        .create_node_pool(&c, &on_demand_pool())
        .await
        .unwrap_err()
    {
        GkeError::ClusterBusy { operation, message } => {
            assert_eq!(operation.as_deref(), Some(op.name.as_str()));
            assert!(message.contains("incompatible operation"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    // run_operation waits for the blocking operation, retries, and waits for its own.
    let waited_for = Arc::new(Mutex::new(Vec::<String>::new()));
    let w2 = waited_for.clone();
    let pool_body = on_demand_pool();
    let fin = run_operation(
        &api,
        &c,
        || api.create_node_pool(&c, &pool_body),
        move |o, _| w2.lock().unwrap().push(o.operation_type.clone()),
    )
    .await
    .unwrap();
    assert_eq!(fin.operation_type, "CREATE_NODE_POOL");
    assert_eq!(fin.status, "DONE");
    let waited_for = waited_for.lock().unwrap().clone();
    assert!(
        waited_for.contains(&"CREATE_CLUSTER".to_string()),
        "{waited_for:?}"
    );
    let statuses: Vec<u16> = emu
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/nodePools"))
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses.first(), Some(&400));
    assert_eq!(statuses.last(), Some(&200));
    assert!(
        statuses[..statuses.len() - 1].iter().all(|s| *s == 400),
        "{statuses:?}"
    );

    // retry_while_busy on a call while a resize runs.
    let op = api
        .set_node_pool_size(&c, "on-demand-pool", 0)
        .await
        .unwrap();
    let autoscaling = json!({"enabled": true, "maxNodeCount": 4});
    let op2 = retry_while_busy(
        &api,
        &c,
        || api.set_node_pool_autoscaling(&c, "on-demand-pool", &autoscaling),
        |_, _| {},
    )
    .await
    .unwrap();
    assert_ne!(op.name, op2.name);
    done(&api, op2).await;
}

#[tokio::test]
async fn too_many_operations_429_is_busy_not_failure() {
    let (api, emu) = start(EmulatorConfig::instant()).await;
    let c = cluster_ref();
    seed(&api).await;
    emu.add_fault(FaultRule::new("POST", "*:setSize", Fault::TooManyOperations).times(2));
    match api.set_node_pool_size(&c, "default-pool", 2).await {
        Err(GkeError::ClusterBusy {
            operation: None,
            message,
        }) => {
            assert!(message.starts_with("Too many operations"), "{message}")
        }
        r => panic!("{r:?}"),
    }
    let op = run_operation(
        &api,
        &c,
        || api.set_node_pool_size(&c, "default-pool", 2),
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(op.status, "DONE");
}

#[tokio::test]
async fn bursts_of_429_and_503_are_retried() {
    let (api, emu) = start(EmulatorConfig::instant()).await;
    let c = cluster_ref();
    emu.add_fault(FaultRule::new("POST", "*/clusters", Fault::Unavailable).times(3));
    emu.add_fault(
        FaultRule::new(
            "GET",
            "*/clusters/tpu-cluster",
            Fault::RateLimited {
                retry_after_secs: Some(1),
            },
        )
        .times(2),
    );
    let op = api.create_cluster(&c, &cluster_body()).await.unwrap();
    done(&api, op).await;
    let started = std::time::Instant::now();
    let cl = api.get_cluster(&c).await.unwrap().unwrap();
    assert_eq!(cl["status"], "RUNNING");
    // Retry-After: 1 was honoured (capped at 2 s by RetryConfig::fast) twice.
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    let creates: Vec<u16> = emu
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.status)
        .collect();
    assert_eq!(creates, vec![503, 503, 503, 200]);
    // Past the retry budget the error surfaces.
    emu.add_fault(FaultRule::new("GET", "*", Fault::Unavailable));
    match api.get_cluster(&c).await {
        Err(GkeError::Api {
            http_status: 503,
            status,
            ..
        }) => assert_eq!(status, "UNAVAILABLE"),
        r => panic!("{r:?}"),
    }
}

#[tokio::test]
async fn stockout_fails_the_operation_naming_the_pool() {
    let (api, emu) = start(fast_config()).await;
    let c = cluster_ref();
    seed(&api).await;
    emu.add_fault(
        FaultRule::new("POST", "*/nodePools", Fault::Stockout { message: None }).times(1),
    );
    let mut body = on_demand_pool();
    body["name"] = json!("plan-a-2");
    let err = run_operation(&api, &c, || api.create_node_pool(&c, &body), |_, _| {})
        .await
        .unwrap_err();
    match &err {
        GkeError::OperationFailed {
            operation_type,
            target,
            code,
            message,
            ..
        } => {
            assert_eq!(operation_type, "CREATE_NODE_POOL");
            assert_eq!(
                target,
                "projects/my-project/locations/us-east5-b/clusters/tpu-cluster/nodePools/plan-a-2"
            );
            assert_eq!(*code, 8);
            assert!(message.contains("GCE_STOCKOUT"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    assert!(err.is_stockout());
    assert!(err.hint().unwrap().contains("capacity"));
    let text = err.to_string();
    assert!(text.contains("plan-a-2") && text.contains("does not have enough resources"));
    // The pool is left behind in ERROR.
    let np = api.get_node_pool(&c, "plan-a-2").await.unwrap().unwrap();
    assert_eq!(np["status"], "ERROR");
    assert!(
        np["statusMessage"]
            .as_str()
            .unwrap()
            .contains("GCE_STOCKOUT")
    );
    assert_eq!(np["conditions"][0]["code"], "GCE_STOCKOUT");
    // Once the fault is gone, replacing the pool converges.
    done(&api, api.delete_node_pool(&c, "plan-a-2").await.unwrap()).await;
    let op = run_operation(&api, &c, || api.create_node_pool(&c, &body), |_, _| {})
        .await
        .unwrap();
    assert!(op.error.is_none());
    let np = api.get_node_pool(&c, "plan-a-2").await.unwrap().unwrap();
    assert_eq!(np["status"], "RUNNING");
}

#[tokio::test]
async fn stockout_on_cluster_create() {
    let (api, emu) = start(fast_config()).await;
    let c = cluster_ref();
    emu.add_fault(FaultRule::new("POST", "*/clusters", Fault::Stockout { message: None }).times(1));
    let body = cluster_body();
    let err = run_operation(&api, &c, || api.create_cluster(&c, &body), |_, _| {})
        .await
        .unwrap_err();
    match &err {
        GkeError::OperationFailed {
            operation_type,
            target,
            message,
            ..
        } => {
            assert_eq!(operation_type, "CREATE_CLUSTER");
            assert_eq!(
                target,
                "projects/my-project/locations/us-east5-b/clusters/tpu-cluster"
            );
            assert!(message.starts_with("Try a different location"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    assert!(err.is_stockout());
    let cl = api.get_cluster(&c).await.unwrap().unwrap();
    assert_eq!(cl["status"], "ERROR");
    let op = api.list_operations(&c).await.unwrap().remove(0);
    assert_eq!(op.extra["clusterConditions"][0]["code"], "GCE_STOCKOUT");
    // A cluster in ERROR can be deleted.
    done(&api, api.delete_cluster(&c).await.unwrap()).await;
    assert_eq!(api.get_cluster(&c).await.unwrap(), None);
}

#[tokio::test]
async fn quota_and_tpu_flex_start_queued_errors() {
    let (api, emu) = start(EmulatorConfig::instant()).await;
    let c = cluster_ref();
    seed(&api).await;
    emu.add_fault(
        FaultRule::new(
            "POST",
            "*/nodePools",
            Fault::QuotaExceeded { message: None },
        )
        .times(1),
    );
    let mut body = on_demand_pool();
    body["name"] = json!("extra");
    let err = api.create_node_pool(&c, &body).await.unwrap_err();
    match &err {
        GkeError::Forbidden { message } => assert!(message.contains("quota"), "{message}"),
        e => panic!("{e:?}"),
    }
    assert!(err.hint().unwrap().contains("quota"));

    emu.add_fault(FaultRule::new("POST", "*/nodePools", Fault::TpuFlexStartQueued).times(1));
    let mut body = dws_pool();
    body["name"] = json!("dws-2");
    match api.create_node_pool(&c, &body).await.unwrap_err() {
        GkeError::Api {
            http_status: 400,
            status,
            message,
            ..
        } => {
            assert_eq!(status, "INVALID_ARGUMENT");
            assert_eq!(
                message,
                "Flex start node pools don't support TPUs with queued provisioning."
            );
        }
        e => panic!("{e:?}"),
    }
    // The same rule enabled by configuration, for every such pool.
    let (api, _emu) = start(EmulatorConfig {
        reject_tpu_flex_start_queued: true,
        ..EmulatorConfig::instant()
    })
    .await;
    done(&api, api.create_cluster(&c, &cluster_body()).await.unwrap()).await;
    assert!(matches!(
        api.create_node_pool(&c, &dws_pool()).await,
        Err(GkeError::Api {
            http_status: 400,
            ..
        })
    ));
    let mut flex_only = dws_pool();
    flex_only
        .as_object_mut()
        .unwrap()
        .remove("queuedProvisioning");
    done(&api, api.create_node_pool(&c, &flex_only).await.unwrap()).await;
}

#[tokio::test]
async fn a_create_whose_response_is_lost_is_not_posted_twice() {
    let (url, emu) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let api = RestGke::with_endpoint(&url, Arc::new(AnonymousTokenSource))
        .unwrap()
        .with_retry(RetryConfig {
            request_timeout: Duration::from_millis(400),
            ..RetryConfig::fast()
        })
        .unwrap();
    let c = cluster_ref();
    emu.add_fault(FaultRule::new("POST", "*/clusters", Fault::Hang { millis: 2000 }).times(1));
    let op = api.create_cluster(&c, &cluster_body()).await.unwrap();
    assert_eq!(op.operation_type, "CREATE_CLUSTER");
    assert!(!op.name.is_empty());
    let posts = emu.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 1, "the create was re-read, not re-sent");
    done(&api, op).await;

    // The same for a node pool.
    emu.add_fault(FaultRule::new("POST", "*/nodePools", Fault::Hang { millis: 2000 }).times(1));
    let op = api.create_node_pool(&c, &on_demand_pool()).await.unwrap();
    assert_eq!(op.operation_type, "CREATE_NODE_POOL");
    let posts = emu
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/nodePools"))
        .count();
    assert_eq!(posts, 1);
    // A timeout on a create that never reached the server state (500 before processing) is
    // re-read, found absent, and then sent again.
    emu.add_fault(
        FaultRule::new(
            "POST",
            "*/nodePools",
            Fault::Http {
                status: 500,
                rpc_status: "INTERNAL".into(),
                message: "boom".into(),
                reason: None,
            },
        )
        .times(1),
    );
    let op = api.create_node_pool(&c, &dws_pool()).await.unwrap();
    done(&api, op).await;
    let posts = emu
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/nodePools"))
        .count();
    assert_eq!(posts, 3);
}

#[tokio::test]
async fn tokens_stay_out_of_debug_errors_and_logs() {
    const TOKEN: &str = "ya29.very-secret-token-value";
    let (url, emu) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let tokens = Arc::new(StaticTokenSource::new(TOKEN));
    assert!(!format!("{tokens:?}").contains(TOKEN));
    let api = RestGke::with_endpoint(&url, tokens.clone()).unwrap();
    assert!(!format!("{api:?}").contains(TOKEN));
    let c = cluster_ref();

    let mut errors = vec![];
    errors.push(api.delete_cluster(&c).await.unwrap_err());
    emu.add_fault(FaultRule::new(
        "*",
        "*",
        Fault::QuotaExceeded { message: None },
    ));
    errors.push(api.create_cluster(&c, &cluster_body()).await.unwrap_err());
    emu.clear_faults();
    emu.add_fault(FaultRule::new("*", "*", Fault::Unavailable));
    errors.push(api.get_cluster(&c).await.unwrap_err());
    emu.clear_faults();
    // Unreachable endpoint: a transport error.
    let dead = RestGke::with_endpoint("http://127.0.0.1:9/", tokens.clone())
        .unwrap()
        .with_retry(RetryConfig {
            max_retries: 1,
            ..RetryConfig::fast()
        })
        .unwrap();
    errors.push(dead.get_cluster(&c).await.unwrap_err());
    for e in &errors {
        assert!(!e.to_string().contains(TOKEN), "{e}");
        assert!(!format!("{e:?}").contains(TOKEN), "{e:?}");
    }
    assert!(matches!(errors[3], GkeError::Transport(_)));
    // The token was sent, and the emulator's log does not hold it.
    let log = emu.requests();
    assert!(log.iter().all(|r| r.authorized));
    assert!(!serde_json::to_string(&log).unwrap().contains(TOKEN));
    // Kubernetes config: the token is a SecretString (redacted in Debug).
    done(&api, api.create_cluster(&c, &cluster_body()).await.unwrap()).await;
    let cl = api.get_cluster(&c).await.unwrap().unwrap();
    let cfg = kube_config_from_cluster(&cl, SecretString::from(TOKEN.to_string())).unwrap();
    assert!(!format!("{cfg:?}").contains(TOKEN));
}

#[tokio::test]
async fn kube_config_from_an_emulated_cluster() {
    let (api, _emu) = start(EmulatorConfig::instant()).await;
    let c = cluster_ref();
    done(&api, api.create_cluster(&c, &cluster_body()).await.unwrap()).await;
    let cl = api.get_cluster(&c).await.unwrap().unwrap();
    let cfg = kube_config_from_cluster(&cl, SecretString::from("t".to_string())).unwrap();
    assert_eq!(cfg.cluster_url.to_string(), "https://127.0.0.1/");
    assert_eq!(cfg.root_cert.as_ref().map(Vec::len), Some(1));

    // IP endpoints disabled: the DNS endpoint, without CA data.
    let c2 = ClusterRef {
        cluster: "dns-only".into(),
        ..cluster_ref()
    };
    let mut body = cluster_body();
    body["name"] = json!("dns-only");
    body["controlPlaneEndpointsConfig"] = json!({"ipEndpointsConfig": {"enabled": false}});
    done(&api, api.create_cluster(&c2, &body).await.unwrap()).await;
    let cl = api.get_cluster(&c2).await.unwrap().unwrap();
    assert!(cl.get("endpoint").is_none());
    let cfg = kube_config_from_cluster(&cl, SecretString::from("t".to_string())).unwrap();
    let url = cfg.cluster_url.to_string();
    assert!(
        url.starts_with("https://gke-") && url.ends_with(".us-east5.gke.goog/"),
        "{url}"
    );
    assert!(cfg.root_cert.is_none());
}

#[tokio::test]
async fn state_persists_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let config = EmulatorConfig {
        state_dir: Some(dir.path().to_path_buf()),
        ..EmulatorConfig::instant()
    };
    let c = cluster_ref();
    let (api, emu) = start(config.clone()).await;
    seed(&api).await;
    let before = api.get_cluster(&c).await.unwrap().unwrap();
    emu.shutdown().await;
    let (api, _emu) = start(config).await;
    let after = api.get_cluster(&c).await.unwrap().unwrap();
    assert_eq!(before, after);
    assert_eq!(api.list_operations(&c).await.unwrap().len(), 3);
}

/// What the spec renders for the seed example (`gkq render examples/tpu-dws -o json`) is accepted
/// by the emulator as is: the cluster and every pool are created, and arrive byte for byte.
#[tokio::test]
async fn rendered_seed_example_is_accepted() {
    let out = crate::support::gkq()
        .args(["render", "examples/tpu-dws", "-o", "json"])
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
    let c = ClusterRef {
        project: gke["project"].as_str().unwrap_or("my-project").into(),
        location: gke["location"].as_str().unwrap_or("us-east5-b").into(),
        cluster: gke["cluster"]["name"].as_str().unwrap().into(),
    };
    let (api, emu) = start(EmulatorConfig::instant()).await;
    let body = gke["cluster"].clone();
    run_operation(&api, &c, || api.create_cluster(&c, &body), |_, _| {})
        .await
        .unwrap();
    let pools = gke["nodePools"].as_array().unwrap();
    assert!(pools.len() >= 2);
    for p in pools {
        run_operation(&api, &c, || api.create_node_pool(&c, p), |_, _| {})
            .await
            .unwrap();
    }
    let live = api.get_cluster(&c).await.unwrap().unwrap();
    assert_eq!(live["status"], "RUNNING");
    assert_eq!(
        live["nodePools"].as_array().unwrap().len(),
        pools.len() + 1,
        "default pool + the spec's pools"
    );
    let posted: Vec<Value> = emu
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .filter_map(|r| r.body)
        .collect();
    assert_eq!(posted[0], json!({ "cluster": body }));
    for (i, p) in pools.iter().enumerate() {
        assert_eq!(posted[i + 1], json!({ "nodePool": p }));
    }
}
