//! `hookd-bench cluster`: several hookd processes on one PostgreSQL database, each held to the
//! same share of a core, and the transactional outbox's commit-to-receipt latency.
//!
//! - **scale-out**: for each `--concurrency` and for 1, 2, … `--max-processes` hookd processes
//!   (each API and engine) on a fresh database, each process held to `--cpu-share` of a core
//!   by a cgroup of its own (see [`crate::cgroup`]), this harness publishes `--messages`
//!   through their APIs in turn (a closed loop of that many publishes in flight) to one
//!   endpoint; a verifying receiver process (`hookd-bench receive`) stamps each message's
//!   first receipt. PostgreSQL and the harness are not held, so on one machine the processes
//!   behave as N small machines would, and N processes should deliver about N times one until
//!   the database is the limit. Deliveries/s runs from the first publish sent to the last
//!   receipt. Where the time goes is counted over the measured phase: each process's CPU
//!   (its cgroup's `cpuacct.usage`), PostgreSQL's (its processes' `/proc/PID/stat`: the
//!   backends connected to the run's database and the server's background processes) and
//!   the harness's (this process and the receiver's). CPU per delivered message is the robust
//!   figure on a shared machine: throughput moves with what else runs, the work per message
//!   does not.
//! - **outbox latency**: one hookd process, not held; a producer connection commits
//!   single-row transactions into `hookd.outbox` open loop at `--outbox-rate` for
//!   `--outbox-seconds`, stamping each commit's return; latency is the receipt stamp minus
//!   that (same machine, same clock). Rows carry an `eventId`, which maps each message back to
//!   its commit.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use sqlx::postgres::PgPoolOptions;

use crate::api::{Api, EngineWrites, SendLog, StoreWrites, unix_nanos};
use crate::cgroup::{self, CpuGroup};
use crate::deliver::drain;
use crate::hookd::{Backend, Database, Hookd, PostgresServer, Setting, Tuning, random_hex};
use crate::load::{self, Outcome, Requests};
use crate::machine::{self, Machine, PostgresCpu, process_cpu_time};
use crate::receiver::{Receipts, ReceiverProcess};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "cluster";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scale-out runs with 1, 2, … this many hookd processes.
    #[arg(long, default_value_t = 4)]
    max_processes: usize,
    /// The share of one core each hookd process may use (cgroup v1 `cpu` quota).
    #[arg(long, default_value_t = 0.1)]
    cpu_share: f64,
    /// The quota's period, in milliseconds: each process may use its share of every period.
    #[arg(long, default_value_t = cgroup::PERIOD.as_millis() as u64)]
    cpu_period_ms: u64,
    /// Scale-out: publishes in flight at all times, spread over the processes; one set of
    /// runs per value, the verdict judged at the largest.
    #[arg(long, value_delimiter = ',', default_values_t = [256])]
    concurrency: Vec<usize>,
    /// Scale-out: rounds of runs (1, 2, … processes each) per number in flight; the verdict
    /// compares each process count's median over the rounds, since single runs on a shared
    /// machine differ from one minute to the next.
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
            "target/release/hookd-bench cluster --max-processes {} --cpu-share {} \
             --cpu-period-ms {} --concurrency {} --rounds {} --messages {} --warmup {} {} \
             --outbox-rate {} --outbox-seconds {}{}",
            self.max_processes,
            self.cpu_share,
            self.cpu_period_ms,
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

    /// The quota's period.
    fn cpu_period(&self) -> Duration {
        Duration::from_millis(self.cpu_period_ms)
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
    /// Where the CPU went over the measured phase.
    cpu: CpuUse,
    /// The engines' claims and record batches over the measured phase, all processes.
    writes: EngineWrites,
}

/// CPU time used over a run's measured phase, and how long that phase lasted.
#[derive(Clone, Debug, Default)]
struct CpuUse {
    elapsed: Duration,
    /// Each hookd process's, from its cgroup.
    hookd: Vec<Duration>,
    /// How long each process's quota held it back.
    throttled: Vec<Duration>,
    /// PostgreSQL's: the run's backends and the server's background processes.
    postgres: Duration,
    /// The harness's: this process and the receiver.
    harness: Duration,
}

