//! What the broker sinks (RabbitMQ, NATS, Kafka) share, so a consumer reads the same headers
//! from any of them, every publish is bounded like an HTTP attempt, and a connection is kept
//! and replaced the same way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::{Publication, Published, SinkError};

/// How long one publish may take, connecting included, unless the destination says otherwise:
/// the engine's default attempt timeout for HTTP endpoints.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// The header carrying the message's event type.
pub const EVENT_TYPE_HEADER: &str = "event-type";

/// The header carrying the message's ordering key, when it has one.
pub const ORDERING_KEY_HEADER: &str = "ordering-key";

/// Every header a broker message carries: `webhook-id`, `webhook-timestamp`,
/// `webhook-signature`, the event type, and the ordering key when there is one.
pub fn headers(publication: &Publication) -> impl Iterator<Item = (&str, &str)> {
    let signed = publication
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()));
    let event_type = (EVENT_TYPE_HEADER, publication.event_type.as_str());
    let ordering_key = publication
        .ordering_key
        .as_deref()
        .map(|key| (ORDERING_KEY_HEADER, key));
    signed.chain([event_type]).chain(ordering_key)
}

/// `work` within `limit`, or [`SinkError::Timeout`].
pub async fn within<T>(
    limit: Duration,
    work: impl Future<Output = Result<T, SinkError>>,
) -> Result<T, SinkError> {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or(Err(SinkError::Timeout))
}

/// The broker's acknowledgements of a batch, one per publication, as one summary.
pub fn summary(acks: Vec<String>) -> Published {
    Published {
        summary: acks.join("; "),
    }
}

/// A connection (or client) kept across publishes: made on first use, made again once it is
/// found broken or was forgotten after a failed publish. Concurrent publishes share it.
pub struct Kept<T> {
    slot: Mutex<Option<Arc<T>>>,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self {
            slot: Mutex::new(None),
        }
    }
}

impl<T> Kept<T> {
    /// The kept one if `usable` still says so, else a new one from `connect`; and whether it
    /// was kept (rather than made now).
    pub async fn get(
        &self,
        usable: impl FnOnce(&T) -> bool,
        connect: impl Future<Output = Result<T, SinkError>>,
    ) -> Result<(Arc<T>, bool), SinkError> {
        let mut slot = self.slot.lock().await;
        if let Some(kept) = slot.as_ref().filter(|kept| usable(kept)) {
            return Ok((Arc::clone(kept), true));
        }
        *slot = None;
        let made = Arc::new(connect.await?);
        *slot = Some(Arc::clone(&made));
        Ok((made, false))
    }

    /// The kept one, if any, without making one.
    pub async fn peek(&self) -> Option<Arc<T>> {
        self.slot.lock().await.clone()
    }

    /// Passes `result` on; when it is a connection failure, forgets `used` first, so the next
    /// publish connects again (unless another publish already did).
    pub async fn check<R>(
        &self,
        used: &Arc<T>,
        result: Result<R, SinkError>,
    ) -> Result<R, SinkError> {
        if matches!(result, Err(SinkError::Connect(_) | SinkError::Refused(_))) {
            let mut slot = self.slot.lock().await;
            if slot.as_ref().is_some_and(|kept| Arc::ptr_eq(kept, used)) {
                *slot = None;
            }
        }
        result
    }
}
