//! Raw `manifests`: accelerator limits, and collisions with the objects gkq generates.

use super::*;
use crate::vocab::object::{At, Field};

/// Raw manifests: must be full objects, and accelerator requests must come with equal limits.
pub(super) fn check_manifests(c: &mut Checker, spec: &Spec) {
    for (i, m) in spec.manifests.iter().enumerate() {
        let p = Path::root().key("manifests").index(i);
        for key in ["apiVersion", "kind"] {
            if m.field(key).and_then(|v| v.as_str()).is_none() {
                c.error(
                    &p,
                    format!("manifest {i} has no `{key}`"),
                    "raw manifests are full Kubernetes objects",
                );
            }
        }
        if m.at("/metadata/name").and_then(|v| v.as_str()).is_none() {
            c.error(
                &p,
                format!("manifest {i} has no metadata.name"),
                "give the object a name",
            );
        }
        let mut problems = Vec::new();
        find_accelerator_without_limit(m, &mut String::new(), &mut problems);
        for where_ in problems {
            c.error(
                &p,
                format!("manifest {i}: {where_} requests {DEFAULT_ACCELERATOR_RESOURCE} without an equal limit"),
                "set limits equal to requests: without a limit Kueue cannot build the ProvisioningRequest and the DWS check waits forever",
            );
        }
    }
}

/// Each container under `v` (a `resources` map's owner) that requests the accelerator without an
/// equal limit, by where it is: `at` is the path of `v`, and is left as it came (it grows and
/// shrinks with the walk, so a manifest's thousands of fields cost no path text each).
fn find_accelerator_without_limit(v: &serde_json::Value, at: &mut String, out: &mut Vec<String>) {
    let at_length = at.len();
    match v {
        serde_json::Value::Object(map) => {
            if let Some(res) = map.field("resources") {
                let amount = |side: &str| res.field(side)?.field(DEFAULT_ACCELERATOR_RESOURCE);
                let (req, lim) = (amount("requests"), amount("limits"));
                let as_text = |v: Option<&serde_json::Value>| {
                    v.and_then(|v| match v {
                        serde_json::Value::String(s) => Quantity::parse(s).ok(),
                        serde_json::Value::Number(n) => n
                            .as_i64()
                            .map(|i| Quantity::from_units(i128::from(i), Format::DecimalSI)),
                        _ => None,
                    })
                };
                if req.is_some() && as_text(req) != as_text(lim) {
                    let name = map
                        .field("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or("a container");
                    out.push(format!("container `{name}` at {at}"));
                }
            }
            for (k, child) in map {
                at.push('/');
                at.push_str(k);
                find_accelerator_without_limit(child, at, out);
                at.truncate(at_length);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                use std::fmt::Write as _;
                let _ = write!(at, "/{i}");
                find_accelerator_without_limit(child, at, out);
                at.truncate(at_length);
            }
        }
        _ => {}
    }
}

/// Checks that need the rendered objects and Kueue's rules: a job that no flavor of its queue
/// could ever admit (an error: it would wait forever), and flavor quotas that do not match the
/// node pools behind them (warnings naming the numbers).
/// A manifest with the address of an object gkq renders from the spec (or of another manifest)
/// would be applied twice with different contents: refused here, at the manifest, instead of at
/// plan time without a location.
pub(super) fn check_manifest_collisions(c: &mut Checker, desired: &crate::model::DesiredState) {
    use crate::addr::ResourceAddr;
    let mut counts: BTreeMap<ResourceAddr, usize> = BTreeMap::new();
    for object in &desired.kubernetes {
        if let Ok(addr) = ResourceAddr::from_object(object) {
            *counts.entry(addr).or_default() += 1;
        }
    }
    let mut seen: BTreeMap<ResourceAddr, usize> = BTreeMap::new();
    for (i, manifest) in c.rendered_manifests.iter().enumerate() {
        let Ok(addr) = ResourceAddr::from_object(manifest) else {
            continue;
        };
        let path = Path::root().key("manifests").index(i);
        if let Some(first) = seen.insert(addr.clone(), i) {
            c.error(
                &path,
                format!("manifest {i} is {addr}, like manifest {first}"),
                "keep one manifest per object",
            );
        } else if counts.get(&addr).copied().unwrap_or(0) > 1 {
            c.error(
                &path,
                format!("manifest {i} is {addr}, which gkq already makes from the spec"),
                "rename the manifest's object, or drop it and set what you need in the spec (flavors, queues, jobs and their ConfigMaps are generated)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_container_without_its_accelerator_limit_is_named_by_its_path() {
        let tpu = DEFAULT_ACCELERATOR_RESOURCE;
        let manifest = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "fine", "resources": {"requests": {tpu: 4}, "limits": {tpu: "4"}}},
            {"name": "short", "resources": {"requests": {tpu: 4}, "limits": {tpu: 2}}},
            {"name": "none", "resources": {"requests": {tpu: "8"}}},
        ]}}}});
        let mut found = Vec::new();
        let mut at = String::new();
        find_accelerator_without_limit(&manifest, &mut at, &mut found);
        assert_eq!(
            found,
            [
                "container `short` at /spec/template/spec/containers/1",
                "container `none` at /spec/template/spec/containers/2",
            ]
        );
        assert!(at.is_empty(), "the walk leaves the path as it came");
    }
}
