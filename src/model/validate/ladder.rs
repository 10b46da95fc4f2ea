//! The capacity ladder's own rules (docs/design/capacity-ladder.md, section 5; facts in
//! docs/gke-facts.md, "The capacity ladder"). The rules of node pools, flavors and quotas run on
//! the expanded spec and point at the rungs through `Loaded::origins`; these are the rules only
//! the ladder can state: fields a rung's kind does not take, budgets, shapes no job or no rung
//! has, and rungs Kueue can never reach.

use std::collections::BTreeMap;

use super::Checker;
use crate::model::gke::{is_compute_engine_name, is_project_id};
use crate::model::gke_facts::{
    COMPUTE_CLASS_MIN_GKE, FLEX_START_MAX_RUN_SECONDS, VersionVsFloor, compare_with_floor,
    format_version,
};
use crate::model::ladder::{
    MAX_SLICE_POOLS, accelerator_path, capacity_path, is_priority, rung_accelerator, rung_path,
    slice_hosts, target_group, tpu_accelerator_label,
};
use crate::spec::Path;
use crate::spec::ladder::{Capacity, CapacityMode, Rung, RungAccelerator, RungKind};
use crate::spec::types::Spec;
use crate::vocab::duration::{format_seconds, parse_whole_seconds};

pub(super) fn check(c: &mut Checker, spec: &Spec) {
    let Some(cap) = &spec.capacity else {
        return;
    };
    check_ladder(c, spec, cap);
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (ri, rung) in cap.rungs.iter().enumerate() {
        if let Some(first) = names.insert(&rung.name, ri) {
            c.error(
                &rung_path(ri).key("name"),
                format!("duplicate rung `{}`", rung.name),
                format!(
                    "rung names must be unique; the first `{}` is rung {}",
                    rung.name,
                    first + 1
                ),
            );
        }
        check_rung_fields(c, cap, ri, rung);
        check_rung_shape(c, cap, ri, rung);
    }
    check_reachability(c, cap);
    check_jobs_against_rungs(c, spec, cap);
    check_job_budgets(c, spec, cap);
}

/// The queue, the rungs, the version and quota the mode needs.
fn check_ladder(c: &mut Checker, spec: &Spec, cap: &Capacity) {
    let cp = capacity_path();
    let queue = spec
        .kueue
        .cluster_queues
        .iter()
        .find(|q| q.name == cap.cluster_queue);
    if queue.is_none() {
        let known: Vec<&str> = spec
            .kueue
            .cluster_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect();
        c.unknown_ref(
            &cp.key("clusterQueue"),
            "ClusterQueue",
            &cap.cluster_queue,
            known,
        );
    } else if target_group(spec, cap).is_none() {
        c.error(
            &cp.key("clusterQueue"),
            format!(
                "ClusterQueue `{}` has no resource group for the ladder's accelerator",
                cap.cluster_queue
            ),
            "add the accelerator resource (google.com/tpu) to one of its resourceGroups, or set `capacity.resourceGroup` to the group's index",
        );
    }
    if cap.rungs.is_empty() {
        c.error(
            &cp.key("rungs"),
            "the capacity ladder has no rungs",
            "add at least one rung, e.g. `- {name: on-demand, kind: on-demand, slices: 1}`",
        );
    }
    match cap.mode {
        CapacityMode::Kueue => {
            if cap.quota.is_some() {
                c.error(
                    &cp.key("quota"),
                    "`capacity.quota` applies to `mode: computeclass` only",
                    "in `mode: kueue` each rung has its own flavor: give the rung a `quota`, or remove it to derive it",
                );
            }
            if cap.compute_class.is_some() {
                c.error(
                    &cp.key("computeClass"),
                    "`capacity.computeClass` applies to `mode: computeclass` only",
                    "remove it, or set `mode: computeclass`",
                );
            }
        }
        CapacityMode::Computeclass => check_computeclass_mode(c, spec, cap),
    }
}

fn check_computeclass_mode(c: &mut Checker, spec: &Spec, cap: &Capacity) {
    let cp = capacity_path();
    let has_class_rung = cap
        .rungs
        .iter()
        .any(|r| r.kind != RungKind::FlexStartQueued);
    if has_class_rung && cap.quota.is_none() {
        c.error(
            &cp.key("mode"),
            "`mode: computeclass` needs `capacity.quota`: the class's rungs share one Kueue flavor, whose quota gkq cannot derive",
            "add `quota: {cpu: .., memory: .., google.com/tpu: ..}` under `capacity` (what the whole class may hold at once)",
        );
    }
    if let Some(version) = &spec.cluster.version
        && compare_with_floor(version, COMPUTE_CLASS_MIN_GKE) == VersionVsFloor::Below
    {
        c.error(
            &Path::root().key("cluster").key("version"),
            format!(
                "custom ComputeClasses need GKE {} or later; the cluster asks for {version}",
                format_version(COMPUTE_CLASS_MIN_GKE)
            ),
            "raise `cluster.version`, or use `capacity.mode: kueue`",
        );
    }
}

