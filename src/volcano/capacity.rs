//! capacity: explicit per-queue deserved amounts, optional queue hierarchy (spec §C.8).
//!
//! Where proportion derives a queue's fair amount from weights, capacity takes it
//! from `spec.deserved` and lets a queue grow beyond it up to its **real capability**
//! while others leave room, so the useful limit for allocation is the real capability,
//! not the deserved amount.
//!
//! ```text
//! realCapability = min((parent realCapability − Σ sibling guarantees) + own guarantee,
//!                      capability)
//! deserved       = max(min(spec.deserved, realCapability), guarantee)
//! ```
//!
//! Without hierarchy every queue is a child of the cluster, whose real capability is
//! the cluster total. With `enableHierarchy: true`, `spec.parent` builds a tree under
//! the queue `root`: a child's capability inherits every dimension it does not set
//! from its parent, and allocation or admission must fit the queue **and every
//! ancestor**. Jobs run only in leaf queues.
//!
//! Two deliberate differences from Volcano:
//! - The root's real capability is the cluster total (Volcano leaves it unbounded), so
//!   flat and hierarchical setups agree on what a top-level queue may use.
//! - A cycle or a missing parent breaks only the queues involved (and their
//!   descendants): each gets a [`HierarchyError`] and is treated as closed, while the
//!   rest of the tree keeps working. Volcano stops scheduling every queue instead.

use super::objects::ROOT_QUEUE;
use super::proportion::{ratio, requested_dims};
use super::resources::{Excess, Resources};
use std::collections::BTreeMap;
use std::fmt;

/// One queue as the capacity plugin sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityInput {
    /// Queue name.
    pub name: String,
    /// `spec.parent` (`None` for the top level).
    pub parent: Option<String>,
    /// `spec.capability`.
    pub capability: Option<Resources>,
    /// `spec.deserved`.
    pub deserved: Option<Resources>,
    /// `spec.guarantee.resource` (empty when unset).
    pub guarantee: Resources,
}

/// Why a queue is cut off from the hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HierarchyError {
    /// The queue lies on a parent cycle; the names go once around it.
    Cycle(Vec<String>),
    /// `spec.parent` names a queue that does not exist.
    MissingParent(String),
    /// An ancestor is itself broken.
    BrokenAncestor(String),
}

impl fmt::Display for HierarchyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HierarchyError::Cycle(path) => {
                write!(f, "queue hierarchy has a cycle: {}", path.join(" -> "))?;
                if let Some(first) = path.first() {
                    write!(f, " -> {first}")?;
                }
                Ok(())
            }
            HierarchyError::MissingParent(p) => write!(f, "parent queue {p:?} does not exist"),
            HierarchyError::BrokenAncestor(a) => {
                write!(f, "ancestor queue {a:?} has a broken hierarchy")
            }
        }
    }
}

/// The plugin's view of one queue after the hierarchy is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityNode {
    /// Index of the parent queue in the input, when it is an input queue.
    pub parent: Option<usize>,
    /// Ancestors, nearest first (empty without hierarchy).
    pub ancestors: Vec<usize>,
    /// Children (empty without hierarchy).
    pub children: Vec<usize>,
    /// Capability after inheritance from the parent; `None` = unlimited.
    pub capability: Option<Resources>,
    /// The limit allocation must respect; `None` for a broken queue.
    pub real_capability: Option<Resources>,
    /// `max(min(spec.deserved, realCapability), guarantee)`.
    pub deserved: Resources,
    /// Set when the queue is cut off from the hierarchy.
    pub error: Option<HierarchyError>,
}

impl CapacityNode {
    /// Leaf queues are the only ones that hold jobs.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
}

