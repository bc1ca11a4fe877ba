//! `vgpu-scheduler simulate`: what-if replays. A workload of arrivals (or a
//! trace recorded by `serve --record-trace`, see `trace_workload`) is replayed
//! against a cluster file through the server's own decision code on a virtual
//! clock, once per variant (a name and the `serve` flags it runs with), and the
//! outcome is written as a report: `index.html` with plots, `summary.json` and
//! CSVs. The same seed gives the same report.

pub mod breakdown;
pub mod input_checks;
pub mod inputs;
pub mod kube_scheduler;
pub mod limits;
pub mod objects;
pub mod observe;
pub mod parallel;
pub mod plots;
pub mod replay;
pub mod report;
pub mod snapshot;
pub mod summary;
pub mod svg_chart;
pub mod trace_workload;
pub mod units;
pub mod variant_flags;
pub mod verdict;
pub mod work;
pub mod workload;

use crate::cluster::file::{ClusterObject, visit_file};
use crate::config::{Cli, Command, SimulateArgs};
use crate::device::device_config::DeviceConfig;
use anyhow::Context;
use clap::Parser;
use replay::{ReplayResult, VariantSetup};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;
use workload::Workload;

/// Runs the subcommand; returns the one-screen summary to print.
pub async fn run(args: SimulateArgs) -> anyhow::Result<String> {
    let cluster = match (&args.cluster_file, args.from_cluster) {
        (Some(path), false) => {
            let mut cluster = Vec::new();
            visit_file(path, |object| cluster.push(object))?;
            cluster
        }
        (None, true) => {
            let client = crate::run::kube_client(
                args.kubeconfig.as_deref(),
                "--from-cluster: no cluster configuration (pass --kubeconfig, or set $KUBECONFIG)",
            )
            .await?;
            snapshot::snapshot(client).await?
        }
        _ => anyhow::bail!("give --cluster-file FILE or --from-cluster"),
    };
    let text = std::fs::read_to_string(&args.workload)
        .with_context(|| format!("read workload {}", args.workload.display()))?;
    let (workload, mut notes) = Workload::read(&text).map_err(anyhow::Error::msg)?;
    input_checks::queues_exist(&workload, &cluster).map_err(anyhow::Error::msg)?;
    let sample_every = args
        .sample_every
        .unwrap_or_else(|| limits::fitted_sample_every(&workload));
    let variants = if args.variants.is_empty() {
        vec!["default:".to_string()]
    } else {
        args.variants.clone()
    };
    let setups = variants
        .iter()
        .map(|v| variant(v, &args))
        .collect::<anyhow::Result<Vec<_>>>()?;
    input_checks::names_unique(setups.iter().map(|s| s.name.as_str()))
        .map_err(anyhow::Error::msg)?;
    limits::check(&workload, sample_every).map_err(anyhow::Error::msg)?;
    let mut jobs = workload.expand(args.seed);
    notes.extend(input_checks::drop_after_horizon(&workload, &mut jobs));
    for note in notes {
        eprintln!("note: {note}");
    }
    let outcome = simulate(
        &cluster,
        &workload,
        &setups,
        args.seed,
        sample_every,
        !args.quiet,
    )
    .await?;
    let source = args.cluster_file.as_deref().map_or_else(
        || "a snapshot of the live cluster".to_string(),
        |p| format!("cluster file {}", p.display()),
    );
    let inputs = inputs::describe(
        &source,
        &cluster,
        &args.workload.display().to_string(),
        &workload,
        jobs.len(),
        sample_every,
    );
    let summary = summary::compare(
        args.seed,
        inputs,
        setups
            .iter()
            .zip(&outcome)
            .map(|(s, r)| summary::summarise(&s.name, &s.flags, r))
            .collect(),
    );
    let named: Vec<(String, &ReplayResult)> = setups
        .iter()
        .map(|s| s.name.clone())
        .zip(&outcome)
        .collect();
    let plots = plots::draw(&named).map_err(anyhow::Error::msg)?;
    report::write(&args.report, &summary, &named, &plots).map_err(anyhow::Error::msg)?;
    Ok(text_summary(&summary, &args.report))
}

