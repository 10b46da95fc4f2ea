//! The Workloads holding quota as Kueue's scheduler reads them, kept as they are written, with
//! the quota they hold summed by what decides whether Kueue takes it back. When no
//! ClusterQueue may preempt, a holder that keeps its quota matters to a scheduler run only for
//! that quota, so a run reads one sum per group instead of every holder: applying thousands of
//! jobs one after another made each run read every Workload admitted before it (quadratic in
//! the jobs, BENCHMARKS.md eleventh round).

use std::collections::BTreeMap;

use super::super::store::Key;
use crate::placement::Cluster;
use crate::placement::active;
use crate::placement::amount::{quantity_of, request_value};
use crate::placement::objects::ReservingWorkload;

/// The holders in key order, each with the resourceVersion it was read at (a Workload is read
/// again only when it was written), and their quota summed by [`Group`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Holders {
    reads: Vec<(Key, String)>,
    workloads: Vec<ReservingWorkload>,
    groups: BTreeMap<Group, GroupSum>,
}

/// What [`active::released`] reads of a holder: holders alike in these keep or lose their
/// quota together.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Group {
    namespace: String,
    queue_name: Option<String>,
    cluster_queue: String,
    admitted: bool,
}

impl Group {
    fn of(workload: &ReservingWorkload) -> Self {
        Group {
            namespace: workload.namespace.clone(),
            queue_name: workload.queue_name.clone(),
            cluster_queue: workload.cluster_queue.clone(),
            admitted: workload.admitted,
        }
    }
}

/// A group's holders: how many, and the quota they hold by `(flavor, resource)` as placement
/// counts each holder's (its own quantity rounded to the resource's unit, then added), so
/// that the sum counts exactly what the holders one by one do.
#[derive(Debug, Clone, Default, PartialEq)]
struct GroupSum {
    members: usize,
    usage: BTreeMap<(String, String), i128>,
}

impl GroupSum {
    fn add(&mut self, workload: &ReservingWorkload, sign: i128) {
        for (flavor, resource, quantity) in &workload.usage {
            let value = i128::from(request_value(resource, *quantity));
            *self
                .usage
                .entry((flavor.clone(), resource.clone()))
                .or_default() += sign * value;
        }
    }
}

impl Holders {
    pub fn len(&self) -> usize {
        self.workloads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workloads.is_empty()
    }

    /// Where `key` is, or would go.
    pub fn position(&self, key: &Key) -> Result<usize, usize> {
        self.reads.binary_search_by(|(k, _)| k.cmp(key))
    }

    /// The resourceVersion the holder at `at` was read at.
    pub fn version_at(&self, at: usize) -> &str {
        &self.reads[at].1
    }

