//! The watches of Kubernetes' own PodGroups and Workloads (`scheduling.k8s.io`,
//! KEP-4671), started only where the API server serves them.
//!
//! The kinds exist from Kubernetes 1.36 behind the GenericWorkload feature gate,
//! in `v1alpha2`, and as `v1beta1` later. The server is asked which version it
//! serves before anything is watched: a server without them is asked again now
//! and then (a control plane may be upgraded or have its gates turned on under a
//! running scheduler) and meanwhile nothing changes from how this scheduler
//! works without them.

use super::volcano_watch::{follow, resource, to_json};
use crate::gang::native_group::{API_GROUP, VERSIONS};
use crate::scheduler::Scheduler;
use kube::api::{Api, DynamicObject};
use kube::{Client, Error};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long to wait before asking a server without the kinds again.
const REDISCOVER: Duration = Duration::from_secs(300);

/// How long to wait before asking again after discovery itself failed.
const RETRY: Duration = Duration::from_secs(10);

/// What discovery found.
#[derive(Debug, PartialEq, Eq)]
pub enum Served {
    /// PodGroups are served in this version.
    Version(&'static str),
    /// The server does not serve them.
    No,
}

/// Asks the API server which version of `scheduling.k8s.io` serves PodGroups,
/// preferring the newest.
pub async fn discover(client: &Client) -> Result<Served, Error> {
    for version in VERSIONS {
        match client
            .list_api_group_resources(&format!("{API_GROUP}/{version}"))
            .await
        {
            Ok(list) if list.resources.iter().any(|r| r.name == "podgroups") => {
                return Ok(Served::Version(version));
            }
            Ok(_) => {}
            Err(Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Served::No)
}

/// Starts the task that discovers and then watches native PodGroups.
pub fn start(client: Client, scheduler: Arc<Scheduler>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let version = loop {
            match discover(&client).await {
                Ok(Served::Version(v)) => break v,
                Ok(Served::No) => {
                    tracing::debug!("the API server serves no scheduling.k8s.io PodGroups");
                    tokio::time::sleep(REDISCOVER).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot ask the API server for scheduling.k8s.io PodGroups; retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
        tracing::info!(
            version,
            "watching Kubernetes' own PodGroups and Workloads (scheduling.k8s.io)"
        );
        let podgroups = resource(API_GROUP, version, "PodGroup", "podgroups");
        let workloads = resource(API_GROUP, version, "Workload", "workloads");
        let podgroup_api: Api<DynamicObject> = Api::all_with(client.clone(), &podgroups);
        let workload_api: Api<DynamicObject> = Api::all_with(client, &workloads);
        let apply_podgroup =
            |o: &DynamicObject| scheduler.apply_native_podgroup(&to_json(o, &podgroups));
        let forget_podgroup = |k: &(String, String)| scheduler.forget_native_podgroup(&k.0, &k.1);
        let apply_workload = |o: &DynamicObject| scheduler.apply_workload(&to_json(o, &workloads));
        let forget_workload = |k: &(String, String)| scheduler.forget_workload(&k.0, &k.1);
        tokio::join!(
            follow(
                podgroup_api,
                "scheduling.k8s.io PodGroup",
                apply_podgroup,
                forget_podgroup
            ),
            follow(
                workload_api,
                "scheduling.k8s.io Workload",
                apply_workload,
                forget_workload
            ),
        );
    })
}
