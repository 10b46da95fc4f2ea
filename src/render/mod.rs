//! Rendering plans and apply progress for people and programs. The engine never prints; these
//! functions and sinks do, and only where the caller points them.
//!
//! Colour policy: renderers always write ANSI styles, and the caller writes them through
//! `anstream::stdout()` / `anstream::stderr()`, which strip them when the stream is not a terminal
//! or `NO_COLOR` is set (and honour `CLICOLOR` / `CLICOLOR_FORCE`) — one policy shared with clap.
//! For a string without colour, use [`strip`].
//!
//! - Plans: [`plan::write_text`] (Terraform-style), [`plan::to_json`] (the shape of
//!   `schemas/plan.schema.json`), [`plan::to_markdown`] (for pull-request comments).
//! - Apply: [`apply::TerminalSink`] (glyph lines, a spinner with elapsed time on long waits,
//!   hidden when stderr is not a terminal) and [`apply::JsonLinesSink`] (one JSON event a line).
//! - Status: [`status::to_text`] (jobs, node pools, queues), [`status::summary_lines`].

pub mod apply;
pub mod explain;
pub mod plan;
pub mod status;

use anstyle::{AnsiColor, Style};

use crate::plan::ActionKind;

/// `text` without ANSI escapes.
pub fn strip(text: &str) -> String {
    anstream::adapter::strip_str(text).to_string()
}

pub(crate) const BOLD: Style = Style::new().bold();
pub(crate) const DIM: Style = Style::new().dimmed();
pub(crate) const RED: Style = AnsiColor::Red.on_default();
pub(crate) const GREEN: Style = AnsiColor::Green.on_default();
pub(crate) const YELLOW: Style = AnsiColor::Yellow.on_default();
pub(crate) const CYAN: Style = AnsiColor::Cyan.on_default();
pub(crate) const MAGENTA: Style = AnsiColor::Magenta.on_default();

/// The colour of an action kind's glyph.
pub(crate) fn kind_style(kind: ActionKind) -> Style {
    match kind {
        ActionKind::Create => GREEN,
        ActionKind::Update => YELLOW,
        ActionKind::Replace => MAGENTA,
        ActionKind::Delete => RED,
        ActionKind::NoOp => DIM,
    }
}

/// `1m 05s`, `42s`, `850ms`.
pub fn format_elapsed(millis: u64) -> String {
    let seconds = millis / 1000;
    match seconds {
        0 => format!("{millis}ms"),
        1..=59 => format!("{seconds}s"),
        _ => format!("{}m {:02}s", seconds / 60, seconds % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_reads_naturally() {
        assert_eq!(format_elapsed(850), "850ms");
        assert_eq!(format_elapsed(42_000), "42s");
        assert_eq!(format_elapsed(65_000), "1m 05s");
    }
}
