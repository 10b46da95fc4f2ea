//! The ONE list of what gkq does not compare, and the rules that make two spellings of the same
//! value equal. Every "why is there no diff for X?" question is answered in this file.
//!
//! # GKE
//!
//! gkq compares only what the spec owns: it walks the desired request body and compares each
//! leaf it sets with the live value at the same path (`compare::owned`). So the many fields GKE
//! fills in by itself never show as drift, without listing each one:
//! node config `diskSizeGb` (100), `diskType` (pd-balanced), `imageType` (COS_CONTAINERD),
//! `serviceAccount`, `metadata`, `oauthScopes`, `shieldedInstanceConfig`, `kubeletConfig`,
//! `gcfsConfig` inherited from the cluster default; node pool `locations`, `upgradeSettings`
//! (SURGE, or SHORT_LIVED on DWS pools), `maxPodsConstraint`, `networkConfig`, `management`,
//! `autoscaling.locationPolicy`, `version`; cluster `releaseChannel` (auto-enrolled), addons the
//! spec does not name, `network`, `subnetwork`, `ipAllocationPolicy`, logging and monitoring,
//! `nodeConfig` and `initialNodeCount` (deprecated mirrors of the first pool), and so on
//! (docs/gke.md section d). The lists below are what remains:
//!
//! - [`GKE_CLUSTER_OUTPUT_ONLY`], [`GKE_NODE_POOL_OUTPUT_ONLY`]: output-only and server-computed
//!   fields, dropped from live objects before they are shown or fingerprinted.
//! - [`GKE_CREATE_ONLY`]: node pool fields that only matter when the pool is created
//!   (`initialNodeCount`: the autoscaler changes the size afterwards, so comparing it would fight
//!   the autoscaler).
//! - [`GKE_IGNORED_LABEL_PREFIXES`]: resource labels GKE adds (`goog-gke-*`, `goog-k8s-*`) and the
//!   applied-revision labels gkq's apply writes; they are ignored in diffs and kept when gkq
//!   writes labels.
//! - [`GKE_SERVER_TAINT_PREFIXES`]: node taints GKE adds (`cloud.google.com/gke-queued` on
//!   queued-provisioning pools); ignored in diffs and kept when gkq writes taints.
//! - [`GKE_AUTHORITATIVE_MAPS`]: label maps the spec owns entirely, so a live key the spec dropped
//!   is a change (except the prefixes above).
//!
//! Equal spellings ([`same_leaf`]): enum names and their integers (`NO_RESERVATION` == `1`,
//! [`GKE_ENUMS`]), int64 as a string or a number (`"110"` == `110`), an absent proto3 zero value
//! (absent == `0`, `false`, `""`, `[]`, `{}` or the enum's `*_UNSPECIFIED`), and versions by prefix
//! or minimum (spec `1.34` matches live `1.34.5-gke.100` and anything newer, since auto-upgrade
//! moves versions forward). The spec's `initialClusterVersion` is compared with the live
//! `currentMasterVersion` (the live `initialClusterVersion` never changes after creation).
//! Scalar lists (`oauthScopes`, `locations`, `tags`) compare as sets.
//!
//! # Kubernetes
//!
//! - [`KUBE_VOLATILE_METADATA`]: metadata the API server writes.
//! - `status`, whole.
//! - [`KUBE_IGNORED_ANNOTATIONS`], and finalizers with a prefix in [`KUBE_IGNORED_FINALIZER_PREFIXES`]
//!   (Kueue's `resource-in-use`, KubeRay's job finalizer).
//! - [`KUBE_CONTROLLER_OWNED_JOB_FIELDS`]: job fields Kueue toggles (`spec.suspend`).
//! - Quantities compare by value (`20Gi` == `21474836480`, `500m` == `0.5`).
//!
//! The rest of the Kubernetes story (CRD and webhook defaults) is handled by comparing against the
//! server's own dry-run answer, supplied by the Kubernetes observer.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::PathSeg;
use crate::addr::ResourceKind;
use crate::vocab::object::{At, Field};

/// Cluster fields that are output-only (discovery `readOnly`) or server-computed
/// (`labelFingerprint`, `etag`), plus `nodePools` (each pool has its own address).
pub const GKE_CLUSTER_OUTPUT_ONLY: &[&str] = &[
    "createTime",
    "currentEmulatedVersion",
    "currentMasterVersion",
    "currentNodeCount",
    "currentNodeVersion",
    "endpoint",
    "expireTime",
    "id",
    "instanceGroupUrls",
    "location",
    "nodeIpv4CidrSize",
    "satisfiesPzi",
    "satisfiesPzs",
    "selfLink",
    "servicesIpv4Cidr",
    "status",
    "statusMessage",
    "tpuIpv4CidrBlock",
    "zone",
    "conditions",
    "labelFingerprint",
    "etag",
    "nodePools",
    "masterAuth.clusterCaCertificate",
    "masterAuth.clientCertificate",
    "masterAuth.clientKey",
    "controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint",
    "controlPlaneEndpointsConfig.ipEndpointsConfig.publicEndpoint",
    "controlPlaneEndpointsConfig.ipEndpointsConfig.privateEndpoint",
];

