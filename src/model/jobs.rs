//! Training jobs: the ConfigMap that ships each script, and the job objects: KubeRay RayJobs
//! shaped like the seed's `rayjob-tpu-v6e-dws.yaml`, JobSets (one replicated job per kind of
//! pod, one Job per TPU slice) and batch Jobs.
//!
//! [`pod_groups`] is every kind's groups of identical pods in one shape, so that validation and
//! rendering treat a Ray worker group, a JobSet replicated job and a batch Job's pods alike.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::{k8s_meta, quantity_string, toleration_json};
use crate::spec::types::{
    Accelerator, Job, JobKind, NodeSelectorRequirement, PodGroup, Quantity, Spec, Toleration,
};
use crate::vocab::labels::TPU_RESOURCE as DEFAULT_ACCELERATOR_RESOURCE;
use crate::vocab::labels::{
    ELASTIC_JOB_ANNOTATION, GPU_ACCELERATOR_LABEL, MAX_RUN_DURATION_ANNOTATION, NODE_POOL_LABEL,
    PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, QUEUED_TAINT, TPU_ACCELERATOR_LABEL,
    TPU_TOPOLOGY_LABEL,
};
use crate::vocab::object::{At, Field};

pub const RAY_API: &str = "ray.io/v1";
pub const JOBSET_API: &str = "jobset.x-k8s.io/v1alpha2";
/// JobSet's one-slice-per-domain annotation: each Job of a replicated job gets a node pool of
/// its own (jobset v0.12.0 `api/jobset/v1alpha2/jobset_types.go`, `ExclusiveKey`).
pub const EXCLUSIVE_TOPOLOGY_ANNOTATION: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
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

/// The index of the spec's job whose runs include `namespace/name` (a job or its Workload's
/// owner, as `gkq explain` names it).
pub fn job_entry(spec: &Spec, namespace: &str, name: &str) -> Option<usize> {
    spec.jobs
        .iter()
        .position(|job| job.namespace == namespace && run_names(job).iter().any(|n| n == name))
}

/// The index of the job a spec path is in: `jobs[2].queue` is in job 2.
pub fn job_index_of_path(path: &str) -> Option<usize> {
    let rest = path.strip_prefix("jobs[")?;
    let (index, _) = rest.split_once(']')?;
    index.parse().ok()
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

/// One group of identical pods of a job, whatever its kind: a Ray head or worker group, a JobSet
/// replicated job, or a batch Job's pods. `section` and `index` locate it in the spec
/// (`jobs[i].<section>[index]`).
#[derive(Debug, Clone)]
pub struct PodGroupRef<'a> {
    /// `head`, `workers`, `replicatedJobs` or `pods`.
    pub section: &'static str,
    pub index: Option<usize>,
    /// Whether the pod fields are in a `pods:` block of the group (a replicated job's).
    pub pods_nested: bool,
    /// The group's name (Ray group, replicated job), `head` or `main`.
    pub name: String,
    /// Replicas (slices); 1 for a head or a batch Job.
    pub replicas: u32,
    /// Pods per replica.
    pub hosts: u32,
    pub cpu: &'a Quantity,
    pub memory: &'a Quantity,
    pub limits: Option<&'a BTreeMap<String, Quantity>>,
    pub accelerator: Option<&'a Accelerator>,
    pub node_pool: Option<&'a String>,
    pub node_selector: &'a BTreeMap<String, String>,
    pub required_node_affinity: &'a [NodeSelectorRequirement],
    pub tolerations: &'a [Toleration],
}

impl PodGroupRef<'_> {
    /// The accelerator's extended resource name (`google.com/tpu` unless given).
    pub fn accelerator_resource(&self) -> Option<String> {
        self.accelerator.map(accelerator_resource)
    }
}

/// The extended resource an accelerator is requested as.
pub fn accelerator_resource(a: &Accelerator) -> String {
    a.resource
        .clone()
        .unwrap_or_else(|| DEFAULT_ACCELERATOR_RESOURCE.into())
}

/// Whether an accelerator is a TPU (its resource is `google.com/tpu`).
pub fn is_tpu(a: &Accelerator) -> bool {
    a.resource
        .as_deref()
        .is_none_or(|r| r == DEFAULT_ACCELERATOR_RESOURCE)
}

