//! Taking a node's lock from the watch's copy of the node: a copy known to be
//! old (refused by a conflict, or from before this process's own lock write) is
//! replaced by the watch's next one rather than by a read, and a watch that
//! does not deliver in time leaves the read to the caller.

use super::handoff::{LockHandoff, LockSighting};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_millis(500);

fn seen(lock: Option<&str>, version: &str) -> Option<LockSighting> {
    Some(LockSighting {
        lock: lock.map(str::to_string),
        resource_version: Some(version.to_string()),
    })
}

#[tokio::test(start_paused = true)]
async fn a_node_the_watch_showed_unlocked_is_known_without_an_entry() {
    let handoff = LockHandoff::default();
    handoff.observe_node("gpu-node-1", None, Some("7"), Instant::now());
    assert_eq!(handoff.sighting("gpu-node-1"), seen(None, "7"));
    // A bind's turn there starts from the same copy.
    let _turn = handoff.turn("gpu-node-1").await;
    assert_eq!(handoff.sighting("gpu-node-1"), seen(None, "7"));
    assert_eq!(handoff.sighting("gpu-node-2"), None);
}

#[tokio::test(start_paused = true)]
async fn a_refused_version_is_replaced_by_the_watchs_next_one() {
    let handoff = Arc::new(LockHandoff::default());
    handoff.observe_node("gpu-node-1", None, Some("7"), Instant::now());
    let started = tokio::time::Instant::now();
    let waiting = {
        let handoff = handoff.clone();
        tokio::spawn(async move {
            handoff
                .sighting_after("gpu-node-1", Some("7"), PATIENCE)
                .await
        })
    };
    tokio::task::yield_now().await;
    handoff.observe_node("gpu-node-1", Some("t,ns,other"), Some("8"), Instant::now());
    let next = waiting.await.expect("waiting task");
    assert_eq!(next, seen(Some("t,ns,other"), "8"));
    assert!(
        started.elapsed() < PATIENCE,
        "woken by the watch, not the patience"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_does_not_deliver_in_time_leaves_the_read_to_the_caller() {
    let handoff = LockHandoff::default();
    handoff.observe_node("gpu-node-1", None, Some("7"), Instant::now());
    let started = tokio::time::Instant::now();
    assert_eq!(
        handoff
            .sighting_after("gpu-node-1", Some("7"), PATIENCE)
            .await,
        None
    );
    assert!(started.elapsed() >= PATIENCE);
    // A node the watch never showed is read at once.
    let started = tokio::time::Instant::now();
    assert_eq!(
        handoff.sighting_after("gpu-node-2", None, PATIENCE).await,
        None
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn the_copy_before_an_own_lock_write_waits_for_the_watch_to_show_the_write() {
    let handoff = Arc::new(LockHandoff::default());
    handoff.observe_node("gpu-node-1", None, Some("7"), Instant::now());
    handoff.writing("gpu-node-1", Some("7"), Instant::now());
    assert_eq!(handoff.sighting("gpu-node-1"), None);
    let waiting = {
        let handoff = handoff.clone();
        tokio::spawn(async move { handoff.sighting_after("gpu-node-1", None, PATIENCE).await })
    };
    tokio::task::yield_now().await;
    handoff.observe_node("gpu-node-1", Some("t,ns,mine"), Some("8"), Instant::now());
    assert_eq!(
        waiting.await.expect("waiting task"),
        seen(Some("t,ns,mine"), "8")
    );
}

#[test]
fn a_lock_released_before_its_write_answered_leaves_no_hold() {
    let handoff = LockHandoff::default();
    let t0 = Instant::now();
    handoff.observe_node("gpu-node-1", None, Some("7"), t0);
    handoff.writing("gpu-node-1", Some("7"), t0);
    // The watch shows the write and the device plugin's release before the
    // write's answer reaches the bind.
    handoff.observe_node("gpu-node-1", Some("t,ns,mine"), Some("8"), t0);
    let released = t0 + Duration::from_millis(30);
    handoff.observe_node("gpu-node-1", None, Some("9"), released);
    assert_eq!(
        handoff.held_for("gpu-node-1", t0 + Duration::from_secs(1)),
        Duration::ZERO
    );
    assert_eq!(handoff.mean_hold(), Some(Duration::from_millis(30)));
    assert_eq!(handoff.sighting("gpu-node-1"), seen(None, "9"));
}

#[test]
fn a_refused_lock_write_leaves_the_copy_usable_and_no_hold() {
    let handoff = LockHandoff::default();
    let t0 = Instant::now();
    handoff.observe_node("gpu-node-1", None, Some("7"), t0);
    handoff.writing("gpu-node-1", Some("7"), t0);
    handoff.write_refused("gpu-node-1");
    assert_eq!(handoff.sighting("gpu-node-1"), seen(None, "7"));
    assert_eq!(
        handoff.held_for("gpu-node-1", t0 + Duration::from_secs(1)),
        Duration::ZERO
    );
}

#[tokio::test(start_paused = true)]
async fn the_node_shown_again_as_it_was_before_an_own_lock_write_does_not_end_its_hold() {
    let handoff = LockHandoff::default();
    let t0 = Instant::now();
    handoff.observe_node("gpu-node-1", None, Some("7"), t0);
    let _turn = handoff.turn("gpu-node-1").await;
    handoff.writing("gpu-node-1", Some("7"), t0);
    // A periodic pass shows the stored copy again while the write is on its way.
    handoff.observe_node("gpu-node-1", None, Some("7"), t0);
    let later = t0 + Duration::from_millis(40);
    assert_eq!(
        handoff.held_for("gpu-node-1", later),
        Duration::from_millis(40)
    );
    assert_eq!(handoff.mean_hold(), None);
}
