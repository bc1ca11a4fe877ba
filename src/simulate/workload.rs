//! The workload a replay runs: lines of arrivals (when, how many, how often,
//! what each job asks, how long it runs), expanded into one list of jobs in
//! arrival order. Randomness (jitter) comes from the replay's seed, so the same
//! seed gives the same jobs.

use k8s_openapi::api::core::v1::Pod;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A workload file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// How long to replay; jobs still running then are cut off. Default: until
    /// the last job finishes or nothing can move any more.
    #[serde(default, with = "humantime_serde_opt")]
    pub horizon: Option<Duration>,
    /// The arrival lines.
    pub arrivals: Vec<ArrivalLine>,
}

/// One line of arrivals: `count` jobs, the first at `at`, then one every `every`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ArrivalLine {
    /// Job name prefix (jobs are `<name>-<n>`).
    pub name: String,
    /// Namespace of its pods and PodGroups.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// When the first job arrives, from the start of the replay.
    #[serde(default, with = "humantime_serde_opt")]
    pub at: Option<Duration>,
    /// Time between arrivals (needed for `count` > 1).
    #[serde(default, with = "humantime_serde_opt")]
    pub every: Option<Duration>,
    /// Number of jobs.
    #[serde(default = "one")]
    pub count: u32,
    /// Each arrival moves later by a random amount below this.
    #[serde(default, with = "humantime_serde_opt")]
    pub jitter: Option<Duration>,
    /// How long a job runs once all its pods are bound.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// Volcano queue (`scheduling.volcano.sh/queue-name` / the PodGroup's queue).
    #[serde(default)]
    pub queue: Option<String>,
    /// PriorityClass of its pods and PodGroup.
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// `volcano.sh/service.type` (inference, training).
    #[serde(default)]
    pub service_type: Option<String>,
    /// A gang: a PodGroup of `members` pods, `minMember` of them placed together.
    #[serde(default)]
    pub gang: Option<GangShape>,
    /// What each pod asks.
    pub pod: PodShape,
    /// The pods (and PodGroup) themselves, for a job read from a recorded trace:
    /// they are created as recorded instead of from `pod` and `gang`.
    #[serde(skip)]
    pub recorded: Option<Arc<RecordedJob>>,
}

/// A job as a trace recorded it.
#[derive(Debug, Clone)]
pub struct RecordedJob {
    /// Its pods as created (see `crate::trace::scrub`), in arrival order.
    pub pods: Vec<Pod>,
    /// Its PodGroup, for a gang.
    pub pod_group: Option<Value>,
}

/// A gang's shape.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GangShape {
    /// Pods in the gang.
    pub members: u32,
    /// Placed together (default: all).
    #[serde(default)]
    pub min_member: Option<u32>,
}

/// What one pod asks.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodShape {
    /// vGPUs (`nvidia.com/gpu`).
    pub gpus: u32,
    /// Memory per vGPU in MiB (`nvidia.com/gpumem`); absent: the whole card.
    #[serde(default)]
    pub gpumem: Option<u64>,
    /// Compute per vGPU in percent (`nvidia.com/gpucores`).
    #[serde(default)]
    pub gpucores: Option<u32>,
    /// CPU request (a quantity).
    #[serde(default)]
    pub cpu: Option<String>,
    /// Memory request (a quantity).
    #[serde(default)]
    pub memory: Option<String>,
    /// More pod annotations (GPU type, policies, ...).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

fn default_namespace() -> String {
    crate::object_namespace::DEFAULT_NAMESPACE.into()
}

fn one() -> u32 {
    1
}

/// One job of the expanded workload.
#[derive(Debug, Clone)]
pub struct Job {
    /// `<line>-<n>`.
    pub name: String,
    /// Index of its arrival line.
    pub line: usize,
    /// When it arrives.
    pub at: Duration,
}

