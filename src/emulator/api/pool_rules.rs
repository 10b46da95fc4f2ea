//! What GKE refuses in a node pool, checked on the pool as it would be after a create or any
//! mutation, so that no path (create, update, setAutoscaling, setManagement, a cluster update's
//! `desiredNodePoolAutoscaling`) lets a pool into a state a create would refuse. One function per
//! rule; each rule's source is in docs/gke-facts.md, "L8. What the GKE API refuses".

use serde_json::Value;

use super::dws_rules::check_dws_rules;
use crate::emulator::EmulatorConfig;
use crate::emulator::defaults::is_tpu_machine;
use crate::emulator::faults::TPU_FLEX_START_QUEUED;
use crate::emulator::rpc::ApiError;
use crate::model::gke::{is_compute_engine_name, is_project_id};
use crate::model::gke_facts::{
    FLEX_START_MIN_GKE, FLEX_START_TPU_MIN_GKE, MachineTypeFact, TopologyProblem, VersionVsFloor,
    check_topology, classify_machine_type, compare_with_floor, flex_start_unsupported,
    format_version,
};

/// The `ReservationAffinity.key` that names reservations (REST: `ReservationAffinity`).
pub(super) const RESERVATION_NAME_KEY: &str = "compute.googleapis.com/reservation-name";

/// Every rule of a node pool: `pool` is the pool's JSON as it would be stored, `version` the GKE
/// version its nodes run (for a create, the version it will get).
pub(super) fn check_pool_rules(
    cfg: &EmulatorConfig,
    pool: &Value,
    version: &str,
) -> Result<(), ApiError> {
    if cfg.reject_tpu_flex_start_queued && tpu_flex_start_queued(pool) {
        return Err(ApiError::invalid(TPU_FLEX_START_QUEUED));
    }
    check_dws_rules(pool)?;
    check_reservation_affinity(pool)?;
    check_tpu_topology(pool)?;
    check_flex_start_machine(pool)?;
    check_flex_start_version(pool, version)
}

/// [`check_pool_rules`] for a pool after a mutation: its nodes run its own `version`.
pub(super) fn check_existing_pool(cfg: &EmulatorConfig, pool: &Value) -> Result<(), ApiError> {
    let version = pool.get("version").and_then(Value::as_str).unwrap_or("");
    check_pool_rules(cfg, pool, version)
}

fn flag(pool: &Value, pointer: &str) -> bool {
    pool.pointer(pointer).and_then(Value::as_bool) == Some(true)
}

