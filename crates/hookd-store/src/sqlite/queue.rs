//! [`DeliveryQueue`] on SQLite.
//!
//! Every queue write runs in one [`super::Db::write`] closure. The single writer thread makes a
//! claim atomic without row locks: no other write can run between choosing the due rows and
//! marking them `sending`, so two claimers never get the same delivery.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Weak};

use async_trait::async_trait;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, Endpoint, Message};
use hookd_core::{EndpointId, MessageId, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use super::endpoints::require_endpoint;
use super::publish::insert_events;
use super::{SqliteStore, missing, rows};
use crate::columns::{DELIVERY_COLUMNS, ENDPOINT_COLUMNS, MESSAGE_COLUMNS};
use crate::json::encode;
use crate::sql::search::NOT_DELIVERED;
use crate::{
    AttemptRecord, ClaimRequest, ClaimedDelivery, DeliveryQueue, Handoff, HandoffMode, Recorded,
    Reserved, Skipped, StoreError, skip_refused,
};

#[async_trait]
impl DeliveryQueue for SqliteStore {
    async fn claim_due(&self, request: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, StoreError> {
        if request.limit == 0 {
            return Ok(Vec::new());
        }
        let request = request.clone();
        self.db.write(move |conn| claim(conn, &request)).await
    }

    async fn record_attempts(
        &self,
        records: &[AttemptRecord],
    ) -> Result<Vec<Recorded>, StoreError> {
        let (records, handoff) = (records.to_vec(), self.handoff());
        let (recorded, handed) = self
            .db
            .write(move |conn| {
                let mut order: Vec<usize> = (0..records.len()).collect();
                order.sort_by_key(|&i| records[i].attempt.created_at);
                let mut recorded = vec![Recorded::Gone; records.len()];
                for i in order {
                    recorded[i] = record(conn, &records[i])?;
                }
                let handed = match handoff.as_deref() {
                    Some(handoff) => hand_off_next_in_order(conn, handoff, &records, &recorded)?,
                    None => Vec::new(),
                };
                Ok((recorded, handed))
            })
            .await?;
        for (claimed, reserved) in handed {
            reserved.start(claimed);
        }
        Ok(recorded)
    }

    async fn disable_endpoint(
        &self,
        endpoint: &EndpointId,
        reason: &str,
        at: Timestamp,
        events: &[Message],
    ) -> Result<bool, StoreError> {
        let (endpoint, reason, events) = (endpoint.clone(), reason.to_owned(), events.to_vec());
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        "UPDATE endpoints SET disabled = 1, disabled_reason = ?2, disabled_at = ?3,
                         updated_at = ?3 WHERE id = ?1 AND NOT disabled",
                    )?
                    .execute(params![endpoint.as_str(), reason, at.as_millis()])?;
                if rows == 0 {
                    require_endpoint(conn, &endpoint)?;
                    return Ok(false);
                }
                insert_events(conn, &events)?;
                Ok(true)
            })
            .await
    }

    async fn resend(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let (message, endpoint) = (message.clone(), endpoint.clone());
        self.db
            .write(move |conn| {
                // A delivery in flight (`sending`) is left alone: the update's WHERE fails. One
                // with an ordering key is written waiting, then the oldest waiting of its key
                // queued unless one is (it may be this one).
                let queued = resend_one(conn, &message, &endpoint, now);
                match queued {
                    Ok(Some(key)) => {
                        if let Some(key) = key {
                            queue_next_in_order(conn, &endpoint, &key, now)?;
                        }
                        Ok(true)
                    }
                    Ok(None) => Ok(false),
                    // SQLite does not say which parent is missing: look.
                    Err(error) => Err(match missing("message")(error) {
                        StoreError::NotFound(_) => missing_parent(conn, &message)?,
                        other => other,
                    }),
                }
            })
            .await
    }

    async fn recover(
        &self,
        endpoint: &EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let mut recovered = 0;
        loop {
            let endpoint = endpoint.clone();
            let requeued = self
                .db
                .write(move |conn| {
                    let keys = conn
                        .prepare_cached(&RECOVER)?
                        .query_map(
                            params![
                                endpoint.as_str(),
                                DeliveryStatus::Pending.code(),
                                since.as_millis(),
                                until.map(Timestamp::as_millis),
                                now.as_millis(),
                                DeliveryStatus::Fail.code(),
                            ],
                            |row| row.get::<_, Option<String>>(0),
                        )?
                        .collect::<Result<Vec<_>, _>>()?;
                    let requeued = keys.len() as u64;
                    let keys: BTreeSet<String> = keys.into_iter().flatten().collect();
                    for key in &keys {
                        queue_next_in_order(conn, &endpoint, key, now)?;
                    }
                    Ok(requeued)
                })
                .await?;
            recovered += requeued;
            if requeued < RECOVER_CHUNK {
                return Ok(recovered);
            }
        }
    }

    async fn skip(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<Skipped, StoreError> {
        let (message, endpoint) = (message.clone(), endpoint.clone());
        self.db
            .write(move |conn| {
                let skipped = conn
                    .prepare_cached(
                        "UPDATE deliveries SET status = ?3, next_attempt_at = NULL, updated_at = ?4,
                         manual = 0 WHERE message_id = ?1 AND endpoint_id = ?2 AND status = ?5
                         RETURNING ordering_key",
                    )?
                    .query_row(
                        params![
                            message.as_str(),
                            endpoint.as_str(),
                            DeliveryStatus::Fail.code(),
                            now.as_millis(),
                            DeliveryStatus::Pending.code(),
                        ],
                        |row| row.get::<_, Option<String>>(0),
                    )
                    .optional()?;
                if let Some(key) = skipped {
                    if let Some(key) = key {
                        queue_next_in_order(conn, &endpoint, &key, now)?;
                    }
                    return Ok(Skipped::Skipped);
                }
                let status: Option<i64> = conn
                    .prepare_cached(
                        "SELECT status FROM deliveries WHERE message_id = ?1 AND endpoint_id = ?2",
                    )?
                    .query_row(params![message.as_str(), endpoint.as_str()], |row| {
                        row.get(0)
                    })
                    .optional()?;
                skip_refused(status)
            })
            .await
    }

    async fn heads_of(
        &self,
        keys: &[(EndpointId, String)],
    ) -> Result<HashMap<(EndpointId, String), MessageId>, StoreError> {
        let pairs: Vec<(&str, &str)> = keys.iter().map(|(e, k)| (e.as_str(), k.as_str())).collect();
        let pairs = encode(&pairs);
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT h.endpoint_id, h.ordering_key, h.message_id FROM json_each(?1) p
                     JOIN deliveries h ON h.endpoint_id = p.value ->> 0
                      AND h.ordering_key = p.value ->> 1 AND h.next_attempt_at IS NOT NULL",
                )?;
                let heads = stmt
                    .query_map([pairs], |row| {
                        Ok((
                            (EndpointId::from_stored(row.get(0)?), row.get(1)?),
                            MessageId::from_stored(row.get(2)?),
                        ))
                    })?
                    .collect::<Result<_, _>>()?;
                Ok(heads)
            })
            .await
    }

    async fn release_claims(
        &self,
        claimed: &[Delivery],
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        if claimed.is_empty() {
            return Ok(0);
        }
        let claimed = claimed.to_vec();
        self.db
            .write(move |conn| {
                let mut release = conn.prepare_cached(
                    "UPDATE deliveries SET status = ?4, next_attempt_at = ?5, updated_at = ?5
                     WHERE message_id = ?1 AND endpoint_id = ?2 AND status = ?6
                     AND next_attempt_at = ?3",
                )?;
                let mut released = 0;
                for d in &claimed {
                    released += release.execute(params![
                        d.message_id.as_str(),
                        d.endpoint_id.as_str(),
                        d.next_attempt_at.map(Timestamp::as_millis),
                        DeliveryStatus::Pending.code(),
                        now.as_millis(),
                        DeliveryStatus::Sending.code(),
                    ])? as u64;
                }
                Ok(released)
            })
            .await
    }

    fn hand_off_new_deliveries(&self, handoff: Weak<dyn Handoff>) -> HandoffMode {
        *self.handoff.write().expect("handoff lock poisoned") = Some(handoff);
        HandoffMode::Sole
    }
}

