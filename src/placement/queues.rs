//! Kueue's scheduling loop, simulated until nothing more can change: per-ClusterQueue heaps,
//! one head per queue per cycle, heads ordered across queues, BestEffortFIFO versus StrictFIFO
//! requeueing, and resumed flavor scans.
//!
//! Sources (Kueue v0.19.2): `pkg/scheduler/scheduler.go` (`schedule`, `nominate`,
//! `processEntry`, `makeClassicalIterator`, `reserveCapacityForUnreclaimablePreempt`,
//! `quotaResourcesToReserve`, `lastAssignmentOutdated`), `pkg/cache/queue/cluster_queue.go`
//! (`RequeueIfNotPresent`, `requeueIfNotPresent`, `Pop`) and `pkg/cache/queue/manager.go`
//! (`heads`).
//!
//! Assumptions of a prediction: no workload finishes or is deleted while the plan's jobs queue,
//! so usage only grows. Hence a workload Kueue parks as inadmissible (BestEffortFIFO) is never
//! retried, and the ClusterQueue generation never advances, so a requeued workload always
//! resumes its flavor scan where it stopped.

use std::cmp::Reverse;
use std::rc::Rc;

use super::amount::Amount;
use super::assign::{Assignment, Mode, Workspace, assign};
use super::model::{Blocked, Inadmissible, Model, WorkloadModel};
use super::objects::QueueingStrategy;
use super::podsets::PodSet;
use super::quota::Usage;

/// What happened to a workload at the end of the simulation.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Quota reserved; `checks` are the admission checks that still have to pass.
    Reserved {
        assignment: Rc<Assignment>,
        checks: Vec<String>,
    },
    /// No quota; the failed attempt that explains why (formatted only when shown).
    Pending(Failure),
    /// Waiting behind the head of its ClusterQueue, which Kueue keeps retrying.
    QueuedBehind {
        head: usize,
        cq: usize,
    },
    Blocked(Blocked),
}

/// Why an attempt failed.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    Assignment(Rc<Assignment>),
    Text(String),
}

impl Failure {
    pub fn message(&self, model: &Model<'_>, pod_sets: &[PodSet]) -> String {
        match self {
            Failure::Assignment(assignment) => assignment.message(model, pod_sets),
            Failure::Text(text) => text.clone(),
        }
    }
}

/// Why a head goes back to its queue (`RequeueReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requeue {
    NoFit,
    NoCandidates,
    /// Fit at nomination but not after an earlier entry of the same cycle took the quota.
    Skipped,
    NamespaceMismatch,
    Invalid,
}

pub(crate) struct Simulation {
    pub outcomes: Vec<Outcome>,
}

struct State<'m, 'c> {
    model: &'m Model<'c>,
    workloads: &'m [WorkloadModel],
    usage: Usage,
    workspace: Workspace,
    /// The previous attempt, whose scan the next one resumes.
    progress: Vec<Option<Rc<Assignment>>>,
    /// The latest failed attempt that scanned every flavor from the start.
    fresh_failure: Vec<Option<Rc<Assignment>>>,
    /// Bumped whenever quota is reserved: an assignment is a pure function of the workload, the
    /// usage and the scan progress, so a head retried with unchanged usage and a fresh scan
    /// (a blocked StrictFIFO head) reuses its previous result.
    usage_version: u64,
    reusable: Vec<Option<(u64, Rc<Assignment>)>>,
    last_failure: Vec<Option<Failure>>,
    last_requeue: Vec<Option<Requeue>>,
    outcomes: Vec<Option<Outcome>>,
    queues: Vec<Vec<usize>>,
    cursors: Vec<usize>,
}

struct Entry {
    cq: usize,
    workload: usize,
    assignment: Rc<Assignment>,
    /// Whether this attempt scanned every flavor from the start.
    fresh: bool,
}

