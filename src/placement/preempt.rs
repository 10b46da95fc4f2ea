//! Classic preemption (fair sharing off): which workloads holding quota Kueue evicts so that a
//! pending workload fits. Rules from Kueue v0.19.2 `pkg/scheduler/preemption/preemption.go`
//! (`classicalPreemptions`, `fillBackWorkloads`, `workloadFits`,
//! `queueUnderNominalInResourcesNeedingPreemption`), `preemption/classical/` (`candidateIterator`,
//! `classifyPreemptionVariant`, `collectCandidatesForHierarchicalReclaim`) and
//! `preemption/common/` (`SatisfiesPreemptionPolicy`, `CandidatesOrdering`).
//!
//! In short: candidates are the workloads that use a flavor-resource needing preemption and that
//! the queue's policy allows to preempt (`withinClusterQueue` in the same queue,
//! `reclaimWithinCohort` in cohort queues that borrow). They are removed one by one, other
//! queues first, then lower priority, then the most recently admitted, until the preemptor fits;
//! then every removed workload but the last is added back, newest removal first, when the
//! preemptor still fits without it. That leaves a minimal set of victims.

use std::cmp::Ordering;

use super::amount::Amount;
use super::model::{Model, WorkloadModel};
use super::quota::{Fr, Usage};
use super::time::Timestamp;

/// A workload that holds quota and may be preempted.
#[derive(Debug, Clone)]
pub(crate) struct Holder {
    /// Index of the workload in the simulation.
    pub workload: usize,
    pub cq: usize,
    pub usage: Vec<(Fr, Amount)>,
    pub priority: i32,
    /// The queue-order timestamp (`PendingWorkload::queued_at`); `None` for jobs not created yet.
    pub queued_at: Option<Timestamp>,
    pub seq: usize,
    /// Order of quota reservation: higher was admitted later.
    pub reserved_rank: usize,
}

/// Why a victim is preempted (Kueue's `Preempted` condition reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// `InClusterQueue`.
    ClusterQueue,
    /// `InCohortReclamation`.
    CohortReclamation,
    /// `InCohortReclaimWhileBorrowing`.
    CohortReclaimWhileBorrowing,
}

impl Reason {
    /// Kueue's `HumanReadablePreemptionReasons`.
    pub fn text(self) -> &'static str {
        match self {
            Reason::ClusterQueue => "prioritization in the ClusterQueue",
            Reason::CohortReclamation => "reclamation within the cohort",
            Reason::CohortReclaimWhileBorrowing => "reclamation within the cohort while borrowing",
        }
    }
}

/// A victim: index into the holders, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub holder: usize,
    pub reason: Reason,
}

/// `preemptionVariant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    WithinCq,
    HierarchicalReclaim,
    ReclaimWithoutBorrowing,
    ReclaimWhileBorrowing,
}

impl Variant {
    fn reason(self) -> Reason {
        match self {
            Variant::WithinCq => Reason::ClusterQueue,
            Variant::HierarchicalReclaim | Variant::ReclaimWithoutBorrowing => {
                Reason::CohortReclamation
            }
            Variant::ReclaimWhileBorrowing => Reason::CohortReclaimWhileBorrowing,
        }
    }
}

struct Candidate {
    holder: usize,
    /// The cohort where the preemptor and the candidate's queue meet (`None` in the same queue).
    lca: Option<usize>,
    variant: Variant,
}

/// What a preemption search needs besides the quota tree.
pub(crate) struct Preemptor<'a> {
    pub model: &'a Model<'a>,
    pub cq: usize,
    pub workload: &'a WorkloadModel,
    pub holders: &'a [Holder],
    /// Which holders still hold their quota.
    pub active: &'a [bool],
}

/// `workload.Ordering.GetQueueOrderTimestamp(a).Before(b)`: jobs not created yet are younger
/// than any created one, and among themselves follow the input order.
fn created_before(a: (Option<Timestamp>, usize), b: (Option<Timestamp>, usize)) -> bool {
    match (a.0, b.0) {
        (Some(x), Some(y)) => x < y,
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => a.1 < b.1,
    }
}

