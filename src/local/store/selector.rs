//! Label selectors for lists: equality-based only.

use serde_json::Value;

/// An equality-based label selector.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    requirements: Vec<(String, Requirement)>,
}

#[derive(Debug, Clone)]
enum Requirement {
    Equals(String),
    NotEquals(String),
    Exists,
    NotExists,
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let requirement = if let Some((k, v)) = part.split_once("!=") {
                (
                    k.trim().to_string(),
                    Requirement::NotEquals(v.trim().into()),
                )
            } else if let Some((k, v)) = part.split_once("==") {
                (k.trim().to_string(), Requirement::Equals(v.trim().into()))
            } else if let Some((k, v)) = part.split_once('=') {
                (k.trim().to_string(), Requirement::Equals(v.trim().into()))
            } else if let Some(k) = part.strip_prefix('!') {
                (k.trim().to_string(), Requirement::NotExists)
            } else if part.contains(' ') || part.contains('(') {
                return Err(format!(
                    "unable to parse requirement {part:?}: the local target supports equality-based selectors only"
                ));
            } else {
                (part.to_string(), Requirement::Exists)
            };
            if requirement.0.is_empty() {
                return Err(format!("unable to parse requirement {part:?}: empty key"));
            }
            requirements.push(requirement);
        }
        Ok(Selector { requirements })
    }

    /// The first `label=value` requirement, if any: every object matching has that label.
    pub fn equality(&self) -> Option<(&str, &str)> {
        self.requirements.iter().find_map(|(k, r)| match r {
            Requirement::Equals(v) => Some((k.as_str(), v.as_str())),
            _ => None,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|(k, r)| match r {
            Requirement::Equals(v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(v) => get(k) != Some(v.as_str()),
            Requirement::Exists => get(k).is_some(),
            Requirement::NotExists => get(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_are_equality_based() {
        let o = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        assert!(Selector::parse("a=1,b==2").unwrap().matches(&o));
        assert!(Selector::parse("a,!c,b!=3").unwrap().matches(&o));
        assert!(!Selector::parse("a=2").unwrap().matches(&o));
        assert!(Selector::parse("").unwrap().matches(&o));
        assert!(Selector::parse("a in (1)").is_err());
    }
}
