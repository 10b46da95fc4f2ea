//! `gkq render`: the desired state, as GKE request bodies and Kubernetes objects.

use serde_json::json;

use super::output::{print_diagnostics, print_stdout, to_yaml};
use super::{Exit, RenderArgs, RenderFormat, load_valid};

pub fn run(args: &RenderArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    print_diagnostics(&diags, &sources);
    let Some((_, desired)) = ok else {
        return Ok(Exit::Failed);
    };
    let gke = json!({
        "project": desired.gke.cluster_ref.project,
        "location": desired.gke.cluster_ref.location,
        "cluster": desired.gke.cluster,
        "nodePools": desired.gke.node_pools,
    });
    match args.output {
        RenderFormat::Json => {
            let out = json!({
                "gke": gke,
                "kueue": desired.kueue,
                "kubernetes": desired.kubernetes,
            });
            print_stdout(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
        }
        RenderFormat::Yaml => {
            let mut text = to_yaml(&json!({"gke": gke, "kueue": desired.kueue}))?;
            for obj in &desired.kubernetes {
                text.push_str("---\n");
                text.push_str(&to_yaml(obj)?);
            }
            print_stdout(&text)?;
        }
    }
    Ok(Exit::Ok)
}
