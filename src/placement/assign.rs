//! Flavor assignment for one workload against a usage snapshot: a port of Kueue v0.19.2
//! `pkg/scheduler/flavorassigner/flavorassigner.go` (`assignFlavors`, `findFlavorForPodSets`,
//! `checkFlavorForPodSets`, `fitsResourceQuota`, `shouldTryNextFlavor`, `isPreferred`).
//!
//! Where Kueue runs its preemption oracle (`preemption_oracle.go`, `SimulatePreemption`), the
//! oracle here searches victims among the workloads holding quota ([`Preemptor`]): none gives
//! "no preemption candidates" (always the case with the default `Never` policies), victims in the
//! same queue give `preempt`, victims only in other queues of the cohort give `reclaim`.

use std::borrow::Cow;
use std::collections::HashMap;

use super::amount::{Amount, format_amount, quantity_of};
use super::model::{CqModel, FlavorId, Model, ResId, Shape, WorkloadModel};
use super::objects::{FungibilityPolicy, FungibilityPreference};
use super::outcome::{AttemptProblem, FlavorAttempt};
use super::podsets::PodSet;
use super::preempt::Preemptor;
use super::quota::{Fr, Usage};
use super::selectors::{first_untolerated_taint, flavor_matches_node_affinity};

/// Kueue's `preemptionMode`, worst to best: `Preempt` and `Reclaim` found victims, in this
/// queue or only in other queues of the cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PreemptionMode {
    NoFit,
    NoCandidates,
    Preempt,
    Reclaim,
    Fit,
}

/// Kueue's `FlavorAssignmentMode` for a podset or a workload, worst to best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    NoFit,
    Preempt,
    Fit,
}

impl PreemptionMode {
    fn flavor_mode(self) -> Mode {
        match self {
            PreemptionMode::NoFit => Mode::NoFit,
            PreemptionMode::NoCandidates | PreemptionMode::Preempt | PreemptionMode::Reclaim => {
                Mode::Preempt
            }
            PreemptionMode::Fit => Mode::Fit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Granular {
    preemption: PreemptionMode,
    borrowing: usize,
}

impl Granular {
    const WORST: Granular = Granular {
        preemption: PreemptionMode::NoFit,
        borrowing: usize::MAX,
    };
    const BEST: Granular = Granular {
        preemption: PreemptionMode::Fit,
        borrowing: 0,
    };
}

/// `isPreferred(a, b)`: whether mode `a` beats mode `b` under the queue's fungibility.
fn is_preferred(a: Granular, b: Granular, preference: Option<FungibilityPreference>) -> bool {
    if a.preemption == PreemptionMode::NoFit {
        return false;
    }
    if b.preemption == PreemptionMode::NoFit {
        return true;
    }
    let a_none = a.preemption == PreemptionMode::NoCandidates;
    let b_none = b.preemption == PreemptionMode::NoCandidates;
    if a_none != b_none {
        return !a_none;
    }
    match preference {
        Some(FungibilityPreference::PreemptionOverBorrowing) => {
            if a.borrowing != b.borrowing {
                a.borrowing < b.borrowing
            } else {
                a.preemption > b.preemption
            }
        }
        _ => {
            if a.preemption != b.preemption {
                a.preemption > b.preemption
            } else {
                a.borrowing < b.borrowing
            }
        }
    }
}

/// `shouldTryNextFlavor`.
fn should_try_next_flavor(mode: Granular, cq: &CqModel) -> bool {
    match mode.preemption {
        PreemptionMode::NoFit | PreemptionMode::NoCandidates => return true,
        PreemptionMode::Preempt | PreemptionMode::Reclaim
            if cq.fungibility.when_can_preempt == FungibilityPolicy::TryNextFlavor =>
        {
            return true;
        }
        _ => {}
    }
    mode.borrowing > 0 && cq.fungibility.when_can_borrow == FungibilityPolicy::TryNextFlavor
}

/// The flavor chosen for one resource of a podset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Choice {
    pub resource: ResId,
    pub flavor: FlavorId,
    pub mode: Mode,
    pub borrow: usize,
    /// Index of the last flavor tried in the group; -1 once the scan reached the last flavor.
    pub tried_index: i64,
}

/// Why a flavor was not simply taken, kept as data and only formatted into Kueue's text when a
/// message is shown (most attempts of a large queue fail, and formatting dominated the cost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Reason {
    /// The podset's shape cannot use the flavor (missing flavor, taint, node affinity).
    Ineligible { shape: usize, flavor: FlavorId },
    /// `insufficient quota for R in flavor F, previously considered podsets requests (x) +
    /// current podset request (y) > maximum capacity (z)`.
    ExceedsMaximum {
        flavor: FlavorId,
        resource: ResId,
        assumed: Amount,
        request: i64,
        maximum: Amount,
    },
    /// `insufficient unused quota for R in flavor F, N more needed`.
    InsufficientUnused {
        flavor: FlavorId,
        resource: ResId,
        needed: Amount,
    },
    /// `resource R unavailable in ClusterQueue`.
    Unavailable { resource: ResId },
}

impl Reason {
    /// The reason as data, with names and quantities (for `gkq explain`).
    fn problem(&self, model: &Model<'_>) -> AttemptProblem {
        match *self {
            Reason::Ineligible { flavor, .. } => AttemptProblem::Ineligible {
                flavor: model.flavors.name(flavor).to_string(),
            },
            Reason::ExceedsMaximum {
                flavor,
                resource,
                assumed,
                request,
                maximum,
            } => {
                let name = model.resources.name(resource);
                AttemptProblem::OverCapacity {
                    flavor: model.flavors.name(flavor).to_string(),
                    resource: name.to_string(),
                    needed: quantity_of(name, assumed.add_value(request).get()),
                    maximum: quantity_of(name, maximum.get()),
                }
            }
            Reason::InsufficientUnused {
                flavor,
                resource,
                needed,
            } => {
                let name = model.resources.name(resource);
                AttemptProblem::InUse {
                    flavor: model.flavors.name(flavor).to_string(),
                    resource: name.to_string(),
                    more: quantity_of(name, needed.get()),
                }
            }
            Reason::Unavailable { resource } => AttemptProblem::NotCovered {
                resource: model.resources.name(resource).to_string(),
            },
        }
    }

