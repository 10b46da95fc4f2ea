//! Apply progress renderers: a terminal sink and a JSON-lines sink.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{BOLD, DIM, GREEN, RED, YELLOW, format_elapsed, kind_style};
use crate::apply::{ApplyEvent, Sink};
use crate::plan::ActionKind;

/// Terraform-like lines on stderr, and a spinner with the elapsed time while an operation runs.
/// The spinner is hidden when stderr is not a terminal (indicatif checks); colours follow the
/// writer (use `anstream::stderr()` to honour `NO_COLOR`).
pub struct TerminalSink {
    state: Mutex<TerminalState>,
    /// The walk destroys (`gkq destroy`): its last line says so.
    destroying: bool,
}

struct TerminalState {
    out: Box<dyn Write + Send>,
    spinner_target: fn() -> ProgressDrawTarget,
    spinner: Option<ProgressBar>,
    /// The job whose Kueue decision is awaited, once its waiting line is printed.
    awaiting: Option<crate::addr::ResourceAddr>,
}

/// What the terminal says when Kueue decided nothing on a submitted job in time.
fn undecided_text(
    addr: &crate::addr::ResourceAddr,
    job: usize,
    jobs: usize,
    elapsed_ms: u64,
) -> String {
    let waited = format_elapsed(elapsed_ms);
    if job < jobs {
        format!(
            "{addr}: Kueue decided nothing on job {job} of {jobs} within {waited}; job {} is submitted now, so Kueue may see them together, and the plan's prediction for the jobs from this one on may not hold",
            job + 1
        )
    } else {
        format!(
            "{addr}: Kueue decided nothing on job {job} of {jobs} within {waited}; the apply goes on, and Kueue decides later (`gkq status` shows where it lands)"
        )
    }
}

impl TerminalSink {
    /// The same sink for `gkq destroy`: it speaks of destroying.
    pub fn destroying(mut self) -> Self {
        self.destroying = true;
        self
    }

    /// Lines to `anstream::stderr()` and a spinner on the terminal.
    pub fn stderr() -> Self {
        Self::new(Box::new(anstream::stderr()), ProgressDrawTarget::stderr)
    }

    /// Lines to `out`; the spinner draws to `spinner_target()` (`ProgressDrawTarget::hidden` for
    /// none).
    pub fn new(out: Box<dyn Write + Send>, spinner_target: fn() -> ProgressDrawTarget) -> Self {
        TerminalSink {
            destroying: false,
            state: Mutex::new(TerminalState {
                out,
                spinner_target,
                spinner: None,
                awaiting: None,
            }),
        }
    }
}

impl TerminalState {
    /// Prints a line without tearing the spinner. Output errors (a closed stderr) are ignored:
    /// progress is best-effort and must not fail an apply.
    fn line(&mut self, text: String) {
        let out = &mut self.out;
        match &self.spinner {
            Some(spinner) => spinner.suspend(|| {
                let _ = writeln!(out, "{text}");
            }),
            None => {
                let _ = writeln!(out, "{text}");
            }
        }
        let _ = out.flush();
    }

    fn spin(&mut self, message: String) {
        let spinner = self.spinner.get_or_insert_with(|| {
            let spinner = ProgressBar::with_draw_target(None, (self.spinner_target)());
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
                spinner.set_style(style);
            }
            spinner.enable_steady_tick(Duration::from_millis(120));
            spinner
        });
        spinner.set_message(message);
    }

    fn stop(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }
}

fn done_word(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::Create => "Creation complete",
        ActionKind::Update => "Modifications complete",
        ActionKind::Replace => "Replacement complete",
        ActionKind::Delete => "Destruction complete",
        ActionKind::NoOp => "Nothing to do",
    }
}

fn doing_word(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::Create => "Creating...",
        ActionKind::Update => "Modifying...",
        ActionKind::Replace => "Replacing...",
        ActionKind::Delete => "Destroying...",
        ActionKind::NoOp => "Checking...",
    }
}

