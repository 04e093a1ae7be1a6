//! An outbox table in an SQLite file the application owns: its DDL, and the relay's SQL.
//!
//! SQLite has one writer at a time, and the relay must never stop the application's: it reads
//! waiting rows without a write lock, publishes them, and only then takes the write lock for
//! the moment its removal takes (waiting up to the busy timeout while the application writes).
//! SQLite has no notifications: the relay polls with one indexed read.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::SourceError;
use crate::pass::{Backlog, Contract, Hold, HoldInner, Outcome, Taken, not_installed};

/// `hookd outbox install` on SQLite, in one transaction. `AUTOINCREMENT`, so that an id is
/// never reused once its row is removed (the relay keys published rows by id). `{table_id}`
/// is filled in.
pub const INSTALL: &str = "
CREATE TABLE IF NOT EXISTS hookd_outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    app          TEXT,
    event_type   TEXT NOT NULL,
    payload      TEXT NOT NULL,
    event_id     TEXT,
    channels     TEXT,
    ordering_key TEXT,
    created_at   INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    error        TEXT,
    failed_at    INTEGER
);
CREATE INDEX IF NOT EXISTS hookd_outbox_waiting ON hookd_outbox (id) WHERE failed_at IS NULL;
CREATE TABLE IF NOT EXISTS hookd_outbox_contract (
    version  INTEGER NOT NULL,
    table_id TEXT NOT NULL
);
INSERT INTO hookd_outbox_contract (version, table_id)
    SELECT 1, '{table_id}' WHERE NOT EXISTS (SELECT 1 FROM hookd_outbox_contract);
";

/// How long the relay's removal waits for the application's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// An outbox table in an SQLite file: one connection, opened when first needed and again
/// after an error.
pub struct Source {
    path: PathBuf,
    conn: Arc<Mutex<Option<Connection>>>,
}

impl Source {
    pub fn new(url: &str) -> Result<Self, SourceError> {
        let path = url.strip_prefix("sqlite://").unwrap_or(url);
        Ok(Self {
            path: PathBuf::from(path),
            conn: Arc::default(),
        })
    }

    /// Runs `work` on the connection, on a blocking thread; a failure closes it, so the next
    /// use opens the file afresh.
    async fn with<R: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<R, SourceError> + Send + 'static,
    ) -> Result<R, SourceError> {
        let (path, slot) = (self.path.clone(), self.conn.clone());
        tokio::task::spawn_blocking(move || {
            let mut slot = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if slot.is_none() {
                *slot = Some(open(&path, false)?);
            }
            let outcome = work(slot.as_ref().expect("opened above"));
            if outcome.is_err() {
                *slot = None;
            }
            outcome
        })
        .await
        .map_err(|e| SourceError::Database(format!("the SQLite relay thread failed: {e}")))?
    }

    pub async fn take(&self, limit: usize) -> Result<Option<Taken>, SourceError> {
        self.with(move |conn| {
            // One snapshot for the contract and the rows; a read takes no lock a writer waits on.
            let tx = conn.unchecked_transaction()?;
            let contract = contract(&tx)?;
            let rows = tx
                .prepare_cached(
                    "SELECT id, CAST(app AS TEXT), CAST(event_type AS TEXT),
                            CAST(payload AS TEXT), CAST(event_id AS TEXT),
                            CAST(channels AS TEXT), CAST(ordering_key AS TEXT)
                     FROM hookd_outbox WHERE failed_at IS NULL ORDER BY id LIMIT ?1",
                )?
                .query_map(
                    [i64::try_from(limit).unwrap_or(i64::MAX)],
                    hookd_store::sqlite::outbox_row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            tx.finish()?;
            Ok((!rows.is_empty()).then(|| Taken {
                table_id: contract.table_id,
                rows,
                hold: Hold(HoldInner::Nothing),
            }))
        })
        .await
    }

    pub async fn settle(&self, outcome: Outcome) -> Result<(), SourceError> {
        self.with(move |conn| {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let written = (|| -> rusqlite::Result<()> {
                let published = json_list(&outcome.published);
                conn.prepare_cached(
                    "DELETE FROM hookd_outbox WHERE id IN (SELECT value FROM json_each(?1))",
                )?
                .execute([published])?;
                for (id, why) in &outcome.refused {
                    conn.prepare_cached(
                        "UPDATE hookd_outbox SET error = ?2, failed_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
                         WHERE id = ?1",
                    )?
                    .execute(params![id, why])?;
                }
                Ok(())
            })();
            match written {
                Ok(()) => conn.execute_batch("COMMIT")?,
                Err(error) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(error.into());
                }
            }
            Ok(())
        })
        .await
    }

    pub async fn backlog(&self) -> Result<Backlog, SourceError> {
        self.with(|conn| {
            let (waiting, failed, oldest): (i64, i64, Option<f64>) = conn
                .query_row(
                    "SELECT count(*) FILTER (WHERE failed_at IS NULL),
                            count(*) FILTER (WHERE failed_at IS NOT NULL),
                            (julianday('now') - 2440587.5) * 86400000
                                - min(created_at) FILTER (WHERE failed_at IS NULL)
                     FROM hookd_outbox",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .map_err(missing_table)?;
            Ok(Backlog {
                waiting: waiting.unsigned_abs(),
                failed: failed.unsigned_abs(),
                oldest: Duration::from_secs_f64(oldest.unwrap_or(0.0).max(0.0) / 1000.0),
            })
        })
        .await
    }
}

/// Opens the application's file. The relay never creates one (a missing file is a wrong
/// path); `install` may.
fn open(path: &std::path::Path, create: bool) -> Result<Connection, SourceError> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| SourceError::Database(format!("cannot open {}: {e}", path.display())))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

fn contract(conn: &Connection) -> Result<Contract, SourceError> {
    let (version, table_id) = conn
        .query_row(
            "SELECT version, table_id FROM hookd_outbox_contract",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(missing_table)?
        .ok_or_else(|| not_installed(SourceError::Database(String::new()), true))?;
    Contract { version, table_id }.check()
}

/// Installs the table in the file at `url` (created if missing) with identity `table_id`, and
/// puts the file in WAL mode, where the relay's reads never wait for the application's
/// writes nor they for them; returns whether the table was new.
pub fn install(url: &str, table_id: &str) -> Result<bool, SourceError> {
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    let mut conn = open(std::path::Path::new(path), true)?;
    let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    let tx = conn.transaction()?;
    let existed: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hookd_outbox')",
        [],
        |r| r.get(0),
    )?;
    tx.execute_batch(&INSTALL.replace("{table_id}", table_id))?;
    tx.commit()?;
    Ok(!existed)
}

fn json_list(ids: &[i64]) -> String {
    let items: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}

/// "no such table" as [`SourceError::NotInstalled`].
fn missing_table(error: rusqlite::Error) -> SourceError {
    let missing = error.to_string().starts_with("no such table");
    not_installed(error.into(), missing)
}
