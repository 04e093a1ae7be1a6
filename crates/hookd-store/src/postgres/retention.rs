//! [`RetentionStore`] on PostgreSQL. A purge batch locks the messages it looks at with
//! `FOR NO KEY UPDATE SKIP LOCKED`, so the engines of several processes purge side by side without
//! waiting for each other, and re-checks at the update that no delivery became due again.

use async_trait::async_trait;
use hookd_core::Timestamp;
use hookd_core::model::Message;
use sqlx::AssertSqlSafe;

use super::PgStore;
use super::messages::insert_message;
use crate::error::touched;
use crate::purge::{self, Candidate};
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
        sqlx::query("UPDATE messages SET payload_expires_at = $2 WHERE id = $1")
            .bind(message.id.as_str())
            .bind(payload_expires_at.as_millis())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(created)
    }

    async fn purge_batch(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
        let mut tx = self.pool.begin().await?;
        let candidates: Vec<Candidate> = match &request.cursor {
            PurgeCursor::Window(after) => {
                let select = purge::window_sql(["$1", "$2", "$3"]) + LOCK;
                sqlx::query_as::<_, (String, bool)>(AssertSqlSafe(select))
                    .bind(purge::window_bound(request.window_start))
                    .bind(purge::window_after(after.as_ref()))
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
                &request.cursor,
                candidates.len(),
                request.limit,
                candidates.last().map(Candidate::cursor),
            ),
        })
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
