//! [`GaugeStore`] on SQLite: one read on a reader connection.

use async_trait::async_trait;
use hookd_core::Timestamp;
use hookd_core::model::DeliveryStatus;
use rusqlite::params;

use super::SqliteStore;
use crate::store::age;
use crate::{GaugeStore, Gauges, StoreError};

/// The deliveries of enabled endpoints still to be attempted (walked through
/// `deliveries_endpoint_due`), disabled endpoints, and the oldest waiting outbox row (the
/// first of `outbox_waiting`), and the file's size.
const GAUGES: &str = "
    SELECT q.due, q.scheduled, q.in_flight, q.oldest,
           (SELECT COUNT(*) FROM endpoints WHERE disabled <> 0),
           (SELECT created_at FROM outbox WHERE error IS NULL ORDER BY id LIMIT 1),
           (SELECT c.page_count * s.page_size FROM pragma_page_count() c, pragma_page_size() s)
    FROM (
        SELECT COALESCE(SUM(d.next_attempt_at <= ?1), 0) AS due,
               COALESCE(SUM(d.next_attempt_at > ?1 AND d.status = ?2), 0) AS scheduled,
               COALESCE(SUM(d.next_attempt_at > ?1 AND d.status = ?3), 0) AS in_flight,
               MIN(d.next_attempt_at) AS oldest
        FROM endpoints e
        JOIN deliveries d ON d.endpoint_id = e.id AND d.next_attempt_at IS NOT NULL
        WHERE e.disabled = 0
    ) q";

#[async_trait]
impl GaugeStore for SqliteStore {
    async fn gauges(&self, now: Timestamp) -> Result<Gauges, StoreError> {
        self.db
            .read(move |conn| {
                let row = conn.prepare_cached(GAUGES)?.query_row(
                    params![
                        now.as_millis(),
                        DeliveryStatus::Pending.code(),
                        DeliveryStatus::Sending.code(),
                    ],
                    |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, i64>(1)?,
                            row.get::<_, i64>(2)?,
                            row.get::<_, Option<i64>>(3)?,
                            row.get::<_, i64>(4)?,
                            row.get::<_, Option<i64>>(5)?,
                            row.get::<_, i64>(6)?,
                        ))
                    },
                )?;
                let (due, scheduled, in_flight, oldest, disabled, outbox, bytes) = row;
                Ok(Gauges {
                    due: count(due),
                    scheduled: count(scheduled),
                    in_flight: count(in_flight),
                    oldest_due_age: age(now, oldest),
                    endpoints_disabled: count(disabled),
                    outbox_lag: age(now, outbox),
                    database_bytes: count(bytes),
                })
            })
            .await
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