    fn text(&self, model: &Model<'_>) -> String {
        use std::fmt::Write;
        let mut out = String::with_capacity(128);
        // Writing into a String cannot fail.
        let _ = match *self {
            Reason::Ineligible { shape, flavor } => {
                match check_flavor(model, &model.shapes[shape], flavor) {
                    Eligibility::Skip(text) | Eligibility::Error(text) => return text,
                    Eligibility::Eligible => return String::new(),
                }
            }
            Reason::ExceedsMaximum {
                flavor,
                resource,
                assumed,
                request,
                maximum,
            } => {
                let resource_name = model.resources.name(resource);
                write!(
                    out,
                    "insufficient quota for {resource_name} in flavor {}, previously considered podsets requests ({}) + current podset request ({}) > maximum capacity ({})",
                    model.flavors.name(flavor),
                    AmountText(resource_name, assumed),
                    AmountText(resource_name, Amount::new(request)),
                    AmountText(resource_name, maximum),
                )
            }
            Reason::InsufficientUnused {
                flavor,
                resource,
                needed,
            } => {
                let resource_name = model.resources.name(resource);
                write!(
                    out,
                    "insufficient unused quota for {resource_name} in flavor {}, {} more needed",
                    model.flavors.name(flavor),
                    AmountText(resource_name, needed),
                )
            }
            Reason::Unavailable { resource } => write!(
                out,
                "resource {} unavailable in ClusterQueue",
                model.resources.name(resource)
            ),
        };
        out
    }
}

/// Kueue's words for each [`Reason`], formatted once per prediction: the pending workloads of a
/// full queue fail on the same flavors for the same amounts again and again.
#[derive(Debug, Default)]
pub(crate) struct ReasonTexts {
    ids: HashMap<Reason, usize>,
    texts: Vec<String>,
}

impl ReasonTexts {
    /// The text id of each reason, formatting the ones not seen yet.
    fn learn(&mut self, model: &Model<'_>, reasons: &[Reason]) -> Vec<usize> {
        reasons
            .iter()
            .map(|reason| {
                *self.ids.entry(*reason).or_insert_with(|| {
                    self.texts.push(reason.text(model));
                    self.texts.len() - 1
                })
            })
            .collect()
    }
}

/// Displays an amount as Kueue prints it.
struct AmountText<'a>(&'a str, Amount);

