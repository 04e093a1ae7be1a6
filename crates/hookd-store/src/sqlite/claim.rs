//! Claiming on SQLite: the due deliveries of the endpoints with room, marked `sending` under
//! a lease in one writer job, and loaded with what their attempts need.

use hookd_core::EndpointId;
use hookd_core::model::DeliveryStatus;
use rusqlite::params;

use super::publish::endpoint_row;
use super::rows::{self, Prepare, fetch_one};
use super::writer::Tx;
use crate::columns::{DELIVERY_COLUMNS, MESSAGE_COLUMNS};
use crate::sql::{Sql, Statement, args, sql};
use crate::{ClaimRequest, ClaimedDelivery, StoreError};

/// The enabled endpoints with a delivery due by `?1`, each with its oldest due time.
///
/// Only endpoints with queued deliveries are looked at, found by stepping through the distinct
/// endpoint ids of `deliveries_endpoint_due` (`queued`, one probe each): a deployment has many
/// more endpoints than endpoints with work, and a claim runs on the writer thread, so it must
/// not cost a probe per endpoint (23 ms a claim with 50,000 endpoints did). Those the claimer
/// has no room for are left out, and the rest ordered, by [`claim`]: a list of them bound as
/// JSON and an `ORDER BY` each made SQLite build a temporary B-tree on every claim, which cost
/// more than the probes themselves at one endpoint.
pub(super) const READY_ENDPOINTS: &str = "WITH RECURSIVE queued(id) AS (
        SELECT MIN(endpoint_id) FROM deliveries WHERE next_attempt_at IS NOT NULL
        UNION ALL
        SELECT (SELECT MIN(d.endpoint_id) FROM deliveries d
                WHERE d.next_attempt_at IS NOT NULL AND d.endpoint_id > q.id)
        FROM queued q WHERE q.id IS NOT NULL
    )
    SELECT id, oldest FROM (
        SELECT e.id, (SELECT MIN(d.next_attempt_at) FROM deliveries d
                      WHERE d.endpoint_id = e.id AND d.next_attempt_at IS NOT NULL) AS oldest
        FROM queued q JOIN endpoints e ON e.id = q.id
        WHERE e.disabled = 0
    ) WHERE oldest <= ?1";

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
    conn: &Tx<'_>,
    request: &ClaimRequest,
) -> Result<Vec<ClaimedDelivery>, StoreError> {
    let now = request.now.as_millis();
    let mut ready: Vec<(i64, EndpointId)> = conn.prepared(READY_ENDPOINTS, |ready| {
        ready
            .query_map([now], |row| {
                Ok((row.get(1)?, EndpointId::from_stored(row.get(0)?)))
            })?
            .collect::<rusqlite::Result<_>>()
    })?;
    // Not the endpoints the claimer has no room for; the one waiting longest first. Limits
    // are taken in Rust, not by a `LIMIT ?`: SQLite re-prepares a statement each time a LIMIT
    // parameter is bound.
    ready.retain(|(_, endpoint)| request.rooms.get(endpoint) != Some(&0));
    ready.sort_by_key(|(oldest, _)| *oldest);
    ready.truncate(request.limit);
    let mut picked: Vec<(i64, String, String)> = Vec::new();
    for (_, endpoint) in &ready {
        conn.prepared(OLDEST_DUE, |oldest_due| {
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
            Ok::<_, rusqlite::Error>(())
        })?;
    }
    picked.sort();
    picked.truncate(request.limit);
    let mut claimed = Vec::with_capacity(picked.len());
    for (_, message, endpoint) in picked {
        conn.prepared(MARK_CLAIMED, |mark| {
            mark.execute(params![
                message,
                endpoint,
                DeliveryStatus::Sending.code(),
                request.lease_until.as_millis(),
                now,
            ])
        })?;
        claimed.push((message, endpoint));
    }
    claimed
        .iter()
        .filter_map(|(message, endpoint)| load(conn, message, endpoint).transpose())
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

/// The claimed delivery of `message` to `endpoint`, with what its attempt needs; `None` if it
/// is gone. Each by its key, and the endpoint's row once a batch (`super::reads`). (Joining a
/// list of them, as JSON, to the tables cost SQLite several times more a row: it parsed the
/// list and sorted what it joined.)
pub(super) fn load(
    conn: &Tx<'_>,
    message: &str,
    endpoint: &str,
) -> Result<Option<ClaimedDelivery>, StoreError> {
    const CLAIMED: Sql = sql!(
        "SELECT ",
        DELIVERY_COLUMNS,
        ", d.manual, ",
        MESSAGE_COLUMNS,
        " FROM deliveries d JOIN messages m ON m.id = d.message_id
         WHERE d.message_id = ?1 AND d.endpoint_id = ?2"
    );
    let Some(to) = endpoint_row(conn, endpoint)? else {
        return Ok(None);
    };
    // One row at most (the key), which takes the endpoint.
    let mut to = Some(to);
    fetch_one(
        conn,
        &Statement::new(CLAIMED, args![message, endpoint]),
        |row| {
            let to = to.take().ok_or_else(|| {
                StoreError::Corrupt(format!("two deliveries of {message} to {endpoint}"))
            })?;
            rows::claimed(row, to)
        },
    )
}
