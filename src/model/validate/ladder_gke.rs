//! The capacity ladder against the cluster it runs on (docs/design/capacity-ladder.md, section 5;
//! facts L1-L5 of docs/gke-facts.md, "The capacity ladder"): the GKE versions a ComputeClass's
//! auto-creation needs (with or without node auto-provisioning, per TPU generation), node
//! auto-provisioning's limits, the zone of a reservation, pools that may consume a reservation before its rung does, and how
//! many priorities one class holds. Versions are judged by the one comparison of
//! `gke_facts::compare_with_floor(s)` through `facts::check_version_floor(s)`: a spec without a
//! version (the channel's default) is not judged, an alias means its newest patch. The machine,
//! topology and flex-start facts of a rung that is a ComputeClass priority are the node pools'
//! rules, judged over the rung (`facts::check`).

use std::collections::BTreeMap;

use super::Checker;
use super::facts::check_version_floors;
use crate::model::gke_facts::{
    self as facts, CC_AUTO_CREATION_WITHOUT_NAP_MIN_GKE, COMPUTE_CLASS_MAX_PRIORITIES,
    GKE_SKILLS_SOURCE, TpuGeneration, VersionVsFloor,
};
use crate::model::ladder::computeclass::{Segment, segments};
use crate::model::ladder::{capacity_path, rung_accelerator, rung_path, tpu_accelerator_label};
use crate::spec::Path;
use crate::spec::ladder::{Capacity, CapacityMode, Rung, RungKind};
use crate::spec::types::Spec;

pub(super) fn check(c: &mut Checker, spec: &Spec) {
    check_node_auto_provisioning(c, spec);
    let Some(cap) = &spec.capacity else {
        return;
    };
    if cap.mode == CapacityMode::Computeclass {
        let classes = class_segments(spec, cap);
        check_auto_creation(c, spec, cap, &classes);
        check_priority_count(c, cap, &classes);
    }
    for (ri, rung) in cap.rungs.iter().enumerate() {
        if rung.kind == RungKind::Reservation && rung.reservation.is_some() {
            check_reservation_zone(c, spec, cap, ri, rung);
            check_reservation_shadowed(c, spec, cap, rung);
        }
    }
}

/// The ComputeClasses of a `mode: computeclass` ladder: each class's name and its rungs (the
/// priorities, in order). Queued rungs are pools of their own (design 4.2), not priorities.
fn class_segments(spec: &Spec, cap: &Capacity) -> Vec<(String, Vec<usize>)> {
    segments(spec, cap)
        .into_iter()
        .filter_map(|s| match s {
            Segment::Class { class, rungs, .. } => Some((class, rungs)),
            Segment::Queued(_) => None,
        })
        .collect()
}

fn rung_names(cap: &Capacity, rungs: &[usize]) -> String {
    let names: Vec<String> = rungs
        .iter()
        .map(|&ri| format!("`{}`", cap.rungs[ri].name))
        .collect();
    let noun = if names.len() == 1 { "rung" } else { "rungs" };
    format!("{noun} {}", names.join(", "))
}

/// The TPU generation a rung's accelerator belongs to, when the table knows it.
fn rung_generation(cap: &Capacity, rung: &Rung) -> Option<&'static TpuGeneration> {
    let acc = rung_accelerator(cap, rung)?;
    facts::tpu_generation_by_accelerator(tpu_accelerator_label(acc)?)
}

/// `cluster.nodeAutoProvisioning`: limits that let GKE create something, accelerators named by
/// their GKE type, and the GKE version each TPU generation needs for auto-provisioning
/// (`cc-tpu-nap-floor`).
fn check_node_auto_provisioning(c: &mut Checker, spec: &Spec) {
    let Some(nap) = &spec.cluster.node_auto_provisioning else {
        return;
    };
    let p = Path::root().key("cluster").key("nodeAutoProvisioning");
    for (key, max) in [("maxCpu", nap.max_cpu), ("maxMemoryGb", nap.max_memory_gb)] {
        if max == 0 {
            c.error(
                &p.key(key),
                format!("`{key}` is 0: node auto-provisioning could create no node"),
                "set the most the whole cluster may hold (every node pool counts, the default pool included)",
            );
        }
    }
    let tpu_types = facts::tpu_accelerators();
    let mut floors: BTreeMap<&str, (&TpuGeneration, Vec<String>)> = BTreeMap::new();
    for kind in nap.max_accelerators.keys() {
        let at = p.key("maxAccelerators").key(kind);
        if kind.contains('/') {
            c.error_at_key(
                &at,
                format!("`{kind}` is a Kubernetes resource name; auto-provisioning limits name the accelerator type"),
                format!("name the type, e.g. one of {} for TPUs or nvidia-l4 for GPUs", tpu_types.join(", ")),
            );
        } else if let Some(generation) = facts::tpu_generation_by_accelerator(kind) {
            floors
                .entry(generation.name)
                .or_insert((generation, Vec::new()))
                .1
                .push(format!(
                    "`cluster.nodeAutoProvisioning.maxAccelerators.{kind}`"
                ));
        } else if !tpu_types.contains(&kind.as_str()) && !kind.starts_with("nvidia-") {
            c.warning(
                &at,
                format!("`{kind}` is not an accelerator type in gkq's table of GKE facts (as of {})", facts::CHECKED_ON),
                format!("TPU types: {}; GPU types start with nvidia-. If Google added it since, the table is out of date", tpu_types.join(", ")),
            );
        }
    }
    for (generation, wanted_by) in floors.values() {
        report_nap_floor(c, spec, generation, &wanted_by.join(", "));
    }
}

