//! The capacity ladder in a plan (docs/design/capacity-ladder.md, section 6): for each job Kueue
//! is predicted to place on a flavor the ladder made, which rung serves it and what happens when
//! that rung is out of capacity. Pure data; `render::plan` says it in words.
//!
//! In `mode: kueue` the rung follows from the flavor (one flavor per rung, or per slice of a
//! multi-host rung). In `mode: computeclass` one flavor selects a ComputeClass and GKE walks its
//! priorities at scale-up; gkq cannot see which has capacity, so the plan lists the order and
//! predicts no rung.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::gke_facts::FLEX_START_MAX_RUN_SECONDS;
use crate::model::ladder::computeclass::{Segment, auto_pool_priority, segments};
use crate::model::ladder::{rung_accelerator, slice_hosts, units_of};
use crate::placement::Placement;
use crate::spec::ladder::{Capacity, CapacityMode, Rung, RungKind};
use crate::spec::types::Spec;
use crate::vocab::duration::parse_whole_seconds;

/// One job on a ladder flavor: its rung (or the rungs GKE tries) and its fallback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobRung {
    pub namespace: String,
    pub job: String,
    /// The ladder's flavor Kueue is predicted to assign.
    pub flavor: String,
    /// How many rungs the ladder has.
    pub rungs: usize,
    /// The rung that serves the job: set in `mode: kueue` and for a queued rung, which keeps
    /// its own pool in both modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rung: Option<RungRef>,
    /// `mode: computeclass`: the ComputeClass the flavor selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_class: Option<String>,
    /// `mode: computeclass`: the rungs GKE tries at scale-up, in order (which one has capacity
    /// is not predicted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tries: Vec<RungRef>,
    pub fallback: Fallback,
}

/// A rung of the ladder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RungRef {
    pub name: String,
    /// Its place in the ladder, from 1.
    pub index: usize,
    pub kind: RungKind,
    /// The node pool of the job's slice (`mode: kueue`, and queued rungs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// A flex-start rung's time budget: its `maxRunDuration`, else flex-start's 7-day limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_seconds: Option<u64>,
}

/// What happens when the job's rung (or every rung of its ComputeClass) is out of capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fallback {
    pub kind: FallbackKind,
    /// The flavor Kueue gives later jobs once this flavor's quota is used, and its rung; none
    /// when no flavor of the ladder follows or this one's quota is unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NextFlavor>,
    /// This flavor's quota is unbounded (a queued rung without `quota`): Kueue never moves a
    /// job past it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unbounded_quota: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FallbackKind {
    /// The job stays admitted on its rung and its pods wait: Kueue falls through on quota, not
    /// capacity (reservation, on-demand, Spot in `mode: kueue`).
    WaitOnRung,
    /// Flex-start VMs: nodes come one by one as flex-start capacity appears.
    NodeByNode,
    /// Flex-start with queued provisioning: the ProvisioningRequest waits until DWS obtains
    /// every VM at once.
    Queue,
    /// `mode: computeclass`: GKE tries the next priority; when none can be obtained the pods
    /// stay pending (`whenUnsatisfiable: DoNotScaleUp`).
    GkePriorities,
}

/// The next flavor of the ladder in Kueue's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NextFlavor {
    pub flavor: String,
    /// Its rung; for a ComputeClass flavor, the class's first rung.
    pub rung: RungRef,
    /// The ComputeClass it selects, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_class: Option<String>,
}

/// One flavor the ladder made, in ladder order.
struct LadderFlavor {
    flavor: String,
    rung: Option<RungRef>,
    compute_class: Option<String>,
    tries: Vec<RungRef>,
    kind: FallbackKind,
    unbounded_quota: bool,
}

