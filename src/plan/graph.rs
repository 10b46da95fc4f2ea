//! The one dependency graph over every managed resource, and its deterministic order.
//!
//! Edges say what must exist before something else can be created:
//!
//! ```text
//! gke.cluster -> gke.nodepool/*
//! gke.cluster -> k8s.credentials -> every Kubernetes object
//! kueue.install -> every Kueue object
//! k8s.namespace/N -> every object in namespace N
//! kueue.provisioningrequestconfig -> kueue.admissioncheck (spec.parameters)
//! kueue.resourceflavor, kueue.admissioncheck, kueue.cohort -> kueue.clusterqueue (by name)
//! kueue.clusterqueue -> kueue.localqueue (spec.clusterQueue)
//! kueue.localqueue -> jobs (label kueue.x-k8s.io/queue-name)
//! k8s.configmap -> jobs that mount it
//! deleted job -> a job of another kind submitted under its namespace and name
//! ```
//!
//! Edges are only the real needs, so a failure skips only true dependents (a stockout on one node
//! pool does not stop Kueue objects). The *order* still follows the layers
//! cluster -> node pools -> credentials -> Kueue -> flavors, checks -> cluster queues -> local
//! queues -> config maps -> jobs, because Kahn's algorithm always takes the smallest ready
//! address and addresses sort by layer (see [`crate::addr`]). Deletes walk the same order
//! backwards.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use crate::addr::{ResourceAddr, ResourceKind};
use crate::vocab::object::{At, Field};

/// A directed graph: each node maps to the nodes it depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyGraph {
    dependencies: BTreeMap<ResourceAddr, BTreeSet<ResourceAddr>>,
}

/// The dependency graph has a cycle; `cycle` lists it with the first node repeated at the end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("dependency cycle: {}", self.path())]
pub struct CycleError {
    pub cycle: Vec<ResourceAddr>,
}

impl CycleError {
    fn path(&self) -> String {
        self.cycle
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" -> ")
    }
}

impl DependencyGraph {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_node(&mut self, addr: ResourceAddr) {
        self.dependencies.entry(addr).or_default();
    }

    /// `dependent` needs `dependency` first. Both become nodes. An address is copied only where
    /// the graph keeps it: a plan of thousands of objects adds tens of thousands of edges.
    pub fn add_edge(&mut self, dependent: &ResourceAddr, dependency: &ResourceAddr) {
        if !self.dependencies.contains_key(dependency) {
            self.dependencies
                .insert(dependency.clone(), BTreeSet::new());
        }
        match self.dependencies.get_mut(dependent) {
            Some(dependencies) => {
                if !dependencies.contains(dependency) {
                    dependencies.insert(dependency.clone());
                }
            }
            None => {
                self.dependencies
                    .insert(dependent.clone(), BTreeSet::from([dependency.clone()]));
            }
        }
    }

    pub fn contains(&self, addr: &ResourceAddr) -> bool {
        self.dependencies.contains_key(addr)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &ResourceAddr> {
        self.dependencies.keys()
    }

    /// What `addr` depends on directly.
    pub fn dependencies_of(&self, addr: &ResourceAddr) -> impl Iterator<Item = &ResourceAddr> {
        self.dependencies.get(addr).into_iter().flatten()
    }

    /// Every `(dependent, dependency)` edge.
    pub fn edges(&self) -> impl Iterator<Item = (&ResourceAddr, &ResourceAddr)> {
        self.dependencies
            .iter()
            .flat_map(|(node, deps)| deps.iter().map(move |dep| (node, dep)))
    }

    /// Dependencies first; among nodes that are ready at the same time, the smallest address
    /// first (Kahn's algorithm with an ordered ready set), so the order is deterministic.
    pub fn topo_order(&self) -> Result<Vec<ResourceAddr>, CycleError> {
        let mut remaining: BTreeMap<&ResourceAddr, usize> = self
            .dependencies
            .iter()
            .map(|(node, deps)| (node, deps.len()))
            .collect();
        let mut dependents: BTreeMap<&ResourceAddr, Vec<&ResourceAddr>> = BTreeMap::new();
        for (node, dep) in self.edges() {
            dependents.entry(dep).or_default().push(node);
        }
        let mut ready: BTreeSet<&ResourceAddr> = remaining
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(node, _)| *node)
            .collect();
        let mut order = Vec::with_capacity(self.dependencies.len());
        while let Some(node) = ready.pop_first() {
            remaining.remove(node);
            order.push(node.clone());
            for dependent in dependents.get(node).into_iter().flatten() {
                if let Some(count) = remaining.get_mut(dependent) {
                    *count -= 1;
                    if *count == 0 {
                        ready.insert(dependent);
                    }
                }
            }
        }
        if remaining.is_empty() {
            Ok(order)
        } else {
            Err(self.find_cycle(remaining.keys().copied().collect()))
        }
    }

