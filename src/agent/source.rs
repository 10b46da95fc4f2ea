//! A stack's repository: fetched with the user's `git` into a checkout of the agent's own, with
//! the credentials of the stack's Secret passed through git's environment (never its arguments,
//! which other processes can read, and never its configuration files).

use std::path::{Path, PathBuf};

use super::decide::redact;
use super::source_check::{GitRef, Source};
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
    /// Every secret value, for [`redact`]: also each line of the SSH key's body, so that a
    /// message quoting part of the key does not carry it out either.
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = [&self.token, &self.identity]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if let Some(identity) = &self.identity {
            out.extend(
                identity
                    .lines()
                    .map(str::trim)
                    .filter(|l| l.len() >= 16 && !l.starts_with("-----"))
                    .map(str::to_string),
            );
        }
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

/// Fetches the checked `source` into the repository at `dir` (made on first use) and checks the
/// commit out; returns the commit id. Error messages never hold the credentials.
///
/// The stack's values reach git only as positional arguments after `--`, and git may use only
/// the transports the source's form needs (`GIT_ALLOW_PROTOCOL`): no remote helper (`ext::`,
/// `fd::`), whatever the URL says.
pub async fn fetch(
    dir: &Path,
    source: &Source,
    credentials: &Credentials,
) -> Result<String, SourceError> {
    let url = source.url.as_str();
    let reference = &source.reference;
    let secrets = credentials.secrets();
    let checkout = |message: String| SourceError::Checkout {
        dir: dir.display().to_string(),
        message,
    };
    // Owner-only: a checkout holds the spec, and the SSH identity while it fetches.
    crate::owner_only::create_dir_all(dir).map_err(|e| checkout(e.to_string()))?;
    let git = Git {
        dir,
        url,
        secrets: &secrets,
        protocols: if source.file { "file" } else { "https:ssh" },
    };
    if !dir.join(".git").exists() {
        git.run(&["init", "--quiet"], Vec::new()).await?;
    }
    // The remote's ref, and where the checkout keeps it.
    let (remote_ref, tracking) = match reference {
        GitRef::Branch(b) => (
            format!("refs/heads/{b}"),
            format!("refs/remotes/origin/{b}"),
        ),
        GitRef::Tag(t) => (format!("refs/tags/{t}"), format!("refs/tags/{t}")),
    };
    // Removed when dropped: after the fetch, and also when it fails or is cancelled.
    let ssh = SshFiles::write(dir, credentials).map_err(|e| checkout(e.to_string()))?;
    let env = environment(credentials, ssh.as_ref());
    let fetched = fetch_if_moved(&git, &remote_ref, &tracking, env).await;
    drop(ssh);
    fetched?;
    let commit = git::resolve_commit(dir, &tracking).map_err(|e| checkout(e.to_string()))?;
    // A symbolic link in the repository is checked out as a file holding its target: a stack's
    // checkout never points at the agent's own files (its ServiceAccount token, another stack).
    // An interval that fetched the commit already checked out (and untouched) runs no checkout:
    // most rounds of an idle agent.
    if git::is_checkout_of(dir, &commit) {
        return Ok(commit);
    }
    let plain_links = config_env(&[("core.symlinks", "false".to_string())]);
    git.run(
        &["checkout", "--quiet", "--force", "--detach", &commit, "--"],
        plain_links,
    )
    .await?;
    Ok(commit)
}

/// Fetches the remote's `remote_ref` into the checkout's `tracking` ref unless it already points
/// where `tracking` does: an idle interval asks the remote with one `git ls-remote` (no objects
/// negotiated, no connectivity check, no maintenance run) and reads the checkout's ref from
/// `.git` itself. A remote that does not list the ref is fetched, so its error is git's own.
async fn fetch_if_moved(
    git: &Git<'_>,
    remote_ref: &str,
    tracking: &str,
    env: Vec<(String, String)>,
) -> Result<(), SourceError> {
    if let Some(local) = git::reference_id(git.dir, tracking) {
        let listed = git
            .run(&["ls-remote", "--", git.url, remote_ref], env.clone())
            .await?;
        if listed_id(&listed, remote_ref) == Some(local.as_str()) {
            return Ok(());
        }
    }
    git.run(
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--force",
            "--no-recurse-submodules",
            "--",
            git.url,
            &format!("+{remote_ref}:{tracking}"),
        ],
        env,
    )
    .await
    .map(drop)
}

