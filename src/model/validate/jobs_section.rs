//! The `jobs` section: queues, workers and accelerators, topologies, durations.

use super::*;

pub(super) fn check_jobs(c: &mut Checker, spec: &Spec) {
    let dws = kueue::dws_flavors(spec);
    let mut config_maps: BTreeMap<(String, String), (String, usize)> = BTreeMap::new();
    for (i, job) in spec.jobs.iter().enumerate() {
        let p = Path::root().key("jobs").index(i);
        if job.count == Some(0) {
            c.error(
                &p.key("count"),
                "count 0 submits no run",
                "use count 1 or more, or remove the job",
            );
        }
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
        let lq = spec
            .kueue
            .local_queues
            .iter()
            .find(|q| q.name == job.queue && q.namespace == job.namespace);
        if lq.is_none() {
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
        let cq = crate::model::queue_of(spec, &job.namespace, &job.queue);
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
        if let Some(d) = &job.duration {
            match parse_whole_seconds(d) {
                Err(_) => c.error(
                    &p.key("duration"),
                    format!("duration `{d}` is not valid"),
                    "write a duration such as 90m, 6h or 2d",
                ),
                Ok(secs)
                    if secs > DWS_MAX_SECONDS
                        && cq.is_some_and(|q| {
                            kueue::queue_flavors(q).iter().any(|f| dws.contains(f))
                        }) =>
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
        let head = p.key("head");
        c.quantity(&head.key("cpu"), &job.head.cpu);
        c.quantity(&head.key("memory"), &job.head.memory);
        if let Some(pool) = &job.head.node_pool {
            let known: Vec<&str> = std::iter::once(spec.cluster.default_pool.name.as_str())
                .chain(spec.node_pools.iter().map(|p| p.name.as_str()))
                .collect();
            if !known.contains(&pool.as_str()) {
                c.unknown_ref(
                    &head.key("nodePool"),
                    "node pool",
                    pool,
                    known.iter().copied(),
                );
            }
        }
        if job.workers.is_empty() {
            c.error(
                &p.key("workers"),
                "a RayJob needs at least one worker group",
                "add a worker group",
            );
        }
        let mut groups = BTreeSet::new();
        let mut has_accelerator = false;
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
            if w.hosts == 0 {
                c.error(
                    &wp.key("hosts"),
                    "hosts must be at least 1",
                    "a multi-host TPU slice has one host per VM",
                );
            }
            c.quantity(&wp.key("cpu"), &w.cpu);
            c.quantity(&wp.key("memory"), &w.memory);
            if let Some(a) = &w.accelerator {
                has_accelerator = true;
                check_accelerator_type(c, &wp.key("accelerator").key("type"), &a.kind);
                if a.chips == 0 {
                    c.error(
                        &wp.key("accelerator").key("chips"),
                        "chips must be at least 1",
                        "set the accelerator chips per pod, e.g. 4 for ct6e-standard-4t",
                    );
                }
                if let (Some(topology), Some(cq)) = (&a.topology, cq) {
                    check_job_topology(c, spec, &wp, cq, w.hosts, a.chips, topology);
                }
                if a.resource
                    .as_deref()
                    .is_some_and(|r| r != DEFAULT_ACCELERATOR_RESOURCE)
                    && cq.is_some()
                {
                    let r = a.resource.clone().unwrap_or_default();
                    let covered = cq.is_some_and(|q| {
                        q.resource_groups.iter().any(|g| g.resources.contains(&r))
                    });
                    if !covered {
                        c.error(
                            &wp.key("accelerator").key("resource"),
                            format!(
                                "ClusterQueue `{}` covers no `{r}`",
                                cq.map(|q| q.name.as_str()).unwrap_or("")
                            ),
                            "add the resource to a resource group of the queue",
                        );
                    }
                }
            }
            check_tolerations(c, &wp.key("tolerations"), &w.tolerations);
        }
        if let Some(cq) = cq {
            let on_dws = kueue::queue_flavors(cq).iter().any(|f| dws.contains(f));
            if on_dws && has_accelerator {
                let explicit = job.workers.iter().any(|w| {
                    w.tolerations
                        .iter()
                        .any(|t| t.key == crate::vocab::labels::QUEUED_TAINT)
                });
                if !explicit {
                    c.note(
                        &p.key("queue"),
                        format!(
                            "queue `{}` can place this job on a DWS flavor: gkq adds the `{}` toleration to its workers",
                            job.queue,
                            crate::vocab::labels::QUEUED_TAINT
                        ),
                    );
                }
            }
            if has_accelerator {
                let covered = cq.resource_groups.iter().any(|g| {
                    g.resources
                        .iter()
                        .any(|r| r == DEFAULT_ACCELERATOR_RESOURCE)
                }) || job.workers.iter().any(|w| {
                    w.accelerator.as_ref().is_some_and(|a| {
                        a.resource
                            .as_deref()
                            .is_some_and(|r| r != DEFAULT_ACCELERATOR_RESOURCE)
                    })
                });
                if !covered {
                    c.error(
                        &p.key("queue"),
                        format!("ClusterQueue `{}` has no quota for {DEFAULT_ACCELERATOR_RESOURCE}, which this job requests", cq.name),
                        "add google.com/tpu to a resource group of the queue: Kueue leaves such a job pending forever",
                    );
                }
            }
        }
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

/// A TPU worker must match a node pool that can hold its slice: pods x chips = topology chips.
pub(super) fn check_job_topology(
    c: &mut Checker,
    spec: &Spec,
    wp: &Path,
    _cq: &crate::spec::types::ClusterQueue,
    hosts: u32,
    chips: u32,
    topology: &str,
) {
    let Some(slice_chips) = topology_chips(topology) else {
        c.error(
            &wp.key("accelerator").key("topology"),
            format!("TPU topology `{topology}` is not valid"),
            "write dimensions joined by x, such as 4x4",
        );
        return;
    };
    if hosts.saturating_mul(chips) != slice_chips {
        c.error(
            &wp.key("hosts"),
            format!("{hosts} hosts x {chips} chips = {} chips, but topology {topology} has {slice_chips}", hosts.saturating_mul(chips)),
            format!("one replica is one {topology} slice: set hosts to {}", slice_chips / chips.max(1)),
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
            &wp.key("accelerator").key("topology"),
            format!("no node pool has TPU topology {topology}"),
            "the job's pods could never be scheduled; match a pool's tpuTopology",
        );
    }
}
