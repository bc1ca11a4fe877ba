//! Runs the HTTP server on its own thread and tokio runtime, so it keeps
//! answering even when a test blocks its own runtime (std::process waits,
//! blocking sleeps, a current-thread `#[tokio::test]`).

use super::handlers;
use super::state::Shared;
use axum::Router;
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

/// Handles to stop the server thread and learn when it has stopped.
pub struct ServerThread {
    pub stop: oneshot::Sender<()>,
    pub done: oneshot::Receiver<()>,
}

/// Serves `listener` (already bound, non-blocking) until `stop` fires or is
/// dropped.
pub fn spawn(listener: std::net::TcpListener, state: Arc<Shared>) -> ServerThread {
    let (stop, stop_rx) = oneshot::channel::<()>();
    let (done_tx, done) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("fake-apiserver".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("fake-apiserver-worker")
                .enable_all()
                .build()
                .expect("fake apiserver runtime");
            rt.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("fake apiserver listener");
                let app = Router::new()
                    .fallback(handlers::handle)
                    .with_state(state.clone());
                let stopping = Arc::new(Notify::new());
                let signal = stopping.clone();
                let server = tokio::spawn(
                    axum::serve(listener, app)
                        .with_graceful_shutdown(async move { signal.notified().await })
                        .into_future(),
                );
                let _ = stop_rx.await;
                state.store.lock().drop_watchers();
                stopping.notify_one();
                let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
            });
            rt.shutdown_timeout(Duration::from_millis(200));
            let _ = done_tx.send(());
        })
        .expect("spawn fake apiserver thread");
    ServerThread { stop, done }
}
