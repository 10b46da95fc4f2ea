//! Which GKE calls a federated principal may make (docs/gke.md f.2): the permission each method
//! needs, on which resource (GKE's "API permissions" table), and the roles a principal holds per
//! project (the emulator's table, [`IamTable`]). Callers without a principal from the emulator's
//! STS, and principals the table does not list, are not checked (what the emulator did before it
//! had the table).

use std::collections::BTreeMap;

use super::api::Route;
use super::rpc::ApiError;

/// Principal → project id → roles, e.g.
/// `{"principal://iam.googleapis.com/...": {"team-a": ["roles/container.admin"]}}`.
pub type IamTable = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The permission a call needs and the resource GKE names in its refusal.
pub fn required_permission(method: &str, route: &Route) -> (&'static str, String) {
    let cluster = |p: &str, l: &str, c: &str| format!("projects/{p}/zones/{l}/clusters/{c}");
    match route {
        Route::Clusters { p, .. } if method == "POST" => {
            ("container.clusters.create", format!("projects/{p}"))
        }
        Route::Clusters { p, .. } => ("container.clusters.list", format!("projects/{p}")),
        Route::Cluster {
            p,
            l,
            c,
            verb: None,
            ..
        } if method == "GET" => ("container.clusters.get", cluster(p, l, c)),
        Route::Cluster {
            p,
            l,
            c,
            verb: None,
            ..
        } if method == "DELETE" => ("container.clusters.delete", cluster(p, l, c)),
        Route::Cluster { p, l, c, .. } => ("container.clusters.update", cluster(p, l, c)),
        Route::NodePools { p, l, c } | Route::NodePool { p, l, c, .. } if method == "GET" => {
            ("container.clusters.get", cluster(p, l, c))
        }
        Route::NodePools { p, l, c } | Route::NodePool { p, l, c, .. } => {
            ("container.clusters.update", cluster(p, l, c))
        }
        Route::Operations { p, .. } => ("container.operations.list", format!("projects/{p}")),
        Route::Operation { p, l, op, .. } => (
            "container.operations.get",
            format!("projects/{p}/zones/{l}/operations/{op}"),
        ),
    }
}

/// Whether `role` grants `permission`: the GKE roles that manage clusters grant every
/// `container.clusters.*` and `container.operations.*` permission, the viewer roles the reads.
fn grants(role: &str, permission: &str) -> bool {
    let read = matches!(
        permission,
        "container.clusters.get"
            | "container.clusters.list"
            | "container.operations.get"
            | "container.operations.list"
    );
    match role {
        "roles/owner"
        | "roles/editor"
        | "roles/container.admin"
        | "roles/container.clusterAdmin" => true,
        "roles/viewer" | "roles/container.viewer" | "roles/container.clusterViewer" => read,
        _ => false,
    }
}

/// Checks one call of `principal` against `table`: 403 PERMISSION_DENIED in GKE's words
/// (`Required "container.clusters.create" permission(s) for "projects/P".`) when none of its
/// roles in the call's project grants the permission.
pub fn check(
    table: &IamTable,
    principal: Option<&str>,
    method: &str,
    route: &Route,
) -> Result<(), ApiError> {
    let Some(projects) = principal.and_then(|p| table.get(p)) else {
        return Ok(());
    };
    let (permission, resource) = required_permission(method, route);
    let allowed = projects
        .get(route.project())
        .is_some_and(|roles| roles.iter().any(|r| grants(r, permission)));
    if allowed {
        return Ok(());
    }
    Err(ApiError::permission_denied(format!(
        "Required \"{permission}\" permission(s) for \"{resource}\"."
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::api::parse_route;

    fn table() -> IamTable {
        serde_json::from_value(serde_json::json!({
            "tenant": {"a": ["roles/container.clusterAdmin"], "b": ["roles/container.viewer"]},
        }))
        .unwrap()
    }

    fn call(principal: Option<&str>, method: &str, path: &str) -> Result<(), String> {
        check(&table(), principal, method, &parse_route(path).unwrap()).map_err(|e| {
            assert_eq!((e.http, e.status), (403, "PERMISSION_DENIED"));
            e.message
        })
    }

    #[test]
    fn a_listed_principal_may_do_what_its_roles_in_the_project_grant() {
        let t = Some("tenant");
        assert_eq!(
            call(t, "POST", "/v1/projects/a/locations/z/clusters"),
            Ok(())
        );
        assert_eq!(
            call(t, "GET", "/v1/projects/b/locations/z/clusters/c"),
            Ok(())
        );
        assert_eq!(
            call(t, "POST", "/v1/projects/b/locations/z/clusters"),
            Err("Required \"container.clusters.create\" permission(s) for \"projects/b\".".into())
        );
        assert_eq!(
            call(t, "DELETE", "/v1/projects/b/locations/z/clusters/c/nodePools/np"),
            Err(
                "Required \"container.clusters.update\" permission(s) for \"projects/b/zones/z/clusters/c\"."
                    .into()
            )
        );
        assert_eq!(
            call(t, "GET", "/v1/projects/other/locations/z/clusters/c"),
            Err(
                "Required \"container.clusters.get\" permission(s) for \"projects/other/zones/z/clusters/c\"."
                    .into()
            )
        );
    }

    #[test]
    fn callers_the_table_does_not_list_are_not_checked() {
        assert_eq!(
            call(None, "POST", "/v1/projects/b/locations/z/clusters"),
            Ok(())
        );
        assert_eq!(
            call(
                Some("someone"),
                "DELETE",
                "/v1/projects/b/locations/z/clusters/c"
            ),
            Ok(())
        );
    }
}
