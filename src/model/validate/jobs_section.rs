//! The `jobs` section: queues, runs and scripts, what each kind needs (a RayJob's head and
//! worker groups, a JobSet's replicated jobs, a batch Job's pods), every group's resources,
//! accelerators, topologies, node selection and tolerations, and durations.

use super::*;
use crate::model::gke_facts::FLEX_START_MAX_RUN_SECONDS;
use crate::model::jobs::{PodGroupRef, pod_groups};
use crate::spec::types::{ClusterQueue, Job, JobKind};

pub(super) fn check_jobs(c: &mut Checker, spec: &Spec) {
    let mut config_maps: BTreeMap<(String, String), (String, usize)> = BTreeMap::new();
    for (i, job) in spec.jobs.iter().enumerate() {
        let p = Path::root().key("jobs").index(i);
        check_runs(c, &p, job);
        check_config_map(c, &p, i, job, &mut config_maps);
        check_queue_ref(c, spec, &p, job);
        let cq = crate::model::queue_of(spec, &job.namespace, &job.queue);
        check_duration(c, spec, &p, job, cq);
        match job.kind {
            JobKind::RayJob => check_ray_job(c, &p, job),
            JobKind::JobSet => check_job_set(c, &p, job),
            JobKind::Job => check_batch_job(c, &p, job),
        }
        check_fields_of_other_kinds(c, &p, job);
        check_k8s_labels(c, &p.key("labels"), "label", &job.labels);
        check_annotation_keys(c, &p.key("annotations"), &job.annotations);
        if let Some(class) = &job.priority_class {
            // gkq writes it as the value of Kueue's priority-class label.
            check_label_value(c, &p.key("priorityClass"), "priorityClass", class);
        }
        for group in pod_groups(job) {
            check_pod_group(c, spec, &p, &group, cq);
        }
        if let Some(cq) = cq {
            check_queue_covers_accelerators(c, spec, &p, job, cq);
        }
    }
}

/// Where a group of pods is in the spec: `jobs[i].head`, `jobs[i].workers[w]`,
/// `jobs[i].replicatedJobs[r]`, `jobs[i].pods`.
pub(super) fn group_path(job: &Path, group: &PodGroupRef<'_>) -> Path {
    let p = job.key(group.section);
    match group.index {
        Some(i) => p.index(i),
        None => p,
    }
}

/// Where a group's pod fields (cpu, memory, accelerator, ...) are: the group itself, or its
/// `pods:` block.
pub(super) fn pods_path(job: &Path, group: &PodGroupRef<'_>) -> Path {
    let p = group_path(job, group);
    if group.pods_nested { p.key("pods") } else { p }
}

/// Where a group's pods per replica are set, and the key's name: `hosts`, or a batch Job's
/// `parallelism`.
pub(super) fn hosts_path(job: &Path, group: &PodGroupRef<'_>) -> (Path, &'static str) {
    match group.section {
        "pods" => (job.key("parallelism"), "parallelism"),
        _ => (group_path(job, group).key("hosts"), "hosts"),
    }
}

fn check_runs(c: &mut Checker, p: &Path, job: &Job) {
    if job.count == Some(0) {
        c.error(
            &p.key("count"),
            "count 0 submits no run",
            "use count 1 or more, or remove the job",
        );
    }
}

/// Two jobs may share a ConfigMap only if they ship the same script.
fn check_config_map(
    c: &mut Checker,
    p: &Path,
    i: usize,
    job: &Job,
    config_maps: &mut BTreeMap<(String, String), (String, usize)>,
) {
    let cm = crate::model::jobs::config_map_name(job);
    if let Some((script, first)) =
        config_maps.insert((job.namespace.clone(), cm.clone()), (job.script.clone(), i))
        && script != job.script
    {
        c.error(
            &p.key("configMap"),
            format!(
                "ConfigMap `{cm}` would hold both `{script}` (job {first}) and `{}`",
                job.script
            ),
            "give one of the jobs its own `configMap:` name",
        );
    }
}

