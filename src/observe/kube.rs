//! Reading live Kubernetes state for a plan: one label-selected list per kind (concurrently), and a
//! server-side dry-run apply for each object that is new or whose owned fields differ from live,
//! so the plan compares what the server would store (CRD defaults, webhook mutations, finalizers)
//! rather than what the spec says.
//!
//! A desired object missing from gkq's lists is either new or exists without gkq's labels. Its
//! dry run tells which: the server's answer carries a `resourceVersion` only when the object
//! exists. Only then (or when the dry run fails) is it read with a GET, so a plan of new objects
//! costs one request per object. A plan made without dry runs ([`Preview::Lists`], an apply
//! nobody reviews first) compares each object as listed and tells new objects from unowned ones
//! by one list of names per kind. Per-object requests run concurrently, at most
//! [`PER_OBJECT_CONCURRENCY`] at a time: the API server's in-flight limits and the client's
//! connections are finite, and a spec may hold thousands of objects.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::future::join_all;
use serde_json::Value;

use super::cluster::read_in_world;
use super::without_bookkeeping;
use crate::addr::ResourceAddr;
use crate::diff::kube::{ListedDiff, diff_listed_with_fingerprint, diff_object};
use crate::kube::{
    ApplyOptions, KubeApi, KubeError, KubeResult, ObjectName, PER_OBJECT_CONCURRENCY, ResourceInfo,
    install, is_owned_by_stack, owned_selector,
};
use crate::model::DesiredState;
use crate::model::kueue_install;
use crate::model::live::{KubeLive, KubeObject, KubeSnapshot};
use crate::placement::objects::KUEUE_KINDS;
use crate::plan::conflicts::{Found, Resolved, resolve};
use crate::plan::{Action, ActionKind, Fingerprint, Judge, Preview};
use crate::vocab::object::{At, Field};

/// Kinds gkq may have created, listed even when the spec no longer has any (for prune).
pub fn managed_kinds() -> impl Iterator<Item = (&'static str, &'static str)> {
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
        object.field("apiVersion")?.as_str()?.to_string(),
        object.field("kind")?.as_str()?.to_string(),
    ))
}

/// What observing the spec's Kubernetes objects learnt.
pub struct Observed {
    /// Live state: each object gkq owns that no desired object names (for prune), and, for
    /// desired objects, what [`observe_kube`]'s judge did not decide (everything, without one)
    /// or what the plan reads beyond their actions (the live job a replace stops).
    pub live: KubeLive,
    /// The actions the judge decided for desired objects as the server's answers arrived.
    pub judged: BTreeMap<ResourceAddr, Action>,
    /// Kueue's world, when [`observe_kube`] was given its read.
    pub world: Option<KubeSnapshot>,
}

/// The read of Kueue's world (`observe::cluster`), run by [`observe_kube`] beside its own lists.
pub type WorldRead<'a> = futures::future::BoxFuture<'a, KubeResult<KubeSnapshot>>;

/// Observes every desired object and every object gkq owns in `stack`. A kind `world` (the read
/// of Kueue's world, unfiltered, by `observe::cluster`) holds is taken from there, not listed
/// again. With a `judge`, each desired object's action is decided as soon as the server has
/// answered for it, and its live and dry-run trees are dropped: a plan of thousands of changed
/// objects never holds them all at once.
pub async fn observe_kube(
    api: &dyn KubeApi,
    desired: &DesiredState,
    stack: &str,
    world: Option<WorldRead<'_>>,
    judge: Option<&Judge>,
    preview: Preview,
) -> KubeResult<Observed> {
    let kinds = kinds_to_read(desired);

    // Discovery and lists, one per kind, concurrently with the world's own reads. A kind the
    // world holds is borrowed from it, not copied, once the world has been read.
    let reading_world = world.is_some();
    let in_world =
        |(api_version, kind): &&(String, String)| reading_world && read_in_world(api_version, kind);
    // With a judge, each listed object the spec names is compared as its list arrives (those
    // of the world's kinds once the world is read); an unchanged one is decided there and then
    // (most of an unchanged plan's objects).
    let wanted = Wanted {
        desired,
        by_addr: std::sync::OnceLock::new(),
    };
    let early = judge.map(|judge| (judge, &wanted));
    let read_world = async {
        let Some(reading) = world else {
            return Ok((None, Vec::new(), Vec::new()));
        };
        let world = reading.await?;
        let (decided, compared) = match early {
            Some(early) => {
                compare_in_world(&world, kinds.iter().filter(|k| in_world(k)), stack, early)
            }
            None => (Vec::new(), Vec::new()),
        };
        KubeResult::Ok((Some(world), decided, compared))
    };
    // The lists first: their requests leave before the world's objects are compared, which
    // then happens while the server answers them.
    let (outside, world_read) = futures::join!(
        list_owned(api, kinds.iter().filter(|k| !in_world(k)), stack, early),
        read_world
    );
    let (world_read, decided_in_world, compared_in_world) = world_read?;
    let (mut served, read, mut decided) = outside?;
    decided.extend(decided_in_world);
    let compared_in_world = std::sync::Mutex::new(BTreeMap::from_iter(compared_in_world));
    let from_world = match &world_read {
        Some(world) => {
            let kinds = kinds.iter().filter(|k| in_world(k));
            owned_in_world(api, world, kinds, stack, &mut served).await?
        }
        None => BTreeMap::new(),
    };
    let world = world_read.as_ref();
    let names_taken = match preview {
        Preview::DryRun => None,
        Preview::Lists => Some(
            taken_names(api, &served, desired, world, |addr| {
                read.contains_key(addr)
                    || from_world.contains_key(addr)
                    || decided.contains_key(addr)
            })
            .await?,
        ),
    };
    // A probe takes its object out of what this observer read, so that each is dropped once
    // decided; what is left is what no desired object names.
    let read = std::sync::Mutex::new(read);

    // Desired objects: ask the server what each new or changed object would become; read the
    // ones that turn out to exist without gkq's labels. Probes return only what they learnt
    // (or, with a judge, the action it decided).
    let known = Known {
        served: &served,
        from_world: &from_world,
        read: &read,
        names_taken: names_taken.as_ref(),
        decided: &decided,
        compared_in_world: &compared_in_world,
    };
    let probes = desired
        .kubernetes
        .iter()
        .map(|object| probe_desired(api, &known, judge, object));
    let probed: Vec<_> = futures::stream::iter(probes)
        .buffer_unordered(PER_OBJECT_CONCURRENCY)
        .collect()
        .await;
    let (mut objects, mut judged) = gathered(probed)?;
    judged.extend(decided);
    // What gkq owns that no desired object names: prune reads it. Only those are made into
    // trees again (from the lists' text) or copied (from the world): the others are decided.
    let read = read.into_inner().unwrap_or_default();
    let unnamed = |addr: &ResourceAddr| !objects.contains_key(addr) && !judged.contains_key(addr);
    let orphans: Vec<(ResourceAddr, Value)> = read
        .into_iter()
        .filter(|(a, _)| unnamed(a))
        .map(|(a, kept)| (a, kept.value()))
        .chain(
            from_world
                .into_iter()
                .filter(|(a, _)| unnamed(a))
                .map(|(a, l)| (a, l.clone())),
        )
        .collect();
    for (addr, live) in orphans {
        objects.entry(addr).or_insert(KubeObject {
            live: Some(live),
            predicted: None,
        });
    }
    Ok(Observed {
        live: KubeLive::Observed { objects },
        judged,
        world: world_read,
    })
}

