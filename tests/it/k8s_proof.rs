//! Proof tests against a real control plane (etcd + kube-apiserver + Kueue manager with its
//! webhooks; see tests/support/control_plane.rs). They pin down, independent of gkq's engine, the
//! server behaviour gkq relies on: server-side apply of the seed's Kueue objects, the defaults the
//! server adds (which gkq's diff must never report as drift), and Kueue's real admission of the
//! seed's two RayJobs (job 1 on `on-demand`, job 2 on `dws` waiting for the `dws-prov` check).
//!
//! The objects are the seed's `dws-tpu-queue.yaml` and `rayjob-tpu-v6e-dws.yaml` (Google's guide
//! "Optimize AI training on TPUs with DWS and Kueue",
//! <https://cloud.google.com/kubernetes-engine/docs/tutorials/ray-kueue-dws>; copies in
//! `tests/fixtures/seed/`), written as `kueue.x-k8s.io/v1beta2`, with
//! `${ONDEMAND_NODEPOOL}=on-demand-pool` and `${DWS_NODEPOOL}=dws-pool`. Cluster-scoped
//! objects shared by tests (flavors, admission check, provisioning config) keep the seed's names
//! and identical content; each test gets its own ClusterQueue so quota usage never mixes.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use support::control_plane::{
    FIELD_MANAGER, apply, condition_status, eventually, get, list, test_env, unique_name,
};
use support::kueue::{KUEUE, local_queue, seed_cluster_queue, seed_ray_job, seed_shared_objects};

const WAIT: Duration = Duration::from_secs(60);

/// Applies the seed's queue setup (shared objects, a ClusterQueue named `cq`, LocalQueue
/// `user-queue` in `ns`) and waits until the ClusterQueue is Active.
async fn apply_seed_queues(client: &kube::Client, ns: &str, cq: &str) -> Result<()> {
    for obj in seed_shared_objects() {
        apply(client, ns, &obj).await?;
    }
    apply(client, ns, &seed_cluster_queue(cq)).await?;
    apply(client, ns, &local_queue(ns, "user-queue", cq)).await?;
    eventually(&format!("ClusterQueue {cq} Active=True"), WAIT, || async {
        let obj = get(client, ns, KUEUE, "ClusterQueue", cq).await?;
        Ok((condition_status(&obj, "Active") == Some("True")).then_some(()))
    })
    .await
}

fn finalizers(obj: &Value) -> Vec<&str> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn applied_by_us(obj: &Value) -> bool {
    obj["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|m| {
            m.iter()
                .any(|f| f["manager"] == FIELD_MANAGER && f["operation"] == "Apply")
        })
}

