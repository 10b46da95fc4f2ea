//! Facts about GKE that validation checks a spec against: TPU machine types and the slice
//! topologies each can form, where each TPU generation (and flex-start) is offered, the GKE
//! versions they need, and the machine series and regions gkq knows of.
//!
//! Pure data plus lookups, no I/O. Every table names its upstream source; `docs/gke-facts.md`
//! explains each group. Google adds machine types, zones and versions over time, so a value the
//! table does not know but that has the right shape is only "not known as of [`CHECKED_ON`]"
//! (a warning); a value that breaks a rule Google documents is impossible (an error).

use crate::vocab::labels::TPU_RESOURCE;

/// The day these tables were last compared with their sources.
pub const CHECKED_ON: &str = "2026-11-30";

/// How the chips of a generation's slices are wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A 2D torus: topologies are `AxB`.
    TwoD,
    /// A 3D torus: topologies are `AxBxC`.
    ThreeD,
}

impl Layout {
    pub fn dimensions(self) -> usize {
        match self {
            Layout::TwoD => 2,
            Layout::ThreeD => 3,
        }
    }
}

/// The slice topologies one machine type can form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topologies {
    /// Exactly these.
    Listed(&'static [&'static str]),
    /// The 3D rule of v4, v5p and TPU7x: one of [`SUB_CUBE_SHAPES`], or `AxBxC` with
    /// `A <= B <= C`, each a multiple of 4 (whole 4x4x4 cubes), up to the pod's size.
    Cubes,
}

/// 3D shapes smaller than one 4x4x4 cube that 3D generations offer (docs/gke-facts.md,
/// "Topologies"; <https://cloud.google.com/tpu/docs/v5p>, "Configurations").
pub const SUB_CUBE_SHAPES: [&str; 4] = ["2x2x1", "2x2x2", "2x2x4", "2x4x4"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TpuMachineType {
    pub name: &'static str,
    pub chips: u32,
    /// vCPUs and memory (GB) of one VM, where a Google page states them.
    pub vcpus: Option<u32>,
    pub memory_gb: Option<u32>,
    pub topologies: Topologies,
}

/// A GKE version as `(major, minor, patch, gke build)`: `1.33.0-gke.1712000` is
/// `(1, 33, 0, 1712000)`.
pub type GkeVersion = (u32, u32, u32, u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TpuGeneration {
    /// Google's name for the generation: `v6e`, `v5p`, `tpu7x`.
    pub name: &'static str,
    /// How messages name it: `TPU v6e`, `TPU7x (Ironwood)`.
    pub label: &'static str,
    /// The first segment of its machine type names: `ct6e`, `tpu7x`.
    pub machine_family: &'static str,
    /// Values of the `cloud.google.com/gke-tpu-accelerator` node label.
    pub accelerators: &'static [&'static str],
    pub layout: Layout,
    /// Chips in one pod: no slice is larger.
    pub pod_chips: u32,
    pub machine_types: &'static [TpuMachineType],
    /// Zones listed as offering it, for the regions in [`TPU_ZONE_LISTS_COVER`].
    pub zones: &'static [&'static str],
    /// Zones where GKE offers it with flex-start: `Some(&[])` when Google states flex-start does
    /// not support it, `None` when the sources read say nothing either way.
    pub flex_start_zones: Option<&'static [&'static str]>,
    /// The oldest GKE version whose Standard clusters can run it, where Google states one.
    pub min_gke: Option<GkeVersion>,
    /// The oldest GKE versions whose node auto-provisioning creates node pools of this
    /// generation, one per minor release where Google names several (a version of a later
    /// minor meets them all); empty where the sources read state none. See
    /// [`compare_with_floors`].
    pub nap_min_gke: &'static [GkeVersion],
}

/// A table row; `vcpus` and `memory_gb` only where a Google page states them (docs/gke-facts.md,
/// "Machine types").
const fn machine(
    name: &'static str,
    chips: u32,
    vcpus: Option<u32>,
    memory_gb: Option<u32>,
    topologies: Topologies,
) -> TpuMachineType {
    TpuMachineType {
        name,
        chips,
        vcpus,
        memory_gb,
        topologies,
    }
}

/// Topologies of the 2D generations by VM size (docs/gke-facts.md, "Topologies";
/// <https://cloud.google.com/tpu/docs/v6e> and <https://cloud.google.com/tpu/docs/v5e>,
/// "Supported configurations"; <https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus>).
/// 2x2 fills half a host with one 4-chip VM; 2x4 is one host, as two 4-chip VMs or one 8-chip VM;
/// larger slices are multi-host and only 4-chip VMs form them.
const ONE_CHIP_2D: &[&str] = &["1x1"];
const FOUR_CHIP_2D: &[&str] = &["2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"];
const EIGHT_CHIP_2D: &[&str] = &["2x4"];

