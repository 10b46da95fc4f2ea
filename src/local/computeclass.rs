//! GKE's node-pool auto-creation for custom ComputeClasses, simulated (design
//! docs/design/capacity-ladder.md, section 7; GKE's rules in docs/gke-facts.md, L1 and L2). A
//! job whose admitted podsets went to a flavor selecting a ComputeClass
//! (`placement::pools::FlavorNodes::ComputeClass`) gets a node pool of the first of the class's
//! `priorities` that can serve its podsets (machine, TPU type and topology, GPU type) and can
//! obtain all the nodes they need now (`GKQ_LOCAL_CAPACITY`, by the pool's name, else the
//! priority's kind read from its `reservations` / `flexStart` / `spot` fields). The pool is
//! named `gk-<class>-<priority + 1>` (`model::ladder::computeclass::auto_pool_name`), labelled
//! and tainted with the class, and grows by the simulated cluster autoscaler like any other.
//! When no priority can be obtained the pods stay pending with a `FailedScaleUp` event
//! (`whenUnsatisfiable: DoNotScaleUp`). A pool whose jobs are gone and which has no nodes left
//! (the autoscaler removes idle nodes after its scale-down delay) is deleted.
//!
//! Not simulated: the five-minute cooldown before GKE tries a failed priority again (a job is
//! placed again only while it waits), flex-start budgets of priorities, `ScaleUpAnyway`,
//! hand-made pools joining a class, and `activeMigration`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::autoscaler::{FAILED_SCALE_UP, obtainable, record_event};
use super::controller::{Ctx, Outcome};
use super::nodes::{AutoPool, Pods, PoolInfo, all_pools, node_keys};
use crate::model::ladder::computeclass::{API_VERSION, KIND, auto_pool_name};
use crate::placement::PendingWorkload;
use crate::placement::pools::{FlavorNodes, flavor_nodes};
use crate::spec::types::RungKind;
use crate::vocab::labels::{GPU_ACCELERATOR_LABEL, TPU_ACCELERATOR_LABEL, TPU_TOPOLOGY_LABEL};
use crate::vocab::quantity::Quantity;

/// The podsets of one run that go to a ComputeClass: the class and the pods.
struct ClassDemand {
    class: String,
    pods: Vec<ClassPods>,
}

/// Pods of one podset: how many, each one's requests, and the node labels it selects.
struct ClassPods {
    count: i64,
    requests: BTreeMap<String, Quantity>,
    selector: BTreeMap<String, String>,
}

/// The controller: pools for the jobs waiting on a class, and the pools no job needs removed.
pub fn reconcile(ctx: &mut Ctx<'_>) -> Outcome {
    let mut changed = forget_gone(ctx);
    let classes: BTreeMap<String, Value> = ctx
        .store
        .of_kind(super::store::group_of(API_VERSION), KIND)
        .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
        .map(|c| (crate::vocab::object::name_of(c).to_string(), c.clone()))
        .collect();
    if classes.is_empty() {
        return Outcome { changed };
    }
    let mut waiting: Vec<(u64, String)> = ctx
        .sim
        .runs
        .iter()
        .filter(|(uid, r)| r.scheduled_ms.is_none() && !ctx.sim.auto_pools.jobs.contains_key(*uid))
        .map(|(uid, r)| (r.admitted_ms, uid.clone()))
        .collect();
    waiting.sort();
    for (_, job_uid) in waiting {
        let Some(demand) = class_demand(ctx, &job_uid) else {
            continue;
        };
        let Some(class) = classes.get(&demand.class) else {
            let why = format!("ComputeClass {} does not exist (simulated)", demand.class);
            changed |= record_event(ctx, &job_uid, FAILED_SCALE_UP, &why);
            continue;
        };
        changed |= place(ctx, &job_uid, class, &demand);
    }
    Outcome { changed }
}

/// Forgets the pools of jobs whose run ended (or whose job is gone), and deletes auto-created
/// pools that no job uses and that hold no nodes.
fn forget_gone(ctx: &mut Ctx<'_>) -> bool {
    let startup = ctx.settings.ray_startup_ms;
    let now = ctx.now;
    let live: BTreeSet<String> = ctx
        .sim
        .runs
        .iter()
        .filter(|(_, r)| r.finished_ms(startup).is_none_or(|t| t > now))
        .map(|(uid, _)| uid.clone())
        .collect();
    let auto = &mut ctx.sim.auto_pools;
    let before = (auto.jobs.len(), auto.pools.len());
    auto.jobs.retain(|uid, _| live.contains(uid));
    let used: BTreeSet<String> = auto.jobs.values().cloned().collect();
    let empty: Vec<String> = auto
        .pools
        .keys()
        .filter(|name| !used.contains(*name))
        .filter(|name| node_keys(ctx.store, name).is_empty())
        .filter(|name| !ctx.sim.starting.iter().any(|s| &s.pool == *name))
        .cloned()
        .collect();
    let auto = &mut ctx.sim.auto_pools;
    for name in empty {
        auto.pools.remove(&name);
    }
    before != (auto.jobs.len(), auto.pools.len())
}

