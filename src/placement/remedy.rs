//! What would let a pending job in: candidate changes to the queues or to the job, each one
//! checked by predicting again with the change made (the same simulation as [`super::predict`]),
//! so that every change offered admits the job in gkq's own simulation (`gkq explain`).
//!
//! Candidates come from why the job waits, never from a guess alone:
//! - a quota a podset could not get (too small, or in use) is raised to the **smallest** value
//!   that clears it, found by predicting again (so usage above a lowered quota counts), and the
//!   next podset's shortfall after it, until the job gets in; never for a flavor whose nodes lack
//!   the resource ([`NodeResources`]);
//! - preemption (docs/kueue.md 1b.1): a priority above the running work of the queue or cohort
//!   (`withinClusterQueue`, `reclaimWithinCohort`), turning those policies on where they are
//!   `Never`, `reclaimWithinCohort: Any`;
//! - a toleration for the taint that kept a podset off a flavor; a node selector only for a
//!   podset that no flavor of the queue suits (a selector that picks an eligible flavor is
//!   deliberate: it is never moved);
//! - a cohort for a queue in none, a missing LocalQueue, a held queue resumed, BestEffortFIFO
//!   for a StrictFIFO queue blocked by its head.
//!
//! Remedies are ranked cheapest first ([`Cost`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::amount::{quantity_of, request_value};
use super::model::Model;
use super::objects::{Cluster, LocalQueue, QueueingStrategy, ResourceQuota};
use super::outcome::{AttemptProblem, Placement, PlacementState};
use super::podsets::{PendingWorkload, PrioritySource};
use super::selectors::{Toleration, first_untolerated_taint, flavor_matches_node_affinity};
use crate::vocab::quantity::Quantity;

/// Kueue's world for a prediction: the cluster (queues, flavors, live Workloads) and the jobs a
/// plan submits, in submission order (empty when a live Workload is explained).
#[derive(Debug, Clone)]
pub struct World {
    pub cluster: Cluster,
    pub jobs: Vec<PendingWorkload>,
    /// Live runs a plan deletes or replaces on the way, and before which job
    /// (`plan::placements`); empty for the world as it is.
    pub released: Vec<super::Released>,
}

/// The job a remedy is for: one of the world's `jobs`, or a live Workload still waiting
/// (`cluster.pending_workloads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Job(usize),
    Queued(usize),
}

impl World {
    pub fn subject(&self, subject: Subject) -> Option<&PendingWorkload> {
        match subject {
            Subject::Job(i) => self.jobs.get(i),
            Subject::Queued(i) => self.cluster.pending_workloads.get(i),
        }
    }

    fn subject_mut(&mut self, subject: Subject) -> Option<&mut PendingWorkload> {
        match subject {
            Subject::Job(i) => self.jobs.get_mut(i),
            Subject::Queued(i) => self.cluster.pending_workloads.get_mut(i),
        }
    }

    /// The subject's placement, predicted as a plan predicts (`predict_in_order`).
    pub fn placement_of(&self, subject: Subject) -> Option<Placement> {
        let prediction = super::predict_in_order(&self.cluster, &self.jobs, &self.released);
        match subject {
            Subject::Job(i) => prediction.placements.into_iter().nth(i),
            Subject::Queued(i) => {
                let workload = self.cluster.pending_workloads.get(i)?;
                let (kind, job) = workload
                    .owner
                    .clone()
                    .unwrap_or_else(|| (workload.kind.clone(), workload.name.clone()));
                prediction
                    .queued
                    .into_iter()
                    .find(|p| p.namespace == workload.namespace && p.kind == kind && p.job == job)
            }
        }
    }
}

/// Whether a placement gets the job its quota: admitted, or reserved and waiting only for its
/// admission checks (a ProvisioningRequest: the job starts once the nodes are provisioned).
pub fn admits(placement: &Placement) -> bool {
    matches!(
        placement.state,
        PlacementState::Admitted | PlacementState::WaitingForAdmissionChecks
    )
}