/// The TPU generations GKE runs (docs/gke-facts.md, "Machine types", "Zones", "Flex-start",
/// "GKE versions"; node auto-provisioning floors: "The capacity ladder", L2, from "Use node
/// auto-provisioning", <https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-provisioning>,
/// "Requirements": v4 and v5e from 1.27.6, v5p from 1.28.7-gke.1020000 in 1.28 and
/// 1.29.2-gke.1035000 in 1.29, v6e (Trillium) from 1.31.1-gke.1146000; TPU7x not listed). Sources: machine types and per-VM size from
/// <https://cloud.google.com/tpu/docs/v6e>, <https://cloud.google.com/tpu/docs/v5e>,
/// <https://cloud.google.com/tpu/docs/v5p>, <https://cloud.google.com/tpu/docs/v4> and the
/// Compute Engine machine type list; zones from <https://cloud.google.com/tpu/docs/regions-zones>;
/// flex-start from <https://cloud.google.com/kubernetes-engine/docs/concepts/dws>; TPU7x from
/// <https://cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood>.
pub const TPU_GENERATIONS: &[TpuGeneration] = &[
    TpuGeneration {
        name: "v6e",
        label: "TPU v6e",
        machine_family: "ct6e",
        accelerators: &["tpu-v6e-slice"],
        layout: Layout::TwoD,
        pod_chips: 256,
        machine_types: &[
            machine(
                "ct6e-standard-1t",
                1,
                Some(44),
                Some(176),
                Topologies::Listed(ONE_CHIP_2D),
            ),
            machine(
                "ct6e-standard-4t",
                4,
                Some(180),
                Some(720),
                Topologies::Listed(FOUR_CHIP_2D),
            ),
            machine(
                "ct6e-standard-8t",
                8,
                Some(180),
                Some(1440),
                Topologies::Listed(EIGHT_CHIP_2D),
            ),
        ],
        zones: &[
            "us-central1-b",
            "us-east1-d",
            "us-east4-a",
            "us-east4-b",
            "us-east5-a",
            "us-east5-b",
            "us-east5-c",
            "us-west1-c",
        ],
        flex_start_zones: Some(&["asia-northeast1-b", "us-east5-a", "us-east5-b"]),
        min_gke: None,
        nap_min_gke: &[(1, 31, 1, 1_146_000)],
    },
    TpuGeneration {
        name: "v5e",
        label: "TPU v5e",
        machine_family: "ct5lp",
        accelerators: &["tpu-v5-lite-podslice"],
        layout: Layout::TwoD,
        pod_chips: 256,
        machine_types: &[
            machine(
                "ct5lp-hightpu-1t",
                1,
                Some(24),
                Some(48),
                Topologies::Listed(ONE_CHIP_2D),
            ),
            machine(
                "ct5lp-hightpu-4t",
                4,
                Some(112),
                Some(192),
                Topologies::Listed(FOUR_CHIP_2D),
            ),
            machine(
                "ct5lp-hightpu-8t",
                8,
                Some(224),
                Some(384),
                Topologies::Listed(EIGHT_CHIP_2D),
            ),
        ],
        zones: &[
            "us-central1-a",
            "us-east5-a",
            "us-east5-b",
            "us-east5-c",
            "us-south1-a",
            "us-west1-c",
            "us-west4-a",
        ],
        flex_start_zones: Some(&["us-west4-a"]),
        min_gke: None,
        nap_min_gke: &[(1, 27, 6, 0)],
    },
    TpuGeneration {
        name: "v5p",
        label: "TPU v5p",
        machine_family: "ct5p",
        accelerators: &["tpu-v5p-slice"],
        layout: Layout::ThreeD,
        pod_chips: 8960,
        machine_types: &[machine(
            "ct5p-hightpu-4t",
            4,
            Some(208),
            Some(448),
            Topologies::Cubes,
        )],
        zones: &[
            "us-central1-a",
            "us-east5-a",
            "us-east5-b",
            "us-east5-c",
            "us-south1-a",
        ],
        flex_start_zones: Some(&["us-east5-a"]),
        min_gke: None,
        nap_min_gke: &[(1, 28, 7, 1_020_000), (1, 29, 2, 1_035_000)],
    },
    TpuGeneration {
        name: "v4",
        label: "TPU v4",
        machine_family: "ct4p",
        accelerators: &["tpu-v4-podslice"],
        layout: Layout::ThreeD,
        pod_chips: 4096,
        machine_types: &[machine("ct4p-hightpu-4t", 4, None, None, Topologies::Cubes)],
        zones: &["us-central2-b"],
        // "TPU v3 and v4 are not supported" by flex-start.
        flex_start_zones: Some(&[]),
        min_gke: None,
        nap_min_gke: &[(1, 27, 6, 0)],
    },
    TpuGeneration {
        name: "tpu7x",
        label: "TPU7x (Ironwood)",
        machine_family: "tpu7x",
        accelerators: &["tpu7x"],
        layout: Layout::ThreeD,
        pod_chips: 9216,
        machine_types: &[
            machine(
                "tpu7x-standard-1t",
                1,
                None,
                None,
                Topologies::Listed(&["1x1x1"]),
            ),
            machine("tpu7x-standard-4t", 4, None, None, Topologies::Cubes),
        ],
        zones: &[],
        // Google-authored tooling added TPU7x flex-start in 2026, but no GKE page read lists it.
        flex_start_zones: None,
        min_gke: Some((1, 34, 0, 2_201_000)),
        nap_min_gke: &[],
    },
];

/// Region prefixes whose TPU zones were read in full from the TPU regions page: outside them the
/// zone lists above are incomplete, so a zone missing from them says nothing.
pub const TPU_ZONE_LISTS_COVER: &[&str] = &["us-"];

