//! The report's plots, drawn as SVG with plotters: each a measure over the
//! replay's time (or a distribution), one line per variant.

use super::observe::Sample;
use super::replay::ReplayResult;
use plotters::prelude::*;

/// One plot: its id in the page, its title, and the SVG.
pub struct Plot {
    /// Element id (stable, for links and tests).
    pub id: &'static str,
    /// What it shows.
    pub title: &'static str,
    /// The drawing.
    pub svg: String,
}

const SIZE: (u32, u32) = (760, 340);

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
        let series: Vec<(String, Vec<(f64, f64)>)> = variants
            .iter()
            .map(|(name, r)| {
                (
                    name.clone(),
                    r.samples
                        .iter()
                        .map(|s| (s.seconds / 3600.0, f(s)))
                        .collect(),
                )
            })
            .collect();
        plots.push(Plot {
            id,
            title,
            svg: lines(title, "hours", unit, &series)?,
        });
    }
    let mut shares: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (name, r) in variants {
        let mut by_queue: std::collections::BTreeMap<&str, Vec<(f64, f64)>> = Default::default();
        for q in &r.queue_samples {
            by_queue
                .entry(q.queue.as_str())
                .or_default()
                .push((q.seconds / 3600.0, q.share));
        }
        shares.extend(
            by_queue
                .into_iter()
                .map(|(queue, points)| (format!("{name} / {queue}"), points)),
        );
    }
    plots.push(Plot {
        id: "queue-share",
        title: "Queue share of what it deserves (1 = its deserved share)",
        svg: lines("Queue share of deserved", "hours", "share", &shares)?,
    });
    let waits: Vec<(String, Vec<(f64, f64)>)> = variants
        .iter()
        .map(|(name, r)| (name.clone(), wait_distribution(r)))
        .collect();
    plots.push(Plot {
        id: "pending-time",
        title: "Pending time of placed jobs (share placed within)",
        svg: lines(
            "Pending time of placed jobs",
            "minutes waited",
            "share of placed jobs",
            &waits,
        )?,
    });
    Ok(plots)
}

/// The share of placed jobs that waited at most x minutes, as steps.
fn wait_distribution(r: &ReplayResult) -> Vec<(f64, f64)> {
    let mut waits: Vec<f64> = r
        .jobs
        .iter()
        .filter_map(|j| j.started.map(|s| (s - j.arrived) / 60.0))
        .collect();
    waits.sort_by(f64::total_cmp);
    let n = waits.len().max(1) as f64;
    let mut points = vec![(0.0, 0.0)];
    for (i, w) in waits.iter().enumerate() {
        points.push((*w, (i + 1) as f64 / n));
    }
    points
}

fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let points = series.iter().flat_map(|(_, p)| p.iter());
        let x_max = points.clone().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
        let y_max = points.map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.05;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (name, points)) in series.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}
