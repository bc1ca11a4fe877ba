//! Command-line flags. Names follow HAMi's scheduler (`--http_bind`, `--cert_file`,
//! `--key_file` are accepted as aliases of the dashed spellings), and so does the way
//! booleans are given: `--debug` alone means true, `--debug=false` turns one off.
//! HAMi's flags that have no counterpart here (`--profiling`, `-v`) are accepted so
//! that HAMi's Deployment arguments start this server too.

use crate::policy::{GpuPolicy, NodePolicy};
use crate::scheduler::FilterMode;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// vgpu-scheduler: kube-scheduler extender and admission webhook for shared GPUs.
#[derive(Debug, Parser)]
#[command(name = "vgpu-scheduler", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve /filter, /prioritize, /bind, /mutate, probes, metrics and debug state over TLS.
    Serve(Box<ServeArgs>),
    /// Create or renew the webhook's CA and serving certificate: store them in a
    /// Secret and put the CA into the MutatingWebhookConfiguration's caBundle.
    Certs(Box<CertsArgs>),
    /// Print queues (deserved, allocated, share) and why each gang waits: from a
    /// running server, or by planning a cluster file once (a dry run).
    Queues(QueuesArgs),
    /// Replay a workload against a cluster file, once per variant of the flags,
    /// and write a report (index.html with plots, summary.json, CSVs).
    Simulate(Box<SimulateArgs>),
}

/// Flags of `simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The cluster (the format `serve --cluster-file` reads).
    #[arg(long = "cluster-file", conflicts_with = "from_cluster")]
    pub cluster_file: Option<PathBuf>,
    /// Take a read-only snapshot of the live cluster instead (list calls only).
    #[arg(long = "from-cluster")]
    pub from_cluster: bool,
    /// Kubeconfig for --from-cluster (default: $KUBECONFIG, ~/.kube/config, or
    /// the pod's service account).
    #[arg(long, requires = "from_cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// The workload: a YAML or JSON list of arrivals, or a trace recorded by
    /// `serve --record-trace`.
    #[arg(long)]
    pub workload: PathBuf,
    /// Volcano-format scheduler configuration for every variant (a variant's own
    /// --scheduler-config wins).
    #[arg(long = "scheduler-config")]
    pub scheduler_config: Option<PathBuf>,
    /// A variant as NAME:FLAGS, FLAGS being serve's flags, space-separated, e.g.
    /// "spread:--node-scheduler-policy=spread --gpu-scheduler-policy=spread".
    /// Repeat to compare; none: one variant with the defaults.
    #[arg(long = "variant")]
    pub variants: Vec<String>,
    /// Where the report goes (created if missing).
    #[arg(long)]
    pub report: PathBuf,
    /// Seed of the workload's randomness: the same seed gives the same report.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Virtual time between samples of the cluster (at least 1s). Default: 1m,
    /// or less for a replay shorter than 200 minutes, so that it still has 200
    /// samples.
    #[arg(long = "sample-every", value_parser = parse_duration)]
    pub sample_every: Option<Duration>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Flags of `queues`.
#[derive(Debug, Args)]
pub struct QueuesArgs {
    /// A running server's base URL, e.g. https://127.0.0.1:8443 (reads /debug/queues).
    #[arg(long, conflicts_with = "cluster_file")]
    pub server: Option<String>,
    /// Trust the server's certificate without verifying it (self-signed setups).
    #[arg(long)]
    pub insecure: bool,
    /// CA certificate (PEM) to verify the server with.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) to present: a server started with --client-ca-file
    /// serves /debug/queues only to clients with a certificate from that CA.
    #[arg(long = "client-certificate", requires = "client_key")]
    pub client_certificate: Option<PathBuf>,
    /// Private key (PEM) of --client-certificate.
    #[arg(long = "client-key", requires = "client_certificate")]
    pub client_key: Option<PathBuf>,
    /// Plan this cluster file once instead of asking a server.
    #[arg(long = "cluster-file")]
    pub cluster_file: Option<PathBuf>,
    /// Volcano-format scheduler configuration for the dry run.
    #[arg(long = "scheduler-config")]
    pub scheduler_config: Option<PathBuf>,
    /// Print the JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Filter modes as flag values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FilterModeArg {
    /// Choose one node and its GPUs in /filter (HAMi's behaviour).
    Single,
    /// Return all fitting nodes; score in /prioritize; choose GPUs in /bind.
    All,
}