/// `cc-tpu-nap-floor`: GKE creates a generation's node pools by itself only from the version
/// Google names for it (docs/gke-facts.md, L2; `TpuGeneration::nap_min_gke`).
fn report_nap_floor(c: &mut Checker, spec: &Spec, generation: &TpuGeneration, wanted_by: &str) {
    if generation.nap_min_gke.is_empty() {
        return;
    }
    check_version_floors(
        c,
        spec,
        generation.nap_min_gke,
        &format!(
            "node pools of {} created by GKE (node auto-provisioning), which {wanted_by} asks for",
            generation.label
        ),
    );
}

/// A ComputeClass with node-pool auto-creation: below the version from which GKE creates its
/// pools without cluster-level auto-provisioning, the cluster may need auto-provisioning on
/// (`cc-auto-creation-needs-nap`, a warning: the floor is unconfirmed); and each TPU generation
/// of its rungs must be one auto-provisioning creates on this version (`cc-tpu-nap-floor`).
fn check_auto_creation(
    c: &mut Checker,
    spec: &Spec,
    cap: &Capacity,
    classes: &[(String, Vec<usize>)],
) {
    let auto_creation = cap
        .compute_class
        .as_ref()
        .and_then(|s| s.auto_creation)
        .unwrap_or(true);
    if !auto_creation || classes.is_empty() {
        return;
    }
    let class_names: Vec<&str> = classes.iter().map(|(name, _)| name.as_str()).collect();
    if let Some(version) = &spec.cluster.version
        && facts::compare_with_floor(version, CC_AUTO_CREATION_WITHOUT_NAP_MIN_GKE)
            == VersionVsFloor::Below
        && spec.cluster.node_auto_provisioning.is_none()
    {
        let floor = facts::format_version(CC_AUTO_CREATION_WITHOUT_NAP_MIN_GKE);
        let types: Vec<String> = classes
            .iter()
            .flat_map(|(_, rungs)| rungs.iter())
            .filter_map(|&ri| rung_accelerator(cap, &cap.rungs[ri]).and_then(tpu_accelerator_label))
            .map(|label| format!("{label}: .."))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        c.warning(
            &capacity_path().key("mode"),
            format!(
                "on GKE {version}, older than {floor}, node-pool auto-creation for ComputeClass {} may need the cluster's node auto-provisioning, which the spec does not turn on",
                class_names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ),
            format!(
                "add `cluster.nodeAutoProvisioning: {{maxCpu: .., maxMemoryGb: .., maxAccelerators: {{{}}}}}`, or set cluster.version to {floor} or later (this floor is from {GKE_SKILLS_SOURCE}: unconfirmed)",
                types.join(", ")
            ),
        );
    }
    let mut by_generation: BTreeMap<&str, (&TpuGeneration, Vec<usize>)> = BTreeMap::new();
    for &ri in classes.iter().flat_map(|(_, rungs)| rungs) {
        if let Some(generation) = rung_generation(cap, &cap.rungs[ri]) {
            by_generation
                .entry(generation.name)
                .or_insert((generation, Vec::new()))
                .1
                .push(ri);
        }
    }
    for (generation, rungs) in by_generation.values() {
        let wanted_by = format!("{} of the ComputeClass ladder", rung_names(cap, rungs));
        report_nap_floor(c, spec, generation, &wanted_by);
    }
}

/// `cc-too-many-priorities`: more priorities in one class than Google's guidance advises (a
/// warning: the limit is unconfirmed, `COMPUTE_CLASS_MAX_PRIORITIES`).
fn check_priority_count(c: &mut Checker, cap: &Capacity, classes: &[(String, Vec<usize>)]) {
    for (class, rungs) in classes {
        if rungs.len() > COMPUTE_CLASS_MAX_PRIORITIES {
            c.warning(
                &capacity_path().key("rungs"),
                format!(
                    "ComputeClass `{class}` would hold {} priorities ({} to {}); Google's guidance keeps a class to about {COMPUTE_CLASS_MAX_PRIORITIES}: a priority GKE finds unobtainable is skipped for about five minutes, and in a longer list those pauses run out before the last priority is tried, so scale-up loops",
                    rungs.len(),
                    cap.rungs[rungs[0]].name,
                    cap.rungs[rungs[rungs.len() - 1]].name
                ),
                format!(
                    "drop rungs that add nothing (same machine and kind), at most {COMPUTE_CLASS_MAX_PRIORITIES} per class (source: {GKE_SKILLS_SOURCE}; unconfirmed)"
                ),
            );
        }
    }
}

