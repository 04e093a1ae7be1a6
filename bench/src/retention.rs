//! `hookd-bench retention`: what the retention purge costs publishers while it works through a
//! backlog, and that the database stops holding what it no longer needs.
//!
//! hookd runs at its defaults on a clock the harness can move (`HOOKD_TEST_CLOCK_OFFSET_FILE`).
//! `--backlog` messages are published and delivered to a receiver. Publishes then go at
//! `--rate` (open loop) for `--seconds`: the latency without a purge. The clock then jumps 100
//! days, so the whole backlog is past `--retention` (30 days) and `--keep-records` (90 days);
//! once the purger's next pass starts (it looks every minute), the same publishing load runs
//! again while the purger deletes the backlog's content and records: the latency beside the
//! purge. `/metrics` gives the rows deleted and the database's size.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::api::Api;
use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer};
use crate::load::{self, Outcome};
use crate::machine::{self, Machine};
use crate::receiver::{self, Receiver};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "retention";

/// How far the clock jumps: past the default `--retention` (30 days) and `--keep-records` (90).
const JUMP_MS: u64 = 100 * 86_400_000;

/// The longest wait for the purger's next pass (it looks every `--retention-interval`, 1 min).
const PASS_PATIENCE: Duration = Duration::from_secs(90);

/// The longest wait for the backlog to be delivered, or deleted.
const DRAIN_PATIENCE: Duration = Duration::from_secs(600);

const MESSAGES_DELETED: &str = r#"hookd_retention_rows_deleted_total{table="messages"}"#;
const PAYLOADS_PURGED: &str = "hookd_retention_payloads_purged_total";
const DATABASE_BYTES: &str = "hookd_database_size_bytes";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Messages published (and delivered) first: what the purge then deletes.
    #[arg(long, default_value_t = 50_000)]
    backlog: u64,
    /// Publishes per second in both measured phases (open loop).
    #[arg(long, default_value_t = 1_000.0)]
    rate: f64,
    /// Seconds of publishing without a purge; with it, publishing goes on in rounds of as
    /// many seconds until the purge is over.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench retention --backend {} --backlog {} --rate {} \
             --seconds {}{}",
            self.backend.flag(),
            self.backlog,
            self.rate,
            self.seconds,
            self.output.flags()
        )
    }

    fn per_phase(&self) -> u64 {
        (self.rate * self.seconds as f64) as u64
    }
}

struct Run {
    backend: Backend,
    quiet: Outcome,
    purging: Outcome,
    /// Records (of messages published before the jump) deleted while the second phase ran.
    deleted_during: u64,
    /// From the purge's first batch until the last of those records went (to the end of the
    /// phase it went in), if it did within the patience.
    purge_took: Option<Duration>,
    bytes_before: f64,
    bytes_after: f64,
}

impl Run {
    fn p99_ratio(&self) -> f64 {
        self.purging.latency(0.99).as_secs_f64() / self.quiet.latency(0.99).as_secs_f64()
    }

