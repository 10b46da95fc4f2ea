//! The quota tree: ClusterQueues under (possibly nested) Cohorts, with nominal quotas,
//! borrowing and lending limits, and usage that bubbles up past lending limits.
//!
//! A line-by-line port of Kueue v0.19.2 `pkg/cache/scheduler/resource_node.go` (`localQuota`,
//! `available`, `potentialAvailable`, `addUsage`, `accumulateFromChild`),
//! `clusterqueue_snapshot.go` (`Available`, `BorrowingWith`, `Fits`) and
//! `pkg/scheduler/preemption/classical/hierarchical_preemption.go`
//! (`FindHeightOfLowestSubtreeThatFits`, `getNodeHeight`).
//!
//! Quotas are indexed by a dense `FlavorResource` number (`flavor * resources + resource`) so
//! that usage is a flat vector per node and a whole snapshot clones cheaply.

use super::amount::Amount;

/// Dense index of a `(flavor, resource)` pair.
pub(crate) type Fr = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quota {
    pub nominal: Amount,
    pub borrowing_limit: Option<Amount>,
    pub lending_limit: Option<Amount>,
}

#[derive(Debug, Clone)]
pub(crate) struct QuotaNode {
    pub is_cohort: bool,
    pub parent: Option<usize>,
    pub child_cohorts: Vec<usize>,
    pub child_count: usize,
    /// Own quotas, by `Fr`.
    pub quotas: Vec<Option<Quota>>,
    /// Own nominal plus what children make visible (nominal minus their local quota).
    pub subtree_quota: Vec<Amount>,
}

/// Usage of every node, by `Fr`, in one flat vector (`node * frs + fr`) so that a scheduling
/// cycle's snapshot is a single copy.
#[derive(Debug, Clone)]
pub(crate) struct Usage {
    values: Vec<Amount>,
    frs: usize,
}

impl Usage {
    pub fn get(&self, node: usize, fr: Fr) -> Amount {
        self.values[node * self.frs + fr]
    }

    fn slot(&mut self, node: usize, fr: Fr) -> &mut Amount {
        &mut self.values[node * self.frs + fr]
    }
}

#[derive(Debug, Clone)]
pub(crate) struct QuotaTree {
    pub nodes: Vec<QuotaNode>,
    pub frs: usize,
    /// Per node and `Fr` (`node * frs + fr`), computed once by `finish`: `potentialAvailable`
    /// (independent of usage), the local quota kept back by a lending limit, the node's own
    /// quota against which borrowing is judged, and the borrowing limit.
    potential: Vec<Amount>,
    local: Vec<Amount>,
    own: Vec<Amount>,
    borrowing_limit: Vec<Option<Amount>>,
    /// `subtree_quota` of every node, flat like the values above (read on every flavor tried).
    subtree: Vec<Amount>,
    /// Per node: its parent, its height as a cohort and the root of its tree.
    parents: Vec<Option<usize>>,
    heights: Vec<usize>,
    roots: Vec<usize>,
}

impl QuotaTree {
    pub fn new(frs: usize) -> QuotaTree {
        QuotaTree {
            nodes: Vec::new(),
            frs,
            potential: Vec::new(),
            local: Vec::new(),
            own: Vec::new(),
            borrowing_limit: Vec::new(),
            subtree: Vec::new(),
            parents: Vec::new(),
            heights: Vec::new(),
            roots: Vec::new(),
        }
    }

    pub fn add_node(&mut self, is_cohort: bool) -> usize {
        self.nodes.push(QuotaNode {
            is_cohort,
            parent: None,
            child_cohorts: Vec::new(),
            child_count: 0,
            quotas: vec![None; self.frs],
            subtree_quota: vec![Amount::ZERO; self.frs],
        });
        self.nodes.len() - 1
    }

    pub fn set_parent(&mut self, child: usize, parent: usize) {
        self.nodes[child].parent = Some(parent);
        self.nodes[parent].child_count += 1;
        if self.nodes[child].is_cohort {
            self.nodes[parent].child_cohorts.push(child);
        }
    }