/// Node pool fields that are output-only or server-computed.
pub const GKE_NODE_POOL_OUTPUT_ONLY: &[&str] = &[
    "conditions",
    "etag",
    "instanceGroupUrls",
    "kubeletCertInfo",
    "podIpv4CidrSize",
    "selfLink",
    "status",
    "statusMessage",
    "updateInfo",
    "config.effectiveCgroupMode",
];

/// Node pool fields that only matter at creation and are never compared afterwards.
pub const GKE_CREATE_ONLY: &[&str] = &["initialNodeCount"];

/// Resource label keys GKE adds to clusters and node pools, and the applied-revision labels
/// (`gkq-revision`, `gkq-commit`) gkq writes after an apply (see `gitops::revision`): the spec
/// never sets them, so they must neither show as drift nor be dropped by a label update.
pub const GKE_IGNORED_LABEL_PREFIXES: &[&str] =
    &["goog-gke-", "goog-k8s-", "gkq-revision", "gkq-commit"];

/// Node taint keys GKE adds (queued provisioning's `cloud.google.com/gke-queued`).
pub const GKE_SERVER_TAINT_PREFIXES: &[&str] = &["cloud.google.com/gke-"];

/// Maps the spec owns entirely: a live key the spec does not set is a change.
pub const GKE_AUTHORITATIVE_MAPS: &[&str] =
    &["resourceLabels", "config.resourceLabels", "config.labels"];

/// `(parent field, field)`: where an enum sits, as `("upgradeSettings", "strategy")`.
pub type EnumField = (&'static str, &'static str);
/// An enum value's name and proto number.
pub type EnumValue = (&'static str, u64);

/// GKE enums that may arrive as names or as integers (`$alt=json;enum-encoding=int`), keyed by
/// `(parent field, field)`, each name with its proto number. Numbers can have gaps
/// (`NodePoolUpdateStrategy`: BLUE_GREEN = 2, SURGE = 3, SHORT_LIVED = 5), so they are written
/// out, as the API's proto descriptors give them; a test checks them against the GKE emulator's
/// schema, generated from the same descriptors.
pub const GKE_ENUMS: &[(EnumField, &[EnumValue])] = &[
    (
        ("reservationAffinity", "consumeReservationType"),
        &[
            ("UNSPECIFIED", 0),
            ("NO_RESERVATION", 1),
            ("ANY_RESERVATION", 2),
            ("SPECIFIC_RESERVATION", 3),
            ("ANY_RESERVATION_THEN_FAIL", 4),
        ],
    ),
    (
        ("placementPolicy", "type"),
        &[("TYPE_UNSPECIFIED", 0), ("COMPACT", 1)],
    ),
    (
        ("autoscaling", "locationPolicy"),
        &[
            ("LOCATION_POLICY_UNSPECIFIED", 0),
            ("BALANCED", 1),
            ("ANY", 2),
        ],
    ),
    (
        ("upgradeSettings", "strategy"),
        &[
            ("NODE_POOL_UPDATE_STRATEGY_UNSPECIFIED", 0),
            ("BLUE_GREEN", 2),
            ("SURGE", 3),
            ("SHORT_LIVED", 5),
        ],
    ),
    (
        ("releaseChannel", "channel"),
        &[
            ("UNSPECIFIED", 0),
            ("RAPID", 1),
            ("REGULAR", 2),
            ("STABLE", 3),
            ("EXTENDED", 4),
        ],
    ),
    (
        ("taints", "effect"),
        &[
            ("EFFECT_UNSPECIFIED", 0),
            ("NO_SCHEDULE", 1),
            ("PREFER_NO_SCHEDULE", 2),
            ("NO_EXECUTE", 3),
        ],
    ),
    (
        ("workloadMetadataConfig", "mode"),
        &[
            ("MODE_UNSPECIFIED", 0),
            ("GCE_METADATA", 1),
            ("GKE_METADATA", 2),
        ],
    ),
    (
        ("sandboxConfig", "type"),
        &[("UNSPECIFIED", 0), ("GVISOR", 1)],
    ),
];

/// Node pool `status` values, by integer, for live objects that use enum integers.
pub const GKE_NODE_POOL_STATUS: &[&str] = &[
    "STATUS_UNSPECIFIED",
    "PROVISIONING",
    "RUNNING",
    "RUNNING_WITH_ERROR",
    "RECONCILING",
    "STOPPING",
    "ERROR",
];

/// Cluster `status` values, by integer.
pub const GKE_CLUSTER_STATUS: &[&str] = &[
    "STATUS_UNSPECIFIED",
    "PROVISIONING",
    "RUNNING",
    "RECONCILING",
    "STOPPING",
    "ERROR",
    "DEGRADED",
];

/// Metadata the Kubernetes API server writes.
pub const KUBE_VOLATILE_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Annotations other tools write.
pub const KUBE_IGNORED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// Finalizers controllers add (Kueue's `kueue.x-k8s.io/resource-in-use`, KubeRay's
/// `ray.io/rayjob-finalizer`).
pub const KUBE_IGNORED_FINALIZER_PREFIXES: &[&str] = &["kueue.x-k8s.io/", "ray.io/"];

/// Job fields Kueue owns: it suspends a job until admission and resumes it after.
pub const KUBE_CONTROLLER_OWNED_JOB_FIELDS: &[&str] = &["spec.suspend"];

/// What Kueue writes into a job's pod templates when it admits the job, and takes out again when
/// it suspends it: the flavor's node labels and tolerations, the admission checks' podSetUpdates
/// (labels, annotations) and topology-aware scheduling gates. See docs/kueue.md, "What admission
/// writes into a job".
pub const KUEUE_POD_TEMPLATE_INJECTIONS: &[&str] = &[
    "metadata.labels",
    "metadata.annotations",
    "spec.nodeSelector",
    "spec.tolerations",
    "spec.schedulingGates",
];

/// Which rules apply when comparing two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Gke,
    Kube,
}

