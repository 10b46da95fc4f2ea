//! Kueue's installation as a planned component: the release manifests for the spec's version,
//! with feature gates passed once, and ownership labels, as ordinary objects to apply; and the
//! `kueue.install/kueue` pseudo-object that stands for the installation in plans. Reading the
//! manifests and the live installation is `kube::install`'s.

use serde_json::{Value, json};

use super::{KueueInstall, MANAGED_BY_LABEL, MANAGED_BY_VALUE, STACK_LABEL};

pub const MANAGER_DEPLOYMENT: &str = "kueue-controller-manager";
pub const MANAGER_CONTAINER: &str = "manager";
pub const CONFIG_MAP: &str = "kueue-manager-config";
pub const CONFIG_KEY: &str = "controller_manager_config.yaml";
/// The integration name Kueue's `integrations.frameworks` lists for JobSets.
pub const JOBSET_FRAMEWORK: &str = "jobset.x-k8s.io/jobset";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InstallError {
    #[error("Kueue manifests: {0}")]
    Parse(String),
    #[error(
        "Kueue manifests have no Deployment {MANAGER_DEPLOYMENT} with a `{MANAGER_CONTAINER}` container"
    )]
    NoManager,
}

/// Parses a release `manifests.yaml` into objects, sets the feature gates on the manager (as a
/// `--feature-gates` argument, or in the configuration file when the release already sets gates
/// there: Kueue refuses both), and labels everything as gkq's.
pub fn prepare(
    manifests: &str,
    install: &KueueInstall,
    stack: &str,
) -> Result<Vec<Value>, InstallError> {
    let mut objects: Vec<Value> = serde_saphyr::from_multiple::<Value>(manifests)
        .map_err(|e| InstallError::Parse(e.to_string()))?
        .into_iter()
        .filter(|o| o.is_object() && o.get("kind").is_some())
        .collect();
    if !install.feature_gates.is_empty() {
        let gates_in_config = objects.iter().any(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"] == CONFIG_MAP
                && o.pointer(&format!("/data/{CONFIG_KEY}"))
                    .and_then(Value::as_str)
                    .is_some_and(|c| {
                        c.lines()
                            .any(|l| l.trim_start().starts_with("featureGates:"))
                    })
        });
        if gates_in_config {
            set_gates_in_config(&mut objects, install)?;
        } else {
            set_gates_in_args(&mut objects, install)?;
        }
    }
    if install.manages_jobsets {
        list_framework(&mut objects, JOBSET_FRAMEWORK)?;
    }
    mark_config_digest(&mut objects);
    for o in &mut objects {
        let meta = o
            .as_object_mut()
            .map(|m| m.entry("metadata").or_insert_with(|| json!({})));
        if let Some(meta) = meta.and_then(Value::as_object_mut) {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if let Some(labels) = labels.as_object_mut() {
                labels.insert(MANAGED_BY_LABEL.into(), json!(MANAGED_BY_VALUE));
                labels.insert(STACK_LABEL.into(), json!(stack));
                labels.insert(INSTALLATION_LABEL.into(), json!("kueue"));
            }
        }
    }
    Ok(objects)
}

fn gates_arg(install: &KueueInstall) -> String {
    let list: Vec<String> = install
        .feature_gates
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("--feature-gates={}", list.join(","))
}

fn set_gates_in_args(objects: &mut [Value], install: &KueueInstall) -> Result<(), InstallError> {
    let deployment = objects
        .iter_mut()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == MANAGER_DEPLOYMENT)
        .ok_or(InstallError::NoManager)?;
    let containers = deployment
        .pointer_mut("/spec/template/spec/containers")
        .and_then(Value::as_array_mut)
        .ok_or(InstallError::NoManager)?;
    let manager = containers
        .iter_mut()
        .find(|c| c["name"] == MANAGER_CONTAINER)
        .ok_or(InstallError::NoManager)?;
    let args = manager
        .as_object_mut()
        .ok_or(InstallError::NoManager)?
        .entry("args")
        .or_insert_with(|| json!([]));
    if let Some(list) = args.as_array_mut() {
        list.retain(|a| !a.as_str().is_some_and(|s| s.starts_with("--feature-gates")));
        list.push(json!(gates_arg(install)));
    }
    Ok(())
}

