//! The `nodePools` section: machine types, TPU topologies, autoscaling, flex-start and queued provisioning, taints.

use super::*;
use crate::model::gke_facts::{MultiHostPoolNodes, multi_host_pool_nodes};
use crate::spec::types::NodePool;

pub(super) fn check_node_pools(c: &mut Checker, spec: &Spec) {
    let gke_minor = spec.cluster.version.as_deref().and_then(parse_minor);
    for (i, pool) in spec.node_pools.iter().enumerate() {
        let p = Path::root().key("nodePools").index(i);
        let chips_per_vm = tpu_chips_per_vm(&pool.machine_type);
        let hosts = tpu_hosts(pool);
        if let Some(slice) = hosts.and_then(multi_host_pool_nodes) {
            check_multi_host_pool_size(c, &p, pool, slice, chips_per_vm.unwrap_or(1));
        }
        check_autoscaling(c, &p, pool);
        check_reservation_affinity(c, &p, pool);
        if pool.flex_start {
            check_flex_start(c, &p, pool);
        }
        if pool.queued_provisioning {
            check_queued_provisioning(c, &p, pool);
            if pool.flex_start && chips_per_vm.is_some() {
                check_tpu_flex_start_queued_version(c, &p, gke_minor);
            }
        }
        if let Some(d) = &pool.max_run_duration
            && parse_whole_seconds(d).is_err()
        {
            c.error(
                &p.key("maxRunDuration"),
                format!("duration `{d}` is not valid"),
                "write a duration such as 86400s, 24h or 7d",
            );
        }
        check_k8s_labels(c, &p.key("labels"), "node label", &pool.labels);
        check_taints(c, &p.key("taints"), &pool.taints);
        check_gke_labels(c, &p.key("resourceLabels"), &pool.resource_labels);
    }
}

/// Autoscaling bounds in order, and a location policy GKE knows.
fn check_autoscaling(c: &mut Checker, p: &Path, pool: &NodePool) {
    let Some(a) = &pool.autoscaling else {
        return;
    };
    if a.min > a.max {
        c.error(
            &p.key("autoscaling").key("min"),
            format!("autoscaling min {} is above max {}", a.min, a.max),
            "min must be at most max",
        );
    }
    if let Some(lp) = &a.location_policy
        && !matches!(lp.to_uppercase().as_str(), "BALANCED" | "ANY")
    {
        c.error(
            &p.key("autoscaling").key("locationPolicy"),
            format!("location policy `{lp}` is not valid"),
            "use BALANCED or ANY",
        );
    }
}

/// A reservation affinity written in a form gkq can pass to GKE.
fn check_reservation_affinity(c: &mut Checker, p: &Path, pool: &NodePool) {
    if let Some(ra) = &pool.reservation_affinity
        && crate::model::gke::reservation_affinity(ra).is_none()
    {
        c.error(
            &p.key("reservationAffinity"),
            format!("reservation affinity `{ra}` is not valid"),
            "use none, any, any-then-fail or specific:<reservation-name>",
        );
    }
}

/// What GKE requires of a flex-start pool: autoscaling from zero, no initial nodes, no
/// reservations, no spot VMs and no auto-repair.
fn check_flex_start(c: &mut Checker, p: &Path, pool: &NodePool) {
    match &pool.autoscaling {
        None => c.error(
            &p.key("flexStart"),
            "a flex-start pool must autoscale from zero",
            "add `autoscaling: {min: 0, max: N}`",
        ),
        Some(a) if a.min != 0 => c.error(
            &p.key("autoscaling").key("min"),
            format!(
                "a flex-start pool must autoscale from zero, min is {}",
                a.min
            ),
            "set autoscaling.min to 0",
        ),
        _ => {}
    }
    if pool.initial_nodes.unwrap_or(0) != 0 {
        c.error(
            &p.key("initialNodes"),
            "a flex-start pool starts with zero nodes",
            "set initialNodes to 0 or remove it",
        );
    }
    if pool
        .reservation_affinity
        .as_deref()
        .is_some_and(|r| r != "none")
    {
        c.error(
            &p.key("reservationAffinity"),
            "flex-start pools cannot consume reservations",
            "set reservationAffinity: none",
        );
    }
    if pool.spot {
        c.error(
            &p.key("spot"),
            "a pool cannot be both flex-start and spot",
            "remove one of them",
        );
    }
    if pool.auto_repair == Some(true) {
        c.error(
            &p.key("autoRepair"),
            "GKE requires auto-repair off on flex-start pools",
            "remove autoRepair (gkq turns it off) or set it to false",
        );
    }
}