/// The status of a live node pool or cluster as a name, whether it came as a name or an integer.
pub fn status_name(object: &Value, names: &[&str]) -> Option<String> {
    match object.field("status")? {
        Value::String(name) => Some(name.clone()),
        Value::Number(n) => n
            .as_u64()
            .and_then(|i| names.get(i as usize))
            .map(|s| s.to_string()),
        _ => None,
    }
}

pub fn is_ignored_gke_label(key: &str) -> bool {
    GKE_IGNORED_LABEL_PREFIXES
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

pub fn is_server_taint(taint: &Value) -> bool {
    taint
        .field("key")
        .and_then(Value::as_str)
        .is_some_and(|key| {
            GKE_SERVER_TAINT_PREFIXES
                .iter()
                .any(|prefix| key.starts_with(prefix))
        })
}

/// Removes a dotted path (`a.b.c`) from an object, if present.
fn remove_path(value: &mut Value, dotted: &str) {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut current = value;
    for part in parts {
        match current.get_mut(part) {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Some(map) = current.as_object_mut() {
        map.remove(last);
    }
}

/// A live cluster as gkq compares it: output-only fields gone, GKE's labels gone, and
/// `initialClusterVersion` standing for the version the control plane runs now.
pub fn gke_cluster_live_view(live: &Value) -> Value {
    let mut view = live.clone();
    if let Some(current) = live.field("currentMasterVersion").cloned()
        && let Some(map) = view.as_object_mut()
    {
        map.insert("initialClusterVersion".to_string(), current);
    }
    for path in GKE_CLUSTER_OUTPUT_ONLY {
        remove_path(&mut view, path);
    }
    drop_ignored_labels(view.get_mut("resourceLabels"));
    view
}

/// A live node pool as gkq compares it: output-only fields, GKE's labels and taints gone.
pub fn gke_node_pool_live_view(live: &Value) -> Value {
    let mut view = live.clone();
    for path in GKE_NODE_POOL_OUTPUT_ONLY {
        remove_path(&mut view, path);
    }
    if let Some(config) = view.get_mut("config") {
        drop_ignored_labels(config.get_mut("resourceLabels"));
        if let Some(taints) = config.get_mut("taints").and_then(Value::as_array_mut) {
            taints.retain(|taint| !is_server_taint(taint));
        }
    }
    view
}

/// A desired node pool as gkq compares it after creation: without create-only fields.
pub fn gke_node_pool_desired_view(desired: &Value) -> Value {
    let mut view = desired.clone();
    for path in GKE_CREATE_ONLY {
        remove_path(&mut view, path);
    }
    view
}

/// A desired cluster as gkq compares it: without `nodePools` (each pool is its own resource).
pub fn gke_cluster_desired_view(desired: &Value) -> Value {
    let mut view = desired.clone();
    remove_path(&mut view, "nodePools");
    view
}

fn drop_ignored_labels(labels: Option<&mut Value>) {
    if let Some(map) = labels.and_then(Value::as_object_mut) {
        map.retain(|key, _| !is_ignored_gke_label(key));
    }
}

/// A Kubernetes object without what the server and controllers write.
///
/// What [`kube_view_owned`] would remove whole (`status`, the volatile metadata such as
/// `managedFields`, often most of a live object) is left out of the copy instead of copied and
/// removed; the fields copied are in the order its removals leave them, so both views are alike.
pub fn kube_view(object: &Value) -> Value {
    let Value::Object(map) = object else {
        return kube_view_owned(object.clone());
    };
    let mut fields: Vec<(&String, &Value)> = map.iter().collect();
    remove_as_map_removes(&mut fields, "status");
    let view = fields
        .into_iter()
        .map(|(key, value)| match value {
            Value::Object(metadata) if key == "metadata" => {
                let mut fields: Vec<(&String, &Value)> = metadata.iter().collect();
                for field in KUBE_VOLATILE_METADATA {
                    remove_as_map_removes(&mut fields, field);
                }
                let metadata = fields
                    .into_iter()
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect();
                (key.clone(), Value::Object(metadata))
            }
            _ => (key.clone(), value.clone()),
        })
        .collect();
    kube_view_owned(Value::Object(view))
}

/// Removes `key` from `fields` as [`Map::remove`] removes it from a map that keeps its order
/// (serde_json's `preserve_order`): the last field takes its place.
fn remove_as_map_removes(fields: &mut Vec<(&String, &Value)>, key: &str) {
    if let Some(at) = fields.iter().position(|(k, _)| k.as_str() == key) {
        fields.swap_remove(at);
    }
}

/// [`kube_view`], borrowed when the object is its own view, as gkq's desired objects are (they
/// carry nothing the server or a controller writes): a plan takes the view of every desired
/// object it compares.
pub fn kube_view_cow(object: &Value) -> Cow<'_, Value> {
    if is_own_kube_view(object) {
        Cow::Borrowed(object)
    } else {
        Cow::Owned(kube_view(object))
    }
}

/// Whether [`kube_view_owned`] would leave `object` as it is.
fn is_own_kube_view(object: &Value) -> bool {
    let Value::Object(map) = object else {
        return true;
    };
    if map.contains_key("status") {
        return false;
    }
    if let Some(metadata) = map.field("metadata").and_then(Value::as_object) {
        if KUBE_VOLATILE_METADATA
            .iter()
            .any(|field| metadata.contains_key(*field))
        {
            return false;
        }
        if let Some(annotations) = metadata.field("annotations").and_then(Value::as_object)
            && (annotations.is_empty() || annotations.keys().any(|k| is_ignored_annotation(k)))
        {
            return false;
        }
        if let Some(finalizers) = metadata.field("finalizers").and_then(Value::as_array)
            && (finalizers.is_empty() || finalizers.iter().any(is_ignored_finalizer))
        {
            return false;
        }
    }
    !(is_run_object(object)
        && KUBE_CONTROLLER_OWNED_JOB_FIELDS
            .iter()
            .any(|path| has_path(object, path)))
}

fn is_ignored_annotation(key: &str) -> bool {
    KUBE_IGNORED_ANNOTATIONS.contains(&key)
}

fn is_ignored_finalizer(finalizer: &Value) -> bool {
    finalizer.as_str().is_some_and(|f| {
        KUBE_IGNORED_FINALIZER_PREFIXES
            .iter()
            .any(|prefix| f.starts_with(prefix))
    })
}

/// Whether `object` has an address of a job kind ([`crate::addr::ResourceKind::is_run`]), read
/// without making the address.
fn is_run_object(object: &Value) -> bool {
    match (
        object.field("apiVersion").and_then(Value::as_str),
        object.field("kind").and_then(Value::as_str),
        object.at("/metadata/name").and_then(Value::as_str),
    ) {
        (Some(api_version), Some(kind), Some(name)) if !name.is_empty() => {
            ResourceKind::of(api_version, kind).is_run()
        }
        _ => false,
    }
}

/// Whether the field at `dotted` (as [`remove_path`] reads it) is present.
fn has_path(value: &Value, dotted: &str) -> bool {
    let mut current = value;
    for part in dotted.split('.') {
        match current.get(part) {
            Some(next) => current = next,
            None => return false,
        }
    }
    true
}

/// [`kube_view`] of an object the caller is done with (not copied).
pub fn kube_view_owned(mut view: Value) -> Value {
    let is_job = is_run_object(&view);
    if let Some(map) = view.as_object_mut() {
        map.remove("status");
    }
    if let Some(metadata) = view.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in KUBE_VOLATILE_METADATA {
            metadata.remove(*field);
        }
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.retain(|key, _| !is_ignored_annotation(key));
            if annotations.is_empty() {
                metadata.remove("annotations");
            }
        }
        if let Some(finalizers) = metadata.get_mut("finalizers").and_then(Value::as_array_mut) {
            finalizers.retain(|f| !is_ignored_finalizer(f));
            if finalizers.is_empty() {
                metadata.remove("finalizers");
            }
        }
    }
    if is_job {
        for path in KUBE_CONTROLLER_OWNED_JOB_FIELDS {
            remove_path(&mut view, path);
        }
    }
    view
}

