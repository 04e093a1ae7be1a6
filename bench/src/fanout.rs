//! `hookd-bench fanout`: one message to many endpoints.
//!
//! One application with `--endpoints` (default 100) endpoints, all subscribed to everything,
//! each aimed at its own path of one verifying receiver process that counts receipts per
//! endpoint. Every publish writes one message and a delivery row per endpoint in one
//! transaction, so the publish latency shows the cost of the fan-out on the producer's path;
//! the time until a message has reached *all* its endpoints shows the engine's side.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;

use crate::api::{Api, SendLog};
use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer};
use crate::load::{self, Outcome};
use crate::machine::{self, Machine};
use crate::receiver::ReceiverProcess;
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "fanout";

/// Waiting for deliveries gives up after this long without a new receipt.
const DRAIN_PATIENCE: Duration = Duration::from_secs(30);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Endpoints every message goes to.
    #[arg(long, default_value_t = 100)]
    endpoints: usize,
    /// Messages published in the measured phase.
    #[arg(long, default_value_t = 500)]
    messages: u64,
    /// Publishes in flight at all times.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// hookd's `--workers` (attempts in flight in all); per endpoint hookd's default applies.
    #[arg(long, default_value_t = 128)]
    workers: usize,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench fanout --backend {} --endpoints {} --messages {} \
             --concurrency {} --workers {}{}",
            self.backend.flag(),
            self.endpoints,
            self.messages,
            self.concurrency,
            self.workers,
            self.output.flags()
        )
    }
}

/// One backend's measurements.
struct Run {
    backend: Backend,
    publishes: Outcome,
    /// Deliveries (message × endpoint) that arrived verified, and that never did.
    delivered: u64,
    missing: u64,
    duplicates: u64,
    bad_signatures: u64,
    deliveries_per_s: f64,
    /// Publish sent → the last of its endpoints received it, microseconds.
    all_arrived_us: Histogram<u64>,
    peak_rss_kib: u64,
    hookd_cores: f64,
}