impl Sink for TerminalSink {
    fn emit(&self, event: &ApplyEvent) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match event {
            ApplyEvent::ApplyStarted { .. } => {}
            ApplyEvent::ActionStarted { addr, kind, .. } => {
                let style = kind_style(*kind);
                state.line(format!(
                    "{style}{:>3}{style:#} {BOLD}{addr}{BOLD:#}: {}",
                    kind.glyph(),
                    doing_word(*kind)
                ));
                state.spin(format!("{addr}: {}", doing_word(*kind)));
            }
            ApplyEvent::StepStarted { addr, step } => state.spin(format!("{addr}: {step}")),
            ApplyEvent::Progress {
                addr,
                step,
                operation_type,
                status,
                elapsed_ms,
                ..
            } => {
                let what = if operation_type.is_empty() {
                    step.as_str()
                } else {
                    operation_type.as_str()
                };
                state.spin(format!(
                    "{addr}: {what} {status} [{}]",
                    format_elapsed(*elapsed_ms)
                ));
            }
            ApplyEvent::Waiting {
                addr,
                reason,
                elapsed_ms,
                ..
            } => {
                state.line(format!("    {YELLOW}{addr}: {reason}{YELLOW:#}"));
                state.spin(format!("{addr}: waiting [{}]", format_elapsed(*elapsed_ms)));
            }
            ApplyEvent::AwaitingKueue {
                addr,
                job,
                jobs,
                elapsed_ms,
                limit_ms,
            } => state.awaiting_kueue(addr, *job, *jobs, *elapsed_ms, *limit_ms),
            ApplyEvent::KueueDecided {
                addr,
                job,
                jobs,
                decided,
                elapsed_ms,
            } => {
                state.awaiting = None;
                if !decided {
                    state.line(format!(
                        "    {YELLOW}{}{YELLOW:#}",
                        undecided_text(addr, *job, *jobs, *elapsed_ms)
                    ));
                }
            }
            ApplyEvent::ActionFinished {
                addr,
                kind,
                elapsed_ms,
            } => {
                state.stop();
                state.line(format!(
                    "    {GREEN}{addr}: {} after {}{GREEN:#}",
                    done_word(*kind),
                    format_elapsed(*elapsed_ms)
                ));
            }
            ApplyEvent::ActionFailed { error, hint, .. } => {
                state.stop();
                state.line(format!("{RED}{BOLD}Error:{BOLD:#}{RED} {error}{RED:#}"));
                if let Some(hint) = hint {
                    state.line(format!("    {YELLOW}hint: {hint}{YELLOW:#}"));
                }
            }
            ApplyEvent::ActionSkipped { addr, reason, .. } => {
                state.line(format!("    {DIM}{addr}: skipped, because {reason}{DIM:#}"));
            }
            ApplyEvent::ApplyFinished {
                succeeded,
                failed,
                skipped,
                elapsed_ms,
            } => {
                state.stop();
                state.line(finished_text(
                    self.destroying,
                    *succeeded,
                    *failed,
                    *skipped,
                    *elapsed_ms,
                ));
            }
        }
    }
}

impl TerminalState {
    /// Job `job` of `jobs` submitted at `addr` waits for Kueue's decision: said once, then
    /// counted on the spinner.
    fn awaiting_kueue(
        &mut self,
        addr: &crate::addr::ResourceAddr,
        job: usize,
        jobs: usize,
        elapsed_ms: u64,
        limit_ms: u64,
    ) {
        let what = format!("waiting for Kueue's decision on job {job} of {jobs}");
        if self.awaiting.as_ref() != Some(addr) {
            self.awaiting = Some(addr.clone());
            self.line(format!(
                "    {DIM}{addr}: {what} (at most {}){DIM:#}",
                format_elapsed(limit_ms)
            ));
        }
        self.spin(format!(
            "{addr}: {what} [{} of {}]",
            format_elapsed(elapsed_ms),
            format_elapsed(limit_ms)
        ));
    }
}

/// The last line of an apply (or a destroy): complete, or incomplete with what failed.
fn finished_text(
    destroying: bool,
    succeeded: usize,
    failed: usize,
    skipped: usize,
    elapsed_ms: u64,
) -> String {
    let elapsed = format_elapsed(elapsed_ms);
    let (what, done) = if destroying {
        ("Destroy", "destroyed")
    } else {
        ("Apply", "changed")
    };
    if failed == 0 && skipped == 0 {
        format!(
            "\n{GREEN}{BOLD}{what} complete!{BOLD:#}{GREEN} {succeeded} {done} in {elapsed}.{GREEN:#}"
        )
    } else {
        format!(
            "\n{RED}{BOLD}{what} incomplete:{BOLD:#}{RED} {succeeded} {done}, {failed} failed, {skipped} skipped ({elapsed}).{RED:#}"
        )
    }
}

/// One JSON object per event and line (`{"event": "action-started", ...}`), for CI and tools.
pub struct JsonLinesSink<W: Write + Send> {
    out: Mutex<W>,
}

