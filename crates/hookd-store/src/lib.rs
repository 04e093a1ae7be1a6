//! hookd's durable storage.
//!
//! The API and the delivery engine talk to a [`Store`]; they never see SQL. Two
//! implementations keep the same contract, checked by one behavioural test suite run
//! on both (`tests/*_behaviour.rs`, one file per resource): embedded SQLite (the default: one file, no other service) and
//! PostgreSQL (for several hookd processes sharing one database).
//!
//! # Layout
//! - [`store`]: the contracts, and nothing else: the [`Store`] trait, which gathers one trait
//!   per resource ([`ApplicationStore`], [`EndpointStore`], [`EventTypeStore`],
//!   [`MessageStore`], [`AuthStore`], [`OutboxStore`], [`GaugeStore`], [`RetentionStore`],
//!   [`TaskStore`], [`PollerStore`], [`IngestStore`] (the ingest gateway's sources), and [`DeliveryQueue`], the deliveries as the delivery engine's work queue)
//!   with their query and result types.
//! - [`prelude`]: every store trait, for calling their methods on a concrete store.
//! - [`error`]: [`StoreError`], the one error every storage call returns.
//! - `sql`: the SQL both implementations share, written once: statements with their
//!   arguments (placeholders rendered per database at compile time), list queries, and the
//!   row decoders over both databases' row types, keyset pagination, message search. One
//!   file per resource trait, which implements it there, once for both; a backend adds only
//!   what it does its own way.
//! - [`sqlite`]: the SQLite implementation: a single writer thread that group-commits many
//!   callers' writes in one transaction, and a pool of reader connections; it runs the shared
//!   statements and keeps what only SQLite does (the writer, claims, per-row writes).
//! - [`postgres`]: the PostgreSQL implementation on `sqlx`, in a `hookd` schema, for several
//!   hookd processes sharing one database; it runs the shared statements and keeps what only
//!   PostgreSQL does (the publish task, record, notifications, row locks, arrays).
//!
//!   Both backends name a file for the job it does, the same name on both:
//!   - `publish`: writing a message and its deliveries (`sql::messages::Publish`), with the
//!     inserts the other writes share;
//!   - `queue`: the [`DeliveryQueue`] implementation, calling the queue's jobs: `claim`
//!     (taking due deliveries under a lease), `record` (settling attempts), `recover`
//!     (requeuing: recover, resend, an ordering key's next);
//!   - one file per resource it does its own way (`endpoints`, `outbox`, `gauges`,
//!     `retention`, `tasks`), and `rows` (how a shared statement runs on it).
//!
//!   What has no counterpart keeps its own name: SQLite's `writer` (the writer thread and the
//!   reader pool) and `migrate` (its schema files); PostgreSQL's `publisher` (the publish
//!   task's group commit), `held` (the connection each hot writer keeps) and `functions` (the
//!   server-side functions, with the test module `functions::plans`).
//! - `operations`: [`ensure_operations_app`], the application operational webhooks are
//!   published in.
//! - `outbox`: the outbox row's checks and the message it becomes, shared by both relays.
//! - `columns`, `json`, `purge`: what both implementations share besides statements (the
//!   column lists the row decoders read, the JSON text columns' encoding, the purge's walks).
//! - `testing` (cargo feature `testing`): throwaway SQLite files and PostgreSQL databases for
//!   tests, here and in the crates above.
//! - `migrations/{sqlite,postgres}/`: versioned schema files, applied at start.

mod columns;
pub mod error;
mod json;
mod operations;
mod outbox;
pub mod postgres;
mod purge;
mod sql;
pub mod sqlite;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::StoreError;
pub use operations::ensure_operations_app;
pub use outbox::{OutboxColumns, OutboxRow};
pub(crate) use store::skip_refused;
pub use store::*;

/// Every store trait: `use hookd_store::prelude::*;` to call store methods on a concrete store
/// (`SqliteStore`, `PgStore`). Methods of the resource traits are callable on `dyn Store`
/// without it.
pub mod prelude {
    pub use crate::store::{
        ApplicationStore, AuthStore, DeliveryQueue, EndpointStore, EventTypeStore, GaugeStore,
        IngestStore, MessageStore, NoticeStore, OutboxStore, PollerStore, RetentionStore, Store,
        TaskStore,
    };
}

use std::sync::Arc;

/// Opens the store a database URL names (`sqlite://path`, `postgres://…` or
/// `postgresql://…`) and migrates it.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        Ok(Arc::new(sqlite::SqliteStore::open(path).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PgStore::connect(url).await?))
    } else {
        Err(StoreError::Config(format!(
            "unsupported database URL {:?}: use sqlite://PATH or postgres://…",
            hookd_core::redact::url(url)
        )))
    }
}
