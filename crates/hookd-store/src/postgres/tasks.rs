//! [`TaskStore`] on PostgreSQL: a chunk runs in one transaction that locks its task's row
//! (`FOR UPDATE SKIP LOCKED`), so the processes sharing the database share the tasks and never
//! run two chunks of one task at once.

use std::collections::BTreeSet;

use async_trait::async_trait;
use hookd_core::{AppId, EndpointId, TaskId, Timestamp};
use sqlx::PgConnection;

use super::messages::Deliveries;
use super::queue::{queue_next_in_order, resend_one};
use super::{ListQuery, Param, PgStore, rows, sql, text};
use crate::columns::ENDPOINT_COLUMNS;
use crate::json::decode_opt;
use crate::store::tasks::{
    Candidate, Chunk, SentRow, TASK_COLUMNS, TaskRow, replay_start, task_from_row,
};
use crate::{
    BackgroundTask, Page, PageRequest, ReplayFilter, StoreError, TaskFilter, TaskStep, TaskStore,
    TaskWork,
};

#[async_trait]
impl TaskStore for PgStore {
    async fn create_task(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        let (endpoint, since, until, filter) = task.work.columns();
        sqlx::query(
            "INSERT INTO background_tasks (id, app_id, kind, endpoint_id, since_ms, until_ms,
             filter, status, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
        )
        .bind(task.id.as_str())
        .bind(task.app_id.as_str())
        .bind(task.work.kind())
        .bind(endpoint)
        .bind(since)
        .bind(until)
        .bind(filter)
        .bind(task.status.as_str())
        .bind(task.created_at.as_millis())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_task(&self, id: &TaskId) -> Result<Option<BackgroundTask>, StoreError> {
        let row: Option<TaskRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM background_tasks WHERE id = $1"
        )))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(task_from_row).transpose()
    }

    async fn list_tasks(
        &self,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> Result<Page<BackgroundTask>, StoreError> {
        let select = format!("SELECT {TASK_COLUMNS} FROM background_tasks WHERE true");
        let mut query = ListQuery::new(&select, vec![]);
        if let Some(status) = filter.status {
            query.and("status = ?", text(status.as_str()));
        }
        if let Some(kind) = &filter.kind {
            query.and("kind = ?", text(kind));
        }
        if let Some(app) = &filter.app {
            query.and("app_id = ?", Param::Text(app.to_string()));
        }
        query
            .page(&self.pool, "id", !filter.oldest_first, page, |row| {
                task_from_row(sqlx::FromRow::from_row(row)?)
            })
            .await
    }

    async fn step_task(
        &self,
        chunk: usize,
        now: Timestamp,
    ) -> Result<Option<TaskStep>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let found: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT id, cursor FROM background_tasks WHERE status = 'running'
             ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some((id, cursor)) = found else {
            return Ok(None);
        };
        let row: TaskRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM background_tasks WHERE id = $1"
        )))
        .bind(&id)
        .fetch_one(&mut *tx)
        .await?;
        let mut task = task_from_row(row)?;
        let progress = match &task.work {
            TaskWork::ReplayMissing {
                endpoint,
                since,
                until,
            } => {
                let range = (*since, *until, cursor.as_deref());
                replay_chunk(&mut tx, &task.app_id, endpoint, range, chunk, now).await?
            }
            TaskWork::BulkReplay {
                endpoint,
                since,
                until,
                filter,
            } => {
                let range = (*since, *until, cursor.as_deref());
                bulk_replay_chunk(&mut tx, &task.app_id, endpoint, range, filter, chunk, now)
                    .await?
            }
            TaskWork::ExpungeAllContents => {
                expunge_chunk(&mut tx, &task.app_id, cursor.as_deref(), chunk).await?
            }
        };
        let queued = progress.record(&mut task, chunk, now);
        sqlx::query(
            "UPDATE background_tasks SET status = $2, scanned = $3, done = $4,
             cursor = coalesce($5, cursor), error = $6, updated_at = $7 WHERE id = $1",
        )
        .bind(task.id.as_str())
        .bind(task.status.as_str())
        .bind(task.scanned as i64)
        .bind(task.done as i64)
        .bind(progress.cursor)
        .bind(&task.error)
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(TaskStep { task, queued }))
    }
}

/// A replay's bounds: since, until, and the last message a chunk finished.
type Range<'a> = (Timestamp, Option<Timestamp>, Option<&'a str>);

/// A message as a replay chunk selects it (see [`Candidate`]).
type CandidateRow = (String, String, Option<String>, Option<String>, bool, bool);

