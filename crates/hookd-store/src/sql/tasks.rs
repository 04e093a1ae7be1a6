//! [`TaskStore`] on both databases: creating and reading tasks are shared statements; a step
//! is each backend's own transaction ([`StepTasks`]), running the chunks' shared statements.

use async_trait::async_trait;
use hookd_core::{AppId, MessageId, TaskId, Timestamp};

use super::rows::{Columns, Decoded, int, text};
use super::{Database, Dialect, ListQuery, Statement, args, sql};
use crate::json::decode_opt;
use crate::sql::task_chunks::{
    Candidate, Range, SentRow, TASK_COLUMNS, TaskRow, replay_start, results_json, task_from_row,
};
use crate::{BackgroundTask, Page, PageRequest, StoreError, TaskFilter, TaskStep, TaskStore};

/// What [`TaskStore`] asks of each backend itself: running a chunk in one transaction (on
/// SQLite, one writer job; on PostgreSQL, one that locks the task's row so processes never run
/// one task's chunks at once).
#[async_trait]
pub trait StepTasks: Database {
    /// [`TaskStore::step_task`].
    async fn step(&self, chunk: usize, now: Timestamp) -> Result<Option<TaskStep>, StoreError>;
}

#[async_trait]
impl<D: StepTasks> TaskStore for D {
    async fn create_task(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        self.write(insert(task), None).await?;
        Ok(())
    }

    async fn get_task(&self, id: &TaskId) -> Result<Option<BackgroundTask>, StoreError> {
        self.read_one(get(id), self::task).await
    }

    async fn list_tasks(
        &self,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> Result<Page<BackgroundTask>, StoreError> {
        let query = list(D::DIALECT, filter).page("id", !filter.oldest_first, page);
        self.read_page(query, self::task).await
    }

    async fn step_task(
        &self,
        chunk: usize,
        now: Timestamp,
    ) -> Result<Option<TaskStep>, StoreError> {
        self.step(chunk, now).await
    }
}

fn insert(task: &BackgroundTask) -> Statement<'_> {
    let sql = sql!(
        "INSERT INTO background_tasks (id, app_id, kind, endpoint_id, since_ms, until_ms,
         filter, status, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)"
    );
    let (endpoint, since, until, filter) = task.work.columns();
    Statement::new(
        sql,
        args![
            task.id.as_str(),
            task.app_id.as_ref().map(AppId::as_str),
            task.work.kind(),
            endpoint,
            since,
            until,
            filter,
            task.status.as_str(),
            task.created_at,
        ],
    )
}

pub fn get(id: &TaskId) -> Statement<'_> {
    let sql = sql!(
        "SELECT ",
        TASK_COLUMNS,
        " FROM background_tasks WHERE id = ?1"
    );
    Statement::new(sql, args![id.as_str()])
}

/// The tasks `filter` takes; page them on `id`, newest first unless `filter` asks otherwise.
fn list(dialect: Dialect, filter: &TaskFilter) -> ListQuery<'_> {
    let select = sql!("SELECT ", TASK_COLUMNS, " FROM background_tasks WHERE TRUE");
    let mut query = ListQuery::new(dialect, select, args![]);
    if let Some(status) = filter.status {
        query.and("status = ?", status.as_str());
    }
    if let Some(kind) = &filter.kind {
        query.and("kind = ?", kind.as_str());
    }
    if let Some(app) = &filter.app {
        query.and("app_id = ?", app.to_string());
    }
    query
}

/// A row of [`TASK_COLUMNS`] (followed, in a step's read, by the task's cursor).
pub fn task(row: &dyn Columns) -> Decoded<BackgroundTask> {
    let columns: TaskRow = (
        text(row, 0)?,
        row.opt_text(1)?,
        text(row, 2)?,
        row.opt_text(3)?,
        row.opt_i64(4)?,
        row.opt_i64(5)?,
        text(row, 6)?,
        int(row, 7)?,
        int(row, 8)?,
        row.opt_text(9)?,
        int(row, 10)?,
        int(row, 11)?,
        row.opt_text(12)?,
        row.opt_text(13)?,
    );
    task_from_row(columns)
}