/// Resolves parents, detects broken hierarchies and computes capabilities and
/// deserved amounts. Results are in input order; a duplicate queue name is resolved to
/// its first occurrence.
pub fn build(total: &Resources, queues: &[CapacityInput], hierarchy: bool) -> Vec<CapacityNode> {
    let n = queues.len();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, q) in queues.iter().enumerate() {
        index.entry(q.name.as_str()).or_insert(i);
    }
    let root = if hierarchy {
        index.get(ROOT_QUEUE).copied()
    } else {
        None
    };

    let mut parent: Vec<Option<usize>> = vec![None; n];
    let mut error: Vec<Option<HierarchyError>> = vec![None; n];
    if hierarchy {
        for (i, q) in queues.iter().enumerate() {
            if Some(i) == root {
                continue;
            }
            match q
                .parent
                .as_deref()
                .filter(|p| !p.is_empty() && *p != ROOT_QUEUE)
            {
                Some(p) => match index.get(p) {
                    Some(&pi) => parent[i] = Some(pi),
                    None => error[i] = Some(HierarchyError::MissingParent(p.to_owned())),
                },
                None => parent[i] = root,
            }
        }
        mark_broken(queues, &parent, &mut error);
    }

    let ok = |i: usize| error[i].is_none();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut top: Vec<usize> = Vec::new();
    for i in (0..n).filter(|&i| ok(i)) {
        match parent[i] {
            Some(p) => children[p].push(i),
            None => top.push(i),
        }
    }
    let ancestors: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            let mut chain = Vec::new();
            if ok(i) {
                let mut at = parent[i];
                while let Some(p) = at {
                    chain.push(p);
                    at = parent[p];
                }
            }
            chain
        })
        .collect();

    let mut capability: Vec<Option<Resources>> = vec![None; n];
    let mut real: Vec<Option<Resources>> = vec![None; n];
    // Top level: children of the cluster, whose real capability is the total.
    let mut frontier: Vec<(Vec<usize>, Resources, Option<Resources>)> =
        vec![(top, total.clone(), None)];
    while let Some((siblings, parent_real, parent_cap)) = frontier.pop() {
        let mut sibling_guarantees = Resources::new();
        for &c in &siblings {
            sibling_guarantees.add(&queues[c].guarantee);
        }
        for &c in &siblings {
            let cap = inherit(queues[c].capability.as_ref(), parent_cap.as_ref());
            let mut r = parent_real.minus(&sibling_guarantees);
            for (dim, g) in queues[c].guarantee.iter() {
                if r.contains(dim) {
                    r.set(dim, r.get(dim).saturating_add(g));
                }
            }
            if let Some(cap) = &cap {
                r = r.min_limit(cap);
            }
            if !children[c].is_empty() {
                frontier.push((children[c].clone(), r.clone(), cap.clone()));
            }
            capability[c] = cap;
            real[c] = Some(r);
        }
    }

    let mut deserved: Vec<Resources> = (0..n)
        .map(|i| {
            let spec = queues[i].deserved.clone().unwrap_or_default();
            let capped = match &real[i] {
                Some(r) => spec.capped_by(r),
                None => spec,
            };
            capped.max_amount(&queues[i].guarantee)
        })
        .collect();
    // The root without its own deserved amount reports what its children deserve.
    if let Some(r) = root.filter(|&r| queues[r].deserved.is_none()) {
        let mut sum = Resources::new();
        for &c in &children[r] {
            sum.add(&deserved[c]);
        }
        deserved[r] = sum.max_amount(&queues[r].guarantee);
    }

    (0..n)
        .map(|i| CapacityNode {
            parent: parent[i].filter(|_| ok(i)),
            ancestors: ancestors[i].clone(),
            children: children[i].clone(),
            capability: capability[i].clone(),
            real_capability: real[i].clone(),
            deserved: std::mem::take(&mut deserved[i]),
            error: error[i].clone(),
        })
        .collect()
}

/// Walks every parent chain once, marking queues on a cycle and queues below a broken
/// queue. `error` already holds the missing-parent errors.
fn mark_broken(
    queues: &[CapacityInput],
    parent: &[Option<usize>],
    error: &mut [Option<HierarchyError>],
) {
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        New,
        OnPath,
        Done,
    }
    let mut seen = vec![Seen::New; queues.len()];
    for start in 0..queues.len() {
        let mut path: Vec<usize> = Vec::new();
        let mut at = Some(start);
        // Follow parents until the chain ends, meets a resolved queue, or loops.
        let cause: Option<HierarchyError> = loop {
            let Some(i) = at else { break None };
            match seen[i] {
                Seen::Done => {
                    break error[i]
                        .as_ref()
                        .map(|_| HierarchyError::BrokenAncestor(queues[i].name.clone()));
                }
                Seen::OnPath => {
                    let pos = path.iter().position(|&p| p == i).unwrap_or(0);
                    let cycle: Vec<String> = path[pos..]
                        .iter()
                        .map(|&p| queues[p].name.clone())
                        .collect();
                    for &p in &path[pos..] {
                        error[p] = Some(HierarchyError::Cycle(cycle.clone()));
                        seen[p] = Seen::Done;
                    }
                    path.truncate(pos);
                    break Some(HierarchyError::BrokenAncestor(queues[i].name.clone()));
                }
                Seen::New => {
                    seen[i] = Seen::OnPath;
                    path.push(i);
                    if error[i].is_some() {
                        // Missing parent: this queue is the cause for those below it.
                        path.pop();
                        seen[i] = Seen::Done;
                        break Some(HierarchyError::BrokenAncestor(queues[i].name.clone()));
                    }
                    at = parent[i];
                }
            }
        };
        // Queues on the path sit below the point where the walk stopped.
        for &p in &path {
            if let Some(cause) = &cause {
                error[p] = Some(cause.clone());
            }
            seen[p] = Seen::Done;
        }
    }
}

