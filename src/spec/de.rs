//! A serde `Deserializer` over [`Node`]: decoding errors carry the span and path of the value
//! that caused them, so a wrong type or an unknown key is reported at its own line and column.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::node::{Node, NodeKind, Path, Seg};
use super::source::{SourceMap, Span};

#[derive(Debug, Clone, PartialEq)]
pub enum ErrorKind {
    UnknownKey {
        key: String,
        expected: Vec<String>,
    },
    MissingKey(String),
    UnknownValue {
        value: String,
        expected: Vec<String>,
    },
    WrongValue,
    Other,
}

/// A decoding error with the location of the offending value.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub span: Option<Span>,
    pub path: Option<Path>,
}

impl Error {
    fn new(kind: ErrorKind, message: String) -> Self {
        Self {
            kind,
            message,
            span: None,
            path: None,
        }
    }

    fn locate(mut self, span: Span, at: &At<'_>) -> Self {
        if self.span.is_none() {
            self.span = Some(span);
            self.path = Some(at.path());
        }
        self
    }
}

/// Where a node is: the steps from the root, each borrowed from the node tree and the decoding
/// above it. A [`Path`] (owned) is made of it only for an error: decoding a spec of thousands
/// of manifests visits every node, and owned paths cost allocations at each.
#[derive(Clone, Copy)]
enum At<'p> {
    Root,
    Key(&'p At<'p>, &'p str),
    Index(&'p At<'p>, usize),
}

impl At<'_> {
    fn path(&self) -> Path {
        let mut path = match self {
            At::Root => return Path::root(),
            At::Key(parent, _) | At::Index(parent, _) => parent.path(),
        };
        path.0.push(match self {
            At::Key(_, key) => Seg::Key(key.to_string()),
            At::Index(_, index) => Seg::Index(*index),
            At::Root => unreachable!("the root returned above"),
        });
        path
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::new(ErrorKind::WrongValue, msg.to_string())
    }

    fn invalid_type(unexp: de::Unexpected, exp: &dyn de::Expected) -> Self {
        Error::new(
            ErrorKind::WrongValue,
            format!(
                "expected {}, found {}",
                in_words(&exp.to_string()),
                describe(&unexp)
            ),
        )
    }

    fn invalid_value(unexp: de::Unexpected, exp: &dyn de::Expected) -> Self {
        Error::new(
            ErrorKind::WrongValue,
            format!(
                "invalid value {}: expected {}",
                describe(&unexp),
                in_words(&exp.to_string())
            ),
        )
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Error::new(
            ErrorKind::UnknownKey {
                key: field.to_string(),
                expected: expected.iter().map(|s| s.to_string()).collect(),
            },
            format!("unknown key `{field}`"),
        )
    }

    fn missing_field(field: &'static str) -> Self {
        Error::new(
            ErrorKind::MissingKey(field.to_string()),
            format!("missing required key `{field}`"),
        )
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Error::new(
            ErrorKind::UnknownValue {
                value: variant.to_string(),
                expected: expected.iter().map(|s| s.to_string()).collect(),
            },
            format!("unknown value `{variant}`"),
        )
    }
}

/// What serde expects, as a user reads it: Rust's type names become words and ranges.
fn in_words(expected: &str) -> String {
    match expected {
        "u8" => format!("a whole number from 0 to {}", u8::MAX),
        "u16" => format!("a whole number from 0 to {}", u16::MAX),
        "u32" => format!("a whole number from 0 to {}", u32::MAX),
        "u64" | "usize" | "u128" => "a whole number, 0 or more".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" | "i128" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a borrowed string" | "a string" => "text".to_string(),
        "a boolean" => "true or false".to_string(),
        "a sequence" => "a list".to_string(),
        other => other.to_string(),
    }
}

fn describe(unexp: &de::Unexpected) -> String {
    match unexp {
        de::Unexpected::Str(s) => format!("the string `{s}`"),
        de::Unexpected::Signed(i) => format!("the integer `{i}`"),
        de::Unexpected::Unsigned(i) => format!("the integer `{i}`"),
        de::Unexpected::Float(f) => format!("the number `{f}`"),
        de::Unexpected::Bool(b) => format!("the boolean `{b}`"),
        de::Unexpected::Unit => "null".into(),
        de::Unexpected::Seq => "a list".into(),
        de::Unexpected::Map => "a map".into(),
        other => other.to_string(),
    }
}

