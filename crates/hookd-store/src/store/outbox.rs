//! [`OutboxStore`]: the transactional outbox, and the signals that let hookd processes sharing
//! one database react to each other's writes at once.
//!
//! Applications insert outbox rows inside their own transactions (the table is a published
//! contract: docs/outbox.md), so an event exists exactly when the business change committed.
//! hookd relays each committed row into a message and its deliveries in one transaction that
//! also deletes the row: a row is relayed once, however many relays run.

use std::sync::Arc;

use async_trait::async_trait;
use hookd_core::Timestamp;
use tokio::sync::Notify;

use crate::StoreError;

/// The rules an outbox row must meet, the same as a message published through the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayRules {
    /// Refuse event types that are not in the catalog or are archived.
    pub strict_event_types: bool,
    /// Largest payload, in bytes.
    pub max_payload_bytes: usize,
}

/// What one relay pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Relayed {
    /// Rows turned into messages (and deleted).
    pub messages: usize,
    /// Delivery rows those messages created.
    pub deliveries: usize,
    /// Rows kept with the reason they could not be relayed.
    pub failed: usize,
}

impl Relayed {
    /// Rows this pass took out of the waiting queue.
    pub fn rows(&self) -> usize {
        self.messages + self.failed
    }
}

/// Where wake-ups from other processes (and from producers' commits) go.
#[derive(Clone, Debug, Default)]
pub struct Wakeups {
    /// Outbox rows were committed.
    pub outbox: Arc<Notify>,
    /// Another process created deliveries.
    pub deliveries: Arc<Notify>,
}

/// The outbox relay's storage, and cross-process signals.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Relays up to `limit` waiting outbox rows, oldest first, in one transaction: each becomes
    /// a message (created at `now`) with its deliveries and is deleted, or keeps why it cannot
    /// be relayed in `error` and is skipped from then on. A bad row never blocks the rows
    /// behind it. Rows another relay holds are skipped, so concurrent relays never relay a row
    /// twice; rows of uncommitted or rolled-back transactions are never seen.
    async fn relay_outbox(
        &self,
        limit: usize,
        rules: &RelayRules,
        now: Timestamp,
    ) -> Result<Relayed, StoreError>;

    /// Tells every other hookd process sharing the database that deliveries were created, so
    /// their engines claim at once instead of at their next poll. Nothing on SQLite (one
    /// process).
    async fn announce_deliveries(&self) -> Result<(), StoreError>;

    /// Starts a background task that notifies `wakeups` when producers commit outbox rows or
    /// other processes announce deliveries (this store's own announcements are not passed on:
    /// its engine was woken when it made them); it lives as long as the runtime. Returns `false`
    /// when the database has no such signals (SQLite), where callers poll instead.
    async fn watch(&self, wakeups: Wakeups) -> Result<bool, StoreError>;
}
