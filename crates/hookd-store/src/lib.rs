//! hookd's durable storage.
//!
//! The API and the delivery engine talk to a [`Store`]; they never see SQL. Two
//! implementations keep the same contract, checked by one behavioural test suite
//! (`tests/store_behaviour.rs`): embedded SQLite (the default: one file, no other service) and
//! PostgreSQL (for several hookd processes sharing one database).
//!
//! # Layout
//! - [`store`]: the [`Store`] trait, its query and result types.
//! - [`error`]: [`StoreError`], the one error every storage call returns.
//! - [`sqlite`]: the SQLite implementation: a single writer thread that group-commits many
//!   callers' writes in one transaction, and a pool of reader connections.
//! - [`postgres`]: the PostgreSQL implementation on `sqlx`.
//! - `migrations/{sqlite,postgres}/`: versioned schema files, applied at start.

pub mod error;
mod json;
mod keyset;
pub mod sqlite;
pub mod store;

pub use error::StoreError;
pub use store::*;

use std::sync::Arc;

/// Opens the store a database URL names (`sqlite://path` or `postgres://…`) and migrates it.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        Ok(Arc::new(sqlite::SqliteStore::open(path).await?))
    } else {
        Err(StoreError::Config(format!(
            "unsupported database URL {url:?}: use sqlite://PATH or postgres://…"
        )))
    }
}
