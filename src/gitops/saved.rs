//! Saved plans: `gkq plan --out plan.json` writes one, `gkq apply plan.json` applies exactly it or
//! refuses. This module reads a plan file and decides, from its provenance, whether it may be
//! applied: the format must be one this gkq reads, the target must be the one asked for, and the
//! spec, when it is available, must still have the digest the plan was made from. Live state is
//! checked separately, by [`crate::apply::Executor::verify`].

use std::path::Path;

use crate::plan::digest::{describe_changes, short_digest};
use crate::plan::provenance::SpecRevision;
use crate::plan::{PLAN_FORMAT_VERSION, Plan};
use crate::spec::limits::MAX_PLAN_BYTES;
use crate::spec::types::Target;

#[derive(Debug, thiserror::Error)]
pub enum SavedPlanError {
    #[error("cannot read the plan file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a gkq plan file: {message}")]
    NotAPlan { path: String, message: String },
    #[error(
        "{path} is plan format {found}, and this gkq ({version}) reads format {PLAN_FORMAT_VERSION}"
    )]
    Format {
        path: String,
        found: u32,
        version: &'static str,
    },
    #[error("{path} does not say what it was planned from (no `provenance`)")]
    NoProvenance { path: String },
    #[error(
        "{path} was changed after gkq wrote it: its integrity digest does not match its contents{}",
        if *.keyed { " and GKQ_PLAN_KEY" } else { "" }
    )]
    Tampered { path: String, keyed: bool },
    #[error("{path} has no integrity digest: it was not written by `gkq plan --out`")]
    NoIntegrity { path: String },
    #[error("{path} was signed with GKQ_PLAN_KEY, which is not set for this apply")]
    KeyMissing { path: String },
    #[error("{path} is not signed with GKQ_PLAN_KEY, which is set for this apply")]
    Unsigned { path: String },
    #[error("the plan was made for the {planned:?} target, and this apply is for {requested:?}")]
    TargetMismatch { planned: Target, requested: Target },
    #[error(
        "the spec changed since the plan was made ({}): {planned} when planned, {now} now",
        if .changes.is_empty() { "variables or environment differ".to_string() } else { .changes.join(", ") }
    )]
    SpecChanged {
        planned: String,
        now: String,
        changes: Vec<String>,
    },
    #[error(
        "the spec the plan was made from is not at {path} (a plan names its spec relative to the directory `gkq plan --out` ran in), so it cannot be checked and nothing was applied"
    )]
    SpecNotHere { path: String },
}

impl SavedPlanError {
    pub fn hint(&self) -> &'static str {
        match self {
            SavedPlanError::Read { .. } | SavedPlanError::NotAPlan { .. } => {
                "Pass a file written by `gkq plan --out FILE`, or a spec file or directory."
            }
            SavedPlanError::Format { .. } | SavedPlanError::NoProvenance { .. } => {
                "Make the plan again with this gkq: `gkq plan --out FILE`."
            }
            SavedPlanError::Tampered { .. } | SavedPlanError::NoIntegrity { .. } => {
                "Nothing was applied. Apply the file exactly as `gkq plan --out FILE` wrote it, or make a new plan and review that; a plan is never edited by hand."
            }
            SavedPlanError::Unsigned { .. } => {
                "Nothing was applied. Make the plan with the same GKQ_PLAN_KEY set (`gkq plan --out FILE`), so that only holders of the key can write a plan this apply accepts."
            }
            SavedPlanError::KeyMissing { .. } => {
                "Nothing was applied. Set GKQ_PLAN_KEY to the key the plan was made with (in CI, the same secret for the plan and the apply job)."
            }
            SavedPlanError::TargetMismatch { .. } => {
                "Apply the plan to the target it was made for, or make a plan for this target."
            }
            SavedPlanError::SpecNotHere { .. } => {
                "Run `gkq apply PLANFILE` from the directory the plan was made in, name the spec with `--spec PATH`, or pass `--no-spec-check` to apply the plan checking only that live state is what it was planned against."
            }
            SavedPlanError::SpecChanged { .. } => {
                "Nothing was applied. Plan again from the current spec (`gkq plan --out FILE`), review it, and apply that plan. If only variables differ, pass the same --var values and environment as when planning."
            }
        }
    }
}

