//! [`TaskStore`] on PostgreSQL: a chunk runs in one transaction that locks its task's row
//! (`FOR UPDATE SKIP LOCKED`), so the processes sharing the database share the tasks and never
//! run two chunks of one task at once.

use std::collections::BTreeSet;

use async_trait::async_trait;
use hookd_core::{AppId, EndpointId, MessageId, TaskId, Timestamp};
use sqlx::PgConnection;

use super::messages::Deliveries;
use super::queue::{queue_next_in_order, resend_one};
use super::{ListQuery, Param, PgStore, rows, sql, text};
use crate::columns::ENDPOINT_COLUMNS;
use crate::json::decode_opt;
use crate::store::tasks::{
    Candidate, Chunk, Range, SentRow, TASK_COLUMNS, TaskRow, app_of, app_stats, apps_per_chunk,
    event_type_line, replay_start, results_json, task_from_row,
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
        .bind(task.app_id.as_ref().map(AppId::as_str))
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
        let progress = run_chunk(&mut tx, &task, cursor.as_deref(), chunk, now).await?;
        let queued = progress.record(&mut task, now);
        sqlx::query(
            "UPDATE background_tasks SET status = $2, scanned = $3, done = $4,
             cursor = coalesce($5, cursor), error = $6, updated_at = $7, result = $8
             WHERE id = $1",
        )
        .bind(task.id.as_str())
        .bind(task.status.as_str())
        .bind(task.scanned as i64)
        .bind(task.done as i64)
        .bind(progress.cursor)
        .bind(&task.error)
        .bind(now.as_millis())
        .bind(results_json(&task))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(TaskStep { task, queued }))
    }
}

/// Runs one chunk of `task`, resuming after `cursor`.
async fn run_chunk(
    tx: &mut PgConnection,
    task: &BackgroundTask,
    cursor: Option<&str>,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    let app = app_of(task);
    match &task.work {
        TaskWork::AppStats { since, until, apps } => {
            app_stats_chunk(tx, (*since, *until), apps.as_deref(), cursor, chunk).await
        }
        TaskWork::EventTypeAggregate => event_types_chunk(tx, cursor, chunk).await,
        TaskWork::ReplayMissing {
            endpoint,
            since,
            until,
        } => match app {
            Ok(app) => {
                let range = (*since, *until, cursor);
                replay_chunk(tx, &app, endpoint, range, chunk, now).await
            }
            Err(failed) => Ok(failed),
        },
        TaskWork::BulkReplay {
            endpoint,
            since,
            until,
            filter,
        } => match app {
            Ok(app) => {
                let range = (*since, *until, cursor);
                bulk_replay_chunk(tx, &app, endpoint, range, filter, chunk, now).await
            }
            Err(failed) => Ok(failed),
        },
        TaskWork::ExpungeAllContents => match app {
            Ok(app) => expunge_chunk(tx, &app, cursor, chunk).await,
            Err(failed) => Ok(failed),
        },
    }
}

/// The endpoint a replay sends to, unless it was deleted.
async fn replayed_endpoint(
    tx: &mut PgConnection,
    app: &AppId,
    endpoint: &EndpointId,
) -> Result<Option<hookd_core::model::Endpoint>, StoreError> {
    let found = sql(format!(
        "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.id = $1 AND e.app_id = $2"
    ))
    .bind(endpoint.as_str())
    .bind(app.as_str())
    .fetch_optional(tx)
    .await?;
    found.as_ref().map(rows::endpoint).transpose()
}

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
    let Some(target) = replayed_endpoint(tx, app, endpoint).await? else {
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
    Ok(Chunk::progressed(scanned, chunk, queued, queued, cursor))
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
    let Some(target) = replayed_endpoint(tx, app, endpoint).await? else {
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
    Ok(Chunk::progressed(scanned, chunk, queued, queued, cursor))
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
    Ok(Chunk::progressed(
        ids.len(),
        chunk,
        expunged.rows_affected(),
        0,
        ids.last().cloned(),
    ))
}

/// Counts the deliveries of the next applications' messages created in `[since, until)`.
async fn app_stats_chunk(
    tx: &mut PgConnection,
    (since, until): (Timestamp, Timestamp),
    apps: Option<&[AppId]>,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let apps: Option<Vec<&str>> = apps.map(|apps| apps.iter().map(AppId::as_str).collect());
    let (lo, hi) = (MessageId::lowest_at(since), MessageId::lowest_at(until));
    let found: Vec<(String, Option<String>, i64)> = sqlx::query_as(
        "SELECT a.id, a.uid,
                (SELECT count(*) FROM messages m JOIN deliveries d ON d.message_id = m.id
                 WHERE m.app_id = a.id AND m.id >= $4 AND m.id < $5)
         FROM applications a
         WHERE a.id > $1 AND ($2::text[] IS NULL OR a.id = ANY($2))
         ORDER BY a.id LIMIT $3",
    )
    .bind(cursor.unwrap_or(""))
    .bind(apps)
    .bind(limit as i64)
    .bind(lo.as_str())
    .bind(hi.as_str())
    .fetch_all(&mut *tx)
    .await?;
    let total = found.iter().map(|(_, _, n)| n.unsigned_abs()).sum();
    let results = found
        .iter()
        .map(|(id, uid, n)| app_stats(id, uid.as_deref(), *n))
        .collect();
    let cursor = found.last().map(|(id, _, _)| id.clone());
    Ok(Chunk {
        results,
        ..Chunk::progressed(found.len(), limit, total, 0, cursor)
    })
}

/// Lists the event types the next applications' endpoints subscribe to.
async fn event_types_chunk(
    tx: &mut PgConnection,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let found: Vec<(String, Vec<Option<String>>)> = sqlx::query_as(
        "SELECT a.id, coalesce(array_agg(e.event_types) FILTER (WHERE e.id IS NOT NULL), '{}')
         FROM (SELECT id FROM applications WHERE id > $1 ORDER BY id LIMIT $2) a
         LEFT JOIN endpoints e ON e.app_id = a.id
         GROUP BY a.id ORDER BY a.id",
    )
    .bind(cursor.unwrap_or(""))
    .bind(limit as i64)
    .fetch_all(&mut *tx)
    .await?;
    let results = found
        .iter()
        .map(|(id, filters)| event_type_line(id, filters))
        .collect::<Result<_, _>>()?;
    let cursor = found.last().map(|(id, _)| id.clone());
    Ok(Chunk {
        results,
        ..Chunk::progressed(found.len(), limit, 0, 0, cursor)
    })
}
