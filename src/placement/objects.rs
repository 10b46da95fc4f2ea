//! The cluster as Kueue's scheduler sees it, read from Kubernetes objects.
//!
//! [`Cluster::from_objects`] accepts any mix of objects (desired ones rendered from the spec and
//! live ones read from the cluster) and keeps what placement needs: ClusterQueues, Cohorts,
//! ResourceFlavors, LocalQueues, AdmissionChecks, ProvisioningRequestConfigs, priority classes,
//! Namespaces, and Workloads (those holding quota give the live usage; pending ones compete with
//! the plan's jobs). Other kinds are ignored. Both `kueue.x-k8s.io/v1beta2` and the deprecated
//! `v1beta1` spellings (`cohort`, `spec.admissionChecks`, `Borrow`/`Preempt`) are accepted.

use std::collections::BTreeMap;

use serde_json::Value;

use super::podsets::{PendingWorkload, PodSetMergePolicy, read_requirement, read_toleration};
use super::reader::{Context, Field, ParseErrors, describe};
use super::selectors::{LabelSelector, Taint, Toleration};
use super::time::Timestamp;
use crate::vocab::quantity::Quantity;

/// The controller name of Kueue's ProvisioningRequest (DWS) admission checks.
pub const PROVISIONING_REQUEST_CONTROLLER: &str = "kueue.x-k8s.io/provisioning-request";

/// Kueue's API group.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io";

/// The kinds of Kueue's world placement reads besides Workloads (all in [`KUEUE_GROUP`]): the
/// one list of them, for whoever gathers the objects a prediction needs.
pub const KUEUE_KINDS: [&str; 7] = [
    "ClusterQueue",
    "Cohort",
    "ResourceFlavor",
    "LocalQueue",
    "AdmissionCheck",
    "ProvisioningRequestConfig",
    "WorkloadPriorityClass",
];

/// Quota of one resource in one flavor.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceQuota {
    pub resource: String,
    pub nominal: Quantity,
    pub borrowing_limit: Option<Quantity>,
    pub lending_limit: Option<Quantity>,
}

/// One flavor of a resource group, with its quotas.
#[derive(Debug, Clone, PartialEq)]
pub struct FlavorQuotas {
    pub flavor: String,
    pub resources: Vec<ResourceQuota>,
}

/// `spec.resourceGroups[]`: resources that always take the same flavor, and the flavors in
/// the order Kueue tries them.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceGroup {
    pub covered_resources: Vec<String>,
    pub flavors: Vec<FlavorQuotas>,
}

/// `whenCanBorrow` / `whenCanPreempt` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FungibilityPolicy {
    MayStopSearch,
    TryNextFlavor,
}

/// `flavorFungibility.preference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FungibilityPreference {
    BorrowingOverPreemption,
    PreemptionOverBorrowing,
}

/// `spec.flavorFungibility` with the CRD defaults of Kueue v0.19.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlavorFungibility {
    pub when_can_borrow: FungibilityPolicy,
    pub when_can_preempt: FungibilityPolicy,
    pub preference: Option<FungibilityPreference>,
}