/// The kinds an observer reads: the ones gkq may have created, and every kind of the desired
/// objects (Kueue's installation aside, which is read as one).
fn kinds_to_read(desired: &DesiredState) -> BTreeSet<(String, String)> {
    let mut kinds: BTreeSet<(String, String)> = managed_kinds()
        .map(|(a, k)| (a.to_string(), k.to_string()))
        .collect();
    for o in &desired.kubernetes {
        if let Some(k) = kind_key(o)
            && !crate::model::is_installation_kind(&k.1)
        {
            kinds.insert(k);
        }
    }
    kinds
}

/// Which kinds the server serves.
type Served = BTreeMap<(String, String), ResourceInfo>;

/// The judge and the desired objects it decides as the lists arrive.
type Early<'a> = Option<(&'a Judge, &'a Wanted<'a>)>;

/// The desired objects by address, indexed when a listed object is first looked up: the lists
/// are sent before, and the index is made while the server answers them.
struct Wanted<'a> {
    desired: &'a DesiredState,
    by_addr: std::sync::OnceLock<HashMap<ResourceAddr, &'a Arc<Value>>>,
}

impl<'a> Wanted<'a> {
    /// The desired object at `addr`, if any.
    fn get(&self, addr: &ResourceAddr) -> Option<&'a Arc<Value>> {
        let by_addr = self.by_addr.get_or_init(|| {
            self.desired
                .kubernetes
                .iter()
                .filter_map(|object| Some((ResourceAddr::from_object(object).ok()?, object)))
                .collect()
        });
        by_addr.get(addr).copied()
    }
}

/// What [`list_owned`] read: the kinds served, the objects kept for their probes (as text, see
/// [`Kept`]), and the actions decided as the lists arrived.
type Listed = (
    Served,
    BTreeMap<ResourceAddr, Kept>,
    BTreeMap<ResourceAddr, Action>,
);

/// Discovers each kind of `kinds` and lists the objects of it gkq owns in `stack`, one list per
/// kind, concurrently. With `early` (a judge), each listed object a desired object names is
/// compared with it as it is read: an unchanged one is decided then, and not kept.
async fn list_owned<'k>(
    api: &dyn KubeApi,
    kinds: impl Iterator<Item = &'k (String, String)>,
    stack: &str,
    early: Early<'_>,
) -> KubeResult<Listed> {
    let selector = owned_selector(stack);
    let listing = Mutex::new(Listing::default());
    let lists = kinds.map(|(api_version, kind)| {
        let (selector, listing) = (selector.clone(), &listing);
        async move {
            let info = api.resource(api_version, kind).await?;
            if let Some(info) = &info {
                api.list_each(info, &selector, &mut |live| {
                    let live = without_bookkeeping(live);
                    let Ok(addr) = ResourceAddr::from_object(&live) else {
                        return;
                    };
                    if part_of_installation(&live) {
                        return;
                    }
                    let mut listing = listing.lock().unwrap_or_else(|e| e.into_inner());
                    let key = (api_version, kind);
                    let Some((judge, object)) = early
                        .and_then(|(judge, wanted)| Some((judge, wanted.get(&addr)?)))
                        .filter(|(_, object)| of_kind(object, key))
                    else {
                        listing.kept.push((addr, Kept::new(&live, None)));
                        return;
                    };
                    listing.named.push((addr, object, live));
                    if listing.named.len() == COMPARED_TOGETHER {
                        listing.compare(judge);
                    }
                })
                .await?;
            }
            KubeResult::Ok(((api_version.clone(), kind.clone()), info))
        }
    });
    let mut served = Served::new();
    for result in join_all(lists).await {
        let (key, info) = result?;
        if let Some(info) = info {
            served.insert(key, info);
        }
    }
    let mut listing = listing.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some((judge, _)) = early {
        listing.compare(judge);
    }
    let read = listing.kept.into_iter().collect();
    Ok((served, read, listing.decided.into_iter().collect()))
}

