//! The runtime for work that keeps the ledger in line with the cluster: watches
//! and their relists, the periodic resync, node housekeeping, the reservation
//! sweeper, leader election and the gang planner.
//!
//! None of it answers kube-scheduler, and some of it comes in bursts (a relist
//! decodes thousands of objects, a planning cycle over 5,000 nodes takes a tenth of
//! a second). On the request threads such a burst would queue `/filter` calls behind
//! it, or, with a second request thread to absorb it, have request threads preempt
//! each other on a small machine. On a thread of its own it only competes for a core
//! when it has work, and the request threads can stay few.

use tokio::runtime::{Builder, Handle, Runtime};

/// A one-thread multi-threaded runtime (so that `block_in_place` works for a
/// planning cycle) that stops, without waiting, when dropped.
pub struct BackgroundRuntime {
    runtime: Option<Runtime>,
    handle: Handle,
}

impl BackgroundRuntime {
    pub fn start() -> std::io::Result<Self> {
        let runtime = Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("background")
            .enable_all()
            .build()?;
        Ok(Self {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    /// The handle to spawn on; `Handle::enter` makes plain `tokio::spawn` (as the
    /// watch and housekeeping modules use) land here.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for BackgroundRuntime {
    fn drop(&mut self) {
        // Dropping a runtime blocks until its tasks stop, which is not allowed on
        // an async thread (where `serve` ends); the tasks were aborted already.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn spawned_work_runs_on_the_background_thread_and_drop_inside_async_is_fine() {
        let background = BackgroundRuntime::start().expect("runtime");
        let name = background
            .handle()
            .spawn(async { std::thread::current().name().map(str::to_string) })
            .await
            .expect("join");
        assert_eq!(name.as_deref(), Some("background"));
        let entered = {
            let _inside = background.handle().enter();
            tokio::spawn(async { std::thread::current().name().map(str::to_string) })
        };
        assert_eq!(entered.await.expect("join").as_deref(), Some("background"));
        // A planning cycle uses block_in_place, which needs the multi-threaded flavor.
        let planned = background
            .handle()
            .spawn(async { tokio::task::block_in_place(|| 6 * 7) })
            .await
            .expect("join");
        assert_eq!(planned, 42);
        drop(background);
    }
}
