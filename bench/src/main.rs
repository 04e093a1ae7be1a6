//! `hookd-bench`: runnable benchmarks of the real hookd binary, one subcommand each.
//!
//! The house rule is that speed is measured, not asserted in tests: each subcommand starts
//! `target/release/hookd` on a fresh database, loads it from this process, prints a Markdown
//! table, and with `--write-docs` rewrites its own section of `docs/benchmarks.md` together
//! with the command, the date and the machine.
//!
//! Shared parts, one module each: [`hookd`] (the child process and its database),
//! [`receiver`] (the local webhook receiver), [`api`] (setting hookd up), [`load`] (the
//! closed-loop load generator with latency histograms), [`machine`] (what it ran on) and
//! [`report`] (table cells and the docs-section writer). Each benchmark is a module of its
//! own on top of them: [`publish`].

mod api;
mod hookd;
mod load;
mod machine;
mod publish;
mod receiver;
mod report;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "hookd-bench", about = "Benchmarks of the hookd release binary")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Publish throughput: POST /api/v1/app/{app}/msg at a fixed number of requests in flight.
    Publish(publish::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Publish(args) => publish::run(args).await,
        }
    });
    match result {
        Ok(verdict) => verdict,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
