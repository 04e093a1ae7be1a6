//! Publish hookd webhook events inside your own database transaction.
//!
//! hookd's outbox table (contract v1, `docs/outbox.md`) takes an event in the same
//! transaction as your business change: if your transaction commits, hookd sends the webhook
//! (exactly one message, relayed once hookd hears of the commit: at once through a notification
//! on PostgreSQL, at its next look on SQLite); if it rolls back, nothing is sent. This crate
//! writes that row for you; it needs nothing of hookd but its table.
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
//! default) and `insert_sqlite` (feature `sqlite`).

use serde::Serialize;

/// The PostgreSQL table producers write to (in hookd's schema).
pub const POSTGRES_TABLE: &str = "hookd.outbox";

/// One event for hookd to publish: an outbox row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The application's id (`app_…`) or uid.
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
        }
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

    /// Inserts the row through `executor`: pass `&mut *tx` for your open transaction. Returns
    /// the row's id. The payload must be JSON (PostgreSQL refuses the insert otherwise).
    #[cfg(feature = "postgres")]
    pub async fn insert<'e>(
        &self,
        executor: impl sqlx::PgExecutor<'e>,
    ) -> Result<i64, sqlx::Error> {
        sqlx::query_scalar(
            "INSERT INTO hookd.outbox (app, event_type, payload, event_id, channels, ordering_key)
             VALUES ($1, $2, $3::json, $4, $5, $6) RETURNING id",
        )
        .bind(&self.app)
        .bind(&self.event_type)
        .bind(&self.payload)
        .bind(self.event_id.as_deref())
        .bind(self.channels.as_deref())
        .bind(self.ordering_key.as_deref())
        .fetch_one(executor)
        .await
    }

    /// Inserts the row on a connection to hookd's SQLite file, inside whatever transaction is
    /// open on it (a `rusqlite::Transaction` derefs to its connection). Returns the row's id.
    #[cfg(feature = "sqlite")]
    pub fn insert_sqlite(&self, conn: &rusqlite::Connection) -> rusqlite::Result<i64> {
        let channels = self
            .channels
            .as_ref()
            .map(|c| serde_json::to_string(c).expect("a list of strings serializes"));
        conn.prepare_cached(
            "INSERT INTO outbox (app, event_type, payload, event_id, channels, ordering_key)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
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
}