/// The job's groups of pods in spec order (for a RayJob: the head, then the worker groups).
pub fn pod_groups(job: &Job) -> Vec<PodGroupRef<'_>> {
    let mut out = Vec::new();
    match job.kind {
        JobKind::RayJob => {
            if let Some(h) = &job.head {
                out.push(PodGroupRef {
                    section: "head",
                    index: None,
                    pods_nested: false,
                    name: "head".into(),
                    replicas: 1,
                    hosts: 1,
                    cpu: &h.cpu,
                    memory: &h.memory,
                    limits: h.limits.as_ref(),
                    accelerator: None,
                    node_pool: h.node_pool.as_ref(),
                    node_selector: &h.node_selector,
                    required_node_affinity: &h.required_node_affinity,
                    tolerations: &h.tolerations,
                });
            }
            for (i, w) in job.workers.iter().enumerate() {
                out.push(PodGroupRef {
                    section: "workers",
                    index: Some(i),
                    pods_nested: false,
                    name: w.group.clone(),
                    replicas: w.replicas,
                    hosts: w.hosts,
                    cpu: &w.cpu,
                    memory: &w.memory,
                    limits: w.limits.as_ref(),
                    accelerator: w.accelerator.as_ref(),
                    node_pool: w.node_pool.as_ref(),
                    node_selector: &w.node_selector,
                    required_node_affinity: &w.required_node_affinity,
                    tolerations: &w.tolerations,
                });
            }
        }
        JobKind::JobSet => {
            for (i, r) in job.replicated_jobs.iter().enumerate() {
                out.push(group_of_pods(
                    "replicatedJobs",
                    Some(i),
                    r.name.clone(),
                    r.replicas,
                    r.hosts,
                    &r.pods,
                ));
            }
        }
        JobKind::Job => {
            if let Some(p) = &job.pods {
                out.push(group_of_pods(
                    "pods",
                    None,
                    "main".into(),
                    1,
                    batch_pods(job),
                    p,
                ));
            }
        }
    }
    out
}

fn group_of_pods<'a>(
    section: &'static str,
    index: Option<usize>,
    name: String,
    replicas: u32,
    hosts: u32,
    p: &'a PodGroup,
) -> PodGroupRef<'a> {
    PodGroupRef {
        section,
        index,
        pods_nested: section == "replicatedJobs",
        name,
        replicas,
        hosts,
        cpu: &p.cpu,
        memory: &p.memory,
        limits: p.limits.as_ref(),
        accelerator: p.accelerator.as_ref(),
        node_pool: p.node_pool.as_ref(),
        node_selector: &p.node_selector,
        required_node_affinity: &p.required_node_affinity,
        tolerations: &p.tolerations,
    }
}

/// A batch Job's pods running at once: `parallelism` (default 1), or `completions` if fewer.
pub fn batch_pods(job: &Job) -> u32 {
    let parallelism = job.parallelism.unwrap_or(1);
    job.completions.map_or(parallelism, |c| c.min(parallelism))
}

