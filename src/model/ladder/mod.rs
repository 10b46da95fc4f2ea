//! The capacity ladder (`capacity:`), expanded in the pure core into the spec's own node pools,
//! flavors and ClusterQueue quotas (`mode: kueue`), so that every later step (validation of
//! pools and flavors, rendering, placement, plan) runs on the expanded spec and no rule has a
//! second home. docs/design/capacity-ladder.md, section 3; GKE facts in docs/gke-facts.md,
//! "The capacity ladder".

pub mod computeclass;

use std::collections::BTreeMap;

use crate::model::gke_facts::{machine_shape, topology_chips, tpu_chips_per_vm};
use crate::spec::Loaded;
use crate::spec::ladder::{Capacity, CapacityMode, Origins, Rung, RungAccelerator, RungKind};
use crate::spec::node::Path;
use crate::spec::types::{
    Autoscaling, Flavor, FlavorQuota, NodePool, Provisioning, Quantity, ResourceGroup, Spec,
};
use crate::vocab::labels::{TPU_ACCELERATOR_LABEL, TPU_RESOURCE, TPU_TOPOLOGY_LABEL};

/// gkq's bound on the node pools one multi-host rung generates (one per slice): beyond it the
/// spec is refused rather than expanded (validation says so).
pub const MAX_SLICE_POOLS: u32 = 64;

/// The quota a queued-provisioning rung gets when it states none: DWS decides, not quota (the
/// seed's "infinite" values).
pub const UNBOUNDED: i64 = 1_000_000_000;

/// What the expansion made of one rung.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RungUnits {
    /// Node pools, in order (kueue mode; one per slice for a multi-host rung).
    pub pools: Vec<String>,
    /// Kueue flavors, in order (one per pool in kueue mode).
    pub flavors: Vec<String>,
}

/// Where the spec path of the capacity section is.
pub fn capacity_path() -> Path {
    Path::root().key("capacity")
}

pub fn rung_path(index: usize) -> Path {
    capacity_path().key("rungs").index(index)
}

/// The rung's accelerator: its own, else the ladder's.
pub fn rung_accelerator<'a>(cap: &'a Capacity, rung: &'a Rung) -> Option<&'a RungAccelerator> {
    rung.accelerator.as_ref().or(cap.accelerator.as_ref())
}

/// Whether the rung is a ComputeClass priority: in `mode: computeclass` every rung but a queued
/// one (design 4.2: a `flex-start-queued` rung keeps its own node pool and flavor). Such a rung
/// has no node pool of gkq's, so the rules of node pools must judge it as a rung.
pub fn is_priority(cap: &Capacity, rung: &Rung) -> bool {
    cap.mode == CapacityMode::Computeclass && rung.kind != RungKind::FlexStartQueued
}

/// Where the rung's accelerator is written.
pub fn accelerator_path(index: usize, rung: &Rung) -> Path {
    if rung.accelerator.is_some() {
        rung_path(index).key("accelerator")
    } else {
        capacity_path().key("accelerator")
    }
}

/// VMs in one slice of this accelerator: a TPU topology's chips over the machine's chips per VM
/// (4x4 on `-4t` = 4); 1 without a topology (GPUs, single VMs) or when unknown.
pub fn slice_hosts(acc: &RungAccelerator) -> u32 {
    let chips = acc.topology.as_deref().and_then(topology_chips);
    match (chips, tpu_chips_per_vm(&acc.machine_type)) {
        (Some(c), Some(per_vm)) if per_vm > 0 && c % per_vm == 0 && c >= per_vm => c / per_vm,
        _ => 1,
    }
}

/// Slices the rung holds: `reservation.slices` for a reservation, else `slices` (default 1).
pub fn rung_slices(rung: &Rung) -> u32 {
    match (&rung.kind, &rung.reservation) {
        (RungKind::Reservation, Some(r)) => r.slices,
        _ => rung.slices.unwrap_or(1),
    }
}

/// The rung's pool name before per-slice suffixes.
pub fn base_pool_name(rung: &Rung) -> String {
    rung.pool
        .clone()
        .unwrap_or_else(|| format!("{}-pool", rung.name))
}

/// One pool per slice for a multi-host rung of several slices (a multi-host slice pool holds
/// exactly one slice: docs/gke-facts.md, "Multi-host slice node pools"), else one pool.
pub fn units_of(rung: &Rung, hosts: u32) -> Vec<(String, String)> {
    let slices = rung_slices(rung);
    let base = base_pool_name(rung);
    if hosts > 1 && slices > 1 {
        (1..=slices.min(MAX_SLICE_POOLS))
            .map(|i| (format!("{base}-{i}"), format!("{}-{i}", rung.name)))
            .collect()
    } else {
        vec![(base, rung.name.clone())]
    }
}