/// Flex-start nodes for TPUs need this GKE version or later
/// (<https://cloud.google.com/kubernetes-engine/docs/concepts/dws>, "Requirements").
pub const FLEX_START_TPU_MIN_GKE: GkeVersion = (1, 33, 0, 1_712_000);
/// Flex-start for GPUs (and so for any non-TPU pool) needs this GKE version or later (same page).
pub const FLEX_START_MIN_GKE: GkeVersion = (1, 32, 2, 1_652_000);

/// A flex-start node (VMs or queued provisioning) runs at most seven days; `maxRunDuration`
/// defaults to that (docs/gke-facts.md, "The capacity ladder", L3;
/// <https://cloud.google.com/kubernetes-engine/docs/concepts/dws>).
pub use crate::placement::dws::FLEX_START_MAX_RUN_SECONDS;
/// Custom ComputeClasses need this GKE version or later (docs/gke-facts.md, L1;
/// <https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes>).
pub const COMPUTE_CLASS_MIN_GKE: GkeVersion = (1, 30, 3, 1_451_000);
/// From this version a ComputeClass with `nodePoolAutoCreation.enabled: true` gets node pools
/// without cluster-level node auto-provisioning; below it the cluster needs auto-provisioning
/// on. **Unconfirmed** (docs/gke-facts.md, L2): stated only in Google's agent skills for GKE
/// (<https://github.com/google/skills>, `skills/cloud/gke-compute-classes/SKILL.md`), not on a
/// reference page ("About node pool auto-creation",
/// <https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning>, names no
/// version), so it is judged only by a warning that names this source.
pub const CC_AUTO_CREATION_WITHOUT_NAP_MIN_GKE: GkeVersion = (1, 33, 3, 1_136_000);
/// Where [`CC_AUTO_CREATION_WITHOUT_NAP_MIN_GKE`] and [`COMPUTE_CLASS_MAX_PRIORITIES`] come from.
pub const GKE_SKILLS_SOURCE: &str = "Google's agent skills for GKE (github.com/google/skills, gke-compute-classes), not a GKE reference page";
/// About this many priorities in one ComputeClass: beyond it, priorities found unobtainable
/// leave their five-minute cooldown before GKE reaches the end of the list, and scale-up loops.
/// **Unconfirmed** (docs/gke-facts.md, L1): Google's agent skills for GKE
/// (`references/compute-class-prioritization.md`, "Max ~10 entries";
/// `references/compute-class-debug.md`, "List Loops / Backoff"); no reference page read states a
/// limit, so more is only a warning.
pub const COMPUTE_CLASS_MAX_PRIORITIES: usize = 10;

/// vCPUs and memory (GB) of the non-TPU machine types gkq sizes nodes for (docs/gke-facts.md,
/// "Machine types"; <https://cloud.google.com/compute/docs/general-purpose-machines>, N2: 4 GB
/// per vCPU for `standard`).
pub const GENERAL_MACHINE_TYPES: &[(&str, u32, u32)] = &[
    ("n2-standard-8", 8, 32),
    ("n2-standard-16", 16, 64),
    ("n2-standard-32", 32, 128),
];

/// One node's shape: what the quota-against-capacity check, the job timeline's warnings and
/// the local target's simulated nodes size with. Read from the one table
/// ([`TPU_GENERATIONS`], [`GENERAL_MACHINE_TYPES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineShape {
    pub name: &'static str,
    pub vcpus: u32,
    /// Google's tables state memory in GB; gkq counts those as GiB (2^30 bytes)
    /// (docs/gke-facts.md, "Machine types").
    pub memory_gib: u32,
    /// Extended resource and chips per node, for TPU machines.
    pub accelerator: Option<(&'static str, u32)>,
    /// `cloud.google.com/gke-tpu-accelerator` value, for TPU machines.
    pub tpu_accelerator: Option<&'static str>,
}

/// The shape of a machine type the table knows with its vCPUs and memory; `None` for one it
/// does not know, or whose vCPUs and memory no source read states (`ct4p-hightpu-4t`).
pub fn machine_shape(name: &str) -> Option<MachineShape> {
    let tpu = TPU_GENERATIONS.iter().find_map(|generation| {
        let machine = generation.machine_types.iter().find(|m| m.name == name)?;
        Some(MachineShape {
            name: machine.name,
            vcpus: machine.vcpus?,
            memory_gib: machine.memory_gb?,
            accelerator: Some((TPU_RESOURCE, machine.chips)),
            tpu_accelerator: generation.accelerators.first().copied(),
        })
    });
    tpu.or_else(|| {
        let &(name, vcpus, memory_gib) = GENERAL_MACHINE_TYPES.iter().find(|m| m.0 == name)?;
        Some(MachineShape {
            name,
            vcpus,
            memory_gib,
            accelerator: None,
            tpu_accelerator: None,
        })
    })
}

/// Compute Engine machine series a GKE node pool may use besides TPUs: general purpose, compute,
/// memory and accelerator optimized (docs/gke-facts.md, "Other machine series";
/// <https://cloud.google.com/compute/docs/machine-resource>). Only the series is checked, not the
/// size: `n2-standard-8` is plausible because `n2` is known.
pub const MACHINE_SERIES: &[&str] = &[
    "a2", "a3", "a4", "a4x", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d", "e2", "f1", "g1", "g2",
    "h3", "m1", "m2", "m3", "n1", "n2", "n2d", "n4", "t2a", "t2d", "z3",
];

