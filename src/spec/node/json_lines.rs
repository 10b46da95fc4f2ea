//! Block-list entries written as one line of JSON (`  - {"apiVersion": "v1", ...}`), as tools
//! that generate a large spec write its manifests, read by a JSON scanner instead of the YAML
//! parser, which spends about 400 ns on each value.
//!
//! One line of JSON is YAML: a flow collection of double-quoted strings and plain scalars. The
//! scanner gives the tree builder the values and spans the YAML parser would give for the same
//! text, and it takes only the JSON whose YAML reading it is sure of. A line with anything else
//! (a tab, whitespace before a `:` or `,`, a character YAML does not allow unescaped, a
//! surrogate escape, deep nesting, a key longer than YAML's implicit keys may be, text after the
//! value) is left to the YAML parser. Whether a line that looks like an entry is one (and not,
//! say, a line of a block scalar) only the YAML parser can say: the caller asks it (see
//! `YamlBuilder::read_json_entry`). The YAML rules this rests on: `docs/yaml.md 1`.

use super::{Diagnostic, limits};

/// How deep a line's JSON may nest: far below the spec's own limit, which the YAML parser and
/// the builder enforce with their own messages.
const MAX_NESTING: usize = 16;

/// The longest key, in bytes with its quotes, taken here: YAML's implicit keys end at 1024
/// characters.
const MAX_KEY_BYTES: usize = 1000;

/// A line whose list entry is one JSON object or array.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    /// Where the JSON value starts (its `{` or `[`) and ends (after its `}` or `]`).
    pub start: usize,
    pub end: usize,
    /// The line, from 1, and the byte where it starts.
    pub line: usize,
    pub line_start: usize,
}

/// Where a token lies: its bytes, and its column in characters from the line's start (from 0),
/// counted as the scanner goes so that no span searches the file's line index (the builder
/// checks each against it in debug builds).
#[derive(Debug, Clone, Copy)]
pub(super) struct Token {
    pub start: usize,
    pub end: usize,
    pub column: usize,
}

/// What a scanned value is made of, in order, as the YAML parser's events are.
pub(super) trait Sink {
    /// Whether the sink takes the values (strings decoded), or only whether the JSON scans.
    const VALUES: bool = true;
    fn start_map(&mut self, at: Token) -> Result<(), Diagnostic>;
    fn start_seq(&mut self, at: Token) -> Result<(), Diagnostic>;
    /// The end of the innermost open map or list.
    fn end(&mut self, at: Token) -> Result<(), Diagnostic>;
    /// A scalar: a double-quoted string (`quoted`), or a number, `true`, `false` or `null` as
    /// written.
    fn scalar(&mut self, value: &str, quoted: bool, at: Token) -> Result<(), Diagnostic>;
}

/// The lines of `text` whose list entry is one JSON object or array that this scanner takes;
/// none when there are more than the spec may have values (each entry is one at least): the
/// YAML parser then refuses the file at the limit, before these would cost more than its tree.
pub(super) fn entries(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut line_start = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if let Some(entry) = entry_of(text, line_start, line, index + 1) {
            if entries.len() == limits::MAX_VALUES {
                return Vec::new();
            }
            entries.push(entry);
        }
        line_start += line.len();
    }
    entries
}

/// `line`'s entry, when it is `<spaces>- <spaces><JSON><spaces>` and the scanner takes the JSON.
fn entry_of(text: &str, line_start: usize, line: &str, number: usize) -> Option<Entry> {
    let rest = line.trim_start_matches(' ').strip_prefix("- ")?;
    let value = rest.trim_start_matches(' ');
    if !value.starts_with(['{', '[']) {
        return None;
    }
    let start = line_start + (line.len() - value.len());
    let mut entry = Entry {
        start,
        end: start,
        line: number,
        line_start,
    };
    entry.end = scan(text, &entry, &mut Nothing).ok()??;
    // Only spaces, then the line's break (if it has one), after the value.
    let after = &text[entry.end..line_start + line.len()];
    after
        .trim_end_matches('\n')
        .bytes()
        .all(|b| b == b' ')
        .then_some(entry)
}

/// Gives `sink` the values of `entry` (found by [`entries`] in the same text).
pub(super) fn replay(text: &str, entry: &Entry, sink: &mut impl Sink) -> Result<(), Diagnostic> {
    match scan(text, entry, sink)? {
        Some(end) if end == entry.end => Ok(()),
        // `entries` found this JSON in this text: it scans the same way again.
        _ => Err(Diagnostic::error(
            "a line of JSON read differently the second time",
        )),
    }
}

