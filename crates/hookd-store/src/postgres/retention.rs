//! [`RetentionStore`] on PostgreSQL. A purge batch locks the messages it looks at with
//! `FOR NO KEY UPDATE SKIP LOCKED`, so the engines of several processes purge side by side without
//! waiting for each other, and re-checks at the update that no delivery became due again.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{MessageId, Timestamp};
use sqlx::AssertSqlSafe;

use super::PgStore;
use super::messages::{insert_message, set_expiry};
use crate::error::touched;
use crate::purge::{self, Candidate, Record};
use crate::{
    CreatedMessage, EXPUNGED, PurgeCursor, PurgeRequest, Purged, RetentionStore, Route, StoreError,
};

/// Rows another purger holds are left to it. `NO KEY`: the engine's attempt inserts take a key
/// share lock on their message (the foreign key), which this lock does not wait for or block.
const LOCK: &str = " FOR NO KEY UPDATE OF m SKIP LOCKED";

#[async_trait]
impl RetentionStore for PgStore {
    async fn create_expiring_message(
        &self,
        message: &Message,
        payload_expires_at: Timestamp,
    ) -> Result<CreatedMessage, StoreError> {
        let mut tx = self.pool.begin().await?;
        let created = insert_message(&mut tx, message, &Route::Subscribers).await?;
        set_expiry(&mut tx, &message.id, payload_expires_at).await?;
        tx.commit().await?;
        Ok(created)
    }

    async fn purge_batch(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        match &request.cursor {
            PurgeCursor::Records(after) => self.delete_records(request, after.as_ref()).await,
            PurgeCursor::EventIds => self.release_event_ids(request).await,
            PurgeCursor::Window(_) | PurgeCursor::Expiry(_) => self.purge_content(request).await,
        }
    }

    async fn expunge_message_content(&self, message: &Message) -> Result<(), StoreError> {
        let done = sqlx::query("UPDATE messages SET payload = NULL WHERE id = $1")
            .bind(message.id.as_str())
            .execute(&self.pool)
            .await?;
        touched(done.rows_affected(), "message")
    }

    async fn expunge_attempt_content(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE attempts SET response = $3, response_head = '' WHERE message_id = $1 AND id = $2",
        )
        .bind(message.id.as_str())
        .bind(attempt_id)
        .bind(EXPUNGED)
        .execute(&self.pool)
        .await?;
        touched(done.rows_affected(), "attempt")
    }
}

