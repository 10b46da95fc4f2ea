//! The operation methods: list, get, cancel.

use serde_json::{Value, json};

use super::{Ctx, Reply, parse};
use crate::emulator::rpc::ApiError;
use crate::emulator::state::{Effect, OpFailure, State};

/// `l` may be `-`: every location of the project.
pub(super) fn list_operations(
    st: &State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
) -> Result<Reply, ApiError> {
    let ops: Vec<Value> = st
        .operations
        .iter()
        .filter(|o| o.project == p && (l == "-" || o.location == l))
        .map(|o| o.view(ctx.now))
        .collect();
    Ok(("ListOperationsResponse", json!({ "operations": ops })))
}

pub(super) fn get_operation(
    st: &State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    op: &str,
) -> Result<Reply, ApiError> {
    let o = st.op(p, l, op).ok_or_else(|| {
        ApiError::not_found(&format!("projects/{p}/locations/{l}/operations/{op}"))
    })?;
    Ok(("Operation", o.view(ctx.now)))
}

pub(super) fn cancel_operation(
    st: &mut State,
    ctx: &Ctx<'_>,
    p: &str,
    l: &str,
    op: &str,
    body: &Value,
) -> Result<Reply, ApiError> {
    parse("CancelOperationRequest", body)?;
    let idx = st
        .operations
        .iter()
        .position(|o| o.name == op && o.project == p && (l == "-" || o.location == l))
        .ok_or_else(|| {
            ApiError::not_found(&format!("projects/{p}/locations/{l}/operations/{op}"))
        })?;
    let o = &st.operations[idx];
    if o.done {
        return Err(ApiError::failed_precondition(format!(
            "Operation {op} is already done."
        )));
    }
    if matches!(
        o.effect,
        Effect::ClusterCreated | Effect::ClusterDeleted | Effect::PoolCreated | Effect::PoolDeleted
    ) {
        return Err(ApiError::failed_precondition(format!(
            "Operation {op} of type {} cannot be cancelled.",
            o.op_type
        )));
    }
    let o = &mut st.operations[idx];
    o.failure = Some(OpFailure {
        code: 1,
        message: "Operation was cancelled.".into(),
        condition: None,
        canonical: "CANCELLED".into(),
    });
    // Finish it now.
    o.pending_ms = 0;
    o.running_ms = ctx.now.saturating_sub(o.start_ms);
    st.advance(ctx.now, ctx.cfg);
    Ok(("", json!({})))
}
