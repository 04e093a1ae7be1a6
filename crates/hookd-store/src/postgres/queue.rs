//! [`DeliveryQueue`] on PostgreSQL, where several processes claim from one table at once.
//!
//! A claim locks its candidate rows with `FOR UPDATE SKIP LOCKED`: a row another claimer holds
//! is skipped rather than waited for, and a row another claimer has already marked `sending`
//! fails the due-time check when re-read after its lock is released. So concurrent claimers
//! never get the same delivery.
//!
//! Per-endpoint limits hold across every process on the database, not per process (unless
//! [`PgStore::with_cluster_limits`] turned that off): claims take turns under one
//! transaction-scoped advisory lock, so each claim sees every earlier claim committed, and
//! counts an endpoint's deliveries in flight (`sending` with a live lease) against its
//! ceiling. The claim is one statement, a call of the function `claim_due` (migration
//! 0008; 0009 locks no more of an endpoint's rows than the claim may take; 0012 looks only at
//! endpoints with deliveries queued, and reads every row by key; 0014 takes each endpoint's
//! room as the claimer asks, under the endpoint's own ceiling), which takes the
//! lock, claims and commits inside the server: the turn never waits on a round trip to a
//! claimer, which on a busy machine may not be scheduled to send its `COMMIT` for
//! milliseconds. Nor on the WAL flush: the claim's commit does not wait for it. A
//! claim lost with the server leaves its deliveries due, as an expired lease does, and they are
//! sent again (at least once); the next record's commit flushes every claim before it.
//! A rate-limited endpoint gives at most one second's worth
//! of attempts to one claim and records when the next claim may take more
//! (`endpoints.next_window_at`); the claiming process spaces those attempts out itself. A
//! record moves that window too, when an endpoint asked to slow down (see `record`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Weak};

use async_trait::async_trait;
use hookd_core::model::{Delivery, DeliveryStatus, Message};
use hookd_core::{EndpointId, MessageId, Timestamp};
use sqlx::AssertSqlSafe;

use super::endpoints::require_endpoint;
use super::publish::insert_events;
use super::publisher::Taker;
use super::{PgStore, missing, rows};
use crate::columns::{DELIVERY_COLUMNS, ENDPOINT_COLUMNS, MESSAGE_COLUMNS};
use crate::sql::search::NOT_DELIVERED;
use crate::{
    AttemptRecord, ClaimRequest, ClaimedDelivery, DeliveryQueue, Handoff, HandoffMode, Recorded,
    Skipped, StoreError, skip_refused,
};

/// A claim: `claim_due` (see the module doc) answers whole table rows, unpacked here into the
/// columns the decoder reads. Built once; claims are on every delivery's path.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {DELIVERY_COLUMNS}, d.manual, {MESSAGE_COLUMNS}, {ENDPOINT_COLUMNS}
         FROM claim_due($1, $2, $3, $4, $5, $6, $7, $8) c
         CROSS JOIN LATERAL (SELECT (c.delivery).*) d
         CROSS JOIN LATERAL (SELECT (c.message).*) m
         CROSS JOIN LATERAL (SELECT (c.endpoint).*) e
         ORDER BY c.due, d.message_id, d.endpoint_id"
    )
});

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