impl PgStore {
    /// Purges the content of due messages (the window's and the own expiries' walks).
    async fn purge_content(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
        let mut tx = self.pool.begin().await?;
        let candidates: Vec<Candidate> = match &request.cursor {
            PurgeCursor::Window(after) => {
                let select = purge::window_sql(["$1", "$2", "$3"]) + LOCK;
                sqlx::query_as::<_, (String, bool)>(AssertSqlSafe(select))
                    .bind(purge::window_bound(request.window_start))
                    .bind(purge::after_id(after.as_ref()))
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(|(id, busy)| Candidate {
                        id,
                        expires_at: None,
                        busy,
                    })
                    .collect()
            }
            PurgeCursor::Expiry(after) => {
                let (after_at, after_id) = purge::expiry_after(after.as_ref());
                let select = purge::expiry_sql(["$1", "$2", "$3", "$4"]) + LOCK;
                sqlx::query_as::<_, (String, i64, bool)>(AssertSqlSafe(select))
                    .bind(request.now.as_millis())
                    .bind(after_at)
                    .bind(after_id)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(|(id, at, busy)| Candidate {
                        id,
                        expires_at: Some(at),
                        busy,
                    })
                    .collect()
            }
            // Not a content walk: `purge_batch` sends these elsewhere.
            PurgeCursor::Records(_) | PurgeCursor::EventIds => Vec::new(),
        };
        let settled: Vec<&str> = candidates
            .iter()
            .filter(|c| !c.busy)
            .map(|c| c.id.as_str())
            .collect();
        // The check again, at the write: a resend may have queued a delivery since the select.
        let purged_ids: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "UPDATE messages m SET payload = NULL, purged_at = $2 WHERE m.id = ANY($1)
             AND NOT {} RETURNING m.id",
            purge::busy()
        )))
        .bind(&settled)
        .bind(request.now.as_millis())
        .fetch_all(&mut *tx)
        .await?;
        let attempts = sqlx::query("DELETE FROM attempts WHERE message_id = ANY($1)")
            .bind(&purged_ids)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Purged {
            examined: candidates.len(),
            messages: purged_ids.len(),
            attempts,
            next: purge::next_cursor(
                request,
                candidates.len(),
                candidates.last().map(Candidate::cursor),
            ),
            ..Purged::default()
        })
    }

    /// Deletes the records of purged messages created before `request.records_before`. The
    /// `eventId`s they keep taken are committed first, on their own: a publish of the same
    /// `eventId` racing the deletion then meets either the message or its spent `eventId`.
    async fn delete_records(
        &self,
        request: &PurgeRequest,
        after: Option<&MessageId>,
    ) -> Result<Purged, StoreError> {
        let Some(before) = request.records_before else {
            return Ok(Purged::default());
        };
        let records: Vec<Record> =
            sqlx::query_as::<_, (String, String, Option<String>, i64, bool)>(AssertSqlSafe(
                purge::records_sql(["$1", "$2", "$3"]),
            ))
            .bind(purge::window_bound(before))
            .bind(purge::after_id(after))
            .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|(id, app_id, event_id, created_at, busy)| Record {
                id,
                app_id,
                event_id,
                created_at,
                busy,
            })
            .collect();
        let settled: Vec<&Record> = records.iter().filter(|r| !r.busy).collect();
        let spent: Vec<&&Record> = settled
            .iter()
            .filter(|r| r.spends_event_id(request))
            .collect();
        sqlx::query(
            "INSERT INTO spent_event_ids (app_id, event_id, created_at)
             SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[])
             ON CONFLICT (app_id, event_id) DO NOTHING",
        )
        .bind(spent.iter().map(|r| r.app_id.as_str()).collect::<Vec<_>>())
        .bind(
            spent
                .iter()
                .map(|r| r.event_id.as_deref())
                .collect::<Vec<_>>(),
        )
        .bind(spent.iter().map(|r| r.created_at).collect::<Vec<_>>())
        .execute(&self.pool)
        .await?;
        let ids: Vec<&str> = settled.iter().map(|r| r.id.as_str()).collect();
        let mut tx = self.pool.begin().await?;
        // The check again, under the rows' locks: a recover may have queued a delivery since.
        let gone: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT m.id FROM messages m WHERE m.id = ANY($1) AND NOT {} FOR UPDATE OF m SKIP LOCKED",
            purge::busy()
        )))
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        let mut deleted = [0; 3];
        for (n, table) in ["attempts", "deliveries"].into_iter().enumerate() {
            deleted[n] = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE message_id = ANY($1)"
            )))
            .bind(&gone)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        deleted[2] = sqlx::query("DELETE FROM messages WHERE id = ANY($1)")
            .bind(&gone)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Purged {
            examined: records.len(),
            attempts: deleted[0],
            deliveries: deleted[1],
            records: usize::try_from(deleted[2]).unwrap_or(usize::MAX),
            next: purge::next_cursor(request, records.len(), records.last().map(Record::cursor)),
            ..Purged::default()
        })
    }

    /// Releases `eventId`s whose time has run out.
    async fn release_event_ids(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        let released = sqlx::query(AssertSqlSafe(purge::release_event_ids_sql(["$1", "$2"])))
            .bind(request.event_ids_before.as_millis())
            .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?
            .rows_affected();
        let examined = usize::try_from(released).unwrap_or(usize::MAX);
        Ok(Purged {
            examined,
            event_ids: released,
            next: purge::next_cursor(request, examined, None),
            ..Purged::default()
        })
    }
}
