//! What `watch --apply` does with a plan watch may apply: `ops::converge::apply`, with watch
//! as its front.

use super::{AutoApplyOptions, WatchEvent, WatchSink, Watcher};
use crate::apply::Sink;
use crate::gitops::watch::{AutoApply, auto_apply};
use crate::ops::apply::Consent;
use crate::ops::converge::{
    self, Applied, ApplyChoices, ApplyFront, ConvergeError, PlanSource, Ready,
};
use crate::ops::load::load_valid;
use crate::plan::Plan;

/// Watch's side of `ops::converge::apply`: it applies only what [`auto_apply`] allows (judged
/// again on the plan made under the locks) and never asks anyone.
struct WatchFront<'a> {
    sink: &'a dyn WatchSink,
    apply: &'a AutoApplyOptions,
}

#[async_trait::async_trait(?Send)]
impl ApplyFront for WatchFront<'_> {
    async fn planned(&self, _ready: &Ready<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    fn consent(&self, _plan: &Plan) -> Consent {
        Consent {
            force_conflicts: self.apply.force_conflicts,
            allow_disruption: self.apply.allow_disruption,
        }
    }

    async fn approve(&self, plan: &Plan) -> anyhow::Result<bool> {
        let allowed = auto_apply(
            plan,
            self.apply.allow_destructive,
            self.apply.allow_disruption,
        ) == AutoApply::Apply;
        if allowed {
            self.sink
                .event(WatchEvent::Applying(plan.summary.to_string()));
        }
        Ok(allowed)
    }

    fn sink(&self) -> &dyn Sink {
        self.sink.apply_sink()
    }
}

impl Watcher<'_> {
    /// Plans again from fresh state under the locks and applies if the plan is still one watch
    /// may apply: `ops::converge::apply`, with [`WatchFront`].
    pub(super) async fn apply_now(&mut self, apply: &AutoApplyOptions) {
        let spec = self.spec_source();
        let options = self.options;
        let Some((loaded, desired)) = load_valid(&spec).valid else {
            return;
        };
        let choices = ApplyChoices {
            lock_timeout: options.lock_timeout,
            submit_wait: options.submit_wait,
            // Watch follows the jobs itself, after the apply.
            follow_jobs: false,
            // Only plans with changes come here; a fresh plan without any records nothing.
            record_unchanged: false,
            interrupt: Default::default(),
            lock_holder: None,
        };
        let front = WatchFront {
            sink: self.sink,
            apply,
        };
        let source = PlanSource::Spec {
            spec: &spec,
            loaded,
            desired,
            opts: options.plan.clone(),
        };
        match converge::apply(source, &options.target, &choices, &front).await {
            Ok(Applied::Executed {
                report,
                lock_lost,
                ..
            }) => match report {
                Ok(report) if report.is_success() && lock_lost => self.failure(
                    "applied, but the cluster's lock was taken over before the end; the applied revision was not recorded".to_string(),
                ),
                Ok(report) if report.is_success() => self.sink.event(WatchEvent::Applied),
                Ok(report) => self
                    .sink
                    .event(WatchEvent::ApplyIncomplete(report.failures().count())),
                Err(stale) => self.sink.event(WatchEvent::NotApplied(stale.to_string())),
            },
            // The plan made under the locks is not one watch applies (any more): the next plan
            // tells why.
            Ok(Applied::NoChanges | Applied::Cancelled) => {}
            Ok(Applied::Refused(why)) => self.sink.event(WatchEvent::Held(why)),
            Err(ConvergeError::Plan(e)) => self.failure(format!("planning failed: {e:#}")),
            Err(e) => self.failure(format!("not applying: {e:#}")),
        }
    }
}