impl CpuUse {
    /// Cores kept busy: `cpu` over the phase.
    fn cores(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn hookd_total(&self) -> Duration {
        self.hookd.iter().sum()
    }

    /// The share of the phase the quota held the processes back, on average.
    fn throttled_share(&self) -> f64 {
        let each = self.throttled.iter().sum::<Duration>().as_secs_f64()
            / self.throttled.len().max(1) as f64;
        each / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl ScaleRun {
    /// CPU microseconds per delivered message.
    fn per_message(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * 1e6 / self.delivered.max(1) as f64
    }

    fn hookd_us(&self) -> f64 {
        self.per_message(self.cpu.hookd_total())
    }

    fn postgres_us(&self) -> f64 {
        self.per_message(self.cpu.postgres)
    }

    fn harness_us(&self) -> f64 {
        self.per_message(self.cpu.harness)
    }

    /// Deliveries that went through a claim, per delivered message (the rest were handed to
    /// their engine by the publish that wrote them).
    fn claimed_share(&self) -> f64 {
        self.writes.claims.rows as f64 / self.delivered.max(1) as f64
    }
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
    if !(args.cpu_share >= 0.01 && args.cpu_share <= 64.0) {
        bail!("--cpu-share must be between 0.01 and 64 (a share of one core)");
    }
    if !(1..=1_000).contains(&args.cpu_period_ms)
        || args.cpu_share * (args.cpu_period_ms as f64) < 1.0
    {
        bail!(
            "--cpu-period-ms must be between 1 and 1000, and --cpu-share of it at least 1 ms \
             (the kernel's smallest quota)"
        );
    }
    if args.outbox_rate <= 0.0 || args.outbox_seconds == 0 {
        bail!("--outbox-rate and --outbox-seconds must be positive");
    }
    crate::hookd::binary()?;
    // Fails early, with what is missing, where cgroups are not writable.
    drop(CpuGroup::create(
        &format!("hookd-bench-{}", random_hex()),
        args.cpu_share,
        args.cpu_period(),
    )?);
    let machine = Machine::announced();
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

/// A hookd process of the cluster in its CPU group. Fields drop in order: the process ends
/// before its group is removed.
struct Member {
    hookd: Hookd,
    group: CpuGroup,
}

/// Starts `count` hookd processes on `database`, one after the other (the first migrates),
/// each then held to `--cpu-share` of a core in a group of its own.
async fn start_processes(
    count: usize,
    setting: &Setting,
    database: &Database,
    args: &Args,
) -> anyhow::Result<Vec<Member>> {
    let mut members = Vec::new();
    let run = random_hex();
    for i in 0..count {
        let group = CpuGroup::create(
            &format!("hookd-bench-{run}-{i}"),
            args.cpu_share,
            args.cpu_period(),
        )?;
        let (url, options) = (database.url().to_owned(), args.hookd_options(setting));
        let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &options)).await??;
        group.add(hookd.pid())?;
        members.push(Member { hookd, group });
    }
    Ok(members)
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

/// CPU readings at one moment, to subtract.
struct CpuReading {
    at: Instant,
    hookd: Vec<Duration>,
    throttled: Vec<Duration>,
    postgres: HashMap<i32, Duration>,
    harness: Duration,
}

impl CpuReading {
    async fn take(
        members: &[Member],
        postgres: &mut PostgresCpu,
        receiver: &ReceiverProcess,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            at: Instant::now(),
            hookd: members
                .iter()
                .map(|m| m.group.usage())
                .collect::<anyhow::Result<_>>()?,
            throttled: members
                .iter()
                .map(|m| m.group.throttled())
                .collect::<anyhow::Result<_>>()?,
            postgres: postgres.read().await?,
            harness: process_cpu_time(std::process::id())? + process_cpu_time(receiver.pid())?,
        })
    }

    /// What was used between `before` and this reading.
    fn since(&self, before: &Self) -> CpuUse {
        let minus = |after: &[Duration], before: &[Duration]| {
            after
                .iter()
                .zip(before)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect()
        };
        CpuUse {
            elapsed: self.at - before.at,
            hookd: minus(&self.hookd, &before.hookd),
            throttled: minus(&self.throttled, &before.throttled),
            postgres: machine::used_since(&self.postgres, &before.postgres),
            harness: self.harness.saturating_sub(before.harness),
        }
    }
}

async fn scale_out(
    concurrency: usize,
    processes: usize,
    setting: &Setting,
    database: &Database,
    args: &Args,
) -> anyhow::Result<ScaleRun> {
    let members = start_processes(processes, setting, database, args).await?;
    let apis = members
        .iter()
        .map(|m| Api::new(&m.hookd, concurrency))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (app, receiver) = receiver_for(&apis[0], "cluster").await?;
    let warmup = load::run(concurrency, 0..args.warmup, round_robin(&apis, &app, None)?).await;
    drain(&receiver, args.warmup - warmup.error_count()).await?;

    let mut postgres = PostgresCpu::connect(database.url()).await?;
    let log: SendLog = Arc::new(Mutex::new(Vec::new()));
    let writes_before = engine_writes(&apis).await?;
    let cpu_before = CpuReading::take(&members, &mut postgres, &receiver).await?;
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
    let cpu = CpuReading::take(&members, &mut postgres, &receiver)
        .await?
        .since(&cpu_before);
    postgres.close().await;
    let writes = engine_writes(&apis).await? - writes_before;
    let receipts = receiver.results().await?;
    drop(members);
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
        cpu,
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
    let (url, options) = (
        database.url().to_owned(),
        args.hookd_options(&Setting::Defaults),
    );
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &options)).await??;
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

