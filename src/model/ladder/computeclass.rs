//! `capacity.mode: computeclass`: the ladder as GKE ComputeClasses whose `priorities` are the
//! rungs in order, each selected by one Kueue flavor (design section 4; facts L1-L5 of
//! docs/gke-facts.md, "The capacity ladder").
//!
//! Whether a ComputeClass priority can deliver queued (all-at-once) capacity is unconfirmed, so
//! a `flex-start-queued` rung is never a priority: it keeps its own pool, flavor and DWS check
//! as in `mode: kueue`, and cuts the ladder into segments, each run of other rungs one class
//! (design 4.2).

use serde_json::{Map, Value, json};

use super::{
    Expansion, capacity_path, expand_rung, is_priority, push_flavor, push_quota, rung_accelerator,
};
use crate::model::gke_facts::{parse_location, tpu_chips_per_vm};
use crate::model::k8s_meta;
use crate::spec::ladder::{Capacity, CapacityMode, Rung, RungKind};
use crate::spec::types::{Flavor, Spec, Toleration};
use crate::vocab::duration::parse_whole_seconds;

pub const API_VERSION: &str = "cloud.google.com/v1";
pub const KIND: &str = "ComputeClass";
/// The node label (and taint) by which pods select a ComputeClass (L1).
pub const CLASS_LABEL: &str = crate::vocab::labels::COMPUTE_CLASS_LABEL;

/// The name the local target gives the node pool it creates for priority `priority` (from 0)
/// of ComputeClass `class`: `gk-<class>-<priority + 1>` (GKE names its auto-created pools
/// otherwise; the local target's name says which priority the pool serves).
pub fn auto_pool_name(class: &str, priority: usize) -> String {
    format!("gk-{class}-{}", priority + 1)
}

/// The priority (from 0) of `class` whose pool [`auto_pool_name`] named `pool`.
pub fn auto_pool_priority(class: &str, pool: &str) -> Option<usize> {
    let n: usize = pool
        .strip_prefix("gk-")?
        .strip_prefix(class)?
        .strip_prefix('-')?
        .parse()
        .ok()?;
    n.checked_sub(1)
}

/// One part of the ladder: a ComputeClass over a run of rungs, or a queued rung of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Class {
        class: String,
        flavor: String,
        rungs: Vec<usize>,
    },
    Queued(usize),
}

/// The ladder cut into segments, with each class's and flavor's name: the settings' names (or
/// `<cluster>-ladder` and `ladder`) for a ladder of one class, suffixed `-1`, `-2`, ... for more.
pub fn segments(spec: &Spec, cap: &Capacity) -> Vec<Segment> {
    let mut runs: Vec<Result<Vec<usize>, usize>> = Vec::new();
    for (ri, rung) in cap.rungs.iter().enumerate() {
        if !is_priority(cap, rung) {
            runs.push(Err(ri));
        } else if let Some(Ok(run)) = runs.last_mut() {
            run.push(ri);
        } else {
            runs.push(Ok(vec![ri]));
        }
    }
    let classes = runs.iter().filter(|r| r.is_ok()).count();
    let settings = cap.compute_class.clone().unwrap_or_default();
    let class = settings
        .name
        .unwrap_or_else(|| format!("{}-ladder", spec.cluster.name));
    let flavor = settings.flavor.unwrap_or_else(|| "ladder".into());
    let mut n = 0;
    runs.into_iter()
        .map(|run| match run {
            Err(ri) => Segment::Queued(ri),
            Ok(rungs) => {
                n += 1;
                let suffix = if classes > 1 {
                    format!("-{n}")
                } else {
                    String::new()
                };
                Segment::Class {
                    class: format!("{class}{suffix}"),
                    flavor: format!("{flavor}{suffix}"),
                    rungs,
                }
            }
        })
        .collect()
}

/// Adds the class flavors (and the queued rungs' pools and flavors) to the spec, in ladder order.
pub(super) fn expand(cap: &Capacity, out: &mut Expansion) {
    let target = super::target_group(&out.spec, cap);
    out.rungs = vec![super::RungUnits::default(); cap.rungs.len()];
    for segment in segments(&out.spec, cap) {
        match segment {
            Segment::Queued(ri) => out.rungs[ri] = expand_rung(cap, ri, target, out),
            Segment::Class {
                class,
                flavor,
                rungs,
            } => {
                let source = capacity_path().key("mode");
                push_flavor(out, class_flavor(&class, &flavor), source.clone());
                if let (Some(t), Some(quota)) = (target, &cap.quota) {
                    push_quota(out, t, &flavor, quota.clone(), capacity_path().key("quota"));
                }
                for ri in rungs {
                    out.rungs[ri].flavors.push(flavor.clone());
                }
            }
        }
    }
}

