//! The report's plots as a person sees them, measured in a real headless
//! browser: a script added to a copy of the page writes every chart's element
//! boxes (getBoundingClientRect) into the DOM, which the browser dumps. Every
//! chart must draw lines, keep its legend off the plot area and label each
//! axis with distinct ticks, also when every value is the same.

mod headless_browser;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const CLUSTER: &str = "examples/simulate/cluster.yaml";

/// Notebooks, inference and training gangs in three queues over six hours.
const BUSY: &str = "
horizon: 6h
arrivals:
- name: notebook
  every: 10m
  count: 30
  duration: 1h
  queue: notebooks
  pod: {gpus: 1, gpumem: 20000, gpucores: 25}
- name: train
  at: 20m
  every: 1h
  count: 5
  duration: 3h
  queue: training
  gang: {members: 4}
  pod: {gpus: 2}
";

/// One job that starts at once: every plot is flat.
const FLAT: &str = "
arrivals:
- name: one
  duration: 30m
  queue: training
  pod: {gpus: 1}
";

/// Collects, per chart, its plot area, legend, ticks and lines.
const MEASURE: &str = r#"<script>
const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
const charts = [...document.querySelectorAll('figure.plot svg')].map(svg => ({
  figure: svg.closest('figure').id,
  area: box(svg.querySelector('.plot-area')),
  legend: box(svg.querySelector('.legend')),
  svg: box(svg),
  x: [...svg.querySelectorAll('.tick.x')].map(t => t.textContent),
  y: [...svg.querySelectorAll('.tick.y')].map(t => t.textContent),
  lines: [...svg.querySelectorAll('polyline.series')].map(p => p.points.numberOfItems),
  titles: svg.querySelectorAll('polyline.series title').length,
}));
const out = document.createElement('pre');
out.id = 'geometry';
out.textContent = JSON.stringify(charts);
document.body.appendChild(out);
</script>"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes a report of `workload` for binpack and spread into `dir/r`.
fn report(dir: &Path, workload: &str) {
    let file = dir.join("workload.yaml");
    std::fs::write(&file, workload).expect("write workload");
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .current_dir(repo())
        .args(["simulate", "--quiet", "--cluster-file", CLUSTER])
        .arg("--workload")
        .arg(&file)
        .arg("--report")
        .arg(dir.join("r"))
        .args(["--variant", "binpack:--node-scheduler-policy=binpack"])
        .args(["--variant", "spread:--node-scheduler-policy=spread"])
        .output()
        .expect("run simulate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The charts of the report in `dir/r`, as the browser laid them out.
fn charts(browser: &Path, dir: &Path) -> Vec<Value> {
    let page = std::fs::read_to_string(dir.join("r/index.html")).expect("page");
    let measured = dir.join("r/measured.html");
    std::fs::write(
        &measured,
        page.replace("</body>", &format!("{MEASURE}</body>")),
    )
    .expect("write the measured copy");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1600,1200",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", measured.display()))
        .output()
        .expect("run the browser");
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("<pre id=\"geometry\">").expect("the script ran") + 19;
    let end = start + dom[start..].find("</pre>").expect("end of the measures");
    let json = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str::<Value>(&json)
        .expect("measures are JSON")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn rect(v: &Value) -> [f64; 4] {
    let n = |i: usize| v[i].as_f64().unwrap_or(f64::NAN);
    [n(0), n(1), n(2), n(3)]
}

fn overlap(a: [f64; 4], b: [f64; 4]) -> bool {
    a[0] < b[0] + b[2] && b[0] < a[0] + a[2] && a[1] < b[1] + b[3] && b[1] < a[1] + a[3]
}

/// Every chart readable: lines drawn, legend off the data, distinct ticks.
fn check(charts: &[Value], what: &str) {
    assert!(charts.len() >= 7, "{what}: {} charts", charts.len());
    for c in charts {
        let name = format!("{what} {}", c["figure"]);
        let (area, legend) = (rect(&c["area"]), rect(&c["legend"]));
        assert!(
            area[2] > 100.0 && area[3] > 50.0,
            "{name}: plot area {area:?}"
        );
        assert!(
            !overlap(area, legend),
            "{name}: the legend {legend:?} lies over the plot area {area:?}"
        );
        let lines: Vec<u64> = c["lines"]
            .as_array()
            .map(|l| l.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        assert_eq!(lines.len(), 2, "{name}: one line per variant, {lines:?}");
        assert!(
            lines.iter().all(|n| *n >= 2),
            "{name}: an empty line {lines:?}"
        );
        assert_eq!(c["titles"], 2, "{name}: each line says what it is on hover");
        for axis in ["x", "y"] {
            let ticks: Vec<&str> = c[axis]
                .as_array()
                .map(|t| t.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut distinct = ticks.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert!(
                ticks.len() >= 2 && distinct.len() == ticks.len(),
                "{name}: {axis} ticks {ticks:?}"
            );
        }
    }
}

#[test]
fn every_chart_has_lines_distinct_ticks_and_its_legend_beside_the_data() {
    let Some(browser) = headless_browser::browser_or_skip() else {
        return;
    };
    for (what, workload) in [("busy", BUSY), ("flat", FLAT)] {
        let dir = tempfile::tempdir().expect("temp dir");
        report(dir.path(), workload);
        let charts = charts(&browser, dir.path());
        check(&charts, what);
        // One panel per queue the replay planned.
        let panels = charts
            .iter()
            .filter(|c| c["figure"] == "plot-queue-share")
            .count();
        assert!(
            panels >= if what == "busy" { 2 } else { 1 },
            "{what}: {panels} queue panels"
        );
        // The wait distribution reads on a log scale from a second up.
        let waits = charts
            .iter()
            .find(|c| c["figure"] == "plot-pending-time")
            .expect("the wait distribution");
        assert_eq!(waits["x"][0], "1s", "{what}: {}", waits["x"]);
    }
}