impl Default for FlavorFungibility {
    fn default() -> Self {
        FlavorFungibility {
            when_can_borrow: FungibilityPolicy::MayStopSearch,
            when_can_preempt: FungibilityPolicy::TryNextFlavor,
            preference: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueingStrategy {
    #[default]
    BestEffortFifo,
    StrictFifo,
}

/// `spec.preemption`; every policy defaults to `Never`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptionPolicy {
    pub within_cluster_queue: String,
    pub reclaim_within_cohort: String,
    pub borrow_within_cohort: String,
    /// `borrowWithinCohort.maxPriorityThreshold`: only workloads at or below it may be
    /// preempted while the queue borrows.
    pub max_priority_threshold: Option<i32>,
}

impl Default for PreemptionPolicy {
    fn default() -> Self {
        PreemptionPolicy {
            within_cluster_queue: "Never".to_string(),
            reclaim_within_cohort: "Never".to_string(),
            borrow_within_cohort: "Never".to_string(),
            max_priority_threshold: None,
        }
    }
}

impl PreemptionPolicy {
    /// Whether any policy could ever pick a victim.
    pub fn can_preempt(&self) -> bool {
        self.within_cluster_queue != "Never"
            || self.reclaim_within_cohort != "Never"
            || self.borrow_within_cohort != "Never"
    }
}

/// `admissionChecksStrategy.admissionChecks[]`; empty `on_flavors` means every flavor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionCheckRule {
    pub name: String,
    pub on_flavors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterQueue {
    pub name: String,
    pub cohort: Option<String>,
    pub resource_groups: Vec<ResourceGroup>,
    pub flavor_fungibility: FlavorFungibility,
    pub queueing_strategy: QueueingStrategy,
    pub preemption: PreemptionPolicy,
    /// `None` is a null or missing selector, which admits no namespace at all.
    pub namespace_selector: Option<LabelSelector>,
    pub admission_checks: Vec<AdmissionCheckRule>,
    /// `None`, `Hold` or `HoldAndDrain`.
    pub stop_policy: String,
    /// Being deleted (`metadata.deletionTimestamp`): Kueue's finalizer keeps it while admitted
    /// Workloads hold quota in it, and it admits nothing.
    pub terminating: bool,
    /// `status.flavorsReservation`, used for live usage only when no Workload objects are known.
    pub status_reservation: Vec<(String, String, Quantity)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cohort {
    pub name: String,
    pub parent: Option<String>,
    pub resource_groups: Vec<ResourceGroup>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceFlavor {
    pub name: String,
    pub node_labels: BTreeMap<String, String>,
    pub node_taints: Vec<Taint>,
    pub tolerations: Vec<Toleration>,
    pub topology_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalQueue {
    pub namespace: String,
    pub name: String,
    pub cluster_queue: String,
    pub stop_policy: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionCheck {
    pub name: String,
    pub controller_name: String,
    /// `(kind, name)` of `spec.parameters`.
    pub parameters: Option<(String, String)>,
    /// The `Active` condition when the object came from a live cluster.
    pub active_condition: Option<bool>,
}

/// A Workload holding a quota reservation: its usage per `(flavor, resource)`, and what
/// preemption needs to judge it as a victim.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservingWorkload {
    pub namespace: String,
    pub name: String,
    pub cluster_queue: String,
    /// `spec.queueName`: the LocalQueue, in the Workload's namespace.
    pub queue_name: Option<String>,
    /// Whether it is admitted (`Admitted=True`), not only holding quota while its admission
    /// checks are pending.
    pub admitted: bool,
    pub usage: Vec<(String, String, Quantity)>,
    /// The Workload read as a job (priority, creation time, podsets, owner), so that it can be
    /// judged as a preemption victim and queue again once evicted. `None` when unreadable: such
    /// a Workload is never chosen as a victim.
    pub workload: Option<PendingWorkload>,
    /// When its `QuotaReserved` condition turned true: victims admitted last go first.
    pub reserved_at: Option<Timestamp>,
}

/// A ProvisioningRequestConfig as Kueue's ProvisioningRequest controller reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProvisioningRequestConfig {
    /// `managedResources`: the podsets that use one join the request (empty: every podset).
    pub managed_resources: Vec<String>,
    /// `provisioningClassName`.
    pub class_name: String,
    /// `podSetMergePolicy`: how the joining podsets merge into the request's PodSets (`None`:
    /// each is a PodSet of its own).
    pub pod_set_merge_policy: Option<PodSetMergePolicy>,
}

/// Everything placement reads from a cluster.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub cluster_queues: Vec<ClusterQueue>,
    pub cohorts: Vec<Cohort>,
    pub resource_flavors: Vec<ResourceFlavor>,
    pub local_queues: Vec<LocalQueue>,
    pub admission_checks: Vec<AdmissionCheck>,
    /// ProvisioningRequestConfigs by name, with their `spec.managedResources` (empty: the
    /// requests provision every podset).
    pub provisioning_request_configs: BTreeMap<String, ProvisioningRequestConfig>,
    pub workload_priority_classes: BTreeMap<String, i32>,
    pub priority_classes: BTreeMap<String, i32>,
    /// The value of the `globalDefault` PriorityClass, if any.
    pub default_priority: Option<i32>,
    /// Namespace labels. A namespace that is not listed is assumed to exist with only
    /// `kubernetes.io/metadata.name`.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub reserving_workloads: Vec<ReservingWorkload>,
    /// Live Workloads waiting for quota; they compete with the plan's jobs.
    pub pending_workloads: Vec<PendingWorkload>,
    /// Whether any Workload object was read (then live usage comes from Workloads, not from
    /// ClusterQueue status).
    pub workloads_observed: bool,
}

impl Cluster {
    /// Reads every object it can and skips (logging why) the ones it cannot: for live objects,
    /// which gkq does not own and which are not its to judge.
    pub fn from_objects_lenient<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Cluster {
        let mut cluster = Cluster::default();
        for object in objects {
            if let Err(e) = cluster.add_object(object) {
                tracing::debug!("placement skips an object: {e}");
            }
        }
        cluster
    }

    /// Reads every object it knows; unknown kinds are ignored. All problems are returned together.
    pub fn from_objects<'a>(
        objects: impl IntoIterator<Item = &'a Value>,
    ) -> Result<Cluster, ParseErrors> {
        let mut cluster = Cluster::default();
        let mut errors = Vec::new();
        for object in objects {
            if let Err(ParseErrors(mut more)) = cluster.add_object(object) {
                errors.append(&mut more);
            }
        }
        if errors.is_empty() {
            Ok(cluster)
        } else {
            Err(ParseErrors(errors))
        }
    }

    /// Adds one object; returns its problems (the rest of the object is still used when possible).
    pub fn add_object(&mut self, object: &Value) -> Result<(), ParseErrors> {
        // Most objects are of kinds placement ignores: their description is written only if
        // reading them finds a problem.
        let ctx = Context::unnamed();
        let root = ctx.root(object);
        let api_version = root.get("apiVersion").str().unwrap_or_default();
        let group = api_version.split('/').next().unwrap_or_default();
        let kind = root.get("kind").str().unwrap_or_default();
        let name = || {
            root.get("metadata")
                .get("name")
                .string()
                .unwrap_or_default()
        };
        match (group, kind) {
            ("kueue.x-k8s.io", "ClusterQueue") => {
                let cq = read_cluster_queue(&root, name());
                self.cluster_queues.push(cq);
            }
            ("kueue.x-k8s.io", "Cohort") => self.cohorts.push(read_cohort(&root, name())),
            ("kueue.x-k8s.io", "ResourceFlavor") => {
                self.resource_flavors
                    .push(read_resource_flavor(&root, name()));
            }
            ("kueue.x-k8s.io", "LocalQueue") => {
                self.local_queues.push(read_local_queue(&root, &name));
            }
            ("kueue.x-k8s.io", "AdmissionCheck") => {
                self.admission_checks
                    .push(read_admission_check(&root, &name));
            }
            ("kueue.x-k8s.io", "ProvisioningRequestConfig") => {
                let spec = root.get("spec");
                let managed_resources = spec
                    .get("managedResources")
                    .items()
                    .iter()
                    .filter_map(|r| r.string())
                    .collect();
                let policy = spec.get("podSetMergePolicy");
                let pod_set_merge_policy = policy.str().and_then(|text| {
                    let parsed = PodSetMergePolicy::parse(text);
                    if parsed.is_none() {
                        policy.report(format!(
                            "{text:?} is not a podSetMergePolicy (IdenticalPodTemplates, IdenticalWorkloadSchedulingRequirements)"
                        ));
                    }
                    parsed
                });
                let config = ProvisioningRequestConfig {
                    managed_resources,
                    class_name: spec
                        .get("provisioningClassName")
                        .string()
                        .unwrap_or_default(),
                    pod_set_merge_policy,
                };
                self.provisioning_request_configs.insert(name(), config);
            }
            ("kueue.x-k8s.io", "WorkloadPriorityClass") => {
                let value = root.get("value").i32().unwrap_or(0);
                self.workload_priority_classes.insert(name(), value);
            }
            ("scheduling.k8s.io", "PriorityClass") => {
                let value = root.get("value").i32().unwrap_or(0);
                if root.get("globalDefault").bool().unwrap_or(false) {
                    self.default_priority = Some(value);
                }
                self.priority_classes.insert(name(), value);
            }
            ("v1", "Namespace") => {
                let mut labels = root.get("metadata").get("labels").string_map();
                let namespace = name();
                labels
                    .entry("kubernetes.io/metadata.name".to_string())
                    .or_insert_with(|| namespace.clone());
                self.namespaces.insert(namespace, labels);
            }
            ("kueue.x-k8s.io", "Workload") => {
                self.workloads_observed = true;
                self.add_workload(object, &root);
            }
            _ => {}
        }
        let errors = ctx.into_errors_of(|| describe(object));
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ParseErrors(errors))
        }
    }

