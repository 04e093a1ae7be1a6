//! `hookd-bench isolation`: one slow endpoint must not slow the others.
//!
//! Messages are published open loop at a fixed rate to an application with a fast endpoint
//! (a verifying receiver process answering at once). The same load runs twice, each on a fresh
//! hookd and database: with the fast endpoint alone, and with a second endpoint in the same
//! application that answers only after `--slow-seconds` (default 20 s, past hookd's default
//! 15 s attempt timeout, so every attempt to it holds a connection until it times out and is
//! retried). The fast endpoint's publish-to-receipt latency in the two runs is the result.
//! hookd runs with its default engine settings. Each run first creates `--idle-endpoints`
//! endpoints (default 50,000) of another application, which get nothing: a deployment has
//! many more endpoints than endpoints with work, and finding the work must not cost a look at
//! each.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;

use crate::api::{Api, SendLog};
use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer};
use crate::load::{self, Outcome};
use crate::machine::{self, Machine};
use crate::receiver::{self, Receiver, ReceiverProcess};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "isolation";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each run gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Publishes per second (open loop).
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Seconds of publishing per run.
    #[arg(long, default_value_t = 40)]
    seconds: u64,
    /// How long the slow endpoint takes to answer.
    #[arg(long, default_value_t = 20)]
    slow_seconds: u64,
    /// Endpoints of another application, created before publishing, that get no messages.
    #[arg(long, default_value_t = 50_000)]
    idle_endpoints: u64,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench isolation --backend {} --rate {} --seconds {} \
             --slow-seconds {} --idle-endpoints {}{}",
            self.backend.flag(),
            self.rate,
            self.seconds,
            self.slow_seconds,
            self.idle_endpoints,
            self.output.flags()
        )
    }
}

/// One run: the fast endpoint alone, or beside the slow one.
struct Run {
    backend: Backend,
    beside_slow: bool,
    publishes: Outcome,
    /// Publish sent → verified receipt at the fast endpoint, microseconds.
    fast_latency_us: Histogram<u64>,
    fast_missing: u64,
    /// Requests the slow endpoint had received when the run ended.
    slow_requests: u64,
    peak_rss_kib: u64,
}

