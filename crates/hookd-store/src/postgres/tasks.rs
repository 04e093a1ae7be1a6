//! Background-task steps on PostgreSQL (`crate::sql::tasks::StepTasks`): a chunk runs in one transaction that locks its task's row
//! (`FOR UPDATE SKIP LOCKED`), so the processes sharing the database share the tasks and never
//! run two chunks of one task at once.

use std::collections::BTreeSet;

use async_trait::async_trait;
use hookd_core::{AppId, EndpointId, TaskId, Timestamp};
use sqlx::PgConnection;

use super::PgStore;
use super::publish::Deliveries;
use super::recover::{queue_next_in_order, resend_one};
use super::rows::{self, fetch, fetch_one, run, text};
use crate::sql::task_chunks::{self, Chunk, Job, Range, apps_per_chunk, stats_chunk};
use crate::sql::tasks::{self as sql, StepTasks};
use crate::sql::{Dialect, endpoints};
use crate::{BackgroundTask, ReplayFilter, StoreError, TaskStep};

#[async_trait]
impl StepTasks for PgStore {
    async fn step(&self, chunk: usize, now: Timestamp) -> Result<Option<TaskStep>, StoreError> {
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
        let task = fetch_one(&mut *tx, sql::get(&TaskId::from_stored(id)), sql::task).await?;
        let mut task = task.ok_or(StoreError::NotFound("background task"))?;
        let progress = run_chunk(&mut tx, &task, cursor.as_deref(), chunk, now).await?;
        let queued = progress.record(&mut task, now);
        run(
            &mut *tx,
            sql::record_step(&task, progress.cursor.as_deref(), now),
        )
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
    match Job::of(task, cursor) {
        Job::AppStats { range, apps } => app_stats_chunk(tx, range, apps, cursor, chunk).await,
        Job::EventTypes => event_types_chunk(tx, cursor, chunk).await,
        Job::Replay {
            app,
            endpoint,
            range,
        } => replay_chunk(tx, &app, endpoint, range, chunk, now).await,
        Job::BulkReplay {
            app,
            endpoint,
            range,
            filter,
        } => bulk_replay_chunk(tx, &app, endpoint, range, filter, chunk, now).await,
        Job::Expunge { app } => expunge_chunk(tx, &app, cursor, chunk).await,
        Job::Failed(failed) => Ok(failed),
    }
}

/// The endpoint a replay sends to, unless it was deleted.
async fn replayed_endpoint(
    tx: &mut PgConnection,
    app: &AppId,
    endpoint: &EndpointId,
) -> Result<Option<hookd_core::model::Endpoint>, StoreError> {
    fetch_one(tx, endpoints::get_by_id(app, endpoint), rows::endpoint).await
}

async fn replay_chunk(
    tx: &mut PgConnection,
    app: &AppId,
    endpoint: &EndpointId,
    range: Range<'_>,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    let Some(target) = replayed_endpoint(tx, app, endpoint).await? else {
        return Ok(Chunk::failed("endpoint: was deleted"));
    };
    let statement = sql::candidates(app, endpoint.as_str(), range, chunk);
    let candidates = fetch(&mut *tx, statement, sql::candidate).await?;
    let (scanned, cursor) = (candidates.len(), candidates.last().map(|c| c.id.clone()));
    let mut missing = Vec::new();
    for candidate in candidates {
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
    range: Range<'_>,
    filter: &ReplayFilter,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    let Some(target) = replayed_endpoint(tx, app, endpoint).await? else {
        return Ok(Chunk::failed("endpoint: was deleted"));
    };
    let statement = sql::sent_messages(app, endpoint.as_str(), range, chunk);
    let sent = fetch(&mut *tx, statement, sql::sent).await?;
    let (scanned, cursor) = (sent.len(), sent.last().map(|row| row.id.clone()));
    let mut taken = Vec::new();
    for row in sent {
        if row.taken_by(filter)? {
            taken.push((row.id, target.ordering.key_of(row.ordering_key.as_deref())));
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
    let ids = fetch(&mut *tx, sql::message_ids(app, cursor, chunk), |row| {
        text(row, 0)
    })
    .await?;
    let done = run(&mut *tx, sql::expunge(Dialect::Postgres, &ids)).await?;
    Ok(Chunk::progressed(
        ids.len(),
        chunk,
        done,
        0,
        ids.last().cloned(),
    ))
}

/// Counts the deliveries of the next applications' messages created in `[since, until)`.
async fn app_stats_chunk(
    tx: &mut PgConnection,
    range: (Timestamp, Timestamp),
    apps: Option<&[AppId]>,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let statement = sql::app_destinations(Dialect::Postgres, range, apps, cursor, limit);
    let found = fetch(tx, statement, sql::destinations).await?;
    Ok(stats_chunk(&found, limit))
}

/// Lists the event types the next applications' endpoints subscribe to.
async fn event_types_chunk(
    tx: &mut PgConnection,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let rows = fetch(tx, sql::apps_with_filters(cursor, limit), sql::app_filter).await?;
    task_chunks::event_types_chunk(&sql::app_filters(rows), limit)
}
