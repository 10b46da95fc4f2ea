//! The agent's decisions, apart from its I/O so they can be tested without clusters: whether a
//! plan is applied, held for approval or refused; the stack's conditions; and keeping secrets out
//! of everything the agent writes.

use crate::addr::{ClusterRef, ResourceKind};
use crate::gitops::watch::{AutoApply, auto_apply};
use crate::plan::{ActionKind, Plan};

use super::crd::{GkqStackStatus, StackCondition};

/// What the agent does with a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to change.
    UpToDate,
    /// Apply it. `approved`: a held plan whose digest was approved, so replaces, deletes and
    /// disruptions are consented to.
    Apply { approved: bool },
    /// Hold it until its digest is approved. `stale`: an approval of another digest, refused.
    Hold {
        digest: String,
        reason: String,
        stale: Option<String>,
    },
    /// Never applied, whatever is approved.
    Refuse(String),
    /// Objects of this plan belong to other stacks: nothing is applied until the stacks agree
    /// (one removes the objects, or the objects move). Says which stack owns which object.
    Conflict(String),
}

/// Decides on `plan`: plans that only create and update are applied; replaces, deletes and
/// disruptions are held until `approval` names the plan's digest ([`Plan::fingerprint`]); a plan
/// that deletes or replaces `own_cluster` (the cluster the agent runs in) is refused.
pub fn decide(plan: &Plan, approval: Option<&str>, own_cluster: Option<&ClusterRef>) -> Decision {
    decide_with(plan, approval, own_cluster, false)
}

/// [`decide`] for the plan of a stack deleted with `spec.prune: true`: deleting the stack
/// consents to deleting what it owns, so deletes are applied; stopping running jobs still waits
/// for an approved digest.
pub fn decide_deletion(
    plan: &Plan,
    approval: Option<&str>,
    own_cluster: Option<&ClusterRef>,
) -> Decision {
    decide_with(plan, approval, own_cluster, true)
}

fn decide_with(
    plan: &Plan,
    approval: Option<&str>,
    own_cluster: Option<&ClusterRef>,
    deletes_consented: bool,
) -> Decision {
    if let Some(own) = own_cluster
        && *own == plan.cluster
        && plan.changes().any(|a| {
            a.addr.kind == ResourceKind::GkeCluster
                && matches!(a.kind, ActionKind::Delete | ActionKind::Replace)
        })
    {
        return Decision::Refuse(format!(
            "refusing to {} cluster {}: the agent runs in it",
            plan.changes()
                .find(|a| a.addr.kind == ResourceKind::GkeCluster)
                .map_or("destroy", |a| a.kind.verb()),
            own.cluster
        ));
    }
    let mut conflicts: Vec<String> = plan
        .changes()
        .filter_map(|a| {
            let owner = a
                .blocked
                .as_deref()
                .and_then(crate::plan::conflicting_owner)?;
            Some(format!("{} is owned by GkqStack {owner}", a.addr))
        })
        .collect();
    if !conflicts.is_empty() {
        conflicts.sort();
        return Decision::Conflict(format!(
            "{}; nothing was applied: remove these from this stack's spec, or from the other stack's",
            conflicts.join(", ")
        ));
    }
    match auto_apply(plan, deletes_consented, false) {
        AutoApply::UpToDate => Decision::UpToDate,
        AutoApply::Apply => Decision::Apply { approved: false },
        AutoApply::Hold(reason) => {
            let digest = plan.fingerprint();
            let blocked = plan.changes().any(|a| a.blocked.is_some());
            match approval {
                Some(approved) if approved == digest && !blocked => {
                    Decision::Apply { approved: true }
                }
                other => Decision::Hold {
                    digest,
                    reason: reason
                        .strip_prefix("not applying: ")
                        .unwrap_or(&reason)
                        .split("; pass --allow")
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    stale: other.map(str::to_string),
                },
            }
        }
    }
}

/// Sets condition `type_` in `conditions`; its transition time changes only when its status does.
pub fn set_condition(
    conditions: &mut Vec<StackCondition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &str,
) {
    let status = if status { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Some(now.to_string());
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
        }
        None => conditions.push(StackCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            last_transition_time: Some(now.to_string()),
        }),
    }
}

/// `text` with every occurrence of each secret (and of its base64 form, as HTTP basic
/// authentication carries it) replaced by `***`. Secrets shorter than 4 bytes are not searched
/// for: they would match ordinary text, and a secret that short protects nothing anyway.
pub fn redact(text: &str, secrets: &[String]) -> String {
    use base64::Engine;
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(secret.as_str(), "***");
        let encoded = base64::engine::general_purpose::STANDARD.encode(secret);
        out = out.replace(&encoded, "***");
    }
    out
}

