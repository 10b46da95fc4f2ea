//! The spec's types: what a user writes in `gkq.yaml` or `gkq.toml`.
//!
//! Field names are camelCase in both formats. Every struct denies unknown keys so that a typo is
//! an error with a suggestion, never a silently ignored setting. Quantities (`20Gi`, `500m`, `16`)
//! stay as text here and are checked during validation.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A gkq spec: one GKE cluster, its node pools, Kueue and the training jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// Declared variables usable as `${NAME}` in any string. Each may have a default; values come
    /// from `--var NAME=VALUE`, then the environment variable `NAME`, then the default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Variable>,
    /// Google Cloud project ID.
    pub project: String,
    /// Zone (zonal cluster, e.g. `us-east5-b`) or region.
    pub location: String,
    /// Where `plan` and `apply` act: `gcp` (Google Cloud) or `local` (the embedded emulator).
    #[serde(default)]
    pub target: Target,
    pub cluster: Cluster,
    /// Node pools besides the cluster's default pool, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_pools: Vec<NodePool>,
    /// Kueue: installation, flavors, queues and admission checks.
    #[serde(default)]
    pub kueue: Kueue,
    /// JobSet (the controller `kind: jobset` jobs need): installed by gkq, by someone else, or
    /// not at all.
    #[serde(default, skip_serializing_if = "JobSet::is_default")]
    pub jobset: JobSet,
    /// A capacity ladder (reservation, on-demand, flex-start, Spot rungs) that gkq expands into
    /// node pools and flavors (`mode: kueue`) or a ComputeClass (`mode: computeclass`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
    /// Training jobs: KubeRay RayJobs, JobSets or batch Jobs (`kind`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<Job>,
    /// Raw Kubernetes manifests applied as they are (escape hatch). Each is a full object with
    /// apiVersion, kind and metadata.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::vocab::object::tight_values"
    )]
    pub manifests: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Variable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value is a secret (a token, a password): wherever it is used, plans, plan files,
    /// diffs, logs and status show `(sensitive value)` instead, and apply reads it from the spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    #[default]
    Gcp,
    Local,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    pub name: String,
    /// GKE version or alias (`1.34` = newest patch of 1.34), sent as `initialClusterVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub default_pool: DefaultPool,
    /// Image streaming (`--enable-image-streaming`): the default for new node pools.
    #[serde(default)]
    pub image_streaming: bool,
    #[serde(default)]
    pub addons: Addons,
    /// GKE resource labels on the cluster (gkq adds its ownership labels).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// While true, `gkq destroy` refuses to delete the cluster.
    #[serde(default = "default_true")]
    pub deletion_protection: bool,
    /// Cluster-level node auto-provisioning (`--enable-autoprovisioning`): GKE may create and
    /// delete node pools within these limits. Below GKE 1.33.3-gke.1136000 a ComputeClass needs
    /// it to get node pools of its own (docs/gke-facts.md, "The capacity ladder", L2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_auto_provisioning: Option<NodeAutoProvisioning>,
}

/// The limits of node auto-provisioning, rendered as the cluster's `autoscaling` with
/// `enableNodeAutoprovisioning: true` and one `resourceLimits` entry each. They bound the whole
/// cluster (every node pool, hand-made ones included), not only the pools GKE creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAutoProvisioning {
    /// Most vCPUs in the cluster (gcloud's `--max-cpu`).
    pub max_cpu: u64,
    /// Most memory in the cluster, in GB (gcloud's `--max-memory`).
    pub max_memory_gb: u64,
    /// Most accelerators in the cluster per GKE accelerator type: TPU chips of a TPU type
    /// (`tpu-v6e-slice: 16`), GPUs of a GPU type (`nvidia-l4: 8`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_accelerators: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultPool {
    #[serde(default = "default_pool_name")]
    pub name: String,
    #[serde(default = "default_machine_type")]
    pub machine_type: String,
    /// Nodes per zone (gcloud's `--num-nodes`, default 3).
    #[serde(default = "default_nodes")]
    pub nodes: u32,
}

