//! Validation against the table of GKE facts ([`crate::model::gke_facts`]): machine types, TPU
//! topologies, locations and GKE versions. A value that breaks a rule Google documents is an
//! error; a well-formed value the table does not know is a warning, because the table ages.

use super::Checker;
use crate::model::gke_facts::{
    self as facts, CHECKED_ON, GkeVersion, Location, LocationProblem, MachineTypeFact, Offering,
    TopologyProblem, TpuGeneration, TpuMachineType, VersionVsFloor,
};
use crate::model::ladder::{accelerator_path, is_priority, rung_accelerator, rung_path};
use crate::spec::types::{NodePool, Spec};
use crate::spec::{Path, suggest};

const TPU_ZONES_PAGE: &str = "https://cloud.google.com/tpu/docs/regions-zones";
const FLEX_START_PAGE: &str = "https://cloud.google.com/kubernetes-engine/docs/concepts/dws";

pub(super) fn check(c: &mut Checker, spec: &Spec) {
    let location = check_location(c, spec);
    check_general_machine_type(
        c,
        &Path::root()
            .key("cluster")
            .key("defaultPool")
            .key("machineType"),
        &spec.cluster.default_pool.machine_type,
    );
    for (i, pool) in spec.node_pools.iter().enumerate() {
        let view = MachineView::of_pool(i, pool);
        check_machine(c, spec, &view, location.as_ref());
    }
    for view in class_rung_views(spec) {
        check_machine(c, spec, &view, location.as_ref());
    }
    check_job_topologies(c, spec);
}

/// What the machine-type, topology and flex-start facts judge: a node pool of the spec, or a rung
/// of the capacity ladder that is a ComputeClass priority. GKE creates such a rung's pools, so
/// there is no pool of gkq's to judge; the rung is judged by the same rules, at its own fields
/// (where its expanded pool would be reported in `mode: kueue` too).
struct MachineView<'a> {
    /// Whose nodes these are, for messages: "node pool `x`", "on-demand rung `x` of ...".
    subject: String,
    machine_type: &'a str,
    tpu_topology: Option<&'a str>,
    flex_start: bool,
    machine_type_at: Path,
    topology_at: Path,
    /// The field that asks for flex-start: a pool's `flexStart`, a rung's `kind`.
    flex_start_at: Path,
}

impl<'a> MachineView<'a> {
    fn of_pool(index: usize, pool: &'a NodePool) -> Self {
        let p = Path::root().key("nodePools").index(index);
        MachineView {
            subject: format!("node pool `{}`", pool.name),
            machine_type: &pool.machine_type,
            tpu_topology: pool.tpu_topology.as_deref(),
            flex_start: pool.flex_start,
            machine_type_at: p.key("machineType"),
            topology_at: p.key("tpuTopology"),
            flex_start_at: p.key("flexStart"),
        }
    }

    /// The field name of the topology as the user wrote it: a pool's `tpuTopology`, a rung's
    /// (or its expanded pool's) `topology`.
    fn topology_key(&self, c: &Checker) -> &'static str {
        let rung = matches!(self.topology_at.0.last(), Some(crate::spec::node::Seg::Key(k)) if k == "topology")
            || c.loaded.origins.is_generated(&self.topology_at);
        if rung { "topology" } else { "tpuTopology" }
    }

    /// How to stop asking for flex-start: a hand-written pool drops the flag, a rung (a
    /// ComputeClass priority, or the pool a rung expanded to) takes another kind.
    fn flex_start_fix(&self, c: &Checker) -> &'static str {
        let rung = matches!(self.flex_start_at.0.last(), Some(crate::spec::node::Seg::Key(k)) if k == "kind")
            || c.loaded.origins.is_generated(&self.flex_start_at);
        if rung {
            "give the rung another `kind` (on-demand, spot or reservation)"
        } else {
            "remove flexStart"
        }
    }
}

