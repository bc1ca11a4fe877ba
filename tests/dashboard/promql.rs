//! Checks one PromQL expression against a [`Catalog`]: every selector names a
//! series the server exports, every label it matches on, groups by, matches
//! vectors on or writes into a legend exists where it is used, and literal label
//! values were seen in the scrape. Parsing is promql-parser's; this walks its tree
//! and follows which labels each sub-expression's result carries, as Prometheus
//! computes them.

use super::catalog::Catalog;
use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::value::ValueType;
use promql_parser::parser::{
    self, AggregateExpr, BinaryExpr, Call, Expr, LabelModifier, VectorMatchCardinality,
    VectorSelector,
};
use std::collections::BTreeSet;

/// Labels Prometheus adds to every series it scrapes.
pub const SCRAPE_LABELS: [&str; 2] = ["job", "instance"];

/// What an expression evaluates to, with the labels of its series.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Scalar,
    String,
    Vector(BTreeSet<String>),
    Matrix(BTreeSet<String>),
    /// A part already reported (an unknown metric): nothing more is checked on it.
    Unknown,
}

impl Shape {
    /// The labels of a vector or matrix; `None` for the rest.
    pub fn labels(&self) -> Option<&BTreeSet<String>> {
        match self {
            Shape::Vector(l) | Shape::Matrix(l) => Some(l),
            _ => None,
        }
    }
}

/// What checking one expression found.
#[derive(Debug, Default)]
pub struct Report {
    /// The metric families the expression reads.
    pub families: BTreeSet<String>,
    /// Each thing wrong, in words.
    pub problems: Vec<String>,
}

/// Checks `expr`; returns what it found and the shape of its result.
pub fn check(expr: &str, catalog: &Catalog) -> (Report, Shape) {
    let mut checker = Checker {
        catalog,
        report: Report::default(),
    };
    let shape = match parser::parse(expr) {
        Ok(tree) => checker.walk(&tree),
        Err(e) => {
            checker.problem(format!("not PromQL: {e}"));
            Shape::Unknown
        }
    };
    (checker.report, shape)
}

struct Checker<'a> {
    catalog: &'a Catalog,
    report: Report,
}

fn set(labels: &[String]) -> BTreeSet<String> {
    labels.iter().cloned().collect()
}

fn list(labels: &BTreeSet<String>) -> String {
    labels.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// The words of a regex that is only an alternation of plain words
/// (`Pending|Inqueue`), each of which must then be a value seen.
fn plain_alternatives(regex: &str) -> Option<Vec<&str>> {
    let words: Vec<&str> = regex.split('|').collect();
    words
        .iter()
        .all(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ' ' | ':'))
        })
        .then_some(words)
}