/// Whether `path` is a saved plan rather than a spec: a `.json` file, or a file holding a JSON
/// object with the plan's `formatVersion` and `actions`. Specs are YAML or TOML files or
/// directories; a damaged plan file is still a plan file (reading it says what is wrong).
pub fn is_plan_file(path: &Path) -> bool {
    if !path.is_file() {
        return false;
    }
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        return true;
    }
    let Ok(text) = crate::gitops::tree::read_at_most(path, MAX_PLAN_BYTES) else {
        return false;
    };
    if !text.trim_start().starts_with('{') {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| {
        v.get("formatVersion").is_some() && v.get("actions").is_some_and(|a| a.is_array())
    })
}

/// The plan file's text: the plan as JSON with its integrity digest. `key` (from
/// `GKQ_PLAN_KEY`) makes the digest an HMAC that only holders of the key can produce.
pub fn file_text(plan: &Plan, key: Option<&[u8]>) -> String {
    let mut text = Vec::new();
    write_file(plan, key, &mut text).unwrap_or_default();
    String::from_utf8(text).unwrap_or_default()
}

/// Writes the plan file ([`file_text`]) to `out` as it is made: the plan is held once as a JSON
/// tree, its digest is computed from that tree without a canonical copy or a text of it, and
/// the pretty text goes straight to `out`.
pub fn write_file(
    plan: &Plan,
    key: Option<&[u8]>,
    out: impl std::io::Write,
) -> std::io::Result<()> {
    let mut value = serde_json::to_value(plan)?;
    let digest = integrity_of(&value, key);
    if let Some(map) = value.as_object_mut() {
        map.insert("integrity".into(), serde_json::Value::String(digest));
    }
    serde_json::to_writer_pretty(out, &value)?;
    Ok(())
}

/// `sha256:<hex>`, or `hmac-sha256:<hex>` with a key, over the canonical JSON of `value` (keys
/// sorted at every level, no whitespace: `diff::text::canonical`, serialised compactly) without
/// its top-level `integrity`.
fn integrity_of(value: &serde_json::Value, key: Option<&[u8]>) -> String {
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    match key {
        None => {
            let mut digest = Digest(Sha256Or::Sha(sha2::Sha256::default()));
            write_canonical(value, &mut digest, Some("integrity"));
            format!("sha256:{}", hex(&digest.finish()))
        }
        Some(key) => {
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
            let mut digest = Digest(Sha256Or::Hmac(Box::new(ring::hmac::Context::with_key(
                &key,
            ))));
            write_canonical(value, &mut digest, Some("integrity"));
            format!("hmac-sha256:{}", hex(&digest.finish()))
        }
    }
}

/// A running SHA-256 or HMAC-SHA256 that canonical JSON is written into.
struct Digest(Sha256Or);

enum Sha256Or {
    Sha(sha2::Sha256),
    Hmac(Box<ring::hmac::Context>),
}

impl Digest {
    fn update(&mut self, bytes: &[u8]) {
        match &mut self.0 {
            Sha256Or::Sha(sha) => sha2::Digest::update(sha, bytes),
            Sha256Or::Hmac(hmac) => hmac.update(bytes),
        }
    }

    fn finish(self) -> Vec<u8> {
        match self.0 {
            Sha256Or::Sha(sha) => sha2::Digest::finalize(sha).to_vec(),
            Sha256Or::Hmac(hmac) => hmac.sign().as_ref().to_vec(),
        }
    }
}

/// Feeds `value`'s canonical JSON to `digest`, the same bytes as
/// `serde_json::to_string(&canonical(value))` without building either; `skip` is a top-level key
/// left out.
fn write_canonical(value: &serde_json::Value, digest: &mut Digest, skip: Option<&str>) {
    use serde_json::Value;
    fn scalar(digest: &mut Digest, v: &(impl serde::Serialize + ?Sized)) {
        digest.update(serde_json::to_string(v).unwrap_or_default().as_bytes());
    }
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().filter(|k| Some(k.as_str()) != skip).collect();
            keys.sort();
            digest.update(b"{");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    digest.update(b",");
                }
                scalar(digest, key);
                digest.update(b":");
                write_canonical(&map[key], digest, None);
            }
            digest.update(b"}");
        }
        Value::Array(items) => {
            digest.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    digest.update(b",");
                }
                write_canonical(item, digest, None);
            }
            digest.update(b"]");
        }
        other => scalar(digest, other),
    }
}

