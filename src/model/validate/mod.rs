//! Cross-field and cross-resource checks. Every problem is reported at once, each at the value
//! that causes it, with a hint.

use std::collections::{BTreeMap, BTreeSet};

mod capacity;
mod cluster;
mod facts;
mod jobs_section;
mod kueue_section;
mod ladder;
mod ladder_gke;
mod manifests;
mod names;
mod node_pools;
mod prerequisites;
mod unmodelled;

use crate::model::gke::{topology_chips, tpu_chips_per_vm, tpu_hosts};
use crate::model::kueue::{self, DEFAULT_ACCELERATOR_RESOURCE, DWS_CHECK};
use crate::spec::types::{Quantity as SpecQuantity, Spec, Taint, Toleration};
use crate::spec::{Diagnostic, Diagnostics, Loaded, Path, suggest};
use crate::vocab::duration::parse_whole_seconds;
use crate::vocab::label_syntax::{
    KEY_RULE, LABEL_VALUE_RULE, is_dns_label, is_dns_subdomain, key_problem, label_value_problem,
};
use crate::vocab::object::{At, Field};
use crate::vocab::quantity::{Format, Quantity};

pub(super) struct Checker<'a> {
    loaded: &'a Loaded,
    diags: Diagnostics,
    /// In [`check_rendered`], the spec's raw manifests as rendered (labelled), in their order:
    /// the spec itself may no longer hold them (`model::build_moving_manifests`). Empty in
    /// [`validate`], which reads `spec.manifests`.
    rendered_manifests: &'a [std::sync::Arc<serde_json::Value>],
}

impl Checker<'_> {
    fn push(&mut self, d: Diagnostic, path: &Path) {
        let span = self.loaded.span(path);
        self.diags
            .push(d.at(Some(span)).with_path(path.to_string()));
    }

    pub(super) fn error(&mut self, path: &Path, msg: impl Into<String>, help: impl Into<String>) {
        self.push(Diagnostic::error(msg).help(help), path);
    }

    /// Points at a map key rather than its value (for keys that should not be there).
    pub(super) fn error_at_key(
        &mut self,
        path: &Path,
        msg: impl Into<String>,
        help: impl Into<String>,
    ) {
        let mut parent = path.clone();
        let key = match parent.0.pop() {
            Some(crate::spec::node::Seg::Key(k)) => k,
            _ => return self.error(path, msg, help),
        };
        let span = self
            .loaded
            .root
            .at(&parent)
            .and_then(|n| n.key_span(&key))
            .unwrap_or_else(|| self.loaded.span(path));
        self.diags.push(
            Diagnostic::error(msg)
                .help(help)
                .at(Some(span))
                .with_path(path.to_string()),
        );
    }

    pub(super) fn warning(&mut self, path: &Path, msg: impl Into<String>, help: impl Into<String>) {
        self.push(Diagnostic::warning(msg).help(help), path);
    }

    fn note(&mut self, path: &Path, msg: impl Into<String>) {
        self.push(Diagnostic::note(msg), path);
    }

    pub(super) fn unknown_ref<'n>(
        &mut self,
        path: &Path,
        what: &str,
        name: &str,
        known: impl IntoIterator<Item = &'n str> + Clone,
    ) {
        let list: Vec<&str> = known.clone().into_iter().collect();
        let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        // "flavor of this ClusterQueue" -> "flavors of this ClusterQueue".
        let plural = match what.split_once(" of ") {
            Some((head, rest)) => format!("{head}s of {rest}"),
            None => format!("{what}s"),
        };
        let help = match suggest(name, known) {
            Some(s) => format!("did you mean `{s}`?"),
            None if list.is_empty() => format!("define {article} {what} first"),
            None => format!("defined {plural}: {}", list.join(", ")),
        };
        self.error(path, format!("{what} `{name}` is not defined"), help);
    }

    fn quantity(&mut self, path: &Path, q: &SpecQuantity) -> Option<Quantity> {
        match Quantity::parse(&q.as_text()) {
            Ok(v) if v.is_negative() => {
                self.error(
                    path,
                    format!("quantity `{}` is negative", q.as_text()),
                    "quotas and requests are zero or more",
                );
                None
            }
            Ok(v) => Some(v),
            Err(e) => {
                self.error(
                    path,
                    e.to_string(),
                    "write a Kubernetes quantity such as 16, 500m, 4Gi or 75Gi",
                );
                None
            }
        }
    }

    fn duplicates(
        &mut self,
        what: &str,
        base: &Path,
        names: impl IntoIterator<Item = (usize, String)>,
    ) {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, name) in names {
            if let Some(first) = seen.get(&name) {
                self.error(
                    &base.index(i).key("name"),
                    format!("duplicate {what} `{name}`"),
                    format!("{what} names must be unique; the first `{name}` is at index {first}"),
                );
            } else {
                seen.insert(name, i);
            }
        }
    }
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

