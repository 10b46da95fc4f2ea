//! The desired state: validated, rendered GKE requests and Kubernetes objects.
//!
//! `DesiredState` is what `gkq render` prints and what the plan compares with live state. It holds
//! no source spans and does no I/O: [`build`] turns a loaded spec into it, after
//! [`validate::validate`] has found every problem.

pub mod gke;
pub mod gke_facts;
pub mod jobs;
pub mod jobset_install;
pub mod kueue;
pub mod kueue_install;
pub mod ladder;
pub mod live;
pub mod validate;
pub mod workload_identity;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::addr::ClusterRef;
use crate::spec::types::{InstallMode, JobSetInstall, Quantity as SpecQuantity, Spec};
use crate::spec::{Diagnostics, Loaded};

/// Label (Kubernetes) and resource label (GKE) that mark what gkq owns.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "gkq";
/// Kubernetes label naming the stack (the spec's cluster) an object belongs to.
pub const STACK_LABEL: &str = "gkq.dev/stack";
/// GKE resource labels (lowercase keys, no dots or slashes allowed).
pub const GKE_MANAGED_BY_LABEL: &str = "managed-by";
pub const GKE_STACK_LABEL: &str = "gkq-stack";
/// The GKE resource label naming the GkqStack that owns a cluster or node pool, in GKE's label
/// syntax ([`gke::owner_label_value`]).
pub const GKE_OWNER_LABEL: &str = "gkq-owner";
/// Annotation listing (as a JSON array of JSON pointers) the fields of an object that hold a
/// value of a variable declared sensitive. It travels with the object into the cluster, so that
/// the old value is hidden too when the secret changes.
pub const SENSITIVE_FIELDS_ANNOTATION: &str = "gkq.dev/sensitive-fields";
/// Annotation naming the GkqStack (`namespace/name`) that owns a Kubernetes object the agent
/// applied: another stack (or a command run by hand) does not change or delete it.
pub const OWNER_ANNOTATION: &str = "gkq.dev/owner";
/// The field manager gkq uses for server-side apply.
pub const FIELD_MANAGER: &str = "gkq";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredState {
    pub gke: GkeDesired,
    /// How Kueue itself is installed.
    pub kueue: KueueInstall,
    /// Kubernetes objects with apiVersion, kind and metadata, in dependency order. With a
    /// managed Kueue install, the first is a `gkq.dev/v1alpha1 KueueInstallation` standing for
    /// Kueue itself (version and feature gates): the plan shows and applies it as one component;
    /// with `jobset.install: builtin`, a `JobSetInstallation` (its version) does the same for
    /// JobSet.
    /// Shared (`Arc`) with the plan's actions, which hold the same objects.
    pub kubernetes: Vec<Arc<Value>>,
    /// Values of variables the spec declares sensitive: plans show markers instead.
    #[serde(skip)]
    pub sensitive: crate::spec::SensitiveValues,
}