/// What [`list_owned`]'s lists came to, shared by the lists of every kind: the listed objects a
/// desired object names are compared together, across kinds ([`Listing::compare`]).
#[derive(Default)]
struct Listing<'a> {
    /// Listed objects a desired object names, not yet compared with it.
    named: Vec<(ResourceAddr, &'a Arc<Value>, Value)>,
    /// Listed objects kept for their probes, with how they compared if they were.
    kept: Vec<(ResourceAddr, Kept)>,
    /// The actions of the unchanged ones.
    decided: Vec<(ResourceAddr, Action)>,
}

/// What [`compare_in_world`] found: the actions of unchanged objects, and how the others
/// compared.
type InWorld = (Vec<(ResourceAddr, Action)>, Vec<(ResourceAddr, Compared)>);

/// The desired objects of `kinds` whose live objects (gkq's, in `stack`) Kueue's world holds,
/// compared with them as [`list_owned`] compares its lists' (`early`): the actions of the
/// unchanged ones, and how the others compared. The world arrives whole, usually after the
/// server has answered every list: its objects are compared on two threads (thousands of them
/// in a large stack, and the comparison is what the plan waits for then).
fn compare_in_world<'k>(
    world: &KubeSnapshot,
    kinds: impl Iterator<Item = &'k (String, String)>,
    stack: &str,
    (judge, wanted): (&Judge, &Wanted),
) -> InWorld {
    let owned: Vec<_> = kinds
        .filter_map(|(api_version, kind)| {
            let listed = world.by_kind.get(kind.as_str())?;
            Some(listed.iter().map(move |live| ((api_version, kind), live)))
        })
        .flatten()
        .filter(|(_, live)| is_owned_by_stack(live, stack) && !part_of_installation(live))
        .collect();
    let compared = super::on_two_threads(&owned, |&(key, live)| {
        let (addr, object) = ResourceAddr::from_object(live)
            .ok()
            .and_then(|addr| Some((addr.clone(), wanted.get(&addr)?)))
            .filter(|(_, object)| of_kind(object, key))?;
        Some(match judged(judge, &addr, object, live) {
            Ok(action) => Ok((addr, action)),
            Err(compared) => Err((addr, compared)),
        })
    });
    let (mut decided, mut changed) = (Vec::new(), Vec::new());
    for result in compared.into_iter().flatten() {
        match result {
            Ok(unchanged) => decided.push(unchanged),
            Err(compared) => changed.push(compared),
        }
    }
    (decided, changed)
}

/// How many listed objects [`list_owned`] gathers before comparing them together
/// ([`Listing::compare`]): enough for two threads to pay, few enough that lists read as they
/// arrive never hold more than these as trees.
const COMPARED_TOGETHER: usize = 1024;

impl Listing<'_> {
    /// Compares the objects gathered in `named` with the desired objects that name them (on two
    /// threads when there are enough), and empties it: the unchanged ones are decided, the
    /// others kept for their probes.
    fn compare(&mut self, judge: &Judge) {
        let compared = super::on_two_threads(&self.named, |(addr, object, live)| {
            judged(judge, addr, object, live).map_err(|changed| Kept::new(live, Some(changed)))
        });
        for ((addr, _, _), result) in self.named.drain(..).zip(compared) {
            match result {
                Ok(action) => self.decided.push((addr, action)),
                Err(listed) => self.kept.push((addr, listed)),
            }
        }
    }
}

/// Whether `object` is of `(apiVersion, kind)` as listed: only then is it compared as listed
/// before its probe (an object of another version of the kind is probed as it is).
fn of_kind(object: &Value, (api_version, kind): (&String, &String)) -> bool {
    object.field("apiVersion").and_then(Value::as_str) == Some(api_version)
        && object.field("kind").and_then(Value::as_str) == Some(kind)
}

/// A desired object compared with its listed live object, without a dry run.
enum Compared {
    /// Nothing differs: the live object's fingerprint.
    Unchanged(Fingerprint),
    /// Something differs; `in_place` when no difference needs a new object (nothing says to
    /// replace it), and the live object's fingerprint.
    Changed {
        in_place: bool,
        fingerprint: Fingerprint,
    },
}

/// A desired object compared with its listed live object: the action when it is unchanged,
/// otherwise how it compared.
fn judged(
    judge: &Judge,
    addr: &ResourceAddr,
    object: &Arc<Value>,
    live: &Value,
) -> Result<Action, Compared> {
    match compare_listed(addr, object, live) {
        Compared::Unchanged(fingerprint) => {
            Ok(judge.kube_unchanged(addr, object, live, fingerprint))
        }
        changed => Err(changed),
    }
}

fn compare_listed(addr: &ResourceAddr, object: &Value, live: &Value) -> Compared {
    match diff_listed_with_fingerprint(addr, object, live) {
        ListedDiff::Unchanged(fingerprint) => Compared::Unchanged(fingerprint),
        ListedDiff::Changed(diff, fingerprint) => Compared::Changed {
            in_place: diff.replace_reasons().is_empty(),
            fingerprint,
        },
    }
}

/// The objects gkq owns in `stack` among those of `kinds` Kueue's world holds (borrowed from
/// it); each of those kinds the server serves is added to `served`.
async fn owned_in_world<'w, 'k>(
    api: &dyn KubeApi,
    world: &'w KubeSnapshot,
    kinds: impl Iterator<Item = &'k (String, String)>,
    stack: &str,
    served: &mut Served,
) -> KubeResult<BTreeMap<ResourceAddr, &'w Value>> {
    let mut from_world: BTreeMap<ResourceAddr, &Value> = BTreeMap::new();
    for (api_version, kind) in kinds {
        // Discovery of the world's kinds is cached by its read.
        let Some(info) = api.resource(api_version, kind).await? else {
            continue;
        };
        served.insert((api_version.clone(), kind.clone()), info);
        from_world.extend(
            world
                .by_kind
                .get(kind.as_str())
                .into_iter()
                .flatten()
                .filter(|live| is_owned_by_stack(live, stack) && !part_of_installation(live))
                .filter_map(|live| Some((ResourceAddr::from_object(live).ok()?, live))),
        );
    }
    Ok(from_world)
}

