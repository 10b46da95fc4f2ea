//! The spec: what the user wrote, parsed with source locations.
//!
//! `load` reads the spec file (YAML or TOML), merges the environment overlay, substitutes
//! variables, decodes the typed [`Spec`] and reads the files it references. Every problem becomes
//! a [`Diagnostic`] with file, line and column; loading stops only when nothing more can be
//! checked.

pub mod de;
pub mod diag;
pub mod fs;
mod generated;
pub mod head;
pub mod ladder;
pub mod limits;
pub mod node;
pub mod overlay;
mod required;
pub mod sensitive;
pub mod source;
pub mod types;
pub mod vars;

use std::collections::BTreeMap;
use std::path::{Path as FsPath, PathBuf};

pub use diag::{Diagnostic, Diagnostics, Severity};
pub use fs::SpecFs;
pub use node::{Node, NodeKind, Path, Seg};
pub use sensitive::{REDACTED, SensitiveValues};
pub use source::{FileId, SourceMap, Span};
pub use types::Spec;

/// File names looked for when SPEC is a directory, in this order.
pub const SPEC_FILE_NAMES: [&str; 3] = ["gkq.yaml", "gkq.yml", "gkq.toml"];

/// Looks up an environment variable by name.
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String>>;

#[derive(Default)]
pub struct LoadOptions {
    /// Environment overlay name (`--env`).
    pub env: Option<String>,
    /// `--var NAME=VALUE` values.
    pub vars: BTreeMap<String, String>,
    /// Looks up process environment variables by full name (`GKQ_VAR_ZONE`); `None` reads no
    /// environment (the command line passes the process environment).
    pub env_lookup: Option<EnvLookup>,
}

/// A loaded spec: the typed spec, the merged document it came from (for locating problems) and
/// the contents of the files it references.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub spec: Spec,
    pub root: Node,
    pub sources: SourceMap,
    /// The spec file and the directory that relative paths are resolved against.
    pub spec_file: PathBuf,
    pub dir: PathBuf,
    pub env: Option<String>,
    /// Files referenced by the spec (training scripts), keyed by the path as written.
    pub files: BTreeMap<String, String>,
    /// Values of the variables declared `sensitive: true`.
    pub sensitive: SensitiveValues,
    /// Every declared variable's value and where it came from, as interpolation used them: the
    /// spec digest hashes these values, and plans name the variables set from outside the spec.
    pub variables: BTreeMap<String, vars::ResolvedVar>,
    /// Problems found while loading (and, once `ops::load::load_valid` has validated the spec,
    /// everything validation said of it). May hold errors: a spec that decoded despite them
    /// (unknown keys are skipped) is still validated so that every problem is reported at once,
    /// but `model::build` refuses it.
    pub diagnostics: Diagnostics,
    /// Paths of values removed because they had the wrong type (reported in `diagnostics`):
    /// validation of the rest goes on, but says nothing about what sits at or under them.
    pub undecoded: Vec<String>,
    /// Where the entries `model::ladder` generated from `capacity:` came from.
    pub origins: ladder::Origins,
}

impl Loaded {
    /// The span of the value at `path` in the merged document.
    pub fn span(&self, path: &Path) -> Span {
        self.root.span_at(&self.origins.source_of(path))
    }

    /// Drops what only validation reads, once the desired state is built: the merged document
    /// tree (spans come from it) and the raw `manifests` (the desired state has them, labelled).
    /// With thousands of manifests these are most of a spec's memory, and a plan needs neither.
    ///
    /// They are freed on a thread of their own: hundreds of thousands of nodes take the main
    /// thread milliseconds to free while the plan could go on.
    pub fn release_documents(&mut self) {
        let span = self.root.span;
        let root = std::mem::replace(
            &mut self.root,
            Node {
                kind: NodeKind::Null,
                span,
            },
        );
        let manifests = std::mem::take(&mut self.spec.manifests);
        // Should no thread start, the closure and what it holds are freed here instead.
        let _ = std::thread::Builder::new()
            .name("gkq-free".into())
            .spawn(move || drop((root, manifests)));
    }
}

/// What `load` returns when the spec cannot be used: every problem found, and the sources to
/// show them with.
#[derive(Debug)]
pub struct LoadFailure {
    pub sources: SourceMap,
    pub diagnostics: Diagnostics,
}

