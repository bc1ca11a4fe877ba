//! The plain-YAML install (`manifests/install/`), `manifests/*.yaml` and the Helm
//! chart (`charts/vgpu-scheduler/`, linted and rendered by the real `helm` with
//! default and with non-default values, see `tests/helm/`): every document parses into its Kubernetes type
//! (k8s-openapi) with no field the type does not know, and the pieces fit together
//! and fit the binary: the KubeSchedulerConfiguration names only routes the server
//! serves and resources it manages, the flags are ones `vgpu-scheduler serve` and
//! `vgpu-scheduler certs` accept, the webhook fails closed (by default) but matches
//! narrowly, RBAC grants exactly what the code uses, and the chart's default render
//! is the plain install.

mod helm;

use k8s_openapi::Resource;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PodSpec, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde::de::{Deserialize, DeserializeOwned};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use vgpu_scheduler::device::device_config::DeviceConfig;

/// Routes the server serves for kube-scheduler (src/app.rs).
const EXTENDER_ROUTES: [&str; 3] = ["filter", "prioritize", "bind"];
/// Annotations that make a pod a gang or queue member (the webhook's matchConditions).
const GANG_ANNOTATIONS: [&str; 4] = [
    "scheduling.k8s.io/group-name",
    "scheduling.volcano.sh/group-name",
    "scheduling.volcano.sh/queue-name",
    "volcano.sh/queue-name",
];
const NAMESPACE: &str = "vgpu-system";
const EXTENDER: &str = "extender";
const KUBE_SCHEDULER: &str = "kube-scheduler";

mod fake_apiserver;

/// One YAML document and where it came from.
struct Doc {
    file: String,
    value: Value,
}

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

fn yaml_files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| {
            p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        })
        .collect();
    files.sort();
    files
}

fn parse_yaml_documents(file: &str, text: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let yaml = serde_yaml_ng::Value::deserialize(document)
            .unwrap_or_else(|e| panic!("{file}: document {i}: invalid YAML: {e}"));
        if yaml.is_null() {
            continue;
        }
        let value = serde_json::to_value(&yaml)
            .unwrap_or_else(|e| panic!("{file}: document {i}: not JSON-compatible: {e}"));
        docs.push(Doc {
            file: format!("{file} (document {i})"),
            value,
        });
    }
    docs
}

fn documents(files: &[PathBuf]) -> Vec<Doc> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let name = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let found = parse_yaml_documents(&name, &text);
        assert!(!found.is_empty(), "{name}: no YAML document");
        docs.extend(found);
    }
    docs
}

/// Paths of fields present in `input` but absent after a round trip through the
/// typed object: fields the Kubernetes type does not have (misspelled or misplaced).
fn dropped_fields(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match b.get(key) {
                    Some(other) => dropped_fields(value, other, &here, out),
                    None if value.is_null() => {}
                    None => out.push(here),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                dropped_fields(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Parses `doc` as `T`, which must be the type its apiVersion/kind name, and fails
/// on any field `T` does not know.
fn typed<T: Resource + DeserializeOwned + Serialize>(doc: &Doc) -> T {
    assert_eq!(
        doc.value["apiVersion"].as_str(),
        Some(T::API_VERSION),
        "{}: apiVersion of a {}",
        doc.file,
        T::KIND
    );
    let object: T = serde_json::from_value(doc.value.clone())
        .unwrap_or_else(|e| panic!("{}: not a valid {}: {e}", doc.file, T::KIND));
    let back = serde_json::to_value(&object).unwrap();
    let mut dropped = Vec::new();
    dropped_fields(&doc.value, &back, "", &mut dropped);
    assert!(
        dropped.is_empty(),
        "{}: fields unknown to {} {} (misspelled or misplaced?): {dropped:?}",
        doc.file,
        T::API_VERSION,
        T::KIND
    );
    object
}

/// Every object of a set of manifests, by type.
#[derive(Default)]
struct Objects {
    namespaces: Vec<Namespace>,
    service_accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    config_maps: Vec<ConfigMap>,
    deployments: Vec<Deployment>,
    services: Vec<Service>,
    pod_disruption_budgets: Vec<PodDisruptionBudget>,
    webhooks: Vec<MutatingWebhookConfiguration>,
    policies: Vec<ValidatingAdmissionPolicy>,
    policy_bindings: Vec<ValidatingAdmissionPolicyBinding>,
    jobs: Vec<Job>,
    cron_jobs: Vec<CronJob>,
    crds: Vec<CustomResourceDefinition>,
    /// cert-manager and prometheus-operator objects (no k8s-openapi type).
    extensions: Vec<Doc>,
    /// KubeSchedulerConfiguration documents, with where they came from.
    scheduler_configs: Vec<Doc>,
    /// Every document, for comparisons.
    docs: Vec<Doc>,
}

/// Kinds of other projects' CRDs the chart may render, with their apiVersion.
const EXTENSION_KINDS: [(&str, &str); 3] = [
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
];

fn load(docs: Vec<Doc>) -> Objects {
    let mut objects = Objects::default();
    for doc in docs {
        let kind = doc.value["kind"].as_str().unwrap_or("").to_string();
        match kind.as_str() {
            "Namespace" => objects.namespaces.push(typed(&doc)),
            "ServiceAccount" => objects.service_accounts.push(typed(&doc)),
            "ClusterRole" => objects.cluster_roles.push(typed(&doc)),
            "ClusterRoleBinding" => objects.cluster_role_bindings.push(typed(&doc)),
            "Role" => objects.roles.push(typed(&doc)),
            "RoleBinding" => objects.role_bindings.push(typed(&doc)),
            "ConfigMap" => objects.config_maps.push(typed(&doc)),
            "Deployment" => objects.deployments.push(typed(&doc)),
            "Service" => objects.services.push(typed(&doc)),
            "PodDisruptionBudget" => objects.pod_disruption_budgets.push(typed(&doc)),
            "MutatingWebhookConfiguration" => objects.webhooks.push(typed(&doc)),
            "ValidatingAdmissionPolicy" => objects.policies.push(typed(&doc)),
            "ValidatingAdmissionPolicyBinding" => objects.policy_bindings.push(typed(&doc)),
            "Job" => objects.jobs.push(typed(&doc)),
            "CronJob" => objects.cron_jobs.push(typed(&doc)),
            "CustomResourceDefinition" => objects.crds.push(typed(&doc)),
            "KubeSchedulerConfiguration" => {
                assert_eq!(
                    doc.value["apiVersion"].as_str(),
                    Some("kubescheduler.config.k8s.io/v1"),
                    "{}",
                    doc.file
                );
                objects.scheduler_configs.push(Doc {
                    file: doc.file.clone(),
                    value: doc.value.clone(),
                });
            }
            other => {
                let api_version = doc.value["apiVersion"].as_str().unwrap_or("");
                assert!(
                    EXTENSION_KINDS.contains(&(api_version, other)),
                    "{}: unexpected kind {api_version} {other:?}",
                    doc.file
                );
                assert!(
                    doc.value["metadata"]["name"].is_string(),
                    "{}: no name",
                    doc.file
                );
                objects.extensions.push(Doc {
                    file: doc.file.clone(),
                    value: doc.value.clone(),
                });
            }
        }
        objects.docs.push(doc);
    }
    objects
}

fn install() -> Objects {
    let files = yaml_files_in(&manifests_dir().join("install"));
    assert!(!files.is_empty(), "manifests/install holds no YAML");
    load(documents(&files))
}

/// `helm template <release> charts/vgpu-scheduler -n <namespace> --kube-version
/// <version>` with `overrides` on top of values.yaml, parsed.
fn render(release: &str, namespace: &str, kube_version: &str, overrides: &Value) -> Objects {
    let rendered = helm::template(
        &helm::chart_dir(),
        &helm::Release {
            name: release,
            namespace,
            kube_version,
        },
        overrides,
    );
    let mut docs = Vec::new();
    for (file, text) in rendered {
        docs.extend(parse_yaml_documents(
            &format!("charts/vgpu-scheduler/templates/{file}"),
            &text,
        ));
    }
    load(docs)
}

fn render_default() -> Objects {
    render("vgpu-scheduler", NAMESPACE, "v1.33.0", &json!({}))
}

/// Non-default values: every switch the chart has, away from its default.
fn non_default_values() -> Value {
    json!({
        "schedulerName": "gpu-sched",
        "resourceMem": "example.com/vgpu-memory",
        "scheduler": {
            "replicas": 3,
            "defaultSchedulerPolicy": {"nodeSchedulerPolicy": "spread",
                                       "gpuSchedulerPolicy": "binpack"},
            "filterMode": "all",
            "nodeLock": "pods",
            "leaderElect": true,
            "nodeLabelSelector": "gpu=on",
            "extenderClientAuth": false,
            "extraArgs": ["--reservation-ttl=90s"],
            "gang": {
                "strict": true,
                "timeout": "10m",
                "schedulerConfig": "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n  - name: capacity-card\n"
            },
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "podAnnotations": {"example.com/team": "ml"},
            "kubeScheduler": {"leaseName": "gpu-sched-ks"},
            "extender": {"imageTag": "9.9.9"},
            "admissionWebhook": {
                "failurePolicy": "Ignore",
                "whitelistNamespaces": ["batch-system"],
                "namespaceSelector": {"matchExpressions": [
                    {"key": "tier", "operator": "NotIn", "values": ["system"]}]},
                "objectSelector": {"matchExpressions": [
                    {"key": "example.com/skip", "operator": "DoesNotExist"}]}
            },
            "placementPolicy": {"enabled": false}
        },
        "devices": {"nvidia": {"defaultMemory": 1024, "memoryFactor": 2}},
        "certManager": {"enabled": true},
        "serviceMonitor": {"enabled": true, "labels": {"release": "prom"}},
        "dashboard": {"enabled": true, "labelValue": "true", "labels": {"release": "prom"},
                      "annotations": {"grafana_folder": "GPU"}}
    })
}

fn render_non_default() -> Objects {
    render("gpu", "gpu-ops", "v1.31.1+k3s1", &non_default_values())
}

/// Where an install is and what it was asked to be.
struct Setup {
    what: &'static str,
    namespace: &'static str,
    /// Name of the Deployment, Service, Secret prefix, ClusterRole, webhook configuration.
    name: &'static str,
    failure_policy: &'static str,
    cert_manager: bool,
}

const PLAIN: Setup = Setup {
    what: "manifests/install",
    namespace: NAMESPACE,
    name: "vgpu-scheduler",
    failure_policy: "Fail",
    cert_manager: false,
};
const CHART_DEFAULT: Setup = Setup {
    what: "chart (default values)",
    namespace: NAMESPACE,
    name: "vgpu-scheduler",
    failure_policy: "Fail",
    cert_manager: false,
};
const CHART_NON_DEFAULT: Setup = Setup {
    what: "chart (non-default values)",
    namespace: "gpu-ops",
    name: "gpu",
    failure_policy: "Ignore",
    cert_manager: true,
};

fn one<'a, T>(items: &'a [T], what: &str) -> &'a T {
    assert_eq!(items.len(), 1, "expected exactly one {what}");
    &items[0]
}

fn pod_spec(deployment: &Deployment) -> &PodSpec {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("Deployment has a pod spec")
}

fn container<'a>(spec: &'a PodSpec, name: &str) -> &'a Container {
    spec.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name:?} in the Deployment"))
}