impl Run {
    fn flagged(&self) -> bool {
        self.missing + self.bad_signatures + self.publishes.error_count() > 0
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.endpoints == 0 || args.messages == 0 || args.concurrency == 0 {
        bail!("--endpoints, --messages and --concurrency must be at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::describe();
    println!("machine: {}", machine.summary());
    println!("{}", header());
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        machine::settle(args.output.quiet_below).await?;
        let database = Database::create(backend, &args.postgres.url).await?;
        let run = measure(backend, &database, &args).await;
        database.remove().await;
        let run = run?;
        println!("{}", row(&run));
        runs.push(run);
    }
    args.output
        .write(SECTION, &section(&args, &machine, &runs))?;
    if runs.iter().any(Run::flagged) {
        eprintln!("FLAGGED: deliveries missing, bad signatures or failed publishes");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(backend: Backend, database: &Database, args: &Args) -> anyhow::Result<Run> {
    let url = database.url().to_owned();
    let options = vec!["--workers".to_owned(), args.workers.to_string()];
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &options)).await??;
    let api = Api::new(&hookd, args.concurrency)?;
    let app = api.create_app("fanout").await?;
    let endpoints = api.endpoints_with_secrets(&app, args.endpoints).await?;
    let secrets: Vec<String> = endpoints.iter().map(|(_, s)| s.clone()).collect();
    let receiver = ReceiverProcess::start_with(&secrets, true)?;
    for (k, (id, _)) in endpoints.iter().enumerate() {
        api.set_endpoint_url(&app, id, &receiver.url(&format!("e{k}")))
            .await?;
    }

    let log: SendLog = Arc::new(Mutex::new(Vec::new()));
    let hookd_cpu = hookd.cpu_time()?;
    let started = Instant::now();
    let publishes = load::run(
        args.concurrency,
        0..args.messages,
        api.publisher(&app, Some(log.clone()))?,
    )
    .await;
    let sent = std::mem::take(&mut *log.lock().expect("the send log"));
    let expected = sent.len() as u64 * args.endpoints as u64;
    drain(&receiver, expected).await?;
    let hookd_cores =
        hookd.cpu_time()?.saturating_sub(hookd_cpu).as_secs_f64() / started.elapsed().as_secs_f64();
    let peak_rss_kib = hookd.peak_rss_kib()?;
    let receipts = receiver.results().await?;
    hookd.stop();

    // Receipts are keyed `e{k}/{msg id}`: per message, how many endpoints and the last one.
    let mut per_message: HashMap<&str, (u64, u64)> = HashMap::new();
    for (key, &at) in &receipts.first_seen {
        let id = key.split_once('/').map_or(key.as_str(), |(_, id)| id);
        let entry = per_message.entry(id).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(at);
    }
    let mut all_arrived_us = Histogram::new_with_bounds(1, 600_000_000, 3)?;
    let (mut delivered, mut last_receipt) = (0, 0);
    for (id, at) in &sent {
        if let Some(&(count, last)) = per_message.get(id.as_str()) {
            delivered += count;
            last_receipt = last_receipt.max(last);
            if count == args.endpoints as u64 {
                all_arrived_us.saturating_record(last.saturating_sub(*at) / 1_000);
            }
        }
    }
    let first_sent = sent.iter().map(|(_, at)| *at).min().unwrap_or(0);
    let span = Duration::from_nanos(last_receipt.saturating_sub(first_sent));
    Ok(Run {
        backend,
        publishes,
        delivered,
        missing: expected - delivered.min(expected),
        duplicates: receipts.duplicates,
        bad_signatures: receipts.bad_signatures,
        deliveries_per_s: delivered as f64 / span.as_secs_f64().max(1e-9),
        all_arrived_us,
        peak_rss_kib,
        hookd_cores,
    })
}

/// Waits until the receiver has `expected` receipts, or until none has come for a while.
async fn drain(receiver: &ReceiverProcess, expected: u64) -> anyhow::Result<()> {
    let (mut last, mut progressed) = (0, Instant::now());
    loop {
        let count = receiver.count().await?;
        if count >= expected {
            return Ok(());
        }
        if count > last {
            (last, progressed) = (count, Instant::now());
        } else if progressed.elapsed() > DRAIN_PATIENCE {
            eprintln!("warning: {count} of {expected} deliveries arrived; giving up waiting");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn header() -> String {
    report::header(&[
        "backend",
        "publishes/s",
        "publish p50",
        "publish p99",
        "deliveries/s",
        "all endpoints reached p50",
        "p99",
        "max",
        "delivered",
        "missing",
        "bad signatures",
        "duplicates",
        "hookd peak RSS",
        "hookd CPU",
    ])
}

fn row(run: &Run) -> String {
    let flag = |n: u64| match n {
        0 => "0".to_owned(),
        n => format!("**{} (flagged)**", report::thousands(n)),
    };
    let all = |q: f64| Duration::from_micros(run.all_arrived_us.value_at_quantile(q));
    report::row(&[
        run.backend.name().to_owned(),
        report::thousands(run.publishes.throughput().round() as u64),
        report::millis(run.publishes.latency(0.50)),
        report::millis(run.publishes.latency(0.99)),
        report::thousands(run.deliveries_per_s.round() as u64),
        report::millis(all(0.50)),
        report::millis(all(0.99)),
        report::millis(Duration::from_micros(run.all_arrived_us.max())),
        report::thousands(run.delivered),
        flag(run.missing),
        flag(run.bad_signatures),
        report::thousands(run.duplicates),
        format!("{:.0} MiB", run.peak_rss_kib as f64 / 1024.0),
        format!("{:.2} cores", run.hookd_cores),
    ])
}

fn section(args: &Args, machine: &Machine, runs: &[Run]) -> String {
    let mut out = format!(
        "## Fan-out\n\n\
         One message to {} endpoints: one application with {} endpoints subscribed to every \
         event type, each aimed at its own path of one receiver process that verifies every \
         signature with that endpoint's secret and counts receipts per endpoint. {} messages \
         published, {} in flight, so {} deliveries per backend. A publish commits the message \
         and one delivery row per endpoint before its 202, so its latency is the producer's \
         cost of the fan-out. \"All endpoints reached\" is from a publish sent to the last of \
         its {} endpoints receiving it. hookd runs with `--workers {}` and its default \
         per-endpoint concurrency.\n\n\
         - Command: `cargo build --release -p hookd -p hookd-bench && {}`\n\
         - Date: {}\n\
         - Machine: {}\n\
         - hookd: {}\n\n\
         {}\n",
        args.endpoints,
        args.endpoints,
        report::thousands(args.messages),
        args.concurrency,
        report::thousands(args.messages * args.endpoints as u64),
        args.endpoints,
        args.workers,
        args.command(),
        report::now(),
        machine.summary(),
        report::revision(),
        header(),
    );
    for run in runs {
        out.push_str(&row(run));
        out.push('\n');
    }
    out
}
