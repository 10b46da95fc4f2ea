//! The cluster and the workloads compiled for fast, repeated flavor assignment: names interned
//! to dense ids, ClusterQueues resolved (groups, checks, activity), the quota tree built with
//! live usage, and podsets reduced to integer requests in Kueue units.

use std::collections::{BTreeMap, HashMap};

use super::active;
use super::amount::{Amount, PODS, request_value};
use super::objects::{
    Cluster, ClusterQueue, FlavorFungibility, PROVISIONING_REQUEST_CONTROLLER, PreemptionPolicy,
    QueueingStrategy, ResourceFlavor, ResourceGroup,
};
use super::podsets::PendingWorkload;
use super::quota::{Fr, Quota, QuotaTree, Usage};
use super::selectors::{LabelSelector, NodeSelectorTerm, Toleration};
use super::time::Timestamp;

/// The arrival of Workloads a stopped queue evicted, once it runs again: after the Workloads
/// already waiting (arrival 0), before jobs submitted later.
pub(crate) const REQUEUED_AFTER_A_STOP: usize = 1;

pub(crate) type FlavorId = usize;
pub(crate) type ResId = usize;

/// Dense ids for names.
#[derive(Debug, Default, Clone)]
pub(crate) struct Interner {
    names: Vec<String>,
    ids: HashMap<String, usize>,
}

impl Interner {
    pub fn intern(&mut self, name: &str) -> usize {
        // A handful of resource names is the norm; comparing beats hashing there.
        if self.names.len() <= 16 {
            if let Some(id) = self.names.iter().position(|n| n == name) {
                return id;
            }
        } else if let Some(&id) = self.ids.get(name) {
            return id;
        }
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }

    pub fn get(&self, name: &str) -> Option<usize> {
        self.ids.get(name).copied()
    }