pub(crate) fn simulate(model: &Model<'_>, workloads: &[WorkloadModel]) -> Simulation {
    let mut state = State {
        model,
        workloads,
        usage: model.live_usage.clone(),
        workspace: Workspace::default(),
        progress: vec![None; workloads.len()],
        fresh_failure: vec![None; workloads.len()],
        usage_version: 0,
        reusable: vec![None; workloads.len()],
        last_failure: vec![None; workloads.len()],
        last_requeue: vec![None; workloads.len()],
        outcomes: vec![None; workloads.len()],
        queues: vec![Vec::new(); model.cqs.len()],
        cursors: vec![0; model.cqs.len()],
    };
    for (index, workload) in workloads.iter().enumerate() {
        match (&workload.blocked, workload.cq) {
            (Some(blocked), _) => state.outcomes[index] = Some(Outcome::Blocked(blocked.clone())),
            (None, Some(cq)) => state.queues[cq].push(index),
            (None, None) => {
                state.outcomes[index] = Some(Outcome::Pending(Failure::Text(
                    "no ClusterQueue".to_string(),
                )));
            }
        }
    }
    // Heap order inside a queue: higher priority, then older, then input order.
    for queue in &mut state.queues {
        queue.sort_by_key(|&w| {
            let workload = &workloads[w];
            (
                Reverse(workload.priority),
                workload.created.is_none(),
                workload.created,
                workload.seq,
            )
        });
    }

    let idle_limit = idle_cycle_limit(model, workloads);
    let mut idle_cycles = 0;
    loop {
        let heads: Vec<(usize, usize)> = (0..model.cqs.len())
            .filter(|&cq| state.cursors[cq] < state.queues[cq].len())
            .map(|cq| (cq, state.queues[cq][state.cursors[cq]]))
            .collect();
        if heads.is_empty() {
            break;
        }
        let progressed = state.cycle(&heads);
        if progressed {
            idle_cycles = 0;
        } else {
            idle_cycles += 1;
            if idle_cycles > idle_limit {
                break;
            }
        }
    }
    state.finish()
}

/// How many cycles without any admission or final verdict end the simulation. Resumed scans
/// need at most one attempt per flavor and podset before they repeat; the margin keeps the
/// loop finite whatever the input.
fn idle_cycle_limit(model: &Model<'_>, workloads: &[WorkloadModel]) -> usize {
    let flavors = model
        .cqs
        .iter()
        .flat_map(|cq| cq.groups.iter().map(|g| g.flavors.len()))
        .max()
        .unwrap_or(0);
    let pod_sets = workloads
        .iter()
        .map(|w| w.pod_sets.len())
        .max()
        .unwrap_or(0);
    (4 * (flavors + 2) * (pod_sets + 1) + 16).min(100_000)
}

