//! Stable resource addresses: the key that pairs desired and live state, orders the plan and
//! names a resource in every message.
//!
//! An address reads `<domain>.<kind>/<name>` for cluster-scoped things and
//! `<domain>.<kind>/<namespace>/<name>` for namespaced Kubernetes objects:
//!
//! ```text
//! gke.cluster/tpu-cluster            kueue.clusterqueue/cluster-queue
//! gke.nodepool/dws-pool              kueue.localqueue/default/user-queue
//! k8s.credentials/tpu-cluster        k8s.configmap/default/jax-train-script
//! kueue.install/kueue                ray.rayjob/default/rayjob-tpu-v6e-dws-1
//! jobset.install/jobset              k8s.jobset/default/train
//! kueue.resourceflavor/on-demand     k8s.deployment/ns/name   (any other Kubernetes kind)
//! ```
//!
//! Addresses order by kind first, in dependency layer order (cluster, node pools, credentials,
//! namespaces, Kueue and JobSet installs, flavors and checks, cluster queues, local queues, other objects,
//! jobs), then by namespace and name. That order is the tie-break of the dependency sort, so plans
//! are deterministic.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::vocab::object::Field;

/// The kind part of an address. The variant order is the dependency layer order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    GkeCluster,
    GkeNodePool,
    /// Not an API object: the point where Kubernetes becomes reachable (endpoint, CA, token
    /// derived from the cluster). Everything in Kubernetes depends on it.
    KubeCredentials,
    Namespace,
    /// Kueue's installation (CRDs, controller, webhooks) as one component.
    KueueInstall,
    /// JobSet's installation (CRD, controller, webhooks) as one component.
    JobSetInstall,
    ResourceFlavor,
    Cohort,
    ProvisioningRequestConfig,
    AdmissionCheck,
    WorkloadPriorityClass,
    ClusterQueue,
    LocalQueue,
    ConfigMap,
    /// Any other Kubernetes kind, by its lowercased kind (`k8s.<kind>`).
    Other(String),
    RayCluster,
    RayJob,
}

impl ResourceKind {
    /// Whether this kind is a run: a job kind Kueue admits as a Workload.
    pub fn is_run(&self) -> bool {
        match self {
            ResourceKind::RayJob | ResourceKind::RayCluster => true,
            ResourceKind::Other(kind) => matches!(kind.as_str(), "job" | "jobset"),
            _ => false,
        }
    }