/// Scans the JSON value at `entry.start`, giving `sink` its parts: where it ends, or `None` when
/// the scanner does not take it (the sink may have been given part of it).
fn scan(text: &str, entry: &Entry, sink: &mut impl Sink) -> Result<Option<usize>, Diagnostic> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        pos: entry.start,
        counted: entry.line_start,
        column: 0,
        scratch: String::new(),
    };
    Ok(scanner.value(sink, 0)?.then_some(scanner.pos))
}

/// Takes nothing: [`entries`] only asks whether a line scans.
struct Nothing;

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
    fn scalar(&mut self, _: &str, _: bool, _: Token) -> Result<(), Diagnostic> {
        Ok(())
    }
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// The column of byte `counted` (columns are counted forward from there).
    counted: usize,
    column: usize,
    /// A decoded string with escapes.
    scratch: String,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// The column of byte `at` (not before the last one asked for): its characters from the
    /// line's start.
    fn column_of(&mut self, at: usize) -> usize {
        let counted = &self.bytes[self.counted..at];
        self.column += counted.iter().filter(|b| (**b & 0xC0) != 0x80).count();
        self.counted = at;
        self.column
    }

    fn token(&mut self, start: usize, end: usize) -> Token {
        Token {
            start,
            end,
            column: self.column_of(start),
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// One value: `Ok(false)` when the scanner does not take it.
    fn value(&mut self, sink: &mut impl Sink, depth: usize) -> Result<bool, Diagnostic> {
        match self.peek() {
            Some(b'{') => self.collection(sink, depth + 1, b'}'),
            Some(b'[') => self.collection(sink, depth + 1, b']'),
            Some(b'"') => self.string(sink, false),
            Some(b'-' | b'0'..=b'9') => self.number(sink),
            Some(b't') => self.word(sink, "true"),
            Some(b'f') => self.word(sink, "false"),
            Some(b'n') => self.word(sink, "null"),
            _ => Ok(false),
        }
    }

    /// A map (`close` is `}`) or a list (`]`) at `pos`, and everything in it.
    fn collection(
        &mut self,
        sink: &mut impl Sink,
        depth: usize,
        close: u8,
    ) -> Result<bool, Diagnostic> {
        if depth > MAX_NESTING {
            return Ok(false);
        }
        let at = self.token(self.pos, self.pos + 1);
        let map = close == b'}';
        if map {
            sink.start_map(at)?;
        } else {
            sink.start_seq(at)?;
        }
        self.pos += 1;
        self.skip_spaces();
        if self.peek() != Some(close) {
            loop {
                let item = if map {
                    self.map_entry(sink, depth)?
                } else {
                    self.value(sink, depth)?
                };
                if !item {
                    return Ok(false);
                }
                match self.after_item(close) {
                    Some(true) => continue,
                    Some(false) => break,
                    None => return Ok(false),
                }
            }
        }
        let at = self.token(self.pos, self.pos + 1);
        sink.end(at)?;
        self.pos += 1;
        Ok(true)
    }

    /// A map's key, its colon and its value.
    fn map_entry(&mut self, sink: &mut impl Sink, depth: usize) -> Result<bool, Diagnostic> {
        if self.peek() != Some(b'"') || !self.string(sink, true)? {
            return Ok(false);
        }
        // Whitespace between a key and its colon is left to the YAML parser.
        if self.peek() != Some(b':') {
            return Ok(false);
        }
        self.pos += 1;
        self.skip_spaces();
        self.value(sink, depth)
    }

    /// After an item: `Some(true)` past a comma (and the spaces after it), `Some(false)` at the
    /// `close`, which may follow spaces; `None` for anything else.
    fn after_item(&mut self, close: u8) -> Option<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.skip_spaces();
                Some(true)
            }
            Some(b' ') => {
                self.skip_spaces();
                (self.peek() == Some(close)).then_some(false)
            }
            Some(b) if b == close => Some(false),
            _ => None,
        }
    }

    fn word(&mut self, sink: &mut impl Sink, word: &str) -> Result<bool, Diagnostic> {
        let start = self.pos;
        if !self.bytes[start..].starts_with(word.as_bytes()) {
            return Ok(false);
        }
        self.pos += word.len();
        if !self.at_value_end() {
            return Ok(false);
        }
        let at = self.token(start, self.pos);
        sink.scalar(word, false, at)?;
        Ok(true)
    }

    /// Whether a plain scalar ends here, as it does in JSON and in YAML's flow context alike.
    fn at_value_end(&self) -> bool {
        matches!(self.peek(), None | Some(b',' | b']' | b'}' | b' ' | b'\n'))
    }

    /// A number as JSON writes it: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self, sink: &mut impl Sink) -> Result<bool, Diagnostic> {
        let start = self.pos;
        let digits = |s: &mut Self| {
            let from = s.pos;
            while s.peek().is_some_and(|b| b.is_ascii_digit()) {
                s.pos += 1;
            }
            s.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let leading_zero = self.peek() == Some(b'0');
        let integer = digits(self);
        if integer == 0 || (leading_zero && integer > 1) {
            return Ok(false);
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Ok(false);
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Ok(false);
            }
        }
        if !self.at_value_end() {
            return Ok(false);
        }
        let at = self.token(start, self.pos);
        sink.scalar(&self.text[start..self.pos], false, at)?;
        Ok(true)
    }

    /// A double-quoted string; a `key` may not be longer than [`MAX_KEY_BYTES`].
    fn string<S: Sink>(&mut self, sink: &mut S, key: bool) -> Result<bool, Diagnostic> {
        let start = self.pos;
        self.pos += 1;
        self.scratch.clear();
        let mut plain_from = self.pos;
        loop {
            // Printable ASCII other than a quote or a backslash, the most of a string, at once.
            self.pos += self.bytes[self.pos..]
                .iter()
                .position(|&b| !(0x20..0x7F).contains(&b) || b == b'"' || b == b'\\')
                .unwrap_or(self.bytes.len() - self.pos);
            let Some(b) = self.peek() else {
                return Ok(false);
            };
            match b {
                b'"' => break,
                b'\\' => {
                    let escaped_from = self.pos;
                    let Some(c) = self.escape() else {
                        return Ok(false);
                    };
                    if S::VALUES {
                        self.scratch.push_str(&self.text[plain_from..escaped_from]);
                        self.scratch.push(c);
                    }
                    plain_from = self.pos;
                }
                // JSON escapes control characters, and YAML does not allow DEL unescaped.
                0..0x20 | 0x7F => return Ok(false),
                0x80.. => {
                    let c = self.text[self.pos..].chars().next().unwrap_or('\0');
                    if !printable_in_yaml(c) {
                        return Ok(false);
                    }
                    self.pos += c.len_utf8();
                }
                _ => self.pos += 1,
            }
        }
        let value_end = self.pos;
        self.pos += 1;
        if key && self.pos - start > MAX_KEY_BYTES {
            return Ok(false);
        }
        let at = self.token(start, self.pos);
        if self.scratch.is_empty() || !S::VALUES {
            sink.scalar(&self.text[start + 1..value_end], true, at)?;
        } else {
            let mut value = std::mem::take(&mut self.scratch);
            value.push_str(&self.text[plain_from..value_end]);
            sink.scalar(&value, true, at)?;
            self.scratch = value;
        }
        Ok(true)
    }

    /// The character a `\` escape at `pos` stands for, past it: JSON's escapes, each of which
    /// YAML's double-quoted scalars read alike; `None` for any other (and for a surrogate).
    fn escape(&mut self) -> Option<char> {
        let letter = *self.bytes.get(self.pos + 1)?;
        self.pos += 2;
        let c = match letter {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hex = self.text.get(self.pos..self.pos + 4)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                self.pos += 4;
                char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
            }
            _ => return None,
        };
        Some(c)
    }
}

/// Whether YAML allows `c` unescaped in a double-quoted scalar (its `c-printable`), leaving out
/// the characters some readers take as line breaks (NEL, the line and paragraph separators).
fn printable_in_yaml(c: char) -> bool {
    matches!(c, '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of more entries than the spec may have values yields none (the YAML parser then
    /// refuses it at the limit), one at the limit all of them.
    #[test]
    fn entries_past_the_value_limit_are_left_to_the_yaml_parser() {
        let at_limit = "- []\n".repeat(limits::MAX_VALUES);
        assert_eq!(entries(&at_limit).len(), limits::MAX_VALUES);
        let past = format!("{at_limit}- {{}}\n");
        assert!(entries(&past).is_empty());
    }
}
