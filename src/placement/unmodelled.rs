//! Kueue behaviour gkq does not reproduce, found in the objects a prediction reads, so that the
//! placements it affects say "not predicted" instead of a confident answer (docs/kueue.md, "What
//! gkq models").
//!
//! Each rule names the feature, the object and field that turn it on, and which ClusterQueues it
//! touches: a feature on a ClusterQueue in a cohort touches the whole cohort, since quota is
//! shared there; a feature gate or a cluster-wide setting touches every queue.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Placement;
use crate::vocab::object::{At, Field, condition_true, name_of, namespace_of};

/// Where the list of what gkq does and does not model lives.
pub const DOCS: &str = "docs/kueue.md#what-gkq-models";
/// Where the changes of the next Kueue minor release that gkq does not model are listed.
pub const NEXT_VERSION_DOCS: &str = "docs/kueue.md#kueue-v020-what-changes-for-placement";

/// The Kueue release whose rules gkq reproduces. Its patch releases are predicted alike; another
/// minor release is not ([`version_fit`]).
pub const MODELLED_VERSION: &str = "v0.19.2";
/// [`MODELLED_VERSION`]'s minor release, as messages name it.
pub const MODELLED_MINOR: &str = "v0.19";

/// The feature name of a Kueue release other than the modelled one.
const OTHER_VERSION: &str = "another Kueue release";

/// Kueue's manager as it runs, or will run once the plan is applied: its release and its feature
/// gates decide whether gkq's rules are Kueue's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manager {
    /// Its release (`v0.19.2`), or the image tag it runs when that is not a release; `None`:
    /// the caller states none (only the objects and gates are judged).
    pub version: Option<String>,
    pub feature_gates: BTreeMap<String, bool>,
    /// `--predict-anyway`: predict with [`MODELLED_VERSION`]'s rules whatever release runs.
    pub predict_anyway: bool,
}

/// How a Kueue release relates to the one gkq models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionFit {
    /// The modelled minor release (any patch release of it).
    Modelled,
    /// Another minor release, as `vX.Y`.
    Other(String),
    /// Not a release gkq can read (a tag such as `latest`, or a digest).
    Unreadable(String),
}

/// `v0.19.7` and `0.19.0-rc.1` are of the modelled minor release; `v0.20.0` is `Other("v0.20")`.
pub fn version_fit(version: &str) -> VersionFit {
    let bare = version.strip_prefix('v').unwrap_or(version);
    let core = bare.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    let numbers: Option<Vec<u64>> = parts.iter().map(|p| p.parse().ok()).collect();
    match numbers.as_deref() {
        Some([major, minor, ..]) if (2..=3).contains(&parts.len()) => {
            let minor = format!("v{major}.{minor}");
            if minor == MODELLED_MINOR {
                VersionFit::Modelled
            } else {
                VersionFit::Other(minor)
            }
        }
        _ => VersionFit::Unreadable(version.to_string()),
    }
}

impl Manager {
    /// What about its release stops predictions: `None` when it is the modelled minor release,
    /// when no release is stated, or when the user asked to predict anyway.
    fn unmodelled_version(&self) -> Option<Unmodelled> {
        let version = self.version.as_deref()?;
        if self.predict_anyway {
            return None;
        }
        let cause = match version_fit(version) {
            VersionFit::Modelled => return None,
            VersionFit::Other(minor) => format!("Kueue {minor} is installed"),
            VersionFit::Unreadable(tag) => {
                format!("the installed Kueue's release is unknown (its manager runs `{tag}`)")
            }
        };
        Some(Unmodelled::everywhere(OTHER_VERSION, cause))
    }

    /// Whether placements are predicted with the modelled rules although another release runs
    /// (`--predict-anyway`).
    pub fn predicted_anyway(&self) -> bool {
        self.predict_anyway
            && self
                .version
                .as_deref()
                .is_some_and(|v| version_fit(v) != VersionFit::Modelled)
    }
}

