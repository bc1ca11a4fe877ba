//! Handing a node's lock from one bind to the next.
//!
//! HAMi's device plugin finds the pod it allocates for by the node lock, so only
//! one pod per node may be between its `/bind` and the device plugin's answer.
//! Binds for the same node therefore take turns here, in the order they arrived,
//! and the one whose turn it is waits for the lock to be released: it is woken by
//! the watch that sees the release (or sees the holder finish, vanish or be handed
//! its GPUs), not by a timer, so the next bind starts as soon as the node is free.
//! A slow re-check remains for what no watch announces (a cluster file, a holder
//! this process never heard of).
//!
//! The same book says what a pod sent to a node now would wait for: the binds
//! ahead of it (waiting for or holding the turn, or a lock the watch shows
//! held), how long the device plugin has lately taken to release a lock, and how
//! long the current lock has been held. `/filter` reads
//! that to send the next pod to a node nearly as good instead of queueing it
//! behind the device plugin (see `scheduler::busy_nodes`).

use super::release_grace::ReleaseGrace;
use super::value::parse_lock_value;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Pods answered by the device plugin remembered per node: a lock holder is
/// one of the last few pods bound there.
const ANSWERED_KEPT: usize = 8;

/// Weight of the newest lock hold in the running mean of hold times.
const HOLD_TIME_WEIGHT: f64 = 0.2;

/// How long a placement `/filter` answered counts as a bind on its way: kube-
/// scheduler sends the bind right after the filter, so one that has not come by
/// then is not coming soon.
const BIND_ON_ITS_WAY: Duration = Duration::from_secs(2);

/// Most placements remembered over all nodes for the recent arrival rate: the
/// question asked of them is whether a few came within one lock's hold.
const PLACEMENTS_KEPT: usize = 64;

/// Turns and lock sightings of every node that had a bind or a lock.
#[derive(Debug, Default)]
pub struct LockHandoff {
    nodes: Mutex<HashMap<String, Arc<NodeHandoff>>>,
    /// The resourceVersion of each node the watch showed unlocked and that has
    /// no entry in `nodes` (never locked, never bound to): a first bind there
    /// takes the lock from it without reading the node. Locked after `nodes`.
    unlocked_versions: Mutex<HashMap<String, String>>,
    /// Running mean of how long a lock taken here stays held (taken to seen
    /// released).
    hold_time: Mutex<Option<Duration>>,
    /// How long a lock whose holder was answered is left for the device
    /// plugin to release, from how long its releases have lately taken.
    release_grace: ReleaseGrace,
    /// When `/filter` last placed pods, on any node (oldest first; at most
    /// [`PLACEMENTS_KEPT`], none older than [`BIND_ON_ITS_WAY`]).
    recent_placements: Mutex<std::collections::VecDeque<Instant>>,
    /// The nodes that may have binds ahead or a lock held: every node with a
    /// bind, a placement on its way, a lock or a claim is here, and a node
    /// found with none of them is dropped (see [`LockHandoff::active_nodes`]).
    /// `nodes` keeps every node that ever had a bind; questions asked at every
    /// `/filter` of a burst walk this list instead, a few dozen nodes rather
    /// than every one of a large cluster. Locked after `nodes`.
    active: Mutex<Vec<Arc<NodeHandoff>>>,
}

#[derive(Debug)]
struct NodeHandoff {
    /// One bind at a time; tokio's mutex is fair, so turns go in arrival order.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Bumped whenever something is seen that may have freed the lock.
    changes: watch::Sender<u64>,
    /// Bumped whenever the watch shows the node, whatever changed: a lock write
    /// that met a newer node waits for it here instead of reading it.
    sightings: watch::Sender<u64>,
    /// Binds waiting for their turn or holding it.
    binds: AtomicUsize,
    /// The lock annotation, and the node's resourceVersion, as the watch last
    /// showed them (one lock, so the two always belong together).
    lock_seen: Mutex<LockSighting>,
    /// The lock's current hold, if it is held.
    hold: Mutex<Option<Hold>>,
    /// The resourceVersion the last lock write of this process was made over:
    /// while the watch still shows the node at that version, its copy predates
    /// the write and cannot be used to take the lock.
    written_over: Mutex<Option<String>>,
    /// When `/filter` placed pods here whose binds have not asked for a turn.
    placed: Mutex<std::collections::VecDeque<Instant>>,
    /// The last pods (namespace, name) the device plugin was seen answering
    /// for, and when.
    answered: Mutex<std::collections::VecDeque<(String, String, Instant)>>,
    /// Listed in [`LockHandoff::active`]; changed only under its lock.
    listed_active: AtomicBool,
}

