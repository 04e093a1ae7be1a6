//! The SQL of an endpoint's health both dialects share: its history counted in equal slices of
//! time, and the message that has waited longest for it.
//!
//! The slice of a row is `(created_at - since) / bucket`, integer division on both databases,
//! while the range itself is bounded by ids (which sort by creation time), so the counts walk
//! the `(endpoint_id, id)` index of attempts and the `(endpoint_id, status, message_id)` index
//! of deliveries not delivered, never the endpoint's whole history.

use hookd_core::model::DeliveryStatus;
use hookd_core::{EndpointId, MessageId, Timestamp};

use super::rows::{Columns, Decoded, int, text};
use super::search::NOT_DELIVERED;
use super::{Arg, Statement, args, sql};
use crate::{HealthBucket, HealthWindow, OldestPending};

/// The statuses of a delivery that still waits: queued, or in an attempt now.
pub const WAITING: [DeliveryStatus; 2] = [DeliveryStatus::Pending, DeliveryStatus::Sending];

/// The arguments both counts start with: `?1` the endpoint, `?2` the window's start and `?3`
/// its slice length (milliseconds), `?4..?5` the id range.
fn bucketed<'a>(
    endpoint: &'a EndpointId,
    window: &HealthWindow,
    (from, below): &'a (String, String),
) -> Vec<Arg<'a>> {
    let bucket = i64::try_from(window.bucket.as_millis()).unwrap_or(i64::MAX);
    let since = window.since.as_millis();
    args![
        endpoint.as_str(),
        since,
        bucket.max(1),
        from.as_str(),
        below.as_str()
    ]
}

/// Attempts to an endpoint in an attempt-id range: `slice, status, count` rows.
pub fn attempts<'a>(
    endpoint: &'a EndpointId,
    window: &HealthWindow,
    range: &'a (String, String),
) -> Statement<'a> {
    let sql = sql!(
        "SELECT (created_at - ?2) / ?3, status, COUNT(*) FROM attempts
         WHERE endpoint_id = ?1 AND id >= ?4 AND id < ?5 GROUP BY 1, 2"
    );
    Statement::new(sql, bucketed(endpoint, window, range))
}

/// Deliveries to an endpoint still waiting, of messages in a message-id range:
/// `slice, count` rows.
pub fn waiting<'a>(
    endpoint: &'a EndpointId,
    window: &HealthWindow,
    range: &'a (String, String),
) -> Statement<'a> {
    let sql = sql!(
        "SELECT (m.created_at - ?2) / ?3, COUNT(*) FROM deliveries d
         JOIN messages m ON m.id = d.message_id
         WHERE d.endpoint_id = ?1 AND d.status IN (?6, ?7) AND ",
        NOT_DELIVERED,
        " AND d.message_id >= ?4 AND d.message_id < ?5 GROUP BY 1"
    );
    let mut args = bucketed(endpoint, window, range);
    args.extend(WAITING.map(|status| Arg::from(status.code())));
    Statement::new(sql, args)
}

/// The oldest message whose delivery to an endpoint is in `status`: `message_id, created_at`.
/// One status per statement, so the index gives it in order without a sort.
pub fn oldest(endpoint: &EndpointId, status: DeliveryStatus) -> Statement<'_> {
    let sql = sql!(
        "SELECT d.message_id, m.created_at FROM deliveries d
         JOIN messages m ON m.id = d.message_id
         WHERE d.endpoint_id = ?1 AND d.status = ?2 AND ",
        NOT_DELIVERED,
        " ORDER BY d.message_id LIMIT 1"
    );
    Statement::new(sql, args![endpoint.as_str(), status.code()])
}

/// A row of [`oldest`].
pub fn oldest_row(row: &dyn Columns) -> Decoded<OldestPending> {
    Ok(OldestPending {
        message_id: MessageId::from_stored(text(row, 0)?),
        created_at: Timestamp::from_millis(int(row, 1)?),
    })
}

/// A row of [`attempts`]: slice, status, count.
pub fn attempt_row(row: &dyn Columns) -> Decoded<(i64, i64, i64)> {
    Ok((int(row, 0)?, int(row, 1)?, int(row, 2)?))
}

/// A row of [`waiting`]: slice, count.
pub fn waiting_row(row: &dyn Columns) -> Decoded<(i64, i64)> {
    Ok((int(row, 0)?, int(row, 1)?))
}

/// The window's slices from the rows of [`attempts`] and [`waiting`]. A row outside the
/// window (a clock that stepped back between an id and its `created_at`) is left out.
pub fn buckets(
    window: &HealthWindow,
    attempts: &[(i64, i64, i64)],
    waiting: &[(i64, i64)],
) -> Vec<HealthBucket> {
    let mut out = vec![HealthBucket::default(); window.buckets];
    let len = out.len();
    let slot = |index: i64| usize::try_from(index).ok().filter(|&i| i < len);
    for &(index, status, count) in attempts {
        if let Some(i) = slot(index) {
            let count = count.max(0) as u64;
            match DeliveryStatus::from_code(status) {
                DeliveryStatus::Success => out[i].succeeded += count,
                _ => out[i].failed += count,
            }
        }
    }
    for &(index, count) in waiting {
        if let Some(i) = slot(index) {
            out[i].pending += count.max(0) as u64;
        }
    }
    out
}
