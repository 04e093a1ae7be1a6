//! `hookd-bench deliver`: end to end, from a publish through the API to a verified receipt.
//!
//! Three processes, as in production: hookd (the release binary), this harness publishing,
//! and a receiver (`hookd-bench receive`) that verifies every `webhook-signature` with the
//! endpoint's secret (read back from `GET …/endpoint/{ep}/secret`) and stamps the first
//! verified receipt of each `webhook-id`. The publisher stamps each accepted message's send
//! time; both stamps are unix nanoseconds on the same machine, so their difference is the
//! publish-to-receipt latency. Two modes, each on a fresh hookd and database:
//!
//! - **throughput**: a closed loop of publishes; deliveries/s from the first publish sent to
//!   the last receipt. One run per `--concurrency` (publishes in flight), as the ceiling loop
//!   runs one per `--ceiling-concurrency`; as there, the best counts.
//! - **latency**: an open loop publishing at a fixed rate, an eighth of the machine's ceiling
//!   (measured first in the same run by [`crate::ceiling`]), over a bounded number of
//!   connections; publish-to-receipt percentiles, from when each publish was due.
//!
//! Each mode runs at hookd's defaults first, then with the `--tuned` flags. The targets are
//! judged at the defaults: they are what users run.
//!
//! The ceiling is measured again after the runs, and the throughput target is set against the
//! higher of the two: this machine's speed drifts by a fifth within minutes, and a ceiling
//! caught in a slow minute would make the target easy.
//!
//! Every accepted message must arrive with a valid signature; a run with a missing message, a
//! bad signature or a failed publish is flagged.
//!
//! Where the time goes is counted over each measured phase, per delivered message: hookd's
//! CPU, PostgreSQL's (the processes serving the run's database, when hookd runs on it) and the
//! harness's (this process and the receiver). The harness does the same work per message
//! whatever hookd does, so set beside it hookd's and PostgreSQL's figures compare builds
//! across runs on a machine whose speed drifts.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;

use crate::api::{Api, SendLog};
use crate::ceiling::{self, Ceiling};
use crate::hookd::{Backend, Backends, Before, Database, Hookd, PostgresServer, Setting, Tuning};
use crate::load::{self, Outcome};
use crate::machine::{self, Machine, PostgresCpu, process_cpu_time};
use crate::receiver::{Receipts, ReceiverProcess};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "deliver";

/// The targets at hookd's defaults: deliveries/s as a share of half the ceiling
/// loop's rate, per backend, and the latency at an eighth of that rate.
const TARGET_SHARE_SQLITE: f64 = 0.65;
const TARGET_SHARE_POSTGRES: f64 = 0.4;
const TARGET_P99: Duration = Duration::from_millis(50);
pub(crate) const LATENCY_RATE_DIVISOR: f64 = 8.0;
const TARGET_PEAK_RSS_MIB: f64 = 100.0;

/// Waiting for deliveries gives up after this long without a new receipt.
const DRAIN_PATIENCE: Duration = Duration::from_secs(30);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each mode gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Throughput mode: publishes in flight at all times; one run per value, the best counts
    /// (as the ceiling loop's best of its `--ceiling-concurrency` values does).
    #[arg(long, value_delimiter = ',', default_values_t = [32, 64, 128])]
    concurrency: Vec<usize>,
    /// Throughput mode: messages published in the measured phase.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// Messages published (and delivered) first in each mode, not measured.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// Latency mode: seconds of publishing at an eighth of the ceiling rate.
    #[arg(long, default_value_t = 20)]
    latency_seconds: u64,
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
    /// The command that reproduces these results, every parameter spelled out.
    fn command(&self) -> String {
        let mut command = format!(
            "target/release/hookd-bench deliver --backend {} --concurrency {} --messages {} \
             --warmup {} --latency-seconds {} {}",
            self.backend.flag(),
            report::joined(&self.concurrency, ","),
            self.messages,
            self.warmup,
            self.latency_seconds,
            self.tuning.flag(),
        );
        command.push_str(&self.before.flag());
        command.push_str(&format!(" {}", self.ceiling.flags()));
        command.push_str(&self.output.flags());
        command
    }
}

