//! Which variant to choose, and by how much: each measure with its best
//! variant(s) and the margin to the runner-up, ties named as ties, and one
//! paragraph that says which variant delivered the most work and which
//! workload line fared worst under each variant. Work delivered comes first:
//! a policy that keeps more memory handed out while running fewer jobs has not
//! done better.

use super::breakdown::LineFigures;
use super::summary::VariantSummary;
use super::units::{amount, duration, duration_range};
use serde::Serialize;

/// How a measure is read: what it is called, how it is computed, whether more
/// is better, how close two values may be and still tie (a share of the
/// larger), and how it is written.
struct Measure {
    name: &'static str,
    value: fn(&VariantSummary) -> f64,
    higher_is_better: bool,
    tie_within: f64,
    show: fn(f64) -> String,
}

fn show_hours(v: f64) -> String {
    format!("{} h", amount(v))
}

fn show_percent(v: f64) -> String {
    format!("{v:.1}%")
}

/// The measures, in the order the verdict weighs them.
const MEASURES: [Measure; 11] = [
    Measure {
        name: "most work delivered (card-hours)",
        value: |v| v.work.card_hours,
        higher_is_better: true,
        tie_within: 0.01,
        show: show_hours,
    },
    Measure {
        name: "most jobs placed",
        value: |v| v.placed as f64,
        higher_is_better: true,
        tie_within: 0.0,
        show: amount,
    },
    Measure {
        name: "shortest wait of the worst-off line (p95, never-placed jobs counted)",
        value: |v| v.worst_off.as_ref().map_or(0.0, |l| l.waits.p95),
        higher_is_better: false,
        tie_within: 0.01,
        show: duration,
    },
    Measure {
        name: "most demand met",
        value: |v| v.demand_met_percent,
        higher_is_better: true,
        tie_within: 0.005,
        show: show_percent,
    },
    Measure {
        name: "most vGPU-hours delivered",
        value: |v| v.work.vgpu_hours,
        higher_is_better: true,
        tie_within: 0.01,
        show: show_hours,
    },
    Measure {
        name: "most compute delivered (card-hours)",
        value: |v| v.work.compute_card_hours,
        higher_is_better: true,
        tie_within: 0.01,
        show: show_hours,
    },
    Measure {
        name: "shortest p95 pending time",
        value: |v| v.pending_seconds.p95,
        higher_is_better: false,
        tie_within: 0.01,
        show: duration,
    },
    Measure {
        name: "shortest p95 gang wait",
        value: |v| v.gang_wait_seconds.p95,
        higher_is_better: false,
        tie_within: 0.01,
        show: duration,
    },
    Measure {
        name: "fewest partly used cards (mean)",
        value: |v| v.partly_used_cards.mean,
        higher_is_better: false,
        tie_within: 0.01,
        show: amount,
    },
    Measure {
        name: "largest whole-card request that fits (mean)",
        value: |v| v.largest_whole_card_request.mean,
        higher_is_better: true,
        tie_within: 0.01,
        show: amount,
    },
    Measure {
        name: "fewest pod evictions",
        value: |v| v.pod_evictions as f64,
        higher_is_better: false,
        tie_within: 0.0,
        show: amount,
    },
];

/// The measures the verdict decides on, in order, before the rest are only
/// reported: work, jobs placed, the worst-off line.
const DECIDING: usize = 3;

/// One measure across the variants.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Standing {
    /// The measure.
    pub measure: String,
    /// The best variant, or every variant tied for best.
    pub best: Vec<String>,
    /// Whether more than one variant is best.
    pub tie: bool,
    /// The best value, as written.
    pub value: String,
    /// The runner-up and its value, as written (none when all tie).
    pub runner_up: Option<(String, String)>,
    /// How much better the best is than the runner-up, percent of the
    /// runner-up's value (none when all tie or the runner-up is 0).
    pub margin_percent: Option<f64>,
}

impl Standing {
    /// `binpack (1234 h; spread 1120 h, 10.2% behind)` or `tie: a, b (6088)`.
    pub fn describe(&self) -> String {
        if self.tie {
            return format!("tie: {} ({})", self.best.join(", "), self.value);
        }
        let best = self.best.join(", ");
        match (&self.runner_up, self.margin_percent) {
            (Some((name, value)), Some(m)) => {
                format!("{best} ({}; {name} {value}, {m:.1}% behind)", self.value)
            }
            (Some((name, value)), None) => format!("{best} ({}; {name} {value})", self.value),
            (None, _) => format!("{best} ({})", self.value),
        }
    }
}

/// Whether two values of a measure tie.
fn ties(m: &Measure, a: f64, b: f64) -> bool {
    (a - b).abs() <= m.tie_within * a.abs().max(b.abs()) + 1e-9
}

/// Whether `a` is better than `b` by more than a tie.
fn better(m: &Measure, a: f64, b: f64) -> bool {
    !ties(m, a, b) && ((a > b) == m.higher_is_better)
}

/// The variants best on `m` among `among` (indexes into `variants`).
fn best_of(m: &Measure, variants: &[VariantSummary], among: &[usize]) -> Vec<usize> {
    let value = |i: usize| (m.value)(&variants[i]);
    let Some(top) = among
        .iter()
        .copied()
        .reduce(|a, b| if better(m, value(b), value(a)) { b } else { a })
    else {
        return Vec::new();
    };
    among
        .iter()
        .copied()
        .filter(|&i| ties(m, value(i), value(top)))
        .collect()
}

