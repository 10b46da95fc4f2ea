//! The `kueue` section: the version and feature gates, flavors, cohorts, ClusterQueues (strategy,
//! fungibility, preemption, resource groups and their quotas, admission checks), LocalQueues.

use super::*;
use crate::spec::types::{ClusterQueue, FlavorQuota, ResourceGroup};

pub(super) fn check_kueue(c: &mut Checker, spec: &Spec) {
    let k = Path::root().key("kueue");
    check_version_and_gates(c, spec, &k);
    check_flavors(c, spec, &k);
    let mut flavor_used_by: BTreeMap<&str, &str> = BTreeMap::new();
    for (qi, cq) in spec.kueue.cluster_queues.iter().enumerate() {
        let q = k.key("clusterQueues").index(qi);
        check_queue_policies(c, &q, cq);
        check_resource_groups(c, spec, &q, cq, &mut flavor_used_by);
        check_queue_admission_checks(c, spec, &q, cq);
    }
    check_unused_flavors(c, spec, &k, &flavor_used_by);
    check_local_queues(c, spec, &k);
}

fn check_version_and_gates(c: &mut Checker, spec: &Spec, k: &Path) {
    let v = &spec.kueue.version;
    let version_ok = v.strip_prefix('v').is_some_and(|rest| {
        let parts: Vec<_> = rest.split('.').collect();
        parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok())
    });
    if !version_ok {
        c.error(
            &k.key("version"),
            format!("Kueue version `{v}` is not valid"),
            "write a release tag such as v0.19.2",
        );
    }
    if spec.kueue.feature_gates.get("ElasticJobsViaWorkloadSlices") == Some(&false)
        && spec.jobs.iter().any(|j| j.elastic)
    {
        c.error(
            &k.key("featureGates").key("ElasticJobsViaWorkloadSlices"),
            "elastic jobs need the ElasticJobsViaWorkloadSlices feature gate",
            "remove this line (the gate is on by default since Kueue v0.18) or set it to true",
        );
    }
}

fn check_flavors(c: &mut Checker, spec: &Spec, k: &Path) {
    let pool_names: Vec<&str> = std::iter::once(spec.cluster.default_pool.name.as_str())
        .chain(spec.node_pools.iter().map(|p| p.name.as_str()))
        .collect();
    for (i, f) in spec.kueue.flavors.iter().enumerate() {
        let p = k.key("flavors").index(i);
        if let Some(pool) = &f.node_pool {
            if !pool_names.contains(&pool.as_str()) {
                c.unknown_ref(
                    &p.key("nodePool"),
                    "node pool",
                    pool,
                    pool_names.iter().copied(),
                );
            }
            if f.provisioning.is_some()
                && let Some(np) = spec.node_pools.iter().find(|n| &n.name == pool)
                && !np.queued_provisioning
            {
                c.error(
                            &p.key("provisioning"),
                            format!("flavor `{}` uses DWS provisioning but node pool `{pool}` has no queued provisioning", f.name),
                            format!("set `queuedProvisioning: true` (and `flexStart: true`) on node pool `{pool}`"),
                        );
            }
        } else if f.node_labels.is_empty() {
            c.warning(
                &p.key("name"),
                format!("flavor `{}` has no node labels: it matches every pod, on any node", f.name),
                "set `nodePool:` or `nodeLabels:` so Kueue's choice of flavor decides where pods run",
            );
        }
        check_k8s_labels(c, &p.key("nodeLabels"), "node label", &f.node_labels);
        check_taints(c, &p.key("nodeTaints"), &f.node_taints);
        check_tolerations(c, &p.key("tolerations"), &f.tolerations);
    }
}

