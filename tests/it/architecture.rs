//! The shape of `src/`, checked rather than described: the top-level modules form named groups
//! (the pure core, the pure views, the imperative shell, the simulator, the pipeline, its
//! callers) and some edges between them may not exist ([`FORBIDDEN`]); there are no import
//! cycles between top-level modules nor between files; the pure modules do no I/O; only the
//! commands print; no function is longer than [`MAX_FUNCTION_LINES`].
//!
//! References are read from the source text: `crate::a::b` paths and `use crate::{..}` /
//! `use super::..` trees, outside `#[cfg(test)]` modules (tests may reach across groups).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Kubernetes words, the spec, the desired and live model, the diff, Kueue's rules and the plan:
/// plain data and pure functions.
const CORE: &[&str] = &[
    "vocab",
    "addr",
    "spec",
    "placement",
    "model",
    "diff",
    "plan",
];
/// What `gkq status`, `watch` and `explain` report, and how plans and reports look: pure
/// functions of what the shell read.
const VIEWS: &[&str] = &["report", "render"];
/// The imperative shell: clients, observers, the executor, git, locks and owner-only files.
const SHELL: &[&str] = &[
    "interrupt",
    "emulator",
    "gke",
    "kube",
    "observe",
    "apply",
    "gitops",
    "owner_only",
];
/// The local target: Kubernetes as an object store with simulated controllers.
const SIMULATOR: &[&str] = &["local"];
/// The one layer commands and the agent call.
const PIPELINE: &[&str] = &["ops"];
/// The callers of the pipeline: the commands and the in-cluster agent.
const CALLERS: &[&str] = &["agent", "cli"];

const GROUPS: &[(&str, &[&str])] = &[
    ("core", CORE),
    ("views", VIEWS),
    ("shell", SHELL),
    ("simulator", SIMULATOR),
    ("pipeline", PIPELINE),
    ("callers", CALLERS),
];

/// Edges that may not exist: no module of `from` imports a module of `to`.
struct Forbidden {
    from: &'static [&'static [&'static str]],
    to: &'static [&'static [&'static str]],
    why: &'static str,
}

const FORBIDDEN: &[Forbidden] = &[
    Forbidden {
        from: &[CORE],
        to: &[VIEWS, SHELL, SIMULATOR, PIPELINE, CALLERS],
        why: "the pure core imports only the pure core",
    },
    Forbidden {
        from: &[&["report"]],
        to: &[SHELL],
        why: "reports are pure functions of what the shell read",
    },
    Forbidden {
        from: &[VIEWS],
        to: &[SIMULATOR, PIPELINE, CALLERS],
        why: "reports and renderings are told what happened; they do not make it happen",
    },
    Forbidden {
        from: &[SIMULATOR],
        to: &[&["gitops", "report", "render"], PIPELINE, CALLERS],
        why: "the simulated cluster knows nothing of git, locks, reports, terminals or the pipeline",
    },
    Forbidden {
        from: &[&["apply"]],
        to: &[&["observe"]],
        why: "apply verifies with its own reads; what it shares with observe lives below both",
    },
    Forbidden {
        from: &[SHELL, SIMULATOR],
        to: &[PIPELINE, CALLERS],
        why: "nothing below ops calls ops or its callers",
    },
    Forbidden {
        from: &[PIPELINE],
        to: &[CALLERS],
        why: "ops does not know who calls it",
    },
    Forbidden {
        from: &[&["cli"]],
        to: &[&["gitops", "apply", "observe"]],
        why: "the commands reach git, apply and observe only through ops",
    },
    Forbidden {
        from: &[&["agent"]],
        to: &[&["apply", "observe", "cli"]],
        why: "the agent reaches apply and observe only through ops, and is not a command",
    },
];

/// Files exempt from one forbidden edge while they are rewritten: `(file module, target
/// top-level module)`. Empty: every file keeps every rule.
const ALLOWED_FOR_NOW: &[(&str, &str)] = &[];

/// Functions over plain data: no files, network, processes, clocks or environment.
fn pure() -> impl Iterator<Item = &'static str> {
    CORE.iter().chain(VIEWS).copied()
}

/// What a pure module must not call (outside its tests).
const IO_MARKERS: &[&str] = &[
    "std::fs::",
    "std::env::",
    "std::process::",
    "std::net::",
    "tokio::",
    "reqwest::",
    "git2::",
    "kube::Client",
    "SystemTime::now",
    "Instant::now",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, in path order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// Every library source file with its module path (`plan::build`; `plan` for `plan/mod.rs`).
fn files() -> Vec<(Vec<String>, PathBuf)> {
    let src = src();
    rust_files(&src)
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&src).unwrap();
            let mut module: Vec<String> = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            let top_level = module.len() == 1;
            if module[0] == "bin" && !top_level
                || top_level && (module[0] == "lib" || module[0] == "main")
            {
                return None;
            }
            if module.last().is_some_and(|last| last == "mod") {
                module.pop();
            }
            Some((module, path))
        })
        .collect()
}