fn machine_type(pool: &Value) -> &str {
    pool.pointer("/config/machineType")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn tpu_flex_start_queued(pool: &Value) -> bool {
    is_tpu_machine(machine_type(pool))
        && flag(pool, "/config/flexStart")
        && flag(pool, "/queuedProvisioning/enabled")
}

/// `SPECIFIC_RESERVATION` must say which reservations (Compute Engine `ReservationAffinity`:
/// "Must specify key value fields"), and a value under the reservation-name key is a reservation
/// of this project (`NAME`) or a shared one (`projects/PROJECT/reservations/NAME`).
fn check_reservation_affinity(pool: &Value) -> Result<(), ApiError> {
    const FIELD: &str = "node_pool.config.reservation_affinity";
    let Some(affinity) = pool.pointer("/config/reservationAffinity") else {
        return Ok(());
    };
    if affinity
        .get("consumeReservationType")
        .and_then(Value::as_str)
        != Some("SPECIFIC_RESERVATION")
    {
        return Ok(());
    }
    let key = affinity.get("key").and_then(Value::as_str).unwrap_or("");
    let values: Vec<&str> = affinity
        .get("values")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if key.is_empty() || values.is_empty() {
        return Err(ApiError::invalid_field(
            format!("{FIELD}.values"),
            format!(
                "Reservation affinity SPECIFIC_RESERVATION must name the reservation: set key \
                 \"{RESERVATION_NAME_KEY}\" and values [\"NAME\"] or \
                 [\"projects/PROJECT/reservations/NAME\"]."
            ),
        ));
    }
    if key != RESERVATION_NAME_KEY {
        return Ok(());
    }
    match values.iter().find(|v| !is_reservation_reference(v)) {
        Some(bad) => Err(ApiError::invalid_field(
            format!("{FIELD}.values"),
            format!(
                "Invalid reservation \"{bad}\": expected a reservation name (lowercase letters, \
                 digits and '-', starting with a letter, at most 63 characters) or \
                 \"projects/PROJECT/reservations/NAME\" for a shared reservation."
            ),
        )),
        None => Ok(()),
    }
}

/// `NAME` or `projects/PROJECT/reservations/NAME`, optionally followed by
/// `/reservationBlocks/BLOCK` (a block of that reservation), which is accepted unchecked.
fn is_reservation_reference(value: &str) -> bool {
    let (reservation, _block) = match value.split_once("/reservationBlocks/") {
        Some((r, b)) => (r, Some(b)),
        None => (value, None),
    };
    match reservation.split('/').collect::<Vec<_>>().as_slice() {
        [name] => is_compute_engine_name(name),
        ["projects", project, "reservations", name] => {
            is_project_id(project) && is_compute_engine_name(name)
        }
        _ => false,
    }
}

/// `placementPolicy.tpuTopology` is a slice shape of the pool's TPU machine type
/// (docs/gke-facts.md, "Topologies"); other machine types take none.
fn check_tpu_topology(pool: &Value) -> Result<(), ApiError> {
    const FIELD: &str = "node_pool.placement_policy.tpu_topology";
    let Some(topology) = pool
        .pointer("/placementPolicy/tpuTopology")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Ok(());
    };
    let machine = machine_type(pool);
    let (generation, machine_def) = match classify_machine_type(machine) {
        MachineTypeFact::Tpu(g, m) => (g, m),
        // A TPU family newer than gkq's table: its shapes are not known here.
        MachineTypeFact::UnknownTpuFamily { .. } | MachineTypeFact::TpuTypeNotInFamily(_) => {
            return Ok(());
        }
        _ if is_tpu_machine(machine) => return Ok(()),
        _ => {
            return Err(ApiError::invalid_field(
                FIELD,
                format!(
                    "TPU topology \"{topology}\" can only be set on a TPU machine type; \
                     \"{machine}\" is not one."
                ),
            ));
        }
    };
    let why = match check_topology(generation, machine_def, topology) {
        Ok(()) => return Ok(()),
        Err(TopologyProblem::Malformed) => "it is not dimensions joined by 'x'".to_string(),
        Err(TopologyProblem::WrongDimensions) => format!(
            "{} takes {} dimensions",
            generation.label,
            generation.layout.dimensions()
        ),
        Err(TopologyProblem::LargerThanPod) => format!(
            "it is larger than a {} pod of {} chips",
            generation.label, generation.pod_chips
        ),
        Err(TopologyProblem::Unordered { sorted }) => format!("write it as {sorted}"),
        Err(TopologyProblem::NotOffered) => format!("{} offers no such shape", generation.label),
        Err(TopologyProblem::NotForMachineType { machine_types }) => {
            format!("it needs machine type {}", machine_types.join(" or "))
        }
    };
    Err(ApiError::invalid_field(
        FIELD,
        format!("Invalid TPU topology \"{topology}\" for machine type \"{machine}\": {why}."),
    ))
}

/// Flex-start does not support some TPU generations at all (TPU v3 and v4).
fn check_flex_start_machine(pool: &Value) -> Result<(), ApiError> {
    if !flag(pool, "/config/flexStart") {
        return Ok(());
    }
    match classify_machine_type(machine_type(pool)) {
        MachineTypeFact::Tpu(generation, _) if flex_start_unsupported(generation) => {
            Err(ApiError::invalid_field(
                "node_pool.config.flex_start",
                format!(
                    "Flex-start does not support {} (machine type \"{}\").",
                    generation.label,
                    machine_type(pool)
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Flex-start needs a GKE version floor, higher for TPUs than for other machines. Below it the
/// request is well formed but the cluster cannot take it: FAILED_PRECONDITION.
fn check_flex_start_version(pool: &Value, version: &str) -> Result<(), ApiError> {
    if !flag(pool, "/config/flexStart") {
        return Ok(());
    }
    let (floor, what) = if is_tpu_machine(machine_type(pool)) {
        (FLEX_START_TPU_MIN_GKE, "Flex-start node pools with TPUs")
    } else {
        (FLEX_START_MIN_GKE, "Flex-start node pools")
    };
    if compare_with_floor(version, floor) == VersionVsFloor::Below {
        return Err(ApiError::failed_precondition(format!(
            "{what} require GKE version {} or later; the node pool's version is {version}. \
             Upgrade the cluster first.",
            format_version(floor)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservation_references() {
        for ok in [
            "tpu-v6e-res",
            "projects/capacity-project/reservations/tpu-v6e-res",
            "r/reservationBlocks/block-1",
        ] {
            assert!(is_reservation_reference(ok), "{ok}");
        }
        for bad in [
            "",
            "Res",
            "res-",
            "projects/capacity-project/reservations/",
            "projects/p/reservations/res",
            "projects/capacity-project/res/tpu",
            "capacity-project/tpu-v6e-res",
            "projects/capacity-project/reservations/a/b",
        ] {
            assert!(!is_reservation_reference(bad), "{bad}");
        }
    }
}
