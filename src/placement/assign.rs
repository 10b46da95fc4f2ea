//! Flavor assignment for one workload against a usage snapshot: a port of Kueue v0.19.2
//! `pkg/scheduler/flavorassigner/flavorassigner.go` (`assignFlavors`, `findFlavorForPodSets`,
//! `checkFlavorForPodSets`, `fitsResourceQuota`, `shouldTryNextFlavor`, `isPreferred`).
//!
//! Preemption is not simulated. Where Kueue would run its preemption oracle, this returns
//! "no preemption candidates", which is what the oracle always answers when every preemption
//! policy is `Never` (the defaults). With other policies the outcome may differ and the
//! message says so.

use super::amount::{Amount, format_amount};
use super::model::{CqModel, FlavorId, Model, ResId, Shape, WorkloadModel};
use super::objects::{FungibilityPolicy, FungibilityPreference};
use super::quota::{Fr, Usage};
use super::selectors::{first_untolerated_taint, flavor_matches_node_affinity};

/// Kueue's `preemptionMode`, worst to best. Kueue also has `preempt` and `reclaim` (victims
/// found, in this queue or in the cohort) between these two; gkq does not simulate victims, so
/// they never occur here and `whenCanPreempt` never changes an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PreemptionMode {
    NoFit,
    NoCandidates,
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
            PreemptionMode::NoCandidates => Mode::Preempt,
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

