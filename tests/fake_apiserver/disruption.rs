//! The disruption controller of kube-controller-manager, run by the store
//! right after every write that touches a pod or a PodDisruptionBudget: it
//! recomputes each budget's status in the namespace (`currentHealthy`,
//! `desiredHealthy`, `expectedPods`, `disruptionsAllowed`, `disruptedPods`,
//! `observedGeneration`, the `DisruptionAllowed` condition) and writes it only
//! when it changed, as the controller's `updatePdbStatus` does.
//!
//! Differences from the real controller: `expectedPods` for a percentage or a
//! `maxUnavailable` is the number of selected pods (the real one sums the
//! scale of the pods' owning controllers, and counts pods without one as 0);
//! an entry of `disruptedPods` older than two minutes is dropped the next time
//! the controller runs rather than on a timer. Tests can stop the controller
//! or pin one budget's `disruptionsAllowed`.

use super::budgets;
use super::objects;
use super::resources::Storage;
use super::store::{Key, Store};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// How long an eviction's entry in `disruptedPods` keeps its pod out of the
/// healthy count (`DeletionTimeout`).
const DELETION_TIMEOUT_SECS: i64 = 120;

/// The controller's state, kept in the store.
pub struct Controller {
    /// Off: budgets keep whatever status was written (kube-controller-manager
    /// down).
    pub enabled: bool,
    /// Budgets whose status the controller leaves alone.
    pinned: BTreeSet<Key>,
    /// Namespaces with a pod or budget change not synced yet.
    dirty: BTreeSet<String>,
    /// A sync is writing (its own writes only mark namespaces dirty).
    running: bool,
}

impl Default for Controller {
    fn default() -> Self {
        Controller {
            enabled: true,
            pinned: BTreeSet::new(),
            dirty: BTreeSet::new(),
            running: false,
        }
    }
}

impl Controller {
    /// Notes a change of `storage` in namespace `ns`.
    pub fn note(&mut self, storage: Storage, ns: &str) {
        if matches!(storage, Storage::Pods | Storage::PodDisruptionBudgets) {
            self.dirty.insert(ns.to_string());
        }
    }

    pub fn is_pinned(&self, key: &Key) -> bool {
        self.pinned.contains(key)
    }
}

/// Syncs every namespace with pending changes (no-op while a sync runs or
/// the controller is off).
pub fn settle(store: &mut Store) {
    if store.disruption.running || !store.disruption.enabled {
        return;
    }
    store.disruption.running = true;
    while let Some(ns) = store.disruption.dirty.pop_first() {
        sync_namespace(store, &ns);
    }
    store.disruption.running = false;
}

/// Turns the controller on or off; on, it syncs every budget at once (like a
/// restarted controller's first pass).
pub fn set_enabled(store: &mut Store, on: bool) {
    store.disruption.enabled = on;
    if on {
        let namespaces: Vec<String> = store
            .objects(Storage::PodDisruptionBudgets)
            .map(|p| objects::namespace(p).to_string())
            .collect();
        store.disruption.dirty.extend(namespaces);
        settle(store);
    }
}

/// Pins a budget: its status is computed once more, `disruptionsAllowed` set
/// to `allowed` (the condition follows), and the controller leaves it alone
/// until [`unpin`]. Evictions still decrement it. False when there is no such
/// budget.
pub fn pin(store: &mut Store, ns: &str, name: &str, allowed: i64) -> bool {
    let Some(pdb) = store.get(Storage::PodDisruptionBudgets, ns, name).cloned() else {
        return false;
    };
    store
        .disruption
        .pinned
        .insert((ns.to_string(), name.to_string()));
    let pods = selected_pods(store, &pdb);
    let mut status = compute(&pdb, &pods, Utc::now());
    status.allowed = allowed;
    let mut new = pdb;
    new["status"] = status.to_json(&new, Utc::now());
    store.replace(Storage::PodDisruptionBudgets, new);
    true
}

/// Hands a pinned budget back to the controller (which syncs it at once).
pub fn unpin(store: &mut Store, ns: &str, name: &str) {
    store
        .disruption
        .pinned
        .remove(&(ns.to_string(), name.to_string()));
    store.disruption.dirty.insert(ns.to_string());
    settle(store);
}

fn selected_pods(store: &Store, pdb: &Value) -> Vec<Value> {
    let Some(sel) = budgets::selector(pdb) else {
        return Vec::new();
    };
    store
        .objects_in(Storage::Pods, objects::namespace(pdb))
        .filter(|p| sel.matches(p))
        .cloned()
        .collect()
}

fn sync_namespace(store: &mut Store, ns: &str) {
    let pdbs: Vec<Value> = store
        .objects_in(Storage::PodDisruptionBudgets, ns)
        .cloned()
        .collect();
    for pdb in pdbs {
        let key = (ns.to_string(), objects::name(&pdb).to_string());
        if store.disruption.is_pinned(&key) {
            continue;
        }
        let now = Utc::now();
        let pods = selected_pods(store, &pdb);
        let computed = compute(&pdb, &pods, now);
        if computed.matches_stored(&pdb) {
            continue;
        }
        let mut new = pdb;
        new["status"] = computed.to_json(&new, now);
        store.replace(Storage::PodDisruptionBudgets, new);
    }
}

/// What `trySync` computes for one budget.
struct Computed {
    current: i64,
    desired: i64,
    expected: i64,
    allowed: i64,
    disrupted: BTreeMap<String, Value>,
}