/// Fields the rung's kind (or the mode) does not take: the kinds make GKE's exclusions
/// (flex-start with Spot, a reservation with flex-start or queued provisioning) unwritable, and
/// a stray field is refused rather than silently ignored.
fn check_rung_fields(c: &mut Checker, cap: &Capacity, ri: usize, rung: &Rung) {
    let rp = rung_path(ri);
    let kind = rung.kind.as_str();
    let refuse = |c: &mut Checker, key: &str, msg: String, help: &str| {
        c.error_at_key(&rp.key(key), msg, help.to_string());
    };
    match (rung.kind, &rung.reservation) {
        (RungKind::Reservation, None) => c.error(
            &rp.key("kind"),
            format!("rung `{}` is a reservation rung but names no reservation", rung.name),
            "add `reservation: {name: RESERVATION, slices: N}` (and `project:` for a shared reservation)",
        ),
        (RungKind::Reservation, Some(r)) => check_reservation(c, ri, rung, r),
        (_, Some(_)) => refuse(
            c,
            "reservation",
            format!("a `{kind}` rung consumes no reservation"),
            "GKE's flex-start, queued-provisioning and Spot capacity take no reservation, and on-demand is the rung without one: make a separate rung of `kind: reservation`",
        ),
        _ => {}
    }
    if rung.kind == RungKind::Reservation && rung.slices.is_some() {
        refuse(
            c,
            "slices",
            "a reservation rung holds the slices its reservation holds".into(),
            "write the count as `reservation.slices`",
        );
    }
    if rung.max_run_duration.is_some() && !rung.kind.is_flex() {
        refuse(
            c,
            "maxRunDuration",
            format!(
                "a `{kind}` rung has no time budget: only flex-start capacity is limited in time"
            ),
            "remove `maxRunDuration`, or use `kind: flex-start` or `flex-start-queued`",
        );
    }
    if let Some(d) = &rung.max_run_duration {
        match parse_whole_seconds(d) {
            Err(_) => c.error(
                &rp.key("maxRunDuration"),
                format!("duration `{d}` is not valid"),
                "write a duration such as 86400s, 24h or 3d",
            ),
            Ok(secs) if secs > FLEX_START_MAX_RUN_SECONDS => c.error(
                &rp.key("maxRunDuration"),
                format!("flex-start capacity runs at most 7 days; `{d}` is longer"),
                "set `maxRunDuration` to 7d or less: GKE removes flex-start nodes, and the work on them, when it ends",
            ),
            Ok(_) => {}
        }
    }
    if rung.slices.is_some() && rung.max_nodes.is_some() {
        refuse(
            c,
            "maxNodes",
            "give a rung `slices` or `maxNodes`, not both".into(),
            "`maxNodes` is the pool's autoscaling maximum of a single-host rung; `slices` counts slices",
        );
    }
    if is_priority(cap, rung) {
        for (key, set) in [
            ("pool", rung.pool.is_some()),
            ("quota", rung.quota.is_some()),
            ("labels", !rung.labels.is_empty()),
            ("taints", !rung.taints.is_empty()),
        ] {
            if set {
                refuse(
                    c,
                    key,
                    format!(
                        "`{key}` of a rung applies to `mode: kueue` only: in `mode: computeclass` GKE creates the rung's node pools and the class's one flavor has `capacity.quota`"
                    ),
                    "remove it, or use `mode: kueue`",
                );
            }
        }
    }
}

/// A reservation's name is a Compute Engine resource name, its owner a project ID.
fn check_reservation(
    c: &mut Checker,
    ri: usize,
    rung: &Rung,
    r: &crate::spec::ladder::RungReservation,
) {
    let rp = rung_path(ri).key("reservation");
    if !is_compute_engine_name(&r.name) {
        c.error(
            &rp.key("name"),
            format!("reservation name `{}` is not a Compute Engine resource name", r.name),
            "a lowercase letter first, then lowercase letters, digits and `-`, at most 63 characters, not ending in `-`",
        );
    }
    if let Some(p) = &r.project
        && !is_project_id(p)
    {
        c.error(
            &rp.key("project"),
            format!("`{p}` is not a Google Cloud project ID"),
            "a project ID is 6 to 30 lowercase letters, digits and `-`, starting with a letter",
        );
    }
    if r.slices == 0 {
        c.error(
            &rp.key("slices"),
            format!("reservation rung `{}` holds no slices", rung.name),
            "set `slices` to the number of slices of the rung's shape the reservation holds",
        );
    }
}