impl State<'_, '_> {
    /// One scheduling cycle; returns whether any workload reached a final state.
    fn cycle(&mut self, heads: &[(usize, usize)]) -> bool {
        let model = self.model;
        let mut progressed = false;
        let nominated_at = self.usage_version;
        // The cycle's snapshot; copied only when a preempting head reserves capacity in it.
        let mut snapshot: Option<Usage> = None;
        let mut entries = Vec::with_capacity(heads.len());
        for &(cq, w) in heads {
            if let Some(inadmissible) = &self.workloads[w].inadmissible {
                let reason = match inadmissible {
                    Inadmissible::NamespaceMismatch => Requeue::NamespaceMismatch,
                    Inadmissible::InvalidResources(_) => Requeue::Invalid,
                };
                let failure = Failure::Text(inadmissible.message());
                progressed |= self.requeue(cq, w, reason, failure, false);
                continue;
            }
            let fresh = self.progress[w]
                .as_ref()
                .is_none_or(|p| !p.has_pending_flavors());
            let assignment = match &self.reusable[w] {
                Some((version, previous)) if fresh && *version == self.usage_version => {
                    Rc::clone(previous)
                }
                _ => Rc::new(assign(
                    model,
                    cq,
                    &self.workloads[w],
                    &self.usage,
                    self.progress[w].as_deref(),
                    &mut self.workspace,
                )),
            };
            entries.push(Entry {
                cq,
                workload: w,
                assignment,
                fresh,
            });
        }
        // `makeClassicalIterator`: less borrowing first, then higher priority, then older. Ties
        // (random in Kueue) are broken by queue name and input order.
        entries.sort_by(|a, b| {
            let (wa, wb) = (&self.workloads[a.workload], &self.workloads[b.workload]);
            a.assignment
                .borrowing
                .cmp(&b.assignment.borrowing)
                .then(wb.priority.cmp(&wa.priority))
                .then(wa.created.is_none().cmp(&wb.created.is_none()))
                .then(wa.created.cmp(&wb.created))
                .then(model.cqs[a.cq].name.cmp(&model.cqs[b.cq].name))
                .then(wa.seq.cmp(&wb.seq))
        });

        for entry in entries {
            let Entry {
                cq,
                workload: w,
                assignment,
                fresh,
            } = entry;
            self.progress[w] = Some(Rc::clone(&assignment));
            if fresh {
                // A new full scan supersedes the one kept for the message.
                self.fresh_failure[w] = None;
            }
            match assignment.mode() {
                Mode::NoFit => {
                    let failure = Failure::Assignment(Rc::clone(&assignment));
                    progressed |= self.requeue(cq, w, Requeue::NoFit, failure, fresh);
                    self.remember(w, nominated_at, fresh, assignment);
                }
                Mode::Preempt => {
                    if model.cqs[cq].preemption.reclaim_within_cohort != "Any" {
                        let reserved = self.to_reserve(cq, &assignment, snapshot.as_ref());
                        let snap = snapshot.get_or_insert_with(|| self.usage.clone());
                        for (fr, amount) in reserved {
                            model.tree.add_usage(model.cqs[cq].node, fr, amount, snap);
                        }
                    }
                    let failure = Failure::Assignment(Rc::clone(&assignment));
                    progressed |= self.requeue(cq, w, Requeue::NoCandidates, failure, fresh);
                    self.remember(w, nominated_at, fresh, assignment);
                }
                Mode::Fit => {
                    let node = model.cqs[cq].node;
                    let current = snapshot.as_ref().unwrap_or(&self.usage);
                    let fits = assignment
                        .usage
                        .iter()
                        .all(|&(fr, amount)| model.tree.available(node, fr, current) >= amount);
                    if fits {
                        self.usage_version += 1;
                        for &(fr, amount) in &assignment.usage {
                            model.tree.add_usage(node, fr, amount, &mut self.usage);
                            if let Some(snap) = snapshot.as_mut() {
                                model.tree.add_usage(node, fr, amount, snap);
                            }
                        }
                        let checks = admission_checks(model, cq, &self.workloads[w], &assignment);
                        self.reusable[w] = None;
                        self.progress[w] = None;
                        self.outcomes[w] = Some(Outcome::Reserved { assignment, checks });
                        self.cursors[cq] += 1;
                        progressed = true;
                    } else {
                        let failure = Failure::Text(
                            "Workload no longer fits after processing another workload".to_string(),
                        );
                        progressed |= self.requeue(cq, w, Requeue::Skipped, failure, fresh);
                    }
                }
            }
        }
        progressed
    }

    /// `quotaResourcesToReserve` for a head that needs preemption but has no victims: capacity
    /// it holds back for this cycle so that later heads cannot take it.
    fn to_reserve(
        &self,
        cq: usize,
        assignment: &Assignment,
        snapshot: Option<&Usage>,
    ) -> Vec<(usize, Amount)> {
        let model = self.model;
        let node = model.cqs[cq].node;
        let current = snapshot.unwrap_or(&self.usage);
        assignment
            .usage
            .iter()
            .map(|&(fr, amount)| {
                let quota = model.tree.quota(node, fr);
                let nominal = quota.map_or(Amount::ZERO, |q| q.nominal);
                let used = current.get(node, fr);
                let reserved = if assignment.borrowing > 0 {
                    match quota.and_then(|q| q.borrowing_limit) {
                        None => amount,
                        Some(limit) => amount.min(nominal.plus(limit).minus(used)),
                    }
                } else {
                    Amount::ZERO.max(amount.min(nominal.minus(used)))
                };
                (fr, reserved)
            })
            .collect()
    }

