//! Kueue's ProvisioningRequest admission check (`pkg/controller/admissionchecks/provisioning`):
//! the check `Active` when its parameters resolve; a ProvisioningRequest (and PodTemplates) for
//! the podsets that use the config's managed resources, merged as its `podSetMergePolicy` says
//! (one PodTemplate per merged PodSet, the first podset's), its state mirrored into the check
//! (`Provisioned` sets the pod-set updates and the check `Ready`); a failed request is retried
//! with Kueue's backoff (60 s doubling, `retryStrategy`) and the check rejected after
//! `backoffLimitCount` retries, which deactivates the Workload.

use crate::placement::provisioning::RequestState;
use serde_json::{Value, json};

use super::super::controller::Ctx;
use super::super::store::{Key, set_condition, timestamp};
use super::super::workload::{SIMULATED_ANNOTATION, SIMULATED_VALUE};
use super::podset::template_with_flavors;
use super::workload::{check_states, evict, set_check};
use super::{
    CLASS_ANNOTATION, CONSUME_ANNOTATION, KUEUE, MANAGER, PROVISIONING_CONTROLLER, PROVREQ_PREFIX,
    Visit, condition_true, deleting, reserving,
};
use crate::placement::podsets::{PodSetMergePolicy, request_pod_sets};
use crate::placement::{Cluster, PendingWorkload, active};
use crate::vocab::object::{condition, name_of, uid_of};

/// The provisioning controller's AdmissionCheck status: active when its parameters resolve
/// (`admissioncheck_reconciler.go`).
pub(super) fn admission_check_status(ctx: &mut Ctx<'_>) -> bool {
    let mut changed = false;
    let now = ctx.now;
    // The configs that exist (not being deleted) and the checks, read as placement reads them.
    let mut cluster = Cluster::default();
    for o in ctx
        .store
        .of_kind(KUEUE, "ProvisioningRequestConfig")
        .filter(|o| !deleting(o))
    {
        let _ = cluster.add_object(o);
    }
    for key in ctx.store.keys_of_kind(KUEUE, "AdmissionCheck") {
        let Some(ac) = ctx.store.get(&key) else {
            continue;
        };
        if ac.pointer("/spec/controllerName").and_then(Value::as_str)
            != Some(PROVISIONING_CONTROLLER)
        {
            continue;
        }
        let mut one = Cluster::default();
        let _ = one.add_object(ac);
        let ok = one
            .admission_checks
            .first()
            .is_some_and(|check| active::parameters_resolve(&cluster, check));
        changed |= ctx.store.update(&key, MANAGER, true, now, |o| {
            if ok {
                set_condition(o, "Active", "True", "Active", "The admission check is active", now);
            } else {
                set_condition(o, "Active", "False", "BadParametersRef", "Cannot load the AdmissionChecks parameters: the ProvisioningRequestConfig does not exist", now);
            }
        });
    }
    changed
}

/// The ProvisioningRequest admission check controller.
pub(super) fn provisioning_checks(ctx: &mut Ctx<'_>, visit: &Visit) -> bool {
    let mut changed = false;
    for key in visit.keys(ctx.store) {
        // Only Workloads holding quota with a pending check are this controller's.
        let Some(w) = ctx
            .store
            .get(&key)
            .filter(|w| reserving(w) && !deleting(w))
            .filter(|w| check_states(w).iter().any(|s| s["state"] == "Pending"))
            .cloned()
        else {
            continue;
        };
        for state in check_states(&w) {
            if state["state"] != "Pending" {
                continue;
            }
            changed |= pending_check(ctx, &key, &w, &state);
        }
    }
    changed
}

