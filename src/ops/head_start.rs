//! What a plan reads that its spec does not decide, started before the spec is loaded: with a
//! kubeconfig, its client, API discovery of the kinds every plan lists, and Kueue's world (one
//! unselected list per kind). When the spec's head names the stack
//! ([`super::load::SpecSource::stack_hint`]), the lists of what gkq owns in it start too. The
//! spec is loaded and validated meanwhile; the plan then takes over the client, the world as
//! read, and the stack's lists if the whole spec names the same stack
//! ([`super::plan::plan_started`]). Each list is sent once either way.
//!
//! Only reads start early, and nothing that was read is shown when the spec turns out invalid:
//! the spec's diagnostics are what the command says, as without a head start. The client's own
//! error (an unreadable kubeconfig) is told where connecting would have told it, after the spec
//! is known to be valid.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::session::TargetOptions;
use crate::kube::KubeApi;
use crate::kube::KubeResult;
use crate::kube::client::RealKube;
use crate::kube::owned_selector;
use crate::kube::reads::{Prefetched, Reads, Recording};
use crate::model::live::KubeSnapshot;
use crate::observe::cluster::{read_in_world, read_kueue_world_as};
use crate::observe::kube::managed_kinds;

/// Kueue's world as read early, and what reading it read ([`Recording`]).
type WorldRead = (KubeResult<KubeSnapshot>, Reads);

/// Kueue's world held as JSON text until the plan takes it over: it is read while the spec
/// loads, when the spec's document tree, its manifests and the rendered objects are all alive,
/// and as trees it would add to that peak (about 7 MB at 1,000 objects, 34 MB at 5,000). Each
/// object is written out as its list is read ([`read_kueue_world_as`]), so no list is ever held
/// whole as trees beside the spec's load in the one heap both use, which made a plan's peak
/// vary by up to 5 MB at 1,000 objects and 30 MB at 5,000 (BENCHMARKS.md, eighth round). Each
/// kind's objects go one after another into one buffer: two growing allocations per kind.
/// Objects read once the spec's documents are gone ([`HeadStart::spec_released`]) are kept as
/// read: the plan would make the same trees of them.
type WorldText = BTreeMap<&'static str, KindText>;

/// [`WorldRead`] with the world as text.
type TextRead = (KubeResult<WorldText>, Reads);

/// One kind's objects as JSON text, one after another, then those read after the spec's
/// documents were released, as read.
#[derive(Default)]
struct KindText {
    text: Vec<u8>,
    /// Where each object's text ends in `text`.
    ends: Vec<usize>,
    /// The objects read after the spec's documents were released (all after those in `text`:
    /// the release happens once).
    trees: Vec<serde_json::Value>,
}

impl KindText {
    fn push(&mut self, object: serde_json::Value, as_text: bool) {
        if !as_text {
            self.trees.push(object);
            return;
        }
        // Writing a `Value` to memory cannot fail.
        let _ = serde_json::to_writer(&mut self.text, &object);
        self.ends.push(self.text.len());
    }

    /// The objects again, in the order read; each text is a serialized `Value`, so it always
    /// reads back.
    fn objects(self) -> Vec<serde_json::Value> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let spans: Vec<(usize, usize)> = starts.zip(self.ends.iter().copied()).collect();
        let mut objects = crate::observe::on_two_threads(&spans, |&(start, end)| {
            serde_json::from_slice(&self.text[start..end]).unwrap_or_default()
        });
        objects.extend(self.trees);
        objects
    }
}

/// The world again, as trees.
fn from_text(world: WorldText) -> KubeSnapshot {
    let by_kind = world
        .into_iter()
        .map(|(kind, texts)| (kind, texts.objects()))
        .collect();
    KubeSnapshot { by_kind }
}

/// Reads started before the spec is loaded (see the module docs). Dropping it stops what is
/// still in flight.
#[derive(Default)]
pub struct HeadStart {
    /// The kubeconfig's client as built (or why not); `None` without a kubeconfig.
    kube: Option<oneshot::Receiver<anyhow::Result<Option<RealKube>>>>,
    /// Kueue's world, being read through that client.
    world: Option<JoinHandle<Option<TextRead>>>,
    /// The objects gkq owns in the stack the spec's head names, being listed through it.
    owned: Option<oneshot::Receiver<Prefetched>>,
    /// Whether the spec's documents were released: the world is held as text until then.
    spec_released: Arc<AtomicBool>,
}

