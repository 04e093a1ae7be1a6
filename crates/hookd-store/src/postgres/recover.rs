//! Putting deliveries back in PostgreSQL's queue: a recover's update, a resend, and the next
//! delivery of an ordering key made due once the one ahead of it leaves the queue.

use std::sync::LazyLock;

use hookd_core::model::DeliveryStatus;
use hookd_core::{EndpointId, Timestamp};

use super::publish::lock_parents;
use crate::StoreError;
use crate::sql::search::NOT_DELIVERED;

/// Recover's update: the endpoint's (`$1`) failed (`$6`) deliveries of messages made in
/// `$3..$4` whose payload is kept, queued again (`$2`) at `$5`, those with an ordering key to
/// wait for their key's turn. It says [`NOT_DELIVERED`] so that its generic plan reads the
/// endpoint's failed deliveries from their index.
pub(super) static RECOVER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE deliveries d SET status = $2, attempt_count = 0,
         next_attempt_at = CASE WHEN d.ordering_key IS NULL THEN $5::bigint END,
         updated_at = $5, manual = false
         FROM messages m
         WHERE m.id = d.message_id AND d.endpoint_id = $1 AND d.status = $6 AND {NOT_DELIVERED}
           AND m.created_at >= $3 AND ($4::bigint IS NULL OR m.created_at < $4)
           AND m.payload IS NOT NULL
         RETURNING d.ordering_key"
    )
});

/// For each of `keys` of `endpoint`, makes its oldest waiting delivery due at `at` unless one
/// is queued already (the function `queue_next_in_order`, under the key's lock), in the order
/// of the keys' locks.
/// Queues one manual attempt of `message` to `endpoint` (a resend), unless its delivery is in
/// flight (`None`); a delivery with an ordering key is written waiting, and its key returned
/// for the caller to queue the key's oldest (`Some(Some(key))`).
pub(super) async fn resend_one(
    conn: &mut sqlx::PgConnection,
    message: &str,
    endpoint: &EndpointId,
    now: Timestamp,
) -> Result<Option<Option<String>>, sqlx::Error> {
    lock_parents(&mut *conn, &[], &[message], &[endpoint.as_str()]).await?;
    sqlx::query_scalar(
        "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
         next_attempt_at, updated_at, manual, ordering_key)
         VALUES ($1, $2, $3, 0, $4, $4, true,
                 (SELECT CASE WHEN e.strict_order THEN '' ELSE m.ordering_key END
                  FROM messages m, endpoints e WHERE m.id = $1 AND e.id = $2))
         ON CONFLICT (message_id, endpoint_id) DO UPDATE SET status = $3,
         next_attempt_at = CASE WHEN deliveries.ordering_key IS NULL THEN $4 END,
         updated_at = $4, manual = true
         WHERE deliveries.status <> $5
         RETURNING ordering_key",
    )
    .bind(message)
    .bind(endpoint.as_str())
    .bind(i64::from(DeliveryStatus::Pending.code()))
    .bind(now.as_millis())
    .bind(i64::from(DeliveryStatus::Sending.code()))
    .fetch_optional(conn)
    .await
}

pub(super) async fn queue_next_in_order(
    conn: &mut sqlx::PgConnection,
    endpoint: &EndpointId,
    keys: &[String],
    at: Timestamp,
) -> Result<(), StoreError> {
    if keys.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "SELECT queue_next_in_order($1, k, $3) FROM unnest($2::text[]) k
         ORDER BY ordering_lock($1, k)",
    )
    .bind(endpoint.as_str())
    .bind(keys)
    .bind(at.as_millis())
    .execute(conn)
    .await?;
    Ok(())
}
