//! Diagnostics: every problem found in a spec, each with its location, the offending value and a
//! hint. Validation collects them all instead of stopping at the first (Terraform's tfdiags).

use std::fmt;

use serde::Serialize;

use super::SensitiveValues;
use super::limits::MAX_DIAGNOSTICS;
use super::source::{SourceMap, Span};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// Something gkq does on the user's behalf that they should know about.
    Note,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// What is wrong, naming the offending value.
    pub message: String,
    /// Where: a span in a source file, when the problem has one.
    pub span: Option<Span>,
    /// The spec path of the offending value, e.g. `nodePools[1].tpuTopology`.
    pub path: Option<String>,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            message: message.into(),
            span: None,
            path: None,
            help: None,
        }
    }

    pub fn warning(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(message)
        }
    }

    pub fn at(mut self, span: Option<Span>) -> Self {
        if self.span.is_none() {
            self.span = span;
        }
        self
    }

    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn note(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Note,
            ..Self::error(message)
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// All problems found, in the order they were found; errors make a spec invalid, warnings do not.
///
/// At most [`MAX_DIAGNOSTICS`] are kept. Past that, problems are counted and one last
/// diagnostic says how many were left out (an error if any of them was), so that a machine-made
/// file with a million bad values neither takes quadratic time to collect them nor prints a
/// million source snippets.
///
/// Diagnostics quote the values they are about, and those may be secret: once told what is
/// sensitive ([`Diagnostics::hide`]), every diagnostic held, and every one added later (from
/// other `Diagnostics` too), shows [`super::REDACTED`] in its place. The spec loader tells them
/// as soon as it has resolved the variables, so whatever is said of the spec after that, by
/// loading or by validation, cannot show a sensitive value.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
    /// What was left out past the limit, when anything was.
    overflow: Option<Overflow>,
    /// Values no diagnostic may show.
    hidden: SensitiveValues,
}

#[derive(Debug, Clone)]
struct Overflow {
    omitted: usize,
    /// The diagnostic that reports them.
    summary: Diagnostic,
}

impl Diagnostics {
    /// From now on, shows none of `values`: in what is held already and in what is added.
    pub fn hide(&mut self, values: &SensitiveValues) {
        if values.is_empty() {
            return;
        }
        self.hidden = self.hidden.union(values);
        let items = std::mem::take(&mut self.items);
        for d in items {
            self.push(d);
        }
    }

    /// `d` as it may be shown.
    fn redacted(&self, mut d: Diagnostic) -> Diagnostic {
        if self.hidden.is_empty() {
            return d;
        }
        d.message = self.hidden.redact_quoting(&d.message);
        d.help = d.help.map(|h| self.hidden.redact_quoting(&h));
        d.path = d.path.map(|p| self.hidden.redact(&p));
        d
    }

    pub fn push(&mut self, d: Diagnostic) {
        let d = self.redacted(d);
        if self.items.len() < MAX_DIAGNOSTICS {
            if !self.items.contains(&d) {
                self.items.push(d);
            }
            return;
        }
        self.omit(1, d.is_error());
    }

    /// Counts `n` problems past the limit; `error`: one of them is an error.
    fn omit(&mut self, n: usize, error: bool) {
        let overflow = self.overflow.get_or_insert_with(|| Overflow {
            omitted: 0,
            summary: Diagnostic::warning(String::new()),
        });
        overflow.omitted += n;
        if error {
            overflow.summary.severity = Severity::Error;
        }
        overflow.summary.message = format!(
            "{} more problem{} not listed: gkq lists at most {MAX_DIAGNOSTICS} per run",
            overflow.omitted,
            if overflow.omitted == 1 { "" } else { "s" }
        );
        overflow.summary.help = Some("fix the ones listed and run again to see the rest".into());
    }

    /// How many problems were found past [`MAX_DIAGNOSTICS`] and not listed.
    pub fn omitted(&self) -> usize {
        self.overflow.as_ref().map_or(0, |o| o.omitted)
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.hide(&other.hidden);
        if let Some(o) = other.overflow {
            self.omit(o.omitted, o.summary.is_error());
        }
        for d in other.items {
            self.push(d);
        }
    }

    /// Without the problems found at or under any of `paths` (values that could not be decoded,
    /// so what validation saw there was a stand-in, not what the user wrote).
    pub fn without_paths_under(mut self, paths: &[String]) -> Self {
        let under = |path: &str, prefix: &str| {
            path.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        self.items.retain(|d| {
            d.path
                .as_deref()
                .is_none_or(|p| !paths.iter().any(|prefix| under(p, prefix)))
        });
        self
    }

    /// Only the diagnostics `keep` accepts, and every error (a command shows each of a spec's
    /// errors; which of its warnings and notes concern it is the command's to say). The count of
    /// those left out past the limit stays.
    pub fn retained(mut self, keep: impl Fn(&Diagnostic) -> bool) -> Self {
        self.items.retain(|d| d.is_error() || keep(d));
        self
    }

    pub fn has_errors(&self) -> bool {
        self.iter().any(Diagnostic::is_error)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Every diagnostic kept, then the one counting those left out (if any).
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items
            .iter()
            .chain(self.overflow.as_ref().map(|o| &o.summary))
    }

    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.iter().filter(|d| d.is_error())
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.iter().filter(|d| d.severity == Severity::Warning)
    }

