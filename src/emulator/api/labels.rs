//! Resource Manager's label rules, which cluster and node-pool resource labels share.

use serde_json::{Map, Value};

use crate::emulator::rpc::ApiError;

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase()
        || c.is_ascii_digit()
        || c == '_'
        || c == '-'
        || (!c.is_ascii() && !c.is_uppercase())
}

/// Resource Manager label rules: at most 64; keys 1-63 characters starting with a lowercase
/// letter; keys and values of lowercase letters, digits, `_` and `-`; values up to 63.
pub(super) fn check_labels(labels: &Map<String, Value>) -> Result<(), ApiError> {
    if labels.len() > 64 {
        return Err(ApiError::invalid(format!(
            "Too many labels: {} (at most 64 are allowed).",
            labels.len()
        )));
    }
    for (k, v) in labels {
        let v = v.as_str().unwrap_or_default();
        let key_ok = !k.is_empty()
            && k.chars().count() <= 63
            && k.chars().next().is_some_and(|c| c.is_lowercase())
            && k.chars().all(is_label_char);
        if !key_ok {
            return Err(ApiError::invalid(format!(
                "Invalid label key \"{k}\": keys must be 1-63 characters, start with a lowercase \
                 letter, and contain only lowercase letters, digits, '_' and '-'."
            )));
        }
        if v.chars().count() > 63 || !v.chars().all(is_label_char) {
            return Err(ApiError::invalid(format!(
                "Invalid value \"{v}\" for label \"{k}\": values must be at most 63 characters of \
                 lowercase letters, digits, '_' and '-'."
            )));
        }
    }
    Ok(())
}
