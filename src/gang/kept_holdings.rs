//! What the ledger holds for each member, kept between cycles. Asking the ledger
//! about every one of tens of thousands of waiting members each cycle cost more
//! than planning; instead a cycle looks again only at the members the ledger's
//! journal says changed holding and the members the book says changed, and at
//! every member when the set of nodes changed or the journal no longer reaches
//! back to the last cycle.

use super::book::{GangBook, Member, MemberPhase};
use crate::ledger::{JournalCursor, Ledger};
use crate::placement::resource_fit::pod_footprint;
use crate::resources::Resources;
use crate::volcano::framework::job::TaskPlacement;
use foldhash::{HashMap, HashSet, HashSetExt};
use std::collections::BTreeSet;

/// Holdings of members, and what members planned onto a node but not bound yet
/// take of it.
#[derive(Default)]
pub struct KeptHoldings {
    /// Where the ledger's journal was read up to.
    cursor: Option<JournalCursor>,
    /// The nodes the holdings were worked out against.
    nodes: BTreeSet<String>,
    /// What the ledger holds (or has promised) for each member.
    held: HashMap<String, TaskPlacement>,
    /// Members whose holding is a pipelined plan still waiting for its victims.
    pipelined: HashSet<String>,
    /// Members held on each node.
    by_node: HashMap<String, BTreeSet<String>>,
    /// What each pending member planned onto a node takes of it (bound pods are
    /// counted already, from the pod watch): node, footprint.
    planned: HashMap<String, (String, Resources)>,
    /// Those footprints added up by node, for nodes that have any.
    planned_by_node: HashMap<String, Resources>,
    /// Nodes whose sum must be added up again.
    planned_stale: BTreeSet<String>,
    /// Nodes whose sum was added up again since last taken: the nodes the
    /// picture builds again for what is planned onto them.
    planned_moved: BTreeSet<String>,
    /// Pending members that still carry our gate although the ledger holds a
    /// plan for them or a node is planned for them: a commit interrupted before
    /// every gate was lifted, or a pipelined plan whose victims are gone.
    planned_gated: BTreeSet<String>,
}

impl KeptHoldings {
    /// Brings the holdings up to `ledger` and `book` (`nodes`: every node in the
    /// ledger when the set of nodes changed since the last refresh, `None` when
    /// it did not; `changed`: members the book changed, or `None` for all).
    /// Returns the members whose holding changed, or `None` when every member
    /// was looked at again.
    pub fn refresh(
        &mut self,
        ledger: &Ledger,
        book: &GangBook,
        nodes: Option<BTreeSet<String>>,
        changed: Option<&HashSet<String>>,
    ) -> Option<HashSet<String>> {
        let journal = ledger.holdings_journal();
        let since = self.cursor.and_then(|cursor| journal.since(cursor));
        self.cursor = Some(journal.end());
        let look_again = match (since, changed) {
            (Some(since), Some(changed)) if nodes.is_none() => {
                let mut uids: HashSet<String> = changed.clone();
                uids.extend(since.map(|uid| uid.to_string()));
                uids
            }
            _ => {
                *self = Self {
                    cursor: self.cursor,
                    nodes: nodes.unwrap_or_else(|| std::mem::take(&mut self.nodes)),
                    ..Self::default()
                };
                for m in book.members().values() {
                    self.look_at(ledger, &m.uid, Some(m));
                }
                self.add_up_planned();
                return None;
            }
        };
        let mut moved = HashSet::new();
        for uid in look_again {
            let member = book.members().get(&uid).map(|m| &**m);
            if self.look_at(ledger, &uid, member) {
                moved.insert(uid);
            }
        }
        self.add_up_planned();
        Some(moved)
    }