impl std::fmt::Display for AmountText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_amount(self.0, self.1))
    }
}

/// One podset's part of an assignment: ranges into the assignment's flat `choices` and
/// `reasons` (one allocation each per attempt instead of two per podset).
#[derive(Debug, Clone, Default)]
pub(crate) struct PodSetAssignment {
    choices: std::ops::Range<usize>,
    reasons: std::ops::Range<usize>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Assignment {
    /// One entry per podset processed; processing stops after a podset that found no flavor.
    pub pod_sets: Vec<PodSetAssignment>,
    choices: Vec<Choice>,
    reasons: Vec<Reason>,
    /// Quota the workload would take, per `Fr`.
    pub usage: Vec<(Fr, Amount)>,
    /// Height of the cohort subtree the workload borrows from (0: no borrowing).
    pub borrowing: usize,
}

impl Assignment {
    /// The flavors chosen for podset `index` (empty when it got none or was not reached).
    pub fn choices_of(&self, index: usize) -> &[Choice] {
        self.pod_sets
            .get(index)
            .map_or(&[], |ps| &self.choices[ps.choices.clone()])
    }

    /// Every flavor chosen, all podsets together.
    pub fn all_choices(&self) -> &[Choice] {
        &self.choices
    }

    fn pod_set_mode(&self, pod_set: &PodSetAssignment) -> Mode {
        let choices = &self.choices[pod_set.choices.clone()];
        if pod_set.error.is_none() && pod_set.reasons.is_empty() {
            return Mode::Fit;
        }
        if pod_set.error.is_some() || choices.is_empty() {
            return Mode::NoFit;
        }
        choices.iter().map(|c| c.mode).min().unwrap_or(Mode::NoFit)
    }

    /// The worst podset mode (`RepresentativeMode`).
    pub fn mode(&self) -> Mode {
        if self.pod_sets.is_empty() {
            return Mode::NoFit;
        }
        self.pod_sets
            .iter()
            .map(|ps| self.pod_set_mode(ps))
            .min()
            .unwrap_or(Mode::NoFit)
    }

    /// Kueue's `Assignment.Message()`.
    pub fn message(&self, model: &Model<'_>, pod_sets: &[PodSet]) -> String {
        self.message_with(pod_sets, |i| Cow::Owned(self.reasons[i].text(model)))
    }

    /// [`Self::message`] and each flavor each podset could not use (with why, in Kueue's order
    /// of trying), each reason formatted once: `texts` keeps the texts for the next workloads.
    pub fn explain(
        &self,
        model: &Model<'_>,
        pod_sets: &[PodSet],
        texts: &mut ReasonTexts,
    ) -> (String, Vec<FlavorAttempt>) {
        let ids = texts.learn(model, &self.reasons);
        let text = |i: usize| texts.texts[ids[i]].as_str();
        let message = self.message_with(pod_sets, |i| Cow::Borrowed(text(i)));
        let attempts = self.attempts_with(model, pod_sets, |i| text(i).to_string());
        (message, attempts)
    }

