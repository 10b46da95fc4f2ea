//! The executor's Kubernetes steps ([`KubeApplier`]) over any [`KubeApi`]: server-side apply
//! with gkq's field manager, waits where the next step needs them (CRDs Established, Kueue's
//! manager available, Kueue's own AdmissionChecks Active), deletes that wait for finalizers, and
//! Kueue's and JobSet's installations.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

use super::{KubeApplier, KubeApplyError};
use crate::addr::ResourceAddr;
use crate::kube::install;
use crate::kube::{
    ApplyOptions, Deletion, KubeApi, KubeError, ResourceInfo, Version, describe, name_of,
    namespace_of, owned_selector, type_of,
};
use crate::model::KueueInstall;
use crate::model::jobs::RAY_API;
use crate::model::jobset_install::{self, CONTROLLER_DEPLOYMENT, JOBSET_NAMESPACE};
use crate::model::kueue::KUEUE_API;
use crate::model::kueue_install::{self, INSTALLATION_KIND, KUEUE_NAMESPACE, MANAGER_DEPLOYMENT};
use crate::placement::job_workload::JobWorkloads;
use crate::vocab::object::{condition, condition_true, uid_of};

pub struct KubeAdapter<'a> {
    api: &'a dyn KubeApi,
    /// Take ownership of fields other managers own (`--force-conflicts`).
    pub force_conflicts: bool,
    /// Where Kueue's installation comes from, for `kueue.install/kueue` actions.
    pub kueue: Option<KueueInstall>,
    pub stack: String,
    /// How long to wait for CRDs, Kueue's manager and deletions.
    pub timeout: Duration,
    pub poll: Duration,
    /// How long a deleted job's Workloads may keep their quota before the next job is created
    /// anyway (`--submit-wait`).
    pub submit_wait: Duration,
}

impl<'a> KubeAdapter<'a> {
    pub fn new(api: &'a dyn KubeApi, stack: impl Into<String>) -> Self {
        Self {
            api,
            force_conflicts: false,
            kueue: None,
            stack: stack.into(),
            timeout: Duration::from_secs(300),
            poll: Duration::from_millis(500),
            submit_wait: crate::apply::DEFAULT_SUBMIT_WAIT,
        }
    }
}

