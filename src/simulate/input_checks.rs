//! The workload checked against the cluster and the variants before anything
//! is replayed. A replay of a mistake runs as happily as a replay of the real
//! thing: jobs in a queue the cluster lacks never start, two variants of one
//! name overwrite each other in the report, jobs arriving after the horizon
//! count as never placed. Each is refused (or, when the rest of the replay
//! still means something, told) rather than replayed silently.

use super::workload::{Job, Workload};
use crate::cluster::file::ClusterObject;
use serde_json::Value;
use std::collections::BTreeSet;

/// The queue every Volcano cluster has, whether or not the file lists it.
const DEFAULT_QUEUE: &str = "default";

/// Refuses a line whose queue the cluster does not have.
pub fn queues_exist(workload: &Workload, cluster: &[ClusterObject]) -> Result<(), String> {
    let queues: BTreeSet<&str> = cluster
        .iter()
        .filter_map(|o| match o {
            ClusterObject::Queue(q) => q.pointer("/metadata/name").and_then(Value::as_str),
            _ => None,
        })
        .collect();
    for (i, line) in workload.arrivals.iter().enumerate() {
        let Some(queue) = line.queue.as_deref() else {
            continue;
        };
        if queue != DEFAULT_QUEUE && !queues.contains(queue) {
            let known = if queues.is_empty() {
                "it has none but default".to_string()
            } else {
                format!(
                    "it has {}",
                    queues.into_iter().collect::<Vec<_>>().join(", ")
                )
            };
            return Err(format!(
                "workload: arrivals[{i}].queue (line {}): queue {queue:?} is not in the cluster ({known}); its jobs would never start",
                line.name
            ));
        }
    }
    Ok(())
}

/// Refuses two variants of one name: the report keys everything by name.
pub fn names_unique<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(format!(
                "--variant {name}: two variants are named {name}; give each its own name"
            ));
        }
    }
    Ok(())
}

/// Drops the jobs that arrive after the horizon (they would only count as
/// never placed) and says how many of which line.
pub fn drop_after_horizon(workload: &Workload, jobs: &mut Vec<Job>) -> Vec<String> {
    let Some(horizon) = workload.horizon else {
        return Vec::new();
    };
    let mut late = vec![0usize; workload.arrivals.len()];
    let mut all = vec![0usize; workload.arrivals.len()];
    for job in jobs.iter() {
        all[job.line] += 1;
        if job.at > horizon {
            late[job.line] += 1;
        }
    }
    jobs.retain(|j| j.at <= horizon);
    late.iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| {
            format!(
                "workload: arrivals[{i}] (line {}): {n} of its {} jobs arrive after the horizon ({}) and are not replayed",
                workload.arrivals[i].name,
                all[i],
                humantime::format_duration(horizon)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::file::visit;

    fn cluster(text: &str) -> Vec<ClusterObject> {
        let mut objects = Vec::new();
        visit(text, |o| objects.push(o)).unwrap();
        objects
    }

    const QUEUE: &str = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: training}\nspec: {weight: 1}\n";

    #[test]
    fn a_queue_the_cluster_lacks_is_refused_naming_the_field() {
        let w = Workload::parse(
            "arrivals: [{name: a, duration: 1m, queue: training, pod: {gpus: 1}}, {name: b, duration: 1m, queue: trainig, pod: {gpus: 1}}]",
        )
        .unwrap();
        let e = queues_exist(&w, &cluster(QUEUE)).unwrap_err();
        assert!(
            e.contains("arrivals[1].queue (line b): queue \"trainig\" is not in the cluster (it has training)"),
            "{e}"
        );
        let default =
            Workload::parse("arrivals: [{name: a, duration: 1m, queue: default, pod: {gpus: 1}}]")
                .unwrap();
        assert_eq!(queues_exist(&default, &[]), Ok(()));
    }

    #[test]
    fn two_variants_of_one_name_are_refused() {
        let e = names_unique(["a", "b", "a"]).unwrap_err();
        assert!(e.contains("two variants are named a"), "{e}");
        assert_eq!(names_unique(["a", "b"]), Ok(()));
    }

    #[test]
    fn jobs_after_the_horizon_are_dropped_and_told() {
        let w = Workload::parse(
            "horizon: 1h\narrivals: [{name: a, every: 20m, count: 6, duration: 1m, pod: {gpus: 1}}]",
        )
        .unwrap();
        let mut jobs = w.expand(1);
        let notes = drop_after_horizon(&w, &mut jobs);
        assert_eq!(jobs.len(), 4, "0, 20, 40 and 60 minutes");
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("2 of its 6 jobs arrive after the horizon (1h)"),
            "{}",
            notes[0]
        );
    }
}
