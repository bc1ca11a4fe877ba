//! What ranking reads of each candidate node, packed so that looking up thousands
//! of candidates on every `/filter` stays in cache.
//!
//! The ledger's node table holds whole entries (devices with their strings and
//! maps, usage, selectors' data), keyed by names on the heap: one lookup there
//! touches several scattered cache lines, and at 5,000 candidates that was most of
//! a filter. Ranking needs only each node's score, whether it is usable, and the
//! free room of each GPU. Those live here in dense arrays, found through a hash
//! table of four-byte slots, with the names back to back in one buffer.

use crate::device::model::GpuDevice;
use crate::device::request::PodRequest;
use crate::fit::NodeView;
use crate::usage::GpuUsage;
use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;

/// Free room on one GPU as far as the ranking screen is concerned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuRoom {
    /// How many GPUs of one container this GPU can stand for: 1 with an open slot
    /// (a MIG GPU: every open slot, since it can give a container several
    /// instances); 0 when the GPU takes no vGPU request at all (not an NVIDIA GPU,
    /// unhealthy, or full).
    pub picks: u32,
    /// Free compute, percent.
    pub cores: u32,
    /// Free memory, MiB.
    pub memory: u64,
    /// The card's memory, MiB (percentage requests are taken of it).
    pub total_memory: u64,
}

impl GpuRoom {
    /// The room left on `device` with `usage` booked.
    pub fn of(device: &GpuDevice, usage: &GpuUsage, is_vendor: bool) -> Self {
        let usable = is_vendor && device.health;
        let open = device.count.saturating_sub(usage.used);
        Self {
            picks: match (usable, device.is_mig()) {
                (false, _) => 0,
                (true, true) => open,
                (true, false) => open.min(1),
            },
            cores: device.devcore.saturating_sub(usage.usedcores),
            memory: device.devmem.saturating_sub(usage.usedmem),
            total_memory: device.devmem,
        }
    }
}

/// The room left on each GPU of `node` with its usage booked, in device order:
/// what ranking screens the node by.
pub fn rooms_of<'a>(node: &NodeView<'a>) -> impl ExactSizeIterator<Item = GpuRoom> + 'a {
    node.devices
        .iter()
        .zip(node.usage)
        .zip(node.is_vendor)
        .map(|((d, u), v)| GpuRoom::of(d, u, *v))
}

/// A quick necessary condition for a pod to fit a node: every container that asks
/// for GPUs finds at least as many picks (GPUs with an open slot, a MIG GPU counting
/// once per open slot) with enough free memory and enough free compute as it asks
/// for. `false` means the full fit fails too; `true`
/// means only that it may succeed. It allocates nothing, so ranking can skip full
/// nodes for the price of a loop over their GPUs (binpack ranks the fullest nodes
/// first, and fitting each of them in turn was most of a filter on a busy cluster).
pub fn may_fit(rooms: &[GpuRoom], request: &PodRequest) -> bool {
    request.containers.iter().flatten().all(|req| {
        let cores = req.cores();
        let nums = req.nums as usize;
        let mut open = 0usize;
        for r in rooms {
            if r.picks > 0 && r.memory >= req.memory_on(r.total_memory) && r.cores >= cores {
                open += r.picks as usize;
                if open >= nums {
                    return true;
                }
            }
        }
        open >= nums
    })
}

/// A node's rooms summed up in a few figures, read before its rooms: a full node
/// is ruled out without walking its GPUs (binpack ranks the fullest nodes first,
/// and on a busy cluster most of them are full for the request at hand).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoomScreen {
    /// Picks over all GPUs.
    picks: u32,
    /// The most free compute and the most free memory on a GPU with a pick.
    cores: u32,
    memory: u64,
    /// The smallest card among the GPUs with a pick (a percentage of the card
    /// asks at least that much of it).
    smallest_card: u64,
}

