//! Logging for a bench run as the server logs, when `RUST_LOG` asks for it:
//! `RUST_LOG=vgpu_scheduler::gang::cycle_stages=debug` shows what each planning
//! cycle spent, stage by stage.

/// Sends the library's log to standard error, filtered by `RUST_LOG`, if it is
/// set; logs nothing otherwise (timings stay free of it).
pub fn log_from_env() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
}
