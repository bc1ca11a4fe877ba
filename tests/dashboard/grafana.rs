//! The queries of a Grafana dashboard (its JSON model): every target of every
//! panel, rows included, and every query variable, with Grafana's own syntax
//! (variables, interval macros, `label_values(...)`) turned into what Prometheus
//! receives.

use serde_json::Value;
use std::collections::BTreeSet;

/// One PromQL query of a panel.
#[derive(Debug, Clone)]
pub struct PanelQuery {
    /// `panel "Title", query B`.
    pub place: String,
    pub expr: String,
    /// The target's legendFormat (`{{node}}`), empty if none.
    pub legend: String,
}

/// One query variable of the dashboard's templating.
#[derive(Debug, Clone)]
pub struct VariableQuery {
    /// `variable node`.
    pub place: String,
    pub query: String,
}

fn panels(list: &Value, out: &mut Vec<Value>) {
    for panel in list.as_array().into_iter().flatten() {
        out.push(panel.clone());
        // Collapsed rows hold their panels.
        panels(&panel["panels"], out);
    }
}

/// Every panel, those inside rows too.
pub fn all_panels(dashboard: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    panels(&dashboard["panels"], &mut out);
    out
}

/// Every panel target's query. A target without `expr` is reported as a query
/// that cannot be checked.
pub fn panel_queries(dashboard: &Value) -> Result<Vec<PanelQuery>, Vec<String>> {
    let mut queries = Vec::new();
    let mut problems = Vec::new();
    for panel in all_panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        for target in panel["targets"].as_array().into_iter().flatten() {
            let ref_id = target["refId"].as_str().unwrap_or("?");
            let place = format!("panel \"{title}\", query {ref_id}");
            match target["expr"].as_str() {
                Some(expr) => queries.push(PanelQuery {
                    place,
                    expr: expr.to_string(),
                    legend: target["legendFormat"].as_str().unwrap_or("").to_string(),
                }),
                None => problems.push(format!("{place}: no PromQL `expr`")),
            }
        }
    }
    if problems.is_empty() {
        Ok(queries)
    } else {
        Err(problems)
    }
}

/// Every query variable's query (Grafana keeps it in `query`, as text or as
/// `{query: ...}`, and repeats it in `definition`: both are returned).
pub fn variable_queries(dashboard: &Value) -> Vec<VariableQuery> {
    let mut out = Vec::new();
    for var in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if var["type"] != "query" {
            continue;
        }
        let place = format!("variable {}", var["name"].as_str().unwrap_or("?"));
        let query = var["query"]
            .as_str()
            .or_else(|| var["query"]["query"].as_str());
        let texts: BTreeSet<&str> = query
            .into_iter()
            .chain(var["definition"].as_str())
            .filter(|q| !q.is_empty())
            .collect();
        for query in texts {
            out.push(VariableQuery {
                place: place.clone(),
                query: query.to_string(),
            });
        }
    }
    out
}

/// Names of the dashboard's variables.
pub fn variable_names(dashboard: &Value) -> BTreeSet<String> {
    dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect()
}

/// Variables a text refers to (`$node`, `${node}`, `[[node]]`), Grafana's
/// built-ins (`$__rate_interval`) left out.
pub fn referenced_variables(text: &str) -> BTreeSet<String> {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices('$') {
        let rest = &text[i + 1..];
        let name = word(rest.strip_prefix('{').unwrap_or(rest));
        out.insert(name);
    }
    for (i, _) in text.match_indices("[[") {
        out.insert(word(&text[i + 2..]));
    }
    out.retain(|n| !n.is_empty() && !n.starts_with("__"));
    out
}

/// Grafana's interval macros, which stand for durations where PromQL wants one.
const INTERVAL_MACROS: [&str; 3] = ["__rate_interval", "__interval", "__range"];

/// `expr` as Prometheus receives it, give or take the values of variables:
/// interval macros become a duration (variables inside label values stay as they
/// are, they are text there).
pub fn to_promql(expr: &str) -> String {
    let mut out = expr.to_string();
    for name in INTERVAL_MACROS {
        out = out.replace(&format!("${{{name}}}"), "5m");
        out = out.replace(&format!("${name}"), "5m");
    }
    out
}

/// A variable query in Grafana's Prometheus syntax.
#[derive(Debug, PartialEq)]
pub enum VariableSource {
    /// `label_values(<selector>, <label>)`, or `label_values(<label>)` (selector `None`).
    LabelValues {
        selector: Option<String>,
        label: String,
    },
    /// `query_result(<expr>)`.
    QueryResult(String),
}

/// Reads a variable query; `Err` for the forms this check does not know.
pub fn variable_source(query: &str) -> Result<VariableSource, String> {
    let query = query.trim();
    if let Some(args) = query
        .strip_prefix("label_values(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return Ok(match args.rsplit_once(',') {
            Some((selector, label)) => VariableSource::LabelValues {
                selector: Some(selector.trim().to_string()),
                label: label.trim().to_string(),
            },
            None => VariableSource::LabelValues {
                selector: None,
                label: args.trim().to_string(),
            },
        });
    }
    if let Some(expr) = query
        .strip_prefix("query_result(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return Ok(VariableSource::QueryResult(expr.to_string()));
    }
    Err(format!(
        "`{query}`: not label_values(...) or query_result(...), which this check reads"
    ))
}

/// The labels a legendFormat shows (`{{node}} {{ phase }}`).
pub fn legend_labels(legend: &str) -> Vec<String> {
    legend
        .split("{{")
        .skip(1)
        .filter_map(|part| part.split_once("}}"))
        .map(|(name, _)| name.trim().to_string())
        .collect()
}