    fn flagged(&self) -> bool {
        self.quiet.error_count() + self.purging.error_count() > 0
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.backlog == 0 || args.seconds == 0 || args.rate <= 0.0 {
        bail!("--backlog, --seconds and --rate must be above 0");
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
        eprintln!("FLAGGED: some publishes failed");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(backend: Backend, database: &Database, args: &Args) -> anyhow::Result<Run> {
    let clock = std::env::temp_dir().join(format!(
        "hookd-bench-clock-{}-{}",
        std::process::id(),
        backend.name()
    ));
    std::fs::write(&clock, "0")?;
    let run = measure_on(backend, database, args, &clock).await;
    let _ = std::fs::remove_file(&clock);
    run
}

async fn measure_on(
    backend: Backend,
    database: &Database,
    args: &Args,
    clock: &std::path::Path,
) -> anyhow::Result<Run> {
    let receiver = Receiver::start(receiver::Options::default()).await?;
    let (url, offset) = (database.url().to_owned(), clock.to_owned());
    let hookd =
        tokio::task::spawn_blocking(move || Hookd::start_shifted(&url, &[], &offset)).await??;
    let api = Api::new(&hookd, 64)?;
    let app = api.create_app("retention").await?;
    api.create_endpoint(&app, &receiver.url("retention"))
        .await?;
    let publish = api.publisher(&app, None)?;
    let built = load::run(32, 0..args.backlog, publish.clone()).await;
    if built.error_count() > 0 {
        bail!("{} backlog publishes failed", built.error_count());
    }
    wait_for(DRAIN_PATIENCE, "the backlog to be delivered", || async {
        Ok(receiver.received() >= args.backlog)
    })
    .await?;

    let phase = args.per_phase();
    let numbers = |k: u64| args.backlog + k * phase..args.backlog + (k + 1) * phase;
    let quiet = load::run_paced(args.rate, 128, numbers(0), publish.clone()).await;
    tokio::time::sleep(Duration::from_secs(11)).await;
    let bytes_before = api.metric(DATABASE_BYTES).await?;

    std::fs::write(clock, JUMP_MS.to_string())?;
    wait_for(PASS_PATIENCE, "the purger's next pass", || async {
        Ok(api.metric(PAYLOADS_PURGED).await? > 0.0)
    })
    .await?;
    // Everything published before the jump is past its time: the backlog and the first phase.
    // The load goes on, a phase at a time, until the purger has deleted all of it.
    let old = args.backlog + phase;
    let started = Instant::now();
    let mut purging = Outcome::new();
    let mut k = 1;
    let purge_took = loop {
        purging.merge(load::run_paced(args.rate, 128, numbers(k), publish.clone()).await);
        k += 1;
        if api.metric(MESSAGES_DELETED).await? as u64 >= old {
            break Some(started.elapsed());
        }
        if started.elapsed() > DRAIN_PATIENCE {
            break None;
        }
    };
    let deleted_during = api.metric(MESSAGES_DELETED).await? as u64;
    tokio::time::sleep(Duration::from_secs(11)).await;
    Ok(Run {
        backend,
        quiet,
        purging,
        deleted_during,
        purge_took,
        bytes_before,
        bytes_after: api.metric(DATABASE_BYTES).await?,
    })
}

/// Polls `check` every 100 ms until it holds, or fails after `patience`.
async fn wait_for<F: Future<Output = anyhow::Result<bool>>>(
    patience: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + patience;
    while !check().await? {
        if Instant::now() > deadline {
            bail!("gave up waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

fn header() -> String {
    report::header(&[
        "backend",
        "publish p50 / p99, no purge",
        "publish p50 / p99, purging",
        "p99 ratio",
        "records deleted while publishing",
        "all deleted in",
        "database size before / after",
    ])
}

fn row(run: &Run) -> String {
    let latency = |o: &Outcome| {
        format!(
            "{} / {}",
            report::millis(o.latency(0.5)),
            report::millis(o.latency(0.99))
        )
    };
    let mib = |bytes: f64| format!("{:.0} MiB", bytes / 1_048_576.0);
    report::row(&[
        run.backend.name().to_owned(),
        latency(&run.quiet),
        latency(&run.purging),
        format!("{:.2}", run.p99_ratio()),
        report::thousands(run.deleted_during),
        run.purge_took.map_or_else(
            || format!("not all within {} s", DRAIN_PATIENCE.as_secs()),
            |took| format!("{:.1} s", took.as_secs_f64()),
        ),
        format!("{} / {}", mib(run.bytes_before), mib(run.bytes_after)),
    ])
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "## Retention under load\n\n\
         What the retention purge costs publishers. hookd runs on a clock the harness moves. {} \
         messages are published and delivered; then publishes go at {}/s (open loop, one \
         endpoint) for {} s without a purge; then the clock jumps 100 days (past `--retention` \
         30d and `--keep-records` 90d) and, once the purger's next pass has started, the same \
         load runs again, {} s at a time, until the purger has dropped the content and then \
         the records of everything published before the jump (the backlog and the first \
         phase). Rows and sizes come from `/metrics`; the database's size is the SQLite file \
         (freed pages are reused, the file does not shrink) or hookd's PostgreSQL tables \
         (deleted rows' space is reused only once vacuumed, and autovacuum is off here; the \
         second phase also adds its own messages).\n",
        report::thousands(args.backlog),
        args.rate,
        args.seconds,
        args.seconds,
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
        let crate::Command::Retention(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
