//! Background-task steps on SQLite (`crate::sql::tasks::StepTasks`): each chunk of a background task is one write job of the single
//! writer, so publishes queued behind it wait for one chunk, never for the whole task.

use std::collections::BTreeSet;

use async_trait::async_trait;
use hookd_core::model::DeliveryStatus;
use hookd_core::{AppId, EndpointId, Timestamp};
use rusqlite::{Connection, params};

use super::SqliteStore;
use super::publish::INSERT_DELIVERY;
use super::recover::{queue_next_in_order, resend_one};
use super::rows::{self, fetch, fetch_one, run, text};
use crate::sql::task_chunks::{self, Chunk, Job, Range, TASK_COLUMNS, apps_per_chunk, stats_chunk};
use crate::sql::tasks::{self as sql, StepTasks};
use crate::sql::{Dialect, Sql, Statement, args, endpoints, sql};
use crate::{BackgroundTask, ReplayFilter, StoreError, TaskStep};

#[async_trait]
impl StepTasks for SqliteStore {
    async fn step(&self, chunk: usize, now: Timestamp) -> Result<Option<TaskStep>, StoreError> {
        // A read first: the runner looks every second, and most looks find no task.
        let running: bool = self
            .db
            .read(|conn| {
                let sql = "SELECT EXISTS (SELECT 1 FROM background_tasks WHERE status = 'running')";
                Ok(conn.query_row(sql, [], |row| row.get(0))?)
            })
            .await?;
        if !running {
            return Ok(None);
        }
        self.db.write(move |conn| step(conn, chunk, now)).await
    }
}

/// Runs one chunk of the oldest running task, and records how far it got.
fn step(conn: &Connection, chunk: usize, now: Timestamp) -> Result<Option<TaskStep>, StoreError> {
    const OLDEST_RUNNING: Sql = sql!(
        "SELECT ",
        TASK_COLUMNS,
        ", cursor FROM background_tasks WHERE status = 'running' ORDER BY id LIMIT 1"
    );
    let oldest = Statement::new(OLDEST_RUNNING, args![]);
    let found = fetch_one(conn, &oldest, |row| {
        Ok((sql::task(row)?, row.opt_text(14)?))
    })?;
    let Some((mut task, cursor)) = found else {
        return Ok(None);
    };
    let progress = run_chunk(conn, &task, cursor.as_deref(), chunk, now)?;
    let queued = progress.record(&mut task, now);
    run(
        conn,
        &sql::record_step(&task, progress.cursor.as_deref(), now),
    )?;
    Ok(Some(TaskStep { task, queued }))
}

/// Runs one chunk of `task`, resuming after `cursor`.
fn run_chunk(
    conn: &Connection,
    task: &BackgroundTask,
    cursor: Option<&str>,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    match Job::of(task, cursor) {
        Job::AppStats { range, apps } => app_stats_chunk(conn, range, apps, cursor, chunk),
        Job::EventTypes => event_types_chunk(conn, cursor, chunk),
        Job::Replay {
            app,
            endpoint,
            range,
        } => replay_chunk(conn, &app, endpoint, range, chunk, now),
        Job::BulkReplay {
            app,
            endpoint,
            range,
            filter,
        } => bulk_replay_chunk(conn, &app, endpoint, range, filter, chunk, now),
        Job::Expunge { app } => expunge_chunk(conn, &app, cursor, chunk),
        Job::Failed(failed) => Ok(failed),
    }
}

/// The endpoint a replay sends to, unless it was deleted.
fn replayed_endpoint(
    conn: &Connection,
    app: &AppId,
    endpoint: &EndpointId,
) -> Result<Option<hookd_core::model::Endpoint>, StoreError> {
    fetch_one(conn, &endpoints::get_by_id(app, endpoint), rows::endpoint)
}

fn replay_chunk(
    conn: &Connection,
    app: &AppId,
    endpoint: &EndpointId,
    range: Range<'_>,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    let Some(target) = replayed_endpoint(conn, app, endpoint)? else {
        return Ok(Chunk::failed("endpoint: was deleted"));
    };
    let candidates = fetch(
        conn,
        &sql::candidates(app, endpoint.as_str(), range, chunk),
        sql::candidate,
    )?;
    let mut insert = conn.prepare_cached(INSERT_DELIVERY)?;
    let (mut queued, mut keys) = (0, BTreeSet::new());
    let cursor = candidates.last().map(|c| c.id.clone());
    let scanned = candidates.len();
    for candidate in candidates {
        if !candidate.missing_at(&target) {
            continue;
        }
        // Keyed ones wait; each key's oldest is queued below, as recover does.
        let key = target.ordering.key_of(candidate.ordering_key.as_deref());
        let due = key.is_none().then_some(now.as_millis());
        insert.execute(params![
            candidate.id,
            endpoint.as_str(),
            DeliveryStatus::Pending.code(),
            due,
            now.as_millis(),
            key,
        ])?;
        keys.extend(key);
        queued += 1;
    }
    for key in &keys {
        queue_next_in_order(conn, endpoint, key, now)?;
    }
    Ok(Chunk::progressed(scanned, chunk, queued, queued, cursor))
}

fn bulk_replay_chunk(
    conn: &Connection,
    app: &AppId,
    endpoint: &EndpointId,
    range: Range<'_>,
    filter: &ReplayFilter,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    if replayed_endpoint(conn, app, endpoint)?.is_none() {
        return Ok(Chunk::failed("endpoint: was deleted"));
    }
    let sent = fetch(
        conn,
        &sql::sent_messages(app, endpoint.as_str(), range, chunk),
        sql::sent,
    )?;
    let (scanned, cursor) = (sent.len(), sent.last().map(|row| row.id.clone()));
    let (mut queued, mut keys) = (0, BTreeSet::new());
    for row in sent {
        if !row.taken_by(filter)? {
            continue;
        }
        let message = hookd_core::MessageId::from_stored(row.id);
        if let Some(key) = resend_one(conn, &message, endpoint, now)? {
            keys.extend(key);
            queued += 1;
        }
    }
    for key in &keys {
        queue_next_in_order(conn, endpoint, key, now)?;
    }
    Ok(Chunk::progressed(scanned, chunk, queued, queued, cursor))
}

fn expunge_chunk(
    conn: &Connection,
    app: &AppId,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let ids = fetch(conn, &sql::message_ids(app, cursor, chunk), |row| {
        text(row, 0)
    })?;
    let done = run(conn, &sql::expunge(Dialect::Sqlite, &ids))? as u64;
    Ok(Chunk::progressed(
        ids.len(),
        chunk,
        done,
        0,
        ids.last().cloned(),
    ))
}

/// Counts the deliveries of the next applications' messages created in `[since, until)`.
fn app_stats_chunk(
    conn: &Connection,
    range: (Timestamp, Timestamp),
    apps: Option<&[AppId]>,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let statement = sql::app_destinations(Dialect::Sqlite, range, apps, cursor, limit);
    let found = fetch(conn, &statement, sql::destinations)?;
    Ok(stats_chunk(&found, limit))
}

/// Lists the event types the next applications' endpoints subscribe to.
fn event_types_chunk(
    conn: &Connection,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let rows = fetch(
        conn,
        &sql::apps_with_filters(cursor, limit),
        sql::app_filter,
    )?;
    task_chunks::event_types_chunk(&sql::app_filters(rows), limit)
}
