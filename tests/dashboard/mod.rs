//! Checks a Grafana dashboard's queries against what the server exports: every
//! panel target and query variable is parsed as PromQL, and every metric, label
//! (in matchers, `by`/`without`, `on`/`ignoring`, legends, `label_values`) and
//! literal label value it uses must be in the scrape of a real server.

#![allow(dead_code)]

pub mod catalog;
pub mod grafana;
pub mod promql;

use catalog::Catalog;
use promql::Shape;
use serde_json::Value;
use std::collections::BTreeSet;

/// What checking a dashboard found.
#[derive(Debug, Default)]
pub struct Findings {
    /// `place: what is wrong`, one per problem.
    pub problems: Vec<String>,
    /// Metric families the dashboard reads.
    pub families: BTreeSet<String>,
    /// Queries checked (panel targets and variable queries).
    pub queries: usize,
}

/// Checks every query of `dashboard` against `catalog`.
pub fn check_dashboard(dashboard: &Value, catalog: &Catalog) -> Findings {
    let mut found = Findings::default();
    let variables = grafana::variable_names(dashboard);
    let unknown_variables = |place: &str, text: &str, problems: &mut Vec<String>| {
        for name in grafana::referenced_variables(text) {
            if !variables.contains(&name) {
                problems.push(format!(
                    "{place}: `${name}` is not a variable of the dashboard"
                ));
            }
        }
    };
    let queries = match grafana::panel_queries(dashboard) {
        Ok(q) => q,
        Err(problems) => {
            found.problems.extend(problems);
            Vec::new()
        }
    };
    for q in queries {
        found.queries += 1;
        unknown_variables(&q.place, &q.expr, &mut found.problems);
        let (report, shape) = promql::check(&grafana::to_promql(&q.expr), catalog);
        found.families.extend(report.families);
        found.problems.extend(
            report
                .problems
                .into_iter()
                .map(|p| format!("{}: {p}", q.place)),
        );
        if let Some(labels) = shape.labels() {
            for label in grafana::legend_labels(&q.legend) {
                if !labels.contains(&label) {
                    found.problems.push(format!(
                        "{}: the legend shows `{{{{{label}}}}}`, which its series do not carry (they carry: {})",
                        q.place,
                        labels.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        } else if shape != Shape::Unknown && !grafana::legend_labels(&q.legend).is_empty() {
            found.problems.push(format!(
                "{}: the legend shows labels but the query gives a {shape:?}",
                q.place
            ));
        }
    }
    for v in grafana::variable_queries(dashboard) {
        found.queries += 1;
        unknown_variables(&v.place, &v.query, &mut found.problems);
        let source = match grafana::variable_source(&v.query) {
            Ok(s) => s,
            Err(e) => {
                found.problems.push(format!("{}: {e}", v.place));
                continue;
            }
        };
        let (expr, label) = match source {
            grafana::VariableSource::LabelValues {
                selector: Some(selector),
                label,
            } => (selector, Some(label)),
            grafana::VariableSource::LabelValues {
                selector: None,
                label,
            } => {
                if !catalog
                    .families
                    .values()
                    .any(|f| f.labels.contains_key(&label))
                {
                    found.problems.push(format!(
                        "{}: no metric the server exports has a label `{label}`",
                        v.place
                    ));
                }
                continue;
            }
            grafana::VariableSource::QueryResult(expr) => (expr, None),
        };
        let (report, shape) = promql::check(&grafana::to_promql(&expr), catalog);
        found.families.extend(report.families);
        found.problems.extend(
            report
                .problems
                .into_iter()
                .map(|p| format!("{}: {p}", v.place)),
        );
        if let (Some(label), Some(labels)) = (label, shape.labels())
            && !labels.contains(&label)
        {
            found.problems.push(format!(
                "{}: label_values of `{label}`, which `{expr}` does not carry",
                v.place
            ));
        }
    }
    found
}
