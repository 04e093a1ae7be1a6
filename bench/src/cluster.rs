//! `hookd-bench cluster`: several hookd processes on one PostgreSQL database, and the
//! transactional outbox's commit-to-receipt latency.
//!
//! - **scale-out**: for each `--concurrency` and for 1, 2, … `--max-processes` hookd processes
//!   (each API and engine) on a fresh database, this harness publishes `--messages` through
//!   their APIs in turn (a closed loop of that many publishes in flight) to one endpoint; a
//!   verifying receiver process (`hookd-bench receive`) stamps each message's first receipt.
//!   Deliveries/s runs from the first publish sent to the last receipt. On a machine with few
//!   cores the point is that the total holds while the work is shared, not that it grows. A
//!   few publishes in flight leave one process waiting on round trips with cores idle; many
//!   keep every configuration busy, so the totals compare what the machine can do, and the
//!   verdict is judged at the most in flight (the others are shown beside it, with how much of
//!   the machine one process left idle).
//! - **outbox latency**: one hookd process; a producer connection commits single-row
//!   transactions into `hookd.outbox` open loop at `--outbox-rate` for `--outbox-seconds`,
//!   stamping each commit's return; latency is the receipt stamp minus that (same machine,
//!   same clock). Rows carry an `eventId`, which maps each message back to its commit.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use sqlx::postgres::PgPoolOptions;

use crate::api::{Api, EngineWrites, SendLog, StoreWrites, unix_nanos};
use crate::deliver::drain;
use crate::hookd::{Backend, Database, Hookd, PostgresServer, Setting, Tuning};
use crate::load::{self, Outcome, Requests};
use crate::machine::{self, Machine, MachineCpu};
use crate::receiver::{Receipts, ReceiverProcess};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "cluster";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scale-out runs with 1, 2, … this many hookd processes.
    #[arg(long, default_value_t = 3)]
    max_processes: usize,
    /// Scale-out: publishes in flight at all times, spread over the processes; one set of
    /// runs per value, the verdict judged at the largest.
    #[arg(long, value_delimiter = ',', default_values_t = [32, 512])]
    concurrency: Vec<usize>,
    /// Scale-out: rounds of runs (1, 2, … processes each) per number in flight; the verdict
    /// compares each process count's median over the rounds, since single runs of one build
    /// differ by a fifth from one minute to the next.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Scale-out: messages published in the measured phase.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// Messages published (and delivered) first in each scale-out run, not measured.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    #[command(flatten)]
    tuning: Tuning,
    /// Outbox latency: single-row transactions committed per second.
    #[arg(long, default_value_t = 200.0)]
    outbox_rate: f64,
    /// Outbox latency: seconds of committing.
    #[arg(long, default_value_t = 20)]
    outbox_seconds: u64,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    /// The command that reproduces these results, every parameter spelled out.
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench cluster --max-processes {} --concurrency {} --rounds {} \
             --messages {} --warmup {} {} --outbox-rate {} --outbox-seconds {}{}",
            self.max_processes,
            report::joined(&self.concurrency, ","),
            self.rounds,
            self.messages,
            self.warmup,
            self.tuning.flag(),
            self.outbox_rate,
            self.outbox_seconds,
            self.output.flags(),
        )
    }

    /// What every process runs with: the setting's flags, and room for every publishing
    /// connection and the harness's own few (a connection past hookd's bound waits, unserved,
    /// until one closes).
    fn hookd_options(&self, setting: &Setting) -> Vec<String> {
        let connections = self.concurrency.iter().max().unwrap_or(&0) + 64;
        let mut options = setting.flags().to_vec();
        options.extend(["--max-connections".to_owned(), connections.to_string()]);
        options
    }
}

/// One scale-out run.
struct ScaleRun {
    /// Publishes in flight.
    concurrency: usize,
    processes: usize,
    publishes: Outcome,
    delivered: u64,
    missing: u64,
    duplicates: u64,
    bad_signatures: u64,
    deliveries_per_s: f64,
    /// Cores each process kept busy over the measured phase.
    cores: Vec<f64>,
    /// The share of the machine's CPU left idle over the measured phase.
    idle: f64,
    /// The engines' claims and record batches over the measured phase, all processes.
    writes: EngineWrites,
}

