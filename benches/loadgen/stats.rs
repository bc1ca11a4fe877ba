//! Latency statistics: exact quantiles of client-side samples, and quantiles read off
//! the server's Prometheus histogram.

use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Sorted latency samples, seconds.
#[derive(Debug, Default)]
pub struct Samples(Vec<f64>);

impl Samples {
    /// Sorts `samples`.
    pub fn new(mut samples: Vec<f64>) -> Self {
        samples.sort_by(f64::total_cmp);
        Samples(samples)
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Nearest-rank quantile, seconds.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.0.is_empty() {
            return None;
        }
        let rank = (q * self.0.len() as f64).ceil() as usize;
        Some(self.0[rank.clamp(1, self.0.len()) - 1])
    }

    /// `{"n", "p50", "p99", "p999", "max"}` in milliseconds.
    pub fn summary(&self) -> Value {
        json!({
            "n": self.len(),
            "p50": ms(self.quantile(0.50)),
            "p99": ms(self.quantile(0.99)),
            "p999": ms(self.quantile(0.999)),
            "max": ms(self.quantile(1.0)),
        })
    }
}

/// Seconds to milliseconds rounded to the microsecond (JSON null when absent).
pub fn ms(seconds: Option<f64>) -> Value {
    seconds.map_or(Value::Null, |s| json!((s * 1e6).round() / 1e3))
}

/// Milliseconds for the text report.
pub fn ms_text(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "-".into(), |s| format!("{:.3}", s * 1e3))
}

/// One verb's histogram: `(upper bound, cumulative count)` by increasing bound.
#[derive(Debug, Default)]
pub struct Histogram(Vec<(f64, f64)>);

impl Histogram {
    /// Total observations.
    pub fn count(&self) -> f64 {
        self.0.last().map_or(0.0, |&(_, c)| c)
    }

    /// Upper bound of the bucket holding quantile `q`; `None` without observations,
    /// infinite when it falls in the `+Inf` bucket.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total <= 0.0 {
            return None;
        }
        let rank = (q * total).ceil().max(1.0);
        self.0
            .iter()
            .find(|&&(_, cumulative)| cumulative >= rank)
            .map(|&(le, _)| le)
    }
}

fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let len = labels[start..].find('"')?;
    Some(&labels[start..start + len])
}

/// Parses the `<metric>_bucket{verb=..,le=..}` lines of a Prometheus/OpenMetrics
/// text into one histogram per verb.
pub fn parse_histograms(text: &str, metric: &str) -> BTreeMap<String, Histogram> {
    let prefix = format!("{metric}_bucket{{");
    let mut out: BTreeMap<String, Histogram> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        let (Some(verb), Some(le)) = (label(labels, "verb"), label(labels, "le")) else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            match le.parse() {
                Ok(v) => v,
                Err(_) => continue,
            }
        };
        let Some(Ok(count)) = value.split_whitespace().next().map(str::parse::<f64>) else {
            continue;
        };
        out.entry(verb.to_string()).or_default().0.push((le, count));
    }
    for h in out.values_mut() {
        h.0.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Checks the quantile arithmetic (a harness-less bench has no `#[test]`; this runs
/// at the start of every run instead).
pub fn self_check() {
    {
        let s = Samples::new((1..=1000).rev().map(f64::from).collect());
        assert_eq!(s.quantile(0.5), Some(500.0));
        assert_eq!(s.quantile(0.99), Some(990.0));
        assert_eq!(s.quantile(0.999), Some(999.0));
        assert_eq!(s.quantile(1.0), Some(1000.0));
        assert_eq!(Samples::new(vec![]).quantile(0.5), None);
    }
    {
        let text = "# TYPE x histogram\n\
            x_bucket{verb=\"filter\",le=\"0.001\"} 50\n\
            x_bucket{verb=\"filter\",le=\"0.002\"} 99\n\
            x_bucket{verb=\"filter\",le=\"+Inf\"} 100\n\
            x_count{verb=\"filter\"} 100\n";
        let h = parse_histograms(text, "x");
        let f = &h["filter"];
        assert_eq!(f.count(), 100.0);
        assert_eq!(f.quantile(0.5), Some(0.001));
        assert_eq!(f.quantile(0.99), Some(0.002));
        assert_eq!(f.quantile(0.999), Some(f64::INFINITY));
    }
}
