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
//! Preemption (`processEntry`): a head that needs preemption and has victims is not admitted
//! in that cycle. Unless its victims overlap those of an earlier entry of the cycle, or it no
//! longer fits once they are gone, its usage is counted in the cycle's snapshot and the victims
//! are evicted. It stays at the head of its queue and starts its flavor scan afresh. The victims
//! release their quota before the next cycle and queue again. Releasing quota puts the workloads
//! parked as inadmissible in that cohort back into their queues.
//!
//! Assumptions of a prediction: no workload finishes while the plan's jobs queue; the only
//! Workloads deleted are the runs the plan deletes ([`Release`]: each releases its quota before
//! a given arrival, which puts the workloads parked as inadmissible in its cohort back into
//! their queues), so usage otherwise only shrinks by preemption. Without preemption, a workload Kueue parks as
//! inadmissible (BestEffortFIFO) is never retried, and the ClusterQueue generation never
//! advances, so a requeued workload always resumes its flavor scan where it stopped.

use std::cmp::Reverse;
use std::rc::Rc;

use super::amount::Amount;
use super::assign::{Assignment, Mode, ReasonTexts, Workspace, assign};
use super::model::{Blocked, Inadmissible, Model, PodSetModel, WorkloadModel};
use super::objects::QueueingStrategy;
use super::podsets::PodSet;
use super::preempt::{Holder, Preemptor, Reason, Target};
use super::quota::{Fr, Usage};

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
    /// A live Workload that keeps the quota it held before the prediction.
    Holding,
    /// A live Workload whose job is deleted while the given jobs are submitted: gone, its quota
    /// released.
    Released,
}

/// A live Workload holding quota when the prediction starts.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    /// Its index among the simulated workloads (where it queues again once evicted).
    pub workload: usize,
    pub cq: usize,
    pub usage: Vec<(Fr, Amount)>,
}

/// A live Workload whose job is deleted before the jobs of arrival `arrival` reach Kueue (a
/// replaced job's earlier run, or a job the plan deletes): Kueue finishes it and releases its
/// quota then (docs/kueue.md 1c.5).
#[derive(Debug, Clone)]
pub(crate) struct Release {
    pub arrival: usize,
    /// Its index among the simulated workloads, when it is one (a readable live Workload).
    pub workload: Option<usize>,
    pub cq: usize,
    pub usage: Vec<(Fr, Amount)>,
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