/// The object id `git ls-remote` lists for exactly `reference` (its patterns also match refs
/// that only end with it, such as `refs/heads/x/refs/heads/main`).
fn listed_id<'a>(listed: &'a str, reference: &str) -> Option<&'a str> {
    listed.lines().find_map(|line| {
        let (id, name) = line.split_once('\t')?;
        (name == reference).then_some(id)
    })
}

/// The SSH key and `known_hosts` of one fetch, in a directory only this user may enter
/// (`<checkout>/.git/gkq-ssh`, mode 0700; the key 0600). Removed when dropped.
struct SshFiles {
    dir: PathBuf,
    key: PathBuf,
    known_hosts: Option<PathBuf>,
}

impl SshFiles {
    /// Writes the stack's SSH key (and known hosts); `None` without a key.
    fn write(checkout: &Path, credentials: &Credentials) -> std::io::Result<Option<SshFiles>> {
        let Some(identity) = &credentials.identity else {
            return Ok(None);
        };
        // Absolute: git runs ssh in the checkout, where a relative path would not resolve.
        let dir = std::path::absolute(checkout.join(".git").join("gkq-ssh"))?;
        // What an agent killed during a fetch left behind is not reused, whatever its mode.
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        crate::owner_only::create_dir_all(&dir)?;
        let mut files = SshFiles {
            key: dir.join("identity"),
            known_hosts: None,
            dir,
        };
        use std::io::Write;
        let mut file = crate::owner_only::create_new(&files.key)?;
        file.write_all(identity.as_bytes())?;
        // OpenSSH refuses a key whose last line is not terminated.
        if !identity.ends_with('\n') {
            file.write_all(b"\n")?;
        }
        if let Some(hosts) = &credentials.known_hosts {
            let path = files.dir.join("known_hosts");
            std::fs::write(&path, hosts)?;
            files.known_hosts = Some(path);
        }
        Ok(Some(files))
    }
}

impl Drop for SshFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// git configuration given through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`:
/// never on the command line (which other processes can read) and never in a file.
fn config_env(entries: &[(&str, String)]) -> Vec<(String, String)> {
    let mut env = vec![("GIT_CONFIG_COUNT".to_string(), entries.len().to_string())];
    for (n, (key, value)) in entries.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{n}"), key.to_string()));
        env.push((format!("GIT_CONFIG_VALUE_{n}"), value.clone()));
    }
    env
}

/// git's environment for a fetch: the token as an `http.extraHeader` (through [`config_env`]),
/// the SSH key through `GIT_SSH_COMMAND`.
fn environment(credentials: &Credentials, ssh: Option<&SshFiles>) -> Vec<(String, String)> {
    use base64::Engine;
    let mut env = Vec::new();
    if let Some(token) = &credentials.token {
        let user = credentials.username.as_deref().unwrap_or("git");
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"));
        env = config_env(&[("http.extraHeader", format!("Authorization: Basic {basic}"))]);
    }
    if let Some(ssh) = ssh {
        env.push((
            "GIT_SSH_COMMAND".into(),
            ssh_command(&ssh.key, ssh.known_hosts.as_deref()),
        ));
    }
    env
}

/// The `ssh` command line git runs (through `sh -c`): the key given as an option, no prompts
/// (`BatchMode`: nobody answers them), the stack's known hosts only when it has them.
fn ssh_command(key: &Path, known_hosts: Option<&Path>) -> String {
    let mut command = format!(
        "ssh {} -o IdentitiesOnly=yes -o BatchMode=yes",
        ssh_option("IdentityFile", key)
    );
    match known_hosts {
        Some(hosts) => {
            command.push(' ');
            command.push_str(&ssh_option("UserKnownHostsFile", hosts));
            command.push_str(" -o StrictHostKeyChecking=yes");
        }
        None => command.push_str(" -o StrictHostKeyChecking=accept-new"),
    }
    command
}

/// `-o NAME="PATH"` quoted twice: for ssh, which splits an option's value at spaces (a double
/// quoted value is one word, `\` escaping `"` and `\` in it) and expands `%` tokens in these
/// paths (`%%` is a `%`); and for the shell git runs the command with (single quotes, each `'`
/// written `'\''`). A work directory may hold any of these characters; only `${`, which ssh
/// expands as an environment variable and has no escape for, would not survive.
fn ssh_option(name: &str, path: &Path) -> String {
    let path = path.display().to_string();
    let for_ssh = path
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    let option = format!("{name}=\"{for_ssh}\"");
    format!("-o '{}'", option.replace('\'', "'\\''"))
}