pub fn validate(loaded: &Loaded) -> Diagnostics {
    let mut c = Checker {
        loaded,
        diags: Diagnostics::default(),
        rendered_manifests: &[],
    };
    let spec = &loaded.spec;
    let root = Path::root();

    names::check_names(&mut c, spec);
    cluster::check_cluster(&mut c, spec);
    node_pools::check_node_pools(&mut c, spec);
    kueue_section::check_kueue(&mut c, spec);
    jobs_section::check_jobs(&mut c, spec);
    manifests::check_manifests(&mut c, spec);
    unmodelled::check_unmodelled(&mut c, spec);
    prerequisites::check_prerequisites(&mut c, spec);
    capacity::check(&mut c, spec);
    ladder::check(&mut c, spec);
    ladder_gke::check(&mut c, spec);
    facts::check(&mut c, spec);

    if spec.project.trim().is_empty() {
        c.error(
            &root.key("project"),
            "`project` is empty",
            "set the Google Cloud project ID",
        );
    }
    if spec.location.trim().is_empty() {
        c.error(
            &root.key("location"),
            "`location` is empty",
            "set a zone such as us-east5-b",
        );
    }
    c.diags
}

fn parse_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn check_gke_labels(c: &mut Checker, path: &Path, labels: &BTreeMap<String, String>) {
    for (k, v) in labels {
        let valid = |s: &str| {
            s.chars()
                .all(|ch| ch.is_lowercase() || ch.is_ascii_digit() || ch == '_' || ch == '-')
        };
        if k.is_empty()
            || k.len() > 63
            || !k.starts_with(|ch: char| ch.is_lowercase())
            || !valid(k)
            || v.len() > 63
            || !valid(v)
        {
            c.error(
                &path.key(k.clone()),
                format!("GKE resource label `{k}: {v}` is not valid"),
                "keys start with a lowercase letter; keys and values use lowercase letters, digits, `_` and `-`, at most 63 characters",
            );
        }
        if k.starts_with("goog-") {
            c.error(
                &path.key(k.clone()),
                format!("label `{k}` uses the `goog-` prefix, which GKE reserves"),
                "choose another key",
            );
        }
    }
}

/// Kubernetes labels (node labels, job labels, node selectors, a flavor's node labels): every
/// key and value as the API server checks them (`vocab::label_syntax`).
fn check_k8s_labels(c: &mut Checker, path: &Path, what: &str, labels: &BTreeMap<String, String>) {
    for (k, v) in labels {
        if let Some(problem) = key_problem(k) {
            c.error_at_key(
                &path.key(k.clone()),
                format!("{what} key `{k}` is not valid: {problem}"),
                KEY_RULE,
            );
        }
        check_label_value(c, &path.key(k.clone()), &format!("{what} `{k}`"), v);
    }
}

/// Annotation keys: the label key rule, which the API server applies to the lowercased key.
fn check_annotation_keys(c: &mut Checker, path: &Path, annotations: &BTreeMap<String, String>) {
    for k in annotations.keys() {
        if let Some(problem) = key_problem(&k.to_lowercase()) {
            c.error_at_key(
                &path.key(k.clone()),
                format!("annotation key `{k}` is not valid: {problem}"),
                KEY_RULE,
            );
        }
    }
}