/// The text of a file without its `#[cfg(test)]` modules and comments.
fn non_test_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // Skip the item that follows: up to its closing brace at the same indentation, or
            // one line for a `mod x;`.
            let indent = line.len() - trimmed.len();
            let Some(item) = lines.next() else { break };
            if item.trim_end().ends_with(';') {
                continue;
            }
            for inner in lines.by_ref() {
                let t = inner.trim_start();
                if inner.len() - t.len() == indent && t.starts_with('}') {
                    break;
                }
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand_use(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    fn split_top(s: &str) -> Vec<&str> {
        let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts.into_iter().filter(|p| !p.is_empty()).collect()
    }
    match tree.find('{') {
        None => vec![tree],
        Some(open) => {
            let head = &tree[..open];
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            split_top(inner)
                .into_iter()
                .flat_map(expand_use)
                .map(|tail| format!("{head}{tail}"))
                .collect()
        }
    }
}

/// The paths a file refers to, as absolute module paths (`crate::` and `super::` resolved).
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    // `use` statements, which may span lines.
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        let tree = &rest[..end];
        if tree.starts_with("crate::") || tree.starts_with("super::") || tree.starts_with("self::")
        {
            paths.extend(expand_use(tree));
        }
        rest = &rest[end..];
    }
    // Inline paths.
    for (at, _) in code.match_indices("crate::") {
        let tail: String = code[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.push(tail);
    }
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("::") {
            continue;
        }
        let tail: String = code[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.push(tail);
    }
    paths
        .into_iter()
        .filter_map(|p| {
            let mut segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
            let mut base: Vec<String> = match segs.first() {
                Some(&"crate") => Vec::new(),
                Some(&"super") => module[..module.len().saturating_sub(1)].to_vec(),
                Some(&"self") => module.to_vec(),
                _ => return None,
            };
            segs.remove(0);
            while segs.first() == Some(&"super") {
                base.pop();
                segs.remove(0);
            }
            base.extend(segs.iter().map(|s| s.to_string()));
            Some(base)
        })
        .collect()
}

struct Tree {
    /// Module path -> file.
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// File module -> the file modules it refers to.
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    /// File module -> its code outside tests.
    code: BTreeMap<Vec<String>, String>,
}

fn tree() -> Tree {
    let files = files();
    let modules: BTreeMap<Vec<String>, PathBuf> = files.iter().cloned().collect();
    let mut edges = BTreeMap::new();
    let mut code_of = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let code = non_test_code(&text);
        let mut targets = BTreeSet::new();
        for mut reference in references(module, &code) {
            // The deepest module the path names.
            while !reference.is_empty() && !modules.contains_key(&reference) {
                reference.pop();
            }
            if !reference.is_empty() && reference != *module {
                targets.insert(reference);
            }
        }
        edges.insert(module.clone(), targets);
        code_of.insert(module.clone(), code);
    }
    Tree {
        modules,
        edges,
        code: code_of,
    }
}

fn group_of(top: &str) -> Option<&'static str> {
    GROUPS
        .iter()
        .find(|(_, modules)| modules.contains(&top))
        .map(|(name, _)| *name)
}

