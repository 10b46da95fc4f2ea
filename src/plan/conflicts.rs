//! Field-manager conflicts: fields of an object that another field manager owns with a value
//! other than the one gkq's server-side apply sets (docs/kubernetes-api.md 6). The plan's dry
//! runs do not force, so the API server names each such field and its manager; the plan says
//! what it does about each, and what forcing would do.
//!
//! One rule: a field of a job (RayJob, JobSet, batch Job) that differs from gkq's value only by
//! what Kueue wrote into the job when it admitted it (docs/kueue.md, "What admission writes into
//! a job") is left to its manager: gkq's apply leaves it out, which changes nothing about it,
//! and the rest of the change (a label, say) goes through. Forcing such a field
//! (`--force-conflicts`) would undo Kueue's admission of a running job: the plan marks it, and
//! the disruption guard refuses it without `--allow-disruption`. Any other conflict is forced
//! only with `--force-conflicts`; apply refuses the plan before it writes anything otherwise.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::addr::ResourceAddr;
use crate::diff::compare::full;
use crate::diff::normalize::{Dialect, kube_view, without_kueue_injections};
use crate::diff::path_text;

/// A field another manager owns, as the API server named it in its conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The server's field path: `.spec.template.spec.nodeSelector`, `.spec.x[name="a"].y`.
    pub field: String,
    pub manager: String,
}

/// One conflicting field, what the plan does about it, and what forcing it would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// The field, as the API server names it.
    pub field: String,
    /// The field manager that owns it (`kueue` for Kueue's controllers).
    pub manager: String,
    /// What the plan does: leave the field to its manager, or take it by force.
    pub resolution: Resolution,
    /// What forcing the field would do, in words.
    pub forcing: String,
    /// The field differs from gkq's value only by what Kueue wrote into the job when it
    /// admitted it: forcing it stops the running job (a disruption).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admission: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Resolution {
    /// gkq's apply leaves the field out: it stays as its manager wrote it.
    Left,
    /// gkq's apply takes the field (server-side apply with force): only with
    /// `--force-conflicts`.
    Force,
}

impl Conflict {
    /// One line: the field, its manager, and what the plan does.
    pub fn text(&self) -> String {
        match self.resolution {
            Resolution::Left => format!(
                "{} is owned by \"{}\": left to it (gkq's apply does not set it); {}",
                self.field, self.manager, self.forcing
            ),
            Resolution::Force => format!(
                "{} is owned by \"{}\": taken with --force-conflicts; {}",
                self.field, self.manager, self.forcing
            ),
        }
    }
}

/// What the plan does about an object's conflicts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Resolved {
    pub conflicts: Vec<Conflict>,
    /// The object apply sends instead of the desired one: without the fields left to their
    /// managers. `None` when it sends the desired object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Value>,
}

impl Resolved {
    /// Whether apply needs `--force-conflicts` for this object.
    pub fn needs_force(&self) -> bool {
        self.conflicts
            .iter()
            .any(|c| c.resolution == Resolution::Force)
    }
}

/// Fields of one object of an installation that another field manager owns with other values:
/// the installation, applied with force (docs/jobset.md 3.1), takes them over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The object, `Kind namespace/name` or `Kind name`.
    pub object: String,
    pub manager: String,
    /// The fields, as the API server names them.
    pub fields: Vec<String>,
}

/// The notice of a plan whose installation of `component` (`JobSet v0.12.0`) takes fields over
/// from other field managers; `None` when it takes none.
pub fn takeover_notice(
    addr: &ResourceAddr,
    component: &str,
    takeovers: &[Takeover],
) -> Option<super::Notice> {
    if takeovers.is_empty() {
        return None;
    }
    const SHOWN: usize = 3;
    let objects: Vec<String> = takeovers
        .iter()
        .map(|t| {
            let mut fields: Vec<&str> = t.fields.iter().take(SHOWN).map(String::as_str).collect();
            let more = t.fields.len().saturating_sub(SHOWN);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            fields.dedup();
            format!(
                "{} from \"{}\" ({}{more})",
                t.object,
                t.manager,
                fields.join(", ")
            )
        })
        .collect();
    Some(super::Notice::new(
        Some(addr.clone()),
        format!(
            "installing {component} takes fields over from other field managers, since its objects are applied with force (docs/jobset.md 3.1): {}; their values become the release's",
            objects.join("; ")
        ),
    ))
}

