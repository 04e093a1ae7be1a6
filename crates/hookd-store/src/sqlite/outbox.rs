//! [`OutboxStore`] on SQLite: the outbox relayed by hookd's single writer.
//!
//! Producers are other connections to the same file (an application embedding hookd, or any
//! process on the same machine sharing the file): their `BEGIN … INSERT INTO outbox … COMMIT`
//! is atomic with their own tables. The relay runs as one write job: SQLite lets one writer
//! in at a time, so a row is read, turned into a message and deleted by one transaction that
//! nobody else can interleave with. SQLite has no notifications: the relay polls.

use async_trait::async_trait;
use hookd_core::{AppId, MessageId, Timestamp};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};

use super::SqliteStore;
use super::publish::insert_message;
use super::rows::{fetch_one, run};
use super::writer::Tx;
use crate::outbox::{OutboxRow, strict_event_type, unknown_app};
use crate::sql::outbox as sql;
use crate::{OutboxStore, RelayRules, Relayed, Route, RowFate, StoreError, Wakeups};

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn relay_outbox(
        &self,
        limit: usize,
        rules: &RelayRules,
        now: Timestamp,
    ) -> Result<Relayed, StoreError> {
        // A read first: the relay polls SQLite, and most polls find nothing to write.
        let waiting: bool = self
            .db
            .read(|conn| {
                let exists = "SELECT EXISTS (SELECT 1 FROM outbox WHERE error IS NULL)";
                Ok(conn.query_row(exists, [], |r| r.get(0))?)
            })
            .await?;
        if !waiting {
            return Ok(Relayed::default());
        }
        let rules = rules.clone();
        self.db
            .write(move |conn| relay(conn, limit, &rules, now))
            .await
    }

    async fn announce_deliveries(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn watch(&self, _wakeups: Wakeups) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn relay_source_rows(
        &self,
        source: &str,
        rows: Vec<OutboxRow>,
        rules: &RelayRules,
        now: Timestamp,
    ) -> Result<Vec<RowFate>, StoreError> {
        let (source, rules) = (source.to_owned(), rules.clone());
        self.db
            .write(move |conn| {
                let ids = MessageId::run(now, rows.len());
                rows.iter()
                    .zip(ids)
                    .map(|(row, id)| relay_row(conn, row, id, Some(&source), &rules, now))
                    .collect()
            })
            .await
    }
}

fn relay(
    conn: &Tx<'_>,
    limit: usize,
    rules: &RelayRules,
    now: Timestamp,
) -> Result<Relayed, StoreError> {
    let mut relayed = Relayed::default();
    let rows = waiting(conn, limit)?;
    let ids = MessageId::run(now, rows.len());
    for (row, id) in rows.iter().zip(ids) {
        let fate = relay_row(conn, row, id, None, rules, now)?;
        if let RowFate::Refused(why) = &fate {
            conn.prepare_cached("UPDATE outbox SET error = ?2, failed_at = ?3 WHERE id = ?1")?
                .execute(params![row.id, why, now.as_millis()])?;
        } else {
            conn.prepare_cached("DELETE FROM outbox WHERE id = ?1")?
                .execute([row.id])?;
        }
        relayed.count(&fate);
    }
    Ok(relayed)
}

/// Publishes one row inside a savepoint, so that a refused row's writes roll back on their
/// own and the others' stay. A row of a `source` is recorded under its id there, and not
/// published again.
fn relay_row(
    conn: &Tx<'_>,
    row: &OutboxRow,
    id: MessageId,
    source: Option<&str>,
    rules: &RelayRules,
    now: Timestamp,
) -> Result<RowFate, StoreError> {
    if let Some(source) = source {
        let seen = fetch_one(conn, &sql::relayed(source, row.id), |r| r.bool(0))?;
        if seen == Some(true) {
            return Ok(RowFate::AlreadyPublished);
        }
    }
    conn.execute_batch("SAVEPOINT outbox_row")?;
    match publish_row(conn, row, id, source, rules, now) {
        Ok(deliveries) => {
            conn.execute_batch("RELEASE outbox_row")?;
            Ok(RowFate::Published { deliveries })
        }
        Err(Refusal::Row(why)) => {
            conn.execute_batch("ROLLBACK TO outbox_row; RELEASE outbox_row")?;
            Ok(RowFate::Refused(why))
        }
        Err(Refusal::Store(error)) => Err(error),
    }
}

