//! The system under test: the real `hookd` release binary as a child process, on a database
//! made for one run and removed after it.
//!
//! Every benchmark measures the binary an operator would run, over real TCP, with the real
//! database settings, so nothing here links hookd's crates. The binary is expected next to
//! this harness's own executable (`target/release/` after
//! `cargo build --release -p hookd -p hookd-bench`). [`start_child`] starts any child that
//! announces its address on stdout (hookd, and the harness's own receiver process).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
pub use hookd_store::testing::random_hex;
use hookd_store::testing::with_database;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// Where `hookd` must be: next to this executable.
pub fn binary() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("cannot tell where hookd-bench runs from")?;
    let dir = me
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", me.display()))?;
    let hookd = dir.join("hookd");
    if !hookd.is_file() {
        bail!(
            "{} does not exist: build it next to hookd-bench with \
             `cargo build --release -p hookd -p hookd-bench`",
            hookd.display()
        );
    }
    Ok(hookd)
}

/// The tuned runs' flags unless `--tuned` says otherwise: room for one endpoint to take
/// four times as many attempts at once, in twice as many workers.
pub const DEFAULT_TUNED: &str = "--endpoint-max-concurrency 512 --workers 1024";

/// How hookd's engine is set for a run. Every benchmark runs at hookd's defaults first: they
/// are what users run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Only what the harness needs (a database, a port, an admin token, and plain `http://`
    /// deliveries to the loopback receiver).
    Defaults,
    /// The defaults plus these flags.
    Tuned(Vec<String>),
    /// An earlier build of hookd at its defaults, run beside this one (`--before`).
    Before(Earlier),
}

impl Setting {
    /// How a table cell names it; the tuned flags are in the section's command.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Defaults => "defaults",
            Self::Tuned(_) => "tuned",
            Self::Before(_) => "before",
        }
    }

    /// How prose names it, with the tuned flags.
    pub fn label(&self) -> String {
        match self {
            Self::Defaults => "defaults".to_owned(),
            Self::Tuned(flags) => format!("tuned: `{}`", flags.join(" ")),
            Self::Before(earlier) => format!("defaults, {}", earlier.revision),
        }
    }

    /// The flags added to hookd's command line.
    pub fn flags(&self) -> &[String] {
        match self {
            Self::Defaults | Self::Before(_) => &[],
            Self::Tuned(flags) => flags,
        }
    }

    /// The hookd executable this setting runs.
    pub fn binary(&self) -> anyhow::Result<PathBuf> {
        match self {
            Self::Before(earlier) => Ok(earlier.binary.clone()),
            Self::Defaults | Self::Tuned(_) => binary(),
        }
    }
}

/// An earlier build of hookd: its executable and the commit it was built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Earlier {
    pub binary: PathBuf,
    pub revision: String,
}

/// `--before`: measure an earlier build beside this one, in the same run, so that a change is
/// judged by before and after on the same machine at the same time.
#[derive(Debug, Clone, clap::Args)]
pub struct Before {
    /// A directory holding an earlier build's `hookd` (the `target/release` of a checkout of
    /// the earlier commit); its defaults are measured first, then this build's.
    #[arg(long)]
    pub before: Option<PathBuf>,
}

impl Before {
    /// The earlier build's setting, if one was given.
    pub fn setting(&self) -> anyhow::Result<Option<Setting>> {
        let Some(dir) = &self.before else {
            return Ok(None);
        };
        let binary = dir.join("hookd");
        if !binary.is_file() {
            bail!("--before {}: no hookd there", dir.display());
        }
        let revision = crate::report::revision_of(dir);
        Ok(Some(Setting::Before(Earlier { binary, revision })))
    }

    /// `settings` with the earlier build's first, if one was given.
    pub fn and(&self, settings: Vec<Setting>) -> anyhow::Result<Vec<Setting>> {
        Ok(self.setting()?.into_iter().chain(settings).collect())
    }

    /// The option as the reproducing command spells it (nothing when not given).
    pub fn flag(&self) -> String {
        self.before
            .as_ref()
            .map_or_else(String::new, |dir| format!(" --before {}", dir.display()))
    }
}

/// `--tuned`: the settings a benchmark runs at, shared by every benchmark that starts hookd
/// for throughput.
#[derive(Debug, Clone, clap::Args)]
pub struct Tuning {
    /// hookd flags for a second pass after the one at hookd's defaults; empty for none.
    #[arg(long, default_value = DEFAULT_TUNED, allow_hyphen_values = true)]
    pub tuned: String,
}

impl Tuning {
    /// The defaults, then the tuned flags if any.
    pub fn settings(&self) -> Vec<Setting> {
        let flags: Vec<String> = self.tuned.split_whitespace().map(str::to_owned).collect();
        let mut settings = vec![Setting::Defaults];
        if !flags.is_empty() {
            settings.push(Setting::Tuned(flags));
        }
        settings
    }

    /// The option as the reproducing command spells it.
    pub fn flag(&self) -> String {
        format!("--tuned '{}'", self.tuned.trim())
    }
}

