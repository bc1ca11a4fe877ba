//! A line chart written as SVG by hand, so that it reads at a glance: the
//! legend sits beside the plot area, never over the lines; every axis has
//! distinct ticks, even when all values are equal; a log-scale axis for waits
//! that span seconds to days; each line and a sample of its points carry a
//! `<title>` the browser shows on hover. The output depends only on the input,
//! so reports stay byte-identical per seed.

use std::fmt::Write as _;

/// One colour per variant, fixed by its position and told apart by people
/// with the common colour-vision deficiencies (Okabe and Ito's palette).
pub const COLOURS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C6D00",
];

/// The colour of the `i`th variant.
pub fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// One line.
pub struct Series<'a> {
    /// Its name, in the legend and on hover.
    pub name: &'a str,
    /// Its colour.
    pub colour: &'a str,
    /// Its points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// How the axes read.
pub struct Axes<'a> {
    /// Below the x axis.
    pub x_label: &'a str,
    /// Beside the y axis.
    pub y_label: &'a str,
    /// The x axis in seconds on a log scale (ticks 1s, 10s, 1m, ...), values
    /// below a second drawn at a second.
    pub x_log_seconds: bool,
    /// Width and height of the whole drawing, pixels.
    pub size: (u32, u32),
}

/// Room for the y tick labels and title, the x tick labels and title, and the
/// legend to the right of the plot area.
const LEFT: f64 = 64.0;
const BOTTOM: f64 = 44.0;
const TOP: f64 = 10.0;
const LEGEND: f64 = 130.0;

/// Points with a hover title, at most, per line.
const HOVER_POINTS: usize = 120;

/// Evenly spaced ticks with round steps over `[low, high]` (widened when the
/// two are equal, so that no two ticks read the same).
fn linear_ticks(low: f64, high: f64) -> (f64, f64, Vec<f64>, usize) {
    let (low, high) = if (high - low).abs() < 1e-12 {
        if low == 0.0 {
            (0.0, 1.0)
        } else {
            (low - low.abs() * 0.5, high + high.abs() * 0.5)
        }
    } else {
        (low, high)
    };
    let raw = (high - low) / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (low / step).floor() * step;
    let last = (high / step).ceil() * step;
    let count = ((last - first) / step).round() as usize;
    let ticks = (0..=count).map(|i| first + step * i as f64).collect();
    // As many decimals as the step has, so that no two ticks read the same.
    let decimals = (0..6)
        .find(|d| {
            let scaled = step * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6
        })
        .unwrap_or(6) as usize;
    (first, last, ticks, decimals)
}

/// Ticks of a log axis of seconds, and their labels.
const LOG_TICKS: [(f64, &str); 9] = [
    (1.0, "1s"),
    (10.0, "10s"),
    (60.0, "1m"),
    (600.0, "10m"),
    (3600.0, "1h"),
    (36000.0, "10h"),
    (86400.0, "1d"),
    (864000.0, "10d"),
    (8640000.0, "100d"),
];

