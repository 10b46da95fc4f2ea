//! A forgiving reader over Kubernetes JSON objects that records precise problems.
//!
//! Missing or `null` fields take their Kubernetes defaults; a field of the wrong type or an
//! invalid quantity is recorded with its object and field path, and reading continues so that
//! every problem is reported at once.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::vocab::quantity::Quantity;

/// One problem in one object, e.g. `ClusterQueue cluster-queue:
/// spec.resourceGroups[0].flavors[1].resources[1].nominalQuota: invalid quantity "20Gii": ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// `Kind name` or `Kind namespace/name`.
    pub object: String,
    /// Dotted field path inside the object; empty for the object itself.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{}: {}: {}", self.object, self.field, self.message)
        }
    }
}

/// All problems found while reading objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParseErrors(pub Vec<ParseError>);

impl fmt::Display for ParseErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseErrors {}

/// Collects the problems of one object.
pub(crate) struct Context {
    object: String,
    errors: RefCell<Vec<ParseError>>,
    /// The paths of the fields read, spelled out only when a problem is reported: reading a
    /// job visits hundreds of fields and finds problems in few.
    steps: RefCell<Vec<Step>>,
    /// The object keys of `steps`, one after another.
    keys: RefCell<String>,
}

/// One step of a field path: from its parent's path (`ROOT`: none) to a key or a list item.
struct Step {
    parent: u32,
    segment: Segment,
}

enum Segment {
    /// An object key: a range of `Context::keys`.
    Key(u32, u32),
    Item(usize),
}

/// The path of the object itself.
const ROOT: u32 = u32::MAX;

impl Context {
    pub(crate) fn new(object: String) -> Context {
        Context {
            object,
            errors: RefCell::new(Vec::new()),
            steps: RefCell::new(Vec::new()),
            keys: RefCell::new(String::new()),
        }
    }

    /// Records one step below `parent`; returns the new path.
    fn step(&self, parent: u32, segment: impl FnOnce(&mut String) -> Segment) -> u32 {
        let segment = segment(&mut self.keys.borrow_mut());
        let mut steps = self.steps.borrow_mut();
        steps.push(Step { parent, segment });
        // Past u32::MAX steps the path is no longer named; reading goes on.
        u32::try_from(steps.len() - 1).unwrap_or(ROOT)
    }

    /// The dotted path `path` stands for, e.g. `spec.containers[0].resources`.
    fn path_text(&self, mut path: u32) -> String {
        let steps = self.steps.borrow();
        let keys = self.keys.borrow();
        let mut segments = Vec::new();
        while let Some(step) = steps.get(path as usize) {
            segments.push(&step.segment);
            path = step.parent;
        }
        let mut text = String::new();
        for segment in segments.into_iter().rev() {
            match *segment {
                Segment::Key(start, end) => {
                    if !text.is_empty() {
                        text.push('.');
                    }
                    text.push_str(&keys[start as usize..end as usize]);
                }
                Segment::Item(i) => {
                    use std::fmt::Write;
                    let _ = write!(text, "[{i}]");
                }
            }
        }
        text
    }

    pub(crate) fn report(&self, field: &str, message: impl Into<String>) {
        self.errors.borrow_mut().push(ParseError {
            object: self.object.clone(),
            field: field.to_string(),
            message: message.into(),
        });
    }

    pub(crate) fn root<'c, 'v>(&'c self, value: &'v Value) -> Field<'c, 'v> {
        Field {
            ctx: self,
            value: Some(value),
            path: ROOT,
        }
    }

    pub(crate) fn into_errors(self) -> Vec<ParseError> {
        self.errors.into_inner()
    }

    /// A context whose object is named only if it has problems: see [`Context::into_errors_of`].
    /// For readers that see many objects and find problems in few.
    pub(crate) fn unnamed() -> Context {
        Context::new(String::new())
    }

    /// The problems found, each naming the object `describe` gives; `describe` runs only when
    /// there is a problem to name.
    pub(crate) fn into_errors_of(self, describe: impl FnOnce() -> String) -> Vec<ParseError> {
        let mut errors = self.errors.into_inner();
        if !errors.is_empty() {
            let object = describe();
            for error in &mut errors {
                error.object.clone_from(&object);
            }
        }
        errors
    }
}

