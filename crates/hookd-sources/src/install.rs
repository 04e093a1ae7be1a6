//! `hookd outbox install --source URL`: the outbox table in a producer's database.
//!
//! The same table, `hookd_outbox`, in every kind of database, with the same columns as hookd's
//! own outbox (docs/outbox.md), an index on the waiting rows, and a one-row contract table
//! holding the contract version and the table's identity: published rows are keyed by that
//! identity and their ids, so a table dropped and installed again never has a new row taken
//! for an old one. Installing again changes nothing that exists.

use crate::source::{Kind, redacted};
use crate::{SourceError, mysql, postgres, sqlite};

/// What `install` did, and what to grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub kind: Kind,
    /// Whether the table is new (`false`: it was already there, and is unchanged).
    pub created: bool,
    /// The statements giving a producer role and hookd's relay role what they need, and no
    /// more.
    pub grants: String,
}

/// Installs the outbox table at `url`, and returns the grants for roles `producer` and
/// `relay`.
pub async fn install(url: &str, producer: &str, relay: &str) -> Result<Installed, SourceError> {
    let kind = Kind::of(url)?;
    let table_id = table_id();
    let (created, grants) = match kind {
        Kind::Postgres => (
            postgres::install(url, &table_id).await?,
            postgres::grants(producer, relay),
        ),
        Kind::MySql => {
            let created = mysql::install(url, &table_id).await?;
            let database = mysql::database(url).await?;
            (created, mysql::grants(&database, producer, relay))
        }
        Kind::Sqlite => {
            let url = url.to_owned();
            let created = tokio::task::spawn_blocking(move || sqlite::install(&url, &table_id))
                .await
                .map_err(|e| SourceError::Database(e.to_string()))??;
            let grants = "-- SQLite has no roles: the application and hookd both need to read \
                          and write the file and its folder (for the WAL files)."
                .to_owned();
            (created, grants)
        }
    };
    tracing::info!(source = %redacted(url), %kind, created, "outbox table installed");
    Ok(Installed {
        kind,
        created,
        grants,
    })
}

/// The SQL `install` runs on a database of `kind`, with a new table identity: for a DBA who
/// applies schema changes through the application's own migrations.
pub fn sql(kind: Kind) -> String {
    let table_id = table_id();
    match kind {
        Kind::Postgres => postgres::INSTALL.replace("{table_id}", &table_id),
        Kind::MySql => mysql::INSTALL
            .map(|statement| format!("{};\n", statement.replace("{table_id}", &table_id)))
            .join("\n"),
        Kind::Sqlite => format!(
            "PRAGMA journal_mode = WAL;\n{}",
            sqlite::INSTALL.replace("{table_id}", &table_id)
        ),
    }
}

/// A new table identity: 16 random hex digits.
fn table_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
