//! What a GkqStack says about its source, checked before anything runs with it. A stack is
//! written by whoever may create one, so its `url`, `branch`, `tag`, `path` and `env` are
//! untrusted text: each must have one of the few shapes gkq fetches, and nothing else may reach
//! `git` at all. A [`Source`] can only be made here, so [`super::source::fetch`] never sees
//! an unchecked value.
//!
//! The forms accepted are git's own URL syntaxes (git-fetch(1), "GIT URLS"): `https://`,
//! `ssh://` and scp-like `user@host:path`; `file://` only where the agent's operator allows it
//! (`--target local`, `--allow-file-urls`). Everything else (a leading `-` that git would read as
//! an option, git's `<transport>::<address>` remote helpers such as `ext::` and `fd::`, `git://`,
//! `http://`, plain paths, control characters or white space) is refused. `fetch` also passes
//! `--` before the URL and limits git's transports with `GIT_ALLOW_PROTOCOL`, so a form this
//! module missed still could not run a command.

use super::crd::GkqStack;

/// The ref a stack follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitRef {
    Branch(String),
    Tag(String),
}

/// A checked source: the only input [`super::source::fetch`] takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub url: String,
    pub reference: GitRef,
    /// Whether this source is a `file://` URL (then git's `file` transport is allowed for it).
    pub file: bool,
    /// The user every Kubernetes request of the stack impersonates
    /// (`system:serviceaccount:NAMESPACE:NAME`), see [`identity`].
    pub acting_as: Option<String>,
    /// The stack's own `spec.submitWait`, checked ([`check_submit_wait`]); the agent's
    /// `--submit-wait` applies when it is `None`.
    pub submit_wait: Option<std::time::Duration>,
}

/// Why a stack's source is refused; `field` names the stack's field (`spec.url`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}; nothing was fetched. {help}")]
pub struct InvalidSource {
    pub field: &'static str,
    pub problem: String,
    pub help: String,
}

const URL_HELP: &str = "Use https://HOST/PATH, ssh://[USER@]HOST[:PORT]/PATH or USER@HOST:PATH";

/// The longest URL, ref or path accepted: far above any real one, and it bounds what a stack can
/// make the agent carry into messages.
const MAX_LEN: usize = 2048;

/// Checks a stack's `url`, `branch`/`tag`, `path`, `env` and ServiceAccount. `allow_file`
/// permits `file://`; `default_service_account` is the agent's `--default-service-account`.
pub fn check(
    stack: &GkqStack,
    allow_file: bool,
    default_service_account: Option<&str>,
) -> Result<Source, InvalidSource> {
    let spec = &stack.spec;
    let file = check_url(&spec.url, allow_file)?;
    let reference = match (&spec.tag, &spec.branch) {
        (Some(tag), _) => GitRef::Tag(check_ref("spec.tag", tag)?),
        (None, Some(branch)) => GitRef::Branch(check_ref("spec.branch", branch)?),
        (None, None) => GitRef::Branch("main".to_string()),
    };
    check_path(&spec.path)?;
    if let Some(env) = &spec.env {
        check_env(env)?;
    }
    let submit_wait = spec
        .submit_wait
        .as_deref()
        .map(check_submit_wait)
        .transpose()?;
    Ok(Source {
        url: spec.url.clone(),
        reference,
        file,
        acting_as: identity(stack, default_service_account)?,
        submit_wait,
    })
}

/// The most a stack may wait for Kueue's decision on each job it submits: a job Kueue has not
/// decided on in ten minutes waits for something no waiting fixes (a stopped queue, a missing
/// LocalQueue), and every wait holds the stack's apply and the cluster's Lease.
pub const MAX_SUBMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// `spec.submitWait`: a duration of gkq's one grammar (`vocab::duration`), at most
/// [`MAX_SUBMIT_WAIT`]. The CRD's schema checks the grammar before a stack is stored; a stack
/// stored before the field had a schema is checked here all the same.
fn check_submit_wait(text: &str) -> Result<std::time::Duration, InvalidSource> {
    const FIELD: &str = "spec.submitWait";
    let help = "Give a duration of at most 10m, such as `30s` or `2m` (`0s` does not wait), or remove it to use the agent's --submit-wait";
    plain_text(FIELD, text, help)?;
    match crate::vocab::duration::parse(text) {
        Ok(wait) if wait <= MAX_SUBMIT_WAIT => Ok(wait),
        Ok(_) => Err(invalid(
            FIELD,
            format!(
                "{} is longer than the most a stack may wait, 10m",
                quoted(text)
            ),
            help,
        )),
        Err(_) => Err(invalid(
            FIELD,
            format!("{} is not a duration", quoted(text)),
            help,
        )),
    }
}