fn check_label_key(c: &mut Checker, path: &Path, what: &str, key: &str) {
    if let Some(problem) = key_problem(key) {
        c.error(
            path,
            format!("{what} `{key}` is not valid: {problem}"),
            KEY_RULE,
        );
    }
}

/// A value gkq writes as a Kubernetes label value (or a taint's or toleration's value).
fn check_label_value(c: &mut Checker, path: &Path, what: &str, value: &str) {
    if let Some(problem) = label_value_problem(value) {
        c.error(
            path,
            format!("{what}: `{value}` is not a Kubernetes label value: {problem}"),
            LABEL_VALUE_RULE,
        );
    }
}

fn check_taints(c: &mut Checker, path: &Path, taints: &[Taint]) {
    for (i, t) in taints.iter().enumerate() {
        check_label_key(c, &path.index(i).key("key"), "taint key", &t.key);
        if let Some(v) = &t.value {
            check_label_value(c, &path.index(i).key("value"), "taint value", v);
        }
        if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
            let help = suggest(&t.effect, TAINT_EFFECTS)
                .map(|s| format!("did you mean `{s}`?"))
                .unwrap_or_else(|| "use NoSchedule, PreferNoSchedule or NoExecute".into());
            c.error(
                &path.index(i).key("effect"),
                format!("taint effect `{}` is not valid", t.effect),
                help,
            );
        }
    }
}

fn check_tolerations(c: &mut Checker, path: &Path, tolerations: &[Toleration]) {
    for (i, t) in tolerations.iter().enumerate() {
        // An empty key with `Exists` tolerates every taint.
        if !t.key.is_empty() {
            check_label_key(c, &path.index(i).key("key"), "toleration key", &t.key);
        }
        if let Some(v) = &t.value {
            check_label_value(c, &path.index(i).key("value"), "toleration value", v);
        }
        if let Some(op) = &t.operator {
            if op != "Exists" && op != "Equal" {
                c.error(
                    &path.index(i).key("operator"),
                    format!("toleration operator `{op}` is not valid"),
                    "use Exists or Equal",
                );
            }
            if op == "Exists" && t.value.is_some() {
                c.error(
                    &path.index(i).key("value"),
                    "a toleration with operator Exists takes no value",
                    "remove `value`, or use operator Equal",
                );
            }
        }
        if let Some(e) = &t.effect
            && !TAINT_EFFECTS.contains(&e.as_str())
        {
            c.error(
                &path.index(i).key("effect"),
                format!("toleration effect `{e}` is not valid"),
                "use NoSchedule, PreferNoSchedule or NoExecute",
            );
        }
    }
}

/// Where `kueue.clusterQueues[qi].resourceGroups[gi].flavors[fi].quota` is.
fn quota_path(qi: usize, gi: usize, fi: usize) -> Path {
    Path::root()
        .key("kueue")
        .key("clusterQueues")
        .index(qi)
        .key("resourceGroups")
        .index(gi)
        .key("flavors")
        .index(fi)
        .key("quota")
}

/// Every flavor quota of every ClusterQueue, with where its `quota` map is.
pub(super) fn flavor_quotas(
    spec: &Spec,
) -> impl Iterator<Item = (Path, &crate::spec::types::FlavorQuota)> {
    spec.kueue
        .cluster_queues
        .iter()
        .enumerate()
        .flat_map(|(qi, queue)| {
            queue
                .resource_groups
                .iter()
                .enumerate()
                .flat_map(move |(gi, group)| {
                    group
                        .flavors
                        .iter()
                        .enumerate()
                        .map(move |(fi, quota)| (quota_path(qi, gi, fi), quota))
                })
        })
}