/// A node's lock and resourceVersion as the watch showed them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockSighting {
    /// The lock annotation (`None`: free).
    pub lock: Option<String>,
    /// The node's resourceVersion with that annotation.
    pub resource_version: Option<String>,
}

/// A node lock's current hold.
#[derive(Debug, Clone, Copy)]
struct Hold {
    /// Since when: taken by a bind here, or first seen held.
    since: Instant,
    /// Taken by a bind of this process (so `since` is when it started).
    taken_here: bool,
    /// A pod's claim under `--node-lock pods`: no annotation shows it, so only
    /// [`LockHandoff::claim_ended`] ends it.
    claimed: bool,
}

impl Default for NodeHandoff {
    fn default() -> Self {
        Self {
            turn: Arc::default(),
            changes: watch::Sender::new(0),
            sightings: watch::Sender::new(0),
            binds: AtomicUsize::new(0),
            lock_seen: Mutex::new(LockSighting::default()),
            hold: Mutex::new(None),
            written_over: Mutex::new(None),
            placed: Mutex::default(),
            answered: Mutex::default(),
            listed_active: AtomicBool::new(false),
        }
    }
}

impl NodeHandoff {
    fn bump(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// When the device plugin was seen answering for `namespace/pod` here,
    /// among the last pods it answered for.
    fn answered_at(&self, namespace: &str, pod: &str) -> Option<Instant> {
        answer_among(&self.answered.lock(), namespace, pod)
    }
}

/// When `namespace/pod` was answered, among the `answered` (namespace, pod,
/// when) of a node. Newest first: the pod asked about is nearly always the one
/// answered last (the lock's holder, or a watch event repeating the answer).
fn answer_among(
    answered: &std::collections::VecDeque<(String, String, Instant)>,
    namespace: &str,
    pod: &str,
) -> Option<Instant> {
    answered
        .iter()
        .rev()
        .find(|(ns, name, _)| ns == namespace && name == pod)
        .map(|(_, _, at)| *at)
}

/// Drops the placements (oldest first) whose bind is no longer on its way at
/// `now`.
fn drop_stale_placements(placements: &mut std::collections::VecDeque<Instant>, now: Instant) {
    while placements
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) > BIND_ON_ITS_WAY)
    {
        placements.pop_front();
    }
}

/// A bind's turn at a node's lock; the next bind's turn starts when it is dropped.
#[derive(Debug)]
pub struct Turn {
    node: Arc<NodeHandoff>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
    changes: watch::Receiver<u64>,
}

impl Turn {
    /// Marks what has been seen so far, before looking at the lock: a change
    /// announced after this wakes [`Turn::wait_for_release`] even if it came
    /// before the wait began.
    pub fn mark_seen(&mut self) {
        self.changes.borrow_and_update();
    }

    /// Waits until something that may have freed the lock is seen after the last
    /// [`Turn::mark_seen`], or `recheck` passes, whichever is first.
    pub async fn wait_for_release(&mut self, recheck: Duration) {
        // An error means the sender is gone, which cannot happen while `self.node`
        // holds it; the timeout covers it anyway.
        let _ = tokio::time::timeout(recheck, self.changes.changed()).await;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.node.binds.fetch_sub(1, Ordering::AcqRel);
    }
}

