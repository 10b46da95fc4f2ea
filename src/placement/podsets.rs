//! Jobs to Kueue podsets: the ONE place that knows how Kueue turns a RayJob, a JobSet, a batch
//! Job or a Workload into podsets, how it computes their requests, and which podsets join a
//! ProvisioningRequest.
//!
//! Sources (Kueue v0.19.2): `pkg/controller/jobs/rayjob/rayjob_controller.go` (`PodSets`,
//! `addSubmitterPodSet`, `addSidecarSubmitterToHeadPodSet`), `pkg/controller/jobs/raycluster/
//! common.go` (`BuildPodSets`, `effectiveWorkerCount`, `ValidateCreate`),
//! `pkg/controller/jobs/job/job_controller.go` (`PodSets`, `podsCount`),
//! `pkg/controller/jobs/jobset/jobset_controller.go` (`PodSets`, `PodsCountPerReplica`),
//! `pkg/controller/admissionchecks/provisioning/controller.go` (`requiredPodSets`, `podUses`),
//! `apis/kueue/v1beta2/workload_types.go` (`NewPodSetReference`, `podSets` at most 18),
//! `pkg/workload/resources.go`
//! (`UseLimitsAsMissingRequestsInPod`, `ValidateResources`) and
//! `k8s.io/component-helpers/resource` (`PodRequests`).

mod merge_keys;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::reader::{Context, Field, ParseErrors, describe};
use super::selectors::{NodeSelectorTerm, Operator, Requirement, Toleration};
use super::time::Timestamp;
use crate::vocab::labels::{
    ELASTIC_JOB_ANNOTATION, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, RAY_FT_ENABLED_ANNOTATION,
};
use crate::vocab::quantity::{Format, Quantity};

/// Kueue's maximum number of podsets in a Workload (`jobframework.MaxPodSets`).
pub const MAX_POD_SETS: usize = 18;

/// One podset as Kueue builds it: a name, a pod count and the scheduling-relevant parts of the
/// pod template.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSet {
    pub name: String,
    pub count: i32,
    /// Effective requests of one pod (limits filling missing requests, init containers,
    /// sidecars, pod-level resources and overhead), before multiplying by `count`.
    pub requests: BTreeMap<String, Quantity>,
    pub node_selector: BTreeMap<String, String>,
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`, when set.
    pub required_node_affinity: Option<Vec<NodeSelectorTerm>>,
    pub tolerations: Vec<Toleration>,
    pub priority_class_name: Option<String>,
    /// Kueue's `ValidateResources` errors (requests above limits); such a workload is
    /// inadmissible.
    pub invalid_resources: Vec<String>,
    /// The resource names the containers and init containers of the template list in their
    /// requests or limits, zero or not (Kueue's ProvisioningRequest controller compares them
    /// with a config's `managedResources`: `podUses`).
    pub declared_resources: BTreeSet<String>,
    /// What Kueue's ProvisioningRequest controller compares to merge two podsets.
    pub merge_keys: MergeKeys,
}

/// What Kueue v0.19.2's ProvisioningRequest controller compares to merge two podsets into one
/// PodSet of a request (`canMergePodSets`, `arePodSetsSimilar` in
/// `pkg/controller/admissionchecks/provisioning/controller.go`): the whole pod template, or the
/// fields that make its scheduling requirements (each container's and init container's
/// requests, in order; pod-level resources, node selector, tolerations, affinity, resource
/// claims). Each key is canonical JSON (object keys sorted, request quantities canonical), so
/// equal keys mean Kueue's semantic equality.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeKeys {
    pub template: String,
    pub scheduling: String,
}

impl MergeKeys {
    fn read(template: Option<&Value>) -> MergeKeys {
        let Some(template) = template else {
            return MergeKeys::default();
        };
        let (template, scheduling) = merge_keys::merge_keys(template);
        MergeKeys {
            template,
            scheduling,
        }
    }
}

/// A ProvisioningRequestConfig's `podSetMergePolicy` (Kueue v0.19.2,
/// `apis/kueue/v1beta2/provisioningrequestconfig_types.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSetMergePolicy {
    /// Podsets with identical pod templates merge.
    IdenticalPodTemplates,
    /// Podsets with identical scheduling requirements ([`MergeKeys::scheduling`]) merge.
    IdenticalWorkloadSchedulingRequirements,
}

impl PodSetMergePolicy {
    pub const ALL: [PodSetMergePolicy; 2] = [
        PodSetMergePolicy::IdenticalPodTemplates,
        PodSetMergePolicy::IdenticalWorkloadSchedulingRequirements,
    ];

    pub fn parse(text: &str) -> Option<PodSetMergePolicy> {
        Self::ALL.into_iter().find(|p| p.as_str() == text)
    }

    /// Kueue's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PodSetMergePolicy::IdenticalPodTemplates => "IdenticalPodTemplates",
            PodSetMergePolicy::IdenticalWorkloadSchedulingRequirements => {
                "IdenticalWorkloadSchedulingRequirements"
            }
        }
    }

    fn merges(self, first: &PodSet, other: &PodSet) -> bool {
        match self {
            PodSetMergePolicy::IdenticalPodTemplates => {
                first.merge_keys.template == other.merge_keys.template
            }
            PodSetMergePolicy::IdenticalWorkloadSchedulingRequirements => {
                first.merge_keys.scheduling == other.merge_keys.scheduling
            }
        }
    }
}

/// One PodSet of a ProvisioningRequest: the podsets merged into it (the first names its pod
/// template) and their pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPodSet {
    pub podsets: Vec<String>,
    pub count: i32,
}

/// The PodSets Kueue puts into the ProvisioningRequest of a config with `managed` resources and
/// merge `policy` (`mergePodSets`): the podsets that join ([`PodSet::joins_provisioning_request`]),
/// in order, each added to the first PodSet so far whose first podset the policy merges it
/// with, else a PodSet of its own. Without a policy nothing merges.
pub fn request_pod_sets(
    pod_sets: &[PodSet],
    managed: &[String],
    policy: Option<PodSetMergePolicy>,
) -> Vec<RequestPodSet> {
    let mut merged: Vec<(&PodSet, RequestPodSet)> = Vec::new();
    for pod_set in pod_sets
        .iter()
        .filter(|ps| ps.joins_provisioning_request(managed))
    {
        let into = policy.and_then(|policy| {
            merged
                .iter_mut()
                .find(|(first, _)| policy.merges(first, pod_set))
        });
        match into {
            Some((_, request)) => {
                request.podsets.push(pod_set.name.clone());
                request.count = request.count.saturating_add(pod_set.count);
            }
            None => merged.push((
                pod_set,
                RequestPodSet {
                    podsets: vec![pod_set.name.clone()],
                    count: pod_set.count,
                },
            )),
        }
    }
    merged.into_iter().map(|(_, request)| request).collect()
}

