//! [`TaskStore`]: background tasks, work on an application's messages too large for one
//! request (replaying what an endpoint missed, expunging every payload).
//!
//! A task advances in chunks: each chunk is one transaction that does the work for up to a
//! chunk of messages and records how far the task got, so publishing waits at most one chunk
//! for the database, a restart resumes where the last chunk ended, and a chunk is never done
//! twice. On PostgreSQL a task's row is locked by the process running its chunk, so several
//! processes share the tasks and never run one task's chunk twice at once.

use async_trait::async_trait;
use hookd_core::{AppId, EndpointId, TaskId, Timestamp};

use crate::{Page, PageRequest, StoreError};

/// What a task does, with what it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskWork {
    /// Queues, to `endpoint`, every message of its application created in `[since, until)`
    /// that it subscribes to and never had a delivery to it (published while it was disabled
    /// or before it existed, say), due now. Messages whose payload is gone are left out.
    ReplayMissing {
        endpoint: EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
    },
    /// Sends again, to `endpoint`, every message of its application created in
    /// `[since, until)` that was sent to it before (succeeded or failed) and that `filter`
    /// takes, as a resend does (same `webhook-id`, a manual attempt). Deliveries in flight, and
    /// messages whose payload is gone, are left out.
    BulkReplay {
        endpoint: EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        filter: ReplayFilter,
    },
    /// Drops the payload of every message of the application.
    ExpungeAllContents,
    /// Counts, per application (every one, or those given), the deliveries ("message
    /// destinations") of its messages created in `[since, until)`.
    AppStats {
        since: Timestamp,
        until: Timestamp,
        apps: Option<Vec<AppId>>,
    },
    /// Lists, per application, the event types its endpoints subscribe to by name, and
    /// whether one of them takes every event type.
    EventTypeAggregate,
}

/// Which of an endpoint's messages a bulk replay sends again; every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFilter {
    /// The message's event type is one of these.
    pub event_types: Option<Vec<String>>,
    /// The message is on this channel.
    pub channel: Option<String>,
    /// The message has this tag.
    pub tag: Option<String>,
    /// The delivery's status code (`DeliveryStatus::code`).
    pub status: Option<i16>,
    /// The last attempt's HTTP status class: 0 (no answer), 100, 200, 300, 400 or 500.
    pub status_code_class: Option<u16>,
}

impl ReplayFilter {
    /// Whether the filter takes a message of `event_type` on `channels` with `tags`, whose
    /// delivery has `status` and whose last attempt answered `last_code` (0: no answer).
    pub fn takes(
        &self,
        event_type: &str,
        channels: Option<&[String]>,
        tags: Option<&[String]>,
        status: i16,
        last_code: Option<i64>,
    ) -> bool {
        let has = |list: Option<&[String]>, item: &String| list.is_some_and(|l| l.contains(item));
        self.event_types
            .as_ref()
            .is_none_or(|types| types.iter().any(|t| t == event_type))
            && self.channel.as_ref().is_none_or(|c| has(channels, c))
            && self.tag.as_ref().is_none_or(|t| has(tags, t))
            && self.status.is_none_or(|s| s == status)
            && self
                .status_code_class
                .is_none_or(|class| i64::from(class) == last_code.unwrap_or(0) / 100 * 100)
    }
}

impl TaskWork {
    /// The task's name in Svix's API.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ReplayMissing { .. } => "endpoint.replay",
            Self::BulkReplay { .. } => "endpoint.bulk-replay",
            Self::ExpungeAllContents => "application.purge_content",
            Self::AppStats { .. } => "application.stats",
            Self::EventTypeAggregate => "event-type.aggregate",
        }
    }
}

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    Running,
    Finished,
    Failed,
}

impl TaskStatus {
    /// The name the API shows and the database keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Running, Self::Finished, Self::Failed]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// A background task and its progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackgroundTask {
    pub id: TaskId,
    /// The application it works on; `None` for a task over every application (statistics).
    pub app_id: Option<AppId>,
    pub work: TaskWork,
    pub status: TaskStatus,
    /// Messages looked at so far.
    pub scanned: u64,
    /// What the task did to them: deliveries queued, or payloads dropped.
    pub done: u64,
    /// Why it failed.
    pub error: Option<String>,
    /// A statistics task's results so far, one per application.
    pub results: Vec<serde_json::Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl BackgroundTask {
    /// A task about to start on `app` (`None`: on every application).
    pub fn new(app_id: Option<AppId>, work: TaskWork, now: Timestamp) -> Self {
        Self {
            id: TaskId::new(now),
            app_id,
            work,
            status: TaskStatus::Running,
            scanned: 0,
            done: 0,
            error: None,
            results: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }
}

/// Which tasks to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    pub status: Option<TaskStatus>,
    /// A [`TaskWork::kind`].
    pub kind: Option<String>,
    /// Only this application's.
    pub app: Option<AppId>,
    /// Oldest first instead of newest first.
    pub oldest_first: bool,
}

/// What one chunk did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStep {
    /// The task after the chunk.
    pub task: BackgroundTask,
    /// Deliveries the chunk queued (the engine has work when there are any).
    pub queued: u64,
}

#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Records a new task; it runs from the next [`Self::step_task`].
    async fn create_task(&self, task: &BackgroundTask) -> Result<(), StoreError>;

    async fn get_task(&self, id: &TaskId) -> Result<Option<BackgroundTask>, StoreError>;

    /// Tasks, newest first (or oldest first, as the filter says).
    async fn list_tasks(
        &self,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> Result<Page<BackgroundTask>, StoreError>;

    /// Runs the next chunk, up to `chunk` messages, of the oldest running task nobody else is
    /// running, in one transaction that also records its progress (and finishes it once no
    /// message is left, or fails it when its endpoint is gone). `None` when no task waits.
    async fn step_task(&self, chunk: usize, now: Timestamp)
    -> Result<Option<TaskStep>, StoreError>;
}
