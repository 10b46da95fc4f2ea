//! Kueue's flavor assignment, reproduced as a pure function.
//!
//! Given the cluster's queues, quotas and live usage ([`Cluster`]) and the jobs a plan is about
//! to submit ([`PendingWorkload`]), [`predict`] tells where Kueue v0.19.2 puts each podset and
//! whether the job runs, waits for an admission check (the DWS ProvisioningRequest) or stays
//! pending, with Kueue's own messages. [`fits_ever`] answers whether a job could ever be
//! admitted by its queue; [`pools`] says which node pool a flavor stands for; [`dws`]
//! checks run durations against flex-start's 7-day limit; [`remedy`] finds the changes that
//! would admit a pending job, each checked by predicting again (for `gkq explain`).
//!
//! Everything here is pure: no I/O, no clock, deterministic output.
//!
//! # Modelled (Kueue v0.19.2 with default feature gates)
//! - Podsets of RayJobs (head with autoscaler and sidecar-submitter containers, GCS fault
//!   tolerance, worker groups `replicas × numOfHosts`, K8sJobMode submitter), batch Jobs and
//!   Workload objects; effective pod requests (limits as missing requests, init containers and
//!   sidecars, pod-level resources, overhead); requests above limits make a workload
//!   inadmissible; Kueue's RayJob webhook rejections.
//! - Priority from WorkloadPriorityClass, PriorityClass or the global default.
//! - Flavor eligibility: flavor existence, untolerated `NoSchedule`/`NoExecute` taints, node
//!   selector and required node affinity restricted to the flavor's own label keys.
//! - Resource groups (one flavor per group and podset), undeclared resources, the `pods`
//!   resource, quota fit with cohorts (nested), borrowing and lending limits, borrowing levels,
//!   `flavorFungibility` (`whenCanBorrow`, `whenCanPreempt`, `preference`).
//! - Classic preemption (fair sharing off): `withinClusterQueue` (`LowerPriority`,
//!   `LowerOrNewerEqualPriority`), `reclaimWithinCohort` (`LowerPriority`, `Any`) and
//!   `borrowWithinCohort` with `maxPriorityThreshold`, with Kueue's candidate order and minimal
//!   victim set. Victims are the live Workloads holding quota (when Workload objects were read)
//!   and jobs the prediction admitted earlier. A preemptor is admitted in a later cycle, once
//!   its victims released their quota; victims queue again (and may be admitted elsewhere).
//!   Heads whose victims overlap those of an earlier head in the cycle wait.
//! - The scheduling loop: one head per ClusterQueue per cycle, heads ordered by borrowing,
//!   priority and age, "no longer fits" skips, capacity held back by heads that need
//!   preemption, BestEffortFIFO versus StrictFIFO requeueing, resumed flavor scans
//!   (FlavorFungibilityPreserveScanProgress).
//! - Inactive ClusterQueues (missing flavors or checks, inactive checks, stop policy, cohort
//!   cycles), missing LocalQueues and ClusterQueues, null `namespaceSelector`, admission checks
//!   with `onFlavors`; a ProvisioningRequest check passes at once when no podset with pods
//!   uses its config's `managedResources`.
//!
//! # Not modelled
//! - Preemption under fair sharing, Workloads already being evicted (Kueue orders them first),
//!   `SchedulerTimestampPreemptionBuffer` (alpha, off), and victims when live usage comes from
//!   ClusterQueue status rather than Workloads (then nothing is preempted). Fair sharing,
//!   admission fair sharing, TAS topology placement,
//!   partial admission, MultiKueue, concurrent admission, elastic workload slices after
//!   admission, LimitRange defaults, RuntimeClass overhead, `resources.transformations` and
//!   `excludeResourcePrefixes` of the Kueue configuration (`quotaCheckStrategy:
//!   IgnoreUndeclared` included), reclaimable pods, SchedulingEquivalenceHashing's bulk parking
//!   of identical workloads (each is tried instead; with usage only growing the verdict is the
//!   same).
//! - A RayJob's worker `replicas` that is omitted counts as 0, the KubeRay CRD default the API
//!   server applies before Kueue sees the job (Kueue's own fallback to 1 never triggers).
//! - Time: workloads never finish during a prediction (but for the runs of jobs the plan deletes
//!   or replaces, [`predict_in_order`]), so a workload parked as inadmissible is not retried,
//!   and ProvisioningRequests never resolve.
//! - Ties Kueue breaks at random (map order, unstable sort) are broken by name and input order;
//!   Kueue's pending message may name another podset after resumed scans (docs/kueue.md §3.1), so
//!   gkq reports the message of the last full scan.