impl PodSet {
    /// Whether Kueue puts this podset into the ProvisioningRequest of a check whose config
    /// lists `managed` resources: it has pods, and either the list is empty or a container or
    /// init container of its template names one of them in requests or limits (`requiredPodSets`).
    pub fn joins_provisioning_request(&self, managed: &[String]) -> bool {
        self.count > 0
            && (managed.is_empty() || managed.iter().any(|r| self.declared_resources.contains(r)))
    }
}

/// Where a workload's priority comes from (`jobframework.ExtractPriority`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrioritySource {
    /// The `kueue.x-k8s.io/priority-class` label: a WorkloadPriorityClass name.
    WorkloadPriorityClass(String),
    /// Already resolved (a Workload's `spec.priority`).
    Value(i32),
    /// A Workload's `spec.priority` (`value`) taken from the WorkloadPriorityClass its
    /// `spec.priorityClassRef` names: Kueue rewrites the value when the class's value changes,
    /// and keeps it when the class is gone (`workloadpriorityclass_controller.go`).
    WorkloadPriorityClassOr { class: String, value: i32 },
    /// The first podset `priorityClassName`, else the cluster's default PriorityClass, else 0.
    PodSets,
}

/// A job that waits for (or is about to ask for) a quota reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingWorkload {
    /// `RayJob`, `Job` or `Workload`.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The LocalQueue; `None` means Kueue does not manage the job.
    pub queue_name: Option<String>,
    pub priority: PrioritySource,
    /// When Kueue's queues order it after priority ([`queue_order_time`]): the creation time,
    /// or for a Workload evicted by the PodsReady timeout or an admission check, the eviction's;
    /// `None` for jobs not created yet (they queue last, in the order given).
    pub queued_at: Option<Timestamp>,
    /// `metadata.uid`: Kueue's last tie-break between Workloads created in the same second.
    pub uid: Option<String>,
    pub pod_sets: Vec<PodSet>,
    /// Why Kueue's admission webhook would refuse to create this job, if it would.
    pub rejected: Option<String>,
    /// For a Workload: the `(kind, name)` of the job that owns it.
    pub owner: Option<(String, String)>,
    /// For a Workload evicted because a queue was stopped (`Requeued=False`, reason
    /// `ClusterQueueStopped` or `LocalQueueStopped`): which queue. Kueue keeps it out of the
    /// queue until that queue runs again, and then requeues it (docs/kueue.md 1g).
    pub stopped_by: Option<StoppedQueue>,
}

/// The kind of queue whose stop evicted a Workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoppedQueue {
    ClusterQueue,
    LocalQueue,
}

impl StoppedQueue {
    /// From a Workload's `Requeued` condition: `False` with reason `ClusterQueueStopped` or
    /// `LocalQueueStopped` (Kueue v0.19.2 `pkg/controller/jobframework/reconciler.go` sets it
    /// so when the job of an evicted Workload has stopped).
    fn of_requeued(status: &Field<'_, '_>) -> Option<StoppedQueue> {
        let items = status.get("conditions").items();
        let requeued = items
            .iter()
            .find(|c| c.get("type").str() == Some("Requeued"))?;
        if requeued.get("status").str() != Some("False") {
            return None;
        }
        match requeued.get("reason").str() {
            Some("ClusterQueueStopped") => Some(StoppedQueue::ClusterQueue),
            Some("LocalQueueStopped") => Some(StoppedQueue::LocalQueue),
            _ => None,
        }
    }
}

impl PendingWorkload {
    /// Whether a job object (a RayJob, JobSet or Job) can have a queue: not when its
    /// `kueue.x-k8s.io/queue-name` label is absent or empty, where [`Self::from_object`] gives it
    /// no `queue_name` (`queue_from_labels`: Kueue ignores such a job). Lets a check that only
    /// concerns queued jobs skip building the podsets of every other job.
    pub fn job_may_name_a_queue(object: &Value) -> bool {
        let label = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(|labels| labels.get(QUEUE_NAME_LABEL));
        match label {
            None => false,
            Some(Value::String(queue)) => !queue.is_empty(),
            // Not a string: `from_object` decides (it reports it).
            Some(_) => true,
        }
    }