impl Workload {
    /// Reads a workload file (YAML or JSON).
    pub fn parse(text: &str) -> Result<Self, String> {
        let workload: Self =
            serde_path_to_error::deserialize(serde_yaml_ng::Deserializer::from_str(text))
                .map_err(|e| format!("workload: {}: {}", e.path(), e.inner()))?;
        for (i, line) in workload.arrivals.iter().enumerate() {
            // Errors name the field, as serde's do (`arrivals[0].pod.gpus`),
            // and the line's name to find it by.
            let at = |field: &str, what: &str| {
                format!(
                    "workload: arrivals[{i}].{field} (line {}): {what}",
                    line.name
                )
            };
            if line.count > 1 && line.every.is_none() {
                return Err(at("every", "needed when count is above 1"));
            }
            if line.pod.gpus == 0 {
                return Err(at("pod.gpus", "must be at least 1"));
            }
            if let Some(cores) = line.pod.gpucores.filter(|c| *c > 100) {
                return Err(at(
                    "pod.gpucores",
                    &format!(
                        "{cores} is more than a card has: give a percent of one card, 1 to 100"
                    ),
                ));
            }
            if let Some(g) = &line.gang {
                if g.members == 0 {
                    return Err(at("gang.members", "must be at least 1"));
                }
                if g.min_member.is_some_and(|m| m == 0 || m > g.members) {
                    return Err(at("gang.minMember", "must be between 1 and members"));
                }
            }
            if line.name.is_empty()
                || !line
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return Err(at("name", "must be lower-case letters, digits and dashes"));
            }
            if let (Some(horizon), Some(first)) = (workload.horizon, line.at)
                && first > horizon
            {
                return Err(at(
                    "at",
                    &format!(
                        "{} is after the horizon ({}): none of its jobs would arrive",
                        humantime::format_duration(first),
                        humantime::format_duration(horizon)
                    ),
                ));
            }
        }
        Ok(workload)
    }

    /// Reads a workload file: a trace recorded by `serve --record-trace`, or
    /// arrival lines (YAML or JSON). Also returns notes for the user (what a
    /// trace left out or what was guessed).
    pub fn read(text: &str) -> Result<(Self, Vec<String>), String> {
        if !crate::trace::looks_like_trace(text) {
            return Ok((Self::parse(text)?, Vec::new()));
        }
        let trace = crate::trace::parse_trace(text)?;
        let (workload, notes) = super::trace_workload::workload_from_trace(&trace)?;
        Ok((workload, trace.warnings.into_iter().chain(notes).collect()))
    }

    /// Every job, in arrival order (ties: line order, then number).
    pub fn expand(&self, seed: u64) -> Vec<Job> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut jobs = Vec::new();
        for (line_index, line) in self.arrivals.iter().enumerate() {
            let start = line.at.unwrap_or_default();
            for n in 0..line.count {
                let mut at = start + line.every.unwrap_or_default() * n;
                if let Some(jitter) = line.jitter.filter(|j| !j.is_zero()) {
                    let nanos = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
                    at += Duration::from_nanos(rng.random_range(0..nanos));
                }
                // A recorded job is one job, named as it was.
                let name = match &line.recorded {
                    Some(_) => line.name.clone(),
                    None => format!("{}-{n}", line.name),
                };
                jobs.push(Job {
                    name,
                    line: line_index,
                    at,
                });
            }
        }
        jobs.sort_by(|a, b| a.at.cmp(&b.at).then(a.line.cmp(&b.line)));
        jobs
    }
}

/// Durations written as Go/humantime text (`90s`, `2h`).
mod humantime_serde {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// Optional durations written as text.
mod humantime_serde_opt {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(text) => humantime::parse_duration(&text)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORKLOAD: &str = "
horizon: 2h
arrivals:
- name: infer
  every: 10m
  count: 3
  jitter: 1m
  duration: 30m
  queue: inference
  pod: {gpus: 1, gpumem: 20000}
- name: train
  at: 5m
  duration: 1h
  gang: {members: 8}
  pod: {gpus: 1}
";

    #[test]
    fn expands_lines_into_jobs_in_arrival_order() {
        let w = Workload::parse(WORKLOAD).unwrap();
        let jobs = w.expand(7);
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names.len(), 4);
        assert!(jobs.windows(2).all(|p| p[0].at <= p[1].at));
        assert!(names.contains(&"train-0"));
        let infer1 = jobs.iter().find(|j| j.name == "infer-1").unwrap();
        assert!(infer1.at >= Duration::from_secs(600) && infer1.at < Duration::from_secs(660));
    }

    #[test]
    fn the_same_seed_gives_the_same_jobs() {
        let w = Workload::parse(WORKLOAD).unwrap();
        let at = |seed| w.expand(seed).iter().map(|j| j.at).collect::<Vec<_>>();
        assert_eq!(at(1), at(1));
        assert_ne!(at(1), at(2));
    }

    #[test]
    fn bad_lines_are_refused_naming_them() {
        for (text, needle) in [
            (
                "arrivals: [{name: a, count: 2, duration: 1m, pod: {gpus: 1}}]",
                "arrivals[0].every (line a): needed when count is above 1",
            ),
            (
                "arrivals: [{name: a, duration: 1m, pod: {gpus: 0}}]",
                "arrivals[0].pod.gpus (line a): must be at least 1",
            ),
            (
                "arrivals: [{name: a, duration: 1m, gang: {members: 2, minMember: 3}, pod: {gpus: 1}}]",
                "arrivals[0].gang.minMember (line a)",
            ),
            (
                "arrivals: [{name: a, duration: 1m, pod: {gpus: 1, gpucores: 150}}]",
                "arrivals[0].pod.gpucores (line a): 150 is more than a card has",
            ),
            (
                "horizon: 1h\narrivals: [{name: a, at: 2h, duration: 1m, pod: {gpus: 1}}]",
                "arrivals[0].at (line a): 2h is after the horizon (1h)",
            ),
            (
                "arrivals: [{name: a, duration: soon, pod: {gpus: 1}}]",
                "arrivals[0].duration",
            ),
            (
                "arrivals: [{name: A_b, duration: 1m, pod: {gpus: 1}}]",
                "arrivals[0].name (line A_b): must be lower-case",
            ),
            (
                "arrivals: [{name: a, duration: 1m, pod: {gpus: 1}, colour: red}]",
                "colour",
            ),
        ] {
            let e = Workload::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
