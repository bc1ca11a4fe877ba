//! The plain-YAML install (`manifests/install/`) and `manifests/*.yaml`: every
//! document parses into its Kubernetes type (k8s-openapi) with no field the type does
//! not know, and the pieces fit together and fit the binary: the
//! KubeSchedulerConfiguration names only routes the server serves and resources it
//! manages, the extender flags are ones `vgpu-scheduler serve` accepts, the webhook
//! fails closed but matches narrowly, and RBAC grants exactly what the live mode uses.

use k8s_openapi::Resource;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PodSpec, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde::de::{Deserialize, DeserializeOwned};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Routes the server serves for kube-scheduler (src/app.rs).
const EXTENDER_ROUTES: [&str; 3] = ["filter", "prioritize", "bind"];
/// Resource names the server manages.
const MANAGED_RESOURCES: [&str; 5] = [
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "nvidia.com/priority",
];
/// Resources a pod asks for that make it a vGPU pod (the webhook's matchConditions).
const POD_RESOURCES: [&str; 4] = [
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
];
const NAMESPACE: &str = "vgpu-system";
const EXTENDER: &str = "extender";
const KUBE_SCHEDULER: &str = "kube-scheduler";

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

/// Every object of the manifests, by type.
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
    /// KubeSchedulerConfiguration documents, with where they came from.
    scheduler_configs: Vec<Doc>,
}

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
            "KubeSchedulerConfiguration" => {
                assert_eq!(
                    doc.value["apiVersion"].as_str(),
                    Some("kubescheduler.config.k8s.io/v1"),
                    "{}",
                    doc.file
                );
                objects.scheduler_configs.push(doc);
            }
            other => panic!("{}: unexpected kind {other:?}", doc.file),
        }
    }
    objects
}

fn install() -> Objects {
    let files = yaml_files_in(&manifests_dir().join("install"));
    assert!(!files.is_empty(), "manifests/install holds no YAML");
    load(documents(&files))
}

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

/// What a KubeSchedulerConfiguration must agree with.
struct Expect<'a> {
    what: &'a str,
    extender_port: u16,
    scheduler_name: &'a str,
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

    let url = extender["urlPrefix"].as_str().expect("urlPrefix");
    assert!(
        url.starts_with("https://"),
        "{what}: the server only speaks TLS"
    );
    assert_eq!(extender["enableHTTPS"], Value::Bool(true), "{what}");
    assert_eq!(
        port_of(url),
        expect.extender_port,
        "{what}: urlPrefix port is the extender's --http-bind port"
    );
    assert_eq!(extender["nodeCacheCapable"], Value::Bool(true), "{what}");

    let managed = extender["managedResources"]
        .as_array()
        .expect("managedResources");
    assert!(!managed.is_empty(), "{what}: managedResources");
    for resource in managed {
        let name = resource["name"].as_str().expect("managed resource name");
        assert!(
            MANAGED_RESOURCES.contains(&name),
            "{what}: managed resource {name:?} is not one the server manages"
        );
        assert_eq!(
            resource["ignoredByScheduler"],
            Value::Bool(true),
            "{what}: {name}"
        );
    }
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let mut files = yaml_files_in(&manifests_dir());
    files.extend(yaml_files_in(&manifests_dir().join("install")));
    let objects = load(documents(&files));
    assert_eq!(objects.namespaces.len(), 1);
    assert_eq!(objects.deployments.len(), 1);
    assert_eq!(objects.webhooks.len(), 1);
    // manifests/kube-scheduler-config.yaml.
    assert_eq!(objects.scheduler_configs.len(), 1);
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
}

