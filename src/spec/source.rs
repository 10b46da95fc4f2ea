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
}

/// Every file read for one spec: the base, overlays, and referenced files.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn add(&mut self, path: impl Into<PathBuf>, text: impl Into<Arc<str>>) -> FileId {
        self.files.push(SourceFile {
            path: path.into(),
            text: text.into(),
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
    pub fn span_from_bytes(&self, file: FileId, start: usize, end: usize) -> Span {
        let text = self.get(file).map(|f| &*f.text).unwrap_or("");
        let start = floor_char_boundary(text, start.min(text.len()));
        let end = floor_char_boundary(text, end.clamp(start, text.len()));
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
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
