//! What an apply records about itself in the cluster, as data: the applied revision and the
//! short forms on GKE's labels. Reading and writing them is `gitops::revision`.
//!
//! After every successful apply, gkq records what it applied in the cluster
//! itself, so that anyone (`gkq status`, `kubectl`, the Cloud console) can tell which commit and
//! spec the live state came from.
//!
//! - Kubernetes: a small ConfigMap `gkq-revision-<stack>` in `kube-system`, whose annotations hold
//!   the commit, spec digest, time, gkq version and who applied. `kube-system` exists on every
//!   cluster, is where cluster-level bookkeeping lives (leader-election leases), and is not where
//!   users list their workloads. The stack is part of the name because several stacks can share
//!   one API server (the test control plane does); on GKE the stack is the cluster.
//!   The ConfigMap carries `app.kubernetes.io/managed-by: gkq` but not the stack label, so plans
//!   never see it as an object to prune.
//! - GKE: resource labels on the cluster, `gkq-revision: <12 hex of the spec digest>` and, when the
//!   commit is known, `gkq-commit: <12 hex of the commit>` (label values are lowercase and at most
//!   63 characters, so both are short forms). They are listed with GKE's own labels in
//!   `diff::normalize`, so they never show as drift and label updates keep them.
//!
//! The ConfigMap also holds, under `placements.json`, where the apply predicted each run of the
//! stack's jobs would land ([`PlacementRecords`]): `gkq status`, `gkq watch` and the agent compare
//! a job that holds quota with the prediction made when it was submitted, not with one made now
//! over queues that have changed since.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::digest::short_digest;
use super::provenance::{GKQ_VERSION, SpecRevision, short_commit};
use crate::model::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use crate::placement::{Placement, PlacementState, PodSetPlacement};

pub const REVISION_NAMESPACE: &str = "kube-system";
/// Label naming the stack a revision ConfigMap belongs to (deliberately not `gkq.dev/stack`).
pub const REVISION_OF_LABEL: &str = "gkq.dev/revision-of";
/// GKE resource label with the short spec digest.
pub const GKE_REVISION_LABEL: &str = "gkq-revision";
/// GKE resource label with the short commit id.
pub const GKE_COMMIT_LABEL: &str = "gkq-commit";

const ANNOTATION_COMMIT: &str = "gkq.dev/commit";
const ANNOTATION_DIGEST: &str = "gkq.dev/spec-digest";
const ANNOTATION_SPEC: &str = "gkq.dev/spec";
const ANNOTATION_ENV: &str = "gkq.dev/env";
const ANNOTATION_APPLIED_AT: &str = "gkq.dev/applied-at";
const ANNOTATION_APPLIED_BY: &str = "gkq.dev/applied-by";
const ANNOTATION_VERSION: &str = "gkq.dev/gkq-version";
/// The ConfigMap key holding [`PlacementRecords`] as JSON.
const PLACEMENTS_KEY: &str = "placements.json";
/// The most bytes of predicted placements the ConfigMap holds: Kubernetes refuses a ConfigMap
/// over 1 MiB, and the annotations and README need a little of that. About 2,000 jobs fit;
/// beyond that the newest predictions are kept and the rest counted in
/// [`PlacementRecords::omitted`].
pub const PLACEMENTS_MAX_BYTES: usize = 900 * 1024;

/// The ConfigMap's name for a stack.
pub fn configmap_name(stack: &str) -> String {
    format!("gkq-revision-{stack}")
}

/// What an apply applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedRevision {
    /// The commit the spec was read from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// `sha256:<64 hex>` of the spec's files, environment and variables.
    pub spec_digest: String,
    /// The spec file, as the command line named it.
    pub spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// RFC 3339, UTC.
    pub applied_at: String,
    /// `user@host`, or the CI system and its actor.
    pub applied_by: String,
    pub gkq_version: String,
}

impl AppliedRevision {
    /// Whether `other` records the same spec (same digest and commit); time and person aside.
    pub fn same_spec(&self, other: &AppliedRevision) -> bool {
        self.spec_digest == other.spec_digest && self.commit == other.commit
    }

