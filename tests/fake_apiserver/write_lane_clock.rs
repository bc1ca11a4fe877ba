//! The clock the write lane (`set_write_service_time`) runs on: real time by
//! default, or a manual clock a test advances, so a test can hold writes in
//! the lane for as long as it looks and let them through one service time at
//! a time instead of racing the wall clock. Also counts the writes waiting in
//! the lane, so a test can tell when its writes are queued.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[derive(Default)]
pub struct WriteLaneClock {
    /// The manual clock's time; `None`: real time.
    manual: Mutex<Option<watch::Sender<Instant>>>,
    waiting: AtomicUsize,
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

    /// Moves the manual clock on by `d`, releasing the writes due by then.
    pub fn advance(&self, d: Duration) {
        if let Some(time) = &*self.manual.lock() {
            time.send_modify(|t| *t += d);
        }
    }

    /// Writes now waiting for their turn in the lane.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Waits until the lane's clock reaches `at`.
    pub async fn wait_until(&self, at: Instant) {
        /// Counts the write in `waiting` while it waits.
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        let manual = self.manual.lock().as_ref().map(watch::Sender::subscribe);
        match manual {
            Some(mut time) => {
                // The sender lives as long as the server, so this only ends
                // when the clock reaches `at`.
                let _ = time.wait_for(|now| *now >= at).await;
            }
            None => tokio::time::sleep_until(at.into()).await,
        }
    }
}