/// Refuses a file whose integrity digest does not match its contents (and `key`, when the
/// digest is keyed).
fn check_integrity(
    path: &str,
    value: &serde_json::Value,
    key: Option<&[u8]>,
) -> Result<(), SavedPlanError> {
    let recorded = value
        .get("integrity")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| SavedPlanError::NoIntegrity { path: path.into() })?;
    let keyed = recorded.starts_with("hmac-sha256:");
    let expected = match (keyed, key) {
        (true, None) => return Err(SavedPlanError::KeyMissing { path: path.into() }),
        (true, Some(key)) => integrity_of(value, Some(key)),
        (false, Some(_)) => return Err(SavedPlanError::Unsigned { path: path.into() }),
        (false, None) => integrity_of(value, None),
    };
    // Compared in constant time: the HMAC is a secret-keyed value.
    let same = expected.len() == recorded.len()
        && expected
            .bytes()
            .zip(recorded.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same {
        return Err(SavedPlanError::Tampered {
            path: path.into(),
            keyed,
        });
    }
    Ok(())
}

/// Reads and checks a plan file: a plan this gkq can apply, with provenance, unchanged since
/// gkq wrote it (see [`file_text`]).
pub fn read(path: &Path, key: Option<&[u8]>) -> Result<Plan, SavedPlanError> {
    let shown = path.display().to_string();
    let text = crate::gitops::tree::read_at_most(path, MAX_PLAN_BYTES).map_err(|source| {
        SavedPlanError::Read {
            path: shown.clone(),
            source,
        }
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| SavedPlanError::NotAPlan {
            path: shown.clone(),
            message: format!("it is damaged or incomplete JSON ({e})"),
        })?;
    let found = value
        .get("formatVersion")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| SavedPlanError::NotAPlan {
            path: shown.clone(),
            message: "no formatVersion".into(),
        })?;
    if found != u64::from(PLAN_FORMAT_VERSION) {
        return Err(SavedPlanError::Format {
            path: shown,
            found: u32::try_from(found).unwrap_or(u32::MAX),
            version: crate::plan::provenance::GKQ_VERSION,
        });
    }
    check_integrity(&shown, &value, key)?;
    let plan: Plan = serde_json::from_value(value).map_err(|e| SavedPlanError::NotAPlan {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    if plan.provenance.is_none() {
        return Err(SavedPlanError::NoProvenance { path: shown });
    }
    Ok(plan)
}

/// What differs between a saved plan and the plan made again now from the same spec and the
/// live state of now, one line per difference; empty when the saved plan is the plan gkq makes.
///
/// Compared: which resources are acted on, in which order, how (kind, steps, the desired objects
/// and bodies, blocked or not, dependencies) and against what (the changed fields' live values
/// and the live fingerprints). Not compared: reasons and diff texts (both follow from the
/// rest) and the predictions (placements, quota), which move with every job Kueue admits.
pub fn differences(saved: &Plan, now: &Plan) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut out = Vec::new();
    if saved.cluster != now.cluster {
        out.push(format!(
            "the plan file is for cluster {}, the spec is for {}",
            saved.cluster.name(),
            now.cluster.name()
        ));
        return out;
    }
    let saved_by: BTreeMap<_, _> = saved.changes().map(|a| (&a.addr, a)).collect();
    let now_by: BTreeMap<_, _> = now.changes().map(|a| (&a.addr, a)).collect();
    for (addr, a) in &saved_by {
        let Some(b) = now_by.get(addr) else {
            out.push(format!(
                "{addr}: the plan file would {} it; planning now changes nothing there",
                a.kind.verb()
            ));
            continue;
        };
        if a.kind != b.kind {
            out.push(format!(
                "{addr}: the plan file would {} it; planning now would {} it",
                a.kind.verb(),
                b.kind.verb()
            ));
            continue;
        }
        out.extend(action_differences(a, b));
    }
    for (addr, b) in &now_by {
        if !saved_by.contains_key(addr) {
            out.push(format!(
                "{addr}: planning now would {} it; the plan file does not",
                b.kind.verb()
            ));
        }
    }
    let order = |p: &Plan| -> Vec<String> { p.changes().map(|a| a.addr.to_string()).collect() };
    if out.is_empty() && order(saved) != order(now) {
        out.push("the plan file orders its actions differently".to_string());
    }
    out
}

/// Differences between two actions of the same kind on the same resource.
fn action_differences(a: &crate::plan::Action, b: &crate::plan::Action) -> Vec<String> {
    let addr = &a.addr;
    let mut out = Vec::new();
    // Markers of sensitive values differ between runs by design; the spec digest covers the
    // values themselves.
    let plain = |v: &Option<serde_json::Value>| -> Option<serde_json::Value> {
        v.as_ref().map(|v| {
            let mut v = v.clone();
            unmark(&mut v);
            v
        })
    };
    let live_moved = crate::diff::fingerprint::changed_fields(&a.live_fields, &b.live_fields);
    let changes = |x: &crate::plan::Action| -> Vec<(String, Option<serde_json::Value>, Option<serde_json::Value>)> {
        x.changes
            .iter()
            .map(|c| (c.path.clone(), plain(&c.before), plain(&c.after)))
            .collect()
    };
    let (ca, cb) = (changes(a), changes(b));
    for (path, before, after) in &ca {
        match cb.iter().find(|(p, _, _)| p == path) {
            None => out.push(format!(
                "{addr}: the plan file changes {path}; planning now does not"
            )),
            Some((_, now_before, now_after)) => {
                if before != now_before {
                    out.push(format!(
                        "{addr}: {path} was {} when the plan was made and is {} now",
                        shown(before),
                        shown(now_before)
                    ));
                }
                if after != now_after {
                    out.push(format!(
                        "{addr}: the plan file sets {path} to {}; the spec says {}",
                        shown(after),
                        shown(now_after)
                    ));
                }
            }
        }
    }
    for (path, _, _) in &cb {
        if !ca.iter().any(|(p, _, _)| p == path) {
            out.push(format!(
                "{addr}: planning now changes {path}; the plan file does not"
            ));
        }
    }
    // What else moved in the fields the action depends on, when no changed field says it.
    if a.live_fingerprint != b.live_fingerprint && out.is_empty() {
        if live_moved.is_empty() {
            out.push(format!("{addr}: changed since the plan was made"));
        } else {
            out.push(format!(
                "{addr}: {} changed since the plan was made",
                live_moved.join(", ")
            ));
        }
    }
    let body = |x: &crate::plan::Action| -> serde_json::Value {
        let mut v = serde_json::json!({"desired": x.desired, "steps": x.steps});
        unmark(&mut v);
        v
    };
    if body(a) != body(b) && out.is_empty() {
        out.push(format!(
            "{addr}: the plan file's API calls or desired object differ from what the spec says"
        ));
    }
    if a.blocked.is_some() != b.blocked.is_some() {
        out.push(format!(
            "{addr}: {}",
            if a.blocked.is_some() {
                "blocked in the plan file, allowed now"
            } else {
                "allowed in the plan file, blocked now"
            }
        ));
    }
    if a.replace_strategy != b.replace_strategy || a.depends_on != b.depends_on {
        out.push(format!(
            "{addr}: the plan file orders or replaces it differently"
        ));
    }
    if a.sensitive != b.sensitive {
        out.push(format!(
            "{addr}: the plan file marks its values differently"
        ));
    }
    out
}

/// Replaces every sensitive-value marker by one spelling.
fn unmark(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) if s.starts_with("(sensitive value") => {
            *s = crate::diff::sensitive::REDACTED.to_string();
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(unmark),
        serde_json::Value::Object(map) => map.values_mut().for_each(unmark),
        _ => {}
    }
}

