//! How the roles of one job relate, derived from its topology: which pairs of
//! roles attract or repel each other, how strongly each role is bound (the
//! strongest relation it takes part in), and the order roles are placed in.

use crate::volcano::task_topology::{RoleGroup, TaskTopology};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// The kinds of relation, weakest first: Volcano places the roles of one bucket
/// by the strongest relation each takes part in, so a role kept apart from its
/// own kind is placed before one that merely attracts another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Relation {
    /// Kept from another role (`worker,chief` in anti-affinity; Volcano's
    /// inter-anti-affinity).
    KeptFromOthers,
    /// Drawn to its own role (`ps` alone in affinity; self-affinity).
    DrawnToOwnKind,
    /// Drawn to another role (`ps,worker` in affinity; inter-affinity).
    DrawnToOthers,
    /// Kept from its own role (`ps` alone in anti-affinity; self-anti-affinity).
    KeptFromOwnKind,
}

/// The relations among one job's roles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleRelations {
    /// The roles each role attracts (both directions are stored; a role attracts
    /// itself when drawn to its own kind).
    attract: BTreeMap<String, BTreeSet<String>>,
    /// The roles each role repels, likewise.
    repel: BTreeMap<String, BTreeSet<String>>,
    /// The strongest relation of each role that has one.
    strongest: BTreeMap<String, Relation>,
    /// Each role named in the task order with its rank: larger goes first.
    rank: BTreeMap<String, usize>,
}

impl RoleRelations {
    /// The relations a topology states.
    pub fn of(topology: &TaskTopology) -> Self {
        let mut r = Self::default();
        for group in &topology.affinity {
            r.relate(group, true);
        }
        for group in &topology.anti_affinity {
            r.relate(group, false);
        }
        let n = topology.task_order.len();
        for (i, role) in topology.task_order.iter().enumerate() {
            r.rank.insert(role.clone(), n - i);
        }
        r
    }

    fn relate(&mut self, group: &RoleGroup, attract: bool) {
        let (pairs, within, between) = if attract {
            (
                &mut self.attract,
                Relation::DrawnToOwnKind,
                Relation::DrawnToOthers,
            )
        } else {
            (
                &mut self.repel,
                Relation::KeptFromOwnKind,
                Relation::KeptFromOthers,
            )
        };
        let relation = if group.within_role { within } else { between };
        let mut pair = |a: &str, b: &str| {
            pairs.entry(a.to_owned()).or_default().insert(b.to_owned());
        };
        for (i, role) in group.roles.iter().enumerate() {
            if group.within_role {
                pair(role, role);
            }
            for other in &group.roles[..i] {
                pair(role, other);
                pair(other, role);
            }
            let strongest = self.strongest.entry(role.clone()).or_insert(relation);
            *strongest = (*strongest).max(relation);
        }
    }

    /// Whether tasks of the role take part in the topology (and so go in buckets).
    pub fn binds(&self, role: &str) -> bool {
        self.strongest.contains_key(role)
    }

    /// How much a task of `role` is drawn to a set of tasks (`tasks`: how many of
    /// each role): one for each task it attracts, minus one for each it repels;
    /// with `repulsion_only`, only the minus.
    pub fn pull(&self, role: &str, tasks: &BTreeMap<String, usize>, repulsion_only: bool) -> i64 {
        let (attracted, repelled) = (self.attract.get(role), self.repel.get(role));
        let mut pull = 0i64;
        for (other, &n) in tasks {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            if !repulsion_only && attracted.is_some_and(|roles| roles.contains(other)) {
                pull = pull.saturating_add(n);
            }
            if repelled.is_some_and(|roles| roles.contains(other)) {
                pull = pull.saturating_sub(n);
            }
        }
        pull
    }

    /// Which of two roles of one bucket is placed first (`Less`: `a`): the one
    /// earlier in the task order, then the one with the stronger relation.
    pub fn placement_order(&self, a: &str, b: &str) -> Ordering {
        if a == b {
            return Ordering::Equal;
        }
        let rank = |r: &str| self.rank.get(r).copied().unwrap_or(0);
        let strength = |r: &str| self.strongest.get(r).copied();
        rank(b)
            .cmp(&rank(a))
            .then_with(|| strength(b).cmp(&strength(a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::task_topology::TopologyAnnotations;

    fn relations(affinity: &str, anti: &str, order: &str) -> RoleRelations {
        let roles = BTreeSet::from(["ps", "worker", "chief", "evaluator"]);
        let annotations = TopologyAnnotations {
            affinity: Some(affinity.into()),
            anti_affinity: Some(anti.into()),
            task_order: Some(order.into()),
        };
        RoleRelations::of(&TaskTopology::read(&annotations, &roles).expect("valid"))
    }

    fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
        pairs.iter().map(|(r, n)| (r.to_string(), *n)).collect()
    }

    #[test]
    fn pull_counts_attracted_tasks_and_subtracts_repelled_ones() {
        // The seed's example: workers attract the ps and keep apart from each other.
        let r = relations("worker,ps", "worker", "ps,worker");
        let bucket = counts(&[("ps", 1), ("worker", 2)]);
        assert_eq!(r.pull("worker", &bucket, false), 1 - 2);
        assert_eq!(r.pull("worker", &bucket, true), -2);
        assert_eq!(r.pull("ps", &bucket, false), 2, "ps attracts the workers");
        assert_eq!(r.pull("ps", &bucket, true), 0, "and repels no one");
        assert_eq!(r.pull("chief", &bucket, false), 0);
    }

    #[test]
    fn roles_bind_by_their_strongest_relation() {
        let r = relations("ps,worker;chief", "ps;worker,evaluator", "");
        assert_eq!(r.strongest["ps"], Relation::KeptFromOwnKind);
        assert_eq!(r.strongest["worker"], Relation::DrawnToOthers);
        assert_eq!(r.strongest["chief"], Relation::DrawnToOwnKind);
        assert_eq!(r.strongest["evaluator"], Relation::KeptFromOthers);
        // Strongest relation first when the task order does not say.
        let mut roles = vec!["evaluator", "chief", "worker", "ps"];
        roles.sort_by(|a, b| r.placement_order(a, b));
        assert_eq!(roles, vec!["ps", "worker", "chief", "evaluator"]);
    }

    #[test]
    fn the_task_order_comes_before_the_strength_of_relations() {
        let r = relations("ps,worker", "ps", "worker,ps");
        assert_eq!(r.placement_order("worker", "ps"), Ordering::Less);
        assert_eq!(r.placement_order("ps", "ps"), Ordering::Equal);
        // A role the order leaves out comes after those it names.
        let r = relations("ps,worker;chief", "", "worker");
        assert_eq!(r.placement_order("chief", "worker"), Ordering::Greater);
        assert_eq!(r.placement_order("ps", "chief"), Ordering::Less);
    }

    #[test]
    fn only_roles_in_affinity_or_anti_affinity_bind() {
        let r = relations("", "", "ps,worker");
        assert!(!r.binds("ps"), "the task order alone binds no role");
        let r = relations("ps,", "", "");
        assert!(r.binds("ps"));
        assert_eq!(
            r.pull("ps", &counts(&[("ps", 3)]), false),
            0,
            "`ps,` is a group of two entries: ps does not attract its own kind"
        );
    }
}
