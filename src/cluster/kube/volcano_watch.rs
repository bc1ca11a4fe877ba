//! Watches of Volcano's PodGroups and Queues (`scheduling.volcano.sh/v1beta1`).
//! Without the CRDs installed the watches keep retrying quietly and gang
//! scheduling works with plain pods and the default queue.

use crate::scheduler::Scheduler;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::task::JoinHandle;

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "scheduling.volcano.sh".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.volcano.sh/v1beta1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn to_json(o: &DynamicObject, kind: &str) -> serde_json::Value {
    let mut v = serde_json::to_value(o).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("kind".into(), kind.into());
        obj.insert("apiVersion".into(), "scheduling.volcano.sh/v1beta1".into());
    }
    v
}

fn key(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// Starts both watches.
pub fn start(client: Client, scheduler: Arc<Scheduler>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (kind, plural) in [("Queue", "queues"), ("PodGroup", "podgroups")] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, plural));
        let scheduler = scheduler.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen: HashSet<(String, String)> = HashSet::new();
            let mut known: HashSet<(String, String)> = HashSet::new();
            let mut warned = false;
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let apply = |o: &DynamicObject| {
                    let v = to_json(o, kind);
                    if kind == "Queue" {
                        scheduler.apply_queue(&v);
                    } else {
                        scheduler.apply_podgroup(&v);
                    }
                };
                let forget = |k: &(String, String)| {
                    if kind == "Queue" {
                        scheduler.forget_queue(&k.1);
                    } else {
                        scheduler.forget_podgroup(&k.0, &k.1);
                    }
                };
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
                        tracing::info!(kind, count = known.len(), "Volcano objects listed");
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
                            tracing::warn!(kind, error = %e, "cannot watch Volcano objects (CRDs not installed?); retrying");
                            warned = true;
                        } else {
                            tracing::debug!(kind, error = %e, "Volcano watch error");
                        }
                    }
                }
            }
        }));
    }
    tasks
}
