//! List entries read without the YAML parser, which spends about 400 ns on each value: an
//! entry written as one line of JSON (`json_lines`), as tools that generate a large spec write
//! their manifests, or as block YAML of the plain kind people write by hand (`block_entries`).
//!
//! Each scanner gives the tree builder the values and spans the YAML parser would give for the
//! same text, and takes only the text whose YAML reading it is sure of; anything else is left to
//! the YAML parser. Whether a line that looks like an entry is one (and not, say, a line of a
//! block scalar) only the YAML parser can say: the caller asks it (see
//! `YamlBuilder::read_entry`). The YAML rules this rests on: `docs/yaml.md`.

use super::scan::{Entry, Kind, Sink};
use super::{Diagnostic, block_entries, json_lines, limits};

/// The list entries of `text` that a scanner takes, in order; none when there are more than the
/// spec may have values (each entry is one at least): the YAML parser then refuses the file at
/// the limit, before these would cost more than its tree.
///
/// An entry a scanner does not take is left to the YAML parser, and the entries inside it are
/// tried on their own.
pub(super) fn find(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let (mut line_start, mut number) = (0, 1);
    while line_start < text.len() {
        let line_end = next_line(text, line_start);
        let line = &text[line_start..line_end];
        match entry_at(text, line_start, line, number) {
            Some((entry, next)) => {
                if entries.len() == limits::MAX_VALUES {
                    return Vec::new();
                }
                entries.push(entry);
                (line_start, number) = next;
            }
            // A block scalar's lines are its text: one that looks like an entry is not one.
            None if opens_block_scalar(line) => {
                (line_start, number) = past_indented(text, line_end, number + 1, indent_of(line));
            }
            None => (line_start, number) = (line_end, number + 1),
        }
    }
    entries
}

/// Where the line after the one at `start` starts.
fn next_line(text: &str, start: usize) -> usize {
    text[start..]
        .find('\n')
        .map_or(text.len(), |at| start + at + 1)
}

/// The entry on `line` (line `number`, at `line_start`) that a scanner takes, and where the line
/// after it starts, with its number.
fn entry_at(
    text: &str,
    line_start: usize,
    line: &str,
    number: usize,
) -> Option<(Entry, (usize, usize))> {
    let value = entry_value(line)?;
    if value.starts_with(['{', '[']) {
        let entry = json_lines::entry_of(text, line_start, line, number)?;
        return Some((entry, (line_start + line.len(), number + 1)));
    }
    let (entry, next) = block_entries::entry_of(text, line_start, number)?;
    // Past the end of the text, the walk ends: its line number no longer counts.
    let next = next.map_or((text.len(), number), |line| (line.start, line.number));
    Some((entry, next))
}

/// The first line from the one at `start` (line `number`) on that holds text and is indented no
/// further than `indent`, and its number.
fn past_indented(text: &str, mut start: usize, mut number: usize, indent: usize) -> (usize, usize) {
    while start < text.len() {
        let end = next_line(text, start);
        let line = &text[start..end];
        if !line
            .trim_start_matches(' ')
            .trim_end_matches('\n')
            .is_empty()
            && indent_of(line) <= indent
        {
            break;
        }
        (start, number) = (end, number + 1);
    }
    (start, number)
}

/// The text after a line's `<spaces>- <spaces>`, when it is a list entry's line with a value on
/// it.
fn entry_value(line: &str) -> Option<&str> {
    let value = line
        .trim_start_matches(' ')
        .strip_prefix("- ")?
        .trim_start_matches(' ');
    (!value.trim_end_matches('\n').is_empty()).then_some(value)
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Whether a line (not taken as an entry) ends with a block scalar's header (`|`, `>-`, `|2`,
/// and so on, then perhaps a comment), after a space: the lines below it that are indented
/// further are its text. A line that only looks so costs the entries below it, no more.
fn opens_block_scalar(line: &str) -> bool {
    let line = line.trim_end_matches('\n');
    let line = line.find(" #").map_or(line, |comment| &line[..comment]);
    let line = line.trim_end_matches(' ');
    let header_at = line.rfind(' ').map_or(0, |space| space + 1);
    let header = &line.as_bytes()[header_at..];
    matches!(header.first(), Some(b'|' | b'>'))
        && header[1..]
            .iter()
            .all(|b| matches!(b, b'-' | b'+' | b'0'..=b'9'))
}

/// Gives `sink` the values of `entry` (found by [`find`] in the same text).
pub(super) fn replay(text: &str, entry: &Entry, sink: &mut impl Sink) -> Result<(), Diagnostic> {
    let end = match entry.kind {
        Kind::Json => json_lines::scan(text, entry.start, entry.line_start, entry.line, sink)?,
        Kind::Block => {
            block_entries::scan(text, entry.line_start, entry.line, sink)?.map(|r| r.end)
        }
    };
    match end {
        Some(end) if end == entry.end => Ok(()),
        // `find` found this entry in this text: it scans the same way again.
        _ => Err(Diagnostic::error(
            "a list entry read differently the second time",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of more entries than the spec may have values yields none (the YAML parser then
    /// refuses it at the limit), one at the limit all of them.
    #[test]
    fn entries_past_the_value_limit_are_left_to_the_yaml_parser() {
        let at_limit = "- []\n".repeat(limits::MAX_VALUES);
        assert_eq!(find(&at_limit).len(), limits::MAX_VALUES);
        let past = format!("{at_limit}- {{}}\n");
        assert!(find(&past).is_empty());
        let past = format!("{at_limit}- a\n");
        assert!(find(&past).is_empty());
    }
}
