//! The `seckill` binary: parses the command line and hands over to the
//! library.

use std::process::ExitCode;

use clap::Parser;
use seckill::cli::{Cli, Command, LogFormat};
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: a sale allocates and frees many
/// small buffers (HTTP, JSON, Redis replies), and glibc's allocator was a
/// sixth of an instance's CPU in the profile of a sale.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format, &cli.command);
    let result = match cli.command {
        Command::Serve(args) => seckill::instance::serve::run(args).await.map(|()| true),
        Command::Lab(args) => seckill::lab::run(args).await.map(|()| true),
        Command::Race(args) => seckill::race::run(args).await,
        Command::Bench(args) => seckill::race::bench::run(args).await,
        Command::Check(args) => seckill::judge::check::run(args).await,
        Command::Reconcile(args) => seckill::cli::drift::run(args).await,
        Command::Report(args) => seckill::judge::report::run(args).await.map(|()| true),
        Command::Strategies(args) => seckill::cli::generated::run(&args).map(|()| true),
        Command::Tokens(args) => seckill::instance::auth::tokens::run(&args).map(|()| true),
        Command::Errors => {
            print!("{}", seckill::cli::generated::status_table());
            Ok(true)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr; `RUST_LOG` filters (default: info for `serve`, warn
/// for the tools, whose output is their table).
fn init_tracing(format: LogFormat, command: &Command) {
    // A FUSE reply to a process a power cut has killed has nowhere to go;
    // fuser logs that as an error, which in the lab it is not.
    let default = match command {
        Command::Serve(_) => "info",
        _ => "warn,fuser::reply=off",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
