//! The questions asked of every node with binds ahead (how many there are, the
//! longest hold) read a list of the nodes that may have any; after any run of
//! binds, placements, locks seen, claims and nodes forgotten, they answer what
//! walking every node ever bound to answers.

use super::*;
use proptest::prelude::*;

const NODES: [&str; 4] = ["n0", "n1", "n2", "n3"];

#[derive(Debug, Clone)]
enum Step {
    Placed(usize),
    TurnTaken(usize),
    TurnDropped(usize),
    Writing(usize),
    WriteRefused(usize),
    LockSeen(usize),
    ReleaseSeen(usize),
    Claimed(usize),
    ClaimEnded(usize),
    Forgotten(usize),
    Later(u64),
}

fn step() -> impl Strategy<Value = Step> {
    let node = 0..NODES.len();
    prop_oneof![
        node.clone().prop_map(Step::Placed),
        node.clone().prop_map(Step::TurnTaken),
        node.clone().prop_map(Step::TurnDropped),
        node.clone().prop_map(Step::Writing),
        node.clone().prop_map(Step::WriteRefused),
        node.clone().prop_map(Step::LockSeen),
        node.clone().prop_map(Step::ReleaseSeen),
        node.clone().prop_map(Step::Claimed),
        node.clone().prop_map(Step::ClaimEnded),
        node.prop_map(Step::Forgotten),
        (0u64..3_000).prop_map(Step::Later),
    ]
}

/// How many nodes ever bound to have binds ahead at `now`, by walking them all.
fn nodes_with_binds_ahead(handoff: &LockHandoff, now: Instant) -> usize {
    let nodes: Vec<Arc<NodeHandoff>> = handoff.nodes.lock().values().cloned().collect();
    nodes
        .iter()
        .filter(|h| handoff.binds_ahead(h, now) > 0)
        .count()
}

/// The longest hold taken here, by walking every node ever bound to.
fn longest_hold_taken_here(handoff: &LockHandoff, now: Instant) -> Option<Duration> {
    let nodes: Vec<Arc<NodeHandoff>> = handoff.nodes.lock().values().cloned().collect();
    nodes
        .iter()
        .filter_map(|h| *h.hold.lock())
        .filter(|hold| hold.taken_here)
        .map(|hold| now.saturating_duration_since(hold.since))
        .max()
}

proptest! {
    #[test]
    fn the_nodes_listed_as_active_answer_as_walking_every_node(
        steps in prop::collection::vec(step(), 1..80)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let handoff = LockHandoff::default();
        let mut turns: Vec<Option<Turn>> = NODES.iter().map(|_| None).collect();
        let mut now = Instant::now();
        for (version, step) in steps.into_iter().enumerate() {
            let version = version.to_string();
            match step {
                Step::Placed(n) => handoff.placed(NODES[n], now),
                Step::TurnTaken(n) => {
                    if turns[n].is_none() {
                        turns[n] = Some(runtime.block_on(handoff.turn(NODES[n])));
                    }
                }
                Step::TurnDropped(n) => turns[n] = None,
                Step::Writing(n) => handoff.writing(NODES[n], Some(&version), now),
                Step::WriteRefused(n) => handoff.write_refused(NODES[n]),
                Step::LockSeen(n) => handoff.observe_node(
                    NODES[n],
                    Some("2026-11-29T18:00:00Z,ns,holder"),
                    Some(&version),
                    now,
                ),
                Step::ReleaseSeen(n) => handoff.observe_node(NODES[n], None, Some(&version), now),
                Step::Claimed(n) => handoff.claimed(NODES[n], now, true),
                Step::ClaimEnded(n) => handoff.claim_ended(NODES[n], now),
                Step::Forgotten(n) => {
                    turns[n] = None;
                    handoff.forget_node(NODES[n]);
                }
                Step::Later(ms) => now += Duration::from_millis(ms),
            }
            let walked = nodes_with_binds_ahead(&handoff, now);
            for count in 0..=NODES.len() + 1 {
                prop_assert_eq!(
                    handoff.nodes_with_binds_ahead_reach(count, now),
                    walked >= count,
                    "{} nodes with binds ahead, asked for {}", walked, count
                );
            }
            prop_assert_eq!(
                handoff.longest_current_hold(now),
                longest_hold_taken_here(&handoff, now)
            );
        }
    }
}
