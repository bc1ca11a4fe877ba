//! What the end-to-end burst's API server charges for each call, so that a run
//! weighs the calls of each side as a real control plane would: the fake on
//! loopback answers in microseconds, and without a cost the calls a placement
//! adds look free.
//!
//! `lane` is the control plane's capacity every call shares (the API server's
//! and etcd's CPU, etcd's commit stream): each call holds it for its service
//! time after the calls before it. `latency` is what each call waits on its own
//! (etcd's disk sync, round trips), side by side with the calls in flight with
//! it. docs/benchmarks.md ("A control plane that costs what a real one does")
//! says how the figures of [`ControlPlaneCost::CALIBRATED`] were derived from
//! a real cluster's.

use super::fake_apiserver::FakeApiServer;
use std::time::Duration;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ControlPlaneCost {
    pub read_service: Duration,
    pub write_service: Duration,
    pub read_latency: Duration,
    pub write_latency: Duration,
}

const fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

impl ControlPlaneCost {
    /// Fitted to a kube-apiserver and etcd on one 2-core machine, whose two
    /// cores the calls keep busy: kube-scheduler alone, its client
    /// unthrottled, binds a burst there at 378–418 pods/s with 3 writes per pod;
    /// here (where the binds come in one flood, ahead of most events, on a lane
    /// that serves calls in order) every call holding the lane 1.1 ms gives
    /// about 400 pods/s, and the previous extender's 15.7 calls per pod 58
    /// pods/s, against 62 measured. A read from etcd answers in about 1 ms, a
    /// write, committed and synced to disk, in about 4.
    pub const CALIBRATED: Self = Self {
        read_service: micros(1_100),
        write_service: micros(1_100),
        read_latency: micros(1_000),
        write_latency: micros(4_000),
    };

    /// Sets the cost on the API server.
    pub fn apply(&self, api: &FakeApiServer) {
        api.set_write_service_time(self.write_service);
        api.set_read_service_time(self.read_service);
        api.set_request_latency(self.read_latency, self.write_latency);
    }

    /// The cost, for the report's header.
    pub fn describe(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        if *self == Self::default() {
            return "calls cost nothing (answered in microseconds)".into();
        }
        format!(
            "each call holds the one lane shared by all {:.2} ms (reads) / {:.2} ms (writes), then waits {:.1} ms (reads) / {:.1} ms (writes) side by side with the others",
            ms(self.read_service),
            ms(self.write_service),
            ms(self.read_latency),
            ms(self.write_latency)
        )
    }
}
