//! [`OutboxStore`]: the transactional outbox, and the signals that let hookd processes sharing
//! one database react to each other's writes at once.
//!
//! Applications insert outbox rows inside their own transactions (the table is a published
//! contract: docs/outbox.md), so an event exists exactly when the business change committed.
//! hookd relays each committed row into a message and its deliveries in one transaction that
//! also deletes the row: a row is relayed once, however many relays run. Outbox tables in
//! producers' own databases (outbox sources) cannot share hookd's transaction: their rows are
//! published under their source and row id, so each still becomes one message.

use std::sync::Arc;

use async_trait::async_trait;
use hookd_core::Timestamp;
use tokio::sync::Notify;

use crate::StoreError;
use crate::outbox::OutboxRow;

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

    /// Counts one row's fate.
    pub fn count(&mut self, fate: &RowFate) {
        match fate {
            RowFate::Published { deliveries } => {
                self.messages += 1;
                self.deliveries += deliveries;
            }
            RowFate::AlreadyPublished => {}
            RowFate::Refused(_) => self.failed += 1,
        }
    }
}

/// What became of one row read from an outbox source (an outbox table in a producer's own
/// database), in the order the rows were given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowFate {
    /// The row is now a message with this many deliveries.
    Published { deliveries: usize },
    /// The row was published before (a relay stopped before removing it from its table).
    AlreadyPublished,
    /// The row breaks the rules a publish through the API would break; why.
    Refused(String),
}

impl RowFate {
    /// Whether the row is done with and may be removed from its table.
    pub fn published(&self) -> bool {
        !matches!(self, Self::Refused(_))
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

    /// Publishes `rows`, read from the outbox table of the producer database named `source`,
    /// in one transaction: each row becomes a message (created at `now`) with its deliveries,
    /// recorded under (`source`, row id), or is refused with the reason. A row recorded before
    /// is not published again, so a relay that stopped between this commit and the row's
    /// removal from its table removes it on its next pass and nothing is sent twice. Returns
    /// each row's fate, in the order given.
    async fn relay_source_rows(
        &self,
        source: &str,
        rows: Vec<OutboxRow>,
        rules: &RelayRules,
        now: Timestamp,
    ) -> Result<Vec<RowFate>, StoreError>;

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
