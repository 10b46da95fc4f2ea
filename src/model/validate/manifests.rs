//! Raw `manifests`: accelerator limits, and collisions with the objects gkq generates.

use super::*;

/// Raw manifests: must be full objects, and accelerator requests must come with equal limits.
pub(super) fn check_manifests(c: &mut Checker, spec: &Spec) {
    for (i, m) in spec.manifests.iter().enumerate() {
        let p = Path::root().key("manifests").index(i);
        for key in ["apiVersion", "kind"] {
            if m.get(key).and_then(|v| v.as_str()).is_none() {
                c.error(
                    &p,
                    format!("manifest {i} has no `{key}`"),
                    "raw manifests are full Kubernetes objects",
                );
            }
        }
        if m.pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .is_none()
        {
            c.error(
                &p,
                format!("manifest {i} has no metadata.name"),
                "give the object a name",
            );
        }
        let mut problems = Vec::new();
        find_accelerator_without_limit(m, "", &mut problems);
        for where_ in problems {
            c.error(
                &p,
                format!("manifest {i}: {where_} requests {DEFAULT_ACCELERATOR_RESOURCE} without an equal limit"),
                "set limits equal to requests: without a limit Kueue cannot build the ProvisioningRequest and the DWS check waits forever",
            );
        }
    }
}

pub(super) fn find_accelerator_without_limit(
    v: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(res) = map.get("resources") {
                let req = res.pointer(&format!(
                    "/requests/{}",
                    DEFAULT_ACCELERATOR_RESOURCE.replace('/', "~1")
                ));
                let lim = res.pointer(&format!(
                    "/limits/{}",
                    DEFAULT_ACCELERATOR_RESOURCE.replace('/', "~1")
                ));
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
                        .get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or("a container");
                    out.push(format!("container `{name}` at {at}"));
                }
            }
            for (k, child) in map {
                find_accelerator_without_limit(child, &format!("{at}/{k}"), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                find_accelerator_without_limit(child, &format!("{at}/{i}"), out);
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