/// The first segment of Google Cloud region names (docs/gke-facts.md, "Locations";
/// <https://cloud.google.com/compute/docs/regions-zones>). A location starting with anything else
/// is not a Google Cloud location.
pub const CONTINENTS: &[&str] = &[
    "africa",
    "asia",
    "australia",
    "europe",
    "me",
    "northamerica",
    "southamerica",
    "us",
];

/// The compass part of region names (`us-east5`, `europe-west4`, `asia-southeast1`).
pub const DIRECTIONS: &[&str] = &[
    "central",
    "east",
    "north",
    "northeast",
    "northwest",
    "south",
    "southeast",
    "southwest",
    "west",
];

/// Regions confirmed on Google's region and TPU pages (docs/gke-facts.md, "Locations"). Google
/// opens regions over time: a well-formed region missing here is a warning.
pub const KNOWN_REGIONS: &[&str] = &[
    "asia-east1",
    "asia-east2",
    "asia-northeast1",
    "asia-south1",
    "asia-southeast1",
    "australia-southeast1",
    "europe-north1",
    "europe-west1",
    "europe-west2",
    "europe-west3",
    "europe-west4",
    "northamerica-northeast1",
    "southamerica-east1",
    "us-central1",
    "us-central2",
    "us-east1",
    "us-east4",
    "us-east5",
    "us-south1",
    "us-west1",
    "us-west4",
];

pub fn tpu_generation_by_family(family: &str) -> Option<&'static TpuGeneration> {
    TPU_GENERATIONS.iter().find(|g| g.machine_family == family)
}

pub fn tpu_generation_by_accelerator(accelerator: &str) -> Option<&'static TpuGeneration> {
    TPU_GENERATIONS
        .iter()
        .find(|g| g.accelerators.contains(&accelerator))
}

/// Every `cloud.google.com/gke-tpu-accelerator` value the table knows, plus `tpu-v5-lite-device`
/// (v5e's serving machines `ct5l-*`, which gkq's table does not otherwise describe).
pub fn tpu_accelerators() -> Vec<&'static str> {
    let mut all: Vec<&str> = TPU_GENERATIONS
        .iter()
        .flat_map(|g| g.accelerators.iter().copied())
        .collect();
    all.push("tpu-v5-lite-device");
    all
}

/// What the table says about a machine type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MachineTypeFact {
    /// A TPU machine type in the table.
    Tpu(&'static TpuGeneration, &'static TpuMachineType),
    /// The family is a known TPU generation's, but it has no such type (`ct6e-standard-16t`).
    TpuTypeNotInFamily(&'static TpuGeneration),
    /// Shaped like a TPU machine type (`ct<gen>-<class>-<n>t`) of a family the table lacks.
    UnknownTpuFamily { chips_per_vm: u32 },
    /// A machine series the table knows (`n2-standard-8`, `a3-highgpu-8g`).
    KnownSeries,
    /// Shaped like a machine type (`<series>-<rest>`) of a series the table lacks.
    UnknownSeries,
    /// Not the shape of any Compute Engine machine type.
    Malformed,
}

/// TPU families are the `ct...` and `tpu...` names that start a machine type with a digit after
/// the prefix (`ct6e`, `ct5lp`, `tpu7x`).
fn is_tpu_family(family: &str) -> bool {
    ["ct", "tpu"].iter().any(|prefix| {
        family
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    })
}