impl Default for DefaultPool {
    fn default() -> Self {
        Self {
            name: default_pool_name(),
            machine_type: default_machine_type(),
            nodes: default_nodes(),
        }
    }
}

/// Cluster add-ons. gcloud's `--addons=RayOperator` also disables every add-on it does not
/// name (HTTP load balancing, HPA, dashboard, network policy); `exclusive: true` reproduces that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Addons {
    #[serde(default)]
    pub ray_operator: bool,
    /// Disable the add-ons not listed here, as `gcloud --addons` does.
    #[serde(default)]
    pub exclusive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    pub name: String,
    pub machine_type: String,
    /// TPU slice topology, e.g. `4x4` (`--tpu-topology`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpu_topology: Option<String>,
    /// `none`, `any`, `any-then-fail` or `specific:<reservation-name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_affinity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
    /// Nodes per zone at creation (`--num-nodes`); defaults to 0 with autoscaling, otherwise to
    /// the TPU slice's host count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_nodes: Option<u32>,
    /// DWS flex-start (`--flex-start`).
    #[serde(default)]
    pub flex_start: bool,
    /// Queued provisioning through ProvisioningRequests (`--enable-queued-provisioning`).
    #[serde(default)]
    pub queued_provisioning: bool,
    /// Node auto-repair; defaults to true, and to false for flex-start pools (GKE requires it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_repair: Option<bool>,
    #[serde(default = "default_true")]
    pub auto_upgrade: bool,
    /// Spot VMs.
    #[serde(default)]
    pub spot: bool,
    /// Maximum run time of a node, e.g. `86400s` or `24h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<String>,
    /// Kubernetes node labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Kubernetes node taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// GKE resource labels (gkq adds its ownership labels).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Autoscaling {
    #[serde(default)]
    pub min: u32,
    pub max: u32,
    /// `BALANCED` or `ANY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_policy: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    pub key: String,
    /// `Exists` (default) or `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kueue {
    /// Kueue release, e.g. `v0.19.2`.
    #[serde(default = "default_kueue_version")]
    pub version: String,
    /// `managed`: gkq installs Kueue from its release manifests; `external`: someone else did,
    /// gkq checks the version and CRDs.
    #[serde(default)]
    pub install: InstallMode,
    /// Release manifests: a URL, a local file or directory, or `builtin` (the release embedded
    /// in gkq, v0.19.2: no download, for air-gapped installs). Defaults to the release's
    /// `manifests.yaml` on GitHub (the local target uses `builtin` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<String>,
    /// Feature gates passed to the manager (e.g. `ElasticJobsViaWorkloadSlices: true`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub feature_gates: BTreeMap<String, bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<Flavor>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_queues: Vec<ClusterQueue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_queues: Vec<LocalQueue>,
    /// Admission checks written out in full; `provisioning: dws` on a flavor makes one for you.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheck>,
}

