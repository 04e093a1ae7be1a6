//! [`NoticeStore`]: where the e-mail notices to customers have got to.
//!
//! A notice follows an operational event (a message of the operations application, written in
//! the transaction of the change it tells of), so a notice cannot be lost to a crash: the
//! events stay, and one row records the last one done. One process at a time sends them: it
//! holds a turn that runs out unless renewed, so when it dies another takes over from the row.
//! An event done but not yet recorded when a process dies is done again (at least once).

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{MessageId, Timestamp};

use crate::StoreError;

/// The e-mail notices' progress through the operational events.
#[async_trait]
pub trait NoticeStore: Send + Sync {
    /// Gives `owner` the turn to send notices until `until`, if no other owner holds one past
    /// `now`, and returns the last event done; `None` while another holds it. The very first
    /// turn starts after `start` (events before it are history, never sent).
    async fn notice_turn(
        &self,
        owner: &str,
        now: Timestamp,
        until: Timestamp,
        start: &MessageId,
    ) -> Result<Option<MessageId>, StoreError>;

    /// Records that the events up to `done` are done, if `owner` still holds the turn; `false`
    /// if it lost it (another process goes on from the last record).
    async fn notices_done(&self, owner: &str, done: &MessageId) -> Result<bool, StoreError>;

    /// Up to `limit` operational events after `after`, oldest first.
    async fn operational_events(
        &self,
        after: &MessageId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError>;
}
