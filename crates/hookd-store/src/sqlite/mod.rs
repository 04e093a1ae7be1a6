//! The embedded SQLite [`Store`](crate::Store): hookd's zero-setup default.
//!
//! Writes go through `db::Db::write` (one writer thread, group commit); reads through
//! `db::Db::read` (a reader pool). SQL is written for SQLite here and for PostgreSQL in
//! [`crate::postgres`]; the behavioural tests hold both to one contract.
//!
//! One file per resource trait (`applications`, `endpoints`, `event_types`, `messages`,
//! `auth`, `queue`, `outbox`, `gauges`, `retention`, `tasks`); this one keeps what they share: the store, constraint-error mapping and
//! list queries. `db` is the connection discipline, `rows` the row decoders.

mod applications;
mod auth;
mod db;
mod endpoints;
mod event_types;
mod gauges;
mod messages;
mod notices;
mod outbox;
mod queue;
mod retention;
mod rows;
mod tasks;

pub use outbox::outbox_row;

use std::path::Path;
use std::sync::{Arc, RwLock, Weak};

use hookd_core::Timestamp;
use rusqlite::types::Value;
use rusqlite::{Connection, ffi, params_from_iter};

use crate::keyset::Keyset;
use crate::{Handoff, Page, PageRequest, StoreError};
use db::Db;
use rows::collect;

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

/// A list query: `select … where <fixed conditions>` plus optional filters and a keyset page.
struct ListQuery {
    sql: String,
    params: Vec<Value>,
}

impl ListQuery {
    fn new(select: &str, params: Vec<Value>) -> Self {
        Self {
            sql: select.to_owned(),
            params,
        }
    }

    /// Adds ` AND <condition>` with `?` standing for `value`.
    fn and(&mut self, condition: &str, value: Value) {
        self.params.push(value);
        let placeholder = format!("?{}", self.params.len());
        self.sql.push_str(" AND ");
        self.sql.push_str(&condition.replace('?', &placeholder));
    }

    fn and_time(&mut self, condition: &str, at: Option<Timestamp>) {
        if let Some(at) = at {
            self.and(condition, Value::Integer(at.as_millis()));
        }
    }

    /// Finishes the query with a page on `column` and runs it.
    fn page<T>(
        mut self,
        conn: &Connection,
        column: &str,
        descending: bool,
        page: &PageRequest,
        decode: impl Fn(&rusqlite::Row<'_>) -> rows::Decoded<T>,
    ) -> Result<Page<T>, StoreError> {
        let keyset = Keyset::new(
            column,
            descending,
            page,
            &format!("?{}", self.params.len() + 1),
        );
        if let Some(key) = &keyset.key {
            self.params.push(Value::Text(key.clone()));
        }
        self.sql.push_str(&keyset.condition);
        self.sql.push_str(&keyset.order_limit);
        let rows = collect(conn, &self.sql, params_from_iter(self.params), decode)?;
        Ok(keyset.page(rows))
    }
}

fn text(value: &str) -> Value {
    Value::Text(value.to_owned())
}