    /// The message, with `text` giving the words of the reason at an index of `self.reasons`.
    fn message_with<'t>(
        &self,
        pod_sets: &[PodSet],
        text: impl Fn(usize) -> Cow<'t, str>,
    ) -> String {
        let mut parts = Vec::new();
        for (i, assignment) in self.pod_sets.iter().enumerate() {
            let name = pod_sets.get(i).map_or("", |ps| ps.name.as_str());
            if let Some(error) = &assignment.error {
                return format!("failed to assign flavors to pod set {name}: {error}");
            }
            if assignment.reasons.is_empty() {
                continue;
            }
            let mut texts: Vec<Cow<'t, str>> = assignment.reasons.clone().map(&text).collect();
            texts.sort();
            parts.push(format!(
                "couldn't assign flavors to pod set {name}: {}",
                texts.join(", ")
            ));
        }
        parts.join("; ")
    }

    /// Each flavor each podset could not use, and why, in Kueue's order of trying.
    fn attempts_with(
        &self,
        model: &Model<'_>,
        pod_sets: &[PodSet],
        text: impl Fn(usize) -> String,
    ) -> Vec<FlavorAttempt> {
        let mut attempts = Vec::with_capacity(self.reasons.len());
        for (i, assignment) in self.pod_sets.iter().enumerate() {
            let podset = pod_sets.get(i).map_or("", |ps| ps.name.as_str());
            for i in assignment.reasons.clone() {
                attempts.push(FlavorAttempt {
                    podset: podset.to_string(),
                    problem: self.reasons[i].problem(model),
                    text: text(i),
                });
            }
        }
        attempts
    }

    /// Where the next attempt starts for a podset's resource group (`LastAssignment`,
    /// FlavorFungibilityPreserveScanProgress, on in v0.19): after the flavor tried last, or at
    /// the first flavor once the scan reached the end.
    pub fn next_flavor(&self, pod_set: usize, resource: ResId) -> usize {
        self.choices_of(pod_set)
            .iter()
            .find(|c| c.resource == resource)
            .map_or(0, |c| usize::try_from(c.tried_index + 1).unwrap_or(0))
    }

    /// `flavorResourcesNeedPreemption`: the flavor-resources assigned in preempt mode.
    pub fn frs_needing_preemption(&self, model: &Model<'_>) -> Vec<Fr> {
        let mut frs: Vec<Fr> = self
            .choices
            .iter()
            .filter(|c| c.mode == Mode::Preempt)
            .map(|c| model.fr(c.flavor, c.resource))
            .collect();
        frs.sort_unstable();
        frs.dedup();
        frs
    }

    /// `PendingFlavors`: some podset stopped before its group's last flavor.
    pub fn has_pending_flavors(&self) -> bool {
        self.choices.iter().any(|c| c.tried_index != -1)
    }

    fn add_usage(&mut self, fr: Fr, value: i64) {
        match self.usage.iter_mut().find(|(f, _)| *f == fr) {
            Some((_, total)) => *total = total.add_value(value),
            None => self.usage.push((fr, Amount::ZERO.add_value(value))),
        }
    }

    pub fn usage_of(&self, fr: Fr) -> Amount {
        self.usage
            .iter()
            .find(|(f, _)| *f == fr)
            .map_or(Amount::ZERO, |(_, v)| *v)
    }
}

/// Whether a flavor can host a podset shape, computed once per (shape, flavor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Eligibility {
    Eligible,
    Skip(String),
    Error(String),
}

/// State reused across assignments: the lazily filled (shape, flavor) eligibility table and
/// scratch buffers, so that a large queue does not allocate per flavor tried.
#[derive(Debug, Default)]
pub(crate) struct Workspace {
    eligibility: Vec<Vec<Option<Eligibility>>>,
    candidate: Vec<Choice>,
    best: Vec<Choice>,
    /// The podset being assigned; copied out at its exact size when done.
    choices: Vec<Choice>,
    reasons: Vec<Reason>,
    /// The requests of the resource group being scanned.
    group_requests: Vec<(ResId, i64)>,
}

fn eligibility<'t>(
    table: &'t mut Vec<Vec<Option<Eligibility>>>,
    model: &Model<'_>,
    shape: usize,
    flavor: FlavorId,
) -> &'t Eligibility {
    if table.len() <= shape {
        table.resize_with(shape + 1, Vec::new);
    }
    let row = &mut table[shape];
    if row.len() <= flavor {
        row.resize(model.flavors.len().max(flavor + 1), None);
    }
    row[flavor].get_or_insert_with(|| check_flavor(model, &model.shapes[shape], flavor))
}

