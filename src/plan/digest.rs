//! The spec digest: one sha256 that names exactly what a plan or an apply was computed from.
//!
//! It covers every file the spec was read from (the spec, its environment overlay, the scripts it
//! references), the environment name and the resolved value of every declared variable, so two
//! runs with the same digest saw the same input. Paths are taken relative to the spec's directory,
//! so the digest does not depend on where the repository is checked out or on whether the files
//! came from the working tree or from a commit (`--git-ref`).
//!
//! Pure: it works on a [`Loaded`] spec.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::spec::vars::values_of;
use crate::spec::{FileId, Loaded};

/// Version of the digest's input layout; part of the hashed document so that a future change of
/// layout never produces a digest equal to an old one.
const DIGEST_LAYOUT: u32 = 1;

/// One input file and its own hash, so a refusal can name the file that changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileDigest {
    /// Relative to the spec's directory (`gkq.yaml`, `environments/prod.yaml`, `train.py`).
    pub path: String,
    /// `sha256:<64 hex>` of the file's text.
    pub sha256: String,
}

/// The digest of a loaded spec and what went into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecDigest {
    /// `sha256:<64 hex>` over files, environment and variables.
    pub digest: String,
    pub files: Vec<FileDigest>,
    /// Names of the declared variables (their values are hashed, never recorded).
    pub variables: Vec<String>,
}

impl SpecDigest {
    /// The first 12 hex digits: short enough for a GKE label value or a log line.
    pub fn short(&self) -> &str {
        short_digest(&self.digest)
    }
}

