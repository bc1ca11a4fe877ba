//! Query strings: percent-decoding and the list/watch options the real server
//! reads from them, validated like `ValidateListOptions`.

use super::status::{ApiError, Cause};
use std::collections::HashMap;

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query parameters (the last occurrence of a key wins; empty pairs, as in
/// kube-rs's `?&watch=true`, are skipped).
pub fn parse(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

fn flag(q: &HashMap<String, String>, key: &str) -> Option<bool> {
    q.get(key)
        .map(|v| matches!(v.as_str(), "true" | "1" | "True" | "TRUE"))
}

/// The options of a list or watch request.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub watch: bool,
    pub label_selector: String,
    pub field_selector: String,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: Option<bool>,
}

impl ListOptions {
    pub fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let nonempty = |k: &str| q.get(k).filter(|v| !v.is_empty()).cloned();
        let number =
            |k: &str| -> Result<Option<u64>, ApiError> {
                match nonempty(k) {
                None => Ok(None),
                Some(v) => v.parse::<i64>().map(|n| Some(n.max(0) as u64)).map_err(|_| {
                    ApiError::bad_request(format!(
                        "invalid value for {k}: strconv.ParseInt: parsing {v:?}: invalid syntax"
                    ))
                }),
            }
            };
        let opts = ListOptions {
            watch: flag(q, "watch").unwrap_or(false),
            label_selector: q.get("labelSelector").cloned().unwrap_or_default(),
            field_selector: q.get("fieldSelector").cloned().unwrap_or_default(),
            resource_version: nonempty("resourceVersion"),
            resource_version_match: nonempty("resourceVersionMatch"),
            limit: number("limit")?.filter(|&l| l > 0).map(|l| l as usize),
            continue_token: nonempty("continue"),
            timeout_seconds: number("timeoutSeconds")?,
            allow_watch_bookmarks: flag(q, "allowWatchBookmarks").unwrap_or(false),
            send_initial_events: flag(q, "sendInitialEvents"),
        };
        opts.validate()?;
        Ok(opts)
    }

    fn validate(&self) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        let rvm = self.resource_version_match.as_deref();
        if self.watch {
            if self.send_initial_events.is_some() && rvm != Some("NotOlderThan") {
                causes.push(Cause::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if let Some(m) = rvm {
                if self.send_initial_events.is_none() {
                    causes.push(Cause::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    causes.push(Cause::not_supported(
                        "resourceVersionMatch",
                        m,
                        &["NotOlderThan"],
                    ));
                }
            }
        } else {
            if let Some(m) = rvm {
                if self.resource_version.is_none() {
                    causes.push(Cause::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if self.continue_token.is_some() {
                    causes.push(Cause::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if m != "Exact" && m != "NotOlderThan" {
                    causes.push(Cause::not_supported(
                        "resourceVersionMatch",
                        m,
                        &["Exact", "NotOlderThan", ""],
                    ));
                }
                if m == "Exact" && self.resource_version.as_deref() == Some("0") {
                    causes.push(Cause::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events.is_some() {
                causes.push(Cause::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid_list_options(causes));
        }
        if let Some(rv) = &self.resource_version
            && rv.parse::<u64>().is_err()
        {
            return Err(ApiError::bad_request(format!(
                "invalid resource version: {rv}"
            )));
        }
        Ok(())
    }

    /// The requested resourceVersion as a number (0 when unset or "0").
    pub fn rv_number(&self) -> u64 {
        self.resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}
