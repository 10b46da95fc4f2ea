//! A long-running `gkq` process (such as `gkq watch`) whose output a test reads as it comes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

pub struct Running {
    child: Child,
    lines: Receiver<String>,
    /// Everything read from stdout so far.
    pub stdout: String,
    stderr: Receiver<String>,
}

impl Running {
    /// Spawns `command` with stdout and stderr piped and read line by line in the background.
    pub fn spawn(mut command: Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawning the command");
        let (tx, lines) = channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, stderr) = channel();
        let err = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if etx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            stdout: String::new(),
            stderr,
        }
    }

    /// Reads stdout until the text read since `mark` satisfies `done`; returns that text and the
    /// time it took. Panics after `timeout`, showing what was read.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> (String, Duration) {
        let start = Instant::now();
        let mark = self.stdout.len();
        loop {
            if done(&self.stdout[mark..]) {
                return (self.stdout[mark..].to_string(), start.elapsed());
            }
            let left = timeout.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stdout.push_str(&line);
                    self.stdout.push('\n');
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    let stderr: Vec<String> = self.stderr.try_iter().collect();
                    panic!(
                        "waited {:?} for {what}; stdout since then:\n{}\nstderr:\n{}",
                        start.elapsed(),
                        &self.stdout[mark..],
                        stderr.join("\n")
                    );
                }
            }
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process wrote to stderr since the last call.
    pub fn take_stderr(&self) -> String {
        let lines: Vec<String> = self.stderr.try_iter().collect();
        lines.join("\n")
    }

    /// Sends SIGKILL and waits for the process to be gone.
    pub fn kill_9(&mut self) {
        let status = Command::new("kill")
            .args(["-9", &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success());
        let _ = self.child.wait();
    }

    /// Sends SIGINT (what Ctrl-C sends) and waits for the exit; returns the exit code and stderr.
    pub fn interrupt(self) -> (Option<i32>, String) {
        self.stop_with("-INT")
    }

    /// Sends SIGTERM (what Kubernetes sends a pod it stops) and waits for the exit; returns the
    /// exit code and stderr.
    pub fn terminate(self) -> (Option<i32>, String) {
        self.stop_with("-TERM")
    }

    fn stop_with(mut self, signal: &str) -> (Option<i32>, String) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success());
        let start = Instant::now();
        let code = loop {
            if let Some(status) = self.child.try_wait().expect("waiting") {
                break status.code();
            }
            if start.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                panic!("did not stop within 20s of kill {signal}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader threads end with the process; give them a moment to deliver the rest.
        std::thread::sleep(Duration::from_millis(100));
        let stderr: Vec<String> = self.stderr.try_iter().collect();
        (code, stderr.join("\n"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child's output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A finished command's exit code, stdout and stderr, for an assertion message.
pub fn explain(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}