/// `--flag=value` / `--flag value` arguments of a container, by flag name.
fn flags(args: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < args.len() {
        if let Some(flag) = args[i].strip_prefix("--") {
            match flag.split_once('=') {
                Some((name, value)) => {
                    out.insert(name.to_string(), value.to_string());
                }
                None => {
                    let value = args
                        .get(i + 1)
                        .filter(|v| !v.starts_with('-'))
                        .cloned()
                        .unwrap_or_else(|| "true".into());
                    if args.get(i + 1).is_some_and(|v| !v.starts_with('-')) {
                        i += 1;
                    }
                    out.insert(flag.to_string(), value);
                }
            }
        }
        i += 1;
    }
    out
}

fn extender_args(deployment: &Deployment) -> Vec<String> {
    let c = container(pod_spec(deployment), EXTENDER);
    let mut all = c.command.clone().unwrap_or_default();
    all.extend(c.args.clone().unwrap_or_default());
    all
}

fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {address:?}"))
}

fn serve_help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .args(["serve", "--help"])
        .output()
        .expect("run vgpu-scheduler serve --help");
    assert!(out.status.success(), "serve --help failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Whether `--name` appears in the help text as a whole flag name.
fn help_has_flag(help: &str, name: &str) -> bool {
    let needle = format!("--{name}");
    help.match_indices(&needle).any(|(at, _)| {
        let next = help[at + needle.len()..].chars().next();
        !matches!(next, Some(c) if c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// The default of `--name` as `serve --help` prints it (`[default: ...]`).
fn help_default(help: &str, name: &str) -> String {
    let needle = format!("--{name} ");
    let at = help
        .find(&needle)
        .unwrap_or_else(|| panic!("--{name} not in serve --help"));
    let rest = &help[at..];
    let next_flag = rest[needle.len()..]
        .find("\n  -")
        .map_or(rest.len(), |i| i + needle.len());
    let section = &rest[..next_flag];
    let start = section
        .find("[default: ")
        .unwrap_or_else(|| panic!("no default for --{name} in serve --help"))
        + "[default: ".len();
    let end = section[start..].find(']').unwrap() + start;
    section[start..end].to_string()
}

fn certs_help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .args(["certs", "--help"])
        .output()
        .expect("run vgpu-scheduler certs --help");
    assert!(out.status.success(), "certs --help failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn named<
    'a,
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    items: &'a [T],
    name: &str,
) -> Option<&'a T> {
    items
        .iter()
        .find(|x| x.metadata().name.as_deref() == Some(name))
}

/// What a KubeSchedulerConfiguration must agree with.
struct Expect<'a> {
    what: &'a str,
    extender_port: u16,
    scheduler_name: &'a str,
    /// Resource names the server manages (from its device config).
    managed: Vec<String>,
    /// `--filter-mode=all`: prioritizeVerb must be there (and only then).
    filter_all: bool,
}

fn managed_resources(devices: &DeviceConfig) -> Vec<String> {
    let n = &devices.nvidia;
    let mut out: Vec<String> = n.resource_names().iter().map(|s| s.to_string()).collect();
    out.push(n.resource_priority_name.clone());
    out
}

fn check_scheduler_config(config: &Value, expect: &Expect) {
    let what = expect.what;
    assert_eq!(
        config["kind"].as_str(),
        Some("KubeSchedulerConfiguration"),
        "{what}"
    );
    assert_eq!(
        config["apiVersion"].as_str(),
        Some("kubescheduler.config.k8s.io/v1"),
        "{what}"
    );

    let election = &config["leaderElection"];
    assert_eq!(election["leaderElect"], Value::Bool(true), "{what}");
    let lease = election["resourceName"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: leaderElection.resourceName is not set"));
    assert_ne!(
        lease, "kube-scheduler",
        "{what}: the default scheduler's Lease would keep this one from ever leading"
    );

    let profiles = config["profiles"].as_array().expect("profiles");
    assert_eq!(profiles.len(), 1, "{what}: one profile");
    assert_eq!(
        profiles[0]["schedulerName"].as_str(),
        Some(expect.scheduler_name),
        "{what}: profile schedulerName is the extender's --scheduler-name"
    );
    assert_eq!(
        profiles[0]["percentageOfNodesToScore"].as_u64(),
        Some(100),
        "{what}"
    );

    let extenders = config["extenders"].as_array().expect("extenders");
    assert_eq!(extenders.len(), 1, "{what}: one extender");
    let extender = extenders[0].as_object().unwrap();
    let verbs: BTreeMap<&str, &str> = extender
        .iter()
        .filter(|(k, _)| k.ends_with("Verb"))
        .map(|(k, v)| (k.as_str(), v.as_str().expect("verb is a string")))
        .collect();
    for (key, verb) in &verbs {
        assert!(
            EXTENDER_ROUTES.contains(verb),
            "{what}: {key}: {verb:?} is not a route the server serves ({EXTENDER_ROUTES:?})"
        );
    }
    assert_eq!(verbs.get("filterVerb"), Some(&"filter"), "{what}");
    assert_eq!(verbs.get("bindVerb"), Some(&"bind"), "{what}");
    assert_eq!(
        verbs.contains_key("prioritizeVerb"),
        expect.filter_all,
        "{what}: prioritizeVerb exactly when --filter-mode=all"
    );
    assert!(
        !verbs.contains_key("preemptVerb"),
        "{what}: no /preempt route"
    );

    let url = extender["urlPrefix"].as_str().expect("urlPrefix");
    assert!(
        url.starts_with("https://127.0.0.1:"),
        "{what}: loopback, and the server only speaks TLS"
    );
    assert_eq!(extender["enableHTTPS"], Value::Bool(true), "{what}");
    assert_eq!(
        port_of(url),
        expect.extender_port,
        "{what}: urlPrefix port is the extender's --http-bind port"
    );
    assert_eq!(extender["nodeCacheCapable"], Value::Bool(true), "{what}");
    assert!(extender["httpTimeout"].is_string(), "{what}: httpTimeout");

    let managed = extender["managedResources"]
        .as_array()
        .expect("managedResources");
    assert!(!managed.is_empty(), "{what}: managedResources");
    for resource in managed {
        let name = resource["name"].as_str().expect("managed resource name");
        assert!(
            expect.managed.iter().any(|m| m == name),
            "{what}: managed resource {name:?} is not one the server manages ({:?})",
            expect.managed
        );
        assert_eq!(
            resource["ignoredByScheduler"],
            Value::Bool(true),
            "{what}: {name}"
        );
    }
}

/// The file behind `path` in `container`: the ConfigMap or Secret key mounted there.
enum Mounted<'a> {
    ConfigMap(&'a ConfigMap, String),
    Secret(String, String),
}

fn mounted<'a>(o: &'a Objects, spec: &PodSpec, container: &Container, path: &str) -> Mounted<'a> {
    let (dir, file) = path.rsplit_once('/').unwrap();
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == dir)
        .unwrap_or_else(|| panic!("{}: {path}: nothing mounted at {dir}", container.name));
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap_or_else(|| panic!("no volume {}", mount.name));
    if let Some(cm) = &volume.config_map {
        let config_map =
            named(&o.config_maps, &cm.name).unwrap_or_else(|| panic!("no ConfigMap {}", cm.name));
        return Mounted::ConfigMap(config_map, file.to_string());
    }
    let secret = volume
        .secret
        .as_ref()
        .unwrap_or_else(|| panic!("volume {} is neither ConfigMap nor Secret", volume.name));
    let key = match &secret.items {
        Some(items) => items
            .iter()
            .find(|i| i.path == file)
            .unwrap_or_else(|| panic!("{path}: not among the items of {}", volume.name))
            .key
            .clone(),
        None => file.to_string(),
    };
    Mounted::Secret(secret.secret_name.clone().expect("secretName"), key)
}

fn config_map_text(o: &Objects, spec: &PodSpec, container: &Container, path: &str) -> String {
    match mounted(o, spec, container, path) {
        Mounted::ConfigMap(cm, key) => cm
            .data
            .as_ref()
            .and_then(|d| d.get(&key))
            .unwrap_or_else(|| panic!("ConfigMap has no key {key}"))
            .clone(),
        Mounted::Secret(..) => panic!("{path} is not from a ConfigMap"),
    }
}

fn check_scheduler_wiring(o: &Objects, s: &Setup, help: &str) {
    let what = s.what;
    let deployment = one(&o.deployments, "Deployment");
    let args = flags(&extender_args(deployment));
    let arg = |name: &str| {
        args.get(name)
            .cloned()
            .unwrap_or_else(|| help_default(help, name))
    };
    let bind = arg("http-bind");
    let scheduler_name = arg("scheduler-name");
    let spec = pod_spec(deployment);
    let extender = container(spec, EXTENDER);
    let devices = match args.get("device-config-file") {
        Some(path) => DeviceConfig::parse(&config_map_text(o, spec, extender, path))
            .unwrap_or_else(|e| panic!("{what}: device config: {e}")),
        None => DeviceConfig::default(),
    };

    // The ConfigMap the kube-scheduler container reads.
    let kube_scheduler = container(spec, KUBE_SCHEDULER);
    let mut command = kube_scheduler.command.clone().unwrap_or_default();
    command.extend(kube_scheduler.args.clone().unwrap_or_default());
    let config_path = flags(&command)
        .get("config")
        .cloned()
        .expect("kube-scheduler --config");
    let text = config_map_text(o, spec, kube_scheduler, &config_path);
    let docs = parse_yaml_documents("ConfigMap config.yaml", &text);
    let config = &one(&docs, "KubeSchedulerConfiguration").value;
    check_scheduler_config(
        config,
        &Expect {
            what,
            extender_port: port_of(&bind),
            scheduler_name: &scheduler_name,
            managed: managed_resources(&devices),
            filter_all: arg("filter-mode") == "all",
        },
    );
    assert_eq!(
        config["leaderElection"]["resourceNamespace"].as_str(),
        Some(s.namespace),
        "{what}"
    );

    // kube-scheduler's Lease is not the extender's Lease.
    let extender_lease = (
        args.get("leader-elect-resource-namespace")
            .cloned()
            .unwrap_or_else(|| s.namespace.into()),
        args.get("leader-elect-resource-name")
            .cloned()
            .unwrap_or_else(|| scheduler_name.clone()),
    );
    assert_eq!(args.get("leader-elect").map(String::as_str), Some("true"));
    let scheduler_lease = (
        config["leaderElection"]["resourceNamespace"]
            .as_str()
            .unwrap()
            .to_string(),
        config["leaderElection"]["resourceName"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    assert_ne!(
        extender_lease, scheduler_lease,
        "{what}: kube-scheduler and the extender would fight over one Lease"
    );
    // The gang planner follows kube-scheduler's own Lease, so it plans in the pod
    // whose kube-scheduler calls /filter.
    assert_eq!(
        args.get("planner-follows-lease"),
        Some(&format!("{}/{}", scheduler_lease.0, scheduler_lease.1)),
        "{what}"
    );

    // Client certificates: the extender asks for them exactly when kube-scheduler
    // has one, from a Secret signed by the CA the extender trusts.
    let tls = &config["extenders"][0]["tlsConfig"];
    match args.get("client-ca-file") {
        Some(ca_file) => {
            assert_ne!(tls["insecure"], Value::Bool(true), "{what}");
            let Mounted::Secret(secret, key) = mounted(o, spec, extender, ca_file) else {
                panic!("{what}: --client-ca-file from a ConfigMap");
            };
            assert_eq!(key, "ca.crt", "{what}");
            for field in ["certFile", "keyFile", "caFile"] {
                let path = tls[field]
                    .as_str()
                    .unwrap_or_else(|| panic!("{what}: tlsConfig.{field}"));
                let Mounted::Secret(from, key) = mounted(o, spec, kube_scheduler, path) else {
                    panic!("{what}: {field} from a ConfigMap");
                };
                if s.cert_manager {
                    assert_eq!(from, format!("{}-client-tls", s.name), "{what}: {field}");
                } else {
                    assert_eq!(from, secret, "{what}: {field}");
                    let want = match field {
                        "certFile" => "client.crt",
                        "keyFile" => "client.key",
                        _ => "ca.crt",
                    };
                    assert_eq!(key, want, "{what}: {field}");
                }
            }
            assert_eq!(
                tls["serverName"].as_str(),
                Some(format!("{}.{}.svc", s.name, s.namespace).as_str()),
                "{what}: the serving certificate names the Service"
            );
        }
        None => assert_eq!(tls["insecure"], Value::Bool(true), "{what}"),
    }
}

/// The pods that run `vgpu-scheduler certs`: (Job or CronJob name, pod spec).
fn certs_runners(o: &Objects) -> Vec<(String, &PodSpec)> {
    let mut out = Vec::new();
    for job in &o.jobs {
        let spec = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        out.push((job.metadata.name.clone().unwrap(), spec));
    }
    for cron in &o.cron_jobs {
        let spec = cron
            .spec
            .as_ref()
            .unwrap()
            .job_template
            .spec
            .as_ref()
            .unwrap();
        out.push((
            cron.metadata.name.clone().unwrap(),
            spec.template.spec.as_ref().unwrap(),
        ));
    }
    out
}

fn check_flags(o: &Objects, s: &Setup) {
    let serve = serve_help();
    let certs = certs_help();
    let deployment = one(&o.deployments, "Deployment");
    let args = extender_args(deployment);
    assert_eq!(args.first().map(String::as_str), Some("serve"));
    let mut count = 0;
    for arg in &args {
        if let Some(flag) = arg.strip_prefix("--") {
            let name = flag.split_once('=').map_or(flag, |(n, _)| n);
            assert!(
                help_has_flag(&serve, name),
                "{}: --{name} is not a flag of vgpu-scheduler serve",
                s.what
            );
            count += 1;
        }
    }
    assert!(count >= 5, "the extender's flags: {args:?}");
    assert!(!help_has_flag(&serve, "no-such-flag"));
    assert!(!help_has_flag(&serve, "leader-elect-resource"));
    for (_, spec) in certs_runners(o) {
        let c = &spec.containers[0];
        let args = c.args.clone().unwrap_or_default();
        assert_eq!(
            args.first().map(String::as_str),
            Some("certs"),
            "{}",
            s.what
        );
        for arg in &args[1..] {
            let flag = arg.strip_prefix("--").expect("only flags");
            let name = flag.split_once('=').map_or(flag, |(n, _)| n);
            assert!(
                help_has_flag(&certs, name),
                "{}: --{name} is not a flag of vgpu-scheduler certs",
                s.what
            );
        }
        let f = flags(&args);
        assert_eq!(f.get("namespace").map(String::as_str), Some(s.namespace));
        assert_eq!(
            f.get("secret-name").cloned(),
            Some(format!("{}-tls", s.name)),
            "{}: the Secret the Deployment mounts",
            s.what
        );
        assert_eq!(f.get("service-name").map(String::as_str), Some(s.name));
        assert_eq!(f.get("webhook-name").map(String::as_str), Some(s.name));
        assert_eq!(
            f.contains_key("client-cert"),
            flags(&extender_args(deployment)).contains_key("client-ca-file"),
            "{}: a client certificate exactly when the extender asks for one",
            s.what
        );
        assert_eq!(
            c.image,
            container(pod_spec(deployment), EXTENDER).image,
            "{}: the certs Job runs the extender's image",
            s.what
        );
    }
}

fn check_hardened(spec: &PodSpec, what: &str) {
    let pod_security = spec.security_context.as_ref();
    for c in &spec.containers {
        let sc = c.security_context.as_ref();
        let non_root = sc
            .and_then(|s| s.run_as_non_root)
            .or(pod_security.and_then(|s| s.run_as_non_root));
        assert_eq!(non_root, Some(true), "{what} {}: runAsNonRoot", c.name);
        let user = sc
            .and_then(|s| s.run_as_user)
            .or(pod_security.and_then(|s| s.run_as_user));
        assert!(user.is_some_and(|u| u != 0), "{what} {}: runAsUser", c.name);
        assert_eq!(
            sc.and_then(|s| s.read_only_root_filesystem),
            Some(true),
            "{what} {}: readOnlyRootFilesystem",
            c.name
        );
        assert_eq!(
            sc.and_then(|s| s.allow_privilege_escalation),
            Some(false),
            "{what} {}: allowPrivilegeEscalation",
            c.name
        );
        let dropped = sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.drop.clone())
            .unwrap_or_default();
        assert!(
            dropped.iter().any(|d| d == "ALL"),
            "{what} {}: drop ALL",
            c.name
        );
        let resources = c.resources.as_ref().expect("resources");
        assert!(resources.requests.is_some(), "{what} {}: requests", c.name);
        assert!(resources.limits.is_some(), "{what} {}: limits", c.name);
    }
}

fn check_deployment(o: &Objects, s: &Setup) {
    let what = s.what;
    let deployment = one(&o.deployments, "Deployment");
    assert_eq!(deployment.metadata.name.as_deref(), Some(s.name));
    assert!(
        deployment.spec.as_ref().unwrap().replicas.unwrap_or(1) >= 2,
        "{what}: two replicas or more"
    );
    let spec = pod_spec(deployment);
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    let labels = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert_eq!(
        labels.get("vgpu.io/webhook").map(String::as_str),
        Some("ignore")
    );
    let anti = spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .expect("pod anti-affinity");
    assert!(!anti.is_empty());
    assert_eq!(spec.containers.len(), 2);
    check_hardened(spec, what);

    let extender = container(spec, EXTENDER);
    let args = flags(&extender_args(deployment));
    let port = i32::from(port_of(&args["http-bind"]));
    for (probe, path) in [
        (extender.readiness_probe.as_ref(), "/readyz"),
        (extender.liveness_probe.as_ref(), "/healthz"),
    ] {
        let get = probe
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("{path} probe"));
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(get.port, IntOrString::Int(port));
        assert_eq!(get.scheme.as_deref(), Some("HTTPS"));
    }
    let env: BTreeMap<&str, &str> = extender
        .env
        .iter()
        .flatten()
        .map(|e| {
            let field = e
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map_or("", |f| f.field_path.as_str());
            (e.name.as_str(), field)
        })
        .collect();
    assert_eq!(env.get("POD_NAME"), Some(&"metadata.name"));
    assert_eq!(env.get("POD_NAMESPACE"), Some(&"metadata.namespace"));

    // TLS files come from the Secret the certs Job (or cert-manager) writes, and
    // the CA key is not among them.
    for (flag, key) in [("cert-file", "tls.crt"), ("key-file", "tls.key")] {
        let Mounted::Secret(secret, k) = mounted(o, spec, extender, &args[flag]) else {
            panic!("{what}: --{flag} from a ConfigMap");
        };
        assert_eq!(secret, format!("{}-tls", s.name), "{what}: --{flag}");
        assert_eq!(k, key);
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(secret) = &v.secret {
            let items = secret
                .items
                .as_ref()
                .unwrap_or_else(|| panic!("{what}: volume {} mounts every key", v.name));
            assert!(
                items.iter().all(|i| i.key != "ca.key"),
                "{what}: the CA key is never mounted"
            );
        }
    }
    for c in &spec.containers {
        let tmp = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/tmp")
            .unwrap_or_else(|| panic!("{}: /tmp", c.name));
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == tmp.name)
            .unwrap();
        assert!(volume.empty_dir.is_some());
    }
    for (runner, jspec) in certs_runners(o) {
        check_hardened(jspec, &format!("{what} {runner}"));
        let account = jspec.service_account_name.clone().unwrap();
        assert!(
            account.starts_with(&format!("{}-certs", s.name)),
            "{what} {runner}: runs as {account}"
        );
        assert_eq!(
            jspec.containers[0].args.as_ref().unwrap()[0],
            "certs",
            "{what} {runner}"
        );
    }
    for job in &o.jobs {
        let labels = job
            .spec
            .as_ref()
            .unwrap()
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .clone()
            .unwrap_or_default();
        assert_eq!(
            labels.get("vgpu.io/webhook").map(String::as_str),
            Some("ignore")
        );
    }

    // Service and PodDisruptionBudget select these pods.
    let service = one(&o.services, "Service");
    assert_eq!(service.metadata.name.as_deref(), Some(s.name));
    let service_spec = service.spec.as_ref().unwrap();
    let selector = service_spec.selector.clone().unwrap_or_default();
    assert!(!selector.is_empty());
    for (k, v) in &selector {
        assert_eq!(labels.get(k), Some(v), "Service selector {k}");
    }
    let ports = service_spec.ports.as_ref().unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, 443);
    assert_eq!(ports[0].target_port, Some(IntOrString::Int(port)));
    let pdb = one(&o.pod_disruption_budgets, "PodDisruptionBudget");
    let pdb_spec = pdb.spec.as_ref().unwrap();
    assert_eq!(pdb_spec.min_available, Some(IntOrString::Int(1)));
    let match_labels = pdb_spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    assert!(!match_labels.is_empty());
    for (k, v) in &match_labels {
        assert_eq!(labels.get(k), Some(v), "PodDisruptionBudget selector {k}");
    }
}

