//! Block-list entries written as one line of JSON (`  - {"apiVersion": "v1", ...}`), as tools
//! that generate a large spec write its manifests (see `entries`); the same scanner reads JSON
//! values on the lines of block entries (`block_entries`).
//!
//! One line of JSON is YAML: a flow collection of double-quoted strings and plain scalars. The
//! scanner takes only the JSON whose YAML reading it is sure of. A line with anything else
//! (a tab, whitespace before a `:` or `,`, a character YAML does not allow unescaped, a
//! surrogate escape, deep nesting, a key longer than YAML's implicit keys may be, text after the
//! value) is left to the YAML parser. The YAML rules this rests on: `docs/yaml.md 1`.

use granit_parser::ScalarStyle;

use super::Diagnostic;
use super::scan::{
    Entry, Kind, MAX_KEY_BYTES, MAX_NESTING, Nothing, Sink, Token, printable_in_yaml,
};

/// `line`'s entry, when it is `<spaces>- <spaces><JSON><spaces>` and the scanner takes the JSON.
pub(super) fn entry_of(text: &str, line_start: usize, line: &str, number: usize) -> Option<Entry> {
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
        kind: Kind::Json,
    };
    entry.end = scan(text, start, line_start, number, &mut Nothing).ok()??;
    // Only spaces, then the line's break (if it has one), after the value.
    let after = &text[entry.end..line_start + line.len()];
    after
        .trim_end_matches('\n')
        .bytes()
        .all(|b| b == b' ')
        .then_some(entry)
}

/// Scans the JSON value at `start`, on line `line` (from 1) which starts at `line_start`, giving
/// `sink` its parts: where it ends, or `None` when the scanner does not take it (the sink may have
/// been given part of it).
pub(super) fn scan(
    text: &str,
    start: usize,
    line_start: usize,
    line: usize,
    sink: &mut impl Sink,
) -> Result<Option<usize>, Diagnostic> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        pos: start,
        line,
        counted: line_start,
        column: 0,
        scratch: String::new(),
    };
    Ok(scanner.value(sink, 0)?.then_some(scanner.pos))
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: usize,
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
            line: self.line,
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
        sink.scalar(word, ScalarStyle::Plain, at)?;
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
        sink.scalar(&self.text[start..self.pos], ScalarStyle::Plain, at)?;
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
            sink.scalar(
                &self.text[start + 1..value_end],
                ScalarStyle::DoubleQuoted,
                at,
            )?;
        } else {
            let mut value = std::mem::take(&mut self.scratch);
            value.push_str(&self.text[plain_from..value_end]);
            sink.scalar(&value, ScalarStyle::DoubleQuoted, at)?;
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
