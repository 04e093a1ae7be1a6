//! [`RetentionStore`] on both databases: expunging is a shared statement; running a purge
//! batch is each backend's own ([`PurgeBatches`]), which
//! take the purge's walks written here (see [`crate::purge`]).
//!
//! Each walk reads one partial index holding only the messages not purged yet, in due order,
//! from the cursor on, and says for each message whether a delivery of it is still to do.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{MessageId, Timestamp};

use super::rows::{Columns, Decoded, int, text};
use super::{Database, Dialect, Sql, Statement, args, sql};
use crate::error::touched;
use crate::purge::{self, Candidate, Record};
use crate::{EXPUNGED, PurgeRequest, Purged, RetentionStore, StoreError};

/// What [`RetentionStore`] asks of each backend itself: a purge batch's transaction.
#[async_trait]
pub trait PurgeBatches: Database {
    /// [`RetentionStore::purge_batch`].
    async fn purge(&self, request: &PurgeRequest) -> Result<Purged, StoreError>;
}

#[async_trait]
impl<D: PurgeBatches> RetentionStore for D {
    async fn purge_batch(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        self.purge(request).await
    }

    async fn expunge_message_content(&self, message: &Message) -> Result<(), StoreError> {
        touched(self.write(expunge_message(message), None).await?, "message")
    }

    async fn expunge_attempt_content(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<(), StoreError> {
        let expunged = self.write(expunge_attempt(message, attempt_id), None);
        touched(expunged.await?, "attempt")
    }
}

/// Whether a delivery of `m` is still to do: pending (1) or in flight (3).
pub const BUSY: &str =
    "EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.id AND d.status IN (1, 3))";

/// On PostgreSQL, rows another purger holds are left to it. `NO KEY`: writers of deliveries
/// take a key share lock on their message (`lock_parents`), which this lock does not wait for
/// or block. SQLite's one writer needs no lock.
const LOCK: &str = " FOR NO KEY UPDATE OF m SKIP LOCKED";

fn expunge_message(message: &Message) -> Statement<'_> {
    let sql = sql!("UPDATE messages SET payload = NULL WHERE id = ?1");
    Statement::new(sql, args![message.id.as_str()])
}

fn expunge_attempt<'a>(message: &'a Message, attempt: &'a str) -> Statement<'a> {
    let sql = sql!(
        "UPDATE attempts SET response = ?3, response_head = '' WHERE message_id = ?1 AND id = ?2"
    );
    Statement::new(sql, args![message.id.as_str(), attempt, EXPUNGED])
}

/// The statement of `dialect`: `locked` on PostgreSQL, `plain` on SQLite.
fn locked_on_postgres(dialect: Dialect, plain: Sql, locked: Sql) -> Sql {
    match dialect {
        Dialect::Sqlite => plain.only(Dialect::Sqlite),
        Dialect::Postgres => locked.only(Dialect::Postgres),
    }
}

/// The due messages on the server's window after `after`: [`candidate`].
pub fn window(
    dialect: Dialect,
    request: &PurgeRequest,
    after: Option<&MessageId>,
) -> Statement<'static> {
    const SELECT: &str = "SELECT m.id, CAST(NULL AS BIGINT), ";
    const WHERE: &str = " FROM messages m
         WHERE m.purged_at IS NULL AND m.payload_expires_at IS NULL AND m.id < ?1 AND m.id > ?2
         ORDER BY m.id LIMIT ?3";
    let sql = locked_on_postgres(
        dialect,
        sql!(SELECT, BUSY, WHERE),
        sql!(SELECT, BUSY, WHERE, LOCK),
    );
    let args = args![
        purge::created_before(request.window_start),
        purge::after_id(after),
        purge::limit(request),
    ];
    Statement::new(sql, args)
}

/// The messages past their own expiry after `after`: [`candidate`].
pub fn expiry(
    dialect: Dialect,
    request: &PurgeRequest,
    after: Option<&(Timestamp, MessageId)>,
) -> Statement<'static> {
    const SELECT: &str = "SELECT m.id, m.payload_expires_at, ";
    const WHERE: &str = " FROM messages m
         WHERE m.purged_at IS NULL AND m.payload_expires_at IS NOT NULL
         AND m.payload_expires_at <= ?1 AND (m.payload_expires_at, m.id) > (?2, ?3)
         ORDER BY m.payload_expires_at, m.id LIMIT ?4";
    let sql = locked_on_postgres(
        dialect,
        sql!(SELECT, BUSY, WHERE),
        sql!(SELECT, BUSY, WHERE, LOCK),
    );
    let (after_at, after_id) = purge::expiry_after(after);
    let args = args![request.now, after_at, after_id, purge::limit(request)];
    Statement::new(sql, args)
}

/// A row of [`window`] or [`expiry`].
pub fn candidate(row: &dyn Columns) -> Decoded<Candidate> {
    Ok(Candidate {
        id: text(row, 0)?,
        expires_at: row.opt_i64(1)?,
        busy: row.bool(2)?,
    })
}

/// Purged messages created before `before`, after `after`: [`record`].
pub fn records(
    request: &PurgeRequest,
    before: Timestamp,
    after: Option<&MessageId>,
) -> Statement<'static> {
    let sql = sql!(
        "SELECT m.id, m.app_id, m.event_id, m.created_at, ",
        BUSY,
        " FROM messages m WHERE m.purged_at IS NOT NULL AND m.id < ?1 AND m.id > ?2
         ORDER BY m.id LIMIT ?3"
    );
    let args = args![
        purge::created_before(before),
        purge::after_id(after),
        purge::limit(request),
    ];
    Statement::new(sql, args)
}

/// A row of [`records`].
pub fn record(row: &dyn Columns) -> Decoded<Record> {
    Ok(Record {
        id: text(row, 0)?,
        app_id: text(row, 1)?,
        event_id: row.opt_text(2)?,
        created_at: int(row, 3)?,
        busy: row.bool(4)?,
    })
}

/// Releases the oldest `eventId`s of deleted records created before the request's bound.
pub fn release_event_ids(request: &PurgeRequest) -> Statement<'static> {
    let sql = sql!(
        "DELETE FROM spent_event_ids WHERE (app_id, event_id) IN (
             SELECT app_id, event_id FROM spent_event_ids WHERE created_at < ?1
             ORDER BY created_at LIMIT ?2)"
    );
    Statement::new(sql, args![request.event_ids_before, purge::limit(request)])
}

#[cfg(test)]
mod tests {
    use hookd_core::model::DeliveryStatus;

    #[test]
    fn busy_names_the_statuses_still_to_do() {
        let (pending, sending) = (
            DeliveryStatus::Pending.code(),
            DeliveryStatus::Sending.code(),
        );
        assert!(super::BUSY.ends_with(&format!("IN ({pending}, {sending}))")));
    }
}
