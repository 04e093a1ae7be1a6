//! [`MessageStore`]: published messages, and the delivery log (where each message went, and
//! every attempt).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use hookd_core::model::{Application, Attempt, Delivery, DeliveryStatus, Endpoint, Message};
use hookd_core::{AppId, EndpointId, MessageId, Timestamp};

use crate::{Page, PageRequest, StoreError};

/// Filters for message lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageFilter {
    pub event_types: Option<Vec<String>>,
    pub channel: Option<String>,
    /// Only messages carrying this tag.
    pub tag: Option<String>,
    /// Only messages created strictly before this time.
    pub before: Option<Timestamp>,
    /// Only messages created strictly after this time.
    pub after: Option<Timestamp>,
    /// Only messages with at least one delivery in this state. `Pending` takes `Sending` too:
    /// to someone asking "did it arrive yet?", an attempt in flight is still pending.
    pub status: Option<DeliveryStatus>,
}

/// Filters for attempt lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttemptFilter {
    pub status: Option<DeliveryStatus>,
    pub before: Option<Timestamp>,
    pub after: Option<Timestamp>,
}

/// What became of an endpoint's deliveries over a period (Svix's `EndpointStats`), and of the
/// attempts made to it in that period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Deliveries of the messages created in the period, by where they stand.
    pub success: u64,
    pub pending: u64,
    pub sending: u64,
    pub fail: u64,
    /// Attempts made in the period, and how many of them succeeded.
    pub attempts: u64,
    pub successful_attempts: u64,
}

/// Equal slices of time from `since`: the periods an endpoint's history is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthWindow {
    pub since: Timestamp,
    /// The length of one slice (at least a millisecond).
    pub bucket: Duration,
    pub buckets: usize,
}

impl HealthWindow {
    /// The end of the last slice.
    pub fn until(&self) -> Timestamp {
        let buckets = u32::try_from(self.buckets).unwrap_or(u32::MAX);
        self.since.plus(self.bucket.saturating_mul(buckets))
    }
}

/// One slice of an endpoint's history: the attempts made in it by outcome, and the deliveries
/// of the messages created in it that still wait (pending or in flight).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthBucket {
    pub succeeded: u64,
    pub failed: u64,
    pub pending: u64,
}

/// The message whose delivery to an endpoint has waited longest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OldestPending {
    pub message_id: MessageId,
    pub created_at: Timestamp,
}

/// Where one message's deliveries stand, counted: the status column of a message list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeliveryTally {
    pub succeeded: u32,
    /// Waiting for an attempt or in one.
    pub pending: u32,
    pub failed: u32,
}

impl DeliveryTally {
    /// Counts `count` more deliveries in `status`.
    fn add(&mut self, status: DeliveryStatus, count: u32) {
        match status {
            DeliveryStatus::Success => self.succeeded += count,
            DeliveryStatus::Pending | DeliveryStatus::Sending => self.pending += count,
            DeliveryStatus::Fail => self.failed += count,
        }
    }
}

/// Sums `(message, status, count)` rows into each message's tally.
pub(crate) fn tally(
    counts: impl IntoIterator<Item = (MessageId, DeliveryStatus, u32)>,
) -> HashMap<MessageId, DeliveryTally> {
    let mut tallies: HashMap<MessageId, DeliveryTally> = HashMap::new();
    for (message, status, count) in counts {
        tallies.entry(message).or_default().add(status, count);
    }
    tallies
}

/// A message accepted by [`MessageStore::publish`].
#[derive(Clone, Debug, PartialEq)]
pub struct CreatedMessage {
    pub message: Message,
    /// Delivery rows written with it: one per subscribed, enabled endpoint.
    pub deliveries: usize,
    /// Of them, those left in the queue for a claim; the rest went to the store's
    /// [`Handoff`](crate::Handoff), already claimed.
    pub queued: usize,
}

/// Which endpoints a new message goes to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Route {
    /// Every enabled endpoint of the application whose filters take the message.
    #[default]
    Subscribers,
    /// This endpoint alone, whatever its filters (a test send).
    Only(EndpointId),
}

/// A message to publish and how: every way a message is made goes through
/// [`MessageStore::publish`] as one of these.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    /// The message. When its `deliver_at` is set (Svix's `deliverAt`), its deliveries become
    /// due then rather than at once.
    pub message: Message,
    /// The endpoints it goes to.
    pub route: Route,
    /// Keeps its content until then instead of the server's retention window.
    pub payload_expires_at: Option<Timestamp>,
    /// Its application (Svix's inline `application`), made when none has this one's uid.
    pub app: Option<Application>,
}

