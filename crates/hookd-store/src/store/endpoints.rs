//! [`EndpointStore`]: the URLs an application's messages are delivered to.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hookd_core::model::{Endpoint, Message, SealedKeys};
use hookd_core::{AppId, EndpointId, Timestamp};

use crate::{Page, PageRequest, StoreError};

/// A change to an endpoint's row, and what is written in the same transaction.
#[derive(Clone, Copy, Debug)]
pub struct EndpointUpdate<'a> {
    /// The row's new mutable fields (its keys change only through `keys`).
    pub endpoint: &'a Endpoint,
    /// Whether the endpoint was disabled in the read `endpoint` was built from (read, modify,
    /// write). If it no longer is, and `endpoint` keeps that stale state rather than asking
    /// for one, the update is refused ([`StoreError::Conflict`]): an edit of, say, the
    /// description must not re-enable an endpoint hookd disabled meanwhile. `None` writes
    /// `endpoint` as given.
    pub disabled_as_read: Option<bool>,
    /// Operational webhooks telling of the change.
    pub events: &'a [Message],
    /// Written too if the update disables or enables the endpoint.
    pub on_toggle: &'a [Message],
    /// New keys, written only if the stored ones are still the old ones.
    pub keys: Option<KeySwap<'a>>,
}

impl<'a> EndpointUpdate<'a> {
    /// `endpoint` written as given, with nothing else.
    pub fn new(endpoint: &'a Endpoint) -> Self {
        Self {
            endpoint,
            disabled_as_read: None,
            events: &[],
            on_toggle: &[],
            keys: None,
        }
    }
}

/// Sealed keys replacing `old`, if `old` is what is stored.
#[derive(Clone, Copy, Debug)]
pub struct KeySwap<'a> {
    pub old: &'a SealedKeys,
    pub new: &'a SealedKeys,
}

/// What re-sealing reads and writes of an endpoint: its sealed keys and the custom headers it
/// keeps in clear (those whose names turn out to carry credentials move into the keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedRow {
    pub id: EndpointId,
    pub keys: SealedKeys,
    pub headers: BTreeMap<String, String>,
}

/// An application's endpoints. Disabling one for delivery failures is
/// [`crate::DeliveryQueue::disable_endpoint`].
///
/// Creating, changing and deleting take `events`: operational-webhook messages (of the
/// operations application) telling of the change, written in the change's transaction, each
/// with a delivery per subscribed endpoint; nothing is written if the change fails. A change
/// also takes `on_toggle`, written only if it disables or enables the endpoint.
#[async_trait]
pub trait EndpointStore: Send + Sync {
    /// Inserts `endpoint`; a uid taken within the application is a conflict.
    async fn create_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        self.create_endpoint_with_events(endpoint, &[]).await
    }
    /// [`Self::create_endpoint`], writing `events` with it.
    async fn create_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError>;
    /// The endpoint of `app` whose id or uid is `id_or_uid`.
    async fn get_endpoint(
        &self,
        app: &AppId,
        id_or_uid: &str,
    ) -> Result<Option<Endpoint>, StoreError>;
    /// How many endpoints `app` has, destinations included: what `--max-endpoints-per-app` holds it to.
    async fn count_endpoints(&self, app: &AppId) -> Result<u64, StoreError>;
    /// An application's HTTP endpoints (of kind [`hookd_core::destination::Destination::Http`]) in creation order.
    async fn list_endpoints(
        &self,
        app: &AppId,
        page: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError>;
    /// An application's destinations (every endpoint of another kind) in creation order;
    /// those of hookd's own kinds (NATS JetStream, Kafka) only with `extensions`.
    async fn list_destinations(
        &self,
        app: &AppId,
        page: &PageRequest,
        extensions: bool,
    ) -> Result<Page<Endpoint>, StoreError>;
    /// Replaces the mutable fields of the stored endpoint with `endpoint.id`, except its keys
    /// (see [`Self::replace_endpoint_keys`]).
    async fn update_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        self.update_endpoint_with(&EndpointUpdate::new(endpoint))
            .await
            .map(drop)
    }
    /// Writes `update` in one transaction: the row, its events, `on_toggle` if it changes
    /// whether the endpoint is disabled, and its new keys. Whether it toggles is judged on the
    /// stored row, read (locked) in the transaction, not on what the caller read before: so of
    /// two callers racing to disable an endpoint only one writes `on_toggle`, and none does
    /// when hookd's own disabling ([`crate::DeliveryQueue::disable_endpoint`]) came first.
    ///
    /// `false` (and nothing written) when the update swaps keys and another writer changed
    /// them first: the caller starts again from the stored keys, so no rotation is lost.
    async fn update_endpoint_with(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError>;
    /// Replaces an endpoint's sealed keys with `new` if they are still `old`: `false` (nothing
    /// written) when another writer changed them first, so no rotation is ever lost to a race.
    /// An unknown endpoint is [`StoreError::NotFound`].
    async fn replace_endpoint_keys(
        &self,
        endpoint: &EndpointId,
        old: &SealedKeys,
        new: &SealedKeys,
        at: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Every endpoint's sealed keys and clear headers, across applications, in id order after
    /// `after`: what re-sealing under a new master key walks through.
    async fn list_sealed_keys(
        &self,
        after: Option<&EndpointId>,
        limit: usize,
    ) -> Result<Vec<SealedRow>, StoreError>;
    /// Writes `new`'s keys and clear headers if the stored keys are still `old`'s (every
    /// change of an endpoint's headers through the API seals its keys anew, so the keys alone
    /// tell whether anyone wrote meanwhile): `false`, nothing written, otherwise.
    async fn replace_sealed_row(
        &self,
        old: &SealedKeys,
        new: &SealedRow,
        at: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Deletes an endpoint with its deliveries and attempts.
    async fn delete_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        self.delete_endpoint_with_events(endpoint, &[]).await
    }
    /// [`Self::delete_endpoint`], writing `events` with it.
    async fn delete_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError>;
}

/// Refuses an update built on a stale read of whether the endpoint is disabled (see
/// [`EndpointUpdate::disabled_as_read`]): `stored` is the locked row's state,
/// `wanted` the update's.
pub(crate) fn check_disabled_as_read(
    disabled_as_read: Option<bool>,
    stored: bool,
    wanted: bool,
) -> Result<(), StoreError> {
    match disabled_as_read {
        Some(read) if read != stored && wanted == read => Err(StoreError::Conflict(format!(
            "the endpoint was {} while this update was being made; read it again and retry",
            if stored { "disabled" } else { "enabled" }
        ))),
        _ => Ok(()),
    }
}
