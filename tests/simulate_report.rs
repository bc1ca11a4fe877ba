//! `vgpu-scheduler simulate` from the outside: the report it writes (files,
//! the same bytes for the same seed), the page rendered by a real headless
//! browser with every plot drawn, and errors that name what is wrong.

mod headless_browser;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const CLUSTER: &str = "examples/simulate/cluster.yaml";

/// A small day: notebooks, inference and a few training gangs.
const WORKLOAD: &str = "
horizon: 6h
arrivals:
- name: notebook
  every: 10m
  count: 30
  jitter: 5m
  duration: 1h
  queue: notebooks
  pod: {gpus: 1, gpumem: 20000, gpucores: 25}
- name: infer
  every: 15m
  count: 20
  jitter: 10m
  duration: 2h
  queue: inference
  serviceType: inference
  pod: {gpus: 1, gpumem: 40000, gpucores: 50}
- name: train
  at: 20m
  every: 1h
  count: 5
  duration: 3h
  queue: training
  gang: {members: 4}
  pod: {gpus: 2}
";

const VARIANTS: [&str; 2] = [
    "binpack:--node-scheduler-policy=binpack",
    "spread:--node-scheduler-policy=spread --gpu-scheduler-policy=spread",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `simulate`; returns (success, stdout, stderr).
fn simulate(dir: &Path, workload: &str, seed: u64, report: &str) -> (bool, String, String) {
    let workload_file = dir.join("workload.yaml");
    std::fs::write(&workload_file, workload).expect("write workload");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"));
    cmd.current_dir(repo())
        .arg("simulate")
        .arg("--quiet")
        .args(["--cluster-file", CLUSTER])
        .arg("--workload")
        .arg(&workload_file)
        .args(["--seed", &seed.to_string()])
        .arg("--report")
        .arg(dir.join(report));
    for v in VARIANTS {
        cmd.args(["--variant", v]);
    }
    let out = cmd.output().expect("run vgpu-scheduler simulate");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_report_has_every_file_and_the_same_seed_gives_the_same_bytes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (ok, out, err) = simulate(dir.path(), WORKLOAD, 7, "a");
    assert!(ok, "{err}");
    // The one-screen summary names each variant and the winners.
    for text in ["binpack", "spread", "most jobs placed:", "index.html"] {
        assert!(out.contains(text), "{out}");
    }
    for file in [
        "index.html",
        "summary.json",
        "samples.csv",
        "jobs.csv",
        "queues.csv",
    ] {
        assert!(dir.path().join("a").join(file).is_file(), "{file}");
    }
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("a/summary.json")).expect("summary"),
    )
    .expect("summary.json is JSON");
    assert_eq!(summary["seed"], 7);
    let variants = summary["variants"].as_array().expect("variants");
    assert_eq!(variants.len(), 2);
    for v in variants {
        assert_eq!(v["jobs"], 55, "{v}");
        assert!(v["placed"].as_u64().unwrap_or(0) > 40, "{v}");
        assert!(
            v["pendingSecondsByQueue"]["training"]["count"]
                .as_u64()
                .is_some(),
            "{v}"
        );
        assert!(
            v["memoryPercent"]["peak"].as_f64().unwrap_or(0.0) > 0.0,
            "{v}"
        );
    }
    // Spread leaves more cards partly used than binpack: the report tells the
    // policies apart.
    let partly = |i: usize| {
        variants[i]["partlyUsedCards"]["mean"]
            .as_f64()
            .unwrap_or(0.0)
    };
    assert!(
        partly(1) > partly(0),
        "binpack {} spread {}",
        partly(0),
        partly(1)
    );
    let jobs_csv = std::fs::read_to_string(dir.path().join("a/jobs.csv")).expect("jobs.csv");
    assert_eq!(jobs_csv.lines().count(), 1 + 2 * 55);

    let (ok, _, err) = simulate(dir.path(), WORKLOAD, 7, "b");
    assert!(ok, "{err}");
    for file in [
        "summary.json",
        "samples.csv",
        "jobs.csv",
        "queues.csv",
        "index.html",
    ] {
        let a = std::fs::read(dir.path().join("a").join(file)).expect("a");
        let b = std::fs::read(dir.path().join("b").join(file)).expect("b");
        assert!(a == b, "{file} differs between two runs with the same seed");
    }
    let (ok, _, err) = simulate(dir.path(), WORKLOAD, 8, "c");
    assert!(ok, "{err}");
    let a = std::fs::read(dir.path().join("a/jobs.csv")).expect("a");
    let c = std::fs::read(dir.path().join("c/jobs.csv")).expect("c");
    assert!(a != c, "another seed moves the arrivals");
}

