//! Writing results to stdout and diagnostics to stderr, with colour only where the user wants it.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::spec::{Diagnostic, Diagnostics, Severity, SourceMap};

/// Colour on stderr unless NO_COLOR is set or stderr is not a terminal (CLICOLOR_FORCE forces it).
pub fn stderr_color() -> bool {
    if std::env::var_os("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// `-q`: the spec's notes are not shown, by any command (its errors and warnings are).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Set once, by `cli::run`, from `-q`.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Without the notes when `-q` was given.
fn unless_quiet(diags: Diagnostics) -> Diagnostics {
    let quiet = quiet();
    diags.retained(|d| !(quiet && d.severity == Severity::Note))
}

/// Every diagnostic with its source snippet: what `validate`, `plan` and `render` say of a spec,
/// and what every command says of a spec that does not validate (notes left out with `-q`).
pub fn print_diagnostics(diags: &Diagnostics, sources: &SourceMap) {
    let diags = unless_quiet(diags.clone());
    if diags.is_empty() {
        return;
    }
    let text = diags.report(sources).render(stderr_color());
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// The warnings and notes of a valid spec that `concerns` says concern a command's result, one
/// line each (file:line:column, severity, message, path, help), for commands whose own output
/// is the point (`status`, `explain`, `apply`, `watch`); empty when none does (or `-q` hides
/// them).
pub fn concerning(
    diags: &Diagnostics,
    sources: &SourceMap,
    concerns: impl Fn(&Diagnostic) -> bool,
) -> String {
    let diags = unless_quiet(diags.clone()).retained(concerns);
    diags.report(sources).to_string()
}

/// [`concerning`] on stderr.
pub fn print_concerning(
    diags: &Diagnostics,
    sources: &SourceMap,
    concerns: impl Fn(&Diagnostic) -> bool,
) {
    let text = concerning(diags, sources, concerns);
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// Writes to stdout; a closed pipe (`gkq render | head`) is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Canonical YAML for a JSON value (sorted keys, block style).
pub fn to_yaml(v: &serde_json::Value) -> anyhow::Result<String> {
    Ok(serde_saphyr::to_string(v)?)
}

/// Prints the pipeline's notices (`tracing` events with the target [`crate::ops::NOTICE`]) as
/// the plain lines a person reads: the message, `warning: ` before a warning's, its `hint`
/// indented on the next line. Every other event goes to the log lines.
pub struct NoticeLines;

#[derive(Default)]
struct NoticeFields {
    message: String,
    hint: Option<String>,
}

impl tracing::field::Visit for NoticeFields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "hint" => self.hint = Some(format!("{value:?}")),
            _ => {}
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for NoticeLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = NoticeFields::default();
        event.record(&mut fields);
        let level = *event.metadata().level();
        if level == tracing::Level::ERROR {
            write!(writer, "error: ")?;
        } else if level == tracing::Level::WARN {
            write!(writer, "warning: ")?;
        }
        write!(writer, "{}", fields.message)?;
        if let Some(hint) = fields.hint {
            write!(writer, "\n  {hint}")?;
        }
        writeln!(writer)
    }
}

/// Installs the process's `tracing` subscriber, writing to stderr. The commands: the pipeline's
/// notices as plain lines ([`NoticeLines`]), everything else as log lines filtered by
/// `RUST_LOG` (or `-v`: warn, info, debug, trace). The agent (`agent: true`), which runs
/// unattended: every event as a JSON line for a log collector, at info unless `RUST_LOG` or
/// `-v` says otherwise.
pub fn init_tracing(verbose: u8, agent: bool) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::prelude::*;
    let level = match (verbose, agent) {
        (0, true) => "info",
        // kube-rs logs every failed request at ERROR (`kube_client::client::builder`), and
        // gkq reports each failure itself, with context, when it matters: a plan's head start
        // reading a kubeconfig's unreachable server while an invalid spec loads must leave the
        // spec's diagnostics all the command says. `-v` or `RUST_LOG` shows them.
        (0, false) => "warn,kube_client=off",
        (1, _) => "info",
        (2, _) => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    if agent {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .json()
            .init();
        return;
    }
    let notices = tracing_subscriber::filter::Targets::new()
        .with_target(crate::ops::NOTICE, tracing::Level::INFO);
    let logs = match format!("{}=off", crate::ops::NOTICE).parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(stderr_color())
                .with_filter(logs),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .event_format(NoticeLines)
                .with_filter(notices),
        )
        .init();
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tracing_subscriber::prelude::*;

    use super::NoticeLines;
    use crate::ops::NOTICE;

    #[test]
    fn notices_are_printed_as_the_lines_a_person_reads() {
        let written = tempfile::NamedTempFile::new().unwrap();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(Mutex::new(written.reopen().unwrap()))
                .event_format(NoticeLines)
                .with_filter(
                    tracing_subscriber::filter::Targets::new()
                        .with_target(NOTICE, tracing::Level::INFO),
                ),
        );
        tracing::subscriber::with_default(subscriber, || {
            let places = "ConfigMap kube-system/gkq-revision-c";
            tracing::info!(target: NOTICE, %places, "Recorded the applied revision in {places}.");
            tracing::warn!(target: NOTICE, hint = "check the RBAC", "cannot write the ConfigMap");
            tracing::warn!("not a notice");
            tracing::debug!(target: NOTICE, "below the notices' level");
        });
        let text = std::fs::read_to_string(written.path()).unwrap();
        assert_eq!(
            text,
            "Recorded the applied revision in ConfigMap kube-system/gkq-revision-c.\n\
             warning: cannot write the ConfigMap\n  check the RBAC\n"
        );
    }
}
