//! Kueue's webhooks (`pkg/webhooks`), only while Kueue runs: `resource-in-use` finalizers on new
//! ClusterQueues and ResourceFlavors, quota quantities canonicalised on create, `onFlavors`
//! checked against the queue's flavors, and queued RayJobs, JobSets and batch Jobs created
//! suspended, or rejected as Kueue's job webhooks reject them.

use serde_json::{Value, json};

use super::super::store::{Store, child_map, finalizers};
use super::super::workload::KUEUE_FINALIZER;
use super::{KUEUE, cq_flavors};
use crate::placement::PendingWorkload;
use crate::vocab::labels::QUEUE_NAME_LABEL;
use crate::vocab::quantity::Quantity;

/// Kueue's mutating and validating webhooks (only while Kueue runs).
pub fn webhooks(
    store: &Store,
    group: &str,
    kind: &str,
    object: &mut Value,
    create: bool,
) -> Result<(), String> {
    match (group, kind) {
        (KUEUE, "ClusterQueue") => {
            if create {
                add_finalizer(object);
                canonicalise_quotas(object);
            }
            validate_on_flavors(object)
        }
        (KUEUE, "ResourceFlavor") if create => {
            add_finalizer(object);
            Ok(())
        }
        ("ray.io", "RayJob") | ("jobset.x-k8s.io", "JobSet") | ("batch", "Job") => {
            let queued = object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(QUEUE_NAME_LABEL))
                .is_some();
            if !queued {
                return Ok(());
            }
            if let Ok(workload) = PendingWorkload::from_object(object)
                && let Some(reason) = workload.rejected
            {
                let webhook = format!("v{}.kb.io", kind.to_lowercase());
                return Err(format!(
                    "admission webhook \"{webhook}\" denied the request: {reason}"
                ));
            }
            if create && let Some(spec) = child_map(object, "spec") {
                spec.insert("suspend".into(), json!(true));
            }
            let _ = store;
            Ok(())
        }
        _ => Ok(()),
    }
}

fn add_finalizer(object: &mut Value) {
    let mut list = finalizers(object);
    if !list.iter().any(|f| f == KUEUE_FINALIZER) {
        list.push(KUEUE_FINALIZER.to_string());
        object["metadata"]["finalizers"] = json!(list);
    }
}

/// The webhook re-marshals the typed object on create, which canonicalises quantities.
fn canonicalise_quotas(object: &mut Value) {
    for group in object
        .pointer_mut("/spec/resourceGroups")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for flavor in group
            .get_mut("flavors")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let resources = flavor
                .get_mut("resources")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut);
            for resource in resources {
                for field in ["nominalQuota", "borrowingLimit", "lendingLimit"] {
                    if let Some(v) = resource.get(field)
                        && let Ok(q) = Quantity::from_json(v)
                    {
                        resource.insert(field.into(), json!(q.to_canonical_string()));
                    }
                }
            }
        }
    }
}

fn validate_on_flavors(cq: &Value) -> Result<(), String> {
    let flavors = cq_flavors(cq);
    for (i, check) in cq
        .pointer("/spec/admissionChecksStrategy/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, flavor) in check["onFlavors"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let f = flavor.as_str().unwrap_or_default();
            if !flavors.iter().any(|x| x == f) {
                return Err(format!(
                    "admission webhook \"vclusterqueue.kb.io\" denied the request: spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]: Invalid value: {f:?}: must be one of the ClusterQueue's flavors"
                ));
            }
        }
    }
    Ok(())
}