fn check_webhook(o: &Objects, s: &Setup) {
    let what = s.what;
    let configuration = one(&o.webhooks, "MutatingWebhookConfiguration");
    assert_eq!(configuration.metadata.name.as_deref(), Some(s.name));
    let service = one(&o.services, "Service");
    let webhooks = configuration.webhooks.as_ref().expect("webhooks");
    assert_eq!(webhooks.len(), 1);
    let webhook = &webhooks[0];
    assert!(
        webhook.name.split('.').count() >= 3,
        "fully-qualified webhook name"
    );
    assert_eq!(webhook.admission_review_versions, vec!["v1".to_string()]);
    assert_eq!(webhook.side_effects, "None");
    assert_eq!(
        webhook.failure_policy.as_deref(),
        Some(s.failure_policy),
        "{what}"
    );
    assert_eq!(webhook.timeout_seconds, Some(10));
    assert_eq!(webhook.reinvocation_policy.as_deref(), Some("Never"));
    // Never in the manifest: `kubectl apply` or `helm upgrade` would reset the CA
    // that the certs Job or cert-manager put there.
    assert!(
        webhook.client_config.ca_bundle.is_none(),
        "{what}: caBundle belongs to the certs Job / cert-manager"
    );
    let inject = configuration
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("cert-manager.io/inject-ca-from"));
    if s.cert_manager {
        let inject = inject.expect("cert-manager.io/inject-ca-from");
        let (ns, certificate) = inject.split_once('/').unwrap();
        assert_eq!(ns, s.namespace);
        let cert = o
            .extensions
            .iter()
            .find(|d| {
                d.value["kind"] == "Certificate" && d.value["metadata"]["name"] == certificate
            })
            .unwrap_or_else(|| panic!("{what}: no Certificate {certificate}"));
        assert_eq!(
            cert.value["spec"]["secretName"],
            json!(format!("{}-tls", s.name))
        );
        let names = cert.value["spec"]["dnsNames"].as_array().unwrap();
        assert!(names.contains(&json!(format!("{}.{}.svc", s.name, s.namespace))));
        assert!(
            certs_runners(o).is_empty(),
            "{what}: no certs Job with cert-manager"
        );
    } else {
        assert!(inject.is_none());
        assert!(!o.cron_jobs.is_empty(), "{what}: the renewing CronJob");
    }

    // Where the ValidatingAdmissionPolicy guards the placement annotations the
    // webhook is sent creates only (HAMi's device plugin's writes never wait for
    // it); elsewhere it guards them itself, on updates too.
    let policy_guards = !o.policies.is_empty();
    let operations: &[&str] = if policy_guards {
        &["CREATE"]
    } else {
        &["CREATE", "UPDATE"]
    };
    let rules = webhook.rules.as_ref().expect("rules");
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].operations.as_deref(),
        Some(&operations.iter().map(|o| o.to_string()).collect::<Vec<_>>()[..]),
        "{what}"
    );
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["pods".to_string()][..])
    );
    assert_eq!(rules[0].api_groups.as_deref(), Some(&[String::new()][..]));
    assert_eq!(
        rules[0].api_versions.as_deref(),
        Some(&["v1".to_string()][..])
    );

    let target = webhook
        .client_config
        .service
        .as_ref()
        .expect("clientConfig.service");
    assert!(webhook.client_config.url.is_none());
    assert_eq!(target.namespace, s.namespace);
    assert_eq!(Some(&target.name), service.metadata.name.as_ref());
    assert!(
        matches!(target.path.as_deref(), Some("/mutate" | "/webhook")),
        "webhook path {:?}",
        target.path
    );
    let service_port = service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port;
    assert_eq!(target.port, Some(service_port));

    // Never sent: kube-system, our own namespace, opted-out namespaces and pods.
    let excluded =
        |selector: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
         key: &str|
         -> BTreeSet<String> {
            selector
                .as_ref()
                .and_then(|s| s.match_expressions.as_ref())
                .into_iter()
                .flatten()
                .filter(|e| e.key == key && e.operator == "NotIn")
                .flat_map(|e| e.values.clone().unwrap_or_default())
                .collect()
        };
    let names = excluded(&webhook.namespace_selector, "kubernetes.io/metadata.name");
    assert!(names.contains("kube-system"), "{names:?}");
    assert!(names.contains(s.namespace), "{names:?}");
    assert!(excluded(&webhook.namespace_selector, "vgpu.io/webhook").contains("ignore"));
    // The pod opt-out only skips routing (in matchConditions): as an object
    // selector it would let a pod's writer switch off the placement guard.
    assert!(excluded(&webhook.object_selector, "vgpu.io/webhook").is_empty());

    // Only pods asking for our resources (in containers or init containers) or
    // carrying a gang/queue annotation.
    let deployment = one(&o.deployments, "Deployment");
    let spec = pod_spec(deployment);
    let args = flags(&extender_args(deployment));
    let devices = match args.get("device-config-file") {
        Some(path) => {
            DeviceConfig::parse(&config_map_text(o, spec, container(spec, EXTENDER), path)).unwrap()
        }
        None => DeviceConfig::default(),
    };
    let conditions = webhook.match_conditions.as_ref().expect("matchConditions");
    assert_eq!(conditions.len(), 1);
    let expression = &conditions[0].expression;
    for resource in devices.nvidia.resource_names() {
        assert!(
            expression.contains(&format!("'{resource}'")),
            "{what}: {resource}"
        );
    }
    for annotation in GANG_ANNOTATIONS {
        assert!(
            expression.contains(&format!("'{annotation}'")),
            "{what}: {annotation}"
        );
    }
    // Without the policy: creates setting, and updates changing, an annotation
    // the scheduler writes. With it: none of them.
    for annotation in vgpu_scheduler::webhook::PLACEMENT_ANNOTATIONS {
        assert_eq!(
            expression.contains(&format!("'{annotation}'")),
            !policy_guards,
            "{what}: {annotation}"
        );
    }
    for needle in [
        "request.operation == 'UPDATE' && [",
        "oldObject.metadata.annotations[a]",
    ] {
        assert_eq!(
            expression.contains(needle),
            !policy_guards,
            "{what}: {needle:?}"
        );
    }
    for needle in [
        "object.metadata.labels['vgpu.io/webhook'] == 'ignore'",
        "request.operation == 'CREATE' && (",
        "object.spec.containers.exists(",
        "has(object.spec.initContainers) && object.spec.initContainers.exists(",
        "c.resources.limits",
        "c.resources.requests",
        "has(object.metadata.annotations) && [",
        "a in object.metadata.annotations",
    ] {
        assert!(expression.contains(needle), "CEL lacks {needle:?}");
    }
    let mut depth = Vec::new();
    for ch in expression.chars() {
        match ch {
            '(' | '[' => depth.push(ch),
            ')' => assert_eq!(depth.pop(), Some('('), "unbalanced CEL"),
            ']' => assert_eq!(depth.pop(), Some('['), "unbalanced CEL"),
            _ => {}
        }
    }
    assert!(depth.is_empty(), "unbalanced CEL");
}