pub mod active;
pub mod amount;
mod assign;
pub mod dws;
pub mod held;
pub mod job_workload;
mod model;
pub mod objects;
mod outcome;
pub mod podsets;
pub mod pools;
mod preempt;
pub mod provisioning;
mod queues;
mod quota;
mod reader;
pub mod remedy;
pub mod selectors;
pub mod time;
pub mod unmodelled;

use std::collections::BTreeMap;

pub use amount::Amount;
pub use objects::Cluster;
pub use outcome::{
    AttemptProblem, FlavorAttempt, FlavorUsage, Placement, PlacementState, PodSetPlacement,
    Prediction, observed_placement,
};
pub use podsets::{PendingWorkload, PodSet};
pub use reader::{ParseError, ParseErrors};

use amount::{quantity_of, request_value};
use assign::{Assignment, ReasonTexts};
use model::{Blocked, Model, WorkloadModel};
use objects::ReservingWorkload;
use queues::{Live, Outcome, Release, Simulation, simulate};
use quota::Fr;

/// Predicts Kueue's decision for every job, in the order given, together with the live
/// Workloads still waiting in `cluster` (jobs created earlier queue first; the given jobs, not
/// created yet, queue after them in the order given) and the live Workloads holding quota that
/// preemption evicts. The given jobs reach Kueue together (a batch released at once, say by a
/// ClusterQueue's `stopPolicy: Hold` let go); [`predict_in_order`] is for jobs submitted one
/// after another.
pub fn predict(cluster: &Cluster, jobs: &[PendingWorkload]) -> Prediction {
    predict_arriving(cluster, jobs, Arrival::Together, &[])
}

/// [`predict`] for jobs that reach Kueue one after another, in the order given, each once
/// Kueue has decided on everything before it: how `gkq apply` submits a plan's jobs. The live
/// Workloads of `released` go away on the way (their jobs are deleted, and Kueue finishes
/// them, docs/kueue.md 1c.5): each releases its quota before job `before` arrives.
pub fn predict_in_order(
    cluster: &Cluster,
    jobs: &[PendingWorkload],
    released: &[Released],
) -> Prediction {
    predict_arriving(cluster, jobs, Arrival::InOrder, released)
}

/// A live Workload whose job is deleted while the given jobs are submitted, and before which of
/// them: a replaced job's earlier run just before its new run (`before` is the new run's index),
/// a job the plan deletes before the first (`before: 0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub namespace: String,
    pub name: String,
    pub before: usize,
}

/// How the given jobs reach Kueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arrival {
    Together,
    InOrder,
}

