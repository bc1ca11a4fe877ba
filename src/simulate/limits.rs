//! What one `simulate` run takes on, refused up front when beyond sane limits:
//! a few lines of workload can ask for a hundred million jobs, a gang of ten
//! million pods, or (a trace from year 1 to year 9999) billions of samples,
//! and the replay would otherwise die allocating them rather than say why.

use super::workload::Workload;
use std::time::Duration;

/// Pods one replay creates at most (over all jobs).
pub const MAX_PODS: u64 = 1_000_000;

/// Samples one replay takes at most (its span over `--sample-every`).
pub const MAX_SAMPLES: u64 = 1_000_000;

/// Samples a replay takes when `--sample-every` is not given, at least: a
/// short trace sampled every minute would otherwise draw two points.
pub const SAMPLES_WANTED: u32 = 200;

/// The default time between samples: one minute, or less for a replay short
/// enough that a minute would give fewer than [`SAMPLES_WANTED`] samples (never
/// below a second).
pub fn fitted_sample_every(workload: &Workload) -> Duration {
    let span = span(workload).unwrap_or(Duration::MAX);
    (span / SAMPLES_WANTED).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// Refuses a workload that would create more than [`MAX_PODS`] pods, whose
/// times overflow, or that spans more than [`MAX_SAMPLES`] samples of
/// `sample_every`.
pub fn check(workload: &Workload, sample_every: Duration) -> Result<(), String> {
    if sample_every < Duration::from_secs(1) {
        return Err(format!(
            "--sample-every {}: must be at least 1s",
            humantime::format_duration(sample_every)
        ));
    }
    let span = span(workload)?;
    let every = sample_every;
    let samples = (span.as_secs() / every.as_secs()).saturating_add(1);
    if samples > MAX_SAMPLES {
        return Err(format!(
            "workload: it spans {} (its last job ends then), which at one sample every {} is {samples} samples, more than {MAX_SAMPLES}: give a longer --sample-every or a shorter horizon",
            humantime::format_duration(Duration::from_secs(span.as_secs())),
            humantime::format_duration(every),
        ));
    }
    Ok(())
}

/// How long the replay can run: until its last job ends, or the horizon.
/// Refuses more than [`MAX_PODS`] pods and times that overflow.
fn span(workload: &Workload) -> Result<Duration, String> {
    let mut pods: u64 = 0;
    let mut span = Duration::ZERO;
    for (i, line) in workload.arrivals.iter().enumerate() {
        let at = |field: &str, what: String| {
            format!(
                "workload: arrivals[{i}].{field} (line {}): {what}",
                line.name
            )
        };
        let per_job = match (&line.recorded, &line.gang) {
            (Some(recorded), _) => recorded.pods.len() as u64,
            (None, Some(gang)) => u64::from(gang.members),
            (None, None) => 1,
        };
        pods = pods.saturating_add(u64::from(line.count).saturating_mul(per_job));
        if pods > MAX_PODS {
            let field = if line.gang.is_some() && u64::from(line.count) < per_job {
                "gang.members"
            } else {
                "count"
            };
            return Err(at(
                field,
                format!(
                    "the workload makes more than {MAX_PODS} pods (count {} × {per_job} a job here); a replay creates at most {MAX_PODS}",
                    line.count
                ),
            ));
        }
        let end = line
            .every
            .unwrap_or_default()
            .checked_mul(line.count.saturating_sub(1))
            .and_then(|d| d.checked_add(line.at.unwrap_or_default()))
            .and_then(|d| d.checked_add(line.jitter.unwrap_or_default()))
            .and_then(|d| d.checked_add(line.duration))
            .ok_or_else(|| {
                at(
                    "every",
                    "its times add up to more than a replay can count".into(),
                )
            })?;
        span = span.max(end);
    }
    if let Some(horizon) = workload.horizon {
        span = span.min(horizon);
    }
    Ok(span)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str, sample_every: Duration) -> String {
        let (workload, _) = Workload::read(text).unwrap();
        check(&workload, sample_every).unwrap_err()
    }

    #[test]
    fn a_workload_within_the_limits_passes() {
        let text = "horizon: 1000h\narrivals: [{name: a, count: 1000, every: 1m, duration: 1h, gang: {members: 100}, pod: {gpus: 1}}]";
        let (workload, _) = Workload::read(text).unwrap();
        assert_eq!(check(&workload, Duration::from_secs(60)), Ok(()));
    }

    #[test]
    fn too_many_jobs_or_members_are_refused_naming_the_line() {
        let e = refused(
            "arrivals: [{name: many, count: 100000000, every: 0s, duration: 1m, pod: {gpus: 1}}]",
            Duration::from_secs(60),
        );
        assert!(
            e.contains("arrivals[0].count (line many)") && e.contains("1000000 pods"),
            "{e}"
        );
        let e = refused(
            "arrivals: [{name: a, duration: 1m, pod: {gpus: 1}}, {name: huge, duration: 1m, gang: {members: 10000000}, pod: {gpus: 1}}]",
            Duration::from_secs(60),
        );
        assert!(e.contains("arrivals[1].gang.members (line huge)"), "{e}");
    }

    #[test]
    fn times_that_overflow_are_refused() {
        let e = refused(
            "arrivals: [{name: far, count: 400000, every: 100000000000y, duration: 1m, pod: {gpus: 1}}]",
            Duration::from_secs(60),
        );
        assert!(
            e.contains("arrivals[0].every (line far)") && e.contains("times"),
            "{e}"
        );
    }

    #[test]
    fn a_sample_interval_below_a_second_is_refused() {
        let e = refused(
            "arrivals: [{name: a, duration: 1m, pod: {gpus: 1}}]",
            Duration::ZERO,
        );
        assert!(e.contains("--sample-every 0s: must be at least 1s"), "{e}");
    }

    #[test]
    fn short_replays_are_sampled_often_enough_to_draw() {
        let read = |text: &str| Workload::read(text).unwrap().0;
        let short = read("arrivals: [{name: a, duration: 15s, pod: {gpus: 1}}]");
        assert_eq!(fitted_sample_every(&short), Duration::from_secs(1));
        let day = read("arrivals: [{name: a, duration: 24h, pod: {gpus: 1}}]");
        assert_eq!(fitted_sample_every(&day), Duration::from_secs(60));
        let hour = read("arrivals: [{name: a, duration: 1h, pod: {gpus: 1}}]");
        assert_eq!(fitted_sample_every(&hour), Duration::from_secs(18));
    }

    #[test]
    fn a_span_of_too_many_samples_is_refused_unless_the_horizon_cuts_it() {
        let text = "arrivals: [{name: a, duration: 9000y, pod: {gpus: 1}}]";
        let e = refused(text, Duration::from_secs(60));
        assert!(
            e.contains("--sample-every") && e.contains("9000years"),
            "{e}"
        );
        let (workload, _) = Workload::read(&format!("horizon: 1y\n{text}")).unwrap();
        assert_eq!(check(&workload, Duration::from_secs(60)), Ok(()));
    }
}
