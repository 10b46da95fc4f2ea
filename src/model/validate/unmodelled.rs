//! Warnings where the spec uses Kueue behaviour gkq does not predict (`placement::unmodelled`):
//! the plan will say "not predicted" for the jobs it touches, and `validate` says so first.

use serde_json::Value;

use super::Checker;
use crate::placement::unmodelled::{DOCS, find, gate_changes_scheduling};
use crate::spec::Path;
use crate::spec::types::Spec;

pub(super) fn check_unmodelled(c: &mut Checker, spec: &Spec) {
    for (gate, enabled) in spec
        .kueue
        .feature_gates
        .iter()
        .filter(|(gate, enabled)| gate_changes_scheduling(gate, **enabled))
    {
        c.warning(
            &Path::root().key("kueue").key("featureGates").key(gate),
            format!(
                "placements are not predicted with {gate}={enabled}: this gate changes how Kueue schedules every workload, and gkq models Kueue v0.19.2 with its default"
            ),
            format!("plans will mark the affected jobs \"not predicted\"; see {DOCS}"),
        );
    }
    let none = Default::default();
    for (i, manifest) in spec.manifests.iter().enumerate() {
        let objects: Vec<&Value> = vec![manifest];
        for found in find(&objects, &none) {
            c.warning(
                &Path::root().key("manifests").index(i),
                format!(
                    "{} is in use ({}): gkq does not model it",
                    found.feature, found.cause
                ),
                format!("plans will mark the jobs it touches \"not predicted\"; see {DOCS}"),
            );
        }
    }
}