/// What the observer knows when it probes the desired objects.
struct Known<'a> {
    served: &'a Served,
    /// The owned objects Kueue's world holds.
    from_world: &'a BTreeMap<ResourceAddr, &'a Value>,
    /// The owned objects listed and not probed yet.
    read: &'a std::sync::Mutex<BTreeMap<ResourceAddr, Kept>>,
    /// Without dry runs: the names taken, per kind.
    names_taken: Option<&'a TakenNames>,
    /// The objects decided as their lists arrived (not probed again).
    decided: &'a BTreeMap<ResourceAddr, Action>,
    /// How the changed objects Kueue's world holds compared with their desired objects, until
    /// probed.
    compared_in_world: &'a std::sync::Mutex<BTreeMap<ResourceAddr, Compared>>,
}

/// Probes desired object `object` (`None`: it has no address): what was observed of it, or,
/// with a `judge`, the action decided for it.
async fn probe_desired(
    api: &dyn KubeApi,
    known: &Known<'_>,
    judge: Option<&Judge>,
    object: &Arc<Value>,
) -> KubeResult<Option<(ResourceAddr, Outcome)>> {
    let Ok(addr) = ResourceAddr::from_object(object) else {
        return KubeResult::Ok(None);
    };
    if known.decided.contains_key(&addr) {
        return KubeResult::Ok(None);
    }
    let (taken, compared) = known
        .read
        .lock()
        .ok()
        .and_then(|mut read| read.remove(&addr))
        .map(Kept::into_parts)
        .unzip();
    let owned_live = taken
        .as_ref()
        .or_else(|| known.from_world.get(&addr).copied());
    // Compared as listed already, or now.
    let compared = compared.flatten().or_else(|| {
        known
            .compared_in_world
            .lock()
            .ok()
            .and_then(|mut compared| compared.remove(&addr))
            .filter(|_| taken.is_none())
    });
    let compared = compared.or_else(|| owned_live.map(|live| compare_listed(&addr, object, live)));
    let force = judge.is_some_and(Judge::forces_conflicts);
    let answer = probe(
        api,
        known.served,
        object,
        &addr,
        owned_live.zip(compared),
        known.names_taken,
        force,
    )
    .await?;
    let outcome = match judge {
        None => {
            let live = match answer.read {
                Some(read) => read,
                None => owned_live.cloned(),
            };
            Outcome::Seen(KubeObject {
                live,
                predicted: answer.predicted,
            })
        }
        Some(judge) => {
            let live = match &answer.read {
                Some(read) => read.as_ref(),
                None => owned_live,
            };
            // The listed object's fingerprint stands when the listed object is the live one.
            let listed_fingerprint = answer.listed_fingerprint.filter(|_| answer.read.is_none());
            let action = match (answer.unchanged, live) {
                (Some(fingerprint), Some(live)) => {
                    judge.kube_unchanged(&addr, object, live, fingerprint)
                }
                _ => judge.kube_action_on(
                    &addr,
                    object,
                    live,
                    answer.predicted.as_ref(),
                    answer.conflicts.as_ref(),
                    listed_fingerprint,
                ),
            };
            // A replace stops the live job: the disruption check reads it.
            let keep = (action.kind == ActionKind::Replace)
                .then(|| live.cloned())
                .flatten();
            Outcome::Judged(Box::new(action), keep)
        }
    };
    Ok(Some((addr, outcome)))
}

/// The objects observed (and the live jobs the plan reads again), and the actions judged.
type Gathered = (
    BTreeMap<ResourceAddr, KubeObject>,
    BTreeMap<ResourceAddr, Action>,
);

/// The probes' outcomes sorted into [`Gathered`].
fn gathered(probed: Vec<KubeResult<Option<(ResourceAddr, Outcome)>>>) -> KubeResult<Gathered> {
    let mut objects: BTreeMap<ResourceAddr, KubeObject> = BTreeMap::new();
    let mut judged = BTreeMap::new();
    for result in probed {
        let Some((addr, outcome)) = result? else {
            continue;
        };
        match outcome {
            Outcome::Judged(action, keep) => {
                if let Some(live) = keep {
                    objects.insert(
                        addr.clone(),
                        KubeObject {
                            live: Some(live),
                            predicted: None,
                        },
                    );
                }
                judged.insert(addr, *action);
            }
            Outcome::Seen(observed) => {
                objects.insert(addr, observed);
            }
        }
    }
    Ok((objects, judged))
}

/// The names, per kind, of every existing object of the kinds of the desired objects that the
/// owned lists do not have (`owned`): a plan without dry runs learns from them whether such an
/// object is new or exists without gkq's labels. Kueue's world has every object of its kinds
/// already; any other kind costs one list of names.
async fn taken_names(
    api: &dyn KubeApi,
    served: &BTreeMap<(String, String), ResourceInfo>,
    desired: &DesiredState,
    world: Option<&KubeSnapshot>,
    owned: impl Fn(&ResourceAddr) -> bool,
) -> KubeResult<TakenNames> {
    let kinds: BTreeSet<(String, String)> = desired
        .kubernetes
        .iter()
        .filter(|object| ResourceAddr::from_object(object).is_ok_and(|addr| !owned(&addr)))
        .filter_map(|object| kind_key(object))
        .filter(|key| served.contains_key(key))
        .collect();
    let lists = kinds.into_iter().map(|key| async move {
        let known = world
            .filter(|_| read_in_world(&key.0, &key.1))
            .and_then(|w| w.by_kind.get(key.1.as_str()));
        let names: BTreeSet<ObjectName> = match (known, served.get(&key)) {
            (Some(all), _) => all.iter().map(ObjectName::of).collect(),
            (None, Some(info)) => api.list_names(info).await?.into_iter().collect(),
            (None, None) => BTreeSet::new(),
        };
        KubeResult::Ok((key, names))
    });
    join_all(lists).await.into_iter().collect()
}