/// Shapes a rung kind cannot serve, and slice counts gkq will not expand.
fn check_rung_shape(c: &mut Checker, cap: &Capacity, ri: usize, rung: &Rung) {
    let rp = rung_path(ri);
    let Some(acc) = rung_accelerator(cap, rung) else {
        c.error(
            &rp.key("name"),
            format!("rung `{}` has no accelerator", rung.name),
            "give the rung an `accelerator: {machineType: .., topology: ..}`, or the ladder one under `capacity.accelerator`",
        );
        return;
    };
    let hosts = slice_hosts(acc);
    if hosts > 1 && rung.max_nodes.is_some() {
        c.error_at_key(
            &rp.key("maxNodes"),
            format!("rung `{}` is a multi-host slice of {hosts} VMs: its pool holds the whole slice or nothing", rung.name),
            "count slices with `slices` instead",
        );
    }
    if hosts > 1 && rung.kind == RungKind::FlexStart {
        c.warning(
            &rp.key("kind"),
            format!(
                "rung `{}` puts a multi-host slice ({} on {}) on flex-start VMs, which Google documents for single-host slices",
                rung.name,
                acc.topology.as_deref().unwrap_or_default(),
                acc.machine_type
            ),
            "use `kind: flex-start-queued` to get all of the slice's VMs at once (docs/gke-facts.md, L3)",
        );
    }
    if hosts > 1 && is_priority(cap, rung) {
        c.warning(
            &accelerator_path(ri, rung),
            format!("rung `{}` is a multi-host slice in a ComputeClass priority: node-pool auto-creation of multi-host TPU slices for a ComputeClass is not documented", rung.name),
            "`mode: kueue` is known to serve multi-host slices (one pool per slice)",
        );
    }
    // A ComputeClass priority makes no pool of gkq's per slice: GKE creates the class's pools.
    let slices = crate::model::ladder::rung_slices(rung);
    if hosts > 1 && slices > MAX_SLICE_POOLS && !is_priority(cap, rung) {
        let path = if rung.kind == RungKind::Reservation {
            rp.key("reservation").key("slices")
        } else {
            rp.key("slices")
        };
        c.error(
            &path,
            format!("rung `{}` asks for {slices} multi-host slices: gkq makes one node pool per slice and stops at {MAX_SLICE_POOLS}", rung.name),
            "split the capacity over fewer, larger slices (a larger topology), or several rungs",
        );
    }
    if cap.mode == CapacityMode::Kueue
        && rung.quota.is_none()
        && rung.kind != RungKind::FlexStartQueued
        && crate::model::gke_facts::machine_shape(&acc.machine_type).is_none()
    {
        c.error(
            &rp.key("name"),
            format!(
                "rung `{}` needs a `quota`: gkq does not know the vCPUs and memory of {} to derive it",
                rung.name, acc.machine_type
            ),
            "add `quota: {cpu: .., memory: .., google.com/tpu: ..}` to the rung",
        );
    }
}

/// Kueue falls through on quota (docs/kueue.md 1a.5): after a rung with unbounded quota (a
/// queued rung without `quota`), no later rung is ever chosen. In both modes: a queued rung is
/// a flavor of its own in `mode: computeclass` too, so the ComputeClass flavors after it are
/// never reached either.
fn check_reachability(c: &mut Checker, cap: &Capacity) {
    let Some(unbounded) = cap
        .rungs
        .iter()
        .position(|r| r.kind == RungKind::FlexStartQueued && r.quota.is_none())
    else {
        return;
    };
    for (ri, rung) in cap.rungs.iter().enumerate().skip(unbounded + 1) {
        c.warning(
            &rung_path(ri).key("name"),
            format!(
                "rung `{}` is never reached: rung `{}` before it has unbounded quota (queued provisioning without `quota`), and Kueue moves to the next flavor only when a flavor's quota is used up",
                rung.name, cap.rungs[unbounded].name
            ),
            format!("give rung `{}` a bounded `quota` (what it may hold at once), or move it last", cap.rungs[unbounded].name),
        );
    }
}

