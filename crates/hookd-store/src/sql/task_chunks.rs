//! A background task as both backends store and run it: its row and how it decodes, and the
//! chunk a step runs (what it looks at, what it did), shared so each backend keeps only its
//! own transaction.

use hookd_core::{AppId, EndpointId, TaskId, Timestamp};

use crate::{BackgroundTask, ReplayFilter, StoreError, TaskStatus, TaskWork};

/// The columns both stores select a task as, in this order.
pub(crate) const TASK_COLUMNS: &str = "id, app_id, kind, endpoint_id, since_ms, until_ms, \
     status, scanned, done, error, created_at, updated_at, filter, result";

/// A task's row as selected by [`TASK_COLUMNS`].
pub(crate) type TaskRow = (
    String,
    Option<String>,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    String,
    i64,
    i64,
    Option<String>,
    i64,
    i64,
    Option<String>,
    Option<String>,
);

/// Decodes a [`TaskRow`]; a kind or status this version does not know is corrupt data.
pub(crate) fn task_from_row(row: TaskRow) -> Result<BackgroundTask, StoreError> {
    let (id, app, kind, endpoint, since, until, status) =
        (row.0, row.1, row.2, row.3, row.4, row.5, row.6);
    let (scanned, done, error, created, updated, filter, results) =
        (row.7, row.8, row.9, row.10, row.11, row.12, row.13);
    let corrupt = |what: &str| StoreError::Corrupt(format!("background task {id}: {what}"));
    let work = match (kind.as_str(), endpoint, since) {
        ("endpoint.replay", Some(endpoint), Some(since)) => TaskWork::ReplayMissing {
            endpoint: EndpointId::from_stored(endpoint),
            since: Timestamp::from_millis(since),
            until: until.map(Timestamp::from_millis),
        },
        ("endpoint.bulk-replay", Some(endpoint), Some(since)) => TaskWork::BulkReplay {
            endpoint: EndpointId::from_stored(endpoint),
            since: Timestamp::from_millis(since),
            until: until.map(Timestamp::from_millis),
            filter: serde_json::from_str(filter.as_deref().unwrap_or("{}"))
                .map_err(|e| corrupt(&format!("filter: {e}")))?,
        },
        ("application.purge_content", _, _) => TaskWork::ExpungeAllContents,
        ("application.stats", _, Some(since)) => TaskWork::AppStats {
            since: Timestamp::from_millis(since),
            until: Timestamp::from_millis(until.unwrap_or(since)),
            apps: filter
                .as_deref()
                .map(serde_json::from_str::<Vec<String>>)
                .transpose()
                .map_err(|e| corrupt(&format!("apps: {e}")))?
                .map(|apps| apps.into_iter().map(AppId::from_stored).collect()),
        },
        ("event-type.aggregate", _, _) => TaskWork::EventTypeAggregate,
        _ => return Err(corrupt(&format!("unknown task {kind:?}"))),
    };
    let status = TaskStatus::parse(&status).ok_or_else(|| corrupt("unknown status"))?;
    Ok(BackgroundTask {
        id: TaskId::from_stored(id.clone()),
        app_id: app.map(AppId::from_stored),
        work,
        status,
        scanned: scanned.unsigned_abs(),
        done: done.unsigned_abs(),
        error,
        results: serde_json::from_str(results.as_deref().unwrap_or("[]"))
            .map_err(|e| corrupt(&format!("result: {e}")))?,
        created_at: Timestamp::from_millis(created),
        updated_at: Timestamp::from_millis(updated),
    })
}

impl TaskWork {
    /// The columns a task's work is kept in: endpoint, since and until (unix ms), and a bulk
    /// replay's filter or a statistics task's applications (JSON).
    pub(crate) fn columns(&self) -> (Option<&str>, Option<i64>, Option<i64>, Option<String>) {
        match self {
            Self::ReplayMissing {
                endpoint,
                since,
                until,
            } => (
                Some(endpoint.as_str()),
                Some(since.as_millis()),
                until.map(Timestamp::as_millis),
                None,
            ),
            Self::BulkReplay {
                endpoint,
                since,
                until,
                filter,
            } => (
                Some(endpoint.as_str()),
                Some(since.as_millis()),
                until.map(Timestamp::as_millis),
                Some(serde_json::to_string(filter).expect("a filter serializes")),
            ),
            Self::ExpungeAllContents | Self::EventTypeAggregate => (None, None, None, None),
            Self::AppStats { since, until, apps } => {
                let apps: Option<Vec<&str>> = apps
                    .as_ref()
                    .map(|apps| apps.iter().map(AppId::as_str).collect());
                let apps = apps.map(|apps| serde_json::to_string(&apps).expect("ids serialize"));
                (None, Some(since.as_millis()), Some(until.as_millis()), apps)
            }
        }
    }
}

