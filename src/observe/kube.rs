//! Reading live Kubernetes state for a plan: one label-selected list per kind (concurrently), and a
//! server-side dry-run apply for each object that is new or whose owned fields differ from live,
//! so the plan compares what the server would store (CRD defaults, webhook mutations, finalizers)
//! rather than what the spec says.
//!
//! A desired object missing from gkq's lists is either new or exists without gkq's labels. Its
//! dry run tells which: the server's answer carries a `resourceVersion` only when the object
//! exists. Only then (or when the dry run fails) is it read with a GET, so a plan of new objects
//! costs one request per object. Per-object requests run concurrently, at most
//! [`OBSERVE_CONCURRENCY`] at a time: the API server's in-flight limits and the client's
//! connections are finite, and a spec may hold thousands of objects.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use futures::future::join_all;
use serde_json::Value;

use super::cluster::read_in_world;
use crate::addr::ResourceAddr;
use crate::diff::kube::diff_object;
use crate::kube::{
    ApplyOptions, KubeApi, KubeResult, ResourceInfo, install, is_owned_by_stack, owned_selector,
};
use crate::model::DesiredState;
use crate::model::kueue_install;
use crate::model::live::{KubeLive, KubeObject, KubeSnapshot};
use crate::placement::objects::KUEUE_KINDS;

/// Most per-object requests (dry runs, GETs) a plan has in flight at once.
pub const OBSERVE_CONCURRENCY: usize = 32;