/// Decodes `T` from `node`.
pub fn from_node<'a, T: de::Deserialize<'a>>(
    node: &'a Node,
    sources: &'a SourceMap,
) -> Result<T, Error> {
    T::deserialize(NodeDeserializer {
        node,
        at: At::Root,
        sources,
    })
}

pub struct NodeDeserializer<'a, 'p> {
    node: &'a Node,
    at: At<'p>,
    sources: &'a SourceMap,
}

impl<'a> NodeDeserializer<'a, '_> {
    fn fail(&self, e: Error) -> Error {
        self.echo_typed_number(e).locate(self.node.span, &self.at)
    }

    /// Messages quote a number as the user typed it: `2.50000000000000001`, `1e400` and
    /// `12345678901234567890123` are not shown as the `2.5`, `inf` or rounded float they parse to.
    fn echo_typed_number(&self, mut e: Error) -> Error {
        let parsed = match &self.node.kind {
            NodeKind::Int(i) => i.to_string(),
            NodeKind::Float(f) => f.to_string(),
            _ => return e,
        };
        if let Some(typed) = self.scalar_text().filter(|t| *t != parsed) {
            e.message = e
                .message
                .replacen(&format!("`{parsed}`"), &format!("`{typed}`"), 1);
        }
        e
    }

    fn unexpected(&self) -> de::Unexpected<'a> {
        match &self.node.kind {
            NodeKind::Null => de::Unexpected::Unit,
            NodeKind::Bool(b) => de::Unexpected::Bool(*b),
            NodeKind::Int(i) => de::Unexpected::Signed(*i),
            NodeKind::Float(f) => de::Unexpected::Float(*f),
            NodeKind::Str { value, .. } => de::Unexpected::Str(value),
            NodeKind::Seq(_) => de::Unexpected::Seq,
            NodeKind::Map(_) => de::Unexpected::Map,
        }
    }

    /// The text the user wrote for a scalar (so `version: 1.30` stays "1.30", not "1.3").
    fn scalar_text(&self) -> Option<String> {
        match &self.node.kind {
            NodeKind::Str { value, .. } => Some(value.clone()),
            NodeKind::Int(_) | NodeKind::Float(_) | NodeKind::Bool(_) => {
                let span = self.node.span;
                self.sources
                    .get(span.file)
                    .and_then(|f| f.text.get(span.start..span.end))
                    .map(|t| t.trim().trim_matches(['"', '\'']).to_string())
                    .filter(|t| !t.is_empty())
                    .or_else(|| match &self.node.kind {
                        NodeKind::Int(i) => Some(i.to_string()),
                        NodeKind::Float(f) => Some(f.to_string()),
                        NodeKind::Bool(b) => Some(b.to_string()),
                        _ => None,
                    })
            }
            _ => None,
        }
    }

    fn integer(&self) -> Option<i64> {
        match &self.node.kind {
            NodeKind::Int(i) => Some(*i),
            NodeKind::Str {
                value,
                interpolated: true,
            } => value.trim().parse().ok(),
            _ => None,
        }
    }

    fn visit_int<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.integer() {
            Some(i) => visitor.visit_i64(i).map_err(|e| self.fail(e)),
            None => Err(self.fail(de::Error::invalid_type(self.unexpected(), &visitor))),
        }
    }
}

macro_rules! ints {
    ($($m:ident)*) => {$(
        fn $m<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
            self.visit_int(visitor)
        }
    )*};
}

