//! Where spec files are read from: the working tree, or (for `--git-ref`) a commit.

use std::io;
use std::path::{Path, PathBuf};

use super::limits;

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
    /// Whether `dir` is the root of the git repository the spec is in (it holds `.git`): the
    /// last directory `--env` looks in for `environments/`.
    fn is_repository_root(&self, dir: &Path) -> bool {
        self.is_dir(&dir.join(".git")) || self.is_file(&dir.join(".git"))
    }
}

/// `path` with `.` and `dir/..` pairs removed, lexically (`examples/tpu-dws/..` is `examples`);
/// `.` when nothing is left.
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out: Vec<Component<'_>> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.is_empty() {
        PathBuf::from(".")
    } else {
        out.iter().collect()
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
