//! Watches of the cluster policy that decides evictions and placements:
//! PriorityClasses (`scheduling.k8s.io/v1`), PodDisruptionBudgets (`policy/v1`)
//! and Namespaces (their labels, which pod affinity's namespace selectors
//! match). Every (re)list ends by forgetting what vanished while we were not
//! watching.

use crate::scheduler::Scheduler;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// What one watch does with its objects.
struct Feed<K, Key> {
    kind: &'static str,
    key: fn(&K) -> Key,
    apply: fn(&Scheduler, &K),
    forget: fn(&Scheduler, &Key),
    retain: fn(&Scheduler, &HashSet<Key>),
}

fn spawn<K, Key>(api: Api<K>, scheduler: Arc<Scheduler>, feed: Feed<K, Key>) -> JoinHandle<()>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    Key: Eq + Hash + Send + 'static,
{
    tokio::spawn(async move {
        let mut seen: HashSet<Key> = HashSet::new();
        let stream = watcher(api, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => seen.clear(),
                Ok(watcher::Event::InitApply(o)) => {
                    seen.insert((feed.key)(&o));
                    (feed.apply)(&scheduler, &o);
                }
                Ok(watcher::Event::InitDone) => {
                    (feed.retain)(&scheduler, &seen);
                    tracing::info!(kind = feed.kind, count = seen.len(), "listed");
                    seen.clear();
                }
                Ok(watcher::Event::Apply(o)) => (feed.apply)(&scheduler, &o),
                Ok(watcher::Event::Delete(o)) => (feed.forget)(&scheduler, &(feed.key)(&o)),
                Err(e) => tracing::warn!(kind = feed.kind, error = %e, "watch error; retrying"),
            }
        }
    })
}

/// Starts the three watches.
pub fn start(client: Client, scheduler: Arc<Scheduler>) -> Vec<JoinHandle<()>> {
    let classes = spawn(
        Api::<PriorityClass>::all(client.clone()),
        scheduler.clone(),
        Feed {
            kind: "PriorityClass",
            key: |c: &PriorityClass| c.metadata.name.clone().unwrap_or_default(),
            apply: Scheduler::apply_priority_class,
            forget: |s, name: &String| s.forget_priority_class(name),
            retain: Scheduler::retain_priority_classes,
        },
    );
    let namespaces = spawn(
        Api::<Namespace>::all(client.clone()),
        scheduler.clone(),
        Feed {
            kind: "Namespace",
            key: |n: &Namespace| n.metadata.name.clone().unwrap_or_default(),
            apply: Scheduler::apply_namespace,
            forget: |s, name: &String| s.forget_namespace(name),
            retain: Scheduler::retain_namespaces,
        },
    );
    let budgets = spawn(
        Api::<PodDisruptionBudget>::all(client),
        scheduler,
        Feed {
            kind: "PodDisruptionBudget",
            key: |b: &PodDisruptionBudget| {
                (
                    b.metadata.namespace.clone().unwrap_or_default(),
                    b.metadata.name.clone().unwrap_or_default(),
                )
            },
            apply: Scheduler::apply_disruption_budget,
            forget: |s, (namespace, name): &(String, String)| {
                s.forget_disruption_budget(namespace, name)
            },
            retain: Scheduler::retain_disruption_budgets,
        },
    );
    vec![classes, namespaces, budgets]
}