/// A child's capability: its own dimensions, plus the parent's for the rest.
fn inherit(own: Option<&Resources>, parent: Option<&Resources>) -> Option<Resources> {
    match (own, parent) {
        (None, None) => None,
        (Some(c), None) => Some(c.clone()),
        (None, Some(p)) => Some(p.clone()),
        (Some(c), Some(p)) => {
            let mut out = p.clone();
            for (dim, v) in c.iter() {
                out.set(dim, v);
            }
            Some(out)
        }
    }
}

/// Dominant share over the deserved dimensions; a queue without deserved resources
/// (best effort) has share 1, so it is served after every queue below its deserved
/// amount, as in Volcano.
pub fn share(allocated: &Resources, deserved: &Resources) -> f64 {
    if deserved.is_empty() {
        return 1.0;
    }
    deserved
        .iter()
        .map(|(dim, d)| ratio(allocated.get(dim), d))
        .fold(0.0, f64::max)
}

/// The first dimension the candidate requests on which `allocated + candidate` would
/// exceed the real capability.
pub fn allocatable_excess(
    allocated: &Resources,
    candidate: &Resources,
    real_capability: &Resources,
) -> Option<Excess> {
    allocated
        .plus(candidate)
        .first_excess_on(real_capability, requested_dims(candidate))
}

