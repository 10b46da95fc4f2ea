//! KubeRay's words for a Ray cluster's pods and its dashboard (docs/kuberay.md 1 and 5): the
//! labels on a cluster's pods, and the port its head serves the Ray dashboard on, read from a
//! RayCluster's `headGroupSpec` as KubeRay v1.7.0 reads it.

use serde_json::Value;

/// KubeRay's label on every pod of a Ray cluster, with the RayCluster's name.
pub const RAY_CLUSTER_LABEL: &str = "ray.io/cluster";
/// KubeRay's label saying whether a pod is the cluster's `head` or a `worker`.
pub const RAY_NODE_TYPE_LABEL: &str = "ray.io/node-type";
/// The port Ray's dashboard listens on unless `rayStartParams` says otherwise.
pub const DEFAULT_DASHBOARD_PORT: u16 = 8265;
/// The name KubeRay gives (and looks for on) the head container's dashboard port.
pub const DASHBOARD_PORT_NAME: &str = "dashboard";

/// Why a head group has no dashboard to reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoDashboard {
    #[error(
        "the Ray head runs without its dashboard (rayStartParams include-dashboard: {0:?}): there is nothing to forward to"
    )]
    Disabled(String),
    #[error(
        "the head group's {0} is {1:?}, not a port number (1 to 65535): fix it in the spec's job"
    )]
    BadPort(&'static str, String),
}

/// The port the head pod of a Ray cluster serves the dashboard on, from the RayCluster's
/// `spec.headGroupSpec`: `rayStartParams["dashboard-port"]` (what `ray start` is told, and what
/// KubeRay's probes check), else the Ray container's port named `dashboard` (what KubeRay's head
/// Service and its SidecarMode submitter use), else 8265.
pub fn dashboard_port(head_group: &Value) -> Result<u16, NoDashboard> {
    let params = &head_group["rayStartParams"];
    if let Some(include) = params["include-dashboard"].as_str()
        && include.trim().eq_ignore_ascii_case("false")
    {
        return Err(NoDashboard::Disabled(include.to_string()));
    }
    if let Some(port) = params.get("dashboard-port").filter(|p| !p.is_null()) {
        let text = match port {
            Value::String(s) => s.trim().to_string(),
            other => other.to_string(),
        };
        return parse_port(&text).ok_or(NoDashboard::BadPort(
            "rayStartParams dashboard-port",
            text.clone(),
        ));
    }
    // The Ray container is the pod template's first (KubeRay's `RayContainerIndex`).
    let named = head_group
        .pointer("/template/spec/containers/0/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|port| port["name"] == DASHBOARD_PORT_NAME);
    match named {
        Some(port) => {
            let number = &port["containerPort"];
            number
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n > 0)
                .ok_or(NoDashboard::BadPort(
                    "Ray container's dashboard containerPort",
                    number.to_string(),
                ))
        }
        None => Ok(DEFAULT_DASHBOARD_PORT),
    }
}

fn parse_port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_dashboard_port_is_the_start_params_then_the_named_port_then_8265() {
        assert_eq!(dashboard_port(&json!({"rayStartParams": {}})), Ok(8265));
        let ports = json!([{"name": "gcs", "containerPort": 6379},
                           {"name": "dashboard", "containerPort": 9000}]);
        let named =
            json!({"template": {"spec": {"containers": [{"name": "ray-head", "ports": ports}]}}});
        assert_eq!(dashboard_port(&named), Ok(9000));
        let mut both = named.clone();
        both["rayStartParams"] = json!({"dashboard-port": "9100"});
        assert_eq!(dashboard_port(&both), Ok(9100));
        // A port on a sidecar is not the Ray container's.
        let sidecar = json!({"template": {"spec": {"containers": [
            {"name": "ray-head"}, {"name": "proxy", "ports": [{"name": "dashboard", "containerPort": 1}]}]}}});
        assert_eq!(dashboard_port(&sidecar), Ok(8265));
    }

    #[test]
    fn no_dashboard_or_a_bad_port_is_said() {
        let off = json!({"rayStartParams": {"include-dashboard": "false"}});
        assert!(matches!(
            dashboard_port(&off),
            Err(NoDashboard::Disabled(_))
        ));
        let bad = json!({"rayStartParams": {"dashboard-port": "http"}});
        assert_eq!(
            dashboard_port(&bad),
            Err(NoDashboard::BadPort(
                "rayStartParams dashboard-port",
                "http".into()
            ))
        );
        let zero = json!({"rayStartParams": {"dashboard-port": 0}});
        assert!(dashboard_port(&zero).is_err());
    }
}
