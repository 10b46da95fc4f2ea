//! What a node pool's provisioning model demands of the rest of the pool: flex-start and queued
//! provisioning (DWS), checked on create and on every mutation that could break them.

use serde_json::Value;

use crate::emulator::EmulatorConfig;
use crate::emulator::defaults::is_tpu_machine;
use crate::emulator::faults::TPU_FLEX_START_QUEUED;
use crate::emulator::rpc::ApiError;

fn tpu_flex_start_queued(pool: &Value) -> bool {
    let machine = pool
        .pointer("/config/machineType")
        .and_then(Value::as_str)
        .unwrap_or("");
    is_tpu_machine(machine)
        && pool.pointer("/config/flexStart").and_then(Value::as_bool) == Some(true)
        && pool
            .pointer("/queuedProvisioning/enabled")
            .and_then(Value::as_bool)
            == Some(true)
}

pub(super) fn check_pool_rules(cfg: &EmulatorConfig, pool: &Value) -> Result<(), ApiError> {
    if cfg.reject_tpu_flex_start_queued && tpu_flex_start_queued(pool) {
        return Err(ApiError::invalid(TPU_FLEX_START_QUEUED));
    }
    check_dws_rules(pool)
}

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
    Ok(())
}