#[test]
fn a_bad_workload_or_variant_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (ok, _, err) = simulate(
        dir.path(),
        "arrivals: [{name: a, count: 3, duration: 1h, pod: {gpus: 1}}]",
        1,
        "r",
    );
    assert!(!ok);
    assert!(
        err.contains("arrivals[0].every (line a): needed when count is above 1"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .current_dir(repo())
        .args(["simulate", "--quiet", "--cluster-file", CLUSTER])
        .args(["--workload", "examples/simulate/workload.yaml"])
        .args(["--variant", "odd:--node-scheduler-policy=sideways"])
        .arg("--report")
        .arg(dir.path().join("r"))
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--variant odd") && err.contains("sideways"),
        "{err}"
    );
    assert!(
        !dir.path().join("r").exists(),
        "nothing written for a refused run"
    );
}

/// Runs `simulate` on the example cluster with `args` after the workload;
/// returns (success, stderr).
fn simulate_with(dir: &Path, workload: &str, args: &[&str]) -> (bool, String) {
    let workload_file = dir.join("workload.yaml");
    std::fs::write(&workload_file, workload).expect("write workload");
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .current_dir(repo())
        .args(["simulate", "--quiet", "--cluster-file", CLUSTER])
        .arg("--workload")
        .arg(&workload_file)
        .arg("--report")
        .arg(dir.join("r"))
        .args(args)
        .output()
        .expect("run vgpu-scheduler simulate");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn inputs_that_would_replay_a_mistake_are_refused_pointing_at_the_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ok_line = "{name: a, duration: 1m, queue: training, pod: {gpus: 1}}";
    let one = format!("arrivals: [{ok_line}]");
    for (workload, args, needle) in [
        (
            "arrivals: [{name: a, duration: 1m, queue: trainig, pod: {gpus: 1}}]".to_string(),
            vec![],
            "arrivals[0].queue (line a): queue \"trainig\" is not in the cluster (it has inference, notebooks, training)",
        ),
        (
            "arrivals: [{name: a, duration: 1m, pod: {gpus: 1, gpucores: 150}}]".to_string(),
            vec![],
            "arrivals[0].pod.gpucores (line a): 150 is more than a card has",
        ),
        (
            format!(
                "horizon: 1h\narrivals: [{ok_line}, {{name: late, at: 2h, duration: 1m, pod: {{gpus: 1}}}}]"
            ),
            vec![],
            "arrivals[1].at (line late): 2h is after the horizon (1h)",
        ),
        (
            one.clone(),
            vec!["--sample-every", "0s"],
            "--sample-every 0s: must be at least 1s",
        ),
        (
            one.clone(),
            vec!["--variant", "a:--http-bind=0.0.0.0:9443"],
            "--variant a: --http-bind does nothing in a replay",
        ),
        (
            one.clone(),
            vec!["--variant", "a:--record-trace /tmp/trace"],
            "--variant a: --record-trace does nothing in a replay",
        ),
        (
            one.clone(),
            vec!["--variant", "a:--leader-elect"],
            "--variant a: --leader-elect does nothing in a replay",
        ),
        (
            one.clone(),
            vec!["--variant", "a:--kubeconfig k"],
            "--variant a: --kubeconfig does nothing in a replay",
        ),
        (
            one.clone(),
            vec![
                "--variant",
                "a:",
                "--variant",
                "a:--node-scheduler-policy=spread",
            ],
            "two variants are named a",
        ),
        (
            one.clone(),
            vec!["--variant", "a:--scheduler-config 'no such file.yaml"],
            "--variant a: FLAGS",
        ),
    ] {
        let (ok, err) = simulate_with(dir.path(), &workload, &args);
        assert!(!ok, "{workload} {args:?} was replayed");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!dir.path().join("r").exists(), "nothing written");
    }
    // A quoted value is one word: the file name with a space reaches the
    // flag whole (and is then read, and found missing, by that name).
    let (ok, err) = simulate_with(
        dir.path(),
        &one,
        &["--variant", "a:--scheduler-config 'no such file.yaml'"],
    );
    assert!(!ok);
    assert!(err.contains("no such file.yaml"), "{err}");
}