    /// Builds the workload Kueue would create for a `ray.io/v1 RayJob`, a
    /// `jobset.x-k8s.io JobSet`, a `batch/v1 Job`, or reads a `kueue.x-k8s.io Workload` as it is.
    pub fn from_object(object: &Value) -> Result<PendingWorkload, ParseErrors> {
        let ctx = Context::new(describe(object));
        let root = ctx.root(object);
        let api_version = root.get("apiVersion").str().unwrap_or_default();
        let kind = root.get("kind").str().unwrap_or_default();
        let group = api_version.split('/').next().unwrap_or_default();
        let workload = match (group, kind) {
            ("ray.io", "RayJob") => Some(from_ray_job(&root)),
            ("batch", "Job") => Some(from_batch_job(&root)),
            ("jobset.x-k8s.io", "JobSet") => Some(from_job_set(&root)),
            ("kueue.x-k8s.io", "Workload") => Some(from_workload(&root)),
            _ => {
                ctx.report(
                    "",
                    format!(
                        "cannot build podsets for {api_version} {kind}; expected a ray.io RayJob, a jobset.x-k8s.io JobSet, a batch Job or a kueue.x-k8s.io Workload"
                    ),
                );
                None
            }
        };
        let errors = ctx.into_errors();
        match workload {
            Some(workload) if errors.is_empty() => Ok(workload),
            _ => Err(ParseErrors(errors)),
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

struct Metadata {
    namespace: String,
    name: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    created: Option<Timestamp>,
    uid: Option<String>,
}

fn read_metadata(root: &Field<'_, '_>) -> Metadata {
    let metadata = root.get("metadata");
    let name = metadata.get("name").string().unwrap_or_default();
    if name.is_empty() {
        metadata.get("name").report("a name is required");
    }
    let created_field = metadata.get("creationTimestamp");
    let created = created_field.str().and_then(|text| {
        let parsed = Timestamp::parse(text);
        if parsed.is_none() {
            created_field.report(format!("{text:?} is not an RFC 3339 timestamp"));
        }
        parsed
    });
    Metadata {
        namespace: metadata
            .get("namespace")
            .string()
            .unwrap_or_else(|| "default".to_string()),
        name,
        labels: metadata.get("labels").string_map(),
        annotations: metadata.get("annotations").string_map(),
        created,
        uid: metadata.get("uid").string(),
    }
}

fn priority_from_labels(labels: &BTreeMap<String, String>) -> PrioritySource {
    match labels.get(PRIORITY_CLASS_LABEL) {
        Some(name) if !name.is_empty() => PrioritySource::WorkloadPriorityClass(name.clone()),
        _ => PrioritySource::PodSets,
    }
}

fn queue_from_labels(labels: &BTreeMap<String, String>) -> Option<String> {
    labels
        .get(QUEUE_NAME_LABEL)
        .filter(|q| !q.is_empty())
        .cloned()
}

fn resources_of(
    requests: &[(&str, &str)],
    limits: &[(&str, &str)],
) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let to_map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .filter_map(|(name, value)| Some((name.to_string(), Quantity::parse(value).ok()?)))
            .collect()
    };
    (to_map(requests), to_map(limits))
}

/// KubeRay's autoscaler sidecar when `autoscalerOptions.resources` is not set.
fn default_autoscaler_resources() -> Container {
    container_of(AUTOSCALER_RESOURCES)
}

/// KubeRay's default submitter resources (used for the K8sJobMode submitter pod and the
/// SidecarMode submitter container).
fn default_submitter_resources() -> Container {
    container_of(SUBMITTER_RESOURCES)
}

fn container_of((requests, limits): Resources) -> Container {
    let (requests, limits) = resources_of(requests, limits);
    Container {
        requests,
        limits,
        restart_always: false,
    }
}

/// KubeRay's Redis cleanup job requests, max-merged into the head Ray container when GCS
/// fault tolerance is on.
fn redis_cleanup_requests() -> BTreeMap<String, Quantity> {
    resources_of(REDIS_CLEANUP_REQUESTS, &[]).0
}

/// A container's `(requests, limits)`.
type Resources = (
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
);

/// KubeRay's autoscaler sidecar when `autoscalerOptions.resources` is not set.
const AUTOSCALER_RESOURCES: Resources = (
    &[("cpu", "500m"), ("memory", "512Mi")],
    &[("cpu", "500m"), ("memory", "512Mi")],
);

/// KubeRay's default submitter resources (the K8sJobMode submitter pod and the SidecarMode
/// submitter container).
const SUBMITTER_RESOURCES: Resources = (
    &[("cpu", "500m"), ("memory", "200Mi")],
    &[("cpu", "1"), ("memory", "1Gi")],
);

/// KubeRay's Redis cleanup job requests, max-merged into the head Ray container when GCS fault
/// tolerance is on.
const REDIS_CLEANUP_REQUESTS: &[(&str, &str)] = &[("cpu", "200m"), ("memory", "256Mi")];

/// GCS fault tolerance: the `ray.io/ft-enabled` annotation or `gcsFaultToleranceOptions`.
fn gcs_fault_tolerance(annotation: Option<&str>, has_options: bool) -> bool {
    annotation.is_some_and(|v| v.eq_ignore_ascii_case("true")) || has_options
}

/// The pods of a worker group: `replicas × numOfHosts` for multi-host groups.
fn worker_pods(replicas: i64, hosts: i64) -> i64 {
    if hosts > 1 {
        replicas.saturating_mul(hosts)
    } else {
        replicas
    }
}

fn resources_json((requests, limits): Resources) -> Value {
    let map = |pairs: &[(&str, &str)]| -> serde_json::Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect()
    };
    serde_json::json!({"requests": map(requests), "limits": map(limits)})
}

fn submitter_container(image: &Value) -> Value {
    serde_json::json!({"name": "ray-job-submitter", "image": image,
        "resources": resources_json(SUBMITTER_RESOURCES)})
}

/// The podsets Kueue builds for a stored RayJob (defaults applied), as its Workload's
/// `spec.podSets` with their pod templates: the podsets, counts and KubeRay defaults
/// [`PendingWorkload::from_object`] reads from the same job (`head`, plus the autoscaler
/// container with in-tree autoscaling, the submitter container in SidecarMode, the Redis cleanup
/// requests with GCS fault tolerance; one podset per worker group; `submitter` in K8sJobMode).
pub fn ray_job_pod_set_templates(job: &Value) -> Vec<Value> {
    use serde_json::json;
    let spec = &job["spec"];
    let cluster = &spec["rayClusterSpec"];
    let mut head = cluster
        .pointer("/headGroupSpec/template")
        .cloned()
        .unwrap_or_else(|| json!({"spec": {"containers": []}}));
    let image = head
        .pointer("/spec/containers/0/image")
        .cloned()
        .unwrap_or(Value::Null);
    let ft = gcs_fault_tolerance(
        job["metadata"]["annotations"][RAY_FT_ENABLED_ANNOTATION].as_str(),
        cluster.get("gcsFaultToleranceOptions").is_some(),
    );
    if ft
        && let Some(requests) = head
            .pointer_mut("/spec/containers/0/resources/requests")
            .and_then(Value::as_object_mut)
    {
        for (name, minimum) in REDIS_CLEANUP_REQUESTS {
            let larger = |v: &Value| match (Quantity::from_json(v), Quantity::parse(minimum)) {
                (Ok(x), Ok(y)) if y > x => json!(minimum),
                _ => v.clone(),
            };
            let merged = requests.get(*name).map_or_else(|| json!(minimum), larger);
            requests.insert(name.to_string(), merged);
        }
    }
    if let Some(containers) = head
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        if cluster["enableInTreeAutoscaling"] == true {
            let resources = cluster
                .pointer("/autoscalerOptions/resources")
                .cloned()
                .unwrap_or_else(|| resources_json(AUTOSCALER_RESOURCES));
            containers.push(json!({"name": "autoscaler", "image": image, "resources": resources}));
        }
        if spec["submissionMode"] == "SidecarMode" {
            containers.push(submitter_container(&image));
        }
    }
    let mut pod_sets = vec![json!({"name": "head", "count": 1, "template": head})];
    for group in cluster["workerGroupSpecs"].as_array().into_iter().flatten() {
        let count = worker_pods(
            group["replicas"].as_i64().unwrap_or(0),
            group["numOfHosts"].as_i64().unwrap_or(1),
        );
        pod_sets.push(json!({
            "name": group["groupName"].as_str().unwrap_or_default().to_lowercase(),
            "count": count,
            "template": group.get("template").cloned().unwrap_or_else(|| json!({})),
        }));
    }
    if spec["submissionMode"].as_str().unwrap_or("K8sJobMode") == "K8sJobMode" {
        let template = spec.get("submitterPodTemplate").cloned().unwrap_or_else(|| {
            json!({"spec": {"restartPolicy": "Never", "containers": [submitter_container(&image)]}})
        });
        pod_sets.push(json!({"name": "submitter", "count": 1, "template": template}));
    }
    pod_sets
}

