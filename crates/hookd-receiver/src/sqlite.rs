//! SQLite backend (feature `sqlite`): one rusqlite connection per [`SqliteDb`], used from
//! tokio's blocking pool so async handlers never block on disk. WAL mode and a busy timeout let
//! several processes share the file; every write is one autocommit statement.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};

use crate::StoreError;
use crate::inbox::{Inbox, InboxOptions, Pending, Seen};
use crate::ordering::{Applied, VersionStore};
use crate::sql::{self, Table};

/// An SQLite database file holding inboxes and version tables.
#[derive(Debug, Clone)]
pub struct SqliteDb(Arc<Mutex<Connection>>);

impl SqliteDb {
    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let connection = Connection::open(path)?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Self(Arc::new(Mutex::new(connection))))
    }

    /// Runs `job` on the connection in the blocking pool.
    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let connection = self.0.clone();
        tokio::task::spawn_blocking(move || {
            let connection = connection.lock().unwrap_or_else(|e| e.into_inner());
            job(&connection)
        })
        .await
        .map_err(|_| StoreError::Panicked)?
        .map_err(StoreError::from)
    }

    /// The inbox in table `table` (created if missing), with `options`.
    pub async fn inbox(
        &self,
        table: &str,
        options: InboxOptions,
    ) -> Result<SqliteInbox, StoreError> {
        let table = Table::new(table)?;
        let ddl = sql::create_inbox(&table, "BLOB");
        self.run(move |c| ddl.iter().try_for_each(|s| c.execute(s, []).map(drop)))
            .await?;
        Ok(SqliteInbox {
            db: self.clone(),
            statements: InboxStatements::new(&table, &options),
            options,
        })
    }

    /// The version table `table` (created if missing).
    pub async fn versions(&self, table: &str) -> Result<SqliteVersions, StoreError> {
        let table = Table::new(table)?;
        let ddl = sql::create_versions(&table);
        self.run(move |c| c.execute(&ddl, [])).await?;
        Ok(SqliteVersions {
            db: self.clone(),
            apply: numbered(sql::apply(&table)),
            get: numbered(sql::get(&table)),
        })
    }
}

/// `statement` with `$N` placeholders as `?N`: SQLite numbers `$N` by order of appearance,
/// not by N, while `?N` means parameter N as in PostgreSQL.
fn numbered(statement: String) -> Arc<str> {
    statement.replace('$', "?").into()
}

/// The inbox's statements, prepared once as text.
#[derive(Debug, Clone)]
struct InboxStatements {
    record: Arc<str>,
    claim: Arc<str>,
    mark_processed: Arc<str>,
    reprocess: Arc<str>,
    backlog: Arc<str>,
    drop_payloads: Arc<str>,
    purge: Arc<str>,
}

impl InboxStatements {
    fn new(table: &Table, options: &InboxOptions) -> Self {
        let keep_payload = !options.keep_payloads.is_zero();
        Self {
            record: numbered(sql::record(table)),
            claim: numbered(sql::claim(table, "")),
            mark_processed: numbered(sql::mark_processed(table, keep_payload)),
            reprocess: numbered(sql::reprocess(table)),
            backlog: numbered(sql::backlog(table)),
            drop_payloads: numbered(sql::drop_payloads(table)),
            purge: numbered(sql::purge(table)),
        }
    }
}

/// An [`Inbox`] in an SQLite table.
#[derive(Debug, Clone)]
pub struct SqliteInbox {
    db: SqliteDb,
    statements: InboxStatements,
    options: InboxOptions,
}

impl Inbox for SqliteInbox {
    async fn record(&self, webhook_id: &str, payload: &[u8]) -> Result<Seen, StoreError> {
        let (sql, id, payload) = (
            self.statements.record.clone(),
            webhook_id.to_owned(),
            payload.to_vec(),
        );
        let now = self.options.now_ms();
        let inserted = self
            .db
            .run(move |c| c.prepare_cached(&sql)?.execute(params![id, now, payload]))
            .await?;
        Ok(if inserted == 1 {
            Seen::New
        } else {
            Seen::Duplicate
        })
    }

    async fn claim(&self, limit: u32) -> Result<Vec<Pending>, StoreError> {
        let sql = self.statements.claim.clone();
        let (until, now) = (self.options.lease_until_ms(), self.options.now_ms());
        let mut claimed = self
            .db
            .run(move |c| {
                c.prepare_cached(&sql)?
                    .query_map(params![until, now, limit], |row| {
                        Ok(Pending {
                            webhook_id: row.get(0)?,
                            payload: row.get(1)?,
                            received_at: row.get(2)?,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        claimed.sort_by_key(|p| p.received_at);
        Ok(claimed)
    }

    async fn mark_processed(&self, webhook_id: &str) -> Result<(), StoreError> {
        let (sql, id, now) = (
            self.statements.mark_processed.clone(),
            webhook_id.to_owned(),
            self.options.now_ms(),
        );
        self.db
            .run(move |c| c.prepare_cached(&sql)?.execute(params![id, now]))
            .await
            .map(drop)
    }

    async fn backlog(&self) -> Result<u64, StoreError> {
        let sql = self.statements.backlog.clone();
        let count: i64 = self
            .db
            .run(move |c| c.prepare_cached(&sql)?.query_row([], |row| row.get(0)))
            .await?;
        Ok(count.unsigned_abs())
    }

    async fn reprocess(&self, webhook_id: &str) -> Result<bool, StoreError> {
        let (sql, id) = (self.statements.reprocess.clone(), webhook_id.to_owned());
        let changed = self
            .db
            .run(move |c| c.prepare_cached(&sql)?.execute(params![id]))
            .await?;
        Ok(changed == 1)
    }

    async fn purge(&self) -> Result<u64, StoreError> {
        let (drop_payloads, purge) = (
            self.statements.drop_payloads.clone(),
            self.statements.purge.clone(),
        );
        let (payloads_before, ids_before) = (
            self.options.drop_payloads_before_ms(),
            self.options.purge_before_ms(),
        );
        let deleted = self
            .db
            .run(move |c| {
                c.prepare_cached(&drop_payloads)?
                    .execute(params![payloads_before])?;
                c.prepare_cached(&purge)?.execute(params![ids_before])
            })
            .await?;
        Ok(deleted as u64)
    }
}

/// A [`VersionStore`] in an SQLite table.
#[derive(Debug, Clone)]
pub struct SqliteVersions {
    db: SqliteDb,
    apply: Arc<str>,
    get: Arc<str>,
}

impl VersionStore for SqliteVersions {
    async fn apply(&self, key: &str, version: i64, state: &str) -> Result<Applied, StoreError> {
        let (sql, key, state) = (self.apply.clone(), key.to_owned(), state.to_owned());
        let changed = self
            .db
            .run(move |c| {
                c.prepare_cached(&sql)?
                    .execute(params![key, version, state])
            })
            .await?;
        Ok(if changed == 1 {
            Applied::Newer
        } else {
            Applied::Stale
        })
    }

    async fn get(&self, key: &str) -> Result<Option<(i64, String)>, StoreError> {
        let (sql, key) = (self.get.clone(), key.to_owned());
        self.db
            .run(move |c| {
                c.prepare_cached(&sql)?
                    .query_row(params![key], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .await
    }
}