    /// Every node left after Kahn's algorithm waits on another left node, so following
    /// dependencies from any of them must revisit a node: that loop is the cycle.
    fn find_cycle(&self, stuck: BTreeSet<&ResourceAddr>) -> CycleError {
        let Some(start) = stuck.first().copied() else {
            return CycleError { cycle: Vec::new() };
        };
        let mut path: Vec<&ResourceAddr> = vec![start];
        let mut seen_at: BTreeMap<&ResourceAddr, usize> = BTreeMap::from([(start, 0)]);
        let mut current = start;
        loop {
            // A node left by Kahn's algorithm always has a dependency that is also left; should
            // that ever not hold, report the path walked so far rather than panic.
            let Some(next) = self
                .dependencies_of(current)
                .find(|dep| stuck.contains(dep))
            else {
                return CycleError {
                    cycle: path.iter().map(|a| (*a).clone()).collect(),
                };
            };
            if let Some(&index) = seen_at.get(next) {
                let mut cycle: Vec<ResourceAddr> =
                    path[index..].iter().map(|a| (*a).clone()).collect();
                cycle.push(next.clone());
                return CycleError { cycle };
            }
            seen_at.insert(next, path.len());
            path.push(next);
            current = next;
        }
    }

    /// The graph over the given resources (a Kubernetes object's body, desired or live, is used to
    /// find references such as a ClusterQueue's flavors). References to things outside the set are
    /// not edges: gkq does not manage them, so nothing waits on them. When a cluster and at least
    /// one Kubernetes object are present, the `k8s.credentials` node joins them.
    pub fn for_resources<'a>(
        resources: impl IntoIterator<Item = (&'a ResourceAddr, Option<&'a Value>)>,
    ) -> Self {
        let resources: BTreeMap<&ResourceAddr, Option<&Value>> = resources.into_iter().collect();
        let mut graph = DependencyGraph::new();
        for addr in resources.keys() {
            graph.add_node((*addr).clone());
        }
        let cluster = resources
            .keys()
            .find(|a| a.kind == ResourceKind::GkeCluster)
            .copied();
        let has_kube = resources.keys().any(|a| is_kubernetes(&a.kind));
        let credentials = match cluster {
            Some(cluster) if has_kube => {
                let credentials = ResourceAddr::kube_credentials(cluster.name.clone());
                graph.add_edge(&credentials, cluster);
                Some(credentials)
            }
            _ => resources
                .keys()
                .find(|a| a.kind == ResourceKind::KubeCredentials)
                .map(|a| (*a).clone()),
        };
        let install = ResourceAddr::kueue_install();
        let jobset = ResourceAddr::jobset_install();
        let present = |addr: &ResourceAddr| {
            resources.contains_key(addr) || Some(addr) == credentials.as_ref()
        };

        for (&addr, &object) in &resources {
            let mut depend_on = |dependency: &ResourceAddr| {
                if dependency != addr && present(dependency) {
                    graph.add_edge(addr, dependency);
                }
            };
            match &addr.kind {
                ResourceKind::GkeCluster | ResourceKind::KubeCredentials => {}
                ResourceKind::GkeNodePool => {
                    if let Some(cluster) = cluster {
                        depend_on(cluster);
                    }
                }
                kind => {
                    if let Some(credentials) = &credentials {
                        depend_on(credentials);
                    }
                    if kind.is_kueue() {
                        depend_on(&install);
                    }
                    // A JobSet waits for JobSet's CRD and webhooks (the installation ends once
                    // its controller serves them); Kueue is installed after JobSet, so that its
                    // JobSet integration finds the API served when it starts.
                    if *kind == ResourceKind::Other("jobset".into())
                        || *kind == ResourceKind::KueueInstall
                    {
                        depend_on(&jobset);
                    }
                    if let Some(namespace) = &addr.namespace {
                        depend_on(&ResourceAddr::namespace(namespace.clone()));
                    }
                    if let Some(object) = object {
                        for reference in references(addr, object) {
                            depend_on(&reference);
                        }
                    }
                }
            }
        }
        graph
    }
}

