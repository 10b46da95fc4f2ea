//! Applying a saved plan (`gkq plan --out`): what the spec it names says now, and the session a
//! plan without its spec is applied in.

use std::path::PathBuf;

use super::load::{SpecSource, Validated, load_valid};
use super::plan::spec_revision;
use super::session::{KubeSource, Session, TargetOptions, connect_to};
use crate::gitops::saved;
pub use crate::gitops::saved::{SavedPlanError, read};
use crate::kube::client::RealKube;
use crate::kube::connect::from_cluster;
use crate::model::DesiredState;
use crate::plan::Plan;
use crate::plan::provenance::Provenance;
use crate::spec::Loaded;

/// Whether a path names a saved plan rather than a spec (`gkq apply PLAN`).
pub use crate::gitops::saved::is_plan_file;

/// What the spec a saved plan names says now.
pub enum SpecCheck {
    /// It is there and has the plan's digest.
    Unchanged(Box<(Loaded, DesiredState)>),
    /// Not read: the person applying chose to apply the plan without its spec
    /// (`--no-spec-check`), so only live state is checked against the plan.
    Unread,
    /// It no longer validates.
    Invalid(Box<Validated>),
}

/// Loads the spec `source` names (the plan's, or the one the person applying named); a spec
/// that is not there, or whose digest changed, is an error.
pub fn check_spec(
    source: &SpecSource,
    provenance: &Provenance,
) -> Result<SpecCheck, SavedPlanError> {
    if source.git_ref.is_none() && !source.spec.exists() {
        return Err(SavedPlanError::SpecNotHere {
            path: source.spec.display().to_string(),
        });
    }
    let mut validated = load_valid(source);
    let Some((loaded, desired)) = validated.valid.take() else {
        return Ok(SpecCheck::Invalid(Box::new(validated)));
    };
    let now = spec_revision(source, &loaded);
    saved::check_spec(&provenance.spec, &now)?;
    Ok(SpecCheck::Unchanged(Box::new((loaded, desired))))
}

/// The session a plan is applied in without its spec, and the Kubernetes client derived from
/// the cluster (as at plan time) when the cluster exists now.
pub async fn connect_for_plan(
    target: &TargetOptions,
    plan: &Plan,
    provenance: &Provenance,
    state_dir: PathBuf,
) -> anyhow::Result<(Session, Option<RealKube>)> {
    let session = connect_to(target, provenance.target, state_dir, &plan.cluster).await?;
    let mut kube_client = None;
    if let KubeSource::FromCluster(credentials) = &session.kube
        && let Some(cluster) = session
            .gke
            .get_cluster(&plan.cluster)
            .await
            .map_err(|e| anyhow::anyhow!("reading cluster {}: {e}", plan.cluster.name()))?
        && cluster
            .get("endpoint")
            .and_then(|e| e.as_str())
            .is_some_and(|e| !e.is_empty())
    {
        kube_client = Some(
            from_cluster(&cluster, credentials)
                .await
                .map_err(|e| anyhow::anyhow!("connecting to Kubernetes: {e}"))?,
        );
    }
    Ok((session, kube_client))
}