fn set_gates_in_config(objects: &mut [Value], install: &KueueInstall) -> Result<(), InstallError> {
    for o in objects.iter_mut() {
        if o["kind"] == "ConfigMap" && o["metadata"]["name"] == CONFIG_MAP {
            let text = o
                .pointer(&format!("/data/{CONFIG_KEY}"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut config: Value =
                serde_saphyr::from_str(text).map_err(|e| InstallError::Parse(e.to_string()))?;
            let gates = config
                .as_object_mut()
                .ok_or_else(|| InstallError::Parse("manager configuration is not a map".into()))?
                .entry("featureGates")
                .or_insert_with(|| json!({}));
            for (k, v) in &install.feature_gates {
                gates[k] = json!(v);
            }
            let text =
                serde_saphyr::to_string(&config).map_err(|e| InstallError::Parse(e.to_string()))?;
            o["data"][CONFIG_KEY] = json!(text);
        }
    }
    Ok(())
}

/// Adds `framework` to `integrations.frameworks` of the manager's configuration when it is not
/// listed (Kueue manages only the job kinds listed there). A configuration that lists it already
/// is left as the release wrote it, comments included.
fn list_framework(objects: &mut [Value], framework: &str) -> Result<(), InstallError> {
    for o in objects.iter_mut() {
        if o["kind"] != "ConfigMap" || o["metadata"]["name"] != CONFIG_MAP {
            continue;
        }
        let text = o
            .pointer(&format!("/data/{CONFIG_KEY}"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut config: Value =
            serde_saphyr::from_str(text).map_err(|e| InstallError::Parse(e.to_string()))?;
        let frameworks = &mut config["integrations"]["frameworks"];
        if frameworks
            .as_array()
            .is_some_and(|list| list.iter().any(|f| f == framework))
        {
            continue;
        }
        match frameworks.as_array_mut() {
            Some(list) => list.push(json!(framework)),
            None => *frameworks = json!([framework]),
        }
        let text =
            serde_saphyr::to_string(&config).map_err(|e| InstallError::Parse(e.to_string()))?;
        o["data"][CONFIG_KEY] = json!(text);
    }
    Ok(())
}

/// Annotation on the manager's pod template: a digest of its configuration, so that a changed
/// configuration changes the template and the Deployment restarts the manager (Kueue reads its
/// configuration file only when it starts: docs/kueue.md, "Kueue's configuration").
pub const CONFIG_DIGEST_ANNOTATION: &str = "gkq.dev/kueue-config-digest";

/// Sets [`CONFIG_DIGEST_ANNOTATION`] on the manager's pod template from the configuration the
/// objects hold (nothing when they have no manager or no configuration).
fn mark_config_digest(objects: &mut [Value]) {
    use sha2::{Digest, Sha256};
    let Some(config) = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == CONFIG_MAP)
        .and_then(|o| o.pointer(&format!("/data/{CONFIG_KEY}")))
        .and_then(Value::as_str)
    else {
        return;
    };
    let digest: String = Sha256::digest(config.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let manager = objects
        .iter_mut()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == MANAGER_DEPLOYMENT);
    if let Some(template) = manager.and_then(|d| d.pointer_mut("/spec/template")) {
        template["metadata"]["annotations"][CONFIG_DIGEST_ANNOTATION] = json!(digest);
    }
}

/// The job frameworks a manager configuration ConfigMap lists in `integrations.frameworks`
/// (none when it cannot be read).
pub fn listed_frameworks(config_map: &Value) -> Vec<String> {
    let Some(text) = config_map
        .pointer(&format!("/data/{CONFIG_KEY}"))
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    let config: Value = serde_saphyr::from_str(text).unwrap_or_default();
    config["integrations"]["frameworks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The Kueue version an installed manager runs, from its Deployment's image tag.
pub fn installed_version(deployment: &Value) -> Option<String> {
    let containers = deployment
        .pointer("/spec/template/spec/containers")?
        .as_array()?;
    let image = containers
        .iter()
        .find(|c| c["name"] == MANAGER_CONTAINER)?
        .get("image")?
        .as_str()?;
    image_tag(image).map(str::to_string)
}

/// The tag of an image reference: `registry.k8s.io/kueue/kueue:v0.19.2@sha256:...` has
/// `v0.19.2`; `localhost:5000/kueue` has none (a colon before the last `/` is a registry's port).
pub fn image_tag(image: &str) -> Option<&str> {
    let name = image.split_once('@').map_or(image, |(name, _digest)| name);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.rsplit_once(':').map(|(_, tag)| tag)
}

/// The pseudo-object that stands for Kueue's installation in plans (`kueue.install/kueue`).
pub const INSTALLATION_API: &str = "gkq.dev/v1alpha1";
pub const INSTALLATION_KIND: &str = "KueueInstallation";
/// Label on every object of Kueue's installation: they belong to the `kueue.install/kueue`
/// pseudo-object, so the observer does not report them as gkq objects the spec dropped (a
/// `--prune` would otherwise delete Kueue's own ConfigMap).
pub const INSTALLATION_LABEL: &str = "gkq.dev/installation";
pub const KUEUE_NAMESPACE: &str = "kueue-system";
/// Annotation on the manager Deployment recording where gkq installed it from.
pub const SOURCE_ANNOTATION: &str = "gkq.dev/kueue-manifests";

/// The installation as the spec wants it: its release, its gates and, when JobSet is installed,
/// the JobSet framework listed in its configuration (`spec.frameworks`, compared with what the
/// live configuration lists: an installation made while JobSet was `none` from manifests that
/// leave JobSets out is installed again).
pub fn installation_object(install: &KueueInstall, stack: &str) -> Value {
    let mut object = json!({
        "apiVersion": INSTALLATION_API,
        "kind": INSTALLATION_KIND,
        "metadata": {
            "name": "kueue",
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, STACK_LABEL: stack},
        },
        "spec": {
            "version": install.version,
            "featureGates": install.feature_gates,
        },
    });
    if install.manages_jobsets {
        object["spec"]["frameworks"] = json!({JOBSET_FRAMEWORK: true});
    }
    object
}

/// Feature gates from a `--feature-gates=A=true,B=false` argument list.
pub fn gates_from_args(args: &[Value]) -> serde_json::Map<String, Value> {
    let mut gates = serde_json::Map::new();
    for a in args.iter().filter_map(Value::as_str) {
        if let Some(list) = a.strip_prefix("--feature-gates=") {
            for pair in list.split(',') {
                if let Some((k, v)) = pair.split_once('=') {
                    gates.insert(k.trim().to_string(), json!(v.trim() == "true"));
                }
            }
        }
    }
    gates
}

/// The pseudo-object for an installed manager, from its Deployment (labels, image tag, gates)
/// and its configuration ConfigMap, when there is one (the frameworks it lists).
pub fn installation_from_deployment(deployment: &Value, config_map: Option<&Value>) -> Value {
    let args = deployment
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["name"] == MANAGER_CONTAINER))
        .and_then(|c| c.get("args"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    json!({
        "apiVersion": INSTALLATION_API,
        "kind": INSTALLATION_KIND,
        "metadata": {
            "name": "kueue",
            "labels": deployment.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        },
        "spec": {
            "version": installed_version(deployment),
            "featureGates": gates_from_args(&args),
            "frameworks": config_map
                .map(listed_frameworks)
                .unwrap_or_default()
                .into_iter()
                .map(|framework| (framework, json!(true)))
                .collect::<serde_json::Map<String, Value>>(),
        },
    })
}

/// `kueue.manifests: builtin`: the release manifests embedded in gkq (no network needed).
pub const BUILTIN: &str = "builtin";

/// Kueue's release `manifests.yaml` for the versions gkq embeds (v0.19.2; `assets/kueue/`).
pub fn builtin_manifests(version: &str) -> Option<&'static str> {
    match version {
        "v0.19.2" => Some(include_str!("../../assets/kueue/manifests-v0.19.2.yaml")),
        _ => None,
    }
}

/// The versions [`builtin_manifests`] has.
pub const BUILTIN_VERSIONS: &[&str] = &["v0.19.2"];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn install(gates: &[(&str, bool)]) -> KueueInstall {
        KueueInstall {
            version: "v0.19.2".into(),
            mode: crate::spec::types::InstallMode::Managed,
            manifests: String::new(),
            manages_jobsets: false,
            feature_gates: gates
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn release() -> String {
        builtin_manifests("v0.19.2")
            .expect("v0.19.2 is embedded")
            .to_string()
    }

    #[test]
    fn gates_go_to_manager_args_once_and_everything_is_labelled() {
        let objs = prepare(
            &release(),
            &install(&[("ElasticJobsViaWorkloadSlices", true)]),
            "tpu-cluster",
        )
        .unwrap();
        let dep = objs
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == MANAGER_DEPLOYMENT)
            .unwrap();
        let args: Vec<&str> = dep
            .pointer("/spec/template/spec/containers/0/args")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            args.iter()
                .filter(|a| a.starts_with("--feature-gates"))
                .count(),
            1
        );
        assert!(args.contains(&"--feature-gates=ElasticJobsViaWorkloadSlices=true"));
        assert!(
            objs.iter()
                .all(|o| o["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY_VALUE)
        );
        assert!(objs.iter().any(|o| o["kind"] == "CustomResourceDefinition"));
        assert_eq!(installed_version(dep).as_deref(), Some("v0.19.2"));
    }

    #[test]
    fn the_release_is_the_image_tag_without_registry_port_or_digest() {
        for (image, tag) in [
            ("registry.k8s.io/kueue/kueue:v0.20.0", Some("v0.20.0")),
            (
                "registry.k8s.io/kueue/kueue:v0.19.7@sha256:0123abcd",
                Some("v0.19.7"),
            ),
            ("localhost:5000/kueue/kueue:v0.19.2", Some("v0.19.2")),
            ("localhost:5000/kueue/kueue", None),
            ("registry.k8s.io/kueue/kueue@sha256:0123abcd", None),
        ] {
            assert_eq!(image_tag(image), tag, "{image}");
        }
    }

    fn frameworks(objects: &[Value]) -> Vec<String> {
        let map = objects
            .iter()
            .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == CONFIG_MAP)
            .unwrap();
        let config: Value =
            serde_saphyr::from_str(map["data"][CONFIG_KEY].as_str().unwrap()).unwrap();
        config["integrations"]["frameworks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn kueue_manages_jobsets_whenever_jobset_is_installed() {
        let with_jobset = KueueInstall {
            manages_jobsets: true,
            ..install(&[])
        };
        // The release lists JobSets already: its configuration is left as written.
        let objects = prepare(&release(), &with_jobset, "s").unwrap();
        assert!(frameworks(&objects).contains(&"jobset.x-k8s.io/jobset".to_string()));
        let as_released = prepare(&release(), &install(&[]), "s").unwrap();
        let config = |objects: &[Value]| {
            objects
                .iter()
                .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == CONFIG_MAP)
                .unwrap()["data"][CONFIG_KEY]
                .clone()
        };
        assert_eq!(config(&objects), config(&as_released));
        // Manifests whose configuration leaves JobSets out get them added, the rest kept.
        let without = release().replace("      - \"jobset.x-k8s.io/jobset\"\n", "");
        assert!(
            !frameworks(&prepare(&without, &install(&[]), "s").unwrap())
                .contains(&"jobset.x-k8s.io/jobset".to_string())
        );
        let listed = frameworks(&prepare(&without, &with_jobset, "s").unwrap());
        assert!(listed.contains(&"jobset.x-k8s.io/jobset".to_string()));
        assert!(listed.contains(&"ray.io/rayjob".to_string()));
    }

    #[test]
    fn no_gates_leaves_args_alone() {
        let objs = prepare(&release(), &install(&[]), "s").unwrap();
        let dep = objs.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let args = dep
            .pointer("/spec/template/spec/containers/0/args")
            .cloned()
            .unwrap_or_default();
        assert!(!args.to_string().contains("feature-gates"));
    }
}