/// Queueing strategy, flavor fungibility and preemption policies.
fn check_queue_policies(c: &mut Checker, q: &Path, cq: &ClusterQueue) {
    if let Some(s) = &cq.queueing_strategy
        && s != "BestEffortFIFO"
        && s != "StrictFIFO"
    {
        c.error(
            &q.key("queueingStrategy"),
            format!("queueing strategy `{s}` is not valid"),
            "use BestEffortFIFO or StrictFIFO",
        );
    }
    if let Some(ff) = &cq.flavor_fungibility {
        for (key, v) in [
            ("whenCanBorrow", &ff.when_can_borrow),
            ("whenCanPreempt", &ff.when_can_preempt),
        ] {
            if let Some(v) = v
                && v != "MayStopSearch"
                && v != "TryNextFlavor"
            {
                c.error(
                    &q.key("flavorFungibility").key(key),
                    format!("`{v}` is not valid for {key}"),
                    "use MayStopSearch or TryNextFlavor (Kueue v1beta2 dropped Borrow and Preempt)",
                );
            }
        }
    }
    if let Some(pre) = &cq.preemption {
        let check = |c: &mut Checker, key: &str, v: &Option<String>, allowed: &[&str]| {
            if let Some(v) = v
                && !allowed.contains(&v.as_str())
            {
                c.error(
                    &q.key("preemption").key(key),
                    format!("`{v}` is not valid for preemption.{key}"),
                    format!("use one of: {}", allowed.join(", ")),
                );
            }
        };
        check(
            c,
            "withinClusterQueue",
            &pre.within_cluster_queue,
            &["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
        );
        check(
            c,
            "reclaimWithinCohort",
            &pre.reclaim_within_cohort,
            &["Never", "LowerPriority", "Any"],
        );
        check(
            c,
            "borrowWithinCohort",
            &pre.borrow_within_cohort,
            &["Never", "LowerPriority"],
        );
        if pre
            .borrow_within_cohort
            .as_deref()
            .is_some_and(|b| b != "Never")
            && pre
                .reclaim_within_cohort
                .as_deref()
                .is_none_or(|r| r == "Never")
        {
            c.error(
                &q.key("preemption").key("borrowWithinCohort"),
                "borrowWithinCohort needs reclaimWithinCohort other than Never",
                "Kueue rejects this combination; set reclaimWithinCohort to LowerPriority or Any",
            );
        }
    }
}

/// Resource groups: each resource in one group, each flavor once, and every flavor's quotas.
fn check_resource_groups<'s>(
    c: &mut Checker,
    spec: &'s Spec,
    q: &Path,
    cq: &'s ClusterQueue,
    flavor_used_by: &mut BTreeMap<&'s str, &'s str>,
) {
    let flavor_names: Vec<&str> = spec.kueue.flavors.iter().map(|f| f.name.as_str()).collect();
    if cq.resource_groups.is_empty() {
        c.error(
            &q.key("resourceGroups"),
            format!("ClusterQueue `{}` has no resource groups", cq.name),
            "add a resource group with flavors and quotas",
        );
    }
    if cq.resource_groups.len() > 16 {
        c.error(
            &q.key("resourceGroups"),
            "a ClusterQueue has at most 16 resource groups",
            "merge groups",
        );
    }
    let mut resource_group: BTreeMap<&str, usize> = BTreeMap::new();
    let mut flavor_group: BTreeMap<&str, usize> = BTreeMap::new();
    for (gi, g) in cq.resource_groups.iter().enumerate() {
        let gp = q.key("resourceGroups").index(gi);
        if g.resources.is_empty() {
            c.error(
                &gp.key("resources"),
                "a resource group covers at least one resource",
                "list resources such as [cpu, memory, google.com/tpu]",
            );
        }
        for (ri, r) in g.resources.iter().enumerate() {
            if let Some(other) = resource_group.insert(r.as_str(), gi) {
                if other != gi {
                    c.error(
                        &gp.key("resources").index(ri),
                        format!("resource `{r}` is covered by resource groups {other} and {gi}"),
                        "a resource may appear in only one group",
                    );
                } else {
                    c.error(
                        &gp.key("resources").index(ri),
                        format!("resource `{r}` is listed twice"),
                        "remove the repeat",
                    );
                }
            }
        }
        if g.flavors.len() > 64 {
            c.error(
                &gp.key("flavors"),
                "a resource group has at most 64 flavors",
                "split the group",
            );
        }
        for (fi, fq) in g.flavors.iter().enumerate() {
            let fp = gp.key("flavors").index(fi);
            if !flavor_names.contains(&fq.name.as_str()) {
                c.unknown_ref(
                    &fp.key("name"),
                    "flavor",
                    &fq.name,
                    flavor_names.iter().copied(),
                );
            }
            if let Some(other) = flavor_group.insert(fq.name.as_str(), gi) {
                c.error(
                    &fp.key("name"),
                    format!(
                        "flavor `{}` appears twice (groups {other} and {gi})",
                        fq.name
                    ),
                    "a flavor may appear once per ClusterQueue",
                );
            }
            flavor_used_by.insert(fq.name.as_str(), cq.name.as_str());
            check_flavor_quota(c, &fp, cq, g, fq);
        }
    }
}

