//! Kubernetes matching rules Kueue applies to flavors and namespaces: label selectors,
//! required node affinity, and taints against tolerations.
//!
//! Sources: `k8s.io/apimachinery/pkg/labels` (label selectors),
//! `k8s.io/component-helpers/scheduling/corev1/nodeaffinity` (node selector terms) and
//! `k8s.io/api/core/v1/toleration.go` (`ToleratesTaint`).

use std::collections::BTreeMap;

/// `matchExpressions` operators shared by label selectors and node selector requirements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Node selectors only: the label parses as an integer greater than the single value.
    Gt,
    /// Node selectors only: the label parses as an integer less than the single value.
    Lt,
}

impl Operator {
    pub fn parse(text: &str) -> Option<Operator> {
        Some(match text {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            _ => return None,
        })
    }
}

/// One `{key, operator, values}` requirement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether `labels` satisfy the requirement. A malformed requirement (`In` without values,
    /// `Gt` with a non-integer) is an error, as in Kubernetes.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, String> {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::NotIn if self.values.is_empty() => Err(format!(
                "values: Required value: for 'in', 'notin' operators, values set can't be empty (key {})",
                self.key
            )),
            Operator::In => Ok(value.is_some_and(|v| self.values.contains(v))),
            Operator::NotIn => Ok(value.is_none_or(|v| !self.values.contains(v))),
            Operator::Exists => Ok(value.is_some()),
            Operator::DoesNotExist => Ok(value.is_none()),
            Operator::Gt | Operator::Lt => {
                let [bound] = self.values.as_slice() else {
                    return Err(format!(
                        "values: Invalid value: for 'Gt', 'Lt' operators, exactly one value is required (key {})",
                        self.key
                    ));
                };
                let bound: i64 = bound.parse().map_err(|_| {
                    format!(
                        "values[0]: Invalid value: {bound:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                    )
                })?;
                let Some(label) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return Ok(false);
                };
                Ok(if self.operator == Operator::Gt {
                    label > bound
                } else {
                    label < bound
                })
            }
        }
    }
}

/// A `metav1.LabelSelector`. `matchLabels` and `matchExpressions` are ANDed; an empty selector
/// matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, String> {
        for (key, value) in &self.match_labels {
            if labels.get(key) != Some(value) {
                return Ok(false);
            }
        }
        for requirement in &self.match_expressions {
            if matches!(requirement.operator, Operator::Gt | Operator::Lt) {
                return Err(format!(
                    "{:?} is not a valid label selector operator",
                    requirement.operator
                ));
            }
            if !requirement.matches(labels)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// A node taint on a ResourceFlavor (`spec.nodeTaints`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl Taint {
    /// The text Kueue puts in its message. Kueue formats a `corev1.Taint` value with `%s`; the
    /// generated `String()` has a pointer receiver, so Go prints the bare struct:
    /// `{key value effect <nil>}` (checked against Go 1.26 with k8s.io/api v0.36).
    pub fn go_struct_string(&self) -> String {
        format!("{{{} {} {} <nil>}}", self.key, self.value, self.effect)
    }
}

/// A pod or flavor toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Toleration {
    pub key: String,
    /// `Equal` (also when empty), `Exists`; `Lt`/`Gt` are behind a Kubernetes alpha gate that
    /// Kueue calls with comparison operators enabled.
    pub operator: String,
    pub value: String,
    pub effect: String,
}

impl Toleration {
    /// `Toleration.ToleratesTaint` with comparison operators enabled, as Kueue calls it.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != taint.effect {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator.as_str() {
            "" | "Equal" => self.value == taint.value,
            "Exists" => true,
            "Lt" | "Gt" => {
                let (Ok(toleration), Ok(taint)) =
                    (self.value.parse::<i64>(), taint.value.parse::<i64>())
                else {
                    return false;
                };
                if self.operator == "Lt" {
                    taint < toleration
                } else {
                    taint > toleration
                }
            }
            _ => false,
        }
    }
}

/// The first `NoSchedule`/`NoExecute` taint that no toleration tolerates
/// (`FindMatchingUntoleratedTaint` with Kueue's effect filter). `PreferNoSchedule` is ignored.
pub fn first_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[&Toleration],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|taint| taint.effect == "NoSchedule" || taint.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| t.tolerates(taint)))
}

/// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`: terms are ORed, the
/// `matchExpressions` of a term are ANDed. Kueue never looks at `matchFields`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
}

/// Kueue's `flavorSelector` followed by `GetRequiredNodeAffinity(...).Match` against a fake
/// node labelled with the flavor's `nodeLabels`.
///
/// Only keys that are labels *of this flavor* are considered: other `nodeSelector` entries and
/// `matchExpressions` are dropped, and if any affinity term becomes empty the whole required
/// affinity is ignored (an empty term would match everything).
pub fn flavor_matches_node_affinity(
    node_selector: &BTreeMap<String, String>,
    required_terms: Option<&[NodeSelectorTerm]>,
    flavor_labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    for (key, value) in node_selector {
        if let Some(label) = flavor_labels.get(key)
            && label != value
        {
            return Ok(false);
        }
    }
    let Some(terms) = required_terms else {
        return Ok(true);
    };
    let mut reduced: Vec<Vec<&Requirement>> = Vec::with_capacity(terms.len());
    for term in terms {
        let kept: Vec<&Requirement> = term
            .match_expressions
            .iter()
            .filter(|r| flavor_labels.contains_key(&r.key))
            .collect();
        if kept.is_empty() {
            return Ok(true);
        }
        reduced.push(kept);
    }
    if reduced.is_empty() {
        return Ok(true);
    }
    for term in reduced {
        let mut all = true;
        for requirement in term {
            if !requirement.matches(flavor_labels)? {
                all = false;
                break;
            }
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selector_keys_outside_the_flavor_are_ignored() {
        let flavor = labels(&[("cloud.google.com/gke-nodepool", "dws-pool")]);
        let selector = labels(&[
            ("cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"),
            ("cloud.google.com/gke-tpu-topology", "4x4"),
        ]);
        assert_eq!(
            flavor_matches_node_affinity(&selector, None, &flavor),
            Ok(true)
        );
        let wrong_pool = labels(&[("cloud.google.com/gke-nodepool", "default-pool")]);
        assert_eq!(
            flavor_matches_node_affinity(&wrong_pool, None, &flavor),
            Ok(false)
        );
    }

    #[test]
    fn an_emptied_affinity_term_drops_the_whole_affinity() {
        let flavor = labels(&[("pool", "a")]);
        let terms = vec![
            NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: "pool".into(),
                    operator: Operator::In,
                    values: vec!["b".into()],
                }],
            },
            NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: "zone".into(),
                    operator: Operator::In,
                    values: vec!["x".into()],
                }],
            },
        ];
        assert_eq!(
            flavor_matches_node_affinity(&BTreeMap::new(), Some(&terms), &flavor),
            Ok(true)
        );
        assert_eq!(
            flavor_matches_node_affinity(&BTreeMap::new(), Some(&terms[..1]), &flavor),
            Ok(false)
        );
    }

    #[test]
    fn tolerations_follow_kubernetes() {
        let taint = Taint {
            key: "cloud.google.com/gke-queued".into(),
            value: "true".into(),
            effect: "NoSchedule".into(),
        };
        let exists = Toleration {
            key: "cloud.google.com/gke-queued".into(),
            operator: "Exists".into(),
            value: String::new(),
            effect: "NoSchedule".into(),
        };
        assert!(exists.tolerates(&taint));
        let wrong_value = Toleration {
            key: "cloud.google.com/gke-queued".into(),
            operator: String::new(),
            value: "false".into(),
            effect: String::new(),
        };
        assert!(!wrong_value.tolerates(&taint));
        let everything = Toleration {
            operator: "Exists".into(),
            ..Toleration::default()
        };
        assert!(everything.tolerates(&taint));
        assert_eq!(
            taint.go_struct_string(),
            "{cloud.google.com/gke-queued true NoSchedule <nil>}"
        );
        let prefer = Taint {
            effect: "PreferNoSchedule".into(),
            ..taint.clone()
        };
        assert!(first_untolerated_taint(&[prefer], &[]).is_none());
    }
}