/// Volcano's rule for a queue that may reclaim: on at least one dimension the
/// candidate asks for, `allocated + candidate` stays within `deserved` (a
/// dimension without a deserved amount deserves none). Otherwise the first
/// requested dimension, to say why not.
pub fn within_deserved_somewhere(
    allocated: &Resources,
    candidate: &Resources,
    deserved: &Resources,
) -> Result<(), Excess> {
    let future = allocated.plus(candidate);
    let mut first = None;
    for dim in requested_dims(candidate) {
        let limit = deserved.get(dim);
        let amount = future.get(dim);
        if amount <= limit {
            return Ok(());
        }
        first.get_or_insert(Excess {
            dimension: dim.to_owned(),
            amount,
            limit,
        });
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = "nvidia.com/gpu";

    fn gpus(n: i64) -> Resources {
        Resources::from_units([(GPU, n)])
    }

    fn q(name: &str, parent: Option<&str>) -> CapacityInput {
        CapacityInput {
            name: name.to_owned(),
            parent: parent.map(str::to_owned),
            capability: None,
            deserved: None,
            guarantee: Resources::new(),
        }
    }

    /// The real capability in whole GPUs.
    fn real_gpus(node: &CapacityNode) -> Option<i64> {
        node.real_capability
            .as_ref()
            .and_then(|r| r.limit(GPU))
            .map(|milli| milli / 1000)
    }

    #[test]
    fn flat_queues_share_the_cluster_minus_guarantees() {
        // 16 GPUs; a guarantees 4 and has capability 10; b guarantees 2; c nothing.
        // a: min(16 − 6 + 4, 10) = 10; b: 16 − 6 + 2 = 12; c: 16 − 6 = 10.
        let queues = vec![
            CapacityInput {
                capability: Some(gpus(10)),
                deserved: Some(gpus(12)),
                guarantee: gpus(4),
                ..q("a", Some("ignored-without-hierarchy"))
            },
            CapacityInput {
                deserved: Some(gpus(1)),
                guarantee: gpus(2),
                ..q("b", None)
            },
            q("c", None),
        ];
        let nodes = build(&gpus(16), &queues, false);
        assert_eq!(
            nodes.iter().map(real_gpus).collect::<Vec<_>>(),
            vec![Some(10), Some(12), Some(10)]
        );
        // a: deserved 12 clamped to realCapability 10; b: max(1, guarantee 2) = 2;
        // c: no deserved → empty (best effort).
        assert_eq!(nodes[0].deserved, gpus(10));
        assert_eq!(nodes[1].deserved, gpus(2));
        assert!(nodes[2].deserved.is_empty());
        assert!(
            nodes
                .iter()
                .all(|n| n.error.is_none() && n.ancestors.is_empty())
        );
    }

    #[test]
    fn child_is_limited_by_parent_and_sibling_guarantees() {
        // root (cluster 32 GPUs) → org (capability 16) → {team-a (guarantee 4),
        // team-b (guarantee 2, capability 20)}, and top-level other (guarantee 8).
        let queues = vec![
            q("root", None),
            CapacityInput {
                capability: Some(Resources::from_units([(GPU, 16), ("cpu", 64)])),
                ..q("org", None)
            },
            CapacityInput {
                guarantee: gpus(4),
                ..q("team-a", Some("org"))
            },
            CapacityInput {
                guarantee: gpus(2),
                capability: Some(gpus(20)),
                ..q("team-b", Some("org"))
            },
            CapacityInput {
                guarantee: gpus(8),
                ..q("other", Some("root"))
            },
        ];
        let nodes = build(&gpus(32), &queues, true);
        // root: the total, 32.
        assert_eq!(real_gpus(&nodes[0]), Some(32));
        // org: min((32 − 8) + 0, 16) = 16; other: (32 − 8) + 8 = 32.
        assert_eq!(real_gpus(&nodes[1]), Some(16));
        assert_eq!(real_gpus(&nodes[4]), Some(32));
        // team-a: (16 − 6) + 4 = 14; team-b: min((16 − 6) + 2, 20) = 12.
        assert_eq!(real_gpus(&nodes[2]), Some(14));
        assert_eq!(real_gpus(&nodes[3]), Some(12));
        // team-a inherits org's cpu capability; team-b keeps its own gpu 20 and
        // inherits cpu 64.
        assert_eq!(
            nodes[2].capability,
            Some(Resources::from_units([(GPU, 16), ("cpu", 64)]))
        );
        assert_eq!(
            nodes[3].capability,
            Some(Resources::from_units([(GPU, 20), ("cpu", 64)]))
        );
        assert_eq!(
            nodes[2].real_capability.as_ref().unwrap().limit("cpu"),
            Some(64_000)
        );
        assert_eq!(nodes[2].ancestors, vec![1, 0]);
        assert_eq!(nodes[1].children, vec![2, 3]);
        assert!(nodes[2].is_leaf() && !nodes[1].is_leaf());
        // Root without its own deserved reports the sum of its children's.
        assert_eq!(nodes[0].deserved, gpus(8));
    }

    #[test]
    fn implicit_root_when_no_root_queue_is_given() {
        let queues = vec![
            CapacityInput {
                capability: Some(gpus(4)),
                ..q("org", None)
            },
            q("team", Some("org")),
        ];
        let nodes = build(&gpus(32), &queues, true);
        assert_eq!(real_gpus(&nodes[0]), Some(4));
        assert_eq!(real_gpus(&nodes[1]), Some(4));
        assert_eq!(nodes[1].ancestors, vec![0]);
    }

    #[test]
    fn cycles_and_missing_parents_break_only_the_queues_involved() {
        let queues = vec![
            q("a", Some("b")),
            q("b", Some("a")),
            q("below-cycle", Some("a")),
            q("orphan", Some("nowhere")),
            q("below-orphan", Some("orphan")),
            q("fine", None),
            q("self", Some("self")),
        ];
        let nodes = build(&gpus(8), &queues, true);
        assert!(matches!(&nodes[0].error, Some(HierarchyError::Cycle(p)) if p.len() == 2));
        assert!(matches!(&nodes[1].error, Some(HierarchyError::Cycle(_))));
        assert_eq!(
            nodes[2].error,
            Some(HierarchyError::BrokenAncestor("a".into()))
        );
        assert_eq!(
            nodes[3].error,
            Some(HierarchyError::MissingParent("nowhere".into()))
        );
        assert_eq!(
            nodes[4].error,
            Some(HierarchyError::BrokenAncestor("orphan".into()))
        );
        assert_eq!(nodes[5].error, None);
        assert_eq!(real_gpus(&nodes[5]), Some(8));
        assert_eq!(
            nodes[6].error.as_ref().map(ToString::to_string).as_deref(),
            Some("queue hierarchy has a cycle: self -> self")
        );
        assert_eq!(nodes[0].real_capability, None);
        assert_eq!(
            nodes[3].error.as_ref().map(ToString::to_string).as_deref(),
            Some("parent queue \"nowhere\" does not exist")
        );
    }

    #[test]
    fn allocatable_uses_real_capability_on_requested_dimensions() {
        let real = Resources::from_units([(GPU, 8), ("cpu", 4)]);
        let e = allocatable_excess(
            &gpus(7),
            &Resources::from_units([(GPU, 2), ("cpu", 1)]),
            &real,
        )
        .unwrap();
        assert_eq!(
            (e.dimension.as_str(), e.amount, e.limit),
            (GPU, 9_000, 8_000)
        );
        assert!(allocatable_excess(&gpus(7), &gpus(1), &real).is_none());
        // A dimension the real capability does not name is unlimited.
        assert!(
            allocatable_excess(
                &Resources::new(),
                &Resources::from_units([("memory", 1 << 40)]),
                &real
            )
            .is_none()
        );
    }

    #[test]
    fn best_effort_queues_share_one() {
        assert_eq!(share(&gpus(0), &Resources::new()), 1.0);
        assert_eq!(share(&gpus(3), &gpus(4)), 0.75);
        assert_eq!(share(&gpus(3), &Resources::from_units([(GPU, 0)])), 1.0);
    }
}