/// One change to the world, as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "camelCase")]
pub enum Change {
    /// The nominal quota of `resource` in `flavor` of a ClusterQueue.
    #[serde(rename_all = "camelCase")]
    Quota {
        cluster_queue: String,
        flavor: String,
        resource: String,
        from: Quantity,
        to: Quantity,
    },
    /// The job's priority: the WorkloadPriorityClass `class` of that value (`exists`: the
    /// cluster has it; else it is to be created).
    #[serde(rename_all = "camelCase")]
    Priority {
        class: String,
        value: i32,
        exists: bool,
        from: i32,
    },
    /// `spec.preemption.withinClusterQueue`.
    #[serde(rename_all = "camelCase")]
    WithinClusterQueue {
        cluster_queue: String,
        from: String,
        to: String,
    },
    /// `spec.preemption.reclaimWithinCohort`.
    #[serde(rename_all = "camelCase")]
    ReclaimWithinCohort {
        cluster_queue: String,
        from: String,
        to: String,
    },
    /// A toleration for a flavor's taint, on one podset of the job.
    #[serde(rename_all = "camelCase")]
    Toleration {
        podset: String,
        flavor: String,
        key: String,
        value: String,
        effect: String,
    },
    /// One node selector key of a podset that no flavor of its queue suits.
    #[serde(rename_all = "camelCase")]
    NodeSelector {
        podset: String,
        flavor: String,
        key: String,
        from: String,
        to: String,
    },
    /// `spec.cohortName` of a ClusterQueue in no cohort.
    #[serde(rename_all = "camelCase")]
    Cohort {
        cluster_queue: String,
        cohort: String,
    },
    /// A LocalQueue the job names but that does not exist.
    #[serde(rename_all = "camelCase")]
    LocalQueue {
        namespace: String,
        name: String,
        cluster_queue: String,
    },
    /// `stopPolicy: None` on a held ClusterQueue.
    #[serde(rename_all = "camelCase")]
    ResumeClusterQueue { cluster_queue: String, from: String },
    /// `stopPolicy: None` on a held LocalQueue.
    #[serde(rename_all = "camelCase")]
    ResumeLocalQueue {
        namespace: String,
        name: String,
        from: String,
    },
    /// `queueingStrategy: BestEffortFIFO` on a StrictFIFO ClusterQueue.
    #[serde(rename_all = "camelCase")]
    BestEffortFifo { cluster_queue: String },
}

impl Change {
    /// Makes the change in `world`, for the job `subject`.
    pub fn apply(&self, world: &mut World, subject: Subject) {
        let cluster = &mut world.cluster;
        let cq = |cluster: &Cluster, name: &str| {
            cluster.cluster_queues.iter().position(|q| q.name == name)
        };
        match self {
            Change::Quota {
                cluster_queue,
                flavor,
                resource,
                to,
                ..
            } => {
                if let Some(i) = cq(cluster, cluster_queue) {
                    set_nominal(
                        &mut cluster.cluster_queues[i].resource_groups,
                        flavor,
                        resource,
                        *to,
                    );
                }
            }
            Change::Priority {
                class,
                value,
                exists,
                ..
            } => {
                if !exists {
                    cluster
                        .workload_priority_classes
                        .insert(class.clone(), *value);
                }
                if let Some(job) = world.subject_mut(subject) {
                    job.priority = PrioritySource::WorkloadPriorityClass(class.clone());
                }
            }
            Change::WithinClusterQueue {
                cluster_queue, to, ..
            } => {
                if let Some(i) = cq(cluster, cluster_queue) {
                    cluster.cluster_queues[i].preemption.within_cluster_queue = to.clone();
                }
            }
            Change::ReclaimWithinCohort {
                cluster_queue, to, ..
            } => {
                if let Some(i) = cq(cluster, cluster_queue) {
                    cluster.cluster_queues[i].preemption.reclaim_within_cohort = to.clone();
                }
            }
            Change::Toleration {
                podset,
                key,
                value,
                effect,
                ..
            } => {
                if let Some(job) = world.subject_mut(subject) {
                    for pod_set in job.pod_sets.iter_mut().filter(|p| &p.name == podset) {
                        pod_set.tolerations.push(Toleration {
                            key: key.clone(),
                            operator: "Equal".to_string(),
                            value: value.clone(),
                            effect: effect.clone(),
                        });
                    }
                }
            }
            Change::NodeSelector {
                podset, key, to, ..
            } => {
                if let Some(job) = world.subject_mut(subject) {
                    for pod_set in job.pod_sets.iter_mut().filter(|p| &p.name == podset) {
                        pod_set.node_selector.insert(key.clone(), to.clone());
                    }
                }
            }
            Change::Cohort {
                cluster_queue,
                cohort,
            } => {
                if let Some(i) = cq(cluster, cluster_queue) {
                    cluster.cluster_queues[i].cohort = Some(cohort.clone());
                }
            }
            Change::LocalQueue {
                namespace,
                name,
                cluster_queue,
            } => cluster.local_queues.push(LocalQueue {
                namespace: namespace.clone(),
                name: name.clone(),
                cluster_queue: cluster_queue.clone(),
                stop_policy: "None".to_string(),
            }),
            Change::ResumeClusterQueue { cluster_queue, .. } => {
                if let Some(i) = cq(cluster, cluster_queue) {
                    cluster.cluster_queues[i].stop_policy = "None".to_string();
                }
            }
            Change::ResumeLocalQueue {
                namespace, name, ..
            } => {
                for lq in cluster
                    .local_queues
                    .iter_mut()
                    .filter(|lq| &lq.namespace == namespace && &lq.name == name)
                {
                    lq.stop_policy = "None".to_string();
                }
            }
            Change::BestEffortFifo { cluster_queue } => {
                if let Some(i) = cq(cluster, cluster_queue) {
                    cluster.cluster_queues[i].queueing_strategy = QueueingStrategy::BestEffortFifo;
                }
            }
        }
    }