/// A replay's bounds: since, until, and the last message a chunk finished.
pub(crate) type Range<'a> = (Timestamp, Option<Timestamp>, Option<&'a str>);

/// A message as a replay chunk looks at it.
pub(crate) struct Candidate {
    pub id: String,
    pub event_type: String,
    pub channels: Option<Vec<String>>,
    pub ordering_key: Option<String>,
    /// Its payload is gone: nothing to send.
    pub expunged: bool,
    /// It has a delivery to the endpoint already: not missing.
    pub delivered: bool,
}

impl Candidate {
    /// Whether a replay to `endpoint` queues it: its filters take the message (disabled or
    /// not: a disabled endpoint's deliveries wait until it is enabled).
    pub fn missing_at(&self, endpoint: &hookd_core::model::Endpoint) -> bool {
        !self.expunged
            && !self.delivered
            && hookd_core::model::filters_take(
                endpoint.event_types.as_deref(),
                endpoint.channels.as_deref(),
                &self.event_type,
                self.channels.as_deref(),
            )
    }
}

/// A message sent to an endpoint before, as a bulk replay chunk selects it.
pub(crate) struct SentRow {
    pub id: String,
    pub event_type: String,
    /// JSON text, as stored.
    pub channels: Option<String>,
    pub tags: Option<String>,
    pub ordering_key: Option<String>,
    /// Its delivery's status code.
    pub status: i16,
    /// Its last attempt's HTTP status, if it had one.
    pub last_code: Option<i64>,
}

impl SentRow {
    /// Whether `filter` takes it.
    pub fn taken_by(&self, filter: &ReplayFilter) -> Result<bool, StoreError> {
        let channels: Option<Vec<String>> = crate::json::decode_opt(self.channels.clone())?;
        let tags: Option<Vec<String>> = crate::json::decode_opt(self.tags.clone())?;
        Ok(filter.takes(
            &self.event_type,
            channels.as_deref(),
            tags.as_deref(),
            self.status,
            self.last_code,
        ))
    }
}

/// The first message id a replay from `since` may look at, after `cursor` when it resumes.
pub(crate) fn replay_start(since: Timestamp, cursor: Option<&str>) -> String {
    cursor.map_or_else(
        || hookd_core::MessageId::lowest_at(since).to_string(),
        // Above the cursor and below every id greater than it: ids all have one length.
        |cursor| format!("{cursor}0"),
    )
}

/// What one chunk did.
pub(crate) struct Chunk {
    /// Messages (or, for statistics, applications) looked at.
    pub scanned: usize,
    /// Deliveries queued, payloads dropped, or destinations counted.
    pub done: u64,
    /// Deliveries queued (the engine's new work).
    pub queued: u64,
    /// The last message (or application) looked at.
    pub cursor: Option<String>,
    /// Nothing is left after this chunk.
    pub finished: bool,
    /// Why the task cannot go on.
    pub failure: Option<String>,
    /// A statistics chunk's results, one per application.
    pub results: Vec<serde_json::Value>,
}

impl Chunk {
    /// A chunk that looked at `scanned` of at most `limit` (so it was the last when fewer),
    /// the last being `cursor`.
    pub fn progressed(
        scanned: usize,
        limit: usize,
        done: u64,
        queued: u64,
        cursor: Option<String>,
    ) -> Self {
        Self {
            scanned,
            done,
            queued,
            cursor,
            finished: scanned < limit,
            failure: None,
            results: Vec::new(),
        }
    }

    /// A chunk that found the task cannot go on.
    pub fn failed(why: &str) -> Self {
        Self {
            failure: Some(why.to_owned()),
            ..Self::progressed(0, 0, 0, 0, None)
        }
    }

    /// Adds this chunk to `task`'s progress, finishing or failing it; returns `queued`.
    pub fn record(&self, task: &mut BackgroundTask, now: Timestamp) -> u64 {
        task.scanned += self.scanned as u64;
        task.done += self.done;
        task.results.extend(self.results.iter().cloned());
        task.updated_at = now;
        if let Some(why) = &self.failure {
            task.status = TaskStatus::Failed;
            task.error = Some(why.clone());
        } else if self.finished {
            task.status = TaskStatus::Finished;
        }
        self.queued
    }
}

