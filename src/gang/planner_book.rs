//! The planner's own copy of the gang book, kept between cycles. Copying the
//! whole book every cycle (and dropping the copy after) cost as much as planning
//! when tens of thousands of members wait; instead each cycle copies only the
//! members and PodGroups the book noted as changed, and says which gangs they
//! belong to (before and after the change), so the rest of the cycle looks at
//! those gangs only.

use super::book::{GangBook, GangKey, Member, member_order};
use super::watched_members::WatchedMembers;
use foldhash::{HashMap, HashSet};
use std::collections::BTreeSet;

/// What changed in the book since the last cycle.
#[derive(Debug, Default)]
pub struct BookDelta {
    /// Everything may have changed: the copy was just made whole.
    pub everything: bool,
    /// Pod UIDs of members added, changed or removed.
    pub members: HashSet<String>,
    /// Gangs those members belonged to or belong to now, and gangs whose
    /// PodGroup changed.
    pub gangs: HashSet<GangKey>,
}

/// The copy, with each gang's members indexed.
#[derive(Default)]
pub struct PlannerBook {
    /// `None` until the first cycle copies the book whole.
    book: Option<GangBook>,
    /// Each gang's members by pod UID.
    by_gang: HashMap<GangKey, BTreeSet<String>>,
    /// Members the cycle watches after planning.
    watched: WatchedMembers,
}

impl PlannerBook {
    /// Brings the copy up to `live` (which is why it is taken mutably: its notes
    /// of what changed are taken) and says what changed.
    pub fn follow(&mut self, live: &mut GangBook) -> BookDelta {
        let changes = live.take_changes();
        let Some(book) = self.book.as_mut() else {
            let book = live.clone();
            self.by_gang.clear();
            self.watched = WatchedMembers::default();
            for m in book.members().values() {
                self.by_gang
                    .entry(m.gang.clone())
                    .or_default()
                    .insert(m.uid.clone());
                self.watched.note(m);
            }
            self.book = Some(book);
            return BookDelta {
                everything: true,
                ..BookDelta::default()
            };
        };
        let mut gangs: HashSet<GangKey> = changes
            .groups
            .iter()
            .map(|(namespace, name)| GangKey {
                namespace: namespace.as_str().into(),
                name: name.as_str().into(),
                single: false,
            })
            .collect();
        for uid in &changes.members {
            if let Some(before) = book.members().get(uid) {
                gangs.insert(before.gang.clone());
                unindex(&mut self.by_gang, &before.gang, uid);
            }
            self.watched.forget(uid);
            if let Some(after) = live.members().get(uid) {
                self.watched.note(after);
                gangs.insert(after.gang.clone());
                self.by_gang
                    .entry(after.gang.clone())
                    .or_default()
                    .insert(uid.clone());
            }
        }
        book.follow(live, &changes);
        BookDelta {
            everything: false,
            members: changes.members,
            gangs,
        }
    }

    /// The copy as of the last [`PlannerBook::follow`].
    pub fn book(&self) -> &GangBook {
        static EMPTY: std::sync::OnceLock<GangBook> = std::sync::OnceLock::new();
        self.book
            .as_ref()
            .unwrap_or_else(|| EMPTY.get_or_init(GangBook::default))
    }

    /// The members of one gang as of the last [`PlannerBook::follow`], by pod
    /// UID.
    pub fn member_uids_of(&self, gang: &GangKey) -> impl Iterator<Item = &String> {
        self.by_gang.get(gang).into_iter().flatten()
    }

    /// Members the cycle watches after planning, as of the last
    /// [`PlannerBook::follow`].
    pub fn watched(&self) -> &WatchedMembers {
        &self.watched
    }

    /// The members of `gang` in the live `book`, found through this copy's
    /// index and the members the book changed since it was copied, rather than
    /// by looking at every member of every gang.
    pub fn live_members_of<'b>(
        &'b self,
        book: &'b GangBook,
        gang: &'b GangKey,
    ) -> impl Iterator<Item = &'b Member> + 'b {
        let uids: BTreeSet<&String> = self
            .member_uids_of(gang)
            .chain(&book.pending_changes().members)
            .collect();
        uids.into_iter()
            .filter_map(|uid| book.members().get(uid))
            .map(|m| &**m)
            .filter(move |m| &m.gang == gang)
    }

    /// The members of one gang, in placement order.
    pub fn members_of(&self, gang: &GangKey) -> Vec<&Member> {
        let book = self.book();
        let mut members: Vec<&Member> = self
            .by_gang
            .get(gang)
            .into_iter()
            .flatten()
            .filter_map(|uid| book.members().get(uid).map(|m| &**m))
            .collect();
        members.sort_by(|a, b| member_order(a, b));
        members
    }
}

fn unindex(by_gang: &mut HashMap<GangKey, BTreeSet<String>>, gang: &GangKey, uid: &str) {
    if let Some(uids) = by_gang.get_mut(gang) {
        uids.remove(uid);
        if uids.is_empty() {
            by_gang.remove(gang);
        }
    }
}