/// The checks that need the rendered objects: each job's Workload as Kueue would see it, the
/// raw jobs of `manifests:`, manifests that collide with what gkq makes, and quotas against
/// what their node pools can hold.
///
/// `manifests` is how many of the spec's raw manifests were rendered: the last objects of
/// `desired`, which these checks read in place of `spec.manifests`.
pub fn check_rendered(
    loaded: &Loaded,
    desired: &super::DesiredState,
    manifests: usize,
) -> Diagnostics {
    let rendered = &desired.kubernetes;
    let mut c = Checker {
        loaded,
        diags: Diagnostics::default(),
        rendered_manifests: &rendered[rendered.len().saturating_sub(manifests)..],
    };
    let spec = &loaded.spec;
    let mut cluster = crate::placement::Cluster::default();
    for o in &desired.kubernetes {
        // Rendered from a validated spec; anything placement cannot read was reported above.
        // Jobs are not part of the cluster: each is checked on its own below.
        let _ = cluster.add_object(o);
    }
    capacity::check_queued_flavors(&mut c, spec, &cluster);
    let rendered_jobs = RenderedJobs::index(desired);
    for (i, job) in spec.jobs.iter().enumerate() {
        check_rendered_job(&mut c, spec, &cluster, &rendered_jobs, i, job);
    }
    check_manifest_jobs(&mut c, spec, &cluster);
    manifests::check_manifest_collisions(&mut c, desired);
    check_quotas_against_pools(&mut c, spec, &cluster);
    c.diags
}

/// The rendered objects by (kind, namespace, name), the first of each, for finding each job's
/// object once instead of searching every object per job.
struct RenderedJobs<'a>(
    std::collections::HashMap<(&'a str, &'a str, &'a str), &'a serde_json::Value>,
);

impl<'a> RenderedJobs<'a> {
    fn index(desired: &'a super::DesiredState) -> Self {
        let mut by_key = std::collections::HashMap::new();
        for object in &desired.kubernetes {
            let key = (
                object.field("kind").and_then(serde_json::Value::as_str),
                crate::vocab::object::namespace_of(object),
                object
                    .at("/metadata/name")
                    .and_then(serde_json::Value::as_str),
            );
            if let (Some(kind), Some(namespace), Some(name)) = key {
                by_key.entry((kind, namespace, name)).or_insert(&**object);
            }
        }
        RenderedJobs(by_key)
    }

    /// The Workload of a job's first run, read from its rendered object; `None` when the job
    /// has no run or its object cannot be read as one (reported elsewhere).
    fn workload(&self, job: &crate::spec::types::Job) -> Option<crate::placement::PendingWorkload> {
        let first_run = super::jobs::run_names(job).into_iter().next()?;
        let key = (
            job.kind.kind_name(),
            job.namespace.as_str(),
            first_run.as_str(),
        );
        let object = self.0.get(&key)?;
        crate::placement::PendingWorkload::from_object(object).ok()
    }
}

/// A job's Workload: no more podsets than Kueue allows, a DWS request GKE accepts, and a
/// flavor that can ever admit it.
fn check_rendered_job(
    c: &mut Checker,
    spec: &Spec,
    cluster: &crate::placement::Cluster,
    rendered_jobs: &RenderedJobs<'_>,
    i: usize,
    job: &crate::spec::types::Job,
) {
    use crate::placement::podsets::MAX_POD_SETS;
    let Some(workload) = rendered_jobs.workload(job) else {
        return;
    };
    let p = Path::root().key("jobs").index(i);
    if workload.pod_sets.len() > MAX_POD_SETS {
        c.error(
            &p.key("kind"),
            format!(
                "job `{}` makes {} podsets, more than the {MAX_POD_SETS} a Kueue Workload may have: Kueue cannot create its Workload and the job stays suspended",
                job.name,
                workload.pod_sets.len()
            ),
            "merge groups of pods that ask for the same resources and node selection",
        );
        return;
    }
    let groups = super::jobs::pod_groups(job);
    check_dws_request_shape(c, spec, cluster, &workload, &p.key("queue"), |podset| {
        groups
            .iter()
            .find(|g| g.name.to_lowercase() == podset)
            .map(|g| jobs_section::group_path(&p, g))
    });
    if let Err(reason) = crate::placement::fits_ever(cluster, &workload) {
        let at = match job.kind {
            crate::spec::types::JobKind::RayJob => p.key("workers"),
            crate::spec::types::JobKind::JobSet => p.key("replicatedJobs"),
            crate::spec::types::JobKind::Job => p.key("pods"),
        };
        c.error(
            &at,
            format!("job `{}` can never be admitted by queue `{}`: {reason}", job.name, job.queue),
            "raise a flavor's quota, add a flavor that fits, or shrink the job: Kueue would keep it pending forever",
        );
    }
}