fn shown(value: &Option<serde_json::Value>) -> String {
    crate::diff::text::one_line(value.as_ref(), 80)
}

/// Refuses when the spec read now differs from the one the plan was made from.
pub fn check_spec(planned: &SpecRevision, now: &SpecRevision) -> Result<(), SavedPlanError> {
    if planned.digest == now.digest {
        return Ok(());
    }
    Err(SavedPlanError::SpecChanged {
        planned: planned_label(planned),
        now: planned_label(now),
        changes: describe_changes(&planned.files, &now.files),
    })
}

fn planned_label(spec: &SpecRevision) -> String {
    match &spec.commit {
        Some(commit) => format!(
            "spec {} at commit {}",
            short_digest(&spec.digest),
            crate::plan::provenance::short_commit(commit)
        ),
        None => format!("spec {}", short_digest(&spec.digest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::digest::FileDigest;

    fn spec(digest: &str, files: &[(&str, &str)]) -> SpecRevision {
        SpecRevision {
            path: "infra/gkq.yaml".into(),
            env: None,
            digest: format!("sha256:{digest}"),
            files: files
                .iter()
                .map(|(p, h)| FileDigest {
                    path: p.to_string(),
                    sha256: h.to_string(),
                })
                .collect(),
            variables: vec![],
            variable_sources: vec![],
            commit: None,
            git_ref: None,
        }
    }

    #[test]
    fn a_changed_spec_names_the_changed_files() {
        let planned = spec("aaaaaaaaaaaaaaaa", &[("gkq.yaml", "1"), ("train.py", "2")]);
        assert!(check_spec(&planned, &planned.clone()).is_ok());
        let now = spec("bbbbbbbbbbbbbbbb", &[("gkq.yaml", "1"), ("train.py", "3")]);
        let err = check_spec(&planned, &now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the spec changed since the plan was made (train.py changed): spec aaaaaaaaaaaa when planned, spec bbbbbbbbbbbb now"
        );
        let vars_only = spec("cccccccccccccccc", &[("gkq.yaml", "1"), ("train.py", "2")]);
        assert!(
            check_spec(&planned, &vars_only)
                .unwrap_err()
                .to_string()
                .contains("variables or environment differ")
        );
    }

    #[test]
    fn plan_files_are_told_from_specs() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("plan.json");
        std::fs::write(&plan, r#"{"formatVersion": 1, "actions": []}"#).unwrap();
        assert!(is_plan_file(&plan));
        let spec = dir.path().join("gkq.yaml");
        std::fs::write(&spec, "project: p\n").unwrap();
        assert!(!is_plan_file(&spec));
        assert!(!is_plan_file(dir.path()));
        let future = dir.path().join("future.json");
        std::fs::write(&future, r#"{"formatVersion": 9, "actions": []}"#).unwrap();
        assert!(matches!(
            read(&future, None),
            Err(SavedPlanError::Format { found: 9, .. })
        ));
    }

    fn a_plan() -> Plan {
        let text = r#"{"formatVersion": 1, "cluster": {"project": "p", "location": "l", "cluster": "c"},
            "actions": [], "summary": {"create": 0, "update": 0, "replace": 0, "delete": 0, "noOp": 0, "blocked": 0},
            "provenance": {"gkqVersion": "0", "createdAt": "now", "target": "local",
                "spec": {"path": "gkq.yaml", "digest": "sha256:00", "files": []}}}"#;
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_plan_file_is_read_only_as_gkq_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        std::fs::write(&path, file_text(&a_plan(), None)).unwrap();
        assert_eq!(read(&path, None).unwrap().cluster.cluster, "c");

        // Any edit, even one that still parses as a plan, is refused.
        let edited = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"cluster\": \"c\"", "\"cluster\": \"d\"");
        std::fs::write(&path, edited).unwrap();
        let err = read(&path, None).unwrap_err();
        assert!(
            matches!(err, SavedPlanError::Tampered { keyed: false, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("was changed after gkq wrote it"));

        // A file without a digest was not written by gkq.
        std::fs::write(&path, serde_json::to_string(&a_plan()).unwrap()).unwrap();
        assert!(matches!(
            read(&path, None),
            Err(SavedPlanError::NoIntegrity { .. })
        ));

        // A damaged file says so.
        std::fs::write(&path, "{\"formatVersion\": 1, \"actions\": [").unwrap();
        let err = read(&path, None).unwrap_err();
        assert!(
            err.to_string().contains("damaged or incomplete JSON"),
            "{err}"
        );
    }

    #[test]
    fn with_a_key_only_holders_of_the_key_can_write_an_accepted_plan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        std::fs::write(&path, file_text(&a_plan(), Some(b"ci-secret"))).unwrap();
        assert!(read(&path, Some(b"ci-secret")).is_ok());
        assert!(matches!(
            read(&path, Some(b"other")),
            Err(SavedPlanError::Tampered { keyed: true, .. })
        ));
        assert!(matches!(
            read(&path, None),
            Err(SavedPlanError::KeyMissing { .. })
        ));
        // A plain digest anyone can compute is not enough when the apply has a key.
        std::fs::write(&path, file_text(&a_plan(), None)).unwrap();
        assert!(matches!(
            read(&path, Some(b"ci-secret")),
            Err(SavedPlanError::Unsigned { .. })
        ));
    }

    #[test]
    fn the_streamed_digest_is_the_sha256_of_the_canonical_json() {
        let value = serde_json::json!({"b": [1, {"z": "é\"", "a": null}], "a": {"y": 2.5, "x": true},
            "integrity": "left out"});
        let mut rest = value.clone();
        rest.as_object_mut().unwrap().remove("integrity");
        let text = serde_json::to_string(&crate::diff::text::canonical(&rest)).unwrap();
        assert_eq!(
            integrity_of(&value, None),
            format!(
                "sha256:{}",
                crate::plan::digest::sha256_hex(text.as_bytes())
            )
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"k");
        let tag = ring::hmac::sign(&key, text.as_bytes());
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            integrity_of(&value, Some(b"k")),
            format!("hmac-sha256:{hex}")
        );
    }
}
