//! capacity's reclaim rules in a queue tree: which running tasks may go for a
//! reclaimer, and how far up the tree the plugin looks before one queue takes
//! from another (Volcano's `ancestorReclaimLevel`).
//!
//! With level 0 (Volcano's default) only the leaf queues are compared: a victim's
//! queue must hold more than it deserves. Under `enableHierarchy: true` a level
//! `n > 0` also compares the ancestors up to `n` levels above the leaves, so that
//! an organisation within its own deserved amount keeps what it holds even when
//! one of its teams is over theirs:
//! - a queue past its own deserved amount may still reclaim while an ancestor
//!   within `n` levels stays within its deserved amount once the task is added;
//! - a victim whose ancestor at some level up to `n` differs from the
//!   reclaimer's goes only when that ancestor, too, is over its deserved amount
//!   (the root, shared by all, is never asked);
//! - two queues under a shared ancestor within `n` levels, neither of which
//!   deserves anything the reclaimer asks for, do not take from each other:
//!   nothing says who is owed what between them.

use super::pod_charge::task_charge;
use super::queue_tree::QueueTree;
use crate::resources::Resources;
use crate::volcano::capacity::within_deserved_somewhere;
use crate::volcano::conf::{ANCESTOR_RECLAIM_LEVEL, ConfError};
use crate::volcano::framework::arguments::Arguments;
use crate::volcano::framework::{SessionState, TaskInfo};
use crate::volcano::objects::ROOT_QUEUE;
use std::collections::{BTreeMap, BTreeSet};

/// How many levels above the leaves reclaim compares (0: the leaves only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AncestorLevels(usize);

impl AncestorLevels {
    /// Reads `ancestorReclaimLevel`. A negative level is read as 0, as Volcano
    /// falls back to it; anything but a whole number is refused, naming the key.
    pub fn from_args(args: &Arguments<'_>) -> Result<Self, ConfError> {
        let Some(level) = args.number(ANCESTOR_RECLAIM_LEVEL)? else {
            return Ok(Self(0));
        };
        if level.fract() != 0.0 {
            return Err(args.error(
                ANCESTOR_RECLAIM_LEVEL,
                format!("expected a whole number, got {level}"),
            ));
        }
        Ok(Self(level.max(0.0).min(usize::MAX as f64) as usize))
    }

    /// The levels that apply: none without a hierarchy.
    pub fn under(self, hierarchy: bool) -> Self {
        if hierarchy { self } else { Self(0) }
    }
}

/// The tree as reclaim reads it.
pub(crate) struct ReclaimTree<'t> {
    /// The queues.
    pub tree: &'t QueueTree,
    /// Levels compared above the leaves.
    pub levels: AncestorLevels,
}

