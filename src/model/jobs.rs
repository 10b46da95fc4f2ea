//! Training jobs: the ConfigMap that ships each script, and KubeRay RayJobs shaped like the seed's
//! `rayjob-tpu-v6e-dws.yaml`.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::kueue::{DEFAULT_ACCELERATOR_RESOURCE, toleration_json};
use super::{k8s_meta, quantity_string};
use crate::spec::types::{Job, Spec, Toleration};
use crate::vocab::labels::{
    ELASTIC_JOB_ANNOTATION, GPU_ACCELERATOR_LABEL, MAX_RUN_DURATION_ANNOTATION, NODE_POOL_LABEL,
    PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, QUEUED_TAINT, TPU_ACCELERATOR_LABEL,
    TPU_TOPOLOGY_LABEL,
};

pub const RAY_API: &str = "ray.io/v1";
/// Digest of a run's training script: a changed script makes a new run (see `diff::kube`).
pub const SCRIPT_DIGEST_ANNOTATION: &str = "gkq.dev/script-sha256";
const SCRIPT_MOUNT: &str = "/app";
const SCRIPT_VOLUME: &str = "train-script-volume";

pub fn config_map_name(job: &Job) -> String {
    job.config_map
        .clone()
        .unwrap_or_else(|| format!("{}-script", job.name))
}

pub fn script_key(job: &Job) -> String {
    Path::new(&job.script)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| job.script.clone())
}

/// The names of a job's runs: `<name>-1 .. <name>-N` with `count`, else `<name>`.
pub fn run_names(job: &Job) -> Vec<String> {
    match job.count {
        Some(n) => (1..=n).map(|i| format!("{}-{i}", job.name)).collect(),
        None => vec![job.name.clone()],
    }
}

pub fn config_map(spec: &Spec, job: &Job, script: &str) -> Value {
    let mut data = Map::new();
    data.insert(script_key(job), json!(script));
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": k8s_meta(spec, &config_map_name(job), Some(&job.namespace)),
        "data": data,
    })
}

