//! Sealed actions: a plan shows and saves markers where an action writes sensitive values
//! (see [`crate::diff::sensitive`]), and keeps the real values beside it, in memory only, for
//! applying it in the same process. A plan read from a file has no real values: applying one
//! of its sensitive actions needs the spec, which `gkq apply PLANFILE` plans again from.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Action, Step};
use crate::addr::{ResourceAddr, ResourceKind};
use crate::diff::sensitive::Redactor;

/// The real `desired` and `steps` of the sealed actions of a plan, by address.
#[derive(Clone, Default, PartialEq)]
pub struct Sealed {
    actions: BTreeMap<ResourceAddr, Unsealed>,
}

/// What sealing took out of an action.
#[derive(Clone, PartialEq)]
pub struct Unsealed {
    desired: Option<Arc<Value>>,
    steps: Vec<Step>,
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sealed({} action(s), values hidden)", self.actions.len())
    }
}

/// Why a sealed action cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{addr} writes sensitive values, which a plan file never holds; apply it where its spec is, so that gkq reads them from the spec"
)]
pub struct MissingValues {
    pub addr: ResourceAddr,
}

impl Sealed {
    pub fn insert(&mut self, addr: ResourceAddr, unsealed: Unsealed) {
        self.actions.insert(addr, unsealed);
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// `action` with its real values: itself when it is not sensitive, the values sealed in
    /// this process otherwise.
    pub fn open<'a>(&self, action: &'a Action) -> Result<Cow<'a, Action>, MissingValues> {
        if !action.sensitive {
            return Ok(Cow::Borrowed(action));
        }
        let real = self
            .actions
            .get(&action.addr)
            .ok_or_else(|| MissingValues {
                addr: action.addr.clone(),
            })?;
        let mut opened = action.clone();
        opened.desired = real.desired.clone();
        opened.steps = real.steps.clone();
        Ok(Cow::Owned(opened))
    }
}

/// The lowercase kind of an address, as sensitivity rules name kinds (`secret`).
fn kind_name(addr: &ResourceAddr) -> &str {
    match &addr.kind {
        ResourceKind::Other(kind) => kind,
        _ => "",
    }
}

/// Replaces the sensitive values of `action` by markers; returns the real values when there
/// were any (the action is then marked `sensitive`).
pub fn seal(action: &mut Action, redactor: &Redactor) -> Option<Unsealed> {
    let kind = kind_name(&action.addr).to_string();
    let desired = action.desired.clone();
    for change in &mut action.changes {
        for value in [&mut change.before, &mut change.after]
            .into_iter()
            .flatten()
        {
            *value = redactor.field(&kind, desired.as_deref(), &change.path, value);
        }
    }
    if redactor.has_strings() {
        action.reason = redactor.text(&action.reason);
        action.diff = redactor.text(&action.diff);
        if let Some(blocked) = &mut action.blocked {
            *blocked = redactor.text(blocked);
        }
    }
    let hides = action
        .desired
        .as_ref()
        .is_some_and(|d| redactor.hides_something_in(d))
        || action.steps.iter().any(|step| match step {
            Step::KubeApply { object } => redactor.hides_something_in(object),
            other => {
                redactor.has_strings()
                    && serde_json::to_value(other).is_ok_and(|v| redactor.hides_something_in(&v))
            }
        });
    if !hides {
        return None;
    }
    let real = Unsealed {
        desired: action.desired.clone(),
        steps: action.steps.clone(),
    };
    action.desired = action
        .desired
        .as_deref()
        .map(|d| Arc::new(redactor.object(d)));
    action.steps = action
        .steps
        .iter()
        .map(|step| match step {
            Step::KubeApply { object } => Step::KubeApply {
                object: Arc::new(redactor.object(object)),
            },
            other => serde_json::to_value(other)
                .map(|v| redactor.object(&v))
                .ok()
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_else(|| other.clone()),
        })
        .collect();
    action.sensitive = true;
    Some(real)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{ChangeEffect, FieldChange, UpdateMethod};
    use crate::plan::ActionKind;
    use serde_json::json;

    fn secret_action() -> Action {
        let object = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "hf", "namespace": "ml"}, "stringData": {"token": "hf_SECRET"}});
        Action {
            addr: ResourceAddr::from_object(&object).unwrap(),
            kind: ActionKind::Update,
            reason: "stringData.token changed".into(),
            replace_strategy: None,
            blocked: None,
            changes: vec![FieldChange {
                path: "data.token".into(),
                before: Some(json!("b2xk")),
                after: Some(json!("aGZfU0VDUkVU")),
                effect: ChangeEffect::InPlace(UpdateMethod::ServerSideApply),
            }],
            diff: String::new(),
            steps: vec![Step::KubeApply {
                object: Arc::new(object.clone()),
            }],
            desired: Some(Arc::new(object)),
            live_fingerprint: None,
            live_fields: BTreeMap::new(),
            sensitive: false,
            depends_on: vec![],
            conflicts: Vec::new(),
        }
    }

    #[test]
    fn a_sealed_action_shows_markers_and_opens_to_its_values_in_this_process_only() {
        let mut action = secret_action();
        let real = seal(&mut action, &Redactor::default()).expect("a Secret is sensitive");
        assert!(action.sensitive);
        let shown = serde_json::to_string(&action).unwrap();
        assert!(!shown.contains("hf_SECRET"), "{shown}");
        assert!(!shown.contains("aGZfU0VDUkVU"), "{shown}");
        assert!(!shown.contains("b2xk"), "{shown}");
        assert!(shown.contains("(sensitive value #"));

        let mut sealed = Sealed::default();
        assert_eq!(
            sealed.open(&action).unwrap_err().to_string(),
            "k8s.secret/ml/hf writes sensitive values, which a plan file never holds; apply it where its spec is, so that gkq reads them from the spec"
        );
        sealed.insert(action.addr.clone(), real);
        let opened = sealed.open(&action).unwrap();
        assert_eq!(
            opened.desired.as_ref().unwrap()["stringData"]["token"],
            "hf_SECRET"
        );
        assert!(!format!("{sealed:?}").contains("hf_SECRET"));
    }

    #[test]
    fn sensitive_variable_values_are_sealed_in_any_object() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ml"}, "data": {"run.sh": "login --key=k3y-VALUE"}});
        let mut action = secret_action();
        action.addr = ResourceAddr::from_object(&object).unwrap();
        action.changes.clear();
        let object = Arc::new(object);
        action.desired = Some(object.clone());
        action.steps = vec![Step::KubeApply { object }];
        action.diff = "+ run.sh: login --key=k3y-VALUE".into();
        let redactor = Redactor::new(vec!["k3y-VALUE".into()]);
        assert!(seal(&mut action, &redactor).is_some());
        let shown = serde_json::to_string(&action).unwrap();
        assert!(!shown.contains("k3y-VALUE"), "{shown}");
        // An object without anything sensitive is left as it is.
        let mut plain = secret_action();
        plain.addr = ResourceAddr::config_map("ml", "c");
        plain.changes.clear();
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let object = Arc::new(object);
        plain.desired = Some(object.clone());
        plain.steps = vec![Step::KubeApply { object }];
        assert!(seal(&mut plain, &redactor).is_none());
        assert!(!plain.sensitive);
    }
}