    /// Computes subtree quotas bottom-up (`updateCohortResourceNode`). Nodes must form a forest.
    pub fn finish(&mut self) {
        let order = self.post_order();
        for node in order {
            let mut subtree: Vec<Amount> = self.nodes[node]
                .quotas
                .iter()
                .map(|q| q.map_or(Amount::ZERO, |q| q.nominal))
                .collect();
            if self.nodes[node].is_cohort {
                for child in self.children(node) {
                    for (fr, total) in subtree.iter_mut().enumerate() {
                        let visible = self.nodes[child].subtree_quota[fr]
                            .minus(self.compute_local_quota(child, fr));
                        *total = total.plus(visible);
                    }
                }
            }
            self.nodes[node].subtree_quota = subtree;
        }
        let size = self.nodes.len() * self.frs;
        let mut local = Vec::with_capacity(size);
        for node in 0..self.nodes.len() {
            for fr in 0..self.frs {
                local.push(self.compute_local_quota(node, fr));
            }
        }
        // Potential availability reads the local quotas of the whole path to the root.
        self.local = local;
        let (mut potential, mut own, mut borrowing_limit) = (
            Vec::with_capacity(size),
            Vec::with_capacity(size),
            Vec::with_capacity(size),
        );
        for node in 0..self.nodes.len() {
            for fr in 0..self.frs {
                potential.push(self.compute_potential_available(node, fr));
                own.push(if self.nodes[node].is_cohort {
                    self.nodes[node].subtree_quota[fr]
                } else {
                    self.nominal(node, fr)
                });
                borrowing_limit.push(self.nodes[node].quotas[fr].and_then(|q| q.borrowing_limit));
            }
        }
        self.potential = potential;
        self.own = own;
        self.borrowing_limit = borrowing_limit;
        self.subtree = self
            .nodes
            .iter()
            .flat_map(|n| n.subtree_quota.iter().copied())
            .collect();
        self.parents = self.nodes.iter().map(|n| n.parent).collect();
        self.heights = (0..self.nodes.len())
            .map(|n| self.compute_height(n))
            .collect();
        self.roots = (0..self.nodes.len())
            .map(|n| self.compute_root(n))
            .collect();
    }