/// Deliveries one write of a recover re-queues at most. The writer runs one write at a time,
/// and a recover after a long outage may re-queue hundreds of thousands (0.8 s for 100,000 in
/// one statement): in chunks, the publishes waiting meanwhile get their turns in between.
const RECOVER_CHUNK: u64 = 1_000;

/// Up to [`RECOVER_CHUNK`] of endpoint `?1`'s failed deliveries of messages created in
/// `[?3, ?4)` (`?4` NULL: open-ended) that still have their payload, made pending (`?2`) and due
/// at `?5`, or waiting if they have an ordering key; answers each one's key. The chunk is in
/// the text: SQLite prepares a statement again for each LIMIT bound.
static RECOVER: LazyLock<String> = LazyLock::new(|| {
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

/// The enabled endpoints not skipped (`?2`, a JSON array: those the claimer has no room for)
/// with a delivery due by `?1`, the one waiting longest first.
///
/// Only endpoints with queued deliveries are looked at, found by stepping through the distinct
/// endpoint ids of `deliveries_endpoint_due` (`queued`, one probe each): a deployment has many
/// more endpoints than endpoints with work, and a claim runs on the writer thread, so it must
/// not cost a probe per endpoint (23 ms a claim with 50,000 endpoints did).
const READY_ENDPOINTS: &str = "WITH RECURSIVE queued(id) AS (
        SELECT MIN(endpoint_id) FROM deliveries WHERE next_attempt_at IS NOT NULL
        UNION ALL
        SELECT (SELECT MIN(d.endpoint_id) FROM deliveries d
                WHERE d.next_attempt_at IS NOT NULL AND d.endpoint_id > q.id)
        FROM queued q WHERE q.id IS NOT NULL
    )
    SELECT id FROM (
        SELECT e.id, (SELECT MIN(d.next_attempt_at) FROM deliveries d
                      WHERE d.endpoint_id = e.id AND d.next_attempt_at IS NOT NULL) AS oldest
        FROM queued q JOIN endpoints e ON e.id = q.id
        WHERE e.disabled = 0 AND e.id NOT IN (SELECT value FROM json_each(?2))
    ) WHERE oldest <= ?1 ORDER BY oldest";

/// The deliveries of endpoint `?1` due by `?2`, oldest first.
const OLDEST_DUE: &str = "SELECT message_id, next_attempt_at FROM deliveries
    WHERE endpoint_id = ?1 AND next_attempt_at IS NOT NULL AND next_attempt_at <= ?2
    ORDER BY next_attempt_at";

/// Marks the chosen due deliveries `sending` until the lease ends, then loads what their
/// attempts need. Runs on the writer thread, so nothing else writes in between.
///
/// Endpoint by endpoint, never scanning a backlog: one probe of deliveries_endpoint_due per
/// endpoint with queued deliveries finds its oldest due time; the `limit` endpoints waiting
/// longest each give at most their room of their oldest due deliveries.
fn claim(conn: &Connection, request: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, StoreError> {
    let skip: Vec<&str> = request
        .rooms
        .iter()
        .filter(|(_, room)| **room == 0)
        .map(|(id, _)| id.as_str())
        .collect();
    let now = request.now.as_millis();
    let ready: Vec<EndpointId> = conn
        .prepare_cached(READY_ENDPOINTS)?
        .query_map(params![now, encode(&skip)], |row| {
            row.get(0).map(EndpointId::from_stored)
        })?
        // Limits are taken in Rust, not by a `LIMIT ?`: SQLite re-prepares a statement each
        // time a LIMIT parameter is bound.
        .take(request.limit)
        .collect::<Result<_, _>>()?;
    let mut oldest_due = conn.prepare_cached(OLDEST_DUE)?;
    let mut picked: Vec<(i64, String, String)> = Vec::new();
    for endpoint in &ready {
        let rows = oldest_due.query_map(params![endpoint.as_str(), now], |row| {
            Ok((
                row.get::<_, i64>(1)?,
                row.get::<_, String>(0)?,
                endpoint.as_str().to_owned(),
            ))
        })?;
        for row in rows.take(request.room(endpoint)) {
            picked.push(row?);
        }
    }
    picked.sort();
    picked.truncate(request.limit);
    let mut mark = conn.prepare_cached(MARK_CLAIMED)?;
    let mut claimed = Vec::with_capacity(picked.len());
    for (_, message, endpoint) in picked {
        mark.execute(params![
            message,
            endpoint,
            DeliveryStatus::Sending.code(),
            request.lease_until.as_millis(),
            now,
        ])?;
        claimed.push((message, endpoint));
    }
    let mut loader = ClaimLoader::default();
    claimed
        .iter()
        .filter_map(|(message, endpoint)| loader.load(conn, message, endpoint).transpose())
        .collect()
}

/// Marks a delivery (`?1`, `?2`) claimed: `sending` (`?3`) until the lease ends (`?4`).
///
/// `OR FAIL`, as the record's update: a statement that may end in an `ABORT` (the unique index
/// `deliveries_key_head`) may make SQLite copy the pages it touches to a statement journal
/// first, to undo that statement alone. Under `FAIL` it keeps none: a failed statement fails
/// its whole write job, whose writes the writer undoes anyway (`writer::run_batch`), so the
/// journal would only be paid for, on every delivery.
const MARK_CLAIMED: &str =
    "UPDATE OR FAIL deliveries SET status = ?3, next_attempt_at = ?4, updated_at = ?5
    WHERE message_id = ?1 AND endpoint_id = ?2";

/// Loads claimed deliveries with what their attempts need: each by its key, and each endpoint
/// once. (Joining a list of them, as JSON, to the tables cost SQLite several times more a row:
/// it parsed the list and sorted what it joined.)
#[derive(Default)]
struct ClaimLoader {
    endpoints: HashMap<String, Endpoint>,
}

impl ClaimLoader {
    /// The claimed delivery of `message` to `endpoint`; `None` if it is gone.
    fn load(
        &mut self,
        conn: &Connection,
        message: &str,
        endpoint: &str,
    ) -> Result<Option<ClaimedDelivery>, StoreError> {
        static CLAIMED: LazyLock<String> = LazyLock::new(|| {
            format!(
                "SELECT {DELIVERY_COLUMNS}, d.manual, {MESSAGE_COLUMNS}
                 FROM deliveries d JOIN messages m ON m.id = d.message_id
                 WHERE d.message_id = ?1 AND d.endpoint_id = ?2"
            )
        });
        static ENDPOINT: LazyLock<String> =
            LazyLock::new(|| format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.id = ?1"));
        if !self.endpoints.contains_key(endpoint) {
            let found = rows::collect(conn, &ENDPOINT, [endpoint], rows::endpoint)?;
            let Some(found) = found.into_iter().next() else {
                return Ok(None);
            };
            self.endpoints.insert(endpoint.to_owned(), found);
        }
        let to = &self.endpoints[endpoint];
        let loaded = rows::collect(conn, &CLAIMED, [message, endpoint], |row| {
            rows::claimed(row, to.clone())
        })?;
        Ok(loaded.into_iter().next())
    }
}

/// Hands `handoff` the deliveries these records made due next in their ordering keys (each
/// record queued its key's next when it settled the one ahead), as a publish hands off new
/// ones: those it has room for are written claimed under its lease in this write and started
/// once committed, so a key's next message needs no claim.
fn hand_off_next_in_order(
    conn: &Connection,
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
        let next: Option<String> = conn
            .prepare_cached(
                "SELECT d.message_id FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
                 WHERE d.endpoint_id = ?1 AND d.ordering_key = ?2 AND d.next_attempt_at IS NOT NULL
                   AND d.status = ?3 AND NOT e.disabled",
            )?
            .query_row(
                params![d.endpoint_id.as_str(), key, DeliveryStatus::Pending.code()],
                |row| row.get(0),
            )
            .optional()?;
        let Some(message) = next else { continue };
        let Some(reserved) = handoff.reserve(&d.endpoint_id) else {
            continue;
        };
        conn.prepare_cached(MARK_CLAIMED)?.execute(params![
            message,
            d.endpoint_id.as_str(),
            DeliveryStatus::Sending.code(),
            reserved.lease_until().as_millis(),
            d.updated_at.as_millis(),
        ])?;
        taken.push(((message, d.endpoint_id.to_string()), reserved));
    }
    let mut loader = ClaimLoader::default();
    let mut handed = Vec::with_capacity(taken.len());
    for ((message, endpoint), reserved) in taken {
        if let Some(claimed) = loader.load(conn, &message, &endpoint)? {
            handed.push((claimed, reserved));
        }
    }
    Ok(handed)
}

/// Records one attempt; see [`DeliveryQueue::record_attempts`].
fn record(conn: &Connection, record: &AttemptRecord) -> Result<Recorded, StoreError> {
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
        let exists: bool = conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM deliveries WHERE message_id = ?1 AND endpoint_id = ?2)",
            )?
            .query_row(params![d.message_id.as_str(), d.endpoint_id.as_str()], |row| {
                row.get(0)
            })?;
        if !exists {
            return Ok(Recorded::Gone);
        }
        insert_attempt(conn, a)?;
        return Ok(Recorded::Stale);
    }
    insert_attempt(conn, a)?;
    if settled_in_order {
        let key: String = conn
            .prepare_cached(
                "SELECT ordering_key FROM deliveries WHERE message_id = ?1 AND endpoint_id = ?2",
            )?
            .query_row(
                params![d.message_id.as_str(), d.endpoint_id.as_str()],
                |row| row.get(0),
            )?;
        queue_next_in_order(conn, &d.endpoint_id, &key, d.updated_at)?;
    }
    // A success ends the endpoint's failure streak; a failure starts one unless started. The
    // endpoint row is written only when the streak changes: most attempts leave it alone.
    let streak: Option<i64> = if a.status == DeliveryStatus::Success {
        conn.prepare_cached(
            "UPDATE endpoints SET failing_since = NULL WHERE id = ?1 AND failing_since IS NOT NULL",
        )?
        .execute([a.endpoint_id.as_str()])?;
        None
    } else {
        conn.prepare_cached(
            "UPDATE endpoints SET failing_since = ?2 WHERE id = ?1 AND failing_since IS NULL",
        )?
        .execute(params![a.endpoint_id.as_str(), a.created_at.as_millis()])?;
        conn.prepare_cached("SELECT failing_since FROM endpoints WHERE id = ?1")?
            .query_row([a.endpoint_id.as_str()], |row| row.get(0))
            .optional()?
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
    conn: &Connection,
    record: &AttemptRecord,
    ordered: Option<Ordered>,
) -> Result<bool, StoreError> {
    let d = &record.next;
    let moved = conn
        .prepare_cached(
            "UPDATE OR FAIL deliveries SET status = ?3, attempt_count = ?4, next_attempt_at = ?5,
             updated_at = ?6, manual = 0 WHERE message_id = ?1 AND endpoint_id = ?2
             AND (?7 IS NULL OR (status = ?8 AND next_attempt_at = ?7))
             AND (?9 IS NULL OR (ordering_key IS NOT NULL) = ?9)",
        )?
        .execute(params![
            d.message_id.as_str(),
            d.endpoint_id.as_str(),
            d.status.code(),
            d.attempt_count,
            d.next_attempt_at.map(Timestamp::as_millis),
            d.updated_at.as_millis(),
            record.lease.map(Timestamp::as_millis),
            DeliveryStatus::Sending.code(),
            ordered.map(|o| matches!(o, Ordered::Yes)),
        ])?;
    Ok(moved > 0)
}