/// Which database hookd runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
        }
    }
}

/// The `--backend` choice of a benchmark: one database or both, one after the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backends {
    Sqlite,
    Postgres,
    Both,
}

impl Backends {
    pub fn list(self) -> Vec<Backend> {
        match self {
            Self::Sqlite => vec![Backend::Sqlite],
            Self::Postgres => vec![Backend::Postgres],
            Self::Both => vec![Backend::Sqlite, Backend::Postgres],
        }
    }

    pub fn flag(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
            Self::Both => "both",
        }
    }
}

/// The PostgreSQL server used when none is given: the one the test suite uses.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The `--postgres-url` option of a benchmark that runs on PostgreSQL.
#[derive(Debug, clap::Args)]
pub struct PostgresServer {
    /// PostgreSQL server on which a database `hookd_bench_<random>` is created and dropped.
    #[arg(
        long = "postgres-url",
        env = "HOOKD_TEST_POSTGRES_URL",
        default_value = DEFAULT_POSTGRES_URL,
        hide_env_values = true
    )]
    pub url: String,
}

/// A database made for one run. [`Database::remove`] deletes it; call it on every path.
pub enum Database {
    Sqlite {
        url: String,
        dir: PathBuf,
    },
    Postgres {
        url: String,
        server: String,
        name: String,
    },
}

impl Database {
    /// Runs `measure` on a new, empty database of `backend`, removed afterwards whatever came
    /// of it.
    pub async fn with_fresh<T>(
        backend: Backend,
        server_url: &str,
        measure: impl AsyncFnOnce(&Database) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let database = Self::create(backend, server_url).await?;
        let result = measure(&database).await;
        database.remove().await;
        result
    }

    /// A new, empty database: a SQLite file in a fresh temporary directory, or a database
    /// `hookd_bench_<random>` on the PostgreSQL server `server_url` names.
    pub async fn create(backend: Backend, server_url: &str) -> anyhow::Result<Self> {
        match backend {
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!("hookd-bench-{}", random_hex()));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                let url = format!("sqlite://{}", dir.join("hookd.db").display());
                Ok(Self::Sqlite { url, dir })
            }
            Backend::Postgres => {
                let name = format!("hookd_bench_{}", random_hex());
                let mut admin = PgConnection::connect(server_url)
                    .await
                    .with_context(|| format!("cannot connect to PostgreSQL at {server_url}"))?;
                sqlx::query(AssertSqlSafe(format!(r#"CREATE DATABASE "{name}""#)))
                    .execute(&mut admin)
                    .await
                    .with_context(|| format!("cannot create the database {name}"))?;
                let _ = admin.close().await;
                Ok(Self::Postgres {
                    url: with_database(server_url, &name),
                    server: server_url.to_owned(),
                    name,
                })
            }
        }
    }

    /// The URL hookd's `--database` takes.
    pub fn url(&self) -> &str {
        match self {
            Self::Sqlite { url, .. } | Self::Postgres { url, .. } => url,
        }
    }

    /// Gathers PostgreSQL's planner statistics (`ANALYZE`), as autovacuum does on a server
    /// where it is on, after a history was written in bulk. A no-op on SQLite, whose planner
    /// hookd does not give statistics.
    pub async fn analyze(&self) -> anyhow::Result<()> {
        let Self::Postgres { url, .. } = self else {
            return Ok(());
        };
        let mut conn = PgConnection::connect(url).await?;
        sqlx::query("ANALYZE").execute(&mut conn).await?;
        let _ = conn.close().await;
        Ok(())
    }

    /// Deletes the database (stop hookd first). Failures are reported, not returned: this
    /// runs on error paths too.
    pub async fn remove(self) {
        match self {
            Self::Sqlite { dir, .. } => {
                if let Err(error) = std::fs::remove_dir_all(&dir) {
                    eprintln!("warning: cannot remove {}: {error}", dir.display());
                }
            }
            Self::Postgres { server, name, .. } => {
                let dropped = async {
                    let mut admin = PgConnection::connect(&server).await?;
                    sqlx::query(AssertSqlSafe(format!(
                        r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#
                    )))
                    .execute(&mut admin)
                    .await?;
                    admin.close().await
                };
                if let Err(error) = dropped.await {
                    eprintln!("warning: cannot drop the database {name}: {error}");
                }
            }
        }
    }
}

/// A running `hookd serve`; killed when dropped.
pub struct Hookd {
    /// `http://127.0.0.1:PORT`, as hookd printed it.
    pub base_url: String,
    /// The admin token it was started with.
    pub admin_token: String,
    /// The database it serves.
    pub database_url: String,
    child: Child,
}

impl Hookd {
    /// Starts `hookd serve` on a free loopback port over `database_url`, with a fresh admin
    /// token, accepting `http://` endpoints and letting deliveries reach the loopback
    /// receiver past the SSRF guard; `extra` options are appended (e.g. engine settings).
    /// Nothing else is set: hookd sees none of the shell's `HOOKD_*` variables, so what is
    /// not given here is hookd's default. Waits until hookd prints where it listens.
    pub fn start(database_url: &str, extra: &[String]) -> anyhow::Result<Self> {
        Self::start_with(&binary()?, &[], START_PATIENCE, database_url, extra, None)
    }

