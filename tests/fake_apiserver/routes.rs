//! URL paths to resources: `/api/v1/...` and `/apis/{group}/{version}/...`.

use super::resources::{self, RESOURCES, Resource};

#[derive(Debug)]
pub enum Discovery {
    Version,
    Health,
    Api,
    Apis,
    Group(String),
    Resources(String, String),
}

#[derive(Debug)]
pub enum Route {
    Discovery(Discovery),
    /// A collection: all namespaces (or cluster-scoped) when `namespace` is None.
    Collection {
        res: &'static Resource,
        namespace: Option<String>,
    },
    /// One object (namespace empty for cluster-scoped), maybe a subresource.
    Object {
        res: &'static Resource,
        namespace: String,
        name: String,
        sub: Option<String>,
    },
    NotFound,
}

fn known_group_version(group: &str, version: &str) -> bool {
    RESOURCES
        .iter()
        .any(|r| r.group == group && r.version == version)
}

pub fn route(path: &str) -> Route {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["version"] => return Route::Discovery(Discovery::Version),
        ["healthz" | "livez" | "readyz", ..] => return Route::Discovery(Discovery::Health),
        ["api"] => return Route::Discovery(Discovery::Api),
        ["apis"] => return Route::Discovery(Discovery::Apis),
        ["api", "v1"] => return Route::Discovery(Discovery::Resources(String::new(), "v1".into())),
        ["apis", g] if RESOURCES.iter().any(|r| r.group == *g) => {
            return Route::Discovery(Discovery::Group(g.to_string()));
        }
        ["apis", g, v] if known_group_version(g, v) => {
            return Route::Discovery(Discovery::Resources(g.to_string(), v.to_string()));
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (g, v, rest),
        _ => return Route::NotFound,
    };
    let lookup = |plural: &str| resources::lookup(group, version, plural);
    let namespaced = |plural: &str| lookup(plural).filter(|r| r.namespaced);
    let cluster = |plural: &str| lookup(plural).filter(|r| !r.namespaced);
    match rest {
        ["namespaces", ns, plural] if namespaced(plural).is_some() => Route::Collection {
            res: namespaced(plural).expect("checked"),
            namespace: Some(ns.to_string()),
        },
        ["namespaces", ns, plural, name] if namespaced(plural).is_some() => Route::Object {
            res: namespaced(plural).expect("checked"),
            namespace: ns.to_string(),
            name: name.to_string(),
            sub: None,
        },
        ["namespaces", ns, plural, name, sub] if namespaced(plural).is_some() => Route::Object {
            res: namespaced(plural).expect("checked"),
            namespace: ns.to_string(),
            name: name.to_string(),
            sub: Some(sub.to_string()),
        },
        [plural] if lookup(plural).is_some() => Route::Collection {
            res: lookup(plural).expect("checked"),
            namespace: None,
        },
        [plural, name] if cluster(plural).is_some() => Route::Object {
            res: cluster(plural).expect("checked"),
            namespace: String::new(),
            name: name.to_string(),
            sub: None,
        },
        [plural, name, sub] if cluster(plural).is_some() => Route::Object {
            res: cluster(plural).expect("checked"),
            namespace: String::new(),
            name: name.to_string(),
            sub: Some(sub.to_string()),
        },
        _ => Route::NotFound,
    }
}