    fn add_workload(&mut self, object: &Value, root: &Field<'_, '_>) {
        if condition(root, "Finished") == Some(true) {
            return;
        }
        if root.get("spec").get("active").bool() == Some(false) {
            return;
        }
        if condition(root, "QuotaReserved") == Some(true) {
            let metadata = root.get("metadata");
            let admission = root.get("status").get("admission");
            let mut usage = Vec::new();
            for assignment in admission.get("podSetAssignments").items() {
                let flavors = assignment.get("flavors").string_map();
                let resource_usage = assignment.get("resourceUsage").resource_list();
                for (resource, quantity) in resource_usage {
                    match flavors.get(&resource) {
                        Some(flavor) => usage.push((flavor.clone(), resource, quantity)),
                        // Kueue only records usage for resources that got a flavor.
                        None => continue,
                    }
                }
            }
            let reserved_at = root
                .get("status")
                .get("conditions")
                .items()
                .iter()
                .find(|c| c.get("type").str() == Some("QuotaReserved"))
                .and_then(|c| c.get("lastTransitionTime").str().and_then(Timestamp::parse));
            self.reserving_workloads.push(ReservingWorkload {
                namespace: metadata
                    .get("namespace")
                    .string()
                    .unwrap_or_else(|| "default".to_string()),
                name: metadata.get("name").string().unwrap_or_default(),
                cluster_queue: admission.get("clusterQueue").string().unwrap_or_default(),
                queue_name: root
                    .get("spec")
                    .get("queueName")
                    .string()
                    .filter(|q| !q.is_empty()),
                admitted: condition(root, "Admitted") == Some(true),
                usage,
                workload: PendingWorkload::from_object(object).ok(),
                reserved_at,
            });
            return;
        }
        match PendingWorkload::from_object(object) {
            Ok(workload) => self.pending_workloads.push(workload),
            Err(ParseErrors(errors)) => {
                for error in errors {
                    root.report(format!("{}: {}", error.field, error.message));
                }
            }
        }
    }

