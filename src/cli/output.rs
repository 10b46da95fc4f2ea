//! Writing results to stdout and diagnostics to stderr, with colour only where the user wants it.

use std::io::{IsTerminal, Write};

use crate::spec::{Diagnostics, SourceMap};

/// Colour on stderr unless NO_COLOR is set or stderr is not a terminal (CLICOLOR_FORCE forces it).
pub fn stderr_color() -> bool {
    if std::env::var_os("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

pub fn print_diagnostics(diags: &Diagnostics, sources: &SourceMap) {
    if diags.is_empty() {
        return;
    }
    let text = diags.report(sources).render(stderr_color());
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