#[test]
fn namespaced_objects_live_in_vgpu_system() {
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
    let namespaces = o
        .service_accounts
        .iter()
        .map(|x| &x.metadata)
        .chain(o.roles.iter().map(|x| &x.metadata))
        .chain(o.config_maps.iter().map(|x| &x.metadata))
        .chain(o.deployments.iter().map(|x| &x.metadata))
        .chain(o.services.iter().map(|x| &x.metadata))
        .chain(o.pod_disruption_budgets.iter().map(|x| &x.metadata));
    for meta in namespaces {
        assert_eq!(
            meta.namespace.as_deref(),
            Some(NAMESPACE),
            "{:?}",
            meta.name
        );
    }
    for binding in &o.role_bindings {
        let ns = binding.metadata.namespace.as_deref();
        // kube-scheduler's reader of extension-apiserver-authentication is the one
        // binding outside our namespace.
        if binding.role_ref.name == "extension-apiserver-authentication-reader" {
            assert_eq!(ns, Some("kube-system"));
        } else {
            assert_eq!(ns, Some(NAMESPACE), "{:?}", binding.metadata.name);
        }
    }
}

#[test]
fn scheduler_configurations_name_only_what_the_server_serves() {
    let help = serve_help();
    let o = install();
    let deployment = one(&o.deployments, "Deployment");
    let args = flags(&extender_args(deployment));
    let bind = args
        .get("http-bind")
        .cloned()
        .unwrap_or_else(|| help_default(&help, "http-bind"));
    let scheduler_name = args
        .get("scheduler-name")
        .cloned()
        .unwrap_or_else(|| help_default(&help, "scheduler-name"));

    // The ConfigMap the kube-scheduler container reads.
    let spec = pod_spec(deployment);
    let kube_scheduler = container(spec, KUBE_SCHEDULER);
    let mut command = kube_scheduler.command.clone().unwrap_or_default();
    command.extend(kube_scheduler.args.clone().unwrap_or_default());
    let config_path = flags(&command)
        .get("config")
        .cloned()
        .expect("kube-scheduler --config");
    let (dir, key) = config_path.rsplit_once('/').unwrap();
    let mount = kube_scheduler
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == dir)
        .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("the config volume");
    let config_map_name = &volume.config_map.as_ref().expect("a ConfigMap volume").name;
    let config_map = o
        .config_maps
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(config_map_name))
        .unwrap_or_else(|| panic!("no ConfigMap {config_map_name}"));
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .unwrap_or_else(|| panic!("ConfigMap {config_map_name} has no key {key}"));
    let docs = parse_yaml_documents("ConfigMap config.yaml", text);
    let config = &one(&docs, "KubeSchedulerConfiguration").value;
    check_scheduler_config(
        config,
        &Expect {
            what: "install ConfigMap",
            extender_port: port_of(&bind),
            scheduler_name: &scheduler_name,
        },
    );
    assert_eq!(
        config["leaderElection"]["resourceNamespace"].as_str(),
        Some(NAMESPACE)
    );

    // kube-scheduler's Lease is not the extender's Lease.
    let extender_lease = (
        args.get("leader-elect-resource-namespace")
            .cloned()
            .unwrap_or_else(|| NAMESPACE.into()),
        args.get("leader-elect-resource-name")
            .cloned()
            .unwrap_or_else(|| scheduler_name.clone()),
    );
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
        "kube-scheduler and the extender would fight over one Lease"
    );

    // manifests/kube-scheduler-config.yaml, against the server's defaults.
    let top = load(documents(&yaml_files_in(&manifests_dir())));
    for doc in &top.scheduler_configs {
        check_scheduler_config(
            &doc.value,
            &Expect {
                what: &doc.file,
                extender_port: port_of(&help_default(&help, "http-bind")),
                scheduler_name: &help_default(&help, "scheduler-name"),
            },
        );
    }
}