    /// [`Self::message`] and the flavors tried with why each did not do (none for a failure
    /// given as text), each reason formatted once across the workloads `texts` saw.
    pub fn explain(
        &self,
        model: &Model<'_>,
        pod_sets: &[PodSet],
        texts: &mut ReasonTexts,
    ) -> (String, Vec<super::outcome::FlavorAttempt>) {
        match self {
            Failure::Assignment(assignment) => assignment.explain(model, pod_sets, texts),
            Failure::Text(text) => (text.clone(), Vec::new()),
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
    /// Per workload: the last workload that preempted it, and why.
    pub preempted_by: Vec<Option<(usize, Reason)>>,
    /// Per workload: the workloads it preempted, in order.
    pub preempts: Vec<Vec<usize>>,
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
    /// Assignments at `usage_version` without a preemption search, by the workload's
    /// [`State::same_requests`] class and the flavor each scan starts at: workloads asking the
    /// same of the same queue get the same answer, so identical jobs are assigned once.
    assigned: std::collections::HashMap<(usize, Vec<usize>), Rc<Assignment>>,
    assigned_version: u64,
    /// Per workload: its class of workloads with the same ClusterQueue and podset requests.
    same_requests: Vec<usize>,
    last_failure: Vec<Option<Failure>>,
    last_requeue: Vec<Option<Requeue>>,
    outcomes: Vec<Option<Outcome>>,
    queues: Vec<Vec<usize>>,
    cursors: Vec<usize>,
    /// Workloads holding quota (live ones first, in reservation order), and which still do.
    holders: Vec<Holder>,
    active: Vec<bool>,
    preempted_by: Vec<Option<(usize, Reason)>>,
    preempts: Vec<Vec<usize>>,
    /// A bound on evictions, so that the loop ends whatever the input.
    evictions_left: usize,
}

struct Entry {
    cq: usize,
    workload: usize,
    assignment: Rc<Assignment>,
    /// Whether this attempt scanned every flavor from the start.
    fresh: bool,
    /// Victims found at nomination.
    targets: Vec<Target>,
}

/// What the entries of one cycle share while they are processed in order.
struct CycleWork {
    /// The usage version the heads were nominated at.
    nominated_at: u64,
    /// The cycle's snapshot; copied only when a preempting head reserves capacity in it.
    snapshot: Option<Usage>,
    /// Victims of this cycle's preemptions: (holder, preemptor, reason).
    evictions: Vec<(usize, usize, Reason)>,
}

/// Heap order inside a queue (`baseCompareFunc`): higher priority, then the older queue-order
/// timestamp (creation, or an eviction by the PodsReady timeout or an admission check; one
/// second's resolution), then the Workload's uid, then input order.
fn queue_key(workload: &WorkloadModel) -> impl Ord + '_ {
    (
        Reverse(workload.priority),
        workload.queued_at.is_none(),
        workload.queued_at,
        workload.uid.as_deref(),
        workload.seq,
    )
}

/// Per workload, a class shared by the workloads with the same ClusterQueue and the same podset
/// requests and shapes: what a flavor assignment without preemption depends on.
fn same_requests(workloads: &[WorkloadModel]) -> Vec<usize> {
    let mut classes: std::collections::HashMap<(Option<usize>, &[PodSetModel]), usize> =
        std::collections::HashMap::new();
    workloads
        .iter()
        .map(|w| {
            let next = classes.len();
            *classes.entry((w.cq, &w.pod_sets)).or_insert(next)
        })
        .collect()
}

/// Quota held by no workload until the first arrival after the Workloads already there: what
/// Kueue freed without retrying the Workloads parked in its ClusterQueue (`Release::Unreserved`
/// without `retries_waiting`), per ClusterQueue.
pub(crate) type HeldUntilArrivals = [(usize, Vec<(Fr, Amount)>)];

pub(crate) fn simulate(
    model: &Model<'_>,
    workloads: &[WorkloadModel],
    live: &[Live],
    held_until_arrivals: &HeldUntilArrivals,
    releases: &[Release],
) -> Simulation {
    let mut state = State {
        model,
        workloads,
        usage: model.live_usage.clone(),
        workspace: Workspace::default(),
        progress: vec![None; workloads.len()],
        fresh_failure: vec![None; workloads.len()],
        usage_version: 0,
        reusable: vec![None; workloads.len()],
        assigned: std::collections::HashMap::new(),
        assigned_version: 0,
        same_requests: same_requests(workloads),
        last_failure: vec![None; workloads.len()],
        last_requeue: vec![None; workloads.len()],
        outcomes: vec![None; workloads.len()],
        queues: vec![Vec::new(); model.cqs.len()],
        cursors: vec![0; model.cqs.len()],
        holders: Vec::new(),
        active: Vec::new(),
        preempted_by: vec![None; workloads.len()],
        preempts: vec![Vec::new(); workloads.len()],
        evictions_left: 4 * workloads.len() + 64,
    };
    for holding in live {
        state.outcomes[holding.workload] = Some(Outcome::Holding);
        state.hold(holding.workload, holding.cq, holding.usage.clone());
    }
    let idle_limit = idle_cycle_limit(model, workloads);
    for (cq, usage) in held_until_arrivals {
        let node = model.cqs[*cq].node;
        for &(fr, amount) in usage {
            model.tree.add_usage(node, fr, amount, &mut state.usage);
        }
    }
    let last_arrival = workloads
        .iter()
        .map(|w| w.arrival)
        .chain(releases.iter().map(|r| r.arrival))
        .max()
        .unwrap_or(0);
    // Each arrival joins the queues once Kueue has decided on everything before it, and after
    // the quota of the runs deleted before it was released.
    for arrival in 0..=last_arrival {
        if arrival == 1 {
            for (cq, usage) in held_until_arrivals {
                let node = model.cqs[*cq].node;
                for &(fr, amount) in usage {
                    model.tree.remove_usage(node, fr, amount, &mut state.usage);
                }
            }
            state.usage_version += 1;
        }
        state.release(releases.iter().filter(|r| r.arrival == arrival));
        state.arrive(arrival);
        state.run(idle_limit);
    }
    state.finish()
}

impl State<'_, '_> {
    /// Queues the workloads of `arrival` behind each queue's current head, in queue order.
    fn arrive(&mut self, arrival: usize) {
        let workloads = self.workloads;
        for (index, workload) in workloads.iter().enumerate() {
            if workload.arrival != arrival || self.outcomes[index].is_some() {
                continue;
            }
            match (&workload.blocked, workload.cq) {
                (Some(blocked), _) => {
                    self.outcomes[index] = Some(Outcome::Blocked(blocked.clone()))
                }
                (None, Some(cq)) => self.queues[cq].push(index),
                (None, None) => {
                    self.outcomes[index] = Some(Outcome::Pending(Failure::Text(
                        "no ClusterQueue".to_string(),
                    )));
                }
            }
        }
        for (cq, queue) in self.queues.iter_mut().enumerate() {
            let cursor = self.cursors[cq];
            queue[cursor..].sort_by_key(|&w| queue_key(&workloads[w]));
        }
    }

