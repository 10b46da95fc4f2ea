//! Fault injection: rules matched against incoming calls.
//!
//! A rule names an HTTP method (or `*`), a path pattern and a fault; it can let the first
//! `after` matching calls through and then fire `times` times (or until cleared). Patterns are
//! globs over the request path without the query, where `*` matches any run of characters
//! (slashes included): `*/nodePools` is every node-pool create, `*:setSize` every resize,
//! `/v1/projects/p/locations/*/clusters/c` one cluster in any location.
//!
//! In process: [`super::Emulator::add_fault`]. Over HTTP: `POST /emulator/faults` with the rule
//! as JSON, `GET /emulator/faults` lists, `DELETE /emulator/faults` clears. Examples:
//!
//! ```json
//! {"method": "POST", "path": "*/nodePools", "fault": {"type": "stockout"}, "times": 1}
//! {"path": "*", "fault": {"type": "unavailable"}, "times": 3}
//! {"method": "GET", "path": "*/operations/*", "fault": {"type": "rate_limited", "retry_after_secs": 1}, "times": 2}
//! {"method": "POST", "path": "*/nodePools", "fault": {"type": "quota_exceeded"}}
//! {"method": "POST", "path": "*/nodePools", "fault": {"type": "tpu_flex_start_queued"}}
//! {"method": "POST", "path": "*/clusters", "fault": {"type": "hang", "millis": 2000}, "times": 1}
//! {"method": "PUT", "path": "*", "fault": {"type": "http", "status": 500, "rpc_status": "INTERNAL", "message": "boom"}}
//! ```

use serde::{Deserialize, Serialize};

use super::rpc::ApiError;

/// What happens to a matching call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// 503 UNAVAILABLE; the call has no effect.
    Unavailable,
    /// 429 RESOURCE_EXHAUSTED (request rate quota), optionally with `Retry-After`.
    RateLimited {
        #[serde(default)]
        retry_after_secs: Option<u64>,
    },
    /// 429 "Too many operations: cluster ... hits the concurrent operations quota 5".
    TooManyOperations,
    /// 403 PERMISSION_DENIED "Insufficient regional quota to satisfy request ...".
    QuotaExceeded {
        #[serde(default)]
        message: Option<String>,
    },
    /// The create is accepted, but its operation ends DONE with error code 8
    /// (RESOURCE_EXHAUSTED), a GCE_STOCKOUT message and condition, and leaves the node pool
    /// (or cluster) in ERROR. Applies to node-pool and cluster creates.
    Stockout {
        #[serde(default)]
        message: Option<String>,
    },
    /// 400 "Flex start node pools don't support TPUs with queued provisioning." (also enabled
    /// for every such pool by [`super::EmulatorConfig::reject_tpu_flex_start_queued`]).
    TpuFlexStartQueued,
    /// Any error response.
    Http {
        status: u16,
        #[serde(default = "default_rpc_status")]
        rpc_status: String,
        #[serde(default = "default_fault_message")]
        message: String,
        #[serde(default)]
        reason: Option<String>,
    },
    /// The call is processed normally, then its response is held for `millis` (so that a client
    /// with a shorter timeout sees a transport error after the request took effect).
    Hang { millis: u64 },
}

fn default_rpc_status() -> String {
    "INTERNAL".into()
}

fn default_fault_message() -> String {
    "Internal error (injected by the emulator).".into()
}

fn any() -> String {
    "*".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// HTTP method, or `*`.
    #[serde(default = "any")]
    pub method: String,
    /// Glob over the path (see the module docs).
    pub path: String,
    pub fault: Fault,
    /// How many times it fires; `None` = until cleared.
    #[serde(default)]
    pub times: Option<u32>,
    /// Matching calls let through before it fires.
    #[serde(default)]
    pub after: u32,
    /// Matching calls seen so far (output).
    #[serde(default)]
    pub seen: u32,
    /// Times fired so far (output).
    #[serde(default)]
    pub fired: u32,
}

impl FaultRule {
    pub fn new(method: &str, path: &str, fault: Fault) -> Self {
        Self {
            method: method.to_string(),
            path: path.to_string(),
            fault,
            times: None,
            after: 0,
            seen: 0,
            fired: 0,
        }
    }
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }
    pub fn after(mut self, n: u32) -> Self {
        self.after = n;
        self
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        (self.method == "*" || self.method.eq_ignore_ascii_case(method)) && glob(&self.path, path)
    }

    fn exhausted(&self) -> bool {
        self.times.is_some_and(|t| self.fired >= t)
    }
}

