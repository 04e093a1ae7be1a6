//! `hookd-bench`: runnable benchmarks of the real hookd binary, one subcommand each.
//!
//! The house rule is that speed is measured, not asserted in tests: each subcommand starts
//! `target/release/hookd` on a fresh database, loads it from this process, prints a Markdown
//! table, and with `--write-docs` rewrites its own section of `docs/benchmarks.md` together
//! with the command, the date and the machine.
//!
//! Shared parts, one module each: [`hookd`] (the child process and its database),
//! [`receiver`] (the local webhook receiver), [`api`] (setting hookd up), [`load`] (the
//! closed-loop load generator with latency histograms), [`machine`] (what it ran on),
//! [`cgroup`] (a process held to a share of a core, and its CPU time) and [`report`] (table cells and the docs-section writer). Each benchmark is a module of its
//! own on top of them: [`publish`], [`ceiling`], [`deliver`], [`fanout`], [`isolation`],
//! [`memory`], [`retention`], [`cluster`], [`instructions`], [`search`], [`ordered`],
//! [`sources`], [`replay`], [`destinations`], [`ingest`] and [`storage`] (hookd's store in this process, no HTTP); [`suite`] runs them all with one
//! command. Those that drive hookd for throughput run it at its defaults first, then with
//! `--tuned` flags ([`hookd::Tuning`]).

mod api;
mod ceiling;
mod cgroup;
mod cluster;
mod deliver;
mod destinations;
mod fanout;
mod hookd;
mod ingest;
mod instructions;
mod isolation;
mod load;
mod machine;
mod memory;
mod ordered;
mod publish;
mod receiver;
mod replay;
mod report;
mod retention;
mod search;
mod sources;
mod storage;
mod suite;

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
    /// The machine's ceiling: signed POSTs from this process to a plain receiver in another.
    Ceiling(ceiling::Args),
    /// End to end: publish → hookd → verifying receiver; deliveries/s and latency.
    Deliver(deliver::Args),
    /// One message to many endpoints (default 100).
    Fanout(fanout::Args),
    /// A fast endpoint's latency, alone and beside one that answers after 20 s.
    Isolation(isolation::Args),
    /// hookd's memory while a backlog for a down endpoint builds up and drains.
    Memory(memory::Args),
    /// What the retention purge costs publishers while it deletes a backlog.
    Retention(retention::Args),
    /// Every benchmark in turn, with one command (writes every section of the docs).
    Suite(suite::Args),
    /// CPU instructions per delivered message, counted by callgrind (repeatable under noise).
    Instructions(instructions::Args),
    /// Several hookd processes on one PostgreSQL (deliveries/s with 1, 2, 3) and the outbox's
    /// commit-to-receipt latency.
    Cluster(cluster::Args),
    /// The delivery log's searches on a long history (1 million messages by default).
    Search(search::Args),
    /// Ordered delivery: deliveries/s with 1, 100 and 10,000 ordering keys beside the
    /// unordered rate, and the unordered rate beside ordered traffic.
    Ordered(ordered::Args),
    /// Outbox sources (PostgreSQL, MySQL/MariaDB, SQLite): commit-to-receipt latency and the
    /// relay's rate through a backlog, at hookd's defaults.
    Sources(sources::Args),
    /// Destinations: messages/s to a RabbitMQ queue and to a polling consumer, against an HTTP
    /// endpoint's deliveries/s in the same run.
    Destinations(destinations::Args),
    /// Ingest sources: signed Stripe webhooks accepted/s and send-to-forwarded latency, against
    /// publishing through the API in the same run.
    Ingest(ingest::Args),
    /// `replay-missing` of 100,000 messages an endpoint missed: the task's time, and publish
    /// latency beside it.
    Replay(replay::Args),
    /// hookd's store alone, without HTTP: CPU per delivered message, in this process and in
    /// PostgreSQL.
    Storage(storage::Args),
    /// Internal: the receiver process the ceiling and deliver benchmarks start.
    #[command(hide = true)]
    Receive {
        /// Port on 127.0.0.1 (0: any free one; the address is printed).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Endpoint secret to verify with (repeatable); none: answer without verifying.
        #[arg(long)]
        secret: Vec<String>,
        /// Count receipts per endpoint (`/hooks/NAME`), not per message.
        #[arg(long)]
        per_endpoint: bool,
    },
}

/// The benchmark and its arguments as section `name` of the docs records them (tests).
#[cfg(test)]
fn recorded(name: &str) -> Command {
    let argv = report::page::split(&report::page::command(name));
    match Cli::try_parse_from(&argv) {
        Ok(cli) => cli.command,
        Err(error) => panic!("the `{name}` section's command does not parse: {error}"),
    }
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
            Command::Ceiling(args) => ceiling::run(args).await,
            Command::Deliver(args) => deliver::run(args).await,
            Command::Search(args) => search::run(args).await,
            Command::Ordered(args) => ordered::run(args).await,
            Command::Cluster(args) => cluster::run(args).await,
            Command::Sources(args) => sources::run(args).await,
            Command::Replay(args) => replay::run(args).await,
            Command::Destinations(args) => destinations::run(args).await,
            Command::Ingest(args) => ingest::run(args).await,
            Command::Fanout(args) => fanout::run(args).await,
            Command::Isolation(args) => isolation::run(args).await,
            Command::Memory(args) => memory::run(args).await,
            Command::Retention(args) => retention::run(args).await,
            Command::Suite(args) => suite::run(args).await,
            Command::Instructions(args) => instructions::run(args).await,
            Command::Storage(args) => storage::run(args).await,
            Command::Receive {
                port,
                secret,
                per_endpoint,
            } => {
                let options = receiver::Options {
                    secrets: secret,
                    per_endpoint,
                    ..receiver::Options::default()
                };
                receiver::serve_process(port, options)
                    .await
                    .map(|()| ExitCode::SUCCESS)
            }
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
