//! The column lists both implementations select, in the order their row decoders read them.
//!
//! The SQL around them is written per dialect, but these lists are plain SQL that both
//! SQLite and PostgreSQL accept, and each dialect's `rows` module decodes by position against
//! them: keeping one copy means the two decoders cannot drift apart from the lists or from
//! each other. Table aliases: `e` endpoints, `m` messages, `d` deliveries, `a` attempts.

use hookd_core::model::Ordering;

pub const APP_COLUMNS: &str =
    "id, uid, name, metadata, throttle_rate, created_at, updated_at, envelope";

pub const ENDPOINT_COLUMNS: &str = "e.id, e.app_id, e.uid, e.url, e.description, e.event_types, \
    e.channels, e.disabled, e.throttle_rate, e.metadata, e.headers, e.secret, e.created_at, e.updated_at, \
    e.disabled_reason, e.disabled_at, e.timeout_secs, e.max_concurrency, e.strict_order, \
    e.kind, e.config, e.batch_size, e.max_wait_secs";

/// How many columns [`ENDPOINT_COLUMNS`] has: where the next record starts in a join.
pub const ENDPOINT_WIDTH: usize = 23;

/// The condition (on a row of `endpoints`, unaliased) for the endpoints publishing writes
/// deliveries for: all but polling destinations, whose consumers read the messages themselves.
pub const DELIVERED: &str = "kind <> 'polling'";

pub const EVENT_TYPE_COLUMNS: &str = "name, description, schemas, archived, deprecated, \
     feature_flag, created_at, updated_at, group_name, feature_flags, envelope";

pub const MESSAGE_COLUMNS: &str = "m.id, m.app_id, m.event_type, m.event_id, m.channels, m.payload, m.created_at, m.ordering_key, \
     m.tags, m.deliver_at";

/// How many columns [`MESSAGE_COLUMNS`] has: where the next record starts in a join.
pub const MESSAGE_WIDTH: usize = 10;

pub const DELIVERY_COLUMNS: &str = "d.message_id, d.endpoint_id, d.status, d.attempt_count, d.next_attempt_at, d.updated_at, \
     d.ordering_key";

/// How many columns [`DELIVERY_COLUMNS`] has: where the next record starts in a join.
pub const DELIVERY_WIDTH: usize = 7;

pub const ATTEMPT_COLUMNS: &str = "a.id, a.message_id, a.endpoint_id, a.url, a.response_status_code, \
    a.response, a.response_duration_ms, a.status, a.trigger_type, a.created_at, a.response_head";

pub const TOKEN_COLUMNS: &str = "id, token_hash, app_id, created_at, expires_at, name, \
    revoked_at, rate_limit, read_only, endpoint_id";

/// An endpoint's ordering from its stored `strict_order` flag.
pub fn ordering(strict_order: bool) -> Ordering {
    if strict_order {
        Ordering::Strict
    } else {
        Ordering::PerKey
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_match_the_lists() {
        assert_eq!(ENDPOINT_COLUMNS.split(',').count(), ENDPOINT_WIDTH);
        assert_eq!(MESSAGE_COLUMNS.split(',').count(), MESSAGE_WIDTH);
        assert_eq!(DELIVERY_COLUMNS.split(',').count(), DELIVERY_WIDTH);
    }
}
