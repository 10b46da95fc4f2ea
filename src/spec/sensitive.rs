//! Values the spec says are secret, and how text is kept from showing them.
//!
//! A variable declared `sensitive: true` (a token, a password) is sensitive wherever its value
//! ends up, inside longer strings too. Plans, plan files and rendered objects replace it through
//! [`crate::diff::sensitive::Redactor`], which uses [`SensitiveValues::redact`]; diagnostics
//! through [`SensitiveValues::redact_quoting`], applied by [`super::Diagnostics`] to everything
//! it holds.

/// Placeholder for a sensitive value whose marker is not wanted (inside longer strings, in
/// diagnostics).
pub const REDACTED: &str = "(sensitive value)";

/// Values that no output may show: kept out of `Debug` too.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SensitiveValues(Vec<String>);

impl std::fmt::Debug for SensitiveValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SensitiveValues({} hidden)", self.0.len())
    }
}

impl SensitiveValues {
    /// The non-empty `values`, longest first: a value that contains another is replaced whole.
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = values.into_iter().filter(|v| !v.is_empty()).collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        SensitiveValues(values)
    }

    pub fn values(&self) -> &[String] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These values and `other`'s.
    pub fn union(&self, other: &SensitiveValues) -> SensitiveValues {
        SensitiveValues::new(self.0.iter().chain(&other.0).cloned())
    }

    /// `text` with every sensitive value in it replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for value in &self.0 {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        out
    }

    /// [`Self::redact`] for a message about a value: when the message quoted a sensitive value,
    /// what else it quotes from that value goes too (a parser says where it stopped reading:
    /// `invalid quantity "s3cr3t": unexpected 's'`, `unknown suffix "Gii"`).
    pub fn redact_quoting(&self, text: &str) -> String {
        let quoted: Vec<&str> = self
            .0
            .iter()
            .map(String::as_str)
            .filter(|v| text.contains(v))
            .collect();
        if quoted.is_empty() {
            return text.to_string();
        }
        let redacted = self.redact(text);
        replace_quoted(&redacted, |inner| {
            inner != REDACTED && quoted.iter().any(|v| v.contains(inner))
        })
    }
}

/// The values of the Secrets among `manifests` (their `data` and `stringData`), as written: no
/// diagnostic shows them either.
pub fn secret_values(manifests: &[serde_json::Value]) -> SensitiveValues {
    SensitiveValues::new(manifests.iter().flat_map(|manifest| {
        crate::vocab::object::secret_maps(manifest)
            .iter()
            .filter_map(|map| manifest.get(*map).and_then(serde_json::Value::as_object))
            .flat_map(|entries| entries.values())
            // Kubernetes takes only strings there; the API server refuses anything else.
            .filter_map(|value| value.as_str().map(str::to_string))
    }))
}

/// `text` with each quoted part (in `"`, `'` or `` ` ``) for which `hide` holds replaced by
/// [`REDACTED`]. A quote opens only after a character that is not a letter or digit, and closes
/// only before one, so the apostrophe of "the queue's" is not a quote.
fn replace_quoted(text: &str, hide: impl Fn(&str) -> bool) -> String {
    let is_word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    // Quotes are one byte each: `i + 1` is the character after one.
    let find_from = |from: usize, accept: &dyn Fn(usize, char) -> bool| {
        text[from..]
            .char_indices()
            .map(|(i, c)| (from + i, c))
            .find(|&(i, c)| accept(i, c))
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some((open, quote)) = find_from(from, &|i, c| {
        matches!(c, '"' | '\'' | '`') && !is_word(text[..i].chars().next_back())
    }) {
        let Some((close, _)) = find_from(open + 1, &|i, c| {
            c == quote && !is_word(text[i + 1..].chars().next())
        }) else {
            break;
        };
        let inner = &text[open + 1..close];
        if !inner.is_empty() && hide(inner) {
            out.push_str(&text[copied..=open]);
            out.push_str(REDACTED);
            copied = close;
        }
        from = close + 1;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_replaced_inside_longer_text_longest_first() {
        let hidden = SensitiveValues::new(["s3cr3t".into(), "s3cr3t-long".into(), String::new()]);
        assert_eq!(
            hidden.redact("--token=s3cr3t-long --other=s3cr3t"),
            "--token=(sensitive value) --other=(sensitive value)"
        );
        assert_eq!(hidden.redact("nothing here"), "nothing here");
        assert!(!format!("{hidden:?}").contains("s3cr3t"));
    }

    #[test]
    fn the_values_of_secrets_are_collected_and_nothing_else() {
        let manifests = [
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                "data": {"a": "c2VjcmV0"}, "stringData": {"b": "plain-secret", "n": 7}}),
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                "data": {"a": "not-secret"}}),
        ];
        let hidden = secret_values(&manifests);
        assert_eq!(hidden.values(), ["plain-secret", "c2VjcmV0"]);
    }

    #[test]
    fn diagnostics_never_show_what_they_were_told_to_hide() {
        use crate::spec::{Diagnostic, Diagnostics};
        let mut said = Diagnostics::default();
        said.push(Diagnostic::error("label `team: Opal-Wombat` is not valid"));
        said.hide(&SensitiveValues::new(["Opal-Wombat".to_string()]));
        // Added later, directly or from diagnostics that were not told.
        said.push(Diagnostic::error("x").help("did you mean `Opal-Wombat`?"));
        let mut validation = Diagnostics::default();
        validation.push(Diagnostic::warning("name `Opal-Wombat` is long"));
        said.extend(validation);
        let text: Vec<String> = said
            .iter()
            .map(|d| format!("{} {:?}", d.message, d.help))
            .collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(
            text.iter()
                .all(|t| t.contains(REDACTED) && !t.contains("Opal")),
            "{text:?}"
        );
        // What was told travels with the diagnostics it was told to.
        let mut outer = Diagnostics::default();
        outer.extend(said);
        outer.push(Diagnostic::error("`Opal-Wombat` again"));
        assert!(outer.iter().all(|d| !d.message.contains("Opal")));
    }

    #[test]
    fn what_a_message_quotes_from_a_sensitive_value_goes_with_it() {
        let hidden = SensitiveValues::new(["Hunter2Gii".into()]);
        assert_eq!(
            hidden.redact_quoting(
                r#"invalid quantity "Hunter2Gii": unknown suffix "Gii"; expected one of `Mi`"#
            ),
            r#"invalid quantity "(sensitive value)": unknown suffix "(sensitive value)"; expected one of `Mi`"#
        );
        assert_eq!(
            hidden.redact_quoting("`Hunter2Gii` is not valid (unexpected 'H' at byte 0)"),
            "`(sensitive value)` is not valid (unexpected '(sensitive value)' at byte 0)"
        );
        // An apostrophe is not a quote; a message that does not quote the value is left alone.
        assert_eq!(
            hidden.redact_quoting("the queue's 'Hunter2Gii' and 'H'"),
            "the queue's '(sensitive value)' and '(sensitive value)'"
        );
        assert_eq!(
            hidden.redact_quoting(r#"unknown suffix "Gii""#),
            r#"unknown suffix "Gii""#
        );
    }
}