    /// The labels of a namespace, defaulting to `kubernetes.io/metadata.name` only.
    pub fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        self.namespaces.get(namespace).cloned().unwrap_or_else(|| {
            BTreeMap::from([(
                "kubernetes.io/metadata.name".to_string(),
                namespace.to_string(),
            )])
        })
    }
}

/// A Cohort named `name`.
fn read_cohort(root: &Field<'_, '_>, name: String) -> Cohort {
    let spec = root.get("spec");
    Cohort {
        name,
        parent: spec.get("parentName").string().filter(|p| !p.is_empty()),
        resource_groups: read_resource_groups(&spec.get("resourceGroups")),
    }
}

/// A ResourceFlavor named `name`.
fn read_resource_flavor(root: &Field<'_, '_>, name: String) -> ResourceFlavor {
    let spec = root.get("spec");
    ResourceFlavor {
        name,
        node_labels: spec.get("nodeLabels").string_map(),
        node_taints: spec
            .get("nodeTaints")
            .items()
            .iter()
            .map(|t| Taint {
                key: t.get("key").string().unwrap_or_default(),
                value: t.get("value").string().unwrap_or_default(),
                effect: t.get("effect").string().unwrap_or_default(),
            })
            .collect(),
        tolerations: spec
            .get("tolerations")
            .items()
            .iter()
            .map(read_toleration)
            .collect(),
        topology_name: spec.get("topologyName").string().filter(|t| !t.is_empty()),
    }
}