impl Preemptor<'_> {
    /// `SatisfiesPreemptionPolicy` (the timestamp buffer gate is off by default).
    fn satisfies(&self, policy: &str, candidate: &Holder) -> bool {
        let (mine, theirs) = (self.workload.priority, candidate.priority);
        match policy {
            "LowerPriority" => mine > theirs,
            "LowerOrNewerEqualPriority" => {
                mine > theirs
                    || (mine == theirs
                        && created_before(
                            (self.workload.queued_at, self.workload.seq),
                            (candidate.queued_at, candidate.seq),
                        ))
            }
            "Any" => true,
            _ => false,
        }
    }

    fn classify(&self, holder: usize, frs: &[Fr], advantage: bool) -> Option<Variant> {
        let candidate = &self.holders[holder];
        if !candidate.usage.iter().any(|(fr, _)| frs.contains(fr)) {
            return None;
        }
        let policy = &self.model.cqs[self.cq].preemption;
        let same_queue = candidate.cq == self.cq;
        let rule = if same_queue {
            &policy.within_cluster_queue
        } else {
            &policy.reclaim_within_cohort
        };
        if !self.satisfies(rule, candidate) {
            return None;
        }
        if same_queue {
            return Some(Variant::WithinCq);
        }
        if advantage {
            return Some(Variant::HierarchicalReclaim);
        }
        if policy.borrow_within_cohort == "Never" {
            return Some(Variant::ReclaimWithoutBorrowing);
        }
        let above_threshold = candidate.priority >= self.workload.priority
            || policy
                .max_priority_threshold
                .is_some_and(|threshold| candidate.priority > threshold);
        Some(if above_threshold {
            Variant::ReclaimWithoutBorrowing
        } else {
            Variant::ReclaimWhileBorrowing
        })
    }

    fn candidates_in_queue(
        &self,
        cq: usize,
        lca: Option<usize>,
        frs: &[Fr],
        advantage: bool,
        out: &mut Vec<Candidate>,
    ) {
        for (holder, h) in self.holders.iter().enumerate() {
            if h.cq != cq || !self.active[holder] {
                continue;
            }
            if let Some(variant) = self.classify(holder, frs, advantage) {
                out.push(Candidate {
                    holder,
                    lca,
                    variant,
                });
            }
        }
    }

    /// `collectCandidatesInSubtree`: queues under `current` that exceed their quota, skipping
    /// subtrees within quota and the subtree already visited.
    #[allow(clippy::too_many_arguments)]
    fn collect_in_subtree(
        &self,
        current: usize,
        root: usize,
        skip: Option<usize>,
        frs: &[Fr],
        advantage: bool,
        usage: &Usage,
        out: &mut Vec<Candidate>,
    ) {
        let tree = &self.model.tree;
        let children = tree.children_of(current);
        for &child in children.iter().filter(|&&c| tree.nodes[c].is_cohort) {
            if Some(child) == skip || tree.within_quota(child, frs, usage) {
                continue;
            }
            self.collect_in_subtree(child, root, skip, frs, advantage, usage, out);
        }
        for &child in children.iter().filter(|&&c| !tree.nodes[c].is_cohort) {
            let Some(cq) = self.model.cqs.iter().position(|q| q.node == child) else {
                continue;
            };
            if cq == self.cq || tree.within_quota(child, frs, usage) {
                continue;
            }
            self.candidates_in_queue(cq, Some(root), frs, advantage, out);
        }
    }

    /// `collectCandidatesForHierarchicalReclaim`: (hierarchy candidates, priority candidates).
    fn cohort_candidates(
        &self,
        requests: &[(Fr, Amount)],
        frs: &[Fr],
        usage: &Usage,
    ) -> (Vec<Candidate>, Vec<Candidate>) {
        let (mut hierarchy, mut by_priority) = (Vec::new(), Vec::new());
        let node = self.model.cqs[self.cq].node;
        let tree = &self.model.tree;
        if tree.nodes[node].parent.is_none()
            || self.model.cqs[self.cq].preemption.reclaim_within_cohort == "Never"
        {
            return (hierarchy, by_priority);
        }
        let (mut advantage, mut remaining) = tree.fit_in_quota(node, requests, usage);
        let mut previous = None;
        for current in tree.ancestors(node) {
            let list = if advantage {
                &mut hierarchy
            } else {
                &mut by_priority
            };
            self.collect_in_subtree(current, current, previous, frs, advantage, usage, list);
            let (fits, rest) = tree.fit_in_quota(current, &remaining, usage);
            remaining = rest;
            advantage |= fits;
            previous = Some(current);
        }
        (hierarchy, by_priority)
    }

    /// `CandidatesOrdering`: other queues first, then lower priority, then admitted last.
    fn order(&self, a: &Candidate, b: &Candidate) -> Ordering {
        let (x, y) = (&self.holders[a.holder], &self.holders[b.holder]);
        (x.cq == self.cq)
            .cmp(&(y.cq == self.cq))
            .then(x.priority.cmp(&y.priority))
            .then(y.reserved_rank.cmp(&x.reserved_rank))
            // Kueue compares UIDs; input order keeps the result deterministic.
            .then(x.seq.cmp(&y.seq))
    }

    /// `candidateIsValid`: a cohort candidate stays valid while its queue, and each cohort up
    /// to where it meets the preemptor, still exceeds its quota.
    fn valid(&self, candidate: &Candidate, borrowing: bool, frs: &[Fr], usage: &Usage) -> bool {
        let holder = &self.holders[candidate.holder];
        if holder.cq == self.cq {
            return true;
        }
        if borrowing && candidate.variant == Variant::ReclaimWithoutBorrowing {
            return false;
        }
        let tree = &self.model.tree;
        let node = self.model.cqs[holder.cq].node;
        if tree.within_quota(node, frs, usage) {
            return false;
        }
        for ancestor in tree.ancestors(node) {
            if Some(ancestor) == candidate.lca {
                break;
            }
            if tree.within_quota(ancestor, frs, usage) {
                return false;
            }
        }
        true
    }

    /// `workloadFits`.
    fn fits(&self, requests: &[(Fr, Amount)], borrowing: bool, usage: &Usage) -> bool {
        let tree = &self.model.tree;
        let node = self.model.cqs[self.cq].node;
        requests.iter().all(|&(fr, value)| {
            (borrowing || tree.within_nominal(node, fr, value, usage))
                && value <= tree.available(node, fr, usage)
        })
    }

    pub fn remove(&self, holder: usize, usage: &mut Usage) {
        let h = &self.holders[holder];
        let node = self.model.cqs[h.cq].node;
        for &(fr, amount) in &h.usage {
            self.model.tree.remove_usage(node, fr, amount, usage);
        }
    }

    fn restore(&self, holder: usize, usage: &mut Usage) {
        let h = &self.holders[holder];
        let node = self.model.cqs[h.cq].node;
        for &(fr, amount) in &h.usage {
            self.model.tree.add_usage(node, fr, amount, usage);
        }
    }

    /// `classicalPreemptions`: the victims that let `requests` fit, or none when no set does.
    /// `frs` are the flavor-resources that need preemption.
    pub fn targets(&self, requests: &[(Fr, Amount)], frs: &[Fr], usage: &Usage) -> Vec<Target> {
        let policy = &self.model.cqs[self.cq].preemption;
        let mut same_queue = Vec::new();
        if policy.within_cluster_queue != "Never" {
            self.candidates_in_queue(self.cq, None, frs, false, &mut same_queue);
        }
        let (mut hierarchy, mut by_priority) = self.cohort_candidates(requests, frs, usage);
        for list in [&mut same_queue, &mut hierarchy, &mut by_priority] {
            list.sort_by(|a, b| self.order(a, b));
        }
        let no_other_queue = hierarchy.is_empty() && by_priority.is_empty();
        let no_hierarchy = hierarchy.is_empty();
        let candidates: Vec<Candidate> = hierarchy
            .into_iter()
            .chain(by_priority)
            .chain(same_queue)
            .collect();
        let borrow_forbidden = policy.borrow_within_cohort == "Never";
        let node = self.model.cqs[self.cq].node;
        let under_nominal = frs.iter().all(|&fr| {
            let nominal = self
                .model
                .tree
                .quota(node, fr)
                .map_or(Amount::ZERO, |q| q.nominal);
            nominal > usage.get(node, fr)
        });
        let attempts: &[bool] = if no_other_queue || (borrow_forbidden && !under_nominal) {
            &[true]
        } else if borrow_forbidden && no_hierarchy {
            &[false, true]
        } else {
            &[true, false]
        };
        let mut snapshot = usage.clone();
        for &borrowing in attempts {
            let mut targets: Vec<Target> = Vec::new();
            for candidate in &candidates {
                if !self.valid(candidate, borrowing, frs, &snapshot) {
                    continue;
                }
                self.remove(candidate.holder, &mut snapshot);
                targets.push(Target {
                    holder: candidate.holder,
                    reason: candidate.variant.reason(),
                });
                if self.fits(requests, borrowing, &snapshot) {
                    return self.fill_back(targets, requests, borrowing, &mut snapshot);
                }
            }
            for target in &targets {
                self.restore(target.holder, &mut snapshot);
            }
        }
        Vec::new()
    }

    /// `fillBackWorkloads`: adds removed workloads back, newest removal first (the last one
    /// stays), while the preemptor still fits.
    fn fill_back(
        &self,
        mut targets: Vec<Target>,
        requests: &[(Fr, Amount)],
        borrowing: bool,
        snapshot: &mut Usage,
    ) -> Vec<Target> {
        for i in (0..targets.len().saturating_sub(1)).rev() {
            self.restore(targets[i].holder, snapshot);
            if self.fits(requests, borrowing, snapshot) {
                targets.swap_remove(i);
            } else {
                self.remove(targets[i].holder, snapshot);
            }
        }
        targets
    }
}