/// The rungs of the jobs in `placements` placed on the ladder's flavors; empty without a
/// `capacity:` section. `spec` may be the expanded spec (the ladder is read from `capacity`).
pub fn job_rungs(spec: &Spec, placements: &[Placement]) -> Vec<JobRung> {
    let Some(cap) = &spec.capacity else {
        return Vec::new();
    };
    let flavors = ladder_flavors(spec, cap);
    let mut out = Vec::new();
    for placement in placements.iter().filter(|p| p.preempted_by.is_none()) {
        let assigned = placement
            .podsets
            .iter()
            .flat_map(|ps| ps.flavors.values())
            .find_map(|f| flavors.iter().position(|l| &l.flavor == f));
        let Some(at) = assigned else { continue };
        let here = &flavors[at];
        let next = flavors
            .get(at + 1)
            .filter(|_| !here.unbounded_quota)
            .and_then(|n| {
                Some(NextFlavor {
                    flavor: n.flavor.clone(),
                    rung: n.rung.clone().or_else(|| n.tries.first().cloned())?,
                    compute_class: n.compute_class.clone(),
                })
            });
        out.push(JobRung {
            namespace: placement.namespace.clone(),
            job: placement.job.clone(),
            flavor: here.flavor.clone(),
            rungs: cap.rungs.len(),
            rung: here.rung.clone(),
            compute_class: here.compute_class.clone(),
            tries: here.tries.clone(),
            fallback: Fallback {
                kind: here.kind,
                next,
                unbounded_quota: here.unbounded_quota,
            },
        });
    }
    out
}

/// The rung whose nodes a node pool holds: a pool the expansion made for a rung (`mode: kueue`,
/// and a queued rung in both modes), or a pool made for a priority of one of the ladder's
/// ComputeClasses (named by `model::ladder::computeclass::auto_pool_name`, as the local target
/// names them). `None` for any other pool, and without a `capacity:` section.
pub fn rung_of_pool(spec: &Spec, pool: &str) -> Option<RungRef> {
    let cap = spec.capacity.as_ref()?;
    let own_pool = |ri: usize| {
        let rung = &cap.rungs[ri];
        let acc = rung_accelerator(cap, rung)?;
        units_of(rung, slice_hosts(acc))
            .into_iter()
            .any(|(p, _)| p == pool)
            .then(|| rung_ref(ri, rung, Some(pool.to_string())))
    };
    match cap.mode {
        CapacityMode::Kueue => (0..cap.rungs.len()).find_map(own_pool),
        CapacityMode::Computeclass => {
            segments(spec, cap)
                .into_iter()
                .find_map(|segment| match segment {
                    Segment::Queued(ri) => own_pool(ri),
                    Segment::Class { class, rungs, .. } => {
                        let ri = *rungs.get(auto_pool_priority(&class, pool)?)?;
                        Some(rung_ref(ri, &cap.rungs[ri], Some(pool.to_string())))
                    }
                })
        }
    }
}

/// The ladder's flavors in the order the expansion lists them in the queue.
fn ladder_flavors(spec: &Spec, cap: &Capacity) -> Vec<LadderFlavor> {
    match cap.mode {
        CapacityMode::Kueue => (0..cap.rungs.len())
            .flat_map(|ri| rung_flavors(cap, ri))
            .collect(),
        CapacityMode::Computeclass => segments(spec, cap)
            .into_iter()
            .flat_map(|segment| match segment {
                Segment::Queued(ri) => rung_flavors(cap, ri),
                Segment::Class {
                    class,
                    flavor,
                    rungs,
                } => vec![LadderFlavor {
                    flavor,
                    rung: None,
                    compute_class: Some(class),
                    tries: rungs
                        .iter()
                        .map(|&ri| rung_ref(ri, &cap.rungs[ri], None))
                        .collect(),
                    kind: FallbackKind::GkePriorities,
                    unbounded_quota: false,
                }],
            })
            .collect(),
    }
}

/// The flavor(s) of one rung with its own pool(s): one, or one per slice of a multi-host rung
/// (the names `model::ladder::units_of` gives them).
fn rung_flavors(cap: &Capacity, ri: usize) -> Vec<LadderFlavor> {
    let rung = &cap.rungs[ri];
    let Some(acc) = rung_accelerator(cap, rung) else {
        return Vec::new();
    };
    let kind = match rung.kind {
        RungKind::FlexStart => FallbackKind::NodeByNode,
        RungKind::FlexStartQueued => FallbackKind::Queue,
        RungKind::Reservation | RungKind::OnDemand | RungKind::Spot => FallbackKind::WaitOnRung,
    };
    // The expansion's unbounded quota (`model::ladder::derived_quota`).
    let unbounded_quota = rung.kind == RungKind::FlexStartQueued && rung.quota.is_none();
    units_of(rung, slice_hosts(acc))
        .into_iter()
        .map(|(pool, flavor)| LadderFlavor {
            flavor,
            rung: Some(rung_ref(ri, rung, Some(pool))),
            compute_class: None,
            tries: Vec::new(),
            kind,
            unbounded_quota,
        })
        .collect()
}