/// Existing objects' names by `(apiVersion, kind)` ([`taken_names`]).
type TakenNames = BTreeMap<(String, String), BTreeSet<ObjectName>>;

/// Objects of Kueue's and JobSet's installations are planned as one (`KueueInstallation`,
/// `JobSetInstallation`), not one by one.
fn part_of_installation(live: &Value) -> bool {
    live.at("/metadata/labels")
        .and_then(|l| l.field(kueue_install::INSTALLATION_LABEL))
        .is_some()
}

/// A listed object kept as its JSON text until its probe (or prune) reads it: a plan of
/// thousands of changed objects holds every listed one until the server has answered its dry
/// run, and as text each costs a fraction of its tree. With how it compared with its desired
/// object, when it was compared as listed.
struct Kept(Box<str>, Option<Compared>);

impl Kept {
    fn new(object: &Value, compared: Option<Compared>) -> Self {
        Kept(object.to_string().into_boxed_str(), compared)
    }

    /// The object again; the text is a serialized `Value`, so it always reads back.
    fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    fn into_parts(self) -> (Value, Option<Compared>) {
        (self.value(), self.1)
    }
}

/// What probing one desired object learnt beyond the lists.
#[derive(Default)]
struct Answer {
    /// The object as read by the probe itself, when the lists do not have it (`Some(None)`: it
    /// does not exist); `None` when the listed object (or its absence) is what there is.
    read: Option<Option<Value>>,
    /// The server's dry-run answer, when it gave one and the object is not unchanged.
    predicted: Option<Value>,
    /// The live object's fingerprint, when comparing the object with its listed live state showed
    /// it unchanged and so nothing was sent.
    unchanged: Option<Fingerprint>,
    /// The listed live object's fingerprint, when it differs (it stands for the live object
    /// unless `read` has another).
    listed_fingerprint: Option<Fingerprint>,
    /// The fields another manager owns that the last dry run named (`predicted` is then the
    /// answer with force), until [`probe`] resolves them into `conflicts`.
    found: Vec<Found>,
    /// What the plan does about those fields (`predicted` is then what apply makes).
    conflicts: Option<Resolved>,
}

enum Outcome {
    /// What was observed, for the plan to decide.
    Seen(KubeObject),
    /// The judge's action, and the live object when the plan reads it again.
    Judged(Box<Action>, Option<Value>),
}

/// Asks the server about one desired object: nothing when its listed live object already
/// matches, else a server-side dry run, and a GET when the dry run shows an object the lists
/// did not have (it exists without gkq's labels) or fails.
async fn probe(
    api: &dyn KubeApi,
    served: &BTreeMap<(String, String), ResourceInfo>,
    object: &Value,
    addr: &ResourceAddr,
    listed: Option<(&Value, Compared)>,
    taken: Option<&TakenNames>,
    force: bool,
) -> KubeResult<Answer> {
    let (owned_live, compared) = listed.unzip();
    if crate::model::is_installation(object) {
        return Ok(Answer {
            read: Some(install::observe_installation(api, object).await?),
            ..Default::default()
        });
    }
    let Some(info) = kind_key(object).and_then(|k| served.get(&k)) else {
        // Not served yet (CRD arrives with Kueue): planned from the rendered object.
        return Ok(Answer {
            read: Some(None),
            ..Default::default()
        });
    };
    let (in_place, listed_fingerprint) = match compared {
        Some(Compared::Unchanged(fingerprint)) => {
            return Ok(Answer {
                unchanged: Some(fingerprint),
                ..Default::default()
            });
        }
        Some(Compared::Changed {
            in_place,
            fingerprint,
        }) => (in_place, Some(fingerprint)),
        None => (false, None),
    };
    // A job changed in place (its labels, say) is dry-run even without review: Kueue writes
    // into admitted jobs, and only the server knows which of gkq's fields it now owns.
    let job_in_place = addr.kind.is_run() && in_place;
    let answer = probe_changed(api, info, object, addr, owned_live, taken, job_in_place).await?;
    let answer = resolve_conflicts(api, info, addr, object, owned_live, answer, force).await?;
    Ok(Answer {
        listed_fingerprint,
        ..answer
    })
}

/// [`probe`] of an object that is new or differs from its listed live object (`owned_live`):
/// without a dry run (`taken`, and not a job changed in place) as listed, else the server's
/// dry-run answer.
async fn probe_changed(
    api: &dyn KubeApi,
    info: &ResourceInfo,
    object: &Value,
    addr: &ResourceAddr,
    owned_live: Option<&Value>,
    taken: Option<&TakenNames>,
    job_in_place: bool,
) -> KubeResult<Answer> {
    if let Some(taken) = taken.filter(|_| !job_in_place) {
        // Without a dry run: a changed object is compared as listed, a new one is created from
        // the spec, and one whose name is taken is read, for ownership and the diff.
        let name_taken = kind_key(object)
            .and_then(|key| taken.get(&key))
            .is_some_and(|names| names.contains(&object_name(object, info)));
        return Ok(Answer {
            read: match owned_live {
                Some(_) => None,
                None if name_taken => Some(get_live(api, info, object).await?),
                None => Some(None),
            },
            ..Default::default()
        });
    }
    dry_run_answer(api, info, object, addr, owned_live).await
}