    fn rank(&self) -> Rank {
        match self {
            Change::Toleration { .. } | Change::NodeSelector { .. } => Rank::JobOnly,
            Change::Cohort { .. }
            | Change::LocalQueue { .. }
            | Change::ResumeClusterQueue { .. }
            | Change::ResumeLocalQueue { .. }
            | Change::BestEffortFifo { .. } => Rank::QueueSettings,
            Change::ReclaimWithinCohort { .. } => Rank::Reclaim,
            Change::WithinClusterQueue { .. } | Change::Priority { .. } => Rank::Preempt,
            Change::Quota { .. } => Rank::Capacity,
        }
    }
}

/// Sets a nominal quota in the flavor of the group that covers `resource`.
fn set_nominal(
    groups: &mut [super::objects::ResourceGroup],
    flavor: &str,
    resource: &str,
    to: Quantity,
) {
    let Some(entry) = groups
        .iter_mut()
        .filter(|g| g.covered_resources.iter().any(|r| r == resource))
        .flat_map(|g| g.flavors.iter_mut())
        .find(|f| f.flavor == flavor)
    else {
        return;
    };
    match entry.resources.iter_mut().find(|q| q.resource == resource) {
        Some(quota) => quota.nominal = to,
        None => entry.resources.push(ResourceQuota {
            resource: resource.to_string(),
            nominal: to,
            borrowing_limit: None,
            lending_limit: None,
        }),
    }
}

/// How much a remedy costs, cheapest first: what kind of change it is ([`Rank`]), then how many
/// running jobs it stops, then how much quota it adds (the sum over its raises of the share of
/// the new quota that is new, in thousandths).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub rank: Rank,
    pub stops: usize,
    pub added_permille: u64,
}

/// Kinds of change, cheapest first: the job's own template (nothing else changes); a queue
/// setting that adds no capacity and stops nothing; taking back the queue's own nominal quota
/// from queues of the cohort that borrow it (stops only borrowers); preempting lower-priority
/// work; more quota (capacity someone pays for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rank {
    JobOnly,
    QueueSettings,
    Reclaim,
    Preempt,
    Capacity,
}

/// A set of changes that, made together (and without any other remedy), admits the job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Remedy {
    pub changes: Vec<Change>,
    /// The job's placement with the changes made: admitted, or waiting only for admission
    /// checks; `preempts` names the running jobs it evicts.
    pub placement: Placement,
    pub cost: Cost,
}

impl Remedy {
    /// Makes every change of the remedy in `world`.
    pub fn apply(&self, world: &mut World, subject: Subject) {
        for change in &self.changes {
            change.apply(world, subject);
        }
    }
}

/// What the nodes of a flavor offer, where gkq knows their machine type: flavor -> whether its
/// nodes have `google.com/tpu`. A flavor not listed is judged by its quotas: an extended
/// resource (a name with a `/`) is on its nodes only if some queue or cohort gives the flavor a
/// quota of it above zero.
#[derive(Debug, Clone, Default)]
pub struct NodeResources {
    pub tpu: BTreeMap<String, bool>,
}

