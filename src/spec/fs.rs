//! Where spec files are read from: the working tree, or (for `--git-ref`) a commit.

use std::io;
use std::path::{Path, PathBuf};

use super::limits::{self, MAX_FILE_BYTES};

pub trait SpecFs {
    /// The file's text. Files larger than [`MAX_FILE_BYTES`] are refused with
    /// [`io::ErrorKind::FileTooLarge`] (see [`too_large`]) without being read whole.
    fn read(&self, path: &Path) -> io::Result<String>;
    fn is_file(&self, path: &Path) -> bool;
    fn is_dir(&self, path: &Path) -> bool;
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// Where `path` really is, symlinks followed, when that can differ from the path itself (the
    /// working tree); `None` when it does not exist or the file system has no links (a commit's
    /// tree stores a link as its target's text, never following it).
    fn real_path(&self, _path: &Path) -> Option<PathBuf> {
        None
    }
}

/// The error for a file larger than `limit`; `size` is what is known of its size (nothing more
/// than "larger", when it is a stream).
pub fn too_large(size: Option<u64>, limit: usize) -> io::Error {
    let size = match size {
        Some(n) => format!("it is {}", limits::bytes(n as usize)),
        None => format!("it is larger than {}", limits::bytes(limit)),
    };
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!(
            "{size}, over the limit of {} for a file gkq reads",
            limits::bytes(limit)
        ),
    )
}

/// Reads at most [`MAX_FILE_BYTES`] of `path` (see [`read_at_most`]).
pub fn read_bounded(path: &Path) -> io::Result<String> {
    read_at_most(path, MAX_FILE_BYTES)
}

/// Reads `path` if it holds at most `limit` bytes: a larger file (or an endless stream such as
/// a FIFO or `/dev/zero`) is refused at the limit, not read until memory runs out.
pub fn read_at_most(path: &Path, limit: usize) -> io::Result<String> {
    use std::io::Read;
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

/// A file's bytes as text; text that is not UTF-8 is an error naming the line and column of its
/// first bad byte.
pub fn text_of(bytes: Vec<u8>) -> io::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&valid[line_start..]).chars().count() + 1;
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is not UTF-8 text: byte 0x{:02x} at line {line}, column {column} (save the file as UTF-8)",
                e.as_bytes()[e.utf8_error().valid_up_to()]
            ),
        )
    })
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
pub enum GitError {
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
    pub fn open(near: &Path, reference: &str) -> Result<Self, GitError> {
        let start = if near.is_dir() {
            near.to_path_buf()
        } else {
            near.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        };
        let repo = git2::Repository::discover(&start).map_err(|source| GitError::NoRepository {
            path: start.display().to_string(),
            source,
        })?;
        let workdir = repo.workdir().map(Path::to_path_buf).ok_or_else(|| {
            git2::Error::from_str("bare repositories have no work tree to map paths to")
        })?;
        let commit = repo
            .revparse_single(reference)
            .and_then(|o| o.peel_to_commit())
            .map_err(|source| GitError::NoReference {
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