/// A count of the four kinds of failure a run can show, as a cell.
fn failures(missing: u64, duplicates: u64, bad_signatures: u64, errors: u64) -> String {
    [
        report::flagged(missing),
        report::thousands(duplicates),
        report::flagged(bad_signatures),
        report::flagged(errors),
    ]
    .join(" / ")
}

/// Microseconds as a cell.
fn micros(us: f64) -> String {
    format!("{us:.0} µs")
}

/// Cores as a cell.
fn cores(n: f64) -> String {
    format!("{n:.2}")
}

/// The console's table of single runs.
fn scale_header() -> String {
    report::header(&[
        "in flight",
        "processes",
        "hookd CPU per message",
        "PostgreSQL CPU per message",
        "harness CPU per message",
        "deliveries/s",
        "publish rate",
        "hookd cores, each process",
        "held back by its quota",
        "PostgreSQL cores",
        "harness cores",
        "claimed",
        "deliveries per claim",
        "per record batch",
        "missing / duplicates / bad signatures / publish errors",
    ])
}

fn scale_row(run: &ScaleRun) -> String {
    let each: Vec<String> = run
        .cpu
        .hookd
        .iter()
        .map(|&c| cores(run.cpu.cores(c)))
        .collect();
    report::row(&[
        run.concurrency.to_string(),
        run.processes.to_string(),
        micros(run.hookd_us()),
        micros(run.postgres_us()),
        micros(run.harness_us()),
        report::thousands(run.deliveries_per_s.round() as u64),
        format!(
            "{}/s",
            report::thousands(run.publishes.throughput().round() as u64)
        ),
        each.join(" + "),
        report::percent(run.cpu.throttled_share()),
        cores(run.cpu.cores(run.cpu.postgres)),
        cores(run.cpu.cores(run.cpu.harness)),
        report::percent(run.claimed_share()),
        run.writes.claims.rows_per_write(),
        run.writes.records.rows_per_write(),
        failures(
            run.missing,
            run.duplicates,
            run.bad_signatures,
            run.publishes.error_count(),
        ),
    ])
}