impl NodeResources {
    /// Whether the nodes of `flavor` can offer `resource` at all.
    pub fn offers(&self, cluster: &Cluster, flavor: &str, resource: &str) -> bool {
        if !resource.contains('/') {
            return true;
        }
        if resource == crate::vocab::labels::TPU_RESOURCE
            && let Some(&tpu) = self.tpu.get(flavor)
        {
            return tpu;
        }
        let groups = cluster
            .cluster_queues
            .iter()
            .flat_map(|q| &q.resource_groups)
            .chain(cluster.cohorts.iter().flat_map(|c| &c.resource_groups));
        groups
            .flat_map(|g| &g.flavors)
            .filter(|f| f.flavor == flavor)
            .flat_map(|f| &f.resources)
            .any(|q| q.resource == resource && !q.nominal.is_zero() && !q.nominal.is_negative())
    }
}

/// Every remedy for the pending job `subject`, each checked to admit it, cheapest first. Empty
/// when the job is not pending.
pub fn remedies(world: &World, subject: Subject, nodes: &NodeResources) -> Vec<Remedy> {
    let Some(base) = world.placement_of(subject) else {
        return Vec::new();
    };
    if base.state != PlacementState::Pending {
        return Vec::new();
    }
    let mut found: Vec<Remedy> = Vec::new();
    let mut offer = |remedy: Remedy| {
        if !found.iter().any(|r| r.changes == remedy.changes) {
            found.push(remedy);
        }
    };
    // What keeps the job from reaching a flavor at all; when that alone does not admit it, the
    // remedies of the flavors it then meets, on top.
    for unblock in blocked_changes(world, subject, &base) {
        let mut changed = world.clone();
        for change in &unblock {
            change.apply(&mut changed, subject);
        }
        let Some(placement) = changed.placement_of(subject) else {
            continue;
        };
        if admits(&placement) {
            offer(remedy(unblock, placement));
        } else if placement.state == PlacementState::Pending && !placement.attempts.is_empty() {
            for more in flavor_remedies(&changed, subject, &placement, nodes) {
                let changes = unblock.iter().cloned().chain(more.changes).collect();
                offer(remedy(changes, more.placement));
            }
        }
    }
    for remedy in flavor_remedies(world, subject, &base, nodes) {
        offer(remedy);
    }
    found.sort_by_key(|r| r.cost);
    found
}

/// Remedies for a job that reached flavor assignment and found no flavor (`base`).
fn flavor_remedies(
    world: &World,
    subject: Subject,
    base: &Placement,
    nodes: &NodeResources,
) -> Vec<Remedy> {
    let Some(cq) = base.cluster_queue.clone() else {
        return Vec::new();
    };
    let mut found: Vec<Remedy> = Vec::new();
    for flavor in taint_flavors(base) {
        found.extend(tolerate(world, subject, &flavor));
    }
    found.extend(selector_remedies(world, subject, base));
    found.extend(cohort_remedies(world, subject, &cq));
    found.extend(preemption_remedies(world, subject, &cq));
    let mut starts: Vec<String> = Vec::new();
    for (_, flavor, resource) in quota_problems(base) {
        if nodes.offers(&world.cluster, &flavor, &resource) && !starts.contains(&flavor) {
            starts.push(flavor);
        }
    }
    for flavor in starts {
        found.extend(raise_quotas(world, subject, &cq, &flavor, nodes));
    }
    found
}

/// Makes `changes` in a copy of the world and predicts again: a remedy when the job gets in.
fn attempt(world: &World, subject: Subject, changes: Vec<Change>) -> Option<Remedy> {
    if changes.is_empty() {
        return None;
    }
    let mut changed = world.clone();
    for change in &changes {
        change.apply(&mut changed, subject);
    }
    let placement = changed.placement_of(subject)?;
    admits(&placement).then(|| remedy(changes, placement))
}

fn remedy(changes: Vec<Change>, placement: Placement) -> Remedy {
    let rank = changes
        .iter()
        .map(Change::rank)
        .max()
        .unwrap_or(Rank::JobOnly);
    let added_permille = changes
        .iter()
        .map(|c| match c {
            Change::Quota { from, to, .. } if !to.is_zero() => {
                let added = to.saturating_sub(*from).nanos().max(0);
                u64::try_from(added.saturating_mul(1000) / to.nanos().max(1)).unwrap_or(u64::MAX)
            }
            _ => 0,
        })
        .sum();
    Remedy {
        cost: Cost {
            rank,
            stops: placement.preempts.len(),
            added_permille,
        },
        changes,
        placement,
    }
}