/// `ladder-reservation-zone`: a reservation is zonal (docs/gke-facts.md, L5). A regional
/// cluster must say which zone; a zone outside the cluster's location has no nodes to consume it.
fn check_reservation_zone(c: &mut Checker, spec: &Spec, cap: &Capacity, ri: usize, rung: &Rung) {
    let Some(r) = &rung.reservation else {
        return;
    };
    let Ok(cluster) = facts::parse_location(spec.location.trim()) else {
        return; // the location's own rule reports it
    };
    let rp = rung_path(ri).key("reservation");
    let Some(zone) = &r.zone else {
        if cluster.zone.is_none() {
            c.error(
                &rp,
                format!(
                    "rung `{}` consumes reservation `{}`, but the cluster is regional (`{}`) and the reservation's zone is not given",
                    rung.name, r.name, cluster.region
                ),
                format!("a reservation is zonal: add `zone: {}-<letter>` (the reservation's zone) under `reservation`", cluster.region),
            );
        }
        return;
    };
    let zp = rp.key("zone");
    let parsed = facts::parse_location(zone)
        .ok()
        .filter(|l| l.zone.is_some());
    let Some(parsed) = parsed else {
        c.error(
            &zp,
            format!("reservation zone `{zone}` is not a zone"),
            "write the reservation's zone, such as us-east5-b (`gcloud compute reservations describe NAME` shows it)",
        );
        return;
    };
    match &cluster.zone {
        Some(cluster_zone) if cluster_zone != zone => c.error(
            &zp,
            format!(
                "reservation `{}` is in `{zone}`, but the zonal cluster makes nodes only in `{cluster_zone}`: rung `{}` could never consume it",
                r.name, rung.name
            ),
            format!("a reservation is zonal: consume one in `{cluster_zone}`, or move the cluster"),
        ),
        None if parsed.region != cluster.region => c.error(
            &zp,
            format!(
                "reservation `{}` is in `{zone}`, outside the cluster's region `{}`: rung `{}` could never consume it",
                r.name, cluster.region, rung.name
            ),
            format!("a reservation is zonal: consume one in a zone of {}", cluster.region),
        ),
        None if cap.mode == CapacityMode::Kueue => c.warning(
            &zp,
            format!(
                "rung `{}`'s node pool spans the zones of the regional cluster, but reservation `{}` is only in `{zone}`; gkq cannot pin a node pool to one zone yet",
                rung.name, r.name
            ),
            "nodes GKE tries to make in other zones cannot consume the reservation: use a zonal cluster in that zone, or `mode: computeclass` (its reservation priority names the zone)",
        ),
        _ => {}
    }
}

/// `ladder-reservation-shadowed`: a hand-written pool of the reservation's machine type that
/// consumes *any* matching reservation (`any`, `any-then-fail`, or no affinity: Compute Engine's
/// default is `ANY_RESERVATION`) may take the reservation before the rung does
/// (docs/gke-facts.md, L5). Flex-start, queued and Spot pools consume no reservation.
fn check_reservation_shadowed(c: &mut Checker, spec: &Spec, cap: &Capacity, rung: &Rung) {
    let (Some(r), Some(acc)) = (&rung.reservation, rung_accelerator(cap, rung)) else {
        return;
    };
    let generated = super::ladder::generated_pools(cap);
    for (pi, pool) in spec.node_pools.iter().enumerate() {
        let any = match pool.reservation_affinity.as_deref() {
            None => Some("no reservationAffinity (Compute Engine's default: any)"),
            Some("any") => Some("reservationAffinity `any`"),
            Some("any-then-fail") => Some("reservationAffinity `any-then-fail`"),
            Some(_) => None,
        };
        let consumes = !generated.contains(&pool.name)
            && pool.machine_type == acc.machine_type
            && !pool.flex_start
            && !pool.queued_provisioning
            && !pool.spot;
        let Some(affinity) = any.filter(|_| consumes) else {
            continue;
        };
        let pp = Path::root().key("nodePools").index(pi);
        let at = if pool.reservation_affinity.is_some() {
            pp.key("reservationAffinity")
        } else {
            pp.key("machineType")
        };
        c.warning(
            &at,
            format!(
                "node pool `{}` ({}, {affinity}) may consume reservation `{}` before rung `{}` does",
                pool.name, pool.machine_type, r.name, rung.name
            ),
            format!(
                "set `reservationAffinity: none` on `{}`; a reservation created as specific-only cannot be taken this way, but gkq cannot see how it was created",
                pool.name
            ),
        );
    }
}
