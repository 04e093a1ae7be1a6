//! The SQL of the delivery log's search and of endpoint statistics that both dialects share.
//!
//! Searching a million messages stays an index range scan because ids sort by creation time:
//! a time bound is also an id bound ([`hookd_core::MessageId::lowest_at`]), so a time range
//! walks the `(app_id, id)` or `(app_id, event_type, id)` index from one end instead of
//! filtering the whole application. A status search starts from the few deliveries in that
//! state (index `(endpoint_id, status, message_id)`, which holds only deliveries not
//! delivered), except for delivered, which most messages are: there the newest messages are
//! walked and each is probed by its key.

use std::time::Duration;

use hookd_core::model::DeliveryStatus;
use hookd_core::{AttemptId, MessageId, Timestamp};

use crate::EndpointStats;

/// The id bounds of messages created strictly before `before` and strictly after `after`:
/// `m.id < first` and `m.id >= second`.
pub fn message_id_bounds(
    before: Option<Timestamp>,
    after: Option<Timestamp>,
) -> (Option<String>, Option<String>) {
    (
        before.map(|at| MessageId::lowest_at(at).to_string()),
        after.map(|at| MessageId::lowest_at(at.plus(Duration::from_millis(1))).to_string()),
    )
}

/// The condition of the partial index `deliveries_by_endpoint_status` (SQLite's schema v18,
/// PostgreSQL's v23), on deliveries `d`: a query for deliveries not delivered repeats it, or
/// SQLite cannot use the index, nor PostgreSQL in a generic plan whose status is a parameter.
/// (`0` is [`DeliveryStatus::Success`].)
pub const NOT_DELIVERED: &str = "d.status <> 0";

/// The condition that a message `m` has a delivery in `status`, with one `?` that stands for
/// the message's application id.
pub fn delivery_status_condition(status: DeliveryStatus) -> String {
    let codes = match status {
        // `LIMIT 1 OFFSET 0` keeps this a probe per message on PostgreSQL: without it the
        // planner may turn the EXISTS into a hash join over every delivered row (seconds on a
        // million) whenever its statistics are stale, as after a bulk load.
        DeliveryStatus::Success => {
            return format!(
                "m.app_id = ? AND EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.id \
                 AND d.status = {} LIMIT 1 OFFSET 0)",
                DeliveryStatus::Success.code()
            );
        }
        DeliveryStatus::Pending => vec![DeliveryStatus::Pending, DeliveryStatus::Sending],
        other => vec![other],
    };
    let codes: Vec<String> = codes.iter().map(|s| s.code().to_string()).collect();
    format!(
        "m.id IN (SELECT d.message_id FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id \
         WHERE e.app_id = ? AND d.status IN ({}) AND {NOT_DELIVERED})",
        codes.join(", ")
    )
}

/// The id ranges of `since..until` for messages and for attempts.
pub fn stats_ranges(since: Timestamp, until: Timestamp) -> [(String, String); 2] {
    [
        (
            MessageId::lowest_at(since).to_string(),
            MessageId::lowest_at(until).to_string(),
        ),
        (
            AttemptId::lowest_at(since).to_string(),
            AttemptId::lowest_at(until).to_string(),
        ),
    ]
}

/// Adds up the `(status, count)` rows of the two counting queries.
pub fn stats_from(deliveries: &[(i64, i64)], attempts: &[(i64, i64)]) -> EndpointStats {
    let mut stats = EndpointStats::default();
    for &(code, count) in deliveries {
        let count = count.max(0) as u64;
        match DeliveryStatus::from_code(code) {
            DeliveryStatus::Success => stats.success += count,
            DeliveryStatus::Pending => stats.pending += count,
            DeliveryStatus::Sending => stats.sending += count,
            DeliveryStatus::Fail => stats.fail += count,
        }
    }
    for &(code, count) in attempts {
        let count = count.max(0) as u64;
        stats.attempts += count;
        if DeliveryStatus::from_code(code) == DeliveryStatus::Success {
            stats.successful_attempts += count;
        }
    }
    stats
}