/// The prediction of [`predict`] and [`predict_in_order`]: `jobs` arriving as `arrival` says,
/// after the live Workloads waiting, with `released` going away on the way.
fn predict_arriving(
    cluster: &Cluster,
    jobs: &[PendingWorkload],
    arrival: Arrival,
    released: &[Released],
) -> Prediction {
    let mut model = Model::compile(cluster);
    let (queued, queue_releases) = queued_live(&model, cluster, jobs);
    let holding = holding_workloads(&model, cluster);
    let all: Vec<&PendingWorkload> = queued
        .iter()
        .copied()
        .chain(jobs.iter())
        .chain(holding.iter().map(|(_, _, workload)| *workload))
        .collect();
    let mut compiled: Vec<WorkloadModel> = all
        .iter()
        .enumerate()
        .map(|(seq, workload)| model.compile_workload(workload, seq))
        .collect();
    set_arrivals(&mut compiled, queued.len(), jobs.len(), arrival);
    let first_live = queued.len() + jobs.len();
    let live: Vec<Live> = holding
        .iter()
        .enumerate()
        .map(|(i, (cq, reserving, _))| Live {
            workload: first_live + i,
            cq: *cq,
            usage: reserving_usage(&model, reserving),
        })
        .collect();
    let held_until_arrivals = held_until_arrivals(&model, cluster);
    let releases = releases_of(&model, cluster, &holding, first_live, released, arrival);
    let simulation = simulate(&model, &compiled, &live, &held_until_arrivals, &releases);

    let placements = placements_of(&model, &all, &compiled, &simulation, &queue_releases);
    let usage = usage_summary(
        &model,
        &compiled,
        &simulation,
        queued.len(),
        &live,
        &releases,
    );
    let mut placements = placements.into_iter();
    let queued_placements = placements.by_ref().take(queued.len()).collect();
    let plan_placements = placements.by_ref().take(jobs.len()).collect();
    let preempted = placements
        .zip(&simulation.outcomes[first_live..])
        .filter(|(_, outcome)| !matches!(outcome, Outcome::Holding | Outcome::Released))
        .map(|(placement, _)| placement)
        .collect();
    Prediction {
        placements: plan_placements,
        queued: queued_placements,
        usage,
        preempted,
    }
}

/// The live Workloads waiting in Kueue's queues, in queue order, each with the release of its
/// quota that sent it back there, if one did. A live Workload owned by one of the given `jobs`
/// is that job; only the job is kept. Workloads whose quota Kueue takes back (a stopped or
/// missing queue) queue again, after the waiting ones.
fn queued_live<'c>(
    model: &Model<'c>,
    cluster: &'c Cluster,
    jobs: &[PendingWorkload],
) -> (Vec<&'c PendingWorkload>, Vec<Option<active::Release>>) {
    let requeued = cluster
        .reserving_workloads
        .iter()
        .zip(&model.released)
        .filter_map(|(reserving, release)| Some((reserving.workload.as_ref()?, release.clone()?)));
    cluster
        .pending_workloads
        .iter()
        .map(|w| (w, None))
        .chain(requeued.map(|(w, release)| (w, Some(release))))
        .filter(|(live, _)| {
            !jobs.iter().any(|job| {
                live.owner.as_ref().is_some_and(|(kind, name)| {
                    *kind == job.kind && *name == job.name && live.namespace == job.namespace
                })
            })
        })
        .unzip()
}

/// When each of the given jobs (after the `queued` live Workloads, `jobs` of them) reaches
/// Kueue: all at once, or one after another after the last live Workload requeued.
fn set_arrivals(compiled: &mut [WorkloadModel], queued: usize, jobs: usize, arrival: Arrival) {
    let first_arrival = 1 + compiled[..queued]
        .iter()
        .map(|w| w.arrival)
        .max()
        .unwrap_or(0);
    for (i, job) in compiled[queued..queued + jobs].iter_mut().enumerate() {
        job.arrival = match arrival {
            Arrival::Together => 0,
            Arrival::InOrder => first_arrival + i,
        };
    }
}

/// Quota Kueue frees without retrying the Workloads parked in its queue: by ClusterQueue.
fn held_until_arrivals(model: &Model<'_>, cluster: &Cluster) -> Vec<(usize, Vec<(Fr, Amount)>)> {
    cluster
        .reserving_workloads
        .iter()
        .zip(&model.released)
        .filter(|(_, released)| {
            matches!(
                released,
                Some(active::Release::Unreserved {
                    retries_waiting: false,
                    ..
                })
            )
        })
        .filter_map(|(reserving, _)| {
            let cq = *model.cq_index.get(&reserving.cluster_queue)?;
            Some((cq, reserving_usage(model, reserving)))
        })
        .collect()
}