/// What the next chunk of a task does, and on what: both backends run a task by this.
pub(crate) enum Job<'a> {
    AppStats {
        range: (Timestamp, Timestamp),
        apps: Option<&'a [AppId]>,
    },
    EventTypes,
    Replay {
        app: AppId,
        endpoint: &'a EndpointId,
        range: Range<'a>,
    },
    BulkReplay {
        app: AppId,
        endpoint: &'a EndpointId,
        range: Range<'a>,
        filter: &'a ReplayFilter,
    },
    Expunge {
        app: AppId,
    },
    /// The task cannot go on: this is its last chunk.
    Failed(Chunk),
}

impl<'a> Job<'a> {
    /// The job of `task`'s next chunk, resuming after `cursor`. An application's task that
    /// names no application fails.
    pub fn of(task: &'a BackgroundTask, cursor: Option<&'a str>) -> Self {
        let app = || task.app_id.clone();
        let job = match &task.work {
            TaskWork::AppStats { since, until, apps } => Some(Self::AppStats {
                range: (*since, *until),
                apps: apps.as_deref(),
            }),
            TaskWork::EventTypeAggregate => Some(Self::EventTypes),
            TaskWork::ReplayMissing {
                endpoint,
                since,
                until,
            } => app().map(|app| Self::Replay {
                app,
                endpoint,
                range: (*since, *until, cursor),
            }),
            TaskWork::BulkReplay {
                endpoint,
                since,
                until,
                filter,
            } => app().map(|app| Self::BulkReplay {
                app,
                endpoint,
                range: (*since, *until, cursor),
                filter,
            }),
            TaskWork::ExpungeAllContents => app().map(|app| Self::Expunge { app }),
        };
        job.unwrap_or_else(|| Self::Failed(Chunk::failed("the task names no application")))
    }
}

/// A statistics chunk of `limit` applications that found `found`: each one's id, uid and
/// message destinations.
pub(crate) fn stats_chunk(found: &[(String, Option<String>, i64)], limit: usize) -> Chunk {
    let total = found.iter().map(|(_, _, n)| n.unsigned_abs()).sum();
    let results = found
        .iter()
        .map(|(id, uid, n)| {
            serde_json::json!({"appId": id, "appUid": uid, "messageDestinations": n})
        })
        .collect();
    let cursor = found.last().map(|(id, _, _)| id.clone());
    Chunk {
        results,
        ..Chunk::progressed(found.len(), limit, total, 0, cursor)
    }
}

/// One application's line of `event-type.aggregate`, from its endpoints' event-type filters
/// (JSON lists, NULL for an endpoint that takes every type).
fn event_type_line(id: &str, filters: &[Option<String>]) -> Result<serde_json::Value, StoreError> {
    let mut names = std::collections::BTreeSet::new();
    let mut catch_all = false;
    for filter in filters {
        match crate::json::decode_opt::<Vec<String>>(filter.clone())? {
            Some(types) => names.extend(types),
            None => catch_all = true,
        }
    }
    Ok(serde_json::json!({
        "appId": id,
        "explicitlySubscribedEventTypes": names,
        "hasCatchAllEndpoint": catch_all,
    }))
}

/// An `event-type.aggregate` chunk of `limit` applications that found `apps`, each with its
/// endpoints' event-type filters.
pub(crate) fn event_types_chunk(
    apps: &[(String, Vec<Option<String>>)],
    limit: usize,
) -> Result<Chunk, StoreError> {
    let results = apps
        .iter()
        .map(|(id, filters)| event_type_line(id, filters))
        .collect::<Result<_, _>>()?;
    let cursor = apps.last().map(|(id, _)| id.clone());
    Ok(Chunk {
        results,
        ..Chunk::progressed(apps.len(), limit, 0, 0, cursor)
    })
}

/// How many applications one statistics chunk looks at, of a chunk of `chunk` messages.
pub(crate) fn apps_per_chunk(chunk: usize) -> usize {
    (chunk / 10).max(1)
}

/// A task's results as kept (NULL while there are none).
pub(crate) fn results_json(task: &BackgroundTask) -> Option<String> {
    (!task.results.is_empty())
        .then(|| serde_json::to_string(&task.results).expect("JSON values serialize"))
}
