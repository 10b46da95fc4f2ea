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
        self.files.push(SourceFile {
            path: path.into(),
            text,
            line_starts,
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
        let (line, line_start) = match source {
            Some(f) => {
                let line = f.line_starts.partition_point(|&s| s <= start);
                (line, f.line_starts[line - 1])
            }
            None => (1, 0),
        };
        let column = text[line_start..start].chars().count() + 1;
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
}
