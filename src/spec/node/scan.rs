//! What the scanners of list entries (`json_lines`, `block_entries`) give the tree builder (the
//! entries they take, and each entry's values and spans as the YAML parser's events would give
//! them; see `entries`), and the limits and characters both take.

use granit_parser::ScalarStyle;

use super::Diagnostic;

/// How deep a scanner reads a value: far below the spec's own limit, which the YAML parser and
/// the builder enforce with their own messages.
pub(super) const MAX_NESTING: usize = 16;

/// The longest key a scanner takes, in bytes (with its quotes, if it has them): YAML's implicit
/// keys end at 1024 characters.
pub(super) const MAX_KEY_BYTES: usize = 1000;

/// A list entry read by a scanner: its value, from the text after `- ` to the end of its last
/// line.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    /// Where the value starts and ends (before the last line's break).
    pub start: usize,
    pub end: usize,
    /// The line of its `- `, from 1, and the byte where that line starts.
    pub line: usize,
    pub line_start: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    /// One line of JSON (`json_lines`).
    Json,
    /// Block YAML, on one line or more (`block_entries`).
    Block,
}

/// Where a token lies: its bytes, its line (from 1) and its column in characters from the
/// line's start (from 0), counted as the scanner goes so that no span searches the file's line
/// index (the builder checks each against it in debug builds).
#[derive(Debug, Clone, Copy)]
pub(super) struct Token {
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub column: usize,
}

/// What a scanned value is made of, in order, as the YAML parser's events are.
pub(super) trait Sink {
    /// Whether the sink takes the values (strings decoded), or only whether the text scans.
    const VALUES: bool = true;
    fn start_map(&mut self, at: Token) -> Result<(), Diagnostic>;
    fn start_seq(&mut self, at: Token) -> Result<(), Diagnostic>;
    /// The end of the innermost open map or list.
    fn end(&mut self, at: Token) -> Result<(), Diagnostic>;
    /// A scalar, as its `style` writes it: a number, `true`, `false` or `null` is a plain
    /// scalar's text.
    fn scalar(&mut self, value: &str, style: ScalarStyle, at: Token) -> Result<(), Diagnostic>;
}

/// Takes nothing: [`find`] only asks whether an entry scans.
pub(super) struct Nothing;

impl Sink for Nothing {
    const VALUES: bool = false;
    fn start_map(&mut self, _: Token) -> Result<(), Diagnostic> {
        Ok(())
    }
    fn start_seq(&mut self, _: Token) -> Result<(), Diagnostic> {
        Ok(())
    }
    fn end(&mut self, _: Token) -> Result<(), Diagnostic> {
        Ok(())
    }
    fn scalar(&mut self, _: &str, _: ScalarStyle, _: Token) -> Result<(), Diagnostic> {
        Ok(())
    }
}

/// Whether YAML allows `c`, a character past ASCII, unescaped in a scalar (its `c-printable`),
/// leaving out the characters some readers take as line breaks (NEL, the line and paragraph
/// separators) and the byte order mark.
pub(super) fn printable_in_yaml(c: char) -> bool {
    matches!(c, '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{FEFF}')
}
