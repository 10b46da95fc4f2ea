//! Watch mode's decisions, kept apart from its event loop (`ops::watch`) so they can be tested
//! without files, clocks or clusters: which file events mean the spec may have changed, when a
//! plan is worth printing, and whether `--apply` may apply it.

use std::path::{Component, Path};

use crate::plan::{ActionKind, Plan};

/// Whether a changed path can change the plan: a file in the spec's directory tree that is not
/// gkq's own state, version-control metadata, or an editor's scratch file. Editors that save by
/// writing a temporary file and renaming it over the original produce events for both names; the
/// original's name is the one kept.
pub fn is_relevant(path: &Path, spec_dir: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(spec_dir) else {
        return false;
    };
    let mut components = relative.components().peekable();
    if components.peek().is_none() {
        return false;
    }
    for component in components {
        let Component::Normal(name) = component else {
            continue;
        };
        let name = name.to_string_lossy();
        // .gkq (the local target's state, written by every apply), .git, .idea, editor swap and
        // lock files (.gkq.yaml.swp, .#gkq.yaml) are all dot-names.
        if name.starts_with('.') {
            return false;
        }
        if name.ends_with('~')
            || name.ends_with(".swp")
            || name.ends_with(".swx")
            || name.ends_with(".tmp")
            || (name.starts_with('#') && name.ends_with('#'))
            || name.contains("___jb_")
            // vim's probe file, created and deleted to test that the directory is writable
            || name == "4913"
        {
            return false;
        }
    }
    true
}

/// Remembers the last plan shown, by [`Plan::fingerprint`], so that only a different plan is
/// printed again.
#[derive(Debug, Default)]
pub struct PlanTracker {
    shown: Option<String>,
}

impl PlanTracker {
    /// Whether `plan` differs from the last one shown; records it as shown.
    pub fn is_new(&mut self, plan: &Plan) -> bool {
        let fingerprint = plan.fingerprint();
        if self.shown.as_deref() == Some(fingerprint.as_str()) {
            return false;
        }
        self.shown = Some(fingerprint);
        true
    }

    /// Forget the last plan (after an invalid spec, the next valid plan is shown even if equal).
    pub fn forget(&mut self) {
        self.shown = None;
    }
}

/// What `--apply` does with a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoApply {
    /// Nothing to apply.
    UpToDate,
    Apply,
    /// Not applied, and why (shown once per plan).
    Hold(String),
}

/// `--apply` applies plans that only create and update; replaces and deletes need
/// `--allow-destructive`, and stopping running jobs (a replaced job, a deleted queue with
/// admitted work) needs `--allow-disruption` as well; blocked actions are never attempted.
pub fn auto_apply(plan: &Plan, allow_destructive: bool, allow_disruption: bool) -> AutoApply {
    if !plan.has_changes() {
        return AutoApply::UpToDate;
    }
    let blocked: Vec<String> = plan
        .changes()
        .filter(|a| a.blocked.is_some())
        .map(|a| a.addr.to_string())
        .collect();
    if !blocked.is_empty() {
        return AutoApply::Hold(format!(
            "not applying: {} would be refused (blocked); see the plan",
            blocked.join(", ")
        ));
    }
    if !plan.disruptions.is_empty() && !allow_disruption {
        let stopped: Vec<String> = plan
            .disruptions
            .iter()
            .flat_map(|d| d.jobs.iter().map(move |j| format!("{j} (by {})", d.addr)))
            .collect();
        return AutoApply::Hold(format!(
            "not applying: this plan stops running work: {}; pass --allow-disruption to let watch stop jobs, or apply it yourself",
            stopped.join(", ")
        ));
    }
    let destructive: Vec<String> = plan
        .changes()
        .filter(|a| matches!(a.kind, ActionKind::Replace | ActionKind::Delete))
        .map(|a| format!("{} ({})", a.addr, a.kind.verb()))
        .collect();
    if !destructive.is_empty() && !allow_destructive {
        return AutoApply::Hold(format!(
            "not applying: this plan would {} {}; pass --allow-destructive to let watch apply replaces and deletes, or apply it yourself",
            if destructive.len() == 1 {
                "change"
            } else {
                "change these:"
            },
            destructive.join(", ")
        ));
    }
    AutoApply::Apply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::ResourceAddr;

    #[test]
    fn only_spec_files_count() {
        let dir = Path::new("/repo/infra");
        for relevant in ["gkq.yaml", "environments/prod.yaml", "scripts/train.py"] {
            assert!(is_relevant(&dir.join(relevant), dir), "{relevant}");
        }
        for ignored in [
            ".gkq/local/gke/state.json",
            ".git/index",
            ".gkq.yaml.swp",
            "gkq.yaml~",
            ".#gkq.yaml",
            "#gkq.yaml#",
            "4913",
            "gkq.yaml.tmp",
            "environments/.prod.yaml.swx",
        ] {
            assert!(!is_relevant(&dir.join(ignored), dir), "{ignored}");
        }
        assert!(!is_relevant(Path::new("/elsewhere/gkq.yaml"), dir));
        assert!(!is_relevant(dir, dir));
    }

    fn plan(kinds: &[ActionKind]) -> Plan {
        crate::plan::plan_for_tests(
            kinds
                .iter()
                .enumerate()
                .map(|(i, kind)| (ResourceAddr::gke_node_pool(format!("pool-{i}")), *kind)),
        )
    }

    #[test]
    fn watch_applies_only_what_it_may() {
        assert_eq!(
            auto_apply(&plan(&[ActionKind::NoOp]), false, false),
            AutoApply::UpToDate
        );
        assert_eq!(
            auto_apply(
                &plan(&[ActionKind::Create, ActionKind::Update]),
                false,
                false
            ),
            AutoApply::Apply
        );
        let held = auto_apply(
            &plan(&[ActionKind::Update, ActionKind::Replace]),
            false,
            false,
        );
        assert_eq!(
            held,
            AutoApply::Hold("not applying: this plan would change gke.nodepool/pool-1 (replace); pass --allow-destructive to let watch apply replaces and deletes, or apply it yourself".into())
        );
        assert_eq!(
            auto_apply(&plan(&[ActionKind::Delete]), true, false),
            AutoApply::Apply
        );
        // Stopping a running job needs its own consent, even where replaces are allowed.
        let mut disruptive = plan(&[ActionKind::Replace]);
        disruptive.disruptions = vec![crate::plan::disruption::Disruption {
            addr: ResourceAddr::ray_job("default", "train"),
            jobs: vec!["RayJob default/train (admitted)".into()],
        }];
        assert_eq!(
            auto_apply(&disruptive, true, false),
            AutoApply::Hold("not applying: this plan stops running work: RayJob default/train (admitted) (by ray.rayjob/default/train); pass --allow-disruption to let watch stop jobs, or apply it yourself".into())
        );
        assert_eq!(auto_apply(&disruptive, true, true), AutoApply::Apply);
        let mut blocked = plan(&[ActionKind::Delete]);
        blocked.actions[0].blocked = Some("deletion protection".into());
        assert!(
            matches!(auto_apply(&blocked, true, true), AutoApply::Hold(reason) if reason.contains("blocked"))
        );
    }

    #[test]
    fn the_same_plan_is_shown_once() {
        let mut tracker = PlanTracker::default();
        let first = plan(&[ActionKind::Create]);
        assert!(tracker.is_new(&first));
        assert!(!tracker.is_new(&first.clone()));
        assert!(tracker.is_new(&plan(&[ActionKind::Update])));
        tracker.forget();
        assert!(tracker.is_new(&plan(&[ActionKind::Update])));
    }
}
