//! The report directory: `index.html` (one self-contained page: the plots as
//! inline SVG, side by side variants, a summary table saying which variant wins
//! on what), `summary.json`, and CSVs for notebooks (`samples.csv`, `jobs.csv`,
//! `bindings.csv`, `queues.csv`).

use super::plots::Plot;
use super::replay::ReplayResult;
use super::summary::{Percentiles, Summary};
use std::fmt::Write as _;
use std::path::Path;

/// Writes the report into `dir` (created if missing).
pub fn write(
    dir: &Path,
    summary: &Summary,
    replays: &[(String, &ReplayResult)],
    plots: &[Plot],
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let put = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))
    };
    let json = serde_json::to_string_pretty(summary).map_err(|e| e.to_string())?;
    put("summary.json", json + "\n")?;
    put("samples.csv", samples_csv(replays))?;
    put("jobs.csv", jobs_csv(replays))?;
    put("bindings.csv", bindings_csv(replays))?;
    put("queues.csv", queues_csv(replays))?;
    put("index.html", page(summary, plots))
}

fn samples_csv(replays: &[(String, &ReplayResult)]) -> String {
    let mut out = String::from(
        "variant,seconds,memory_percent,compute_percent,partly_used_cards,idle_cards,largest_whole_card_request,largest_slice_mib,pending_pods\n",
    );
    for (name, r) in replays {
        for s in &r.samples {
            let _ = writeln!(
                out,
                "{},{},{:.4},{:.4},{},{},{},{},{}",
                csv(name),
                s.seconds,
                s.memory_percent,
                s.compute_percent,
                s.partly_used_cards,
                s.idle_cards,
                s.largest_whole_card_request,
                s.largest_slice_mib,
                s.pending_pods
            );
        }
    }
    out
}

fn queues_csv(replays: &[(String, &ReplayResult)]) -> String {
    let mut out = String::from("variant,seconds,queue,allocated_gpus,deserved_gpus,share\n");
    for (name, r) in replays {
        for q in &r.queue_samples {
            let deserved = q.deserved_gpus.map(|d| d.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "{},{},{},{},{deserved},{:.6}",
                csv(name),
                q.seconds,
                csv(&q.queue),
                q.allocated_gpus,
                q.share
            );
        }
    }
    out
}

fn jobs_csv(replays: &[(String, &ReplayResult)]) -> String {
    let mut out = String::from(
        "variant,job,queue,vgpus,gang,arrived_seconds,started_seconds,pending_seconds,evictions,reason\n",
    );
    for (name, r) in replays {
        for j in &r.jobs {
            let started = j.started.map(|s| s.to_string()).unwrap_or_default();
            let waited = j
                .started
                .map(|s| (s - j.arrived).to_string())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{started},{waited},{},{}",
                csv(name),
                csv(&j.name),
                csv(&j.queue),
                j.gpus,
                j.gang,
                j.arrived,
                j.evictions,
                csv(j.reason.as_deref().unwrap_or_default())
            );
        }
    }
    out
}

/// Where each pod was bound, in the order of the binds: to set a replay
/// against a recorded trace, or two variants against each other pod by pod.
fn bindings_csv(replays: &[(String, &ReplayResult)]) -> String {
    let mut out = String::from("variant,seconds,pod,node,devices\n");
    for (name, r) in replays {
        for b in &r.bindings {
            let _ = writeln!(
                out,
                "{},{},{},{},{}",
                csv(name),
                b.seconds,
                csv(&b.pod),
                csv(&b.node),
                csv(&b.devices)
            );
        }
    }
    out
}