    pub fn name(&self, id: usize) -> &str {
        &self.names[id]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct GroupModel {
    pub covered: Vec<ResId>,
    pub flavors: Vec<FlavorId>,
}

#[derive(Debug, Clone)]
pub(crate) struct CheckModel {
    pub name: String,
    /// The flavors the check applies to; every flavor of the queue when `onFlavors` is empty.
    pub flavors: Vec<FlavorId>,
    /// For a ProvisioningRequest check whose parameters resolve: the config's
    /// `managedResources` (empty: every resource).
    pub provisioning: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub(crate) struct CqModel {
    pub name: String,
    pub cohort: Option<String>,
    pub node: usize,
    pub groups: Vec<GroupModel>,
    /// Resource group of each quota resource.
    pub group_of: Vec<Option<usize>>,
    pub fungibility: FlavorFungibility,
    pub strategy: QueueingStrategy,
    pub preemption: PreemptionPolicy,
    pub namespace_selector: Option<LabelSelector>,
    pub checks: Vec<CheckModel>,
    /// Why Kueue would mark the queue inactive.
    pub inactive: Option<String>,
    pub covers_pods: bool,
    /// `(flavor, resource)` quotas in spec order, for the usage summary.
    pub quota_order: Vec<(FlavorId, ResId)>,
}

impl CqModel {
    pub fn group_of(&self, resource: ResId) -> Option<usize> {
        self.group_of.get(resource).copied().flatten()
    }
}

/// The scheduling-relevant template of a podset, shared by identical podsets so that flavor
/// eligibility is computed once per (shape, flavor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    pub node_selector: BTreeMap<String, String>,
    pub required_node_affinity: Option<Vec<NodeSelectorTerm>>,
    pub tolerations: Vec<Toleration>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PodSetModel {
    /// Total requests (per-pod value times count) in Kueue units, sorted by resource name.
    pub requests: Vec<(ResId, i64)>,
    pub shape: usize,
}

/// FNV-1a: shape keys are hashed once per podset, where SipHash's setup cost showed up in
/// profiles; the map still compares full shapes, so collisions cost time, never correctness.
struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv64 {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Why a workload never reaches the scheduler, or never gets a ClusterQueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// No queue label: Kueue ignores the job.
    Unmanaged,
    /// Kueue's webhook refuses the job.
    Rejected(String),
    /// Pending with this message and never scheduled (missing queue, inactive queue, missing
    /// priority class).
    Pending(String),
}

#[derive(Debug, Clone)]
pub(crate) struct WorkloadModel {
    pub cq: Option<usize>,
    pub blocked: Option<Blocked>,
    pub priority: i32,
    /// Kueue's queue-order timestamp (`PendingWorkload::queued_at`).
    pub queued_at: Option<Timestamp>,
    /// The Workload's uid, when it exists: the tie-break within one creation second.
    pub uid: Option<String>,
    /// Position in the input: the FIFO tie-breaker for jobs not created yet.
    pub seq: usize,
    /// When it reaches Kueue: 0 for what is already there; the plan's jobs `1..` in submission
    /// order, each after Kueue decided on everything that came before (as `apply` submits them).
    pub arrival: usize,
    pub pod_sets: Vec<PodSetModel>,
    /// Kueue's `ValidateAdmissibility` failure, checked when the workload is nominated.
    pub inadmissible: Option<Inadmissible>,
    /// Per admission check of its ClusterQueue: whether the check holds the workload once it
    /// applies. A ProvisioningRequest check does not when no podset with pods uses one of the
    /// config's `managedResources`: Kueue marks it Ready at once ("the provisioning request is
    /// not needed", `reqIsNeeded`).
    pub check_needed: Vec<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inadmissible {
    NamespaceMismatch,
    InvalidResources(String),
}

/// Why `workload` can never be admitted as it is, if so: its namespace is not the queue's
/// (`namespace_ok` false), or it requests resources that do not exist.
fn inadmissible(workload: &PendingWorkload, namespace_ok: bool) -> Option<Inadmissible> {
    let invalid: Vec<&String> = workload
        .pod_sets
        .iter()
        .flat_map(|ps| ps.invalid_resources.iter())
        .collect();
    if !namespace_ok {
        Some(Inadmissible::NamespaceMismatch)
    } else if invalid.len() == 1 {
        Some(Inadmissible::InvalidResources(invalid[0].clone()))
    } else if invalid.len() > 1 {
        let joined: Vec<&str> = invalid.iter().map(|s| s.as_str()).collect();
        Some(Inadmissible::InvalidResources(format!(
            "[{}]",
            joined.join(", ")
        )))
    } else {
        None
    }
}

impl Inadmissible {
    pub fn message(&self) -> String {
        match self {
            Inadmissible::NamespaceMismatch => {
                "workload namespace doesn't match ClusterQueue selector".to_string()
            }
            Inadmissible::InvalidResources(detail) => {
                format!("resources validation failed: {detail}")
            }
        }
    }
}

pub(crate) struct Model<'c> {
    pub cluster: &'c Cluster,
    pub resources: Interner,
    /// Resources `0..quota_resources` have quota somewhere and a `Fr` index.
    pub quota_resources: usize,
    pub flavors: Interner,
    pub flavor_defs: Vec<Option<&'c ResourceFlavor>>,
    pub cqs: Vec<CqModel>,
    pub cq_index: HashMap<String, usize>,
    pub tree: QuotaTree,
    pub live_usage: Usage,
    pub shapes: Vec<Shape>,
    /// Shape ids by hash of their parts, so that identical podsets share a shape without
    /// building a key each time.
    shape_index: HashMap<u64, Vec<usize>>,
    /// Whether a namespace matches each ClusterQueue's selector, by namespace then queue.
    namespace_matches: HashMap<String, Vec<Option<bool>>>,
    /// Per Workload of `cluster.reserving_workloads`: whether Kueue takes its quota back
    /// because its queues stopped or went away ([`active::released`]); such a Workload holds
    /// nothing and queues again.
    pub released: Vec<Option<active::Release>>,
}

impl<'c> Model<'c> {
    pub fn fr(&self, flavor: FlavorId, resource: ResId) -> Fr {
        flavor * self.quota_resources + resource
    }

    pub fn compile(cluster: &'c Cluster) -> Model<'c> {
        let mut resources = Interner::default();
        let mut flavors = Interner::default();
        let all_groups = cluster
            .cluster_queues
            .iter()
            .map(|cq| &cq.resource_groups)
            .chain(cluster.cohorts.iter().map(|c| &c.resource_groups));
        for groups in all_groups {
            for group in groups {
                for resource in &group.covered_resources {
                    resources.intern(resource);
                }
                for flavor in &group.flavors {
                    flavors.intern(&flavor.flavor);
                    for quota in &flavor.resources {
                        resources.intern(&quota.resource);
                    }
                }
            }
        }
        for flavor in &cluster.resource_flavors {
            flavors.intern(&flavor.name);
        }
        let quota_resources = resources.len();
        let mut flavor_defs = vec![None; flavors.len()];
        for flavor in &cluster.resource_flavors {
            if let Some(id) = flavors.get(&flavor.name) {
                flavor_defs[id] = Some(flavor);
            }
        }

        let mut model = Model {
            cluster,
            resources,
            quota_resources,
            flavors,
            flavor_defs,
            cqs: Vec::new(),
            cq_index: HashMap::new(),
            tree: QuotaTree::new(0),
            live_usage: QuotaTree::new(0).zero_usage(),
            shapes: Vec::new(),
            shape_index: HashMap::new(),
            namespace_matches: HashMap::new(),
            released: cluster
                .reserving_workloads
                .iter()
                .map(|w| active::released(cluster, w))
                .collect(),
        };
        model.tree = QuotaTree::new(model.flavors.len() * quota_resources);
        model.build_tree();
        model.live_usage = model.tree.zero_usage();
        model.add_live_usage();
        model
    }

    fn set_quotas(&mut self, node: usize, groups: &[ResourceGroup]) {
        for group in groups {
            for flavor in &group.flavors {
                let Some(f) = self.flavors.get(&flavor.flavor) else {
                    continue;
                };
                for quota in &flavor.resources {
                    let Some(r) = self.resources.get(&quota.resource) else {
                        continue;
                    };
                    let fr = self.fr(f, r);
                    let amount = |q| Amount::from_quota(&quota.resource, q);
                    self.tree.nodes[node].quotas[fr] = Some(Quota {
                        nominal: amount(quota.nominal),
                        borrowing_limit: quota.borrowing_limit.map(amount),
                        lending_limit: quota.lending_limit.map(amount),
                    });
                }
            }
        }
    }

    fn build_tree(&mut self) {
        let cluster = self.cluster;
        // Cohort nodes: declared ones and the ones only named by a ClusterQueue or a parent.
        let mut cohort_nodes: HashMap<String, usize> = HashMap::new();
        let mut names: Vec<String> = Vec::new();
        for cohort in &cluster.cohorts {
            names.push(cohort.name.clone());
            names.extend(cohort.parent.clone());
        }
        names.extend(
            cluster
                .cluster_queues
                .iter()
                .filter_map(|cq| cq.cohort.clone()),
        );
        for name in names {
            if let std::collections::hash_map::Entry::Vacant(entry) = cohort_nodes.entry(name) {
                entry.insert(self.tree.add_node(true));
            }
        }
        for cohort in &cluster.cohorts {
            let node = cohort_nodes[&cohort.name];
            self.set_quotas(node, &cohort.resource_groups);
        }
        // Parent links; a link that would close a cycle is dropped and reported.
        let mut cyclic: Vec<String> = Vec::new();
        for cohort in &cluster.cohorts {
            let Some(parent_name) = &cohort.parent else {
                continue;
            };
            let child = cohort_nodes[&cohort.name];
            let parent = cohort_nodes[parent_name];
            if self.tree.nodes[child].parent.is_some() {
                continue;
            }
            let mut ancestor = Some(parent);
            let mut closes_cycle = false;
            while let Some(node) = ancestor {
                if node == child {
                    closes_cycle = true;
                    break;
                }
                ancestor = self.tree.nodes[node].parent;
            }
            if closes_cycle {
                cyclic.push(cohort.name.clone());
            } else {
                self.tree.set_parent(child, parent);
            }
        }

        for cq in &cluster.cluster_queues {
            let node = self.tree.add_node(false);
            if let Some(cohort) = &cq.cohort {
                self.tree.set_parent(node, cohort_nodes[cohort]);
            }
            self.set_quotas(node, &cq.resource_groups);
            let compiled = self.compile_cq(cq, node, &cyclic);
            self.cq_index
                .entry(cq.name.clone())
                .or_insert(self.cqs.len());
            self.cqs.push(compiled);
        }
        self.tree.finish();
    }

    fn compile_cq(&self, cq: &ClusterQueue, node: usize, cyclic: &[String]) -> CqModel {
        let mut groups = Vec::new();
        let mut group_of = vec![None; self.quota_resources];
        let mut all_flavors = Vec::new();
        let mut quota_order = Vec::new();
        for (g, group) in cq.resource_groups.iter().enumerate() {
            let covered: Vec<ResId> = group
                .covered_resources
                .iter()
                .filter_map(|r| self.resources.get(r))
                .collect();
            for &r in &covered {
                group_of[r].get_or_insert(g);
            }
            let mut flavors = Vec::new();
            for flavor in &group.flavors {
                let Some(f) = self.flavors.get(&flavor.flavor) else {
                    continue;
                };
                flavors.push(f);
                all_flavors.push(f);
                for quota in &flavor.resources {
                    if let Some(r) = self.resources.get(&quota.resource) {
                        quota_order.push((f, r));
                    }
                }
            }
            groups.push(GroupModel { covered, flavors });
        }

        let mut checks = Vec::new();
        for rule in &cq.admission_checks {
            let provisioning = self
                .cluster
                .admission_checks
                .iter()
                .find(|ac| ac.name == rule.name)
                .filter(|ac| ac.controller_name == PROVISIONING_REQUEST_CONTROLLER)
                .and_then(|ac| active::provisioning_config(self.cluster, ac))
                .map(|config| config.managed_resources.clone());
            let flavors = if rule.on_flavors.is_empty() {
                all_flavors.clone()
            } else {
                rule.on_flavors
                    .iter()
                    .filter_map(|f| self.flavors.get(f))
                    .collect()
            };
            checks.push(CheckModel {
                name: rule.name.clone(),
                flavors,
                provisioning,
            });
        }

        let mut reasons: Vec<String> = active::cluster_queue_inactive(self.cluster, cq)
            .into_iter()
            .map(|r| r.message)
            .collect();
        if let Some(cohort) = &cq.cohort
            && self.cohort_in_cycle(cohort, cyclic)
        {
            reasons.push(format!(
                "cohort {cohort} is part of a cycle of parent cohorts"
            ));
        }
        let covers_pods = self
            .resources
            .get(PODS)
            .is_some_and(|pods| group_of[pods].is_some());
        CqModel {
            name: cq.name.clone(),
            cohort: cq.cohort.clone(),
            node,
            groups,
            group_of,
            fungibility: cq.flavor_fungibility,
            strategy: cq.queueing_strategy,
            preemption: cq.preemption.clone(),
            namespace_selector: cq.namespace_selector.clone(),
            checks,
            inactive: (!reasons.is_empty()).then(|| reasons.join(", ")),
            covers_pods,
            quota_order,
        }
    }

    fn cohort_in_cycle(&self, cohort: &str, cyclic: &[String]) -> bool {
        // The dropped link leaves the cycle's members as a chain ending at the cohort whose
        // parent link was refused; any cohort on that chain is affected.
        let mut current = Some(cohort.to_string());
        let mut steps = 0;
        while let Some(name) = current {
            if cyclic.contains(&name) {
                return true;
            }
            steps += 1;
            if steps > self.cluster.cohorts.len() + 1 {
                return false;
            }
            current = self
                .cluster
                .cohorts
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.parent.clone());
        }
        false
    }

    fn add_live_usage(&mut self) {
        let cluster = self.cluster;
        let mut entries: Vec<(&str, &str, &str, crate::vocab::quantity::Quantity)> = Vec::new();
        if cluster.workloads_observed {
            for (workload, released) in cluster.reserving_workloads.iter().zip(&self.released) {
                if released.is_some() {
                    continue;
                }
                for (flavor, resource, quantity) in &workload.usage {
                    entries.push((&workload.cluster_queue, flavor, resource, *quantity));
                }
            }
        } else {
            for cq in &cluster.cluster_queues {
                for (flavor, resource, quantity) in &cq.status_reservation {
                    entries.push((&cq.name, flavor, resource, *quantity));
                }
            }
        }
        for (cq_name, flavor, resource, quantity) in entries {
            let (Some(&cq), Some(f), Some(r)) = (
                self.cq_index.get(cq_name),
                self.flavors.get(flavor),
                self.resources.get(resource),
            ) else {
                continue;
            };
            if r >= self.quota_resources {
                continue;
            }
            let fr = self.fr(f, r);
            let value = Amount::new(request_value(resource, quantity));
            let node = self.cqs[cq].node;
            self.tree.add_usage(node, fr, value, &mut self.live_usage);
        }
    }

    fn shape_id(&mut self, pod_set: &super::podsets::PodSet) -> usize {
        use std::hash::{Hash, Hasher};
        let mut hasher = Fnv64::default();
        pod_set.node_selector.hash(&mut hasher);
        pod_set.required_node_affinity.hash(&mut hasher);
        pod_set.tolerations.hash(&mut hasher);
        let key = hasher.finish();
        let candidates = self.shape_index.entry(key).or_default();
        for &id in candidates.iter() {
            let shape = &self.shapes[id];
            if shape.node_selector == pod_set.node_selector
                && shape.required_node_affinity == pod_set.required_node_affinity
                && shape.tolerations == pod_set.tolerations
            {
                return id;
            }
        }
        self.shapes.push(Shape {
            node_selector: pod_set.node_selector.clone(),
            required_node_affinity: pod_set.required_node_affinity.clone(),
            tolerations: pod_set.tolerations.clone(),
        });
        let id = self.shapes.len() - 1;
        candidates.push(id);
        id
    }

    /// Resolves queue, priority and requests of a pending workload.
    pub fn compile_workload(&mut self, workload: &PendingWorkload, seq: usize) -> WorkloadModel {
        let mut compiled = WorkloadModel {
            cq: None,
            blocked: None,
            priority: 0,
            queued_at: workload.queued_at,
            uid: workload.uid.clone(),
            seq,
            arrival: 0,
            pod_sets: Vec::with_capacity(workload.pod_sets.len()),
            inadmissible: None,
            check_needed: Vec::new(),
        };
        if let Some(reason) = &workload.rejected {
            compiled.blocked = Some(Blocked::Rejected(reason.clone()));
            return compiled;
        }
        let Some(queue_name) = &workload.queue_name else {
            compiled.blocked = Some(Blocked::Unmanaged);
            return compiled;
        };

        // Priority first: without its priority class Kueue cannot even create the Workload.
        match self.priority_of(workload) {
            Ok(priority) => compiled.priority = priority,
            Err(message) => {
                compiled.blocked = Some(Blocked::Pending(message));
                return compiled;
            }
        }

        let cq = match self.cluster_queue_of(workload, queue_name) {
            Ok(cq) => cq,
            Err(message) => {
                compiled.blocked = Some(Blocked::Pending(message));
                return compiled;
            }
        };
        compiled.cq = Some(cq);
        if let Some(reason) = &self.cqs[cq].inactive {
            // Kueue's message is "ClusterQueue X is inactive"; the queue's own condition says why.
            compiled.blocked = Some(Blocked::Pending(format!(
                "ClusterQueue {} is inactive ({reason})",
                self.cqs[cq].name
            )));
            return compiled;
        }
        if workload.stopped_by.is_some() {
            // Evicted by a queue's stop, and its queues run again: Kueue sets `Requeued=True`
            // and queues it again only then, after the Workloads already waiting (1g).
            compiled.arrival = REQUEUED_AFTER_A_STOP;
        }

        let namespace_ok = self.namespace_matches_queue(workload, cq);
        compiled.inadmissible = inadmissible(workload, namespace_ok);

        compiled.check_needed = self.cqs[cq]
            .checks
            .iter()
            .map(|check| match &check.provisioning {
                None => true,
                Some(managed) => workload
                    .pod_sets
                    .iter()
                    .any(|ps| ps.joins_provisioning_request(managed)),
            })
            .collect();

        let covers_pods = self.cqs[cq].covers_pods;
        for pod_set in &workload.pod_sets {
            let model = self.pod_set_model(pod_set, covers_pods);
            compiled.pod_sets.push(model);
        }
        compiled
    }

    /// The ClusterQueue (index) of `workload`'s LocalQueue `queue_name`, or why there is none
    /// to admit it: the LocalQueue is missing or stopped, or its ClusterQueue is missing.
    fn cluster_queue_of(
        &self,
        workload: &PendingWorkload,
        queue_name: &str,
    ) -> Result<usize, String> {
        // A Workload object names its LocalQueue in spec.queueName, a job in its label; either
        // way the LocalQueue lives in the job's namespace.
        let local_queue = self
            .cluster
            .local_queues
            .iter()
            .find(|lq| lq.namespace == workload.namespace && lq.name == queue_name);
        let Some(local_queue) = local_queue else {
            return Err(format!("LocalQueue {queue_name} doesn't exist"));
        };
        if local_queue.stop_policy != "None" && !local_queue.stop_policy.is_empty() {
            return Err(format!("LocalQueue {queue_name} is inactive"));
        }
        match self.cq_index.get(&local_queue.cluster_queue) {
            Some(&cq) => Ok(cq),
            None => Err(format!(
                "ClusterQueue {} doesn't exist",
                local_queue.cluster_queue
            )),
        }
    }

    /// Whether ClusterQueue `cq`'s namespace selector admits `workload`'s namespace, worked out
    /// once per namespace and queue.
    fn namespace_matches_queue(&mut self, workload: &PendingWorkload, cq: usize) -> bool {
        let cluster = self.cluster;
        let known = self
            .namespace_matches
            .get(&workload.namespace)
            .and_then(|per_queue| per_queue.get(cq).copied().flatten());
        match known {
            Some(matches) => matches,
            None => {
                let matches = match &self.cqs[cq].namespace_selector {
                    None => false,
                    Some(selector) => selector
                        .matches(&cluster.namespace_labels(&workload.namespace))
                        .unwrap_or(false),
                };
                let queues = self.cqs.len();
                let per_queue = self
                    .namespace_matches
                    .entry(workload.namespace.clone())
                    .or_insert_with(|| vec![None; queues]);
                per_queue[cq] = Some(matches);
                matches
            }
        }
    }

    /// A pod set's total requests (per pod times its count, and the pod count itself when the
    /// queue covers `pods`) in resource-name order, and its scheduling shape.
    fn pod_set_model(
        &mut self,
        pod_set: &super::podsets::PodSet,
        covers_pods: bool,
    ) -> PodSetModel {
        let count = pod_set.count.max(0);
        // In resource-name order, as the flavor scan visits them.
        let mut requests: Vec<(&str, i64)> = Vec::with_capacity(pod_set.requests.len() + 1);
        requests.extend(pod_set.requests.iter().map(|(name, quantity)| {
            let per_pod = request_value(name, *quantity).max(0);
            (name.as_str(), per_pod.saturating_mul(i64::from(count)))
        }));
        if covers_pods {
            requests.retain(|(name, _)| *name != PODS);
            let at = requests.partition_point(|(name, _)| *name < PODS);
            requests.insert(at, (PODS, i64::from(count)));
        }
        let requests = requests
            .into_iter()
            .map(|(name, value)| (self.resources.intern(name), value))
            .collect();
        let shape = self.shape_id(pod_set);
        PodSetModel { requests, shape }
    }

    pub fn priority_of(&self, workload: &PendingWorkload) -> Result<i32, String> {
        super::priority_of(self.cluster, workload)
    }
}
