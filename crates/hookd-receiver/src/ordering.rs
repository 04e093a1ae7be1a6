//! The ordering helper: events about one thing (an order, a consignment) can arrive out of
//! order, a late retry after a newer event. Each event carries the thing's version; the state
//! is replaced only by a higher version, in one conditional upsert. Never read-then-write: two
//! workers that both read version 2 would let the slower one write stale data.

use std::future::Future;

use crate::StoreError;

/// What [`VersionStore::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The version was newer than the stored one (or the key was new): the state is replaced.
    Newer,
    /// The stored version is the same or higher: nothing changed.
    Stale,
}

/// The latest version of each key and its state, on SQLite ([`crate::SqliteVersions`]) or
/// PostgreSQL ([`crate::PgVersions`]).
pub trait VersionStore: Send + Sync {
    /// Stores `state` (text, e.g. JSON) at `version` for `key` only if `version` is higher than
    /// the stored one: `INSERT … ON CONFLICT (key) DO UPDATE … WHERE stored.version <
    /// excluded.version`, one statement.
    fn apply(
        &self,
        key: &str,
        version: i64,
        state: &str,
    ) -> impl Future<Output = Result<Applied, StoreError>> + Send;

    /// The stored version and state of `key`.
    fn get(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<(i64, String)>, StoreError>> + Send;
}
