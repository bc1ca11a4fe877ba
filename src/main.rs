use clap::Parser;

/// mimalloc returns freed memory to the system and fragments less than the
/// platform allocator under many threads, which keeps the resident set close to
/// what the ledger really holds after loading a large cluster.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use vgpu_scheduler::config::{Cli, Command};
use vgpu_scheduler::{queues_cli, run, simulate};

/// Keeps transparent huge pages out of the heap. With them, every 2 MiB range the
/// allocator has touched stays resident as a whole while it holds a single live
/// object, which after loading a large cluster (tens of thousands of small, long
/// lived records among freed parse buffers) costs tens of MiB of RSS for nothing;
/// the scheduler's working set is small and gains nothing from huge pages.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process; no memory
        // is passed to the kernel.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

fn main() -> std::process::ExitCode {
    disable_transparent_huge_pages();
    let cli = Cli::parse();
    let workers = match &cli.command {
        Command::Serve(args) => args.runtime_threads(),
        // Short-lived clients.
        Command::Certs(_) | Command::Queues(_) => 1,
        // A replay runs one decision at a time.
        Command::Simulate(_) => 1,
    };
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run_cli(cli)),
        Err(e) => {
            eprintln!("vgpu-scheduler: start the async runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run_cli(cli: Cli) -> std::process::ExitCode {
    match cli.command {
        Command::Serve(args) => {
            let _log = run::init_logging_at(args.log_format, args.default_log_filter());
            match run::serve(*args).await {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("vgpu-scheduler: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Certs(args) => {
            let _log = run::init_logging(args.log_format);
            match vgpu_scheduler::certs::run(*args).await {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("vgpu-scheduler certs: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Queues(args) => match queues_cli::run(args).await {
            Ok(text) => {
                print!("{text}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vgpu-scheduler queues: {e:#}");
                std::process::ExitCode::FAILURE
            }
        },
        Command::Simulate(args) => match simulate::run(*args).await {
            Ok(text) => {
                print!("{text}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vgpu-scheduler simulate: {e:#}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}
