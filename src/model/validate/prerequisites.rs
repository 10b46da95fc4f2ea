//! What the job kinds need in the cluster before they can be applied: a RayJob needs KubeRay,
//! which on GKE is the Ray operator add-on (`cluster.addons.rayOperator`) or a KubeRay install
//! in `manifests:`. Without either, the apply fails at the first RayJob with "no such kind",
//! unless KubeRay was installed some other way (Helm, another tool), which a spec cannot show:
//! so `validate` warns, with the fix, rather than refusing.

use serde_json::Value;

use super::Checker;
use crate::spec::Path;
use crate::spec::types::{JobKind, Spec};

/// KubeRay's API group.
const RAY_GROUP: &str = "ray.io";

fn is_ray_object(object: &Value) -> bool {
    object["apiVersion"]
        .as_str()
        .is_some_and(|v| v.split('/').next() == Some(RAY_GROUP))
}

/// Whether a manifest installs KubeRay: one of its CRDs (`*.ray.io`).
fn installs_kuberay(object: &Value) -> bool {
    object["kind"] == "CustomResourceDefinition"
        && object
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .is_some_and(|g| g == RAY_GROUP)
}

pub(super) fn check_prerequisites(c: &mut Checker, spec: &Spec) {
    if spec.cluster.addons.ray_operator || spec.manifests.iter().any(installs_kuberay) {
        return;
    }
    let fix = "set `cluster.addons.rayOperator: true` (GKE's Ray operator add-on, as `gcloud container clusters create --addons=RayOperator` does), or install KubeRay's CRDs and operator in `manifests:`";
    // One warning per job section entry and manifest: each is a place the user may fix.
    for (i, job) in spec
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, job)| job.kind == JobKind::RayJob)
    {
        c.warning(
            &Path::root().key("jobs").index(i),
            format!(
                "job `{}` is a KubeRay RayJob, but the spec neither enables the Ray operator add-on nor installs KubeRay: unless KubeRay is installed another way, apply fails at this job",
                job.name
            ),
            fix,
        );
    }
    for (i, manifest) in spec.manifests.iter().enumerate() {
        if is_ray_object(manifest) {
            c.warning(
                &Path::root().key("manifests").index(i),
                format!(
                    "manifest {i} is a KubeRay {}, but the spec neither enables the Ray operator add-on nor installs KubeRay: unless KubeRay is installed another way, apply fails at it",
                    manifest["kind"].as_str().unwrap_or("object")
                ),
                fix,
            );
        }
    }
}