#[test]
fn every_top_level_module_has_a_group() {
    let t = tree();
    let tops: BTreeSet<&str> = t.modules.keys().map(|m| m[0].as_str()).collect();
    let missing: Vec<&&str> = tops.iter().filter(|m| group_of(m).is_none()).collect();
    assert!(missing.is_empty(), "add {missing:?} to GROUPS");
}

/// `from -> to (why)` for each file-level edge a rule of `forbidden` names, except those
/// `allowed` lists.
fn forbidden_edges(
    edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    forbidden: &[Forbidden],
    allowed: &[(&str, &str)],
) -> Vec<String> {
    let in_any = |sets: &[&[&str]], top: &str| sets.iter().any(|set| set.contains(&top));
    let mut wrong = Vec::new();
    for (from, targets) in edges {
        for to in targets {
            let (a, b) = (from[0].as_str(), to[0].as_str());
            if a == b || allowed.contains(&(from.join("::").as_str(), b)) {
                continue;
            }
            for rule in forbidden {
                if in_any(rule.from, a) && in_any(rule.to, b) {
                    wrong.push(format!(
                        "{} -> {} ({})",
                        from.join("::"),
                        to.join("::"),
                        rule.why
                    ));
                }
            }
        }
    }
    wrong
}

#[test]
fn no_forbidden_edges() {
    let wrong = forbidden_edges(&tree().edges, FORBIDDEN, ALLOWED_FOR_NOW);
    assert!(
        wrong.is_empty(),
        "forbidden imports (see FORBIDDEN):\n{}",
        wrong.join("\n")
    );
}

/// The checker itself: a forbidden edge added to a set of allowed ones is found, named with its
/// rule; the temporary allowance covers exactly the file it names.
#[test]
fn the_checker_finds_a_deliberately_added_forbidden_edge() {
    let path = |p: &str| p.split("::").map(str::to_string).collect::<Vec<_>>();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut add = |from: &str, to: &str| {
        edges.entry(path(from)).or_default().insert(path(to));
    };
    add("diff::normalize", "vocab::quantity");
    add("ops::lock", "gitops::lock");
    add("cli::status", "ops::status");
    add("local::kueue::jobs", "placement::podsets");
    assert_eq!(
        forbidden_edges(&edges, FORBIDDEN, &[]),
        Vec::<String>::new()
    );

    let with = |from: &str, to: &str| {
        let mut e = edges.clone();
        e.entry(path(from)).or_default().insert(path(to));
        forbidden_edges(&e, FORBIDDEN, &[("cli::apply", "gitops")])
    };
    assert_eq!(
        with("local::kueue::provisioning", "report::provisioning"),
        [
            "local::kueue::provisioning -> report::provisioning (the simulated cluster knows nothing of git, locks, reports, terminals or the pipeline)"
        ]
    );
    assert_eq!(with("diff::normalize", "placement::quantity").len(), 0);
    assert_eq!(
        with("diff::normalize", "observe::kube"),
        ["diff::normalize -> observe::kube (the pure core imports only the pure core)"]
    );
    assert_eq!(with("apply::verify", "observe::kube").len(), 1);
    assert_eq!(with("cli::status", "gitops::lock").len(), 1);
    assert_eq!(
        with("cli::apply", "gitops::saved").len(),
        0,
        "allowed for now"
    );
    assert_eq!(with("cli::apply_saved", "gitops::saved").len(), 1);
    assert_eq!(with("agent::reconcile", "observe::cluster").len(), 1);
    // Two rules name this edge: the simulator's and "nothing below ops calls ops".
    assert_eq!(with("local::sim", "ops::status").len(), 2);

    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    graph
        .entry(path("model"))
        .or_default()
        .insert(path("placement"));
    assert!(cycles_in(&graph).is_empty());
    graph
        .entry(path("placement"))
        .or_default()
        .insert(path("model"));
    assert_eq!(cycles_in(&graph), ["model -> placement -> model"]);
}

