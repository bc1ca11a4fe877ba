//! State shared by the HTTP side and the test-side handle.

use super::faults::Faults;
use super::store::Store;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Knobs a test can turn.
pub struct Config {
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// DELETE of a pod on a node sets deletionTimestamp (like the real server)
    /// instead of removing it at once.
    pub graceful_pod_deletion: bool,
    /// Reject API requests without the kubeconfig's bearer token (401).
    pub require_auth: bool,
    /// Serve `scheduling.k8s.io/v1alpha2` PodGroups and Workloads and keep a
    /// pod's `spec.schedulingGroup`, like a 1.36 server with the GenericWorkload
    /// gate on. Off, like an older server: the paths are unknown and the pod field
    /// is dropped on create.
    pub workload_apis: bool,
    /// The version of `scheduling.k8s.io` that serves PodGroups and Workloads
    /// when `workload_apis` is on: `v1alpha2` (1.36) or `v1beta1` (1.37).
    pub workload_api_version: &'static str,
    /// The `PodTopologyLabelsAdmission` gate (beta and on by default since
    /// 1.35): a Binding's labels, with the target Node's zone and region added,
    /// are copied onto the pod it binds. Off, like older servers: only its
    /// annotations are.
    pub pod_topology_labels: bool,
}

impl Config {
    /// The version the workload APIs are served in, if they are.
    pub fn workload_version(&self) -> Option<&'static str> {
        self.workload_apis.then_some(self.workload_api_version)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bookmark_interval: Duration::from_secs(1),
            graceful_pod_deletion: false,
            require_auth: true,
            workload_apis: false,
            workload_api_version: "v1alpha2",
            pod_topology_labels: true,
        }
    }
}

pub struct Shared {
    pub store: Mutex<Store>,
    /// `metrics.k8s.io`: whether it is there, and the nodes' usage.
    pub metrics: Mutex<super::node_metrics::MetricsState>,
    pub faults: Mutex<Faults>,
    pub config: Mutex<Config>,
    pub token: String,
    /// `127.0.0.1:port`.
    pub address: String,
    /// Reads now waiting for a resourceVersion from the future, so a test can
    /// tell that its read arrived before the write it waits for.
    pub rv_waiters: std::sync::atomic::AtomicUsize,
    /// Watch events sent, per resource.
    pub watch_traffic: Mutex<super::watch_traffic::WatchTraffic>,
    /// Where a webhook's `clientConfig.service` (namespace, name, port) is
    /// reached: the fake has no Services or Endpoints, so a test says.
    pub services: Mutex<HashMap<(String, String, u16), SocketAddr>>,
    /// What each request costs (latency, its turn in the lane).
    pub cost: Mutex<super::request_cost::RequestCost>,
    /// The clock requests wait on for their turn in the lane and their latency.
    pub write_lane: super::write_lane_clock::WriteLaneClock,
}