/// Removes from a live job's pod templates the entries Kueue wrote there
/// ([`KUEUE_POD_TEMPLATE_INJECTIONS`]) that `desired` does not have, so that an admitted job
/// compares equal to its spec, and a new run does not list them as removed (Kueue writes them
/// again when it admits the run). An entry the spec sets is kept and compared.
pub fn without_kueue_injections(live: &mut Value, desired: &Value) {
    let is_pod_template = live
        .field("spec")
        .and_then(|spec| spec.field("containers"))
        .is_some();
    if is_pod_template {
        for site in KUEUE_POD_TEMPLATE_INJECTIONS {
            keep_only_desired(live, desired, site);
        }
        if live
            .field("metadata")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
            && desired.field("metadata").is_none()
        {
            remove_path(live, "metadata");
        }
    }
    match live {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                without_kueue_injections(value, desired.get(key).unwrap_or(&Value::Null));
            }
        }
        Value::Array(items) => {
            for (i, value) in items.iter_mut().enumerate() {
                without_kueue_injections(value, desired.get(i).unwrap_or(&Value::Null));
            }
        }
        _ => {}
    }
}

/// At `dotted` under `live`: only the map entries or list items `desired` has there; the field
/// itself goes when nothing is left of it and `desired` does not set it.
fn keep_only_desired(live: &mut Value, desired: &Value, dotted: &str) {
    let mut want = Some(desired);
    let mut have = Some(&mut *live);
    for part in dotted.split('.') {
        want = want.and_then(|w| w.get(part));
        have = have.and_then(|h| h.get_mut(part));
    }
    let Some(have) = have else { return };
    let emptied = match have {
        Value::Object(map) => {
            map.retain(|key, _| want.and_then(|w| w.get(key)).is_some());
            map.is_empty()
        }
        Value::Array(items) => {
            let wanted = want.and_then(Value::as_array);
            items.retain(|item| wanted.is_some_and(|w| w.contains(item)));
            items.is_empty()
        }
        _ => false,
    };
    if emptied && want.is_none() {
        remove_path(live, dotted);
    }
}