/// Tolerations gkq adds so that the job can land on the flavors of its queue: the taints of
/// the accelerators the job asks for, and the queued-provisioning taint when its queue can use
/// DWS.
pub fn implied_tolerations(job: &Job, queue_has_dws: bool) -> Vec<Toleration> {
    let mut out = Vec::new();
    for a in pod_groups(job).iter().filter_map(|g| g.accelerator) {
        let t = Toleration {
            key: accelerator_resource(a),
            operator: Some("Exists".into()),
            value: None,
            effect: Some("NoSchedule".into()),
        };
        if !out.contains(&t) {
            out.push(t);
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

fn volume(config_map: &str) -> Value {
    json!([{"name": SCRIPT_VOLUME, "configMap": {"name": config_map}}])
}

fn mounts() -> Value {
    json!([{"mountPath": SCRIPT_MOUNT, "name": SCRIPT_VOLUME}])
}

pub fn script_digest(script: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(script.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The command a job runs: its `entrypoint`, else `python /app/<script>`.
pub fn entrypoint(job: &Job) -> String {
    job.entrypoint
        .clone()
        .unwrap_or_else(|| format!("python {SCRIPT_MOUNT}/{}", script_key(job)))
}

/// A container's `{"limits", "requests"}`: requests are cpu, the accelerator and memory; limits
/// equal them unless the group gives its own (the accelerator's limit is its request always).
fn resources(group: &PodGroupRef<'_>) -> Value {
    let mut requests = Map::new();
    requests.insert("cpu".into(), json!(quantity_string(group.cpu)));
    if let Some(a) = group.accelerator {
        requests.insert(accelerator_resource(a), json!(a.chips.to_string()));
    }
    requests.insert("memory".into(), json!(quantity_string(group.memory)));
    let limits = match group.limits {
        None => requests.clone(),
        Some(given) => {
            let mut limits: Map<String, Value> = given
                .iter()
                .map(|(k, v)| (k.clone(), json!(quantity_string(v))))
                .collect();
            if let Some(a) = group.accelerator {
                limits
                    .entry(accelerator_resource(a))
                    .or_insert_with(|| json!(a.chips.to_string()));
            }
            limits
        }
    };
    json!({"limits": limits, "requests": requests})
}

/// The node selector of a group: its own, its node pool, and for an accelerator the GKE labels
/// of its type (and TPU topology).
fn node_selector(group: &PodGroupRef<'_>) -> BTreeMap<String, String> {
    let mut selector = group.node_selector.clone();
    if let Some(pool) = group.node_pool {
        selector.insert(NODE_POOL_LABEL.into(), pool.clone());
    }
    if let Some(a) = group.accelerator {
        if is_tpu(a) {
            selector.insert(TPU_ACCELERATOR_LABEL.into(), a.kind.clone());
            if let Some(t) = &a.topology {
                selector.insert(TPU_TOPOLOGY_LABEL.into(), t.clone());
            }
        } else {
            selector.insert(GPU_ACCELERATOR_LABEL.into(), a.kind.clone());
        }
    }
    selector
}

/// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution` with one term.
fn affinity(requirements: &[NodeSelectorRequirement]) -> Option<Value> {
    if requirements.is_empty() {
        return None;
    }
    let expressions: Vec<Value> = requirements
        .iter()
        .map(|r| {
            let mut e = Map::new();
            e.insert("key".into(), json!(r.key));
            e.insert("operator".into(), json!(r.operator));
            if !r.values.is_empty() {
                e.insert("values".into(), json!(r.values));
            }
            Value::Object(e)
        })
        .collect();
    Some(
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}}),
    )
}

/// `implied` then the group's own tolerations, one per key and effect.
fn merged_tolerations(implied: &[Toleration], own: &[Toleration]) -> Vec<Toleration> {
    let mut out: Vec<Toleration> = Vec::new();
    for t in implied.iter().chain(own) {
        if !out.iter().any(|e| e.key == t.key && e.effect == t.effect) {
            out.push(t.clone());
        }
    }
    out
}

/// The metadata every kind shares: gkq's labels, the queue, the priority class and the user's
/// labels; the script digest, elasticity, the declared run duration and the user's
/// annotations.
fn job_meta(spec: &Spec, job: &Job, run_name: &str, script: &str) -> Value {
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
    for (k, v) in &job.annotations {
        annotations.insert(k.clone(), json!(v));
    }
    annotations.insert(
        SCRIPT_DIGEST_ANNOTATION.into(),
        json!(script_digest(script)),
    );
    if job.elastic {
        annotations.insert(ELASTIC_JOB_ANNOTATION.into(), json!("true"));
    }
    // Written on every queue, not only DWS ones: Kueue copies it only into the
    // ProvisioningRequests it creates (elsewhere nothing reads it), and it is where the declared
    // run time lives on the live object, for the plan's reclaim of flex-start VMs and for the
    // local target's run length.
    if let Some(secs) = job
        .duration
        .as_deref()
        .and_then(|d| crate::vocab::duration::parse_whole_seconds(d).ok())
    {
        annotations.insert(MAX_RUN_DURATION_ANNOTATION.into(), json!(secs.to_string()));
    }
    meta["annotations"] = Value::Object(annotations);
    meta
}

/// One run of a job, as rendered: the spec, the job, the run's name, whether its queue can use
/// DWS, and the script's text.
pub struct Run<'a> {
    pub spec: &'a Spec,
    pub job: &'a Job,
    pub name: &'a str,
    pub queue_has_dws: bool,
    pub script: &'a str,
}

impl Run<'_> {
    fn meta(&self) -> Value {
        job_meta(self.spec, self.job, self.name, self.script)
    }
}

/// The job object of one run, of the job's kind.
pub fn job_object(run: &Run<'_>) -> Value {
    match run.job.kind {
        JobKind::RayJob => ray_job(run),
        JobKind::JobSet => job_set(run),
        JobKind::Job => batch_job(run),
    }
}