/// Finds the spec file for a SPEC argument: a file, or a directory holding one spec file.
pub fn resolve_spec_path(fs: &dyn SpecFs, arg: &FsPath) -> Result<PathBuf, Diagnostic> {
    if fs.is_dir(arg) {
        let found: Vec<PathBuf> = SPEC_FILE_NAMES
            .iter()
            .map(|n| arg.join(n))
            .filter(|p| fs.is_file(p))
            .collect();
        // With several spec files (the example keeps gkq.yaml and its TOML twin side by side),
        // the first in SPEC_FILE_NAMES order wins; commands name the file they read.
        found.into_iter().next().ok_or_else(|| {
            Diagnostic::error(format!(
                "no spec in {}: expected gkq.yaml or gkq.toml",
                arg.display()
            ))
            .help("pass the spec file itself, or a directory that holds gkq.yaml or gkq.toml")
        })
    } else if fs.is_file(arg) {
        Ok(arg.to_path_buf())
    } else {
        Err(
            Diagnostic::error(format!("spec not found: {}", arg.display()))
                .help("pass a gkq.yaml or gkq.toml file, or a directory that holds one"),
        )
    }
}

fn parse_file(
    sources: &mut SourceMap,
    fs: &dyn SpecFs,
    path: &FsPath,
    budget: &mut node::Budget,
) -> Result<Node, Diagnostic> {
    let text = fs.read(path).and_then(|text| {
        if text.len() > limits::MAX_FILE_BYTES {
            return Err(fs::too_large(
                Some(text.len() as u64),
                limits::MAX_FILE_BYTES,
            ));
        }
        Ok(text)
    });
    let text = match text {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            // Nothing of it is kept: the diagnostic points at the file itself (line 1, column 1).
            let id = sources.add(path, "");
            return Err(Diagnostic::error(format!(
                "{} exceeds the file size limit: {e}",
                path.display()
            ))
            .at(Some(sources.span_from_bytes(id, 0, 0)))
            .help("a spec, overlay or script this large is machine-made or hostile: keep large data out of the spec"));
        }
        Err(e) => {
            return Err(Diagnostic::error(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let id = sources.add(path, text);
    // Read as TOML only when the YAML is not a spec: a large spec is read once.
    let looks_like_toml = || {
        sources.get(id).is_some_and(|file| {
            toml::from_str::<toml::Table>(&file.text).is_ok_and(|t| !t.is_empty())
        })
    };
    let toml_in_yaml = || {
        Diagnostic::error(format!(
            "{} looks like TOML, but its name says YAML",
            path.display()
        ))
        .help("rename it to .toml (gkq reads a file by its extension), or write it as YAML")
    };
    match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => node::parse_toml_within(sources, id, budget),
        // TOML often parses as YAML too (as one long string): a map is what a spec is.
        _ => match node::parse_yaml_within(sources, id, budget) {
            Ok(node) if !matches!(node.kind, NodeKind::Map(_)) && looks_like_toml() => {
                Err(toml_in_yaml())
            }
            Err(_) if looks_like_toml() => Err(toml_in_yaml()),
            other => other,
        },
    }
}

/// Why `--env NAME` cannot name an overlay: an environment is a plain name (`prod`,
/// `staging-eu`), never a path that could leave `environments/`.
fn overlay_name_problem(env: &str) -> Option<Diagnostic> {
    let plain = !env.is_empty()
        && !env.starts_with('.')
        && env
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (!plain).then(|| {
        Diagnostic::error(format!("`--env {env}` is not an environment name"))
            .help("name an overlay in environments/ by its file name without the extension, such as `--env prod`")
    })
}

/// Where `--env NAME` looks for `environments/NAME.*`: the spec's directory, then each parent
/// up to the root of the git repository the spec is in, nearest first, so that stacks in one
/// repository can share overlays. Outside a repository, the spec's directory only.
fn overlay_dirs(fs: &dyn SpecFs, spec_dir: &FsPath) -> Vec<PathBuf> {
    // Deep enough for any repository layout; a bound, so that a path of links cannot loop.
    const MAX_LEVELS: usize = 32;
    let mut dirs = vec![spec_dir.to_path_buf()];
    let mut current = spec_dir.to_path_buf();
    for _ in 0..MAX_LEVELS {
        if fs.is_repository_root(&current) {
            return dirs;
        }
        current = current.join("..");
        dirs.push(fs::normalize(&current));
    }
    dirs.truncate(1);
    dirs
}

/// Loads, merges, interpolates and decodes a spec.
pub fn load(fs: &dyn SpecFs, spec_arg: &FsPath, opts: &LoadOptions) -> Result<Loaded, LoadFailure> {
    let mut sources = SourceMap::default();
    let mut diags = Diagnostics::default();
    let fail = |sources: SourceMap, diags: Diagnostics| LoadFailure {
        sources,
        diagnostics: diags.sorted(),
    };

    // The spec and its overlay share one budget (see `limits`).
    let mut budget = node::Budget::default();
    let (spec_file, mut root) = match parse_spec_root(&mut sources, fs, spec_arg, &mut budget) {
        Ok(parsed) => parsed,
        Err(d) => {
            diags.push(d);
            return Err(fail(sources, diags));
        }
    };
    let dir = spec_file
        .parent()
        .map(FsPath::to_path_buf)
        .unwrap_or_default();

    // Merged after variables are substituted, so that an overlay's list item names the base's
    // item by the name it has (`on-demand-pool`), not by how the base spells it
    // (`${ONDEMAND_NODEPOOL}`).
    let overlay = match &opts.env {
        Some(env) => match parse_overlay(&mut sources, fs, env, &dir, &mut budget) {
            Ok(parsed) => Some(parsed),
            Err(d) => {
                diags.push(d);
                return Err(fail(sources, diags));
            }
        },
        None => None,
    };

    let no_env = |_: &str| None;
    let env_lookup: &dyn Fn(&str) -> Option<String> = match &opts.env_lookup {
        Some(f) => f.as_ref(),
        None => &no_env,
    };
    // Variables are declared in the spec and its overlay together.
    let values = {
        let merged;
        let declared = match &overlay {
            Some(o) => {
                merged = overlay::merge(root.clone(), o.clone());
                &merged
            }
            None => &root,
        };
        vars::resolve_values(
            declared,
            &vars::VarSources {
                cli: &opts.vars,
                env: env_lookup,
            },
            &mut diags,
        )
    };
    // From here on, no diagnostic shows a sensitive value (a wrong type or an invalid quantity
    // quotes what the variable put there).
    let sensitive = vars::sensitive_values(&values);
    diags.hide(&sensitive);
    let substituted = vars::values_of(&values);
    // Each part may grow by what is left of the text budget: bounded either way.
    let text_left = limits::MAX_TEXT_BYTES.saturating_sub(budget.text());
    vars::interpolate(&mut root, &substituted, text_left, &mut diags);
    if let Some(mut o) = overlay {
        vars::interpolate(&mut o, &substituted, text_left, &mut diags);
        root = overlay::merge(root, o);
    }

    let decoded = decode_all(&root, &sources, &mut diags, budget.values());
    let Some(Decoded { spec, undecoded }) = decoded else {
        return Err(fail(sources, diags));
    };
    diags.hide(&sensitive::secret_values(&spec.manifests));
    // Nothing may be generated from a spec that would generate too much.
    let too_much = generated::check_generated(&spec, &root);
    if !too_much.is_empty() {
        too_much.into_iter().for_each(|d| diags.push(d));
        return Err(fail(sources, diags));
    }

    let files = read_referenced_files(fs, &dir, &spec, &root, &mut diags);

    // Errors found so far (unknown keys, unreadable scripts) travel with the spec, so that
    // validation can still report every other problem in the same run.
    Ok(Loaded {
        spec,
        root,
        sources,
        spec_file,
        dir,
        env: opts.env.clone(),
        files,
        sensitive,
        variables: values,
        diagnostics: diags.sorted(),
        undecoded,
        origins: ladder::Origins::default(),
    })
}

/// The spec file `spec_arg` names (a file, or a directory holding one) and its root node: a map.
fn parse_spec_root(
    sources: &mut SourceMap,
    fs: &dyn SpecFs,
    spec_arg: &FsPath,
    budget: &mut node::Budget,
) -> Result<(PathBuf, Node), Diagnostic> {
    let spec_file = resolve_spec_path(fs, spec_arg)?;
    let root = parse_file(sources, fs, &spec_file, budget)?;
    if !matches!(root.kind, NodeKind::Map(_)) {
        return Err(Diagnostic::error(format!(
            "a spec is a map of settings, found {}",
            root.type_name()
        ))
        .at(Some(root.span)));
    }
    Ok((spec_file, root))
}

/// The overlay of environment `env` (`--env`), found next to the spec in `dir` or above it in
/// its repository ([`overlay_dirs`]), parsed; or what is wrong: a bad name, two files for one
/// environment, a link out of the repository, no such environment.
fn parse_overlay(
    sources: &mut SourceMap,
    fs: &dyn SpecFs,
    env: &str,
    dir: &FsPath,
    budget: &mut node::Budget,
) -> Result<Node, Diagnostic> {
    if let Some(d) = overlay_name_problem(env) {
        return Err(d);
    }
    let dir = dir.to_path_buf();
    let searched = overlay_dirs(fs, &dir);
    let candidates_in = |d: &PathBuf| -> Vec<PathBuf> {
        ["yaml", "yml", "toml"]
            .iter()
            .map(|ext| d.join("environments").join(format!("{env}.{ext}")))
            .collect()
    };
    // Nearest first: the first directory with an overlay of that name is the one used.
    let present: Vec<PathBuf> = searched
        .iter()
        .map(|d| {
            candidates_in(d)
                .into_iter()
                .filter(|p| fs.is_file(p))
                .collect::<Vec<_>>()
        })
        .find(|found| !found.is_empty())
        .unwrap_or_default();
    if present.len() > 1 {
        return Err(Diagnostic::error(format!(
            "environment `{env}` is defined twice: {}",
            present
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ))
        .help("keep one overlay file per environment: delete or rename the other"));
    }
    // An overlay linked from outside the directories searched (the repository, or the
    // spec's directory outside one) is refused, as scripts are.
    let boundary = searched.last().unwrap_or(&dir);
    if let Some(path) = present.first()
        && let (Some(real), Some(root)) = (fs.real_path(path), fs.real_path(boundary))
        && !real.starts_with(&root)
    {
        return Err(Diagnostic::error(format!(
            "environment overlay {} lies outside {}: it is a link to {}",
            path.display(),
            if searched.len() > 1 {
                "the spec's repository"
            } else {
                "the spec's directory"
            },
            real.display()
        ))
        .help("copy the overlay into the repository instead of linking to it, so that the spec's repository is complete"));
    }
    match present.first() {
        Some(path) => parse_file(sources, fs, path, budget),
        None => Err(overlay_not_found(
            fs,
            env,
            &searched,
            &candidates_in(&dir)[0],
        )),
    }
}

/// That environment `env` has no overlay in the directories `searched`: which environments
/// there are, or where to create this one (`create`).
fn overlay_not_found(
    fs: &dyn SpecFs,
    env: &str,
    searched: &[PathBuf],
    create: &FsPath,
) -> Diagnostic {
    let mut available: Vec<String> = searched
        .iter()
        .flat_map(|d| fs.list_dir(&d.join("environments")).unwrap_or_default())
        .filter_map(|p| {
            let ext = p.extension()?.to_str()?;
            matches!(ext, "yaml" | "yml" | "toml")
                .then(|| p.file_stem()?.to_str().map(str::to_string))
                .flatten()
        })
        .collect();
    available.sort();
    available.dedup();
    let help = if available.is_empty() {
        format!("create {}", create.display())
    } else {
        format!("available environments: {}", available.join(", "))
    };
    let places: Vec<String> = searched
        .iter()
        .map(|d| d.join("environments").display().to_string())
        .collect();
    Diagnostic::error(format!(
        "environment `{env}` not found: no {env}.yaml, .yml or .toml in {}",
        places.join(", ")
    ))
    .help(help)
}

/// A spec decoded, perhaps after removing values of the wrong type (their paths).
struct Decoded {
    spec: Spec,
    undecoded: Vec<String>,
}

/// Decodes the spec, reporting every unknown key and wrong value rather than the first: after
/// each error the offending entry is removed and decoding runs again.
///
/// `values` is the size of the document: each pass decodes all of it, so the passes are bounded
/// by [`limits::MAX_DECODE_WORK`] (a large spec with hundreds of bad keys would otherwise take
/// minutes); past it, one more error says that the listing stopped.
fn decode_all(
    root: &Node,
    sources: &SourceMap,
    diags: &mut Diagnostics,
    values: usize,
) -> Option<Decoded> {
    // A spec that decodes needs no copy to remove bad entries from (a copy doubles the memory
    // of a large spec).
    if let Ok(spec) = de::from_node::<Spec>(root, sources) {
        return Some(Decoded {
            spec,
            undecoded: Vec::new(),
        });
    }
    // Serde names one missing key per pass; these are all of them.
    let mut missing = Diagnostics::default();
    required::check(root, &mut missing);
    let messages: Vec<String> = missing.iter().map(|d| d.message.clone()).collect();
    diags.extend(missing);
    let doc = root.clone();
    let passes = (limits::MAX_DECODE_WORK / values.max(1)).clamp(2, 200);
    decode_passes(doc, sources, diags, passes, values, &messages)
}

/// [`decode_all`] after its first pass failed: at most `passes` more, on a copy of the document
/// that loses one bad entry each time. An unknown key is removed; a value of the wrong type is
/// replaced by stand-ins of other types (or, for an unknown enum value, by a known one) until one
/// decodes, so a bad required value or list item does not stop the rest from being checked.
fn decode_passes(
    mut doc: Node,
    sources: &SourceMap,
    diags: &mut Diagnostics,
    passes: usize,
    values: usize,
    reported: &[String],
) -> Option<Decoded> {
    let mut problems = 0usize;
    let mut stand_ins_tried: BTreeMap<Path, usize> = BTreeMap::new();
    for _ in 0..passes {
        let e = match de::from_node::<Spec>(&doc, sources) {
            Ok(spec) => {
                return Some(Decoded {
                    spec,
                    undecoded: stand_ins_tried.keys().map(ToString::to_string).collect(),
                });
            }
            Err(e) => e,
        };
        let path = e.path.clone().unwrap_or_default();
        let tried = stand_ins_tried.get(&path).copied();
        if tried.is_none() {
            let diagnostic = decode_diagnostic(&e);
            if !reported.contains(&diagnostic.message) {
                diags.push(diagnostic);
            }
            problems += 1;
        }
        if path.0.is_empty() {
            return None;
        }
        match &e.kind {
            de::ErrorKind::MissingKey(_) => return None,
            de::ErrorKind::UnknownKey { .. } => {
                if !doc.remove(&path) {
                    return None;
                }
            }
            kind => {
                let n = tried.unwrap_or(0);
                let replacement = match kind {
                    de::ErrorKind::UnknownValue { expected, .. } => {
                        expected.get(n).map(|known| NodeKind::Str {
                            value: known.clone(),
                            interpolated: false,
                        })
                    }
                    _ => stand_in(n),
                };
                doc.at_mut(&path)?.kind = replacement?;
                stand_ins_tried.insert(path, n + 1);
            }
        }
    }
    diags.push(
        Diagnostic::error(format!(
            "gkq stopped looking for more problems after {problems}: each one means decoding the spec's {} again",
            limits::values(values)
        ))
        .at(Some(doc.span))
        .help("fix the problems listed and run again to see the rest"),
    );
    None
}

/// The `n`th value tried in place of one of the wrong type: one of each type, so that one of
/// them decodes as whatever the key expects.
fn stand_in(n: usize) -> Option<NodeKind> {
    Some(match n {
        0 => NodeKind::Int(0),
        1 => NodeKind::Str {
            value: String::new(),
            interpolated: false,
        },
        2 => NodeKind::Bool(false),
        3 => NodeKind::Seq(Vec::new()),
        4 => NodeKind::Map(Vec::new()),
        5 => NodeKind::Null,
        _ => return None,
    })
}

fn decode_diagnostic(e: &de::Error) -> Diagnostic {
    let path = e.path.as_ref().map(ToString::to_string).unwrap_or_default();
    let where_ = match e.path.as_ref().map(|p| {
        let mut parent = p.clone();
        parent.0.pop();
        parent
    }) {
        Some(parent) if !parent.0.is_empty() => format!(" in `{parent}`"),
        _ => String::new(),
    };
    let d = match &e.kind {
        // YAML 1.1's merge key is not part of YAML 1.2, which gkq reads: say so, not "unknown".
        de::ErrorKind::UnknownKey { key, .. } if key == "<<" => Diagnostic::error(format!(
            "the YAML merge key `<<`{where_} is not supported"
        ))
        .help("write the keys out in this map (anchors and aliases of whole values work: `key: *anchor`), or use an environment overlay for variations"),
        de::ErrorKind::UnknownKey { key, expected } => {
            let help = match suggest(key, expected.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("known keys here: {}", expected.join(", ")),
            };
            Diagnostic::error(format!("unknown key `{key}`{where_}")).help(help)
        }
        de::ErrorKind::UnknownValue { value, expected } => {
            let help = match suggest(value, expected.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("use one of: {}", expected.join(", ")),
            };
            Diagnostic::error(format!("unknown value `{value}` for `{path}`")).help(help)
        }
        de::ErrorKind::MissingKey(key) => {
            required::missing_key(key, e.path.as_ref().unwrap_or(&Path::root()))
        }
        de::ErrorKind::WrongValue | de::ErrorKind::Other => {
            Diagnostic::error(format!("`{path}`: {}", e.message))
        }
    };
    let d = d.at(e.span);
    if path.is_empty() {
        d
    } else {
        d.with_path(path)
    }
}

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(&lower, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1) || c.to_lowercase() == lower)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn read_referenced_files(
    fs: &dyn SpecFs,
    dir: &FsPath,
    spec: &Spec,
    root: &Node,
    diags: &mut Diagnostics,
) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for (i, job) in spec.jobs.iter().enumerate() {
        let path = Path::root().key("jobs").index(i).key("script");
        let span = Some(root.span_at(&path));
        let rel = FsPath::new(&job.script);
        let escapes = rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
        if escapes {
            diags.push(
                Diagnostic::error(format!(
                    "script `{}` of job `{}` lies outside the spec's directory",
                    job.script, job.name
                ))
                .at(span)
                .with_path(path.to_string())
                .help("scripts must live next to the spec (or below it) so that the spec's repository is complete"),
            );
            continue;
        }
        let full = dir.join(rel);
        // A symlink inside the directory may still point outside it.
        if let (Some(real), Some(root)) = (fs.real_path(&full), fs.real_path(dir))
            && !real.starts_with(&root)
        {
            diags.push(
                Diagnostic::error(format!(
                    "script `{}` of job `{}` lies outside the spec's directory: it is a link to {}",
                    job.script,
                    job.name,
                    real.display()
                ))
                .at(span)
                .with_path(path.to_string())
                .help("copy the script next to the spec instead of linking to it, so that the spec's repository is complete"),
            );
            continue;
        }
        match fs.read(&full) {
            Ok(text) => {
                files.insert(job.script.clone(), text);
            }
            Err(e) => diags.push(
                Diagnostic::error(format!(
                    "script `{}` of job `{}` cannot be read: {e}",
                    job.script, job.name
                ))
                .at(span)
                .with_path(path.to_string())
                .help(format!(
                    "create {} or fix the path (relative to the spec's directory)",
                    full.display()
                )),
            ),
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decoding passes are bounded: past the bound the listing stops and says so.
    #[test]
    fn decoding_stops_listing_problems_when_its_passes_run_out() {
        let mut sources = SourceMap::default();
        let text = "project: p\nlocation: l\ncluster: {name: c}\na1: 1\na2: 2\na3: 3\na4: 4\n";
        let id = sources.add("gkq.yaml", text);
        let root = node::parse_yaml(&sources, id).unwrap();
        let mut diags = Diagnostics::default();
        assert!(decode_passes(root.clone(), &sources, &mut diags, 3, 11, &[]).is_none());
        let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages.len(), 4, "{messages:#?}");
        assert!(messages[..3].iter().all(|m| m.starts_with("unknown key")));
        assert_eq!(
            messages[3],
            "gkq stopped looking for more problems after 3: each one means decoding the spec's 11 values again"
        );
        // With passes enough, every problem is listed and nothing says it stopped.
        let mut diags = Diagnostics::default();
        assert!(decode_passes(root, &sources, &mut diags, 200, 11, &[]).is_some());
        assert_eq!(diags.len(), 4);
    }
}
