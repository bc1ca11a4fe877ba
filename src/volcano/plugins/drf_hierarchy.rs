//! Hierarchical DRF (Volcano's hdrf): queues placed in a tree by their
//! `volcano.sh/hierarchy` annotation (`root/eng/prod`) with a weight per level
//! (`volcano.sh/hierarchy-weights`, `1/2/8`); jobs are the leaves. Each inner
//! node's share is its children's allocations rescaled to the smallest dominant
//! share among its demanding children, so a level is compared by weighted share and
//! a saturated subtree (one that cannot use more) yields to demanding ones.

use crate::resources::Resources;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Allocations in milli-units, as floats (inner nodes hold rescaled amounts).
type Amounts = BTreeMap<String, f64>;

#[derive(Debug, Clone, PartialEq)]
struct Node {
    weight: f64,
    allocated: Amounts,
    share: f64,
    saturated: bool,
    /// A job's total request (leaves only).
    request: Amounts,
    /// `None` for a leaf (a job).
    children: Option<BTreeMap<String, Node>>,
}

impl Node {
    fn inner(weight: f64) -> Self {
        Self {
            weight,
            allocated: Amounts::new(),
            share: 0.0,
            saturated: false,
            request: Amounts::new(),
            children: Some(BTreeMap::new()),
        }
    }
}

/// The tree of queues and jobs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HdrfTree {
    root: Node,
}

impl Default for HdrfTree {
    fn default() -> Self {
        Self {
            root: Node::inner(1.0),
        }
    }
}

/// A queue's path below the root and the weight of each level, from its
/// annotations (missing or unreadable weights count 1, as do weights below 1).
pub(crate) fn queue_path(hierarchy: Option<&str>, weights: Option<&str>) -> Vec<(String, f64)> {
    let paths: Vec<&str> = hierarchy.unwrap_or("").split('/').collect();
    let weights: Vec<&str> = weights.unwrap_or("").split('/').collect();
    (1..paths.len())
        .map(|i| {
            let w = weights
                .get(i)
                .and_then(|w| w.trim().parse::<f64>().ok())
                .filter(|w| w.is_finite() && *w >= 1.0)
                .unwrap_or(1.0);
            (paths[i].to_string(), w)
        })
        .collect()
}

/// `allocated / total` on the dimension where it is largest (a dimension the
/// cluster lacks counts 1 when something of it is allocated).
pub(crate) fn dominant_share(allocated: &Amounts, total: &Resources) -> f64 {
    total
        .iter()
        .map(|(dim, t)| {
            let a = allocated.get(dim).copied().unwrap_or(0.0);
            if t == 0 {
                if a == 0.0 { 0.0 } else { 1.0 }
            } else {
                a / t as f64
            }
        })
        .fold(0.0, f64::max)
}

/// Amounts of a [`Resources`].
pub(crate) fn amounts(r: &Resources) -> Amounts {
    r.iter().map(|(d, v)| (d.to_string(), v as f64)).collect()
}

impl HdrfTree {
    /// Puts (or updates) a job under its queue's path.
    pub fn set_job(
        &mut self,
        path: &[(String, f64)],
        job: &str,
        allocated: &Resources,
        request: &Resources,
        total: &Resources,
    ) {
        let mut node = &mut self.root;
        for (name, weight) in path {
            let Some(children) = node.children.as_mut() else {
                return;
            };
            node = children
                .entry(name.clone())
                .or_insert_with(|| Node::inner(*weight));
        }
        let Some(children) = node.children.as_mut() else {
            return;
        };
        let allocated = amounts(allocated);
        let share = dominant_share(&allocated, total);
        children.insert(
            job.to_string(),
            Node {
                weight: 1.0,
                allocated,
                share,
                saturated: false,
                request: amounts(request),
                children: None,
            },
        );
    }

    /// Recomputes every share bottom-up after allocations changed.
    pub fn update(&mut self, total: &Resources, total_allocated: &Resources) {
        let demanding: BTreeSet<String> = total
            .iter()
            .filter(|(dim, t)| total_allocated.get(dim) < *t)
            .map(|(dim, _)| dim.to_string())
            .collect();
        update_node(&mut self.root, total, &demanding);
    }

    /// Queue order: down both paths from the root, a demanding subtree before a
    /// saturated one, then the lower weighted share; equal levels go one deeper.
    pub fn compare(&self, left: &[(String, f64)], right: &[(String, f64)]) -> Ordering {
        let depth = left.len().min(right.len()) + 1;
        let (mut l, mut r) = (&self.root, &self.root);
        for i in 0..depth {
            match (l.saturated, r.saturated) {
                (false, true) => return Ordering::Less,
                (true, false) => return Ordering::Greater,
                _ => {}
            }
            let (ls, rs) = (l.share / l.weight, r.share / r.weight);
            if ls != rs {
                return ls.total_cmp(&rs);
            }
            if i + 1 < depth {
                let (Some(nl), Some(nr)) = (child(l, &left[i].0), child(r, &right[i].0)) else {
                    return Ordering::Equal;
                };
                l = nl;
                r = nr;
            }
        }
        Ordering::Equal
    }
}

fn child<'n>(node: &'n Node, name: &str) -> Option<&'n Node> {
    node.children.as_ref().and_then(|c| c.get(name))
}

fn saturated_leaf(allocated: &Amounts, request: &Amounts, demanding: &BTreeSet<String>) -> bool {
    allocated.iter().any(|(dim, a)| {
        let req = request.get(dim).copied().unwrap_or(0.0);
        (*a != 0.0 && req != 0.0 && *a >= req) || (!demanding.contains(dim) && req != 0.0)
    })
}

fn update_node(node: &mut Node, total: &Resources, demanding: &BTreeSet<String>) {
    let Some(children) = node.children.as_mut() else {
        node.saturated = saturated_leaf(&node.allocated, &node.request, demanding);
        return;
    };
    let mut smallest = 1.0f64;
    for child in children.values_mut() {
        update_node(child, total, demanding);
        if child.share != 0.0 && !child.saturated {
            smallest = smallest.min(dominant_share(&child.allocated, total));
        }
    }
    let mut allocated = Amounts::new();
    let mut saturated = true;
    for child in children.values() {
        saturated &= child.saturated;
        if child.share == 0.0 {
            continue;
        }
        let scale = if child.saturated {
            1.0
        } else {
            smallest / child.share
        };
        for (dim, a) in &child.allocated {
            *allocated.entry(dim.clone()).or_default() += a * scale;
        }
    }
    node.share = dominant_share(&allocated, total);
    node.allocated = allocated;
    node.saturated = saturated;
}
