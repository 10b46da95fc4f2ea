//! Kubernetes object changes.
//!
//! When the Kubernetes observer could ask the server what the desired object would become
//! (server-side apply with `dryRun=All`), that answer is compared with the live object as a whole,
//! so CRD and webhook defaults never show as drift. Without it (the CRD is not installed yet, or
//! no observer ran) the fields the spec sets are compared, and the fields gkq's last apply set
//! that the spec no longer sets are removals ([`super::applied`]).
//!
//! Changes are made by server-side apply, except where a change means a new object: a job
//! (RayJob, JobSet, batch Job) is a run, so a changed job is a new run (replace), never an edit
//! of a running job; a LocalQueue's
//! `spec.clusterQueue` is immutable in Kueue.

use std::borrow::Cow;

use serde_json::Value;

use super::applied::{dropped_fields, with_field};
use super::compare::{Comparison, full, owned};
use super::fingerprint::{Fingerprint, kube_fingerprint_of_basis, kube_fingerprint_of_views};
use super::normalize::{
    Dialect, keys_of, kube_view, kube_view_cow, spell_quantities_alike, without_kueue_injections,
};
use super::{ChangeEffect, PathSeg, ResourceDiff, UpdateMethod, field_changes};
use crate::addr::{ResourceAddr, ResourceKind};
use crate::model::jobs::SCRIPT_DIGEST_ANNOTATION;

/// Compares a desired object with the live one; `predicted` is the server's dry-run answer.
pub fn diff_object(
    addr: &ResourceAddr,
    desired: &Value,
    live: &Value,
    predicted: Option<&Value>,
) -> ResourceDiff {
    let mut live_view = kube_view(live);
    match predicted {
        Some(predicted) => {
            let mut predicted_view = kube_view(predicted);
            if addr.kind.is_run() {
                without_kueue_injections(&mut live_view, &predicted_view);
            }
            spell_quantities_alike(&mut predicted_view, &mut live_view);
            let comparison = full(&predicted_view, &live_view, Dialect::Kube);
            finished(addr, comparison, predicted_view)
        }
        None => diff_listed(addr, live, kube_view(desired), live_view),
    }
}

/// A desired object compared with its listed live object, without a dry run
/// ([`diff_listed_with_fingerprint`]).
pub enum ListedDiff {
    /// Nothing differs: only the live object's fingerprint with its fields is left to record.
    Unchanged(Fingerprint),
    /// Something differs: the diff, and the live object's fingerprint with its fields.
    Changed(ResourceDiff, Fingerprint),
}

/// [`diff_object`] without a dry-run answer, and the live object's fingerprint with its fields
/// ([`crate::diff::fingerprint::fingerprint_with_fields`]), from one view of each side: a plan
/// compares every listed object this way, and records the fingerprint of each.
///
/// Most listed objects are unchanged, so the fingerprint's walk (the live values at the paths the
/// desired object sets, as the server spells them) is tried first as the comparison too: when it
/// finds no change and gkq's last apply set no field the spec has dropped, the object is unchanged
/// whatever the spelling of its quantities, since spelling them alike only makes equal quantities
/// equal text. Otherwise the quantities are spelled alike and compared again, as [`diff_object`]
/// does.
pub fn diff_listed_with_fingerprint(
    addr: &ResourceAddr,
    desired: &Value,
    live: &Value,
) -> ListedDiff {
    let desired_view = kube_view_cow(desired);
    let live_view = kube_view(live);
    if let Cow::Borrowed(stored) = crate::diff::sensitive::as_stored_cow(desired) {
        let comparison = owned(&desired_view, &live_view, Dialect::Kube);
        if comparison.changes.is_empty()
            && dropped_fields(live, &desired_view, &live_view).is_empty()
        {
            return ListedDiff::Unchanged(kube_fingerprint_of_basis(stored, comparison.live_view));
        }
    }
    let fingerprint = kube_fingerprint_of_views(desired, &desired_view, &live_view);
    let diff = diff_listed(addr, live, desired_view.into_owned(), live_view);
    if diff.is_empty() {
        ListedDiff::Unchanged(fingerprint)
    } else {
        ListedDiff::Changed(diff, fingerprint)
    }
}