    /// Scheduling cycles until no queue has a head, or nothing progresses any more.
    fn run(&mut self, idle_limit: usize) {
        let model = self.model;
        let state = self;
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
    }
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
        let mut progressed = false;
        let mut work = CycleWork {
            nominated_at: self.usage_version,
            snapshot: None,
            evictions: Vec::new(),
        };
        let workloads = self.workloads;
        let mut entries = Vec::with_capacity(heads.len());
        for &(cq, w) in heads {
            if let Some(inadmissible) = &workloads[w].inadmissible {
                progressed |= self.requeue_inadmissible(cq, w, inadmissible);
                continue;
            }
            entries.push(self.nominate(cq, w));
        }
        self.sort_entries(&mut entries);
        for entry in entries {
            progressed |= self.process_entry(entry, &mut work);
        }
        self.evict(&work.evictions);
        progressed
    }

    /// A head Kueue cannot admit whatever the quota (wrong namespace, invalid resources) goes
    /// back to its queue; returns whether it reached its final state.
    fn requeue_inadmissible(&mut self, cq: usize, w: usize, inadmissible: &Inadmissible) -> bool {
        let reason = match inadmissible {
            Inadmissible::NamespaceMismatch => Requeue::NamespaceMismatch,
            Inadmissible::InvalidResources(_) => Requeue::Invalid,
        };
        let failure = Failure::Text(inadmissible.message());
        self.requeue(cq, w, reason, failure, false)
    }

    /// `nominate` for one head: its flavor assignment on the usage at the cycle start (reused
    /// when a fresh scan would repeat the previous one), and its victims when it needs them.
    fn nominate(&mut self, cq: usize, w: usize) -> Entry {
        let model = self.model;
        let fresh = self.progress[w]
            .as_ref()
            .is_none_or(|p| !p.has_pending_flavors());
        let may_preempt = self.evictions_left > 0 && model.cqs[cq].preemption.can_preempt();
        let reusable = match &self.reusable[w] {
            Some((version, previous)) if fresh && *version == self.usage_version => {
                Some(Rc::clone(previous))
            }
            _ => None,
        };
        let assignment = match reusable {
            Some(previous) => previous,
            None if !may_preempt => self.assign_shared(cq, w),
            None => Rc::new(assign(
                model,
                cq,
                &self.workloads[w],
                &self.usage,
                self.progress[w].as_deref(),
                Some(&Preemptor {
                    model,
                    cq,
                    workload: &self.workloads[w],
                    holders: &self.holders,
                    active: &self.active,
                }),
                &mut self.workspace,
            )),
        };
        // `GetTargets` for the whole assignment, on the snapshot taken at the cycle start.
        let targets = if may_preempt && assignment.mode() == Mode::Preempt {
            let frs = assignment.frs_needing_preemption(model);
            self.preemptor(cq, w)
                .targets(&assignment.usage, &frs, &self.usage)
        } else {
            Vec::new()
        };
        Entry {
            cq,
            workload: w,
            assignment,
            fresh,
            targets,
        }
    }

