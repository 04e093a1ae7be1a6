//! `hookd-bench sources`: outbox sources, i.e. `hookd_outbox` tables in an application's own
//! PostgreSQL, MySQL/MariaDB or SQLite database, relayed by a hookd process that runs on its
//! own (default, SQLite) database.
//!
//! Sources have no tuning flags (256 rows a pass; PostgreSQL is woken by its trigger's NOTIFY,
//! MySQL and SQLite are looked at every 50 ms), so everything runs at hookd's defaults. For
//! each kind of producer database, on a fresh hookd database and a fresh producer database
//! (its table made by `hookd outbox install`, rows written with the `hookd-outbox` crate as an
//! application writes them):
//!
//! - **commit-to-receipt**: single-row transactions committed open loop at `--rate` for
//!   `--seconds`, each commit's return stamped; latency is the verifying receiver's first
//!   receipt minus that (same machine, same clock), rows mapped to messages by their
//!   `eventId`, as in [`crate::cluster`]'s outbox run.
//! - **relay rate**: `--backlog` rows committed while hookd is stopped, to an application
//!   without endpoints (so the figure is the relay's, not delivery's); then rows per second
//!   from starting hookd until its relayed-rows counter has them all.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hookd_outbox::Event;
use sqlx::{AssertSqlSafe, Connection, MySqlConnection, MySqlPool, PgPool};

use crate::api::Api;
use crate::cluster::{OutboxRun, commit_paced, receiver_for};
use crate::deliver::drain;
use crate::hookd::{Backend, Database, Hookd, PostgresServer, random_hex};
use crate::machine::{self, Machine};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "sources";

/// The source's name on hookd's command line (`--outbox-source bench=URL`) and in its metrics.
const SOURCE: &str = "bench";

/// The MySQL/MariaDB server used when none is given: the one the test suite uses.
const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// Rows per producer transaction while the backlog is written.
const BACKLOG_BATCH: u64 = 1_000;

/// How long the relay may make no progress before the backlog run gives up waiting.
const RELAY_PATIENCE: Duration = Duration::from_secs(30);

/// A kind of producer database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Postgres,
    Mysql,
    Sqlite,
}

impl Kind {
    fn flag(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
            Self::Sqlite => "sqlite",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The kinds of producer database measured, in turn.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "postgres,mysql,sqlite"
    )]
    kinds: Vec<Kind>,
    /// Commit-to-receipt: single-row transactions committed per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Commit-to-receipt: seconds of committing.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Relay rate: rows committed before hookd starts (enough for seconds of relaying, so
    /// hookd's start is a small part of the time).
    #[arg(long, default_value_t = 100_000)]
    backlog: u64,
    #[command(flatten)]
    postgres: PostgresServer,
    /// MySQL/MariaDB server on which a database `hookd_bench_<random>` is created and dropped.
    #[arg(
        long = "mysql-url",
        env = "HOOKD_TEST_MYSQL_URL",
        default_value = DEFAULT_MYSQL_URL,
        hide_env_values = true
    )]
    mysql_url: String,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    /// The command that reproduces these results, every parameter spelled out.
    fn command(&self) -> String {
        let kinds: Vec<&str> = self.kinds.iter().map(|k| k.flag()).collect();
        format!(
            "target/release/hookd-bench sources --kinds {} --rate {} --seconds {} --backlog {}{}",
            kinds.join(","),
            self.rate,
            self.seconds,
            self.backlog,
            self.output.flags(),
        )
    }
}

/// Both measurements of one kind of source.
struct Run {
    /// The producer's database server and its version.
    server: String,
    latency: OutboxRun,
    backlog: Backlog,
}

impl Run {
    fn flagged(&self) -> bool {
        self.latency.missing() + self.backlog.not_relayed() + self.backlog.left > 0
    }
}

/// The relay-rate run.
struct Backlog {
    rows: u64,
    /// Messages hookd holds afterwards.
    messages: u64,
    /// Rows still in the producer's table afterwards (refused rows keep their error there).
    left: u64,
    /// From starting hookd until it had relayed every row.
    elapsed: Duration,
}