/// `*` matches any run of characters; everything else literally.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Finds the first live rule matching the call, counts it, and returns its fault if it fires.
pub fn take(rules: &mut Vec<FaultRule>, method: &str, path: &str) -> Option<Fault> {
    let mut fired = None;
    for r in rules.iter_mut() {
        if r.exhausted() || !r.matches(method, path) {
            continue;
        }
        r.seen += 1;
        if r.seen <= r.after {
            continue;
        }
        r.fired += 1;
        fired = Some(r.fault.clone());
        break;
    }
    rules.retain(|r| !r.exhausted());
    fired
}

/// The immediate error for a fault, if it answers before the call is processed.
pub fn immediate_error(fault: &Fault, cluster: Option<&str>) -> Option<ApiError> {
    Some(match fault {
        Fault::Unavailable => ApiError::unavailable(),
        Fault::RateLimited { retry_after_secs } => ApiError {
            retry_after: *retry_after_secs,
            ..ApiError::resource_exhausted(
                "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of \
                 service 'container.googleapis.com'.",
            )
        },
        Fault::TooManyOperations => ApiError::resource_exhausted(format!(
            "Too many operations: cluster \"{}\" hits the concurrent operations quota 5, please \
             try again later.",
            cluster.unwrap_or("-")
        )),
        Fault::QuotaExceeded { message } => ApiError::permission_denied(message.clone().unwrap_or_else(|| {
            "Insufficient regional quota to satisfy request: resource \"TPUS\": request requires \
             '16.0' and is short '16.0'. project has a quota of '0.0' with '0.0' available. View \
             and manage quotas at https://console.cloud.google.com/iam-admin/quotas."
                .to_string()
        })),
        Fault::TpuFlexStartQueued => ApiError::invalid(TPU_FLEX_START_QUEUED),
        Fault::Http {
            status,
            rpc_status,
            message,
            reason,
        } => ApiError {
            reason: reason.clone(),
            ..ApiError::new(*status, leak_status(rpc_status), message.clone())
        },
        Fault::Stockout { .. } | Fault::Hang { .. } => return None,
    })
}

pub const TPU_FLEX_START_QUEUED: &str =
    "Flex start node pools don't support TPUs with queued provisioning.";

fn leak_status(s: &str) -> &'static str {
    const CODES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    CODES
        .iter()
        .find(|c| **c == s)
        .copied()
        .unwrap_or("UNKNOWN")
}

/// The default stockout message, as GKE words a failed CREATE_NODE_POOL (docs/gke.md c.4).
pub fn stockout_message(zone: &str, instance: &str) -> String {
    format!(
        "Google Compute Engine: Not all instances running in IGM after 14.69s. Expected 1, running \
         0, transitioning 1. Current errors: [GCE_STOCKOUT]: Instance '{instance}' creation \
         failed: The zone 'projects/-/zones/{zone}' does not have enough resources available to \
         fulfill the request.  Try a different zone, or try again later."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*", "/v1/x"));
        assert!(glob(
            "*/nodePools",
            "/v1/projects/p/locations/l/clusters/c/nodePools"
        ));
        assert!(!glob(
            "*/nodePools",
            "/v1/projects/p/locations/l/clusters/c/nodePools/x"
        ));
        assert!(glob("*:setSize", "/v1/a/nodePools/np:setSize"));
        assert!(glob(
            "/v1/*/clusters/*",
            "/v1/projects/p/locations/l/clusters/c"
        ));
        assert!(!glob("/v2/*", "/v1/x"));
    }

    #[test]
    fn counting() {
        let mut rules = vec![
            FaultRule::new("POST", "*", Fault::Unavailable)
                .after(1)
                .times(2),
        ];
        assert_eq!(take(&mut rules, "GET", "/a"), None);
        assert_eq!(take(&mut rules, "POST", "/a"), None);
        assert_eq!(take(&mut rules, "POST", "/a"), Some(Fault::Unavailable));
        assert_eq!(take(&mut rules, "post", "/a"), Some(Fault::Unavailable));
        assert_eq!(take(&mut rules, "POST", "/a"), None);
        assert!(rules.is_empty());
    }

    #[test]
    fn json_shape() {
        let r: FaultRule = serde_json::from_str(
            r#"{"method": "POST", "path": "*/nodePools", "fault": {"type": "stockout"}, "times": 1}"#,
        )
        .unwrap();
        assert_eq!(r.fault, Fault::Stockout { message: None });
        assert!(
            serde_json::from_str::<FaultRule>(r#"{"path": "*", "fault": {"type": "nope"}}"#)
                .is_err()
        );
    }
}
