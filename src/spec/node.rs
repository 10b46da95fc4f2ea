//! A format-neutral document tree with source spans: YAML and TOML both parse into [`Node`], so
//! overlays, variables and decoding work the same for both and every value keeps its location.

use std::fmt;

use granit_parser::{Event, Parser, ScalarStyle};
use toml::de::{DeFloat, DeInteger, DeValue};

use super::diag::Diagnostic;
use super::limits;

mod block_entries;
mod entries;
mod json_lines;
mod scan;
use super::source::{FileId, SourceMap, Span};

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string. `interpolated` marks text produced by `${VAR}` substitution, which may then be
    /// read as a number or boolean the way the user meant it.
    Str {
        value: String,
        interpolated: bool,
    },
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// A mapping key with its own span, so that unknown keys can be pointed at.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub span: Span,
}

/// One step of a path into a document: a map key or a list index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path like `nodePools[1].autoscaling.max`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Path(pub Vec<Seg>);

impl Path {
    pub fn root() -> Self {
        Self(Vec::new())
    }
    pub fn key(&self, k: impl Into<String>) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.into()));
        p
    }
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for seg in &self.0 {
            match seg {
                Seg::Key(k) => {
                    if !first {
                        f.write_str(".")?;
                    }
                    if k.contains('.') || k.contains('/') {
                        write!(f, "\"{k}\"")?;
                    } else {
                        f.write_str(k)?;
                    }
                }
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
            first = false;
        }
        Ok(())
    }
}

impl Node {
    pub fn new(kind: NodeKind, span: Span) -> Self {
        Self { kind, span }
    }

    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "a boolean",
            NodeKind::Int(_) => "an integer",
            NodeKind::Float(_) => "a number",
            NodeKind::Str { .. } => "a string",
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a map",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Str { value, .. } => Some(value),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            NodeKind::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn key_span(&self, key: &str) -> Option<Span> {
        match &self.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.name == key)
                .map(|(k, _)| k.span),
            _ => None,
        }
    }

    /// The node at `path`, or the deepest existing ancestor's span when the path does not exist
    /// (a missing field is reported where it should have been).
    pub fn span_at(&self, path: &Path) -> Span {
        let mut node = self;
        for seg in &path.0 {
            let next = match (seg, &node.kind) {
                (Seg::Key(k), NodeKind::Map(_)) => node.get(k),
                (Seg::Index(i), NodeKind::Seq(items)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => return node.span,
            }
        }
        node.span
    }

    pub fn at(&self, path: &Path) -> Option<&Node> {
        let mut node = self;
        for seg in &path.0 {
            node = match (seg, &node.kind) {
                (Seg::Key(k), NodeKind::Map(_)) => node.get(k)?,
                (Seg::Index(i), NodeKind::Seq(items)) => items.get(*i)?,
                _ => return None,
            };
        }
        Some(node)
    }

    pub fn at_mut(&mut self, path: &Path) -> Option<&mut Node> {
        let mut node = self;
        for seg in &path.0 {
            node = match (seg, &mut node.kind) {
                (Seg::Key(k), NodeKind::Map(entries)) => {
                    &mut entries.iter_mut().find(|(key, _)| &key.name == k)?.1
                }
                (Seg::Index(i), NodeKind::Seq(items)) => items.get_mut(*i)?,
                _ => return None,
            };
        }
        Some(node)
    }

    /// Removes the value at `path` (a map entry or a list item). Used to continue decoding after
    /// a bad value has been reported, so that later problems are found in the same run.
    pub fn remove(&mut self, path: &Path) -> bool {
        let Some((last, parent)) = path.0.split_last() else {
            return false;
        };
        let Some(parent) = self.at_mut(&Path(parent.to_vec())) else {
            return false;
        };
        match (last, &mut parent.kind) {
            (Seg::Key(k), NodeKind::Map(entries)) => {
                let before = entries.len();
                entries.retain(|(key, _)| &key.name != k);
                entries.len() != before
            }
            (Seg::Index(i), NodeKind::Seq(items)) if *i < items.len() => {
                items.remove(*i);
                true
            }
            _ => false,
        }
    }

    /// Converts to JSON for embedded raw Kubernetes manifests.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Int(i) => Value::from(*i),
            NodeKind::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            NodeKind::Str { value, .. } => Value::String(value.clone()),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

/// Parses YAML (one document) into a [`Node`]. Anchors and aliases are expanded; duplicate keys
/// are errors, as are multiple documents.
///
/// What the document may cost is bounded (see [`super::limits`]): nesting depth, the number of
/// values and the text they hold, counting the copies anchors and aliases make, and how much
/// aliases repeat. Each bound is checked before the values are built, so a few hundred bytes of
/// aliases (a "billion laughs" bomb) are refused after a few thousand values, not after memory
/// runs out.
pub fn parse_yaml(sources: &SourceMap, file: FileId) -> Result<Node, Diagnostic> {
    parse_yaml_within(sources, file, &mut Budget::default())
}

/// [`parse_yaml`], counting against `budget`: what the spec's other files (its overlay) already
/// spent.
pub fn parse_yaml_within(
    sources: &SourceMap,
    file: FileId,
    budget: &mut Budget,
) -> Result<Node, Diagnostic> {
    let text = sources
        .get(file)
        .map(|f| f.text.clone())
        .unwrap_or_default();
    // List entries written as one line of JSON or as plain block YAML are read by scanners, and
    // the YAML parser reads the rest with a placeholder in their place (see `entries`); when it
    // does not take each placeholder as the entry it stands for, or finds a problem, it reads the
    // whole text, so that what it says is what it would have said.
    if let Some(with_entries) = read_with_entries(sources, file, &text, budget) {
        return Ok(with_entries);
    }
    read_yaml(sources, file, &text, None, budget).map(|(root, _)| root)
}

/// Whether the parser's lines and columns in `text` are the file's: not with a carriage return
/// (a line break to YAML, not to [`SourceMap`]) or a byte order mark (which YAML does not count
/// as a column).
fn parser_counts_as_the_file(text: &str) -> bool {
    !text.contains(['\r', '\u{feff}'])
}

/// A text with a placeholder for each of `entries`, list entries of `original` read by a scanner.
#[derive(Clone, Copy)]
struct Placeholders<'a> {
    original: &'a str,
    entries: &'a [scan::Entry],
    /// In order, where the text after each placeholder starts, and how far it moved.
    moved: &'a [Moved],
}

/// Bytes of a text with placeholders from `from` on lie `by` bytes further in the file (until
/// the next placeholder).
#[derive(Debug, Clone, Copy)]
struct Moved {
    from: usize,
    by: usize,
}

impl Placeholders<'_> {
    /// Where byte `at` of the text with placeholders lies in the file.
    fn in_original(&self, at: usize) -> usize {
        match self.moved.partition_point(|m| m.from <= at) {
            0 => at,
            after => at + self.moved[after - 1].by,
        }
    }
}

