//! What the job kinds need in the cluster before they can be applied: a RayJob needs KubeRay,
//! which on GKE is the Ray operator add-on (`cluster.addons.rayOperator`) or a KubeRay install
//! in `manifests:`. Without either, the apply fails at the first RayJob with "no such kind",
//! unless KubeRay was installed some other way (Helm, another tool), which a spec cannot show:
//! so `validate` warns, with the fix, rather than refusing.
//!
//! A JobSet needs JobSet's CRD and controller, which GKE does not install: `jobset.install` says
//! who does (docs/jobset.md). With `none` the spec says there is none, so its JobSets (jobs and
//! manifests) are refused at the first one, unless its manifests install JobSet's CRD.

use serde_json::Value;

use super::Checker;
use crate::model::jobset_install::{self, BUILTIN_VERSIONS};
use crate::spec::Path;
use crate::spec::types::{JobKind, JobSetInstall, Spec};
use crate::vocab::object::Field;

/// KubeRay's API group.
const RAY_GROUP: &str = "ray.io";

fn is_ray_object(object: &Value) -> bool {
    object
        .field("apiVersion")
        .and_then(Value::as_str)
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
    check_kuberay(c, spec);
    check_jobset(c, spec);
}

fn check_jobset(c: &mut Checker, spec: &Spec) {
    let setting = Path::root().key("jobset");
    if spec.jobset.install == JobSetInstall::Builtin
        && !BUILTIN_VERSIONS.contains(&spec.jobset.version.as_str())
    {
        c.error(
            &setting.key("version"),
            format!(
                "gkq embeds no JobSet release {} (it embeds {})",
                spec.jobset.version,
                BUILTIN_VERSIONS.join(", ")
            ),
            format!(
                "set jobset.version to {} (the release Kueue {} integrates with), or install JobSet yourself and set `jobset.install: external`",
                BUILTIN_VERSIONS.join(" or "),
                crate::spec::types::default_kueue_version()
            ),
        );
    }
    if spec.jobset.install != JobSetInstall::None
        || spec.manifests.iter().any(jobset_install::installs_jobset)
    {
        return;
    }
    let jobs = spec
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, job)| job.kind == JobKind::JobSet)
        .map(|(i, job)| {
            (
                Path::root().key("jobs").index(i).key("kind"),
                format!("job `{}` is a JobSet", job.name),
            )
        });
    let manifests = spec
        .manifests
        .iter()
        .enumerate()
        .filter(|(_, manifest)| jobset_install::is_jobset(manifest))
        .map(|(i, _)| {
            (
                Path::root().key("manifests").index(i),
                format!("manifest {i} is a JobSet"),
            )
        });
    let mut jobsets = jobs.chain(manifests);
    let Some((first, what)) = jobsets.next() else {
        return;
    };
    let others = match jobsets.count() {
        0 => String::new(),
        1 => " (and so is 1 more job or manifest)".to_string(),
        n => format!(" (and so are {n} more jobs or manifests)"),
    };
    c.error(
        &first,
        format!(
            "{what}{others}, but `jobset.install: none` says the cluster has no JobSet: without JobSet's CRD the API server refuses it, and without its controller nothing would run it"
        ),
        format!(
            "set `jobset.install: builtin` (gkq installs JobSet {}, the release Kueue {} integrates with, before the first JobSet), or `external` if JobSet is installed another way",
            BUILTIN_VERSIONS.join(", "),
            crate::spec::types::default_kueue_version()
        ),
    );
}

fn check_kuberay(c: &mut Checker, spec: &Spec) {
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
