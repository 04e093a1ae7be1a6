//! [`RetentionStore`] on SQLite. Each purge batch is one write job: short, so the writer's
//! group commits (and the deliveries in them) never wait long behind it.

use async_trait::async_trait;
use hookd_core::Timestamp;
use hookd_core::model::Message;
use rusqlite::{Connection, params};

use super::SqliteStore;
use super::messages::insert_message;
use crate::error::touched;
use crate::purge::{self, Candidate};
use crate::{
    CreatedMessage, EXPUNGED, PurgeCursor, PurgeRequest, Purged, RetentionStore, Route, StoreError,
};

#[async_trait]
impl RetentionStore for SqliteStore {
    async fn create_expiring_message(
        &self,
        message: &Message,
        payload_expires_at: Timestamp,
    ) -> Result<CreatedMessage, StoreError> {
        let message = message.clone();
        self.publish(move |conn, handoff| {
            let written = insert_message(conn, &message, &Route::Subscribers, handoff)?;
            conn.prepare_cached("UPDATE messages SET payload_expires_at = ?2 WHERE id = ?1")?
                .execute(params![message.id.as_str(), payload_expires_at.as_millis()])?;
            Ok(written)
        })
        .await
    }

    async fn purge_batch(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        let request = request.clone();
        self.db.write(move |conn| purge(conn, &request)).await
    }

    async fn expunge_message_content(&self, message: &Message) -> Result<(), StoreError> {
        let id = message.id.clone();
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached("UPDATE messages SET payload = NULL WHERE id = ?1")?
                    .execute([id.as_str()])?;
                touched(rows as u64, "message")
            })
            .await
    }

    async fn expunge_attempt_content(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<(), StoreError> {
        let (message_id, attempt_id) = (message.id.clone(), attempt_id.to_owned());
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        "UPDATE attempts SET response = ?3, response_head = ''
                         WHERE message_id = ?1 AND id = ?2",
                    )?
                    .execute(params![message_id.as_str(), attempt_id, EXPUNGED])?;
                touched(rows as u64, "attempt")
            })
            .await
    }
}

fn purge(conn: &Connection, request: &PurgeRequest) -> Result<Purged, StoreError> {
    let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
    let candidates = match &request.cursor {
        PurgeCursor::Window(after) => conn
            .prepare_cached(&purge::window_sql(["?1", "?2", "?3"]))?
            .query_map(
                params![
                    purge::window_bound(request.window_start),
                    purge::window_after(after.as_ref()),
                    limit
                ],
                |row| {
                    Ok(Candidate {
                        id: row.get(0)?,
                        expires_at: None,
                        busy: row.get(1)?,
                    })
                },
            )?
            .collect::<Result<Vec<_>, _>>()?,
        PurgeCursor::Expiry(after) => {
            let (after_at, after_id) = purge::expiry_after(after.as_ref());
            conn.prepare_cached(&purge::expiry_sql(["?1", "?2", "?3", "?4"]))?
                .query_map(
                    params![request.now.as_millis(), after_at, after_id, limit],
                    |row| {
                        Ok(Candidate {
                            id: row.get(0)?,
                            expires_at: row.get(1)?,
                            busy: row.get(2)?,
                        })
                    },
                )?
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    let mut purged = Purged {
        examined: candidates.len(),
        ..Purged::default()
    };
    for candidate in candidates.iter().filter(|c| !c.busy) {
        conn.prepare_cached("UPDATE messages SET payload = NULL, purged_at = ?2 WHERE id = ?1")?
            .execute(params![candidate.id, request.now.as_millis()])?;
        let attempts = conn
            .prepare_cached("DELETE FROM attempts WHERE message_id = ?1")?
            .execute([&candidate.id])?;
        purged.messages += 1;
        purged.attempts += attempts as u64;
    }
    purged.next = purge::next_cursor(
        &request.cursor,
        purged.examined,
        request.limit,
        candidates.last().map(Candidate::cursor),
    );
    Ok(purged)
}