    /// The `<domain>.<kind>` prefix of the address.
    pub fn prefix(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            ResourceKind::GkeCluster => "gke.cluster",
            ResourceKind::GkeNodePool => "gke.nodepool",
            ResourceKind::KubeCredentials => "k8s.credentials",
            ResourceKind::Namespace => "k8s.namespace",
            ResourceKind::KueueInstall => "kueue.install",
            ResourceKind::JobSetInstall => "jobset.install",
            ResourceKind::ResourceFlavor => "kueue.resourceflavor",
            ResourceKind::Cohort => "kueue.cohort",
            ResourceKind::ProvisioningRequestConfig => "kueue.provisioningrequestconfig",
            ResourceKind::AdmissionCheck => "kueue.admissioncheck",
            ResourceKind::WorkloadPriorityClass => "kueue.workloadpriorityclass",
            ResourceKind::ClusterQueue => "kueue.clusterqueue",
            ResourceKind::LocalQueue => "kueue.localqueue",
            ResourceKind::ConfigMap => "k8s.configmap",
            ResourceKind::RayCluster => "ray.raycluster",
            ResourceKind::RayJob => "ray.rayjob",
            ResourceKind::Other(kind) => return Cow::Owned(format!("k8s.{kind}")),
        })
    }

    fn from_prefix(prefix: &str) -> Option<ResourceKind> {
        Some(match prefix {
            "gke.cluster" => ResourceKind::GkeCluster,
            "gke.nodepool" => ResourceKind::GkeNodePool,
            "k8s.credentials" => ResourceKind::KubeCredentials,
            "k8s.namespace" => ResourceKind::Namespace,
            "kueue.install" => ResourceKind::KueueInstall,
            "jobset.install" => ResourceKind::JobSetInstall,
            "kueue.resourceflavor" => ResourceKind::ResourceFlavor,
            "kueue.cohort" => ResourceKind::Cohort,
            "kueue.provisioningrequestconfig" => ResourceKind::ProvisioningRequestConfig,
            "kueue.admissioncheck" => ResourceKind::AdmissionCheck,
            "kueue.workloadpriorityclass" => ResourceKind::WorkloadPriorityClass,
            "kueue.clusterqueue" => ResourceKind::ClusterQueue,
            "kueue.localqueue" => ResourceKind::LocalQueue,
            "k8s.configmap" => ResourceKind::ConfigMap,
            "ray.raycluster" => ResourceKind::RayCluster,
            "ray.rayjob" => ResourceKind::RayJob,
            other => {
                let kind = other.strip_prefix("k8s.")?;
                if kind.is_empty()
                    || !kind
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                {
                    return None;
                }
                ResourceKind::Other(kind.to_string())
            }
        })
    }

    /// Whether the address names something in the GKE API (as opposed to Kubernetes).
    pub fn is_gke(&self) -> bool {
        matches!(self, ResourceKind::GkeCluster | ResourceKind::GkeNodePool)
    }

    /// Kinds Kueue's CRDs define: they need Kueue installed first.
    pub fn is_kueue(&self) -> bool {
        matches!(
            self,
            ResourceKind::ResourceFlavor
                | ResourceKind::Cohort
                | ResourceKind::ProvisioningRequestConfig
                | ResourceKind::AdmissionCheck
                | ResourceKind::WorkloadPriorityClass
                | ResourceKind::ClusterQueue
                | ResourceKind::LocalQueue
        )
    }

    /// Known kinds that live in a namespace (used to default a missing namespace to `default`).
    fn is_namespaced(&self) -> Option<bool> {
        match self {
            ResourceKind::LocalQueue
            | ResourceKind::ConfigMap
            | ResourceKind::RayCluster
            | ResourceKind::RayJob => Some(true),
            ResourceKind::Other(_) => None,
            _ => Some(false),
        }
    }

    /// The kind of an object of `apiVersion` `api_version` and `kind` `kind`: known kinds of a
    /// known group by name, anything else as `Other(<kind, lowercase>)`.
    pub fn of(api_version: &str, kind: &str) -> Self {
        // The group is what comes before '/' ("kueue.x-k8s.io/v1beta2"); the core group has none.
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        match (group, kind) {
            ("", "Namespace") => ResourceKind::Namespace,
            ("", "ConfigMap") => ResourceKind::ConfigMap,
            ("kueue.x-k8s.io", "ResourceFlavor") => ResourceKind::ResourceFlavor,
            ("kueue.x-k8s.io", "Cohort") => ResourceKind::Cohort,
            ("kueue.x-k8s.io", "ProvisioningRequestConfig") => {
                ResourceKind::ProvisioningRequestConfig
            }
            ("kueue.x-k8s.io", "AdmissionCheck") => ResourceKind::AdmissionCheck,
            ("kueue.x-k8s.io", "WorkloadPriorityClass") => ResourceKind::WorkloadPriorityClass,
            ("kueue.x-k8s.io", "ClusterQueue") => ResourceKind::ClusterQueue,
            ("kueue.x-k8s.io", "LocalQueue") => ResourceKind::LocalQueue,
            ("ray.io", "RayJob") => ResourceKind::RayJob,
            ("ray.io", "RayCluster") => ResourceKind::RayCluster,
            ("gkq.dev", "KueueInstallation") => ResourceKind::KueueInstall,
            ("gkq.dev", "JobSetInstallation") => ResourceKind::JobSetInstall,
            (_, other) => ResourceKind::Other(other.to_ascii_lowercase()),
        }
    }
}

/// The address of one managed thing. See the module docs for the syntax.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceAddr {
    pub kind: ResourceKind,
    pub namespace: Option<String>,
    pub name: String,
}

/// Why a string or a Kubernetes object does not give an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    #[error("resource address {input:?} has no '/': expected <domain>.<kind>/<name>")]
    MissingSlash { input: String },
    #[error("resource address {input:?}: unknown kind {prefix:?}")]
    UnknownKind { input: String, prefix: String },
    #[error("resource address {input:?}: empty or malformed name")]
    BadName { input: String },
    #[error("Kubernetes object has no {field}")]
    MissingField { field: &'static str },
}

