//! The `cluster` section: name, version, labels.

use super::*;

pub(super) fn check_cluster(c: &mut Checker, spec: &Spec) {
    let p = Path::root().key("cluster");
    if let Some(v) = &spec.cluster.version
        && parse_minor(v).is_none()
        && v != "latest"
    {
        c.error(
            &p.key("version"),
            format!("GKE version `{v}` is not valid"),
            "write a version such as 1.34 or 1.34.1-gke.1829001",
        );
    }
    if spec.cluster.default_pool.nodes == 0 {
        c.error(
            &p.key("defaultPool").key("nodes"),
            "the default pool needs at least one node",
            "Kueue and the Ray heads run there; use 1 or more",
        );
    }
    check_gke_labels(c, &p.key("labels"), &spec.cluster.labels);
}
