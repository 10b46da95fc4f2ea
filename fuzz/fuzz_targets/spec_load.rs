//! Arbitrary bytes through spec loading and validation, as YAML and as TOML.
//!
//! The input is the spec file. If it contains a NUL byte, what follows the first NUL is also the
//! `--env fuzz` overlay (merged over the spec), so overlay merging is fuzzed too. Each run loads
//! with `gkq::spec::load` from an in-memory file system (the spec, its overlay and a `train.py`),
//! builds the desired state with `gkq::model::build`, and renders every diagnostic (text and
//! JSON), the way `gkq validate` would. Any panic is a bug: bad input must become diagnostics.

#![no_main]

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use gkq::spec::{self, LoadOptions, SpecFs};
use libfuzzer_sys::fuzz_target;

struct MemFs {
    files: BTreeMap<PathBuf, String>,
}

impl SpecFs for MemFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }
    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.files.keys().any(|f| f.starts_with(path) && f != path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        Ok(self
            .files
            .keys()
            .filter(|f| f.parent() == Some(path))
            .cloned()
            .collect())
    }
}

fn run(spec_text: &str, overlay: Option<&str>, ext: &str) {
    let dir = PathBuf::from("/fuzz");
    let spec_file = dir.join(format!("gkq.{ext}"));
    let mut files = BTreeMap::new();
    files.insert(spec_file.clone(), spec_text.to_string());
    files.insert(dir.join("train.py"), "print('train')\n".to_string());
    if let Some(o) = overlay {
        files.insert(dir.join(format!("environments/fuzz.{ext}")), o.to_string());
    }
    let fs = MemFs { files };
    let opts = LoadOptions {
        env: overlay.map(|_| "fuzz".to_string()),
        vars: BTreeMap::from([("FUZZ".to_string(), "value".to_string())]),
        // No process environment: the same input always behaves the same.
        env_lookup: Some(Box::new(|_| None)),
    };
    match spec::load(&fs, &spec_file, &opts) {
        Err(failure) => {
            let report = failure.diagnostics.report(&failure.sources);
            let _ = report.render(false);
            let _ = report.to_json();
        }
        Ok(loaded) => {
            let (desired, diags) = gkq::model::build(&loaded);
            let report = diags.report(&loaded.sources);
            let _ = report.render(false);
            let _ = report.to_json();
            if let Some(desired) = desired {
                // The desired state must serialise (render -o json does this).
                let _ = serde_json::to_string(&desired.kubernetes);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // Specs are text: the loader reads files as UTF-8 and refuses anything else up front.
    let text = String::from_utf8_lossy(data);
    let (spec_text, overlay) = match text.split_once('\0') {
        Some((s, o)) => (s, Some(o)),
        None => (text.as_ref(), None),
    };
    run(spec_text, overlay, "yaml");
    run(spec_text, overlay, "toml");
});