/// The docs table: a row per setting, publishes in flight and process count.
fn docs_header() -> String {
    report::header(&[
        "hookd",
        "in flight",
        "processes",
        "hookd CPU per message",
        "PostgreSQL CPU per message",
        "harness CPU per message",
        "deliveries/s, median",
        "times one process",
        "each round",
        "hookd cores, each process",
        "held back by its quota",
        "PostgreSQL cores",
        "harness cores",
        "claimed",
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
/// `one`: one process's median total at the same number in flight.
fn docs_row(setting: &Setting, rounds: &[&ScaleRun], one: Option<f64>) -> String {
    let median = |value: &dyn Fn(&ScaleRun) -> Option<f64>| {
        report::median(rounds.iter().filter_map(|r| value(r)).collect()).unwrap_or(0.0)
    };
    let per_write = |writes: fn(&ScaleRun) -> StoreWrites| {
        let m = report::median(
            rounds
                .iter()
                .filter_map(|r| {
                    let w = writes(r);
                    (w.writes > 0).then(|| w.rows as f64 / w.writes as f64)
                })
                .collect(),
        );
        m.map_or_else(|| "-".to_owned(), |m| format!("{m:.1}"))
    };
    let each: Vec<String> = rounds
        .iter()
        .map(|r| report::thousands(r.deliveries_per_s.round() as u64))
        .collect();
    let processes = rounds[0].processes;
    let per_process: Vec<String> = (0..processes)
        .map(|i| cores(median(&|r| Some(r.cpu.cores(*r.cpu.hookd.get(i)?)))))
        .collect();
    let total = median(&|r| Some(r.deliveries_per_s));
    let sum = |count: fn(&ScaleRun) -> u64| rounds.iter().map(|r| count(r)).sum::<u64>();
    report::row(&[
        setting.name().to_owned(),
        rounds[0].concurrency.to_string(),
        processes.to_string(),
        micros(median(&|r| Some(r.hookd_us()))),
        micros(median(&|r| Some(r.postgres_us()))),
        micros(median(&|r| Some(r.harness_us()))),
        report::thousands(total.round() as u64),
        one.map_or_else(
            || "-".to_owned(),
            |one| format!("{:.2}", total / one.max(1e-9)),
        ),
        each.join(" / "),
        per_process.join(" + "),
        report::percent(median(&|r| Some(r.cpu.throttled_share()))),
        cores(median(&|r| Some(r.cpu.cores(r.cpu.postgres)))),
        cores(median(&|r| Some(r.cpu.cores(r.cpu.harness)))),
        report::percent(median(&|r| Some(r.claimed_share()))),
        per_write(|r| r.writes.claims),
        per_write(|r| r.writes.records),
        failures(
            sum(|r| r.missing),
            sum(|r| r.duplicates),
            sum(|r| r.bad_signatures),
            sum(|r| r.publishes.error_count()),
        ),
    ])
}

/// The scale-out target: three processes, each held to the same share of a core, deliver at
/// least this many times what one does.
const TARGET_AT_THREE: f64 = 2.5;

/// The median of `value` over the runs with `processes` processes at `concurrency` in flight.
fn median_of(
    scale: &[ScaleRun],
    concurrency: usize,
    processes: usize,
    value: impl Fn(&ScaleRun) -> f64,
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

/// Each process count's median total as a multiple of one process's at `concurrency`.
fn ratios_at(args: &Args, scale: &[ScaleRun], concurrency: usize) -> Vec<(usize, f64)> {
    let Some(one) = median_total(scale, concurrency, 1) else {
        return Vec::new();
    };
    (2..=args.max_processes)
        .filter_map(|p| Some((p, median_total(scale, concurrency, p)? / one.max(1e-9))))
        .collect()
}

/// How a figure's median moved from one process to the most, at `concurrency`, as text.
fn moved(
    args: &Args,
    scale: &[ScaleRun],
    concurrency: usize,
    value: fn(&ScaleRun) -> f64,
    cell: fn(f64) -> String,
) -> String {
    let at = |p| median_of(scale, concurrency, p, value).map_or_else(|| "?".to_owned(), cell);
    format!("{} → {}", at(1), at(args.max_processes))
}

/// The verdict, judged at the most in flight, where the processes have the most work to
/// share: three processes held to the same share against one; what moved the work per
/// message is shown beside it.
fn scale_verdict(args: &Args, setting: &Setting, scale: &[ScaleRun]) -> String {
    let judged = args.concurrency.iter().copied().max().unwrap_or(0);
    let ratios = ratios_at(args, scale, judged);
    let listed: Vec<String> = ratios
        .iter()
        .map(|(p, ratio)| format!("{p} processes {ratio:.2}×"))
        .collect();
    let three = ratios.iter().find(|(p, _)| *p == 3).map(|(_, r)| *r);
    let outcome = match three {
        Some(ratio) if ratio >= TARGET_AT_THREE => "met",
        Some(_) => "not met",
        None => "not judged (fewer than 3 processes)",
    };
    let most = args.max_processes;
    let measure = match args.rounds {
        1 => "one round".to_owned(),
        n => format!("the median of {n} rounds"),
    };
    format!(
        "**{}**: scale-out target (at {judged} in flight, three processes, each held to {} of \
         a core, deliver at least {TARGET_AT_THREE} times one, {measure}): \
         **{outcome}** ({}). From 1 to {most} processes: hookd's CPU per message {}, \
         PostgreSQL's {}, PostgreSQL's cores {}.",
        setting.name(),
        args.cpu_share,
        if listed.is_empty() {
            "one process only".to_owned()
        } else {
            listed.join(", ")
        },
        moved(args, scale, judged, ScaleRun::hookd_us, micros),
        moved(args, scale, judged, ScaleRun::postgres_us, micros),
        moved(args, scale, judged, |r| r.cpu.cores(r.cpu.postgres), cores),
    )
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
         PostgreSQL database, each held to {} of a core by a cgroup of its own (cgroup v1 \
         `cpu.cfs_quota_us` over a {} ms period), as if each ran on a small machine of its \
         own; PostgreSQL and the harness are not held. All have `--max-connections` room for \
         every publishing connection; the harness publishes {} messages ({} in flight, after \
         {} warm-up messages) through their APIs in turn to one endpoint, whose ceiling \
         (`--endpoint-max-concurrency`) holds across the cluster; deliveries/s from the first \
         publish sent to the last receipt. {} CPU per delivered message is the figure to \
         read first: the machine is shared, so throughput moves with whatever else runs, \
         while the work per message does not. hookd's is every process's (its cgroup's \
         `cpuacct.usage`); PostgreSQL's is its processes' (`/proc/PID/stat`: the backends \
         connected to the run's database and the server's background processes); the \
         harness's is the load generator's and the receiver's. Cores are CPU time over the \
         measured phase; held back is the share of the phase each process waited for its \
         quota (on average over the processes); claimed is the share of deliveries that went through a \
         claim rather than straight from their publish to its own process's engine; \
         deliveries per claim and per record batch are all engines' (from their \
         `/metrics`).\n",
        args.max_processes,
        args.cpu_share,
        args.cpu_period_ms,
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
            let one = median_total(scale, rounds[0].concurrency, 1);
            out.push_str(&docs_row(setting, &rounds, one));
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

    /// A run of 20,000 deliveries over 10 s: `cpu_ms` of hookd (each process), PostgreSQL and
    /// the harness; claims and record batches of 10 writes with `tenths` rows.
    fn run(
        concurrency: usize,
        processes: usize,
        total: f64,
        cpu_ms: (u64, u64, u64),
        tenths: (u64, u64),
    ) -> ScaleRun {
        let per = |tenths: u64| StoreWrites {
            writes: 10,
            rows: tenths,
        };
        let ms = Duration::from_millis;
        ScaleRun {
            concurrency,
            processes,
            publishes: Outcome {
                completed: total as u64,
                elapsed: Duration::from_secs(1),
                ..Outcome::new()
            },
            delivered: 20_000,
            missing: 0,
            duplicates: 0,
            bad_signatures: 0,
            deliveries_per_s: total,
            cpu: CpuUse {
                elapsed: Duration::from_secs(10),
                hookd: vec![ms(cpu_ms.0); processes],
                throttled: vec![ms(2_000); processes],
                postgres: ms(cpu_ms.1),
                harness: ms(cpu_ms.2),
            },
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
    fn a_row_leads_with_cpu_per_message_and_shows_every_round() {
        let rounds = [
            run(256, 2, 2_000.0, (1_000, 3_000, 500), (0, 131)),
            run(256, 2, 2_200.0, (1_100, 3_400, 600), (20, 133)),
            run(256, 2, 1_800.0, (900, 2_800, 400), (10, 126)),
        ];
        let rounds: Vec<&ScaleRun> = rounds.iter().collect();
        assert_eq!(
            docs_row(&Setting::Defaults, &rounds, Some(1_000.0)),
            "| defaults | 256 | 2 | 100 µs | 150 µs | 25 µs | 2,000 | 2.00 | 2,000 / 2,200 / 1,800 \
             | 0.10 + 0.10 | 20 % | 0.30 | 0.05 | 0 % | 1.0 | 13.1 | 0 / 0 / 0 / 0 |"
        );
    }

    #[test]
    fn rows_go_by_publishes_in_flight_then_processes() {
        let scale: Vec<ScaleRun> = [(32, 1), (32, 2), (32, 1), (32, 2), (512, 1), (512, 2)]
            .into_iter()
            .map(|(c, p)| run(c, p, 1.0, (1, 1, 1), (10, 10)))
            .collect();
        let order: Vec<(usize, usize, usize)> = groups(&scale)
            .iter()
            .map(|g| (g[0].concurrency, g[0].processes, g.len()))
            .collect();
        assert_eq!(order, [(32, 1, 2), (32, 2, 2), (512, 1, 1), (512, 2, 1)]);
    }
}