    /// Head `w` of queue `cq` searching victims among the workloads holding quota.
    fn preemptor(&self, cq: usize, w: usize) -> Preemptor<'_> {
        Preemptor {
            model: self.model,
            cq,
            workload: &self.workloads[w],
            holders: &self.holders,
            active: &self.active,
        }
    }

    /// The assignment of head `w` when no preemption is searched: a pure function of the queue,
    /// the podsets' requests and shapes, the usage and where each scan resumes, so it is shared
    /// by every workload asking the same at the same usage.
    fn assign_shared(&mut self, cq: usize, w: usize) -> Rc<Assignment> {
        if self.assigned_version != self.usage_version {
            self.assigned.clear();
            self.assigned_version = self.usage_version;
        }
        let workload = &self.workloads[w];
        let progress = self.progress[w].as_deref();
        let starts = workload
            .pod_sets
            .iter()
            .enumerate()
            .flat_map(|(i, ps)| {
                ps.requests
                    .iter()
                    .map(move |&(resource, _)| progress.map_or(0, |p| p.next_flavor(i, resource)))
            })
            .collect();
        let key = (self.same_requests[w], starts);
        if let Some(shared) = self.assigned.get(&key) {
            return Rc::clone(shared);
        }
        let assignment = Rc::new(assign(
            self.model,
            cq,
            workload,
            &self.usage,
            progress,
            None,
            &mut self.workspace,
        ));
        self.assigned.insert(key, Rc::clone(&assignment));
        assignment
    }

    /// `makeClassicalIterator`: less borrowing first, then higher priority, then older. Ties
    /// (random in Kueue) are broken by queue name and input order.
    fn sort_entries(&self, entries: &mut [Entry]) {
        let model = self.model;
        entries.sort_by(|a, b| {
            let (wa, wb) = (&self.workloads[a.workload], &self.workloads[b.workload]);
            a.assignment
                .borrowing
                .cmp(&b.assignment.borrowing)
                .then(wb.priority.cmp(&wa.priority))
                .then(wa.queued_at.is_none().cmp(&wb.queued_at.is_none()))
                .then(wa.queued_at.cmp(&wb.queued_at))
                .then(model.cqs[a.cq].name.cmp(&model.cqs[b.cq].name))
                .then(wa.seq.cmp(&wb.seq))
        });
    }

    /// `processEntry` for one nominated head, in the cycle's order; returns whether the
    /// workload reached a final state or started preempting.
    fn process_entry(&mut self, entry: Entry, work: &mut CycleWork) -> bool {
        let (cq, w, fresh) = (entry.cq, entry.workload, entry.fresh);
        self.progress[w] = Some(Rc::clone(&entry.assignment));
        if fresh {
            // A new full scan supersedes the one kept for the message.
            self.fresh_failure[w] = None;
        }
        match entry.assignment.mode() {
            Mode::NoFit => {
                let failure = Failure::Assignment(Rc::clone(&entry.assignment));
                let progressed = self.requeue(cq, w, Requeue::NoFit, failure, fresh);
                self.remember(w, work.nominated_at, fresh, entry.assignment);
                progressed
            }
            Mode::Preempt if !entry.targets.is_empty() => self.start_preemption(&entry, work),
            Mode::Preempt => {
                if self.model.cqs[cq].preemption.reclaim_within_cohort != "Any" {
                    self.reserve_for_unreclaimable(cq, &entry.assignment, work);
                }
                let failure = Failure::Assignment(Rc::clone(&entry.assignment));
                let progressed = self.requeue(cq, w, Requeue::NoCandidates, failure, fresh);
                self.remember(w, work.nominated_at, fresh, entry.assignment);
                progressed
            }
            Mode::Fit => self.admit_if_still_fits(entry, work),
        }
    }

    /// A head with victims: skipped when its victims overlap an earlier entry's or it no longer
    /// fits once they are gone; else its victims are evicted after the cycle and its usage
    /// counts in the snapshot, and it stays the head of its queue with a fresh scan. Returns
    /// whether it reached a final state or started preempting.
    fn start_preemption(&mut self, entry: &Entry, work: &mut CycleWork) -> bool {
        let model = self.model;
        let (cq, w, assignment, targets) =
            (entry.cq, entry.workload, &entry.assignment, &entry.targets);
        let overlaps = targets
            .iter()
            .any(|t| work.evictions.iter().any(|(h, _, _)| *h == t.holder));
        let message = if overlaps {
            Some("Workload has overlapping preemption targets with another workload")
        } else if !self.fits(
            cq,
            assignment,
            work.snapshot.as_ref(),
            &work.evictions,
            targets,
        ) {
            Some("Workload no longer fits after processing another workload")
        } else {
            None
        };
        if let Some(message) = message {
            let failure = Failure::Text(message.to_string());
            return self.requeue(cq, w, Requeue::Skipped, failure, entry.fresh);
        }
        work.evictions
            .extend(targets.iter().map(|t| (t.holder, w, t.reason)));
        let snap = work.snapshot.get_or_insert_with(|| self.usage.clone());
        for &(fr, amount) in &assignment.usage {
            model.tree.add_usage(model.cqs[cq].node, fr, amount, snap);
        }
        // Requeued at once as the sticky head of its queue, with a fresh scan.
        self.progress[w] = None;
        self.reusable[w] = None;
        self.last_failure[w] = Some(Failure::Text(
            "waiting for the preempted workloads to release their quota".to_string(),
        ));
        true
    }

    /// `reserveCapacityForUnreclaimablePreempt`: a head that needs preemption, has no victims
    /// and cannot reclaim within its cohort holds capacity back in the cycle's snapshot.
    fn reserve_for_unreclaimable(&self, cq: usize, assignment: &Assignment, work: &mut CycleWork) {
        let model = self.model;
        let reserved = self.to_reserve(cq, assignment, work.snapshot.as_ref());
        let snap = work.snapshot.get_or_insert_with(|| self.usage.clone());
        for (fr, amount) in reserved {
            model.tree.add_usage(model.cqs[cq].node, fr, amount, snap);
        }
    }

    /// A head that fit at nomination reserves its quota unless an earlier entry of the cycle
    /// took it; returns whether it reached a final state.
    fn admit_if_still_fits(&mut self, entry: Entry, work: &mut CycleWork) -> bool {
        let model = self.model;
        let Entry {
            cq,
            workload: w,
            assignment,
            fresh,
            ..
        } = entry;
        let node = model.cqs[cq].node;
        if !self.fits(
            cq,
            &assignment,
            work.snapshot.as_ref(),
            &work.evictions,
            &[],
        ) {
            let failure = Failure::Text(
                "Workload no longer fits after processing another workload".to_string(),
            );
            return self.requeue(cq, w, Requeue::Skipped, failure, fresh);
        }
        self.usage_version += 1;
        for &(fr, amount) in &assignment.usage {
            model.tree.add_usage(node, fr, amount, &mut self.usage);
            if let Some(snap) = work.snapshot.as_mut() {
                model.tree.add_usage(node, fr, amount, snap);
            }
        }
        let checks = admission_checks(model, cq, &self.workloads[w], &assignment);
        self.hold(w, cq, assignment.usage.clone());
        self.reusable[w] = None;
        self.progress[w] = None;
        self.outcomes[w] = Some(Outcome::Reserved { assignment, checks });
        self.cursors[cq] += 1;
        true
    }

    /// `fits`: whether the assignment fits the cycle's snapshot once this cycle's victims and
    /// `targets` are gone.
    fn fits(
        &self,
        cq: usize,
        assignment: &Assignment,
        snapshot: Option<&Usage>,
        evictions: &[(usize, usize, Reason)],
        targets: &[Target],
    ) -> bool {
        let model = self.model;
        let node = model.cqs[cq].node;
        let current = snapshot.unwrap_or(&self.usage);
        let fits_in = |usage: &Usage| {
            assignment
                .usage
                .iter()
                .all(|&(fr, amount)| model.tree.available(node, fr, usage) >= amount)
        };
        if evictions.is_empty() && targets.is_empty() {
            return fits_in(current);
        }
        let mut trial = current.clone();
        let removed = evictions
            .iter()
            .map(|(holder, _, _)| *holder)
            .chain(targets.iter().map(|t| t.holder));
        for holder in removed {
            let h = &self.holders[holder];
            for &(fr, amount) in &h.usage {
                model
                    .tree
                    .remove_usage(model.cqs[h.cq].node, fr, amount, &mut trial);
            }
        }
        fits_in(&trial)
    }

    /// Records a workload as holding quota (a possible victim from now on).
    fn hold(&mut self, workload: usize, cq: usize, usage: Vec<(Fr, Amount)>) {
        let w = &self.workloads[workload];
        self.holders.push(Holder {
            workload,
            cq,
            usage,
            priority: w.priority,
            queued_at: w.queued_at,
            seq: w.seq,
            reserved_rank: self.holders.len(),
        });
        self.active.push(true);
    }

    /// Evicts this cycle's victims before the next cycle: their quota is released, they queue
    /// again, and so do the workloads parked as inadmissible in their cohorts.
    fn evict(&mut self, evictions: &[(usize, usize, Reason)]) {
        if evictions.is_empty() {
            return;
        }
        let model = self.model;
        let mut requeued: Vec<Vec<usize>> = vec![Vec::new(); model.cqs.len()];
        let mut released_roots = Vec::new();
        for &(holder, preemptor, reason) in evictions {
            if !self.active[holder] {
                continue;
            }
            self.evictions_left = self.evictions_left.saturating_sub(1);
            released_roots.push(self.release_holder(holder));
            let victim = self.holders[holder].workload;
            self.preempted_by[victim] = Some((preemptor, reason));
            self.preempts[preemptor].push(victim);
            self.outcomes[victim] = None;
            self.progress[victim] = None;
            self.reusable[victim] = None;
            self.fresh_failure[victim] = None;
            if let Some(cq) = self.workloads[victim].cq {
                requeued[cq].push(victim);
            }
        }
        self.requeue_released(&released_roots, requeued);
    }

    /// Deletes the runs of `releases` before the next arrival: their quota is released (a
    /// Workload evicted earlier and queued again leaves its queue), and the workloads parked as
    /// inadmissible in their cohorts queue again, as when Kueue finishes a Workload.
    fn release<'r>(&mut self, releases: impl Iterator<Item = &'r Release>) {
        let model = self.model;
        let mut released_roots = Vec::new();
        for release in releases {
            let holder = release.workload.and_then(|w| {
                (0..self.holders.len()).find(|&h| self.active[h] && self.holders[h].workload == w)
            });
            match holder {
                Some(holder) => released_roots.push(self.release_holder(holder)),
                None if release.workload.is_some() => {}
                None => {
                    // Not a possible victim (unreadable as a job): its usage alone is counted.
                    let node = model.cqs[release.cq].node;
                    for &(fr, amount) in &release.usage {
                        model.tree.remove_usage(node, fr, amount, &mut self.usage);
                    }
                    released_roots.push(model.tree.ancestors(node).last().unwrap_or(node));
                    self.usage_version += 1;
                }
            }
            if let Some(w) = release.workload {
                for cq in 0..self.queues.len() {
                    if let Some(position) = self.queues[cq].iter().position(|&q| q == w) {
                        self.queues[cq].remove(position);
                        if position < self.cursors[cq] {
                            self.cursors[cq] -= 1;
                        }
                    }
                }
                self.outcomes[w] = Some(Outcome::Released);
            }
        }
        self.requeue_released(&released_roots, vec![Vec::new(); model.cqs.len()]);
    }

    /// Releases a holder's quota; returns the root of its cohort tree.
    fn release_holder(&mut self, holder: usize) -> usize {
        let model = self.model;
        self.active[holder] = false;
        let h = &self.holders[holder];
        let node = model.cqs[h.cq].node;
        for &(fr, amount) in &h.usage {
            model.tree.remove_usage(node, fr, amount, &mut self.usage);
        }
        self.usage_version += 1;
        model.tree.ancestors(node).last().unwrap_or(node)
    }

    /// After quota was released in the cohort trees of `released_roots`: `requeued` (per
    /// ClusterQueue) and the workloads parked as inadmissible in those trees go back to their
    /// queues.
    fn requeue_released(&mut self, released_roots: &[usize], mut requeued: Vec<Vec<usize>>) {
        if released_roots.is_empty() && requeued.iter().all(Vec::is_empty) {
            return;
        }
        let model = self.model;
        for (cq, requeued) in requeued.iter_mut().enumerate() {
            let node = model.cqs[cq].node;
            let root = model.tree.ancestors(node).last().unwrap_or(node);
            if released_roots.contains(&root) {
                // Parked workloads of the cohort go back to their queues.
                for &w in &self.queues[cq][..self.cursors[cq]] {
                    if matches!(self.outcomes[w], Some(Outcome::Pending(_))) {
                        self.outcomes[w] = None;
                        requeued.push(w);
                    }
                }
            }
            if !requeued.is_empty() {
                self.requeue_all(cq, requeued);
            }
        }
    }

    /// Puts workloads back into a queue in heap order, behind the current head when it is a
    /// preemptor waiting for its victims (Kueue keeps it at the head).
    fn requeue_all(&mut self, cq: usize, workloads: &[usize]) {
        let cursor = self.cursors[cq];
        let queue = &self.queues[cq];
        let mut done: Vec<usize> = queue[..cursor]
            .iter()
            .copied()
            .filter(|w| !workloads.contains(w))
            .collect();
        let mut rest: Vec<usize> = queue[cursor..].to_vec();
        let head = (!rest.is_empty() && !self.preempts[rest[0]].is_empty()).then(|| rest.remove(0));
        rest.extend(
            workloads
                .iter()
                .copied()
                .filter(|w| !queue[cursor..].contains(w)),
        );
        rest.sort_by_key(|&w| queue_key(&self.workloads[w]));
        self.cursors[cq] = done.len();
        done.extend(head);
        done.extend(rest);
        self.queues[cq] = done;
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
    /// (resumed scans can name another podset, see docs/kueue.md §3.1).
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
        Simulation {
            outcomes,
            preempted_by: self.preempted_by,
            preempts: self.preempts,
        }
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