#[test]
fn a_workload_beyond_what_one_replay_takes_on_is_refused_saying_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = |first: &str, last: &str| {
        [(first, "a"), (last, "b")]
            .iter()
            .map(|(at, name)| {
                format!(
                    r#"{{"at":"{at}","pod":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ml","uid":"u-{name}"}},"spec":{{"schedulerName":"vgpu-scheduler","containers":[{{"name":"main","resources":{{"limits":{{"nvidia.com/gpu":"1"}}}}}}]}}}}}}"#
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (workload, needle) in [
        (
            "arrivals: [{name: many, count: 100000000, every: 0s, duration: 1m, pod: {gpus: 1}}]"
                .to_string(),
            "arrivals[0].count (line many): the workload makes more than 1000000 pods",
        ),
        (
            "arrivals: [{name: big, duration: 1m, gang: {members: 10000000}, pod: {gpus: 1}}]"
                .to_string(),
            "arrivals[0].gang.members (line big): the workload makes more than 1000000 pods",
        ),
        (
            trace("0001-01-01T00:00:00.000Z", "9999-12-31T23:59:59.000Z"),
            "samples, more than 1000000: give a longer --sample-every",
        ),
    ] {
        let (ok, _, err) = simulate(dir.path(), &workload, 1, "r");
        assert!(!ok);
        assert!(err.contains(needle), "{err}");
        assert!(!dir.path().join("r").exists(), "nothing written");
    }
}

#[test]
fn the_report_renders_in_a_headless_browser_with_every_plot() {
    let Some(browser) = headless_browser::browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (ok, _, err) = simulate(dir.path(), WORKLOAD, 1, "r");
    assert!(ok, "{err}");
    let page = dir.path().join("r/index.html");
    let url = format!("file://{}", page.display());
    let profile = dir.path().join("profile");
    let run = |extra: &[&str]| {
        Command::new(&browser)
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .output()
            .expect("run the browser")
    };
    // The DOM after the browser parsed and laid out the page.
    let dom = String::from_utf8_lossy(&run(&["--dump-dom"]).stdout).into_owned();
    for id in [
        "memory",
        "compute",
        "partly-used",
        "largest-request",
        "pending",
        "queue-share",
        "pending-time",
    ] {
        let at = dom
            .find(&format!("id=\"plot-{id}\""))
            .unwrap_or_else(|| panic!("plot {id} missing from the rendered page"));
        let figure = &dom[at..dom[at..].find("</figure>").map_or(dom.len(), |e| at + e)];
        assert!(figure.contains("<svg"), "plot {id} has no drawing");
        // One line per variant, plus the legend's samples.
        assert!(
            figure.matches("<polyline").count() >= 2,
            "plot {id} has fewer lines than variants"
        );
        for variant in ["binpack", "spread"] {
            assert!(
                figure.contains(variant),
                "plot {id} has no legend for {variant}"
            );
        }
    }
    for table in [
        "inputs",
        "standings",
        "summary",
        "lines",
        "models",
        "pending",
        "queues",
    ] {
        assert!(
            dom.contains(&format!("id=\"{table}\"")),
            "table {table} missing"
        );
    }
    // And it paints: a screenshot of the page is an image of some size.
    let shot = dir.path().join("page.png");
    let out = run(&[
        "--window-size=1600,2400",
        &format!("--screenshot={}", shot.display()),
    ]);
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(&png[1..4], b"PNG");
    assert!(
        png.len() > 50_000,
        "a blank page would compress to almost nothing"
    );
}