/// A LocalQueue (its name read by `name`, after its namespace).
fn read_local_queue(root: &Field<'_, '_>, name: &dyn Fn() -> String) -> LocalQueue {
    let metadata = root.get("metadata");
    let spec = root.get("spec");
    LocalQueue {
        namespace: metadata
            .get("namespace")
            .string()
            .unwrap_or_else(|| "default".to_string()),
        name: name(),
        cluster_queue: spec.get("clusterQueue").string().unwrap_or_default(),
        stop_policy: spec
            .get("stopPolicy")
            .string()
            .unwrap_or_else(|| "None".to_string()),
    }
}

/// An AdmissionCheck (its name read by `name`, after its parameters).
fn read_admission_check(root: &Field<'_, '_>, name: &dyn Fn() -> String) -> AdmissionCheck {
    let spec = root.get("spec");
    let parameters = spec.get("parameters");
    let parameters = parameters.is_present().then(|| {
        (
            parameters.get("kind").string().unwrap_or_default(),
            parameters.get("name").string().unwrap_or_default(),
        )
    });
    AdmissionCheck {
        name: name(),
        controller_name: spec.get("controllerName").string().unwrap_or_default(),
        parameters,
        active_condition: condition(root, "Active"),
    }
}

/// `status.conditions[type]` as a boolean, if present.
fn condition(root: &Field<'_, '_>, kind: &str) -> Option<bool> {
    root.get("status")
        .get("conditions")
        .items()
        .iter()
        .find(|c| c.get("type").str() == Some(kind))
        .and_then(|c| c.get("status").str().map(|s| s == "True"))
}