/// Each workload's placement from the simulation's outcome, with its preemptions and the
/// release of quota that requeued it.
fn placements_of(
    model: &Model<'_>,
    all: &[&PendingWorkload],
    compiled: &[WorkloadModel],
    simulation: &Simulation,
    queue_releases: &[Option<active::Release>],
) -> Vec<Placement> {
    let mut texts = ReasonTexts::default();
    all.iter()
        .zip(compiled)
        .zip(&simulation.outcomes)
        .enumerate()
        .map(|(index, ((workload, compiled), outcome))| {
            let mut placement = placement_of(model, all, workload, compiled, outcome, &mut texts);
            add_preemptions(&mut placement, index, all, simulation);
            if let Some(Some(release)) = queue_releases.get(index) {
                placement.reason = Some(match &placement.reason {
                    Some(reason) => format!("{}; then: {reason}", release.text()),
                    None => release.text(),
                });
            }
            placement
        })
        .collect()
}

/// Live Workloads holding quota that preemption could evict, oldest reservation first, with
/// their ClusterQueue. Only known when Workload objects were read (quota read from ClusterQueue
/// status has no owners) and the Workload could be read as a job.
fn holding_workloads<'c>(
    model: &Model<'c>,
    cluster: &'c Cluster,
) -> Vec<(usize, &'c ReservingWorkload, &'c PendingWorkload)> {
    if !cluster.workloads_observed {
        return Vec::new();
    }
    let mut holding: Vec<_> = cluster
        .reserving_workloads
        .iter()
        .zip(&model.released)
        .filter(|(_, released)| released.is_none())
        .filter_map(|(r, _)| {
            let cq = *model.cq_index.get(&r.cluster_queue)?;
            Some((cq, r, r.workload.as_ref()?))
        })
        .collect();
    holding.sort_by(|a, b| {
        (a.1.reserved_at, &a.1.namespace, &a.1.name).cmp(&(
            b.1.reserved_at,
            &b.1.namespace,
            &b.1.name,
        ))
    });
    holding
}

/// The live Workloads of `released` that hold quota, with the arrival before which each goes:
/// the arrival of job `before` (jobs arrive from 1 in order, all at 0 together).
fn releases_of(
    model: &Model<'_>,
    cluster: &Cluster,
    holding: &[(usize, &ReservingWorkload, &PendingWorkload)],
    first_live: usize,
    released: &[Released],
    arrival: Arrival,
) -> Vec<Release> {
    if !cluster.workloads_observed {
        return Vec::new();
    }
    released
        .iter()
        .filter_map(|release| {
            let reserving = cluster
                .reserving_workloads
                .iter()
                .find(|r| r.namespace == release.namespace && r.name == release.name)?;
            let cq = *model.cq_index.get(&reserving.cluster_queue)?;
            let workload = holding
                .iter()
                .position(|(_, r, _)| std::ptr::eq(*r, reserving))
                .map(|i| first_live + i);
            Some(Release {
                arrival: match arrival {
                    Arrival::Together => 0,
                    Arrival::InOrder => release.before + 1,
                },
                workload,
                cq,
                usage: reserving_usage(model, reserving),
            })
        })
        .collect()
}

/// A live Workload's usage by `Fr`, as `Model::add_live_usage` counts it.
fn reserving_usage(model: &Model<'_>, reserving: &ReservingWorkload) -> Vec<(Fr, Amount)> {
    let mut usage: Vec<(Fr, Amount)> = Vec::new();
    for (flavor, resource, quantity) in &reserving.usage {
        let (Some(f), Some(r)) = (model.flavors.get(flavor), model.resources.get(resource)) else {
            continue;
        };
        if r >= model.quota_resources {
            continue;
        }
        let fr = model.fr(f, r);
        let value = Amount::new(request_value(resource, *quantity));
        match usage.iter_mut().find(|(f, _)| *f == fr) {
            Some((_, total)) => *total = total.plus(value),
            None => usage.push((fr, value)),
        }
    }
    usage
}