/// The pool's most nodes: a multi-host slice exactly; single-host: `maxNodes`, else slices.
fn pool_max(rung: &Rung, hosts: u32) -> u32 {
    if hosts > 1 {
        hosts
    } else {
        rung.max_nodes.unwrap_or_else(|| rung_slices(rung))
    }
}

/// `reservationAffinity` in the node-pool short form.
pub fn reservation_affinity(rung: &Rung) -> String {
    match (&rung.kind, &rung.reservation) {
        (RungKind::Reservation, Some(r)) => match &r.project {
            Some(project) => format!("specific:projects/{project}/reservations/{}", r.name),
            None => format!("specific:{}", r.name),
        },
        _ => "none".into(),
    }
}

/// The accelerator resource the rung provides: `google.com/tpu`, `nvidia.com/gpu`, or none.
pub fn accelerator_resource(acc: &RungAccelerator) -> Option<&'static str> {
    if acc.gpu.is_some() {
        Some(crate::vocab::labels::GPU_RESOURCE)
    } else if tpu_chips_per_vm(&acc.machine_type).is_some() {
        Some(TPU_RESOURCE)
    } else {
        None
    }
}

/// Accelerator units (chips or GPUs) on one VM.
fn accelerators_per_vm(acc: &RungAccelerator) -> Option<u32> {
    match &acc.gpu {
        Some(g) => Some(g.count),
        None => tpu_chips_per_vm(&acc.machine_type),
    }
}

/// The quota a rung's flavor gets when the rung states none (design 3.2): what the pool can
/// obtain (its `max` VMs), or unbounded for a queued rung. Resources it cannot size (a machine
/// whose vCPUs and memory are not recorded) are left out; validation asks for `quota`.
pub fn derived_quota(
    rung: &Rung,
    acc: &RungAccelerator,
    vms: u32,
    resources: &[String],
) -> BTreeMap<String, Quantity> {
    let accel = accelerator_resource(acc);
    let shape = machine_shape(&acc.machine_type);
    let mut quota = BTreeMap::new();
    for r in resources {
        let value = if rung.kind == RungKind::FlexStartQueued {
            Some(if r == "memory" {
                Quantity::Text(format!("{UNBOUNDED}Gi"))
            } else {
                Quantity::Int(UNBOUNDED)
            })
        } else if r == "cpu" {
            shape.map(|s| Quantity::Int(i64::from(s.vcpus) * i64::from(vms)))
        } else if r == "memory" {
            shape.map(|s| Quantity::Text(format!("{}Gi", u64::from(s.memory_gib) * u64::from(vms))))
        } else if Some(r.as_str()) == accel {
            accelerators_per_vm(acc).map(|n| Quantity::Int(i64::from(n) * i64::from(vms)))
        } else {
            Some(Quantity::Int(0))
        };
        if let Some(v) = value {
            quota.insert(r.clone(), v);
        }
    }
    quota
}

/// The queue and resource group the rung flavors join: `(queue index, group index)`.
pub fn target_group(spec: &Spec, cap: &Capacity) -> Option<(usize, usize)> {
    let qi = spec
        .kueue
        .cluster_queues
        .iter()
        .position(|q| q.name == cap.cluster_queue)?;
    let groups = &spec.kueue.cluster_queues[qi].resource_groups;
    let resources: Vec<&str> = cap
        .rungs
        .iter()
        .filter_map(|r| rung_accelerator(cap, r).and_then(accelerator_resource))
        .chain(cap.accelerator.as_ref().and_then(accelerator_resource))
        .collect();
    let gi = match cap.resource_group {
        Some(gi) => (gi < groups.len()).then_some(gi)?,
        None => groups.iter().position(|g: &ResourceGroup| {
            g.resources.iter().any(|r| {
                resources.contains(&r.as_str())
                    || (resources.is_empty() && r.as_str() == TPU_RESOURCE)
            })
        })?,
    };
    Some((qi, gi))
}

/// Whether every rung has one accelerator and topology: then the flavors need no TPU labels.
fn one_shape(cap: &Capacity) -> bool {
    let mut shapes = cap
        .rungs
        .iter()
        .filter_map(|r| rung_accelerator(cap, r))
        .map(|a| (&a.machine_type, &a.topology));
    match shapes.next() {
        Some(first) => shapes.all(|s| s == first),
        None => true,
    }
}

