//! `plan(desired, live, options) -> Plan`: pair desired and live by address, diff, decide the
//! action for each resource, then order everything by the dependency graph. The steps, each in its
//! own file: [`judge`] decides one resource's action, [`gke`] plans the cluster and its node
//! pools, [`kube`] the Kubernetes objects, and [`order`] places every action in apply order.

mod gke;
mod judge;
mod kube;
mod order;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::graph::CycleError;
use super::sealed::{Sealed, seal};
use super::{Action, ActionKind, Notice, Orphan, Plan, PlanOptions, Step};
use crate::addr::{AddrError, ResourceAddr};
use crate::diff::fingerprint::fingerprint_with_fields;
use crate::model::DesiredState;
use crate::model::live::LiveState;

pub use judge::{Fingerprint, Judge};

/// Why no plan could be made. Each names what to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("Kubernetes object #{index} of the desired state has no address: {source}")]
    BadObject {
        index: usize,
        #[source]
        source: AddrError,
    },
    #[error("{addr} appears more than once in the desired state")]
    Duplicate { addr: ResourceAddr },
    #[error(transparent)]
    Cycle(#[from] CycleError),
}

/// Plans the changes that converge `live` to `desired`. Pure: no I/O, same inputs give the same
/// plan. See the [module docs](super) for the rules.
pub fn plan(
    desired: &DesiredState,
    live: &LiveState,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    plan_judged(desired, live, BTreeMap::new(), options)
}

/// [`plan`], with the actions of Kubernetes objects an observer already decided with this plan's
/// [`Judge`] as the server's answers arrived (`live` then holds only what else the plan reads of
/// them). An object without one is decided here from `live`, as [`plan`] does.
pub fn plan_judged(
    desired: &DesiredState,
    live: &LiveState,
    judged: BTreeMap<ResourceAddr, Action>,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    let mut planner = Planner::new(desired, live, options);
    planner.judged = judged;
    planner.plan_gke();
    planner.plan_kube()?;
    planner.finish()
}

/// An action before ordering, with the object whose references give its graph edges.
struct Draft<'a> {
    action: Action,
    /// The object whose references make graph edges (borrowed: plans of thousands of objects
    /// should not copy each one again for this).
    graph_object: Option<&'a Value>,
}

struct Planner<'a> {
    desired: &'a DesiredState,
    live: &'a LiveState,
    options: &'a PlanOptions,
    judge: Judge,
    /// Actions an observer decided already (see [`plan_judged`]).
    judged: BTreeMap<ResourceAddr, Action>,
    drafts: BTreeMap<ResourceAddr, Draft<'a>>,
    /// What gkq owns outside the spec and leaves in place (no `prune`).
    orphans: Vec<Orphan>,
    notices: Vec<Notice>,
    sealed: Sealed,
}

const NOT_OWNED: &str = "it lacks gkq's ownership labels, and gkq does not change what it does not own \
     (`gkq apply --adopt` takes it over)";

impl<'a> Planner<'a> {
    fn new(desired: &'a DesiredState, live: &'a LiveState, options: &'a PlanOptions) -> Self {
        Planner {
            desired,
            live,
            options,
            judge: Judge::new(desired, options),
            judged: BTreeMap::new(),
            drafts: BTreeMap::new(),
            orphans: Vec::new(),
            notices: Vec::new(),
            sealed: Sealed::default(),
        }
    }

    fn notice(&mut self, addr: Option<&ResourceAddr>, message: impl Into<String>) {
        self.notices.push(Notice::new(addr.cloned(), message));
    }

    /// Records a resource gkq owns that the spec no longer names and that this plan leaves in
    /// place; what it holds is added once Kueue's Workloads are read
    /// ([`super::placements::annotate`]).
    fn orphan(&mut self, addr: &ResourceAddr, kind: &str) {
        self.orphans.push(Orphan {
            address: addr.clone(),
            kind: kind.to_string(),
            namespace: addr.namespace.clone(),
            name: addr.name.clone(),
            holds: Vec::new(),
        });
    }