/// `namespace/name` of the job a workload stands for.
fn job_key(workload: &PendingWorkload) -> String {
    let name = workload
        .owner
        .as_ref()
        .map_or(workload.name.as_str(), |(_, name)| name.as_str());
    format!("{}/{name}", workload.namespace)
}

/// Adds who this workload preempts and who preempted it.
fn add_preemptions(
    placement: &mut Placement,
    index: usize,
    all: &[&PendingWorkload],
    simulation: &Simulation,
) {
    for &victim in &simulation.preempts[index] {
        let key = job_key(all[victim]);
        if !placement.preempts.contains(&key) {
            placement.preempts.push(key);
        }
    }
    let Some((preemptor, why)) = simulation.preempted_by[index] else {
        return;
    };
    let preemptor = job_key(all[preemptor]);
    let preempted = format!("preempted by {preemptor} ({})", why.text());
    placement.reason = Some(match (&placement.reason, placement.state) {
        (Some(reason), PlacementState::Pending) => format!("{preempted}; then: {reason}"),
        (_, PlacementState::Pending) => preempted,
        (Some(reason), _) => format!("{preempted}, then admitted again; {reason}"),
        (None, _) => format!("{preempted}, then admitted again"),
    });
    placement.preempted_by = Some(preemptor);
}

/// A workload's priority as Kueue resolves it (`jobframework.ExtractPriority`): the
/// WorkloadPriorityClass its label names, else the PriorityClass of its first podset that names
/// one, else the cluster's default PriorityClass, else 0; a named class that does not exist is
/// an error. The one rule for `plan` and the local target's simulated Kueue.
pub fn priority_of(cluster: &Cluster, workload: &PendingWorkload) -> Result<i32, String> {
    match &workload.priority {
        podsets::PrioritySource::Value(value) => Ok(*value),
        podsets::PrioritySource::WorkloadPriorityClassOr { class, value } => Ok(cluster
            .workload_priority_classes
            .get(class)
            .copied()
            .unwrap_or(*value)),
        podsets::PrioritySource::WorkloadPriorityClass(name) => cluster
            .workload_priority_classes
            .get(name)
            .copied()
            .ok_or_else(|| format!("workloadpriorityclasses.kueue.x-k8s.io {name:?} not found")),
        podsets::PrioritySource::PodSets => {
            let class = workload
                .pod_sets
                .iter()
                .find_map(|ps| ps.priority_class_name.as_ref());
            match class {
                Some(name) => {
                    cluster.priority_classes.get(name).copied().ok_or_else(|| {
                        format!("priorityclasses.scheduling.k8s.io {name:?} not found")
                    })
                }
                None => Ok(cluster.default_priority.unwrap_or(0)),
            }
        }
    }
}

/// Whether `job` could be admitted by its queue if the whole cluster (queue and cohort) were
/// empty: `Ok` with the flavor of each podset, or `Err` with Kueue's reason (for
/// `gkq validate`). Jobs Kueue does not manage are `Ok` with no flavors.
///
/// This runs the same scheduling simulation as [`predict`], because a single flavor scan is not
/// enough: when a scan fails but stopped early on some podset, Kueue retries at once and resumes
/// after the flavors it tried, which can admit a workload a fresh scan rejects.
pub fn fits_ever(cluster: &Cluster, job: &PendingWorkload) -> Result<Vec<PodSetPlacement>, String> {
    let mut model = Model::compile(cluster);
    model.live_usage = model.tree.zero_usage();
    let compiled = model.compile_workload(job, 0);
    let simulation = simulate(&model, std::slice::from_ref(&compiled), &[], &[], &[]);
    match simulation.outcomes.into_iter().next() {
        Some(Outcome::Reserved { assignment, .. }) => {
            Ok(pod_set_placements(&model, job, Some(&assignment)))
        }
        Some(Outcome::Blocked(Blocked::Unmanaged)) => Ok(Vec::new()),
        Some(Outcome::Blocked(Blocked::Rejected(reason))) => {
            Err(format!("rejected by Kueue's webhook: {reason}"))
        }
        Some(Outcome::Blocked(Blocked::Pending(reason))) => Err(reason),
        Some(Outcome::Pending(failure)) => Err(failure.message(&model, &job.pod_sets)),
        Some(Outcome::QueuedBehind { .. } | Outcome::Holding | Outcome::Released) | None => {
            Err("not scheduled".to_string())
        }
    }
}

