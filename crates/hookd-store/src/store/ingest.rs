//! [`IngestStore`]: the ingest gateway's sources, the headers of the requests they accepted,
//! and a bounded record of the requests they refused.
//!
//! A source owns one application ([`IngestSource::app_id`], whose uid is
//! [`internal_app_uid`]): its endpoints are where the source forwards, its messages are the
//! accepted requests, so the delivery engine forwards them as any message. The application is
//! written first and the source after it; deleting the application deletes the source, so
//! removing a source is one write.

use async_trait::async_trait;
use hookd_core::model::Metadata;
use hookd_core::{AppId, MessageId, RejectionId, SourceId, Timestamp};

use crate::{Page, PageRequest, StoreError};

/// The uid prefix of the applications sources own; no other application may have one.
pub const INTERNAL_APP_PREFIX: &str = "hookd-ingest-";

/// The uid of the application `source` owns.
pub fn internal_app_uid(source: &SourceId) -> String {
    format!("{INTERNAL_APP_PREFIX}{source}")
}

/// Whether an application uid is one a source owns.
pub fn is_internal_app_uid(uid: Option<&str>) -> bool {
    uid.is_some_and(|uid| uid.starts_with(INTERNAL_APP_PREFIX))
}

/// How many refused requests each source keeps: the newest ones.
pub const REJECTIONS_KEPT: u64 = 100;

/// A source as stored. Its provider configuration and tokens are in `sealed` (sealed by the
/// API with the keyring); the store finds a source by a token's SHA-256.
#[derive(Clone, Debug, PartialEq)]
pub struct IngestSource {
    pub id: SourceId,
    pub uid: Option<String>,
    pub name: String,
    /// Svix's `type`: the provider whose scheme verifies its requests.
    pub kind: String,
    /// The configuration (with its secrets) and the tokens, sealed.
    pub sealed: String,
    pub metadata: Metadata,
    /// The application it owns.
    pub app_id: AppId,
    /// SHA-256 (hex) of the current token, the last part of its URL.
    pub token_hash: String,
    /// SHA-256 of the token before the last rotation, and until when it still works.
    pub previous_token_hash: Option<String>,
    pub previous_until: Option<Timestamp>,
    /// Largest accepted body, when not the server's.
    pub max_body_bytes: Option<u64>,
    /// Requests per second accepted, when not the server's.
    pub rate_limit: Option<u32>,
    /// A JSON pointer (`/data/object/customer`) into a request's body: the value there is its
    /// message's ordering key, so requests about one thing are forwarded one at a time.
    pub ordering_pointer: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The headers of a request a source accepted, kept beside its message.
#[derive(Clone, Debug, PartialEq)]
pub struct IngestRequest {
    pub message_id: MessageId,
    pub source_id: SourceId,
    pub event_type: String,
    pub event_id: Option<String>,
    /// The headers kept, by name.
    pub headers: Metadata,
    pub remote_addr: Option<String>,
    pub received_at: Timestamp,
}

/// A request a source refused: never its body.
#[derive(Clone, Debug, PartialEq)]
pub struct IngestRejection {
    /// Sorts by time.
    pub id: RejectionId,
    pub source_id: SourceId,
    /// The verifier's reason (`signature`, `timestamp`, …).
    pub reason: String,
    pub detail: String,
    pub header_names: Vec<String>,
    pub remote_addr: Option<String>,
    pub received_at: Timestamp,
}

/// The ingest gateway's sources and their request records.
#[async_trait]
pub trait IngestStore: Send + Sync {
    /// Writes a new source (its application exists already); a taken uid is a conflict.
    async fn create_source(&self, source: &IngestSource) -> Result<(), StoreError>;

    /// The source with this id or uid.
    async fn get_source(&self, id_or_uid: &str) -> Result<Option<IngestSource>, StoreError>;

    /// The source whose current token, or previous token still valid at `now`, has this
    /// SHA-256.
    async fn source_by_token(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<IngestSource>, StoreError>;

    /// The source that owns application `app`, if one does.
    async fn source_of_app(&self, app: &AppId) -> Result<Option<IngestSource>, StoreError>;

    async fn list_sources(&self, page: &PageRequest) -> Result<Page<IngestSource>, StoreError>;

    /// Rewrites a source's fields (all but its id, application and creation time).
    async fn update_source(&self, source: &IngestSource) -> Result<(), StoreError>;

    /// Replaces a source's sealed configuration with `new` if it is still `old` (re-sealing
    /// under another master key); `false` if it changed meanwhile.
    async fn replace_source_sealed(
        &self,
        id: &SourceId,
        old: &str,
        new: &str,
    ) -> Result<bool, StoreError>;

    /// Keeps the headers of an accepted request (its message is written).
    async fn record_ingest_request(&self, request: &IngestRequest) -> Result<(), StoreError>;

    /// The requests a source accepted, newest first.
    async fn list_ingest_requests(
        &self,
        source: &SourceId,
        page: &PageRequest,
    ) -> Result<Page<IngestRequest>, StoreError>;

    /// Records a refused request, forgetting the source's oldest beyond [`REJECTIONS_KEPT`].
    async fn record_rejection(&self, rejection: &IngestRejection) -> Result<(), StoreError>;

    /// The requests a source refused, newest first.
    async fn list_rejections(
        &self,
        source: &SourceId,
        page: &PageRequest,
    ) -> Result<Page<IngestRejection>, StoreError>;
}
