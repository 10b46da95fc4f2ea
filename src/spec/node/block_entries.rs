//! List entries written as block YAML of the plain kind people write by hand (see `entries`):
//! maps of plain keys, lists, and scalars that are plain, quoted or literal blocks, one to a line.
//!
//! The scanner takes an entry only when every line of it is of that kind, and it leaves anything
//! else to the YAML parser: a tab or a character YAML does not allow, a key that is not plain
//! letters, digits and `_./-`, an anchor, alias or tag, a value that would continue on the next
//! line or is empty, a folded block or one with an indentation indicator, a line of spaces in a
//! block, a flow collection that is not one line of JSON, nesting past 16 levels. The entry is
//! every line below its `- ` that is indented further; the scanner reads those lines by the rules
//! of `docs/yaml.md 2`.

use granit_parser::ScalarStyle;

use super::Diagnostic;
use super::json_lines;
use super::scan::{
    Entry, Kind, MAX_KEY_BYTES, MAX_NESTING, Nothing, Sink, Token, printable_in_yaml,
};

/// A line of the text: where it starts, where its text ends (before its break) and where the
/// next one starts, its number from 1 and its indentation in spaces.
#[derive(Debug, Clone, Copy)]
pub(super) struct Line {
    pub start: usize,
    end: usize,
    next: usize,
    pub number: usize,
    indent: usize,
}

/// An entry the scanner took: where its value ends (the end of its last line, before the
/// break), and the first line after it that holds a token (`None` at the end of the text).
pub(super) struct Scanned {
    pub end: usize,
    pub next: Option<Line>,
}

/// The entry whose `- ` is on the line that starts at `line_start` (line `number`), when the
/// scanner takes it, and the first line after it that holds a token (`None` at the end of the
/// text).
pub(super) fn entry_of(
    text: &str,
    line_start: usize,
    number: usize,
) -> Option<(Entry, Option<Line>)> {
    let (start, scanned) = Scanner::new(text)
        .entry(&mut Nothing, line_start, number)
        .ok()?;
    let entry = Entry {
        start,
        end: scanned.end,
        line: number,
        line_start,
        kind: Kind::Block,
    };
    Some((entry, scanned.next))
}

/// Gives `sink` the values of the entry whose `- ` is on the line that starts at `line_start`
/// (line `number`): `None` when the scanner does not take it (the sink may have been given part
/// of it).
pub(super) fn scan(
    text: &str,
    line_start: usize,
    number: usize,
    sink: &mut impl Sink,
) -> Result<Option<Scanned>, Diagnostic> {
    match Scanner::new(text).entry(sink, line_start, number) {
        Ok((_, scanned)) => Ok(Some(scanned)),
        Err(Stop::Refused) => Ok(None),
        Err(Stop::Sink(diagnostic)) => Err(diagnostic),
    }
}

/// Why the scanner stopped: it does not take the text, or the sink found a problem.
enum Stop {
    Refused,
    Sink(Diagnostic),
}

impl From<Diagnostic> for Stop {
    fn from(diagnostic: Diagnostic) -> Self {
        Stop::Sink(diagnostic)
    }
}

type Scan<T> = Result<T, Stop>;