    /// The ConfigMap that records this revision for `stack`, with the predicted placements of
    /// the stack's jobs.
    pub fn to_configmap(&self, stack: &str, placements: &PlacementRecords) -> Value {
        let mut annotations = serde_json::Map::new();
        let mut put = |key: &str, value: &str| {
            annotations.insert(key.to_string(), Value::String(value.to_string()));
        };
        if let Some(commit) = &self.commit {
            put(ANNOTATION_COMMIT, commit);
        }
        put(ANNOTATION_DIGEST, &self.spec_digest);
        put(ANNOTATION_SPEC, &self.spec);
        if let Some(env) = &self.env {
            put(ANNOTATION_ENV, env);
        }
        put(ANNOTATION_APPLIED_AT, &self.applied_at);
        put(ANNOTATION_APPLIED_BY, &self.applied_by);
        put(ANNOTATION_VERSION, &self.gkq_version);
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": configmap_name(stack),
                "namespace": REVISION_NAMESPACE,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, REVISION_OF_LABEL: stack},
                "annotations": annotations,
            },
            "data": {
                "README": "Written by gkq after each apply: the annotations say which spec revision the cluster runs, placements.json where gkq predicted each run of the stack's jobs would land. `gkq status` reads them.",
                PLACEMENTS_KEY: serde_json::to_string(placements).unwrap_or_default(),
            },
        })
    }

    /// Reads a revision back from its ConfigMap; `None` when the annotations are not there.
    pub fn from_configmap(configmap: &Value) -> Option<Self> {
        let annotations = configmap.pointer("/metadata/annotations")?;
        let get = |key: &str| {
            annotations
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Some(AppliedRevision {
            commit: get(ANNOTATION_COMMIT),
            spec_digest: get(ANNOTATION_DIGEST)?,
            spec: get(ANNOTATION_SPEC).unwrap_or_default(),
            env: get(ANNOTATION_ENV),
            applied_at: get(ANNOTATION_APPLIED_AT).unwrap_or_default(),
            applied_by: get(ANNOTATION_APPLIED_BY).unwrap_or_default(),
            gkq_version: get(ANNOTATION_VERSION).unwrap_or_default(),
        })
    }

    /// The GKE resource labels for this revision (values are lowercase hex, 12 characters).
    pub fn gke_labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        labels.insert(
            GKE_REVISION_LABEL.to_string(),
            short_digest(&self.spec_digest).to_ascii_lowercase(),
        );
        if let Some(commit) = &self.commit {
            labels.insert(
                GKE_COMMIT_LABEL.to_string(),
                short_commit(commit).to_ascii_lowercase(),
            );
        }
        labels
    }
}

/// Which apply predicted a placement: its time and the revision it applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordOrigin {
    /// RFC 3339, UTC: when the apply recorded it.
    pub applied_at: String,
    pub spec_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl AppliedRevision {
    /// This revision as the origin of the predictions its apply records.
    pub fn origin(&self) -> RecordOrigin {
        RecordOrigin {
            applied_at: self.applied_at.clone(),
            spec_digest: self.spec_digest.clone(),
            commit: self.commit.clone(),
        }
    }
}

/// One podset of a recorded prediction: its flavor per resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedPodSet {
    pub name: String,
    pub count: i32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
}

/// Where an apply predicted one run of a job would land.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedPlacement {
    pub kind: String,
    pub namespace: String,
    pub job: String,
    /// The run's `metadata.uid` when the apply ended. A job deleted and submitted again (by gkq
    /// or by anyone) is another run, which this prediction does not speak for.
    pub uid: String,
    #[serde(flatten)]
    pub origin: RecordOrigin,
    pub state: PlacementState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    pub podsets: Vec<RecordedPodSet>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<String>,
}

impl RecordedPlacement {
    /// The prediction as a [`Placement`], to compare with what Kueue did.
    pub fn placement(&self) -> Placement {
        Placement {
            job: self.job.clone(),
            namespace: self.namespace.clone(),
            kind: self.kind.clone(),
            cluster_queue: self.cluster_queue.clone(),
            podsets: self
                .podsets
                .iter()
                .map(|p| PodSetPlacement::new(p.name.clone(), p.count, p.flavors.clone()))
                .collect(),
            state: self.state,
            reason: None,
            admission_checks: self.admission_checks.clone(),
            reclaim: None,
            preempts: Vec::new(),
            preempted_by: None,
            not_predicted: None,
            attempts: Vec::new(),
        }
    }