/// What a server-side dry run of desired object `object` says of it, compared with its listed
/// live object (`owned_live`, when the lists have it); the object is read again when the dry
/// run shows it exists unlisted or changed since it was listed, or when the dry run fails.
async fn dry_run_answer(
    api: &dyn KubeApi,
    info: &ResourceInfo,
    object: &Value,
    addr: &ResourceAddr,
    owned_live: Option<&Value>,
) -> KubeResult<Answer> {
    Ok(match (owned_live, preview(api, info, object).await) {
        (Some(listed), Ok((p, found))) if same_version(listed, &p) => Answer {
            predicted: Some(p),
            found,
            ..Default::default()
        },
        // It changed between the list and the dry run (Kueue admitting a job, say), and the dry
        // run answered for the newer version: compare it with that version, not the listed one,
        // or what the other writer did shows as gkq's change.
        (Some(_), Ok(first)) => {
            let mut predicted = Some(first);
            let mut live = get_live(api, info, object).await?;
            for _ in 0..MOVED_RETRIES {
                match (&live, &predicted) {
                    (Some(now), Some((p, _))) if !same_version(now, p) => {
                        predicted = preview(api, info, object).await.ok();
                        live = get_live(api, info, object).await?;
                    }
                    _ => break,
                }
            }
            let (predicted, found) = predicted
                .filter(|_| live.is_some())
                .map_or((None, Vec::new()), |(p, found)| (Some(p), found));
            Answer {
                predicted,
                found,
                read: Some(live),
                ..Default::default()
            }
        }
        // A new object: the server's answer has no resourceVersion.
        (None, Ok((p, _))) if !exists(&p) => Answer {
            read: Some(None),
            predicted: Some(p),
            ..Default::default()
        },
        // It exists without gkq's labels: read it, for ownership and the diff.
        (None, Ok((p, _))) => {
            let live = get_live(api, info, object).await?;
            let same = live
                .as_ref()
                .is_some_and(|live| diff_object(addr, object, live, None).changes.is_empty());
            Answer {
                read: Some(live),
                predicted: (!same).then_some(p),
                ..Default::default()
            }
        }
        // A namespace that does not exist yet, or a rejected object: the plan shows the
        // rendered object; apply reports the server's answer.
        // It conflicts, and the server refuses it even forced (a running batch Job's pod
        // template is immutable): the conflicts are resolved against the spec's own values.
        (Some(_), Err(KubeError::Conflict { conflicts, .. })) => Answer {
            found: found_in(conflicts),
            ..Default::default()
        },
        (owned_live, Err(e)) => {
            tracing::debug!("dry-run of {}: {e}", crate::kube::describe(object));
            match owned_live {
                Some(_) => Answer::default(),
                None => Answer {
                    read: Some(get_live(api, info, object).await?),
                    ..Default::default()
                },
            }
        }
    })
}

/// `object` as it lives now (`None`: it does not exist).
async fn get_live(
    api: &dyn KubeApi,
    info: &ResourceInfo,
    object: &Value,
) -> KubeResult<Option<Value>> {
    let at = object_name(object, info);
    api.get(info, at.namespace.as_deref(), &at.name)
        .await
        .map(|live| live.map(without_bookkeeping))
}

/// A server-side dry run of `object` that does not force: the server's answer, and no
/// conflicts; or, when another field manager owns fields `object` sets with other values, the
/// answer with force (what forcing would make of the object) and those fields.
async fn preview(
    api: &dyn KubeApi,
    info: &ResourceInfo,
    object: &Value,
) -> KubeResult<(Value, Vec<Found>)> {
    let dry_run = |force: bool| async move {
        api.apply(
            info,
            object,
            ApplyOptions {
                dry_run: true,
                force,
            },
        )
        .await
        .map(without_bookkeeping)
        .map(without_status)
    };
    match dry_run(false).await {
        Err(KubeError::Conflict {
            conflicts,
            object: name,
            message,
        }) => match dry_run(true).await {
            Ok(forced) => Ok((forced, found_in(conflicts))),
            Err(refused) => {
                tracing::debug!("forced dry-run of {name}: {refused}");
                Err(KubeError::Conflict {
                    object: name,
                    conflicts,
                    message,
                })
            }
        },
        answer => answer.map(|p| (p, Vec::new())),
    }
}

fn found_in(conflicts: Vec<crate::kube::FieldConflict>) -> Vec<Found> {
    conflicts
        .into_iter()
        .map(|c| Found {
            field: c.field,
            manager: c.manager,
        })
        .collect()
}

/// Decides the conflicts the dry run found (`plan::conflicts::resolve`) against the live object
/// it applied to; when some fields are left to their managers, the object without them is
/// dry-run (without force) for what apply will make of it.
async fn resolve_conflicts(
    api: &dyn KubeApi,
    info: &ResourceInfo,
    addr: &ResourceAddr,
    object: &Value,
    owned_live: Option<&Value>,
    mut answer: Answer,
    force: bool,
) -> KubeResult<Answer> {
    let found = std::mem::take(&mut answer.found);
    let live = match &answer.read {
        Some(read) => read.as_ref(),
        None => owned_live,
    };
    let (Some(live), false) = (live, found.is_empty()) else {
        return Ok(answer);
    };
    // Without the server's forced answer (it refused even that), the spec's own values are
    // what forcing would write.
    let forced = answer.predicted.clone().unwrap_or_else(|| object.clone());
    let forced = &forced;
    let mut resolved = resolve(addr, object, live, forced, &found, force);
    if let Some(applied) = &resolved.applied {
        match preview(api, info, applied).await {
            Ok((predicted, still)) if still.is_empty() => answer.predicted = Some(predicted),
            // Leaving the fields out did not settle it: everything is forced, as planned with
            // force.
            other => {
                tracing::debug!(
                    "{}: leaving fields to their managers still conflicts ({:?})",
                    crate::kube::describe(object),
                    other.map(|(_, still)| still)
                );
                resolved = resolve(addr, object, live, forced, &found, true);
            }
        }
    }
    answer.conflicts = Some(resolved);
    Ok(answer)
}