/// The identity under which a replica holds a cluster's apply Lease for one stack: its own
/// identity and the stack, so that two stacks on one cluster exclude each other.
pub fn apply_lock_holder(identity: &str, stack: &str) -> String {
    format!("{identity} (stack {stack})")
}

/// The replica's identity in an apply Lease holder written by [`apply_lock_holder`] (a stack's
/// `namespace/name` never holds ` (stack `, so the last one separates them).
pub fn replica_of(holder: &str) -> Option<&str> {
    let (replica, rest) = holder.strip_suffix(')')?.rsplit_once(" (stack ")?;
    (!replica.is_empty() && !rest.is_empty()).then_some(replica)
}

/// Why a stack's `spec.interval` is not run: a condition reason and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntervalRefused {
    pub reason: &'static str,
    pub message: String,
}

/// The interval a stack is reconciled at: its `spec.interval` (the one duration grammar), which
/// may not be shorter than the agent's `minimum` (`--min-interval`): a stack asking for less is
/// refused, not run more often than the agent allows.
pub fn interval(
    text: &str,
    minimum: std::time::Duration,
) -> Result<std::time::Duration, IntervalRefused> {
    match crate::vocab::duration::parse(text) {
        Ok(d) if d.is_zero() || d < minimum => Err(IntervalRefused {
            reason: "IntervalTooShort",
            message: format!(
                "spec.interval `{text}` is shorter than this agent's minimum of {} (--min-interval); nothing is fetched until it is at least that",
                if minimum < std::time::Duration::from_secs(1) {
                    format!("{}ms", minimum.as_millis())
                } else {
                    crate::vocab::duration::human(minimum)
                }
            ),
        }),
        Ok(d) => Ok(d),
        Err(_) => Err(IntervalRefused {
            reason: "InvalidInterval",
            message: format!("spec.interval `{text}` is not a duration such as 30s or 5m"),
        }),
    }
}

/// The conditions kstatus reads (and so Flux, `kubectl wait` and `kstatus`-based tools): each of
/// them is always present.
const KSTATUS_CONDITIONS: [(&str, &str, &str); 3] = [
    ("Ready", "Unknown", "Progressing"),
    ("Reconciling", "False", "Idle"),
    ("Stalled", "False", "NotStalled"),
];

/// Completes a status the agent writes so that kstatus can read it: `observedGeneration` is the
/// generation it acted on (also for a suspended or refused stack), and Ready, Reconciling and
/// Stalled are all there (one not yet decided is added as it stands: Ready Unknown, the others
/// False).
pub fn kstatus(status: &mut GkqStackStatus, generation: Option<i64>, now: &str) {
    status.observed_generation = generation;
    for (type_, state, reason) in KSTATUS_CONDITIONS {
        if status.condition(type_).is_none() {
            status.conditions.push(StackCondition {
                type_: type_.to_string(),
                status: state.to_string(),
                reason: reason.to_string(),
                message: String::new(),
                last_transition_time: Some(now.to_string()),
            });
        }
    }
}