/// The spec with its ladder expanded, where each generated entry came from, and what each rung
/// became. A spec without `capacity:` comes back unchanged.
#[derive(Debug, Clone)]
pub struct Expansion {
    pub spec: Spec,
    pub origins: Origins,
    pub rungs: Vec<RungUnits>,
}

pub fn expand(spec: &Spec) -> Expansion {
    let mut out = Expansion {
        spec: spec.clone(),
        origins: Origins::expanded(),
        rungs: Vec::new(),
    };
    let Some(cap) = &spec.capacity else {
        return out;
    };
    match cap.mode {
        CapacityMode::Kueue => expand_kueue(cap, &mut out),
        CapacityMode::Computeclass => computeclass::expand(cap, &mut out),
    }
    out
}

fn expand_kueue(cap: &Capacity, out: &mut Expansion) {
    let target = target_group(&out.spec, cap);
    for ri in 0..cap.rungs.len() {
        let units = expand_rung(cap, ri, target, out);
        out.rungs.push(units);
    }
}

/// One rung as node pool(s), flavor(s) and their quotas in the target group (design 3.1).
pub(crate) fn expand_rung(
    cap: &Capacity,
    ri: usize,
    target: Option<(usize, usize)>,
    out: &mut Expansion,
) -> RungUnits {
    let rung = &cap.rungs[ri];
    let mut units = RungUnits::default();
    let Some(acc) = rung_accelerator(cap, rung) else {
        return units;
    };
    let labelled = !one_shape(cap);
    let hosts = slice_hosts(acc);
    let max = pool_max(rung, hosts);
    for (pool_name, flavor_name) in units_of(rung, hosts) {
        let pi = out.spec.node_pools.len();
        out.spec
            .node_pools
            .push(rung_pool(rung, acc, &pool_name, max));
        record_pool(&mut out.origins, pi, ri, rung);
        let mut node_labels = BTreeMap::new();
        if labelled && let Some(label) = tpu_accelerator_label(acc) {
            node_labels.insert(TPU_ACCELERATOR_LABEL.to_string(), label.to_string());
            if let Some(t) = &acc.topology {
                node_labels.insert(TPU_TOPOLOGY_LABEL.to_string(), t.clone());
            }
        }
        let flavor = Flavor {
            name: flavor_name.clone(),
            node_pool: Some(pool_name.clone()),
            node_labels,
            node_taints: Vec::new(),
            tolerations: Vec::new(),
            provisioning: (rung.kind == RungKind::FlexStartQueued).then_some(Provisioning::Dws),
        };
        let fi = push_flavor(out, flavor, rung_path(ri));
        out.origins.record(
            Path::root()
                .key("kueue")
                .key("flavors")
                .index(fi)
                .key("nodePool"),
            pool_source(ri, rung),
        );
        if let Some((qi, gi)) = target {
            let resources = out.spec.kueue.cluster_queues[qi].resource_groups[gi]
                .resources
                .clone();
            let quota = rung
                .quota
                .clone()
                .unwrap_or_else(|| derived_quota(rung, acc, max, &resources));
            push_quota(out, (qi, gi), &flavor_name, quota, rung_path(ri));
        }
        units.pools.push(pool_name);
        units.flavors.push(flavor_name);
    }
    units
}

/// The node pool of one slice (or of a single-host rung), by the rung's kind (design 3.1).
fn rung_pool(rung: &Rung, acc: &RungAccelerator, name: &str, max: u32) -> NodePool {
    NodePool {
        name: name.to_string(),
        machine_type: acc.machine_type.clone(),
        tpu_topology: acc.topology.clone(),
        reservation_affinity: Some(reservation_affinity(rung)),
        autoscaling: Some(Autoscaling {
            min: 0,
            max,
            location_policy: None,
        }),
        initial_nodes: Some(0),
        flex_start: rung.kind.is_flex(),
        queued_provisioning: rung.kind == RungKind::FlexStartQueued,
        auto_repair: None,
        auto_upgrade: true,
        spot: rung.kind == RungKind::Spot,
        max_run_duration: rung
            .max_run_duration
            .clone()
            .filter(|_| rung.kind.is_flex()),
        labels: rung.labels.clone(),
        taints: rung.taints.clone(),
        resource_labels: BTreeMap::new(),
    }
}

