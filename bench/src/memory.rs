//! `hookd-bench memory`: hookd's memory while a backlog builds up and drains.
//!
//! A backlog lives in the database, not in hookd's memory. One endpoint is down (its URL a
//! closed port) while `--backlog` messages are published; every first attempt fails and is
//! retried 15 s later (`--retry-schedule` of ten attempts 15 s apart). Then the endpoint is
//! aimed at a verifying receiver process and the backlog drains. hookd's resident set is read
//! from `/proc/PID/status` at each stage: idle, after the backlog was published (peak and
//! now), and after it drained (peak and now).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::api::Api;
use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer};
use crate::load;
use crate::machine::{self, Machine};
use crate::receiver::ReceiverProcess;
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "memory";

/// The retry schedule hookd runs with: ten attempts 15 s apart, so the backlog is retried
/// soon after the endpoint comes back, and never runs out of attempts while it is down.
const SCHEDULE: &str = "0,15s,15s,15s,15s,15s,15s,15s,15s,15s";

/// Draining gives up after this long without a new receipt.
const DRAIN_PATIENCE: Duration = Duration::from_secs(60);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Messages published while the endpoint is down.
    #[arg(long, default_value_t = 50_000)]
    backlog: u64,
    /// Publishes in flight while building the backlog.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench memory --backend {} --backlog {} --concurrency {}{}",
            self.backend.flag(),
            self.backlog,
            self.concurrency,
            self.output.flags()
        )
    }
}

/// hookd's resident set at each stage, KiB.
struct Run {
    backend: Backend,
    idle: u64,
    backlog_peak: u64,
    backlog_now: u64,
    drained_peak: u64,
    drained_now: u64,
    accepted: u64,
    delivered: u64,
}

impl Run {
    fn flagged(&self) -> bool {
        self.delivered < self.accepted
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.backlog == 0 || args.concurrency == 0 {
        bail!("--backlog and --concurrency must be at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    println!("{}", header());
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        machine::settle(args.output.quiet_below).await?;
        let run = Database::with_fresh(backend, &args.postgres.url, async |database| {
            measure(backend, database, &args).await
        })
        .await?;
        println!("{}", row(&run));
        runs.push(run);
    }
    args.output
        .write(SECTION, &section(&args, &machine, &runs))?;
    if runs.iter().any(Run::flagged) {
        eprintln!("FLAGGED: accepted messages that were not delivered");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(backend: Backend, database: &Database, args: &Args) -> anyhow::Result<Run> {
    let url = database.url().to_owned();
    let options = vec!["--retry-schedule".to_owned(), SCHEDULE.to_owned()];
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &options)).await??;
    let api = Api::new(&hookd, args.concurrency)?;
    let app = api.create_app("memory").await?;
    let (endpoint, secret) = api.endpoints_with_secrets(&app, 1).await?.remove(0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = hookd.rss_kib()?;

    let published = load::run(
        args.concurrency,
        0..args.backlog,
        api.publisher(&app, None)?,
    )
    .await;
    let accepted = published.completed - published.error_count();
    let backlog_peak = hookd.peak_rss_kib()?;
    let backlog_now = hookd.rss_kib()?;

    let receiver = ReceiverProcess::start(&[secret])?;
    api.set_endpoint_url(&app, &endpoint, &receiver.url("memory"))
        .await?;
    let (mut last, mut progressed) = (0, Instant::now());
    let delivered = loop {
        let count = receiver.count().await?;
        if count >= accepted {
            break count;
        }
        if count > last {
            (last, progressed) = (count, Instant::now());
        } else if progressed.elapsed() > DRAIN_PATIENCE {
            eprintln!("warning: {count} of {accepted} messages arrived; giving up waiting");
            break count;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let drained_peak = hookd.peak_rss_kib()?;
    let drained_now = hookd.rss_kib()?;
    hookd.stop();
    Ok(Run {
        backend,
        idle,
        backlog_peak,
        backlog_now,
        drained_peak,
        drained_now,
        accepted,
        delivered,
    })
}

fn header() -> String {
    report::header(&[
        "backend",
        "idle",
        "backlog published: peak",
        "backlog published: now",
        "drained: peak",
        "drained: now",
        "accepted",
        "delivered",
    ])
}

fn row(run: &Run) -> String {
    let mib = |kib: u64| format!("{:.0} MiB", kib as f64 / 1024.0);
    let delivered = if run.flagged() {
        format!("**{} (flagged)**", report::thousands(run.delivered))
    } else {
        report::thousands(run.delivered)
    };
    report::row(&[
        run.backend.name().to_owned(),
        mib(run.idle),
        mib(run.backlog_peak),
        mib(run.backlog_now),
        mib(run.drained_peak),
        mib(run.drained_now),
        report::thousands(run.accepted),
        delivered,
    ])
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "## Memory\n\n\
         hookd's resident set (`VmRSS`, and the peak `VmHWM`, from `/proc/PID/status`) while a \
         backlog builds and drains: one endpoint is down (a closed port) while {} messages are \
         published ({} in flight), each first attempt failing and retried 15 s later \
         (`--retry-schedule {SCHEDULE}`); then the endpoint is aimed at the verifying receiver \
         and the backlog drains. A backlog lives in the database, so the columns should stay \
         close to the idle figure whatever its size.\n",
        report::thousands(args.backlog),
        args.concurrency,
    )
}

/// The docs section: what was measured, how, where, and the table.
fn section(args: &Args, machine: &Machine, runs: &[Run]) -> String {
    report::table_section(
        &method(args),
        &args.command(),
        machine,
        &header(),
        runs.iter().map(row),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Memory(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