/// `checkFlavorForPodSets`: the flavor must exist, its taints must be tolerated, and the pod's
/// node selector and required affinity, reduced to the flavor's own label keys, must match.
fn check_flavor(model: &Model<'_>, shape: &Shape, flavor: FlavorId) -> Eligibility {
    let name = model.flavors.name(flavor);
    let Some(definition) = model.flavor_defs[flavor] else {
        return Eligibility::Skip(format!("flavor {name} not found"));
    };
    let tolerations: Vec<_> = shape
        .tolerations
        .iter()
        .chain(definition.tolerations.iter())
        .collect();
    if let Some(taint) = first_untolerated_taint(&definition.node_taints, &tolerations) {
        return Eligibility::Skip(format!(
            "untolerated taint {} in flavor {name}",
            taint.go_struct_string()
        ));
    }
    match flavor_matches_node_affinity(
        &shape.node_selector,
        shape.required_node_affinity.as_deref(),
        &definition.node_labels,
    ) {
        Ok(true) => Eligibility::Eligible,
        Ok(false) => Eligibility::Skip(format!("flavor {name} doesn't match node affinity")),
        Err(error) => Eligibility::Error(error),
    }
}

/// Assigns flavors to every podset of `workload` in `cq`, as one scheduling attempt would.
/// `preemptor` searches victims where Kueue would simulate preemption; without it (or with
/// nobody holding quota) that search finds no candidates.
pub(crate) fn assign(
    model: &Model<'_>,
    cq_index: usize,
    workload: &WorkloadModel,
    usage: &Usage,
    progress: Option<&Assignment>,
    preemptor: Option<&Preemptor<'_>>,
    workspace: &mut Workspace,
) -> Assignment {
    let cq = &model.cqs[cq_index];
    let mut assignment = Assignment {
        pod_sets: Vec::with_capacity(workload.pod_sets.len()),
        choices: Vec::with_capacity(workload.pod_sets.iter().map(|p| p.requests.len()).sum()),
        reasons: Vec::new(),
        usage: Vec::with_capacity(8),
        borrowing: 0,
    };
    for (ps_index, pod_set) in workload.pod_sets.iter().enumerate() {
        let mut choices = std::mem::take(&mut workspace.choices);
        let mut reasons = std::mem::take(&mut workspace.reasons);
        choices.clear();
        reasons.clear();
        let mut error = None;
        for &(resource, quantity) in &pod_set.requests {
            let Some(group) = cq.group_of(resource) else {
                if quantity == 0 {
                    continue;
                }
                // Kueue keeps only the failing group's reasons.
                choices.clear();
                reasons.clear();
                reasons.push(Reason::Unavailable { resource });
                break;
            };
            if choices.iter().any(|c| c.resource == resource) {
                continue;
            }
            let start = progress.map_or(0, |p| p.next_flavor(ps_index, resource));
            let group_start = reasons.len();
            let found = find_flavor(
                model,
                cq,
                group,
                pod_set.shape,
                &pod_set.requests,
                start,
                &assignment,
                usage,
                preemptor,
                workspace,
                &mut reasons,
            );
            if let Err(message) = found {
                choices.clear();
                reasons.drain(..group_start);
                error = Some(message);
                break;
            }
            if workspace.best.is_empty() {
                choices.clear();
                reasons.drain(..group_start);
                break;
            }
            choices.append(&mut workspace.best);
        }
        let choices_start = assignment.choices.len();
        assignment.choices.extend_from_slice(&choices);
        let reasons_start = assignment.reasons.len();
        assignment.reasons.extend_from_slice(&reasons);
        for choice in &choices {
            assignment.borrowing = assignment.borrowing.max(choice.borrow);
            let value = pod_set
                .requests
                .iter()
                .find(|(r, _)| *r == choice.resource)
                .map_or(0, |(_, v)| *v);
            assignment.add_usage(model.fr(choice.flavor, choice.resource), value);
        }
        let has_requests = !pod_set.requests.is_empty();
        let stop = error.is_some() || (has_requests && choices.is_empty());
        assignment.pod_sets.push(PodSetAssignment {
            choices: choices_start..assignment.choices.len(),
            reasons: reasons_start..assignment.reasons.len(),
            error,
        });
        workspace.choices = choices;
        workspace.reasons = reasons;
        if stop {
            break;
        }
    }
    assignment
}