#[test]
fn extender_flags_are_accepted_by_the_binary() {
    let help = serve_help();
    let o = install();
    let deployment = one(&o.deployments, "Deployment");
    let args = extender_args(deployment);
    assert_eq!(args.first().map(String::as_str), Some("serve"));
    let mut count = 0;
    for arg in &args {
        if let Some(flag) = arg.strip_prefix("--") {
            let name = flag.split_once('=').map_or(flag, |(n, _)| n);
            assert!(
                help_has_flag(&help, name),
                "--{name} is not a flag of vgpu-scheduler serve"
            );
            count += 1;
        }
    }
    assert!(count >= 5, "the extender's flags: {args:?}");
    assert!(!help_has_flag(&help, "no-such-flag"));
    assert!(!help_has_flag(&help, "leader-elect-resource"));
}

#[test]
fn deployment_is_hardened_and_probed() {
    let o = install();
    let deployment = one(&o.deployments, "Deployment");
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(2));
    let spec = pod_spec(deployment);
    let pod_security = spec.security_context.as_ref();
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
    for c in &spec.containers {
        let sc = c.security_context.as_ref();
        let non_root = sc
            .and_then(|s| s.run_as_non_root)
            .or(pod_security.and_then(|s| s.run_as_non_root));
        assert_eq!(non_root, Some(true), "{}: runAsNonRoot", c.name);
        let user = sc
            .and_then(|s| s.run_as_user)
            .or(pod_security.and_then(|s| s.run_as_user));
        assert!(user.is_some_and(|u| u != 0), "{}: runAsUser", c.name);
        assert_eq!(
            sc.and_then(|s| s.read_only_root_filesystem),
            Some(true),
            "{}: readOnlyRootFilesystem",
            c.name
        );
        assert_eq!(
            sc.and_then(|s| s.allow_privilege_escalation),
            Some(false),
            "{}: allowPrivilegeEscalation",
            c.name
        );
        let dropped = sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.drop.clone())
            .unwrap_or_default();
        assert!(dropped.iter().any(|d| d == "ALL"), "{}: drop ALL", c.name);
        let resources = c.resources.as_ref().expect("resources");
        assert!(resources.requests.is_some(), "{}: requests", c.name);
        assert!(resources.limits.is_some(), "{}: limits", c.name);
    }

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

    // TLS files come from the Secret mounted where --cert-file/--key-file point.
    for flag in ["cert-file", "key-file"] {
        let file = &args[flag];
        let (dir, _) = file.rsplit_once('/').unwrap();
        let mount = extender
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path.trim_end_matches('/') == dir)
            .unwrap_or_else(|| panic!("--{flag}={file}: nothing mounted at {dir}"));
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .unwrap();
        assert_eq!(
            volume
                .secret
                .as_ref()
                .and_then(|s| s.secret_name.as_deref()),
            Some("vgpu-scheduler-tls")
        );
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

    // Service and PodDisruptionBudget select these pods.
    let service = one(&o.services, "Service");
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

