//! [`PollerStore`]: what a polling destination's consumers read. A polling destination gets no
//! deliveries: its consumers read the application's messages themselves, in id order (ids
//! sort by creation time), and the server remembers where each named consumer got to.
//!
//! An id is made before the transaction that writes its message commits, so a message can
//! become visible after one with a greater id already was: a poller that had moved past it
//! would never see it. So a poll reads only messages whose ids were made [`POLL_SETTLE`]
//! before it, by when every publish of that moment has committed (on both databases a publish
//! commits in milliseconds; a later one is refused by its timeout well before this).

use std::time::Duration;

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{AppId, EndpointId, MessageId, Timestamp};

use crate::{MessageFilter, Page, StoreError};

/// How old a message's id must be before a poll reads it.
pub const POLL_SETTLE: Duration = Duration::from_secs(5);

/// One page of an application's messages for a poller, oldest first.
#[derive(Clone, Debug)]
pub struct PollRequest<'a> {
    pub app: &'a AppId,
    /// Messages whose id sorts after this text: the last message id a page answered, or
    /// `MessageId::lowest_at(t)` to start at time `t`.
    pub after: &'a str,
    /// The time of the poll: messages whose ids were made [`POLL_SETTLE`] before it are read.
    pub now: Timestamp,
    /// The poll's own filters: `event_types` and `channel` (the others are not read).
    pub filter: &'a MessageFilter,
    pub limit: usize,
}

/// Polling destinations' messages and their consumers' positions.
#[async_trait]
pub trait PollerStore: Send + Sync {
    /// Up to `request.limit` messages in id order; `has_more` says more are settled.
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

impl PollRequest<'_> {
    /// The id every message a poll at `now` reads sorts below.
    pub fn cut(&self) -> MessageId {
        MessageId::lowest_at(self.now.minus(POLL_SETTLE))
    }
}