    /// Adds an action: its diff of a new resource, and its sensitive values sealed away from
    /// what is shown and saved.
    fn add(&mut self, mut action: Action, graph_object: Option<&'a Value>) {
        explain_kueue_restart(&mut action);
        if action.kind == ActionKind::Create && action.diff.is_empty() {
            action.diff = self
                .judge
                .shown_text_diff(None, action.desired.as_deref().cloned());
        }
        if let Some(real) = seal(&mut action, &self.judge.redactor) {
            self.sealed.insert(action.addr.clone(), real);
        }
        self.drafts.insert(
            action.addr.clone(),
            Draft {
                action,
                graph_object,
            },
        );
    }
}

/// An update of Kueue's installation that changes the frameworks its configuration lists (JobSet
/// installed where it was `none`) says what it does: the configuration ConfigMap is rewritten and
/// the manager restarts, since Kueue reads its configuration only when it starts (its pod
/// template carries the configuration's digest, `model::kueue_install::CONFIG_DIGEST_ANNOTATION`).
fn explain_kueue_restart(action: &mut Action) {
    if action.addr.kind != crate::addr::ResourceKind::KueueInstall
        || action.kind != ActionKind::Update
    {
        return;
    }
    let listed: Vec<&str> = action
        .changes
        .iter()
        .filter(|change| change.path.starts_with("spec.frameworks"))
        .filter_map(|change| change.path.split('"').nth(1))
        .collect();
    if listed.is_empty() {
        return;
    }
    action.reason = format!(
        "{}; Kueue's configuration ({}) comes to list {} (JobSet is installed), and Kueue's manager restarts to read it",
        action.reason,
        crate::model::kueue_install::CONFIG_MAP,
        listed.join(", ")
    );
}

/// What an action on an existing resource was planned against: its live fingerprint and the
/// fingerprint's parts by field (see [`fingerprint_with_fields`]).
type LiveBasis = (Option<String>, BTreeMap<String, String>);

fn live_basis(addr: &ResourceAddr, desired: Option<&Value>, live: &Value) -> LiveBasis {
    let (fingerprint, fields) = fingerprint_with_fields(addr, desired, live);
    (Some(fingerprint), fields)
}