/// Where `object` is within its kind, as the server will name it: a namespaced object without
/// a namespace goes to `default`.
fn object_name(object: &Value, info: &ResourceInfo) -> ObjectName {
    ObjectName {
        namespace: info.namespaced.then(|| {
            crate::kube::namespace_of(object)
                .unwrap_or("default")
                .to_string()
        }),
        name: crate::kube::name_of(object).to_string(),
    }
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
/// How many more times a probe reads an object that keeps changing under it before it plans
/// with the last pair it read.
const MOVED_RETRIES: usize = 2;

/// Whether two answers are of the same stored version of an object: a dry run answers with the
/// `resourceVersion` of the version it applied to.
fn same_version(live: &Value, predicted: &Value) -> bool {
    let version = |o: &Value| o.at("/metadata/resourceVersion").cloned();
    version(live) == version(predicted)
}

fn exists(predicted: &Value) -> bool {
    predicted
        .at("/metadata/resourceVersion")
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
    use crate::plan::disruption::{find, may_disrupt};
    if !plan.changes().any(may_disrupt) {
        return Ok(Vec::new());
    }
    let workloads = observe_workloads(api).await?.unwrap_or_default();
    let flavors = match api.resource(KUEUE_API, "ResourceFlavor").await? {
        Some(info) => api.list(&info, "").await?,
        None => Vec::new(),
    };
    let known: Vec<&Value> = flavors
        .iter()
        .chain(plan.actions.iter().filter_map(|a| a.desired.as_deref()))
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
        /// What lists answer in place of the stored object: a version another writer has
        /// since replaced.
        listed_before: BTreeMap<String, Value>,
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
                .iter()
                .map(|(name, o)| self.listed_before.get(name).unwrap_or(o))
                .filter(|o| crate::kube::is_owned(o))
                .cloned()
                .collect())
        }
        async fn list_names(&self, _: &ResourceInfo) -> KubeResult<Vec<ObjectName>> {
            self.call("list names").await;
            Ok(self.stored.values().map(ObjectName::of).collect())
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

    /// A fake server storing `objects` (each at resourceVersion 7).
    fn storing(objects: Vec<Value>) -> Fake {
        let mut api = Fake::default();
        for o in objects {
            api.stored
                .insert(crate::kube::name_of(&o).to_string(), stored(o));
        }
        api
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
        let live = observe_kube(&api, &desired(objects), "c", None, None, Preview::DryRun)
            .await
            .unwrap()
            .live;
        assert_eq!(api.count("dry-run"), 200);
        assert_eq!(api.count("get"), 0);
        let o = observed(&live, "cm-7");
        assert!(o.live.is_none() && o.predicted.is_some());
        let max = api.max_in_flight.load(Ordering::SeqCst);
        assert!(
            max <= PER_OBJECT_CONCURRENCY,
            "{max} requests in flight at once"
        );
    }

    #[tokio::test]
    async fn unchanged_owned_objects_cost_nothing_and_changed_ones_one_dry_run() {
        let api = storing(vec![cm("same", "v", true), cm("edited", "old", true)]);
        let want = vec![cm("same", "v", true), cm("edited", "new", true)];
        let live = observe_kube(&api, &desired(want), "c", None, None, Preview::DryRun)
            .await
            .unwrap()
            .live;
        assert_eq!(api.count("dry-run"), 1);
        assert_eq!(api.count("get"), 0);
        assert!(observed(&live, "same").predicted.is_none());
        let edited = observed(&live, "edited");
        assert!(edited.live.is_some() && edited.predicted.is_some());
    }

    /// Planned from the lists alone: no dry run at all; one list of names finds the one new
    /// object whose name an unowned object has taken, and only that one is read.
    #[tokio::test]
    async fn a_plan_from_the_lists_sends_no_dry_run_and_reads_only_taken_names() {
        let api = storing(vec![
            cm("same", "v", true),
            cm("edited", "old", true),
            cm("theirs", "v", false),
        ]);
        let mut want = vec![
            cm("same", "v", true),
            cm("edited", "new", true),
            cm("theirs", "v", true),
        ];
        want.extend((0..100).map(|i| cm(&format!("new-{i}"), "v", true)));
        let live = observe_kube(&api, &desired(want), "c", None, None, Preview::Lists)
            .await
            .unwrap()
            .live;
        assert_eq!(api.count("dry-run"), 0);
        assert_eq!(api.count("list names"), 1);
        assert_eq!(api.count("get"), 1);
        let theirs = observed(&live, "theirs");
        assert!(
            theirs.live.is_some_and(|l| !crate::kube::is_owned(&l)),
            "the unowned object is read, so the plan blocks it"
        );
        let new = observed(&live, "new-7");
        assert!(new.live.is_none() && new.predicted.is_none());
        let edited = observed(&live, "edited");
        assert!(edited.live.is_some() && edited.predicted.is_none());
    }

    /// With a judge, each desired object's action is decided as its answer arrives and its live
    /// and dry-run trees are not kept; what the plan reads later stays (the owned leftover that
    /// prune deletes). The actions are the ones `plan` decides from the full live state.
    #[tokio::test]
    async fn a_judge_decides_each_object_as_it_is_observed_and_keeps_only_what_the_plan_reads() {
        let api = storing(vec![
            cm("same", "v", true),
            cm("edited", "old", true),
            cm("leftover", "v", true),
        ]);
        let want = desired(vec![
            cm("same", "v", true),
            cm("edited", "new", true),
            cm("new", "v", true),
        ]);
        let options = crate::plan::PlanOptions {
            prune: true,
            ..Default::default()
        };
        let judge = Judge::new(&want, &options);
        let observed = observe_kube(&api, &want, "c", None, Some(&judge), Preview::DryRun)
            .await
            .unwrap();
        let KubeLive::Observed { objects } = &observed.live else {
            panic!("not observed")
        };
        let kept: Vec<String> = objects.keys().map(|a| a.name.clone()).collect();
        assert_eq!(kept, ["leftover"], "only what no desired object names");
        let kinds: BTreeMap<String, ActionKind> = observed
            .judged
            .iter()
            .map(|(a, action)| (a.name.clone(), action.kind))
            .collect();
        assert_eq!(
            kinds,
            BTreeMap::from([
                ("edited".to_string(), ActionKind::Update),
                ("new".to_string(), ActionKind::Create),
                ("same".to_string(), ActionKind::NoOp),
            ])
        );

        // The same plan as from the whole live state.
        let full = observe_kube(&api, &want, "c", None, None, Preview::DryRun)
            .await
            .unwrap();
        let live_state = |kubernetes| crate::model::live::LiveState {
            kubernetes,
            ..Default::default()
        };
        let judged =
            crate::plan::plan_judged(&want, &live_state(observed.live), observed.judged, &options)
                .unwrap();
        let whole = crate::plan::plan(&want, &live_state(full.live), &options).unwrap();
        assert_eq!(
            serde_json::to_value(&judged).unwrap(),
            serde_json::to_value(&whole).unwrap()
        );
        assert!(judged.actions.iter().any(|a| a.kind == ActionKind::Delete));
    }

    /// With a judge, an unchanged listed object is decided as its list arrives: no request of
    /// its own, and a plan without dry runs lists no names for a kind whose objects are all
    /// unchanged. The actions are those of the plan made from the whole live state.
    #[tokio::test]
    async fn a_judge_decides_unchanged_objects_as_their_lists_arrive() {
        let api = storing(vec![cm("same", "v", true), cm("also", "w", true)]);
        let want = desired(vec![cm("same", "v", true), cm("also", "w", true)]);
        let options = crate::plan::PlanOptions::default();
        let judge = Judge::new(&want, &options);
        for preview in [Preview::DryRun, Preview::Lists] {
            let observed = observe_kube(&api, &want, "c", None, Some(&judge), preview)
                .await
                .unwrap();
            let kinds: Vec<ActionKind> = observed.judged.values().map(|a| a.kind).collect();
            assert_eq!(kinds, [ActionKind::NoOp, ActionKind::NoOp]);
            let whole = crate::plan::plan(
                &want,
                &crate::model::live::LiveState {
                    kubernetes: observe_kube(&api, &want, "c", None, None, preview)
                        .await
                        .unwrap()
                        .live,
                    ..Default::default()
                },
                &options,
            )
            .unwrap();
            let mut compared = 0;
            for action in &whole.actions {
                let Some(early) = observed.judged.get(&action.addr) else {
                    continue;
                };
                assert_eq!(early.kind, action.kind);
                assert_eq!(
                    (&early.live_fingerprint, &early.live_fields),
                    (&action.live_fingerprint, &action.live_fields)
                );
                compared += 1;
            }
            assert_eq!(compared, 2);
        }
        assert_eq!(
            (
                api.count("dry-run"),
                api.count("get"),
                api.count("list names")
            ),
            (0, 0, 0)
        );
    }

    #[tokio::test]
    async fn an_object_without_gkqs_labels_is_read_once_the_dry_run_shows_it_exists() {
        let api = storing(vec![cm("theirs", "v", false)]);
        let live = observe_kube(
            &api,
            &desired(vec![cm("theirs", "v", true)]),
            "c",
            None,
            None,
            Preview::DryRun,
        )
        .await
        .unwrap()
        .live;
        assert_eq!((api.count("dry-run"), api.count("get")), (1, 1));
        let o = observed(&live, "theirs");
        assert!(
            !crate::kube::is_owned(o.live.as_ref().unwrap()),
            "the live object, not the dry run"
        );
    }

    /// Another writer (Kueue admitting a job) changed the object between the list and the dry
    /// run: the dry run answered for the newer version, so that version is read and compared.
    #[tokio::test]
    async fn an_object_that_moved_after_the_list_is_read_again_before_it_is_compared() {
        let mut api = Fake::default();
        let mut now = cm("moved", "v", true);
        now["metadata"]["annotations"] = json!({"theirs": "x"});
        now["metadata"]["resourceVersion"] = json!("8");
        api.stored.insert("moved".into(), now);
        api.listed_before
            .insert("moved".into(), stored(cm("moved", "v", true)));
        api.stored
            .insert("still".into(), stored(cm("still", "old", true)));
        let want = vec![cm("moved", "new", true), cm("still", "new", true)];
        let live = observe_kube(&api, &desired(want), "c", None, None, Preview::DryRun)
            .await
            .unwrap()
            .live;
        assert_eq!((api.count("dry-run"), api.count("get")), (2, 1));
        let moved = observed(&live, "moved");
        let read = moved.live.unwrap();
        assert_eq!(read["metadata"]["resourceVersion"], "8");
        assert_eq!(read["metadata"]["annotations"]["theirs"], "x");
        assert!(moved.predicted.is_some());
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
        let live = observe_kube(&api, &desired(want), "c", None, None, Preview::DryRun)
            .await
            .unwrap()
            .live;
        assert_eq!((api.count("dry-run"), api.count("get")), (2, 2));
        assert!(observed(&live, "bad").live.is_none());
        let o = observed(&live, "bad-existing");
        assert!(o.live.is_some() && o.predicted.is_none());
    }
}
