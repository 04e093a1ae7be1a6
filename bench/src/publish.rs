//! `hookd-bench publish`: how many messages per second hookd accepts, and how fast it answers.
//!
//! This is the producer's critical path: `POST /api/v1/app/{app}/msg` answers 202 only once
//! the message and its delivery rows are committed. One application with one subscribed
//! endpoint (pointing at the local receiver) makes every publish write a delivery row, as in
//! production. hookd's delivery engine runs meanwhile, as in production, delivering to the
//! receiver; what it costs the publishes is part of the result.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use serde_json::json;

use crate::api::Api;
use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer};
use crate::load::{self, Outcome};
use crate::machine::{self, Machine};
use crate::receiver::{self, Receiver};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "publish";

/// The target, for SQLite at 32 in flight.
const TARGET_MSGS_PER_S: f64 = 5_000.0;
const TARGET_P99: Duration = Duration::from_millis(10);
const TARGET_CONCURRENCY: usize = 32;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each gets a fresh one per run.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Publish requests in flight at all times.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Messages published in the measured phase.
    #[arg(long, default_value_t = 50_000)]
    messages: u64,
    /// Messages published first and not measured.
    #[arg(long, default_value_t = 2_000)]
    warmup: u64,
    /// Runs per backend, each on a fresh hookd and database; the best (by msgs/s) is reported.
    #[arg(long, default_value_t = 2)]
    runs: u32,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    /// The command that reproduces these results, every parameter spelled out.
    fn command(&self) -> String {
        let mut command = format!(
            "target/release/hookd-bench publish --backend {} --concurrency {} --messages {} \
             --warmup {} --runs {}",
            self.backend.flag(),
            self.concurrency,
            self.messages,
            self.warmup,
            self.runs
        );
        command.push_str(&self.output.flags());
        command
    }
}

/// One run's measurements.
struct Run {
    outcome: Outcome,
    warmup_errors: u64,
    peak_rss_kib: u64,
    /// CPU cores hookd kept busy during the measured phase, on average.
    hookd_cores: f64,
    /// CPU cores this harness (load generator and receiver) kept busy.
    harness_cores: f64,
    load_before: f64,
    /// Webhooks the receiver got by the end of the run (hookd's engine delivering meanwhile).
    delivered: u64,
}

impl Run {
    fn errors(&self) -> u64 {
        self.outcome.error_count() + self.warmup_errors
    }
}

/// The runs of one backend.
struct Series {
    backend: Backend,
    runs: Vec<Run>,
}

