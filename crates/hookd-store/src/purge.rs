//! The SQL of the purge's two walks, shared by both dialects (see [`crate::RetentionStore`]).
//!
//! Each walk reads one partial index holding only the messages not purged yet, in due order,
//! from the cursor on, and says for each message whether a delivery of it is still to do.

use hookd_core::model::DeliveryStatus;
use hookd_core::{MessageId, Timestamp};

use crate::PurgeCursor;

/// `busy`: whether a delivery of `m` is still to do (pending or in flight).
pub fn busy() -> String {
    format!(
        "EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.id AND d.status IN ({}, {}))",
        DeliveryStatus::Pending.code(),
        DeliveryStatus::Sending.code()
    )
}

/// Messages on the server's window: `id, busy`. Binds the id bound of the window's start, the
/// cursor's id and the limit, as the placeholders `p`.
pub fn window_sql(p: [&str; 3]) -> String {
    format!(
        "SELECT m.id, {} FROM messages m
         WHERE m.purged_at IS NULL AND m.payload_expires_at IS NULL AND m.id < {} AND m.id > {}
         ORDER BY m.id LIMIT {}",
        busy(),
        p[0],
        p[1],
        p[2]
    )
}

/// Messages with their own expiry: `id, payload_expires_at, busy`. Binds now, the cursor's
/// expiry, the cursor's id and the limit, as the placeholders `p`.
pub fn expiry_sql(p: [&str; 4]) -> String {
    format!(
        "SELECT m.id, m.payload_expires_at, {} FROM messages m
         WHERE m.purged_at IS NULL AND m.payload_expires_at IS NOT NULL
         AND m.payload_expires_at <= {} AND (m.payload_expires_at, m.id) > ({}, {})
         ORDER BY m.payload_expires_at, m.id LIMIT {}",
        busy(),
        p[0],
        p[1],
        p[2],
        p[3]
    )
}

/// The id below which messages on the window are due.
pub fn window_bound(window_start: Timestamp) -> String {
    MessageId::lowest_at(window_start).to_string()
}

/// The cursor's position in the window walk ("" before the first message).
pub fn window_after(after: Option<&MessageId>) -> String {
    after.map_or_else(String::new, ToString::to_string)
}

/// The cursor's position in the expiry walk (before everything at the start).
pub fn expiry_after(after: Option<&(Timestamp, MessageId)>) -> (i64, String) {
    after.map_or((i64::MIN, String::new()), |(at, id)| {
        (at.as_millis(), id.to_string())
    })
}

/// Where the pass goes after a batch that looked at `examined` of `limit` messages, the last
/// of them at `last`: on along the same walk while batches come back full, then to the next
/// walk, then done.
pub fn next_cursor(
    cursor: &PurgeCursor,
    examined: usize,
    limit: usize,
    last: Option<PurgeCursor>,
) -> Option<PurgeCursor> {
    match (examined < limit, cursor) {
        (false, _) => last,
        (true, PurgeCursor::Window(_)) => Some(PurgeCursor::Expiry(None)),
        (true, PurgeCursor::Expiry(_)) => None,
    }
}

/// A due message as a walk found it.
pub struct Candidate {
    pub id: String,
    /// Its own expiry (expiry walk only).
    pub expires_at: Option<i64>,
    /// A delivery of it is still to do: it keeps everything.
    pub busy: bool,
}

impl Candidate {
    /// The cursor that points just past this message in its walk.
    pub fn cursor(&self) -> PurgeCursor {
        let id = MessageId::from_stored(self.id.clone());
        match self.expires_at {
            Some(at) => PurgeCursor::Expiry(Some((Timestamp::from_millis(at), id))),
            None => PurgeCursor::Window(Some(id)),
        }
    }
}