/// Tolerations gkq adds so that the job can land on the flavors of its queue.
pub fn implied_tolerations(job: &Job, queue_has_dws: bool) -> Vec<Toleration> {
    let mut out = Vec::new();
    for w in &job.workers {
        if let Some(a) = &w.accelerator {
            let key = a
                .resource
                .clone()
                .unwrap_or_else(|| DEFAULT_ACCELERATOR_RESOURCE.into());
            let t = Toleration {
                key,
                operator: Some("Exists".into()),
                value: None,
                effect: Some("NoSchedule".into()),
            };
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    if queue_has_dws {
        out.push(Toleration {
            key: QUEUED_TAINT.into(),
            operator: Some("Exists".into()),
            value: None,
            effect: Some("NoSchedule".into()),
        });
    }
    out
}

fn volume() -> Value {
    json!([{"name": SCRIPT_VOLUME, "configMap": {"name": Value::Null}}])
}

pub fn script_digest(script: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(script.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn ray_job(spec: &Spec, job: &Job, run_name: &str, queue_has_dws: bool, script: &str) -> Value {
    let mut meta = k8s_meta(spec, run_name, Some(&job.namespace));
    {
        let labels = meta["labels"]
            .as_object_mut()
            .expect("k8s_meta builds labels");
        labels.insert(QUEUE_NAME_LABEL.into(), json!(job.queue));
        if let Some(p) = &job.priority_class {
            labels.insert(PRIORITY_CLASS_LABEL.into(), json!(p));
        }
        for (k, v) in &job.labels {
            labels.insert(k.clone(), json!(v));
        }
    }
    let mut annotations = Map::new();
    annotations.insert(
        SCRIPT_DIGEST_ANNOTATION.into(),
        json!(script_digest(script)),
    );
    if job.elastic {
        annotations.insert(ELASTIC_JOB_ANNOTATION.into(), json!("true"));
    }
    if let Some(secs) = job
        .duration
        .as_deref()
        .and_then(|d| crate::vocab::duration::parse_whole_seconds(d).ok())
        .filter(|_| queue_has_dws)
    {
        annotations.insert(MAX_RUN_DURATION_ANNOTATION.into(), json!(secs.to_string()));
    }
    meta["annotations"] = Value::Object(annotations);

    let cm = config_map_name(job);
    let mut vol = volume();
    vol[0]["configMap"]["name"] = json!(cm);
    let mount = json!([{"mountPath": SCRIPT_MOUNT, "name": SCRIPT_VOLUME}]);

    let head_res = json!({
        "cpu": quantity_string(&job.head.cpu),
        "memory": quantity_string(&job.head.memory),
    });
    let mut head_spec = Map::new();
    let mut head_selector = job.head.node_selector.clone();
    if let Some(pool) = &job.head.node_pool {
        head_selector.insert(NODE_POOL_LABEL.into(), pool.clone());
    }
    if !head_selector.is_empty() {
        head_spec.insert("nodeSelector".into(), json!(head_selector));
    }
    head_spec.insert(
        "containers".into(),
        json!([{
            "name": "ray-head",
            "image": job.image,
            "ports": [
                {"containerPort": 6379, "name": "gcs-server"},
                {"containerPort": 8265, "name": "dashboard"},
                {"containerPort": 10001, "name": "client"},
            ],
            "resources": {"limits": head_res, "requests": head_res},
            "volumeMounts": mount,
        }]),
    );
    head_spec.insert("volumes".into(), vol.clone());

    let implied = implied_tolerations(job, queue_has_dws);
    let workers: Vec<Value> = job
        .workers
        .iter()
        .map(|w| {
            let mut res = Map::new();
            res.insert("cpu".into(), json!(quantity_string(&w.cpu)));
            if let Some(a) = &w.accelerator {
                let name = a
                    .resource
                    .clone()
                    .unwrap_or_else(|| DEFAULT_ACCELERATOR_RESOURCE.into());
                res.insert(name, json!(a.chips.to_string()));
            }
            res.insert("memory".into(), json!(quantity_string(&w.memory)));
            let res = Value::Object(res);

            let mut tolerations: Vec<Toleration> = Vec::new();
            for t in implied.iter().chain(w.tolerations.iter()) {
                if !tolerations
                    .iter()
                    .any(|e| e.key == t.key && e.effect == t.effect)
                {
                    tolerations.push(t.clone());
                }
            }
            let mut selector = w.node_selector.clone();
            if let Some(a) = &w.accelerator {
                let is_tpu = a
                    .resource
                    .as_deref()
                    .is_none_or(|r| r == DEFAULT_ACCELERATOR_RESOURCE);
                if is_tpu {
                    selector.insert(TPU_ACCELERATOR_LABEL.into(), a.kind.clone());
                    if let Some(t) = &a.topology {
                        selector.insert(TPU_TOPOLOGY_LABEL.into(), t.clone());
                    }
                } else {
                    selector.insert(GPU_ACCELERATOR_LABEL.into(), a.kind.clone());
                }
            }
            let mut pod = Map::new();
            if !tolerations.is_empty() {
                pod.insert(
                    "tolerations".into(),
                    Value::Array(tolerations.iter().map(toleration_json).collect()),
                );
            }
            pod.insert(
                "containers".into(),
                json!([{
                    "name": "ray-worker",
                    "image": job.image,
                    "resources": {"limits": res, "requests": res},
                    "volumeMounts": mount,
                }]),
            );
            pod.insert("volumes".into(), vol.clone());
            if !selector.is_empty() {
                pod.insert("nodeSelector".into(), json!(selector));
            }
            let mut group = Map::new();
            group.insert("replicas".into(), json!(w.replicas));
            if let Some(m) = w.min_replicas {
                group.insert("minReplicas".into(), json!(m));
            }
            if let Some(m) = w.max_replicas {
                group.insert("maxReplicas".into(), json!(m));
            }
            group.insert("numOfHosts".into(), json!(w.hosts));
            group.insert("groupName".into(), json!(w.group));
            group.insert("rayStartParams".into(), json!({}));
            group.insert("template".into(), json!({"spec": pod}));
            Value::Object(group)
        })
        .collect();

    let mut spec_map = Map::new();
    spec_map.insert(
        "shutdownAfterJobFinishes".into(),
        json!(job.shutdown_after_job_finishes),
    );
    spec_map.insert(
        "entrypoint".into(),
        json!(
            job.entrypoint
                .clone()
                .unwrap_or_else(|| format!("python {SCRIPT_MOUNT}/{}", script_key(job)))
        ),
    );
    if !job.pip.is_empty() {
        let mut env = String::from("pip:\n");
        for p in &job.pip {
            env.push_str(&format!("  - {p}\n"));
        }
        spec_map.insert("runtimeEnvYAML".into(), json!(env));
    }
    let mut cluster = Map::new();
    if job.autoscaling {
        cluster.insert("enableInTreeAutoscaling".into(), json!(true));
    }
    cluster.insert(
        "headGroupSpec".into(),
        json!({"rayStartParams": {}, "template": {"spec": head_spec}}),
    );
    cluster.insert("workerGroupSpecs".into(), Value::Array(workers));
    spec_map.insert("rayClusterSpec".into(), Value::Object(cluster));

    json!({
        "apiVersion": RAY_API,
        "kind": "RayJob",
        "metadata": meta,
        "spec": spec_map,
    })
}