/// [`parse_yaml_within`] with the list entries a scanner takes read by it: `None` when the text
/// has none, or the YAML parser did not read each of them as a list entry of its own, or found a
/// problem (`budget` is then as it was).
fn read_with_entries(
    sources: &SourceMap,
    file: FileId,
    text: &str,
    budget: &mut Budget,
) -> Option<Node> {
    // The scanners count lines and columns as the parser does.
    if !parser_counts_as_the_file(text) {
        return None;
    }
    let entries = entries::find(text);
    if entries.is_empty() {
        return None;
    }
    // Each entry's value becomes `x`: the same lines, each placeholder's text in the file
    // found through `moved`.
    let mut placeholders = String::with_capacity(text.len());
    let mut moved = Vec::with_capacity(entries.len());
    let mut from = 0;
    for entry in &entries {
        placeholders.push_str(&text[from..entry.start]);
        placeholders.push('x');
        moved.push(Moved {
            from: placeholders.len(),
            by: entry.end - placeholders.len(),
        });
        from = entry.end;
    }
    placeholders.push_str(&text[from..]);
    let with_placeholders = Placeholders {
        original: text,
        entries: &entries,
        moved: &moved,
    };
    let before = budget.clone();
    match read_yaml(
        sources,
        file,
        &placeholders,
        Some(with_placeholders),
        budget,
    ) {
        Ok((root, read)) if read == entries.len() => Some(root),
        _ => {
            *budget = before;
            None
        }
    }
}

/// Parses `text` (the file's text, or it with `placeholders`) into its root node, and how many
/// of the placeholders' entries were read.
fn read_yaml(
    sources: &SourceMap,
    file: FileId,
    text: &str,
    placeholders: Option<Placeholders<'_>>,
    budget: &mut Budget,
) -> Result<(Node, usize), Diagnostic> {
    let mut builder = YamlBuilder {
        sources,
        file,
        text,
        placeholders,
        entries_read: 0,
        stack: Vec::new(),
        items: Vec::new(),
        entries: Vec::new(),
        // With placeholders, the parser's positions are not the file's: they come from the
        // file's line index. The parser's own events are few then; the entries' spans are the
        // scanner's.
        parser_positions: placeholders.is_none() && parser_counts_as_the_file(text),
        anchors: Default::default(),
        anchor_names: Default::default(),
        root: None,
        documents: 0,
        budget,
    };
    let options = granit_parser::options! {
        emit_anchor_events: true,
        // A spec's comments are for its readers: gkq reads none of them, and asking the parser
        // for them cost a tenth of loading a large spec.
        emit_comments: false,
        flow_nesting_limit: limits::MAX_DEPTH,
        block_nesting_limit: limits::MAX_DEPTH,
    };
    for next in Parser::new_from_str_with_options(text, options) {
        match next {
            Ok((event, span)) => builder.event(event, span)?,
            Err(e) => {
                let m = e.marker();
                let start = byte_offset_of_char(text, m.index());
                let span = sources.span_from_bytes(file, start, start + 1);
                if *e.kind() == granit_parser::ErrorKind::RecursionLimitExceeded {
                    // The scanner counts block and flow levels apart, each up to the limit.
                    return Err(nesting_too_deep("this map or list", None).at(Some(span)));
                }
                return Err(Diagnostic::error(format!("YAML syntax error: {}", e.info()))
                    .at(Some(span))
                    .help("check indentation, quotes and that every `key:` is followed by a space"));
            }
        }
    }
    let read = builder.entries_read;
    let root = builder.root.unwrap_or_else(|| {
        Node::new(
            NodeKind::Map(Vec::new()),
            sources.span_from_bytes(file, 0, 0),
        )
    });
    Ok((root, read))
}

fn byte_offset_of_char(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map(|(b, _)| b)
        .unwrap_or(text.len())
}

/// The error for `what` (a map, a list, an alias) nesting past the limit, at level `depth` when
/// that is known (the parsers refuse deep nesting before they say how deep it is).
fn nesting_too_deep(what: &str, depth: Option<usize>) -> Diagnostic {
    let reaches = depth
        .map(|d| format!(": it reaches level {d}"))
        .unwrap_or_default();
    Diagnostic::error(format!(
        "{what} exceeds the nesting limit of {} levels of maps and lists{reaches}",
        limits::MAX_DEPTH
    ))
    .help("no gkq setting or Kubernetes object nests this deep: flatten the structure")
}

/// What a value costs: the values it is made of (itself included), the bytes of text in its
/// scalars and keys, and how many levels of maps and lists it nests (0 for a scalar).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Size {
    pub values: usize,
    pub text: usize,
    pub depth: usize,
}

/// What the files of one spec have built so far, against [`super::limits`]: the spec and its
/// overlay share one budget, so that two files at the limits do not add up to twice the memory.
#[derive(Debug, Default, Clone)]
pub struct Budget {
    /// Values and text in the documents, aliases expanded.
    tree_values: usize,
    tree_text: usize,
    /// The copies kept of anchored values, for the aliases that may follow.
    copied_values: usize,
    copied_text: usize,
    /// Values repeated by aliases.
    alias_values: usize,
}

impl Budget {
    pub fn values(&self) -> usize {
        self.tree_values + self.copied_values
    }

    /// Bytes of text held: scalars and keys, with the copies anchors and aliases make.
    pub fn text(&self) -> usize {
        self.tree_text + self.copied_text
    }

    /// Checks the values and text counted so far; `detail` says what added the last of them.
    fn check(&self, span: Span, detail: impl Fn() -> String) -> Result<(), Diagnostic> {
        if self.values() > limits::MAX_VALUES {
            return Err(Diagnostic::error(format!(
                "the spec exceeds the limit of {} values (maps, lists, scalars and keys in the spec and its overlay, counting the copies anchors and aliases make){}",
                limits::count(limits::MAX_VALUES as u64),
                detail()
            ))
            .at(Some(span))
            .help("a spec this large is machine-made or hostile: split it, or expand fewer anchors"));
        }
        if self.text() > limits::MAX_TEXT_BYTES {
            return Err(Diagnostic::error(format!(
                "the spec exceeds the limit of {} of text (scalars and keys in the spec and its overlay, counting the copies anchors and aliases make){}",
                limits::bytes(limits::MAX_TEXT_BYTES),
                detail()
            ))
            .at(Some(span))
            .help("repeat long values less often through anchors and aliases"));
        }
        Ok(())
    }
}

/// A map or list being built. Its children so far are the tail of the builder's `items` (a
/// list's) or `entries` (a map's) from `first` on: one stack for every open container, so that
/// each finished container is allocated once, at its size, instead of growing its own vector.
enum Frame {
    Seq {
        first: usize,
        span: Span,
        anchor: usize,
        open: Open,
    },
    Map {
        first: usize,
        span: Span,
        pending: Option<Key>,
        anchor: usize,
        open: Open,
        keys: KeySet,
    },
}

/// The keys of a map being built, for the duplicate check: a scan while the map is small, a
/// hash set once it is not (a machine-made map of 100,000 keys must not cost 10^10 comparisons).
#[derive(Default)]
struct KeySet(std::collections::HashSet<String>);

impl KeySet {
    const SCAN_BELOW: usize = 16;

    /// Whether `name` is already a key of `entries`; remembers it when it is not.
    fn seen(&mut self, entries: &[(Key, Node)], name: &str) -> bool {
        if entries.len() < Self::SCAN_BELOW {
            return entries.iter().any(|(k, _)| k.name == name);
        }
        if self.0.is_empty() {
            self.0.extend(entries.iter().map(|(k, _)| k.name.clone()));
        }
        !self.0.insert(name.to_string())
    }
}

/// A map or list being built: the budget's counts when it opened and its deepest child.
#[derive(Debug, Clone, Copy)]
struct Open {
    values: usize,
    text: usize,
    child_depth: usize,
}