fn rung_ref(ri: usize, rung: &Rung, pool: Option<String>) -> RungRef {
    RungRef {
        name: rung.name.clone(),
        index: ri + 1,
        kind: rung.kind,
        pool,
        budget_seconds: budget_seconds(rung),
    }
}

/// A flex-start rung's budget: its `maxRunDuration` (validated elsewhere), else flex-start's
/// 7-day limit (docs/gke-facts.md, L3).
fn budget_seconds(rung: &Rung) -> Option<u64> {
    if !rung.kind.is_flex() {
        return None;
    }
    Some(
        rung.max_run_duration
            .as_deref()
            .and_then(|d| parse_whole_seconds(d).ok())
            .unwrap_or(FLEX_START_MAX_RUN_SECONDS),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{PlacementState, PodSetPlacement};
    use serde_json::json;
    use std::collections::BTreeMap;

    /// The example's four rungs (reserved, on-demand, dws queued, spot of two 4x4 slices).
    fn spec(mode: &str, dws_quota: bool) -> Spec {
        let mut dws = json!({"name": "dws", "kind": "flex-start-queued", "maxRunDuration": "3d"});
        if dws_quota {
            dws["quota"] = json!({"google.com/tpu": 16});
        }
        let capacity = json!({
            "mode": mode,
            "clusterQueue": "cluster-queue",
            "accelerator": {"machineType": "ct6e-standard-4t", "topology": "4x4"},
            "rungs": [
                {"name": "reserved", "kind": "reservation", "reservation": {"name": "res", "slices": 1}},
                {"name": "on-demand", "kind": "on-demand", "slices": 1},
                dws,
                {"name": "spot", "kind": "spot", "slices": 2},
            ],
        });
        let mut spec = Spec {
            capacity: Some(serde_json::from_value(capacity).unwrap()),
            ..Default::default()
        };
        spec.cluster.name = "tpu".into();
        spec
    }

    fn placed(job: &str, flavors: &[&str]) -> Placement {
        let podsets = flavors
            .iter()
            .enumerate()
            .map(|(i, f)| PodSetPlacement {
                name: format!("ps{i}"),
                count: 1,
                flavor: Some(f.to_string()),
                flavors: BTreeMap::from([("google.com/tpu".to_string(), f.to_string())]),
            })
            .collect();
        Placement {
            job: job.to_string(),
            namespace: "default".to_string(),
            kind: "RayJob".to_string(),
            cluster_queue: Some("cluster-queue".to_string()),
            podsets,
            state: PlacementState::Admitted,
            reason: None,
            admission_checks: Vec::new(),
            reclaim: None,
            preempts: Vec::new(),
            preempted_by: None,
            not_predicted: None,
            attempts: Vec::new(),
        }
    }

    #[test]
    fn kueue_mode_names_the_rung_of_the_flavor_and_the_next_flavor() {
        let jobs = [
            placed("a", &["default-cpu", "on-demand"]),
            placed("b", &["dws"]),
            placed("c", &["spot-1"]),
            placed("d", &["spot-2"]),
            placed("e", &["default-cpu"]),
        ];
        let rungs = job_rungs(&spec("kueue", true), &jobs);
        let names: Vec<&str> = rungs.iter().map(|r| r.job.as_str()).collect();
        assert_eq!(
            names,
            ["a", "b", "c", "d"],
            "a hand-written flavor has no rung"
        );

        let a = &rungs[0];
        let rung = a.rung.as_ref().unwrap();
        assert_eq!(
            (rung.name.as_str(), rung.index, a.rungs),
            ("on-demand", 2, 4)
        );
        assert_eq!(rung.pool.as_deref(), Some("on-demand-pool"));
        assert_eq!(rung.budget_seconds, None);
        assert_eq!(a.fallback.kind, FallbackKind::WaitOnRung);
        let next = a.fallback.next.as_ref().unwrap();
        assert_eq!((next.flavor.as_str(), next.rung.index), ("dws", 3));

        let b = &rungs[1];
        assert_eq!(b.fallback.kind, FallbackKind::Queue);
        assert_eq!(b.rung.as_ref().unwrap().budget_seconds, Some(3 * 86_400));
        assert_eq!(b.fallback.next.as_ref().unwrap().flavor, "spot-1");

        // A Spot slice falls to the rung's next slice, then nothing follows.
        let c = &rungs[2];
        assert_eq!(
            c.rung.as_ref().unwrap().pool.as_deref(),
            Some("spot-pool-1")
        );
        assert_eq!(c.fallback.next.as_ref().unwrap().flavor, "spot-2");
        assert_eq!(rungs[3].fallback.next, None);
        assert!(!rungs[3].fallback.unbounded_quota);
    }

    #[test]
    fn a_queued_rung_without_quota_is_never_passed() {
        let rungs = job_rungs(&spec("kueue", false), &[placed("b", &["dws"])]);
        assert_eq!(rungs[0].fallback.next, None);
        assert!(rungs[0].fallback.unbounded_quota);
    }

    #[test]
    fn computeclass_mode_lists_the_order_gke_tries_and_predicts_no_rung() {
        let spec = spec("computeclass", true);
        let rungs = job_rungs(
            &spec,
            &[
                placed("a", &["ladder-1"]),
                placed("b", &["dws"]),
                placed("c", &["ladder-2"]),
            ],
        );
        let a = &rungs[0];
        assert_eq!(a.rung, None);
        assert_eq!(a.compute_class.as_deref(), Some("tpu-ladder-1"));
        let tries: Vec<(&str, usize)> =
            a.tries.iter().map(|r| (r.name.as_str(), r.index)).collect();
        assert_eq!(tries, [("reserved", 1), ("on-demand", 2)]);
        assert_eq!(a.fallback.kind, FallbackKind::GkePriorities);
        assert_eq!(a.fallback.next.as_ref().unwrap().rung.name, "dws");
        // The queued rung keeps its own pool: its rung is known.
        assert_eq!(rungs[1].rung.as_ref().unwrap().name, "dws");
        assert_eq!(
            rungs[1]
                .fallback
                .next
                .as_ref()
                .unwrap()
                .compute_class
                .as_deref(),
            Some("tpu-ladder-2")
        );
        assert_eq!(rungs[2].tries[0].name, "spot");
    }

    #[test]
    fn a_pool_names_its_rung_in_both_modes() {
        let kueue = spec("kueue", true);
        let rung = rung_of_pool(&kueue, "spot-pool-2").unwrap();
        assert_eq!((rung.name.as_str(), rung.index), ("spot", 4));
        assert_eq!(rung_of_pool(&kueue, "default-pool"), None);
        let cc = spec("computeclass", true);
        let pool = crate::model::ladder::computeclass::auto_pool_name("tpu-ladder-1", 1);
        let rung = rung_of_pool(&cc, &pool).unwrap();
        assert_eq!((rung.name.as_str(), rung.index), ("on-demand", 2));
        assert_eq!(rung.pool.as_deref(), Some(pool.as_str()));
        let spot = crate::model::ladder::computeclass::auto_pool_name("tpu-ladder-2", 0);
        assert_eq!(rung_of_pool(&cc, &spot).unwrap().name, "spot");
        assert_eq!(rung_of_pool(&cc, "dws-pool").unwrap().index, 3);
        assert_eq!(rung_of_pool(&cc, "gk-tpu-ladder-1-3"), None);
    }

    #[test]
    fn without_a_ladder_there_are_no_rungs() {
        let jobs = [placed("a", &["on-demand"])];
        assert!(job_rungs(&Spec::default(), &jobs).is_empty());
    }

    #[test]
    fn a_preempted_job_gets_no_rung() {
        let mut job = placed("a", &["on-demand"]);
        job.preempted_by = Some("default/x".into());
        assert!(job_rungs(&spec("kueue", true), &[job]).is_empty());
    }
}