fn is_lower_alnum(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// The `<n>` of a trailing `-<n>t`.
fn trailing_chip_count(name: &str) -> Option<u32> {
    let last = name.rsplit('-').next()?;
    last.strip_suffix('t')?.parse().ok().filter(|n| *n > 0)
}

pub fn classify_machine_type(name: &str) -> MachineTypeFact {
    let segments: Vec<&str> = name.split('-').collect();
    // `<series>-<class>[-<size>...]`: lowercase letters and digits between single dashes, the
    // series a letter run then a digit (`n2`, `c4a`), or `f1`/`g1`-style micro names.
    let shaped = segments.len() >= 2
        && segments.iter().all(|s| is_lower_alnum(s))
        && segments[0].starts_with(|c: char| c.is_ascii_lowercase())
        && segments[0].contains(|c: char| c.is_ascii_digit());
    if !shaped {
        return MachineTypeFact::Malformed;
    }
    let family = segments[0];
    if let Some(generation) = tpu_generation_by_family(family) {
        return match generation.machine_types.iter().find(|m| m.name == name) {
            Some(machine) => MachineTypeFact::Tpu(generation, machine),
            None => MachineTypeFact::TpuTypeNotInFamily(generation),
        };
    }
    if is_tpu_family(family) {
        return match trailing_chip_count(name) {
            Some(chips_per_vm) if segments.len() == 3 => {
                MachineTypeFact::UnknownTpuFamily { chips_per_vm }
            }
            _ => MachineTypeFact::Malformed,
        };
    }
    if MACHINE_SERIES.contains(&family) {
        MachineTypeFact::KnownSeries
    } else {
        MachineTypeFact::UnknownSeries
    }
}

/// TPU chips per VM of a machine type: from the table when it knows the type, otherwise from a
/// TPU-shaped name's `-<n>t` suffix (a family newer than the table).
pub fn tpu_chips_per_vm(machine_type: &str) -> Option<u32> {
    match classify_machine_type(machine_type) {
        MachineTypeFact::Tpu(_, machine) => Some(machine.chips),
        MachineTypeFact::UnknownTpuFamily { chips_per_vm } => Some(chips_per_vm),
        _ => None,
    }
}

/// A topology's dimensions: `4x4` is `[4, 4]`; `None` unless positive integers joined by `x`.
pub fn topology_dimensions(topology: &str) -> Option<Vec<u32>> {
    topology
        .split('x')
        .map(|d| d.parse::<u32>().ok().filter(|n| *n > 0))
        .collect()
}

/// Chips in a TPU topology: `4x4` = 16, `2x2x4` = 16.
pub fn topology_chips(topology: &str) -> Option<u32> {
    topology_dimensions(topology)?
        .into_iter()
        .try_fold(1u32, |acc, d| acc.checked_mul(d))
}

/// Why a topology cannot be a slice of a machine type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyProblem {
    /// Not dimensions joined by `x`.
    Malformed,
    /// 2D on a 3D generation or the reverse.
    WrongDimensions,
    /// Larger than the generation's pod.
    LargerThanPod,
    /// 3D dimensions out of ascending order; `sorted` is the same shape in order.
    Unordered { sorted: String },
    /// Not a shape the generation offers (`4x4x6`, `3x3`).
    NotOffered,
    /// The generation offers it, but this machine type cannot form it; `machine_types` can.
    NotForMachineType { machine_types: Vec<&'static str> },
}

/// The shapes the rule [`Topologies::Cubes`] allows: a sub-cube shape, or whole cubes ascending.
fn fits_cubes(dims: &[u32]) -> Result<(), TopologyProblem> {
    let text = join_dimensions(dims);
    if SUB_CUBE_SHAPES.contains(&text.as_str()) {
        return Ok(());
    }
    if !dims.iter().all(|d| d % 4 == 0) {
        return Err(TopologyProblem::NotOffered);
    }
    if !dims.is_sorted() {
        let mut sorted = dims.to_vec();
        sorted.sort_unstable();
        return Err(TopologyProblem::Unordered {
            sorted: join_dimensions(&sorted),
        });
    }
    Ok(())
}

fn join_dimensions(dims: &[u32]) -> String {
    dims.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

fn machine_fits(machine: &TpuMachineType, topology: &str, dims: &[u32]) -> bool {
    match machine.topologies {
        Topologies::Listed(list) => list.contains(&topology),
        Topologies::Cubes => fits_cubes(dims).is_ok(),
    }
}

/// Can `machine` of `generation` form a slice of `topology`?
pub fn check_topology(
    generation: &TpuGeneration,
    machine: &TpuMachineType,
    topology: &str,
) -> Result<(), TopologyProblem> {
    let dims = topology_dimensions(topology).ok_or(TopologyProblem::Malformed)?;
    if dims.len() != generation.layout.dimensions() {
        return Err(TopologyProblem::WrongDimensions);
    }
    if topology_chips(topology).is_none_or(|chips| chips > generation.pod_chips) {
        return Err(TopologyProblem::LargerThanPod);
    }
    if machine_fits(machine, topology, &dims) {
        return Ok(());
    }
    let machine_types: Vec<&str> = generation
        .machine_types
        .iter()
        .filter(|m| machine_fits(m, topology, &dims))
        .map(|m| m.name)
        .collect();
    if !machine_types.is_empty() {
        return Err(TopologyProblem::NotForMachineType { machine_types });
    }
    match machine.topologies {
        Topologies::Cubes => fits_cubes(&dims),
        Topologies::Listed(_) => Err(TopologyProblem::NotOffered),
    }
}

/// The topologies a generation offers, written out where they are a list (2D generations), and
/// as the rule where they are not.
pub fn describe_topologies(generation: &TpuGeneration) -> String {
    let mut listed: Vec<&str> = Vec::new();
    let mut cubes = false;
    for machine in generation.machine_types {
        match machine.topologies {
            Topologies::Listed(list) => {
                for t in list {
                    if !listed.contains(t) {
                        listed.push(t);
                    }
                }
            }
            Topologies::Cubes => cubes = true,
        }
    }
    let mut parts = vec![listed.join(", ")];
    if cubes {
        parts.push(format!(
            "{} or AxBxC with A <= B <= C, each a multiple of 4, up to {} chips",
            SUB_CUBE_SHAPES.join(", "),
            generation.pod_chips
        ));
    }
    parts.retain(|p| !p.is_empty());
    parts.join("; ")
}

/// A spec `location`: a region (`us-east5`) or a zone (`us-east5-b`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub region: String,
    pub zone: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationProblem {
    /// Not `<continent>-<direction><n>[-<letter>]`.
    Malformed,
    /// Well-formed, but the first segment is no Google Cloud continent.
    UnknownContinent(String),
    /// Well-formed, but the compass part is not one Google uses.
    UnknownDirection(String),
}

pub fn parse_location(text: &str) -> Result<Location, LocationProblem> {
    let parts: Vec<&str> = text.split('-').collect();
    let (continent, area, zone_letter) = match parts.as_slice() {
        [c, a] => (*c, *a, None),
        [c, a, z] => (*c, *a, Some(*z)),
        _ => return Err(LocationProblem::Malformed),
    };
    let direction = area.trim_end_matches(|c: char| c.is_ascii_digit());
    let number = &area[direction.len()..];
    let letters = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase());
    if !letters(continent)
        || !letters(direction)
        || number.is_empty()
        || number.starts_with('0')
        || zone_letter.is_some_and(|z| z.len() != 1 || !letters(z))
    {
        return Err(LocationProblem::Malformed);
    }
    if !CONTINENTS.contains(&continent) {
        return Err(LocationProblem::UnknownContinent(continent.into()));
    }
    if !DIRECTIONS.contains(&direction) {
        return Err(LocationProblem::UnknownDirection(direction.into()));
    }
    let region = format!("{continent}-{area}");
    Ok(Location {
        zone: zone_letter.map(|z| format!("{region}-{z}")),
        region,
    })
}

pub fn is_known_region(region: &str) -> bool {
    KNOWN_REGIONS.contains(&region)
}

/// Whether a list of zones offers something at a location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offering {
    Listed,
    NotListed,
    /// The table's zone list does not cover this location, so it cannot tell.
    Unknown,
}