impl Backlog {
    fn not_relayed(&self) -> u64 {
        self.rows.saturating_sub(self.messages)
    }

    fn rows_per_s(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.kinds.is_empty() || args.rate <= 0.0 || args.seconds == 0 || args.backlog == 0 {
        bail!(
            "--kinds must name one kind at least, and --rate, --seconds and --backlog be positive"
        );
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    println!("{}", header());
    let mut runs = Vec::new();
    for &kind in &args.kinds {
        let run = measure(kind, &args).await?;
        println!("{}", row(&run));
        runs.push(run);
    }
    args.output
        .write(SECTION, &section(&args, &machine, &runs))?;
    if runs.iter().any(Run::flagged) {
        eprintln!("FLAGGED: commits that never arrived, or backlog rows not relayed");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Both measurements of `kind`, each on fresh databases.
async fn measure(kind: Kind, args: &Args) -> anyhow::Result<Run> {
    machine::settle(args.output.quiet_below).await?;
    let (server, latency) = on_fresh(kind, args, async |hookd_db, producer| {
        let server = producer.writer.server().await?;
        Ok((server, commit_to_receipt(hookd_db, producer, args).await?))
    })
    .await?;
    machine::settle(args.output.quiet_below).await?;
    let backlog = on_fresh(kind, args, async |hookd_db, producer| {
        relay_backlog(hookd_db, producer, args).await
    })
    .await?;
    Ok(Run {
        server,
        latency,
        backlog,
    })
}

/// Runs `measure` on a fresh hookd database (SQLite, hookd's default) and a fresh producer
/// database of `kind`, both removed afterwards whatever came of it.
async fn on_fresh<T>(
    kind: Kind,
    args: &Args,
    measure: impl AsyncFnOnce(&Database, &Producer) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    Database::with_fresh(Backend::Sqlite, "", async move |hookd_db| {
        let home = Home::create(kind, args).await?;
        let result = async {
            let producer = Producer::install(kind, home.url()).await?;
            let result = measure(hookd_db, &producer).await;
            producer.writer.close().await;
            result
        }
        .await;
        home.remove().await;
        result
    })
    .await
}

async fn commit_to_receipt(
    hookd_db: &Database,
    producer: &Producer,
    args: &Args,
) -> anyhow::Result<OutboxRun> {
    let hookd = serve(hookd_db, producer).await?;
    let api = Api::new(&hookd, 4)?;
    let (app, receiver) = receiver_for(&api, "sources").await?;
    let writer = producer.writer.clone();
    let commit = move |i, event_id| {
        let (writer, event) = (writer.clone(), event(&app, i, event_id));
        async move { writer.commit(vec![event]).await }
    };
    let committed = commit_paced(args.rate, args.seconds, commit).await;
    drain(&receiver, committed.len() as u64).await?;
    let receipts = receiver.results().await?;
    hookd.stop();
    let messages = messages_of(hookd_db).await?;
    Ok(OutboxRun::tally(&committed, messages, &receipts))
}

async fn relay_backlog(
    hookd_db: &Database,
    producer: &Producer,
    args: &Args,
) -> anyhow::Result<Backlog> {
    let hookd = serve(hookd_db, producer).await?;
    let app = Api::new(&hookd, 1)?.create_app("bench").await?;
    hookd.stop();
    for start in (0..args.backlog).step_by(BACKLOG_BATCH as usize) {
        let end = (start + BACKLOG_BATCH).min(args.backlog);
        let events = (start..end)
            .map(|i| event(&app, i, format!("bench-{i}")))
            .collect();
        producer
            .writer
            .commit(events)
            .await
            .map_err(|e| anyhow::anyhow!("cannot write the backlog: {e}"))?;
    }
    let started = Instant::now();
    let hookd = serve(hookd_db, producer).await?;
    until_relayed(&Api::new(&hookd, 1)?, args.backlog).await?;
    let elapsed = started.elapsed();
    hookd.stop();
    Ok(Backlog {
        rows: args.backlog,
        messages: messages_of(hookd_db).await?.len() as u64,
        left: producer.writer.rows().await?,
        elapsed,
    })
}

/// Waits until hookd has relayed `rows` rows of the source (its
/// `hookd_outbox_source_relayed_total`), or until it has relayed none for [`RELAY_PATIENCE`]
/// (then the rows not relayed show in the tally).
async fn until_relayed(api: &Api, rows: u64) -> anyhow::Result<()> {
    let series = format!(r#"hookd_outbox_source_relayed_total{{source="{SOURCE}"}}"#);
    let (mut last, mut progressed) = (0, Instant::now());
    loop {
        let relayed = api.metric(&series).await? as u64;
        if relayed >= rows {
            return Ok(());
        }
        if relayed > last {
            (last, progressed) = (relayed, Instant::now());
        } else if progressed.elapsed() > RELAY_PATIENCE {
            eprintln!("warning: {relayed} of {rows} rows relayed; giving up waiting");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Row `i` of the source: a `bench.outbox` event for `app` with the payload `{"n": i}`.
fn event(app: &str, i: u64, event_id: String) -> Event {
    Event::from_json_text(app, "bench.outbox", format!(r#"{{"n": {i}}}"#))
        .event_id(event_id)
        .to_source()
}

/// Starts hookd on `hookd_db` relaying `producer`'s table, and nothing else added.
async fn serve(hookd_db: &Database, producer: &Producer) -> anyhow::Result<Hookd> {
    let url = hookd_db.url().to_owned();
    let options = vec![
        "--outbox-source".to_owned(),
        format!("{SOURCE}={}", producer.url),
    ];
    tokio::task::spawn_blocking(move || Hookd::start(&url, &options)).await?
}

/// Every message in hookd's SQLite database (stop hookd first): its id and `eventId`.
async fn messages_of(hookd_db: &Database) -> anyhow::Result<Vec<(String, Option<String>)>> {
    let path = sqlite_path(hookd_db.url())?;
    tokio::task::spawn_blocking(move || {
        let conn = rusqlite::Connection::open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut select = conn.prepare("SELECT id, event_id FROM messages")?;
        let messages = select
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(messages)
    })
    .await?
}

/// The file an `sqlite://PATH` URL names.
fn sqlite_path(url: &str) -> anyhow::Result<PathBuf> {
    url.strip_prefix("sqlite://")
        .map(PathBuf::from)
        .with_context(|| format!("{url} is not an sqlite:// URL"))
}

/// Where a producer's database lives for one run: a PostgreSQL database or an SQLite file's
/// folder made as hookd's own are, or a MySQL/MariaDB database `hookd_bench_<random>`.
enum Home {
    Bench {
        database: Database,
        url: String,
    },
    MySql {
        server: String,
        name: String,
        url: String,
    },
}

impl Home {
    async fn create(kind: Kind, args: &Args) -> anyhow::Result<Self> {
        match kind {
            Kind::Postgres => {
                let database = Database::create(Backend::Postgres, &args.postgres.url).await?;
                let url = database.url().to_owned();
                Ok(Self::Bench { database, url })
            }
            Kind::Sqlite => {
                let database = Database::create(Backend::Sqlite, "").await?;
                let file = sqlite_path(database.url())?.with_file_name("app.db");
                let url = format!("sqlite://{}", file.display());
                Ok(Self::Bench { database, url })
            }
            Kind::Mysql => {
                let name = format!("hookd_bench_{}", random_hex());
                mysql_admin(&args.mysql_url, &format!("CREATE DATABASE `{name}`")).await?;
                Ok(Self::MySql {
                    url: hookd_store::testing::with_database(&args.mysql_url, &name),
                    server: args.mysql_url.clone(),
                    name,
                })
            }
        }
    }

    /// The URL `--outbox-source` and the producer take.
    fn url(&self) -> &str {
        match self {
            Self::Bench { url, .. } | Self::MySql { url, .. } => url,
        }
    }

    /// Deletes the database (stop hookd and close the producer's connections first). Failures
    /// are reported, not returned: this runs on error paths too.
    async fn remove(self) {
        match self {
            Self::Bench { database, .. } => database.remove().await,
            Self::MySql { server, name, .. } => {
                let drop = format!("DROP DATABASE IF EXISTS `{name}`");
                if let Err(error) = mysql_admin(&server, &drop).await {
                    eprintln!("warning: cannot drop the database {name}: {error:#}");
                }
            }
        }
    }
}

/// Runs one statement on the MySQL/MariaDB server `server_url` names.
async fn mysql_admin(server_url: &str, sql: &str) -> anyhow::Result<()> {
    let mut admin = MySqlConnection::connect(server_url)
        .await
        .with_context(|| format!("cannot connect to MySQL/MariaDB at {server_url}"))?;
    sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .execute(&mut admin)
        .await
        .with_context(|| format!("`{sql}` failed"))?;
    let _ = admin.close().await;
    Ok(())
}

/// A producer: the outbox table in its database, and its connections.
struct Producer {
    url: String,
    writer: Writer,
}

impl Producer {
    /// Makes the table with `hookd outbox install --source URL`, as an operator would, and
    /// connects.
    async fn install(kind: Kind, url: &str) -> anyhow::Result<Self> {
        let installed = tokio::process::Command::new(crate::hookd::binary()?)
            .args(["outbox", "install", "--source", url])
            .output()
            .await
            .context("cannot run hookd outbox install")?;
        if !installed.status.success() {
            bail!(
                "hookd outbox install failed ({}): {}",
                installed.status,
                String::from_utf8_lossy(&installed.stderr)
            );
        }
        Ok(Self {
            url: url.to_owned(),
            writer: Writer::connect(kind, url).await?,
        })
    }
}

/// The application's side of a producer database: up to 16 connections (one for SQLite, which
/// has one writer at a time anyway).
#[derive(Clone)]
enum Writer {
    Postgres(PgPool),
    MySql(MySqlPool),
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
}

impl Writer {
    async fn connect(kind: Kind, url: &str) -> anyhow::Result<Self> {
        let context = || format!("cannot connect the producer to {url}");
        Ok(match kind {
            Kind::Postgres => Self::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(16)
                    .connect(url)
                    .await
                    .with_context(context)?,
            ),
            Kind::Mysql => Self::MySql(
                sqlx::mysql::MySqlPoolOptions::new()
                    .max_connections(16)
                    .connect(url)
                    .await
                    .with_context(context)?,
            ),
            Kind::Sqlite => {
                let conn = rusqlite::Connection::open(sqlite_path(url)?).with_context(context)?;
                // hookd's relay writes to the file too (it deletes relayed rows).
                conn.busy_timeout(Duration::from_secs(5))?;
                Self::Sqlite(Arc::new(Mutex::new(conn)))
            }
        })
    }

    /// Inserts `events` in one transaction and commits it.
    async fn commit(&self, events: Vec<Event>) -> Result<(), String> {
        let failed = |e: &dyn std::fmt::Display| e.to_string();
        match self {
            Self::Postgres(pool) => {
                let mut tx = pool.begin().await.map_err(|e| failed(&e))?;
                for event in &events {
                    event.insert(&mut *tx).await.map_err(|e| failed(&e))?;
                }
                tx.commit().await.map_err(|e| failed(&e))
            }
            Self::MySql(pool) => {
                let mut tx = pool.begin().await.map_err(|e| failed(&e))?;
                for event in &events {
                    event.insert_mysql(&mut *tx).await.map_err(|e| failed(&e))?;
                }
                tx.commit().await.map_err(|e| failed(&e))
            }
            Self::Sqlite(conn) => {
                let conn = conn.clone();
                let committed = tokio::task::spawn_blocking(move || {
                    let mut conn = conn.lock().expect("the producer's connection");
                    let tx = conn.transaction()?;
                    for event in &events {
                        event.insert_sqlite(&tx)?;
                    }
                    tx.commit()
                });
                committed
                    .await
                    .map_err(|e| failed(&e))?
                    .map_err(|e| failed(&e))
            }
        }
    }

    /// The database server and its version, as the report names the source.
    async fn server(&self) -> anyhow::Result<String> {
        Ok(match self {
            Self::Postgres(pool) => {
                let version: String = sqlx::query_scalar("SHOW server_version")
                    .fetch_one(pool)
                    .await?;
                let number = version.split_whitespace().next().unwrap_or(&version);
                format!("PostgreSQL {number}")
            }
            Self::MySql(pool) => {
                let version: String = sqlx::query_scalar("SELECT VERSION()")
                    .fetch_one(pool)
                    .await?;
                let number = version.split('-').next().unwrap_or(&version);
                let server = if version.contains("MariaDB") {
                    "MariaDB"
                } else {
                    "MySQL"
                };
                format!("{server} {number}")
            }
            Self::Sqlite(_) => format!("SQLite {} file", rusqlite::version()),
        })
    }

    /// Rows still in `hookd_outbox`.
    async fn rows(&self) -> anyhow::Result<u64> {
        const COUNT: &str = "SELECT COUNT(*) FROM hookd_outbox";
        let count: i64 = match self {
            Self::Postgres(pool) => sqlx::query_scalar(COUNT).fetch_one(pool).await?,
            Self::MySql(pool) => sqlx::query_scalar(COUNT).fetch_one(pool).await?,
            Self::Sqlite(conn) => {
                let conn = conn.clone();
                tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().expect("the producer's connection");
                    conn.query_row(COUNT, [], |row| row.get(0))
                })
                .await??
            }
        };
        Ok(count as u64)
    }

    async fn close(&self) {
        match self {
            Self::Postgres(pool) => pool.close().await,
            Self::MySql(pool) => pool.close().await,
            Self::Sqlite(_) => {}
        }
    }
}

fn header() -> String {
    report::header(&[
        "source",
        "arrived",
        "missing",
        "p50",
        "p99",
        "max",
        "backlog relayed in",
        "rows/s",
        "not relayed",
    ])
}

fn row(run: &Run) -> String {
    let (latency, backlog) = (&run.latency, &run.backlog);
    report::row(&[
        run.server.clone(),
        format!(
            "{} of {}",
            report::thousands(latency.delivered),
            report::thousands(latency.committed)
        ),
        report::flagged(latency.missing()),
        report::millis(latency.latency(0.50)),
        report::millis(latency.latency(0.99)),
        report::millis(latency.max()),
        format!(
            "{} rows in {:.2} s",
            report::thousands(backlog.rows),
            backlog.elapsed.as_secs_f64()
        ),
        report::thousands(backlog.rows_per_s().round() as u64),
        report::flagged(backlog.not_relayed().max(backlog.left)),
    ])
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "## Outbox sources\n\n\
         An application commits rows into `hookd_outbox` in its own database (made by `hookd \
         outbox install`, written with the `hookd-outbox` crate) and one hookd process, on its \
         default SQLite database, relays it (`--outbox-source`). Sources have no tuning flags \
         (256 rows a pass; PostgreSQL woken by NOTIFY, MySQL/MariaDB and SQLite looked at \
         every 50 ms), so there is one run per kind, at the defaults.\n\n\
         - **commit-to-receipt** (arrived, missing, p50, p99, max): single-row transactions \
         at {} per second for {} s (open loop), one endpoint; latency is the verifying \
         receiver's first receipt minus the return of the producer's `COMMIT`; a source looked \
         at every 50 ms adds a wait of up to 50 ms (25 on average) to that.\n\
         - **relay rate**: {} rows committed ({} per transaction) while hookd is stopped, to an \
         application without endpoints, so the figure is the relay's, not delivery's; rows/s \
         from starting hookd (its start included) until it has made them all messages.\n",
        args.rate,
        args.seconds,
        report::thousands(args.backlog),
        report::thousands(BACKLOG_BATCH),
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
        let crate::Command::Sources(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