/// How the publishes are driven.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Mode {
    /// A closed loop of this many publishes in flight.
    Throughput(usize),
    /// Open loop at this many publishes per second.
    Latency(f64),
}

/// One mode's measurements on one backend.
pub(crate) struct Run {
    backend: Backend,
    setting: Setting,
    mode: Mode,
    pub(crate) publishes: Outcome,
    /// Accepted messages of the measured phase that arrived verified.
    pub(crate) delivered: u64,
    /// Accepted messages of the measured phase that never arrived verified.
    pub(crate) missing: u64,
    /// Whole run, warm-up included.
    pub(crate) duplicates: u64,
    pub(crate) bad_signatures: u64,
    /// From the first publish sent to the last receipt.
    pub(crate) deliveries_per_s: f64,
    /// Publish sent to first verified receipt, microseconds.
    latency_us: Histogram<u64>,
    peak_rss_kib: u64,
    /// Cores hookd kept busy from the first measured publish until the last delivery.
    pub(crate) hookd_cores: f64,
    /// CPU per delivered message over that phase.
    cpu: CpuPerMessage,
}

/// CPU used over a run's measured phase, by whom.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuUsed {
    pub(crate) elapsed: Duration,
    pub(crate) hookd: Duration,
    /// PostgreSQL's processes serving the run's database (hookd on PostgreSQL only).
    pub(crate) postgres: Option<Duration>,
    /// This process's and the receiver's (none counted for an in-process consumer).
    pub(crate) harness: Option<Duration>,
}

/// [`CpuUsed`] per delivered message, in microseconds.
#[derive(Clone, Copy, Debug, Default)]
struct CpuPerMessage {
    hookd: f64,
    postgres: Option<f64>,
    harness: Option<f64>,
}

impl CpuUsed {
    fn per_message(&self, delivered: u64) -> CpuPerMessage {
        let us = |cpu: Duration| cpu.as_secs_f64() * 1e6 / delivered.max(1) as f64;
        CpuPerMessage {
            hookd: us(self.hookd),
            postgres: self.postgres.map(us),
            harness: self.harness.map(us),
        }
    }

