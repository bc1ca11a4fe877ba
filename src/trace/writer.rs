//! The thread that writes a trace: it takes what the recorder queued, every
//! `flush_every` and once more when stopped, writes it as lines and flushes.
//!
//! It wakes on its own clock rather than on each event: waking a thread per
//! event would cost the request that queued it a system call, the very cost
//! the queue is there to keep off requests (see `log_writer` for the same
//! reasoning about log lines).

use super::budget::QueueBudget;
use super::recorder::TraceSettings;
use prometheus_client::metrics::counter::Counter;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Stops the writer (after it wrote out what was queued, or gave up waiting
/// for the file to take it) when dropped.
pub struct TraceWriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Closed by the thread as it ends.
    ended: Receiver<()>,
    finish_within: Duration,
    budget: QueueBudget,
    path: PathBuf,
}

impl TraceWriter {
    /// Starts the thread writing the lines `queue` receives to `file`; each
    /// line's bytes go back to `budget` once written.
    pub(super) fn start(
        file: File,
        path: PathBuf,
        queue: Receiver<String>,
        budget: QueueBudget,
        settings: &TraceSettings,
        dropped: Counter,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let (ending, ended): (Sender<()>, Receiver<()>) = channel();
        let flush_every = settings.flush_every;
        let mut sink = Sink {
            out: BufWriter::with_capacity(64 * 1024, file),
            path: path.clone(),
            budget: budget.clone(),
            dropped,
            failing: false,
        };
        let thread = std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || {
                // Dropped when the thread ends, however it ends.
                let _ending = ending;
                sink.run(&queue, &stopped, flush_every);
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
            ended,
            finish_within: settings.finish_within,
            budget,
            path,
        })
    }

    /// Writes out what was queued so far and stops; gives up after
    /// `finish_within` when the file does not take it (a stuck disk, a pipe
    /// nobody reads), so that a server asked to stop does stop.
    pub fn finish(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return;
        };
        thread.thread().unpark();
        match self.ended.recv_timeout(self.finish_within) {
            Err(RecvTimeoutError::Timeout) => {
                // The thread is left blocked in its write; the process ends
                // without it.
                tracing::warn!(
                    file = %self.path.display(),
                    waited = ?self.finish_within,
                    bytes = self.budget.used(),
                    "the trace file did not take what was left to write in time; stopping without it"
                );
            }
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

struct Sink {
    out: BufWriter<File>,
    path: PathBuf,
    budget: QueueBudget,
    dropped: Counter,
    /// A write failed and was reported; reported again only once it recovered.
    failing: bool,
}

impl Sink {
    fn run(&mut self, queue: &Receiver<String>, stop: &AtomicBool, flush_every: Duration) {
        loop {
            // Parked until the next flush or a stop; a spurious wakeup parks again.
            let due = Instant::now() + flush_every;
            while !stop.load(Ordering::Acquire) {
                let now = Instant::now();
                if now >= due {
                    break;
                }
                std::thread::park_timeout(due - now);
            }
            let stopping = stop.load(Ordering::Acquire);
            while let Ok(line) = queue.try_recv() {
                self.write(&line);
            }
            let flushed = self.out.flush();
            self.report(flushed);
            if stopping {
                return;
            }
        }
    }

    fn write(&mut self, line: &str) {
        let written = self.out.write_all(line.as_bytes());
        self.budget.give_back(line.len());
        if written.is_err() {
            self.dropped.inc();
        }
        self.report(written);
    }

    fn report(&mut self, result: std::io::Result<()>) {
        match result {
            Ok(()) => self.failing = false,
            Err(error) if !self.failing => {
                self.failing = true;
                tracing::error!(file = %self.path.display(), %error, "could not write the trace");
            }
            Err(_) => {}
        }
    }
}

/// Opens the trace for appending (a server started again with the same file
/// continues it). A last line a stopped server left unfinished is cut off
/// first, so that the lines appended after it stay readable.
pub(super) fn open_for_append(path: &Path) -> std::io::Result<File> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        // It holds pod specs (images, arguments, other tools' annotations):
        // readable by whoever runs the server only.
        .mode(0o600)
        .open(path)?;
    let metadata = file.metadata()?;
    // A trace an earlier version created readable by others is continued
    // readable by its owner only, like a new one.
    let mode = metadata.permissions().mode();
    if metadata.is_file() && mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7700))?;
        tracing::info!(file = %path.display(), "made the trace readable by its owner only");
    }
    let len = metadata.len();
    let keep = complete_length(&mut file, len)?;
    if keep < len {
        file.set_len(keep)?;
        tracing::warn!(file = %path.display(), bytes = len - keep, "removed the unfinished last line of the trace");
    }
    Ok(file)
}

/// The length of the file up to and including its last newline.
fn complete_length(file: &mut File, len: u64) -> std::io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    let mut block = vec![0u8; BLOCK as usize];
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let size = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block[..size])?;
        if let Some(i) = block[..size].iter().rposition(|b| *b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}