/// Why a row was not relayed: the row's fault (kept on it), or the database's (retried).
enum Refusal {
    Row(String),
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict(why) => Self::Row(why),
            StoreError::NotFound(what) => Self::Row(format!("{what} not found")),
            other => Self::Store(other),
        }
    }
}

impl From<rusqlite::Error> for Refusal {
    fn from(error: rusqlite::Error) -> Self {
        Self::Store(error.into())
    }
}

/// Writes the row's message and deliveries (and, for a source's row, the record of it);
/// returns how many deliveries.
fn publish_row(
    conn: &Tx<'_>,
    row: &OutboxRow,
    id: MessageId,
    source: Option<&str>,
    rules: &RelayRules,
    now: Timestamp,
) -> Result<usize, Refusal> {
    row.check(rules).map_err(Refusal::Row)?;
    let app = fetch_one(conn, &sql::app_of_row(row), sql::app_of_row_row)?;
    let (app, enveloped) = app.ok_or_else(|| Refusal::Row(unknown_app(&row.app)))?;
    if rules.strict_event_types {
        let found = fetch_one(conn, &sql::event_type(&row.event_type), sql::event_type_row)?;
        strict_event_type(found, row).map_err(Refusal::Row)?;
    }
    let message = row.message(id, (AppId::from_stored(app), enveloped), now);
    let deliveries = insert_message(conn, &message, &Route::Subscribers, None)?
        .created
        .deliveries;
    if let Some(source) = source {
        run(conn, &sql::record_relayed(source, row.id, &message.id))?;
    }
    Ok(deliveries)
}

/// Up to `limit` waiting rows, oldest first. A column that is not what the contract says (a
/// channels value that is not a JSON list of strings, bytes that are not UTF-8) becomes the
/// row's error, not the batch's: a failing read would fail every pass, and the rows behind it
/// would never be relayed.
fn waiting(conn: &Connection, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
    // Read as text whatever the producer stored: SQLite keeps a value's own type in any
    // column, and a client passing bytes (Python's, say) stores a BLOB.
    let mut stmt = conn.prepare_cached(
        "SELECT id, CAST(app AS TEXT), CAST(event_type AS TEXT), CAST(payload AS TEXT),
                CAST(event_id AS TEXT), CAST(channels AS TEXT), CAST(ordering_key AS TEXT)
         FROM outbox WHERE error IS NULL ORDER BY id",
    )?;
    // The limit is taken in Rust: SQLite re-prepares a statement whenever a LIMIT parameter
    // is bound, and this one runs on every relay pass.
    let rows = stmt.query_map([], outbox_row)?;
    Ok(rows.take(limit).collect::<Result<_, _>>()?)
}

/// Decodes an outbox row selected as its id and, each cast to text, its app, event type,
/// payload, event id, channels and ordering key. A value that is not UTF-8 becomes the row's
/// problem, kept on it.
pub fn outbox_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    let mut problem = None;
    let mut text = |i, name| -> rusqlite::Result<Option<String>> {
        Ok(utf8(r.get_ref(i)?, name).unwrap_or_else(|why| {
            problem.get_or_insert(why);
            None
        }))
    };
    let (app, event_type, payload) = (text(1, "app")?, text(2, "eventType")?, text(3, "payload")?);
    let (event_id, channels) = (text(4, "eventId")?, text(5, "channels")?);
    let ordering_key = text(6, "orderingKey")?;
    let mut row = OutboxRow::from_columns(
        r.get(0)?,
        app.unwrap_or_default(),
        event_type.unwrap_or_default(),
        payload.unwrap_or_default(),
        event_id,
        channels.as_deref(),
        ordering_key,
    );
    if let Some(problem) = problem {
        row.problem = Some(problem);
    }
    Ok(row)
}

/// A value cast to text, or why it cannot be read as such.
fn utf8(value: ValueRef<'_>, name: &str) -> Result<Option<String>, String> {
    match value {
        ValueRef::Text(bytes) => std::str::from_utf8(bytes)
            .map(|text| Some(text.to_owned()))
            .map_err(|_| format!("{name}: is not UTF-8 text")),
        _ => Ok(None),
    }
}