/// (group, resource, verb, resourceName or "").
type Grant = (String, String, String, String);

fn grants(rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in rules {
        assert!(
            rule.non_resource_urls.is_none(),
            "nonResourceURLs: {rule:?}"
        );
        let names = rule
            .resource_names
            .clone()
            .unwrap_or_else(|| vec![String::new()]);
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for name in &names {
                        out.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                    }
                }
            }
        }
    }
    out
}

fn expected(list: &[(&str, &str, &[&str], &str)]) -> BTreeSet<Grant> {
    list.iter()
        .flat_map(|(group, resource, verbs, name)| {
            verbs.iter().map(move |v| {
                (
                    group.to_string(),
                    resource.to_string(),
                    v.to_string(),
                    name.to_string(),
                )
            })
        })
        .collect()
}

/// What the server (`vgpu-scheduler serve`) may do: exactly what its code uses.
fn server_grants() -> BTreeSet<Grant> {
    expected(&[
        // Watch pods, patch their annotations, resync by list (live mode).
        ("", "pods", &["get", "list", "watch", "patch"], ""),
        // Bind with the pod UID as precondition.
        ("", "pods/binding", &["create"], ""),
        // Gang planner: evict members of a gang that cannot complete, and the
        // victims of preemption and reclaim.
        ("", "pods/eviction", &["create"], ""),
        // Preemption and reclaim: priorities and disruption budgets
        // (src/cluster/kube/policy_watch.rs).
        (
            "scheduling.k8s.io",
            "priorityclasses",
            &["list", "watch"],
            "",
        ),
        ("policy", "poddisruptionbudgets", &["list", "watch"], ""),
        // Node lock and device-plugin handshake.
        ("", "nodes", &["get", "list", "watch", "patch"], ""),
        // Namespace quotas.
        ("", "resourcequotas", &["list", "watch"], ""),
        // Pod affinity's namespace selectors.
        ("", "namespaces", &["list", "watch"], ""),
        // Scheduling events.
        ("", "events", &["create"], ""),
        // Gang planner: Volcano PodGroups and Queues. PodGroup status is patched
        // through the object (Volcano's CRD has no status subresource), Queue
        // status through queues/status (src/cluster/kube/client.rs).
        (
            "scheduling.volcano.sh",
            "podgroups",
            &["get", "list", "watch", "patch"],
            "",
        ),
        (
            "scheduling.volcano.sh",
            "queues",
            &["get", "list", "watch"],
            "",
        ),
        ("scheduling.volcano.sh", "queues/status", &["patch"], ""),
        // Network topology (src/cluster/kube/volcano_watch.rs).
        ("topology.volcano.sh", "hypernodes", &["list", "watch"], ""),
        // Kubernetes' own gangs (src/cluster/kube/native_group_watch.rs).
        ("scheduling.k8s.io", "podgroups", &["list", "watch"], ""),
        ("scheduling.k8s.io", "workloads", &["list", "watch"], ""),
        // The usage plugin lists nodes' measured usage from metrics-server
        // (src/cluster/kube/node_metrics_poll.rs).
        ("metrics.k8s.io", "nodes", &["list"], ""),
    ])
}