impl RoomScreen {
    /// The screen of `rooms`.
    pub fn of(rooms: &[GpuRoom]) -> Self {
        let none = Self {
            smallest_card: u64::MAX,
            ..Self::default()
        };
        let screen = rooms
            .iter()
            .filter(|r| r.picks > 0)
            .fold(none, |s, r| Self {
                picks: s.picks.saturating_add(r.picks),
                cores: s.cores.max(r.cores),
                memory: s.memory.max(r.memory),
                smallest_card: s.smallest_card.min(r.total_memory),
            });
        if screen.picks == 0 {
            return Self::default();
        }
        screen
    }

    /// Whether some GPU has an open slot: without one no request for a GPU fits.
    pub fn has_picks(&self) -> bool {
        self.picks > 0
    }

    /// `false` when [`may_fit`] surely says no for these rooms: some container
    /// asks for more GPUs than there are picks, or for more compute or memory
    /// than any GPU with a pick has free. `true` says nothing.
    pub fn admits(&self, request: &PodRequest) -> bool {
        request.containers.iter().flatten().all(|req| {
            req.nums == 0
                || (req.nums <= self.picks
                    && req.cores() <= self.cores
                    && req.memory_on(self.smallest_card) <= self.memory)
        })
    }
}

/// What ranking sees of one node.
#[derive(Debug, Clone, Copy)]
pub struct Rank<'a> {
    /// The node score before placing (see `fit::node_score`).
    pub score: f64,
    /// False when the node's GPUs cannot be used (no or bad registration).
    pub usable: bool,
    /// Free room per GPU, in device order.
    pub rooms: &'a [GpuRoom],
}

#[derive(Debug, Clone)]
struct Slot {
    hash: u64,
    name: (u32, u32),
    rooms: (u32, u32),
    score: f64,
    usable: bool,
}

/// Node name → ranking data.
#[derive(Debug, Default)]
pub struct RankIndex {
    /// Positions in `slots`.
    table: HashTable<u32>,
    slots: Vec<Slot>,
    /// Every live name back to back (plus dead bytes until the next compaction).
    names: String,
    /// Every live node's rooms back to back (plus dead entries likewise).
    rooms: Vec<GpuRoom>,
    /// Dead bytes in `names` and dead entries in `rooms`.
    dead: (usize, usize),
}

impl RankIndex {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no node is indexed.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn name_of(&self, slot: &Slot) -> &str {
        let (start, len) = slot.name;
        &self.names[start as usize..(start + len) as usize]
    }

    fn position(&self, hash: u64, name: &str) -> Option<usize> {
        self.table
            .find(hash, |&i| {
                let slot = &self.slots[i as usize];
                slot.hash == hash && self.name_of(slot) == name
            })
            .map(|&i| i as usize)
    }

