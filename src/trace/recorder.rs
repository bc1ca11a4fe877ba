//! The recorder the scheduler's hooks call: it decides whether an event is new
//! (see `seen`), turns it into a line of at most `line_bytes` (see `line_cap`)
//! and queues it for the writer thread without ever waiting. When the queue
//! holds `queue_bytes` (or `queue` lines) the event is dropped and counted
//! (`vgpu_scheduler_trace_dropped_total`): a trace with a gap is better than a
//! `/filter` or `/bind` that waits for a disk, or a server whose memory grows
//! with what a stuck disk did not take.

use super::budget::QueueBudget;
use super::line::{TraceEvent, TraceLine};
use super::line_cap::encode_capped;
use super::private::{leave_out_private, leave_out_private_of_podgroup};
use super::scrub::{as_created, podgroup_as_created};
use super::seen::{FirstSight, SeenBook};
use super::writer::{TraceWriter, open_for_append};
use crate::object_namespace::namespace_of;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// How a recorder queues and writes.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// Lines that may wait for the writer; more are dropped.
    pub queue: usize,
    /// Bytes of lines that may wait for the writer; more are dropped.
    pub queue_bytes: usize,
    /// The longest line written (see `line_cap`).
    pub line_bytes: usize,
    /// How often the writer writes out and flushes what is queued.
    pub flush_every: Duration,
    /// How long a stopping server waits for the file to take what is queued.
    pub finish_within: Duration,
    /// Pods (and PodGroups) followed at once; more are not recorded.
    pub tracked: usize,
    /// Keep environment variable values and the last-applied configuration
    /// (see `private`).
    pub verbatim: bool,
}

impl Default for TraceSettings {
    fn default() -> Self {
        Self {
            // Five seconds of a thousand pods a second filtered, bound and gone,
            // at one write-out every 200 ms.
            queue: 16 * 1024,
            // As many ordinary pods (a few KiB each), while a disk that stops
            // taking lines costs at most this much memory.
            queue_bytes: 32 * 1024 * 1024,
            // The most annotations the API server lets a pod carry, with room
            // for its spec.
            line_bytes: 320 * 1024,
            flush_every: Duration::from_millis(200),
            // Within the 30 s a pod is given to stop, with room for the rest.
            finish_within: Duration::from_secs(5),
            tracked: 100_000,
            verbatim: false,
        }
    }
}

/// Queues trace events for the writer thread.
pub struct TraceRecorder {
    queue: SyncSender<String>,
    budget: QueueBudget,
    line_bytes: usize,
    verbatim: bool,
    seen: Mutex<SeenBook>,
    dropped: Counter,
    warned: AtomicBool,
    path: PathBuf,
}

impl TraceRecorder {
    /// Opens (or continues) the trace at `path` and starts its writer; events
    /// not recorded are counted in `dropped`.
    pub fn open(
        path: &Path,
        settings: &TraceSettings,
        dropped: Counter,
    ) -> std::io::Result<(Arc<Self>, TraceWriter)> {
        let file = open_for_append(path)?;
        let (queue, receiver) = sync_channel(settings.queue.max(1));
        let budget = QueueBudget::new(settings.queue_bytes);
        let writer = TraceWriter::start(
            file,
            path.to_path_buf(),
            receiver,
            budget.clone(),
            settings,
            dropped.clone(),
        )?;
        let recorder = Arc::new(Self {
            queue,
            budget,
            line_bytes: settings.line_bytes,
            verbatim: settings.verbatim,
            seen: Mutex::new(SeenBook::new(settings.tracked)),
            dropped,
            warned: AtomicBool::new(false),
            path: path.to_path_buf(),
        });
        Ok((recorder, writer))
    }