struct YamlBuilder<'a> {
    sources: &'a SourceMap,
    file: FileId,
    /// The text the parser reads: the file's, or it with `placeholders`, of which `entries_read`
    /// were read, in order.
    text: &'a str,
    placeholders: Option<Placeholders<'a>>,
    entries_read: usize,
    stack: Vec<Frame>,
    /// The children of the open lists, and the entries of the open maps ([`Frame`]).
    items: Vec<Node>,
    entries: Vec<(Key, Node)>,
    /// Whether granit's lines and columns are gkq's ([`parser_counts_as_the_file`], and no
    /// placeholders).
    parser_positions: bool,
    anchors: std::collections::HashMap<usize, (Node, Size)>,
    anchor_names: std::collections::HashMap<usize, String>,
    root: Option<Node>,
    documents: usize,
    budget: &'a mut Budget,
}

impl<'a> YamlBuilder<'a> {
    fn span(&self, s: granit_parser::Span) -> Span {
        let start = s
            .start
            .byte_offset()
            .unwrap_or_else(|| byte_offset_of_char(self.text, s.start.index()));
        let end = s
            .end
            .byte_offset()
            .unwrap_or_else(|| byte_offset_of_char(self.text, s.end.index()));
        if let Some(placeholders) = &self.placeholders {
            let (start, end) = (
                placeholders.in_original(start),
                placeholders.in_original(end),
            );
            return self.sources.span_from_bytes(self.file, start, end);
        }
        if !self.parser_positions {
            return self.sources.span_from_bytes(self.file, start, end);
        }
        // The parser counted lines and characters as it read: no search of the line index.
        let span = Span {
            file: self.file,
            start,
            end: end.max(start),
            line: s.start.line(),
            column: s.start.col() + 1,
        };
        debug_assert_eq!(span, self.sources.span_from_bytes(self.file, start, end));
        span
    }

    fn anchor_name(&self, id: usize) -> String {
        self.anchor_names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    /// Refuses a map or list (or an alias of one) that would nest deeper than the limit.
    fn check_depth(&self, depth: usize, span: Span, what: &str) -> Result<(), Diagnostic> {
        if depth > limits::MAX_DEPTH {
            return Err(nesting_too_deep(what, Some(depth)).at(Some(span)));
        }
        Ok(())
    }

    fn open(&self) -> Open {
        Open {
            values: self.budget.tree_values,
            text: self.budget.tree_text,
            child_depth: 0,
        }
    }

    fn event(&mut self, event: Event<'_>, raw: granit_parser::Span) -> Result<(), Diagnostic> {
        let span = self.span(raw);
        match event {
            Event::DocumentStart(..) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(Diagnostic::error(
                        "a spec file holds one YAML document, found a second `---`",
                    )
                    .at(Some(span))
                    .help("put environment-specific values in environments/<name>.yaml instead"));
                }
            }
            Event::Anchor(id, name) => {
                self.anchor_names.insert(id, name.into_owned());
            }
            Event::Scalar(value, style, anchor, tag) => {
                if let Some((original, entry)) =
                    self.placeholder(&value, style, anchor, tag.is_some(), span)
                {
                    return self.read_entry(original, entry);
                }
                let tag = tag.as_deref().map(|t| t.to_string());
                self.scalar(&value, style, anchor, tag, span)?;
            }
            Event::Alias(id) => self.alias(id, span)?,
            Event::SequenceStart(_, anchor, _) => self.start(span, anchor, false)?,
            Event::MappingStart(_, anchor, _) => self.start(span, anchor, true)?,
            Event::SequenceEnd | Event::MappingEnd => self.close_container(span)?,
            _ => {}
        }
        Ok(())
    }

    /// A map (`map`) or list starting at `span`: counted, checked and opened.
    fn start(&mut self, span: Span, anchor: usize, map: bool) -> Result<(), Diagnostic> {
        let open = self.open();
        self.open_container(span)?;
        let frame = if map {
            Frame::Map {
                first: self.entries.len(),
                span,
                pending: None,
                anchor,
                open,
                keys: KeySet::default(),
            }
        } else {
            Frame::Seq {
                first: self.items.len(),
                span,
                anchor,
                open,
            }
        };
        self.stack.push(frame);
        Ok(())
    }

    /// The file's text and the next scanned entry, when a scalar is that entry's placeholder, read by the parser as the entry would be: a list item of its own, plain,
    /// untagged, unanchored, where the entry starts. One that is not (a line of a block scalar,
    /// of a multi-line string) is left unread, and the caller reads the whole text again.
    fn placeholder(
        &self,
        value: &str,
        style: ScalarStyle,
        anchor: usize,
        tagged: bool,
        span: Span,
    ) -> Option<(&'a str, &'a scan::Entry)> {
        let placeholders = self.placeholders?;
        let entry = placeholders.entries.get(self.entries_read)?;
        let is_entry = span.start == entry.start
            && value == "x"
            && style == ScalarStyle::Plain
            && anchor == 0
            && !tagged
            && matches!(self.stack.last(), Some(Frame::Seq { .. }));
        is_entry.then_some((placeholders.original, entry))
    }

    /// A scanned entry's values, in place of its placeholder.
    fn read_entry(&mut self, original: &str, entry: &scan::Entry) -> Result<(), Diagnostic> {
        self.entries_read += 1;
        entries::replay(original, entry, &mut EntrySink { builder: self })
    }

    /// A scalar: counted, kept for its aliases when anchored, and added to its container.
    fn scalar(
        &mut self,
        value: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<String>,
        span: Span,
    ) -> Result<(), Diagnostic> {
        self.budget.tree_values += 1;
        self.budget.tree_text += value.len();
        if anchor != 0 {
            self.budget.copied_values += 1;
            self.budget.copied_text += value.len();
        }
        self.budget.check(span, String::new)?;
        let size = Size {
            values: 1,
            text: value.len(),
            depth: 0,
        };
        let kind = resolve_scalar(value, style, tag);
        let node = Node::new(kind, span);
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        self.push(node, size)?;
        Ok(())
    }

    /// An alias: its anchored value again, counted against the alias expansion limit.
    fn alias(&mut self, id: usize, span: Span) -> Result<(), Diagnostic> {
        let name = self.anchor_name(id);
        let Some((node, size)) = self.anchors.get(&id) else {
            // The parser resolves every alias to an earlier anchor; one whose value is
            // not finished yet is inside that value.
            return Err(Diagnostic::error(format!(
                "alias `*{name}` refers to the map or list that contains it: a value cannot contain itself"
            ))
            .at(Some(span))
            .help(format!("move `*{name}` out of the value anchored as `&{name}`")));
        };
        let size = *size;
        self.check_depth(
            self.stack.len() + size.depth,
            span,
            &format!("alias `*{name}`"),
        )?;
        let before = self.budget.alias_values;
        self.budget.alias_values += size.values;
        if self.budget.alias_values > limits::MAX_ALIAS_VALUES {
            return Err(Diagnostic::error(format!(
                "alias `*{name}` exceeds the alias expansion limit of {} values per spec: it repeats {} on top of the {} that the aliases before it repeated",
                limits::count(limits::MAX_ALIAS_VALUES as u64),
                limits::values(size.values),
                limits::count(before as u64),
            ))
            .at(Some(span))
            .help("aliases of aliases multiply (ten aliases of ten aliases is a hundred copies): write the shared values out, or share smaller ones"));
        }
        self.budget.tree_values += size.values;
        self.budget.tree_text += size.text;
        self.budget.check(span, || {
            format!(
                ": alias `*{name}` repeats {} and {} of text",
                limits::values(size.values),
                limits::bytes(size.text)
            )
        })?;
        let node = node.clone();
        self.push(node, size)?;
        Ok(())
    }

    /// The end of a map or list: the finished container, kept for its aliases when anchored,
    /// is added to its parent.
    fn close_container(&mut self, span: Span) -> Result<(), Diagnostic> {
        // A finished container is allocated at its size: a spec of thousands of manifests is
        // hundreds of thousands of nodes.
        let (node, anchor, open) = match self.stack.pop() {
            Some(Frame::Seq {
                first,
                span: start,
                anchor,
                open,
            }) => (
                Node::new(
                    NodeKind::Seq(self.items.drain(first..).collect()),
                    self.cover(start, span),
                ),
                anchor,
                open,
            ),
            Some(Frame::Map {
                first,
                span: start,
                anchor,
                open,
                ..
            }) => (
                Node::new(
                    NodeKind::Map(self.entries.drain(first..).collect()),
                    self.cover(start, span),
                ),
                anchor,
                open,
            ),
            None => return Ok(()),
        };
        let size = Size {
            values: self.budget.tree_values - open.values,
            text: self.budget.tree_text - open.text,
            depth: open.child_depth + 1,
        };
        if anchor != 0 {
            self.budget.copied_values += size.values;
            self.budget.copied_text += size.text;
            let name = self.anchor_name(anchor);
            self.budget.check(node.span, || {
                format!(": the value anchored as `&{name}` is kept for its aliases")
            })?;
            self.anchors.insert(anchor, (node.clone(), size));
        }
        self.push(node, size)?;
        Ok(())
    }

    /// Counts a map or list that starts at `span` and checks its depth.
    fn open_container(&mut self, span: Span) -> Result<(), Diagnostic> {
        self.check_depth(self.stack.len() + 1, span, "this map or list")?;
        self.budget.tree_values += 1;
        self.budget.check(span, String::new)
    }

    fn cover(&self, start: Span, end: Span) -> Span {
        let mut s = start;
        s.end = end.end.max(start.end);
        s
    }

    fn push(&mut self, node: Node, size: Size) -> Result<(), Diagnostic> {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { open, .. }) => {
                open.child_depth = open.child_depth.max(size.depth);
                self.items.push(node)
            }
            Some(Frame::Map {
                first,
                pending,
                open,
                keys,
                ..
            }) => match pending.take() {
                None => {
                    let span = node.span;
                    let name = match node.kind {
                        NodeKind::Str { value, .. } => value,
                        NodeKind::Int(i) => i.to_string(),
                        NodeKind::Bool(b) => b.to_string(),
                        NodeKind::Float(f) => f.to_string(),
                        NodeKind::Null => "null".into(),
                        _ => {
                            return Err(Diagnostic::error("mapping keys must be plain strings")
                                .at(Some(span)));
                        }
                    };
                    if keys.seen(&self.entries[*first..], &name) {
                        return Err(Diagnostic::error(format!("duplicate key `{name}`"))
                            .at(Some(span))
                            .help("each key may appear once in a map; remove or merge the repeated one"));
                    }
                    *pending = Some(Key { name, span });
                }
                Some(key) => {
                    open.child_depth = open.child_depth.max(size.depth);
                    self.entries.push((key, node))
                }
            },
        }
        Ok(())
    }
}