impl Default for Kueue {
    fn default() -> Self {
        Self {
            version: default_kueue_version(),
            install: InstallMode::default(),
            manifests: None,
            feature_gates: BTreeMap::new(),
            flavors: Vec::new(),
            cluster_queues: Vec::new(),
            local_queues: Vec::new(),
            admission_checks: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum InstallMode {
    #[default]
    Managed,
    External,
}

/// JobSet's installation (docs/jobset.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobSet {
    /// `builtin`: gkq installs JobSet's release embedded in it (v0.12.0, the version Kueue
    /// v0.19.2 integrates with), and upgrades it when `version` changes; `external`: someone else
    /// installed it, gkq checks that the cluster serves JobSets before applying any; `none`: no
    /// JobSet, so the spec may not have `kind: jobset` jobs or JobSet manifests.
    #[serde(default)]
    pub install: JobSetInstall,
    /// JobSet release, e.g. `v0.12.0` (with `builtin`, one gkq embeds).
    #[serde(default = "default_jobset_version")]
    pub version: String,
}

impl Default for JobSet {
    fn default() -> Self {
        Self {
            install: JobSetInstall::default(),
            version: default_jobset_version(),
        }
    }
}

impl JobSet {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum JobSetInstall {
    Builtin,
    #[default]
    External,
    None,
}

/// The JobSet release Kueue v0.19.2 integrates with (its go.mod; docs/jobset.md).
pub fn default_jobset_version() -> String {
    "v0.12.0".into()
}

/// A Kueue ResourceFlavor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Flavor {
    pub name: String,
    /// Short form: the node pool this flavor stands for (`cloud.google.com/gke-nodepool`), with
    /// the pool's taints copied in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// `dws`: capacity comes from DWS queued provisioning. Creates the ProvisioningRequest
    /// AdmissionCheck and ProvisioningRequestConfig and scopes the check to this flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Provisioning>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provisioning {
    Dws,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterQueue {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// Label selector of namespaces allowed to use the queue; `{}` (all) when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<serde_json::Value>,
    /// `BestEffortFIFO` (default) or `StrictFIFO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_strategy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// Resource groups; the flavor order inside a group is the fallback order.
    pub resource_groups: Vec<ResourceGroup>,
    /// Admission checks, optionally limited to some flavors. Checks of `provisioning` flavors
    /// are added automatically.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheckRef>,
    /// Stop the queue: `Hold` admits nothing new and takes back quota reserved for jobs that
    /// are still waiting for an admission check; `HoldAndDrain` also evicts admitted jobs.
    /// `None` (the default) runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
}

/// Kueue's `spec.stopPolicy` of a ClusterQueue or a LocalQueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum StopPolicy {
    /// The queue runs.
    None,
    /// Nothing new is admitted; admitted jobs keep running.
    Hold,
    /// Nothing new is admitted, and admitted jobs are evicted.
    HoldAndDrain,
}

impl StopPolicy {
    /// Kueue's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StopPolicy::None => "None",
            StopPolicy::Hold => "Hold",
            StopPolicy::HoldAndDrain => "HoldAndDrain",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preemption {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_cluster_queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_within_cohort: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlavorFungibility {
    /// `MayStopSearch` (default) or `TryNextFlavor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_borrow: Option<String>,
    /// `TryNextFlavor` (default) or `MayStopSearch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_preempt: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceGroup {
    /// Resources this group covers, e.g. `[cpu, memory, google.com/tpu]`.
    pub resources: Vec<String>,
    /// Flavors in fallback order, each with a quota for every covered resource.
    pub flavors: Vec<FlavorQuota>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlavorQuota {
    pub name: String,
    /// Nominal quota per resource (a Kubernetes quantity: `40`, `75Gi`, `500m`).
    pub quota: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub borrowing_limit: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lending_limit: BTreeMap<String, Quantity>,
}

/// A Kubernetes quantity, written as a number or a string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Quantity {
    Int(i64),
    Text(String),
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a quantity such as 16, 500m or 75Gi")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                i64::try_from(v)
                    .map(Quantity::Int)
                    .map_err(|_| E::custom("quantity is too large"))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity::Text(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for Quantity {
    fn default() -> Self {
        Quantity::Int(0)
    }
}

impl Quantity {
    pub fn as_text(&self) -> String {
        match self {
            Quantity::Int(i) => i.to_string(),
            Quantity::Text(s) => s.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionCheckRef {
    pub name: String,
    /// Flavors the check applies to; all flavors when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_flavors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalQueue {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub cluster_queue: String,
    /// Stop the queue for its namespace's jobs: `Hold` or `HoldAndDrain`, as on a ClusterQueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
}

/// An AdmissionCheck backed by Kueue's ProvisioningRequest controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionCheck {
    pub name: String,
    /// The ProvisioningRequestConfig this check uses; created by gkq.
    pub provisioning_request_config: ProvisioningRequestConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisioningRequestConfig {
    pub name: String,
    /// Defaults to `queued-provisioning.gke.io` (DWS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    /// Resources whose pods join the ProvisioningRequest; defaults to `[google.com/tpu]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_resources: Vec<String>,
    /// How Kueue merges the job's joining podsets into the request's PodSets; none merges
    /// nothing. DWS (`queued-provisioning.gke.io`) accepts one PodSet per request, so two
    /// worker groups or replicated jobs need a policy that merges them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_merge_policy: Option<PodSetMergePolicy>,
}

/// Kueue's `podSetMergePolicy` of a ProvisioningRequestConfig.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PodSetMergePolicy {
    /// Podsets whose pod templates are identical become one PodSet.
    IdenticalPodTemplates,
    /// Podsets with the same scheduling requirements (container requests, node selector,
    /// tolerations, affinity, resource claims) become one PodSet.
    IdenticalWorkloadSchedulingRequirements,
}

impl PodSetMergePolicy {
    /// Kueue's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PodSetMergePolicy::IdenticalPodTemplates => "IdenticalPodTemplates",
            PodSetMergePolicy::IdenticalWorkloadSchedulingRequirements => {
                "IdenticalWorkloadSchedulingRequirements"
            }
        }
    }
}

/// What a job runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// A KubeRay RayJob (`ray.io/v1`): a Ray head, worker groups and a submitter.
    #[default]
    RayJob,
    /// A JobSet (`jobset.x-k8s.io/v1alpha2`): replicated jobs, one Job per replica (slice).
    JobSet,
    /// A batch Job (`batch/v1`): `parallelism` pods at a time, `completions` in all.
    Job,
}

impl JobKind {
    /// The Kubernetes kind it renders to.
    pub fn kind_name(self) -> &'static str {
        match self {
            JobKind::RayJob => "RayJob",
            JobKind::JobSet => "JobSet",
            JobKind::Job => "Job",
        }
    }
}

/// KubeRay's `spec.submissionMode` values gkq supports (`InteractiveMode` waits for a user to
/// submit by hand, which a spec cannot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SubmissionMode {
    K8sJobMode,
    #[serde(rename = "HTTPMode")]
    HttpMode,
    SidecarMode,
}

impl SubmissionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SubmissionMode::K8sJobMode => "K8sJobMode",
            SubmissionMode::HttpMode => "HTTPMode",
            SubmissionMode::SidecarMode => "SidecarMode",
        }
    }
}