async fn replay_chunk(
    tx: &mut PgConnection,
    app: &AppId,
    endpoint: &EndpointId,
    (since, until, cursor): Range<'_>,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    let target = sql(format!(
        "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.id = $1 AND e.app_id = $2"
    ))
    .bind(endpoint.as_str())
    .bind(app.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(target) = target.as_ref().map(rows::endpoint).transpose()? else {
        return Ok(Chunk::failed("endpoint: was deleted"));
    };
    let until = until.map(|until| hookd_core::MessageId::lowest_at(until).to_string());
    let candidates: Vec<CandidateRow> = sqlx::query_as(
        "SELECT m.id, m.event_type, m.channels, m.ordering_key, m.payload IS NULL,
                EXISTS (SELECT 1 FROM deliveries d
                        WHERE d.message_id = m.id AND d.endpoint_id = $3)
         FROM messages m
         WHERE m.app_id = $1 AND m.id >= $2 AND ($4::text IS NULL OR m.id < $4)
         ORDER BY m.id LIMIT $5",
    )
    .bind(app.as_str())
    .bind(replay_start(since, cursor))
    .bind(endpoint.as_str())
    .bind(until)
    .bind(chunk as i64)
    .fetch_all(&mut *tx)
    .await?;
    let (scanned, cursor) = (candidates.len(), candidates.last().map(|c| c.0.clone()));
    let mut missing = Vec::new();
    for (id, event_type, channels, ordering_key, expunged, delivered) in candidates {
        let candidate = Candidate {
            id,
            event_type,
            channels: decode_opt(channels)?,
            ordering_key,
            expunged,
            delivered,
        };
        if candidate.missing_at(&target) {
            let key = target.ordering.key_of(candidate.ordering_key.as_deref());
            missing.push((candidate.id, key));
        }
    }
    let mut deliveries = Deliveries::default();
    for (message, key) in &missing {
        deliveries.push(message, endpoint.as_str(), now, key.clone());
    }
    // Every writer takes the ordering locks first, in the order of their ids; the insert's
    // trigger then makes a delivery wait when its key has one queued.
    let keys: Vec<Option<&str>> = missing.iter().map(|(_, key)| key.as_deref()).collect();
    lock_ordering_keys(&mut *tx, endpoint, &keys).await?;
    deliveries.insert(&mut *tx).await?;
    let queued = missing.len() as u64;
    Ok(Chunk {
        scanned,
        done: queued,
        queued,
        cursor,
        failure: None,
    })
}

async fn bulk_replay_chunk(
    tx: &mut PgConnection,
    app: &AppId,
    endpoint: &EndpointId,
    (since, until, cursor): Range<'_>,
    filter: &ReplayFilter,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    let target = sql(format!(
        "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.id = $1 AND e.app_id = $2"
    ))
    .bind(endpoint.as_str())
    .bind(app.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(target) = target.as_ref().map(rows::endpoint).transpose()? else {
        return Ok(Chunk::failed("endpoint: was deleted"));
    };
    let until = until.map(|until| hookd_core::MessageId::lowest_at(until).to_string());
    let sent: Vec<SentColumns> = sqlx::query_as(
        "SELECT m.id, m.event_type, m.channels, m.tags, m.ordering_key, d.status::smallint,
                (SELECT a.response_status_code::bigint FROM attempts a
                 WHERE a.message_id = m.id AND a.endpoint_id = $3
                 ORDER BY a.id DESC LIMIT 1)
         FROM messages m JOIN deliveries d ON d.message_id = m.id AND d.endpoint_id = $3
         WHERE m.app_id = $1 AND m.id >= $2 AND ($4::text IS NULL OR m.id < $4)
           AND m.payload IS NOT NULL
         ORDER BY m.id LIMIT $5",
    )
    .bind(app.as_str())
    .bind(replay_start(since, cursor))
    .bind(endpoint.as_str())
    .bind(until)
    .bind(chunk as i64)
    .fetch_all(&mut *tx)
    .await?;
    let (scanned, cursor) = (sent.len(), sent.last().map(|row| row.0.clone()));
    let mut taken = Vec::new();
    for (id, event_type, channels, tags, ordering_key, status, last_code) in sent {
        let row = SentRow {
            id,
            event_type,
            channels,
            tags,
            status,
            last_code,
        };
        if row.taken_by(filter)? {
            taken.push((row.id, target.ordering.key_of(ordering_key.as_deref())));
        }
    }
    // The ordering locks first, in the order of their ids, as every writer takes them.
    let keys: Vec<Option<&str>> = taken.iter().map(|(_, key)| key.as_deref()).collect();
    lock_ordering_keys(&mut *tx, endpoint, &keys).await?;
    let (mut queued, mut waiting) = (0, BTreeSet::new());
    for (message, _) in &taken {
        if let Some(key) = resend_one(&mut *tx, message, endpoint, now).await? {
            waiting.extend(key);
            queued += 1;
        }
    }
    let waiting: Vec<String> = waiting.into_iter().collect();
    queue_next_in_order(&mut *tx, endpoint, &waiting, now).await?;
    Ok(Chunk {
        scanned,
        done: queued,
        queued,
        cursor,
        failure: None,
    })
}

/// A message sent to the endpoint before, as a bulk replay selects it (see [`SentRow`]), with
/// its ordering key.
type SentColumns = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    i16,
    Option<i64>,
);

/// Takes the ordering locks of `endpoint`'s deliveries under `keys` (those with one), in the
/// order of their ids.
async fn lock_ordering_keys(
    tx: &mut PgConnection,
    endpoint: &EndpointId,
    keys: &[Option<&str>],
) -> Result<(), StoreError> {
    sqlx::query(
        "SELECT lock_ordering_keys(array_fill($1::text, ARRAY[cardinality($2::text[])]), $2)",
    )
    .bind(endpoint.as_str())
    .bind(keys)
    .execute(tx)
    .await?;
    Ok(())
}

async fn expunge_chunk(
    tx: &mut PgConnection,
    app: &AppId,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM messages WHERE app_id = $1 AND id > $2 ORDER BY id LIMIT $3",
    )
    .bind(app.as_str())
    .bind(cursor.unwrap_or(""))
    .bind(chunk as i64)
    .fetch_all(&mut *tx)
    .await?;
    let expunged = sqlx::query(
        "UPDATE messages SET payload = NULL WHERE id = ANY($1) AND payload IS NOT NULL",
    )
    .bind(&ids)
    .execute(&mut *tx)
    .await?;
    Ok(Chunk {
        scanned: ids.len(),
        done: expunged.rows_affected(),
        queued: 0,
        cursor: ids.last().cloned(),
        failure: None,
    })
}