    /// The ranking data of `name`, if it is indexed.
    pub fn get(&self, name: &str) -> Option<Rank<'_>> {
        let slot = &self.slots[self.position(hash_name(name), name)?];
        let (start, len) = slot.rooms;
        Some(Rank {
            score: slot.score,
            usable: slot.usable,
            rooms: &self.rooms[start as usize..(start + len) as usize],
        })
    }

    /// Indexes `name` with its current data (replacing what was there).
    pub fn set(
        &mut self,
        name: &str,
        score: f64,
        usable: bool,
        rooms: impl ExactSizeIterator<Item = GpuRoom>,
    ) {
        let hash = hash_name(name);
        let count = rooms.len();
        let Some(i) = self.position(hash, name) else {
            let slot = Slot {
                hash,
                name: self.append_name(name),
                rooms: self.append_rooms(rooms),
                score,
                usable,
            };
            let index = to_u32(self.slots.len());
            self.slots.push(slot);
            let slots = &self.slots;
            self.table
                .insert_unique(hash, index, |&j| slots[j as usize].hash);
            return;
        };
        let (start, len) = self.slots[i].rooms;
        if len as usize == count {
            // Usage changed: the same GPUs, rewritten in place.
            for (room, new) in self.rooms[start as usize..].iter_mut().zip(rooms) {
                *room = new;
            }
        } else {
            self.dead.1 += len as usize;
            self.slots[i].rooms = self.append_rooms(rooms);
        }
        let slot = &mut self.slots[i];
        slot.score = score;
        slot.usable = usable;
        self.compact_if_mostly_dead();
    }

    /// Forgets `name`.
    pub fn remove(&mut self, name: &str) {
        let hash = hash_name(name);
        let Some(i) = self.position(hash, name) else {
            return;
        };
        if let Ok(entry) = self.table.find_entry(hash, |&j| j as usize == i) {
            entry.remove();
        }
        let gone = self.slots.swap_remove(i);
        self.dead.0 += gone.name.1 as usize;
        self.dead.1 += gone.rooms.1 as usize;
        // The last slot moved into position `i`: point its table entry there.
        if let Some(moved) = self.slots.get(i) {
            let from = to_u32(self.slots.len());
            if let Some(entry) = self.table.find_mut(moved.hash, |&j| j == from) {
                *entry = to_u32(i);
            }
        }
        self.compact_if_mostly_dead();
    }

    fn append_name(&mut self, name: &str) -> (u32, u32) {
        let start = self.names.len();
        self.names.push_str(name);
        (to_u32(start), to_u32(name.len()))
    }

    fn append_rooms(&mut self, rooms: impl Iterator<Item = GpuRoom>) -> (u32, u32) {
        let start = self.rooms.len();
        self.rooms.extend(rooms);
        (to_u32(start), to_u32(self.rooms.len() - start))
    }

    /// Rewrites the buffers without dead entries once they are more than half dead
    /// (nodes come and go, and a node's GPU count may change).
    fn compact_if_mostly_dead(&mut self) {
        if self.dead.0 * 2 <= self.names.len() && self.dead.1 * 2 <= self.rooms.len() {
            return;
        }
        let mut names = String::with_capacity(self.names.len() - self.dead.0);
        let mut rooms = Vec::with_capacity(self.rooms.len() - self.dead.1);
        for slot in &mut self.slots {
            let (start, len) = slot.name;
            let name_start = names.len();
            names.push_str(&self.names[start as usize..(start + len) as usize]);
            slot.name = (to_u32(name_start), len);
            let (start, len) = slot.rooms;
            let rooms_start = rooms.len();
            rooms.extend_from_slice(&self.rooms[start as usize..(start + len) as usize]);
            slot.rooms = (to_u32(rooms_start), len);
        }
        self.names = names;
        self.rooms = rooms;
        self.dead = (0, 0);
    }
}

fn hash_name(name: &str) -> u64 {
    FxBuildHasher.hash_one(name)
}

