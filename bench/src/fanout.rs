//! `hookd-bench fanout`: one message to many endpoints.
//!
//! One application with `--endpoints` (default 100) endpoints, all subscribed to everything,
//! each aimed at its own path of one verifying receiver process that counts receipts per
//! endpoint. Every publish writes one message and a delivery row per endpoint in one
//! transaction, so the publish latency shows the cost of the fan-out on the producer's path;
//! the time until a message has reached *all* its endpoints shows the engine's side.
//!
//! Each backend runs at hookd's defaults first, then with the `--tuned` flags, after the
//! ceiling loop; the target (deliveries/s as a share of half the loop's rate, SQLite) is
//! judged at the defaults.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;

use crate::api::Api;
use crate::ceiling;
use crate::hookd::{Backend, Backends, Before, Database, Hookd, PostgresServer, Setting, Tuning};
use crate::load::Outcome;
use crate::machine::{self, Machine};
use crate::receiver::ReceiverProcess;
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "fanout";

/// Issue 31's targets at the defaults: SQLite's deliveries/s as a share of half the ceiling
/// loop's rate, and hookd's peak RSS in every run.
const TARGET_SHARE_SQLITE: f64 = 0.55;
const TARGET_PEAK_RSS_MIB: f64 = 100.0;

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
    #[command(flatten)]
    tuning: Tuning,
    #[command(flatten)]
    before: Before,
    #[command(flatten)]
    ceiling: ceiling::Source,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        let ceiling = self.ceiling.flags();
        format!(
            "target/release/hookd-bench fanout --backend {} --endpoints {} --messages {} \
             --concurrency {} {}{} {ceiling}{}",
            self.backend.flag(),
            self.endpoints,
            self.messages,
            self.concurrency,
            self.tuning.flag(),
            self.before.flag(),
            self.output.flags()
        )
    }
}

/// One backend's measurements.
struct Run {
    backend: Backend,
    setting: Setting,
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
    let machine = Machine::announced();
    let (ceiling_rate, _) = args
        .ceiling
        .given_or_measured(args.output.quiet_below)
        .await?;
    let settings = args.before.and(args.tuning.settings())?;
    println!("{}", header());
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        for setting in &settings {
            machine::settle(args.output.quiet_below).await?;
            let run = Database::with_fresh(backend, &args.postgres.url, async |database| {
                measure(backend, setting, database, &args).await
            })
            .await?;
            println!("{}", row(&run));
            runs.push(run);
        }
    }
    let verdicts = verdicts(ceiling_rate, &runs);
    for verdict in &verdicts {
        println!("{verdict}");
    }
    args.output.write(
        SECTION,
        &section(&args, &machine, ceiling_rate, &runs, &verdicts),
    )?;
    if runs.iter().any(Run::flagged) {
        eprintln!("FLAGGED: deliveries missing, bad signatures or failed publishes");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(
    backend: Backend,
    setting: &Setting,
    database: &Database,
    args: &Args,
) -> anyhow::Result<Run> {
    let (url, started_as) = (database.url().to_owned(), setting.clone());
    // hookd's default cap on endpoints per application is below the run's 100.
    let room = [
        "--max-endpoints-per-app".to_owned(),
        args.endpoints.to_string(),
    ];
    let hookd =
        tokio::task::spawn_blocking(move || Hookd::start_as(&url, &started_as, &room)).await??;
    let api = Api::new(&hookd, args.concurrency)?;
    let app = api.create_app("fanout").await?;
    let endpoints = api.endpoints_with_secrets(&app, args.endpoints).await?;
    let secrets: Vec<String> = endpoints.iter().map(|(_, s)| s.clone()).collect();
    let receiver = ReceiverProcess::start_with(&secrets, true)?;
    for (k, (id, _)) in endpoints.iter().enumerate() {
        api.set_endpoint_url(&app, id, &receiver.url(&format!("e{k}")))
            .await?;
    }

    let hookd_cpu = hookd.cpu_time()?;
    let started = Instant::now();
    let (publishes, sent) = api
        .publish_logged(&app, args.concurrency, 0..args.messages)
        .await?;
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
        setting: setting.clone(),
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
        "hookd",
        "publishes/s",
        "publish p50",
        "publish p99",
        "deliveries/s",
        "all endpoints reached p50",
        "p99",
        "max",
        "delivered",
        "missing / bad signatures / duplicates",
        "hookd peak RSS",
        "hookd CPU",
    ])
}

fn row(run: &Run) -> String {
    let all = |q: f64| Duration::from_micros(run.all_arrived_us.value_at_quantile(q));
    report::row(&[
        run.backend.name().to_owned(),
        run.setting.name().to_owned(),
        report::thousands(run.publishes.throughput().round() as u64),
        report::millis(run.publishes.latency(0.50)),
        report::millis(run.publishes.latency(0.99)),
        report::thousands(run.deliveries_per_s.round() as u64),
        report::millis(all(0.50)),
        report::millis(all(0.99)),
        report::millis(Duration::from_micros(run.all_arrived_us.max())),
        report::thousands(run.delivered),
        [
            report::flagged(run.missing),
            report::flagged(run.bad_signatures),
            report::thousands(run.duplicates),
        ]
        .join(" / "),
        format!("{:.0} MiB", run.peak_rss_kib as f64 / 1024.0),
        format!("{:.2} cores", run.hookd_cores),
    ])
}