#[tokio::test]
async fn seed_queue_objects_apply_and_read_back_server_defaults() -> Result<()> {
    let env = test_env("seed-defaults").await;
    let (c, ns) = (&env.client, env.namespace.as_str());
    let cq = unique_name("cluster-queue");
    apply_seed_queues(c, ns, &cq).await?;

    // ClusterQueue: CRD defaults, webhook finalizer, quantities as written.
    let got = get(c, ns, KUEUE, "ClusterQueue", &cq).await?;
    let spec = &got["spec"];
    assert_eq!(spec["queueingStrategy"], "BestEffortFIFO");
    assert_eq!(spec["stopPolicy"], "None");
    assert_eq!(
        spec["flavorFungibility"],
        json!({"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"})
    );
    assert_eq!(
        spec["preemption"],
        json!({"borrowWithinCohort": {"policy": "Never"}, "reclaimWithinCohort": "Never", "withinClusterQueue": "Never"})
    );
    assert_eq!(finalizers(&got), ["kueue.x-k8s.io/resource-in-use"]);
    assert!(
        applied_by_us(&got),
        "managedFields has no Apply entry for {FIELD_MANAGER}: {got:#}"
    );
    assert_eq!(spec["namespaceSelector"], json!({}));
    assert_eq!(
        spec["admissionChecksStrategy"],
        json!({"admissionChecks": [{"name": "dws-prov", "onFlavors": ["dws"]}]})
    );
    // Kueue's mutating webhook re-marshals the typed object on CREATE, so quantities come back
    // canonical: "1000000000" -> "1G" (while "1000000000Gi" is already canonical). gkq's diff must
    // compare quantities semantically.
    let dws = &spec["resourceGroups"][0]["flavors"][2];
    assert_eq!(dws["name"], "dws");
    assert_eq!(
        dws["resources"],
        json!([
            {"name": "cpu", "nominalQuota": "1G"},
            {"name": "memory", "nominalQuota": "1000000000Gi"},
            {"name": "google.com/tpu", "nominalQuota": "1G"}
        ])
    );
    assert_eq!(got["metadata"]["generation"], 1);

    // LocalQueue: stopPolicy default, no finalizer.
    let lq = get(c, ns, KUEUE, "LocalQueue", "user-queue").await?;
    assert_eq!(
        lq["spec"],
        json!({"clusterQueue": cq, "stopPolicy": "None"})
    );
    assert!(finalizers(&lq).is_empty(), "LocalQueue finalizers: {lq:#}");

    // ResourceFlavor: webhook finalizer, spec untouched.
    let rf = get(c, ns, KUEUE, "ResourceFlavor", "on-demand").await?;
    assert_eq!(
        rf["spec"],
        json!({"nodeLabels": {"cloud.google.com/gke-nodepool": "on-demand-pool"}})
    );
    assert_eq!(finalizers(&rf), ["kueue.x-k8s.io/resource-in-use"]);

    // ProvisioningRequestConfig: retryStrategy defaults.
    let prc = get(c, ns, KUEUE, "ProvisioningRequestConfig", "dws-config").await?;
    assert_eq!(
        prc["spec"]["retryStrategy"],
        json!({"backoffBaseSeconds": 60, "backoffLimitCount": 3, "backoffMaxSeconds": 1800})
    );

    // AdmissionCheck: no spec defaults in v1beta2; Kueue's provisioning controller (on because the
    // ProvisioningRequest CRD is served) marks it Active, and the controller adds the finalizer.
    let ac = eventually(
        "AdmissionCheck dws-prov Active with finalizer",
        WAIT,
        || async {
            let ac = get(c, ns, KUEUE, "AdmissionCheck", "dws-prov").await?;
            let ready =
                condition_status(&ac, "Active") == Some("True") && !finalizers(&ac).is_empty();
            Ok(ready.then_some(ac))
        },
    )
    .await?;
    assert_eq!(
        ac["spec"],
        json!({
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws-config"}
        })
    );
    assert_eq!(finalizers(&ac), ["kueue.x-k8s.io/resource-in-use"]);

    // Re-applying the same intent: the webhook does not mutate UPDATEs, so the first re-apply
    // writes our spelling back ("1G" -> "1000000000", a new generation) and from then on
    // re-applying is a no-op for the server.
    let again = apply(c, ns, &seed_cluster_queue(&cq)).await?;
    assert_eq!(
        again["metadata"]["generation"], 2,
        "first re-apply: {again:#}"
    );
    assert_eq!(
        again["spec"]["resourceGroups"][0]["flavors"][2]["resources"][0],
        json!({"name": "cpu", "nominalQuota": "1000000000"})
    );
    let third = apply(c, ns, &seed_cluster_queue(&cq)).await?;
    assert_eq!(
        third["metadata"]["generation"], 2,
        "an unchanged re-apply must not change the spec"
    );
    assert_eq!(third["spec"], again["spec"]);
    Ok(())
}

#[tokio::test]
async fn kueue_webhooks_reject_an_invalid_cluster_queue() -> Result<()> {
    let env = test_env("webhook-reject").await;
    let (c, ns) = (&env.client, env.namespace.as_str());
    // A flavor listing a resource that is not in coveredResources: CRD schema and CEL accept it,
    // only Kueue's validating webhook rejects it (docs/test-control-plane.md 5.4).
    let cq = unique_name("bad-cq");
    let bad = json!({
        "apiVersion": KUEUE, "kind": "ClusterQueue",
        "metadata": {"name": cq},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default-cpu", "resources": [{"name": "memory", "nominalQuota": "1Gi"}]}]
            }]
        }
    });
    let err = apply(c, ns, &bad)
        .await
        .expect_err("invalid ClusterQueue was accepted");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("vclusterqueue.kb.io"),
        "not rejected by Kueue's webhook: {msg}"
    );
    Ok(())
}

