//! The floor under a plan: a bare client that sends exactly the requests a plan of the given
//! objects needs (discovery, one list per kind gkq lists (Kueue's world unselected), the
//! revision record and Kueue's Deployment, and one server-side-apply dry run
//! per object when `--dry-run all`), at the same concurrency as `gkq plan`, and nothing else:
//! no spec, no diff, no rendering. `bench/plan-apply` runs it beside `gkq plan` and prints gkq's
//! time as a ratio to it.
//!
//!     cargo build --release -p gkq-bench
//!     target/release/plan_floor OBJECTS.json --kubeconfig FILE --stack NAME
//!         [--dry-run all|none] [--concurrency N]
//!
//! OBJECTS.json is a JSON array of the objects (`gkq render DIR -o json`'s `kubernetes`).
//! Prints one line: `requests=N seconds=S`.

use std::collections::BTreeSet;
use std::time::Instant;

use futures::StreamExt;
use gkq::kube::PER_OBJECT_CONCURRENCY;
use gkq::kube::client::RealKube;
use gkq::kube::{ApplyOptions, KubeApi, owned_selector, type_of};
use gkq::model::kueue_install::{KUEUE_NAMESPACE, MANAGER_DEPLOYMENT};
use gkq::observe::cluster::KUEUE_WORLD_KINDS;
use gkq::observe::kube::managed_kinds;
use gkq::plan::revision::{REVISION_NAMESPACE, configmap_name};
use serde_json::Value;

/// gkq's allocator (src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    objects: String,
    kubeconfig: String,
    stack: String,
    dry_run: bool,
    concurrency: usize,
}

fn args() -> Args {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        objects: String::new(),
        kubeconfig: String::new(),
        stack: String::new(),
        dry_run: true,
        concurrency: PER_OBJECT_CONCURRENCY,
    };
    while let Some(a) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match a.as_str() {
            "--kubeconfig" => args.kubeconfig = value(),
            "--stack" => args.stack = value(),
            "--dry-run" => args.dry_run = value() == "all",
            "--concurrency" => args.concurrency = value().parse().expect("a number"),
            other => args.objects = other.to_string(),
        }
    }
    args
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let args = args();
    gkq::gke::install_tls_provider();
    let objects: Vec<Value> = serde_json::from_slice(&std::fs::read(&args.objects)?)?;
    let options = kube::config::KubeConfigOptions::default();
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
    let api = RealKube::new(kube::Client::try_from(config)?);
    let requests = std::sync::atomic::AtomicUsize::new(0);
    let count = || requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);

    // The kinds gkq lists: Kueue's world unselected (the placement prediction and what-if read
    // every stack's queues and Workloads), and the objects' other kinds and the kinds gkq may
    // own with the stack's selector.
    let world: BTreeSet<(String, String)> = KUEUE_WORLD_KINDS
        .iter()
        .map(|(a, k)| (a.to_string(), k.to_string()))
        .collect();
    let mut kinds: BTreeSet<(String, String)> = objects
        .iter()
        .map(type_of)
        .map(|(a, k)| (a.to_string(), k.to_string()))
        .chain(managed_kinds().map(|(a, k)| (a.to_string(), k.to_string())))
        .collect();
    kinds.extend(world.iter().cloned());
    let selector = owned_selector(&args.stack);
    let lists = kinds.iter().map(|(api_version, kind)| {
        let (api, selector, world) = (&api, &selector, &world);
        async move {
            count();
            let info = api.resource(api_version, kind).await?;
            let unselected = world.contains(&(api_version.clone(), kind.clone()));
            let selector = if unselected { "" } else { selector };
            let listed = match &info {
                Some(info) => {
                    count();
                    api.list(info, selector).await?.len()
                }
                None => 0,
            };
            anyhow::Ok((info, listed))
        }
    });
    // The two reads of single objects every plan makes: the applied-revision record and, for
    // `kueue.install: external`, Kueue's Deployment (its version).
    let singles = async {
        let config_map = api.resource("v1", "ConfigMap").await?;
        let deployment = api.resource("apps/v1", "Deployment").await?;
        let revision = configmap_name(&args.stack);
        for (info, namespace, name) in [
            (config_map, REVISION_NAMESPACE, revision.as_str()),
            (deployment, KUEUE_NAMESPACE, MANAGER_DEPLOYMENT),
        ] {
            if let Some(info) = info {
                count();
                api.get(&info, Some(namespace), name).await?;
            }
        }
        anyhow::Ok(())
    };
    let (infos, singles) = futures::join!(futures::future::join_all(lists), singles);
    singles?;
    let mut served = std::collections::BTreeMap::new();
    for (key, found) in kinds.iter().zip(infos) {
        if let (Some(info), _) = found? {
            served.insert(key.clone(), info);
        }
    }
    if args.dry_run {
        let dry_runs = objects.iter().map(|object| {
            let (api, served) = (&api, &served);
            async move {
                let (v, k) = type_of(object);
                let Some(info) = served.get(&(v.to_string(), k.to_string())) else {
                    return;
                };
                count();
                let opts = ApplyOptions {
                    dry_run: true,
                    force: true,
                };
                // A rejected dry run is an answer too: gkq plans it from the rendered object.
                let _ = api.apply(info, object, opts).await;
            }
        });
        futures::stream::iter(dry_runs)
            .buffer_unordered(args.concurrency)
            .collect::<Vec<()>>()
            .await;
    }
    println!(
        "requests={} seconds={:.3}",
        requests.load(std::sync::atomic::Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