impl ReclaimTree<'_> {
    /// Depths 1 (`i`'s parent) to the level, and no deeper than `i`'s
    /// ancestors go, however large the level.
    fn depths(&self, i: usize) -> std::ops::RangeInclusive<usize> {
        1..=self.levels.0.min(self.tree.nodes[i].ancestors.len())
    }

    fn root(&self) -> Option<usize> {
        self.tree.position(ROOT_QUEUE)
    }

    /// `i`'s ancestor `depth` levels up (1: its parent).
    fn ancestor(&self, i: usize, depth: usize) -> Option<usize> {
        depth
            .checked_sub(1)
            .and_then(|d| self.tree.nodes[i].ancestors.get(d).copied())
    }

    /// `i`'s ancestor `depth` levels up, unless that is the root.
    fn non_root_ancestor(&self, i: usize, depth: usize) -> Option<usize> {
        self.ancestor(i, depth).filter(|a| Some(*a) != self.root())
    }

    /// Whether `a` and `b` share an ancestor other than the root within the levels.
    fn share_an_ancestor(&self, a: usize, b: usize) -> bool {
        let within = |i: usize| -> BTreeSet<usize> {
            self.depths(i)
                .filter_map(|d| self.non_root_ancestor(i, d))
                .collect()
        };
        !within(a).is_disjoint(&within(b))
    }

    /// Whether queue `i`, past its own deserved amount for `candidate`, may still
    /// reclaim because an ancestor within the levels stays within its deserved
    /// amount with it.
    pub fn ancestor_may_reclaim(
        &self,
        state: &SessionState,
        i: usize,
        candidate: &Resources,
    ) -> bool {
        self.depths(i).any(|depth| {
            self.non_root_ancestor(i, depth).is_some_and(|a| {
                let allocated = self.tree.sum(state, a, |q| &q.allocated);
                within_deserved_somewhere(&allocated, candidate, &self.tree.nodes[a].deserved)
                    .is_ok()
            })
        })
    }

    /// The candidates that may go for `reclaimer`, taken in the order given (the
    /// order victims would be evicted in): each must hold something the reclaimer
    /// asks for, leave its queue's guarantee whole, and find its queue over its
    /// deserved amount on such a dimension (or holding only what that amount does
    /// not name), and each ancestor the levels compare likewise. Each victim
    /// taken counts as gone for the next.
    pub fn victims(
        &self,
        state: &SessionState,
        reclaimer: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Vec<String> {
        let queue_of = |t: &TaskInfo| state.job(&t.job).and_then(|j| self.tree.position(&j.queue));
        let reclaimer_queue = queue_of(reclaimer);
        let mut allocated: BTreeMap<usize, Resources> = BTreeMap::new();
        let mut victims = Vec::new();
        for c in candidates {
            let Some(i) = queue_of(c) else {
                continue;
            };
            // Evicting a pod that holds none of what the reclaimer asks for frees
            // nothing for it.
            if !shares_a_dimension(&c.resreq, &reclaimer.resreq) {
                continue;
            }
            // The victim takes one pod with it: a guarantee or deserved amount
            // naming `pods` counts them, as Volcano's does.
            let charge = task_charge(&c.resreq);
            let held = allocated
                .entry(i)
                .or_insert_with(|| self.tree.held_with_pods(state, i));
            if !keeps_guarantee(held, &charge, self.guarantee(state, i)) {
                continue;
            }
            let deserved = &self.tree.nodes[i].deserved;
            if shares_a_dimension(&charge, deserved) {
                if !over_deserved(held, deserved, c, reclaimer) {
                    continue;
                }
            } else if reclaimer_queue.is_some_and(|r| {
                self.share_an_ancestor(r, i)
                    && !shares_a_dimension(&reclaimer.resreq, &self.tree.nodes[r].deserved)
            }) {
                continue;
            }
            let mut checked = Vec::new();
            let mut eligible = true;
            for depth in self.depths(i) {
                let Some(a) = self.non_root_ancestor(i, depth) else {
                    continue;
                };
                if reclaimer_queue.and_then(|r| self.ancestor(r, depth)) == Some(a) {
                    continue;
                }
                let held = allocated
                    .entry(a)
                    .or_insert_with(|| self.tree.held_with_pods(state, a));
                checked.push(a);
                let deserved = &self.tree.nodes[a].deserved;
                if shares_a_dimension(&charge, deserved)
                    && !over_deserved(held, deserved, c, reclaimer)
                {
                    eligible = false;
                    break;
                }
            }
            if !eligible {
                continue;
            }
            for q in std::iter::once(i).chain(checked) {
                if let Some(held) = allocated.get_mut(&q) {
                    held.saturating_sub(&charge);
                }
            }
            victims.push(c.uid.clone());
        }
        victims
    }

    fn guarantee<'s>(&self, state: &'s SessionState, i: usize) -> Option<&'s Resources> {
        state
            .queue(&self.tree.names[i])
            .and_then(|q| q.spec.guarantee.as_ref())
    }
}

/// Whether `held` without `request` still covers every dimension of `guarantee`.
fn keeps_guarantee(held: &Resources, request: &Resources, guarantee: Option<&Resources>) -> bool {
    guarantee.is_none_or(|g| g.fits_within_amount(&held.minus(request)))
}

/// Whether `held` is over `deserved` on a dimension both the candidate and the
/// reclaimer ask for (a dimension `deserved` does not name is not over it).
fn over_deserved(
    held: &Resources,
    deserved: &Resources,
    candidate: &TaskInfo,
    reclaimer: &TaskInfo,
) -> bool {
    let shared = candidate
        .resreq
        .iter()
        .filter(|(dim, amount)| *amount > 0 && reclaimer.resreq.get(dim) > 0)
        .map(|(dim, _)| dim);
    held.first_excess_on(deserved, shared).is_some()
}

