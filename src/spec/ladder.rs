//! The `capacity:` section: an ordered ladder of capacity rungs (a specific reservation,
//! on-demand, flex-start VMs, flex-start with queued provisioning, Spot) for the accelerator
//! jobs of one ClusterQueue. `model::ladder` expands it into node pools, flavors and quotas
//! (`mode: kueue`) or a GKE ComputeClass (`mode: computeclass`); docs/design/capacity-ladder.md.
//!
//! Also [`Origins`]: where each entry the expansion generated came from in the file, so that a
//! diagnostic about a generated node pool points at its rung.

use super::node::Path;
pub use super::types::{
    Capacity, CapacityMode, ComputeClassSettings, Rung, RungAccelerator, RungGpu, RungKind,
    RungReservation,
};

/// Where generated entries came from: pairs of (generated path, spec path). A diagnostic at a
/// path under a generated entry is shown at the entry's source, the most specific pair winning.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Origins {
    /// True once the ladder was expanded into the spec (expansion runs once).
    pub expanded: bool,
    pairs: Vec<(Path, Path)>,
}

impl Origins {
    /// No pairs yet, marked expanded.
    pub fn expanded() -> Self {
        Self {
            expanded: true,
            pairs: Vec::new(),
        }
    }

    pub fn record(&mut self, generated: Path, source: Path) {
        self.pairs.push((generated, source));
    }

    /// The spec path that `path` came from: `path` itself unless it lies under a generated
    /// entry, else that entry's source with the rest of `path` appended.
    pub fn source_of(&self, path: &Path) -> Path {
        let best = self
            .pairs
            .iter()
            .filter(|(generated, _)| path.0.starts_with(&generated.0))
            .max_by_key(|(generated, _)| generated.0.len());
        match best {
            Some((generated, source)) => {
                let mut p = source.clone();
                p.0.extend(path.0[generated.0.len()..].iter().cloned());
                p
            }
            None => path.clone(),
        }
    }

    /// Whether `path` lies under a generated entry.
    pub fn is_generated(&self, path: &Path) -> bool {
        self.pairs
            .iter()
            .any(|(generated, _)| path.0.starts_with(&generated.0))
    }
}