impl<W: Write + Send> JsonLinesSink<W> {
    pub fn new(out: W) -> Self {
        JsonLinesSink {
            out: Mutex::new(out),
        }
    }

    pub fn into_inner(self) -> W {
        match self.out.into_inner() {
            Ok(out) => out,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl<W: Write + Send> Sink for JsonLinesSink<W> {
    fn emit(&self, event: &ApplyEvent) {
        let Ok(mut out) = self.out.lock() else { return };
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::ResourceAddr;
    use std::sync::Arc;

    /// A writer tests can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn events() -> Vec<ApplyEvent> {
        let pool = ResourceAddr::gke_node_pool("on-demand-pool");
        vec![
            ApplyEvent::ApplyStarted { changes: 1 },
            ApplyEvent::ActionStarted {
                addr: pool.clone(),
                kind: ActionKind::Create,
                reason: "missing".into(),
            },
            ApplyEvent::Progress {
                addr: pool.clone(),
                step: "nodePools.create".into(),
                operation: "operation-1".into(),
                operation_type: "CREATE_NODE_POOL".into(),
                status: "RUNNING".into(),
                elapsed_ms: 5_000,
            },
            ApplyEvent::ActionFailed {
                addr: pool.clone(),
                kind: ActionKind::Create,
                error: "gke.nodepool/on-demand-pool: nodePools.create failed: GCE_STOCKOUT".into(),
                hint: Some("try later".into()),
            },
            ApplyEvent::ApplyFinished {
                succeeded: 0,
                failed: 1,
                skipped: 0,
                elapsed_ms: 6_000,
            },
        ]
    }

    #[test]
    fn terminal_lines_name_the_resource_and_the_hint() {
        let buffer = Shared::default();
        let sink = TerminalSink::new(Box::new(buffer.clone()), ProgressDrawTarget::hidden);
        for event in events() {
            sink.emit(&event);
        }
        let text =
            super::super::strip(&String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap());
        assert!(
            text.contains("  + gke.nodepool/on-demand-pool: Creating..."),
            "{text}"
        );
        assert!(
            text.contains(
                "Error: gke.nodepool/on-demand-pool: nodePools.create failed: GCE_STOCKOUT"
            )
        );
        assert!(text.contains("hint: try later"));
        assert!(text.contains("Apply incomplete: 0 changed, 1 failed, 0 skipped (6s)."));
    }

    #[test]
    fn waits_for_kueue_show_the_job_and_what_a_timeout_means() {
        let buffer = Shared::default();
        let sink = TerminalSink::new(Box::new(buffer.clone()), ProgressDrawTarget::hidden);
        let job: ResourceAddr = ResourceAddr::ray_job("default", "train-1");
        for elapsed_ms in [100, 1_200, 2_300] {
            sink.emit(&ApplyEvent::AwaitingKueue {
                addr: job.clone(),
                job: 1,
                jobs: 3,
                elapsed_ms,
                limit_ms: 30_000,
            });
        }
        sink.emit(&ApplyEvent::KueueDecided {
            addr: job.clone(),
            job: 1,
            jobs: 3,
            decided: false,
            elapsed_ms: 30_000,
        });
        let text =
            super::super::strip(&String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap());
        assert_eq!(
            text.matches("waiting for Kueue's decision on job 1 of 3 (at most 30s)")
                .count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("Kueue decided nothing on job 1 of 3 within 30s; job 2 is submitted now"),
            "{text}"
        );
        let json = serde_json::to_value(ApplyEvent::AwaitingKueue {
            addr: job,
            job: 2,
            jobs: 3,
            elapsed_ms: 0,
            limit_ms: 30_000,
        })
        .unwrap();
        assert_eq!(json["event"], "awaiting-kueue");
        assert_eq!(json["limitMs"], 30_000);
    }

    #[test]
    fn json_lines_are_one_event_each() {
        let sink = JsonLinesSink::new(Vec::new());
        for event in events() {
            sink.emit(&event);
        }
        let text = String::from_utf8(sink.into_inner()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[1]["event"], "action-started");
        assert_eq!(lines[1]["addr"], "gke.nodepool/on-demand-pool");
        assert_eq!(lines[2]["operationType"], "CREATE_NODE_POOL");
        assert_eq!(lines[3]["hint"], "try later");
        let back: ApplyEvent = serde_json::from_value(lines[2].clone()).unwrap();
        assert_eq!(back, events()[2]);
    }
}
