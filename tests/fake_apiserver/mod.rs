//! A fake kube-apiserver for integration tests: plain HTTP on 127.0.0.1, the
//! REST subset the scheduler uses, behaving like the real server (status codes,
//! `Status` bodies, watch semantics) as far as we know it.
//!
//! ```ignore
//! mod fake_apiserver;
//! use fake_apiserver::FakeApiServer;
//!
//! let api = FakeApiServer::start().await;
//! api.create(serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}));
//! let kubeconfig = api.write_kubeconfig(tmp.path());   // point the binary at it
//! // ... drive the product ...
//! assert!(api.wait_until(Duration::from_secs(5), |a| a.get("Pod", Some("default"), "p")
//!     .is_some_and(|p| p["spec"]["nodeName"] == "n1")).await);
//! api.shutdown().await;
//! ```
//!
//! Served: core v1 `namespaces`, `nodes`, `pods` (+ `status`, `binding`,
//! `eviction`), `resourcequotas`, `events`, `secrets`; `events.k8s.io/v1` `events`
//! (the same stored events, converted); `coordination.k8s.io/v1` `leases`;
//! `admissionregistration.k8s.io/v1` `mutatingwebhookconfigurations`;
//! `scheduling.k8s.io/v1` `priorityclasses` (with the system classes and the
//! Priority admission of pods); `policy/v1` `poddisruptionbudgets` (their
//! status kept by a built-in disruption controller, honoured by `eviction`);
//! Volcano's
//! `scheduling.volcano.sh/v1beta1` `podgroups` and `queues` and
//! `topology.volcano.sh/v1alpha1` `hypernodes` (as CRDs);
//! `metrics.k8s.io/v1beta1` `nodes` (metrics-server: list and get, no watch;
//! absent until a test installs it); discovery
//! (`/api`, `/apis`, `/version`) and `/healthz`. Known differences from the real
//! server are listed in `README.md` next to this file.

#![allow(dead_code)]

mod admission_review;
mod admitted_writes;
mod api_calls;
mod budgets;
mod crud;
mod discovery;
mod disruption;
mod events;
mod eviction;
mod faults;
mod gated_node_selection;
mod handlers;
mod kubeconfig;
mod lists;
mod mutating_admission;
mod node_metrics;
mod objects;
mod patch;
mod pods;
mod priority;
mod query;
mod request_cost;
mod resources;
mod routes;
mod selectors;
mod server;
mod state;
mod status;
mod store;
mod typed;
mod view;
mod watch;
mod watch_traffic;
mod webhook_matching;
mod write_lane_clock;

pub use api_calls::ApiCalls;
use crud::Origin;
pub use eviction::EvictionRecord;
use faults::Faults;
pub use node_metrics::{MetricsApi, NodeUsage};
use parking_lot::Mutex;
use resources::{Resource, Storage};
use serde_json::{Value, json};
use state::{Config, Shared};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::Store;
use tokio::sync::oneshot;
pub use watch_traffic::WatchTraffic;

/// A running fake apiserver; stops when dropped (or on [`FakeApiServer::shutdown`]).
pub struct FakeApiServer {
    state: Arc<Shared>,
    url: String,
    stop: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<()>>,
}

fn resource_named(kind: &str) -> &'static Resource {
    resources::by_name(kind).unwrap_or_else(|| panic!("fake apiserver: unknown kind {kind:?}"))
}

fn resource_of(object: &Value) -> &'static Resource {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    match object.get("apiVersion").and_then(Value::as_str) {
        Some(av) => resources::for_object(av, kind)
            .unwrap_or_else(|| panic!("fake apiserver: unsupported {av} {kind}")),
        None => resource_named(kind),
    }
}

impl FakeApiServer {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start() -> Self {
        Self::start_blocking()
    }

