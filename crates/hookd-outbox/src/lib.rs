//! Publish hookd webhook events inside your own database transaction.
//!
//! hookd's outbox table (contract v1, `docs/outbox.md`) takes an event in the same
//! transaction as your business change: if your transaction commits, hookd sends the webhook
//! (exactly one message, relayed once hookd hears of the commit: at once through a notification
//! on PostgreSQL, at its next look elsewhere); if it rolls back, nothing is sent. This crate
//! writes that row for you; it needs nothing of hookd but its table. The table is either
//! hookd's own ([`Outbox::Hookd`]: in the database hookd runs on) or an *outbox source*
//! ([`Outbox::Source`]: `hookd_outbox` in your own PostgreSQL, MySQL/MariaDB or SQLite
//! database, made by `hookd outbox install`).
//!
//! ```no_run
//! # async fn example(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! use hookd_outbox::Event;
//! let mut tx = pool.begin().await?;
//! // … your own writes in `tx` …
//! Event::new("acme", "order.shipped", &serde_json::json!({"orderId": 1003}))?
//!     .event_id("order-1003-shipped")
//!     .ordering_key("order-1003")
//!     .insert(&mut *tx)
//!     .await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! One module: [`Event`], the row, and its `insert` (PostgreSQL, feature `postgres`, on by
//! default), `insert_mysql` (feature `mysql`) and `insert_sqlite` (feature `sqlite`), each
//! into the table an [`Outbox`] names.

use serde::Serialize;

/// The PostgreSQL table producers write to (in hookd's schema).
pub const POSTGRES_TABLE: &str = "hookd.outbox";

/// Which outbox table a row goes to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outbox {
    /// hookd's own: `hookd.outbox` in the PostgreSQL database hookd runs on, `outbox` in its
    /// SQLite file.
    #[default]
    Hookd,
    /// An outbox source's: `hookd_outbox` in the application's own database.
    Source,
}

impl Outbox {
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    fn table(self, hookd: &'static str) -> &'static str {
        match self {
            Self::Hookd => hookd,
            Self::Source => "hookd_outbox",
        }
    }
}

/// One event for hookd to publish: an outbox row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The application's id (`app_…`) or uid; empty leaves the column NULL, for a source
    /// bound to one application.
    pub app: String,
    pub event_type: String,
    /// The payload's JSON text: receivers get exactly these bytes. Must be a JSON object.
    pub payload: String,
    /// Optional: at most one message per application has it (a second row with it is kept
    /// in the outbox with an error instead of being sent twice).
    pub event_id: Option<String>,
    pub channels: Option<Vec<String>>,
    /// Optional: the events that share it reach each endpoint one at a time, in the order
    /// their transactions committed.
    pub ordering_key: Option<String>,
    /// The table the row goes to.
    pub outbox: Outbox,
}

impl Event {
    /// An event whose payload is `payload` serialized to JSON.
    pub fn new(
        app: impl Into<String>,
        event_type: impl Into<String>,
        payload: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self::from_json_text(
            app,
            event_type,
            serde_json::to_string(payload)?,
        ))
    }

    /// An event whose payload is already JSON text, kept byte for byte.
    pub fn from_json_text(
        app: impl Into<String>,
        event_type: impl Into<String>,
        payload: impl Into<String>,
    ) -> Self {
        Self {
            app: app.into(),
            event_type: event_type.into(),
            payload: payload.into(),
            event_id: None,
            channels: None,
            ordering_key: None,
            outbox: Outbox::Hookd,
        }
    }

    /// Sends the row to an outbox source's table (`hookd_outbox` in your own database)
    /// instead of hookd's own.
    pub fn to_source(mut self) -> Self {
        self.outbox = Outbox::Source;
        self
    }

    /// Sets the `eventId`.
    pub fn event_id(mut self, event_id: impl Into<String>) -> Self {
        self.event_id = Some(event_id.into());
        self
    }

    /// Sets the ordering key: events sharing one reach each endpoint one at a time, in order.
    pub fn ordering_key(mut self, key: impl Into<String>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }

    /// Sets the channels.
    pub fn channels<S: Into<String>>(mut self, channels: impl IntoIterator<Item = S>) -> Self {
        self.channels = Some(channels.into_iter().map(Into::into).collect());
        self
    }

    /// Inserts the row on PostgreSQL through `executor`: pass `&mut *tx` for your open
    /// transaction. Returns the row's id. The payload must be JSON (PostgreSQL refuses the
    /// insert otherwise).
    #[cfg(feature = "postgres")]
    pub async fn insert<'e>(
        &self,
        executor: impl sqlx::PgExecutor<'e>,
    ) -> Result<i64, sqlx::Error> {
        let sql = format!(
            "INSERT INTO {} (app, event_type, payload, event_id, channels, ordering_key)
             VALUES (NULLIF($1, ''), $2, $3::json, $4, $5, $6) RETURNING id",
            self.outbox.table(POSTGRES_TABLE)
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(&self.app)
            .bind(&self.event_type)
            .bind(&self.payload)
            .bind(self.event_id.as_deref())
            .bind(self.channels.as_deref())
            .bind(self.ordering_key.as_deref())
            .fetch_one(executor)
            .await
    }

    /// Inserts the row on an SQLite connection (to hookd's file, or to your own for an outbox
    /// source), inside whatever transaction is open on it (a `rusqlite::Transaction` derefs to
    /// its connection). Returns the row's id.
    #[cfg(feature = "sqlite")]
    pub fn insert_sqlite(&self, conn: &rusqlite::Connection) -> rusqlite::Result<i64> {
        let channels = self.channels_json();
        conn.prepare_cached(&format!(
            "INSERT INTO {} (app, event_type, payload, event_id, channels, ordering_key)
             VALUES (NULLIF(?1, ''), ?2, ?3, ?4, ?5, ?6)",
            self.outbox.table("outbox")
        ))?
        .execute(rusqlite::params![
            self.app,
            self.event_type,
            self.payload,
            self.event_id,
            channels,
            self.ordering_key
        ])?;
        Ok(conn.last_insert_rowid())
    }

    /// Inserts the row into an outbox source on MySQL or MariaDB (`hookd_outbox`, whatever
    /// [`Self::outbox`] says: hookd keeps no tables there) through `executor`: pass `&mut *tx`
    /// for your open transaction. Returns the row's id. The payload must be JSON (the table
    /// refuses the insert otherwise).
    #[cfg(feature = "mysql")]
    pub async fn insert_mysql<'e>(
        &self,
        executor: impl sqlx::MySqlExecutor<'e>,
    ) -> Result<u64, sqlx::Error> {
        let inserted = sqlx::query(
            "INSERT INTO hookd_outbox (app, event_type, payload, event_id, channels, ordering_key)
             VALUES (NULLIF(?, ''), ?, ?, ?, ?, ?)",
        )
        .bind(&self.app)
        .bind(&self.event_type)
        .bind(&self.payload)
        .bind(self.event_id.as_deref())
        .bind(self.channels_json())
        .bind(self.ordering_key.as_deref())
        .execute(executor)
        .await?;
        Ok(inserted.last_insert_id())
    }

    /// The channels as the JSON text SQLite and MySQL tables keep.
    #[cfg(any(feature = "sqlite", feature = "mysql"))]
    fn channels_json(&self) -> Option<String> {
        self.channels
            .as_ref()
            .map(|c| serde_json::to_string(c).expect("a list of strings serializes"))
    }
}
