//! README's shell blocks run as written, in order, on a fresh copy of the repository, as a doc
//! test runs the code in documentation: every ```` ```sh ```` block of README.md, except those
//! marked `<!-- readme-test: skip NAME: why -->` on the line before them. The marked names must
//! be exactly [`SKIPPED`], so a block is never left out without this list saying so.
//!
//! `cargo run --release -- ARGS` in a block runs the gkq binary under test with ARGS (with the
//! tests' environment, `support::gkq`'s); any other `cargo` command fails the block.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::control_plane::repo_root;
use crate::support::gkq;
use crate::support::process::explain;
use crate::support::workspace::git;

/// The blocks README marks as not run here, and why: each needs what a test run does not have.
const SKIPPED: &[(&str, &str)] = &[
    (
        "scripts-test",
        "the whole suite, this test included, with root and Go builds",
    ),
    (
        "kube-spec-by-hand",
        "the test control plane (root, Go builds) and `gkq` on PATH",
    ),
    ("image-test", "buildah, runc and a debootstrap base image"),
    (
        "control-plane-by-hand",
        "the test control plane's binaries, built with Go, and root",
    ),
];

/// One ```` ```sh ```` block: where it starts in README, its text, its skip mark's name.
struct Block {
    line: usize,
    text: String,
    skip: Option<String>,
}

fn sh_blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        if !fence.starts_with("```") {
            i += 1;
            continue;
        }
        let info = fence.trim_start_matches('`').trim();
        let start = i;
        i += 1;
        let mut text = String::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            text.push_str(lines[i]);
            text.push('\n');
            i += 1;
        }
        i += 1;
        if info.split_whitespace().next() != Some("sh") {
            continue;
        }
        let skip = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- readme-test: skip "))
            .map(|rest| {
                rest.split(|c: char| c == ':' || c.is_whitespace())
                    .next()
                    .unwrap_or_default()
                    .to_string()
            });
        blocks.push(Block {
            line: start + 1,
            text,
            skip,
        });
    }
    blocks
}

/// The files git tracks, copied from the working tree into `dir` and committed there: what a
/// fresh clone of this checkout holds (a repository, no `.gkq` state, no build output).
fn fresh_copy(dir: &Path) {
    let root = repo_root();
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .expect("running git ls-files");
    assert!(listed.status.success(), "{}", explain(&listed));
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = PathBuf::from(String::from_utf8_lossy(name).into_owned());
        let from = root.join(&name);
        // A tracked file deleted in the working tree is not in a clone of it either.
        let Ok(meta) = std::fs::symlink_metadata(&from) else {
            continue;
        };
        let to = dir.join(&name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from).unwrap(), &to).unwrap();
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "a fresh clone"]);
}

/// A `cargo` for the blocks: `cargo run --release -- ARGS` is the binary under test.
fn cargo_shim(bin_dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let shim = bin_dir.join("cargo");
    std::fs::write(
        &shim,
        "#!/bin/sh\n\
         if [ \"$1\" = run ] && [ \"$2\" = --release ] && [ \"$3\" = -- ]; then\n\
           shift 3\n\
           exec \"$README_TEST_GKQ\" \"$@\"\n\
         fi\n\
         echo \"README test: only 'cargo run --release -- ARGS' runs here, not: cargo $*\" >&2\n\
         exit 97\n",
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    shim
}

#[test]
fn the_skip_marks_are_exactly_the_listed_ones() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let mut marked: Vec<String> = sh_blocks(&readme)
        .into_iter()
        .filter_map(|b| b.skip)
        .collect();
    marked.sort();
    let mut listed: Vec<String> = SKIPPED.iter().map(|(name, _)| name.to_string()).collect();
    listed.sort();
    assert_eq!(
        marked, listed,
        "README's `<!-- readme-test: skip NAME: why -->` marks and this test's SKIPPED list differ"
    );
    // The parser sees a mark only right before a block.
    let blocks =
        sh_blocks("text\n\n<!-- readme-test: skip x: y -->\n```sh\nfalse\n```\n```sh\ntrue\n```\n");
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].skip.as_deref(), Some("x"));
    assert_eq!(blocks[1].skip, None);
}

#[test]
fn every_shell_block_of_the_readme_runs_as_written_in_order() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let blocks: Vec<Block> = sh_blocks(&readme)
        .into_iter()
        .filter(|b| b.skip.is_none())
        .collect();
    assert!(
        blocks
            .iter()
            .any(|b| b.text.contains("apply examples/tpu-dws --env local")),
        "README's Quickstart block is among those run"
    );
    let clone = tempfile::tempdir().unwrap();
    fresh_copy(clone.path());
    let bin_dir = tempfile::tempdir().unwrap();
    cargo_shim(bin_dir.path());
    let base = gkq();
    let path = format!(
        "{}:{}",
        bin_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for block in &blocks {
        let mut shell = Command::new("bash");
        shell
            .args(["-e", "-u", "-o", "pipefail", "-x", "-c", &block.text])
            .current_dir(clone.path());
        for (name, value) in base.get_envs() {
            match value {
                Some(value) => shell.env(name, value),
                None => shell.env_remove(name),
            };
        }
        shell
            .env("PATH", &path)
            .env("README_TEST_GKQ", crate::support::cmd::BIN)
            .stdin(std::process::Stdio::null());
        let out = shell.output().expect("running bash");
        assert!(
            out.status.success(),
            "README.md line {}: the block failed\n{}\n{}",
            block.line,
            block.text,
            explain(&out)
        );
    }
}