/// No two top-level modules import each other, directly or through others: the groups are
/// ordered by what they import, not only by what they may not.
#[test]
fn no_module_level_import_cycles() {
    let t = tree();
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, targets) in &t.edges {
        let entry = graph.entry(vec![from[0].clone()]).or_default();
        entry.extend(
            targets
                .iter()
                .filter(|to| to[0] != from[0])
                .map(|to| vec![to[0].clone()]),
        );
    }
    let cycles = cycles_in(&graph);
    assert!(
        cycles.is_empty(),
        "import cycles between top-level modules:\n{}",
        cycles.join("\n")
    );
}

/// `file: marker` for each marker found in the code of a module whose top-level module
/// `checked` picks.
fn markers_in(checked: impl Fn(&str) -> bool, markers: &[&str]) -> Vec<String> {
    let t = tree();
    let mut found = Vec::new();
    for (module, code) in t.code.iter().filter(|(m, _)| checked(&m[0])) {
        for marker in markers {
            if code.contains(marker) {
                found.push(format!("{}: {marker}", t.modules[module].display()));
            }
        }
    }
    found
}

#[test]
fn pure_modules_do_no_io() {
    let wrong = markers_in(|m| pure().any(|p| p == m), IO_MARKERS);
    assert!(
        wrong.is_empty(),
        "I/O in a pure module:\n{}",
        wrong.join("\n")
    );
}

/// Modules that may write to stdout or stderr themselves: the commands, and the GKE emulator's
/// `serve`, whose one line (the address it listens on) is what its callers wait for.
const PRINTERS: &[&str] = &["cli", "emulator"];

/// Everything else tells what happens through `tracing` (the pipeline's notices to a person
/// with the target `ops::NOTICE`) or a sink its caller passes: the agent's stderr is JSON lines
/// only, and a command decides how its output looks.
#[test]
fn only_the_commands_print() {
    let printing = ["println!", "print!", "eprintln!", "eprint!", "dbg!"];
    let wrong = markers_in(|m| !PRINTERS.contains(&m), &printing);
    assert!(
        wrong.is_empty(),
        "printing below the commands:\n{}",
        wrong.join("\n")
    );
}

/// No two files (other than a directory's `mod.rs`, which declares and re-exports its children)
/// import each other, directly or through others.
#[test]
fn no_file_level_import_cycles() {
    let t = tree();
    let is_leaf = |m: &Vec<String>| t.modules[m].file_name().is_some_and(|n| n != "mod.rs");
    let graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = t
        .edges
        .iter()
        .filter(|(m, _)| is_leaf(m))
        .map(|(m, targets)| {
            let leaves = targets.iter().filter(|x| is_leaf(x)).cloned().collect();
            (m.clone(), leaves)
        })
        .collect();
    let cycles = cycles_in(&graph);
    assert!(
        cycles.is_empty(),
        "file-level import cycles:\n{}",
        cycles.join("\n")
    );
}