/// The controller of MultiKueue's admission checks.
const MULTIKUEUE_CONTROLLER: &str = "kueue.x-k8s.io/multikueue";
/// A job's smallest acceptable parallelism: Kueue may admit it partially.
const MIN_PARALLELISM_ANNOTATION: &str = "kueue.x-k8s.io/job-min-parallelism";

/// Kueue v0.19.2's feature gates that change how every workload is scheduled, with their
/// default (`pkg/features/kube_features.go`, docs/kueue.md 1f). Setting one to another value changes rules gkq
/// reproduces only at the default. Gates for features a workload or queue opts into (TAS,
/// MultiKueue, partial admission, admission fair sharing, elastic jobs, DRA) are judged by the
/// objects that opt in; gates of metrics, visibility, retention and API plumbing change no
/// placement. A gate not in either list is unknown, and treated like the first kind.
const SCHEDULING_GATES: [(&str, bool); 10] = [
    ("FlavorFungibility", true),
    ("FlavorFungibilityPreserveScanProgress", true),
    ("QuotaCheckStrategy", true),
    ("ConcurrentAdmission", false),
    ("PrioritySortingWithinCohort", true),
    ("LendingLimit", true),
    ("HierarchicalCohorts", true),
    ("ReclaimablePods", true),
    ("LocalQueueDefaulting", true),
    ("FlavorFungibilityImplicitPreferenceDefault", false),
];

/// Gates that change no placement gkq predicts on their own (see [`SCHEDULING_GATES`]).
const OPT_IN_OR_PLUMBING_GATES: [&str; 28] = [
    "SchedulingEquivalenceHashing",
    "CleanupProvisioningRequestsOnEviction",
    "AssignQueueLabelsForPods",
    "UnadmittedWorkloadsObservability",
    "ElasticJobsViaWorkloadSlices",
    "PartialAdmission",
    "TopologyAwareScheduling",
    "TASProfileLeastFreeCapacity",
    "TASProfileMixed",
    "TASFailedNodeReplacement",
    "TASFailedNodeReplacementFailFast",
    "TASReplaceNodeOnPodTermination",
    "TASBalancedPlacement",
    "MultiKueue",
    "MultiKueueBatchJobWithManagedBy",
    "MultiKueueAdaptersForCustomJobs",
    "MultiKueueAllowInsecureKubeconfigs",
    "MultiKueueClusterProfile",
    "AdmissionFairSharing",
    "DynamicResourceAllocation",
    "VisibilityOnDemand",
    "LocalQueueMetrics",
    "ObjectRetentionPolicies",
    "SanitizePodSets",
    "WorkloadRequestUseMergePatch",
    "PropagateBatchJobLabelsToWorkload",
    "FailureRecoveryPolicy",
    "ManagedJobsNamespaceSelectorAlwaysRespected",
];

/// Whether running Kueue with `gate` set to `enabled` changes placements gkq predicts.
pub fn gate_changes_scheduling(gate: &str, enabled: bool) -> bool {
    if OPT_IN_OR_PLUMBING_GATES.contains(&gate) {
        return false;
    }
    SCHEDULING_GATES
        .iter()
        .find(|(name, _)| *name == gate)
        .is_none_or(|(_, default)| *default != enabled)
}

/// One use of a feature gkq does not model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmodelled {
    /// The feature, as Kueue's documentation names it.
    pub feature: &'static str,
    /// The object and field that use it.
    pub cause: String,
    /// The ClusterQueues whose placements it changes; `None`: every queue.
    pub cluster_queues: Option<BTreeSet<String>>,
}

impl Unmodelled {
    fn everywhere(feature: &'static str, cause: String) -> Self {
        Unmodelled {
            feature,
            cause,
            cluster_queues: None,
        }
    }

    fn on(feature: &'static str, cause: String, cluster_queue: &str) -> Self {
        Unmodelled {
            feature,
            cause,
            cluster_queues: Some(BTreeSet::from([cluster_queue.to_string()])),
        }
    }

