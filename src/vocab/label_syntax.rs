//! What Kubernetes accepts as a label key, a label value and an annotation key, and as DNS
//! names, so that `validate` refuses at the spec's line what the API server would refuse at
//! apply time (and the local target would otherwise accept).
//!
//! The rules are Kubernetes' "Labels and Selectors", "Syntax and character set"
//! (<https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set>),
//! as `k8s.io/apimachinery` checks them (`pkg/util/validation/validation.go`, `IsQualifiedName`,
//! `IsValidLabelValue`, `IsDNS1123Label`, `IsDNS1123Subdomain`); annotation keys follow the same
//! key rule, lowercased (`pkg/api/validation/objectmeta.go`, `ValidateAnnotations`).
//! docs/kubernetes-api.md 5 says more.

/// Longest label value, and longest name part of a key.
pub const NAME_MAX: usize = 63;
/// Longest DNS subdomain, and so longest key prefix.
pub const SUBDOMAIN_MAX: usize = 253;

/// A DNS-1123 label: lowercase letters, digits and `-`, beginning and ending with a letter or
/// digit, at most 63 characters.
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A DNS-1123 subdomain: DNS labels joined by `.`, at most 253 characters.
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty() && name.len() <= SUBDOMAIN_MAX && name.split('.').all(is_dns_label)
}

/// What is wrong with a "qualified name" (a label value when non-empty, the name part of a
/// key): the first problem, in words.
fn name_problem(name: &str) -> Option<String> {
    let alphanumeric = |ch: char| ch.is_ascii_alphanumeric();
    if name.len() > NAME_MAX {
        return Some(format!(
            "it is {} characters long, more than {NAME_MAX}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|ch| !(alphanumeric(*ch) || matches!(ch, '-' | '_' | '.')))
    {
        return Some(format!("it contains `{bad}`"));
    }
    match (name.chars().next(), name.chars().last()) {
        (Some(first), _) if !alphanumeric(first) => Some(format!("it begins with `{first}`")),
        (_, Some(last)) if !alphanumeric(last) => Some(format!("it ends with `{last}`")),
        _ => None,
    }
}

/// What is wrong with a label value, if anything: at most 63 characters, empty or beginning
/// and ending with a letter or digit, with letters, digits, `-`, `_` and `.` between.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    name_problem(value)
}

/// What is wrong with a label or annotation key, if anything: a name (as a label value, but
/// not empty), optionally after a DNS-subdomain prefix and `/`.
pub fn key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if name.contains('/') {
            return Some("it has more than one `/`".into());
        }
        if !is_dns_subdomain(prefix) {
            return Some(format!(
                "its prefix `{prefix}` is not a DNS subdomain (lowercase letters, digits, `-` and `.`, at most {SUBDOMAIN_MAX} characters)"
            ));
        }
    }
    if name.is_empty() {
        return Some("its name part is empty".into());
    }
    name_problem(name).map(|problem| match prefix {
        Some(_) => format!("its name part `{name}`: {problem}"),
        None => problem,
    })
}

/// The rule for a label value, in a hint.
pub const LABEL_VALUE_RULE: &str = "a Kubernetes label value is at most 63 characters: empty, or letters, digits, `-`, `_` and `.` beginning and ending with a letter or digit";
/// The rule for a label or annotation key, in a hint.
pub const KEY_RULE: &str = "a Kubernetes label or annotation key is a name of at most 63 characters (letters, digits, `-`, `_` and `.`, beginning and ending with a letter or digit), optionally after a DNS-subdomain prefix and `/`, such as `example.com/team`";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_follow_kubernetes() {
        for ok in [
            "",
            "a",
            "MyValue",
            "my_value",
            "12345",
            "v1.2-rc_3",
            &"x".repeat(63),
        ] {
            assert_eq!(label_value_problem(ok), None, "{ok:?}");
        }
        let said = |v: &str| label_value_problem(v).unwrap_or_default();
        assert_eq!(
            said(&"x".repeat(64)),
            "it is 64 characters long, more than 63"
        );
        assert_eq!(said("ml team"), "it contains ` `");
        assert_eq!(said("team/ml"), "it contains `/`");
        assert_eq!(said("-ml"), "it begins with `-`");
        assert_eq!(said("ml."), "it ends with `.`");
        assert_eq!(said("_"), "it begins with `_`");
    }

    #[test]
    fn keys_follow_kubernetes() {
        for ok in [
            "team",
            "app.kubernetes.io/name",
            "cloud.google.com/gke-nodepool",
            "kueue.x-k8s.io/queue-name",
            "Team_1",
        ] {
            assert_eq!(key_problem(ok), None, "{ok:?}");
        }
        let said = |k: &str| key_problem(k).unwrap_or_default();
        assert_eq!(said(""), "its name part is empty");
        assert_eq!(said("example.com/"), "its name part is empty");
        assert_eq!(said("a/b/c"), "it has more than one `/`");
        assert!(said("Example.com/team").starts_with("its prefix `Example.com`"));
        assert!(said(&format!("{}/x", "a".repeat(254))).starts_with("its prefix"));
        assert_eq!(
            said("example.com/-team"),
            "its name part `-team`: it begins with `-`"
        );
        assert_eq!(
            said(&"k".repeat(64)),
            "it is 64 characters long, more than 63"
        );
    }

    #[test]
    fn dns_names() {
        assert!(is_dns_label("user-queue") && !is_dns_label("User") && !is_dns_label("a-"));
        assert!(is_dns_label(&"a".repeat(63)) && !is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("a.b-c.d") && !is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain(&"a.".repeat(127)));
    }
}