/// Whether a value is what proto3 leaves out (and so what an absent live field means).
pub fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.values().all(is_zero),
    }
}

/// The keys of a path, without list indices: `config.taints[0].effect` -> `[config, taints, effect]`.
pub fn keys_of(path: &[PathSeg]) -> Vec<&str> {
    path.iter()
        .filter_map(|seg| match seg {
            PathSeg::Key(key) => Some(key.as_str()),
            PathSeg::Index(_) => None,
        })
        .collect()
}

fn enum_names(path: &[PathSeg]) -> Option<&'static [EnumValue]> {
    let keys = keys_of(path);
    let [.., parent, field] = keys.as_slice() else {
        return None;
    };
    GKE_ENUMS
        .iter()
        .find(|((p, f), _)| p == parent && f == field)
        .map(|(_, names)| *names)
}

/// The proto number of an enum value given by name or number (`None` when it is neither).
fn enum_number(names: &[EnumValue], value: &Value) -> Option<u64> {
    match value {
        Value::String(name) => names.iter().find(|(n, _)| n == name).map(|(_, i)| *i),
        Value::Number(n) => n.as_u64().filter(|i| names.iter().any(|(_, k)| k == i)),
        _ => None,
    }
}

fn is_version_path(path: &[PathSeg]) -> bool {
    matches!(path, [PathSeg::Key(key)] if key == "initialClusterVersion" || key == "version")
}

/// Numbers, whether JSON numbers or int64-as-string.
fn as_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The numeric parts of a GKE version: `1.34.5-gke.100` -> `[1, 34, 5, 100]`.
fn version_parts(version: &str) -> Vec<u64> {
    version
        .split(['.', '-'])
        .filter_map(|part| part.trim_start_matches("gke").parse().ok())
        .collect()
}

/// Spec version `1.34` is satisfied by live `1.34`, `1.34.5-gke.100`, or anything newer
/// (auto-upgrade moves clusters and pools forward; gkq never downgrades).
pub fn version_satisfied(desired: &str, live: &str) -> bool {
    if desired == live || desired == "latest" || desired == "-" {
        return true;
    }
    let (want, have) = (version_parts(desired), version_parts(live));
    if want.is_empty() || have.is_empty() {
        return false;
    }
    for (w, h) in want.iter().zip(have.iter()) {
        if h != w {
            return h > w;
        }
    }
    have.len() >= want.len()
}

/// A Kubernetes quantity in nano-units (`1` = 1_000_000_000), exact for the sizes that occur.
pub fn parse_quantity(text: &str) -> Option<i128> {
    crate::vocab::quantity::Quantity::parse(text.trim())
        .ok()
        .map(|q| q.nanos())
}

fn is_quantity_path(path: &[PathSeg]) -> bool {
    keys_of(path).iter().any(|key| {
        matches!(
            *key,
            "requests"
                | "limits"
                | "nominalQuota"
                | "borrowingLimit"
                | "lendingLimit"
                | "capacity"
                | "allocatable"
        )
    })
}

fn as_quantity(value: &Value) -> Option<i128> {
    match value {
        Value::String(s) => parse_quantity(s),
        Value::Number(n) => parse_quantity(&n.to_string()),
        _ => None,
    }
}

/// Spells the quantities of a desired Kubernetes view and its live view alike, for people: at
/// every quantity path ([`same_leaf`]'s), a value that parses as a quantity becomes Kubernetes'
/// canonical string (`Quantity.String()`, what the API server stores), the live one in the
/// desired one's format (live `80530636800` beside desired `100Gi` reads `75Gi`). So a diff shows
/// `"40"` against `"80"`, never the string `"40"` against the number `80`, and a value the two
/// sides spell differently but that is equal reads the same on both. Comparison is by value
/// either way; this only changes how the views read.
pub fn spell_quantities_alike(desired: &mut Value, live: &mut Value) {
    respell(desired, Some(live), &mut Vec::new());
}

fn respell(desired: &mut Value, live: Option<&mut Value>, path: &mut Vec<PathSeg>) {
    use crate::vocab::quantity::Quantity;
    match (desired, live) {
        (Value::Object(d), live) => {
            let mut live = live.and_then(|l| l.as_object_mut());
            for (key, child) in d.iter_mut() {
                path.push(PathSeg::Key(key.clone()));
                respell(child, live.as_mut().and_then(|l| l.get_mut(key)), path);
                path.pop();
            }
        }
        (Value::Array(d), live) => {
            let mut live = live.and_then(|l| l.as_array_mut());
            for (i, child) in d.iter_mut().enumerate() {
                path.push(PathSeg::Index(i));
                respell(child, live.as_mut().and_then(|l| l.get_mut(i)), path);
                path.pop();
            }
        }
        (leaf, live) if is_quantity_path(path) => {
            let Ok(wanted) = Quantity::from_json(leaf) else {
                return;
            };
            if let Some(live) = live
                && let Ok(have) = Quantity::from_json(live)
            {
                *live = Value::String(have.in_format(wanted.format()).to_canonical_string());
            }
            *leaf = Value::String(wanted.to_canonical_string());
        }
        _ => {}
    }
}

