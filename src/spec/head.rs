//! A spec's head: its settings before the bulk of its objects and jobs (the first top-level
//! `manifests:` or `jobs:`), loaded as the whole spec is, overlay and variables included. What
//! the head decides (the cluster, so the stack) is known in a moment, while the whole spec,
//! thousands of objects in a large one, still loads; a caller that acts on it early checks it
//! against the whole spec once loaded.

use std::io;
use std::path::{Path, PathBuf};

use super::fs::SpecFs;
use super::{LoadOptions, Loaded};

/// The top-level keys whose values are the bulk of a large spec.
const BULK_KEYS: [&str; 2] = ["manifests", "jobs"];

/// The text of a YAML spec before the line of its first top-level bulk key (at column 0, so
/// that a key of that name deeper in the spec does not count); `None` when it has none. A
/// cut inside a multi-line quoted scalar leaves a head that does not parse, so it is never
/// mistaken for the spec's settings.
pub fn yaml_head(text: &str) -> Option<&str> {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let bulk = BULK_KEYS.iter().any(|key| {
            line.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start_matches(' ').starts_with(':'))
        });
        if bulk {
            return Some(&text[..start]);
        }
        start += line.len();
    }
    None
}

/// The spec `spec_arg` names, loaded from its head alone; `None` when it is not YAML, has no
/// bulk to leave out, or its head does not load on its own.
pub fn load_head(fs: &dyn SpecFs, spec_arg: &Path, opts: &LoadOptions) -> Option<Loaded> {
    let file = super::resolve_spec_path(fs, spec_arg).ok()?;
    if file.extension().and_then(|e| e.to_str()) == Some("toml") {
        return None;
    }
    let text = fs.read(&file).ok()?;
    let head = yaml_head(&text)?;
    let fs = HeadOf {
        fs,
        file: &file,
        head,
    };
    super::load(&fs, &file, opts).ok()
}

/// `fs` with the spec file cut to its head.
struct HeadOf<'a> {
    fs: &'a dyn SpecFs,
    file: &'a Path,
    head: &'a str,
}

impl SpecFs for HeadOf<'_> {
    fn read(&self, path: &Path) -> io::Result<String> {
        if path == self.file {
            return Ok(self.head.to_string());
        }
        self.fs.read(path)
    }
    fn is_file(&self, path: &Path) -> bool {
        self.fs.is_file(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.fs.is_dir(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.fs.list_dir(path)
    }
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        self.fs.real_path(path)
    }
    fn is_repository_root(&self, dir: &Path) -> bool {
        self.fs.is_repository_root(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_ends_before_the_first_top_level_bulk_key() {
        let spec = "project: p\ncluster:\n  name: c\n  jobs: 3\nnodePools: []\njobs :\n  - name: j\nmanifests:\n  - {}\n";
        assert_eq!(
            yaml_head(spec),
            Some("project: p\ncluster:\n  name: c\n  jobs: 3\nnodePools: []\n")
        );
        assert_eq!(yaml_head("manifests: []\ncluster: {name: c}\n"), Some(""));
        assert_eq!(yaml_head("project: p\njobsets: 1\n"), None);
        assert_eq!(yaml_head("project: p\n"), None);
    }
}