    /// A pod seen waiting for a node: recorded the first time.
    pub fn pod(&self, at: DateTime<Utc>, pod: &Pod) {
        let (Some(uid), Some(name)) = (pod.metadata.uid.as_deref(), pod.metadata.name.as_deref())
        else {
            return;
        };
        // Called on every `/filter`: the key is made only for a pod not seen before.
        let key = || format!("{}/{name}", namespace_of(&pod.metadata));
        // Sent under the book's lock, so that a bind or end decided after this
        // first sight is queued after it (`try_send` never waits).
        let mut seen = self.seen.lock();
        match seen.pod(uid, at, key) {
            FirstSight::New => {
                let line = || {
                    let mut pod = as_created(pod);
                    if !self.verbatim {
                        leave_out_private(&mut pod);
                    }
                    TraceLine {
                        at,
                        event: TraceEvent::Pod(Box::new(pod)),
                    }
                };
                if !self.send(line) {
                    // Not followed: a later sight records it when there is room,
                    // and its bind is not written for a pod the trace lacks.
                    seen.gone(uid);
                }
            }
            FirstSight::Full => self.dropped_one("too many pods followed at once"),
            FirstSight::Known => {}
        }
    }

    /// A pod seen bound to `node`: recorded the first time, for a pod recorded
    /// waiting.
    pub fn bound(&self, at: DateTime<Utc>, uid: &str, node: &str) {
        let mut seen = self.seen.lock();
        if let Some(pod) = seen.bound(uid) {
            self.send(|| TraceLine {
                at,
                event: TraceEvent::Bound {
                    pod,
                    uid: uid.to_string(),
                    node: node.to_string(),
                },
            });
        }
    }

    /// A pod deleted or finished: recorded once, for a pod recorded waiting.
    pub fn gone(&self, at: DateTime<Utc>, uid: &str) {
        let mut seen = self.seen.lock();
        if let Some(pod) = seen.gone(uid) {
            self.send(|| TraceLine {
                at,
                event: TraceEvent::Gone {
                    pod,
                    uid: uid.to_string(),
                },
            });
        }
    }

    /// After a full list of pods: records as gone each pod followed since
    /// before `listed_from` that the list lacks (deleted while no watch told
    /// of it), so that it is not followed for good.
    pub fn retain(
        &self,
        at: DateTime<Utc>,
        listed_from: DateTime<Utc>,
        existing: &HashSet<String>,
    ) {
        let mut seen = self.seen.lock();
        for uid in seen.missing(listed_from, |uid| existing.contains(uid)) {
            if let Some(pod) = seen.gone(&uid) {
                self.send(|| TraceLine {
                    at,
                    event: TraceEvent::Gone { pod, uid },
                });
            }
        }
    }

    /// A PodGroup seen (JSON as the API serves it): recorded the first time.
    pub fn podgroup(&self, at: DateTime<Utc>, namespace: &str, name: &str, group: &Value) {
        let id = format!("{namespace}/{name}");
        let mut seen = self.seen.lock();
        if seen.group(&id) {
            let line = || {
                let mut group = podgroup_as_created(group);
                if !self.verbatim {
                    leave_out_private_of_podgroup(&mut group);
                }
                TraceLine {
                    at,
                    event: TraceEvent::PodGroup(Box::new(group)),
                }
            };
            if !self.send(line) {
                seen.forget_group(&id);
            }
        }
    }

    /// A PodGroup deleted: one created again under its name is recorded anew.
    pub fn forget_podgroup(&self, namespace: &str, name: &str) {
        self.seen
            .lock()
            .forget_group(&format!("{namespace}/{name}"));
    }

    /// Queues the line `line` makes, if there is room for it; whether it was.
    /// The line is made only when the queue is not full already, so a stuck
    /// disk costs a request no serialisation.
    fn send(&self, line: impl FnOnce() -> TraceLine) -> bool {
        if self.budget.is_full() {
            self.dropped_one("the writer is behind");
            return false;
        }
        let Some(text) = encode_capped(&line(), self.line_bytes) else {
            self.dropped_one("a line would be longer than the cap even without its annotations");
            return false;
        };
        let bytes = text.len();
        if !self.budget.try_take(bytes) {
            self.dropped_one("the writer is behind");
            return false;
        }
        match self.queue.try_send(text) {
            Ok(()) => true,
            Err(error) => {
                self.budget.give_back(bytes);
                self.dropped_one(match error {
                    TrySendError::Full(_) => "the writer is behind",
                    TrySendError::Disconnected(_) => "the writer stopped",
                });
                false
            }
        }
    }