/// The rungs of a `mode: computeclass` ladder that are ComputeClass priorities (not the queued
/// rungs, which are node pools of their own and judged as pools).
fn class_rung_views(spec: &Spec) -> Vec<MachineView<'_>> {
    let Some(cap) = &spec.capacity else {
        return Vec::new();
    };
    cap.rungs
        .iter()
        .enumerate()
        .filter(|(_, rung)| is_priority(cap, rung))
        .filter_map(|(ri, rung)| {
            let acc = rung_accelerator(cap, rung)?;
            let at = accelerator_path(ri, rung);
            Some(MachineView {
                subject: format!(
                    "{} rung `{}` of the ComputeClass ladder",
                    rung.kind.as_str(),
                    rung.name
                ),
                machine_type: &acc.machine_type,
                tpu_topology: acc.topology.as_deref(),
                flex_start: rung.kind.is_flex(),
                machine_type_at: at.key("machineType"),
                topology_at: at.key("topology"),
                flex_start_at: rung_path(ri).key("kind"),
            })
        })
        .collect()
}

/// The machine type, TPU topology, TPU offering and flex-start facts of one pool or rung.
fn check_machine(c: &mut Checker, spec: &Spec, view: &MachineView, location: Option<&Location>) {
    match facts::classify_machine_type(view.machine_type) {
        MachineTypeFact::Tpu(generation, machine) => {
            if let Some(topology) = view.tpu_topology {
                check_pool_topology(c, &view.topology_at, generation, machine, topology);
            }
            check_tpu_offering(c, spec, view, generation, location);
        }
        MachineTypeFact::TpuTypeNotInFamily(generation) => {
            let names: Vec<&str> = generation.machine_types.iter().map(|m| m.name).collect();
            let help = match suggest(view.machine_type, names.iter().copied()) {
                Some(s) => format!(
                    "did you mean `{s}`? {} machine types: {}",
                    generation.name,
                    names.join(", ")
                ),
                None => format!("{} machine types: {}", generation.name, names.join(", ")),
            };
            c.error(
                &view.machine_type_at,
                format!(
                    "`{}` is not a {} machine type, though `{}` is that generation's family",
                    view.machine_type, generation.label, generation.machine_family
                ),
                help,
            );
            if let Some(topology) = view.tpu_topology
                && let Err(problem) = generation_topology(generation, topology)
            {
                report_topology(c, &view.topology_at, generation, topology, problem);
            }
        }
        MachineTypeFact::UnknownTpuFamily { chips_per_vm } => {
            c.warning(
                &view.machine_type_at,
                format!(
                    "`{}` looks like a TPU machine type, but its family is not in gkq's table of GKE facts (as of {CHECKED_ON})",
                    view.machine_type
                ),
                format!(
                    "check the name (known TPU machine types: {}); if Google added it since, the table is out of date",
                    known_tpu_machine_types().join(", ")
                ),
            );
            if let Some(topology) = view.tpu_topology {
                check_unknown_family_topology(c, view, topology, chips_per_vm);
            }
        }
        fact @ (MachineTypeFact::KnownSeries
        | MachineTypeFact::UnknownSeries
        | MachineTypeFact::Malformed) => {
            report_general_machine_type(c, &view.machine_type_at, view.machine_type, fact);
            if view.flex_start && fact != MachineTypeFact::Malformed {
                check_version_floor(
                    c,
                    spec,
                    facts::FLEX_START_MIN_GKE,
                    &format!("flex-start nodes ({})", view.subject),
                );
            }
            if view.tpu_topology.is_some() && fact != MachineTypeFact::Malformed {
                c.error(
                    &view.topology_at,
                    format!(
                        "`{}` is set but `{}` is not a TPU machine type",
                        view.topology_key(c),
                        view.machine_type
                    ),
                    format!(
                        "use a TPU machine type such as ct6e-standard-4t, or remove `{}`",
                        view.topology_key(c)
                    ),
                );
            }
        }
    }
}

fn plural(n: u32, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn known_tpu_machine_types() -> Vec<&'static str> {
    facts::TPU_GENERATIONS
        .iter()
        .flat_map(|g| g.machine_types.iter().map(|m| m.name))
        .collect()
}