/// The node pool names the ladder's rungs expand to (not the ComputeClass priorities, which have
/// none): every other pool of the spec is hand-written.
pub(super) fn generated_pools(cap: &Capacity) -> Vec<String> {
    cap.rungs
        .iter()
        .filter(|r| !is_priority(cap, r))
        .filter_map(|r| {
            let acc = rung_accelerator(cap, r)?;
            Some(crate::model::ladder::units_of(r, slice_hosts(acc)))
        })
        .flatten()
        .map(|(pool, _)| pool)
        .collect()
}

/// The `(accelerator type, topology)` a rung provides: a TPU the table knows (its
/// `gke-tpu-accelerator` label and topology), or a GPU (its GKE type, no topology).
fn rung_shape(acc: &RungAccelerator) -> Option<(&str, Option<&str>)> {
    match &acc.gpu {
        Some(gpu) => Some((gpu.kind.as_str(), None)),
        None => tpu_accelerator_label(acc).map(|label| (label, acc.topology.as_deref())),
    }
}

/// `tpu-v6e-slice 4x4`, `nvidia-l4`.
fn show_shape((kind, topology): (&str, Option<&str>)) -> String {
    match topology {
        Some(t) => format!("{kind} {t}"),
        None => kind.to_string(),
    }
}

/// Whether a rung of shape `offered` serves a pod group asking for `wanted`: the same
/// accelerator type, and the same topology when the group names one.
fn serves(offered: (&str, Option<&str>), wanted: (&str, Option<&str>)) -> bool {
    offered.0 == wanted.0 && (wanted.1.is_none() || offered.1 == wanted.1)
}

/// A job on the ladder's queue whose TPU shape no rung (and no hand-written pool) provides can
/// never run: an error at the job. A rung whose shape no job asks for is a warning.
fn check_jobs_against_rungs(c: &mut Checker, spec: &Spec, cap: &Capacity) {
    let shapes: Vec<Option<(&str, Option<&str>)>> = cap
        .rungs
        .iter()
        .map(|r| rung_accelerator(cap, r).and_then(rung_shape))
        .collect();
    let generated = generated_pools(cap);
    let hand_written_pools = || {
        spec.node_pools
            .iter()
            .filter(|p| !generated.contains(&p.name))
    };
    // A pool states no GPUs (gkq's node pools have no accelerator field): any hand-written pool
    // that is not a TPU pool may hold the GPUs a job asks for, so none is called unservable.
    let gpu_by_hand = hand_written_pools()
        .any(|p| crate::model::gke_facts::tpu_chips_per_vm(&p.machine_type).is_none());
    let hand_written: Vec<(&str, Option<&str>)> = hand_written_pools()
        .filter_map(|p| {
            let acc = RungAccelerator {
                machine_type: p.machine_type.clone(),
                topology: p.tpu_topology.clone(),
                gpu: None,
            };
            let label = tpu_accelerator_label(&acc)?;
            let topology = p.tpu_topology.as_deref();
            Some((label, topology))
        })
        .collect();
    let mut used = vec![false; cap.rungs.len()];
    for (ji, job) in spec.jobs.iter().enumerate() {
        let on_ladder = crate::model::queue_of(spec, &job.namespace, &job.queue)
            .is_some_and(|q| q.name == cap.cluster_queue);
        for group in crate::model::jobs::pod_groups(job) {
            let Some(a) = group.accelerator else {
                continue;
            };
            let wants = (a.kind.as_str(), a.topology.as_deref());
            let mut served = false;
            for (ri, shape) in shapes.iter().enumerate() {
                if shape.is_some_and(|offered| serves(offered, wants)) {
                    used[ri] = true;
                    served = true;
                }
            }
            let by_hand = if crate::model::jobs::is_tpu(a) {
                hand_written.iter().any(|&offered| serves(offered, wants))
            } else {
                gpu_by_hand
            };
            if on_ladder && !served && !by_hand {
                let offered: Vec<String> =
                    shapes.iter().flatten().map(|&s| show_shape(s)).collect();
                let what = if crate::model::jobs::is_tpu(a) {
                    "slice"
                } else {
                    "GPU"
                };
                c.error(
                    &group_accelerator_path(ji, &group),
                    format!(
                        "job `{}` asks for {} on queue `{}`, but no rung of the capacity ladder provides that {what}",
                        job.name,
                        show_shape(wants),
                        cap.cluster_queue
                    ),
                    format!("the rungs provide: {}; add a rung of this shape, or change the job's accelerator", offered.join(", ")),
                );
            }
        }
    }
    let any_tpu_job = spec.jobs.iter().any(|j| {
        crate::model::jobs::pod_groups(j)
            .iter()
            .any(|g| g.accelerator.is_some())
    });
    for (ri, rung) in cap.rungs.iter().enumerate() {
        if any_tpu_job && !used[ri] && shapes[ri].is_some() {
            c.warning(
                &rung_path(ri).key("name"),
                format!("no job asks for the slice rung `{}` provides", rung.name),
                "change the rung's accelerator to a shape a job asks for, or remove the rung",
            );
        }
    }
}