impl DependencyGraph {
    /// A job whose kind changes under the same name (a RayJob `train` becoming a JobSet
    /// `train`): the new object waits for the old one's delete, which releases the quota its
    /// Workload holds, as a replace deletes the old run before creating the new one. Each of
    /// `submitted` that shares a namespace and name with one of `deleted` (both runs) depends on
    /// it.
    pub fn add_kind_switches<'a>(
        &mut self,
        submitted: impl IntoIterator<Item = &'a ResourceAddr>,
        deleted: &[&ResourceAddr],
    ) {
        for new in submitted {
            for &old in deleted {
                if old != new
                    && old.kind.is_run()
                    && new.kind.is_run()
                    && old.namespace == new.namespace
                    && old.name == new.name
                {
                    self.add_edge(new, old);
                }
            }
        }
    }
}

fn is_kubernetes(kind: &ResourceKind) -> bool {
    !kind.is_gke() && *kind != ResourceKind::KubeCredentials
}

/// The managed objects an object names in its spec.
fn references(addr: &ResourceAddr, object: &Value) -> Vec<ResourceAddr> {
    let spec = object.field("spec").unwrap_or(&Value::Null);
    let str_at = |value: &Value, pointer: &str| {
        value
            .at(pointer)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut found = Vec::new();
    match addr.kind {
        ResourceKind::ClusterQueue => {
            for group in spec
                .field("resourceGroups")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for flavor in group
                    .field("flavors")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(name) = str_at(flavor, "/name") {
                        found.push(ResourceAddr::resource_flavor(name));
                    }
                }
            }
            // Older `admissionChecks: [name]` and v1beta2 `admissionChecksStrategy.admissionChecks[].name`.
            for check in spec
                .field("admissionChecks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = check.as_str() {
                    found.push(admission_check(name));
                }
            }
            for check in spec
                .at("/admissionChecksStrategy/admissionChecks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = str_at(check, "/name") {
                    found.push(admission_check(&name));
                }
            }
            let cohort = spec
                .field("cohort")
                .or_else(|| spec.field("cohortName"))
                .and_then(Value::as_str);
            if let Some(cohort) = cohort {
                found.push(ResourceAddr {
                    kind: ResourceKind::Cohort,
                    namespace: None,
                    name: cohort.to_string(),
                });
            }
        }
        ResourceKind::AdmissionCheck => {
            if str_at(spec, "/parameters/kind").as_deref() == Some("ProvisioningRequestConfig")
                && let Some(name) = str_at(spec, "/parameters/name")
            {
                found.push(ResourceAddr {
                    kind: ResourceKind::ProvisioningRequestConfig,
                    namespace: None,
                    name,
                });
            }
        }
        ResourceKind::LocalQueue => {
            if let Some(name) = str_at(spec, "/clusterQueue") {
                found.push(ResourceAddr::cluster_queue(name));
            }
        }
        _ => {
            if let (Some(namespace), Some(queue)) = (
                &addr.namespace,
                object
                    .at("/metadata/labels")
                    .and_then(|labels| labels.field(crate::vocab::labels::QUEUE_NAME_LABEL))
                    .and_then(Value::as_str),
            ) {
                found.push(ResourceAddr::local_queue(namespace.clone(), queue));
            }
            if let Some(namespace) = &addr.namespace {
                let mut names = BTreeSet::new();
                collect_config_map_names(object, &mut names);
                found.extend(
                    names
                        .into_iter()
                        .map(|name| ResourceAddr::config_map(namespace.clone(), name)),
                );
            }
        }
    }
    found
}

fn admission_check(name: &str) -> ResourceAddr {
    ResourceAddr {
        kind: ResourceKind::AdmissionCheck,
        namespace: None,
        name: name.to_string(),
    }
}

/// Volumes `{configMap: {name}}` and env `configMapRef`/`configMapKeyRef` anywhere in a pod
/// template, however deeply the job nests it.
fn collect_config_map_names(value: &Value, names: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if matches!(
                    key.as_str(),
                    "configMap" | "configMapRef" | "configMapKeyRef"
                ) && let Some(name) = child.field("name").and_then(Value::as_str)
                {
                    names.insert(name.to_string());
                }
                collect_config_map_names(child, names);
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| collect_config_map_names(item, names)),
        _ => {}
    }
}

impl fmt::Display for DependencyGraph {
    /// One `dependent -> dependency` line per edge, for debugging and `--explain` output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (node, dep) in self.edges() {
            writeln!(f, "{node} -> {dep}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn addr(text: &str) -> ResourceAddr {
        text.parse().unwrap()
    }

