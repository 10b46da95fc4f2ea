//! A real OpenSSH server (Debian's `openssh-server`, which scripts/test installs) on loopback,
//! for git over ssh: its own host key, one authorized client key, and no configuration of the
//! machine's (`sshd -f` with a file of its own). Stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::process::{explain, text};

const SSHD: &str = "/usr/sbin/sshd";

/// The lines sshd logged (`-e`: to stderr), read as they come.
type Log = Arc<Mutex<Vec<String>>>;

pub struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    log: Log,
    pub port: u16,
    /// The account clients log in as: the user running the tests (sshd not running as root can
    /// only log that user in).
    pub user: String,
}

/// A new ed25519 key pair without a passphrase at `path` (and `path.pub`).
pub fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "gkq-test", "-f"])
        .arg(path)
        .output()
        .expect("running ssh-keygen (Debian's openssh-client)");
    assert!(out.status.success(), "ssh-keygen: {}", explain(&out));
}

fn id(flag: &str) -> String {
    let out = Command::new("id").arg(flag).output().expect("running id");
    assert!(out.status.success(), "id {flag}: {}", explain(&out));
    text(&out.stdout).trim().to_string()
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

impl Sshd {
    /// Starts sshd on a free loopback port, accepting the key of [`Sshd::client_key`]; panics
    /// (the test fails) when sshd is not installed or does not start.
    pub fn start() -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: the SSH tests need Debian's openssh-server (scripts/test installs it; by hand: apt-get install openssh-server)"
        );
        if id("-u") == "0" {
            // sshd started by root separates privileges into a chroot it insists exists. Debian's
            // systemd unit creates it (RuntimeDirectory=sshd); without systemd nothing does.
            std::fs::create_dir_all("/run/sshd").expect("creating /run/sshd for sshd");
        }
        let dir = tempfile::tempdir().unwrap();
        keygen(&dir.path().join("host"));
        keygen(&dir.path().join("client"));
        std::fs::copy(
            dir.path().join("client.pub"),
            dir.path().join("authorized_keys"),
        )
        .unwrap();
        // The port may be taken between choosing and binding it: try a few.
        let mut failures = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            match Self::spawn(dir.path(), port) {
                Ok((child, log)) => {
                    return Sshd {
                        child,
                        dir,
                        log,
                        port,
                        user: id("-un"),
                    };
                }
                Err(output) => failures.push(output),
            }
        }
        panic!("sshd did not start:\n{}", failures.join("\n---\n"));
    }

    fn spawn(dir: &Path, port: u16) -> Result<(Child, Log), String> {
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress 127.0.0.1\nPort {port}\nHostKey {host}\nAuthorizedKeysFile {keys}\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile none\n",
                host = dir.join("host").display(),
                keys = dir.join("authorized_keys").display(),
            ),
        )
        .unwrap();
        let mut child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("running {SSHD}: {e}"))?;
        let log = Log::default();
        let lines = log.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let started = Instant::now();
        let listening = format!("Server listening on 127.0.0.1 port {port}");
        loop {
            let so_far = log.lock().unwrap().join("\n");
            if so_far.contains(&listening) {
                return Ok((child, log));
            }
            if let Some(status) = child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(100));
                return Err(format!(
                    "{SSHD} exited with {status}:\n{}",
                    log.lock().unwrap().join("\n")
                ));
            }
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{SSHD} did not listen within 10s:\n{so_far}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The authorized client's private key (OpenSSH format).
    pub fn client_key(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("client")).unwrap()
    }

    /// A `known_hosts` line for this server's host key.
    pub fn known_hosts(&self) -> String {
        let public = std::fs::read_to_string(self.dir.path().join("host.pub")).unwrap();
        let key: Vec<&str> = public.split_whitespace().take(2).collect();
        format!("[127.0.0.1]:{} {}\n", self.port, key.join(" "))
    }

    /// `ssh://USER@127.0.0.1:PORT/PATH` of the repository at the absolute `path`.
    pub fn url(&self, path: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            path.display()
        )
    }

    /// A directory of the server's, for repositories and other keys.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Everything sshd logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