#[async_trait]
impl DeliveryQueue for PgStore {
    async fn claim_due(&self, request: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, StoreError> {
        if request.limit == 0 || request.ceiling == 0 {
            return Ok(Vec::new());
        }
        let (room_ids, room_n): (Vec<&str>, Vec<i64>) = request
            .rooms
            .iter()
            .map(|(id, room)| (id.as_str(), sql_count(*room)))
            .unzip();
        let rows = sqlx::query(AssertSqlSafe(CLAIM.as_str()))
            .bind(request.now.as_millis())
            .bind(&room_ids)
            .bind(&room_n)
            .bind(sql_count(request.limit))
            .bind(sql_count(request.per_endpoint))
            .bind(sql_count(request.ceiling))
            .bind(request.lease_until.as_millis())
            .bind(self.cluster_limits)
            .fetch_all(&self.pool)
            .await?;
        let mut claimed = rows::ClaimedRows::default();
        rows.iter().map(|row| claimed.decode(row)).collect()
    }

    fn hand_off_new_deliveries(&self, handoff: Weak<dyn Handoff>) -> HandoffMode {
        let taker = Taker {
            handoff,
            cluster_limits: self.cluster_limits,
        };
        *self.taker.write().expect("handoff lock poisoned") = Some(taker);
        HandoffMode::Shared
    }

    async fn record_attempts(
        &self,
        records: &[AttemptRecord],
    ) -> Result<Vec<Recorded>, StoreError> {
        self.record_batch(records).await
    }

    async fn disable_endpoint(
        &self,
        endpoint: &EndpointId,
        reason: &str,
        at: Timestamp,
        events: &[Message],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE endpoints SET disabled = true, disabled_reason = $2, disabled_at = $3,
             updated_at = $3 WHERE id = $1 AND NOT disabled",
        )
        .bind(endpoint.as_str())
        .bind(reason)
        .bind(at.as_millis())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            require_endpoint(&mut *tx, endpoint).await?;
            return Ok(false);
        }
        insert_events(&mut tx, events).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn resend(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        // A delivery in flight (`sending`) is left alone: the update's WHERE fails. A missing
        // message or endpoint is named by the violated foreign key. One with an ordering key
        // is written waiting, then the oldest waiting of its key queued unless one is (it may
        // be this one), in the same transaction.
        let mut tx = self.pool.begin().await?;
        let queued = resend_one(&mut tx, message.as_str(), endpoint, now)
            .await
            .map_err(missing("message"))?;
        let Some(key) = queued else {
            return Ok(false);
        };
        queue_next_in_order(&mut tx, endpoint, key.as_slice(), now).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn recover(
        &self,
        endpoint: &EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        // Those with an ordering key are made to wait, then each key's oldest queued, in the
        // same transaction.
        let mut tx = self.pool.begin().await?;
        let keys: Vec<Option<String>> = sqlx::query_scalar(AssertSqlSafe(RECOVER.as_str()))
            .bind(endpoint.as_str())
            .bind(i64::from(DeliveryStatus::Pending.code()))
            .bind(since.as_millis())
            .bind(until.map(Timestamp::as_millis))
            .bind(now.as_millis())
            .bind(i64::from(DeliveryStatus::Fail.code()))
            .fetch_all(&mut *tx)
            .await?;
        let requeued = keys.len() as u64;
        let keys: BTreeSet<String> = keys.into_iter().flatten().collect();
        let keys: Vec<String> = keys.into_iter().collect();
        queue_next_in_order(&mut tx, endpoint, &keys, now).await?;
        tx.commit().await?;
        Ok(requeued)
    }

    async fn skip(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<Skipped, StoreError> {
        // The trigger `deliveries_next_in_order` queues the next of the key if this one was
        // queued.
        let status: Option<(i64, bool)> = sqlx::query_as(
            "WITH skipped AS (
                 UPDATE deliveries SET status = $3, next_attempt_at = NULL, updated_at = $4,
                     manual = false
                 WHERE message_id = $1 AND endpoint_id = $2 AND status = $5
                 RETURNING status)
             SELECT status::bigint, true FROM skipped
             UNION ALL
             SELECT status::bigint, false FROM deliveries
             WHERE message_id = $1 AND endpoint_id = $2 AND NOT EXISTS (SELECT FROM skipped)",
        )
        .bind(message.as_str())
        .bind(endpoint.as_str())
        .bind(i64::from(DeliveryStatus::Fail.code()))
        .bind(now.as_millis())
        .bind(i64::from(DeliveryStatus::Pending.code()))
        .fetch_optional(&self.pool)
        .await?;
        match status {
            Some((_, true)) => Ok(Skipped::Skipped),
            other => skip_refused(other.map(|(status, _)| status)),
        }
    }

    async fn heads_of(
        &self,
        keys: &[(EndpointId, String)],
    ) -> Result<HashMap<(EndpointId, String), MessageId>, StoreError> {
        let endpoints: Vec<&str> = keys.iter().map(|(e, _)| e.as_str()).collect();
        let ordering_keys: Vec<&str> = keys.iter().map(|(_, k)| k.as_str()).collect();
        let heads: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT h.endpoint_id, h.ordering_key, h.message_id
             FROM unnest($1::text[], $2::text[]) p(endpoint_id, ordering_key)
             JOIN deliveries h ON h.endpoint_id = p.endpoint_id COLLATE \"C\"
              AND h.ordering_key = p.ordering_key AND h.next_attempt_at IS NOT NULL",
        )
        .bind(endpoints)
        .bind(ordering_keys)
        .fetch_all(&self.pool)
        .await?;
        Ok(heads
            .into_iter()
            .map(|(endpoint, key, message)| {
                (
                    (EndpointId::from_stored(endpoint), key),
                    MessageId::from_stored(message),
                )
            })
            .collect())
    }

    async fn release_claims(
        &self,
        claimed: &[Delivery],
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        if claimed.is_empty() {
            return Ok(0);
        }
        let messages: Vec<&str> = claimed.iter().map(|d| d.message_id.as_str()).collect();
        let endpoints: Vec<&str> = claimed.iter().map(|d| d.endpoint_id.as_str()).collect();
        let leases: Vec<Option<i64>> = claimed
            .iter()
            .map(|d| d.next_attempt_at.map(Timestamp::as_millis))
            .collect();
        let done = sqlx::query(
            "UPDATE deliveries d SET status = $1, next_attempt_at = $2, updated_at = $2
             FROM UNNEST($3::text[], $4::text[], $5::bigint[]) AS c(message_id, endpoint_id, lease)
             WHERE d.message_id = c.message_id COLLATE \"C\"
               AND d.endpoint_id = c.endpoint_id COLLATE \"C\"
               AND d.status = $6 AND d.next_attempt_at = c.lease",
        )
        .bind(i64::from(DeliveryStatus::Pending.code()))
        .bind(now.as_millis())
        .bind(messages)
        .bind(endpoints)
        .bind(leases)
        .bind(i64::from(DeliveryStatus::Sending.code()))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}

/// A count as PostgreSQL binds it.
fn sql_count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

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
