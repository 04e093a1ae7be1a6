//! Outbox sources: transactional publishing from the application's own database.
//!
//! Most applications do not share a database with their webhook server. An *outbox source*
//! is an outbox table, `hookd_outbox`, in the producer's own database (PostgreSQL,
//! MySQL/MariaDB, or an SQLite file the application owns): the application inserts an event
//! in the same transaction as its business change, and hookd relays each committed row into
//! one message. The two databases cannot share a transaction, so each row is published under
//! its table's identity and its row id (`OutboxStore::relay_source_rows` in `hookd-store`)
//! and only then removed from the producer's table: a relay stopped between the two finds the
//! message already there and only removes the row.
//!
//! # Layout
//! - [`source`]: [`SourceSpec`], a source as configured (`NAME=URL`, an optional bound
//!   application), and [`Kind`], the database it names.
//! - [`install`]: `hookd outbox install`: the versioned table, its index and (PostgreSQL) its
//!   notification trigger, and the grants producer and relay roles need.
//! - [`table`]: [`Table`], an installed source table: take waiting rows without blocking the
//!   producer's transactions, settle them, count the backlog, listen for commits. Its
//!   per-database SQL lives in `postgres`, `mysql` and `sqlite`.
//! - `pass`: what a pass takes and settles ([`table::Taken`], [`table::Backlog`], the contract
//!   row, the settling's outcome), shared by [`table`] and the per-database sources, which
//!   import it and never [`table`].
//! - [`relay`]: [`SourceRelay`], the loop that relays one source through hookd's store, backs
//!   off while the producer's database is down, and reports per-source metrics.
//! - [`error`]: [`SourceError`], what configuring, installing or relaying a source can fail
//!   with.
//! - `testing` (cargo feature `testing`): throwaway MySQL/MariaDB databases for tests.

pub mod error;
pub mod install;
mod mysql;
mod pass;
mod postgres;
pub mod relay;
pub mod source;
mod sqlite;
pub mod table;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::SourceError;
pub use install::{Installed, install};
pub use relay::{SourceRelay, SourceRelayConfig};
pub use source::{Kind, SourceSpec};
pub use table::Table;

/// The outbox table's name in every kind of database.
pub const TABLE: &str = "hookd_outbox";
/// The one-row table holding the outbox table's contract version and identity; a relay also
/// locks its row to take rows with an ordering key.
pub const CONTRACT_TABLE: &str = "hookd_outbox_contract";
/// The contract version `install` creates and the relay reads.
pub const CONTRACT_VERSION: i64 = 1;
/// The notification channel a PostgreSQL source's trigger signals at each commit.
pub const CHANNEL: &str = "hookd_outbox";
