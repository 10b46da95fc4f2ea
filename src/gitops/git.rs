//! Git, as gitops needs it: which commit a spec was read from, whether the working tree is a clean
//! checkout of it, and fetching a remote branch.
//!
//! Reading uses git2 (no network). Fetching runs the user's own `git`, so that SSH agents,
//! credential helpers, proxies and `insteadOf` rules work exactly as they do on the command line,
//! and no TLS or SSH stack is linked into gkq.

use std::path::{Path, PathBuf};

use crate::spec::Loaded;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{path} is not inside a git repository")]
    NoRepository { path: String },
    #[error("git reference `{reference}` not found in {repo}: {message}")]
    NoReference {
        reference: String,
        repo: String,
        message: String,
    },
    #[error("could not run `git`: {0}; is git installed and on PATH?")]
    GitMissing(std::io::Error),
    #[error("`git {args}` failed in {repo}: {stderr}")]
    FetchFailed {
        args: String,
        repo: String,
        stderr: String,
    },
    #[error("git: {0}")]
    Other(#[from] git2::Error),
}

/// The directory a spec argument names: the directory itself, or the file's parent.
pub fn spec_dir(spec: &Path) -> PathBuf {
    if spec.is_dir() {
        spec.to_path_buf()
    } else {
        match spec.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }
}

fn open(near: &Path) -> Result<git2::Repository, GitError> {
    git2::Repository::discover(near).map_err(|_| GitError::NoRepository {
        path: near.display().to_string(),
    })
}

/// The full commit id `reference` names in the repository that holds `near`.
pub fn resolve_commit(near: &Path, reference: &str) -> Result<String, GitError> {
    let repo = open(near)?;
    let commit = repo
        .revparse_single(reference)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| GitError::NoReference {
            reference: reference.to_string(),
            repo: repo_name(&repo),
            message: e.message().to_string(),
        })?;
    Ok(commit.id().to_string())
}

/// Whether the repository at `dir` (itself, not a parent) has `commit` checked out, detached or
/// not, with every tracked file as committed: what `git checkout --force COMMIT` would leave, so
/// running it again would change nothing. Untracked files do not count (a checkout leaves them
/// too); any doubt (no repository, an unreadable index) answers `false`.
pub fn is_checkout_of(dir: &Path, commit: &str) -> bool {
    let Ok(repo) = git2::Repository::open(dir) else {
        return false;
    };
    let head = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    if head.is_none_or(|c| c.id().to_string() != commit) {
        return false;
    }
    let mut options = git2::StatusOptions::new();
    options.include_untracked(false).include_ignored(false);
    repo.statuses(Some(&mut options))
        .is_ok_and(|statuses| statuses.is_empty())
}

/// The object id the reference `name` (such as `refs/remotes/origin/main`) holds in the
/// repository at `dir` (itself, not a parent), as git stores it: not peeled, so an annotated
/// tag's is the tag object's, as `git ls-remote` lists it. `None` when there is no such
/// reference (or no repository). Read from `.git`, without running git.
pub fn reference_id(dir: &Path, name: &str) -> Option<String> {
    let repo = git2::Repository::open(dir).ok()?;
    repo.refname_to_id(name).ok().map(|id| id.to_string())
}

fn repo_name(repo: &git2::Repository) -> String {
    repo.workdir()
        .unwrap_or_else(|| repo.path())
        .display()
        .to_string()
}

/// The local checkout a spec lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalHead {
    /// HEAD's commit id.
    pub commit: String,
    /// The branch HEAD is on, when it is on one.
    pub branch: Option<String>,
    /// Whether every file the spec read is tracked and unmodified (so HEAD is what was read).
    pub clean: bool,
}

/// HEAD of the repository holding the spec, and whether the files the spec read are exactly as
/// committed. `None` outside a repository or in one without commits.
pub fn local_head(loaded: &Loaded) -> Option<LocalHead> {
    let repo = open(&loaded.dir).ok()?;
    let head = repo.head().ok()?;
    let commit = head.peel_to_commit().ok()?.id().to_string();
    let branch = head
        .is_branch()
        .then(|| head.shorthand().ok().map(str::to_string))
        .flatten();
    let clean = files_read(loaded)
        .iter()
        .all(|path| is_committed(&repo, path));
    Some(LocalHead {
        commit,
        branch,
        clean,
    })
}

/// HEAD's commit id when the working tree is a clean checkout of every file the spec read: then
/// the plan can honestly say which commit it was made from.
pub fn clean_head(loaded: &Loaded) -> Option<String> {
    local_head(loaded)
        .filter(|head| head.clean)
        .map(|head| head.commit)
}

/// The paths of every file `loaded` was read from: sources (spec, overlay) and scripts.
fn files_read(loaded: &Loaded) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for id in 0.. {
        let Some(source) = loaded.sources.get(crate::spec::FileId(id)) else {
            break;
        };
        paths.push(source.path.clone());
    }
    paths.extend(loaded.files.keys().map(|script| loaded.dir.join(script)));
    paths
}