impl ResourceAddr {
    fn cluster_scoped(kind: ResourceKind, name: impl Into<String>) -> Self {
        ResourceAddr {
            kind,
            namespace: None,
            name: name.into(),
        }
    }
    fn namespaced(
        kind: ResourceKind,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ResourceAddr {
            kind,
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    pub fn gke_cluster(name: impl Into<String>) -> Self {
        Self::cluster_scoped(ResourceKind::GkeCluster, name)
    }
    pub fn gke_node_pool(name: impl Into<String>) -> Self {
        Self::cluster_scoped(ResourceKind::GkeNodePool, name)
    }
    pub fn kube_credentials(cluster: impl Into<String>) -> Self {
        Self::cluster_scoped(ResourceKind::KubeCredentials, cluster)
    }
    pub fn kueue_install() -> Self {
        Self::cluster_scoped(ResourceKind::KueueInstall, "kueue")
    }
    pub fn jobset_install() -> Self {
        Self::cluster_scoped(ResourceKind::JobSetInstall, "jobset")
    }
    pub fn namespace(name: impl Into<String>) -> Self {
        Self::cluster_scoped(ResourceKind::Namespace, name)
    }
    pub fn resource_flavor(name: impl Into<String>) -> Self {
        Self::cluster_scoped(ResourceKind::ResourceFlavor, name)
    }
    pub fn cluster_queue(name: impl Into<String>) -> Self {
        Self::cluster_scoped(ResourceKind::ClusterQueue, name)
    }
    pub fn local_queue(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::namespaced(ResourceKind::LocalQueue, namespace, name)
    }
    pub fn config_map(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::namespaced(ResourceKind::ConfigMap, namespace, name)
    }
    pub fn ray_job(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::namespaced(ResourceKind::RayJob, namespace, name)
    }

    /// The address of a Kubernetes object from its `apiVersion`, `kind`, `metadata.namespace`
    /// and `metadata.name`. Known kinds of a known group get their short address; anything else
    /// is `k8s.<kind>`. A namespaced known kind without a namespace is in `default`, as kubectl
    /// would put it.
    ///
    /// gkq's own pseudo-objects `{apiVersion: gkq.dev/v1, kind: KueueInstallation}` and
    /// `JobSetInstallation` stand for the Kueue and JobSet installations as wholes.
    pub fn from_object(object: &Value) -> Result<Self, AddrError> {
        let api_version =
            object
                .field("apiVersion")
                .and_then(Value::as_str)
                .ok_or(AddrError::MissingField {
                    field: "apiVersion",
                })?;
        let kind = object
            .field("kind")
            .and_then(Value::as_str)
            .ok_or(AddrError::MissingField { field: "kind" })?;
        let metadata = object.field("metadata");
        let name = metadata
            .and_then(|m| m.field("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(AddrError::MissingField {
                field: "metadata.name",
            })?;
        let namespace = metadata
            .and_then(|m| m.field("namespace"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        let resource_kind = ResourceKind::of(api_version, kind);
        let namespace = match resource_kind.is_namespaced() {
            Some(true) => Some(namespace.unwrap_or("default").to_string()),
            Some(false) => None,
            None => namespace.map(str::to_string),
        };
        Ok(ResourceAddr {
            kind: resource_kind,
            namespace,
            name: name.to_string(),
        })
    }
}

impl fmt::Display for ResourceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind.prefix(), ns, self.name),
            None => write!(f, "{}/{}", self.kind.prefix(), self.name),
        }
    }
}

impl FromStr for ResourceAddr {
    type Err = AddrError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (prefix, rest) = input
            .split_once('/')
            .ok_or_else(|| AddrError::MissingSlash {
                input: input.to_string(),
            })?;
        let kind = ResourceKind::from_prefix(prefix).ok_or_else(|| AddrError::UnknownKind {
            input: input.to_string(),
            prefix: prefix.to_string(),
        })?;
        let bad_name = || AddrError::BadName {
            input: input.to_string(),
        };
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(bad_name());
        }
        match parts.as_slice() {
            [name] => Ok(ResourceAddr::cluster_scoped(kind, *name)),
            [namespace, name] => Ok(ResourceAddr::namespaced(kind, *namespace, *name)),
            _ => Err(bad_name()),
        }
    }
}

impl Serialize for ResourceAddr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ResourceAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for ResourceAddr {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("ResourceAddr")
    }
    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "Stable resource address: <domain>.<kind>/<name> or <domain>.<kind>/<namespace>/<name>, e.g. gke.nodepool/dws-pool, kueue.localqueue/default/user-queue.",
            "pattern": "^[a-z0-9]+\\.[a-z0-9]+/[^/]+(/[^/]+)?$"
        })
    }
}

/// Where a cluster lives: `projects/{project}/locations/{location}/clusters/{cluster}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClusterRef {
    pub project: String,
    pub location: String,
    pub cluster: String,
}

