//! Watches of Volcano's PodGroups and Queues (`scheduling.volcano.sh/v1beta1`) and
//! HyperNodes (`topology.volcano.sh/v1alpha1`). Without the CRDs installed the
//! watches keep retrying quietly: gang scheduling works with plain pods and the
//! default queue, and without HyperNodes there is no network topology.

use crate::scheduler::Scheduler;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The Volcano objects the scheduler reads: group, version, kind, plural.
const WATCHED: [(&str, &str, &str, &str); 3] = [
    ("scheduling.volcano.sh", "v1beta1", "Queue", "queues"),
    ("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
    ("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes"),
];

pub(super) fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub(super) fn to_json(o: &DynamicObject, resource: &ApiResource) -> serde_json::Value {
    let mut v = serde_json::to_value(o).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("kind".into(), resource.kind.clone().into());
        obj.insert("apiVersion".into(), resource.api_version.clone().into());
    }
    v
}

fn key(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// Starts the watches.
pub fn start(client: Client, scheduler: Arc<Scheduler>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (group, version, kind, plural) in WATCHED {
        let resource = resource(group, version, kind, plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let scheduler = scheduler.clone();
        tasks.push(tokio::spawn(async move {
            let apply = |o: &DynamicObject| {
                let v = to_json(o, &resource);
                match kind {
                    "Queue" => scheduler.apply_queue(&v),
                    "PodGroup" => scheduler.apply_podgroup(&v),
                    _ => scheduler.apply_hyper_node(&v),
                }
            };
            let forget = |k: &(String, String)| match kind {
                "Queue" => scheduler.forget_queue(&k.1),
                "PodGroup" => scheduler.forget_podgroup(&k.0, &k.1),
                _ => scheduler.forget_hyper_node(&k.1),
            };
            follow(api, kind, apply, forget).await;
        }));
    }
    tasks
}

/// Follows one kind of object for good: every object listed or changed is
/// applied, every one deleted (or gone from a relist) forgotten. Errors are
/// retried with backoff and logged once at warning level.
pub(super) async fn follow(
    api: Api<DynamicObject>,
    kind: &str,
    apply: impl Fn(&DynamicObject),
    forget: impl Fn(&(String, String)),
) {
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut known: HashSet<(String, String)> = HashSet::new();
    let mut warned = false;
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                seen.insert(key(&o));
                apply(&o);
            }
            Ok(watcher::Event::InitDone) => {
                for gone in known.difference(&seen) {
                    forget(gone);
                }
                known = std::mem::take(&mut seen);
                tracing::info!(kind, count = known.len(), "objects listed");
            }
            Ok(watcher::Event::Apply(o)) => {
                known.insert(key(&o));
                apply(&o);
            }
            Ok(watcher::Event::Delete(o)) => {
                let k = key(&o);
                known.remove(&k);
                forget(&k);
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(kind, error = %e, "cannot watch objects (CRDs not installed?); retrying");
                    warned = true;
                } else {
                    tracing::debug!(kind, error = %e, "watch error");
                }
            }
        }
    }
}
