//! `/version`, `/api`, `/apis` and the per-group-version resource lists.

use super::resources::{RESOURCES, Resource, Storage, is_served};
use serde_json::{Value, json};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0",
        "gitCommit": "60a317eadfcb839692a68eab88b2096f4d708f4f",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T13:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn groups() -> Vec<&'static str> {
    let mut gs: Vec<&str> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !gs.contains(&r.group) {
            gs.push(r.group);
        }
    }
    gs
}

/// Whether `group/version` is served (the workload APIs only with their gate).
pub fn served(group: &str, version: &str, workload_version: Option<&str>) -> bool {
    RESOURCES
        .iter()
        .any(|r| r.group == group && r.version == version && is_served(r, workload_version))
}

/// The versions of a group, as the real server lists them: the stable one
/// first (it is the preferred version), then the others.
fn versions(name: &str, workload_version: Option<&str>) -> Vec<&'static str> {
    let mut versions: Vec<&str> = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.group == name) {
        if is_served(r, workload_version) && !versions.contains(&r.version) {
            versions.push(r.version);
        }
    }
    if versions.is_empty() {
        versions.push("v1");
    }
    versions
}

pub fn group(name: &str, workload_version: Option<&str>) -> Value {
    let gvs: Vec<Value> = versions(name, workload_version)
        .into_iter()
        .map(|version| json!({"groupVersion": format!("{name}/{version}"), "version": version}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "preferredVersion": gvs[0].clone(),
        "versions": gvs,
    })
}

pub fn group_list(workload_version: Option<&str>) -> Value {
    let groups: Vec<Value> = groups()
        .into_iter()
        .map(|g| {
            let mut v = group(g, workload_version);
            if let Some(m) = v.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            v
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn verbs(r: &Resource) -> Vec<&'static str> {
    vec![
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    .into_iter()
    // Namespaces are the one type here without deletecollection.
    .filter(|v| *v != "deletecollection" || r.storage != Storage::Namespaces)
    .collect()
}

pub fn resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        resources.push(json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs(r),
            "shortNames": r.short_names,
        }));
        for sub in r.subresources() {
            let (kind, verbs): (&str, Vec<&str>) = match *sub {
                "binding" => ("Binding", vec!["create"]),
                "eviction" => ("Eviction", vec!["create"]),
                _ => (r.kind, vec!["get", "patch", "update"]),
            };
            let mut entry = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if *sub == "eviction" {
                entry["group"] = json!("policy");
                entry["version"] = json!("v1");
            }
            resources.push(entry);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}
