//! The request log counted as the API server's own metrics count it
//! (`apiserver_request_total{verb, resource, subresource}`): a verb of
//! `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, and the
//! resource with its subresource (`pods`, `pods/binding`, `nodes`, `events`).

use std::collections::BTreeMap;

/// Requests counted by verb and resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiCalls {
    /// (verb, resource[/subresource]) -> requests.
    pub counts: BTreeMap<(String, String), usize>,
}

impl ApiCalls {
    /// Counts the logged requests `(method, path with query)`.
    pub fn of<'a>(log: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut counts = BTreeMap::new();
        for (method, line) in log {
            if let Some(key) = classify(method, line) {
                *counts.entry(key).or_default() += 1;
            }
        }
        Self { counts }
    }

    /// Requests with `verb` on `resource` (`"pods/binding"` for a subresource).
    pub fn count(&self, verb: &str, resource: &str) -> usize {
        self.counts
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Writes: create, update, patch, delete.
    pub fn writes(&self) -> usize {
        self.sum(&["create", "update", "patch", "delete"])
    }

    /// Reads that are not watches: get, list.
    pub fn reads(&self) -> usize {
        self.sum(&["get", "list"])
    }

    fn sum(&self, verbs: &[&str]) -> usize {
        self.counts
            .iter()
            .filter(|((verb, _), _)| verbs.contains(&verb.as_str()))
            .map(|(_, n)| n)
            .sum()
    }
}

/// The (verb, resource) of one request; `None` for what is not a resource
/// request (discovery, `/healthz`, `/version`).
fn classify(method: &str, line: &str) -> Option<(String, String)> {
    let (path, query) = line.split_once('?').unwrap_or((line, ""));
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... or /apis/group/version/...
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _ns, resource, more @ ..] => {
            let mut r = vec![*resource];
            r.extend_from_slice(more);
            r
        }
        other => other.to_vec(),
    };
    let (resource, name, subresource) = match rest.as_slice() {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub] => (*resource, Some(*name), Some(*sub)),
        _ => return None,
    };
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, name) {
        ("GET", _) if watch => "watch",
        ("GET", Some(_)) => "get",
        ("GET", None) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    let resource = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    Some((verb.to_string(), resource))
}