/// The targets: SQLite's deliveries/s at the defaults against half the ceiling loop's rate,
/// and memory in every run.
fn verdicts(ceiling_rate: f64, runs: &[Run]) -> Vec<String> {
    let met = |ok: bool| if ok { "met" } else { "not met" };
    let half = ceiling_rate / 2.0;
    let mut out = Vec::new();
    let at_defaults = runs
        .iter()
        .find(|r| r.backend == Backend::Sqlite && r.setting == Setting::Defaults);
    if let Some(run) = at_defaults {
        out.push(format!(
            "Fan-out target (SQLite at the defaults ≥ {} of half the ceiling, ≥ {} \
             deliveries/s): **{}** ({} deliveries/s, {} of half the ceiling).",
            report::percent(TARGET_SHARE_SQLITE),
            report::thousands((TARGET_SHARE_SQLITE * half).round() as u64),
            met(run.deliveries_per_s >= TARGET_SHARE_SQLITE * half && !run.flagged()),
            report::thousands(run.deliveries_per_s.round() as u64),
            report::percent(run.deliveries_per_s / half),
        ));
    }
    let defaults_on = |backend| {
        runs.iter()
            .find(|r| r.backend == backend && r.setting == Setting::Defaults)
    };
    if let (Some(sqlite), Some(postgres)) =
        (defaults_on(Backend::Sqlite), defaults_on(Backend::Postgres))
    {
        out.push(format!(
            "Fan-out target (SQLite at least as fast as PostgreSQL, both at the defaults): \
             **{}** ({} against {} deliveries/s).",
            met(sqlite.deliveries_per_s >= postgres.deliveries_per_s && !sqlite.flagged()),
            report::thousands(sqlite.deliveries_per_s.round() as u64),
            report::thousands(postgres.deliveries_per_s.round() as u64),
        ));
    }
    for before in runs
        .iter()
        .filter(|r| matches!(r.setting, Setting::Before(_)))
    {
        if let Some(after) = defaults_on(before.backend) {
            out.push(format!(
                "Before and after ({}, at the defaults): {} deliveries/s {}, {} deliveries/s \
                 this build ({}).",
                before.backend.name(),
                report::thousands(before.deliveries_per_s.round() as u64),
                before.setting.label(),
                report::thousands(after.deliveries_per_s.round() as u64),
                report::change(before.deliveries_per_s, after.deliveries_per_s),
            ));
        }
    }
    let peak = runs
        .iter()
        .map(|r| r.peak_rss_kib as f64 / 1024.0)
        .fold(0.0, f64::max);
    out.push(format!(
        "Memory target (hookd peak RSS < {TARGET_PEAK_RSS_MIB:.0} MB in every run): **{}** \
         (highest {peak:.0} MiB).",
        met(peak < TARGET_PEAK_RSS_MIB),
    ));
    out
}

/// The ceiling loop's rate the target is judged against.
fn ceiling_line(args: &Args, ceiling_rate: f64) -> String {
    format!(
        "Ceiling loop rate, {}: {} requests/s (half: {} messages/s).",
        if args.ceiling.ceiling_rate.is_some() {
            "given with `--ceiling-rate`"
        } else {
            "measured in this run"
        },
        report::thousands(ceiling_rate.round() as u64),
        report::thousands((ceiling_rate / 2.0).round() as u64),
    )
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "One application with {} endpoints (hookd started with `--max-endpoints-per-app {}` \
         to hold them) subscribed to every event type, each aimed at its own path of the verifying receiver, which counts receipts per endpoint; {} messages \
         published, {} in flight, so {} deliveries per run. A publish commits the message and \
         one delivery row per endpoint before its 202, so its latency is the producer's cost \
         of the fan-out; \"all endpoints reached\" runs from a publish sent until the last of \
         its {} endpoints has it.\n",
        args.endpoints,
        args.endpoints,
        report::thousands(args.messages),
        args.concurrency,
        report::thousands(args.messages * args.endpoints as u64),
        args.endpoints,
    )
}

/// The docs section: what was measured, how, where, the table and the verdicts.
fn section(
    args: &Args,
    machine: &Machine,
    ceiling_rate: f64,
    runs: &[Run],
    verdicts: &[String],
) -> String {
    let mut out = report::table_section(
        &method(args),
        &args.command(),
        machine,
        &header(),
        runs.iter().map(row),
    );
    out.push_str(&format!("\n{}\n\n", ceiling_line(args, ceiling_rate)));
    for verdict in verdicts {
        out.push_str(&format!("- {verdict}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Fanout(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
        report::page::assert_shows_shape(SECTION, &ceiling_line(&args, 36_684.0));
    }
}