/// A training job whose script ships in a ConfigMap: a KubeRay RayJob (default), a JobSet or a
/// batch Job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Job {
    pub name: String,
    /// `rayjob` (default), `jobset` or `job`.
    #[serde(default)]
    pub kind: JobKind,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// LocalQueue the job is submitted to.
    pub queue: String,
    /// Number of runs: with `count: 2` gkq submits `<name>-1` and `<name>-2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Training script, relative to the spec's directory; shipped in a ConfigMap mounted at
    /// `/app`.
    pub script: String,
    /// Name of the ConfigMap holding the script (default `<name>-script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// Command to run; defaults to `python /app/<script file name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    pub image: String,
    /// How KubeRay submits the script (RayJob only): `K8sJobMode` (KubeRay's default: a
    /// submitter pod), `HTTPMode` (the operator submits; no submitter pod) or `SidecarMode` (a
    /// submitter container in the head pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_mode: Option<SubmissionMode>,
    /// pip packages for Ray's runtime environment (RayJob only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pip: Vec<String>,
    /// The Ray head (RayJob only, required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<HeadGroup>,
    /// Ray worker groups (RayJob only; none for a Ray cluster of its head alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerGroup>,
    /// The JobSet's replicated jobs (JobSet only, at least one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicated_jobs: Vec<ReplicatedJob>,
    /// Pods running at once (batch Job only; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// Pods that must succeed (batch Job only; default `parallelism`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<u32>,
    /// The batch Job's pods (batch Job only, required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodGroup>,
    /// Ray in-tree autoscaling; needs `elastic: true` (RayJob only).
    #[serde(default)]
    pub autoscaling: bool,
    /// Kueue elastic job (`kueue.x-k8s.io/elastic-job: "true"`; RayJob only).
    #[serde(default)]
    pub elastic: bool,
    #[serde(default = "default_true")]
    pub shutdown_after_job_finishes: bool,
    /// Expected run time (e.g. `6h`); checked against DWS's 7-day limit and passed to Kueue as
    /// `provreq.kueue.x-k8s.io/maxRunDurationSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Kueue WorkloadPriorityClass name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Labels on the job object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations on the job object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeadGroup {
    pub cpu: Quantity,
    pub memory: Quantity,
    /// Container limits; when absent, the limits equal the requests (`cpu`, `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Node pool the head runs on (`cloud.google.com/gke-nodepool` node selector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: one term whose expressions must all match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_node_affinity: Vec<NodeSelectorRequirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerGroup {
    pub group: String,
    /// Worker replicas (one replica = one slice of `hosts` pods).
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    /// Hosts (pods) per replica: a multi-host TPU slice has one pod per VM.
    #[serde(default = "default_hosts")]
    pub hosts: u32,
    pub cpu: Quantity,
    pub memory: Quantity,
    /// Container limits; when absent, the limits equal the requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<Accelerator>,
    /// Node pool the workers run on (`cloud.google.com/gke-nodepool` node selector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: one term whose expressions must all match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_node_affinity: Vec<NodeSelectorRequirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// One replicated job of a JobSet: `replicas` Jobs (for TPUs, one per slice), each of `hosts`
