//! Well-known keys other systems define (GKE, Kueue, KubeRay), each spelled once. gkq's own
//! `gkq.dev/...` keys stay with the module that owns their meaning (`model`, `gitops`).

/// The node label GKE puts on every node of a node pool.
pub const NODE_POOL_LABEL: &str = "cloud.google.com/gke-nodepool";
/// The node label naming a node's TPU type (`tpu-v6e-slice`).
pub const TPU_ACCELERATOR_LABEL: &str = "cloud.google.com/gke-tpu-accelerator";
/// The node label naming a TPU slice's topology (`4x4`).
pub const TPU_TOPOLOGY_LABEL: &str = "cloud.google.com/gke-tpu-topology";
/// The node label (and taint key) by which pods select a GKE ComputeClass, and which GKE puts
/// on the nodes it creates for the class (docs/gke-facts.md, L1).
pub const COMPUTE_CLASS_LABEL: &str = "cloud.google.com/compute-class";
/// The node label naming a node's GPU type.
pub const GPU_ACCELERATOR_LABEL: &str = "cloud.google.com/gke-accelerator";
/// The taint GKE puts on nodes of queued-provisioning (DWS) pools.
pub const QUEUED_TAINT: &str = "cloud.google.com/gke-queued";

/// The Kubernetes resource name for Cloud TPU chips.
pub const TPU_RESOURCE: &str = "google.com/tpu";
/// The Kubernetes resource name for NVIDIA GPUs.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The label that puts a job in a LocalQueue.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Kueue's label on a Workload naming the uid of the job it was made for.
pub const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";
/// The label naming a WorkloadPriorityClass.
pub const PRIORITY_CLASS_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// The annotation that makes a job elastic (required for Ray in-tree autoscaling).
pub const ELASTIC_JOB_ANNOTATION: &str = "kueue.x-k8s.io/elastic-job";
/// The AdmissionCheck controller Kueue runs for ProvisioningRequests (DWS).
pub const PROVISIONING_CONTROLLER: &str = "kueue.x-k8s.io/provisioning-request";
/// How long a job may run on DWS capacity, in seconds; Kueue copies it into the
/// ProvisioningRequest.
pub const MAX_RUN_DURATION_ANNOTATION: &str = "provreq.kueue.x-k8s.io/maxRunDurationSeconds";

/// KubeRay's GCS fault-tolerance annotation.
pub const RAY_FT_ENABLED_ANNOTATION: &str = "ray.io/ft-enabled";