/// Records a chunk's progress on `task`; the cursor moves only when the chunk gives one.
pub fn record_step<'a>(
    task: &'a BackgroundTask,
    cursor: Option<&'a str>,
    now: Timestamp,
) -> Statement<'a> {
    let sql = sql!(
        "UPDATE background_tasks SET status = ?2, scanned = ?3, done = ?4,
         cursor = COALESCE(?5, cursor), error = ?6, updated_at = ?7, result = ?8
         WHERE id = ?1"
    );
    Statement::new(
        sql,
        args![
            task.id.as_str(),
            task.status.as_str(),
            i64::try_from(task.scanned).unwrap_or(i64::MAX),
            i64::try_from(task.done).unwrap_or(i64::MAX),
            cursor,
            task.error.as_deref(),
            now,
            results_json(task),
        ],
    )
}

/// A replay chunk's messages `m`: the application's (`?1`) from `?2` on, below `?4` if given.
const IN_RANGE: &str =
    " WHERE m.app_id = ?1 AND m.id >= ?2 AND (CAST(?4 AS TEXT) IS NULL OR m.id < ?4)";

/// The first id bound of a replay's range, and its end as an id bound.
fn bounds(
    since: Timestamp,
    until: Option<Timestamp>,
    cursor: Option<&str>,
) -> (String, Option<String>) {
    let until = until.map(|until| MessageId::lowest_at(until).to_string());
    (replay_start(since, cursor), until)
}

/// The next chunk of an application's messages in a replay's range, each with whether it has
/// a delivery to `endpoint` already: [`candidate`].
pub fn candidates<'a>(
    app: &'a AppId,
    endpoint: &'a str,
    (since, until, cursor): Range<'_>,
    chunk: usize,
) -> Statement<'a> {
    let sql = sql!(
        "SELECT m.id, m.event_type, m.channels, m.ordering_key, m.payload IS NULL,
                EXISTS (SELECT 1 FROM deliveries d
                        WHERE d.message_id = m.id AND d.endpoint_id = ?3)
         FROM messages m",
        IN_RANGE,
        " ORDER BY m.id LIMIT ?5"
    );
    let (start, until) = bounds(since, until, cursor);
    Statement::new(sql, args![app.as_str(), start, endpoint, until, chunk])
}

/// A row of [`candidates`].
pub fn candidate(row: &dyn Columns) -> Decoded<Candidate> {
    Ok(Candidate {
        id: text(row, 0)?,
        event_type: text(row, 1)?,
        channels: decode_opt(row.opt_text(2)?)?,
        ordering_key: row.opt_text(3)?,
        expunged: row.bool(4)?,
        delivered: row.bool(5)?,
    })
}

/// The next chunk of an application's messages in a replay's range that were sent to
/// `endpoint` and still have their payload, each with its delivery's status and its last
/// attempt's HTTP status: [`sent`].
pub fn sent_messages<'a>(
    app: &'a AppId,
    endpoint: &'a str,
    (since, until, cursor): Range<'_>,
    chunk: usize,
) -> Statement<'a> {
    let sql = sql!(
        "SELECT m.id, m.event_type, m.channels, m.tags, m.ordering_key, d.status,
                (SELECT a.response_status_code FROM attempts a
                 WHERE a.message_id = m.id AND a.endpoint_id = ?3
                 ORDER BY a.id DESC LIMIT 1)
         FROM messages m JOIN deliveries d ON d.message_id = m.id AND d.endpoint_id = ?3",
        IN_RANGE,
        " AND m.payload IS NOT NULL ORDER BY m.id LIMIT ?5"
    );
    let (start, until) = bounds(since, until, cursor);
    Statement::new(sql, args![app.as_str(), start, endpoint, until, chunk])
}

/// A row of [`sent_messages`].
pub fn sent(row: &dyn Columns) -> Decoded<SentRow> {
    Ok(SentRow {
        id: text(row, 0)?,
        event_type: text(row, 1)?,
        channels: row.opt_text(2)?,
        tags: row.opt_text(3)?,
        ordering_key: row.opt_text(4)?,
        status: int(row, 5)?,
        last_code: row.opt_i64(6)?,
    })
}

/// The ids of the next chunk of an application's messages after `cursor`.
pub fn message_ids<'a>(app: &'a AppId, cursor: Option<&'a str>, chunk: usize) -> Statement<'a> {
    let sql = sql!("SELECT id FROM messages WHERE app_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3");
    Statement::new(sql, args![app.as_str(), cursor.unwrap_or(""), chunk])
}