impl DesiredState {
    /// The desired state of stack `owner` (`namespace/name` of a GkqStack): the cluster and
    /// node pools carry [`GKE_OWNER_LABEL`], every Kubernetes object carries
    /// [`OWNER_ANNOTATION`] (not the pseudo-object of Kueue's installation, which
    /// is no object in the cluster).
    pub fn owned_by(mut self, owner: &str) -> Self {
        // The cluster and its node pools carry the stack in a resource label.
        let value = Value::String(gke::owner_label_value(owner));
        let pools = self.gke.node_pools.iter_mut();
        let labels = std::iter::once(self.gke.cluster.pointer_mut("/resourceLabels"))
            .chain(pools.map(|pool| pool.pointer_mut("/config/resourceLabels")));
        for labels in labels.flatten() {
            if let Some(labels) = labels.as_object_mut() {
                labels.insert(GKE_OWNER_LABEL.into(), value.clone());
            }
        }
        for object in &mut self.kubernetes {
            if is_installation(object) {
                continue;
            }
            let object = Arc::make_mut(object);
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                let annotations = metadata
                    .entry("annotations")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(annotations) = annotations.as_object_mut() {
                    annotations.insert(OWNER_ANNOTATION.into(), Value::String(owner.into()));
                }
            }
        }
        self
    }

    /// This desired state without its Kubernetes objects (Kueue's installation stays as it
    /// is): with prune, a plan of it deletes what the stack owns and leaves GKE alone.
    pub fn without_objects(mut self) -> Self {
        self.kubernetes.retain(|object| is_installation(object));
        self
    }

    /// The Kubernetes objects, borrowed.
    pub fn kube_objects(&self) -> impl Iterator<Item = &Value> + Clone {
        self.kubernetes.iter().map(|object| &**object)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GkeDesired {
    /// Where the cluster lives; not part of any request body.
    #[serde(rename = "ref")]
    pub cluster_ref: ClusterRef,
    /// The `cluster` of a `CreateClusterRequest`, exactly as `clusters.create` takes it. Its
    /// `nodePools` hold only the default pool; the spec's own pools are in `node_pools`.
    pub cluster: Value,
    /// `NodePool` bodies for `nodePools.create`, in spec order.
    pub node_pools: Vec<Value>,
    /// Whether the spec allows `gkq destroy` to delete the cluster.
    #[serde(default)]
    pub deletion_protection: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KueueInstall {
    pub version: String,
    pub mode: InstallMode,
    /// Release manifests (URL, file or directory).
    pub manifests: String,
    pub feature_gates: BTreeMap<String, bool>,
    /// JobSet is installed (`jobset.install` is not `none`): Kueue's `integrations.frameworks`
    /// must list JobSets ([`kueue_install::JOBSET_FRAMEWORK`]).
    #[serde(default)]
    pub manages_jobsets: bool,
}

/// Whether a desired or live object is one of gkq's installation pseudo-objects (Kueue's or
/// JobSet's), which stand for a component rather than one object in the cluster.
pub fn is_installation(object: &Value) -> bool {
    is_installation_kind(
        object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    )
}

/// Whether `kind` is the kind of an installation pseudo-object ([`is_installation`]).
pub fn is_installation_kind(kind: &str) -> bool {
    kind == kueue_install::INSTALLATION_KIND || kind == jobset_install::INSTALLATION_KIND
}

impl KueueInstall {
    pub fn default_manifests(version: &str) -> String {
        format!(
            "https://github.com/kubernetes-sigs/kueue/releases/download/{version}/manifests.yaml"
        )
    }
}

/// Kubernetes metadata with gkq's ownership labels.
pub fn k8s_meta(spec: &Spec, name: &str, namespace: Option<&str>) -> Value {
    let mut meta = json!({
        "name": name,
        "labels": {
            MANAGED_BY_LABEL: MANAGED_BY_VALUE,
            STACK_LABEL: spec.cluster.name,
        },
    });
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    meta
}

/// A quota as Kueue's CRD takes it: integers stay integers (as the seed writes them).
pub fn quantity_json(q: &SpecQuantity) -> Value {
    match q {
        SpecQuantity::Int(i) => json!(i),
        SpecQuantity::Text(t) => json!(t),
    }
}

/// A container resource as Kubernetes writes it: always a string.
/// A toleration as Kubernetes writes it (operator `Equal` when a value is given, else `Exists`).
pub fn toleration_json(t: &crate::spec::types::Toleration) -> Value {
    let mut v = serde_json::Map::new();
    v.insert("key".into(), json!(t.key));
    v.insert(
        "operator".into(),
        json!(t.operator.clone().unwrap_or_else(|| if t.value.is_some() {
            "Equal".into()
        } else {
            "Exists".into()
        })),
    );
    if let Some(value) = &t.value {
        v.insert("value".into(), json!(value));
    }
    if let Some(e) = &t.effect {
        v.insert("effect".into(), json!(e));
    }
    Value::Object(v)
}

pub fn quantity_string(q: &SpecQuantity) -> String {
    q.as_text()
}

/// A desired state for unit tests: cluster `c` in project `p`, location `z`, no node pools,
/// an external Kueue v0.19.2, and `objects` as the Kubernetes objects.
#[cfg(test)]
pub(crate) fn desired_for_tests(objects: Vec<Value>) -> DesiredState {
    DesiredState {
        gke: GkeDesired {
            cluster_ref: ClusterRef {
                project: "p".into(),
                location: "z".into(),
                cluster: "c".into(),
            },
            cluster: json!({"name": "c"}),
            node_pools: vec![],
            deletion_protection: true,
        },
        kueue: KueueInstall {
            version: "v0.19.2".into(),
            mode: InstallMode::External,
            manifests: String::new(),
            feature_gates: Default::default(),
            manages_jobsets: true,
        },
        kubernetes: objects.into_iter().map(Arc::new).collect(),
        sensitive: Default::default(),
    }
}

/// Validates the loaded spec and renders its desired state. Returns the diagnostics in both cases
/// (warnings and notes when it succeeds).
pub fn build(loaded: &Loaded) -> (Option<DesiredState>, Diagnostics) {
    // A caller that loaded the spec itself may not have expanded its capacity ladder.
    let expanded = ladder::expanded_copy(loaded);
    let loaded = expanded.as_ref().unwrap_or(loaded);
    let diags = match validated(loaded) {
        Ok(diags) => diags,
        Err(diags) => return (None, diags),
    };
    let desired = render(&loaded.spec, &loaded.files);
    check_desired(loaded, desired, loaded.spec.manifests.len(), diags)
}

/// [`build`] for a caller that keeps the spec only beside its desired state (`ops::load`):
/// the spec's raw manifests are moved into the desired state instead of copied, so a large spec
/// never holds both. When the spec is valid, `loaded.spec.manifests` is empty afterwards; the
/// checks of the rendered objects read the manifests as rendered (the spec's, labelled).
pub fn build_moving_manifests(loaded: &mut Loaded) -> (Option<DesiredState>, Diagnostics) {
    ladder::expand_loaded(loaded);
    let diags = match validated(loaded) {
        Ok(diags) => diags,
        Err(diags) => return (None, diags),
    };
    let manifests = std::mem::take(&mut loaded.spec.manifests);
    let count = manifests.len();
    // The spec read its manifests at exactly their lengths (`vocab::object::Tight`).
    let desired = render_with_manifests(&loaded.spec, &loaded.files, manifests.into_iter(), count);
    check_desired(loaded, desired, count, diags)
}

/// What loading and validation said of the spec, or the same with its errors.
fn validated(loaded: &Loaded) -> Result<Diagnostics, Diagnostics> {
    let mut diags = loaded.diagnostics.clone();
    diags.extend(validate::validate(loaded).without_paths_under(&loaded.undecoded));
    if diags.has_errors() {
        return Err(diags.sorted());
    }
    Ok(diags)
}

/// Marks the sensitive fields of the rendered objects and checks them against the spec (the
/// last `manifests` objects are the spec's raw manifests).
fn check_desired(
    loaded: &Loaded,
    mut desired: DesiredState,
    manifests: usize,
    mut diags: Diagnostics,
) -> (Option<DesiredState>, Diagnostics) {
    desired.sensitive = loaded.sensitive.clone();
    for object in &mut desired.kubernetes {
        mark_sensitive_fields(Arc::make_mut(object), desired.sensitive.values());
    }
    diags.extend(validate::check_rendered(loaded, &desired, manifests));
    if diags.has_errors() {
        return (None, diags.sorted());
    }
    (Some(desired), diags.sorted())
}

/// Renders a validated spec.
pub fn render(spec: &Spec, files: &BTreeMap<String, String>) -> DesiredState {
    render_with_manifests(
        spec,
        files,
        spec.manifests.iter().map(crate::vocab::object::tight_copy),
        spec.manifests.len(),
    )
}

/// Renders a validated spec whose raw manifests are `manifests` (`count` of them, each already
/// tight), in their order: they are the last objects of the desired state.
fn render_with_manifests(
    spec: &Spec,
    files: &BTreeMap<String, String>,
    manifests: impl Iterator<Item = Value>,
    count: usize,
) -> DesiredState {
    let cluster_ref = ClusterRef {
        project: spec.project.clone(),
        location: spec.location.clone(),
        cluster: spec.cluster.name.clone(),
    };
    let gke = GkeDesired {
        cluster_ref,
        cluster: gke::cluster_body(spec),
        node_pools: spec
            .node_pools
            .iter()
            .map(|p| gke::node_pool_body(&spec.cluster.name, p))
            .collect(),
        deletion_protection: spec.cluster.deletion_protection,
    };
    let kueue_install = KueueInstall {
        version: spec.kueue.version.clone(),
        mode: spec.kueue.install,
        manifests: spec
            .kueue
            .manifests
            .clone()
            .unwrap_or_else(|| KueueInstall::default_manifests(&spec.kueue.version)),
        feature_gates: spec.kueue.feature_gates.clone(),
        manages_jobsets: jobset_install::installed(spec.jobset.install),
    };

    let mut objects = Vec::new();
    if kueue_install.mode == InstallMode::Managed {
        objects.push(kueue_install::installation_object(
            &kueue_install,
            &spec.cluster.name,
        ));
    }
    if spec.jobset.install == JobSetInstall::Builtin {
        objects.push(jobset_install::installation_object(
            &spec.jobset.version,
            &spec.cluster.name,
        ));
    }
    objects.extend(ladder::computeclass::objects(spec));
    for f in &spec.kueue.flavors {
        objects.push(kueue::resource_flavor(spec, f));
    }
    let checks = kueue::provisioning_checks(spec);
    for c in &checks {
        objects.push(kueue::provisioning_request_config(spec, c));
        objects.push(kueue::admission_check(spec, c));
    }
    for cq in &spec.kueue.cluster_queues {
        objects.push(kueue::cluster_queue(spec, cq));
    }
    for lq in &spec.kueue.local_queues {
        objects.push(kueue::local_queue(spec, lq));
    }
    let mut config_maps_seen = Vec::new();
    for job in &spec.jobs {
        let key = (job.namespace.clone(), jobs::config_map_name(job));
        if !config_maps_seen.contains(&key) {
            let script = files.get(&job.script).map(String::as_str).unwrap_or("");
            objects.push(jobs::config_map(spec, job, script));
            config_maps_seen.push(key);
        }
    }
    let dws = kueue::dws_flavors(spec);
    for job in &spec.jobs {
        let queue_has_dws = queue_of(spec, &job.namespace, &job.queue)
            .is_some_and(|cq| kueue::queue_flavors(cq).iter().any(|f| dws.contains(f)));
        let script = files.get(&job.script).map(String::as_str).unwrap_or("");
        for run in jobs::run_names(job) {
            objects.push(jobs::job_object(&jobs::Run {
                spec,
                job,
                name: &run,
                queue_has_dws,
                script,
            }));
        }
    }
    let mut kubernetes: Vec<Arc<Value>> = Vec::with_capacity(objects.len() + count);
    kubernetes.extend(
        objects
            .into_iter()
            .map(|o| Arc::new(crate::vocab::object::tight(o))),
    );
    // Thousands of manifests are most of a large spec: each comes tight, copied or moved once.
    for mut m in manifests {
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if let Some(labels) = labels.as_object_mut() {
                labels.insert(MANAGED_BY_LABEL.into(), json!(MANAGED_BY_VALUE));
                labels.insert(STACK_LABEL.into(), json!(spec.cluster.name));
            }
        }
        kubernetes.push(Arc::new(m));
    }

    DesiredState {
        gke,
        kueue: kueue_install,
        kubernetes,
        sensitive: Default::default(),
    }
}

/// Records in [`SENSITIVE_FIELDS_ANNOTATION`] which fields of `object` hold a sensitive value.
pub fn mark_sensitive_fields(object: &mut Value, sensitive: &[String]) {
    /// Walks `value` keeping the path as a stack of escaped segments: a JSON pointer is written
    /// only for a field that holds a sensitive value, not for every node of every object.
    fn walk<'v>(
        value: &'v Value,
        path: &mut Vec<std::borrow::Cow<'v, str>>,
        sensitive: &[String],
        out: &mut Vec<String>,
    ) {
        match value {
            Value::String(s)
                if sensitive
                    .iter()
                    .any(|v| !v.is_empty() && s.contains(v.as_str())) =>
            {
                out.push(path.iter().fold(String::new(), |mut pointer, segment| {
                    pointer.push('/');
                    pointer.push_str(segment);
                    pointer
                }));
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(std::borrow::Cow::Owned(i.to_string()));
                    walk(item, path, sensitive, out);
                    path.pop();
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    let escaped = if key.contains(['~', '/']) {
                        std::borrow::Cow::Owned(key.replace('~', "~0").replace('/', "~1"))
                    } else {
                        std::borrow::Cow::Borrowed(key.as_str())
                    };
                    path.push(escaped);
                    walk(item, path, sensitive, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    if sensitive.is_empty() {
        return;
    }
    let mut pointers = Vec::new();
    walk(object, &mut Vec::new(), sensitive, &mut pointers);
    if pointers.is_empty() {
        return;
    }
    let list = serde_json::to_string(&pointers).unwrap_or_default();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(SENSITIVE_FIELDS_ANNOTATION.to_string(), json!(list));
        }
    }
}

/// The ClusterQueue behind a job's LocalQueue.
pub fn queue_of<'a>(
    spec: &'a Spec,
    namespace: &str,
    local_queue: &str,
) -> Option<&'a crate::spec::types::ClusterQueue> {
    let lq = spec
        .kueue
        .local_queues
        .iter()
        .find(|l| l.name == local_queue && l.namespace == namespace)?;
    spec.kueue
        .cluster_queues
        .iter()
        .find(|c| c.name == lq.cluster_queue)
}