    /// Cores hookd kept busy.
    fn hookd_cores(&self) -> f64 {
        self.hookd.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// CPU time used so far by hookd, PostgreSQL's processes (when given) and the harness.
struct CpuReading {
    at: Instant,
    hookd: Duration,
    postgres: Option<HashMap<i32, Duration>>,
    harness: Duration,
}

impl CpuReading {
    async fn take(
        hookd: &Hookd,
        postgres: Option<&mut PostgresCpu>,
        arrivals: &impl Arrivals,
    ) -> anyhow::Result<Self> {
        let receiver = match arrivals.pid() {
            Some(pid) => process_cpu_time(pid)?,
            None => Duration::ZERO,
        };
        let postgres = match postgres {
            Some(postgres) => Some(postgres.read().await?),
            None => None,
        };
        Ok(Self {
            at: Instant::now(),
            hookd: hookd.cpu_time()?,
            postgres,
            harness: process_cpu_time(std::process::id())? + receiver,
        })
    }

    /// What was used between `before` and this reading.
    fn since(&self, before: &Self) -> CpuUsed {
        let postgres = self.postgres.as_ref().zip(before.postgres.as_ref());
        CpuUsed {
            elapsed: self.at - before.at,
            hookd: self.hookd.saturating_sub(before.hookd),
            postgres: postgres.map(|(after, before)| machine::used_since(after, before)),
            harness: Some(self.harness.saturating_sub(before.harness)),
        }
    }
}

impl Run {
    pub(crate) fn flagged(&self) -> bool {
        self.missing + self.bad_signatures + self.publishes.error_count() > 0
    }

    pub(crate) fn latency(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.latency_us.value_at_quantile(quantile))
    }

    fn peak_rss_mib(&self) -> f64 {
        self.peak_rss_kib as f64 / 1024.0
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.concurrency.is_empty()
        || args.concurrency.contains(&0)
        || args.messages == 0
        || args.latency_seconds == 0
    {
        bail!("--concurrency values, --messages and --latency-seconds must be at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    let (ceiling_rate, ceiling) = args
        .ceiling
        .given_or_measured(args.output.quiet_below)
        .await?;
    let settings = args.before.and(args.tuning.settings())?;
    println!("{}", header());
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        for setting in &settings {
            let throughput = args.concurrency.iter().map(|&c| Mode::Throughput(c));
            for mode in throughput.chain([Mode::Latency(ceiling_rate / LATENCY_RATE_DIVISOR)]) {
                machine::settle(args.output.quiet_below).await?;
                let run = one_run(backend, setting, mode, &args).await?;
                println!("{}", row(&run));
                runs.push(run);
            }
        }
    }
    // Measured again at the end; the throughput target takes the higher (see the module docs).
    let measured = match ceiling {
        Some(before) => {
            let after = args.ceiling.measure(args.output.quiet_below).await?;
            println!(
                "ceiling loop rate after the runs: {:.0} requests/s",
                after.rate()
            );
            Some((before, after))
        }
        None => None,
    };
    let ceilings = Ceilings {
        target: measured
            .as_ref()
            .map_or(ceiling_rate, |(_, after)| after.rate().max(ceiling_rate)),
        measured: measured.as_ref(),
    };
    let verdicts = verdicts(ceilings.target, &runs);
    for verdict in &verdicts {
        println!("{verdict}");
    }
    let body = section(&args, &machine, &ceilings, &runs, &verdicts);
    args.output.write(SECTION, &body)?;
    if runs.iter().any(Run::flagged) {
        eprintln!("FLAGGED: messages missing, bad signatures or failed publishes");
        for run in runs.iter().filter(|run| run.publishes.error_count() > 0) {
            eprintln!(
                "failed publishes of {} at {}, {:?}: {:?}",
                run.backend.name(),
                run.setting.name(),
                run.mode,
                run.publishes.errors
            );
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Fresh database, hookd and receiver; set up; warm up; measure; tear down.
async fn one_run(
    backend: Backend,
    setting: &Setting,
    mode: Mode,
    args: &Args,
) -> anyhow::Result<Run> {
    let plan = Plan {
        warmup: args.warmup,
        messages: measured_messages(mode, args),
        connections: in_flight(mode, args),
    };
    Database::with_fresh(backend, &args.postgres.url, async |database| {
        measure(backend, setting, mode, database, &plan).await
    })
    .await
}

/// What a run publishes: `warmup` messages first (delivered, not measured), then `messages`,
/// at most `connections` at once.
pub(crate) struct Plan {
    pub(crate) warmup: u64,
    pub(crate) messages: u64,
    pub(crate) connections: usize,
}

/// hookd on `database` with `setting`, serving `/api/v1` to a client keeping the plan's
/// connections.
pub(crate) async fn start_hookd(
    database: &Database,
    setting: &Setting,
    plan: &Plan,
) -> anyhow::Result<(Hookd, Api)> {
    let (url, setting) = (database.url().to_owned(), setting.clone());
    let hookd = tokio::task::spawn_blocking(move || Hookd::start_as(&url, &setting, &[])).await??;
    let api = Api::new(&hookd, plan.connections)?;
    Ok((hookd, api))
}

/// One run of `mode` to one HTTP endpoint and the verifying receiver, on `database`.
pub(crate) async fn measure(
    backend: Backend,
    setting: &Setting,
    mode: Mode,
    database: &Database,
    plan: &Plan,
) -> anyhow::Result<Run> {
    let (hookd, api) = start_hookd(database, setting, plan).await?;
    let app = api.create_app("bench").await?;
    // The receiver needs the endpoint's secret and the endpoint the receiver's address:
    // create the endpoint first, pointing nowhere, and aim it once the receiver listens.
    let endpoint = api
        .create_endpoint(&app, "http://127.0.0.1:9/unset")
        .await?;
    let secret = api.endpoint_secret(&app, &endpoint).await?;
    let receiver = ReceiverProcess::start(&[secret])?;
    api.set_endpoint_url(&app, &endpoint, &receiver.url("deliver"))
        .await?;
    let case = (backend, setting.clone(), mode);
    publish_to(hookd, (&api, &app), &receiver, case, plan).await
}

/// Where a run's messages arrive, verified and stamped: the receiver process, or a consumer
/// of a broker.
pub(crate) trait Arrivals {
    /// Distinct ids that arrived verified so far.
    async fn count(&self) -> anyhow::Result<u64>;
    /// Everything that arrived.
    async fn results(&self) -> anyhow::Result<Receipts>;
    /// The process they arrive in, when not this one (its CPU is the harness's).
    fn pid(&self) -> Option<u32> {
        None
    }
}

impl Arrivals for ReceiverProcess {
    async fn count(&self) -> anyhow::Result<u64> {
        ReceiverProcess::count(self).await
    }

    async fn results(&self) -> anyhow::Result<Receipts> {
        ReceiverProcess::results(self).await
    }

    fn pid(&self) -> Option<u32> {
        Some(ReceiverProcess::pid(self))
    }
}

/// Publishes the plan to `app` through `api` (warm-up, then measured) and waits for the
/// messages at `arrivals`; stops `hookd` after. `case` names the run.
pub(crate) async fn publish_to(
    hookd: Hookd,
    (api, app): (&Api, &str),
    arrivals: &impl Arrivals,
    case: (Backend, Setting, Mode),
    plan: &Plan,
) -> anyhow::Result<Run> {
    send_to(hookd, |log| api.publisher(app, log), arrivals, case, plan).await
}

/// Sends the plan's requests (warm-up, then measured) made by `requests`, which logs the
/// message id and send time of each accepted one when given a log, and waits for the messages
/// at `arrivals`; stops `hookd` after. `case` names the run.
pub(crate) async fn send_to(
    hookd: Hookd,
    requests: impl Fn(Option<SendLog>) -> anyhow::Result<load::Requests>,
    arrivals: &impl Arrivals,
    case: (Backend, Setting, Mode),
    plan: &Plan,
) -> anyhow::Result<Run> {
    let mode = case.2;
    let warmup = drive(mode, plan, 0..plan.warmup, requests(None)?).await;
    drain(arrivals, plan.warmup - warmup.error_count()).await?;

    let log: SendLog = Arc::new(Mutex::new(Vec::new()));
    let mut postgres = if case.0 == Backend::Postgres {
        Some(PostgresCpu::connect(&hookd.database_url).await?)
    } else {
        None
    };
    let before = CpuReading::take(&hookd, postgres.as_mut(), arrivals).await?;
    let numbers = plan.warmup..plan.warmup + plan.messages;
    let publishes = drive(mode, plan, numbers, requests(Some(log.clone()))?).await;
    let sent = std::mem::take(&mut *log.lock().expect("the send log"));
    drain(
        arrivals,
        plan.warmup - warmup.error_count() + sent.len() as u64,
    )
    .await?;
    let cpu = CpuReading::take(&hookd, postgres.as_mut(), arrivals)
        .await?
        .since(&before);
    if let Some(postgres) = postgres {
        postgres.close().await;
    }
    let peak_rss_kib = hookd.peak_rss_kib()?;
    let receipts = arrivals.results().await?;
    hookd.stop();
    Ok(tally(case, publishes, &sent, &receipts, peak_rss_kib, &cpu))
}

/// Most publishes in flight at once: the closed loop's count, or for the open loop the
/// largest of `--concurrency` (its connections, kept open).
fn in_flight(mode: Mode, args: &Args) -> usize {
    match mode {
        Mode::Throughput(concurrency) => concurrency,
        Mode::Latency(_) => latency_connections(args),
    }
}

/// The open loop's connections: as many as the largest closed loop's.
fn latency_connections(args: &Args) -> usize {
    args.concurrency.iter().copied().max().unwrap_or(1)
}

/// How many messages the measured phase publishes.
fn measured_messages(mode: Mode, args: &Args) -> u64 {
    match mode {
        Mode::Throughput(_) => args.messages,
        Mode::Latency(rate) => (rate * args.latency_seconds as f64).round().max(1.0) as u64,
    }
}

/// Publishes messages `numbers` as the mode says, at most the plan's connections at once.
async fn drive(
    mode: Mode,
    plan: &Plan,
    numbers: std::ops::Range<u64>,
    publish: load::Requests,
) -> Outcome {
    match mode {
        Mode::Throughput(concurrency) => load::run(concurrency, numbers, publish).await,
        Mode::Latency(rate) => load::run_paced(rate, plan.connections, numbers, publish).await,
    }
}

/// Waits until `receiver` has `expected` distinct verified ids, or until no new one has
/// arrived for [`DRAIN_PATIENCE`] (then the missing ones show in the tally).
pub(crate) async fn drain(receiver: &impl Arrivals, expected: u64) -> anyhow::Result<()> {
    let (mut last, mut progressed) = (0, Instant::now());
    loop {
        let count = receiver.count().await?;
        if count >= expected {
            return Ok(());
        }
        if count > last {
            (last, progressed) = (count, Instant::now());
        } else if progressed.elapsed() > DRAIN_PATIENCE {
            eprintln!("warning: {count} of {expected} messages arrived; giving up waiting");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Matches the publisher's send times with the receiver's receipts, for the run `case`
/// describes.
pub(crate) fn tally(
    case: (Backend, Setting, Mode),
    publishes: Outcome,
    sent: &[(String, u64)],
    receipts: &Receipts,
    peak_rss_kib: u64,
    cpu: &CpuUsed,
) -> Run {
    let mut latency_us =
        Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds");
    let (mut missing, mut last_receipt) = (0, 0);
    for (id, at) in sent {
        match receipts.first_seen.get(id) {
            Some(&received) => {
                latency_us.saturating_record(received.saturating_sub(*at) / 1_000);
                last_receipt = last_receipt.max(received);
            }
            None => missing += 1,
        }
    }
    let first_sent = sent.iter().map(|(_, at)| *at).min().unwrap_or(0);
    let delivered = latency_us.len();
    let span = Duration::from_nanos(last_receipt.saturating_sub(first_sent));
    let (backend, setting, mode) = case;
    Run {
        backend,
        setting,
        mode,
        publishes,
        delivered,
        missing,
        duplicates: receipts.duplicates,
        bad_signatures: receipts.bad_signatures,
        deliveries_per_s: delivered as f64 / span.as_secs_f64().max(1e-9),
        latency_us,
        peak_rss_kib,
        hookd_cores: cpu.hookd_cores(),
        cpu: cpu.per_message(delivered),
    }
}

fn header() -> String {
    report::header(&[
        "backend",
        "hookd",
        "mode",
        "publish rate",
        "deliveries/s",
        "p50",
        "p90",
        "p99",
        "max",
        "delivered",
        "missing / bad signatures / duplicates / publish errors",
        "hookd peak RSS",
        "hookd CPU",
        "CPU per message: hookd / PostgreSQL / harness",
    ])
}

fn row(run: &Run) -> String {
    let mode = match run.mode {
        Mode::Throughput(concurrency) => format!("throughput, {concurrency} in flight"),
        Mode::Latency(rate) => format!("latency at {}/s", report::thousands(rate.round() as u64)),
    };
    report::row(&[
        run.backend.name().to_owned(),
        run.setting.name().to_owned(),
        mode,
        format!(
            "{}/s",
            report::thousands(run.publishes.throughput().round() as u64)
        ),
        report::thousands(run.deliveries_per_s.round() as u64),
        report::millis(run.latency(0.50)),
        report::millis(run.latency(0.90)),
        report::millis(run.latency(0.99)),
        report::millis(Duration::from_micros(run.latency_us.max())),
        report::thousands(run.delivered),
        [
            report::flagged(run.missing),
            report::flagged(run.bad_signatures),
            report::thousands(run.duplicates),
            report::flagged(run.publishes.error_count()),
        ]
        .join(" / "),
        format!("{:.0} MiB", run.peak_rss_mib()),
        format!("{:.2} cores", run.hookd_cores),
        run.cpu.cell(),
    ])
}

impl CpuPerMessage {
    /// `hookd / PostgreSQL / harness µs`, a dash for what was not counted.
    fn cell(&self) -> String {
        let us = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.0}"));
        format!(
            "{} / {} / {} µs",
            us(Some(self.hookd)),
            us(self.postgres),
            us(self.harness)
        )
    }
}

/// The targets, judged on the runs at hookd's defaults; throughput against
/// `target_ceiling`, the ceiling loop's rate. Memory holds for every run.
fn verdicts(target_ceiling: f64, runs: &[Run]) -> Vec<String> {
    let met = |ok: bool| if ok { "met" } else { "not met" };
    let half = target_ceiling / 2.0;
    let mut out = Vec::new();
    let at_defaults = || runs.iter().filter(|r| r.setting == Setting::Defaults);
    // As for the ceiling, the best throughput run counts; a flagged run counts for nothing.
    let rate = |r: &Run| if r.flagged() { 0.0 } else { r.deliveries_per_s };
    for (backend, share) in [
        (Backend::Sqlite, TARGET_SHARE_SQLITE),
        (Backend::Postgres, TARGET_SHARE_POSTGRES),
    ] {
        let best = at_defaults()
            .filter(|r| r.backend == backend && matches!(r.mode, Mode::Throughput(_)))
            .max_by(|a, b| rate(a).total_cmp(&rate(b)));
        if let Some(run) = best {
            out.push(format!(
                "Throughput target ({} at the defaults ≥ {} of half the ceiling, ≥ {} \
                 deliveries/s): **{}** (best {} deliveries/s, {} of half the ceiling).",
                backend.name(),
                report::percent(share),
                report::thousands((share * half).round() as u64),
                met(rate(run) >= share * half),
                report::thousands(run.deliveries_per_s.round() as u64),
                report::percent(run.deliveries_per_s / half),
            ));
        }
    }
    for run in at_defaults().filter(|r| matches!(r.mode, Mode::Latency(_))) {
        let p99 = run.latency(0.99);
        out.push(format!(
            "Latency target ({} at the defaults: p99 publish-to-receipt < {} ms at an eighth \
             of the ceiling): **{}** (p99 {}).",
            run.backend.name(),
            TARGET_P99.as_millis(),
            met(p99 < TARGET_P99 && !run.flagged()),
            report::millis(p99),
        ));
    }
    out.extend(before_and_after(runs, rate));
    let peak = runs.iter().map(Run::peak_rss_mib).fold(0.0, f64::max);
    out.push(format!(
        "Memory target (hookd peak RSS < {TARGET_PEAK_RSS_MIB:.0} MB in every run): **{}** \
         (highest {peak:.0} MiB).",
        met(peak < TARGET_PEAK_RSS_MIB),
    ));
    out
}

/// Per backend, the earlier build's best throughput at its defaults beside this build's, when
/// `--before` ran one.
fn before_and_after(runs: &[Run], rate: impl Fn(&Run) -> f64) -> Vec<String> {
    let best = |backend: Backend, before: bool| {
        runs.iter()
            .filter(|r| r.backend == backend && matches!(r.mode, Mode::Throughput(_)))
            .filter(|r| match &r.setting {
                Setting::Before(_) => before,
                Setting::Defaults => !before,
                Setting::Tuned(_) => false,
            })
            .max_by(|a, b| rate(a).total_cmp(&rate(b)))
    };
    [Backend::Sqlite, Backend::Postgres]
        .into_iter()
        .filter_map(|backend| Some((backend, best(backend, true)?, best(backend, false)?)))
        .map(|(backend, before, after)| {
            format!(
                "Before and after ({}, best throughput at the defaults): {} deliveries/s {}, \
                 {} deliveries/s this build ({}).",
                backend.name(),
                report::thousands(rate(before).round() as u64),
                before.setting.label(),
                report::thousands(rate(after).round() as u64),
                report::change(rate(before), rate(after)),
            )
        })
        .collect()
}

/// The ceiling loop's rates a run used.
struct Ceilings<'a> {
    /// Measured before the runs (which sets the latency runs' rate) and again after them;
    /// `None` when the rate was given with `--ceiling-rate`.
    measured: Option<&'a (Ceiling, Ceiling)>,
    /// The rate the throughput target is set against: the higher of the two, or the given one.
    target: f64,
}

impl Ceilings<'_> {
    /// How the rates were found, for the docs.
    fn describe(&self) -> String {
        let measured = |c: &Ceiling| {
            format!(
                "{} requests/s (best at {} in flight)",
                report::thousands(c.rate().round() as u64),
                c.best().concurrency
            )
        };
        match self.measured {
            Some((before, after)) => format!(
                "Ceiling loop rate, measured in this run: {} first, which sets the latency \
                 runs' rate; {} again after the runs. The throughput target is set against the \
                 higher, {} requests/s; end-to-end ceiling (half): {} messages/s.",
                measured(before),
                measured(after),
                report::thousands(self.target.round() as u64),
                report::thousands((self.target / 2.0).round() as u64),
            ),
            None => format!(
                "Ceiling loop rate: {} requests/s, given with `--ceiling-rate`; end-to-end \
                 ceiling (half): {} messages/s.",
                report::thousands(self.target.round() as u64),
                report::thousands((self.target / 2.0).round() as u64),
            ),
        }
    }
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "Publish (`POST /api/v1/app/{{app}}/msg`, ~300-byte payloads, one of 1,024 built once \
         as the ceiling loop's are) → hookd stores and delivers → the verifying receiver. One \
         application, one endpoint; each mode on a fresh hookd and database after {} warm-up \
         messages have been delivered. Latencies run from a publish to its first verified \
         receipt (both stamps from the unix clock of the same machine).\n\n\
         - **throughput**: {} publishes in flight (one run each; as for the ceiling, the best \
         counts), {} messages; deliveries/s from the first publish sent to the last receipt.\n\
         - **latency**: publishes due open loop at an eighth of the ceiling loop rate for {} s, \
         over at most {} connections (a publish due while all are busy waits for one); \
         latency runs from the time a publish was due, so that wait counts.\n\n\
         CPU per message is counted over each measured phase and divided by the messages \
         delivered: hookd's, PostgreSQL's (the processes serving the run's database) and the \
         harness's (the publisher and the receiver). The harness does the same work per \
         message whatever hookd does, so hookd's and PostgreSQL's figures beside it compare \
         builds across runs on a machine whose speed drifts.\n",
        report::thousands(args.warmup),
        report::listed(args.concurrency.iter().map(|&c| c as u64), "and"),
        report::thousands(args.messages),
        args.latency_seconds,
        latency_connections(args),
    )
}

/// The docs section: what was measured, how, where, the table and the verdicts.
fn section(
    args: &Args,
    machine: &Machine,
    ceilings: &Ceilings,
    runs: &[Run],
    verdicts: &[String],
) -> String {
    let mut out = format!(
        "{}\n{}\n\n{}\n{}\n",
        method(args),
        ceilings.describe(),
        report::provenance(&args.command(), machine),
        header(),
    );
    for run in runs {
        out.push_str(&row(run));
        out.push('\n');
    }
    out.push('\n');
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
        let crate::Command::Deliver(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
        let ceiling = |concurrency: usize, rate: u64| Ceiling {
            points: vec![ceiling::Point {
                concurrency,
                outcome: Outcome {
                    completed: rate,
                    elapsed: Duration::from_secs(1),
                    ..Outcome::new()
                },
                sender_cores: 1.0,
                receiver_cores: 1.0,
            }],
        };
        let measured = (ceiling(32, 32_773), ceiling(64, 45_024));
        let ceilings = Ceilings {
            measured: Some(&measured),
            target: 45_024.0,
        };
        report::page::assert_shows_shape(SECTION, &ceilings.describe());
    }

    #[test]
    fn cpu_per_message_divides_by_the_messages_delivered_and_dashes_what_was_not_counted() {
        let cpu = CpuUsed {
            elapsed: Duration::from_secs(2),
            hookd: Duration::from_millis(900),
            postgres: None,
            harness: Some(Duration::from_millis(450)),
        };
        assert_eq!(cpu.per_message(10_000).cell(), "90 / – / 45 µs");
        assert!((cpu.hookd_cores() - 0.45).abs() < 1e-9);
        let on_postgres = CpuUsed {
            postgres: Some(Duration::from_millis(1_200)),
            ..cpu
        };
        assert_eq!(on_postgres.per_message(10_000).cell(), "90 / 120 / 45 µs");
    }
}