/// A CSV field, quoted when it needs to be.
fn csv(field: &str) -> String {
    if field.contains([',', '"', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// Text for HTML.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn seconds(p: &Percentiles) -> String {
    if p.count == 0 {
        return "–".into();
    }
    format!("{} / {} / {}", human(p.p50), human(p.p95), human(p.p99))
}

fn human(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0}s")
    } else if s < 7200.0 {
        format!("{:.1}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

fn page(summary: &Summary, plots: &[Plot]) -> String {
    let mut html = String::new();
    html.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>vgpu-scheduler simulation</title>\n<style>\
body{font-family:sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}\
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
th:first-child,td:first-child{text-align:left}\
.plots{display:flex;flex-wrap:wrap;gap:16px}\
.plot{border:1px solid #ddd;padding:4px}\
.win{font-weight:bold}\
</style></head><body>\n<h1>vgpu-scheduler simulation</h1>\n",
    );
    let _ = writeln!(
        html,
        "<p>Seed {}; {} variant(s). Pending times are p50 / p95 / p99.</p>",
        summary.seed,
        summary.variants.len()
    );
    html.push_str("<h2>Who wins on what</h2>\n<table id=\"winners\"><tr><th>measure</th><th>variant</th></tr>\n");
    for (measure, variant) in &summary.winners {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"win\">{}</td></tr>",
            esc(measure),
            esc(variant)
        );
    }
    html.push_str("</table>\n<h2>Variants</h2>\n<table id=\"summary\"><tr><th>variant</th><th>flags</th><th>jobs</th><th>placed</th><th>pending</th><th>gang wait</th><th>GPU memory in use (mean / peak)</th><th>partly used cards (mean)</th><th>largest whole-card request (mean)</th><th>pods evicted</th></tr>\n");
    for v in &summary.variants {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}% / {:.1}%</td><td>{:.1}</td><td>{:.1}</td><td>{}</td></tr>",
            esc(&v.name),
            esc(&v.flags),
            v.jobs,
            v.placed,
            seconds(&v.pending_seconds),
            seconds(&v.gang_wait_seconds),
            v.memory_percent.mean,
            v.memory_percent.peak,
            v.partly_used_cards.mean,
            v.largest_whole_card_request.mean,
            v.pod_evictions
        );
    }
    html.push_str("</table>\n<h2>Pending time by queue and by job size</h2>\n<table id=\"pending\"><tr><th>variant</th><th>group</th><th>jobs placed</th><th>p50 / p95 / p99</th></tr>\n");
    for v in &summary.variants {
        let groups = v
            .pending_seconds_by_queue
            .iter()
            .map(|(q, p)| (format!("queue {q}"), p))
            .chain(
                v.pending_seconds_by_size
                    .iter()
                    .map(|(s, p)| (s.clone(), p)),
            );
        for (group, p) in groups {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&v.name),
                esc(&group),
                p.count,
                seconds(p)
            );
        }
    }
    html.push_str("</table>\n<h2>Queues: held against deserved (vGPUs, means over the replay)</h2>\n<table id=\"queues\"><tr><th>variant</th><th>queue</th><th>held</th><th>deserved</th><th>share (mean / peak)</th></tr>\n");
    for v in &summary.variants {
        for (queue, q) in &v.queues {
            let deserved = q
                .deserved_gpus
                .map_or_else(|| "–".to_string(), |d| format!("{d:.1}"));
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{deserved}</td><td>{:.2} / {:.2}</td></tr>",
                esc(&v.name),
                esc(queue),
                q.allocated_gpus,
                q.share.mean,
                q.share.peak
            );
        }
    }
    html.push_str("</table>\n");
    let never: Vec<_> = summary
        .variants
        .iter()
        .flat_map(|v| v.never_placed.iter().map(move |(r, n)| (&v.name, r, n)))
        .collect();
    if !never.is_empty() {
        html.push_str("<h2>Jobs never placed, and why</h2>\n<table id=\"never-placed\"><tr><th>variant</th><th>reason</th><th>jobs</th></tr>\n");
        for (v, reason, n) in never {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td style=\"text-align:left\">{}</td><td>{n}</td></tr>",
                esc(v),
                esc(reason)
            );
        }
        html.push_str("</table>\n");
    }
    html.push_str("<h2>Over time</h2>\n<div class=\"plots\">\n");
    for plot in plots {
        let _ = writeln!(
            html,
            "<figure class=\"plot\" id=\"plot-{}\"><figcaption>{}</figcaption>{}</figure>",
            plot.id,
            esc(plot.title),
            plot.svg
        );
    }
    html.push_str("</div>\n<p>Data: <a href=\"summary.json\">summary.json</a>, <a href=\"samples.csv\">samples.csv</a>, <a href=\"jobs.csv\">jobs.csv</a>, <a href=\"bindings.csv\">bindings.csv</a>, <a href=\"queues.csv\">queues.csv</a>.</p>\n</body></html>\n");
    html
}
