//! Claiming on SQLite: the due deliveries of the endpoints with room, marked `sending` under
//! a lease in one writer job, and loaded with what their attempts need.

use hookd_core::model::{DeliveryStatus, Endpoint};
use hookd_core::{EndpointId, Timestamp};
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

/// The deliveries of endpoint `?1` due by `?2`, oldest first, each with its message: what
/// its attempt needs, read in the step that finds it (`rows::claimed`).
pub(super) const OLDEST_DUE: Sql = sql!(
    "SELECT ",
    DELIVERY_COLUMNS,
    ", d.manual, ",
    MESSAGE_COLUMNS,
    " FROM deliveries d JOIN messages m ON m.id = d.message_id
     WHERE d.endpoint_id = ?1 AND d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= ?2
     ORDER BY d.next_attempt_at"
);

/// Marks the chosen due deliveries `sending` until the lease ends, with what their attempts
/// need. Runs on the writer thread, so nothing else writes in between.
///
/// Endpoint by endpoint, never scanning a backlog: one probe of deliveries_endpoint_due per
/// endpoint with queued deliveries finds its oldest due time; the `limit` endpoints waiting
/// longest each give at most their room of their oldest due deliveries, read whole as they are
/// found, so marking them is the only other statement a delivery costs.
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
    let mut picked = Vec::new();
    for (_, endpoint) in &ready {
        let Some(to) = endpoint_row(conn, endpoint.as_str())? else {
            continue;
        };
        oldest_due(conn, &to, now, request.room(endpoint), &mut picked)?;
    }
    picked.sort_by(|a, b| claim_order(a).cmp(&claim_order(b)));
    picked.truncate(request.limit);
    let lease_until = request.lease_until;
    for claimed in &mut picked {
        let d = &mut claimed.delivery;
        conn.prepared(MARK_CLAIMED, |mark| {
            mark.execute(params![
                d.message_id.as_str(),
                d.endpoint_id.as_str(),
                DeliveryStatus::Sending.code(),
                lease_until.as_millis(),
                now,
            ])
        })?;
        // As marked.
        d.status = DeliveryStatus::Sending;
        d.next_attempt_at = Some(lease_until);
        d.updated_at = request.now;
    }
    Ok(picked)
}

/// Adds to `picked` the oldest `room` deliveries due by `now` to endpoint `to`.
fn oldest_due(
    conn: &Tx<'_>,
    to: &Endpoint,
    now: i64,
    room: usize,
    picked: &mut Vec<ClaimedDelivery>,
) -> Result<(), StoreError> {
    conn.prepared(OLDEST_DUE.sqlite(), |oldest_due| {
        let mut found = oldest_due.query(params![to.id.as_str(), now])?;
        for _ in 0..room {
            let Some(row) = found.next()? else { break };
            picked.push(rows::claimed(row, to.clone())?);
        }
        Ok(())
    })
}

/// The order a claim takes deliveries in: due first, then by message and endpoint.
fn claim_order(claimed: &ClaimedDelivery) -> (Option<Timestamp>, &str, &str) {
    let d = &claimed.delivery;
    (
        d.next_attempt_at,
        d.message_id.as_str(),
        d.endpoint_id.as_str(),
    )
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
