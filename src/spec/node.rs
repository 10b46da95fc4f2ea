//! A format-neutral document tree with source spans: YAML and TOML both parse into [`Node`], so
//! overlays, variables and decoding work the same for both and every value keeps its location.

use std::fmt;

use granit_parser::{Event, Parser, ScalarStyle};

use super::diag::Diagnostic;
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
pub fn parse_yaml(sources: &SourceMap, file: FileId) -> Result<Node, Diagnostic> {
    let text = sources
        .get(file)
        .map(|f| f.text.clone())
        .unwrap_or_default();
    let mut builder = YamlBuilder {
        sources,
        file,
        text: &text,
        stack: Vec::new(),
        anchors: Default::default(),
        root: None,
        documents: 0,
    };
    for next in Parser::new_from_str(&text) {
        match next {
            Ok((event, span)) => builder.event(event, span)?,
            Err(e) => {
                let m = e.marker();
                let start = byte_offset_of_char(&text, m.index());
                let span = sources.span_from_bytes(file, start, start + 1);
                return Err(Diagnostic::error(format!("YAML syntax error: {}", e.info()))
                    .at(Some(span))
                    .help("check indentation, quotes and that every `key:` is followed by a space"));
            }
        }
    }
    Ok(builder.root.unwrap_or_else(|| {
        Node::new(
            NodeKind::Map(Vec::new()),
            sources.span_from_bytes(file, 0, 0),
        )
    }))
}

fn byte_offset_of_char(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map(|(b, _)| b)
        .unwrap_or(text.len())
}

enum Frame {
    Seq(Vec<Node>, Span, usize),
    Map(Vec<(Key, Node)>, Span, Option<Key>, usize),
}

struct YamlBuilder<'a> {
    sources: &'a SourceMap,
    file: FileId,
    text: &'a str,
    stack: Vec<Frame>,
    anchors: std::collections::HashMap<usize, Node>,
    root: Option<Node>,
    documents: usize,
}

impl YamlBuilder<'_> {
    fn span(&self, s: granit_parser::Span) -> Span {
        let start = s
            .start
            .byte_offset()
            .unwrap_or_else(|| byte_offset_of_char(self.text, s.start.index()));
        let end = s
            .end
            .byte_offset()
            .unwrap_or_else(|| byte_offset_of_char(self.text, s.end.index()));
        self.sources.span_from_bytes(self.file, start, end)
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
            Event::Scalar(value, style, anchor, tag) => {
                let kind = resolve_scalar(&value, style, tag.as_deref().map(|t| t.to_string()));
                let node = Node::new(kind, span);
                if anchor != 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push(node)?;
            }
            Event::Alias(id) => {
                let node = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| Diagnostic::error("unknown YAML alias").at(Some(span)))?;
                self.push(node)?;
            }
            Event::SequenceStart(_, anchor, _) => {
                self.stack.push(Frame::Seq(Vec::new(), span, anchor))
            }
            Event::MappingStart(_, anchor, _) => {
                self.stack.push(Frame::Map(Vec::new(), span, None, anchor))
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    // A finished container keeps no spare capacity: a spec of thousands of
                    // manifests is hundreds of thousands of nodes.
                    Some(Frame::Seq(mut items, start, anchor)) => (
                        Node::new(
                            NodeKind::Seq({
                                items.shrink_to_fit();
                                items
                            }),
                            self.cover(start, span),
                        ),
                        anchor,
                    ),
                    Some(Frame::Map(mut entries, start, _, anchor)) => (
                        Node::new(
                            NodeKind::Map({
                                entries.shrink_to_fit();
                                entries
                            }),
                            self.cover(start, span),
                        ),
                        anchor,
                    ),
                    None => return Ok(()),
                };
                if node.1 != 0 {
                    self.anchors.insert(node.1, node.0.clone());
                }
                self.push(node.0)?;
            }
            _ => {}
        }
        Ok(())
    }

    fn cover(&self, start: Span, end: Span) -> Span {
        let mut s = start;
        s.end = end.end.max(start.end);
        s
    }

    fn push(&mut self, node: Node) -> Result<(), Diagnostic> {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq(items, ..)) => items.push(node),
            Some(Frame::Map(entries, _, pending, _)) => match pending.take() {
                None => {
                    let name = match &node.kind {
                        NodeKind::Str { value, .. } => value.clone(),
                        NodeKind::Int(i) => i.to_string(),
                        NodeKind::Bool(b) => b.to_string(),
                        NodeKind::Float(f) => f.to_string(),
                        NodeKind::Null => "null".into(),
                        _ => {
                            return Err(Diagnostic::error("mapping keys must be plain strings")
                                .at(Some(node.span)));
                        }
                    };
                    if entries.iter().any(|(k, _)| k.name == name) {
                        return Err(Diagnostic::error(format!("duplicate key `{name}`"))
                            .at(Some(node.span))
                            .help("each key may appear once in a map; remove or merge the repeated one"));
                    }
                    *pending = Some(Key {
                        name,
                        span: node.span,
                    });
                }
                Some(key) => entries.push((key, node)),
            },
        }
        Ok(())
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

/// Parses TOML into a [`Node`].
pub fn parse_toml(sources: &SourceMap, file: FileId) -> Result<Node, Diagnostic> {
    use toml::de::{DeTable, DeValue};
    let text = sources
        .get(file)
        .map(|f| f.text.clone())
        .unwrap_or_default();
    let table = DeTable::parse(&text).map_err(|e| {
        let range = e.span().unwrap_or(0..0);
        Diagnostic::error(format!("TOML syntax error: {}", e.message()))
            .at(Some(sources.span_from_bytes(file, range.start, range.end)))
    })?;

    fn convert(
        sources: &SourceMap,
        file: FileId,
        value: &DeValue<'_>,
        range: std::ops::Range<usize>,
    ) -> Result<Node, Diagnostic> {
        let span = sources.span_from_bytes(file, range.start, range.end);
        let kind = match value {
            DeValue::String(s) => NodeKind::Str {
                value: s.to_string(),
                interpolated: false,
            },
            DeValue::Integer(i) => {
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
                NodeKind::Int(if neg { -v } else { v })
            }
            DeValue::Float(f) => {
                let raw = f.as_str().replace('_', "");
                NodeKind::Float(match raw.trim_start_matches('+') {
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    "nan" | "-nan" => f64::NAN,
                    other => other.parse().unwrap_or(f64::NAN),
                })
            }
            DeValue::Boolean(b) => NodeKind::Bool(*b),
            DeValue::Datetime(d) => NodeKind::Str {
                value: d.to_string(),
                interpolated: false,
            },
            DeValue::Array(items) => NodeKind::Seq(
                items
                    .iter()
                    .map(|v| convert(sources, file, v.get_ref(), v.span()))
                    .collect::<Result<_, _>>()?,
            ),
            DeValue::Table(t) => NodeKind::Map(
                t.iter()
                    .map(|(k, v)| {
                        Ok((
                            Key {
                                name: k.get_ref().to_string(),
                                span: sources.span_from_bytes(file, k.span().start, k.span().end),
                            },
                            convert(sources, file, v.get_ref(), v.span())?,
                        ))
                    })
                    .collect::<Result<_, Diagnostic>>()?,
            ),
        };
        Ok(Node::new(kind, span))
    }

    let span = table.span();
    let root = DeValue::Table(table.into_inner());
    convert(sources, file, &root, span)
}
