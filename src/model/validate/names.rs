//! Names: run names of jobs (KubeRay and Kubernetes limits) and the names of every object gkq makes.

use super::*;

/// KubeRay refuses a RayJob whose name is longer than 47 characters or does not start with a
/// letter (it names the RayCluster, Services and Pods after it); each run's name counts,
/// `-N` suffix of `count` included.
pub(super) fn check_run_names(c: &mut Checker, spec: &Spec) {
    let max = crate::model::gke::RAYJOB_NAME_MAX;
    for (i, job) in spec.jobs.iter().enumerate() {
        let longest = match job.count {
            Some(n) => format!("{}-{n}", job.name),
            None => job.name.clone(),
        };
        let path = Path::root().key("jobs").index(i).key("name");
        if !job.name.starts_with(|ch: char| ch.is_ascii_lowercase()) && !job.name.is_empty() {
            c.error(
                &path,
                format!("job name `{}` does not start with a letter", job.name),
                "KubeRay refuses RayJob names that start with a digit or `-`: start it with a lowercase letter",
            );
        } else if longest.len() > max {
            c.error(
                &path,
                format!(
                    "job name `{}` gives runs named up to `{longest}`, {} characters",
                    job.name,
                    longest.len()
                ),
                format!(
                    "KubeRay refuses RayJob names longer than {max} characters: shorten the name by {}",
                    longest.len() - max
                ),
            );
        }
    }
}

/// The names of everything gkq makes: each valid for what it names, run names KubeRay takes,
/// no name used twice.
pub(super) fn check_names(c: &mut Checker, spec: &Spec) {
    check_name_syntax(c, spec);
    check_run_names(c, spec);
    check_duplicate_names(c, spec);
    check_run_collisions(c, spec);
}

/// Every name gkq gives an object, with what it names and where the spec writes it.
fn named_objects(spec: &Spec) -> Vec<(&'static str, Path, &str)> {
    let root = Path::root();
    let k = root.key("kueue");
    [(
        "cluster",
        root.key("cluster").key("name"),
        spec.cluster.name.as_str(),
    )]
    .into_iter()
    .chain(spec.node_pools.iter().enumerate().map(|(i, p)| {
        (
            "node pool",
            root.key("nodePools").index(i).key("name"),
            p.name.as_str(),
        )
    }))
    .chain(spec.kueue.flavors.iter().enumerate().map(|(i, f)| {
        (
            "flavor",
            k.key("flavors").index(i).key("name"),
            f.name.as_str(),
        )
    }))
    .chain(spec.kueue.cluster_queues.iter().enumerate().map(|(i, q)| {
        (
            "ClusterQueue",
            k.key("clusterQueues").index(i).key("name"),
            q.name.as_str(),
        )
    }))
    .chain(spec.kueue.local_queues.iter().enumerate().map(|(i, q)| {
        (
            "LocalQueue",
            k.key("localQueues").index(i).key("name"),
            q.name.as_str(),
        )
    }))
    .chain(spec.jobs.iter().enumerate().map(|(i, j)| {
        (
            "job",
            root.key("jobs").index(i).key("name"),
            j.name.as_str(),
        )
    }))
    .collect()
}

/// Each name follows the rule of what it names: GKE's for the cluster and node pools, a DNS
/// subdomain for flavors and ClusterQueues, a DNS label for the rest.
fn check_name_syntax(c: &mut Checker, spec: &Spec) {
    for (what, path, name) in named_objects(spec) {
        let (ok, rule) = match what {
            "cluster" | "node pool" => (
                crate::model::gke::is_gke_name(name),
                format!(
                    "GKE takes lowercase letters, digits and `-`, starting with a letter and not ending with `-`, at most {} characters",
                    crate::model::gke::GKE_NAME_MAX
                ),
            ),
            "flavor" | "ClusterQueue" => (
                is_dns_subdomain(name),
                "use lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit, at most 253 characters".to_string(),
            ),
            _ => (
                is_dns_label(name),
                "use lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63 characters".to_string(),
            ),
        };
        if !ok {
            c.error(&path, format!("{what} name `{name}` is not valid"), rule);
        }
    }
}

/// Names used twice in a section, and a node pool named like the default pool.
fn check_duplicate_names(c: &mut Checker, spec: &Spec) {
    let root = Path::root();
    let k = root.key("kueue");
    c.duplicates(
        "node pool",
        &root.key("nodePools"),
        spec.node_pools.iter().map(|p| p.name.clone()).enumerate(),
    );
    if let Some(i) = spec
        .node_pools
        .iter()
        .position(|p| p.name == spec.cluster.default_pool.name)
    {
        c.error(
            &root.key("nodePools").index(i).key("name"),
            format!(
                "node pool `{}` has the default pool's name",
                spec.node_pools[i].name
            ),
            "rename it, or change cluster.defaultPool.name",
        );
    }
    c.duplicates(
        "flavor",
        &k.key("flavors"),
        spec.kueue
            .flavors
            .iter()
            .map(|p| p.name.clone())
            .enumerate(),
    );
    c.duplicates(
        "ClusterQueue",
        &k.key("clusterQueues"),
        spec.kueue
            .cluster_queues
            .iter()
            .map(|p| p.name.clone())
            .enumerate(),
    );
    c.duplicates(
        "LocalQueue",
        &k.key("localQueues"),
        spec.kueue
            .local_queues
            .iter()
            .map(|q| format!("{}/{}", q.namespace, q.name))
            .enumerate(),
    );
    c.duplicates(
        "admission check",
        &k.key("admissionChecks"),
        spec.kueue
            .admission_checks
            .iter()
            .map(|p| p.name.clone())
            .enumerate(),
    );
}

/// Runs of different jobs must not collide (`train` with count 2 and a job named `train-1`).
fn check_run_collisions(c: &mut Checker, spec: &Spec) {
    let mut runs: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (i, job) in spec.jobs.iter().enumerate() {
        for run in crate::model::jobs::run_names(job) {
            if let Some(first) = runs.insert((job.namespace.clone(), run.clone()), i) {
                c.error(
                    &Path::root().key("jobs").index(i).key("name"),
                    format!("job run `{run}` is defined twice (jobs {first} and {i})"),
                    "job names (with their `-N` run suffixes) must be unique per namespace",
                );
            }
        }
    }
}