impl From<FilterModeArg> for FilterMode {
    fn from(v: FilterModeArg) -> Self {
        match v {
            FilterModeArg::Single => FilterMode::Single,
            FilterModeArg::All => FilterMode::All,
        }
    }
}

/// `--busy-node-tolerance`: points of the policy's preference, or off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusyNodeTolerance(pub Option<f64>);

fn parse_busy_node_tolerance(value: &str) -> Result<BusyNodeTolerance, String> {
    if value.trim() == "off" {
        return Ok(BusyNodeTolerance(None));
    }
    match value.trim().parse::<f64>() {
        Ok(points) if (0.0..=100.0).contains(&points) => Ok(BusyNodeTolerance(Some(points))),
        _ => Err(format!(
            "{value:?} is not a number of points from 0 to 100, nor off"
        )),
    }
}

fn parse_duration(v: &str) -> Result<Duration, String> {
    let v = v.trim();
    let (number, unit) = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|i| v.split_at(i))
        .unwrap_or((v, "s"));
    let n: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {v:?}: use e.g. 30s, 5m, 1h, 500ms"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => {
            return Err(format!(
                "invalid duration unit in {v:?}: use ms, s, m, h or d"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration {v:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A boolean as Go's flag package reads it: `1`, `t`, `T`, `TRUE`, `true`, `True`,
/// `0`, `f`, `F`, `FALSE`, `false`, `False`.
fn parse_positive_duration(v: &str) -> Result<Duration, String> {
    match parse_duration(v)? {
        d if d.is_zero() => Err(format!("{v:?}: must be longer than zero")),
        d => Ok(d),
    }
}

fn parse_positive_count(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(0) => Err(format!("{v:?}: must be at least 1")),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{v:?}: {e}")),
    }
}

fn parse_go_bool(v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("invalid boolean {v:?}: use true or false")),
    }
}

fn parse_node_policy(v: &str) -> Result<NodePolicy, String> {
    NodePolicy::parse_flag(v)
}

fn parse_gpu_policy(v: &str) -> Result<GpuPolicy, String> {
    GpuPolicy::parse_flag(v)
}

fn parse_size(v: &str) -> Result<usize, String> {
    crate::quantity::quantity_to_count(v)
        .map_err(|e| e.to_string())
        .and_then(|n| usize::try_from(n).map_err(|_| format!("{v} is too large")))
}