impl NewMessage {
    /// `message`, to every subscribed endpoint of its application, kept for the server's window.
    pub fn new(message: Message) -> Self {
        Self {
            message,
            route: Route::Subscribers,
            payload_expires_at: None,
            app: None,
        }
    }

    /// This message, to the endpoints `route` chooses.
    pub fn routed(self, route: Route) -> Self {
        Self { route, ..self }
    }

    /// This message, its content kept until `at` when given.
    pub fn expiring(self, at: Option<Timestamp>) -> Self {
        Self {
            payload_expires_at: at,
            ..self
        }
    }

    /// This message, written into the application whose uid is `app`'s, made from `app` when
    /// there is none.
    pub fn in_app(self, app: Application) -> Self {
        Self {
            app: Some(app),
            ..self
        }
    }

    /// Whether its deliveries may go to the engine as they are written: a scheduled one waits
    /// in the database until due, and an application's first message has no endpoint yet.
    pub fn handed_at_once(&self) -> bool {
        self.message.deliver_at.is_none() && self.app.is_none()
    }
}

impl From<Message> for NewMessage {
    fn from(message: Message) -> Self {
        Self::new(message)
    }
}

/// Messages and the delivery log. Deliveries change through [`crate::DeliveryQueue`].
#[async_trait]
pub trait MessageStore: Send + Sync {
    // Messages.
    /// Writes a message and its deliveries (one pending delivery per endpoint its route
    /// chooses) in one transaction: when this returns `Ok` both are durable. A second message
    /// with the same `event_id` in the application is a conflict and writes nothing.
    ///
    /// A message carrying its application is written into the application whose uid is that
    /// one's, made in the same transaction when there is none, so a publish refused leaves no
    /// application behind and publishes racing to make one all land in it; the message's
    /// `app_id` is replaced by that application's. Deliveries the store's
    /// [`Handoff`](crate::Handoff) takes as they are written go straight to the engine, claimed;
    /// a scheduled message's wait in the database, `pending`, until due, so a crash meanwhile
    /// loses nothing.
    async fn publish(&self, new: NewMessage) -> Result<CreatedMessage, StoreError>;
    /// The message of `app` whose id or `eventId` is `id_or_event_id`.
    async fn get_message(
        &self,
        app: &AppId,
        id_or_event_id: &str,
    ) -> Result<Option<Message>, StoreError>;
    /// An application's messages, newest first.
    async fn list_messages(
        &self,
        app: &AppId,
        filter: &MessageFilter,
        page: &PageRequest,
    ) -> Result<Page<Message>, StoreError>;

    // Deliveries and attempts (the delivery log).
    /// How the deliveries of each of `messages` stand (a message without deliveries is
    /// missing from the answer). One indexed read for a page of a message list.
    async fn delivery_tallies(
        &self,
        messages: &[MessageId],
    ) -> Result<HashMap<MessageId, DeliveryTally>, StoreError>;
    /// Every endpoint a message was routed to, with where its delivery stands.
    async fn list_message_deliveries(
        &self,
        app: &AppId,
        message: &Message,
    ) -> Result<Vec<(Endpoint, Delivery)>, StoreError>;
    /// The messages routed to an endpoint with where each stands, newest first.
    async fn list_endpoint_deliveries(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<(Message, Delivery)>, StoreError>;
    /// Attempts for one message, newest first.
    async fn list_attempts_by_message(
        &self,
        app: &AppId,
        message: &Message,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError>;
    /// Attempts to one endpoint, newest first.
    async fn list_attempts_by_endpoint(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError>;
    /// What became of the deliveries to `endpoint` of the messages created in
    /// `since..until`, and of the attempts made to it in that time.
    async fn endpoint_stats(
        &self,
        endpoint: &Endpoint,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<EndpointStats, StoreError>;
    /// The history of `endpoint` in the slices of `window`, one [`HealthBucket`] per slice,
    /// oldest first: what the portal's health charts draw.
    async fn endpoint_history(
        &self,
        endpoint: &Endpoint,
        window: &HealthWindow,
    ) -> Result<Vec<HealthBucket>, StoreError>;
    /// The oldest message whose delivery to `endpoint` is pending or in flight, if any.
    async fn oldest_pending(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Option<OldestPending>, StoreError>;
    /// One attempt of a message.
    async fn get_attempt(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<Option<Attempt>, StoreError>;
}