/// Replays the workload through every variant, side by side (see
/// [`parallel`]); the results in the order of `setups`.
pub async fn simulate(
    cluster: &[ClusterObject],
    workload: &Workload,
    setups: &[VariantSetup],
    seed: u64,
    sample_every: Duration,
    progress: bool,
) -> anyhow::Result<Vec<ReplayResult>> {
    limits::check(workload, sample_every).map_err(anyhow::Error::msg)?;
    let mut jobs = workload.expand(seed);
    input_checks::drop_after_horizon(workload, &mut jobs);
    let shared = parallel::Shared {
        cluster,
        workload,
        jobs: &jobs,
        sample_every,
    };
    let outcome = parallel::replay_all(setups, &shared, progress, parallel::threads());
    setups
        .iter()
        .zip(outcome)
        .map(|(setup, result)| {
            result
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("variant {}", setup.name))
        })
        .collect()
}

/// Reads `NAME:FLAGS` (flags as `serve` takes them, split as a shell would)
/// into a variant's settings.
pub fn variant(spec: &str, args: &SimulateArgs) -> anyhow::Result<VariantSetup> {
    let (name, flags) = spec
        .split_once(':')
        .with_context(|| format!("--variant {spec:?}: expected NAME:FLAGS"))?;
    anyhow::ensure!(!name.is_empty(), "--variant {spec:?}: the name is empty");
    // Replays run in cluster-file mode (no device-plugin health to judge),
    // whichever way the cluster was read.
    let mut argv: Vec<String> = vec!["vgpu-scheduler".into(), "serve".into()];
    argv.push("--cluster-file".into());
    argv.push(
        args.cluster_file
            .as_deref()
            .map_or_else(|| "snapshot".into(), |p| p.display().to_string()),
    );
    let flags = variant_flags::split(name, flags).map_err(anyhow::Error::msg)?;
    let names_config = flags.iter().any(|f| f.starts_with("--scheduler-config"));
    if let (Some(conf), false) = (&args.scheduler_config, names_config) {
        argv.push("--scheduler-config".into());
        argv.push(conf.display().to_string());
    }
    argv.extend(flags.iter().cloned());
    let cli = Cli::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("--variant {name}: {e}"))?;
    let Command::Serve(serve) = cli.command else {
        anyhow::bail!("--variant {name}: not serve flags");
    };
    let devices = match &serve.device_config_file {
        Some(path) => DeviceConfig::load(path)?,
        None => DeviceConfig::default(),
    };
    let gang_conf = match (&serve.scheduler_config, serve.gang_scheduling) {
        (_, false) => None,
        (Some(path), true) => Some(crate::scheduler::gang::driver::load_conf(path)?),
        (None, true) => Some(crate::volcano::SchedulerConf::default()),
    };
    Ok(VariantSetup {
        name: name.to_string(),
        flags: flags.join(" "),
        config: crate::run::scheduler_config(&serve, &devices),
        webhook: crate::run::webhook_config(&serve, &devices),
        gang_conf,
        schedule_period: serve.schedule_period,
    })
}

/// The one-screen text summary.
fn text_summary(summary: &summary::Summary, report: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:>7} {:>7} {:>10} {:>8} {:>22} {:>12} {:>9}",
        "variant",
        "jobs",
        "placed",
        "card-h",
        "demand",
        "pending p50/p95/p99 s",
        "partly used",
        "evicted"
    );
    for v in &summary.variants {
        let p = &v.pending_seconds;
        let _ = writeln!(
            out,
            "{:<14} {:>7} {:>7} {:>10.1} {:>7.1}% {:>22} {:>12.1} {:>9}",
            v.name,
            v.jobs,
            v.placed,
            v.work.card_hours,
            v.demand_met_percent,
            format!("{:.0}/{:.0}/{:.0}", p.p50, p.p95, p.p99),
            v.partly_used_cards.mean,
            v.pod_evictions
        );
    }
    out.push('\n');
    let _ = writeln!(out, "{}\n", summary.verdict);
    for standing in &summary.standings {
        let _ = writeln!(out, "{}: {}", standing.measure, standing.describe());
    }
    let _ = writeln!(out, "\nreport: {}", report.join("index.html").display());
    out
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod trace_workload_tests;
#[cfg(test)]
mod verdict_tests;
