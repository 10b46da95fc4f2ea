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
    // One warning, at the first RayJob: the fix is one line of the cluster, not one per job, and
    // a spec of thousands of RayJobs must not print thousands of copies of it.
    let jobs = spec
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, job)| job.kind == JobKind::RayJob)
        .map(|(i, job)| {
            (
                Path::root().key("jobs").index(i),
                format!("job `{}` is a KubeRay RayJob", job.name),
            )
        });
    let manifests = spec
        .manifests
        .iter()
        .enumerate()
        .filter(|(_, manifest)| is_ray_object(manifest))
        .map(|(i, manifest)| {
            (
                Path::root().key("manifests").index(i),
                format!(
                    "manifest {i} is a KubeRay {}",
                    manifest["kind"].as_str().unwrap_or("object")
                ),
            )
        });
    let mut ray = jobs.chain(manifests);
    let Some((first, what)) = ray.next() else {
        return;
    };
    let others = match ray.count() {
        0 => String::new(),
        1 => " (and so is 1 more job or manifest)".to_string(),
        n => format!(" (and so are {n} more jobs or manifests)"),
    };
    c.warning(
        &first,
        format!(
            "{what}{others}, but the spec neither enables the Ray operator add-on nor installs KubeRay: unless KubeRay is installed another way, apply fails at it"
        ),
        fix,
    );
}