/// The pod template of a JobSet replicated job or a batch Job: one `main` container running
/// the entrypoint with the script mounted, `restartPolicy: Never`.
fn plain_pod_template(job: &Job, group: &PodGroupRef<'_>, implied: &[Toleration]) -> Value {
    let mut pod = Map::new();
    pod.insert("restartPolicy".into(), json!("Never"));
    let selector = node_selector(group);
    if !selector.is_empty() {
        pod.insert("nodeSelector".into(), json!(selector));
    }
    if let Some(a) = affinity(group.required_node_affinity) {
        pod.insert("affinity".into(), a);
    }
    let implied: &[Toleration] = if group.accelerator.is_some() {
        implied
    } else {
        &[]
    };
    let tolerations = merged_tolerations(implied, group.tolerations);
    if !tolerations.is_empty() {
        pod.insert(
            "tolerations".into(),
            Value::Array(tolerations.iter().map(toleration_json).collect()),
        );
    }
    pod.insert(
        "containers".into(),
        json!([{
            "name": "main",
            "image": job.image,
            "command": ["sh", "-c", entrypoint(job)],
            "resources": resources(group),
            "volumeMounts": mounts(),
        }]),
    );
    pod.insert("volumes".into(), volume(&config_map_name(job)));
    json!({"spec": pod})
}

/// A JobSet: one replicated job per `replicatedJobs[]` entry, `replicas` Jobs of `hosts` pods
/// each; a TPU replicated job gets one node pool per Job (JobSet's exclusive topology).
fn job_set(run: &Run<'_>) -> Value {
    let job = run.job;
    let implied = implied_tolerations(job, run.queue_has_dws);
    let replicated: Vec<Value> = pod_groups(job)
        .iter()
        .map(|g| {
            let mut template = Map::new();
            if g.accelerator.is_some_and(is_tpu) {
                template.insert(
                    "metadata".into(),
                    json!({"annotations": {EXCLUSIVE_TOPOLOGY_ANNOTATION: NODE_POOL_LABEL}}),
                );
            }
            template.insert(
                "spec".into(),
                json!({
                    "parallelism": g.hosts,
                    "completions": g.hosts,
                    "backoffLimit": 0,
                    "template": plain_pod_template(job, g, &implied),
                }),
            );
            json!({"name": g.name, "replicas": g.replicas, "template": template})
        })
        .collect();
    json!({
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": run.meta(),
        "spec": {"replicatedJobs": replicated},
    })
}

/// A batch Job: `parallelism` pods at a time, `completions` in all.
fn batch_job(run: &Run<'_>) -> Value {
    let job = run.job;
    let implied = implied_tolerations(job, run.queue_has_dws);
    let groups = pod_groups(job);
    let template = groups
        .first()
        .map(|g| plain_pod_template(job, g, &implied))
        .unwrap_or_else(|| json!({"spec": {"containers": []}}));
    let parallelism = job.parallelism.unwrap_or(1);
    let mut spec_map = Map::new();
    spec_map.insert("parallelism".into(), json!(parallelism));
    spec_map.insert(
        "completions".into(),
        json!(job.completions.unwrap_or(parallelism)),
    );
    spec_map.insert("backoffLimit".into(), json!(0));
    spec_map.insert("template".into(), template);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": run.meta(),
        "spec": spec_map,
    })
}

