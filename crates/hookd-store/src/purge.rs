//! The SQL of the purge's two walks, shared by both dialects (see [`crate::RetentionStore`]).
//!
//! Each walk reads one partial index holding only the messages not purged yet, in due order,
//! from the cursor on, and says for each message whether a delivery of it is still to do.

use hookd_core::model::DeliveryStatus;
use hookd_core::{MessageId, Timestamp};

use crate::{PurgeCursor, PurgeRequest};

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

/// Purged messages created before a bound: `id, app_id, event_id, created_at, busy`. Binds the
/// id bound, the cursor's id and the limit, as the placeholders `p`.
pub fn records_sql(p: [&str; 3]) -> String {
    format!(
        "SELECT m.id, m.app_id, m.event_id, m.created_at, {} FROM messages m
         WHERE m.purged_at IS NOT NULL AND m.id < {} AND m.id > {}
         ORDER BY m.id LIMIT {}",
        busy(),
        p[0],
        p[1],
        p[2]
    )
}

/// Releases the oldest `eventId`s of deleted records created before a bound. Binds the bound
/// and the limit, as the placeholders `p`.
pub fn release_event_ids_sql(p: [&str; 2]) -> String {
    format!(
        "DELETE FROM spent_event_ids WHERE (app_id, event_id) IN (
             SELECT app_id, event_id FROM spent_event_ids WHERE created_at < {}
             ORDER BY created_at LIMIT {})",
        p[0], p[1]
    )
}

/// The batch's limit, as the SQL binds it.
pub fn limit(request: &PurgeRequest) -> i64 {
    i64::try_from(request.limit).unwrap_or(i64::MAX)
}

/// The id below which messages were created before `at` (ids sort by creation time): the
/// bound of the window walk and of the records walk.
pub fn created_before(at: Timestamp) -> String {
    MessageId::lowest_at(at).to_string()
}

/// The cursor's position in a walk by id, the window's or the records' ("" before the first
/// message).
pub fn after_id(after: Option<&MessageId>) -> String {
    after.map_or_else(String::new, ToString::to_string)
}

/// The cursor's position in the expiry walk (before everything at the start).
pub fn expiry_after(after: Option<&(Timestamp, MessageId)>) -> (i64, String) {
    after.map_or((i64::MIN, String::new()), |(at, id)| {
        (at.as_millis(), id.to_string())
    })
}

/// Where the pass goes after a batch of `request` that looked at `examined` of its limit, the
/// last of them at `last`: on along the same walk while batches come back full, then to the
/// next walk (the records' two only when `request` deletes records), then done.
pub fn next_cursor(
    request: &PurgeRequest,
    examined: usize,
    last: Option<PurgeCursor>,
) -> Option<PurgeCursor> {
    let records = request.records_before.is_some();
    match (examined < request.limit, &request.cursor) {
        (false, PurgeCursor::EventIds) => Some(PurgeCursor::EventIds),
        (false, _) => last,
        (true, PurgeCursor::Window(_)) => Some(PurgeCursor::Expiry(None)),
        (true, PurgeCursor::Expiry(_)) if records => Some(PurgeCursor::Records(None)),
        (true, PurgeCursor::Records(_)) => Some(PurgeCursor::EventIds),
        (true, PurgeCursor::Expiry(_) | PurgeCursor::EventIds) => None,
    }
}

/// A purged message as the records walk found it.
pub struct Record {
    pub id: String,
    pub app_id: String,
    pub event_id: Option<String>,
    pub created_at: i64,
    /// A delivery of it is to do again (a recover after the purge): it keeps its record.
    pub busy: bool,
}

impl Record {
    /// Whether its `eventId` must stay taken after the record goes.
    pub fn spends_event_id(&self, request: &PurgeRequest) -> bool {
        self.event_id.is_some() && self.created_at >= request.event_ids_before.as_millis()
    }

    /// The cursor that points just past this message in the records walk.
    pub fn cursor(&self) -> PurgeCursor {
        PurgeCursor::Records(Some(MessageId::from_stored(self.id.clone())))
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