impl<'a> de::Deserializer<'a> for NodeDeserializer<'a, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        let r = match &self.node.kind {
            NodeKind::Null => visitor.visit_unit(),
            NodeKind::Bool(b) => visitor.visit_bool(*b),
            NodeKind::Int(i) => visitor.visit_i64(*i),
            NodeKind::Float(f) => visitor.visit_f64(*f),
            NodeKind::Str { value, .. } => visitor.visit_str(value),
            NodeKind::Seq(items) => visitor.visit_seq(SeqAccess {
                items: items.iter(),
                index: 0,
                at: &self.at,
                sources: self.sources,
            }),
            NodeKind::Map(entries) => visitor.visit_map(MapAccess {
                entries: entries.iter(),
                value: None,
                at: &self.at,
                sources: self.sources,
            }),
        };
        r.map_err(|e| self.fail(e))
    }

    ints!(deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_u8
          deserialize_u16 deserialize_u32 deserialize_u64);

    fn deserialize_f32<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        let r = match &self.node.kind {
            NodeKind::Float(f) => visitor.visit_f64(*f),
            NodeKind::Int(i) => visitor.visit_f64(*i as f64),
            NodeKind::Str {
                value,
                interpolated: true,
            } if value.trim().parse::<f64>().is_ok() => {
                visitor.visit_f64(value.trim().parse().unwrap_or_default())
            }
            _ => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
        };
        r.map_err(|e| self.fail(e))
    }

    fn deserialize_bool<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        let r = match &self.node.kind {
            NodeKind::Bool(b) => visitor.visit_bool(*b),
            NodeKind::Str {
                value,
                interpolated: true,
            } if value == "true" || value == "false" => visitor.visit_bool(value == "true"),
            _ => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
        };
        r.map_err(|e| self.fail(e))
    }

    fn deserialize_char<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        let r = match (&self.node.kind, self.scalar_text()) {
            (NodeKind::Str { value, .. }, _) => visitor.visit_str(value),
            (_, Some(text)) => visitor.visit_string(text),
            _ => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
        };
        r.map_err(|e| self.fail(e))
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_none().map_err(|e| self.fail(e)),
            _ => {
                let (span, at) = (self.node.span, self.at);
                visitor.visit_some(self).map_err(|e| e.locate(span, &at))
            }
        }
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_unit().map_err(|e| self.fail(e)),
            _ => Err(self.fail(de::Error::invalid_type(self.unexpected(), &visitor))),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        let (span, at) = (self.node.span, self.at);
        visitor
            .visit_newtype_struct(self)
            .map_err(|e| e.locate(span, &at))
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Seq(items) => visitor
                .visit_seq(SeqAccess {
                    items: items.iter(),
                    index: 0,
                    at: &self.at,
                    sources: self.sources,
                })
                .map_err(|e| self.fail(e)),
            _ => Err(self.fail(de::Error::invalid_type(self.unexpected(), &visitor))),
        }
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Map(entries) => visitor
                .visit_map(MapAccess {
                    entries: entries.iter(),
                    value: None,
                    at: &self.at,
                    sources: self.sources,
                })
                .map_err(|e| self.fail(e)),
            _ => Err(self.fail(de::Error::invalid_type(self.unexpected(), &visitor))),
        }
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Str { value, .. } => {
                let de: de::value::StrDeserializer<'_, Error> = value.as_str().into_deserializer();
                visitor.visit_enum(de).map_err(|e| self.fail(e))
            }
            _ => Err(self.fail(de::Error::invalid_type(self.unexpected(), &visitor))),
        }
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

struct SeqAccess<'a, 'p> {
    items: std::slice::Iter<'a, Node>,
    index: usize,
    at: &'p At<'p>,
    sources: &'a SourceMap,
}

impl<'a> de::SeqAccess<'a> for SeqAccess<'a, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(node) = self.items.next() else {
            return Ok(None);
        };
        let at = At::Index(self.at, self.index);
        self.index += 1;
        seed.deserialize(NodeDeserializer {
            node,
            at,
            sources: self.sources,
        })
        .map(Some)
        .map_err(|e| e.locate(node.span, &at))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapAccess<'a, 'p> {
    entries: std::slice::Iter<'a, (super::node::Key, Node)>,
    /// The value of the key read last, and that key.
    value: Option<(&'a Node, &'a str)>,
    at: &'p At<'p>,
    sources: &'a SourceMap,
}

impl<'a> de::MapAccess<'a> for MapAccess<'a, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((value, key.name.as_str()));
        let de: de::value::StrDeserializer<'_, Error> = key.name.as_str().into_deserializer();
        seed.deserialize(de)
            .map(Some)
            .map_err(|e| e.locate(key.span, &At::Key(self.at, &key.name)))
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((node, key)) = self.value.take() else {
            return Err(de::Error::custom("value requested before key"));
        };
        let at = At::Key(self.at, key);
        seed.deserialize(NodeDeserializer {
            node,
            at,
            sources: self.sources,
        })
        .map_err(|e| e.locate(node.span, &at))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}