    /// As [`Hookd::start`], the build and flags `setting` names, plus `harness`: what the
    /// benchmark's own set-up needs, whatever the setting (room for its endpoints, say).
    pub fn start_as(
        database_url: &str,
        setting: &Setting,
        harness: &[String],
    ) -> anyhow::Result<Self> {
        let binary = setting.binary()?;
        let flags = [setting.flags(), harness].concat();
        Self::start_with(&binary, &[], START_PATIENCE, database_url, &flags, None)
    }

    /// As [`Hookd::start`], on a clock shifted by the milliseconds written in `offset_file`
    /// (`HOOKD_TEST_CLOCK_OFFSET_FILE`), so a benchmark can make days pass.
    pub fn start_shifted(
        database_url: &str,
        extra: &[String],
        offset_file: &Path,
    ) -> anyhow::Result<Self> {
        let binary = binary()?;
        Self::start_with(
            &binary,
            &[],
            START_PATIENCE,
            database_url,
            extra,
            Some(offset_file),
        )
    }

    /// As [`Hookd::start_as`], with `wrapper` (a program and its arguments, e.g. valgrind's)
    /// running hookd, which may take up to `patience` to listen.
    pub fn start_under(
        wrapper: &[String],
        patience: Duration,
        database_url: &str,
        setting: &Setting,
    ) -> anyhow::Result<Self> {
        let binary = setting.binary()?;
        Self::start_with(
            &binary,
            wrapper,
            patience,
            database_url,
            setting.flags(),
            None,
        )
    }

    fn start_with(
        binary: &Path,
        wrapper: &[String],
        patience: Duration,
        database_url: &str,
        extra: &[String],
        offset_file: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let admin_token = format!("bench_{}", random_hex());
        let mut command = match wrapper.split_first() {
            Some((program, arguments)) => {
                let mut command = Command::new(program);
                command.args(arguments).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--allow-http-endpoints"])
            .args(["--allow-subnet", "127.0.0.1/32"])
            .args(["--admin-token", &admin_token, "--database", database_url])
            .args(extra);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("HOOKD_") {
                command.env_remove(name);
            }
        }
        if let Some(file) = offset_file {
            command.env("HOOKD_TEST_CLOCK_OFFSET_FILE", file);
        }
        let (child, base_url) = start_child_within(&mut command, "hookd listening on ", patience)?;
        Ok(Self {
            base_url,
            admin_token,
            database_url: database_url.to_owned(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// hookd's peak resident set so far (`VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        self.status_kib("VmHWM")
    }

    /// hookd's resident set now (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        self.status_kib("VmRSS")
    }

    /// A `NAME: N kB` line of hookd's `/proc/PID/status`.
    fn status_kib(&self, name: &str) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .context("cannot read hookd's /proc status")?;
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| anyhow!("no {name} line in /proc/{}/status", self.pid()))
    }

    /// CPU time hookd has used so far (user + system, all threads).
    pub fn cpu_time(&self) -> anyhow::Result<Duration> {
        crate::machine::process_cpu_time(self.pid())
    }

    /// Stops hookd.
    pub fn stop(mut self) {
        self.kill();
    }

    /// Asks hookd to stop (SIGTERM, as an operator's service manager does) and waits until it
    /// has exited, so that a wrapper such as callgrind writes what it counted.
    pub fn terminate(mut self) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .context("cannot run kill")?;
        if !status.success() {
            bail!("kill -TERM {} failed ({status})", self.pid());
        }
        self.child.wait().context("cannot wait for hookd")?;
        Ok(())
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Hookd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How long a child may take to print where it listens.
const START_PATIENCE: Duration = Duration::from_secs(60);

/// Spawns `command` (stdin piped and held by the returned child, so a child that watches its
/// stdin ends with this process) and waits up to a minute for it to print a line starting with
/// `prefix`; returns the child and the rest of that line (its address).
pub fn start_child(command: &mut Command, prefix: &'static str) -> anyhow::Result<(Child, String)> {
    start_child_within(command, prefix, START_PATIENCE)
}

/// [`start_child`], waiting up to `patience`.
fn start_child_within(
    command: &mut Command,
    prefix: &'static str,
    patience: Duration,
) -> anyhow::Result<(Child, String)> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {:?}", command.get_program()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    // A thread reads stdout for the whole life of the child, so the child never blocks on a
    // full pipe; it hands over the address line.
    let (address_tx, address_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut address_tx = Some(address_tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix(prefix)
                && let Some(tx) = address_tx.take()
            {
                let _ = tx.send(rest.trim().to_owned());
            }
        }
    });
    let deadline = Instant::now() + patience;
    loop {
        match address_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(address) => return Ok((child, address)),
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "{:?} exited ({status}) before listening",
                        command.get_program()
                    );
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "no `{prefix}…` line from {:?} within {patience:?}",
                    command.get_program()
                );
            }
        }
    }
}