    /// Empties the holders, returning each by key with the version it was read at.
    pub fn drain(&mut self) -> impl Iterator<Item = (Key, (String, ReservingWorkload))> + '_ {
        self.groups.clear();
        self.reads
            .drain(..)
            .zip(self.workloads.drain(..))
            .map(|((key, version), read)| (key, (version, read)))
    }

    /// Adds a holder after every one kept (keys must come in order).
    pub fn push(&mut self, key: Key, version: String, read: ReservingWorkload) {
        let at = self.len();
        self.insert(at, key, version, read);
    }

    /// Adds a holder at `at` (from [`Holders::position`]).
    pub fn insert(&mut self, at: usize, key: Key, version: String, read: ReservingWorkload) {
        self.count(&read, 1);
        self.reads.insert(at, (key, version));
        self.workloads.insert(at, read);
    }

    /// Replaces the holder at `at`, read again at `version`.
    pub fn replace(&mut self, at: usize, version: String, read: ReservingWorkload) {
        self.count(&read, 1);
        self.reads[at].1 = version;
        let gone = std::mem::replace(&mut self.workloads[at], read);
        self.count(&gone, -1);
    }

    /// Removes the holder at `at`.
    pub fn remove(&mut self, at: usize) {
        self.reads.remove(at);
        let gone = self.workloads.remove(at);
        self.count(&gone, -1);
    }

    fn count(&mut self, workload: &ReservingWorkload, sign: i128) {
        let group = Group::of(workload);
        let sum = self.groups.entry(group.clone()).or_default();
        sum.add(workload, sign);
        if sign > 0 {
            sum.members += 1;
        } else {
            sum.members = sum.members.saturating_sub(1);
        }
        if sum.members == 0 {
            self.groups.remove(&group);
        }
    }

    /// Every holder as read, moved out (to be put back with [`Holders::put_back`]).
    pub fn take_all(&mut self) -> Vec<ReservingWorkload> {
        std::mem::take(&mut self.workloads)
    }

    /// Puts back what [`Holders::take_all`] took.
    pub fn put_back(&mut self, workloads: Vec<ReservingWorkload>) {
        self.workloads = workloads;
    }

    /// The holders as a run in which nothing can be preempted reads them, in `cluster` (its
    /// queues read): one holder per group, unreadable as a job (so never a victim), holding the
    /// group's quota. `None` when a group's quota is taken back (a stopped or missing queue):
    /// then each holder counts on its own.
    pub fn summed(&self, cluster: &Cluster) -> Option<Vec<ReservingWorkload>> {
        let summed: Vec<ReservingWorkload> = self
            .groups
            .iter()
            .map(|(group, sum)| ReservingWorkload {
                namespace: group.namespace.clone(),
                name: String::new(),
                cluster_queue: group.cluster_queue.clone(),
                queue_name: group.queue_name.clone(),
                admitted: group.admitted,
                usage: sum
                    .usage
                    .iter()
                    .map(|((flavor, resource), value)| {
                        let value = (*value).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
                        (
                            flavor.clone(),
                            resource.clone(),
                            quantity_of(resource, value as i64),
                        )
                    })
                    .collect(),
                workload: None,
                reserved_at: None,
            })
            .collect();
        summed
            .iter()
            .all(|holder| active::released(cluster, holder).is_none())
            .then_some(summed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::quantity::Quantity;

    fn holder(name: &str, queue: &str, admitted: bool, cpu: &str) -> ReservingWorkload {
        ReservingWorkload {
            namespace: "default".into(),
            name: name.into(),
            cluster_queue: "cq".into(),
            queue_name: Some(queue.into()),
            admitted,
            usage: vec![
                ("f".into(), "cpu".into(), Quantity::parse(cpu).unwrap()),
                ("f".into(), "memory".into(), Quantity::parse("1Gi").unwrap()),
            ],
            workload: None,
            reserved_at: None,
        }
    }

    fn key(name: &str) -> Key {
        Key::new("kueue.x-k8s.io/v1beta2", "Workload", Some("default"), name)
    }

    /// The sums count each holder as placement does (rounded up to a millicore each) and
    /// follow inserts, replacements and removals.
    #[test]
    fn the_sums_follow_the_holders_and_round_each_as_placement_does() {
        let cluster = Cluster::default();
        let mut holders = Holders::default();
        holders.push(key("a"), "1".into(), holder("a", "lq", true, "0.0001"));
        holders.push(key("c"), "1".into(), holder("c", "lq", true, "2"));
        let at = holders.position(&key("b")).unwrap_err();
        holders.insert(at, key("b"), "1".into(), holder("b", "other", true, "1"));
        let cpu = |summed: &[ReservingWorkload]| -> Vec<(String, i64)> {
            summed
                .iter()
                .map(|h| {
                    let (_, _, q) = h.usage.iter().find(|(_, r, _)| r == "cpu").unwrap();
                    (h.queue_name.clone().unwrap(), request_value("cpu", *q))
                })
                .collect()
        };
        let summed = holders.summed(&cluster).unwrap();
        assert_eq!(cpu(&summed), [("lq".into(), 2001), ("other".into(), 1000)]);
        let memory = summed[0]
            .usage
            .iter()
            .find(|(_, r, _)| r == "memory")
            .unwrap();
        assert_eq!(request_value("memory", memory.2), 2 << 30);

        let at = holders.position(&key("c")).unwrap();
        holders.replace(at, "2".into(), holder("c", "lq", true, "3"));
        assert_eq!(cpu(&holders.summed(&cluster).unwrap())[0].1, 3001);
        holders.remove(holders.position(&key("b")).unwrap());
        assert_eq!(
            cpu(&holders.summed(&cluster).unwrap()),
            [("lq".into(), 3001)]
        );
        assert_eq!(holders.len(), 2);
        assert_eq!(holders.version_at(1), "2");

        let drained: Vec<_> = holders.drain().map(|(k, _)| k).collect();
        assert_eq!(drained, [key("a"), key("c")]);
        assert!(holders.summed(&cluster).unwrap().is_empty());
    }
}