/// The Workload Kueue created for the RayJob `job`.
async fn workload_of(c: &kube::Client, ns: &str, job: &str) -> Result<Option<Value>> {
    let wls = list(c, ns, KUEUE, "Workload").await?;
    Ok(wls.into_iter().find(|w| {
        w["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "RayJob" && r["name"] == job))
    }))
}

/// `{podset name: flavor of google.com/tpu or cpu}` from `status.admission`.
fn podset_flavors(wl: &Value) -> Vec<(String, String)> {
    wl["status"]["admission"]["podSetAssignments"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    let f = &p["flavors"];
                    let flavor = f["google.com/tpu"]
                        .as_str()
                        .or(f["cpu"].as_str())
                        .unwrap_or("?");
                    (
                        p["name"].as_str().unwrap_or("?").to_owned(),
                        flavor.to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn seed_rayjobs_first_on_demand_then_dws_waiting_on_provisioning() -> Result<()> {
    let env = test_env("seed-rayjobs").await;
    let (c, ns) = (&env.client, env.namespace.as_str());
    let cq = unique_name("cluster-queue");
    apply_seed_queues(c, ns, &cq).await?;

    // Job 1: reserved and admitted on on-demand (32 CPU / 64Gi / 16 TPU of 40 / 75Gi / 16).
    apply(c, ns, &seed_ray_job(1)).await?;
    let wl1 = eventually("job 1's Workload admitted", WAIT, || async {
        let wl = workload_of(c, ns, "rayjob-tpu-v6e-dws-1").await?;
        Ok(wl.filter(|w| condition_status(w, "Admitted") == Some("True")))
    })
    .await?;
    assert_eq!(condition_status(&wl1, "QuotaReserved"), Some("True"));
    assert_eq!(wl1["status"]["admission"]["clusterQueue"], cq.as_str());
    let flavors1 = podset_flavors(&wl1);
    assert_eq!(
        flavors1,
        [
            ("head".to_owned(), "default-cpu".to_owned()),
            ("tpu-group".to_owned(), "on-demand".to_owned()),
            ("submitter".to_owned(), "default-cpu".to_owned()),
        ],
        "job 1 podset flavors: {wl1:#}"
    );
    let worker1 = &wl1["status"]["admission"]["podSetAssignments"][1];
    assert_eq!(worker1["count"], 4);
    assert_eq!(
        worker1["flavors"],
        json!({"cpu": "on-demand", "memory": "on-demand", "google.com/tpu": "on-demand"})
    );
    assert!(
        wl1["status"]["admissionChecks"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "no admission check applies to on-demand: {wl1:#}"
    );
    // Admitted without an admission check, so Kueue unsuspends the RayJob.
    eventually("RayJob 1 unsuspended", WAIT, || async {
        let job = get(c, ns, "ray.io/v1", "RayJob", "rayjob-tpu-v6e-dws-1").await?;
        Ok((job["spec"]["suspend"].as_bool() != Some(true)).then_some(()))
    })
    .await?;

    // Job 2: on-demand is full, so the worker podset falls through to dws, whose admission check
    // holds the admission: QuotaReserved=True, not Admitted, check Pending, ProvisioningRequest made.
    apply(c, ns, &seed_ray_job(2)).await?;
    let wl2 = eventually("job 2's Workload to reserve quota", WAIT, || async {
        let wl = workload_of(c, ns, "rayjob-tpu-v6e-dws-2").await?;
        Ok(wl.filter(|w| condition_status(w, "QuotaReserved") == Some("True")))
    })
    .await?;
    assert_eq!(
        podset_flavors(&wl2),
        [
            ("head".to_owned(), "default-cpu".to_owned()),
            ("tpu-group".to_owned(), "dws".to_owned()),
            ("submitter".to_owned(), "default-cpu".to_owned()),
        ],
        "job 2 podset flavors: {wl2:#}"
    );
    let pr = eventually("ProvisioningRequest for job 2", WAIT, || async {
        let prs = list(c, ns, "autoscaling.x-k8s.io/v1", "ProvisioningRequest").await?;
        Ok(prs.into_iter().find(|p| {
            p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("dws-prov"))
        }))
    })
    .await?;
    assert_eq!(
        pr["spec"]["provisioningClassName"],
        "queued-provisioning.gke.io"
    );
    // Only the TPU podset goes into the request (managedResources: [google.com/tpu]).
    let pr_podsets = pr["spec"]["podSets"]
        .as_array()
        .context("ProvisioningRequest podSets")?;
    ensure!(
        pr_podsets.len() == 1 && pr_podsets[0]["count"] == 4,
        "PR podSets: {pr:#}"
    );

    // Still waiting a moment later: nothing provisions in this cluster.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let wl2 = workload_of(c, ns, "rayjob-tpu-v6e-dws-2")
        .await?
        .context("job 2 Workload vanished")?;
    assert_eq!(condition_status(&wl2, "QuotaReserved"), Some("True"));
    // Kueue v0.19.2 leaves the Admitted condition out entirely (not False) while a check is Pending.
    assert_eq!(
        condition_status(&wl2, "Admitted"),
        None,
        "job 2 Admitted condition: {wl2:#}"
    );
    let checks = wl2["status"]["admissionChecks"]
        .as_array()
        .context("job 2 admissionChecks")?;
    ensure!(
        checks.len() == 1 && checks[0]["name"] == "dws-prov" && checks[0]["state"] == "Pending",
        "job 2 admission checks: {checks:#?}"
    );
    let job2 = get(c, ns, "ray.io/v1", "RayJob", "rayjob-tpu-v6e-dws-2").await?;
    assert_eq!(job2["spec"]["suspend"], true, "job 2 must stay suspended");

    // The ClusterQueue accounts both reservations, only job 1 as admitted usage.
    let cq_obj = get(c, ns, KUEUE, "ClusterQueue", &cq).await?;
    assert_eq!(cq_obj["status"]["reservingWorkloads"], 2, "{cq_obj:#}");
    assert_eq!(cq_obj["status"]["admittedWorkloads"], 1, "{cq_obj:#}");
    Ok(())
}