#[test]
fn webhook_fails_closed_but_matches_narrowly() {
    let o = install();
    let configuration = one(&o.webhooks, "MutatingWebhookConfiguration");
    let service = one(&o.services, "Service");
    let webhooks = configuration.webhooks.as_ref().expect("webhooks");
    assert_eq!(webhooks.len(), 1);
    let webhook = &webhooks[0];
    assert!(webhook.name.contains('.'), "fully-qualified webhook name");
    assert_eq!(webhook.admission_review_versions, vec!["v1".to_string()]);
    assert_eq!(webhook.side_effects, "None");
    assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(webhook.timeout_seconds, Some(10));
    assert_eq!(webhook.reinvocation_policy.as_deref(), Some("Never"));

    let rules = webhook.rules.as_ref().expect("rules");
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].operations.as_deref(),
        Some(&["CREATE".to_string()][..])
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
    assert_eq!(target.namespace, NAMESPACE);
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
    assert!(names.contains(NAMESPACE), "{names:?}");
    assert!(excluded(&webhook.namespace_selector, "vgpu.io/webhook").contains("ignore"));
    assert!(excluded(&webhook.object_selector, "vgpu.io/webhook").contains("ignore"));

    // Only pods asking for our resources, in containers or init containers.
    let conditions = webhook.match_conditions.as_ref().expect("matchConditions");
    assert_eq!(conditions.len(), 1);
    let expression = &conditions[0].expression;
    for resource in POD_RESOURCES {
        assert!(expression.contains(&format!("'{resource}'")), "{resource}");
    }
    for needle in [
        "object.spec.containers.exists(",
        "has(object.spec.initContainers) && object.spec.initContainers.exists(",
        "c.resources.limits",
        "c.resources.requests",
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

fn rule_triples(rules: &[PolicyRule]) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in rules {
        assert!(rule.resource_names.is_none(), "resourceNames: {rule:?}");
        assert!(
            rule.non_resource_urls.is_none(),
            "nonResourceURLs: {rule:?}"
        );
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    out.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    out
}

fn triples(list: &[(&str, &str, &[&str])]) -> BTreeSet<(String, String, String)> {
    list.iter()
        .flat_map(|(group, resource, verbs)| {
            verbs
                .iter()
                .map(move |v| (group.to_string(), resource.to_string(), v.to_string()))
        })
        .collect()
}

#[test]
fn rbac_grants_exactly_what_the_live_mode_uses() {
    let o = install();
    let cluster_role = one(&o.cluster_roles, "ClusterRole");
    assert_eq!(
        cluster_role.metadata.name.as_deref(),
        Some("vgpu-scheduler")
    );
    assert!(cluster_role.aggregation_rule.is_none());
    assert_eq!(
        rule_triples(cluster_role.rules.as_deref().unwrap_or_default()),
        triples(&[
            ("", "pods", &["get", "list", "watch", "patch"]),
            ("", "pods/binding", &["create"]),
            ("", "nodes", &["get", "list", "watch", "patch"]),
            ("", "resourcequotas", &["list", "watch"]),
            ("", "events", &["create"]),
        ])
    );
    let role = one(&o.roles, "Role");
    assert_eq!(
        rule_triples(role.rules.as_deref().unwrap_or_default()),
        triples(&[(
            "coordination.k8s.io",
            "leases",
            &["get", "create", "update"]
        )])
    );

    // Everything is bound to the Deployment's ServiceAccount.
    let deployment = one(&o.deployments, "Deployment");
    let account = pod_spec(deployment)
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    let sa = one(&o.service_accounts, "ServiceAccount");
    assert_eq!(sa.metadata.name.as_ref(), Some(&account));
    let subjects_ok = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        let subjects = subjects.as_deref().unwrap_or_default();
        subjects.len() == 1
            && subjects[0].kind == "ServiceAccount"
            && subjects[0].name == account
            && subjects[0].namespace.as_deref() == Some(NAMESPACE)
    };
    let cluster_bound: BTreeSet<&str> = o
        .cluster_role_bindings
        .iter()
        .inspect(|b| assert!(subjects_ok(&b.subjects), "{:?}", b.metadata.name))
        .inspect(|b| assert_eq!(b.role_ref.kind, "ClusterRole"))
        .map(|b| b.role_ref.name.as_str())
        .collect();
    assert_eq!(
        cluster_bound,
        BTreeSet::from([
            "vgpu-scheduler",
            "system:kube-scheduler",
            "system:volume-scheduler"
        ])
    );
    let bound: BTreeSet<(&str, &str, &str)> = o
        .role_bindings
        .iter()
        .inspect(|b| assert!(subjects_ok(&b.subjects), "{:?}", b.metadata.name))
        .map(|b| {
            (
                b.metadata.namespace.as_deref().unwrap_or(""),
                b.role_ref.kind.as_str(),
                b.role_ref.name.as_str(),
            )
        })
        .collect();
    let role_name = role.metadata.name.as_deref().unwrap();
    assert_eq!(
        bound,
        BTreeSet::from([
            (NAMESPACE, "Role", role_name),
            (
                "kube-system",
                "Role",
                "extension-apiserver-authentication-reader"
            ),
        ])
    );
}
