//! Which GKE calls a federated principal may make (docs/gke.md f.2): the permission each method
//! needs, on which resource (GKE's "API permissions" table), and the roles a principal holds per
//! project (the emulator's table, [`IamTable`]). Callers without a principal from the emulator's
//! STS, and principals the table does not list, are not checked (what the emulator did before it
//! had the table).
//!
//! An emulator with a state directory keeps its table in [`IAM_FILE`] there: read when it starts
//! (the local target starts one for each command, so an edit counts from the next command) and
//! written by `PUT /emulator/iam`.

use std::collections::BTreeMap;
use std::path::Path;

use super::api::Route;
use super::rpc::ApiError;

/// Principal → project id → roles, e.g.
/// `{"principal://iam.googleapis.com/...": {"team-a": ["roles/container.admin"]}}`.
pub type IamTable = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The file in an emulator's state directory holding its IAM table, the JSON `PUT /emulator/iam`
/// takes (for the local target: `<state dir>/gke/iam.json`).
pub const IAM_FILE: &str = "iam.json";

/// The table in `dir`'s [`IAM_FILE`]; `None` when there is none.
pub fn load(dir: &Path) -> anyhow::Result<Option<IamTable>> {
    let path = dir.join(IAM_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!("reading the emulator's IAM table {}: {e}", path.display()),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        anyhow::anyhow!(
            "the emulator's IAM table {}: {e}\nhint: it maps each principal to projects and their roles, e.g. {{\"principal://iam.googleapis.com/...\": {{\"my-project\": [\"roles/container.clusterAdmin\"]}}}}",
            path.display()
        )
    })
}

/// Writes `table` to `dir`'s [`IAM_FILE`] (owner-only, atomically).
pub fn save(dir: &Path, table: &IamTable) -> anyhow::Result<()> {
    let path = dir.join(IAM_FILE);
    let bytes = serde_json::to_vec_pretty(table)?;
    crate::owner_only::write_atomically(&path, &bytes, crate::owner_only::Durability::Rename)
        .map_err(|e| anyhow::anyhow!("writing the emulator's IAM table {}: {e}", path.display()))
}

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

    #[test]
    fn the_table_is_kept_in_the_state_directory_and_a_bad_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_none());
        save(dir.path(), &table()).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(table()));
        std::fs::write(dir.path().join(IAM_FILE), "{\"p\": [\"roles/owner\"]}").unwrap();
        let e = load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("iam.json"), "{e}");
        assert!(e.contains("line 1 column"), "{e}");
        assert!(e.contains("hint: it maps each principal"), "{e}");
    }

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
