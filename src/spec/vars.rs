//! `${NAME}` interpolation. Unlike envsubst, an undeclared or unset variable is an error at the
//! place it is used; nothing is ever silently replaced by an empty string. `$${` writes a literal
//! `${`.
//!
//! A declared variable's value comes from `--var NAME=VALUE`, else the process environment
//! variable `GKQ_VAR_NAME` (never `NAME` itself: a shell's `CLUSTER_NAME` must not retarget a
//! plan), else its default. [`resolve_values`] is the one place that rule lives; the spec digest
//! reuses what it resolved ([`crate::spec::Loaded::variables`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::diag::{Diagnostic, Diagnostics};
use super::limits;
use super::node::{Node, NodeKind};

/// The prefix of the process environment variables that set declared variables, as Terraform's
/// `TF_VAR_`: `GKQ_VAR_CLUSTER_NAME` sets `${CLUSTER_NAME}`.
pub const ENV_PREFIX: &str = "GKQ_VAR_";

/// The process environment variable that sets the declared variable `name`.
pub fn env_name(name: &str) -> String {
    format!("{ENV_PREFIX}{name}")
}

/// Where a variable's value came from, for `--var` > environment > default precedence.
pub struct VarSources<'a> {
    pub cli: &'a BTreeMap<String, String>,
    /// Looks up a process environment variable by its full name (`GKQ_VAR_ZONE`).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// A value that came from outside the spec, as plans report it (never with the value).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ValueSource {
    /// `--var NAME=VALUE`.
    Cli,
    /// The process environment variable `GKQ_VAR_NAME`.
    Environment,
}

/// A declared variable's value and where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedVar {
    /// `None` for a declared variable without a value (an error where it is used).
    pub value: Option<String>,
    /// `None` when the value is the spec's default (or there is none).
    pub from: Option<ValueSource>,
    /// Declared `sensitive`: the value is never shown.
    pub sensitive: bool,
}

/// Values are left out: a variable may carry a token.
impl std::fmt::Debug for ResolvedVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedVar")
            .field("value", &self.value.as_ref().map(|_| "<set>"))
            .field("from", &self.from)
            .field("sensitive", &self.sensitive)
            .finish()
    }
}

/// Resolves the values of the variables declared under `variables:` in `root`. Warns about a
/// process variable named like a declared one (`CLUSTER_NAME`), which is not read.
pub fn resolve_values(
    root: &Node,
    sources: &VarSources<'_>,
    diags: &mut Diagnostics,
) -> BTreeMap<String, ResolvedVar> {
    let mut values = BTreeMap::new();
    let mut default_spans = BTreeMap::new();
    if let Some(NodeKind::Map(decls)) = root.get("variables").map(|n| &n.kind) {
        for (key, decl) in decls {
            if let Some(d) = decl.get("default") {
                default_spans.insert(key.name.clone(), d.span);
            }
            let default = decl.get("default").and_then(|d| match &d.kind {
                NodeKind::Str { value, .. } => Some(value.clone()),
                NodeKind::Int(i) => Some(i.to_string()),
                NodeKind::Float(f) => Some(f.to_string()),
                NodeKind::Bool(b) => Some(b.to_string()),
                _ => None,
            });
            // Anything but an absent or `false` flag hides the value: a flag of the wrong type
            // is reported when the spec is decoded, and its value is not shown meanwhile.
            let sensitive = decl
                .get("sensitive")
                .is_some_and(|flag| !matches!(flag.kind, NodeKind::Bool(false) | NodeKind::Null));
            let prefixed = env_name(&key.name);
            let resolved = if let Some(value) = sources.cli.get(&key.name) {
                ResolvedVar {
                    value: Some(value.clone()),
                    from: Some(ValueSource::Cli),
                    sensitive,
                }
            } else if let Some(value) = (sources.env)(&prefixed) {
                ResolvedVar {
                    value: Some(value),
                    from: Some(ValueSource::Environment),
                    sensitive,
                }
            } else {
                if (sources.env)(&key.name).is_some() {
                    diags.push(
                        Diagnostic::warning(format!(
                            "the environment variable `{}` is not read: variable `{}` {}",
                            key.name,
                            key.name,
                            if default.is_some() {
                                "keeps its default"
                            } else {
                                "has no value"
                            }
                        ))
                        .at(Some(key.span))
                        .help(format!(
                            "gkq reads only prefixed environment variables: export {prefixed}=VALUE, or pass --var {}=VALUE",
                            key.name
                        )),
                    );
                }
                ResolvedVar {
                    value: default,
                    from: None,
                    sensitive,
                }
            };
            values.insert(key.name.clone(), resolved);
        }
    }
    expand_defaults(&mut values, &default_spans, diags);
    for name in sources.cli.keys() {
        if !values.contains_key(name) {
            diags.push(
                Diagnostic::error(format!("--var {name}: the spec declares no variable `{name}`"))
                    .help(format!("declare it under `variables:` (e.g. `{name}: {{default: ...}}`) or fix the name")),
            );
        }
    }
    values
}

