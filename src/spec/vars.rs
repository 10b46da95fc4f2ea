//! `${NAME}` interpolation. Unlike envsubst, an undeclared or unset variable is an error at the
//! place it is used; nothing is ever silently replaced by an empty string. `$${` writes a literal
//! `${`.

use std::collections::BTreeMap;

use super::diag::{Diagnostic, Diagnostics};
use super::limits;
use super::node::{Node, NodeKind};

/// Where a variable's value came from, for `--var` > environment > default precedence.
pub struct VarSources<'a> {
    pub cli: &'a BTreeMap<String, String>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// Resolves the values of the variables declared under `variables:` in `root`.
pub fn resolve_values(
    root: &Node,
    sources: &VarSources<'_>,
    diags: &mut Diagnostics,
) -> BTreeMap<String, Option<String>> {
    let mut values = BTreeMap::new();
    if let Some(NodeKind::Map(decls)) = root.get("variables").map(|n| &n.kind) {
        for (key, decl) in decls {
            let default = decl.get("default").and_then(|d| match &d.kind {
                NodeKind::Str { value, .. } => Some(value.clone()),
                NodeKind::Int(i) => Some(i.to_string()),
                NodeKind::Float(f) => Some(f.to_string()),
                NodeKind::Bool(b) => Some(b.to_string()),
                _ => None,
            });
            let value = sources
                .cli
                .get(&key.name)
                .cloned()
                .or_else(|| (sources.env)(&key.name))
                .or(default);
            values.insert(key.name.clone(), value);
        }
    }
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
                            "pass `--var {name}=VALUE`, export {name} in the environment, or give it a `default` under `variables:`"
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