fn is_committed(repo: &git2::Repository, path: &Path) -> bool {
    let Some(workdir) = repo.workdir() else {
        return false;
    };
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let Ok(absolute) = path.canonicalize() else {
        return false;
    };
    let Ok(relative) = absolute.strip_prefix(&workdir) else {
        return false;
    };
    // An empty status means tracked and identical in index and working tree.
    repo.status_file(relative)
        .is_ok_and(|status| status.is_empty())
}

/// How many commits `from` is ahead of and behind `to`, when both are in the local repository.
pub fn ahead_behind(near: &Path, from: &str, to: &str) -> Option<(usize, usize)> {
    let repo = open(near).ok()?;
    let from = git2::Oid::from_str(from).ok()?;
    let to = git2::Oid::from_str(to).ok()?;
    repo.graph_ahead_behind(from, to).ok()
}

/// The work tree root of the repository holding `near`.
pub fn workdir(near: &Path) -> Result<PathBuf, GitError> {
    let repo = open(near)?;
    repo.workdir()
        .map(Path::to_path_buf)
        .ok_or_else(|| GitError::Other(git2::Error::from_str("a bare repository has no work tree")))
}

/// Runs `git fetch --no-tags REMOTE +refs/heads/BRANCH:refs/remotes/REMOTE/BRANCH` with the user's
/// own git in the repository holding `near`, then returns the commit the remote branch points at.
pub async fn fetch(near: &Path, remote: &str, branch: &str) -> Result<String, GitError> {
    let repo_dir = workdir(near)?;
    let tracking = format!("refs/remotes/{remote}/{branch}");
    let refspec = format!("+refs/heads/{branch}:{tracking}");
    // `--`: a remote or branch is never read as an option, whatever its first character.
    let args = [
        "fetch",
        "--quiet",
        "--no-tags",
        "--",
        remote,
        refspec.as_str(),
    ];
    let output = tokio::process::Command::new("git")
        .args(args)
        .current_dir(&repo_dir)
        // Never prompt: a watch loop has nobody to answer. Credential helpers and agents still work.
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(GitError::GitMissing)?;
    if !output.status.success() {
        return Err(GitError::FetchFailed {
            args: args.join(" "),
            repo: repo_dir.display().to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    resolve_commit(&repo_dir, &tracking)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &git2::Repository, dir: &Path, file: &str, text: &str) -> String {
        std::fs::write(dir.join(file), text).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(file)).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@example.com").unwrap();
        let parents: Vec<git2::Commit> = repo
            .head()
            .ok()
            .and_then(|h| h.peel_to_commit().ok())
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &who, &who, "c", &tree, &parents)
            .unwrap()
            .to_string()
    }

    /// A reference's stored id, not peeled: an annotated tag's is its tag object's.
    #[test]
    fn a_reference_id_is_read_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(reference_id(dir.path(), "refs/heads/main"), None);
        let repo = git2::Repository::init(dir.path()).unwrap();
        let first = commit(&repo, dir.path(), "gkq.yaml", "a: 1\n");
        let head = repo.head().unwrap().name().unwrap().to_string();
        assert_eq!(reference_id(dir.path(), &head), Some(first.clone()));
        let target = repo.revparse_single(&first).unwrap();
        let who = git2::Signature::now("t", "t@example.com").unwrap();
        let tag = repo.tag("v1", &target, &who, "v1", false).unwrap();
        assert_eq!(
            reference_id(dir.path(), "refs/tags/v1"),
            Some(tag.to_string())
        );
        assert_ne!(tag.to_string(), first);
        assert_eq!(reference_id(dir.path(), "refs/remotes/origin/main"), None);
    }

    /// Only HEAD at that commit with every tracked file as committed is a checkout of it; an
    /// untracked file does not matter, a changed tracked file or another commit does.
    #[test]
    fn a_checkout_is_one_of_a_commit_only_when_head_and_tracked_files_match() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_checkout_of(dir.path(), "0000"));
        let repo = git2::Repository::init(dir.path()).unwrap();
        let first = commit(&repo, dir.path(), "gkq.yaml", "a: 1\n");
        assert!(is_checkout_of(dir.path(), &first));
        let second = commit(&repo, dir.path(), "gkq.yaml", "a: 2\n");
        assert!(!is_checkout_of(dir.path(), &first));
        assert!(is_checkout_of(dir.path(), &second));
        std::fs::write(dir.path().join("notes.txt"), "untracked").unwrap();
        assert!(is_checkout_of(dir.path(), &second));
        std::fs::write(dir.path().join("gkq.yaml"), "a: 3\n").unwrap();
        assert!(!is_checkout_of(dir.path(), &second));
        // A directory inside another repository is not that repository's checkout.
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        assert!(!is_checkout_of(&inner, &second));
    }
}
