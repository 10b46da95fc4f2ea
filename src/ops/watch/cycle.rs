//! One re-plan of a watch: load and validate the spec, plan, tell the plan if it is new, and
//! apply it when `--apply` allows.

use std::collections::{BTreeMap, BTreeSet};

use super::{Trigger, WatchEvent, Watcher};
use crate::gitops::watch::{AutoApply, auto_apply};
use crate::ops::load::{SpecSource, load_valid};
use crate::ops::plan::{Planned, plan_valid};
use crate::plan::digest::FileDigest;

impl Watcher<'_> {
    /// Plans `spec`; a failure is told and gives `None`.
    async fn plan(
        &mut self,
        spec: &SpecSource,
        loaded: crate::spec::Loaded,
        desired: crate::model::DesiredState,
    ) -> Option<Planned> {
        let options = self.options;
        match plan_valid(spec, loaded, desired, &options.target, options.plan.clone()).await {
            Ok(planned) => Some(planned),
            Err(e) => {
                self.failure(format!("planning failed: {e:#}"));
                None
            }
        }
    }

    /// Plans, tells the plan if it is new, applies it when allowed. Returns the next trigger
    /// (a re-plan after an apply).
    pub(super) async fn cycle(&mut self, trigger: Trigger) -> Option<Trigger> {
        let spec = self.spec_source();
        let validated = load_valid(&spec);
        let Some((loaded, desired)) = validated.valid else {
            let key = validated
                .diagnostics
                .report(&validated.sources)
                .render(false);
            self.problem(
                key,
                WatchEvent::InvalidSpec {
                    diagnostics: &validated.diagnostics,
                    sources: &validated.sources,
                },
            );
            self.tracker.forget();
            return None;
        };
        let options = self.options;
        let Some(planned) = self.plan(&spec, loaded, desired).await else {
            self.tracker.forget();
            return None;
        };
        self.last_problem = None;
        // A drift tick can come before the file event of a save it already read: a plan of a
        // changed spec is the spec's change, whatever woke the watcher.
        let files = planned
            .plan
            .provenance
            .as_ref()
            .map(|p| p.spec.files.clone());
        let trigger = match (trigger, &self.spec_files, &files) {
            (Trigger::Drift, Some(before), Some(now)) if before != now => Trigger::Files(
                changed_files(before, now)
                    .into_iter()
                    .map(|path| self.spec_dir.join(path))
                    .collect(),
            ),
            (trigger, ..) => trigger,
        };
        self.spec_files = files;
        let why = trigger.describe(&self.spec_dir);
        if self.tracker.is_new(&planned.plan) {
            self.sink.event(WatchEvent::Planned {
                trigger: why,
                plan: &planned.plan,
            });
        } else {
            tracing::debug!("{why}: plan unchanged");
        }
        if let Some(apply) = &options.apply {
            match auto_apply(
                &planned.plan,
                apply.allow_destructive,
                apply.allow_disruption,
            ) {
                AutoApply::UpToDate => {}
                AutoApply::Hold(reason) => {
                    let fingerprint = planned.plan.fingerprint();
                    if self.last_hold.as_deref() != Some(fingerprint.as_str()) {
                        self.sink.event(WatchEvent::Held(reason));
                        self.last_hold = Some(fingerprint);
                    }
                }
                AutoApply::Apply => {
                    // Release the clients (and the local target's emulator) before locking.
                    self.last = None;
                    drop(planned);
                    self.apply_now(apply).await;
                    self.job_lines.clear();
                    self.placed.clear();
                    return Some(Trigger::Applied);
                }
            }
        }
        self.last = Some(planned);
        self.refresh_jobs(true).await;
        None
    }
}

/// The paths of the spec's files that differ between two plans' inputs: changed, added or gone.
fn changed_files(before: &[FileDigest], now: &[FileDigest]) -> BTreeSet<String> {
    let index = |files: &[FileDigest]| -> BTreeMap<String, String> {
        files
            .iter()
            .map(|f| (f.path.clone(), f.sha256.clone()))
            .collect()
    };
    let (before, now) = (index(before), index(now));
    before
        .keys()
        .chain(now.keys())
        .filter(|path| before.get(*path) != now.get(*path))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn file(path: &str, sha256: &str) -> FileDigest {
        FileDigest {
            path: path.into(),
            sha256: sha256.into(),
        }
    }

    /// What a drift tick that read a saved spec names as the change: the files whose hash
    /// differs, and files added or gone; nothing when the inputs are the same.
    #[test]
    fn changed_files_are_the_edited_added_and_removed_ones() {
        let before = [
            file("gkq.yaml", "a"),
            file("train.py", "b"),
            file("old.yaml", "c"),
        ];
        let now = [
            file("gkq.yaml", "a2"),
            file("train.py", "b"),
            file("new.yaml", "d"),
        ];
        assert_eq!(
            changed_files(&before, &now).into_iter().collect::<Vec<_>>(),
            ["gkq.yaml", "new.yaml", "old.yaml"]
        );
        assert!(changed_files(&before, &before).is_empty());
        let why =
            Trigger::Files(vec![Path::new("/w/gkq.yaml").to_path_buf()]).describe(Path::new("/w"));
        assert_eq!(why, "spec changed (gkq.yaml)");
    }
}
