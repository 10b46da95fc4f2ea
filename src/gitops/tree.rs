//! The spec's files as gkq reads them: from the working tree (bounded reads: a FIFO or a huge
//! file is refused at the limit) or from one git commit (`--git-ref`). Both implement
//! [`SpecFs`], so the spec loader itself does no I/O.

use std::io;
use std::path::{Path, PathBuf};

use crate::spec::SpecFs;
use crate::spec::fs::{text_of, too_large};
use crate::spec::limits::MAX_FILE_BYTES;

/// Reads at most [`MAX_FILE_BYTES`] of `path` (see [`read_at_most`]).
pub fn read_bounded(path: &Path) -> io::Result<String> {
    read_at_most(path, MAX_FILE_BYTES)
}

/// Reads `path` if it holds at most `limit` bytes: a larger file (or an endless stream such as
/// a FIFO or `/dev/zero`) is refused at the limit, not read until memory runs out.
pub fn read_at_most(path: &Path, limit: usize) -> io::Result<String> {
    use std::io::Read;
    // Opening a FIFO waits for a writer that may never come: only regular files are read.
    if !std::fs::metadata(path)?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file (a FIFO, device or socket); gkq reads only regular files",
        ));
    }
    let file = std::fs::File::open(path)?;
    let known = file.metadata().ok().map(|m| m.len()).filter(|n| *n > 0);
    if let Some(n) = known
        && n > limit as u64
    {
        return Err(too_large(Some(n), limit));
    }
    let mut bytes = Vec::with_capacity(known.unwrap_or(0) as usize);
    file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Err(too_large(None, limit));
    }
    text_of(bytes)
}

/// The files on disk.
pub struct WorkingTree;

impl SpecFs for WorkingTree {
    fn read(&self, path: &Path) -> io::Result<String> {
        read_bounded(path)
    }
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        out.sort();
        Ok(out)
    }
}

/// The files of one commit (`--git-ref REF`): the spec, its overlays and its scripts are read
/// from that commit, not from the working tree. Paths are given as on disk and are resolved
/// against the repository's work directory.
pub struct GitTree {
    repo: git2::Repository,
    workdir: PathBuf,
    tree: git2::Oid,
    commit: String,
}

#[derive(Debug, thiserror::Error)]
pub enum GitTreeError {
    #[error("not inside a git repository ({path}): {source}")]
    NoRepository { path: String, source: git2::Error },
    #[error("git reference `{reference}` not found: {source}")]
    NoReference {
        reference: String,
        source: git2::Error,
    },
    #[error("git: {0}")]
    Other(#[from] git2::Error),
}

impl GitTree {
    /// Opens the repository that holds `near` and resolves `reference` to a commit.
    pub fn open(near: &Path, reference: &str) -> Result<Self, GitTreeError> {
        let start = if near.is_dir() {
            near.to_path_buf()
        } else {
            near.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        };
        let repo =
            git2::Repository::discover(&start).map_err(|source| GitTreeError::NoRepository {
                path: start.display().to_string(),
                source,
            })?;
        let workdir = repo.workdir().map(Path::to_path_buf).ok_or_else(|| {
            git2::Error::from_str("bare repositories have no work tree to map paths to")
        })?;
        let commit = repo
            .revparse_single(reference)
            .and_then(|o| o.peel_to_commit())
            .map_err(|source| GitTreeError::NoReference {
                reference: reference.to_string(),
                source,
            })?;
        let id = commit.id().to_string();
        let tree = commit.tree()?.id();
        drop(commit);
        Ok(Self {
            repo,
            workdir: workdir.canonicalize().unwrap_or(workdir),
            tree,
            commit: id,
        })
    }

    /// The full commit id the files are read from.
    pub fn commit(&self) -> &str {
        &self.commit
    }

    fn relative(&self, path: &Path) -> Option<PathBuf> {
        let abs = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir().ok()?.join(path)
        };
        let mut out = PathBuf::new();
        for c in abs.components() {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        let workdir = &self.workdir;
        out.strip_prefix(workdir).ok().map(Path::to_path_buf)
    }

    fn entry(&self, path: &Path) -> Option<git2::Object<'_>> {
        let rel = self.relative(path)?;
        let tree = self.repo.find_tree(self.tree).ok()?;
        if rel.as_os_str().is_empty() {
            return Some(tree.into_object());
        }
        tree.get_path(&rel).ok()?.to_object(&self.repo).ok()
    }
}

impl SpecFs for GitTree {
    fn is_repository_root(&self, dir: &Path) -> bool {
        self.relative(dir)
            .is_some_and(|rel| rel.as_os_str().is_empty())
    }
    fn read(&self, path: &Path) -> io::Result<String> {
        let not_found = || {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "not in commit {}",
                    &self.commit[..12.min(self.commit.len())]
                ),
            )
        };
        let obj = self.entry(path).ok_or_else(not_found)?;
        let blob = obj.peel_to_blob().map_err(|_| not_found())?;
        if blob.size() > MAX_FILE_BYTES {
            return Err(too_large(Some(blob.size() as u64), MAX_FILE_BYTES));
        }
        text_of(blob.content().to_vec())
    }
    fn is_file(&self, path: &Path) -> bool {
        self.entry(path)
            .is_some_and(|o| o.kind() == Some(git2::ObjectType::Blob))
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.entry(path)
            .is_some_and(|o| o.kind() == Some(git2::ObjectType::Tree))
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let obj = self.entry(path).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "no such directory in the commit")
        })?;
        let tree = obj
            .peel_to_tree()
            .map_err(|_| io::Error::new(io::ErrorKind::NotADirectory, "not a directory"))?;
        let mut out: Vec<PathBuf> = tree
            .iter()
            .filter_map(|e| e.name().ok().map(|n| path.join(n)))
            .collect();
        out.sort();
        Ok(out)
    }
}