fn check_rbac(o: &Objects, s: &Setup) {
    let what = s.what;
    let server = named(&o.cluster_roles, s.name).expect("the server's ClusterRole");
    assert!(server.aggregation_rule.is_none());
    assert_eq!(
        grants(server.rules.as_deref().unwrap_or_default()),
        server_grants(),
        "{what}: the server's ClusterRole"
    );
    let leader = named(&o.roles, &format!("{}-leader-election", s.name)).expect("leader Role");
    assert_eq!(
        grants(leader.rules.as_deref().unwrap_or_default()),
        expected(&[(
            "coordination.k8s.io",
            "leases",
            &["get", "create", "update"],
            ""
        )])
    );

    let deployment = one(&o.deployments, "Deployment");
    let account = pod_spec(deployment)
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    assert_eq!(account, s.name);
    let certs_prefix = format!("{}-certs", s.name);
    let accounts: BTreeSet<String> = o
        .service_accounts
        .iter()
        .map(|a| a.metadata.name.clone().unwrap())
        .collect();
    let subject_of = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| -> String {
        let subjects = subjects.as_deref().unwrap_or_default();
        assert_eq!(subjects.len(), 1, "{what}: one subject");
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].namespace.as_deref(), Some(s.namespace));
        assert!(
            accounts.contains(&subjects[0].name),
            "{what}: {}",
            subjects[0].name
        );
        subjects[0].name.clone()
    };
    let cluster_bound: BTreeSet<(String, String)> = o
        .cluster_role_bindings
        .iter()
        .inspect(|b| assert_eq!(b.role_ref.kind, "ClusterRole"))
        .map(|b| (subject_of(&b.subjects), b.role_ref.name.clone()))
        .collect();
    let bound: BTreeSet<(String, String, String, String)> = o
        .role_bindings
        .iter()
        .map(|b| {
            (
                subject_of(&b.subjects),
                b.metadata.namespace.clone().unwrap_or_default(),
                b.role_ref.kind.clone(),
                b.role_ref.name.clone(),
            )
        })
        .collect();
    let mut want_cluster = BTreeSet::from([
        (account.clone(), s.name.to_string()),
        (account.clone(), "system:kube-scheduler".to_string()),
        (account.clone(), "system:volume-scheduler".to_string()),
    ]);
    let mut want_bound = BTreeSet::from([
        (
            account.clone(),
            s.namespace.to_string(),
            "Role".to_string(),
            format!("{}-leader-election", s.name),
        ),
        (
            account.clone(),
            "kube-system".to_string(),
            "Role".to_string(),
            "extension-apiserver-authentication-reader".to_string(),
        ),
    ]);
    // The certs runners: each ServiceAccount only its Secret and its webhook
    // configuration.
    let certs_accounts: Vec<String> = accounts
        .iter()
        .filter(|a| a.starts_with(&certs_prefix))
        .cloned()
        .collect();
    if s.cert_manager {
        assert!(certs_accounts.is_empty(), "{what}: {certs_accounts:?}");
    } else {
        assert!(
            !certs_accounts.is_empty(),
            "{what}: the certs ServiceAccount"
        );
    }
    for (runner, spec) in certs_runners(o) {
        let account = spec.service_account_name.clone().unwrap();
        assert!(
            certs_accounts.contains(&account),
            "{what}: {runner} runs as {account}"
        );
    }
    for certs_account in &certs_accounts {
        want_cluster.insert((certs_account.clone(), certs_account.clone()));
        want_bound.insert((
            certs_account.clone(),
            s.namespace.to_string(),
            "Role".to_string(),
            certs_account.clone(),
        ));
        let role = named(&o.roles, certs_account).expect("certs Role");
        let secret = format!("{}-tls", s.name);
        assert_eq!(
            grants(role.rules.as_deref().unwrap_or_default()),
            expected(&[
                ("", "secrets", &["create"], ""),
                ("", "secrets", &["get", "update"], &secret),
            ]),
            "{what}: certs Role {certs_account}"
        );
        let cluster_role = named(&o.cluster_roles, certs_account).expect("certs ClusterRole");
        assert_eq!(
            grants(cluster_role.rules.as_deref().unwrap_or_default()),
            expected(&[(
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
                &["get", "patch"],
                s.name
            )]),
            "{what}: certs ClusterRole {certs_account}"
        );
    }
    assert_eq!(cluster_bound, want_cluster, "{what}: ClusterRoleBindings");
    assert_eq!(bound, want_bound, "{what}: RoleBindings");
    assert_eq!(
        o.roles.len() + o.cluster_roles.len(),
        2 + 2 * certs_accounts.len(),
        "{what}: no Role or ClusterRole beyond these"
    );
}

