//! Background tasks: work on many messages at once, done in chunks by the engine's task
//! runner while the API goes on answering (Svix's `endpoint.replayMissing`,
//! `message.expungeAllContents` and `backgroundTask.get/list`). Starting one answers 202 at
//! once with the task; its progress is `GET /background-task/{task_id}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use hookd_core::{TaskId, Timestamp};
use hookd_store::{BackgroundTask, ReplayFilter, TaskFilter, TaskStatus, TaskWork};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::extract::{JsonBody, QueryParams};
use crate::list::{ListOut, page_request};
use crate::routes::endpoint;
use crate::{ApiError, ApiState, Principal, validate};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/replay-missing"),
            post(replay_missing),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/bulk-replay"),
            post(bulk_replay),
        )
        .route(
            v1!("/app/{app_id}/msg/expunge-all-contents"),
            post(expunge_all_contents),
        )
        .route(v1!("/stats/usage/app"), post(app_stats))
        .route(v1!("/stats/usage/event-types"), put(aggregate_event_types))
        .route(v1!("/background-task"), get(list))
        .route(v1!("/background-task/{task_id}"), get(get_one))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ReplayIn {
    since: String,
    until: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkReplayIn {
    since: String,
    until: Option<String>,
    event_types: Option<Vec<String>>,
    channel: Option<String>,
    tag: Option<String>,
    /// The delivery's status: 0 succeeded, 1 pending, 2 failed, 3 sending.
    status: Option<i16>,
    /// The last attempt's status class: 0 (no answer), 100, 200, 300, 400 or 500.
    status_code_class: Option<u16>,
}

impl BulkReplayIn {
    fn filter(self) -> Result<ReplayFilter, ApiError> {
        if self.status.is_some_and(|status| !(0..=3).contains(&status)) {
            return Err(ApiError::body_field(
                "status",
                "must be 0 (success), 1 (pending), 2 (fail) or 3 (sending)",
            ));
        }
        if self
            .status_code_class
            .is_some_and(|class| class % 100 != 0 || class > 500)
        {
            return Err(ApiError::body_field(
                "statusCodeClass",
                "must be 0, 100, 200, 300, 400 or 500",
            ));
        }
        Ok(ReplayFilter {
            event_types: self.event_types,
            channel: self.channel,
            tag: self.tag,
            status: self.status,
            status_code_class: self.status_code_class,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AppUsageStatsIn {
    since: String,
    until: String,
    app_ids: Option<Vec<String>>,
}

/// `AppUsageStatsOut`: the task, and the applications asked for that do not exist.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AppUsageStatsOut {
    #[serde(flatten)]
    task: TaskStarted,
    unresolved_app_ids: Vec<String>,
}

/// A task as it starts: `ReplayOut` and `ExpungeAllContentsOut` in Svix's API.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaskStarted {
    id: String,
    status: &'static str,
    task: &'static str,
    updated_at: String,
}

impl From<&BackgroundTask> for TaskStarted {
    fn from(task: &BackgroundTask) -> Self {
        Self {
            id: task.id.to_string(),
            status: task.status.as_str(),
            task: task.work.kind(),
            updated_at: task.updated_at.to_rfc3339(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BackgroundTaskOut {
    id: String,
    status: &'static str,
    task: &'static str,
    /// What the task works on and how far it got.
    data: Value,
    updated_at: String,
}

impl From<BackgroundTask> for BackgroundTaskOut {
    fn from(task: BackgroundTask) -> Self {
        let mut data = match &task.work {
            TaskWork::ReplayMissing {
                endpoint,
                since,
                until,
            } => json!({
                "endpointId": endpoint.as_str(),
                "since": since.to_rfc3339(),
                "until": until.map(Timestamp::to_rfc3339),
                "messagesScanned": task.scanned,
                "messagesSent": task.done,
            }),
            TaskWork::BulkReplay {
                endpoint,
                since,
                until,
                filter,
            } => json!({
                "endpointId": endpoint.as_str(),
                "since": since.to_rfc3339(),
                "until": until.map(Timestamp::to_rfc3339),
                "filter": filter,
                "messagesScanned": task.scanned,
                "messagesSent": task.done,
            }),
            TaskWork::ExpungeAllContents => json!({
                "messagesScanned": task.scanned,
                "messagesPurged": task.done,
            }),
            TaskWork::AppStats { since, until, .. } => json!({
                "since": since.to_rfc3339(),
                "until": until.to_rfc3339(),
                "appStats": task.results,
            }),
            TaskWork::EventTypeAggregate => json!({ "event_types": task.results }),
        };
        if let Some(app) = &task.app_id {
            data["appId"] = json!(app.as_str());
        }
        if let Some(error) = &task.error {
            data["error"] = json!(error);
        }
        Self {
            id: task.id.to_string(),
            status: task.status.as_str(),
            task: task.work.kind(),
            data,
            updated_at: task.updated_at.to_rfc3339(),
        }
    }
}

/// Starts `task` and answers 202 with it.
async fn start(
    state: &ApiState,
    task: BackgroundTask,
) -> Result<(StatusCode, Json<TaskStarted>), ApiError> {
    state.store().create_task(&task).await?;
    state.wake_tasks();
    Ok((StatusCode::ACCEPTED, Json(TaskStarted::from(&task))))
}

/// `since` and `until` (when given) of a replay, checked.
async fn replay_missing(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<ReplayIn>,
) -> Result<(StatusCode, Json<TaskStarted>), ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let (since, until) = validate::time_range(&input.since, input.until.as_deref())?;
    let work = TaskWork::ReplayMissing {
        endpoint: ep.id,
        since,
        until,
    };
    let now = state.clock().now();
    start(&state, BackgroundTask::new(Some(ep.app_id), work, now)).await
}

async fn bulk_replay(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<BulkReplayIn>,
) -> Result<(StatusCode, Json<TaskStarted>), ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let (since, until) = validate::time_range(&input.since, input.until.as_deref())?;
    let work = TaskWork::BulkReplay {
        endpoint: ep.id,
        since,
        until,
        filter: input.filter()?,
    };
    let now = state.clock().now();
    start(&state, BackgroundTask::new(Some(ep.app_id), work, now)).await
}

async fn expunge_all_contents(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
) -> Result<(StatusCode, Json<TaskStarted>), ApiError> {
    let app = state.app(&principal, &app_id).await?;
    let now = state.clock().now();
    start(
        &state,
        BackgroundTask::new(Some(app.id), TaskWork::ExpungeAllContents, now),
    )
    .await
}

/// Counts each application's deliveries ("message destinations") of messages created in
/// `[since, until)`: every application's, or those of `appIds` that exist (admin only).
async fn app_stats(
    State(state): State<ApiState>,
    JsonBody(input): JsonBody<AppUsageStatsIn>,
) -> Result<(StatusCode, Json<AppUsageStatsOut>), ApiError> {
    let (since, until) = validate::closed_time_range(&input.since, &input.until)?;
    let (mut apps, mut unresolved) = (None, Vec::new());
    if let Some(asked) = input.app_ids {
        let mut found = Vec::new();
        for id_or_uid in asked {
            match state.store().get_app(&id_or_uid).await? {
                Some(app) => found.push(app.id),
                None => unresolved.push(id_or_uid),
            }
        }
        if found.is_empty() {
            return Err(ApiError::body_field(
                "appIds",
                "none of these applications exists",
            ));
        }
        apps = Some(found);
    }
    let work = TaskWork::AppStats { since, until, apps };
    let (status, Json(task)) =
        start(&state, BackgroundTask::new(None, work, state.clock().now())).await?;
    let out = AppUsageStatsOut {
        task,
        unresolved_app_ids: unresolved,
    };
    Ok((status, Json(out)))
}

/// Lists, per application, the event types its endpoints subscribe to (admin only).
async fn aggregate_event_types(
    State(state): State<ApiState>,
) -> Result<(StatusCode, Json<TaskStarted>), ApiError> {
    let now = state.clock().now();
    start(
        &state,
        BackgroundTask::new(None, TaskWork::EventTypeAggregate, now),
    )
    .await
}

/// Tasks, newest first unless `order=ascending`; an application's token sees its
/// application's only.
async fn list(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    query: QueryParams,
) -> Result<Json<ListOut<BackgroundTaskOut>>, ApiError> {
    let status = query
        .get("status")
        .map(|status| {
            TaskStatus::parse(status).ok_or_else(|| {
                ApiError::query_param("status", "must be running, finished or failed")
            })
        })
        .transpose()?;
    let kind = query.get("task").map(str::to_owned);
    let app = match &principal {
        Principal::Admin => None,
        Principal::App(app) => Some(app.clone()),
    };
    let oldest_first = match query.get("order") {
        None | Some("descending") => false,
        Some("ascending") => true,
        Some(_) => {
            return Err(ApiError::query_param(
                "order",
                "must be ascending or descending",
            ));
        }
    };
    let filter = TaskFilter {
        status,
        kind,
        app,
        oldest_first,
    };
    let page = state
        .store()
        .list_tasks(&filter, &page_request(&query)?)
        .await?;
    Ok(Json(ListOut::from_page(
        page,
        |task| task.id.to_string(),
        BackgroundTaskOut::from,
    )))
}

async fn get_one(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(task_id): Path<String>,
) -> Result<Json<BackgroundTaskOut>, ApiError> {
    let task = state
        .store()
        .get_task(&TaskId::from_stored(task_id))
        .await?
        .ok_or(ApiError::NotFound("background task"))?;
    // Another application's task is as good as absent, and so is a task over every
    // application to an application's token.
    let visible = match (&principal, &task.app_id) {
        (Principal::Admin, _) => true,
        (Principal::App(own), Some(app)) => own == app,
        (Principal::App(_), None) => false,
    };
    if !visible {
        return Err(ApiError::NotFound("background task"));
    }
    Ok(Json(BackgroundTaskOut::from(task)))
}

#[cfg(test)]
mod tests {
    use hookd_core::{AppId, EndpointId};

    use super::*;
    use crate::routes::described::{assert_reads_as_described, assert_shows_as_described};

    #[test]
    fn the_replay_requests_read_what_the_document_describes() {
        assert_reads_as_described::<ReplayIn>("ReplayIn");
        assert_reads_as_described::<BulkReplayIn>("BulkReplayIn");
        assert_reads_as_described::<AppUsageStatsIn>("AppUsageStatsIn");
    }

    #[test]
    fn started_tasks_and_their_progress_show_what_the_document_describes() {
        let now = Timestamp::from_millis(1_700_000_000_000);
        let work = TaskWork::ReplayMissing {
            endpoint: EndpointId::new(now),
            since: now,
            until: Some(now),
        };
        let replay = BackgroundTask::new(Some(AppId::new(now)), work, now);
        let expunge = BackgroundTask::new(Some(AppId::new(now)), TaskWork::ExpungeAllContents, now);
        let stats = TaskWork::AppStats {
            since: now,
            until: now,
            apps: None,
        };
        let stats = BackgroundTask::new(None, stats, now);
        assert_shows_as_described("ReplayOut", &TaskStarted::from(&replay));
        assert_shows_as_described("ExpungeAllContentsOut", &TaskStarted::from(&expunge));
        assert_shows_as_described("BackgroundTaskOut", &BackgroundTaskOut::from(replay));
        let stats = AppUsageStatsOut {
            task: TaskStarted::from(&stats),
            unresolved_app_ids: vec!["gone".into()],
        };
        assert_shows_as_described("AppUsageStatsOut", &stats);
    }
}