/// Flags of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (TLS).
    #[arg(
        long = "http-bind",
        alias = "http_bind",
        default_value = "127.0.0.1:8443"
    )]
    pub http_bind: String,
    /// Also serve /metrics over plain HTTP on this address (HAMi's separate metrics
    /// listener; HAMi's default is `:9395`, here it is off unless given). `:PORT`
    /// listens on every interface.
    #[arg(long = "metrics-bind-address", alias = "metrics_bind_address")]
    pub metrics_bind_address: Option<String>,
    /// Also emit HAMi's metric names from before v2.9 (`GPUDeviceMemoryLimit`,
    /// `QuotaUsed`, ...) with their old label names, next to the `hami_*` ones.
    #[arg(long = "legacy-metrics", alias = "legacy_metrics", default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub legacy_metrics: bool,
    /// Serving certificate (PEM). Without it a self-signed one is made at start.
    #[arg(long = "cert-file", alias = "cert_file")]
    pub cert_file: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long = "key-file", alias = "key_file")]
    pub key_file: Option<PathBuf>,
    /// CA whose client certificates the extender verbs (/filter, /prioritize, /bind)
    /// require; the webhook and probes stay open.
    #[arg(long = "client-ca-file", alias = "client_ca_file")]
    pub client_ca_file: Option<PathBuf>,
    /// Where the self-signed certificate is written (default: a new temp directory).
    #[arg(long = "self-signed-dir")]
    pub self_signed_dir: Option<PathBuf>,
    /// Extra DNS names or IPs for the self-signed certificate.
    #[arg(long = "self-signed-name")]
    pub self_signed_names: Vec<String>,
    /// Name written into spec.schedulerName of vGPU pods (and events' source).
    #[arg(long = "scheduler-name", default_value = "vgpu-scheduler")]
    pub scheduler_name: String,
    /// Default node policy: binpack or spread.
    #[arg(long = "node-scheduler-policy", default_value = "binpack", value_parser = parse_node_policy)]
    pub node_scheduler_policy: NodePolicy,
    /// Default GPU policy: binpack, spread, numa, topology-aware, mutex, or a comma chain.
    #[arg(long = "gpu-scheduler-policy", default_value = "spread", value_parser = parse_gpu_policy)]
    pub gpu_scheduler_policy: GpuPolicy,
    /// HAMi device config (YAML with an `nvidia:` section).
    #[arg(long = "device-config-file", alias = "device_config_file")]
    pub device_config_file: Option<PathBuf>,
    /// Cluster file: multi-document YAML or v1 List of Nodes, Pods, ResourceQuotas.
    /// Without it the scheduler talks to Kubernetes.
    #[arg(long = "cluster-file")]
    pub cluster_file: Option<PathBuf>,
    /// Kubeconfig for live mode (default: in-cluster config, then $KUBECONFIG / ~/.kube/config).
    #[arg(long = "kubeconfig")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubernetes API calls per second (0: unlimited); events have a budget of
    /// their own of the same size.
    #[arg(long = "kube-qps", default_value_t = 500)]
    pub kube_qps: u32,
    /// Burst of Kubernetes API calls above the QPS.
    #[arg(long = "kube-burst", default_value_t = 1000)]
    pub kube_burst: u32,
    /// Time limit for connecting to the Kubernetes API and for each read and write
    /// of a call, in seconds (`30`) or as a duration (`30s`); 0: none.
    #[arg(long = "kube-timeout", alias = "kube_timeout", default_value = "0", value_parser = parse_duration)]
    pub kube_timeout: Duration,
    /// Only nodes matching this label selector (`k=v,k2=v2`) are registered.
    #[arg(long = "node-label-selector")]
    pub node_label_selector: Option<String>,
    /// Elect a leader among replicas with a Lease; only the leader writes handshakes,
    /// repairs locks and clears expired reservations. All replicas serve requests.
    #[arg(long = "leader-elect", default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Lease name (default: the scheduler name).
    #[arg(long = "leader-elect-resource-name")]
    pub leader_elect_resource_name: Option<String>,
    /// Lease namespace (default: $POD_NAMESPACE, else kube-system).
    #[arg(long = "leader-elect-resource-namespace")]
    pub leader_elect_resource_namespace: Option<String>,
    /// How often the ledger is compared with a full list of pods (drift repair).
    #[arg(long = "resync-period", default_value = "5m", value_parser = parse_duration)]
    pub resync_period: Duration,
    /// In cluster-file mode, act like HAMi's device plugin after a bind (mark the
    /// pod allocated and release the node lock).
    #[arg(long = "simulate-device-plugin", default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub simulate_device_plugin: bool,
    /// single: choose node and GPUs in /filter; all: return all fitting nodes.
    #[arg(long = "filter-mode", value_enum, default_value = "single")]
    pub filter_mode: FilterModeArg,
    /// How long a /filter reservation waits for its /bind before the GPUs are freed.
    #[arg(long = "reservation-ttl", default_value = "120s", value_parser = parse_duration)]
    pub reservation_ttl: Duration,
    /// Age after which a node lock is taken over.
    #[arg(long = "node-lock-timeout", default_value = "5m", value_parser = parse_duration)]
    pub node_lock_timeout: Duration,
    /// Where a node's one pod at a time for the device plugin is kept: `node`,
    /// HAMi's lock annotation on the Node (every binder sees it); `pods`, no
    /// write: a node takes no other pod while one bound there is `allocating`,
    /// as this server's binds and the pod watch show it (two writes fewer per
    /// pod; only where this server is the one binder of GPU pods).
    #[arg(long = "node-lock", value_enum, default_value = "node")]
    pub node_lock: crate::node_lock::mode::NodeLockMode,
    /// How long /bind waits for a node lock another pod holds, counted from the
    /// start of the bind (a strict gang member's wait at its barrier and its
    /// wait for its turn behind other binds of the node take from it), but at
    /// least 3 s once the lock is asked for. Placement also passes over a node
    /// whose binds ahead would not be answered within it.
    #[arg(long = "node-lock-retry-timeout", default_value = "20s", value_parser = parse_duration)]
    pub node_lock_retry_timeout: Duration,
    /// When the node the policy prefers is busy with a bind (its lock held until
    /// the device plugin answers), place the pod on the best idle node the policy
    /// likes at most this many points less (0-100: utilisation in percent under
    /// binpack, free share under spread), else on the one with the fewest binds
    /// ahead; `off` always waits for the busy node.
    #[arg(long = "busy-node-tolerance", default_value = "10", value_parser = parse_busy_node_tolerance)]
    pub busy_node_tolerance: BusyNodeTolerance,
    /// Which of HAMi's placement events are recorded: `all` (FilteringSucceed and
    /// BindingSucceed too, as HAMi does), `failures` (FilteringFailed,
    /// BindingFailed), or `none`. Each event is a write to the API server: at
    /// most one per pod and outcome is written in 10 minutes, whatever its
    /// message.
    #[arg(long = "placement-events", value_enum, default_value = "failures")]
    pub placement_events: crate::scheduler::PlacementEvents,
    /// Rewrite spec.schedulerName of vGPU pods that name default-scheduler.
    #[arg(long = "force-overwrite-default-scheduler", default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub force_overwrite_default_scheduler: bool,
    /// Scheduler names under which another scheduler (HAMi's) placed pods before
    /// this one took over: their device annotations keep counting. Comma-separated;
    /// empty once no such pod runs any more.
    #[arg(
        long = "previous-scheduler-names",
        value_delimiter = ',',
        default_value = "hami-scheduler"
    )]
    pub previous_scheduler_names: Vec<String>,
    /// Kubernetes users (`system:serviceaccount:NAMESPACE:NAME`) that may write the
    /// placement annotations (`hami.io/vgpu-node`, `hami.io/vgpu-devices-*`,
    /// `hami.io/bind-phase`, `hami.io/vgpu-mig-allocations`) on pods: this
    /// scheduler's own identity. Comma-separated or repeated.
    #[arg(long = "scheduler-users", value_delimiter = ',')]
    pub scheduler_users: Vec<String>,
    /// Kubernetes users of HAMi's device plugin, which may change
    /// `hami.io/bind-phase`, `hami.io/vgpu-devices-to-allocate` and
    /// `hami.io/vgpu-mig-allocations` on pods. Comma-separated or repeated.
    #[arg(long = "device-plugin-users", value_delimiter = ',')]
    pub device_plugin_users: Vec<String>,
    /// Admit privileged containers that ask for vGPU (HAMi refuses them): they see
    /// every GPU on their node, so their vGPU limits do not hold. Off by default;
    /// turned on, they are scheduled like other vGPU pods, with a warning.
    #[arg(long = "allow-privileged-vgpu", default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub allow_privileged_vgpu: bool,
    /// Largest request body accepted (full Node lists are large).
    #[arg(long = "max-request-body", default_value = "32Mi", value_parser = parse_size)]
    pub max_request_body: usize,
    /// Largest AdmissionReview accepted on /mutate and /webhook: a review carries
    /// at most two objects the API server already limited (3 MiB per request).
    #[arg(long = "max-admission-body", default_value = "4Mi", value_parser = parse_size)]
    pub max_admission_body: usize,
    /// Extender request body bytes held in memory at once over all connections,
    /// charged as they arrive; a request whose next bytes cannot get their share
    /// within 5 s is refused.
    #[arg(long = "max-request-bodies-in-flight", default_value = "64Mi", value_parser = parse_size)]
    pub max_request_bodies_in_flight: usize,
    /// AdmissionReview body bytes held in memory at once over all connections: a
    /// budget apart from the extender's, so webhook traffic never starves
    /// kube-scheduler's calls.
    #[arg(long = "max-admission-bodies-in-flight", default_value = "16Mi", value_parser = parse_size)]
    pub max_admission_bodies_in_flight: usize,
    /// Connections served at once; more wait in the listen backlog.
    #[arg(long = "max-connections", default_value_t = 512)]
    pub max_connections: usize,
    /// Concurrent HTTP/2 streams (requests) per connection.
    #[arg(long = "max-streams-per-connection", default_value_t = 64)]
    pub max_streams_per_connection: u32,
    /// Time limit for one request.
    #[arg(long = "request-timeout", default_value = "60s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Log format.
    #[arg(long = "log-format", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log this server's debug lines too when RUST_LOG is not set (HAMi's `--debug`).
    #[arg(long = "debug", default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub debug: bool,
    /// klog's verbosity, accepted for HAMi's arguments (`-v=4`): 4 or more acts as
    /// --debug; lower changes nothing.
    #[arg(short = 'v', long = "v", value_name = "LEVEL")]
    pub verbosity: Option<u8>,
    /// Accepted for HAMi's arguments (its chart's `ascend.enabled`): only NVIDIA GPUs
    /// are scheduled here, so Ascend devices are left alone.
    #[arg(long = "enable-ascend", hide = true, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub enable_ascend: bool,
    /// Accepted for HAMi's arguments (its chart's `iluvatar.enabled`): only NVIDIA
    /// GPUs are scheduled here.
    #[arg(long = "enable-iluvatar", hide = true, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub enable_iluvatar: bool,
    /// Accepted for HAMi's arguments; there are no profiling routes here.
    #[arg(long = "profiling", default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub profiling: bool,
    /// Gang and queue scheduling: gate gang/queue pods at admission and place
    /// whole gangs (Volcano PodGroups and Queues).
    #[arg(long = "gang-scheduling", default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub gang_scheduling: bool,
    /// Volcano-format scheduler configuration (actions, tiers of plugins), reloaded
    /// when the file changes. Without it, Volcano's default configuration.
    #[arg(long = "scheduler-config")]
    pub scheduler_config: Option<PathBuf>,
    /// How often the gang planner runs (it also runs when gang pods change).
    #[arg(long = "schedule-period", default_value = "1s", value_parser = parse_duration)]
    pub schedule_period: Duration,
    /// How often nodes' measured usage is listed from metrics.k8s.io
    /// (metrics-server, which cannot be watched), while a configured plugin
    /// (usage) reads it.
    #[arg(long = "node-metrics-interval", default_value = "30s", value_parser = parse_positive_duration)]
    pub node_metrics_interval: Duration,
    /// How long a planned gang member's GPUs wait for its bind; a gang that has not
    /// started by then is released and its started members evicted.
    #[arg(long = "gang-timeout", default_value = "5m", value_parser = parse_duration)]
    pub gang_timeout: Duration,
    /// Hold every gang member at /bind until minMember members arrived (PodGroup
    /// annotation vgpu-scheduler.io/gang-strict overrides it per gang).
    #[arg(long = "gang-strict", default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, action = clap::ArgAction::Set)]
    pub gang_strict: bool,
    /// Run the gang planner only while the kube-scheduler of this pod holds this
    /// Lease (NAMESPACE/NAME; its holder is `<POD_NAME>_<uuid>`), so planning and
    /// the /filter calls of the active kube-scheduler share one ledger. Without it
    /// the planner follows this server's own --leader-elect Lease.
    #[arg(long = "planner-follows-lease")]
    pub planner_follows_lease: Option<String>,
    /// How long a strict gang member waits at /bind (keep under the bind verb's
    /// httpTimeout).
    #[arg(long = "gang-strict-wait", default_value = "25s", value_parser = parse_duration)]
    pub gang_strict_wait: Duration,
    /// Gang and queue pods known only from /filter (a cluster file has no watch;
    /// in a live cluster, pods the watch has not shown) kept at most: beyond it,
    /// those asked about longest ago are forgotten first (never pods holding GPUs).
    #[arg(long = "max-filter-only-pods", default_value_t = crate::gang::filter_only::DEFAULT_MAX, value_parser = parse_positive_count)]
    pub max_filter_only_pods: usize,
    /// How long a gang or queue pod known only from /filter is kept without being
    /// asked about again (keep it above kube-scheduler's 5m retry of unschedulable
    /// pods).
    #[arg(long = "filter-only-pod-ttl", default_value = "10m", value_parser = parse_positive_duration)]
    pub filter_only_pod_ttl: Duration,
    /// Append a trace of what this server sees to FILE, one JSON object a line:
    /// vGPU pods as they arrive (their specs), binds, ends, and PodGroups.
    /// `simulate --workload FILE` replays it.
    #[arg(long = "record-trace", value_name = "FILE")]
    pub record_trace: Option<PathBuf>,
    /// Keep containers' environment variable values and kubectl's
    /// last-applied-configuration annotation in the trace. Left out by default:
    /// they often hold secrets, and placement does not depend on them.
    #[arg(long = "record-trace-verbatim")]
    pub record_trace_verbatim: bool,
    /// Threads that serve requests (at most the CPUs this process may use).
    /// kube-scheduler filters one pod at a time, and one thread answers a filter over
    /// 5,000 nodes in under half a millisecond; more threads add throughput for many
    /// concurrent callers on a machine with spare cores, but where the server shares
    /// its cores they preempt each other and lengthen the tail. Watches, housekeeping
    /// and the periodic planning cycles run on a background thread either way (the
    /// resync on a blocking thread of its own).
    #[arg(long = "worker-threads", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: u16,
}