    fn dropped_one(&self, why: &str) {
        self.dropped.inc();
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                file = %self.path.display(),
                why,
                "trace events are being dropped (counted in vgpu_scheduler_trace_dropped_total; logged once)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::read::parse_trace;
    use serde_json::json;

    fn pod(name: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                         "annotations": {"hami.io/vgpu-node": "n1"}},
            "spec": {"containers": [{"name": "main"}]}
        }))
        .unwrap()
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_750_000_000 + seconds, 0).unwrap()
    }

    fn settings(queue: usize, flush_every: Duration) -> TraceSettings {
        TraceSettings {
            queue,
            flush_every,
            tracked: 1000,
            ..TraceSettings::default()
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let dropped = Counter::default();
        // The writer would take the queue out only in an hour: nothing makes room.
        let (recorder, writer) = TraceRecorder::open(
            &path,
            &settings(2, Duration::from_secs(3600)),
            dropped.clone(),
        )
        .unwrap();
        for i in 0..10 {
            recorder.pod(at(i), &pod(&format!("p{i}")));
        }
        assert_eq!(dropped.get(), 8, "two queued, the rest dropped");
        writer.finish();
        let trace = parse_trace(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            trace.lines.len(),
            2,
            "what was queued is written at the stop"
        );
    }

    fn pod_with_annotation(name: &str, bytes: usize) -> Pod {
        let mut pod = pod(name);
        pod.metadata
            .annotations
            .get_or_insert_default()
            .insert("example.com/state".into(), "x".repeat(bytes));
        pod
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_whatever_the_number_of_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let dropped = Counter::default();
        let settings = TraceSettings {
            queue: 1000,
            queue_bytes: 100 * 1024,
            ..settings(1000, Duration::from_secs(3600))
        };
        let (recorder, writer) = TraceRecorder::open(&path, &settings, dropped.clone()).unwrap();
        for i in 0..10 {
            recorder.pod(at(i), &pod_with_annotation(&format!("p{i}"), 30 * 1024));
        }
        assert_eq!(dropped.get(), 7, "three lines of 30 KiB fit in 100 KiB");
        writer.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(parse_trace(&text).unwrap().lines.len(), 3);
        // Written lines make room again.
        let (recorder, writer) = TraceRecorder::open(&path, &settings, dropped.clone()).unwrap();
        recorder.pod(at(20), &pod_with_annotation("p0", 30 * 1024));
        writer.finish();
        assert_eq!(dropped.get(), 7);
    }

    #[test]
    fn a_pod_with_huge_annotations_makes_a_capped_line_naming_what_it_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let dropped = Counter::default();
        let (recorder, writer) = TraceRecorder::open(
            &path,
            &settings(10, Duration::from_secs(3600)),
            dropped.clone(),
        )
        .unwrap();
        recorder.pod(at(0), &pod_with_annotation("big", 1 << 20));
        recorder.bound(at(1), "uid-big", "n1");
        writer.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        let first = text.lines().next().unwrap();
        assert!(
            first.len() < TraceSettings::default().line_bytes,
            "{}",
            first.len()
        );
        let line: Value = serde_json::from_str(first).unwrap();
        assert_eq!(
            line["omittedAnnotations"],
            serde_json::json!(["example.com/state"])
        );
        assert_eq!(line["pod"]["metadata"]["name"], "big");
        let trace = parse_trace(&text).unwrap();
        assert_eq!(trace.lines.len(), 2, "the pod and its bind");
        assert_eq!(dropped.get(), 0);
    }

    #[test]
    fn stopping_waits_for_a_file_that_takes_nothing_only_so_long() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.fifo");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; creates a named pipe nobody reads.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let settings = TraceSettings {
            finish_within: Duration::from_millis(500),
            ..settings(1000, Duration::from_secs(3600))
        };
        let dropped = Counter::default();
        let (recorder, writer) = TraceRecorder::open(&path, &settings, dropped.clone()).unwrap();
        // Far more than the pipe and the writer's buffer hold.
        for i in 0..20 {
            recorder.pod(at(i), &pod_with_annotation(&format!("p{i}"), 100 * 1024));
        }
        assert_eq!(dropped.get(), 0);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            writer.finish();
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(30))
            .expect("stopping the writer returns though the file takes nothing");
    }

    #[test]
    fn each_event_is_written_once_and_pods_without_their_first_sight_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let dropped = Counter::default();
        let (recorder, writer) = TraceRecorder::open(
            &path,
            &settings(100, Duration::from_secs(3600)),
            dropped.clone(),
        )
        .unwrap();
        let p = pod("a");
        recorder.pod(at(0), &p);
        recorder.pod(at(1), &p);
        recorder.bound(at(2), "uid-a", "n1");
        recorder.bound(at(3), "uid-a", "n1");
        recorder.bound(at(3), "uid-elsewhere", "n1");
        recorder.gone(at(4), "uid-a");
        recorder.gone(at(5), "uid-a");
        let group = json!({"metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 1}, "status": {"phase": "Running"}});
        recorder.podgroup(at(6), "ml", "g", &group);
        recorder.podgroup(at(7), "ml", "g", &group);
        writer.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[0]["at"], "2025-06-15T15:06:40.000Z");
        assert_eq!(lines[0]["pod"]["metadata"]["name"], "a");
        assert!(
            lines[0]["pod"]["metadata"].get("annotations").is_none()
                || lines[0]["pod"]["metadata"]["annotations"]
                    .get("hami.io/vgpu-node")
                    .is_none(),
            "placement left out: {text}"
        );
        assert_eq!(lines[1]["bound"], "ml/a");
        assert_eq!(lines[1]["node"], "n1");
        assert_eq!(lines[2]["gone"], "ml/a");
        assert_eq!(lines[3]["podGroup"]["metadata"]["name"], "g");
        assert!(lines[3]["podGroup"].get("status").is_none(), "{text}");
        assert_eq!(dropped.get(), 0);
    }

    #[test]
    fn a_trace_is_continued_and_an_unfinished_last_line_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let whole = r#"{"at":"2025-06-15T15:06:40.000Z","gone":"ml/x","uid":"ux"}"#;
        std::fs::write(&path, format!("{whole}\n{{\"at\":\"2025-06-")).unwrap();
        let (recorder, writer) = TraceRecorder::open(
            &path,
            &settings(10, Duration::from_secs(3600)),
            Counter::default(),
        )
        .unwrap();
        recorder.pod(at(1), &pod("b"));
        writer.finish();
        let trace = parse_trace(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
        assert_eq!(trace.lines.len(), 2);
    }

    #[test]
    fn a_new_trace_file_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let (_recorder, writer) =
            TraceRecorder::open(&path, &TraceSettings::default(), Counter::default()).unwrap();
        writer.finish();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    #[test]
    fn a_trace_file_readable_by_others_is_continued_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (_recorder, writer) =
            TraceRecorder::open(&path, &TraceSettings::default(), Counter::default()).unwrap();
        writer.finish();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    /// A pod with a secret in an environment variable and in kubectl's copy of
    /// what was applied; its PodGroup with such a copy too.
    fn record_private(verbatim: bool) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let settings = TraceSettings {
            verbatim,
            ..settings(10, Duration::from_secs(3600))
        };
        let (recorder, writer) = TraceRecorder::open(&path, &settings, Counter::default()).unwrap();
        let applied = "kubectl.kubernetes.io/last-applied-configuration";
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "uid": "uid-p",
                         "annotations": {applied: "{\"TOKEN\":\"applied-secret\"}"}},
            "spec": {"containers": [{"name": "main",
                     "env": [{"name": "TOKEN", "value": "env-secret"}]}]}
        }))
        .unwrap();
        recorder.pod(at(0), &p);
        let group = json!({"metadata": {"name": "g", "namespace": "ml",
                                        "annotations": {applied: "group-secret"}},
                           "spec": {"minMember": 1}});
        recorder.podgroup(at(1), "ml", "g", &group);
        writer.finish();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn env_values_and_applied_configurations_are_left_out_unless_asked_for() {
        let text = record_private(false);
        for secret in ["env-secret", "applied-secret", "group-secret"] {
            assert!(!text.contains(secret), "{secret}: {text}");
        }
        assert!(
            text.contains(r#"{"name":"TOKEN"}"#),
            "the name stays: {text}"
        );
        let text = record_private(true);
        for secret in ["env-secret", "applied-secret", "group-secret"] {
            assert!(text.contains(secret), "{secret}: {text}");
        }
    }

    #[test]
    fn a_file_that_cannot_be_written_is_an_error_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("trace.jsonl");
        let e = TraceRecorder::open(&missing, &TraceSettings::default(), Counter::default())
            .err()
            .expect("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
