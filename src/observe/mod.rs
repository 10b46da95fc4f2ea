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

/// Below this many items for each thread, a second thread costs more than it saves.
const PER_THREAD: usize = 128;

/// `each` of `items`, in their order, on two scoped threads when there are enough of them: a
/// plan reads back and compares thousands of listed objects after the server has answered, and
/// nothing else uses the second core then. The threads take every other item, not a half each:
/// items come grouped by kind (Kueue's world is its ClusterQueues, then its LocalQueues), and a
/// ClusterQueue costs several LocalQueues to compare, so halves left one thread idle for most
/// of the other's work.
pub(crate) fn on_two_threads<T: Sync, R: Send>(
    items: &[T],
    each: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if items.len() < 2 * PER_THREAD {
        return items.iter().map(&each).collect();
    }
    std::thread::scope(|scope| {
        let other = scope.spawn(|| {
            items
                .iter()
                .skip(1)
                .step_by(2)
                .map(&each)
                .collect::<Vec<_>>()
        });
        let evens: Vec<R> = items.iter().step_by(2).map(&each).collect();
        let odds = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let mut results = Vec::with_capacity(items.len());
        let mut odds = odds.into_iter();
        for even in evens {
            results.push(even);
            results.extend(odds.next());
        }
        results
    })
}

#[cfg(test)]
mod tests {
    use super::{PER_THREAD, on_two_threads};

    #[test]
    fn two_threads_take_every_other_item_and_answer_in_order() {
        let threshold = 2 * PER_THREAD;
        for len in [0, 1, threshold - 1, threshold, threshold + 1, 1000, 1001] {
            let items: Vec<usize> = (0..len).collect();
            let answered = on_two_threads(&items, |&i| (i * 3, std::thread::current().id()));
            let values: Vec<usize> = answered.iter().map(|(v, _)| *v).collect();
            assert_eq!(
                values,
                items.iter().map(|i| i * 3).collect::<Vec<_>>(),
                "{len} items"
            );
            let caller = std::thread::current().id();
            for (i, (_, thread)) in answered.iter().enumerate() {
                // Few items stay on the caller's thread; many alternate between the two.
                let on_caller = len < threshold || i % 2 == 0;
                assert_eq!(*thread == caller, on_caller, "item {i} of {len}");
            }
        }
    }
}