fn check_queue_ref(c: &mut Checker, spec: &Spec, p: &Path, job: &Job) {
    let exists = spec
        .kueue
        .local_queues
        .iter()
        .any(|q| q.name == job.queue && q.namespace == job.namespace);
    if !exists {
        let known: Vec<&str> = spec
            .kueue
            .local_queues
            .iter()
            .filter(|q| q.namespace == job.namespace)
            .map(|q| q.name.as_str())
            .collect();
        c.unknown_ref(
            &p.key("queue"),
            &format!("LocalQueue in namespace `{}`", job.namespace),
            &job.queue,
            known.iter().copied(),
        );
    }
}

fn check_duration(c: &mut Checker, spec: &Spec, p: &Path, job: &Job, cq: Option<&ClusterQueue>) {
    let Some(d) = &job.duration else {
        return;
    };
    let dws = kueue::dws_flavors(spec);
    match parse_whole_seconds(d) {
        Err(_) => c.error(
            &p.key("duration"),
            format!("duration `{d}` is not valid"),
            "write a duration such as 90m, 6h or 2d",
        ),
        Ok(secs)
            if secs > FLEX_START_MAX_RUN_SECONDS
                && cq.is_some_and(|q| kueue::queue_flavors(q).iter().any(|f| dws.contains(f))) =>
        {
            c.error(
                &p.key("duration"),
                format!("duration {d} exceeds the 7 days DWS flex-start capacity lives"),
                "split the run, checkpoint and resume, or keep this job off the DWS flavor",
            )
        }
        _ => {}
    }
}

/// A RayJob: a head, worker groups (none for a head-only Ray cluster) with valid, unique names
/// and replica bounds, autoscaling only when elastic, and shutdown after finishing.
fn check_ray_job(c: &mut Checker, p: &Path, job: &Job) {
    if job.head.is_none() {
        c.error(
            p,
            format!("RayJob `{}` has no `head`", job.name),
            "add `head:` with the Ray head's cpu and memory",
        );
    }
    if job.autoscaling && !job.elastic {
        c.error(
            &p.key("autoscaling"),
            "Ray in-tree autoscaling needs an elastic job",
            "add `elastic: true` (Kueue rejects enableInTreeAutoscaling without the kueue.x-k8s.io/elastic-job annotation)",
        );
    }
    if !job.shutdown_after_job_finishes {
        c.error(
            &p.key("shutdownAfterJobFinishes"),
            "Kueue-managed RayJobs must shut down after they finish",
            "remove this line or set it to true",
        );
    }
    let mut groups = BTreeSet::new();
    for (wi, w) in job.workers.iter().enumerate() {
        let wp = p.key("workers").index(wi);
        if !is_dns_label(&w.group.to_lowercase()) || w.group.eq_ignore_ascii_case("head") {
            c.error(
                &wp.key("group"),
                format!("worker group name `{}` is not valid", w.group),
                "use a DNS label other than `head`",
            );
        }
        if !groups.insert(w.group.to_lowercase()) {
            c.error(
                &wp.key("group"),
                format!("duplicate worker group `{}`", w.group),
                "group names must be unique within a job",
            );
        }
        let min = w.min_replicas.unwrap_or(0);
        let max = w.max_replicas.unwrap_or(u32::MAX);
        if w.replicas < min || w.replicas > max {
            c.error(
                &wp.key("replicas"),
                format!("replicas {} is outside [minReplicas {min}, maxReplicas {}]", w.replicas, w.max_replicas.map(|m| m.to_string()).unwrap_or_else(|| "unbounded".into())),
                "KubeRay runs clamp(replicas, min, max) while Kueue counts replicas: keep min <= replicas <= max",
            );
        }
    }
}