/// The podsets of a run that Kueue admitted to a flavor selecting a ComputeClass.
fn class_demand(ctx: &Ctx<'_>, job_uid: &str) -> Option<ClassDemand> {
    let run = ctx.sim.runs.get(job_uid)?;
    let job = ctx.store.get(&run.job_key())?;
    let owned =
        super::workload::current_runs(ctx.store.of_kind("kueue.x-k8s.io", "Workload"), [job]);
    let workload = ctx.store.get(owned.get(job_uid)?)?;
    let pending = PendingWorkload::from_object(workload).ok()?;
    let flavors = flavor_nodes(ctx.store.of_kind("kueue.x-k8s.io", "ResourceFlavor"));
    let assignments = workload
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)?;
    let mut class = None;
    let mut pods = Vec::new();
    for pod_set in &pending.pod_sets {
        let assigned = assignments
            .iter()
            .find(|a| a["name"] == pod_set.name.as_str())
            .and_then(|a| a["flavors"].as_object());
        let selects =
            assigned
                .into_iter()
                .flatten()
                .find_map(|(_, f)| match flavors.get(f.as_str()?)? {
                    FlavorNodes::ComputeClass(c) => Some(c.clone()),
                    FlavorNodes::Pool(_) => None,
                });
        let Some(selected) = selects else { continue };
        class.get_or_insert(selected);
        pods.push(ClassPods {
            count: i64::from(pod_set.count),
            requests: pod_set.requests.clone(),
            selector: pod_set.node_selector.clone(),
        });
    }
    Some(ClassDemand {
        class: class?,
        pods,
    })
}

/// Walks the class's priorities for one job: the first that serves its pods and can obtain
/// their nodes gets (or keeps) its pool and the job; none: `FailedScaleUp`.
fn place(ctx: &mut Ctx<'_>, job_uid: &str, class: &Value, demand: &ClassDemand) -> bool {
    let priorities = class
        .pointer("/spec/priorities")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut skipped = Vec::new();
    for (index, priority) in priorities.iter().enumerate() {
        let name = auto_pool_name(&demand.class, index);
        let pool = match priority_pool(&demand.class, index, priority, &demand.pods) {
            Ok(pool) => pool,
            Err(why) => {
                skipped.push(format!("priority {}: {why}", index + 1));
                continue;
            }
        };
        let info = pool.info(&name);
        let pods: Pods = demand
            .pods
            .iter()
            .map(|p| (p.count, p.requests.clone()))
            .collect();
        let needed = info.nodes_for(&pods);
        let idle = idle_nodes(ctx, &info);
        let mut pools = all_pools(ctx.pools, &ctx.sim.auto_pools);
        if !pools.iter().any(|p| p.name == name) {
            pools.push(info.clone());
        }
        let obtainable = obtainable(ctx, &pools, &info);
        let slice = info.slice_nodes().max(1);
        let new_nodes = ((needed - idle).max(0) + slice - 1) / slice * slice;
        if obtainable.room.is_some_and(|room| room < new_nodes) {
            skipped.push(format!(
                "priority {} ({}): {}",
                index + 1,
                pool.kind.as_str(),
                super::autoscaler::stockout(&info, new_nodes, 0, obtainable.entry.as_deref())
            ));
            continue;
        }
        ctx.sim.auto_pools.pools.entry(name.clone()).or_insert(pool);
        ctx.sim.auto_pools.jobs.insert(job_uid.to_string(), name);
        return true;
    }
    let why = format!(
        "no priority of ComputeClass {} could be obtained (whenUnsatisfiable: DoNotScaleUp; simulated): {}",
        demand.class,
        if skipped.is_empty() {
            "it has no priorities".to_string()
        } else {
            skipped.join("; ")
        }
    );
    // The job's own status says it waits for the class's nodes (`ray::schedule`); the event
    // says why.
    record_event(ctx, job_uid, FAILED_SCALE_UP, &why)
}

/// Nodes of an existing auto-created pool that no other job's pods hold (approximately: its
/// nodes and starting nodes less what the jobs already given the pool need).
fn idle_nodes(ctx: &Ctx<'_>, pool: &PoolInfo) -> i64 {
    if !ctx.sim.auto_pools.pools.contains_key(&pool.name) {
        return 0;
    }
    let held = node_keys(ctx.store, &pool.name).len() as i64
        + ctx
            .sim
            .starting
            .iter()
            .filter(|s| s.pool == pool.name)
            .map(|s| s.count)
            .sum::<i64>();
    let used: i64 = ctx
        .sim
        .auto_pools
        .jobs
        .iter()
        .filter(|(_, p)| **p == pool.name)
        .filter_map(|(uid, _)| class_demand(ctx, uid))
        .map(|d| {
            let pods: Pods = d
                .pods
                .iter()
                .map(|p| (p.count, p.requests.clone()))
                .collect();
            pool.nodes_for(&pods)
        })
        .sum();
    (held - used).max(0)
}

