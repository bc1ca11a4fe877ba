//! The object store: objects by storage and `namespace/name`, one global
//! resourceVersion counter, a bounded change history (for watch resumption and
//! consistent paginated lists), the registered watch streams, and the
//! controllers that react to writes (the disruption controller).

use super::disruption;
use super::objects;
use super::resources::Storage;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;

/// `(namespace, name)`; namespace empty for cluster-scoped objects. Ordered like
/// etcd keys, so lists come out sorted by namespace then name.
pub type Key = (String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// One write, as watchers see it.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub storage: Storage,
    pub kind: ChangeKind,
    /// The new state; for deletions the last state carrying the deletion's rv.
    pub object: Value,
    /// The state before the write (None for additions).
    pub prev: Option<Value>,
}

pub struct Watcher {
    pub storage: Storage,
    pub tx: mpsc::UnboundedSender<Arc<Change>>,
}

pub const DEFAULT_HISTORY: usize = 10_000;

pub struct Store {
    rv: u64,
    objects: BTreeMap<Storage, BTreeMap<Key, Value>>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Changes with rv <= floor are no longer in the history.
    floor: u64,
    watchers: Vec<Watcher>,
    /// The disruption controller, run after every write of a pod or budget.
    pub disruption: disruption::Controller,
}

pub fn key_of(obj: &Value) -> Key {
    (
        objects::namespace(obj).to_string(),
        objects::name(obj).to_string(),
    )
}

impl Store {
    pub fn new() -> Self {
        Store {
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit: DEFAULT_HISTORY,
            floor: 1,
            watchers: Vec::new(),
            disruption: disruption::Controller::default(),
        }
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub fn floor(&self) -> u64 {
        self.floor
    }

    pub fn get(&self, storage: Storage, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&storage)?
            .get(&(ns.to_string(), name.to_string()))
    }

    pub fn objects(&self, storage: Storage) -> impl Iterator<Item = &Value> {
        self.objects
            .get(&storage)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// The objects of `storage` in namespace `ns`, sorted by name.
    pub fn objects_in<'a>(
        &'a self,
        storage: Storage,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Value> {
        self.objects.get(&storage).into_iter().flat_map(move |m| {
            m.range((ns.to_string(), String::new())..)
                .take_while(move |((n, _), _)| n == ns)
                .map(|(_, v)| v)
        })
    }

    fn record(&mut self, change: Change) -> Arc<Change> {
        self.disruption
            .note(change.storage, objects::namespace(&change.object));
        let change = Arc::new(change);
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.floor = old.rv;
            }
        }
        let storage = change.storage;
        self.watchers.retain(|w| {
            if w.storage != storage {
                return !w.tx.is_closed();
            }
            w.tx.send(change.clone()).is_ok()
        });
        change
    }

    fn bump(&mut self, obj: &mut Value) -> u64 {
        self.rv += 1;
        objects::meta_mut(obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.rv
    }

    /// Stores a new object (the caller checked it is absent) and emits ADDED.
    pub fn insert(&mut self, storage: Storage, mut obj: Value) -> Value {
        let rv = self.bump(&mut obj);
        self.objects
            .entry(storage)
            .or_default()
            .insert(key_of(&obj), obj.clone());
        self.record(Change {
            rv,
            storage,
            kind: ChangeKind::Added,
            object: obj.clone(),
            prev: None,
        });
        disruption::settle(self);
        obj
    }

    /// Replaces an existing object and emits MODIFIED, unless nothing but the
    /// resourceVersion differs (the real server skips no-op writes).
    pub fn replace(&mut self, storage: Storage, mut obj: Value) -> Value {
        let key = key_of(&obj);
        let prev = self
            .objects
            .get(&storage)
            .and_then(|m| m.get(&key))
            .cloned();
        if let Some(p) = &prev {
            let mut unchanged = obj.clone();
            objects::meta_mut(&mut unchanged).insert(
                "resourceVersion".into(),
                json!(objects::resource_version(p)),
            );
            if unchanged == *p {
                return p.clone();
            }
        }
        let rv = self.bump(&mut obj);
        self.objects
            .entry(storage)
            .or_default()
            .insert(key, obj.clone());
        let kind = if prev.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        self.record(Change {
            rv,
            storage,
            kind,
            object: obj.clone(),
            prev,
        });
        disruption::settle(self);
        obj
    }

    /// Removes an object and emits DELETED; returns its last state with the
    /// deletion's resourceVersion.
    pub fn remove(&mut self, storage: Storage, ns: &str, name: &str) -> Option<Value> {
        let prev = self
            .objects
            .get_mut(&storage)?
            .remove(&(ns.to_string(), name.to_string()))?;
        let mut obj = prev.clone();
        let rv = self.bump(&mut obj);
        self.record(Change {
            rv,
            storage,
            kind: ChangeKind::Deleted,
            object: obj.clone(),
            prev: Some(prev),
        });
        disruption::settle(self);
        Some(obj)
    }

    /// The objects of `storage` as they were at `rv`, or None when the history
    /// no longer reaches back that far.
    /// The objects of `storage` as they are now, without copying them: a list
    /// at the current revision reads them as the watch cache serves it.
    pub fn current(&self, storage: Storage) -> Option<&BTreeMap<Key, Value>> {
        self.objects.get(&storage)
    }

    pub fn snapshot_at(&self, storage: Storage, rv: u64) -> Option<BTreeMap<Key, Value>> {
        if rv < self.floor {
            return None;
        }
        let mut map = self.objects.get(&storage).cloned().unwrap_or_default();
        for ch in self.history.iter().rev().take_while(|c| c.rv > rv) {
            if ch.storage != storage {
                continue;
            }
            let key = key_of(&ch.object);
            match (&ch.kind, &ch.prev) {
                (ChangeKind::Added, _) => {
                    map.remove(&key);
                }
                (_, Some(prev)) => {
                    map.insert(key, prev.clone());
                }
                (_, None) => {}
            }
        }
        Some(map)
    }

    /// Changes of `storage` after `rv` (None: expired).
    pub fn changes_since(&self, storage: Storage, rv: u64) -> Option<Vec<Arc<Change>>> {
        if rv < self.floor {
            return None;
        }
        Some(
            self.history
                .iter()
                .filter(|c| c.rv > rv && c.storage == storage)
                .cloned()
                .collect(),
        )
    }

    pub fn subscribe(&mut self, storage: Storage) -> mpsc::UnboundedReceiver<Arc<Change>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.watchers.push(Watcher { storage, tx });
        rx
    }

    /// Open watch streams.
    pub fn watcher_count(&self) -> usize {
        self.watchers.iter().filter(|w| !w.tx.is_closed()).count()
    }

    /// Ends every watch stream.
    pub fn drop_watchers(&mut self) {
        self.watchers.clear();
    }

    pub fn set_history_limit(&mut self, limit: usize) {
        self.history_limit = limit.max(1);
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.floor = old.rv;
            }
        }
    }

    /// Forgets all history, like an etcd compaction at the current revision.
    pub fn compact(&mut self) {
        self.history.clear();
        self.floor = self.rv;
    }
}