impl LockHandoff {
    fn node(&self, name: &str) -> Arc<NodeHandoff> {
        let mut nodes = self.nodes.lock();
        if let Some(handoff) = nodes.get(name) {
            return handoff.clone();
        }
        let handoff = Arc::new(NodeHandoff::default());
        if let Some(version) = self.unlocked_versions.lock().remove(name) {
            handoff.lock_seen.lock().resource_version = Some(version);
        }
        nodes.insert(name.to_string(), handoff.clone());
        handoff
    }

    /// Waits for the bind's turn at `node`'s lock; turns are given in the order
    /// they were asked for.
    pub async fn turn(&self, node: &str) -> Turn {
        let handoff = self.node(node);
        handoff.placed.lock().pop_front();
        handoff.binds.fetch_add(1, Ordering::AcqRel);
        self.activate(&handoff);
        let changes = handoff.changes.subscribe();
        // If this future is dropped while waiting, the count must still go down:
        // the guard below does it once the turn exists, this one until then.
        let pending = PendingBind(&handoff);
        let guard = handoff.turn.clone().lock_owned().await;
        std::mem::forget(pending);
        Turn {
            node: handoff,
            _guard: guard,
            changes,
        }
    }

    /// `/filter` placed a pod on `node` at `now`: its bind is on its way, and the
    /// next pod would queue behind it.
    pub fn placed(&self, node: &str, now: Instant) {
        let handoff = self.node(node);
        let mut placed = handoff.placed.lock();
        drop_stale_placements(&mut placed, now);
        placed.push_back(now);
        drop(placed);
        self.activate(&handoff);
        let mut recent = self.recent_placements.lock();
        drop_stale_placements(&mut recent, now);
        while recent.len() >= PLACEMENTS_KEPT {
            recent.pop_front();
        }
        recent.push_back(now);
    }

    /// How many pods `/filter` placed, on any node, within `span` before `now`
    /// (counted up to [`PLACEMENTS_KEPT`]): more than one while one lock is
    /// held means pods come faster than a node hands its lock on.
    pub fn placed_within(&self, span: Duration, now: Instant) -> usize {
        self.recent_placements
            .lock()
            .iter()
            .rev()
            .take_while(|t| now.saturating_duration_since(**t) <= span)
            .count()
    }

    /// A bind here is taking `node`'s lock at `now`, writing it over the node
    /// at resourceVersion `over`. Recorded before the write, so that the
    /// watch, which may show the write and the device plugin's release before
    /// the write's answer comes back, ends this hold and not a later one.
    pub fn writing(&self, node: &str, over: Option<&str>, now: Instant) {
        let handoff = self.node(node);
        *handoff.written_over.lock() = over.map(str::to_string);
        *handoff.hold.lock() = Some(Hold {
            since: now,
            taken_here: true,
            claimed: false,
        });
        self.activate(&handoff);
    }

    /// `--node-lock pods`: `node` is held for a pod since `now`, claimed by a
    /// bind here (`taken_here`) or seen allocating by the watch; the node
    /// counts as held until [`LockHandoff::claim_ended`].
    pub fn claimed(&self, node: &str, now: Instant, taken_here: bool) {
        let handoff = self.node(node);
        *handoff.hold.lock() = Some(Hold {
            since: now,
            taken_here,
            claimed: true,
        });
        self.activate(&handoff);
    }

    /// `--node-lock pods`: the pod that held `node` was answered, is gone, or
    /// its bind failed, at `now`: the next bind there may go.
    pub fn claim_ended(&self, node: &str, now: Instant) {
        let Some(handoff) = self.nodes.lock().get(node).cloned() else {
            return;
        };
        let ended = {
            let mut hold = handoff.hold.lock();
            match *hold {
                Some(h) if h.claimed => hold.take(),
                _ => None,
            }
        };
        // Only a hold timed from its bind says how long the device plugin takes.
        if let Some(ended) = ended.filter(|h| h.taken_here) {
            self.record_hold(now.saturating_duration_since(ended.since));
        }
        handoff.bump();
    }

    /// The write announced by [`LockHandoff::writing`] was refused: the watch
    /// will not show a lock of ours.
    pub fn write_refused(&self, node: &str) {
        let handoff = self.node(node);
        *handoff.written_over.lock() = None;
        let mut hold = handoff.hold.lock();
        if hold.is_some_and(|h| h.taken_here) {
            *hold = None;
        }
    }