/// Whether `a` and `b` both ask a positive amount of one dimension.
fn shares_a_dimension(a: &Resources, b: &Resources) -> bool {
    a.iter().any(|(dim, amount)| amount > 0 && b.get(dim) > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::plugins::registry;
    use serde_json::Value;

    fn conf(level: &str) -> String {
        format!(
            "actions: enqueue, allocate, reclaim
tiers:
- plugins:
  - name: capacity
    enableHierarchy: true
    arguments:
      ancestorReclaimLevel: {level}
"
        )
    }

    fn levels(value: Value) -> Result<AncestorLevels, ConfError> {
        let map = BTreeMap::from([(ANCESTOR_RECLAIM_LEVEL.to_string(), value)]);
        AncestorLevels::from_args(&Arguments::new("tiers[0].plugins[0]", "capacity", &map))
    }

    #[test]
    fn a_level_loads_and_defaults_to_the_leaves_only() {
        assert!(registry::load(&conf("2")).is_ok());
        assert_eq!(levels(Value::from(2)), Ok(AncestorLevels(2)));
        assert_eq!(levels(Value::from("1")), Ok(AncestorLevels(1)));
        let none = BTreeMap::new();
        let args = Arguments::new("tiers[0].plugins[0]", "capacity", &none);
        assert_eq!(AncestorLevels::from_args(&args), Ok(AncestorLevels(0)));
    }

    #[test]
    fn a_negative_level_loads_as_zero_as_volcano_reads_it() {
        assert!(registry::load(&conf("-1")).is_ok());
        assert_eq!(levels(Value::from(-1)), Ok(AncestorLevels(0)));
    }

    #[test]
    fn a_level_that_is_not_a_whole_number_is_refused_naming_the_key() {
        for bad in ["two", "1.5"] {
            let e = registry::load(&conf(bad)).unwrap_err().to_string();
            assert!(
                e.contains("(capacity)") && e.contains("ancestorReclaimLevel"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn without_hierarchy_only_the_leaves_count() {
        assert_eq!(AncestorLevels(2).under(false), AncestorLevels(0));
        assert_eq!(AncestorLevels(2).under(true), AncestorLevels(2));
    }

    /// b deserves 1 CPU and holds 3 (three 1-CPU tasks); its guarantee is 2 CPUs.
    /// A reclaimer from a may take b back to its guarantee, never below it.
    #[test]
    fn victims_never_take_a_queue_below_its_guarantee() {
        use crate::volcano::framework::TaskStatus;
        use crate::volcano::framework::queue::QueueInfo;
        use crate::volcano::framework::testing::{gang_key, job, state, task};
        use crate::volcano::objects::QueueSpec;
        let cpu = |n: i64| Resources::from_units([("cpu", n)]);
        let b_key = gang_key("b");
        let held: Vec<TaskInfo> = (0..3)
            .map(|i| {
                let mut t = task(&b_key, &format!("b-{i}"), cpu(1));
                t.status = TaskStatus::Running;
                t
            })
            .collect();
        let victims_with = |guarantee: Option<Resources>| {
            let queues = vec![
                QueueInfo::idle(QueueSpec {
                    deserved: Some(cpu(2)),
                    ..QueueSpec::new("a")
                }),
                QueueInfo {
                    allocated: cpu(3),
                    ..QueueInfo::idle(QueueSpec {
                        deserved: Some(cpu(1)),
                        guarantee,
                        ..QueueSpec::new("b")
                    })
                },
            ];
            let a_key = gang_key("a");
            let reclaimer = task(&a_key, "a-0", cpu(1));
            let jobs = vec![
                job("a", "a", 1, vec![reclaimer.clone()]),
                job("b", "b", 1, held.clone()),
            ];
            let st = state(cpu(4), queues, jobs);
            let tree = QueueTree::build(&st, false);
            let candidates: Vec<&TaskInfo> = held.iter().collect();
            ReclaimTree {
                tree: &tree,
                levels: AncestorLevels(0),
            }
            .victims(&st, &reclaimer, &candidates)
        };
        assert_eq!(victims_with(None), vec!["uid-b-0", "uid-b-1"]);
        assert_eq!(victims_with(Some(cpu(2))), vec!["uid-b-0"]);
    }

    /// A level far beyond the tree's depth compares every ancestor and stops
    /// there, whatever the level says.
    #[test]
    fn a_level_deeper_than_the_tree_compares_every_ancestor() {
        use crate::volcano::framework::queue::QueueInfo;
        use crate::volcano::framework::testing::state;
        use crate::volcano::objects::QueueSpec;
        let cpu = |n: i64| Resources::from_units([("cpu", n)]);
        let may_reclaim = |parent_deserves: Option<Resources>| {
            let queues = vec![
                QueueInfo::idle(QueueSpec::new(ROOT_QUEUE)),
                QueueInfo::idle(QueueSpec {
                    deserved: parent_deserves,
                    ..QueueSpec::new("team")
                }),
                QueueInfo::idle(QueueSpec {
                    parent: Some("team".into()),
                    ..QueueSpec::new("leaf")
                }),
            ];
            let st = state(cpu(4), queues, Vec::new());
            let tree = QueueTree::build(&st, true);
            let leaf = tree.position("leaf").expect("leaf queue");
            ReclaimTree {
                tree: &tree,
                levels: AncestorLevels(usize::MAX),
            }
            .ancestor_may_reclaim(&st, leaf, &cpu(1))
        };
        assert!(may_reclaim(Some(cpu(2))));
        assert!(!may_reclaim(None));
    }
}