impl ServeArgs {
    /// The Kubernetes client's time limit: `None` for `--kube-timeout=0`.
    pub fn kube_timeout(&self) -> Option<Duration> {
        (!self.kube_timeout.is_zero()).then_some(self.kube_timeout)
    }

    /// What is logged when RUST_LOG is not set: with `--debug` or `-v=4` and above
    /// this server's own debug lines too (not its libraries'), else info and above.
    pub fn default_log_filter(&self) -> &'static str {
        if self.debug || self.verbosity.is_some_and(|v| v >= 4) {
            "info,vgpu_scheduler=debug"
        } else {
            "info"
        }
    }

    /// The async runtime's worker threads: `--worker-threads`, but never more than
    /// the CPUs available (threads beyond them only take turns).
    pub fn runtime_threads(&self) -> usize {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        usize::from(self.worker_threads).min(cpus).max(1)
    }
}

/// Flags of `certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Namespace of the Secret and of the Service the webhook calls.
    #[arg(long, default_value = "vgpu-system", env = "POD_NAMESPACE")]
    pub namespace: String,
    /// Secret holding tls.crt, tls.key, ca.crt (the trusted CAs) and ca.key.
    #[arg(long = "secret-name", default_value = "vgpu-scheduler-tls")]
    pub secret_name: String,
    /// Service the webhook calls: the serving certificate names `<svc>`, `<svc>.<ns>`,
    /// `<svc>.<ns>.svc` and `<svc>.<ns>.svc.cluster.local`.
    #[arg(long = "service-name", default_value = "vgpu-scheduler")]
    pub service_name: String,
    /// Extra DNS names or IPs for the serving certificate (repeatable).
    #[arg(long = "extra-name")]
    pub extra_names: Vec<String>,
    /// MutatingWebhookConfiguration whose webhooks get the CA bundle; empty: none.
    #[arg(long = "webhook-name", default_value = "vgpu-scheduler")]
    pub webhook_name: String,
    /// A missing MutatingWebhookConfiguration is not an error (a pre-install hook
    /// runs before it exists; the post-install run fills its caBundle).
    #[arg(long = "allow-missing-webhook", default_value_t = false)]
    pub allow_missing_webhook: bool,
    /// Also issue a client certificate for kube-scheduler's calls to the extender
    /// verbs (client.crt, client.key in the Secret; pass ca.crt to `serve
    /// --client-ca-file`).
    #[arg(long = "client-cert", default_value_t = false)]
    pub client_cert: bool,
    /// Common name of the client certificate.
    #[arg(
        long = "client-cert-name",
        default_value = "kube-scheduler-extender-client"
    )]
    pub client_cert_name: String,
    /// Kubeconfig (default: in-cluster config, then $KUBECONFIG / ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Lifetime of a new CA.
    #[arg(long = "ca-validity", default_value = "3650d", value_parser = parse_duration)]
    pub ca_validity: Duration,
    /// Replace the CA when it expires within this (the old one stays trusted until it expires).
    #[arg(long = "ca-renew-before", default_value = "365d", value_parser = parse_duration)]
    pub ca_renew_before: Duration,
    /// Lifetime of a new serving certificate (never beyond the CA's).
    #[arg(long = "cert-validity", default_value = "365d", value_parser = parse_duration)]
    pub cert_validity: Duration,
    /// Lifetime of a new client certificate (never beyond the CA's). Long by default:
    /// kube-scheduler reads it only when it starts, and one signed by a replaced CA
    /// stays valid while that CA is still trusted.
    #[arg(long = "client-cert-validity", default_value = "3650d", value_parser = parse_duration)]
    pub client_cert_validity: Duration,
    /// Replace the serving or client certificate when it expires within this.
    #[arg(long = "renew-before", default_value = "30d", value_parser = parse_duration)]
    pub renew_before: Duration,
    /// Issue a new serving (and client) certificate now, from the current CA.
    #[arg(long, default_value_t = false)]
    pub rotate: bool,
    /// Make a new CA now and issue new certificates from it; the old CA stays in
    /// ca.crt and the caBundle until it expires. Also replaces unreadable Secret content.
    #[arg(long = "rotate-ca", default_value_t = false)]
    pub rotate_ca: bool,
    /// Log format.
    #[arg(long = "log-format", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> ServeArgs {
        let mut all = vec!["vgpu-scheduler", "serve"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Serve(s) => *s,
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn hami_underscore_aliases_work() {
        let s = serve(&[
            "--http_bind=0.0.0.0:443",
            "--cert_file",
            "a",
            "--key_file",
            "b",
        ]);
        assert_eq!(s.http_bind, "0.0.0.0:443");
        assert_eq!(s.cert_file.unwrap(), PathBuf::from("a"));
        assert_eq!(s.key_file.unwrap(), PathBuf::from("b"));
    }

    #[test]
    fn busy_node_tolerance_is_points_or_off() {
        assert_eq!(
            serve(&[]).busy_node_tolerance,
            BusyNodeTolerance(Some(10.0))
        );
        let s = serve(&["--busy-node-tolerance=25"]);
        assert_eq!(s.busy_node_tolerance, BusyNodeTolerance(Some(25.0)));
        let s = serve(&["--busy-node-tolerance", "off"]);
        assert_eq!(s.busy_node_tolerance, BusyNodeTolerance(None));
        for bad in ["101", "-1", "some"] {
            let flag = format!("--busy-node-tolerance={bad}");
            assert!(Cli::try_parse_from(["vgpu-scheduler", "serve", &flag]).is_err());
        }
    }

    #[test]
    fn policies_and_durations_parse() {
        let s = serve(&[
            "--node-scheduler-policy=spread",
            "--gpu-scheduler-policy=numa,binpack",
            "--node-lock-timeout=90s",
            "--reservation-ttl=2m",
            "--max-request-body=1Mi",
        ]);
        assert_eq!(s.node_scheduler_policy, NodePolicy::Spread);
        assert_eq!(s.node_lock_timeout, Duration::from_secs(90));
        assert_eq!(s.reservation_ttl, Duration::from_secs(120));
        assert_eq!(s.max_request_body, 1 << 20);
        let err = Cli::try_parse_from(["vgpu-scheduler", "serve", "--node-scheduler-policy=pack"])
            .unwrap_err();
        assert!(err.to_string().contains("unknown node policy"));
    }

    fn serve_err(args: &[&str]) -> String {
        let mut all = vec!["vgpu-scheduler", "serve"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap_err().to_string()
    }

    /// The arguments HAMi's chart gives its scheduler container (with the optional
    /// ones and the default extraArgs) start this server too.
    #[test]
    fn hami_deployment_arguments_are_accepted() {
        let s = serve(&[
            "--http_bind=0.0.0.0:443",
            "--cert_file=/tls/tls.crt",
            "--key_file=/tls/tls.key",
            "--scheduler-name=hami-scheduler",
            "--metrics-bind-address=:9395",
            "--node-scheduler-policy=binpack",
            "--gpu-scheduler-policy=spread",
            "--force-overwrite-default-scheduler=true",
            "--device-config-file=/device-config.yaml",
            "--leader-elect=true",
            "--leader-elect-resource-name=hami-scheduler",
            "--leader-elect-resource-namespace=kube-system",
            "--node-label-selector=gpu=on",
            "--legacy-metrics=true",
            "--kube-timeout=30",
            "--profiling=false",
            "--enable-ascend=true",
            "--enable-iluvatar=true",
            "--debug",
            "-v=4",
        ]);
        assert_eq!(s.http_bind, "0.0.0.0:443");
        assert_eq!(s.metrics_bind_address.as_deref(), Some(":9395"));
        assert!(s.legacy_metrics);
        assert!(s.leader_elect);
        assert!(!s.profiling);
        assert!(s.enable_ascend && s.enable_iluvatar);
        assert!(s.debug);
        assert_eq!(s.verbosity, Some(4));
        assert_eq!(s.kube_timeout(), Some(Duration::from_secs(30)));
        assert_eq!(s.default_log_filter(), "info,vgpu_scheduler=debug");
    }

    #[test]
    fn hami_flags_default_to_off() {
        let s = serve(&[]);
        assert_eq!(s.metrics_bind_address, None);
        assert!(!s.legacy_metrics && !s.profiling && !s.debug);
        assert_eq!(s.verbosity, None);
        assert_eq!(s.kube_timeout(), None);
        assert_eq!(s.default_log_filter(), "info");
        assert_eq!(serve(&["--kube-timeout", "0"]).kube_timeout(), None);
        assert_eq!(
            serve(&["--kube-timeout=1m"]).kube_timeout(),
            Some(Duration::from_secs(60))
        );
        assert_eq!(serve(&["-v", "2"]).default_log_filter(), "info");
        assert_eq!(
            serve(&["--v=5"]).default_log_filter(),
            "info,vgpu_scheduler=debug"
        );
        assert!(serve_err(&["--kube-timeout=soon"]).contains("--kube-timeout"));
    }

    /// Booleans as Go's flag package takes them: alone means true, `=VALUE` with
    /// Go's spellings; a separate value still works as before.
    #[test]
    fn booleans_are_given_the_go_way() {
        let s = serve(&[
            "--debug",
            "--profiling",
            "--legacy-metrics",
            "--leader-elect",
        ]);
        assert!(s.debug && s.profiling && s.legacy_metrics && s.leader_elect);
        let s = serve(&[
            "--debug=true",
            "--gang-strict=1",
            "--gang-scheduling=F",
            "--simulate-device-plugin=False",
        ]);
        assert!(s.debug && s.gang_strict);
        assert!(!s.gang_scheduling && !s.simulate_device_plugin);
        let s = serve(&[
            "--debug=false",
            "--force-overwrite-default-scheduler",
            "false",
        ]);
        assert!(!s.debug && !s.force_overwrite_default_scheduler);
        // A bare flag followed by another flag does not swallow it.
        let s = serve(&["--leader-elect", "--debug"]);
        assert!(s.leader_elect && s.debug);
        assert!(serve_err(&["--debug=maybe"]).contains("invalid boolean"));
    }

    #[test]
    fn worker_threads_default_to_one_and_stay_within_the_cpus() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let s = serve(&[]);
        assert_eq!(s.worker_threads, 1);
        assert_eq!(s.runtime_threads(), 1);
        assert_eq!(
            serve(&["--worker-threads=2"]).runtime_threads(),
            cpus.min(2)
        );
        assert_eq!(
            serve(&["--worker-threads=64"]).runtime_threads(),
            cpus.min(64)
        );
        let err =
            Cli::try_parse_from(["vgpu-scheduler", "serve", "--worker-threads=0"]).unwrap_err();
        assert!(err.to_string().contains("--worker-threads"), "{err}");
    }
}