/// A JobSet: at least one replicated job, names that are unique DNS labels (Kueue names a
/// podset after each, in lower case), at least one replica each.
fn check_job_set(c: &mut Checker, p: &Path, job: &Job) {
    if job.replicated_jobs.is_empty() {
        c.error(
            &p.key("kind"),
            format!("JobSet `{}` has no `replicatedJobs`", job.name),
            "add `replicatedJobs:` with at least one entry (name, replicas, hosts, cpu, memory)",
        );
    }
    let mut names = BTreeSet::new();
    for (ri, r) in job.replicated_jobs.iter().enumerate() {
        let rp = p.key("replicatedJobs").index(ri);
        if !is_dns_label(&r.name) {
            c.error(
                &rp.key("name"),
                format!("replicated job name `{}` is not valid", r.name),
                "use a DNS label: lower-case letters, digits and '-', at most 63 characters",
            );
        }
        if !names.insert(r.name.to_lowercase()) {
            c.error(
                &rp.key("name"),
                format!("duplicate replicated job `{}`", r.name),
                "replicated job names must be unique within a JobSet",
            );
        }
        if r.replicas == 0 {
            c.error(
                &rp.key("replicas"),
                "replicas must be at least 1",
                "one replica is one Job (for a TPU, one slice)",
            );
        }
    }
}

/// A batch Job: its pods, and completions no fewer than parallelism would make useful.
fn check_batch_job(c: &mut Checker, p: &Path, job: &Job) {
    if job.pods.is_none() {
        c.error(
            &p.key("kind"),
            format!("Job `{}` has no `pods`", job.name),
            "add `pods:` with the cpu and memory of each pod",
        );
    }
    if job.parallelism == Some(0) {
        c.error(
            &p.key("parallelism"),
            "parallelism 0 runs no pod, and Kueue admits a podset of 0 pods",
            "set parallelism to 1 or more",
        );
    }
    if job.completions == Some(0) {
        c.error(
            &p.key("completions"),
            "completions 0 means the Job is done before it starts",
            "set completions to 1 or more, or remove it (it defaults to parallelism)",
        );
    }
    check_batch_job_on_one_host(c, p, job);
}

/// A batch Job runs on single-host slices only. The VMs of a multi-host slice run one program
/// together: each pod needs its index and its peers' stable hostnames, which GKE's example gets
/// from an Indexed Job and a headless Service. gkq writes neither for a `kind: job`; a JobSet
/// has both by default (its Jobs are Indexed, and it makes the headless Service), so gkq points
/// there instead (docs/kueue.md, "Multi-host TPU jobs").
fn check_batch_job_on_one_host(c: &mut Checker, p: &Path, job: &Job) {
    let Some(a) = job.pods.as_ref().and_then(|pods| pods.accelerator.as_ref()) else {
        return;
    };
    let Some(topology) = a
        .topology
        .as_deref()
        .filter(|_| crate::model::jobs::is_tpu(a))
    else {
        return;
    };
    let Some(slice_chips) = topology_chips(topology) else {
        return;
    };
    let hosts = slice_chips / a.chips.max(1);
    if hosts > 1 {
        c.error(
            &p.key("kind"),
            format!(
                "a batch Job cannot run a {topology} TPU slice: its {hosts} hosts need an index and each other's hostnames (an Indexed Job and a headless Service), which gkq does not write for `kind: job`"
            ),
            format!(
                "use `kind: jobset` with `replicatedJobs: [{{name: slice, replicas: 1, hosts: {hosts}, pods: ...}}]`: JobSet makes its Jobs Indexed and gives their pods a headless Service"
            ),
        );
    }
}

