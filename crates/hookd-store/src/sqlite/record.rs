//! Recording attempts on SQLite: each delivery moved while still under its attempt's lease,
//! its attempt inserted, and the next delivery of its ordering key handed off.

use hookd_core::model::{Attempt, DeliveryStatus};
use hookd_core::{MessageId, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use super::claim::{MARK_CLAIMED, load};
use super::missing;
use super::publish::insert_events;
use super::recover::queue_next_in_order;
use super::rows::Prepare;
use super::writer::Tx;
use crate::{AttemptRecord, ClaimedDelivery, Handoff, Recorded, Reserved, StoreError};

/// Hands `handoff` the deliveries these records made due next in their ordering keys (each
/// record queued its key's next when it settled the one ahead), as a publish hands off new
/// ones: those it has room for are written claimed under its lease in this write and started
/// once committed, so a key's next message needs no claim.
pub(super) fn hand_off_next_in_order(
    conn: &Tx<'_>,
    handoff: &dyn Handoff,
    records: &[AttemptRecord],
    recorded: &[Recorded],
) -> Result<Vec<(ClaimedDelivery, Reserved)>, StoreError> {
    let mut taken = Vec::new();
    for (record, recorded) in records.iter().zip(recorded) {
        let d = &record.next;
        let (Recorded::Written { .. }, Some(key), None) =
            (recorded, &d.ordering_key, d.next_attempt_at)
        else {
            continue;
        };
        const NEXT: &str = "SELECT d.message_id FROM deliveries d
             JOIN endpoints e ON e.id = d.endpoint_id
             WHERE d.endpoint_id = ?1 AND d.ordering_key = ?2 AND d.next_attempt_at IS NOT NULL
               AND d.status = ?3 AND NOT e.disabled";
        let next: Option<String> = conn.prepared(NEXT, |next| {
            next.query_row(
                params![d.endpoint_id.as_str(), key, DeliveryStatus::Pending.code()],
                |row| row.get(0),
            )
            .optional()
        })?;
        let Some(message) = next else { continue };
        let Some(reserved) = handoff.reserve(&d.endpoint_id) else {
            continue;
        };
        conn.prepared(MARK_CLAIMED, |mark| {
            mark.execute(params![
                message,
                d.endpoint_id.as_str(),
                DeliveryStatus::Sending.code(),
                reserved.lease_until().as_millis(),
                d.updated_at.as_millis(),
            ])
        })?;
        taken.push(((message, d.endpoint_id.to_string()), reserved));
    }
    let mut handed = Vec::with_capacity(taken.len());
    for ((message, endpoint), reserved) in taken {
        if let Some(claimed) = load(conn, &message, &endpoint)? {
            handed.push((claimed, reserved));
        }
    }
    Ok(handed)
}

/// Records one attempt; see [`DeliveryQueue::record_attempts`].
pub(super) fn record(conn: &Tx<'_>, record: &AttemptRecord) -> Result<Recorded, StoreError> {
    let (a, d) = (&record.attempt, &record.next);
    // The delivery first, while it is still under the attempt's lease. If it is gone (its
    // message or endpoint deleted meanwhile), so is everything the attempt would refer to.
    // Settling an ordered delivery makes its key's next due, so a settle is tried as an
    // unordered delivery's first (almost every one is), then as an ordered one's.
    let settles = d.next_attempt_at.is_none();
    let mut moved = move_delivery(conn, record, settles.then_some(Ordered::No))?;
    let mut settled_in_order = false;
    if settles && !moved {
        moved = move_delivery(conn, record, Some(Ordered::Yes))?;
        settled_in_order = moved;
    }
    if !moved {
        const EXISTS: &str =
            "SELECT EXISTS (SELECT 1 FROM deliveries WHERE message_id = ?1 AND endpoint_id = ?2)";
        let exists: bool = conn.prepared(EXISTS, |exists| {
            exists.query_row(
                params![d.message_id.as_str(), d.endpoint_id.as_str()],
                |row| row.get(0),
            )
        })?;
        if !exists {
            return Ok(Recorded::Gone);
        }
        insert_attempt(conn, a)?;
        return Ok(Recorded::Stale);
    }
    insert_attempt(conn, a)?;
    if settled_in_order {
        const KEY: &str =
            "SELECT ordering_key FROM deliveries WHERE message_id = ?1 AND endpoint_id = ?2";
        let key: String = conn.prepared(KEY, |key| {
            key.query_row(
                params![d.message_id.as_str(), d.endpoint_id.as_str()],
                |row| row.get(0),
            )
        })?;
        queue_next_in_order(conn, &d.endpoint_id, &key, d.updated_at)?;
    }
    // A success ends the endpoint's failure streak; a failure starts one unless started. The
    // endpoint row is written only when the streak changes: most attempts leave it alone.
    let endpoint = a.endpoint_id.as_str();
    let streak: Option<i64> = if a.status == DeliveryStatus::Success {
        const ENDED: &str =
            "UPDATE endpoints SET failing_since = NULL WHERE id = ?1 AND failing_since IS NOT NULL";
        conn.reads.end_streak(endpoint, || {
            conn.prepared(ENDED, |ended| ended.execute([endpoint]))?;
            Ok(())
        })?;
        None
    } else {
        const STARTED: &str =
            "UPDATE endpoints SET failing_since = ?2 WHERE id = ?1 AND failing_since IS NULL";
        const SINCE: &str = "SELECT failing_since FROM endpoints WHERE id = ?1";
        let at = a.created_at.as_millis();
        conn.prepared(STARTED, |started| started.execute(params![endpoint, at]))?;
        conn.prepared(SINCE, |since| {
            since.query_row([endpoint], |row| row.get(0)).optional()
        })?
        .ok_or(StoreError::NotFound("endpoint"))?
    };
    insert_events(conn, &record.events)?;
    Ok(Recorded::Written {
        failing_since: streak.map(Timestamp::from_millis),
    })
}

/// Whether a record may move an ordered delivery (one with an ordering key) or not.
#[derive(Clone, Copy)]
enum Ordered {
    Yes,
    No,
}

/// Moves the record's delivery to its next state if it is still under the attempt's lease
/// (and, given `ordered`, only if it is, or is not, ordered); whether it moved.
///
/// `OR FAIL`: no statement journal (see `MARK_CLAIMED`). The stored key is told apart in the
/// `WHERE`, not read back with `RETURNING`: SQLite runs a `RETURNING` clause as a trigger of
/// its own, a program started for every row.
fn move_delivery(
    conn: &Tx<'_>,
    record: &AttemptRecord,
    ordered: Option<Ordered>,
) -> Result<bool, StoreError> {
    let d = &record.next;
    const MOVE: &str = "UPDATE OR FAIL deliveries SET status = ?3, attempt_count = ?4,
         next_attempt_at = ?5, updated_at = ?6, manual = 0 WHERE message_id = ?1 AND endpoint_id = ?2
         AND (?7 IS NULL OR (status = ?8 AND next_attempt_at = ?7))
         AND (?9 IS NULL OR (ordering_key IS NOT NULL) = ?9)";
    let moved = conn.prepared(MOVE, |move_| {
        move_.execute(params![
            d.message_id.as_str(),
            d.endpoint_id.as_str(),
            d.status.code(),
            d.attempt_count,
            d.next_attempt_at.map(Timestamp::as_millis),
            d.updated_at.as_millis(),
            record.lease.map(Timestamp::as_millis),
            DeliveryStatus::Sending.code(),
            ordered.map(|o| matches!(o, Ordered::Yes)),
        ])
    })?;
    Ok(moved > 0)
}

/// Inserts an attempt's row for the delivery log.
fn insert_attempt(conn: &Tx<'_>, a: &Attempt) -> Result<(), StoreError> {
    const INSERT: &str = "INSERT INTO attempts (id, message_id, endpoint_id, url,
         response_status_code, response, response_head, response_duration_ms, status,
         trigger_type, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
    conn.prepared(INSERT, |insert| {
        insert.execute(params![
            a.id.as_str(),
            a.message_id.as_str(),
            a.endpoint_id.as_str(),
            a.url,
            a.response_status_code,
            a.response,
            a.response_head,
            a.response_duration_ms,
            a.status.code(),
            a.trigger_type.code(),
            a.created_at.as_millis(),
        ])
    })
    .map_err(missing("delivery"))?;
    Ok(())
}

/// Which parent of a delivery is missing, after a FOREIGN KEY violation.
pub(super) fn missing_parent(
    conn: &Connection,
    message: &MessageId,
) -> Result<StoreError, StoreError> {
    let message_exists: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM messages WHERE id = ?1)",
        [message.as_str()],
        |row| row.get(0),
    )?;
    Ok(StoreError::NotFound(if message_exists {
        "endpoint"
    } else {
        "message"
    }))
}
