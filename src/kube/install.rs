//! Reading Kueue's installation: the release manifests (embedded, a file, a directory or a URL)
//! and the live manager; and JobSet's: the live controller, and whether JobSets are served. What
//! the installations are made of is `model::kueue_install`'s and `model::jobset_install`'s.

use serde_json::Value;

use crate::model::KueueInstall;
use crate::model::jobset_install;
use crate::model::kueue_install::{
    BUILTIN, BUILTIN_VERSIONS, CONFIG_MAP, KUEUE_NAMESPACE, MANAGER_DEPLOYMENT, builtin_manifests,
    installation_from_deployment,
};

/// The live installation, read from the manager Deployment and its configuration ConfigMap;
/// `None` when Kueue is not installed.
pub async fn observe(api: &dyn super::KubeApi) -> super::KubeResult<Option<Value>> {
    let Some(info) = api.resource("apps/v1", "Deployment").await? else {
        return Ok(None);
    };
    let Some(deployment) = api
        .get(&info, Some(KUEUE_NAMESPACE), MANAGER_DEPLOYMENT)
        .await?
    else {
        return Ok(None);
    };
    let config_map = match api.resource("v1", "ConfigMap").await? {
        Some(info) => api.get(&info, Some(KUEUE_NAMESPACE), CONFIG_MAP).await?,
        None => None,
    };
    Ok(Some(installation_from_deployment(
        &deployment,
        config_map.as_ref(),
    )))
}

/// The live JobSet installation, read from the controller Deployment; `None` when JobSet's
/// controller is not installed.
pub async fn observe_jobset(api: &dyn super::KubeApi) -> super::KubeResult<Option<Value>> {
    let Some(info) = api.resource("apps/v1", "Deployment").await? else {
        return Ok(None);
    };
    Ok(api
        .get(
            &info,
            Some(jobset_install::JOBSET_NAMESPACE),
            jobset_install::CONTROLLER_DEPLOYMENT,
        )
        .await?
        .as_ref()
        .map(jobset_install::installation_from_deployment))
}

/// The live installation an installation pseudo-object (`KueueInstallation`,
/// `JobSetInstallation`) stands for.
pub async fn observe_installation(
    api: &dyn super::KubeApi,
    object: &Value,
) -> super::KubeResult<Option<Value>> {
    if object["kind"] == jobset_install::INSTALLATION_KIND {
        observe_jobset(api).await
    } else {
        observe(api).await
    }
}

/// What applying JobSet's release `version` (with force, docs/jobset.md 3.1) would take over
/// from other field managers: each object of the release is dry-run without force, and the
/// fields the server names in a conflict are listed per object and manager. An object the
/// server cannot dry-run (its namespace does not exist yet, its kind is not served) exists in
/// no form another manager could own.
pub async fn jobset_takeovers(
    api: &dyn super::KubeApi,
    version: &str,
    stack: &str,
) -> super::KubeResult<Vec<crate::plan::conflicts::Takeover>> {
    use crate::plan::conflicts::Takeover;
    let objects = jobset_install::prepare(version, stack)
        .map_err(|e| super::KubeError::Transport(e.to_string()))?;
    let mut takeovers: Vec<Takeover> = Vec::new();
    for object in &objects {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let Some(info) = api.resource(api_version, kind).await? else {
            continue;
        };
        let dry_run = super::ApplyOptions {
            dry_run: true,
            force: false,
        };
        match api.apply(&info, object, dry_run).await {
            Err(super::KubeError::Conflict { conflicts, .. }) => {
                for conflict in conflicts {
                    let described = super::describe(object);
                    match takeovers
                        .iter_mut()
                        .find(|t| t.object == described && t.manager == conflict.manager)
                    {
                        Some(found) => found.fields.push(conflict.field),
                        None => takeovers.push(Takeover {
                            object: described,
                            manager: conflict.manager,
                            fields: vec![conflict.field],
                        }),
                    }
                }
            }
            Err(e) => tracing::debug!("dry run of {}: {e}", super::describe(object)),
            Ok(_) => {}
        }
    }
    Ok(takeovers)
}

/// For `jobset.install: external` with JobSets in the spec: checks that the cluster serves the
/// JobSet API gkq writes. `Err` (with the fix) when it does not: every JobSet would be refused.
pub async fn check_external_jobset(api: &dyn super::KubeApi) -> Result<(), String> {
    let served = api
        .resource(jobset_install::JOBSET_API_VERSION, "JobSet")
        .await
        .map_err(|e| e.to_string())?;
    if served.is_some() {
        return Ok(());
    }
    Err(format!(
        "jobset.install is external, but the cluster does not serve {} JobSets (GKE does not install JobSet): set jobset.install: builtin, and gkq installs JobSet {} before the first JobSet, or install JobSet yourself",
        jobset_install::JOBSET_API_VERSION,
        jobset_install::BUILTIN_VERSIONS.join(", ")
    ))
}

/// Reads the release manifests for `install`: the embedded copy for `builtin`, else
/// [`load_manifests`].
pub async fn manifests_for(install: &KueueInstall) -> anyhow::Result<String> {
    if install.manifests == BUILTIN {
        return builtin_manifests(&install.version)
            .map(str::to_string)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "gkq has no built-in manifests for Kueue {} (it embeds {}); set kueue.manifests to a URL or a local file",
                    install.version,
                    BUILTIN_VERSIONS.join(", ")
                )
            });
    }
    load_manifests(&install.manifests).await
}