/// What a queued-provisioning pool needs here: flex-start, autoscaling from zero, no spot VMs
/// and no reservations.
fn check_queued_provisioning(c: &mut Checker, p: &Path, pool: &NodePool) {
    if !pool.flex_start {
        c.error(
            &p.key("queuedProvisioning"),
            "queued provisioning needs flex-start in this setup",
            "add `flexStart: true`: DWS capacity for queued pools comes from flex-start VMs",
        );
    }
    match &pool.autoscaling {
        None => c.error(
            &p.key("queuedProvisioning"),
            "queued provisioning needs autoscaling from zero",
            "add `autoscaling: {min: 0, max: N}`",
        ),
        Some(a) if a.min != 0 && !pool.flex_start => c.error(
            &p.key("autoscaling").key("min"),
            "queued provisioning needs autoscaling from zero",
            "set autoscaling.min to 0",
        ),
        _ => {}
    }
    if pool.spot {
        c.error(
            &p.key("spot"),
            "queued provisioning cannot use spot VMs",
            "remove `spot`",
        );
    }
    if pool
        .reservation_affinity
        .as_deref()
        .is_some_and(|r| r != "none")
    {
        c.error(
            &p.key("reservationAffinity"),
            "queued provisioning cannot consume reservations",
            "set reservationAffinity: none",
        );
    }
}

/// A TPU flex-start pool with queued provisioning on a GKE version before 1.34 may be refused.
fn check_tpu_flex_start_queued_version(c: &mut Checker, p: &Path, gke_minor: Option<(u32, u32)>) {
    match gke_minor {
        Some(minor) if minor < (1, 34) => c.warning(
            &p.key("queuedProvisioning"),
            format!(
                "GKE {}.{} may reject TPU flex-start with queued provisioning (\"Flex start node pools don't support TPUs with queued provisioning\")",
                minor.0, minor.1
            ),
            "use GKE 1.34 or later, as Google's guide does",
        ),
        _ => {}
    }
}

/// A multi-host TPU slice pool holds one slice, atomically: autoscaling's max is the slice, and
/// its min and initial size are zero or the slice (`model::gke_facts::multi_host_pool_nodes`).
fn check_multi_host_pool_size(
    c: &mut Checker,
    p: &Path,
    pool: &NodePool,
    slice: MultiHostPoolNodes,
    chips_per_vm: u32,
) {
    let hosts = slice.slice_hosts;
    let topo = pool.tpu_topology.as_deref().unwrap_or_default();
    let slice_is = format!(
        "a {topo} slice is {} chips = {hosts} nodes of {} ({chips_per_vm} chips each)",
        hosts * chips_per_vm,
        pool.machine_type
    );
    if let Some(a) = &pool.autoscaling {
        if !slice.accepts_max(a.max) {
            let (what, fix) = if a.max < hosts {
                (
                    format!("max {} nodes cannot hold one {topo} slice", a.max),
                    format!("set max to {hosts}"),
                )
            } else {
                (
                    format!("max {} nodes is more than one {topo} slice", a.max),
                    format!(
                        "set max to {hosts}; for more slices add a node pool per slice (GKE adds no nodes to a multi-host slice pool)"
                    ),
                )
            };
            c.error(
                &p.key("autoscaling").key("max"),
                format!("{what}: {slice_is}, and GKE scales a multi-host pool as that one slice"),
                fix,
            );
        }
        if !slice.accepts_count(a.min) {
            c.error(
                &p.key("autoscaling").key("min"),
                format!(
                    "min {} nodes is part of a {topo} slice ({hosts} nodes), which GKE creates whole or not at all",
                    a.min
                ),
                format!("set min to 0 or {hosts}"),
            );
        }
    }
    if let Some(n) = pool.initial_nodes
        && !slice.accepts_count(n)
    {
        c.error(
            &p.key("initialNodes"),
            format!(
                "initialNodes {n} is not a whole {topo} slice ({hosts} nodes): a multi-host pool holds one slice"
            ),
            format!("set initialNodes to 0 or {hosts}"),
        );
    }
}
