//! What a server exports, read off its `/metrics` text: every metric family with
//! its type and, from its samples, the label names it carries and the values seen.

use std::collections::{BTreeMap, BTreeSet};

/// One metric family (`# TYPE <name> <kind>`) and what its samples showed.
#[derive(Debug, Default, Clone)]
pub struct Family {
    /// `counter`, `gauge`, `histogram`, `summary`, `info`, `stateset`,
    /// `gaugehistogram` or `unknown`.
    pub kind: String,
    /// Label name -> values seen, over every sample of the family (without the
    /// `le` of buckets and the `quantile` of summaries, which only some of its
    /// series carry).
    pub labels: BTreeMap<String, BTreeSet<String>>,
    /// Samples seen.
    pub samples: usize,
}

/// A series name as Prometheus stores it, resolved to its family.
pub struct Series<'a> {
    pub family: &'a str,
    pub info: &'a Family,
    /// Labels only this series of the family carries (`le` on `_bucket`).
    pub extra: &'static [&'static str],
}

/// Every family of one or more scrapes.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    pub families: BTreeMap<String, Family>,
}

/// The series names Prometheus stores for a family of `kind`, each with the
/// labels only it carries.
fn series_of(name: &str, kind: &str) -> Vec<(String, &'static [&'static str])> {
    match kind {
        // OpenMetrics names the family without `_total`; Prometheus stores the
        // samples with it.
        "counter" if name.ends_with("_total") => vec![(name.to_string(), &[])],
        "counter" => vec![(format!("{name}_total"), &[])],
        "histogram" => vec![
            (format!("{name}_bucket"), &["le"]),
            (format!("{name}_sum"), &[]),
            (format!("{name}_count"), &[]),
        ],
        "gaugehistogram" => vec![
            (format!("{name}_gbucket"), &["le"]),
            (format!("{name}_gsum"), &[]),
            (format!("{name}_gcount"), &[]),
        ],
        "summary" => vec![
            (name.to_string(), &["quantile"]),
            (format!("{name}_sum"), &[]),
            (format!("{name}_count"), &[]),
        ],
        "info" => vec![(format!("{name}_info"), &[])],
        _ => vec![(name.to_string(), &[])],
    }
}

/// `name{k="v",...} value`: the name and the labels.
fn parse_sample(line: &str) -> Result<(String, Vec<(String, String)>), String> {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = line[..end].to_string();
    let mut labels = Vec::new();
    let mut rest = line[end..].chars().peekable();
    if rest.peek() == Some(&'{') {
        rest.next();
        loop {
            while rest.peek().is_some_and(|c| *c == ',' || *c == ' ') {
                rest.next();
            }
            match rest.peek() {
                Some('}') => break,
                None => return Err(format!("unterminated labels: {line}")),
                _ => {}
            }
            let key: String = rest.by_ref().take_while(|c| *c != '=').collect();
            if rest.next() != Some('"') {
                return Err(format!("label {key} without a quoted value: {line}"));
            }
            let mut value = String::new();
            loop {
                match rest.next() {
                    Some('\\') => match rest.next() {
                        Some('n') => value.push('\n'),
                        Some(c) => value.push(c),
                        None => return Err(format!("unterminated value: {line}")),
                    },
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("unterminated value: {line}")),
                }
            }
            labels.push((key.trim().to_string(), value));
        }
    }
    Ok((name, labels))
}

impl Catalog {
    /// Reads a Prometheus or OpenMetrics text exposition.
    pub fn parse(text: &str) -> Result<Catalog, String> {
        let mut catalog = Catalog::default();
        let mut current: Option<String> = None;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(comment) = line.strip_prefix('#') {
                let mut words = comment.split_whitespace();
                if words.next() == Some("TYPE") {
                    let name = words.next().ok_or(format!("TYPE without a name: {line}"))?;
                    let kind = words.next().unwrap_or("unknown");
                    catalog.families.entry(name.to_string()).or_default().kind = kind.to_string();
                    current = Some(name.to_string());
                }
                continue;
            }
            let (sample, labels) = parse_sample(line)?;
            // A sample belongs to the family of the TYPE line above it; one with
            // none (plain Prometheus text) is a family of its own.
            let (family, extra) = match current.as_deref().and_then(|f| {
                let kind = catalog.families[f].kind.clone();
                series_of(f, &kind)
                    .into_iter()
                    .chain([(format!("{f}_created"), &[][..])])
                    .find(|(s, _)| *s == sample)
                    .map(|(_, extra)| (f.to_string(), extra))
            }) {
                Some(found) => found,
                None => {
                    let f = catalog.families.entry(sample.clone()).or_default();
                    if f.kind.is_empty() {
                        f.kind = "unknown".into();
                    }
                    (sample.clone(), &[][..])
                }
            };
            let family = catalog
                .families
                .get_mut(&family)
                .expect("family just found");
            family.samples += 1;
            for (key, value) in labels {
                if !extra.contains(&key.as_str()) {
                    family.labels.entry(key).or_default().insert(value);
                }
            }
        }
        Ok(catalog)
    }

    /// The families of both, with the labels and values of both.
    pub fn merge(&mut self, other: Catalog) {
        for (name, family) in other.families {
            let mine = self.families.entry(name).or_default();
            if mine.kind.is_empty() {
                mine.kind = family.kind;
            }
            mine.samples += family.samples;
            for (label, values) in family.labels {
                mine.labels.entry(label).or_default().extend(values);
            }
        }
    }

    /// The family a series name (as a query writes it) belongs to.
    pub fn series(&self, name: &str) -> Option<Series<'_>> {
        self.families.iter().find_map(|(family, info)| {
            series_of(family, &info.kind)
                .into_iter()
                .find(|(s, _)| s == name)
                .map(|(_, extra)| Series {
                    family,
                    info,
                    extra,
                })
        })
    }

    /// Every series name a query may use.
    pub fn series_names(&self) -> Vec<String> {
        self.families
            .iter()
            .flat_map(|(f, info)| series_of(f, &info.kind).into_iter().map(|(s, _)| s))
            .collect()
    }
}