/// Decides each conflict the server reported for `desired` at `addr`: `live` is the object as
/// it is, `forced` the server's dry-run answer with force (what forcing would make of it).
/// With `force` (`--force-conflicts` when planning) every field is taken.
pub fn resolve(
    addr: &ResourceAddr,
    desired: &Value,
    live: &Value,
    forced: &Value,
    found: &[Found],
    force: bool,
) -> Resolved {
    let forced_view = kube_view(forced);
    let now_view = kube_view(live);
    let mut without_admission = now_view.clone();
    if addr.kind.is_run() {
        without_kueue_injections(&mut without_admission, &forced_view);
    }
    let mut applied = desired.clone();
    let mut left_any = false;
    let mut conflicts: Vec<Conflict> = Vec::new();
    for f in found {
        if conflicts
            .iter()
            .any(|c| c.field == f.field && c.manager == f.manager)
        {
            continue;
        }
        let path = parse_field_path(&f.field);
        let at = |v: &Value| path.as_deref().and_then(|p| value_at(v, p)).cloned();
        let (now, after) = (at(&now_view), at(&forced_view));
        // Compared as the diff compares (an empty map Kueue's patch leaves, `scaleStrategy: {}`,
        // is no value).
        let admission = addr.kind.is_run()
            && path.is_some()
            && same(at(&without_admission).as_ref(), after.as_ref());
        let changes = change_text(now.as_ref(), after.as_ref());
        let forcing = if admission {
            format!(
                "forcing would take it from \"{}\" and remove what Kueue wrote into the admitted job's pod templates ({changes}): pods made from them from then on (a restarted worker) would no longer be held to the nodes of the flavor Kueue admitted the job to",
                f.manager
            )
        } else {
            format!("forcing would take it from \"{}\": {changes}", f.manager)
        };
        let left =
            admission && !force && path.as_deref().is_some_and(|p| remove_at(&mut applied, p));
        left_any |= left;
        conflicts.push(Conflict {
            field: f.field.clone(),
            manager: f.manager.clone(),
            resolution: if left {
                Resolution::Left
            } else {
                Resolution::Force
            },
            forcing,
            admission,
        });
    }
    Resolved {
        conflicts,
        applied: left_any.then_some(applied),
    }
}

/// Whether two values of a field are the same as a diff compares them.
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => full(a, b, Dialect::Kube).changes.is_empty(),
        (a, b) => a == b,
    }
}

/// What forcing changes under the field: each leaf, live to forced, at most a few.
fn change_text(now: Option<&Value>, after: Option<&Value>) -> String {
    const SHOWN: usize = 4;
    let show = |v: Option<&Value>| match v {
        None => "(unset)".to_string(),
        Some(v) => v.to_string(),
    };
    let (Some(now), Some(after)) = (now, after) else {
        return format!("{} -> {}", show(now), show(after));
    };
    let changes = full(after, now, Dialect::Kube).changes;
    let mut parts: Vec<String> = changes
        .iter()
        .take(SHOWN)
        .map(|c| {
            let path = path_text(&c.path);
            let (before, after) = (show(c.before.as_ref()), show(c.after.as_ref()));
            if path.is_empty() {
                format!("{before} -> {after}")
            } else {
                format!("{path}: {before} -> {after}")
            }
        })
        .collect();
    if changes.len() > SHOWN {
        parts.push(format!("and {} more", changes.len() - SHOWN));
    }
    if parts.is_empty() {
        "no value changes".to_string()
    } else {
        parts.join(", ")
    }
}

/// One step of a server field path (structured-merge-diff's `fieldpath` text form).
#[derive(Debug, Clone, PartialEq)]
pub enum FieldSeg {
    /// `.name`
    Field(String),
    /// `[k="v",n=1]`: the element of a keyed list whose key fields have these values.
    Key(Map<String, Value>),
    /// `[="v"]`: the element of a set with this value.
    Value(Value),
    /// `[3]`
    Index(usize),
}

/// Parses `.spec.list[name="a"].field[=1][0]`; `None` when it is not of that form.
pub fn parse_field_path(text: &str) -> Option<Vec<FieldSeg>> {
    let mut segs = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        match c {
            '.' => {
                let end = rest[1..].find(['.', '[']).map_or(rest.len(), |i| i + 1);
                let name = &rest[1..end];
                if name.is_empty() {
                    return None;
                }
                segs.push(FieldSeg::Field(name.to_string()));
                rest = &rest[end..];
            }
            '[' => {
                let end = closing_bracket(rest)?;
                segs.push(selector(&rest[1..end])?);
                rest = &rest[end + 1..];
            }
            _ => return None,
        }
    }
    Some(segs)
}

