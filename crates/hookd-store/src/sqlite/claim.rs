//! Claiming on SQLite: the due deliveries of the endpoints with room, marked `sending` under
//! a lease in one writer job, and loaded with what their attempts need.

use std::collections::HashMap;
use std::sync::LazyLock;

use hookd_core::EndpointId;
use hookd_core::model::{DeliveryStatus, Endpoint};
use rusqlite::{Connection, params};

use super::rows;
use crate::columns::{DELIVERY_COLUMNS, ENDPOINT_COLUMNS, MESSAGE_COLUMNS};
use crate::json::encode;
use crate::{ClaimRequest, ClaimedDelivery, StoreError};

/// The enabled endpoints not skipped (`?2`, a JSON array: those the claimer has no room for)
/// with a delivery due by `?1`, the one waiting longest first.
///
/// Only endpoints with queued deliveries are looked at, found by stepping through the distinct
/// endpoint ids of `deliveries_endpoint_due` (`queued`, one probe each): a deployment has many
/// more endpoints than endpoints with work, and a claim runs on the writer thread, so it must
/// not cost a probe per endpoint (23 ms a claim with 50,000 endpoints did).
pub(super) const READY_ENDPOINTS: &str = "WITH RECURSIVE queued(id) AS (
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
pub(super) const OLDEST_DUE: &str = "SELECT message_id, next_attempt_at FROM deliveries
    WHERE endpoint_id = ?1 AND next_attempt_at IS NOT NULL AND next_attempt_at <= ?2
    ORDER BY next_attempt_at";

/// Marks the chosen due deliveries `sending` until the lease ends, then loads what their
/// attempts need. Runs on the writer thread, so nothing else writes in between.
///
/// Endpoint by endpoint, never scanning a backlog: one probe of deliveries_endpoint_due per
/// endpoint with queued deliveries finds its oldest due time; the `limit` endpoints waiting
/// longest each give at most their room of their oldest due deliveries.
pub(super) fn claim(
    conn: &Connection,
    request: &ClaimRequest,
) -> Result<Vec<ClaimedDelivery>, StoreError> {
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
pub(super) const MARK_CLAIMED: &str =
    "UPDATE OR FAIL deliveries SET status = ?3, next_attempt_at = ?4, updated_at = ?5
    WHERE message_id = ?1 AND endpoint_id = ?2";

/// Loads claimed deliveries with what their attempts need: each by its key, and each endpoint
/// once. (Joining a list of them, as JSON, to the tables cost SQLite several times more a row:
/// it parsed the list and sorted what it joined.)
#[derive(Default)]
pub(super) struct ClaimLoader {
    endpoints: HashMap<String, Endpoint>,
}

impl ClaimLoader {
    /// The claimed delivery of `message` to `endpoint`; `None` if it is gone.
    pub(super) fn load(
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