/// Raw jobs of the kinds Kueue manages here, written in `manifests:`: a DWS request GKE accepts.
fn check_manifest_jobs(c: &mut Checker, spec: &Spec, cluster: &crate::placement::Cluster) {
    for (i, manifest) in c.rendered_manifests.iter().enumerate() {
        use crate::placement::PendingWorkload;
        let run_kind = matches!(manifest["kind"].as_str(), Some("RayJob" | "JobSet" | "Job"));
        // A DWS request is made for a queued job only: a job without a queue is not read into
        // podsets at all (most of a spec's jobs may be outside Kueue).
        if !run_kind || !PendingWorkload::job_may_name_a_queue(manifest) {
            continue;
        }
        if let Ok(workload) = PendingWorkload::from_object(manifest) {
            let at = Path::root().key("manifests").index(i);
            check_dws_request_shape(c, spec, cluster, &workload, &at, |_| None);
        }
    }
}

/// The node pool a flavor's quota runs on, with what it can hold at most; `None` when the
/// flavor names no pool of the spec or the pool has no upper size.
fn flavor_pool_capacity(
    spec: &Spec,
    quota: &capacity::FlavorQuota,
) -> Option<capacity::NodePoolCapacity> {
    let flavor = spec.kueue.flavors.iter().find(|f| f.name == quota.flavor)?;
    let pool = flavor
        .node_pool
        .as_ref()
        .and_then(|p| spec.node_pools.iter().find(|n| &n.name == p))?;
    let max_nodes = capacity::max_nodes(pool)?;
    Some(capacity::NodePoolCapacity {
        pool: pool.name.clone(),
        machine_type: pool.machine_type.clone(),
        max_nodes,
        queued_provisioning: pool.queued_provisioning,
    })
}

/// Where the spec writes a flavor quota: (ClusterQueue, resource group, flavor) indices, or
/// the first quota's when it is not found.
fn flavor_quota_position(spec: &Spec, quota: &capacity::FlavorQuota) -> (usize, usize, usize) {
    spec.kueue
        .cluster_queues
        .iter()
        .enumerate()
        .find(|(_, q)| q.name == quota.cluster_queue)
        .and_then(|(qi, q)| {
            q.resource_groups.iter().enumerate().find_map(|(gi, g)| {
                g.flavors
                    .iter()
                    .position(|f| f.name == quota.flavor)
                    .map(|fi| (qi, gi, fi))
            })
        })
        .unwrap_or((0, 0, 0))
}

/// Warns where a flavor's quota does not match what its node pool can hold.
fn check_quotas_against_pools(c: &mut Checker, spec: &Spec, cluster: &crate::placement::Cluster) {
    for quota in capacity::flavor_quotas(cluster) {
        let Some(capacity) = flavor_pool_capacity(spec, &quota) else {
            continue;
        };
        let (qi, gi, fi) = flavor_quota_position(spec, &quota);
        for w in capacity::check_quota_against_capacity(&quota, &capacity) {
            if w.kind == capacity::CapacityWarningKind::UnknownMachineType {
                continue;
            }
            let mut path = quota_path(qi, gi, fi);
            if let Some(r) = &w.resource {
                path = path.key(r.clone());
            }
            c.warning(
                &path,
                w.message,
                "match the quota to what the node pool can hold (max nodes x per-node capacity)",
            );
        }
    }
}