/// How a literal block keeps its final line breaks (its chomping indicator).
#[derive(Clone, Copy)]
enum Chomp {
    Clip,
    Strip,
    Keep,
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    /// The end of the last line read as part of the entry.
    last_end: usize,
    /// The last line looked at: the end of the text is on it or just after it.
    last_line: Line,
    scratch: String,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            last_end: 0,
            last_line: Line {
                start: 0,
                end: 0,
                next: 0,
                number: 1,
                indent: 0,
            },
            scratch: String::new(),
        }
    }

    fn line_at(&mut self, start: usize, number: usize) -> Line {
        let rest = &self.bytes[start..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.bytes.len(), |at| start + at);
        let indent = rest[..end - start]
            .iter()
            .take_while(|&&b| b == b' ')
            .count();
        let line = Line {
            start,
            end,
            next: (end + 1).min(self.bytes.len()),
            number,
            indent,
        };
        self.last_line = line;
        line
    }

    /// The first byte after a line's indentation.
    fn first(&self, line: &Line) -> Option<u8> {
        self.bytes[line.start + line.indent..line.end]
            .first()
            .copied()
    }

    /// The first line from the one at `start` (line `number`) on that holds a token, past blank
    /// lines and comments; `None` at the end of the text.
    fn content_from(&mut self, mut start: usize, mut number: usize) -> Scan<Option<Line>> {
        while start < self.bytes.len() {
            let line = self.line_at(start, number);
            if !self.printable(&line, false) {
                return Err(Stop::Refused);
            }
            match self.first(&line) {
                None | Some(b'#') => {}
                Some(_) => return Ok(Some(line)),
            }
            start = line.next;
            number += 1;
        }
        Ok(None)
    }

    /// Whether a line holds only characters YAML allows unescaped (and no NEL, line or paragraph
    /// separator or byte order mark); tabs only in a block's text (`tabs`).
    fn printable(&self, line: &Line, tabs: bool) -> bool {
        let bytes = &self.bytes[line.start..line.end];
        if bytes.iter().all(|&b| (0x20..0x7F).contains(&b)) {
            return true;
        }
        self.text[line.start..line.end].chars().all(|c| {
            matches!(c, ' '..='~') || (tabs && c == '\t') || (c >= '\u{80}' && printable_in_yaml(c))
        })
    }

    /// Whether a line's token is a list entry's `-`.
    fn is_dash(&self, line: &Line) -> bool {
        let at = line.start + line.indent;
        self.bytes[at] == b'-' && (at + 1 == line.end || self.bytes[at + 1] == b' ')
    }

    /// Where a map or list that ends before `next` ends, as the parser marks it: at `next`'s
    /// token, or at the end of the text.
    fn mark(&self, next: Option<Line>) -> Token {
        match next {
            Some(line) => {
                let at = line.start + line.indent;
                Token {
                    start: at,
                    end: at,
                    line: line.number,
                    column: line.indent,
                }
            }
            None => {
                let len = self.bytes.len();
                let last = self.last_line;
                let (line, column) = if last.end < len {
                    (last.number + 1, 0)
                } else {
                    (last.number, self.column(&last, len))
                };
                Token {
                    start: len,
                    end: len,
                    line,
                    column,
                }
            }
        }
    }

    /// The column of byte `at` of `line`, in characters.
    fn column(&self, line: &Line, at: usize) -> usize {
        let before = &self.bytes[line.start..at];
        before.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
    }

    fn token(&self, line: &Line, start: usize, end: usize) -> Token {
        Token {
            start,
            end,
            line: line.number,
            column: self.column(line, start),
        }
    }

    /// The entry on the line at `line_start`: where its value starts, and what was scanned.
    fn entry(
        &mut self,
        sink: &mut impl Sink,
        line_start: usize,
        number: usize,
    ) -> Scan<(usize, Scanned)> {
        let line = self.line_at(line_start, number);
        if !self.printable(&line, false) || !self.is_dash(&line) {
            return Err(Stop::Refused);
        }
        let start = self.value_after_dash(&line)?;
        let next = self.item(sink, line, start, 1)?;
        Ok((
            start,
            Scanned {
                end: self.last_end,
                next,
            },
        ))
    }

    /// Where the value of the list entry on `line` starts, past its `- ` and spaces.
    fn value_after_dash(&self, line: &Line) -> Scan<usize> {
        let mut at = line.start + line.indent + 1;
        while at < line.end && self.bytes[at] == b' ' {
            at += 1;
        }
        if at == line.end || self.bytes[at] == b'#' {
            // An empty entry, or one whose value starts on the next line.
            return Err(Stop::Refused);
        }
        Ok(at)
    }

    /// A list entry's value, starting at `at` on `line` (whose `-` is at its indentation): a map
    /// whose first key is there, or a scalar. Returns the line after it.
    fn item(
        &mut self,
        sink: &mut impl Sink,
        line: Line,
        at: usize,
        depth: usize,
    ) -> Scan<Option<Line>> {
        let next = if self.key_end(&line, at).is_some() {
            self.map(sink, line, at, depth)?
        } else {
            self.scalar(sink, &line, at)?;
            self.last_end = line.end;
            self.content_from(line.next, line.number + 1)?
        };
        // A line indented past the `-` would continue the value (or be an error).
        if next.is_some_and(|next| next.indent > line.indent) {
            return Err(Stop::Refused);
        }
        Ok(next)
    }

    /// Where the plain key at `at` on `line` ends (its `:`, followed by a space or the line's
    /// end).
    fn key_end(&self, line: &Line, at: usize) -> Option<usize> {
        let key = &self.bytes[at..line.end];
        if !key.first()?.is_ascii_alphanumeric() && key[0] != b'_' {
            return None;
        }
        let len = key.iter().position(|&b| {
            !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-'))
        })?;
        let colon = at + len;
        let ends =
            self.bytes[colon] == b':' && (colon + 1 == line.end || self.bytes[colon + 1] == b' ');
        (ends && len <= MAX_KEY_BYTES).then_some(colon)
    }

    /// A block map whose first key is at `at` on `line`; its keys are all in that column.
    fn map(
        &mut self,
        sink: &mut impl Sink,
        mut line: Line,
        mut at: usize,
        depth: usize,
    ) -> Scan<Option<Line>> {
        if depth > MAX_NESTING {
            return Err(Stop::Refused);
        }
        // Only spaces and a `- ` are before the first key: columns are bytes.
        let column = at - line.start;
        sink.start_map(self.token(&line, at, at))?;
        loop {
            let colon = self.key_end(&line, at).ok_or(Stop::Refused)?;
            sink.scalar(
                &self.text[at..colon],
                ScalarStyle::Plain,
                self.token(&line, at, colon),
            )?;
            let mut value = colon + 1;
            while value < line.end && self.bytes[value] == b' ' {
                value += 1;
            }
            let next = if value == line.end || self.bytes[value] == b'#' {
                self.nested(sink, &line, column, depth)?
            } else if self.bytes[value] == b'|' {
                self.literal(sink, &line, value, column)?
            } else {
                self.scalar(sink, &line, value)?;
                self.last_end = line.end;
                self.content_from(line.next, line.number + 1)?
            };
            match next {
                Some(next) if next.indent == column && !self.is_dash(&next) => {
                    at = next.start + column;
                    line = next;
                }
                Some(next) if next.indent >= column => return Err(Stop::Refused),
                _ => {
                    sink.end(self.mark(next))?;
                    return Ok(next);
                }
            }
        }
    }

    /// The value of a key at `column` on `line` that has none on its line: a map or list on the
    /// lines below (a list may be in the key's column). An empty value is left to the parser.
    fn nested(
        &mut self,
        sink: &mut impl Sink,
        line: &Line,
        column: usize,
        depth: usize,
    ) -> Scan<Option<Line>> {
        self.last_end = line.end;
        match self.content_from(line.next, line.number + 1)? {
            Some(next) if self.is_dash(&next) && next.indent >= column => {
                self.seq(sink, next, next.indent == column, depth + 1)
            }
            Some(next) if next.indent > column => {
                self.map(sink, next, next.start + next.indent, depth + 1)
            }
            _ => Err(Stop::Refused),
        }
    }

    /// A block list whose first `-` is on `line`; its `-`s are all in that column, which is its
    /// key's when it is `indentless`.
    fn seq(
        &mut self,
        sink: &mut impl Sink,
        mut line: Line,
        indentless: bool,
        depth: usize,
    ) -> Scan<Option<Line>> {
        if depth > MAX_NESTING {
            return Err(Stop::Refused);
        }
        let mut at = self.value_after_dash(&line)?;
        // The parser starts an indented list at its first `-`, one in its key's column at the
        // first value.
        let starts = if indentless {
            at
        } else {
            line.start + line.indent
        };
        sink.start_seq(self.token(&line, starts, starts))?;
        loop {
            let next = self.item(sink, line, at, depth + 1)?;
            match next {
                Some(next) if next.indent == line.indent && self.is_dash(&next) => {
                    line = next;
                    at = self.value_after_dash(&line)?;
                }
                _ => {
                    sink.end(self.mark(next))?;
                    return Ok(next);
                }
            }
        }
    }

    /// A scalar that starts at `at` and ends `line` (but for spaces and a comment): one line of
    /// JSON (a double-quoted string or a flow collection), a single-quoted string, or plain text.
    fn scalar(&mut self, sink: &mut impl Sink, line: &Line, at: usize) -> Scan<()> {
        match self.bytes[at] {
            b'"' | b'{' | b'[' => {
                let end = json_lines::scan(self.text, at, line.start, line.number, sink)?
                    .ok_or(Stop::Refused)?;
                self.only_a_comment_after(line, end)
            }
            b'\'' => self.single_quoted(sink, line, at),
            _ => self.plain(sink, line, at),
        }
    }

    /// Refuses anything on `line` after `end` but spaces and a comment.
    fn only_a_comment_after(&self, line: &Line, end: usize) -> Scan<()> {
        let after = &self.text[end..line.end];
        let text = after.trim_start_matches(' ');
        if text.is_empty() || (text.starts_with('#') && text.len() < after.len()) {
            Ok(())
        } else {
            Err(Stop::Refused)
        }
    }

    fn single_quoted(&mut self, sink: &mut impl Sink, line: &Line, at: usize) -> Scan<()> {
        self.scratch.clear();
        let mut from = at + 1;
        let mut search = from;
        let end = loop {
            let quote = self.bytes[search..line.end]
                .iter()
                .position(|&b| b == b'\'')
                .ok_or(Stop::Refused)?
                + search;
            if self.bytes.get(quote + 1) == Some(&b'\'') {
                self.scratch.push_str(&self.text[from..=quote]);
                from = quote + 2;
                search = from;
            } else {
                self.scratch.push_str(&self.text[from..quote]);
                break quote + 1;
            }
        };
        self.only_a_comment_after(line, end)?;
        let value = std::mem::take(&mut self.scratch);
        sink.scalar(&value, ScalarStyle::SingleQuoted, self.token(line, at, end))?;
        self.scratch = value;
        Ok(())
    }

    /// A plain scalar: the line's text from `at`, up to a comment, without trailing spaces. Text
    /// that could be read as anything else (an indicator first, a `: ` that makes a key, a
    /// document marker) is left to the parser.
    fn plain(&mut self, sink: &mut impl Sink, line: &Line, at: usize) -> Scan<()> {
        let rest = &self.text[at..line.end];
        let first = rest.as_bytes()[0];
        let second = rest.as_bytes().get(1).copied();
        let indicator = b"?:,[]{}#&*!|>'\"%@`".contains(&first)
            || (first == b'-' && matches!(second, None | Some(b' ')));
        let text = rest.find(" #").map_or(rest, |comment| &rest[..comment]);
        let text = text.trim_end_matches(' ');
        if indicator
            || text.contains(": ")
            || text.ends_with(':')
            || text.starts_with("---")
            || text.starts_with("...")
        {
            return Err(Stop::Refused);
        }
        let end = at + text.len();
        sink.scalar(text, ScalarStyle::Plain, self.token(line, at, end))?;
        Ok(())
    }

    /// A literal block (`|`, `|-`, `|+`) whose indicator is at `at` on `line`, the value of a key
    /// at `column`: its text is the lines below indented as its first one is, more than the key.
    fn literal<S: Sink>(
        &mut self,
        sink: &mut S,
        line: &Line,
        at: usize,
        column: usize,
    ) -> Scan<Option<Line>> {
        let (chomp, header_end) = match self.bytes.get(at + 1) {
            Some(b'-') => (Chomp::Strip, at + 2),
            Some(b'+') => (Chomp::Keep, at + 2),
            _ => (Chomp::Clip, at + 1),
        };
        self.only_a_comment_after(line, header_end)?;
        self.last_end = line.end;
        let mut value = String::new();
        let mut indent = None;
        let mut start: Option<Token> = None;
        // Empty lines since the last line of text.
        let mut breaks = 0;
        let (mut from, mut number) = (line.next, line.number + 1);
        let after = loop {
            if from >= self.bytes.len() {
                break None;
            }
            let text_line = self.line_at(from, number);
            (from, number) = (text_line.next, number + 1);
            if text_line.start == text_line.end {
                breaks += 1;
                continue;
            }
            if text_line.indent == text_line.end - text_line.start {
                // A line of spaces: whether it is text or an empty line depends on how many.
                return Err(Stop::Refused);
            }
            let n = *indent.get_or_insert(text_line.indent);
            if text_line.indent < n {
                break Some(text_line);
            }
            if n <= column || text_line.next == text_line.end || !self.printable(&text_line, true) {
                // No text (the first line is not indented past the key), or a last line without
                // a break, or a character YAML does not allow.
                return Err(Stop::Refused);
            }
            let text_start = text_line.start + n;
            if start.is_none() {
                start = Some(self.token(&text_line, text_start, text_start));
            } else {
                breaks += 1;
            }
            if S::VALUES {
                value.extend(std::iter::repeat_n('\n', breaks));
                value.push_str(&self.text[text_start..text_line.end]);
            }
            breaks = 0;
            self.last_end = text_line.end;
        };
        let Some(mut token) = start else {
            return Err(Stop::Refused);
        };
        match chomp {
            Chomp::Clip => value.push('\n'),
            Chomp::Strip => {}
            Chomp::Keep => value.extend(std::iter::repeat_n('\n', breaks + 1)),
        }
        token.end = self.mark(after).start;
        sink.scalar(&value, ScalarStyle::Literal, token)?;
        match after {
            Some(after) => self.content_from(after.start, after.number),
            None => Ok(None),
        }
    }
}