    fn of(placement: &Placement, uid: &str, origin: &RecordOrigin) -> Self {
        RecordedPlacement {
            kind: placement.kind.clone(),
            namespace: placement.namespace.clone(),
            job: placement.job.clone(),
            uid: uid.to_string(),
            origin: origin.clone(),
            state: placement.state,
            cluster_queue: placement.cluster_queue.clone(),
            podsets: placement
                .podsets
                .iter()
                .map(|p| RecordedPodSet {
                    name: p.name.clone(),
                    count: p.count,
                    flavors: p.flavors.clone(),
                })
                .collect(),
            admission_checks: placement.admission_checks.clone(),
        }
    }
}

/// The predicted placements the revision ConfigMap holds: one per run of the stack's jobs that
/// an apply submitted (or whose placement it changed by preempting it), as long as that run
/// lives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRecords {
    pub jobs: Vec<RecordedPlacement>,
    /// Runs whose prediction was left out to keep the ConfigMap under its size limit
    /// ([`PLACEMENTS_MAX_BYTES`]); status says "no record" for them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl PlacementRecords {
    /// The records in a revision ConfigMap; `None` when it holds none (written by a gkq from
    /// before placements were recorded) or they do not parse.
    pub fn from_configmap(configmap: &Value) -> Option<Self> {
        let text = configmap.pointer("/data")?.get(PLACEMENTS_KEY)?.as_str()?;
        serde_json::from_str(text).ok()
    }

    /// The record of this run of a live job: same kind, namespace, name and uid.
    pub fn of_run(&self, job: &Value) -> Option<&RecordedPlacement> {
        let run = Run::of(job)?;
        self.jobs.iter().find(|r| run.is(r))
    }

    /// What an apply records once it has succeeded: its own predictions (`predicted`, the plan's
    /// placements) for the runs of `live_jobs` (the stack's jobs as they are after the apply),
    /// then the earlier records of runs it did not touch, as long as the same run still lives.
    /// Kept newest first within `max_bytes` of JSON; the rest are counted as omitted.
    pub fn after_apply(
        origin: &RecordOrigin,
        predicted: &[Placement],
        earlier: Option<&PlacementRecords>,
        live_jobs: &[&Value],
        max_bytes: usize,
    ) -> Self {
        let runs: Vec<Run<'_>> = live_jobs.iter().filter_map(|j| Run::of(j)).collect();
        let mut records = Vec::new();
        for placement in predicted {
            if matches!(
                placement.state,
                PlacementState::Unmanaged | PlacementState::Rejected
            ) {
                continue;
            }
            let run = runs.iter().find(|run| {
                run.kind == placement.kind
                    && run.namespace == placement.namespace
                    && run.name == placement.job
            });
            if let Some(run) = run
                && !records.iter().any(|r| run.is(r))
            {
                records.push(RecordedPlacement::of(placement, run.uid, origin));
            }
        }
        for record in earlier.into_iter().flat_map(|e| &e.jobs) {
            let lives = runs.iter().any(|run| run.is(record));
            let replaced = records.iter().any(|r: &RecordedPlacement| {
                (r.kind.as_str(), r.namespace.as_str(), r.job.as_str())
                    == (
                        record.kind.as_str(),
                        record.namespace.as_str(),
                        record.job.as_str(),
                    )
            });
            if lives && !replaced {
                records.push(record.clone());
            }
        }
        // `{"jobs":[` and `]}`, then each record and its comma.
        let mut size: usize = 10;
        let mut kept = Vec::new();
        let mut omitted = 0;
        for record in records {
            let bytes = serde_json::to_string(&record).map_or(usize::MAX, |s| s.len() + 1);
            if omitted == 0 && size.saturating_add(bytes) <= max_bytes {
                size += bytes;
                kept.push(record);
            } else {
                omitted += 1;
            }
        }
        PlacementRecords {
            jobs: kept,
            omitted,
        }
    }
}

/// One run of a live job: its kind, namespace, name and uid.
struct Run<'a> {
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
}

impl<'a> Run<'a> {
    fn of(job: &'a Value) -> Option<Self> {
        let metadata = job.get("metadata")?;
        Some(Run {
            kind: job.get("kind")?.as_str()?,
            namespace: metadata
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("default"),
            name: metadata.get("name")?.as_str()?,
            uid: metadata.get("uid")?.as_str()?,
        })
    }