/// Every measure's standing.
pub fn standings(variants: &[VariantSummary]) -> Vec<Standing> {
    let all: Vec<usize> = (0..variants.len()).collect();
    MEASURES
        .iter()
        .filter(|_| !variants.is_empty())
        .map(|m| {
            let best = best_of(m, variants, &all);
            let rest: Vec<usize> = all.iter().copied().filter(|i| !best.contains(i)).collect();
            let runner = best_of(m, variants, &rest).first().copied();
            let top = (m.value)(&variants[best[0]]);
            let margin = runner.and_then(|r| {
                let v = (m.value)(&variants[r]);
                (v.abs() > 1e-9).then(|| ((top - v) / v * 100.0).abs())
            });
            Standing {
                measure: m.name.to_string(),
                best: best.iter().map(|&i| variants[i].name.clone()).collect(),
                tie: best.len() > 1,
                value: (m.show)(top),
                runner_up: runner
                    .map(|r| (variants[r].name.clone(), (m.show)((m.value)(&variants[r])))),
                margin_percent: margin.map(|m| (m * 10.0).round() / 10.0),
            }
        })
        .collect()
}

/// `a`, `a and b`, `a, b and c`.
fn names(list: &[&str]) -> String {
    match list {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The line that fared worst: the longest p95 wait (never-placed jobs counted
/// until the end), then the most jobs never placed; none when no job waited.
pub fn worst_off(lines: &[LineFigures]) -> Option<&LineFigures> {
    lines.iter().filter(|l| l.waited > 0).reduce(|worst, l| {
        let key = |l: &LineFigures| (l.waits.p95, l.never_placed, l.waits.p99);
        if key(l) > key(worst) { l } else { worst }
    })
}

/// What the worst-off line went through, in a sentence.
pub fn starvation(line: &LineFigures) -> String {
    let (low, high) = line.waited_range.unwrap_or_default();
    let mut text = format!(
        "{} of {} jobs of {} in queue {} waited {}",
        line.waited,
        line.jobs,
        line.line,
        line.queue,
        duration_range(low, high)
    );
    if line.never_placed > 0 {
        text.push_str(&format!(", {} of them never placed", line.never_placed));
    }
    match (&line.explanation, &line.reason) {
        (Some(why), Some(reason)) => text.push_str(&format!(": {why} ({reason})")),
        (Some(why), None) => text.push_str(&format!(": {why}")),
        (None, Some(reason)) => text.push_str(&format!(": {reason}")),
        (None, None) => {}
    }
    text
}

/// The verdict: which variant to choose and why, with margins; ties said as
/// ties; the worst-off line of each variant named.
pub fn verdict(variants: &[VariantSummary]) -> String {
    let mut text = String::new();
    let all: Vec<usize> = (0..variants.len()).collect();
    match variants {
        [] => return "No variant was replayed.".into(),
        [only] => text.push_str(&format!(
            "{} delivered {} card-hours of GPU ({} vGPU-hours, {:.1}% of the demand) and placed {} of {} jobs.",
            only.name,
            amount(only.work.card_hours),
            amount(only.work.vgpu_hours),
            only.demand_met_percent,
            only.placed,
            only.jobs
        )),
        _ => {
            let mut candidates = all.clone();
            let mut said = Vec::new();
            for m in MEASURES.iter().take(DECIDING) {
                let best = best_of(m, variants, &candidates);
                let named: Vec<&str> = best.iter().map(|&i| variants[i].name.as_str()).collect();
                let value = (m.show)((m.value)(&variants[best[0]]));
                if best.len() == candidates.len() {
                    said.push(format!("{} tie on {} ({value})", names(&named), m.name));
                    continue;
                }
                let rest: Vec<usize> =
                    candidates.iter().copied().filter(|i| !best.contains(i)).collect();
                let runner = best_of(m, variants, &rest)[0];
                let runner_value = (m.value)(&variants[runner]);
                let margin = if runner_value.abs() > 1e-9 {
                    let top = (m.value)(&variants[best[0]]);
                    format!(", {:.1}% {}", ((top - runner_value) / runner_value * 100.0).abs(),
                        if m.higher_is_better { "more" } else { "less" })
                } else {
                    String::new()
                };
                said.push(format!(
                    "{} leads on {}: {value} against {} for {}{margin}",
                    names(&named),
                    m.name,
                    (m.show)(runner_value),
                    variants[runner].name
                ));
                candidates = best;
                if candidates.len() == 1 {
                    break;
                }
            }
            let chosen: Vec<&str> = candidates.iter().map(|&i| variants[i].name.as_str()).collect();
            if candidates.len() == 1 {
                text.push_str(&format!("Choose {}: {}.", chosen[0], said.join("; ")));
            } else {
                text.push_str(&format!(
                    "No clear choice: {}, so {} are a tie on what the verdict weighs (work, jobs placed, the worst-off line).",
                    said.join("; "),
                    names(&chosen)
                ));
            }
        }
    }
    for v in variants {
        match &v.worst_off {
            Some(line) => text.push_str(&format!(
                " Worst off under {}: {}.",
                v.name,
                starvation(line)
            )),
            None => text.push_str(&format!(
                " Under {} no job waited more than a minute.",
                v.name
            )),
        }
    }
    text
}
