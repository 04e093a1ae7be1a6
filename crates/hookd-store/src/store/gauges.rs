//! [`GaugeStore`]: the few numbers about the whole database that `/metrics` shows as gauges.
//!
//! They are sampled by a periodic task, not per scrape, so a busy Prometheus cannot load the
//! database. Every query walks an index (the deliveries of enabled endpoints through
//! `deliveries_endpoint_due`, the waiting outbox through `outbox_waiting`), never the
//! settled history.

use std::time::Duration;

use async_trait::async_trait;
use hookd_core::Timestamp;

use crate::StoreError;

/// One sample of the database-wide gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Deliveries of enabled endpoints that are due now: pending and due, or claimed by a
    /// process whose lease has run out.
    pub due: u64,
    /// Pending deliveries of enabled endpoints due later (retries waiting for their time).
    pub scheduled: u64,
    /// Deliveries claimed under a live lease: attempts in flight in some process.
    pub in_flight: u64,
    /// How long the oldest due delivery of an enabled endpoint has waited past its due time;
    /// zero when nothing is due.
    pub oldest_due_age: Duration,
    /// Endpoints disabled (by hand, by `410 Gone` or by days of failures).
    pub endpoints_disabled: u64,
    /// How long the oldest outbox row waiting to be relayed has waited; zero when none waits.
    /// Rows kept with an `error` are not waiting.
    pub outbox_lag: Duration,
    /// Bytes hookd's data takes in the database: SQLite's whole file (its free pages too, which
    /// new rows reuse), PostgreSQL's tables of hookd's schema with their indexes and TOAST.
    pub database_bytes: u64,
}

/// The database-wide gauges of `/metrics`.
#[async_trait]
pub trait GaugeStore: Send + Sync {
    /// Samples the gauges as of `now`.
    async fn gauges(&self, now: Timestamp) -> Result<Gauges, StoreError>;
}

/// The age at `now` of something stamped `since` (unix ms), zero if it is in the future.
pub(crate) fn age(now: Timestamp, since: Option<i64>) -> Duration {
    since.map_or(Duration::ZERO, |since| {
        Duration::from_millis(u64::try_from(now.as_millis() - since).unwrap_or(0))
    })
}