/// The pool a priority would make, if it can serve every podset: its machine, and a TPU or
/// GPU matching what the podsets select and request.
fn priority_pool(
    class: &str,
    index: usize,
    priority: &Value,
    pods: &[ClassPods],
) -> Result<AutoPool, String> {
    let machine_type = priority["machineType"]
        .as_str()
        .ok_or("no machineType (the simulation creates pools of one machine type)")?;
    let tpu_type = priority.pointer("/tpu/type").and_then(Value::as_str);
    let topology = priority.pointer("/tpu/topology").and_then(Value::as_str);
    let gpu_type = priority.pointer("/gpu/type").and_then(Value::as_str);
    for p in pods {
        let wants = |resource: &str| {
            p.requests
                .get(resource)
                .is_some_and(|q| *q != Quantity::ZERO)
        };
        if wants(crate::vocab::labels::TPU_RESOURCE) && tpu_type.is_none() {
            return Err("the pods request TPUs and the priority has none".into());
        }
        if wants("nvidia.com/gpu") && gpu_type.is_none() {
            return Err("the pods request GPUs and the priority has none".into());
        }
        for (label, offered) in [
            (TPU_ACCELERATOR_LABEL, tpu_type),
            (TPU_TOPOLOGY_LABEL, topology),
            (GPU_ACCELERATOR_LABEL, gpu_type),
        ] {
            if let Some(selected) = p.selector.get(label)
                && offered != Some(selected.as_str())
            {
                return Err(format!(
                    "the pods select {label}={selected}, the priority offers {}",
                    offered.unwrap_or("none")
                ));
            }
        }
    }
    Ok(AutoPool {
        class: class.to_string(),
        priority: index,
        machine_type: machine_type.to_string(),
        tpu_topology: topology.map(str::to_string),
        kind: priority_kind(priority),
    })
}

/// The kind of capacity a priority asks for, from its own fields (docs/gke-facts.md, L1):
/// `reservations` with `Specific` affinity, `flexStart.enabled`, `spot`, else on-demand.
fn priority_kind(priority: &Value) -> RungKind {
    if priority
        .pointer("/reservations/affinity")
        .and_then(Value::as_str)
        == Some("Specific")
    {
        RungKind::Reservation
    } else if priority.pointer("/flexStart/enabled") == Some(&Value::Bool(true)) {
        RungKind::FlexStart
    } else if priority["spot"] == Value::Bool(true) {
        RungKind::Spot
    } else {
        RungKind::OnDemand
    }
}

/// The pool of a job's podsets that go to `class`: the one it was given, else a name no pool
/// has, so that the job waits (`ComputeClass <class>`).
pub fn job_pool(ctx: &Ctx<'_>, job_uid: &str, class: &str) -> String {
    ctx.sim
        .auto_pools
        .jobs
        .get(job_uid)
        .filter(|pool| {
            ctx.sim
                .auto_pools
                .pools
                .get(*pool)
                .is_some_and(|p| p.class == class)
        })
        .cloned()
        .unwrap_or_else(|| format!("ComputeClass {class}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods(selector: &[(&str, &str)], tpu: i64) -> Vec<ClassPods> {
        let mut requests = BTreeMap::new();
        if tpu > 0 {
            requests.insert(
                crate::vocab::labels::TPU_RESOURCE.to_string(),
                Quantity::from_json(&json!(tpu)).unwrap(),
            );
        }
        vec![ClassPods {
            count: 4,
            requests,
            selector: selector
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }]
    }

    #[test]
    fn a_priority_serves_only_the_shape_its_pods_select() {
        let multi = json!({"machineType": "ct6e-standard-4t", "spot": true,
            "tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"}});
        let single = json!({"machineType": "ct6e-standard-4t",
            "reservations": {"affinity": "Specific", "specific": [{"name": "r"}]},
            "tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "2x2"}});
        let wants = pods(&[(TPU_TOPOLOGY_LABEL, "4x4")], 4);
        let pool = priority_pool("c", 1, &multi, &wants).unwrap();
        assert_eq!((pool.kind, pool.priority), (RungKind::Spot, 1));
        assert_eq!(pool.info("gk-c-2").slice_nodes(), 4);
        let refused = priority_pool("c", 0, &single, &wants).unwrap_err();
        assert!(refused.contains("4x4"), "{refused}");
        assert_eq!(priority_kind(&single), RungKind::Reservation);
        let cpu = json!({"machineType": "n2-standard-16"});
        assert!(priority_pool("c", 0, &cpu, &wants).is_err());
        assert_eq!(
            priority_kind(&json!({"flexStart": {"enabled": true}})),
            RungKind::FlexStart
        );
        assert_eq!(priority_kind(&cpu), RungKind::OnDemand);
    }
}
