//! Cross-field and cross-resource checks. Every problem is reported at once, each at the value
//! that causes it, with a hint.

use std::collections::{BTreeMap, BTreeSet};

mod capacity;
mod facts;

use crate::model::gke::{topology_chips, tpu_chips_per_vm, tpu_hosts};
use crate::model::kueue::{self, DEFAULT_ACCELERATOR_RESOURCE, DWS_CHECK};
use crate::placement::quantity::{Format, Quantity};
use crate::spec::types::{Quantity as SpecQuantity, Spec, Taint, Toleration};
use crate::spec::{Diagnostic, Diagnostics, Loaded, Path, suggest};
use crate::vocab::duration::parse_whole_seconds;

/// DWS flex-start capacity lives at most seven days.
pub const DWS_MAX_SECONDS: u64 = 7 * 24 * 3600;

pub(super) struct Checker<'a> {
    loaded: &'a Loaded,
    diags: Diagnostics,
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
    fn error_at_key(&mut self, path: &Path, msg: impl Into<String>, help: impl Into<String>) {
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

    fn unknown_ref<'n>(
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

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_dns_label)
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

pub fn validate(loaded: &Loaded) -> Diagnostics {
    let mut c = Checker {
        loaded,
        diags: Diagnostics::default(),
    };
    let spec = &loaded.spec;
    let root = Path::root();

    check_names(&mut c, spec);
    check_cluster(&mut c, spec);
    check_node_pools(&mut c, spec);
    check_kueue(&mut c, spec);
    check_jobs(&mut c, spec);
    check_manifests(&mut c, spec);
    capacity::check(&mut c, spec);
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

/// KubeRay refuses a RayJob whose name is longer than 47 characters or does not start with a
/// letter (it names the RayCluster, Services and Pods after it); each run's name counts,
/// `-N` suffix of `count` included.
fn check_run_names(c: &mut Checker, spec: &Spec) {
    let max = super::gke::RAYJOB_NAME_MAX;
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

fn check_names(c: &mut Checker, spec: &Spec) {
    let root = Path::root();
    let k = root.key("kueue");
    let checks: Vec<(&str, Path, &str)> = [(
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
    .collect();
    for (what, path, name) in checks {
        let (ok, rule) = match what {
            "cluster" | "node pool" => (
                super::gke::is_gke_name(name),
                format!(
                    "GKE takes lowercase letters, digits and `-`, starting with a letter and not ending with `-`, at most {} characters",
                    super::gke::GKE_NAME_MAX
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
    check_run_names(c, spec);
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
    // Runs of different jobs must not collide (`train` with count 2 and a job named `train-1`).
    let mut runs: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (i, job) in spec.jobs.iter().enumerate() {
        for run in super::jobs::run_names(job) {
            if let Some(first) = runs.insert((job.namespace.clone(), run.clone()), i) {
                c.error(
                    &root.key("jobs").index(i).key("name"),
                    format!("job run `{run}` is defined twice (jobs {first} and {i})"),
                    "job names (with their `-N` run suffixes) must be unique per namespace",
                );
            }
        }
    }
}

fn check_cluster(c: &mut Checker, spec: &Spec) {
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

fn check_taints(c: &mut Checker, path: &Path, taints: &[Taint]) {
    for (i, t) in taints.iter().enumerate() {
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

fn check_node_pools(c: &mut Checker, spec: &Spec) {
    let gke_minor = spec.cluster.version.as_deref().and_then(parse_minor);
    for (i, pool) in spec.node_pools.iter().enumerate() {
        let p = Path::root().key("nodePools").index(i);
        let chips_per_vm = tpu_chips_per_vm(&pool.machine_type);
        let hosts = tpu_hosts(pool);
        if let (Some(hosts), Some(a)) = (hosts, &pool.autoscaling) {
            let topo = pool.tpu_topology.clone().unwrap_or_default();
            if a.max < hosts {
                c.error(
                    &p.key("autoscaling").key("max"),
                    format!(
                        "max {} nodes cannot hold one {topo} slice: {topo} is {} chips = {hosts} nodes of {} ({} chips each)",
                        a.max,
                        hosts * chips_per_vm.unwrap_or(1),
                        pool.machine_type,
                        chips_per_vm.unwrap_or(1)
                    ),
                    format!("set max to {hosts} (one slice) or a multiple of it"),
                );
            } else if a.max % hosts != 0 {
                c.error(
                    &p.key("autoscaling").key("max"),
                    format!(
                        "max {} nodes is not a whole number of {topo} slices ({hosts} nodes each)",
                        a.max
                    ),
                    format!("multi-host TPU slices scale as a unit: use a multiple of {hosts}"),
                );
            }
            if a.min % hosts != 0 {
                c.error(
                    &p.key("autoscaling").key("min"),
                    format!(
                        "min {} nodes is not a whole number of {topo} slices ({hosts} nodes each)",
                        a.min
                    ),
                    format!("use 0 or a multiple of {hosts}"),
                );
            }
        }
        if let Some(a) = &pool.autoscaling {
            if a.min > a.max {
                c.error(
                    &p.key("autoscaling").key("min"),
                    format!("autoscaling min {} is above max {}", a.min, a.max),
                    "min must be at most max",
                );
            }
            if let Some(lp) = &a.location_policy
                && !matches!(lp.to_uppercase().as_str(), "BALANCED" | "ANY")
            {
                c.error(
                    &p.key("autoscaling").key("locationPolicy"),
                    format!("location policy `{lp}` is not valid"),
                    "use BALANCED or ANY",
                );
            }
        }
        if let Some(ra) = &pool.reservation_affinity
            && super::gke::reservation_affinity(ra).is_none()
        {
            c.error(
                &p.key("reservationAffinity"),
                format!("reservation affinity `{ra}` is not valid"),
                "use none, any, any-then-fail or specific:<reservation-name>",
            );
        }
        if pool.flex_start {
            match &pool.autoscaling {
                None => c.error(
                    &p.key("flexStart"),
                    "a flex-start pool must autoscale from zero",
                    "add `autoscaling: {min: 0, max: N}`",
                ),
                Some(a) if a.min != 0 => c.error(
                    &p.key("autoscaling").key("min"),
                    format!(
                        "a flex-start pool must autoscale from zero, min is {}",
                        a.min
                    ),
                    "set autoscaling.min to 0",
                ),
                _ => {}
            }
            if pool.initial_nodes.unwrap_or(0) != 0 {
                c.error(
                    &p.key("initialNodes"),
                    "a flex-start pool starts with zero nodes",
                    "set initialNodes to 0 or remove it",
                );
            }
            if pool
                .reservation_affinity
                .as_deref()
                .is_some_and(|r| r != "none")
            {
                c.error(
                    &p.key("reservationAffinity"),
                    "flex-start pools cannot consume reservations",
                    "set reservationAffinity: none",
                );
            }
            if pool.spot {
                c.error(
                    &p.key("spot"),
                    "a pool cannot be both flex-start and spot",
                    "remove one of them",
                );
            }
            if pool.auto_repair == Some(true) {
                c.error(
                    &p.key("autoRepair"),
                    "GKE requires auto-repair off on flex-start pools",
                    "remove autoRepair (gkq turns it off) or set it to false",
                );
            }
        }
        if pool.queued_provisioning {
            if !pool.flex_start {
                c.error(&p.key("queuedProvisioning"), "queued provisioning needs flex-start in this setup", "add `flexStart: true`: DWS capacity for queued pools comes from flex-start VMs");
            }
            match &pool.autoscaling {
                None => c.error(
                    &p.key("queuedProvisioning"),
                    "queued provisioning needs autoscaling from zero",
                    "add `autoscaling: {min: 0, max: N}`",
                ),
                Some(a) if a.min != 0 && !pool.flex_start => c.error(
                    &p.key("autoscaling").key("min"),
                    "queued provisioning needs autoscaling from zero",
                    "set autoscaling.min to 0",
                ),
                _ => {}
            }
            if pool.spot {
                c.error(
                    &p.key("spot"),
                    "queued provisioning cannot use spot VMs",
                    "remove `spot`",
                );
            }
            if pool
                .reservation_affinity
                .as_deref()
                .is_some_and(|r| r != "none")
            {
                c.error(
                    &p.key("reservationAffinity"),
                    "queued provisioning cannot consume reservations",
                    "set reservationAffinity: none",
                );
            }
            if pool.flex_start && chips_per_vm.is_some() {
                match gke_minor {
                    Some(minor) if minor < (1, 34) => c.warning(
                        &p.key("queuedProvisioning"),
                        format!(
                            "GKE {}.{} may reject TPU flex-start with queued provisioning (\"Flex start node pools don't support TPUs with queued provisioning\")",
                            minor.0, minor.1
                        ),
                        "use GKE 1.34 or later, as Google's guide does",
                    ),
                    _ => {}
                }
            }
        }
        if let Some(d) = &pool.max_run_duration
            && parse_whole_seconds(d).is_err()
        {
            c.error(
                &p.key("maxRunDuration"),
                format!("duration `{d}` is not valid"),
                "write a duration such as 86400s, 24h or 7d",
            );
        }
        check_taints(c, &p.key("taints"), &pool.taints);
        check_gke_labels(c, &p.key("resourceLabels"), &pool.resource_labels);
    }
}

fn check_kueue(c: &mut Checker, spec: &Spec) {
    let k = Path::root().key("kueue");
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
        check_taints(c, &p.key("nodeTaints"), &f.node_taints);
        check_tolerations(c, &p.key("tolerations"), &f.tolerations);
    }

    let flavor_names: Vec<&str> = spec.kueue.flavors.iter().map(|f| f.name.as_str()).collect();
    let check_names: Vec<String> = kueue::provisioning_checks(spec)
        .into_iter()
        .map(|c| c.name)
        .collect();
    let mut flavor_used_by: BTreeMap<&str, &str> = BTreeMap::new();
    for (qi, cq) in spec.kueue.cluster_queues.iter().enumerate() {
        let q = k.key("clusterQueues").index(qi);
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
                    c.error(&q.key("flavorFungibility").key(key), format!("`{v}` is not valid for {key}"), "use MayStopSearch or TryNextFlavor (Kueue v1beta2 dropped Borrow and Preempt)");
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
                c.error(&q.key("preemption").key("borrowWithinCohort"), "borrowWithinCohort needs reclaimWithinCohort other than Never", "Kueue rejects this combination; set reclaimWithinCohort to LowerPriority or Any");
            }
        }
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
                            format!(
                                "resource `{r}` is covered by resource groups {other} and {gi}"
                            ),
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
                for r in &g.resources {
                    if !fq.quota.contains_key(r) {
                        c.error(
                            &fp.key("quota"),
                            format!("flavor `{}` has no quota for `{r}`, which the group covers", fq.name),
                            format!("add `{r}: 0` (or a quota) so every flavor covers the group's resources {:?}", g.resources),
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
        }
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

fn check_jobs(c: &mut Checker, spec: &Spec) {
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
        let cm = super::jobs::config_map_name(job);
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
        let cq = super::queue_of(spec, &job.namespace, &job.queue);
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
fn check_accelerator_type(c: &mut Checker, path: &Path, kind: &str) {
    let known = super::gke_facts::tpu_accelerators();
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
fn check_job_topology(
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

/// Raw manifests: must be full objects, and accelerator requests must come with equal limits.
fn check_manifests(c: &mut Checker, spec: &Spec) {
    for (i, m) in spec.manifests.iter().enumerate() {
        let p = Path::root().key("manifests").index(i);
        for key in ["apiVersion", "kind"] {
            if m.get(key).and_then(|v| v.as_str()).is_none() {
                c.error(
                    &p,
                    format!("manifest {i} has no `{key}`"),
                    "raw manifests are full Kubernetes objects",
                );
            }
        }
        if m.pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .is_none()
        {
            c.error(
                &p,
                format!("manifest {i} has no metadata.name"),
                "give the object a name",
            );
        }
        let mut problems = Vec::new();
        find_accelerator_without_limit(m, "", &mut problems);
        for where_ in problems {
            c.error(
                &p,
                format!("manifest {i}: {where_} requests {DEFAULT_ACCELERATOR_RESOURCE} without an equal limit"),
                "set limits equal to requests: without a limit Kueue cannot build the ProvisioningRequest and the DWS check waits forever",
            );
        }
    }
}

fn find_accelerator_without_limit(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(res) = map.get("resources") {
                let req = res.pointer(&format!(
                    "/requests/{}",
                    DEFAULT_ACCELERATOR_RESOURCE.replace('/', "~1")
                ));
                let lim = res.pointer(&format!(
                    "/limits/{}",
                    DEFAULT_ACCELERATOR_RESOURCE.replace('/', "~1")
                ));
                let as_text = |v: Option<&serde_json::Value>| {
                    v.and_then(|v| match v {
                        serde_json::Value::String(s) => Quantity::parse(s).ok(),
                        serde_json::Value::Number(n) => n
                            .as_i64()
                            .map(|i| Quantity::from_units(i128::from(i), Format::DecimalSI)),
                        _ => None,
                    })
                };
                if req.is_some() && as_text(req) != as_text(lim) {
                    let name = map
                        .get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or("a container");
                    out.push(format!("container `{name}` at {at}"));
                }
            }
            for (k, child) in map {
                find_accelerator_without_limit(child, &format!("{at}/{k}"), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                find_accelerator_without_limit(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Checks that need the rendered objects and Kueue's rules: a job that no flavor of its queue
/// could ever admit (an error: it would wait forever), and flavor quotas that do not match the
/// node pools behind them (warnings naming the numbers).
/// A manifest with the address of an object gkq renders from the spec (or of another manifest)
/// would be applied twice with different contents: refused here, at the manifest, instead of at
/// plan time without a location.
fn check_manifest_collisions(c: &mut Checker, spec: &Spec, desired: &super::DesiredState) {
    use crate::addr::ResourceAddr;
    let mut counts: BTreeMap<ResourceAddr, usize> = BTreeMap::new();
    for object in &desired.kubernetes {
        if let Ok(addr) = ResourceAddr::from_object(object) {
            *counts.entry(addr).or_default() += 1;
        }
    }
    let mut seen: BTreeMap<ResourceAddr, usize> = BTreeMap::new();
    for (i, manifest) in spec.manifests.iter().enumerate() {
        let Ok(addr) = ResourceAddr::from_object(manifest) else {
            continue;
        };
        let path = Path::root().key("manifests").index(i);
        if let Some(first) = seen.insert(addr.clone(), i) {
            c.error(
                &path,
                format!("manifest {i} is {addr}, like manifest {first}"),
                "keep one manifest per object",
            );
        } else if counts.get(&addr).copied().unwrap_or(0) > 1 {
            c.error(
                &path,
                format!("manifest {i} is {addr}, which gkq already makes from the spec"),
                "rename the manifest's object, or drop it and set what you need in the spec (flavors, queues, jobs and their ConfigMaps are generated)",
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

pub fn check_rendered(loaded: &Loaded, desired: &super::DesiredState) -> Diagnostics {
    use crate::placement::{Cluster, PendingWorkload, capacity, fits_ever};
    let mut c = Checker {
        loaded,
        diags: Diagnostics::default(),
    };
    let spec = &loaded.spec;
    let mut cluster = Cluster::default();
    for o in desired.kubernetes.iter().filter(|o| o["kind"] != "RayJob") {
        // Rendered from a validated spec; anything placement cannot read was reported above.
        let _ = cluster.add_object(o);
    }
    for (i, job) in spec.jobs.iter().enumerate() {
        let Some(first_run) = super::jobs::run_names(job).into_iter().next() else {
            continue;
        };
        let Some(object) = desired.kubernetes.iter().find(|o| {
            o["kind"] == "RayJob"
                && o["metadata"]["name"] == first_run.as_str()
                && o["metadata"]["namespace"] == job.namespace.as_str()
        }) else {
            continue;
        };
        let Ok(workload) = PendingWorkload::from_object(object) else {
            continue;
        };
        if let Err(reason) = fits_ever(&cluster, &workload) {
            c.error(
                &Path::root().key("jobs").index(i).key("workers"),
                format!("job `{}` can never be admitted by queue `{}`: {reason}", job.name, job.queue),
                "raise a flavor's quota, add a flavor that fits, or shrink the job: Kueue would keep it pending forever",
            );
        }
    }
    check_manifest_collisions(&mut c, spec, desired);
    for quota in capacity::flavor_quotas(&cluster) {
        let Some(flavor) = spec.kueue.flavors.iter().find(|f| f.name == quota.flavor) else {
            continue;
        };
        let Some(pool) = flavor
            .node_pool
            .as_ref()
            .and_then(|p| spec.node_pools.iter().find(|n| &n.name == p))
        else {
            continue;
        };
        let Some(max_nodes) = pool
            .autoscaling
            .as_ref()
            .map(|a| a.max)
            .or(pool.initial_nodes)
        else {
            continue;
        };
        let capacity = capacity::NodePoolCapacity {
            pool: pool.name.clone(),
            machine_type: pool.machine_type.clone(),
            max_nodes,
            queued_provisioning: pool.queued_provisioning,
        };
        let (qi, gi, fi) = spec
            .kueue
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
            .unwrap_or((0, 0, 0));
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
    c.diags
}
