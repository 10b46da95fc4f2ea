//! The files a spec was read from, kept so that every diagnostic can quote its source.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Index of a file in a [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A range of bytes in one source file, with the 1-based line and column of its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub file: FileId,
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub column: usize,
}

/// One file's name (as shown to the user) and text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: Arc<str>,
    /// Byte offset of the start of each line, for locating spans without rescanning the text.
    line_starts: Arc<[usize]>,
    /// `(byte, chars)` every [`CHAR_MARK_BYTES`]: the number of characters before a char boundary
    /// near each multiple of it, so that a column on a long line (a machine-made file on one line)
    /// is counted from the nearest mark, not from the start of the line.
    char_marks: Arc<[(usize, usize)]>,
    /// Whether the text is ASCII only: then a byte offset is a character count.
    ascii: bool,
}

/// Distance between two [`SourceFile::char_marks`].
const CHAR_MARK_BYTES: usize = 1024;

impl SourceFile {
    /// The number of characters before byte `at` (a char boundary).
    fn chars_before(&self, at: usize) -> usize {
        if self.ascii {
            return at;
        }
        let (byte, chars) = self
            .char_marks
            .get(at / CHAR_MARK_BYTES)
            .copied()
            .unwrap_or((0, 0));
        chars + self.text[byte..at].chars().count()
    }
}

/// Every file read for one spec: the base, overlays, and referenced files.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn add(&mut self, path: impl Into<PathBuf>, text: impl Into<Arc<str>>) -> FileId {
        let text: Arc<str> = text.into();
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let mut char_marks = Vec::with_capacity(text.len() / CHAR_MARK_BYTES + 1);
        let (mut byte, mut chars) = (0, 0);
        for mark in (0..=text.len()).step_by(CHAR_MARK_BYTES) {
            let at = floor_char_boundary(&text, mark);
            chars += text[byte..at].chars().count();
            byte = at;
            char_marks.push((byte, chars));
        }
        self.files.push(SourceFile {
            path: path.into(),
            ascii: text.is_ascii(),
            text,
            line_starts,
            char_marks: char_marks.into(),
        });
        FileId((self.files.len() - 1) as u32)
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn path(&self, id: FileId) -> &Path {
        self.get(id)
            .map(|f| f.path.as_path())
            .unwrap_or(Path::new("<unknown>"))
    }

    /// `file:line:column` for a span.
    pub fn location(&self, span: Span) -> String {
        format!(
            "{}:{}:{}",
            self.path(span.file).display(),
            span.line,
            span.column
        )
    }

    /// The length in bytes of the longest line within `context` lines of the line `span` starts
    /// on (line breaks excluded): what a snippet of the span would show.
    pub fn longest_line_near(&self, span: Span, context: usize) -> usize {
        let Some(f) = self.get(span.file) else {
            return 0;
        };
        let line = span.line.max(1) - 1;
        let last = (line + context).min(f.line_starts.len() - 1);
        (line.saturating_sub(context)..=last)
            .map(|l| {
                let start = f.line_starts[l];
                let end = f
                    .line_starts
                    .get(l + 1)
                    .map(|next| next - 1)
                    .unwrap_or(f.text.len());
                end.saturating_sub(start)
            })
            .max()
            .unwrap_or(0)
    }

    /// Builds a span from a byte range, computing line and column (both 1-based, columns in
    /// characters).
    ///
    /// Lines are found by binary search in the file's line index: a spec with thousands of
    /// objects has hundreds of thousands of spans, and rescanning the text for each was quadratic.
    pub fn span_from_bytes(&self, file: FileId, start: usize, end: usize) -> Span {
        let source = self.get(file);
        let text = source.map(|f| &*f.text).unwrap_or("");
        let start = floor_char_boundary(text, start.min(text.len()));
        let end = floor_char_boundary(text, end.clamp(start, text.len()));
        // The number of line starts at or before `start` is the 1-based line.
        let (line, column) = match source {
            Some(f) => {
                let line = f.line_starts.partition_point(|&s| s <= start);
                let line_start = f.line_starts[line - 1];
                (line, f.chars_before(start) - f.chars_before(line_start) + 1)
            }
            None => (1, 1),
        };
        Span {
            file,
            start,
            end,
            line,
            column,
        }
    }
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition the line index replaces: count newlines before `start`.
    fn naive(text: &str, start: usize) -> (usize, usize) {
        let start = floor_char_boundary(text, start.min(text.len()));
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        (line, text[line_start..start].chars().count() + 1)
    }

    #[test]
    fn line_and_column_match_counting_newlines_at_every_offset() {
        for text in [
            "",
            "a",
            "\n",
            "ab\ncd\n",
            "é: ü\n\n  x: [1, 2]\r\nyz",
            "\n\nlast",
        ] {
            let mut map = SourceMap::default();
            let id = map.add("f.yaml", text.to_string());
            for start in 0..=text.len() + 2 {
                let span = map.span_from_bytes(id, start, start + 1);
                assert_eq!(
                    (span.line, span.column),
                    naive(text, start),
                    "{text:?} at {start}"
                );
            }
        }
    }

    /// Long lines, with multi-byte characters across the marks the column count starts from.
    #[test]
    fn columns_on_long_lines_match_counting_characters() {
        let text = format!(
            "{}\n{}ü{}\nend",
            "é".repeat(1500),
            "x".repeat(2047),
            "ab€".repeat(900)
        );
        let mut map = SourceMap::default();
        let id = map.add("f.yaml", text.clone());
        for start in (0..=text.len() + 2).step_by(7) {
            let span = map.span_from_bytes(id, start, start + 1);
            assert_eq!((span.line, span.column), naive(&text, start), "at {start}");
        }
    }
}
