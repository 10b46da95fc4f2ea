//! JobSet's installation as a planned component (`jobset.install: builtin`): the release gkq
//! embeds, labelled as gkq's and put in the order it is applied in, and the
//! `jobset.install/jobset` pseudo-object that stands for it in plans, as Kueue's installation
//! does ([`super::kueue_install`]). Reading the live installation is `kube::install`'s; the facts
//! (which release, what the controller needs) are in docs/jobset.md.

use serde_json::{Value, json};

use super::kueue_install::{INSTALLATION_API, INSTALLATION_LABEL, image_tag};
use super::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, STACK_LABEL};
use crate::spec::types::JobSetInstall;
use crate::vocab::object::Field;

pub const INSTALLATION_KIND: &str = "JobSetInstallation";
pub const JOBSET_NAMESPACE: &str = "jobset-system";
pub const CONTROLLER_DEPLOYMENT: &str = "jobset-controller-manager";
pub const CONTROLLER_CONTAINER: &str = "manager";
pub const JOBSET_GROUP: &str = "jobset.x-k8s.io";
/// The API version gkq writes JobSets in, and the one `external` checks is served.
pub const JOBSET_API_VERSION: &str = "jobset.x-k8s.io/v1alpha2";

/// The JobSet releases gkq embeds.
pub const BUILTIN_VERSIONS: &[&str] = &["v0.12.0"];

/// JobSet v0.12.0's CRD, the unchanged upstream copy (tests/fixtures/upstream/crds/README.md).
const CRD_V0_12_0: &str =
    include_str!("../../tests/fixtures/upstream/crds/jobset/jobset.x-k8s.io_jobsets.yaml");
/// The rest of JobSet v0.12.0's release, written for gkq (the file's header says what it is).
const RELEASE_V0_12_0: &str = include_str!("../../assets/jobset/release-v0.12.0.yaml");

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InstallError {
    #[error(
        "gkq embeds no JobSet release {version} (it embeds {}); set jobset.version to one of them, or install JobSet yourself and set jobset.install: external",
        BUILTIN_VERSIONS.join(", ")
    )]
    NotEmbedded { version: String },
    #[error("JobSet manifests: {0}")]
    Parse(String),
}

/// Whether a spec that says `install` has JobSet in its cluster, so that Kueue should manage
/// JobSets (its `integrations.frameworks`).
pub fn installed(install: JobSetInstall) -> bool {
    install != JobSetInstall::None
}

/// Whether `object` is a JobSet (any served version of the group).
pub fn is_jobset(object: &Value) -> bool {
    object["kind"] == "JobSet"
        && object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.split('/').next() == Some(JOBSET_GROUP))
}

/// Whether a manifest installs JobSet: its CRD (`*.jobset.x-k8s.io`).
pub fn installs_jobset(object: &Value) -> bool {
    object["kind"] == "CustomResourceDefinition"
        && object.pointer("/spec/group").and_then(Value::as_str) == Some(JOBSET_GROUP)
}

/// The release's objects for `version`, labelled as gkq's (and as the `jobset` installation's,
/// so that the observer does not report them as objects the spec dropped), in the order they are
/// applied: the namespace, the CRD, the RBAC, the configuration and certificate Secret, the
/// Services, the controller Deployment, then the webhook configurations, which refuse every
/// JobSet until the controller serves them.
pub fn prepare(version: &str, stack: &str) -> Result<Vec<Value>, InstallError> {
    let (crd, release) = match version {
        "v0.12.0" => (CRD_V0_12_0, RELEASE_V0_12_0),
        _ => {
            return Err(InstallError::NotEmbedded {
                version: version.to_string(),
            });
        }
    };
    let mut objects = Vec::new();
    for text in [crd, release] {
        let parsed = serde_saphyr::from_multiple::<Value>(text)
            .map_err(|e| InstallError::Parse(e.to_string()))?;
        objects.extend(
            parsed
                .into_iter()
                .filter(|o| o.is_object() && o.field("kind").is_some()),
        );
    }
    objects.sort_by_key(install_rank);
    for o in &mut objects {
        let labels = &mut o["metadata"]["labels"];
        if !labels.is_object() {
            *labels = json!({});
        }
        labels[MANAGED_BY_LABEL] = json!(MANAGED_BY_VALUE);
        labels[STACK_LABEL] = json!(stack);
        labels[INSTALLATION_LABEL] = json!("jobset");
    }
    Ok(objects)
}

/// Where an object of the release goes in the install order ([`prepare`]).
fn install_rank(object: &Value) -> u8 {
    match object["kind"].as_str().unwrap_or_default() {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => 2,
        "ConfigMap" | "Secret" => 3,
        "Service" => 4,
        "Deployment" => 5,
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => 6,
        _ => 4,
    }
}