/// The spec's `location`: an impossible shape is an error, an unknown region a warning.
fn check_location(c: &mut Checker, spec: &Spec) -> Option<Location> {
    let text = spec.location.trim();
    if text.is_empty() {
        return None; // reported as empty by the main validator
    }
    let path = Path::root().key("location");
    let shape_help = "write a region such as us-east5 or a zone such as us-east5-b: <continent>-<direction><number>[-<zone letter>]";
    match facts::parse_location(text) {
        Ok(location) => {
            if !facts::is_known_region(&location.region) {
                c.warning(
                    &path,
                    format!(
                        "region `{}` is not in gkq's table of GKE facts (as of {CHECKED_ON})",
                        location.region
                    ),
                    "check it with `gcloud compute regions list`; if Google opened it since, the table is out of date",
                );
            }
            Some(location)
        }
        Err(LocationProblem::Malformed) => {
            c.error(
                &path,
                format!("`{text}` is not a Google Cloud region or zone"),
                shape_help,
            );
            None
        }
        Err(LocationProblem::UnknownContinent(continent)) => {
            let help = match suggest(&continent, facts::CONTINENTS.iter().copied()) {
                Some(s) => format!(
                    "did you mean `{s}`? Region names start with one of: {}",
                    facts::CONTINENTS.join(", ")
                ),
                None => format!(
                    "region names start with one of: {}",
                    facts::CONTINENTS.join(", ")
                ),
            };
            c.error(
                &path,
                format!("`{text}` is not a Google Cloud location: no region name starts with `{continent}`"),
                help,
            );
            None
        }
        Err(LocationProblem::UnknownDirection(direction)) => {
            c.error(
                &path,
                format!("`{text}` is not a Google Cloud location: no region is named `{direction}` within its continent"),
                format!("region names use one of: {} (as in us-east5, europe-west4)", facts::DIRECTIONS.join(", ")),
            );
            None
        }
    }
}

/// The default pool runs Kueue and the Ray heads: any machine type, but a real one.
fn check_general_machine_type(c: &mut Checker, path: &Path, machine_type: &str) {
    let fact = facts::classify_machine_type(machine_type);
    match fact {
        MachineTypeFact::KnownSeries
        | MachineTypeFact::UnknownSeries
        | MachineTypeFact::Malformed => report_general_machine_type(c, path, machine_type, fact),
        MachineTypeFact::TpuTypeNotInFamily(generation) => c.error(
            path,
            format!(
                "`{machine_type}` is not a {} machine type",
                generation.label
            ),
            "the default pool is a CPU pool: use a machine type such as n2-standard-16",
        ),
        MachineTypeFact::Tpu(..) | MachineTypeFact::UnknownTpuFamily { .. } => {}
    }
}

fn report_general_machine_type(
    c: &mut Checker,
    path: &Path,
    machine_type: &str,
    fact: MachineTypeFact,
) {
    match fact {
        MachineTypeFact::Malformed => c.error(
            path,
            format!("`{machine_type}` is not a Compute Engine machine type name"),
            "write <series>-<class>-<size> in lowercase, such as n2-standard-16, e2-medium or ct6e-standard-4t",
        ),
        MachineTypeFact::UnknownSeries => {
            let series = machine_type.split('-').next().unwrap_or_default();
            let help = match suggest(series, facts::MACHINE_SERIES.iter().copied()) {
                Some(s) => format!("did you mean series `{s}`? If `{series}` is new, the table is out of date"),
                None => "check it with `gcloud compute machine-types list`; if Google added it since, the table is out of date".into(),
            };
            c.warning(
                path,
                format!(
                    "machine series `{series}` (of `{machine_type}`) is not in gkq's table of GKE facts (as of {CHECKED_ON})"
                ),
                help,
            );
        }
        _ => {}
    }
}