/// Fields that only mean something for another kind are errors, not silently ignored.
fn check_fields_of_other_kinds(c: &mut Checker, p: &Path, job: &Job) {
    let kind = job.kind.kind_name();
    let mut misplaced = |present: bool, key: &str, belongs: &str| {
        if present {
            c.error_at_key(
                &p.key(key),
                format!("`{key}` is for {belongs}, but this job is a {kind}"),
                format!("remove `{key}`, or set `kind:` to the kind it is for"),
            );
        }
    };
    let ray = job.kind == JobKind::RayJob;
    misplaced(!ray && job.head.is_some(), "head", "a RayJob");
    misplaced(!ray && !job.workers.is_empty(), "workers", "a RayJob");
    misplaced(!ray && !job.pip.is_empty(), "pip", "a RayJob");
    misplaced(
        !ray && job.submission_mode.is_some(),
        "submissionMode",
        "a RayJob",
    );
    misplaced(!ray && job.autoscaling, "autoscaling", "a RayJob");
    misplaced(!ray && job.elastic, "elastic", "a RayJob");
    misplaced(
        !ray && !job.shutdown_after_job_finishes,
        "shutdownAfterJobFinishes",
        "a RayJob",
    );
    let set = job.kind == JobKind::JobSet;
    misplaced(
        !set && !job.replicated_jobs.is_empty(),
        "replicatedJobs",
        "a JobSet",
    );
    let batch = job.kind == JobKind::Job;
    misplaced(
        !batch && job.parallelism.is_some(),
        "parallelism",
        "a batch Job",
    );
    misplaced(
        !batch && job.completions.is_some(),
        "completions",
        "a batch Job",
    );
    misplaced(!batch && job.pods.is_some(), "pods", "a batch Job");
}

/// One group of pods: hosts, quantities, the node pool it names, its accelerator, limits, node
/// affinity and tolerations.
fn check_pod_group(
    c: &mut Checker,
    spec: &Spec,
    job: &Path,
    group: &PodGroupRef<'_>,
    cq: Option<&ClusterQueue>,
) {
    // A batch Job's pod count is checked as parallelism and completions.
    if group.hosts == 0 && group.section != "pods" {
        c.error(
            &hosts_path(job, group).0,
            "hosts must be at least 1",
            "a multi-host TPU slice has one host per VM",
        );
    }
    let gp = &pods_path(job, group);
    c.quantity(&gp.key("cpu"), group.cpu);
    c.quantity(&gp.key("memory"), group.memory);
    if let Some(pool) = group.node_pool {
        check_node_pool_ref(c, spec, &gp.key("nodePool"), pool);
    }
    if let Some(a) = group.accelerator {
        check_accelerator(c, spec, job, group, a, cq);
    }
    check_limits(c, gp, group);
    check_node_affinity(
        c,
        &gp.key("requiredNodeAffinity"),
        group.required_node_affinity,
    );
    check_tolerations(c, &gp.key("tolerations"), group.tolerations);
    check_k8s_labels(
        c,
        &gp.key("nodeSelector"),
        "node selector",
        group.node_selector,
    );
}

fn check_node_pool_ref(c: &mut Checker, spec: &Spec, path: &Path, pool: &str) {
    let known: Vec<&str> = std::iter::once(spec.cluster.default_pool.name.as_str())
        .chain(spec.node_pools.iter().map(|p| p.name.as_str()))
        .collect();
    if !known.contains(&pool) {
        c.unknown_ref(path, "node pool", pool, known.iter().copied());
    }
}

fn check_accelerator(
    c: &mut Checker,
    spec: &Spec,
    job: &Path,
    group: &PodGroupRef<'_>,
    a: &crate::spec::types::Accelerator,
    cq: Option<&ClusterQueue>,
) {
    let ap = pods_path(job, group).key("accelerator");
    check_accelerator_type(c, &ap.key("type"), &a.kind);
    if a.chips == 0 {
        c.error(
            &ap.key("chips"),
            "chips must be at least 1",
            "set the accelerator chips per pod, e.g. 4 for ct6e-standard-4t",
        );
    }
    if let (Some(topology), Some(_)) = (&a.topology, cq) {
        let (hosts_at, hosts_key) = hosts_path(job, group);
        let slice = Slice {
            hosts: group.hosts,
            chips: a.chips,
            topology,
        };
        check_job_topology(c, spec, &hosts_at, hosts_key, &ap.key("topology"), &slice);
    }
    if let (Some(r), Some(cq)) = (
        a.resource
            .as_deref()
            .filter(|r| *r != DEFAULT_ACCELERATOR_RESOURCE),
        cq,
    ) {
        let covered = cq
            .resource_groups
            .iter()
            .any(|g| g.resources.iter().any(|x| x == r));
        if !covered {
            c.error(
                &ap.key("resource"),
                format!("ClusterQueue `{}` covers no `{r}`", cq.name),
                "add the resource to a resource group of the queue",
            );
        }
    }
}