fn check_namespaced(o: &Objects, s: &Setup) {
    let namespaces = o
        .service_accounts
        .iter()
        .map(|x| &x.metadata)
        .chain(o.roles.iter().map(|x| &x.metadata))
        .chain(o.config_maps.iter().map(|x| &x.metadata))
        .chain(o.deployments.iter().map(|x| &x.metadata))
        .chain(o.services.iter().map(|x| &x.metadata))
        .chain(o.pod_disruption_budgets.iter().map(|x| &x.metadata))
        .chain(o.jobs.iter().map(|x| &x.metadata));
    for meta in namespaces {
        assert_eq!(
            meta.namespace.as_deref(),
            Some(s.namespace),
            "{}: {:?}",
            s.what,
            meta.name
        );
    }
    for doc in &o.extensions {
        assert_eq!(
            doc.value["metadata"]["namespace"],
            json!(s.namespace),
            "{}",
            doc.file
        );
    }
    for binding in &o.role_bindings {
        let ns = binding.metadata.namespace.as_deref();
        // kube-scheduler's reader of extension-apiserver-authentication is the one
        // binding outside our namespace.
        if binding.role_ref.name == "extension-apiserver-authentication-reader" {
            assert_eq!(ns, Some("kube-system"));
        } else {
            assert_eq!(ns, Some(s.namespace), "{:?}", binding.metadata.name);
        }
    }
}

fn check_all(o: &Objects, s: &Setup) {
    let help = serve_help();
    check_namespaced(o, s);
    check_scheduler_wiring(o, s, &help);
    check_flags(o, s);
    check_deployment(o, s);
    check_webhook(o, s);
    check_rbac(o, s);
}

/// `Kind namespace/name` and the object with what Helm adds (labels other than
/// the name, helm.sh annotations) taken off and ConfigMap data parsed.
fn normalized(doc: &Doc) -> (String, Value) {
    let mut v = doc.value.clone();
    let kind = v["kind"].as_str().unwrap_or("").to_string();
    let meta = v["metadata"].as_object_mut().expect("metadata");
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        labels.retain(|k, _| k == "app.kubernetes.io/name");
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.retain(|k, _| !k.starts_with("helm.sh/"));
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
    let name = meta["name"].as_str().unwrap_or("").to_string();
    let ns = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if kind == "ConfigMap"
        && let Some(data) = v["data"].as_object_mut()
    {
        for text in data.values_mut() {
            let yaml: serde_yaml_ng::Value =
                serde_yaml_ng::from_str(text.as_str().unwrap()).expect("YAML data");
            *text = serde_json::to_value(yaml).unwrap();
        }
    }
    (format!("{kind} {ns}/{name}"), v)
}

fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let here = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &here),
                    (p, q) => Some(format!("{here}: {p:?} vs {q:?}")),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} vs {b}")),
    }
}

#[test]
fn chart_lints_with_default_and_non_default_values() {
    if !helm::available("chart_lints_with_default_and_non_default_values") {
        return;
    }
    helm::lint(&helm::chart_dir(), &json!({}));
    helm::lint(&helm::chart_dir(), &non_default_values());
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let mut files = yaml_files_in(&manifests_dir());
    files.extend(yaml_files_in(&manifests_dir().join("install")));
    let objects = load(documents(&files));
    assert_eq!(objects.namespaces.len(), 1);
    assert_eq!(objects.deployments.len(), 1);
    assert_eq!(objects.webhooks.len(), 1);
    assert_eq!(objects.cron_jobs.len(), 1);
    // manifests/kube-scheduler-config.yaml.
    assert_eq!(objects.scheduler_configs.len(), 1);
    // The chart with both sets of values.
    if !helm::available("every_manifest_parses_into_its_kubernetes_type (chart)") {
        return;
    }
    for o in [render_default(), render_non_default()] {
        assert_eq!(o.deployments.len(), 1);
        assert_eq!(o.webhooks.len(), 1);
    }
}

#[test]
fn unknown_kinds_and_fields_are_refused() {
    let unknown = parse_yaml_documents("t", "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n");
    assert!(std::panic::catch_unwind(|| load(unknown)).is_err());
    let misspelled = parse_yaml_documents(
        "t",
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n",
    );
    assert!(std::panic::catch_unwind(|| load(misspelled)).is_err());
    let wrong_version = parse_yaml_documents(
        "t",
        "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: x}\n",
    );
    assert!(std::panic::catch_unwind(|| load(wrong_version)).is_err());
    let other_extension = parse_yaml_documents(
        "t",
        "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: x}\n",
    );
    assert!(std::panic::catch_unwind(|| load(other_extension)).is_err());
}

