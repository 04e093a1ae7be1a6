//! [`OutboxStore`] on SQLite: the outbox relayed by hookd's single writer.
//!
//! Producers are other connections to the same file (an application embedding hookd, or any
//! process on the same machine sharing the file): their `BEGIN … INSERT INTO outbox … COMMIT`
//! is atomic with their own tables. The relay runs as one write job: SQLite lets one writer
//! in at a time, so a row is read, turned into a message and deleted by one transaction that
//! nobody else can interleave with. SQLite has no notifications: the relay polls.

use async_trait::async_trait;
use hookd_core::{AppId, Timestamp};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteStore;
use super::messages::insert_message;
use crate::outbox::{OutboxRow, strict_event_type, unknown_app};
use crate::{OutboxStore, RelayRules, Relayed, Route, StoreError, Wakeups};

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
}

fn relay(
    conn: &Connection,
    limit: usize,
    rules: &RelayRules,
    now: Timestamp,
) -> Result<Relayed, StoreError> {
    let mut relayed = Relayed::default();
    for row in waiting(conn, limit)? {
        // A row's writes roll back on their own when it is refused; the others' stay.
        conn.execute_batch("SAVEPOINT outbox_row")?;
        match relay_row(conn, &row, rules, now) {
            Ok(deliveries) => {
                conn.execute_batch("RELEASE outbox_row")?;
                conn.prepare_cached("DELETE FROM outbox WHERE id = ?1")?
                    .execute([row.id])?;
                relayed.messages += 1;
                relayed.deliveries += deliveries;
            }
            Err(Refusal::Row(why)) => {
                conn.execute_batch("ROLLBACK TO outbox_row; RELEASE outbox_row")?;
                conn.prepare_cached("UPDATE outbox SET error = ?2, failed_at = ?3 WHERE id = ?1")?
                    .execute(params![row.id, why, now.as_millis()])?;
                relayed.failed += 1;
            }
            Err(Refusal::Store(error)) => return Err(error),
        }
    }
    Ok(relayed)
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

/// Writes the row's message and deliveries; returns how many deliveries.
fn relay_row(
    conn: &Connection,
    row: &OutboxRow,
    rules: &RelayRules,
    now: Timestamp,
) -> Result<usize, Refusal> {
    row.check(rules).map_err(Refusal::Row)?;
    let app: Option<String> = conn
        .prepare_cached(
            "SELECT id FROM applications WHERE id = ?1 OR uid = ?1 ORDER BY id = ?1 DESC LIMIT 1",
        )?
        .query_row([&row.app], |r| r.get(0))
        .optional()?;
    let app = app.ok_or_else(|| Refusal::Row(unknown_app(&row.app)))?;
    if rules.strict_event_types {
        let archived: Option<bool> = conn
            .prepare_cached("SELECT archived FROM event_types WHERE name = ?1")?
            .query_row([&row.event_type], |r| r.get(0))
            .optional()?;
        strict_event_type(archived).map_err(Refusal::Row)?;
    }
    let message = row.message(AppId::from_stored(app), now);
    Ok(insert_message(conn, &message, &Route::Subscribers, None)?
        .created
        .deliveries)
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
    let rows = stmt.query_map([], |r| {
        let mut problem = None;
        let mut text = |i, name| -> rusqlite::Result<Option<String>> {
            Ok(utf8(r.get_ref(i)?, name).unwrap_or_else(|why| {
                problem.get_or_insert(why);
                None
            }))
        };
        let (app, event_type, payload) =
            (text(1, "app")?, text(2, "eventType")?, text(3, "payload")?);
        let (event_id, channels) = (text(4, "eventId")?, text(5, "channels")?);
        let ordering_key = text(6, "orderingKey")?;
        Ok(OutboxRow {
            id: r.get(0)?,
            app: app.unwrap_or_default(),
            event_type: event_type.unwrap_or_default(),
            payload: payload.unwrap_or_default(),
            event_id,
            ordering_key,
            problem,
            channels: None,
        }
        .with_channels_json(channels.as_deref()))
    })?;
    Ok(rows.take(limit).collect::<Result<_, _>>()?)
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
