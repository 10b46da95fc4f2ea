//! What a decoded spec would generate (job runs, objects, pool nodes), checked against
//! [`super::limits`] before anything is generated.

use super::diag::Diagnostic;
use super::limits::{MAX_JOB_RUNS, MAX_OBJECTS, MAX_POOL_NODES, count};
use super::node::{Node, Path};
use super::types::Spec;

/// Checks what a decoded spec would generate against [`MAX_JOB_RUNS`], [`MAX_OBJECTS`] and
/// [`MAX_POOL_NODES`], before anything is generated. Each problem points at the value that
/// crosses the limit.
pub fn check_generated(spec: &Spec, root: &Node) -> Vec<Diagnostic> {
    let at = |path: &Path| Some(root.span_at(path));
    let mut out = job_runs_over_limit(spec, &at);
    out.extend(objects_over_limit(spec, &at));
    out.extend(pool_nodes_over_limit(spec, &at));
    out
}

/// Where a [`Path`] of the spec is in its source.
type At<'a> = dyn Fn(&Path) -> Option<super::source::Span> + 'a;

/// Each job whose `count` crosses [`MAX_JOB_RUNS`].
fn job_runs_over_limit(spec: &Spec, at: &At<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, job) in spec.jobs.iter().enumerate() {
        if let Some(n) = job.count
            && n > MAX_JOB_RUNS
        {
            let path = Path::root().key("jobs").index(i).key("count");
            out.push(
                Diagnostic::error(format!(
                    "job `{}` exceeds the limit of {} runs per job: `count: {n}` would submit {} RayJobs",
                    job.name,
                    count(MAX_JOB_RUNS.into()),
                    count(n.into())
                ))
                .at(at(&path))
                .with_path(path.to_string())
                .help(format!(
                    "use a count of at most {}; for more runs, submit them in batches",
                    count(MAX_JOB_RUNS.into())
                )),
            );
        }
    }
    out
}

/// The object that makes the spec cross [`MAX_OBJECTS`], if one does.
fn objects_over_limit(spec: &Spec, at: &At<'_>) -> Option<Diagnostic> {
    // The objects in the order `model::build` renders them; the one that crosses the limit is
    // the one reported.
    let checks = spec.kueue.admission_checks.len()
        + spec
            .kueue
            .flavors
            .iter()
            .filter(|f| f.provisioning.is_some())
            .count();
    let mut objects: u64 = 1 + 2 * checks as u64;
    let mut groups: Vec<(Path, u64)> = Vec::new();
    let kueue = Path::root().key("kueue");
    for (name, n) in [
        ("flavors", spec.kueue.flavors.len()),
        ("clusterQueues", spec.kueue.cluster_queues.len()),
        ("localQueues", spec.kueue.local_queues.len()),
    ] {
        for i in 0..n {
            groups.push((kueue.key(name).index(i), 1));
        }
    }
    for (i, job) in spec.jobs.iter().enumerate() {
        // One ConfigMap (at most) and one RayJob per run.
        let runs = u64::from(job.count.unwrap_or(1).min(MAX_JOB_RUNS));
        groups.push((Path::root().key("jobs").index(i), 1 + runs));
    }
    for i in 0..spec.manifests.len() {
        groups.push((Path::root().key("manifests").index(i), 1));
    }
    for (path, n) in groups {
        objects += n;
        if objects > MAX_OBJECTS as u64 {
            let total = 1
                + 2 * checks
                + spec.kueue.flavors.len()
                + spec.kueue.cluster_queues.len()
                + spec.kueue.local_queues.len()
                + spec.manifests.len()
                + spec
                    .jobs
                    .iter()
                    .map(|j| 1 + j.count.unwrap_or(1).min(MAX_JOB_RUNS) as usize)
                    .sum::<usize>();
            return Some(
                Diagnostic::error(format!(
                    "the spec exceeds the limit of {} Kubernetes objects: with `{path}` it generates more, about {} in all (queues, flavors, checks, a ConfigMap and a RayJob per job run, manifests)",
                    count(MAX_OBJECTS as u64),
                    count(total as u64)
                ))
                .at(at(&path))
                .with_path(path.to_string())
                .help("split the objects across several specs (one per cluster or team)"),
            );
        }
    }
    None
}

/// Each node count that crosses [`MAX_POOL_NODES`] per zone.
fn pool_nodes_over_limit(spec: &Spec, at: &At<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let pool_limit = |out: &mut Vec<Diagnostic>, path: Path, what: &str, n: u32| {
        if n > MAX_POOL_NODES {
            out.push(
                Diagnostic::error(format!(
                    "{what} {} exceeds GKE's limit of {} nodes per zone in a node pool",
                    count(n.into()),
                    count(MAX_POOL_NODES.into())
                ))
                .at(at(&path))
                .with_path(path.to_string())
                .help(format!(
                    "use at most {} per zone; for more nodes, add node pools",
                    count(MAX_POOL_NODES.into())
                )),
            );
        }
    };
    pool_limit(
        &mut out,
        Path::root().key("cluster").key("defaultPool").key("nodes"),
        "`nodes`",
        spec.cluster.default_pool.nodes,
    );
    for (i, pool) in spec.node_pools.iter().enumerate() {
        let p = Path::root().key("nodePools").index(i);
        if let Some(n) = pool.initial_nodes {
            pool_limit(&mut out, p.key("initialNodes"), "`initialNodes`", n);
        }
        if let Some(a) = &pool.autoscaling {
            pool_limit(
                &mut out,
                p.key("autoscaling").key("min"),
                "`autoscaling.min`",
                a.min,
            );
            pool_limit(
                &mut out,
                p.key("autoscaling").key("max"),
                "`autoscaling.max`",
                a.max,
            );
        }
    }
    out
}