/// Each cycle a depth-first search of `graph` closes, as `a -> b -> a`.
fn cycles_in(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    let mut state: BTreeMap<&Vec<String>, u8> = BTreeMap::new();
    let mut cycles = Vec::new();
    fn visit<'a>(
        node: &'a Vec<String>,
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<&'a Vec<String>, u8>,
        stack: &mut Vec<&'a Vec<String>>,
        cycles: &mut Vec<String>,
    ) {
        state.insert(node, 1);
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next) {
                Some(1) => {
                    let from = stack.iter().position(|n| *n == next).unwrap();
                    let names: Vec<String> = stack[from..].iter().map(|n| n.join("::")).collect();
                    cycles.push(format!("{} -> {}", names.join(" -> "), next.join("::")));
                }
                Some(_) => {}
                None => visit(next, graph, state, stack, cycles),
            }
        }
        stack.pop();
        state.insert(node, 2);
    }
    for node in graph.keys() {
        if !state.contains_key(node) {
            visit(node, graph, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    cycles
}

/// The checker itself: it must see the references it is meant to see.
#[test]
fn references_are_read_from_use_trees_and_paths() {
    let module = vec!["plan".to_string(), "build".to_string()];
    let code = "use crate::{addr::ResourceAddr, diff::{normalize::x, y}};\nuse super::graph::Graph;\nfn f() { crate::model::render(); }\n";
    let refs = references(&module, code);
    let refs: BTreeSet<String> = refs.iter().map(|r| r.join("::")).collect();
    for expected in [
        "addr::ResourceAddr",
        "diff::normalize::x",
        "diff::y",
        "plan::graph::Graph",
        "model::render",
    ] {
        assert!(refs.contains(expected), "{expected} in {refs:?}");
    }
    let test_code = "fn a() {}\n#[cfg(test)]\nmod tests {\n    use crate::cli::x;\n}\nfn b() { crate::gke::y(); }\n";
    let kept = non_test_code(test_code);
    assert!(!kept.contains("crate::cli"), "{kept}");
    assert!(kept.contains("crate::gke"), "{kept}");
}

/// The most lines a function in `src/` may span (outside `#[cfg(test)]` items), from its `fn`
/// line to its closing brace: a longer one is split into named steps.
const MAX_FUNCTION_LINES: usize = 120;

/// A function longer than the limit: its name, the line of its `fn` (from 1) and how many lines
/// it spans.
#[derive(Debug, PartialEq)]
struct LongFunction {
    name: String,
    line: usize,
    lines: usize,
}

/// `text` with comments, string literals (raw and byte strings too) and character literals
/// blanked, newlines kept, so that every brace left is the code's and every character keeps its
/// line. A lifetime (`'a`) is code, not the start of a character literal.
fn code_only(text: &str) -> Vec<char> {
    let chars: Vec<char> = text.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out: Vec<char> = chars.clone();
    let mut blank = |from: usize, to: usize| {
        for c in &mut out[from..to.min(chars.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let at = |i: usize| chars.get(i).copied();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c == '/' && at(i + 1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            blank(start, i);
            continue;
        }
        if c == '/' && at(i + 1) == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            blank(start, i);
            continue;
        }
        // A raw string: `r"..."`, `r#"..."#`, `br"..."`.
        let prefix_ok = i == 0
            || !is_ident(chars[i - 1])
            || (chars[i - 1] == 'b' && (i < 2 || !is_ident(chars[i - 2])));
        if c == 'r' && prefix_ok {
            let mut j = i + 1;
            while at(j) == Some('#') {
                j += 1;
            }
            if at(j) == Some('"') {
                let hashes = j - i - 1;
                j += 1;
                while j < chars.len() {
                    if chars[j] == '"' && (1..=hashes).all(|k| at(j + k) == Some('#')) {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                blank(start, j);
                i = j;
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() {
                match chars[i] {
                    '\\' => i += 2,
                    '"' => {
                        i += 1;
                        break;
                    }
                    _ => i += 1,
                }
            }
            blank(start, i);
            continue;
        }
        if c == '\'' {
            if at(i + 1) == Some('\\') {
                // An escaped character (`'\n'`, `'\''`, `'\u{7b}'`): up to its closing quote.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                blank(start, i + 1);
                i += 1;
                continue;
            }
            if at(i + 2) == Some('\'') {
                blank(start, i + 3);
                i += 3;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The index of the brace that closes the one at `open` in `code`.
fn closing_brace(code: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in code.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    code.len().saturating_sub(1)
}

/// The first `{` or `;` after `from` outside parentheses and brackets (`[u8; 4]`).
fn body_or_end(code: &[char], from: usize) -> Option<(usize, char)> {
    let mut depth = 0i32;
    for (i, &c) in code.iter().enumerate().skip(from) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' | ';' if depth == 0 => return Some((i, c)),
            _ => {}
        }
    }
    None
}

/// Every function of Rust source `text` longer than `limit` lines, outside `#[cfg(test)]`
/// items (a test module, a test-only function). Braces in comments, strings and character
/// literals do not count.
fn long_functions(text: &str, limit: usize) -> Vec<LongFunction> {
    let code = code_only(text);
    let line_of = |at: usize| 1 + code[..at].iter().filter(|c| **c == '\n').count();
    let starts_at = |at: usize, word: &str| {
        word.chars()
            .enumerate()
            .all(|(k, w)| code.get(at + k) == Some(&w))
    };
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    // The spans of `#[cfg(test)]` items: the attribute up to the item's `;` or closing brace.
    let mut tests: Vec<(usize, usize)> = Vec::new();
    for at in 0..code.len() {
        if starts_at(at, "#[cfg(test)]") {
            let end = match body_or_end(&code, at + "#[cfg(test)]".len()) {
                Some((open, '{')) => closing_brace(&code, open),
                Some((semicolon, _)) => semicolon,
                None => code.len(),
            };
            tests.push((at, end));
        }
    }
    let mut long = Vec::new();
    for at in 0..code.len() {
        let word_start = at == 0 || !is_ident(code[at - 1]);
        if !(word_start
            && starts_at(at, "fn")
            && code.get(at + 2).is_some_and(|c| c.is_whitespace()))
        {
            continue;
        }
        if tests.iter().any(|(from, to)| (*from..=*to).contains(&at)) {
            continue;
        }
        let name_start = (at + 2..code.len())
            .find(|i| !code[*i].is_whitespace())
            .unwrap_or(code.len());
        let name: String = code[name_start..]
            .iter()
            .take_while(|c| is_ident(**c))
            .collect();
        if name.is_empty() {
            // A function pointer type (`fn(&str) -> bool`).
            continue;
        }
        let Some((open, '{')) = body_or_end(&code, name_start + name.len()) else {
            // A declaration without a body (a trait's method).
            continue;
        };
        let (first, last) = (line_of(at), line_of(closing_brace(&code, open)));
        let lines = last - first + 1;
        if lines > limit {
            long.push(LongFunction {
                name,
                line: first,
                lines,
            });
        }
    }
    long
}

/// Every function in `src/` is at most [`MAX_FUNCTION_LINES`] long.
#[test]
fn no_function_is_over_the_line_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found: Vec<(String, LongFunction)> = Vec::new();
    for path in rust_files(&src()) {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.strip_prefix(root).unwrap().display().to_string();
        for function in long_functions(&text, MAX_FUNCTION_LINES) {
            found.push((file.clone(), function));
        }
    }
    let over: Vec<String> = found
        .iter()
        .map(|(file, f)| format!("{file}:{} `{}` is {} lines", f.line, f.name, f.lines))
        .collect();
    assert!(
        over.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split each into named steps):\n{}",
        over.join("\n")
    );
}

/// The checker itself: a function of one line over the limit is found with its line and length,
/// one at the limit is not, nor one in a `#[cfg(test)]` module; braces in strings, characters
/// and comments, and lifetimes, do not move a function's end.
#[test]
fn the_line_limit_checker_counts_braces_of_code_only() {
    let function = |name: &str, lines: usize, first: &str| {
        let mut f = format!("fn {name}() {{\n    {first}\n");
        for _ in 0..lines - 3 {
            f.push_str("    let _ = 1;\n");
        }
        f.push_str("}\n");
        f
    };
    let source = [
        function("at_the_limit", 120, "let _ = 0;"),
        function("over_the_limit", 121, "let _ = 0;"),
        // Unbalanced closing braces in literals would end it early, at a short length.
        function(
            "closing_braces_in_literals",
            121,
            r##"let _ = ("}", '}', r#"}"#, b"}", '\'', "\"}"); // }"##,
        ),
        // Unbalanced opening braces would run it on over the functions after it.
        function(
            "opening_braces_in_literals",
            5,
            r#"let _ = ("{", '{', '\u{7b}', "\\{"); /* { /* { */ */"#,
        ),
        function("with_lifetimes", 4, "fn f<'a>(s: &'a str) -> &'a str { s }"),
        "pub trait T {\n    fn declared(&self) -> [u8; 4];\n}\n".to_string(),
        format!(
            "#[cfg(test)]\nmod tests {{\n{}}}\n",
            function("long_test", 130, "let _ = 0;")
        ),
        function("after_the_tests", 121, "let _ = 0;"),
    ]
    .concat();
    let found = long_functions(&source, 120);
    let names: Vec<(&str, usize)> = found.iter().map(|f| (f.name.as_str(), f.lines)).collect();
    assert_eq!(
        names,
        [
            ("over_the_limit", 121),
            ("closing_braces_in_literals", 121),
            ("after_the_tests", 121),
        ]
    );
    assert_eq!(found[0].line, 121, "{found:?}");
}