fn read_resource_groups(groups: &Field<'_, '_>) -> Vec<ResourceGroup> {
    groups
        .items()
        .iter()
        .map(|group| ResourceGroup {
            covered_resources: group
                .get("coveredResources")
                .items()
                .iter()
                .filter_map(|r| r.string())
                .collect(),
            flavors: group
                .get("flavors")
                .items()
                .iter()
                .map(|flavor| FlavorQuotas {
                    flavor: flavor.get("name").string().unwrap_or_default(),
                    resources: flavor
                        .get("resources")
                        .items()
                        .iter()
                        .map(|resource| {
                            let nominal = resource.get("nominalQuota");
                            ResourceQuota {
                                resource: resource.get("name").string().unwrap_or_default(),
                                nominal: nominal.quantity().unwrap_or(Quantity::ZERO),
                                borrowing_limit: resource.get("borrowingLimit").quantity(),
                                lending_limit: resource.get("lendingLimit").quantity(),
                            }
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

fn read_fungibility_policy(field: &Field<'_, '_>, default: FungibilityPolicy) -> FungibilityPolicy {
    match field.str() {
        None => default,
        Some("TryNextFlavor") => FungibilityPolicy::TryNextFlavor,
        // v1beta1's Borrow and Preempt convert to MayStopSearch.
        Some("MayStopSearch" | "Borrow" | "Preempt") => FungibilityPolicy::MayStopSearch,
        Some(other) => {
            field.report(format!(
                "{other:?} is not a flavor fungibility policy (MayStopSearch or TryNextFlavor)"
            ));
            default
        }
    }
}

fn read_label_selector(field: &Field<'_, '_>) -> Option<LabelSelector> {
    if !field.is_present() {
        return None;
    }
    Some(LabelSelector {
        match_labels: field.get("matchLabels").string_map(),
        match_expressions: field
            .get("matchExpressions")
            .items()
            .iter()
            .filter_map(read_requirement)
            .collect(),
    })
}

fn read_cluster_queue(root: &Field<'_, '_>, name: String) -> ClusterQueue {
    let spec = root.get("spec");
    let cohort = spec
        .get("cohortName")
        .string()
        .or_else(|| spec.get("cohort").string())
        .filter(|c| !c.is_empty());
    let fungibility = spec.get("flavorFungibility");
    let defaults = FlavorFungibility::default();
    let preference_field = fungibility.get("preference");
    let preference = match preference_field.str() {
        None => None,
        Some("BorrowingOverPreemption") => Some(FungibilityPreference::BorrowingOverPreemption),
        Some("PreemptionOverBorrowing") => Some(FungibilityPreference::PreemptionOverBorrowing),
        Some(other) => {
            preference_field.report(format!("{other:?} is not a flavor fungibility preference"));
            None
        }
    };
    let strategy_field = spec.get("queueingStrategy");
    let queueing_strategy = match strategy_field.str() {
        None | Some("BestEffortFIFO") => QueueingStrategy::BestEffortFifo,
        Some("StrictFIFO") => QueueingStrategy::StrictFifo,
        Some(other) => {
            strategy_field.report(format!(
                "{other:?} is not a queueing strategy (BestEffortFIFO or StrictFIFO)"
            ));
            QueueingStrategy::BestEffortFifo
        }
    };
    let preemption = spec.get("preemption");
    let never = |field: Field<'_, '_>| field.string().unwrap_or_else(|| "Never".to_string());
    let mut admission_checks: Vec<AdmissionCheckRule> = spec
        .get("admissionChecksStrategy")
        .get("admissionChecks")
        .items()
        .iter()
        .map(|rule| AdmissionCheckRule {
            name: rule.get("name").string().unwrap_or_default(),
            on_flavors: rule
                .get("onFlavors")
                .items()
                .iter()
                .filter_map(|f| f.string())
                .collect(),
        })
        .collect();
    // v1beta1 `spec.admissionChecks: [name]` applies to every flavor.
    for legacy in spec.get("admissionChecks").items() {
        if let Some(name) = legacy.string() {
            admission_checks.push(AdmissionCheckRule {
                name,
                on_flavors: Vec::new(),
            });
        }
    }
    let status_reservation = root
        .get("status")
        .get("flavorsReservation")
        .items()
        .iter()
        .flat_map(|flavor| {
            let flavor_name = flavor.get("name").string().unwrap_or_default();
            flavor
                .get("resources")
                .items()
                .iter()
                .filter_map(|r| {
                    Some((
                        flavor_name.clone(),
                        r.get("name").string()?,
                        r.get("total").quantity()?,
                    ))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    ClusterQueue {
        name,
        cohort,
        resource_groups: read_resource_groups(&spec.get("resourceGroups")),
        flavor_fungibility: FlavorFungibility {
            when_can_borrow: read_fungibility_policy(
                &fungibility.get("whenCanBorrow"),
                defaults.when_can_borrow,
            ),
            when_can_preempt: read_fungibility_policy(
                &fungibility.get("whenCanPreempt"),
                defaults.when_can_preempt,
            ),
            preference,
        },
        queueing_strategy,
        preemption: PreemptionPolicy {
            within_cluster_queue: never(preemption.get("withinClusterQueue")),
            reclaim_within_cohort: never(preemption.get("reclaimWithinCohort")),
            borrow_within_cohort: never(preemption.get("borrowWithinCohort").get("policy")),
            max_priority_threshold: preemption
                .get("borrowWithinCohort")
                .get("maxPriorityThreshold")
                .i32(),
        },
        namespace_selector: read_label_selector(&spec.get("namespaceSelector")),
        admission_checks,
        stop_policy: spec
            .get("stopPolicy")
            .string()
            .unwrap_or_else(|| "None".to_string()),
        terminating: root.get("metadata").get("deletionTimestamp").is_present(),
        status_reservation,
    }
}
