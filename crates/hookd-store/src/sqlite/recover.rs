//! Putting deliveries back in SQLite's queue: a recover's chunks, a resend, and the next
//! delivery of an ordering key made due once the one ahead of it leaves the queue.

use std::sync::LazyLock;

use hookd_core::model::DeliveryStatus;
use hookd_core::{EndpointId, MessageId, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use crate::StoreError;
use crate::sql::search::NOT_DELIVERED;

/// Deliveries one write of a recover re-queues at most. The writer runs one write at a time,
/// and a recover after a long outage may re-queue hundreds of thousands (0.8 s for 100,000 in
/// one statement): in chunks, the publishes waiting meanwhile get their turns in between.
pub(super) const RECOVER_CHUNK: u64 = 1_000;

/// Up to [`RECOVER_CHUNK`] of endpoint `?1`'s failed deliveries of messages created in
/// `[?3, ?4)` (`?4` NULL: open-ended) that still have their payload, made pending (`?2`) and due
/// at `?5`, or waiting if they have an ordering key; answers each one's key. The chunk is in
/// the text: SQLite prepares a statement again for each LIMIT bound.
pub(super) static RECOVER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE deliveries SET status = ?2, attempt_count = 0,
             next_attempt_at = CASE WHEN ordering_key IS NULL THEN ?5 END,
             updated_at = ?5, manual = 0
         WHERE (message_id, endpoint_id) IN (
             SELECT d.message_id, d.endpoint_id FROM deliveries d
             WHERE d.endpoint_id = ?1 AND d.status = ?6 AND {NOT_DELIVERED} AND EXISTS (
                 SELECT 1 FROM messages m WHERE m.id = d.message_id
                 AND m.created_at >= ?3 AND (?4 IS NULL OR m.created_at < ?4)
                 AND m.payload IS NOT NULL)
             LIMIT {RECOVER_CHUNK})
         RETURNING ordering_key"
    )
});

/// Queues one manual attempt of `message` to `endpoint` (a resend), unless its delivery is in
/// flight (`None`); a delivery with an ordering key is written waiting, and its key returned
/// for the caller to queue the key's oldest (`Some(Some(key))`).
pub(super) fn resend_one(
    conn: &Connection,
    message: &MessageId,
    endpoint: &EndpointId,
    now: Timestamp,
) -> rusqlite::Result<Option<Option<String>>> {
    conn.prepare_cached(
        "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
         next_attempt_at, updated_at, manual, ordering_key)
         SELECT ?1, ?2, ?3, 0, CASE WHEN k.key IS NULL THEN ?4 END, ?4, 1, k.key
         FROM (SELECT (SELECT CASE WHEN e.strict_order THEN '' ELSE m.ordering_key END
                       FROM messages m, endpoints e
                       WHERE m.id = ?1 AND e.id = ?2) AS key) k
         WHERE true
         ON CONFLICT (message_id, endpoint_id) DO UPDATE SET status = ?3,
         next_attempt_at = CASE WHEN deliveries.ordering_key IS NULL THEN ?4 END,
         updated_at = ?4, manual = 1
         WHERE deliveries.status <> ?5
         RETURNING ordering_key",
    )?
    .query_row(
        params![
            message.as_str(),
            endpoint.as_str(),
            DeliveryStatus::Pending.code(),
            now.as_millis(),
            DeliveryStatus::Sending.code(),
        ],
        |row| row.get::<_, Option<String>>(0),
    )
    .optional()
}

/// Makes the oldest delivery waiting under `key` to `endpoint` due at `at`, unless one of
/// that key is queued already: after a delivery of the key settles (record, skip), and after
/// deliveries are made to wait (resend, recover) while none of their key may be queued. (A
/// delete, cascades included, is followed by the trigger of schema v12.)
pub(super) fn queue_next_in_order(
    conn: &Connection,
    endpoint: &EndpointId,
    key: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE deliveries SET next_attempt_at = ?3, updated_at = ?3
         WHERE endpoint_id = ?1 AND message_id = (
             SELECT w.message_id FROM deliveries w
             WHERE w.endpoint_id = ?1 AND w.ordering_key = ?2
               AND w.next_attempt_at IS NULL AND w.status = ?4
             ORDER BY w.message_id LIMIT 1)
         AND NOT EXISTS (SELECT 1 FROM deliveries h WHERE h.endpoint_id = ?1
                         AND h.ordering_key = ?2 AND h.next_attempt_at IS NOT NULL)",
    )?
    .execute(params![
        endpoint.as_str(),
        key,
        at.as_millis(),
        DeliveryStatus::Pending.code()
    ])?;
    Ok(())
}