fn invalid(field: &'static str, problem: impl Into<String>, help: &str) -> InvalidSource {
    InvalidSource {
        field,
        problem: problem.into(),
        help: help.to_string(),
    }
}

/// A value as a message may quote it: control characters escaped and length bounded, so a
/// refusal cannot forge lines in a log or an Event.
fn quoted(value: &str) -> String {
    let mut text: String = value.chars().take(120).collect();
    if value.chars().count() > 120 {
        text.push('…');
    }
    format!("{text:?}")
}

fn plain_text(field: &'static str, value: &str, help: &str) -> Result<(), InvalidSource> {
    if value.is_empty() {
        return Err(invalid(field, "is empty", help));
    }
    if value.len() > MAX_LEN {
        return Err(invalid(
            field,
            format!("is {} bytes long (at most {MAX_LEN})", value.len()),
            help,
        ));
    }
    if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid(
            field,
            format!("{} holds a control character or white space", quoted(value)),
            help,
        ));
    }
    if value.starts_with('-') {
        return Err(invalid(
            field,
            format!(
                "{} starts with `-`, which git would read as an option",
                quoted(value)
            ),
            help,
        ));
    }
    Ok(())
}

/// Checks `url`; returns whether it is a `file://` URL.
fn check_url(url: &str, allow_file: bool) -> Result<bool, InvalidSource> {
    const FIELD: &str = "spec.url";
    plain_text(FIELD, url, URL_HELP)?;
    let refused = |problem: String| Err(invalid(FIELD, problem, URL_HELP));
    if let Some(rest) = url.strip_prefix("file://") {
        if !allow_file {
            return refused(format!(
                "{} is a file:// URL, which this agent does not fetch (it would read its own disk)",
                quoted(url)
            ));
        }
        if !rest.starts_with('/') {
            return refused(format!(
                "{} is not an absolute file:///PATH URL",
                quoted(url)
            ));
        }
        return Ok(true);
    }
    if url.starts_with("https://") || url.starts_with("ssh://") {
        let parsed = match reqwest::Url::parse(url) {
            Ok(parsed) => parsed,
            Err(e) => return refused(format!("{} is not a URL: {e}", quoted(url))),
        };
        let host = parsed.host_str().unwrap_or_default();
        if host.is_empty() {
            return refused(format!("{} names no host", quoted(url)));
        }
        // ssh reads a host or user that starts with `-` as an option (CVE-2017-1000117).
        if host.starts_with('-') || parsed.username().starts_with('-') {
            return refused(format!(
                "{} has a host or user that starts with `-`",
                quoted(url)
            ));
        }
        if parsed.path().trim_start_matches('/').is_empty() {
            return refused(format!("{} names no repository path", quoted(url)));
        }
        return Ok(false);
    }
    if let Some((user, rest)) = url.split_once('@')
        && let Some((host, path)) = scp_host_and_path(rest)
        && scp_user(user)
        && scp_host(host)
        && !path.is_empty()
        && !path.starts_with('-')
    {
        return Ok(false);
    }
    refused(format!(
        "{} is not an https://, ssh:// or USER@HOST:PATH repository{}",
        quoted(url),
        if allow_file { " (or file:///PATH)" } else { "" }
    ))
}

/// `host:path`, where the host may be a bracketed IPv6 address holding `:` itself.
fn scp_host_and_path(rest: &str) -> Option<(&str, &str)> {
    if rest.starts_with('[') {
        let end = rest.find("]:")?;
        return Some((&rest[..=end], &rest[end + 2..]));
    }
    rest.split_once(':')
}

fn scp_user(user: &str) -> bool {
    !user.is_empty()
        && !user.starts_with('-')
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A host name or `[IPv6]` address; git reads `host:path` only when no `/` comes before `:`.
fn scp_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && !host.starts_with('-')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
}