/// One flavor's quota in a resource group: a quota for every covered resource and none for
/// others, lending at most the nominal quota, limits only within a cohort.
fn check_flavor_quota(
    c: &mut Checker,
    fp: &Path,
    cq: &ClusterQueue,
    g: &ResourceGroup,
    fq: &FlavorQuota,
) {
    for r in &g.resources {
        if !fq.quota.contains_key(r) {
            c.error(
                &fp.key("quota"),
                format!(
                    "flavor `{}` has no quota for `{r}`, which the group covers",
                    fq.name
                ),
                format!(
                    "add `{r}: 0` (or a quota) so every flavor covers the group's resources {:?}",
                    g.resources
                ),
            );
        }
    }
    for (r, qty) in &fq.quota {
        let rp = fp.key("quota").key(r.clone());
        if !g.resources.contains(r) {
            let help = match suggest(r, g.resources.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None => {
                    format!("add `{r}` to the group's resources, or remove this quota")
                }
            };
            c.error_at_key(
                &rp,
                format!("quota for `{r}`, which the resource group does not cover"),
                help,
            );
        }
        let nominal = c.quantity(&rp, qty);
        if let (Some(nominal), Some(lend)) = (nominal, fq.lending_limit.get(r))
            && let Some(lend) = c.quantity(&fp.key("lendingLimit").key(r.clone()), lend)
            && lend > nominal
        {
            c.error(
                &fp.key("lendingLimit").key(r.clone()),
                format!("lending limit {lend} is above the nominal quota {nominal}"),
                "a queue can lend at most its nominal quota",
            );
        }
    }
    for (key, limits) in [
        ("borrowingLimit", &fq.borrowing_limit),
        ("lendingLimit", &fq.lending_limit),
    ] {
        for (r, qty) in limits {
            let lp = fp.key(key).key(r.clone());
            c.quantity(&lp, qty);
            if cq.cohort.is_none() {
                c.error(
                    &lp,
                    format!("{key} needs a cohort"),
                    "set `cohort:` on the ClusterQueue, or remove the limit",
                );
            }
            if !g.resources.contains(r) {
                c.error_at_key(
                    &lp,
                    format!("{key} for `{r}`, which the resource group does not cover"),
                    "remove it or add the resource to the group",
                );
            }
        }
    }
}

/// The queue's admission checks exist and name only its own flavors; its namespace selector
/// admits some namespace.
fn check_queue_admission_checks(c: &mut Checker, spec: &Spec, q: &Path, cq: &ClusterQueue) {
    // The spec's checks and those written as raw AdmissionCheck manifests.
    let check_names: Vec<String> = kueue::provisioning_checks(spec)
        .into_iter()
        .map(|c| c.name)
        .chain(
            spec.manifests
                .iter()
                .filter(|m| m["kind"] == "AdmissionCheck")
                .filter_map(|m| m["metadata"]["name"].as_str().map(str::to_string)),
        )
        .collect();
    let cq_flavors = kueue::queue_flavors(cq);
    for (ai, ac) in cq.admission_checks.iter().enumerate() {
        let ap = q.key("admissionChecks").index(ai);
        if !check_names.contains(&ac.name) {
            c.unknown_ref(
                &ap.key("name"),
                "admission check",
                &ac.name,
                check_names.iter().map(String::as_str),
            );
        }
        for (fi, f) in ac.on_flavors.iter().enumerate() {
            if !cq_flavors.contains(&f.as_str()) {
                c.unknown_ref(
                    &ap.key("onFlavors").index(fi),
                    "flavor of this ClusterQueue",
                    f,
                    cq_flavors.iter().copied(),
                );
            }
        }
    }
    if let Some(sel) = &cq.namespace_selector
        && sel.is_null()
    {
        c.warning(
            &q.key("namespaceSelector"),
            "a null namespaceSelector admits no namespace",
            "remove it (gkq writes `{}`: all namespaces) or give a selector",
        );
    }
}

fn check_unused_flavors(
    c: &mut Checker,
    spec: &Spec,
    k: &Path,
    flavor_used_by: &BTreeMap<&str, &str>,
) {
    for (i, f) in spec.kueue.flavors.iter().enumerate() {
        if !flavor_used_by.contains_key(f.name.as_str()) {
            c.warning(
                &k.key("flavors").index(i).key("name"),
                format!("flavor `{}` is in no ClusterQueue", f.name),
                "add it to a ClusterQueue's resource group, or remove it",
            );
        }
    }
    if !kueue::dws_flavors(spec).is_empty() {
        let dws_check = kueue::dws_check_name(spec);
        for (i, ac) in spec.kueue.admission_checks.iter().enumerate() {
            if ac.name == dws_check {
                c.note(
                    &k.key("admissionChecks").index(i).key("name"),
                    format!("`provisioning: dws` flavors use this check instead of creating `{DWS_CHECK}`"),
                );
            }
        }
    }
}

fn check_local_queues(c: &mut Checker, spec: &Spec, k: &Path) {
    let cq_names: Vec<&str> = spec
        .kueue
        .cluster_queues
        .iter()
        .map(|q| q.name.as_str())
        .collect();
    for (i, lq) in spec.kueue.local_queues.iter().enumerate() {
        if !cq_names.contains(&lq.cluster_queue.as_str()) {
            c.unknown_ref(
                &k.key("localQueues").index(i).key("clusterQueue"),
                "ClusterQueue",
                &lq.cluster_queue,
                cq_names.iter().copied(),
            );
        }
        if !is_dns_label(&lq.namespace) {
            c.error(
                &k.key("localQueues").index(i).key("namespace"),
                format!("namespace `{}` is not valid", lq.namespace),
                "use a DNS label",
            );
        }
    }
}