/// An outbox latency run: commits, and how long each took to reach the receiver.
pub(crate) struct OutboxRun {
    pub(crate) committed: u64,
    pub(crate) delivered: u64,
    latency_us: Histogram<u64>,
}

impl OutboxRun {
    /// Matches hookd's messages (`(id, event_id)`) with the commits (each one's return by
    /// event id, as [`commit_paced`] stamps them) and the receiver's first receipts.
    pub(crate) fn tally(
        committed: &HashMap<String, u64>,
        messages: Vec<(String, Option<String>)>,
        receipts: &Receipts,
    ) -> Self {
        let mut latency_us =
            Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds");
        for (message, event_id) in messages {
            let commit = event_id.and_then(|e| committed.get(&e).copied());
            if let (Some(commit), Some(&received)) = (commit, receipts.first_seen.get(&message)) {
                latency_us.saturating_record(received.saturating_sub(commit) / 1_000);
            }
        }
        Self {
            committed: committed.len() as u64,
            delivered: latency_us.len(),
            latency_us,
        }
    }

    pub(crate) fn missing(&self) -> u64 {
        self.committed - self.delivered
    }

    pub(crate) fn latency(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.latency_us.value_at_quantile(quantile))
    }

    pub(crate) fn max(&self) -> Duration {
        Duration::from_micros(self.latency_us.max())
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.max_processes == 0
        || args.concurrency.is_empty()
        || args.concurrency.contains(&0)
        || args.rounds == 0
        || args.messages == 0
    {
        bail!("--max-processes, --concurrency values, --rounds and --messages must be at least 1");
    }
    if args.outbox_rate <= 0.0 || args.outbox_seconds == 0 {
        bail!("--outbox-rate and --outbox-seconds must be positive");
    }
    crate::hookd::binary()?;
    let machine = Machine::describe();
    println!("machine: {}", machine.summary());
    let mut scales = Vec::new();
    for setting in args.tuning.settings() {
        println!("hookd at {}\n{}", setting.label(), scale_header());
        scales.push((setting.clone(), scale_out_runs(&setting, &args).await?));
    }
    machine::settle(args.output.quiet_below).await?;
    let outbox = Database::with_fresh(Backend::Postgres, &args.postgres.url, async |database| {
        outbox_latency(database, &args).await
    })
    .await?;
    println!("{}\n{}", outbox_header(), outbox_row(&args, &outbox));
    args.output
        .write(SECTION, &section(&args, &machine, &scales, &outbox))?;
    let flagged = scales
        .iter()
        .flat_map(|(_, scale)| scale)
        .any(|r| r.missing + r.bad_signatures + r.publishes.error_count() > 0)
        || outbox.missing() > 0;
    if flagged {
        eprintln!("FLAGGED: messages missing, bad signatures or failed publishes");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Every scale-out run at one setting. Rounds alternate the process counts (1, 2, 3, 1, 2, 3,
/// …), so a slow minute falls on one run of each rather than on every run of one.
async fn scale_out_runs(setting: &Setting, args: &Args) -> anyhow::Result<Vec<ScaleRun>> {
    let runs = args.concurrency.iter().flat_map(|&concurrency| {
        (0..args.rounds).flat_map(move |_| (1..=args.max_processes).map(move |p| (concurrency, p)))
    });
    let mut scale = Vec::new();
    for (concurrency, processes) in runs {
        machine::settle(args.output.quiet_below).await?;
        let run = Database::with_fresh(Backend::Postgres, &args.postgres.url, async |database| {
            scale_out(concurrency, processes, setting, database, args).await
        })
        .await?;
        println!("{}", scale_row(&run));
        scale.push(run);
    }
    Ok(scale)
}

/// Starts `count` hookd processes on `database`, one after the other (the first migrates).
async fn start_processes(
    count: usize,
    setting: &Setting,
    database: &Database,
    args: &Args,
) -> anyhow::Result<Vec<Hookd>> {
    let mut processes = Vec::new();
    for _ in 0..count {
        let (url, options) = (database.url().to_owned(), args.hookd_options(setting));
        processes.push(tokio::task::spawn_blocking(move || Hookd::start(&url, &options)).await??);
    }
    Ok(processes)
}

/// A verifying receiver with an application and one endpoint aimed at it, set up through
/// `api`; returns the application's id.
pub(crate) async fn receiver_for(
    api: &Api,
    name: &str,
) -> anyhow::Result<(String, ReceiverProcess)> {
    let app = api.create_app("bench").await?;
    let (_, receiver) = verified_endpoint(api, &app, name).await?;
    Ok((app, receiver))
}

/// A new endpoint of `app` aimed at a new verifying receiver process (`/hooks/{name}`);
/// returns the endpoint's id and the receiver.
pub(crate) async fn verified_endpoint(
    api: &Api,
    app: &str,
    name: &str,
) -> anyhow::Result<(String, ReceiverProcess)> {
    let endpoint = api.create_endpoint(app, "http://127.0.0.1:9/unset").await?;
    let secret = api.endpoint_secret(app, &endpoint).await?;
    let receiver = ReceiverProcess::start(&[secret])?;
    api.set_endpoint_url(app, &endpoint, &receiver.url(name))
        .await?;
    Ok((endpoint, receiver))
}

/// Publishes to the processes in turn: message `i` through process `i % n`.
fn round_robin(apis: &[Api], app: &str, log: Option<SendLog>) -> anyhow::Result<Requests> {
    let publishers = apis
        .iter()
        .map(|api| api.publisher(app, log.clone()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Arc::new(move |i| {
        publishers[(i % publishers.len() as u64) as usize](i)
    }))
}

async fn scale_out(
    concurrency: usize,
    processes: usize,
    setting: &Setting,
    database: &Database,
    args: &Args,
) -> anyhow::Result<ScaleRun> {
    let hookds = start_processes(processes, setting, database, args).await?;
    let apis = hookds
        .iter()
        .map(|h| Api::new(h, concurrency))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (app, receiver) = receiver_for(&apis[0], "cluster").await?;
    let warmup = load::run(concurrency, 0..args.warmup, round_robin(&apis, &app, None)?).await;
    drain(&receiver, args.warmup - warmup.error_count()).await?;

    let log: SendLog = Arc::new(Mutex::new(Vec::new()));
    let writes_before = engine_writes(&apis).await?;
    let cpu_before = hookds
        .iter()
        .map(Hookd::cpu_time)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let machine_before = MachineCpu::read()?;
    let started = Instant::now();
    let publishes = load::run(
        concurrency,
        args.warmup..args.warmup + args.messages,
        round_robin(&apis, &app, Some(log.clone()))?,
    )
    .await;
    let sent = std::mem::take(&mut *log.lock().expect("the send log"));
    drain(
        &receiver,
        args.warmup - warmup.error_count() + sent.len() as u64,
    )
    .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let idle = MachineCpu::read()?.idle_since(&machine_before);
    let cores = hookds
        .iter()
        .zip(cpu_before)
        .map(|(h, before)| Ok(h.cpu_time()?.saturating_sub(before).as_secs_f64() / elapsed))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let writes = engine_writes(&apis).await? - writes_before;
    let receipts = receiver.results().await?;
    drop(hookds);
    let (mut delivered, mut last) = (0, 0);
    for (id, _) in &sent {
        if let Some(&at) = receipts.first_seen.get(id) {
            delivered += 1;
            last = last.max(at);
        }
    }
    let first = sent.iter().map(|(_, at)| *at).min().unwrap_or(0);
    let span = Duration::from_nanos(last.saturating_sub(first));
    Ok(ScaleRun {
        concurrency,
        processes,
        publishes,
        delivered,
        missing: sent.len() as u64 - delivered,
        duplicates: receipts.duplicates,
        bad_signatures: receipts.bad_signatures,
        deliveries_per_s: delivered as f64 / span.as_secs_f64().max(1e-9),
        cores,
        idle,
        writes,
    })
}

/// Every process's claims and record batches so far, summed.
async fn engine_writes(apis: &[Api]) -> anyhow::Result<EngineWrites> {
    let mut each = Vec::new();
    for api in apis {
        each.push(api.engine_writes().await?);
    }
    Ok(EngineWrites {
        claims: each.iter().map(|w| w.claims).sum(),
        records: each.iter().map(|w| w.records).sum(),
    })
}

async fn outbox_latency(database: &Database, args: &Args) -> anyhow::Result<OutboxRun> {
    let hookd = start_processes(1, &Setting::Defaults, database, args)
        .await?
        .remove(0);
    let api = Api::new(&hookd, 4)?;
    let (app, receiver) = receiver_for(&api, "outbox").await?;
    let producer = PgPoolOptions::new()
        .max_connections(16)
        .connect(database.url())
        .await
        .context("cannot connect the outbox producer")?;
    let commit = {
        let (producer, app) = (producer.clone(), app.clone());
        move |i, event_id| {
            let (producer, app) = (producer.clone(), app.clone());
            async move {
                let mut tx = producer.begin().await.map_err(|e| e.to_string())?;
                sqlx::query(
                    "INSERT INTO hookd.outbox (app, event_type, payload, event_id)
                     VALUES ($1, 'bench.outbox', $2::json, $3)",
                )
                .bind(&app)
                .bind(format!(r#"{{"n": {i}}}"#))
                .bind(&event_id)
                .execute(&mut *tx)
                .await
                .map_err(|e| e.to_string())?;
                tx.commit().await.map_err(|e| e.to_string())
            }
        }
    };
    let committed = commit_paced(args.outbox_rate, args.outbox_seconds, commit).await;
    drain(&receiver, committed.len() as u64).await?;
    let receipts = receiver.results().await?;
    let ids: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT id, event_id FROM hookd.messages")
            .fetch_all(&producer)
            .await?;
    producer.close().await;
    hookd.stop();
    Ok(OutboxRun::tally(&committed, ids, &receipts))
}

/// Single-row outbox transactions, open loop at `rate` per second for `seconds`:
/// `commit(i, event_id)` commits one transaction inserting row `i` with that event id (at most
/// 16 at once, as a connection pool allows). Returns when each commit returned, in unix
/// nanoseconds (the receiver's clock), by event id; failed commits are left out.
pub(crate) async fn commit_paced<F, Fut>(rate: f64, seconds: u64, commit: F) -> HashMap<String, u64>
where
    F: Fn(u64, String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let committed: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let count = (rate * seconds as f64).round().max(1.0) as u64;
    let stamps = committed.clone();
    let stamped = Arc::new(move |i| {
        let event_id = format!("bench-{i}");
        let (done, stamps) = (commit(i, event_id.clone()), stamps.clone());
        async move {
            done.await?;
            let at = unix_nanos();
            stamps.lock().expect("commits").insert(event_id, at);
            Ok(())
        }
    });
    let outcome = load::run_paced(rate, 16, 0..count, stamped).await;
    if outcome.error_count() > 0 {
        eprintln!(
            "warning: {} outbox commits failed: {:?}",
            outcome.error_count(),
            outcome.errors
        );
    }
    std::mem::take(&mut *committed.lock().expect("commits"))
}

/// The console's table of single runs.
fn scale_header() -> String {
    report::header(&[
        "in flight",
        "processes",
        "publish rate",
        "deliveries/s",
        "delivered",
        "missing",
        "duplicates",
        "bad signatures",
        "publish errors",
        "CPU per process",
        "machine idle",
        "deliveries per claim",
        "per record batch",
    ])
}

fn scale_row(run: &ScaleRun) -> String {
    let cores: Vec<String> = run.cores.iter().map(|c| format!("{c:.2}")).collect();
    report::row(&[
        run.concurrency.to_string(),
        run.processes.to_string(),
        format!(
            "{}/s",
            report::thousands(run.publishes.throughput().round() as u64)
        ),
        report::thousands(run.deliveries_per_s.round() as u64),
        report::thousands(run.delivered),
        report::thousands(run.missing),
        report::thousands(run.duplicates),
        report::thousands(run.bad_signatures),
        report::thousands(run.publishes.error_count()),
        format!("{} cores", cores.join(" + ")),
        report::percent(run.idle),
        run.writes.claims.rows_per_write(),
        run.writes.records.rows_per_write(),
    ])
}

/// The docs table: a row per setting, publishes in flight and process count.
fn docs_header() -> String {
    report::header(&[
        "hookd",
        "in flight",
        "processes",
        "deliveries/s, median",
        "each round",
        "publish rate",
        "CPU per process",
        "machine idle",
        "deliveries per claim",
        "per record batch",
        "missing / duplicates / bad signatures / publish errors (all rounds)",
    ])
}

/// The runs of one setting grouped by publishes in flight, then process count, each group
/// in the order its rounds ran.
fn groups(scale: &[ScaleRun]) -> Vec<Vec<&ScaleRun>> {
    let mut groups: Vec<Vec<&ScaleRun>> = Vec::new();
    for run in scale {
        let same = |g: &&mut Vec<&ScaleRun>| {
            g[0].concurrency == run.concurrency && g[0].processes == run.processes
        };
        match groups.iter_mut().find(same) {
            Some(group) => group.push(run),
            None => groups.push(vec![run]),
        }
    }
    groups.sort_by_key(|g| {
        let order = scale.iter().position(|r| r.concurrency == g[0].concurrency);
        (order, g[0].processes)
    });
    groups
}

/// A docs row for one group of rounds: each round's total, and the median of every figure
/// over the rounds (as the verdict takes them); the counts that should be zero are summed.
fn docs_row(setting: &Setting, rounds: &[&ScaleRun]) -> String {
    let median = |value: &dyn Fn(&ScaleRun) -> Option<f64>| {
        report::median(rounds.iter().filter_map(|r| value(r)).collect())
    };
    let per_write = |writes: fn(&ScaleRun) -> StoreWrites| {
        median(&|r| {
            let w = writes(r);
            (w.writes > 0).then(|| w.rows as f64 / w.writes as f64)
        })
        .map_or_else(|| "-".to_owned(), |m| format!("{m:.1}"))
    };
    let each: Vec<String> = rounds
        .iter()
        .map(|r| report::thousands(r.deliveries_per_s.round() as u64))
        .collect();
    let processes = rounds[0].processes;
    let cores: Vec<String> = (0..processes)
        .map(|i| format!("{:.2}", median(&|r| r.cores.get(i).copied()).unwrap_or(0.0)))
        .collect();
    let sum = |count: fn(&ScaleRun) -> u64| rounds.iter().map(|r| count(r)).sum::<u64>();
    report::row(&[
        setting.name().to_owned(),
        rounds[0].concurrency.to_string(),
        processes.to_string(),
        report::thousands(median(&|r| Some(r.deliveries_per_s)).unwrap_or(0.0).round() as u64),
        each.join(" / "),
        format!(
            "{}/s",
            report::thousands(
                median(&|r| Some(r.publishes.throughput()))
                    .unwrap_or(0.0)
                    .round() as u64
            )
        ),
        format!("{} cores", cores.join(" + ")),
        report::percent(median(&|r| Some(r.idle)).unwrap_or(0.0)),
        per_write(|r| r.writes.claims),
        per_write(|r| r.writes.records),
        [
            report::flagged(sum(|r| r.missing)),
            report::thousands(sum(|r| r.duplicates)),
            report::flagged(sum(|r| r.bad_signatures)),
            report::flagged(sum(|r| r.publishes.error_count())),
        ]
        .join(" / "),
    ])
}

/// How far a total may fall below one process's and still count as held: an allowance for
/// noise only (runs of one build on a shared VM have differed by more, minute to minute).
const HELD_WITHIN: f64 = 0.05;

/// The median of `value` over the runs with `processes` processes at `concurrency` in flight.
fn median_of(
    scale: &[ScaleRun],
    concurrency: usize,
    processes: usize,
    value: fn(&ScaleRun) -> f64,
) -> Option<f64> {
    report::median(
        scale
            .iter()
            .filter(|r| r.concurrency == concurrency && r.processes == processes)
            .map(value)
            .collect(),
    )
}

/// The median total of the runs with `processes` processes at `concurrency` in flight.
fn median_total(scale: &[ScaleRun], concurrency: usize, processes: usize) -> Option<f64> {
    median_of(scale, concurrency, processes, |r| r.deliveries_per_s)
}

/// How much of the machine one process left idle at `concurrency` in flight (the median), as
/// text.
fn idle_of_one(scale: &[ScaleRun], concurrency: usize) -> String {
    median_of(scale, concurrency, 1, |r| r.idle).map_or_else(|| "?".to_owned(), report::percent)
}

/// Each process count's median total against one process's at `concurrency`, and whether
/// every one held; `None` without a one-process run.
fn changes_at(args: &Args, scale: &[ScaleRun], concurrency: usize) -> Option<(String, bool)> {
    let one = median_total(scale, concurrency, 1)?;
    let mut held = true;
    let changes: Vec<String> = (2..=args.max_processes)
        .filter_map(|processes| {
            let total = median_total(scale, concurrency, processes)?;
            let ratio = total / one.max(1e-9);
            held &= ratio >= 1.0 - HELD_WITHIN;
            Some(format!(
                "{processes} processes {:+.0} %",
                (ratio - 1.0) * 100.0
            ))
        })
        .collect();
    let changes = if changes.is_empty() {
        "one process only".to_owned()
    } else {
        changes.join(", ")
    };
    Some((format!("{concurrency} in flight: {changes}"), held))
}

/// The verdict, judged at the most in flight, where the processes have the most work to
/// share, so the totals compare what they can deliver. With fewer in flight one process leaves
/// more of the machine idle, waiting on its round trips, and the total is the number in flight
/// over a publish's latency; those changes are shown, not judged.
fn scale_verdict(args: &Args, setting: &Setting, scale: &[ScaleRun]) -> String {
    let judged = args.concurrency.iter().copied().max().unwrap_or(0);
    let (judged_changes, held) =
        changes_at(args, scale, judged).unwrap_or_else(|| ("no runs".to_owned(), false));
    let lighter: Vec<String> = args
        .concurrency
        .iter()
        .filter(|&&c| c != judged)
        .filter_map(|&c| {
            let (changes, _) = changes_at(args, scale, c)?;
            Some(format!(
                "{changes}, one process leaving {} idle",
                idle_of_one(scale, c)
            ))
        })
        .collect();
    let measure = if args.rounds > 1 {
        format!("the median of {} rounds", args.rounds)
    } else {
        "one run".to_owned()
    };
    let mut verdict = format!(
        "**{}**: scale-out target (the total does not drop as processes are added: at the \
         most in flight, {judged}, where one process left {} of the machine idle, every \
         total, {measure}, within {} of one process's): **{}** ({judged_changes}).",
        setting.name(),
        idle_of_one(scale, judged),
        report::percent(HELD_WITHIN),
        if held { "met" } else { "not met" },
    );
    if !lighter.is_empty() {
        verdict.push_str(&format!(" Not judged: {}.", lighter.join("; ")));
    }
    verdict
}

fn outbox_header() -> String {
    report::header(&[
        "commits/s",
        "committed",
        "delivered",
        "missing",
        "p50",
        "p90",
        "p99",
        "max",
    ])
}

fn outbox_row(args: &Args, run: &OutboxRun) -> String {
    report::row(&[
        format!("{}", args.outbox_rate),
        report::thousands(run.committed),
        report::thousands(run.delivered),
        report::thousands(run.missing()),
        report::millis(run.latency(0.50)),
        report::millis(run.latency(0.90)),
        report::millis(run.latency(0.99)),
        report::millis(run.max()),
    ])
}

/// How the runs were repeated and what a row shows, for the docs.
fn rounds_text(args: &Args) -> String {
    match args.rounds {
        1 => "One run per process count.".to_owned(),
        n => format!(
            "{n} rounds, each running 1 to {} processes in turn, so the runs of each count \
             alternate with the others'; a row shows each round's deliveries/s and the median \
             of every figure over the rounds.",
            args.max_processes
        ),
    }
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "**Scale-out**: 1 to {} `hookd serve` processes (each API and engine) on one \
         PostgreSQL database, all with `--max-connections` room for every publishing \
         connection; the harness publishes {} messages ({} in flight, after {} warm-up \
         messages) through their APIs in turn to one endpoint, whose ceiling \
         (`--endpoint-max-concurrency`) holds across the cluster; deliveries/s from the first \
         publish sent to the last receipt. {} With few cores the point is that the total holds \
         while the work is shared, not that it grows, so the target is judged at the most in \
         flight. With fewer, one process leaves more of the machine idle, waiting on its round \
         trips, so the total is the number in flight over a publish's latency, and each added \
         process commits smaller batches of the same load, each paying the database's fixed \
         cost of a transaction. Machine idle is the share of all cores' time left idle (or \
         waiting on I/O); deliveries per claim and per record batch are all engines' (from \
         their `/metrics`): the fewer, the more statements each delivery costs the database, \
         though deliveries a publish hands to its own process's engine need no claim at \
         all.\n",
        args.max_processes,
        report::thousands(args.messages),
        report::listed(args.concurrency.iter().map(|&c| c as u64), "or"),
        report::thousands(args.warmup),
        rounds_text(args),
    )
}

/// What the section says of the outbox run before its figures.
fn outbox_method(args: &Args) -> String {
    format!(
        "**Outbox commit-to-receipt**: one hookd process; a producer commits single-row \
         transactions into `hookd.outbox` at {} per second for {} s (open loop); latency is \
         the receiver's first verified receipt minus the moment the producer's `COMMIT` \
         returned. hookd's relay wakes on the outbox trigger's NOTIFY.\n",
        args.outbox_rate, args.outbox_seconds,
    )
}

fn section(
    args: &Args,
    machine: &Machine,
    scales: &[(Setting, Vec<ScaleRun>)],
    outbox: &OutboxRun,
) -> String {
    let mut out = format!(
        "{}\n{}\n{}\n",
        method(args),
        report::provenance(&args.command(), machine),
        docs_header(),
    );
    for (setting, scale) in scales {
        for rounds in groups(scale) {
            out.push_str(&docs_row(setting, &rounds));
            out.push('\n');
        }
    }
    out.push('\n');
    for (setting, scale) in scales {
        out.push_str(&format!("- {}\n", scale_verdict(args, setting, scale)));
    }
    out.push_str(&format!(
        "\n{}\n{}\n{}\n",
        outbox_method(args),
        outbox_header(),
        outbox_row(args, outbox),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run as a table row shows it: per claim and per record batch as tenths.
    fn run(
        concurrency: usize,
        processes: usize,
        figures: (u64, f64, f64),
        tenths: (u64, u64),
    ) -> ScaleRun {
        let (publish_rate, total, idle) = figures;
        let per = |tenths: u64| StoreWrites {
            writes: 10,
            rows: tenths,
        };
        ScaleRun {
            concurrency,
            processes,
            publishes: Outcome {
                completed: publish_rate,
                elapsed: Duration::from_secs(1),
                ..Outcome::new()
            },
            delivered: 20_000,
            missing: 0,
            duplicates: 0,
            bad_signatures: 0,
            deliveries_per_s: total,
            cores: vec![0.45; processes],
            idle,
            writes: EngineWrites {
                claims: per(tenths.0),
                records: per(tenths.1),
            },
        }
    }

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Cluster(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args)]);
        report::page::assert_shows(SECTION, &outbox_method(&args));
        report::page::assert_shows(SECTION, &docs_header());
        report::page::assert_shows(SECTION, &outbox_header());
    }

    #[test]
    fn a_row_shows_every_round_and_the_median_of_each_figure() {
        let rounds = [
            run(32, 1, (2_893, 2_894.0, 0.22), (0, 131)),
            run(32, 1, (2_986, 2_986.0, 0.21), (0, 133)),
            run(32, 1, (2_354, 2_354.0, 0.27), (0, 126)),
        ];
        let rounds: Vec<&ScaleRun> = rounds.iter().collect();
        assert_eq!(
            docs_row(&Setting::Defaults, &rounds),
            "| defaults | 32 | 1 | 2,894 | 2,894 / 2,986 / 2,354 | 2,893/s | 0.45 cores | 22 % \
             | 0.0 | 13.1 | 0 / 0 / 0 / 0 |"
        );
    }

    #[test]
    fn rows_go_by_publishes_in_flight_then_processes() {
        let scale: Vec<ScaleRun> = [(32, 1), (32, 2), (32, 1), (32, 2), (512, 1), (512, 2)]
            .into_iter()
            .map(|(c, p)| run(c, p, (1, 1.0, 0.5), (10, 10)))
            .collect();
        let order: Vec<(usize, usize, usize)> = groups(&scale)
            .iter()
            .map(|g| (g[0].concurrency, g[0].processes, g.len()))
            .collect();
        assert_eq!(order, [(32, 1, 2), (32, 2, 2), (512, 1, 1), (512, 2, 1)]);
    }
}