/// The podsets Kueue builds for a stored job of any kind it manages here, as its Workload's
/// `spec.podSets` (`name`, `count`, `template`): a RayJob's as [`ray_job_pod_set_templates`];
/// a JobSet's one per replicated job with the Job's pod template; a batch Job's `main` with its
/// pod template. Names and counts are [`PendingWorkload::from_object`]'s, so the Workload and
/// the prediction cannot disagree. `None` for another kind or an unreadable job.
pub fn pod_set_templates(job: &Value) -> Option<Vec<Value>> {
    use serde_json::json;
    let templates: Vec<Value> = match job["kind"].as_str()? {
        "RayJob" => return Some(ray_job_pod_set_templates(job)),
        "JobSet" => job
            .pointer("/spec/replicatedJobs")?
            .as_array()?
            .iter()
            .map(|rj| {
                rj.pointer("/template/spec/template")
                    .cloned()
                    .unwrap_or_else(|| json!({}))
            })
            .collect(),
        "Job" => vec![
            job.pointer("/spec/template")
                .cloned()
                .unwrap_or_else(|| json!({})),
        ],
        _ => return None,
    };
    let workload = PendingWorkload::from_object(job).ok()?;
    Some(
        workload
            .pod_sets
            .iter()
            .zip(templates)
            .map(|(ps, template)| json!({"name": ps.name, "count": ps.count, "template": template}))
            .collect(),
    )
}

fn from_ray_job(root: &Field<'_, '_>) -> PendingWorkload {
    let meta = read_metadata(root);
    let spec = root.get("spec");
    let mut rejected = Vec::new();

    let cluster_selector = spec.get("clusterSelector").string_map();
    let cluster_spec = spec.get("rayClusterSpec");
    let queue_name = ray_job_queue(
        &meta,
        &spec,
        &cluster_selector,
        &cluster_spec,
        &mut rejected,
    );

    let submission_mode = spec
        .get("submissionMode")
        .string()
        .unwrap_or_else(|| "K8sJobMode".to_string());
    let autoscaling = cluster_spec
        .get("enableInTreeAutoscaling")
        .bool()
        .unwrap_or(false);
    let elastic = meta
        .annotations
        .get(ELASTIC_JOB_ANNOTATION)
        .is_some_and(|v| v == "true");
    if queue_name.is_some() && autoscaling && !elastic {
        rejected.push(format!(
            "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use autoscaling when workload slicing is enabled (annotation {ELASTIC_JOB_ANNOTATION}: \"true\")"
        ));
    }

    let mut pod_sets = vec![ray_head(
        &meta,
        &cluster_spec,
        autoscaling,
        &submission_mode,
    )];
    pod_sets.extend(ray_workers(
        &cluster_spec,
        queue_name.is_some(),
        &mut rejected,
    ));

    if submission_mode == "K8sJobMode" {
        let submitter_template = spec.get("submitterPodTemplate");
        let template = if submitter_template.is_present() {
            PodTemplate::read(&submitter_template)
        } else {
            PodTemplate {
                containers: vec![default_submitter_resources()],
                ..PodTemplate::default()
            }
        };
        pod_sets.push(template.into_pod_set("submitter".to_string(), 1));
    }

    finish(meta, "RayJob", queue_name, pod_sets, rejected)
}

/// The LocalQueue of a RayJob, and why Kueue rejects it (added to `rejected`): a job Kueue
/// manages brings its own cluster and deletes it when finished. A RayJob that only selects an
/// existing cluster is ignored by Kueue.
fn ray_job_queue(
    meta: &Metadata,
    spec: &Field<'_, '_>,
    cluster_selector: &BTreeMap<String, String>,
    cluster_spec: &Field<'_, '_>,
    rejected: &mut Vec<String>,
) -> Option<String> {
    let managed = queue_from_labels(&meta.labels);
    if managed.is_some() {
        if !cluster_selector.is_empty() && cluster_spec.is_present() {
            rejected.push(
                "spec.clusterSelector: a kueue managed job should not use an existing cluster"
                    .to_string(),
            );
        } else if cluster_selector.is_empty() && !cluster_spec.is_present() {
            rejected.push("spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector".to_string());
        }
        if cluster_spec.is_present()
            && cluster_selector.is_empty()
            && !spec.get("shutdownAfterJobFinishes").bool().unwrap_or(false)
        {
            rejected.push("spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the cluster after finishing".to_string());
        }
    }
    if !cluster_selector.is_empty() && !cluster_spec.is_present() {
        None
    } else {
        managed
    }
}

/// A RayJob's head pod set: the head's template, with Redis cleanup (GCS fault tolerance), the
/// autoscaler and a sidecar submitter as they apply.
fn ray_head(
    meta: &Metadata,
    cluster_spec: &Field<'_, '_>,
    autoscaling: bool,
    submission_mode: &str,
) -> PodSet {
    let head_template = cluster_spec.get("headGroupSpec").get("template");
    let mut head = PodTemplate::read(&head_template);
    let ft_enabled = gcs_fault_tolerance(
        meta.annotations
            .get(RAY_FT_ENABLED_ANNOTATION)
            .map(String::as_str),
        cluster_spec.get("gcsFaultToleranceOptions").is_present(),
    );
    if ft_enabled {
        match head.containers.first_mut() {
            Some(ray) => {
                for (name, quantity) in redis_cleanup_requests() {
                    let merged = match ray.requests.get(&name) {
                        Some(existing) => existing.max_by_value(quantity),
                        None => quantity,
                    };
                    ray.requests.insert(name, merged);
                }
            }
            None => head_template.report("cannot account for Redis cleanup resources: head pod template must include the Ray container"),
        }
    }
    if autoscaling {
        let options = cluster_spec.get("autoscalerOptions").get("resources");
        let container = if options.is_present() {
            Container::read_resources(&options, false)
        } else {
            default_autoscaler_resources()
        };
        head.containers.push(container);
    }
    if submission_mode == "SidecarMode" {
        head.containers.push(default_submitter_resources());
    }
    head.into_pod_set("head".to_string(), 1)
}