fn create_action(addr: &ResourceAddr, reason: String, step: Step, desired: Arc<Value>) -> Action {
    Action {
        addr: addr.clone(),
        kind: ActionKind::Create,
        reason,
        replace_strategy: None,
        blocked: None,
        changes: Vec::new(),
        diff: String::new(),
        steps: vec![step],
        desired: Some(desired),
        live_fingerprint: None,
        live_fields: BTreeMap::new(),
        sensitive: false,
        depends_on: Vec::new(),
        conflicts: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KueueInstall;
    use crate::model::live::{GkeLive, KubeLive, KubeObject};
    use crate::spec::types::InstallMode;
    use serde_json::json;

    fn owned_labels() -> Value {
        json!({"app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "c"})
    }

    fn kube_objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": "on-demand", "labels": owned_labels()}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "cq", "labels": owned_labels()},
                "spec": {"resourceGroups": [{"flavors": [{"name": "on-demand"}]}]}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "default", "labels": owned_labels()},
                "spec": {"clusterQueue": "cq"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "script", "namespace": "default", "labels": owned_labels()},
                "data": {"train.py": "print(1)"}}),
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "job", "namespace": "default",
                             "labels": {"kueue.x-k8s.io/queue-name": "lq", "app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "c"}},
                "spec": {"entrypoint": "python /s/train.py",
                         "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"volumes": [{"name": "s", "configMap": {"name": "script"}}]}}}}}}),
        ]
    }

    fn desired() -> DesiredState {
        let mut desired = crate::model::desired_for_tests(kube_objects());
        desired.gke.cluster =
            json!({"name": "c", "resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"}});
        desired.gke.node_pools = vec![
            json!({"name": "pool", "config": {"resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"}}}),
        ];
        desired.kueue.mode = InstallMode::Managed;
        desired.kueue.manifests = KueueInstall::default_manifests("v0.19.2");
        desired
    }

    fn live_cluster() -> Value {
        json!({"name": "c", "resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"},
            "nodePools": [{"name": "pool", "config": {"resourceLabels": {"managed-by": "gkq", "gkq-stack": "c"}}}]})
    }

    fn observed(objects: impl IntoIterator<Item = Value>) -> KubeLive {
        KubeLive::Observed {
            objects: objects
                .into_iter()
                .map(|o| {
                    (
                        ResourceAddr::from_object(&o).unwrap(),
                        KubeObject {
                            live: Some(o),
                            predicted: None,
                        },
                    )
                })
                .collect(),
        }
    }

    fn order(plan: &Plan) -> Vec<String> {
        plan.changes()
            .map(|a| format!("{} {}", a.kind.glyph(), a.addr))
            .collect()
    }

    #[test]
    fn kubernetes_objects_wait_for_an_observer() {
        let live = LiveState {
            gke: GkeLive { cluster: None },
            kubernetes: KubeLive::NotObserved,
        };
        let plan = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert_eq!(order(&plan), ["+ gke.cluster/c", "+ gke.nodepool/pool"]);
        assert!(
            plan.notices[0]
                .message
                .contains("5 Kubernetes object(s) not compared")
        );
    }

    #[test]
    fn kubernetes_objects_follow_the_cluster_in_dependency_order() {
        let live = LiveState {
            gke: GkeLive { cluster: None },
            kubernetes: observed([]),
        };
        let plan = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert_eq!(
            order(&plan),
            [
                "+ gke.cluster/c",
                "+ gke.nodepool/pool",
                "+ kueue.resourceflavor/on-demand",
                "+ kueue.clusterqueue/cq",
                "+ kueue.localqueue/default/lq",
                "+ k8s.configmap/default/script",
                "+ ray.rayjob/default/job",
            ]
        );
        let job = plan
            .action(&ResourceAddr::ray_job("default", "job"))
            .unwrap();
        let deps: Vec<String> = job.depends_on.iter().map(ToString::to_string).collect();
        // The cluster comes in through the k8s.credentials node, which is not an action.
        assert_eq!(
            deps,
            [
                "gke.cluster/c",
                "kueue.localqueue/default/lq",
                "k8s.configmap/default/script"
            ]
        );
        assert!(job.reason.contains("known after apply"));
    }

    #[test]
    fn matching_objects_are_no_ops_and_a_changed_job_is_a_new_run() {
        let mut live_objects = kube_objects();
        live_objects[4]["spec"]["entrypoint"] = json!("python /s/old.py");
        live_objects[4]["spec"]["suspend"] = json!(true);
        live_objects[1]["status"] = json!({"pendingWorkloads": 1});
        let live = LiveState {
            gke: GkeLive {
                cluster: Some(live_cluster()),
            },
            kubernetes: observed(live_objects),
        };
        let plan = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert_eq!(order(&plan), ["-/+ ray.rayjob/default/job"]);
        let job = plan.changes().next().unwrap();
        assert!(matches!(
            &job.steps[..],
            [Step::KubeDelete { .. }, Step::KubeApply { .. }]
        ));
        assert_eq!(
            job.changes.len(),
            1,
            "spec.suspend belongs to Kueue: {:?}",
            job.changes
        );
    }

    #[test]
    fn owned_leftovers_are_pruned_last_in_reverse_dependency_order() {
        let mut live_objects = kube_objects();
        live_objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "old-cq", "labels": owned_labels()}, "spec": {}}),
        );
        live_objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "old-lq", "namespace": "default", "labels": owned_labels()},
            "spec": {"clusterQueue": "old-cq"}}),
        );
        live_objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "someone-elses", "namespace": "default"}}));
        // gkq's, but another GkqStack's: not this plan's to list or prune.
        live_objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "another-stacks", "namespace": "default", "labels": owned_labels(),
                         "annotations": {"gkq.dev/owner": "team/other"}}}));
        let live = LiveState {
            gke: GkeLive {
                cluster: Some(live_cluster()),
            },
            kubernetes: observed(live_objects),
        };
        let without_prune = plan(&desired(), &live, &PlanOptions::default()).unwrap();
        assert!(!without_prune.has_changes());
        // Listed as orphans (not someone else's ConfigMap), and the summary does not claim that
        // live state matches the spec.
        let orphans: Vec<(String, &str, Option<&str>, &str)> = without_prune
            .orphans
            .iter()
            .map(|o| {
                (
                    o.address.to_string(),
                    o.kind.as_str(),
                    o.namespace.as_deref(),
                    o.name.as_str(),
                )
            })
            .collect();
        assert_eq!(
            orphans,
            [
                (
                    "kueue.clusterqueue/old-cq".to_string(),
                    "ClusterQueue",
                    None,
                    "old-cq"
                ),
                (
                    "kueue.localqueue/default/old-lq".to_string(),
                    "LocalQueue",
                    Some("default"),
                    "old-lq"
                ),
            ]
        );
        assert!(
            without_prune.notices.is_empty(),
            "{:?}",
            without_prune.notices
        );
        assert_eq!(
            without_prune.summary.to_string(),
            "No changes to apply. 2 resources gkq manages are no longer in the spec and are left in place."
        );
        assert_eq!(
            without_prune.prune_command().as_deref(),
            Some("gkq apply --prune")
        );

        let pruning = PlanOptions {
            prune: true,
            ..PlanOptions::default()
        };
        let plan = plan(&desired(), &live, &pruning).unwrap();
        assert_eq!(
            order(&plan),
            [
                "- kueue.localqueue/default/old-lq",
                "- kueue.clusterqueue/old-cq"
            ]
        );
        assert!(plan.orphans.is_empty());
        let cq = plan
            .action(&"kueue.clusterqueue/old-cq".parse().unwrap())
            .unwrap();
        assert_eq!(
            cq.depends_on,
            ["kueue.localqueue/default/old-lq"
                .parse::<ResourceAddr>()
                .unwrap()]
        );
    }

    /// A kind switch with `--prune`: the RayJob `job` becomes a JobSet `job`. The pruned
    /// RayJob is deleted before the JobSet (and every other job) is submitted, the JobSet
    /// depends on that delete, and the other deletes keep their place at the end.
    #[test]
    fn a_kind_switch_deletes_the_old_kind_before_the_new_run() {
        let mut live_objects = kube_objects();
        live_objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "old-cq", "labels": owned_labels()}, "spec": {}}),
        );
        let live = LiveState {
            gke: GkeLive {
                cluster: Some(live_cluster()),
            },
            kubernetes: observed(live_objects),
        };
        let mut objects = kube_objects();
        let ray = objects.pop().unwrap();
        let jobset = |name: &str| {
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": name, "namespace": "default", "labels": ray["metadata"]["labels"]},
                "spec": {"replicatedJobs": []}})
        };
        objects.push(jobset("another"));
        objects.push(jobset("job"));
        let mut desired = desired();
        desired.kubernetes = objects.into_iter().map(Arc::new).collect();
        let pruning = PlanOptions {
            prune: true,
            ..PlanOptions::default()
        };
        let plan = plan(&desired, &live, &pruning).unwrap();
        assert_eq!(
            order(&plan),
            [
                "- ray.rayjob/default/job",
                "+ k8s.jobset/default/another",
                "+ k8s.jobset/default/job",
                "- kueue.clusterqueue/old-cq"
            ]
        );
        let new_run = plan
            .action(&"k8s.jobset/default/job".parse().unwrap())
            .unwrap();
        assert!(
            new_run
                .depends_on
                .contains(&"ray.rayjob/default/job".parse().unwrap()),
            "{:?}",
            new_run.depends_on
        );
        let other = plan
            .action(&"k8s.jobset/default/another".parse().unwrap())
            .unwrap();
        assert!(
            !other
                .depends_on
                .contains(&"ray.rayjob/default/job".parse().unwrap()),
            "{:?}",
            other.depends_on
        );
    }

    #[test]
    fn duplicates_and_nameless_objects_are_errors() {
        let mut twice = desired();
        twice.kubernetes.push(Arc::new(kube_objects()[0].clone()));
        let live = LiveState::default();
        assert!(matches!(
            plan(&twice, &live, &PlanOptions::default()),
            Err(PlanError::Duplicate { .. })
        ));
        let mut nameless = desired();
        nameless.kubernetes.push(Arc::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        ));
        assert!(matches!(
            plan(&nameless, &live, &PlanOptions::default()),
            Err(PlanError::BadObject { index: 5, .. })
        ));
    }
}
