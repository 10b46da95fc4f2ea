//! The agent's container image: deploy/Dockerfile built with buildah (Debian's package) and run
//! with runc, on the Debian base that `tools/image-base.sh` makes with debootstrap (no container
//! registry is reachable where the tests run; Debian's package mirror is). The Dockerfile's
//! `prebuilt` stage takes the binary under test instead of compiling one in a Rust image; every
//! other step is the Dockerfile's own, its `apt-get install` included.
//!
//! The build happens in a buildah store of the test's own, in a temporary directory removed at
//! the end, reading the base from the cached store read-only; nothing of it outlives the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::cmd::BIN;
use crate::support::process::{explain, text};
use crate::support::repo_root;

/// The OCI runtime: crun (the default) refuses to start containers on a machine whose cgroup v2
/// hierarchy holds a controller beside the v1 ones, as this machine kind's does; runc starts them.
const RUNC: &str = "/usr/bin/runc";

const INSTALL: &str = "scripts/test installs them; by hand: apt-get install buildah runc";

/// The image's tag in the test's store.
const IMAGE: &str = "localhost/gkq-agent:test";

fn run(what: &str, command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    assert!(out.status.success(), "{what}: {}", explain(&out));
    out
}

/// What `tools/image-base.sh ARG` prints: the base's tag or its store.
fn image_base(arg: &str) -> String {
    let script = repo_root().join("tools/image-base.sh");
    let out = run(
        &format!("tools/image-base.sh {arg}"),
        Command::new("bash").arg(script).arg(arg),
    );
    text(&out.stdout).trim().to_string()
}

/// A buildah store in a directory of its own that also reads the images of `base_store`.
struct Store {
    dir: PathBuf,
    base_store: String,
}

impl Store {
    fn buildah(&self) -> Command {
        let mut c = Command::new("buildah");
        c.arg("--root")
            .arg(self.dir.join("storage"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs", "--storage-opt"])
            .arg(format!("vfs.imagestore={}", self.base_store));
        c
    }

    /// `buildah run` in the working container `container` (as the image's user, without network),
    /// `argv` as it is, no shell.
    fn run_in(&self, container: &str, argv: &[&str]) -> Output {
        let what = format!("{argv:?} in the image");
        run(
            &what,
            self.buildah()
                .args(["run", "--isolation", "oci", "--runtime", RUNC])
                .args(["--network", "none", container, "--"])
                .args(argv),
        )
    }
}

fn strings(config: &Value, field: &str) -> Vec<String> {
    config[field]
        .as_array()
        .unwrap_or_else(|| panic!("the image config has no {field}: {config}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// `from`'s contents in a new file `to` (a hard link when both are on one file system).
fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

#[test]
fn the_dockerfile_builds_a_non_root_image_that_runs_the_agent() {
    for (tool, path) in [("buildah", "/usr/bin/buildah"), ("runc", RUNC)] {
        assert!(
            Path::new(path).exists(),
            "{path} is missing: building the agent image needs Debian's {tool} ({INSTALL})"
        );
    }
    let base = image_base("tag");
    let dir = tempfile::tempdir().unwrap();
    let store = Store {
        dir: dir.path().join("store"),
        base_store: image_base("store"),
    };
    let found = store
        .buildah()
        .args(["inspect", "--type", "image", &base])
        .output()
        .expect("running buildah");
    assert!(
        found.status.success(),
        "the base image {base} is missing: make it once with tools/image-base.sh \
         (scripts/test does; debootstrap from Debian's mirror, about a minute)\n{}",
        explain(&found)
    );

    // The build context: the binary under test, nothing else.
    let context = dir.path().join("context");
    std::fs::create_dir(&context).unwrap();
    link_or_copy(Path::new(BIN), &context.join("gkq"));
    run(
        "buildah build -f deploy/Dockerfile",
        store
            .buildah()
            .args(["build", "--isolation", "oci", "--runtime", RUNC])
            // The Dockerfile's apt-get reaches Debian's mirror; nothing is pulled from a registry.
            .args(["--network", "host", "--pull=never", "--quiet"])
            .arg("-f")
            .arg(repo_root().join("deploy/Dockerfile"))
            .args(["--build-arg", "BINARY=prebuilt"])
            .args(["--build-arg", "GKQ_BINARY=gkq"])
            .args(["--build-arg", &format!("RUNTIME_BASE={base}")])
            .args(["-t", IMAGE])
            .arg(&context),
    );

    // What a container runtime reads: the user, the entrypoint and the default command.
    let inspected = run(
        "buildah inspect",
        store.buildah().args(["inspect", "--type", "image", IMAGE]),
    );
    let inspected: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    let config = &inspected["OCIv1"]["config"];
    assert_eq!(config["User"], "65532:65532", "{config}");
    let entrypoint = strings(config, "Entrypoint");
    let cmd = strings(config, "Cmd");
    assert_eq!(entrypoint, ["/usr/local/bin/gkq"]);
    assert_eq!(cmd, ["agent"]);

    let container = run(
        "buildah from",
        store.buildah().args(["from", "--pull=never", IMAGE]),
    );
    let container = text(&container.stdout).trim().to_string();

    // Processes in the image run as the image's user, which is not root and cannot change gkq.
    for (flag, want) in [("-u", "65532"), ("-g", "65532")] {
        let id = store.run_in(&container, &["id", flag]);
        assert_eq!(text(&id.stdout).trim(), want, "id {flag} in the image");
    }
    store.run_in(&container, &["test", "!", "-w", &entrypoint[0]]);

    // The binary in the image is the one under test, and it runs there.
    let sum = |out: Output| {
        text(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let inside = sum(store.run_in(&container, &["sha256sum", &entrypoint[0]]));
    let outside = sum(run("sha256sum", Command::new("sha256sum").arg(BIN)));
    assert_eq!(
        inside, outside,
        "the image's gkq is not the binary under test"
    );
    let mut argv: Vec<&str> = entrypoint.iter().map(String::as_str).collect();
    argv.push("--version");
    let version = store.run_in(&container, &argv);
    assert_eq!(
        text(&version.stdout).trim(),
        format!("gkq {}", env!("CARGO_PKG_VERSION"))
    );

    // The default command is the agent: with --print-crd it prints the CRD deploy/ applies.
    let mut argv: Vec<&str> = entrypoint.iter().chain(&cmd).map(String::as_str).collect();
    argv.push("--print-crd");
    let crd = store.run_in(&container, &argv);
    let committed = std::fs::read_to_string(repo_root().join("deploy/crd.yaml")).unwrap();
    assert!(
        text(&crd.stdout) == committed,
        "the image's `gkq agent --print-crd` differs from deploy/crd.yaml:\n{}",
        text(&crd.stdout)
    );

    // What the agent runs to fetch repositories, and the CA certificates HTTPS needs.
    let git = store.run_in(&container, &["git", "--version"]);
    assert!(text(&git.stdout).starts_with("git version "), "{git:?}");
    let ssh = store.run_in(&container, &["ssh", "-V"]);
    assert!(text(&ssh.stderr).starts_with("OpenSSH_"), "{ssh:?}");
    store.run_in(
        &container,
        &["test", "-s", "/etc/ssl/certs/ca-certificates.crt"],
    );
}