impl HeadStart {
    /// Starts the reads `target` allows before its spec is known: with a kubeconfig (or a
    /// context), its client, discovery of the kinds every plan lists and Kueue's world. Without
    /// one, nothing (how Kubernetes is reached depends on the spec's cluster). Needs a Tokio
    /// runtime.
    ///
    /// When `stack` names one (the stack the spec's head names:
    /// [`super::load::SpecSource::stack_hint`], asked only with a kubeconfig), the lists of what
    /// gkq owns in it, of the kinds every plan lists outside Kueue's world, start too; the plan
    /// takes them only if the whole spec names the same stack ([`HeadStart::owned`]).
    pub fn start(target: &TargetOptions, stack: impl FnOnce() -> Option<String>) -> Self {
        if target.kubeconfig.is_none() && target.context.is_none() {
            return HeadStart::default();
        }
        let stack = stack();
        let (built, kube) = oneshot::channel();
        let (listed, owned) = match stack {
            Some(stack) => {
                let (listed, owned) = oneshot::channel();
                (Some((listed, stack)), Some(owned))
            }
            None => (None, None),
        };
        let target = target.clone();
        let spec_released = Arc::new(AtomicBool::new(false));
        let released = spec_released.clone();
        let world = tokio::spawn(async move {
            crate::gke::install_tls_provider();
            let client = match super::session::kubeconfig(&target).await {
                Ok(Some(client)) => client,
                other => {
                    let _ = built.send(other);
                    return None;
                }
            };
            let recording = Recording::new(&client);
            let keep = |kind: &mut KindText, object| {
                kind.push(object, !released.load(Ordering::Acquire));
            };
            let world = read_kueue_world_as(&recording, &keep);
            // Discovery of the other kinds every plan lists, before the client is handed
            // over, so that the plan finds them known and never discovers a kind twice.
            let discovered = discover_listed_kinds(&client);
            let (world, ()) = futures::join!(world, async {
                discovered.await;
                let _ = built.send(Ok(Some(client.clone())));
                if let Some((listed, stack)) = listed
                    && let Some(prefetched) = list_owned_early(&client, stack).await
                {
                    let _ = listed.send(prefetched);
                }
            });
            Some((world, recording.reads()))
        });
        HeadStart {
            kube: Some(kube),
            world: Some(world),
            owned,
            spec_released,
        }
    }

    /// Says that the spec's documents are released: the rest of the world is kept as read.
    pub fn spec_released(&self) {
        self.spec_released.store(true, Ordering::Release);
    }

    /// What gkq owns in `stack` as listed early, and the reads that listed it; `None` when no
    /// such lists were started, one failed, or they were made for another stack (the spec's
    /// head said otherwise than the whole spec).
    pub async fn owned(&mut self, stack: &str) -> Option<Prefetched> {
        let prefetched = self.owned.take()?.await.ok()?;
        (prefetched.stack == stack).then_some(prefetched)
    }

    /// The kubeconfig's client, once built: `None` when no head start was made (the session
    /// builds its own).
    pub async fn kube(&mut self) -> Option<anyhow::Result<Option<RealKube>>> {
        let receiver = self.kube.take()?;
        Some(receiver.await.unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "building the Kubernetes client from the kubeconfig stopped"
            ))
        }))
    }

    /// Kueue's world as read through the head start's client, and the reads that made it (for
    /// the plan's record); `None` when no world read was started or it did not finish.
    pub async fn world(&mut self) -> Option<WorldRead> {
        let (world, reads) = self.world.take()?.await.ok().flatten()?;
        Some((world.map(from_text), reads))
    }
}

impl Drop for HeadStart {
    fn drop(&mut self) {
        if let Some(world) = &self.world {
            world.abort();
        }
    }
}

/// Lists what gkq owns in `stack` of each kind a plan lists outside Kueue's world, as the
/// plan's own lists would (`observe::kube`), recording the reads; `None` when one fails (the
/// plan lists again and meets the error itself).
async fn list_owned_early(client: &RealKube, stack: String) -> Option<Prefetched> {
    let recording = Recording::new(client);
    let selector = owned_selector(&stack);
    let lists = listed_outside_world().map(|(api_version, kind)| {
        let (recording, selector) = (&recording, &selector);
        async move {
            let Some(info) = recording.resource(api_version, kind).await? else {
                return KubeResult::Ok(None);
            };
            let objects = recording.list(&info, selector).await?;
            Ok(Some((info, objects)))
        }
    });
    let mut listed = Vec::new();
    for list in futures::future::join_all(lists).await {
        if let Some((info, objects)) = list.ok()? {
            listed.push((info, selector.clone(), objects));
        }
    }
    Some(Prefetched {
        stack,
        lists: listed,
        reads: recording.reads(),
    })
}

/// The kinds every plan lists outside Kueue's world (with the stack's selector).
fn listed_outside_world() -> impl Iterator<Item = (&'static str, &'static str)> {
    managed_kinds().filter(|(api_version, kind)| !read_in_world(api_version, kind))
}

/// Discovers every kind a plan lists outside Kueue's world (the world's read discovers its own).
async fn discover_listed_kinds(client: &RealKube) {
    // An error is the plan's to meet again, and report, when it lists the kind.
    let kinds = listed_outside_world();
    futures::future::join_all(kinds.map(|(api_version, kind)| client.resource(api_version, kind)))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The world held as text, then as read once the spec was released, reads back as it was
    /// read: in order, fields in their order.
    #[test]
    fn the_world_held_as_text_reads_back_as_read() {
        let queue = serde_json::json!({"kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"resourceGroups": [{"flavors": [{"name": "f", "resources":
                [{"name": "cpu", "nominalQuota": "10"}]}]}]}, "status": {"pendingWorkloads": 2}});
        let mut queues = KindText::default();
        queues.push(queue.clone(), true);
        let mut second = queue.clone();
        second["metadata"]["name"] = "r".into();
        queues.push(second.clone(), false);
        let mut world = WorldText::new();
        world.insert("ClusterQueue", queues);
        world.insert("Workload", KindText::default());
        let again = from_text(world);
        assert_eq!(
            again.by_kind.keys().copied().collect::<Vec<_>>(),
            ["ClusterQueue", "Workload"]
        );
        assert_eq!(
            serde_json::to_string(&again.by_kind["ClusterQueue"]).unwrap(),
            serde_json::to_string(&[queue, second]).unwrap()
        );
    }
}