/// Text for SVG.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Draws the chart.
pub fn line_chart(series: &[Series], axes: &Axes) -> String {
    let (w, h) = (f64::from(axes.size.0), f64::from(axes.size.1));
    let (px0, px1, py0, py1) = (LEFT, w - LEGEND, TOP, h - BOTTOM);
    let points = || series.iter().flat_map(|s| s.points.iter());
    let fold = |f: fn(&(f64, f64)) -> f64, start: f64, pick: fn(f64, f64) -> f64| {
        points().map(f).fold(start, pick)
    };
    let (y_min, y_max) = (
        fold(|p| p.1, f64::MAX, f64::min),
        fold(|p| p.1, f64::MIN, f64::max),
    );
    let (y_min, y_max) = if y_min > y_max {
        (0.0, 1.0)
    } else {
        (y_min.min(0.0), y_max)
    };
    let (y_low, y_high, y_ticks, y_decimals) = linear_ticks(y_min, y_max);
    let (x_min, x_max) = (
        fold(|p| p.0, f64::MAX, f64::min),
        fold(|p| p.0, f64::MIN, f64::max),
    );
    let (x_min, x_max) = if x_min > x_max {
        (0.0, 1.0)
    } else {
        (x_min, x_max)
    };
    // x as drawn: a log axis from 1s to the first tick past the largest wait.
    let (x_low, x_high, x_ticks): (f64, f64, Vec<(f64, String)>) = if axes.x_log_seconds {
        let top = LOG_TICKS
            .iter()
            .position(|(s, _)| *s >= x_max.max(10.0))
            .unwrap_or(LOG_TICKS.len() - 1);
        let ticks = LOG_TICKS[..=top]
            .iter()
            .map(|(s, l)| (s.log10(), (*l).to_string()))
            .collect();
        (0.0, LOG_TICKS[top].0.log10(), ticks)
    } else {
        let (low, high, ticks, decimals) = linear_ticks(x_min.min(0.0), x_max);
        let labelled = ticks
            .into_iter()
            .map(|t| (t, format!("{t:.decimals$}")))
            .collect();
        (low, high, labelled)
    };
    let x_of = |x: f64| {
        let x = if axes.x_log_seconds {
            x.max(1.0).log10()
        } else {
            x
        };
        px0 + (x - x_low) / (x_high - x_low) * (px1 - px0)
    };
    let y_of = |y: f64| py1 - (y - y_low) / (y_high - y_low) * (py1 - py0);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r##"<rect class="plot-area" x="{px0}" y="{py0}" width="{}" height="{}" fill="#fff" stroke="#999"/>"##,
        px1 - px0,
        py1 - py0
    );
    for t in &y_ticks {
        let y = y_of(*t);
        let _ = write!(
            svg,
            r##"<line x1="{px0}" y1="{y:.1}" x2="{px1}" y2="{y:.1}" stroke="#eee"/><text class="tick y" x="{:.1}" y="{:.1}" text-anchor="end">{t:.y_decimals$}</text>"##,
            px0 - 4.0,
            y + 4.0
        );
    }
    for (t, label) in &x_ticks {
        let x = px0 + (t - x_low) / (x_high - x_low) * (px1 - px0);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{py0}" x2="{x:.1}" y2="{py1}" stroke="#eee"/><text class="tick x" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            py1 + 14.0,
            esc(label)
        );
    }
    let _ = write!(
        svg,
        r#"<text class="axis-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (px0 + px1) / 2.0,
        h - 8.0,
        esc(axes.x_label)
    );
    let _ = write!(
        svg,
        r#"<text class="axis-label" transform="translate(14,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (py0 + py1) / 2.0,
        esc(axes.y_label)
    );
    for s in series {
        let mut line = String::new();
        for (x, y) in &s.points {
            let _ = write!(line, "{:.1},{:.1} ", x_of(*x), y_of(*y));
        }
        let last = s.points.last().map_or(0.0, |p| p.1);
        let peak = s.points.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        let _ = write!(
            svg,
            r#"<polyline class="series" fill="none" stroke="{}" stroke-width="2" points="{}"><title>{}: peak {}, last {}</title></polyline>"#,
            s.colour,
            line.trim_end(),
            esc(s.name),
            value(peak),
            value(last)
        );
        let every = s.points.len().div_ceil(HOVER_POINTS).max(1);
        for (x, y) in s.points.iter().step_by(every) {
            let at = if axes.x_log_seconds {
                super::units::duration(*x)
            } else {
                value(*x)
            };
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{}" fill-opacity="0"><title>{}: {} at {at}</title></circle>"#,
                x_of(*x),
                y_of(*y),
                s.colour,
                esc(s.name),
                value(*y)
            );
        }
    }
    svg.push_str(r#"<g class="legend">"#);
    for (i, s) in series.iter().enumerate() {
        let y = py0 + 12.0 + 18.0 * i as f64;
        let x = px1 + 12.0;
        let _ = write!(
            svg,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="3"/><text x="{}" y="{:.1}">{}</text>"#,
            x + 18.0,
            s.colour,
            x + 24.0,
            y + 4.0,
            esc(s.name)
        );
    }
    svg.push_str("</g></svg>");
    svg
}

/// A value on hover: as many digits as matter.
fn value(v: f64) -> String {
    super::units::amount((v * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks_of(svg: &str, axis: &str) -> Vec<String> {
        svg.split(&format!("class=\"tick {axis}\""))
            .skip(1)
            .map(|rest| rest[rest.find('>').unwrap() + 1..rest.find('<').unwrap()].to_string())
            .collect()
    }

    #[test]
    fn equal_values_still_get_distinct_ticks() {
        for v in [0.0, 0.616, 6088.0] {
            let svg = line_chart(
                &[Series {
                    name: "a",
                    colour: colour(0),
                    points: vec![(0.0, v), (0.0, v)],
                }],
                &Axes {
                    x_label: "h",
                    y_label: "v",
                    x_log_seconds: false,
                    size: (400, 200),
                },
            );
            for axis in ["x", "y"] {
                let ticks = ticks_of(&svg, axis);
                let mut distinct = ticks.clone();
                distinct.dedup();
                assert!(
                    ticks.len() >= 2 && distinct.len() == ticks.len(),
                    "{v} {axis}: {ticks:?}"
                );
            }
        }
    }

    #[test]
    fn a_log_axis_of_waits_reads_in_seconds_to_days() {
        let svg = line_chart(
            &[Series {
                name: "a",
                colour: colour(0),
                points: vec![(0.0, 0.5), (75_000.0, 0.9)],
            }],
            &Axes {
                x_label: "waited",
                y_label: "share",
                x_log_seconds: true,
                size: (400, 200),
            },
        );
        assert_eq!(
            ticks_of(&svg, "x"),
            ["1s", "10s", "1m", "10m", "1h", "10h", "1d"]
        );
    }
}
