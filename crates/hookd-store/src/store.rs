//! The [`Store`] contract: everything the API and the delivery engine read and write.
//!
//! Lookups that the API exposes by "id or uid" take the caller's text and match either, so the
//! id-or-uid rule lives in one place. Lists are keyset-paginated on ids (which sort by creation
//! time), never by offset, so paging stays fast on millions of rows.

use async_trait::async_trait;
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, EventType, Message,
};
use hookd_core::{AppId, Timestamp};

use crate::{DeliveryQueue, StoreError};

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

/// Filters for message lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageFilter {
    pub event_types: Option<Vec<String>>,
    pub channel: Option<String>,
    /// Only messages created strictly before this time.
    pub before: Option<Timestamp>,
    /// Only messages created strictly after this time.
    pub after: Option<Timestamp>,
}

/// Filters for attempt lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttemptFilter {
    pub status: Option<DeliveryStatus>,
    pub before: Option<Timestamp>,
    pub after: Option<Timestamp>,
}

/// A message accepted by [`Store::create_message`].
#[derive(Clone, Debug, PartialEq)]
pub struct CreatedMessage {
    pub message: Message,
    /// Delivery rows written with it: one per subscribed, enabled endpoint.
    pub deliveries: usize,
}

/// An API token as stored: only a hash of the secret text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiToken {
    pub id: String,
    /// Lowercase hex SHA-256 of the token text.
    pub token_hash: String,
    /// `None` for an admin token; the one application an app-scoped token may touch.
    pub app_id: Option<AppId>,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
}

/// A response kept for `Idempotency-Key` replays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// hookd's durable state. Implemented by [`crate::sqlite::SqliteStore`] and
/// [`crate::postgres::PgStore`]; both pass the same behavioural tests.
#[async_trait]
pub trait Store: DeliveryQueue + Send + Sync + 'static {
    // Applications.
    /// Inserts `app`; a taken uid is a [`StoreError::Conflict`].
    async fn create_app(&self, app: &Application) -> Result<(), StoreError>;
    /// The application whose id or uid is `id_or_uid`.
    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError>;
    /// Applications in creation order.
    async fn list_apps(&self, page: &PageRequest) -> Result<Page<Application>, StoreError>;
    /// Replaces the mutable fields of the stored application with `app.id`.
    async fn update_app(&self, app: &Application) -> Result<(), StoreError>;
    /// Deletes an application with its endpoints, messages, deliveries and attempts.
    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError>;

    // Endpoints.
    /// Inserts `endpoint`; a uid taken within the application is a conflict.
    async fn create_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError>;
    /// The endpoint of `app` whose id or uid is `id_or_uid`.
    async fn get_endpoint(
        &self,
        app: &AppId,
        id_or_uid: &str,
    ) -> Result<Option<Endpoint>, StoreError>;
    /// An application's endpoints in creation order.
    async fn list_endpoints(
        &self,
        app: &AppId,
        page: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError>;
    /// Replaces the mutable fields of the stored endpoint with `endpoint.id`.
    async fn update_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError>;
    /// Deletes an endpoint with its deliveries and attempts.
    async fn delete_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError>;

    // Event types.
    /// Inserts `event_type`; a taken name is a conflict.
    async fn create_event_type(&self, event_type: &EventType) -> Result<(), StoreError>;
    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError>;
    /// Event types by name; archived ones only when asked.
    async fn list_event_types(
        &self,
        page: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError>;
    async fn update_event_type(&self, event_type: &EventType) -> Result<(), StoreError>;
    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError>;

    // Messages.
    /// Writes a message and one pending delivery per subscribed, enabled endpoint of its
    /// application, due at once, in one transaction: when this returns `Ok` both are durable.
    /// A second message with the same `event_id` in the application is a conflict and writes
    /// nothing.
    async fn create_message(&self, message: &Message) -> Result<CreatedMessage, StoreError>;
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
    /// One attempt of a message.
    async fn get_attempt(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<Option<Attempt>, StoreError>;

    // API tokens.
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError>;
    /// The token whose hash is `token_hash`, expired or not.
    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError>;
    /// Whether any admin token is stored (first start creates one when none is).
    async fn has_admin_token(&self) -> Result<bool, StoreError>;

    // Idempotency-Key replays.
    /// The response kept under `key`, unless it expired before `now`.
    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError>;
    /// Keeps `response` under `key` until `expires_at`; a response still live at `now` wins.
    async fn put_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError>;
}