/// A RayJob's worker groups' pod sets, and why Kueue rejects a job it manages (`managed`) for
/// them (added to `rejected`).
fn ray_workers(
    cluster_spec: &Field<'_, '_>,
    managed: bool,
    rejected: &mut Vec<String>,
) -> Vec<PodSet> {
    let mut pod_sets = Vec::new();
    let worker_groups = cluster_spec.get("workerGroupSpecs").items();
    if managed && worker_groups.len() + 1 > MAX_POD_SETS {
        rejected.push(format!(
            "spec.rayClusterSpec.workerGroupSpecs: Too many: {}: must have at most {MAX_POD_SETS} items",
            worker_groups.len() + 1
        ));
    }
    for (i, group) in worker_groups.iter().enumerate() {
        let group_name = group.get("groupName").string().unwrap_or_default();
        if group_name == "head" && managed {
            rejected.push(format!(
                "spec.rayClusterSpec.workerGroupSpecs[{i}].groupName: Forbidden: \"head\" is reserved for the head group"
            ));
        }
        // The KubeRay CRD defaults `replicas` to 0 before Kueue sees the object; Kueue's own
        // fallback to 1 for a nil value therefore never applies to a stored RayJob.
        let replicas = group.get("replicas").i32().unwrap_or(0);
        let hosts = group.get("numOfHosts").i32().unwrap_or(1);
        let count = worker_pods(replicas.into(), hosts.into())
            .clamp(i32::MIN.into(), i32::MAX.into()) as i32;
        let template = PodTemplate::read(&group.get("template"));
        pod_sets.push(template.into_pod_set(group_name.to_lowercase(), count));
    }
    pod_sets
}

fn from_batch_job(root: &Field<'_, '_>) -> PendingWorkload {
    let meta = read_metadata(root);
    let spec = root.get("spec");
    let count = job_pods(&spec);
    let template = PodTemplate::read(&spec.get("template"));
    let pod_sets = vec![template.into_pod_set("main".to_string(), count)];
    let queue_name = queue_from_labels(&meta.labels);
    finish(meta, "Job", queue_name, pod_sets, Vec::new())
}

/// A Job's pods at a time: `parallelism` (1 when unset), or `completions` when smaller
/// (Kueue's `podsCount` for a Job, `PodsCountPerReplica` for a JobSet's replicated job).
fn job_pods(job_spec: &Field<'_, '_>) -> i32 {
    let parallelism = job_spec.get("parallelism").i32().unwrap_or(1);
    match job_spec.get("completions").i32() {
        Some(completions) if completions < parallelism => completions,
        _ => parallelism,
    }
}

/// The podsets of a JobSet: one per replicated job, in order, named after it in lower case,
/// of `replicas x` its Job's pods, with the Job's pod template as it is. (Kueue's JobSet webhook
/// checks no podset limit: with more than [`MAX_POD_SETS`] replicated jobs the Workload CRD
/// refuses the Workload and the JobSet stays suspended; `validate` refuses such a job.)
/// The `replicas` a JobSet's replicated job is stored with, which Kueue and the JobSet
/// controller read: the field is `omitempty` with the CRD default 1, so a missing value and a
/// written `0` both come back as 1 (docs/kueue.md 1c.3).
pub fn stored_job_set_replicas(written: Option<i64>) -> i64 {
    match written {
        None | Some(0) => 1,
        Some(replicas) => replicas,
    }
}

fn from_job_set(root: &Field<'_, '_>) -> PendingWorkload {
    let meta = read_metadata(root);
    let replicated = root.get("spec").get("replicatedJobs").items();
    let queue_name = queue_from_labels(&meta.labels);
    let pod_sets = replicated
        .iter()
        .map(|rj| {
            let name = rj.get("name").string().unwrap_or_default().to_lowercase();
            let replicas = stored_job_set_replicas(rj.get("replicas").i32().map(i64::from));
            let job_spec = rj.get("template").get("spec");
            let count = replicas
                .saturating_mul(i64::from(job_pods(&job_spec)))
                .clamp(i32::MIN.into(), i32::MAX.into()) as i32;
            PodTemplate::read(&job_spec.get("template")).into_pod_set(name, count)
        })
        .collect();
    finish(meta, "JobSet", queue_name, pod_sets, Vec::new())
}

fn from_workload(root: &Field<'_, '_>) -> PendingWorkload {
    let meta = read_metadata(root);
    let spec = root.get("spec");
    let pod_sets = spec
        .get("podSets")
        .items()
        .iter()
        .map(|ps| {
            let name = ps
                .get("name")
                .string()
                .unwrap_or_else(|| "main".to_string());
            let count = ps.get("count").i32().unwrap_or(1);
            PodTemplate::read(&ps.get("template")).into_pod_set(name, count)
        })
        .collect();
    // Kueue v1beta1 spelled the queue `queueName` too; both versions are read the same way.
    let queue_name = spec.get("queueName").string().filter(|q| !q.is_empty());
    let priority = match (spec.get("priority").i32(), priority_class_ref(&spec)) {
        (Some(value), Some(class)) => PrioritySource::WorkloadPriorityClassOr { class, value },
        (Some(value), None) => PrioritySource::Value(value),
        (None, Some(class)) => PrioritySource::WorkloadPriorityClass(class),
        (None, None) => priority_from_labels(&meta.labels),
    };
    let owner = root
        .get("metadata")
        .get("ownerReferences")
        .items()
        .first()
        .and_then(|o| Some((o.get("kind").string()?, o.get("name").string()?)));
    PendingWorkload {
        kind: "Workload".to_string(),
        namespace: meta.namespace,
        name: meta.name,
        queue_name,
        priority,
        queued_at: queue_order_time(&root.get("status"), meta.created),
        uid: meta.uid,
        pod_sets,
        rejected: None,
        owner,
        stopped_by: StoppedQueue::of_requeued(&root.get("status")),
    }
}

/// A Workload's queue-order timestamp, Kueue v0.19.2's `GetQueueOrderTimestamp`
/// (`pkg/workload/workload.go`): while `Evicted=True` with reason `PodsReadyTimeout` (the
/// requeuing timestamp `Eviction` is the default) or `AdmissionCheck`, that condition's
/// `lastTransitionTime`; else `created`. (The preempted-while-borrowing case applies only with
/// `PrioritySortingWithinCohort` off, which gkq does not predict.)
fn queue_order_time(status: &Field<'_, '_>, created: Option<Timestamp>) -> Option<Timestamp> {
    let items = status.get("conditions").items();
    let evicted = items.iter().find(|c| {
        c.get("type").str() == Some("Evicted")
            && c.get("status").str() == Some("True")
            && matches!(
                c.get("reason").str(),
                Some("PodsReadyTimeout" | "AdmissionCheck")
            )
    });
    let Some(evicted) = evicted else {
        return created;
    };
    let at = evicted.get("lastTransitionTime");
    match at.str().map(|text| (text, Timestamp::parse(text))) {
        Some((_, Some(time))) => Some(time),
        Some((text, None)) => {
            at.report(format!("{text:?} is not an RFC 3339 timestamp"));
            created
        }
        None => created,
    }
}