fn ray_job(run: &Run<'_>) -> Value {
    let job = run.job;
    let meta = run.meta();
    let vol = volume(&config_map_name(job));
    let groups = pod_groups(job);

    let mut head_spec = Map::new();
    if let Some(head) = groups.iter().find(|g| g.section == "head") {
        let selector = node_selector(head);
        if !selector.is_empty() {
            head_spec.insert("nodeSelector".into(), json!(selector));
        }
        if let Some(a) = affinity(head.required_node_affinity) {
            head_spec.insert("affinity".into(), a);
        }
        if !head.tolerations.is_empty() {
            head_spec.insert(
                "tolerations".into(),
                Value::Array(head.tolerations.iter().map(toleration_json).collect()),
            );
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
                "resources": resources(head),
                "volumeMounts": mounts(),
            }]),
        );
        head_spec.insert("volumes".into(), vol.clone());
    }

    let implied = implied_tolerations(job, run.queue_has_dws);
    let workers: Vec<Value> = job
        .workers
        .iter()
        .zip(groups.iter().filter(|g| g.section == "workers"))
        .map(|(w, g)| {
            let tolerations = merged_tolerations(&implied, g.tolerations);
            let selector = node_selector(g);
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
                    "resources": resources(g),
                    "volumeMounts": mounts(),
                }]),
            );
            pod.insert("volumes".into(), vol.clone());
            if !selector.is_empty() {
                pod.insert("nodeSelector".into(), json!(selector));
            }
            if let Some(a) = affinity(g.required_node_affinity) {
                pod.insert("affinity".into(), a);
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
    spec_map.insert("entrypoint".into(), json!(entrypoint(job)));
    if let Some(mode) = job.submission_mode {
        spec_map.insert("submissionMode".into(), json!(mode.as_str()));
    }
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

/// Whether `object` is a job Kueue queues: a RayJob, JobSet or batch Job with a queue label.
/// Such jobs are submitted one after another in the spec's order, each after Kueue decided on
/// the one before (`plan` orders and predicts them so, `apply` waits so); Kueue gives the
/// earlier one Plan A.
pub fn queued_by_kueue(object: &Value) -> bool {
    crate::addr::ResourceAddr::from_object(object).is_ok_and(|addr| addr.kind.is_run())
        && object
            .at("/metadata/labels")
            .and_then(|labels| labels.field(crate::vocab::labels::QUEUE_NAME_LABEL))
            .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PendingWorkload;
    use crate::spec::types::{Cluster, PodGroup, ReplicatedJob};

    fn q(text: &str) -> Quantity {
        serde_json::from_value(json!(text)).unwrap()
    }

    fn spec() -> Spec {
        Spec {
            cluster: Cluster {
                name: "c".into(),
                ..Cluster::default()
            },
            ..Spec::default()
        }
    }

    fn pods(cpu: &str) -> PodGroup {
        PodGroup {
            cpu: q(cpu),
            memory: q("1Gi"),
            ..PodGroup::default()
        }
    }

    #[test]
    fn a_batch_job_has_its_parallelism_completions_limits_and_affinity() {
        let job = Job {
            name: "prep".into(),
            kind: JobKind::Job,
            namespace: "ml".into(),
            queue: "lq".into(),
            script: "prep.py".into(),
            image: "python:3.12".into(),
            parallelism: Some(4),
            completions: Some(2),
            pods: Some(PodGroup {
                limits: Some([("memory".to_string(), q("2Gi"))].into()),
                required_node_affinity: vec![NodeSelectorRequirement {
                    key: NODE_POOL_LABEL.into(),
                    operator: "NotIn".into(),
                    values: vec!["dws-pool".into()],
                }],
                ..pods("2")
            }),
            priority_class: Some("low".into()),
            annotations: [("team".to_string(), "a".to_string())].into(),
            ..Job::default()
        };
        let spec = spec();
        let object = job_object(&Run {
            spec: &spec,
            job: &job,
            name: "prep",
            queue_has_dws: false,
            script: "print(1)",
        });
        assert_eq!(object["kind"], "Job");
        assert_eq!(object["spec"]["parallelism"], 4);
        assert_eq!(object["spec"]["completions"], 2);
        let pod = &object["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["resources"],
            json!({"limits": {"memory": "2Gi"}, "requests": {"cpu": "2", "memory": "1Gi"}})
        );
        assert_eq!(
            pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0]["operator"],
            "NotIn"
        );
        assert_eq!(object["metadata"]["annotations"]["team"], "a");
        assert_eq!(object["metadata"]["labels"][PRIORITY_CLASS_LABEL], "low");
        // Kueue counts min(parallelism, completions) pods.
        let workload = PendingWorkload::from_object(&object).unwrap();
        assert_eq!(workload.pod_sets[0].name, "main");
        assert_eq!(workload.pod_sets[0].count, 2);
    }

    #[test]
    fn a_job_set_slice_is_exclusive_per_node_pool_and_a_cpu_job_tolerates_nothing() {
        let tpu = PodGroup {
            accelerator: Some(Accelerator {
                kind: "tpu-v6e-slice".into(),
                topology: Some("4x4".into()),
                chips: 4,
                resource: None,
            }),
            ..pods("8")
        };
        let job = Job {
            name: "train".into(),
            kind: JobKind::JobSet,
            queue: "lq".into(),
            script: "train.py".into(),
            image: "img".into(),
            replicated_jobs: vec![
                ReplicatedJob {
                    name: "coordinator".into(),
                    replicas: 1,
                    hosts: 1,
                    pods: pods("1"),
                },
                ReplicatedJob {
                    name: "workers".into(),
                    replicas: 2,
                    hosts: 4,
                    pods: tpu,
                },
            ],
            ..Job::default()
        };
        let spec = spec();
        let object = job_object(&Run {
            spec: &spec,
            job: &job,
            name: "train-1",
            queue_has_dws: true,
            script: "",
        });
        let rjs = &object["spec"]["replicatedJobs"];
        assert!(rjs[0]["template"].get("metadata").is_none());
        assert!(
            rjs[0]["template"]["spec"]["template"]["spec"]
                .get("tolerations")
                .is_none()
        );
        assert_eq!(
            rjs[1]["template"]["metadata"]["annotations"][EXCLUSIVE_TOPOLOGY_ANNOTATION],
            NODE_POOL_LABEL
        );
        let workers = &rjs[1]["template"]["spec"];
        assert_eq!(
            (&workers["parallelism"], &workers["completions"]),
            (&json!(4), &json!(4))
        );
        let selector = &workers["template"]["spec"]["nodeSelector"];
        assert_eq!(selector[TPU_ACCELERATOR_LABEL], "tpu-v6e-slice");
        assert_eq!(selector[TPU_TOPOLOGY_LABEL], "4x4");
        let tolerations: Vec<&str> = workers["template"]["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(tolerations, ["google.com/tpu", QUEUED_TAINT]);
        let workload = PendingWorkload::from_object(&object).unwrap();
        let shape: Vec<(&str, i32)> = workload
            .pod_sets
            .iter()
            .map(|p| (p.name.as_str(), p.count))
            .collect();
        assert_eq!(shape, [("coordinator", 1), ("workers", 8)]);
    }

    /// A declared `duration` is on the job whatever its queue: on a queue without DWS (a
    /// ComputeClass ladder, flex-start VMs, on-demand) it was dropped, so the local target ran
    /// such jobs for `GKQ_LOCAL_RUN` instead of their duration.
    #[test]
    fn a_declared_duration_is_annotated_on_queues_with_and_without_dws() {
        let job = Job {
            name: "train".into(),
            queue: "lq".into(),
            script: "train.py".into(),
            duration: Some("6h".into()),
            ..Job::default()
        };
        let spec = spec();
        for queue_has_dws in [false, true] {
            let object = job_object(&Run {
                spec: &spec,
                job: &job,
                name: "train",
                queue_has_dws,
                script: "",
            });
            assert_eq!(
                object["metadata"]["annotations"][MAX_RUN_DURATION_ANNOTATION], "21600",
                "queue_has_dws: {queue_has_dws}"
            );
        }
        let without = Job {
            duration: None,
            ..job
        };
        let object = job_object(&Run {
            spec: &spec,
            job: &without,
            name: "train",
            queue_has_dws: true,
            script: "",
        });
        assert!(
            object["metadata"]["annotations"]
                .get(MAX_RUN_DURATION_ANNOTATION)
                .is_none()
        );
    }

    #[test]
    fn a_head_only_ray_job_in_http_mode_is_one_head_podset() {
        let job = Job {
            name: "probe".into(),
            queue: "lq".into(),
            script: "probe.py".into(),
            image: "rayproject/ray:2.53.0-py311".into(),
            head: Some(crate::spec::types::HeadGroup {
                cpu: q("2"),
                memory: q("4Gi"),
                ..Default::default()
            }),
            submission_mode: Some(crate::spec::types::SubmissionMode::HttpMode),
            shutdown_after_job_finishes: true,
            ..Job::default()
        };
        let spec = spec();
        let object = job_object(&Run {
            spec: &spec,
            job: &job,
            name: "probe",
            queue_has_dws: false,
            script: "",
        });
        assert_eq!(object["spec"]["submissionMode"], "HTTPMode");
        assert_eq!(
            object["spec"]["rayClusterSpec"]["workerGroupSpecs"],
            json!([])
        );
        let workload = PendingWorkload::from_object(&object).unwrap();
        let names: Vec<&str> = workload.pod_sets.iter().map(|p| p.name.as_str()).collect();
        // No worker group, and no submitter pod in HTTPMode.
        assert_eq!(names, ["head"]);
    }
}