/// The fields the desired object sets compared with the live object's, and the fields gkq's
/// last apply set that the spec no longer sets (removals): from the views of both.
fn diff_listed(
    addr: &ResourceAddr,
    live: &Value,
    mut desired_view: Value,
    mut live_view: Value,
) -> ResourceDiff {
    spell_quantities_alike(&mut desired_view, &mut live_view);
    let mut comparison = owned(&desired_view, &live_view, Dialect::Kube);
    for dropped in dropped_fields(live, &desired_view, &live_view) {
        comparison
            .changes
            .retain(|change| !change.path.starts_with(&dropped.path));
        if let Some(before) = &dropped.before {
            with_field(&mut comparison.live_view, &dropped.path, before.clone());
        }
        comparison.changes.push(dropped);
    }
    finished(addr, comparison, desired_view)
}

/// The diff of a comparison: its changes classified, and both views as shown.
fn finished(addr: &ResourceAddr, comparison: Comparison, desired_view: Value) -> ResourceDiff {
    let mut live_view = comparison.live_view;
    let mut desired_view = desired_view;
    let digest = [
        PathSeg::Key("metadata".into()),
        PathSeg::Key("annotations".into()),
        PathSeg::Key(SCRIPT_DIGEST_ANNOTATION.into()),
    ];
    if comparison.changes.iter().any(|c| c.path == digest) {
        // The digest is derived from the script: its field change says it in one line, so the
        // text diff does not show the two digests again.
        for view in [&mut live_view, &mut desired_view] {
            if let Some(annotations) = view
                .pointer_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.remove(SCRIPT_DIGEST_ANNOTATION);
            }
        }
    }
    ResourceDiff {
        changes: field_changes(comparison.changes, |path| classify(&addr.kind, path)),
        live_view,
        desired_view,
    }
}

/// Whether a field change is of the training script's digest annotation, which a job carries so
/// that a changed script makes a new run (the plan says it in one line).
pub fn is_script_digest(path: &str) -> bool {
    path == super::path_text(&[
        PathSeg::Key("metadata".into()),
        PathSeg::Key("annotations".into()),
        PathSeg::Key(SCRIPT_DIGEST_ANNOTATION.into()),
    ])
}

/// How a changed field of a Kubernetes object can be made.
pub fn classify(kind: &ResourceKind, path: &[PathSeg]) -> ChangeEffect {
    let keys = keys_of(path);
    match (kind, keys.as_slice()) {
        (kind, ["metadata", "annotations", key, ..]) if is_spec_run(kind) && *key == SCRIPT_DIGEST_ANNOTATION => {
            ChangeEffect::Replace(
                "the training script changed: the job is submitted as a new run".to_string(),
            )
        }
        (_, ["metadata", "labels" | "annotations", ..]) => ChangeEffect::InPlace(UpdateMethod::ServerSideApply),
        (kind, [parents @ .., _]) if is_spec_run(kind) && parents.contains(&"template") => ChangeEffect::Replace(format!(
            "a {}'s pod template changed: Kueue admitted the job with its pod templates and its pods are made from them, so only a new run carries the change",
            kind_name(kind)
        )),
        (ResourceKind::RayJob, _) => ChangeEffect::Replace(
            "a RayJob is a run: a changed job is submitted as a new run, never edited while it runs".to_string(),
        ),
        (kind, _) if is_spec_run(kind) => ChangeEffect::Replace(format!(
            "a {} is a run: a changed job is submitted as a new run, never edited while it runs",
            kind_name(kind)
        )),
        (ResourceKind::LocalQueue, ["spec", "clusterQueue", ..]) => {
            ChangeEffect::Replace("a LocalQueue's spec.clusterQueue is immutable".to_string())
        }
        _ => ChangeEffect::InPlace(UpdateMethod::ServerSideApply),
    }
}

/// The kinds `jobs:` renders: RayJob, JobSet, batch Job.
fn is_spec_run(kind: &ResourceKind) -> bool {
    match kind {
        ResourceKind::RayJob => true,
        ResourceKind::Other(k) => k == "jobset" || k == "job",
        _ => false,
    }
}