    fn is(&self, record: &RecordedPlacement) -> bool {
        (self.kind, self.namespace, self.name, self.uid)
            == (
                record.kind.as_str(),
                record.namespace.as_str(),
                record.job.as_str(),
                record.uid.as_str(),
            )
    }
}

/// The short forms GKE labels hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelRevision {
    /// 12 hex digits of the spec digest.
    pub spec_digest: String,
    /// 12 hex digits of the commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl LabelRevision {
    /// From a live cluster's `resourceLabels`; `None` when gkq never recorded a revision there.
    pub fn from_cluster(cluster: &Value) -> Option<Self> {
        let labels = cluster.get("resourceLabels")?;
        let get = |key: &str| labels.get(key).and_then(Value::as_str).map(str::to_string);
        Some(LabelRevision {
            spec_digest: get(GKE_REVISION_LABEL)?,
            commit: get(GKE_COMMIT_LABEL),
        })
    }

    /// Whether a full revision matches these short forms.
    pub fn matches(&self, spec_digest: &str, commit: Option<&str>) -> bool {
        short_digest(spec_digest) == self.spec_digest
            && match (&self.commit, commit) {
                (Some(short), Some(full)) => full.starts_with(short.as_str()),
                (None, None) => true,
                _ => false,
            }
    }
}