/// GKE's queued provisioning takes one PodSet per ProvisioningRequest. Kueue puts into the
/// request every podset that uses a resource of the check's `managedResources`, merged as the
/// config's `podSetMergePolicy` says (`placement::provisioning::request_shapes`, the rule the
/// plan and the local target use); with two or more PodSets, GKE fails the request and the job
/// never gets its nodes (ray-project/ray#57839, docs/kueue.md 1c.4). The checks, configs and
/// queues are read from `cluster`: the spec's kueue section and its raw manifests (the plan
/// reads the live ones too). `at_podset` says where in the spec a podset is written, when it
/// can.
fn check_dws_request_shape(
    c: &mut Checker,
    spec: &Spec,
    cluster: &crate::placement::Cluster,
    workload: &crate::placement::PendingWorkload,
    queue_at: &Path,
    at_podset: impl Fn(&str) -> Option<Path>,
) {
    use crate::placement::provisioning::request_shapes;
    let Some(queue) = &workload.queue_name else {
        return;
    };
    for shape in request_shapes(cluster, workload) {
        if !shape.refused_by_dws() {
            continue;
        }
        let groups: Vec<String> = shape
            .pod_sets
            .iter()
            .map(|ps| ps.podsets.join("+"))
            .collect();
        let managed = if shape.managed_resources.is_empty() {
            "every resource".to_string()
        } else {
            shape.managed_resources.join(", ")
        };
        let merged = match shape.merge_policy {
            Some(policy) => format!(", podSetMergePolicy: {}", policy.as_str()),
            None => String::new(),
        };
        let second = shape.pod_sets[1].podsets[0].as_str();
        c.error(
            &at_podset(second).unwrap_or_else(|| queue_at.clone()),
            format!(
                "{} `{}` would send GKE a DWS ProvisioningRequest with {} podsets ({}): queue `{queue}` uses admission check `{}` (managedResources: {managed}{merged}), and GKE's queued provisioning accepts one podset per request, so the request fails and the job never gets nodes (ray-project/ray#57839)",
                workload.kind,
                workload.name,
                shape.pod_sets.len(),
                groups.join(", "),
                shape.check
            ),
            merge_hint(spec, c.rendered_manifests, &shape, workload),
        );
    }
}

/// How to fix a DWS request of several PodSets: the merge policy that makes it one, set where
/// the spec declares the config, when one does; else one group of accelerator pods.
fn merge_hint(
    spec: &Spec,
    manifests: &[std::sync::Arc<serde_json::Value>],
    shape: &crate::placement::provisioning::RequestShape,
    workload: &crate::placement::PendingWorkload,
) -> String {
    let regroup = "put all the accelerator pods in one group (one worker group or replicated job with more replicas), or submit the groups as separate jobs";
    let Some(policy) = shape.policy_that_merges(&workload.pod_sets) else {
        return regroup.to_string();
    };
    let policy = policy.as_str();
    let declared = spec
        .kueue
        .admission_checks
        .iter()
        .position(|check| check.name == shape.check);
    let manifest = manifests.iter().position(|m| {
        m["kind"] == "ProvisioningRequestConfig" && m["metadata"]["name"] == shape.config.as_str()
    });
    let set = match (declared, manifest) {
        (Some(i), _) => format!(
            "set `podSetMergePolicy: {policy}` in kueue.admissionChecks[{i}].provisioningRequestConfig"
        ),
        (None, Some(i)) => format!("set `spec.podSetMergePolicy: {policy}` in manifests[{i}]"),
        (None, None) if shape.check == kueue::DWS_CHECK => format!(
            "declare the check in kueue.admissionChecks (`name: {}`, `provisioningRequestConfig: {{name: {}, podSetMergePolicy: {policy}}}`; flavors with `provisioning: dws` then use it)",
            shape.check, shape.config
        ),
        (None, None) => format!(
            "set `spec.podSetMergePolicy: {policy}` on ProvisioningRequestConfig `{}`",
            shape.config
        ),
    };
    format!(
        "{set}: Kueue then sends these podsets as one PodSet of {} pods; or {regroup}",
        shape
            .pod_sets
            .iter()
            .map(|ps| i64::from(ps.count))
            .sum::<i64>()
    )
}