/// `JobSet`, `Job`: the kind as Kubernetes spells it, for the reasons above.
fn kind_name(kind: &ResourceKind) -> &str {
    match kind {
        ResourceKind::RayJob => "RayJob",
        ResourceKind::Other(k) if k == "jobset" => "JobSet",
        ResourceKind::Other(k) if k == "job" => "Job",
        _ => "job",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_queue_quota_change_is_an_apply_and_defaults_do_not_diff() {
        let addr = ResourceAddr::cluster_queue("cluster-queue");
        let desired = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cluster-queue"},
            "spec": {"resourceGroups": [{"flavors": [{"name": "on-demand", "resources": [{"name": "memory", "nominalQuota": "75Gi"}]}]}]}});
        let live = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cluster-queue", "uid": "u", "resourceVersion": "3", "finalizers": ["kueue.x-k8s.io/resource-in-use"]},
            "spec": {"queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"flavors": [{"name": "on-demand", "resources": [{"name": "memory", "nominalQuota": "80530636800"}]}]}]},
            "status": {"pendingWorkloads": 0}});
        assert!(diff_object(&addr, &desired, &live, None).is_empty());
        let mut more = desired.clone();
        more["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
            json!("100Gi");
        let diff = diff_object(&addr, &more, &live, None);
        assert_eq!(diff.changes.len(), 1);
        assert_eq!(
            diff.changes[0].path,
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
        );
        assert_eq!(diff.methods(), [UpdateMethod::ServerSideApply]);
    }

    #[test]
    fn quantities_read_alike_on_both_sides_and_an_encoding_is_no_change() {
        let addr = ResourceAddr::cluster_queue("cq");
        let queue = |cpu: Value, memory: Value| {
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "cq"},
                "spec": {"resourceGroups": [{"flavors": [{"name": "on-demand", "resources": [
                    {"name": "cpu", "nominalQuota": cpu},
                    {"name": "memory", "nominalQuota": memory}]}]}]}})
        };
        // Live as Kueue's webhook stores it, desired as the spec spells it.
        let live = queue(json!("40"), json!("80530636800"));
        assert!(diff_object(&addr, &queue(json!(40), json!("75Gi")), &live, None).is_empty());
        assert!(
            diff_object(
                &addr,
                &queue(json!(40), json!("75Gi")),
                &live,
                Some(&queue(json!("40"), json!("75Gi")))
            )
            .is_empty()
        );
        let diff = diff_object(&addr, &queue(json!(80), json!("100Gi")), &live, None);
        let shown: Vec<(Option<Value>, Option<Value>)> = diff
            .changes
            .iter()
            .map(|c| (c.before.clone(), c.after.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                (Some(json!("40")), Some(json!("80"))),
                (Some(json!("75Gi")), Some(json!("100Gi")))
            ]
        );
        let text = diff.text();
        assert!(text.contains("-        nominalQuota: \"40\"\n"), "{text}");
        assert!(text.contains("+        nominalQuota: \"80\"\n"), "{text}");
        assert!(text.contains("-        nominalQuota: 75Gi\n"), "{text}");
        assert!(!text.contains("80530636800"), "{text}");
    }

    #[test]
    fn a_changed_script_digest_is_left_out_of_the_text_diff() {
        let addr = ResourceAddr::ray_job("default", "j");
        let job = |digest: &str, steps: u32| {
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "j", "namespace": "default", "annotations": {SCRIPT_DIGEST_ANNOTATION: digest}},
                "spec": {"entrypoint": format!("python /app/train.py --steps {steps}")}})
        };
        let diff = diff_object(&addr, &job("bbb", 1), &job("aaa", 1), None);
        assert_eq!(diff.changes.len(), 1);
        assert!(is_script_digest(&diff.changes[0].path));
        assert_eq!(diff.text(), "");
        let both = diff_object(&addr, &job("bbb", 2), &job("aaa", 1), None);
        assert_eq!(both.changes.len(), 2);
        let text = both.text();
        assert!(text.contains("--steps 2"), "{text}");
        assert!(!text.contains("aaa") && !text.contains("bbb"), "{text}");
    }

    #[test]
    fn a_field_gkqs_last_apply_set_and_the_spec_dropped_is_a_change() {
        let addr = ResourceAddr::local_queue("team", "lq");
        let live = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "team",
                "labels": {"gkq.dev/stack": "s", "rev": "1"},
                "managedFields": [{"manager": "gkq", "operation": "Apply",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:gkq.dev/stack": {}, "f:rev": {}}},
                                 "f:spec": {"f:clusterQueue": {}}}}]},
            "spec": {"clusterQueue": "cq"}});
        let desired = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "team", "labels": {"gkq.dev/stack": "s"}},
            "spec": {"clusterQueue": "cq"}});
        let diff = diff_object(&addr, &desired, &live, None);
        assert_eq!(diff.changes.len(), 1, "{:?}", diff.changes);
        assert_eq!(diff.changes[0].path, "metadata.labels.rev");
        assert_eq!(diff.changes[0].after, None);
        assert_eq!(diff.methods(), [UpdateMethod::ServerSideApply]);
        assert_eq!(diff.live_view["metadata"]["labels"]["rev"], "1");
        assert!(diff.desired_view["metadata"]["labels"].get("rev").is_none());
        // The same live object set by another manager: the label is not gkq's to remove.
        let mut theirs = live.clone();
        theirs["metadata"]["managedFields"][0]["manager"] = json!("kubectl");
        assert!(diff_object(&addr, &desired, &theirs, None).is_empty());
    }

    #[test]
    fn predicted_object_is_compared_whole() {
        let addr = ResourceAddr::resource_flavor("dws");
        let desired = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "dws"}});
        let live = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "dws"},
            "spec": {"nodeLabels": {"pool": "old"}}});
        let predicted = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "dws"},
            "spec": {"nodeLabels": {"pool": "dws-pool"}}});
        let diff = diff_object(&addr, &desired, &live, Some(&predicted));
        assert_eq!(diff.changes.len(), 1);
        assert_eq!(diff.changes[0].path, "spec.nodeLabels.pool");
    }

    #[test]
    fn a_changed_ray_job_is_a_new_run() {
        let addr = ResourceAddr::ray_job("default", "train-1");
        let desired = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "train-1"},
            "spec": {"entrypoint": "python train.py --steps 200"}});
        let live = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "train-1"},
            "spec": {"entrypoint": "python train.py --steps 100", "suspend": false}});
        let diff = diff_object(&addr, &desired, &live, None);
        assert!(diff.replace_reasons()[0].contains("run"));
    }

    #[test]
    fn what_kueue_writes_on_admission_is_not_a_change() {
        let addr = ResourceAddr::ray_job("default", "train-1");
        let job = |digest: &str, admitted: bool| {
            let mut template = json!({"spec": {"containers": [{"name": "ray-worker"}],
                "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"}}});
            if admitted {
                template["metadata"] = json!({"annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": "pr-1"}});
                template["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"] =
                    json!("dws-pool");
                template["spec"]["tolerations"] =
                    json!([{"key": "google.com/tpu", "operator": "Exists"}]);
            }
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "train-1", "namespace": "default", "annotations": {SCRIPT_DIGEST_ANNOTATION: digest}},
                "spec": {"rayClusterSpec": {"workerGroupSpecs": [{"groupName": "tpu", "template": template}]}}})
        };
        let admitted = job("a", true);
        assert!(
            diff_object(&addr, &job("a", false), &admitted, Some(&job("a", false)))
                .changes
                .is_empty()
        );
        let rerun = diff_object(&addr, &job("b", false), &admitted, Some(&job("b", false)));
        let paths: Vec<&str> = rerun.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            [format!(
                "metadata.annotations[\"{SCRIPT_DIGEST_ANNOTATION}\"]"
            )]
        );
        // A node selector the spec sets is still compared.
        let mut moved = job("a", false);
        moved["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"]
            ["cloud.google.com/gke-tpu-topology"] = json!("2x4");
        let diff = diff_object(&addr, &moved, &admitted, Some(&moved));
        assert_eq!(diff.changes.len(), 1, "{diff:?}");
        assert!(
            diff.changes[0]
                .path
                .ends_with("[\"cloud.google.com/gke-tpu-topology\"]")
        );
    }

    #[test]
    fn a_changed_pod_template_is_a_new_run_for_that_reason() {
        let addr = ResourceAddr::from_object(&json!({"apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet", "metadata": {"name": "j", "namespace": "default"}}))
        .unwrap();
        let job = |image: &str| {
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {"replicatedJobs": [{"name": "slice", "template": {"spec": {"template":
                {"spec": {"containers": [{"name": "main", "image": image}]}}}}}]}})
        };
        let diff = diff_object(&addr, &job("b"), &job("a"), None);
        assert_eq!(
            diff.replace_reasons(),
            [
                "a JobSet's pod template changed: Kueue admitted the job with its pod templates and its pods are made from them, so only a new run carries the change"
            ]
        );
        // Outside the templates, the kind's own reason.
        let mut other = job("a");
        other["spec"]["suspend"] = json!(false);
        other["spec"]["ttlSecondsAfterFinished"] = json!(60);
        let diff = diff_object(&addr, &other, &job("a"), None);
        assert!(
            diff.replace_reasons()[0].starts_with("a JobSet is a run"),
            "{:?}",
            diff.replace_reasons()
        );
    }

    #[test]
    fn a_changed_script_digest_replaces_the_run() {
        let addr = ResourceAddr::from_object(&json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j", "namespace": "default"}}))
        .unwrap();
        let job = |digest: &str| {
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j", "namespace": "default", "annotations": {SCRIPT_DIGEST_ANNOTATION: digest}},
            "spec": {"entrypoint": "python /app/train.py"}})
        };
        let diff = diff_object(&addr, &job("b"), &job("a"), None);
        assert!(!diff.replace_reasons().is_empty(), "{diff:?}");
        assert!(diff.replace_reasons()[0].contains("script changed"));
        assert!(
            diff_object(&addr, &job("a"), &job("a"), None)
                .changes
                .is_empty()
        );
    }

    /// A plan compares each listed object and fingerprints it from one view of each side: the
    /// same diff as [`diff_object`] and the same fingerprint as the executor recomputes
    /// ([`crate::diff::fingerprint::fingerprint_with_fields`]), for a quota respelled by
    /// Kueue's webhook, a job with Kueue's and the server's fields, and a Secret's `stringData`
    /// (compared as stored).
    #[test]
    fn one_view_of_each_side_gives_the_diff_and_fingerprint_of_each_alone() {
        use crate::diff::fingerprint::fingerprint_with_fields;
        let queue = |cpu: Value| {
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "cq", "labels": {"app.kubernetes.io/managed-by": "gkq"}},
                "spec": {"resourceGroups": [{"flavors": [{"name": "f", "resources": [
                    {"name": "cpu", "nominalQuota": cpu},
                    {"name": "memory", "nominalQuota": "20Gi"}]}]}]}})
        };
        let mut live_queue = queue(json!("10"));
        live_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] =
            json!("21474836480");
        live_queue["metadata"]["resourceVersion"] = json!("7");
        live_queue["status"] = json!({"pendingWorkloads": 0});
        let job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {"suspend": true, "entrypoint": "python train.py"}});
        let mut live_job = job.clone();
        live_job["spec"]["suspend"] = json!(false);
        live_job["status"] = json!({"jobDeploymentStatus": "Running"});
        live_job["metadata"]["uid"] = json!("u");
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"}, "stringData": {"token": "abc"}});
        let live_secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"}, "data": {"token": "YWJj"}});
        let cases = [
            (queue(json!(10)), live_queue.clone()),
            (queue(json!(12)), live_queue),
            (job.clone(), live_job.clone()),
            (
                job,
                json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "j", "namespace": "default"}, "spec": {"entrypoint": "x"}}),
            ),
            (secret.clone(), live_secret.clone()),
            (
                secret,
                json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "namespace": "default"}, "data": {"token": "eHl6"}}),
            ),
        ];
        // gkq's last apply set a label the spec no longer sets: applying removes it.
        let labelled = queue(json!(10));
        let mut live_labelled = labelled.clone();
        live_labelled["metadata"]["labels"]["team"] = json!("a");
        live_labelled["metadata"]["managedFields"] = json!([{
            "manager": crate::model::FIELD_MANAGER, "operation": "Apply", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {
                "f:app.kubernetes.io/managed-by": {}, "f:team": {}}}}}]);
        let mut cases = cases.to_vec();
        cases.push((labelled, live_labelled));
        let mut differing = 0;
        for (desired, live) in cases {
            let addr = ResourceAddr::from_object(&desired).unwrap();
            let alone = diff_object(&addr, &desired, &live, None);
            let fingerprint = match diff_listed_with_fingerprint(&addr, &desired, &live) {
                ListedDiff::Unchanged(fingerprint) => {
                    assert_eq!(alone.changes, [], "{desired}");
                    fingerprint
                }
                ListedDiff::Changed(diff, fingerprint) => {
                    assert_eq!(diff.changes, alone.changes, "{desired}");
                    assert_ne!(diff.changes, [], "{desired}");
                    for (one, other) in [
                        (&diff.live_view, &alone.live_view),
                        (&diff.desired_view, &alone.desired_view),
                    ] {
                        // As text: the order of keys counts too.
                        assert_eq!(one.to_string(), other.to_string());
                    }
                    differing += 1;
                    fingerprint
                }
            };
            assert_eq!(
                fingerprint,
                fingerprint_with_fields(&addr, Some(&desired), &live),
                "{desired}"
            );
        }
        // The second queue, the other job, both Secrets (`stringData` against `data`: a plan
        // compares Secrets by their dry run) and the dropped label.
        assert_eq!(differing, 5);
    }
}
