//! Hot reloading of the TLS configuration when the mounted files change.
//!
//! The current configuration lives in an [`ArcSwap`]; the accept loop loads it once per
//! connection, so a swap affects only connections accepted afterwards and never
//! disturbs established ones. Polling (rather than inotify) is used because it copes
//! with every way a file can be replaced, including Kubernetes' symlink swaps, and costs
//! three small reads every few seconds.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::tls_config::{CertificateSource, TlsInputs};

/// What the reloader remembers between checks, so it rebuilds only on real changes and
/// warns once per problem instead of on every tick.
struct ReloadState {
    /// Inputs of the configuration currently being served.
    applied: TlsInputs,
    /// The most recent inputs that failed to build, if they are still on disk.
    rejected: Option<TlsInputs>,
    /// The most recent read failure, to avoid repeating the same warning.
    read_error: Option<String>,
}

/// Starts the background task that polls `source` every `interval` and swaps a newly
/// built configuration into `current`. Returns `None` when there is nothing to watch
/// or reloading is disabled (`interval` is zero).
pub(crate) fn spawn(
    source: CertificateSource,
    applied: TlsInputs,
    current: Arc<ArcSwap<ServerConfig>>,
    interval: Duration,
) -> Option<JoinHandle<()>> {
    if interval.is_zero() || !source.has_files() {
        return None;
    }
    let source = Arc::new(source);
    Some(tokio::spawn(async move {
        let mut state = ReloadState {
            applied,
            rejected: None,
            read_error: None,
        };
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // The first tick fires at once; the configuration was just built from the
        // same files, so skip it.
        ticker.tick().await;
        loop {
            ticker.tick().await;
            check_once(&source, &mut state, &current).await;
        }
    }))
}

async fn check_once(
    source: &Arc<CertificateSource>,
    state: &mut ReloadState,
    current: &ArcSwap<ServerConfig>,
) {
    let reader = Arc::clone(source);
    let read = match tokio::task::spawn_blocking(move || reader.read()).await {
        Ok(read) => read,
        Err(join_error) => {
            tracing::warn!(error = %join_error, "TLS reload check did not complete");
            return;
        }
    };
    let inputs = match read {
        Ok(inputs) => {
            state.read_error = None;
            inputs
        }
        Err(error) => {
            let message = error.to_string();
            if state.read_error.as_ref() != Some(&message) {
                tracing::warn!(
                    error = %message,
                    "cannot read TLS files; keeping the current certificate"
                );
                state.read_error = Some(message);
            }
            return;
        }
    };
    if inputs == state.applied || state.rejected.as_ref() == Some(&inputs) {
        return;
    }
    match source.build(&inputs) {
        Ok(config) => {
            current.store(Arc::new(config));
            state.applied = inputs;
            state.rejected = None;
            tracing::info!("TLS files changed; new connections use the reloaded certificate");
        }
        Err(error) => {
            // Files are often replaced one at a time; the next change usually fixes
            // this, and until then the previous certificate keeps working.
            tracing::warn!(
                error = %error,
                "changed TLS files are unusable; keeping the current certificate"
            );
            state.rejected = Some(inputs);
        }
    }
}