/// The WorkloadPriorityClass a Workload's spec names: v1beta2's `priorityClassRef` of kind
/// WorkloadPriorityClass, or v1beta1's `priorityClassName` with that `priorityClassSource`.
fn priority_class_ref(spec: &Field<'_, '_>) -> Option<String> {
    let reference = spec.get("priorityClassRef");
    if reference.is_present() {
        return (reference.get("kind").str() == Some("WorkloadPriorityClass"))
            .then(|| reference.get("name").string())
            .flatten();
    }
    (spec.get("priorityClassSource").str() == Some("kueue.x-k8s.io/workloadpriorityclass"))
        .then(|| spec.get("priorityClassName").string())
        .flatten()
}

fn finish(
    meta: Metadata,
    kind: &str,
    queue_name: Option<String>,
    mut pod_sets: Vec<PodSet>,
    rejected: Vec<String>,
) -> PendingWorkload {
    let priority = priority_from_labels(&meta.labels);
    for (i, pod_set) in pod_sets.iter_mut().enumerate() {
        for error in &mut pod_set.invalid_resources {
            *error = format!("spec.podSets[{i}].template.spec.{error}");
        }
    }
    PendingWorkload {
        kind: kind.to_string(),
        namespace: meta.namespace,
        name: meta.name,
        queue_name,
        priority,
        queued_at: meta.created,
        uid: meta.uid,
        pod_sets,
        rejected: if rejected.is_empty() {
            None
        } else {
            Some(rejected.join("; "))
        },
        owner: None,
        stopped_by: None,
    }
}

/// Requests and limits of one container.
#[derive(Debug, Clone, Default)]
struct Container {
    requests: BTreeMap<String, Quantity>,
    limits: BTreeMap<String, Quantity>,
    /// A sidecar: an init container with `restartPolicy: Always`.
    restart_always: bool,
}

impl Container {
    fn read_resources(resources: &Field<'_, '_>, restart_always: bool) -> Container {
        Container {
            requests: resources.get("requests").resource_list(),
            limits: resources.get("limits").resource_list(),
            restart_always,
        }
    }

    /// Requests with limits filling the missing ones (`UseLimitsAsMissingRequestsInPod`).
    fn effective_requests(&self) -> BTreeMap<String, Quantity> {
        let mut requests = self.requests.clone();
        for (name, limit) in &self.limits {
            requests.entry(name.clone()).or_insert(*limit);
        }
        requests
    }

