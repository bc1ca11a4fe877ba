use super::{Ledger, PodEntry, PodPhase};

fn pod(uid: &str, namespace: &str, name: &str) -> PodEntry {
    PodEntry::new(
        uid.into(),
        namespace.into(),
        name.into(),
        "gpu-1".into(),
        Vec::new(),
        0,
        PodPhase::Bound,
    )
}

fn uids_named(ledger: &Ledger, namespace: &str, name: &str) -> Vec<String> {
    let mut uids: Vec<String> = ledger
        .pods_named(namespace, name)
        .map(|p| p.uid.clone())
        .collect();
    uids.sort();
    uids
}

#[test]
fn a_pod_is_found_by_namespace_and_name_while_it_is_tracked() {
    let mut ledger = Ledger::default();
    ledger.add_pod(pod("u1", "ml", "train-0"));
    ledger.add_pod(pod("u2", "ml", "train-1"));
    ledger.add_pod(pod("u3", "web", "train-0"));
    assert_eq!(uids_named(&ledger, "ml", "train-0"), ["u1"]);
    assert_eq!(uids_named(&ledger, "web", "train-0"), ["u3"]);
    assert!(uids_named(&ledger, "ml", "train-2").is_empty());

    ledger.remove_pod("u1");
    assert!(uids_named(&ledger, "ml", "train-0").is_empty());
    assert_eq!(uids_named(&ledger, "web", "train-0"), ["u3"]);
}

#[test]
fn a_name_taken_again_by_a_new_pod_finds_both_until_the_old_one_goes() {
    let mut ledger = Ledger::default();
    ledger.add_pod(pod("old", "ml", "worker"));
    ledger.add_pod(pod("new", "ml", "worker"));
    assert_eq!(uids_named(&ledger, "ml", "worker"), ["new", "old"]);
    // Replacing an entry (same UID) keeps one index entry for it.
    ledger.add_pod(pod("new", "ml", "worker"));
    assert_eq!(uids_named(&ledger, "ml", "worker"), ["new", "old"]);
    ledger.remove_pod("old");
    assert_eq!(uids_named(&ledger, "ml", "worker"), ["new"]);
    ledger.remove_pod("new");
    assert!(uids_named(&ledger, "ml", "worker").is_empty());
    assert!(ledger.named.is_empty(), "no index entry outlives its pods");
}