/// A branch or tag name: what `git check-ref-format` accepts under `refs/heads/`, and no option.
fn check_ref(field: &'static str, name: &str) -> Result<String, InvalidSource> {
    let help = "Name a branch or tag as `git check-ref-format --branch` accepts it, such as `main` or `v1.2.0`";
    plain_text(field, name, help)?;
    // git2 applies git's own rules (no `..`, `~^:?*[\`, `@{`, `.lock`, leading `.` per part).
    if !git2::Reference::is_valid_name(&format!("refs/heads/{name}")) {
        return Err(invalid(
            field,
            format!("{} is not a valid git ref name", quoted(name)),
            help,
        ));
    }
    Ok(name.to_string())
}

/// The spec's path in the repository: relative, and never out of the checkout.
fn check_path(path: &str) -> Result<(), InvalidSource> {
    const FIELD: &str = "spec.path";
    let help = "Give the spec's file or directory relative to the repository's root, such as `.` or `infra/gkq.yaml`";
    plain_text(FIELD, path, help)?;
    let escapes = std::path::Path::new(path).components().any(|c| {
        !matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    if escapes || path.contains('\\') {
        return Err(invalid(
            FIELD,
            format!(
                "{} leaves the repository (absolute, or with `..`)",
                quoted(path)
            ),
            help,
        ));
    }
    Ok(())
}

/// An overlay name; the spec loader refuses paths too, but a stack's value is refused before
/// anything is fetched.
fn check_env(env: &str) -> Result<(), InvalidSource> {
    const FIELD: &str = "spec.env";
    let help =
        "Name an overlay in environments/ by its file name without the extension, such as `prod`";
    plain_text(FIELD, env, help)?;
    let plain = !env.starts_with('.')
        && env
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !plain {
        return Err(invalid(
            FIELD,
            format!("{} is not an environment name", quoted(env)),
            help,
        ));
    }
    Ok(())
}

/// The Kubernetes user a stack acts as: its `serviceAccountName`, else the agent's default,
/// in the stack's own namespace (never another: a stack cannot borrow another namespace's
/// identity); `None` when neither is set (a single-team install: the agent's own rights). An
/// invalid name is an error, never a fall-back to the agent's rights.
pub fn identity(
    stack: &GkqStack,
    default_service_account: Option<&str>,
) -> Result<Option<String>, InvalidSource> {
    let Some(name) = stack
        .spec
        .service_account_name
        .as_deref()
        .or(default_service_account)
    else {
        return Ok(None);
    };
    check_service_account(name)?;
    let namespace = stack.metadata.namespace.as_deref().unwrap_or("default");
    Ok(Some(format!("system:serviceaccount:{namespace}:{name}")))
}

/// A ServiceAccount's name: a DNS-1123 subdomain (what the API server accepts).
fn check_service_account(name: &str) -> Result<(), InvalidSource> {
    const FIELD: &str = "spec.serviceAccountName";
    let help = "Name a ServiceAccount in the stack's namespace, such as `gkq-stack`";
    plain_text(FIELD, name, help)?;
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(invalid(
            FIELD,
            format!("{} is not a ServiceAccount name", quoted(name)),
            help,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::crd::GkqStackSpec;

    fn spec(url: &str) -> GkqStackSpec {
        serde_json::from_value(serde_json::json!({ "url": url })).unwrap()
    }

    fn check(spec: &GkqStackSpec, allow_file: bool) -> Result<Source, InvalidSource> {
        let mut stack = GkqStack::new("s", spec.clone());
        stack.metadata.namespace = Some("team-a".into());
        super::check(&stack, allow_file, None)
    }

    fn url_ok(url: &str, allow_file: bool) -> bool {
        check(&spec(url), allow_file).is_ok()
    }

    /// `spec.submitWait`: unset leaves the agent's flag in force; a duration up to 10m is the
    /// stack's own; longer, or not a duration, refuses the stack with the field named.
    #[test]
    fn a_stacks_submit_wait_is_a_bounded_duration() {
        let with = |wait: &str| {
            let mut spec = spec("https://github.com/org/repo.git");
            spec.submit_wait = Some(wait.to_string());
            check(&spec, false)
        };
        let unset = check(&spec("https://github.com/org/repo.git"), false).unwrap();
        assert_eq!(unset.submit_wait, None);
        assert_eq!(
            with("2m").unwrap().submit_wait,
            Some(std::time::Duration::from_secs(120))
        );
        assert_eq!(
            with("0s").unwrap().submit_wait,
            Some(std::time::Duration::ZERO)
        );
        assert_eq!(with("10m").unwrap().submit_wait, Some(MAX_SUBMIT_WAIT));
        for (wait, problem) in [
            ("11m", "is longer than the most a stack may wait, 10m"),
            ("1d", "is longer than the most a stack may wait, 10m"),
            ("soon", "is not a duration"),
        ] {
            let refused = with(wait).unwrap_err();
            assert_eq!(refused.field, "spec.submitWait", "{wait}");
            assert!(refused.to_string().contains(problem), "{wait}: {refused}");
        }
    }

    #[test]
    fn the_three_remote_forms_are_accepted() {
        for url in [
            "https://github.com/org/repo.git",
            "https://user@git.example.com:8443/org/repo",
            "ssh://git@github.com/org/repo.git",
            "ssh://git@[::1]:2222/srv/repo",
            "git@github.com:org/repo.git",
            "git@[::1]:repo",
        ] {
            assert!(url_ok(url, false), "{url}");
        }
    }

    #[test]
    fn options_helpers_other_transports_and_control_characters_are_refused() {
        for url in [
            "--upload-pack=touch /tmp/x; false",
            "-u touch",
            "ext::sh -c touch% /tmp/x",
            "ext::sh",
            "fd::17",
            "fd::0,1/repo",
            "git://example.com/repo",
            "http://example.com/repo",
            "ftp://example.com/repo",
            "/srv/repo",
            "repo",
            "file:///srv/repo",
            "https://example.com/repo\n--upload-pack=x",
            "https://example.com/re po",
            "https://example.com/repo\u{7}",
            "ssh://-oProxyCommand=touch%20x/repo",
            "ssh://-oProxyCommand=x@host/repo",
            "-oProxyCommand=x@host:repo",
            "git@-oProxyCommand=x:repo",
            "git@host:-repo",
            "git@host:",
            "https://",
            "https:///repo",
            "https://host",
            "transport::https://example.com/repo",
            "",
        ] {
            let result = check(&spec(url), false);
            assert!(result.is_err(), "{url:?} was accepted");
            let message = result.unwrap_err().to_string();
            assert!(message.starts_with("spec.url "), "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
    }

    #[test]
    fn file_urls_need_the_operators_word() {
        assert!(!url_ok("file:///srv/repo", false));
        assert!(url_ok("file:///srv/repo", true));
        assert!(!url_ok("file://relative/repo", true));
        assert!(!url_ok("file:///srv/--upload-pack=x\n", true));
        let refused = check(&spec("file:///srv/repo"), false)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("does not fetch"), "{refused}");
    }

    #[test]
    fn refs_paths_and_envs_are_checked() {
        let with = |field: &str, value: &str| {
            let mut spec = spec("https://h/r");
            let value = serde_json::Value::String(value.to_string());
            match field {
                "branch" => spec.branch = value.as_str().map(str::to_string),
                "tag" => spec.tag = value.as_str().map(str::to_string),
                "path" => spec.path = value.as_str().unwrap().to_string(),
                _ => spec.env = value.as_str().map(str::to_string),
            }
            check(&spec, false)
        };
        for (field, value) in [
            ("branch", "--upload-pack=touch x"),
            ("branch", "main:refs/heads/x"),
            ("branch", "a..b"),
            ("branch", "x\ny"),
            ("branch", "x y"),
            ("tag", "-v"),
            ("tag", "v1^{}"),
            ("path", "../other"),
            ("path", "/etc"),
            ("path", "infra/../../x"),
            ("env", "../../etc/passwd"),
            ("env", "-x"),
        ] {
            let result = with(field, value);
            assert!(result.is_err(), "{field} {value:?} was accepted");
            assert!(
                result
                    .unwrap_err()
                    .to_string()
                    .starts_with(&format!("spec.{field} "))
            );
        }
        for (field, value) in [
            ("branch", "release/1.x"),
            ("tag", "v1.2.0"),
            ("path", "infra/gkq.yaml"),
            ("path", "."),
            ("env", "prod"),
        ] {
            assert!(with(field, value).is_ok(), "{field} {value}");
        }
        assert_eq!(
            check(&spec("https://h/r"), false).unwrap().reference,
            GitRef::Branch("main".into())
        );
    }
}
