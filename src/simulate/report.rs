//! The report directory: `index.html` (one self-contained page: the plots as
//! inline SVG, side by side variants, a summary table saying which variant wins
//! on what), `summary.json`, and CSVs for notebooks (`samples.csv`, `jobs.csv`,
//! `bindings.csv`, `queues.csv`).

use super::plots::Plot;
use super::replay::ReplayResult;
use super::summary::{Percentiles, Summary};
use super::units::{amount, duration, duration_range};
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
    format!(
        "{} / {} / {}",
        duration(p.p50),
        duration(p.p95),
        duration(p.p99)
    )
}

/// What kept a line's jobs waiting, then the reason they were last given.
fn why_they_waited(l: &super::breakdown::LineFigures) -> String {
    let said: Vec<&str> = [l.explanation.as_deref(), l.reason.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    if said.is_empty() {
        "–".into()
    } else {
        said.join("; ")
    }
}

/// A table: its id, its header cells, then rows of cells (already escaped).
fn table(html: &mut String, id: &str, header: &[&str], rows: &[Vec<String>]) {
    let _ = write!(html, "<table id=\"{id}\"><tr>");
    for h in header {
        let _ = write!(html, "<th>{}</th>", esc(h));
    }
    html.push_str("</tr>\n");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{cell}</td>");
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
}

fn page(summary: &Summary, plots: &[Plot]) -> String {
    let mut html = String::new();
    html.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>vgpu-scheduler simulation</title>\n<style>\
body{font-family:sans-serif;margin:2em;color:#222;max-width:1600px}\
table{border-collapse:collapse;margin:1em 0}\
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
th:first-child,td:first-child{text-align:left}\
td:has(> .text){text-align:left}\
#verdict{font-size:1.1em;line-height:1.5;max-width:70em;background:#f4f6fa;padding:0.8em 1em;border-left:4px solid #2c6fbb}\
#inputs td{text-align:left}\
.plots{display:flex;flex-wrap:wrap;gap:16px}\
.plot{border:1px solid #ddd;padding:4px;margin:0}\
.plot figcaption{font-weight:bold;margin:2px 4px}\
.tie{font-style:italic}\
.panels{display:flex;flex-wrap:wrap;gap:8px}\
.panel-title{font-size:0.9em;margin:2px 4px}\
</style></head><body>\n<h1>vgpu-scheduler simulation</h1>\n",
    );
    let i = &summary.inputs;
    let inputs = [
        ("cluster", &i.cluster),
        ("workload", &i.workload),
        ("horizon", &i.horizon),
        ("sampled every", &i.sample_every),
        ("version", &i.version),
    ];
    let mut rows: Vec<Vec<String>> = inputs.iter().map(|(k, v)| vec![esc(k), esc(v)]).collect();
    rows.push(vec!["seed".into(), summary.seed.to_string()]);
    table(&mut html, "inputs", &["replayed", ""], &rows);
    let _ = writeln!(html, "<p id=\"verdict\">{}</p>", esc(&summary.verdict));
    html.push_str("<h2>Measure by measure</h2>\n");
    let rows: Vec<Vec<String>> = summary
        .standings
        .iter()
        .map(|s| {
            let best = if s.tie {
                format!(
                    "<span class=\"tie\">tie: {}</span>",
                    esc(&s.best.join(", "))
                )
            } else {
                format!("<b>{}</b>", esc(&s.best.join(", ")))
            };
            let runner = s
                .runner_up
                .as_ref()
                .map_or_else(|| "–".into(), |(n, v)| format!("{} ({})", esc(n), esc(v)));
            let margin = s
                .margin_percent
                .map_or_else(|| "–".into(), |m| format!("{m:.1}%"));
            vec![esc(&s.measure), best, esc(&s.value), runner, margin]
        })
        .collect();
    table(
        &mut html,
        "standings",
        &["measure", "best", "its value", "runner-up", "margin"],
        &rows,
    );
    html.push_str("<h2>Variants</h2>\n");
    let rows: Vec<Vec<String>> = summary
        .variants
        .iter()
        .map(|v| {
            vec![
                esc(&v.name),
                esc(&v.flags),
                v.jobs.to_string(),
                v.placed.to_string(),
                amount(v.work.card_hours),
                amount(v.work.vgpu_hours),
                amount(v.work.compute_card_hours),
                amount(v.work.memory_gib_hours),
                format!("{:.1}%", v.demand_met_percent),
                seconds(&v.pending_seconds),
                seconds(&v.gang_wait_seconds),
                format!(
                    "{:.1}% / {:.1}%",
                    v.memory_percent.mean, v.memory_percent.peak
                ),
                format!("{:.1}", v.partly_used_cards.mean),
                format!("{:.1}", v.largest_whole_card_request.mean),
                v.pod_evictions.to_string(),
            ]
        })
        .collect();
    table(
        &mut html,
        "summary",
        &[
            "variant",
            "flags",
            "jobs",
            "placed",
            "card-hours delivered",
            "vGPU-hours",
            "compute card-hours",
            "memory GiB-hours",
            "demand met",
            "pending (placed jobs)",
            "gang wait",
            "GPU memory in use (mean / peak)",
            "partly used cards (mean)",
            "largest whole-card request (mean)",
            "pods evicted",
        ],
        &rows,
    );
    html.push_str("<h2>By workload line</h2>\n<p>Waits count a job never placed until the replay ended; “waited” counts jobs that waited more than a minute.</p>\n");
    let mut rows = Vec::new();
    for v in &summary.variants {
        for l in &v.lines {
            let range = l
                .waited_range
                .map_or_else(|| "–".into(), |(a, b)| duration_range(a, b));
            rows.push(vec![
                esc(&v.name),
                esc(&l.line),
                esc(&l.queue),
                l.jobs.to_string(),
                l.never_placed.to_string(),
                seconds(&l.waits),
                l.waited.to_string(),
                range,
                amount(l.work.card_hours),
                amount(l.demand_vgpu_hours),
                format!("<span class=\"text\">{}</span>", esc(&why_they_waited(l))),
            ]);
        }
    }
    table(
        &mut html,
        "lines",
        &[
            "variant",
            "line",
            "queue",
            "jobs",
            "never placed",
            "wait p50 / p95 / p99",
            "waited",
            "their waits",
            "card-hours delivered",
            "vGPU-hours asked",
            "why they waited",
        ],
        &rows,
    );
    html.push_str("<h2>By GPU model</h2>\n");
    let mut rows = Vec::new();
    for v in &summary.variants {
        for (model, m) in &v.models {
            rows.push(vec![
                esc(&v.name),
                esc(model),
                m.cards.to_string(),
                format!("{:.1}%", m.memory_percent),
                format!("{:.1}%", m.compute_percent),
                format!(
                    "{:.1} / {}",
                    m.largest_free_block_mean, m.largest_free_block_least
                ),
                amount(m.work.card_hours),
            ]);
        }
    }
    table(
        &mut html,
        "models",
        &[
            "variant",
            "model",
            "cards",
            "memory in use (mean)",
            "compute in use (mean)",
            "largest free block, cards on one node (mean / least)",
            "card-hours delivered",
        ],
        &rows,
    );
    html.push_str("<h2>Pending time by queue and by job size</h2>\n");
    let mut rows = Vec::new();
    for v in &summary.variants {
        let groups = v
            .pending_seconds_by_queue
            .iter()
            .map(|(q, p)| (format!("queue {q}"), p))
            .chain(
                v.pending_seconds_by_size
                    .iter()
                    .map(|s| (s.size.clone(), &s.pending)),
            );
        for (group, p) in groups {
            rows.push(vec![
                esc(&v.name),
                esc(&group),
                p.count.to_string(),
                seconds(p),
            ]);
        }
    }
    table(
        &mut html,
        "pending",
        &["variant", "group", "jobs placed", "p50 / p95 / p99"],
        &rows,
    );
    html.push_str("<h2>Queues: held against deserved (vGPUs, means over the replay)</h2>\n");
    let mut rows = Vec::new();
    for v in &summary.variants {
        for (queue, q) in &v.queues {
            let deserved = q
                .deserved_gpus
                .map_or_else(|| "–".to_string(), |d| format!("{d:.1}"));
            rows.push(vec![
                esc(&v.name),
                esc(queue),
                format!("{:.1}", q.allocated_gpus),
                deserved,
                format!("{:.2} / {:.2}", q.share.mean, q.share.peak),
            ]);
        }
    }
    table(
        &mut html,
        "queues",
        &[
            "variant",
            "queue",
            "held",
            "deserved",
            "share (mean / peak)",
        ],
        &rows,
    );
    let rows: Vec<Vec<String>> = summary
        .variants
        .iter()
        .flat_map(|v| {
            v.never_placed_jobs.iter().map(move |j| {
                vec![
                    esc(&v.name),
                    esc(&j.job),
                    esc(&j.queue),
                    duration(j.waited),
                    format!("<span class=\"text\">{}</span>", esc(&j.reason)),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        html.push_str("<h2>Jobs never placed, and why</h2>\n");
        table(
            &mut html,
            "never-placed",
            &["variant", "job", "queue", "waited", "reason"],
            &rows,
        );
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
