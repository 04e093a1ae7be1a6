//! Outbox sources: `serve`'s `--outbox-source` options, which relay outbox tables in
//! producers' own databases, and `hookd outbox install`, which makes such a table.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use hookd_core::Clock;
use hookd_sources::{Kind, SourceRelay, SourceRelayConfig, SourceSpec};
use hookd_store::{RelayRules, Store};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::database::runtime;
use super::shutdown::Shutdown;

/// Rows of one source relayed in one pass.
const SOURCE_BATCH: usize = 256;
/// How often a source without notifications (MySQL, SQLite) is looked at: one indexed read.
const SOURCE_POLL: Duration = Duration::from_millis(50);
/// How often a PostgreSQL source is looked at when no notification came (one may be lost).
const SOURCE_POLL_SIGNALLED: Duration = Duration::from_secs(1);

#[derive(Debug, clap::Args)]
pub struct SourceOptions {
    /// Relay the outbox table in a producer's own database: `NAME=URL`, the URL
    /// `postgres://…`, `mysql://…` (MySQL 8, MariaDB 10.6+) or `sqlite://PATH`; the table is
    /// made by `hookd outbox install`. Repeat for several sources.
    #[arg(
        long = "outbox-source",
        env = "HOOKD_OUTBOX_SOURCES",
        value_delimiter = ' ',
        value_name = "NAME=URL",
        value_parser = parse_source,
        hide_env_values = true,
        value_hint = clap::ValueHint::Url
    )]
    sources: Vec<SourceSpec>,
    /// Send every row of source NAME to one application (`NAME=APP`, its id or uid): rows may
    /// then leave `app` NULL, and a row naming another application is refused. Repeatable.
    #[arg(
        long = "outbox-source-app",
        env = "HOOKD_OUTBOX_SOURCE_APPS",
        value_delimiter = ' ',
        value_name = "NAME=APP"
    )]
    source_apps: Vec<String>,
}

fn parse_source(spec: &str) -> Result<SourceSpec, String> {
    spec.parse()
        .map_err(|e: hookd_sources::SourceError| e.to_string())
}

impl SourceOptions {
    /// The sources, bound to their applications; names must differ.
    pub fn specs(&self) -> anyhow::Result<Vec<SourceSpec>> {
        let mut specs = self.sources.clone();
        for (i, spec) in specs.iter().enumerate() {
            anyhow::ensure!(
                !specs[..i].iter().any(|other| other.name == spec.name),
                "--outbox-source: two sources are named {:?}",
                spec.name
            );
        }
        SourceSpec::bind_all(&mut specs, &self.source_apps)?;
        Ok(specs)
    }
}

/// Starts one relay per source, stopped with the other parts.
pub fn start_relays(
    specs: Vec<SourceSpec>,
    rules: RelayRules,
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    new_work: &Arc<Notify>,
    shutdown: &mut Shutdown,
) -> anyhow::Result<()> {
    if specs.is_empty() {
        return Ok(());
    }
    hookd_sources::relay::describe_metrics();
    let config = SourceRelayConfig {
        rules,
        batch: SOURCE_BATCH,
        poll_interval: SOURCE_POLL_SIGNALLED,
        poll_interval_unsignalled: SOURCE_POLL,
    };
    let mut relays = JoinSet::new();
    for spec in specs {
        let url = spec.url.clone();
        let relay = SourceRelay::new(
            spec,
            store.clone(),
            clock.clone(),
            config.clone(),
            new_work.clone(),
        )
        .map_err(|e| anyhow::anyhow!(hookd_core::redact::error_text(&e.to_string(), &url)))?;
        relays.spawn(relay.run(shutdown.notice()));
    }
    shutdown.start("the outbox sources", async move {
        relays.join_all().await;
    });
    Ok(())
}

/// `hookd outbox`: outbox tables in producers' own databases.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Create the outbox table `hookd_outbox` in a producer's database (PostgreSQL,
    /// MySQL/MariaDB or an SQLite file), and print the grants its roles need. Running it again
    /// changes nothing that exists.
    Install(InstallArgs),
    /// Print the SQL `install` runs on a kind of database (`postgres`, `mysql` or `sqlite`),
    /// with a new table identity, to apply through your own migrations instead.
    Sql {
        #[arg(value_enum)]
        kind: SqlKind,
    },
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum SqlKind {
    Postgres,
    Mysql,
    Sqlite,
}

#[derive(Debug, clap::Args)]
struct InstallArgs {
    /// The producer's database: `postgres://…`, `mysql://…` or `sqlite://PATH`, as a user
    /// that may create tables there.
    #[arg(long, value_name = "URL")]
    source: String,
    /// The role (PostgreSQL) or account (MySQL, e.g. `'app'@'%'`) that inserts rows, for the
    /// printed grants (which quote it: give it as the database stores it).
    #[arg(long, default_value = "producer")]
    producer_role: String,
    /// The role or account hookd relays as, for the printed grants.
    #[arg(long, default_value = "hookd")]
    relay_role: String,
}

pub fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Install(install) => run_install(install),
        Command::Sql { kind } => {
            let kind = match kind {
                SqlKind::Postgres => Kind::Postgres,
                SqlKind::Mysql => Kind::MySql,
                SqlKind::Sqlite => Kind::Sqlite,
            };
            print!("{}", hookd_sources::install::sql(kind));
            ExitCode::SUCCESS
        }
    }
}

fn run_install(install: InstallArgs) -> ExitCode {
    let url = hookd_sources::source::redacted(&install.source);
    let installed = runtime().block_on(hookd_sources::install(
        &install.source,
        &install.producer_role,
        &install.relay_role,
    ));
    match installed {
        Ok(installed) => {
            let done = if installed.created {
                "created"
            } else {
                "was already there; nothing changed"
            };
            println!(
                "hookd_outbox (contract v{}) in the {} database {url}: {done}.",
                hookd_sources::CONTRACT_VERSION,
                installed.kind
            );
            println!("\nGrants (run as the table's owner):\n{}", installed.grants);
            println!("\nRelay it with: hookd serve --outbox-source NAME={url}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let error = hookd_core::redact::error_text(&error.to_string(), &install.source);
            eprintln!("error: cannot install the outbox table in {url}: {error}");
            ExitCode::FAILURE
        }
    }
}