/// `shouldTryNextFlavor`. Kueue also tries the next flavor for preempt/reclaim modes when
/// `whenCanPreempt: TryNextFlavor`; those modes need victims, which gkq does not simulate.
fn should_try_next_flavor(mode: Granular, cq: &CqModel) -> bool {
    if matches!(
        mode.preemption,
        PreemptionMode::NoFit | PreemptionMode::NoCandidates
    ) {
        return true;
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

#[derive(Debug, Clone, Default)]
pub(crate) struct PodSetAssignment {
    pub choices: Vec<Choice>,
    pub reasons: Vec<String>,
    pub error: Option<String>,
    /// Whether the podset requested anything at all.
    pub has_requests: bool,
}

impl PodSetAssignment {
    pub fn mode(&self) -> Mode {
        if self.error.is_none() && self.reasons.is_empty() {
            return Mode::Fit;
        }
        if self.error.is_some() || self.choices.is_empty() {
            return Mode::NoFit;
        }
        self.choices
            .iter()
            .map(|c| c.mode)
            .min()
            .unwrap_or(Mode::NoFit)
    }

    fn failed(&self) -> bool {
        self.error.is_some() || (self.has_requests && self.choices.is_empty())
    }
}

/// Where a workload's scan stopped, per podset and resource (`LastAssignment`), so that a retry
/// resumes after the flavor tried last (FlavorFungibilityPreserveScanProgress, on in v0.19).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ScanProgress {
    pub per_pod_set: Vec<Vec<(ResId, i64)>>,
}

impl ScanProgress {
    fn next_flavor(&self, pod_set: usize, resource: ResId) -> usize {
        self.per_pod_set
            .get(pod_set)
            .and_then(|entries| entries.iter().find(|(r, _)| *r == resource))
            .map_or(0, |(_, tried)| usize::try_from(tried + 1).unwrap_or(0))
    }

    /// `PendingFlavors`: some podset stopped before its group's last flavor.
    pub fn has_pending_flavors(&self) -> bool {
        self.per_pod_set
            .iter()
            .any(|entries| entries.iter().any(|(_, tried)| *tried != -1))
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Assignment {
    /// One entry per podset processed; processing stops after a podset that found no flavor.
    pub pod_sets: Vec<PodSetAssignment>,
    /// Quota the workload would take, per `Fr`.
    pub usage: Vec<(Fr, Amount)>,
    /// Height of the cohort subtree the workload borrows from (0: no borrowing).
    pub borrowing: usize,
}

impl Assignment {
    /// The worst podset mode (`RepresentativeMode`).
    pub fn mode(&self) -> Mode {
        if self.pod_sets.is_empty() {
            return Mode::NoFit;
        }
        self.pod_sets
            .iter()
            .map(PodSetAssignment::mode)
            .min()
            .unwrap_or(Mode::NoFit)
    }

    /// Kueue's `Assignment.Message()`.
    pub fn message(&self, workload: &WorkloadModel) -> String {
        let mut parts = Vec::new();
        for (i, assignment) in self.pod_sets.iter().enumerate() {
            let name = workload.pod_sets.get(i).map_or("", |ps| ps.name.as_str());
            if let Some(error) = &assignment.error {
                return format!("failed to assign flavors to pod set {name}: {error}");
            }
            if assignment.reasons.is_empty() {
                continue;
            }
            let mut reasons = assignment.reasons.clone();
            reasons.sort();
            parts.push(format!(
                "couldn't assign flavors to pod set {name}: {}",
                reasons.join(", ")
            ));
        }
        parts.join("; ")
    }

    pub fn progress(&self) -> ScanProgress {
        ScanProgress {
            per_pod_set: self
                .pod_sets
                .iter()
                .map(|ps| {
                    ps.choices
                        .iter()
                        .map(|c| (c.resource, c.tried_index))
                        .collect()
                })
                .collect(),
        }
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

/// Lazily filled (shape, flavor) eligibility table.
#[derive(Debug, Default)]
pub(crate) struct EligibilityCache {
    table: Vec<Vec<Option<Eligibility>>>,
}

impl EligibilityCache {
    fn get(&mut self, model: &Model<'_>, shape: usize, flavor: FlavorId) -> &Eligibility {
        if self.table.len() <= shape {
            self.table.resize_with(shape + 1, Vec::new);
        }
        let row = &mut self.table[shape];
        if row.len() <= flavor {
            row.resize(model.flavors.len().max(flavor + 1), None);
        }
        row[flavor].get_or_insert_with(|| check_flavor(model, &model.shapes[shape], flavor))
    }
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
pub(crate) fn assign(
    model: &Model<'_>,
    cq_index: usize,
    workload: &WorkloadModel,
    usage: &Usage,
    progress: Option<&ScanProgress>,
    cache: &mut EligibilityCache,
) -> Assignment {
    let cq = &model.cqs[cq_index];
    let mut assignment = Assignment::default();
    for (ps_index, pod_set) in workload.pod_sets.iter().enumerate() {
        let mut result = PodSetAssignment {
            has_requests: !pod_set.requests.is_empty(),
            ..PodSetAssignment::default()
        };
        let mut group_choices: Vec<Choice> = Vec::new();
        let mut group_reasons: Vec<String> = Vec::new();
        let mut failed = None;
        for &(resource, quantity) in &pod_set.requests {
            let Some(group) = cq.group_of(resource) else {
                if quantity == 0 {
                    continue;
                }
                failed = Some(GroupFailure {
                    reasons: vec![format!(
                        "resource {} unavailable in ClusterQueue",
                        model.resources.name(resource)
                    )],
                    error: None,
                });
                break;
            };
            if group_choices.iter().any(|c| c.resource == resource) {
                continue;
            }
            let start = progress.map_or(0, |p| p.next_flavor(ps_index, resource));
            let found = find_flavor(
                model,
                cq,
                group,
                pod_set.shape,
                &pod_set.requests,
                start,
                &assignment,
                usage,
                cache,
            );
            if found.error.is_some() || found.choices.is_empty() {
                failed = Some(GroupFailure {
                    reasons: found.reasons,
                    error: found.error,
                });
                break;
            }
            group_choices.extend(found.choices);
            group_reasons.extend(found.reasons);
        }
        match failed {
            Some(failure) => {
                result.reasons = failure.reasons;
                result.error = failure.error;
            }
            None => {
                result.choices = group_choices;
                result.reasons = group_reasons;
            }
        }
        for choice in &result.choices {
            assignment.borrowing = assignment.borrowing.max(choice.borrow);
            let value = pod_set
                .requests
                .iter()
                .find(|(r, _)| *r == choice.resource)
                .map_or(0, |(_, v)| *v);
            assignment.add_usage(model.fr(choice.flavor, choice.resource), value);
        }
        let stop = result.failed();
        assignment.pod_sets.push(result);
        if stop {
            break;
        }
    }
    assignment
}

struct GroupFailure {
    reasons: Vec<String>,
    error: Option<String>,
}

struct Found {
    choices: Vec<Choice>,
    reasons: Vec<String>,
    error: Option<String>,
}

/// `findFlavorForPodSets`: one flavor for all the requested resources of a group.
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
    cache: &mut EligibilityCache,
) -> Found {
    let group_model = &cq.groups[group];
    let group_requests: Vec<(ResId, i64)> = requests
        .iter()
        .copied()
        .filter(|(r, _)| group_model.covered.contains(r))
        .collect();
    let mut reasons = Vec::new();
    let mut best: Vec<Choice> = Vec::new();
    let mut best_mode = Granular::WORST;
    let mut attempted: Option<usize> = None;
    let preference = cq.fungibility.preference;

    for (index, &flavor) in group_model.flavors.iter().enumerate().skip(start) {
        attempted = Some(index);
        match cache.get(model, shape, flavor) {
            Eligibility::Eligible => {}
            Eligibility::Skip(reason) => {
                reasons.push(reason.clone());
                continue;
            }
            Eligibility::Error(error) => {
                return Found {
                    choices: Vec::new(),
                    reasons,
                    error: Some(error.clone()),
                };
            }
        }
        let mut choices = Vec::with_capacity(group_requests.len());
        let mut representative = Granular::BEST;
        for &(resource, value) in &group_requests {
            let fr = model.fr(flavor, resource);
            let (preemption, borrowing, reason) = fits_resource_quota(
                model,
                cq,
                flavor,
                resource,
                assignment.usage_of(fr),
                value,
                usage,
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
            choices.push(Choice {
                resource,
                flavor,
                mode: preemption.flavor_mode(),
                borrow: borrowing,
                tried_index: 0,
            });
        }
        if !should_try_next_flavor(representative, cq) {
            best = choices;
            best_mode = representative;
            break;
        }
        if is_preferred(representative, best_mode, preference) {
            best = choices;
            best_mode = representative;
        }
    }

    let last = group_model.flavors.len().saturating_sub(1);
    let tried_index = match attempted {
        Some(index) if index == last => -1,
        Some(index) => i64::try_from(index).unwrap_or(-1),
        None => -1,
    };
    for choice in &mut best {
        choice.tried_index = tried_index;
    }
    if best_mode.preemption == PreemptionMode::Fit {
        reasons.clear();
    }
    Found {
        choices: best,
        reasons,
        error: None,
    }
}

/// `fitsResourceQuota`: how `value` more of `resource` fits in `flavor` for this queue, the
/// borrowing level, and Kueue's message when it does not simply fit.
fn fits_resource_quota(
    model: &Model<'_>,
    cq: &CqModel,
    flavor: FlavorId,
    resource: ResId,
    assumed: Amount,
    request: i64,
    usage: &Usage,
) -> (PreemptionMode, usize, Option<String>) {
    let fr = model.fr(flavor, resource);
    let tree = &model.tree;
    let available = tree.available(cq.node, fr, usage);
    let max_capacity = tree.potential_available(cq.node, fr);
    let value = assumed.add_value(request);
    let resource_name = model.resources.name(resource);
    let flavor_name = model.flavors.name(flavor);
    if value > max_capacity {
        return (
            PreemptionMode::NoFit,
            0,
            Some(format!(
                "insufficient quota for {resource_name} in flavor {flavor_name}, previously considered podsets requests ({}) + current podset request ({}) > maximum capacity ({})",
                format_amount(resource_name, assumed),
                format_amount(resource_name, Amount::new(request)),
                format_amount(resource_name, max_capacity),
            )),
        );
    }
    let (borrow, may_reclaim) = tree.lowest_fitting_subtree(cq.node, fr, value, usage);
    if value <= available {
        return (PreemptionMode::Fit, borrow, None);
    }
    let mut reason = format!(
        "insufficient unused quota for {resource_name} in flavor {flavor_name}, {} more needed",
        format_amount(resource_name, value.sub(available))
    );
    let nominal = tree.quota(cq.node, fr).map_or(Amount::ZERO, |q| q.nominal);
    let can_preempt_while_borrowing = cq.preemption.borrow_within_cohort != "Never";
    if nominal >= value || may_reclaim || can_preempt_while_borrowing {
        // Kueue would simulate preemption here. With the default `Never` policies it finds no
        // candidates; with other policies it might, and gkq does not simulate victims.
        if cq.preemption.can_preempt() {
            reason.push_str(" (preemption is not simulated)");
        }
        return (PreemptionMode::NoCandidates, borrow, Some(reason));
    }
    (PreemptionMode::NoFit, borrow, Some(reason))
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