#[test]
fn plain_install_fits_the_binary() {
    let o = install();
    let ns = one(&o.namespaces, "Namespace");
    assert_eq!(ns.metadata.name.as_deref(), Some(NAMESPACE));
    assert_eq!(
        ns.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("vgpu.io/webhook"))
            .map(String::as_str),
        Some("ignore")
    );
    check_all(&o, &PLAIN);
    // manifests/kube-scheduler-config.yaml, against the server's defaults.
    let help = serve_help();
    let top = load(documents(&yaml_files_in(&manifests_dir())));
    for doc in &top.scheduler_configs {
        check_scheduler_config(
            &doc.value,
            &Expect {
                what: &doc.file,
                extender_port: port_of(&help_default(&help, "http-bind")),
                scheduler_name: &help_default(&help, "scheduler-name"),
                managed: managed_resources(&DeviceConfig::default()),
                filter_all: false,
            },
        );
        // kube-scheduler's own ClusterRole renews only the Lease named
        // kube-scheduler; any other Lease needs the install's Role.
        let role_namespaces: Vec<&str> = o
            .roles
            .iter()
            .filter_map(|r| r.metadata.namespace.as_deref())
            .collect();
        let lease_namespace = doc.value["leaderElection"]["resourceNamespace"].as_str();
        assert!(
            lease_namespace.is_some_and(|ns| role_namespaces.contains(&ns)),
            "{}: Lease in {lease_namespace:?}, Roles in {role_namespaces:?}",
            doc.file
        );
    }
}

#[test]
fn chart_with_default_values_fits_the_binary() {
    if !helm::available("chart_with_default_values_fits_the_binary") {
        return;
    }
    let o = render_default();
    assert!(
        o.namespaces.is_empty(),
        "helm install --create-namespace makes it"
    );
    check_all(&o, &CHART_DEFAULT);
    let deployment = one(&o.deployments, "Deployment");
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(2));
    let spec = pod_spec(deployment);
    assert_eq!(
        container(spec, KUBE_SCHEDULER).image.as_deref(),
        Some("registry.k8s.io/kube-scheduler:v1.33.0"),
        "the cluster's version"
    );
    let args = flags(&extender_args(deployment));
    assert_eq!(args["node-scheduler-policy"], "binpack");
    assert_eq!(args["gpu-scheduler-policy"], "spread");
    assert_eq!(args["filter-mode"], "single");
    assert_eq!(args["node-lock"], "node");
    // Hooks: RBAC first (-10), then the Jobs, before and after install/upgrade.
    let hooks: BTreeMap<String, (String, String)> = o
        .docs
        .iter()
        .filter_map(|d| {
            let a = d.value["metadata"]["annotations"].as_object()?;
            Some((
                format!(
                    "{} {}",
                    d.value["kind"].as_str()?,
                    d.value["metadata"]["name"].as_str()?
                ),
                (
                    a.get("helm.sh/hook")?.as_str()?.to_string(),
                    a.get("helm.sh/hook-weight")?.as_str()?.to_string(),
                ),
            ))
        })
        .collect();
    let all = "pre-install,pre-upgrade,post-install,post-upgrade".to_string();
    for kind in [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ] {
        assert_eq!(
            hooks.get(&format!("{kind} vgpu-scheduler-certs-hook")),
            Some(&(all.clone(), "-10".to_string())),
            "{kind}"
        );
    }
    assert_eq!(
        hooks.get("Job vgpu-scheduler-certs-pre"),
        Some(&("pre-install,pre-upgrade".to_string(), "0".to_string()))
    );
    assert_eq!(
        hooks.get("Job vgpu-scheduler-certs-post"),
        Some(&("post-install,post-upgrade".to_string(), "0".to_string()))
    );
    assert_eq!(hooks.len(), 7);
    let pre = named(&o.jobs, "vgpu-scheduler-certs-pre").unwrap();
    let pre_args = pre
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap();
    assert!(
        pre_args.contains(&"--allow-missing-webhook".to_string()),
        "before the first install the webhook configuration does not exist yet"
    );
    assert!(
        o.extensions.is_empty(),
        "no cert-manager, no ServiceMonitor"
    );
}

#[test]
fn chart_with_non_default_values_fits_the_binary() {
    if !helm::available("chart_with_non_default_values_fits_the_binary") {
        return;
    }
    let o = render_non_default();
    check_all(&o, &CHART_NON_DEFAULT);
    let deployment = one(&o.deployments, "Deployment");
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(3));
    let spec = pod_spec(deployment);
    assert_eq!(
        container(spec, KUBE_SCHEDULER).image.as_deref(),
        Some("registry.k8s.io/kube-scheduler:v1.31.1"),
        "the cluster's version without the +k3s1 suffix"
    );
    assert_eq!(
        container(spec, EXTENDER).image.as_deref(),
        Some("vgpu-scheduler:9.9.9")
    );
    let args = flags(&extender_args(deployment));
    assert_eq!(args["node-scheduler-policy"], "spread");
    assert_eq!(args["gpu-scheduler-policy"], "binpack");
    assert_eq!(args["filter-mode"], "all");
    assert_eq!(args["node-lock"], "pods");
    assert_eq!(args["scheduler-name"], "gpu-sched");
    assert_eq!(args["node-label-selector"], "gpu=on");
    assert_eq!(args["reservation-ttl"], "90s");
    assert!(!args.contains_key("client-ca-file"));
    assert_eq!(args["gang-strict"], "true");
    assert_eq!(args["gang-timeout"], "10m");
    // The Volcano-format configuration reaches the extender and is one it accepts.
    let conf = config_map_text(
        &o,
        spec,
        container(spec, EXTENDER),
        &args["scheduler-config"],
    );
    let parsed = vgpu_scheduler::volcano::SchedulerConf::parse(&conf)
        .unwrap_or_else(|e| panic!("rendered scheduler config: {e}\n{conf}"));
    assert!(parsed.enabled("capacity-card") && parsed.capacity_hierarchy());
    assert_eq!(spec.tolerations.as_ref().map(Vec::len), Some(1));
    let text = config_map_text(
        &o,
        spec,
        container(spec, EXTENDER),
        &args["device-config-file"],
    );
    let devices = DeviceConfig::parse(&text).unwrap();
    assert_eq!(
        devices.nvidia.resource_memory_name,
        "example.com/vgpu-memory"
    );
    assert_eq!(devices.nvidia.default_memory, 1024);
    assert_eq!(devices.nvidia.memory_factor, 2);
    let webhook = &one(&o.webhooks, "webhook").webhooks.as_ref().unwrap()[0];
    let ns_values: Vec<String> = webhook
        .namespace_selector
        .as_ref()
        .unwrap()
        .match_expressions
        .as_ref()
        .unwrap()[0]
        .values
        .clone()
        .unwrap();
    assert_eq!(ns_values, ["kube-system", "gpu-ops", "batch-system"]);
    assert_eq!(
        webhook
            .namespace_selector
            .as_ref()
            .unwrap()
            .match_expressions
            .as_ref()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        webhook
            .object_selector
            .as_ref()
            .unwrap()
            .match_expressions
            .as_ref()
            .unwrap()
            .len(),
        1,
        "only the extra term: the pod opt-out is a matchCondition"
    );
    assert!(
        o.policies.is_empty() && o.policy_bindings.is_empty(),
        "placementPolicy.enabled: false"
    );
    let kinds: BTreeSet<String> = o
        .extensions
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d.value["kind"].as_str().unwrap(),
                d.value["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "Issuer gpu-selfsigned".to_string(),
            "Certificate gpu-ca".to_string(),
            "Issuer gpu-ca".to_string(),
            "Certificate gpu-serving".to_string(),
            "ServiceMonitor gpu".to_string(),
        ])
    );
    let monitor = o
        .extensions
        .iter()
        .find(|d| d.value["kind"] == "ServiceMonitor")
        .unwrap();
    assert_eq!(monitor.value["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(monitor.value["spec"]["endpoints"][0]["port"], "https");
    assert_eq!(monitor.value["metadata"]["labels"]["release"], "prom");
    let service = one(&o.services, "Service");
    for (k, v) in monitor.value["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(
            service
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .get(k)
                .map(String::as_str),
            v.as_str(),
            "ServiceMonitor selects the Service"
        );
    }
    assert_eq!(
        service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
            .name
            .as_deref(),
        Some("https")
    );
}

