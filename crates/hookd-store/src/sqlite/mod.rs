//! The embedded SQLite [`Store`](crate::Store): hookd's zero-setup default.
//!
//! Writes go through `writer::Db::write` (one writer thread, group commit); reads through
//! `writer::Db::read` (a reader pool). The statements both databases share are written once in
//! `crate::sql`; the SQL here is SQLite's own (claims, the writer's per-row writes).
//!
//! One file per job, named as on PostgreSQL (see the crate's `# Layout`): `publish`, `queue`
//! with `claim`, `record` and `recover`, and a file per resource where this backend does
//! something its own way (`endpoints`, `outbox`, `gauges`, `retention`, `tasks`); this one
//! keeps what they share: the store and constraint-error mapping. `writer` is the connection
//! discipline (with the statements its jobs keep prepared), `reads` what one batch of the writer
//! has read of endpoints, `migrate` the schema, `rows` how a shared statement runs (the store
//! as a `crate::sql::Database`).

mod claim;
mod endpoints;
mod gauges;
mod migrate;
mod outbox;
mod publish;
mod queue;
mod reads;
mod record;
mod recover;
mod retention;
mod rows;
mod tasks;
mod writer;

pub use outbox::outbox_row;

use std::path::Path;
use std::sync::{Arc, RwLock, Weak};

use rusqlite::ffi;

use crate::{Handoff, StoreError};
use writer::Db;

/// hookd's state in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    db: Db,
    /// Where new deliveries go claimed (see [`crate::DeliveryQueue::hand_off_new_deliveries`]).
    handoff: Arc<RwLock<Option<Weak<dyn Handoff>>>>,
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) the database file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        let db = tokio::task::spawn_blocking(move || Db::open(&path))
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))??;
        Ok(Self {
            db,
            handoff: Arc::default(),
        })
    }

    /// The handoff new deliveries are offered to, while its claimer lives.
    fn handoff(&self) -> Option<Arc<dyn Handoff>> {
        let handoff = self.handoff.read().expect("handoff lock poisoned");
        handoff.as_ref().and_then(Weak::upgrade)
    }
}

/// The kinds of constraint violation the store tells apart.
enum Violation {
    /// A UNIQUE or PRIMARY KEY constraint: the key is taken.
    Taken,
    /// A FOREIGN KEY constraint: the parent row does not exist.
    MissingParent,
}

fn violation(error: &rusqlite::Error) -> Option<Violation> {
    match error.sqlite_error()?.extended_code {
        ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => Some(Violation::Taken),
        ffi::SQLITE_CONSTRAINT_FOREIGNKEY => Some(Violation::MissingParent),
        _ => None,
    }
}

/// Maps a taken unique key to a conflict described by `what`, and a missing parent row (a
/// FOREIGN KEY violation) to `parent` not found; any other failure is the database's.
fn refused(what: String, parent: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |error| match violation(&error) {
        Some(Violation::Taken) => StoreError::Conflict(what),
        Some(Violation::MissingParent) => StoreError::NotFound(parent),
        None => error.into(),
    }
}

/// Maps a taken unique key to a conflict described by `what` (for writes without parents).
fn conflict(what: String) -> impl FnOnce(rusqlite::Error) -> StoreError {
    refused(what, "referenced record")
}

/// Maps a missing parent row to `parent` not found (for writes without unique keys).
fn missing(parent: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |error| match violation(&error) {
        Some(Violation::MissingParent) => StoreError::NotFound(parent),
        _ => error.into(),
    }
}
