//! One shared string per namespace for the gangs' keys. Every lookup and
//! change in a map of gangs compares keys, namespace first; a cluster has few
//! namespaces and many gangs in each, so keys whose namespace is one shared
//! string compare it by address (see `GangKey`'s order) instead of reading
//! it, at every step of every search.
//!
//! Namespaces come and go (a test run's, a tenant's): a namespace no key
//! holds any more is let go once the set has grown to twice what it held
//! after the last such sweep.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;

struct Namespaces {
    shared: HashSet<Arc<str>>,
    /// Size at which the next sweep runs.
    sweep_at: usize,
}

/// Fewest namespaces kept before sweeping.
const FIRST_SWEEP: usize = 64;

static NAMESPACES: Mutex<Option<Namespaces>> = Mutex::new(None);

/// The shared string for `namespace`.
pub fn shared_namespace(namespace: &str) -> Arc<str> {
    let mut guard = NAMESPACES.lock();
    let all = guard.get_or_insert_with(|| Namespaces {
        shared: HashSet::new(),
        sweep_at: FIRST_SWEEP,
    });
    if let Some(kept) = all.shared.get(namespace) {
        return Arc::clone(kept);
    }
    if all.shared.len() >= all.sweep_at {
        all.shared.retain(|name| Arc::strong_count(name) > 1);
        all.sweep_at = (all.shared.len() * 2).max(FIRST_SWEEP);
    }
    let name: Arc<str> = namespace.into();
    all.shared.insert(Arc::clone(&name));
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_string_per_namespace_and_namespaces_no_one_holds_are_let_go() {
        let a = shared_namespace("shared-namespaces-test-a");
        let again = shared_namespace("shared-namespaces-test-a");
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(
            &a,
            &shared_namespace("shared-namespaces-test-b")
        ));
        // Enough namespaces no one keeps to set off sweeps: the one held is
        // still the one handed out, the others are gone.
        for i in 0..FIRST_SWEEP * 4 {
            shared_namespace(&format!("shared-namespaces-test-passing-{i}"));
        }
        assert!(Arc::ptr_eq(
            &a,
            &shared_namespace("shared-namespaces-test-a")
        ));
        let guard = NAMESPACES.lock();
        let all = guard.as_ref().map_or(0, |n| n.shared.len());
        assert!(all < FIRST_SWEEP * 2, "{all} namespaces kept");
    }
}