/// Is the location (a zone, or any zone of a region) in `zones`?
fn offered(zones: &[&str], location: &Location) -> bool {
    match &location.zone {
        Some(zone) => zones.contains(&zone.as_str()),
        None => zones.iter().any(|z| {
            z.rsplit_once('-')
                .is_some_and(|(r, _)| r == location.region)
        }),
    }
}

pub fn tpu_offered_in(generation: &TpuGeneration, location: &Location) -> Offering {
    let covered = TPU_ZONE_LISTS_COVER
        .iter()
        .any(|prefix| location.region.starts_with(prefix));
    if generation.zones.is_empty() || !covered {
        Offering::Unknown
    } else if offered(generation.zones, location) {
        Offering::Listed
    } else {
        Offering::NotListed
    }
}

/// The flex-start list is the whole list GKE documents, so it covers every location.
pub fn flex_start_offered_in(generation: &TpuGeneration, location: &Location) -> Offering {
    match generation.flex_start_zones {
        None => Offering::Unknown,
        Some(zones) if offered(zones, location) => Offering::Listed,
        Some(_) => Offering::NotListed,
    }
}

/// Google states that flex-start does not support this generation at all.
pub fn flex_start_unsupported(generation: &TpuGeneration) -> bool {
    generation.flex_start_zones == Some(&[])
}

/// The node counts GKE accepts for a node pool whose one TPU slice spans `slice_hosts` VMs.
///
/// A multi-host slice (more than one VM) is one atomic unit: GKE creates, repairs and scales all
/// of its VMs together, nodes cannot be added to the pool, and another slice needs a node pool
/// of its own. Its pool therefore holds zero nodes or the whole slice, and an autoscaled pool's
/// maximum is exactly the slice, with or without flex-start and queued provisioning
/// (docs/gke-facts.md, "Multi-host slice node pools"). A single-host slice (one VM) is an
/// ordinary node, and a pool of them may hold any number.
pub fn multi_host_pool_nodes(slice_hosts: u32) -> Option<MultiHostPoolNodes> {
    (slice_hosts > 1).then_some(MultiHostPoolNodes { slice_hosts })
}

/// What a multi-host TPU slice node pool may be sized to (see [`multi_host_pool_nodes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiHostPoolNodes {
    /// VMs (nodes) of the one slice.
    pub slice_hosts: u32,
}

impl MultiHostPoolNodes {
    /// A node count the pool may have, or start or bottom out at: none, or the whole slice.
    pub fn accepts_count(self, nodes: u32) -> bool {
        nodes == 0 || nodes == self.slice_hosts
    }

    /// The autoscaling maximum GKE accepts: the slice, no more and no less.
    pub fn accepts_max(self, max: u32) -> bool {
        max == self.slice_hosts
    }
}

/// How a spec's `cluster.version` compares with a floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionVsFloor {
    /// At or above it, or an alias (`1.34`, `latest`) whose newest patch is.
    Meets,
    Below,
    /// Not a version gkq can compare.
    Unknown,
}

/// `1.34` (newest patch of 1.34), `1.34.1`, `1.34.1-gke.1829001`, or `latest`.
pub fn compare_with_floor(version: &str, floor: GkeVersion) -> VersionVsFloor {
    if version == "latest" {
        return VersionVsFloor::Meets;
    }
    let (release, build) = match version.split_once("-gke.") {
        Some((r, b)) => match b.parse::<u32>() {
            Ok(b) => (r, Some(b)),
            Err(_) => return VersionVsFloor::Unknown,
        },
        None => (version, None),
    };
    let numbers: Option<Vec<u32>> = release.split('.').map(|p| p.parse().ok()).collect();
    let Some(numbers) = numbers else {
        return VersionVsFloor::Unknown;
    };
    let (floor_major, floor_minor, floor_patch, floor_build) = floor;
    let below = match numbers.as_slice() {
        // An alias picks the newest patch of its minor, which any floor in that minor is below.
        [major, minor] => (*major, *minor) < (floor_major, floor_minor),
        [major, minor, patch] => (*major, *minor, *patch) < (floor_major, floor_minor, floor_patch),
        _ => return VersionVsFloor::Unknown,
    };
    let below = below
        || (numbers.len() == 3
            && (numbers[0], numbers[1], numbers[2]) == (floor_major, floor_minor, floor_patch)
            && build.is_some_and(|b| b < floor_build));
    if below {
        VersionVsFloor::Below
    } else {
        VersionVsFloor::Meets
    }
}