impl Series {
    fn best(&self) -> &Run {
        self.runs
            .iter()
            .max_by(|a, b| a.outcome.throughput().total_cmp(&b.outcome.throughput()))
            .expect("a series has at least one run")
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.runs == 0 || args.concurrency == 0 || args.messages == 0 {
        bail!("--runs, --concurrency and --messages must be at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    println!("{}", header());
    let mut all = Vec::new();
    for backend in args.backend.list() {
        let mut series = Series {
            backend,
            runs: Vec::new(),
        };
        for _ in 0..args.runs {
            machine::settle(args.output.quiet_below).await?;
            let run = one_run(backend, &args).await?;
            println!("{}", row(backend, &run));
            println!(
                "  (load {:.2} before; the receiver got {} webhooks during the run)",
                run.load_before,
                report::thousands(run.delivered)
            );
            for (reason, n) in &run.outcome.errors {
                eprintln!("  {n} × {reason}");
            }
            series.runs.push(run);
        }
        all.push(series);
    }
    println!("\nbest of {} run(s) per backend:", args.runs);
    println!("{}", header());
    for series in &all {
        println!("{}", row(series.backend, series.best()));
    }
    let verdict = target_verdict(&args, &all);
    if let Some(verdict) = &verdict {
        println!("\n{verdict}");
    }
    args.output
        .write(SECTION, &section(&args, &machine, &all, verdict))?;
    let flagged = all.iter().flat_map(|s| &s.runs).any(|run| run.errors() > 0);
    if flagged {
        eprintln!("FLAGGED: some publishes failed; these numbers are not valid");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Fresh database, receiver and hookd; set up; warm up; measure; tear down.
async fn one_run(backend: Backend, args: &Args) -> anyhow::Result<Run> {
    Database::with_fresh(backend, &args.postgres.url, async |database| {
        measure(database, args).await
    })
    .await
}

async fn measure(database: &Database, args: &Args) -> anyhow::Result<Run> {
    let receiver = Receiver::start(receiver::Options::default()).await?;
    let url = database.url().to_owned();
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &[])).await??;
    let api = Api::new(&hookd, args.concurrency)?;
    let app = api.create_app("bench").await?;
    api.create_endpoint(&app, &receiver.url("publish")).await?;
    // The premise of the benchmark: a publish writes a delivery row.
    let probe = api.publish(&app, message(u64::MAX)).await?;
    let routed = api.destinations(&app, &probe).await?;
    if routed != 1 {
        bail!("a published message was routed to {routed} endpoints, expected 1");
    }

    let publish = api.publisher(&app, None)?;
    let load_before = machine::load_average().unwrap_or(0.0);
    let warmup = load::run(args.concurrency, 0..args.warmup, publish.clone()).await;
    let hookd_cpu = hookd.cpu_time()?;
    let harness_cpu = machine::process_cpu_time(std::process::id())?;
    let end = args.warmup + args.messages;
    let outcome = load::run(args.concurrency, args.warmup..end, publish).await;
    let hookd_cpu = hookd.cpu_time()?.saturating_sub(hookd_cpu);
    let harness_cpu = machine::process_cpu_time(std::process::id())?.saturating_sub(harness_cpu);
    let peak_rss_kib = hookd.peak_rss_kib()?;
    let delivered = receiver.received();
    hookd.stop();
    let seconds = outcome.elapsed.as_secs_f64();
    Ok(Run {
        warmup_errors: warmup.error_count(),
        peak_rss_kib,
        hookd_cores: hookd_cpu.as_secs_f64() / seconds,
        harness_cores: harness_cpu.as_secs_f64() / seconds,
        load_before,
        delivered,
        outcome,
    })
}

/// Request bodies built once and cycled through, so that building one costs a load loop
/// nothing: the publishing harness and the ceiling's sender then spend alike per request.
#[derive(Clone)]
pub struct Bodies(Arc<Vec<bytes::Bytes>>);

impl Bodies {
    /// How many distinct bodies are cycled, unless said otherwise.
    pub const COUNT: u64 = 1_024;

    /// Bodies `build(0)` to `build(COUNT - 1)`.
    pub fn new(build: impl Fn(u64) -> String) -> Self {
        Self::with_count(Self::COUNT, build)
    }

    /// Bodies `build(0)` to `build(count - 1)`.
    pub fn with_count(count: u64, build: impl Fn(u64) -> String) -> Self {
        Self(Arc::new((0..count).map(|i| build(i).into()).collect()))
    }

    /// The body for request number `i`.
    pub fn get(&self, i: u64) -> bytes::Bytes {
        self.0[(i % self.0.len() as u64) as usize].clone()
    }
}

/// Message number `i`: an `invoice.paid` event with a ~300-byte payload, distinct per `i`.
pub fn message(i: u64) -> serde_json::Value {
    let customer = i % 9_973;
    let cents = 1_000 + i.wrapping_mul(7_919) % 90_000;
    json!({
        "eventType": "invoice.paid",
        "payload": {
            "type": "invoice.paid",
            "invoice": {
                "id": format!("inv_{i:012}"),
                "number": format!("2026-{:06}", i % 1_000_000),
                "customerId": format!("cus_{customer:08}"),
                "customerEmail": format!("billing+{customer}@example.com"),
                "amountPaid": cents,
                "currency": "EUR",
                "lines": [
                    { "sku": "PLAN-PRO-MONTHLY", "quantity": 1, "unitAmount": cents }
                ],
                "paidAt": "2026-05-01T12:34:56Z",
                "paymentMethod": "card",
                "attempt": 1
            }
        }
    })
}

fn header() -> String {
    report::header(&[
        "backend",
        "msgs/s",
        "p50",
        "p90",
        "p99",
        "max",
        "errors",
        "hookd peak RSS",
        "hookd CPU",
        "harness CPU",
    ])
}

/// A table row: one run's figures.
fn row(backend: Backend, run: &Run) -> String {
    let o = &run.outcome;
    report::row(&[
        backend.name().to_owned(),
        report::thousands(o.throughput().round() as u64),
        report::millis(o.latency(0.50)),
        report::millis(o.latency(0.90)),
        report::millis(o.latency(0.99)),
        report::millis(o.max_latency()),
        report::flagged(run.errors()),
        format!("{:.0} MiB", run.peak_rss_kib as f64 / 1024.0),
        format!("{:.2} cores", run.hookd_cores),
        format!("{:.2} cores", run.harness_cores),
    ])
}

/// Whether the target is met, when this run measured it (SQLite at 32 in flight).
fn target_verdict(args: &Args, all: &[Series]) -> Option<String> {
    if args.concurrency != TARGET_CONCURRENCY {
        return None;
    }
    let sqlite = all.iter().find(|s| s.backend == Backend::Sqlite)?;
    let best = sqlite.best();
    let (rate, p99) = (best.outcome.throughput(), best.outcome.latency(0.99));
    let met = rate >= TARGET_MSGS_PER_S && p99 < TARGET_P99 && best.errors() == 0;
    Some(format!(
        "Target (SQLite, {TARGET_CONCURRENCY} in flight, ≥ {} msgs/s with p99 < {} ms): \
         **{}** ({} msgs/s, p99 {}).",
        report::thousands(TARGET_MSGS_PER_S as u64),
        TARGET_P99.as_millis(),
        if met { "met" } else { "not met" },
        report::thousands(rate.round() as u64),
        report::millis(p99),
    ))
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    let runs = match args.runs {
        1 => "One run per backend.".to_owned(),
        n => format!("The best of {n} runs per backend, by msgs/s."),
    };
    format!(
        "## Publish throughput\n\n\
         `POST /api/v1/app/{{app}}/msg`, answered `202 Accepted` once the message and its \
         delivery row are committed (one application, one endpoint aimed at a receiver in the \
         harness; the engine delivers meanwhile, as in production). {} requests in flight \
         from one pooled HTTP/1.1 client; {} warm-up publishes, then {} measured; latency is \
         the client's, from send to the full answer. {runs}\n",
        args.concurrency,
        report::thousands(args.warmup),
        report::thousands(args.messages),
    )
}

/// The docs section: what was measured, how, where, and the table.
fn section(args: &Args, machine: &Machine, all: &[Series], verdict: Option<String>) -> String {
    let mut out = format!(
        "{}\n{}\n{}\n",
        method(args),
        report::provenance(&args.command(), machine),
        header()
    );
    for series in all {
        out.push_str(&row(series.backend, series.best()));
        out.push('\n');
    }
    let delivered: u64 = all.iter().flat_map(|s| &s.runs).map(|r| r.delivered).sum();
    out.push_str(&format!(
        "\nWebhooks delivered to the receiver while publishing, all runs: {}.",
        report::thousands(delivered)
    ));
    if let Some(verdict) = verdict {
        out.push(' ');
        out.push_str(&verdict);
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_realistic_and_about_300_bytes() {
        for i in [0, 1, 12_345, u64::MAX] {
            let body = message(i);
            let payload = body["payload"].to_string();
            assert!(
                (250..=350).contains(&payload.len()),
                "{} bytes: {payload}",
                payload.len()
            );
            assert_eq!(body["eventType"], "invoice.paid");
        }
        assert_ne!(message(1), message(2));
    }

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Publish(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
