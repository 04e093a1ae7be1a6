//! [`TaskStore`] on SQLite: each chunk of a background task is one write job of the single
//! writer, so publishes queued behind it wait for one chunk, never for the whole task.

use std::collections::BTreeSet;

use async_trait::async_trait;
use hookd_core::model::DeliveryStatus;
use hookd_core::{AppId, EndpointId, MessageId, TaskId, Timestamp};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::queue::{queue_next_in_order, resend_one};
use super::rows::{self, collect};
use super::{ListQuery, SqliteStore, text};
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
impl TaskStore for SqliteStore {
    async fn create_task(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        let task = task.clone();
        self.db
            .write(move |conn| {
                let (endpoint, since, until, filter) = task.work.columns();
                conn.prepare_cached(
                    "INSERT INTO background_tasks (id, app_id, kind, endpoint_id, since_ms,
                     until_ms, filter, status, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                )?
                .execute(params![
                    task.id.as_str(),
                    task.app_id.as_ref().map(AppId::as_str),
                    task.work.kind(),
                    endpoint,
                    since,
                    until,
                    filter,
                    task.status.as_str(),
                    task.created_at.as_millis(),
                ])?;
                Ok(())
            })
            .await
    }

    async fn get_task(&self, id: &TaskId) -> Result<Option<BackgroundTask>, StoreError> {
        let id = id.clone();
        self.db
            .read(move |conn| {
                let sql = format!("SELECT {TASK_COLUMNS} FROM background_tasks WHERE id = ?1");
                Ok(collect(conn, &sql, [id.as_str()], task)?.pop())
            })
            .await
    }