/// Drops the payloads of the messages `ids` that still have one.
pub fn expunge(dialect: Dialect, ids: &[String]) -> Statement<'static> {
    let sql = match dialect {
        Dialect::Sqlite => sql!(
            "UPDATE messages SET payload = NULL
             WHERE id IN (SELECT value FROM json_each(?1)) AND payload IS NOT NULL"
        )
        .only(Dialect::Sqlite),
        Dialect::Postgres => {
            sql!("UPDATE messages SET payload = NULL WHERE id = ANY(?1) AND payload IS NOT NULL")
                .only(Dialect::Postgres)
        }
    };
    Statement::new(sql, args![ids.to_vec()])
}

/// The next applications after `cursor` (those of `apps`, if given), each with its id, uid
/// and how many deliveries its messages created in `[since, until)` have; never an ingest
/// source's own application (reached through its source).
pub fn app_destinations<'a>(
    dialect: Dialect,
    (since, until): (Timestamp, Timestamp),
    apps: Option<&[AppId]>,
    cursor: Option<&'a str>,
    limit: usize,
) -> Statement<'a> {
    const SELECT: &str = "SELECT a.id, a.uid,
            (SELECT count(*) FROM messages m JOIN deliveries d ON d.message_id = m.id
             WHERE m.app_id = a.id AND m.id >= ?4 AND m.id < ?5)
         FROM applications a WHERE a.id > ?1
             AND (a.uid IS NULL OR a.uid NOT LIKE 'hookd-ingest-%') AND ";
    const ORDER: &str = " ORDER BY a.id LIMIT ?3";
    let sql = match dialect {
        Dialect::Sqlite => sql!(
            SELECT,
            "(?2 IS NULL OR a.id IN (SELECT value FROM json_each(?2)))",
            ORDER
        )
        .only(Dialect::Sqlite),
        Dialect::Postgres => sql!(
            SELECT,
            "(CAST(?2 AS TEXT[]) IS NULL OR a.id = ANY(?2))",
            ORDER
        )
        .only(Dialect::Postgres),
    };
    let apps: Option<Vec<String>> = apps.map(|apps| apps.iter().map(ToString::to_string).collect());
    let (lo, hi) = (MessageId::lowest_at(since), MessageId::lowest_at(until));
    Statement::new(
        sql,
        args![
            cursor.unwrap_or(""),
            apps,
            limit,
            lo.to_string(),
            hi.to_string()
        ],
    )
}

/// A row of [`app_destinations`].
pub fn destinations(row: &dyn Columns) -> Decoded<(String, Option<String>, i64)> {
    Ok((text(row, 0)?, row.opt_text(1)?, int(row, 2)?))
}

/// The next applications after `cursor`, each with its endpoints' event-type filters: one
/// row per endpoint (`app id, true, filter`), or `app id, false, NULL` for an application
/// without any, in application order: [`app_filters`].
pub fn apps_with_filters(cursor: Option<&str>, limit: usize) -> Statement<'_> {
    let sql = sql!(
        "SELECT a.id, e.id IS NOT NULL, e.event_types
         FROM (SELECT id FROM applications WHERE id > ?1 ORDER BY id LIMIT ?2) a
         LEFT JOIN endpoints e ON e.app_id = a.id
         ORDER BY a.id"
    );
    Statement::new(sql, args![cursor.unwrap_or(""), limit])
}

/// The rows of [`apps_with_filters`] gathered per application, in its order.
pub fn app_filters(
    rows: Vec<(String, bool, Option<String>)>,
) -> Vec<(String, Vec<Option<String>>)> {
    let mut apps: Vec<(String, Vec<Option<String>>)> = Vec::new();
    for (app, has_endpoint, filter) in rows {
        if apps.last().is_none_or(|(last, _)| *last != app) {
            apps.push((app, Vec::new()));
        }
        if has_endpoint && let Some((_, filters)) = apps.last_mut() {
            filters.push(filter);
        }
    }
    apps
}

/// A row of [`apps_with_filters`].
pub fn app_filter(row: &dyn Columns) -> Decoded<(String, bool, Option<String>)> {
    Ok((text(row, 0)?, row.bool(1)?, row.opt_text(2)?))
}