/// A scanned entry's values, given to the builder as the parser's events would be.
struct EntrySink<'b, 'a> {
    builder: &'b mut YamlBuilder<'a>,
}

impl EntrySink<'_, '_> {
    /// The span of a token, as the parser gives it.
    fn span(&self, at: scan::Token) -> Span {
        let span = Span {
            file: self.builder.file,
            start: at.start,
            end: at.end,
            line: at.line,
            column: at.column + 1,
        };
        debug_assert_eq!(
            span,
            self.builder
                .sources
                .span_from_bytes(self.builder.file, at.start, at.end)
        );
        span
    }
}

impl scan::Sink for EntrySink<'_, '_> {
    fn start_map(&mut self, at: scan::Token) -> Result<(), Diagnostic> {
        let span = self.span(at);
        self.builder.start(span, 0, true)
    }
    fn start_seq(&mut self, at: scan::Token) -> Result<(), Diagnostic> {
        let span = self.span(at);
        self.builder.start(span, 0, false)
    }
    fn end(&mut self, at: scan::Token) -> Result<(), Diagnostic> {
        let span = self.span(at);
        self.builder.close_container(span)
    }
    fn scalar(
        &mut self,
        value: &str,
        style: ScalarStyle,
        at: scan::Token,
    ) -> Result<(), Diagnostic> {
        let span = self.span(at);
        self.builder.scalar(value, style, 0, None, span)
    }
}

/// YAML 1.2 core schema resolution for plain scalars; quoted and block scalars are strings.
fn resolve_scalar(value: &str, style: ScalarStyle, tag: Option<String>) -> NodeKind {
    let string = || NodeKind::Str {
        value: value.to_string(),
        interpolated: false,
    };
    if let Some(tag) = tag
        && tag.ends_with(":str")
    {
        return string();
    }
    if style != ScalarStyle::Plain {
        return string();
    }
    match value {
        "" | "~" | "null" | "Null" | "NULL" => return NodeKind::Null,
        "true" | "True" | "TRUE" => return NodeKind::Bool(true),
        "false" | "False" | "FALSE" => return NodeKind::Bool(false),
        _ => {}
    }
    if let Some(i) = parse_yaml_int(value) {
        return NodeKind::Int(i);
    }
    if looks_like_float(value)
        && let Ok(f) = value.parse::<f64>()
    {
        return NodeKind::Float(f);
    }
    string()
}

fn parse_yaml_int(v: &str) -> Option<i64> {
    let (neg, digits) = match v.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    let parsed = if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if let Some(oct) = digits.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()?
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse::<i64>().ok()?
    } else {
        return None;
    };
    Some(if neg { -parsed } else { parsed })
}

fn looks_like_float(v: &str) -> bool {
    let body = v.trim_start_matches(['-', '+']);
    !body.is_empty()
        && body
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
        && body.chars().any(|c| c.is_ascii_digit())
}

/// Parses TOML into a [`Node`]. TOML has no aliases, but the depth, value and text limits of
/// [`super::limits`] apply as they do to YAML.
pub fn parse_toml(sources: &SourceMap, file: FileId) -> Result<Node, Diagnostic> {
    parse_toml_within(sources, file, &mut Budget::default())
}

/// Converts a parsed TOML document into [`Node`]s, counting against a budget.
struct TomlConvert<'a> {
    sources: &'a SourceMap,
    file: FileId,
    budget: &'a mut Budget,
}