/// The values of the variables declared `sensitive`.
pub fn sensitive_values(values: &BTreeMap<String, ResolvedVar>) -> super::SensitiveValues {
    super::SensitiveValues::new(
        values
            .values()
            .filter(|v| v.sensitive)
            .filter_map(|v| v.value.clone()),
    )
}

/// The names `${NAME}` references in `text` (`$${` escapes are not references).
fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        let after = &rest[pos..];
        if let Some(tail) = after.strip_prefix("$${") {
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            match tail.find('}') {
                Some(end) => {
                    out.push(tail[..end].to_string());
                    rest = &tail[end + 1..];
                }
                None => break,
            }
        } else {
            rest = &after[1..];
        }
    }
    out
}

/// Expands `${OTHER}` in default values (`IMAGE: {default: "${REGISTRY}/ray"}`), in dependency
/// order, so a default never ships a literal `${...}`. A cycle (`A -> B -> A`) is an error at the
/// default that closes it, naming the cycle. Values from `--var` or the environment are taken as
/// given.
fn expand_defaults(
    values: &mut BTreeMap<String, ResolvedVar>,
    spans: &BTreeMap<String, super::source::Span>,
    diags: &mut Diagnostics,
) {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Visiting,
        Done,
        /// On a cycle: no value (the cycle is reported once).
        Failed,
    }
    fn visit(
        name: &str,
        values: &mut BTreeMap<String, ResolvedVar>,
        spans: &BTreeMap<String, super::source::Span>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
        diags: &mut Diagnostics,
    ) {
        match marks.get(name) {
            Some(Mark::Done | Mark::Failed) => return,
            Some(Mark::Visiting) => {
                let start = path.iter().position(|n| n == name).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..].to_vec();
                cycle.push(name.to_string());
                let closing = path.last().cloned().unwrap_or_else(|| name.to_string());
                diags.push(
                    Diagnostic::error(format!(
                        "the defaults of variables {} refer to each other in a cycle",
                        cycle.join(" -> ")
                    ))
                    .at(spans.get(&closing).copied())
                    .help("give one of them a plain default (or a value with --var)"),
                );
                for member in &cycle {
                    marks.insert(member.clone(), Mark::Failed);
                    if let Some(var) = values.get_mut(member) {
                        var.value = None;
                    }
                }
                return;
            }
            None => {}
        }
        let Some(var) = values.get(name) else {
            return;
        };
        let text = match (&var.from, &var.value) {
            (None, Some(text)) if text.contains("${") => text.clone(),
            _ => {
                marks.insert(name.to_string(), Mark::Done);
                return;
            }
        };
        marks.insert(name.to_string(), Mark::Visiting);
        path.push(name.to_string());
        for reference in references(&text) {
            visit(&reference, values, spans, marks, path, diags);
        }
        path.pop();
        if marks.get(name) == Some(&Mark::Failed) {
            return;
        }
        marks.insert(name.to_string(), Mark::Done);
        let current = values_of(values);
        let refused = match substitute(&text, &current, super::limits::MAX_TEXT_BYTES) {
            Ok(Some(expanded)) => {
                if let Some(var) = values.get_mut(name) {
                    var.value = Some(expanded);
                }
                None
            }
            Ok(None) => None,
            Err(Refusal::Invalid(d)) => Some(d),
            Err(Refusal::TooLong) => Some(
                Diagnostic::error(format!(
                    "the default of variable `{name}` grows past {} once the variables it uses are substituted",
                    super::limits::bytes(super::limits::MAX_TEXT_BYTES)
                ))
                .help("keep variable values short: a spec's text has a size limit"),
            ),
        };
        if let Some(d) = refused {
            diags.push(d.at(spans.get(name).copied()));
            if let Some(var) = values.get_mut(name) {
                var.value = None;
            }
        }
    }
    let mut marks = BTreeMap::new();
    let names: Vec<String> = values.keys().cloned().collect();
    for name in names {
        visit(&name, values, spans, &mut marks, &mut Vec::new(), diags);
    }
}

