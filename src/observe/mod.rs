//! Reading the live state: what GKE and Kubernetes say exists now, into
//! [`LiveState`](crate::model::live::LiveState). Reading is I/O behind traits (`GkeApi`,
//! `KubeApi`).
//!
//! GKE is read in one call: `clusters.get` returns the cluster with every node pool
//! (docs/gke.md section d). Kubernetes is read by the Kubernetes observer (the Kubernetes half of
//! the engine): it fills `KubeLive::Observed` with each desired object's live state and the
//! server's dry-run prediction, and with every object gkq owns, keyed by address.

pub mod cluster;
pub mod gke;
pub mod kube;

pub use gke::{observe_gke, read_cluster};

use serde_json::Value;

/// Keeps of `metadata.managedFields` only gkq's own apply entry, which tells what a new apply
/// would remove ([`crate::diff::applied`]); the other entries are bookkeeping the plan never
/// reads (conflicts come from the server at apply time), often as large as the object itself.
pub(crate) fn without_bookkeeping(object: Value) -> Value {
    crate::diff::applied::keep_own_apply(object)
}

/// `each` of `items`, in their order, on two scoped threads when there are enough of them: a
/// plan reads back and compares thousands of listed objects after the server has answered, and
/// nothing else uses the second core then.
pub(crate) fn on_two_threads<T: Sync, R: Send>(
    items: &[T],
    each: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    // Below this, a second thread costs more than it saves.
    const PER_THREAD: usize = 128;
    if items.len() < 2 * PER_THREAD {
        return items.iter().map(&each).collect();
    }
    let (first, second) = items.split_at(items.len() / 2);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| second.iter().map(&each).collect::<Vec<_>>());
        let mut results: Vec<R> = first.iter().map(&each).collect();
        results.extend(
            other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        );
        results
    })
}