/// Whether a desired leaf and the live value at the same path are the same value, under the
/// spelling rules in the module docs. `live` is `None` when the field is absent.
pub fn same_leaf(
    path: &[PathSeg],
    desired: &Value,
    live: Option<&Value>,
    dialect: Dialect,
) -> bool {
    let enums = match dialect {
        Dialect::Gke => enum_names(path),
        Dialect::Kube => None,
    };
    let Some(live) = live.filter(|l| !l.is_null()) else {
        return is_zero(desired)
            || enums.is_some_and(|names| enum_number(names, desired) == Some(0));
    };
    if desired == live {
        return true;
    }
    if let Some(names) = enums {
        return match (enum_number(names, desired), enum_number(names, live)) {
            (Some(d), Some(l)) => d == l,
            _ => false,
        };
    }
    if dialect == Dialect::Gke
        && is_version_path(path)
        && let (Some(d), Some(l)) = (desired.as_str(), live.as_str())
    {
        return version_satisfied(d, l);
    }
    if dialect == Dialect::Kube
        && (is_quantity_path(path) || desired.is_number() || live.is_number())
        && let (Some(d), Some(l)) = (as_quantity(desired), as_quantity(live))
    {
        return d == l;
    }
    // int64 travels as a JSON string; int32 as a number.
    if (desired.is_number() || live.is_number())
        && let (Some(d), Some(l)) = (as_number(desired), as_number(live))
    {
        return d == l;
    }
    false
}

/// The name of an enum value, for display: live `1` at `consumeReservationType` reads
/// `NO_RESERVATION`. Anything else is returned unchanged.
pub fn display_enum(path: &[PathSeg], value: &Value) -> Value {
    match enum_names(path) {
        Some(names) => match enum_number(names, value) {
            Some(number) => names
                .iter()
                .find(|(_, n)| *n == number)
                .map(|(name, _)| Value::String(name.to_string()))
                .unwrap_or_else(|| value.clone()),
            None => value.clone(),
        },
        None => value.clone(),
    }
}

