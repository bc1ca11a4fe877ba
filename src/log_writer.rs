//! Standard output for the logs, buffered in memory and written out in chunks.
//!
//! A placement logs a line; written straight to the pipe or file behind standard
//! output, that line cost a system call on the request's thread, as much time as
//! the placement decision itself. Handing lines to a writer thread instead wakes
//! that thread for every line, and on a busy machine those wakeups preempt request
//! handlers. So lines are appended to a buffer (a copy, no system call) and
//! written out when it holds `CHUNK` bytes, when a warning or error arrives (those
//! are never held back), every `FLUSH_INTERVAL`, and when the process ends cleanly.
//! Like klog's periodic flush, a hard crash can lose the last interval's info lines.

use parking_lot::Mutex;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Buffered bytes that trigger a write.
const CHUNK: usize = 32 * 1024;
/// Longest an info line waits in the buffer.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// Lines not yet written, and where they go.
struct Pending {
    lines: Vec<u8>,
    out: Box<dyn Write + Send>,
}

impl Pending {
    /// Writes out the buffer. Called with it locked, so chunks go out in the order
    /// their lines were logged.
    fn write_out(&mut self) {
        if self.lines.is_empty() {
            return;
        }
        // Nowhere to report a failed log write; the lines are dropped.
        let _ = self
            .out
            .write_all(&self.lines)
            .and_then(|()| self.out.flush());
        self.lines.clear();
    }
}

struct Shared {
    pending: Mutex<Pending>,
    stopped: AtomicBool,
}

impl Shared {
    fn flush(&self) {
        self.pending.lock().write_out();
    }
}

/// The writer to give `tracing_subscriber::fmt().with_writer(..)`.
#[derive(Clone)]
pub struct BufferedStdout {
    shared: Arc<Shared>,
}

/// Flushes what is buffered and stops the periodic flush when dropped.
pub struct FlushGuard {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Release);
        if let Some(flusher) = self.flusher.take() {
            flusher.thread().unpark();
            let _ = flusher.join();
        }
        self.shared.flush();
    }
}

/// A buffered standard output and the guard that flushes it at the end.
pub fn buffered_stdout() -> (BufferedStdout, FlushGuard) {
    buffered(Box::new(std::io::stdout()))
}

fn buffered(out: Box<dyn Write + Send>) -> (BufferedStdout, FlushGuard) {
    let shared = Arc::new(Shared {
        pending: Mutex::new(Pending {
            lines: Vec::with_capacity(CHUNK * 2),
            out,
        }),
        stopped: AtomicBool::new(false),
    });
    let flusher_shared = shared.clone();
    let flusher = std::thread::Builder::new()
        .name("log-flush".into())
        .spawn(move || {
            while !flusher_shared.stopped.load(Ordering::Acquire) {
                std::thread::park_timeout(FLUSH_INTERVAL);
                flusher_shared.flush();
            }
        })
        .ok();
    (
        BufferedStdout {
            shared: shared.clone(),
        },
        FlushGuard { shared, flusher },
    )
}

/// Where one log line goes.
pub struct LineSink<'a> {
    shared: &'a Shared,
    /// Warnings and errors are written out at once.
    urgent: bool,
}

impl Write for LineSink<'_> {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut pending = self.shared.pending.lock();
        pending.lines.extend_from_slice(line);
        if self.urgent || pending.lines.len() >= CHUNK {
            pending.write_out();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BufferedStdout {
    type Writer = LineSink<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineSink {
            shared: &self.shared,
            urgent: false,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        LineSink {
            shared: &self.shared,
            urgent: *meta.level() <= Level::WARN,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An output whose contents the test can read.
    #[derive(Clone, Default)]
    pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    impl Captured {
        /// What was written, as text.
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().clone()).expect("UTF-8 log")
        }
    }

    fn line(writer: &BufferedStdout, level: Level, text: &str) {
        let mut sink = LineSink {
            shared: &writer.shared,
            urgent: level <= Level::WARN,
        };
        sink.write_all(text.as_bytes()).expect("write");
    }

    #[test]
    fn info_lines_wait_and_warnings_take_them_out_in_order() {
        let out = Captured::default();
        let (writer, guard) = buffered(Box::new(out.clone()));
        line(&writer, Level::INFO, "held\n");
        assert!(out.0.lock().is_empty(), "an info line waits");
        line(&writer, Level::WARN, "warned\n");
        assert_eq!(&*out.0.lock(), b"held\nwarned\n");
        line(&writer, Level::INFO, &"x".repeat(CHUNK));
        assert_eq!(
            out.0.lock().len(),
            12 + CHUNK,
            "a full chunk is written out"
        );
        line(&writer, Level::DEBUG, "last\n");
        drop(guard);
        assert!(
            out.0.lock().ends_with(b"last\n"),
            "the guard flushes at the end"
        );
    }

    #[test]
    fn the_periodic_flush_writes_waiting_lines() {
        let out = Captured::default();
        let (writer, _guard) = buffered(Box::new(out.clone()));
        line(&writer, Level::INFO, "tick\n");
        let deadline = std::time::Instant::now() + FLUSH_INTERVAL * 20;
        while out.0.lock().is_empty() {
            assert!(std::time::Instant::now() < deadline, "never flushed");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(&*out.0.lock(), b"tick\n");
    }
}