impl ClusterRef {
    pub fn parent(&self) -> String {
        format!("projects/{}/locations/{}", self.project, self.location)
    }
    pub fn name(&self) -> String {
        format!("{}/clusters/{}", self.parent(), self.cluster)
    }
    pub fn node_pool(&self, pool: &str) -> String {
        format!("{}/nodePools/{pool}", self.name())
    }
    pub fn operation(&self, operation: &str) -> String {
        format!("{}/operations/{operation}", self.parent())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn examples_round_trip_through_display_and_from_str() {
        for text in [
            "gke.cluster/tpu-cluster",
            "gke.nodepool/dws-pool",
            "kueue.resourceflavor/on-demand",
            "kueue.clusterqueue/cluster-queue",
            "kueue.localqueue/default/user-queue",
            "k8s.configmap/default/jax-train-script",
            "ray.rayjob/default/rayjob-tpu-v6e-dws-1",
            "kueue.install/kueue",
            "k8s.credentials/tpu-cluster",
            "k8s.deployment/kueue-system/kueue-controller-manager",
        ] {
            let addr: ResourceAddr = text.parse().unwrap();
            assert_eq!(addr.to_string(), text);
        }
    }

    #[test]
    fn malformed_addresses_are_errors() {
        assert!(matches!(
            "gke.cluster".parse::<ResourceAddr>(),
            Err(AddrError::MissingSlash { .. })
        ));
        assert!(matches!(
            "gke.bogus/x".parse::<ResourceAddr>(),
            Err(AddrError::UnknownKind { .. })
        ));
        assert!(matches!(
            "gke.cluster/".parse::<ResourceAddr>(),
            Err(AddrError::BadName { .. })
        ));
        assert!(matches!(
            "k8s.configmap/a/b/c".parse::<ResourceAddr>(),
            Err(AddrError::BadName { .. })
        ));
    }

    #[test]
    fn addresses_from_kubernetes_objects() {
        let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": "default"}});
        assert_eq!(
            ResourceAddr::from_object(&lq).unwrap().to_string(),
            "kueue.localqueue/default/user-queue"
        );
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jax-train-script"}});
        assert_eq!(
            ResourceAddr::from_object(&cm).unwrap().to_string(),
            "k8s.configmap/default/jax-train-script"
        );
        let job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rayjob-tpu-v6e-dws-1", "namespace": "default"}});
        assert_eq!(
            ResourceAddr::from_object(&job).unwrap().to_string(),
            "ray.rayjob/default/rayjob-tpu-v6e-dws-1"
        );
        let rf = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "on-demand"}});
        assert_eq!(
            ResourceAddr::from_object(&rf).unwrap().to_string(),
            "kueue.resourceflavor/on-demand"
        );
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"}});
        assert_eq!(
            ResourceAddr::from_object(&deploy).unwrap().to_string(),
            "k8s.deployment/kueue-system/kueue-controller-manager"
        );
        let jobset = json!({"apiVersion": "gkq.dev/v1alpha1", "kind": "JobSetInstallation", "metadata": {"name": "jobset"}});
        assert_eq!(
            ResourceAddr::from_object(&jobset).unwrap(),
            ResourceAddr::jobset_install()
        );
        assert_eq!(
            "jobset.install/jobset".parse::<ResourceAddr>().unwrap(),
            ResourceAddr::jobset_install()
        );
        let install = json!({"apiVersion": "gkq.dev/v1", "kind": "KueueInstallation", "metadata": {"name": "kueue"}});
        assert_eq!(
            ResourceAddr::from_object(&install).unwrap(),
            ResourceAddr::kueue_install()
        );
        assert_eq!(
            ResourceAddr::from_object(&json!({"kind": "ConfigMap"})),
            Err(AddrError::MissingField {
                field: "apiVersion"
            })
        );
    }

    #[test]
    fn order_follows_dependency_layers() {
        let mut addrs: Vec<ResourceAddr> = [
            "ray.rayjob/default/j",
            "kueue.localqueue/default/q",
            "gke.nodepool/a",
            "kueue.clusterqueue/c",
            "gke.cluster/c",
            "kueue.resourceflavor/f",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        addrs.sort();
        let texts: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "gke.cluster/c",
                "gke.nodepool/a",
                "kueue.resourceflavor/f",
                "kueue.clusterqueue/c",
                "kueue.localqueue/default/q",
                "ray.rayjob/default/j"
            ]
        );
    }

    #[test]
    fn serde_uses_the_text_form() {
        let addr = ResourceAddr::gke_node_pool("dws-pool");
        assert_eq!(
            serde_json::to_value(&addr).unwrap(),
            json!("gke.nodepool/dws-pool")
        );
        let back: ResourceAddr = serde_json::from_value(json!("gke.nodepool/dws-pool")).unwrap();
        assert_eq!(back, addr);
    }
}
