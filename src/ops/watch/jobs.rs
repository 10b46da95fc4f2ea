//! Following the jobs a watch applied: each job's admission stage, stuck warnings, and how
//! Kueue's placement compares with the recorded prediction.

use std::collections::BTreeMap;

use serde_json::Value;

use super::pools::pool_sizes;
use super::{WatchEvent, Watcher};
use crate::model::live::KubeSnapshot;
use crate::observe::cluster::{EVENT, JOB_TIMELINE_KINDS, read_kinds, workloads_only};
use crate::ops::status::recorded_placements;
use crate::placement::job_workload::JobWorkloads;
use crate::placement::provisioning::RequestsByOwner;
use crate::report::rung::rung_text;
use crate::report::status::live_rung;
use crate::report::status::{PlacedComparison, placed_comparisons};
use crate::report::timeline::{self, Capacity, JobState};
use crate::vocab::object::{name_of, namespace_of};

impl Watcher<'_> {
    /// Reads the jobs' Kueue and KubeRay state and tells each job whose stage changed, and each
    /// stuck state once. `just_planned`: the last plan was made just now, so the Workloads it read
    /// are current and are not read again; between plans they are read afresh.
    pub(super) async fn refresh_jobs(&mut self, just_planned: bool) {
        if just_planned && let Some(planned) = &self.last {
            // Records change only when an apply ends, and every apply is followed by a plan.
            self.records =
                recorded_placements(planned.kube().api(), &planned.plan.cluster.cluster).await;
        }
        let (states, comparisons, rungs) = match self.job_states(just_planned).await {
            Some(read) => read,
            None => {
                self.jobs_in_flight = false;
                return;
            }
        };
        for comparison in &comparisons {
            if self.placed.get(&comparison.job) != Some(comparison) {
                self.placed
                    .insert(comparison.job.clone(), comparison.clone());
                self.sink.event(WatchEvent::JobPlaced(comparison));
            }
        }
        for state in &states {
            let mut stage = state.stage.to_string();
            if let Some(rung) = rungs.get(&state.job) {
                stage = format!("{stage}; ladder: {rung}");
            }
            if self.job_lines.get(&state.job) != Some(&stage) {
                self.job_lines.insert(state.job.clone(), stage.clone());
                self.sink.event(WatchEvent::JobStage {
                    job: &state.job,
                    stage: stage.clone(),
                });
            }
            if let Some(warning) = &state.warning
                && self.warned.insert((state.job.clone(), stage))
            {
                self.sink.event(WatchEvent::JobStuck {
                    job: &state.job,
                    warning,
                });
            }
        }
        self.jobs_in_flight = states.iter().any(|s| !s.stage.is_finished());
    }

    /// Each of the stack's jobs' admission timeline, and how each job Kueue placed compares
    /// with its record; `None` when Kubernetes cannot be read.
    async fn job_states(
        &self,
        just_planned: bool,
    ) -> Option<(
        Vec<JobState>,
        Vec<PlacedComparison>,
        BTreeMap<String, String>,
    )> {
        let planned = self.last.as_ref()?;
        let kube = planned.kube();
        let api = kube.api()?;
        let known = match (&planned.world, just_planned) {
            (Some(world), true) => workloads_only(world),
            _ => KubeSnapshot::default(),
        };
        let snapshot = match read_kinds(api, &JOB_TIMELINE_KINDS, known).await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::debug!("job timeline unavailable: {e}");
                return None;
            }
        };
        let stack = &planned.plan.cluster.cluster;
        // The stack's jobs of every kind (RayJobs, JobSets, batch Jobs).
        let jobs: Vec<Value> = ["RayJob", "JobSet", "Job"]
            .iter()
            .flat_map(|kind| snapshot.kind(kind))
            .filter(|job| crate::kube::is_owned_by_stack(job, stack))
            .cloned()
            .collect();
        let capacity = Capacity {
            flavor_pools: timeline::flavor_pools(planned.desired.kube_objects()),
            pools: pool_sizes(&planned.desired.gke.node_pools, snapshot.kind("Node")),
        };
        let states = timeline::job_states(
            &jobs,
            snapshot.kind("Workload"),
            snapshot.kind("ProvisioningRequest"),
            &capacity,
            k8s_openapi::jiff::Timestamp::now(),
        );
        let comparisons = placed_comparisons(&jobs, snapshot.kind("Workload"), &self.records);
        let rungs = match &planned.loaded.spec.capacity {
            Some(_) => ladder_lines(api, &planned.loaded.spec, &jobs, &snapshot).await,
            None => BTreeMap::new(),
        };
        Some((states, comparisons, rungs))
    }
}

/// Each job's place on the capacity ladder as `gkq status` words it (`report::rung`), by
/// `namespace/name`: from the Workloads, ProvisioningRequests and Nodes read, and the Events
/// (read here, for a spec with a ladder only).
async fn ladder_lines(
    api: &dyn crate::kube::KubeApi,
    spec: &crate::spec::types::Spec,
    jobs: &[Value],
    snapshot: &KubeSnapshot,
) -> BTreeMap<String, String> {
    let events = match read_kinds(api, &[EVENT], KubeSnapshot::default()).await {
        Ok(read) => read.by_kind.get(EVENT.1).cloned().unwrap_or_default(),
        Err(e) => {
            tracing::debug!("capacity ladder: cannot read Events: {e}");
            return BTreeMap::new();
        }
    };
    let workloads = JobWorkloads::new(snapshot.kind("Workload"));
    let requests = RequestsByOwner::new(snapshot.kind("ProvisioningRequest"));
    let mut lines = BTreeMap::new();
    for job in jobs {
        let workload = workloads.of(job).map(|w| w.workload);
        if let Some(status) = live_rung(
            spec,
            job,
            workload,
            &requests,
            &events,
            snapshot.kind("Node"),
        ) {
            let (name, namespace) = (name_of(job), namespace_of(job).unwrap_or("default"));
            lines.insert(format!("{namespace}/{name}"), rung_text(&status));
        }
    }
    lines
}
