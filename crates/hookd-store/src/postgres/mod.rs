//! The PostgreSQL [`Store`](crate::Store), for deployments where several hookd processes share one database.
//!
//! SQLite (the default) keeps hookd to one process and one file; PostgreSQL lets any number of
//! API and delivery processes work on the same state, with the database arbitrating between
//! them. The contract is the same, held by the same behavioural tests; the statements both
//! databases share are written once in `crate::sql`, and the SQL here is PostgreSQL's own
//! (row locks, arrays, the hot writes' single statements).
//!
//! Everything lives in the PostgreSQL schema `hookd` (every pooled connection has
//! `search_path=hookd`), so hookd can share a database with other software. The schema and its
//! tables are created and migrated by [`PgStore::connect`] from `migrations/postgres/`; then
//! `functions` applies the current definitions of the functions hookd calls, from
//! `migrations/postgres-functions/`.
//!
//! One file per job, named as on SQLite (see the crate's `# Layout`): `publish`, `queue` with
//! `claim`, `record` (attempts recorded in batches, the queue's hot write) and `recover`, and
//! a file per resource where this backend does something its own way (`endpoints`,
//! `outbox`, `gauges`, `retention`, `tasks`); this one keeps what they share: connecting and
//! migrating, and constraint-error mapping. `publisher` writes concurrent publishes in one
//! transaction (the API's hot write); `held` keeps a connection for each of the two hot
//! writers while their batches follow one another; `functions` applies the server-side
//! functions, and its test module `plans` checks that the hot writes' prepared statements
//! read by key. `rows` is how a shared statement runs (the store as a
//! `crate::sql::Database`).
//!
//! Queries are prepared at run time (`sqlx::query`), never checked against a database at build
//! time, so building hookd needs no PostgreSQL.

mod claim;
mod endpoints;
mod functions;
mod gauges;
mod held;
mod outbox;
mod publish;
pub use outbox::ORDERED_ROWS_LOCK;
mod publisher;
mod queue;
mod record;
mod recover;
mod retention;
mod rows;
mod tasks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::MigrateError;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::StoreError;
use held::Held;
use publisher::Publisher;

/// The PostgreSQL schema that holds hookd's tables.
pub const SCHEMA: &str = "hookd";

/// Most connections one process holds, the publish task's and the recorder's kept ones (see
/// `held`) among them. PostgreSQL's default server limit is 100 connections in all, shared by
/// every hookd process and anything else using the server.
const MAX_CONNECTIONS: u32 = 10;

/// How long a query waits for a free connection before the store reports itself unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// hookd's state in a PostgreSQL database.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    /// How to connect: the listener of `outbox` opens its own connection with it.
    options: PgConnectOptions,
    /// Whether claims hold per-endpoint limits across every process (see `queue`).
    cluster_limits: bool,
    /// The pool's one publish task, shared by every clone (see `publisher`).
    publisher: Publisher,
    /// The connection the recorder's batches are written on while they follow one another
    /// (see `held`).
    recording: Arc<Held>,
    /// This store's mark on its announcements of new deliveries, random and the same for
    /// every clone: its own listener ignores them (see `outbox`).
    origin: Arc<str>,
    /// The engine new deliveries are offered to (see `publisher`).
    taker: publisher::HandoffSlot,
}

impl PgStore {
    /// Connects to the database `url` names (`postgres://user:pass@host:port/db?…`), creates
    /// the `hookd` schema if needed and applies any pending migrations.
    ///
    /// Several processes may connect at once: migrations run under a PostgreSQL advisory lock
    /// (taken by `sqlx`'s migrator, per database), and the schema is created inside that lock
    /// too, since two concurrent `CREATE SCHEMA IF NOT EXISTS` can still collide.
    ///
    /// Starts the store's publish task (see `publisher`) on the current tokio runtime, so the
    /// store publishes only while that runtime runs; the task ends when the store and all its
    /// clones are dropped.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_pooled(url, MAX_CONNECTIONS).await
    }

    /// [`PgStore::connect`] with a pool of at most `max_connections`.
    async fn connect_pooled(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Config(format!("invalid PostgreSQL URL: {e}")))?
            .options([("search_path", SCHEMA)]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options.clone())
            .await?;
        let mut migrator = sqlx::migrate!("./migrations/postgres");
        migrator.create_schema(SCHEMA);
        // Migrations only add (tables, columns with defaults, indexes), so a process of an
        // older version keeps working on a schema a newer one migrated: during a rolling
        // upgrade both run at once. See docs/deployment.md.
        migrator.set_ignore_missing(true);
        // With search_path=hookd, sqlx's bookkeeping table is hookd._sqlx_migrations.
        migrator.run(&pool).await.map_err(|e| match e {
            MigrateError::Execute(e) => StoreError::from(e),
            other => StoreError::Config(format!("cannot migrate the PostgreSQL schema: {other}")),
        })?;
        let now = hookd_core::Clock::now(&hookd_core::SystemClock);
        functions::apply(&pool, now.as_millis()).await?;
        let taker = publisher::HandoffSlot::default();
        Ok(Self {
            publisher: Publisher::start(pool.clone(), taker.clone()),
            recording: Arc::new(Held::new(pool.clone())),
            taker,
            pool,
            options,
            cluster_limits: true,
            origin: format!("{:016x}", rand::RngExt::random::<u64>(&mut rand::rng())).into(),
        })
    }

    /// With `false`, a claim's `per_endpoint` caps only that claim, as on SQLite, and rate
    /// limits are left to the claiming process: for a single process whose engine keeps the
    /// limits in memory. On (the default), claims count every process's deliveries in flight
    /// and share each endpoint's rate (see [`crate::DeliveryQueue::claim_due`]).
    pub fn with_cluster_limits(mut self, on: bool) -> Self {
        self.cluster_limits = on;
        self
    }

    /// The connection pool, for callers that keep their own tables in the `hookd` schema.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Maps a unique-key violation (SQLSTATE 23505) to a conflict described by `what`, and a
/// foreign-key violation (23503: the parent row does not exist) to `parent` not found; any
/// other failure is the database's.
fn refused(what: String, parent: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| match error.as_database_error() {
        Some(db) if db.is_unique_violation() => StoreError::Conflict(what),
        Some(db) if db.is_foreign_key_violation() => {
            StoreError::NotFound(db.constraint().map_or(parent, fk_parent))
        }
        _ => error.into(),
    }
}

/// Maps a unique-key violation to a conflict described by `what` (for writes without parents).
fn conflict(what: String) -> impl FnOnce(sqlx::Error) -> StoreError {
    refused(what, "referenced record")
}

/// Maps a foreign-key violation to its parent not found (for writes without unique keys).
fn missing(parent: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| match error.as_database_error() {
        Some(db) if db.is_foreign_key_violation() => {
            StoreError::NotFound(db.constraint().map_or(parent, fk_parent))
        }
        _ => error.into(),
    }
}

/// The record a foreign key (named `<table>_<column>_fkey`, PostgreSQL's default) refers to.
fn fk_parent(constraint: &str) -> &'static str {
    if constraint.ends_with("_message_id_fkey") {
        "message"
    } else if constraint.ends_with("_endpoint_id_fkey") {
        "endpoint"
    } else if constraint.ends_with("_app_id_fkey") {
        "application"
    } else {
        "referenced record"
    }
}