impl Run {
    fn latency(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.fast_latency_us.value_at_quantile(quantile))
    }

    fn flagged(&self) -> bool {
        self.fast_missing + self.publishes.error_count() > 0
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.rate <= 0.0 || args.seconds == 0 {
        bail!("--rate and --seconds must be positive");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    println!("{}", header());
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        for beside_slow in [false, true] {
            machine::settle(args.output.quiet_below).await?;
            let run = Database::with_fresh(backend, &args.postgres.url, async |database| {
                measure(backend, beside_slow, database, &args).await
            })
            .await?;
            println!("{}", row(&run, args.idle_endpoints));
            runs.push(run);
        }
    }
    args.output
        .write(SECTION, &section(&args, &machine, &runs))?;
    if runs.iter().any(Run::flagged) {
        eprintln!("FLAGGED: messages missing at the fast endpoint, or failed publishes");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(
    backend: Backend,
    beside_slow: bool,
    database: &Database,
    args: &Args,
) -> anyhow::Result<Run> {
    let url = database.url().to_owned();
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &[])).await??;
    let api = Api::new(&hookd, 64)?;
    create_idle_endpoints(&api, args.idle_endpoints).await?;
    let app = api.create_app("isolation").await?;
    let (fast, secret) = api.endpoints_with_secrets(&app, 1).await?.remove(0);
    let fast_receiver = ReceiverProcess::start(&[secret])?;
    api.set_endpoint_url(&app, &fast, &fast_receiver.url("fast"))
        .await?;
    let slow_receiver = Receiver::start(receiver::Options {
        delay: Duration::from_secs(args.slow_seconds),
        ..receiver::Options::default()
    })
    .await?;
    if beside_slow {
        api.create_endpoint(&app, &slow_receiver.url("slow"))
            .await?;
    }

    let log: SendLog = Arc::new(Mutex::new(Vec::new()));
    let count = (args.rate * args.seconds as f64).round().max(1.0) as u64;
    let publishes = load::run_paced(
        args.rate,
        64,
        0..count,
        api.publisher(&app, Some(log.clone()))?,
    )
    .await;
    let sent = std::mem::take(&mut *log.lock().expect("the send log"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while fast_receiver.count().await? < sent.len() as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let peak_rss_kib = hookd.peak_rss_kib()?;
    let receipts = fast_receiver.results().await?;
    let slow_requests = slow_receiver.received();
    hookd.stop();

    let mut fast_latency_us = Histogram::new_with_bounds(1, 600_000_000, 3)?;
    let mut fast_missing = 0;
    for (id, at) in &sent {
        match receipts.first_seen.get(id) {
            Some(&received) => {
                fast_latency_us.saturating_record(received.saturating_sub(*at) / 1_000);
            }
            None => fast_missing += 1,
        }
    }
    Ok(Run {
        backend,
        beside_slow,
        publishes,
        fast_latency_us,
        fast_missing,
        slow_requests,
        peak_rss_kib,
    })
}

/// Creates `count` endpoints of an application of their own, 64 requests at a time, aimed at
/// a port nothing listens on; nothing is published to them.
async fn create_idle_endpoints(api: &Api, count: u64) -> anyhow::Result<()> {
    if count == 0 {
        return Ok(());
    }
    let app = api.create_app("idle").await?;
    let api = api.clone();
    let created = load::run(
        64,
        0..count,
        Arc::new(move |_| {
            let (api, app) = (api.clone(), app.clone());
            async move {
                api.create_endpoint(&app, "http://127.0.0.1:9/idle")
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }),
    )
    .await;
    if created.error_count() > 0 {
        bail!("creating the idle endpoints failed: {:?}", created.errors);
    }
    println!(
        "{count} idle endpoints created in {:.1} s",
        created.elapsed.as_secs_f64()
    );
    Ok(())
}

fn header() -> String {
    report::header(&[
        "backend",
        "idle endpoints",
        "slow endpoint",
        "publishes",
        "fast p50",
        "fast p90",
        "fast p99",
        "fast max",
        "fast missing",
        "requests the slow endpoint got",
        "publish errors",
        "hookd peak RSS",
    ])
}

fn row(run: &Run, idle_endpoints: u64) -> String {
    report::row(&[
        run.backend.name().to_owned(),
        report::thousands(idle_endpoints),
        if run.beside_slow { "yes" } else { "no" }.to_owned(),
        report::thousands(run.publishes.completed),
        report::millis(run.latency(0.50)),
        report::millis(run.latency(0.90)),
        report::millis(run.latency(0.99)),
        report::millis(Duration::from_micros(run.fast_latency_us.max())),
        report::flagged(run.fast_missing),
        if run.beside_slow {
            report::thousands(run.slow_requests)
        } else {
            "–".to_owned()
        },
        report::flagged(run.publishes.error_count()),
        format!("{:.0} MiB", run.peak_rss_kib as f64 / 1024.0),
    ])
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "## Slow-endpoint isolation\n\n\
         Messages published open loop at {}/s for {} s to one application; its fast endpoint \
         is the verifying receiver, answering at once (\"fast\" columns: publish sent → \
         verified receipt there). Each backend runs twice: the fast endpoint alone, then \
         beside a second endpoint of the same application that answers only after {} s (every \
         message goes to both; each attempt to it holds a connection until hookd's default \
         15 s attempt timeout, and is retried on the schedule). {} endpoints of another \
         application, which get nothing, are created first (a deployment has many more \
         endpoints than endpoints with work). If one slow endpoint held up the others, the \
         fast endpoint's latency would grow in the second row of each backend.\n",
        args.rate,
        args.seconds,
        args.slow_seconds,
        report::thousands(args.idle_endpoints),
    )
}

/// The docs section: what was measured, how, where, and the table.
fn section(args: &Args, machine: &Machine, runs: &[Run]) -> String {
    report::table_section(
        &method(args),
        &args.command(),
        machine,
        &header(),
        runs.iter().map(|run| row(run, args.idle_endpoints)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Isolation(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