/// Whether the interval has passed since `last` (milliseconds since some epoch), at `now`.
pub fn due(last: Option<u64>, interval_ms: u64, now: u64) -> bool {
    last.is_none_or(|last| now.saturating_sub(last) >= interval_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::ResourceAddr;

    fn plan(actions: &[(ResourceAddr, ActionKind)]) -> Plan {
        crate::plan::plan_for_tests(actions.iter().cloned())
    }

    #[test]
    fn a_pruning_deletion_applies_deletes_but_holds_disruptions() {
        let queue = ResourceAddr::gke_node_pool("pool");
        let deleting = plan(&[(queue, ActionKind::Delete)]);
        assert_eq!(
            decide_deletion(&deleting, None, None),
            Decision::Apply { approved: false }
        );
        assert!(matches!(
            decide(&deleting, None, None),
            Decision::Hold { .. }
        ));
    }

    #[test]
    fn creates_and_updates_apply_deletes_wait_for_their_digest() {
        let queue = ResourceAddr::gke_node_pool("pool");
        assert_eq!(
            decide(&plan(&[(queue.clone(), ActionKind::NoOp)]), None, None),
            Decision::UpToDate
        );
        assert_eq!(
            decide(&plan(&[(queue.clone(), ActionKind::Update)]), None, None),
            Decision::Apply { approved: false }
        );
        let deleting = plan(&[(queue.clone(), ActionKind::Delete)]);
        let digest = deleting.fingerprint();
        let Decision::Hold {
            digest: held,
            reason,
            stale,
        } = decide(&deleting, None, None)
        else {
            panic!("a delete is held")
        };
        assert_eq!(held, digest);
        assert_eq!(reason, "this plan would change gke.nodepool/pool (destroy)");
        assert_eq!(stale, None);
        assert_eq!(
            decide(&deleting, Some(&digest), None),
            Decision::Apply { approved: true }
        );
        let Decision::Hold { stale, .. } = decide(&deleting, Some("0123456789abcdef"), None) else {
            panic!("a stale approval does not apply")
        };
        assert_eq!(stale.as_deref(), Some("0123456789abcdef"));
    }

    #[test]
    fn the_agents_own_cluster_is_never_deleted() {
        let deleting = plan(&[(ResourceAddr::gke_cluster("c"), ActionKind::Delete)]);
        let own = deleting.cluster.clone();
        let digest = deleting.fingerprint();
        assert_eq!(
            decide(&deleting, Some(&digest), Some(&own)),
            Decision::Refuse("refusing to destroy cluster c: the agent runs in it".into())
        );
        let elsewhere = ClusterRef {
            cluster: "other".into(),
            ..own
        };
        assert_eq!(
            decide(&deleting, Some(&digest), Some(&elsewhere)),
            Decision::Apply { approved: true }
        );
    }

    #[test]
    fn conditions_keep_their_transition_time_while_their_status_holds() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, "Ready", false, "A", "a", "t1");
        set_condition(&mut conditions, "Ready", false, "B", "b", "t2");
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some("t1"));
        assert_eq!(conditions[0].reason, "B");
        set_condition(&mut conditions, "Ready", true, "C", "c", "t3");
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some("t3"));
        assert_eq!(conditions[0].status, "True");
    }

    #[test]
    fn an_apply_lock_holder_names_exactly_its_replica() {
        let holder = apply_lock_holder("gkq-agent-7d9f-x2k (stack one)", "ml/train");
        assert_eq!(replica_of(&holder), Some("gkq-agent-7d9f-x2k (stack one)"));
        assert_eq!(
            replica_of(&apply_lock_holder("alice@host pid 12", "ns/s")),
            Some("alice@host pid 12")
        );
        // What a command holds the Lease as is no replica's.
        assert_eq!(replica_of("alice@host pid 12"), None);
        assert_eq!(replica_of(" (stack ns/s)"), None);
    }

    #[test]
    fn an_interval_below_the_minimum_is_refused_and_named() {
        let minimum = std::time::Duration::from_secs(10);
        assert_eq!(
            interval("1m", minimum),
            Ok(std::time::Duration::from_secs(60))
        );
        assert_eq!(interval("10s", minimum), Ok(minimum));
        let short = interval("1ms", minimum).unwrap_err();
        assert_eq!(short.reason, "IntervalTooShort");
        assert!(short.message.contains("`1ms`"), "{}", short.message);
        assert!(
            short.message.contains("minimum of 10s"),
            "{}",
            short.message
        );
        assert_eq!(
            interval("0s", minimum).unwrap_err().reason,
            "IntervalTooShort"
        );
        assert_eq!(
            interval("soon", minimum).unwrap_err().reason,
            "InvalidInterval"
        );
        // A lower minimum (tests) admits shorter intervals, never zero.
        let fast = std::time::Duration::from_millis(100);
        assert_eq!(interval("100ms", fast), Ok(fast));
        assert!(interval("0s", std::time::Duration::ZERO).is_err());
        let refused = interval("50ms", fast).unwrap_err();
        assert!(
            refused.message.contains("minimum of 100ms"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn every_status_has_the_kstatus_conditions_and_its_generation() {
        let mut status = GkqStackStatus::default();
        set_condition(
            &mut status.conditions,
            "Reconciling",
            false,
            "Suspended",
            "",
            "t1",
        );
        kstatus(&mut status, Some(7), "t2");
        assert_eq!(status.observed_generation, Some(7));
        assert_eq!(status.condition("Reconciling").unwrap().reason, "Suspended");
        assert_eq!(status.condition("Ready").unwrap().status, "Unknown");
        assert_eq!(status.condition("Stalled").unwrap().status, "False");
        assert_eq!(status.conditions.len(), 3);
        let again = status.clone();
        kstatus(&mut status, Some(7), "t3");
        assert_eq!(status, again, "completing twice changes nothing");
    }

    #[test]
    fn secrets_are_redacted_plain_and_in_base64() {
        let secrets = vec!["hunter2-token".to_string(), "ab".to_string()];
        let basic = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode("hunter2-token")
        };
        assert_eq!(
            redact(&format!("fatal: hunter2-token in {basic} ab"), &secrets),
            "fatal: *** in *** ab"
        );
        assert!(due(None, 1000, 5));
        assert!(!due(Some(4500), 1000, 5000));
        assert!(due(Some(4000), 1000, 5000));
    }
}
