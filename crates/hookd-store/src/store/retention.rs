//! [`RetentionStore`]: keeping the database's size in check. Messages' content (payloads and
//! attempts) is purged once it is no longer needed, and callers may drop content at once
//! (expunge).
//!
//! A message's content is needed while any of its deliveries is still to do (`pending` or
//! `sending`): such a message is never purged, however old. Once every delivery is settled
//! (succeeded, or failed for good) the content goes when its retention runs out: the message's
//! own `payload_expires_at` (Svix's `payloadRetentionPeriod`) if it has one, otherwise the
//! server's window after its creation. "Purged" means: the payload set NULL (the API shows
//! `{"expired": true}`, as Svix does), every attempt row of the message deleted, and the
//! message stamped `purged_at` so no later pass looks at it again. The message row and its
//! delivery rows stay, small, as the record of what was sent where, until the records' own
//! time runs out ([`PurgeRequest::records_before`]): then the message and its deliveries are
//! deleted. Its `eventId`, if it had one, stays taken for its application until
//! [`PurgeRequest::event_ids_before`] passes its creation (a small row of its own), so a
//! producer retrying an old event still hears "already exists" however long ago the record went.
//!
//! Purging runs in small batches, each one short transaction, so it never holds the database
//! (SQLite's one writer above all) long enough to stall deliveries. A pass walks two indexes
//! that hold only messages not purged yet, in due order, and a [`PurgeCursor`] carries it from
//! batch to batch, so messages kept back by a pending delivery are looked at once per pass,
//! never again and again by every batch.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{MessageId, Timestamp};

use crate::StoreError;

/// Where a purge pass has got to. A pass starts at [`PurgeCursor::default`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PurgeCursor {
    /// Walking the messages on the server's window, oldest first, after this one.
    Window(Option<MessageId>),
    /// Walking the messages with their own expiry, soonest first, after this one.
    Expiry(Option<(Timestamp, MessageId)>),
    /// Walking the purged messages, oldest first, after this one, deleting their records.
    Records(Option<MessageId>),
    /// Releasing the `eventId`s of deleted records whose time has run out.
    EventIds,
}

impl Default for PurgeCursor {
    fn default() -> Self {
        Self::Window(None)
    }
}

/// One purge batch to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PurgeRequest {
    /// The current time: messages whose own expiry is at or before it are due.
    pub now: Timestamp,
    /// Messages without their own expiry created before this time are due (`now` minus the
    /// server's retention window).
    pub window_start: Timestamp,
    /// Purged messages created before this time lose their records (the message and delivery
    /// rows); `None` keeps records for ever (and the pass ends after the content's walks).
    pub records_before: Option<Timestamp>,
    /// The `eventId` of a deleted record stays taken while its message's creation is at or
    /// after this time.
    pub event_ids_before: Timestamp,
    /// Most messages looked at in this batch (one transaction).
    pub limit: usize,
    pub cursor: PurgeCursor,
}

/// What one purge batch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    /// Messages looked at (due ones, purged or kept for a delivery still to do).
    pub examined: usize,
    /// Messages purged.
    pub messages: usize,
    /// Attempt rows deleted with them.
    pub attempts: u64,
    /// Messages whose records (message and delivery rows) were deleted.
    pub records: usize,
    /// Delivery rows deleted with those records.
    pub deliveries: u64,
    /// `eventId`s released (taken no more).
    pub event_ids: u64,
    /// Where the next batch starts; `None` when this pass is over.
    pub next: Option<PurgeCursor>,
}

/// Retention and expunging.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Runs the batch `request.cursor` points at, up to `request.limit` messages (or
    /// `eventId`s), in one transaction: purging due content, deleting due records, or releasing
    /// `eventId`s. Messages with a delivery `pending` or `sending` are skipped and keep
    /// everything.
    async fn purge_batch(&self, request: &PurgeRequest) -> Result<Purged, StoreError>;

    /// Drops a message's payload now, whatever its deliveries (a payload sent by mistake);
    /// deliveries still to do then fail to send. `NotFound("message")` if it is gone.
    async fn expunge_message_content(&self, message: &Message) -> Result<(), StoreError>;

    /// Drops an attempt's response body and head now: the body reads [`EXPUNGED`] (Svix's
    /// word), the head empty. `NotFound("attempt")` if the message has no such attempt.
    async fn expunge_attempt_content(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<(), StoreError>;
}

/// What an expunged attempt's response reads.
pub const EXPUNGED: &str = "EXPUNGED";