    /// Resource names whose request exceeds the limit, sorted (Kueue's `GreaterKeys`).
    fn requests_above_limits(&self) -> Vec<String> {
        self.requests
            .iter()
            .filter(|(name, request)| self.limits.get(*name).is_some_and(|limit| *request > limit))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// The scheduling-relevant parts of a `PodTemplateSpec`.
#[derive(Debug, Clone, Default)]
struct PodTemplate {
    containers: Vec<Container>,
    init_containers: Vec<Container>,
    pod_level: Option<Container>,
    overhead: BTreeMap<String, Quantity>,
    node_selector: BTreeMap<String, String>,
    required_node_affinity: Option<Vec<NodeSelectorTerm>>,
    tolerations: Vec<Toleration>,
    priority_class_name: Option<String>,
    merge_keys: MergeKeys,
}

impl PodTemplate {
    fn read(template: &Field<'_, '_>) -> PodTemplate {
        let spec = template.get("spec");
        let containers = spec
            .get("containers")
            .items()
            .iter()
            .map(|c| Container::read_resources(&c.get("resources"), false))
            .collect();
        let init_containers = spec
            .get("initContainers")
            .items()
            .iter()
            .map(|c| {
                let always = c.get("restartPolicy").str() == Some("Always");
                Container::read_resources(&c.get("resources"), always)
            })
            .collect();
        let pod_resources = spec.get("resources");
        let pod_level = pod_resources
            .is_present()
            .then(|| Container::read_resources(&pod_resources, false));
        let affinity = spec
            .get("affinity")
            .get("nodeAffinity")
            .get("requiredDuringSchedulingIgnoredDuringExecution");
        let required_node_affinity = affinity.is_present().then(|| {
            affinity
                .get("nodeSelectorTerms")
                .items()
                .iter()
                .map(read_node_selector_term)
                .collect()
        });
        let tolerations = spec
            .get("tolerations")
            .items()
            .iter()
            .map(read_toleration)
            .collect();
        PodTemplate {
            containers,
            init_containers,
            pod_level,
            overhead: spec.get("overhead").resource_list(),
            node_selector: spec.get("nodeSelector").string_map(),
            required_node_affinity,
            tolerations,
            priority_class_name: spec
                .get("priorityClassName")
                .string()
                .filter(|p| !p.is_empty()),
            merge_keys: MergeKeys::read(template.value()),
        }
    }

    /// `resourcehelpers.PodRequests` after Kueue's limits-as-requests adjustment.
    fn pod_requests(&self) -> BTreeMap<String, Quantity> {
        let mut total: BTreeMap<String, Quantity> = BTreeMap::new();
        for container in &self.containers {
            add_into(&mut total, &container.effective_requests());
        }
        // Init containers run one at a time, each alongside the sidecars started before it.
        let mut sidecars: BTreeMap<String, Quantity> = BTreeMap::new();
        let mut init_peak: BTreeMap<String, Quantity> = BTreeMap::new();
        for container in &self.init_containers {
            let requests = container.effective_requests();
            let during = if container.restart_always {
                add_into(&mut total, &requests);
                add_into(&mut sidecars, &requests);
                sidecars.clone()
            } else {
                let mut during = requests;
                add_into(&mut during, &sidecars);
                during
            };
            max_into(&mut init_peak, &during);
        }
        max_into(&mut total, &init_peak);
        if let Some(pod_level) = &self.pod_level {
            // Pod-level requests replace the container sum for the resources they support.
            for (name, quantity) in pod_level.effective_requests() {
                if name == "cpu" || name == "memory" || name.starts_with("hugepages-") {
                    total.insert(name, quantity);
                }
            }
        }
        add_into(&mut total, &self.overhead);
        // Kueue floors negative requests to zero.
        for quantity in total.values_mut() {
            if quantity.is_negative() {
                *quantity = Quantity::from_units(0, Format::DecimalSI);
            }
        }
        total
    }

    /// Kueue's `ValidateResources` for this template, as paths relative to `spec`.
    fn invalid_resources(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut check = |path: String, container: &Container| {
            let names = container.requests_above_limits();
            if !names.is_empty() {
                let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
                errors.push(format!(
                    "{path}: Invalid value: [{}]: requests must not exceed its limits",
                    quoted.join(",")
                ));
            }
        };
        for (i, container) in self.init_containers.iter().enumerate() {
            check(format!("initContainers[{i}]"), container);
        }
        for (i, container) in self.containers.iter().enumerate() {
            check(format!("containers[{i}]"), container);
        }
        if let Some(pod_level) = &self.pod_level {
            check("resources".to_string(), pod_level);
        }
        errors
    }

    fn into_pod_set(self, name: String, count: i32) -> PodSet {
        let requests = self.pod_requests();
        let invalid_resources = self.invalid_resources();
        let declared_resources = self
            .containers
            .iter()
            .chain(&self.init_containers)
            .flat_map(|c| c.requests.keys().chain(c.limits.keys()))
            .cloned()
            .collect();
        PodSet {
            name,
            count,
            requests,
            node_selector: self.node_selector,
            required_node_affinity: self.required_node_affinity,
            tolerations: self.tolerations,
            priority_class_name: self.priority_class_name,
            invalid_resources,
            declared_resources,
            merge_keys: self.merge_keys,
        }
    }
}

fn add_into(total: &mut BTreeMap<String, Quantity>, extra: &BTreeMap<String, Quantity>) {
    for (name, quantity) in extra {
        let sum = match total.get(name) {
            Some(existing) => existing.saturating_add(*quantity),
            None => *quantity,
        };
        total.insert(name.clone(), sum);
    }
}

fn max_into(total: &mut BTreeMap<String, Quantity>, other: &BTreeMap<String, Quantity>) {
    for (name, quantity) in other {
        let max = match total.get(name) {
            Some(existing) => existing.max_by_value(*quantity),
            None => *quantity,
        };
        total.insert(name.clone(), max);
    }
}

pub(crate) fn read_requirement(field: &Field<'_, '_>) -> Option<Requirement> {
    let key = field.get("key").string().unwrap_or_default();
    let operator_text = field.get("operator").str().unwrap_or_default();
    let Some(operator) = Operator::parse(operator_text) else {
        field
            .get("operator")
            .report(format!("{operator_text:?} is not a valid operator"));
        return None;
    };
    let values = field
        .get("values")
        .items()
        .iter()
        .filter_map(|v| v.string())
        .collect();
    Some(Requirement {
        key,
        operator,
        values,
    })
}

fn read_node_selector_term(term: &Field<'_, '_>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: term
            .get("matchExpressions")
            .items()
            .iter()
            .filter_map(read_requirement)
            .collect(),
    }
}

pub(crate) fn read_toleration(field: &Field<'_, '_>) -> Toleration {
    Toleration {
        key: field.get("key").string().unwrap_or_default(),
        operator: field.get("operator").string().unwrap_or_default(),
        value: field.get("value").string().unwrap_or_default(),
        effect: field.get("effect").string().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    /// The shortcut agrees with the full read: a job it says cannot have a queue is one
    /// `from_object` gives no queue (or refuses); labelled ones keep their queue.
    #[test]
    fn a_job_without_a_queue_label_is_known_without_its_podsets() {
        let template = json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1"}}}]}});
        let job = |labels: Value| {
            json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "j", "namespace": "ml", "labels": labels},
                "spec": {"parallelism": 1, "template": template}})
        };
        let cases = [
            (json!({}), false, None),
            (json!({"app": "x"}), false, None),
            (json!({QUEUE_NAME_LABEL: ""}), false, None),
            (json!({QUEUE_NAME_LABEL: "q"}), true, Some("q")),
        ];
        for (labels, may, queue) in cases {
            let object = job(labels.clone());
            assert_eq!(
                PendingWorkload::job_may_name_a_queue(&object),
                may,
                "{labels}"
            );
            let read = PendingWorkload::from_object(&object).unwrap();
            assert_eq!(read.queue_name.as_deref(), queue, "{labels}");
        }
        let mut unlabelled = job(json!({}));
        unlabelled["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("labels");
        assert!(!PendingWorkload::job_may_name_a_queue(&unlabelled));
        assert_eq!(
            PendingWorkload::from_object(&unlabelled)
                .unwrap()
                .queue_name,
            None
        );
        // A label that is not a string is left to the full read.
        assert!(PendingWorkload::job_may_name_a_queue(&job(
            json!({QUEUE_NAME_LABEL: 5})
        )));
    }