    /// [`FakeApiServer::start`] for tests without an async runtime (the server
    /// runs on its own thread either way).
    pub fn start_blocking() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let address = listener.local_addr().expect("local address").to_string();
        let state = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            metrics: Mutex::default(),
            faults: Mutex::new(Faults::default()),
            config: Mutex::new(Config::default()),
            token: format!("fake-token-{:016x}", objects::random_u64()),
            address: address.clone(),
            rv_waiters: Default::default(),
            watch_traffic: Mutex::default(),
            services: Mutex::default(),
            cost: Mutex::default(),
            write_lane: Default::default(),
        });
        {
            let mut store = state.store.lock();
            let ns = resources::canonical(Storage::Namespaces);
            for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                crud::create(
                    &mut store,
                    ns,
                    "",
                    json!({"metadata": {"name": name}}),
                    Origin::Test,
                )
                .expect("create namespace");
            }
            let pc = resources::canonical(Storage::PriorityClasses);
            for class in priority::system_classes() {
                crud::create(&mut store, pc, "", class, Origin::Test)
                    .expect("create system priority class");
            }
        }
        let thread = server::spawn(listener, state.clone());
        FakeApiServer {
            state,
            url: format!("http://{address}"),
            stop: Some(thread.stop),
            done: Some(thread.done),
        }
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The bearer token API requests must carry (it is in the kubeconfig).
    pub fn token(&self) -> String {
        self.state.token.clone()
    }

    /// Installs, uninstalls or breaks metrics-server (`metrics.k8s.io`; absent
    /// until set).
    pub fn set_metrics_api(&self, api: MetricsApi) {
        self.state.metrics.lock().api = api;
    }

    /// What metrics-server reports for `node` from now on (listed only while the
    /// Node exists): `cpu` and `memory` as quantities, measured in a 20 s window
    /// ending at `timestamp`.
    pub fn set_node_usage(
        &self,
        node: &str,
        cpu: &str,
        memory: &str,
        timestamp: chrono::DateTime<chrono::Utc>,
    ) {
        self.state.metrics.lock().usage.insert(
            node.to_string(),
            NodeUsage {
                cpu: cpu.to_string(),
                memory: memory.to_string(),
                timestamp,
                window: "20.05s".into(),
            },
        );
    }

    /// metrics-server stops reporting `node`.
    pub fn clear_node_usage(&self, node: &str) {
        self.state.metrics.lock().usage.remove(node);
    }

    /// Makes webhooks whose `clientConfig.service` is `namespace/name:port`
    /// reach `address`, as the Service's endpoints would. The TLS server name
    /// stays `<name>.<namespace>.svc`, as the real server dials it.
    pub fn route_service(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
        address: std::net::SocketAddr,
    ) {
        self.state
            .services
            .lock()
            .insert((namespace.to_string(), name.to_string(), port), address);
    }

    /// Writes `dir/kubeconfig` (cluster `server` = [`FakeApiServer::url`], a
    /// token user, context `fake`, namespace `default`) and returns its path.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        kubeconfig::write(dir, &self.url, &self.state.token)
    }

    /// Creates any supported object (namespace defaults to `default`), emitting
    /// ADDED. Keeps a given `status`, `uid` and `creationTimestamp`; applies the
    /// same defaults as the API (pods get schedulerName, requests from limits,
    /// phase Pending, ...). Panics when the API would refuse it.
    pub fn create(&self, object: Value) -> Value {
        self.try_create(object)
            .unwrap_or_else(|status| panic!("fake apiserver: create failed: {status}"))
    }

    /// [`FakeApiServer::create`], returning the refusal as a `Status` object.
    pub fn try_create(&self, mut object: Value) -> Result<Value, Value> {
        let res = resource_of(&object);
        pods::drop_disabled_fields(res, &mut object, self.state.config.lock().workload_apis);
        let ns = if res.namespaced {
            let ns = objects::namespace(&object);
            if ns.is_empty() { "default" } else { ns }.to_string()
        } else {
            String::new()
        };
        crud::create(&mut self.state.store.lock(), res, &ns, object, Origin::Test)
            .map_err(|e| e.to_status())
    }

    /// The stored object (as last written: events keep the API version they
    /// were written with). `kind` is a kind, plural or short name.
    pub fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let res = resource_named(kind);
        self.state
            .store
            .lock()
            .get(res.storage, namespace.unwrap_or(""), name)
            .cloned()
    }

    /// Every stored object of `kind`, sorted by namespace and name.
    pub fn list(&self, kind: &str) -> Vec<Value> {
        let res = resource_named(kind);
        self.state
            .store
            .lock()
            .objects(res.storage)
            .cloned()
            .collect()
    }

    /// Unconditional replace (test-side changes such as pod status), emitting
    /// MODIFIED; creates the object when absent. `uid` and
    /// `creationTimestamp` are kept when the new object has none.
    pub fn update(&self, object: Value) {
        let res = resource_of(&object);
        let ns = if res.namespaced {
            let ns = objects::namespace(&object);
            if ns.is_empty() { "default" } else { ns }.to_string()
        } else {
            String::new()
        };
        let name = objects::name(&object).to_string();
        let mut store = self.state.store.lock();
        let Some(old) = store.get(res.storage, &ns, &name).cloned() else {
            drop(store);
            self.create(object);
            return;
        };
        let mut new = object;
        new["apiVersion"] = json!(res.api_version());
        new["kind"] = json!(res.kind);
        let old_meta = objects::meta(&old).cloned().unwrap_or_default();
        let meta = objects::meta_mut(&mut new);
        if res.namespaced {
            meta.insert("namespace".into(), json!(ns));
        }
        for f in ["uid", "creationTimestamp"] {
            if !meta.contains_key(f)
                && let Some(v) = old_meta.get(f)
            {
                meta.insert(f.into(), v.clone());
            }
        }
        store.replace(res.storage, new);
    }

    /// Sets `status.phase` of a pod (MODIFIED).
    pub fn set_pod_phase(&self, ns: &str, name: &str, phase: &str) {
        let mut store = self.state.store.lock();
        let mut pod = store
            .get(Storage::Pods, ns, name)
            .cloned()
            .unwrap_or_else(|| panic!("fake apiserver: no pod {ns}/{name}"));
        if !pod.get("status").is_some_and(Value::is_object) {
            pod["status"] = json!({});
        }
        pod["status"]["phase"] = json!(phase);
        store.replace(Storage::Pods, pod);
    }

    /// Removes an object at once (DELETED), ignoring finalizers and grace.
    pub fn delete(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let res = resource_named(kind);
        self.state
            .store
            .lock()
            .remove(res.storage, namespace.unwrap_or(""), name)
    }

    /// Starts graceful termination of a pod, as a DELETE with the pod's grace
    /// period would: sets deletionTimestamp and deletionGracePeriodSeconds
    /// (MODIFIED).
    pub fn begin_termination(&self, ns: &str, name: &str) {
        let res = resources::canonical(Storage::Pods);
        let mut store = self.state.store.lock();
        let pod = store
            .get(Storage::Pods, ns, name)
            .cloned()
            .unwrap_or_else(|| panic!("fake apiserver: no pod {ns}/{name}"));
        let grace = pod
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30);
        crud::mark_terminating(&mut store, res, &pod, grace);
    }

    /// Removes a (terminating) pod, as the kubelet's final delete does (DELETED).
    pub fn finish_deletion(&self, ns: &str, name: &str) {
        self.state.store.lock().remove(Storage::Pods, ns, name);
    }

    /// The next `count` writes (POST/PUT/PATCH/DELETE) whose `"METHOD
    /// /path?query"` contains `pattern` answer 409 Conflict.
    pub fn inject_conflicts(&self, pattern: &str, count: usize) {
        self.state.faults.lock().add_conflicts(pattern, count);
    }

    /// The next `count` requests whose `"METHOD /path?query"` contains `pattern`
    /// answer `status` with the real server's generic Status for that code
    /// (429/503/504 carry `Retry-After: 1`).
    pub fn inject_errors(&self, pattern: &str, status: u16, count: usize) {
        self.state
            .faults
            .lock()
            .add_errors(pattern, status, 0, count);
    }

    /// Like [`FakeApiServer::inject_errors`], after letting the first `pass`
    /// matching requests through.
    pub fn inject_errors_after(&self, pattern: &str, pass: usize, status: u16, count: usize) {
        self.state
            .faults
            .lock()
            .add_errors(pattern, status, pass, count);
    }

    /// The next `count` requests whose `"METHOD /path?query"` contains `pattern`
    /// are carried out, but answer `status` (a gateway timeout that hides a
    /// committed write: the client cannot tell what happened).
    pub fn inject_lost_answers(&self, pattern: &str, status: u16, count: usize) {
        self.state
            .faults
            .lock()
            .add_lost_answers(pattern, status, count);
    }

    /// Forgets pending injected conflicts and errors.
    pub fn clear_faults(&self) {
        self.state.faults.lock().clear();
    }

    /// Delay added before every request is handled.
    pub fn set_latency(&self, d: Duration) {
        self.state.faults.lock().latency = d;
    }

    /// What each write (create, update, patch, delete) costs the single lane
    /// writes are committed on, as etcd commits them one after another: a
    /// write waits for those before it, then `d`. Zero (the default): free.
    pub fn set_write_service_time(&self, d: Duration) {
        self.state.cost.lock().write_service = d;
    }

    /// What each read (get, list; not a watch) costs the lane writes are
    /// committed on: the control plane's capacity is shared by every call, so
    /// a read waits for the calls before it, then `d`. Zero (the default): reads
    /// do not take the lane.
    pub fn set_read_service_time(&self, d: Duration) {
        self.state.cost.lock().read_service = d;
    }

    /// How long each read and each write waits on its own after its turn in
    /// the lane before it is answered (and a write's change shown to
    /// watchers): etcd's disk sync and round trips, which requests in flight
    /// together spend side by side. Zero (the default): answered at once.
    pub fn set_request_latency(&self, read: Duration, write: Duration) {
        let mut cost = self.state.cost.lock();
        cost.read_latency = read;
        cost.write_latency = write;
    }

    /// Runs the write lane on a manual clock from now on: queued writes commit
    /// only as [`FakeApiServer::advance_write_lane`] moves it past their turn.
    pub fn stop_write_lane_clock(&self) {
        self.state.write_lane.make_manual();
    }

    /// Moves the write lane's manual clock on by `d`.
    pub fn advance_write_lane(&self, d: Duration) {
        self.state.write_lane.advance(d);
    }

    /// Requests waiting for their turn in the lane or their latency (writes
    /// only, unless reads have a service time or a latency). Right after
    /// [`Self::advance_write_lane`] it may still count requests the move
    /// released: wait for [`Self::write_lane_settled`] first.
    pub fn writes_in_lane(&self) -> usize {
        self.state.write_lane.waiting()
    }

    /// Whether every request waiting in the lane has seen the lane's clock
    /// since it last moved: those it released have left [`Self::writes_in_lane`].
    pub fn write_lane_settled(&self) -> bool {
        self.state.write_lane.settled()
    }

    /// Closes every open watch stream (clients must re-watch).
    pub fn drop_watches(&self) {
        self.state.store.lock().drop_watchers();
    }

    /// Open watch streams.
    pub fn watch_count(&self) -> usize {
        self.state.store.lock().watcher_count()
    }

    /// Waits until at least `n` watches are open.
    pub async fn wait_for_watches(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |s| s.watch_count() >= n).await
    }

    /// Polls `pred` every 20 ms until it holds or `timeout` passes.
    pub async fn wait_until(&self, timeout: Duration, mut pred: impl FnMut(&Self) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if pred(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Reads waiting for a resourceVersion the store has not reached yet.
    pub fn rv_waiters(&self) -> usize {
        self.state
            .rv_waiters
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Every request so far: (method, path with query, status).
    pub fn request_log(&self) -> Vec<(String, String, u16)> {
        self.state.faults.lock().log.clone()
    }

    /// Clears the request log and the eviction log.
    pub fn clear_request_log(&self) {
        let mut faults = self.state.faults.lock();
        faults.log.clear();
        faults.evictions.clear();
        *self.state.watch_traffic.lock() = WatchTraffic::default();
    }

    /// The watch events (and their bytes) sent to watchers since the start or
    /// the last [`FakeApiServer::clear_request_log`], per resource.
    pub fn watch_traffic(&self) -> WatchTraffic {
        self.state.watch_traffic.lock().clone()
    }

    /// Every `pods/{name}/eviction` request the server handled (after
    /// injected errors, which never reach it), oldest first: namespace, pod,
    /// the HTTP status it answered (201 evicted, 429 refused by a disruption
    /// budget, 500 more than one budget, 404 no such pod, ...) and whether it
    /// was a dry run.
    pub fn evictions(&self) -> Vec<EvictionRecord> {
        self.state.faults.lock().evictions.clone()
    }

    /// `namespace/name` of the pods actually evicted (201, not a dry run),
    /// oldest first.
    pub fn evicted_pods(&self) -> Vec<String> {
        self.evictions()
            .into_iter()
            .filter(|e| e.code == 201 && !e.dry_run)
            .map(|e| format!("{}/{}", e.namespace, e.pod))
            .collect()
    }

    /// The logged requests counted by verb and resource, as the API server's
    /// request metrics count them (watches apart from reads).
    pub fn api_calls(&self) -> ApiCalls {
        let faults = self.state.faults.lock();
        ApiCalls::of(faults.log.iter().map(|(m, p, _)| (m.as_str(), p.as_str())))
    }

    /// How many logged requests had `method` and a path+query containing
    /// `contains`.
    pub fn requests_matching(&self, method: &str, contains: &str) -> usize {
        self.state
            .faults
            .lock()
            .log
            .iter()
            .filter(|(m, p, _)| m == method && p.contains(contains))
            .count()
    }

    /// Stored events (either API version) about pod `ns/pod`
    /// (`involvedObject` / `regarding` name), oldest first.
    pub fn events_for(&self, ns: &str, pod: &str) -> Vec<Value> {
        let mut evs: Vec<Value> = self
            .state
            .store
            .lock()
            .objects(Storage::Events)
            .filter(|e| events::involves_pod(e, ns, pod))
            .cloned()
            .collect();
        evs.sort_by_key(|e| {
            objects::resource_version(e)
                .parse::<u64>()
                .unwrap_or_default()
        });
        evs
    }

    /// The current (global) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.store.lock().resource_version()
    }

    /// Drops the change history: watches and continue tokens from an older
    /// resourceVersion get 410 Expired (like an etcd compaction).
    pub fn compact(&self) {
        self.state.store.lock().compact();
    }

    /// How many changes are kept for watch resumption (default 10,000).
    pub fn set_history_limit(&self, n: usize) {
        self.state.store.lock().set_history_limit(n);
    }

    /// BOOKMARK period of watches with `allowWatchBookmarks` (default 1 s; the
    /// real server sends about one a minute). Applies to watches opened later.
    pub fn set_bookmark_interval(&self, d: Duration) {
        self.state.config.lock().bookmark_interval = d.max(Duration::from_millis(10));
    }

    /// Turns on (or off) the GenericWorkload feature gate of Kubernetes 1.36:
    /// `scheduling.k8s.io/v1alpha2` PodGroups and Workloads are served and a pod
    /// keeps `spec.schedulingGroup`. Off by default, like servers before 1.36.
    pub fn set_workload_apis(&self, on: bool) {
        self.state.config.lock().workload_apis = on;
    }

    /// Turns off (or on) the `PodTopologyLabelsAdmission` gate: off, like
    /// servers before 1.35, a Binding's labels are not copied onto the pod (its
    /// annotations still are). On by default.
    pub fn set_pod_topology_labels(&self, on: bool) {
        self.state.config.lock().pod_topology_labels = on;
    }

    /// Serves the workload APIs in `version` instead: `v1beta1` as Kubernetes
    /// 1.37 does (`v1alpha2` is no longer served there), or `v1alpha2`.
    pub fn set_workload_api_version(&self, version: &'static str) {
        self.state.config.lock().workload_api_version = version;
    }

    /// When on, DELETE of a pod bound to a node (and not finished) only sets
    /// deletionTimestamp, as on a real cluster; [`FakeApiServer::finish_deletion`]
    /// plays the kubelet. Off by default: pods vanish at once.
    pub fn set_graceful_pod_deletion(&self, on: bool) {
        self.state.config.lock().graceful_pod_deletion = on;
    }

    /// Runs or stops the disruption controller (on by default). Running, it
    /// recomputes the status of every PodDisruptionBudget in a namespace right
    /// after any pod or budget there changes, and overwrites status written by
    /// anyone else, like kube-controller-manager. Stopped, budgets keep the
    /// status last written (through `/status` or [`FakeApiServer::update`]);
    /// turning it back on resyncs every budget.
    pub fn set_disruption_controller(&self, on: bool) {
        disruption::set_enabled(&mut self.state.store.lock(), on);
    }

    /// Pins PodDisruptionBudget `ns/name` at `disruptions_allowed` (MODIFIED):
    /// its status is computed once more with that value (and the matching
    /// `DisruptionAllowed` condition), then the controller leaves it alone.
    /// Evictions still spend it, so 0 makes every eviction of a healthy pod it
    /// covers answer 429, and 1 lets exactly one through. Panics when there is
    /// no such budget.
    pub fn pin_disruptions_allowed(&self, ns: &str, name: &str, disruptions_allowed: i64) {
        let pinned = disruption::pin(&mut self.state.store.lock(), ns, name, disruptions_allowed);
        assert!(pinned, "fake apiserver: no PodDisruptionBudget {ns}/{name}");
    }

    /// Hands a pinned budget back to the disruption controller, which
    /// recomputes its status at once.
    pub fn unpin_disruptions_allowed(&self, ns: &str, name: &str) {
        disruption::unpin(&mut self.state.store.lock(), ns, name);
    }

    /// Whether API requests need the kubeconfig's bearer token (default on).
    pub fn set_require_auth(&self, on: bool) {
        self.state.config.lock().require_auth = on;
    }

    /// Closes watches, stops serving and waits for the server thread.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