    async fn list_tasks(
        &self,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> Result<Page<BackgroundTask>, StoreError> {
        let (filter, page) = (filter.clone(), page.clone());
        self.db
            .read(move |conn| {
                let select = format!("SELECT {TASK_COLUMNS} FROM background_tasks WHERE 1 = 1");
                let mut query = ListQuery::new(&select, vec![]);
                if let Some(status) = filter.status {
                    query.and("status = ?", text(status.as_str()));
                }
                if let Some(kind) = &filter.kind {
                    query.and("kind = ?", text(kind));
                }
                if let Some(app) = &filter.app {
                    query.and("app_id = ?", Value::Text(app.to_string()));
                }
                query.page(conn, "id", !filter.oldest_first, &page, task)
            })
            .await
    }

    async fn step_task(
        &self,
        chunk: usize,
        now: Timestamp,
    ) -> Result<Option<TaskStep>, StoreError> {
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

fn task(row: &Row<'_>) -> rows::Decoded<BackgroundTask> {
    let columns: TaskRow = (
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
        row.get(10)?,
        row.get(11)?,
        row.get(12)?,
        row.get(13)?,
    );
    task_from_row(columns)
}

/// Runs one chunk of the oldest running task, and records how far it got.
fn step(conn: &Connection, chunk: usize, now: Timestamp) -> Result<Option<TaskStep>, StoreError> {
    let sql = format!(
        "SELECT {TASK_COLUMNS}, cursor FROM background_tasks WHERE status = 'running'
         ORDER BY id LIMIT 1"
    );
    let found = conn
        .prepare_cached(&sql)?
        .query_row([], |row| Ok((task(row), row.get::<_, Option<String>>(14)?)))
        .optional()?;
    let Some((task, cursor)) = found else {
        return Ok(None);
    };
    let mut task = task?;
    let progress = run_chunk(conn, &task, cursor.as_deref(), chunk, now)?;
    let queued = progress.record(&mut task, now);
    conn.prepare_cached(
        "UPDATE background_tasks SET status = ?2, scanned = ?3, done = ?4, cursor = ?5,
         error = ?6, updated_at = ?7, result = ?8 WHERE id = ?1",
    )?
    .execute(params![
        task.id.as_str(),
        task.status.as_str(),
        task.scanned as i64,
        task.done as i64,
        progress.cursor.or(cursor),
        task.error,
        now.as_millis(),
        results_json(&task),
    ])?;
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
    let app = app_of(task);
    match &task.work {
        TaskWork::AppStats { since, until, apps } => {
            app_stats_chunk(conn, (*since, *until), apps.as_deref(), cursor, chunk)
        }
        TaskWork::EventTypeAggregate => event_types_chunk(conn, cursor, chunk),
        TaskWork::ReplayMissing {
            endpoint,
            since,
            until,
        } => match app {
            Ok(app) => replay_chunk(conn, &app, endpoint, (*since, *until, cursor), chunk, now),
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
                bulk_replay_chunk(conn, &app, endpoint, range, filter, chunk, now)
            }
            Err(failed) => Ok(failed),
        },
        TaskWork::ExpungeAllContents => match app {
            Ok(app) => expunge_chunk(conn, &app, cursor, chunk),
            Err(failed) => Ok(failed),
        },
    }
}

/// The endpoint a replay sends to, unless it was deleted.
fn replayed_endpoint(
    conn: &Connection,
    app: &AppId,
    endpoint: &EndpointId,
) -> Result<Option<hookd_core::model::Endpoint>, StoreError> {
    let sql =
        format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.id = ?1 AND e.app_id = ?2");
    Ok(collect(
        conn,
        &sql,
        [endpoint.as_str(), app.as_str()],
        rows::endpoint,
    )?
    .pop())
}

fn replay_chunk(
    conn: &Connection,
    app: &AppId,
    endpoint: &EndpointId,
    (since, until, cursor): Range<'_>,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    let Some(target) = replayed_endpoint(conn, app, endpoint)? else {
        return Ok(Chunk::failed("endpoint: was deleted"));
    };
    let until = until.map(|until| hookd_core::MessageId::lowest_at(until).to_string());
    let candidates = conn
        .prepare_cached(
            "SELECT m.id, m.event_type, m.channels, m.ordering_key, m.payload IS NULL,
                    EXISTS (SELECT 1 FROM deliveries d
                            WHERE d.message_id = m.id AND d.endpoint_id = ?3)
             FROM messages m
             WHERE m.app_id = ?1 AND m.id >= ?2 AND (?4 IS NULL OR m.id < ?4)
             ORDER BY m.id LIMIT ?5",
        )?
        .query_map(
            params![
                app.as_str(),
                replay_start(since, cursor),
                endpoint.as_str(),
                until,
                chunk as i64
            ],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, bool>(4)?,
                    row.get::<_, bool>(5)?,
                ))
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, next_attempt_at,
         updated_at, ordering_key) VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)",
    )?;
    let (mut queued, mut keys) = (0, BTreeSet::new());
    let cursor = candidates.last().map(|c| c.0.clone());
    let scanned = candidates.len();
    for (id, event_type, channels, ordering_key, expunged, delivered) in candidates {
        let candidate = Candidate {
            id,
            event_type,
            channels: decode_opt(channels)?,
            ordering_key,
            expunged,
            delivered,
        };
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
    (since, until, cursor): Range<'_>,
    filter: &ReplayFilter,
    chunk: usize,
    now: Timestamp,
) -> Result<Chunk, StoreError> {
    if replayed_endpoint(conn, app, endpoint)?.is_none() {
        return Ok(Chunk::failed("endpoint: was deleted"));
    }
    let until = until.map(|until| hookd_core::MessageId::lowest_at(until).to_string());
    let sent = conn
        .prepare_cached(
            "SELECT m.id, m.event_type, m.channels, m.tags, d.status,
                    (SELECT a.response_status_code FROM attempts a
                     WHERE a.message_id = m.id AND a.endpoint_id = ?3
                     ORDER BY a.id DESC LIMIT 1)
             FROM messages m JOIN deliveries d ON d.message_id = m.id AND d.endpoint_id = ?3
             WHERE m.app_id = ?1 AND m.id >= ?2 AND (?4 IS NULL OR m.id < ?4)
               AND m.payload IS NOT NULL
             ORDER BY m.id LIMIT ?5",
        )?
        .query_map(
            params![
                app.as_str(),
                replay_start(since, cursor),
                endpoint.as_str(),
                until,
                chunk as i64
            ],
            |row| {
                Ok(SentRow {
                    id: row.get(0)?,
                    event_type: row.get(1)?,
                    channels: row.get(2)?,
                    tags: row.get(3)?,
                    status: row.get(4)?,
                    last_code: row.get(5)?,
                })
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
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
    let ids = conn
        .prepare_cached(
            "SELECT id FROM messages WHERE app_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        )?
        .query_map(
            params![app.as_str(), cursor.unwrap_or(""), chunk as i64],
            |row| row.get::<_, String>(0),
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let mut expunge = conn.prepare_cached(
        "UPDATE messages SET payload = NULL WHERE id = ?1 AND payload IS NOT NULL",
    )?;
    let mut done = 0;
    for id in &ids {
        done += expunge.execute([id])? as u64;
    }
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
    (since, until): (Timestamp, Timestamp),
    apps: Option<&[AppId]>,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let apps_json = apps.map(|apps| {
        let ids: Vec<&str> = apps.iter().map(AppId::as_str).collect();
        serde_json::to_string(&ids).expect("ids serialize")
    });
    let found = conn
        .prepare_cached(
            "SELECT id, uid FROM applications
             WHERE id > ?1 AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))
             ORDER BY id LIMIT ?3",
        )?
        .query_map(
            params![cursor.unwrap_or(""), apps_json, limit as i64],
            |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?)),
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let (lo, hi) = (MessageId::lowest_at(since), MessageId::lowest_at(until));
    let mut count = conn.prepare_cached(
        "SELECT count(*) FROM messages m JOIN deliveries d ON d.message_id = m.id
         WHERE m.app_id = ?1 AND m.id >= ?2 AND m.id < ?3",
    )?;
    let mut results = Vec::with_capacity(found.len());
    let mut total = 0;
    for (id, uid) in &found {
        let destinations: i64 =
            count.query_row(params![id, lo.as_str(), hi.as_str()], |row| row.get(0))?;
        total += destinations.unsigned_abs();
        results.push(app_stats(id, uid.as_deref(), destinations));
    }
    let cursor = found.last().map(|(id, _)| id.clone());
    Ok(Chunk {
        results,
        ..Chunk::progressed(found.len(), limit, total, 0, cursor)
    })
}

/// Lists the event types the next applications' endpoints subscribe to.
fn event_types_chunk(
    conn: &Connection,
    cursor: Option<&str>,
    chunk: usize,
) -> Result<Chunk, StoreError> {
    let limit = apps_per_chunk(chunk);
    let found = conn
        .prepare_cached("SELECT id FROM applications WHERE id > ?1 ORDER BY id LIMIT ?2")?
        .query_map(params![cursor.unwrap_or(""), limit as i64], |row| {
            row.get::<_, String>(0)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut filters = conn.prepare_cached("SELECT event_types FROM endpoints WHERE app_id = ?1")?;
    let mut results = Vec::with_capacity(found.len());
    for id in &found {
        let of_app = filters
            .query_map([id], |row| row.get::<_, Option<String>>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        results.push(event_type_line(id, &of_app)?);
    }
    let cursor = found.last().cloned();
    Ok(Chunk {
        results,
        ..Chunk::progressed(found.len(), limit, 0, 0, cursor)
    })
}
