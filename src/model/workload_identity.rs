//! Workload Identity Federation names (docs/gke.md f.2): the audiences a Kubernetes
//! ServiceAccount token is exchanged for at Google's Security Token Service, which audience the
//! token itself must carry, and the IAM principal the exchange stands for. The GKE client
//! (`gke::federation`) and the emulator's STS (`emulator::sts`) both read them here.

use crate::addr::ClusterRef;

/// The Kubernetes user a ServiceAccount's token names in `sub`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// `(namespace, name)` of a `system:serviceaccount:NAMESPACE:NAME` user.
pub fn parse_service_account_user(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

/// The STS audience of GKE's built-in pool for ServiceAccounts of `cluster`:
/// `identitynamespace:PROJECT.svc.id.goog:https://container.googleapis.com/v1/projects/PROJECT/locations/LOCATION/clusters/CLUSTER`.
pub fn gke_builtin_audience(cluster: &ClusterRef) -> String {
    format!(
        "identitynamespace:{}.svc.id.goog:https://container.googleapis.com/v1/projects/{}/locations/{}/clusters/{}",
        cluster.project, cluster.project, cluster.location, cluster.cluster
    )
}

/// An STS audience gkq knows how to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// GKE's built-in pool `PROJECT_ID.svc.id.goog`, with the cluster as its provider.
    GkeBuiltIn { pool: String, provider: String },
    /// A workload identity pool provider:
    /// `//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER`.
    PoolProvider {
        project_number: String,
        pool: String,
        provider: String,
    },
}

const GKE_POOL_SUFFIX: &str = ".svc.id.goog";

impl Audience {
    /// Reads an STS audience; `None` for any other form.
    pub fn parse(text: &str) -> Option<Audience> {
        if let Some(rest) = text.strip_prefix("identitynamespace:") {
            let (pool, provider) = rest.split_once(':')?;
            let project = pool.strip_suffix(GKE_POOL_SUFFIX)?;
            if project.is_empty() || provider.is_empty() {
                return None;
            }
            return Some(Audience::GkeBuiltIn {
                pool: pool.to_string(),
                provider: provider.to_string(),
            });
        }
        let path = text.strip_prefix("//iam.googleapis.com/")?;
        match path.split('/').collect::<Vec<_>>().as_slice() {
            [
                "projects",
                number,
                "locations",
                "global",
                "workloadIdentityPools",
                pool,
                "providers",
                provider,
            ] if [number, pool, provider].iter().all(|p| !p.is_empty())
                && number.chars().all(|c| c.is_ascii_digit()) =>
            {
                Some(Audience::PoolProvider {
                    project_number: number.to_string(),
                    pool: pool.to_string(),
                    provider: provider.to_string(),
                })
            }
            _ => None,
        }
    }

    /// The audience the Kubernetes token must carry (`aud`): the pool itself for GKE's built-in
    /// pool, the provider's full resource name (its default allowed audience) otherwise.
    pub fn subject_token_audience(&self) -> String {
        match self {
            Audience::GkeBuiltIn { pool, .. } => pool.clone(),
            Audience::PoolProvider {
                project_number,
                pool,
                provider,
            } => format!(
                "//iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/{pool}/providers/{provider}"
            ),
        }
    }

    /// The IAM principal a ServiceAccount's token is exchanged for. GKE's built-in pool names it
    /// by namespace and name (`.../subject/ns/NAMESPACE/sa/NAME`); another pool, with the default
    /// attribute mapping `google.subject=assertion.sub`, by the token's `sub`.
    /// `project_number` turns the built-in pool's project id into its number.
    pub fn principal(
        &self,
        namespace: &str,
        name: &str,
        project_number: impl Fn(&str) -> String,
    ) -> String {
        match self {
            Audience::GkeBuiltIn { pool, .. } => {
                let project = pool.strip_suffix(GKE_POOL_SUFFIX).unwrap_or(pool);
                format!(
                    "principal://iam.googleapis.com/projects/{}/locations/global/workloadIdentityPools/{pool}/subject/ns/{namespace}/sa/{name}",
                    project_number(project)
                )
            }
            Audience::PoolProvider {
                project_number,
                pool,
                ..
            } => format!(
                "principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/{pool}/subject/{}",
                service_account_user(namespace, name)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_pool_is_named_after_the_project_and_the_cluster_is_its_provider() {
        let cluster = ClusterRef {
            project: "mgmt".into(),
            location: "us-east5".into(),
            cluster: "hub".into(),
        };
        let text = gke_builtin_audience(&cluster);
        let audience = Audience::parse(&text).unwrap();
        assert_eq!(audience.subject_token_audience(), "mgmt.svc.id.goog");
        assert_eq!(
            audience.principal("team-a", "gkq-stack", |p| format!("n-{p}")),
            "principal://iam.googleapis.com/projects/n-mgmt/locations/global/workloadIdentityPools/mgmt.svc.id.goog/subject/ns/team-a/sa/gkq-stack"
        );
    }

    #[test]
    fn a_pool_provider_is_its_own_token_audience_and_maps_the_subject() {
        let text = "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/k8s/providers/hub";
        let audience = Audience::parse(text).unwrap();
        assert_eq!(audience.subject_token_audience(), text);
        assert_eq!(
            audience.principal("ns", "sa", |_| unreachable!()),
            "principal://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/k8s/subject/system:serviceaccount:ns:sa"
        );
    }

    #[test]
    fn other_audiences_and_users_are_refused() {
        for text in [
            "",
            "identitynamespace:mgmt:provider",
            "identitynamespace:.svc.id.goog:p",
            "identitynamespace:mgmt.svc.id.goog",
            "//iam.googleapis.com/projects/abc/locations/global/workloadIdentityPools/p/providers/q",
            "https://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
        ] {
            assert_eq!(Audience::parse(text), None, "{text}");
        }
        assert_eq!(
            parse_service_account_user("system:serviceaccount:a:b"),
            Some(("a", "b"))
        );
        for user in [
            "system:serviceaccount:a",
            "system:serviceaccount::b",
            "alice",
            "system:serviceaccount:a:b:c",
        ] {
            assert_eq!(parse_service_account_user(user), None, "{user}");
        }
    }
}
