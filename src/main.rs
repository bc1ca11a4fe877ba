use clap::Parser;

/// mimalloc returns freed memory to the system and fragments less than the
/// platform allocator under many threads, which keeps the resident set close to
/// what the ledger really holds after loading a large cluster.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use vgpu_scheduler::config::{Cli, Command};
use vgpu_scheduler::{queues_cli, run};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            run::init_logging(args.log_format);
            match run::serve(*args).await {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("vgpu-scheduler: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Certs(args) => {
            run::init_logging(args.log_format);
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
    }
}