/// `findFlavorForPodSets`: one flavor for all the requested resources of a group. The chosen
/// flavor's choices are left in `workspace.best` (empty when no flavor can be used); reasons
/// are appended to `result.reasons` and dropped again when the flavor simply fits.
#[allow(clippy::too_many_arguments)]
fn find_flavor(
    model: &Model<'_>,
    cq: &CqModel,
    group: usize,
    shape: usize,
    requests: &[(ResId, i64)],
    start: usize,
    assignment: &Assignment,
    usage: &Usage,
    preemptor: Option<&Preemptor<'_>>,
    workspace: &mut Workspace,
    reasons: &mut Vec<Reason>,
) -> Result<(), String> {
    let group_model = &cq.groups[group];
    let reasons_start = reasons.len();
    let Workspace {
        eligibility: table,
        candidate,
        best,
        group_requests,
        ..
    } = workspace;
    group_requests.clear();
    group_requests.extend(
        requests
            .iter()
            .filter(|(resource, _)| group_model.covered.contains(resource)),
    );
    best.clear();
    let mut best_mode = Granular::WORST;
    let mut attempted: Option<usize> = None;
    let preference = cq.fungibility.preference;

    for (index, &flavor) in group_model.flavors.iter().enumerate().skip(start) {
        attempted = Some(index);
        match eligibility(table, model, shape, flavor) {
            Eligibility::Eligible => {}
            Eligibility::Skip(_) => {
                reasons.push(Reason::Ineligible { shape, flavor });
                continue;
            }
            Eligibility::Error(error) => {
                best.clear();
                return Err(error.clone());
            }
        }
        candidate.clear();
        let mut representative = Granular::BEST;
        for &(resource, value) in group_requests.iter() {
            let fr = model.fr(flavor, resource);
            let (preemption, borrowing, reason) = fits_resource_quota(
                model,
                cq,
                flavor,
                resource,
                assignment.usage_of(fr),
                value,
                usage,
                preemptor,
            );
            if let Some(reason) = reason {
                reasons.push(reason);
            }
            let mode = Granular {
                preemption,
                borrowing,
            };
            if is_preferred(representative, mode, preference) {
                representative = mode;
            }
            if representative.preemption == PreemptionMode::NoFit {
                continue;
            }
            candidate.push(Choice {
                resource,
                flavor,
                mode: preemption.flavor_mode(),
                borrow: borrowing,
                tried_index: 0,
            });
        }
        if !should_try_next_flavor(representative, cq) {
            std::mem::swap(best, candidate);
            best_mode = representative;
            break;
        }
        if is_preferred(representative, best_mode, preference) {
            std::mem::swap(best, candidate);
            best_mode = representative;
        }
    }

    let last = group_model.flavors.len().saturating_sub(1);
    let tried_index = match attempted {
        Some(index) if index == last => -1,
        Some(index) => i64::try_from(index).unwrap_or(-1),
        None => -1,
    };
    for choice in best.iter_mut() {
        choice.tried_index = tried_index;
    }
    if best_mode.preemption == PreemptionMode::Fit {
        reasons.truncate(reasons_start);
    }
    Ok(())
}