/// A job whose declared `duration` is longer than the `maxRunDuration` of a flex-start rung
/// that can serve it is cut short there: GKE removes flex-start nodes when that budget ends
/// (docs/gke-facts.md, "The capacity ladder", L3; `FLEX_START_MAX_RUN_SECONDS`). An error when
/// every rung that can serve the job is such a rung, a warning when another rung can serve it.
/// A flex-start VMs rung without `maxRunDuration` has flex-start's own 7 days (`rung_budget`);
/// a queued rung without one is the jobs section's rule (a DWS flavor and a duration over 7 days).
fn check_job_budgets(c: &mut Checker, spec: &Spec, cap: &Capacity) {
    let shapes: Vec<Option<(&str, Option<&str>)>> = cap
        .rungs
        .iter()
        .map(|r| rung_accelerator(cap, r).and_then(rung_shape))
        .collect();
    let budgets: Vec<Option<u64>> = cap.rungs.iter().map(rung_budget).collect();
    for (ji, job) in spec.jobs.iter().enumerate() {
        let Some(d) = job.duration.as_deref() else {
            continue;
        };
        let Ok(secs) = parse_whole_seconds(d) else {
            continue;
        };
        let on_ladder = crate::model::queue_of(spec, &job.namespace, &job.queue)
            .is_some_and(|q| q.name == cap.cluster_queue);
        if !on_ladder {
            continue;
        }
        let wanted: Vec<(&str, Option<&str>)> = crate::model::jobs::pod_groups(job)
            .iter()
            .filter_map(|g| g.accelerator)
            .map(|a| (a.kind.as_str(), a.topology.as_deref()))
            .collect();
        let serving: Vec<usize> = (0..cap.rungs.len())
            .filter(|&ri| {
                shapes[ri].is_some_and(|offered| wanted.iter().any(|&w| serves(offered, w)))
            })
            .collect();
        let cut: Vec<usize> = serving
            .iter()
            .copied()
            .filter(|&ri| budgets[ri].is_some_and(|b| b < secs))
            .collect();
        if cut.is_empty() {
            continue;
        }
        let names: Vec<String> = cut
            .iter()
            .map(|&ri| {
                let rung = &cap.rungs[ri];
                match &rung.max_run_duration {
                    Some(_) => {
                        let budget = format_seconds(budgets[ri].unwrap_or_default());
                        format!("`{}` (maxRunDuration {budget})", rung.name)
                    }
                    None => format!("`{}` (flex-start's limit of 7 days)", rung.name),
                }
            })
            .collect();
        let message = format!(
            "job `{}` declares duration {d}, longer than the time budget of flex-start rung {}: GKE removes the rung's nodes when the budget ends and the run is cut short",
            job.name,
            names.join(", ")
        );
        let hint = "raise the rung's `maxRunDuration` (at most 7d), or shorten the run (checkpoint and resume)";
        let at = Path::root().key("jobs").index(ji).key("duration");
        if cut.len() == serving.len() {
            c.error(&at, message, hint);
        } else {
            c.warning(&at, message, hint);
        }
    }
}

/// The time budget of a flex-start rung: its `maxRunDuration`, else, for flex-start VMs,
/// flex-start's own 7 days (`FLEX_START_MAX_RUN_SECONDS`). A queued rung without one is left to
/// the jobs section's rule of DWS flavors (a duration over 7 days), so it is not said twice.
fn rung_budget(rung: &Rung) -> Option<u64> {
    if !rung.kind.is_flex() {
        return None;
    }
    match rung.max_run_duration.as_deref() {
        Some(d) => parse_whole_seconds(d).ok(),
        None if rung.kind == RungKind::FlexStart => Some(FLEX_START_MAX_RUN_SECONDS),
        None => None,
    }
}

/// Where a pod group's `accelerator` is written.
fn group_accelerator_path(ji: usize, group: &crate::model::jobs::PodGroupRef<'_>) -> Path {
    let mut p = Path::root().key("jobs").index(ji).key(group.section);
    if let Some(i) = group.index {
        p = p.index(i);
    }
    if group.pods_nested {
        p = p.key("pods");
    }
    p.key("accelerator")
}