/// Inserts an attempt's row for the delivery log.
fn insert_attempt(conn: &Connection, a: &Attempt) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO attempts (id, message_id, endpoint_id, url, response_status_code, response,
         response_head, response_duration_ms, status, trigger_type, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
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
    .map_err(missing("delivery"))?;
    Ok(())
}

/// Which parent of a delivery is missing, after a FOREIGN KEY violation.
fn missing_parent(conn: &Connection, message: &MessageId) -> Result<StoreError, StoreError> {
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use rusqlite::StatementStatus;

    use super::*;

    /// A migrated database in `dir` with application `app_1`, its endpoint `ep_1` and
    /// messages `msg_1` and `msg_2`; its path and a connection to it.
    fn one_endpoint(dir: &tempfile::TempDir) -> (std::path::PathBuf, Connection) {
        let path = dir.path().join("hookd.db");
        let conn = super::super::writer::migrated(&path);
        conn.execute_batch(super::super::writer::TWO_MESSAGES_TO_ONE_ENDPOINT)
            .unwrap();
        (path, conn)
    }

    /// A claim at `at` ms of at most `limit` deliveries, 4 an endpoint, under a 90 s lease.
    fn request(at: i64, limit: usize) -> ClaimRequest {
        let now = Timestamp::from_millis(at);
        ClaimRequest {
            now,
            lease_until: now.plus(Duration::from_secs(90)),
            limit,
            per_endpoint: 4,
            rooms: HashMap::new(),
            ceiling: 4,
        }
    }

    #[test]
    fn claims_of_different_sizes_reuse_their_prepared_queries() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = one_endpoint(&dir);
        conn.execute_batch(
            "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                 next_attempt_at, updated_at)
                 VALUES ('msg_1', 'ep_1', 0, 0, 0, 0), ('msg_2', 'ep_1', 0, 0, 0, 0);",
        )
        .unwrap();
        for (limit, at) in [(7, 1_000), (1, 2_000), (30, 3_000)] {
            claim(&conn, &request(at, limit)).unwrap();
        }
        for sql in [READY_ENDPOINTS, OLDEST_DUE] {
            let statement = conn.prepare_cached(sql).unwrap();
            assert_eq!(statement.get_status(StatementStatus::RePrepare), 0, "{sql}");
        }
    }

    #[tokio::test]
    async fn a_recover_of_more_than_a_chunk_requeues_every_failed_delivery() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = one_endpoint(&dir);
        let failed = 2 * RECOVER_CHUNK + RECOVER_CHUNK / 2;
        conn.execute_batch(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {failed})
             INSERT INTO messages (id, app_id, event_type, payload, created_at)
             SELECT 'msg_failed_' || i, 'app_1', 't', x'7b7d', 0 FROM n;
             INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, updated_at)
             SELECT id, 'ep_1', {}, 10, 0 FROM messages WHERE id LIKE 'msg_failed_%';",
            DeliveryStatus::Fail.code()
        ))
        .unwrap();
        let store = SqliteStore::open(&path).await.unwrap();
        let (ep, now) = (
            EndpointId::from_stored("ep_1".into()),
            Timestamp::from_millis(5),
        );
        let recovered = store.recover(&ep, Timestamp::from_millis(0), None, now);
        assert_eq!(recovered.await.unwrap(), failed);
        let pending: i64 = conn
            .query_row(
                "SELECT count(*) FROM deliveries WHERE status = ?1 AND next_attempt_at = 5",
                [DeliveryStatus::Pending.code()],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(pending as u64, failed);
    }

    /// SQLite's query plan for `sql` (its parameters unbound), one step a line.
    fn plan(conn: &Connection, sql: &str) -> String {
        let mut explain = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let mut rows = explain.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get::<_, String>(3).unwrap());
        }
        steps.join("\n")
    }

    #[test]
    fn searches_for_deliveries_not_delivered_use_their_partial_index() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = one_endpoint(&dir);
        let by_status = "deliveries_by_endpoint_status (endpoint_id=? AND status=?)";
        let messages = format!(
            "SELECT m.id FROM messages m WHERE {}",
            crate::sql::search::delivery_status_condition(DeliveryStatus::Fail)
        );
        let endpoint = EndpointId::from_stored("ep_1".into());
        // The first page of the endpoint's deliveries in `status`.
        let endpoint_list = |status| {
            crate::sql::messages::endpoint_first_page(
                crate::sql::Dialect::Sqlite,
                &endpoint,
                status,
            )
            .sql
        };
        let failed = endpoint_list(DeliveryStatus::Fail);
        for sql in [messages.as_str(), &failed, &RECOVER] {
            let plan = plan(&conn, sql);
            assert!(plan.contains(by_status), "{sql}\n{plan}");
        }
        // Delivered ones are not in it: an endpoint's delivered list walks its deliveries.
        let delivered = endpoint_list(DeliveryStatus::Success);
        assert!(plan(&conn, &delivered).contains("deliveries_by_endpoint "));
    }

    #[test]
    fn a_claim_steps_through_the_endpoints_with_queued_deliveries_not_every_endpoint() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = one_endpoint(&dir);
        conn.execute_batch(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
             INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
                 secret, created_at, updated_at)
             SELECT 'ep_idle_' || i, 'app_1', 'http://localhost/', '', 0, '{}', '{}', 's', 0, 0
             FROM n;
             INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                 next_attempt_at, updated_at)
                 VALUES ('msg_1', 'ep_1', 0, 0, 0, 0);",
        )
        .unwrap();
        let claimed = claim(&conn, &request(1_000, 8)).unwrap();
        assert_eq!(claimed.len(), 1);
        let statement = conn.prepare_cached(READY_ENDPOINTS).unwrap();
        let scanned = statement.get_status(StatementStatus::FullscanStep);
        assert!(scanned < 10, "the claim stepped through {scanned} rows");
    }
}
