//! [`PollerStore`]: what a polling destination's consumers read. A polling destination gets no
//! deliveries: its consumers read the application's messages themselves, in id order (ids
//! sort by creation time), and the server remembers where each named consumer got to.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{AppId, EndpointId, Timestamp};

use crate::{MessageFilter, Page, StoreError};

/// One page of an application's messages for a poller, oldest first.
#[derive(Clone, Debug)]
pub struct PollRequest<'a> {
    pub app: &'a AppId,
    /// Messages whose id sorts after this text: the last message id a page answered, or
    /// `MessageId::lowest_at(t)` to start at time `t`.
    pub after: &'a str,
    /// Messages whose id sorts below this text only: where the poller stops for now (ids made
    /// later may still be committing; see the API's poller).
    pub below: &'a str,
    /// The poll's own filters: `event_types` and `channel` (the others are not read).
    pub filter: &'a MessageFilter,
    pub limit: usize,
}

/// Polling destinations' messages and their consumers' positions.
#[async_trait]
pub trait PollerStore: Send + Sync {
    /// Up to `request.limit` messages in id order; `has_more` says more are below the cut.
    async fn poll_messages(&self, request: &PollRequest<'_>) -> Result<Page<Message>, StoreError>;

    /// Where `consumer` of the polling destination `endpoint` reads next, if it polled before.
    async fn consumer_position(
        &self,
        endpoint: &EndpointId,
        consumer: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Remembers `position` as where `consumer` of `endpoint` reads next.
    async fn set_consumer_position(
        &self,
        endpoint: &EndpointId,
        consumer: &str,
        position: &str,
        at: Timestamp,
    ) -> Result<(), StoreError>;
}