/// pods (the Job's parallelism and completions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicatedJob {
    /// Name of the replicated job (a DNS label); Kueue names its podset after it.
    pub name: String,
    /// Jobs of this template: for a TPU, one per slice.
    #[serde(default = "default_one")]
    pub replicas: u32,
    /// Pods per Job (parallelism = completions): one per TPU VM of the slice.
    #[serde(default = "default_hosts")]
    pub hosts: u32,
    /// Each pod: what it requests and where it may run.
    pub pods: PodGroup,
}

/// The pods of a batch Job or of a JobSet's replicated job: what each requests and where it
/// may run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodGroup {
    pub cpu: Quantity,
    pub memory: Quantity,
    /// Container limits; when absent, the limits equal the requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<Accelerator>,
    /// Node pool the pods run on (`cloud.google.com/gke-nodepool` node selector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: one term whose expressions must all match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_node_affinity: Vec<NodeSelectorRequirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// One expression of a required node-affinity term.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorRequirement {
    /// Node label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt` or `Lt`.
    pub operator: String,
    /// Values for `In`, `NotIn` (one or more), `Gt` and `Lt` (exactly one integer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Accelerator {
    /// GKE accelerator label value, e.g. `tpu-v6e-slice`.
    #[serde(rename = "type")]
    pub kind: String,
    /// TPU topology, e.g. `4x4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// Chips per pod (`google.com/tpu` request and limit).
    pub chips: u32,
    /// Extended resource name; defaults to `google.com/tpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

// The `capacity:` section (`spec::ladder`, docs/design/capacity-ladder.md).

/// The capacity ladder. Its rungs are tried in order, first preferred.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capacity {
    /// `kueue` (default): one node pool and one Kueue flavor per rung, the queue's flavor order
    /// is the ladder (Kueue falls through on quota). `computeclass`: one GKE ComputeClass whose
    /// priorities are the ladder, selected by one flavor (GKE falls through on capacity).
    #[serde(default)]
    pub mode: CapacityMode,
    /// The `kueue.clusterQueues[]` entry whose accelerator flavors the ladder provides.
    pub cluster_queue: String,
    /// Index of the queue's resource group that gets the rung flavors; defaults to the group
    /// whose `resources` hold the accelerator resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group: Option<usize>,
    /// Machine and slice shape of every rung that does not give its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<RungAccelerator>,
    /// The ComputeClass and its flavor (`mode: computeclass` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_class: Option<ComputeClassSettings>,
    /// Nominal quota of the ComputeClass flavor (`mode: computeclass` only, required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<BTreeMap<String, Quantity>>,
    /// The rungs, first preferred.
    pub rungs: Vec<Rung>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum CapacityMode {
    #[default]
    Kueue,
    Computeclass,
}