/// Compares a version with floors stated per minor release (`1.28.7-gke.1020000` in 1.28,
/// `1.29.2-gke.1035000` in 1.29): the floor that counts is the last one whose minor the version
/// reaches, so 1.30 meets both and 1.29.1 is below the second. Returns that floor with the
/// verdict; `None` when there are no floors.
pub fn compare_with_floors(
    version: &str,
    floors: &[GkeVersion],
) -> Option<(VersionVsFloor, GkeVersion)> {
    let first = *floors.first()?;
    let reached = floors
        .iter()
        .rev()
        .find(|f| compare_with_floor(version, (f.0, f.1, 0, 0)) == VersionVsFloor::Meets)
        .copied();
    let floor = reached.unwrap_or(first);
    Some((compare_with_floor(version, floor), floor))
}

pub fn format_version(v: GkeVersion) -> String {
    format!("{}.{}.{}-gke.{}", v.0, v.1, v.2, v.3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6e() -> &'static TpuGeneration {
        tpu_generation_by_family("ct6e").unwrap()
    }

    fn table_machine(name: &str) -> (&'static TpuGeneration, &'static TpuMachineType) {
        match classify_machine_type(name) {
            MachineTypeFact::Tpu(g, m) => (g, m),
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn every_table_machine_type_belongs_to_its_family_and_states_its_chips() {
        for g in TPU_GENERATIONS {
            for m in g.machine_types {
                assert_eq!(m.name.split('-').next(), Some(g.machine_family));
                assert_eq!(trailing_chip_count(m.name), Some(m.chips), "{}", m.name);
            }
        }
    }

    #[test]
    fn machine_types_are_classified() {
        assert_eq!(table_machine("ct6e-standard-4t").1.chips, 4);
        assert_eq!(
            classify_machine_type("ct6e-standard-16t"),
            MachineTypeFact::TpuTypeNotInFamily(v6e())
        );
        assert_eq!(
            classify_machine_type("ct6e-highmem-4t"),
            MachineTypeFact::TpuTypeNotInFamily(v6e())
        );
        assert_eq!(
            classify_machine_type("ct9z-standard-4t"),
            MachineTypeFact::UnknownTpuFamily { chips_per_vm: 4 }
        );
        assert_eq!(
            classify_machine_type("n2-standard-8"),
            MachineTypeFact::KnownSeries
        );
        assert_eq!(
            classify_machine_type("e2-medium"),
            MachineTypeFact::KnownSeries
        );
        assert_eq!(
            classify_machine_type("x9-standard-8"),
            MachineTypeFact::UnknownSeries
        );
        for bad in [
            "",
            "n2",
            "N2-standard-8",
            "n2 standard 8",
            "n2--8",
            "standard-8",
            "ct9z-4t",
        ] {
            assert_eq!(
                classify_machine_type(bad),
                MachineTypeFact::Malformed,
                "{bad}"
            );
        }
    }

    #[test]
    fn chips_per_vm_come_from_the_table_or_an_unknown_tpu_name() {
        assert_eq!(tpu_chips_per_vm("ct5lp-hightpu-8t"), Some(8));
        assert_eq!(tpu_chips_per_vm("ct9z-standard-2t"), Some(2));
        assert_eq!(tpu_chips_per_vm("ct6e-standard-16t"), None);
        assert_eq!(tpu_chips_per_vm("n2-standard-16"), None);
    }

    fn expect_topologies(
        generation: &TpuGeneration,
        cases: &[(&TpuMachineType, &str, Result<(), TopologyProblem>)],
    ) {
        for (machine, topology, want) in cases {
            assert_eq!(
                &check_topology(generation, machine, topology),
                want,
                "{} {topology}",
                machine.name
            );
        }
    }

    #[test]
    fn topologies_of_2d_generations() {
        use TopologyProblem::*;
        let (g, m4) = table_machine("ct6e-standard-4t");
        let (_, m8) = table_machine("ct6e-standard-8t");
        let only_4t = || NotForMachineType {
            machine_types: vec!["ct6e-standard-4t"],
        };
        expect_topologies(
            g,
            &[
                (m4, "4x4", Ok(())),
                (m8, "2x4", Ok(())),
                (m4, "2x2x4", Err(WrongDimensions)),
                (m8, "4x4", Err(only_4t())),
                (m4, "3x3", Err(NotOffered)),
                (m4, "4x2", Err(NotOffered)),
                (m4, "32x32", Err(LargerThanPod)),
                (m4, "4xx", Err(Malformed)),
            ],
        );
    }

    #[test]
    fn topologies_of_3d_generations() {
        use TopologyProblem::*;
        let (g, m) = table_machine("ct5p-hightpu-4t");
        let fits = [
            "2x2x1", "2x2x2", "2x4x4", "4x4x4", "4x4x8", "8x16x16", "16x16x24",
        ];
        let fitting: Vec<_> = fits.iter().map(|t| (m, *t, Ok(()))).collect();
        expect_topologies(g, &fitting);
        let unordered = Unordered {
            sorted: "4x4x8".into(),
        };
        expect_topologies(
            g,
            &[
                (m, "4x4", Err(WrongDimensions)),
                (m, "4x4x6", Err(NotOffered)),
                (m, "8x4x4", Err(unordered)),
                (m, "32x32x32", Err(LargerThanPod)),
            ],
        );
        let (g7, one) = table_machine("tpu7x-standard-1t");
        let only_4t = NotForMachineType {
            machine_types: vec!["tpu7x-standard-4t"],
        };
        expect_topologies(g7, &[(one, "1x1x1", Ok(())), (one, "2x2x1", Err(only_4t))]);
    }

    #[test]
    fn locations() {
        assert_eq!(
            parse_location("us-east5-b"),
            Ok(Location {
                region: "us-east5".into(),
                zone: Some("us-east5-b".into())
            })
        );
        assert_eq!(parse_location("europe-west4").unwrap().zone, None);
        assert_eq!(
            parse_location("mars-central1-z"),
            Err(LocationProblem::UnknownContinent("mars".into()))
        );
        assert_eq!(
            parse_location("us-middle1-a"),
            Err(LocationProblem::UnknownDirection("middle".into()))
        );
        for bad in [
            "",
            "us",
            "us-east",
            "us-east5-bb",
            "US-east5-b",
            "us-east05-b",
            "us-east5-b-c",
            "useast5b",
        ] {
            assert_eq!(
                parse_location(bad),
                Err(LocationProblem::Malformed),
                "{bad}"
            );
        }
        assert!(is_known_region("us-east5"));
        assert!(!is_known_region("us-east9"));
    }

    #[test]
    fn where_tpus_are_offered() {
        use Offering::*;
        type Lookup = fn(&TpuGeneration, &Location) -> Offering;
        let cases: [(Lookup, &str, Offering); 6] = [
            (tpu_offered_in, "us-east5-b", Listed),
            (tpu_offered_in, "us-east5", Listed),
            (tpu_offered_in, "us-west4-a", NotListed),
            (tpu_offered_in, "europe-west4-a", Unknown),
            (flex_start_offered_in, "us-east5-b", Listed),
            (flex_start_offered_in, "us-central1-b", NotListed),
        ];
        for (offering, location, want) in cases {
            let at = parse_location(location).unwrap();
            assert_eq!(offering(v6e(), &at), want, "{location}");
        }
    }

    #[test]
    fn a_multi_host_pool_holds_none_or_its_one_slice() {
        assert_eq!(
            multi_host_pool_nodes(1),
            None,
            "a single-host slice is an ordinary node"
        );
        let pool = multi_host_pool_nodes(4).expect("4 VMs are a multi-host slice");
        assert!(pool.accepts_count(0) && pool.accepts_count(4));
        assert!(!pool.accepts_count(2) && !pool.accepts_count(8));
        assert!(pool.accepts_max(4));
        assert!(
            !pool.accepts_max(8),
            "a second slice needs a node pool of its own"
        );
        assert!(!pool.accepts_max(2));
    }

    #[test]
    fn versions_against_floors() {
        use VersionVsFloor::*;
        let floor = FLEX_START_TPU_MIN_GKE;
        let cases = [
            ("1.34", Meets),
            ("1.33", Meets),
            ("latest", Meets),
            ("1.32", Below),
            ("1.33.0-gke.1000000", Below),
            ("1.33.0-gke.1712000", Meets),
            ("1.33.1", Meets),
            ("1.x", Unknown),
        ];
        for (version, want) in cases {
            assert_eq!(compare_with_floor(version, floor), want, "{version}");
        }
        assert_eq!(format_version(floor), "1.33.0-gke.1712000");
    }

    #[test]
    fn versions_against_floors_per_minor() {
        use VersionVsFloor::*;
        let v5p = tpu_generation_by_family("ct5p").unwrap().nap_min_gke;
        let cases = [
            ("1.27", Below),
            ("1.28.7-gke.1019999", Below),
            ("1.28.7-gke.1020000", Meets),
            ("1.28", Meets),
            ("1.29.1", Below),
            ("1.29.2-gke.1034000", Below),
            ("1.29.2-gke.1035000", Meets),
            ("1.29", Meets),
            ("1.30.0", Meets),
            ("latest", Meets),
            ("1.x", Unknown),
        ];
        for (version, want) in cases {
            let got = compare_with_floors(version, v5p).map(|(v, _)| v);
            assert_eq!(got, Some(want), "{version}");
        }
        assert_eq!(compare_with_floors("1.29.1", v5p).unwrap().1, v5p[1]);
        assert_eq!(compare_with_floors("1.30", &[]), None);
        for g in TPU_GENERATIONS {
            let sorted = g
                .nap_min_gke
                .windows(2)
                .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1));
            assert!(sorted, "{}: one floor per minor, in order", g.name);
        }
    }
}