    pub fn len(&self) -> usize {
        self.items.len() + usize::from(self.overflow.is_some())
    }

    /// Sorted by file and position so output is stable and reads top to bottom.
    pub fn sorted(mut self) -> Self {
        self.items.sort_by_key(|d| {
            (
                d.span.map(|s| (s.file, s.start)).unwrap_or_default(),
                d.severity,
            )
        });
        self
    }

    /// The diagnostics with their source locations resolved, ready to print or serialise.
    pub fn report<'a>(&'a self, sources: &'a SourceMap) -> Report<'a> {
        Report {
            diagnostics: self,
            sources,
        }
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(mut self) -> Self::IntoIter {
        self.items.extend(self.overflow.map(|o| o.summary));
        self.items.into_iter()
    }
}

/// Diagnostics bound to their sources.
pub struct Report<'a> {
    diagnostics: &'a Diagnostics,
    sources: &'a SourceMap,
}

/// One diagnostic as `--output json` prints it.
#[derive(Debug, Serialize)]
pub struct DiagnosticJson {
    pub severity: Severity,
    pub message: String,
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub path: Option<String>,
    pub help: Option<String>,
}

impl Report<'_> {
    pub fn to_json(&self) -> Vec<DiagnosticJson> {
        self.diagnostics
            .iter()
            .map(|d| DiagnosticJson {
                severity: d.severity,
                message: d.message.clone(),
                file: d
                    .span
                    .map(|s| self.sources.path(s.file).display().to_string()),
                line: d.span.map(|s| s.line),
                column: d.span.map(|s| s.column),
                path: d.path.clone(),
                help: d.help.clone(),
            })
            .collect()
    }

    /// Renders each diagnostic with a source snippet (miette's graphical handler), colours
    /// following the caller's choice.
    pub fn render(&self, color: bool) -> String {
        use miette::{GraphicalReportHandler, GraphicalTheme};
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme).with_context_lines(CONTEXT_LINES);
        let mut out = String::new();
        for d in self.diagnostics.iter() {
            let m = MietteDiagnostic::new(d, self.sources);
            if d.severity == Severity::Note {
                out.push_str(&m.plain());
                out.push('\n');
                continue;
            }
            if handler.render_report(&mut out, &m).is_err() {
                out.push_str(&m.plain());
            }
            out.push('\n');
        }
        out
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in self.diagnostics.iter() {
            writeln!(f, "{}", MietteDiagnostic::new(d, self.sources).plain())?;
        }
        Ok(())
    }
}

/// Lines shown before and after the one a diagnostic points at.
const CONTEXT_LINES: usize = 2;

/// Longest source line (in bytes) shown in a snippet.
const MAX_SNIPPET_LINE: usize = 1000;

struct MietteDiagnostic<'a> {
    diag: &'a Diagnostic,
    sources: &'a SourceMap,
    source: Option<miette::NamedSource<std::sync::Arc<str>>>,
    heading: String,
}

impl<'a> MietteDiagnostic<'a> {
    fn new(diag: &'a Diagnostic, sources: &'a SourceMap) -> Self {
        // The snippet shares the file's text; a line too long to show (a machine-made file on
        // one line) is left out, the location still says where.
        let source = diag
            .span
            .filter(|s| sources.longest_line_near(*s, CONTEXT_LINES) <= MAX_SNIPPET_LINE)
            .and_then(|s| {
                sources
                    .get(s.file)
                    .map(|f| miette::NamedSource::new(f.path.display().to_string(), f.text.clone()))
            });
        let location = diag
            .span
            .map(|s| format!("{}: ", sources.location(s)))
            .unwrap_or_default();
        let heading = format!("{location}{}", diag.message);
        Self {
            diag,
            sources,
            source,
            heading,
        }
    }

    /// One line per diagnostic, for logs and plain output: `file:line:col: severity: message`.
    fn plain(&self) -> String {
        let sev = match self.diag.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        let location = self
            .diag
            .span
            .map(|s| format!("{}: ", self.sources.location(s)))
            .unwrap_or_default();
        let path = self
            .diag
            .path
            .as_ref()
            .map(|p| format!(" (at {p})"))
            .unwrap_or_default();
        let help = self
            .diag
            .help
            .as_ref()
            .map(|h| format!("\n  help: {h}"))
            .unwrap_or_default();
        format!("{location}{sev}: {}{path}{help}", self.diag.message)
    }
}

impl fmt::Debug for MietteDiagnostic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.heading)
    }
}

impl fmt::Display for MietteDiagnostic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.heading)
    }
}

impl std::error::Error for MietteDiagnostic<'_> {}

impl miette::Diagnostic for MietteDiagnostic<'_> {
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diag.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
            Severity::Note => miette::Severity::Advice,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diag
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let span = self.diag.span?;
        self.source.as_ref()?;
        let label = self.diag.path.clone().unwrap_or_else(|| "here".into());
        Some(Box::new(std::iter::once(miette::LabeledSpan::new(
            Some(label),
            span.start,
            span.end.saturating_sub(span.start).max(1),
        ))))
    }
}