#[test]
fn chart_with_cert_manager_and_client_certificates() {
    if !helm::available("chart_with_cert_manager_and_client_certificates") {
        return;
    }
    let o = render(
        "vgpu-scheduler",
        NAMESPACE,
        "v1.33.0",
        &json!({"certManager": {"enabled": true}}),
    );
    check_all(
        &o,
        &Setup {
            what: "chart (cert-manager, client certificates)",
            cert_manager: true,
            ..CHART_DEFAULT
        },
    );
    assert!(o.extensions.iter().any(|d| {
        d.value["kind"] == "Certificate"
            && d.value["metadata"]["name"] == "vgpu-scheduler-client"
            && d.value["spec"]["usages"]
                .as_array()
                .unwrap()
                .contains(&json!("client auth"))
    }));
    // Without the webhook: no webhook configuration, and the certs Job skips it.
    let o = render(
        "vgpu-scheduler",
        NAMESPACE,
        "v1.33.0",
        &json!({"scheduler": {"admissionWebhook": {"enabled": false}}}),
    );
    assert!(o.webhooks.is_empty());
    let runners = certs_runners(&o);
    assert_eq!(runners.len(), 3);
    for (runner, spec) in runners {
        let args = spec.containers[0].args.clone().unwrap();
        assert!(args.contains(&"--webhook-name=".to_string()), "{runner}");
    }
    assert!(named(&o.cluster_roles, "vgpu-scheduler-certs").is_none());
    assert!(named(&o.cluster_roles, "vgpu-scheduler-certs-hook").is_none());
    // Without the CronJob: only the hooks.
    let o = render(
        "vgpu-scheduler",
        NAMESPACE,
        "v1.33.0",
        &json!({"scheduler": {"certs": {"renewSchedule": ""}}}),
    );
    assert!(o.cron_jobs.is_empty());
    assert_eq!(o.jobs.len(), 2);
    assert!(named(&o.service_accounts, "vgpu-scheduler-certs").is_none());
}

#[test]
fn chart_default_render_is_the_plain_install() {
    if !helm::available("chart_default_render_is_the_plain_install") {
        return;
    }
    // Hooks (the certs Jobs around install and upgrade, and their RBAC) have no
    // plain counterpart: there the CronJob is started by hand once.
    let chart: BTreeMap<String, Value> = render_default()
        .docs
        .iter()
        .filter(|d| {
            d.value["metadata"]["annotations"]
                .get("helm.sh/hook")
                .is_none()
        })
        .map(normalized)
        .collect();
    let plain: BTreeMap<String, Value> = install()
        .docs
        .iter()
        .filter(|d| d.value["kind"] != "Namespace")
        .map(normalized)
        .collect();
    let chart_keys: BTreeSet<&String> = chart.keys().collect();
    let plain_keys: BTreeSet<&String> = plain.keys().collect();
    assert_eq!(
        chart_keys, plain_keys,
        "objects of the chart's default render vs manifests/install"
    );
    for (key, value) in &chart {
        if let Some(diff) = first_difference(value, &plain[key], "") {
            panic!("{key}: chart vs manifests/install differ at {diff}");
        }
    }
}

#[test]
fn chart_values_keep_hamis_names() {
    let values: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(helm::chart_dir().join("values.yaml")).unwrap(),
    )
    .unwrap();
    let values = serde_json::to_value(values).unwrap();
    for path in [
        "/schedulerName",
        "/resourceName",
        "/resourceMem",
        "/resourceMemPercentage",
        "/resourceCores",
        "/scheduler/defaultSchedulerPolicy/nodeSchedulerPolicy",
        "/scheduler/defaultSchedulerPolicy/gpuSchedulerPolicy",
        "/scheduler/leaderElect",
        "/scheduler/replicas",
        "/scheduler/admissionWebhook/enabled",
        "/scheduler/admissionWebhook/failurePolicy",
        "/scheduler/admissionWebhook/whitelistNamespaces",
        "/scheduler/admissionWebhook/namespaceSelector",
        "/scheduler/admissionWebhook/objectSelector",
        "/scheduler/admissionWebhook/reinvocationPolicy",
        "/scheduler/kubeScheduler/image",
        "/scheduler/kubeScheduler/imageTag",
        "/scheduler/nodeLockExpire",
        "/scheduler/overwriteEnv",
        "/scheduler/forceOverwriteDefaultScheduler",
        "/certManager/enabled",
        "/serviceMonitor/enabled",
    ] {
        assert!(values.pointer(path).is_some(), "values.yaml lacks {path}");
    }
    assert_eq!(values.pointer("/scheduler/replicas"), Some(&json!(2)));
    assert_eq!(
        values.pointer("/scheduler/admissionWebhook/failurePolicy"),
        Some(&json!("Fail"))
    );
}

#[tokio::test]
async fn chart_crds_are_volcanos_as_the_fake_api_server_serves_them() {
    let crds = load(documents(&yaml_files_in(&helm::chart_dir().join("crds")))).crds;
    assert_eq!(crds.len(), 3);
    let api = fake_apiserver::FakeApiServer::start().await;
    for crd in &crds {
        let spec = &crd.spec;
        assert!(
            ["scheduling.volcano.sh", "topology.volcano.sh"].contains(&spec.group.as_str()),
            "{}",
            spec.group
        );
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{}.{}", spec.names.plural, spec.group).as_str())
        );
        assert_eq!(spec.versions.len(), 1);
        let version = &spec.versions[0];
        let discovery: Value = reqwest::Client::new()
            .get(format!(
                "{}/apis/{}/{}",
                api.url(),
                spec.group,
                version.name
            ))
            .bearer_auth(api.token())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(version.served && version.storage);
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("openAPIV3Schema");
        let props = schema.properties.as_ref().unwrap();
        for part in ["spec", "status"] {
            assert_eq!(
                props[part].x_kubernetes_preserve_unknown_fields,
                Some(true),
                "{}: {part} keeps fields of newer Volcano releases",
                spec.names.plural
            );
        }
        let served = discovery["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == spec.names.plural.as_str())
            .unwrap_or_else(|| panic!("the fake does not serve {}", spec.names.plural));
        assert_eq!(served["kind"], spec.names.kind.as_str());
        assert_eq!(served["singularName"], json!(spec.names.singular));
        assert_eq!(served["namespaced"], json!(spec.scope == "Namespaced"));
        assert_eq!(served["shortNames"], json!(spec.names.short_names));
        let has_status = version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some());
        let status_served = discovery["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == format!("{}/status", spec.names.plural));
        assert_eq!(
            has_status, status_served,
            "{}: status subresource",
            spec.names.plural
        );
    }
    let by_plural = |p: &str| crds.iter().find(|c| c.spec.names.plural == p).unwrap();
    assert_eq!(by_plural("podgroups").spec.scope, "Namespaced");
    assert_eq!(by_plural("queues").spec.scope, "Cluster");
    assert_eq!(by_plural("hypernodes").spec.scope, "Cluster");
    assert_eq!(by_plural("hypernodes").spec.versions[0].name, "v1alpha1");
}

#[test]
fn chart_records_a_trace_on_a_volume_of_its_own_when_asked() {
    if !helm::available("chart_records_a_trace_on_a_volume_of_its_own_when_asked") {
        return;
    }
    assert!(
        !flags(&extender_args(one(
            &render_default().deployments,
            "Deployment"
        )))
        .contains_key("record-trace"),
        "no trace by default"
    );
    let help = serve_help();
    assert!(help_has_flag(&help, "record-trace"));
    for (claim, expect_claim) in [(json!(""), None), (json!("traces"), Some("traces"))] {
        let values = json!({"scheduler": {"recordTrace": {
            "enabled": true, "existingClaim": claim, "sizeLimit": "2Gi"}}});
        let o = render("vgpu-scheduler", NAMESPACE, "v1.33.0", &values);
        let deployment = one(&o.deployments, "Deployment");
        let args = flags(&extender_args(deployment));
        // Each replica its own file: the kubelet expands $(POD_NAME) from the
        // container's environment.
        assert_eq!(args["record-trace"], "/trace/trace-$(POD_NAME).jsonl");
        let spec = pod_spec(deployment);
        let fs_group = spec.security_context.as_ref().and_then(|c| c.fs_group);
        assert_eq!(
            fs_group,
            Some(65532),
            "a claim writable by the extender's user"
        );
        let extender = container(spec, EXTENDER);
        assert!(
            extender
                .env
                .iter()
                .flatten()
                .any(|e| e.name == "POD_NAME" && e.value_from.is_some())
        );
        let mount = extender
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/trace")
            .expect("a mount at /trace");
        assert_ne!(mount.read_only, Some(true), "the trace is written there");
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .expect("the trace volume");
        match expect_claim {
            Some(name) => {
                let pvc = volume.persistent_volume_claim.as_ref().expect("a claim");
                assert_eq!(pvc.claim_name, name);
            }
            None => {
                let dir = volume.empty_dir.as_ref().expect("an emptyDir");
                assert_eq!(dir.size_limit.as_ref().map(|q| q.0.as_str()), Some("2Gi"));
            }
        }
    }
}