impl AppliedRevision {
    /// The revision an apply of `spec` records, made at `applied_at` by `applied_by`.
    pub fn of(spec: &SpecRevision, applied_at: String, applied_by: String) -> Self {
        AppliedRevision {
            commit: spec.commit.clone(),
            spec_digest: spec.digest.clone(),
            spec: spec.path.clone(),
            env: spec.env.clone(),
            applied_at,
            applied_by,
            gkq_version: GKQ_VERSION.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(commit: Option<&str>) -> AppliedRevision {
        AppliedRevision {
            commit: commit.map(str::to_string),
            spec_digest: format!("sha256:{}", "0123456789abcdef".repeat(4)),
            spec: "infra/gkq.yaml".into(),
            env: Some("prod".into()),
            applied_at: "2026-11-30T12:00:00Z".into(),
            applied_by: "github-actions:alice (acme/infra run 7)".into(),
            gkq_version: "0.1.0".into(),
        }
    }

    #[test]
    fn configmap_round_trips_and_is_not_prunable() {
        let rev = revision(Some("89abcdef0123456789abcdef0123456789abcdef"));
        let placements = PlacementRecords {
            jobs: vec![recorded("train", "uid-1", "on-demand")],
            omitted: 2,
        };
        let cm = rev.to_configmap("tpu-cluster", &placements);
        assert_eq!(AppliedRevision::from_configmap(&cm), Some(rev.clone()));
        assert_eq!(PlacementRecords::from_configmap(&cm), Some(placements));
        assert_eq!(cm["metadata"]["name"], "gkq-revision-tpu-cluster");
        assert_eq!(cm["metadata"]["namespace"], "kube-system");
        // The stack label would make the planner list it as an owned object to prune.
        assert!(cm.pointer("/metadata/labels/gkq.dev~1stack").is_none());
        assert_eq!(cm["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY_VALUE);
        let without_commit = revision(None);
        assert_eq!(
            AppliedRevision::from_configmap(
                &without_commit.to_configmap("s", &PlacementRecords::default())
            ),
            Some(without_commit)
        );
        // A ConfigMap an earlier gkq wrote holds no placements.
        assert_eq!(
            PlacementRecords::from_configmap(&json!({"data": {"README": "..."}})),
            None
        );
    }

    fn origin(at: &str) -> RecordOrigin {
        RecordOrigin {
            applied_at: at.into(),
            spec_digest: "sha256:0123".into(),
            commit: None,
        }
    }

    fn recorded(job: &str, uid: &str, flavor: &str) -> RecordedPlacement {
        RecordedPlacement::of(&placement(job, flavor), uid, &origin("earlier"))
    }

    fn placement(job: &str, flavor: &str) -> Placement {
        Placement {
            job: job.into(),
            namespace: "ml".into(),
            kind: "RayJob".into(),
            cluster_queue: Some("cq".into()),
            podsets: vec![PodSetPlacement::new(
                "workers".into(),
                4,
                [("google.com/tpu".to_string(), flavor.to_string())].into(),
            )],
            state: PlacementState::Admitted,
            reason: None,
            admission_checks: vec![],
            reclaim: None,
            preempts: vec![],
            preempted_by: None,
            not_predicted: None,
            attempts: vec![],
        }
    }

    fn live(job: &str, uid: &str) -> Value {
        json!({"kind": "RayJob", "metadata": {"namespace": "ml", "name": job, "uid": uid}})
    }

    /// An apply records its predictions for the runs it submitted, keeps the earlier records of
    /// runs still alive, and drops those of runs gone or submitted again.
    #[test]
    fn an_apply_records_its_runs_and_keeps_the_earlier_records_of_live_runs() {
        let earlier = PlacementRecords {
            jobs: vec![
                recorded("kept", "k-1", "dws"),
                recorded("rerun", "r-1", "dws"),
                recorded("gone", "g-1", "dws"),
                recorded("resubmitted", "s-1", "dws"),
            ],
            omitted: 0,
        };
        let jobs = [
            live("kept", "k-1"),
            live("rerun", "r-2"),
            live("resubmitted", "s-2"),
            live("new", "n-1"),
        ];
        let jobs: Vec<&Value> = jobs.iter().collect();
        let now = origin("now");
        let predicted = [
            placement("rerun", "on-demand"),
            placement("new", "on-demand"),
            // Not live after the apply (the webhook refused it, say): nothing to tie it to.
            placement("refused", "on-demand"),
        ];
        let records = PlacementRecords::after_apply(
            &now,
            &predicted,
            Some(&earlier),
            &jobs,
            PLACEMENTS_MAX_BYTES,
        );
        let summary: Vec<(&str, &str, &str, Option<String>)> = records
            .jobs
            .iter()
            .map(|r| {
                (
                    r.job.as_str(),
                    r.uid.as_str(),
                    r.origin.applied_at.as_str(),
                    r.placement().podsets[0].flavor.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("rerun", "r-2", "now", Some("on-demand".into())),
                ("new", "n-1", "now", Some("on-demand".into())),
                ("kept", "k-1", "earlier", Some("dws".into())),
            ]
        );
        assert_eq!(records.omitted, 0);
        assert_eq!(
            records.of_run(&live("kept", "k-1")).map(|r| r.uid.as_str()),
            Some("k-1")
        );
        assert_eq!(records.of_run(&live("resubmitted", "s-2")), None);
    }

    /// Beyond the size limit the newest predictions are kept and the rest counted.
    #[test]
    fn records_beyond_the_size_limit_are_counted_not_kept() {
        let jobs: Vec<Value> = (0..10).map(|i| live(&format!("j{i}"), "u")).collect();
        let jobs: Vec<&Value> = jobs.iter().collect();
        let predicted: Vec<Placement> = (0..10)
            .map(|i| placement(&format!("j{i}"), "dws"))
            .collect();
        let one = serde_json::to_string(&RecordedPlacement::of(&predicted[0], "u", &origin("now")))
            .unwrap()
            .len();
        let records = PlacementRecords::after_apply(
            &origin("now"),
            &predicted,
            None,
            &jobs,
            10 + 3 * (one + 1),
        );
        assert_eq!((records.jobs.len(), records.omitted), (3, 7));
        let text = serde_json::to_string(&records).unwrap();
        assert!(text.len() <= 10 + 3 * (one + 1) + "\"omitted\":7,".len());
    }

    #[test]
    fn gke_labels_are_valid_label_values_and_match_back() {
        let rev = revision(Some("89ABCDEF0123456789abcdef0123456789abcdef"));
        let labels = rev.gke_labels();
        for value in labels.values() {
            assert!(value.len() <= 63);
            assert!(
                value
                    .chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
            );
        }
        assert_eq!(labels[GKE_REVISION_LABEL], "0123456789ab");
        let cluster = json!({"resourceLabels": labels});
        let read = LabelRevision::from_cluster(&cluster).unwrap();
        assert!(read.matches(
            &rev.spec_digest,
            Some("89abcdef0123456789abcdef0123456789abcdef")
        ));
        assert!(!read.matches(&rev.spec_digest, None));
        assert!(!read.matches("sha256:ffff", Some("89abcdef0123")));
        assert_eq!(
            LabelRevision::from_cluster(&json!({"resourceLabels": {}})),
            None
        );
    }
}
