//! Files and directories only their owner may read: the local target's state (which holds
//! Secret values and the values of sensitive variables in clear), its locks, the agent's stack
//! store and checkouts, plan files.
//!
//! Files are created 0600 and directories 0700 on Unix. A file that already exists with a looser
//! mode is narrowed before anything is written to it; an atomic write replaces it with a new
//! file that was 0600 from the moment it was created. Directories that already exist are left as
//! they are: they may be the user's own (`--state-dir .`), and the files gkq keeps in them are
//! owner-only either way.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Mode of the files gkq keeps to itself.
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;
/// Mode of the directories gkq creates for them.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing parents, each owner-only.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(DIR_MODE);
    }
    builder.create(dir)
}

/// Options that create a file owner-only.
fn options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    options
}

/// Narrows an existing file (the mode of `OpenOptions` applies only to files it creates).
fn narrow(file: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if file.metadata()?.permissions().mode() & 0o777 != FILE_MODE {
            file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// Opens `path` for reading and writing, creating it if needed, without truncating it (a lock
/// file, a store read and rewritten under its lock); owner-only before the caller writes.
pub fn open_read_write(path: &Path) -> io::Result<File> {
    let file = options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    narrow(&file)?;
    Ok(file)
}

/// Opens `path` for writing from the start, creating it if needed; owner-only before the caller
/// writes.
pub fn create_truncated(path: &Path) -> io::Result<File> {
    let file = options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    narrow(&file)?;
    Ok(file)
}

/// Creates `path` for writing, owner-only; fails if it exists (a key file, never reused).
pub fn create_new(path: &Path) -> io::Result<File> {
    options().write(true).create_new(true).open(path)
}

/// Whether [`write_atomically`] flushes the new file to the disk before it replaces the old one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The rename alone: a crash may leave the old contents, never a partial file in its place
    /// on file systems that order data before metadata.
    Rename,
    /// `fsync` the new file first.
    Sync,
}

/// Writes `bytes` to `path` atomically: a new owner-only file beside it, then a rename over it.
/// Creates the directory if needed.
pub fn write_atomically(path: &Path, bytes: &[u8], durability: Durability) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    // A file of that name left by a process that died with this process id is not reused: it
    // may have a looser mode, and `create_new` below makes the new one owner-only from the start.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let written = (|| {
        let mut file = options().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        if durability == Durability::Sync {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn directories_and_files_are_created_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a").join("b");
        create_dir_all(&dir).unwrap();
        assert_eq!(mode(&root.path().join("a")), 0o700);
        assert_eq!(mode(&dir), 0o700);

        let state = dir.join("state.json");
        write_atomically(&state, b"{}", Durability::Sync).unwrap();
        assert_eq!(mode(&state), 0o600);
        assert_eq!(std::fs::read_to_string(&state).unwrap(), "{}");
        // Nothing is left beside it.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

        let lock = dir.join("apply.lock");
        open_read_write(&lock).unwrap();
        assert_eq!(mode(&lock), 0o600);
    }

    #[test]
    fn files_with_looser_modes_are_narrowed_when_written() {
        let dir = tempfile::tempdir().unwrap();
        let loose = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, "old").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            path
        };
        let state = loose("state.json");
        write_atomically(&state, b"new", Durability::Rename).unwrap();
        assert_eq!(mode(&state), 0o600);
        assert_eq!(std::fs::read_to_string(&state).unwrap(), "new");

        let lock = loose("apply.lock");
        open_read_write(&lock).unwrap();
        assert_eq!(mode(&lock), 0o600);
        assert_eq!(std::fs::read_to_string(&lock).unwrap(), "old");

        let plan = loose("plan.json");
        create_truncated(&plan).unwrap();
        assert_eq!(mode(&plan), 0o600);
        assert_eq!(std::fs::read_to_string(&plan).unwrap(), "");

        // A temporary file left with a loose mode by a dead process of the same id is replaced.
        let stale = loose(&format!(".again.json.{}.tmp", std::process::id()));
        write_atomically(&dir.path().join("again.json"), b"x", Durability::Rename).unwrap();
        assert!(!stale.exists());
        assert_eq!(mode(&dir.path().join("again.json")), 0o600);
    }
}
