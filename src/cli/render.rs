//! `gkq render`: the desired state, as GKE request bodies and Kubernetes objects, with sensitive
//! values shown as markers.

use serde_json::json;

use super::output::{print_diagnostics, print_stdout, to_yaml};
use super::{Exit, RenderArgs, RenderFormat, load_valid};

pub fn run(args: &RenderArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    print_diagnostics(&diags, &sources);
    let Some((_, desired)) = ok else {
        return Ok(Exit::Failed);
    };
    // What is printed never holds a sensitive value (Secret data, variables declared sensitive).
    let redactor = crate::diff::sensitive::Redactor::new(desired.sensitive.values().to_vec());
    let kubernetes: Vec<serde_json::Value> = desired
        .kubernetes
        .iter()
        .map(|o| redactor.object(o))
        .collect();
    let mut cluster = desired.gke.cluster.clone();
    let mut node_pools = serde_json::Value::from(desired.gke.node_pools.clone());
    redactor.strings_in(&mut cluster);
    redactor.strings_in(&mut node_pools);
    let gke = json!({
        "project": desired.gke.cluster_ref.project,
        "location": desired.gke.cluster_ref.location,
        "cluster": cluster,
        "nodePools": node_pools,
    });
    match args.output {
        RenderFormat::Json => {
            let out = json!({
                "gke": gke,
                "kueue": desired.kueue,
                "kubernetes": kubernetes,
            });
            print_stdout(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
        }
        RenderFormat::Yaml => {
            let mut text = to_yaml(&json!({"gke": gke, "kueue": desired.kueue}))?;
            for obj in &kubernetes {
                text.push_str("---\n");
                text.push_str(&to_yaml(obj)?);
            }
            print_stdout(&text)?;
        }
    }
    Ok(Exit::Ok)
}