/// Kinds gkq may have created, listed even when the spec no longer has any (for prune).
fn managed_kinds() -> impl Iterator<Item = (&'static str, &'static str)> {
    [
        ("v1", "ConfigMap"),
        ("ray.io/v1", "RayJob"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("batch/v1", "Job"),
    ]
    .into_iter()
    .chain(
        KUEUE_KINDS
            .iter()
            .map(|kind| ("kueue.x-k8s.io/v1beta2", *kind)),
    )
}

fn kind_key(object: &Value) -> Option<(String, String)> {
    Some((
        object.get("apiVersion")?.as_str()?.to_string(),
        object.get("kind")?.as_str()?.to_string(),
    ))
}

/// Observes every desired object and every object gkq owns in `stack`. A kind `world` (Kueue's
/// world, read unfiltered by `observe::cluster`) already holds is taken from there, not listed
/// again.
pub async fn observe_kube(
    api: &dyn KubeApi,
    desired: &DesiredState,
    stack: &str,
    world: Option<&KubeSnapshot>,
) -> KubeResult<KubeLive> {
    let mut kinds: BTreeSet<(String, String)> = managed_kinds()
        .map(|(a, k)| (a.to_string(), k.to_string()))
        .collect();
    for o in &desired.kubernetes {
        if let Some(k) = kind_key(o)
            && k.1 != kueue_install::INSTALLATION_KIND
        {
            kinds.insert(k);
        }
    }

    // Discovery and lists, one per kind, concurrently.
    let selector = owned_selector(stack);
    let lookups = kinds.iter().map(|(api_version, kind)| {
        let selector = selector.clone();
        async move {
            let info = api.resource(api_version, kind).await?;
            let known = world
                .filter(|_| read_in_world(api_version, kind))
                .and_then(|w| w.by_kind.get(kind.as_str()));
            let objects = match (&info, known) {
                (Some(_), Some(all)) => all
                    .iter()
                    .filter(|o| is_owned_by_stack(o, stack))
                    .cloned()
                    .collect(),
                (Some(info), None) => api.list(info, &selector).await?,
                (None, _) => Vec::new(),
            };
            KubeResult::Ok(((api_version.clone(), kind.clone()), info, objects))
        }
    });
    let mut served: BTreeMap<(String, String), ResourceInfo> = BTreeMap::new();
    let mut objects: BTreeMap<ResourceAddr, KubeObject> = BTreeMap::new();
    for result in join_all(lookups).await {
        let (key, info, listed) = result?;
        if let Some(info) = info {
            served.insert(key, info);
        }
        for live in listed {
            let part_of_installation = live
                .pointer("/metadata/labels")
                .and_then(|l| l.get(kueue_install::INSTALLATION_LABEL))
                .is_some();
            if part_of_installation {
                continue;
            }
            if let Ok(addr) = ResourceAddr::from_object(&live) {
                objects.insert(
                    addr,
                    KubeObject {
                        live: Some(without_bookkeeping(live)),
                        predicted: None,
                    },
                );
            }
        }
    }

    // Desired objects: ask the server what each new or changed object would become; read the
    // ones that turn out to exist without gkq's labels. Probes borrow the listed objects and
    // return only what they learnt, so that thousands of live objects are never held twice.
    let probes = desired.kubernetes.iter().map(|object| {
        let served = &served;
        let objects = &objects;
        async move {
            let Ok(addr) = ResourceAddr::from_object(object) else {
                return KubeResult::Ok(None);
            };
            if kind_key(object).is_some_and(|k| k.1 == kueue_install::INSTALLATION_KIND) {
                let live = install::observe(api).await?;
                return Ok(Some((
                    addr,
                    Probe::Replace(KubeObject {
                        live,
                        predicted: None,
                    }),
                )));
            }
            let Some(info) = kind_key(object).and_then(|k| served.get(&k)) else {
                // Not served yet (CRD arrives with Kueue): planned from the rendered object.
                return Ok(Some((addr, Probe::Replace(KubeObject::default()))));
            };
            let get = || async {
                api.get(
                    info,
                    crate::kube::namespace_of(object)
                        .or(Some("default"))
                        .filter(|_| info.namespaced),
                    crate::kube::name_of(object),
                )
                .await
                .map(|live| live.map(without_bookkeeping))
            };
            let owned_live = objects.get(&addr).and_then(|o| o.live.as_ref());
            if let Some(live) = owned_live
                && diff_object(&addr, object, live, None).changes.is_empty()
            {
                return Ok(Some((addr, Probe::Unchanged)));
            }
            let dry_run = api
                .apply(
                    info,
                    object,
                    ApplyOptions {
                        dry_run: true,
                        force: true,
                    },
                )
                .await
                .map(without_bookkeeping)
                .map(without_status);
            let probe = match (owned_live, dry_run) {
                (Some(_), Ok(p)) => Probe::Predicted(p),
                // A new object: the server's answer has no resourceVersion.
                (None, Ok(p)) if !exists(&p) => Probe::Replace(KubeObject {
                    live: None,
                    predicted: Some(p),
                }),
                // It exists without gkq's labels: read it, for ownership and the diff.
                (None, Ok(p)) => {
                    let live = get().await?;
                    let unchanged = live
                        .as_ref()
                        .is_some_and(|l| diff_object(&addr, object, l, None).changes.is_empty());
                    Probe::Replace(KubeObject {
                        live,
                        predicted: (!unchanged).then_some(p),
                    })
                }
                // A namespace that does not exist yet, or a rejected object: the plan shows the
                // rendered object; apply reports the server's answer.
                (owned_live, Err(e)) => {
                    tracing::debug!("dry-run of {}: {e}", crate::kube::describe(object));
                    match owned_live {
                        Some(_) => Probe::Unchanged,
                        None => Probe::Replace(KubeObject {
                            live: get().await?,
                            predicted: None,
                        }),
                    }
                }
            };
            Ok(Some((addr, probe)))
        }
    });
    let probed: Vec<_> = futures::stream::iter(probes)
        .buffer_unordered(OBSERVE_CONCURRENCY)
        .collect()
        .await;
    for result in probed {
        match result? {
            None | Some((_, Probe::Unchanged)) => {}
            Some((addr, Probe::Predicted(predicted))) => {
                objects.entry(addr).or_default().predicted = Some(predicted);
            }
            Some((addr, Probe::Replace(observed))) => {
                objects.insert(addr, observed);
            }
        }
    }
    Ok(KubeLive::Observed { objects })
}

/// What probing one desired object learnt beyond the lists.
enum Probe {
    /// Nothing: the listed object (or its absence) is all there is to know.
    Unchanged,
    /// The server's answer for a listed object.
    Predicted(Value),
    /// What is known about an object the lists did not have.
    Replace(KubeObject),
}

/// Drops `metadata.managedFields`: the plan never reads it (conflicts come from the server at
/// apply time), and it is often as large as the object itself.
fn without_bookkeeping(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

/// Drops `status` from a dry-run answer: plans compare spec and metadata only, and the live
/// object keeps the status for whoever reads it.
fn without_status(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    object
}

/// Whether a dry-run answer describes an object the server already stores: the API server leaves
/// `resourceVersion` empty on a dry-run create (a store may say "0", which no stored object has).
/// Guessing "exists" wrongly costs one GET, never a wrong plan.
fn exists(predicted: &Value) -> bool {
    predicted
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty() && v != "0")
}

/// What planning sees before the cluster exists: nothing, so every object is a create.
pub fn nothing_yet() -> KubeLive {
    KubeLive::Observed {
        objects: BTreeMap::new(),
    }
}

/// Kueue's Workloads in every namespace (for the disruption guard, placement and status): one
/// list. `None` when the cluster does not serve them (Kueue is not installed).
pub async fn observe_workloads(api: &dyn KubeApi) -> KubeResult<Option<Vec<Value>>> {
    match api.resource(KUEUE_API, "Workload").await? {
        Some(info) => api.list(&info, "").await.map(Some),
        None => Ok(None),
    }
}

const KUEUE_API: &str = "kueue.x-k8s.io/v1beta2";

/// The running work `plan` would stop, read now: Kueue's Workloads and the live ResourceFlavors
/// (one list each), with `live` giving the jobs the plan replaces or deletes as apply's check
/// just read them. Apply checks this right before it acts, so that a job admitted after the
/// plan was made is not stopped without consent either.
pub async fn observe_disruptions<'j>(
    api: &dyn KubeApi,
    plan: &crate::plan::Plan,
    live: &dyn Fn(&ResourceAddr) -> Option<&'j Value>,
) -> KubeResult<Vec<crate::plan::disruption::Disruption>> {
    use crate::plan::ActionKind;
    use crate::plan::disruption::find;
    if !plan
        .changes()
        .any(|a| matches!(a.kind, ActionKind::Replace | ActionKind::Delete))
    {
        return Ok(Vec::new());
    }
    let workloads = observe_workloads(api).await?.unwrap_or_default();
    let flavors = match api.resource(KUEUE_API, "ResourceFlavor").await? {
        Some(info) => api.list(&info, "").await?,
        None => Vec::new(),
    };
    let known: Vec<&Value> = flavors
        .iter()
        .chain(plan.actions.iter().filter_map(|a| a.desired.as_ref()))
        .collect();
    let jobs = |addr: &ResourceAddr| live(addr);
    Ok(find(plan, &workloads, &jobs, known.into_iter()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::kube::KubeError;

    /// ConfigMaps only; counts requests and the most in flight at once.
    #[derive(Default)]
    struct Fake {
        stored: BTreeMap<String, Value>,
        /// Names whose dry run the server rejects.
        rejected: Vec<String>,
        calls: Mutex<BTreeMap<&'static str, usize>>,
        in_flight: AtomicUsize,
        max_in_flight: AtomicUsize,
    }

    impl Fake {
        fn count(&self, what: &'static str) -> usize {
            self.calls.lock().unwrap().get(what).copied().unwrap_or(0)
        }
        async fn call(&self, what: &'static str) {
            *self.calls.lock().unwrap().entry(what).or_default() += 1;
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::task::yield_now().await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[async_trait::async_trait]
    impl KubeApi for Fake {
        async fn resource(
            &self,
            api_version: &str,
            kind: &str,
        ) -> KubeResult<Option<ResourceInfo>> {
            Ok((kind == "ConfigMap").then(|| ResourceInfo {
                api_version: api_version.into(),
                kind: kind.into(),
                plural: "configmaps".into(),
                namespaced: true,
            }))
        }
        async fn list(&self, _: &ResourceInfo, _selector: &str) -> KubeResult<Vec<Value>> {
            self.call("list").await;
            Ok(self
                .stored
                .values()
                .filter(|o| crate::kube::is_owned(o))
                .cloned()
                .collect())
        }
        async fn get(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            name: &str,
        ) -> KubeResult<Option<Value>> {
            self.call("get").await;
            Ok(self.stored.get(name).cloned())
        }
        async fn apply(
            &self,
            _: &ResourceInfo,
            object: &Value,
            opts: ApplyOptions,
        ) -> KubeResult<Value> {
            assert!(opts.dry_run, "a plan never writes");
            self.call("dry-run").await;
            let name = crate::kube::name_of(object);
            if self.rejected.iter().any(|r| r == name) {
                return Err(KubeError::Invalid {
                    object: name.into(),
                    message: "rejected".into(),
                });
            }
            let mut out = object.clone();
            if let Some(live) = self.stored.get(name) {
                out["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
            }
            Ok(out)
        }
        async fn delete(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            _: &str,
            _: Option<&crate::kube::Version>,
        ) -> KubeResult<crate::kube::Deletion> {
            unreachable!("a plan never deletes")
        }
    }

    fn cm(name: &str, value: &str, owned: bool) -> Value {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"}, "data": {"k": value}});
        if owned {
            o["metadata"]["labels"] =
                json!({"app.kubernetes.io/managed-by": "gkq", "gkq.dev/stack": "c"});
        }
        o
    }

    fn stored(o: Value) -> Value {
        let mut o = o;
        o["metadata"]["resourceVersion"] = json!("7");
        o
    }

    use crate::model::desired_for_tests as desired;

    fn observed(live: &KubeLive, name: &str) -> KubeObject {
        let KubeLive::Observed { objects } = live else {
            panic!("not observed")
        };
        objects
            .iter()
            .find(|(a, _)| a.to_string().ends_with(&format!("/{name}")))
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| panic!("{name} not observed"))
    }

    #[tokio::test]
    async fn new_objects_cost_one_dry_run_each_and_no_get() {
        let api = Fake::default();
        let objects: Vec<Value> = (0..200)
            .map(|i| cm(&format!("cm-{i}"), "v", true))
            .collect();
        let live = observe_kube(&api, &desired(objects), "c", None)
            .await
            .unwrap();
        assert_eq!(api.count("dry-run"), 200);
        assert_eq!(api.count("get"), 0);
        let o = observed(&live, "cm-7");
        assert!(o.live.is_none() && o.predicted.is_some());
        let max = api.max_in_flight.load(Ordering::SeqCst);
        assert!(
            max <= OBSERVE_CONCURRENCY,
            "{max} requests in flight at once"
        );
    }

    #[tokio::test]
    async fn unchanged_owned_objects_cost_nothing_and_changed_ones_one_dry_run() {
        let mut api = Fake::default();
        api.stored
            .insert("same".into(), stored(cm("same", "v", true)));
        api.stored
            .insert("edited".into(), stored(cm("edited", "old", true)));
        let want = vec![cm("same", "v", true), cm("edited", "new", true)];
        let live = observe_kube(&api, &desired(want), "c", None).await.unwrap();
        assert_eq!(api.count("dry-run"), 1);
        assert_eq!(api.count("get"), 0);
        assert!(observed(&live, "same").predicted.is_none());
        let edited = observed(&live, "edited");
        assert!(edited.live.is_some() && edited.predicted.is_some());
    }

    #[tokio::test]
    async fn an_object_without_gkqs_labels_is_read_once_the_dry_run_shows_it_exists() {
        let mut api = Fake::default();
        api.stored
            .insert("theirs".into(), stored(cm("theirs", "v", false)));
        let live = observe_kube(&api, &desired(vec![cm("theirs", "v", true)]), "c", None)
            .await
            .unwrap();
        assert_eq!((api.count("dry-run"), api.count("get")), (1, 1));
        let o = observed(&live, "theirs");
        assert!(
            !crate::kube::is_owned(o.live.as_ref().unwrap()),
            "the live object, not the dry run"
        );
    }

    #[tokio::test]
    async fn a_rejected_dry_run_falls_back_to_a_get() {
        let mut api = Fake {
            rejected: vec!["bad".into(), "bad-existing".into()],
            ..Default::default()
        };
        api.stored.insert(
            "bad-existing".into(),
            stored(cm("bad-existing", "v", false)),
        );
        let want = vec![cm("bad", "v", true), cm("bad-existing", "w", true)];
        let live = observe_kube(&api, &desired(want), "c", None).await.unwrap();
        assert_eq!((api.count("dry-run"), api.count("get")), (2, 2));
        assert!(observed(&live, "bad").live.is_none());
        let o = observed(&live, "bad-existing");
        assert!(o.live.is_some() && o.predicted.is_none());
    }
}