/// The values alone, for interpolation and the spec digest.
pub fn values_of(resolved: &BTreeMap<String, ResolvedVar>) -> BTreeMap<String, Option<String>> {
    resolved
        .iter()
        .map(|(name, var)| (name.clone(), var.value.clone()))
        .collect()
}

/// The variables whose values came from outside the spec, with their sources, sorted by name.
pub fn external_sources(resolved: &BTreeMap<String, ResolvedVar>) -> Vec<(String, ValueSource)> {
    resolved
        .iter()
        .filter_map(|(name, var)| var.from.map(|from| (name.clone(), from)))
        .collect()
}

/// Substitutes variables in every string of `node` except the `variables` section itself.
///
/// Substitution may add at most `may_add` bytes (what is left of [`limits::MAX_TEXT_BYTES`]
/// once the files are read): a long value used in many places (or many times in one string)
/// would otherwise multiply the spec's size. Past the limit, one error is reported where it was
/// crossed and substitution stops.
pub fn interpolate(
    node: &mut Node,
    values: &BTreeMap<String, Option<String>>,
    may_add: usize,
    diags: &mut Diagnostics,
) {
    let mut budget = Some(may_add);
    if let NodeKind::Map(entries) = &mut node.kind {
        for (key, value) in entries.iter_mut() {
            if key.name != "variables" {
                walk(value, values, diags, &mut budget);
            }
        }
    } else {
        walk(node, values, diags, &mut budget);
    }
}

/// `budget`: how many bytes substitution may still add; `None` once it ran out.
fn walk(
    node: &mut Node,
    values: &BTreeMap<String, Option<String>>,
    diags: &mut Diagnostics,
    budget: &mut Option<usize>,
) {
    let Some(left) = budget else {
        return;
    };
    match &mut node.kind {
        NodeKind::Str {
            value,
            interpolated,
        } if value.contains('$') => match substitute(value, values, *left) {
            Ok(Some(new)) => {
                *left -= new.len().saturating_sub(value.len());
                *value = new;
                *interpolated = true;
            }
            Ok(None) => {}
            Err(Refusal::TooLong) => {
                *budget = None;
                diags.push(
                    Diagnostic::error(format!(
                        "variables make the spec exceed the limit of {} of text: substituting this string crosses it",
                        limits::bytes(limits::MAX_TEXT_BYTES)
                    ))
                    .at(Some(node.span))
                    .help("a long value used in many places multiplies the spec: shorten the value or use it less often"),
                );
            }
            Err(Refusal::Invalid(d)) => diags.push(d.at(Some(node.span))),
        },
        NodeKind::Seq(items) => items
            .iter_mut()
            .for_each(|i| walk(i, values, diags, budget)),
        NodeKind::Map(entries) => entries
            .iter_mut()
            .for_each(|(_, v)| walk(v, values, diags, budget)),
        _ => {}
    }
}

