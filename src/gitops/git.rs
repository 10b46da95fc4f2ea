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