impl Checker<'_> {
    fn problem(&mut self, text: String) {
        self.report.problems.push(text);
    }

    /// Reports every name in `wanted` missing from `have`; `what` says where.
    fn require(&mut self, wanted: &[String], have: &BTreeSet<String>, what: &str) {
        for label in wanted {
            if !have.contains(label) {
                self.problem(format!(
                    "{what}: no label `{label}` there (the series there carry: {})",
                    list(have)
                ));
            }
        }
    }

    fn walk(&mut self, e: &Expr) -> Shape {
        match e {
            Expr::VectorSelector(vs) => self.selector(vs),
            Expr::MatrixSelector(ms) => match self.selector(&ms.vs) {
                Shape::Vector(l) => Shape::Matrix(l),
                other => other,
            },
            Expr::Aggregate(a) => self.aggregate(a),
            Expr::Binary(b) => self.binary(b),
            Expr::Call(c) => self.call(c),
            Expr::Paren(p) => self.walk(&p.expr),
            Expr::Unary(u) => self.walk(&u.expr),
            Expr::Subquery(s) => match self.walk(&s.expr) {
                Shape::Vector(l) => Shape::Matrix(l),
                other => other,
            },
            Expr::NumberLiteral(_) => Shape::Scalar,
            Expr::StringLiteral(_) => Shape::String,
            Expr::Extension(_) => {
                self.problem("an extension expression".into());
                Shape::Unknown
            }
        }
    }

    fn selector(&mut self, vs: &VectorSelector) -> Shape {
        let matchers: Vec<&Matcher> = vs
            .matchers
            .matchers
            .iter()
            .chain(vs.matchers.or_matchers.iter().flatten())
            .collect();
        let name = vs.name.clone().or_else(|| {
            matchers
                .iter()
                .find(|m| m.name == "__name__" && m.op == MatchOp::Equal)
                .map(|m| m.value.clone())
        });
        let Some(name) = name else {
            self.problem(format!("`{vs}` names no metric"));
            return Shape::Unknown;
        };
        let Some(series) = self.catalog.series(&name) else {
            let hint = self
                .catalog
                .series_names()
                .into_iter()
                .filter(|s| s.starts_with(&name) || name.starts_with(s.as_str()))
                .collect::<Vec<_>>();
            self.problem(format!(
                "no metric `{name}` in what the server exports{}",
                if hint.is_empty() {
                    String::new()
                } else {
                    format!(" (did you mean {}?)", hint.join(", "))
                }
            ));
            return Shape::Unknown;
        };
        let family = series.family.to_string();
        self.report.families.insert(family.clone());
        if series.info.samples == 0 {
            self.problem(format!(
                "`{family}` had no sample in the scrape, so its labels are unknown: drive the server until it has some"
            ));
            return Shape::Unknown;
        }
        let mut labels: BTreeSet<String> = series.info.labels.keys().cloned().collect();
        labels.extend(series.extra.iter().map(|l| l.to_string()));
        labels.extend(SCRAPE_LABELS.iter().map(|l| l.to_string()));
        for m in matchers.iter().filter(|m| m.name != "__name__") {
            if !labels.contains(&m.name) {
                self.problem(format!(
                    "`{name}` has no label `{}` (it has: {})",
                    m.name,
                    list(&labels)
                ));
                continue;
            }
            let Some(seen) = series.info.labels.get(&m.name) else {
                continue; // a scrape label or one of the series' own (`le`)
            };
            let wanted: Vec<&str> = match &m.op {
                MatchOp::Equal if !m.value.is_empty() => vec![m.value.as_str()],
                MatchOp::Re(_) => plain_alternatives(&m.value).unwrap_or_default(),
                _ => Vec::new(),
            };
            for value in wanted.into_iter().filter(|v| !v.contains('$')) {
                if !seen.contains(value) {
                    self.problem(format!(
                        "`{name}{{{}=\"{value}\"}}`: no sample had this value (seen: {})",
                        m.name,
                        seen.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
        Shape::Vector(labels)
    }

    fn aggregate(&mut self, a: &AggregateExpr) -> Shape {
        let param = a.param.as_ref().map(|p| self.walk(p));
        let inner = self.walk(&a.expr);
        let op = a.op.to_string();
        let Some(have) = inner.labels().cloned() else {
            return inner;
        };
        let grouped = match &a.modifier {
            Some(LabelModifier::Include(l)) => {
                self.require(&l.labels, &have, &format!("{op} by (...)"));
                set(&l.labels)
            }
            Some(LabelModifier::Exclude(l)) => {
                self.require(&l.labels, &have, &format!("{op} without (...)"));
                have.difference(&set(&l.labels)).cloned().collect()
            }
            None => BTreeSet::new(),
        };
        match op.as_str() {
            "topk" | "bottomk" | "limitk" | "limit_ratio" => Shape::Vector(have),
            "count_values" => {
                let mut out = grouped;
                if let (Some(Shape::String), Some(Expr::StringLiteral(s))) =
                    (param, a.param.as_deref())
                {
                    out.insert(s.val.clone());
                }
                Shape::Vector(out)
            }
            _ => Shape::Vector(grouped),
        }
    }

    fn binary(&mut self, b: &BinaryExpr) -> Shape {
        let lhs = self.walk(&b.lhs);
        let rhs = self.walk(&b.rhs);
        let op = b.op.to_string();
        let (l, r) = match (&lhs, &rhs) {
            (Shape::Unknown, _) | (_, Shape::Unknown) => return Shape::Unknown,
            (Shape::Vector(l), Shape::Vector(r)) => (l.clone(), r.clone()),
            (Shape::Vector(_), _) => return lhs,
            (_, Shape::Vector(_)) => return rhs,
            _ => return Shape::Scalar,
        };
        let matching = b.modifier.as_ref().and_then(|m| m.matching.clone());
        let card = b
            .modifier
            .as_ref()
            .map_or(VectorMatchCardinality::OneToOne, |m| m.card.clone());
        let both: BTreeSet<String> = l.union(&r).cloned().collect();
        match &matching {
            Some(LabelModifier::Include(on)) => {
                self.require(&on.labels, &l, &format!("`{op} on (...)`, left side"));
                self.require(&on.labels, &r, &format!("`{op} on (...)`, right side"));
            }
            Some(LabelModifier::Exclude(ignoring)) => {
                self.require(&ignoring.labels, &both, &format!("`{op} ignoring (...)`"));
            }
            None => {}
        }
        // Without group_left/right, series match only when their labels (less any
        // ignored) are equal: sides that carry different labels never match.
        let set_op = matches!(op.as_str(), "and" | "or" | "unless");
        let one_to_one = if set_op {
            op != "or"
        } else {
            matches!(card, VectorMatchCardinality::OneToOne)
        };
        if one_to_one {
            let ignored = match &matching {
                Some(LabelModifier::Exclude(i)) => set(&i.labels),
                _ => BTreeSet::new(),
            };
            let (lk, rk): (BTreeSet<_>, BTreeSet<_>) = match &matching {
                Some(LabelModifier::Include(on)) => (set(&on.labels), set(&on.labels)),
                _ => (
                    l.difference(&ignored).cloned().collect(),
                    r.difference(&ignored).cloned().collect(),
                ),
            };
            if lk != rk {
                self.problem(format!(
                    "`{op}`: its sides carry different labels, so no series match (left: {}; right: {}); aggregate them alike or add on (...)",
                    list(&lk),
                    list(&rk)
                ));
            }
        }
        if set_op {
            return Shape::Vector(if op == "or" { both } else { l });
        }
        match &card {
            VectorMatchCardinality::ManyToMany => Shape::Vector(l),
            VectorMatchCardinality::OneToOne => Shape::Vector(match &matching {
                Some(LabelModifier::Include(on)) => {
                    l.intersection(&set(&on.labels)).cloned().collect()
                }
                Some(LabelModifier::Exclude(i)) => l.difference(&set(&i.labels)).cloned().collect(),
                None => l,
            }),
            VectorMatchCardinality::ManyToOne(include) => {
                self.require(&include.labels, &r, &format!("`{op} group_left (...)`"));
                Shape::Vector(l.union(&set(&include.labels)).cloned().collect())
            }
            VectorMatchCardinality::OneToMany(include) => {
                self.require(&include.labels, &l, &format!("`{op} group_right (...)`"));
                Shape::Vector(r.union(&set(&include.labels)).cloned().collect())
            }
        }
    }

    fn call(&mut self, c: &Call) -> Shape {
        let args: Vec<Shape> = c.args.args.iter().map(|a| self.walk(a)).collect();
        let strings: Vec<Option<String>> = c
            .args
            .args
            .iter()
            .map(|a| match a.as_ref() {
                Expr::StringLiteral(s) => Some(s.val.clone()),
                _ => None,
            })
            .collect();
        let name = c.func.name;
        let first = args
            .iter()
            .find(|a| matches!(a, Shape::Vector(_) | Shape::Matrix(_) | Shape::Unknown))
            .cloned();
        if args.contains(&Shape::Unknown) {
            return Shape::Unknown;
        }
        let have = first
            .as_ref()
            .and_then(Shape::labels)
            .cloned()
            .unwrap_or_default();
        let at = |i: usize| strings.get(i).cloned().flatten().unwrap_or_default();
        match name {
            "histogram_quantile" => {
                let mut out = have.clone();
                if !out.remove("le") {
                    self.problem(format!(
                        "histogram_quantile over series without `le` (they carry: {}): sum the `_bucket` series by (le)",
                        list(&have)
                    ));
                }
                Shape::Vector(out)
            }
            "label_replace" => {
                let source = at(3);
                if !source.is_empty() {
                    self.require(&[source], &have, "label_replace source");
                }
                let mut out = have;
                out.insert(at(1));
                Shape::Vector(out)
            }
            "label_join" => {
                let sources: Vec<String> = (3..strings.len()).map(at).collect();
                self.require(&sources, &have, "label_join source");
                let mut out = have;
                out.insert(at(1));
                Shape::Vector(out)
            }
            "sort_by_label" | "sort_by_label_desc" => {
                let labels: Vec<String> = (1..strings.len()).map(at).collect();
                self.require(&labels, &have, name);
                Shape::Vector(have)
            }
            "vector" | "absent" | "absent_over_time" => Shape::Vector(BTreeSet::new()),
            _ => match c.func.return_type {
                ValueType::Scalar => Shape::Scalar,
                ValueType::String => Shape::String,
                ValueType::Vector | ValueType::Matrix => Shape::Vector(have),
            },
        }
    }
}