    /// Works out one member's holding again (`member`: `None` when it left the
    /// book); true when it changed.
    fn look_at(&mut self, ledger: &Ledger, uid: &str, member: Option<&Member>) -> bool {
        let mut pipelined = false;
        let held = member.and_then(|m| {
            let held = match ledger.pod(uid) {
                Some(p) => Some(TaskPlacement {
                    node: p.node.clone(),
                    devices: p.devices.clone(),
                    init_count: p.init_count,
                }),
                None => ledger.pledge_of(uid).map(|pledge| {
                    pipelined = true;
                    TaskPlacement {
                        node: pledge.entry.node.clone(),
                        devices: pledge.entry.devices.clone(),
                        init_count: pledge.entry.init_count,
                    }
                }),
            };
            held.or_else(|| {
                let node = node_without_gpus(m)?;
                // A plan interrupted before the gate was lifted, onto a node that
                // is gone since: the member is still gated, so it is planned again.
                if m.gated && !self.nodes.contains(&node) {
                    return None;
                }
                Some(TaskPlacement {
                    node,
                    devices: Vec::new(),
                    init_count: 0,
                })
            })
        });
        let planned_gated = member.is_some_and(|m| {
            m.gated
                && m.phase == MemberPhase::Pending
                && (ledger.pod(uid).is_some() || m.planned_node.is_some())
        });
        if planned_gated {
            self.planned_gated.insert(uid.to_string());
        } else {
            self.planned_gated.remove(uid);
        }
        let planned = match (member, &held) {
            (Some(m), Some(h))
                if m.phase == MemberPhase::Pending && self.nodes.contains(&h.node) =>
            {
                Some((h.node.clone(), pod_footprint(&m.pod)))
            }
            _ => None,
        };
        let planned_on = planned.as_ref().map(|(node, _)| node.clone());
        let before = match planned {
            Some(p) => self.planned.insert(uid.to_string(), p),
            None => self.planned.remove(uid),
        };
        self.planned_stale.extend(before.map(|(node, _)| node));
        self.planned_stale.extend(planned_on);
        let was_pipelined = if pipelined {
            !self.pipelined.insert(uid.to_string())
        } else {
            self.pipelined.remove(uid)
        };
        let before = match held {
            Some(h) => {
                self.by_node
                    .entry(h.node.clone())
                    .or_default()
                    .insert(uid.to_string());
                self.held.insert(uid.to_string(), h)
            }
            None => self.held.remove(uid),
        };
        if let Some(before) = &before
            && self.held.get(uid).is_none_or(|now| now.node != before.node)
            && let Some(uids) = self.by_node.get_mut(&before.node)
        {
            uids.remove(uid);
            if uids.is_empty() {
                self.by_node.remove(&before.node);
            }
        }
        before.as_ref() != self.held.get(uid) || was_pipelined != pipelined
    }

    /// What the ledger holds (or has promised) for a member.
    pub fn held(&self, uid: &str) -> Option<&TaskPlacement> {
        self.held.get(uid)
    }

    /// Whether a member's holding is a pipelined plan waiting for its victims.
    pub fn pipelined(&self, uid: &str) -> bool {
        self.pipelined.contains(uid)
    }

    /// The members held on `node`.
    pub fn on_node(&self, node: &str) -> impl Iterator<Item = &String> {
        self.by_node.get(node).into_iter().flatten()
    }

    /// Pending members that carry our gate although they are planned (see the
    /// field), as of the last refresh.
    pub fn planned_gated(&self) -> &BTreeSet<String> {
        &self.planned_gated
    }

    /// What the pending members planned onto `node` take of it.
    pub fn planned_on(&self, node: &str) -> Option<&Resources> {
        self.planned_by_node.get(node)
    }

    /// The nodes whose planned sum was added up again since the last call.
    pub fn take_planned_moved(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.planned_moved)
    }

    /// Adds up again what is planned onto the nodes whose members changed.
    fn add_up_planned(&mut self) {
        for node in std::mem::take(&mut self.planned_stale) {
            self.planned_moved.insert(node.clone());
            let mut total = Resources::default();
            let mut any = false;
            for uid in self.by_node.get(&node).into_iter().flatten() {
                if let Some((on, footprint)) = self.planned.get(uid)
                    && *on == node
                {
                    total.add(footprint);
                    any = true;
                }
            }
            if any {
                self.planned_by_node.insert(node, total);
            } else {
                self.planned_by_node.remove(&node);
            }
        }
    }
}

/// The node of a member the ledger holds nothing for: the one it is bound to,
/// or the one planned for it (a pod that asks for no vGPU).
fn node_without_gpus(m: &Member) -> Option<String> {
    match m.phase {
        MemberPhase::Placed => m
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        MemberPhase::Pending => m.planned_node.clone(),
        MemberPhase::Succeeded | MemberPhase::Failed => None,
    }
}