    /// Records the node's lock annotation as the watch shows it `now`; a change
    /// wakes the bind waiting for that node, and a release is timed.
    pub fn observe_lock(&self, node: &str, lock: Option<&str>, now: Instant) {
        self.observe_node(node, lock, None, now);
    }

    /// [`LockHandoff::observe_lock`] with the resourceVersion of the node the
    /// watch showed, so a bind can take the lock from this copy without reading
    /// the node (see [`LockHandoff::sighting`]).
    pub fn observe_node(
        &self,
        node: &str,
        lock: Option<&str>,
        resource_version: Option<&str>,
        now: Instant,
    ) {
        let handoff = {
            let nodes = self.nodes.lock();
            match nodes.get(node) {
                Some(h) => h.clone(),
                // Nodes never locked and never bound to need no entry, only
                // their version.
                None if lock.is_none() => {
                    if let Some(version) = resource_version {
                        self.unlocked_versions
                            .lock()
                            .insert(node.to_string(), version.to_string());
                    }
                    return;
                }
                None => {
                    drop(nodes);
                    self.node(node)
                }
            }
        };
        let (changed, released) = {
            let mut seen = handoff.lock_seen.lock();
            seen.resource_version = resource_version.map(str::to_string);
            if seen.lock.as_deref() == lock {
                (false, None)
            } else {
                let before = std::mem::replace(&mut seen.lock, lock.map(str::to_string));
                (true, before.filter(|_| lock.is_none()))
            }
        };
        handoff.sightings.send_modify(|n| *n = n.wrapping_add(1));
        // A free lock with binds waiting wakes them even when the watch never
        // showed it held (our own write's event may come after its release).
        let free_for_waiters = lock.is_none() && handoff.binds.load(Ordering::Acquire) > 0;
        // The node as it was before a lock write of ours (shown again, say, by a
        // periodic pass over the watch's store) says nothing of that lock.
        let predates_own_write = resource_version.is_some()
            && handoff.written_over.lock().as_deref() == resource_version;
        if let Some(released) = released.filter(|_| !predates_own_write) {
            self.time_release_after_answer(&handoff, &released, now);
        }
        if lock.is_some() {
            self.activate(&handoff);
        }
        if (changed || free_for_waiters) && !predates_own_write {
            let mut hold = handoff.hold.lock();
            match (lock, *hold) {
                (None, Some(ended)) if !ended.claimed => {
                    *hold = None;
                    // Only a hold timed from its start says how long the device
                    // plugin takes: one first seen already held (another
                    // process's, or one from before a restart, perhaps stale)
                    // would add however long it had been held unseen.
                    if ended.taken_here {
                        self.record_hold(now.saturating_duration_since(ended.since));
                    }
                }
                (Some(_), None) => {
                    *hold = Some(Hold {
                        since: now,
                        taken_here: false,
                        claimed: false,
                    });
                }
                _ => {}
            }
            drop(hold);
            handoff.bump();
        }
    }

    /// The watch showed the lock `released` (its value) at `now`: if the
    /// device plugin was seen answering for its holder, how long the release
    /// took after that sets the grace later answers get.
    fn time_release_after_answer(&self, handoff: &NodeHandoff, released: &str, now: Instant) {
        let Some(owner) = parse_lock_value(released).ok().and_then(|v| v.owner) else {
            return;
        };
        if let Some(at) = handoff.answered_at(&owner.namespace, &owner.pod) {
            self.release_grace
                .released_after(now.saturating_duration_since(at));
        }
    }

    /// How long a lock whose holder the device plugin answered for is now left
    /// for the device plugin to release before a bind takes it over.
    pub fn release_grace(&self) -> Duration {
        self.release_grace.current()
    }

    fn record_hold(&self, held: Duration) {
        let mut mean = self.hold_time.lock();
        *mean = Some(match *mean {
            None => held,
            Some(m) => m.mul_f64(1.0 - HOLD_TIME_WEIGHT) + held.mul_f64(HOLD_TIME_WEIGHT),
        });
    }