/// The flavor selecting a class: its node label, and a toleration of the taint GKE puts on the
/// class's auto-created nodes (written so jobs do not depend on GKE adding it, L1).
fn class_flavor(class: &str, flavor: &str) -> Flavor {
    Flavor {
        name: flavor.to_string(),
        node_labels: [(CLASS_LABEL.to_string(), class.to_string())].into(),
        tolerations: vec![Toleration {
            key: CLASS_LABEL.into(),
            operator: Some("Equal".into()),
            value: Some(class.to_string()),
            effect: Some("NoSchedule".into()),
        }],
        ..Flavor::default()
    }
}

/// The ComputeClass objects of a `mode: computeclass` ladder (none otherwise).
pub fn objects(spec: &Spec) -> Vec<Value> {
    let Some(cap) = spec
        .capacity
        .as_ref()
        .filter(|c| c.mode == CapacityMode::Computeclass)
    else {
        return Vec::new();
    };
    let settings = cap.compute_class.clone().unwrap_or_default();
    segments(spec, cap)
        .into_iter()
        .filter_map(|segment| match segment {
            Segment::Class { class, rungs, .. } => {
                let priorities: Vec<Value> = rungs
                    .iter()
                    .map(|&ri| priority(spec, cap, &cap.rungs[ri]))
                    .collect();
                Some(json!({
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "metadata": k8s_meta(spec, &class, None),
                    "spec": {
                        "nodePoolAutoCreation": {"enabled": settings.auto_creation.unwrap_or(true)},
                        "whenUnsatisfiable": "DoNotScaleUp",
                        "activeMigration": {
                            "optimizeRulePriority": settings.active_migration.unwrap_or(false)
                        },
                        "priorities": priorities,
                    },
                }))
            }
            Segment::Queued(_) => None,
        })
        .collect()
}

/// The cluster's zone, for a zonal cluster.
fn cluster_zone(spec: &Spec) -> Option<String> {
    parse_location(&spec.location).ok().and_then(|l| l.zone)
}

/// One priority (L1 fields): the machine and accelerator, then what the kind sets. A
/// reservation names its zone in `specific[].zones`, never `location` (L5).
fn priority(spec: &Spec, cap: &Capacity, rung: &Rung) -> Value {
    let mut p = Map::new();
    if let Some(acc) = rung_accelerator(cap, rung) {
        p.insert("machineType".into(), json!(acc.machine_type));
        if let Some(gpu) = &acc.gpu {
            p.insert("gpu".into(), json!({"type": gpu.kind, "count": gpu.count}));
        } else if let (Some(label), Some(count)) = (
            super::tpu_accelerator_label(acc),
            tpu_chips_per_vm(&acc.machine_type),
        ) {
            let mut tpu = json!({"type": label, "count": count});
            if let Some(t) = &acc.topology {
                tpu["topology"] = json!(t);
            }
            p.insert("tpu".into(), tpu);
        }
    }
    let zone = cluster_zone(spec);
    match rung.kind {
        RungKind::Reservation => {
            p.insert("spot".into(), json!(false));
            let mut specific = Map::new();
            if let Some(r) = &rung.reservation {
                specific.insert("name".into(), json!(r.name));
                if let Some(project) = &r.project {
                    specific.insert("project".into(), json!(project));
                }
                if let Some(z) = r.zone.clone().or(zone) {
                    specific.insert("zones".into(), json!([z]));
                }
            }
            p.insert(
                "reservations".into(),
                json!({"affinity": "Specific", "specific": [specific]}),
            );
            return Value::Object(p);
        }
        RungKind::OnDemand => {
            p.insert("spot".into(), json!(false));
        }
        RungKind::FlexStart | RungKind::FlexStartQueued => {
            p.insert("flexStart".into(), json!({"enabled": true}));
            if let Some(secs) = rung
                .max_run_duration
                .as_deref()
                .and_then(|d| parse_whole_seconds(d).ok())
            {
                p.insert("maxRunDurationSeconds".into(), json!(secs));
            }
        }
        RungKind::Spot => {
            p.insert("spot".into(), json!(true));
        }
    }
    if let Some(z) = zone {
        p.insert("location".into(), json!({"zones": [z]}));
    }
    Value::Object(p)
}