/// `(podset, flavor, resource)` of each quota shortfall, in the order Kueue tried them.
fn quota_problems(placement: &Placement) -> Vec<(String, String, String)> {
    placement
        .attempts
        .iter()
        .filter_map(|a| match &a.problem {
            AttemptProblem::OverCapacity {
                flavor, resource, ..
            }
            | AttemptProblem::InUse {
                flavor, resource, ..
            } => Some((a.podset.clone(), flavor.clone(), resource.clone())),
            _ => None,
        })
        .collect()
}

/// The nominal quota of `(flavor, resource)` in ClusterQueue `cq` (zero when it has none).
fn nominal(cluster: &Cluster, cq: &str, flavor: &str, resource: &str) -> Quantity {
    cluster
        .cluster_queues
        .iter()
        .filter(|q| q.name == cq)
        .flat_map(|q| &q.resource_groups)
        .filter(|g| g.covered_resources.iter().any(|r| r == resource))
        .flat_map(|g| &g.flavors)
        .filter(|f| f.flavor == flavor)
        .flat_map(|f| &f.resources)
        .find(|q| q.resource == resource)
        .map_or(Quantity::ZERO, |q| q.nominal)
}

/// Raises quotas, starting in `first` (the flavor Kueue tried and found short), each to the
/// smallest value that clears the shortfall, then the next shortfall the job meets, until it is
/// admitted.
fn raise_quotas(
    world: &World,
    subject: Subject,
    cq: &str,
    first: &str,
    nodes: &NodeResources,
) -> Option<Remedy> {
    let mut changed = world.clone();
    let mut changes: Vec<Change> = Vec::new();
    for _ in 0..8 {
        let placement = changed.placement_of(subject)?;
        if admits(&placement) {
            return Some(remedy(changes, placement));
        }
        if placement.state != PlacementState::Pending {
            return None;
        }
        let problems: Vec<(String, String, String)> = quota_problems(&placement)
            .into_iter()
            .filter(|(_, flavor, resource)| nodes.offers(&changed.cluster, flavor, resource))
            .collect();
        let next = problems
            .iter()
            .find(|(_, flavor, _)| flavor == first)
            .or(problems.first())?
            .clone();
        let to = smallest_clearing_quota(&changed, subject, cq, &next)?;
        let (_, flavor, resource) = next;
        let change = Change::Quota {
            cluster_queue: cq.to_string(),
            flavor: flavor.clone(),
            resource: resource.clone(),
            from: nominal(&world.cluster, cq, &flavor, &resource),
            to,
        };
        change.apply(&mut changed, subject);
        match changes.iter_mut().find(|c| {
            matches!(c, Change::Quota { flavor: f, resource: r, .. } if *f == flavor && *r == resource)
        }) {
            Some(existing) => *existing = change,
            None => changes.push(change),
        }
    }
    None
}

/// The step a quota is searched in: whole MiB for byte-counted resources, Kueue's units (CPU
/// millicores, whole units) otherwise.
fn search_step(resource: &str) -> i64 {
    let binary = resource == super::amount::MEMORY
        || resource == "ephemeral-storage"
        || resource.starts_with("hugepages-");
    if binary { 1 << 20 } else { 1 }
}