/// Limits: valid quantities, no limit below its request, and an accelerator's limit equal to
/// its request (Kubernetes refuses extended resources whose request and limit differ, and
/// GKE's TPU pods ask for whole chips).
fn check_limits(c: &mut Checker, gp: &Path, group: &PodGroupRef<'_>) {
    let Some(limits) = group.limits else {
        return;
    };
    let lp = gp.key("limits");
    for (name, q) in limits {
        let Some(limit) = c.quantity(&lp.key(name), q) else {
            continue;
        };
        let request = match name.as_str() {
            "cpu" => Quantity::parse(&group.cpu.as_text()).ok(),
            "memory" => Quantity::parse(&group.memory.as_text()).ok(),
            _ => None,
        };
        if let Some(request) = request
            && request > limit
        {
            c.error(
                &lp.key(name),
                format!("limit {name} {} is below the request {}", q.as_text(), match name.as_str() { "cpu" => group.cpu.as_text(), _ => group.memory.as_text() }),
                "raise the limit to the request or more (Kubernetes and Kueue refuse requests above limits)",
            );
        }
        if let Some(a) = group.accelerator
            && *name == crate::model::jobs::accelerator_resource(a)
            && limit != Quantity::from_units(i128::from(a.chips), Format::DecimalSI)
        {
            c.error(
                &lp.key(name),
                format!("{name} limit {} differs from the request of {} chips", q.as_text(), a.chips),
                format!("an accelerator's request and limit must be equal: remove `{name}` from limits (gkq sets it to `chips`)"),
            );
        }
    }
}

const NODE_SELECTOR_OPERATORS: [&str; 6] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

/// Required node affinity: known operators with the values each needs.
fn check_node_affinity(
    c: &mut Checker,
    path: &Path,
    requirements: &[crate::spec::types::NodeSelectorRequirement],
) {
    for (i, r) in requirements.iter().enumerate() {
        let rp = path.index(i);
        if r.key.is_empty() {
            c.error(
                &rp.key("key"),
                "a node affinity key is empty",
                "name a node label, such as cloud.google.com/gke-nodepool",
            );
        } else {
            check_label_key(c, &rp.key("key"), "node affinity key", &r.key);
        }
        let op = r.operator.as_str();
        if !NODE_SELECTOR_OPERATORS.contains(&op) {
            let help = match suggest(op, NODE_SELECTOR_OPERATORS) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("use one of: {}", NODE_SELECTOR_OPERATORS.join(", ")),
            };
            c.error(
                &rp.key("operator"),
                format!("node affinity operator `{op}` is not valid"),
                help,
            );
            continue;
        }
        match op {
            "In" | "NotIn" if r.values.is_empty() => c.error(
                &rp.key("operator"),
                format!("operator {op} needs at least one value"),
                "add `values: [...]`",
            ),
            "Exists" | "DoesNotExist" if !r.values.is_empty() => c.error(
                &rp.key("values"),
                format!("operator {op} takes no values"),
                "remove `values`, or use In or NotIn",
            ),
            "Gt" | "Lt" if r.values.len() != 1 || r.values[0].parse::<i64>().is_err() => c.error(
                &rp.key("operator"),
                format!("operator {op} needs exactly one integer value"),
                "write `values: [\"4\"]`",
            ),
            _ => {}
        }
    }
}