    fn seed_objects() -> Vec<(ResourceAddr, Option<Value>)> {
        let objects = [
            json!({"apiVersion": "gkq.dev/v1", "kind": "KueueInstallation", "metadata": {"name": "kueue"}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "on-demand"}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "dws"}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig", "metadata": {"name": "dws-config"}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "dws-prov"},
                "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                         "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws-config"}}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster-queue"},
                "spec": {"resourceGroups": [{"flavors": [{"name": "on-demand"}, {"name": "dws"}]}],
                         "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov", "onFlavors": ["dws"]}]}}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "user-queue", "namespace": "default"}, "spec": {"clusterQueue": "cluster-queue"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jax-train-script", "namespace": "default"}}),
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "rayjob-1", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
                "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": {
                    "volumes": [{"name": "script", "configMap": {"name": "jax-train-script"}}]}}}}}}),
        ];
        let mut resources: Vec<(ResourceAddr, Option<Value>)> = vec![
            (addr("gke.cluster/tpu-cluster"), None),
            (addr("gke.nodepool/on-demand-pool"), None),
            (addr("gke.nodepool/dws-pool"), None),
        ];
        resources.extend(
            objects
                .into_iter()
                .map(|o| (ResourceAddr::from_object(&o).unwrap(), Some(o))),
        );
        resources
    }

    fn seed_graph() -> DependencyGraph {
        let resources = seed_objects();
        DependencyGraph::for_resources(resources.iter().map(|(a, o)| (a, o.as_ref())))
    }

    #[test]
    fn seed_order_follows_the_layers() {
        let order: Vec<String> = seed_graph()
            .topo_order()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            order,
            [
                "gke.cluster/tpu-cluster",
                "gke.nodepool/dws-pool",
                "gke.nodepool/on-demand-pool",
                "k8s.credentials/tpu-cluster",
                "kueue.install/kueue",
                "kueue.resourceflavor/dws",
                "kueue.resourceflavor/on-demand",
                "kueue.provisioningrequestconfig/dws-config",
                "kueue.admissioncheck/dws-prov",
                "kueue.clusterqueue/cluster-queue",
                "kueue.localqueue/default/user-queue",
                "k8s.configmap/default/jax-train-script",
                "ray.rayjob/default/rayjob-1",
            ]
        );
    }

    #[test]
    fn seed_edges_come_from_references() {
        let graph = seed_graph();
        let deps = |a: &str| {
            graph
                .dependencies_of(&addr(a))
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(deps("gke.nodepool/dws-pool"), ["gke.cluster/tpu-cluster"]);
        assert_eq!(
            deps("kueue.clusterqueue/cluster-queue"),
            [
                "k8s.credentials/tpu-cluster",
                "kueue.install/kueue",
                "kueue.resourceflavor/dws",
                "kueue.resourceflavor/on-demand",
                "kueue.admissioncheck/dws-prov"
            ]
        );
        assert_eq!(
            deps("ray.rayjob/default/rayjob-1"),
            [
                "k8s.credentials/tpu-cluster",
                "kueue.localqueue/default/user-queue",
                "k8s.configmap/default/jax-train-script"
            ]
        );
        assert!(
            deps("kueue.admissioncheck/dws-prov")
                .contains(&"kueue.provisioningrequestconfig/dws-config".to_string())
        );
    }

    /// With JobSet installed by gkq, every JobSet (the spec's jobs and its manifests alike)
    /// waits for the installation, and so does Kueue's; other jobs and Kueue's objects do not.
    #[test]
    fn jobsets_and_kueue_wait_for_jobsets_installation() {
        let mut resources = seed_objects();
        let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "default"}});
        let install = json!({"apiVersion": "gkq.dev/v1alpha1", "kind": "JobSetInstallation",
            "metadata": {"name": "jobset"}});
        for object in [jobset, install] {
            resources.push((ResourceAddr::from_object(&object).unwrap(), Some(object)));
        }
        let graph = DependencyGraph::for_resources(resources.iter().map(|(a, o)| (a, o.as_ref())));
        let waits_for_jobset = |a: &str| {
            graph
                .dependencies_of(&addr(a))
                .any(|d| *d == ResourceAddr::jobset_install())
        };
        assert!(waits_for_jobset("k8s.jobset/default/train"));
        assert!(waits_for_jobset("kueue.install/kueue"));
        assert!(!waits_for_jobset("ray.rayjob/default/rayjob-1"));
        assert!(!waits_for_jobset("kueue.clusterqueue/cluster-queue"));
        let order = graph.topo_order().unwrap();
        let at = |a: &str| order.iter().position(|o| *o == addr(a)).unwrap();
        assert!(at("jobset.install/jobset") < at("k8s.jobset/default/train"));
        assert!(at("k8s.credentials/tpu-cluster") < at("jobset.install/jobset"));
    }

    #[test]
    fn a_cycle_is_reported_with_its_path() {
        let mut graph = DependencyGraph::new();
        graph.add_edge(&addr("kueue.clusterqueue/a"), &addr("kueue.clusterqueue/b"));
        graph.add_edge(&addr("kueue.clusterqueue/b"), &addr("kueue.clusterqueue/c"));
        graph.add_edge(&addr("kueue.clusterqueue/c"), &addr("kueue.clusterqueue/a"));
        graph.add_edge(
            &addr("kueue.localqueue/ns/q"),
            &addr("kueue.clusterqueue/a"),
        );
        let error = graph.topo_order().unwrap_err();
        assert_eq!(
            error.to_string(),
            "dependency cycle: kueue.clusterqueue/a -> kueue.clusterqueue/b -> kueue.clusterqueue/c -> kueue.clusterqueue/a"
        );
    }

    /// A RayJob deleted and a JobSet of its name submitted: the JobSet waits for the delete; a
    /// job of another name or namespace does not.
    #[test]
    fn a_kind_switch_waits_for_the_old_kinds_delete() {
        let mut graph = DependencyGraph::new();
        let old = addr("ray.rayjob/ml/train");
        let new = addr("k8s.jobset/ml/train");
        let other = addr("k8s.jobset/ml/eval");
        let elsewhere = addr("k8s.jobset/other/train");
        for node in [&old, &new, &other, &elsewhere] {
            graph.add_node(node.clone());
        }
        graph.add_kind_switches([&new, &other, &elsewhere], &[&old]);
        assert_eq!(
            graph
                .edges()
                .map(|(a, b)| (a.clone(), b.clone()))
                .collect::<Vec<_>>(),
            [(new, old)]
        );
    }

    fn arbitrary_addr() -> impl Strategy<Value = ResourceAddr> {
        let prefixes = [
            "gke.cluster",
            "gke.nodepool",
            "kueue.resourceflavor",
            "kueue.clusterqueue",
            "k8s.configmap/ns",
            "ray.rayjob/ns",
            "k8s.deployment/ns",
        ];
        (0..prefixes.len(), 0u8..6).prop_map(move |(p, n)| addr(&format!("{}/n{n}", prefixes[p])))
    }

    proptest! {
        /// Any acyclic graph (edges only from a later to an earlier node of a random list) sorts
        /// so that every dependency comes before its dependent, and the sort is deterministic.
        #[test]
        fn order_respects_every_edge(
            nodes in proptest::collection::vec(arbitrary_addr(), 1..20),
            picks in proptest::collection::vec((0usize..100, 0usize..100), 0..60),
        ) {
            // Distinct nodes, in the order drawn; edges point from later to earlier ones.
            let mut distinct: Vec<ResourceAddr> = Vec::new();
            for node in nodes {
                if !distinct.contains(&node) {
                    distinct.push(node);
                }
            }
            let nodes = distinct;
            let mut graph = DependencyGraph::new();
            for node in &nodes {
                graph.add_node(node.clone());
            }
            for (a, b) in picks {
                let (i, j) = (a % nodes.len(), b % nodes.len());
                if i > j {
                    graph.add_edge(&nodes[i], &nodes[j]);
                }
            }
            let order = graph.topo_order().expect("edges only point backwards, so no cycle");
            let position: BTreeMap<&ResourceAddr, usize> = order.iter().enumerate().map(|(i, a)| (a, i)).collect();
            prop_assert_eq!(order.len(), graph.nodes().count());
            for (dependent, dependency) in graph.edges() {
                prop_assert!(position[dependency] < position[dependent], "{} before {}", dependency, dependent);
            }
            prop_assert_eq!(order, graph.clone().topo_order().unwrap());
        }

        /// Adding one edge that closes a loop is always reported, never sorted.
        #[test]
        fn a_back_edge_is_a_cycle(len in 2usize..8) {
            let nodes: Vec<ResourceAddr> = (0..len).map(|i| addr(&format!("kueue.clusterqueue/q{i}"))).collect();
            let mut graph = DependencyGraph::new();
            for pair in nodes.windows(2) {
                graph.add_edge(&pair[1], &pair[0]);
            }
            graph.add_edge(&nodes[0], &nodes[len - 1]);
            let error = graph.topo_order().unwrap_err();
            prop_assert_eq!(error.cycle.len(), len + 1);
            prop_assert_eq!(error.cycle.first(), error.cycle.last());
        }
    }
}