    fn children(&self, node: usize) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&n| self.nodes[n].parent == Some(node))
            .collect()
    }

    /// Children before parents.
    fn post_order(&self) -> Vec<usize> {
        let depth: Vec<usize> = (0..self.nodes.len()).map(|n| self.depth(n)).collect();
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&n| std::cmp::Reverse(depth[n]));
        order
    }

    fn depth(&self, node: usize) -> usize {
        let mut depth = 0;
        let mut current = node;
        while let Some(parent) = self.nodes[current].parent {
            depth += 1;
            current = parent;
            if depth > self.nodes.len() {
                break;
            }
        }
        depth
    }

    pub fn quota(&self, node: usize, fr: Fr) -> Option<Quota> {
        self.nodes[node].quotas[fr]
    }

    fn nominal(&self, node: usize, fr: Fr) -> Amount {
        self.nodes[node].quotas[fr].map_or(Amount::ZERO, |q| q.nominal)
    }

    /// Capacity only visible inside this subtree because of the lending limit.
    fn local_quota(&self, node: usize, fr: Fr) -> Amount {
        self.local[node * self.frs + fr]
    }

    fn compute_local_quota(&self, node: usize, fr: Fr) -> Amount {
        match self.nodes[node].quotas[fr].and_then(|q| q.lending_limit) {
            Some(lending_limit) => {
                Amount::ZERO.max(self.nodes[node].subtree_quota[fr].minus(lending_limit))
            }
            None => Amount::ZERO,
        }
    }

    fn local_available(&self, node: usize, fr: Fr, usage: &Usage) -> Amount {
        Amount::ZERO.max(self.local_quota(node, fr).minus(usage.get(node, fr)))
    }

    fn available_raw(&self, node: usize, fr: Fr, usage: &Usage) -> Amount {
        let subtree = self.subtree[node * self.frs + fr];
        let used = usage.get(node, fr);
        let Some(parent) = self.parents[node] else {
            return subtree.minus(used);
        };
        let mut parent_available = self.available_raw(parent, fr, usage);
        if let Some(borrowing_limit) = self.borrowing_limit[node * self.frs + fr] {
            let local = self.local_quota(node, fr);
            let stored_in_parent = subtree.minus(local);
            let used_in_parent = Amount::ZERO.max(used.minus(local));
            let with_max_from_parent = stored_in_parent.minus(used_in_parent).plus(borrowing_limit);
            parent_available = with_max_from_parent.min(parent_available);
        }
        self.local_available(node, fr, usage).plus(parent_available)
    }

    /// Free capacity for a ClusterQueue, including what it may borrow; never negative.
    pub fn available(&self, node: usize, fr: Fr, usage: &Usage) -> Amount {
        Amount::ZERO.max(self.available_raw(node, fr, usage))
    }

    /// The largest amount this node could ever use, with nothing else running.
    pub fn potential_available(&self, node: usize, fr: Fr) -> Amount {
        self.potential[node * self.frs + fr]
    }

    fn compute_potential_available(&self, node: usize, fr: Fr) -> Amount {
        let Some(parent) = self.nodes[node].parent else {
            return self.nodes[node].subtree_quota[fr];
        };
        let mut available = self
            .local_quota(node, fr)
            .plus(self.compute_potential_available(parent, fr));
        if let Some(borrowing_limit) = self.nodes[node].quotas[fr].and_then(|q| q.borrowing_limit) {
            available = self.nodes[node].subtree_quota[fr]
                .plus(borrowing_limit)
                .min(available);
        }
        available
    }

    /// Adds usage to a node and bubbles what exceeds its local quota up to the cohort.
    pub fn add_usage(&self, node: usize, fr: Fr, value: Amount, usage: &mut Usage) {
        let local_available = self.local_available(node, fr, usage);
        let slot = usage.slot(node, fr);
        *slot = slot.plus(value);
        if let Some(parent) = self.nodes[node].parent
            && value > local_available
        {
            self.add_usage(parent, fr, value.minus(local_available), usage);
        }
    }

    /// Removes usage from a node and from the cohorts it had reached (`removeUsage`).
    pub fn remove_usage(&self, node: usize, fr: Fr, value: Amount, usage: &mut Usage) {
        let stored_in_parent = usage.get(node, fr).minus(self.local_quota(node, fr));
        let slot = usage.slot(node, fr);
        *slot = slot.minus(value);
        if let Some(parent) = self.nodes[node].parent
            && stored_in_parent > Amount::ZERO
        {
            self.remove_usage(parent, fr, value.min(stored_in_parent), usage);
        }
    }

    /// `IsWithinNominalInResources`: the node (ClusterQueue or cohort subtree) uses no more
    /// than its own quota of each of `frs`.
    pub fn within_quota(&self, node: usize, frs: &[Fr], usage: &Usage) -> bool {
        frs.iter()
            .all(|&fr| self.nodes[node].subtree_quota[fr] >= usage.get(node, fr))
    }

    /// `QuantitiesFitInQuota`: whether `requests` fit in the node's own quota, and what is left
    /// of them for its parent once the node's local quota is used.
    pub fn fit_in_quota(
        &self,
        node: usize,
        requests: &[(Fr, Amount)],
        usage: &Usage,
    ) -> (bool, Vec<(Fr, Amount)>) {
        let mut fits = true;
        let mut remaining = Vec::with_capacity(requests.len());
        for &(fr, value) in requests {
            if self.nodes[node].subtree_quota[fr] < usage.get(node, fr).plus(value) {
                fits = false;
            }
            let left = value.minus(self.local_available(node, fr, usage));
            remaining.push((fr, Amount::ZERO.max(left)));
        }
        (fits, remaining)
    }

    /// The cohorts above a node, nearest first.
    pub fn ancestors(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.nodes[node].parent, |&n| self.nodes[n].parent)
    }

    /// Direct children of a cohort: cohorts and ClusterQueues, in creation order.
    pub fn children_of(&self, node: usize) -> Vec<usize> {
        self.children(node)
    }

    /// Whether `value` more would exceed the node's own quota (`BorrowingWith`).
    fn borrowing_with(&self, node: usize, fr: Fr, value: Amount, usage: &Usage) -> bool {
        self.own[node * self.frs + fr] < usage.get(node, fr).plus(value)
    }

    /// Height of a cohort: 1 above its leaves, deeper cohorts add one level each.
    fn compute_height(&self, node: usize) -> usize {
        let mut height = self.nodes[node].child_count.min(1);
        for &child in &self.nodes[node].child_cohorts {
            height = height.max(self.compute_height(child) + 1);
        }
        height
    }

    fn compute_root(&self, node: usize) -> usize {
        let mut current = node;
        while let Some(parent) = self.nodes[current].parent {
            current = parent;
        }
        current
    }

    /// Whether `value` more stays within the ClusterQueue's own nominal quota.
    pub fn within_nominal(&self, node: usize, fr: Fr, value: Amount, usage: &Usage) -> bool {
        !self.borrowing_with(node, fr, value, usage)
    }

    /// `FindHeightOfLowestSubtreeThatFits`: the borrowing level (0 when no borrowing is needed)
    /// and whether reclaiming inside the hierarchy could make room.
    pub fn lowest_fitting_subtree(
        &self,
        cq: usize,
        fr: Fr,
        value: Amount,
        usage: &Usage,
    ) -> (usize, bool) {
        let has_parent = self.nodes[cq].parent.is_some();
        if !self.borrowing_with(cq, fr, value, usage) || !has_parent {
            return (0, has_parent);
        }
        let mut remaining = value.minus(self.local_available(cq, fr, usage));
        let mut current = self.nodes[cq].parent;
        while let Some(node) = current {
            if !self.borrowing_with(node, fr, remaining, usage) {
                return (self.heights[node], self.nodes[node].parent.is_some());
            }
            remaining = remaining.minus(self.local_available(node, fr, usage));
            current = self.nodes[node].parent;
        }
        (self.heights[self.roots[cq]], false)
    }

    pub fn zero_usage(&self) -> Usage {
        Usage {
            values: vec![Amount::ZERO; self.nodes.len() * self.frs],
            frs: self.frs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(nominal: i64, borrowing: Option<i64>, lending: Option<i64>) -> Option<Quota> {
        Some(Quota {
            nominal: Amount::new(nominal),
            borrowing_limit: borrowing.map(Amount::new),
            lending_limit: lending.map(Amount::new),
        })
    }

    /// Two ClusterQueues in one cohort, one resource.
    fn pair(a: Option<Quota>, b: Option<Quota>) -> QuotaTree {
        let mut tree = QuotaTree::new(1);
        let cohort = tree.add_node(true);
        let cq_a = tree.add_node(false);
        let cq_b = tree.add_node(false);
        tree.set_parent(cq_a, cohort);
        tree.set_parent(cq_b, cohort);
        tree.nodes[cq_a].quotas[0] = a;
        tree.nodes[cq_b].quotas[0] = b;
        tree.finish();
        tree
    }

    #[test]
    fn borrowing_and_lending_limits_bound_availability() {
        let tree = pair(quota(10, Some(5), None), quota(10, None, Some(4)));
        let usage = tree.zero_usage();
        // a may use its 10 plus at most 5 borrowed; b lends only 4 of its 10.
        assert_eq!(tree.available(1, 0, &usage), Amount::new(14));
        assert_eq!(
            tree.potential_available(1, 0),
            Amount::new(15).min(Amount::new(14))
        );
        assert_eq!(tree.available(2, 0, &usage), Amount::new(20));
        assert_eq!(tree.nodes[0].subtree_quota[0], Amount::new(14));
    }

    #[test]
    fn usage_bubbles_past_local_quota() {
        let tree = pair(quota(10, None, None), quota(10, None, Some(4)));
        let mut usage = tree.zero_usage();
        // b keeps 6 for itself: using 8 puts 2 into the cohort.
        tree.add_usage(2, 0, Amount::new(8), &mut usage);
        assert_eq!(usage.get(0, 0), Amount::new(2));
        assert_eq!(tree.available(1, 0, &usage), Amount::new(12));
        assert_eq!(
            tree.lowest_fitting_subtree(1, 0, Amount::new(12), &usage),
            (1, false)
        );
        assert_eq!(
            tree.lowest_fitting_subtree(1, 0, Amount::new(5), &usage),
            (0, true)
        );
    }
}
