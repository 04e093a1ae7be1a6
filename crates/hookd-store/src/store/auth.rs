//! [`AuthStore`]: API tokens and `Idempotency-Key` replays.

use async_trait::async_trait;
use hookd_core::{AppId, EndpointId, Timestamp};

use crate::{Page, PageRequest, StoreError};

/// An API token as stored: only a hash of the secret text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiToken {
    pub id: String,
    /// Lowercase hex SHA-256 of the token text.
    pub token_hash: String,
    /// `None` for an admin token; the one application an app-scoped token may touch.
    pub app_id: Option<AppId>,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    /// What the token is for, as its creator named it.
    pub name: String,
    /// When it was revoked; a revoked token authenticates nothing.
    pub revoked_at: Option<Timestamp>,
    /// Requests per second this token may make, if not the server's default.
    pub rate_limit: Option<u32>,
    /// The token may only read (GET).
    pub read_only: bool,
    /// A poller token's polling destination: it may only poll that (its `app_id` is the
    /// destination's application).
    pub endpoint_id: Option<EndpointId>,
}

/// A response kept for `Idempotency-Key` replays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// API tokens and kept responses for `Idempotency-Key` replays.
#[async_trait]
pub trait AuthStore: Send + Sync {
    // API tokens.
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError>;
    /// The token whose hash is `token_hash`, expired or not.
    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError>;
    /// Whether any admin token that is not revoked is stored (first start creates one when
    /// none is).
    async fn has_admin_token(&self) -> Result<bool, StoreError>;
    /// Tokens in id order (revoked ones too: they stay on record).
    async fn list_tokens(&self, page: &PageRequest) -> Result<Page<ApiToken>, StoreError>;
    /// Marks the token `id` revoked at `at`; an unknown id is [`StoreError::NotFound`].
    /// Revoking a revoked token keeps its first revocation time.
    async fn revoke_token(&self, id: &str, at: Timestamp) -> Result<(), StoreError>;
    /// Makes the poller tokens of `endpoint` that would still work at `at` expire then: a
    /// rotation's old tokens keep working a while, then stop.
    async fn expire_poller_tokens(
        &self,
        endpoint: &EndpointId,
        at: Timestamp,
    ) -> Result<(), StoreError>;

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