/// The pseudo-object that stands for JobSet's installation in plans (`jobset.install/jobset`).
pub fn installation_object(version: &str, stack: &str) -> Value {
    json!({
        "apiVersion": INSTALLATION_API,
        "kind": INSTALLATION_KIND,
        "metadata": {
            "name": "jobset",
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, STACK_LABEL: stack},
        },
        "spec": {"version": version},
    })
}

/// The pseudo-object for an installed controller, from its Deployment (labels, image tag).
pub fn installation_from_deployment(deployment: &Value) -> Value {
    json!({
        "apiVersion": INSTALLATION_API,
        "kind": INSTALLATION_KIND,
        "metadata": {
            "name": "jobset",
            "labels": deployment.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        },
        "spec": {"version": installed_version(deployment)},
    })
}

/// The JobSet release a controller Deployment runs, from its image tag.
pub fn installed_version(deployment: &Value) -> Option<String> {
    deployment
        .pointer("/spec/template/spec/containers")?
        .as_array()?
        .iter()
        .find(|c| c["name"] == CONTROLLER_CONTAINER)?
        .field("image")?
        .as_str()
        .and_then(image_tag)
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
        objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    #[test]
    fn the_builtin_release_is_the_crd_controller_and_webhooks_in_install_order() {
        let objects = prepare("v0.12.0", "tpu-cluster").unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
        assert_eq!(kinds[0], "Namespace");
        assert!(at("CustomResourceDefinition") < at("ClusterRole"));
        assert!(at("Secret") < at("Deployment"));
        assert!(at("Service") < at("Deployment"));
        assert!(at("Deployment") < at("MutatingWebhookConfiguration"));
        assert!(at("Deployment") < at("ValidatingWebhookConfiguration"));

        let crd = of_kind(&objects, "CustomResourceDefinition");
        assert_eq!(crd.len(), 1);
        assert_eq!(crd[0]["metadata"]["name"], "jobsets.jobset.x-k8s.io");
        let deployment = of_kind(&objects, "Deployment")[0];
        assert_eq!(deployment["metadata"]["name"], CONTROLLER_DEPLOYMENT);
        assert_eq!(deployment["metadata"]["namespace"], JOBSET_NAMESPACE);
        assert_eq!(installed_version(deployment).as_deref(), Some("v0.12.0"));
        assert_eq!(
            deployment.pointer("/spec/template/spec/containers/0/image"),
            Some(&json!("registry.k8s.io/jobset/jobset:v0.12.0"))
        );
        // The webhooks call the Service the certificate rotation signs for, in the namespace
        // the controller runs in, with the Secret it fills mounted where it serves from.
        for config in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            for webhook in of_kind(&objects, config)[0]["webhooks"].as_array().unwrap() {
                assert_eq!(
                    webhook["clientConfig"]["service"]["name"],
                    "jobset-webhook-service"
                );
                assert_eq!(
                    webhook["clientConfig"]["service"]["namespace"],
                    JOBSET_NAMESPACE
                );
            }
        }
        let secret = of_kind(&objects, "Secret")[0];
        assert_eq!(secret["metadata"]["name"], "jobset-webhook-server-cert");
        assert!(secret.field("data").is_none(), "the controller fills it");
        assert_eq!(
            deployment.pointer("/spec/template/spec/volumes/0/secret/secretName"),
            Some(&json!("jobset-webhook-server-cert"))
        );
        assert!(objects.iter().all(|o| {
            o["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY_VALUE
                && o["metadata"]["labels"][STACK_LABEL] == "tpu-cluster"
                && o["metadata"]["labels"][INSTALLATION_LABEL] == "jobset"
        }));
        // Everything namespaced is in jobset-system.
        for o in &objects {
            if let Some(ns) = o.pointer("/metadata/namespace") {
                assert_eq!(ns, JOBSET_NAMESPACE, "{}", o["metadata"]["name"]);
            }
        }
    }

    #[test]
    fn a_release_gkq_does_not_embed_is_an_error_naming_the_ones_it_does() {
        let err = prepare("v0.11.1", "s").unwrap_err();
        assert!(err.to_string().contains("embeds v0.12.0"), "{err}");
        assert!(
            err.to_string().contains("jobset.install: external"),
            "{err}"
        );
    }

    #[test]
    fn the_installed_release_is_the_controller_image_tag() {
        let objects = prepare("v0.12.0", "s").unwrap();
        let mut deployment = of_kind(&objects, "Deployment")[0].clone();
        deployment["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("registry.k8s.io/jobset/jobset:v0.12.1@sha256:00ff");
        let live = installation_from_deployment(&deployment);
        assert_eq!(live["spec"]["version"], "v0.12.1");
        assert_eq!(live["kind"], INSTALLATION_KIND);
        assert_eq!(
            installation_object("v0.12.0", "s")["metadata"]["name"],
            live["metadata"]["name"]
        );
    }
}