    /// How long a lock has lately stayed held, from taken to seen released (a
    /// running mean); `None` until a release has been seen.
    pub fn mean_hold(&self) -> Option<Duration> {
        *self.hold_time.lock()
    }

    /// The longest any lock taken here and held at `now` has been held so far
    /// (`None` when none is): before the first release, a lower bound on how
    /// long the device plugin takes.
    pub fn longest_current_hold(&self, now: Instant) -> Option<Duration> {
        self.active_nodes(now)
            .iter()
            .filter_map(|h| *h.hold.lock())
            .filter(|hold| hold.taken_here)
            .map(|hold| now.saturating_duration_since(hold.since))
            .max()
    }

    /// How long `node`'s lock has been held at `now` (zero when it is free).
    pub fn held_for(&self, node: &str, now: Instant) -> Duration {
        self.nodes
            .lock()
            .get(node)
            .and_then(|h| *h.hold.lock())
            .map_or(Duration::ZERO, |hold| {
                now.saturating_duration_since(hold.since)
            })
    }

    fn binds_ahead(&self, handoff: &NodeHandoff, now: Instant) -> usize {
        let on_their_way = handoff
            .placed
            .lock()
            .iter()
            .filter(|t| now.saturating_duration_since(**t) <= BIND_ON_ITS_WAY)
            .count();
        let binds = handoff.binds.load(Ordering::Acquire) + on_their_way;
        // A lock held with no bind here: another process's bind, or ours that
        // returned before the device plugin answered (with `--node-lock pods`,
        // a pod's claim).
        let held = handoff.lock_seen.lock().lock.is_some()
            || handoff.hold.lock().is_some_and(|h| h.claimed);
        if binds == 0 && held { 1 } else { binds }
    }

    /// Binds a pod sent to `node` at `now` would queue behind: those waiting for
    /// or holding the turn, those `/filter` just sent there, or a held lock.
    pub fn binds_ahead_at(&self, node: &str, now: Instant) -> usize {
        self.nodes
            .lock()
            .get(node)
            .map_or(0, |h| self.binds_ahead(h, now))
    }

    /// Whether at least `count` nodes have binds a pod sent there at `now`
    /// would queue behind (stops counting there).
    pub fn nodes_with_binds_ahead_reach(&self, count: usize, now: Instant) -> bool {
        count == 0
            || self
                .active_nodes(now)
                .iter()
                .filter(|h| self.binds_ahead(h, now) > 0)
                .nth(count - 1)
                .is_some()
    }

    /// Lists `handoff` among the nodes that may have binds ahead or a lock
    /// held, after what puts it there was recorded.
    fn activate(&self, handoff: &Arc<NodeHandoff>) {
        let mut active = self.active.lock();
        if !handoff.listed_active.load(Ordering::Acquire) {
            handoff.listed_active.store(true, Ordering::Release);
            active.push(Arc::clone(handoff));
        }
    }

    /// The nodes that may have binds ahead or a lock held at `now`, those
    /// found with neither dropped from the list first. What lists a node again
    /// is recorded before it asks for the list's lock, which the pruning
    /// holds: a node dropped here either had nothing then or is listed again
    /// after.
    fn active_nodes(&self, now: Instant) -> Vec<Arc<NodeHandoff>> {
        let mut active = self.active.lock();
        active.retain(|h| {
            let placement_on_its_way = {
                let mut placed = h.placed.lock();
                drop_stale_placements(&mut placed, now);
                !placed.is_empty()
            };
            let keep = h.binds.load(Ordering::Acquire) > 0
                || placement_on_its_way
                || h.lock_seen.lock().lock.is_some()
                || h.hold.lock().is_some();
            if !keep {
                h.listed_active.store(false, Ordering::Release);
            }
            keep
        });
        active.clone()
    }