/// The first 12 hex digits of a `sha256:` digest (or of any hex string).
pub fn short_digest(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Hashes a loaded spec with the variable values it was loaded with ([`Loaded::variables`]:
/// resolved once, by `spec::load`, so the digest can never see other values than the spec did).
/// See the module docs for what is covered.
pub fn spec_digest(loaded: &Loaded) -> SpecDigest {
    let variables = values_of(&loaded.variables);
    let mut files: Vec<FileDigest> = Vec::new();
    for id in 0.. {
        let Some(source) = loaded.sources.get(FileId(id)) else {
            break;
        };
        files.push(FileDigest {
            path: relative_to(&source.path, &loaded.dir),
            sha256: format!("sha256:{}", sha256_hex(source.text.as_bytes())),
        });
    }
    for (path, text) in &loaded.files {
        files.push(FileDigest {
            path: path.clone(),
            sha256: format!("sha256:{}", sha256_hex(text.as_bytes())),
        });
    }
    files.sort();
    files.dedup();
    let document = json!({
        "layout": DIGEST_LAYOUT,
        "files": files,
        "env": loaded.env,
        "variables": &variables,
    });
    // serde_json keeps map order as inserted and the variables come from a BTreeMap: the text is
    // canonical without a separate canonicalisation step.
    let text = serde_json::to_string(&document).unwrap_or_default();
    SpecDigest {
        digest: format!("sha256:{}", sha256_hex(text.as_bytes())),
        files,
        variables: variables.keys().cloned().collect(),
    }
}

/// `path` relative to `dir` with `/` separators (`../environments/dev.yaml` for an overlay a
/// stack shares from a parent directory), or the path as it is when the two cannot be related
/// (one absolute, the other not).
fn relative_to(path: &Path, dir: &Path) -> String {
    use std::path::Component;
    let path = crate::spec::fs::normalize(path);
    let dir = crate::spec::fs::normalize(dir);
    let parts = |p: &Path| -> Vec<String> {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect()
    };
    let (to, from) = (parts(&path), parts(&dir));
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    // A `..` the two share (a spec named `../infra`) cancels out; one left in `dir` names a
    // directory whose name only the working directory knows.
    if path.is_absolute() != dir.is_absolute() || from[common..].iter().any(|c| c == "..") {
        return to.join("/");
    }
    std::iter::repeat_n("..".to_string(), from.len() - common)
        .chain(to[common..].iter().cloned())
        .collect::<Vec<_>>()
        .join("/")
}

/// What differs between the files a plan recorded and the files read now, for a refusal message:
/// `gkq.yaml changed`, `environments/dev.yaml added`, `train.py removed`.
pub fn describe_changes(recorded: &[FileDigest], now: &[FileDigest]) -> Vec<String> {
    let before: BTreeMap<&str, &str> = recorded
        .iter()
        .map(|f| (f.path.as_str(), f.sha256.as_str()))
        .collect();
    let after: BTreeMap<&str, &str> = now
        .iter()
        .map(|f| (f.path.as_str(), f.sha256.as_str()))
        .collect();
    let mut out = Vec::new();
    for (path, hash) in &after {
        match before.get(path) {
            None => out.push(format!("{path} was added")),
            Some(old) if old != hash => out.push(format!("{path} changed")),
            Some(_) => {}
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        out.push(format!("{path} is no longer read"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{LoadOptions, SpecFs};
    use std::io;
    use std::path::PathBuf;

    /// An in-memory spec tree.
    struct Files(BTreeMap<PathBuf, String>);

    impl SpecFs for Files {
        fn read(&self, path: &Path) -> io::Result<String> {
            self.0
                .get(path)
                .cloned()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "missing"))
        }
        fn is_file(&self, path: &Path) -> bool {
            self.0.contains_key(path)
        }
        fn is_dir(&self, path: &Path) -> bool {
            self.0.keys().any(|p| p.starts_with(path) && p != path)
        }
        fn list_dir(&self, _: &Path) -> io::Result<Vec<PathBuf>> {
            Ok(Vec::new())
        }
    }

    const SPEC: &str = "variables:\n  POOL_MAX: {default: \"4\"}\nproject: p\nlocation: us-east5-b\ncluster: {name: c}\nnodePools:\n  - {name: a, machineType: e2-standard-4, autoscaling: {min: 0, max: \"${POOL_MAX}\"}}\n";

    fn load(root: &str, spec: &str, vars: &[(&str, &str)], env: &[(&str, &str)]) -> Loaded {
        let mut files = BTreeMap::new();
        files.insert(PathBuf::from(root).join("gkq.yaml"), spec.to_string());
        files.insert(
            PathBuf::from(root).join("environments/dev.yaml"),
            "cluster: {name: dev}\n".to_string(),
        );
        let cli: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let process: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let opts = LoadOptions {
            env: Some("dev".into()),
            vars: cli,
            env_lookup: Some(Box::new(move |name| process.get(name).cloned())),
        };
        crate::spec::load(&Files(files), Path::new(root), &opts)
            .unwrap_or_else(|f| panic!("{:?}", f.diagnostics))
    }

    fn digest_of(root: &str, spec: &str, vars: &[(&str, &str)]) -> SpecDigest {
        spec_digest(&load(root, spec, vars, &[]))
    }

    #[test]
    fn the_checkout_location_does_not_matter() {
        assert_eq!(
            digest_of("/a/infra", SPEC, &[]),
            digest_of("/b/elsewhere/infra", SPEC, &[])
        );
        // Named from a sibling directory (`gkq apply plan.json --spec ../infra`).
        assert_eq!(
            digest_of("infra", SPEC, &[]),
            digest_of("../infra", SPEC, &[])
        );
    }

    #[test]
    fn files_and_variables_change_the_digest() {
        let base = digest_of("/r", SPEC, &[]);
        let edited = digest_of(
            "/r",
            &SPEC.replace("location: us-east5-b", "location: x"),
            &[],
        );
        assert_ne!(base.digest, edited.digest);
        assert_eq!(
            describe_changes(&base.files, &edited.files),
            ["gkq.yaml changed"]
        );
        let var = digest_of("/r", SPEC, &[("POOL_MAX", "8")]);
        assert_ne!(base.digest, var.digest);
        // a variable changes the digest without changing any file
        assert!(describe_changes(&base.files, &var.files).is_empty());
        assert_eq!(var.variables, ["POOL_MAX"]);
        assert_eq!(
            base.files
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            ["environments/dev.yaml", "gkq.yaml"]
        );
        assert_eq!(base.short().len(), 12);
        assert!(base.digest.starts_with("sha256:"));
    }

    #[test]
    fn the_digest_hashes_the_values_the_spec_was_loaded_with() {
        let from_env = load("/r", SPEC, &[], &[("GKQ_VAR_POOL_MAX", "8")]);
        assert_eq!(
            spec_digest(&from_env),
            spec_digest(&load("/r", SPEC, &[("POOL_MAX", "8")], &[]))
        );
        assert_ne!(spec_digest(&from_env), digest_of("/r", SPEC, &[]));
        // A process variable without the prefix is not a value: the default is hashed.
        let bare = load("/r", SPEC, &[], &[("POOL_MAX", "8")]);
        assert_eq!(spec_digest(&bare), digest_of("/r", SPEC, &[]));
    }
}