fn check_pool_topology(
    c: &mut Checker,
    path: &Path,
    generation: &TpuGeneration,
    machine: &TpuMachineType,
    topology: &str,
) {
    if let Err(problem) = facts::check_topology(generation, machine, topology) {
        match problem {
            TopologyProblem::NotForMachineType { machine_types } => {
                let own = match machine.topologies {
                    facts::Topologies::Listed(list) => list.join(", "),
                    facts::Topologies::Cubes => facts::describe_topologies(generation),
                };
                c.error(
                    path,
                    format!(
                        "`{}` cannot form a {topology} slice: with {} per VM it forms only {own}",
                        machine.name,
                        plural(machine.chips, "chip")
                    ),
                    format!(
                        "use {} for a {topology} slice, or pick one of: {own}",
                        machine_types.join(" or ")
                    ),
                );
            }
            other => report_topology(c, path, generation, topology, other),
        }
    }
}

/// Is `topology` a slice some machine type of the generation forms?
fn generation_topology(generation: &TpuGeneration, topology: &str) -> Result<(), TopologyProblem> {
    let mut first_problem = None;
    for machine in generation.machine_types {
        match facts::check_topology(generation, machine, topology) {
            Ok(()) | Err(TopologyProblem::NotForMachineType { .. }) => return Ok(()),
            Err(problem) => {
                first_problem.get_or_insert(problem);
            }
        }
    }
    first_problem.map_or(Ok(()), Err)
}

fn report_topology(
    c: &mut Checker,
    path: &Path,
    generation: &TpuGeneration,
    topology: &str,
    problem: TopologyProblem,
) {
    let valid = format!(
        "{} topologies: {}",
        generation.label,
        facts::describe_topologies(generation)
    );
    let (message, help) = match problem {
        TopologyProblem::Malformed => (
            format!("TPU topology `{topology}` is not valid"),
            "write dimensions joined by x, such as 2x2, 4x4 or 2x2x4".to_string(),
        ),
        TopologyProblem::WrongDimensions => {
            let dims = generation.layout.dimensions();
            (
                format!(
                    "{} slices are {dims}D, but topology `{topology}` has {} dimensions",
                    generation.label,
                    topology.split('x').count()
                ),
                valid,
            )
        }
        TopologyProblem::LargerThanPod => (
            format!(
                "topology `{topology}` is larger than a whole {} pod ({} chips)",
                generation.label, generation.pod_chips
            ),
            valid,
        ),
        TopologyProblem::Unordered { sorted } => (
            format!(
                "{} topology `{topology}` lists its dimensions out of order",
                generation.label
            ),
            format!("write it as {sorted} (AxBxC with A <= B <= C)"),
        ),
        TopologyProblem::NotOffered | TopologyProblem::NotForMachineType { .. } => (
            format!("{} has no `{topology}` topology", generation.label),
            valid,
        ),
    };
    c.error(path, message, help);
}

/// A TPU family newer than the table: only what its name says can be checked.
fn check_unknown_family_topology(c: &mut Checker, view: &MachineView, topology: &str, per_vm: u32) {
    match facts::topology_chips(topology) {
        None => c.error(
            &view.topology_at,
            format!("TPU topology `{topology}` is not valid"),
            "write dimensions joined by x, such as 2x2, 4x4 or 2x2x4",
        ),
        Some(chips) if chips % per_vm != 0 || chips < per_vm => c.error(
            &view.topology_at,
            format!(
                "TPU topology {topology} has {chips} chips, which {} VMs with {per_vm} chips each cannot form",
                view.machine_type
            ),
            format!("choose a topology whose chip count is a multiple of {per_vm}"),
        ),
        Some(_) => {}
    }
}