    /// Keeps a failed full scan that its next attempt would repeat exactly, as long as usage
    /// does not change in between.
    fn remember(&mut self, w: usize, nominated_at: u64, fresh: bool, assignment: Rc<Assignment>) {
        let repeats = fresh
            && self.outcomes[w].is_none()
            && self.progress[w]
                .as_ref()
                .is_none_or(|p| !p.has_pending_flavors());
        self.reusable[w] = repeats.then_some((nominated_at, assignment));
    }

    /// `RequeueIfNotPresent`: back to the heap (it stays the head) or parked as inadmissible.
    /// Returns whether the workload reached its final state.
    fn requeue(
        &mut self,
        cq: usize,
        w: usize,
        reason: Requeue,
        failure: Failure,
        fresh: bool,
    ) -> bool {
        let strict = self.model.cqs[cq].strategy == QueueingStrategy::StrictFifo;
        let pending_flavors = self.progress[w]
            .as_ref()
            .is_some_and(|p| p.has_pending_flavors());
        let immediate = if strict {
            reason != Requeue::NamespaceMismatch
        } else {
            reason == Requeue::Skipped
        } || pending_flavors;
        let quota_failure = matches!(reason, Requeue::NoFit | Requeue::NoCandidates);
        if fresh
            && quota_failure
            && let Failure::Assignment(assignment) = &failure
        {
            self.fresh_failure[w] = Some(Rc::clone(assignment));
        }
        self.last_failure[w] = Some(failure);
        self.last_requeue[w] = Some(reason);
        if immediate {
            return false;
        }
        self.progress[w] = None;
        self.outcomes[w] = Some(Outcome::Pending(self.pending_reason(w)));
        self.cursors[cq] += 1;
        true
    }

    /// The failure shown for a pending workload: for quota failures, the last full flavor scan
    /// (resumed scans can name another podset, see kueue.md §3.1).
    fn pending_reason(&mut self, w: usize) -> Failure {
        let last = self.last_failure[w]
            .take()
            .unwrap_or_else(|| Failure::Text("not scheduled".to_string()));
        self.reusable[w] = None;
        match (self.last_requeue[w], self.fresh_failure[w].take()) {
            (Some(Requeue::NoFit | Requeue::NoCandidates), Some(fresh)) => {
                Failure::Assignment(fresh)
            }
            _ => last,
        }
    }

    fn finish(mut self) -> Simulation {
        for cq in 0..self.model.cqs.len() {
            let Some(&head) = self.queues[cq].get(self.cursors[cq]) else {
                continue;
            };
            if self.outcomes[head].is_none() {
                let reason = self.pending_reason(head);
                self.outcomes[head] = Some(Outcome::Pending(reason));
            }
            for index in self.cursors[cq] + 1..self.queues[cq].len() {
                let w = self.queues[cq][index];
                if self.outcomes[w].is_none() {
                    self.outcomes[w] = Some(Outcome::QueuedBehind { head, cq });
                }
            }
        }
        let outcomes = self
            .outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Outcome::Pending(Failure::Text("not scheduled".to_string())))
            })
            .collect();
        Simulation { outcomes }
    }
}

/// Admission checks that hold the workload: those whose flavors intersect the flavors of the
/// admission, except ProvisioningRequest checks with nothing to provision.
fn admission_checks(
    model: &Model<'_>,
    cq: usize,
    workload: &WorkloadModel,
    assignment: &Assignment,
) -> Vec<String> {
    model.cqs[cq]
        .checks
        .iter()
        .enumerate()
        .filter(|(i, _)| workload.check_needed.get(*i).copied().unwrap_or(true))
        .filter(|(_, check)| {
            assignment
                .all_choices()
                .iter()
                .any(|choice| check.flavors.contains(&choice.flavor))
        })
        .map(|(_, check)| check.name.clone())
        .collect()
}
