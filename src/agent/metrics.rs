//! The agent's metrics, in the Prometheus text exposition format (version 0.0.4), written by
//! hand: a handful of gauges and one histogram do not need a metrics library.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Upper bounds of the reconcile-duration histogram, in seconds.
const BUCKETS: &[f64] = &[0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

#[derive(Debug, Default)]
pub struct Metrics {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Per bucket (and +Inf last): how many reconciles took at most that long.
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
    stacks: BTreeMap<String, StackMetrics>,
}

/// What is known of one stack (`namespace/name`).
#[derive(Debug, Default, Clone)]
pub struct StackMetrics {
    /// Unix seconds of the last apply.
    pub last_applied: Option<f64>,
    pub held: bool,
    /// Objects whose live state differs from the applied commit.
    pub drifted: usize,
    /// The last plan's actions by kind (`create`, `update`, `replace`, `delete`).
    pub actions: BTreeMap<&'static str, usize>,
    /// Jobs Kueue placed elsewhere than the prediction recorded when gkq submitted them (as
    /// `gkq status` compares them).
    pub disagreements: usize,
    /// Runs that found the commit and the live state the last plan read unchanged, and so did
    /// not plan again.
    pub unchanged_runs: u64,
}

impl Metrics {
    pub fn observe_reconcile(&self, seconds: f64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.buckets.is_empty() {
            state.buckets = vec![0; BUCKETS.len() + 1];
        }
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                state.buckets[i] += 1;
            }
        }
        let last = BUCKETS.len();
        state.buckets[last] += 1;
        state.sum += seconds;
        state.count += 1;
    }

    /// Changes what is known of `stack`.
    pub fn stack(&self, stack: &str, update: impl FnOnce(&mut StackMetrics)) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        update(state.stacks.entry(stack.to_string()).or_default());
    }

    /// Forgets `stack` (it was deleted): its series are no longer exported.
    pub fn forget(&self, stack: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.stacks.remove(stack);
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP gkq_reconcile_duration_seconds How long one stack's reconcile took (fetch, plan, apply).\n# TYPE gkq_reconcile_duration_seconds histogram"
        );
        for (i, bound) in BUCKETS.iter().enumerate() {
            let n = state.buckets.get(i).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "gkq_reconcile_duration_seconds_bucket{{le=\"{bound}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "gkq_reconcile_duration_seconds_bucket{{le=\"+Inf\"}} {}\ngkq_reconcile_duration_seconds_sum {}\ngkq_reconcile_duration_seconds_count {}",
            state.count, state.sum, state.count
        );
        let series = |out: &mut String, name: &str, help: &str, kind: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        series(
            &mut out,
            "gkq_stack_last_applied_timestamp_seconds",
            "When the stack's last apply finished (Unix time).",
            "gauge",
        );
        for (stack, m) in &state.stacks {
            if let Some(t) = m.last_applied {
                let _ = writeln!(
                    out,
                    "gkq_stack_last_applied_timestamp_seconds{{stack=\"{}\"}} {t}",
                    escape(stack)
                );
            }
        }
        series(
            &mut out,
            "gkq_held_plans",
            "Stacks whose plan is held for approval.",
            "gauge",
        );
        let held = state.stacks.values().filter(|m| m.held).count();
        let _ = writeln!(out, "gkq_held_plans {held}");
        series(
            &mut out,
            "gkq_stack_drifted_objects",
            "Objects whose live state differs from the applied commit.",
            "gauge",
        );
        for (stack, m) in &state.stacks {
            let _ = writeln!(
                out,
                "gkq_stack_drifted_objects{{stack=\"{}\"}} {}",
                escape(stack),
                m.drifted
            );
        }
        series(
            &mut out,
            "gkq_stack_plan_actions",
            "Actions of the stack's last plan, by kind.",
            "gauge",
        );
        for (stack, m) in &state.stacks {
            for kind in ["create", "update", "replace", "delete"] {
                let _ = writeln!(
                    out,
                    "gkq_stack_plan_actions{{stack=\"{}\",action=\"{kind}\"}} {}",
                    escape(stack),
                    m.actions.get(kind).copied().unwrap_or(0)
                );
            }
        }
        series(
            &mut out,
            "gkq_stack_placement_disagreements",
            "Jobs Kueue placed elsewhere than the prediction recorded when gkq submitted them.",
            "gauge",
        );
        for (stack, m) in &state.stacks {
            let _ = writeln!(
                out,
                "gkq_stack_placement_disagreements{{stack=\"{}\"}} {}",
                escape(stack),
                m.disagreements
            );
        }
        series(
            &mut out,
            "gkq_stack_unchanged_runs_total",
            "Runs that found the commit and the live state the last plan read unchanged, and did not plan again.",
            "counter",
        );
        for (stack, m) in &state.stacks {
            let _ = writeln!(
                out,
                "gkq_stack_unchanged_runs_total{{stack=\"{}\"}} {}",
                escape(stack),
                m.unchanged_runs
            );
        }
        out
    }
}

/// A label value as the exposition format quotes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_in_the_text_format() {
        let metrics = Metrics::default();
        metrics.observe_reconcile(0.3);
        metrics.observe_reconcile(7.0);
        metrics.stack("ns/a", |m| {
            m.last_applied = Some(1700000000.0);
            m.held = true;
            m.drifted = 2;
            m.actions.insert("delete", 1);
            m.unchanged_runs = 3;
        });
        let text = metrics.render();
        for line in [
            "gkq_reconcile_duration_seconds_bucket{le=\"0.5\"} 1",
            "gkq_reconcile_duration_seconds_bucket{le=\"10\"} 2",
            "gkq_reconcile_duration_seconds_bucket{le=\"+Inf\"} 2",
            "gkq_reconcile_duration_seconds_count 2",
            "gkq_stack_last_applied_timestamp_seconds{stack=\"ns/a\"} 1700000000",
            "gkq_held_plans 1",
            "gkq_stack_drifted_objects{stack=\"ns/a\"} 2",
            "gkq_stack_plan_actions{stack=\"ns/a\",action=\"delete\"} 1",
            "gkq_stack_placement_disagreements{stack=\"ns/a\"} 0",
            "gkq_stack_unchanged_runs_total{stack=\"ns/a\"} 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