/// The index of the `]` that closes the `[` at the start of `text`, outside JSON strings.
fn closing_bracket(text: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in text.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn selector(inner: &str) -> Option<FieldSeg> {
    if let Some(value) = inner.strip_prefix('=') {
        return serde_json::from_str(value).ok().map(FieldSeg::Value);
    }
    if let Ok(i) = inner.parse::<usize>() {
        return Some(FieldSeg::Index(i));
    }
    let mut keys = Map::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let name = rest[..eq].to_string();
        let value_text = &rest[eq + 1..];
        // The value runs to the next comma outside a string.
        let (mut quoted, mut escaped, mut end) = (false, false, value_text.len());
        for (i, c) in value_text.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        keys.insert(name, serde_json::from_str(&value_text[..end]).ok()?);
        rest = value_text.get(end + 1..).unwrap_or("");
    }
    Some(FieldSeg::Key(keys))
}

/// The position of the list element `seg` selects.
fn element(items: &[Value], seg: &FieldSeg) -> Option<usize> {
    match seg {
        FieldSeg::Index(i) => (*i < items.len()).then_some(*i),
        FieldSeg::Value(v) => items.iter().position(|item| item == v),
        FieldSeg::Key(keys) => items
            .iter()
            .position(|item| keys.iter().all(|(k, v)| item.get(k) == Some(v))),
        FieldSeg::Field(_) => None,
    }
}

/// The value at `path` in `value`.
pub fn value_at<'a>(value: &'a Value, path: &[FieldSeg]) -> Option<&'a Value> {
    path.iter().try_fold(value, |at, seg| match (seg, at) {
        (FieldSeg::Field(name), Value::Object(map)) => map.get(name),
        (_, Value::Array(items)) => element(items, seg).map(|i| &items[i]),
        _ => None,
    })
}