    /// `mergePodSets`: without a policy every joining podset is a PodSet of its own; identical
    /// templates merge under either policy; templates that differ only outside the scheduling
    /// requirements (an env var, a label) merge only under
    /// `IdenticalWorkloadSchedulingRequirements`; requests written differently but equal
    /// (`1` and `1000m`) count as equal; a podset that does not join stays out.
    #[test]
    fn podsets_merge_into_request_pod_sets_as_the_policy_says() {
        let group = |name: &str, cpu: &str, env: &str| {
            json!({"groupName": name, "replicas": 2, "numOfHosts": 1, "template": {
                "metadata": {"labels": {"slice": env}},
                "spec": {"nodeSelector": {"pool": "tpu"}, "containers": [{"name": "w",
                    "env": [{"name": "SLICE", "value": env}],
                    "resources": {"requests": {"cpu": cpu, "google.com/tpu": "4"},
                                  "limits": {"google.com/tpu": "4"}}}]}}})
        };
        let job = |groups: Vec<Value>| {
            PendingWorkload::from_object(&json!({
                "apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "r", "namespace": "ml", "labels": {QUEUE_NAME_LABEL: "q"}},
                "spec": {"rayClusterSpec": {
                    "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h",
                        "resources": {"requests": {"cpu": "1"}}}]}}},
                    "workerGroupSpecs": groups}}
            }))
            .unwrap()
        };
        let managed = ["google.com/tpu".to_string()];
        let shape = |workload: &PendingWorkload, policy| -> Vec<(Vec<String>, i32)> {
            request_pod_sets(&workload.pod_sets, &managed, policy)
                .into_iter()
                .map(|r| (r.podsets, r.count))
                .collect()
        };
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let same = job(vec![group("a", "1", "x"), group("b", "1000m", "x")]);
        assert_eq!(shape(&same, None), [(names(&["a"]), 2), (names(&["b"]), 2)]);
        for policy in PodSetMergePolicy::ALL {
            assert_eq!(
                shape(&same, Some(policy)),
                [(names(&["a", "b"]), 4)],
                "{policy:?}"
            );
        }
        let labelled = job(vec![group("a", "1", "x"), group("b", "1", "y")]);
        assert_eq!(
            shape(&labelled, Some(PodSetMergePolicy::IdenticalPodTemplates)),
            [(names(&["a"]), 2), (names(&["b"]), 2)]
        );
        assert_eq!(
            shape(
                &labelled,
                Some(PodSetMergePolicy::IdenticalWorkloadSchedulingRequirements)
            ),
            [(names(&["a", "b"]), 4)]
        );
        let bigger = job(vec![group("a", "1", "x"), group("b", "2", "x")]);
        assert_eq!(
            shape(
                &bigger,
                Some(PodSetMergePolicy::IdenticalWorkloadSchedulingRequirements)
            ),
            [(names(&["a"]), 2), (names(&["b"]), 2)]
        );
    }

    /// Kueue orders a Workload evicted by the PodsReady timeout or an admission check by the
    /// eviction's time; any other eviction (a stopped queue, preemption) keeps its creation time.
    #[test]
    fn an_eviction_by_pods_ready_or_an_admission_check_is_the_queue_order_time() {
        let workload = |reason: &str, status: &str| {
            json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "w", "namespace": "ml", "uid": "b",
                    "creationTimestamp": "2026-03-20T03:00:00Z"},
                "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1,
                    "template": {"spec": {"containers": [{"name": "c"}]}}}]},
                "status": {"conditions": [{"type": "Evicted", "status": status,
                    "reason": reason, "lastTransitionTime": "2026-03-20T04:00:00Z"}]},
            })
        };
        let at = |text: &str| Timestamp::parse(text);
        let queued = |reason: &str, status: &str| {
            PendingWorkload::from_object(&workload(reason, status))
                .unwrap()
                .queued_at
        };
        assert_eq!(
            queued("PodsReadyTimeout", "True"),
            at("2026-03-20T04:00:00Z")
        );
        assert_eq!(queued("AdmissionCheck", "True"), at("2026-03-20T04:00:00Z"));
        assert_eq!(queued("Preempted", "True"), at("2026-03-20T03:00:00Z"));
        assert_eq!(
            queued("ClusterQueueStopped", "True"),
            at("2026-03-20T03:00:00Z")
        );
        assert_eq!(
            queued("AdmissionCheck", "False"),
            at("2026-03-20T03:00:00Z")
        );
    }

    #[test]
    fn limits_fill_missing_requests_and_init_containers_take_the_max() {
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "labels": {QUEUE_NAME_LABEL: "q"}},
            "spec": {"parallelism": 3, "completions": 2, "template": {"spec": {
                "initContainers": [
                    {"name": "setup", "resources": {"requests": {"cpu": "4"}}},
                    {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
                ],
                "containers": [
                    {"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}}
                ]
            }}}
        });
        let workload = PendingWorkload::from_object(&job).unwrap();
        let main = &workload.pod_sets[0];
        assert_eq!(main.count, 2);
        // containers 2.5 + sidecar 1 = 3.5; init peak 4 (setup alone) -> 4.
        assert_eq!(main.requests["cpu"], q("4"));
        assert_eq!(main.requests["memory"], q("1Gi"));
    }

    /// `replicas: 0` is stored as 1 (omitempty, CRD default 1): Kueue counts one replica, and a
    /// manifest that writes 0 is predicted as Kueue ends, not as an empty podset.
    #[test]
    fn a_job_set_written_with_zero_replicas_counts_one_as_kueue_does() {
        let job_set = json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "labels": {QUEUE_NAME_LABEL: "q"}},
            "spec": {"replicatedJobs": [
                {"name": "slice", "replicas": 0, "template": {"spec": {
                    "parallelism": 4, "completions": 4, "template": {"spec": {
                        "containers": [{"resources": {"limits": {"google.com/tpu": "4"}}}]}}}}},
                {"name": "more", "replicas": 2, "template": {"spec": {"template": {"spec": {
                    "containers": []}}}}}
            ]}
        });
        let workload = PendingWorkload::from_object(&job_set).unwrap();
        let counts: Vec<i32> = workload.pod_sets.iter().map(|p| p.count).collect();
        assert_eq!(counts, [4, 2]);
        assert_eq!(stored_job_set_replicas(Some(0)), 1);
        assert_eq!(stored_job_set_replicas(None), 1);
        assert_eq!(stored_job_set_replicas(Some(3)), 3);
    }

    #[test]
    fn a_job_set_has_one_podset_per_replicated_job_of_replicas_times_pods_per_job() {
        let job_set = json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "labels": {QUEUE_NAME_LABEL: "q"}},
            "spec": {"replicatedJobs": [
                {"name": "Coordinator", "template": {"spec": {"template": {"spec": {
                    "containers": [{"resources": {"requests": {"cpu": "1"}}}]}}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {
                    "parallelism": 4, "completions": 6, "template": {"spec": {
                        "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"},
                        "containers": [{"resources": {"limits": {"google.com/tpu": "4"}}}]}}}}},
                {"name": "short", "replicas": 3, "template": {"spec": {
                    "parallelism": 4, "completions": 2, "template": {"spec": {"containers": []}}}}}
            ]}
        });
        let workload = PendingWorkload::from_object(&job_set).unwrap();
        let shape: Vec<(&str, i32)> = workload
            .pod_sets
            .iter()
            .map(|p| (p.name.as_str(), p.count))
            .collect();
        // Replicas default to 1 and parallelism to 1; the name is lower-cased.
        assert_eq!(shape, [("coordinator", 1), ("workers", 8), ("short", 6)]);
        assert_eq!(workload.pod_sets[1].requests["google.com/tpu"], q("4"));
        assert_eq!(
            workload.pod_sets[1].node_selector["cloud.google.com/gke-tpu-topology"],
            "4x4"
        );
        assert_eq!(workload.queue_name.as_deref(), Some("q"));
        let managed = ["google.com/tpu".to_string()];
        let joining: Vec<&str> = workload
            .pod_sets
            .iter()
            .filter(|p| p.joins_provisioning_request(&managed))
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(joining, ["workers"]);
    }
}