/// The smallest nominal quota of `(flavor, resource)` in `cq` with which the podset's shortfall
/// there is gone (the job is admitted, or that podset gets past it), searched by predicting
/// again. The upper end of the search holds everything the queue could hold there plus every
/// waiting job's request.
fn smallest_clearing_quota(
    world: &World,
    subject: Subject,
    cq: &str,
    (podset, flavor, resource): &(String, String, String),
) -> Option<Quantity> {
    let clears = |value: i64| {
        let mut changed = world.clone();
        if let Some(i) = changed
            .cluster
            .cluster_queues
            .iter()
            .position(|q| q.name == cq)
        {
            set_nominal(
                &mut changed.cluster.cluster_queues[i].resource_groups,
                flavor,
                resource,
                quantity_of(resource, value),
            );
        }
        changed.placement_of(subject).is_some_and(|p| {
            admits(&p)
                || !quota_problems(&p)
                    .iter()
                    .any(|(ps, f, r)| ps == podset && f == flavor && r == resource)
        })
    };
    let current = request_value(resource, nominal(&world.cluster, cq, flavor, resource)).max(0);
    let requested: i64 = world
        .jobs
        .iter()
        .chain(&world.cluster.pending_workloads)
        .flat_map(|w| &w.pod_sets)
        .map(|ps| {
            ps.requests.get(resource).map_or(0, |q| {
                request_value(resource, *q)
                    .max(0)
                    .saturating_mul(i64::from(ps.count.max(0)))
            })
        })
        .fold(0i64, i64::saturating_add);
    let held: i64 = world
        .cluster
        .reserving_workloads
        .iter()
        .filter(|r| r.cluster_queue == cq)
        .flat_map(|r| &r.usage)
        .filter(|(f, r, _)| f == flavor && r == resource)
        .map(|(_, _, q)| request_value(resource, *q).max(0))
        .fold(0i64, i64::saturating_add);
    let step = search_step(resource);
    let mut low = current / step; // does not clear
    let mut high = current
        .saturating_add(requested)
        .saturating_add(held)
        .saturating_add(step - 1)
        / step;
    if high <= low || !clears(high.saturating_mul(step)) {
        return None;
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if clears(mid.saturating_mul(step)) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Some(quantity_of(resource, high.saturating_mul(step)))
}

/// Flavors a podset was kept off by a taint it does not tolerate.
fn taint_flavors(placement: &Placement) -> Vec<String> {
    let mut flavors: Vec<String> = Vec::new();
    for attempt in &placement.attempts {
        if let AttemptProblem::Ineligible { flavor } = &attempt.problem
            && attempt.text.contains("untolerated taint")
            && !flavors.contains(flavor)
        {
            flavors.push(flavor.clone());
        }
    }
    flavors
}

/// Tolerations for `flavor`'s taints on each podset they keep off it, added one podset at a
/// time as the job meets them, until it is admitted.
fn tolerate(world: &World, subject: Subject, flavor: &str) -> Option<Remedy> {
    let definition = world
        .cluster
        .resource_flavors
        .iter()
        .find(|f| f.name == flavor)?
        .clone();
    let mut changed = world.clone();
    let mut changes: Vec<Change> = Vec::new();
    for _ in 0..8 {
        let placement = changed.placement_of(subject)?;
        if admits(&placement) {
            return (!changes.is_empty()).then(|| remedy(changes, placement));
        }
        let podset = placement.attempts.iter().find_map(|a| match &a.problem {
            AttemptProblem::Ineligible { flavor: f }
                if f == flavor && a.text.contains("untolerated taint") =>
            {
                Some(a.podset.clone())
            }
            _ => None,
        })?;
        let job = changed.subject(subject)?;
        let pod_set = job.pod_sets.iter().find(|p| p.name == podset)?;
        let tolerations: Vec<&Toleration> = pod_set
            .tolerations
            .iter()
            .chain(definition.tolerations.iter())
            .collect();
        let taint = first_untolerated_taint(&definition.node_taints, &tolerations)?.clone();
        let change = Change::Toleration {
            podset,
            flavor: flavor.to_string(),
            key: taint.key,
            value: taint.value,
            effect: taint.effect,
        };
        change.apply(&mut changed, subject);
        changes.push(change);
    }
    None
}

/// A node selector moved onto a flavor's labels, for a podset whose labels no flavor of its
/// queue carries (every flavor tried was ineligible, and none by a taint alone). A selector that
/// picks some flavor is deliberate (a Ray head pinned to its CPU pool) and is never moved. A
/// tainted flavor also gets the toleration its taint needs.
fn selector_remedies(world: &World, subject: Subject, base: &Placement) -> Vec<Remedy> {
    let Some(job) = world.subject(subject) else {
        return Vec::new();
    };
    let flavor_of = |name: &str| {
        world
            .cluster
            .resource_flavors
            .iter()
            .find(|f| f.name == name)
    };
    let mut found = Vec::new();
    let podsets: BTreeSet<&str> = base.attempts.iter().map(|a| a.podset.as_str()).collect();
    for podset in podsets {
        let Some(pod_set) = job.pod_sets.iter().find(|p| p.name == podset) else {
            continue;
        };
        if pod_set.required_node_affinity.is_some() || pod_set.node_selector.is_empty() {
            continue;
        }
        let flavors: Vec<&str> = base
            .attempts
            .iter()
            .filter(|a| a.podset == podset)
            .map(|a| match &a.problem {
                AttemptProblem::Ineligible { flavor } => Some(flavor.as_str()),
                _ => None,
            })
            .collect::<Option<Vec<&str>>>()
            .unwrap_or_default();
        let matches = |flavor: &str| {
            flavor_of(flavor).is_none_or(|f| {
                flavor_matches_node_affinity(&pod_set.node_selector, None, &f.node_labels)
                    .unwrap_or(true)
            })
        };
        if flavors.is_empty() || flavors.iter().any(|f| matches(f)) {
            continue;
        }
        for flavor in flavors {
            let Some(definition) = flavor_of(flavor) else {
                continue;
            };
            let mut changes: Vec<Change> = pod_set
                .node_selector
                .iter()
                .filter_map(|(key, value)| {
                    let wanted = definition.node_labels.get(key)?;
                    (wanted != value).then(|| Change::NodeSelector {
                        podset: podset.to_string(),
                        flavor: flavor.to_string(),
                        key: key.clone(),
                        from: value.clone(),
                        to: wanted.clone(),
                    })
                })
                .collect();
            let tolerations: Vec<&Toleration> = pod_set
                .tolerations
                .iter()
                .chain(definition.tolerations.iter())
                .collect();
            if let Some(taint) = first_untolerated_taint(&definition.node_taints, &tolerations) {
                changes.push(Change::Toleration {
                    podset: podset.to_string(),
                    flavor: flavor.to_string(),
                    key: taint.key.clone(),
                    value: taint.value.clone(),
                    effect: taint.effect.clone(),
                });
            }
            if let Some(remedy) = attempt(world, subject, changes) {
                found.push(remedy);
            }
        }
    }
    found
}

/// A cohort for a queue in none: each cohort the cluster knows, where that admits the job.
fn cohort_remedies(world: &World, subject: Subject, cq: &str) -> Vec<Remedy> {
    let Some(queue) = world.cluster.cluster_queues.iter().find(|q| q.name == cq) else {
        return Vec::new();
    };
    if queue.cohort.is_some() {
        return Vec::new();
    }
    let cohorts: BTreeSet<&String> = world
        .cluster
        .cluster_queues
        .iter()
        .filter_map(|q| q.cohort.as_ref())
        .chain(world.cluster.cohorts.iter().map(|c| &c.name))
        .collect();
    cohorts
        .into_iter()
        .filter_map(|cohort| {
            attempt(
                world,
                subject,
                vec![Change::Cohort {
                    cluster_queue: cq.to_string(),
                    cohort: cohort.clone(),
                }],
            )
        })
        .collect()
}

/// Preemption that admits the job: under the queue's own policies with a higher priority; with
/// `withinClusterQueue` or `reclaimWithinCohort` turned on (alone, or with a priority);
/// `reclaimWithinCohort: Any`.
fn preemption_remedies(world: &World, subject: Subject, cq: &str) -> Vec<Remedy> {
    let cluster = &world.cluster;
    let Some(queue) = cluster.cluster_queues.iter().find(|q| q.name == cq) else {
        return Vec::new();
    };
    // Who could be a victim: work holding quota in this queue or in its cohort.
    let cohort_queues: BTreeSet<&str> = cluster
        .cluster_queues
        .iter()
        .filter(|q| q.name == cq || (queue.cohort.is_some() && q.cohort == queue.cohort))
        .map(|q| q.name.as_str())
        .collect();
    let model = Model::compile(cluster);
    // The plan's other jobs may be admitted before this one, and so be victims too.
    let others = world
        .jobs
        .iter()
        .enumerate()
        .filter(|(i, _)| subject != Subject::Job(*i))
        .map(|(_, job)| job);
    let victims: Vec<i32> = cluster
        .reserving_workloads
        .iter()
        .filter(|r| cohort_queues.contains(r.cluster_queue.as_str()))
        .filter_map(|r| r.workload.as_ref())
        .chain(others)
        .filter_map(|w| model.priority_of(w).ok())
        .collect();
    if victims.is_empty() {
        return Vec::new();
    }
    let Some(mine) = world
        .subject(subject)
        .and_then(|w| model.priority_of(w).ok())
    else {
        return Vec::new();
    };
    let within = queue.preemption.within_cluster_queue.clone();
    let reclaim = queue.preemption.reclaim_within_cohort.clone();
    let mut policies: Vec<Vec<Change>> = vec![Vec::new()];
    if within == "Never" {
        policies.push(vec![Change::WithinClusterQueue {
            cluster_queue: cq.to_string(),
            from: within.clone(),
            to: "LowerPriority".to_string(),
        }]);
    }
    if queue.cohort.is_some() {
        if reclaim == "Never" {
            policies.push(vec![Change::ReclaimWithinCohort {
                cluster_queue: cq.to_string(),
                from: reclaim.clone(),
                to: "LowerPriority".to_string(),
            }]);
        }
        if reclaim != "Any" {
            policies.push(vec![Change::ReclaimWithinCohort {
                cluster_queue: cq.to_string(),
                from: reclaim.clone(),
                to: "Any".to_string(),
            }]);
        }
    }
    // Priorities just above each victim's, lowest first: the three lowest and the one above
    // them all (which lets the job preempt whatever the policy allows), so that a queue of many
    // priorities costs a few predictions, not one per priority.
    let above: BTreeSet<i32> = victims
        .iter()
        .filter(|&&p| p >= mine)
        .map(|p| p.saturating_add(1))
        .collect();
    let above: BTreeSet<i32> = above.iter().take(3).chain(above.last()).copied().collect();
    let mut found = Vec::new();
    for policy in policies {
        if let Some(remedy) = attempt(world, subject, policy.clone()) {
            found.push(remedy);
            continue;
        }
        for &value in &above {
            let mut changes = policy.clone();
            changes.push(priority_change(cluster, value, mine));
            if let Some(remedy) = attempt(world, subject, changes) {
                found.push(remedy);
                break;
            }
        }
    }
    found
}

/// The WorkloadPriorityClass to give a job that needs priority `value`: the existing class of
/// the lowest value at or above it, else a new one.
fn priority_change(cluster: &Cluster, value: i32, from: i32) -> Change {
    let existing = cluster
        .workload_priority_classes
        .iter()
        .filter(|(_, v)| **v >= value)
        .min_by_key(|(name, v)| (**v, (*name).clone()));
    match existing {
        Some((class, &v)) => Change::Priority {
            class: class.clone(),
            value: v,
            exists: true,
            from,
        },
        None => Change::Priority {
            class: format!("priority-{value}"),
            value,
            exists: false,
            from,
        },
    }
}

/// Changes for a job that never reached a flavor: a missing LocalQueue (pointed at each
/// ClusterQueue), a held queue resumed, BestEffortFIFO for a StrictFIFO queue whose head blocks
/// it.
fn blocked_changes(world: &World, subject: Subject, base: &Placement) -> Vec<Vec<Change>> {
    let (Some(job), Some(reason)) = (world.subject(subject), base.reason.as_deref()) else {
        return Vec::new();
    };
    if !base.attempts.is_empty() {
        return Vec::new();
    }
    let cluster = &world.cluster;
    let queue_name = job.queue_name.clone().unwrap_or_default();
    let mut candidates: Vec<Vec<Change>> = Vec::new();
    if reason == format!("LocalQueue {queue_name} doesn't exist") {
        let mut names: Vec<&String> = cluster.cluster_queues.iter().map(|q| &q.name).collect();
        names.sort();
        names.dedup();
        for cq in names {
            candidates.push(vec![Change::LocalQueue {
                namespace: job.namespace.clone(),
                name: queue_name.clone(),
                cluster_queue: cq.clone(),
            }]);
        }
    }
    if let Some(lq) = cluster
        .local_queues
        .iter()
        .find(|lq| lq.namespace == job.namespace && lq.name == queue_name)
        .filter(|lq| !lq.stop_policy.is_empty() && lq.stop_policy != "None")
    {
        candidates.push(vec![Change::ResumeLocalQueue {
            namespace: lq.namespace.clone(),
            name: lq.name.clone(),
            from: lq.stop_policy.clone(),
        }]);
    }
    if let Some(cq) = base
        .cluster_queue
        .as_ref()
        .and_then(|name| cluster.cluster_queues.iter().find(|q| &q.name == name))
    {
        if !cq.stop_policy.is_empty() && cq.stop_policy != "None" {
            candidates.push(vec![Change::ResumeClusterQueue {
                cluster_queue: cq.name.clone(),
                from: cq.stop_policy.clone(),
            }]);
        }
        if cq.queueing_strategy == QueueingStrategy::StrictFifo
            && reason.starts_with("queued behind")
        {
            candidates.push(vec![Change::BestEffortFifo {
                cluster_queue: cq.name.clone(),
            }]);
        }
    }
    candidates
}