/// Why a string cannot be substituted.
enum Refusal {
    Invalid(Diagnostic),
    /// It would grow by more than the bytes left.
    TooLong,
}

impl From<Diagnostic> for Refusal {
    fn from(d: Diagnostic) -> Self {
        Refusal::Invalid(d)
    }
}

/// Returns the substituted text, `None` when the text has no variable reference.
fn substitute(
    text: &str,
    values: &BTreeMap<String, Option<String>>,
    may_add: usize,
) -> Result<Option<String>, Refusal> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
            changed = true;
        } else if let Some(tail) = after.strip_prefix("${") {
            let Some(end) = tail.find('}') else {
                return Err(
                    Diagnostic::error(format!("unclosed variable reference in `{text}`"))
                        .help("write `${NAME}`, or `$${` for a literal `${`")
                        .into(),
                );
            };
            let name = &tail[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(Diagnostic::error(format!(
                    "invalid variable name `{name}` in `{text}`"
                ))
                .help("variable names use letters, digits and `_`")
                .into());
            }
            match values.get(name) {
                Some(Some(v)) => {
                    if out.len() + v.len() > text.len().saturating_add(may_add) {
                        return Err(Refusal::TooLong);
                    }
                    out.push_str(v)
                }
                Some(None) => {
                    return Err(Diagnostic::error(format!("variable `{name}` has no value"))
                        .help(format!(
                            "pass `--var {name}=VALUE`, export {ENV_PREFIX}{name}=VALUE, or give it a `default` under `variables:`"
                        ))
                        .into());
                }
                None => {
                    let hint = super::suggest(name, values.keys().map(String::as_str))
                        .map(|s| format!("did you mean `${{{s}}}`? "))
                        .unwrap_or_default();
                    return Err(
                        Diagnostic::error(format!("variable `{name}` is not declared"))
                            .help(format!(
                                "{hint}declare it under `variables:` with an optional default"
                            ))
                            .into(),
                    );
                }
            }
            rest = &tail[end + 1..];
            changed = true;
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(changed.then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Substitution without a size limit; its refusals as diagnostics.
    fn substitute(
        text: &str,
        values: &BTreeMap<String, Option<String>>,
    ) -> Result<Option<String>, Diagnostic> {
        match super::substitute(text, values, usize::MAX) {
            Ok(out) => Ok(out),
            Err(Refusal::Invalid(d)) => Err(d),
            Err(Refusal::TooLong) => panic!("no limit was set"),
        }
    }

    #[test]
    fn substitution_stops_at_its_size_limit() {
        let v = vals(&[("B", Some("0123456789"))]);
        assert!(matches!(
            super::substitute("${B}${B}${B}", &v, 17),
            Err(Refusal::TooLong)
        ));
        assert_eq!(
            super::substitute("${B}${B}${B}", &v, 18)
                .ok()
                .flatten()
                .map(|s| s.len()),
            Some(30)
        );
    }

    fn vals(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn substitutes_and_escapes() {
        let v = vals(&[("ZONE", Some("us-east5-b"))]);
        assert_eq!(
            substitute("at ${ZONE}!", &v).unwrap().as_deref(),
            Some("at us-east5-b!")
        );
        assert_eq!(
            substitute("$${ZONE}", &v).unwrap().as_deref(),
            Some("${ZONE}")
        );
        assert_eq!(substitute("cost $5", &v).unwrap(), None);
    }

    #[test]
    fn undeclared_and_unset_are_errors() {
        let v = vals(&[("ZONE", None), ("PROJECT", Some("p"))]);
        assert!(
            substitute("${ZONE}", &v)
                .unwrap_err()
                .message
                .contains("has no value")
        );
        let e = substitute("${PROJCT}", &v).unwrap_err();
        assert!(e.message.contains("not declared"));
        assert!(e.help.unwrap().contains("${PROJECT}"));
        assert!(substitute("${ZONE", &v).is_err());
    }
}
