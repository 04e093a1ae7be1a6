//! Purge batches on PostgreSQL (`crate::sql::retention::PurgeBatches`). A purge batch locks the messages it looks at with
//! `FOR NO KEY UPDATE SKIP LOCKED`, so the engines of several processes purge side by side without
//! waiting for each other, and re-checks at the update that no delivery became due again.

use async_trait::async_trait;
use hookd_core::MessageId;
use sqlx::{AssertSqlSafe, PgConnection, PgPool};

use super::PgStore;
use super::rows::{fetch, run};
use crate::purge::{self, Candidate, Record};
use crate::sql::retention::{self as sql, BUSY, PurgeBatches};
use crate::sql::{Dialect, Statement, sql};
use crate::{PurgeCursor, PurgeRequest, Purged, StoreError};

#[async_trait]
impl PurgeBatches for PgStore {
    async fn purge(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        match &request.cursor {
            PurgeCursor::Records(after) => self.delete_records(request, after.as_ref()).await,
            PurgeCursor::EventIds => self.release_event_ids(request).await,
            PurgeCursor::Window(after) => {
                let walk = sql::window(Dialect::Postgres, request, after.as_ref());
                self.purge_content(request, walk).await
            }
            PurgeCursor::Expiry(after) => {
                let walk = sql::expiry(Dialect::Postgres, request, after.as_ref());
                self.purge_content(request, walk).await
            }
        }
    }
}

impl PgStore {
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
        let records = fetch(
            &self.pool,
            sql::records(request, before, after),
            sql::record,
        )
        .await?;
        let settled: Vec<&Record> = records.iter().filter(|r| !r.busy).collect();
        let mut purged = Purged {
            examined: records.len(),
            next: purge::next_cursor(request, records.len(), records.last().map(Record::cursor)),
            ..Purged::default()
        };
        if settled.is_empty() {
            return Ok(purged);
        }
        let spent: Vec<&Record> = settled
            .iter()
            .copied()
            .filter(|r| r.spends_event_id(request))
            .collect();
        spend_event_ids(&self.pool, &spent).await?;
        let ids: Vec<&str> = settled.iter().map(|r| r.id.as_str()).collect();
        let mut tx = self.pool.begin().await?;
        // The check again, under the rows' locks: a recover may have queued a delivery since.
        const SETTLED: &str = sql!(
            "SELECT m.id FROM messages m WHERE m.id = ANY(?1) AND NOT ",
            BUSY,
            " FOR UPDATE OF m SKIP LOCKED"
        )
        .postgres();
        let gone: Vec<String> = sqlx::query_scalar(SETTLED)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
        purged.attempts = delete_of_messages(&mut tx, "attempts", &gone).await?;
        purged.deliveries = delete_of_messages(&mut tx, "deliveries", &gone).await?;
        let messages = sqlx::query("DELETE FROM messages WHERE id = ANY($1)")
            .bind(&gone)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        purged.records = usize::try_from(messages).unwrap_or(usize::MAX);
        Ok(purged)
    }

    /// Purges the content of the messages a walk (`walk`, which locks them) finds that have
    /// no delivery to do, in one transaction.
    async fn purge_content(
        &self,
        request: &PurgeRequest,
        walk: Statement<'_>,
    ) -> Result<Purged, StoreError> {
        let mut tx = self.pool.begin().await?;
        let candidates = fetch(&mut *tx, walk, sql::candidate).await?;
        let settled: Vec<&str> = candidates
            .iter()
            .filter(|c| !c.busy)
            .map(|c| c.id.as_str())
            .collect();
        // The check again, at the write: a resend may have queued a delivery since the select.
        const PURGE: &str = sql!(
            "UPDATE messages m SET payload = NULL, purged_at = ?2 WHERE m.id = ANY(?1) AND NOT ",
            BUSY,
            " RETURNING m.id"
        )
        .postgres();
        let purged_ids: Vec<String> = sqlx::query_scalar(PURGE)
            .bind(&settled)
            .bind(request.now.as_millis())
            .fetch_all(&mut *tx)
            .await?;
        let attempts = delete_of_messages(&mut tx, "attempts", &purged_ids).await?;
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

    /// Releases `eventId`s whose time has run out.
    async fn release_event_ids(&self, request: &PurgeRequest) -> Result<Purged, StoreError> {
        let released = run(&self.pool, sql::release_event_ids(request)).await?;
        let examined = usize::try_from(released).unwrap_or(usize::MAX);
        Ok(Purged {
            examined,
            event_ids: released,
            next: purge::next_cursor(request, examined, None),
            ..Purged::default()
        })
    }
}

/// Keeps the `eventId`s of records about to go taken, committed on their own before the
/// deletion (see `delete_records`).
async fn spend_event_ids(pool: &PgPool, spent: &[&Record]) -> Result<(), StoreError> {
    if spent.is_empty() {
        return Ok(());
    }
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
    .execute(pool)
    .await?;
    Ok(())
}

/// Deletes the rows of `table` (`attempts` or `deliveries`) of the messages `ids`.
async fn delete_of_messages(
    tx: &mut PgConnection,
    table: &str,
    ids: &[String],
) -> Result<u64, StoreError> {
    let sql = format!("DELETE FROM {table} WHERE message_id = ANY($1)");
    let done = sqlx::query(AssertSqlSafe(sql))
        .bind(ids)
        .execute(tx)
        .await?;
    Ok(done.rows_affected())
}