impl TomlConvert<'_> {
    fn count(&mut self, span: Span, text: usize) -> Result<(), Diagnostic> {
        self.budget.tree_values += 1;
        self.budget.tree_text += text;
        self.budget.check(span, String::new)
    }

    fn convert(
        &mut self,
        value: &DeValue<'_>,
        range: std::ops::Range<usize>,
        depth: usize,
    ) -> Result<Node, Diagnostic> {
        let span = self
            .sources
            .span_from_bytes(self.file, range.start, range.end);
        if matches!(value, DeValue::Array(_) | DeValue::Table(_)) && depth > limits::MAX_DEPTH {
            return Err(nesting_too_deep("this table or array", Some(depth)).at(Some(span)));
        }
        let text = match value {
            DeValue::String(s) => s.len(),
            _ => 0,
        };
        self.count(span, text)?;
        let kind = match value {
            DeValue::String(s) => NodeKind::Str {
                value: s.to_string(),
                interpolated: false,
            },
            DeValue::Integer(i) => NodeKind::Int(toml_integer(i, span)?),
            DeValue::Float(f) => NodeKind::Float(toml_float(f)),
            DeValue::Boolean(b) => NodeKind::Bool(*b),
            DeValue::Datetime(d) => NodeKind::Str {
                value: d.to_string(),
                interpolated: false,
            },
            DeValue::Array(items) => NodeKind::Seq(
                items
                    .iter()
                    .map(|v| self.convert(v.get_ref(), v.span(), depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            DeValue::Table(t) => NodeKind::Map(
                t.iter()
                    .map(|(k, v)| {
                        let key_span =
                            self.sources
                                .span_from_bytes(self.file, k.span().start, k.span().end);
                        self.count(key_span, k.get_ref().len())?;
                        Ok((
                            Key {
                                name: k.get_ref().to_string(),
                                span: key_span,
                            },
                            self.convert(v.get_ref(), v.span(), depth + 1)?,
                        ))
                    })
                    .collect::<Result<_, Diagnostic>>()?,
            ),
        };
        Ok(Node::new(kind, span))
    }
}

/// A TOML integer (any radix, with `_` separators) as an `i64`, or an error at `span` when it is
/// out of range.
fn toml_integer(i: &DeInteger<'_>, span: Span) -> Result<i64, Diagnostic> {
    let raw = i.as_str().replace('_', "");
    let (neg, digits) = match raw.strip_prefix('-') {
        Some(d) => (true, d.to_string()),
        None => (false, raw.trim_start_matches('+').to_string()),
    };
    let digits = digits
        .trim_start_matches("0x")
        .trim_start_matches("0o")
        .trim_start_matches("0b");
    let v = i64::from_str_radix(digits, i.radix()).map_err(|_| {
        Diagnostic::error(format!("integer `{raw}` is out of range")).at(Some(span))
    })?;
    Ok(if neg { -v } else { v })
}

/// A TOML float, `inf` and `nan` included.
fn toml_float(f: &DeFloat<'_>) -> f64 {
    let raw = f.as_str().replace('_', "");
    match raw.trim_start_matches('+') {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        "nan" | "-nan" => f64::NAN,
        other => other.parse().unwrap_or(f64::NAN),
    }
}

/// [`parse_toml`], counting against `budget` (see [`parse_yaml_within`]).
pub fn parse_toml_within(
    sources: &SourceMap,
    file: FileId,
    budget: &mut Budget,
) -> Result<Node, Diagnostic> {
    use toml::de::DeTable;
    let text = sources
        .get(file)
        .map(|f| f.text.clone())
        .unwrap_or_default();
    let table = DeTable::parse(&text).map_err(|e| {
        let range = e.span().unwrap_or(0..0);
        let span = sources.span_from_bytes(file, range.start, range.end);
        if e.message().contains("recurs") {
            // The TOML parser's own bound on nested inline arrays and tables.
            return nesting_too_deep("this table or array", None).at(Some(span));
        }
        Diagnostic::error(format!("TOML syntax error: {}", e.message())).at(Some(span))
    })?;

    let span = table.span();
    let root = DeValue::Table(table.into_inner());
    TomlConvert {
        sources,
        file,
        budget,
    }
    .convert(&root, span, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(name: &str, text: &str) -> Result<Node, Diagnostic> {
        let mut sources = SourceMap::default();
        let id = sources.add(name, text.to_string());
        if name.ends_with(".toml") {
            parse_toml(&sources, id)
        } else {
            parse_yaml(&sources, id)
        }
    }

    /// `levels` anchored lists, each holding `fan` aliases of the one before.
    fn laughs(fan: usize, levels: usize) -> String {
        let mut out = format!("a0: &a0 [{}]\n", vec!["lol"; fan].join(", "));
        for i in 1..levels {
            let prev = format!("*a{}", i - 1);
            out.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; fan].join(", ")));
        }
        out
    }

    /// Every value's span, as the parser counted it, is where the text puts it: lines and
    /// columns in characters, through multi-byte text, tabs, flow and block collections, block
    /// scalars and NEL and line-separator characters (text to YAML 1.2); and with carriage
    /// returns or a byte order mark, which the parser counts otherwise, from the file's line
    /// index.
    #[test]
    fn spans_are_where_the_text_says() {
        fn every_span(node: &Node, out: &mut Vec<Span>) {
            out.push(node.span);
            match &node.kind {
                NodeKind::Seq(items) => items.iter().for_each(|n| every_span(n, out)),
                NodeKind::Map(entries) => entries.iter().for_each(|(k, v)| {
                    out.push(k.span);
                    every_span(v, out)
                }),
                _ => {}
            }
        }
        let text = "name: \"ünïcode ✓ \u{85}\u{2028}\"\nlist:\n  - {a: 1, b: [x, \"y\"]}\n  -\tplain\n  - |\n    block ✓\n    text\nlast: ✓ done\ntail: a\u{85}b\u{2028}c # a comment \u{2028} too\nend: 1\n";
        for text in [
            text.to_string(),
            text.replace('\n', "\r\n"),
            format!("\u{feff}{text}"),
        ] {
            let mut sources = SourceMap::default();
            let id = sources.add("f.yaml", text.clone());
            let root = parse_yaml(&sources, id).unwrap();
            let mut spans = Vec::new();
            every_span(&root, &mut spans);
            for span in spans {
                assert_eq!(
                    span,
                    sources.span_from_bytes(id, span.start, span.end),
                    "{text:?}"
                );
            }
            let last = root.get("last").unwrap().span;
            assert_eq!((last.line, &text[last.start..last.end]), (8, "✓ done"));
            let b = root
                .at(&Path::root().key("list").index(0).key("b"))
                .unwrap();
            assert_eq!((b.span.line, b.span.column), (3, 15), "{text:?}");
            // NEL and the line separator are text to YAML 1.2, not line breaks.
            assert_eq!(root.get("end").unwrap().span.line, 10, "{text:?}");
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_at_the_alias_that_crosses_the_limit() {
        // Nine levels of ten: a billion values from 500 bytes.
        let e = parse("f.yaml", &laughs(10, 9)).unwrap_err();
        assert!(
            e.message
                .contains("alias `*a3` exceeds the alias expansion limit of 100,000 values"),
            "{e:?}"
        );
        let span = e.span.unwrap();
        assert_eq!((span.line, span.column), (5, 45), "{e:?}");
    }

    #[test]
    fn aliases_within_the_limits_expand() {
        let n = parse("f.yaml", "a: &x {k: [1, 2]}\nb: *x\nc: [*x, *x]\n").unwrap();
        assert_eq!(
            n.to_json(),
            serde_json::json!({"a": {"k": [1, 2]}, "b": {"k": [1, 2]},
                "c": [{"k": [1, 2]}, {"k": [1, 2]}]})
        );
        // Four levels of ten aliases: 12,330 repeated values, under the limit.
        assert!(parse("f.yaml", &laughs(10, 4)).is_ok());
    }

    #[test]
    fn an_alias_inside_its_own_anchor_is_refused() {
        let e = parse("f.yaml", "a: &x [1, *x]\n").unwrap_err();
        assert!(e.message.contains("cannot contain itself"), "{e:?}");
        assert_eq!(e.span.map(|s| (s.line, s.column)), Some((1, 11)));
    }

    #[test]
    fn nesting_past_the_limit_is_refused_where_it_crosses() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse("f.yaml", &deep(limits::MAX_DEPTH)).is_ok());
        let e = parse("f.yaml", &deep(limits::MAX_DEPTH + 1)).unwrap_err();
        assert!(e.message.contains("nesting limit of 64 levels"), "{e:?}");
        assert_eq!(e.span.map(|s| s.column), Some(65));
        // Deep enough for the parser's own limit or a stack overflow: refused the same way.
        let e = parse("f.yaml", &deep(100_000)).unwrap_err();
        assert!(e.message.contains("nesting limit"), "{e:?}");
        // An alias counts with what it repeats: 63 levels under a map and a list is 65.
        let text = format!("a: &a {}\nb: [*a]\n", deep(63));
        let e = parse("f.yaml", &text).unwrap_err();
        assert!(
            e.message.contains("alias `*a` exceeds the nesting limit"),
            "{e:?}"
        );
        // TOML: inline arrays and tables nested by dotted keys alike.
        let e = parse("f.toml", &format!("a = {}\n", deep(70))).unwrap_err();
        assert!(e.message.contains("nesting limit of 64"), "{e:?}");
        let e = parse("f.toml", &format!("a{} = 1\n", ".a".repeat(200))).unwrap_err();
        assert!(e.message.contains("nesting limit of 64"), "{e:?}");
    }

    #[test]
    fn values_past_the_limit_are_refused() {
        let list = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        // The list itself is one value.
        assert!(parse("f.yaml", &list(limits::MAX_VALUES - 1)).is_ok());
        let e = parse("f.yaml", &list(limits::MAX_VALUES)).unwrap_err();
        assert!(e.message.contains("limit of 500,000 values"), "{e:?}");
        let e = parse("f.toml", &format!("a = {}\n", list(limits::MAX_VALUES))).unwrap_err();
        assert!(e.message.contains("limit of 500,000 values"), "{e:?}");
        // Anchored values are kept twice, and counted twice.
        let text = format!("a: &a {}\n", list(limits::MAX_VALUES / 2));
        let e = parse("f.yaml", &text).unwrap_err();
        assert!(e.message.contains("limit of 500,000 values"), "{e:?}");
    }

    /// A spec and its overlay share one budget: two files each under the limit can be over it
    /// together.
    #[test]
    fn the_spec_and_its_overlay_share_the_limits() {
        let list = format!("[{}]", vec!["0"; limits::MAX_VALUES * 3 / 5].join(","));
        let mut sources = SourceMap::default();
        let base = sources.add("gkq.yaml", list.clone());
        let overlay = sources.add("environments/x.toml", format!("a = {list}\n"));
        let mut budget = Budget::default();
        assert!(parse_yaml_within(&sources, base, &mut budget).is_ok());
        let e = parse_toml_within(&sources, overlay, &mut budget).unwrap_err();
        assert!(e.message.contains("limit of 500,000 values"), "{e:?}");
        assert_eq!(e.span.map(|s| s.file), Some(overlay));
    }

    #[test]
    fn text_past_the_limit_is_refused() {
        // One MiB repeated 20 times through aliases.
        let long = "x".repeat(1024 * 1024);
        let text = format!("a: &a {long}\nb: [{}]\n", vec!["*a"; 20].join(", "));
        let e = parse("f.yaml", &text).unwrap_err();
        assert!(e.message.contains("limit of 16 MiB of text"), "{e:?}");
        assert!(
            e.message
                .contains("alias `*a` repeats 1 value and 1 MiB of text"),
            "{e:?}"
        );
    }

    #[test]
    fn duplicate_keys_are_found_in_large_maps() {
        let mut text: String = (0..40).map(|i| format!("k{i}: {i}\n")).collect();
        assert!(parse("f.yaml", &text).is_ok());
        text.push_str("k7: again\n");
        let e = parse("f.yaml", &text).unwrap_err();
        assert_eq!(e.message, "duplicate key `k7`");
        assert_eq!(e.span.map(|s| s.line), Some(41));
    }

    /// A reading of a text, and what it spent of the budget.
    type Read<T> = (T, Budget);

    /// `text` read with its one-line JSON entries read as JSON (`None` when that reading was
    /// not taken), and by the YAML parser alone.
    fn both_ways(text: &str) -> (Option<Read<Node>>, Read<Result<Node, Diagnostic>>) {
        let mut sources = SourceMap::default();
        let id = sources.add("f.yaml", text.to_string());
        let mut budget = Budget::default();
        let fast = read_with_entries(&sources, id, text, &mut budget).map(|n| (n, budget));
        let mut budget = Budget::default();
        let yaml = read_yaml(&sources, id, text, None, &mut budget).map(|(n, _)| n);
        (fast, (yaml, budget))
    }

    /// What the loader reads in `text` (its tree, or its error): what the YAML parser alone
    /// reads, and when scanners read entries of it, the same tree and budget.
    fn read_as_the_parser_reads(text: &str) -> Result<Node, Diagnostic> {
        let (fast, yaml) = both_ways(text);
        if let Some(fast) = fast {
            assert_alike(&fast, &yaml, text);
        }
        let mut sources = SourceMap::default();
        let id = sources.add("f.yaml", text.to_string());
        assert_eq!(parse_yaml(&sources, id), yaml.0, "{text}");
        yaml.0
    }

    /// The same tree (spans included) and the same budget spent.
    fn assert_alike(fast: &Read<Node>, yaml: &Read<Result<Node, Diagnostic>>, text: &str) {
        assert_eq!(Some(&fast.0), yaml.0.as_ref().ok(), "{text}");
        assert_eq!(format!("{:?}", fast.1), format!("{:?}", yaml.1), "{text}");
    }

    /// Entries written as one line of JSON, read by the JSON scanner, are what the YAML parser
    /// reads in them, spans included: compact and spaced JSON, escapes, multi-byte text before
    /// and inside them, numbers of every JSON form, empty and nested collections, lists as
    /// entries, entries in nested lists beside block entries, and a last line without a break.
    #[test]
    fn json_entries_are_read_as_the_yaml_parser_reads_them() {
        let text = concat!(
            "project: \"prøject ✓\"\n",
            "manifests:\n",
            "  - {\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ü-1\",\"labels\":{}},\"data\":{\"a.py\":\"x = \\\"é\\\"\\n\\ttab\\\\ \\/ \\b\\f\\r \\u00e9\\u0000 ✓\"}}\n",
            "  -   { \"n\": [0, -0, 1.5, -2e10, 1E+2, 0.5e-3, 12345678901234567890], \"b\": [true, false, null], \"e\": {}, \"l\": [] }   \n",
            "  - [1, {\"a\": [[], [{}]]}, \"s\"]\n",
            "  - apiVersion: v1\n",
            "    kind: Block\n",
            "jobs:\n",
            "  - name: a\n",
            "    more:\n",
            "      - {\"k\": \"ü\", \"k2\": \"✓✓\"}\n",
            "      - plain\n",
            "  - {\"last\": true}",
        );
        let (fast, yaml) = both_ways(text);
        let fast = fast.expect("every entry read as JSON");
        assert_alike(&fast, &yaml, text);
        let entries = entries::find(text);
        assert_eq!(entries.len(), 6);
        assert_eq!(
            fast.0
                .get("manifests")
                .and_then(|m| m.at(&Path::root().index(0).key("data").key("a.py")))
                .and_then(Node::as_str),
            Some("x = \"é\"\n\ttab\\ / \u{8}\u{c}\r é\u{0} ✓")
        );
    }

    /// A line that looks like a JSON entry but is not one to the YAML parser (a line of a block
    /// scalar, of a multi-line string or plain scalar, inside a flow list), or one whose JSON the
    /// scanner does not take (a tab, a space before a colon or comma, a character YAML does not
    /// allow unescaped, a surrogate escape, deep nesting, a long key, a comment after it): the
    /// file reads as the YAML parser alone reads it, errors included.
    #[test]
    fn what_only_looks_like_a_json_entry_is_read_by_the_yaml_parser() {
        let long_key = "k".repeat(1100);
        let deep = format!("{}1{}", "[".repeat(20), "]".repeat(20));
        let not_entries = [
            "script: |\n  - {\"a\": 1}\n  - [2]\nlist:\n  - {\"b\": 2}\n".to_string(),
            "quoted: \"first\n  - {\\\"a\\\": 1}\n  end\"\nlist:\n  - {\"b\": 2}\n".to_string(),
            "plain: first\n  - {\"a\": 1}\nlist:\n  - {\"b\": 2}\n".to_string(),
            "list:\n  - {\"b\": 2}\n  - x\nflow: [\n  - {\"a\": 1}\n  ]\n".to_string(),
            "list:\n  - {\"a\":\t1}\n".to_string(),
            "list:\n  - {\"a\" : 1}\n  - {\"a\": 1 , \"b\": 2}\n".to_string(),
            "list:\n  - {\"a\": \"\u{85}\u{9f}\u{7f}\"}\n".to_string(),
            "list:\n  - {\"a\": \"\\ud83d\\ude00\"}\n".to_string(),
            format!("list:\n  - {deep}\n"),
            format!("list:\n  - {{\"{long_key}\": 1}}\n"),
            "list:\n  - {\"a\": 1} # a comment\n".to_string(),
            "list:\n  - {\"a\": 1}\n    more text\n".to_string(),
            "list:\n  - {\"a\": 1}\n    b: 2\n".to_string(),
            "list:\n  - {\"a\": 1}\n  : 2\n".to_string(),
            "list:\n  - {\"a\": 01}\n  - {\"a\": 1.}\n  - {\"a\": tru}\n  - {a: 1}\n".to_string(),
        ];
        for text in &not_entries {
            let _ = read_as_the_parser_reads(text);
        }
        // The block scalar's lines are its text, not entries.
        assert_eq!(entries::find(&not_entries[0]).len(), 1);
        assert_eq!(
            read_as_the_parser_reads(&not_entries[0])
                .unwrap()
                .get("script")
                .and_then(Node::as_str),
            Some("- {\"a\": 1}\n- [2]\n")
        );
    }

    /// A problem inside a JSON entry is told as the YAML parser's reading tells it. (What an
    /// entry spends of the limits is the same either way: see `assert_alike`.)
    #[test]
    fn problems_in_json_entries_are_told_as_the_yaml_parser_tells_them() {
        let duplicate = "list:\n  - {\"a\": 1}\n  - {\"b\": 1, \"b\": 2}\n";
        let mut sources = SourceMap::default();
        let id = sources.add("f.yaml", duplicate.to_string());
        let e = parse_yaml(&sources, id).unwrap_err();
        assert_eq!(e.message, "duplicate key `b`");
        let (fast, yaml) = both_ways(duplicate);
        assert!(fast.is_none());
        assert_eq!(Err(e), yaml.0);
    }

    /// Entries written as block YAML of the plain kind (maps and lists, indented and in their
    /// key's column, plain, quoted and literal scalars, JSON on a line, comments and blank lines
    /// anywhere, multi-byte text) are read by the block scanner as the YAML parser reads them,
    /// spans included, up to a last entry without a line break.
    #[test]
    fn block_entries_are_read_as_the_yaml_parser_reads_them() {
        let text = concat!(
            "project: p\n",
            "manifests:\n",
            "- apiVersion: v1\n",
            "  kind: ConfigMap   # a comment\n",
            "  metadata:\n",
            "    name: ü-1 two  words\n",
            "    labels:\n",
            "      app.kubernetes.io/name: a#b:c\n",
            "      x: y\n",
            "      n_1: -1\n",
            "  data:\n",
            "    train.py: |\n",
            "\n",
            "      import jax  # not a comment\n",
            "        indented: more\n",
            "\n",
            "      - not an entry\n",
            "\n",
            "    strip: |-   # comment\n",
            "      z\n",
            "# a comment in the first column\n",
            "    keep: |+\n",
            "      k\n",
            "\n",
            "\n",
            "    quoted: \"a\\tb \\\"c\\\" é\"\n",
            "    single: 'it''s # not a comment'\n",
            "    json: {\"a\": [1, \"b\"], \"c\": {}}\n",
            "    empty: []\n",
            "  list:\n",
            "  - a\n",
            "  -   b: 1\n",
            "      c: [true, null]\n",
            "  indented:\n",
            "      - 1.5\n",
            "        # between\n",
            "      - key: value\n",
            "        more:\n",
            "          deep: 0x1F\n",
            "  after: ✓ ✓\n",
            "-   plain scalar entry\n",
            "- 'quoted entry'\n",
            "- k: |\n",
            "    last\n",
            "other: 1\n",
            "list:\n",
            "  - a: 1\n",
            "    b: 2",
        );
        let (fast, yaml) = both_ways(text);
        let fast = fast.expect("every entry read by a scanner");
        assert_alike(&fast, &yaml, text);
        let found = entries::find(text);
        assert_eq!(
            found.iter().map(|e| e.line).collect::<Vec<_>>(),
            [3, 41, 42, 43, 47],
            "the entries (not one inside an entry that a scanner takes, nor in a block scalar)"
        );
        let data = fast
            .0
            .get("manifests")
            .and_then(|m| m.at(&Path::root().index(0).key("data")));
        let text_of = |key: &str| data.and_then(|d| d.get(key)).and_then(Node::as_str);
        assert_eq!(
            text_of("train.py"),
            Some("\nimport jax  # not a comment\n  indented: more\n\n- not an entry\n")
        );
        assert_eq!(text_of("keep"), Some("k\n\n\n"));
        assert_eq!(text_of("single"), Some("it's # not a comment"));
        // Where the last map and list end, and a block before a comment or the end.
        for text in [
            "l:\n- a: b\n# cé",
            "l:\n- a: b\n   ",
            "l:\n- a: |\n    x\n  # c\n",
            "l:\n- a: |+\n    x\n\n",
            "l:\n- a: |-\n\n    x\n",
            "l:\n  -   a: 'x'\n      b:\n      - 1\n      c: 2\n",
        ] {
            let (fast, yaml) = both_ways(text);
            assert_alike(&fast.expect(text), &yaml, text);
        }
    }

    /// Text the block scanner does not take, or that only looks like a list entry, reads as the
    /// YAML parser alone reads it, errors included: tabs, anchors, aliases and tags, empty and
    /// continued values, folded blocks and indentation indicators, lines of spaces in a block,
    /// keys that are not plain, values that hold `: `, flow that is not JSON, bad indentation,
    /// duplicate keys, deep nesting, document markers, entries inside a block scalar.
    #[test]
    fn what_the_block_scanner_does_not_take_is_read_by_the_yaml_parser() {
        let deep = (0..20).fold(String::from("- "), |text, depth| {
            format!("{text}k{depth}:\n{}", " ".repeat(2 * depth + 4))
        }) + "v\n";
        let texts = [
            "l:\n- a:\tb\n".to_string(),
            "l:\n- a: b\t\n".to_string(),
            "l:\n- a: &x b\n  c: *x\n".to_string(),
            "l:\n- a: !!str 1\n".to_string(),
            "l:\n- a:\n  b: 1\n".to_string(),
            "l:\n- a: one\n    two\n".to_string(),
            "l:\n- one\n  two\n".to_string(),
            "l:\n- a: >\n    folded\n".to_string(),
            "l:\n- a: |2\n      two\n".to_string(),
            "l:\n- a: |\n    x\n      \n    y\n".to_string(),
            "l:\n- a: |\n    x\n  \n".to_string(),
            "l:\n- ? a\n  : b\n".to_string(),
            "l:\n- \"a\": b\n".to_string(),
            "l:\n- a b: c\n".to_string(),
            "l:\n- a: b: c\n".to_string(),
            "l:\n- a: [b, c]\n".to_string(),
            "l:\n- a: 1\n   b: 2\n".to_string(),
            "l:\n- a: 1\n - b: 2\n".to_string(),
            "l:\n- a: 1\n  a: 2\n".to_string(),
            "l:\n- a: 1\n---\n- b\n".to_string(),
            "l:\n- ---\n- ...\n".to_string(),
            "s: |\n  - a: 1\n  - b\nl:\n- c: 2\n".to_string(),
            "s: \"x\n  - a: 1\n  y\"\nl:\n- c: 2\n".to_string(),
            "l: [\n- a: 1\n]\n".to_string(),
            "l:\n- a: |\n    no break".to_string(),
            "l:\n- a: |\n  b: 1\n".to_string(),
            "l:\n- a: \"\u{85}\"\n- b: \u{7f}\n".to_string(),
            "l:\n- a: 'open\n  quote'\n".to_string(),
            "l:\n- a: b # ok\n  c: d #: e\n".to_string(),
            "l:\n- a: 1\n  - b\n".to_string(),
            "l:\n- -\n- - -\n".to_string(),
            "l:\n- a: -\n- b: - c\n".to_string(),
            "l:\n- a: |\n    x\n   y: 1\n".to_string(),
            "l:\n- a:\n  - b\n  c: 1\n".to_string(),
            deep,
        ];
        for text in &texts {
            let _ = read_as_the_parser_reads(text);
        }
        // The block scalar's lines are its text, not entries.
        assert_eq!(entries::find(&texts[21]).len(), 1);
        assert_eq!(
            read_as_the_parser_reads(&texts[21])
                .unwrap()
                .get("s")
                .and_then(Node::as_str),
            Some("- a: 1\n- b\n")
        );
    }

    /// A random document written as block YAML, each value in a style picked at random (plain
    /// text as it comes, double- or single-quoted, a literal block, JSON; lists indented or in
    /// their key's column; extra spaces and comments), with keys plain, quoted or as they come,
    /// and text that YAML may read otherwise or refuse: what the loader reads is what the YAML
    /// parser reads.
    fn block_yaml(
        value: &serde_json::Value,
        indent: usize,
        inline: bool,
        picks: &mut dyn Iterator<Item = u8>,
        out: &mut String,
    ) {
        use serde_json::Value;
        let line = |out: &mut String, indent: usize| {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
        };
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (i, (key, value)) in map.iter().enumerate() {
                    if i > 0 || !inline {
                        line(out, indent);
                    }
                    match pick(picks, 4) {
                        0 => out.push_str(&serde_json::to_string(key).unwrap()),
                        1 => out.push_str(key),
                        // A plain key, as people write them.
                        _ => {
                            let plain: String =
                                key.chars().filter(char::is_ascii_lowercase).collect();
                            out.push_str(&format!("{plain}k{i}"));
                        }
                    }
                    out.push(':');
                    block_yaml(value, indent + 2, false, picks, out);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                let indent = if !inline && pick(picks, 2) == 0 {
                    indent - 2
                } else {
                    indent
                };
                for (i, item) in items.iter().enumerate() {
                    if i > 0 || !inline {
                        line(out, indent);
                    }
                    let extra = pick(picks, 3) as usize;
                    out.push('-');
                    out.push_str(&" ".repeat(1 + extra));
                    block_yaml(item, indent + 2 + extra, true, picks, out);
                }
            }
            Value::String(text) if text.contains('\n') && pick(picks, 3) > 0 => {
                if !inline {
                    out.push(' ');
                }
                let body = text.trim_end_matches('\n');
                out.push_str(match text.len() - body.len() {
                    0 => "|-",
                    1 => "|",
                    _ => "|+",
                });
                for text_line in body.split('\n') {
                    line(out, indent);
                    out.push_str(text_line);
                }
                for _ in 1..(text.len() - body.len()) {
                    out.push('\n');
                }
            }
            scalar => {
                if !inline {
                    out.push_str(&" ".repeat(1 + pick(picks, 2) as usize));
                }
                match (scalar, pick(picks, 4)) {
                    (Value::String(text), 0) => out.push_str(text),
                    (Value::String(text), 1) => {
                        out.push_str(&format!("'{}'", text.replace('\'', "''")))
                    }
                    _ => out.push_str(&serde_json::to_string(scalar).unwrap()),
                }
                if pick(picks, 4) == 0 {
                    out.push_str("  # a comment");
                }
            }
        }
    }

    /// One of `n` choices.
    fn pick(picks: &mut dyn Iterator<Item = u8>, n: u8) -> u8 {
        picks.next().unwrap_or(0) % n
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e12f64..1e12).prop_map(Value::from),
            "[ -~éü✓\u{80}-\u{a0}\u{2028}\u{fffe}\t\n\"\\\\/]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-zé\" ]{0,6}", inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        // Most random documents are refused or are not YAML: more cases, for enough of them
        // that a scanner reads.
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Any document written as block YAML in random styles reads as the YAML parser
        /// reads it.
        #[test]
        fn any_block_entry_reads_as_the_yaml_parser_reads_it(
            values in prop::collection::vec(json_value(), 1..4),
            picks in prop::collection::vec(any::<u8>(), 0..64),
            end_with_break in any::<bool>(),
        ) {
            let mut text = String::from("manifests:");
            let mut picks = picks.into_iter().cycle();
            for value in &values {
                text.push_str("\n- ");
                block_yaml(value, 2, true, &mut picks, &mut text);
            }
            text.push_str("\nafter: 1");
            if end_with_break {
                text.push('\n');
            }
            let _ = read_as_the_parser_reads(&text);
        }
    }

    proptest! {
        /// Any JSON object or list written on one line (compact or with spaces after commas and
        /// colons), as an entry among block entries, reads as the YAML parser reads it.
        #[test]
        fn any_json_entry_reads_as_the_yaml_parser_reads_it(
            values in prop::collection::vec(json_value(), 1..4),
            spaced in any::<bool>(),
        ) {
            let mut text = String::from("manifests:\n  - block: 1\n");
            for value in &values {
                let wrapped = match value {
                    serde_json::Value::Array(_) | serde_json::Value::Object(_) => value.clone(),
                    other => serde_json::json!({"v": other}),
                };
                let mut line = serde_json::to_string(&wrapped).unwrap();
                if spaced {
                    line = serde_json::to_string_pretty(&wrapped).unwrap().lines().map(str::trim).collect::<Vec<_>>().join(" ");
                }
                text.push_str(&format!("  - {line}\n"));
            }
            let _ = read_as_the_parser_reads(&text);
        }
    }
}