    /// The node's lock as the watch last showed it, with the node's
    /// resourceVersion then, for taking the lock without reading the node
    /// (`None`: not known well enough). A lock this process wrote over the
    /// version the watch still shows makes the copy known to be old.
    pub fn sighting(&self, node: &str) -> Option<LockSighting> {
        let handoff = {
            let nodes = self.nodes.lock();
            match nodes.get(node) {
                Some(h) => h.clone(),
                None => {
                    let version = self.unlocked_versions.lock().get(node).cloned()?;
                    return Some(LockSighting {
                        lock: None,
                        resource_version: Some(version),
                    });
                }
            }
        };
        let seen = handoff.lock_seen.lock().clone();
        seen.resource_version.as_ref()?;
        let own_write_unseen = *handoff.written_over.lock() == seen.resource_version;
        (!own_write_unseen).then_some(seen)
    }

    /// The node's lock as the watch shows it once that copy is usable and at a
    /// resourceVersion other than `stale` (the version a lock write was just
    /// refused at), waiting up to `patience` for the watch to deliver it: a
    /// write refused because the node changed, or one of ours the watch has not
    /// shown yet, is followed by the node's next event within milliseconds, and
    /// taking the lock from that costs no read. `None` when the watch never
    /// showed the node or does not deliver in time (then read it).
    pub async fn sighting_after(
        &self,
        node: &str,
        stale: Option<&str>,
        patience: Duration,
    ) -> Option<LockSighting> {
        let usable = || {
            self.sighting(node)
                .filter(|seen| seen.resource_version.as_deref() != stale)
        };
        if let Some(seen) = usable() {
            return Some(seen);
        }
        let known = {
            let nodes = self.nodes.lock();
            nodes
                .get(node)
                .is_some_and(|h| h.lock_seen.lock().resource_version.is_some())
                || self.unlocked_versions.lock().contains_key(node)
        };
        if !known {
            return None;
        }
        let mut sightings = self.node(node).sightings.subscribe();
        let wait = async {
            loop {
                sightings.borrow_and_update();
                if let Some(seen) = usable() {
                    return seen;
                }
                if sightings.changed().await.is_err() {
                    // The node was forgotten (deleted): nothing more will come.
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(patience, wait).await.ok()
    }

    /// The device plugin answered for `namespace/pod` on `node` (bind phase
    /// `success` or `failed`) at `now`: if that pod holds the node's lock, nobody
    /// waits for it any more.
    pub fn answered(&self, node: &str, namespace: &str, pod: &str, now: Instant) {
        let handoff = self.node(node);
        {
            let mut answered = handoff.answered.lock();
            if answer_among(&answered, namespace, pod).is_none() {
                if answered.len() >= ANSWERED_KEPT {
                    answered.pop_front();
                }
                answered.push_back((namespace.to_string(), pod.to_string(), now));
            }
        }
        handoff.bump();
    }

    /// Whether the device plugin answered for `namespace/pod` on `node` at least
    /// the release grace before `now` (among the last pods it answered for
    /// there). Its lock's release follows the answer: taking the lock over
    /// sooner would only race the release, a write that is refused.
    pub fn answered_long_ago(&self, node: &str, namespace: &str, pod: &str, now: Instant) -> bool {
        let grace = self.release_grace();
        let handoff = self.nodes.lock().get(node).cloned();
        handoff
            .and_then(|h| h.answered_at(namespace, pod))
            .is_some_and(|at| now.saturating_duration_since(at) >= grace)
    }

    /// How long until the newest answer on `node` is the release grace old, if
    /// it is younger: a bind waiting for a lock whose holder was answered looks
    /// again then, should the device plugin not release it.
    pub fn release_grace_left(&self, node: &str, now: Instant) -> Option<Duration> {
        let grace = self.release_grace();
        let handoff = self.nodes.lock().get(node).cloned()?;
        let newest = handoff.answered.lock().iter().map(|(_, _, at)| *at).max()?;
        let age = now.saturating_duration_since(newest);
        (age < grace).then(|| grace - age)
    }

    /// Wakes the bind waiting for `node`: the lock's holder may have finished,
    /// vanished or been handed its GPUs, any of which lets the lock be taken over.
    pub fn nudge(&self, node: &str) {
        let handoff = self.nodes.lock().get(node).cloned();
        if let Some(handoff) = handoff {
            handoff.bump();
        }
    }

    /// Binds waiting for or holding `node`'s turn.
    pub fn binds_at(&self, node: &str) -> usize {
        self.nodes
            .lock()
            .get(node)
            .map_or(0, |h| h.binds.load(Ordering::Acquire))
    }

    /// Forgets a node that no longer exists (binds still holding its turn keep
    /// their own reference).
    pub fn forget_node(&self, node: &str) {
        if let Some(handoff) = self.nodes.lock().remove(node) {
            let mut active = self.active.lock();
            active.retain(|h| !Arc::ptr_eq(h, &handoff));
            handoff.listed_active.store(false, Ordering::Release);
        }
        self.unlocked_versions.lock().remove(node);
    }
}

/// Counts a bind that asked for a turn and does not have it yet.
struct PendingBind<'a>(&'a NodeHandoff);

impl Drop for PendingBind<'_> {
    fn drop(&mut self) {
        self.0.binds.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[path = "active_nodes_tests.rs"]
mod active_nodes_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn turns_are_given_in_arrival_order() {
        let handoff = Arc::new(LockHandoff::default());
        let first = handoff.turn("gpu-node-1").await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for n in 0..4 {
            let (book, order) = (handoff.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = book.turn("gpu-node-1").await;
                order.lock().push(n);
            }));
            // Each asks before the next one does.
            while handoff.binds_at("gpu-node-1") < n + 2 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", Instant::now()), 5);
        drop(first);
        for task in waiting {
            task.await.expect("bind task");
        }
        assert_eq!(*order.lock(), vec![0, 1, 2, 3]);
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", Instant::now()), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_seen_by_the_watch_wakes_the_waiting_bind_before_the_recheck() {
        let handoff = LockHandoff::default();
        handoff.observe_lock(
            "gpu-node-1",
            Some("2026-08-01T06:00:00Z,ns,holder"),
            Instant::now(),
        );
        let mut turn = handoff.turn("gpu-node-1").await;
        turn.mark_seen();
        let started = tokio::time::Instant::now();
        let recheck = Duration::from_secs(30);
        let waiter = async {
            turn.wait_for_release(recheck).await;
            started.elapsed()
        };
        let release = async {
            tokio::task::yield_now().await;
            handoff.observe_lock("gpu-node-1", None, Instant::now());
        };
        let (waited, ()) = tokio::join!(waiter, release);
        // Paused time only moves when every task waits on a timer: a wake-up by
        // the release happens before any of the recheck's time has passed.
        assert!(waited < recheck, "woken by the recheck, not the release");
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_seen_before_the_wait_began_is_not_missed() {
        let handoff = LockHandoff::default();
        handoff.observe_lock(
            "gpu-node-1",
            Some("2026-08-01T06:00:00Z,ns,holder"),
            Instant::now(),
        );
        let mut turn = handoff.turn("gpu-node-1").await;
        turn.mark_seen();
        // Released between reading the lock and starting to wait.
        handoff.nudge("gpu-node-1");
        let started = tokio::time::Instant::now();
        turn.wait_for_release(Duration::from_secs(30)).await;
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn holds_are_timed_from_taken_to_seen_released() {
        let handoff = LockHandoff::default();
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        assert_eq!(handoff.mean_hold(), None);
        handoff.writing("gpu-node-1", None, t0);
        handoff.observe_lock("gpu-node-1", Some("t,ns,a"), t0);
        assert_eq!(handoff.held_for("gpu-node-1", t0 + second), second);
        handoff.observe_lock("gpu-node-1", None, t0 + second / 2);
        assert_eq!(handoff.mean_hold(), Some(second / 2));
        assert_eq!(handoff.held_for("gpu-node-1", t0 + second), Duration::ZERO);
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", Instant::now()), 0);
        // Held by a pod this process did not bind: one hold ahead, timed from
        // when the watch showed it, but not a measure of the device plugin (it
        // may have been held long before it was seen).
        handoff.observe_lock("gpu-node-1", Some("t,ns,b"), t0 + second);
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", t0 + second), 1);
        assert_eq!(handoff.held_for("gpu-node-1", t0 + 3 * second), 2 * second);
        assert_eq!(handoff.longest_current_hold(t0 + 3 * second), None);
        handoff.observe_lock("gpu-node-1", None, t0 + 3 * second);
        assert_eq!(handoff.mean_hold(), Some(second / 2));
        // The running mean moves toward the newest hold taken here.
        handoff.writing("gpu-node-1", None, t0 + 3 * second);
        handoff.observe_lock("gpu-node-1", Some("t,ns,c"), t0 + 3 * second);
        handoff.observe_lock("gpu-node-1", None, t0 + 5 * second);
        let mean = handoff.mean_hold().unwrap_or_default();
        assert!(mean > second / 2 && mean < 2 * second, "{mean:?}");
    }

    #[test]
    fn the_longest_current_hold_counts_locks_held_now() {
        let handoff = LockHandoff::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(handoff.longest_current_hold(t0), None);
        handoff.writing("gpu-node-1", None, t0);
        handoff.writing("gpu-node-2", None, t0 + ms(100));
        assert_eq!(handoff.longest_current_hold(t0 + ms(300)), Some(ms(300)));
        handoff.observe_lock("gpu-node-1", Some("t,ns,a"), t0);
        handoff.observe_lock("gpu-node-1", None, t0 + ms(350));
        assert_eq!(handoff.longest_current_hold(t0 + ms(400)), Some(ms(300)));
        assert_eq!(handoff.mean_hold(), Some(ms(350)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_holding_its_node_without_a_lock_counts_as_a_hold_until_it_ends() {
        // `--node-lock pods`: no annotation shows the hold.
        let handoff = LockHandoff::default();
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        handoff.claimed("gpu-node-1", t0, true);
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", t0), 1);
        // The node's own events (no lock on it) do not end it, even with a
        // bind waiting there.
        let waiting = handoff.turn("gpu-node-1").await;
        handoff.observe_node("gpu-node-1", None, Some("8"), t0 + second / 4);
        assert_eq!(handoff.held_for("gpu-node-1", t0 + second / 2), second / 2);
        drop(waiting);
        handoff.claim_ended("gpu-node-1", t0 + second);
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", t0 + second), 0);
        assert_eq!(handoff.mean_hold(), Some(second));
        // One the watch showed (after a restart) counts, but says nothing of
        // how long the device plugin takes.
        handoff.claimed("gpu-node-2", t0, false);
        assert_eq!(handoff.binds_ahead_at("gpu-node-2", t0), 1);
        handoff.claim_ended("gpu-node-2", t0 + 9 * second);
        assert_eq!(handoff.binds_ahead_at("gpu-node-2", t0), 0);
        assert_eq!(handoff.mean_hold(), Some(second));
    }

    #[tokio::test(start_paused = true)]
    async fn a_placement_counts_as_a_bind_ahead_until_its_bind_asks_or_it_is_stale() {
        let handoff = LockHandoff::default();
        let t0 = Instant::now();
        handoff.placed("gpu-node-1", t0);
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", t0), 1);
        let turn = handoff.turn("gpu-node-1").await;
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", t0), 1);
        drop(turn);
        assert_eq!(handoff.binds_ahead_at("gpu-node-1", t0), 0);
        // A placement whose bind never came stops counting.
        handoff.placed("gpu-node-1", t0);
        assert_eq!(
            handoff.binds_ahead_at("gpu-node-1", t0 + 2 * BIND_ON_ITS_WAY),
            0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_bind_given_up_while_waiting_leaves_no_count_behind() {
        let handoff = LockHandoff::default();
        let first = handoff.turn("gpu-node-1").await;
        let second = tokio::time::timeout(Duration::from_millis(1), handoff.turn("gpu-node-1"));
        assert!(second.await.is_err());
        assert_eq!(handoff.binds_at("gpu-node-1"), 1);
        drop(first);
        assert_eq!(handoff.binds_at("gpu-node-1"), 0);
    }
}
