//! Error responses in Google's JSON shape (docs/gke.md c.2):
//! `{"error": {"code", "message", "status", "details": [ErrorInfo, BadRequest...],
//! "errors": [{"message", "domain", "reason"}]}}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An API error the emulator answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub http: u16,
    /// google.rpc.Code name.
    pub status: &'static str,
    pub message: String,
    /// `ErrorInfo.reason`, when the real API sends one.
    pub reason: Option<String>,
    /// A `BadRequest.fieldViolations` entry: (field, description).
    pub field: Option<String>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(http: u16, status: &'static str, message: impl Into<String>) -> Self {
        Self {
            http,
            status,
            message: message.into(),
            reason: None,
            field: None,
            retry_after: None,
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "INVALID_ARGUMENT", message)
    }
    pub fn invalid_field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::invalid(message)
        }
    }
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(400, "FAILED_PRECONDITION", message)
    }
    /// "Cluster is running incompatible operation operation-…" (docs/gke.md c.3).
    pub fn cluster_busy(operation: &str) -> Self {
        Self {
            reason: Some("CLUSTER_ALREADY_HAS_OPERATION".into()),
            ..Self::failed_precondition(format!(
                "Cluster is running incompatible operation {operation}."
            ))
        }
    }
    pub fn not_found(resource: &str) -> Self {
        Self::new(404, "NOT_FOUND", format!("Not found: {resource}."))
    }
    pub fn already_exists(resource: &str) -> Self {
        Self::new(
            409,
            "ALREADY_EXISTS",
            format!("Already exists: {resource}."),
        )
    }
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::new(409, "ABORTED", message)
    }
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(403, "PERMISSION_DENIED", message)
    }
    pub fn resource_exhausted(message: impl Into<String>) -> Self {
        Self::new(429, "RESOURCE_EXHAUSTED", message)
    }
    pub fn unavailable() -> Self {
        Self::new(503, "UNAVAILABLE", "The service is currently unavailable.")
    }
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Self::new(501, "UNIMPLEMENTED", message)
    }

    /// The legacy `errors[].reason` for this status (what Go clients print after the comma).
    pub fn legacy_reason(&self) -> &'static str {
        match self.status {
            "INVALID_ARGUMENT" | "OUT_OF_RANGE" => "badRequest",
            "FAILED_PRECONDITION" => "failedPrecondition",
            "NOT_FOUND" => "notFound",
            "ALREADY_EXISTS" => "alreadyExists",
            "ABORTED" => "aborted",
            "PERMISSION_DENIED" => "forbidden",
            "UNAUTHENTICATED" => "authError",
            "RESOURCE_EXHAUSTED" => "rateLimitExceeded",
            "UNIMPLEMENTED" => "notImplemented",
            "UNAVAILABLE" | "INTERNAL" | "UNKNOWN" => "backendError",
            "DEADLINE_EXCEEDED" => "deadlineExceeded",
            _ => "unknown",
        }
    }

    pub fn body(&self) -> Value {
        let mut details = vec![];
        if let Some(reason) = &self.reason {
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "container.googleapis.com",
            }));
        }
        if let Some(field) = &self.field {
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": self.message}],
            }));
        }
        let mut error = json!({
            "code": self.http,
            "message": self.message,
            "errors": [{"message": self.message, "domain": "global", "reason": self.legacy_reason()}],
            "status": self.status,
        });
        if !details.is_empty() {
            error["details"] = Value::Array(details);
        }
        json!({ "error": error })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, json_body(&self.body())).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}

/// A JSON response body with Google's content type.
pub fn json_body(v: &Value) -> impl IntoResponse + use<> {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=UTF-8"),
        )],
        serde_json::to_string_pretty(v).unwrap_or_default(),
    )
}