/// One stack's git runs: in its checkout, with the transports its source may use.
struct Git<'a> {
    dir: &'a Path,
    url: &'a str,
    secrets: &'a [String],
    /// `GIT_ALLOW_PROTOCOL`: `https:ssh`, or `file` for an allowed `file://` source.
    protocols: &'static str,
}

impl Git<'_> {
    /// Runs `git ARGS` in the checkout; returns what it wrote on stdout.
    async fn run(&self, args: &[&str], env: Vec<(String, String)>) -> Result<String, SourceError> {
        let output = tokio::process::Command::new("git")
            .args(args)
            .current_dir(self.dir)
            .envs(env)
            // Only these transports: no `ext::`/`fd::` helper, no `git://`, whatever the URL or
            // a configuration file says (it overrides `protocol.*.allow`).
            .env("GIT_ALLOW_PROTOCOL", self.protocols)
            // Nobody answers prompts in an agent; the user's git configuration is not the agent's.
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(SourceError::GitMissing)?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        Err(SourceError::Failed {
            step: args.first().copied().unwrap_or_default().to_string(),
            url: redact(self.url, self.secrets),
            stderr: redact(String::from_utf8_lossy(&output.stderr).trim(), self.secrets),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----";

    fn with_key(known_hosts: Option<&str>) -> Credentials {
        Credentials {
            identity: Some(KEY.to_string()),
            known_hosts: known_hosts.map(str::to_string),
            ..Credentials::default()
        }
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[cfg(unix)]
    #[test]
    fn the_ssh_key_is_readable_by_the_agent_only_and_removed_when_the_fetch_ends() {
        let checkout = tempfile::tempdir().unwrap();
        let leftover = checkout.path().join(".git/gkq-ssh");
        std::fs::create_dir_all(&leftover).unwrap();
        std::fs::write(leftover.join("identity"), "left by a killed agent").unwrap();
        std::fs::set_permissions(
            leftover.join("identity"),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();

        let files = SshFiles::write(
            checkout.path(),
            &with_key(Some("[h]:22 ssh-ed25519 AAAA\n")),
        )
        .unwrap()
        .unwrap();
        assert!(files.key.is_absolute(), "{}", files.key.display());
        assert_eq!(mode(&files.dir), 0o700);
        assert_eq!(mode(&files.key), 0o600);
        assert_eq!(
            std::fs::read_to_string(&files.key).unwrap(),
            format!("{KEY}\n")
        );
        let hosts = files.known_hosts.clone().unwrap();
        assert_eq!(
            std::fs::read_to_string(hosts).unwrap(),
            "[h]:22 ssh-ed25519 AAAA\n"
        );
        let dir = files.dir.clone();
        drop(files);
        assert!(!dir.exists(), "the key is removed");
        assert!(
            SshFiles::write(checkout.path(), &Credentials::default())
                .unwrap()
                .is_none()
        );
    }

    /// The command as git hands it to `sh -c`. That the shell and ssh read it back as these
    /// paths is checked against a real sshd by `agent::ssh` (its work directory has all of
    /// these characters); gkq itself never runs a shell (`security::no_shell_is_ever_run`).
    #[test]
    fn the_ssh_command_quotes_paths_for_the_shell_and_for_ssh() {
        let dir = Path::new("/work dir/it's \"odd\" 100%d\\x");
        assert_eq!(
            ssh_command(&dir.join("identity"), Some(&dir.join("known_hosts"))),
            r#"ssh -o 'IdentityFile="/work dir/it'\''s \"odd\" 100%%d\\x/identity"' -o IdentitiesOnly=yes -o BatchMode=yes -o 'UserKnownHostsFile="/work dir/it'\''s \"odd\" 100%%d\\x/known_hosts"' -o StrictHostKeyChecking=yes"#
        );
        assert_eq!(
            ssh_command(Path::new("/k"), None),
            r#"ssh -o 'IdentityFile="/k"' -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=accept-new"#
        );
    }

    /// Commits `text` as `gkq.yaml` on `main` of the repository at `dir`; returns the commit.
    fn commit_spec(dir: &Path, text: &str) -> String {
        let repo = git2::Repository::open(dir)
            .or_else(|_| {
                let mut options = git2::RepositoryInitOptions::new();
                options.initial_head("main");
                git2::Repository::init_opts(dir, &options)
            })
            .unwrap();
        std::fs::write(dir.join("gkq.yaml"), text).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("gkq.yaml")).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@example.com").unwrap();
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        repo.commit(Some("HEAD"), &who, &who, "c", &tree, &parents)
            .unwrap()
            .to_string()
    }

    fn file_source(remote: &Path, reference: GitRef) -> Source {
        Source {
            url: format!("file://{}", remote.display()),
            reference,
            file: true,
            acting_as: None,
            submit_wait: None,
        }
    }

    /// `FETCH_HEAD`, which every `git fetch` rewrites.
    fn fetch_head(checkout: &Path) -> Option<(std::time::SystemTime, String)> {
        let path = checkout.join(".git/FETCH_HEAD");
        let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
        Some((modified, std::fs::read_to_string(&path).ok()?))
    }

    /// An interval whose branch has not moved on the remote runs no `git fetch` (the checkout's
    /// FETCH_HEAD is not rewritten); a new commit is fetched and checked out by the next one.
    #[tokio::test]
    async fn an_unmoved_branch_is_not_fetched_again_and_a_new_commit_is() {
        let remote = tempfile::tempdir().unwrap();
        let checkout = tempfile::tempdir().unwrap();
        let dir = checkout.path().join("stack");
        let first = commit_spec(remote.path(), "a: 1\n");
        let source = file_source(remote.path(), GitRef::Branch("main".into()));
        let none = Credentials::default();
        assert_eq!(fetch(&dir, &source, &none).await.unwrap(), first);
        let fetched = fetch_head(&dir).expect("the first interval fetches");
        // Coarse file times: a rewrite within the same tick would not show in the time alone.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(fetch(&dir, &source, &none).await.unwrap(), first);
        assert_eq!(fetch_head(&dir), Some(fetched.clone()), "not fetched again");

        let second = commit_spec(remote.path(), "a: 2\n");
        assert_eq!(fetch(&dir, &source, &none).await.unwrap(), second);
        assert_ne!(
            fetch_head(&dir),
            Some(fetched),
            "the new commit was fetched"
        );
        assert!(git::is_checkout_of(&dir, &second));
        assert_eq!(
            std::fs::read_to_string(dir.join("gkq.yaml")).unwrap(),
            "a: 2\n"
        );
    }

    /// A tag moved to another commit on the remote (an annotated tag, listed by its tag object)
    /// is fetched again.
    #[tokio::test]
    async fn a_moved_tag_is_fetched_again() {
        let remote = tempfile::tempdir().unwrap();
        let checkout = tempfile::tempdir().unwrap();
        let dir = checkout.path().join("stack");
        let tag = |commit: &str| {
            let repo = git2::Repository::open(remote.path()).unwrap();
            let target = repo.revparse_single(commit).unwrap();
            let who = git2::Signature::now("t", "t@example.com").unwrap();
            repo.tag("v1", &target, &who, "v1", true).unwrap();
        };
        let first = commit_spec(remote.path(), "a: 1\n");
        tag(&first);
        let source = file_source(remote.path(), GitRef::Tag("v1".into()));
        let none = Credentials::default();
        assert_eq!(fetch(&dir, &source, &none).await.unwrap(), first);
        assert_eq!(fetch(&dir, &source, &none).await.unwrap(), first);
        let second = commit_spec(remote.path(), "a: 2\n");
        assert_eq!(
            fetch(&dir, &source, &none).await.unwrap(),
            first,
            "the tag did not move"
        );
        tag(&second);
        assert_eq!(fetch(&dir, &source, &none).await.unwrap(), second);
        assert!(git::is_checkout_of(&dir, &second));
    }

    #[test]
    fn only_the_exact_reference_listed_counts() {
        let listed = "1111\trefs/heads/x/refs/heads/main\n2222\trefs/heads/main\n";
        assert_eq!(listed_id(listed, "refs/heads/main"), Some("2222"));
        assert_eq!(listed_id(listed, "refs/heads/other"), None);
        assert_eq!(listed_id("", "refs/heads/main"), None);
    }

    #[test]
    fn every_line_of_the_key_body_is_a_secret() {
        let secrets = with_key(None).secrets();
        assert!(secrets.contains(&KEY.to_string()));
        assert!(secrets.contains(&"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ".to_string()));
        // The armour lines are the same in every key: not secrets.
        for armour in KEY.lines().filter(|l| l.starts_with("-----")) {
            assert!(!secrets.iter().any(|s| s == armour), "{armour}");
        }
    }
}