fn to_apply_error(e: KubeError) -> KubeApplyError {
    let hint = match &e {
        KubeError::Conflict { conflicts, .. } => Some(format!(
            "another field manager ({}) owns these fields now, with other values than the plan found; plan again: the plan shows each conflict, whether gkq leaves the field to its manager, and what --force-conflicts would take",
            conflicts
                .iter()
                .map(|c| c.manager.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(", ")
        )),
        KubeError::UnknownKind { .. } => {
            Some("install Kueue first (kueue.install: managed), or check the kind's CRD".into())
        }
        KubeError::Transport(_) => {
            Some("check that the cluster is reachable and your credentials are valid".into())
        }
        _ => None,
    };
    KubeApplyError {
        message: e.to_string(),
        hint,
        changed: matches!(e, KubeError::Changed { .. }),
    }
}

impl KubeAdapter<'_> {
    async fn info(&self, api_version: &str, kind: &str) -> Result<ResourceInfo, KubeApplyError> {
        self.api
            .resource(api_version, kind)
            .await
            .map_err(to_apply_error)?
            .ok_or_else(|| {
                to_apply_error(KubeError::UnknownKind {
                    api_version: api_version.into(),
                    kind: kind.into(),
                })
            })
    }

    async fn check(&self, wait: &Wait<'_>) -> Result<bool, KubeApplyError> {
        Ok(match wait {
            Wait::Established(name) => {
                let info = self
                    .info("apiextensions.k8s.io/v1", "CustomResourceDefinition")
                    .await?;
                let crd = self
                    .api
                    .get(&info, None, name)
                    .await
                    .map_err(to_apply_error)?;
                crd.is_some_and(|c| condition_true(&c, "Established"))
            }
            Wait::ManagerAvailable => self.available(KUEUE_NAMESPACE, MANAGER_DEPLOYMENT).await?,
            Wait::JobSetControllerAvailable => {
                self.available(JOBSET_NAMESPACE, CONTROLLER_DEPLOYMENT)
                    .await?
            }
            Wait::AdmissionCheckActive { api_version, name } => self
                .admission_check(api_version, name)
                .await?
                .is_some_and(|check| condition_true(&check, "Active")),
            Wait::Gone {
                info,
                namespace,
                name,
            } => self
                .api
                .get(info, *namespace, name)
                .await
                .map_err(to_apply_error)?
                .is_none(),
        })
    }

    /// Whether the Deployment `namespace/name` reports itself `Available`.
    async fn available(&self, namespace: &str, name: &str) -> Result<bool, KubeApplyError> {
        let info = self.info("apps/v1", "Deployment").await?;
        let d = self
            .api
            .get(&info, Some(namespace), name)
            .await
            .map_err(to_apply_error)?;
        Ok(d.is_some_and(|d| condition_true(&d, "Available")))
    }

    async fn admission_check(
        &self,
        api_version: &str,
        name: &str,
    ) -> Result<Option<Value>, KubeApplyError> {
        let info = self.info(api_version, "AdmissionCheck").await?;
        self.api
            .get(&info, None, name)
            .await
            .map_err(to_apply_error)
    }

    /// What to tell the user when a wait runs out: for an AdmissionCheck, what Kueue said of it.
    async fn timeout_hint(&self, wait: &Wait<'_>) -> Option<String> {
        if let Wait::JobSetControllerAvailable = wait {
            return Some(format!(
                "see why its pod does not become ready: kubectl -n {JOBSET_NAMESPACE} describe pods -l control-plane=controller-manager (the nodes must pull registry.k8s.io/jobset/jobset); apply again once it runs"
            ));
        }
        let Wait::AdmissionCheckActive { api_version, name } = wait else {
            return None;
        };
        let check = self
            .admission_check(api_version, name)
            .await
            .ok()
            .flatten()?;
        let active = condition(&check, "Active");
        Some(match active {
            Some(c) => format!(
                "Kueue reports the check inactive ({}: {}); until it is Active the ClusterQueues that use it admit nothing. Check spec.parameters names an existing ProvisioningRequestConfig",
                c["reason"].as_str().unwrap_or("no reason"),
                c["message"].as_str().unwrap_or("no message"),
            ),
            None => format!(
                "Kueue has not reported on the check at all: its controller for {} is not running. Kueue starts the ProvisioningRequest controller only if the autoscaling.x-k8s.io/v1 ProvisioningRequest API is served when Kueue starts; install that CRD (on GKE it comes with the cluster, version 1.28+), then restart Kueue: kubectl -n {KUEUE_NAMESPACE} rollout restart deployment {MANAGER_DEPLOYMENT}",
                check["spec"]["controllerName"]
                    .as_str()
                    .unwrap_or("its controllerName"),
            ),
        })
    }

    async fn wait_for(&self, wait: Wait<'_>) -> Result<(), KubeApplyError> {
        let start = Instant::now();
        loop {
            if self.check(&wait).await? {
                return Ok(());
            }
            if start.elapsed() > self.timeout {
                return Err(KubeApplyError {
                    message: format!(
                        "timed out after {}s waiting for {}",
                        self.timeout.as_secs(),
                        wait.describe()
                    ),
                    hint: self.timeout_hint(&wait).await,
                    changed: false,
                });
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    async fn wait_established(&self, crd_name: &str) -> Result<(), KubeApplyError> {
        self.wait_for(Wait::Established(crd_name)).await?;
        self.api.refresh_discovery();
        Ok(())
    }

    /// After a job is deleted: waits (at most `submit_wait`) until Kueue no longer counts the
    /// quota of its Workloads (each gone, or finished: Kueue finishes the Workload of a job that
    /// is gone, docs/kueue.md 1c.5), so that the jobs submitted next find that quota free, as
    /// the plan predicted. Its Workloads are those the plan counted as released (`runs`, read
    /// before the delete). A Kueue that does not release it in time is told, not an error.
    async fn wait_for_release(&self, what: &str, runs: &JobRuns) -> Result<(), KubeApplyError> {
        let released =
            |workloads: &[Value]| !workloads.iter().any(crate::placement::held::holds_quota);
        if !self.wait_for_workloads(runs, released).await? {
            tracing::warn!(
                "Kueue still counts the quota of deleted {what} after {}s; the jobs submitted next may not land where the plan predicted",
                self.submit_wait.as_secs()
            );
        }
        Ok(())
    }

    /// Reads the Workloads of the job `runs` describes until `done` says so, at most
    /// `submit_wait`: whether it did (true also when Kueue's Workloads are not served, so there
    /// is nothing to wait for).
    async fn wait_for_workloads(
        &self,
        runs: &JobRuns,
        done: impl Fn(&[Value]) -> bool,
    ) -> Result<bool, KubeApplyError> {
        let Ok(info) = self.info(KUEUE_API, "Workload").await else {
            return Ok(true);
        };
        let start = Instant::now();
        loop {
            if done(&self.workloads_of(&info, runs).await?) {
                return Ok(true);
            }
            if start.elapsed() >= self.submit_wait {
                return Ok(false);
            }
            tokio::time::sleep(self.poll.min(Duration::from_millis(100))).await;
        }
    }

    /// What a job's Workloads are read by: the job as it is now (a RayJob's status names its
    /// RayCluster) and the uids of the objects that may own them (the job's, its RayCluster's).
    /// Read before a delete, which takes the job's status with it.
    async fn runs_of(&self, job: Value) -> Result<JobRuns, KubeApplyError> {
        let mut owner_uids = vec![uid_of(&job).to_string()];
        if let Some(cluster) = crate::placement::job_workload::ray_cluster_of(&job)
            && let Ok(info) = self.info(RAY_API, "RayCluster").await
            && let Some(cluster) = self
                .api
                .get(&info, namespace_of(&job), cluster)
                .await
                .map_err(to_apply_error)?
        {
            owner_uids.push(uid_of(&cluster).to_string());
        }
        owner_uids.retain(|uid| !uid.is_empty());
        Ok(JobRuns { job, owner_uids })
    }

    /// [`Self::runs_of`] the job about to be deleted: as it is live when it is still the run
    /// with `uid` (the delete is conditional on that uid), else named by what the delete says.
    async fn runs_before_delete(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        uid: &str,
    ) -> Result<JobRuns, KubeApplyError> {
        let live = self
            .api
            .get(info, namespace, name)
            .await
            .map_err(to_apply_error)?
            .filter(|job| uid_of(job) == uid);
        let job = live.unwrap_or_else(|| {
            serde_json::json!({"apiVersion": info.api_version, "kind": info.kind,
                "metadata": {"namespace": namespace, "name": name, "uid": uid}})
        });
        self.runs_of(job).await
    }

    /// The job's Workloads by the one rule (`placement::job_workload`, as the plan reads them),
    /// among those Kueue labelled with the uid of an object that may own them
    /// (`kueue.x-k8s.io/job-uid`, one list per uid).
    async fn workloads_of(
        &self,
        info: &ResourceInfo,
        runs: &JobRuns,
    ) -> Result<Vec<Value>, KubeApplyError> {
        let mut listed = Vec::new();
        for uid in &runs.owner_uids {
            let selector = format!("{}={uid}", crate::vocab::labels::JOB_UID_LABEL);
            listed.extend(
                self.api
                    .list(info, &selector)
                    .await
                    .map_err(to_apply_error)?,
            );
        }
        let rule = JobWorkloads::new(&listed);
        Ok(rule
            .all_of(&runs.job)
            .into_iter()
            .map(|found| found.workload.clone())
            .collect())
    }

    /// Server-side apply of `object`, conditional on `version` when given; the object as stored.
    /// `force` takes the fields another manager owns (`--force-conflicts`, or an installation's
    /// objects, which are the release's).
    async fn apply_object(
        &self,
        object: &Value,
        version: Option<&Version>,
        force: bool,
    ) -> Result<Value, KubeApplyError> {
        let (api_version, kind) = type_of(object);
        let info = self.info(api_version, kind).await?;
        let conditional = version.map(|v| v.condition(object));
        let stored = self
            .api
            .apply(
                &info,
                conditional.as_ref().unwrap_or(object),
                ApplyOptions {
                    dry_run: false,
                    force,
                },
            )
            .await
            .map_err(to_apply_error)?;
        if kind == "CustomResourceDefinition" {
            self.wait_established(name_of(object)).await?;
        }
        if kind == "AdmissionCheck"
            && KUEUE_CHECK_CONTROLLERS
                .contains(&object["spec"]["controllerName"].as_str().unwrap_or(""))
        {
            // A ClusterQueue whose check is not Active is inactive: jobs submitted before Kueue
            // has activated the check would pend with "ClusterQueue ... is inactive".
            self.wait_for(Wait::AdmissionCheckActive {
                api_version,
                name: name_of(object),
            })
            .await?;
        }
        Ok(stored)
    }

    /// A ClusterQueue being deleted stays until its admitted jobs finish (Kueue's finalizer),
    /// which may take days: rather than wait for that, says which jobs it waits for.
    async fn refuse_to_wait_for_admitted(&self, cluster_queue: &str) -> Result<(), KubeApplyError> {
        let Ok(info) = self.info(KUEUE_API, "Workload").await else {
            return Ok(());
        };
        let workloads = self.api.list(&info, "").await.map_err(to_apply_error)?;
        let jobs = crate::plan::disruption::admitted_in(cluster_queue, &workloads);
        if jobs.is_empty() {
            return Ok(());
        }
        Err(KubeApplyError::new(
            format!(
                "ClusterQueue {cluster_queue} is being deleted, and Kueue's finalizer keeps it until its admitted jobs finish: {}",
                jobs.join(", ")
            ),
            Some(
                "nothing else is needed: Kueue removes the ClusterQueue once those jobs finish; run gkq apply again then for what waits on it (or delete the jobs to stop them now)"
                    .to_string(),
            ),
        ))
    }

    async fn install_kueue(&self) -> Result<(), KubeApplyError> {
        let Some(install) = &self.kueue else {
            return Err(KubeApplyError {
                message: "no Kueue installation settings were given to the applier".into(),
                hint: None,
                changed: false,
            });
        };
        let text = install::manifests_for(install)
            .await
            .map_err(|e| KubeApplyError {
                message: format!("{e:#}"),
                hint: Some(
                    "set kueue.manifests to a reachable URL, a local file or directory, or `builtin` (the embedded v0.19.2 release)".into(),
                ),
                changed: false,
            })?;
        let mut objects =
            kueue_install::prepare(&text, install, &self.stack).map_err(|e| KubeApplyError {
                message: e.to_string(),
                hint: None,
                changed: false,
            })?;
        for o in &mut objects {
            if o["kind"] == "Deployment" && o["metadata"]["name"] == MANAGER_DEPLOYMENT {
                o["metadata"]["annotations"][kueue_install::SOURCE_ANNOTATION] =
                    Value::String(install.manifests.clone());
            }
        }
        // Namespaces and CRDs first, so that everything else has somewhere to go.
        let rank = |o: &Value| match o["kind"].as_str() {
            Some("Namespace") => 0,
            Some("CustomResourceDefinition") => 1,
            _ => 2,
        };
        objects.sort_by_key(rank);
        for o in &objects {
            self.apply_object(o, None, self.force_conflicts)
                .await
                .map_err(|mut e| {
                    e.message = format!(
                        "installing Kueue {}: {}: {}",
                        install.version,
                        describe(o),
                        e.message
                    );
                    e
                })?;
        }
        self.wait_for(Wait::ManagerAvailable).await
    }
}

impl KubeAdapter<'_> {
    /// `jobset.install: builtin`: applies the release gkq embeds for the pseudo-object's version,
    /// in its order (namespace, CRD, RBAC, Secret, Services, controller, webhook configurations;
    /// `model::jobset_install::prepare`), then waits until the controller is available: its
    /// webhooks refuse every JobSet until it serves them.
    async fn install_jobset(&self, object: &Value) -> Result<(), KubeApplyError> {
        let version = object["spec"]["version"].as_str().unwrap_or_default();
        let objects = jobset_install::prepare(version, &self.stack)
            .map_err(|e| KubeApplyError::new(e.to_string(), None))?;
        for o in &objects {
            // The release's values win over another manager's (an earlier install of JobSet,
            // say): what gkq installs is the release (docs/jobset.md 3.1).
            self.apply_object(o, None, true).await.map_err(|mut e| {
                e.message = format!(
                    "installing JobSet {version}: {}: {}",
                    describe(o),
                    e.message
                );
                e
            })?;
        }
        self.wait_for(Wait::JobSetControllerAvailable).await
    }
}

/// A job whose Workloads apply waits on, as the plan attributes them
/// (`placement::job_workload`).
struct JobRuns {
    /// The job as read (with its status), or its kind, name and uid when it could not be read.
    job: Value,
    /// The uids of the objects that may own its Workloads: the job's, and its RayCluster's.
    owner_uids: Vec<String>,
}

/// Whether Kueue has decided on the job `workload` is for: it reserved quota, or recorded why
/// it did not (a `QuotaReserved` condition of either status), or admitted it.
fn shows_decision(workload: &Value) -> bool {
    condition(workload, "QuotaReserved").is_some() || condition(workload, "Admitted").is_some()
}

/// Admission-check controllers that run inside Kueue's manager, so Kueue itself marks their
/// checks Active. Checks of other controllers are not waited for: gkq cannot know when (or
/// whether) someone else's controller runs.
const KUEUE_CHECK_CONTROLLERS: [&str; 2] = [
    "kueue.x-k8s.io/provisioning-request",
    "kueue.x-k8s.io/multikueue",
];

/// Something an apply step waits for.
enum Wait<'x> {
    Established(&'x str),
    ManagerAvailable,
    JobSetControllerAvailable,
    AdmissionCheckActive {
        api_version: &'x str,
        name: &'x str,
    },
    Gone {
        info: &'x ResourceInfo,
        namespace: Option<&'x str>,
        name: &'x str,
    },
}

impl Wait<'_> {
    fn describe(&self) -> String {
        match self {
            Wait::Established(name) => format!("CRD {name} to be Established"),
            Wait::ManagerAvailable => "Kueue's controller manager to become available".into(),
            Wait::JobSetControllerAvailable => format!(
                "JobSet's controller ({JOBSET_NAMESPACE}/{CONTROLLER_DEPLOYMENT}) to become available (its webhooks refuse JobSets until it serves them)"
            ),
            Wait::AdmissionCheckActive { name, .. } => {
                format!("AdmissionCheck {name} to become Active")
            }
            Wait::Gone { info, name, .. } => format!(
                "{} {name} to be deleted (Kueue's finalizers hold it while it is in use)",
                info.kind
            ),
        }
    }
}

#[async_trait::async_trait]
impl KubeApplier for KubeAdapter<'_> {
    async fn list(&self, api_version: &str, kind: &str) -> Result<Vec<Value>, KubeApplyError> {
        match self
            .api
            .resource(api_version, kind)
            .await
            .map_err(to_apply_error)?
        {
            None => Ok(Vec::new()),
            Some(info) => self
                .api
                .list(&info, &owned_selector(&self.stack))
                .await
                .map_err(to_apply_error),
        }
    }

    async fn list_each(
        &self,
        api_version: &str,
        kind: &str,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> Result<(), KubeApplyError> {
        match self
            .api
            .resource(api_version, kind)
            .await
            .map_err(to_apply_error)?
        {
            None => Ok(()),
            Some(info) => self
                .api
                .list_each(&info, &owned_selector(&self.stack), each)
                .await
                .map_err(to_apply_error),
        }
    }

    async fn get(
        &self,
        _addr: &ResourceAddr,
        object: &Value,
    ) -> Result<Option<Value>, KubeApplyError> {
        let (api_version, kind) = type_of(object);
        if crate::model::is_installation_kind(kind) {
            return install::observe_installation(self.api, object)
                .await
                .map_err(to_apply_error);
        }
        match self
            .api
            .resource(api_version, kind)
            .await
            .map_err(to_apply_error)?
        {
            None => Ok(None),
            Some(info) => self
                .api
                .get(
                    &info,
                    namespace_of(object).filter(|_| info.namespaced),
                    name_of(object),
                )
                .await
                .map_err(to_apply_error),
        }
    }

    async fn apply(&self, object: &Value, version: Option<&Version>) -> Result<(), KubeApplyError> {
        if object["kind"] == INSTALLATION_KIND {
            return self.install_kueue().await;
        }
        if object["kind"] == jobset_install::INSTALLATION_KIND {
            return self.install_jobset(object).await;
        }
        self.apply_object(object, version, self.force_conflicts)
            .await
            .map(|_| ())
    }

    /// Kueue has decided on a job when one of its Workloads (by the one rule, as
    /// [`Self::workloads_of`] reads them) has a `QuotaReserved` condition of either status
    /// (reserved, or `Pending` with a scheduling attempt's reason) or an `Admitted` one.
    async fn kueue_decided(&self, object: &Value) -> Result<Option<bool>, KubeApplyError> {
        let (api_version, kind) = type_of(object);
        let info = self.info(api_version, kind).await?;
        let namespace = namespace_of(object).filter(|_| info.namespaced);
        let Some(job) = self
            .api
            .get(&info, namespace, name_of(object))
            .await
            .map_err(to_apply_error)?
        else {
            return Ok(None);
        };
        if uid_of(&job).is_empty() {
            return Ok(None);
        }
        let Ok(info) = self.info(KUEUE_API, "Workload").await else {
            return Ok(None);
        };
        let runs = self.runs_of(job).await?;
        let workloads = self.workloads_of(&info, &runs).await?;
        Ok(Some(workloads.iter().any(shows_decision)))
    }

    /// Watches Kueue's Workloads in the job's namespace from now ([`KubeApi::watch_from_now`]),
    /// waking for each one that may be the job's (owned by its kind and name, or, for a RayJob,
    /// by a RayCluster, as `placement::job_workload` attributes them) and shows a decision.
    async fn follow_decisions(&self, object: &Value) -> Option<super::Wakes> {
        let namespace = namespace_of(object)?;
        let info = self.info(KUEUE_API, "Workload").await.ok()?;
        let changes = match self.api.watch_from_now(&info, namespace).await {
            Ok(changes) => changes?,
            Err(e) => {
                tracing::debug!(
                    "watching Kueue's Workloads in {namespace}: {e}; reading the decision every poll instead"
                );
                return None;
            }
        };
        let (kind, name) = (type_of(object).1.to_string(), name_of(object).to_string());
        let job =
            serde_json::json!({"kind": kind, "metadata": {"namespace": namespace, "name": name}});
        let may_be_the_jobs = move |workload: &Value| {
            !JobWorkloads::new([workload]).all_of(&job).is_empty()
                || (kind == "RayJob"
                    && crate::vocab::object::owners(workload).any(|o| o["kind"] == "RayCluster"))
        };
        let wakes = changes
            // An error ends the watch: the wait reads every poll from then on.
            .take_while(|change| std::future::ready(change.is_ok()))
            .filter_map(move |change| {
                let wake = change
                    .ok()
                    .filter(|w| shows_decision(w) && may_be_the_jobs(w))
                    .map(|_| ());
                std::future::ready(wake)
            });
        Some(wakes.boxed())
    }

    async fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        version: Option<&Version>,
    ) -> Result<(), KubeApplyError> {
        if kind == INSTALLATION_KIND {
            return Err(KubeApplyError {
                message: "gkq does not uninstall Kueue; delete the kueue-system namespace and Kueue's CRDs yourself if you mean to".into(),
                hint: None,
                changed: false,
            });
        }
        if kind == jobset_install::INSTALLATION_KIND {
            return Err(KubeApplyError::new(
                format!(
                    "gkq does not uninstall JobSet; delete the {JOBSET_NAMESPACE} namespace, JobSet's webhook configurations and its CRD yourself if you mean to"
                ),
                None,
            ));
        }
        let info = self.info(api_version, kind).await?;
        let namespace = namespace.filter(|_| info.namespaced);
        // A job's quota is free once Kueue has let go of its Workloads: what the plan's next
        // submissions count on. Which Workloads those are is read before the delete.
        let is_run = crate::addr::ResourceKind::of(api_version, kind).is_run();
        let runs = match version {
            Some(version) if is_run => Some(
                self.runs_before_delete(&info, namespace, name, &version.uid)
                    .await?,
            ),
            _ => None,
        };
        let deletion = self
            .api
            .delete(&info, namespace, name, version)
            .await
            .map_err(to_apply_error)?;
        if deletion == Deletion::Pending {
            if kind == "ClusterQueue" {
                self.refuse_to_wait_for_admitted(name).await?;
            }
            // Kueue's finalizers hold flavors, queues and checks while something still uses them.
            self.wait_for(Wait::Gone {
                info: &info,
                namespace,
                name,
            })
            .await?;
        }
        match runs {
            Some(runs) => {
                self.wait_for_release(&format!("{kind} {name}"), &runs)
                    .await
            }
            None => Ok(()),
        }
    }
}
