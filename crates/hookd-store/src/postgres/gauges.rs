//! [`GaugeStore`] on PostgreSQL: one statement.

use async_trait::async_trait;
use hookd_core::Timestamp;
use hookd_core::model::DeliveryStatus;
use sqlx::Row;

use super::PgStore;
use crate::store::age;
use crate::{GaugeStore, Gauges, StoreError};

/// The deliveries of enabled endpoints still to be attempted (walked through
/// `deliveries_endpoint_due`), disabled endpoints, and the oldest waiting outbox row (the
/// first of `outbox_waiting`; its `created_at` is the producer's commit-time clock).
const GAUGES: &str = "
    SELECT q.due, q.scheduled, q.in_flight, q.oldest,
           (SELECT COUNT(*) FROM endpoints WHERE disabled),
           (SELECT (EXTRACT(EPOCH FROM created_at) * 1000)::bigint
            FROM outbox WHERE error IS NULL ORDER BY id LIMIT 1),
           (SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint
            FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace
              AND c.relkind = 'r')
    FROM (
        SELECT COUNT(*) FILTER (WHERE d.next_attempt_at <= $1) AS due,
               COUNT(*) FILTER (WHERE d.next_attempt_at > $1 AND d.status = $2) AS scheduled,
               COUNT(*) FILTER (WHERE d.next_attempt_at > $1 AND d.status = $3) AS in_flight,
               MIN(d.next_attempt_at) AS oldest
        FROM endpoints e
        JOIN deliveries d ON d.endpoint_id = e.id AND d.next_attempt_at IS NOT NULL
        WHERE NOT e.disabled
    ) q";

#[async_trait]
impl GaugeStore for PgStore {
    async fn gauges(&self, now: Timestamp) -> Result<Gauges, StoreError> {
        let row = sqlx::query(GAUGES)
            .bind(now.as_millis())
            .bind(i64::from(DeliveryStatus::Pending.code()))
            .bind(i64::from(DeliveryStatus::Sending.code()))
            .fetch_one(&self.pool)
            .await?;
        let count = |i: usize| -> Result<u64, StoreError> {
            Ok(u64::try_from(row.try_get::<i64, _>(i)?).unwrap_or(0))
        };
        Ok(Gauges {
            due: count(0)?,
            scheduled: count(1)?,
            in_flight: count(2)?,
            oldest_due_age: age(now, row.try_get(3)?),
            endpoints_disabled: count(4)?,
            outbox_lag: age(now, row.try_get(5)?),
            database_bytes: count(6)?,
        })
    }
}