fn pod_set_placements(
    model: &Model<'_>,
    workload: &PendingWorkload,
    assignment: Option<&Assignment>,
) -> Vec<PodSetPlacement> {
    workload
        .pod_sets
        .iter()
        .enumerate()
        .map(|(i, pod_set)| {
            let flavors: BTreeMap<String, String> = assignment
                .map(|a| {
                    a.choices_of(i)
                        .iter()
                        .map(|c| {
                            (
                                model.resources.name(c.resource).to_string(),
                                model.flavors.name(c.flavor).to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            PodSetPlacement::new(pod_set.name.clone(), pod_set.count, flavors)
        })
        .collect()
}

fn placement_of(
    model: &Model<'_>,
    all: &[&PendingWorkload],
    workload: &PendingWorkload,
    compiled: &WorkloadModel,
    outcome: &Outcome,
    texts: &mut ReasonTexts,
) -> Placement {
    let (kind, job) = workload
        .owner
        .clone()
        .unwrap_or_else(|| (workload.kind.clone(), workload.name.clone()));
    let cluster_queue = compiled.cq.map(|cq| model.cqs[cq].name.clone());
    let unplaced = || {
        workload
            .pod_sets
            .iter()
            .map(|ps| PodSetPlacement::new(ps.name.clone(), ps.count, BTreeMap::new()))
            .collect()
    };
    let mut attempts = Vec::new();
    let (podsets, state, reason, admission_checks) = match outcome {
        Outcome::Reserved { assignment, checks } if checks.is_empty() => (
            pod_set_placements(model, workload, Some(assignment)),
            PlacementState::Admitted,
            None,
            Vec::new(),
        ),
        Outcome::Reserved { assignment, checks } => (
            pod_set_placements(model, workload, Some(assignment)),
            PlacementState::WaitingForAdmissionChecks,
            Some(format!(
                "quota reserved; waiting for admission checks: {}",
                checks.join(", ")
            )),
            checks.clone(),
        ),
        Outcome::Pending(failure) => {
            let message;
            (message, attempts) = failure.explain(model, &workload.pod_sets, texts);
            (
                unplaced(),
                PlacementState::Pending,
                Some(message),
                Vec::new(),
            )
        }
        Outcome::QueuedBehind { head, cq } => {
            let strategy = match model.cqs[*cq].strategy {
                objects::QueueingStrategy::StrictFifo => "StrictFIFO",
                objects::QueueingStrategy::BestEffortFifo => "BestEffortFIFO",
            };
            let head = all.get(*head).map_or_else(String::new, |w| w.key());
            let reason = format!(
                "queued behind {head} in {strategy} ClusterQueue {}, which Kueue retries every cycle but cannot admit",
                model.cqs[*cq].name
            );
            (
                unplaced(),
                PlacementState::Pending,
                Some(reason),
                Vec::new(),
            )
        }
        Outcome::Blocked(Blocked::Pending(reason)) => (
            unplaced(),
            PlacementState::Pending,
            Some(reason.clone()),
            Vec::new(),
        ),
        Outcome::Blocked(Blocked::Rejected(reason)) => (
            unplaced(),
            PlacementState::Rejected,
            Some(format!("rejected by Kueue's webhook: {reason}")),
            Vec::new(),
        ),
        Outcome::Holding => (
            unplaced(),
            PlacementState::Admitted,
            Some("keeps the quota it holds".to_string()),
            Vec::new(),
        ),
        Outcome::Released => (
            unplaced(),
            PlacementState::Pending,
            Some("its job is deleted: Kueue finishes it and releases its quota".to_string()),
            Vec::new(),
        ),
        Outcome::Blocked(Blocked::Unmanaged) => (
            unplaced(),
            PlacementState::Unmanaged,
            Some(format!(
                "no {} label: Kueue does not manage this job",
                crate::vocab::labels::QUEUE_NAME_LABEL
            )),
            Vec::new(),
        ),
    };
    Placement {
        job,
        namespace: workload.namespace.clone(),
        kind,
        cluster_queue,
        podsets,
        state,
        reason,
        admission_checks,
        reclaim: None,
        preempts: Vec::new(),
        preempted_by: None,
        not_predicted: None,
        attempts,
    }
}

/// Usage per ClusterQueue and flavor-resource. Workloads indexed from `queued` to the first
/// live one are the plan's; live Workloads that preemption evicts or whose job is deleted no
/// longer count as live, and evicted ones count as queued if they are admitted again.
fn usage_summary(
    model: &Model<'_>,
    workloads: &[WorkloadModel],
    simulation: &Simulation,
    queued: usize,
    live: &[Live],
    releases: &[Release],
) -> Vec<FlavorUsage> {
    // Predicted usage per (ClusterQueue, Fr), split between live queued Workloads and the plan.
    let frs = model.tree.frs;
    let outcomes = &simulation.outcomes;
    let first_live = live.first().map_or(workloads.len(), |l| l.workload);
    let mut queued_usage = vec![vec![Amount::ZERO; frs]; model.cqs.len()];
    let mut plan_usage = vec![vec![Amount::ZERO; frs]; model.cqs.len()];
    let mut evicted_usage = vec![vec![Amount::ZERO; frs]; model.cqs.len()];
    for holding in live {
        if !matches!(outcomes[holding.workload], Outcome::Holding) {
            for &(fr, amount) in &holding.usage {
                evicted_usage[holding.cq][fr] = evicted_usage[holding.cq][fr].plus(amount);
            }
        }
    }
    // Released runs that are not possible victims: counted by their usage alone.
    for release in releases.iter().filter(|r| r.workload.is_none()) {
        for &(fr, amount) in &release.usage {
            evicted_usage[release.cq][fr] = evicted_usage[release.cq][fr].plus(amount);
        }
    }
    for (index, (workload, outcome)) in workloads.iter().zip(outcomes).enumerate() {
        let (Outcome::Reserved { assignment, .. }, Some(cq)) = (outcome, workload.cq) else {
            continue;
        };
        let target = if index < queued || index >= first_live {
            &mut queued_usage[cq]
        } else {
            &mut plan_usage[cq]
        };
        for &(fr, amount) in &assignment.usage {
            target[fr] = target[fr].plus(amount);
        }
    }
    let mut rows = Vec::new();
    for (c, cq) in model.cqs.iter().enumerate() {
        for &(flavor, resource) in &cq.quota_order {
            let fr = model.fr(flavor, resource);
            let name = model.resources.name(resource);
            let to_quantity = |amount: Amount| quantity_of(name, amount.get());
            let quota = model.tree.quota(cq.node, fr);
            rows.push(FlavorUsage {
                cluster_queue: cq.name.clone(),
                cohort: cq.cohort.clone(),
                flavor: model.flavors.name(flavor).to_string(),
                resource: name.to_string(),
                nominal: to_quantity(quota.map_or(Amount::ZERO, |q| q.nominal)),
                borrowing_limit: quota.and_then(|q| q.borrowing_limit).map(to_quantity),
                lending_limit: quota.and_then(|q| q.lending_limit).map(to_quantity),
                used_live: to_quantity(
                    model
                        .live_usage
                        .get(cq.node, fr)
                        .minus(evicted_usage[c][fr]),
                ),
                used_queued: to_quantity(queued_usage[c][fr]),
                used_plan: to_quantity(plan_usage[c][fr]),
            });
        }
    }
    rows
}
