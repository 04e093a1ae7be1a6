//! Purge batches on SQLite (`crate::sql::retention::PurgeBatches`). Each purge batch is one write job: short, so the writer's
//! group commits (and the deliveries in them) never wait long behind it.

use async_trait::async_trait;
use hookd_core::MessageId;
use rusqlite::{Connection, params};

use super::SqliteStore;
use super::rows::{fetch, run};
use crate::purge::{self, Candidate, Record};
use crate::sql::Dialect;
use crate::sql::retention::{self as sql, PurgeBatches};
use crate::{PurgeCursor, PurgeRequest, Purged, StoreError};

#[async_trait]
impl PurgeBatches for SqliteStore {
    async fn purge(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        let request = request.clone();
        self.db.write(move |conn| purge(conn, &request)).await
    }
}

fn purge(conn: &Connection, request: &PurgeRequest) -> Result<Purged, StoreError> {
    let candidates = match &request.cursor {
        PurgeCursor::Window(after) => sql::window(Dialect::Sqlite, request, after.as_ref()),
        PurgeCursor::Expiry(after) => sql::expiry(Dialect::Sqlite, request, after.as_ref()),
        PurgeCursor::Records(after) => return delete_records(conn, request, after.as_ref()),
        PurgeCursor::EventIds => return release_event_ids(conn, request),
    };
    purge_content(conn, request, &fetch(conn, &candidates, sql::candidate)?)
}

/// Purges the content of the walk's `candidates` that have no delivery to do.
fn purge_content(
    conn: &Connection,
    request: &PurgeRequest,
    candidates: &[Candidate],
) -> Result<Purged, StoreError> {
    let mut purged = Purged {
        examined: candidates.len(),
        ..Purged::default()
    };
    for candidate in candidates.iter().filter(|c| !c.busy) {
        conn.prepare_cached("UPDATE messages SET payload = NULL, purged_at = ?2 WHERE id = ?1")?
            .execute(params![candidate.id, request.now.as_millis()])?;
        purged.messages += 1;
        purged.attempts += delete_attempts(conn, &candidate.id)?;
    }
    purged.next = purge::next_cursor(
        request,
        purged.examined,
        candidates.last().map(Candidate::cursor),
    );
    Ok(purged)
}

/// Deletes the records of purged messages created before `request.records_before`.
fn delete_records(
    conn: &Connection,
    request: &PurgeRequest,
    after: Option<&MessageId>,
) -> Result<Purged, StoreError> {
    let Some(before) = request.records_before else {
        return Ok(Purged::default());
    };
    let records = fetch(conn, &sql::records(request, before, after), sql::record)?;
    let mut purged = Purged {
        examined: records.len(),
        ..Purged::default()
    };
    for record in records.iter().filter(|r| !r.busy) {
        if record.spends_event_id(request) {
            conn.prepare_cached(
                "INSERT INTO spent_event_ids (app_id, event_id, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (app_id, event_id) DO NOTHING",
            )?
            .execute(params![record.app_id, record.event_id, record.created_at])?;
        }
        purged.attempts += delete_attempts(conn, &record.id)?;
        purged.deliveries += conn
            .prepare_cached("DELETE FROM deliveries WHERE message_id = ?1")?
            .execute([&record.id])? as u64;
        conn.prepare_cached("DELETE FROM messages WHERE id = ?1")?
            .execute([&record.id])?;
        purged.records += 1;
    }
    purged.next = purge::next_cursor(request, purged.examined, records.last().map(Record::cursor));
    Ok(purged)
}

fn release_event_ids(conn: &Connection, request: &PurgeRequest) -> Result<Purged, StoreError> {
    let released = run(conn, &sql::release_event_ids(request))?;
    Ok(Purged {
        examined: released,
        event_ids: released as u64,
        next: purge::next_cursor(request, released, None),
        ..Purged::default()
    })
}

/// Deletes a message's attempts (a purged message may have some again: a recover after the
/// purge makes attempts that fail for want of the payload).
fn delete_attempts(conn: &Connection, message_id: &str) -> Result<u64, StoreError> {
    let deleted = conn
        .prepare_cached("DELETE FROM attempts WHERE message_id = ?1")?
        .execute([message_id])?;
    Ok(deleted as u64)
}