/// A possibly-missing value at a path.
#[derive(Clone)]
pub(crate) struct Field<'c, 'v> {
    ctx: &'c Context,
    value: Option<&'v Value>,
    /// In `ctx`'s steps.
    path: u32,
}

impl<'c, 'v> Field<'c, 'v> {
    pub(crate) fn report(&self, message: impl Into<String>) {
        self.ctx.report(&self.ctx.path_text(self.path), message);
    }

    /// The value unless missing or `null`.
    pub(crate) fn value(&self) -> Option<&'v Value> {
        self.value.filter(|v| !v.is_null())
    }

    pub(crate) fn is_present(&self) -> bool {
        self.value().is_some()
    }

    pub(crate) fn get(&self, key: &str) -> Field<'c, 'v> {
        let path = self.ctx.step(self.path, |keys| {
            let start = keys.len();
            keys.push_str(key);
            let offset = |at: usize| u32::try_from(at).unwrap_or(u32::MAX);
            Segment::Key(offset(start), offset(keys.len()))
        });
        let value = match self.value() {
            None => None,
            // Most objects of a job have a few keys: comparing them beats hashing the key.
            Some(Value::Object(map)) if map.len() <= 8 => {
                map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
            }
            Some(Value::Object(map)) => map.get(key),
            Some(_) => {
                self.report("expected an object");
                None
            }
        };
        Field {
            ctx: self.ctx,
            value,
            path,
        }
    }

    /// Array elements; missing means empty.
    pub(crate) fn items(&self) -> Vec<Field<'c, 'v>> {
        match self.value() {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, value)| Field {
                    ctx: self.ctx,
                    value: Some(value),
                    path: self.ctx.step(self.path, |_| Segment::Item(i)),
                })
                .collect(),
            Some(_) => {
                self.report("expected a list");
                Vec::new()
            }
        }
    }

    pub(crate) fn str(&self) -> Option<&'v str> {
        match self.value() {
            None => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                self.report("expected a string");
                None
            }
        }
    }

    pub(crate) fn string(&self) -> Option<String> {
        self.str().map(str::to_string)
    }

    pub(crate) fn i64(&self) -> Option<i64> {
        match self.value() {
            None => None,
            Some(Value::Number(n)) => match n.as_i64() {
                Some(v) => Some(v),
                None => {
                    self.report(format!("expected an integer, got {n}"));
                    None
                }
            },
            Some(_) => {
                self.report("expected an integer");
                None
            }
        }
    }

    /// An `int32` field, as Kubernetes declares counts and priorities.
    pub(crate) fn i32(&self) -> Option<i32> {
        let value = self.i64()?;
        match i32::try_from(value) {
            Ok(v) => Some(v),
            Err(_) => {
                self.report(format!("{value} does not fit in an int32"));
                None
            }
        }
    }

    pub(crate) fn bool(&self) -> Option<bool> {
        match self.value() {
            None => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => {
                self.report("expected true or false");
                None
            }
        }
    }

    pub(crate) fn quantity(&self) -> Option<Quantity> {
        let value = self.value()?;
        match Quantity::from_json(value) {
            Ok(q) => Some(q),
            Err(e) => {
                self.report(e.to_string());
                None
            }
        }
    }

    /// A `map[string]string` such as labels or a node selector.
    pub(crate) fn string_map(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        match self.value() {
            None => {}
            Some(Value::Object(entries)) => {
                for (key, value) in entries {
                    match value {
                        Value::String(s) => {
                            map.insert(key.clone(), s.clone());
                        }
                        _ => self.get(key).report("expected a string"),
                    }
                }
            }
            Some(_) => self.report("expected a map of strings"),
        }
        map
    }

    /// A `ResourceList`: resource name to quantity.
    pub(crate) fn resource_list(&self) -> BTreeMap<String, Quantity> {
        let mut list = BTreeMap::new();
        match self.value() {
            None => {}
            Some(Value::Object(entries)) => {
                for key in entries.keys() {
                    if let Some(q) = self.get(key).quantity() {
                        list.insert(key.clone(), q);
                    }
                }
            }
            Some(_) => self.report("expected a map of resource quantities"),
        }
        list
    }
}

/// `Kind namespace/name` or `Kind name` for messages.
pub(crate) fn describe(object: &Value) -> String {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    let metadata = object.get("metadata");
    let name = metadata
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    match metadata
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}