    /// `not predicted: <feature> is in use (<cause>); see <docs>`; for another Kueue release,
    /// `not predicted: Kueue vX.Y is installed; gkq models v0.19; see <docs>`.
    pub fn message(&self) -> String {
        if self.feature == OTHER_VERSION {
            return format!(
                "not predicted: {}; gkq models {MODELLED_MINOR}; see {NEXT_VERSION_DOCS}",
                self.cause
            );
        }
        format!(
            "not predicted: {} is in use ({}), which gkq does not model; see {DOCS}",
            self.feature, self.cause
        )
    }
}

/// What in `objects` (Kueue's world and the jobs about to be submitted) and in the manager (its
/// release, its non-default feature gates) uses behaviour gkq does not reproduce.
pub fn find(objects: &[&Value], manager: &Manager) -> Vec<Unmodelled> {
    let mut found: Vec<Unmodelled> = manager.unmodelled_version().into_iter().collect();
    for (gate, enabled) in manager
        .feature_gates
        .iter()
        .filter(|(gate, enabled)| gate_changes_scheduling(gate, **enabled))
    {
        found.push(Unmodelled::everywhere(
            "a feature gate that changes scheduling",
            format!(
                "Kueue's manager runs with {gate}={enabled}; gkq models Kueue {MODELLED_VERSION} with its default gates"
            ),
        ));
    }
    let cluster_queues: Vec<&Value> = objects
        .iter()
        .copied()
        .filter(|o| o["kind"] == "ClusterQueue")
        .collect();
    let queues_using = |check: &dyn Fn(&Value) -> bool| -> BTreeSet<String> {
        cluster_queues
            .iter()
            .filter(|cq| check(cq))
            .map(|cq| name_of(cq).to_string())
            .collect()
    };
    let local_queues = local_queues(objects);
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = name_of(object);
        match kind {
            "ClusterQueue" => {
                if object.at("/spec/admissionScope").is_some() {
                    found.push(Unmodelled::on(
                        "admission fair sharing",
                        format!("ClusterQueue {name} sets spec.admissionScope"),
                        name,
                    ));
                }
                if object.at("/spec/fairSharing").is_some() {
                    found.push(Unmodelled::on(
                        "fair sharing",
                        format!("ClusterQueue {name} sets spec.fairSharing"),
                        name,
                    ));
                }
            }
            "Cohort"
                if object
                    .at("/spec/fairSharing/weight")
                    .is_some_and(|w| w != 1) =>
            {
                found.push(Unmodelled::everywhere(
                    "fair sharing",
                    format!("Cohort {name} sets a fairSharing weight"),
                ));
            }
            "ResourceFlavor" if object.at("/spec/topologyName").is_some() => {
                let queues = queues_using(&|cq| flavors_of(cq).contains(name));
                found.push(Unmodelled {
                    feature: "topology-aware scheduling",
                    cause: format!("ResourceFlavor {name} sets spec.topologyName"),
                    cluster_queues: Some(queues),
                });
            }
            "AdmissionCheck"
                if object.at("/spec/controllerName").and_then(Value::as_str)
                    == Some(MULTIKUEUE_CONTROLLER) =>
            {
                let queues = queues_using(&|cq| checks_of(cq).contains(name));
                found.push(Unmodelled {
                    feature: "MultiKueue",
                    cause: format!("AdmissionCheck {name} is MultiKueue's"),
                    cluster_queues: Some(queues),
                });
            }
            "Workload" => found.extend(workload_features(object, &local_queues)),
            _ => found.extend(job_features(object)),
        }
    }
    found
}

/// `(namespace, LocalQueue) -> ClusterQueue`.
type LocalQueues = BTreeMap<(String, String), String>;

fn local_queues(objects: &[&Value]) -> LocalQueues {
    objects
        .iter()
        .filter(|o| o["kind"] == "LocalQueue")
        .filter_map(|lq| {
            let cq = lq.at("/spec/clusterQueue").and_then(Value::as_str)?;
            Some((
                (
                    namespace_of(lq).unwrap_or_default().to_string(),
                    name_of(lq).to_string(),
                ),
                cq.to_string(),
            ))
        })
        .collect()
}

