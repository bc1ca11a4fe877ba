//! The report's plots: each a measure over the replay's time (or a
//! distribution), one line per variant in that variant's fixed colour, drawn
//! by [`svg_chart`](super::svg_chart). Queue shares get one small panel per
//! queue rather than one line per variant and queue in a single tangle.

use super::observe::Sample;
use super::replay::ReplayResult;
use super::svg_chart::{Axes, Series, colour, line_chart};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One plot: its id in the page, its title, and the drawing (one or more SVGs).
pub struct Plot {
    /// Element id (stable, for links and tests).
    pub id: &'static str,
    /// What it shows.
    pub title: &'static str,
    /// The drawing.
    pub svg: String,
}

const SIZE: (u32, u32) = (760, 320);
const PANEL: (u32, u32) = (480, 220);

/// A measure of the samples.
type OfSample = fn(&Sample) -> f64;

/// Every plot of the report.
pub fn draw(variants: &[(String, &ReplayResult)]) -> Result<Vec<Plot>, String> {
    let over_time: [(&'static str, &'static str, &'static str, OfSample); 5] = [
        ("memory", "GPU memory in use", "% of all GPU memory", |s| {
            s.memory_percent
        }),
        (
            "compute",
            "GPU compute in use",
            "% of all GPU compute",
            |s| s.compute_percent,
        ),
        (
            "partly-used",
            "Partly used cards (fragmentation)",
            "cards",
            |s| s.partly_used_cards as f64,
        ),
        (
            "largest-request",
            "Largest whole-card request that still fits anywhere",
            "cards on one node",
            |s| s.largest_whole_card_request as f64,
        ),
        ("pending", "Pods waiting for a node", "pods", |s| {
            s.pending_pods as f64
        }),
    ];
    let mut plots = Vec::new();
    for (id, title, unit, f) in over_time {
        let series: Vec<Series> = variants
            .iter()
            .enumerate()
            .map(|(i, (name, r))| Series {
                name,
                colour: colour(i),
                points: r
                    .samples
                    .iter()
                    .map(|s| (s.seconds / 3600.0, f(s)))
                    .collect(),
            })
            .collect();
        plots.push(Plot {
            id,
            title,
            svg: line_chart(&series, &axes("hours", unit, false, SIZE)),
        });
    }
    plots.push(Plot {
        id: "queue-share",
        title: "Queue share of what it deserves, one panel per queue (1 = its deserved share)",
        svg: queue_panels(variants),
    });
    let waits: Vec<Series> = variants
        .iter()
        .enumerate()
        .map(|(i, (name, r))| Series {
            name,
            colour: colour(i),
            points: wait_distribution(r),
        })
        .collect();
    plots.push(Plot {
        id: "pending-time",
        title: "Share of all jobs started within a wait (log scale; a line ending below 1 has jobs never placed)",
        svg: line_chart(
            &waits,
            &axes("waited before starting", "share of all jobs", true, SIZE),
        ),
    });
    Ok(plots)
}

fn axes<'a>(x: &'a str, y: &'a str, log: bool, size: (u32, u32)) -> Axes<'a> {
    Axes {
        x_label: x,
        y_label: y,
        x_log_seconds: log,
        size,
    }
}

/// One small chart per queue, each variant in its colour.
fn queue_panels(variants: &[(String, &ReplayResult)]) -> String {
    let mut queues: BTreeMap<&str, Vec<Series>> = BTreeMap::new();
    for (i, (name, r)) in variants.iter().enumerate() {
        let mut by_queue: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for q in &r.queue_samples {
            by_queue
                .entry(q.queue.as_str())
                .or_default()
                .push((q.seconds / 3600.0, q.share));
        }
        for (queue, points) in by_queue {
            queues.entry(queue).or_default().push(Series {
                name,
                colour: colour(i),
                points,
            });
        }
    }
    if queues.is_empty() {
        return "<p class=\"no-data\">No queue was planned in this replay (gang scheduling off, or no gang or queue pods).</p>".into();
    }
    let mut html = String::from("<div class=\"panels\">");
    for (queue, series) in queues {
        let _ = write!(
            html,
            "<div class=\"panel\"><div class=\"panel-title\">queue {}</div>{}</div>",
            queue.replace('&', "&amp;").replace('<', "&lt;"),
            line_chart(&series, &axes("hours", "share", false, PANEL))
        );
    }
    html.push_str("</div>");
    html
}

/// The share of all jobs that started within x seconds of arriving, as
/// steps: jobs never placed never count, so their line ends below 1.
fn wait_distribution(r: &ReplayResult) -> Vec<(f64, f64)> {
    let mut waits: Vec<f64> = r
        .jobs
        .iter()
        .filter_map(|j| j.started.map(|s| s - j.arrived))
        .collect();
    waits.sort_by(f64::total_cmp);
    let n = r.jobs.len().max(1) as f64;
    let mut points = vec![(0.0, 0.0)];
    let mut placed = 0.0;
    for (i, w) in waits.iter().enumerate() {
        // One step per distinct wait.
        if waits.get(i + 1) == Some(w) {
            continue;
        }
        points.push((*w, placed / n));
        placed = (i + 1) as f64;
        points.push((*w, placed / n));
    }
    points.push((r.seconds.max(1.0), placed / n));
    points
}