/// Removes the field or element at `path` from `value`; whether it was there.
pub fn remove_at(value: &mut Value, path: &[FieldSeg]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut at = value;
    for seg in parents {
        let next = match (seg, at) {
            (FieldSeg::Field(name), Value::Object(map)) => map.get_mut(name),
            (_, Value::Array(items)) => match element(items, seg) {
                Some(i) => items.get_mut(i),
                None => None,
            },
            _ => None,
        };
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    match (last, at) {
        (FieldSeg::Field(name), Value::Object(map)) => map.remove(name).is_some(),
        (_, Value::Array(items)) => match element(items, last) {
            Some(i) => {
                items.remove(i);
                true
            }
            None => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_takeover_notice_names_each_object_its_manager_and_fields() {
        let addr = ResourceAddr::jobset_install();
        assert_eq!(takeover_notice(&addr, "JobSet v0.12.0", &[]), None);
        let notice = takeover_notice(
            &addr,
            "JobSet v0.12.0",
            &[Takeover {
                object: "Deployment jobset-system/jobset-controller-manager".into(),
                manager: "helm".into(),
                fields: (0..5).map(|i| format!(".f{i}")).collect(),
            }],
        )
        .unwrap();
        assert_eq!(notice.addr, Some(addr));
        assert_eq!(
            notice.message,
            "installing JobSet v0.12.0 takes fields over from other field managers, since its objects are applied with force (docs/jobset.md 3.1): Deployment jobset-system/jobset-controller-manager from \"helm\" (.f0, .f1, .f2 and 2 more); their values become the release's"
        );
    }
    use serde_json::json;

    #[test]
    fn server_field_paths_parse_with_keys_values_and_indices() {
        let path = parse_field_path(
            r#".spec.replicatedJobs[name="workers"].template.spec.template.spec.nodeSelector"#,
        )
        .unwrap();
        assert_eq!(path.len(), 8);
        assert_eq!(
            path[2],
            FieldSeg::Key(Map::from_iter([("name".to_string(), json!("workers"))]))
        );
        let ports = parse_field_path(r#".ports[containerPort=80,protocol="TCP"].name"#).unwrap();
        assert_eq!(
            ports[1],
            FieldSeg::Key(Map::from_iter([
                ("containerPort".to_string(), json!(80)),
                ("protocol".to_string(), json!("TCP")),
            ]))
        );
        let odd = parse_field_path(r#".metadata.finalizers[="a]b"][2]"#).unwrap();
        assert_eq!(odd[2], FieldSeg::Value(json!("a]b")));
        assert_eq!(odd[3], FieldSeg::Index(2));
        assert_eq!(parse_field_path("spec"), None);
        assert_eq!(parse_field_path(".spec[name=\"x\""), None);
    }

    #[test]
    fn a_path_finds_and_removes_what_it_names() {
        let mut object = json!({"spec": {"groups": [
            {"name": "a", "template": {"nodeSelector": {"x": "1"}}},
            {"name": "b", "template": {"nodeSelector": {"y": "2"}}}]}});
        let path = parse_field_path(r#".spec.groups[name="b"].template.nodeSelector"#).unwrap();
        assert_eq!(value_at(&object, &path), Some(&json!({"y": "2"})));
        assert!(remove_at(&mut object, &path));
        assert_eq!(object["spec"]["groups"][1]["template"], json!({}));
        assert!(!remove_at(&mut object, &path), "already gone");
        assert_eq!(
            object["spec"]["groups"][0]["template"]["nodeSelector"]["x"],
            "1"
        );
    }

    fn ray_job(selector: Value, label: &str) -> Value {
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "train", "namespace": "ns", "labels": {"team": label}},
            "spec": {"entrypoint": "python train.py", "rayClusterSpec": {"workerGroupSpecs": [
                {"groupName": "tpu", "template": {"spec": {
                    "containers": [{"name": "ray-worker"}], "nodeSelector": selector}}}]}}})
    }

    const SELECTOR: &str =
        r#".spec.rayClusterSpec.workerGroupSpecs[groupName="tpu"].template.spec.nodeSelector"#;

    fn found(field: &str) -> Vec<Found> {
        vec![Found {
            field: field.into(),
            manager: "kueue".into(),
        }]
    }

    /// A label change on an admitted job: the node selector differs from the spec only by the
    /// key Kueue wrote on admission, so it is left to Kueue and the label still goes through.
    #[test]
    fn what_kueue_wrote_on_admission_is_left_to_kueue_unless_forced() {
        let addr = ResourceAddr::ray_job("ns", "train");
        let spec_selector = json!({"cloud.google.com/gke-tpu-topology": "4x4"});
        let admitted = json!({"cloud.google.com/gke-tpu-topology": "4x4",
            "cloud.google.com/gke-nodepool": "on-demand-pool"});
        let live = ray_job(admitted, "a");
        let desired = ray_job(spec_selector.clone(), "b");
        let resolved = resolve(&addr, &desired, &live, &desired, &found(SELECTOR), false);
        let [conflict] = resolved.conflicts.as_slice() else {
            panic!("{resolved:?}")
        };
        assert_eq!(conflict.resolution, Resolution::Left);
        assert!(conflict.admission);
        assert!(
            conflict
                .forcing
                .contains(r#"["cloud.google.com/gke-nodepool"]: "on-demand-pool" -> (unset)"#),
            "{}",
            conflict.forcing
        );
        assert!(
            conflict.forcing.contains("no longer be held"),
            "{}",
            conflict.forcing
        );
        assert!(!resolved.needs_force());
        let applied = resolved.applied.unwrap();
        let path = parse_field_path(SELECTOR).unwrap();
        assert_eq!(value_at(&applied, &path), None, "left out of the apply");
        assert_eq!(applied["metadata"]["labels"]["team"], "b");
        assert_eq!(applied["spec"]["entrypoint"], "python train.py");

        // Forced when planning says so: the same conflict is taken, and marked as Kueue's.
        let forced = resolve(&addr, &desired, &live, &desired, &found(SELECTOR), true);
        assert_eq!(forced.conflicts[0].resolution, Resolution::Force);
        assert!(forced.conflicts[0].admission && forced.needs_force());
        assert_eq!(forced.applied, None);
    }

    /// A value the spec changed is not Kueue's admission, and another kind's conflict is not
    /// either: both need force.
    #[test]
    fn other_conflicts_need_force_and_say_what_forcing_changes() {
        let addr = ResourceAddr::ray_job("ns", "train");
        let live = ray_job(
            json!({"cloud.google.com/gke-tpu-topology": "4x4",
            "cloud.google.com/gke-nodepool": "on-demand-pool"}),
            "a",
        );
        let desired = ray_job(json!({"cloud.google.com/gke-tpu-topology": "2x4"}), "a");
        let resolved = resolve(&addr, &desired, &live, &desired, &found(SELECTOR), false);
        assert_eq!(resolved.conflicts[0].resolution, Resolution::Force);
        assert!(!resolved.conflicts[0].admission);
        assert_eq!(resolved.applied, None);

        let addr = ResourceAddr::cluster_queue("cq");
        let queue = |quota: &str| {
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [
                    {"name": "f", "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}})
        };
        let field = r#".spec.resourceGroups"#;
        let mut by = found(field);
        by[0].manager = "kubectl-edit".into();
        let resolved = resolve(&addr, &queue("10"), &queue("12"), &queue("10"), &by, false);
        let c = &resolved.conflicts[0];
        assert_eq!((c.resolution, c.admission), (Resolution::Force, false));
        assert!(
            c.forcing
                .contains(r#"forcing would take it from "kubectl-edit": [0].flavors[0].resources[0].nominalQuota: "12" -> "10""#),
            "{}",
            c.forcing
        );
    }
}
