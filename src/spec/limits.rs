//! What loading a spec may cost, in one place.
//!
//! A spec is text from a repository that anyone with commit access can change, and `gkq watch`
//! or a CI job loads it unattended: a few hundred bytes must not be able to make gkq allocate
//! gigabytes (a YAML alias bomb: nine levels of ten aliases each is a billion values) or run for
//! minutes (`count: 5000000` on a job). Loading therefore counts what it builds and stops with a
//! diagnostic naming the limit, its value and the place that crossed it.
//!
//! The values are sized so that `gkq validate` of any input stays under 256 MB of memory and
//! 2 s of time, while the largest spec we benchmark (5,000 raw manifests, `bench/gen-objects
//! 5000`: a 3.7 MiB file of ~239,000 values, validated in 0.8 s at 107 MB peak) loads with room to
//! spare. Measured near the limits (release build, `/usr/bin/time`): 499,000 values in one
//! list, 117 MB and 0.7 s; 249,000 keys in one map, 152 MB and 1.5 s; that map plus 13 MiB of
//! text repeated through aliases, 188 MB and 1.9 s.

/// Largest file gkq reads as part of a spec: the spec itself, an environment overlay, a training
/// script, a saved plan.
///
/// 8 MiB is twice the 5,000-manifest benchmark spec, and eight times what Kubernetes lets a
/// ConfigMap (where scripts end up) hold.
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;

/// Largest saved plan (`gkq plan --out`) `gkq apply` reads.
///
/// A plan holds every object it creates or changes with its diff: ~1.5 KB per object, 7.3 MB
/// for the 5,000 objects of `bench/local-apply 5000`. 32 MiB is four times that plan.
pub const MAX_PLAN_BYTES: usize = 32 * 1024 * 1024;

/// Deepest nesting of maps and lists, counted from the top of a file (the spec itself is 1).
///
/// Kubernetes objects, CRDs with their OpenAPI schemas included, stay under 40 levels; gkq's own
/// settings under 8. 64 leaves room for any of them and keeps the recursive steps that follow
/// (overlays, variables, decoding, JSON) far from the stack's end.
pub const MAX_DEPTH: usize = 64;

/// Most values (maps, lists, scalars and keys) a spec and its overlay may build, counting the
/// copies that anchors and aliases make.
///
/// The 5,000-manifest benchmark spec has ~239,000; 500,000 is twice that. A value costs 200 to
/// 300 bytes by the time a spec is validated (the document, the decoded spec, the rendered
/// objects), so this stays near 150 MB.
pub const MAX_VALUES: usize = 500_000;

/// Most values that aliases (`*name`) may repeat in a spec and its overlay, in total.
///
/// Aliases share a few settings (a toleration, a quota map) between entries, a few hundred
/// values in practice. 100,000 is far above that, and far below the billion values of a
/// "billion laughs" bomb, which is refused here after a few milliseconds.
pub const MAX_ALIAS_VALUES: usize = 100_000;

/// Most text (scalars and keys, in bytes) a spec and its overlay may hold once aliases are
/// expanded and variables substituted.
///
/// Twice [`MAX_FILE_BYTES`]: a spec may repeat some of its text through aliases and variables,
/// but a long scalar repeated a thousand times is refused. Text is held three times while a
/// spec is validated (the document, the decoded spec, the rendered objects), so this keeps it
/// under 50 MB.
pub const MAX_TEXT_BYTES: usize = 2 * MAX_FILE_BYTES;

/// Most Kubernetes objects one spec may generate: flavors, queues, checks, one ConfigMap per
/// script, one RayJob per run (`count`) and the raw manifests.
///
/// Twice the 5,000-manifest benchmark. Each object costs 10 to 20 KB while it is planned, so
/// this keeps `validate` and `plan` inside the memory budget whatever multiplies them.
pub const MAX_OBJECTS: usize = 10_000;

/// Most runs (`count`) a single job may submit.
///
/// Each run is a RayJob, its Kueue Workload and a share of the cluster: 1,000 runs of one job is
/// already more than a TPU cluster admits at once, and at ~16 KB per rendered run it stays a few
/// MB of work.
pub const MAX_JOB_RUNS: u32 = 1_000;

/// Most nodes per zone a node pool may ask for (`nodes`, `initialNodes`, `autoscaling.max`).
///
/// GKE's own limit: a node pool has at most 1,000 nodes per zone
/// (<https://cloud.google.com/kubernetes-engine/quotas>). The local target creates a Node object
/// for each, so a larger number would also make it build millions of objects.
pub const MAX_POOL_NODES: u32 = 1_000;

/// Most values decoding may visit, over all its passes. To report every wrong key and value in
/// one run, decoding removes the entry at fault and starts again; each pass visits the whole
/// document.
///
/// 1,000,000 values is under a second: 200 passes (the most) over a spec of 5,000 values, 4
/// over the 5,000-manifest benchmark spec, which used to take 36 s with 190 unknown keys.
pub const MAX_DECODE_WORK: usize = 1_000_000;

/// Most problems reported for one spec. Past this, more problems are counted, not listed: a
/// machine-made file with a million bad values must not print a million source snippets.
pub const MAX_DIAGNOSTICS: usize = 500;

/// A byte count for people: `8 MiB`, `512 KiB`, `300 bytes`.
pub fn bytes(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else if n >= KIB {
        format!("{:.1} KiB", n as f64 / KIB as f64)
    } else {
        format!("{n} bytes")
    }
}

/// A number of values for people: `1 value`, `11,111 values`.
pub fn values(n: usize) -> String {
    if n == 1 {
        "1 value".to_string()
    } else {
        format!("{} values", count(n as u64))
    }
}

/// A count for people, with thousands separated: `500,000`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_numbers() {
        assert_eq!(bytes(MAX_FILE_BYTES), "8 MiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(300), "300 bytes");
        assert_eq!(count(500_000), "500,000");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(999), "999");
        assert_eq!(count(5_000_000), "5,000,000");
        assert_eq!(values(1), "1 value");
        assert_eq!(values(11_111), "11,111 values");
    }
}
