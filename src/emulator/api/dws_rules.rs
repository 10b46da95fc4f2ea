//! What a node pool's provisioning model demands of the rest of the pool: flex-start and queued
//! provisioning (DWS), checked on create and on every mutation that could break them.

use serde_json::Value;

use crate::emulator::rpc::ApiError;
use crate::model::gke_facts::FLEX_START_MAX_RUN_SECONDS;

/// What flex-start and queued provisioning demand of a pool (DWS): nodes come and go with
/// demand, so the pool autoscales and starts from zero, takes no reservation, is not Spot, and
/// (flex-start) is not auto-repaired. The texts are the emulator's own where GKE's exact wording
/// is not published; the status (400 INVALID_ARGUMENT) and the rules are GKE's.
pub(super) fn check_dws_rules(pool: &Value) -> Result<(), ApiError> {
    let flag = |p: &str| pool.pointer(p).and_then(Value::as_bool) == Some(true);
    let flex_start = flag("/config/flexStart");
    let queued = flag("/queuedProvisioning/enabled");
    if !flex_start && !queued {
        return Ok(());
    }
    let what = if flex_start {
        "Flex-start node pools"
    } else {
        "Node pools with queued provisioning"
    };
    if !flag("/autoscaling/enabled") {
        return Err(ApiError::invalid_field(
            "node_pool.autoscaling",
            format!("{what} require autoscaling to be enabled: they cannot have a static size."),
        ));
    }
    let min = pool
        .pointer("/autoscaling/minNodeCount")
        .or_else(|| pool.pointer("/autoscaling/totalMinNodeCount"))
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
        .unwrap_or(0);
    if queued && min != 0 {
        return Err(ApiError::invalid_field(
            "node_pool.autoscaling.min_node_count",
            format!("{what} require a minimum node count of 0."),
        ));
    }
    let initial = pool
        .get("initialNodeCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if queued && initial != 0 {
        return Err(ApiError::invalid_field(
            "node_pool.initial_node_count",
            format!(
                "{what} start with no nodes: initial_node_count must be 0, not {initial} \
                 (nodes come only through ProvisioningRequests)."
            ),
        ));
    }
    if flag("/config/spot") || flag("/config/preemptible") {
        return Err(ApiError::invalid_field(
            "node_pool.config.spot",
            format!("{what} cannot use Spot or preemptible VMs."),
        ));
    }
    let reservation = pool
        .pointer("/config/reservationAffinity/consumeReservationType")
        .and_then(Value::as_str)
        .unwrap_or("UNSPECIFIED");
    if !matches!(reservation, "NO_RESERVATION" | "UNSPECIFIED") {
        return Err(ApiError::invalid_field(
            "node_pool.config.reservation_affinity.consume_reservation_type",
            format!("{what} require reservation affinity NO_RESERVATION, not {reservation}."),
        ));
    }
    if flex_start && flag("/management/autoRepair") {
        return Err(ApiError::invalid_field(
            "node_pool.management.auto_repair",
            "Flex-start node pools require node auto-repair to be disabled.",
        ));
    }
    if flex_start {
        check_flex_start_run_duration(pool)?;
    }
    Ok(())
}

/// A flex-start node runs at most seven days, so a longer `maxRunDuration` cannot be honoured.
/// (On other pools the field has no such bound: REST `NodeConfig.maxRunDuration` applies to any
/// node, "If unspecified, the nodes can exist indefinitely".)
fn check_flex_start_run_duration(pool: &Value) -> Result<(), ApiError> {
    let Some(text) = pool
        .pointer("/config/maxRunDuration")
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    // The wire layer has already checked the proto3 form (`-?\d+(\.\d{1,9})?s`).
    let seconds: f64 = text.trim_end_matches('s').parse().unwrap_or(0.0);
    if seconds > FLEX_START_MAX_RUN_SECONDS as f64 {
        return Err(ApiError::invalid_field(
            "node_pool.config.max_run_duration",
            format!(
                "Flex-start nodes run at most {FLEX_START_MAX_RUN_SECONDS}s (7 days); \
                 max_run_duration \"{text}\" is longer."
            ),
        ));
    }
    Ok(())
}