/// Appends a generated flavor; returns its index.
pub(crate) fn push_flavor(out: &mut Expansion, flavor: Flavor, source: Path) -> usize {
    let fi = out.spec.kueue.flavors.len();
    out.spec.kueue.flavors.push(flavor);
    out.origins
        .record(Path::root().key("kueue").key("flavors").index(fi), source);
    fi
}

/// Appends a generated flavor's quota to the target group, after the flavors written there.
pub(crate) fn push_quota(
    out: &mut Expansion,
    (qi, gi): (usize, usize),
    flavor: &str,
    quota: BTreeMap<String, Quantity>,
    source: Path,
) {
    let group = &mut out.spec.kueue.cluster_queues[qi].resource_groups[gi];
    let k = group.flavors.len();
    group.flavors.push(FlavorQuota {
        name: flavor.to_string(),
        quota,
        borrowing_limit: BTreeMap::new(),
        lending_limit: BTreeMap::new(),
    });
    out.origins.record(queue_flavor_path(qi, gi, k), source);
}

/// `kueue.clusterQueues[qi].resourceGroups[gi].flavors[k]`.
pub fn queue_flavor_path(qi: usize, gi: usize, k: usize) -> Path {
    Path::root()
        .key("kueue")
        .key("clusterQueues")
        .index(qi)
        .key("resourceGroups")
        .index(gi)
        .key("flavors")
        .index(k)
}

/// Where a rung's pool name comes from: its `pool`, else its `name`.
fn pool_source(ri: usize, rung: &Rung) -> Path {
    if rung.pool.is_some() {
        rung_path(ri).key("pool")
    } else {
        rung_path(ri).key("name")
    }
}

/// Maps each generated pool field to the rung value it came from.
fn record_pool(origins: &mut Origins, pi: usize, ri: usize, rung: &Rung) {
    let pool = Path::root().key("nodePools").index(pi);
    let rp = rung_path(ri);
    let acc = accelerator_path(ri, rung);
    let size = if rung.kind == RungKind::Reservation && rung.reservation.is_some() {
        rp.key("reservation").key("slices")
    } else if rung.max_nodes.is_some() {
        rp.key("maxNodes")
    } else if rung.slices.is_some() {
        rp.key("slices")
    } else {
        rp.clone()
    };
    let kind = rp.key("kind");
    let pairs = [
        (pool.clone(), rp.clone()),
        (pool.key("name"), pool_source(ri, rung)),
        (pool.key("machineType"), acc.key("machineType")),
        (pool.key("tpuTopology"), acc.key("topology")),
        (pool.key("autoscaling"), size.clone()),
        (pool.key("initialNodes"), size),
        (pool.key("reservationAffinity"), rp.key("reservation")),
        (pool.key("flexStart"), kind.clone()),
        (pool.key("queuedProvisioning"), kind.clone()),
        (pool.key("spot"), kind),
        (pool.key("maxRunDuration"), rp.key("maxRunDuration")),
    ];
    for (generated, source) in pairs {
        origins.record(generated, source);
    }
}

/// The `cloud.google.com/gke-tpu-accelerator` value of a TPU machine type the table knows.
pub fn tpu_accelerator_label(acc: &RungAccelerator) -> Option<&'static str> {
    match crate::model::gke_facts::classify_machine_type(&acc.machine_type) {
        crate::model::gke_facts::MachineTypeFact::Tpu(generation, _) => {
            generation.accelerators.first().copied()
        }
        _ => None,
    }
}

/// Expands the ladder of a loaded spec in place, once: the spec every later step reads is the
/// expanded one, and diagnostics about generated entries point at their rungs.
pub fn expand_loaded(loaded: &mut Loaded) {
    if loaded.origins.expanded {
        return;
    }
    if loaded.spec.capacity.is_none() {
        // Nothing to expand: the spec stays as it is (not copied, manifests and all).
        loaded.origins = Origins::expanded();
        return;
    }
    let Expansion { spec, origins, .. } = expand(&loaded.spec);
    loaded.spec = spec;
    loaded.origins = origins;
}

/// A copy of `loaded` with its ladder expanded, or `None` when it has no ladder or is expanded.
pub fn expanded_copy(loaded: &Loaded) -> Option<Loaded> {
    if loaded.origins.expanded || loaded.spec.capacity.is_none() {
        return None;
    }
    let mut copy = loaded.clone();
    expand_loaded(&mut copy);
    Some(copy)
}