fn parse_time(v: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &Value, total: i64) -> i64 {
    match v {
        Value::String(s) => {
            let p: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            (p * total + 99) / 100
        }
        other => other.as_i64().unwrap_or(0),
    }
}

fn compute(pdb: &Value, pods: &[Value], now: DateTime<Utc>) -> Computed {
    let spec = pdb.get("spec").cloned().unwrap_or(json!({}));
    let count = pods.len() as i64;
    let (expected, desired) = match (
        spec.get("maxUnavailable").filter(|v| !v.is_null()),
        spec.get("minAvailable").filter(|v| !v.is_null()),
    ) {
        (Some(max), _) => (count, (count - scaled(max, count)).max(0)),
        (None, Some(min @ Value::String(_))) => (count, scaled(min, count)),
        (None, Some(min)) => (count, min.as_i64().unwrap_or(0)),
        (None, None) => (0, 0),
    };
    // buildDisruptedPodMap: entries for pods still there, not being deleted,
    // and within the deletion timeout.
    let recorded = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut disrupted = BTreeMap::new();
    for pod in pods.iter().filter(|p| !budgets::is_terminating(p)) {
        let name = objects::name(pod);
        if let Some(at) = recorded.get(name)
            && parse_time(at)
                .is_some_and(|t| t + chrono::Duration::seconds(DELETION_TIMEOUT_SECS) >= now)
        {
            disrupted.insert(name.to_string(), at.clone());
        }
    }
    let current = pods
        .iter()
        .filter(|p| {
            !budgets::is_terminating(p)
                && !disrupted.contains_key(objects::name(p))
                && budgets::is_healthy(p)
        })
        .count() as i64;
    let mut allowed = current - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    Computed {
        current,
        desired,
        expected,
        allowed,
        disrupted,
    }
}

fn int(status: &Value, field: &str) -> i64 {
    status.get(field).and_then(Value::as_i64).unwrap_or(0)
}

fn generation(pdb: &Value) -> i64 {
    objects::meta(pdb)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The `DisruptionAllowed` condition `UpdateDisruptionAllowedCondition` wants
/// for `allowed`: (status, reason).
fn wanted_condition(allowed: i64) -> (&'static str, &'static str) {
    if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    }
}

fn find_condition(status: &Value) -> Option<&Value> {
    status
        .get("conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"))
}

/// `UpdateDisruptionAllowedCondition` on the `conditions` of `status`
/// (`SetStatusCondition`: the transition time moves only with the status).
pub fn update_condition(status: &mut Value, now: DateTime<Utc>) {
    let allowed = int(status, "disruptionsAllowed");
    let observed = int(status, "observedGeneration");
    let (want, reason) = wanted_condition(allowed);
    let now = now.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let map = status.as_object_mut().expect("status is an object");
    let conds = map.entry("conditions").or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let conds = conds.as_array_mut().expect("conditions are a list");
    let fresh = |at: &str| {
        let mut c = Map::new();
        c.insert("type".into(), json!("DisruptionAllowed"));
        c.insert("status".into(), json!(want));
        if observed != 0 {
            c.insert("observedGeneration".into(), json!(observed));
        }
        c.insert("lastTransitionTime".into(), json!(at));
        c.insert("reason".into(), json!(reason));
        c.insert("message".into(), json!(""));
        Value::Object(c)
    };
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"))
    {
        Some(c) => {
            let at = if c.get("status").and_then(Value::as_str) == Some(want) {
                c.get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .unwrap_or(&now)
                    .to_string()
            } else {
                now.clone()
            };
            *c = fresh(&at);
        }
        None => conds.push(fresh(&now)),
    }
}

impl Computed {
    /// `updatePdbStatus`'s "nothing to write" test.
    fn matches_stored(&self, pdb: &Value) -> bool {
        let status = pdb.get("status").cloned().unwrap_or(json!({}));
        let stored_disrupted = status
            .get("disruptedPods")
            .and_then(Value::as_object)
            .map(|m| m.clone().into_iter().collect::<BTreeMap<_, _>>())
            .unwrap_or_default();
        let up_to_date = find_condition(&status).is_some_and(|c| {
            let (want, reason) = wanted_condition(int(&status, "disruptionsAllowed"));
            int(&status, "observedGeneration") == generation(pdb)
                && c.get("status").and_then(Value::as_str) == Some(want)
                && c.get("reason").and_then(Value::as_str) == Some(reason)
        });
        int(&status, "currentHealthy") == self.current
            && int(&status, "desiredHealthy") == self.desired
            && int(&status, "expectedPods") == self.expected
            && int(&status, "disruptionsAllowed") == self.allowed
            && stored_disrupted == self.disrupted
            && int(&status, "observedGeneration") == generation(pdb)
            && up_to_date
    }

    /// The new status of `pdb` (its conditions carried over and updated).
    fn to_json(&self, pdb: &Value, now: DateTime<Utc>) -> Value {
        let mut status = json!({
            "disruptionsAllowed": self.allowed,
            "currentHealthy": self.current,
            "desiredHealthy": self.desired,
            "expectedPods": self.expected,
        });
        let observed = generation(pdb);
        if observed != 0 {
            status["observedGeneration"] = json!(observed);
        }
        if !self.disrupted.is_empty() {
            status["disruptedPods"] = json!(self.disrupted);
        }
        if let Some(conds) = pdb.pointer("/status/conditions").filter(|c| c.is_array()) {
            status["conditions"] = conds.clone();
        }
        update_condition(&mut status, now);
        status
    }
}
