//! The inbox: each `webhook-id` is recorded once, by one conditional insert, so every retry of
//! a delivery is recognised as a duplicate, acknowledged and ignored. The row keeps the payload
//! until it is processed, which makes the inbox the receiver's work queue too: recording and
//! enqueueing are one write, so an acknowledged webhook cannot be lost between them.
//!
//! Ids are kept for a retention window after they are processed (default 30 days, longer than
//! hookd's ~3-day retry schedule and Stripe's 30-day manual resend) and purged after it; a
//! pending row is never purged.
//!
//! The raw payload is dropped when a webhook is processed, unless the inbox keeps payloads
//! ([`InboxOptions::keep_payloads`]): then it stays for that long after processing, so a
//! webhook processed wrongly (a bug since fixed) can be processed again from the bytes that
//! arrived ([`Inbox::reprocess`]) rather than asking the sender to resend.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::StoreError;

/// How long ids are kept by default: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// How long a claimed row stays with its worker by default before another may take it.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5 * 60);

/// What [`Inbox::record`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// First time: the webhook is now stored, pending, for a worker to process.
    New,
    /// This id was recorded before (a retry or a resend): acknowledge it and do nothing else.
    Duplicate,
}

/// A recorded webhook waiting to be processed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Its id (`webhook-id`).
    pub webhook_id: String,
    /// The body as received.
    pub payload: Vec<u8>,
    /// When it was first recorded, unix milliseconds.
    pub received_at: i64,
}

/// Where "now" comes from: the system clock, or a clock a test moves.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Settings every inbox backend shares.
#[derive(Clone)]
pub struct InboxOptions {
    /// Ids processed longer ago than this are purged.
    pub retention: Duration,
    /// How long a claim lasts; a worker that dies mid-work gives its rows back after it.
    pub lease: Duration,
    /// How long a processed webhook's raw payload is kept for [`Inbox::reprocess`]; zero (the
    /// default) drops it when processed. Payloads go at the latest with their ids, after
    /// `retention`.
    pub keep_payloads: Duration,
    /// The time source.
    pub clock: Clock,
}

impl Default for InboxOptions {
    fn default() -> Self {
        Self {
            retention: DEFAULT_RETENTION,
            lease: DEFAULT_LEASE,
            keep_payloads: Duration::ZERO,
            clock: Arc::new(SystemTime::now),
        }
    }
}

impl std::fmt::Debug for InboxOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxOptions")
            .field("retention", &self.retention)
            .field("lease", &self.lease)
            .field("keep_payloads", &self.keep_payloads)
            .finish_non_exhaustive()
    }
}

impl InboxOptions {
    /// Now, by the clock, in unix milliseconds (the unit of the tables' times).
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// The processing time (unix ms) before which ids are purged.
    pub fn purge_before_ms(&self) -> i64 {
        self.ms_ago(self.retention)
    }

    /// The processing time (unix ms) before which kept payloads are dropped.
    pub fn drop_payloads_before_ms(&self) -> i64 {
        self.ms_ago(self.keep_payloads)
    }

    fn ms_ago(&self, duration: Duration) -> i64 {
        self.now_ms()
            .saturating_sub(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
    }

    /// When a claim made now ends (unix ms).
    pub fn lease_until_ms(&self) -> i64 {
        self.now_ms()
            .saturating_add(i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX))
    }
}

/// An inbox of webhook ids, on SQLite ([`crate::SqliteInbox`]) or PostgreSQL
/// ([`crate::PgInbox`]).
pub trait Inbox: Send + Sync {
    /// Records `webhook_id` with its payload if it is new; one `INSERT … ON CONFLICT DO
    /// NOTHING`, so concurrent deliveries of one id get exactly one [`Seen::New`].
    fn record(
        &self,
        webhook_id: &str,
        payload: &[u8],
    ) -> impl Future<Output = Result<Seen, StoreError>> + Send;

    /// Takes up to `limit` pending webhooks, oldest first, for this worker for one lease.
    /// Processing is at least once: a worker that dies before [`mark_processed`] leaves its
    /// rows to be claimed again when the lease ends, so processing must be idempotent (the
    /// version store makes applying state changes so).
    ///
    /// [`mark_processed`]: Inbox::mark_processed
    fn claim(&self, limit: u32) -> impl Future<Output = Result<Vec<Pending>, StoreError>> + Send;

    /// Marks a webhook processed: it leaves the queue and its payload is dropped, or kept for
    /// [`InboxOptions::keep_payloads`]; its id stays until purged, still catching duplicates.
    fn mark_processed(
        &self,
        webhook_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// How many recorded webhooks are not processed yet (claimed or not): how far behind the
    /// workers are.
    fn backlog(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Puts a processed webhook whose payload is still kept back in the queue, to be claimed
    /// and processed again: `true` if it was, `false` if the id is unknown, still pending, or
    /// its payload is gone.
    fn reprocess(&self, webhook_id: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Drops the payloads kept longer than [`InboxOptions::keep_payloads`], and deletes ids
    /// processed longer ago than the retention window; returns how many ids it deleted.
    fn purge(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;
}