/// The ProvisioningRequestConfig of the active provisioning AdmissionCheck named `check`.
fn provisioning_config(ctx: &Ctx<'_>, check: &str) -> Option<Value> {
    let ac = ctx.store.get(&Key::new(
        "kueue.x-k8s.io/v1beta2",
        "AdmissionCheck",
        None,
        check,
    ))?;
    if ac.pointer("/spec/controllerName").and_then(Value::as_str) != Some(PROVISIONING_CONTROLLER)
        || !condition_true(ac, "Active")
    {
        return None;
    }
    let config_name = ac
        .pointer("/spec/parameters/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ctx.store
        .get(&Key::new(
            "kueue.x-k8s.io/v1beta2",
            "ProvisioningRequestConfig",
            None,
            config_name,
        ))
        .cloned()
}

/// One pending provisioning check of the Workload `w` (at `key`): its ProvisioningRequest
/// created, or the request's state mirrored into the check.
fn pending_check(ctx: &mut Ctx<'_>, key: &Key, w: &Value, state: &Value) -> bool {
    let now = ctx.now;
    let check = state["name"].as_str().unwrap_or_default().to_string();
    let Some(config) = provisioning_config(ctx, &check) else {
        return false;
    };
    let attempt = *ctx.sim.attempts.entry(uid_of(w).to_string()).or_insert(1);
    let pr_name = format!("{}-{check}-{attempt}", name_of(w));
    let pr_key = Key::new(
        "autoscaling.x-k8s.io/v1",
        "ProvisioningRequest",
        Some(&key.namespace),
        &pr_name,
    );
    let Some(pr) = ctx.store.get(&pr_key).cloned() else {
        return create_request(ctx, w, &config, &pr_name);
    };
    // The one rule for which condition wins (placement::provisioning), as status and watch
    // read it.
    let admitted = condition_true(w, "Admitted");
    let pr_state = crate::placement::provisioning::request_state(&pr, admitted).state;
    if pr_state == RequestState::Provisioned {
        let class = config
            .pointer("/spec/provisioningClassName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let updates = pod_set_updates(&pr, &pr_name, class);
        ctx.store.update(key, MANAGER, true, now, |o| {
            set_check(o, &check, "Ready", "", Some(updates), now);
        })
    } else if pr_state.is_failure() {
        let failure = request_message(&pr, pr_state.as_str());
        let failed = FailedRequest {
            check: &check,
            config: &config,
            attempt,
            failure: &failure,
        };
        let mut changed = retry_or_reject(ctx, key, w, &failed);
        changed |= ctx.store.delete(&pr_key, false, now);
        changed
    } else {
        let message = request_message(&pr, "Provisioned");
        if state["message"] == message.as_str() {
            return false;
        }
        ctx.store.update(key, MANAGER, true, now, |o| {
            set_check(o, &check, "Pending", &message, None, now);
        })
    }
}

/// The message of the request's condition `kind` (empty without one).
fn request_message(pr: &Value, kind: &str) -> String {
    condition(pr, kind)
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The pod-set updates a provisioned request gives its Workload's podsets: the annotations that
/// make their pods consume it.
fn pod_set_updates(pr: &Value, pr_name: &str, class: &str) -> Value {
    let prefix = format!("ppt-{pr_name}-");
    let updates: Vec<Value> = pr["spec"]["podSets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ps| ps.pointer("/podTemplateRef/name").and_then(Value::as_str))
        .filter_map(|t| t.strip_prefix(&prefix))
        .map(|podset| {
            json!({"name": podset, "annotations": {
                CONSUME_ANNOTATION: pr_name, CLASS_ANNOTATION: class}})
        })
        .collect();
    Value::Array(updates)
}

/// A ProvisioningRequest that failed: which check, its config, which attempt it was, and why.
struct FailedRequest<'a> {
    check: &'a str,
    config: &'a Value,
    attempt: u32,
    failure: &'a str,
}

/// After a failed request: the Workload evicted and retried after Kueue's backoff, or, past the
/// config's `backoffLimitCount`, the check rejected and the Workload deactivated.
fn retry_or_reject(ctx: &mut Ctx<'_>, key: &Key, w: &Value, failed: &FailedRequest<'_>) -> bool {
    let now = ctx.now;
    let retry = |field: &str, default: u64| {
        failed
            .config
            .pointer(&format!("/spec/retryStrategy/{field}"))
            .and_then(Value::as_u64)
            .unwrap_or(default)
    };
    let limit = retry("backoffLimitCount", 3) as u32;
    let base = retry("backoffBaseSeconds", 60);
    let max = retry("backoffMaxSeconds", 1800);
    let (check, failure, attempt) = (failed.check, failed.failure, failed.attempt);
    if attempt <= limit {
        let backoff = (base.saturating_mul(1 << (attempt - 1).min(20))).min(max);
        let at = timestamp(now + backoff * 1000);
        ctx.sim.attempts.insert(uid_of(w).to_string(), attempt + 1);
        return ctx.store.update(key, MANAGER, true, now, |o| {
            set_check(
                o,
                check,
                "Pending",
                &format!("Retrying after failure: {failure}"),
                None,
                now,
            );
            evict(
                o,
                "AdmissionCheck",
                &format!("At least one admission check is false: {check}: {failure}"),
                now,
            );
            o["status"]["requeueState"] = json!({"count": attempt, "requeueAt": at});
        });
    }
    let mut changed = ctx.store.update(key, MANAGER, true, now, |o| {
        set_check(o, check, "Rejected", failure, None, now);
        evict(o, "Deactivated", &format!("The workload is deactivated due to Rejected admission check {check} after {limit} retries"), now);
    });
    changed |= ctx.store.update(key, MANAGER, false, now, |o| {
        o["spec"]["active"] = json!(false);
    });
    changed
}

fn create_request(ctx: &mut Ctx<'_>, w: &Value, config: &Value, pr_name: &str) -> bool {
    let namespace = w["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let managed: Vec<String> = config
        .pointer("/spec/managedResources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    let Ok(pending) = PendingWorkload::from_object(w) else {
        return false;
    };
    // Placement's rule (`mergePodSets`): the podsets that join, merged as the config's
    // `podSetMergePolicy` says; each PodSet is named after (and templated on) its first podset.
    let policy = config
        .pointer("/spec/podSetMergePolicy")
        .and_then(Value::as_str)
        .and_then(PodSetMergePolicy::parse);
    let podsets: Vec<(String, i32)> = request_pod_sets(&pending.pod_sets, &managed, policy)
        .into_iter()
        .map(|merged| (merged.podsets[0].clone(), merged.count))
        .collect();
    let mut parameters = config
        .pointer("/spec/parameters")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (k, v) in w
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(param) = k.strip_prefix(PROVREQ_PREFIX) {
            parameters[param] = v.clone();
        }
    }
    let mut spec = json!({
        "provisioningClassName": config.pointer("/spec/provisioningClassName").cloned().unwrap_or(Value::Null),
        "podSets": podsets.iter().map(|(ps, count)| json!({"podTemplateRef": {"name": format!("ppt-{pr_name}-{ps}")}, "count": count})).collect::<Vec<_>>(),
    });
    if parameters.as_object().is_some_and(|p| !p.is_empty()) {
        spec["parameters"] = parameters;
    }
    let pr = json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": pr_name, "namespace": namespace,
            "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
            "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "name": name_of(w), "uid": uid_of(w), "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
    });
    let now = ctx.now;
    if !ctx.store.create(pr, MANAGER, now) {
        return false;
    }
    let pr_uid = ctx
        .store
        .get(&Key::new(
            "autoscaling.x-k8s.io/v1",
            "ProvisioningRequest",
            Some(&namespace),
            pr_name,
        ))
        .map(|p| uid_of(p).to_string())
        .unwrap_or_default();
    for (podset, _) in &podsets {
        let template = template_with_flavors(ctx.store, w, podset);
        let object = json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": format!("ppt-{pr_name}-{podset}"), "namespace": namespace,
                "annotations": {SIMULATED_ANNOTATION: SIMULATED_VALUE},
                "ownerReferences": [{"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                    "name": pr_name, "uid": pr_uid, "controller": true, "blockOwnerDeletion": true}]},
            "template": template,
        });
        ctx.store.create(object, MANAGER, now);
    }
    true
}