fn workload_features(workload: &Value, local_queues: &LocalQueues) -> Vec<Unmodelled> {
    let key = format!(
        "Workload {}/{}",
        namespace_of(workload).unwrap_or_default(),
        name_of(workload)
    );
    let Some(cq) = workload
        .at("/status/admission/clusterQueue")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            let queue = workload.at("/spec/queueName").and_then(Value::as_str)?;
            let namespace = namespace_of(workload).unwrap_or_default();
            local_queues
                .get(&(namespace.to_string(), queue.to_string()))
                .cloned()
        })
    else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let finished = condition_true(workload, "Finished");
    if !finished && condition_true(workload, "Evicted") && condition_true(workload, "QuotaReserved")
    {
        found.push(Unmodelled::on(
            "a workload being evicted",
            format!("{key} is being evicted while it still holds quota"),
            &cq,
        ));
    }
    if let Some(reason) = held_back(workload) {
        found.push(Unmodelled::on(
            "a workload held back from its queue",
            format!("{key} has Requeued=False ({reason}): Kueue queues it again later"),
            &cq,
        ));
    }
    let pod_sets = workload
        .at("/spec/podSets")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if !finished && pod_sets.iter().any(|p| p.get("minCount").is_some()) {
        found.push(Unmodelled::on(
            "partial admission",
            format!("{key} sets podSets[].minCount"),
            &cq,
        ));
    }
    // Kueue fills `topologyRequest.podIndexLabel` (and sub-group labels) in every Job's podset;
    // only these keys ask for a topology.
    let asks_for_topology = |p: &Value| {
        p.get("topologyRequest").is_some_and(|t| {
            [
                "required",
                "preferred",
                "unconstrained",
                "podSetSliceRequiredTopology",
            ]
            .iter()
            .any(|key| t.get(key).is_some())
        })
    };
    if !finished && pod_sets.iter().any(asks_for_topology) {
        found.push(Unmodelled::on(
            "topology-aware scheduling",
            format!("{key} asks for a topology in spec.podSets[].topologyRequest"),
            &cq,
        ));
    }
    found
}

/// The reason of a waiting Workload's `Requeued=False` condition: Kueue keeps it out of its
/// queue until a backoff ends or something changes (Kueue v0.19.2
/// `pkg/cache/queue/cluster_queue.go`, `backoffWaitingTimeExpired`). Those a stopped queue
/// evicted are modelled: they queue again once the queue runs (docs/kueue.md 1g).
fn held_back(workload: &Value) -> Option<&str> {
    if condition_true(workload, "QuotaReserved") || condition_true(workload, "Finished") {
        return None;
    }
    let requeued = workload
        .at("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Requeued")?;
    let reason = requeued["reason"].as_str().unwrap_or("no reason");
    (requeued["status"] == "False"
        && !matches!(reason, "ClusterQueueStopped" | "LocalQueueStopped"))
    .then_some(reason)
}

/// Features a job about to be submitted asks for, on every queue (its queue is only known once
/// placed; [`mark`] applies it to that job's own placement).
fn job_features(job: &Value) -> Vec<Unmodelled> {
    let kind = job["kind"].as_str().unwrap_or_default();
    if !matches!(kind, "Job" | "RayJob" | "JobSet") {
        return Vec::new();
    }
    let key = format!(
        "{kind} {}/{}",
        namespace_of(job).unwrap_or_default(),
        name_of(job)
    );
    let mut found = Vec::new();
    if annotation(job, MIN_PARALLELISM_ANNOTATION).is_some() {
        found.push(Unmodelled {
            feature: "partial admission",
            cause: format!("{key} sets {MIN_PARALLELISM_ANNOTATION}"),
            cluster_queues: Some(BTreeSet::new()),
        });
    }
    found
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .at("/metadata/annotations")
        .and_then(|a| a.field(key))
        .and_then(Value::as_str)
}