/// The queue must have quota for the TPUs the job asks for; on a DWS queue, gkq says it adds
/// the queued-provisioning toleration.
fn check_queue_covers_accelerators(
    c: &mut Checker,
    spec: &Spec,
    p: &Path,
    job: &Job,
    cq: &ClusterQueue,
) {
    let groups = pod_groups(job);
    let accelerators: Vec<&crate::spec::types::Accelerator> =
        groups.iter().filter_map(|g| g.accelerator).collect();
    if accelerators.is_empty() {
        return;
    }
    let dws = kueue::dws_flavors(spec);
    let on_dws = kueue::queue_flavors(cq).iter().any(|f| dws.contains(f));
    if on_dws {
        let explicit = groups.iter().any(|g| {
            g.tolerations
                .iter()
                .any(|t| t.key == crate::vocab::labels::QUEUED_TAINT)
        });
        if !explicit {
            let whom = match job.kind {
                JobKind::RayJob => "workers",
                JobKind::JobSet | JobKind::Job => "accelerator pods",
            };
            c.note(
                &p.key("queue"),
                format!(
                    "queue `{}` can place this job on a DWS flavor: gkq adds the `{}` toleration to its {whom}",
                    job.queue,
                    crate::vocab::labels::QUEUED_TAINT
                ),
            );
        }
    }
    let covered = cq.resource_groups.iter().any(|g| {
        g.resources
            .iter()
            .any(|r| r == DEFAULT_ACCELERATOR_RESOURCE)
    }) || accelerators.iter().any(|a| !crate::model::jobs::is_tpu(a));
    if !covered {
        c.error(
            &p.key("queue"),
            format!("ClusterQueue `{}` has no quota for {DEFAULT_ACCELERATOR_RESOURCE}, which this job requests", cq.name),
            "add google.com/tpu to a resource group of the queue: Kueue leaves such a job pending forever",
        );
    }
}

/// A TPU accelerator type GKE does not have (the values of the
/// `cloud.google.com/gke-tpu-accelerator` node label are in the table of GKE facts) selects no node, and the job waits forever.
pub(super) fn check_accelerator_type(c: &mut Checker, path: &Path, kind: &str) {
    let known = crate::model::gke_facts::tpu_accelerators();
    if kind.to_ascii_lowercase().starts_with("tpu") && !known.contains(&kind) {
        let help = match suggest(kind, known.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("use one of: {}", known.join(", ")),
        };
        c.error(
            path,
            format!("`{kind}` is not a GKE TPU accelerator type: no node carries it, so the job could never be scheduled"),
            help,
        );
    }
}

/// One replica of a TPU group: `hosts` pods of `chips` chips as a `topology` slice.
struct Slice<'a> {
    hosts: u32,
    chips: u32,
    topology: &'a str,
}

/// A TPU group must match a node pool that can hold its slice: pods x chips = topology chips.
fn check_job_topology(
    c: &mut Checker,
    spec: &Spec,
    hosts_at: &Path,
    hosts_key: &str,
    topology_at: &Path,
    slice: &Slice<'_>,
) {
    let Slice {
        hosts,
        chips,
        topology,
    } = *slice;
    let Some(slice_chips) = topology_chips(topology) else {
        c.error(
            topology_at,
            format!("TPU topology `{topology}` is not valid"),
            "write dimensions joined by x, such as 4x4",
        );
        return;
    };
    if hosts.saturating_mul(chips) != slice_chips {
        c.error(
            hosts_at,
            format!("{hosts} hosts x {chips} chips = {} chips, but topology {topology} has {slice_chips}", hosts.saturating_mul(chips)),
            format!("one replica is one {topology} slice: set {hosts_key} to {}", slice_chips / chips.max(1)),
        );
    }
    let pools: Vec<&str> = spec
        .node_pools
        .iter()
        .filter(|p| p.tpu_topology.as_deref() == Some(topology))
        .map(|p| p.name.as_str())
        .collect();
    if pools.is_empty() && spec.node_pools.iter().any(|p| p.tpu_topology.is_some()) {
        c.warning(
            topology_at,
            format!("no node pool has TPU topology {topology}"),
            "the job's pods could never be scheduled; match a pool's tpuTopology",
        );
    }
}
