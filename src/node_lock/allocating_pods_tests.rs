//! The book of pods between their bind and the device plugin's answer
//! (`--node-lock pods`): a node holds one, from the bind's claim until the
//! watch shows it answered, finished, gone or bound elsewhere, or it expires.

use super::allocating_pods::{AllocatingPods, Followed, Held, PodSighting, sighting_of};
use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(300);

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("time")
}

/// A pod as the watch shows it: bound to `node` (or not), in `phase`.
fn pod(uid: &str, node: Option<&str>, bind_phase: Option<&str>, status: &str) -> Pod {
    let mut annotations = serde_json::Map::new();
    if let Some(phase) = bind_phase {
        annotations.insert("hami.io/bind-phase".into(), json!(phase));
        annotations.insert(
            "hami.io/bind-time".into(),
            json!(at(0).timestamp().to_string()),
        );
    }
    serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": "ml", "uid": uid, "annotations": annotations},
        "spec": {"containers": [], "nodeName": node},
        "status": {"phase": status},
    }))
    .expect("pod")
}

fn claim(book: &AllocatingPods, node: &str, uid: &str, now: DateTime<Utc>) -> Result<(), Held> {
    book.claim(node, (uid, "ml", uid), now, TIMEOUT)
}

fn held_by(holder: &str) -> Result<(), Held> {
    Err(Held {
        holder: format!("ml/{holder}"),
    })
}

#[test]
fn a_claimed_node_takes_no_other_pod_until_the_device_plugin_answers() {
    let book = AllocatingPods::default();
    assert_eq!(claim(&book, "n1", "a", at(0)), Ok(()));
    // Claiming again (a repeated bind) is harmless; another pod waits.
    assert_eq!(claim(&book, "n1", "a", at(1)), Ok(()));
    assert_eq!(claim(&book, "n1", "b", at(1)), held_by("a"));
    // Another node is free.
    assert_eq!(claim(&book, "n2", "b", at(1)), Ok(()));

    // The Binding's event: bound and allocating. Still held.
    let bound = pod("a", Some("n1"), Some("allocating"), "Pending");
    assert_eq!(book.observe(&bound, at(2)), Followed::default());
    assert_eq!(claim(&book, "n1", "c", at(2)), held_by("a"));

    // The device plugin's answer frees the node.
    let answered = pod("a", Some("n1"), Some("success"), "Pending");
    assert_eq!(book.observe(&answered, at(3)).freed, Some("n1".to_string()));
    assert_eq!(claim(&book, "n1", "c", at(3)), Ok(()));
}

#[test]
fn an_event_from_before_the_binding_does_not_free_the_node() {
    let book = AllocatingPods::default();
    claim(&book, "n1", "a", at(0)).expect("claim");
    // The pod as created, or patched before its Binding: not bound yet.
    for stale in [
        pod("a", None, None, "Pending"),
        pod("a", None, Some("failed"), "Pending"),
    ] {
        assert_eq!(book.observe(&stale, at(1)), Followed::default());
        assert_eq!(claim(&book, "n1", "b", at(1)), held_by("a"));
    }
}

#[test]
fn a_failed_answer_a_finished_pod_or_a_bind_elsewhere_frees_the_node() {
    for done in [
        pod("a", Some("n1"), Some("failed"), "Pending"),
        pod("a", Some("n1"), Some("allocating"), "Failed"),
        pod("a", None, None, "Succeeded"),
        pod("a", Some("n2"), Some("success"), "Running"),
    ] {
        let book = AllocatingPods::default();
        claim(&book, "n1", "a", at(0)).expect("claim");
        assert_eq!(
            book.observe(&done, at(1)).freed,
            Some("n1".to_string()),
            "{done:?}"
        );
        assert_eq!(claim(&book, "n1", "b", at(1)), Ok(()), "{done:?}");
    }
}

#[test]
fn a_failed_bind_or_a_deleted_pod_gives_the_node_back() {
    let book = AllocatingPods::default();
    claim(&book, "n1", "a", at(0)).expect("claim");
    assert_eq!(book.release("a"), Some("n1".to_string()));
    assert_eq!(book.release("a"), None);
    assert_eq!(claim(&book, "n1", "b", at(0)), Ok(()));
}

#[test]
fn a_claim_on_another_node_gives_up_the_first() {
    let book = AllocatingPods::default();
    claim(&book, "n1", "a", at(0)).expect("claim");
    claim(&book, "n2", "a", at(1)).expect("claim elsewhere");
    assert_eq!(claim(&book, "n1", "b", at(1)), Ok(()));
    assert_eq!(claim(&book, "n2", "c", at(1)), held_by("a"));
}

#[test]
fn a_pod_allocating_that_no_bind_here_claimed_holds_its_node() {
    // After a restart, or bound by another binder: the watch shows it.
    let book = AllocatingPods::default();
    let allocating = pod("x", Some("n1"), Some("allocating"), "Pending");
    assert_eq!(
        book.observe(&allocating, at(10)),
        Followed {
            freed: None,
            newly_held: Some("n1".to_string())
        }
    );
    // Seen again: nothing new.
    assert_eq!(book.observe(&allocating, at(11)), Followed::default());
    // Bound elsewhere meanwhile (a stale claim followed by the truth): moves.
    let elsewhere = pod("x", Some("n2"), Some("allocating"), "Pending");
    assert_eq!(
        book.observe(&elsewhere, at(12)),
        Followed {
            freed: Some("n1".to_string()),
            newly_held: Some("n2".to_string())
        }
    );
    book.observe(&allocating, at(13));
    assert_eq!(claim(&book, "n1", "b", at(10)), held_by("x"));
    // Its bind time, not when it was seen, starts its expiry.
    let expired = at(0) + TimeDelta::from_std(TIMEOUT).expect("delta") + TimeDelta::seconds(1);
    assert_eq!(claim(&book, "n1", "b", expired), Ok(()));
}

#[test]
fn a_claim_expires_after_the_lock_timeout_as_a_lock_would() {
    let book = AllocatingPods::default();
    claim(&book, "n1", "a", at(0)).expect("claim");
    let last_held = at(0) + TimeDelta::from_std(TIMEOUT).expect("delta");
    assert_eq!(claim(&book, "n1", "b", last_held), held_by("a"));
    assert_eq!(
        claim(&book, "n1", "b", last_held + TimeDelta::seconds(1)),
        Ok(())
    );
}

#[test]
fn what_the_watch_says_of_a_pod() {
    assert_eq!(
        sighting_of(&pod("a", Some("n1"), Some("allocating"), "Pending"), at(9)),
        PodSighting::Allocating {
            node: "n1".into(),
            since: at(0)
        }
    );
    assert_eq!(
        sighting_of(&pod("a", None, Some("allocating"), "Pending"), at(9)),
        PodSighting::Unbound
    );
    assert_eq!(
        sighting_of(&pod("a", Some("n1"), None, "Running"), at(9)),
        PodSighting::Done
    );
    // A bind time that is not a number: counted from when it was seen.
    let mut odd = pod("a", Some("n1"), Some("allocating"), "Pending");
    if let Some(a) = odd.metadata.annotations.as_mut() {
        a.insert("hami.io/bind-time".into(), "soon".into());
    }
    assert_eq!(
        sighting_of(&odd, at(9)),
        PodSighting::Allocating {
            node: "n1".into(),
            since: at(9)
        }
    );
}
