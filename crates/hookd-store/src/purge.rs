//! The purge's walks as both implementations take them (see [`crate::RetentionStore`]): where
//! each batch starts and where the next goes, and the messages a walk finds. Their statements
//! are in `crate::sql::retention`.

use hookd_core::{MessageId, Timestamp};

use crate::{PurgeCursor, PurgeRequest};

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