/// `fitsResourceQuota`: how `value` more of `resource` fits in `flavor` for this queue, the
/// borrowing level, and why it does not simply fit.
#[allow(clippy::too_many_arguments)]
fn fits_resource_quota(
    model: &Model<'_>,
    cq: &CqModel,
    flavor: FlavorId,
    resource: ResId,
    assumed: Amount,
    request: i64,
    usage: &Usage,
    preemptor: Option<&Preemptor<'_>>,
) -> (PreemptionMode, usize, Option<Reason>) {
    let fr = model.fr(flavor, resource);
    let tree = &model.tree;
    let max_capacity = tree.potential_available(cq.node, fr);
    let value = assumed.add_value(request);
    if value > max_capacity {
        let reason = Reason::ExceedsMaximum {
            flavor,
            resource,
            assumed,
            request,
            maximum: max_capacity,
        };
        return (PreemptionMode::NoFit, 0, Some(reason));
    }
    let available = tree.available(cq.node, fr, usage);
    if value <= available && tree.within_nominal(cq.node, fr, value, usage) {
        // No borrowing: the common case, without walking the cohort tree.
        return (PreemptionMode::Fit, 0, None);
    }
    let (borrow, may_reclaim) = tree.lowest_fitting_subtree(cq.node, fr, value, usage);
    if value <= available {
        return (PreemptionMode::Fit, borrow, None);
    }
    let nominal = tree.quota(cq.node, fr).map_or(Amount::ZERO, |q| q.nominal);
    let can_preempt_while_borrowing = cq.preemption.borrow_within_cohort != "Never";
    let may_preempt = nominal >= value || may_reclaim || can_preempt_while_borrowing;
    let reason = Reason::InsufficientUnused {
        flavor,
        resource,
        needed: value.minus(available),
    };
    if !may_preempt {
        return (PreemptionMode::NoFit, borrow, Some(reason));
    }
    // `SimulatePreemption` for this flavor-resource alone.
    let requests = [(fr, value)];
    let targets = match preemptor {
        Some(p) if cq.preemption.can_preempt() => p.targets(&requests, &[fr], usage),
        _ => Vec::new(),
    };
    let Some(p) = preemptor.filter(|_| !targets.is_empty()) else {
        return (PreemptionMode::NoCandidates, borrow, Some(reason));
    };
    let mut after = usage.clone();
    for target in &targets {
        p.remove(target.holder, &mut after);
    }
    let (borrow_after, _) = tree.lowest_fitting_subtree(cq.node, fr, value, &after);
    let same_queue = targets.iter().any(|t| p.holders[t.holder].cq == p.cq);
    let mode = if same_queue {
        PreemptionMode::Preempt
    } else {
        PreemptionMode::Reclaim
    };
    (mode, borrow_after, Some(reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preference_ranks_no_candidates_below_viable_modes() {
        let fit_borrowing = Granular {
            preemption: PreemptionMode::Fit,
            borrowing: 1,
        };
        let no_candidates = Granular {
            preemption: PreemptionMode::NoCandidates,
            borrowing: 0,
        };
        assert!(is_preferred(fit_borrowing, no_candidates, None));
        assert!(!is_preferred(no_candidates, fit_borrowing, None));
        assert!(is_preferred(no_candidates, Granular::WORST, None));
        assert!(!is_preferred(Granular::WORST, no_candidates, None));
    }

    #[test]
    fn preemption_over_borrowing_compares_borrowing_first() {
        let preempt_local = Granular {
            preemption: PreemptionMode::NoCandidates,
            borrowing: 0,
        };
        let fit_borrowing = Granular {
            preemption: PreemptionMode::Fit,
            borrowing: 1,
        };
        let fit_local = Granular {
            preemption: PreemptionMode::Fit,
            borrowing: 0,
        };
        assert!(is_preferred(fit_borrowing, preempt_local, None));
        // No-candidates ranks below any viable mode whatever the preference.
        assert!(!is_preferred(
            preempt_local,
            fit_borrowing,
            Some(FungibilityPreference::PreemptionOverBorrowing)
        ));
        assert!(is_preferred(
            fit_local,
            fit_borrowing,
            Some(FungibilityPreference::PreemptionOverBorrowing)
        ));
    }
}
