//! The clock the write lane (`set_write_service_time`) runs on: real time by
//! default, or a manual clock a test advances, so a test can hold writes in
//! the lane for as long as it looks and let them through one service time at
//! a time instead of racing the wall clock. Also counts the requests waiting in
//! the lane, so a test can tell when its requests are queued, and knows which
//! of them have looked at the manual clock since it last moved: a request the
//! clock released leaves the count only once its task runs, so a test that
//! checks what is still waiting after a move first waits until every waiting
//! request has seen it (the lane is settled).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[derive(Default)]
pub struct WriteLaneClock {
    /// The manual clock's time; `None`: real time.
    manual: Mutex<Option<watch::Sender<Instant>>>,
    /// Every request waiting in the lane, with the manual clock's time it last
    /// looked at (`None`: not yet, or the clock is real time).
    waiting: Mutex<HashMap<u64, Option<Instant>>>,
    next_request: AtomicU64,
}

/// A request's place among the waiting; leaving it (released, or its
/// connection gone) takes it out.
struct Waiting<'a> {
    clock: &'a WriteLaneClock,
    request: u64,
}

impl Waiting<'_> {
    /// Notes that the request has seen the clock at `now` and waits on.
    fn saw(&self, now: Instant) {
        self.clock.waiting.lock().insert(self.request, Some(now));
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.clock.waiting.lock().remove(&self.request);
    }
}

impl WriteLaneClock {
    /// Now, on the lane's clock.
    pub fn now(&self) -> Instant {
        match &*self.manual.lock() {
            Some(time) => *time.borrow(),
            None => Instant::now(),
        }
    }

    /// Stops the lane's clock at the current time; it moves only by
    /// [`WriteLaneClock::advance`] from now on.
    pub fn make_manual(&self) {
        let mut manual = self.manual.lock();
        if manual.is_none() {
            *manual = Some(watch::Sender::new(Instant::now()));
        }
    }

    /// Moves the manual clock on by `d`, releasing the requests due by then
    /// (each as soon as its task runs: see [`WriteLaneClock::settled`]).
    pub fn advance(&self, d: Duration) {
        if let Some(time) = &*self.manual.lock() {
            time.send_modify(|t| *t += d);
        }
    }

    /// Requests now waiting for their turn in the lane or their latency.
    pub fn waiting(&self) -> usize {
        self.waiting.lock().len()
    }

    /// Whether every waiting request has looked at the manual clock since it
    /// last moved: those it released have left, the rest wait on. Always true
    /// on real time, which nobody moves.
    pub fn settled(&self) -> bool {
        let Some(now) = self.manual.lock().as_ref().map(|time| *time.borrow()) else {
            return true;
        };
        self.waiting.lock().values().all(|seen| *seen == Some(now))
    }

    /// Waits until the lane's clock reaches `at`.
    pub async fn wait_until(&self, at: Instant) {
        let request = self.next_request.fetch_add(1, Ordering::SeqCst);
        self.waiting.lock().insert(request, None);
        let waiting = Waiting {
            clock: self,
            request,
        };
        let manual = self.manual.lock().as_ref().map(watch::Sender::subscribe);
        match manual {
            Some(mut time) => loop {
                let now = *time.borrow_and_update();
                if now >= at {
                    break;
                }
                waiting.saw(now);
                // The sender lives as long as the server, so this only ends
                // when the clock moves.
                if time.changed().await.is_err() {
                    break;
                }
            },
            None => tokio::time::sleep_until(at.into()).await,
        }
    }
}
