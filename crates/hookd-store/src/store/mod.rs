//! The [`Store`] contract: everything the API and the delivery engine read and write, as one
//! trait per resource ([`ApplicationStore`], [`EndpointStore`], [`EventTypeStore`],
//! [`MessageStore`], [`AuthStore`], [`OutboxStore`], [`RetentionStore`], and [`DeliveryQueue`]
//! for the engine, [`GaugeStore`] for `/metrics`, [`NoticeStore`] for e-mail notices,
//! [`TaskStore`] for background tasks, [`PollerStore`] for polling destinations, [`IngestStore`]
//! for the ingest gateway's sources) that [`Store`] gathers.
//!
//! Lookups that the API exposes by "id or uid" take the caller's text and match either, so the
//! id-or-uid rule lives in one place. Lists are keyset-paginated on ids (which sort by creation
//! time), never by offset, so paging stays fast on millions of rows.

mod applications;
mod auth;
mod endpoints;
mod event_types;
mod gauges;
pub mod ingest;
mod messages;
mod notices;
mod outbox;
mod poller;
mod queue;
mod retention;
mod tasks;

pub use applications::ApplicationStore;
pub use auth::{ApiToken, AuthStore, StoredResponse};
pub(crate) use endpoints::check_disabled_as_read;
pub use endpoints::{EndpointStore, EndpointUpdate, KeySwap, SealedRow};
pub use event_types::EventTypeStore;
pub(crate) use gauges::age;
pub use gauges::{GaugeStore, Gauges};
pub use ingest::{IngestRejection, IngestRequest, IngestSource, IngestStore};
pub(crate) use messages::tally;
pub use messages::{
    AttemptFilter, CreatedMessage, DeliveryTally, EndpointStats, HealthBucket, HealthWindow,
    MessageFilter, MessageStore, NewMessage, OldestPending, Route,
};
pub use notices::NoticeStore;
pub use outbox::{OutboxStore, RelayRules, Relayed, RowFate, Wakeups};
pub use poller::{POLL_SETTLE, PollRequest, PollerStore};
pub(crate) use queue::skip_refused;
pub use queue::{
    AttemptRecord, ClaimRequest, ClaimedDelivery, DeliveryQueue, Handoff, HandoffMode, Recorded,
    Reserved, Skipped,
};
pub use retention::{EXPUNGED, PurgeCursor, PurgeRequest, Purged, RetentionStore};
pub use tasks::{
    BackgroundTask, ReplayFilter, TaskFilter, TaskStatus, TaskStep, TaskStore, TaskWork,
};

/// Where a page starts, relative to an item id (or event-type name) from a previous page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// Items after this one, in the list's order.
    After(String),
    /// Items before this one, in the list's order.
    Before(String),
}

/// One page request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items (the API caps it).
    pub limit: usize,
    pub cursor: Option<Cursor>,
}

/// One page of results, in the list's order.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Whether more items follow in the direction the cursor asked for.
    pub has_more: bool,
}

/// hookd's durable state: every resource trait in one. Implemented by
/// [`crate::sqlite::SqliteStore`] and [`crate::postgres::PgStore`]; both pass the same
/// behavioural tests. Callers hold an `Arc<dyn Store>`.
///
/// A blanket implementation covers every type that implements the resource traits. Their
/// methods are callable on `dyn Store` as they are; on a concrete store, bring them into scope
/// with `use hookd_store::prelude::*`.
pub trait Store:
    ApplicationStore
    + EndpointStore
    + EventTypeStore
    + MessageStore
    + AuthStore
    + DeliveryQueue
    + OutboxStore
    + GaugeStore
    + RetentionStore
    + NoticeStore
    + TaskStore
    + PollerStore
    + IngestStore
    + Send
    + Sync
    + 'static
{
}

impl<T> Store for T where
    T: ApplicationStore
        + EndpointStore
        + EventTypeStore
        + MessageStore
        + AuthStore
        + DeliveryQueue
        + OutboxStore
        + GaugeStore
        + RetentionStore
        + NoticeStore
        + TaskStore
        + PollerStore
        + IngestStore
        + Send
        + Sync
        + 'static
{
}
