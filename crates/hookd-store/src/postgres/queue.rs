//! [`DeliveryQueue`] on PostgreSQL: each of the queue's jobs runs in its own file (`claim`,
//! `record`, `recover`); what is left here is short enough to stay inline.

use std::collections::{BTreeSet, HashMap};
use std::sync::Weak;

use async_trait::async_trait;
use hookd_core::model::{Delivery, DeliveryStatus, Message};
use hookd_core::{EndpointId, MessageId, Timestamp};
use sqlx::AssertSqlSafe;

use super::endpoints::require_endpoint;
use super::publish::insert_events;
use super::publisher::Taker;
use super::recover::{RECOVER, queue_next_in_order, resend_one};
use super::{PgStore, missing};
use crate::{
    AttemptRecord, ClaimRequest, ClaimedDelivery, DeliveryQueue, Handoff, HandoffMode, Recorded,
    Skipped, StoreError, skip_refused,
};

#[async_trait]
impl DeliveryQueue for PgStore {
    async fn claim_due(&self, request: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, StoreError> {
        self.claim(request).await
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