/// Reads release manifests from a URL, a file, or a directory of YAML files.
pub async fn load_manifests(source: &str) -> anyhow::Result<String> {
    if source.starts_with("https://") || source.starts_with("http://") {
        crate::gke::install_tls_provider();
        let response = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()?
            .get(source)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("downloading Kueue manifests from {source}: {e} (for an air-gapped install set kueue.manifests to a local file)"))?;
        if !response.status().is_success() {
            anyhow::bail!(
                "downloading Kueue manifests from {source}: HTTP {}",
                response.status()
            );
        }
        return Ok(response.text().await?);
    }
    let path = std::path::Path::new(source);
    if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .collect();
        files.sort();
        let mut text = String::new();
        for f in files {
            text.push_str("\n---\n");
            text.push_str(&std::fs::read_to_string(&f)?);
        }
        return Ok(text);
    }
    std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading Kueue manifests {source}: {e}"))
}

/// What `kueue.install: external` finds: the release the manager runs, and what the plan should
/// say about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalKueue {
    /// The manager Deployment's release (its image tag); `None` when no manager was found.
    pub version: Option<String>,
    /// The gates its `--feature-gates` argument sets (gates set in its configuration file are
    /// not read).
    pub feature_gates: std::collections::BTreeMap<String, bool>,
    /// A version other than the spec's, or a manager gkq could not find.
    pub notes: Vec<String>,
}

/// For `kueue.install: external`: checks that someone else's Kueue serves the v1beta2 API gkq
/// writes, and reads the release its manager runs. `Err` when Kueue's API is missing (nothing
/// gkq writes would be accepted).
pub async fn check_external(
    api: &dyn super::KubeApi,
    install: &KueueInstall,
) -> Result<ExternalKueue, String> {
    let served = api
        .resource("kueue.x-k8s.io/v1beta2", "ClusterQueue")
        .await
        .map_err(|e| e.to_string())?;
    if served.is_none() {
        return Err(format!(
            "kueue.install is external, but the cluster does not serve kueue.x-k8s.io/v1beta2 ClusterQueues: install Kueue {} (v0.16 or later), or set kueue.install: managed",
            install.version
        ));
    }
    let mut found = ExternalKueue::default();
    match observe(api).await.map_err(|e| e.to_string())? {
        Some(live) => {
            let version = live.pointer("/spec/version").and_then(Value::as_str);
            match version {
                Some(version) if version != install.version => found.notes.push(format!(
                    "Kueue {version} is installed, the spec says {}",
                    install.version
                )),
                Some(_) => {}
                None => found.notes.push(format!(
                    "the {MANAGER_DEPLOYMENT} Deployment in {KUEUE_NAMESPACE} names no image tag; Kueue {} is assumed, as kueue.version says",
                    install.version
                )),
            }
            found.version = version.map(str::to_string);
            found.feature_gates = live
                .pointer("/spec/featureGates")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(gate, on)| Some((gate.clone(), on.as_bool()?)))
                .collect();
        }
        None => found.notes.push(format!(
            "Kueue's API is served but no {MANAGER_DEPLOYMENT} Deployment was found in {KUEUE_NAMESPACE}; its version could not be checked, Kueue {} is assumed, as kueue.version says",
            install.version
        )),
    }
    Ok(found)
}

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

    /// A cluster that serves nothing: Kueue is not installed.
    struct Empty;

    #[async_trait::async_trait]
    impl crate::kube::KubeApi for Empty {
        async fn resource(
            &self,
            _: &str,
            _: &str,
        ) -> crate::kube::KubeResult<Option<crate::kube::ResourceInfo>> {
            Ok(None)
        }
        async fn list(
            &self,
            _: &crate::kube::ResourceInfo,
            _: &str,
        ) -> crate::kube::KubeResult<Vec<Value>> {
            Ok(vec![])
        }
        async fn get(
            &self,
            _: &crate::kube::ResourceInfo,
            _: Option<&str>,
            _: &str,
        ) -> crate::kube::KubeResult<Option<Value>> {
            Ok(None)
        }
        async fn apply(
            &self,
            _: &crate::kube::ResourceInfo,
            o: &Value,
            _: crate::kube::ApplyOptions,
        ) -> crate::kube::KubeResult<Value> {
            Ok(o.clone())
        }
        async fn delete(
            &self,
            _: &crate::kube::ResourceInfo,
            _: Option<&str>,
            _: &str,
            _: Option<&crate::kube::Version>,
        ) -> crate::kube::KubeResult<crate::kube::Deletion> {
            Ok(crate::kube::Deletion::Absent)
        }
    }

    #[tokio::test]
    async fn external_jobset_not_served_is_an_error_naming_the_fix() {
        let err = check_external_jobset(&Empty).await.unwrap_err();
        assert!(
            err.contains("does not serve jobset.x-k8s.io/v1alpha2"),
            "{err}"
        );
        assert!(err.contains("jobset.install: builtin"), "{err}");
        assert_eq!(observe_jobset(&Empty).await.unwrap(), None);
    }

    #[tokio::test]
    async fn external_install_without_kueue_is_an_error_naming_the_fix() {
        let err = check_external(&Empty, &install(&[])).await.unwrap_err();
        assert!(
            err.contains("does not serve kueue.x-k8s.io/v1beta2"),
            "{err}"
        );
        assert!(err.contains("kueue.install: managed"), "{err}");
    }
}