/// Buffer offsets: a cluster's names and GPUs are far below 4 GiB of entries.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn room(picks: u32) -> GpuRoom {
        GpuRoom {
            picks,
            cores: 100,
            memory: 8000,
            total_memory: 8000,
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(u8, f64, bool, Vec<u32>),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..24, 0.0f64..30.0, any::<bool>(), prop::collection::vec(0u32..5, 0..4))
                .prop_map(|(n, s, u, r)| Op::Set(n, s, u, r)),
            1 => (0u8..24).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// Whatever the order of updates and removals (which move slots and
        /// compact the buffers), every lookup answers the latest data.
        #[test]
        fn answers_like_a_map(ops in prop::collection::vec(op(), 0..200)) {
            let mut index = RankIndex::default();
            let mut model: BTreeMap<String, (f64, bool, Vec<GpuRoom>)> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Set(n, score, usable, slots) => {
                        let name = format!("node-{n}");
                        let rooms: Vec<GpuRoom> = slots.into_iter().map(room).collect();
                        index.set(&name, score, usable, rooms.iter().copied());
                        model.insert(name, (score, usable, rooms));
                    }
                    Op::Remove(n) => {
                        let name = format!("node-{n}");
                        index.remove(&name);
                        model.remove(&name);
                    }
                }
                prop_assert_eq!(index.len(), model.len());
            }
            for n in 0..24u8 {
                let name = format!("node-{n}");
                let got = index.get(&name).map(|r| (r.score, r.usable, r.rooms.to_vec()));
                prop_assert_eq!(got, model.get(&name).cloned());
            }
        }
    }

    #[test]
    fn screen_counts_open_gpus_per_container() {
        use crate::device::request::ContainerRequest;
        let request = |nums: u32, memreq: u64, coresreq: u32| PodRequest {
            containers: vec![
                None,
                Some(ContainerRequest {
                    nums,
                    memreq,
                    mem_percentage: None,
                    coresreq,
                }),
            ],
            init_count: 0,
        };
        let rooms = [room(1), room(0), room(1)];
        assert!(may_fit(&rooms, &request(2, 8000, 100)));
        assert!(
            !may_fit(&rooms, &request(3, 1000, 10)),
            "one GPU has no slot"
        );
        assert!(
            may_fit(&[room(0), room(3)], &request(3, 1000, 10)),
            "a MIG GPU with three open slots stands for three GPUs"
        );
        assert!(!may_fit(&rooms, &request(1, 8001, 10)), "not enough memory");
        assert!(
            may_fit(&rooms, &request(1, 10, 101)),
            "cores are clamped to 100"
        );
        assert!(
            may_fit(&[], &PodRequest::default()),
            "no GPU asked, nothing to screen"
        );
    }

    fn container() -> impl Strategy<Value = Option<crate::device::request::ContainerRequest>> {
        // Coarse steps, so that a request meets a GPU's room exactly as often as not.
        let asked = (0u32..4, 0u64..10, prop::option::of(1u32..11), 0u32..12).prop_map(
            |(nums, memreq, mem_percentage, coresreq)| {
                Some(crate::device::request::ContainerRequest {
                    nums,
                    memreq: memreq * 1000,
                    mem_percentage: mem_percentage.map(|p| p * 10),
                    coresreq: coresreq * 10,
                })
            },
        );
        prop_oneof![1 => Just(None), 4 => asked]
    }

    fn gpu_room() -> impl Strategy<Value = GpuRoom> {
        (0u32..3, 0u32..11, 0u64..9, 8u64..11).prop_map(|(picks, cores, memory, card)| GpuRoom {
            picks,
            cores: cores * 10,
            memory: (memory * 1000).min(card * 1000),
            total_memory: card * 1000,
        })
    }

    proptest! {
        // Cheap cases, and a summary that reads the wrong card shows only on a
        // few shapes of node: many cases.
        #![proptest_config(ProptestConfig::with_cases(8192))]

        /// The summary only ever rules out what the walk over the GPUs rules out.
        #[test]
        fn the_room_screen_never_rules_out_a_fit(
            rooms in prop::collection::vec(gpu_room(), 0..9),
            containers in prop::collection::vec(container(), 0..3),
        ) {
            let request = PodRequest { containers, init_count: 0 };
            if may_fit(&rooms, &request) {
                prop_assert!(RoomScreen::of(&rooms).admits(&request));
            }
        }
    }

    #[test]
    fn the_room_screen_rules_out_a_full_node() {
        use crate::device::request::ContainerRequest;
        let one_card = |memreq: u64, coresreq: u32| PodRequest {
            containers: vec![Some(ContainerRequest {
                nums: 1,
                memreq,
                mem_percentage: None,
                coresreq,
            })],
            init_count: 0,
        };
        // Every GPU holds a whole card: slots are open, memory and compute are not.
        let taken = GpuRoom {
            picks: 1,
            cores: 0,
            memory: 0,
            total_memory: 8000,
        };
        let screen = RoomScreen::of(&[taken; 8]);
        assert!(!screen.admits(&one_card(1000, 0)), "no memory left");
        assert!(!screen.admits(&one_card(0, 25)), "no compute left");
        assert!(screen.admits(&one_card(0, 0)), "nothing asked of a card");
        let whole_card = PodRequest {
            containers: vec![Some(ContainerRequest {
                nums: 1,
                memreq: 0,
                mem_percentage: Some(100),
                coresreq: 0,
            })],
            init_count: 0,
        };
        assert!(!screen.admits(&whole_card), "no card free as a whole");
        // No slot open anywhere.
        assert!(!RoomScreen::of(&[room(0); 4]).admits(&one_card(0, 0)));
        // One GPU with room is enough for one card.
        let mut rooms = [taken; 8];
        rooms[5] = room(1);
        assert!(RoomScreen::of(&rooms).admits(&one_card(8000, 100)));
    }
}