/// Where a rung's capacity comes from. The kind fixes the pool's reservation affinity, Spot and
/// flex-start settings, so GKE's exclusions (flex-start with Spot, flex-start or queued
/// provisioning with a reservation) cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RungKind {
    /// A specific reservation (`reservation:` names it).
    Reservation,
    /// On-demand VMs.
    OnDemand,
    /// Flex-start VMs, obtained node by node (single-host slices).
    FlexStart,
    /// Flex-start with queued provisioning: all VMs at once through a ProvisioningRequest.
    FlexStartQueued,
    /// Spot VMs.
    Spot,
}

impl RungKind {
    /// How the spec spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RungKind::Reservation => "reservation",
            RungKind::OnDemand => "on-demand",
            RungKind::FlexStart => "flex-start",
            RungKind::FlexStartQueued => "flex-start-queued",
            RungKind::Spot => "spot",
        }
    }

    /// Flex-start capacity, with a time budget.
    pub fn is_flex(self) -> bool {
        matches!(self, RungKind::FlexStart | RungKind::FlexStartQueued)
    }
}

/// The machine and slice shape of a rung.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RungAccelerator {
    /// A TPU machine type (`ct6e-standard-4t`) or a GPU machine type.
    pub machine_type: String,
    /// TPU slice topology, e.g. `4x4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// GPUs per VM (GPU machine types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<RungGpu>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RungGpu {
    /// GKE accelerator type, e.g. `nvidia-h100-80gb`.
    #[serde(rename = "type")]
    pub kind: String,
    pub count: u32,
}

/// One rung of the ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rung {
    /// A DNS label, unique in the ladder; the rung's flavor name (`mode: kueue`).
    pub name: String,
    pub kind: RungKind,
    /// Overrides `capacity.accelerator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<RungAccelerator>,
    /// Node pool name (`mode: kueue`); default `<name>-pool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Slices the rung may hold (all kinds but `reservation`). A multi-host rung of n slices
    /// becomes n pools `<pool>-1..n` and n flavors `<name>-1..n`, one slice each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<u32>,
    /// Single-host rungs: the pool's `autoscaling.max`, instead of `slices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<u32>,
    /// The reservation a `reservation` rung consumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<RungReservation>,
    /// The time budget of a flex-start rung (at most `7d`): the pool's `maxRunDuration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<String>,
    /// Nominal quota of each flavor the rung makes (`mode: kueue`); derived when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<BTreeMap<String, Quantity>>,
    /// Kubernetes node labels of the rung's pool(s) (`mode: kueue`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Kubernetes node taints of the rung's pool(s) (`mode: kueue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// A specific reservation. gkq cannot read reservations: `slices` states its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RungReservation {
    pub name: String,
    /// The project that owns a shared reservation; omit for this project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The reservation's zone; defaults to the cluster's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Slices of the rung's shape the reservation holds.
    #[serde(default = "default_one")]
    pub slices: u32,
}

/// `mode: computeclass`: the ComputeClass and the flavor that selects it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComputeClassSettings {
    /// Default `<cluster>-ladder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The Kueue flavor selecting the class; default `ladder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
    /// Node pool auto-creation for the class (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_creation: Option<bool>,
    /// Let GKE move running pods to a preferred priority when it becomes available (evicts
    /// them; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_migration: Option<bool>,
}

fn default_true() -> bool {
    true
}
fn default_pool_name() -> String {
    "default-pool".into()
}
fn default_machine_type() -> String {
    "e2-medium".into()
}
fn default_nodes() -> u32 {
    3
}
fn default_hosts() -> u32 {
    1
}
fn default_one() -> u32 {
    1
}
fn default_namespace() -> String {
    "default".into()
}
pub fn default_kueue_version() -> String {
    "v0.19.2".into()
}
