//! Error responses of the GKE API (`google.rpc.Status` in JSON) mapped to [`GkeError`].
//!
//! The body of a non-2xx response is
//! `{"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "...",
//! "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "...", ...}],
//! "errors": [{"reason": "failedPrecondition", ...}]}}` (docs/gke.md c.2). Classification uses the
//! HTTP status, the ErrorInfo reason, the legacy `errors[].reason` and, for the older wordings of
//! "another operation is running", the message.

use serde_json::Value;

use super::GkeError;

/// The interesting parts of an error body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RpcError {
    pub code: u16,
    /// google.rpc.Code name, e.g. `FAILED_PRECONDITION`.
    pub status: String,
    pub message: String,
    /// `ErrorInfo.reason` from `details`, e.g. `CLUSTER_ALREADY_HAS_OPERATION`.
    pub reason: Option<String>,
    /// Legacy `errors[].reason` values, e.g. `failedPrecondition`.
    pub legacy_reasons: Vec<String>,
}

/// Parses a google.rpc error body; `None` when the body is not one.
pub fn parse_rpc_error(body: &[u8]) -> Option<RpcError> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error")?;
    if !e.is_object() {
        return None;
    }
    let str_of = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let reason = e
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.ErrorInfo"))
        })
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let legacy_reasons = e
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|x| x.get("reason").and_then(Value::as_str).map(str::to_string))
        .collect();
    Some(RpcError {
        code: e.get("code").and_then(Value::as_u64).unwrap_or(0) as u16,
        status: str_of(e.get("status")),
        message: str_of(e.get("message")),
        reason,
        legacy_reasons,
    })
}

/// Pulls `operation-...` out of a message such as
/// `Cluster is running incompatible operation operation-1718024305921-fd4f65ea.`
pub fn extract_operation_id(message: &str) -> Option<String> {
    let start = message.find("operation-")?;
    let id: String = message[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let id = id.trim_end_matches('-').to_string();
    (id.len() > "operation-".len()).then_some(id)
}

/// Maps an HTTP error response to a [`GkeError`]. `what` names the resource for 404s.
pub fn error_from_response(http_status: u16, body: &[u8], what: &str) -> GkeError {
    let rpc = parse_rpc_error(body).unwrap_or_else(|| RpcError {
        code: http_status,
        status: String::new(),
        message: String::from_utf8_lossy(body).chars().take(500).collect(),
        reason: None,
        legacy_reasons: vec![],
    });
    classify(http_status, rpc, what)
}

fn classify(http_status: u16, rpc: RpcError, what: &str) -> GkeError {
    let lower = rpc.message.to_ascii_lowercase();
    let busy_reason = rpc.reason.as_deref() == Some("CLUSTER_ALREADY_HAS_OPERATION");
    // Older wording, same 400/failedPrecondition: "Operation operation-<id> is currently
    // upgrading cluster C. Please wait and try again once it is done."
    let busy_message = lower.contains("incompatible operation")
        || (lower.contains("operation-") && lower.contains("please wait and try again"));
    match http_status {
        404 => GkeError::NotFound {
            what: what.to_string(),
        },
        400 if busy_reason || busy_message => GkeError::ClusterBusy {
            operation: extract_operation_id(&rpc.message),
            message: rpc.message,
        },
        429 if lower.contains("too many operations") || lower.contains("concurrent operations") => {
            GkeError::ClusterBusy {
                operation: extract_operation_id(&rpc.message),
                message: rpc.message,
            }
        }
        409 if rpc.status == "ABORTED" || rpc.status.is_empty() => GkeError::Conflict {
            message: rpc.message,
        },
        403 => GkeError::Forbidden {
            message: rpc.message,
        },
        401 => GkeError::Auth(format!(
            "the GKE API refused the credentials: {}",
            rpc.message
        )),
        _ => GkeError::Api {
            http_status,
            status: rpc.status,
            reason: rpc.reason.or_else(|| rpc.legacy_reasons.into_iter().next()),
            message: rpc.message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn cluster_already_has_operation() {
        let b = body(
            json!({"error": {"code": 400, "status": "FAILED_PRECONDITION",
            "message": "Cluster is running incompatible operation operation-1718024305921-fd4f65ea-7da5.",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "CLUSTER_ALREADY_HAS_OPERATION", "domain": "container.googleapis.com"}],
            "errors": [{"reason": "failedPrecondition"}]}}),
        );
        match error_from_response(400, &b, "x") {
            GkeError::ClusterBusy { operation, .. } => {
                assert_eq!(
                    operation.as_deref(),
                    Some("operation-1718024305921-fd4f65ea-7da5")
                )
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn legacy_wording_and_429() {
        let b = body(json!({"error": {"code": 400, "message":
            "Operation operation-1593 is currently upgrading cluster c. Please wait and try again once it is done.",
            "errors": [{"reason": "failedPrecondition"}]}}));
        assert!(matches!(
            error_from_response(400, &b, "x"),
            GkeError::ClusterBusy { operation: Some(ref o), .. } if o == "operation-1593"
        ));
        let b = body(
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message":
            "Too many operations: cluster \"c\" hits the concurrent operations quota 5, please try again later."}}),
        );
        assert!(matches!(
            error_from_response(429, &b, "x"),
            GkeError::ClusterBusy {
                operation: None,
                ..
            }
        ));
        // A plain rate limit is not "busy".
        let b = body(
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded"}}),
        );
        assert!(matches!(
            error_from_response(429, &b, "x"),
            GkeError::Api {
                http_status: 429,
                ..
            }
        ));
    }

    #[test]
    fn other_statuses() {
        let b =
            body(json!({"error": {"code": 409, "status": "ABORTED", "message": "etag mismatch"}}));
        assert!(matches!(
            error_from_response(409, &b, "x"),
            GkeError::Conflict { .. }
        ));
        let b = body(
            json!({"error": {"code": 409, "status": "ALREADY_EXISTS", "message": "Already exists"}}),
        );
        assert!(matches!(
            error_from_response(409, &b, "x"),
            GkeError::Api { ref status, .. } if status == "ALREADY_EXISTS"
        ));
        let b = body(json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
            "message": "Insufficient regional quota to satisfy request: resource \"TPUS\""}}));
        assert!(matches!(
            error_from_response(403, &b, "x"),
            GkeError::Forbidden { .. }
        ));
        assert!(matches!(
            error_from_response(404, b"", "cluster c"),
            GkeError::NotFound { ref what } if what == "cluster c"
        ));
        match error_from_response(502, b"<html>bad gateway</html>", "x") {
            GkeError::Api {
                http_status,
                message,
                ..
            } => {
                assert_eq!(http_status, 502);
                assert!(message.contains("bad gateway"));
            }
            e => panic!("{e:?}"),
        }
    }
}