fn flavors_of(cluster_queue: &Value) -> BTreeSet<&str> {
    cluster_queue
        .at("/spec/resourceGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("flavors").and_then(Value::as_array))
        .flatten()
        .filter_map(|f| f.get("name").and_then(Value::as_str))
        .collect()
}

fn checks_of(cluster_queue: &Value) -> BTreeSet<&str> {
    let plain = cluster_queue
        .at("/spec/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    let strategy = cluster_queue
        .at("/spec/admissionChecksStrategy/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str));
    plain.chain(strategy).collect()
}

/// The cohort of each ClusterQueue that has one.
fn cohorts(objects: &[&Value]) -> BTreeMap<String, String> {
    objects
        .iter()
        .filter(|o| o["kind"] == "ClusterQueue")
        .filter_map(|cq| {
            let cohort = cq.at("/spec/cohortName").and_then(Value::as_str)?;
            Some((name_of(cq).to_string(), cohort.to_string()))
        })
        .collect()
}

/// Marks each placement that a found feature touches: its ClusterQueue, or any ClusterQueue of
/// its cohort, uses the feature (or the feature is everywhere, or the job itself asks for it).
pub fn mark(placements: &mut [Placement], found: &[Unmodelled], objects: &[&Value]) {
    if found.is_empty() {
        return;
    }
    let cohort_of = cohorts(objects);
    let touched = |feature: &Unmodelled, placement: &Placement| -> bool {
        let Some(queues) = &feature.cluster_queues else {
            return true;
        };
        if queues.is_empty() {
            // A job's own request: the job is named in the cause.
            return feature.cause.contains(&format!(
                "{} {}/{}",
                placement.kind, placement.namespace, placement.job
            ));
        }
        let Some(cq) = &placement.cluster_queue else {
            return false;
        };
        queues.contains(cq)
            || cohort_of.get(cq).is_some_and(|cohort| {
                queues
                    .iter()
                    .any(|q| cohort_of.get(q).is_some_and(|c| c == cohort))
            })
    };
    for placement in placements {
        let messages: Vec<String> = found
            .iter()
            .filter(|f| touched(f, placement))
            .map(Unmodelled::message)
            .collect();
        if let Some(first) = messages.into_iter().next() {
            placement.not_predicted = Some(first);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{PlacementState, PodSetPlacement};
    use serde_json::json;

    /// A waiting Workload with `Requeued=False` is held out of its queue for a backoff or an
    /// event gkq does not model, unless a queue stop put it there (modelled).
    #[test]
    fn a_workload_held_back_from_its_queue_is_not_predicted() {
        let workload = |reason: &str| {
            json!({"kind": "Workload", "metadata": {"namespace": "team", "name": "w"},
                "spec": {"queueName": "lq"},
                "status": {"conditions": [
                    {"type": "QuotaReserved", "status": "False", "reason": "Pending"},
                    {"type": "Requeued", "status": "False", "reason": reason}]}})
        };
        let lq = json!({"kind": "LocalQueue", "metadata": {"namespace": "team", "name": "lq"},
            "spec": {"clusterQueue": "cq"}});
        let backoff = workload("PodsReadyTimeout");
        let found = find(&[&lq, &backoff], &Manager::default());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].feature, "a workload held back from its queue");
        assert_eq!(
            found[0].cluster_queues,
            Some(BTreeSet::from(["cq".to_string()]))
        );
        for modelled in ["ClusterQueueStopped", "LocalQueueStopped"] {
            let stopped = workload(modelled);
            assert!(
                find(&[&lq, &stopped], &Manager::default()).is_empty(),
                "{modelled}"
            );
        }
    }

    fn placement(cluster_queue: &str, job: &str) -> Placement {
        Placement {
            job: job.into(),
            namespace: "team".into(),
            kind: "Job".into(),
            cluster_queue: Some(cluster_queue.into()),
            podsets: vec![PodSetPlacement::new("main".into(), 1, BTreeMap::new())],
            state: PlacementState::Pending,
            reason: None,
            admission_checks: vec![],
            reclaim: None,
            preempts: vec![],
            preempted_by: None,
            not_predicted: None,
            attempts: Vec::new(),
        }
    }

    fn cq(name: &str, cohort: Option<&str>, flavors: &[&str], checks: &[&str]) -> Value {
        let mut cq = json!({"kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors":
                flavors.iter().map(|f| json!({"name": f})).collect::<Vec<_>>()}],
            "admissionChecks": checks,
        }});
        if let Some(cohort) = cohort {
            cq["spec"]["cohortName"] = json!(cohort);
        }
        cq
    }

    fn marked(objects: &[Value], gates: &[(&str, bool)], placements: &[Placement]) -> Vec<bool> {
        let objects: Vec<&Value> = objects.iter().collect();
        let manager = Manager {
            feature_gates: gates.iter().map(|(g, v)| (g.to_string(), *v)).collect(),
            ..Manager::default()
        };
        let found = find(&objects, &manager);
        let mut placements = placements.to_vec();
        mark(&mut placements, &found, &objects);
        placements
            .iter()
            .map(|p| p.not_predicted.is_some())
            .collect()
    }

    /// A topology flavor touches the queues that list it and, through quota sharing, their
    /// cohort; a queue outside the cohort keeps its prediction.
    #[test]
    fn a_topology_flavor_touches_its_queues_and_their_cohort() {
        let objects = vec![
            json!({"kind": "ResourceFlavor", "metadata": {"name": "tas"},
                   "spec": {"topologyName": "default"}}),
            cq("uses-tas", Some("c"), &["tas"], &[]),
            cq("same-cohort", Some("c"), &["plain"], &[]),
            cq("alone", None, &["plain"], &[]),
        ];
        let placements = [
            placement("uses-tas", "a"),
            placement("same-cohort", "b"),
            placement("alone", "c"),
        ];
        assert_eq!(marked(&objects, &[], &placements), [true, true, false]);
        let objects: Vec<&Value> = objects.iter().collect();
        let message = find(&objects, &Manager::default())[0].message();
        assert!(
            message.starts_with("not predicted: topology-aware scheduling is in use (ResourceFlavor tas sets spec.topologyName)"),
            "{message}"
        );
    }

    #[test]
    fn multikueue_fair_sharing_and_admission_fair_sharing_touch_their_queues() {
        let mut fair = cq("fair", None, &["f"], &[]);
        fair["spec"]["fairSharing"] = json!({"weight": 2});
        let mut afs = cq("afs", None, &["f"], &[]);
        afs["spec"]["admissionScope"] = json!({"admissionMode": "UsageBasedAdmissionFairSharing"});
        let objects = vec![
            json!({"kind": "AdmissionCheck", "metadata": {"name": "mk"},
                   "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}}),
            cq("multi", None, &["f"], &["mk"]),
            fair,
            afs,
            cq("plain", None, &["f"], &[]),
        ];
        let placements = [
            placement("multi", "a"),
            placement("fair", "b"),
            placement("afs", "c"),
            placement("plain", "d"),
        ];
        assert_eq!(
            marked(&objects, &[], &placements),
            [true, true, true, false]
        );
    }

    /// Evicted, partially admissible and elastic Workloads touch their queue, found through
    /// their LocalQueue while they wait; a finished one touches nothing.
    #[test]
    fn workloads_using_unmodelled_features_touch_their_queue() {
        let workload = |name: &str| {
            json!({"kind": "Workload",
                "metadata": {"name": name, "namespace": "team"},
                "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2}]}})
        };
        let lq = json!({"kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"},
                        "spec": {"clusterQueue": "cq"}});
        let partial = {
            let mut w = workload("partial");
            w["spec"]["podSets"][0]["minCount"] = json!(1);
            w
        };
        let objects = vec![lq.clone(), cq("cq", None, &["f"], &[]), partial];
        assert_eq!(
            marked(
                &objects,
                &[],
                &[placement("cq", "x"), placement("other", "y")]
            ),
            [true, false]
        );
        let mut finished = workload("done");
        finished["spec"]["podSets"][0]["minCount"] = json!(1);
        finished["status"] = json!({"conditions": [{"type": "Finished", "status": "True"}]});
        let objects = vec![lq, cq("cq", None, &["f"], &[]), finished];
        assert_eq!(marked(&objects, &[], &[placement("cq", "x")]), [false]);
    }

    #[test]
    fn a_scheduling_feature_gate_touches_every_queue_and_a_jobs_own_request_only_it() {
        let objects = vec![cq("cq", None, &["f"], &[])];
        assert_eq!(
            marked(
                &objects,
                &[("LendingLimit", false)],
                &[placement("cq", "x")]
            ),
            [true]
        );
        assert_eq!(
            marked(
                &objects,
                &[("NotAGateOfV0192", true)],
                &[placement("cq", "x")]
            ),
            [true]
        );
        // Set to its default, or a gate for what objects opt into: the objects decide.
        assert_eq!(
            marked(
                &objects,
                &[
                    ("LendingLimit", true),
                    ("ElasticJobsViaWorkloadSlices", true)
                ],
                &[placement("cq", "x")]
            ),
            [false]
        );
        let job = json!({"kind": "Job", "metadata": {"name": "x", "namespace": "team",
            "annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}}});
        let objects = vec![cq("cq", None, &["f"], &[]), job];
        assert_eq!(
            marked(&objects, &[], &[placement("cq", "x"), placement("cq", "y")]),
            [true, false]
        );
    }

    fn running(version: &str, predict_anyway: bool) -> Manager {
        Manager {
            version: Some(version.into()),
            feature_gates: BTreeMap::new(),
            predict_anyway,
        }
    }

    #[test]
    fn releases_are_judged_by_their_minor_version() {
        for modelled in [
            "v0.19.2",
            "v0.19.7",
            "0.19.0",
            "v0.19.0-rc.1",
            "v0.19.3+gke.1",
        ] {
            assert_eq!(version_fit(modelled), VersionFit::Modelled, "{modelled}");
        }
        assert_eq!(version_fit("v0.20.0"), VersionFit::Other("v0.20".into()));
        assert_eq!(version_fit("v0.18.6"), VersionFit::Other("v0.18".into()));
        assert_eq!(version_fit("v1.19.2"), VersionFit::Other("v1.19".into()));
        for unreadable in ["latest", "main", "sha256:abcd", "v0", "v0.19.2.1", ""] {
            assert_eq!(
                version_fit(unreadable),
                VersionFit::Unreadable(unreadable.into()),
                "{unreadable}"
            );
        }
    }

    /// Another minor release touches every placement, wherever it is queued; a patch release of
    /// the modelled one touches none; `--predict-anyway` predicts, and says it did.
    #[test]
    fn another_minor_release_touches_every_placement_unless_predicted_anyway() {
        let objects = [cq("a", None, &["f"], &[]), cq("b", Some("c"), &["f"], &[])];
        let objects: Vec<&Value> = objects.iter().collect();
        let placements = [placement("a", "x"), placement("b", "y")];
        let marked_by = |manager: &Manager| {
            let found = find(&objects, manager);
            let mut placements = placements.to_vec();
            mark(&mut placements, &found, &objects);
            placements
                .into_iter()
                .map(|p| p.not_predicted)
                .collect::<Vec<_>>()
        };
        let other = marked_by(&running("v0.20.0", false));
        for message in &other {
            let message = message.as_deref().expect("not predicted");
            assert!(
                message.starts_with("not predicted: Kueue v0.20 is installed; gkq models v0.19"),
                "{message}"
            );
        }
        assert_eq!(marked_by(&running("v0.19.7", false)), [None, None]);
        assert_eq!(marked_by(&running("v0.20.0", true)), [None, None]);
        assert!(running("v0.20.0", true).predicted_anyway());
        assert!(!running("v0.19.7", true).predicted_anyway());
        assert!(!running("v0.20.0", false).predicted_anyway());
        let unknown = marked_by(&running("latest", false));
        assert!(
            unknown[0]
                .as_deref()
                .is_some_and(|m| m.contains("release is unknown (its manager runs `latest`)")),
            "{unknown:?}"
        );
        assert_eq!(marked_by(&Manager::default()), [None, None]);
    }
}
