//! A stack's repository: fetched with the user's `git` into a checkout of the agent's own, with
//! the credentials of the stack's Secret passed through git's environment (never its arguments,
//! which other processes can read, and never its configuration files).

use std::path::{Path, PathBuf};

use super::decide::redact;
use crate::gitops::git;

/// The git credentials and webhook secret of a stack's Secret.
#[derive(Default, Clone)]
pub struct Credentials {
    /// An HTTPS token (sent as basic authentication with `username`, default `git`).
    pub token: Option<String>,
    pub username: Option<String>,
    /// An SSH private key.
    pub identity: Option<String>,
    /// `known_hosts` lines for SSH; without them the host's key is accepted on first use.
    pub known_hosts: Option<String>,
    /// The push webhook's secret.
    pub webhook_secret: Option<Vec<u8>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("identity", &self.identity.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Every secret value, for [`redact`].
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = [&self.token, &self.identity]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if let Some(token) = &self.token {
            let user = self.username.as_deref().unwrap_or("git");
            out.push(format!("{user}:{token}"));
        }
        if let Some(w) = &self.webhook_secret {
            out.push(String::from_utf8_lossy(w).into_owned());
        }
        out
    }
}

/// The ref a stack follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitRef {
    Branch(String),
    Tag(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("could not run `git`: {0}; is git installed and on PATH?")]
    GitMissing(std::io::Error),
    #[error("`git {step}` of {url} failed: {stderr}")]
    Failed {
        step: String,
        url: String,
        stderr: String,
    },
    #[error("the checkout {dir}: {message}")]
    Checkout { dir: String, message: String },
}

/// Fetches `reference` of `url` into the repository at `dir` (made on first use) and checks the
/// commit out; returns the commit id. Error messages never hold the credentials.
pub async fn fetch(
    dir: &Path,
    url: &str,
    reference: &GitRef,
    credentials: &Credentials,
) -> Result<String, SourceError> {
    let secrets = credentials.secrets();
    let checkout = |message: String| SourceError::Checkout {
        dir: dir.display().to_string(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(|e| checkout(e.to_string()))?;
    if !dir.join(".git").exists() {
        run(dir, &["init", "--quiet"], url, &[], &secrets).await?;
    }
    let (refspec, tracking) = match reference {
        GitRef::Branch(b) => (
            format!("+refs/heads/{b}:refs/remotes/origin/{b}"),
            format!("refs/remotes/origin/{b}"),
        ),
        GitRef::Tag(t) => (
            format!("+refs/tags/{t}:refs/tags/{t}"),
            format!("refs/tags/{t}"),
        ),
    };
    let key_file = write_identity(dir, credentials).map_err(|e| checkout(e.to_string()))?;
    let env = environment(credentials, key_file.as_deref(), dir);
    let fetched = run(
        dir,
        &["fetch", "--quiet", "--no-tags", "--force", url, &refspec],
        url,
        &env,
        &secrets,
    )
    .await;
    if let Some(key) = &key_file {
        let _ = std::fs::remove_file(key);
        let _ = std::fs::remove_file(dir.join(".gkq-known-hosts"));
    }
    fetched?;
    let commit = git::resolve_commit(dir, &tracking).map_err(|e| checkout(e.to_string()))?;
    run(
        dir,
        &["checkout", "--quiet", "--force", "--detach", &commit],
        url,
        &[],
        &secrets,
    )
    .await?;
    Ok(commit)
}

/// Writes the SSH key (and known hosts) next to the repository, readable by this user only.
fn write_identity(dir: &Path, credentials: &Credentials) -> std::io::Result<Option<PathBuf>> {
    let Some(identity) = &credentials.identity else {
        return Ok(None);
    };
    let path = dir.join(".gkq-identity");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    use std::io::Write;
    let mut file = options.open(&path)?;
    file.write_all(identity.as_bytes())?;
    if !identity.ends_with('\n') {
        file.write_all(b"\n")?;
    }
    if let Some(hosts) = &credentials.known_hosts {
        std::fs::write(dir.join(".gkq-known-hosts"), hosts)?;
    }
    Ok(Some(path))
}

/// git's environment for a fetch: the token as an `http.extraHeader` given through
/// `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, the SSH key through
/// `GIT_SSH_COMMAND`.
fn environment(
    credentials: &Credentials,
    key_file: Option<&Path>,
    dir: &Path,
) -> Vec<(String, String)> {
    use base64::Engine;
    let mut env = Vec::new();
    if let Some(token) = &credentials.token {
        let user = credentials.username.as_deref().unwrap_or("git");
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"));
        env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
        env.push(("GIT_CONFIG_KEY_0".into(), "http.extraHeader".into()));
        env.push((
            "GIT_CONFIG_VALUE_0".into(),
            format!("Authorization: Basic {basic}"),
        ));
    }
    if let Some(key) = key_file {
        let hosts = if credentials.known_hosts.is_some() {
            format!(
                "-o UserKnownHostsFile={} -o StrictHostKeyChecking=yes",
                dir.join(".gkq-known-hosts").display()
            )
        } else {
            "-o StrictHostKeyChecking=accept-new".to_string()
        };
        env.push((
            "GIT_SSH_COMMAND".into(),
            format!("ssh -i {} -o IdentitiesOnly=yes {hosts}", key.display()),
        ));
    }
    env
}

async fn run(
    dir: &Path,
    args: &[&str],
    url: &str,
    env: &[(String, String)],
    secrets: &[String],
) -> Result<(), SourceError> {
    let output = tokio::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        // Nobody answers prompts in an agent; the user's git configuration is not the agent's.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(SourceError::GitMissing)?;
    if output.status.success() {
        return Ok(());
    }
    Err(SourceError::Failed {
        step: args.first().copied().unwrap_or_default().to_string(),
        url: redact(url, secrets),
        stderr: redact(String::from_utf8_lossy(&output.stderr).trim(), secrets),
    })
}
