//! Warnings where the spec uses Kueue behaviour gkq does not predict (`placement::unmodelled`):
//! the plan will say "not predicted" for the jobs it touches, and `validate` says so first.

use serde_json::Value;

use super::Checker;
use crate::placement::unmodelled::{
    DOCS, MODELLED_MINOR, MODELLED_VERSION, Manager, NEXT_VERSION_DOCS, VersionFit, find,
    gate_changes_scheduling, version_fit,
};
use crate::spec::Path;
use crate::spec::types::{InstallMode, Spec};

pub(super) fn check_unmodelled(c: &mut Checker, spec: &Spec) {
    // A version that is not a release tag is an error of its own (`kueue_section`).
    if let VersionFit::Other(minor) = version_fit(&spec.kueue.version) {
        let version = &spec.kueue.version;
        let anyway = format!(
            "or plan with --predict-anyway to predict with {MODELLED_MINOR}'s rules; see {NEXT_VERSION_DOCS}"
        );
        let (message, help) = match spec.kueue.install {
            InstallMode::Managed => (
                format!(
                    "placements will not be predicted: kueue.version installs Kueue {version} ({minor}), and gkq models Kueue {MODELLED_MINOR}"
                ),
                format!(
                    "to get predictions pin kueue.version to a {MODELLED_MINOR} release ({MODELLED_VERSION} is built into gkq), {anyway}"
                ),
            ),
            // The plan reads the release the cluster runs.
            InstallMode::External => (
                format!(
                    "placements will not be predicted if the cluster runs Kueue {version}, as kueue.version says: gkq models Kueue {MODELLED_MINOR}"
                ),
                format!(
                    "to get predictions run a {MODELLED_MINOR} release of Kueue (or let gkq install {MODELLED_VERSION}: kueue.install: managed), {anyway}"
                ),
            ),
        };
        c.warning(&Path::root().key("kueue").key("version"), message, help);
    }
    for (gate, enabled) in spec
        .kueue
        .feature_gates
        .iter()
        .filter(|(gate, enabled)| gate_changes_scheduling(gate, **enabled))
    {
        c.warning(
            &Path::root().key("kueue").key("featureGates").key(gate),
            format!(
                "placements are not predicted with {gate}={enabled}: this gate changes how Kueue schedules every workload, and gkq models Kueue {MODELLED_VERSION} with its default"
            ),
            format!("plans will mark the affected jobs \"not predicted\"; see {DOCS}"),
        );
    }
    let none = Manager::default();
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