/// Where and from which GKE version the TPU generation of a pool or rung (and flex-start) is
/// offered.
fn check_tpu_offering(
    c: &mut Checker,
    spec: &Spec,
    view: &MachineView,
    generation: &TpuGeneration,
    location: Option<&Location>,
) {
    if let Some(location) = location
        && facts::tpu_offered_in(generation, location) == Offering::NotListed
    {
        let zones = generation.zones;
        warn_not_listed(
            c,
            &view.machine_type_at,
            spec,
            generation.label,
            zones,
            TPU_ZONES_PAGE,
        );
    }
    if let Some(floor) = generation.min_gke {
        check_version_floor(
            c,
            spec,
            floor,
            &format!("{} nodes ({})", generation.label, view.subject),
        );
    }
    if !view.flex_start {
        return;
    }
    if facts::flex_start_unsupported(generation) {
        c.error(
            &view.flex_start_at,
            format!("flex-start does not offer {}", generation.label),
            format!(
                "flex-start runs TPU {}; {} or change the machine type",
                view.flex_start_fix(c),
                facts::TPU_GENERATIONS
                    .iter()
                    .filter(|g| g.flex_start_zones.is_some_and(|zones| !zones.is_empty()))
                    .map(|g| g.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        return;
    }
    if let Some(location) = location
        && facts::flex_start_offered_in(generation, location) == Offering::NotListed
    {
        let what = format!("flex-start {}", generation.label);
        let zones = generation.flex_start_zones.unwrap_or_default();
        warn_not_listed(c, &view.flex_start_at, spec, &what, zones, FLEX_START_PAGE);
    }
    check_version_floor(
        c,
        spec,
        facts::FLEX_START_TPU_MIN_GKE,
        &format!("TPU flex-start nodes ({})", view.subject),
    );
}

/// The spec's location is missing from a zone list that covers it.
fn warn_not_listed(
    c: &mut Checker,
    path: &Path,
    spec: &Spec,
    what: &str,
    zones: &[&str],
    page: &str,
) {
    c.warning(
        path,
        format!(
            "`{}` is not listed as offering {what} (as of {CHECKED_ON})",
            spec.location.trim()
        ),
        format!(
            "zones listed for {what}: {}; see {page}, the table may be out of date",
            zones.join(", ")
        ),
    );
}

/// `cluster.version` below `floor` cannot run `what`: an error at the version. A spec without a
/// version (the release channel's default) is not judged; an alias (`1.33`) means its newest
/// patch.
pub(super) fn check_version_floor(c: &mut Checker, spec: &Spec, floor: GkeVersion, what: &str) {
    check_version_floors(c, spec, &[floor], what);
}

/// As [`check_version_floor`], with floors stated per minor release
/// ([`facts::compare_with_floors`]).
pub(super) fn check_version_floors(
    c: &mut Checker,
    spec: &Spec,
    floors: &[GkeVersion],
    what: &str,
) {
    let Some(version) = &spec.cluster.version else {
        return;
    };
    if let Some((VersionVsFloor::Below, floor)) = facts::compare_with_floors(version, floors) {
        let exact = facts::format_version(floor);
        let later = if floors.len() > 1 {
            format!(
                " (in other minors: {})",
                floors
                    .iter()
                    .filter(|f| **f != floor)
                    .map(|f| facts::format_version(*f))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        };
        c.error(
            &Path::root().key("cluster").key("version"),
            format!("GKE {version} is older than {exact}, the first version that runs {what}"),
            format!(
                "set cluster.version to {exact} or later{later} (the alias {}.{} picks its newest patch)",
                floor.0, floor.1
            ),
        );
    }
}

/// A job's TPU topology must be a slice its accelerator's generation offers.
fn check_job_topologies(c: &mut Checker, spec: &Spec) {
    for (ji, job) in spec.jobs.iter().enumerate() {
        let job_path = Path::root().key("jobs").index(ji);
        for group in crate::model::jobs::pod_groups(job) {
            let Some(accelerator) = group.accelerator else {
                continue;
            };
            let (Some(topology), Some(generation)) = (
                &accelerator.topology,
                facts::tpu_generation_by_accelerator(&accelerator.kind),
            ) else {
                continue;
            };
            // Malformed topologies are reported by the job checks.
            if let Err(problem) = generation_topology(generation, topology)
                && problem != TopologyProblem::Malformed
            {
                let path = super::jobs_section::pods_path(&job_path, &group)
                    .key("accelerator")
                    .key("topology");
                report_topology(c, &path, generation, topology, problem);
            }
        }
    }
}