/// Labels from `live` that gkq must keep when it writes a label map (GKE's own).
pub fn preserved_gke_labels(live_labels: Option<&Value>) -> Map<String, Value> {
    live_labels
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter(|(key, _)| is_ignored_gke_label(key))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The view copied without what it leaves out is the view made by removing it from a whole
    /// copy: the same fields in the same order, wherever `status` and the volatile metadata sit
    /// (first, between, last, absent), with annotations and finalizers filtered.
    #[test]
    fn a_view_copied_without_what_it_leaves_out_is_the_view_made_by_removing_it() {
        let metadata_orders: [&[&str]; 4] = [
            &[
                "managedFields",
                "name",
                "uid",
                "labels",
                "resourceVersion",
                "annotations",
            ],
            &[
                "name",
                "annotations",
                "generation",
                "finalizers",
                "creationTimestamp",
            ],
            &["uid", "resourceVersion", "managedFields", "generation"],
            &["name", "namespace"],
        ];
        let top_orders: [&[&str]; 4] = [
            &["apiVersion", "kind", "metadata", "spec", "status"],
            &["status", "apiVersion", "kind", "metadata", "spec"],
            &["apiVersion", "status", "kind", "spec", "metadata", "data"],
            &["kind", "apiVersion", "metadata"],
        ];
        let value_of = |field: &str| match field {
            "apiVersion" => json!("ray.io/v1"),
            "kind" => json!("RayJob"),
            "spec" => json!({"suspend": true, "entrypoint": "python train.py"}),
            "status" => json!({"jobStatus": "RUNNING"}),
            "managedFields" => json!([{"manager": "gkq", "fieldsV1": {"f:spec": {}}}]),
            "annotations" => json!({"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                    "team": "ml"}),
            "finalizers" => json!(["ray.io/rayjob-finalizer", "example.com/keep"]),
            "labels" => json!({"app": "train"}),
            "data" => json!({"a": "1"}),
            other => json!(other),
        };
        for top in top_orders {
            for metadata_fields in metadata_orders {
                let mut object = Map::new();
                for field in top {
                    let value = if *field == "metadata" {
                        Value::Object(
                            metadata_fields
                                .iter()
                                .map(|f| (f.to_string(), value_of(f)))
                                .collect(),
                        )
                    } else {
                        value_of(field)
                    };
                    object.insert(field.to_string(), value);
                }
                let object = Value::Object(object);
                let removed = kube_view_owned(object.clone());
                let copied = kube_view(&object);
                assert_eq!(
                    serde_json::to_string(&copied).unwrap(),
                    serde_json::to_string(&removed).unwrap(),
                    "{object}"
                );
            }
        }
        assert_eq!(kube_view(&json!(["a"])), json!(["a"]));
    }

    fn path(text: &str) -> Vec<PathSeg> {
        text.split('.')
            .map(|k| PathSeg::Key(k.to_string()))
            .collect()
    }

    #[test]
    fn enum_names_equal_their_integers() {
        let p = path("config.reservationAffinity.consumeReservationType");
        assert!(same_leaf(
            &p,
            &json!("NO_RESERVATION"),
            Some(&json!(1)),
            Dialect::Gke
        ));
        assert!(!same_leaf(
            &p,
            &json!("NO_RESERVATION"),
            Some(&json!(2)),
            Dialect::Gke
        ));
        assert!(same_leaf(&p, &json!("UNSPECIFIED"), None, Dialect::Gke));
        assert_eq!(display_enum(&p, &json!(1)), json!("NO_RESERVATION"));
        let taint = vec![
            PathSeg::Key("config".into()),
            PathSeg::Key("taints".into()),
            PathSeg::Index(0),
            PathSeg::Key("effect".into()),
        ];
        assert!(same_leaf(
            &taint,
            &json!("NO_SCHEDULE"),
            Some(&json!(1)),
            Dialect::Gke
        ));
    }

    #[test]
    fn int64_strings_equal_numbers_and_absent_means_zero() {
        let p = path("maxPodsConstraint.maxPodsPerNode");
        assert!(same_leaf(
            &p,
            &json!(110),
            Some(&json!("110")),
            Dialect::Gke
        ));
        assert!(same_leaf(
            &path("autoscaling.minNodeCount"),
            &json!(0),
            None,
            Dialect::Gke
        ));
        assert!(same_leaf(
            &path("config.flexStart"),
            &json!(false),
            None,
            Dialect::Gke
        ));
        assert!(!same_leaf(
            &path("config.flexStart"),
            &json!(true),
            None,
            Dialect::Gke
        ));
        assert!(!same_leaf(
            &path("autoscaling.maxNodeCount"),
            &json!(4),
            Some(&json!(8)),
            Dialect::Gke
        ));
    }

    #[test]
    fn versions_match_by_prefix_or_minimum() {
        assert!(version_satisfied("1.34", "1.34.5-gke.100"));
        assert!(version_satisfied("1.34", "1.35.0-gke.1"));
        assert!(!version_satisfied("1.35", "1.34.5-gke.100"));
        assert!(!version_satisfied("1.34.6", "1.34.5-gke.100"));
        assert!(version_satisfied("1.34.5-gke.100", "1.34.5-gke.100"));
        assert!(same_leaf(
            &path("initialClusterVersion"),
            &json!("1.34"),
            Some(&json!("1.34.5-gke.100")),
            Dialect::Gke
        ));
        // Only the top-level version fields use the version rule.
        assert!(!same_leaf(
            &path("config.imageType"),
            &json!("1.34"),
            Some(&json!("1.34.5")),
            Dialect::Gke
        ));
    }

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(
            parse_quantity("20Gi"),
            Some(20 * (1i128 << 30) * 1_000_000_000)
        );
        assert_eq!(parse_quantity("500m"), parse_quantity("0.5"));
        assert_eq!(parse_quantity("1e3"), parse_quantity("1k"));
        assert_eq!(parse_quantity("abc"), None);
        // Kubernetes caps binary-SI quantities at MaxInt64 units rather than rejecting them.
        assert_eq!(
            parse_quantity("99999999999999999999999999999999Ei"),
            Some(i64::MAX as i128 * 1_000_000_000)
        );
        assert_eq!(parse_quantity("1e99"), None);
        let p = path("spec.resourceGroups.flavors.resources.nominalQuota");
        assert!(same_leaf(
            &p,
            &json!("20Gi"),
            Some(&json!("21474836480")),
            Dialect::Kube
        ));
        assert!(same_leaf(&p, &json!(10), Some(&json!("10")), Dialect::Kube));
        assert!(!same_leaf(
            &p,
            &json!(10),
            Some(&json!("11")),
            Dialect::Kube
        ));
    }

    #[test]
    fn live_views_drop_what_gke_writes() {
        let pool = json!({"name": "p", "etag": "e", "status": "RUNNING", "initialNodeCount": 0,
            "config": {"resourceLabels": {"managed-by": "gkq", "goog-gke-node-pool-provisioning-model": "on-demand"},
                       "taints": [{"key": "cloud.google.com/gke-queued", "value": "true", "effect": 1}]}});
        let view = gke_node_pool_live_view(&pool);
        assert_eq!(
            view,
            json!({"name": "p", "initialNodeCount": 0,
            "config": {"resourceLabels": {"managed-by": "gkq"}, "taints": []}})
        );
        let cluster = json!({"name": "c", "initialClusterVersion": "1.34", "currentMasterVersion": "1.34.5-gke.100",
            "nodePools": [], "labelFingerprint": "f", "masterAuth": {"clusterCaCertificate": "x"}});
        assert_eq!(
            gke_cluster_live_view(&cluster),
            json!({"name": "c", "initialClusterVersion": "1.34.5-gke.100", "masterAuth": {}})
        );
        assert_eq!(
            gke_node_pool_desired_view(&json!({"name": "p", "initialNodeCount": 3})),
            json!({"name": "p"})
        );
    }

    #[test]
    fn an_object_that_is_its_own_view_is_borrowed_and_any_other_is_its_view() {
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "labels": {"a": "b"},
                "annotations": {"x": "y"}, "finalizers": ["example.com/keep"]},
            "data": {"k": "v"}});
        let job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j", "namespace": "n"}, "spec": {"entrypoint": "python t.py"}});
        let mut others = Vec::new();
        for (object, edit) in [
            (&config_map, json!({"status": {"phase": "x"}})),
            (&config_map, json!({"metadata": {"resourceVersion": "3"}})),
            (&config_map, json!({"metadata": {"annotations": {}}})),
            (
                &config_map,
                json!({"metadata": {"annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}"}}}),
            ),
            (&config_map, json!({"metadata": {"finalizers": []}})),
            (
                &config_map,
                json!({"metadata": {"finalizers": ["kueue.x-k8s.io/resource-in-use"]}}),
            ),
            (&job, json!({"spec": {"suspend": true}})),
        ] {
            let mut other = object.clone();
            merge(&mut other, edit);
            others.push(other);
        }
        for own in [&config_map, &job, &json!("text")] {
            assert!(matches!(kube_view_cow(own), Cow::Borrowed(_)), "{own}");
            assert_eq!(kube_view(own).to_string(), own.to_string());
        }
        // A ConfigMap's `spec.suspend` is not a job's: it is its own view.
        let mut not_a_job = config_map.clone();
        merge(&mut not_a_job, json!({"spec": {"suspend": true}}));
        assert!(matches!(kube_view_cow(&not_a_job), Cow::Borrowed(_)));
        for other in &others {
            let view = kube_view_cow(other);
            assert!(matches!(view, Cow::Owned(_)), "{other}");
            // As text: the order of keys counts too.
            assert_eq!(view.to_string(), kube_view(other).to_string());
            assert_ne!(view.to_string(), other.to_string());
        }

        fn merge(into: &mut Value, from: Value) {
            match (into, from) {
                (Value::Object(into), Value::Object(from)) => {
                    for (key, value) in from {
                        match into.get_mut(&key) {
                            Some(existing)
                                if value.is_object() && !value.as_object().unwrap().is_empty() =>
                            {
                                merge(existing, value)
                            }
                            _ => {
                                into.insert(key, value);
                            }
                        }
                    }
                }
                (into, from) => *into = from,
            }
        }
    }

    #[test]
    fn kube_view_drops_server_metadata_status_and_controller_fields() {
        let object = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j", "uid": "u", "resourceVersion": "7", "generation": 2,
                "finalizers": ["ray.io/rayjob-finalizer"], "managedFields": [],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"suspend": true, "entrypoint": "python x.py"}, "status": {"jobStatus": "RUNNING"}});
        assert_eq!(
            kube_view(&object),
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j"}, "spec": {"entrypoint": "python x.py"}})
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn binary_and_decimal_suffixes_scale_exactly(n in 0i64..1_000_000) {
            let nanos = i128::from(n) * 1_000_000_000;
            prop_assert_eq!(parse_quantity(&format!("{n}Gi")), Some(nanos << 30));
            prop_assert_eq!(parse_quantity(&format!("{n}k")), Some(nanos * 1000));
            prop_assert_eq!(parse_quantity(&format!("{n}000m")), Some(nanos));
        }

        #[test]
        fn every_enum_name_equals_its_integer(table in 0..GKE_ENUMS.len(), pick in any::<prop::sample::Index>()) {
            let ((parent, field), names) = GKE_ENUMS[table];
            let (name, number) = names[pick.index(names.len())];
            let path = vec![PathSeg::Key(parent.to_string()), PathSeg::Key(field.to_string())];
            prop_assert!(same_leaf(&path, &Value::String(name.to_string()), Some(&serde_json::json!(number)), Dialect::Gke));
        }

        #[test]
        fn versions_are_satisfied_by_their_patches(major in 1u64..3, minor in 0u64..40, patch in 0u64..20, build in 0u64..2000) {
            let live = format!("{major}.{minor}.{patch}-gke.{build}");
            let prefix = format!("{major}.{minor}");
            let next_minor = format!("{major}.{}", minor + 1);
            prop_assert!(version_satisfied(&prefix, &live));
            prop_assert!(version_satisfied(&live, &live));
            prop_assert!(!version_satisfied(&next_minor, &live));
        }
    }

    /// A view made from a borrowed object is the view of the whole object made in place, its
    /// keys in the same order, wherever `status` was.
    #[test]
    fn a_view_of_a_borrowed_object_is_the_view_made_in_place() {
        use serde_json::json;
        let objects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "status": {"x": 1},
                "metadata": {"name": "a", "uid": "u", "annotations": {}}, "data": {"k": "v"}, "z": 1}),
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j",
                "namespace": "n", "finalizers": ["ray.io/rayjob-finalizer"]},
                "spec": {"suspend": false, "entrypoint": "e"}, "status": {"s": 1}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!("not an object"),
        ];
        for object in objects {
            let view = kube_view(&object);
            assert_eq!(
                view.to_string(),
                kube_view_owned(object.clone()).to_string()
            );
            assert!(view.field("status").is_none());
        }
    }
}
